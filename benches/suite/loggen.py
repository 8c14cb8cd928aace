"""Large logs with realistic histories, generated once per size and kept in a cache.

A generated log is what a long-running agent's store looks like: memories (about a tenth
of the records) put, put again (a new version under the same id), marked stale, restored,
moved between tiers, tasks finished; bursts of role entities between the memory commits
(runs created, claimed and completed, their steps started and completed, agent state
overwritten, some runs deleted); and a seal every twentieth of the log. Records are stamped
by a clock that runs over :data:`SPAN_MS` (120 days from 2026-01-01), so the retention of
:data:`RETENTION`, judged at the log's last record (``GeneratedLog.end_ms``), purges a share
of it.

The same size and :data:`GENERATOR_VERSION` make the same log (a seeded generator, fixed ids,
a fixed clock). It is built once into the cache directory (``$MEMCOMMIT_BENCH_CACHE``, else
``benches/.cache``) as ``history-<records>-v<version>.db`` and its description ``.json``,
written last: a log without its ``.json`` is an interrupted build and is built again. Bump
the version whenever the generator, or the log format, changes. Benchmarks never write the
cached log: they open it read-only or work on a copy.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import _peers
import memcommit
import run_queue
from memcommit.seals import seal
from memcommit.storage import ArchivedOlderThan, KindsAfter, RetentionPolicy
from memcommit.testing import ControllableClock

GENERATOR_VERSION = 3
"""3: the roles' writes carry the entries of their kept groupings (so a log of N records
holds fewer memories than version 2's); 2: a new memory in one record of ten."""
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SPAN_MS = 120 * 86_400_000
RETENTION: RetentionPolicy = ArchivedOlderThan(seconds=30 * 86400) | KindsAfter(
    {"trace": 60 * 86400}
)
"""The retention the retention benchmarks compact with: old archived memories, old traces."""

TIERS = ("working", "mid", "long", "archive")
KINDS = ("trace",) * 6 + ("fact",) * 3 + ("note",)
OPS = ("put", "reput", "stale", "restore", "move", "finish")
OP_WEIGHTS = (11, 28, 18, 12, 30, 1)
"""What the memory operations of a commit are, and how often each comes. Memory operations are
some 87% of the log's records (the role bursts write the rest), so about one record in ten
puts a new memory and each memory has some nine more behind it: versions, status changes,
moves."""
SIDECARS = (".index", ".manifest", ".lock")


@dataclass(frozen=True)
class GeneratedLog:
    """A generated log in the cache.

    Attributes:
        path: The log file (never written by a benchmark).
        records: Records in it.
        memories: Memories it holds.
        bytes: Its size.
        end_ms: The clock at its last record: retention is judged at this time.
        build_seconds: How long building it took.
        version: The generator's version that built it.
    """

    path: str
    records: int
    memories: int
    bytes: int
    end_ms: int
    build_seconds: float
    version: int = GENERATOR_VERSION

    def clock(self) -> ControllableClock:
        """A clock at the log's last record, for a store that compacts it with retention."""
        return ControllableClock(self.end_ms)


def cache_dir() -> Path:
    """Where generated logs are kept: ``$MEMCOMMIT_BENCH_CACHE``, else ``benches/.cache``."""
    configured = os.environ.get("MEMCOMMIT_BENCH_CACHE")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parent.parent / ".cache"


def generated_log(records: int, cache: Path | None = None) -> GeneratedLog:
    """The generated log of about `records` records, built into the cache unless it is there."""
    where = cache if cache is not None else cache_dir()
    where.mkdir(parents=True, exist_ok=True)
    stem = f"history-{records}-v{GENERATOR_VERSION}"
    log, described = where / f"{stem}.db", where / f"{stem}.json"
    if described.exists() and log.exists():
        found = GeneratedLog(**json.loads(described.read_text(encoding="utf-8")))
        if found.bytes == log.stat().st_size and found.path == str(log):
            return found
    for stale in (described, log, *(Path(f"{log}{s}") for s in SIDECARS)):
        stale.unlink(missing_ok=True)
    made = build(str(log), records)
    partial = described.with_suffix(".json.partial")
    partial.write_text(json.dumps(asdict(made), indent=2), encoding="utf-8")
    partial.replace(described)
    return made


