"""Side-by-side benchmark: memcommit against SQLite and LMDB on the same records.

    python benches/compare.py              # full run: N = 1,000,000 (many minutes)
    python benches/compare.py --quick      # smoke run: N = 20,000
    python benches/compare.py --only open --only rss --n 200000

Prints a markdown report on stdout (progress goes to stderr): machine facts, an
fdatasync latency probe, then four sections, each with its figures and the ratios
memcommit / peer:

1. batch: N puts in one transaction (SQLite executemany, LMDB putmulti and put loop,
   memcommit ``c.put`` loop, ``c.put_many`` and ``c.put_rows``), records/s, final fsync
   included;
2. durable: single-put commits, each its own durable transaction, from 1 and T threads;
3. open: in a fresh process, time from open to the first answered ``get`` (memcommit)
   against loading every record into a dict (SQLite, LMDB) and reading the log's bytes;
4. rss: resident memory added by opening the N-memory log, per memory.

Needs the ``lmdb`` package (``pip install lmdb``); parts whose library cannot be imported
are skipped and say so.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _peers
from _peers import Record

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "_open_child.py")
PHASES = ("batch", "durable", "open", "rss")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def out(line: str = "") -> None:
    print(line, flush=True)


# --------------------------------------------------------------------------------------
# Availability of the contenders


def probe_import(name: str) -> str | None:
    """Return None if ``name`` imports, else the reason it does not."""
    try:
        __import__(name)
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


@dataclass
class Env:
    no_memcommit: str | None
    no_lmdb: str | None

    @property
    def memcommit(self) -> bool:
        return self.no_memcommit is None

    @property
    def lmdb(self) -> bool:
        return self.no_lmdb is None


# --------------------------------------------------------------------------------------
# Formatting


def fmt_int(x: float) -> str:
    return f"{x:,.0f}"


def fmt_s(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 1:
        return f"{x:.2f}"
    if x >= 0.01:
        return f"{x:.3f}"
    return f"{x:.4f}"


def fmt_ratio(a: float | None, b: float | None) -> str:
    """`a / b` as a ratio ("2.31x"), or n/a."""
    if a is None or b is None or b == 0:
        return "n/a"
    r = a / b
    return f"{r:.2f}x" if r < 10 else f"{r:.1f}x" if r < 100 else f"{r:,.0f}x"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> None:
    """A markdown table; the first ``left`` columns and a last "note" column align left."""

    def align(i: int) -> str:
        return " --- " if i < left or headers[i] == "note" else " ---: "

    out("| " + " | ".join(headers) + " |")
    out("|" + "|".join(align(i) for i in range(len(headers))) + "|")
    for r in rows:
        out("| " + " | ".join(r) + " |")
    out()


def ratio_table(env: Env, heading: str, rows: Sequence[tuple[str, float | None, bool]]) -> None:
    """`heading`, then a table of each memcommit row's figure over each peer row's; or, with
    no memcommit row (memcommit is not available), the skipped line instead.

    Args:
        env: what is available.
        heading: the line above the table.
        rows: (name, figure, whether the row is memcommit's), in the section's order.
    """
    mine = [(name, figure) for name, figure, is_mine in rows if is_mine]
    peers = [(name, figure) for name, figure, is_mine in rows if not is_mine]
    if not mine:
        skipped(env)
        return
    out(heading)
    out()
    table(
        ["memcommit", *(f"vs {name}" for name, _ in peers)],
        [[name, *(fmt_ratio(figure, peer) for _, peer in peers)] for name, figure in mine],
    )


def skipped(env: Env) -> None:
    """What a section prints in place of memcommit's figures when memcommit is not available."""
    out(f"memcommit skipped: {env.no_memcommit}")
    out()


# --------------------------------------------------------------------------------------
# Machine facts and the fdatasync probe


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem_total() -> str:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def filesystem_of(path: str) -> str:
    """``fstype device (options)`` of the mount that holds ``path``, from /proc/mounts."""
    path = os.path.realpath(path)
    best: tuple[int, str] = (-1, "unknown")
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 4:
                    continue
                dev, mnt, fstype, opts = parts[:4]
                mnt = mnt.replace("\\040", " ")
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > best[0]:
                    best = (len(mnt), f"{fstype} on {dev} at {mnt} ({opts})")
    except OSError:
        pass
    return best[1]


def versions(env: Env) -> str:
    parts = [f"sqlite {sqlite3.sqlite_version}"]
    if env.lmdb:
        import lmdb

        parts.append(f"lmdb {'.'.join(map(str, lmdb.version()))} (py-lmdb {lmdb.__version__})")
    if env.memcommit:
        import memcommit

        try:
            from importlib.metadata import version

            ver = version("memcommit")
        except Exception:
            ver = getattr(memcommit, "__version__", "?")
        parts.append(f"memcommit {ver} (from {os.path.dirname(memcommit.__file__ or '?')})")
    return ", ".join(parts)


def fdatasync_probe(directory: str, count: int = 1000, size: int = 128) -> tuple[float, float]:
    """p50 and p99 latency (seconds) of ``count`` appends of ``size`` bytes + fdatasync."""
    path = os.path.join(directory, "fdatasync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        buf = b"x" * size
        lat: list[float] = []
        for _ in range(count):
            t0 = time.perf_counter()
            os.write(fd, buf)
            os.fdatasync(fd)
            lat.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        os.unlink(path)
    lat.sort()
    return lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]


# --------------------------------------------------------------------------------------
# Section 1: batch


@dataclass
class BatchRow:
    name: str
    seconds: float
    commit_seconds: float
    records: int
    note: str = ""
    path: str = ""
    dir: str = ""
    bytes_on_disk: int = 0

    @property
    def rate(self) -> float:
        return self.records / self.seconds


def fresh(base: str, name: str) -> str:
    d = os.path.join(base, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


SETTLE_SECONDS = 1.0
"""How long each batch contender waits, after a sync, for the disk to finish what the one
before it wrote (its index file, a checkpoint): a virtual disk goes on absorbing a burst
after fsync returns, and whoever writes next pays for it."""


def settle() -> None:
    """Flush every dirty page to disk and wait :data:`SETTLE_SECONDS`."""
    os.sync()
    time.sleep(SETTLE_SECONDS)


def phase_batch(env: Env, base: str, recs: Sequence[Record]) -> dict[str, str]:
    """Run section 1; return paths of the data sets it built (for sections 3 and 4)."""
    n = len(recs)
    rows: list[BatchRow] = []
    built: dict[str, str] = {}

    def run(name: str, key: str, fn: Callable[[str], _peers.Timing], target: str) -> None:
        d = fresh(base, key)
        path = os.path.join(d, target) if target else d
        settle()
        log(f"batch: {name} ...")
        t = fn(path)
        rows.append(BatchRow(name, t.seconds, t.commit_seconds, n, "", path, d))
        rows[-1].bytes_on_disk = _peers.dir_bytes(d)
        notes = []
        if t.calls:
            if "put_rows" in name:
                notes.append(f"{t.calls:,} put_rows call(s) on the record tuples as they are")
            else:
                notes.append(
                    f"{t.calls:,} put_many call(s), a kind and a task per record; "
                    "splitting the records into columns timed"
                )
        index_file = os.path.join(d, f"{target}.index")
        if target and os.path.exists(index_file):
            size = os.path.getsize(index_file)
            notes.append(
                f"the close after it (not timed) took {t.close_seconds:.2f} s and wrote the "
                f"index file, {size / n:,.0f} of the bytes/record"
            )
        rows[-1].note = "; ".join(notes)
        log(f"batch: {name}: {t.seconds:.2f} s")

    run(
        "SQLite executemany, 1 txn",
        "batch-sqlite",
        lambda p: _peers.sqlite_batch(p, recs),
        "memories.sqlite",
    )
    built["sqlite"] = rows[-1].path
    if env.lmdb:
        run(
            "LMDB putmulti, 1 txn",
            "batch-lmdb-putmulti",
            lambda p: _peers.lmdb_batch_putmulti(p, recs),
            "",
        )
        built["lmdb"] = rows[-1].path
        run(
            "LMDB put loop, 1 txn",
            "batch-lmdb-put",
            lambda p: _peers.lmdb_batch_put_loop(p, recs),
            "",
        )
    if env.memcommit:
        run(
            "memcommit c.put loop, 1 commit",
            "batch-mc-put",
            lambda p: _peers.memcommit_batch_put_loop(p, recs),
            "memory.db",
        )
        built["memcommit"] = rows[-1].path
        run(
            "memcommit c.put_many, 1 commit",
            "batch-mc-put-many",
            lambda p: _peers.memcommit_batch_put_many(p, recs),
            "memory.db",
        )
        run(
            "memcommit c.put_rows, 1 commit",
            "batch-mc-put-rows",
            lambda p: _peers.memcommit_batch_put_rows(p, recs),
            "memory.db",
        )

    out(f"## 1. Batch: {n:,} puts in one transaction")
    out()
    out(
        "Fresh directory per contender, each started after a sync and a "
        f"{SETTLE_SECONDS:g} s pause (so that none pays for the writes of the one before); "
        "timed from the start of the transaction to the end "
        "of its commit, final fsync included (SQLite WAL synchronous=FULL; LMDB sync=True; "
        'memcommit durability="commit"). Opening and schema creation are not timed. '
        "SQLite table `(id TEXT PRIMARY KEY, kind, task, text)`. LMDB key = id, value = "
        "`kind\\x1ftask\\x1ftext` in UTF-8, encoded inside the timing. Ids are 26-character "
        "ULID-style strings that sort by creation, so the B-trees insert in key order "
        '(their best case). "Of which commit": from the call that ends the transaction '
        "(COMMIT, `txn.commit()`, leaving the `with store.commit()` block) to its return."
    )
    out()
    table(
        ["contender", "seconds", "of which commit", "records/s", "disk bytes/record", "note"],
        [
            [
                r.name,
                fmt_s(r.seconds),
                fmt_s(r.commit_seconds),
                fmt_int(r.rate),
                fmt_int(r.bytes_on_disk / r.records),
                r.note,
            ]
            for r in rows
        ],
    )
    ratio_table(
        env,
        "Ratios, memcommit records/s ÷ peer records/s (above 1: memcommit is faster):",
        [(r.name, r.rate, r.name.startswith("memcommit")) for r in rows],
    )
    # Drop the data sets sections 3 and 4 do not reuse.
    reused = {os.path.dirname(p) if os.path.isfile(p) else p for p in built.values()}
    for r in rows:
        if r.dir not in reused:
            shutil.rmtree(r.dir, ignore_errors=True)
    return built


# --------------------------------------------------------------------------------------
# Section 2: durable single-put commits


def phase_durable(
    env: Env,
    base: str,
    recs: Sequence[Record],
    threads: int,
    per_thread: int,
    max_seconds: float,
) -> None:
    counts = sorted({1, threads})
    contenders: list[tuple[str, Callable[..., _peers.DurableResult], str]] = [
        ("SQLite", _peers.sqlite_durable, "memories.sqlite"),
    ]
    if env.lmdb:
        contenders.append(("LMDB", _peers.lmdb_durable, ""))
    if env.memcommit:
        contenders.append(("memcommit", _peers.memcommit_durable, "memory.db"))
    results: dict[tuple[str, int], _peers.DurableResult] = {}
    probe_before = fdatasync_probe(base)
    for t in counts:
        for name, fn, target in contenders:
            d = fresh(base, f"durable-{name.lower()}-{t}")
            path = os.path.join(d, target) if target else d
            log(f"durable: {name}, {t} thread(s) ...")
            res = fn(path, t, per_thread, max_seconds, recs)
            results[(name, t)] = res
            log(f"durable: {name}, {t} thread(s): {res.rate:,.0f} commits/s")
            shutil.rmtree(d, ignore_errors=True)

    probe_after = fdatasync_probe(base)
    out("## 2. Durable single-put commits")
    out()
    out(
        f"Each put is its own transaction and returns only once it is on stable storage. "
        f"Up to {per_thread:,} puts per thread, stopping early after {max_seconds:g} s; "
        "rate = commits / wall time. SQLite: WAL, synchronous=FULL, one connection per "
        "thread, autocommit INSERT, busy_timeout 600 s. LMDB: one environment (sync=True), "
        "one write txn per put. memcommit: one store, `store.put` "
        '(durability="commit"; concurrent puts may share one fsync).'
    )
    out()
    rows = []
    for (name, t), r in results.items():
        rows.append([name, str(t), fmt_int(r.commits), fmt_s(r.seconds), fmt_int(r.rate)])
    table(["contender", "threads", "commits", "seconds", "commits/s"], rows)
    out(
        "fdatasync probe just before / just after this section: p50 "
        f"{probe_before[0] * 1e3:.3f} / {probe_after[0] * 1e3:.3f} ms, p99 "
        f"{probe_before[1] * 1e3:.3f} / {probe_after[1] * 1e3:.3f} ms "
        "(if these differ much from each other or from the one above, the disk was busy)."
    )
    out()
    if env.memcommit:
        peers = [name for name, _fn, _t in contenders if name != "memcommit"]
        out("Ratios, memcommit commits/s ÷ peer commits/s (above 1: memcommit is faster):")
        out()
        table(
            ["threads", *(f"vs {p}" for p in peers)],
            [
                [
                    str(t),
                    *(
                        fmt_ratio(results[("memcommit", t)].rate, results[(p, t)].rate)
                        for p in peers
                    ),
                ]
                for t in counts
            ],
        )
    else:
        skipped(env)


# --------------------------------------------------------------------------------------
# Sections 3 and 4: open time and index memory, each measurement in a fresh process


def build_datasets(env: Env, base: str, recs: Sequence[Record], built: dict[str, str]) -> None:
    """Build whatever section 1 did not leave behind."""
    if "sqlite" not in built:
        d = fresh(base, "data-sqlite")
        built["sqlite"] = os.path.join(d, "memories.sqlite")
        log("building SQLite data set ...")
        _peers.sqlite_batch(built["sqlite"], recs)
    if env.lmdb and "lmdb" not in built:
        built["lmdb"] = fresh(base, "data-lmdb")
        log("building LMDB data set ...")
        _peers.lmdb_batch_putmulti(built["lmdb"], recs)
    if env.memcommit and "memcommit" not in built:
        d = fresh(base, "data-memcommit")
        built["memcommit"] = os.path.join(d, "memory.db")
        log("building memcommit data set ...")
        _peers.memcommit_batch_put_loop(built["memcommit"], recs)


def run_child(mode: str, path: str, rid: str, n: int) -> dict[str, Any]:
    import json

    proc = subprocess.run(
        [sys.executable, CHILD, mode, path, rid, str(n)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} child failed ({proc.returncode}):\n{proc.stderr}")
    res: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    if not res["found"]:
        raise RuntimeError(f"{mode} child did not find {rid!r}")
    return res


def open_modes(env: Env, built: dict[str, str]) -> list[tuple[str, str, str]]:
    """(label, mode, path) of every open-time contender available."""
    modes: list[tuple[str, str, str]] = []
    if env.memcommit:
        modes += [
            ("memcommit open + get (writer)", "memcommit", built["memcommit"]),
            ("memcommit open read_only + get", "memcommit_ro", built["memcommit"]),
        ]
    modes.append(("SQLite: SELECT * into a dict", "sqlite_load", built["sqlite"]))
    if env.lmdb:
        modes.append(("LMDB: cursor into a dict", "lmdb_load", built["lmdb"]))
    if env.memcommit:
        modes.append(("read the memcommit log's bytes", "read_bytes", built["memcommit"]))
        if os.path.exists(f"{built['memcommit']}.index"):
            modes.append(("read its index file's bytes", "read_index", built["memcommit"]))
    modes.append(("SQLite: connect + 1 SELECT by id (no load)", "sqlite_point", built["sqlite"]))
    if env.lmdb:
        modes.append(("LMDB: open + 1 get (no load)", "lmdb_point", built["lmdb"]))
    return modes


@dataclass
class OpenRow:
    label: str
    mode: str
    path: str
    runs: list[float] = field(default_factory=list)
    index_file: list[str] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)


def phase_open(
    env: Env, base: str, recs: Sequence[Record], built: dict[str, str], repeat: int
) -> None:
    n = len(recs)
    build_datasets(env, base, recs, built)
    rid = recs[(n * 7) // 10][0]  # an id from the middle of the log, not the last one
    rows = [OpenRow(*m) for m in open_modes(env, built)]
    for i in range(repeat):
        for r in rows:
            log(f"open: {r.label} (run {i + 1}/{repeat}) ...")
            res = run_child(r.mode, r.path, rid, n)
            r.runs.append(res["seconds"])
            if res.get("index_file"):
                r.index_file.append(res["index_file"])
    out(f"## 3. Open time, {n:,} memories")
    out()
    has_index = "memcommit" in built and os.path.exists(f"{built['memcommit']}.index")
    index_note = (
        "memcommit's writer left the index file at close, so the open reads that and checks "
        "it against the log instead of replaying the log."
        if has_index
        else "memcommit's writer left no index file at close (a close writes one only once "
        "the log has grown by 100,000 records), so the open replays the log."
    )
    out(
        "Each measurement in a fresh `python` process, imports done first; timed from "
        "before the open to after the first lookup of one id answered. Median of "
        f"{repeat} runs (runs in the order shown, interleaved), warm page cache. SQLite and "
        "LMDB build the in-memory state an application would hold (every record in a "
        "dict; LMDB values left as bytes); the last rows are point lookups that load "
        "nothing, for context. Data sets as section 1 wrote them (SQLite executemany, "
        "LMDB putmulti, memcommit `c.put` loop: all N puts in one commit). " + index_note
    )
    out()
    disk = {
        "sqlite": _peers.dir_bytes(built["sqlite"]),
        **({"lmdb": _peers.dir_bytes(built["lmdb"])} if "lmdb" in built else {}),
        **({"memcommit": _peers.dir_bytes(built["memcommit"])} if "memcommit" in built else {}),
    }
    if has_index:
        disk["memcommit index file"] = os.path.getsize(f"{built['memcommit']}.index")
    table(
        ["contender", "median s", "min s", "max s", "index file"],
        [
            [
                r.label,
                fmt_s(r.median),
                fmt_s(min(r.runs)),
                fmt_s(max(r.runs)),
                ", ".join(
                    f"{v}: {r.index_file.count(v)} runs" for v in dict.fromkeys(r.index_file)
                ),
            ]
            for r in rows
        ],
    )
    out(
        "Files read: "
        + ", ".join(f"{k} {v / 1e6:,.1f} MB ({v / n:,.0f} B/memory)" for k, v in disk.items())
        + "."
    )
    out()
    # memcommit's rows are there exactly when memcommit is available (open_modes)
    ratio_table(
        env,
        "Ratios, memcommit seconds ÷ peer seconds (below 1: memcommit is faster):",
        [(r.label, r.median, r.mode.startswith("memcommit")) for r in rows],
    )


def phase_rss(env: Env, base: str, recs: Sequence[Record], built: dict[str, str]) -> None:
    n = len(recs)
    build_datasets(env, base, recs, built)
    rid = recs[(n * 7) // 10][0]
    id_len = statistics.fmean(len(r[0]) for r in recs)
    text_len = statistics.fmean(len(r[3]) for r in recs)
    modes = [
        m
        for m in open_modes(env, built)
        if m[1] in {"memcommit", "memcommit_ro", "sqlite_load", "lmdb_load"}
    ]
    rows = []
    for label, mode, path in modes:
        log(f"rss: {label} ...")
        res = run_child(mode, path, rid, n)
        b, a = res["before"], res["after"]
        d_rss = a["VmRSS"] - b["VmRSS"]
        d_anon = a.get("RssAnon", 0) - b.get("RssAnon", 0)
        d_file = a.get("RssFile", 0) - b.get("RssFile", 0)
        rows.append(
            [
                label,
                f"{d_rss / 1e6:,.1f}",
                f"{d_rss / n:,.1f}",
                f"{d_anon / n:,.1f}",
                f"{d_file / n:,.1f}",
            ]
        )
    out(f"## 4. Memory held after open, {n:,} memories")
    out()
    out(
        "Fresh process per row; VmRSS (and its RssAnon / RssFile parts) from "
        "/proc/self/status after imports, before the open, and after the first lookup "
        "answered. Anon is heap (the index); file is mapped file pages. Mean id length "
        f"{id_len:.1f} characters, mean text length {text_len:.1f} characters. "
        "The SQLite and LMDB rows are the dicts of section 3, for scale."
    )
    out()
    table(
        ["contender", "ΔRSS MB", "ΔRSS bytes/memory", "Δanon bytes/memory", "Δfile bytes/memory"],
        rows,
    )
    if not env.memcommit:
        skipped(env)


# --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="memcommit vs SQLite vs LMDB, side by side, on the same records."
    )
    p.add_argument("--quick", action="store_true", help="smoke settings: N=20,000, short runs")
    p.add_argument("--n", type=int, default=None, help="records (default 1,000,000; quick 20,000)")
    p.add_argument("--threads", type=int, default=8, help="threads for section 2 (default 8)")
    p.add_argument(
        "--per-thread",
        type=int,
        default=None,
        help="durable puts per thread (default 2,000; quick 200)",
    )
    p.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="cap on each durable measurement, seconds (default 60; quick 10)",
    )
    p.add_argument("--repeat", type=int, default=3, help="runs per open-time figure (median)")
    p.add_argument(
        "--only",
        action="append",
        choices=PHASES,
        help="run only this section (repeatable); default all",
    )
    p.add_argument(
        "--dir",
        default=None,
        help="make the data dir under this one (default: a temp dir on the repository's disk)",
    )
    p.add_argument("--keep", action="store_true", help="keep the data directory afterwards")
    a = p.parse_args(argv)
    if a.n is None:
        a.n = 20_000 if a.quick else 1_000_000
    if a.per_thread is None:
        a.per_thread = 200 if a.quick else 2_000
    if a.seconds is None:
        a.seconds = 10.0 if a.quick else 60.0
    if a.n < 10 or a.threads < 1 or a.per_thread < 1 or a.repeat < 1:
        p.error("--n must be >= 10; --threads, --per-thread and --repeat >= 1")
    a.only = tuple(a.only) if a.only else PHASES
    return a


def default_base() -> str:
    """A fresh temp dir on the same disk as the repository (the system one if it is)."""
    repo = os.path.dirname(HERE)
    tmp = tempfile.gettempdir()
    if os.stat(tmp).st_dev == os.stat(repo).st_dev:
        return tempfile.mkdtemp(prefix="memcommit-bench-")
    return tempfile.mkdtemp(prefix=".memcommit-bench-", dir=repo)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    env = Env(probe_import("memcommit"), probe_import("lmdb"))
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
        base = tempfile.mkdtemp(prefix="memcommit-bench-", dir=args.dir)
    else:
        base = default_base()
    try:
        return run(args, env, base)
    finally:
        if args.keep:
            log(f"data kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


def run(args: argparse.Namespace, env: Env, base: str) -> int:
    cmd = "python benches/compare.py" + (
        " " + shlex.join(sys.argv[1:]) if len(sys.argv) > 1 else ""
    )
    uname = os.uname()
    out("# memcommit vs SQLite vs LMDB")
    out()
    out(f"Command: `{cmd}`")
    out()
    out(f"- CPU: {cpu_model()}, {os.cpu_count()} logical cores; RAM {mem_total()}")
    out(f"- kernel: {uname.sysname} {uname.release} ({uname.machine})")
    out(f"- data dir: {base} on {filesystem_of(base)}")
    out(f"- Python {platform.python_version()} ({platform.python_implementation()})")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    out(f"- load average at start (1, 5, 15 min): {load}")
    out(f"- libraries: {versions(env)}")
    if not env.memcommit:
        out(f"- memcommit NOT available ({env.no_memcommit}); its rows are skipped")
    if not env.lmdb:
        out(f"- lmdb NOT available ({env.no_lmdb}); its rows are skipped")
    p50, p99 = fdatasync_probe(base)
    out(
        f"- fdatasync probe (1,000 appends of 128 B + fdatasync in the data dir): "
        f"p50 {p50 * 1e3:.3f} ms, p99 {p99 * 1e3:.3f} ms "
        f"(≈ {1 / p50:,.0f} serial durable commits/s at p50)"
    )
    out()

    need = max(args.n, args.threads * args.per_thread if "durable" in args.only else 0)
    log(f"generating {need:,} records ...")
    t0 = time.perf_counter()
    all_recs = _peers.make_records(need)
    import gc

    gc.collect()
    gc.freeze()  # the records live to the end; keep the collector from rescanning them
    log(f"generated in {time.perf_counter() - t0:.1f} s")
    recs = all_recs[: args.n]

    built: dict[str, str] = {}
    if "batch" in args.only:
        built = phase_batch(env, base, recs)
    if "durable" in args.only:
        phase_durable(env, base, all_recs, args.threads, args.per_thread, args.seconds)
    if "open" in args.only:
        phase_open(env, base, recs, built, args.repeat)
    if "rss" in args.only:
        phase_rss(env, base, recs, built)
    return 0


if __name__ == "__main__":
    sys.exit(main())
