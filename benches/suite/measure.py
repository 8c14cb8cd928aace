"""How the suite's benchmarks time a round on a fresh input, and what they record beside it."""

from __future__ import annotations

import math
import os
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import memcommit
from memcommit.cli.bench import PeakRss, copy_sidecars
from suite.loggen import SIDECARS, GeneratedLog
from suite.sizes import MIN_CALLS, Size

T = TypeVar("T")
R = TypeVar("R")

NO_SUCH_ID = "memcommit-bench-no-such-id"
"""The id an open is timed until: the first ``get`` answered (there is no such memory)."""


def describe(benchmark: Any, log: GeneratedLog) -> None:
    """Name the generated log a benchmark worked on in its extra_info (its records are the N
    that ``benches/tables.py`` plots and judges the growth against)."""
    benchmark.extra_info.update(
        log_records=log.records, log_bytes=log.bytes, log_memories=log.memories
    )


def record_rss(benchmark: Any, rss: PeakRss) -> None:
    """Put a measured peak RSS in `benchmark`'s extra_info: the peak, and what the process held
    as the measure began (the peak counts it: the store opened for the work, and whatever the
    session's earlier benchmarks left)."""
    benchmark.extra_info.update(
        peak_rss_mib=rss.bytes / 2**20, rss_at_start_mib=rss.start_bytes / 2**20
    )


def warm_page_cache(path: str) -> None:
    """Read the file at `path` and the files beside it (index file, manifest, lock) once, so the
    figures that follow are the store's, with the file in the page cache, not the disk's."""
    for name in (path, *(path + suffix for suffix in SIDECARS)):
        if os.path.exists(name):
            with open(name, "rb", buffering=0) as f:
                while f.read(1 << 23):
                    pass


def each_round(
    benchmark: Any,
    setup: Callable[[], T],
    target: Callable[[T], R],
    rounds: int,
    teardown: Callable[[T], object] | None = None,
) -> R:
    """Time ``target(setup())`` once per round: a fresh input each round, made untimed.

    `teardown` gets each round's input after it (untimed), also when the benchmark is
    disabled (``--benchmark-disable`` runs one round). Returns the last round's result.
    """
    made: list[T] = []

    def release() -> None:
        while made:
            value = made.pop()
            if teardown is not None:
                teardown(value)

    def prepare() -> tuple[tuple[T], dict[str, Any]]:
        release()
        made.append(setup())
        return (made[0],), {}

    try:
        result: R = benchmark.pedantic(
            target, setup=prepare, rounds=rounds, iterations=1, warmup_rounds=0
        )
        return result
    finally:
        release()


def remove_log(path: Path) -> None:
    """Remove the log at `path` and the files a store keeps beside it."""
    for suffix in ("", ".index", ".manifest", ".lock"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def copy_log(source: str, target: Path) -> None:
    """Copy the log `source` (and its index file and manifest) to `target`, replacing it."""
    remove_log(target)
    shutil.copyfile(source, target)
    copy_sidecars(source, str(target))


def open_and_get(path: str, snapshot: str | None = None) -> memcommit.MemoryStore:
    """Open the log at `path` as a reader, until its first ``get`` is answered."""
    store = memcommit.open(path, read_only=True, snapshot=snapshot)
    store.get(NO_SUCH_ID)
    return store


def per_call(
    benchmark: Any,
    call: Callable[[T], object],
    draw: Callable[[], T],
    size: Size,
    most: int | None = None,
) -> Any:
    """Time `call(draw())` as one round per call, so the group's median is the call's p50.

    `draw` makes each call's argument, untimed (a random id; for a claim, completing the one
    before). Three untimed calls come first (they warm the page cache and judge the call's
    cost); then ``size.calls`` calls are timed, or as many as fit in ``size.call_seconds`` when
    the calls are slow, at least :data:`~suite.sizes.MIN_CALLS`, at most `most`. extra_info
    gets ``calls``, ``p50_s`` and ``p99_s`` (nearest rank: with fewer than 100 calls, the
    slowest), and the peak RSS over the timed calls. Disabled (``--benchmark-disable``), one
    call. Returns the last call's answer.
    """
    calls = 1
    if not benchmark.disabled:
        warm = []
        for _ in range(3):
            argument = draw()
            started = time.perf_counter()
            call(argument)
            warm.append(time.perf_counter() - started)
        typical = max(statistics.median(warm), 1e-9)
        calls = max(MIN_CALLS, min(size.calls, int(size.call_seconds / typical)))
        calls = min(calls, most) if most is not None else calls
    with PeakRss() as rss:
        answer = benchmark.pedantic(
            call, setup=lambda: ((draw(),), {}), rounds=calls, iterations=1, warmup_rounds=0
        )
    record_rss(benchmark, rss)
    if benchmark.stats is not None:
        times = sorted(benchmark.stats.stats.data)
        benchmark.extra_info.update(
            calls=len(times), p50_s=statistics.median(times), p99_s=percentile(times, 0.99)
        )
    return answer


def percentile(ordered: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of the ascending `ordered` (``fraction`` 0.99 for p99)."""
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]
