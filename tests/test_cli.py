"""The memcommit command line: info, export, import, repair, seal, verify and demo."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import memcommit
from memcommit import _native
from memcommit.cli import main
from memcommit.progress import Progress


def _make_store(path: Path) -> dict[str, str]:
    """A small store with every kind of record; returns the ids it created."""
    with memcommit.open(str(path)) as store:
        with store.commit() as c:
            fact = c.put(
                "Acme uses the EUR currency on invoices.",
                kind="fact",
                task="task-a",
                data={"confidence": 0.9, "nested": {"k": [1, 2]}},
                tags=("billing", "acme"),
            )
            trace = c.put("agent-1 called run_sql: 12 rows.", kind="trace", task="task-a")
        note = store.put("Remember the cutover on Friday.", tier="mid", sources=(fact, trace))
        store.stale(trace, reason="superseded")
        store.restore(trace)
        store.stale(note, reason="outdated")
        store.move(fact, "long")
        store.put("Acme uses EUR and GBP.", kind="fact", id=fact, task="task-a")
        store.finish_task("task-a")
    return {"fact": fact, "trace": trace, "note": note}


def _sample(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """``memory.db`` in `tmp_path`, holding ``_make_store``'s records, and their ids."""
    path = tmp_path / "memory.db"
    return path, _make_store(path)


def _sealed_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, dict[str, str], str]:
    """A ``_sample`` log sealed by ``memcommit seal``: its path, its ids and the anchor printed."""
    path, ids = _sample(tmp_path)
    assert main(["seal", str(path)]) == 0
    return path, ids, capsys.readouterr().out


def _exported(tmp_path: Path) -> Path:
    """``dump.jsonl`` in `tmp_path`: ``memcommit export`` of a ``_sample`` log."""
    dump = tmp_path / "dump.jsonl"
    assert main(["export", str(_sample(tmp_path)[0]), "--out", str(dump)]) == 0
    return dump


def _fields(out: str) -> dict[str, str]:
    """The ``key: value`` lines a command printed, as a dict."""
    return dict(line.split(": ", 1) for line in out.splitlines())


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _comparable(record: dict[str, Any]) -> tuple[Any, ...]:
    # Timestamps come from the importing store's clock, so they differ by design.
    fields = {k: v for k, v in record["fields"].items() if k != "created_at"}
    return record["op"], record["key"], fields


# --- info -------------------------------------------------------------------------------


def test_info_prints_key_value_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = _sample(tmp_path)
    assert main(["info", str(path)]) == 0
    lines = _fields(capsys.readouterr().out)
    assert lines["records"] == "9"
    assert lines["lsn"] == "9"
    assert lines["memories"] == "3"
    assert lines["bytes"] == str(path.stat().st_size)
    assert lines["generation"] == "0"
    assert len(lines["store_id"]) >= 16


