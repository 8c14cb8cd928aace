"""Agent state: versioned key/value entries in namespaces.

A namespace is a tuple of labels, e.g. ``("agent", "a1", "user", "u7")``. Each entry has an
integer version (1 on creation, +1 per write) for optimistic concurrency: ``put`` and
``delete`` take ``expected_version`` (0 = must not exist). Versions are never reused: an entry
deleted and written again continues from its last version, so a writer still holding the old
version fails instead of overwriting a value it never saw.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ._base import RoleBase, check_version, writes
from .medium import COUNTER, STATE, WHAT, KeyRoom, State, bump_counter, full_key
from .values import (
    Json,
    Namespace,
    check_json,
    check_namespace,
    check_optional_int,
    check_optional_text,
    check_text,
    record_reader,
)

__all__ = ["AgentStateRepository", "MemoryStateRepository", "StateEntry"]


@dataclass(frozen=True)
class StateEntry:
    """One key's value in a namespace.

    Attributes:
        namespace: The namespace.
        key: The key.
        value: The value (JSON).
        version: 1 on creation, +1 per write; never reused for this namespace and key.
        updated_at_ms: When it was last written.
    """

    namespace: Namespace
    key: str
    value: Json
    version: int
    updated_at_ms: int


class AgentStateRepository(Protocol):
    """The ``state`` role: versioned key/value per namespace."""

    def get(self, namespace: Namespace, key: str) -> StateEntry | None:
        """Return the entry, or None."""
        ...

    def put(
        self, namespace: Namespace, key: str, value: Json, *, expected_version: int | None = None
    ) -> StateEntry:
        """Write the value.

        Args:
            namespace: The namespace.
            key: The key.
            value: A JSON value.
            expected_version: None: write unconditionally. 0: only if absent. n: only if the
                entry is at version n.

        Raises:
            VersionConflictError: `expected_version` does not match; nothing changed.
        """
        ...

    def delete(
        self, namespace: Namespace, key: str, *, expected_version: int | None = None
    ) -> bool:
        """Delete the entry; False if absent.

        Raises:
            VersionConflictError: `expected_version` does not match; nothing changed.
        """
        ...

    def list(
        self, namespace: Namespace, *, key_prefix: str | None = None, limit: int | None = None
    ) -> builtins.list[StateEntry]:
        """Return the entries of exactly `namespace`, sorted by key."""
        ...

    def list_namespaces(self, *, prefix: Namespace = ()) -> builtins.list[Namespace]:
        """Return the namespaces holding entries that start with `prefix`, sorted."""
        ...

    def delete_namespace(self, namespace: Namespace) -> int:
        """Delete every entry of exactly `namespace`; return how many."""
        ...


_entry = record_reader(StateEntry)

_VERSIONS = "state.version"
"""The counter of each entry's last version."""

_KEYS = KeyRoom(
    WHAT[STATE],
    lambda namespace, key: (
        full_key(STATE, namespace, key),
        full_key(COUNTER, _VERSIONS, namespace, key),
    ),
)
"""The keys of a state entry: its own and its version counter's."""


class MemoryStateRepository(RoleBase):
    """The in-memory ``state`` role.

    Args:
        clock: Stamps write times (default :class:`SystemClock`).
        medium: Where the entities live; a store passes the medium its roles share.
    """

    def get(self, namespace: Namespace, key: str) -> StateEntry | None:
        """Return the entry, or None."""
        return self._lookup(STATE, _entry, check_namespace(namespace), check_text(key, "key"))

    @writes
    def put(
        self, namespace: Namespace, key: str, value: Json, *, expected_version: int | None = None
    ) -> StateEntry:
        """Write the value. See :meth:`AgentStateRepository.put`."""
        ns = check_namespace(namespace)
        key = check_text(key, "key")
        value = check_json(value, "value")
        expected_version = check_optional_int(expected_version, "expected_version")
        _KEYS.check(namespace=ns, key=key)
        with self._medium.lock:
            now = self._now()
            ekey, state = self._read(STATE, ns, key)
            check_version(expected_version, state, f"state {key!r} in {ns!r}")
            version, version_change = bump_counter(self._medium, _VERSIONS, ns, key)
            new: State = {
                "namespace": list(ns),
                "key": key,
                "value": value,
                "version": version,
                "updated_at_ms": now,
            }
            return self._save(STATE, ekey, new, _entry, version_change)

    @writes
    def delete(
        self, namespace: Namespace, key: str, *, expected_version: int | None = None
    ) -> bool:
        """Delete the entry. See :meth:`AgentStateRepository.delete`."""
        ns = check_namespace(namespace)
        key = check_text(key, "key")
        expected_version = check_optional_int(expected_version, "expected_version")
        with self._medium.lock:
            ekey, state = self._read(STATE, ns, key)
            check_version(expected_version, state, f"state {key!r} in {ns!r}")
            if state is None:
                return False
            self._write([(STATE, ekey, None)])
            return True

    def list(
        self, namespace: Namespace, *, key_prefix: str | None = None, limit: int | None = None
    ) -> builtins.list[StateEntry]:
        """Return the entries of `namespace` by key. See :meth:`AgentStateRepository.list`."""
        ns = check_namespace(namespace)
        key_prefix = check_optional_text(key_prefix, "key_prefix", empty=True)
        limit = check_optional_int(limit, "limit")
        states = self._states(STATE, ns)
        states.sort(key=lambda s: str(s["key"]))
        if key_prefix:
            states = [s for s in states if s["key"].startswith(key_prefix)]
        if limit is not None:
            states = states[:limit]
        return [_entry(s) for s in states]

    def list_namespaces(self, *, prefix: Namespace = ()) -> builtins.list[Namespace]:
        """Return the namespaces in use under `prefix`, sorted."""
        pre = check_namespace(prefix, "prefix", empty=True)
        found = {tuple(state["namespace"]) for state in self._states(STATE)}
        return sorted(ns for ns in found if ns[: len(pre)] == pre)

    @writes
    def delete_namespace(self, namespace: Namespace) -> int:
        """Delete the namespace's entries. See :meth:`AgentStateRepository.delete_namespace`."""
        ns = check_namespace(namespace)
        with self._medium.lock:
            return self._delete(self._deletions(STATE, ns))


if TYPE_CHECKING:
    _: type[AgentStateRepository] = MemoryStateRepository
