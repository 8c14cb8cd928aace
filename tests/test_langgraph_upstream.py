"""LangGraph's own store tests, vector search included, run against MemcommitStore.

The ``tests/`` of the installed ``langgraph-checkpoint`` (``test_store.py``, the tests of
``InMemoryStore`` and of ``AsyncBatchedBaseStore`` over it) and ``langgraph-checkpoint-sqlite``
(``test_store.py`` and ``test_async_store.py``, of ``SqliteStore`` and ``AsyncSqliteStore``)
come from their source distributions on PyPI, which ``make langgraph-suites`` fetches into
``.cache/langgraph-suites/`` (``make test`` does so before the Python tests; upstream's code is
never committed here). Each suite runs in a pytest of its own, in a subprocess, with the plugin
tests/langgraph_upstream_shim.py, which swaps the stores the tests import for MemcommitStores
built the same way. Every selected test must pass, and each suite must select at least as many
tests as were measured here (in all, and among them those that built a MemcommitStore, and
those that built one with a vector index), so a selection that shrinks fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "langgraph-suites"
TARGET = "langgraph-suites"


@dataclass(frozen=True)
class Suite:
    dist: str
    files: tuple[str, ...]
    # The least each must select, as measured with langgraph-checkpoint 4.3.2 and
    # langgraph-checkpoint-sqlite 3.1.2: the tests, those that built a MemcommitStore, and
    # those that built one with a vector index (``index=``, the fake embeddings).
    least_selected: int
    least_on_store: int
    least_vector: int
    # Upstream tests that do not apply to MemcommitStore, by id (every parametrization), and why.
    deselect: dict[str, str] = field(default_factory=dict)


SUITES = [
    Suite("langgraph-checkpoint", ("tests/test_store.py",), 117, 86, 13),
    Suite(
        "langgraph-checkpoint-sqlite",
        ("tests/test_store.py", "tests/test_async_store.py"),
        136,
        133,
        36,
        deselect={
            # After checking the index configuration (as the async test of the same name,
            # which runs, also does), it counts the vector tables in SQLite's sqlite_master
            # through SqliteStore's connection, store.conn: MemcommitStore has no SQL
            # connection (its vectors are memories of the log).
            "tests/test_store.py::test_vector_store_initialization": "SQLite's store.conn",
            # Checks SqliteStore.MIGRATIONS, SQLite's schema migrations: a log has no schema.
            "tests/test_store.py::test_nonnull_migrations": "SQLite's migrations",
            # Expects SqliteStore to refuse (ValueError "Invalid filter key") a filter key that
            # would break out of its SQL: MemcommitStore builds no SQL, so that key is only a
            # field no item has, and the search returns nothing.
            "tests/test_store.py::test_sql_injection_vulnerability": "SQLite's SQL key check",
            # Expects AsyncSqliteStore's sync methods to refuse to run on the event loop's
            # thread (asyncio.InvalidStateError), where they would wait on the loop itself:
            # MemcommitStore's sync methods do not use the loop, so they run there.
            "tests/test_async_store.py::test_no_running_loop": "the async store's sync refusal",
        },
    ),
]


def _sdist(dist: str) -> Path:
    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError:
        pytest.fail(f"{dist} is not installed: pip install -e '.[dev]' (make dev)")
    for stem in (dist.replace("-", "_"), dist):
        path = CACHE / f"{stem}-{version}.tar.gz"
        if path.is_file():
            return path
    pytest.fail(
        f"{dist} {version}'s source distribution (its tests) is not in {CACHE}: "
        f"run `make {TARGET}` (make test runs it before the Python tests)"
    )


def _extract_tests(sdist: Path, into: Path) -> None:
    """The sdist's top-level tests/ folder, its regular files only."""
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) < 3 or parts[1] != "tests" or not member.isfile() or ".." in parts:
                continue
            target = into.joinpath(*parts[1:])
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            target.write_bytes(source.read())


def _run(suite: Suite, where: Path) -> dict[str, Any]:
    _extract_tests(_sdist(suite.dist), where)
    (where / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (where / "tmp").mkdir()
    report = where / "report.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).parent), *filter(None, [env.get("PYTHONPATH")])]
    )
    env["TMPDIR"] = str(where / "tmp")  # the tests' temporary logs (and their .lock files)
    args = [sys.executable, "-m", "pytest", "-q", "-c", "pytest.ini", "--rootdir", "."]
    args += ["-p", "no:cacheprovider", "-p", "langgraph_upstream_shim"]
    args += ["--shim-report", str(report), *suite.files]
    for test in suite.deselect:
        args += ["--shim-deselect", test]
    done = subprocess.run(
        args, cwd=where, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert report.is_file(), f"{suite.dist}'s tests did not run:\n{done.stdout}\n{done.stderr}"
    result: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    result["output"] = done.stdout[-5000:] + done.stderr[-2000:]
    return result


@pytest.mark.parametrize("suite", SUITES, ids=[suite.dist for suite in SUITES])
def test_langgraph_store_suite_passes_on_memcommit(suite: Suite, tmp_path: Path) -> None:
    result = _run(suite, tmp_path)
    tests = result["tests"]
    failed = {nodeid: test for nodeid, test in tests.items() if test["outcome"] != "passed"}
    assert not failed, "\n\n".join(
        f"{nodeid}: {test['outcome']}\n{test.get('longrepr', '')}"
        for nodeid, test in failed.items()
    )
    assert result["exitstatus"] == 0, result["output"]
    on_store = [n for n, test in tests.items() if test.get("indexed") or test.get("unindexed")]
    vector = [n for n, test in tests.items() if test.get("indexed")]
    counts = (len(tests), len(on_store), len(vector))
    least = (suite.least_selected, suite.least_on_store, suite.least_vector)
    assert all(n >= m for n, m in zip(counts, least, strict=True)), (
        f"{suite.dist}: (selected, on a MemcommitStore, with a vector index) = {counts}, "
        f"fewer than the {least} measured"
    )
    # Only the tests named were left out (another release of the suite may not have them all).
    deselected = {nodeid.split("[")[0] for nodeid in result["deselected"]}
    assert deselected <= set(suite.deselect)


def test_make_test_fetches_the_suites_first() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    needs = next(line for line in makefile.splitlines() if line.startswith("test-python:"))
    assert TARGET in needs.split("##")[0]
    assert f"\n{TARGET}:" in makefile
    assert "/.cache/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
