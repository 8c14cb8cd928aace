"""The memory store: opening a log and reading and writing memories."""

from __future__ import annotations

import contextlib
import copy
import os
import pathlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ._native import Memory, Record
from .clock import Clock, SystemClock, microsecond_reader, millisecond_reader
from .commit import Commit, check_id, check_ids, check_u64
from .engine import MEMORY, Engine, LocalEngine
from .errors import (
    CorruptLog,
    InvalidType,
    InvalidValue,
    MemcommitError,
    NotSupported,
    Purged,
)
from .files import is_store_file, path_arg, replace_durably, temp_of_this_process
from .postgres.dsn import Target, is_connection_source, is_postgres_url
from .roles.roleset import ROLE_NAMES, Roles
from .seals import AutoSeal, Seal, attached_auto_seal, seals
from .search import Embedder, SearchHit, SearchMode, query_parts

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is 3.11+

__all__ = ["Durability", "MemoryStore", "create_memory_store", "open"]

Durability = Literal["commit", "batch", "none"]
_DURABILITIES = ("commit", "batch", "none")
_RECORD_BATCH = 4096


class MemoryStore(Roles):
    """A store of memories over one engine. Open one with :func:`memcommit.open`.

    A store is safe to share between threads: commits from many threads are serialised by the
    writer and, under ``durability="commit"``, share fsyncs. It is a context manager;
    :meth:`close` flushes and releases the file.

    It also carries the ten agent-runtime roles (``runs``, ``steps``, ``checkpoints``,
    ``idempotency``, ``locks``, ``effects``, ``state``, ``artifacts``, ``agent_revisions``,
    ``conversations``; see :mod:`memcommit.roles`), whose changes are commits in the same log:
    sealed with the memories and durable as the store's durability mode says. They share one
    lock and check runs against this store's own ``runs``; replacing ``runs`` on a
    ``copy.copy`` of the store leaves the others checking the original.

    Args:
        engine: What keeps the log (see :mod:`memcommit.engine`): :func:`memcommit.open`
            builds a local one, :class:`~memcommit.RemoteStore` a remote one.
        clock: The time source for records (default: the system clock, UTC).
        embed: The store's embedder: called with a list of texts, it returns one vector per
            text. Every put without a ``vector=`` gets its vector from it (one call per
            commit, before the writer lock is taken), and :meth:`search` embeds a string
            query with it.
    """

    def __init__(
        self, engine: Engine, *, clock: Clock | None = None, embed: Embedder | None = None
    ) -> None:
        _check_embed(embed)
        self._engine = engine
        self._embed = embed
        if embed is not None:
            engine.set_embedder(embed)
        self._clock: Clock = clock if clock is not None else SystemClock()
        # Read by its own now_us() when it has one (the system clock does): no datetime a read.
        self._clock_us = microsecond_reader(self._clock)
        # A put without a time is stamped by the engine: with the system clock (natively), or
        # with the engine's own clock, read inside the write (a database's: after the catch-up
        # that floors it at the store's newest record).
        own = getattr(engine, "clock", None)
        self._engine_stamps = (
            self._clock is own if own is not None else type(self._clock) is SystemClock
        )
        roles = engine.roles(self._clock, self.now_us)
        for name in ROLE_NAMES:
            setattr(self, name, getattr(roles, name))
        self.medium = roles.medium
        """Where the roles keep their entities (None when they run on a server)."""

    # -- the engine and its clock ---------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """The store's :class:`~memcommit.engine.Engine`: what keeps its log.

        A local engine keeps the native log, a file or RAM; a :class:`~memcommit.RemoteStore`'s
        engine reads its replica and sends what it writes to the server. It is the seam the
        modules built on the store (seals, log compaction, memory compaction, the server,
        import) use, instead of the store's private attributes.
        """
        return self._engine

    @property
    def capabilities(self) -> frozenset[str]:
        """What this store can do beyond reads and commits, by name.

        ``"file"``: a log file (snapshots, an index file, a read-only reader beside the
        writer); ``"compact"``: log compaction here, in this process; ``"seal"``: seals written
        by this store's writer or its server; ``"remote"``: a server runs the commits.
        """
        return self._engine.capabilities

    @property
    def auto_seal(self) -> AutoSeal | None:
        """The :class:`~memcommit.AutoSeal` sealing this store as it grows, or None."""
        return attached_auto_seal(self)

    def now_us(self) -> int:
        """The store's clock, in microseconds since the Unix epoch (what commits record)."""
        return self._clock_us()

    # -- writing -------------------------------------------------------------------------

    def commit(self, expect_lsn: int | None = None) -> Commit:
        """Start a commit: ``with store.commit(expect_lsn=head) as c: ...``.

        The commit is written when its ``with`` block ends without an exception, so it must
        be used as one: its methods raise :class:`RuntimeError` outside the block (a commit
        used without ``with`` would never be written, and the ids it handed out would never
        exist).

        Args:
            expect_lsn: Refuse the commit unless the store's newest LSN is this one.

        Returns:
            A :class:`Commit` to collect operations and guards on.

        Raises:
            TypeError: `expect_lsn` is not an int or None.
            ValueError: `expect_lsn` is negative or above 2**64 - 1.
        """
        if expect_lsn is not None:
            check_u64(expect_lsn, "expect_lsn")
        return self._engine.begin(expect_lsn, self.now_us)

    def put(
        self,
        text: str,
        *,
        kind: str = "note",
        id: str | None = None,
        task: str | None = None,
        tier: str = "working",
        data: Mapping[str, Any] | None = None,
        tags: Sequence[str] = (),
        sources: Sequence[str] = (),
        vector: Sequence[float] | None = None,
    ) -> str:
        """Create a memory, or replace the content of an existing id (tier and status stay).

        Args:
            text: The memory's text.
            kind: ``note`` (default), ``trace``, ``fact``, ``summary``, ``episode``,
                ``preference`` or any other kind.
            id: The id; generated (sortable by creation) when None.
            task: The task the memory belongs to.
            tier: The tier of a new memory: ``working`` (default), ``mid``, ``long``,
                ``archive``.
            data: A JSON object (dict) or None.
            tags: Tags.
            sources: Ids of the memories this one was derived from.
            vector: The memory's embedding (a sequence of finite numbers, stored as 32-bit
                floats), for :meth:`search`. Every vector of a store has the same length:
                the first one's. None: the store's embedder's, if it has one, else none (a
                put carries the memory's whole state, so a re-put without a vector leaves
                the memory without one).

        Returns:
            The memory's id.

        Raises:
            TypeError: An argument has the wrong type (the message names it).
            ValueError: An argument has a bad value (a vector of another length than the
                store's names the memory); nothing was written.
        """
        at = None if self._engine_stamps else self._clock_us()
        return self._engine.put(at, text, kind, id, task, tier, data, tags, sources, vector)

    def _one(self, c: Commit) -> int:
        assert c.lsn is not None
        return c.lsn

    def stale(self, id: str, reason: str | None = None) -> int:
        """Mark a memory stale. Returns the record's LSN.

        Raises:
            Rejected: The store has no memory `id`.
        """
        with self.commit() as c:
            c.stale(id, reason)
        return self._one(c)

    def restore(self, id: str) -> int:
        """Mark a stale memory active again. Returns the record's LSN.

        Raises:
            Rejected: The store has no memory `id`.
        """
        with self.commit() as c:
            c.restore(id)
        return self._one(c)

    def move(self, id: str, tier: str) -> int:
        """Move a memory to `tier`. Returns the record's LSN.

        Raises:
            Rejected: The store has no memory `id`.
            ValueError: `tier` is not a tier.
        """
        with self.commit() as c:
            c.move(id, tier)
        return self._one(c)

    def finish_task(self, task: str) -> int:
        """Mark a task finished. Returns the record's LSN."""
        with self.commit() as c:
            c.finish_task(task)
        return self._one(c)

    # -- reading -------------------------------------------------------------------------

    def get(self, id: str) -> Memory | None:
        """Return the memory `id`, or None if the store has none.

        Raises:
            Purged: Retention purged `id` during log compaction (see :meth:`manifest`).
        """
        m = self._engine.get(id)
        if m is None and self._engine.is_purged(id):
            raise _purged(id)
        return m

    def save_snapshot(self, path: str | os.PathLike[str]) -> None:
        """Write the store's state as JSON to `path`, atomically, to open from later.

        The snapshot holds the LSN, log generation and chain hash it was taken at, and the
        index (every memory's fields and where its records are; texts stay in the log), and
        ends with a checksum of every byte before it. ``memcommit.open(log, snapshot=path)``
        checks it, and every record it points to, then replays only the records after it.
        Written to a temp file beside `path`, fsynced, renamed over it, the directory fsynced
        (a temp file a killed save left beside `path` goes with the next save).
        Of a store in PostgreSQL: the state as this client last read it, pointing into the
        store's rows; ``memcommit.open(url, snapshot=path)`` reads the rows' bytes, checks the
        snapshot against them, and replays only the rows after it.

        Raises:
            NotSupported: The store is in RAM (a snapshot points into a log file).
            ValueError: `path` is the store's log or a file beside it (lock, index file,
                manifest), which the snapshot would replace.
        """
        target = path_arg(path, "path")
        log = self.path
        if log is not None and is_store_file(target, log):
            raise InvalidValue(
                f"path: {target} is the store {log} or a file of it; writing the snapshot "
                "there would replace it: give another file"
            )
        text = self._engine.snapshot_json()
        replace_durably(target, temp_of_this_process(target), text.encode("utf-8"))

    def is_purged(self, id: str) -> bool:
        """Whether log compaction purged memory `id` (see :mod:`memcommit.storage`).

        Raises:
            TypeError: `id` is not a str.
        """
        if not isinstance(id, str):
            raise InvalidType(f"id must be str, not {type(id).__name__}")
        return self._engine.is_purged(id)

    def manifest(self) -> list[dict[str, Any]]:
        """The compaction manifest's entries, oldest first: one per log compaction.

        Each has its time, horizon, counts, purged ids and the old log's chain (see
        :mod:`memcommit.manifest`).
        """
        return copy.deepcopy(self._engine.manifest())

    def get_many(self, ids: Sequence[str]) -> list[Memory | None]:
        """Return the memories `ids` (None for each the store does not have), in one call.

        Raises:
            Purged: Retention purged one of `ids` during log compaction (as :meth:`get` does;
                the message names the first such id). :meth:`is_purged` tells which.
            TypeError: `ids` is a single str (wrap it in a list), or holds something not a str.
            ValueError: An id is empty.
        """
        ids = check_ids(ids)
        out = self._engine.get_many(ids)
        for id, m in zip(ids, out, strict=True):
            if m is None and self._engine.is_purged(id):
                raise _purged(id)
        return out

    def find(
        self,
        tier: str | None = None,
        kind: str | None = None,
        task: str | None = None,
        status: str | None = "active",
        tags: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Memory]:
        """Return the memories matching every given filter, in creation order.

        A filter given as None matches anything; `tags` matches memories carrying all of them.
        By default only active memories are returned: pass ``status=None`` for all.
        """
        return self._engine.view().find(tier, kind, task, status, tags, limit)

    def search(
        self,
        query: str | Sequence[float],
        *,
        k: int = 10,
        kind: str | None = None,
        tier: str | None = None,
        task: str | None = None,
        status: str | None = "active",
        tags: Sequence[str] | None = None,
        mode: SearchMode = "hybrid",
    ) -> list[SearchHit]:
        """Return the `k` memories that best match `query`, best first, with their scores.

        ``mode="vector"`` ranks by cosine similarity of the memories' vectors,
        ``"text"`` by BM25 over their texts, and ``"hybrid"`` (the default) by both, fused by
        reciprocal rank (see :mod:`memcommit.search`). The filters are those of :meth:`find`
        and are applied inside the search, so `k` memories come back whenever `k` match; by
        default only active ones. A memory without a vector is found by text only.

        Args:
            query: Words (embedded with the store's embedder for the vector ranking, if it
                has one), or a vector of the store's length.
            k: How many memories at most.
            kind: Only memories of this kind.
            tier: Only memories in this tier.
            task: Only memories of this task.
            status: Only memories with this status (default ``"active"``; None for any).
            tags: Only memories carrying all of these tags.
            mode: ``"hybrid"``, ``"vector"`` or ``"text"``.

        Returns:
            :class:`~memcommit.search.SearchHit` values (``hit.memory``, ``hit.score``).

        Raises:
            TypeError: An argument has the wrong type (the message names it).
            ValueError: An unknown mode or tier; a query vector of another length than the
                store's vectors; ``mode="vector"`` with words and no embedder.
        """
        if isinstance(k, bool) or not isinstance(k, int):
            raise InvalidType(f"k must be an int, not {type(k).__name__}")
        if k < 0:
            raise InvalidValue(f"k: must be 0 or more, got {k}")
        text, vector = query_parts(query, mode, self._embed)
        found = self._engine.view().search(mode, text, vector, k, tier, kind, task, status, tags)
        return [SearchHit(memory, score) for memory, score in found]

    def wait_for_vector_index(self) -> bool:
        """Have the approximate vector index ready for :meth:`search`, waiting for its build.

        A store with at least 50,000 vectors searches them through an approximate index (an
        HNSW graph; below that, the exact scan is fast enough). Its first vector search starts
        the build on a thread of its own, and searches are answered by the exact scan until
        the graph is ready, so nothing waits for it (about 12 s at 100,000 vectors and minutes
        at a million, on two cores). Call this to build it ahead, after a bulk load or when a
        server starts, and to wait until searches go through it. Commits and searches from
        other threads go on meanwhile.

        Returns:
            True once the graph is in place; False when the store has too few vectors to use
            one, or it could not be built (searches then stay exact).
        """
        return self._engine.view().wait_for_vector_index()

    @property
    def embedder(self) -> Embedder | None:
        """The store's embedder (``memcommit.open(path, embed=fn)``), or None."""
        return self._embed

    def history(self, id: str) -> list[Record]:
        """Return the records of memory `id` that are still in the log, oldest first."""
        return self._engine.view().history(check_id(id))

    def records(self, after: int = 0) -> Iterator[Record]:
        """Iterate over every record with an LSN above `after`, in LSN order.

        Raises:
            TypeError: `after` is not an int.
            ValueError: `after` is not an LSN (negative, or above 2**64 - 1).
        """
        return self._records(check_u64(after, "after"))

    def _records(self, after: int) -> Iterator[Record]:
        # Pages go on from a byte offset in the log; a log compaction (here, or one a reader's
        # refresh moved to) makes a new log where that offset means nothing, so a page read
        # across one is dropped and the iteration goes on in the new log from the last LSN it
        # gave (the kept records keep their LSNs).
        start = 0
        generation = self.generation
        while True:
            try:
                batch, start = self._engine.view().read_records(after, start, _RECORD_BATCH)
            except CorruptLog:
                if self.generation == generation:
                    raise
                batch = []  # the old offset read in the new log
            now = self.generation
            if now != generation:
                generation, start = now, 0
                continue
            yield from batch
            if len(batch) < _RECORD_BATCH:
                return
            after = batch[-1].lsn

    def is_task_finished(self, task: str) -> bool:
        """Return whether `task` was marked finished."""
        if not isinstance(task, str):
            raise InvalidType(f"task must be a str, not {type(task).__name__}")
        return self._engine.view().is_task_finished(task)

    @property
    def lsn(self) -> int:
        """The newest committed LSN (0 for an empty store).

        Raises:
            StoreClosed: The store is closed.
        """
        return self._engine.view().lsn

    def __len__(self) -> int:
        return len(self._engine.view())

    def __contains__(self, id: object) -> bool:
        return isinstance(id, str) and self._engine.view().contains(id)

    # -- the store as a whole ------------------------------------------------------------

    @property
    def path(self) -> str | None:
        """The log file, or None for an in-memory store (or a remote one)."""
        return self._engine.path

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only."""
        return bool(self._engine.info()["read_only"])

    @property
    def generation(self) -> int:
        """The log generation (0 until the log is first compacted)."""
        return int(self._engine.info()["generation"])

    @property
    def store_id(self) -> str:
        """The store's random id (hex), fixed at creation."""
        return str(self._engine.info()["store_id"])

    @property
    def recovered_bytes(self) -> int:
        """Bytes cut from the file's tail when this writer opened it.

        0 after a clean close. After a crash or kill -9 it counts a torn, never-acknowledged
        write and the zeros the writer had written ahead of its commits (up to 2 MiB of free
        space), which the next writer's open cuts: nothing acknowledged is ever cut.
        """
        return int(self._engine.info()["recovered_bytes"])

    @property
    def closed(self) -> bool:
        """Whether the store is closed."""
        return self._engine.closed

    def info(self) -> dict[str, Any]:
        """Facts about the store: path, records, lsn, bytes, generation, store_id, memories..."""
        return self._engine.info()

    def context(
        self, task: str | None = None, budget_chars: int = 4000, query: str | None = None
    ) -> list[Memory]:
        """The active memories an agent should read, within a budget of characters.

        Working memories first, then mid-term summaries, then long-term memories; never
        archived or stale ones. With a `query`, each tier's memories come most relevant first
        (:meth:`search`, hybrid), and those that match nothing of it after them. See
        :func:`memcommit.tiers.context`.
        """
        from .tiers import context

        return context(self, task=task, budget_chars=budget_chars, query=query)

    def lineage(self, id: str) -> list[Memory]:
        """What memory `id` was derived from, through ``sources``, recursively.

        Archived memories are included. See :func:`memcommit.lineage.lineage`.
        """
        from .lineage import lineage

        return lineage(self, id)

    def descendants(self, id: str) -> list[Memory]:
        """The memories derived from `id`, directly or through others.

        See :func:`memcommit.lineage.descendants`.
        """
        from .lineage import descendants

        return descendants(self, id)

    def seals(self) -> list[Seal]:
        """The seals of the current log generation, oldest first (see :mod:`memcommit.seals`)."""
        return seals(self)

    def refresh(self, wait: float = 0.0) -> int:
        """Apply what was committed since the last look (read-only stores, remote stores).

        Args:
            wait: Seconds to wait for a commit when there is none yet: a
                :class:`~memcommit.RemoteStore`'s long poll; 0 (the default, and the only
                value a local store takes) returns at once.

        Returns:
            How many records were applied (after a reader went on with a compacted log, or
            a remote store's resync: how many the new log holds).
        """
        return self._engine.refresh(wait)

    def flush(self) -> None:
        """Fsync every record written so far, whatever the durability mode."""
        self._engine.flush()

    def close(self) -> None:
        """Sync the log (in every durability mode) and release it. Safe to call twice.

        When it returns the file is released: its lock, and every descriptor of the log, its
        index file and any snapshot it was opened from are closed (the store object may live
        on; every later call raises :class:`~memcommit.StoreClosed`).
        """
        self._engine.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._engine.describe()}>"


