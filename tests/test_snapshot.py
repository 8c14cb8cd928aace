"""Snapshots: save_snapshot and open(log, snapshot=...)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import memcommit
from memcommit.storage import compact
from memcommit.testing import ControllableClock


def _fill(store: memcommit.MemoryStore, n: int, start: int = 0) -> list[str]:
    ids = []
    for i in range(start, start + n):
        kind = "fact" if i % 2 else "trace"
        mid = store.put(f"note {i}", kind=kind, task=f"t{i % 3}", tags=("a",))
        if i % 4 == 0:
            store.stale(mid, reason="old")
        if i % 5 == 0:
            store.move(mid, "long")
        ids.append(mid)
    store.finish_task("t1")
    return ids


def _view(store: memcommit.MemoryStore) -> tuple[object, ...]:
    mems = [
        (m.id, m.kind, m.text, m.task, m.tier, m.status, m.tags, m.lsn, m.created_at, m.updated_at)
        for m in store.find(status=None)
    ]
    return (
        mems,
        store.lsn,
        len(store),
        store.is_task_finished("t1"),
        store.locks.get("job"),
        [(s.lsn, s.hash) for s in store.seals()],
    )


def test_a_snapshot_opens_to_the_state_a_full_replay_gives(tmp_path: Path) -> None:
    clock = ControllableClock()
    log, snap = str(tmp_path / "m.db"), str(tmp_path / "state.json")
    with memcommit.open(log, clock=clock) as store:
        _fill(store, 50)
        store.locks.acquire("job", "a", 60_000)
        memcommit.seal(store)
        store.save_snapshot(snap)
        _fill(store, 20, start=50)  # after the snapshot: replayed on open
    assert sorted(os.listdir(tmp_path)) == ["m.db", "m.db.lock", "state.json"]
    data = json.loads(Path(snap).read_text(encoding="utf-8"))
    assert data["format"] == "memcommit-snapshot" and data["generation"] == 0
    assert len(data["memories"]["id"]) == 50 and len(data["chain"]) == 64
    with memcommit.open(log, clock=clock) as full:
        want = _view(full)
    with memcommit.open(log, clock=clock, snapshot=snap) as store:
        assert _view(store) == want
        store.put("written after opening from the snapshot")
        assert memcommit.verify(store).seals_checked == 1
    with memcommit.open(log, clock=clock, read_only=True, snapshot=snap) as reader:
        assert len(reader) == 71


def test_a_snapshot_of_another_store_generation_or_history_raises_snapshot_mismatch(
    tmp_path: Path,
) -> None:
    log, snap = str(tmp_path / "m.db"), str(tmp_path / "state.json")
    with memcommit.open(log) as store:
        _fill(store, 10)
        store.save_snapshot(snap)
    other = str(tmp_path / "other.db")
    with memcommit.open(other) as store:
        _fill(store, 10)
    with pytest.raises(memcommit.SnapshotMismatch, match="store"):
        memcommit.open(other, snapshot=snap)
    # The log rolled back to before the snapshot (a shorter copy).
    data = Path(log).read_bytes()
    short = tmp_path / "short.db"
    short.write_bytes(data[: len(data) - 40])
    with pytest.raises(memcommit.SnapshotMismatch):
        memcommit.open(str(short), read_only=True, snapshot=snap)
    # Compacted since: another generation.
    with memcommit.open(log) as store:
        compact(store)
    with pytest.raises(memcommit.SnapshotMismatch, match="generation"):
        memcommit.open(log, snapshot=snap)
    # Not a snapshot at all.
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}', encoding="utf-8")
    with pytest.raises(memcommit.SnapshotMismatch, match="not a snapshot"):
        memcommit.open(log, snapshot=str(bad))
    # And the log opens fine without one.
    with memcommit.open(log) as store:
        assert len(store) == 10


def test_snapshots_need_a_log_file(tmp_path: Path) -> None:
    store = memcommit.open(":memory:")
    with pytest.raises(memcommit.NotSupported):
        store.save_snapshot(str(tmp_path / "s.json"))
    with pytest.raises(memcommit.NotSupported):
        memcommit.open(":memory:", snapshot=str(tmp_path / "s.json"))
    with pytest.raises(FileNotFoundError):
        memcommit.open(str(tmp_path / "m.db"), snapshot=str(tmp_path / "missing.json"))