def test_info_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = _sample(tmp_path)
    assert main(["info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["records"] == 9
    assert info["memories"] == 3
    with memcommit.open(str(path), read_only=True) as store:
        assert info["store_id"] == store.store_id


def test_info_of_missing_file_fails_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.db"
    assert main(["info", str(missing)]) == 1
    captured = capsys.readouterr()
    assert str(missing) in captured.err
    assert "Traceback" not in captured.err
    assert not missing.exists()


def test_info_of_a_store_in_postgresql_names_its_url_not_a_path(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It printed ``path: None``: a store in PostgreSQL has no path, its URL (with the password
    masked), store and schema say where it is."""
    parts = urllib.parse.urlsplit(pg_url)
    password = parts.password
    if password is None:  # the throwaway server asks for none: give one all the same
        password = "not-shown"
        netloc = parts.netloc.replace("@", f":{password}@", 1)
        pg_url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    with memcommit.open(pg_url) as store:
        store.put("one memory")
    assert main(["info", pg_url]) == 0
    out = capsys.readouterr().out
    assert "None" not in out and password not in out
    lines = _fields(out)
    assert "path" not in lines
    assert lines["url"].startswith(f"{parts.scheme}://{parts.username}:***@{parts.hostname}")
    assert out.splitlines()[0].startswith("url: ")  # where a file's path would be
    assert lines["store"] == urllib.parse.parse_qs(parts.query)["store"][0]
    assert lines["memories"] == "1"


@pytest.mark.parametrize(
    "command",
    [
        ["info"],
        ["verify"],
        ["export"],
        ["repair"],
        ["compact", "--archived-older-than", "1d", "--dry-run"],
        ["snapshot", "OUT"],
    ],
)
def test_a_fifo_given_as_the_store_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """A reader must not wait on it forever, nor call it an empty store."""
    fifo = tmp_path / "a-fifo"
    os.mkfifo(fifo)
    arguments = [command[0], str(fifo), *command[1:]]
    arguments = [str(tmp_path / "out") if a == "OUT" else a for a in arguments]
    assert main(arguments) == 1
    err = capsys.readouterr().err
    assert f"{fifo}: not a regular file" in err
    assert "empty" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-fifo"]


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["no-such-command"]) == 2
    assert main(["demo", "--agents", "0"]) == 2
    assert main(["info"]) == 2
    err = capsys.readouterr().err
    assert "--agents" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [["info", "a.db", "b.db"], ["verify", "a.db", "--json"], ["bench", "compact", "a.db", "b.db"]],
    ids=["info", "verify", "bench-compact"],
)
def test_an_extra_argument_is_refused_with_its_commands_usage(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """``memcommit info a b`` printed the top-level usage (memcommit [-h] [--version] COMMAND)
    for an argument that ``info`` refused: the usage and the pointer are the command's."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    command = " ".join(arg for arg in argv if not arg.endswith(".db") and arg != "--json")
    assert err.startswith(f"usage: memcommit {command} ")
    assert f"unrecognized arguments: {argv[-1]} (see memcommit {command} --help)" in err
    assert "COMMAND" not in err and "Traceback" not in err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "repair" in capsys.readouterr().out


# --- export and import ------------------------------------------------------------------


def test_export_to_stdout_writes_one_json_object_per_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, ids = _sample(tmp_path)
    assert main(["export", str(path)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["lsn"] for r in records] == list(range(1, 10))
    assert [r["op"] for r in records] == [
        "put", "put", "put", "status", "status", "status", "move", "put", "task",
    ]  # fmt: skip
    for record in records:
        assert set(record) == {"lsn", "op", "at", "key", "fields"}
        assert datetime.fromisoformat(record["at"]).utcoffset() is not None
    assert records[0]["key"] == ids["fact"]
    assert records[0]["fields"]["data"] == {"confidence": 0.9, "nested": {"k": [1, 2]}}
    assert records[0]["fields"]["tags"] == ["billing", "acme"]
    assert records[2]["fields"]["sources"] == [ids["fact"], ids["trace"]]
    assert records[3]["fields"]["status"] == "stale"
    assert records[3]["fields"]["reason"] == "superseded"
    assert records[6]["fields"]["tier"] == "long"
    assert records[8]["key"] == "task-a"


def test_export_import_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, ids = _sample(tmp_path)
    first = tmp_path / "first.jsonl"
    assert main(["export", str(source), "--out", str(first)]) == 0
    assert "exported 9 records" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.glob("first.jsonl*")) == ["first.jsonl"]

    copy = tmp_path / "copy.db"
    assert main(["import", str(copy), str(first)]) == 0
    assert "imported 9 records" in capsys.readouterr().out

    second = tmp_path / "second.jsonl"
    assert main(["export", str(copy), "--out", str(second)]) == 0
    assert [_comparable(r) for r in _lines(first)] == [_comparable(r) for r in _lines(second)]

    with memcommit.open(str(source), read_only=True) as a, memcommit.open(str(copy)) as b:
        assert len(a) == len(b) == 3
        for memory_id in ids.values():
            x, y = a.get(memory_id), b.get(memory_id)
            assert x is not None and y is not None
            assert (x.text, x.kind, x.tier, x.status, x.tags, x.sources, x.data, x.task) == (
                y.text, y.kind, y.tier, y.status, y.tags, y.sources, y.data, y.task,
            )  # fmt: skip
        assert b.is_task_finished("task-a")


def test_export_to_a_closed_standard_output_is_a_one_line_error(tmp_path: Path) -> None:
    """With standard output closed (``>&-``) Python has no sys.stdout: export said so in a
    traceback ('NoneType' object has no attribute 'isatty')."""
    path, _ = _sample(tmp_path)
    done = subprocess.run(
        ["sh", "-c", 'exec "$0" -m memcommit export "$1" >&-', sys.executable, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("memcommit export: error: ")
    assert "standard output is closed" in lines[0] and "--out" in lines[0]


def test_import_in_batches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = _exported(tmp_path)
    target = tmp_path / "copy.db"
    assert main(["import", str(target), str(dump), "--batch", "2"]) == 0
    assert "in 5 commits" in capsys.readouterr().out
    with memcommit.open(str(target), read_only=True) as store:
        assert store.lsn == 9


def test_import_bad_json_names_the_line_and_writes_nothing_of_its_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = _exported(tmp_path)
    lines = dump.read_text(encoding="utf-8").splitlines()
    lines[4] = lines[4][:-7]  # line 5 is cut short
    dump.write_text("\n".join(lines) + "\n", encoding="utf-8")
    capsys.readouterr()

    target = tmp_path / "copy.db"
    assert main(["import", str(target), str(dump), "--batch", "3"]) == 1
    err = capsys.readouterr().err
    assert f"{dump}, line 5" in err
    assert "not valid JSON" in err
    assert "Traceback" not in err
    # Lines 1-3 were one batch and were committed; lines 4-5 were not.
    with memcommit.open(str(target), read_only=True) as store:
        assert store.lsn == 3
        assert [r.op for r in store.records()] == ["put", "put", "put"]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ({"op": "fold", "key": "m1", "fields": {}}, "unknown op"),
        ({"op": "put", "key": "m1", "fields": {"kind": "note"}}, "fields.text"),
        ({"op": "put", "key": "m1", "fields": {"text": "x", "tags": "a"}}, "fields.tags"),
        ({"op": "status", "key": "m1", "fields": {"status": "gone"}}, "fields.status"),
        ({"op": "put", "key": "", "fields": {"text": "x"}}, "'key'"),
        ([1, 2], "JSON object"),
    ],
)
def test_import_rejects_malformed_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: Any, problem: str
) -> None:
    dump = tmp_path / "dump.jsonl"
    good = {"op": "put", "key": "m0", "fields": {"text": "fine", "kind": "note"}}
    dump.write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n", encoding="utf-8")
    target = tmp_path / "copy.db"
    assert main(["import", str(target), str(dump)]) == 1
    err = capsys.readouterr().err
    assert f"{dump}, line 2" in err
    assert problem in err
    # Nothing was imported, so nothing is left: no empty log, no lock file.
    assert sorted(tmp_path.iterdir()) == [dump]


def test_import_refused_by_the_store_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "dump.jsonl"
    records = [
        {"op": "put", "key": "m0", "fields": {"text": "fine"}},
        {"op": "move", "key": "m0", "fields": {"tier": "mid"}},
        {"op": "status", "key": "never-put", "fields": {"status": "stale"}},
    ]
    dump.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    target = tmp_path / "copy.db"
    assert main(["import", str(target), str(dump)]) == 1
    err = capsys.readouterr().err
    assert f"{dump}, line 3" in err
    assert "Traceback" not in err
    assert sorted(tmp_path.iterdir()) == [dump]


def test_import_bad_tier_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "dump.jsonl"
    bad = {"op": "put", "key": "m0", "fields": {"text": "x", "tier": "attic"}}
    dump.write_text(json.dumps(bad) + "\n", encoding="utf-8")
    assert main(["import", str(tmp_path / "copy.db"), str(dump)]) == 1
    err = capsys.readouterr().err
    assert f"{dump}, line 1" in err
    assert "attic" in err


@pytest.mark.parametrize(
    ("argv", "what"),
    [(["import", "copy.db", "DIR"], "an import file"), (["verify", "DIR"], "a store file")],
    ids=["import", "verify"],
)
def test_a_directory_is_refused_with_the_right_article(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], what: str
) -> None:
    """It said "is a directory, not a import file"."""
    directory = tmp_path / "d"
    directory.mkdir()
    command, *paths = argv
    given = [str(directory) if arg == "DIR" else str(tmp_path / arg) for arg in paths]
    assert main([command, *given]) == 1
    assert f"{directory}: is a directory, not {what}\n" in capsys.readouterr().err


def test_import_missing_file_fails_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.jsonl"
    assert main(["import", str(tmp_path / "copy.db"), str(missing)]) == 1
    assert str(missing) in capsys.readouterr().err


@pytest.mark.parametrize(
    ("lines", "code"),
    [
        ("", 0),
        ("{not json\n", 1),
        (json.dumps({"op": "status", "key": "never-put", "fields": {"status": "stale"}}) + "\n", 1),
    ],
    ids=["no-records", "bad-first-line", "refused-by-the-store"],
)
def test_an_import_that_imports_nothing_leaves_an_empty_file_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: str, code: int
) -> None:
    """An empty (0-byte) target was left a 64-byte log header by an import that wrote no
    record, though the message said nothing was written to it."""
    target = tmp_path / "E.db"
    target.touch()
    dump = tmp_path / "in.jsonl"
    dump.write_text(lines, encoding="utf-8")
    assert main(["import", str(target), str(dump)]) == code
    captured = capsys.readouterr()
    assert "nothing was written to" in captured.out or "nothing was imported" in captured.err
    assert target.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["E.db", "in.jsonl"]


