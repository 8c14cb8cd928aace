"""Export and import carry the ids log compaction purged, so references to them stay deliberate.

Retention purges memories that a summary's `sources` still name; the compaction manifest keeps
their ids, so `verify` passes, `is_purged` is true and `get` raises `Purged`. An export lists
them on its first line, and an import keeps them in the new store's manifest: the store it
makes, on a log file or in PostgreSQL, treats them as the exported store did. A source that is
neither put nor purged is still a forged reference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import memcommit
from memcommit.cli import main
from memcommit.lineage import lineage
from memcommit.storage import ArchivedOlderThan, compact
from memcommit.testing import ControllableClock
from memcommit.testing.postgres import postgres_binaries
from memcommit.tiers import TierPolicy, compact_memory

DAY_MS = 86_400_000


def _memories(store: memcommit.MemoryStore) -> list[tuple[Any, ...]]:
    """Every memory's state but its timestamps (the importing store's clock sets those)."""
    return sorted(
        (m.id, m.text, m.kind, m.task, m.tier, m.status, m.tags, m.sources, m.data)
        for m in store.find(status=None)
    )


class Source:
    """A store whose summary and a fact cite traces retention purged.

    Also a memory put again after a put that names it: after log compaction its last put
    (the one exported) comes after the put naming it.
    """

    def __init__(self, path: Path, clock: ControllableClock) -> None:
        self.path = path
        with memcommit.open(str(path), clock=clock) as store:
            self.traces = [
                store.put(text, kind="trace", task="ci-1")
                for text in ("Ran tests: 1 failed.", "Fixed rounding.", "CI passed.")
            ]
            store.finish_task("ci-1")
            compact_memory(store, TierPolicy(cold_after=timedelta(days=7)))
            summaries = store.find(kind="summary", status=None)
            assert len(summaries) == 1 and set(summaries[0].sources) == set(self.traces)
            self.summary = summaries[0].id
            clock.advance(31 * DAY_MS)
            report = compact(store, retention=ArchivedOlderThan(seconds=30 * 86400))
            assert set(report.purged) == set(self.traces)
            self.fact = store.put("Rounding broke CI once.", kind="fact", sources=(self.traces[0],))
            store.put("A v1", id="a")
            store.put("B, derived from A", id="b", sources=("a",))
            store.put("A v2", id="a")
            compact(store)
            memcommit.verify(store)
            self.state = _memories(store)

    def check(self, store: memcommit.MemoryStore) -> None:
        """`store` (an import of this one) treats the purged traces as this one does."""
        memcommit.verify(store)
        assert _memories(store) == self.state
        for trace in self.traces:
            assert store.is_purged(trace)
            with pytest.raises(memcommit.Purged):
                store.get(trace)
        assert not store.is_purged(self.summary) and not store.is_purged("a")
        assert lineage(store, self.summary) == []
        assert lineage(store, self.fact) == []
        assert [m.id for m in lineage(store, "b")] == ["a"]
        imported = [e for e in store.manifest() if "imported_from" in e]
        assert len(imported) == 1
        assert imported[0]["purged"] == sorted(self.traces)
        assert imported[0]["generation"] == 0  # the new store's first


@pytest.fixture
def source(tmp_path: Path, clock: ControllableClock) -> Source:
    return Source(tmp_path / "src.db", clock)


def _export(source: Source, tmp_path: Path) -> Path:
    dump = tmp_path / "dump.jsonl"
    assert main(["export", str(source.path), "--out", str(dump)]) == 0
    return dump


def _lines(dump: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in dump.read_text(encoding="utf-8").splitlines()]


def _moves_on(source: Source, store: str, tmp_path: Path) -> None:
    """Export `store` (a path or URL) again: the same purged ids, and a file imported from it
    holds what the source does."""
    again = tmp_path / "again.jsonl"
    assert main(["export", store, "--out", str(again)]) == 0
    assert _lines(again)[0] == {"purged": sorted(source.traces)}
    third = tmp_path / "third.db"
    assert main(["import", str(third), str(again)]) == 0
    with memcommit.open(str(third), read_only=True) as store_:
        source.check(store_)


# -- the export ---------------------------------------------------------------------------------


def test_the_export_lists_the_purged_ids_before_the_records(
    source: Source, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    dump = _export(source, tmp_path)
    assert "and 3 purged ids" in capsys.readouterr().out
    lines = _lines(dump)
    assert lines[0] == {"purged": sorted(source.traces)}
    assert all("op" in line for line in lines[1:])
    # To standard output too.
    assert main(["export", str(source.path)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert json.loads(first) == {"purged": sorted(source.traces)}


def test_a_store_without_purged_memories_exports_no_purged_line(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    with memcommit.open(str(path)) as store:
        store.put("x")
        compact(store)
    dump = tmp_path / "dump.jsonl"
    assert main(["export", str(path), "--out", str(dump)]) == 0
    assert all("purged" not in line for line in _lines(dump))


# -- import into a log file ---------------------------------------------------------------------


@pytest.mark.parametrize("batch", ["1", "10000"])
def test_an_import_into_a_file_keeps_the_purged_ids(
    source: Source, tmp_path: Path, capsys: pytest.CaptureFixture[str], batch: str
) -> None:
    dump = _export(source, tmp_path)
    copy = tmp_path / "copy.db"
    assert main(["import", str(copy), str(dump), "--batch", batch]) == 0, capsys.readouterr().err
    assert "and 3 purged ids" in capsys.readouterr().out
    assert main(["verify", str(copy)]) == 0
    with memcommit.open(str(copy), read_only=True) as store:
        source.check(store)
    # The writer's open keeps the entry; a later log compaction adds its own after it.
    with memcommit.open(str(copy)) as store:
        compact(store)
        source.check(store)
        assert len(store.manifest()) == 2
    # And the next export lists the same ids: the store moves on again.
    _moves_on(source, str(copy), tmp_path)


def test_an_import_replaces_the_purged_ids_a_killed_import_left(
    source: Source, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An import killed after writing its purged ids and before its first commit leaves an
    empty store whose manifest lists them. A later import (allowed: the store is empty) of a
    file that lists none must not keep them, or the store would call ids it never had purged
    and take sources naming them, which the exported store refuses."""
    target = tmp_path / "target.db"
    with memcommit.open(str(target)) as store:  # what the killed import left
        store.engine.set_import_entry(
            {"at": "2026-01-01T00:00:00+00:00", "imported_from": "old.jsonl", "purged": ["gone"]}
        )
        assert store.is_purged("gone")
    plain = tmp_path / "plain.db"
    with memcommit.open(str(plain)) as store:
        store.put("a fact", id="b1")
    dump = tmp_path / "plain.jsonl"
    assert main(["export", str(plain), "--out", str(dump)]) == 0
    assert main(["import", str(target), str(dump)]) == 0, capsys.readouterr().err
    with memcommit.open(str(target)) as store:
        assert store.manifest() == [] and not store.is_purged("gone")
        with pytest.raises(memcommit.Rejected):
            store.put("cites a memory this store never had", sources=("gone",))
    # An import of a file that lists purged ids replaces the leftover with its own.
    again = tmp_path / "again.db"
    with memcommit.open(str(again)) as store:
        store.engine.set_import_entry(
            {"at": "2026-01-01T00:00:00+00:00", "imported_from": "old.jsonl", "purged": ["gone"]}
        )
    assert main(["import", str(again), str(_export(source, tmp_path))]) == 0
    with memcommit.open(str(again), read_only=True) as store:
        assert [e["imported_from"] for e in store.manifest()] == [str(tmp_path / "dump.jsonl")]
        assert not store.is_purged("gone")
        source.check(store)


