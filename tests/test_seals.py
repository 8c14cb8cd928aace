"""Seals (SPEC section 7): the API, keyed seals, anchors, AutoSeal, references and tampering.

The tamper suite edits a closed log's bytes the way an attacker with write access would:
it changes, deletes, inserts, swaps and truncates records, recomputes every CRC32C it
touched (and renumbers LSNs where that keeps the log well-formed), so that only the
blake3 hash chain can tell. A tamper counts as caught only when the specific
``IntegrityError`` subclass is raised and it names where: the seal's LSN and byte offset
and ``after_lsn`` for ``SealMismatch``, the offset and LSN for ``CorruptLog``.

Layout of the sealed log most tamper tests start from (fixture ``sealed``): 60 single-record
commits of puts with ids ``m000``..``m059`` and texts ``note 000``..``note 059``, and a
``seal()`` after every 10th, so seals are records 11, 22, 33, 44, 55, 66 covering LSNs
10, 21, 32, 43, 54, 65; put ``i`` has LSN ``i + 1 + i // 10``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import memcommit
from forging import put_unchecked
from logbytes import (
    FLAG_COMMIT_END,
    HEADER_LEN,
    OP_SEAL,
    RECORD_MAGIC,
    Log,
    Rec,
    crc32c,
    parse_log,
    read_log,
    write_log,
)
from memcommit import (
    AutoSeal,
    CorruptLog,
    ForgedReference,
    IntegrityError,
    ReadOnlyStore,
    Seal,
    SealMismatch,
    StoreClosed,
    VerifyReport,
    check_seal,
    seal,
    verify,
)
from memcommit.testing import CLOCK_START as START
from memcommit.testing import ControllableClock

SEAL_PAYLOAD_LEN = 74
HEX = set("0123456789abcdef")

# Positions in the sealed log (module docstring).
N_PUTS = 60
SEAL_EVERY = 10
SEAL_RECORDS = [11, 22, 33, 44, 55, 66]
SEAL_COVERS = [10, 21, 32, 43, 54, 65]


def put_lsn(i: int) -> int:
    return i + 1 + i // SEAL_EVERY


# -- editing log bytes ------------------------------------------------------------------


def renumber(recs: list[Rec], delta: int) -> None:
    """Shift the LSNs of records (and the LSNs seals among them cover), fixing CRCs."""
    for r in recs:
        r.lsn += delta
        if r.op == OP_SEAL:
            r.covers += delta
        r.fix_crc()


def pwrite_all(path: Path | str, offset: int, data: bytes) -> None:
    """Overwrite bytes in place through a file descriptor of our own."""
    fd = os.open(path, os.O_WRONLY)
    try:
        assert os.pwrite(fd, data, offset) == len(data)
    finally:
        os.close(fd)


def open_and_verify(path: Path | str, **kw: Any) -> VerifyReport:
    """Open read-only (which never cuts anything) and verify."""
    with memcommit.open(path, read_only=True) as s:
        return verify(s, **kw)


def open_and_check(path: Path | str, **kw: Any) -> VerifyReport:
    with memcommit.open(path, read_only=True) as s:
        return check_seal(s, **kw)


def build_sealed(path: Path | str, durability: str = "none") -> list[Seal]:
    """Write the sealed log of the module docstring; returns its seals."""
    seals_written = []
    with memcommit.open(path, durability=durability) as s:
        for i in range(N_PUTS):
            s.put(f"note {i:03d}", id=f"m{i:03d}")
            if i % SEAL_EVERY == SEAL_EVERY - 1:
                seals_written.append(seal(s))
    return seals_written


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "m.db"


@pytest.fixture
def sealed(path: Path) -> Iterator[tuple[Path, list[Seal]]]:
    seals_written = build_sealed(path)
    assert [(x.record_lsn, x.lsn) for x in seals_written] == list(
        zip(SEAL_RECORDS, SEAL_COVERS, strict=True)
    )
    yield path, seals_written


def assert_mismatch_at(e: SealMismatch, log: Log, seal_record: int, after: int) -> None:
    """The error names the seal record at LSN `seal_record` and the range after `after`."""
    assert isinstance(e, SealMismatch)
    assert e.lsn == seal_record, str(e)
    assert e.offset == log.by_lsn(seal_record).offset, str(e)
    assert e.after_lsn == after, str(e)
    assert e.path is not None
    assert str(seal_record) in str(e)


def assert_caught_at(
    path: Path | str,
    log: Log,
    seal_record: int,
    after: int,
    check: Callable[..., VerifyReport] = open_and_verify,
    **kw: Any,
) -> SealMismatch:
    """`check` (``open_and_verify`` or ``open_and_check``) of the log at `path` raises
    ``SealMismatch`` naming the seal at LSN `seal_record` (``assert_mismatch_at``)."""
    with pytest.raises(SealMismatch) as ei:
        check(path, **kw)
    assert_mismatch_at(ei.value, log, seal_record, after)
    return ei.value


# -- the helpers themselves --------------------------------------------------------------


def test_crc32c_and_parser_match_a_real_log(sealed: tuple[Path, list[Seal]]) -> None:
    path, _ = sealed
    assert crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value
    data = path.read_bytes()
    log = parse_log(data)
    # The header's own CRC covers bytes 0..60.
    assert crc32c(log.header[:60]) == int.from_bytes(log.header[60:64], "little")
    assert log.end == len(data)  # a closed log has no tail
    assert [r.lsn for r in log.recs] == list(range(1, 67))
    for r in log.recs:
        assert r.crc == crc32c(r.data[:-4])
        assert r.flags == FLAG_COMMIT_END
        assert int.from_bytes(r.data[:2], "little") == RECORD_MAGIC
        assert int.from_bytes(r.data[4:8], "little") == int.from_bytes(log.header[16:20], "little")
    assert [r.lsn for r in log.recs if r.op == OP_SEAL] == SEAL_RECORDS
    assert [r.covers for r in log.recs if r.op == OP_SEAL] == SEAL_COVERS
    assert all(len(r.payload) == SEAL_PAYLOAD_LEN for r in log.recs if r.op == OP_SEAL)
    with memcommit.open(path, read_only=True) as s:
        records = list(s.records())
        assert [r.raw() for r in records] == [bytes(r.data) for r in log.recs]
        assert [x.record_lsn for x in s.seals()] == SEAL_RECORDS
    # Writing the parse back reproduces the file byte for byte.
    copy = path.with_name("copy.db")
    write_log(copy, log)
    assert copy.read_bytes() == data


# -- 1. the API --------------------------------------------------------------------------


def test_seal_fields_on_a_memory_store(clock: ControllableClock) -> None:
    store = memcommit.create_memory_store(clock=clock)
    for i in range(3):
        store.put(f"note {i}")
    clock.advance(1_500)
    before = store.lsn
    s = seal(store)
    assert isinstance(s, Seal)
    assert s.lsn == before == 3
    assert s.record_lsn == before + 1 == store.lsn
    assert len(s.hash) == 64 and set(s.hash) <= HEX
    assert s.at == START + timedelta(milliseconds=1_500) == clock.now()
    assert s.keyed is False
    assert s.store_id == store.store_id
    assert s.generation == store.generation == 0
    store.put("after")
    clock.advance(2_000)
    s2 = seal(store)
    assert (s2.lsn, s2.record_lsn) == (5, 6)
    assert s2.at == START + timedelta(milliseconds=3_500)
    assert s2.hash != s.hash
    assert store.seals() == [s, s2]
    assert memcommit.seals.seals(store) == [s, s2]
    r = verify(store)
    assert (r.ok, r.seals_checked, r.records_checked, r.lsn) == (True, 2, 6, 6)


def test_a_store_in_ram_seals_and_refuses_only_what_needs_a_file(tmp_path: Path) -> None:
    # A store in RAM keeps the same hash-chained log in memory: sealing and verifying it is
    # supported (a test can check its chain); what needs a log file raises NotSupported.
    from memcommit.storage import compact

    store = memcommit.open(":memory:")
    store.put("a", id="a")
    anchor = seal(store, key=b"secret")
    store.put("b", id="b", sources=("a",))
    with AutoSeal(store, every=1):
        store.put("c")
    assert check_seal(store).seal == store.seals()[-1]
    r = verify(store, key=b"secret", anchors=[anchor.to_json()])
    assert (r.ok, r.seals_checked, r.anchors_checked) == (True, len(store.seals()), 1)
    assert len(store.seals()) == 2
    for call, name in (
        (lambda: memcommit.open(":memory:", read_only=True), "read_only"),
        (lambda: memcommit.open(":memory:", snapshot=tmp_path / "s.json"), "snapshot"),
        (lambda: store.save_snapshot(tmp_path / "s.json"), "save_snapshot"),
        (lambda: compact(store), "compact"),
    ):
        with pytest.raises(memcommit.NotSupported, match=f"^{name}: a store in RAM"):
            call()
    assert list(tmp_path.iterdir()) == []
    assert not store.read_only and len(store) == 3


def test_seal_on_a_file_store_and_across_reopen(path: Path, clock: ControllableClock) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        assert store.seals() == []
        ids = [store.put(f"note {i}") for i in range(4)]
        s1 = seal(store)
        assert (s1.lsn, s1.record_lsn) == (4, 5)
        assert s1.at == clock.now()
        store.stale(ids[0])
        clock.advance(10)
        s2 = seal(store)
        assert (s2.lsn, s2.record_lsn) == (6, 7)
        seal_recs = [r for r in store.records() if r.op == "seal"]
        assert [r.lsn for r in seal_recs] == [5, 7]
        assert seal_recs[0].key == ""
        assert seal_recs[0].fields["lsn"] == 4
        assert seal_recs[0].fields["hash"] == s1.hash
        assert seal_recs[0].fields["keyed"] is False
        assert seal_recs[1].at == s2.at
        # A seal changes no memory.
        assert len(store) == 4
        assert store.get(ids[1]).text == "note 1"
    with memcommit.open(path, durability="none") as store:
        assert store.seals() == [s1, s2]
        assert store.lsn == 7
        s3 = seal(store)
        assert (s3.lsn, s3.record_lsn) == (7, 8)
    with memcommit.open(path, read_only=True) as ro:
        assert ro.seals() == [s1, s2, s3]
        assert [r.lsn for r in ro.records() if r.op == "seal"] == [5, 7, 8]


def test_verify_and_check_seal_reports(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        assert verify(store).seals_checked == 0
        for i in range(5):
            store.put(f"note {i}")
        s1 = seal(store)  # record 6
        for i in range(3):
            store.put(f"more {i}")  # 7, 8, 9
        s2 = seal(store)  # record 10
        store.put("unsealed")  # 11
        store.flush()
        log = read_log(path)
        assert log.end == store.info()["bytes"]
        r = verify(store)
        assert isinstance(r, VerifyReport)
        assert r.ok is True
        assert r.seals_checked == 2
        assert r.records_checked == 11 == store.lsn
        assert r.bytes_checked == log.end - HEADER_LEN
        assert r.lsn == 11
        assert len(r.chain) == 64 and set(r.chain) <= HEX
        assert (r.keyed_unchecked, r.anchors_checked, r.seal) == (0, 0, None)
        c = check_seal(store)
        assert c.ok is True
        assert c.seal == s2
        # s2, and possibly s1, whose record (LSN 6) lies in the range rehashed and whose value
        # is the check's starting point.
        assert c.seals_checked in (1, 2)
        # From the record after s1's covered LSN through s2's own record: LSNs 6..10.
        assert c.records_checked == s2.record_lsn - s1.lsn == 5
        assert c.bytes_checked == sum(len(log.by_lsn(n).data) for n in range(6, 11))
        assert c.lsn == s2.record_lsn
    with memcommit.open(path, read_only=True) as ro:
        assert verify(ro).records_checked == 11
        assert check_seal(ro).seal == s2


def test_verify_of_a_large_log_holds_what_it_checks_not_all_it_has_checked(
    tmp_path: Path,
) -> None:
    # verify reads a log in a file through a mapping; the pages of what it has checked are let
    # go as it goes, so its resident memory does not grow with the log. Measured in a process
    # of its own: the peak RSS it adds, against the log's size.
    path = tmp_path / "big.db"
    with memcommit.open(path, durability="none") as store:
        for _ in range(6):
            with store.commit() as c:
                c.put_many(["z" * (1 << 20)] * 32)
    size = path.stat().st_size
    child = textwrap.dedent(
        f"""
        import resource, memcommit
        with memcommit.open({str(path)!r}, read_only=True) as store:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            report = memcommit.verify(store)
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(report.bytes_checked, (after - before) * 1024)
        """
    )
    out = subprocess.run([sys.executable, "-c", child], check=True, capture_output=True, text=True)
    checked, added = map(int, out.stdout.split())
    assert checked > 190 << 20 and checked <= size
    assert added < size // 3, f"verify of {size:,} bytes added {added:,} bytes of RSS"


def test_check_seal_with_a_single_seal_starts_from_the_header(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        for i in range(4):
            store.put(f"note {i}")
        s = seal(store)
        r = check_seal(store)
        assert r.seal == s
        assert (r.seals_checked, r.records_checked, r.lsn) == (1, 5, 5)


def test_check_seal_without_a_seal_raises_value_error(path: Path) -> None:
    store = memcommit.create_memory_store()
    with pytest.raises(ValueError, match="no seal"):
        check_seal(store)
    store.put("x")
    with pytest.raises(ValueError, match="no seal"):
        check_seal(store)
    with memcommit.open(path, durability="none") as fs:
        fs.put("x")
        with pytest.raises(ValueError, match="no seal"):
            check_seal(fs)


def test_seal_on_a_read_only_store_raises(path: Path) -> None:
    with memcommit.open(path, durability="none") as w:
        w.put("x")
        with memcommit.open(path, read_only=True) as ro:
            with pytest.raises(ReadOnlyStore):
                seal(ro)
            with pytest.raises(ReadOnlyStore):
                AutoSeal(ro, every=2)
            assert ro.auto_seal is None
            assert ro.seals() == []
            # Reading the seals is fine.
            s = seal(w)
            ro.refresh()
            assert ro.seals() == [s]
            assert verify(ro).seals_checked == 1
            assert check_seal(ro).seal == s


def test_seal_argument_errors(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        store.put("x")
        for bad in (123, bytearray(b"k"), ["k"], 1.5):
            with pytest.raises(TypeError, match="key"):
                seal(store, key=bad)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="key"):
                verify(store, key=bad)  # type: ignore[arg-type]
        for empty in (b"", ""):
            with pytest.raises(ValueError, match="key"):
                seal(store, key=empty)
        with pytest.raises(TypeError, match="MemoryStore"):
            seal("not a store")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="MemoryStore"):
            verify(None)  # type: ignore[arg-type]
        # Nothing was written by the refused calls.
        assert store.lsn == 1
        assert store.seals() == []
    with pytest.raises(StoreClosed):
        seal(store)
    with pytest.raises(StoreClosed):
        verify(store)


# -- 2. keyed seals ----------------------------------------------------------------------

KEY = b"k" * 32


def test_keyed_seals(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        for i in range(3):
            store.put(f"note {i}")
        plain = seal(store)  # record 4
        store.put("more")  # 5
        keyed = seal(store, key=KEY)  # record 6
        assert keyed.keyed is True and plain.keyed is False
        assert len(keyed.hash) == 64 and set(keyed.hash) <= HEX
        assert store.seals() == [plain, keyed]

        r = verify(store, key=KEY)
        assert (r.seals_checked, r.keyed_unchecked) == (2, 0)
        r = verify(store)
        assert r.ok is True
        assert (r.seals_checked, r.keyed_unchecked) == (1, 1)

        with pytest.raises(SealMismatch) as ei:
            verify(store, key=b"wrong key")
        assert ei.value.lsn == keyed.record_lsn
        assert ei.value.after_lsn == plain.lsn
        assert str(keyed.record_lsn) in str(ei.value)

        with pytest.raises(ValueError, match="keyed"):
            check_seal(store)
        c = check_seal(store, key=KEY)
        assert c.seal == keyed and c.seals_checked in (1, 2)
        assert c.keyed_unchecked == 0
        with pytest.raises(SealMismatch) as ei:
            check_seal(store, key=b"wrong key")
        assert ei.value.lsn == keyed.record_lsn

        # A newer seal under another key (a str key).
        store.put("later")
        ks = seal(store, key="sécret")
        with pytest.raises(SealMismatch):
            check_seal(store, key=KEY)
    with memcommit.open(path, read_only=True) as ro:
        assert [x.keyed for x in ro.seals()] == [False, True, True]
        # Without the key the chain values are still checked.
        r = verify(ro)
        assert (r.ok, r.seals_checked, r.keyed_unchecked) == (True, 1, 2)
        # One key cannot check seals made under two different keys.
        with pytest.raises(SealMismatch) as ei:
            verify(ro, key=KEY)
        assert ei.value.lsn == ks.record_lsn
        assert ei.value.after_lsn == keyed.lsn


def test_check_seal_after_a_key_change(path: Path) -> None:
    """check_seal rechecks the newest seal with the newest seal's key, even when the seal
    before it (where the check starts) was made under another key."""
    with memcommit.open(path, durability="none") as store:
        for i in range(3):
            store.put(f"note {i}")
        old = seal(store, key=KEY)
        store.put("more")
        new = seal(store, key="sécret")
        assert check_seal(store, key="sécret".encode()).seal == new
        assert check_seal(store, key="sécret").seal == new
        with pytest.raises(SealMismatch) as ei:
            check_seal(store, key=KEY)
        assert ei.value.lsn == new.record_lsn
        assert ei.value.after_lsn == old.lsn


def test_tampered_mac_of_a_keyed_seal(tmp_path: Path) -> None:
    p = tmp_path / "k.db"
    with memcommit.open(p, durability="none") as store:
        for i in range(4):
            store.put(f"note {i}")
        k = seal(store, key=KEY)
    log = read_log(p)
    rec = log.by_lsn(k.record_lsn)
    mac_at = rec.payload_start + 42
    rec.data[mac_at] ^= 0x01
    rec.fix_crc()
    write_log(p, log)
    assert_caught_at(p, log, k.record_lsn, 0, key=KEY)
    with pytest.raises(SealMismatch):
        open_and_check(p, key=KEY)
    # Without the key the keyed hash cannot be checked, but the chain value still is:
    # a changed record in a keyed log is caught without the key.
    assert open_and_verify(p).keyed_unchecked == 1
    log = read_log(p)
    log.by_lsn(k.record_lsn).data[mac_at] ^= 0x01
    log.by_lsn(k.record_lsn).fix_crc()
    log.by_lsn(2).replace(b"note 1", b"note X")
    log.by_lsn(2).fix_crc()
    write_log(p, log)
    assert_caught_at(p, log, k.record_lsn, 0)


# -- 3. anchors --------------------------------------------------------------------------


def test_anchor_json_round_trip(sealed: tuple[Path, list[Seal]]) -> None:
    path, seals_written = sealed
    s = seals_written[2]
    text = s.to_json()
    d = json.loads(text)
    assert d["memcommit_seal"] == 1
    assert (d["lsn"], d["record_lsn"], d["hash"], d["keyed"]) == (32, 33, s.hash, False)
    assert d["store_id"] == s.store_id and d["generation"] == 0
    assert Seal.from_json(text) == s
    assert Seal.from_json(text.encode()) == s
    assert Seal.from_json(d) == s
    # Another tool may write the time with a Z for UTC (as JavaScript does): the same seal,
    # on Python 3.10 too, whose fromisoformat refuses the Z.
    zulu = {**d, "at": d["at"].replace("+00:00", "Z")}
    assert zulu["at"].endswith("Z") and Seal.from_json(zulu) == s
    r = open_and_verify(path, anchors=[text])
    assert (r.ok, r.anchors_checked, r.seals_checked) == (True, 1, 6)
    r = open_and_verify(path, anchors=[x.to_json() for x in seals_written] + [s])
    assert r.anchors_checked == 7


@pytest.mark.parametrize(
    "bad",
    [
        "not json",
        "[]",
        "null",
        "{}",
        '{"memcommit_seal": 2}',
        "MISSING_HASH",
        "UPPER_HASH",
        "SHORT_HASH",
        "NEGATIVE_LSN",
        "BOOL_LSN",
        "BAD_AT",
    ],
)
def test_malformed_anchor_raises_value_error(sealed: tuple[Path, list[Seal]], bad: str) -> None:
    path, seals_written = sealed
    d = json.loads(seals_written[0].to_json())
    if bad == "MISSING_HASH":
        del d["hash"]
    elif bad == "UPPER_HASH":
        d["hash"] = d["hash"].upper()
    elif bad == "SHORT_HASH":
        d["hash"] = d["hash"][:-2]
    elif bad == "NEGATIVE_LSN":
        d["lsn"] = -1
    elif bad == "BOOL_LSN":
        d["lsn"] = True
    elif bad == "BAD_AT":
        d["at"] = "yesterday"
    text = json.dumps(d) if bad.isupper() else bad
    with pytest.raises(ValueError, match="anchor"):
        Seal.from_json(text)
    with pytest.raises(ValueError, match="anchor"):
        open_and_verify(path, anchors=[text])


def test_anchor_catches_a_whole_file_rewrite(path: Path) -> None:
    """A new store written at the same path, with the same content and its own seals."""
    with memcommit.open(path, durability="none") as store:
        for i in range(5):
            store.put(f"note {i}", id=f"m{i}")
        anchor = seal(store).to_json()
        old_id = store.store_id
    path.unlink()
    with memcommit.open(path, durability="none") as store:
        for i in range(5):
            store.put(f"note {i}", id=f"m{i}")
        forged = seal(store)
        assert store.store_id != old_id
        # The log is self-consistent: only the anchor can tell.
        assert verify(store).seals_checked == 1
        assert (forged.lsn, forged.record_lsn) == (5, 6)
        with pytest.raises(SealMismatch) as ei:
            verify(store, anchors=[anchor])
        assert ei.value.lsn in (5, 6)
        assert "5" in str(ei.value) and old_id in str(ei.value)


def test_anchor_catches_a_change_whose_seals_were_dropped(
    sealed: tuple[Path, list[Seal]],
) -> None:
    """A record changed and every seal after it cut off: the log is consistent on its own
    (no seal left to disagree), only an anchor kept elsewhere tells."""
    path, seals_written = sealed
    log = read_log(path)
    log.by_lsn(put_lsn(3)).replace(b"note 003", b"NOTE 003")
    log.by_lsn(put_lsn(3)).fix_crc()
    keep = [r for r in log.recs if r.lsn < SEAL_RECORDS[0]]
    log.recs = keep
    write_log(path, log)
    assert open_and_verify(path).seals_checked == 0
    with pytest.raises(SealMismatch) as ei:
        open_and_verify(path, anchors=[seals_written[0].to_json()])
    assert ei.value.lsn in (SEAL_COVERS[0], SEAL_RECORDS[0])


def test_anchor_catches_a_rollback(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        for i in range(5):
            store.put(f"note {i}")
        s1 = seal(store)
    backup = path.with_name("backup.db")
    shutil.copyfile(path, backup)
    with memcommit.open(path, durability="none") as store:
        for i in range(5):
            store.put(f"later {i}")
        s2 = seal(store)
        r = verify(store, anchors=[s1.to_json(), s2.to_json()])
        assert r.anchors_checked == 2
        anchor2 = s2.to_json()
    shutil.copyfile(backup, path)
    with memcommit.open(path, durability="none") as store:
        assert store.lsn == s1.record_lsn
        assert store.seals() == [s1]
        # The rolled-back log is valid on its own, and still holds the older anchor.
        assert verify(store).seals_checked == 1
        assert verify(store, anchors=[s1.to_json()]).anchors_checked == 1
        with pytest.raises(SealMismatch) as ei:
            verify(store, anchors=[anchor2])
        assert ei.value.lsn in (s2.lsn, s2.record_lsn)
        assert str(s2.lsn) in str(ei.value)


def test_anchor_with_a_different_hash_or_generation(sealed: tuple[Path, list[Seal]]) -> None:
    path, seals_written = sealed
    d = json.loads(seals_written[1].to_json())
    wrong_hash = dict(d, hash=("0" if d["hash"][0] != "0" else "1") + d["hash"][1:])
    wrong_gen = dict(d, generation=1)
    wrong_keyed = dict(d, keyed=True)
    wrong_lsn = dict(d, lsn=d["lsn"] - 1)
    for bad in (wrong_hash, wrong_gen, wrong_keyed, wrong_lsn):
        with pytest.raises(SealMismatch):
            open_and_verify(path, anchors=[json.dumps(bad)])


# -- 4. AutoSeal -------------------------------------------------------------------------


def test_auto_seal_every_n_single_record_commits(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        with AutoSeal(store, every=5) as auto:
            assert auto.every == 5
            for i in range(23):
                store.put(f"note {i}")
        assert store.auto_seal is None
        got = store.seals()
        # After puts 1..5 a seal is record 6, then every 6th record.
        assert [x.record_lsn for x in got] == [6, 12, 18, 24]
        for x in got:
            assert x.lsn in (x.record_lsn - 1, x.record_lsn - 2)
            assert not x.keyed
        assert store.lsn == 23 + 4
        r = verify(store)
        assert r.seals_checked == 4 and r.records_checked == store.lsn
        assert check_seal(store).seal == got[-1]
        # Detached: no more seals.
        for i in range(12):
            store.put(f"after {i}")
        assert len(store.seals()) == 4
    with memcommit.open(path, read_only=True) as ro:
        assert verify(ro).seals_checked == 4


def test_auto_seal_on_a_memory_store_with_a_key(clock: ControllableClock) -> None:
    store = memcommit.create_memory_store(clock=clock)
    auto = AutoSeal(store, every=3, key=KEY)
    for i in range(9):
        clock.advance(1)
        store.put(f"note {i}")
    auto.close()
    got = store.seals()
    assert [x.record_lsn for x in got] == [4, 8, 12]
    assert all(x.keyed for x in got)
    assert got[0].at == START + timedelta(milliseconds=3)
    r = verify(store, key=KEY)
    assert (r.seals_checked, r.keyed_unchecked) == (3, 0)
    assert verify(store).keyed_unchecked == 3
    with pytest.raises(SealMismatch):
        verify(store, key=b"other")


def test_only_one_auto_seal_per_store(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        first = AutoSeal(store, every=4)
        with pytest.raises(ValueError, match="already"):
            AutoSeal(store, every=2)
        assert store.auto_seal is first
        for i in range(4):
            store.put(f"note {i}")
        assert [x.record_lsn for x in store.seals()] == [5]
        first.close()
        first.close()  # idempotent
        second = AutoSeal(store, every=2)
        for i in range(2):
            store.put(f"more {i}")
        assert [x.record_lsn for x in store.seals()] == [5, 8]
        first.close()  # closing a detached AutoSeal leaves the attached one alone
        assert store.auto_seal is second
        store.put("x")
        store.put("y")
        assert [x.record_lsn for x in store.seals()] == [5, 8, 11]
        second.close()
        for bad in (0, -1, True, "5", 2.0):
            with pytest.raises(ValueError, match="every"):
                AutoSeal(store, every=bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            AutoSeal("store", every=2)  # type: ignore[arg-type]
        assert store.auto_seal is None


def test_auto_seal_stops_when_closed_and_is_not_persisted(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        auto = AutoSeal(store, every=2)
        for i in range(4):
            store.put(f"note {i}")
        assert len(store.seals()) == 2
        auto.close()
        for i in range(10):
            store.put(f"more {i}")
        assert len(store.seals()) == 2
        auto = AutoSeal(store, every=2)
    auto.close()  # after the store closed: harmless
    with memcommit.open(path, durability="none") as store:
        for i in range(10):
            store.put(f"reopened {i}")
        assert len(store.seals()) == 2
        assert verify(store).seals_checked == 2


def test_auto_seal_after_batched_commits(path: Path) -> None:
    with memcommit.open(path, durability="none") as store, AutoSeal(store, every=5):
        ends = []
        for n in range(8):
            with store.commit() as c:
                for j in range(3):
                    c.put(f"batch {n} item {j}")
            ends.append(c.lsn)
        got = store.seals()
        # Commits of 3: a seal follows the 2nd, 4th, 6th and 8th commit.
        assert ends == [3, 6, 10, 13, 17, 20, 24, 27]
        assert [x.record_lsn for x in got] == [7, 14, 21, 28]
        recs = {r.lsn: r for r in store.records()}
        for x in got:
            # Never inside a commit: the record before the seal ends a commit, and the seal
            # covers the end of one of the two commits before it.
            assert x.record_lsn - 1 in ends
            assert x.lsn in (x.record_lsn - 1, x.record_lsn - 4)
            assert recs[x.record_lsn].op == "seal"
        assert verify(store).seals_checked == 4
        # One big commit that crosses the threshold twice still gets one seal, after it.
        with store.commit() as c:
            for j in range(12):
                c.put(f"big {j}")
        got = store.seals()
        assert len(got) == 5
        assert got[-1].record_lsn == store.lsn == 28 + 12 + 1
        assert got[-1].lsn in (40, 28)
        assert verify(store).seals_checked == 5
    raw = read_log(path)
    for r in raw.recs:
        if r.op == OP_SEAL:
            assert raw.by_lsn(r.lsn - 1).flags & FLAG_COMMIT_END


# -- 5. the tamper suite -----------------------------------------------------------------


@pytest.mark.parametrize("index", [4, 25, 58])
def test_tamper_changed_text_with_fixed_crc(sealed: tuple[Path, list[Seal]], index: int) -> None:
    path, _ = sealed
    changed = put_lsn(index)
    log = read_log(path)
    rec = log.by_lsn(changed)
    rec.replace(f"note {index:03d}".encode(), f"nOte {index:03d}".encode())
    rec.fix_crc()
    write_log(path, log)
    # The forgery is well-formed: the store opens and serves the forged text.
    with memcommit.open(path, read_only=True) as ro:
        assert ro.get(f"m{index:03d}").text == f"nOte {index:03d}"
    k = next(i for i, c in enumerate(SEAL_COVERS) if c >= changed)
    e = assert_caught_at(path, log, SEAL_RECORDS[k], SEAL_COVERS[k - 1] if k else 0)
    assert e.after_lsn is not None and e.lsn is not None
    assert e.after_lsn < changed <= e.lsn
    # check_seal rechecks only the newest seal from the one before it (covering LSN 54).
    if changed > SEAL_COVERS[-2]:
        assert_caught_at(path, log, SEAL_RECORDS[-1], SEAL_COVERS[-2], open_and_check)
    else:
        r = open_and_check(path)  # the cheap check's scope: it cannot see this change
        assert r.ok and r.seal is not None and r.seal.record_lsn == SEAL_RECORDS[-1]
        assert r.records_checked == SEAL_RECORDS[-1] - SEAL_COVERS[-2]


@pytest.mark.parametrize("index", [4, 58])
def test_tamper_in_place_while_the_writer_is_open(path: Path, index: int) -> None:
    with memcommit.open(path, durability="none") as store:
        for i in range(N_PUTS):
            store.put(f"note {i:03d}", id=f"m{i:03d}")
            if i % SEAL_EVERY == SEAL_EVERY - 1:
                seal(store)
        store.flush()
        assert verify(store).seals_checked == 6
        log = read_log(path)
        changed = put_lsn(index)
        rec = log.by_lsn(changed)
        rec.replace(f"note {index:03d}".encode(), f"note {index:03d}"[::-1].encode())
        rec.fix_crc()
        pwrite_all(path, rec.offset, bytes(rec.data))
        with pytest.raises(SealMismatch) as ei:
            verify(store)
        k = next(i for i, c in enumerate(SEAL_COVERS) if c >= changed)
        assert_mismatch_at(ei.value, log, SEAL_RECORDS[k], SEAL_COVERS[k - 1] if k else 0)
        if changed > SEAL_COVERS[-2]:
            with pytest.raises(SealMismatch):
                check_seal(store)
        else:
            assert check_seal(store).ok
        # A seal's chain field rewritten in place is caught too.
        srec = log.by_lsn(SEAL_RECORDS[-1])
        srec.data[srec.chain_span().start] ^= 0xFF
        srec.fix_crc()
        pwrite_all(path, srec.offset, bytes(srec.data))
        with pytest.raises(SealMismatch) as ci:
            check_seal(store)
        assert ci.value.lsn == SEAL_RECORDS[-1]


def test_tamper_deleted_record(sealed: tuple[Path, list[Seal]]) -> None:
    path, _ = sealed
    log = read_log(path)
    gone = put_lsn(13)  # LSN 15
    at = log.index(gone)
    offset = log.recs[at].offset
    del log.recs[at]
    write_log(path, log)
    with pytest.raises(CorruptLog) as ei:
        open_and_verify(path)
    e = ei.value
    assert e.offset == offset  # where LSN 16 now sits, in place of 15
    assert e.lsn == gone
    assert str(gone) in str(e)
    assert isinstance(e, IntegrityError)


def test_tamper_deleted_record_with_later_lsns_renumbered(
    sealed: tuple[Path, list[Seal]],
) -> None:
    path, _ = sealed
    log = read_log(path)
    gone = put_lsn(13)  # LSN 15, between the seals at 11 and 22
    at = log.index(gone)
    del log.recs[at]
    renumber(log.recs[at:], -1)
    write_log(path, log)
    with memcommit.open(path, read_only=True) as ro:
        assert ro.lsn == 65
        assert "m013" not in ro
    # The seal that was record 22 (covering 21) is now record 21, covering 20.
    e = assert_caught_at(path, log, 21, 10)
    assert e.after_lsn is not None and e.after_lsn < gone


def test_tamper_inserted_forged_record(sealed: tuple[Path, list[Seal]]) -> None:
    path, _ = sealed
    log = read_log(path)
    src = log.by_lsn(put_lsn(12))  # LSN 14
    forged = Rec(0, bytearray(src.data))
    forged.replace(b"m012", b"m999")
    forged.replace(b"note 012", b"FORGERY!")
    at = log.index(src.lsn) + 1
    renumber(log.recs[at:], +1)
    forged.lsn = src.lsn + 1
    forged.fix_crc()
    log.recs.insert(at, forged)
    write_log(path, log)
    with memcommit.open(path, read_only=True) as ro:
        assert ro.get("m999").text == "FORGERY!"
        assert ro.lsn == 67
    assert_caught_at(path, log, 23, 10)


def test_tamper_swapped_records(sealed: tuple[Path, list[Seal]]) -> None:
    path, _ = sealed
    log = read_log(path)
    a, b = log.index(14), log.index(17)
    ra, rb = log.recs[a], log.recs[b]
    ra.lsn, rb.lsn = 17, 14
    ra.fix_crc()
    rb.fix_crc()
    log.recs[a], log.recs[b] = rb, ra
    write_log(path, log)
    with memcommit.open(path, read_only=True) as ro:
        assert [r.lsn for r in ro.records()] == list(range(1, 67))
    assert_caught_at(path, log, 22, 10)


def test_tamper_forged_middle_with_matching_endpoints(sealed: tuple[Path, list[Seal]]) -> None:
    """Records 13..18 changed; record 12 (just after the seal at 11), record 21 (the last
    the seal at 22 covers) and every seal are untouched."""
    path, _ = sealed
    original = read_log(path)
    log = read_log(path)
    for i in range(SEAL_EVERY):
        lsn = put_lsn(i + 10)
        if 13 <= lsn <= 18:
            rec = log.by_lsn(lsn)
            rec.replace(f"note {i + 10:03d}".encode(), f"edit {i + 10:03d}".encode())
            rec.fix_crc()
    write_log(path, log)
    changed = [r.lsn for r, o in zip(log.recs, original.recs, strict=True) if r.data != o.data]
    assert changed == [13, 14, 15, 16, 17, 18]
    assert_caught_at(path, log, 22, 10)
    assert open_and_check(path).ok  # outside the newest seal's range


def test_tamper_record_time_with_fixed_crc(sealed: tuple[Path, list[Seal]]) -> None:
    path, _ = sealed
    log = read_log(path)
    rec = log.by_lsn(30)
    at = int.from_bytes(rec.data[16:24], "little", signed=True)
    rec.data[16:24] = (at - 3_600_000_000).to_bytes(8, "little", signed=True)
    rec.fix_crc()
    write_log(path, log)
    assert_caught_at(path, log, 33, 21)


def test_tamper_seal_covered_lsn(sealed: tuple[Path, list[Seal]]) -> None:
    """A seal made to claim it covers the LSN before the one it does (chain value kept)."""
    path, _ = sealed
    log = read_log(path)
    rec = log.by_lsn(33)
    rec.covers = 31
    rec.fix_crc()
    write_log(path, log)
    with memcommit.open(path, read_only=True) as ro:
        assert ro.seals()[2].lsn == 31
    assert_caught_at(path, log, 33, 21)


def test_tamper_seal_chain_field(sealed: tuple[Path, list[Seal]]) -> None:
    path, seals_written = sealed
    log = read_log(path)
    rec = log.by_lsn(33)
    span = rec.chain_span()
    rec.data[span] = bytes(32)
    rec.fix_crc()
    write_log(path, log)
    with memcommit.open(path, read_only=True) as ro:
        assert ro.seals()[2].hash == "0" * 64 != seals_written[2].hash
    assert_caught_at(path, log, 33, 21)
    # The seals before it are unchanged.
    with memcommit.open(path, read_only=True) as ro:
        assert ro.seals()[:2] == seals_written[:2]


def test_tamper_newest_seal_chain_field_caught_by_check_seal(
    sealed: tuple[Path, list[Seal]],
) -> None:
    path, _ = sealed
    log = read_log(path)
    rec = log.by_lsn(66)
    rec.data[rec.chain_span().stop - 1] ^= 0x80
    rec.fix_crc()
    write_log(path, log)
    assert_caught_at(path, log, 66, 54, open_and_check)
    assert_caught_at(path, log, 66, 54)


@pytest.mark.parametrize("byte", [20, 27, 31])
def test_tamper_header_store_id(sealed: tuple[Path, list[Seal]], byte: int) -> None:
    """Store id bytes after the first four (which are every record's salt), header CRC fixed:
    the chain's start changes, so the first seal disagrees."""
    path, _ = sealed
    log = read_log(path)
    log.header[byte] ^= 0x5A
    log.header[60:64] = crc32c(log.header[:60]).to_bytes(4, "little")
    write_log(path, log)
    with memcommit.open(path, read_only=True) as ro:
        assert ro.lsn == 66
    assert_caught_at(path, log, 11, 0)
    # check_seal starts from the previous seal's stored chain, so the header is out of its
    # scope; with only one seal it starts from the header and catches the change.
    assert open_and_check(path).ok
    log.recs = [r for r in log.recs if r.lsn <= SEAL_RECORDS[0]]
    write_log(path, log)
    assert_caught_at(path, log, 11, 0, open_and_check)


def test_tamper_header_store_id_without_crc_fix(sealed: tuple[Path, list[Seal]]) -> None:
    path, _ = sealed
    data = bytearray(path.read_bytes())
    data[24] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptLog) as ei:
        open_and_verify(path)
    assert ei.value.offset == 0


