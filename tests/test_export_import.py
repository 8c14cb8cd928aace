"""`memcommit export` then `memcommit import` reproduces the store: memories and roles.

Export/import is the backup path, so the imported store must replay to the state of the
source: every memory's fields, tier and status, finished tasks and every role's entities. A
refused import leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import memcommit
from memcommit.cli import main
from memcommit.storage import compact

# A lock's state as the locks role writes it (what its reads take back).
_LOCK_STATE = {
    "name": "a",
    "owner": "agent-1",
    "token": 1,
    "acquired_at_ms": 1_767_225_660_000,
    "expires_at_ms": 1_767_225_690_000,
}


def _memories(store: memcommit.MemoryStore) -> list[tuple[Any, ...]]:
    """Every memory's state but its timestamps (the importing store's clock sets those)."""
    return sorted(
        (m.id, m.text, m.kind, m.task, m.tier, m.status, m.tags, m.sources, m.data)
        for m in store.find(status=None)
    )


def _entities(store: memcommit.MemoryStore) -> dict[str, Any]:
    """Every live role entity, decoded: what the roles replay from the log."""
    return {key: json.loads(state) for key, state in store.engine.view().entities()}


def _state(path: Path) -> tuple[Any, ...]:
    with memcommit.open(str(path), read_only=True) as store:
        return _memories(store), _entities(store), store.is_task_finished("task-a")


def _round_trip(tmp_path: Path, source: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    dump = tmp_path / "dump.jsonl"
    copy = tmp_path / "copy.db"
    assert main(["export", str(source), "--out", str(dump)]) == 0
    assert main(["import", str(copy), str(dump), "--batch", "3"]) == 0, capsys.readouterr().err
    return copy


def _store_with_roles(path: Path, *, compacted: bool) -> dict[str, Any]:
    """Memories with moves and status changes, and every kind of role entity."""
    with memcommit.open(str(path)) as store:
        fact = store.put("Acme bills in EUR.", kind="fact", task="task-a", tier="mid")
        trace = store.put("agent-1 ran the refunds job", kind="trace", task="task-a")
        note = store.put("Cutover on Friday.", tags=("ops",), sources=(fact,))
        store.stale(fact, reason="superseded")
        store.move(fact, "long")
        # The last put of `fact` carries its tier and status: after log compaction it is all
        # that is left of the stale and the move before it.
        store.put("Acme bills in EUR and GBP.", kind="fact", id=fact, task="task-a")
        store.move(note, "archive")
        store.finish_task("task-a")

        lease = store.locks.acquire("deploy", owner="agent-1", ttl_ms=3_600_000)
        assert lease is not None
        gone = store.locks.acquire("gone", owner="agent-1", ttl_ms=3_600_000)
        assert gone is not None
        store.locks.release("gone", token=gone.token)  # an entity removal
        store.state.put(("team", "payments"), "owner", {"name": "ana"})
        store.state.put(("team", "payments"), "owner", {"name": "bo"})
        run = store.runs.create(agent_id="agent-1", input={"q": "refunds"})
        claim = store.runs.claim(run.run_id, worker_id="w1", ttl_ms=3_600_000)
        store.steps.start(run.run_id, "s1", name="fetch", token=claim.token)
        store.checkpoints.put(run.run_id, state={"step": 1}, token=claim.token)
        store.effects.record(run.run_id, "email", result={"sent": True}, token=claim.token)
        store.idempotency.reserve("req-1", ttl_ms=3_600_000)
        store.artifacts.save(("agent-1",), "report", b"\x00\x01 bytes")
        conversation = store.conversations.create(agent_id="agent-1")
        store.conversations.append(
            conversation.conversation_id,
            [{"role": "user", "content": "hi"}],
            run_id=run.run_id,
            token=claim.token,
        )
        store.agent_revisions.create_draft("agent-1", {"prompt": "be brief"})
        if compacted:
            compact(store)
            # After the fold: records kept as they are.
            store.stale(trace)
            store.state.put(("team", "payments"), "owner", {"name": "cy"})
    return {"fact": fact, "trace": trace, "note": note, "run": run.run_id}


@pytest.mark.parametrize("compacted", [False, True], ids=["log", "compacted-log"])
def test_import_replays_to_the_state_of_the_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], compacted: bool
) -> None:
    source = tmp_path / "memory.db"
    ids = _store_with_roles(source, compacted=compacted)
    copy = _round_trip(tmp_path, source, capsys)

    memories, entities, finished = _state(copy)
    assert (memories, entities, finished) == _state(source)
    assert finished
    assert any(key.startswith("lock\x00") for key in entities)
    assert not any("gone" in key and key.startswith("lock\x00") for key in entities)

    with memcommit.open(str(source), read_only=True) as a, memcommit.open(str(copy)) as b:
        fact_a, fact_b = a.get(ids["fact"]), b.get(ids["fact"])
        assert fact_a is not None and fact_b is not None
        assert (fact_b.status, fact_b.tier) == (fact_a.status, fact_a.tier) == ("stale", "long")
        # The roles read the same state back.
        assert b.locks.get("deploy") == a.locks.get("deploy")
        assert b.state.get(("team", "payments"), "owner") == a.state.get(
            ("team", "payments"), "owner"
        )
        assert b.runs.get(ids["run"]) == a.runs.get(ids["run"])
        assert b.checkpoints.list(ids["run"]) == a.checkpoints.list(ids["run"])
        assert b.artifacts.load(("agent-1",), "report") == a.artifacts.load(("agent-1",), "report")
        # Counters came back too: a fencing token is never handed out twice.
        held = b.locks.get("deploy")
        assert held is not None
        assert b.locks.release("deploy", token=held.token)
        again = b.locks.acquire("deploy", owner="agent-2", ttl_ms=1000)
        assert again is not None and again.token > held.token


def test_a_stale_memory_comes_back_stale_after_log_compaction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "memory.db"
    with memcommit.open(str(source)) as store:
        stale = store.put("an old belief", tier="mid")
        store.stale(stale, reason="disproved")
        store.put("an old belief, reworded", id=stale)  # its last put says stale
        moved = store.put("a summary")
        store.move(moved, "long")
        store.put("a summary, revised", id=moved)  # its last put says tier long
        compact(store)
        # Only the last puts are left: the status change and the move are folded into them.
        assert [r.op for r in store.records() if r.op != "seal"] == ["put", "put"]
    copy = _round_trip(tmp_path, source, capsys)
    with memcommit.open(str(copy), read_only=True) as store:
        a, b = store.get(stale), store.get(moved)
        assert a is not None and b is not None
        assert (a.status, a.tier, a.text) == ("stale", "mid", "an old belief, reworded")
        assert (b.status, b.tier, b.text) == ("active", "long", "a summary, revised")
        assert store.find() == [b]  # the stale one is not served as active


def test_a_put_line_without_tier_or_status_keeps_the_memory_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "dump.jsonl"
    lines = [
        {"op": "put", "key": "m1", "fields": {"text": "first", "tier": "mid"}},
        {"op": "status", "key": "m1", "fields": {"status": "stale", "reason": "old"}},
        {"op": "put", "key": "m1", "fields": {"text": "second"}},
    ]
    dump.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    copy = tmp_path / "copy.db"
    assert main(["import", str(copy), str(dump)]) == 0
    with memcommit.open(str(copy), read_only=True) as store:
        memory = store.get("m1")
        assert memory is not None
        assert (memory.text, memory.tier, memory.status) == ("second", "mid", "stale")


def test_import_refuses_a_store_that_holds_records_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "memory.db"
    _store_with_roles(source, compacted=False)
    dump = tmp_path / "dump.jsonl"
    assert main(["export", str(source), "--out", str(dump)]) == 0
    target = tmp_path / "target.db"
    with memcommit.open(str(target)) as store:
        store.put("already here", id="m-existing")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    capsys.readouterr()

    assert main(["import", str(target), str(dump)]) == 1
    err = capsys.readouterr().err
    assert f"{target} already holds 1 records" in err
    assert "nothing was written" in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_import_into_an_empty_file_or_an_empty_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_text(json.dumps({"op": "put", "key": "m1", "fields": {"text": "x"}}) + "\n")
    empty_file = tmp_path / "empty.db"
    empty_file.touch()
    empty_log = tmp_path / "log.db"
    memcommit.open(str(empty_log)).close()
    for target in (empty_file, empty_log):
        assert main(["import", str(target), str(dump)]) == 0
        with memcommit.open(str(target), read_only=True) as store:
            assert "m1" in store


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ({"op": "entity", "key": "lock\x00x", "fields": {}}, "fields.state"),
        ({"op": "entity", "key": "lock\x00" + "k" * 1100, "fields": {"state": {}}}, "'key'"),
        ({"op": "status", "key": "never-put", "fields": {"status": "stale"}}, "refused"),
    ],
    ids=["entity-without-state", "entity-key-too-long", "refused-by-the-store"],
)
def test_a_refused_import_leaves_nothing_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: dict[str, Any], problem: str
) -> None:
    dump = tmp_path / "dump.jsonl"
    good = [
        {"op": "put", "key": "m0", "fields": {"text": "fine"}},
        {"op": "entity", "key": 'lock\x00["a"]', "fields": {"state": _LOCK_STATE}},
    ]
    dump.write_text("".join(json.dumps(r) + "\n" for r in [*good, line]), encoding="utf-8")
    target = tmp_path / "copy.db"
    assert main(["import", str(target), str(dump)]) == 1
    err = capsys.readouterr().err
    assert f"{dump}, line 3" in err
    assert problem in err
    assert "nothing was imported" in err
    # The batch's memories and entities alike: no log, no lock file.
    assert sorted(tmp_path.iterdir()) == [dump]


@pytest.mark.parametrize(
    ("lines", "bad"),
    [
        ([{}, {}, {"tier": "nope"}], 3),
        # A status line ends the first run of puts: the bad put is the second of the next.
        ([{}, "stale", {}, {"tier": "nope"}, {}], 4),
    ],
    ids=["first-run", "a-later-run"],
)
def test_a_put_the_store_refuses_is_named_by_its_line_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[Any], bad: int
) -> None:
    """It said ``line 3: rows[1]: tier: ...``: the index of the put in the batch the import
    hands the store, which means nothing in the file. The line says where it is."""
    records = []
    for n, line in enumerate(lines):
        if line == "stale":
            records.append({"op": "status", "key": "m0", "fields": {"status": "stale"}})
        else:
            records.append({"op": "put", "key": f"m{n}", "fields": {"text": f"memory {n}", **line}})
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert main(["import", str(tmp_path / "copy.db"), str(dump)]) == 1
    err = capsys.readouterr().err
    assert f'{dump}, line {bad}: tier: "nope" is not a tier; use one of working,' in err
    assert "rows[" not in err
    assert "nothing was imported" in err
    assert sorted(tmp_path.iterdir()) == [dump]


_RUN_KEY = 'run\x00["r1"]'


@pytest.mark.parametrize(
    ("key", "state", "problem"),
    [
        (_RUN_KEY, 5, "fields.state of entity kind 'run' must be an object"),
        (_RUN_KEY, {"run_id": "r1"}, "fields.state of entity kind 'run' lacks 'agent_id'"),
        ("nonsense", {}, "'key' of an entity is its kind, a NUL"),
        ('nonsense\x00["r1"]', {}, "'key' names entity kind 'nonsense', which no role keeps"),
        ("nonsense\x00x", None, "which no role keeps"),  # a removal names a known kind too
        ("lock\x00a", _LOCK_STATE, "the key of an entity of kind 'lock'"),
        ('lock\x00["a",1]', _LOCK_STATE, "the key of an entity of kind 'lock'"),
        ('lock\x00["a"]', {**_LOCK_STATE, "token": "1"}, "fields.state.token"),
        ('lock\x00["a"]', {**_LOCK_STATE, "token": True}, "must be an integer, got True"),
        ('lock\x00["a"]', {**_LOCK_STATE, "owner": None}, "fields.state.owner"),
        ('counter\x00["locks.token","a"]', {"value": "1"}, "fields.state.value"),
        ('state\x00[["team"],"k"]', {"namespace": "team"}, "lacks 'key'"),
        (
            'artifact.data\x00[["a"],"r","00000000000000000001"]',
            {"data_b64": "not base64!"},
            "must be an artifact's bytes in base64",
        ),
        ("grouping\x00run.by_nothing", {"version": 1}, "marks a grouping the log keeps"),
        ("run.by_status\x00pending", {}, "an entry of grouping 'run.by_status'"),
        ('lg.checkpoint\x00["t"]', [1], "fields.state of entity kind 'lg.checkpoint'"),
    ],
    ids=[
        "run-state-not-an-object",
        "run-state-without-its-fields",
        "key-without-a-kind",
        "kind-of-no-role",
        "removal-of-a-kind-of-no-role",
        "key-not-a-json-array",
        "key-with-a-number",
        "field-of-the-wrong-type",
        "bool-for-an-int",
        "null-for-a-string",
        "counter-value-not-an-int",
        "state-entry-without-its-key",
        "artifact-bytes-not-base64",
        "marker-of-no-grouping",
        "grouping-entry-without-its-entity",
        "langgraph-state-not-an-object",
    ],
)
def test_an_entity_line_its_role_could_not_read_is_refused_and_nothing_is_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, state: Any, problem: str
) -> None:
    dump = tmp_path / "dump.jsonl"
    lines = [
        {"op": "put", "key": "m0", "fields": {"text": "fine"}},
        {"op": "entity", "key": 'lock\x00["a"]', "fields": {"state": _LOCK_STATE}},
        {"op": "entity", "key": key, "fields": {"state": state}},
    ]
    dump.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert main(["import", str(tmp_path / "copy.db"), str(dump)]) == 1
    err = capsys.readouterr().err
    assert f"{dump}, line 3: " in err
    assert problem in err
    assert "nothing was imported" in err
    assert sorted(tmp_path.iterdir()) == [dump]


@pytest.mark.parametrize("state", [5, {"run_id": "r1"}], ids=["an-int", "a-run-id-alone"])
def test_a_run_line_the_runs_role_could_not_read_leaves_the_store_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], state: Any
) -> None:
    """Into an empty log: refused with the line's number, the log holds nothing new."""
    target = tmp_path / "store.db"
    memcommit.open(str(target)).close()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    dump = tmp_path / "dump.jsonl"
    dump.write_text(json.dumps({"op": "entity", "key": _RUN_KEY, "fields": {"state": state}}))
    assert main(["import", str(target), str(dump)]) == 1
    err = capsys.readouterr().err
    assert f"{dump}, line 1: fields.state of entity kind 'run'" in err
    assert "nothing was imported" in err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p != dump} == before
    with memcommit.open(str(target), read_only=True) as store:
        assert store.lsn == 0
        assert store.runs.get("r1") is None


