"""The LangGraph integration against LangGraph's own tests.

* The checkpointer runs ``langgraph-checkpoint-conformance``'s ``validate()`` (every base and
  extended capability), on a log file and in memory, and the saver tests LangGraph ships for
  ``InMemorySaver`` and ``SqliteSaver`` that are not about their internals.
* The store runs the tests LangGraph ships for its stores, ported: ``InMemoryStore``'s
  (``langgraph-checkpoint`` ``tests/test_store.py``) and ``SqliteStore``'s
  (``langgraph-checkpoint-sqlite`` ``tests/test_store.py`` and ``tests/test_ttl.py``), each
  cited by its upstream name. Tests of SQL text and of the async batching wrapper are left
  out; the TTL tests move a ``ControllableClock`` instead of sleeping. The tests of vector
  search (``index=``) are in ``tests/test_langgraph_index.py``.
* Filters are compared with LangGraph's references, bad arguments are refused naming the
  argument with nothing written, and what the README's LangGraph section says of stores,
  sharing and limits is checked.
* The example ``examples/langgraph_resume.py`` is run: a graph killed with SIGKILL mid-run
  resumes from its checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import math
import operator
import os
import re
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict, cast

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    Checkpoint,
    CheckpointMetadata,
    create_checkpoint,
    empty_checkpoint,
)
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
    TTLConfig,
)
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore
from langgraph.types import Command, interrupt

import memcommit
from memcommit.integrations.langgraph import MemcommitSaver, MemcommitStore
from memcommit.integrations.langgraph.store import ITEM
from memcommit.roles.medium import entity_key
from memcommit.testing import ControllableClock
from memcommit.testing.server import ServerProcess

ROOT = Path(__file__).resolve().parent.parent

ALL_CAPABILITIES = {
    "put",
    "put_writes",
    "get_tuple",
    "list",
    "delete_thread",
    "delete_for_runs",
    "copy_thread",
    "prune",
}


def _open(
    where: str, tmp_path: Path, name: str = "store.log", pg_dsn: str = "", **kwargs: Any
) -> Any:
    if where == "memory":
        return memcommit.open(":memory:", **kwargs)
    if where == "postgres":
        return memcommit.open(f"{pg_dsn}?store=lg-{uuid.uuid4().hex[:12]}", **kwargs)
    return memcommit.open(str(tmp_path / name), **kwargs)


def _pg_dsn(where: str, request: pytest.FixtureRequest) -> str:
    """The session's PostgreSQL server, when `where` is ``postgres`` (started only then)."""
    return request.getfixturevalue("postgres").dsn if where == "postgres" else ""


# ---------------------------------------------------------------------------------------
# The checkpointer: langgraph-checkpoint-conformance
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["file", "memory", "postgres"])
def test_conformance_validate(tmp_path: Path, where: str, request: pytest.FixtureRequest) -> None:
    opened: list[Any] = []
    pg_dsn = _pg_dsn(where, request)

    @checkpointer_test(name=f"MemcommitSaver[{where}]")
    async def memcommit_saver() -> Any:
        store = _open(where, tmp_path, f"conformance-{len(opened)}.log", pg_dsn)
        opened.append(store)
        yield MemcommitSaver(store)
        store.close()

    report = asyncio.run(validate(memcommit_saver))
    failed = {
        cap: result.failures for cap, result in report.results.items() if result.passed is not True
    }
    assert not failed, failed
    assert report.passed_all_base()
    assert {cap for cap, r in report.results.items() if r.detected} == ALL_CAPABILITIES
    assert all(r.tests_passed > 0 and r.tests_failed == 0 for r in report.results.values())
    assert all(store.closed for store in opened)


def test_conformance_sync_methods_after_reopen(tmp_path: Path) -> None:
    # What the conformance suite checks through the async methods, through the sync ones
    # and across a close and reopen of the log.
    path = str(tmp_path / "reopen.log")
    store = memcommit.open(path)
    saver = MemcommitSaver(store)
    stored: list[RunnableConfig] = []
    for tid in ("t1", "t2"):
        for ns in ("", "child:1"):
            parent: RunnableConfig | None = None
            for step in range(3):
                config: RunnableConfig = {"configurable": {"thread_id": tid, "checkpoint_ns": ns}}
                if parent is not None:
                    config["configurable"]["checkpoint_id"] = parent["configurable"][
                        "checkpoint_id"
                    ]
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {"k": f"{tid}{ns}{step}"}
                checkpoint["channel_versions"] = {"k": step + 1}
                parent = saver.put(
                    config, checkpoint, {"source": "loop", "step": step, "run_id": tid}, {"k": 1}
                )
                saver.put_writes(parent, [("ch", step), ("other", b"\x00bytes")], "task-1", "a:b")
                stored.append(parent)
    before = [(t.config, t.checkpoint, t.metadata, t.parent_config) for t in saver.list(None)]
    writes_before = [t.pending_writes for t in saver.list(None)]
    store.close()

    store = memcommit.open(path)
    saver = MemcommitSaver(store)
    after = [(t.config, t.checkpoint, t.metadata, t.parent_config) for t in saver.list(None)]
    assert after == before
    assert [t.pending_writes for t in saver.list(None)] == writes_before
    assert writes_before[0] == [("task-1", "ch", 2), ("task-1", "other", b"\x00bytes")]
    latest = saver.get_tuple({"configurable": {"thread_id": "t2", "checkpoint_ns": "child:1"}})
    assert latest is not None and latest.config == stored[-1]
    saver.delete_for_runs(["t1"])
    assert list(saver.list({"configurable": {"thread_id": "t1"}})) == []
    saver.prune(["t2"])
    assert len(list(saver.list({"configurable": {"thread_id": "t2"}}))) == 2
    store.close()
    store = memcommit.open(path)
    saver = MemcommitSaver(store)
    left = [t.config["configurable"]["checkpoint_id"] for t in saver.list(None)]
    assert sorted(left) == sorted(
        c["configurable"]["checkpoint_id"] for c in (stored[8], stored[11])
    )
    store.close()


def test_threads_share_one_saver(tmp_path: Path) -> None:
    # Puts from many threads are commits of one log (group-committed); all survive a reopen.
    from concurrent.futures import ThreadPoolExecutor

    path = str(tmp_path / "threads.log")
    store = memcommit.open(path)
    saver = MemcommitSaver(store)

    def run(worker: int) -> list[str]:
        config: RunnableConfig = {"configurable": {"thread_id": f"w{worker}", "checkpoint_ns": ""}}
        ids = []
        for step in range(25):
            config = saver.put(config, create_checkpoint(empty_checkpoint(), None, step), {}, {})
            saver.put_writes(config, [("ch", step)], f"task-{step}")
            ids.append(config["configurable"]["checkpoint_id"])
        return ids

    with ThreadPoolExecutor(4) as pool:
        expected = list(pool.map(run, range(4)))
    store.close()
    saver = MemcommitSaver(memcommit.open(path))
    for worker, ids in enumerate(expected):
        found = list(saver.list({"configurable": {"thread_id": f"w{worker}"}}))
        assert [t.config["configurable"]["checkpoint_id"] for t in found] == ids[::-1]
        assert all(len(t.pending_writes or ()) == 1 for t in found)
    saver.store.close()


