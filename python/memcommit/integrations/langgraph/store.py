"""A LangGraph long-term store (``BaseStore``) over a memcommit store's log.

Each item is one entity of the store's medium (:mod:`memcommit.roles.medium`), kind
``lg.item``, key ``[namespace, key]`` (so the items of a namespace, and of every namespace
under it, are one range of keys), state::

    namespace (list of str), key, value (a JSON object), created_at_us, updated_at_us,
    seq (the store-wide order of writes), ttl_minutes?, expires_at_us?

Times are epoch microseconds, as LangGraph's in-memory and Postgres stores keep them (and as
the log's record times are), so two writes within one millisecond get distinct times. An item
written before times were microseconds has ``*_at_ms`` fields instead; it reads the same.

A :meth:`MemcommitStore.batch` is one critical section under the medium's lock and at most one
commit: reads see the store as it was before the batch (as ``InMemoryStore`` and
``SqliteStore`` do), then the batch's puts and deletes (the last op for a namespace and key
wins) and its TTL refreshes are written together, atomically. A put keeps the item's
``created_at``. Times come from the memcommit store's clock, in microseconds.

Behaviour, where LangGraph's stores differ, follows its SQL ones:

* search returns the most recently written items first (``ORDER BY updated_at DESC``); equal
  times are ordered by write, so pages are stable;
* filters: see :mod:`memcommit.integrations.langgraph._common` (JSON equality, dotted paths,
  ``$eq $ne $gt $gte $lt $lte``);
* ``query`` is ignored and ``index`` on a put is ignored: there is no vector index, and passing
  an ``index`` configuration to the constructor raises ``NotImplementedError``;
* TTL: an item with a TTL expires that many minutes after its last write or refreshing read;
  an expired item stays readable until :meth:`MemcommitStore.sweep_ttl` (or the sweeper thread)
  deletes it, unless the TTL configuration says ``omit_expired``. As in ``SqliteStore``, a read
  refreshes the TTLs of the items it returns only when the TTL configuration has
  ``refresh_on_read=True`` and the op's ``refresh_ttl`` is true (the default); such a read of
  an item with a TTL is a write (one commit), as it is an ``UPDATE`` in the SQL stores.

Values must be JSON: they are stored as their JSON text (a tuple becomes a list, a non-str key
a str, as with the SQL stores); NaN and infinities are refused with ``ValueError``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from ...roles.medium import COUNTER, Change, State, entity_key, read_counter
from ...roles.values import copy_json
from ._common import compile_store_filter, medium_of, opened, writes_block

if TYPE_CHECKING:
    from ...store import Durability, MemoryStore

__all__ = ["ITEM", "SEQ_COUNTER", "MemcommitStore"]

logger = logging.getLogger(__name__)

ITEM = "lg.item"
SEQ_COUNTER = "lg.store.seq"
"""The counter (kind ``counter``) behind each item's ``seq``: the order of writes."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MINUTE_US = 60_000_000
_TIMES = ("created_at", "updated_at", "expires_at")
_MS_FIELDS = frozenset(f"{field}_ms" for field in _TIMES)


def _when(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def _at_us(state: State, field: str) -> int | None:
    """Return the time `field` (``"created_at"``...) of an item's state in epoch microseconds.

    An item written when times were milliseconds holds ``<field>_ms``: it is converted.
    """
    us = state.get(f"{field}_us")
    if us is not None:
        return int(us)
    ms = state.get(f"{field}_ms")
    return None if ms is None else int(ms) * 1000


def _time(state: State, field: str) -> int:
    """:func:`_at_us` of a time every item has (``created_at``, ``updated_at``)."""
    us = _at_us(state, field)
    assert us is not None, field
    return us


def _current(state: State) -> State:
    """Return `state` with its times as ``*_at_us`` fields (an older item's ``*_at_ms`` gone)."""
    if _MS_FIELDS.isdisjoint(state):
        return state
    fresh = {k: v for k, v in state.items() if k not in _MS_FIELDS}
    for field in _TIMES:
        fresh[f"{field}_us"] = _at_us(state, field)
    return fresh


def _check_labels(labels: object, *, path: bool = False) -> tuple[str, ...]:
    """Return `labels` as a tuple after LangGraph's label rules (``validate_op_namespace``).

    With `path` (a ``MatchCondition``'s path) a bare str is a sequence of one-character
    labels, as ``InMemoryStore`` and ``SqliteStore`` read it: ``MatchCondition("prefix",
    "pu")`` matches ``("p", "u", ...)``.

    Raises:
        InvalidNamespaceError: A label is not a str, is empty, or holds "." or a NUL.
    """
    if path and isinstance(labels, str):
        labels = tuple(labels)
    if not isinstance(labels, (tuple, list)):
        raise InvalidNamespaceError(f"Namespace {labels!r} must be a tuple of strings.")
    for label in labels:
        if not isinstance(label, str):
            raise InvalidNamespaceError(
                f"Invalid namespace label '{label}' found in {labels}. Namespace labels"
                f" must be strings, but got {type(label).__name__}."
            )
        if "." in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label '{label}' found in {labels}. Namespace labels"
                " cannot contain periods ('.')."
            )
        if "\x00" in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label '{label}' found in {labels}. Namespace labels"
                " cannot contain NUL bytes ('\\x00')."
            )
        if not label:
            raise InvalidNamespaceError(
                f"Namespace labels cannot be empty strings. Got {label} in {labels}"
            )
    return tuple(labels)