# --- repair -----------------------------------------------------------------------------


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    """``memory.db``: a store of 200 one-record commits with one byte flipped in the middle."""
    path = tmp_path / "memory.db"
    with memcommit.open(str(path), durability="none") as store:
        for i in range(200):
            store.put(f"memory number {i:03d}: " + "lorem ipsum " * 5, kind="trace")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def _repair_untouched(
    path: Path, capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[int, str, str]:
    """Run ``memcommit repair PATH FLAGS``, check it changed nothing and left no backup beside
    the log; returns its exit code, its output and its errors."""
    before = path.read_bytes()
    code = main(["repair", str(path), *flags])
    captured = capsys.readouterr()
    assert path.read_bytes() == before
    assert list(path.parent.glob(f"{path.name}.bak-*")) == []
    return code, captured.out, captured.err


def test_repair_of_a_healthy_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _repair_untouched(_sample(tmp_path)[0], capsys)
    assert code == 0
    assert "healthy" in out


def test_repair_without_yes_changes_nothing(
    damaged: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _native.inspect_log(str(damaged))
    assert report["damage_offset"] is not None
    assert report["good_end"] < damaged.stat().st_size

    code, out, err = _repair_untouched(damaged, capsys)
    assert code == 1
    assert f"byte offset {report['damage_offset']:,}" in out
    assert "--yes" in err


def test_repair_with_yes_backs_up_and_cuts(
    damaged: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = damaged.read_bytes()
    report = _native.inspect_log(str(damaged))
    with pytest.raises(memcommit.CorruptLog):
        memcommit.open(str(damaged))

    assert main(["repair", str(damaged), "--yes"]) == 0
    out = capsys.readouterr().out
    backups = list(tmp_path.glob("memory.db.bak-*"))
    assert len(backups) == 1
    assert backups[0].read_bytes() == before
    assert str(backups[0]) in out
    assert f"cut {len(before) - report['good_end']:,} bytes" in out
    assert damaged.stat().st_size == report["good_end"]

    with memcommit.open(str(damaged)) as store:
        assert 0 < len(store) < 200
        assert store.lsn == report["lsn"]
    assert _native.inspect_log(str(damaged))["damage_offset"] is None
    assert main(["repair", str(damaged)]) == 0
    assert "healthy" in capsys.readouterr().out


def test_repair_cuts_a_torn_tail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = _sample(tmp_path)
    good = path.read_bytes()
    path.write_bytes(good + b"MC\x01\x01half a record")
    assert main(["repair", str(path), "--yes"]) == 0
    out = capsys.readouterr().out
    assert f"torn tail at byte offset {len(good):,}" in out
    assert path.read_bytes() == good
    assert [b.read_bytes() for b in tmp_path.glob("memory.db.bak-*")] == [
        good + b"MC\x01\x01half a record"
    ]


def test_repair_refuses_while_a_writer_holds_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = _sample(tmp_path)
    with memcommit.open(str(path)):
        # Bytes a live writer is still appending look like a torn tail from outside.
        with path.open("ab") as log:
            log.write(b"MC\x01\x00in flight")
        code, _, err = _repair_untouched(path, capsys, "--yes")
        assert code == 1
        assert "open for writing" in err


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://someone:not-shown@127.0.0.1:1/db?store=team-a",
        "postgres://127.0.0.1:1/db",
        "postgresql://someone:not-shown@127.0.0.1:1/db?store=",  # not even a store's URL
    ],
    ids=["url", "postgres-scheme", "bad-store-name"],
)
def test_repair_of_a_store_in_postgresql_says_it_repairs_files_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    """It said "no such store file", as for a mistyped path: a store in PostgreSQL has no
    torn tail to cut. Refused before anything connects, naming no password."""
    monkeypatch.chdir(tmp_path)  # nothing is made, under any name
    assert main(["repair", url, "--yes"]) == 1
    err = capsys.readouterr().err
    assert "repair applies to store files only" in err
    assert "no torn tail to cut" in err
    assert "no such" not in err and "not-shown" not in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_info_on_a_damaged_log_points_to_repair(
    damaged: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["info", str(damaged)]) == 1
    err = capsys.readouterr().err
    assert "memcommit repair" in err
    assert "Traceback" not in err


# --- seal and verify ---------------------------------------------------------------------


def test_seal_prints_an_anchor_that_verify_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = _sample(tmp_path)
    assert main(["seal", str(path)]) == 0
    anchor_json = capsys.readouterr().out.strip()
    anchor = memcommit.Seal.from_json(anchor_json)
    (tmp_path / "anchor.json").write_text(anchor_json, encoding="utf-8")
    assert main(["verify", str(path), "--anchor", str(tmp_path / "anchor.json")]) == 0
    out = _fields(capsys.readouterr().out)
    assert out["seals_checked"] == "1" and out["anchors_checked"] == "1"
    assert int(out["records_checked"]) == anchor.lsn + 1
    assert main(["info", str(path)]) == 0
    info = _fields(capsys.readouterr().out)
    assert info["seals"] == "1" and info["last_seal"] == f"LSN {anchor.lsn} {anchor.hash}"


def test_verifys_progress_ends_at_its_total(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bar ended at 31,554,350/31,554,414 bytes: its total counted the log's 64-byte
    header, which verify does not read as it checks (nor report in bytes_checked)."""
    import memcommit.cli.seal as seal_cli

    bars: list[Progress] = []

    class Recorded(Progress):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            bars.append(self)

    monkeypatch.setattr(seal_cli, "Progress", Recorded)
    path, _ = _sample(tmp_path)
    with memcommit.open(str(path)) as store:
        for n in range(200):
            store.put(f"memory {n} " + "x" * 2_000)
    assert main(["verify", str(path)]) == 0
    out = _fields(capsys.readouterr().out)
    (bar,) = bars
    assert bar.total > 0 and bar.count == bar.total
    assert bar.total == int(out["bytes_checked"])


def test_verify_with_key_file_and_a_wrong_key_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = _sample(tmp_path)
    key, other = tmp_path / "key", tmp_path / "other"
    key.write_bytes(b"k" * 32)
    other.write_bytes(b"o" * 32)
    assert main(["seal", str(path), "--key-file", str(key)]) == 0
    assert json.loads(capsys.readouterr().out)["keyed"] is True
    assert main(["verify", str(path)]) == 0
    assert "keyed_unchecked: 1" in capsys.readouterr().out
    assert main(["verify", str(path), "--key-file", str(key)]) == 0
    assert "seals_checked: 1" in capsys.readouterr().out
    assert main(["verify", str(path), "--key-file", str(other)]) == 1
    err = capsys.readouterr().err
    assert "SealMismatch" in err and "keyed hash" in err


def test_verify_of_a_changed_record_exits_1_naming_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, _ = _sealed_sample(tmp_path, capsys)
    data = bytearray(path.read_bytes())
    at = data.index(b"agent-1 called run_sql")
    data[at] ^= 0x20  # one letter's case: the record no longer matches its checksum
    path.write_bytes(bytes(data))
    assert main(["verify", str(path)]) == 1
    err = capsys.readouterr().err
    assert "byte offset" in err and "LSN" in err


def test_compact_prints_the_report_and_old_anchors_are_superseded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, ids, anchor = _sealed_sample(tmp_path, capsys)
    (tmp_path / "anchor.json").write_text(anchor, encoding="utf-8")
    assert (
        main(["compact", str(path), "--kinds-after", "trace=0s", "--archived-older-than", "30d"])
        == 0
    )
    out = _fields(capsys.readouterr().out)
    assert out["purged"] == "1" and out["records"].startswith("10 -> ")
    with memcommit.open(str(path), read_only=True) as store:
        assert store.generation == 1 and store.is_purged(ids["trace"])
        assert store.manifest()[0]["purged"] == [ids["trace"]]
    assert main(["verify", str(path), "--anchor", str(tmp_path / "anchor.json")]) == 0
    assert "superseded: 1" in capsys.readouterr().out


def test_ctrl_c_after_the_compaction_says_it_stands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the store closes (its index file written) comes after the new log
    replaced the old: the report is printed and the message says the compaction stands."""
    path = tmp_path / "memory.db"
    with memcommit.open(str(path)) as store:
        for i in range(5):
            store.put(f"note {i}", id="same")
    close = memcommit.MemoryStore.close

    def close_then_ctrl_c(self: memcommit.MemoryStore) -> None:
        close(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(memcommit.MemoryStore, "close", close_then_ctrl_c)
    assert main(["compact", str(path)]) == 130
    captured = capsys.readouterr()
    assert _fields(captured.out)["records"].startswith("5 -> ")
    assert "the compaction stands" in captured.err
    monkeypatch.undo()
    with memcommit.open(str(path), read_only=True) as store:
        assert store.generation == 1 and store.get("same").text == "note 4"


def test_compact_refuses_bad_ages_and_horizons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = _sample(tmp_path)
    for args, code, message in (
        (["--kinds-after", "trace"], 2, "KIND=AGE"),
        (["--archived-older-than", "soon"], 2, "not an age"),
        (["--horizon", "999"], 1, "--horizon 999"),
    ):
        assert main(["compact", str(path), *args]) == code, args
        assert message in capsys.readouterr().err
    with memcommit.open(str(path), read_only=True) as store:
        assert store.generation == 0
    empty = tmp_path / "empty.db"
    empty.touch()
    assert main(["compact", str(empty), "--horizon", "5"]) == 1
    assert "--horizon 5" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("empty")) == ["empty.db"]
    assert empty.stat().st_size == 0  # the refused command made no log of it


@pytest.mark.parametrize(
    ("step", "stands"),
    [("new-log-written", False), ("manifest-written", False), ("renamed", True)],
)
def test_ctrl_c_inside_the_compaction_says_whether_it_stands(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    step: str,
    stands: bool,
) -> None:
    """A SIGINT at a step of the compaction: once the new log has replaced the old
    ("renamed"), the report is printed and the compaction said to stand (it printed only
    "interrupted"); before the swap, the old log is as it was."""
    from memcommit import storage

    path = tmp_path / "memory.db"
    with memcommit.open(str(path)) as store:
        for i in range(5):
            store.put(f"note {i}", id="same")
    failpoint = storage._failpoint

    def ctrl_c_at(name: str) -> None:
        failpoint(name)
        if name == step:
            signal.raise_signal(signal.SIGINT)  # as Ctrl-C on the terminal sends it

    monkeypatch.setattr(storage, "_failpoint", ctrl_c_at)
    assert main(["compact", str(path)]) == 130
    captured = capsys.readouterr()
    monkeypatch.undo()
    if stands:
        out = _fields(captured.out)
        assert out["compacted"] == f"{path} (generation 1)"
        assert out["records"].startswith("5 -> ")
        assert "the compaction stands" in captured.err
    else:
        assert captured.out == ""
        assert captured.err == "memcommit compact: error: interrupted\n"
    with memcommit.open(str(path), read_only=True) as store:
        assert store.generation == (1 if stands else 0)
        assert store.get("same").text == "note 4"  # type: ignore[union-attr]


def test_compact_refuses_a_horizon_out_of_range_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--horizon past the newest LSN is refused without a lock file left beside the log (it
    was checked only once the writer had made one); a negative one is a usage error."""
    path, _ = _sample(tmp_path)
    Path(f"{path}.lock").unlink()
    before = path.read_bytes()
    assert main(["compact", str(path), "--horizon", "999"]) == 1
    assert "--horizon 999: must be between 0 and the newest LSN 9" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.db"]
    assert path.read_bytes() == before
    for horizon in ("-1", "-5"):
        assert main(["compact", str(path), "--horizon", horizon]) == 2
        err = capsys.readouterr().err
        assert f"--horizon: {horizon!r}" in err and "an LSN is a whole number >= 0" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.db"]


def test_a_kind_named_twice_is_purged_at_the_shorter_age_in_either_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last --kinds-after of a kind won: the order of the options decided what went."""
    path, _ = _sample(tmp_path)
    for ages in (["trace=0s", "trace=1000d"], ["trace=1000d", "trace=0s"]):
        argv = ["compact", str(path), "--dry-run"]
        for age in ages:
            argv += ["--kinds-after", age]
        assert main(argv) == 0
        assert _fields(capsys.readouterr().out)["purged"] == "1", ages


@pytest.mark.parametrize("age", ["-5", "-1d", "-1.5h", "-.5w"])
def test_a_negative_age_is_the_age_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], age: str
) -> None:
    """'-1d' looked like an option to argparse: "expected one argument" instead of what is
    wrong with it, which '-5' got."""
    path, _ = _sample(tmp_path)
    for option in (["--archived-older-than", age], ["--kinds-after", f"trace={age}"]):
        assert main(["compact", str(path), *option]) == 2
        err = capsys.readouterr().err
        assert f"{age!r}: an age must be a finite number >= 0" in err, err
        assert "expected one argument" not in err


