"""Records whose checksum matches but whose contents do not decode.

A buggy tool, or someone who recomputed the CRC after editing a record, can leave bytes the
framing accepts and memcommit never writes: text or data that is not UTF-8, data or a role's
state that is not JSON. Such a record is damage like any other: ``CorruptLog`` naming the
path, the byte offset and the LSN (at open for entity records, which open decodes; at read
for a memory's key and text, and when its ``data`` is asked for), and ``memcommit repair``
finds it.
"""

from __future__ import annotations

import math
import re
import struct
from pathlib import Path

import pytest

import memcommit
from logbytes import Rec, read_log, write_log
from memcommit import cli


def rewrite(path: Path, old: bytes, new: bytes) -> tuple[int, int]:
    """Replace `old` by `new` (same length) in the first record holding it, with a fresh CRC.

    Returns the record's (offset, LSN)."""
    assert len(old) == len(new)
    log = read_log(path)
    for rec in log.recs:
        i = rec.data.find(old, 32)
        if i >= 0:
            rec.data[i : i + len(old)] = new
            rec.fix_crc()
            write_log(path, log)
            return rec.offset, rec.lsn
    raise AssertionError(f"{old!r} is in no record")


@pytest.fixture
def log(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "memory.db"
    with memcommit.open(path) as store:
        mid = store.put("hello world", kind="fact", data={"k": "vvvv"})
        store.locks.acquire("job", "replica-a", 60_000)
    return path, mid


def assert_names(err: BaseException, path: Path, off: int, lsn: int) -> None:
    text = str(err)
    assert str(path) in text
    assert f"byte offset {off}" in text
    assert f"LSN {lsn}" in text


def assert_repair_finds(path: Path, off: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["repair", str(path)]) == 1
    out = capsys.readouterr()
    assert re.search(rf"damaged record at byte offset {off}\b", out.out + out.err)
    assert "Traceback" not in out.out + out.err


# Each edit: which record it damages ("memory": caught at read; "entity": caught at open, which
# decodes entity records), and the bytes it replaces, with what.
EDITS = {
    "data is not UTF-8": ("memory", b'"vvvv"', b'"\xff\xfevv"'),
    "data is not JSON": ("memory", b'"vvvv"', b'"vv",}'),
    "text is not UTF-8": ("memory", b"hello", b"h\xffllo"),
    "state is not UTF-8": ("entity", b"replica-a", b"replic\xff-a"),
    "state is not JSON": ("entity", b'"replica-a"', b'"replica-a,'),
    "key is not UTF-8": ("entity", b'lock\x00["job"]', b'lock\x00["j\xffb"]'),
}


def edits_of(record: str) -> list[str]:
    return [name for name, (of, _, _) in EDITS.items() if of == record]


@pytest.fixture
def edited(log: tuple[Path, str], request: pytest.FixtureRequest) -> tuple[Path, str, int, int]:
    """The log with the edit ``request.param`` made: (path, memory id, offset, LSN)."""
    path, mid = log
    _, old, new = EDITS[request.param]
    off, lsn = rewrite(path, old, new)
    return path, mid, off, lsn


@pytest.mark.parametrize("edited", edits_of("memory"), indirect=True)
def test_a_memory_that_does_not_decode_is_corrupt_log_at_read(
    edited: tuple[Path, str, int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, mid, off, lsn = edited
    for read_only in (True, False):
        with memcommit.open(path, read_only=read_only) as store:
            with pytest.raises(memcommit.CorruptLog) as err:
                store.get(mid).data  # noqa: B018 (the read is the test)
            assert_names(err.value, path, off, lsn)
            with pytest.raises(memcommit.CorruptLog):
                store.get_many([mid])[0].data  # noqa: B018 (the read is the test)
    assert_repair_finds(path, off, capsys)


@pytest.mark.parametrize("edited", edits_of("entity"), indirect=True)
def test_an_entity_that_does_not_decode_is_corrupt_log_at_open(
    edited: tuple[Path, str, int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, off, lsn = edited
    before = path.read_bytes()
    for read_only in (True, False):
        with pytest.raises(memcommit.CorruptLog) as err:
            memcommit.open(path, read_only=read_only)
        assert_names(err.value, path, off, lsn)
    assert path.read_bytes() == before  # nothing cut, nothing written
    assert_repair_finds(path, off, capsys)


def _trailing_byte(rec: Rec) -> None:
    """One byte after a put's last field (its length and checksum made to agree)."""
    rec.data[-4:-4] = b"\x00"
    rec.data[28:32] = (int.from_bytes(rec.data[28:32], "little") + 1).to_bytes(4, "little")


def _nan_in_vector(rec: Rec) -> None:
    at = rec.data.rfind(struct.pack("<f", 2.0))
    rec.data[at : at + 4] = struct.pack("<f", math.nan)


# A put's bytes no writer makes, each under a valid checksum: caught by no open.
MALFORMED_PUTS = {
    "trailing byte": _trailing_byte,
    "vector value not finite": _nan_in_vector,
}


@pytest.mark.parametrize("sealed", [False, True], ids=["unsealed", "sealed"])
@pytest.mark.parametrize("edit", [*edits_of("memory"), *MALFORMED_PUTS])
def test_a_put_that_does_not_decode_is_named_by_a_read_and_found_by_repair(
    tmp_path: Path, edit: str, sealed: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/format.md: a read checks the put it returns and ``repair`` every record; ``verify``
    checks the checksums, the chain and the seals, so a seal made before the edit names it.
    The read's error said the record was intact when the store opened, which no open checked
    (no open decodes every put)."""
    path = tmp_path / "memory.db"
    with memcommit.open(path) as store:
        store.put("before", kind="fact")
        mid = store.put("hello world", kind="fact", data={"k": "vvvv"}, vector=[1.0, 2.0])
        store.put("after", kind="fact")
        if sealed:
            memcommit.seal(store)
    log = read_log(path)
    rec = next(r for r in log.recs if r.key == mid.encode())
    off, lsn = rec.offset, rec.lsn
    if edit in MALFORMED_PUTS:
        MALFORMED_PUTS[edit](rec)
    else:
        _, old, new = EDITS[edit]
        rec.replace(old, new)
    rec.fix_crc()
    write_log(path, log)
    with memcommit.open(path, read_only=True) as store:
        if sealed:
            with pytest.raises(memcommit.SealMismatch) as mismatch:
                memcommit.verify(store)
            assert mismatch.value.lsn == store.seals()[-1].record_lsn
        with pytest.raises(memcommit.CorruptLog) as err:
            store.get(mid).data  # noqa: B018 (the read is the test)
    assert_names(err.value, path, off, lsn)
    assert "its checksum matches" in str(err.value)
    assert "intact when the store opened" not in str(err.value)
    assert_repair_finds(path, off, capsys)


def test_a_record_that_does_not_apply_is_found_and_cut_by_repair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A status record whose id was changed under a recomputed checksum decodes, but names a
    memory the log never created: the open refuses the log and says `memcommit repair` can
    cut it there, so repair must find it (it said the log was healthy) and cut it, after which
    the store opens with the commits before it."""
    path = tmp_path / "memory.db"
    with memcommit.open(path) as store:
        store.put("kept", id="aaaa")
        store.stale("aaaa")
        store.put("after the damage", id="bbbb")
    log = read_log(path)
    off = log.by_lsn(2).offset
    log.by_lsn(2).replace(b"aaaa", b"zzzz")
    log.by_lsn(2).fix_crc()
    write_log(path, log)
    with pytest.raises(memcommit.CorruptLog) as err:
        memcommit.open(path, read_only=True)
    assert_names(err.value, path, off, 2)
    assert f"memcommit repair {path}" in str(err.value)
    assert_repair_finds(path, off, capsys)
    assert cli.main(["repair", "--yes", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"cut {log.end - off:,} bytes" in out
    with memcommit.open(path, read_only=True) as store:
        assert store.lsn == 1
        kept = store.get("aaaa")
        assert kept is not None and kept.status == "active"
        assert store.get("bbbb") is None
    assert cli.main(["verify", str(path)]) == 0


@pytest.mark.parametrize(
    "content",
    [b"not a log at all, and long enough to hold a header" * 3, b"MEMCMLOG" + b"\x00" * 120],
    ids=["foreign", "header-damaged"],
)
def test_a_writer_refuses_a_file_that_is_not_a_log_and_leaves_nothing_beside_it(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(memcommit.CorruptLog) as err:
        memcommit.open(path)
    assert str(path) in str(err.value)
    assert "will not take over a file it does not recognise" in str(err.value)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
