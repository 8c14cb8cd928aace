"""The command line on damaged, empty and foreign files, and on a log a writer holds.

Every command tells the same, true story about a file: what repair can and cannot do with
it, in one line naming the file, never a traceback; a refused writer command creates nothing
beside the file; repair looks at the writer lock before anything else.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import memcommit
from memcommit.cli import main


def _one_line_error(err: str, path: Path) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert str(path) in lines[0]
    return lines[0]


# --- repair and a live writer -------------------------------------------------------


def test_repair_checks_the_writer_lock_before_anything_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "memory.db"
    with memcommit.open(str(path)) as store:
        store.put("a memory")
        # A live writer's file ends in the zeros it wrote ahead of its next commits.
        size = path.stat().st_size
        assert size > 64 + 100
        for argv in (["repair", str(path)], ["repair", str(path), "--yes"]):
            assert main(argv) == 1
            captured = capsys.readouterr()
            assert captured.out == ""  # nothing reported as damage, nothing to cut
            message = _one_line_error(captured.err, path)
            assert f"open for writing by another process (it holds the lock on {path}.lock)" in (
                message
            )
            assert path.stat().st_size == size
            assert list(tmp_path.glob("memory.db.bak-*")) == []


def test_repair_takes_an_all_zero_tail_for_free_space(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "memory.db"
    with memcommit.open(str(path)) as store:
        store.put("a memory")
    good = path.read_bytes()
    # What a writer killed before its close leaves: zeros written ahead of the next commit.
    path.write_bytes(good + bytes(1 << 20))
    for argv in (["repair", str(path)], ["repair", str(path), "--yes"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert f"{path}: healthy: 1 records" in out
        assert f"the last {1 << 20:,} bytes are zeros a writer wrote ahead" in out
        assert "torn" not in out and "cut" not in out
        assert path.read_bytes() == good + bytes(1 << 20)
        assert list(tmp_path.glob("memory.db.bak-*")) == []
    # Bytes that are not all zeros after the last commit are still a torn tail.
    path.write_bytes(good + bytes(100) + b"MC" + bytes(100))
    assert main(["repair", str(path), "--yes"]) == 0
    assert "torn tail" in capsys.readouterr().out
    assert path.read_bytes() == good
