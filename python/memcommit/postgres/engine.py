"""PostgresEngine: a store whose log lives in PostgreSQL, shared by every host that opens it.

Each client keeps a **follower**: a log in RAM with the store's header that applies the
database's records (the same Rust code that replays a log file checks and applies them) and
runs this client's own commits. A write happens inside a **section**:

1. ``BEGIN``, then ``pg_advisory_xact_lock`` on the store: one writer at a time, on every host;
2. the follower catches up with the records committed since it last looked (LSN order is
   commit order, since every commit was made under the same lock; the transaction is
   ``READ COMMITTED`` whatever the database's default, so its reads see every commit made
   before the lock was granted: :data:`.schema.BEGIN`);
3. the commit (or the role operation) runs on the follower, its guards checked against that
   state by the engine that checks them on a file: LSNs follow the head, gap-free;
4. its records' bytes are inserted as one row, with a commit id, and the transaction commits
   without waiting for the WAL flush (``SET LOCAL synchronous_commit = off``), which lets the
   lock go; the same query then flushes the WAL through it (``_FLUSH``), outside the lock, so
   the sections of many hosts share flushes, and the commit is acknowledged once durable.

If the insert or the ``COMMIT`` fails, the follower holds records the database does not: it is
rebuilt from the database, and the error raised. A ``COMMIT`` whose reply was lost is resolved,
not guessed: on a new connection, once the advisory lock is free (the old transaction has ended
one way or the other), the commit id is looked up; if the database cannot be asked,
:class:`~memcommit.CommitOutcomeUnknown` is raised.

Reads are the follower's: what this client committed, and what others committed up to its
last write or :meth:`refresh`. Nothing on the commit path keeps session state (no prepared
statements, no session-level ``SET``), so a pooler in transaction mode works.

Seals are written in a section like any commit (the store's lock makes their writer the only
one of the moment). **Log compaction** makes the new generation from the follower (the same
Rust code that compacts a log file, into RAM) without the store's lock, then takes it to add
the records committed meanwhile and a seal, and in one transaction swaps the store's partition
of the records table for the new generation's table (no dead rows are left behind), bumps the
store's generation and adds the manifest row (:meth:`PostgresEngine.compact`). Every catch-up
reads the store's generation with its rows, so a client whose follower is of an older
generation reads the new one (without the store's lock) and goes on. An
:class:`~memcommit.seals.AutoSeal` seals in the section whose commits make a seal due
(:meth:`PostgresEngine.set_auto_seal`). A **snapshot** (``store.save_snapshot``) holds the
follower's state; a client opened with it reads the store's rows as bytes, restores the state
from the snapshot after checking it against them, and replays only the rows after it.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn, cast

from .. import _native, ops
from .._extras import require
from ..clock import Clock, to_microseconds
from ..commit import Commit
from ..deferred import DeferredCommit
from ..engine import CompactionPlan, LocalEngine, SealTuple
from ..errors import (
    CommitOutcomeUnknown,
    CorruptLog,
    InvalidValue,
    NotSupported,
    ReadOnlyStore,
    Rejected,
    ServerError,
    ServerUnavailable,
)
from ..manifest import ManifestEntry
from ..roles.logmedium import DurableLock, LogMedium
from ..roles.roleset import Roles, RoleSet
from . import schema as schema_
from .clock import DatabaseClock
from .dsn import Target
from .metrics import Counters

__all__ = ["PostgresEngine"]

_CATCH_UP_ROWS = 1000  # rows read per query while catching up
_APPLY_BYTES = 1024 * 1024  # rows joined for one apply while catching up, about
# A section's COMMIT lets the store's lock go without waiting for the WAL flush, and the same
# query then flushes the WAL through it, outside the lock: a transactional WAL record (a
# logical-decoding message, prefix "memcommit") committed at the session's own
# synchronous_commit, so also at its synchronous standbys. So sections of many hosts share
# flushes (PostgreSQL's group commit) instead of taking turns at them, and a commit is
# acknowledged only once it is as durable as the database's own.
_EARLY_RELEASE = "SET LOCAL synchronous_commit = off"
_FLUSH = "SELECT pg_logical_emit_message(true, 'memcommit', '')"
_ROW_BYTES = 8 * 1024 * 1024  # the size of the rows log compaction writes, about
_HEADER_LEN = 64  # a log header's bytes (what a new generation's bytes start with)
_MAX_BATCH = 1000  # commits one section runs at most
_NOW_US = "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint"
_ONE_TRIP_BYTES = 32 * 1024
"""A section whose records are at most this many bytes ends in one round trip: its insert,
``COMMIT`` and ``NOTIFY`` sent as one query, the bytes bound by the client (larger ones are
sent as a binary parameter, then committed)."""
_RECHECK_SECONDS = 0.25  # refresh(wait=) on LISTEN reads the database at least this often
_POLL_SECONDS = 0.005  # and this often where LISTEN is not available


class _Section(DurableLock):
    """The store's one write lock.

    A process lock, and in its outermost hold a transaction holding the store's advisory lock
    (see the module docstring). The roles' medium uses it as its lock, so a role operation's
    reads and write happen in one section.
    """

    def __init__(self, engine: PostgresEngine) -> None:
        super().__init__(lambda end: None)
        self._engine = engine

    def __enter__(self) -> _Section:
        self._lock.acquire()
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            try:
                self._engine.begin_section()
            except BaseException:
                self._lock.release()
                raise
        self._local.depth = depth + 1
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._local.depth -= 1
        try:
            if self._local.depth == 0:
                self._local.stamp = None
                self._engine.end_section()
        finally:
            self._lock.release()


class _Diverged(Exception):
    """The follower holds records the database does not: it must be rebuilt."""


class _Replaced(_Diverged):
    """Log compaction replaced the store's records with a new generation: start again."""


class _Job:
    """One commit waiting to be run by the batch's leader (see :meth:`PostgresEngine.run_commit`).

    Its thread sleeps on `gate`, a lock used as a binary semaphore; whoever finishes it or
    makes it the leader releases the gate.
    """

    __slots__ = (
        "call",
        "done",
        "error",
        "expect_lsn",
        "gate",
        "lead",
        "now_us",
        "result",
        "value",
        "wire_ops",
    )

    def __init__(
        self,
        wire_ops: list[list[Any]],
        expect_lsn: int | None,
        now_us: Callable[[], int],
        call: Callable[[], Any] | None = None,
    ) -> None:
        self.wire_ops = wire_ops
        self.expect_lsn = expect_lsn
        self.now_us = now_us
        self.call = call  # instead of `wire_ops`: one call into the follower, its value kept
        self.value: Any = None
        self.result: tuple[int | None, int | None] = (None, None)
        self.error: BaseException | None = None
        self.done = False
        self.lead = False
        self.gate = threading.Lock()
        self.gate.acquire()

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # open already: the sleeper reads the news
            self.gate.release()


class _Timed:
    """The engine as one commit sees it: its operations run at the time `now_us` gives."""

    def __init__(self, engine: PostgresEngine, now_us: Callable[[], int]) -> None:
        self._engine = engine
        self._now_us = now_us
        self.scratch = engine.scratch
        self.embedder = engine.embedder

    def run_commit(
        self, wire_ops: list[list[Any]], expect_lsn: int | None
    ) -> tuple[int | None, int | None]:
        return self._engine.run_commit(wire_ops, expect_lsn, self._now_us)