def test_without_the_purged_line_verify_still_reports_the_reference(
    source: Source, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dump of an earlier release (or an edited one): the import trusts it, verify does not."""
    dump = _export(source, tmp_path)
    old = tmp_path / "old.jsonl"
    old.write_text("".join(line + "\n" for line in dump.read_text().splitlines()[1:]))
    copy = tmp_path / "copy.db"
    assert main(["import", str(copy), str(old)]) == 0
    capsys.readouterr()
    assert main(["verify", str(copy)]) == 1
    assert "ForgedReference" in capsys.readouterr().err
    assert not os.path.exists(f"{copy}.manifest")
    with memcommit.open(str(copy), read_only=True) as store:
        assert not store.is_purged(source.traces[0])


@pytest.mark.parametrize(
    ("first", "problem"),
    [
        ({"purged": "m1"}, "'purged' must be a list"),
        ({"purged": ["m1", ""]}, "purged[1] must be a non-empty string"),
        ({"purged": ["m" * 1025]}, "purged[0] is 1,025 bytes"),
    ],
)
def test_a_bad_purged_line_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first: dict[str, Any], problem: str
) -> None:
    dump = tmp_path / "dump.jsonl"
    put = {"op": "put", "key": "m0", "fields": {"text": "x"}}
    dump.write_text(json.dumps(first) + "\n" + json.dumps(put) + "\n")
    assert main(["import", str(tmp_path / "copy.db"), str(dump)]) == 1
    err = capsys.readouterr().err
    assert f"{dump}, line 1" in err and problem in err
    assert sorted(tmp_path.iterdir()) == [dump]


def test_a_purged_line_after_a_record_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "dump.jsonl"
    put = {"op": "put", "key": "m0", "fields": {"text": "x", "sources": ["gone"]}}
    dump.write_text(json.dumps(put) + "\n" + json.dumps({"purged": ["gone"]}) + "\n")
    assert main(["import", str(tmp_path / "copy.db"), str(dump)]) == 1
    err = capsys.readouterr().err
    assert f"{dump}, line 2" in err and "must come before the records" in err
    assert sorted(tmp_path.iterdir()) == [dump]


_FAILING = [
    {"purged": ["gone"]},
    {"op": "put", "key": "m0", "fields": {"text": "x", "sources": ["gone"]}},
    {"op": "status", "key": "never-put", "fields": {"status": "stale"}},  # refused: no memory
]


def _failing_dump(tmp_path: Path) -> Path:
    """A dump whose purged line and first put are good and whose last line is refused."""
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps(r) + "\n" for r in _FAILING))
    return dump


def test_an_import_that_writes_nothing_leaves_no_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = _failing_dump(tmp_path)
    assert main(["import", str(tmp_path / "copy.db"), str(dump)]) == 1
    assert "nothing was imported" in capsys.readouterr().err
    assert sorted(tmp_path.iterdir()) == [dump]  # no log, lock file or manifest


def test_a_file_of_only_purged_ids_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_text(json.dumps({"purged": ["gone"]}) + "\n")
    assert main(["import", str(tmp_path / "copy.db"), str(dump)]) == 0
    assert "nothing was written" in capsys.readouterr().out
    assert sorted(tmp_path.iterdir()) == [dump]


# -- import into PostgreSQL ---------------------------------------------------------------------


@pytest.fixture
def pg_store(request: pytest.FixtureRequest) -> str:
    """The URL of a new store in the session's PostgreSQL server; skipped without one."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("needs psycopg for a store in PostgreSQL")
    if not os.environ.get("MEMCOMMIT_PG_DSN") and postgres_binaries() is None:
        pytest.skip("needs the machine's PostgreSQL (initdb) or MEMCOMMIT_PG_DSN")
    postgres = request.getfixturevalue("postgres")
    return f"{postgres.dsn}?store=purged-{uuid.uuid4().hex[:12]}"


@pytest.mark.parametrize("batch", ["1", "10000"])
def test_an_import_into_postgres_keeps_the_purged_ids(
    source: Source,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    pg_store: str,
    batch: str,
) -> None:
    dump = _export(source, tmp_path)
    assert main(["import", pg_store, str(dump), "--batch", batch]) == 0, capsys.readouterr().err
    assert main(["verify", pg_store]) == 0, capsys.readouterr().err
    with memcommit.open(pg_store) as store:  # a new client: its follower reads the manifest
        source.check(store)
    # From PostgreSQL back to a file, by the same path.
    _moves_on(source, pg_store, tmp_path)


def test_an_import_into_postgres_takes_a_source_put_in_a_later_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pg_store: str
) -> None:
    """No retention: log compaction alone puts a memory's last put after the put naming it."""
    path = tmp_path / "src.db"
    with memcommit.open(str(path)) as store:
        store.put("A v1", id="a")
        store.put("B, derived from A", id="b", sources=("a",))
        store.put("A v2", id="a")
        compact(store)
        state = _memories(store)
    dump = tmp_path / "dump.jsonl"
    assert main(["export", str(path), "--out", str(dump)]) == 0
    assert [line["key"] for line in _lines(dump) if line["op"] == "put"] == ["b", "a"]
    assert main(["import", pg_store, str(dump), "--batch", "1"]) == 0, capsys.readouterr().err
    with memcommit.open(pg_store) as store:
        memcommit.verify(store)
        assert _memories(store) == state and store.manifest() == []


