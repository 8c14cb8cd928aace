"""One ``c.put_rows`` of N records in fresh processes, in turn between builds of memcommit.

    python benches/bulk_ab.py --build before=/path/to/old/python --build after=python
    python benches/bulk_ab.py --lmdb

With ``--build`` (repeatable), each names a directory that holds a ``memcommit`` package (with
its native module, a release build); every round runs one fresh process per build, in a new
random order, so all see the same load. Each process commits the records of
``benches/_peers.make_records`` in one ``c.put_rows`` call and reports the call and the
commit's exit apart, with the exit's user and system CPU time. The records are made once and
kept in ``--dir`` (a pickle), so each process only loads them.

With ``--lmdb``, one process runs LMDB ``putmulti`` and the installed memcommit's
``c.put_rows`` on the same records in turn (the order swapped every round), each in a fresh
directory after a sync and a pause, timed as ``benches/compare.py`` times them: the figures of
that side-by-side run, taken as many times as ``--rounds`` says.

Prints medians (and each round's figures); a figure moves between sets of rounds on a shared
machine, so compare builds within one run.
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import _peers

SETTLE_SECONDS = 1.0

CHILD = """
import os, pickle, resource, shutil, sys, tempfile, time
import memcommit
records, directory, durability = sys.argv[1], sys.argv[2], sys.argv[3]
with open(records, "rb") as f:
    recs = pickle.load(f)
d = tempfile.mkdtemp(dir=directory)
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime
os.sync()
time.sleep(0.5)
store = memcommit.open(os.path.join(d, "memory.db"), durability=durability)
t0 = time.perf_counter()
c = store.commit()
c.__enter__()
c.put_rows(recs, fields=("id", "kind", "task", "text"))
t1 = time.perf_counter()
u1, s1 = cpu()
c.__exit__(None, None, None)
t2 = time.perf_counter()
u2, s2 = cpu()
assert len(store) == len(recs)
store.close()
shutil.rmtree(d)
print(t1 - t0, t2 - t1, u2 - u1, s2 - s1)
"""

FIGURES = ("call s", "exit s", "exit user CPU s", "exit system CPU s")


def records_file(directory: str, n: int) -> str:
    """The pickle of `make_records(n)` in `directory`, made once."""
    path = os.path.join(directory, f"bulk-ab-{n}.pickle")
    if not os.path.exists(path):
        with open(path + ".tmp", "wb") as f:
            pickle.dump(_peers.make_records(n), f)
        os.replace(path + ".tmp", path)
    return path


def builds_in_turn(builds: dict[str, str], n: int, rounds: int, durability: str, dir_: str) -> None:
    """Run `rounds` rounds of one process per build and print the medians."""
    records = records_file(dir_, n)
    runs: dict[str, list[list[float]]] = {name: [] for name in builds}
    for _ in range(rounds):
        order = list(builds)
        random.shuffle(order)
        for name in order:
            env = {**os.environ, "PYTHONPATH": os.path.abspath(builds[name])}
            out = subprocess.run(
                [sys.executable, "-c", CHILD, records, dir_, durability],
                env=env,
                capture_output=True,
                text=True,
            )
            if out.returncode != 0:
                raise SystemExit(f"{name}: {out.stderr.strip()}")
            runs[name].append([float(x) for x in out.stdout.split()])
    print(f"{n:,} records, one put_rows, durability={durability!r}, {rounds} rounds; medians:")
    print()
    print("| build | " + " | ".join(FIGURES) + " | fastest exit s |")
    print("| --- |" + " ---: |" * (len(FIGURES) + 1))
    for name, rows in runs.items():
        cols = list(zip(*rows, strict=True))
        medians = " | ".join(f"{statistics.median(c):.3f}" for c in cols)
        print(f"| {name} | {medians} | {min(cols[1]):.3f} |")
    print()
    for name, rows in runs.items():
        exits = ", ".join(f"{r[1]:.3f}" for r in rows)
        print(f"{name}: exits {exits}")


def against_lmdb(n: int, rounds: int, dir_: str) -> None:
    """LMDB putmulti and put_rows in turn in this process; print both and the ratio."""
    recs = _peers.make_records(n)
    base = tempfile.mkdtemp(dir=dir_)
    times: dict[str, list[float]] = {"LMDB putmulti": [], "memcommit c.put_rows": []}
    try:
        for r in range(rounds):
            order = list(times) if r % 2 == 0 else list(reversed(times))
            for name in order:
                path = os.path.join(base, f"{r}-{len(times[name])}-{name.split()[0]}")
                os.makedirs(path)
                os.sync()
                time.sleep(SETTLE_SECONDS)
                if name.startswith("LMDB"):
                    t = _peers.lmdb_batch_putmulti(path, recs)
                else:
                    t = _peers.memcommit_batch_put_rows(os.path.join(path, "memory.db"), recs)
                times[name].append(t.seconds)
                shutil.rmtree(path)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{n:,} records in one transaction, {rounds} rounds in turn:")
    for name, t in times.items():
        each = ", ".join(f"{x:.3f}" for x in t)
        print(f"{name}: median {statistics.median(t):.3f} s ({each})")
    lmdb, rows = (statistics.median(t) for t in times.values())
    print(f"put_rows vs LMDB putmulti, ratio of the medians: {lmdb / rows:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", action="append", default=[], help="NAME=DIR (repeatable)")
    ap.add_argument("--lmdb", action="store_true", help="LMDB putmulti against put_rows")
    ap.add_argument("--n", type=int, default=1_000_000, help="records (default 1,000,000)")
    ap.add_argument("--rounds", type=int, default=8, help="rounds (default 8)")
    ap.add_argument("--durability", choices=("commit", "none"), default="none")
    ap.add_argument("--dir", default="bench-data", help="where the data goes")
    args = ap.parse_args()
    if bool(args.build) == args.lmdb:
        ap.error("give either --build (one or more) or --lmdb")
    os.makedirs(args.dir, exist_ok=True)
    if args.lmdb:
        against_lmdb(args.n, args.rounds, args.dir)
    else:
        builds = dict(b.split("=", 1) for b in args.build)
        builds_in_turn(builds, args.n, args.rounds, args.durability, args.dir)


if __name__ == "__main__":
    main()
