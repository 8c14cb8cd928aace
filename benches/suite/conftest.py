"""The suite's option (``--bench-size``) and the inputs its benchmarks share.

Everything a benchmark reads is built once per session (the generated log once per size and
kept in the cache, see :mod:`suite.loggen`); what a round changes is made fresh per round.
Copies are removed as soon as their benchmarks are done (a 50M-record log is gigabytes); put
pytest's ``--basetemp`` on the disk you mean to measure (copies and compactions go there).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import _peers
import memcommit
from _peers import Record
from memcommit.storage import compact
from suite import loggen
from suite.measure import copy_log, remove_log, warm_page_cache
from suite.peers import CONTENDERS
from suite.sizes import DEFAULT, SIZES, Size


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--bench-size",
        choices=sorted(SIZES),
        default=DEFAULT,
        help=f"how much work each benchmark does (default {DEFAULT}; tiny for smoke runs); "
        "the generated logs hold 20k, 1M, 10M or 50M records",
    )


@pytest.fixture(scope="session")
def size(request: pytest.FixtureRequest) -> Size:
    """The size the suite runs at."""
    return SIZES[str(request.config.getoption("--bench-size"))]


@pytest.fixture(autouse=True)
def _records_size(benchmark: object, size: Size) -> None:
    """Every benchmark's extra_info names the size it ran at."""
    benchmark.extra_info["size"] = size.name  # type: ignore[attr-defined]


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A directory for one benchmark's files, removed after it (large logs fill disks)."""
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.fixture(scope="session")
def batch_records(size: Size) -> list[Record]:
    """The records of one batch-put round."""
    return _peers.make_records(size.batch)


@pytest.fixture(scope="session")
def stored_records(size: Size) -> list[Record]:
    """The records of the store the open and get benchmarks read."""
    return _peers.make_records(size.stored, seed=7)


@pytest.fixture(scope="session")
def session_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory for the files the whole session reads, removed at its end."""
    path = tmp_path_factory.mktemp("session")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def filled(session_dir: Path, stored_records: list[Record]) -> Callable[[str], str]:
    """``filled(contender)``: the directory of that contender's store of the stored records."""
    built: dict[str, str] = {}

    def fill(name: str) -> str:
        if name not in built:
            directory = session_dir / f"filled-{len(built)}"
            directory.mkdir()
            contender = CONTENDERS[name][0](str(directory), len(stored_records))
            contender.put_batch(stored_records)
            contender.close()
            built[name] = str(directory)
        return built[name]

    return fill


@pytest.fixture(scope="session")
def generated(size: Size) -> loggen.GeneratedLog:
    """The generated log of this size (built into the cache on first use), read once so that
    the session starts with it in the page cache."""
    log = loggen.generated_log(size.log_records)
    warm_page_cache(log.path)
    return log


@pytest.fixture(scope="session")
def compacted(generated: loggen.GeneratedLog, session_dir: Path) -> str:
    """A compacted copy of the generated log (no retention), for the reopen after it."""
    path = session_dir / "compacted.db"
    shutil.copyfile(generated.path, path)
    with memcommit.open(path, clock=generated.clock()) as store:
        compact(store)
    return str(path)


@pytest.fixture(scope="session")
def without_index(generated: loggen.GeneratedLog, session_dir: Path) -> str:
    """The generated log under a second name with no index file beside it (a hard link,
    or a copy where links are refused): opening it replays the whole log."""
    path = session_dir / "replay.db"
    try:
        os.link(generated.path, path)
    except OSError:
        shutil.copyfile(generated.path, path)
    return str(path)


@pytest.fixture(scope="session")
def snapshot_of_log(generated: loggen.GeneratedLog, session_dir: Path) -> str:
    """A snapshot of the generated log, for the open from a snapshot."""
    path = session_dir / "state.json"
    with memcommit.open(generated.path, read_only=True) as store:
        store.save_snapshot(path)
    return str(path)


@pytest.fixture(scope="session")
def reader(generated: loggen.GeneratedLog) -> Iterator[memcommit.MemoryStore]:
    """The generated log opened once as a reader, for the per-call benchmarks on it (the log
    read once more first: the benchmarks before may have pushed it out of the page cache)."""
    warm_page_cache(generated.path)
    with memcommit.open(generated.path, read_only=True) as store:
        yield store


@pytest.fixture(scope="session")
def run_queue_log(
    generated: loggen.GeneratedLog, session_dir: Path, size: Size
) -> Iterator[loggen.RunQueueLog]:
    """A copy of the generated log with a run queue of ``size.runs`` runs added, all but
    ``size.open_runs`` finished (:func:`suite.loggen.add_run_queue`)."""
    path = session_dir / "run-queue.db"
    copy_log(generated.path, path)
    made = loggen.add_run_queue(str(path), size.runs, size.open_runs)
    yield made
    remove_log(path)
