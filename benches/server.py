"""Benchmark: commits through `memcommit serve` on loopback, against SQLite FULL in one process.

For 1, 8 and 32 concurrent clients, each client commits one memory per commit (durability
``commit``: a commit is answered once fsynced) and the table gives commits/s and the p50/p99
latency of a commit as its client saw it. Clients are threads: either sharing one RemoteStore
(``threads``: the store pipelines its threads' commits into shared requests) or each in its
own process with its own RemoteStore (``processes``). The refresh lag is the time from a
commit's acknowledgement to a follower (``refresh(wait=...)``, a long poll) having it.
SQLite runs the same workload in one process: a connection per thread, WAL, synchronous=FULL,
one INSERT per transaction.

Run: ``python benches/server.py`` (``--quick`` for a smoke run; ``--seconds``, ``--mode``).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import memcommit
from _timed import run_for
from memcommit.testing import ServerProcess

TEXT = "The user asked to keep the summary short and to cite the source documents. " * 2


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _drive(
    clients: int,
    seconds: float,
    commit: Callable[[int, int], None],
    ready: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Run `clients` threads committing for `seconds`; return rate and latencies.

    `ready` is called once the threads are set up and before the clock starts (a process
    waits there for its siblings).
    """
    latencies: list[list[float]] = [[] for _ in range(clients)]
    start = threading.Barrier(clients + 1)
    stop = threading.Event()

    def work(n: int) -> None:
        mine = latencies[n]
        start.wait()
        i = 0
        while not stop.is_set():
            t0 = time.perf_counter()
            commit(n, i)
            mine.append(time.perf_counter() - t0)
            i += 1

    def go() -> None:
        ready()
        start.wait()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(clients)]
    elapsed = run_for(seconds, threads, go, stop)
    flat = [x for per in latencies for x in per]
    return {
        "commits": len(flat),
        "rate": len(flat) / elapsed,
        "mean_ms": sum(flat) / max(1, len(flat)) * 1e3,
        "p50_ms": _percentile(flat, 0.50) * 1e3,
        "p99_ms": _percentile(flat, 0.99) * 1e3,
        "p999_ms": _percentile(flat, 0.999) * 1e3,
    }


def _remote_threads(
    url: str, clients: int, seconds: float, ready: Callable[[], None] = lambda: None
) -> dict[str, Any]:
    store = memcommit.RemoteStore(url)
    try:
        return _drive(
            clients,
            seconds,
            lambda n, i: store.put(TEXT, kind="note", task=f"client-{n}"),
            ready,
        )
    finally:
        store.close()


def _process_client(url: str, threads: int, seconds: float, go: Any, out: Any) -> None:
    def ready() -> None:
        go.wait()  # every process starts its clock together

    out.put(_remote_threads(url, threads, seconds, ready))


def _remote_processes(url: str, clients: int, seconds: float) -> dict[str, Any]:
    """`clients` processes (at most 8, each with clients/8 threads and its own RemoteStore)."""
    procs = min(clients, 8)
    per = clients // procs
    ctx = multiprocessing.get_context("spawn")
    out, go = ctx.Queue(), ctx.Barrier(procs)
    workers = [
        ctx.Process(target=_process_client, args=(url, per, seconds, go, out)) for _ in range(procs)
    ]
    for w in workers:
        w.start()
    results = [out.get() for _ in workers]
    for w in workers:
        w.join()
    # Rates add up; the latencies shown are the worst process's.
    out_ = {key: max(r[key] for r in results) for key in ("mean_ms", "p50_ms", "p99_ms", "p999_ms")}
    out_.update(
        commits=sum(r["commits"] for r in results),
        rate=sum(r["rate"] for r in results),
        processes=procs,
    )
    return out_


