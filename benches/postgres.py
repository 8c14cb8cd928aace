"""Benchmark: commits on a store in PostgreSQL, against LangGraph's PostgresStore on one server.

For 1, 8 and 32 concurrent clients, each client commits one memory per commit (a
``store.put``), durable when it returns, and the table gives commits/s and the p50/p99 latency
of a commit as its client saw it, with the clients as threads of one process (sharing one
store: their commits travel together) or spread over 8 processes (a store each, as separate
hosts would be). LangGraph's ``PostgresStore.put`` and ``PostgresSaver.put`` run the same
clients on the same server, each client its own thread and connection, and ``memcommit serve``
(one process owning a log file on this host) the same clients over TCP, spread over up to 8
processes. Then: bulk puts
(records/s, 1,000 per commit), the refresh lag (a commit acknowledged until another client
that polls with ``refresh(wait=)`` has it), and log compaction of a store of ``--compact``
memories each put twice: its time, the longest another client's commit waited meanwhile (it
reads the new generation first), and the records table's size on disk over cycles of re-puts and
compactions (the table must not grow with the cycles).

A throwaway PostgreSQL server is started for the run (MEMCOMMIT_PG_DSN: use that one).

Run: ``python benches/postgres.py`` (``--quick`` for a smoke run; ``--seconds``, ``--clients``,
``--compact``).
Needs ``memcommit[postgres]``; LangGraph's rows need ``langgraph-checkpoint-postgres``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import memcommit
from memcommit.testing import ServerProcess
from memcommit.testing.postgres import PostgresCluster
from server import _drive, refresh_lag

TEXT = "The user asked to keep the summary short and to cite the source documents. " * 2


def _memcommit(url: str) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    store = memcommit.open(url)
    return (lambda n, i: store.put(TEXT, kind="note", task=f"client-{n}")), store.close


def _langgraph_store(dsn: str) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    from langgraph.store.postgres import PostgresStore
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(dsn, min_size=1, max_size=64, kwargs={"autocommit": True})
    store = PostgresStore(pool)  # type: ignore[arg-type]
    return (
        lambda n, i: store.put(("bench", f"client-{n}"), f"{uuid.uuid4().hex}", {"text": TEXT})
    ), pool.close


def _langgraph_saver(dsn: str) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(dsn, min_size=1, max_size=64, kwargs={"autocommit": True})
    saver = PostgresSaver(pool)  # type: ignore[arg-type]

    def put(n: int, i: int) -> None:
        config = {"configurable": {"thread_id": f"client-{n}", "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        saver.put(config, checkpoint, {"source": "input", "step": i}, {})  # type: ignore[arg-type]

    return put, pool.close


def _serve(url: str) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    store = memcommit.RemoteStore(url)
    return (lambda n, i: store.put(TEXT, kind="note", task=f"client-{n}")), store.close


_TARGETS = {
    "memcommit": _memcommit,
    "store": _langgraph_store,
    "saver": _langgraph_saver,
    "serve": _serve,
}


def _threads(
    target: str, where: str, clients: int, seconds: float, ready: Callable[[], None] = lambda: None
) -> dict[str, Any]:
    commit, close = _TARGETS[target](where)
    try:
        return _drive(clients, seconds, commit, ready)
    finally:
        close()


def _process_client(
    target: str, where: str, threads: int, seconds: float, go: Any, out: Any
) -> None:
    out.put(_threads(target, where, threads, seconds, go.wait))


def _merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Clients' results as one: rates and commits summed, latencies the worst of them."""
    merged = {k: max(r[k] for r in results) for k in ("mean_ms", "p50_ms", "p99_ms", "p999_ms")}
    merged.update(commits=sum(r["commits"] for r in results), rate=sum(r["rate"] for r in results))
    return merged