def test_tamper_record_without_crc_fix(sealed: tuple[Path, list[Seal]]) -> None:
    path, _ = sealed
    log = read_log(path)
    rec = log.by_lsn(27)
    rec.replace(b"note 024", b"note 999")
    write_log(path, log)
    with pytest.raises(CorruptLog) as ei:
        open_and_verify(path)
    assert ei.value.offset == rec.offset
    assert ei.value.lsn == 27


def test_tamper_without_crc_fix_while_the_writer_is_open(
    sealed: tuple[Path, list[Seal]],
) -> None:
    path, _ = sealed
    with memcommit.open(path, durability="none") as store:
        log = read_log(path)
        rec = log.by_lsn(60)  # after the previous seal, so check_seal reads it too
        rec.replace(b"note 054", b"note 999")
        pwrite_all(path, rec.offset, bytes(rec.data))
        for fn in (verify, check_seal):
            with pytest.raises(CorruptLog) as ei:
                fn(store)
            assert (ei.value.offset, ei.value.lsn) == (rec.offset, 60), str(ei.value)
            assert str(rec.offset) in str(ei.value)


_TRUNCATE_UNDER_WRITER = textwrap.dedent(
    """
    import json, os, sys
    import memcommit
    from memcommit import IntegrityError, check_seal, seal, verify

    path, cut = sys.argv[1], int(sys.argv[2])
    out = {}
    with memcommit.open(path, durability="none") as store:
        for i in range(60):
            store.put(f"note {i:03d}", id=f"m{i:03d}")
            if i % 10 == 9:
                seal(store)
        store.flush()
        end = store.info()["bytes"]
        os.truncate(path, cut)
        for name, fn in (("verify", verify), ("check_seal", check_seal)):
            try:
                fn(store)
                out[name] = ["ok"]
            except IntegrityError as e:
                out[name] = [type(e).__name__, getattr(e, "offset", None),
                             getattr(e, "lsn", None), str(e)]
        out["end"] = end
    print(json.dumps(out))
    """
)


