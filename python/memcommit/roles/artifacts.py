"""Artifacts: versioned blobs, named per owner.

An owner is a namespace (``("run", run_id)``, ``("agent", agent_id)``); a name may contain
``/`` and is never a prefix of another (``"doc"`` and ``"doc/nested"`` are unrelated). Each
save adds a version (1, 2, ...); a version number is never reused, not even after
:meth:`ArtifactRepository.delete` removed them all.
"""

from __future__ import annotations

import base64
import builtins
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..errors import InvalidValue
from ._base import RoleBase, check_version, writes
from .medium import (
    ARTIFACT,
    ARTIFACT_DATA,
    COUNTER,
    WHAT,
    Change,
    KeyRoom,
    State,
    StateTooLarge,
    bump_counter,
    child_prefix,
    entity_key,
    full_key,
    read_counter,
)
from .values import (
    Json,
    Namespace,
    check_bytes,
    check_metadata,
    check_namespace,
    check_optional_int,
    check_text,
    record_reader,
)

__all__ = ["Artifact", "ArtifactRepository", "ArtifactVersion", "MemoryArtifactRepository"]


@dataclass(frozen=True)
class ArtifactVersion:
    """What is known of one version of an artifact, without its bytes.

    Attributes:
        owner: The owning namespace.
        name: The artifact's name.
        version: 1, 2, ...; never reused.
        media_type: The media type given at save.
        size: The length of the bytes.
        sha256: The hex sha256 of the bytes.
        metadata: Free JSON metadata.
        created_at_ms: When it was saved.
    """

    owner: Namespace
    name: str
    version: int
    media_type: str
    size: int
    sha256: str
    metadata: dict[str, Json]
    created_at_ms: int


@dataclass(frozen=True)
class Artifact:
    """One version of an artifact with its bytes.

    Attributes:
        meta: The version's description.
        data: The bytes.
    """

    meta: ArtifactVersion
    data: bytes


class ArtifactRepository(Protocol):
    """The ``artifacts`` role: versioned blobs."""

    def save(
        self,
        owner: Namespace,
        name: str,
        data: bytes,
        *,
        media_type: str = "application/octet-stream",
        metadata: dict[str, Json] | None = None,
        expected_version: int | None = None,
    ) -> ArtifactVersion:
        """Save a new version.

        Args:
            owner: The owning namespace.
            name: The name.
            data: The bytes (a str is refused).
            media_type: The media type.
            metadata: A JSON object.
            expected_version: Save only if the latest version is this one (0: none exists).

        Raises:
            TypeError: `data` is not bytes.
            VersionConflictError: `expected_version` does not match; nothing was saved.
        """
        ...

    def load(self, owner: Namespace, name: str, *, version: int | None = None) -> Artifact | None:
        """Return a version (the latest when None) with its bytes, or None."""
        ...

    def head(
        self, owner: Namespace, name: str, *, version: int | None = None
    ) -> ArtifactVersion | None:
        """Return a version's description (the latest when None), or None."""
        ...

    def list_names(self, owner: Namespace) -> builtins.list[str]:
        """Return the owner's artifact names, sorted."""
        ...

    def list_versions(self, owner: Namespace, name: str) -> builtins.list[ArtifactVersion]:
        """Return the artifact's versions, ascending."""
        ...

    def delete(self, owner: Namespace, name: str) -> int:
        """Delete every version; return how many."""
        ...


_version = record_reader(ArtifactVersion)

_VERSIONS = "artifacts.version"
"""The counter of each artifact's last version."""

_KEYS = KeyRoom(
    WHAT[ARTIFACT_DATA],
    lambda owner, name: (
        full_key(ARTIFACT, owner, name, 0),  # a version is 20 digits in a key, whichever
        full_key(ARTIFACT_DATA, owner, name, 0),
        full_key(COUNTER, _VERSIONS, owner, name),
    ),
)
"""The keys of an artifact: each version's description and data, and its version counter."""