def test_an_import_into_postgres_from_a_pipe(source: Source, tmp_path: Path, pg_store: str) -> None:
    dump = _export(source, tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "memcommit", "import", "--batch", "1", pg_store, "-"],
        input=dump.read_bytes(),
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    with memcommit.open(pg_store) as store:
        source.check(store)
        assert store.manifest()[0]["imported_from"] == "<stdin>"


def test_an_import_into_postgres_refuses_a_forged_source_before_writing(
    source: Source, tmp_path: Path, capsys: pytest.CaptureFixture[str], pg_store: str
) -> None:
    dump = _export(source, tmp_path)
    forged = tmp_path / "forged.jsonl"
    lines = dump.read_text().splitlines()
    forged.write_text("".join(line + "\n" for line in lines[1:]))  # without the purged line
    capsys.readouterr()
    assert main(["import", pg_store, str(forged), "--batch", "1"]) == 1
    err = capsys.readouterr().err
    assert "neither puts a memory with that id nor lists it as purged" in err
    assert "nothing was imported" in err
    with memcommit.open(pg_store) as store:
        assert store.lsn == 0 and store.manifest() == []


def test_an_import_into_postgres_that_writes_nothing_takes_its_entry_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pg_store: str
) -> None:
    dump = _failing_dump(tmp_path)
    assert main(["import", pg_store, str(dump)]) == 1
    assert "nothing was imported" in capsys.readouterr().err
    with memcommit.open(pg_store) as store:
        assert store.lsn == 0 and store.manifest() == [] and not store.is_purged("gone")
    # The store is still empty: the import can be run again, with a good file.
    dump.write_text("".join(json.dumps(r) + "\n" for r in _FAILING[:2]))
    assert main(["import", pg_store, str(dump)]) == 0
    with memcommit.open(pg_store) as store:
        assert store.is_purged("gone") and store.get("m0").sources == ("gone",)
        memcommit.verify(store)