def _processes(target: str, where: str, clients: int, seconds: float) -> dict[str, Any]:
    """`clients` threads spread as evenly as can be over 8 processes (fewer for fewer)."""
    procs = min(clients, 8)
    ctx = multiprocessing.get_context("spawn")
    out, go = ctx.Queue(), ctx.Barrier(procs)
    workers = [
        ctx.Process(
            target=_process_client,
            args=(target, where, clients // procs + (i < clients % procs), seconds, go, out),
        )
        for i in range(procs)
    ]
    for w in workers:
        w.start()
    results = [out.get() for _ in workers]
    for w in workers:
        w.join()
    return _merge(results)


def _bulk(url: str, seconds: float) -> float:
    with memcommit.open(url) as store:
        done, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            with store.commit() as c:
                c.put_many([TEXT] * 1000, kind="note")
            done += 1000
        return done / (time.perf_counter() - started)


HOST_CLIENT = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import postgres
url, threads, seconds, start = sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
ready = lambda: time.sleep(max(0.0, start - time.time()))
print(json.dumps(postgres._threads("memcommit", url, threads, seconds, ready)))
"""


def _hosts(clients: int, seconds: float) -> dict[str, Any] | None:
    """`clients` threads spread over 3 hosts (network namespaces), one store, one database.

    None where namespaces cannot be made (not root, no iproute2).
    """
    import json

    from memcommit.testing.netns import HOSTS, Hosts, available

    if not available():
        return None
    with Hosts() as hosts:
        url = hosts.url("hosts")
        with memcommit.open(url):
            pass  # the tables, made once
        start = time.time() + 3.0
        runs = [
            hosts.start(
                h,
                HOST_CLIENT,
                os.path.dirname(os.path.abspath(__file__)),
                url,
                str(clients // HOSTS + (h < clients % HOSTS)),
                str(seconds),
                str(start),
            )
            for h in range(HOSTS)
        ]
        results = []
        for run in runs:
            out, err = run.communicate(timeout=300)
            if run.returncode != 0:
                raise RuntimeError(f"a host's clients failed: {err[-2000:]}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    return _merge(results)


def _table_mb(dsn: str, name: str, store: memcommit.MemoryStore) -> float:
    """The size of the table of records of the store `name` (`store` is a client of it)."""
    import psycopg

    from memcommit.postgres.schema import partition

    table = partition(name, store.generation)
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_total_relation_size(%s)", (f"memcommit.{table}",)).fetchone()
    return int(row[0]) / 1e6 if row else 0.0


def _compaction(dsn: str, n: int, cycles: int) -> None:
    """Compact a store of `n` memories put twice; then `cycles` of re-puts and compactions."""
    from memcommit.storage import compact

    url = f"{dsn}?store=compact"
    ids = [f"m{i}" for i in range(n)]
    with memcommit.open(url) as store, memcommit.open(url) as other:
        for _ in range(2):
            for at in range(0, n, 10_000):
                with store.commit() as c:
                    c.put_rows([{"text": f"{TEXT} {i}", "id": i} for i in ids[at : at + 10_000]])
        other.refresh()
        before = _table_mb(dsn, "compact", store)
        waits: list[float] = []
        stop = threading.Event()

        def commit_meanwhile() -> None:
            while not stop.is_set():
                started = time.perf_counter()
                other.put("meanwhile")
                waits.append(time.perf_counter() - started)

        writer = threading.Thread(target=commit_meanwhile)
        writer.start()
        time.sleep(0.2)
        report = compact(store)
        stop.set()
        writer.join()
        held = store.engine.counters.compaction_lock_seconds.sum
        after = _table_mb(dsn, "compact", store)
        print(
            f"log compaction of {n:,} memories put twice ({report.before:,} records -> "
            f"{report.after:,}): {report.seconds:.2f} s, the store's lock held {held:.2f} s of "
            f"it; another client committed {len(waits):,} times meanwhile, its longest commit "
            f"{max(waits) * 1000:.0f} ms (reading the new generation included); records table "
            f"{before:.1f} MB -> {after:.1f} MB",
            flush=True,
        )
        sizes = []
        for _ in range(cycles):
            for at in range(0, n, 10_000):
                with store.commit() as c:
                    again = [{"text": f"{TEXT} again {i}", "id": i} for i in ids[at : at + 10_000]]
                    c.put_rows(again)
            compact(store)
            sizes.append(_table_mb(dsn, "compact", store))
        if sizes:
            print(
                f"records table after each of {cycles} cycles (re-put every memory, compact): "
                + ", ".join(f"{mb:.1f}" for mb in sizes)
                + " MB",
                flush=True,
            )


def _opening(dsn: str, n: int, snapshot: str) -> None:
    """How long a new client takes to open a store of `n` records (a tenth as many memories,
    each put ten times): reading and replaying every row, and reading every row but replaying
    only those after a snapshot (best of 3 each)."""
    url = f"{dsn}?store=opening"
    ids = [f"m{i}" for i in range(max(1, n // 10))]
    with memcommit.open(url) as store:
        for again in range(10):
            for at in range(0, len(ids), 10_000):
                with store.commit() as c:
                    rows = [{"text": f"{TEXT} {again}", "id": i} for i in ids[at : at + 10_000]]
                    c.put_rows(rows)
        store.save_snapshot(snapshot)
        for i in range(100):
            store.put(f"after the snapshot {i}")
        records = int(store.info()["records"])
    times = {}
    for label, given in (("full", None), ("snapshot", snapshot)):
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            memcommit.open(url, snapshot=given).close()
            best = min(best, time.perf_counter() - started)
        times[label] = best
    print(
        f"opening a client of a store of {records:,} records, {len(ids) + 100:,} memories: "
        f"{times['full']:.2f} s reading and replaying every row, {times['snapshot']:.2f} s from "
        f"a snapshot ({os.path.getsize(snapshot) / 1e6:.1f} MB; every row read, the 100 commits "
        "after it replayed)",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="per measurement (default 4)")
    parser.add_argument("--clients", default="1,8,32", help="client counts (default 1,8,32)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 0.5 s each")
    parser.add_argument(
        "--compact",
        type=int,
        default=100_000,
        help="memories in the compaction run (default 100,000; 0: none)",
    )
    parser.add_argument("--cycles", type=int, default=5, help="compaction cycles (default 5)")
    args = parser.parse_args(argv)
    seconds = 0.5 if args.quick else args.seconds
    counts = [int(c) for c in args.clients.split(",")]
    try:
        import langgraph.store.postgres  # noqa: F401

        peers = ["store", "saver"]
    except ImportError:
        peers = []
    with (
        PostgresCluster() as pg,
        tempfile.TemporaryDirectory() as served,
        ServerProcess(os.path.join(served, "served.db")) as server,
    ):
        print(f"# memcommit on PostgreSQL; {os.cpu_count()} CPUs; Python {sys.version.split()[0]}")
        print(f"# {seconds:g} s each; clients, server and PostgreSQL on the same machine")
        print()
        print("| clients | what | commits/s | mean ms | p50 ms | p99 ms |")
        print("| ---: | --- | ---: | ---: | ---: | ---: |")
        for peer in peers:
            with memcommit.open(f"{pg.dsn}?store=setup"):
                pass
            if peer == "store":
                from langgraph.store.postgres import PostgresStore

                with PostgresStore.from_conn_string(pg.dsn) as s:
                    s.setup()
            else:
                from langgraph.checkpoint.postgres import PostgresSaver

                with PostgresSaver.from_conn_string(pg.dsn) as s:
                    s.setup()
        for clients in counts:
            rows: list[tuple[str, dict[str, Any]]] = []
            url = f"{pg.dsn}?store=threads-{clients}"
            rows.append(
                (
                    "memcommit, threads sharing one store",
                    _threads("memcommit", url, clients, seconds),
                )
            )
            if clients > 1:
                url = f"{pg.dsn}?store=procs-{clients}"
                rows.append(
                    (
                        f"memcommit, {min(clients, 8)} processes, a store each",
                        _processes("memcommit", url, clients, seconds),
                    )
                )
            if clients > 3:
                spread = _hosts(clients, seconds)
                if spread is not None:
                    rows.append(("memcommit, 3 hosts (network namespaces), a store each", spread))
            for peer in peers:
                name = (
                    "LangGraph PostgresStore.put"
                    if peer == "store"
                    else "LangGraph PostgresSaver.put"
                )
                rows.append(
                    (f"{name}, a connection per thread", _threads(peer, pg.dsn, clients, seconds))
                )
            procs = min(clients, 8)
            rows.append(
                (
                    f"memcommit serve (a log file on this host), {procs} process(es) over TCP",
                    _processes("serve", server.url, clients, seconds),
                )
            )
            for label, r in rows:
                print(
                    f"| {clients} | {label} | {r['rate']:,.0f} | {r['mean_ms']:.2f} | "
                    f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} |",
                    flush=True,
                )
        print()
        bulk = _bulk(f"{pg.dsn}?store=bulk", seconds)
        print(f"bulk: {bulk:,.0f} records/s (put_many of 1,000 per commit)")
        lag_url = f"{pg.dsn}?store=lag"
        for writers in (1, 8):
            lag = refresh_lag(lambda: memcommit.open(lag_url), writers, seconds)
            print(
                f"refresh lag, {writers} writer(s) (a follower in refresh(wait=), woken by "
                f"NOTIFY): p50 {lag['p50_ms']:.2f} ms, p99 {lag['p99_ms']:.2f} ms "
                f"({lag['samples']} commits)",
                flush=True,
            )
        if args.compact:
            _compaction(
                pg.dsn, 2_000 if args.quick else args.compact, 2 if args.quick else args.cycles
            )
            with tempfile.TemporaryDirectory() as tmp:
                n = 20_000 if args.quick else args.compact
                _opening(pg.dsn, n, os.path.join(tmp, "state.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
