"""The roles' medium over a store's log: the same roles, durable.

Every :meth:`LogMedium.write` appends its batch of entity changes to the store's log as one
commit (``Entity`` records, key ``kind``, a NUL and ``key``, payload the state's JSON), so the
roles' state is sealed, compacted and snapshotted with the memories and survives reopen. The
log's index keeps each entity's newest record in key order; a read asks it for one entity or
for every entity under a key prefix, and keeps what it decoded in a cache, which each append
updates. Opening a store therefore reads no entity at all, however many the roles hold.

Durability without a convoy: a role operation holds the medium's lock from its first read to
its write. Waiting for the fsync inside that lock would serialise every operation behind the
previous one's fsync. Instead, the write only queues its commit and applies it to the cache;
the lock waits for the commit to be durable *after* it is released, when the outermost
``with medium.lock:`` exits, so operations of many threads share one fsync (group commit).
An operation that saw an earlier one's state returns only after its own commit is durable, and
its commit comes after the earlier one in the log, so nothing unacknowledged is ever relied on
by anything acknowledged.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from . import logged_groupings
from .groupings import KEPT, Grouper, Groupings, Ordered
from .logged_groupings import LoggedGrouping
from .medium import Change, State, StateTooLarge, state_json

if TYPE_CHECKING:
    from .. import _native

__all__ = ["DurableLock", "LogMedium"]

_SEP = "\x00"  # never in a kind or a key: the roles refuse "\x00" in every string


class DurableLock:
    """A re-entrant lock whose outermost release waits for the holder's commits.

    The wait comes after letting go, so others can go on while this thread waits.
    """

    def __init__(self, wait: Callable[[int], None]) -> None:
        self._lock = threading.RLock()
        self._local = threading.local()
        self._wait = wait

    def __enter__(self) -> DurableLock:
        self._lock.acquire()
        self._local.depth = getattr(self._local, "depth", 0) + 1
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._local.depth -= 1
        end = 0
        if self._local.depth == 0:
            end = getattr(self._local, "end", 0)
            self._local.end = 0
            self._local.stamp = None
        self._lock.release()
        if end:
            self._wait(end)

    @property
    def bare(self) -> threading.RLock:
        """The same lock without the wait for durability (to swap what it guards)."""
        return self._lock

    def acquire(self) -> bool:
        """Take the lock (like ``RLock.acquire``)."""
        self.__enter__()
        return True

    def release(self) -> None:
        """Let go of the lock; the outermost release waits for durability."""
        self.__exit__()

    def stamp(self, at_us: int) -> None:
        """Keep the time this thread's operation read, for its commit to record.

        Held until the outermost release: one operation, one reading of the clock.
        """
        if getattr(self._local, "depth", 0) > 0:
            self._local.stamp = at_us

    def stamped(self) -> int | None:
        """The time :meth:`stamp` kept for this thread's operation, if any."""
        return getattr(self._local, "stamp", None) if getattr(self._local, "depth", 0) else None

    def written(self, end: int) -> None:
        """A commit ending at log offset `end` was queued by this thread."""
        if getattr(self._local, "depth", 0) > 0:
            self._local.end = max(getattr(self._local, "end", 0), end)
        else:
            self._wait(end)


