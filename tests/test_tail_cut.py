"""What a writer's open cuts, exactly as the README's durability section says.

A writer's open cuts the records after the last whole commit and a last record that fails
its checksum: a crash mid-write leaves exactly that (never acknowledged under the default
durability). After a crash, a bit flipped in the last record after it was acknowledged looks
the same to the format (a sector that never reached the disk also leaves a whole-length
record with a bad checksum), so it is cut the same way: the cut is reported in
``recovered_bytes``, a read-only open never cuts, and ``memcommit repair`` without ``--yes``
shows it first. After a clean close the lock file says how far the log is durable, and
damage there is refused like damage anywhere else: nothing is cut (a file cut short of that
end lost its tail already, and is cut back to its last whole commit).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import memcommit
from logbytes import OP_SEAL, read_log
from memcommit import cli
from memcommit.storage import compact


def _put_and_crash(path: Path, text: str) -> None:
    """One acknowledged commit by a process that exits without closing the store."""
    script = (
        "import os, sys, memcommit\n"
        "store = memcommit.open(sys.argv[1])\n"
        "store.put(sys.argv[2], kind='fact')\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(path), text], check=True)


def _flip_in_last_record(path: Path) -> int:
    buf = bytearray(path.read_bytes())
    at = buf.rindex(b"the last acknowledged commit")
    assert buf.find(b"the last acknowledged commit") == at
    buf[at + 4] ^= 0x01  # inside the last record's text
    path.write_bytes(bytes(buf))
    return len(buf)


def test_a_flipped_bit_in_the_last_record_after_a_crash_is_cut_as_a_torn_tail_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "memory.db"
    with memcommit.open(path) as store:
        kept = store.put("the commit before", kind="fact")
    before = path.stat().st_size  # a closed log ends at its last record
    _put_and_crash(path, "the last acknowledged commit")
    size = _flip_in_last_record(path)
    assert size > before

    # Readers stop before it and cut nothing; repair (without --yes) reports it as the torn
    # tail it looks like.
    with memcommit.open(path, read_only=True) as store:
        assert store.lsn == 1
        assert store.get(kept).text == "the commit before"
    assert path.stat().st_size == size
    cli.main(["repair", str(path)])
    out = capsys.readouterr()
    report = (out.out + out.err).replace(",", "")
    assert "torn" in report.lower() and f"{size - before} bytes" in report, report
    assert path.stat().st_size == size

    # A writer's open cuts exactly that record (and the zeros written ahead after it) and
    # says how much it cut.
    with memcommit.open(path) as store:
        assert store.lsn == 1
        assert store.recovered_bytes == size - before
    assert path.stat().st_size == before


def test_a_flipped_bit_in_the_last_record_after_a_clean_close_is_refused_and_nothing_is_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "memory.db"
    with memcommit.open(path) as store:
        store.put("the commit before", kind="fact")
        store.put("the last acknowledged commit", kind="fact")
    size = _flip_in_last_record(path)
    damaged = path.read_bytes()

    for read_only in (True, False):
        with pytest.raises(memcommit.CorruptLog) as err:
            memcommit.open(path, read_only=read_only)
        assert err.value.lsn == 2 and str(path) in str(err.value)
        assert path.read_bytes() == damaged
    for command in ("info", "verify"):
        assert cli.main([command, str(path)]) == 1
    capsys.readouterr()
    cli.main(["repair", str(path)])
    out = capsys.readouterr()
    report = out.out + out.err
    assert "torn" not in report.lower() and "damage" in report.lower(), report
    assert path.read_bytes() == damaged and path.stat().st_size == size


def test_a_log_put_back_shorter_than_its_clean_close_still_has_its_later_tears_cut(
    tmp_path: Path,
) -> None:
    # A log restored from an older copy ends before the end its lock file says a clean close
    # made durable. The writer that opens it moves that mark back, so a later crash's torn
    # tail past the restored end (a whole-length record with a bad checksum, then the zeros
    # written ahead) is cut as a tear, not refused as damage.
    path = tmp_path / "memory.db"
    with memcommit.open(path) as store:
        kept = store.put("the commit before", kind="fact")
    older = path.read_bytes()
    with memcommit.open(path) as store:
        store.put("a commit the older copy lacks", kind="fact")
    path.write_bytes(older)
    _put_and_crash(path, "the last acknowledged commit")  # its open finds the older end
    size = _flip_in_last_record(path)  # a sector of it never reached the disk
    with memcommit.open(path) as store:
        assert store.lsn == 1 and store.get(kept) is not None
        assert store.recovered_bytes == size - len(older)


def test_damage_in_a_compacted_generation_before_its_first_clean_close_is_never_cut(
    tmp_path: Path,
) -> None:
    """Log compaction copies the records it keeps with the `durable_gap` they had in the old
    log, which said they were written while the log was durable only up to a record before
    them. A writer's open read those old gaps against the new file: with a kept record and the
    compaction's seal after it both damaged, and no clean close of the new generation yet, it
    took the damage for a torn write and cut the fsynced, committed records after it. The new
    generation was fsynced whole before it was renamed in, so damage there is damage."""
    path = tmp_path / "memory.db"
    store = memcommit.open(path, durability="none")
    ids = [store.put(f"memory {i}", kind="note") for i in range(20)]
    for mid in ids[:10]:
        store.put(f"again {mid}", id=mid)
    compact(store)
    store.close()
    # As a crash right after the compaction leaves it: no clean close of the new generation.
    (tmp_path / "memory.db.lock").unlink()
    log = read_log(path)
    assert log.dense_from > 0
    kept = [r for r in log.recs if r.op != OP_SEAL]
    assert any(r.durable_gap for r in kept), "no kept record carries an old gap"
    damaged = kept[len(kept) // 2]
    data = bytearray(path.read_bytes())
    assert log.recs[-1].op == OP_SEAL
    for rec in (damaged, log.recs[-1]):
        data[rec.offset + 40] ^= 0x55
    path.write_bytes(data)
    with pytest.raises(memcommit.CorruptLog) as err:
        memcommit.open(path)
    assert f"byte offset {damaged.offset} (LSN {damaged.lsn})" in str(err.value)
    assert path.read_bytes() == data  # nothing cut
