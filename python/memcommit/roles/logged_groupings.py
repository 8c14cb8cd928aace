"""Groupings kept in the log: a grouping's entries as entities, so that none is built at open.

An in-memory :class:`~memcommit.roles.groupings.Grouping` is built by reading and decoding
every entity of its kind, the first time a process asks for it: the first ``claim_next``
after an open read every run the store ever held. For the groupings a role declares with
:func:`~memcommit.roles.groupings.keep`, the log's medium instead writes one small entity per
grouped entity, in the same commit as the entity's state:

* kind ``KIND.NAME`` (``run.by_status``), key ``GROUP NUL RANK NUL KEY``, state ``{}``: the
  log's index keeps entity keys in order, so the keys under ``KIND.NAME NUL GROUP NUL`` are
  that group's entities in rank order (ints are written as 20 zero-padded digits, so they
  sort as numbers; a str rank sorts as it does in Python, ties broken by the entity's key);
* a marker, kind ``grouping``, key ``KIND.NAME``, written in the commit that first keeps the
  grouping (with the entries of every entity of the kind already there, read once, for a
  store written before the grouping was kept). Until a writer has written it, the grouping
  is built in memory as before, so a reader of an older store still gets correct answers.

A read walks the keys of the groups it asks for a page at a time (:class:`LoggedGrouping`):
its cost is what it walks, however many entities the store holds, from the first call after
an open on. Log compaction, snapshots, export and import carry the entries like any entity.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import InvalidType
from .groupings import KEPT, Grouper
from .medium import Change, State

if TYPE_CHECKING:
    from .. import _native

__all__ = ["MARKER", "LoggedGrouping", "entry_changes", "entry_key", "entry_kind", "kept_keys"]

MARKER = "grouping"
"""The kind of the markers: key ``KIND.NAME``, written once the grouping is kept."""

_SEP = "\x00"  # as the medium's: never in a kind, a key, a group or a str rank
_AFTER = "\x01"  # sorts after SEP: ``PREFIX RANK _AFTER`` follows every key of that rank

_FIRST_PAGE = 16
_LAST_PAGE = 4096


def entry_kind(kind: str, name: str) -> str:
    """The kind of grouping `name`'s entries (``run.by_status``): also its marker's key."""
    return f"{kind}.{name}"


_INT_RANKS = 10**20
"""An int rank is below this: 20 digits in an entry's key."""


def _rank_text(rank: Any) -> str:
    if isinstance(rank, str):
        return rank
    if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < _INT_RANKS:
        return f"{rank:020d}"
    raise InvalidType(f"a kept grouping ranks by str or non-negative int, not {rank!r}")


def entry_key(grouper: Grouper, key: str, state: State | None) -> str | None:
    """The key of the entry of entity `key` in `state` (None: deleted, or left out)."""
    placed = None if state is None else grouper(state)
    if placed is None:
        return None
    group, rank = placed
    if not isinstance(group, str):
        raise InvalidType(f"a kept grouping groups by str, not {group!r}")
    return group + _SEP + _rank_text(rank) + _SEP + key


def kept_keys(kind: str, key: str, state: State) -> list[str]:
    """The full keys of the entries the kept groupings of `kind` give entity `key` in `state`.

    What a store's log writes beside the entity (a role counts them in its keys' room).
    """
    out = []
    for name, grouper in KEPT.get(kind, {}).items():
        entry = entry_key(grouper, key, state)
        if entry is not None:
            out.append(entry_kind(kind, name) + _SEP + entry)
    return out


def entry_changes(
    kind: str,
    name: str,
    grouper: Grouper,
    changes: Iterable[Change],
    stored: Callable[[str], State | None],
    existing: Iterable[tuple[str, State]] | None,
) -> list[Change]:
    """The entry changes that keep grouping `name` of `kind` in step with `changes`.

    Args:
        kind: The grouped kind.
        name: The grouping's name.
        grouper: The grouping's ``(group, rank)`` of a state.
        changes: What one write changes (changes of other kinds are passed over).
        stored: ``stored(key)`` is the entity's state before `changes` (entries of it are in
            the log).
        existing: None when the grouping is kept already; otherwise every entity of the kind
            before `changes` (their entries and the marker are written now, once).
    """
    ekind = entry_kind(kind, name)
    out: list[Change] = []
    # The entry each touched entity has in the log now, and the one it gets.
    before: dict[str, str | None] = {}
    after: dict[str, str | None] = {}
    if existing is not None:
        # Kept from this write on: the log holds no entry yet, every entity gets one.
        after = {key: entry_key(grouper, key, state) for key, state in existing}
        out.append((MARKER, ekind, {"version": 1}))
    for ckind, key, state in changes:
        if ckind != kind:
            continue
        if existing is None and key not in before:
            before[key] = entry_key(grouper, key, stored(key))
        after[key] = entry_key(grouper, key, state)
    for key, new in after.items():
        old = before.get(key)
        if old != new:
            if old is not None:
                out.append((ekind, old, None))
            if new is not None:
                out.append((ekind, new, {}))
    return out


class LoggedGrouping:
    """A kept grouping, read from the log's index a page of keys at a time.

    Args:
        native: The store's engine.
        kind, name: The grouping.
    """

    def __init__(self, native: _native.NativeLog, kind: str, name: str) -> None:
        self._native = native
        self._base = entry_kind(kind, name) + _SEP

    def keys(self, groups: Iterable[str] | None = None, after: Any = None) -> Iterator[str]:
        """Yield the keys of the entities in `groups` (every group when None), by rank.

        With `after`, only those ranked above it: none when it is an int above every int
        rank an entry can have (as a caller's ``after_seq=10**20`` is). Read under the medium's
        lock, as a :class:`~memcommit.roles.groupings.Grouping` is.
        """
        if isinstance(after, int) and after >= _INT_RANKS:
            return iter(())
        chosen = list(self._groups()) if groups is None else list(groups)
        start = None if after is None else _rank_text(after) + _AFTER
        walks = [self._walk(group, start) for group in chosen]
        if len(walks) == 1:
            return (key for _, key in walks[0])
        return (key for _, key in heapq.merge(*walks))

    def _walk(self, group: str, start: str | None) -> Iterator[tuple[str, str]]:
        """``(RANK NUL KEY, KEY)`` of the entries of `group`, in order, from after `start`."""
        prefix = self._base + group + _SEP
        after = None if start is None else prefix + start
        size = _FIRST_PAGE
        cut = len(prefix)
        while True:
            page = self._native.entity_keys(prefix, after=after, limit=size)
            for full in page:
                rest = full[cut:]
                yield rest, rest[rest.index(_SEP) + 1 :]
            if len(page) < size:
                return
            after = page[-1]
            size = min(size * 4, _LAST_PAGE)

    def _groups(self) -> Iterator[str]:
        """Every group that has an entry, in key order (one read per group)."""
        after = None
        cut = len(self._base)
        while True:
            page = self._native.entity_keys(self._base, after=after, limit=1)
            if not page:
                return
            group = page[0][cut:].split(_SEP, 1)[0]
            yield group
            after = self._base + group + _AFTER
