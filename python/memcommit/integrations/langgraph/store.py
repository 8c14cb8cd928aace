"""A LangGraph long-term store (``BaseStore``) over a memcommit store's log.

Each item is one entity of the store's medium (:mod:`memcommit.roles.medium`), kind
``lg.item``, key ``[namespace, key]`` (so the items of a namespace, and of every namespace
under it, are one range of keys), state::

    namespace (list of str), key, value (a JSON object), created_at_us, updated_at_us,
    seq (the store-wide order of writes), ttl_minutes?, expires_at_us?, vectors?

Times are epoch microseconds, as LangGraph's in-memory and Postgres stores keep them (and as
the log's record times are), so two writes within one millisecond get distinct times. An item
written before times were microseconds has ``*_at_ms`` fields instead; it reads the same.

A :meth:`MemcommitStore.batch` is one critical section under the medium's lock: reads see the
store as it was before the batch (as ``InMemoryStore`` and ``SqliteStore`` do), then the
batch's puts and deletes (the last op for a namespace and key wins) and its TTL refreshes are
written together, atomically, as one commit (with a vector index, a commit of the batch's
vectors comes first: see below). A put keeps the item's ``created_at``. Times come from the
memcommit store's clock, in microseconds.

Behaviour, where LangGraph's stores differ, follows its SQL ones:

* search without a query (or without a vector index) returns the most recently written items
  first (``ORDER BY updated_at DESC``); equal times are ordered by write, so pages are stable;
* filters: see :mod:`memcommit.integrations.langgraph._common` (dotted paths, ``$eq $ne $gt
  $gte $lt $lte``; equality as ``InMemoryStore`` has it, ``True`` as ``1`` and a missing
  field as ``None``);
* TTL: an item with a TTL expires that many minutes after its last write or refreshing read;
  an expired item stays readable until :meth:`MemcommitStore.sweep_ttl` (or the sweeper thread)
  deletes it, unless the TTL configuration says ``omit_expired``. As in ``SqliteStore``, a read
  refreshes the TTLs of the items it returns only when the TTL configuration has
  ``refresh_on_read=True`` and the op's ``refresh_ttl`` is true (the default); such a read of
  an item with a TTL is a write (one commit), as it is an ``UPDATE`` in the SQL stores. On a
  store opened ``read_only`` a read refreshes nothing (it cannot write) and returns the same.

Semantic search (``MemcommitStore(store, index={"embed": ..., "dims": ..., "fields": [...]})``)
follows ``InMemoryStore``:

* a put embeds the texts at the index's ``fields`` (default ``["$"]``, the whole value as JSON)
  with LangGraph's ``get_text_at_path``; a path that yields several texts (``"tags[*]"``) gives
  one vector per text (paths ``"tags[*].0"``, ``"tags[*].1"``, ...), a missing field none. A
  put's ``index=False`` embeds nothing, ``index=[...]`` embeds those fields instead. Without
  an ``index`` configuration a put's ``index`` is ignored, and so is a search's ``query``;
* each embedded text is one memory of the memcommit store, kind ``lg.vector`` (see
  :data:`VECTOR`), its text the embedded text and its ``vector`` the embedding; its id is
  derived from the namespace, key and field path, its tags name every namespace prefix of the
  item, and its data holds ``namespace``, ``key``, ``path`` and ``seq``, the ``seq`` of the
  item's write that embedded it. The item's state lists the paths under ``vectors``;
* a search with a ``query`` embeds it (``embed_query``), ranks the vectors under the namespace
  prefix by cosine similarity in the core (kind and prefix tag filtered there), scores each
  item by its best vector (max over its fields), keeps the live items that pass the
  ``filter``, and returns them best first with ``SearchItem.score``; the items under the
  prefix that pass the filter but have no vector follow, most recently written first, with
  ``score=None``. ``offset`` and ``limit`` page over that one list (so, as in
  ``InMemoryStore``, items without a vector fill a page only when the scored items run out).
  A query the embedder makes a vector of zeros (which has no direction to rank by) scores
  each item with a vector 0.0, as ``InMemoryStore``'s cosine does, in its order: namespace
  by namespace, and within one in the order the items' vectors were first written;
* ``batch`` embeds with ``embed_documents``/``embed_query`` before taking the lock,
  ``abatch`` with ``aembed_documents``/``aembed_query``; a text repeated within a batch is
  embedded once. An embedder that returns a vector of another length than ``dims`` raises
  ``ValueError`` and nothing is written.

Writes and crashes: a batch that puts or deletes indexed items first writes one commit of
memories (the new vectors, each carrying the ``seq`` its item is about to get; the item's old
vectors that the write does not replace are marked stale), then the commit of the items.
What the item commit would refuse (an item too large for one record, a key too long) is
refused before the first commit, so a refused batch writes nothing. A vector counts for a
search only if its ``seq`` is its item's current ``seq``, so a vector commit whose item
commit never landed (a crash, a failed write) is never returned, and
neither is a vector superseded or left behind by any later write: the staling only keeps the
core's search from ranking vectors that no longer count. The same commit records the highest
``seq`` it carried (the memory :data:`VECTOR_SEQ`), and the next write's ``seq`` is above it,
so a ``seq`` that a lost item commit was to take is never given to another write. Such a
crash leaves the batch's items as they were, found without a score where their vectors were
replaced or staled, until they are written again. Deleting an item (a delete, or
:meth:`MemcommitStore.sweep_ttl`) stales its vectors the same way. The vectors' commit is a
commit of the store like any other, so with durability ``"commit"`` it waits for its fsync
while the batch holds the medium's lock (the item commit's wait comes after the lock is
released, shared with other writers' commits).

The ``lg.vector`` memories (and the one ``lg.vector.seq``) are memories of the store like any
other, in the working tier, stale once their item is deleted or rewritten without them:
``store.find`` and ``store.search`` list them unless asked for another kind, and
:func:`memcommit.tiers.context` leaves them out (``memcommit.tiers.INDEX_KINDS``). Every vector of a
memcommit store has one length, so the index's ``dims`` must be that of any other vectors the
store holds.

Values must be JSON: they are stored as their JSON text (a tuple becomes a list, a non-str key
a str, as with the SQL stores); NaN and infinities are refused with ``ValueError``, and so
are lone surrogates (in a value, a key or a namespace), which no UTF-8 text holds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import logging
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, NamedTuple, cast

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
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)

from ...errors import InvalidType, InvalidValue
from ...roles.medium import (
    COUNTER,
    Change,
    KeyRoom,
    State,
    StateTooLarge,
    entity_key,
    full_key,
    read_counter,
    state_bytes,
)
from ...roles.values import copy_json
from ._common import checked_text, compile_store_filter, medium_of, opened, writes_block

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from ..._native import Memory
    from ...store import Durability, MemoryStore

__all__ = ["ITEM", "SEQ_COUNTER", "VECTOR", "VECTOR_SEQ", "MemcommitStore", "vector_id"]

logger = logging.getLogger(__name__)

ITEM = "lg.item"
SEQ_COUNTER = "lg.store.seq"
"""The counter (kind ``counter``) behind each item's ``seq``: the order of writes."""
VECTOR = "lg.vector"
"""The kind of the memories that hold the items' vectors, one memory per embedded text."""
VECTOR_SEQ = "lg.vector.seq"
"""The id (and kind) of the memory whose data's ``seq`` is the highest a vector commit carried."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MINUTE_US = 60_000_000
_TIMES = ("created_at", "updated_at", "expires_at")
_MS_FIELDS = frozenset(f"{field}_ms" for field in _TIMES)
_MAX_KEY_BYTES = 1024
"""The longest id, tag or entity key the core takes, in bytes of UTF-8 (``check_key``)."""
_FIRST_K = 16
"""The fewest vectors a search with a query asks the core for at first."""

_ITEM_KEYS = KeyRoom("an item", lambda namespace, key: (full_key(ITEM, namespace, key),))
"""An item's key in the log, checked before a put (an error names the namespace or the key)."""
_TTL_FLAGS = ("refresh_on_read", "omit_expired")
"""The fields of a TTL configuration (``TTLConfig``) that are bools."""
_TTL_MINUTES = ("default_ttl", "sweep_interval_minutes")
"""The fields of a TTL configuration that are numbers of minutes (or None)."""


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
        InvalidValue: A label holds a lone surrogate.
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
        checked_text(label, "namespace")
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
        raise InvalidValue(f"Unsupported match type: {condition.match_type}")
    return all(p == "*" or n == p for n, p in pairs)


