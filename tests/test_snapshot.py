"""Snapshots: save_snapshot and open(log, snapshot=...)."""

from __future__ import annotations

import json
import os
import struct
import threading
from pathlib import Path
from typing import Any

import pytest

import memcommit
from logbytes import read_log, write_log
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


# --- tampering ------------------------------------------------------------------------------
#
# A snapshot ends with ``,"checksum":"<blake3 hex>"}``, the hash of every byte before that
# member. The tests recompute it (as a tamperer could) with the small BLAKE3 below, checked
# against the checksum memcommit writes.

_IV = (
    0x6A09E667,
    0xBB67AE85,
    0x3C6EF372,
    0xA54FF53A,
    0x510E527F,
    0x9B05688C,
    0x1F83D9AB,
    0x5BE0CD19,
)
_PERM = (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8)
_START, _END, _PARENT, _ROOT = 1, 2, 4, 8
_M32 = 0xFFFFFFFF


def _compress(cv: list[int], block: bytes, counter: int, length: int, flags: int) -> list[int]:
    m = list(struct.unpack("<16I", block.ljust(64, b"\0")))
    v = [*cv, *_IV[:4], counter & _M32, counter >> 32, length, flags]

    def g(a: int, b: int, c: int, d: int, x: int, y: int) -> None:
        v[a] = (v[a] + v[b] + x) & _M32
        v[d] = ((v[d] ^ v[a]) >> 16 | (v[d] ^ v[a]) << 16) & _M32
        v[c] = (v[c] + v[d]) & _M32
        v[b] = ((v[b] ^ v[c]) >> 12 | (v[b] ^ v[c]) << 20) & _M32
        v[a] = (v[a] + v[b] + y) & _M32
        v[d] = ((v[d] ^ v[a]) >> 8 | (v[d] ^ v[a]) << 24) & _M32
        v[c] = (v[c] + v[d]) & _M32
        v[b] = ((v[b] ^ v[c]) >> 7 | (v[b] ^ v[c]) << 25) & _M32

    for r in range(7):
        g(0, 4, 8, 12, m[0], m[1])
        g(1, 5, 9, 13, m[2], m[3])
        g(2, 6, 10, 14, m[4], m[5])
        g(3, 7, 11, 15, m[6], m[7])
        g(0, 5, 10, 15, m[8], m[9])
        g(1, 6, 11, 12, m[10], m[11])
        g(2, 7, 8, 13, m[12], m[13])
        g(3, 4, 9, 14, m[14], m[15])
        if r < 6:
            m = [m[i] for i in _PERM]
    return [v[i] ^ v[i + 8] for i in range(8)]


