"""MemcommitStore with a vector index (``index=``): LangGraph's semantic search on memcommit.

* The first part checks what LangGraph's own vector-search tests check of its stores
  (``langgraph-checkpoint`` ``tests/test_store.py`` for ``InMemoryStore``,
  ``langgraph-checkpoint-sqlite`` ``tests/test_store.py`` and ``tests/test_async_store.py``
  for ``SqliteStore``), each test citing its upstream name, on an embedder of this file: each
  word counts in a dimension of its own, so scores are exact and the tests say why an item
  ranks first. (The data are this file's own.)
* The second part is memcommit's own: the vector memories each put writes, namespaces as
  tags, filters that need more than the first vectors the core returns, unindexed items,
  re-puts, deletes and TTL sweeps, a reopened log, the write order under a failed or killed
  item commit, a put refused for its size (nothing written), and a query of zeros.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

pytest.importorskip("langgraph.store.base")

from langchain_core.embeddings import Embeddings
from langgraph.store.base import IndexConfig, PutOp, SearchItem, SearchOp
from langgraph.store.base.batch import AsyncBatchedBaseStore

import memcommit
from memcommit.integrations.langgraph import MemcommitStore
from memcommit.integrations.langgraph.store import ITEM, VECTOR, VECTOR_SEQ, vector_id
from memcommit.roles.medium import entity_key
from memcommit.testing import ControllableClock

ROOT = Path(__file__).resolve().parent.parent


VOCABULARY = tuple(
    """
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29
    apple birds blue body book car cat color content document dog dogs fish green house i
    number phone rating red test text title zebra
    你好世界 こんにちは 안녕하세요 세계 привет мир नमस त द न य
    """.split()
)
"""Every word the tests embed, each a dimension of its own."""


class Words(Embeddings):
    """Each word (lowercased, ``\\w+``) adds 1 to its own dimension of :data:`VOCABULARY`.

    So a cosine is exact arithmetic on shared words, the same in every process, and a word
    missing from the vocabulary raises ``KeyError`` naming it rather than share a dimension.
    """

    def __init__(self) -> None:
        self.dims = len(VOCABULARY)
        self.dimension = {word: i for i, word in enumerate(VOCABULARY)}
        self.document_calls: list[list[str]] = []
        self.query_calls: list[str] = []

    def vector(self, text: str) -> list[float]:
        """The vector of `text`."""
        out = [0.0] * self.dims
        for word in re.findall(r"\w+", text.lower()):
            out[self.dimension[word]] += 1.0
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """The vectors of `texts` (the call is recorded)."""
        self.document_calls.append(list(texts))
        return [self.vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """The vector of `text` (the call is recorded)."""
        self.query_calls.append(text)
        return self.vector(text)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norms if norms else 0.0


@pytest.fixture
def words() -> Words:
    return Words()


@pytest.fixture(params=["memory", "file"])
def where(request: pytest.FixtureRequest) -> str:
    return cast(str, request.param)


@pytest.fixture
def store(where: str, tmp_path: Path, words: Words) -> Iterator[MemcommitStore]:
    # As the store tests of test_langgraph.py: a store in RAM and one in a file.
    opened = memcommit.open(":memory:" if where == "memory" else str(tmp_path / "s.log"))
    yield MemcommitStore(opened, index={"dims": words.dims, "embed": words})
    opened.close()


def _indexed(words: Words, fields: list[str] | None = None) -> MemcommitStore:
    index: IndexConfig = {"dims": words.dims, "embed": words}
    if fields is not None:
        index["fields"] = fields
    return MemcommitStore(memcommit.open(":memory:"), index=index)


def _keys(results: Sequence[SearchItem]) -> list[str]:
    return [r.key for r in results]


def _vectors(store: MemcommitStore) -> dict[str, Any]:
    """The active vector memories, by id."""
    return {m.id: m for m in store.store.find(kind=VECTOR)}


# ---------------------------------------------------------------------------------------
# What LangGraph's own vector-search tests check
# ---------------------------------------------------------------------------------------


def test_vector_store_initialization(words: Words) -> None:
    # tests/test_store.py::test_vector_store_initialization (both packages)
    store = _indexed(words)
    assert store.index_config is not None
    assert store.index_config["dims"] == words.dims
    assert store.index_config["embed"] is words
    assert store.embeddings is words
    assert store.index_config.get("fields") is None
    with_fields = _indexed(words, ["content", "title"])
    assert with_fields.index_config is not None
    assert with_fields.index_config["fields"] == ["content", "title"]
    assert MemcommitStore(memcommit.open(":memory:")).index_config is None


def test_vector_insert_with_auto_embedding(store: MemcommitStore) -> None:
    # tests/test_store.py::test_vector_insert_with_auto_embedding (and the async one below):
    # the default field "$" embeds the whole value, whatever field holds the text.
    docs = [
        ("n1", {"text": "cat"}),
        ("n2", {"text": "cat fish"}),
        ("n3", {"text": "cat fish dog"}),
        ("n4", {"title": "dog"}),
        ("n5", {"body": "fish"}),
        ("n6", {"content": "zebra"}),
    ]
    for key, value in docs:
        store.put(("test",), key, value)
    results = store.search(("test",), query="cat fish")
    assert _keys(results)[:2] == ["n2", "n3"]
    assert results[0].score == pytest.approx(2 / math.sqrt(6))  # text cat fish . cat fish
    assert all(r.score is not None for r in results)
    assert [r.score for r in results] == sorted((r.score or 0 for r in results), reverse=True)
    assert len(results) == 6


def test_async_vector_insert_with_auto_embedding(store: MemcommitStore) -> None:
    async def run() -> list[SearchItem]:
        await store.aput(("test",), "doc1", {"title": "zebra"})
        await store.aput(("test",), "doc2", {"content": "dogs"})
        return await store.asearch(("test",), query="dogs")

    results = asyncio.run(run())
    assert _keys(results) == ["doc2", "doc1"]
    assert results[0].score == pytest.approx(1 / math.sqrt(2))  # {"content": "dogs"}


def test_vector_update_with_embedding(store: MemcommitStore) -> None:
    # tests/test_store.py::test_vector_update_with_embedding
    store.put(("test",), "p1", {"text": "zebra birds"})
    store.put(("test",), "p2", {"text": "dogs"})
    store.put(("test",), "p3", {"text": "fish"})
    first = store.search(("test",), query="zebra")
    assert first[0].key == "p1"
    before = first[0].score
    assert before is not None and before > 0.5

    store.put(("test",), "p1", {"text": "dogs fish"})
    after = next(r.score for r in store.search(("test",), query="zebra") if r.key == "p1")
    assert after is not None and after < before
    renewed = store.search(("test",), query="dogs fish")
    assert renewed[0].key == "p1"
    assert (renewed[0].score or 0) > after

    store.put(("test",), "p4", {"text": "dogs fish"}, index=False)
    top3 = store.search(("test",), query="dogs fish", limit=3)
    assert "p4" not in _keys(top3)
    assert all(r.score is not None for r in top3)


def test_async_vector_update_with_embedding(store: MemcommitStore) -> None:
    async def run() -> tuple[float | None, float | None]:
        await store.aput(("test",), "doc1", {"text": "birds zebra"})
        await store.aput(("test",), "doc2", {"text": "dogs"})
        before = (await store.asearch(("test",), query="zebra"))[0]
        assert before.key == "doc1"
        await store.aput(("test",), "doc1", {"text": "birds"})
        after = [r for r in await store.asearch(("test",), query="zebra") if r.key == "doc1"]
        return before.score, after[0].score

    before, after = asyncio.run(run())
    assert before is not None and after is not None and after < before


def test_vector_search_with_filters(store: MemcommitStore) -> None:
    # tests/test_store.py::test_vector_search_with_filters
    docs = [
        ("f1", {"text": "red car", "color": "red", "rating": 5}),
        ("f2", {"text": "red house", "color": "red", "rating": 2}),
        ("f3", {"text": "green car", "color": "green", "rating": 4}),
        ("f4", {"text": "blue house", "color": "blue", "rating": 3}),
    ]
    for key, value in docs:
        store.put(("test",), key, value)

    assert _keys(store.search(("test",), query="car", filter={"color": "red"})) == ["f1", "f2"]
    assert _keys(store.search(("test",), query="house", filter={"color": "red"})) == ["f2", "f1"]
    found = store.search(("test",), query="blue", filter={"rating": {"$gt": 2.5}})
    assert found[0].key == "f4"
    assert sorted(_keys(found)) == ["f1", "f3", "f4"]
    both = store.search(("test",), query="car", filter={"rating": {"$gte": 4}, "color": "green"})
    assert _keys(both) == ["f3"]


def test_async_vector_search_with_filters(store: MemcommitStore) -> None:
    async def run() -> list[SearchItem]:
        await store.aput(("test",), "doc1", {"text": "red apple", "color": "red"})
        await store.aput(("test",), "doc2", {"text": "red car", "color": "red"})
        await store.aput(("test",), "doc3", {"text": "blue car", "color": "blue"})
        return await store.asearch(("test",), query="car", filter={"color": "red"})

    assert _keys(asyncio.run(run())) == ["doc2", "doc1"]


def test_async_batched_vector_search_concurrent(words: Words) -> None:
    # tests/test_store.py::test_async_batched_vector_search_concurrent: LangGraph's batching
    # wrapper gathers concurrent calls into batches of this store.
    class Batched(AsyncBatchedBaseStore):
        def __init__(self, inner: MemcommitStore) -> None:
            super().__init__()
            self.inner = inner

        def batch(self, ops: Any) -> Any:
            return self.inner.batch(ops)

        async def abatch(self, ops: Any) -> Any:
            return await self.inner.abatch(ops)

    colors = ["red", "blue", "green"]
    things = ["apple", "car", "house", "book", "phone"]
    docs = [
        (f"doc{i}", {"text": f"{colors[i % 3]} {things[i % 5]}", "color": colors[i % 3], "i": i})
        for i in range(30)
    ]
    queries: list[tuple[str, dict[str, Any]]] = [
        ("apple", {"color": "red"}),
        ("car", {"color": "blue"}),
        ("house", {"i": {"$gt": 20}}),
        ("phone", {"i": {"$lte": 10}}),
    ]

    async def run() -> list[list[SearchItem]]:
        store = Batched(_indexed(words))
        await asyncio.gather(
            *[store.aput(("test",), key, value) for key, value in docs],
            *[store.adelete(("test",), key) for key, _ in docs],
            *[store.aput(("test",), key, value) for key, value in docs],
        )
        return await asyncio.gather(
            *[store.asearch(("test",), query=q, filter=f, limit=30) for q, f in queries]
        )

    expected = {
        "apple": {k for k, v in docs if v["color"] == "red"},
        "car": {k for k, v in docs if v["color"] == "blue"},
        "house": {k for k, v in docs if v["i"] > 20},
        "phone": {k for k, v in docs if v["i"] <= 10},
    }
    for results, (query, _) in zip(asyncio.run(run()), queries, strict=True):
        assert set(_keys(results)) == expected[query]
        best = [r for r in results if query in r.value["text"]]
        assert best and _keys(results)[: len(best)] == _keys(best)


def test_vector_search_pagination(store: MemcommitStore) -> None:
    # tests/test_store.py::test_vector_search_pagination
    for i in range(5):
        store.put(("test",), f"doc{i}", {"text": "test document " + "number " * i})
    page1 = store.search(("test",), query="number", limit=2)
    page2 = store.search(("test",), query="number", limit=2, offset=2)
    everything = store.search(("test",), query="number", limit=10)
    assert len(page1) == 2 and len(page2) == 2 and len(everything) == 5
    assert _keys(page1) + _keys(page2) == _keys(everything)[:4]
    scores = [r.score for r in everything]
    assert scores == sorted(scores, key=lambda s: -1 if s is None else s, reverse=True)
    assert _keys(everything) == ["doc4", "doc3", "doc2", "doc1", "doc0"]
    assert everything[-1].score == 0.0  # doc0 has no "number": scored, at zero


def test_vector_search_edge_cases(store: MemcommitStore) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_vector_search_edge_cases
    store.put(("test",), "only", {"text": "cat"})
    assert len(store.search(("test",), query="")) == 1
    assert store.search(("test",), query=None)[0].score is None
    assert len(store.search(("test",), query="cat " * 100)) == 1
    assert len(store.search(("test",), query="cat?!#$%&*()")) == 1


def test_embed_with_path(words: Words) -> None:
    # tests/test_store.py::test_embed_with_path: the index's fields, a missing field, and a
    # put's own `index`.
    store = _indexed(words, ["title", "body", "summary"])
    store.put(("test",), "d1", {"body": "cat", "note": "house", "summary": "fish"})
    store.put(("test",), "d2", {"title": "zebra", "body": "birds", "note": "dog", "summary": "cat"})
    cat = store.search(("test",), query="cat")
    assert sorted(_keys(cat)) == ["d1", "d2"]
    assert cat[0].score == pytest.approx(1.0) and cat[1].score == pytest.approx(1.0)
    zebra = store.search(("test",), query="zebra")
    assert _keys(zebra) == ["d2", "d1"]
    assert zebra[0].score == pytest.approx(1.0) and zebra[1].score == 0.0
    house = store.search(("test",), query="house")  # "note" is not embedded
    assert [r.score for r in house] == [0.0, 0.0]

    by_op = _indexed(words, ["nothing"])
    by_op.put(
        ("test",), "d3", {"title": "apple", "body": "car", "note": "phone"}, index=["title", "body"]
    )
    by_op.put(
        ("test",),
        "d4",
        {"title": "book", "body": "car", "summary": "green"},
        index=["body", "summary"],
    )
    assert _keys(by_op.search(("test",), query="apple")) == ["d3", "d4"]
    assert _keys(by_op.search(("test",), query="green")) == ["d4", "d3"]
    car = by_op.search(("test",), query="car")
    assert car[0].score == car[1].score == pytest.approx(1.0)
    assert all(r.score == 0.0 for r in by_op.search(("test",), query="phone"))

    by_op.put(("test",), "d5", {"title": "red", "body": "blue"}, index=False)
    red = by_op.search(("test",), query="red")
    assert len(red) == 3
    assert red[-1].key == "d5" and red[-1].score is None


@pytest.mark.parametrize("query", ["cat", "dog", "cat dog", "cat cat fish"])
def test_scores(store: MemcommitStore, words: Words, query: str) -> None:
    # langgraph-checkpoint-sqlite tests/test_store.py::test_scores: a score is the cosine
    # similarity of the query's vector and the field's ("missing" is not there to embed).
    store.put(("test",), "doc", {"title": "cat"}, index=["title", "missing"])
    results = store.search((), query=query)
    assert len(results) == 1
    expected = _cosine(words.vector(query), words.vector("cat"))
    assert results[0].score == pytest.approx(expected, abs=1e-6)


def test_non_ascii(store: MemcommitStore) -> None:
    # tests/test_store.py::test_non_ascii
    texts = ["你好世界", "こんにちは", "안녕하세요 세계", "привет мир", "नमस्ते दुनिया"]
    for i, text in enumerate(texts, 1):
        store.put(("user", "memories"), str(i), {"text": text})
    for i, text in enumerate(texts, 1):
        assert store.search(("user", "memories"), query=text)[0].key == str(i)


# ---------------------------------------------------------------------------------------
# memcommit's own: the vector memories and the rules around them
# ---------------------------------------------------------------------------------------


def test_each_embedded_text_is_one_vector_memory(store: MemcommitStore, words: Words) -> None:
    store.put(("users", "u1"), "prefs", {"text": "cat dog", "n": 1}, index=["text", "n"])
    memories = _vectors(store)
    text_id = vector_id(("users", "u1"), "prefs", "text")
    n_id = vector_id(("users", "u1"), "prefs", "n")
    assert sorted(memories) == sorted([text_id, n_id])
    memory = memories[text_id]
    assert memory.kind == VECTOR
    assert memory.text == "cat dog"
    assert memory.vector == pytest.approx(words.vector("cat dog"))
    assert set(memory.tags) == {'lg.ns:["users"]', 'lg.ns:["users","u1"]'}
    state = store.store.medium.get(ITEM, entity_key(("users", "u1"), "prefs"))
    assert state is not None
    assert memory.data == {"namespace": ["users", "u1"], "key": "prefs", "path": "text", "seq": 1}
    assert memories[n_id].text == "1"
    assert state["vectors"] == ["text", "n"]
    assert state["seq"] == 1
    reserved = store.store.get(VECTOR_SEQ)
    assert reserved is not None and reserved.data == {"seq": 1}
    hit = store.search(("users",), query="dog")[0]
    assert (hit.key, hit.score) == ("prefs", pytest.approx(1 / math.sqrt(2)))


def test_an_item_without_index_keeps_the_entity_json_it_had() -> None:
    plain = MemcommitStore(memcommit.open(":memory:"))
    plain.put(("a",), "k", {"text": "cat"}, index=["text"])  # ignored without an index
    state = plain.store.medium.get(ITEM, entity_key(("a",), "k"))
    assert state is not None and "vectors" not in state
    assert plain.store.find(kind=VECTOR) == []
    assert plain.search(("a",), query="cat")[0].score is None


def test_a_path_with_several_texts_embeds_each(words: Words) -> None:
    store = _indexed(words, ["tags[*]"])
    store.put(("p",), "1", {"tags": ["cat", "fish"]})
    store.put(("p",), "2", {"tags": ["dog"]})
    assert sorted(m.data["path"] for m in _vectors(store).values()) == [
        "tags[*]",
        "tags[*].0",
        "tags[*].1",
    ]
    assert _keys(store.search(("p",), query="fish")) == ["1", "2"]
    assert store.search(("p",), query="fish")[0].score == pytest.approx(1.0)
    assert _keys(store.search(("p",), query="dog")) == ["2", "1"]


def test_a_namespace_prefix_is_applied_inside_the_core_search(store: MemcommitStore) -> None:
    # 40 perfect matches elsewhere rank above everything under ("mine",): the tag filter in
    # the core still returns the page.
    for i in range(40):
        store.put(("other",), f"o{i}", {"text": "cat"})
    store.put(("mine", "a"), "m1", {"text": "cat dog"})
    store.put(("mine", "b"), "m2", {"text": "cat dog fish"})
    store.put(("mine",), "m3", {"text": "dog"})
    store.put(("mines",), "m4", {"text": "cat"})  # a label boundary, not a prefix
    found = store.search(("mine",), query="cat", limit=3)
    assert _keys(found) == ["m1", "m2", "m3"]
    assert found[2].score == 0.0
    assert _keys(store.search(("mine", "b"), query="cat")) == ["m2"]
    assert len(store.search((), query="cat", limit=100)) == 44


def test_a_filter_fetches_more_vectors_until_the_page_is_full(store: MemcommitStore) -> None:
    # The first vectors the core returns all fail the filter: the search asks again for more.
    for i in range(60):
        store.put(("t",), f"red{i}", {"text": "apple", "color": "red"})
    for i in range(5):
        store.put(("t",), f"blue{i}", {"text": "apple car " + "house " * i, "color": "blue"})
    found = store.search(("t",), query="apple", filter={"color": "blue"}, limit=5)
    assert _keys(found) == [f"blue{i}" for i in range(5)]
    assert all(r.score is not None and r.score > 0 for r in found)
    assert store.search(("t",), query="apple", filter={"color": "blue"}, offset=4)[0].key == "blue4"
    assert store.search(("t",), query="apple", filter={"color": "green"}) == []


def test_unindexed_items_come_after_scored_ones_and_pages_agree(store: MemcommitStore) -> None:
    store.put(("t",), "a", {"text": "cat"})
    store.put(("t",), "b", {"text": "dog"}, index=False)
    store.put(("t",), "c", {"text": "cat dog"})
    store.put(("t",), "d", {"text": "fish"}, index=False)
    assert vector_id(("t",), "b", "$") not in _vectors(store)
    everything = store.search(("t",), query="cat")
    assert [(r.key, r.score is None) for r in everything] == [
        ("a", False),
        ("c", False),
        ("d", True),  # unindexed: most recently written first
        ("b", True),
    ]
    pages = [store.search(("t",), query="cat", limit=1, offset=i) for i in range(5)]
    assert [_keys(page) for page in pages] == [["a"], ["c"], ["d"], ["b"], []]
    assert _keys(store.search(("t",), query="dog", filter={"text": "dog"})) == ["b"]


def test_a_reput_replaces_the_items_vectors(store: MemcommitStore) -> None:
    store.put(("t",), "x", {"title": "cat", "body": "fish"}, index=["title", "body"])
    store.put(("t",), "y", {"title": "dog"}, index=["title"])
    assert store.search(("t",), query="cat")[0].key == "x"

    store.put(("t",), "x", {"title": "zebra", "body": "fish"}, index=["title", "body"])
    assert len(_vectors(store)) == 3  # the same two memories for x, rewritten
    assert store.store.get(vector_id(("t",), "x", "title")).text == "zebra"
    assert [(r.key, r.score) for r in store.search(("t",), query="cat")] == [("x", 0.0), ("y", 0.0)]
    assert store.search(("t",), query="zebra")[0].key == "x"

    store.put(("t",), "x", {"title": "zebra", "body": "fish"}, index=["title"])
    assert store.store.get(vector_id(("t",), "x", "body")).status == "stale"
    assert next(r.score for r in store.search(("t",), query="fish") if r.key == "x") == 0.0

    store.put(("t",), "x", {"title": "zebra"}, index=False)
    assert sorted(_vectors(store)) == [vector_id(("t",), "y", "title")]
    found = store.search(("t",), query="zebra")
    assert [(r.key, r.score is None) for r in found] == [("y", False), ("x", True)]

    store.put(("t",), "x", {"title": "zebra"}, index=["title"])  # a stale memory comes back
    assert store.store.get(vector_id(("t",), "x", "title")).status == "active"
    assert store.search(("t",), query="zebra")[0].score == pytest.approx(1.0)


def test_a_delete_stales_the_items_vectors(store: MemcommitStore) -> None:
    store.put(("t",), "x", {"text": "cat"})
    store.put(("t",), "y", {"text": "dog"})
    store.delete(("t",), "x")
    assert store.store.get(vector_id(("t",), "x", "$")).status == "stale"
    assert _keys(store.search(("t",), query="cat")) == ["y"]
    store.put(("t",), "x", {"text": "cat"})
    assert store.store.get(vector_id(("t",), "x", "$")).status == "active"
    assert store.search(("t",), query="cat")[0].key == "x"


def test_a_ttl_sweep_stales_the_vectors_and_reads_keep_them(
    tmp_path: Path, clock: ControllableClock, words: Words
) -> None:
    store = MemcommitStore(
        memcommit.open(str(tmp_path / "ttl.log"), clock=clock),
        ttl={"refresh_on_read": True},
        index={"dims": words.dims, "embed": words},
    )
    store.put(("t",), "short", {"text": "cat"}, ttl=1)
    store.put(("t",), "long", {"text": "cat dog"}, ttl=10)
    clock.advance(50_000)
    # A refreshing search rewrites the items' expiry, not their seq: the vectors still count.
    assert _keys(store.search(("t",), query="cat")) == ["short", "long"]
    clock.advance(50_000)
    assert store.search(("t",), query="cat")[0].score == pytest.approx(1 / math.sqrt(2))
    clock.advance(61_000)
    assert store.sweep_ttl() == 1
    assert store.store.get(vector_id(("t",), "short", "$")).status == "stale"
    assert store.store.get(vector_id(("t",), "long", "$")).status == "active"
    assert _keys(store.search(("t",), query="cat")) == ["long"]
    store.store.close()


def test_expired_items_are_omitted_from_a_query(
    tmp_path: Path, clock: ControllableClock, words: Words
) -> None:
    store = MemcommitStore(
        memcommit.open(str(tmp_path / "ttl.log"), clock=clock),
        ttl={"omit_expired": True},
        index={"dims": words.dims, "embed": words},
    )
    store.put(("t",), "gone", {"text": "cat"}, ttl=1)
    store.put(("t",), "kept", {"text": "cat dog"})
    clock.advance(61_000)
    assert [(r.key, r.score is not None) for r in store.search(("t",), query="cat")] == [
        ("kept", True)
    ]
    store.store.close()


def test_a_reopened_log_finds_the_same(tmp_path: Path, words: Words) -> None:
    path = str(tmp_path / "s.log")
    index: IndexConfig = {"dims": words.dims, "embed": words}
    with MemcommitStore.from_path(path, index=index) as store:
        store.put(("t",), "a", {"text": "cat"})
        store.put(("t", "u"), "b", {"text": "cat dog"})
        store.put(("t",), "c", {"text": "fish"}, index=False)
        store.put(("t",), "d", {"text": "dog"})
        store.delete(("t",), "d")
        before = [(r.key, r.score) for r in store.search(("t",), query="cat dog")]
    with MemcommitStore.from_path(path, index=index) as store:
        after = [(r.key, r.score) for r in store.search(("t",), query="cat dog")]
        assert after == before
        assert [key for key, _ in after] == ["b", "a", "c"]
        store.put(("t",), "e", {"text": "cat dog"})  # seq goes on from the log
        assert _keys(store.search(("t",), query="cat dog", limit=2)) == ["b", "e"]


def test_a_vector_commit_whose_item_commit_failed_never_counts(
    store: MemcommitStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.put(("t",), "a", {"title": "cat", "body": "fish"}, index=["title"])
    medium = store.store.medium
    assert medium is not None

    def refuse(changes: object, puts: object) -> None:
        raise OSError("the item commit failed")  # as a disk would, after the vectors' commit

    with monkeypatch.context() as patched:
        patched.setattr(store, "_write_items", refuse)
        with pytest.raises(OSError, match="item commit"):
            store.put(("t",), "a", {"title": "dog", "body": "zebra"}, index=["body"])
        with pytest.raises(OSError, match="item commit"):
            store.put(("t",), "b", {"text": "zebra"})
    # The vector commits landed; the items did not.
    orphan = store.store.get(vector_id(("t",), "a", "body"))
    assert orphan is not None and orphan.status == "active" and orphan.text == "zebra"
    assert store.store.get(vector_id(("t",), "b", "$")) is not None
    assert store.get(("t",), "b") is None
    item = store.get(("t",), "a")
    assert item is not None and item.value == {"title": "cat", "body": "fish"}

    # a's title vector was staled by the failed write's vector commit, and its body vector
    # carries a seq a never got: a is found, without a score, until it is written again.
    assert [(r.key, r.score) for r in store.search(("t",), query="zebra")] == [("a", None)]
    # The next write of a takes a seq above the orphan's, which therefore never counts (at
    # the orphan's seq, a would score 1.0 for "zebra").
    store.put(("t",), "a", {"title": "cat", "body": "zebra"}, index=False)
    state = medium.get(ITEM, entity_key(("t",), "a"))
    assert state is not None and state["seq"] > orphan.data["seq"]
    assert [(r.key, r.score) for r in store.search(("t",), query="zebra")] == [("a", None)]


_KILLED_BETWEEN_COMMITS = """
import json, os, re, sys
import memcommit
from memcommit.integrations.langgraph import MemcommitStore

