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
    """

    name: str
    log_records: int
    batch: int
    durable: int
    stored: int
    gets: int
    langgraph: int
    rounds: int


SIZES = {
    s.name: s
    for s in (
        Size("tiny", 20_000, 5_000, 20, 5_000, 1_000, 100, 1),
        Size("1m", 1_000_000, 100_000, 200, 100_000, 10_000, 1_000, 3),
        Size("10m", 10_000_000, 1_000_000, 500, 1_000_000, 100_000, 2_000, 3),
        Size("50m", 50_000_000, 1_000_000, 500, 1_000_000, 100_000, 2_000, 3),
    )
}
DEFAULT = "1m"
