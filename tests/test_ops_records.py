"""The records table (memcommit.ops.RECORDS) is what the log's records, export and import use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import memcommit
from memcommit import ops
from memcommit.cli.export_format import BadLine, parse_line, record_line


def _store_with_every_kind_of_record(path: Path) -> memcommit.MemoryStore:
    store = memcommit.open(str(path))
    with store.commit() as c:
        c.put("hello", id="m1", kind="fact", task="t1", data={"n": 1}, tags=["a"], sources=[])
        c.put("plain", id="m2")
    store.stale("m1", reason="folded")
    store.restore("m1")
    store.move("m2", "mid")
    store.finish_task("t1")
    engine = store.engine
    engine.wait_durable(engine.write_entities(store.now_us(), [('lock\x00["a"]', b'{"name":"a"}')]))
    engine.wait_durable(engine.write_entities(store.now_us(), [('lock\x00["a"]', None)]))
    memcommit.seal(store)
    memcommit.seal(store, key=b"secret")
    return store


@pytest.fixture
def records(tmp_path: Path) -> list[memcommit.Record]:
    with _store_with_every_kind_of_record(tmp_path / "log.db") as store:
        return list(store.records())


def test_every_kind_of_record_is_declared_once_with_its_own_op_number() -> None:
    assert [kind.name for kind in ops.RECORDS] == [
        "put",
        "status",
        "move",
        "task",
        "entity",
        "seal",
    ]
    assert sorted(kind.code for kind in ops.RECORDS) == [1, 2, 3, 4, 5, 6]
    for kind in ops.RECORDS:
        assert ops.record_kind(kind.name) is kind
    assert ops.record_kind("fold") is None
    assert ops.record_kind(["put"]) is None


def test_a_records_fields_are_the_declared_ones_in_the_declared_order(
    records: list[memcommit.Record],
) -> None:
    seen = set()
    for record in records:
        kind = ops.record_kind(record.op)
        assert kind is not None, record
        seen.add(kind.name)
        assert record.raw()[2] == kind.code, record
        assert list(record.fields) == [field.name for field in kind.fields], record
    assert seen == {kind.name for kind in ops.RECORDS}


def test_an_export_lines_fields_hold_their_declared_types(
    records: list[memcommit.Record],
) -> None:
    for record in records:
        line = json.loads(record_line(record))
        kind = ops.record_kind(line["op"])
        assert kind is not None
        for field in kind.fields:
            assert field.type.holds(line["fields"][field.name]), (record, field.name)


def test_every_exported_line_but_a_seal_is_read_back_as_the_record_it_was(
    records: list[memcommit.Record],
) -> None:
    for record in records:
        change = parse_line(record_line(record).encode(), record.lsn)
        if record.op == "seal":
            assert change is None
            continue
        assert change is not None
        assert (change.op, change.key, change.line) == (record.op, record.key, record.lsn)
        fields: dict[str, Any] = record.fields
        if record.op == "put":
            assert (change.text, change.kind, change.task, change.data) == (
                fields["text"],
                fields["kind"],
                fields["task"],
                fields["data"],
            )
            assert (change.tier, change.status) == (fields["tier"], fields["status"])
            assert (change.tags, change.sources) == (fields["tags"], fields["sources"])
        elif record.op == "status":
            assert (change.status, change.reason) == (fields["status"], fields["reason"])
        elif record.op == "move":
            assert change.tier == fields["tier"]
        elif record.op == "entity":
            state = fields["state"]
            assert (None if change.state is None else json.loads(change.state)) == state


@pytest.mark.parametrize(
    ("op", "fields", "message"),
    [
        ("put", {}, "fields.text must be a string, got None"),
        ("put", {"text": "x", "kind": None}, "fields.kind must be a string, got None"),
        ("put", {"text": "x", "data": []}, "fields.data must be an object or null, got []"),
        ("put", {"text": "x", "task": 1}, "fields.task must be a string or null, got 1"),
        ("put", {"text": "x", "tier": 3}, "fields.tier must be a string, got 3"),
        (
            "put",
            {"text": "x", "status": "gone"},
            "fields.status must be 'active' or 'stale', got 'gone'",
        ),
        ("put", {"text": "x", "tags": None}, "fields.tags must be a list of strings, got None"),
        ("put", {"text": "x", "sources": [1]}, "fields.sources must be a list of strings, got [1]"),
        ("status", {}, "fields.status must be 'active' or 'stale', got None"),
        (
            "status",
            {"status": "stale", "reason": 2},
            "fields.reason must be a string or null, got 2",
        ),
        ("move", {}, "fields.tier must be a string, got None"),
        ("task", {"finished": False}, "a task record must have fields.finished = true"),
        ("task", {"finished": None}, "a task record must have fields.finished = true"),
        ("entity", {}, "an entity record must have fields.state (an object, or null to remove)"),
    ],
)
def test_a_field_that_is_not_what_the_table_declares_is_refused_naming_it(
    op: str, fields: dict[str, Any], message: str
) -> None:
    kind = ops.record_kind(op)
    assert kind is not None
    with pytest.raises(ops.BadField) as raised:
        ops.check_fields(kind, fields)
    assert str(raised.value) == message
    line = json.dumps({"op": op, "key": "k", "fields": fields}).encode()
    with pytest.raises(BadLine) as bad:
        parse_line(line, 1)
    assert str(bad.value) == message


def test_a_line_that_leaves_fields_out_takes_their_defaults() -> None:
    put = ops.record_kind("put")
    assert put is not None
    assert ops.check_fields(put, {"text": "x", "created_at": "not checked"}) == {
        "kind": "note",
        "text": "x",
        "data": None,
        "task": None,
        "tier": None,
        "status": None,
        "tags": (),
        "sources": (),
        "vector": None,
    }
    task = ops.record_kind("task")
    assert task is not None
    assert ops.check_fields(task, {}) == {"finished": True}


def test_an_unknown_op_is_refused_naming_every_kind_the_table_declares() -> None:
    with pytest.raises(BadLine) as bad:
        parse_line(b'{"op": "fold", "key": "m1", "fields": {}}', 1)
    assert str(bad.value) == "unknown op 'fold' (expected put, status, move, task, entity or seal)"
