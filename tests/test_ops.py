"""The operations table (memcommit.ops) is the one declaration every commit surface follows."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import memcommit
from memcommit import ops
from memcommit.aio import AsyncMemoryStore
from memcommit.remote.client import RemoteCommit

# Where each operation is a method: a commit (local and remote) takes every operation; the
# stores take the one-operation shortcuts.
COMMITS = (memcommit.Commit, RemoteCommit)
STORES = (memcommit.MemoryStore, AsyncMemoryStore)


def _parameters(method: Any) -> list[str]:
    return [p for p in inspect.signature(method).parameters if p != "self"]


@pytest.mark.parametrize("op", ops.OPERATIONS, ids=lambda op: op.name)
def test_every_commit_takes_each_operation_with_the_declared_fields(op: ops.Operation) -> None:
    for cls in COMMITS:
        params = _parameters(getattr(cls, op.name))
        assert sorted(params) == sorted(op.fields), cls
        assert params[0] == op.positional, cls


@pytest.mark.parametrize("op", ops.OPERATIONS, ids=lambda op: op.name)
def test_the_stores_shortcuts_take_the_declared_fields(op: ops.Operation) -> None:
    for cls in STORES:
        method = getattr(cls, op.name, None)
        if method is None:  # put_many and expect exist only inside a commit
            assert op.name in ("put_many", "expect")
            continue
        params = _parameters(method)
        assert sorted(params) == sorted(op.fields), cls
        assert params[0] == op.positional, cls


class _Recorder:
    """Stands in for a commit: records each call as (method, first argument, keywords)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def call(first: Any, **values: Any) -> None:
            self.calls.append((name, first, values))

        return call


def test_a_wire_list_runs_as_the_call_it_was_made_from() -> None:
    values = {
        "id": "m1",
        "text": "hello",
        "kind": "fact",
        "task": "t",
        "tier": "mid",
        "data": {"n": [1, 2]},
        "tags": ("a", "b"),
        "sources": (),
        "vector": (0.5, -2),
    }
    wire_list = ops.to_wire(ops.PUT, values)
    assert wire_list == [
        "put",
        "m1",
        "hello",
        "fact",
        "t",
        "mid",
        '{"n":[1,2]}',
        ["a", "b"],
        [],
        [0.5, -2.0],
    ]
    assert ops.check_wire(wire_list, "ops[0]") is ops.PUT
    c = _Recorder()
    ops.apply(c, wire_list)
    assert c.calls == [
        (
            "put",
            "hello",
            {
                "id": "m1",
                "kind": "fact",
                "task": "t",
                "tier": "mid",
                "data": {"n": [1, 2]},
                "tags": ["a", "b"],
                "sources": [],
                "vector": [0.5, -2.0],
            },
        )
    ]


def test_check_wire_names_the_place_and_the_fault() -> None:
    with pytest.raises(ValueError, match=r"^x\.ops\[2\] must be a list starting with one of"):
        ops.check_wire(["nope"], "x.ops[2]")
    with pytest.raises(ValueError, match=r"^x\.ops\[0\]: 'move' takes 2 values, not 1$"):
        ops.check_wire(["move", "m1"], "x.ops[0]")
    assert [ops.by_name(op.name) for op in ops.OPERATIONS] == list(ops.OPERATIONS)
    assert ops.by_name("seal") is None


def test_data_that_is_not_json_text_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="data must travel as JSON text"):
        ops.apply(_Recorder(), ["put", "m", "t", "note", None, "working", {"a": 1}, [], []])
    with pytest.raises(ValueError, match="data is not JSON"):
        ops.apply(_Recorder(), ["put", "m", "t", "note", None, "working", "{", [], []])