@pytest.mark.parametrize("where", ["inside", "boundary"])
def test_tamper_truncated_under_the_writer(
    sealed: tuple[Path, list[Seal]], tmp_path: Path, where: str
) -> None:
    """The log cut inside the sealed range while the writer has it open: verify must raise
    CorruptLog (the log ends inside the checked range). Run in a child so a hang fails."""
    ref, _ = sealed
    log = read_log(ref)
    rec = log.by_lsn(50)
    cut = rec.offset + (20 if where == "inside" else 0)
    p = tmp_path / "t.db"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _TRUNCATE_UNDER_WRITER, str(p), str(cut)],
            capture_output=True,
            text=True,
            timeout=6,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"verify(store) did not return within 6 s after the log file was truncated to "
            f"{cut} bytes ({where} the record of LSN 50) under the open writer: it hangs "
            "instead of raising CorruptLog"
        )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["end"] == log.end
    # Both find the log ending where LSN 50 should be: check_seal, looking for the record
    # after the previous seal (which covers 54), reads up to it and finds the file ends first.
    for name, (at, lsn) in (("verify", (rec.offset, 50)), ("check_seal", (rec.offset, 50))):
        kind, offset, got_lsn, message = out[name]
        assert kind == "CorruptLog", (name, out)
        assert (offset, got_lsn) == (at, lsn), (name, out)
        assert str(lsn) in message, (name, out)


