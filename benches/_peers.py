"""Records and contenders for ``benches/compare.py``.

Every contender gets the same records: tuples ``(id, kind, task, text)`` made
deterministically by :func:`make_records`. Each function here does one measured
thing against a fresh directory and returns plain numbers; ``compare.py`` prints them.
"""

from __future__ import annotations

import base64
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Record = tuple[str, str, str, str]  # (id, kind, task, text)

AGENTS = 100
TASKS = 1000
TEXT_CHARS = 120
KINDS = ("trace", "fact", "note")
_CROCKFORD = bytes.maketrans(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", b"0123456789ABCDEFGHJKMNPQRSTVWXYZ"
)
_WORDS = (
    "user prefers dark mode and short answers; the build failed on step three because the "
    "cache key changed after the lockfile update so the agent retried with a clean workspace "
    "then opened a ticket about flaky network tests in the payments service while the planner "
    "summarised yesterday's incident report for the on-call engineer who asked for a rollback "
    "plan covering the database migration the search index and the billing export job"
).split()


def make_records(n: int, seed: int = 20260101) -> list[Record]:
    """Return ``n`` records, the same for every run with the same ``seed``.

    Ids are 26-character ULID-style strings (48-bit millisecond time + 80 random bits,
    Crockford base32) that sort by creation, as generated ids do. Records are spread
    over ``AGENTS`` agents and ``TASKS`` tasks (task ``t`` belongs to agent ``t % AGENTS``);
    kinds are 60% trace, 30% fact, 10% note; texts are exactly ``TEXT_CHARS`` characters.
    """
    rng = random.Random(seed)
    tasks = [f"agent-{t % AGENTS:03d}/task-{t:04d}" for t in range(TASKS)]
    kinds = [KINDS[0]] * 6 + [KINDS[1]] * 3 + [KINDS[2]]
    base_ms = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    out: list[Record] = []
    words = _WORDS
    for i in range(n):
        raw = ((base_ms + i) << 80 | rng.getrandbits(80)).to_bytes(16, "big")
        # 128 bits -> 26 base32 digits; b32encode pads at the end, which keeps byte order.
        rid = base64.b32encode(raw)[:26].translate(_CROCKFORD).decode("ascii")
        t = rng.randrange(TASKS)
        kind = kinds[rng.randrange(10)]
        head = f"{kind} #{i} by agent {t % AGENTS}: "
        body = " ".join(rng.choices(words, k=24))
        text = (head + body)[:TEXT_CHARS].ljust(TEXT_CHARS, ".")
        out.append((rid, kind, tasks[t], text))
    return out


@dataclass
class Timing:
    """A batch measurement: total seconds, of which the commit (write-out + fsync).

    ``close_seconds``: the store's close after the timing (memcommit writes its index file
    then), reported beside the figure, not in it."""

    seconds: float
    commit_seconds: float
    calls: int = 0
    close_seconds: float = 0.0


def lmdb_value(kind: str, task: str, text: str) -> bytes:
    """Encode a record's fields for LMDB: ``kind \\x1f task \\x1f text`` in UTF-8."""
    return f"{kind}\x1f{task}\x1f{text}".encode()


def lmdb_map_size(n: int) -> int:
    """Map size big enough for ``n`` records with room to spare (the file is sparse)."""
    return max(1 << 30, n * 2048)


