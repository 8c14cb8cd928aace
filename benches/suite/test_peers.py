"""memcommit beside SQLite, LMDB and RocksDB: batch puts, durable commits, open, get.

One group per figure, one benchmark per contender in it (``suite.peers.CONTENDERS``). Every
write is durable when it returns. ``extra_info["records"]`` is the work of one round, so
``benches/tables.py`` turns the time of a round into records/s.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from _peers import Record
from suite.measure import NO_SUCH_ID, each_round
from suite.peers import CONTENDERS, Contender
from suite.sizes import Size

CONTENDER = pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=[pytest.mark.skip(reason=reason)] if reason else [], id=name)
        for name, (_, reason) in CONTENDERS.items()
    ],
)


def _fresh(name: str, scratch: Path, records: int) -> Callable[[], Contender]:
    """Open the contender `name` on a new directory under `scratch`, for one round."""

    def make() -> Contender:
        return CONTENDERS[name][0](tempfile.mkdtemp(dir=scratch), records)

    return make


def _close(contender: Contender) -> None:
    contender.close()


@pytest.mark.benchmark(group="batch puts")
@CONTENDER
def test_batch_puts(
    benchmark: Any, name: str, size: Size, scratch: Path, batch_records: list[Record]
) -> None:
    def cleanup(contender: Contender) -> None:
        contender.close()
        for made in scratch.iterdir():
            shutil.rmtree(made, ignore_errors=True)

    each_round(
        benchmark,
        _fresh(name, scratch, len(batch_records)),
        lambda contender: contender.put_batch(batch_records),
        size.rounds,
        cleanup,
    )
    benchmark.extra_info["records"] = len(batch_records)


@pytest.mark.benchmark(group="durable commits")
@CONTENDER
def test_durable_commits(
    benchmark: Any, name: str, size: Size, scratch: Path, batch_records: list[Record]
) -> None:
    records = batch_records[: size.durable]

    def commit_each(contender: Contender) -> None:
        for record in records:
            contender.put_durable(record)

    each_round(benchmark, _fresh(name, scratch, len(records)), commit_each, size.rounds, _close)
    benchmark.extra_info["records"] = len(records)


@pytest.fixture
def reopen(
    name: str, filled: Callable[[str], str], stored_records: list[Record]
) -> Callable[[], Contender]:
    """Open the contender `name` on its store of the stored records (one per session)."""
    directory = filled(name)
    return lambda: CONTENDERS[name][0](directory, len(stored_records))


@pytest.mark.benchmark(group="open")
@CONTENDER
def test_open(benchmark: Any, size: Size, reopen: Callable[[], Contender]) -> None:
    """From opening the store to its first answered get (of an id it does not hold)."""

    def open_and_get(opened: list[Contender]) -> None:
        opened.append(reopen())
        opened[0].get(NO_SUCH_ID)

    def close(opened: list[Contender]) -> None:
        for contender in opened:
            contender.close()

    each_round(benchmark, list, open_and_get, max(size.rounds, 5), close)


@pytest.mark.benchmark(group="get")
@CONTENDER
def test_get(
    benchmark: Any,
    name: str,
    size: Size,
    reopen: Callable[[], Contender],
    stored_records: list[Record],
) -> None:
    rng = random.Random(3)
    wanted = [stored_records[rng.randrange(len(stored_records))][0] for _ in range(size.gets)]
    contender = reopen()

    def get_all() -> None:
        for rid in wanted:
            if contender.get(rid) is None:
                raise AssertionError(f"{name}: no record {rid}")

    try:
        benchmark.pedantic(get_all, rounds=size.rounds, iterations=1)
    finally:
        contender.close()
    benchmark.extra_info["records"] = len(wanted)
