"""The engine under a store: what keeps its log, and the one seam a new kind of log plugs into.

A :class:`~memcommit.MemoryStore` is the public API over one :class:`Engine`: it checks the
caller's arguments, keeps the clock and carries the roles, and asks its engine for everything
else. The modules built on the store (seals, log compaction, tiers, the server, import, the
async facade, the LangGraph integration) use the store's public surface plus
``store.engine``, never the store's private attributes.

* :class:`LocalEngine` keeps the native log in this process: a log file, or RAM (the
  in-memory store is the local engine on a RAM log).
* :class:`memcommit.remote.engine.RemoteEngine` reads a replica of a server's log and sends
  its writes to the server (:class:`~memcommit.RemoteStore` is the store on it).

Time is a value here: every engine call that records a time takes it as an argument (``at_us``,
microseconds since the Unix epoch, from the store's clock) or takes the store's clock as a
callable (``now_us``), so no engine ever calls back into the store by name.

A new engine (a PostgreSQL one, say) implements :class:`Engine` in a module of its own, names
what it can do in :attr:`Engine.capabilities`, and is handed to ``MemoryStore(engine)``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from . import _native
from .clock import Clock
from .commit import Commit
from .errors import InvalidType, InvalidValue, MemcommitError, NotSupported
from .manifest import ManifestEntry, manifest_path, read_manifest, reconcile, write_manifest
from .roles.logmedium import LogMedium
from .roles.roleset import Roles, RoleSet

if TYPE_CHECKING:
    from ._native import Memory, Record

__all__ = [
    "MEMORY",
    "CompactionPlan",
    "Engine",
    "LocalEngine",
    "LogView",
    "SealTuple",
]

MEMORY = ":memory:"
"""The path that names a log in RAM."""

SealTuple = tuple[int, int, int, int, bool, str, str]
"""A seal as an engine returns it: ``(lsn, record_lsn, count, at_us, keyed, hash, key_id)``."""


class LogView(Protocol):
    """The reads of a log: what :meth:`Engine.view` hands out (the native log is one).

    Reads answer from the log as of the last commit this store made (a remote engine's view
    is its replica, caught up first).
    """

    def get(self, id: str) -> Memory | None:
        """The memory `id`, or None."""
        ...

    def get_many(self, ids: list[str]) -> list[Memory | None]:
        """The memories `ids` (None for each missing one)."""
        ...

    def find(
        self,
        tier: str | None = None,
        kind: str | None = None,
        task: str | None = None,
        status: str | None = None,
        tags: object = None,
        limit: int | None = None,
    ) -> list[Memory]:
        """The memories matching every filter given (None matches anything)."""
        ...

    def history(self, id: str) -> list[Record]:
        """The records of memory `id` still in the log, oldest first."""
        ...

    def read_records(self, after: int, start: int, max: int) -> tuple[list[Record], int]:
        """Up to `max` records above LSN `after`, from position `start`; and the next start."""
        ...

    def entities(self) -> list[tuple[str, bytes]]:
        """Every live role entity: its full key and its state's JSON."""
        ...

    @property
    def lsn(self) -> int:
        """The newest committed LSN."""
        ...

    def __len__(self) -> int:
        """How many memories there are."""
        ...

    def contains(self, id: str) -> bool:
        """Whether memory `id` exists."""
        ...

    def is_purged(self, id: str) -> bool:
        """Whether log compaction purged memory `id`."""
        ...

    def is_task_finished(self, task: str) -> bool:
        """Whether `task` was marked finished."""
        ...

    def info(self) -> dict[str, Any]:
        """Facts: path, records, lsn, bytes, generation, store_id, read_only, memories..."""
        ...

    def seals(self) -> list[SealTuple]:
        """The seals of the current generation, oldest first."""
        ...

    def chain_hex(self) -> str:
        """The chain hash at the head, in hex (waits for the chain to reach the head)."""
        ...

    def check_seal(self, key: bytes | None = None) -> tuple[SealTuple, dict[str, Any]]:
        """Check the newest seal against the chain; returns it and the check's report."""
        ...

    def verify(
        self, key: bytes | None = None, progress: Callable[[int], object] | None = None
    ) -> dict[str, Any]:
        """Re-read and check the whole log and every seal."""
        ...

    def header(self) -> bytes:
        """The log's header (what a replica starts from)."""
        ...

    def read_raw(
        self, after: int, max_bytes: int = 4194304, upto: int | None = None
    ) -> tuple[bytes, int]:
        """The raw records above LSN `after`, up to `max_bytes`; and the last LSN in them.

        With `upto`, only the commits that end at or below that LSN.
        """
        ...

    def search(
        self,
        mode: str,
        text: str | None,
        vector: Sequence[float] | None,
        k: int,
        tier: str | None = None,
        kind: str | None = None,
        task: str | None = None,
        status: str | None = None,
        tags: object = None,
    ) -> list[tuple[Memory, float]]:
        """The `k` best memories for the words `text` and the `vector`, best first, scored."""
        ...

    def vector_dims(self) -> int | None:
        """The length of the store's vectors; None while no memory has one."""
        ...

    def wait_for_vector_index(self) -> bool:
        """Build the approximate vector index now if the store uses one; wait for it."""
        ...


