"""The writer: the one thread that runs every commit, role call and seal.

It takes everything queued at once (up to :data:`MAX_BATCH` units), serves the log reads
queued to it first (everything in the log then was made durable by the previous batch; most
log reads are answered on the event loop instead, up to the head of the :class:`Identity` the
last batch reported), runs the commits
in arrival order, each checked against the state its predecessors left, then makes the whole
batch durable with one fsync before any of it is answered: group commit. See
:mod:`memcommit.server` for why one thread.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import wire
from ..commit import Commit
from ..engine import LogView
from ..errors import MemcommitError
from ..ops import apply
from ..store import MemoryStore

__all__ = [
    "CALL",
    "COMMIT",
    "FLUSH",
    "MAX_BATCH",
    "READ",
    "SEAL",
    "SNAPSHOT",
    "WRITES",
    "Group",
    "Identity",
    "Work",
    "Writer",
    "apply_ops",
]

MAX_BATCH = 4_096  # commits the writer takes at once: bounds the latency of a huge backlog

COMMIT, CALL, READ, SNAPSHOT, FLUSH, SEAL = range(6)
"""The kinds of :class:`Work`: memory operations, a role call, a log read, a snapshot read,
a flush and a seal."""

WRITES = (COMMIT, CALL, SEAL)
"""The kinds of work that may write (and are counted as commits)."""


class Group:
    """The works of one request: one future, resolved when the last of them is done."""

    __slots__ = ("future", "remaining")

    def __init__(self, future: asyncio.Future[None], remaining: int) -> None:
        self.future = future
        self.remaining = remaining


class Work:
    """One unit for the writer: a commit, a role call, a log read or a flush."""

    __slots__ = ("commit_id", "group", "kind", "queued_at", "result", "spec", "waiters", "wrote")

    def __init__(self, kind: int, spec: Any, group: Group, commit_id: str | None = None) -> None:
        self.kind = kind
        self.spec = spec
        self.group = group
        self.commit_id = commit_id
        self.queued_at = time.perf_counter()
        self.result: Any = None
        self.wrote = False
        # Futures of resends of this commit that arrived while it was in flight (rare).
        self.waiters: list[asyncio.Future[Any]] | None = None


_STOP = object()


@dataclass(frozen=True)
class Identity:
    """What names the log a client follows: its store id and generation, and the head.

    `view` is that generation's log, to read (None: read through the writer).
    """

    store_id: str
    generation: int
    head: int
    view: LogView | None = field(default=None, compare=False, repr=False)


class Writer:
    """The one thread that runs every commit, role call and log read (module docstring)."""

    def __init__(
        self,
        store: MemoryStore,
        loop: asyncio.AbstractEventLoop,
        sync_each_batch: bool,
        done: Callable[[list[Work], Identity], None],
    ) -> None:
        self._store = store
        # The store's engine goes on with the new generation after log compaction itself.
        self._engine = store.engine
        self._loop = loop
        self._sync = sync_each_batch
        self._done = done
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="memcommit-writer", daemon=True)
        self.batches = 0
        self.fsyncs = 0
        self.batched_commits = 0
        self.failed: str | None = None

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def submit(self, works: list[Work]) -> None:
        """Queue works (those of one request go in one put, so one batch usually has them)."""
        self._queue.put(works)

    def stop(self) -> None:
        """Finish everything queued, then end the thread (blocks until it has)."""
        self._queue.put(_STOP)
        self._thread.join()

    def identity(self) -> Identity:
        """The store id, generation and head of the log the writer writes now, and the log."""
        view = self._engine.view()
        info = view.info()
        return Identity(str(info["store_id"]), int(info["generation"]), int(info["lsn"]), view)

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch: list[Work] = []
            item = self._queue.get()
            while True:
                if item is _STOP:
                    stopping = True
                else:
                    batch.extend(item)
                if len(batch) >= MAX_BATCH:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                try:
                    self._run_batch(batch)
                except BaseException as e:  # a bug: answer the batch rather than hang it
                    self.failed = f"the writer failed: {type(e).__name__}: {e}"
                    failure = {"ok": False, "error": wire.encode_error(e)}
                    for work in batch:
                        if work.result is None:
                            work.result = e if work.kind in (READ, SNAPSHOT) else failure
                    self._loop.call_soon_threadsafe(self._done, batch, Identity("", 0, 0))

    def _run_batch(self, batch: list[Work]) -> None:
        # Reads first: everything in the log now was made durable by the previous batch.
        for work in batch:
            if work.kind in (READ, SNAPSHOT):
                work.result = self._read(work)
        wrote = False
        for work in batch:
            if work.kind == COMMIT:
                work.result = self._commit(work)
            elif work.kind == CALL:
                work.result = self._call(work)
            elif work.kind == FLUSH:
                work.result = self._flush_all()
            elif work.kind == SEAL:
                work.result = self._seal(work)
            wrote = wrote or work.wrote
        if wrote and self._sync:
            failure = self._flush_all()
            if failure is not None:
                for work in batch:
                    if work.wrote:
                        work.result = failure
        self.batches += 1
        self.batched_commits += sum(1 for w in batch if w.kind in WRITES)
        try:
            identity = self.identity()
        except MemcommitError:  # closed under us: answer with what the batch knew
            identity = Identity("", 0, 0)
        self._loop.call_soon_threadsafe(self._done, batch, identity)

    def _flush_all(self) -> dict[str, Any] | None:
        try:
            self._engine.flush()
            self.fsyncs += 1
            return None
        except Exception as e:  # WriterFailed: the log is poisoned; every later write fails
            self.failed = str(e)
            return {"ok": False, "error": wire.encode_error(e)}

    def _commit(self, work: Work) -> dict[str, Any]:
        spec = work.spec
        try:
            with self._store.commit(expect_lsn=spec["expect_lsn"]) as c:
                apply_ops(c, spec["ops"])
        except Exception as e:
            return {"ok": False, "error": wire.encode_error(e)}
        work.wrote = c.lsn is not None
        return {"ok": True, "first_lsn": c.first_lsn, "lsn": c.lsn}

    def _call(self, work: Work) -> dict[str, Any]:
        spec = work.spec
        before = self._engine.view().lsn
        try:
            method = getattr(getattr(self._store, spec["role"]), spec["method"])
            value = method(*spec["args"], **spec["kwargs"])
            encoded = wire.encode_value(value)
        except Exception as e:
            work.wrote = (
                self._engine.view().lsn != before
            )  # a refused call writes nothing, but check
            return {"ok": False, "error": wire.encode_error(e)}
        after = self._engine.view().lsn
        work.wrote = after != before
        return {"ok": True, "value": encoded, "lsn": after if work.wrote else None}

    def _seal(self, work: Work) -> dict[str, Any]:
        try:
            sealed = self._engine.seal(self._store.now_us(), work.spec["key"])
        except Exception as e:
            return {"ok": False, "error": wire.encode_error(e)}
        work.wrote = True
        return {"ok": True, "seal": list(sealed), "first_lsn": sealed[1], "lsn": sealed[1]}

    def _read(self, work: Work) -> Any:
        after, max_bytes, want = work.spec
        try:
            identity = self.identity()
            if work.kind == SNAPSHOT:
                data, last = self._engine.view().read_raw(0, max_bytes)
                return identity, self._engine.view().header() + data, last
            if want is not None and (
                want[0] != identity.store_id or want[1] != identity.generation
            ):
                return identity, None, after
            data, last = self._engine.view().read_raw(after, max_bytes)
            return identity, data, last
        except Exception as e:
            return e


def apply_ops(c: Commit, ops: list[list[Any]]) -> None:
    """Run a commit's wire operations on a native commit (arguments checked there)."""
    for op in ops:
        apply(c, op)
