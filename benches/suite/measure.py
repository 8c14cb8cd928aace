"""How the suite's benchmarks time a round on a fresh input, and what they record beside it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import memcommit
from memcommit.cli.bench import copy_sidecars

T = TypeVar("T")
R = TypeVar("R")

NO_SUCH_ID = "memcommit-bench-no-such-id"
"""The id an open is timed until: the first ``get`` answered (there is no such memory)."""


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
