"""close() releases the file: no descriptor of the log, its index file or a snapshot remains.

Each test keeps a reference to the store object while it counts, so nothing is released by
the garbage collector: only by ``close()`` (and by ``verify`` returning).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

import memcommit
from memcommit import StoreClosed, verify
from memcommit.storage import compact

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd"
)


def open_files(under: Path) -> list[str]:
    """The files under `under` that this process holds a descriptor of (one entry per fd)."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the fd listdir itself used, closed since
            continue
        if target.startswith(str(under) + os.sep):
            held.append(target)
    return sorted(held)


def mapped_files(under: Path) -> set[str]:
    """The files under `under` mapped into this process (an index file is used in place)."""
    with open("/proc/self/maps", encoding="utf-8") as f:
        return {line.split()[-1] for line in f if str(under) in line}


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "memory.db"
    with memcommit.open(p, durability="none") as store:
        for i in range(20):
            store.put(f"note {i}", id=f"m{i}")
    return p


def test_a_writer_holds_nothing_after_close(path: Path) -> None:
    store = memcommit.open(path)
    store.put("one more")
    assert open_files(path.parent)  # the log and its lock, while open
    store.close()
    assert open_files(path.parent) == []
    assert store.closed
    store.close()  # twice is fine
    with pytest.raises(StoreClosed):
        store.put("after close")


def test_a_reader_holds_nothing_after_close(path: Path) -> None:
    writer = memcommit.open(path)
    writers = open_files(path.parent)
    reader = memcommit.open(path, read_only=True)
    assert len(open_files(path.parent)) > len(writers)
    writer.put("seen by the reader")
    assert reader.refresh() == 1
    reader.close()
    assert open_files(path.parent) == writers  # only the writer's, still open
    writer.close()
    assert open_files(path.parent) == []
    assert reader.closed and writer.closed


def test_verify_leaves_no_descriptor_and_close_releases_the_rest(path: Path) -> None:
    store = memcommit.open(path)
    before = open_files(path.parent)
    assert verify(store).ok
    assert open_files(path.parent) == before
    store.close()
    assert open_files(path.parent) == []


def test_a_store_opened_from_a_snapshot_holds_nothing_after_close(path: Path) -> None:
    snap = path.parent / "state.json"
    with memcommit.open(path) as store:
        store.save_snapshot(snap)
    store = memcommit.open(path, snapshot=snap)
    store.put("after the snapshot")
    assert str(snap) not in open_files(path.parent)
    store.close()
    assert open_files(path.parent) == []


def test_an_index_file_is_unmapped_and_closed_on_close(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with memcommit.open(path, durability="none") as store:
        with store.commit() as c:  # enough records that close writes an index file
            c.put_many([f"t{i}" for i in range(100_000)])
    index = Path(f"{path}.index")
    assert index.exists()
    for read_only in (False, True):
        store = memcommit.open(path, read_only=read_only)
        assert store.info()["index_file"] == "loaded"
        assert verify(store).ok
        store.close()
        assert open_files(tmp_path) == []
        assert str(index) not in mapped_files(tmp_path)


def test_a_memory_store_after_close_refuses_reads(tmp_path: Path) -> None:
    store = memcommit.open(":memory:")
    store.put("x", id="x")
    store.close()
    for read in (
        lambda: store.lsn,
        lambda: store.get("x"),
        lambda: store.is_purged("x"),
        lambda: len(store),
        lambda: store.info(),
    ):
        with pytest.raises(StoreClosed, match="closed"):
            read()


def test_close_during_another_threads_log_compaction_releases_the_file(tmp_path: Path) -> None:
    """close(): "When it returns the file is released". Called while another thread compacted
    the log, it returned while the compaction still held the lock (a reopen raised
    StoreLocked), and a put that waited for the compaction was told to call again on the store
    that goes on with the new generation, on a closed store."""
    path = tmp_path / "memory.db"
    store = memcommit.open(path, durability="none")
    with store.commit() as c:
        c.put_many([f"memory {i}" for i in range(20_000)])
    reading = threading.Event()
    out: dict[str, object] = {}

    def progress(done: int, total: int) -> None:
        if not reading.is_set():
            reading.set()
            time.sleep(0.3)  # the compaction holds the log meanwhile

    def run_compaction() -> None:
        try:
            out["compacted"] = compact(store, progress=progress).generation
        except memcommit.MemcommitError as error:
            out["compacted"] = error

    def put_late() -> None:
        try:
            store.put("late")
        except memcommit.StoreClosed as error:
            out["put"] = str(error)

    compaction = threading.Thread(target=run_compaction)
    compaction.start()
    assert reading.wait(60)
    late = threading.Thread(target=put_late)
    late.start()
    time.sleep(0.05)
    store.close()
    assert store.closed
    with memcommit.open(path) as again:  # released: no StoreLocked
        assert len(again) == 20_000
    compaction.join(60)
    late.join(60)
    assert "call again" not in str(out.get("put", "")), out
