"""Work on the whole generated log: its build, compaction, with retention, the reopen after it,
verify, snapshots, and the open from the index file or by full replay.

Each group holds memcommit's figure and ``cp`` plus ``sync`` of the same file, the baseline:
the time it takes just to copy the bytes durably. ``extra_info`` carries ``bytes_in``,
``bytes_out`` and ``records`` (for ``benches/tables.py``'s MB/s and records/s from the median
time), the figures of :func:`memcommit.cli.bench.compaction_figures` for a compaction (the same
ones ``memcommit bench compact`` prints), and the peak RSS of the work. ``cp`` + ``sync`` has
none: it runs in child processes, and a child's ``ru_maxrss`` starts from its parent's size at
the fork.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import memcommit
from memcommit.cli.bench import PeakRss, compaction_figures, cp_sync
from memcommit.seals import verify
from memcommit.storage import CompactionReport, RetentionPolicy, compact
from suite import loggen
from suite.loggen import RETENTION, GeneratedLog
from suite.measure import copy_log, describe, each_round, open_and_get, record_rss, remove_log
from suite.sizes import Size


@pytest.mark.benchmark(group="build")
def test_build(benchmark: Any, generated: GeneratedLog, scratch: Path, size: Size) -> None:
    """Write a log like the generated one through the public API (``durability="none"``;
    :func:`suite.loggen.build`), into a fresh file each round."""
    path = scratch / "build.db"

    def run(_: None) -> GeneratedLog:
        with PeakRss() as rss:
            made = loggen.build(str(path), size.log_records)
        record_rss(benchmark, rss)
        return made

    made = each_round(
        benchmark, lambda: remove_log(path), run, size.build_rounds, lambda _: remove_log(path)
    )
    assert (made.records, made.memories) == (generated.records, generated.memories), made
    benchmark.extra_info.update(bytes_out=made.bytes, records=made.records)
    describe(benchmark, generated)


def _compact(
    benchmark: Any,
    generated: GeneratedLog,
    scratch: Path,
    size: Size,
    retention: RetentionPolicy | None,
) -> None:
    """Compact a fresh copy of the generated log each round (the copy and open untimed)."""
    copy = scratch / "copy.db"

    def setup() -> memcommit.MemoryStore:
        copy_log(generated.path, copy)
        store = memcommit.open(copy, clock=generated.clock())
        # A writer hashes its log from the open on; a running store's chain is current.
        store.engine.view().chain_hex()
        return store

    def run(store: memcommit.MemoryStore) -> tuple[CompactionReport, PeakRss]:
        with PeakRss() as rss:
            report = compact(store, retention=retention)
        return report, rss

    def close(store: memcommit.MemoryStore) -> None:
        store.close()
        remove_log(copy)

    report, rss = each_round(benchmark, setup, run, size.rounds, close)
    describe(benchmark, generated)
    benchmark.extra_info.update(
        compaction_figures(report, rss.bytes),
        bytes_in=report.bytes_before,
        bytes_out=report.bytes_after,
        records=report.before,
        rss_at_start_mib=rss.start_bytes / 2**20,
    )


@pytest.mark.benchmark(group="compact")
def test_compact(benchmark: Any, generated: GeneratedLog, scratch: Path, size: Size) -> None:
    _compact(benchmark, generated, scratch, size, None)


@pytest.mark.benchmark(group="compact with retention")
def test_compact_with_retention(
    benchmark: Any, generated: GeneratedLog, scratch: Path, size: Size
) -> None:
    _compact(benchmark, generated, scratch, size, RETENTION)
    assert benchmark.extra_info["purged"] > 0, "the retention purged nothing"


def _opens(benchmark: Any, path: str, snapshot: str | None, size: Size) -> int:
    """Time a reader's open of `path` until its first get, once a round; return its LSN.

    Each round's store is closed before the next round opens (untimed), so a round's peak RSS
    (in extra_info, with what the process held as the open began) holds one open store.
    """
    opened: list[memcommit.MemoryStore] = []

    def close_opened(_: object = None) -> None:
        while opened:
            opened.pop().close()

    def run(_: None) -> int:
        with PeakRss() as rss:
            opened.append(open_and_get(path, snapshot))
        record_rss(benchmark, rss)
        return opened[-1].lsn

    return each_round(benchmark, close_opened, run, max(size.rounds, 5), close_opened)


@pytest.mark.benchmark(group="reopen after compact")
@pytest.mark.parametrize("which", ["compacted", "not compacted"])
def test_reopen(
    benchmark: Any, which: str, generated: GeneratedLog, compacted: str, size: Size
) -> None:
    """A reader's open until its first get, of the compacted log and of the log before it."""
    path = compacted if which == "compacted" else generated.path
    records = _opens(benchmark, path, None, size)
    benchmark.extra_info.update(bytes_in=os.path.getsize(path), records=records)
    describe(benchmark, generated)


