"""The agent-runtime roles under load: locks and idempotency keys, against SQLite.

    python benches/roles.py                 # 3 s per figure, 8 threads
    python benches/roles.py --quick         # 0.5 s per figure
    python benches/roles.py --threads 1 --seconds 5

Two workloads, each run by T threads at once (default 8), each thread on its own lock name
or its own keys (so the figures measure the store, not contention on one name):

1. lock: ``acquire(name, owner, ttl)`` then ``release(name, token)``; a figure is pairs/s;
2. idempotency: ``reserve(new key, ttl)`` then ``complete(key, token, result)``; pairs/s.

Contenders:

* memory: :class:`memcommit.roles.RoleSet` (the in-memory roles, one lock per store);
* sqlite: the same operations as SQL with fencing-token tables, WAL, ``synchronous=FULL``,
  one connection per thread, each operation one ``BEGIN IMMEDIATE`` transaction with the
  time passed as a parameter (as the contract requires of a SQL store);
* log: the log store's roles (``memcommit.open(path).locks`` ...), durable per commit. The
  column fills in by itself once stores carry the roles; until then it says so.

Prints a markdown table on stdout. Speed is reported here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
)

import memcommit
from _timed import run_for
from memcommit.roles import RoleSet

TTL_MS = 30_000
Pair = Callable[[int, int], None]
"""One unit of work: ``pair(thread_index, iteration)``."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- the role-shaped stores ------------------------------------------------------------------


def role_pairs(store: Any) -> dict[str, Pair]:
    """The two workloads over any store with ``locks`` and ``idempotency`` roles."""

    def lock(thread: int, _: int) -> None:
        name = f"lock-{thread}"
        lease = store.locks.acquire(name, f"owner-{thread}", TTL_MS)
        assert lease is not None, "a thread's own lock was held"
        assert store.locks.release(name, token=lease.token)

    def idempotency(thread: int, i: int) -> None:
        key = f"key-{thread}-{i}"
        reservation = store.idempotency.reserve(key, ttl_ms=TTL_MS)
        assert reservation.acquired
        store.idempotency.complete(key, token=reservation.record.token, result={"n": i})

    return {"lock": lock, "idempotency": idempotency}


# -- SQLite doing the same -------------------------------------------------------------------

SCHEMA = """
CREATE TABLE IF NOT EXISTS locks (
    name TEXT PRIMARY KEY, owner TEXT NOT NULL, token INTEGER NOT NULL,
    acquired_at_ms INTEGER NOT NULL, expires_at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS idempotency (
    key TEXT PRIMARY KEY, state TEXT NOT NULL, token INTEGER NOT NULL, owner TEXT,
    fingerprint TEXT, result TEXT, created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS fences (
    kind TEXT NOT NULL, name TEXT NOT NULL, last_token INTEGER NOT NULL,
    PRIMARY KEY (kind, name));
"""


def _unexpired(conn: sqlite3.Connection, query: str, key: str, now: int) -> Any:
    """The row `query` selects for `key`, or None when there is none or it has expired by
    `now` (the query selects ``expires_at_ms`` last)."""
    row = conn.execute(query, (key,)).fetchone()
    return row if row is not None and now < row[-1] else None