def dir_bytes(path: str) -> int:
    """Total size of the files under ``path`` (or of ``path`` itself if it is a file)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
    return total


# --------------------------------------------------------------------------------------
# SQLite


def sqlite_connect(path: str) -> sqlite3.Connection:
    """Open ``path`` in WAL mode with ``synchronous=FULL``, autocommit (we BEGIN ourselves)."""
    con = sqlite3.connect(path, isolation_level=None, timeout=600.0)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    return con


def sqlite_create(path: str) -> sqlite3.Connection:
    con = sqlite_connect(path)
    con.execute("CREATE TABLE IF NOT EXISTS memories (id TEXT PRIMARY KEY, kind, task, text)")
    return con


def sqlite_batch(path: str, recs: Sequence[Record]) -> Timing:
    """Insert every record with one ``executemany`` in one transaction; COMMIT included."""
    con = sqlite_create(path)
    t0 = time.perf_counter()
    con.execute("BEGIN")
    con.executemany("INSERT INTO memories (id, kind, task, text) VALUES (?, ?, ?, ?)", recs)
    t1 = time.perf_counter()
    con.execute("COMMIT")
    t2 = time.perf_counter()
    con.close()
    return Timing(t2 - t0, t2 - t1)


# --------------------------------------------------------------------------------------
# LMDB


def lmdb_env(path: str, n: int, *, readonly: bool = False) -> Any:
    import lmdb

    return lmdb.open(
        path,
        map_size=lmdb_map_size(n),
        sync=True,
        metasync=True,
        readonly=readonly,
        max_dbs=0,
        max_readers=64,
    )


def lmdb_batch_putmulti(path: str, recs: Sequence[Record]) -> Timing:
    """One write txn, ``cursor.putmulti``; encoding the values is inside the timing."""
    env = lmdb_env(path, len(recs))
    t0 = time.perf_counter()
    txn = env.begin(write=True)
    txn.cursor().putmulti(
        (rid.encode(), lmdb_value(kind, task, text)) for rid, kind, task, text in recs
    )
    t1 = time.perf_counter()
    txn.commit()
    t2 = time.perf_counter()
    env.close()
    return Timing(t2 - t0, t2 - t1)


def lmdb_batch_put_loop(path: str, recs: Sequence[Record]) -> Timing:
    """One write txn, one ``txn.put`` per record; encoding inside the timing."""
    env = lmdb_env(path, len(recs))
    t0 = time.perf_counter()
    txn = env.begin(write=True)
    put = txn.put
    for rid, kind, task, text in recs:
        put(rid.encode(), lmdb_value(kind, task, text))
    t1 = time.perf_counter()
    txn.commit()
    t2 = time.perf_counter()
    env.close()
    return Timing(t2 - t0, t2 - t1)


# --------------------------------------------------------------------------------------
# memcommit (written against the public API only)


class _Timed:
    """Wrap a context manager and note when its ``__exit__`` starts (the commit)."""

    def __init__(self, cm: Any) -> None:
        self.cm = cm
        self.exit_started = 0.0

    def __enter__(self) -> Any:
        return self.cm.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        self.exit_started = time.perf_counter()
        return self.cm.__exit__(*exc)


def memcommit_batch_put_loop(path: str, recs: Sequence[Record]) -> Timing:
    """``with store.commit() as c:`` and one ``c.put`` per record; the commit's fsync included."""
    import memcommit

    store = memcommit.open(path, durability="commit")
    try:
        t0 = time.perf_counter()
        timed = _Timed(store.commit())
        with timed as c:
            put = c.put
            for rid, kind, task, text in recs:
                put(text, kind=kind, id=rid, task=task)
        t2 = time.perf_counter()
        assert len(store) == len(recs), (len(store), len(recs))
    finally:
        t3 = time.perf_counter()
        store.close()
    return Timing(t2 - t0, t2 - timed.exit_started, close_seconds=time.perf_counter() - t3)


def memcommit_batch_put_many(path: str, recs: Sequence[Record]) -> Timing:
    """One commit of one ``c.put_many`` call, with a kind and a task per record.

    The records are split into columns (ids, kinds, tasks, texts) first, inside the timing,
    and land in the log in input order. ``Timing.calls`` is the number of ``put_many`` calls.
    """
    import memcommit

    store = memcommit.open(path, durability="commit")
    try:
        t0 = time.perf_counter()
        ids = [r[0] for r in recs]
        kinds = [r[1] for r in recs]
        tasks = [r[2] for r in recs]
        texts = [r[3] for r in recs]
        timed = _Timed(store.commit())
        with timed as c:
            c.put_many(texts, ids=ids, kind=kinds, task=tasks)
        t2 = time.perf_counter()
        assert len(store) == len(recs), (len(store), len(recs))
    finally:
        t3 = time.perf_counter()
        store.close()
    return Timing(t2 - t0, t2 - timed.exit_started, 1, time.perf_counter() - t3)


def memcommit_batch_put_rows(path: str, recs: Sequence[Record]) -> Timing:
    """One commit of one ``c.put_rows`` call on the records as they are (tuples).

    ``fields=("id", "kind", "task", "text")`` names the tuples' order, so nothing is split or
    copied in Python. ``Timing.calls`` is the number of ``put_rows`` calls.
    """
    import memcommit

    store = memcommit.open(path, durability="commit")
    try:
        t0 = time.perf_counter()
        timed = _Timed(store.commit())
        with timed as c:
            c.put_rows(recs, fields=("id", "kind", "task", "text"))
        t2 = time.perf_counter()
        assert len(store) == len(recs), (len(store), len(recs))
    finally:
        t3 = time.perf_counter()
        store.close()
    return Timing(t2 - t0, t2 - timed.exit_started, 1, time.perf_counter() - t3)


