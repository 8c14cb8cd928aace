"""Agent revisions: versioned agent definitions, drafted then published.

A draft can change until it is published. Publishing gives it the agent's next version
(1, 2, ... contiguous per agent) and makes it current; publishing always makes a new version,
even for a definition equal to the current one, and publishing an already published revision
returns it unchanged. ``set_current`` moves the current pointer back or forth. Runs pin a
``revision_id`` at creation, so publishing never changes what a running run uses.
"""

from __future__ import annotations

import builtins
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, get_args

from ..errors import InvalidValue
from ._base import RoleBase, writes
from .errors import (
    InvalidStateError,
    RevisionAlreadyExistsError,
    RevisionImmutableError,
    RevisionNotFoundError,
    VersionConflictError,
)
from .medium import (
    COUNTER,
    REVISION,
    REVISION_AGENT,
    WHAT,
    Change,
    KeyRoom,
    State,
    bump_counter,
    entity_key,
    full_key,
)
from .values import (
    Json,
    JsonIn,
    OptionalText,
    Text,
    check_count,
    check_text,
    checked,
    checksum,
    record_reader,
)

__all__ = [
    "MemoryAgentRevisionRepository",
    "Revision",
    "RevisionRepository",
    "RevisionStatus",
]

RevisionStatus = Literal["draft", "published", "archived"]
_STATUSES: frozenset[str] = frozenset(get_args(RevisionStatus))


@dataclass(frozen=True)
class Revision:
    """One revision of an agent's definition.

    Attributes:
        agent_id: The agent.
        revision_id: The revision's id.
        status: ``draft``, ``published`` or ``archived``.
        version: The version assigned at publish (1, 2, ... per agent), or None for a draft.
        definition: The definition (JSON).
        checksum: The sha256 of the definition's canonical JSON (key order does not matter).
        parent_revision_id: The revision it was derived from, or None.
        created_at_ms: When it was drafted.
        updated_at_ms: When it last changed.
        published_at_ms: When it was published, or None.
    """

    agent_id: str
    revision_id: str
    status: RevisionStatus
    version: int | None
    definition: Json
    checksum: str
    parent_revision_id: str | None
    created_at_ms: int
    updated_at_ms: int
    published_at_ms: int | None


class RevisionRepository(Protocol):
    """The ``agent_revisions`` role: versioned agent definitions."""

    def create_draft(
        self,
        agent_id: str,
        definition: Json,
        *,
        parent_revision_id: str | None = None,
        revision_id: str | None = None,
    ) -> Revision:
        """Create a draft.

        Raises:
            RevisionAlreadyExistsError: `revision_id` exists for the agent.
            RevisionNotFoundError: `parent_revision_id` does not exist for the agent.
        """
        ...

    def update_draft(
        self,
        agent_id: str,
        revision_id: str,
        definition: Json,
        *,
        expected_checksum: str | None = None,
    ) -> Revision:
        """Change a draft's definition.

        Raises:
            RevisionNotFoundError: No such revision.
            RevisionImmutableError: It is published or archived.
            VersionConflictError: `expected_checksum` is not the draft's checksum.
        """
        ...

    def publish(self, agent_id: str, revision_id: str) -> Revision:
        """Publish a draft as the agent's next version and make it current.

        Raises:
            RevisionNotFoundError: No such revision.
            InvalidStateError: It is archived.
        """
        ...

    def get(self, agent_id: str, revision_id: str) -> Revision | None:
        """Return the revision, or None."""
        ...

    def get_version(self, agent_id: str, version: int) -> Revision | None:
        """Return the revision published as `version`, or None."""
        ...

    def get_current(self, agent_id: str) -> Revision | None:
        """Return the current published revision, or None."""
        ...

    def set_current(self, agent_id: str, version: int) -> Revision:
        """Make the revision published as `version` current (a rollback or roll-forward).

        Raises:
            RevisionNotFoundError: No revision was published as `version`.
            InvalidStateError: That revision is archived.
        """
        ...

    def list(
        self, agent_id: str, *, status: RevisionStatus | None = None
    ) -> builtins.list[Revision]:
        """Return revisions: versioned ones by version descending, then drafts oldest first."""
        ...

    def archive(self, agent_id: str, revision_id: str) -> Revision:
        """Archive a revision (no longer publishable or current).

        Raises:
            RevisionNotFoundError: No such revision.
            InvalidStateError: It is the current revision.
        """
        ...


