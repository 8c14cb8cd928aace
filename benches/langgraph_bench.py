"""LangGraph on memcommit against LangGraph's own savers and stores, in one run.

    python benches/langgraph_bench.py            # N = 2,000 operations per figure
    python benches/langgraph_bench.py --n 500    # quicker

Prints a markdown report on stdout (progress on stderr):

1. checkpointer: ``put`` (a chain of checkpoints on one thread, each about 1 KiB of channel
   values), ``put_writes`` (two writes of a task), ``get_tuple`` of the latest checkpoint and
   of one by id, for ``MemcommitSaver`` (durability ``commit`` and ``batch``), ``SqliteSaver``
   (a file, its WAL mode, SQLite's default ``synchronous=FULL``) and ``InMemorySaver``;
2. long-term store: ``put`` (N items over 20 namespaces), ``get``, ``search`` (one namespace,
   a filter, limit 10), for ``MemcommitStore`` (``commit`` and ``batch``), ``SqliteStore`` (a
   file, defaults) and ``InMemoryStore``.

Every figure is operations per second from one thread, on files in a temporary directory on
the same disk, and the ratio to the SQLite one. ``commit`` and SQLite's defaults wait for an
fsync on every write; ``batch`` and ``InMemory*`` do not.

Needs ``pip install -e '.[dev]'`` (langgraph, langgraph-checkpoint-sqlite).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib.metadata import version
from typing import Any

from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

import memcommit
from memcommit.integrations.langgraph import MemcommitSaver, MemcommitStore

NAMESPACES = 20


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def rate(n: int, fn: Callable[[int], Any]) -> float:
    """Run fn(0..n-1) and return operations per second."""
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - start)


# --------------------------------------------------------------------------------------
# Contenders


@contextlib.contextmanager
def memcommit_wrapped(
    path: str, durability: str, wrap: Callable[[memcommit.MemoryStore], Any]
) -> Iterator[Any]:
    """A memcommit store at `path`, wrapped (in a saver or a LangGraph store); closed after."""
    store = memcommit.open(path, durability=durability)  # type: ignore[arg-type]
    try:
        yield wrap(store)
    finally:
        store.close()


def memcommit_saver(path: str, durability: str) -> contextlib.AbstractContextManager[Any]:
    return memcommit_wrapped(path, durability, MemcommitSaver)


@contextlib.contextmanager
def sqlite_saver(path: str) -> Iterator[Any]:
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        yield saver
    finally:
        conn.close()


@contextlib.contextmanager
def memory_saver(path: str) -> Iterator[Any]:
    yield InMemorySaver()


def memcommit_store(path: str, durability: str) -> contextlib.AbstractContextManager[Any]:
    return memcommit_wrapped(path, durability, MemcommitStore)


@contextlib.contextmanager
def sqlite_store(path: str) -> Iterator[Any]:
    with SqliteStore.from_conn_string(path) as store:
        store.setup()
        yield store


@contextlib.contextmanager
def memory_store(path: str) -> Iterator[Any]:
    yield InMemoryStore()


SAVERS: list[tuple[str, Callable[[str], Any]]] = [
    ("MemcommitSaver (commit)", lambda p: memcommit_saver(p, "commit")),
    ("MemcommitSaver (batch)", lambda p: memcommit_saver(p, "batch")),
    ("SqliteSaver (file)", sqlite_saver),
    ("InMemorySaver", memory_saver),
]
STORES: list[tuple[str, Callable[[str], Any]]] = [
    ("MemcommitStore (commit)", lambda p: memcommit_store(p, "commit")),
    ("MemcommitStore (batch)", lambda p: memcommit_store(p, "batch")),
    ("SqliteStore (file)", sqlite_store),
    ("InMemoryStore", memory_store),
]
SQLITE_SAVER = "SqliteSaver (file)"
SQLITE_STORE = "SqliteStore (file)"


# --------------------------------------------------------------------------------------
# Workloads


def checkpoint(i: int) -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=i))
    cp["channel_values"] = {
        "messages": [f"message {i}.{j}: " + "lorem ipsum " * 8 for j in range(8)],
        "step": i,
    }
    cp["channel_versions"] = {"messages": i + 1, "step": i + 1}
    cp["versions_seen"] = {"agent": {"messages": i}}
    return cp


def bench_saver(saver: Any, n: int) -> dict[str, float]:
    rng = random.Random(7)
    config: dict[str, Any] = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    checkpoints = [checkpoint(i) for i in range(n)]
    configs: list[Any] = []

    def put(i: int) -> None:
        nonlocal config
        cp = checkpoints[i]
        md: Any = {"source": "loop", "step": i, "parents": {}}
        config = saver.put(config, cp, md, cp["channel_versions"])
        configs.append(config)

    def put_writes(i: int) -> None:
        saver.put_writes(configs[i], [("messages", f"w{i}"), ("step", i)], f"task-{i}", "a")

    def get_latest(i: int) -> None:
        assert saver.get_tuple({"configurable": {"thread_id": "bench", "checkpoint_ns": ""}})

    ids = [rng.randrange(n) for _ in range(n)]

    def get_by_id(i: int) -> None:
        assert saver.get_tuple(configs[ids[i]])

    return {
        "put": rate(n, put),
        "put_writes": rate(n, put_writes),
        "get_tuple (latest)": rate(n, get_latest),
        "get_tuple (by id)": rate(n, get_by_id),
    }


def bench_store(store: Any, n: int, searches: int) -> dict[str, float]:
    rng = random.Random(11)

    def put(i: int) -> None:
        store.put(
            ("users", f"u{i % NAMESPACES}", "memories"),
            f"m{i}",
            {"text": f"memory {i}: " + "the user likes " * 6, "kind": f"k{i % 7}", "n": i},
        )

    keys = [rng.randrange(n) for _ in range(n)]

    def get(i: int) -> None:
        j = keys[i]
        assert store.get(("users", f"u{j % NAMESPACES}", "memories"), f"m{j}")

    def search(i: int) -> None:
        found = store.search(
            ("users", f"u{i % NAMESPACES}"), filter={"kind": f"k{i % 7}"}, limit=10
        )
        assert found

    return {
        "put": rate(n, put),
        "get": rate(n, get),
        f"search (filter, limit 10, {n // NAMESPACES} items per namespace)": rate(searches, search),
    }


# --------------------------------------------------------------------------------------
# The report


def table(title: str, results: dict[str, dict[str, float]], reference: str) -> None:
    ops = list(next(iter(results.values())))
    print(f"### {title}\n")
    print("| operation | " + " | ".join(results) + " |")
    print("|---|" + "---:|" * len(results))
    for op in ops:
        cells = []
        for name, figures in results.items():
            cell = f"{figures[op]:,.0f}/s"
            if name != reference:
                cell += f" ({figures[op] / results[reference][op]:.2f}x)"
            cells.append(cell)
        print(f"| {op} | " + " | ".join(cells) + " |")
    print(f"\nRatios are to {reference}.\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="operations per figure")
    parser.add_argument("--searches", type=int, default=None, help="searches (default n/2)")
    args = parser.parse_args()
    n = args.n
    searches = args.searches or max(n // 2, 1)
    work = tempfile.mkdtemp(prefix="memcommit-langgraph-bench-")
    try:
        print("## LangGraph checkpointers and stores\n")
        print(
            f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores; "
            f"langgraph {version('langgraph')}, langgraph-checkpoint "
            f"{version('langgraph-checkpoint')}, langgraph-checkpoint-sqlite "
            f"{version('langgraph-checkpoint-sqlite')}, SQLite {sqlite3.sqlite_version}; "
            f"N = {n}, searches = {searches}; files in {work}.\n"
        )
        saver_results: dict[str, dict[str, float]] = {}
        for name, make in SAVERS:
            log(f"saver: {name}")
            with make(os.path.join(work, name.split()[0] + name.split()[-1] + ".db")) as saver:
                saver_results[name] = bench_saver(saver, n)
        table("Checkpointer (one thread)", saver_results, SQLITE_SAVER)
        store_results: dict[str, dict[str, float]] = {}
        for name, make in STORES:
            log(f"store: {name}")
            with make(os.path.join(work, "s-" + name.split()[0] + name.split()[-1] + ".db")) as s:
                store_results[name] = bench_store(s, n, searches)
        table("Long-term store (one thread)", store_results, SQLITE_STORE)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
