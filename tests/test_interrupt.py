"""Ctrl-C stops a long verify, compaction, open or reader's refresh, and a progress
callback's error stops verify and compaction too.

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
from forging import put_unchecked
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
        put_unchecked(
            store, "names a memory that never was", sources=("01NEVERWRITTEN0000000000000",)
        )
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
        put_unchecked(
            store, "names a memory that never was", sources=("01NEVERWRITTEN0000000000000",)
        )
    return path


class _CtrlCAfterReading:
    """Send this process a SIGINT once it has read `bytes_in` more bytes from files (so the
    work is running, with most of it still ahead), as a user's Ctrl-C; `after` is then how
    much was read from the signal to the end of the block."""

    def __init__(self, bytes_in: int) -> None:
        self._bytes_in = bytes_in
        self._done = threading.Event()
        self._at_signal: list[int] = []
        self._peak = 0
        self._thread = threading.Thread(target=self._watch)
        self.after = 0

    def _watch(self) -> None:
        # Then go on watching until the work returns: a mapping's pages leave the count when
        # it is unmapped, so what it reached is the most seen.
        while not self._done.is_set():
            read = _bytes_read()
            self._peak = max(self._peak, read)
            if not self._at_signal and read - self._start >= self._bytes_in:
                self._at_signal.append(read)
                os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.0005)

    def __enter__(self) -> _CtrlCAfterReading:
        self._start = _bytes_read()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        assert self._at_signal, "the work ended before it read enough to be interrupted"
        self.after = max(self._peak, _bytes_read()) - self._at_signal[0]


def test_ctrl_c_stops_verify_without_a_callback(many_records_log: Path) -> None:
    size = many_records_log.stat().st_size
    with memcommit.open(many_records_log, read_only=True) as store:
        with pytest.raises(ForgedReference):
            verify(store)  # the log is as the fixture says: a whole verify ends in this
        # The interrupt arrives while the core works without the GIL.
        with pytest.raises(KeyboardInterrupt) as info, _CtrlCAfterReading(8 << 20) as ctrl_c:
            verify(store)
    assert size > 100 << 20
    assert not isinstance(info.value.__context__, ForgedReference)
    # It stopped within a few of its chunks of the signal, not at the end of the log.
    assert ctrl_c.after < size // 2, (ctrl_c.after, size)


@pytest.mark.parametrize("read_only", [False, True])
def test_ctrl_c_stops_an_open_that_replays_the_whole_log(
    many_records_log: Path, read_only: bool
) -> None:
    # No index file: the open replays every record, a while at tens of millions.
    many_records_log.with_name(many_records_log.name + ".index").unlink(missing_ok=True)
    size = many_records_log.stat().st_size
    before = many_records_log.read_bytes()
    with pytest.raises(KeyboardInterrupt), _CtrlCAfterReading(8 << 20) as ctrl_c:
        memcommit.open(many_records_log, read_only=read_only).close()
    # It stopped within a few megabytes of the signal, not at the end of the log.
    assert ctrl_c.after < size // 2, (ctrl_c.after, size)
    # It changed nothing and let go of the lock: the store opens whole, for writing.
    assert many_records_log.read_bytes() == before
    with memcommit.open(many_records_log) as store:
        assert len(store) == 50 * 20_000 + 1


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


def test_ctrl_c_stops_a_readers_long_refresh_at_a_whole_commit(tmp_path: Path) -> None:
    path = tmp_path / "followed.db"
    with memcommit.open(path, durability="none") as store:
        store.put("before the reader")
        with memcommit.open(path, read_only=True) as reader:
            for _ in range(50):
                with store.commit() as c:
                    c.put_many(["z" * 60] * 20_000)
            size = path.stat().st_size
            with pytest.raises(KeyboardInterrupt), _CtrlCAfterReading(8 << 20) as ctrl_c:
                reader.refresh()
            # It stopped within a few megabytes of the signal, not at the end of the log...
            assert ctrl_c.after < size // 2, (ctrl_c.after, size)
            # ...at a whole commit: some of the 20,000-put commits applied, none in part.
            behind = len(reader)
            assert 1 < behind < 1_000_001 and (behind - 1) % 20_000 == 0, behind
            # The next refresh goes on from there.
            reader.refresh()
            assert len(reader) == 1_000_001 and reader.lsn == store.lsn
