"""``store.history(id)`` per call as the log grows, with the open time and memory it costs.

    python benches/history.py --build before=/path/to/old/python --build after=python
    python benches/history.py --build after=python --records 100000 --records 1000000
    python benches/history.py --build after=python --quick     # 100k records, a smoke run

For each size (``--records``, default 100k, 1M and 5M records) a log is built once into
``--dir`` (default ``bench-data``) by the first ``--build`` (name the oldest first, so that every
build reads its format) and kept for later runs: a tenth as many memories as records,
each written once (``put_many``) and then given nine more records in rounds of stale,
restore, move and put, so every memory has about ten records spread over the whole log.

Each ``--build`` names a directory that holds a ``memcommit`` package (with its native module);
the runs alternate between them so they see the same load. For every size, build and open mode
a fresh process opens the log read-only, by full replay (no index file) or from the index file
that build's writer wrote (each build keeps its own, swapped in for its runs), then reads
``history(id)`` of ``--calls`` random memories (the same ids for every build), timing each call,
for at most ``--budget`` seconds. Printed: the open's median over ``--runs`` runs, the RSS after
the open (VmRSS and its anonymous part, from ``/proc/self/status``), and p50/p99 of the calls.
Speed is reported here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, random, sys, time
import memcommit

def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(rest.split()[0]) * 1024
    return out

path, memories, calls, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
t = time.perf_counter()
store = memcommit.open(path, read_only=True)
opened = time.perf_counter() - t
rss = status()
index_file = store.info()["index_file"]
index_bytes = store.engine.view().index_heap_bytes()
rng = random.Random(7)
ids = [f"h{rng.randrange(memories):09d}" for _ in range(calls)]
times, records = [], 0
stop = time.perf_counter() + budget
for mid in ids:
    t0 = time.perf_counter_ns()
    got = store.history(mid)
    times.append(time.perf_counter_ns() - t0)
    records += len(got)
    if time.perf_counter() > stop:
        break
print(json.dumps({"module": memcommit.__file__, "open": opened, "rss": rss,
                  "index_file": index_file, "index_bytes": index_bytes, "times_ns": times,
                  "records": records}))
"""

TEXT = (
    "agent 42 observed that the deploy of service billing-api to eu-west finished with three "
    "retries; latency p99 rose to 412 ms and the canary stayed green."
)
TIERS = ("mid", "long", "archive", "working")


def build_log(path: str, records: int) -> None:
    """A tenth as many memories as `records`, each with about ten records (see the module)."""
    import memcommit

    memories = records // 10
    ids = [f"h{i:09d}" for i in range(memories)]
    with memcommit.open(path, durability="none") as store:
        for start in range(0, memories, 100_000):
            with store.commit() as c:
                c.put_many(
                    [TEXT] * len(ids[start : start + 100_000]), ids=ids[start : start + 100_000]
                )
        written = memories
        round_ = 0
        while written < records:
            # Each round visits every memory once, in a scattered order.
            order = [ids[i * 7919 % memories] for i in range(memories)]
            for start in range(0, memories, 10_000):
                with store.commit() as c:
                    for k, mid in enumerate(order[start : start + 10_000]):
                        op = round_ % 4
                        if op == 0:
                            c.stale(mid, reason=f"superseded in round {round_}")
                        elif op == 1:
                            c.restore(mid)
                        elif op == 2:
                            c.move(mid, TIERS[(round_ // 4 + k) % 4])
                        else:
                            c.put(f"{TEXT} (version {round_})", id=mid)
                written += min(10_000, memories - start)
                if written >= records:
                    break
            round_ += 1


def write_index_file(log: str, build: str, keep: str) -> None:
    """Let `build`'s writer write the log's index file (open, close), and move it to `keep`."""
    index = log + ".index"
    if os.path.exists(index):
        os.remove(index)
    code = "import memcommit, sys; memcommit.open(sys.argv[1], durability='none').close()"
    env = {**os.environ, "PYTHONPATH": os.path.abspath(build)}
    subprocess.run([sys.executable, "-c", code, log], env=env, check=True)
    if not os.path.exists(index):
        raise SystemExit(f"{build}: its writer wrote no index file for {log}")
    os.replace(index, keep)


def run_child(build: str, log: str, memories: int, calls: int, budget: float) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(build)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, log, str(memories), str(calls), str(budget)],
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"{build}: {out.stderr.strip()}")
    result: dict[str, object] = json.loads(out.stdout)
    if not str(result["module"]).startswith(os.path.abspath(build) + os.sep):
        raise SystemExit(f"{build}: the child imported {result['module']}, not this build")
    return result


def pct(values: list[int], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))] / 1000


