"""Opening a store that holds many role entities, and the roles' scans over them.

    python benches/role_entities.py STORE.db             # builds STORE.db once (20,000 runs)
    python benches/role_entities.py STORE.db --runs 100000
    PYTHONPATH=OTHER/python python benches/role_entities.py STORE.db   # another build

The store is built once, if `STORE.db` does not exist: `--runs` runs, each created, claimed
and completed, and as many entries of agent state (about five entities a run, counters
included). Each later call opens it and prints, in one line: the open, the first
``runs.claim_next`` after it (every run scanned, none claimable), the same call again (best of
5), ``state.list`` of every entry (best of 5), and 1,000 ``locks.get`` of names that do not
exist. It imports whichever memcommit Python finds, so two builds can be compared on one
store, alternating.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import memcommit


def build(path: str, runs: int) -> None:
    """Write `runs` completed runs and as many agent-state entries into a new store."""
    with memcommit.open(path, durability="none") as store:
        for n in range(runs):
            run = store.runs.create(agent_id=f"agent-{n % 20}", run_id=f"run-{n:08d}")
            claim = store.runs.claim(run.run_id, worker_id="w", ttl_ms=60_000)
            store.runs.complete(run.run_id, token=claim.token, output={"n": n})
            store.state.put(("agents",), f"key-{n}", {"n": n})


def best(work: Callable[[], object], times: int = 5) -> float:
    """The fastest of `times` runs of `work`, in seconds."""
    seconds = []
    for _ in range(times):
        began = time.perf_counter()
        work()
        seconds.append(time.perf_counter() - began)
    return min(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", metavar="STORE.db")
    parser.add_argument("--runs", type=int, default=20_000, help="runs when building the store")
    args = parser.parse_args()
    if not os.path.exists(args.path):
        build(args.path, args.runs)
    began = time.perf_counter()
    store = memcommit.open(args.path, durability="none")
    opened = time.perf_counter() - began

    def claim_next() -> object:
        return store.runs.claim_next(worker_id="w", ttl_ms=1_000)

    began = time.perf_counter()
    claim_next()
    first = time.perf_counter() - began
    warm = best(claim_next)
    listed = best(lambda: store.state.list(("agents",)))
    missing = best(lambda: [store.locks.get(f"none-{i}") for i in range(1_000)])
    store.close()
    print(
        f"open {opened * 1e3:.1f} ms | first claim_next {first * 1e3:.1f} ms, "
        f"then {warm * 1e3:.1f} ms | state.list {listed * 1e3:.1f} ms | "
        f"1,000 missing locks.get {missing * 1e3:.2f} ms"
    )


if __name__ == "__main__":
    main()