def _blake3_hex(data: bytes) -> str:
    """BLAKE3 of `data` (32 bytes, hex): chunks of 1 KiB, blocks of 64 bytes, a binary tree."""

    def chunk(n: int, root: bool) -> list[int]:
        piece = data[n * 1024 : (n + 1) * 1024]
        blocks = [piece[i : i + 64] for i in range(0, len(piece), 64)] or [b""]
        cv = list(_IV)
        for i, b in enumerate(blocks):
            flags = (_START if i == 0 else 0) | (_END if i == len(blocks) - 1 else 0)
            cv = _compress(cv, b, n, len(b), flags | (_ROOT if root and flags & _END else 0))
        return cv

    def tree(first: int, count: int, root: bool) -> list[int]:
        if count == 1:
            return chunk(first, root)
        left = 1 << ((count - 1).bit_length() - 1)  # the largest power of two below count
        words = tree(first, left, False) + tree(first + left, count - left, False)
        return _compress(
            list(_IV), struct.pack("<16I", *words), 0, 64, _PARENT | (_ROOT if root else 0)
        )

    return struct.pack("<8I", *tree(0, max(1, -(-len(data) // 1024)), True)).hex()


_SUFFIX = ',"checksum":"'


def _with_checksum(snapshot: dict[str, Any]) -> str:
    """The snapshot's text with a checksum recomputed over it, as memcommit lays it out."""
    body = {k: v for k, v in snapshot.items() if k != "checksum"}
    text = json.dumps(body, separators=(",", ":"))[:-1]
    return f'{text}{_SUFFIX}{_blake3_hex(text.encode())}"}}'


def _tamper_setup(tmp_path: Path) -> tuple[str, Path, dict[str, Any]]:
    log, snap = str(tmp_path / "m.db"), tmp_path / "state.json"
    with memcommit.open(log) as store:
        _fill(store, 50)
        store.save_snapshot(str(snap))
    return log, snap, json.loads(snap.read_text(encoding="utf-8"))


def _refused(log: str, snap: Path, text: str) -> str:
    """Open `log` (as a writer) with the snapshot `text`: the SnapshotMismatch's message."""
    snap.write_text(text, encoding="utf-8")
    before = Path(log).read_bytes()
    with pytest.raises(memcommit.SnapshotMismatch) as refused:
        memcommit.open(log, snapshot=str(snap))
    assert Path(log).read_bytes() == before, "a refused snapshot changed the log"
    return str(refused.value)


def _first(data: dict[str, Any], **where: int) -> int:
    """The column position of the first memory whose columns have the given values."""
    mem = data["memories"]
    return next(i for i in range(len(mem["id"])) if all(mem[k][i] == v for k, v in where.items()))


def test_the_checksum_a_snapshot_carries_is_blake3_of_every_byte_before_it(tmp_path: Path) -> None:
    assert _blake3_hex(b"") == "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
    _, snap, data = _tamper_setup(tmp_path)
    text = snap.read_text(encoding="utf-8")
    assert len(text) > 5 * 1024  # several chunks of the hash tree, not a power of two
    body, _, rest = text.rpartition(_SUFFIX)
    assert rest == f'{data["checksum"]}"}}' and _blake3_hex(body.encode()) == data["checksum"]
    # Compact JSON in the same member order: rewritten with the checksum recomputed, it is the
    # same text byte for byte.
    assert _with_checksum(data) == text


def test_an_edit_that_keeps_the_old_checksum_is_refused(tmp_path: Path) -> None:
    log, snap, data = _tamper_setup(tmp_path)
    text = snap.read_text(encoding="utf-8")
    i = _first(data, tier=0, move_off=-1)
    data["memories"]["tier"][i] = 2
    edited = _with_checksum(data).rpartition(_SUFFIX)[0] + _SUFFIX + f'{data["checksum"]}"}}'
    assert "checksum does not match" in _refused(log, snap, edited)
    # The checksum itself changed.
    body, _, rest = text.rpartition(_SUFFIX)
    flipped = ("1" if rest[0] == "0" else "0") + rest[1:]
    assert "checksum does not match" in _refused(log, snap, body + _SUFFIX + flipped)
    # Untouched, it opens.
    snap.write_text(text, encoding="utf-8")
    with memcommit.open(log, snapshot=str(snap)) as store:
        assert len(store) == 50


def test_a_recomputed_checksum_over_a_changed_tier_or_status_is_refused(tmp_path: Path) -> None:
    log, snap, data = _tamper_setup(tmp_path)
    mem = data["memories"]
    # A memory never moved: its put says its tier.
    i = _first(data, tier=0, move_off=-1)
    t = json.loads(json.dumps(data))
    t["memories"]["tier"][i] = 3
    message = _refused(log, snap, _with_checksum(t))
    assert mem["id"][i] in message and 'tier "archive"' in message, message
    # A memory staled after its put: its status record says stale.
    i = _first(data, status=1)
    assert mem["status_off"][i] > mem["put_off"][i]
    s = json.loads(json.dumps(data))
    s["memories"]["status"][i] = 0
    message = _refused(log, snap, _with_checksum(s))
    assert mem["id"][i] in message and "status record" in message, message
    # A memory moved after its put: its move record says long.
    i = _first(data, tier=2)
    m = json.loads(json.dumps(data))
    m["memories"]["tier"][i] = 1
    message = _refused(log, snap, _with_checksum(m))
    assert mem["id"][i] in message and "move record" in message, message


def test_a_recomputed_checksum_over_an_offset_sent_to_another_record_is_refused(
    tmp_path: Path,
) -> None:
    log, snap, data = _tamper_setup(tmp_path)
    mem = data["memories"]
    a, b = _first(data, tier=0, status=0), _first(data, tier=0, status=0) + 1
    x = json.loads(json.dumps(data))
    # a's last put pointed at b's (a valid record, its length made to fit).
    x["memories"]["put_off"][a] = mem["put_off"][b]
    x["memories"]["put_len"][a] = mem["put_len"][b]
    message = _refused(log, snap, _with_checksum(x))
    assert mem["id"][a] in message and mem["id"][b] in message, message
    assert str(mem["put_off"][b]) in message, message
    # A status record pointed at for a memory that has another's.
    s = _first(data, status=1)
    x = json.loads(json.dumps(data))
    x["memories"]["status_off"][a] = mem["status_off"][s]
    message = _refused(log, snap, _with_checksum(x))
    assert mem["id"][a] in message and mem["id"][s] in message, message
    # And the checksum recomputed over the snapshot as it was: it opens, to the same state.
    snap.write_text(_with_checksum(data), encoding="utf-8")
    with memcommit.open(log) as full:
        want = _view(full)
    with memcommit.open(log, snapshot=str(snap)) as store:
        assert _view(store) == want


@pytest.mark.parametrize("sealed", [False, True])
def test_a_recomputed_checksum_over_another_chain_value_is_refused(
    tmp_path: Path, sealed: bool
) -> None:
    # SPEC 7: a snapshot of another chain hash raises SnapshotMismatch at open. The chain is
    # recomputed from the newest seal the snapshot holds (or from the log's start).
    log, snap = str(tmp_path / "m.db"), tmp_path / "state.json"
    with memcommit.open(log) as store:
        _fill(store, 20)
        if sealed:
            memcommit.seal(store)
            _fill(store, 5, start=20)
        store.save_snapshot(str(snap))
    data = json.loads(snap.read_text(encoding="utf-8"))
    assert len(data["seals"]) == int(sealed)
    x = json.loads(json.dumps(data))
    x["chain"] = ("0" if data["chain"][0] != "0" else "1") + data["chain"][1:]
    message = _refused(log, snap, _with_checksum(x))
    assert "chain value differs" in message and f"LSN {data['lsn']}" in message, message
    # As it was, it opens, and a seal made after it checks.
    snap.write_text(_with_checksum(data), encoding="utf-8")
    with memcommit.open(log, snapshot=str(snap)) as store:
        store.put("after the snapshot")
        memcommit.seal(store)
        assert memcommit.verify(store).seals_checked == 1 + int(sealed)


def test_a_log_changed_before_the_snapshots_end_is_refused(tmp_path: Path) -> None:
    # An older put of a memory (a record the snapshot does not point to) changed under a
    # recomputed checksum: the records the snapshot names still fit, its chain does not.
    log, snap = str(tmp_path / "m.db"), tmp_path / "state.json"
    with memcommit.open(log) as store:
        mid = store.put("the first version", id="m1")
        store.put("the second version", id="m1")
        _fill(store, 10)
        store.save_snapshot(str(snap))
    text = snap.read_text(encoding="utf-8")
    edited = read_log(log)
    first = edited.by_lsn(1)
    first.replace(b"the first version", b"the FIRST version")
    first.fix_crc()
    write_log(log, edited)
    message = _refused(log, snap, text)
    assert "chain value differs" in message, message
    # Without the snapshot the log replays (the change is a seal's and verify's to find).
    with memcommit.open(log) as store:
        assert store.get(mid).text == "the second version"


def test_a_snapshot_of_version_1_without_a_checksum_is_refused(tmp_path: Path) -> None:
    log, snap, data = _tamper_setup(tmp_path)
    data["version"] = 1
    del data["checksum"]
    message = _refused(log, snap, json.dumps(data))
    assert "version 1" in message and "take a new snapshot" in message, message


def test_a_refused_snapshot_is_named_in_the_message(tmp_path: Path) -> None:
    log, snap, data = _tamper_setup(tmp_path)
    data["memories"]["tier"][0] = 3
    assert _refused(log, snap, _with_checksum(data)).startswith(f"{snap}:")


@pytest.mark.parametrize(
    "name", ["the log", ".lock", ".index", ".manifest", ".tmp-manifest", "a link to the log"]
)
def test_a_snapshot_over_the_store_or_a_file_of_it_is_refused(tmp_path: Path, name: str) -> None:
    path = str(tmp_path / "m.db")
    target = {"the log": path, "a link to the log": str(tmp_path / "link")}.get(name, path + name)
    if name == "a link to the log":
        os.symlink(path, target)
    with memcommit.open(path) as store:
        ids = _fill(store, 5)
        compact(store)  # a manifest to lose
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
        with pytest.raises(ValueError, match=r"path: .* is the store .* give another file"):
            store.save_snapshot(target)
        after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
        assert after == before
        store.put("still writable", id="later")
    with memcommit.open(path) as store:
        assert [m.id for m in store.get_many([*ids, "later"]) if m] == [*ids, "later"]
        assert len(store.manifest()) == 1


def test_a_temp_file_a_killed_save_left_goes_with_the_next_save(tmp_path: Path) -> None:
    """A save killed between writing its temp file and renaming it leaves ``<path>.tmp-<pid>-<n>``,
    which nothing else removes (a snapshot may be anywhere): the next save of the same file
    removes the temp files of processes that no longer run, and leaves a running one's."""
    import subprocess
    import sys

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    snap = tmp_path / "state.json"
    left = tmp_path / f"state.json.tmp-{int(dead.stdout)}-3"
    left.write_bytes(b"x" * 4096)  # what the killed save wrote
    older = tmp_path / f"state.json.tmp-{int(dead.stdout)}"  # named as before the number
    older.write_bytes(b"x")
    running = tmp_path / f"state.json.tmp-{os.getppid()}"  # a save in flight elsewhere
    running.write_bytes(b"y")
    with memcommit.open(tmp_path / "memory.db") as store:
        store.put("a memory")
        store.save_snapshot(snap)
    assert not left.exists() and not older.exists() and running.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("state.json")) == [
        "state.json",
        running.name,
    ]


def test_threads_saving_one_snapshot_file_at_once_each_write_whole(tmp_path: Path) -> None:
    """save_snapshot writes "atomically", and a store is safe to share between threads: the
    temp file was named by the process alone, so threads saving the same file at once wrote
    into one temp file and all but one rename raised FileNotFoundError."""
    snap = tmp_path / "state.json"
    errors: list[BaseException] = []
    with memcommit.open(tmp_path / "memory.db", durability="none") as store:
        with store.commit() as c:
            c.put_many([f"memory {i} " + "x" * 20 for i in range(5_000)])

        def save() -> None:
            barrier.wait()
            try:
                store.save_snapshot(snap)
            except BaseException as error:  # every error is the finding
                errors.append(error)

        for _ in range(5):
            barrier = threading.Barrier(4)
            threads = [threading.Thread(target=save) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert errors == []
            with memcommit.open(tmp_path / "memory.db", snapshot=snap, read_only=True) as r:
                assert len(r) == 5_000
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("state")) == [snap.name]


@pytest.mark.parametrize("bad", [123, None, b"state.json", ""])
def test_a_snapshot_argument_that_is_not_a_file_name_names_itself(
    tmp_path: Path, bad: object
) -> None:
    log = tmp_path / "m.db"
    error = memcommit.InvalidValue if bad == "" else memcommit.InvalidType
    with memcommit.open(log) as store:
        store.put("a")
        with pytest.raises(error, match=r"^path\b"):
            store.save_snapshot(bad)  # type: ignore[arg-type]
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("m.db")] == []
    if bad is not None:
        before = log.read_bytes()
        with pytest.raises(error, match=r"^snapshot\b"):
            memcommit.open(log, snapshot=bad)  # type: ignore[arg-type]
        assert log.read_bytes() == before
