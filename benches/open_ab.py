"""Open one log by full replay in fresh processes, alternating two builds of memcommit.

    python benches/open_ab.py --build before=/path/to/old/python --build after=python

Each `--build` names a directory that holds a `memcommit` package (with its native module);
the runs alternate between them so both see the same load. The log (`--records`, `--memories`,
histories as in `benches/compaction.py`) is built once into `--dir` and kept for later runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

CHILD = (
    "import memcommit, sys, time; t = time.perf_counter(); "
    "memcommit.open(sys.argv[1], read_only=True); print(time.perf_counter() - t)"
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", action="append", required=True, help="NAME=DIR")
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--memories", type=int, default=300_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default="bench-data")
    args = ap.parse_args()
    builds = dict(b.split("=", 1) for b in args.build)
    os.makedirs(args.dir, exist_ok=True)
    log = os.path.join(args.dir, f"open-ab-{args.records}.db")
    if not os.path.exists(log):
        import compaction

        compaction.build(log, args.memories, args.records)
    index = log + ".index"
    if os.path.exists(index):
        os.remove(index)  # replay, not the index file
    times: dict[str, list[float]] = {name: [] for name in builds}
    for _ in range(args.runs):
        for name, path in builds.items():
            env = {**os.environ, "PYTHONPATH": os.path.abspath(path)}
            out = subprocess.run(
                [sys.executable, "-c", CHILD, log], env=env, capture_output=True, text=True
            )
            if out.returncode != 0:
                raise SystemExit(f"{name}: {out.stderr.strip()}")
            times[name].append(float(out.stdout))
    for name, t in times.items():
        runs = ", ".join(f"{x:.3f}" for x in t)
        print(f"{name}: median {statistics.median(t):.3f} s ({runs})")


if __name__ == "__main__":
    main()
