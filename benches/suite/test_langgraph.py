"""memcommit's LangGraph saver and store beside LangGraph's own, one group per operation.

The contenders are ``benches/langgraph_bench.py``'s (``SAVERS``, ``STORES``): memcommit with
``durability="commit"`` and ``"batch"``, LangGraph's ``SqliteSaver`` / ``SqliteStore`` on a
file, and its ``InMemorySaver`` / ``InMemoryStore``. Skipped without LangGraph
(``pip install 'memcommit[dev]'``).
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs langgraph (memcommit[dev])")

from langgraph_bench import NAMESPACES, SAVERS, STORES, checkpoint
from suite.measure import each_round
from suite.sizes import Size

THREAD: dict[str, Any] = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}


def _named(contenders: list[tuple[str, Callable[[str], Any]]]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("name", [pytest.param(name, id=name) for name, _ in contenders])


@contextlib.contextmanager
def _opened(
    contenders: list[tuple[str, Callable[[str], Any]]], name: str, directory: Path
) -> Iterator[Any]:
    make = dict(contenders)[name]
    with make(str(directory / "langgraph.db")) as opened:
        yield opened


def _put_checkpoints(saver: Any, n: int) -> list[Any]:
    """A chain of `n` checkpoints on one thread; returns the config of each."""
    config, configs = THREAD, []
    for i in range(n):
        cp = checkpoint(i)
        config = saver.put(config, cp, {"source": "loop", "step": i, "parents": {}}, {})
        configs.append(config)
    return configs


def _item(i: int) -> tuple[tuple[str, ...], str, dict[str, Any]]:
    namespace = ("users", f"u{i % NAMESPACES}", "memories")
    return (
        namespace,
        f"m{i}",
        {"text": f"memory {i}: " + "the user likes " * 6, "kind": f"k{i % 7}"},
    )


def _fresh_round(
    contenders: list[tuple[str, Callable[[str], Any]]], name: str, scratch: Path
) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    """A new contender per round (in its own directory), and how to close it after."""
    rounds: list[contextlib.ExitStack] = []
    made = itertools.count(1)

    def setup() -> Any:
        stack = contextlib.ExitStack()
        rounds.append(stack)
        # Numbered by rounds made, not open: each round's teardown comes before the next setup.
        directory = scratch / f"round-{next(made)}"
        directory.mkdir()
        return stack.enter_context(_opened(contenders, name, directory))

    def teardown(_: Any) -> None:
        rounds.pop().close()

    return setup, teardown


@pytest.mark.benchmark(group="langgraph saver put")
@_named(SAVERS)
def test_saver_put(benchmark: Any, name: str, size: Size, scratch: Path) -> None:
    setup, teardown = _fresh_round(SAVERS, name, scratch)
    each_round(
        benchmark, setup, lambda s: _put_checkpoints(s, size.langgraph), size.rounds, teardown
    )
    benchmark.extra_info["records"] = size.langgraph


@pytest.mark.benchmark(group="langgraph saver get_tuple")
@_named(SAVERS)
def test_saver_get_tuple(benchmark: Any, name: str, size: Size, scratch: Path) -> None:
    with _opened(SAVERS, name, scratch) as saver:
        configs = _put_checkpoints(saver, size.langgraph)
        rng = random.Random(5)
        wanted = [configs[rng.randrange(len(configs))] for _ in configs]

        def get_all() -> None:
            for config in wanted:
                assert saver.get_tuple(config) is not None

        benchmark.pedantic(get_all, rounds=size.rounds, iterations=1)
    benchmark.extra_info["records"] = len(wanted)


@pytest.mark.benchmark(group="langgraph store put")
@_named(STORES)
def test_store_put(benchmark: Any, name: str, size: Size, scratch: Path) -> None:
    setup, teardown = _fresh_round(STORES, name, scratch)

    def put_all(store: Any) -> None:
        for i in range(size.langgraph):
            store.put(*_item(i))

    each_round(benchmark, setup, put_all, size.rounds, teardown)
    benchmark.extra_info["records"] = size.langgraph


@pytest.mark.benchmark(group="langgraph store get")
@_named(STORES)
def test_store_get(benchmark: Any, name: str, size: Size, scratch: Path) -> None:
    with _opened(STORES, name, scratch) as store:
        for i in range(size.langgraph):
            store.put(*_item(i))
        rng = random.Random(11)
        wanted = [_item(rng.randrange(size.langgraph))[:2] for _ in range(size.langgraph)]

        def get_all() -> None:
            for namespace, key in wanted:
                assert store.get(namespace, key) is not None

        benchmark.pedantic(get_all, rounds=size.rounds, iterations=1)
    benchmark.extra_info["records"] = len(wanted)


@pytest.mark.benchmark(group="langgraph store search")
@_named(STORES)
def test_store_search(benchmark: Any, name: str, size: Size, scratch: Path) -> None:
    """A search of one namespace with a filter, limit 10."""
    searches = max(size.langgraph // 10, 1)
    with _opened(STORES, name, scratch) as store:
        for i in range(size.langgraph):
            store.put(*_item(i))

        def search_all() -> None:
            for i in range(searches):
                namespace, _, value = _item(i * 7 % size.langgraph)  # an item that is there
                found = store.search(namespace[:2], filter={"kind": value["kind"]}, limit=10)
                assert found

        benchmark.pedantic(search_all, rounds=size.rounds, iterations=1)
    benchmark.extra_info.update(records=searches, items=size.langgraph)