class LogMedium:
    """A :class:`~memcommit.roles.medium.Medium` whose writes are commits in a store's log.

    Args:
        native: The store's engine.
        now_us: The store's clock, in microseconds (the time each commit records).
        writable: Whether this process writes the log. A reader refuses every role write
            (:meth:`check_writable`), and builds in memory the groupings the log does not
            keep yet.
        lock: The lock to hold for each operation (default: one that waits for the log's
            durability at its outermost release); a store whose log is shared by many hosts
            gives one that also holds the database's lock (:mod:`memcommit.postgres`).
        refuse: What a reader's :meth:`check_writable` raises (default: the log's own
            refusal of a write); a store whose log is a copy of a database's names the store.
    """

    def __init__(
        self,
        native: _native.NativeLog,
        now_us: Callable[[], int],
        writable: bool = True,
        lock: DurableLock | None = None,
        refuse: Callable[[], None] | None = None,
    ) -> None:
        self._native = native
        self._writable = writable
        self._refuse = refuse
        self._now_us = now_us
        self._lock = lock if lock is not None else DurableLock(self._wait_durable)
        self._version = native.entity_version()
        # Decoded states by full key (None: known not to be live). Roles never mutate a state
        # they read, so the cache hands out what it holds.
        self._cache: dict[str, State | None] = {}
        self._groupings = Groupings()
        # The kept groupings (``KIND.NAME``) whose marker this medium has seen in the log.
        self._logged: set[str] = set()

    def _wait_durable(self, end: int) -> None:
        self._native.wait_durable(end)

    @property
    def lock(self) -> DurableLock:
        """The store's one re-entrant lock (waits for durability when released)."""
        return self._lock

    def now_ms(self) -> int:
        """Read the store's clock for a role's operation, in milliseconds.

        The reading is kept for the operation's commit to record (in microseconds), so an
        operation reads the clock once, as the roles promise.
        """
        at_us = self._now_us()
        self._lock.stamp(at_us)
        return at_us // 1000

    def check_writable(self) -> None:
        """Raise :class:`~memcommit.ReadOnlyStore` if this process opened the log read-only.

        Every role write calls it first, so that a read-only store refuses a write whether or
        not it would change anything. The refusal is the log's own, naming the store: that of
        an empty commit, which a read-only log refuses before anything else.
        """
        if not self._writable:
            if self._refuse is not None:
                self._refuse()
            self._native.write_entities(0, [])

    def rebind(self, native: _native.NativeLog) -> None:
        """Continue on `native` (the store reopened after log compaction)."""
        with self._lock.bare:
            self._native = native
            self.reload()

    def reload(self) -> None:
        """Forget what was read: the next reads go to the log."""
        with self._lock.bare:
            self._version = self._native.entity_version()
            self._cache = {}
            self._groupings.clear()
            self._logged = set()

    def refresh(self) -> None:
        """Forget what was read after a reader's refresh, if any entity record came with it."""
        if self._native.entity_version() != self._version:
            self.reload()

    def get(self, kind: str, key: str) -> State | None:
        """Return the state of ``(kind, key)``, or None.

        The log's index holds a commit as soon as it is appended, before it is durable (as it
        does for memories); after a failed write or fsync every read raises
        :class:`~memcommit.WriterFailed`, since memory may then hold what the disk does not.
        """
        self._native.check_not_failed()
        full_key = kind + _SEP + key
        try:
            return self._cache[full_key]
        except KeyError:
            pass
        # A miss reads the log and fills the cache under the lock, so that a write by another
        # thread cannot land between the two and be overwritten by the older state.
        with self._lock.bare:
            if full_key in self._cache:
                return self._cache[full_key]
            payload = self._native.entity(full_key)
            state = None if payload is None else _decode(payload)
            self._cache[full_key] = state
        return state

    def scan(self, kind: str, prefix: str = "") -> list[tuple[str, State]]:
        """Return ``(key, state)`` of the entities of `kind` whose key starts with `prefix`.

        The log's index gives the keys; only the states not in the cache are read.
        """
        self._native.check_not_failed()
        with self._lock.bare:  # as in get: no write lands between the reads and the cache
            cache = self._cache
            keys = self._native.entity_keys(kind + _SEP + prefix)
            missing = [full_key for full_key in keys if cache.get(full_key) is None]
            if missing:
                states = self._native.entities_of(missing)
                for full_key, payload in zip(missing, states, strict=True):
                    if payload is not None:
                        cache[full_key] = _decode(payload)
        start = len(kind) + 1
        out: list[tuple[str, State]] = []
        for full_key in keys:
            state = cache.get(full_key)
            if state is not None:
                out.append((full_key[start:], state))
        return out

    @property
    def max_record_bytes(self) -> int:
        """The log's largest record: a state's JSON may have one byte less."""
        return self._native.max_record_bytes

    def write(self, changes: Sequence[Change]) -> None:
        """Append `changes` as one commit, then apply them to the cache.

        Nothing is applied if the append fails. The caller's outermost release of
        :attr:`lock` waits for the commit to be durable.
        """
        if changes:
            self._append(changes, self._entry_changes(changes))

    def _append(self, changes: Sequence[Change], entries: Sequence[Change]) -> None:
        """Append `changes` and the grouping `entries` they make as one commit.

        The changes are applied to the cache; the entries are read from the log's index.

        Raises:
            StateTooLarge: A state's JSON is more than ``max_record_bytes - 1`` bytes (checked
                here, before the commit, as :class:`~memcommit.roles.medium.MemoryMedium` does).
        """
        written = [*changes, *entries]
        items: list[tuple[str, bytes | None]] = [
            (kind + _SEP + key, None if state is None else state_json(state).encode())
            for kind, key, state in written
        ]
        most = self._native.max_record_bytes - 1
        for (kind, key, _), (_, payload) in zip(written, items, strict=True):
            if payload is not None and len(payload) > most:
                raise StateTooLarge(kind, key, len(payload), most + 1)
        at_us = self._lock.stamped()
        end = self._native.write_entities(self._now_us() if at_us is None else at_us, items)
        cache, groupings = self._cache, self._groupings
        for (full_key, _), (kind, key, state) in zip(items, changes, strict=False):
            cache[full_key] = state
            groupings.update(kind, key, state)
        for kind, key, _ in entries:
            if kind == logged_groupings.MARKER:
                self._logged.add(key)
        self._lock.written(end)

    def _entry_changes(self, changes: Sequence[Change]) -> list[Change]:
        """The entries of the kept groupings that `changes` add, move or remove.

        The first time a grouping is kept, also its marker and the entries of every entity
        already there. Under the lock.
        """
        out: list[Change] = []
        # In the order the changes first name the kinds: the same commit every time.
        for kind in dict.fromkeys(kind for kind, _, _ in changes if kind in KEPT):
            for name, grouper in KEPT[kind].items():
                existing = None if self._is_logged(kind, name) else self.scan(kind)
                out += logged_groupings.entry_changes(
                    kind, name, grouper, changes, functools.partial(self.get, kind), existing
                )
        return out

    def _is_logged(self, kind: str, name: str) -> bool:
        """Whether the log keeps grouping `name` of `kind` (its marker is there)."""
        marker = logged_groupings.entry_kind(kind, name)
        if marker not in self._logged:
            if self._native.entity(logged_groupings.MARKER + _SEP + marker) is None:
                return False
            self._logged.add(marker)
        return True

    def grouping(self, kind: str, name: str, grouper: Grouper) -> Ordered:
        """Return grouping `name` of `kind`, kept in step with :meth:`write`.

        A grouping the log keeps (:func:`~memcommit.roles.groupings.keep`, once a writer has
        written its marker) is read from the log's index. Any other is built by one scan the
        first time it is asked for after the medium last forgot what it read, then kept up to
        date by :meth:`write`.

        A writer of a store that holds entities of `kind` but no marker (written before the
        grouping was kept) writes the marker and their entries here, once. Where there is no
        entity of `kind` it writes nothing: the first write of the kind writes the marker
        (:meth:`_entry_changes`), so a read of a new store leaves its log as it was.
        """
        self._native.check_not_failed()
        with self._lock.bare:
            declared = KEPT.get(kind, {}).get(name)
            if declared is not None:
                if (
                    self._writable
                    and not self._is_logged(kind, name)
                    and self._native.entity_keys(kind + _SEP, limit=1)
                ):
                    # Entries by the grouper the log keeps them with (what every write uses).
                    entries = logged_groupings.entry_changes(
                        kind, name, declared, [], lambda key: None, self.scan(kind)
                    )
                    self._append([], entries)
                if self._is_logged(kind, name):
                    return LoggedGrouping(self._native, kind, name)
            return self._groupings.get(kind, name, grouper, lambda: self.scan(kind))

    def count(self, kind: str | None = None) -> int:
        """Return how many entities there are (of `kind`, or of every kind).

        Every kind's are the roles' entities: the entries and markers of kept groupings are
        not counted.
        """
        self._native.check_not_failed()
        if kind is not None:
            return self._native.entity_count(kind + _SEP)
        kept = [logged_groupings.MARKER] + [
            logged_groupings.entry_kind(k, name) for k, named in KEPT.items() for name in named
        ]
        count = self._native.entity_count
        return count("") - sum(count(k + _SEP) for k in kept)


def _decode(payload: bytes) -> State:
    state: State = json.loads(payload)
    return state