class MemoryArtifactRepository(RoleBase):
    """The in-memory ``artifacts`` role.

    Args:
        clock: Stamps save times (default :class:`SystemClock`).
        medium: Where the entities live; a store passes the medium its roles share.
    """

    def _versions(self, owner: Namespace, name: str) -> builtins.list[tuple[str, State]]:
        found = self._medium.scan(ARTIFACT, child_prefix(owner, name))
        found.sort(key=lambda item: int(item[1]["version"]))
        return found

    def _latest(self, owner: Namespace, name: str) -> State | None:
        # Versions go only all at once (delete), so the latest present one is the last handed
        # out, if it is still there.
        last = read_counter(self._medium, _VERSIONS, owner, name)
        if last == 0:
            return None
        return self._medium.get(ARTIFACT, entity_key(owner, name, last))

    @writes
    def save(
        self,
        owner: Namespace,
        name: str,
        data: bytes,
        *,
        media_type: str = "application/octet-stream",
        metadata: dict[str, Json] | None = None,
        expected_version: int | None = None,
    ) -> ArtifactVersion:
        """Save a new version. See :meth:`ArtifactRepository.save`."""
        ns = check_namespace(owner, "owner")
        name = check_text(name, "name")
        blob = check_bytes(data, "data")
        media_type = check_text(media_type, "media_type")
        meta = check_metadata(metadata)
        expected_version = check_optional_int(expected_version, "expected_version")
        _KEYS.check(owner=ns, name=name)
        digest = hashlib.sha256(blob).hexdigest()
        encoded = base64.b64encode(blob).decode("ascii")
        with self._medium.lock:
            now = self._now()
            if expected_version is not None:
                latest = self._latest(ns, name)
                check_version(expected_version, latest, f"artifact {name!r} of {ns!r}")
            version, version_change = bump_counter(self._medium, _VERSIONS, ns, name)
            key = entity_key(ns, name, version)
            new: State = {
                "owner": list(ns),
                "name": name,
                "version": version,
                "media_type": media_type,
                "size": len(blob),
                "sha256": digest,
                "metadata": meta,
                "created_at_ms": now,
            }
            self._write(
                [
                    version_change,
                    (ARTIFACT, key, new),
                    (ARTIFACT_DATA, key, {"data_b64": encoded}),
                ]
            )
            return _version(new)

    def _oversized(
        self, kind: str, state: State, name: str, size: int, room: int, refused: StateTooLarge
    ) -> InvalidValue:
        """Name `data` for its data entity, and the largest artifact: base64 takes 4 bytes per 3."""
        if kind != ARTIFACT_DATA:
            return super()._oversized(kind, state, name, size, room, refused)
        encoded = str(state["data_b64"])
        given = len(encoded) // 4 * 3 - encoded[-2:].count("=")
        largest = max(room - 2, 0) // 4 * 3  # the JSON string's quotes, then whole groups of 4
        return InvalidValue(
            f"data: {given} bytes is too large; an artifact's data is stored base64-encoded in "
            f"one record, so the largest artifact is {largest} bytes (about three quarters of "
            f"the store's max_record_bytes, {refused.max_record_bytes}): split it into several "
            "artifacts"
        )

    def _find(self, owner: object, name: object, version: object) -> tuple[str, State] | None:
        ns = check_namespace(owner, "owner")
        name = check_text(name, "name")
        wanted = check_optional_int(version, "version", minimum=1)
        if wanted is None:
            state = self._latest(ns, name)
            if state is None:
                return None
            return entity_key(ns, name, state["version"]), state
        key = entity_key(ns, name, wanted)
        state = self._medium.get(ARTIFACT, key)
        return None if state is None else (key, state)

    def load(self, owner: Namespace, name: str, *, version: int | None = None) -> Artifact | None:
        """Return a version with its bytes, or None. See :meth:`ArtifactRepository.load`."""
        with self._medium.lock:
            found = self._find(owner, name, version)
            if found is None:
                return None
            key, state = found
            blob = self._medium.get(ARTIFACT_DATA, key)
            assert blob is not None, f"artifact {key} has no data entity"
            return Artifact(meta=_version(state), data=base64.b64decode(blob["data_b64"]))

    def head(
        self, owner: Namespace, name: str, *, version: int | None = None
    ) -> ArtifactVersion | None:
        """Return a version's description, or None. See :meth:`ArtifactRepository.head`."""
        with self._medium.lock:
            found = self._find(owner, name, version)
            return None if found is None else _version(found[1])

    def list_names(self, owner: Namespace) -> builtins.list[str]:
        """Return the owner's artifact names, sorted."""
        ns = check_namespace(owner, "owner")
        return sorted({state["name"] for state in self._states(ARTIFACT, ns)})

    def list_versions(self, owner: Namespace, name: str) -> builtins.list[ArtifactVersion]:
        """Return the artifact's versions, ascending."""
        ns = check_namespace(owner, "owner")
        name = check_text(name, "name")
        with self._medium.lock:
            return [_version(state) for _, state in self._versions(ns, name)]

    @writes
    def delete(self, owner: Namespace, name: str) -> int:
        """Delete every version. See :meth:`ArtifactRepository.delete`."""
        ns = check_namespace(owner, "owner")
        name = check_text(name, "name")
        with self._medium.lock:
            changes: builtins.list[Change] = []
            for key, _ in self._versions(ns, name):
                changes.append((ARTIFACT, key, None))
                changes.append((ARTIFACT_DATA, key, None))
            return self._delete(changes) // 2


if TYPE_CHECKING:
    _: type[ArtifactRepository] = MemoryArtifactRepository