class SqliteRoles:
    """Locks and idempotency keys in SQLite, one connection per thread."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.local = threading.local()
        conn = self.connection()
        conn.executescript(SCHEMA)

    def connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self.local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            self.local.conn = conn
        return conn

    def _next_token(self, conn: sqlite3.Connection, kind: str, name: str) -> int:
        row = conn.execute(
            "INSERT INTO fences (kind, name, last_token) VALUES (?, ?, 1) "
            "ON CONFLICT (kind, name) DO UPDATE SET last_token = last_token + 1 "
            "RETURNING last_token",
            (kind, name),
        ).fetchone()
        return int(row[0])

    @contextlib.contextmanager
    def immediate(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection inside ``BEGIN IMMEDIATE``: committed when the block
        ends, rolled back when it raises."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def acquire(self, name: str, owner: str, ttl_ms: int) -> int | None:
        now = now_ms()
        with self.immediate() as conn:
            row = _unexpired(
                conn, "SELECT owner, token, expires_at_ms FROM locks WHERE name = ?", name, now
            )
            if row is not None:
                if row[0] != owner:
                    return None
                conn.execute(
                    "UPDATE locks SET expires_at_ms = ? WHERE name = ?", (now + ttl_ms, name)
                )
                return int(row[1])
            token = self._next_token(conn, "lock", name)
            conn.execute(
                "INSERT OR REPLACE INTO locks VALUES (?, ?, ?, ?, ?)",
                (name, owner, token, now, now + ttl_ms),
            )
            return token

    def release(self, name: str, token: int) -> bool:
        with self.immediate() as conn:
            cursor = conn.execute(
                "DELETE FROM locks WHERE name = ? AND token = ? AND expires_at_ms > ?",
                (name, token, now_ms()),
            )
        return cursor.rowcount == 1

    def reserve(self, key: str, ttl_ms: int) -> int | None:
        now = now_ms()
        with self.immediate() as conn:
            query = "SELECT expires_at_ms FROM idempotency WHERE key = ?"
            if _unexpired(conn, query, key, now) is not None:
                return None
            token = self._next_token(conn, "idempotency", key)
            conn.execute(
                "INSERT OR REPLACE INTO idempotency "
                "VALUES (?, 'pending', ?, NULL, NULL, NULL, ?, ?)",
                (key, token, now, now + ttl_ms),
            )
            return token

    def complete(self, key: str, token: int, result: Any) -> bool:
        with self.immediate() as conn:
            cursor = conn.execute(
                "UPDATE idempotency SET state = 'completed', result = ? "
                "WHERE key = ? AND token = ? AND state = 'pending' AND expires_at_ms > ?",
                (json.dumps(result, allow_nan=False), key, token, now_ms()),
            )
        return cursor.rowcount == 1


def sqlite_pairs(db: SqliteRoles) -> dict[str, Pair]:
    def lock(thread: int, _: int) -> None:
        name = f"lock-{thread}"
        token = db.acquire(name, f"owner-{thread}", TTL_MS)
        assert token is not None, "a thread's own lock was held"
        assert db.release(name, token)

    def idempotency(thread: int, i: int) -> None:
        key = f"key-{thread}-{i}"
        token = db.reserve(key, TTL_MS)
        assert token is not None
        assert db.complete(key, token, {"n": i})

    return {"lock": lock, "idempotency": idempotency}


# -- the log store (its roles land with the durable half of issue 7) -------------------------


def open_log_roles(directory: str) -> tuple[Any, str | None]:
    """Return (store, None) when the log store carries the roles, else (None, why not)."""
    store = memcommit.open(os.path.join(directory, "roles.log"))
    if hasattr(store, "locks") and hasattr(store, "idempotency"):
        return store, None
    store.close()
    return None, "the log store has no roles yet"


# -- running ---------------------------------------------------------------------------------


def measure(pair: Pair, threads: int, seconds: float) -> float:
    """Run `pair` on `threads` threads for about `seconds`; return pairs per second."""
    barrier = threading.Barrier(threads + 1)
    stop = threading.Event()
    counts = [0] * threads
    errors: list[BaseException] = []

    def run(index: int) -> None:
        barrier.wait()
        i = 0
        try:
            while not stop.is_set():
                pair(index, i)
                i += 1
        except BaseException as err:  # reported after the run
            errors.append(err)
        counts[index] = i

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    elapsed = run_for(seconds, workers, barrier.wait, stop)
    if errors:
        raise errors[0]
    return sum(counts) / elapsed


def fmt(rate: float | None) -> str:
    return "—" if rate is None else f"{rate:,.0f}"


def ratio(a: float | None, b: float | None) -> str:
    return "—" if a is None or b is None or b == 0 else f"{a / b:.1f}x"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=8, help="threads (default 8)")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per figure")
    parser.add_argument("--quick", action="store_true", help="0.5 s per figure")
    parser.add_argument("--dir", default=None, help="where the SQLite and log files go")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    seconds = 0.5 if args.quick else args.seconds
    base = tempfile.mkdtemp(prefix="memcommit-roles-bench-", dir=args.dir)
    try:
        sqlite_db = SqliteRoles(os.path.join(base, "roles.sqlite"))
        log_store, no_log = open_log_roles(base)
        contenders: dict[str, dict[str, Pair] | None] = {
            "memory": role_pairs(RoleSet()),
            "sqlite": sqlite_pairs(sqlite_db),
            # The log store's column: the same role_pairs over a durable store.
            "log": None if log_store is None else role_pairs(log_store),
        }
        rates: dict[tuple[str, str], float | None] = {}
        for workload in ("lock", "idempotency"):
            for name, pairs in contenders.items():
                if pairs is None:
                    rates[(workload, name)] = None
                    continue
                print(f"{workload} / {name} ...", file=sys.stderr, flush=True)
                rates[(workload, name)] = measure(pairs[workload], args.threads, seconds)
        if log_store is not None:
            log_store.close()
        print(f"## Roles, {args.threads} threads, {seconds:g} s per figure (pairs/s)\n")
        print(
            f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}; "
            f"log store: {no_log or 'durable per commit'}\n"
        )
        header = ("workload", "memory", "sqlite (WAL, FULL)", "log store", "memory / sqlite")
        print("| " + " | ".join((*header, "log / sqlite")) + " |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        labels = {
            "lock": "lock acquire + release",
            "idempotency": "idempotency reserve + complete",
        }
        for workload, label in labels.items():
            memory = rates[(workload, "memory")]
            sqlite = rates[(workload, "sqlite")]
            log = rates[(workload, "log")]
            print(
                f"| {label} | {fmt(memory)} | {fmt(sqlite)} | {fmt(log)} | "
                f"{ratio(memory, sqlite)} | {ratio(log, sqlite)} |"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
