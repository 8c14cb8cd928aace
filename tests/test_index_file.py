"""The index file: closing a grown store writes ``<log>.index``; the next open reads it instead of
replaying the log, and gives the same store; one that does not fit is ignored and replaced."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import memcommit
from memcommit.seals import seal, verify
from memcommit.storage import compact
from memcommit.testing import ControllableClock

# A writer writes the index file when it closes a log grown by this many records.
EVERY = 100_000


def _grow(store: memcommit.MemoryStore, n: int, start: int = 0) -> list[str]:
    """`n` memories in one commit (kinds, tasks, tags), then some histories and role state."""
    with store.commit() as c:
        ids = c.put_many(
            [f"note {i}" for i in range(start, start + n)],
            kind=["fact" if i % 2 else "trace" for i in range(start, start + n)],
            task=[f"t{i % 7}" for i in range(start, start + n)],
            tags=("a",),
        )
    for mid in ids[:: max(1, n // 50)]:
        store.stale(mid, reason="old")
        store.move(mid, "long")
    store.finish_task("t1")
    store.locks.acquire(f"job{start}", "owner", 60_000)
    return ids


def _view(store: memcommit.MemoryStore, ids: list[str]) -> tuple[object, ...]:
    sample = ids[:: max(1, len(ids) // 500)] + ids[-3:]
    got = store.get_many(sample)
    return (
        [(m.id, m.kind, m.text, m.task, m.tier, m.status, m.tags, m.lsn) for m in got],
        [m.updated_at for m in got],
        [m.id for m in store.find(status="stale")],
        [m.id for m in store.find(kind="fact", limit=20)],
        store.history(sample[3]),
        store.lsn,
        len(store),
        store.is_task_finished("t1"),
        store.locks.get("job0"),
        [(s.lsn, s.hash) for s in store.seals()],
        "unknown-id" in store,
    )


def _replayed_view(path: Path, ids: list[str]) -> tuple[object, ...]:
    """The view of a full replay: the index file moved aside while a reader opens."""
    index = Path(f"{path}.index")
    aside = Path(f"{path}.aside")
    had = index.exists()
    if had:
        index.rename(aside)
    try:
        with memcommit.open(path, read_only=True) as store:
            assert store.info()["index_file"] == "absent"
            return _view(store, ids)
    finally:
        if had:
            aside.rename(index)


def test_closing_a_grown_store_writes_the_index_file_and_the_next_open_reads_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.db"
    index = Path(f"{path}.index")
    with memcommit.open(path, durability="none") as store:
        ids = _grow(store, 1000)
    assert not index.exists(), "written for a log that grew by fewer records than the threshold"
    with memcommit.open(path, durability="none") as store:
        assert store.info()["index_file"] == "absent"
        ids += _grow(store, EVERY, start=1000)
        seal(store)
    assert index.exists()
    want = _replayed_view(path, ids)
    with memcommit.open(path) as store:
        assert store.info()["index_file"] == "loaded"
        assert _view(store, ids) == want
        # The store goes on from it: new memories, changes to old ones, seals, verify.
        ids += _grow(store, 200, start=EVERY + 1000)
        store.stale(ids[5], reason="later")
        seal(store)
        assert verify(store).ok
    want = _replayed_view(path, ids)
    with memcommit.open(path, read_only=True) as reader:
        assert reader.info()["index_file"] == "loaded"
        assert _view(reader, ids) == want
    assert not [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_a_damaged_index_file_is_ignored_replaced_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    index = Path(f"{path}.index")
    with memcommit.open(path, durability="none") as store:
        ids = _grow(store, EVERY)
    want = _replayed_view(path, ids)
    good = index.read_bytes()
    rng = random.Random(7)
    for at in [0, 100, 255, len(good) // 3, len(good) // 2, len(good) - 1] + [
        rng.randrange(len(good)) for _ in range(4)
    ]:
        bad = bytearray(good)
        bad[at] ^= 0x40
        index.write_bytes(bytes(bad))
        with memcommit.open(path, read_only=True) as reader:
            status = reader.info()["index_file"]
            assert status.startswith("ignored: "), (at, status)
            assert _view(reader, ids) == want
    # A writer that finds it damaged deletes it, and writes a fresh one when it closes.
    index.write_bytes(good[: len(good) // 2])
    with memcommit.open(path) as store:
        assert store.info()["index_file"].startswith("ignored: ")
        assert not index.exists()
        assert _view(store, ids) == want
    assert index.exists()
    with memcommit.open(path) as store:
        assert store.info()["index_file"] == "loaded"
        assert _view(store, ids) == want


def test_log_compaction_leaves_no_index_file_that_does_not_fit(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    index = Path(f"{path}.index")
    clock = ControllableClock()
    with memcommit.open(path, clock=clock, durability="none") as store:
        ids = _grow(store, EVERY)
    old = index.read_bytes()
    with memcommit.open(path, clock=clock) as store:
        assert store.info()["index_file"] == "loaded"
        compact(store)
        assert store.info()["generation"] == 1
    index.write_bytes(old)  # an index file of generation 0 beside a log of generation 1
    with memcommit.open(path, read_only=True) as reader:
        assert "generation" in reader.info()["index_file"]
        assert len(reader) == len(ids)
        assert reader.get(ids[12345]).text == "note 12345"


_CHILD = textwrap.dedent(
    """
    import sys
    import memcommit
    store = memcommit.open(sys.argv[1], durability="none")
    with store.commit() as c:
        c.put_many([f"note {i}" for i in range(int(sys.argv[2]))], kind="fact")
    store.flush()
    print("closing", flush=True)
    store.close()
    print("closed", flush=True)
    """
)


def test_kill_9_while_the_index_file_is_written_leaves_a_store_that_opens_whole(
    tmp_path: Path,
) -> None:
    """A child closes a store of EVERY memories (so it writes the index file) and is killed at
    a random moment of the close; the store must open with every memory, from an index file
    that is whole or from a replay, with no temp file left once a writer opened it."""
    rng = random.Random(int(os.environ.get("MEMCOMMIT_SEED", "11")))
    for round_ in range(6):
        path = tmp_path / f"memory{round_}.db"
        with subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path), str(EVERY)],
            stdout=subprocess.PIPE,
            text=True,
        ) as proc:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "closing"
            time.sleep(rng.uniform(0, 0.15))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        with memcommit.open(path) as store:
            assert store.info()["index_file"] in {"loaded", "absent"}
            assert len(store) == EVERY
            assert [m.text for m in store.find(limit=2)] == ["note 0", "note 1"]
        assert not [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_a_reader_on_a_mapped_index_file_goes_on_while_the_writer_replaces_it(
    tmp_path: Path,
) -> None:
    """A writer never rewrites an index file in place: a reader that mapped the old one keeps
    reading it, and catches up with `refresh()`, after a writer saved a new one."""
    path = tmp_path / "memory.db"
    index = Path(f"{path}.index")
    with memcommit.open(path, durability="none") as store:
        ids = _grow(store, EVERY)
    old_inode = index.stat().st_ino
    reader = memcommit.open(path, read_only=True)
    try:
        assert reader.info()["index_file"] == "loaded"
        with memcommit.open(path, durability="none") as writer:
            ids += _grow(writer, EVERY, start=EVERY)
        assert index.stat().st_ino != old_inode, "the index file was not replaced whole"
        reader.refresh()
        want = _replayed_view(path, ids)
        assert _view(reader, ids) == want
    finally:
        reader.close()
    with memcommit.open(path, read_only=True) as again:
        assert again.info()["index_file"] == "loaded"
        assert _view(again, ids) == want


def test_damage_an_open_from_the_index_file_did_not_read_is_not_said_to_be_new(
    tmp_path: Path,
) -> None:
    # An open from the index file checks only the log's newest records: damage older than the
    # open surfaces at the first read of it, and the error must not claim the file was intact
    # when the store opened.
    path = tmp_path / "m.db"
    with memcommit.open(path) as store:
        ids = _grow(store, EVERY)
    assert Path(f"{path}.index").exists()
    data = bytearray(path.read_bytes())
    at = data.index(b"note 12345")
    data[at + 2] ^= 0x01
    path.write_bytes(bytes(data))
    with memcommit.open(path) as store:
        assert store.info()["index_file"] == "loaded"
        try:
            store.get(ids[12345])
        except memcommit.CorruptLog as error:
            message = str(error)
        else:
            raise AssertionError("a read of a damaged record succeeded")
    assert "intact when the store opened" not in message, message
    assert "index file" in message and "memcommit repair" in message, message