def test_put_writes_keeps_regular_and_replaces_special_writes() -> None:
    # The rule of SqliteSaver/PostgresSaver: INSERT OR IGNORE, or OR REPLACE when every
    # write of the call is a special channel.
    saver = MemcommitSaver(memcommit.open(":memory:"))
    config = saver.put(
        {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, empty_checkpoint(), {}, {}
    )
    saver.put_writes(config, [("a", 1), ("b", 2)], "task")
    saver.put_writes(config, [("a", 10)], "task")
    saver.put_writes(config, [("__interrupt__", "first")], "task")
    saver.put_writes(config, [("__interrupt__", "second")], "task")
    found = saver.get_tuple(config)
    assert found is not None
    assert found.pending_writes == [
        ("task", "__interrupt__", "second"),
        ("task", "a", 1),
        ("task", "b", 2),
    ]


def test_metadata_that_is_not_json_round_trips() -> None:
    saver = MemcommitSaver(memcommit.open(":memory:"))
    metadata = cast(
        CheckpointMetadata, {"source": "loop", "step": 1, "when": b"raw", "x": math.nan}
    )
    config = saver.put(
        {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, empty_checkpoint(), metadata, {}
    )
    found = saver.get_tuple(config)
    assert found is not None
    assert found.metadata["when"] == b"raw"  # type: ignore[typeddict-item]
    assert math.isnan(found.metadata["x"])  # type: ignore[typeddict-item]
    assert [t.metadata["step"] for t in saver.list(None, filter={"source": "loop"})] == [1]


class TestMemorySaverPorted:
    """``langgraph-checkpoint`` ``tests/test_memory.py::TestMemorySaver``, on MemcommitSaver."""

    @pytest.fixture(autouse=True)
    def setup(self, tmp_path: Path) -> Iterator[None]:
        self.store = memcommit.open(str(tmp_path / "saver.log"))
        self.memory_saver = MemcommitSaver(self.store)
        self.config_1: RunnableConfig = {
            "configurable": {"thread_id": "thread-1", "checkpoint_ns": "", "checkpoint_id": "1"}
        }
        self.config_2: RunnableConfig = {
            "configurable": {"thread_id": "thread-2", "checkpoint_ns": "", "checkpoint_id": "2"}
        }
        self.config_3: RunnableConfig = {
            "configurable": {
                "thread_id": "thread-2",
                "checkpoint_id": "2-inner",
                "checkpoint_ns": "inner",
            }
        }
        self.chkpnt_1: Checkpoint = empty_checkpoint()
        self.chkpnt_2: Checkpoint = create_checkpoint(self.chkpnt_1, {}, 1)
        self.chkpnt_3: Checkpoint = empty_checkpoint()
        self.metadata_1: CheckpointMetadata = cast(
            CheckpointMetadata, {"source": "input", "step": 2, "writes": {}, "score": 1}
        )
        self.metadata_2: CheckpointMetadata = cast(
            CheckpointMetadata,
            {"source": "loop", "step": 1, "writes": {"foo": "bar"}, "score": None},
        )
        self.metadata_3: CheckpointMetadata = {}
        yield
        self.store.close()

    def _put_all(self) -> None:
        for config, checkpoint, metadata in (
            (self.config_1, self.chkpnt_1, self.metadata_1),
            (self.config_2, self.chkpnt_2, self.metadata_2),
            (self.config_3, self.chkpnt_3, self.metadata_3),
        ):
            self.memory_saver.put(config, checkpoint, metadata, checkpoint["channel_versions"])

    def test_combined_metadata(self) -> None:
        config: RunnableConfig = {
            "configurable": {
                "thread_id": "thread-2",
                "checkpoint_ns": "",
                "__super_private_key": "super_private_value",
            },
            "metadata": {"run_id": "my_run_id"},
        }
        self.memory_saver.put(
            config, self.chkpnt_2, self.metadata_2, self.chkpnt_2["channel_versions"]
        )
        checkpoint = self.memory_saver.get_tuple(config)
        assert checkpoint is not None
        assert checkpoint.metadata == {**self.metadata_2, "run_id": "my_run_id"}

    def _queries(self) -> list[dict[str, Any]]:
        return [
            {"source": "input"},  # search by 1 key
            {"step": 1, "writes": {"foo": "bar"}},  # search by multiple keys
            {},  # search by no keys, return all checkpoints
            {"source": "update", "step": 1},  # no match
        ]

    def test_search(self) -> None:
        self._put_all()
        q1, q2, q3, q4 = self._queries()
        search_results_1 = list(self.memory_saver.list(None, filter=q1))
        assert len(search_results_1) == 1
        assert search_results_1[0].metadata == self.metadata_1
        search_results_2 = list(self.memory_saver.list(None, filter=q2))
        assert len(search_results_2) == 1
        assert search_results_2[0].metadata == self.metadata_2
        assert len(list(self.memory_saver.list(None, filter=q3))) == 3
        assert len(list(self.memory_saver.list(None, filter=q4))) == 0
        # search by config (defaults to checkpoints across all namespaces)
        search_results_5 = list(self.memory_saver.list({"configurable": {"thread_id": "thread-2"}}))
        assert len(search_results_5) == 2
        assert {
            search_results_5[0].config["configurable"]["checkpoint_ns"],
            search_results_5[1].config["configurable"]["checkpoint_ns"],
        } == {"", "inner"}

    def test_asearch(self) -> None:
        async def run() -> None:
            self._put_all()
            q1, q2, q3, q4 = self._queries()
            results_1 = [c async for c in self.memory_saver.alist(None, filter=q1)]
            assert len(results_1) == 1
            assert results_1[0].metadata == self.metadata_1
            results_2 = [c async for c in self.memory_saver.alist(None, filter=q2)]
            assert len(results_2) == 1
            assert results_2[0].metadata == self.metadata_2
            assert len([c async for c in self.memory_saver.alist(None, filter=q3)]) == 3
            assert len([c async for c in self.memory_saver.alist(None, filter=q4)]) == 0

        asyncio.run(run())


def test_metadata_filter_keys_with_hyphens_and_digits() -> None:
    # langgraph-checkpoint-sqlite tests/test_sqlite.py::TestSqliteSaver::
    # test_metadata_filter_keys_with_hyphens_and_digits
    saver = MemcommitSaver(memcommit.open(":memory:"))
    config: RunnableConfig = {
        "configurable": {"thread_id": "thread-hyphen-digit", "checkpoint_ns": ""}
    }
    metadata = cast(
        CheckpointMetadata,
        {
            "access-level": "public",
            "user": {"access-level": "nested", "123abc": "ok2"},
            "123abc": "ok",
        },
    )
    saver.put(config, empty_checkpoint(), metadata, {})
    assert len(list(saver.list(None, filter={"access-level": "public"}))) == 1
    assert len(list(saver.list(None, filter={"user.access-level": "nested"}))) == 1
    assert len(list(saver.list(None, filter={"123abc": "ok"}))) == 1
    assert len(list(saver.list(None, filter={"user.123abc": "ok2"}))) == 1


# ---------------------------------------------------------------------------------------
# The checkpointer under a real graph
# ---------------------------------------------------------------------------------------


class Counted(TypedDict, total=False):
    n: int
    answer: str
    trail: Annotated[list[str], operator.add]


def _graph(checkpointer: Any, long_term: Any = None) -> Any:
    def first(state: Counted) -> Counted:
        return {"n": state["n"] + 1, "trail": ["first"]}

    def ask(state: Counted) -> Counted:
        answer = interrupt({"question": f"keep {state['n']}?"})
        return {"answer": str(answer), "trail": ["ask"]}

    # The store comes in as a parameter, not from get_store(): LangGraph's context lookup
    # does not reach async runs on Python 3.10. LangGraph matches the annotation's text, so
    # it is plain BaseStore (None when the graph has no store).
    def last(state: Counted, *, store: BaseStore) -> Counted:
        found = store.search(("notes",)) if store is not None else []
        return {"n": state["n"] * 10 + len(found), "trail": ["last"]}

    builder = StateGraph(Counted)
    builder.add_node("first", first)
    builder.add_node("ask", ask)
    builder.add_node("last", last)
    builder.add_edge(START, "first")
    builder.add_edge("first", "ask")
    builder.add_edge("ask", "last")
    builder.add_edge("last", END)
    return builder.compile(checkpointer=checkpointer, store=long_term)


def _history(graph: Any, config: RunnableConfig) -> list[tuple[Any, ...]]:
    return [
        (s.values, s.next, s.metadata["source"], s.metadata["step"])
        for s in graph.get_state_history(config)
    ]


def test_graph_interrupt_resumes_after_reopen_like_in_memory_saver(tmp_path: Path) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    reference = _graph(InMemorySaver())
    reference.invoke({"n": 1}, config)
    expected = reference.invoke(Command(resume="yes"), config)

    path = str(tmp_path / "graph.log")
    store = memcommit.open(path)
    graph = _graph(MemcommitSaver(store))
    paused = graph.invoke({"n": 1}, config)
    assert paused["__interrupt__"][0].value == {"question": "keep 2?"}
    store.close()

    store = memcommit.open(path)
    graph = _graph(MemcommitSaver(store))
    assert graph.get_state(config).next == ("ask",)
    assert graph.invoke(Command(resume="yes"), config) == expected
    assert _history(graph, config) == _history(reference, config)
    store.close()


@pytest.mark.skipif(
    sys.version_info < (3, 11),
    reason="LangGraph's interrupt() in an async run needs Python 3.11: on 3.10 its context "
    "variables do not reach the node (langgraph raises 'Called get_config outside of a "
    "runnable context')",
)
def test_graph_async_with_long_term_store(tmp_path: Path) -> None:
    async def run() -> None:
        store = memcommit.open(str(tmp_path / "async.log"))
        long_term = MemcommitStore(store)
        await long_term.aput(("notes",), "a", {"text": "one"})
        await long_term.aput(("notes",), "b", {"text": "two"})
        graph = _graph(MemcommitSaver(store), long_term)
        config: RunnableConfig = {"configurable": {"thread_id": "async"}}
        await graph.ainvoke({"n": 4}, config)
        done = await graph.ainvoke(Command(resume="no"), config)
        assert done == {"n": 52, "answer": "no", "trail": ["first", "ask", "last"]}
        assert len([t async for t in graph.checkpointer.alist(config)]) == 5
        store.close()

    asyncio.run(run())


# ---------------------------------------------------------------------------------------
# The store: LangGraph's store tests, ported
# ---------------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "file", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemcommitStore]:
    # As SqliteStore's fixture: an in-memory store and one in a file; and one in PostgreSQL.
    opened = _open(request.param, tmp_path, pg_dsn=_pg_dsn(request.param, request))
    yield MemcommitStore(opened)
    opened.close()


def test_batch_order(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_batch_order
    store.put(("test", "foo"), "key1", {"data": "value1"})
    store.put(("test", "bar"), "key2", {"data": "value2"})
    ops: list[Any] = [
        GetOp(namespace=("test", "foo"), key="key1"),
        PutOp(namespace=("test", "bar"), key="key2", value={"data": "value2"}),
        SearchOp(namespace_prefix=("test",), filter={"data": "value1"}, limit=10, offset=0),
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
        GetOp(namespace=("test",), key="key3"),
    ]
    results: list[Any] = store.batch(ops)
    assert len(results) == 5
    assert isinstance(results[0], Item)
    assert results[0].value == {"data": "value1"}
    assert results[0].key == "key1"
    assert results[0].namespace == ("test", "foo")
    assert results[1] is None
    assert isinstance(results[2], list)
    assert len(results[2]) == 1
    assert results[2][0].key == "key1"
    assert results[2][0].value == {"data": "value1"}
    assert isinstance(results[3], list)
    assert ("test", "foo") in results[3]
    assert ("test", "bar") in results[3]
    assert results[4] is None

    ops_reordered: list[Any] = [
        SearchOp(namespace_prefix=("test",), filter=None, limit=5, offset=0),
        GetOp(namespace=("test", "bar"), key="key2"),
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
        PutOp(namespace=("test",), key="key3", value={"data": "value3"}),
        GetOp(namespace=("test", "foo"), key="key1"),
    ]
    results = store.batch(ops_reordered)
    assert len(results) == 5
    assert len(results[0]) >= 2
    assert isinstance(results[1], Item)
    assert results[1].value == {"data": "value2"}
    assert results[1].namespace == ("test", "bar")
    assert len(results[2]) > 0
    assert results[3] is None
    assert isinstance(results[4], Item)
    assert results[4].value == {"data": "value1"}
    item3 = store.get(("test",), "key3")
    assert item3 is not None
    assert item3.value == {"data": "value3"}


def test_batch_get_ops(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_batch_get_ops
    store.put(("test",), "key1", {"data": "value1"})
    store.put(("test",), "key2", {"data": "value2"})
    results: list[Any] = store.batch(
        [
            GetOp(namespace=("test",), key="key1"),
            GetOp(namespace=("test",), key="key2"),
            GetOp(namespace=("test",), key="key3"),
        ]
    )
    assert len(results) == 3
    assert results[0] is not None and results[0].key == "key1"
    assert results[1] is not None and results[1].key == "key2"
    assert results[2] is None


def test_batch_put_ops(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_batch_put_ops
    results = store.batch(
        [
            PutOp(namespace=("test",), key="key1", value={"data": "value1"}),
            PutOp(namespace=("test",), key="key2", value={"data": "value2"}),
            PutOp(namespace=("test",), key="key3", value=None),
        ]
    )
    assert len(results) == 3
    assert all(result is None for result in results)
    item1 = store.get(("test",), "key1")
    item2 = store.get(("test",), "key2")
    assert item1 and item1.value == {"data": "value1"}
    assert item2 and item2.value == {"data": "value2"}
    assert store.get(("test",), "key3") is None


@pytest.mark.parametrize(
    ("value", "error"),
    [({"x": float("nan")}, ValueError), ({"x": {1, 2}}, TypeError), ("text", TypeError)],
)
def test_a_value_that_is_not_json_names_the_item_and_writes_nothing(
    store: MemcommitStore, value: Any, error: type[Exception]
) -> None:
    with pytest.raises(error, match=r"item 'bad' in namespace \('test',\)"):
        store.batch(
            [
                PutOp(namespace=("test",), key="good", value={"ok": 1}),
                PutOp(namespace=("test",), key="bad", value=value),
            ]
        )
    assert store.get(("test",), "good") is None


def test_batch_search_ops(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_batch_search_ops
    for namespace, key, value in [
        (("test", "foo"), "key1", {"data": "value1", "tag": "a"}),
        (("test", "bar"), "key2", {"data": "value2", "tag": "a"}),
        (("test", "baz"), "key3", {"data": "value3", "tag": "b"}),
    ]:
        store.put(namespace, key, value)
    results: list[Any] = store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter={"tag": "a"}, limit=10, offset=0),
            SearchOp(namespace_prefix=("test",), filter=None, limit=2, offset=0),
            SearchOp(namespace_prefix=("test", "foo"), filter=None, limit=10, offset=0),
        ]
    )
    assert len(results[0]) == 2
    assert all(item.value["tag"] == "a" for item in results[0])
    assert len(results[1]) == 2
    assert len(results[2]) == 1
    assert results[2][0].namespace == ("test", "foo")


def test_batch_list_namespaces_ops(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_batch_list_namespaces_ops
    test_data = [
        (("test", "documents", "public"), "doc1", {"content": "public doc"}),
        (("test", "documents", "private"), "doc2", {"content": "private doc"}),
        (("test", "images", "public"), "img1", {"content": "public image"}),
        (("prod", "documents", "public"), "doc3", {"content": "prod doc"}),
    ]
    for namespace, key, value in test_data:
        store.put(namespace, key, value)
    results: list[Any] = store.batch(
        [
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=2, limit=10, offset=0),
            ListNamespacesOp(
                match_conditions=(MatchCondition("suffix", ("public",)),),
                max_depth=None,
                limit=10,
                offset=0,
            ),
        ]
    )
    assert len(results[0]) == len(test_data)
    assert all(len(ns) <= 2 for ns in results[1])
    assert all(ns[-1] == "public" for ns in results[2])


def test_basic_store_ops(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::TestSqliteStore::test_basic_store_ops
    namespace = ("test", "documents")
    item_value = {"title": "Test Document", "content": "Hello, World!"}
    store.put(namespace, "doc1", item_value)
    item = store.get(namespace, "doc1")
    assert item
    assert item.namespace == namespace
    assert item.key == "doc1"
    assert item.value == item_value
    updated_value = {"title": "Updated Document", "content": "Hello, Updated!"}
    store.put(namespace, "doc1", updated_value)
    updated_item = store.get(namespace, "doc1")
    assert updated_item is not None
    assert updated_item.value == updated_value
    assert store.get(("test", "other_documents"), "doc1") is None
    store.delete(namespace, "doc1")
    assert store.get(namespace, "doc1") is None


def test_list_namespaces_sqlite(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::TestSqliteStore::test_list_namespaces
    test_namespaces = [
        ("test", "documents", "public"),
        ("test", "documents", "private"),
        ("test", "images", "public"),
        ("test", "images", "private"),
        ("prod", "documents", "public"),
        ("prod", "documents", "private"),
    ]
    for namespace in test_namespaces:
        store.put(namespace, "dummy", {"content": "dummy"})
    assert len(store.list_namespaces()) == len(test_namespaces)
    test_prefix_namespaces = store.list_namespaces(prefix=cast(Any, ["test"]))
    assert len(test_prefix_namespaces) == 4
    assert all(ns[0] == "test" for ns in test_prefix_namespaces)
    public_namespaces = store.list_namespaces(suffix=cast(Any, ["public"]))
    assert len(public_namespaces) == 3
    assert all(ns[-1] == "public" for ns in public_namespaces)
    assert all(len(ns) <= 2 for ns in store.list_namespaces(max_depth=2))
    assert len(store.list_namespaces(limit=3)) == 3
    for namespace in test_namespaces:
        store.delete(namespace, "dummy")
    assert store.list_namespaces() == []


def test_search_sqlite(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::TestSqliteStore::test_search
    test_data = [
        (
            ("test", "docs"),
            "doc1",
            {"title": "First Doc", "author": "Alice", "tags": ["important"]},
        ),
        (("test", "docs"), "doc2", {"title": "Second Doc", "author": "Bob", "tags": ["draft"]}),
        (("test", "images"), "img1", {"title": "Image 1", "author": "Alice", "tags": ["final"]}),
    ]
    for namespace, key, value in test_data:
        store.put(namespace, key, value)
    assert len(store.search(cast(Any, ["test"]))) == 3
    docs_items = store.search(cast(Any, ["test", "docs"]))
    assert len(docs_items) == 2
    assert all(item.namespace == ("test", "docs") for item in docs_items)
    alice_items = store.search(cast(Any, ["test"]), filter={"author": "Alice"})
    assert len(alice_items) == 2
    assert all(item.value["author"] == "Alice" for item in alice_items)
    assert len(store.search(cast(Any, ["test"]), limit=2)) == 2
    assert len(store.search(cast(Any, ["test"]), offset=2)) == 1
    for namespace, key, _ in test_data:
        store.delete(namespace, key)


def test_basic_store_operations(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_basic_store_operations (its store
    # has a vector index; the operations are the plain ones)
    uid = uuid.uuid4().hex
    namespace = (uid, "test", "documents")
    item_value = {"title": "Test Document", "content": "Hello, World!"}
    assert len(store.search((uid,))) == 0
    store.put(namespace, "doc1", item_value)
    item = store.get(namespace, "doc1")
    assert item is not None
    assert item.namespace == namespace
    assert item.value == item_value
    assert item.created_at is not None
    assert item.updated_at is not None
    updated_value = {"title": "Updated Test Document", "content": "Hello, LangGraph!"}
    store.put(namespace, "doc1", updated_value)
    updated_item = store.get(namespace, "doc1")
    assert updated_item is not None
    assert updated_item.value == updated_value
    assert updated_item.updated_at >= item.updated_at
    assert store.get((uid, "test", "other_documents"), "doc1") is None
    store.put(namespace, "doc2", {"title": "Another Document", "content": "Greetings!"})
    items = store.search((uid, "test"), limit=10)
    assert len(items) == 2
    assert {i.key for i in items} == {"doc1", "doc2"}
    assert (uid, "test", "documents") in store.list_namespaces(prefix=(uid, "test"))
    store.delete(namespace, "doc1")
    store.delete(namespace, "doc2")
    assert store.get(namespace, "doc1") is None
    assert store.get(namespace, "doc2") is None
    assert len(store.search((uid, "test"), limit=10)) == 0


def test_list_namespaces_operations(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_list_namespaces_operations
    test_pref = str(uuid.uuid4())
    test_namespaces = [
        (test_pref, "test", "documents", "public", test_pref),
        (test_pref, "test", "documents", "private", test_pref),
        (test_pref, "test", "images", "public", test_pref),
        (test_pref, "test", "images", "private", test_pref),
        (test_pref, "prod", "documents", "public", test_pref),
        (test_pref, "prod", "documents", "some", "nesting", "public", test_pref),
        (test_pref, "prod", "documents", "private", test_pref),
    ]
    for namespace in test_namespaces:
        store.put(namespace, "dummy", {"content": "dummy"})
    prefix_result = store.list_namespaces(prefix=(test_pref, "test"))
    assert len(prefix_result) == 4
    assert all(ns[1] == "test" for ns in prefix_result)
    specific = store.list_namespaces(prefix=(test_pref, "test", "documents"))
    assert len(specific) == 2
    assert all(ns[1:3] == ("test", "documents") for ns in specific)
    suffix_result = store.list_namespaces(suffix=("public", test_pref))
    assert len(suffix_result) == 4
    assert all(ns[-2] == "public" for ns in suffix_result)
    both = store.list_namespaces(prefix=(test_pref, "test"), suffix=("public", test_pref))
    assert len(both) == 2
    assert all(ns[1] == "test" and ns[-2] == "public" for ns in both)
    wildcard_prefix = store.list_namespaces(prefix=(test_pref, "*", "documents"))
    assert len(wildcard_prefix) == 5
    assert all(ns[2] == "documents" for ns in wildcard_prefix)
    wildcard_suffix = store.list_namespaces(suffix=("*", "public", test_pref))
    assert len(wildcard_suffix) == 4
    assert all(ns[-2] == "public" for ns in wildcard_suffix)
    wildcard_single = store.list_namespaces(suffix=("some", "*", "public", test_pref))
    assert wildcard_single == [
        (test_pref, "prod", "documents", "some", "nesting", "public", test_pref)
    ]
    assert all(len(ns) <= 3 for ns in store.list_namespaces(max_depth=3))
    max_depth_result = store.list_namespaces(max_depth=4, prefix=(test_pref, "*", "documents"))
    assert len(set(max_depth_result)) == len(max_depth_result) == 5
    assert len(store.list_namespaces(prefix=(test_pref,), limit=3)) == 3
    offset_result = store.list_namespaces(prefix=(test_pref,), offset=3)
    assert len(offset_result) == len(test_namespaces) - 3
    everything = store.list_namespaces(prefix=(test_pref,))
    assert len(everything) == len(test_namespaces)
    assert set(everything) == set(test_namespaces)
    for namespace in test_namespaces:
        store.delete(namespace, "dummy")


def test_search_items(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_search_items
    base = "test_search_items"
    test_namespaces = [
        (base, "documents", "user1"),
        (base, "documents", "user2"),
        (base, "reports", "department1"),
        (base, "reports", "department2"),
    ]
    test_items = [
        {"title": "Doc 1", "author": "John Doe", "tags": ["important"]},
        {"title": "Doc 2", "author": "Jane Smith", "tags": ["draft"]},
        {"title": "Report A", "author": "John Doe", "tags": ["final"]},
        {"title": "Report B", "author": "Alice Johnson", "tags": ["draft"]},
    ]
    for ns, item in zip(test_namespaces, test_items, strict=True):
        store.put(ns, f"item_{ns[-1]}", item)
    docs = store.search((base, "documents"))
    assert len(docs) == 2
    assert all(item.namespace[1] == "documents" for item in docs)
    reports = store.search((base, "reports"))
    assert len(reports) == 2
    assert all(item.namespace[1] == "reports" for item in reports)
    first_page = store.search((base,), limit=2, offset=0)
    second_page = store.search((base,), limit=2, offset=2)
    assert len(first_page) == 2
    assert len(second_page) == 2
    assert {i.key for i in first_page}.isdisjoint({i.key for i in second_page})
    assert len(store.search((base,))) == 4
    john_items = store.search((base,), filter={"author": "John Doe"})
    assert len(john_items) == 2
    assert all(item.value["author"] == "John Doe" for item in john_items)
    draft_items = store.search((base,), filter={"tags": ["draft"]})
    assert len(draft_items) == 2
    assert all("draft" in item.value["tags"] for item in draft_items)


def test_malicious_filter_key_matches_nothing(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_sql_injection_vulnerability: no SQL
    # here, so a key with quotes is a key no item has (SqliteStore refuses it instead).
    store.put(("docs",), "public", {"access": "public", "data": "public info"})
    store.put(("docs",), "private", {"access": "private", "data": "secret", "password": "123"})
    normal = store.search(("docs",), filter={"access": "public"})
    assert len(normal) == 1
    assert normal[0].value["access"] == "public"
    malicious_key = "access') = 'public' OR '1'='1' OR json_extract(value, '$."
    assert store.search(("docs",), filter={malicious_key: "dummy"}) == []


def test_sql_injection_filter_values(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_sql_injection_filter_values
    store.put(("docs",), "doc1", {"access": "public", "title": "Public Document"})
    store.put(("docs",), "doc2", {"access": "private", "title": "Private Document"})
    store.put(("docs",), "doc3", {"access": "secret", "title": "Secret Document"})
    for malicious_value in [
        "public' OR '1'='1",
        "public'; --",
        "public' UNION SELECT * FROM store --",
        "public\x00' OR '1'='1",
        "''''",
        "public' OR 'א'='א",
    ]:
        assert len(store.search(("docs",), filter={"access": malicious_value})) == 0
    store.put(("docs",), "doc4", {"title": "O'Brien's Document", "access": "public"})
    results = store.search(("docs",), filter={"title": "O'Brien's Document"})
    assert len(results) == 1
    assert results[0].value["title"] == "O'Brien's Document"


def test_numeric_filter_safety(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_numeric_filter_safety
    store.put(("items",), "item1", {"price": 10, "quantity": 5})
    store.put(("items",), "item2", {"price": 20, "quantity": 3})
    store.put(("items",), "item3", {"price": 30, "quantity": 1})
    results = store.search(("items",), filter={"price": {"$gt": 15}})
    assert len(results) == 2
    assert all(r.value["price"] > 15 for r in results)
    assert len(store.search(("items",), filter={"price": {"$lt": float("inf")}})) == 3
    assert len(store.search(("items",), filter={"price": {"$gt": float("-inf")}})) == 3
    assert len(store.search(("items",), filter={"price": {"$eq": float("nan")}})) == 0
    assert len(store.search(("items",), filter={"price": {"$lt": 10**100}})) == 3
    store.put(("items",), "item4", {"price": -10, "quantity": 0})
    results = store.search(("items",), filter={"price": {"$lt": 0}})
    assert len(results) == 1
    assert results[0].key == "item4"


def test_boolean_filter_safety(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_boolean_filter_safety
    store.put(("flags",), "flag1", {"active": True, "name": "Feature A"})
    store.put(("flags",), "flag2", {"active": False, "name": "Feature B"})
    store.put(("flags",), "flag3", {"active": True, "name": "Feature C"})
    results = store.search(("flags",), filter={"active": True})
    assert len(results) == 2
    assert all(r.value["active"] is True for r in results)
    results = store.search(("flags",), filter={"active": False})
    assert len(results) == 1
    assert results[0].value["active"] is False


def test_filter_keys_with_hyphens_and_digits(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_filter_keys_with_hyphens_and_digits
    store.put(("docs",), "hyphen", {"access-level": "public", "user": {"access-level": "nested"}})
    store.put(("docs",), "digit", {"123abc": "ok", "user": {"123abc": "ok2"}})
    assert [r.key for r in store.search(("docs",), filter={"access-level": "public"})] == ["hyphen"]
    assert [r.key for r in store.search(("docs",), filter={"user.access-level": "nested"})] == [
        "hyphen"
    ]
    assert [r.key for r in store.search(("docs",), filter={"123abc": "ok"})] == ["digit"]
    assert [r.key for r in store.search(("docs",), filter={"user.123abc": "ok2"})] == ["digit"]


def test_non_ascii(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_non_ascii, without the vector query
    texts = ["这是中文", "これは日本語です", "이건 한국어야", "Это русский", "यह रूसी है"]
    for i, text in enumerate(texts, 1):
        store.put(("user_123", "memories"), str(i), {"text": text})
    for i, text in enumerate(texts, 1):
        found = store.search(("user_123", "memories"), filter={"text": text})
        assert [r.key for r in found] == [str(i)]
        item = store.get(("user_123", "memories"), str(i))
        assert item is not None and item.value == {"text": text}


def _search_namespaces(store: MemcommitStore, prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
    return {item.namespace for item in store.search(prefix, limit=100)}


def test_search_namespace_segment_boundary(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_search_namespace_segment_boundary
    for namespace in [
        ("foo",),
        ("foo", "child"),
        ("foo", "child", "deep"),
        ("foobar",),
        ("foobar", "baz"),
        ("foo2",),
    ]:
        store.put(namespace, "k", {"v": 1})
    assert _search_namespaces(store, ("foo",)) == {
        ("foo",),
        ("foo", "child"),
        ("foo", "child", "deep"),
    }
    assert _search_namespaces(store, ("foobar",)) == {("foobar",), ("foobar", "baz")}
    assert _search_namespaces(store, ("foo2",)) == {("foo2",)}
    assert _search_namespaces(store, ("fo",)) == set()


def test_search_namespace_wildcard_chars_are_literal(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::
    # test_search_namespace_wildcard_chars_are_literal
    for namespace in [
        ("user_1",),
        ("user_1", "child"),
        ("userX1",),
        ("a%b",),
        ("axxb",),
        ("star*",),
        ("starX",),
    ]:
        store.put(namespace, "k", {"v": 1})
    assert _search_namespaces(store, ("user_1",)) == {("user_1",), ("user_1", "child")}
    assert _search_namespaces(store, ("a%b",)) == {("a%b",)}
    assert _search_namespaces(store, ("star*",)) == {("star*",)}


def test_search_namespace_is_case_sensitive(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_search_namespace_is_case_sensitive
    store.put(("Foo",), "k", {"v": "upper"})
    store.put(("foo",), "k", {"v": "lower"})
    assert _search_namespaces(store, ("foo",)) == {("foo",)}
    assert _search_namespaces(store, ("Foo",)) == {("Foo",)}


def test_list_namespaces_segment_boundary(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_list_namespaces_segment_boundary
    for namespace in [
        ("foo",),
        ("foo", "child"),
        ("foobar",),
        ("foobar", "baz"),
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("uid", "a", "b", "alice"),
    ]:
        store.put(namespace, "k", {"v": 1})
    assert set(store.list_namespaces(prefix=("foo",), limit=100)) == {("foo",), ("foo", "child")}
    assert set(store.list_namespaces(suffix=("alice",), limit=100)) == {
        ("uid", "users", "alice"),
        ("uid", "a", "b", "alice"),
    }
    assert set(store.list_namespaces(prefix=("uid", "*", "alice"), limit=100)) == {
        ("uid", "users", "alice"),
    }
    assert set(store.list_namespaces(prefix=("uid",), limit=100)) == {
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("uid", "a", "b", "alice"),
    }


def test_search_empty_prefix_is_unconstrained(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_search_empty_prefix_is_unconstrained
    for namespace in [("a",), ("b", "c"), ("d", "e", "f")]:
        store.put(namespace, "k", {"v": 1})
    assert _search_namespaces(store, ()) == {("a",), ("b", "c"), ("d", "e", "f")}


def test_namespace_labels_with_trailing_newline(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_namespace_labels_with_trailing_newline
    store.put(("users", "alice"), "k", {"v": 1})
    store.put(("users", "alice\n"), "k", {"v": 2})
    assert set(store.list_namespaces(suffix=("alice",), limit=100)) == {("users", "alice")}
    assert set(store.list_namespaces(prefix=("users", "alice"), limit=100)) == {("users", "alice")}


def test_list_namespaces_metacharacter_labels(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_list_namespaces_metacharacter_labels
    pairs = [
        ("star*", "starX"),
        ("q?m", "qXm"),
        ("br[ack]et", "brXacXket"),
        ("user_1", "userX1"),
        ("a%b", "axxb"),
        ("plus+", "plusX"),
    ]
    for label, decoy in pairs:
        store.put((label,), "k", {"v": 1})
        store.put((decoy,), "k", {"v": 1})
        store.put((label, "child"), "k", {"v": 1})
    for label, decoy in pairs:
        found = set(store.list_namespaces(prefix=(label,), limit=100))
        assert found == {(label,), (label, "child")}
        assert (decoy,) not in found
        assert set(store.list_namespaces(prefix=(label, "child"), limit=100)) == {(label, "child")}


@pytest.mark.parametrize("namespace", [("foo.bar",), ("foo", ""), ("foo", 1)])
@pytest.mark.parametrize("kind", ["get", "put", "delete", "search", "list_prefix", "list_suffix"])
def test_batch_rejects_invalid_namespace_labels(
    store: MemcommitStore, namespace: tuple[Any, ...], kind: str
) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_batch_rejects_invalid_namespace_labels
    op = {
        "get": GetOp(namespace, "key"),
        "put": PutOp(namespace, "key", {"changed": True}),
        "delete": PutOp(namespace, "key", None),
        "search": SearchOp(namespace),
        "list_prefix": ListNamespacesOp((MatchCondition("prefix", namespace),)),
        "list_suffix": ListNamespacesOp((MatchCondition("suffix", namespace),)),
    }[kind]
    store.put(("foo", "bar"), "key", {"original": True})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("valid",), "key", {}), cast(Any, op)])
    item = store.get(("foo", "bar"), "key")
    assert item is not None and item.value == {"original": True}
    assert store.get(("valid",), "key") is None


def test_batch_allows_empty_search_prefix_and_listing_wildcards(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::
    # test_batch_allows_empty_search_prefix_and_listing_wildcards
    store.put(("foo", "bar"), "key", {"v": 1})
    found, listed = cast(
        list[Any],
        store.batch([SearchOp(()), ListNamespacesOp((MatchCondition("prefix", ("foo", "*")),))]),
    )
    assert [item.namespace for item in found] == [("foo", "bar")]
    assert listed == [("foo", "bar")]


def test_list_namespaces_basic(store: MemcommitStore) -> None:
    # langgraph-checkpoint tests/test_store.py::test_list_namespaces_basic
    namespaces = [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
        ("users", "123"),
        ("users", "456", "settings"),
        ("admin", "users", "789"),
    ]
    for i, ns in enumerate(namespaces):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
    assert sorted(store.list_namespaces(prefix=("a", "b"))) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert sorted(store.list_namespaces(suffix=("f",))) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert sorted(store.list_namespaces(prefix=("a",), suffix=("f",))) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
    ]
    assert sorted(store.list_namespaces(prefix=("a", "b"), max_depth=3)) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
    ]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == [
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert sorted(store.list_namespaces(prefix=("a", "*", "f"))) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
    ]
    assert sorted(store.list_namespaces(suffix=("*", "f"))) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]


def test_list_namespaces_with_wildcards(store: MemcommitStore) -> None:
    # langgraph-checkpoint tests/test_store.py::test_list_namespaces_with_wildcards
    namespaces = [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
        ("admin", "users", "789"),
        ("guests", "123"),
        ("guests", "456", "preferences"),
    ]
    for i, ns in enumerate(namespaces):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
    assert sorted(store.list_namespaces(prefix=("users", "*"))) == [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
    ]
    assert store.list_namespaces(suffix=("*", "preferences")) == [("guests", "456", "preferences")]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
    store.put(namespace=("admin", "users", "settings", "789"), key="foo", value={"data": "x"})
    assert store.list_namespaces(prefix=("*", "users"), suffix=("settings", "*")) == [
        ("admin", "users", "settings", "789")
    ]


def test_list_namespaces_pagination(store: MemcommitStore) -> None:
    # langgraph-checkpoint tests/test_store.py::test_list_namespaces_pagination
    for i in range(20):
        store.put(namespace=("namespace", f"sub_{i:02d}"), key=f"id_{i:02d}", value={"i": i})
    for offset in (0, 5, 15):
        assert store.list_namespaces(prefix=("namespace",), limit=5, offset=offset) == [
            ("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)
        ]


def test_list_namespaces_max_depth(store: MemcommitStore) -> None:
    # langgraph-checkpoint tests/test_store.py::test_list_namespaces_max_depth
    for i, ns in enumerate(
        [
            ("a", "b", "c", "d"),
            ("a", "b", "c", "e"),
            ("a", "b", "f"),
            ("a", "g"),
            ("h", "i", "j", "k"),
        ]
    ):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
    assert sorted(store.list_namespaces(max_depth=2)) == [("a", "b"), ("a", "g"), ("h", "i")]


def test_list_namespaces_no_conditions(store: MemcommitStore) -> None:
    # langgraph-checkpoint tests/test_store.py::test_list_namespaces_no_conditions
    namespaces = [("a", "b"), ("c", "d"), ("e", "f", "g")]
    for i, ns in enumerate(namespaces):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
    assert sorted(store.list_namespaces()) == sorted(namespaces)


def test_list_namespaces_empty_store(store: MemcommitStore) -> None:
    # langgraph-checkpoint tests/test_store.py::test_list_namespaces_empty_store
    assert store.list_namespaces() == []


def test_search_pages_match_full_listing(store: MemcommitStore) -> None:
    # langgraph-checkpoint tests/test_store.py::test_search_pages_match_full_listing
    items_per_namespace = 7
    for ns in [("a",), ("a", "b"), ("ab",), ("a", "c", "d")]:
        for i in range(items_per_namespace):
            store.put(ns, f"k{i}", {"i": i, "even": i % 2 == 0})

    def keys(items: Iterable[Item]) -> list[tuple[tuple[str, ...], str]]:
        return [(item.namespace, item.key) for item in items]

    full = keys(store.search(("a",), limit=100))
    assert {ns for ns, _ in full} == {("a",), ("a", "b"), ("a", "c", "d")}
    assert len(full) == 3 * items_per_namespace
    paged = [
        key
        for offset in range(0, len(full), 4)
        for key in keys(store.search(("a",), limit=4, offset=offset))
    ]
    assert paged == full
    even = keys(store.search(("a",), filter={"even": True}, limit=100))
    assert keys(store.search(("a",), filter={"even": True}, limit=3, offset=2)) == even[2:5]


def test_cannot_put_empty_namespace(store: MemcommitStore) -> None:
    # langgraph-checkpoint tests/test_store.py::test_cannot_put_empty_namespace (the part on
    # the store itself; the rest tests LangGraph's AsyncBatchedBaseStore)
    doc = {"foo": "bar"}

    async def run() -> None:
        for namespace in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
            with pytest.raises(InvalidNamespaceError):
                store.put(namespace, "foo", doc)
            with pytest.raises(InvalidNamespaceError):
                await store.aput(namespace, "foo", doc)
        ns = ("foo", "langgraph", "foo")
        await store.aput(ns, "bar", doc)
        assert (await store.aget(ns, "bar")).value == doc  # type: ignore[union-attr]
        assert (await store.asearch(ns, query="bar"))[0].value == doc
        await store.adelete(ns, "bar")
        assert (await store.aget(ns, "bar")) is None
        store.put(ns, "bar", doc)
        assert store.get(ns, "bar").value == doc  # type: ignore[union-attr]
        assert store.search(ns, query="bar")[0].value == doc
        store.delete(ns, "bar")
        assert store.get(ns, "bar") is None
        # Past the public put api, a "langgraph" root is accepted.
        await store.abatch([PutOp(("langgraph", "foo"), "bar", doc)])
        assert (await store.aget(("langgraph", "foo"), "bar")).value == doc  # type: ignore[union-attr]
        assert (await store.asearch(("langgraph", "foo")))[0].value == doc
        await store.adelete(("langgraph", "foo"), "bar")
        assert (await store.aget(("langgraph", "foo"), "bar")) is None
        store.batch([PutOp(("langgraph", "foo"), "bar", doc)])
        assert store.get(("langgraph", "foo"), "bar").value == doc  # type: ignore[union-attr]
        assert store.search(("langgraph", "foo"))[0].value == doc
        store.delete(("langgraph", "foo"), "bar")
        assert store.get(("langgraph", "foo"), "bar") is None

    asyncio.run(run())


INVALID_NAMESPACES = [("foo.bar",), ("foo\x00",), ("foo", ""), (123,)]
NAMESPACE_METHODS = ["get", "delete", "search", "prefix", "suffix"]


@pytest.mark.parametrize("namespace", INVALID_NAMESPACES)
@pytest.mark.parametrize("method", NAMESPACE_METHODS)
@pytest.mark.parametrize("asynchronous", [False, True])
def test_rejects_invalid_namespace_labels(
    store: MemcommitStore,
    monkeypatch: pytest.MonkeyPatch,
    namespace: tuple[Any, ...],
    method: str,
    asynchronous: bool,
) -> None:
    # langgraph-checkpoint tests/test_store.py::test_rejects_invalid_namespace_labels and
    # test_async_rejects_invalid_namespace_labels (unbatched): rejected before any batch.
    calls: list[str] = []
    monkeypatch.setattr(store, "batch", lambda ops: calls.append("batch"))
    monkeypatch.setattr(store, "abatch", lambda ops: calls.append("abatch"))
    ns = cast(Any, namespace)
    # The method's name (its async twin's is "a" + name) and its arguments.
    name, args, kwargs = {
        "get": ("get", (ns, "key"), {}),
        "delete": ("delete", (ns, "key"), {}),
        "search": ("search", (ns,), {}),
        "prefix": ("list_namespaces", (), {"prefix": ns}),
        "suffix": ("list_namespaces", (), {"suffix": ns}),
    }[method]
    if asynchronous:
        with pytest.raises(InvalidNamespaceError):
            asyncio.run(getattr(store, "a" + name)(*args, **kwargs))
    else:
        with pytest.raises(InvalidNamespaceError):
            getattr(store, name)(*args, **kwargs)
    assert calls == []


def test_search_and_listing_keep_empty_prefixes_and_wildcards(store: MemcommitStore) -> None:
    # langgraph-checkpoint tests/test_store.py::
    # test_search_and_listing_keep_empty_prefixes_and_wildcards and its async twin (unbatched)
    store.put(("tenant", "a_%"), "key", {"v": 1})
    store.put(("tenant", "b", "child"), "key", {"v": 1})
    assert len(store.search(())) == 2
    assert [item.namespace for item in store.search(("tenant", "a_%"))] == [("tenant", "a_%")]
    assert sorted(store.list_namespaces(prefix=("tenant", "*"), suffix=("*",))) == [
        ("tenant", "a_%"),
        ("tenant", "b", "child"),
    ]

    async def run() -> None:
        assert len(await store.asearch(())) == 2
        assert sorted(await store.alist_namespaces(prefix=("tenant", "*"), suffix=("*",))) == [
            ("tenant", "a_%"),
            ("tenant", "b", "child"),
        ]

    asyncio.run(run())


# -- TTL: langgraph-checkpoint-sqlite tests/test_ttl.py, on a clock the test moves -----------


def _ttl_store(tmp_path: Path, clock: ControllableClock, ttl: TTLConfig | None) -> MemcommitStore:
    return MemcommitStore(memcommit.open(str(tmp_path / "ttl.log"), clock=clock), ttl=ttl)


def test_ttl_basic(tmp_path: Path, clock: ControllableClock) -> None:
    # tests/test_ttl.py::test_ttl_basic
    ttl_seconds = 1
    store = _ttl_store(tmp_path, clock, {"default_ttl": ttl_seconds / 60})
    store.put(("test",), "item1", {"value": "test"})
    item = store.get(("test",), "item1")
    assert item is not None
    assert item.value["value"] == "test"
    clock.advance((ttl_seconds + 1) * 1000)
    assert store.sweep_ttl() == 1
    assert store.get(("test",), "item1") is None


def test_ttl_refresh(tmp_path: Path, clock: ControllableClock) -> None:
    # tests/test_ttl.py::test_ttl_refresh
    ttl_seconds = 1
    store = _ttl_store(tmp_path, clock, {"default_ttl": ttl_seconds / 60, "refresh_on_read": True})
    store.put(("test",), "item1", {"value": "test"})
    clock.advance(500)
    assert store.sweep_ttl() == 0
    assert store.get(("test",), "item1", refresh_ttl=True) is not None
    clock.advance(500)
    assert store.sweep_ttl() == 0
    item = store.get(("test",), "item1")
    assert item is not None
    assert item.value["value"] == "test"
    clock.advance(1750)
    assert store.sweep_ttl() == 1
    assert store.get(("test",), "item1") is None


def test_ttl_sweeper(tmp_path: Path, clock: ControllableClock) -> None:
    # tests/test_ttl.py::test_ttl_sweeper: the sweeper thread runs on wall time (every 30 ms
    # here); the item's age is the clock's.
    ttl_seconds = 2
    store = _ttl_store(
        tmp_path, clock, {"default_ttl": ttl_seconds / 60, "sweep_interval_minutes": 0.0005}
    )
    future = store.start_ttl_sweeper()
    store.put(("test",), "item1", {"value": "test"})
    assert store.get(("test",), "item1") is not None
    clock.advance(int((ttl_seconds + ttl_seconds / 2 + 0.5) * 1000))
    deadline = time.monotonic() + 30
    # (A refreshing read would push the expiry back: look without refreshing.)
    while store.get(("test",), "item1", refresh_ttl=False) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.get(("test",), "item1", refresh_ttl=False) is None
    assert store.stop_ttl_sweeper(timeout=30)
    assert future.done()


def test_ttl_custom_value(tmp_path: Path, clock: ControllableClock) -> None:
    # tests/test_ttl.py::test_ttl_custom_value
    store = _ttl_store(tmp_path, clock, None)
    store.put(("test",), "item1", {"value": "short"}, ttl=1 / 60)
    store.put(("test",), "item2", {"value": "long"}, ttl=3 / 60)
    clock.advance(2000)
    store.sweep_ttl()
    assert store.get(("test",), "item1") is None
    assert store.get(("test",), "item2") is not None
    clock.advance(4000)
    store.sweep_ttl()
    assert store.get(("test",), "item2") is None


def test_ttl_override_default(tmp_path: Path, clock: ControllableClock) -> None:
    # tests/test_ttl.py::test_ttl_override_default
    store = _ttl_store(tmp_path, clock, {"default_ttl": 5 / 60})
    store.put(("test",), "item1", {"value": "override"}, ttl=1 / 60)
    store.put(("test",), "item2", {"value": "default"})
    store.put(("test",), "item3", {"value": "permanent"}, ttl=None)
    clock.advance(2000)
    store.sweep_ttl()
    assert store.get(("test",), "item1") is None
    assert store.get(("test",), "item2") is not None
    assert store.get(("test",), "item3") is not None
    clock.advance(4000)
    store.sweep_ttl()
    assert store.get(("test",), "item2") is None
    assert store.get(("test",), "item3") is not None


def test_search_with_ttl(tmp_path: Path, clock: ControllableClock) -> None:
    # tests/test_ttl.py::test_search_with_ttl
    store = _ttl_store(tmp_path, clock, {"default_ttl": 1 / 60})
    store.put(("test",), "item1", {"value": "apple"})
    store.put(("test",), "item2", {"value": "banana"})
    results = store.search(("test",), filter={"value": "apple"})
    assert [r.key for r in results] == ["item1"]
    clock.advance(2000)
    store.sweep_ttl()
    assert store.search(("test",), filter={"value": "apple"}) == []


def test_async_ttl_basic_and_asearch_refresh(tmp_path: Path, clock: ControllableClock) -> None:
    # tests/test_ttl.py::test_async_ttl_basic and test_async_asearch_refresh_ttl
    store = _ttl_store(tmp_path, clock, {"default_ttl": 4 / 60, "refresh_on_read": True})

    async def run() -> None:
        namespace = ("docs", "user1")
        await store.aput(namespace, "item1", {"text": "content1", "id": 1})
        await store.aput(namespace, "item2", {"text": "content2", "id": 2})
        clock.advance(3000)
        found = await store.asearch(namespace, filter={"id": 1}, refresh_ttl=True)
        assert [r.key for r in found] == ["item1"]
        clock.advance(2000)
        store.sweep_ttl()
        item1 = await store.aget(namespace, "item1", refresh_ttl=False)
        assert item1 is not None and item1.value["text"] == "content1"
        assert await store.aget(namespace, "item2", refresh_ttl=False) is None
        clock.advance(2500)
        store.sweep_ttl()
        assert await store.aget(namespace, "item1", refresh_ttl=False) is None

    asyncio.run(run())


def test_omit_expired_and_ttl_across_reopen(tmp_path: Path, clock: ControllableClock) -> None:
    # TTLConfig.omit_expired: expired items are not read before a sweep deletes them; the
    # expiry is an absolute time in the log, so it holds across a reopen.
    path = str(tmp_path / "omit.log")
    ttl: TTLConfig = {"default_ttl": 1 / 60, "omit_expired": True}
    opened = memcommit.open(path, clock=clock)
    store = MemcommitStore(opened, ttl=ttl)
    store.put(("t",), "gone", {"v": 1})
    store.put(("t",), "kept", {"v": 2}, ttl=None)
    opened.close()
    clock.advance(1001)
    opened = memcommit.open(path, clock=clock)
    store = MemcommitStore(opened, ttl=ttl)
    assert store.get(("t",), "gone") is None
    assert [i.key for i in store.search(("t",))] == ["kept"]
    assert store.list_namespaces() == [("t",)]
    assert MemcommitStore(opened).get(("t",), "gone") is not None  # not omitted: not swept
    assert store.sweep_ttl() == 1
    opened.close()


# -- the store as memcommit keeps it ---------------------------------------------------------


def test_store_survives_reopen_and_keeps_created_at(
    tmp_path: Path, clock: ControllableClock
) -> None:
    path = str(tmp_path / "reopen.log")
    opened = memcommit.open(path, clock=clock)
    store = MemcommitStore(opened)
    store.put(("users", "u1"), "prefs", {"theme": "dark"})
    clock.advance(1000)
    store.put(("users", "u1"), "prefs", {"theme": "light"})
    clock.advance(1000)
    store.put(("users", "u1"), "name", {"name": "Ada"})
    before = store.search(("users",))
    opened.close()
    opened = memcommit.open(path, clock=clock)
    store = MemcommitStore(opened)
    after = store.search(("users",))
    assert [(i.key, i.value, i.created_at, i.updated_at) for i in after] == [
        (i.key, i.value, i.created_at, i.updated_at) for i in before
    ]
    assert [i.key for i in after] == ["name", "prefs"]  # the newest write first
    prefs = store.get(("users", "u1"), "prefs")
    assert prefs is not None
    assert (prefs.updated_at - prefs.created_at).total_seconds() == 1
    opened.close()


@pytest.mark.parametrize("where", ["memory", "file"])
def test_times_have_microsecond_resolution(
    tmp_path: Path, clock: ControllableClock, where: str
) -> None:
    # LangGraph's InMemoryStore and PostgresStore keep microseconds: writes within one
    # millisecond get distinct, ordered created_at and updated_at.
    opened = _open(where, tmp_path, "us.log", clock=clock)
    store = MemcommitStore(opened)
    start = clock.now()
    us = timedelta(microseconds=1)
    store.put(("t",), "a", {"v": 1})
    clock.advance(250 * us)
    store.put(("t",), "b", {"v": 2})
    clock.advance(250 * us)
    store.put(("t",), "a", {"v": 3})
    assert clock.now() - start < timedelta(milliseconds=1)

    def times(found: Iterable[Item | None]) -> list[tuple[str, Any, Any]]:
        return [(i.key, i.created_at, i.updated_at) for i in found if i is not None]

    expected = [("a", start, start + 500 * us), ("b", start + 250 * us, start + 250 * us)]
    assert times([store.get(("t",), "a"), store.get(("t",), "b")]) == expected
    assert times(store.search(("t",))) == expected  # the newest write first
    if where == "file":
        opened.close()
        opened = memcommit.open(str(tmp_path / "us.log"), clock=clock)
        store = MemcommitStore(opened)
        assert times(store.search(("t",))) == expected
    opened.close()


def test_ttl_runs_to_the_microsecond(tmp_path: Path, clock: ControllableClock) -> None:
    # A 1 s TTL put half a millisecond into a millisecond ends 1 s later, to the microsecond
    # (not at the start of that millisecond).
    store = _ttl_store(tmp_path, clock, {"default_ttl": 1 / 60, "refresh_on_read": True})
    us = timedelta(microseconds=1)
    clock.advance(500 * us)
    store.put(("t",), "k", {"v": 1})
    clock.advance(timedelta(seconds=1) - 250 * us)
    assert store.sweep_ttl() == 0
    clock.advance(249 * us)
    assert store.sweep_ttl() == 0
    clock.advance(us)
    assert store.sweep_ttl() == 1
    # A refreshing read moves the expiry to the microsecond too.
    store.put(("t",), "k", {"v": 2})
    clock.advance(300 * us)
    assert store.get(("t",), "k") is not None  # refreshes: 1 s from now
    clock.advance(timedelta(seconds=1) - us)
    assert store.sweep_ttl() == 0
    clock.advance(us)
    assert store.sweep_ttl() == 1
    store.store.close()


def test_items_written_with_millisecond_times_read_the_same(
    tmp_path: Path, clock: ControllableClock
) -> None:
    # An item as the store wrote it when its times were epoch milliseconds.
    path = str(tmp_path / "ms.log")
    opened = memcommit.open(path, clock=clock)
    t0 = clock.now_ms()
    old = {
        "namespace": ["t"],
        "key": "k",
        "value": {"v": 1},
        "created_at_ms": t0 - 2000,
        "updated_at_ms": t0 - 1000,
        "seq": 1,
        "ttl_minutes": 1 / 60,
        "expires_at_ms": t0,
    }
    fresh = {**old, "key": "r", "expires_at_ms": t0 + 5000}
    opened.medium.write(
        [(ITEM, entity_key(("t",), "k"), old), (ITEM, entity_key(("t",), "r"), fresh)]
    )
    opened.close()
    opened = memcommit.open(path, clock=clock)
    store = MemcommitStore(opened, ttl={"refresh_on_read": True, "omit_expired": True})
    ms = timedelta(milliseconds=1)
    assert store.get(("t",), "k") is None  # expired at t0
    found = MemcommitStore(opened).get(("t",), "k")
    assert found is not None
    assert found.created_at == clock.now() - 2000 * ms
    assert found.updated_at == clock.now() - 1000 * ms
    clock.advance(10)
    store.put(("t",), "k", {"v": 2})  # keeps created_at, writes microseconds
    state = opened.medium.get(ITEM, entity_key(("t",), "k"))
    assert state is not None and not any(name.endswith("_ms") for name in state)
    item = store.get(("t",), "k")
    assert item is not None and item.value == {"v": 2}
    assert item.created_at == clock.now() - 2010 * ms and item.updated_at == clock.now()
    # A refreshing read of an old item rewrites its times as microseconds.
    refreshed = store.get(("t",), "r")
    assert refreshed is not None and refreshed.created_at == clock.now() - 2010 * ms
    state = opened.medium.get(ITEM, entity_key(("t",), "r"))
    assert state is not None and not any(name.endswith("_ms") for name in state)
    assert state["expires_at_us"] == clock.now_ms() * 1000 + 1_000_000
    assert store.sweep_ttl() == 0
    opened.close()


# MatchCondition paths given as a bare str, and namespaces they can match.
BARE_STRING_CONDITIONS: list[list[tuple[Any, Any]]] = [
    [("suffix", "public")],
    [("prefix", "public")],
    [("prefix", "pu")],
    [("prefix", "p*")],
    [("suffix", "c"), ("prefix", "*u")],
    [("prefix", ("a",)), ("suffix", "public")],
]
BARE_STRING_NAMESPACES = [
    ("a", "public"),
    ("public",),
    ("p", "u"),
    ("p", "u", "b", "l", "i", "c"),
    ("x", "p", "u", "b", "l", "i", "c"),
    ("pu", "x"),
]


def test_match_condition_paths_may_be_a_bare_string_as_in_memory_store(
    store: MemcommitStore,
) -> None:
    # LangGraph's InMemoryStore (and SqliteStore) accept a str as a MatchCondition's path
    # and read it as a sequence of one-character labels.
    reference = InMemoryStore()
    for ns in BARE_STRING_NAMESPACES:
        store.put(ns, "k", {"v": 1})
        reference.put(ns, "k", {"v": 1})
    answers: list[list[tuple[str, ...]]] = []
    for conditions in BARE_STRING_CONDITIONS:
        match = tuple(MatchCondition(kind, path) for kind, path in conditions)
        op = ListNamespacesOp(match_conditions=match)
        expected = cast(list[Any], reference.batch([op]))[0]
        assert sorted(cast(list[Any], store.batch([op]))[0]) == sorted(expected), conditions
        answers.append(expected)
    assert any(answers)
    for kind in ("prefix", "suffix"):
        for path in ("pu", "public", "c"):
            asked = cast(Any, {kind: path})
            assert store.list_namespaces(**asked) == reference.list_namespaces(**asked), asked
    with pytest.raises(InvalidNamespaceError):  # a "." label, as in a tuple
        store.batch([ListNamespacesOp((MatchCondition("prefix", cast(Any, "a.")),))])


def test_values_are_json_and_copied(store: MemcommitStore) -> None:
    store.put(("t",), "k", {"tags": ("a", "b"), "n": {"x": 1}})
    item = store.get(("t",), "k")
    assert item is not None and item.value == {"tags": ["a", "b"], "n": {"x": 1}}
    item.value["n"]["x"] = 2
    again = store.get(("t",), "k")
    assert again is not None and again.value["n"] == {"x": 1}
    with pytest.raises(ValueError):
        store.put(("t",), "nan", {"x": math.nan})
    with pytest.raises(TypeError):
        store.put(("t",), "obj", {"x": object()})
    assert store.get(("t",), "nan") is None and store.get(("t",), "obj") is None


# A value of "a" of each JSON type: each is both stored (FILTER_VALUES) and asked for (FILTERS).
EACH_TYPE: list[dict[str, Any]] = [
    {"a": 1},
    {"a": 1.0},
    {"a": True},
    {"a": "1"},
    {"a": None},
    {"a": [1, "x"]},
]
FILTER_VALUES: list[dict[str, Any]] = [
    {},
    *EACH_TYPE,
    {"a": {"b": 2, "c": "x"}, "d": False},
    {"a.b": 3, "a": {"b": 4}},
]
FILTERS: list[dict[str, Any]] = [
    *EACH_TYPE,
    {"a": (1, "x")},
    {"a": {"b": 2}},
    {"a.b": 2},
    {"a.b": 3},
    {"a.c": "x", "d": False},
    {"a": {"$ne": 1}},
    {"a": {"$gte": 1, "$lt": 2}},
    {"a": {"$gt": "0"}},
    {"a": math.nan},
]


@pytest.mark.parametrize("wanted", FILTERS, ids=repr)
def test_compiled_filter_agrees_with_the_reference(wanted: dict[str, Any]) -> None:
    from memcommit.integrations.langgraph._common import (
        compile_store_filter,
        store_filter_matches,
    )

    matches = compile_store_filter(wanted)
    for value in FILTER_VALUES:
        assert matches(value) == store_filter_matches(value, wanted), value


# ---------------------------------------------------------------------------------------
# Filters as LangGraph's references compare
# ---------------------------------------------------------------------------------------

# A field "a" of each kind a filter may confuse: True and 1, False and 0, None and missing.
COMPARED: dict[str, dict[str, Any]] = {
    "true": {"a": True},
    "one": {"a": 1},
    "float": {"a": 1.0},
    "false": {"a": False},
    "zero": {"a": 0},
    "null": {"a": None},
    "missing": {"b": 1},
}


@pytest.mark.parametrize(
    "wanted",
    [
        {"a": 1},
        {"a": True},
        {"a": 0},
        {"a": False},
        {"a": None},
        {"a": {"$eq": True}},
        {"a": {"$eq": None}},
        {"a": {"$ne": None}},
    ],
    ids=repr,
)
def test_store_filters_match_as_in_memory_and_sqlite_stores(
    store: MemcommitStore, wanted: dict[str, Any]
) -> None:
    sqlite = SqliteStore(sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None))
    sqlite.setup()
    found = {}
    for name, reference in (("memory", InMemoryStore()), ("sqlite", sqlite), ("ours", store)):
        for key, value in COMPARED.items():
            reference.put(("f",), key, value)
        found[name] = sorted(item.key for item in reference.search(("f",), filter=wanted))
    assert found["ours"] == found["memory"] == found["sqlite"]


def test_store_filters_order_true_as_1_as_sqlite_store(store: MemcommitStore) -> None:
    # InMemoryStore raises on the missing and null fields here (float(None)); SqliteStore
    # orders True as 1, and leaves the fields that are no number out.
    for key, value in COMPARED.items():
        store.put(("f",), key, value)
    found = store.search(("f",), filter={"a": {"$gt": 0}})
    assert sorted(item.key for item in found) == ["float", "one", "true"]


@pytest.mark.parametrize("wanted", [{"a": 1}, {"a": True}, {"a": 0}, {"a": None}], ids=repr)
def test_saver_filters_match_as_in_memory_and_sqlite_savers(wanted: dict[str, Any]) -> None:
    savers = {
        "memory": InMemorySaver(),
        "sqlite": SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False)),
        "ours": MemcommitSaver(memcommit.open(":memory:")),
    }
    found = {}
    for name, saver in savers.items():
        for thread, metadata in COMPARED.items():
            config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            saver.put(config, empty_checkpoint(), cast(CheckpointMetadata, metadata), {})
        found[name] = sorted(
            t.config["configurable"]["thread_id"] for t in saver.list(None, filter=wanted)
        )
    assert found["ours"] == found["memory"] == found["sqlite"]


# ---------------------------------------------------------------------------------------
# Arguments: what each call refuses, naming the argument, with nothing written
# ---------------------------------------------------------------------------------------


def _put(saver: MemcommitSaver, thread_id: str, checkpoint_ns: str = "", **metadata: Any) -> Any:
    config: RunnableConfig = {
        "configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    }
    return saver.put(config, empty_checkpoint(), cast(CheckpointMetadata, metadata), {})


def _threads(saver: MemcommitSaver, config: RunnableConfig | None = None) -> list[str]:
    return sorted(t.config["configurable"]["thread_id"] for t in saver.list(config))


def test_prune_and_delete_for_runs_refuse_a_bare_str() -> None:
    opened = memcommit.open(":memory:")
    saver = MemcommitSaver(opened)
    for thread in ("a", "b", "ab"):
        _put(saver, thread, run_id=thread)
    head = opened.lsn
    # A str is a sequence of one-character ids: "ab" would delete threads "a" and "b".
    with pytest.raises(TypeError, match=r"^thread_ids must be a list of ids, not a str"):
        saver.prune("ab", strategy="delete")
    with pytest.raises(TypeError, match=r"^run_ids must be a list of ids, not a str"):
        saver.delete_for_runs("ab")
    with pytest.raises(TypeError, match=r"^thread_ids must be a list of ids, not a bytes"):
        asyncio.run(saver.aprune(cast(Any, b"ab")))
    assert _threads(saver) == ["a", "ab", "b"]
    assert opened.lsn == head
    saver.prune(["ab"], strategy="delete")
    saver.delete_for_runs(["a"])
    assert _threads(saver) == ["b"]


def test_list_without_thread_id_keeps_to_the_checkpoint_ns() -> None:
    # The references raise KeyError without a thread_id; the docstring's promise is a filter.
    saver = MemcommitSaver(memcommit.open(":memory:"))
    for thread in ("t1", "t2"):
        for ns in ("", "sub", "subgraph"):
            _put(saver, thread, ns)
    found = list(saver.list({"configurable": {"checkpoint_ns": "sub"}}))
    assert sorted(
        (t.config["configurable"]["thread_id"], t.config["configurable"]["checkpoint_ns"])
        for t in found
    ) == [("t1", "sub"), ("t2", "sub")]
    assert len(list(saver.list({"configurable": {"checkpoint_ns": ""}}))) == 2
    assert len(list(saver.list({"configurable": {}}))) == 6


def test_a_read_only_store_reads_without_refreshing_ttls(
    tmp_path: Path, clock: ControllableClock
) -> None:
    path = str(tmp_path / "ttl.log")
    writer = memcommit.open(path, clock=clock)
    MemcommitStore(writer).put(("a",), "k", {"v": 1}, ttl=5)
    state = writer.medium.get(ITEM, entity_key(("a",), "k"))
    reader = memcommit.open(path, read_only=True, clock=clock)
    store = MemcommitStore(reader, ttl={"refresh_on_read": True})
    clock.advance(timedelta(minutes=1))
    item = store.get(("a",), "k")
    assert item is not None and item.value == {"v": 1}
    assert [found.key for found in store.search(("a",))] == ["k"]
    assert asyncio.run(store.aget(("a",), "k")) is not None
    assert writer.medium.get(ITEM, entity_key(("a",), "k")) == state
    with pytest.raises(memcommit.ReadOnlyStore):
        store.put(("a",), "k", {"v": 2})
    reader.close()
    writer.close()


def test_a_saver_or_store_of_a_path_names_the_argument() -> None:
    for make in (MemcommitSaver, MemcommitStore):
        with pytest.raises(
            TypeError,
            match=r"^store must be a memcommit store, not str: pass memcommit.open\(path\)",
        ):
            make(cast(Any, "memory.db"))


@pytest.mark.parametrize(
    ("ttl", "error", "message"),
    [
        ("x", TypeError, r"^ttl must be a number of minutes or None, not 'x'"),
        (True, TypeError, r"^ttl must be a number of minutes or None, not True"),
        (math.nan, ValueError, r"^ttl: nan is not a number of minutes the store can keep"),
        (math.inf, ValueError, r"^ttl: inf is not a number of minutes the store can keep"),
        (1e303, ValueError, r"^ttl: 1e\+303 is not a number of minutes the store can keep"),
        (10**400, ValueError, r"^ttl: 1000.* is not a number of minutes the store can keep"),
    ],
    ids=repr,
)
def test_a_bad_ttl_is_refused_naming_it(ttl: Any, error: type[Exception], message: str) -> None:
    opened = memcommit.open(":memory:")
    store = MemcommitStore(opened)
    with pytest.raises(error, match=message) as raised:
        store.put(("a",), "k", {"v": 1}, ttl=ttl)
    assert isinstance(raised.value, memcommit.MemcommitError)
    assert opened.lsn == 0


@pytest.mark.parametrize(
    ("ttl", "error", "message"),
    [
        ([1], TypeError, r"^ttl must be a dict \(TTLConfig\) or None, not list"),
        ({"default_ttl": "5"}, TypeError, r"^ttl: default_ttl must be a number of minutes"),
        ({"default_ttl": math.inf}, ValueError, r"^ttl: default_ttl: inf is not a number"),
        ({"refresh_on_read": 1}, TypeError, r"^ttl: refresh_on_read must be a bool, not 1"),
        ({"sweep_interval_minutes": 0}, ValueError, r"^ttl: sweep_interval_minutes: 0 minutes"),
        ({"default_tll": 5}, ValueError, r"^ttl: 'default_tll' is not a field of TTLConfig"),
    ],
    ids=repr,
)
def test_a_bad_ttl_configuration_is_refused_at_construction(
    ttl: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as raised:
        MemcommitStore(memcommit.open(":memory:"), ttl=ttl)
    assert isinstance(raised.value, memcommit.MemcommitError)


def test_lone_surrogates_are_refused_naming_the_argument() -> None:
    opened = memcommit.open(":memory:")
    saver, store = MemcommitSaver(opened), MemcommitStore(opened)
    config = _put(saver, "t")
    head = opened.lsn
    bad = "a\ud800"
    refused: list[tuple[str, Any]] = [
        ("thread_id", lambda: _put(saver, bad)),
        ("checkpoint_ns", lambda: _put(saver, "t", bad)),
        ("metadata", lambda: _put(saver, "t", note=bad)),
        ("thread_id", lambda: saver.get_tuple({"configurable": {"thread_id": bad}})),
        ("thread_id", lambda: list(saver.list({"configurable": {"thread_id": bad}}))),
        ("thread_id", lambda: saver.delete_thread(bad)),
        ("task_id", lambda: saver.put_writes(config, [("ch", 1)], bad)),
        ("writes", lambda: saver.put_writes(config, [(bad, 1)], "task")),
        ("target_thread_id", lambda: saver.copy_thread("t", bad)),
        ("key", lambda: store.put(("a",), bad, {"v": 1})),
        ("key", lambda: store.get(("a",), bad)),
        ("namespace", lambda: store.put(("a", bad), "k", {"v": 1})),
        ("namespace", lambda: store.search((bad,))),
        (r"item 'k' in namespace \('a',\): value", lambda: store.put(("a",), "k", {"v": bad})),
    ]
    for name, call in refused:
        with pytest.raises(memcommit.InvalidValue, match=rf"^{name}: holds a lone surrogate"):
            call()
    assert opened.lsn == head


def test_ids_too_long_for_a_key_name_the_argument_and_its_room() -> None:
    # thread_id, checkpoint_ns and checkpoint_id (task_id for writes) make one key of the
    # log, at most 1,024 bytes; an item's namespace and key likewise.
    opened = memcommit.open(":memory:")
    saver, store = MemcommitSaver(opened), MemcommitStore(opened)
    config = _put(saver, "t")
    head = opened.lsn
    with pytest.raises(
        memcommit.InvalidValue,
        match=r"^thread_id: 1100 bytes is too long; a checkpoint's thread_id \(with its other "
        r"key parts\) may be at most 9[0-9]{2} bytes with this checkpoint_ns and checkpoint_id",
    ) as raised:
        _put(saver, "t" * 1100)
    said = re.search(r"at most (\d+) bytes", str(raised.value))
    assert said is not None
    room = int(said.group(1))
    with pytest.raises(memcommit.InvalidValue, match=r"^task_id: 1100 bytes is too long"):
        saver.put_writes(config, [("ch", 1)], "k" * 1100)
    with pytest.raises(memcommit.InvalidValue, match=r"^target_thread_id: 1100 bytes is too"):
        saver.copy_thread("t", "t" * 1100)
    with pytest.raises(memcommit.InvalidValue, match=r"^key: 1100 bytes is too long; an item's"):
        store.put(("a",), "k" * 1100, {"v": 1})
    assert opened.lsn == head
    # The room the message gives is exact.
    checkpoint = empty_checkpoint()
    checkpoint["id"] = config["configurable"]["checkpoint_id"]
    saver.put({"configurable": {"thread_id": "t" * room, "checkpoint_ns": ""}}, checkpoint, {}, {})
    with pytest.raises(memcommit.InvalidValue, match=r"^thread_id"):
        saver.put(
            {"configurable": {"thread_id": "t" * (room + 1), "checkpoint_ns": ""}},
            checkpoint,
            {},
            {},
        )


# ---------------------------------------------------------------------------------------
# What the README's LangGraph section says of stores, sharing and limits
# ---------------------------------------------------------------------------------------


def test_readme_a_remote_store_is_not_supported(tmp_path: Path) -> None:
    # The other stores: test_conformance_validate and the store fixture run on each.
    with (
        ServerProcess(tmp_path / "served.db") as server,
        memcommit.RemoteStore(server.url) as remote,
    ):
        for make in (MemcommitSaver, MemcommitStore):
            with pytest.raises(memcommit.NotSupported, match="its server"):
                make(remote)


def test_readme_a_log_file_has_one_writer_and_readers_see_up_to_their_refresh(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "one.log")
    writer = memcommit.open(path)
    with pytest.raises(memcommit.StoreLocked):
        memcommit.open(path)
    reader = memcommit.open(path, read_only=True)
    saver, long_term = MemcommitSaver(writer), MemcommitStore(writer)
    seen, seen_long_term = MemcommitSaver(reader), MemcommitStore(reader)
    _put(saver, "t", step=1)
    long_term.put(("a",), "k", {"v": 1})
    assert seen.get_tuple({"configurable": {"thread_id": "t"}}) is None
    assert seen_long_term.get(("a",), "k") is None
    reader.refresh()
    found = seen.get_tuple({"configurable": {"thread_id": "t"}})
    assert found is not None and found.metadata["step"] == 1
    assert seen_long_term.get(("a",), "k") is not None
    reader.close()
    writer.close()


_WORKER = """
import sys
import memcommit
from langgraph.checkpoint.base import empty_checkpoint
from memcommit.integrations.langgraph import MemcommitSaver, MemcommitStore

store = memcommit.open(sys.argv[1])
saver, long_term = MemcommitSaver(store), MemcommitStore(store)
found = saver.get_tuple({"configurable": {"thread_id": "first"}})
item = long_term.get(("notes",), "first")
assert found is not None and found.metadata["by"] == "parent", found
assert item is not None and item.value == {"by": "parent"}, item
config = {"configurable": {"thread_id": "second", "checkpoint_ns": ""}}
saver.put(config, empty_checkpoint(), {"by": "worker"}, {})
long_term.put(("notes",), "second", {"by": "worker"})
store.close()
"""


def test_readme_worker_processes_share_through_a_store_in_postgresql(
    request: pytest.FixtureRequest,
) -> None:
    url = f"{_pg_dsn('postgres', request)}?store=lg-{uuid.uuid4().hex[:12]}"
    store = memcommit.open(url)
    saver, long_term = MemcommitSaver(store), MemcommitStore(store)
    _put(saver, "first", by="parent")
    long_term.put(("notes",), "first", {"by": "parent"})
    done = subprocess.run(
        [sys.executable, "-c", _WORKER, url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT / "python")},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = saver.get_tuple({"configurable": {"thread_id": "second"}})
    assert found is not None and found.metadata["by"] == "worker"  # type: ignore[typeddict-item]
    item = long_term.get(("notes",), "second")
    assert item is not None and item.value == {"by": "worker"}
    store.close()


def test_readme_a_checkpoint_takes_at_most_about_3_4_of_max_record_bytes() -> None:
    opened = memcommit.open(":memory:", max_record_bytes=1 << 16)
    saver = MemcommitSaver(opened)
    config: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    fits = empty_checkpoint()
    fits["channel_values"] = {"blob": b"x" * int(0.72 * (1 << 16))}
    saver.put(config, fits, {}, {})
    head = opened.lsn
    too_large = create_checkpoint(fits, None, 1)
    too_large["channel_values"] = {"blob": b"x" * int(0.76 * (1 << 16))}
    with pytest.raises(
        memcommit.InvalidValue,
        match=r"^checkpoint: the checkpoint .* would take 6[0-9]{4} bytes as JSON \(its "
        r"serialized bytes in base64.* at most 65535 bytes \(max_record_bytes is 65536\)",
    ):
        saver.put(config, too_large, {}, {})
    assert opened.lsn == head
    second = saver.put(config, create_checkpoint(fits, None, 2), {}, {})
    head = opened.lsn
    with pytest.raises(memcommit.InvalidValue, match=r"^writes: this task's pending writes"):
        saver.put_writes(second, [("blob", b"x" * int(0.76 * (1 << 16)))], "task")
    assert opened.lsn == head
    assert len(list(saver.list(None))) == 2


# ---------------------------------------------------------------------------------------
# The example: kill -9 mid-run, resume from the checkpoint
# ---------------------------------------------------------------------------------------


def test_example_resumes_after_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    env = dict(os.environ)
    here = str(Path(memcommit.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langgraph_resume.py"), "--path", str(path)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    # Killed while score_b hung, after score_a's result was stored as a pending write (the
    # two run in parallel, in either order).
    assert summary["before_kill"][:2] == ["fetch", "parse"]
    assert sorted(summary["before_kill"][2:]) == ["score_a", "score_b"]
    # Resumed from the checkpoint: only the unfinished node and what follows ran again.
    assert summary["after_resume"] == ["score_b", "report"]
    assert summary["ran"] == ["fetch", "parse", "score_a", "score_b", "report"]
    assert summary["report"] == "a=645 b=144"
    assert summary["long_term"] == {"text": "a=645 b=144"}

    store = memcommit.open(str(path))
    saver = MemcommitSaver(store)
    config: RunnableConfig = {"configurable": {"thread_id": "report-2026-01"}}
    latest = saver.get_tuple(config)
    assert latest is not None
    assert latest.checkpoint["channel_values"]["report"] == "a=645 b=144"
    assert [t.metadata["step"] for t in saver.list(config)] == [4, 3, 2, 1, 0, -1]
    store.close()


def test_docstring_examples() -> None:
    import doctest

    import memcommit.integrations.langgraph as package
    from memcommit.integrations.langgraph import saver, store

    for module in (package, saver, store):
        assert doctest.testmod(module).failed == 0, module.__name__