@dataclass(frozen=True)
class CompactionPlan:
    """What one log compaction is to do (built by :func:`memcommit.storage.compact`).

    Attributes:
        horizon: The LSN up to which history is folded (None: the head).
        archived_older_than_us: Purge archived memories last moved this long ago, or None.
        kinds_after_us: Purge memories of a kind created this long ago: ``(kind, age)``.
        ids: Purge these ids too (what a Python retention policy selected).
        now_us: The time retention ages count back from.
        at_us: The time the new log's seal records.
        before_swap: Called with the report before the new log replaces the old (it writes
            the manifest entry beside a log file).
        entry: Makes the manifest entry of a report (what an engine that keeps its manifest
            elsewhere, in a database, stores).
        step: Called with the name of each step (crash tests kill the process at one).
        progress: Called with (bytes read, total bytes) as the log is read.
        dry_run: Only find out what the compaction would do; write nothing (no new log, no
            manifest entry, and `before_swap` and `step` are not called).
    """

    horizon: int | None
    archived_older_than_us: int | None
    kinds_after_us: list[tuple[str, int]]
    ids: list[str]
    now_us: int
    at_us: int
    before_swap: Callable[[dict[str, Any]], object]
    entry: Callable[[dict[str, Any]], ManifestEntry]
    step: Callable[[str], object] | None = None
    progress: Callable[[int, int], object] | None = None
    dry_run: bool = False

    @property
    def selection(self) -> tuple[int | None, int | None, list[tuple[str, int]], list[str], int]:
        """What to keep and purge, as the native log's compaction calls take it.

        `horizon`, `archived_older_than_us`, `kinds_after_us`, `ids` and `now_us`, in order.
        """
        return (
            self.horizon,
            self.archived_older_than_us,
            self.kinds_after_us,
            self.ids,
            self.now_us,
        )