_VECTORS = Path(__file__).parent / "vectors" / "entities"


@pytest.mark.parametrize("role", sorted(p.stem for p in _VECTORS.glob("*.json")))
def test_every_entity_the_roles_and_langgraph_write_imports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], role: str
) -> None:
    """The golden entity records of each role (and of the LangGraph checkpointer and store),
    removals included, are taken by import as they are, and read back as they were."""
    records = json.loads((_VECTORS / f"{role}.json").read_text(encoding="utf-8"))["records"]
    dump = tmp_path / "dump.jsonl"
    dump.write_text(
        "".join(
            json.dumps(
                {
                    "op": "entity",
                    "key": f"{r['kind']}\x00{r['key']}",
                    "fields": {"state": r["state"]},
                }
            )
            + "\n"
            for r in records
        ),
        encoding="utf-8",
    )
    target = tmp_path / "copy.db"
    assert main(["import", str(target), str(dump)]) == 0, capsys.readouterr().err
    live = {f"{r['kind']}\x00{r['key']}": r["state"] for r in records}  # the last of each key
    with memcommit.open(str(target), read_only=True) as store:
        assert _entities(store) == {key: state for key, state in live.items() if state is not None}


def test_import_knows_every_kind_of_entity_the_store_writes() -> None:
    from memcommit.cli import export_format
    from memcommit.roles.groupings import KEPT
    from memcommit.roles.logged_groupings import MARKER, entry_kind
    from memcommit.roles.medium import KINDS

    known = set(export_format._known_kinds())
    assert set(KINDS) <= known
    assert MARKER in known
    assert {entry_kind(kind, name) for kind, named in KEPT.items() for name in named} <= known
    # Every field of every role's state is one the check knows how to check.
    for kind in KINDS:
        assert export_format._fields_of(export_format._ROLE_STATES[kind])
    pytest.importorskip("langgraph")
    from memcommit.integrations.langgraph import saver
    from memcommit.integrations.langgraph import store as lg_store

    assert set(export_format.LANGGRAPH_KINDS) == {
        saver.CHECKPOINT,
        saver.WRITES,
        saver.HEAD,
        lg_store.ITEM,
    }