vocabulary = json.loads(sys.argv[2])

def embed(texts):
    out = []
    for text in texts:
        vector = [0.0] * len(vocabulary)
        for word in re.findall(r"\\w+", text.lower()):
            vector[vocabulary.index(word)] += 1.0
        out.append(vector)
    return out

store = MemcommitStore(memcommit.open(sys.argv[1]), index={"embed": embed})
store.put(("t",), "a", {"text": "cat"})
store._write_items = lambda changes, puts: os._exit(3)  # killed before the item commit
store.put(("t",), "b", {"text": "cat dog"})
"""


def test_a_process_killed_between_the_commits_leaves_no_item_and_no_hit(
    tmp_path: Path, words: Words
) -> None:
    path = tmp_path / "s.log"
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_BETWEEN_COMMITS, str(path), json.dumps(VOCABULARY)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT / "python")},
        check=False,
    )
    assert done.returncode == 3, done.stderr
    with MemcommitStore.from_path(str(path), index={"dims": words.dims, "embed": words}) as store:
        orphan = store.store.get(vector_id(("t",), "b", "$"))
        assert orphan is not None and orphan.status == "active"
        assert store.get(("t",), "b") is None
        assert [(r.key, r.score) for r in store.search(("t",), query="cat dog")] == [
            ("a", pytest.approx(_cosine(words.vector('{"text": "cat"}'), words.vector("cat dog"))))
        ]
        store.put(("t",), "c", {"text": "dog"})
        state = store.store.medium.get(ITEM, entity_key(("t",), "c"))
        assert state is not None and state["seq"] > orphan.data["seq"]
        assert _keys(store.search(("t",), query="dog")) == ["c", "a"]


def test_a_batch_embeds_each_text_once_before_it_runs(words: Words) -> None:
    store = _indexed(words, ["text", "title"])
    store.batch(
        [
            PutOp(("t",), "a", {"text": "cat", "title": "cat"}),
            PutOp(("t",), "b", {"text": "cat dog", "title": "dog"}),
            SearchOp(("t",), query="cat"),
            SearchOp(("t",), query="cat"),
        ]
    )
    assert words.document_calls == [["cat", "cat dog", "dog"]]
    assert words.query_calls == ["cat"]
    assert len(_vectors(store)) == 4
    # The batch's searches saw the store before its puts.
    results = store.batch([SearchOp(("t",), query="cat"), PutOp(("t",), "a", None)])
    assert _keys(cast(list[SearchItem], results[0])) == ["a", "b"]


def test_the_async_methods_embed_with_the_async_embedder() -> None:
    calls: list[list[str]] = []

    async def embed(texts: Sequence[str]) -> list[list[float]]:
        calls.append(list(texts))
        return [Words().vector(text) for text in texts]

    store = MemcommitStore(memcommit.open(":memory:"), index={"embed": embed})

    async def run() -> list[SearchItem]:
        await store.aput(("t",), "a", {"text": "cat"})
        await store.aput(("t",), "b", {"text": "dog"})
        return await store.asearch(("t",), query="dog")

    assert _keys(asyncio.run(run())) == ["b", "a"]
    assert calls == [['{"text": "cat"}'], ['{"text": "dog"}'], ["dog"]]
    # LangGraph's wrapper of an async function has no sync path.
    with pytest.raises(ValueError, match="async function"):
        store.put(("t",), "c", {"text": "fish"})


def test_an_embedder_of_the_wrong_length_writes_nothing(words: Words) -> None:
    store = MemcommitStore(memcommit.open(":memory:"), index={"dims": 8, "embed": words})
    with pytest.raises(ValueError, match=f"vector of {words.dims} numbers; the index's dims is 8"):
        store.put(("t",), "a", {"text": "cat"})
    assert store.get(("t",), "a") is None
    assert len(store.store) == 0

    def short(texts: Sequence[str]) -> list[list[float]]:
        return [[1.0]]

    one = MemcommitStore(memcommit.open(":memory:"), index={"dims": 1, "embed": short})
    with pytest.raises(ValueError, match="returned 1 vectors for 2 texts"):
        one.put(("t",), "a", {"x": "cat", "y": "dog"}, index=["x", "y"])
    assert one.get(("t",), "a") is None


def test_the_index_configuration_is_checked(words: Words) -> None:
    opened = memcommit.open(":memory:")
    with pytest.raises(ValueError, match="embed must be provided"):
        MemcommitStore(opened, index=cast(Any, {"dims": 3}))
    with pytest.raises(ValueError, match="dims must be a positive int"):
        MemcommitStore(opened, index={"dims": 0, "embed": words})
    with pytest.raises(TypeError, match="fields must be a list of field paths"):
        MemcommitStore(opened, index=cast(Any, {"embed": words, "fields": "text"}))
    with pytest.raises(TypeError, match="index must be a dict"):
        MemcommitStore(opened, index=cast(Any, [("embed", words)]))
    store = MemcommitStore(opened, index={"embed": words})
    with pytest.raises(TypeError, match="index must be a list of field paths"):
        store.put(("t",), "a", {"text": "cat"}, index=cast(Any, "text"))
    assert store.get(("t",), "a") is None


def test_a_long_vector_id_is_hashed_and_a_too_long_item_key_refused(
    store: MemcommitStore,
) -> None:
    # The item's entity key fits in the log's 1,024 bytes; its vector's id, with a long field
    # path as well, does not and is hashed.
    namespace, key, path = ("n" * 450, "m" * 450), "k" * 50, "f" * 100
    store.put(namespace, key, {path: "cat"}, index=[path])
    store.put(namespace[:1], "short", {path: "dog"}, index=[path])
    memory = store.store.get(vector_id(namespace, key, path))
    assert memory is not None and memory.data["path"] == path
    assert memory.id.startswith("lg.vector#") and len(memory.id) == len("lg.vector#") + 64
    assert max(len(tag.encode()) for tag in memory.tags) <= 1024
    assert _keys(store.search(namespace, query="cat")) == [key]
    assert _keys(store.search(namespace[:1], query="cat")) == [key, "short"]
    # A namespace and key over the log's limit are refused before the vectors are written.
    vectors = len(store.store)
    with pytest.raises(
        ValueError, match=r"^namespace: .* an item's namespace .* at most 804 bytes of labels"
    ):
        store.put(namespace, "k" * 200, {"text": "cat"})
    assert len(store.store) == vectors


def test_a_store_opened_without_index_ignores_queries_and_stales_what_it_replaces(
    tmp_path: Path, words: Words
) -> None:
    path = str(tmp_path / "s.log")
    with MemcommitStore.from_path(path, index={"dims": words.dims, "embed": words}) as store:
        store.put(("t",), "a", {"text": "cat"})
        store.put(("t",), "b", {"text": "dog"})
    with MemcommitStore.from_path(path) as plain:
        assert [(r.key, r.score) for r in plain.search(("t",), query="cat")] == [
            ("b", None),
            ("a", None),
        ]
        plain.put(("t",), "a", {"text": "fish"})
        assert plain.store.get(vector_id(("t",), "a", "$")).status == "stale"
    with MemcommitStore.from_path(path, index={"dims": words.dims, "embed": words}) as store:
        assert [(r.key, r.score is None) for r in store.search(("t",), query="fish")] == [
            ("b", False),
            ("a", True),
        ]


def test_the_vector_memories_are_kinds_a_context_leaves_out() -> None:
    from memcommit.integrations.langgraph.store import VECTOR, VECTOR_SEQ
    from memcommit.tiers import INDEX_KINDS

    assert {VECTOR, VECTOR_SEQ} == INDEX_KINDS


def test_a_put_refused_for_its_size_writes_nothing(where: str, tmp_path: Path) -> None:
    # The item commit would be refused (one record of 64 KiB at most): it is refused before
    # the vectors' commit, so neither the item's vectors nor the log's head change.
    opened = memcommit.open(
        ":memory:" if where == "memory" else str(tmp_path / "s.log"), max_record_bytes=1 << 16
    )
    index: IndexConfig = {"dims": Words().dims, "embed": Words(), "fields": ["text"]}
    store = MemcommitStore(opened, index=index)
    store.put(("t",), "a", {"text": "cat"})
    store.put(("t",), "b", {"text": "dog"})
    before = [(r.key, r.score) for r in store.search(("t",), query="cat")]
    assert before == [("a", 1.0), ("b", 0.0)]
    head, vectors = opened.lsn, _vectors(store)
    too_large = "x" * 70_000
    with pytest.raises(ValueError) as refused:
        store.put(("t",), "a", {"text": "dog", "blob": too_large})
    assert opened.lsn == head
    assert re.match(
        r"value: item 'a' in namespace \('t',\) would take 7[0-9]{4} bytes as JSON .*"
        r"at most 65535 \(max_record_bytes is 65536\)",
        str(refused.value),
    )
    with pytest.raises(ValueError, match=r"^value: item 'c' in namespace"):
        store.batch(
            [
                PutOp(("t",), "d", {"text": "fish"}),
                PutOp(("t",), "c", {"text": "cat", "blob": too_large}),
            ]
        )
    assert opened.lsn == head
    assert _vectors(store) == vectors
    assert [(r.key, r.score) for r in store.search(("t",), query="cat")] == before
    assert store.get(("t",), "c") is None and store.get(("t",), "d") is None
    opened.close()


def test_a_query_of_zeros_scores_every_vector_0_like_in_memory_store(words: Words) -> None:
    # The core refuses to rank by a vector of zeros; InMemoryStore's cosine with one is 0.0.
    # What InMemoryStore returns here, scores and order: each item with a vector at 0.0,
    # namespace by namespace and within one in the order of their first write, then the
    # items without a vector.
    store = _indexed(words, ["text"])
    store.put(("t",), "a", {"text": "cat"})
    store.put(("t", "u"), "b", {"text": "dog"})
    store.put(("t",), "c", {"text": "dog"}, index=False)
    store.put(("t",), "d", {"text": "fish", "color": "red"})
    store.put(("t",), "a", {"text": "cat cat"})
    assert words.vector("?") == [0.0] * words.dims
    found = store.search(("t",), query="?")
    assert [(r.key, r.score) for r in found] == [("a", 0.0), ("d", 0.0), ("b", 0.0), ("c", None)]
    page = store.search(("t",), query="?", offset=1, limit=2)
    assert [(r.key, r.score) for r in page] == [("d", 0.0), ("b", 0.0)]
    only = store.search(("t",), query="?", filter={"color": "red"})
    assert [(r.key, r.score) for r in only] == [("d", 0.0)]