def test_tamper_truncated_then_reopened(sealed: tuple[Path, list[Seal]]) -> None:
    """The writer's open cuts the torn tail at a record boundary; the log then verifies on
    its own, but an anchor of a seal it lost cannot be found."""
    path, seals_written = sealed
    log = read_log(path)
    rec = log.by_lsn(50)
    os.truncate(path, rec.offset + 20)
    with memcommit.open(path, durability="none") as store:
        assert store.recovered_bytes == 20
        assert store.lsn == 49
        assert store.seals() == seals_written[:4]
        r = verify(store)
        assert (r.seals_checked, r.records_checked) == (4, 49)
        assert verify(store, anchors=[seals_written[3].to_json()]).anchors_checked == 1
        for lost in seals_written[4:]:
            with pytest.raises(SealMismatch) as ei:
                verify(store, anchors=[lost.to_json()])
            assert ei.value.lsn in (lost.lsn, lost.record_lsn)
            assert str(lost.lsn) in str(ei.value)


# -- 6. references -----------------------------------------------------------------------


def test_forged_reference(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        a = store.put("real")
        b = put_unchecked(store, "derived", sources=[a, "never-existed"])
        seal(store)
        with pytest.raises(ForgedReference) as ei:
            verify(store)
        e = ei.value
        assert (e.id, e.by, e.lsn) == ("never-existed", b, 2)
        assert e.offset == read_log(path).by_lsn(2).offset
        assert "never-existed" in str(e) and b in str(e)
        assert isinstance(e, IntegrityError)
    with pytest.raises(ForgedReference):
        open_and_verify(path)


def test_references_to_existing_memories_verify(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        a = store.put("one")
        b = store.put("two")
        c = store.put("three")
        store.move(a, "archive")
        store.stale(b)
        d = store.put("summary", kind="summary", sources=[a, b, c])
        store.put("summary of summary", sources=[d, a])
        seal(store)
        r = verify(store)
        assert r.ok and r.seals_checked == 1
    assert open_and_verify(path).ok


def test_forged_reference_on_a_memory_store() -> None:
    store = memcommit.create_memory_store()
    put_unchecked(store, "x", sources=["ghost"])
    with pytest.raises(ForgedReference) as ei:
        verify(store)
    assert ei.value.id == "ghost"


# -- 7. a crash between a record and its auto-seal ---------------------------------------

_CRASH_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import memcommit
    from memcommit import AutoSeal

    store = memcommit.open(sys.argv[1], durability="commit")
    AutoSeal(store, every=5)
    for i in range(12):
        store.put(f"note {i}", id=f"c{i:02d}")
    print(store.lsn, [s.record_lsn for s in store.seals()], flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def crash_child(path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``_CRASH_CHILD`` on `path`; it must die by SIGKILL, as it means to."""
    proc = subprocess.run(
        [sys.executable, "-c", _CRASH_CHILD, str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == -9, proc.stderr
    return proc


def test_crash_between_record_and_auto_seal(path: Path) -> None:
    proc = crash_child(path)
    assert proc.stdout.strip() == "14 [6, 12]"
    # Make the crash land between the last put and its seal: the seal at 12 never made it
    # to disk (its bytes zeroed, as in a preallocated file), puts 7..11 did.
    log = read_log(path)
    assert [r.lsn for r in log.recs] == list(range(1, 15))
    lost = log.by_lsn(12)
    assert lost.op == OP_SEAL
    pwrite_all(path, lost.offset, bytes(log.end - lost.offset))
    with memcommit.open(path, read_only=True) as ro:
        assert ro.lsn == 11
        assert verify(ro).seals_checked == 1
    with memcommit.open(path, durability="none") as store:
        assert store.lsn == 11
        assert [x.record_lsn for x in store.seals()] == [6]
        r = verify(store)
        assert (r.ok, r.seals_checked, r.records_checked) == (True, 1, 11)
        with AutoSeal(store, every=5):
            store.put("after the crash")  # LSN 12: 6 records since the seal at 6
        got = store.seals()
        assert len(got) == 2
        assert got[-1].record_lsn == 13
        assert got[-1].lsn in (11, 12)  # covers the puts the lost seal would have
        r = verify(store)
        assert (r.seals_checked, r.records_checked) == (2, 13)
        assert check_seal(store).seal == got[-1]


def test_crash_after_auto_seals_leaves_a_valid_store(path: Path) -> None:
    crash_child(path)
    with memcommit.open(path, durability="none") as store:
        assert store.lsn == 14
        assert [x.record_lsn for x in store.seals()] == [6, 12]
        assert verify(store).seals_checked == 2
        with AutoSeal(store, every=5):
            for i in range(5):
                store.put(f"more {i}")
        newest = store.seals()[-1]
        assert newest.record_lsn > 14 and newest.lsn >= 14
        assert verify(store).seals_checked == 3
        assert check_seal(store).seal == newest


def test_verify_names_the_seal_when_a_changed_id_stops_the_open(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sealed put's id changed under a recomputed checksum: a later status record then names
    a memory the log never created, so the open refuses the log (CorruptLog); `memcommit
    verify` still reports the seal whose range holds the change, from the bytes."""
    from memcommit.cli import main

    with memcommit.open(path, durability="none") as s:
        s.put("first", id="m000")
        s.stale("m000")
        sealed_at = seal(s)
    log = read_log(path)
    log.by_lsn(1).replace(b"m000", b"n000")
    log.by_lsn(1).fix_crc()
    write_log(path, log)
    with pytest.raises(CorruptLog):
        memcommit.open(path, read_only=True)
    assert main(["verify", str(path)]) == 1
    err = capsys.readouterr().err
    assert "SealMismatch" in err and f"the seal at LSN {sealed_at.record_lsn}" in err
    with pytest.raises(SealMismatch) as ei:
        memcommit._native.check_log_seals(str(path))
    assert ei.value.lsn == sealed_at.record_lsn and ei.value.after_lsn == 0