def _purged(id: str) -> Purged:
    """The error for a read of `id`, which retention purged."""
    return Purged(
        f"memory {id!r} was purged by a retention policy during log compaction; "
        "store.manifest() lists when and why"
    )


def _check_embed(embed: object) -> None:
    """Refuse an `embed` that is neither None nor callable."""
    if embed is not None and not callable(embed):
        raise InvalidType(f"embed must be a callable, not {type(embed).__name__}")


def open(
    path: str | os.PathLike[str] | Any,
    *,
    store: str | None = None,
    schema: str | None = None,
    snapshot: str | os.PathLike[str] | None = None,
    clock: Clock | None = None,
    durability: Durability = "commit",
    read_only: bool = False,
    flush_interval_ms: int = 50,
    max_record_bytes: int = 16 * 1024 * 1024,
    embed: Embedder | None = None,
) -> MemoryStore:
    """Open the store in the log file `path` (created if missing), or ``":memory:"``.

    Args:
        path: The log file, or ``":memory:"`` for a store in RAM (not durable). A store in
            RAM keeps the same hash-chained log, in memory, so everything works on it,
            seals and :func:`~memcommit.seals.verify` included, except what needs a file:
            `snapshot`, `read_only`, :meth:`MemoryStore.save_snapshot` and log compaction
            raise :class:`NotSupported`. Or a store in PostgreSQL: a ``postgresql://`` URL
            (``?store=NAME&schema=NAME``), or a ``psycopg`` connection or connection pool
            (see :mod:`memcommit.postgres`).
        store: The store's name in the database, for a connection or pool (default
            ``default``); a URL names it with ``store=`` (or this, if the URL does not).
        schema: The PostgreSQL schema of memcommit's tables, likewise (default ``memcommit``).
        snapshot: A file written by :meth:`MemoryStore.save_snapshot`: restore the state it
            holds and replay only the records after it. Raises :class:`SnapshotMismatch` if it
            is not of this log (another store or generation, or another history), or was
            changed after it was written (its checksum, or a record it points to, disagrees
            with it), or predates snapshot checksums. A store in PostgreSQL takes one saved by
            a client of the same store.
        clock: The time source for records (default: the system clock, UTC).
        durability: ``"commit"`` (default): a commit returns once its records are on stable
            storage; concurrent commits share one fsync. ``"batch"``: fsync every
            `flush_interval_ms` and on flush/close; a crash of the machine may lose that
            window. ``"none"``: left to the OS; a crash of the process loses nothing written,
            a power loss may lose any suffix not yet flushed (never a hole).
        read_only: Open as a reader beside the writer; catch up with :meth:`MemoryStore.refresh`.
        flush_interval_ms: The ``"batch"`` timer.
        max_record_bytes: The largest record a commit may write (default 16 MiB).
        embed: An embedder: called with a list of texts, it returns one vector per text.
            Puts without a vector get theirs from it, and :meth:`MemoryStore.search` embeds a
            string query with it (see :class:`MemoryStore`).

    Raises:
        StoreLocked: Another writer has the file open.
        CorruptLog: A record inside the log is damaged (the message says where).
        NotSupported: `snapshot` or `read_only` for a store in RAM.
    """
    if durability not in _DURABILITIES:
        raise InvalidValue(f"durability: {durability!r} is not a mode; use commit, batch or none")
    for name, value in (
        ("flush_interval_ms", flush_interval_ms),
        ("max_record_bytes", max_record_bytes),
    ):
        if check_u64(value, name) == 0:
            raise InvalidValue(f"{name}: must be positive, got 0")
    for label, given in (("store", store), ("schema", schema)):
        if given is not None and not isinstance(given, str):
            raise InvalidType(f"{label} must be a str, not {type(given).__name__}")
    if not isinstance(read_only, bool):
        raise InvalidType(f"read_only must be a bool, not {type(read_only).__name__}")
    # Checked before anything is opened or created (the store checks them again).
    if clock is not None:
        millisecond_reader(clock)
    _check_embed(embed)
    if is_connection_source(path):
        from .postgres.dsn import of_source

        target = of_source(path, store, schema)
        return _open_postgres(
            target, snapshot, clock, durability, read_only, max_record_bytes, embed
        )
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidType(
            "path must be str or os.PathLike[str] (or a psycopg connection or pool), not "
            f"{type(path).__name__}"
        )
    fspath = path_arg(path, "path", 'a log file, or ":memory:"')
    if is_postgres_url(fspath):
        from .postgres.dsn import with_names

        target = with_names(fspath, store, schema)
        return _open_postgres(
            target, snapshot, clock, durability, read_only, max_record_bytes, embed
        )
    for label, given in (("store", store), ("schema", schema)):
        if given is not None:
            raise InvalidValue(
                f"{label}: {given!r}: only a store in PostgreSQL has a {label} name (open a "
                "postgresql:// URL, a psycopg connection or a pool)"
            )
    snapshot_path = None
    if snapshot is not None:
        snapshot_path = path_arg(snapshot, "snapshot")
        if fspath == MEMORY:
            raise NotSupported("snapshot: a store in RAM has no log to open a snapshot with")
    if fspath == MEMORY:
        if read_only:
            raise NotSupported(
                "read_only: a store in RAM has no log file for a reader to share with a "
                "writer; open a log file to read it beside its writer"
            )
        return MemoryStore(LocalEngine.memory(max_record_bytes), clock=clock, embed=embed)
    if os.path.islink(fspath):
        # A symbolic link opens the file it names, whose lock file, index file and manifest
        # those are, and which log compaction replaces (not the link).
        fspath = os.path.realpath(fspath)
    engine = LocalEngine.open(
        fspath, durability, read_only, flush_interval_ms, max_record_bytes, snapshot_path
    )
    try:
        return MemoryStore(engine, clock=clock, embed=embed)
    except BaseException:
        # Let go of the file and the writer lock now, not when the collector finds the cycle
        # the half-built store left: a second open must not find it locked.
        with contextlib.suppress(MemcommitError):
            engine.close()
        raise


