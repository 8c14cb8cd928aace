"""Opening from a snapshot on a log with and without a seal near the snapshot's end.

A snapshot's open recomputes the log's hash chain at its end from the newest seal it holds
(from the log's first record without one). This builds a log with histories
(``benches/compaction.py``'s ``build``), then for the log unsealed and sealed at its end: saves
a snapshot, times ``verify``, and opens the log in fresh processes, replaying it and from the
snapshot (the index file removed), medians of 5.

    python benches/snapshot_open.py [--records N] [--memories M]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import memcommit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compaction import build, open_seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--memories", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        log, snap = os.path.join(d, "m.db"), os.path.join(d, "state.json")
        n = build(log, args.memories, args.records)
        for label in ("no seal", "a seal at its end"):
            if label != "no seal":
                with memcommit.open(log) as store:
                    memcommit.seal(store)
            with memcommit.open(log, read_only=True) as store:
                store.save_snapshot(snap)
                t = time.perf_counter()
                memcommit.verify(store)
                checked = time.perf_counter() - t
            if os.path.exists(f"{log}.index"):
                os.remove(f"{log}.index")
            full = sorted(open_seconds(log, "") for _ in range(5))[2]
            fast = sorted(open_seconds(log, snap) for _ in range(5))[2]
            print(
                f"{label}: {n:,} records, {os.path.getsize(log) / 1e6:.0f} MB: full replay "
                f"{full:.3f} s, from a snapshot {fast:.3f} s, verify {checked:.3f} s"
            )


if __name__ == "__main__":
    main()
