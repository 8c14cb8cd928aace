"""Log compaction against cp, on a log with long histories.

    python benches/compaction.py            # 10M records (~2 GB), 1M memories
    python benches/compaction.py --quick    # 1M records, 100k memories

Builds a log where each memory has a history (put, stale, restore, move, put again, ...),
warms the page cache, then in the same run times ``cp`` of the log (and ``cp`` plus an fsync
of the copy, since compaction fsyncs what it writes) and ``memcommit.storage.compact`` in a
child process, whose peak RSS is reported next to the log's size and the index's. Release
build only (``pip install .``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import memcommit

CHILD = r"""
import json, sys, time
import memcommit
from memcommit.storage import compact
t = time.perf_counter()
store = memcommit.open(sys.argv[1])
opened = time.perf_counter() - t
index = store._native.index_heap_bytes()
# A writer's chain thread hashes the log from the open on; a store that has been running has
# its chain current. Wait for it here (timed apart), so the figure is the compaction itself.
t = time.perf_counter()
store._native.chain_hex()
chain = time.perf_counter() - t
report = compact(store)
store.close()
# VmHWM, not getrusage's ru_maxrss: after fork and exec, ru_maxrss starts from the parent's
# size at the fork, which here (the process that built the log) is larger than this one.
with open("/proc/self/status") as f:
    rss = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
print(json.dumps({"open": opened, "chain": chain, "seconds": report.seconds,
                  "before": report.before, "after": report.after,
                  "bytes_before": report.bytes_before, "bytes_after": report.bytes_after,
                  "index_bytes": index, "rss_kib": rss}))
"""

OPEN_CHILD = r"""
import json, sys, time
import memcommit
t = time.perf_counter()
store = memcommit.open(sys.argv[1], read_only=True, snapshot=sys.argv[2] or None)
store.get("no-such-id")
print(json.dumps({"seconds": time.perf_counter() - t, "memories": len(store)}))
"""

TIERS = ("working", "mid", "long", "archive")


def open_seconds(log: str, snapshot: str) -> float:
    """Seconds for a fresh process to open `log` (with `snapshot`, if given) until a get."""
    out = subprocess.run(
        [sys.executable, "-c", OPEN_CHILD, log, snapshot],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(json.loads(out.stdout)["seconds"])


def bench_snapshot(log: str, directory: str, label: str) -> None:
    """Open `log` three ways: replaying it, from its index file (if its writer left one), and
    from a JSON snapshot."""
    snap = os.path.join(directory, "state.json")
    with memcommit.open(log, read_only=True) as store:
        t = time.perf_counter()
        store.save_snapshot(snap)
        saved = time.perf_counter() - t
        n = len(store)
    index_file = f"{log}.index"
    aside = f"{log}.index-aside"
    has_index = os.path.exists(index_file)
    if has_index:
        os.rename(index_file, aside)
    try:
        full = sorted(open_seconds(log, "") for _ in range(3))[1]
        fast = sorted(open_seconds(log, snap) for _ in range(3))[1]
    finally:
        if has_index:
            os.rename(aside, index_file)
    indexed = sorted(open_seconds(log, "") for _ in range(3))[1] if has_index else None
    size = os.path.getsize(snap)
    with_index = f", from its index file {indexed:.3f} s ({full / indexed:.1f}x)" if indexed else ""
    print(
        f"open {label} ({n:,} memories), fresh process, median of 3: full replay {full:.2f} s, "
        f"from a snapshot {fast:.2f} s ({full / fast:.1f}x){with_index}; snapshot "
        f"{size / 1e6:.0f} MB, saved in {saved:.2f} s"
    )
    os.remove(snap)


def build(path: str, memories: int, records: int) -> int:
    """Write `memories` memories with histories until the log holds `records` records."""
    store = memcommit.open(path, durability="none")
    text = (
        "agent 42 observed that the deploy of service billing-api to eu-west finished with "
        "three retries; latency p99 rose to 412 ms, the canary stayed green, and the rollback "
        "plan was filed under ops-7781 for the on-call team to review before the next window. "
        "Two alerts fired and cleared; no customer impact was recorded in the status page."
    )
    batch = 10_000
    ids: list[str] = []
    for start in range(0, memories, batch):
        with store.commit() as c:
            ids.extend(
                c.put(text, kind="trace", task=f"t{i // 100}")
                for i in range(start, min(start + batch, memories))
            )
    written = memories
    step = 1
    while written < records:
        with store.commit() as c:
            for i in range(batch):
                mid = ids[(written + i) % memories]
                op = (step + i) % 4
                if op == 0:
                    c.stale(mid)
                elif op == 1:
                    c.restore(mid)
                elif op == 2:
                    c.move(mid, TIERS[(step + i) % 4])
                else:
                    c.put(text + f" v{step}", id=mid, kind="trace")
        written += batch
        step += 1
    n = store.info()["records"]
    store.close()
    return int(n)


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--memories", type=int, default=1_000_000)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    if args.quick:
        args.records, args.memories = 1_000_000, 100_000
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        log = os.path.join(d, "history.db")
        t = time.perf_counter()
        n = build(log, args.memories, args.records)
        size = os.path.getsize(log)
        print(
            f"log: {n:,} records, {args.memories:,} memories, {size / 1e9:.2f} GB "
            f"(built in {time.perf_counter() - t:.1f} s)"
        )
        subprocess.run(["cat", log], check=True, stdout=subprocess.DEVNULL)  # warm the cache
        bench_snapshot(log, d, "the log with its histories")
        copy = os.path.join(d, "copy.db")
        cps, syncs = [], []
        for _ in range(3):
            cps.append(timed(["cp", log, copy]))
            os.remove(copy)
            syncs.append(timed(["sh", "-c", f"cp {log} {copy} && sync {copy}"]))
            os.remove(copy)
        cp, cp_sync = sorted(cps)[1], sorted(syncs)[1]
        out = subprocess.run(
            [sys.executable, "-c", CHILD, log], check=True, capture_output=True, text=True
        )
        r = json.loads(out.stdout)
        rss_kib = r["rss_kib"]
        mb_in = r["bytes_before"] / r["seconds"] / 1e6
        mb_out = r["bytes_after"] / r["seconds"] / 1e6
        runs = [round(x, 2) for x in cps]
        print(f"cp              {size / cp / 1e6:8.0f} MB/s (median of 3: {runs} s)")
        runs = [round(x, 2) for x in syncs]
        print(f"cp + sync       {size / cp_sync / 1e6:8.0f} MB/s (median of 3: {runs} s)")
        print(
            f"compact         {mb_in:8.0f} MB/s in, {mb_out:.0f} MB/s out ({r['seconds']:.2f} s; "
            f"{r['before']:,} -> {r['after']:,} records, {r['bytes_after'] / 1e6:.0f} MB)"
        )
        print(
            f"compact / cp    {mb_in / (size / cp / 1e6):8.2f}   "
            f"compact / (cp + sync) {mb_in / (size / cp_sync / 1e6):.2f}"
        )
        print(
            f"peak RSS of the compacting process: {rss_kib / 1024:.0f} MiB "
            f"(index {r['index_bytes'] / 2**20:.0f} MiB, log {size / 2**20:.0f} MiB)"
        )
        print(
            f"before it: open {r['open']:.2f} s; the chain thread catching up after the open "
            f"{r['chain']:.2f} s (a running store's chain is current)"
        )
        bench_snapshot(log, d, "the compacted log")


if __name__ == "__main__":
    main()