def test_snapshot_writes_a_file_the_store_opens_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, ids = _sample(tmp_path)
    out = tmp_path / "state.json"
    assert main(["snapshot", str(path), str(out)]) == 0
    lines = _fields(capsys.readouterr().out)
    assert lines["lsn"] == "9" and lines["memories"] == "3"
    with memcommit.open(str(path), snapshot=str(out)) as store:
        assert store.get(ids["fact"]).text == "Acme uses EUR and GBP."  # type: ignore[union-attr]
        assert store.lsn == 9
    assert main(["snapshot", str(tmp_path / "missing.db"), str(out)]) == 1


def test_seal_and_verify_name_missing_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.db"
    assert main(["seal", str(missing)]) == 1
    assert str(missing) in capsys.readouterr().err
    path, _ = _sample(tmp_path)
    assert main(["verify", str(path), "--key-file", str(tmp_path / "nokey")]) == 1
    assert "nokey" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    assert main(["verify", str(path), "--anchor", str(bad)]) == 1
    assert "not a memcommit seal" in capsys.readouterr().err


# --- demo -------------------------------------------------------------------------------


def test_demo_writes_the_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fleet.db"
    args = ["demo", "--path", str(path), "--memories", "300", "--agents", "3", "--tasks", "7"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "300 memories (matches)" in out
    assert "durability: batch" in out
    assert f"memcommit info {path}" in out
    with memcommit.open(str(path), read_only=True) as store:
        assert len(store) == 300
        records = list(store.records())
        assert sum(r.op == "task" for r in records) == 7
        assert any(r.op == "status" for r in records)
        assert any(r.op == "move" for r in records)
        kinds = {m.kind for m in store.find(status=None)}
        assert {"trace", "fact", "note", "episode"} <= kinds
        stale = store.find(status="stale")
        assert 0 < len(stale) < 300
        assert any(m.data for m in store.find(status=None))
        assert any(m.sources for m in store.find(kind="episode", status=None))


def test_demo_is_deterministic_from_the_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = []
    for name in ("a.db", "b.db"):
        path = tmp_path / name
        assert main(["demo", "--path", str(path), "--memories", "200", "--agents", "4"]) == 0
        with memcommit.open(str(path), read_only=True) as store:
            texts.append([(r.op, r.fields.get("text")) for r in store.records()])
    assert texts[0] == texts[1]
    assert len(texts[0]) > 200


def test_demo_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "memory.db"
    path.write_bytes(b"precious")
    assert main(["demo", "--path", str(path), "--memories", "50", "--tasks", "5"]) == 1
    err = capsys.readouterr().err
    assert str(path) in err
    assert "--force" in err
    assert path.read_bytes() == b"precious"

    assert main(["demo", "--path", str(path), "--memories", "50", "--tasks", "5", "--force"]) == 0
    with memcommit.open(str(path), read_only=True) as store:
        assert len(store) == 50


_HOLD_A_WRITER = """
import sys
import memcommit

store = memcommit.open(sys.argv[1])
store.put("committed before the demo ran", id="before")
print("ready", flush=True)
sys.stdin.readline()
store.put("committed after the demo ran", id="after")
store.close()
print("closed", flush=True)
"""


@contextlib.contextmanager
def _writer_process(path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding `path` open as its writer, one memory committed; a line on its
    standard input makes it commit one more and close."""
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLD_A_WRITER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        yield child
    finally:
        if child.poll() is None:  # the test stopped before it let the writer finish
            child.kill()
        child.communicate(timeout=60)


def test_demo_force_never_removes_a_log_another_writer_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--force removed the file before it opened it: the other writer went on committing to
    the unlinked file, and lost every commit. Now it is refused and the file is left."""
    path = tmp_path / "memory.db"
    with _writer_process(path) as writer:
        inode = path.stat().st_ino
        args = ["demo", "--path", str(path), "--memories", "50", "--tasks", "5", "--force"]
        assert main(args) == 1
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("memcommit demo: error: StoreLocked: "), err
        assert f"{path} is open for writing by another store" in err[0]
        assert f"it holds the lock on {path}.lock" in err[0] and "not replaced" in err[0]
        assert path.stat().st_ino == inode
        out, _ = writer.communicate("\n", timeout=60)
        assert out == "closed\n" and writer.returncode == 0
    with memcommit.open(str(path), read_only=True) as store:
        assert sorted(m.id for m in store.find(status=None)) == ["after", "before"]


def test_demo_refuses_a_directory_without_suggesting_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory was "already exists; pass --force to replace it", and with --force "is a
    directory": refused at once, without suggesting --force."""
    directory = tmp_path / "store.db"
    directory.mkdir()
    for force in ([], ["--force"]):
        args = ["demo", "--path", str(directory), "--memories", "50", "--tasks", "5", *force]
        assert main(args) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        lines = captured.err.splitlines()
        assert len(lines) == 1, captured.err
        assert f"{directory}: is a directory" in lines[0]
        assert "--force" not in lines[0]
    assert directory.is_dir() and list(directory.iterdir()) == []


def test_demo_from_python_m(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "memcommit", "demo"]
    command += ["--memories", "2000", "--agents", "5", "--tasks", "20"]
    result = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "2,000 memories (matches)" in result.stdout
    assert "tasks finished  20 of 20" in result.stdout
    assert result.stderr == ""  # no progress bar when stderr is not a terminal
    with memcommit.open(str(tmp_path / "memory.db"), read_only=True) as store:
        assert len(store) == 2000


# --- progress ---------------------------------------------------------------------------


def test_progress_is_silent_when_not_a_terminal() -> None:
    stream = io.StringIO()
    with Progress(10, "work", stream=stream) as bar:
        bar.update(4)
        bar.update(6)
    assert bar.count == 10
    assert stream.getvalue() == ""


def test_progress_draws_when_enabled() -> None:
    stream = io.StringIO()
    with Progress(10, "work", unit="items", stream=stream, enabled=True) as bar:
        bar.update(10)
    text = stream.getvalue()
    assert text.startswith("\rwork [")
    assert "10/10 items" in text
    assert text.endswith("\n")


def test_progress_clears_its_line_on_error() -> None:
    stream = io.StringIO()
    with pytest.raises(RuntimeError), Progress(5, stream=stream, enabled=True) as bar:
        bar.update(1)
        raise RuntimeError("boom")
    assert stream.getvalue().endswith("\r\x1b[K")
    assert not stream.getvalue().endswith("\n")


def test_python_m_memcommit_without_arguments_is_a_usage_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "memcommit"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "COMMAND" in result.stderr


@pytest.mark.parametrize("when", ["99999999999999999999", "-99999999999999999999", "banana"])
def test_serve_refuses_a_test_clock_it_cannot_read_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], when: str
) -> None:
    """A time too far for the platform was an OSError naming nothing ("Value too large for
    defined data type"); every unreadable --test-clock is a usage error naming the flag, and
    no store is made."""
    path = tmp_path / "m.db"
    assert main(["serve", str(path), "--test-clock", when]) == 2
    err = capsys.readouterr().err
    assert f"--test-clock: {when!r}" in err and "Traceback" not in err
    assert not path.exists()


