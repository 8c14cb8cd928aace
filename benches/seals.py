"""Seals, side by side: verify against b3sum, and what AutoSeal costs batched puts.

Run on a release build (``make bench-seals``); ``--quick`` for a small size.

* verify: builds a log of ~200-byte records (2 GB by default) in commits of 100,000, warms the
  page cache, then times ``b3sum`` (the Debian package, default threads) and
  ``memcommit.verify`` on the same file, alternating, and reports MB/s and the ratio; once for
  a log with no seal, and once for one written under ``AutoSeal(every=100_000)`` (a seal after
  every commit), where the seals vouch for the records and verify skips their checksums.
* AutoSeal: writes the same batched puts (commits of ``--batch`` records) with and without
  ``AutoSeal(every=1000)`` and reports the overhead.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import memcommit
from memcommit.seals import AutoSeal

TEXT = (
    "agent 42 observed that the deploy of service billing-api to eu-west finished with "
    "three retries; latency p99 rose to 412 ms."
)


def build_log(
    path: str, target_bytes: int, batch: int, seal_every: int | None = None
) -> tuple[int, int]:
    """Write ~200-byte records until the log reaches ``target_bytes``; return (records, bytes).

    With ``seal_every``, under ``AutoSeal(every=seal_every)``.
    """
    store = memcommit.open(path, durability="none")
    sealer = AutoSeal(store, every=seal_every) if seal_every else None
    n = 0
    while os.path.getsize(path) < target_bytes:
        with store.commit() as c:
            for i in range(batch):
                c.put(TEXT, kind="trace", task=f"t{(n + i) // 1000}")
        n += batch
    if sealer is not None:
        sealer.close()
    store.close()
    return n, os.path.getsize(path)


def time_b3sum(path: str) -> float:
    t = time.perf_counter()
    subprocess.run(["b3sum", "--no-names", path], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def time_verify(path: str) -> tuple[float, int]:
    store = memcommit.open(path, read_only=True)
    t = time.perf_counter()
    report = memcommit.verify(store)
    elapsed = time.perf_counter() - t
    store.close()
    return elapsed, report.bytes_checked


def rounded(xs: list[float]) -> list[float]:
    return [round(x, 3) for x in xs]


def bench_verify(dirname: str, gb: float, runs: int) -> None:
    if shutil.which("b3sum") is None:
        sys.exit("b3sum is not installed: apt-get install b3sum")
    for label, seal_every in (("no seal", None), ("AutoSeal(every=100_000)", 100_000)):
        path = os.path.join(dirname, "verify.db")
        t = time.perf_counter()
        records, size = build_log(path, int(gb * 1e9), 100_000, seal_every)
        print(
            f"log ({label}): {records:,} records, {size / 1e9:.2f} GB, {size / records:.0f} "
            f"B/record (built in {time.perf_counter() - t:.1f} s)"
        )
        time_b3sum(path)  # warm the page cache
        ours, theirs = [], []
        for _ in range(runs):
            theirs.append(time_b3sum(path))
            elapsed, checked = time_verify(path)
            ours.append(elapsed)
        b3 = size / statistics.median(theirs) / 1e6
        mc = checked / statistics.median(ours) / 1e6
        print(f"  b3sum            {b3:8.0f} MB/s  (median of {runs}: {rounded(theirs)} s)")
        print(f"  memcommit verify {mc:8.0f} MB/s  (median of {runs}: {rounded(ours)} s)")
        print(f"  verify / b3sum   {mc / b3:8.2f}")
        os.remove(path)


def put_batches(path: str, n: int, batch: int, auto: int | None) -> float:
    store = memcommit.open(path, durability="none")
    sealer = AutoSeal(store, every=auto) if auto else None
    t = time.perf_counter()
    for start in range(0, n, batch):
        with store.commit() as c:
            for _ in range(min(batch, n - start)):
                c.put(TEXT, kind="trace", task="t")
    elapsed = time.perf_counter() - t
    seals = len(store.seals())
    if sealer is not None:
        sealer.close()
    store.close()
    os.remove(path)
    if auto:
        assert seals >= n // (auto + batch) - 1, seals
    return elapsed


def bench_autoseal(dirname: str, n: int, batch: int, runs: int) -> None:
    path = os.path.join(dirname, "auto.db")
    plain, sealed = [], []
    for _ in range(runs):
        plain.append(put_batches(path, n, batch, None))
        sealed.append(put_batches(path, n, batch, 1000))
    p, s = statistics.median(plain), statistics.median(sealed)
    print(f"batched puts ({n:,} in commits of {batch:,}), durability none, median of {runs}:")
    print(f"  plain            {n / p:12,.0f} puts/s")
    print(f"  AutoSeal(1000)   {n / s:12,.0f} puts/s   overhead {100 * (s / p - 1):+.1f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="0.2 GB and 200k puts")
    ap.add_argument("--gb", type=float, default=2.0, help="verify log size (default 2)")
    ap.add_argument("--puts", type=int, default=1_000_000, help="AutoSeal puts (default 1M)")
    ap.add_argument("--batch", type=int, default=1000, help="records per commit (default 1000)")
    ap.add_argument("--runs", type=int, default=5, help="runs per figure (default 5)")
    ap.add_argument("--only", choices=["verify", "autoseal"])
    ap.add_argument("--dir", default=None, help="where to write (default a temp dir)")
    args = ap.parse_args()
    if args.quick:
        args.gb, args.puts, args.runs = 0.2, 200_000, 3
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        if args.only in (None, "verify"):
            bench_verify(d, args.gb, args.runs)
        if args.only in (None, "autoseal"):
            bench_autoseal(d, args.puts, args.batch, args.runs)


if __name__ == "__main__":
    main()
