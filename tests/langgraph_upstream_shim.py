"""A pytest plugin that runs LangGraph's own store tests against MemcommitStore.

tests/test_langgraph_upstream.py runs the ``tests/`` of the ``langgraph-checkpoint`` and
``langgraph-checkpoint-sqlite`` source distributions (fetched by ``make langgraph-suites``,
never committed) in a pytest of their own, with ``-p langgraph_upstream_shim``. Loaded before
their collection, this plugin:

* swaps the stores they import (``langgraph.store.memory.InMemoryStore``,
  ``langgraph.store.sqlite.SqliteStore`` and ``AsyncSqliteStore``) for subclasses of
  MemcommitStore that are built the same way: ``InMemoryStore(index=..., ttl=...)`` over
  ``memcommit.open(":memory:")``, ``SqliteStore.from_conn_string(path, index=..., ttl=...)``
  over ``memcommit.open(path)`` (closed on exit), and ``setup()`` that has nothing to do.
  ``SqliteIndexConfig`` names the fields to embed ``text_fields``; they are passed on as
  ``IndexConfig``'s ``fields``;
* runs their ``async def`` tests and fixtures on asyncio with AnyIO's pytest plugin (upstream
  uses pytest-asyncio's auto mode; it is not needed here);
* deselects the tests named by ``--shim-deselect NODEID`` (a test's id without its
  parameters: every parametrization of it);
* writes ``--shim-report PATH``, JSON: each test's outcome and how many MemcommitStores it
  built, with and without a vector index (``index=``), and the deselected ids.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import langgraph.store.memory
import langgraph.store.sqlite
import pytest

import memcommit
from memcommit.integrations.langgraph import MemcommitStore

# The MemcommitStores built by the test running now: (with an index, without one).
_built = [0, 0]


def _index(index: Any) -> Any:
    if index is None:
        return None
    config = dict(index)
    if "text_fields" in config:  # SqliteIndexConfig's name for IndexConfig's "fields"
        config["fields"] = config["text_fields"]
    return config


class _Counted(MemcommitStore):
    def __init__(self, store: memcommit.MemoryStore, *, index: Any = None, ttl: Any = None):
        super().__init__(store, index=_index(index), ttl=ttl)
        _built[0 if index is not None else 1] += 1


class InMemoryStore(_Counted):
    """``langgraph.store.memory.InMemoryStore``'s constructor, over an in-memory log."""

    def __init__(self, *, index: Any = None, ttl: Any = None) -> None:
        super().__init__(memcommit.open(":memory:"), index=index, ttl=ttl)


class SqliteStore(_Counted):
    """``langgraph.store.sqlite.SqliteStore``'s ``from_conn_string``, over a log at the path."""

    @classmethod
    @contextlib.contextmanager
    def from_conn_string(
        cls, conn_string: str, *, index: Any = None, ttl: Any = None
    ) -> Iterator[SqliteStore]:
        store = memcommit.open(conn_string)
        try:
            yield cls(store, index=index, ttl=ttl)
        finally:
            store.close()

    def setup(self) -> None:
        pass


class AsyncSqliteStore(_Counted):
    """``langgraph.store.sqlite.AsyncSqliteStore``'s ``from_conn_string``, likewise."""

    @classmethod
    @contextlib.asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, *, index: Any = None, ttl: Any = None
    ) -> AsyncIterator[AsyncSqliteStore]:
        store = memcommit.open(conn_string)
        try:
            yield cls(store, index=index, ttl=ttl)
        finally:
            store.close()

    async def setup(self) -> None:
        pass


# Swapped at import, before pytest imports the upstream test modules.
langgraph.store.memory.InMemoryStore = InMemoryStore  # type: ignore[misc, assignment]
langgraph.store.sqlite.SqliteStore = SqliteStore  # type: ignore[misc, assignment]
langgraph.store.sqlite.AsyncSqliteStore = AsyncSqliteStore  # type: ignore[misc, assignment]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shim-report", required=True, help="where to write the JSON report")
    parser.addoption(
        "--shim-deselect", action="append", default=[], help="a test id (no parameters)"
    )


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: Any, name: str, obj: object) -> Any:
    # A wrapper runs before AnyIO's hook, which runs the coroutine tests that carry its mark.
    if inspect.iscoroutinefunction(obj) and collector.funcnamefilter(name):
        pytest.mark.anyio(obj)
    return (yield)


class _Report:
    def __init__(self, config: pytest.Config) -> None:
        self.path = Path(config.getoption("shim_report"))
        self.deselect = set(config.getoption("shim_deselect"))
        self.deselected: list[str] = []
        self.tests: dict[str, dict[str, Any]] = {}

    # Registered after AnyIO's plugin, so this is the fixture the tests get: asyncio only
    # (AnyIO's would run each test on every backend installed, trio too).
    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[Any]) -> None:
        keep: list[Any] = []
        drop: list[Any] = []
        for item in items:
            (drop if item.nodeid.split("[")[0] in self.deselect else keep).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        self.deselected = [item.nodeid for item in drop]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: Any) -> Any:
        _built[:] = [0, 0]
        self.tests[item.nodeid] = {"outcome": "passed"}
        try:
            return (yield)
        finally:
            self.tests[item.nodeid].update(indexed=_built[0], unindexed=_built[1])

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        test = self.tests.setdefault(report.nodeid, {"outcome": "passed"})
        if report.failed:
            test["outcome"] = f"failed ({report.when})"
            test["longrepr"] = str(report.longrepr)[-3000:]
        elif report.skipped and test["outcome"] == "passed":
            test["outcome"] = "skipped"

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        report = {"exitstatus": int(exitstatus), "tests": self.tests, "deselected": self.deselected}
        self.path.write_text(json.dumps(report, indent=1), encoding="utf-8")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Report(config), "langgraph_upstream_report")