def _open_postgres(
    target: Target,
    snapshot: str | os.PathLike[str] | None,
    clock: Clock | None,
    durability: Durability,
    read_only: bool,
    max_record_bytes: int,
    embed: Embedder | None,
) -> MemoryStore:
    """The store `target` names (see :mod:`memcommit.postgres`)."""
    from .postgres.engine import PostgresEngine

    if durability != "commit":
        raise InvalidValue(
            f"durability: {durability!r}: a store in PostgreSQL is durable at every commit "
            "(the database's own); leave durability at 'commit'"
        )
    given = None
    if snapshot is not None:
        name = path_arg(snapshot, "snapshot")
        given = (pathlib.Path(name).read_bytes(), name)
    engine = PostgresEngine(
        target, read_only=read_only, max_record_bytes=max_record_bytes, snapshot=given
    )
    try:
        # The database's clock unless told otherwise: one clock for every host of the store.
        return MemoryStore(engine, clock=engine.clock if clock is None else clock, embed=embed)
    except BaseException:
        with contextlib.suppress(MemcommitError):
            engine.close()
        raise


def create_memory_store(clock: Clock | None = None) -> MemoryStore:
    """Return a new in-memory store (the same as ``open(":memory:")``) using `clock`."""
    return open(MEMORY, clock=clock)