def _range(namespace_prefix: tuple[str, ...]) -> str:
    """Return the key prefix of every item in `namespace_prefix` or a namespace under it.

    ``entity_key(("a", "b"))`` is ``'[["a","b"]]'``; dropping the two closing brackets leaves
    ``'[["a","b"'``, which every key of ``("a", "b")`` and ``("a", "b", ...)`` starts with and
    no key of ``("a", "bc")`` does (the label's closing quote is part of the prefix).
    """
    return entity_key(namespace_prefix)[:-2]


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """``InMemoryStore``'s namespace match: ``*`` spans exactly one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(p == "*" or n == p for n, p in pairs)


def _json_value(value: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"value must be a mapping (a JSON object), not {type(value).__name__}")
    copied = json.loads(json.dumps(dict(value), ensure_ascii=False, allow_nan=False))
    assert isinstance(copied, dict)
    return copied


class MemcommitStore(BaseStore):
    """A LangGraph ``BaseStore`` that keeps items in a memcommit store's log.

    A graph's long-term memory is then sealed, compacted and durable with the rest of the
    store. See the module docstring for the exact behaviour of search, filters and TTL.

    Args:
        store: The memcommit store (``memcommit.open(path)``); this object does not close it.
        ttl: LangGraph's TTL configuration: ``default_ttl`` (minutes) for puts that do not
            say, ``refresh_on_read`` (reads refresh TTLs only when it is True), ``omit_expired``
            (default False) and
            ``sweep_interval_minutes`` for :meth:`start_ttl_sweeper`.
        index: Not supported (there is no vector index); anything but None raises.

    Raises:
        NotImplementedError: `index` was given: semantic search is not supported.

    Example:
        >>> import memcommit
        >>> long_term = MemcommitStore(memcommit.open(":memory:"))
        >>> long_term.put(("docs",), "a", {"kind": "note", "n": 1})
        >>> long_term.put(("docs",), "b", {"kind": "todo", "n": 2})
        >>> [item.key for item in long_term.search(("docs",), filter={"n": {"$gt": 1}})]
        ['b']
    """

    supports_ttl: bool = True

    def __init__(
        self,
        store: MemoryStore,
        *,
        ttl: TTLConfig | None = None,
        index: IndexConfig | None = None,
    ) -> None:
        if index is not None:
            raise NotImplementedError(
                "MemcommitStore has no vector index: semantic search (index=...) is not "
                "supported. Search by namespace and filter works without one."
            )
        self.store = store
        self.ttl_config = ttl
        self._medium = medium_of(store)
        self._now_us = store.now_us
        self._thread_writes = writes_block(store)
        self._sweeper: threading.Thread | None = None
        self._stop_sweeper = threading.Event()

    @classmethod
    @contextmanager
    def from_path(
        cls, path: str, *, durability: Durability = "commit", ttl: TTLConfig | None = None
    ) -> Iterator[MemcommitStore]:
        """Open the memcommit store at `path` and yield a store over it; close it afterwards.

        Args:
            path: The log file (created if missing), or ``":memory:"``.
            durability: The store's durability mode (see :func:`memcommit.open`).
            ttl: The TTL configuration (see the class).

        Yields:
            The store.
        """
        with opened(path, durability) as store:
            yield cls(store, ttl=ttl)

    # -- batches -------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run `ops` as one critical section and at most one commit.

        Reads (get, search, list_namespaces) see the store before the batch; puts and deletes
        (the last for each namespace and key wins) and TTL refreshes are then written
        together.

        Args:
            ops: ``GetOp``, ``SearchOp``, ``ListNamespacesOp`` and ``PutOp`` operations.

        Returns:
            One result per op, in order: an ``Item`` or None, a list of ``SearchItem``, a list
            of namespaces, None for a put.

        Raises:
            InvalidNamespaceError: A namespace label is not a non-empty str without "." or NUL;
                nothing was read or written.
            TypeError: A put's value is not a JSON object; nothing was written.
            ValueError: A put's value holds NaN or an infinity, or an op is of no known type;
                nothing was written.
        """
        ops = list(ops)
        puts: dict[str, tuple[PutOp, tuple[str, ...], dict[str, Any] | None]] = {}
        for op in ops:
            if isinstance(op, GetOp):
                _check_labels(op.namespace)
            elif isinstance(op, SearchOp):
                _check_labels(op.namespace_prefix)
            elif isinstance(op, ListNamespacesOp):
                for condition in op.match_conditions or ():
                    _check_labels(condition.path, path=True)
            elif isinstance(op, PutOp):
                namespace = _check_labels(op.namespace)
                key = str(op.key)
                value = None if op.value is None else _json_value(op.value)
                puts[entity_key(namespace, key)] = (op, namespace, value)
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        results: list[Any] = [None] * len(ops)
        omit = bool(self.ttl_config and self.ttl_config.get("omit_expired"))
        # As SqliteStore: a read refreshes only if the op asks and the configuration says so.
        refreshing = bool(self.ttl_config and self.ttl_config.get("refresh_on_read"))
        with self._medium.lock:
            now = self._now_us()
            refreshed: dict[str, State] = {}
            for i, op in enumerate(ops):
                if isinstance(op, GetOp):
                    key = entity_key(tuple(op.namespace), str(op.key))
                    state = self._medium.get(ITEM, key)
                    if state is not None and (not omit or self._alive(state, now)):
                        results[i] = state
                        if refreshing and op.refresh_ttl:
                            self._refresh(key, state, now, refreshed)
                elif isinstance(op, SearchOp):
                    found = self._search(op, now, omit)
                    results[i] = [state for _, state in found]
                    if refreshing and op.refresh_ttl:
                        for key, state in found:
                            self._refresh(key, state, now, refreshed)
                elif isinstance(op, ListNamespacesOp):
                    results[i] = self._list_namespaces(op, now, omit)
            changes: list[Change] = [
                (ITEM, key, state) for key, state in refreshed.items() if key not in puts
            ]
            if puts:
                changes.extend(self._put_changes(puts, now))
            if changes:
                self._medium.write(changes)
        for i, op in enumerate(ops):
            if isinstance(op, GetOp) and results[i] is not None:
                results[i] = self._item(results[i])
            elif isinstance(op, SearchOp):
                results[i] = [self._search_item(state) for state in results[i]]
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`; batches that may wait for an fsync run in a worker thread."""
        ops = list(ops)
        refreshing = bool(self.ttl_config and self.ttl_config.get("refresh_on_read"))
        if self._thread_writes and any(
            isinstance(op, PutOp)
            or (refreshing and isinstance(op, (GetOp, SearchOp)) and op.refresh_ttl)
            for op in ops
        ):
            return await asyncio.to_thread(self.batch, ops)
        return self.batch(ops)

    # -- the parts of a batch (under the medium's lock) ----------------------------------

    @staticmethod
    def _alive(state: State, now: int) -> bool:
        expires = _at_us(state, "expires_at")
        return expires is None or expires > now

    @staticmethod
    def _refresh(key: str, state: State, now: int, refreshed: dict[str, State]) -> None:
        ttl = state.get("ttl_minutes")
        if ttl is None:
            return
        expires = now + round(ttl * _MINUTE_US)
        if _at_us(state, "expires_at") != expires:
            refreshed[key] = {**_current(state), "expires_at_us": expires}

    def _search(self, op: SearchOp, now: int, omit: bool) -> list[tuple[str, State]]:
        found = self._medium.scan(ITEM, _range(tuple(op.namespace_prefix)))
        if omit:
            found = [(k, s) for k, s in found if self._alive(s, now)]
        if op.filter:
            matches = compile_store_filter(op.filter)
            found = [(k, s) for k, s in found if matches(s["value"])]
        found.sort(key=lambda item: -int(item[1]["seq"]))
        return found[op.offset : op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp, now: int, omit: bool) -> list[tuple[str, ...]]:
        conditions: Sequence[MatchCondition] = op.match_conditions or ()
        lead: tuple[str, ...] = ()
        for condition in conditions:
            if condition.match_type == "prefix":
                labels = []
                for label in condition.path:
                    if label == "*":
                        break
                    labels.append(label)
                if len(labels) > len(lead):
                    lead = tuple(labels)
        seen: set[tuple[str, ...]] = set()
        last: list[str] | None = None
        for _, state in self._medium.scan(ITEM, _range(lead) if lead else ""):
            if omit and not self._alive(state, now):
                continue
            labels_list = state["namespace"]
            if labels_list == last:
                continue
            last = labels_list
            seen.add(tuple(labels_list))
        namespaces = [ns for ns in seen if all(_does_match(c, ns) for c in conditions)]
        if op.max_depth is not None:
            namespaces = sorted({ns[: op.max_depth] for ns in namespaces})
        else:
            namespaces.sort()
        return namespaces[op.offset : op.offset + op.limit]

    def _put_changes(
        self,
        puts: dict[str, tuple[PutOp, tuple[str, ...], dict[str, Any] | None]],
        now: int,
    ) -> list[Change]:
        changes: list[Change] = []
        seq = read_counter(self._medium, SEQ_COUNTER)
        for key, (op, namespace, value) in puts.items():
            if value is None:
                if self._medium.get(ITEM, key) is not None:
                    changes.append((ITEM, key, None))
                continue
            old = self._medium.get(ITEM, key)
            seq += 1
            ttl = None if op.ttl is None else float(op.ttl)
            changes.append(
                (
                    ITEM,
                    key,
                    {
                        "namespace": list(namespace),
                        "key": str(op.key),
                        "value": value,
                        "created_at_us": now if old is None else _time(old, "created_at"),
                        "updated_at_us": now,
                        "seq": seq,
                        "ttl_minutes": ttl,
                        "expires_at_us": None if ttl is None else now + round(ttl * _MINUTE_US),
                    },
                )
            )
        if seq != read_counter(self._medium, SEQ_COUNTER):
            changes.append((COUNTER, entity_key(SEQ_COUNTER), {"value": seq}))
        return changes

    @staticmethod
    def _item(state: State) -> Item:
        return Item(**_item_fields(state))

    @staticmethod
    def _search_item(state: State) -> SearchItem:
        return SearchItem(**_item_fields(state))

    # -- TTL -----------------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Delete every item whose TTL has run out (one commit).

        Returns:
            How many items were deleted.
        """
        with self._medium.lock:
            now = self._now_us()
            changes: list[Change] = [
                (ITEM, key, None)
                for key, state in self._medium.scan(ITEM)
                if not self._alive(state, now)
            ]
            if changes:
                self._medium.write(changes)
        return len(changes)

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Start a daemon thread that calls :meth:`sweep_ttl` periodically.

        Args:
            sweep_interval_minutes: Minutes between sweeps (default: the TTL configuration's
                ``sweep_interval_minutes``, else 5).

        Returns:
            A future that completes when the sweeper stops (cancel it to stop the sweeper).
        """
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        if self._sweeper is not None and self._sweeper.is_alive():
            future.add_done_callback(lambda f: self._stop_sweeper.set() if f.cancelled() else None)
            return future
        configured = (self.ttl_config or {}).get("sweep_interval_minutes")
        interval_s = 60.0 * float(sweep_interval_minutes or configured or 5)
        self._stop_sweeper.clear()

        def sweep_loop() -> None:
            try:
                while not self._stop_sweeper.wait(interval_s):
                    try:
                        swept = self.sweep_ttl()
                        if swept:
                            logger.info("memcommit store: swept %d expired items", swept)
                    except Exception:
                        logger.exception("memcommit store: TTL sweep failed")
            finally:
                if not future.done():
                    future.set_result(None)

        thread = threading.Thread(target=sweep_loop, daemon=True, name="memcommit-ttl-sweeper")
        self._sweeper = thread
        future.add_done_callback(lambda f: self._stop_sweeper.set() if f.cancelled() else None)
        thread.start()
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread.

        Args:
            timeout: Seconds to wait for it to finish (None: as long as it takes).

        Returns:
            Whether it has stopped (True when none was running).
        """
        thread = self._sweeper
        if thread is None or not thread.is_alive():
            return True
        self._stop_sweeper.set()
        thread.join(timeout)
        stopped = not thread.is_alive()
        if stopped:
            self._sweeper = None
        return stopped


def _item_fields(state: State) -> dict[str, Any]:
    """An item's fields as LangGraph's ``Item`` (and ``SearchItem``) take them."""
    return {
        "namespace": tuple(state["namespace"]),
        "key": state["key"],
        "value": copy_json(state["value"]),
        "created_at": _when(_time(state, "created_at")),
        "updated_at": _when(_time(state, "updated_at")),
    }
