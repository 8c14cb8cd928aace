"""Groupings of one kind's entities, ordered within each group, kept in step with a medium.

A role that must find "the first entity such that ..." (the lowest-``seq`` claimable run)
would otherwise decode and test every entity of its kind on every call. A :class:`Grouping`
sorts a kind's entities into groups (a run's status) and orders each group by a rank (its
``seq``). It is built by one scan the first time a role asks for it, then updated by each
write the medium applies, and dropped when the medium forgets what it read (a reader's
refresh, a reopen after log compaction). A read then costs what it walks, not the kind's
size.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from .values import Json

__all__ = ["KEPT", "Grouper", "Grouping", "Groupings", "Ordered", "grouping_of", "keep"]

_State = dict[str, Json]

Grouper = Callable[[_State], "tuple[Hashable, Any] | None"]
"""Maps an entity's state to its ``(group, rank)``, or None to leave the entity out. Ranks
within a group must be comparable (ties are broken by the entity's key)."""


KEPT: dict[str, dict[str, Grouper]] = {}
"""The groupings a durable medium keeps in its log, by kind and name (see :func:`keep`)."""


def keep(kind: str, name: str, grouper: Grouper) -> None:
    """Declare grouping `name` of `kind` one that a durable medium keeps in its log.

    The log's medium then writes the grouping's entries with every write of the kind, so that
    reading it never needs every entity of the kind decoded
    (:mod:`~memcommit.roles.logged_groupings`). Its groups must be str and its ranks str or
    non-negative ints. A role declares it when its module is imported, before any write.
    """
    KEPT.setdefault(kind, {})[name] = grouper


class Ordered(Protocol):
    """What a role reads of a grouping: the keys of some groups, by rank."""

    def keys(self, groups: Iterable[Any] | None = None, after: Any = None) -> Iterator[str]:
        """Yield the keys of the entities in `groups` (every group when None), by rank."""
        ...


def _rank(entry: tuple[Any, str]) -> Any:
    return entry[0]


class Grouping:
    """The entities of one kind by group, each group in rank order (see the module docstring).

    Args:
        grouper: The state's ``(group, rank)``, or None.
        entities: ``(key, state)`` of every entity of the kind.
    """

    def __init__(self, grouper: Grouper, entities: Iterable[tuple[str, _State]]) -> None:
        self._grouper = grouper
        self._where: dict[str, tuple[Hashable, tuple[Any, str]]] = {}
        self._groups: dict[Hashable, list[tuple[Any, str]]] = {}
        for key, state in entities:
            placed = grouper(state)
            if placed is not None:
                group, rank = placed
                entry = (rank, key)
                self._where[key] = (group, entry)
                self._groups.setdefault(group, []).append(entry)
        for entries in self._groups.values():
            entries.sort()

    def update(self, key: str, state: _State | None) -> None:
        """Move entity `key` to where `state` puts it (None: it was deleted)."""
        placed = None if state is None else self._grouper(state)
        old = self._where.pop(key, None)
        if old is not None:
            group, entry = old
            if placed is not None and placed == (group, entry[0]):
                self._where[key] = old
                return
            entries = self._groups[group]
            del entries[bisect.bisect_left(entries, entry)]
        if placed is not None:
            group, rank = placed
            entry = (rank, key)
            self._where[key] = (group, entry)
            bisect.insort(self._groups.setdefault(group, []), entry)

    def keys(self, groups: Iterable[Hashable] | None = None, after: Any = None) -> Iterator[str]:
        """Yield the keys of the entities in `groups` (every group when None), by rank.

        With `after`, only those ranked above it. The caller holds the medium's lock while it
        iterates, and stops iterating once it writes.
        """
        chosen: Sequence[Hashable] = list(self._groups) if groups is None else list(groups)
        runs: list[Iterator[tuple[Any, str]]] = []
        for group in chosen:
            entries = self._groups.get(group)
            if entries:
                start = 0 if after is None else bisect.bisect_right(entries, after, key=_rank)
                runs.append(itertools.islice(entries, start, None))
        if len(runs) == 1:
            return (key for _, key in runs[0])
        return (key for _, key in heapq.merge(*runs))


class Groupings:
    """The groupings a medium keeps, by kind and name (see the module docstring)."""

    def __init__(self) -> None:
        self._by_kind: dict[str, dict[str, Grouping]] = {}

    def get(
        self,
        kind: str,
        name: str,
        grouper: Grouper,
        scan: Callable[[], Iterable[tuple[str, _State]]],
    ) -> Grouping:
        """Return grouping `name` of `kind`, building it from `scan` the first time."""
        named = self._by_kind.setdefault(kind, {})
        grouping = named.get(name)
        if grouping is None:
            grouping = named[name] = Grouping(grouper, scan())
        return grouping

    def update(self, kind: str, key: str, state: _State | None) -> None:
        """Apply one written change to every grouping of `kind`."""
        named = self._by_kind.get(kind)
        if named:
            for grouping in named.values():
                grouping.update(key, state)

    def clear(self) -> None:
        """Forget every grouping (the medium forgot what it read)."""
        self._by_kind.clear()


class _Scanning(Protocol):
    def scan(self, kind: str, prefix: str = "") -> list[tuple[str, _State]]: ...


def grouping_of(medium: _Scanning, kind: str, name: str, grouper: Grouper) -> Ordered:
    """Return the medium's grouping `name` of `kind`, or one built now if it keeps none.

    :class:`~memcommit.roles.medium.MemoryMedium` and the log's medium keep groupings (a
    method ``grouping(kind, name, grouper)``); on a medium without one this builds the
    grouping from a scan, which is correct at the cost of reading every entity of the kind.
    Call it and read the grouping under the medium's lock.
    """
    kept = getattr(medium, "grouping", None)
    if kept is None:
        return Grouping(grouper, medium.scan(kind))
    grouping: Ordered = kept(kind, name, grouper)
    return grouping
