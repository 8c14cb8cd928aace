"""What a writer's open cuts, exactly as the README's durability section says.

A writer's open cuts the records after the last whole commit and a last record that fails
its checksum: a crash mid-write leaves exactly that (never acknowledged under the default
durability). A bit flipped in the last record after it was acknowledged looks the same to
the format (a sector that never reached the disk also leaves a whole-length record with a
bad checksum), so it is cut the same way: the cut is reported in ``recovered_bytes``, a
read-only open never cuts, and ``memcommit repair`` without ``--yes`` shows it first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import memcommit
from memcommit import cli


def test_a_flipped_bit_in_the_last_record_is_cut_as_a_torn_tail_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "memory.db"
    with memcommit.open(path) as store:
        kept = store.put("the commit before", kind="fact")
    before = path.stat().st_size  # a closed log ends at its last record
    with memcommit.open(path) as store:
        store.put("the last acknowledged commit", kind="fact")
    size = path.stat().st_size
    buf = bytearray(path.read_bytes())
    buf[size - 10] ^= 0x01  # inside the last record's text
    path.write_bytes(bytes(buf))

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

    # A writer's open cuts exactly that record and says how much it cut.
    with memcommit.open(path) as store:
        assert store.lsn == 1
        assert store.recovered_bytes == size - before
    assert path.stat().st_size == before
