"""Benchmark: the approximate vector index built in the background, while the store works.

N memories with 384-dimension vectors (clustered, seeded) are loaded into a store; then the
first vector search starts the graph's build on its own thread. Measured: the exact search's
p50 before the build, the search p50 while it runs (answered by the exact scan), how long the
build takes until ``wait_for_vector_index()`` returns, the commits a writer thread makes
meanwhile (one put with a vector every 10 ms: their p50 and worst latency), and the p50 of a
search through the graph once it is in place.

Run: ``python benches/vector_index.py 100000`` (``1000000`` for the million; needs numpy).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time

import numpy as np

import memcommit

DIMS = 384


def _p50(times: list[float]) -> float:
    ordered = sorted(times)
    return ordered[len(ordered) // 2] * 1e3


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    n = int(args[0]) if args else 100_000
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(1000, DIMS)).astype(np.float32)
    vectors = centres[rng.integers(0, 1000, n)] + 0.3 * rng.normal(size=(n, DIMS)).astype(
        np.float32
    )
    queries = [(v + 0.05).tolist() for v in vectors[:200]]
    with tempfile.TemporaryDirectory(prefix="memcommit-vectors-") as d:
        store = memcommit.open(os.path.join(d, "vectors.db"), durability="none")
        started = time.perf_counter()
        for lo in range(0, n, 10_000):
            with store.commit() as c:
                c.put_many(
                    [f"memory {i}" for i in range(lo, min(n, lo + 10_000))],
                    vectors=vectors[lo : lo + 10_000].tolist(),
                )
        print(f"{n:,} memories with {DIMS}-dimension vectors loaded in "
              f"{time.perf_counter() - started:.1f} s")  # fmt: skip

        def search_p50(count: int) -> float:
            times = []
            for q in queries[:count]:
                t0 = time.perf_counter()
                store.search(q, k=10, mode="vector")
                times.append(time.perf_counter() - t0)
            return _p50(times)

        print(f"exact search p50 {search_p50(20):.2f} ms (the first search starts the build)")
        commits: list[float] = []
        stop = threading.Event()
        one = vectors[0].tolist()

        def write() -> None:
            while not stop.is_set():
                t0 = time.perf_counter()
                store.put("written during the build", vector=one)
                commits.append(time.perf_counter() - t0)
                time.sleep(0.01)

        writer = threading.Thread(target=write)
        build_started = time.perf_counter()
        writer.start()
        during = search_p50(20)
        ready = store.wait_for_vector_index()
        built = time.perf_counter() - build_started
        stop.set()
        writer.join()
        print(
            f"search p50 during the build {during:.2f} ms; graph in place: {ready}, "
            f"{built:.1f} s after the first search"
        )
        print(
            f"{len(commits):,} commits meanwhile: p50 {_p50(commits):.2f} ms, "
            f"worst {max(commits) * 1e3:.1f} ms"
        )
        print(f"search p50 through the graph {search_p50(200):.2f} ms")
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
