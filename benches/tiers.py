"""Benchmark: memory compaction (fold) with the default summarizer, in memories/s.

    python benches/tiers.py                        # 1,000,000 traces in 10,000 finished tasks
    python benches/tiers.py --memories 100000      # a tenth of it, 1,000 tasks (about a second)
    python benches/tiers.py --memories 100000 --profile   # cProfile of the compaction
    python benches/tiers.py --path /tmp/tiers.db   # on a log file (durability "none")

Runs with whatever ``memcommit`` is importable: measure the figure on a release build
(``pip install .``), not an editable debug build. Loads `--memories` traces, spread evenly over
`--tasks` finished tasks, in one commit per task, then times one ``compact_memory`` run (every
task folds into one summary; the traces move to the archive), then a second run, which must
write nothing. Prints the figures on stdout; the target is at least 100,000 memories/s.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import sys
import time

import memcommit
from memcommit.tiers import compact_memory

WORDS = (
    "search tool returned results user asked flight hotel booking refund invoice customer "
    "order shipment delayed api timeout retried succeeded failed parsed document table "
    "summary error warning database query index cache miss hit latency deploy service "
    "config token expired rotated key branch merged review approved test passed"
).split()


def trace_text(rng: random.Random, task: int, step: int) -> str:
    first = " ".join(rng.choices(WORDS, k=rng.randint(6, 12)))
    second = " ".join(rng.choices(WORDS, k=rng.randint(4, 10)))
    return f"Step {step} of task {task}: {first}. Then {second} ({rng.randint(1, 999)} ms)."


def load(store: memcommit.MemoryStore, memories: int, tasks: int, seed: int) -> None:
    rng = random.Random(seed)
    per_task, extra = divmod(memories, tasks)
    for t in range(tasks):
        n = per_task + (t < extra)
        name = f"task-{t:06d}"
        with store.commit() as c:
            c.put_many([trace_text(rng, t, i) for i in range(n)], kind="trace", task=name)
            c.finish_task(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=1_000_000, help="traces to load")
    parser.add_argument("--tasks", type=int, help="finished tasks (default: one per 100 traces)")
    parser.add_argument("--path", help="a log file to use instead of an in-memory store")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the run")
    args = parser.parse_args(argv)
    if args.tasks is None:
        args.tasks = max(1, args.memories // 100)
    if args.memories < 1 or not 1 <= args.tasks <= args.memories:
        parser.error("need 1 <= --tasks <= --memories")

    with memcommit.open(args.path or ":memory:", durability="none") as store:
        t0 = time.perf_counter()
        load(store, args.memories, args.tasks, args.seed)
        loaded = time.perf_counter() - t0
        print(f"loaded {args.memories:,} traces in {args.tasks:,} tasks in {loaded:.2f} s")

        profiler = cProfile.Profile() if args.profile else None
        wall, cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        report = compact_memory(store)
        if profiler is not None:
            profiler.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"compact_memory: {report}")
        print(
            f"compact_memory: {wall:.2f} s, {args.memories / wall:,.0f} memories/s "
            f"(CPU time {cpu:.2f} s: {args.memories / cpu:,.0f} memories/s)"
        )
        if len(report.fold.moved) != args.memories or len(report.fold.created) != args.tasks:
            print("error: not every trace was folded", file=sys.stderr)
            return 1

        lsn = store.lsn
        t0 = time.perf_counter()
        again = compact_memory(store)
        took = time.perf_counter() - t0
        print(f"second run (nothing new): {took:.2f} s, {again}")
        if store.lsn != lsn:
            print("error: the second run wrote records", file=sys.stderr)
            return 1
        sample = store.get(report.fold.created[0])
        if sample is not None:
            print(f"a summary ({len(sample.text)} chars): {sample.text}")
        if profiler is not None:
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
