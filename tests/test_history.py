"""``store.history(id)``: every put, status and move record of a memory still in the log, oldest
first, the bytes the log holds; on every store and every way a store opens, and reading that
memory's records only."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import memcommit
from memcommit.errors import CorruptLog, Rejected
from memcommit.storage import ArchivedOlderThan, compact
from memcommit.testing import CLOCK_START, ControllableClock, ServerProcess

TIERS = ("working", "mid", "long", "archive")
MEMORY_OPS = ("put", "status", "move")


def _scenario(
    store: memcommit.MemoryStore, n: int = 30, rounds: int = 200, start: int = 0
) -> list[str]:
    """`n` memories given versions, status changes (reasons of many lengths) and moves,
    interleaved, several of one memory in a commit, and a refused commit taken back."""
    ids = [f"m{i}" for i in range(n)]
    for mid in ids:
        store.put(f"{mid} first", id=mid, kind="note")
    for r in range(start, start + rounds):
        mid = ids[r * 7 % n]
        reason = [None, f"reason {r}", "a long reason " + "y" * (150 + r % 90)][r % 3]
        with store.commit() as c:
            if r % 4 == 0:
                c.put(f"{mid} v{r} " + "x" * (r * 13 % 400), id=mid, kind="note", tags=("a",))
                c.stale(mid, reason=reason)
            elif r % 4 == 1:
                c.move(mid, TIERS[r % 4])
                c.restore(mid)
                c.put(f"{mid} v{r}", id=mid, kind="fact")
            elif r % 4 == 2:
                c.stale(mid, reason=reason)
                c.move(mid, TIERS[(r + 1) % 4])
            else:
                c.put(f"{mid} v{r}", id=mid)
                c.put(f"other v{r}", id=ids[(r + 1) % n])
        if r % 17 == 0:
            with pytest.raises(Rejected):
                with store.commit() as c:
                    c.put("taken back", id=mid)
                    c.move(mid, "archive")
                    c.stale("no-such-memory")
    return ids


def _in_log(store: memcommit.MemoryStore, ids: list[str]) -> dict[str, list[bytes]]:
    """Each memory's records as a read of the whole log finds them."""
    out: dict[str, list[bytes]] = {mid: [] for mid in ids}
    for r in store.records():
        if r.op in MEMORY_OPS and r.key in out:
            out[r.key].append(r.raw())
    return out


def _check(store: memcommit.MemoryStore, want: dict[str, list[bytes]], what: str) -> None:
    assert sum(len(v) for v in want.values()) > 2 * len(want), what
    for mid, records in want.items():
        got = store.history(mid)
        assert [r.raw() for r in got] == records, f"{what}: {mid}"
        assert [r.lsn for r in got] == sorted(r.lsn for r in got), f"{what}: {mid} oldest first"
    assert store.history("no-such-memory") == []


@pytest.fixture(params=["file", "memory"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[memcommit.MemoryStore]:
    where = str(tmp_path / "h.db") if request.param == "file" else ":memory:"
    with memcommit.open(where, durability="none") as store:
        yield store


def test_history_is_every_record_of_the_memory_in_the_log(any_store: memcommit.MemoryStore) -> None:
    ids = _scenario(any_store)
    for _ in range(300):  # one memory with many versions
        any_store.put("again", id="m3")
        any_store.move("m3", "long")
    _check(any_store, _in_log(any_store, ids), "as committed")
    assert len(any_store.history("m3")) > 600


def test_history_after_replay_the_index_file_and_a_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    snap = tmp_path / "state.json"
    with memcommit.open(path, durability="none") as store:
        ids = _scenario(store)
        store.save_snapshot(snap)
        _scenario(store, start=200)
        # Grown by 100,000 records: its close writes the index file.
        with store.commit() as c:
            c.put_many([f"bulk {i}" for i in range(100_000)], kind="bulk")
        want = _in_log(store, ids)
    with memcommit.open(path, read_only=True) as store:
        assert store.info()["index_file"] == "loaded"
        _check(store, want, "from the index file")
    with memcommit.open(path, durability="none", snapshot=snap) as store:
        _check(store, want, "from a snapshot taken half way")
    (tmp_path / "h.db.index").unlink()
    with memcommit.open(path, durability="none") as store:
        assert store.info()["index_file"] == "absent"
        _check(store, want, "by a full replay")


def test_history_after_compaction_with_and_without_retention(tmp_path: Path) -> None:
    clock = ControllableClock(CLOCK_START)
    with memcommit.open(tmp_path / "h.db", durability="none", clock=clock) as store:
        ids = _scenario(store)
        horizon = store.lsn
        _scenario(store, start=200)
        compact(store, horizon=horizon)
        _check(store, _in_log(store, ids), "compacted to a horizon")
        _scenario(store, start=400)
        _check(store, _in_log(store, ids), "compacted, then more commits")
        # m0 archived long ago, with nothing after the horizon: retention purges it.
        store.put("old", id="m0")
        store.move("m0", "archive")
        clock.advance(timedelta(days=40))
        horizon = store.lsn
        for mid in ids[1:]:
            store.put(f"{mid} after", id=mid)
        report = compact(store, retention=ArchivedOlderThan(seconds=30 * 86400), horizon=horizon)
        assert report.purged == ("m0",)
        assert store.history("m0") == []
        _check(store, _in_log(store, ids[1:]), "compacted with retention")


def test_history_on_a_reader_that_refreshes(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    with memcommit.open(path, durability="none") as writer:
        ids = _scenario(writer, rounds=50)
        writer.flush()
        with memcommit.open(path, read_only=True) as reader:
            for start in (50, 150, 250):
                _scenario(writer, rounds=100, start=start)
                writer.flush()
                assert reader.refresh() > 0
                _check(reader, _in_log(writer, ids), "a reader, refreshed")


def test_history_on_a_remote_store(tmp_path: Path) -> None:
    with (
        ServerProcess(tmp_path / "served.db") as server,
        memcommit.RemoteStore(server.url) as remote,
    ):
        ids = _scenario(remote, n=10, rounds=60)
        _check(remote, _in_log(remote, ids), "through the server's replica")
        _scenario(remote, n=10, rounds=60, start=60)
        _check(remote, _in_log(remote, ids), "the replica, fresh again")


def test_a_history_reads_that_memorys_records_only(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    with memcommit.open(path, durability="none") as store:
        ids = _scenario(store, n=10, rounds=60)
        want = _in_log(store, ids)
        target = store.history("m4")[0]  # an older put of m4
    # A byte of m4's first record's key changes on disk under a reader.
    offset = next(off for off, raw in _file_records(path) if raw == target.raw())
    with memcommit.open(path, read_only=True) as reader:
        data = bytearray(path.read_bytes())
        data[offset + 33] ^= 0x55
        path.write_bytes(bytes(data))
        for mid in ids:
            if mid == "m4":
                with pytest.raises(CorruptLog) as err:
                    reader.history(mid)
                assert err.value.offset == offset
            else:
                # Every other history is read without touching m4's records.
                assert [r.raw() for r in reader.history(mid)] == want[mid], mid
        with pytest.raises(CorruptLog):
            list(reader.records())  # a read of the whole log meets the damage


def _file_records(path: Path) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) of each record of the log file at `path`, by its framing."""
    data = path.read_bytes()
    off = 64
    while off + 32 <= len(data):
        key_len = int.from_bytes(data[off + 24 : off + 26], "little")
        length = int.from_bytes(data[off + 28 : off + 32], "little")
        end = off + 36 + key_len + length
        yield off, data[off:end]
        off = end