_revision = record_reader(Revision)

_SEQ = "revisions.seq"
"""The counter of each agent's revisions, in creation order."""
_VERSIONS = "revisions.version"
"""The counter of each agent's published versions."""

_KEYS = KeyRoom(
    WHAT[REVISION],
    lambda agent_id, revision_id: (
        full_key(REVISION, agent_id, revision_id),
        full_key(COUNTER, _SEQ, agent_id),
        full_key(COUNTER, _VERSIONS, agent_id),
        full_key(REVISION_AGENT, agent_id),
    ),
)
"""The keys of a revision: its own, its agent's counters and current-version pointer's."""


def _make_current(agent_id: str, version: int) -> Change:
    """Return the change that makes `version` the agent's current one (its pointer entity)."""
    pointer = {"agent_id": agent_id, "current_version": version}
    return (REVISION_AGENT, entity_key(agent_id), pointer)


class MemoryAgentRevisionRepository(RoleBase):
    """The in-memory ``agent_revisions`` role.

    Args:
        clock: Stamps times (default :class:`SystemClock`).
        medium: Where the entities live; a store passes the medium its roles share.
    """

    def _get(self, agent_id: str, revision_id: str) -> tuple[str, State]:
        key, state = self._read(REVISION, agent_id, revision_id)
        if state is None:
            raise RevisionNotFoundError(agent_id=agent_id, revision_id=revision_id)
        return key, state

    def _current_version(self, agent_id: str) -> int | None:
        agent = self._medium.get(REVISION_AGENT, entity_key(agent_id))
        return None if agent is None else agent["current_version"]

    def _by_version(self, agent_id: str, version: int) -> State | None:
        for state in self._states(REVISION, agent_id):
            if state["version"] == version:
                return state
        return None

    @writes
    @checked
    def create_draft(
        self,
        agent_id: Text,
        definition: JsonIn,
        *,
        parent_revision_id: OptionalText = None,
        revision_id: str | None = None,
    ) -> Revision:
        """Create a draft. See :meth:`RevisionRepository.create_draft`."""
        revision_id = (
            uuid.uuid4().hex if revision_id is None else check_text(revision_id, "revision_id")
        )
        _KEYS.check(agent_id=agent_id, revision_id=revision_id)
        key = entity_key(agent_id, revision_id)
        with self._medium.lock:
            now = self._now()
            if self._medium.get(REVISION, key) is not None:
                raise RevisionAlreadyExistsError(agent_id=agent_id, revision_id=revision_id)
            if parent_revision_id is not None:
                self._get(agent_id, parent_revision_id)
            seq, seq_change = bump_counter(self._medium, _SEQ, agent_id)
            new: State = {
                "agent_id": agent_id,
                "revision_id": revision_id,
                "status": "draft",
                "version": None,
                "definition": definition,
                "checksum": checksum(definition),
                "parent_revision_id": parent_revision_id,
                "created_seq": seq,
                "created_at_ms": now,
                "updated_at_ms": now,
                "published_at_ms": None,
            }
            return self._save(REVISION, key, new, _revision, seq_change)

    @writes
    @checked
    def update_draft(
        self,
        agent_id: Text,
        revision_id: Text,
        definition: JsonIn,
        *,
        expected_checksum: OptionalText = None,
    ) -> Revision:
        """Change a draft. See :meth:`RevisionRepository.update_draft`."""
        with self._medium.lock:
            now = self._now()
            key, state = self._get(agent_id, revision_id)
            if state["status"] != "draft":
                raise RevisionImmutableError(agent_id=agent_id, revision_id=revision_id)
            if expected_checksum is not None and expected_checksum != state["checksum"]:
                raise VersionConflictError(
                    what=f"draft {revision_id!r} of agent {agent_id!r}",
                    expected=expected_checksum,
                    actual=state["checksum"],
                )
            new = {
                **state,
                "definition": definition,
                "checksum": checksum(definition),
                "updated_at_ms": now,
            }
            return self._save(REVISION, key, new, _revision)

    @writes
    @checked
    def publish(self, agent_id: Text, revision_id: Text) -> Revision:
        """Publish a draft. See :meth:`RevisionRepository.publish`."""
        with self._medium.lock:
            now = self._now()
            key, state = self._get(agent_id, revision_id)
            if state["status"] == "published":
                return _revision(state)
            if state["status"] == "archived":
                raise InvalidStateError(current="archived", attempted="publish")
            version, version_change = bump_counter(self._medium, _VERSIONS, agent_id)
            new = {
                **state,
                "status": "published",
                "version": version,
                "updated_at_ms": now,
                "published_at_ms": now,
            }
            self._write([version_change, (REVISION, key, new), _make_current(agent_id, version)])
            return _revision(new)

    def get(self, agent_id: str, revision_id: str) -> Revision | None:
        """Return the revision, or None."""
        return self._lookup(
            REVISION,
            _revision,
            check_text(agent_id, "agent_id"),
            check_text(revision_id, "revision_id"),
        )

    @checked
    def get_version(self, agent_id: Text, version: int) -> Revision | None:
        """Return the revision published as `version`, or None."""
        version = check_count(version, "version", minimum=1)
        with self._medium.lock:
            state = self._by_version(agent_id, version)
            return None if state is None else _revision(state)

    @checked
    def get_current(self, agent_id: Text) -> Revision | None:
        """Return the current published revision, or None."""
        with self._medium.lock:
            current = self._current_version(agent_id)
            if current is None:
                return None
            state = self._by_version(agent_id, current)
            return None if state is None else _revision(state)

    @writes
    @checked
    def set_current(self, agent_id: Text, version: int) -> Revision:
        """Move the current pointer. See :meth:`RevisionRepository.set_current`."""
        version = check_count(version, "version", minimum=1)
        with self._medium.lock:
            state = self._by_version(agent_id, version)
            if state is None:
                raise RevisionNotFoundError(agent_id=agent_id, version=version)
            if state["status"] == "archived":
                raise InvalidStateError(current="archived", attempted="set_current")
            self._write([_make_current(agent_id, version)])
            return _revision(state)

    @checked
    def list(
        self, agent_id: Text, *, status: RevisionStatus | None = None
    ) -> builtins.list[Revision]:
        """Return the agent's revisions. See :meth:`RevisionRepository.list`."""
        if status is not None and status not in _STATUSES:
            raise InvalidValue(f"status: {status!r} is not one of {sorted(_STATUSES)}")
        states = self._states(REVISION, agent_id)
        if status is not None:
            states = [s for s in states if s["status"] == status]
        versioned = sorted(
            (s for s in states if s["version"] is not None), key=lambda s: -s["version"]
        )
        drafts = sorted((s for s in states if s["version"] is None), key=lambda s: s["created_seq"])
        return [_revision(s) for s in versioned + drafts]

    @writes
    @checked
    def archive(self, agent_id: Text, revision_id: Text) -> Revision:
        """Archive a revision. See :meth:`RevisionRepository.archive`."""
        with self._medium.lock:
            now = self._now()
            key, state = self._get(agent_id, revision_id)
            if state["status"] == "archived":
                return _revision(state)
            current = self._current_version(agent_id)
            if state["version"] is not None and state["version"] == current:
                raise InvalidStateError(
                    f"revision {revision_id!r} is agent {agent_id!r}'s current version "
                    f"{current}; make another version current first",
                    current=state["status"],
                    attempted="archive",
                )
            new = {**state, "status": "archived", "updated_at_ms": now}
            return self._save(REVISION, key, new, _revision)


if TYPE_CHECKING:
    _: type[RevisionRepository] = MemoryAgentRevisionRepository