class Engine(Protocol):
    """What a store needs from the log under it: its reads (:meth:`view`) and its writes.

    Every time an engine records comes in as ``at_us`` or as the ``now_us`` clock callable.
    """

    @property
    def capabilities(self) -> frozenset[str]:
        """What the engine can do beyond reads and commits, by name.

        ``"file"``: a log file (snapshots, an index file, a read-only reader beside the
        writer); ``"compact"``: log compaction here, in this process; ``"seal"``: seals
        written by this engine's writer or its server; ``"remote"``: a server runs the commits.
        """
        ...

    @property
    def path(self) -> str | None:
        """The log file, or None (a log in RAM, or a server's)."""
        ...

    def describe(self) -> str:
        """Where the log is and its state, for the store's repr (asks no server)."""
        ...

    def view(self) -> LogView:
        """The log to read now (a remote engine catches its replica up first)."""
        ...

    def info(self) -> dict[str, Any]:
        """The view's facts, with what the engine adds (a remote engine: the server's url)."""
        ...

    def manifest(self) -> list[ManifestEntry]:
        """The compaction manifest as of the current generation (the engine's own list)."""
        ...

    def get(self, id: str) -> Memory | None:
        """``view().get(id)``: the hot read, without a call of its own on a local engine."""
        ...

    def get_many(self, ids: list[str]) -> list[Memory | None]:
        """``view().get_many(ids)``, likewise."""
        ...

    def is_purged(self, id: str) -> bool:
        """``view().is_purged(id)``, likewise (what a get that found nothing asks next)."""
        ...

    def begin(self, expect_lsn: int | None, now_us: Callable[[], int]) -> Commit:
        """A new commit (written when its ``with`` block ends), timed by `now_us`."""
        ...

    def put(
        self,
        at_us: int | None,
        text: str,
        kind: str,
        id: str | None,
        task: str | None,
        tier: str,
        data: Mapping[str, Any] | None,
        tags: Sequence[str],
        sources: Sequence[str],
        vector: Sequence[float] | None,
    ) -> str:
        """One put as its own commit (`at_us` None: the system clock, read in the engine)."""
        ...

    def set_embedder(self, embed: Callable[[list[str]], Sequence[Sequence[float]]]) -> None:
        """Give puts without a vector the vector `embed` makes of their text."""
        ...

    def write_entities(self, at_us: int, changes: list[tuple[str, bytes | None]]) -> int:
        """Append role entity records as they are, as one commit; returns its end offset."""
        ...

    def wait_durable(self, end: int) -> None:
        """Wait until the log is durable up to offset `end`."""
        ...

    def roles(self, clock: Clock, now_us: Callable[[], int]) -> Roles:
        """The store's ten roles, built once per store (their changes are this log's commits)."""
        ...

    def seal(self, at_us: int, key: bytes | None = None) -> SealTuple:
        """Write a seal over every record so far, stamped `at_us`."""
        ...

    def set_auto_seal(self, every: int | None, key: bytes | None = None) -> None:
        """Seal after every `every` records (None: stop)."""
        ...

    def compact(self, plan: CompactionPlan) -> dict[str, Any]:
        """Compact the log into a new generation; the engine goes on with it."""
        ...

    def snapshot_json(self) -> str:
        """The state as snapshot JSON (raises NotSupported without a log file)."""
        ...

    def refresh(self, wait: float = 0.0) -> int:
        """Apply what others committed since the last look; returns how many records."""
        ...

    def flush(self) -> None:
        """Make every record written so far durable."""
        ...

    def close(self) -> None:
        """Release the log (safe to call twice)."""
        ...

    @property
    def closed(self) -> bool:
        """Whether the engine is closed."""
        ...


