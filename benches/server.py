"""Benchmark: commits through `memcommit serve`, against SQLite FULL from the same processes.

For 1, 8 and 32 concurrent clients, each client commits one memory per commit (durability
``commit``: a commit is answered once fsynced) and the table gives commits/s, the p50/p99
latency of a commit as its client saw it, and the CPU time per commit of the server and of
the clients. Clients are threads: either sharing one RemoteStore (``threads``: the store
pipelines its threads' commits into shared requests) or spread over up to 8 processes, each
with its own RemoteStore (``processes``). They reach the server over TCP on loopback or over
its Unix socket (``--transport``). SQLite runs the same workload with the same threads and
processes writing one file: a connection per thread, WAL, synchronous=FULL, one INSERT per
transaction. The refresh lag is the time from a commit's acknowledgement to a follower
(``refresh(wait=...)``, a long poll) having it. The first line gives the machine's fdatasync
p50 (a 200-byte append, then fdatasync, in the same directory), the floor of a durable commit.

Run: ``python benches/server.py`` (``--quick`` for a smoke run; ``--seconds``, ``--mode``,
``--transport``, ``--clients``, ``--max-in-flight``).
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import resource
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


def _cpu_seconds() -> float:
    """This process's CPU time (user and system, every thread)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _process_cpu(pid: int) -> float:
    """Another process's CPU time, from /proc (0 where there is none)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _remote(url: str, max_in_flight: int | None = None) -> Callable[[int, int], None]:
    store = (
        memcommit.RemoteStore(url)
        if max_in_flight is None
        else memcommit.RemoteStore(url, max_in_flight=max_in_flight)
    )
    return lambda n, i: store.put(TEXT, kind="note", task=f"client-{n}")


def _sqlite_setup(path: str) -> None:
    setup = sqlite3.connect(path)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute(
        "CREATE TABLE IF NOT EXISTS memory "
        "(id INTEGER PRIMARY KEY, task TEXT, kind TEXT, text TEXT)"
    )
    setup.commit()
    setup.close()


def _sqlite(path: str, max_in_flight: int | None = None) -> Callable[[int, int], None]:
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

    return commit


_TARGETS: dict[str, Callable[[str, int | None], Callable[[int, int], None]]] = {
    "remote": _remote,
    "sqlite": _sqlite,
}


def _threads(
    target: str,
    where: str,
    clients: int,
    seconds: float,
    ready: Callable[[], None] = lambda: None,
    max_in_flight: int | None = None,
) -> dict[str, Any]:
    """`clients` threads of this process committing to `where` (a URL or a SQLite file)."""
    commit = _TARGETS[target](where, max_in_flight)
    cpu = _cpu_seconds()
    result = _drive(clients, seconds, commit, ready)
    result["cpu"] = _cpu_seconds() - cpu
    return result


def _process_client(
    target: str,
    where: str,
    threads: int,
    seconds: float,
    go: Any,
    out: Any,
    max_in_flight: int | None,
) -> None:
    def ready() -> None:
        go.wait()  # every process starts its clock together

    out.put(_threads(target, where, threads, seconds, ready, max_in_flight))


def _processes(
    target: str, where: str, clients: int, seconds: float, max_in_flight: int | None = None
) -> dict[str, Any]:
    """`clients` threads over min(clients, 8) processes, each with its own store."""
    procs = min(clients, 8)
    per = clients // procs
    ctx = multiprocessing.get_context("spawn")
    out, go = ctx.Queue(), ctx.Barrier(procs)
    workers = [
        ctx.Process(
            target=_process_client, args=(target, where, per, seconds, go, out, max_in_flight)
        )
        for _ in range(procs)
    ]
    for w in workers:
        w.start()
    results = [out.get() for _ in workers]
    for w in workers:
        w.join()
    # Rates and CPU add up; the latencies shown are the worst process's.
    out_ = {key: max(r[key] for r in results) for key in ("mean_ms", "p50_ms", "p99_ms", "p999_ms")}
    out_.update(
        commits=sum(r["commits"] for r in results),
        rate=sum(r["rate"] for r in results),
        cpu=sum(r["cpu"] for r in results),
        processes=procs,
    )
    return out_


def _fdatasync_p50(directory: str, n: int = 2000) -> float:
    """The p50 of appending 200 bytes to a file in `directory` and fdatasyncing it, in ms."""
    path = os.path.join(directory, "fdatasync.probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, b"x" * 200)
            os.fdatasync(fd)
            times.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        os.unlink(path)
    return _percentile(times, 0.5) * 1e3


def refresh_lag(
    open_store: Callable[[], memcommit.MemoryStore], writers: int, seconds: float
) -> dict[str, Any]:
    """Lag from a commit's acknowledgement to a following client having it.

    `writers` threads commit to one store, each a steady stream (a commit, then 1 ms), while a
    second store of `open_store`'s waits in ``refresh(wait=...)``.
    """
    writer, follower = open_store(), open_store()
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


def _row(clients: int, label: str, r: dict[str, Any], server_cpu: float | None = None) -> str:
    commits = max(1, r["commits"])
    server = "" if server_cpu is None else f"{server_cpu / commits * 1e6:,.0f}"
    return (
        f"| {clients} | {label} | {r['rate']:,.0f} | {r['mean_ms']:.2f} | {r['p50_ms']:.2f} "
        f"| {r['p99_ms']:.2f} | {r['p999_ms']:.2f} | {server} | {r['cpu'] / commits * 1e6:,.0f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="per measurement (default 4)")
    parser.add_argument("--clients", default="1,8,32", help="client counts (default 1,8,32)")
    parser.add_argument("--mode", choices=("threads", "processes", "both"), default="both")
    parser.add_argument("--transport", choices=("tcp", "unix", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 0.5 s each")
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=None,
        help="each RemoteStore's max_in_flight (default: the store's own default)",
    )
    args = parser.parse_args(argv)
    seconds = 0.5 if args.quick else args.seconds
    counts = [int(c) for c in args.clients.split(",")]
    modes = ["threads", "processes"] if args.mode == "both" else [args.mode]
    transports = ["tcp", "unix"] if args.transport == "both" else [args.transport]
    with tempfile.TemporaryDirectory(prefix="mc-bench-", dir="/tmp") as tmp:
        print(f"# memcommit serve, durability commit; {os.cpu_count()} CPUs")
        print(
            f"# Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, "
            f"{seconds:g} s each"
        )
        print(f"# fdatasync p50 here: {_fdatasync_p50(tmp, 200 if args.quick else 2000):.3f} ms")
        print()
        print(
            "| clients | store | commits/s | mean ms | p50 ms | p99 ms | p99.9 ms "
            "| server CPU µs/commit | client CPU µs/commit |"
        )
        print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        sock = os.path.join(tmp, "served.sock")
        with ServerProcess(os.path.join(tmp, "served.db"), "--socket", sock) as server:
            urls = {"tcp": server.url, "unix": server.unix_url or ""}
            for clients in counts:
                for transport in transports:
                    for mode in modes:
                        before = _process_cpu(server.pid)
                        if mode == "threads":
                            r = _threads(
                                "remote",
                                urls[transport],
                                clients,
                                seconds,
                                max_in_flight=args.max_in_flight,
                            )
                        else:
                            r = _processes(
                                "remote", urls[transport], clients, seconds, args.max_in_flight
                            )
                        server_cpu = _process_cpu(server.pid) - before
                        label = (
                            f"RemoteStore over {transport}, threads sharing one store"
                            if mode == "threads"
                            else f"RemoteStore over {transport}, {r['processes']} process(es)"
                        )
                        print(_row(clients, label, r, server_cpu), flush=True)
                for mode in modes:
                    db = os.path.join(tmp, f"sqlite-{clients}-{mode}.db")
                    _sqlite_setup(db)
                    run = _threads if mode == "threads" else _processes
                    r = run("sqlite", db, clients, seconds)
                    label = (
                        "SQLite WAL synchronous=FULL, threads of one process"
                        if mode == "threads"
                        else f"SQLite WAL synchronous=FULL, {r['processes']} process(es)"
                    )
                    print(_row(clients, label, r), flush=True)
            print()
            print("| transport | writers | refresh lag p50 ms | p99 ms | samples |")
            print("| --- | ---: | ---: | ---: | ---: |")
            for transport in transports:
                for writers in (1, 8):
                    opener = functools.partial(memcommit.RemoteStore, urls[transport])
                    lag = refresh_lag(opener, writers, seconds)
                    print(
                        f"| {transport} | {writers} | {lag['p50_ms']:.2f} | {lag['p99_ms']:.2f} "
                        f"| {lag['samples']} |",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