def _json_value(value: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A copy of an item's value, checked to be JSON; errors name the item (`where`)."""
    if not isinstance(value, Mapping):
        raise InvalidType(
            f"{where}: value must be a mapping (a JSON object), not {type(value).__name__}"
        )
    try:
        text = json.dumps(dict(value), ensure_ascii=False, allow_nan=False)
        copied = json.loads(text)
    except TypeError as e:
        raise InvalidType(f"{where}: value is not JSON: {e}") from None
    except ValueError as e:  # NaN or an infinity
        raise InvalidValue(f"{where}: value is not JSON: {e}") from None
    except RecursionError:
        raise InvalidValue(f"{where}: value is nested too deeply to store; flatten it") from None
    checked_text(text, f"{where}: value")
    assert isinstance(copied, dict)
    return copied


def _bounded(kind: str, parts: object) -> str:
    """``kind:`` and the JSON of `parts`, or ``kind#`` and a hash of it when that is too long.

    Ids and tags are at most 1,024 bytes, and so is an item's entity key: a vector's id (the
    item's namespace and key and a field path) may be longer. The two forms never meet (``:``
    against ``#``), and BLAKE2b-256 does not collide in practice.
    """
    body = json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
    text = f"{kind}:{body}"
    if len(text.encode()) <= _MAX_KEY_BYTES:
        return text
    return f"{kind}#{hashlib.blake2b(body.encode(), digest_size=32).hexdigest()}"


def vector_id(namespace: Sequence[str], key: str, path: str) -> str:
    """Return the id of the memory that holds the vector of field `path` of an item.

    One id per namespace, key and path, so a later write of the item replaces that memory.
    """
    return _bounded(VECTOR, [list(namespace), key, path])


def _namespace_tag(prefix: Sequence[str]) -> str:
    """The tag of the vectors of the items in `prefix` and in every namespace under it."""
    return _bounded("lg.ns", list(prefix))


def _tokenized(paths: Sequence[str]) -> list[tuple[str, str | list[str]]]:
    """Each field path with its tokens (``"$"``, the whole value, stays as it is)."""
    return [(path, path if path == "$" else tokenize_path(path)) for path in paths]


def _field_paths(value: object, what: str) -> list[str]:
    """`value` as a list of field paths.

    Raises:
        TypeError: `value` is not a list of str.
    """
    if not isinstance(value, (list, tuple)) or not all(isinstance(p, str) for p in value):
        raise InvalidType(f"{what} must be a list of field paths (str), not {value!r}")
    return list(value)


def _minutes(value: object, name: str, *, positive: bool = False) -> float | None:
    """`value`, a number of minutes or None, checked.

    Raises:
        InvalidType: `value` is not a number (nor None).
        InvalidValue: `value` is NaN, infinite or too large to count in microseconds, or (with
            `positive`) not above 0.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidType(f"{name} must be a number of minutes or None, not {value!r}")
    try:
        finite = math.isfinite(float(value) * _MINUTE_US)
    except OverflowError:  # an int too large for a float
        finite = False
    if not finite:
        raise InvalidValue(f"{name}: {value!r} is not a number of minutes the store can keep")
    if positive and value <= 0:
        raise InvalidValue(f"{name}: {value!r} minutes; pass a number above 0")
    return float(value)


def _ttl_config(ttl: object) -> TTLConfig | None:
    """`ttl`, LangGraph's TTL configuration, checked (a copy).

    Raises:
        InvalidType: `ttl` is not a dict, or a field is not of its type.
        InvalidValue: `ttl` has a field TTLConfig does not, or a number out of range.
    """
    if ttl is None:
        return None
    if not isinstance(ttl, dict):
        raise InvalidType(f"ttl must be a dict (TTLConfig) or None, not {type(ttl).__name__}")
    for field, value in ttl.items():
        if field in _TTL_FLAGS:
            if not isinstance(value, bool):
                raise InvalidType(f"ttl: {field} must be a bool, not {value!r}")
        elif field in _TTL_MINUTES:
            _minutes(value, f"ttl: {field}", positive=field == "sweep_interval_minutes")
        else:
            raise InvalidValue(
                f"ttl: {field!r} is not a field of TTLConfig; use "
                + ", ".join((*_TTL_FLAGS, *_TTL_MINUTES))
            )
    return cast(TTLConfig, dict(ttl))


@dataclass(frozen=True)
class _Put:
    """A put (or, `value` None, a delete) of a batch, checked, with the texts it embeds."""

    op: PutOp
    namespace: tuple[str, ...]
    value: dict[str, Any] | None
    texts: dict[str, str]
    """The texts to embed, by field path (empty without an index)."""
    ttl: float | None = None
    """The item's TTL in minutes, checked."""


@dataclass(frozen=True)
class _Plan:
    """A batch, checked, and what must be embedded before it runs."""

    ops: list[Op]
    puts: dict[str, _Put]
    """The last put of each item, by entity key."""
    texts: list[str]
    """The puts' texts, each once."""
    queries: list[str]
    """The searches' queries, each once (none without an index)."""


class _Vector(NamedTuple):
    """One vector memory to write."""

    id: str
    text: str
    vector: Sequence[float]
    data: dict[str, Any]
    tags: list[str]


@dataclass(frozen=True)
class _VectorWrites:
    """The commit of memories that comes before a commit of items."""

    vectors: list[_Vector]
    stale: list[str]
    """The ids of vectors that no longer count (their item was rewritten or deleted)."""
    seq: int = 0
    """The highest ``seq`` the vectors carry."""


class MemcommitStore(BaseStore):
    """A LangGraph ``BaseStore`` that keeps items in a memcommit store's log.

    A graph's long-term memory is then sealed, compacted and durable with the rest of the
    store. See the module docstring for the exact behaviour of search, filters, semantic
    search and TTL.

    Args:
        store: The memcommit store (``memcommit.open(path)``); this object does not close it.
        ttl: LangGraph's TTL configuration: ``default_ttl`` (minutes) for puts that do not
            say, ``refresh_on_read`` (reads refresh TTLs only when it is True), ``omit_expired``
            (default False) and
            ``sweep_interval_minutes`` for :meth:`start_ttl_sweeper`.
        index: LangGraph's index configuration, for semantic search: ``embed`` (a LangChain
            ``Embeddings``, a function from a list of texts to their vectors, sync or async,
            or a ``"provider:model"`` string), ``dims`` (the vectors' length, checked) and
            ``fields`` (the field paths to embed, default ``["$"]``, the whole value). None:
            no semantic search; a put's ``index`` and a search's ``query`` are ignored.

    Raises:
        TypeError: `store` is not a memcommit store, `index` or `ttl` is not a dict, the
            index's ``fields`` are not a list of str, or a field of `ttl` is not of its type.
        ValueError: `index` has no ``embed``, or its ``dims`` is not a positive int; `ttl`
            has a field TTLConfig does not, or a number of minutes that is NaN, infinite, or
            (``sweep_interval_minutes``) not above 0.
        NotSupported: `store` is a RemoteStore (its server keeps the roles' entities).

    Example:
        >>> import memcommit
        >>> long_term = MemcommitStore(memcommit.open(":memory:"))
        >>> long_term.put(("docs",), "a", {"kind": "note", "n": 1})
        >>> long_term.put(("docs",), "b", {"kind": "todo", "n": 2})
        >>> [item.key for item in long_term.search(("docs",), filter={"n": {"$gt": 1}})]
        ['b']

        Semantic search, with a toy embedder (how often "cat" and "dog" occur):

        >>> def embed(texts):
        ...     return [[t.count("cat") + 0.1, t.count("dog") + 0.1] for t in texts]
        >>> pets = MemcommitStore(
        ...     memcommit.open(":memory:"), index={"embed": embed, "dims": 2, "fields": ["text"]}
        ... )
        >>> pets.put(("pets",), "1", {"text": "a cat"})
        >>> pets.put(("pets",), "2", {"text": "a dog"})
        >>> pets.put(("pets",), "3", {"text": "a dog, unindexed"}, index=False)
        >>> found = pets.search(("pets",), query="dog")
        >>> [(item.key, item.score and round(item.score, 2)) for item in found]
        [('2', 1.0), ('1', 0.18), ('3', None)]
    """

    supports_ttl: bool = True

    def __init__(
        self,
        store: MemoryStore,
        *,
        ttl: TTLConfig | None = None,
        index: IndexConfig | None = None,
    ) -> None:
        self._medium = medium_of(store)
        self.store = store
        self.ttl_config = _ttl_config(ttl)
        self.index_config: IndexConfig | None = None
        self.embeddings: Embeddings | None = None
        self._dims: int | None = None
        self._fields: list[tuple[str, str | list[str]]] = []
        if index is not None:
            if not isinstance(index, dict):
                raise InvalidType(f"index must be a dict (IndexConfig), not {type(index).__name__}")
            dims = index.get("dims")
            if dims is not None and (
                isinstance(dims, bool) or not isinstance(dims, int) or dims < 1
            ):
                raise InvalidValue(f"index: dims must be a positive int, not {dims!r}")
            fields = index.get("fields")
            self._fields = _tokenized(
                ["$"] if not fields else _field_paths(fields, "index: fields")
            )
            self.embeddings = ensure_embeddings(index.get("embed"))
            self.index_config = index.copy()
            self._dims = dims
        config = self.ttl_config or {}
        self._omit = bool(config.get("omit_expired"))
        # As SqliteStore: a read refreshes only if the op asks and the configuration says so;
        # and never on a store opened read-only, which a read cannot write to.
        self._refreshes = bool(config.get("refresh_on_read")) and not store.read_only
        self._now_us = store.now_us
        self._thread_writes = writes_block(store)
        self._sweeper: threading.Thread | None = None
        self._stop_sweeper = threading.Event()

    @classmethod
    @contextmanager
    def from_path(
        cls,
        path: str,
        *,
        durability: Durability = "commit",
        ttl: TTLConfig | None = None,
        index: IndexConfig | None = None,
    ) -> Iterator[MemcommitStore]:
        """Open the memcommit store at `path` and yield a store over it; close it afterwards.

        Args:
            path: The log file (created if missing), or ``":memory:"``.
            durability: The store's durability mode (see :func:`memcommit.open`).
            ttl: The TTL configuration (see the class).
            index: The index configuration, for semantic search (see the class).

        Yields:
            The store.
        """
        with opened(path, durability) as store:
            yield cls(store, ttl=ttl, index=index)

    # -- batches -------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run `ops` as one critical section: their reads, then at most one commit of items.

        Reads (get, search, list_namespaces) see the store before the batch; puts and deletes
        (the last for each namespace and key wins) and TTL refreshes are then written
        together. With an index, the puts' texts and the searches' queries are embedded
        first, outside the lock, and a commit of the vectors comes before the items' (see the
        module docstring).

        Args:
            ops: ``GetOp``, ``SearchOp``, ``ListNamespacesOp`` and ``PutOp`` operations.

        Returns:
            One result per op, in order: an ``Item`` or None, a list of ``SearchItem``, a list
            of namespaces, None for a put.

        Raises:
            InvalidNamespaceError: A namespace label is not a non-empty str without "." or NUL;
                nothing was read or written.
            TypeError: A put's value is not a JSON object, or (with an index) its ``index`` is
                neither False, None nor a list of field paths; nothing was written.
            ValueError: A put's value holds NaN or an infinity; a put's namespace and key make
                an entity key over 1,024 bytes; an op is of no known type; or the embedder
                returned vectors of another count or length than asked. Nothing was written.
        """
        plan = self._plan(ops)
        documents: Sequence[Sequence[float]] = []
        queries: list[Sequence[float]] = []
        if self.embeddings is not None:
            if plan.texts:
                documents = self.embeddings.embed_documents(plan.texts)
            queries = [self.embeddings.embed_query(query) for query in plan.queries]
        return self._run(
            plan, self._embedded(plan.texts, documents), self._embedded(plan.queries, queries)
        )

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`: embeds with ``aembed_documents`` and ``aembed_query``.

        A batch that may wait for an fsync then runs in a worker thread.
        """
        plan = self._plan(ops)
        documents: Sequence[Sequence[float]] = []
        queries: Sequence[Sequence[float]] = []
        if self.embeddings is not None:
            if plan.texts:
                documents = await self.embeddings.aembed_documents(plan.texts)
            queries = await asyncio.gather(
                *(self.embeddings.aembed_query(query) for query in plan.queries)
            )
        vectors = self._embedded(plan.texts, documents)
        query_vectors = self._embedded(plan.queries, queries)
        if self._thread_writes and any(
            isinstance(op, PutOp)
            or (self._refreshes and isinstance(op, (GetOp, SearchOp)) and op.refresh_ttl)
            for op in plan.ops
        ):
            return await asyncio.to_thread(self._run, plan, vectors, query_vectors)
        return self._run(plan, vectors, query_vectors)

    def _plan(self, ops: Iterable[Op]) -> _Plan:
        """Check `ops` and find what they embed, before anything is read or written."""
        ops = list(ops)
        puts: dict[str, _Put] = {}
        queries: dict[str, None] = {}
        for op in ops:
            if isinstance(op, GetOp):
                _check_labels(op.namespace)
                checked_text(str(op.key), "key")
            elif isinstance(op, SearchOp):
                _check_labels(op.namespace_prefix)
                if op.query and self.embeddings is not None:
                    queries[op.query] = None
            elif isinstance(op, ListNamespacesOp):
                for condition in op.match_conditions or ():
                    _check_labels(condition.path, path=True)
            elif isinstance(op, PutOp):
                namespace = _check_labels(op.namespace)
                name = checked_text(str(op.key), "key")
                # The log refuses a longer entity key, but only at the item commit, after
                # the vectors' commit: refuse it before anything is written.
                _ITEM_KEYS.check(namespace=namespace, key=name)
                where = f"item {op.key!r} in namespace {namespace!r}"
                value = None if op.value is None else _json_value(op.value, where)
                ttl = _minutes(op.ttl, "ttl")
                key = entity_key(namespace, name)
                puts[key] = _Put(op, namespace, value, self._texts(op, value), ttl)
            else:
                raise InvalidValue(f"Unknown operation type: {type(op)}")
        texts = dict.fromkeys(text for put in puts.values() for text in put.texts.values())
        return _Plan(ops, puts, list(texts), list(queries))

    def _texts(self, op: PutOp, value: dict[str, Any] | None) -> dict[str, str]:
        """The texts a put embeds, by field path, as ``InMemoryStore`` finds them."""
        if self.embeddings is None or value is None or op.index is False:
            return {}
        fields = self._fields if op.index is None else _tokenized(_field_paths(op.index, "index"))
        texts: dict[str, str] = {}
        for path, tokens in fields:
            found = get_text_at_path(value, tokens)
            if len(found) == 1:
                texts[path] = found[0]
            else:
                texts.update((f"{path}.{i}", text) for i, text in enumerate(found))
        return texts

    def _embedded(
        self, texts: list[str], vectors: Sequence[Sequence[float]]
    ) -> dict[str, Sequence[float]]:
        """Each of `texts` with its vector, checked against the index's ``dims``.

        Raises:
            ValueError: The embedder returned another number of vectors than of texts, or a
                vector whose length is not ``dims``.
        """
        if len(vectors) != len(texts):
            raise InvalidValue(
                f"index: the embedder returned {len(vectors)} vectors for {len(texts)} texts"
            )
        if self._dims is not None:
            for vector in vectors:
                if len(vector) != self._dims:
                    raise InvalidValue(
                        f"index: the embedder returned a vector of {len(vector)} numbers; "
                        f"the index's dims is {self._dims}"
                    )
        return dict(zip(texts, vectors, strict=True))

    def _run(
        self,
        plan: _Plan,
        vectors: Mapping[str, Sequence[float]],
        queries: Mapping[str, Sequence[float]],
    ) -> list[Result]:
        """Run a checked batch, its texts and queries embedded, under the medium's lock."""
        ops, puts = plan.ops, plan.puts
        results: list[Any] = [None] * len(ops)
        omit, refreshing = self._omit, self._refreshes
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
                    query = queries.get(op.query) if op.query else None
                    found = self._search(op, now, omit, query)
                    results[i] = [(state, score) for _, state, score in found]
                    if refreshing and op.refresh_ttl:
                        for key, state, _ in found:
                            self._refresh(key, state, now, refreshed)
                elif isinstance(op, ListNamespacesOp):
                    results[i] = self._list_namespaces(op, now, omit)
            changes: list[Change] = [
                (ITEM, key, state) for key, state in refreshed.items() if key not in puts
            ]
            if puts:
                put_changes, writes = self._put_changes(puts, vectors, now)
                changes.extend(put_changes)
                if writes.vectors or writes.stale:
                    # The vectors first: an item commit never lands without the vectors it
                    # names. And what the item commit would refuse is refused before them.
                    self._check_items(changes, puts)
                    self._write_vectors(writes)
            if changes:
                self._write_items(changes, puts)
        for i, op in enumerate(ops):
            if isinstance(op, GetOp) and results[i] is not None:
                results[i] = self._item(results[i])
            elif isinstance(op, SearchOp):
                results[i] = [self._search_item(state, score) for state, score in results[i]]
        return results

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

    def _matching(self, op: SearchOp, now: int, omit: bool) -> list[tuple[str, State]]:
        """The items under the op's prefix that pass its filter, most recently written first."""
        found = self._medium.scan(ITEM, _range(tuple(op.namespace_prefix)))
        if omit:
            found = [(k, s) for k, s in found if self._alive(s, now)]
        if op.filter:
            matches = compile_store_filter(op.filter)
            found = [(k, s) for k, s in found if matches(s["value"])]
        found.sort(key=lambda item: -int(item[1]["seq"]))
        return found

    def _search(
        self, op: SearchOp, now: int, omit: bool, query: Sequence[float] | None
    ) -> list[tuple[str, State, float | None]]:
        """The page of items a search returns, each with its score (None without a query)."""
        end = op.offset + op.limit
        if query is None:
            return [
                (key, state, None) for key, state in self._matching(op, now, omit)[op.offset : end]
            ]
        scored, complete = self._scored(op, now, omit, query, max(end, 0))
        if not complete or len(scored) >= end:
            return scored[op.offset : end]
        # Every scored item is in hand: the items without a vector come after them.
        ranked = {key for key, _, _ in scored}
        rest = [(k, s, None) for k, s in self._matching(op, now, omit) if k not in ranked]
        return [*scored, *rest][op.offset : end]

    def _scored(
        self, op: SearchOp, now: int, omit: bool, query: Sequence[float], want: int
    ) -> tuple[list[tuple[str, State, float | None]], bool]:
        """The items under the op's prefix that pass its filter and have a vector that counts.

        Best first (an item's score is that of its best vector), at least `want` of them when
        there are as many: the core ranks the prefix's vectors, and is asked for four times as
        many each time the ones that count come short. A query of zeros has no direction to
        rank by (the core refuses it): as in ``InMemoryStore``, whose cosine with a zero
        vector is 0.0, every item with a vector then scores 0.0, in its order: namespace by
        namespace (each from when its first vector was written), and within one in the order
        the items' vectors were first written.

        Returns:
            The items with their scores, and whether they are all there are.
        """
        prefix = tuple(op.namespace_prefix)
        tags = [_namespace_tag(prefix)] if prefix else None
        matches = compile_store_filter(op.filter) if op.filter else None
        if not any(query):
            vectors = self.store.find(kind=VECTOR, tags=tags)  # in the order of their creation
            first: dict[str, int] = {}
            for memory in vectors:
                first.setdefault(str((memory.data or {}).get("namespace")), len(first))
            vectors.sort(key=lambda memory: first[str((memory.data or {}).get("namespace"))])
            return self._counted([(m, 0.0) for m in vectors], prefix, now, omit, matches), True
        k = max(2 * want, _FIRST_K)
        while True:
            hits = self.store.search(query, k=k, kind=VECTOR, tags=tags, mode="vector")
            ranked = [(hit.memory, hit.score) for hit in hits]
            scored = self._counted(ranked, prefix, now, omit, matches)
            if len(hits) < k or len(scored) >= want:
                return scored, len(hits) < k
            k *= 4

    def _counted(
        self,
        ranked: list[tuple[Memory, float]],
        prefix: tuple[str, ...],
        now: int,
        omit: bool,
        matches: Callable[[Mapping[str, Any]], bool] | None,
    ) -> list[tuple[str, State, float | None]]:
        """The items of the vector memories `ranked` (best first) with their best scores.

        Only the live items under `prefix` that pass the filter (`matches`), each once, and
        only for a vector that counts: one its item's current write embedded.
        """
        # Each item's state, or None when it is gone, expired (omitted) or filtered out.
        items: dict[str, State | None] = {}
        scored: list[tuple[str, State, float | None]] = []
        for memory, score in ranked:
            data = memory.data or {}
            namespace, name = data.get("namespace"), data.get("key")
            if not isinstance(namespace, list) or not isinstance(name, str):
                continue  # not a vector this store wrote
            key = entity_key(tuple(namespace), name)
            if key not in items:
                state = self._medium.get(ITEM, key)
                if state is not None and (
                    tuple(state["namespace"][: len(prefix)]) != prefix
                    or (omit and not self._alive(state, now))
                    or (matches is not None and not matches(state["value"]))
                ):
                    state = None
                items[key] = state
            state = items[key]
            # A vector counts only if the item's current write embedded it.
            if state is None or state["seq"] != data.get("seq"):
                continue
            items[key] = None  # its best vector is in: the others rank lower
            scored.append((key, state, score))
        return scored

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
        self, puts: dict[str, _Put], vectors: Mapping[str, Sequence[float]], now: int
    ) -> tuple[list[Change], _VectorWrites]:
        """The item changes of the batch's puts and deletes, and the vector writes before them."""
        changes: list[Change] = []
        written: list[_Vector] = []
        stale: list[str] = []
        counter = read_counter(self._medium, SEQ_COUNTER)
        seq = max(counter, self._reserved_seq())
        for key, put in puts.items():
            old = self._medium.get(ITEM, key)
            old_paths: Sequence[str] = () if old is None else old.get("vectors", ())
            name = str(put.op.key)
            if put.value is None:
                if old is not None:
                    changes.append((ITEM, key, None))
                    stale.extend(vector_id(put.namespace, name, path) for path in old_paths)
                continue
            seq += 1
            ttl = put.ttl
            state: State = {
                "namespace": list(put.namespace),
                "key": name,
                "value": put.value,
                "created_at_us": now if old is None else _time(old, "created_at"),
                "updated_at_us": now,
                "seq": seq,
                "ttl_minutes": ttl,
                "expires_at_us": None if ttl is None else now + round(ttl * _MINUTE_US),
            }
            if put.texts:
                state["vectors"] = list(put.texts)
                tags = [_namespace_tag(put.namespace[:n]) for n in range(1, len(put.namespace) + 1)]
                for path, text in put.texts.items():
                    data = {"namespace": list(put.namespace), "key": name, "path": path, "seq": seq}
                    written.append(
                        _Vector(
                            vector_id(put.namespace, name, path), text, vectors[text], data, tags
                        )
                    )
            stale.extend(
                vector_id(put.namespace, name, path) for path in old_paths if path not in put.texts
            )
            changes.append((ITEM, key, state))
        if seq != counter:
            changes.append((COUNTER, entity_key(SEQ_COUNTER), {"value": seq}))
        return changes, _VectorWrites(written, stale, seq)

    def _check_items(self, changes: list[Change], puts: Mapping[str, _Put]) -> None:
        """Refuse now, before the vectors' commit, an item the item commit would refuse.

        Raises:
            InvalidValue: A put's item is too large for one record; the message names it.
        """
        most = self._medium.max_record_bytes - 1
        for kind, key, state in changes:
            if state is not None and (size := state_bytes(state)) > most:
                refused = StateTooLarge(kind, key, size, most + 1)
                raise _too_large(refused, puts) from None

    def _write_items(self, changes: list[Change], puts: Mapping[str, _Put]) -> None:
        """Write the item commit; a state too large is refused naming the put's item."""
        try:
            self._medium.write(changes)
        except StateTooLarge as refused:
            raise _too_large(refused, puts) from None

    def _reserved_seq(self) -> int:
        """The highest ``seq`` a vector commit carried (0 if none did)."""
        memory = self.store.engine.view().get(VECTOR_SEQ)
        data = None if memory is None else memory.data
        return int(data["seq"]) if data and isinstance(data.get("seq"), int) else 0

    def _write_vectors(self, writes: _VectorWrites) -> None:
        """Write the vectors, restore those that were stale and stale the rest, as one commit.

        The commit also records its highest ``seq`` (:data:`VECTOR_SEQ`): the next write's
        ``seq`` is above it even if the item commit after this one never lands. That memory
        carries one of the batch's vectors only so that a store with an embedder does not
        embed it.
        """
        ids = [vector.id for vector in writes.vectors] + writes.stale
        if not ids:
            return
        # Through the view: a vector that retention purged reads as None (get_many raises).
        current = dict(zip(ids, self.store.engine.view().get_many(ids), strict=True))
        stale = [
            id
            for id in dict.fromkeys(writes.stale)
            if (memory := current[id]) is not None and memory.status == "active"
        ]
        if not writes.vectors and not stale:
            return
        with self.store.commit() as c:
            for vector in writes.vectors:
                c.put(
                    vector.text,
                    kind=VECTOR,
                    id=vector.id,
                    data=vector.data,
                    tags=vector.tags,
                    vector=vector.vector,
                )
                memory = current[vector.id]
                if memory is not None and memory.status != "active":
                    c.restore(vector.id)  # a put keeps a memory's status
            for id in stale:
                c.stale(id)
            if writes.vectors:
                c.put(
                    "",
                    kind=VECTOR_SEQ,
                    id=VECTOR_SEQ,
                    data={"seq": writes.seq},
                    vector=writes.vectors[0].vector,
                )

    @staticmethod
    def _item(state: State) -> Item:
        return Item(**_item_fields(state))

    @staticmethod
    def _search_item(state: State, score: float | None) -> SearchItem:
        return SearchItem(**_item_fields(state), score=score)

    # -- TTL -----------------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Delete every item whose TTL has run out (one commit; their vectors' commit first).

        Returns:
            How many items were deleted.
        """
        with self._medium.lock:
            now = self._now_us()
            expired = [
                (key, state)
                for key, state in self._medium.scan(ITEM)
                if not self._alive(state, now)
            ]
            stale = [
                vector_id(state["namespace"], state["key"], path)
                for _, state in expired
                for path in state.get("vectors", ())
            ]
            self._write_vectors(_VectorWrites([], stale))
            if expired:
                self._medium.write([(ITEM, key, None) for key, _ in expired])
        return len(expired)

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


def _too_large(refused: StateTooLarge, puts: Mapping[str, _Put]) -> InvalidValue:
    """The error for a put whose item `refused` says is too large for one record."""
    put = puts.get(refused.key)
    if put is None:  # not a put's item (a TTL refresh of one stored as it is)
        return refused
    return InvalidValue(
        f"value: item {put.op.key!r} in namespace {put.namespace!r} would take {refused.size} "
        f"bytes as JSON with its fields; one record of the store holds at most "
        f"{refused.max_record_bytes - 1} (max_record_bytes is {refused.max_record_bytes}): "
        "store a smaller value, or open the store with a larger max_record_bytes"
    )


def _item_fields(state: State) -> dict[str, Any]:
    """An item's fields as LangGraph's ``Item`` (and ``SearchItem``) take them."""
    return {
        "namespace": tuple(state["namespace"]),
        "key": state["key"],
        "value": copy_json(state["value"]),
        "created_at": _when(_time(state, "created_at")),
        "updated_at": _when(_time(state, "updated_at")),
    }