def main() -> None:
    if sys.argv[1:2] == ["--make-log"]:
        build_log(sys.argv[2], int(sys.argv[3]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append", required=True, help="NAME=DIR")
    ap.add_argument("--records", type=int, action="append")
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds of calls per run, at most")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default="bench-data")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    sizes = args.records or ([100_000] if args.quick else [100_000, 1_000_000, 5_000_000])
    if args.quick:
        args.runs, args.calls = 1, 200
    builds = dict(b.split("=", 1) for b in args.build)
    for name, path in builds.items():
        if not os.path.isfile(os.path.join(path, "memcommit", "__init__.py")):
            raise SystemExit(f"{name}: {path} holds no memcommit package")
    os.makedirs(args.dir, exist_ok=True)
    print(
        "| records | build | index | open by replay | RSS (anon) | open from index file | "
        "RSS (anon) | history p50 / p99 (replay) | p50 / p99 (index file) | calls |"
    )
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for records in sizes:
        log = os.path.join(args.dir, f"history-{records}.db")
        if not os.path.exists(log):
            first = os.path.abspath(next(iter(builds.values())))
            env = {**os.environ, "PYTHONPATH": first}
            make = [sys.executable, os.path.abspath(__file__), "--make-log", log, str(records)]
            subprocess.run(make, env=env, check=True)
        index = log + ".index"
        kept = {name: f"{log}.index-{name}" for name in builds}
        for name, path in builds.items():
            write_index_file(log, path, kept[name])
        seen: dict[tuple[str, str], list[dict[str, object]]] = {}
        for _ in range(args.runs):
            for mode in ("replay", "index"):
                for name, path in builds.items():
                    if mode == "index":
                        os.replace(kept[name], index)
                    try:
                        r = run_child(path, log, records // 10, args.calls, args.budget)
                    finally:
                        if mode == "index":
                            os.replace(index, kept[name])
                    want = "loaded" if mode == "index" else "absent"
                    if r["index_file"] != want:
                        raise SystemExit(f"{name}: index file {r['index_file']}, not {want}")
                    seen.setdefault((name, mode), []).append(r)
        for name in builds:
            index_bytes = int(seen[(name, "replay")][-1]["index_bytes"])  # type: ignore[call-overload]
            cells = [f"{records:,}", name, f"{index_bytes / 2**20:.1f} MiB"]
            for mode in ("replay", "index"):
                runs = seen[(name, mode)]
                rss: dict[str, int] = runs[-1]["rss"]  # type: ignore[assignment]
                opened = statistics.median(float(r["open"]) for r in runs)  # type: ignore[arg-type]
                cells += [f"{opened:.3f} s", f"{rss['VmRSS'] >> 20} MiB ({rss['RssAnon'] >> 20})"]
            calls = 0
            for mode in ("replay", "index"):
                times: list[int] = [t for r in seen[(name, mode)] for t in r["times_ns"]]  # type: ignore[attr-defined]
                calls = max(calls, len(times))
                cells.append(f"{pct(times, 0.5):,.0f} / {pct(times, 0.99):,.0f} us")
            cells.append(f"{calls:,}")
            print("| " + " | ".join(cells) + " |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