# --------------------------------------------------------------------------------------
# Durable single-put commits from T threads


@dataclass
class DurableResult:
    threads: int
    commits: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.commits / self.seconds if self.seconds > 0 else 0.0


def run_threads(
    threads: int,
    per_thread: int,
    max_seconds: float,
    recs: Sequence[Record],
    make_worker: Callable[[int], Callable[[Record], None]],
    close_worker: Callable[[int], None] | None = None,
) -> DurableResult:
    """Run ``threads`` threads, each committing up to ``per_thread`` records one at a time.

    Thread ``k`` takes records ``recs[k*per_thread:(k+1)*per_thread]``. ``make_worker(k)``
    is called in thread ``k`` before the start barrier (so per-thread setup such as opening
    a connection is not timed) and returns the function that commits one record. Every
    thread stops early once ``max_seconds`` have passed; the rate is commits / wall time.
    """
    start = threading.Barrier(threads + 1)
    done = [0] * threads
    errors: list[BaseException] = []
    deadline = [0.0]

    def body(k: int) -> None:
        try:
            commit_one = make_worker(k)
        except BaseException as e:  # keep the barrier from hanging
            errors.append(e)
            start.abort()
            return
        try:
            start.wait()
        except threading.BrokenBarrierError:
            return
        try:
            mine = recs[k * per_thread : (k + 1) * per_thread]
            end = deadline[0]
            clock = time.perf_counter
            count = 0
            for r in mine:
                commit_one(r)
                count += 1
                if clock() > end:
                    break
            done[k] = count
        except BaseException as e:
            errors.append(e)
        finally:
            if close_worker is not None:
                close_worker(k)

    ts = [threading.Thread(target=body, args=(k,), daemon=True) for k in range(threads)]
    for t in ts:
        t.start()
    try:
        deadline[0] = time.perf_counter() + max_seconds
        t0 = time.perf_counter()
        start.wait()
    except threading.BrokenBarrierError:
        t0 = time.perf_counter()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return DurableResult(threads, sum(done), dt)


def sqlite_durable(
    path: str, threads: int, per_thread: int, max_seconds: float, recs: Sequence[Record]
) -> DurableResult:
    """Each thread has its own connection; each INSERT is its own (autocommit) transaction."""
    sqlite_create(path).close()
    cons: dict[int, sqlite3.Connection] = {}

    def make(k: int) -> Callable[[Record], None]:
        con = cons[k] = sqlite_connect(path)
        con.execute("PRAGMA busy_timeout=600000")
        sql = "INSERT INTO memories (id, kind, task, text) VALUES (?, ?, ?, ?)"
        execute = con.execute

        def one(r: Record) -> None:
            execute(sql, r)

        return one

    def close(k: int) -> None:
        con = cons.pop(k, None)
        if con is not None:
            con.close()

    return run_threads(threads, per_thread, max_seconds, recs, make, close)


def lmdb_durable(
    path: str, threads: int, per_thread: int, max_seconds: float, recs: Sequence[Record]
) -> DurableResult:
    """One shared environment (sync=True); each put is its own write transaction."""
    env = lmdb_env(path, max(len(recs), 1))

    def make(_k: int) -> Callable[[Record], None]:
        def one(r: Record) -> None:
            rid, kind, task, text = r
            with env.begin(write=True) as txn:
                txn.put(rid.encode(), lmdb_value(kind, task, text))

        return one

    try:
        return run_threads(threads, per_thread, max_seconds, recs, make)
    finally:
        env.close()


def memcommit_durable(
    path: str, threads: int, per_thread: int, max_seconds: float, recs: Sequence[Record]
) -> DurableResult:
    """One store (durability="commit"); each ``store.put`` is its own durable commit."""
    import memcommit

    store = memcommit.open(path, durability="commit")

    def make(_k: int) -> Callable[[Record], None]:
        put = store.put

        def one(r: Record) -> None:
            rid, kind, task, text = r
            put(text, kind=kind, id=rid, task=task)

        return one

    try:
        res = run_threads(threads, per_thread, max_seconds, recs, make)
        assert len(store) == res.commits, (len(store), res.commits)
        return res
    finally:
        store.close()