class LocalEngine:
    """The native log in this process: a log file, or RAM (see :class:`Engine`).

    Args:
        log: The open native log.
        path: Its file, or None in RAM.
        reopen: Opens the file again, as it was opened (a reader goes on with the new file
            after log compaction replaced it); None in RAM.
    """

    def __init__(
        self,
        log: _native.NativeLog,
        path: str | None = None,
        reopen: Callable[[], _native.NativeLog] | None = None,
    ) -> None:
        self._embed: Callable[[list[str]], Sequence[Sequence[float]]] | None = None
        # Held while a reader goes on with a new generation and while the store closes, so a
        # close and a refresh never interleave (a closed store stays closed).
        self._swap = threading.Lock()
        self._bind(log)
        self._path = path
        self._reopen = reopen
        self._medium: LogMedium | None = None
        self._manifest: list[ManifestEntry] = []
        self._manifest_generation = 0
        if path is not None:
            self._load_manifest(at_open=True)

    @classmethod
    def open(
        cls,
        path: str,
        durability: str,
        read_only: bool,
        flush_interval_ms: int,
        max_record_bytes: int,
        snapshot: str | None = None,
    ) -> LocalEngine:
        """Open the log file `path` (see :func:`memcommit.open` for the arguments)."""

        def reopen() -> _native.NativeLog:
            return _native.NativeLog.open(
                path, durability, read_only, flush_interval_ms, max_record_bytes
            )

        log = _native.NativeLog.open(
            path, durability, read_only, flush_interval_ms, max_record_bytes, snapshot
        )
        try:
            return cls(log, path, reopen)
        except BaseException:
            # Let go of the file and the writer lock now, not when the collector finds the
            # half-built engine: a second open must not find it locked.
            with contextlib.suppress(MemcommitError):
                log.close()
            raise

    @classmethod
    def memory(cls, max_record_bytes: int) -> LocalEngine:
        """A log in RAM, with the same hash chain as a file (not durable)."""
        return cls(_native.NativeLog.memory(max_record_bytes))

    @property
    def log(self) -> _native.NativeLog:
        """The native log (the generation now open)."""
        return self._log

    @property
    def capabilities(self) -> frozenset[str]:
        """``{"file", "compact", "seal"}`` on a log file; ``{"seal"}`` in RAM."""
        if self._path is None:
            return frozenset({"seal"})
        return frozenset({"file", "compact", "seal"})

    @property
    def path(self) -> str | None:
        """The log file, or None in RAM."""
        return self._path

    def describe(self) -> str:
        """The log file (or ``:memory:``) and the head LSN, or ``closed``."""
        state = "closed" if self._log.closed else f"lsn={self._log.lsn}"
        return f"{self._path or MEMORY} {state}"

    def _load_manifest(self, *, at_open: bool = False) -> None:
        """Read the compaction manifest and mark its purged ids.

        A writer, at open, also drops the entry of a compaction that crashed before its rename.
        """
        assert self._path is not None
        info = self._log.info()
        write = at_open and not info["read_only"]
        self._manifest = reconcile(self._path, info["store_id"], info["generation"], write=write)
        self._manifest_generation = int(info["generation"])
        purged = [i for e in self._manifest for i in e.get("purged", ())]
        if purged:
            self._log.add_purged(purged)

    def manifest(self) -> list[ManifestEntry]:
        """The compaction manifest, read again when log compaction made a new generation."""
        if self._path is not None and self._manifest_generation != self._log.info()["generation"]:
            self._load_manifest()
        return self._manifest

    def set_import_entry(self, entry: ManifestEntry | None) -> None:
        """Keep `entry`, an import's purged ids, as a manifest entry of this generation.

        ``memcommit import`` writes it before the first record, so that a record's ``sources``
        naming those ids are deliberate here too (the log marks them now, and every later
        open from the manifest); an entry an earlier import left is replaced. None takes it
        out again (an import that wrote nothing; the ids stay marked in this open log, which
        the import closes). As :meth:`memcommit.postgres.PostgresEngine.set_import_entry`.

        Raises:
            NotSupported: The store is in RAM (it keeps no manifest).
        """
        if self._path is None:
            raise NotSupported("a store in RAM keeps no compaction manifest")
        generation = int(self._log.info()["generation"])
        entries = [
            e
            for e in read_manifest(self._path, str(self._log.info()["store_id"]))
            if not ("imported_from" in e and e.get("generation") == generation)
        ]
        if entry is not None:
            entries.append({**entry, "generation": generation})
        if entries:
            write_manifest(self._path, str(self._log.info()["store_id"]), entries)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(manifest_path(self._path))
        self._load_manifest()

    def view(self) -> _native.NativeLog:
        """The native log (the generation now open): its reads are the store's."""
        return self._log

    def info(self) -> dict[str, Any]:
        """The native log's facts."""
        return self._log.info()

    def begin(self, expect_lsn: int | None, now_us: Callable[[], int]) -> Commit:
        """A native commit on the log, refused outside its ``with`` block."""
        # Ids carry the time in milliseconds since the epoch, from 0: a clock set before 1970
        # makes ids of the epoch's first millisecond.
        id_ms = max(now_us() // 1000, 0)
        return Commit(self._log, now_us, expect_lsn, id_ms, require_with=True)

    def set_embedder(self, embed: Callable[[list[str]], Sequence[Sequence[float]]]) -> None:
        """The native log calls `embed` for the puts of a commit that carry no vector."""
        self._embed = embed
        self._log.set_embedder(embed)

    def _bind(self, log: _native.NativeLog) -> None:
        """Go on with `log`; the native log's own writes are the engine's."""
        self._log = log
        if self._embed is not None and not log.has_embedder():
            log.set_embedder(self._embed)
        self.get = log.get
        self.get_many = log.get_many
        self.is_purged = log.is_purged
        self.put = log.put
        self.write_entities = log.write_entities
        self.wait_durable = log.wait_durable
        self.seal = log.seal
        self.set_auto_seal = log.set_auto_seal
        self.flush = log.flush

    def close(self) -> None:
        """Close the log (and the file it holds open); idempotent."""
        with self._swap:
            self._log.close()

    def roles(self, clock: Clock, now_us: Callable[[], int]) -> Roles:
        """The ten roles over one :class:`~memcommit.roles.logmedium.LogMedium` on this log."""
        self._medium = LogMedium(self._log, now_us, writable=not self._log.info()["read_only"])
        return RoleSet(clock=clock, medium=self._medium)

    def compact(self, plan: CompactionPlan) -> dict[str, Any]:
        """Compact the log; the native log goes on with the new generation itself.

        A dry run reads the log (a writer's or a read-only reader's) and writes nothing; its
        report names the generation the compaction would make.
        """
        if plan.dry_run:
            report = self._log.compaction_plan(*plan.selection, plan.progress)
            report["generation"] = int(self._log.info()["generation"]) + 1
            return report
        report, _ = self._log.compact(
            *plan.selection, plan.at_us, plan.before_swap, plan.step, plan.progress
        )
        return report

    def snapshot_json(self) -> str:
        """The state as snapshot JSON.

        Raises:
            NotSupported: The log is in RAM (a snapshot points into a log file).
        """
        if self._path is None:
            raise NotSupported("save_snapshot: a store in RAM has no log file to open it with")
        return self._log.snapshot_json()

    def refresh(self, wait: float = 0.0) -> int:
        """Apply what the writer appended since the last look (a reader of a log file).

        Args:
            wait: Must be 0: a local reader applies what is in the file and returns; waiting
                for the next commit is a remote store's long poll.

        Raises:
            NotSupported: `wait` is not 0.
            InvalidType, InvalidValue: `wait` is not a number of seconds (a finite one, 0 or
                more), as a RemoteStore's refresh says.
        """
        if isinstance(wait, bool) or not isinstance(wait, (int, float)):
            raise InvalidType(f"wait must be a number of seconds, not {type(wait).__name__}")
        if not 0 <= wait < float("inf"):
            raise InvalidValue(f"wait: must be a finite number of seconds, 0 or more, got {wait!r}")
        if wait:
            raise NotSupported(
                f"refresh(wait={wait!r}): a local store reads its log file and returns at once; "
                "waiting for a commit is a RemoteStore's long poll"
            )
        if self._reopen is not None and self._log.replaced_on_disk():
            with self._swap:
                # Log compaction replaced the file: read the new generation from the start,
                # unless another thread just did (or the store was closed meanwhile: the
                # refresh below then says so). The old log is not closed here: calls other
                # threads are making on it end on the generation they began on, and it closes
                # when the last of them lets go of it.
                if not self._log.closed and self._log.replaced_on_disk():
                    log = self._reopen()
                    self._bind(log)
                    self._load_manifest()
                    if self._medium is not None:
                        self._medium.rebind(log)
                    return int(log.info()["records"])
        applied = self._log.refresh()
        if applied and self._medium is not None:
            self._medium.refresh()
        return applied

    @property
    def closed(self) -> bool:
        """Whether the log is closed."""
        return self._log.closed
