"""Readers of a log that a writer in another process is appending to.

A reader reads the file while the writer's bytes arrive: the space after the last commit
holds zeros the writer wrote ahead, a record half copied into the page cache, or whole
records a moment later. None of that is damage. Open, refresh, ``info`` and ``verify`` all
judge what they find there by one rule (``scan::judge`` in the core): bytes that parse by
the time they are judged were being written, zeros are free space, and only bytes that
stay wrong after a later valid record was seen are damage.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import memcommit
from memcommit import cli
from memcommit.storage import compact

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


def test_a_reader_shared_by_threads_goes_on_across_log_compaction(tmp_path: Path) -> None:
    """README: read_only readers catch up with refresh(); a store is safe to share between
    threads. A refresh that found the log compacted closed the old generation's log under
    the other threads' calls, which raised StoreClosed (and `closed` read True) on a store
    nobody closed."""
    path = tmp_path / "memory.db"
    writer = memcommit.open(path)
    first = writer.put("first memory")
    reader = memcommit.open(path, read_only=True)
    stop = threading.Event()
    errors: list[str] = []
    reads = 0

    def read() -> None:
        nonlocal reads
        while not stop.is_set():
            try:
                assert reader.get(first) is not None
                reads += 1
            except Exception as error:  # every error is the finding
                errors.append(f"{type(error).__name__}: {error}")
            if reader.closed:
                errors.append("closed read True")

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for i in range(20):
            writer.put(f"note {i}")
            compact(writer)
            reader.refresh()
            time.sleep(0.005)
    finally:
        stop.set()
        thread.join(30)
    assert errors == [] and reads > 0
    assert reader.generation == writer.generation == 20 and reader.lsn == writer.lsn
    reader.close()
    writer.close()


def _refresh_until_closed(store: memcommit.MemoryStore) -> None:
    with contextlib.suppress(memcommit.StoreClosed):
        store.refresh()


def test_a_close_racing_a_refresh_across_log_compaction_leaves_the_reader_closed(
    tmp_path: Path,
) -> None:
    """close(): "every later call raises StoreClosed". A refresh that was opening the new
    generation while another thread closed the store bound the new log after the close, and
    the store was open again."""
    path = tmp_path / "memory.db"
    writer = memcommit.open(path, durability="none")
    with writer.commit() as c:
        c.put_many([f"m{i}" for i in range(20_000)])
    probe = writer.put("probe")
    for trial in range(8):
        reader = memcommit.open(path, read_only=True)
        compact(writer)
        thread = threading.Thread(target=_refresh_until_closed, args=(reader,))
        thread.start()
        time.sleep(0.001 * trial)
        reader.close()
        thread.join(30)
        assert reader.closed, trial
        with pytest.raises(memcommit.StoreClosed):
            reader.get(probe)
    writer.close()