@pytest.mark.benchmark(group="verify")
def test_verify(benchmark: Any, generated: GeneratedLog, size: Size) -> None:
    with memcommit.open(generated.path, read_only=True) as store:

        def run() -> Any:
            with PeakRss() as rss:
                report = verify(store)
            record_rss(benchmark, rss)
            return report

        report = benchmark.pedantic(run, rounds=size.rounds, iterations=1)
    assert report.ok and report.seals_checked > 0, report
    benchmark.extra_info.update(
        bytes_in=report.bytes_checked,
        records=report.records_checked,
        seals=report.seals_checked,
    )
    describe(benchmark, generated)


@pytest.mark.benchmark(group="snapshot save")
def test_snapshot_save(benchmark: Any, generated: GeneratedLog, scratch: Path, size: Size) -> None:
    out = scratch / "state.json"
    with memcommit.open(generated.path, read_only=True) as store:

        def run() -> None:
            with PeakRss() as rss:
                store.save_snapshot(out)
            record_rss(benchmark, rss)

        benchmark.pedantic(run, rounds=size.rounds, iterations=1)
        memories = len(store)
    benchmark.extra_info.update(bytes_out=os.path.getsize(out), records=memories)
    describe(benchmark, generated)


@pytest.mark.benchmark(group="snapshot open")
@pytest.mark.parametrize("way", ["from the snapshot", "full replay", "from the index file"])
def test_snapshot_open(
    benchmark: Any,
    way: str,
    generated: GeneratedLog,
    without_index: str,
    snapshot_of_log: str,
    size: Size,
) -> None:
    """A reader's open until its first get: from a snapshot, replaying, or from the index."""
    if way == "from the index file" and not os.path.exists(f"{generated.path}.index"):
        pytest.skip("the generated log has no index file at this size (under 100,000 records)")
    path = generated.path if way == "from the index file" else without_index
    snapshot = snapshot_of_log if way == "from the snapshot" else None
    records = _opens(benchmark, path, snapshot, size)
    benchmark.extra_info.update(
        bytes_in=os.path.getsize(path) + (os.path.getsize(snapshot) if snapshot else 0),
        records=records,
    )
    describe(benchmark, generated)


BASELINES = {
    "build": "generated",
    "compact": "generated",
    "compact with retention": "generated",
    "reopen after compact": "compacted",
    "verify": "generated",
    "snapshot save": "generated",
    "snapshot open": "generated",
}
"""Each group of this module, and which log its ``cp`` + ``sync`` baseline copies."""


@pytest.mark.parametrize(
    "group",
    [pytest.param(g, marks=pytest.mark.benchmark(group=g), id=g) for g in BASELINES],
)
def test_cp_sync(
    benchmark: Any,
    group: str,
    generated: GeneratedLog,
    compacted: str,
    scratch: Path,
    size: Size,
) -> None:
    """The baseline of every group: ``cp`` the file, then ``sync`` the copy."""
    source = compacted if BASELINES[group] == "compacted" else generated.path
    target = scratch / "cp-sync.db"

    def fresh() -> str:
        target.unlink(missing_ok=True)
        return str(target)

    each_round(benchmark, fresh, lambda path: cp_sync(source, path), size.rounds)
    bytes_copied = os.path.getsize(source)
    target.unlink(missing_ok=True)
    benchmark.extra_info.update(bytes_in=bytes_copied, bytes_out=bytes_copied)
    describe(benchmark, generated)
