"""The command line on damaged, empty and foreign files, and on a log a writer holds.

Every command tells the same, true story about a file: what repair can and cannot do with
it, in one line naming the file, never a traceback; a refused writer command creates nothing
beside the file; repair looks at the writer lock before anything else.
"""

from __future__ import annotations

import gc
import json
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

import memcommit
from logbytes import crc32c
from memcommit.cli import main

READERS = ("info", "export", "verify", "snapshot")
WRITERS = ("compact", "seal", "import")


def test_crc32c_matches_the_logs_own_checksums(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with memcommit.open(str(path)) as store:
        store.put("hello")
    data = path.read_bytes()
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value
    assert crc32c(data[:60]) == struct.unpack_from("<I", data, 60)[0]
    assert crc32c(data[64:-4]) == struct.unpack_from("<I", data, len(data) - 4)[0]


def _rewrite_record(path: Path, needle: bytes, change: Callable[[bytearray], None]) -> None:
    """Change the record that holds `needle` and give it a valid checksum again.

    Record layout (ARCHITECTURE.md): 32-byte head with key_len (u16) at 24 and payload
    length (u32) at 28, then key, payload and a CRC32C over every byte before it.
    """
    data = bytearray(path.read_bytes())
    offset = 64
    while offset + 32 <= len(data):
        key_len, payload_len = struct.unpack_from("<H2xI", data, offset + 24)
        total = 32 + key_len + payload_len + 4
        record = data[offset : offset + total]
        if needle in record:
            change(record)
            struct.pack_into("<I", record, total - 4, crc32c(bytes(record[: total - 4])))
            data[offset : offset + total] = record
            path.write_bytes(bytes(data))
            return
        offset += total
    raise AssertionError(f"no record holds {needle!r}")


def _replace(needle: bytes, new: bytes) -> Callable[[bytearray], None]:
    assert len(new) == len(needle)

    def change(record: bytearray) -> None:
        at = record.find(needle)
        record[at : at + len(needle)] = new

    return change


def _time_out_of_range(record: bytearray) -> None:
    struct.pack_into("<q", record, 16, 2**62)  # `at`: microseconds far beyond year 9999


NEEDLE = "NEEDLE-NEEDLE"


def _log_with_a_bad_payload(tmp_path: Path, where: str) -> Path:
    """A log with one record whose checksum is valid but whose payload does not decode."""
    path = tmp_path / "memory.db"
    with memcommit.open(str(path)) as store:
        store.put("before")
        if where in ("text", "at"):
            store.put(NEEDLE)
        elif where == "data":
            store.put("with data", data={"k": NEEDLE})
        else:
            store.state.put(("ns",), "key", {"v": NEEDLE})
        store.put("after")
    needle = NEEDLE.encode()
    if where == "at":
        _rewrite_record(path, needle, _time_out_of_range)
    elif where in ("data", "entity-json"):
        # Valid UTF-8, not JSON.
        quoted = b'"' + needle + b'"'
        _rewrite_record(path, quoted, _replace(quoted, b"}" + needle + b"{"))
    else:
        _rewrite_record(path, needle, _replace(needle, b"\xff\xfe" * 6 + b"\xff"))
    return path


def _run(command: str, path: Path, tmp_path: Path) -> int:
    if command == "snapshot":
        return main(["snapshot", str(path), str(tmp_path / "state.json")])
    if command == "import":
        dump = tmp_path / "in.jsonl"
        dump.write_text(json.dumps({"op": "put", "key": "m1", "fields": {"text": "x"}}) + "\n")
        return main(["import", str(path), str(dump)])
    if command == "export":
        return main(["export", str(path), "--out", str(tmp_path / "out.jsonl")])
    return main([command, str(path)])


def _one_line_error(err: str, path: Path) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert str(path) in lines[0]
    return lines[0]


def _refused(argv: list[str], named: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``memcommit ARGV`` exits 1 with one line of error naming `named`; returns that line."""
    assert main(argv) == 1
    return _one_line_error(capsys.readouterr().err, named)


@pytest.fixture
def empty_log(tmp_path: Path) -> Path:
    """A log with nothing in it, closed: ``memory.db`` in the test's directory."""
    path = tmp_path / "memory.db"
    memcommit.open(str(path)).close()
    return path


def _agrees_with_repair(
    message: str, path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Point to repair exactly when repair finds something to cut."""
    repair_code = main(["repair", str(path)])
    repair_out = capsys.readouterr()
    if repair_code == 0:
        assert "healthy" in repair_out.out
        assert "run 'memcommit repair" not in message
        assert "finds no damaged bytes to cut" in message
    else:
        assert "would cut" in repair_out.out
        assert f"run 'memcommit repair {path}'" in message
    assert message.count("memcommit repair") <= 1, message  # the advice, once


# --- damage that decodes badly behind a valid checksum ------------------------------


@pytest.mark.parametrize(
    ("where", "commands"),
    [
        ("text", ("export",)),
        ("data", ("export",)),
        ("at", ("export",)),
        ("entity-utf8", ("info", "export", "verify", "snapshot", "compact", "seal")),
        ("entity-json", ("info", "export", "verify", "snapshot", "compact", "seal")),
    ],
)
def test_a_payload_that_does_not_decode_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, commands: tuple[str, ...]
) -> None:
    path = _log_with_a_bad_payload(tmp_path, where)
    for command in commands:
        before = path.read_bytes()
        assert _run(command, path, tmp_path) == 1, command
        message = _one_line_error(capsys.readouterr().err, path)
        assert message.startswith(f"memcommit {command}: error: ")
        assert path.read_bytes() == before
        # A store that fails inside MemoryStore.__init__ (here: decoding the roles' entities)
        # keeps its writer lock until the cycle collector frees it; a command run as its own
        # process never sees that, this in-process test does.
        gc.collect()
        _agrees_with_repair(message, path, tmp_path, capsys)
    assert not (tmp_path / "out.jsonl").exists()
    assert not (tmp_path / "state.json").exists()


# --- empty, foreign and header-damaged files ----------------------------------------


def test_an_empty_file_is_not_yet_a_log_for_readers_and_a_new_log_for_writers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "memory.db"
    path.touch()
    for command in READERS:
        assert _run(command, path, tmp_path) == 1, command
        message = _one_line_error(capsys.readouterr().err, path)
        assert "is an empty file (0 bytes), not yet a memcommit log" in message
        assert "makes it a new, empty log" in message
        assert "damaged" not in message and "repair" not in message
    assert main(["repair", str(path)]) == 0
    out = capsys.readouterr().out
    assert "nothing to repair" in out and "is an empty file (0 bytes)" in out
    # Readers and repair changed nothing and created nothing.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.db"]
    assert path.read_bytes() == b""
    # A writer makes it a new log, as memcommit.open does.
    assert _run("seal", path, tmp_path) == 0
    with memcommit.open(str(path), read_only=True) as store:
        assert store.lsn == 1 and len(store.seals()) == 1


def _foreign(path: Path) -> None:
    path.write_bytes(b"this is a text file, not a memcommit log\n" * 4)


def _header_damaged(path: Path) -> None:
    with memcommit.open(str(path)) as store:
        store.put("a memory")
    Path(f"{path}.lock").unlink()
    data = bytearray(path.read_bytes())
    data[20] ^= 0x01  # inside the store id: the header's checksum no longer matches
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("make", [_foreign, _header_damaged], ids=["foreign", "header-damaged"])
def test_a_file_without_a_log_header_gets_the_same_true_message_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Callable[[Path], None]
) -> None:
    path = tmp_path / "memory.db"
    make(path)
    before = path.read_bytes()
    for command in (*READERS, *WRITERS, "repair"):
        assert _run(command, path, tmp_path) == 1, command
        message = _one_line_error(capsys.readouterr().err, path)
        assert "is not a memcommit log, or its header (the first 64 bytes) is damaged" in message
        assert "repair cannot recover" in message
        assert "run 'memcommit repair" not in message
        assert path.read_bytes() == before
        # Nothing beside the file: no lock file, no manifest, no output.
        assert sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".jsonl") == [
            "memory.db"
        ], command


def _damaged_mid_log(tmp_path: Path) -> Path:
    # Durable commits: each one's records say the commits before it were on the disk, so the
    # damage is in committed data even without the lock file (removed below), whose
    # clean-close marker says the same of a closed log.
    path = tmp_path / "memory.db"
    with memcommit.open(str(path)) as store:
        for i in range(50):
            store.put(f"memory number {i:03d}: " + "lorem ipsum " * 5)
    Path(f"{path}.lock").unlink()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def test_damage_after_the_header_points_to_repair_and_writers_create_no_lock_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _damaged_mid_log(tmp_path)
    before = path.read_bytes()
    for command in (*READERS, "compact", "seal"):
        assert _run(command, path, tmp_path) == 1, command
        message = _one_line_error(capsys.readouterr().err, path)
        assert "damaged" in message and "byte offset" in message
        assert f"run 'memcommit repair {path}' to see the damage and cut it" in message
        # The core's own advice ("`memcommit repair X` can back up the file and cut it
        # there") went before it: the advice is given once.
        assert message.count("memcommit repair") == 1, message
        assert path.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.db"], command
    assert main(["repair", str(path)]) == 1
    assert "would cut" in capsys.readouterr().out


def test_an_open_refused_for_damage_removes_nothing_beside_the_log(tmp_path: Path) -> None:
    # A temp file a crash left and an index file that no longer fits are cleared by a writer
    # that opens; one refused for damage leaves them, as it leaves the log, for repair.
    path = _damaged_mid_log(tmp_path)
    temp = Path(f"{path}.tmp-manifest")
    temp.write_bytes(b"a manifest a killed compaction was writing")
    index = Path(f"{path}.index")
    index.write_bytes(b"not an index file")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(memcommit.CorruptLog):
        memcommit.open(str(path))
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_export_out_into_a_missing_directory_names_the_out_path(
    empty_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "missing" / "dump.jsonl"
    message = _refused(["export", str(empty_log), "--out", str(out)], out, capsys)
    assert f"--out {out}: the directory {out.parent} does not exist" in message
    assert ".partial" not in message

    message = _refused(["export", str(empty_log), "--out", str(tmp_path)], tmp_path, capsys)
    assert "is a directory" in message


def test_snapshot_into_a_missing_directory_names_the_snapshot_file(
    empty_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "missing" / "state.json"
    message = _refused(["snapshot", str(empty_log), str(out)], out, capsys)
    assert f"{out}: the directory {out.parent} does not exist" in message
    assert ".tmp-" not in message


def test_a_snapshot_that_cannot_be_written_is_named_not_its_temp_file(
    empty_log: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "state.json"

    def refuse(self: object, target: str) -> None:
        raise PermissionError(13, "Permission denied", f"{target}.tmp-1234")

    monkeypatch.setattr(memcommit.MemoryStore, "save_snapshot", refuse)
    message = _refused(["snapshot", str(empty_log), str(out)], out, capsys)
    assert f"{out}: cannot write it: Permission denied" in message
    assert ".tmp-" not in message


# --- repair and a live writer -------------------------------------------------------


def _writer_with_a_memory(path: Path) -> memcommit.MemoryStore:
    """A writer on `path` that has committed one memory (and holds the writer's lock)."""
    store = memcommit.open(str(path))
    store.put("a memory")
    return store


def test_repair_checks_the_writer_lock_before_anything_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "memory.db"
    with _writer_with_a_memory(path):
        # A live writer's file ends in the zeros it wrote ahead of its next commits.
        size = path.stat().st_size
        assert size > 64 + 100
        for argv in (["repair", str(path)], ["repair", str(path), "--yes"]):
            assert main(argv) == 1
            captured = capsys.readouterr()
            assert captured.out == ""  # nothing reported as damage, nothing to cut
            message = _one_line_error(captured.err, path)
            assert f"open for writing by another process (it holds the lock on {path}.lock)" in (
                message
            )
            assert path.stat().st_size == size
            assert list(tmp_path.glob("memory.db.bak-*")) == []


@pytest.mark.parametrize("link", ["symlink", "hard-link"])
def test_repair_is_refused_under_any_name_of_a_log_a_writer_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], link: str
) -> None:
    """Only ``NAME.lock`` was checked: under a symbolic or a hard link's name, repair took the
    live writer's log for a log without one, and its tail for free space or damage."""
    path = tmp_path / "memory.db"
    other = tmp_path / "other-name.db"
    with _writer_with_a_memory(path):
        if link == "symlink":
            other.symlink_to(path)
        else:
            os.link(path, other)
        # A torn tail, as a commit in flight looks from outside: damage to cut, if unguarded.
        with path.open("ab") as log:
            log.write(b"MC\x01\x00in flight")
        before = path.read_bytes()
        for argv in (["repair", str(other)], ["repair", str(other), "--yes"]):
            assert main(argv) == 1
            captured = capsys.readouterr()
            assert captured.out == ""
            message = _one_line_error(captured.err, other)
            assert f"{other} is open for writing by another process" in message
            if link == "symlink":  # the lock file of the file the link names
                assert f"(it holds the lock on {path}.lock)" in message
            else:  # no other-name.db.lock: the lock on the log file itself
                assert f"(it holds the lock on the log file {other} itself" in message
            assert path.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "memory.db",
            "memory.db.lock",
            "other-name.db",
        ]


def test_repair_takes_an_all_zero_tail_for_free_space(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "memory.db"
    _writer_with_a_memory(path).close()
    good = path.read_bytes()
    # What a writer killed before its close leaves: zeros written ahead of the next commit.
    path.write_bytes(good + bytes(1 << 20))
    for argv in (["repair", str(path)], ["repair", str(path), "--yes"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert f"{path}: healthy: 1 records" in out
        assert f"the last {1 << 20:,} bytes are zeros a writer wrote ahead" in out
        assert "torn" not in out and "cut" not in out
        assert path.read_bytes() == good + bytes(1 << 20)
        assert list(tmp_path.glob("memory.db.bak-*")) == []
    # Bytes that are not all zeros after the last commit are still a torn tail.
    path.write_bytes(good + bytes(100) + b"MC" + bytes(100))
    assert main(["repair", str(path), "--yes"]) == 0
    assert "torn tail" in capsys.readouterr().out
    assert path.read_bytes() == good


@pytest.mark.parametrize("where", ["entity-utf8", "entity-json"])
def test_serve_reports_a_log_that_does_not_decode_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    from memcommit.server import MemoryServer

    def run(self: object) -> None:
        raise AssertionError("the server started on a damaged log")

    monkeypatch.setattr(MemoryServer, "run", run)
    path = _log_with_a_bad_payload(tmp_path, where)
    message = _refused(["serve", str(path), "--port", "0"], path, capsys)
    assert message.startswith("memcommit serve: error: ")


def test_repair_cuts_nothing_if_the_log_changed_after_it_was_inspected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A torn tail to cut; then, while repair asks for confirmation (after it inspected the
    # file), something appends to it. The cut is refused under the writer's lock, nothing is
    # cut and the backup is removed.
    path = tmp_path / "memory.db"
    with memcommit.open(str(path)) as store:
        store.put("kept")
    with open(path, "ab") as f:
        f.write(b"CM\x01\x01 torn")
    from memcommit.cli import repair

    def answer_after_a_writer_came(prompt: str) -> bool:
        with open(path, "ab") as f:
            f.write(b"later bytes")
        return True

    monkeypatch.setattr(repair, "_confirm", answer_after_a_writer_came)
    before_answer = path.read_bytes()
    assert main(["repair", str(path)]) == 1
    err = capsys.readouterr().err
    assert "changed while repair ran" in err and "nothing was cut" in err
    assert path.read_bytes() == before_answer + b"later bytes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.db", "memory.db.lock"]