def build(path: str, records: int, seed: int = 16) -> GeneratedLog:
    """Write a log of about `records` records with the histories of the module docstring."""
    started = time.perf_counter()
    rng = random.Random(seed)
    texts = [text for _, _, _, text in _peers.make_records(1024, seed)]
    per_commit = max(100, min(5_000, records // 40))
    seal_every = max(1_000, records // 20)
    clock = ControllableClock(START_MS)
    step_ms = max(1, SPAN_MS * per_commit // max(records, 1))
    created = runs = sealed = 0
    store = memcommit.open(path, durability="none", clock=clock)
    try:
        while store.lsn < records:
            ops = rng.choices(OPS, weights=OP_WEIGHTS, k=min(per_commit, records - store.lsn))
            with store.commit() as c:
                for op in ops:
                    if op == "put" or created == 0:
                        c.put(
                            texts[created % len(texts)],
                            id=memory_id(created),
                            kind=KINDS[created % len(KINDS)],
                            task=task_of(created),
                        )
                        created += 1
                        continue
                    index = rng.randrange(created)
                    mid = memory_id(index)
                    if op == "reput":
                        text = f"{texts[rng.randrange(len(texts))]} (revised at {clock.now_ms()})"
                        c.put(text, id=mid, kind=KINDS[index % len(KINDS)], task=task_of(index))
                    elif op == "stale":
                        c.stale(mid, reason="superseded")
                    elif op == "restore":
                        c.restore(mid)
                    elif op == "move":
                        c.move(mid, TIERS[rng.randrange(len(TIERS))])
                    else:
                        c.finish_task(task_of(index))
            clock.advance(step_ms)
            if store.lsn < records:
                runs = _role_burst(store, runs, max(1, len(ops) // 100))
            if store.lsn // seal_every > sealed:
                seal(store)
                sealed = store.lsn // seal_every
        end_ms, count, memories = clock.now_ms(), store.lsn, len(store)
    finally:
        store.close()
    return GeneratedLog(
        path=path,
        records=count,
        memories=memories,
        bytes=os.path.getsize(path),
        end_ms=end_ms,
        build_seconds=time.perf_counter() - started,
    )


@dataclass(frozen=True)
class RunQueueLog:
    """A log with a run queue added (see :func:`add_run_queue`).

    Attributes:
        path: The log.
        added: Runs added to it.
        runs: Runs it holds (those it had, and the added ones).
        pending: Of those, how many are pending.
        fill_seconds: How long adding the runs took.
    """

    path: str
    added: int
    runs: int
    pending: int
    fill_seconds: float


def add_run_queue(path: str, runs: int, open_runs: int) -> RunQueueLog:
    """Add `runs` runs to the log at `path` through the public API, as
    ``benches/run_queue.py`` fills its store (each with a conversation turn; all but
    `open_runs` claimed and completed; ``durability="none"``)."""
    with memcommit.open(path, durability="none") as store:
        store.engine.view().chain_hex()  # the writer's chain caught up before the fill
        seconds = run_queue.fill(store, runs, open_runs)
        made = RunQueueLog(
            path=path,
            added=runs,
            runs=len(store.runs.list()),
            pending=len(store.runs.list(status="pending")),
            fill_seconds=seconds,
        )
    if made.pending != open_runs:
        raise AssertionError(f"the run queue holds {made.pending} pending runs, not {open_runs}")
    return made


def memory_id(index: int) -> str:
    """The id of the `index`-th memory the generator put (0 to ``GeneratedLog.memories - 1``)."""
    return f"mem-{index:010d}"


def task_of(index: int) -> str:
    """The task of the `index`-th memory (fifty memories a task, in the order they were put)."""
    return f"task-{index // 50:08d}"


def _role_burst(store: memcommit.MemoryStore, serial: int, count: int) -> int:
    """Run `count` agent runs through the store's roles; return the next run's serial."""
    for n in range(serial, serial + count):
        agent = f"agent-{n % 20:02d}"
        run = store.runs.create(agent_id=agent, input={"task": n}, run_id=f"run-{n:010d}")
        claim = store.runs.claim(run.run_id, worker_id=f"worker-{n % 4}", ttl_ms=60_000)
        for step in ("plan", "act"):
            store.steps.start(run.run_id, step, name=step, input={"n": n}, token=claim.token)
            store.steps.complete(run.run_id, step, output={"ok": True}, token=claim.token)
        store.state.put(("agents", agent), f"key-{n % 100}", {"last_run": n})
        store.runs.complete(run.run_id, token=claim.token, output={"done": n})
        if n % 4 == 0:
            store.runs.delete(run.run_id)
    return serial + count
