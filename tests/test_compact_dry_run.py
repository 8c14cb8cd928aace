"""`compact(..., dry_run=True)` and `memcommit compact PATH --dry-run`: the report a compaction
would give, found without writing anything."""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from pathlib import Path

import pytest

import memcommit
from memcommit.cli import main
from memcommit.errors import NotSupported
from memcommit.storage import ArchivedOlderThan, KindsAfter, compact
from memcommit.testing import ControllableClock


def _history(path: Path, clock: ControllableClock) -> None:
    """Puts, re-puts, status changes, moves, finished tasks, role entities and a seal."""
    with memcommit.open(path, clock=clock) as store:
        for i in range(60):
            store.put(f"m{i}", id=f"m{i}", kind="trace" if i % 3 else "fact", task=f"t{i % 4}")
        for i in range(0, 60, 2):
            store.put(f"m{i} again", id=f"m{i}")
        for i in range(0, 60, 5):
            store.stale(f"m{i}", "old")
        for i in range(0, 60, 7):
            store.restore(f"m{i}")
        for i in range(1, 60, 4):
            store.move(f"m{i}", "archive")
        store.finish_task("t1")
        store.runs.create(agent_id="a")
        store.state.put(("ns",), "k", {"v": 1})
        store.state.put(("ns",), "k", {"v": 2})
        memcommit.seal(store)
        clock.advance(3_600_000)
        store.put("late", id="late")


def _files(path: Path) -> dict[str, str]:
    """Every file in the store's directory, by name, with a hash of its bytes."""
    return {
        name: hashlib.sha256((path.parent / name).read_bytes()).hexdigest()
        for name in sorted(os.listdir(path.parent))
    }


@pytest.mark.parametrize(
    ("retention", "horizon"),
    [
        (None, None),
        (ArchivedOlderThan(seconds=60), None),
        (KindsAfter({"trace": 60}) | ArchivedOlderThan(seconds=60), None),
        (None, 100),
        (ArchivedOlderThan(seconds=60), 120),
    ],
)
def test_a_dry_run_reports_what_the_compaction_then_does(
    tmp_path: Path,
    clock: ControllableClock,
    retention: ArchivedOlderThan | None,
    horizon: int | None,
) -> None:
    path = tmp_path / "m.db"
    _history(path, clock)
    with memcommit.open(path, clock=clock) as store:
        files = _files(path)
        head, state = store.lsn, [store.get(f"m{i}") for i in range(60)]
        planned = compact(store, retention=retention, horizon=horizon, dry_run=True)
        assert _files(path) == files  # nothing written, nothing added beside the log
        assert store.lsn == head and [store.get(f"m{i}") for i in range(60)] == state
        done = compact(store, retention=retention, horizon=horizon)
    assert planned.dry_run and not done.dry_run
    assert replace(planned, seconds=0.0, dry_run=False) == replace(done, seconds=0.0)
    assert planned.bytes_after == path.stat().st_size
    if retention is not None:
        assert planned.purged  # the histories give retention something to purge


def test_a_dry_run_on_a_reader_beside_the_writer_writes_nothing(
    tmp_path: Path, clock: ControllableClock
) -> None:
    path = tmp_path / "m.db"
    _history(path, clock)
    with memcommit.open(path, clock=clock) as writer:
        files = _files(path)
        with memcommit.open(path, read_only=True, clock=clock) as reader:
            planned = compact(reader, retention=ArchivedOlderThan(seconds=60), dry_run=True)
        assert _files(path) == files
        writer.put("after the dry run", id="after")
        done = compact(writer, retention=ArchivedOlderThan(seconds=60))
    # The writer's commit after the dry run is one more record in the real compaction.
    assert (planned.before + 1, planned.after + 1) == (done.before, done.after)
    assert planned.purged == done.purged


def test_a_real_compaction_of_a_reader_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with memcommit.open(path) as store:
        store.put("x")
    with (
        memcommit.open(path, read_only=True) as reader,
        pytest.raises(memcommit.errors.ReadOnlyStore),
    ):
        compact(reader)


def test_a_dry_run_checks_its_arguments_and_needs_a_log_file(tmp_path: Path) -> None:
    with memcommit.open(":memory:") as ram, pytest.raises(NotSupported, match="in RAM"):
        compact(ram, dry_run=True)
    with memcommit.open(tmp_path / "m.db") as store:
        with pytest.raises(TypeError, match="dry_run must be a bool"):
            compact(store, dry_run="yes")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="past the newest LSN"):
            compact(store, horizon=store.lsn + 1, dry_run=True)


def _fields(out: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)


def test_the_command_line_dry_run_prints_the_figures_and_writes_nothing(
    tmp_path: Path, clock: ControllableClock, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.db"
    _history(path, clock)
    os.remove(str(path) + ".lock")  # the writer's lock file: a dry run must not make one
    files = _files(path)
    assert main(["compact", str(path), "--dry-run", "--archived-older-than", "1m"]) == 0
    out = capsys.readouterr().out
    assert _files(path) == files
    assert out.startswith(f"dry run: {path} (nothing written; would make generation 1)")
    planned = _fields(out)
    assert main(["compact", str(path), "--archived-older-than", "1m"]) == 0
    done = _fields(capsys.readouterr().out)
    for field in ("records", "bytes", "horizon", "purged"):
        assert planned[field] == done[field], field
    assert float(planned["seconds"]) >= 0


def test_the_command_line_dry_run_of_a_missing_or_empty_file_fails_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.db"
    assert main(["compact", str(missing), "--dry-run"]) == 1
    assert str(missing) in capsys.readouterr().err
    assert not missing.exists()
    empty = tmp_path / "empty.db"
    empty.touch()
    assert main(["compact", str(empty), "--dry-run"]) == 1
    assert "nothing to compact" in capsys.readouterr().err
    assert empty.stat().st_size == 0 and sorted(os.listdir(tmp_path)) == ["empty.db"]