class PostgresEngine:
    """The :class:`~memcommit.engine.Engine` of a store in PostgreSQL (module docstring).

    Args:
        target: The database, store and schema (:func:`memcommit.postgres.dsn.parse`).
        migrate: Create or upgrade memcommit's tables first (idempotent, under an advisory
            lock); False: refuse a database that needs it. None (the default): as the URL
            says (``migrate=false``), else True.
        read_only: Refuse every write (:class:`~memcommit.ReadOnlyStore`).
        max_record_bytes: The largest record a commit may write.
        connect_timeout: Seconds to wait for a connection.
        snapshot: A snapshot's text and the name of its file (``store.save_snapshot`` on a
            client of this store): the state is restored from it, and only the records after
            it are replayed.

    Raises:
        ServerUnavailable: The database cannot be reached (the message names the host and
            what to check).
        InvalidValue: The URL has a parameter libpq does not take (the message names it).
        NotSupported: `migrate` is False and the schema needs migrations.
        SnapshotMismatch: `snapshot` is not of this store and generation.
    """

    def __init__(
        self,
        target: Target,
        *,
        migrate: bool | None = None,
        read_only: bool = False,
        max_record_bytes: int = 16 * 1024 * 1024,
        connect_timeout: float = 10.0,
        snapshot: tuple[bytes, str] | None = None,
    ) -> None:
        require("postgres")
        self._target = target
        self._read_only = read_only
        self._max_record_bytes = max_record_bytes
        self._connect_timeout = connect_timeout
        self._lock_key = f"memcommit.store.{target.schema}.{target.store}"
        # One compaction of the store at a time: a key of its own kind, that no store's (nor
        # a schema's migration's) can be, whatever the store's name.
        self._compact_key = f"memcommit.compact.{target.schema}.{target.store}"
        schema = schema_.quoted(target.schema)
        self._records = f"{schema}.records"
        self._stores = f"{schema}.stores"
        # The store's lock, then the database's clock and the rows since the follower's head;
        # a section begins its transaction with it (READ COMMITTED: schema_.BEGIN).
        self._lock_sql = f"SELECT * FROM {schema}.section_begin(%s, %s, %s::bigint, %s::integer)"
        self._section_sql = f"{schema_.BEGIN}; {self._lock_sql}"
        self._manifest_table = f"{schema}.manifest"
        # The store's generation with each page of rows, read by one statement (one snapshot):
        # a page of a newer generation than the follower's is never applied to it.
        self._catch_up_sql = (
            f"SELECT s.generation, r.last_lsn, r.bytes FROM {self._stores} s LEFT JOIN LATERAL "
            f"(SELECT last_lsn, bytes FROM {self._records} WHERE store = s.name "
            "AND last_lsn >= %s ORDER BY last_lsn LIMIT %s) r ON true WHERE s.name = %s"
        )
        self._conn: Any = None
        self._closed = False
        # A connection given to open() is used first; a pool lends the connection (given back
        # at close, or when it fails).
        self._pool = target.source if hasattr(target.source, "getconn") else None
        self._given = None if self._pool is not None else target.source
        self._owners_settings: tuple[bool, int | None] | None = None  # restored at close
        # Keepalives and a TCP timeout, so a host cut off from the database gets an error in
        # seconds rather than waiting on a dead connection; the URL's own values win.
        from psycopg.conninfo import conninfo_to_dict

        try:
            given = set(conninfo_to_dict(target.conninfo)) | set(target.connect_kwargs)
        except self._pg.Error as e:  # a query parameter libpq does not take, say
            raise InvalidValue(
                f"{target.shown}: {str(e).strip()}; memcommit reads store, schema and migrate "
                "and gives every other query parameter to libpq, which takes only its own "
                "(sslmode, connect_timeout...)"
            ) from None
        self._link_options = {
            key: value
            for key, value in {
                "connect_timeout": max(1, int(connect_timeout)),
                "keepalives": 1,
                "keepalives_idle": 10,
                "keepalives_interval": 3,
                "keepalives_count": 3,
                "tcp_user_timeout": 20_000,
                "application_name": "memcommit",
            }.items()
            if key not in given
        }
        self._medium: LogMedium | None = None
        self._mark = 0  # the follower's LSN when the section began
        self._mark_end = _HEADER_LEN  # and where its bytes ended
        self._generation = 0  # the follower's generation
        self._auto_seal: tuple[int, bytes | None] | None = None  # every, key
        self._sealed_lsn = 0  # the newest seal record's LSN, as last looked up (0: look)
        self._manifest: tuple[int, list[ManifestEntry]] | None = None  # read for a generation
        # The follower may hold records the database does not (a failed insert or COMMIT whose
        # rebuild failed too): rebuilt before the next section or read of the database.
        self._suspect = False
        self.embedder: Callable[[list[str]], Sequence[Sequence[float]]] | None = None
        self.scratch = _native.NativeLog.memory()
        """A log in RAM that checks a commit's operations as they are made (never written)."""
        self._section = _Section(self)
        # refresh(wait=) sleeps on a LISTEN connection; a write wakes it with a NOTIFY sent
        # after its COMMIT (outside the write transaction; one per section, however many
        # commits the section carried).
        self._channel = "memcommit_" + hashlib.sha1(self._lock_key.encode()).hexdigest()[:40]
        self._notify_sql = f'NOTIFY "{self._channel}"'
        self._insert_sql = (
            f"INSERT INTO {self._records} (store, first_lsn, last_lsn, bytes, commit_id) "
            "VALUES (%s, %s, %s, %s, %s)"
        )
        self._listener: Any = None
        self.notifications = 0
        """NOTIFYs heard by :meth:`refresh` (a count, for tests and metrics)."""
        self.counters = Counters()
        """What this client counts (:func:`memcommit.postgres.metrics.metrics`)."""
        self._jobs: list[_Job] = []
        self._jobs_lock = threading.Lock()
        self._leading = False
        self.clock = DatabaseClock()
        """The database's clock, made monotonic per store (:mod:`.clock`): the store's
        default clock."""
        conn = self._connection()
        try:
            if not read_only:
                self._check_takes_writes(conn)
            if (target.migrate if migrate is None else migrate) and not read_only:
                schema_.migrate(conn, target.schema)
            elif schema_.pending(conn, target.schema):
                raise NotSupported(
                    f"{target.shown}: schema {target.schema} needs migrations; run "
                    f"'memcommit migrate URL' (or open it without migrate=false)"
                )
            if not read_only:
                self._check_may_flush(conn)
            self._follower = self._new_follower(snapshot)
            self._sample_clock(conn)
        except self._pg.Error as e:
            self._abandon()
            raise self._unavailable(e) from None
        except BaseException:
            self._abandon()
            raise
        self._local = LocalEngine(self._follower)

    # -- connections -----------------------------------------------------------------------

    @property
    def _pg(self) -> Any:
        import psycopg

        return psycopg

    @property
    def _sql(self) -> Any:
        from psycopg import sql

        return sql

    def _partition(self, generation: int) -> Any:
        """The table of the store's records of `generation`, as an identifier."""
        return self._sql.Identifier(
            self._target.schema, schema_.partition(self._target.store, generation)
        )

    def _connection(self) -> Any:
        """The open connection, made again (or borrowed from the pool again) if it was lost.

        In autocommit mode: a section opens its transaction itself, with ``BEGIN`` in the
        query that takes the lock (a round trip fewer than a driver's implicit ``BEGIN``).
        """
        if self._closed:
            from ..errors import StoreClosed

            raise StoreClosed(f"{self._target.shown}: this store is closed; open it again")
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        self._conn = None
        try:
            if self._given is not None and not self._given.closed and not self._given.broken:
                conn, self._given = self._given, None
            elif self._pool is not None:
                conn = self._pool.getconn(timeout=self._connect_timeout)
            else:
                conn = self._connect()
                self._conn = conn
                return conn
            # A connection made by the caller: the engine's own settings (see _connect), and
            # the caller's put back when it is given back.
            if conn.info.transaction_status != self._pg.pq.TransactionStatus.IDLE:
                if self._pool is None:  # the caller's own work: not ours to roll back
                    raise InvalidValue(
                        f"{self._target.shown}: the connection given is in a transaction; "
                        "commit or roll it back before opening a store on it"
                    )
                conn.rollback()
            self._owners_settings = (conn.autocommit, conn.prepare_threshold)
            conn.autocommit = True
            conn.prepare_threshold = None
        except self._pg.Error as e:
            raise self._unavailable(e) from None
        except Exception as e:  # the pool's own errors: a timeout, a closed pool
            if self._pool is None:
                raise
            raise self._unavailable(e) from None
        self._conn = conn
        return conn

    def _connect(self) -> Any:
        """A new connection to the database, in autocommit mode."""
        try:
            return self._pg.connect(
                self._target.conninfo,
                autocommit=True,
                prepare_threshold=None,  # no server-side state: poolers in transaction mode
                **{**self._target.connect_kwargs, **self._link_options},
            )
        except self._pg.Error as e:
            raise self._unavailable(e) from None

    def _give_back(self, conn: Any) -> None:
        """Put the caller's settings back on a connection of theirs (rolled back first)."""
        if self._owners_settings is not None and not conn.closed:
            with contextlib.suppress(self._pg.Error):
                conn.rollback()
                conn.autocommit, conn.prepare_threshold = self._owners_settings

    def _abandon(self) -> None:
        """Drop the connection (its transaction, if any, is rolled back by the server).

        A pool's connection goes back to the pool, which rolls back or discards it.
        """
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._pool is not None:
            self._give_back(conn)
            with contextlib.suppress(Exception):
                self._pool.putconn(conn)
            return
        with contextlib.suppress(self._pg.Error):
            conn.close()

    def _unavailable(self, e: BaseException) -> ServerError:
        """The error to raise for `e`, a failure of the database (or of reaching it).

        A privilege the database user lacks is told as such (``ServerError``, code
        ``forbidden``), not as a server that cannot be reached.
        """
        host = self._target.shown
        if isinstance(e, self._pg.errors.InsufficientPrivilege):
            return ServerError(
                f"{host}: the database user may not do what store {self._target.store!r} "
                f"needs in schema {self._target.schema} ({str(e).strip()}); grant it (the user "
                "that migrates the schema or makes a store needs CREATE on the schema, and "
                "every user of a store SELECT, INSERT and UPDATE on its tables)",
                url=host,
                code="forbidden",
            )
        if isinstance(e, self._pg.errors.ReadOnlySqlTransaction):
            return self._takes_no_writes(str(e).strip())
        return ServerUnavailable(
            f"{host}: the PostgreSQL server cannot be used ({str(e).strip() or type(e).__name__}); "
            "check that it is running, that the host, port, user and database in the URL are "
            "right, and that this host may connect",
            url=host,
            code="unavailable",
        )

    def _takes_no_writes(self, detail: str) -> ServerUnavailable:
        """The error for a writer on a server that takes no writes, and never will.

        A hot standby, or a database set read-only (`detail` says what the server said).
        """
        return ServerUnavailable(
            f"{self._target.shown}: the PostgreSQL server takes no writes ({detail}): it is a "
            "read-only hot standby, or the database is set read-only; open a writer on the "
            "primary, or open this store with read_only=True to read it here",
            url=self._target.shown,
            code="unavailable",
        )

    def _check_takes_writes(self, conn: Any) -> None:
        """Refuse a writer on a server that takes no writes (a hot standby).

        At open, rather than at its first write.
        """
        with conn.cursor() as cur:
            cur.execute("SELECT current_setting('transaction_read_only'), pg_is_in_recovery()")
            row = cur.fetchone()
        if row is not None and (row[0] == "on" or row[1]):
            why = "a server in recovery" if row[1] else "transaction_read_only is on"
            raise self._takes_no_writes(why)

    def _check_may_flush(self, conn: Any) -> None:
        """Refuse a writer whose database user may not run the WAL flush commits end with."""
        function = "pg_logical_emit_message(boolean, text, text)"
        with conn.cursor() as cur:
            cur.execute("SELECT has_function_privilege(%s, 'EXECUTE')", (function,))
            row = cur.fetchone()
        if not (row and row[0]):
            raise ServerError(
                f"{self._target.shown}: the database user may not execute {function}, which "
                "a write runs to flush the WAL through its commit; grant EXECUTE on it (it is "
                "granted to every user unless revoked), or open the store read_only=True",
                url=self._target.shown,
                code="forbidden",
            )

    # -- the store's row and the follower ---------------------------------------------------

    def _store_header(self, conn: Any) -> bytes:
        """The store's log header, the store made first if it does not exist.

        Made under the store's lock, its table of records before its row: making the table
        locks the records table, then (for its key into ``stores``) ``stores`` against writers
        of its rows. Two stores made at once, each writing its row first, deadlocked: each
        held what the other's table waited for.
        """
        select = f"SELECT header FROM {self._stores} WHERE name = %s"
        with schema_.transaction(conn), conn.cursor() as cur:
            cur.execute(select, (self._target.store,))
            row = cur.fetchone()
            if row is None and not self._read_only:
                cur.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (self._lock_key,)
                )
                cur.execute(select, (self._target.store,))  # made by another client meanwhile?
                row = cur.fetchone()
            if row is not None:
                return bytes(row[0])
            if self._read_only:
                raise NotSupported(
                    f"{self._target.shown}: there is no store {self._target.store!r} to read"
                )
            cur.execute(
                self._sql.SQL("CREATE TABLE {} PARTITION OF {} FOR VALUES IN ({})").format(
                    self._partition(0),
                    self._sql.Identifier(self._target.schema, "records"),
                    self._sql.Literal(self._target.store),
                )
            )
            header = _native.NativeLog.memory(self._max_record_bytes).header()
            cur.execute(
                f"INSERT INTO {self._stores} (name, header) VALUES (%s, %s)",
                (self._target.store, header),
            )
            return header

    def _new_follower(self, snapshot: tuple[bytes, str] | None = None) -> _native.NativeLog:
        """A follower with every record the database holds for the store.

        The store's header (its generation) is read again: log compaction may have replaced
        it. A compaction that commits while the rows are read makes the read start again.
        `snapshot` (its text and its file's name): the state is restored from it and only the
        records after it are replayed (``SnapshotMismatch`` if it is not of this store and
        generation, or the rows it covers are not there).
        """
        conn = self._connection()
        for _ in range(10):
            try:
                self._header = self._store_header(conn)
                if snapshot is None:
                    follower = self._follower_of(self._header)
                    self._generation = int(follower.info()["generation"])
                    self._catch_up(conn, follower)
                else:
                    follower = self._follower_with(conn, *snapshot)
                purged = self._purged_ids(conn)
            except self._pg.Error as e:
                self._abandon()
                raise self._unavailable(e) from None
            except _Diverged:  # and _Replaced, one kind of it
                continue
            if purged:
                follower.add_purged(purged)
            return follower
        raise ServerUnavailable(
            f"{self._target.shown}: store {self._target.store} was compacted again and again "
            "while this client read it; try again",
            url=self._target.shown,
            code="unavailable",
        )

    def _follower_with(self, conn: Any, text: bytes, name: str) -> _native.NativeLog:
        """A follower of the store's rows, its state restored from a snapshot.

        `text` is the snapshot, from the file `name`. The rows' bytes are read whole, and only
        those after the snapshot are replayed.
        """
        self._generation = int(_native.NativeLog.replica(self._header).info()["generation"])
        image = [self._header]
        for page in self._pages(conn, 0):
            image += page
        follower = _native.NativeLog.follower_with_snapshot(
            image, text, name, self._max_record_bytes
        )
        if self.embedder is not None:
            follower.set_embedder(self.embedder)
        return follower

    def _purged_ids(self, conn: Any) -> list[str]:
        """The ids the store's log compactions purged (from its manifest rows)."""
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT p FROM {self._manifest_table} m, "
                "jsonb_array_elements_text(m.entry -> 'purged') p WHERE m.store = %s",
                (self._target.store,),
            )
            return [str(row[0]) for row in cur.fetchall()]

    def _catch_up(
        self, conn: Any, follower: _native.NativeLog, rows: list[Any] | None = None
    ) -> int:
        """Apply to `follower` the records committed after its head; how many LSNs came.

        `rows`: the first page, already read (by a section, once it held the store's lock).
        """
        before = follower.lsn
        for page in self._pages(conn, before, rows):
            # Rows joined up to about _APPLY_BYTES: one call into the core for the many small
            # rows of other hosts' sections (each call lets the GIL go and takes it back).
            batch: list[bytes] = []
            size = 0
            for data in page:
                batch.append(data)
                size += len(data)
                if size >= _APPLY_BYTES:
                    follower.apply_raw(b"".join(batch))
                    batch, size = [], 0
            if batch:
                follower.apply_raw(b"".join(batch))
        return follower.lsn - before

    def _pages(self, conn: Any, lsn: int, rows: list[Any] | None = None) -> Iterator[list[bytes]]:
        """The bytes of the store's rows after LSN `lsn`, a page at a time.

        Rows are read from the one that ends at `lsn`: if there is none, the reader holds
        what the database does not (``_Diverged``); so too if the store's generation is not
        the follower's (log compaction replaced the rows: ``_Replaced``). `rows`: the first
        page, already read.
        """
        first = True
        while True:
            if rows is None:
                rows = self._page(conn, lsn)
            if not rows:  # the store's row is gone
                raise _Diverged
            if int(rows[0][0]) != self._generation:
                raise _Replaced
            page = [(int(r[1]), r[2]) for r in rows if r[1] is not None]
            if first and lsn and (not page or page[0][0] != lsn):
                raise _Diverged
            if page and page[0][0] == lsn:
                page = page[1:]
            if page:
                yield [bytes(data) for _, data in page]
                lsn = page[-1][0]
            if len(page) < _CATCH_UP_ROWS:
                return
            rows, first = None, False

    def _page(self, conn: Any, lsn: int) -> list[Any]:
        """The store's generation and the rows from the one ending at `lsn` (a page of them).

        In binary: the records' bytes come as they are, not as hex text to decode.
        """
        with conn.cursor(binary=True) as cur:
            cur.execute(self._catch_up_sql, (lsn, _CATCH_UP_ROWS + 1, self._target.store))
            rows: list[Any] = cur.fetchall()
            return rows

    def _sample_clock(self, conn: Any, db_us: int | None = None, *, came: bool = True) -> None:
        """Give the clock the database's time (asked now unless given).

        And the newest record's time when records `came` from the database: the clock
        already floors this client's own.
        """
        if db_us is None:
            with conn.cursor() as cur:
                cur.execute(_NOW_US)
                row = cur.fetchone()
            db_us = int(row[0]) if row else None
        floor = 0
        lsn = self._follower.lsn
        if came and lsn:
            # The newest record came with the rows just applied (a follower restored from a
            # snapshot applied none: read it).
            floor = self._follower.applied_at_us
            if not floor:
                newest, _ = self._follower.read_records(lsn - 1, 0, 1)
                floor = to_microseconds(newest[0].at) if newest else 0
        if db_us is not None:
            self.clock.sample(db_us, floor)
            if floor:
                self.counters.refresh_lag_seconds.observe(max(0, db_us - floor) / 1e6)

    def _rebuild(self) -> None:
        """Start the follower again from the database.

        It held records the database lost, or log compaction made a new generation.
        """
        self._suspect = True
        self._go_on_with(self._new_follower())
        self._suspect = False
        self.counters.rebuilds += 1

    def _go_on_with(self, follower: _native.NativeLog) -> None:
        """Make `follower` the one reads and commits use.

        It has the store's embedder already (every follower is made with it, and the native
        log takes one embedder only): the engine on it is not given it again.
        """
        self._follower = follower
        self._sealed_lsn = 0
        self._local = LocalEngine(follower)
        if self._medium is not None:
            self._medium.rebind(follower)

    # -- the section -------------------------------------------------------------------------

    def begin_section(self) -> None:
        """Start a section: take the store's lock in a transaction, and catch up.

        The section lock calls it (see the module docstring).
        """
        if self._read_only:
            self._refuse_write()
        diverged = replaced = 0
        retried = False
        while True:
            if self._suspect:
                self._rebuild()
            reused = self._conn is not None
            conn = self._connection()
            lsn = self._follower.lsn
            try:
                # One round trip: BEGIN, and the schema's section_begin: the lock; then, read
                # once the lock is ours, the database's clock and the records since the
                # follower's head (every commit made before the lock was granted).
                asked = time.perf_counter()
                with self._pg.ClientCursor(conn) as cur:
                    cur.execute(
                        self._section_sql,
                        (self._target.store, self._lock_key, lsn, _CATCH_UP_ROWS + 1),
                    )
                    cur.nextset()  # past BEGIN's
                    got = cur.fetchall()
                self.counters.lock_wait_seconds.observe(time.perf_counter() - asked)
                came = self._catch_up(conn, self._follower, [row[1:] for row in got])
                self._sample_clock(conn, int(got[0][0]) if got else None, came=came > 0)
                break
            except self._pg.Error as e:
                self._abandon()
                if reused and not retried:
                    # A connection that died while idle (the server restarted, a pooler or
                    # firewall dropped it): nothing was written; once more on a new one.
                    retried = True
                    continue
                raise self._unavailable(e) from None
            except _Replaced:
                # Log compaction made a new generation: read it without the lock (which the
                # other clients' commits wait for), then take the lock again.
                conn.rollback()
                self._suspect = True
                replaced += 1
                if replaced > 10:
                    raise ServerUnavailable(
                        f"{self._target.shown}: store {self._target.store} was compacted again "
                        "and again while this client read it; nothing was written",
                        url=self._target.shown,
                        code="unavailable",
                    ) from None
            except (CorruptLog, _Diverged):
                # The follower is ahead of (or beside) the database: rebuilt, and once more.
                conn.rollback()
                self._suspect = True
                diverged += 1
                if diverged == 2:
                    raise CorruptLog(
                        f"{self._target.shown}: store {self._target.store}: the records in the "
                        "database do not follow one another; nothing was written"
                    ) from None
        self._mark_end, self._mark = self._follower.ram_end()
        if self._medium is not None:
            self._medium.refresh()

    def end_section(self) -> None:
        """End a section: insert what it wrote and commit, or let the lock go."""
        conn = self._conn
        if conn is None:  # the connection was lost in the section (which raised for it)
            self._suspect = self._suspect or self._follower.lsn != self._mark
            return
        if self._auto_seal is not None and self._follower.lsn > self._mark:
            self._seal_if_due(*self._auto_seal)
        # What the section wrote: the follower's bytes since the section began (whole commits:
        # a refused one was cut off again).
        data = self._follower.raw_since(self._mark_end)
        after = self._follower.lsn
        if not data:
            try:
                conn.rollback()  # nothing written: let the lock go
            except self._pg.Error:
                self._abandon()
            return
        commit_id = uuid.uuid4().hex
        # The insert, the COMMIT and the readers' NOTIFY, as one query (a large insert first,
        # its bytes as a binary parameter).
        params: tuple[Any, ...] | None = (
            self._target.store,
            self._mark + 1,
            after,
            data,
            commit_id,
        )
        query = f"{_EARLY_RELEASE}; {self._insert_sql}; COMMIT; {_FLUSH}; {self._notify_sql}"
        if len(data) > _ONE_TRIP_BYTES:
            try:
                with conn.cursor() as cur:
                    cur.execute(self._insert_sql, params)
            except self._pg.Error as e:
                self._abandon()
                self._try_rebuild()
                raise self._unavailable(e) from None
            params, query = None, f"{_EARLY_RELEASE}; COMMIT; {_FLUSH}; {self._notify_sql}"
        failure = self._finish(conn, query, params)
        if failure is None:
            self.counters.section()
            return
        self._abandon()
        try:
            self._outcome(commit_id, failure, "the commit")
        except BaseException:
            self._try_rebuild()
            raise

    def _finish(self, conn: Any, query: str, params: tuple[Any, ...] | None) -> Exception | None:
        """Send `query`, which ends a write's transaction; None once committed, else the failure.

        The query holds the ``COMMIT`` (for a section, then the WAL flush: ``_FLUSH``), then
        the readers' ``NOTIFY``, which runs after the COMMIT in a transaction of its own, so it
        wakes readers in refresh(wait=) once the records are there; a lost NOTIFY only delays
        readers, who read the database again at least every :data:`_RECHECK_SECONDS`.
        """
        try:
            with self._pg.ClientCursor(conn) as cur:
                cur.execute(query, params)
        except self._pg.Error as e:
            failed: Exception = e
            return failed
        if conn.info.transaction_status == self._pg.pq.TransactionStatus.IDLE:
            return None
        lost: Exception = self._pg.OperationalError("the COMMIT did not end the transaction")
        return lost

    def _outcome(self, commit_id: str, failure: Exception, what: str) -> None:
        """Return if the write with `commit_id`, whose COMMIT got `failure`, is in the database.

        Looked up once the transaction that held the store's lock has ended either way (its
        connection dropped). Raises CommitOutcomeUnknown if the database cannot be asked, and
        the failure as an error of the database if the write is not there.
        """
        applied = self._was_applied(commit_id)
        if applied:
            return
        if applied is None:
            self.counters.outcome_unknown += 1
            raise CommitOutcomeUnknown(
                f"{self._target.shown}: {what}'s COMMIT was sent but no answer came back "
                f"({failure}), and the database could not be asked since; whether it was "
                "applied is unknown: refresh and check before doing it again",
                commit_id=commit_id,
                url=self._target.shown,
            )
        raise self._unavailable(failure)

    def _seal_if_due(self, every: int, key: bytes | None) -> None:
        """Append a seal if `every` records follow the store's newest one (in a section)."""
        lsn = self._follower.lsn
        if lsn - self._sealed_lsn < every:
            return
        seals = self._follower.seals()  # looked up only when one may be due
        self._sealed_lsn = int(seals[-1][1]) if seals else 0
        if lsn - self._sealed_lsn >= every:
            self._follower.seal(self.clock.now_us(), key)
            self._sealed_lsn = self._follower.lsn

    def _listening(self) -> Any:
        """The LISTEN connection, made if it is not (None if it cannot be: poll instead)."""
        conn = self._listener
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        conn = None
        try:
            conn = self._connect()
            conn.execute(f'LISTEN "{self._channel}"')
        except (self._pg.Error, ServerUnavailable):  # a hot standby, say, takes no LISTEN
            if conn is not None:
                with contextlib.suppress(self._pg.Error):
                    conn.close()
            return None
        self._listener = conn
        return conn

    def _try_rebuild(self) -> None:
        """Rebuild the follower now if the database answers; else before the next section."""
        try:
            self._rebuild()
        except ServerUnavailable:
            self._suspect = True

    def _was_applied(self, commit_id: str) -> bool | None:
        """Whether the commit with `commit_id` is in the database; None if it cannot be asked."""
        try:
            conn = self._connection()
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (self._lock_key,)
                )
                cur.execute(
                    f"SELECT 1 FROM {self._records} WHERE store = %s AND commit_id = %s",
                    (self._target.store, commit_id),
                )
                found = cur.fetchone() is not None
                if found:  # committed; durable once the WAL holding it is flushed
                    cur.execute(_FLUSH)
            return found
        except (self._pg.Error, ServerUnavailable):
            self._abandon()
            return None

    # -- the Engine protocol -------------------------------------------------------------------

    @property
    def capabilities(self) -> frozenset[str]:
        """``{"compact", "seal"}``: log compaction and seals, run by this client in a section."""
        return frozenset({"compact", "seal"})

    @property
    def path(self) -> str | None:
        """None: the log is in the database."""
        return None

    @property
    def url(self) -> str:
        """The database's URL, without its password."""
        return self._target.shown

    def describe(self) -> str:
        """The database, the store and the follower's head LSN, or ``closed``."""
        state = "closed" if self._closed else f"lsn={self._follower.lsn}"
        return f"{self._target.shown} store={self._target.store} {state}"

    def view(self) -> _native.NativeLog:
        """The follower: this client's commits, and others' up to its last write or refresh."""
        return self._follower

    def info(self) -> dict[str, Any]:
        """The follower's facts, with the database's URL, the store and the schema."""
        info = self._follower.info()
        info.update(
            path=None,
            url=self._target.shown,
            store=self._target.store,
            schema=self._target.schema,
            read_only=self._read_only,
        )
        return info

    def manifest(self) -> list[ManifestEntry]:
        """The store's compaction manifest (its rows), as of the follower's generation."""
        cached = self._manifest
        if cached is not None and cached[0] == self._generation:
            return cached[1]
        with self._section.bare:  # the connection is one thread's at a time
            generation = self._generation
            conn = self._connection()
            try:
                with conn.cursor() as cur:
                    cur.execute(
                        f"SELECT entry FROM {self._manifest_table} WHERE store = %s "
                        "AND generation <= %s ORDER BY generation",
                        (self._target.store, generation),
                    )
                    entries = [dict(row[0]) for row in cur.fetchall()]
            except self._pg.Error as e:
                self._abandon()
                raise self._unavailable(e) from None
        self._manifest = (generation, entries)
        return entries

    def set_import_entry(self, entry: ManifestEntry | None) -> None:
        """Keep `entry`, an import's purged ids, as the manifest row of the store's generation.

        ``memcommit import`` writes it before the first record, so that every client's
        follower (which reads the purged ids of every manifest row) knows that a record's
        ``sources`` name them deliberately; this client's follower marks them now. In one
        transaction holding the store's lock, refused while the store holds records; a row
        an earlier import left (one that wrote nothing) is replaced. None drops the row again
        (an import that wrote nothing: its purged ids stay marked in this follower, which
        the import closes).

        Raises:
            InvalidValue: The store holds records, or a log compaction's row is there.
        """
        from psycopg.types.json import Jsonb

        if self._read_only:
            self._refuse_write()
        store = self._target.store
        imported = "entry ? 'imported_from'"  # an import's row, not a compaction's
        with self._section.bare:
            generation = self._generation
            conn = self._connection()
            try:
                with schema_.transaction(conn), conn.cursor() as cur:
                    cur.execute(
                        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (self._lock_key,)
                    )
                    if entry is None:
                        cur.execute(
                            f"DELETE FROM {self._manifest_table} WHERE store = %s "
                            f"AND generation = %s AND {imported}",
                            (store, generation),
                        )
                    else:
                        cur.execute(
                            f"SELECT 1 FROM {self._records} WHERE store = %s LIMIT 1", (store,)
                        )
                        if cur.fetchone() is not None:
                            raise InvalidValue(
                                f"{self._target.shown}: store {store} holds records (written "
                                "since the import began); nothing was written"
                            )
                        cur.execute(
                            f"INSERT INTO {self._manifest_table} AS m (store, generation, entry) "
                            "VALUES (%s, %s, %s) ON CONFLICT (store, generation) DO UPDATE "
                            f"SET entry = EXCLUDED.entry WHERE m.{imported}",
                            (store, generation, Jsonb({**entry, "generation": generation})),
                        )
                        if cur.rowcount != 1:
                            raise InvalidValue(
                                f"{self._target.shown}: store {store}'s generation {generation} "
                                "has the manifest row of a log compaction; nothing was written"
                            )
            except self._pg.Error as e:
                self._abandon()
                raise self._unavailable(e) from None
            finally:
                self._manifest = None  # read again
            if entry is not None:
                self._follower.add_purged(list(entry["purged"]))

    def get(self, id: str) -> _native.Memory | None:
        """``view().get(id)``."""
        return self._follower.get(id)

    def get_many(self, ids: list[str]) -> list[_native.Memory | None]:
        """``view().get_many(ids)``."""
        return self._follower.get_many(ids)

    def is_purged(self, id: str) -> bool:
        """``view().is_purged(id)``."""
        return self._follower.is_purged(id)

    def begin(self, expect_lsn: int | None, now_us: Callable[[], int]) -> Commit:
        """A commit whose operations are checked as they are made and run in a section."""
        self._connection()  # a closed store refuses at once
        if self._read_only:
            self._refuse_write()
        # Ids carry the store's time, as a local commit's (from 0: see LocalEngine.begin).
        id_ms = max(now_us() // 1000, 0)
        return cast(Commit, DeferredCommit(_Timed(self, now_us), expect_lsn, id_ms))

    def run_commit(
        self,
        wire_ops: list[list[Any]],
        expect_lsn: int | None,
        now_us: Callable[[], int] | None = None,
    ) -> tuple[int | None, int | None]:
        """Run a commit's operations on the follower in a section; its first and last LSN.

        Commits of many threads travel together: the first to arrive leads, and runs every
        commit queued meanwhile in one section (each checked against the state the ones before
        it left; a refused one raises its own error), so one transaction and one WAL flush
        carry them all; then the next waiting thread leads. If the section fails, every commit
        of it gets that error (none of them is in the database).
        """
        job = _Job(wire_ops, expect_lsn, now_us or (lambda: time.time_ns() // 1000))
        self._run_job(job)
        return job.result

    def _run_job(self, job: _Job) -> None:
        """Queue `job`, and run it (leading the batch, or waiting for the leader)."""
        started = time.perf_counter()
        with self._jobs_lock:
            self._jobs.append(job)
            if not self._leading:
                self._leading = job.lead = True
        while True:
            if job.lead:
                self._lead(job)
            if job.done:
                error = job.error
                result = (
                    "ok"
                    if error is None
                    else "rejected"
                    if isinstance(error, Rejected)
                    else "error"
                )
                self.counters.commit(result, time.perf_counter() - started)
                if error is not None:
                    raise error
                return
            job.gate.acquire()

    def _lead(self, me: _Job) -> None:
        """Run the queued commits, section after section, until `me` is done; then hand over."""
        while True:
            if not self._run_batch():
                with self._jobs_lock:
                    if not self._jobs:
                        self._leading = me.lead = False
                        return
                continue
            if me.done:
                with self._jobs_lock:
                    me.lead = False
                    if self._jobs:
                        self._jobs[0].lead = True
                        self._jobs[0].wake()
                    else:
                        self._leading = False
                return

    def _run_batch(self) -> bool:
        """Run, in one section, the commits queued when its lock is taken; False if none were.

        The queue is read once the store's lock is held, so the commits that arrived while it
        was awaited (from other threads, while other hosts held it) travel together.
        """
        batch: list[_Job] = []
        interrupted: BaseException | None = None
        try:
            with self._section:
                with self._jobs_lock:
                    batch = self._jobs[:_MAX_BATCH]
                    del self._jobs[:_MAX_BATCH]
                for job in batch:
                    try:
                        if job.call is not None:
                            job.value = job.call()
                            continue
                        c = self._local.begin(job.expect_lsn, job.now_us)
                        with c:
                            for op in job.wire_ops:
                                ops.apply(c, op)
                        job.result = (c.first_lsn, c.lsn)
                    except Exception as e:  # refused or bad: this commit alone
                        job.error = e
        except BaseException as e:  # the section failed: none of the batch is in the database
            if not batch:  # it failed before taking any: they fail alike
                with self._jobs_lock:
                    batch = self._jobs[:_MAX_BATCH]
                    del self._jobs[:_MAX_BATCH]
            for job in batch:
                job.error = e
            if not isinstance(e, Exception):
                interrupted = e
        for job in batch:
            job.done = True
            job.wake()
        if interrupted is not None:
            raise interrupted
        return bool(batch)

    def put(self, at_us: int | None, text: str, *fields: Any) -> str:
        """One put as its own commit (run with the other threads' queued commits).

        One call into the follower in the section (the core's put checks its arguments
        there, as on a file): no operations to record and replay.
        """
        if self._read_only:
            self._refuse_write()
        clock_us = self.clock.now_us

        def now_us() -> int:
            return clock_us() if at_us is None else at_us

        def put() -> str:
            mid: str = self._follower.put(now_us(), text, *fields)
            return mid

        job = _Job([], None, now_us, put)
        self._run_job(job)
        value: str = job.value
        return value

    def set_embedder(self, embed: Callable[[list[str]], Sequence[Sequence[float]]]) -> None:
        """Embed the puts without a vector (a commit's before its section; a put's inside)."""
        self.embedder = embed
        self._local.set_embedder(embed)

    def write_entities(self, at_us: int, changes: list[tuple[str, bytes | None]]) -> int:
        """Append role entity records as one commit, in one section."""
        with self._section:
            return self._follower.write_entities(at_us, changes)

    def wait_durable(self, end: int) -> None:
        """Nothing to wait for: a section's records are committed when it ends."""

    def roles(self, clock: Clock, now_us: Callable[[], int]) -> Roles:
        """The ten roles, their operations each one section (so they hold across hosts).

        Of a read-only store: no section (which only a writer takes); they read what this
        client last read of the store, as a reader of a log file does, and refuse writes.
        """
        if self._read_only:
            self._medium = LogMedium(
                self._follower, now_us, writable=False, refuse=self._refuse_write
            )
        else:
            self._medium = LogMedium(self._follower, now_us, lock=self._section)
        return RoleSet(clock=clock, medium=self._medium)

    def _refuse_write(self) -> NoReturn:
        """Raise :class:`~memcommit.ReadOnlyStore`: this client was opened read-only."""
        raise ReadOnlyStore(f"{self._target.shown}: this store was opened read-only")

    def seal(self, at_us: int, key: bytes | None = None) -> SealTuple:
        """Write a seal over every record so far, in a section.

        The store's lock makes the sealer of the moment the only one, and the seal covers the
        records of every host.
        """
        with self._section:
            return self._follower.seal(at_us, key)

    def set_auto_seal(self, every: int | None, key: bytes | None = None) -> None:
        """Seal once `every` records follow the store's newest seal (None: stop).

        The section whose commits make a seal due appends it, so the seal travels in the same
        row and transaction as those commits. The store's lock makes that client the only
        sealer of the moment (fenced: no other can write until it commits or its transaction
        dies with it), and a seal written by any client counts for all, so clients that each
        run an AutoSeal do not seal twice.
        """
        self._auto_seal = None if every is None else (every, key)

    def compact(self, plan: CompactionPlan) -> dict[str, Any]:
        """Compact the store's records into a new generation, online.

        On a connection of the compaction's own (not a pool's: the store may hold the pool's
        last one), one transaction holding an advisory lock that lets one compaction of the
        store run at a time makes the new generation (steps 1 and 2); a second drops the old:

        1. Without the store's lock (writers go on): the follower, as it stands, makes the new
           generation's records (what compacting a log file keeps, up to its head H, without
           the seal), and a new table is filled with them and keyed.
        2. With it (writers wait): the follower catches up to the head T; the records after H
           join the new generation as records of its compacted part (its ``dense_from`` moves
           to T; the seals among them, of the old chain, are left out), and a seal at T+1
           covers everything; their rows go into the new table, which is swapped in for the
           store's partition of the records table (detach the old, attach the new); the
           store's header and generation are set and the manifest entry (`plan.entry`) added;
           COMMIT.
        3. The old table is dropped, in a transaction of its own (:meth:`_drop_old_tables`):
           its space goes back to the system at once.

        Other clients' next catch-up sees the new generation and starts again. If a record
        after H touches a memory retention purges, the compaction runs again with the store's
        lock taken before step 1 (so nothing comes after H). A dry run makes the new
        generation and writes nothing.
        """
        if plan.dry_run:  # what it would do now: caught up, without the store's lock
            self.refresh()
            with self._section.bare:
                planned, _ = self._follower.compacted_copy(*plan.selection, plan.at_us)
            return planned
        if self._read_only:
            self._refuse_write()
        report = None
        for locked in (False, True):
            conn = self._connect()
            try:
                report = self._compact_on(conn, plan, locked=locked)
                if report is not None:
                    if plan.step is not None:
                        plan.step("renamed")  # committed: the new generation is the store's
                    self._drop_old_tables(conn)
            finally:
                with contextlib.suppress(self._pg.Error):
                    conn.close()
            if report is not None:
                break
        if report is None:
            raise ServerUnavailable(
                f"{self._target.shown}: store {self._target.store} changed under log compaction "
                "while it held the store's lock (a client of another memcommit?); nothing was "
                "written: compact it again",
                url=self._target.shown,
                code="unavailable",
            )
        if plan.progress is not None:
            plan.progress(report["bytes_before"], report["bytes_before"])
        return report

    def _compact_on(
        self, conn: Any, plan: CompactionPlan, *, locked: bool
    ) -> dict[str, Any] | None:
        """The two steps of :meth:`compact` on `conn`; None if it must run again locked.

        With `locked`, the store's lock is taken before the first step.
        """
        from psycopg.types.json import Jsonb

        with conn.cursor() as cur, contextlib.ExitStack() as held:
            try:
                cur.execute(schema_.BEGIN)
                cur.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (self._compact_key,),
                )
                if locked:  # this process's writers wait from here, the others on the lock
                    held.enter_context(self._section.bare)
                    if not self._lock_and_catch_up(conn):
                        return None
                else:
                    self.refresh()
                # 1. The new generation up to the head H, and its table.
                with self._section.bare:
                    head = self._follower.lsn
                    report, image = self._follower.compacted_copy(*plan.selection, None)
                generation = int(report["generation"])
                new = self._follower_of(image)
                self._fill_partition(cur, new, generation, None)
                if plan.step is not None:
                    plan.step("new-log-written")  # the new generation's rows, not committed
                kept = new.lsn
                # 2. The store's lock: the records since H, a seal, the swap.
                with self._section.bare:
                    asked = time.perf_counter()
                    if not self._lock_and_catch_up(conn):
                        return None
                    old = self._follower
                    top = old.lsn
                    later, _ = old.read_records(head, 0, max(0, top - head))
                    purged = set(report["purged"])
                    if any(r.key in purged for r in later):
                        return None  # a purged memory changed since H: run locked
                    try:
                        new.raise_dense_from(top)
                        new.apply_raw(b"".join(r.raw() for r in later if r.op != "seal"))
                    except (CorruptLog, ValueError):
                        return None  # the records since H do not follow on: run locked
                    new.add_purged([*self._purged_ids(conn), *purged])
                    sealed = new.seal(plan.at_us)  # the store's clock, as a log file's compaction
                    commit_id = uuid.uuid4().hex
                    self._fill_rows(cur, self._partition(generation), new, kept, commit_id)
                    self._swap_partition(cur, generation)
                    info, new_info = old.info(), new.info()
                    report.update(
                        before=int(info["records"]),
                        bytes_before=int(info["bytes"]),
                        after=int(new_info["records"]),
                        bytes_after=int(new_info["bytes"]),
                        old_lsn=top,
                        old_chain=old.chain_hex(),
                        old_seals=old.seals(),
                        seal=sealed,
                    )
                    header = new.header()
                    cur.execute(
                        f"UPDATE {self._stores} SET header = %s, generation = %s WHERE name = %s",
                        (header, generation, self._target.store),
                    )
                    cur.execute(
                        f"INSERT INTO {self._manifest_table} (store, generation, entry) "
                        "VALUES (%s, %s, %s)",
                        (self._target.store, generation, Jsonb(plan.entry(report))),
                    )
                    if plan.step is not None:
                        plan.step("manifest-written")  # everything in, not committed
                    failure = self._finish(conn, f"COMMIT; {self._notify_sql}", None)
                    if failure is not None:
                        with contextlib.suppress(self._pg.Error):
                            conn.close()
                        self._outcome(commit_id, failure, "log compaction")
                    self.counters.compaction_lock_seconds.observe(time.perf_counter() - asked)
                    self._header = header
                    self._generation = generation
                    self._go_on_with(new)
                    return report
            except self._pg.Error as e:
                raise self._unavailable(e) from None

    def _lock_and_catch_up(self, conn: Any) -> bool:
        """Take the store's lock in `conn`'s transaction and catch the follower up.

        Under the section's process lock. False if the store is not the one it follows.
        """
        if self._suspect:
            self._rebuild()
        with self._pg.ClientCursor(conn) as cur:
            cur.execute(
                self._lock_sql,
                (self._target.store, self._lock_key, self._follower.lsn, _CATCH_UP_ROWS + 1),
            )
            got = cur.fetchall()
        try:
            self._catch_up(conn, self._follower, [row[1:] for row in got])
        except _Diverged:
            self._suspect = True
            return False
        self._sample_clock(conn, int(got[0][0]) if got else None)
        return True

    def _follower_of(self, image: bytes) -> _native.NativeLog:
        """A follower holding `image`: a header, then records (none: an empty follower)."""
        follower = _native.NativeLog.replica(
            image[:_HEADER_LEN],
            self._max_record_bytes,
            writable=True,
            name=f"{self._target.shown} (store {self._target.store})",
        )
        if self.embedder is not None:
            follower.set_embedder(self.embedder)
        if len(image) > _HEADER_LEN:
            follower.apply_raw(image[_HEADER_LEN:])
        return follower

    def _fill_partition(
        self, cur: Any, follower: _native.NativeLog, generation: int, commit_id: str | None
    ) -> None:
        """Make the table of the store's records of `generation`, filled from `follower`.

        With its keys and the check that every row is the store's, so attaching it scans
        nothing; the last row carries `commit_id`.
        """
        sql, table = self._sql, self._partition(generation)
        cur.execute(
            sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS, CHECK (store = {}))").format(
                table,
                sql.Identifier(self._target.schema, "records"),
                sql.Literal(self._target.store),
            )
        )
        cur.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (store, last_lsn)").format(table))
        cur.execute(sql.SQL("CREATE UNIQUE INDEX ON {} (store, commit_id)").format(table))
        self._fill_rows(cur, table, follower, 0, commit_id)

    def _fill_rows(
        self, cur: Any, table: Any, follower: _native.NativeLog, after: int, commit_id: str | None
    ) -> None:
        """Insert into `table` the follower's records after LSN `after`.

        In rows of about :data:`_ROW_BYTES`; the last row carries `commit_id`.
        """
        insert = self._sql.SQL(
            "INSERT INTO {} (store, first_lsn, last_lsn, bytes, commit_id) "
            "VALUES (%s, %s, %s, %s, %s)"
        ).format(table)
        while True:
            data, last = follower.read_raw(after, _ROW_BYTES)
            if not data:
                break
            mark = commit_id if last == follower.lsn else None
            cur.execute(insert, (self._target.store, after + 1, last, data, mark))
            after = last

    def _swap_partition(self, cur: Any, generation: int) -> None:
        """Put the table of `generation` in place of the store's partition.

        The old one is dropped later, in a transaction of its own (:meth:`_drop_old_tables`).
        """
        sql = self._sql
        records = sql.Identifier(self._target.schema, "records")
        old, new = self._partition(generation - 1), self._partition(generation)
        cur.execute(sql.SQL("ALTER TABLE {} DETACH PARTITION {}").format(records, old))
        cur.execute(
            sql.SQL("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES IN ({})").format(
                records, new, sql.Literal(self._target.store)
            )
        )

    def _drop_old_tables(self, conn: Any) -> None:
        """Drop the store's tables of records that are not its partition (older generations').

        After the swap's transaction, in one of its own. Dropping a table with a key into
        ``stores`` locks ``stores`` against its readers, and the swap holds the lock on
        ``records`` that every section waits for, while a section (of any store) holds
        ``stores`` from its first read: the swap waiting for that lock was a deadlock. A table
        left by a compaction that died before dropping it (or could not) is dropped by the
        next compaction of the store; none is dropped while another compaction of the store
        runs (it drops them when it is done).
        """
        sql = self._sql
        # A failure leaves them to the next compaction.
        with (
            contextlib.suppress(self._pg.Error),
            schema_.transaction(conn),
            conn.cursor() as cur,
        ):
            cur.execute(
                "SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", (self._compact_key,)
            )
            row = cur.fetchone()
            if not (row and row[0]):
                return
            cur.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind = 'r' AND NOT c.relispartition "
                "AND starts_with(c.relname, %s)",
                (self._target.schema, schema_.partitions(self._target.store)),
            )
            for (name,) in cur.fetchall():
                cur.execute(
                    sql.SQL("DROP TABLE {}").format(sql.Identifier(self._target.schema, name))
                )

    def snapshot_json(self) -> str:
        """The state as snapshot JSON, as this client last read it.

        It points into the store's rows, so it opens a client of this store (and generation)
        only.
        """
        return str(self._follower.snapshot_json())

    @property
    def generation(self) -> int:
        """The store's log generation, as this client last read it."""
        return self._generation

    def seal_lag(self) -> int:
        """Records after the store's newest seal record, in this client's copy."""
        seals = self._follower.seals()
        return self._follower.lsn - (int(seals[-1][1]) if seals else 0)

    def table_stats(self) -> dict[str, int]:
        """The size on disk, live and dead rows of the store's table of records."""
        with self._section.bare:
            conn = self._connection()
            name = self._partition(self._generation).as_string(conn)
            try:
                with conn.cursor() as cur:
                    cur.execute(
                        "SELECT coalesce(pg_total_relation_size(to_regclass(%s)), 0), "
                        "coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0) "
                        "FROM (SELECT 1) one LEFT JOIN pg_stat_user_tables s "
                        "ON s.relid = to_regclass(%s)",
                        (name, name),
                    )
                    row = cur.fetchone()
            except self._pg.Error as e:
                self._abandon()
                raise self._unavailable(e) from None
        size, live, dead = row if row else (0, 0, 0)
        return {"bytes": int(size), "live": int(live), "dead": int(dead)}

    def refresh(self, wait: float = 0.0) -> int:
        """Apply what other clients committed; with `wait`, wait up to that long for some.

        The wait sleeps on a ``LISTEN`` connection that writers' NOTIFYs wake, reading the
        database again at least every :data:`_RECHECK_SECONDS`; where LISTEN is not available
        (behind a transaction-mode pooler, say) it polls every :data:`_POLL_SECONDS`. Returns
        how many LSNs came.
        """
        deadline = time.monotonic() + max(0.0, wait)
        listener = self._listening() if wait > 0 else None
        came = 0
        while True:
            with self._section.bare:
                if self._suspect:
                    self._rebuild()
                conn = self._connection()
                try:
                    came = self._catch_up(conn, self._follower)
                    if came or time.monotonic() >= deadline:  # the last look: time it once
                        self._sample_clock(conn, came=came > 0)
                except self._pg.Error as e:
                    self._abandon()
                    raise self._unavailable(e) from None
                except (CorruptLog, _Diverged):
                    self._rebuild()
                    came = 1
            left = deadline - time.monotonic()
            if came or left <= 0:
                break
            if listener is None:
                time.sleep(min(_POLL_SECONDS, left))
                continue
            try:
                for _ in listener.notifies(timeout=min(_RECHECK_SECONDS, left), stop_after=1):
                    self.notifications += 1
            except self._pg.Error:
                self._listener = listener = None
        if came and self._medium is not None:
            self._medium.refresh()
        return came

    def flush(self) -> None:
        """Nothing to do: every commit is durable in the database when it returns."""
        self._connection()

    def close(self) -> None:
        """Close the connection and the follower (safe to call twice).

        A connection given to open() is left open (idle) for its owner; a pool's goes back.
        """
        if self._closed:
            return
        with self._section.bare:
            self._closed = True
            mine = self._target.source
            if self._conn is not None and self._conn is mine and not mine.closed:
                self._conn = None
                self._give_back(mine)
            self._abandon()
            if self._listener is not None:
                with contextlib.suppress(self._pg.Error):
                    self._listener.close()
            self._follower.close()

    @property
    def closed(self) -> bool:
        """Whether the store is closed."""
        return self._closed


def open_engine(url: str, **options: Any) -> PostgresEngine:
    """A :class:`PostgresEngine` on the store `url` names (see :mod:`.dsn`)."""
    from .dsn import parse

    return PostgresEngine(parse(url), **options)
