"""The data set of the approximate-search benchmark, and hnswlib measured on it.

    python benches/ann_hnswlib.py data DIR --n 100000       # DIR/base.f32, DIR/queries.f32
    python benches/ann_hnswlib.py bench DIR [--threads 2]   # hnswlib's recall@10, qps, build
        [--ef 16,32] [--filters none,half] [--cache FILE]   # FILE: the graph, saved or loaded

Needs numpy (and hnswlib for `bench`), in a virtual environment of its own: they are not
dependencies of memcommit. The Rust side reads the same files:
`cargo run --release --example ann -p memcommit-core -- DIR`.

The vectors are clustered Gaussians, seeded: `--clusters` unit centres, and each vector a centre
plus noise whose standard deviation falls off with the dimension (as real embeddings spend
most of their variance in a few directions), so nearest neighbours mean something. A file is
a little-endian u32 count, a u32 dimension, then count x dimension f32 values.

Recall@10 is against numpy's exact inner product over the normalised vectors. Queries run one
thread; queries per second are given by wall time and by the thread's CPU time (steadier on a
machine that others share). The filters are every second entry ("half"), every tenth ("tenth")
and every hundredth ("hundredth"), as in the Rust example; hnswlib's filter is a Python
callable it calls per candidate, which is how its Python API filters.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import time
from pathlib import Path

import numpy as np

K = 10
FILTERS = {"none": None, "half": 2, "tenth": 10, "hundredth": 100}


def make(n: int, dims: int, clusters: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(1234).standard_normal((clusters, dims)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    scale = (1.0 / np.sqrt(1.0 + np.arange(dims) / 8.0)).astype(np.float32)
    scale *= np.float32(0.8 / np.sqrt((scale**2).sum()))
    out = np.empty((n, dims), dtype=np.float32)
    step = 65536
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        which = rng.integers(0, clusters, hi - lo)
        noise = rng.standard_normal((hi - lo, dims), dtype=np.float32) * scale
        out[lo:hi] = centres[which] + noise
    return out


def write(path: Path, a: np.ndarray) -> None:
    with path.open("wb") as f:
        f.write(struct.pack("<II", a.shape[0], a.shape[1]))
        f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def read(path: Path) -> np.ndarray:
    with path.open("rb") as f:
        n, d = struct.unpack("<II", f.read(8))
        return np.frombuffer(f.read(), dtype="<f4").reshape(n, d)


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def truth(base: np.ndarray, queries: np.ndarray, every: int | None) -> np.ndarray:
    out = np.empty((len(queries), K), dtype=np.int64)
    ids = np.arange(len(base)) if every is None else np.arange(0, len(base), every)
    sub = base[ids]
    for lo in range(0, len(queries), 100):
        s = queries[lo : lo + 100] @ sub.T
        top = np.argpartition(-s, K, axis=1)[:, :K]
        order = np.argsort(-np.take_along_axis(s, top, axis=1), axis=1)
        out[lo : lo + 100] = ids[np.take_along_axis(top, order, axis=1)]
    return out


def bench(
    d: Path,
    threads: int,
    m: int,
    ef_construction: int,
    efs: list[int],
    filters: list[str],
    cache: Path | None,
) -> None:
    import hnswlib

    base = read(d / "base.f32")
    queries = read(d / "queries.f32")
    base = base / np.linalg.norm(base, axis=1, keepdims=True)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    n, dims = base.shape
    print(f"hnswlib {n} x {dims}, {len(queries)} queries, M={m} ef_construction={ef_construction}")
    wanted = {name: every for name, every in FILTERS.items() if name in filters}
    truths = {name: truth(base, queries, every) for name, every in wanted.items()}
    before = rss_bytes()
    t = time.perf_counter()
    index = hnswlib.Index(space="ip", dim=dims)
    if cache is not None and cache.exists():
        index.load_index(str(cache), max_elements=n)
        print(f"loaded {cache} (built earlier with the same data and settings)")
    else:
        index.init_index(max_elements=n, M=m, ef_construction=ef_construction, random_seed=100)
        index.add_items(base, np.arange(n), num_threads=threads)
        build = time.perf_counter() - t
        per = (rss_bytes() - before) / n
        print(f"build {build:.1f} s with {threads} threads, {per:.0f} bytes a vector (RSS growth)")
        if cache is not None:
            index.save_index(str(cache))
    for name, every in wanted.items():
        keep = None if every is None else (lambda i, e=every: i % e == 0)
        for ef in efs:
            index.set_ef(max(ef, K))
            lat = []
            hits = 0
            t0, c0 = time.perf_counter(), time.thread_time()
            for qi, q in enumerate(queries):
                t = time.perf_counter()
                labels, _ = index.knn_query(q, k=K, num_threads=1, filter=keep)
                lat.append(time.perf_counter() - t)
                hits += len(set(labels[0].tolist()) & set(truths[name][qi].tolist()))
            total = time.perf_counter() - t0
            cpu = time.thread_time() - c0
            t, c = time.perf_counter(), time.thread_time()
            index.knn_query(queries, k=K, num_threads=1, filter=keep)
            batch, batch_cpu = time.perf_counter() - t, time.thread_time() - c
            print(
                f"filter {name:9}  ef {ef:4}  recall@10 {hits / (K * len(queries)):.4f}  "
                f"qps {len(queries) / total:8.0f} (one call a query)  "
                f"by CPU time {len(queries) / cpu:8.0f}  "
                f"{len(queries) / batch:8.0f} (one batch call)  "
                f"by CPU time {len(queries) / batch_cpu:8.0f}  "
                f"p50 {statistics.median(lat) * 1e6:7.0f} us"
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("data")
    a.add_argument("dir", type=Path)
    a.add_argument("--n", type=int, default=100_000)
    a.add_argument("--queries", type=int, default=1000)
    a.add_argument("--dims", type=int, default=384)
    a.add_argument("--clusters", type=int, default=1000)
    a.add_argument("--seed", type=int, default=42)
    b = sub.add_parser("bench")
    b.add_argument("dir", type=Path)
    b.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    b.add_argument("--m", type=int, default=16)
    b.add_argument("--ef-construction", type=int, default=200)
    b.add_argument("--ef", default="16,32,48,64,96,128,192,256")
    b.add_argument("--filters", default=",".join(FILTERS), help="which of " + ", ".join(FILTERS))
    b.add_argument("--cache", type=Path, help="the graph's file: loaded if it exists, else saved")
    args = ap.parse_args()
    if args.cmd == "data":
        args.dir.mkdir(parents=True, exist_ok=True)
        write(args.dir / "base.f32", make(args.n, args.dims, args.clusters, args.seed))
        write(args.dir / "queries.f32", make(args.queries, args.dims, args.clusters, args.seed + 1))
    else:
        efs = [int(x) for x in args.ef.split(",")]
        filters = args.filters.split(",")
        unknown = sorted(set(filters) - set(FILTERS))
        if unknown:
            ap.error(f"--filters: no filter named {', '.join(unknown)}")
        bench(args.dir, args.threads, args.m, args.ef_construction, efs, filters, args.cache)


if __name__ == "__main__":
    main()
