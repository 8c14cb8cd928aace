"""Ctrl-C stops a long verify or compaction, and a progress callback's error stops it too.

Long work runs in the core without the GIL; between its chunks the binding's one gate takes
the GIL back for a moment to run the caller's progress callback and check for signals. A
pending KeyboardInterrupt (or any error the callback raises) ends the work there: verify
raises it instead of going on to the end, and compaction leaves the old log as it was.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

import memcommit
from memcommit import ForgedReference, verify
from memcommit.storage import compact


@pytest.fixture
def big_log(tmp_path: Path) -> Path:
    """A log of about 100 MB (many verify chunks) whose last put names an id never written,
    so a verify that reaches the end raises ForgedReference."""
    path = tmp_path / "memory.db"
    with memcommit.open(path, durability="none") as store:
        text = "x" * (1 << 20)
        for _ in range(4):
            with store.commit() as c:
                c.put_many([text] * 25)
        store.put("names a memory that never was", sources=("01NEVERWRITTEN0000000000000",))
    return path


def test_an_interrupt_in_a_progress_callback_stops_verify_before_the_end(big_log: Path) -> None:
    calls = []

    def progress(done: int) -> None:
        calls.append(done)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # as a user's Ctrl-C, during the first chunk

    with memcommit.open(big_log, read_only=True) as store:
        with pytest.raises(KeyboardInterrupt) as info:
            verify(store, progress=progress)
    # It stopped there: it did not go on to the end, where the forged reference is.
    assert not isinstance(info.value.__context__, ForgedReference)
    assert len(calls) == 1


def _bytes_read() -> int:
    """What this process has brought in from files: bytes read, plus file pages it has mapped
    and touched now (verify reads a log in a file through a mapping)."""
    with open("/proc/self/io") as io:
        read = next(int(line.split()[1]) for line in io if line.startswith("rchar:"))
    with open("/proc/self/status") as status:
        mapped = next(int(line.split()[1]) for line in status if line.startswith("RssFile:"))
    return read + mapped * 1024


@pytest.fixture
def many_records_log(tmp_path: Path) -> Path:
    """A log of a million small records (verify takes a while on it), whose last put names an
    id never written, so a verify that reaches the end raises ForgedReference."""
    path = tmp_path / "many.db"
    with memcommit.open(path, durability="none") as store:
        for _ in range(50):
            with store.commit() as c:
                c.put_many(["y" * 60] * 20_000)
        store.put("names a memory that never was", sources=("01NEVERWRITTEN0000000000000",))
    return path


def test_ctrl_c_stops_verify_without_a_callback(many_records_log: Path) -> None:
    size = many_records_log.stat().st_size
    with memcommit.open(many_records_log, read_only=True) as store:
        with pytest.raises(ForgedReference):
            verify(store)  # the log is as the fixture says: a whole verify ends in this
        # Ctrl-C once verify has read its first chunks (so it is running, with most of the
        # log still ahead): the interrupt arrives while the core works without the GIL.
        start = _bytes_read()
        done = threading.Event()
        at_signal: list[int] = []

        peak: list[int] = [0]

        def interrupt() -> None:
            # Then go on watching until verify returns: a mapping's pages leave the count when
            # it is unmapped, so what it reached is the most seen.
            while not done.is_set():
                read = _bytes_read()
                peak[0] = max(peak[0], read)
                if not at_signal and read - start >= 8 << 20:
                    at_signal.append(read)
                    os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.0005)

        thread = threading.Thread(target=interrupt)
        thread.start()
        try:
            with pytest.raises(KeyboardInterrupt) as info:
                verify(store)
        finally:
            done.set()
            thread.join()
        read_after_signal = max(peak[0], _bytes_read()) - at_signal[0]
    assert size > 100 << 20
    assert not isinstance(info.value.__context__, ForgedReference)
    # It stopped within a few of its chunks of the signal, not at the end of the log.
    assert read_after_signal < size // 2, (read_after_signal, size)


def test_a_failing_progress_callback_stops_compaction_and_leaves_the_old_log(
    big_log: Path,
) -> None:
    before = big_log.read_bytes()

    def progress(done: int, total: int) -> None:
        raise RuntimeError("stop here")

    with memcommit.open(big_log) as store:
        with pytest.raises(RuntimeError, match="stop here"):
            compact(store, progress=progress)
        assert store.generation == 0
    assert big_log.read_bytes() == before
    assert sorted(p.name for p in big_log.parent.iterdir() if "tmp" in p.name) == []