def test_parse_iso_takes_a_z_for_utc_on_every_python() -> None:
    from datetime import timezone

    from memcommit.clock import parse_iso

    utc = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert parse_iso("2026-01-01T00:00:00Z") == parse_iso("2026-01-01T00:00:00+00:00") == utc
    assert parse_iso("2026-01-01T00:00:00z") == utc
    with pytest.raises(ValueError):
        parse_iso("Z")


def test_serve_on_a_port_in_use_is_one_line_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """uvicorn's own "ERROR: [Errno 98] Address already in use" and exit 3, with PATH and
    PATH.lock created, became one line, exit 1, and nothing made."""
    path = tmp_path / "memory.db"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", str(path), "--port", str(port)]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"memcommit serve: error: 127.0.0.1:{port}: address already in use")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("host", "problem"),
    [
        ("not a host!", "not an address, nor a name that resolves"),
        ("192.0.2.1", "not an address of this machine"),
    ],
    ids=["unresolvable", "not-on-this-machine"],
)
def test_serve_on_an_address_it_cannot_bind_is_one_line_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], host: str, problem: str
) -> None:
    token = tmp_path / "token"
    token.write_text("a-test-token-that-is-long-enough", encoding="utf-8")
    path = tmp_path / "memory.db"
    argv = ["serve", str(path), "--host", host, "--port", "0", "--token-file", str(token)]
    assert main(argv) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines  # the error, before any warning about TLS
    assert lines[0].startswith(f"memcommit serve: error: {host}:0: {problem}"), lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["token"]


def test_bench_compact_refuses_a_file_given_as_dir_as_not_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--dir memory.db`` (a file) said "no such directory"; it is there, and not one."""
    path, _ = _sample(tmp_path)
    before = sorted(tmp_path.iterdir())
    assert main(["bench", "compact", str(path), "--dir", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}: not a directory" in err
    assert "no such" not in err
    assert sorted(tmp_path.iterdir()) == before
    missing = tmp_path / "nowhere"
    assert main(["bench", "compact", str(path), "--dir", str(missing)]) == 1
    assert f"{missing}: no such directory" in capsys.readouterr().err
