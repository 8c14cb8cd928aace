"""Readers of a log that a writer in another process is appending to.

A reader reads the file while the writer's bytes arrive: the space after the last commit
holds zeros the writer wrote ahead, a record half copied into the page cache, or whole
records a moment later. None of that is damage. Open, refresh, ``info`` and ``verify`` all
judge what they find there by one rule (``scan::judge`` in the core): bytes that parse by
the time they are judged were being written, zeros are free space, and only bytes that
stay wrong after a later valid record was seen are damage.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import memcommit
from memcommit import cli

WRITER = """
import sys, time
import memcommit
store = memcommit.open(sys.argv[1])
print("ready", flush=True)
i = 0
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    with store.commit() as c:
        for j in range(1 + i % 7):
            c.put("x" * (1 + (i * 37 + j) % 3000), kind="fact", task=f"t{i % 5}")
    i += 1
store.close()
print("commits", i, flush=True)
"""


@pytest.fixture
def live_log(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "live.db"
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), "4"], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    yield path
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    assert int(out.split()[1]) > 0


def test_readers_of_a_live_log_are_never_told_it_is_damaged(live_log: Path) -> None:
    reader = memcommit.open(live_log, read_only=True)
    calls, seen = 0, []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        reader.refresh()
        seen.append(reader.lsn)
        with memcommit.open(live_log, read_only=True) as other:
            assert other.lsn >= seen[-1]
        calls += 2
    reader.close()
    assert calls > 10
    assert seen == sorted(seen) and seen[-1] > seen[0]


def test_info_and_verify_of_a_live_log_find_no_damage(
    live_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deadline = time.monotonic() + 3
    runs = 0
    while time.monotonic() < deadline:
        assert cli.main(["info", str(live_log)]) == 0, capsys.readouterr().err
        assert cli.main(["verify", str(live_log)]) == 0, capsys.readouterr().err
        runs += 1
    assert runs > 2
