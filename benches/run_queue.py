"""The run queue's per-call cost as the number of runs grows: claim_next and listing by status.

    python benches/run_queue.py                      # 10,000 and 100,000 runs
    python benches/run_queue.py --runs 1000 --runs 10000 --open 100
    python benches/run_queue.py --quick              # 2,000 runs, a smoke run

For each size N, the store gets N runs through the public API, each with one conversation
turn, of which all but ``--open`` (default 1,000) are claimed and completed, so the queue
holds a finished history and a backlog of pending runs, as a fleet's store does after a
while. Then, per call, median and p99 over ``--calls`` calls:

* ``claim_next``: claims the lowest-seq pending run (each call takes a new one);
* ``list(status="pending", limit=10)``: the head of the backlog;
* ``list(status="pending")``: the whole backlog;
* ``list(status="succeeded", limit=10)``: the head of the history;
* ``delete``: a finished run, and with it its conversation turn (each run appended one turn
  to one of 100 conversations), so the store holds N turns.

Contenders: the log store (``memcommit.open(path, durability="none")``, so the figure is the
lookup, not the fsync) and the in-memory roles (:class:`memcommit.roles.RoleSet`). A per-call
figure that grows with N where the backlog stays the same is the defect this measures.

Prints a markdown table on stdout. Speed is reported here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
)

import memcommit
from memcommit.roles import NewTurn, RoleSet


def fill(roles: Any, n: int, open_runs: int) -> float:
    """Create `n` runs, each with a conversation turn, completing all but the last `open_runs`.

    Returns the seconds taken.
    """
    runs, talk = roles.runs, roles.conversations
    conversations = [talk.create().conversation_id for _ in range(100)]
    t0 = time.perf_counter()
    for i in range(n):
        run = runs.create(agent_id="agent")
        talk.append(conversations[i % 100], [NewTurn("user", "hello")], run_id=run.run_id)
        if i < n - open_runs:
            claim = runs.claim(run.run_id, worker_id="filler", ttl_ms=60_000)
            runs.complete(run.run_id, token=claim.token)
    return time.perf_counter() - t0


def per_call(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    """Median and p99 of `calls` calls of `fn`, in milliseconds."""
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]


def measure(runs: Any, calls: int) -> dict[str, tuple[float, float]]:
    finished = iter([run.run_id for run in runs.list(status="succeeded", limit=calls)])
    return {
        "claim_next": per_call(lambda: runs.claim_next(worker_id="w", ttl_ms=600_000), calls),
        'list(status="pending", limit=10)': per_call(
            lambda: runs.list(status="pending", limit=10), calls
        ),
        'list(status="pending")': per_call(lambda: runs.list(status="pending"), calls),
        'list(status="succeeded", limit=10)': per_call(
            lambda: runs.list(status="succeeded", limit=10), calls
        ),
        "delete (a finished run and its turn)": per_call(
            lambda: runs.delete(next(finished)), calls
        ),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, action="append", help="runs in the store (repeatable)")
    p.add_argument("--open", type=int, default=1_000, help="runs left pending (default 1,000)")
    p.add_argument("--calls", type=int, default=200, help="calls per figure (default 200)")
    p.add_argument("--quick", action="store_true", help="2,000 runs, 200 open, 50 calls")
    a = p.parse_args(argv)
    if a.quick:
        a.runs, a.open, a.calls = a.runs or [2_000], 200, 50
    a.runs = a.runs or [10_000, 100_000]
    if a.open < a.calls or any(n < a.open for n in a.runs):
        p.error("--open must be at least --calls (each claim_next takes a run) and at most --runs")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cmd = " ".join(["python benches/run_queue.py", *sys.argv[1:]])
    print(f"Command: `{cmd}`")
    print()
    print("| runs | contender | build s | figure | p50 ms | p99 ms |")
    print("| ---: | --- | ---: | --- | ---: | ---: |")
    for n in args.runs:
        base = tempfile.mkdtemp(prefix="memcommit-run-queue-")
        try:
            store = memcommit.open(os.path.join(base, "runs.db"), durability="none")
            contenders = [("log store", store, store.close), ("in memory", RoleSet(), None)]
            for name, roles, close in contenders:
                built = fill(roles, n, args.open)
                for figure, (p50, p99) in measure(roles.runs, args.calls).items():
                    print(f"| {n:,} | {name} | {built:.1f} | `{figure}` | {p50:.3f} | {p99:.3f} |")
                    sys.stdout.flush()
                if close is not None:
                    close()
        finally:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
