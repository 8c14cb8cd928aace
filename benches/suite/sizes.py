"""The sizes the suite runs at (``--bench-size``): how much work each benchmark does."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Size:
    """One size of the suite.

    Attributes:
        name: What ``--bench-size`` calls it.
        log_records: Records in the generated log the log benchmarks work on.
        batch: Records per round of the batch-put benchmark.
        durable: Single-record durable commits per round.
        stored: Records in the store the open and get benchmarks read.
        gets: Gets per round.
        langgraph: Operations per round of the LangGraph benchmarks.
        rounds: Rounds of each benchmark that rebuilds its input per round.
        build_rounds: Rounds of the build benchmark (it writes a whole generated log).
        calls: Most calls a per-call benchmark times (its p50 and p99 are over them).
        call_seconds: About how long a per-call benchmark may take: one whose calls are slow
            (``history`` while it scans the log) times fewer, down to :data:`MIN_CALLS`.
        runs: Runs the run-queue benchmarks add to the generated log.
        open_runs: Of those, how many are left pending (the others claimed and completed).
    """

    name: str
    log_records: int
    batch: int
    durable: int
    stored: int
    gets: int
    langgraph: int
    rounds: int
    build_rounds: int
    calls: int
    call_seconds: float
    runs: int
    open_runs: int


# fmt: off
SIZES = {
    s.name: s
    for s in (
        #     log_records  batch  durable  stored  gets  langgraph  rounds
        #     build_rounds  calls  call_seconds  runs  open_runs
        Size("tiny", 20_000, 5_000, 20, 5_000, 1_000, 100, 1,
             1, 50, 1.0, 2_000, 200),
        Size("1m", 1_000_000, 100_000, 200, 100_000, 10_000, 1_000, 3,
             3, 10_000, 20.0, 100_000, 1_000),
        Size("10m", 10_000_000, 1_000_000, 500, 1_000_000, 100_000, 2_000, 3,
             3, 10_000, 60.0, 100_000, 1_000),
        Size("50m", 50_000_000, 1_000_000, 500, 1_000_000, 100_000, 2_000, 3,
             1, 10_000, 120.0, 100_000, 1_000),
    )
}
# fmt: on
DEFAULT = "1m"
MIN_CALLS = 20
"""The fewest calls a per-call benchmark times (its p99 is then its slowest call)."""