def _sqlite(path: str, clients: int, seconds: float) -> dict[str, Any]:
    setup = sqlite3.connect(path)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute(
        "CREATE TABLE IF NOT EXISTS memory "
        "(id INTEGER PRIMARY KEY, task TEXT, kind TEXT, text TEXT)"
    )
    setup.commit()
    setup.close()
    local = threading.local()

    def commit(n: int, i: int) -> None:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = sqlite3.connect(path, timeout=60, isolation_level=None)
            conn.execute("PRAGMA synchronous=FULL")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO memory (task, kind, text) VALUES (?, ?, ?)", (f"client-{n}", "note", TEXT)
        )
        conn.execute("COMMIT")

    return _drive(clients, seconds, commit)


def _refresh_lag(url: str, writers: int, seconds: float) -> dict[str, Any]:
    """Lag from a commit's acknowledgement to a following replica having it."""
    writer = memcommit.RemoteStore(url)
    follower = memcommit.RemoteStore(url)
    acked: dict[int, float] = {}
    seen: dict[int, float] = {}
    stop = threading.Event()

    def follow() -> None:
        while not stop.is_set():
            before = follower.lsn
            follower.refresh(wait=1.0)
            now = time.perf_counter()
            for lsn in range(before + 1, follower.lsn + 1):
                seen[lsn] = now

    def commit(n: int, i: int) -> None:
        with writer.commit() as c:
            c.put(TEXT, kind="note", task=f"writer-{n}")
        acked[c.lsn or 0] = time.perf_counter()
        time.sleep(0.001)  # a steady stream, not a flood: the lag, not the queue

    follower.refresh()
    thread = threading.Thread(target=follow)
    thread.start()
    _drive(writers, seconds, commit)
    time.sleep(0.5)
    stop.set()
    thread.join()
    lags = [max(0.0, seen[lsn] - t) for lsn, t in acked.items() if lsn in seen]
    writer.close()
    follower.close()
    return {
        "samples": len(lags),
        "p50_ms": _percentile(lags, 0.5) * 1e3,
        "p99_ms": _percentile(lags, 0.99) * 1e3,
    }


def _row(clients: int, label: str, r: dict[str, Any]) -> str:
    return (
        f"| {clients} | {label} | {r['rate']:,.0f} | {r['mean_ms']:.2f} | {r['p50_ms']:.2f} "
        f"| {r['p99_ms']:.2f} | {r['p999_ms']:.2f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="per measurement (default 4)")
    parser.add_argument("--clients", default="1,8,32", help="client counts (default 1,8,32)")
    parser.add_argument("--mode", choices=("threads", "processes", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 0.5 s each")
    args = parser.parse_args(argv)
    seconds = 0.5 if args.quick else args.seconds
    counts = [int(c) for c in args.clients.split(",")]
    modes = ["threads", "processes"] if args.mode == "both" else [args.mode]
    print(f"# memcommit serve on loopback, durability commit; {os.cpu_count()} CPUs")
    print(f"# Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, {seconds:g} s each")
    print()
    print("| clients | store | commits/s | mean ms | p50 ms | p99 ms | p99.9 ms |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        with ServerProcess(os.path.join(tmp, "served.db")) as server:
            for clients in counts:
                for mode in modes:
                    run = _remote_threads if mode == "threads" else _remote_processes
                    r = run(server.url, clients, seconds)
                    label = (
                        "RemoteStore, threads sharing one store"
                        if mode == "threads"
                        else f"RemoteStore, {r['processes']} process(es), a store each"
                    )
                    print(_row(clients, label, r), flush=True)
                r = _sqlite(os.path.join(tmp, f"sqlite-{clients}.db"), clients, seconds)
                print(_row(clients, "SQLite WAL synchronous=FULL, one process", r), flush=True)
            print()
            print("| writers | refresh lag p50 ms | p99 ms | samples |")
            print("| ---: | ---: | ---: | ---: |")
            for writers in (1, 8):
                lag = _refresh_lag(server.url, writers, seconds)
                print(
                    f"| {writers} | {lag['p50_ms']:.2f} | {lag['p99_ms']:.2f} | {lag['samples']} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