def test_an_import_of_a_file_of_no_records_leaves_nothing_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_text("")
    assert main(["import", str(tmp_path / "copy.db"), str(dump)]) == 0
    assert "nothing was written" in capsys.readouterr().out
    assert sorted(tmp_path.iterdir()) == [dump]


def test_export_and_snapshot_refuse_to_write_over_their_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "memory.db"
    with memcommit.open(str(path)) as store:
        store.put("kept")
    before = path.read_bytes()
    for argv in (
        ["export", str(path), "--out", str(path)],
        ["export", str(path), "--out", str(tmp_path / "." / "memory.db.lock")],
        ["snapshot", str(path), str(path)],
    ):
        assert main(argv) == 1, argv
        assert "writing there would replace it" in capsys.readouterr().err
    assert path.read_bytes() == before


def test_an_interrupted_import_of_nothing_leaves_nothing_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_text(json.dumps({"op": "put", "key": "m0", "fields": {"text": "x"}}) + "\n")

    def interrupted(self: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("memcommit.cli.transfer._Import.flush", interrupted)
    assert main(["import", str(tmp_path / "copy.db"), str(dump)]) == 130
    assert sorted(tmp_path.iterdir()) == [dump]


def test_an_import_interrupted_after_a_batch_says_what_it_left_and_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from memcommit.cli.transfer import _Import

    dump = tmp_path / "dump.jsonl"
    lines = [json.dumps({"op": "put", "key": f"m{i}", "fields": {"text": "x"}}) for i in range(3)]
    dump.write_text("\n".join(lines) + "\n")
    flush = _Import.flush
    calls = []

    def interrupted_second_time(self: _Import) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        flush(self)

    monkeypatch.setattr("memcommit.cli.transfer._Import.flush", interrupted_second_time)
    target = tmp_path / "copy.db"
    assert main(["import", str(target), str(dump), "--batch", "1"]) == 130
    err = capsys.readouterr().err
    assert f"interrupted after 1 record was imported into {target} (LSN 1..1)" in err
    assert "partial import: remove it" in err
    with memcommit.open(str(target), read_only=True) as store:
        assert store.lsn == 1


def test_an_export_piped_into_an_import_without_a_file_name(tmp_path: Path) -> None:
    """`memcommit export PATH | memcommit import TARGET`: with no FILE, import reads stdin."""
    source, target = tmp_path / "memory.db", tmp_path / "copy.db"
    with memcommit.open(str(source)) as store:
        ids = [store.put(f"note {i}") for i in range(3)]
    memcommit_cli = [sys.executable, "-m", "memcommit"]
    exported = subprocess.run(
        [*memcommit_cli, "export", str(source)], capture_output=True, check=True, timeout=60
    )
    imported = subprocess.run(
        [*memcommit_cli, "import", str(target)],
        input=exported.stdout,
        capture_output=True,
        timeout=60,
    )
    assert imported.returncode == 0, imported.stderr
    with memcommit.open(str(target), read_only=True) as store:
        assert [m.text for m in store.get_many(ids)] == ["note 0", "note 1", "note 2"]


def test_an_export_to_a_file_syncs_its_directory_after_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out FILE`` is replaced as the files beside the log are (memcommit.files): a temp
    file of this process, fsynced, renamed over FILE, then FILE's directory fsynced, so that
    the new FILE survives a power loss once the command has said it is written."""
    source = tmp_path / "memory.db"
    with memcommit.open(str(source)) as store:
        store.put("one", id="a")
    out = tmp_path / "dump.jsonl"
    out.write_text("the old export\n")
    events: list[tuple[str, object]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        kind = "fsync a directory" if stat.S_ISDIR(st.st_mode) else "fsync a file"
        events.append((kind, (st.st_dev, st.st_ino)))
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        events.append(("rename", (os.fspath(src), os.fspath(dst))))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    assert main(["export", str(source), "--out", str(out)]) == 0
    monkeypatch.undo()
    assert "exported 1 records" in capsys.readouterr().out
    assert [json.loads(line)["key"] for line in out.read_text().splitlines()] == ["a"]

    renames = [i for i, (kind, _) in enumerate(events) if kind == "rename"]
    assert len(renames) == 1, events
    (at,) = renames
    # The temp file is this write's own (two exports of FILE at once never share one).
    temp, target = events[at][1]
    assert re.fullmatch(rf"{re.escape(str(out))}\.tmp-{os.getpid()}-\d+", temp) and target == str(
        out
    )
    assert events[at - 1][0] == "fsync a file", events  # its data, before the rename
    directory = os.stat(tmp_path)
    assert ("fsync a directory", (directory.st_dev, directory.st_ino)) in events[at + 1 :], events
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("dump")) == ["dump.jsonl"]


def test_imported_memories_take_the_imports_time_as_the_readme_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from datetime import datetime, timezone

    from memcommit.testing import ControllableClock

    source = tmp_path / "memory.db"
    then = datetime(2024, 1, 1, tzinfo=timezone.utc)
    with memcommit.open(str(source), clock=ControllableClock(then)) as store:
        mid = store.put("an old trace", kind="trace")
        old = store.get(mid)
        assert old is not None and old.created_at == then
    started = datetime.now(timezone.utc)
    copy = _round_trip(tmp_path, source, capsys)
    with memcommit.open(str(copy)) as store:
        got = store.get(mid)
        assert got is not None and got.text == "an old trace"
        assert got.created_at >= started.replace(microsecond=0)
        assert got.updated_at >= started.replace(microsecond=0)
