"""Search by meaning and by words: `store.search`, vectors in the log, and the embedder.

Vectors are part of a memory's put record, so every path a record takes (replay, the index
file, log compaction, snapshots, export and import, a replica) carries them; search reads the
live state, so a stale, moved-out or purged memory is never found.
"""

from __future__ import annotations

import math
import os
import random
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

import memcommit
from memcommit.cli import main
from memcommit.storage import ArchivedOlderThan, compact
from memcommit.testing import ControllableClock


def _unit(*xs: float) -> list[float]:
    return list(xs)


def _ids(hits: Sequence[memcommit.SearchHit]) -> list[str]:
    return [h.id for h in hits]


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> memcommit.MemoryStore:
    path = str(tmp_path / "m.db") if request.param == "file" else ":memory:"
    s = memcommit.open(path)
    request.addfinalizer(s.close)
    return s


def _animals(store: memcommit.MemoryStore) -> dict[str, str]:
    return {
        "cat": store.put("the cat sat on the mat", id="cat", vector=[1, 0, 0], tags=("pet",)),
        "dog": store.put(
            "the dog chased the cat", id="dog", vector=[0.8, 0.6, 0], tags=("pet", "loud")
        ),
        "bird": store.put("a bird sang at dawn", id="bird", vector=[0, 1, 0], kind="fact"),
        "tea": store.put("green tea in the afternoon", id="tea", vector=[0, 0, 1], task="t1"),
    }


# -- the three modes -----------------------------------------------------------------------------


def test_vector_search_ranks_by_cosine_similarity(store: memcommit.MemoryStore) -> None:
    _animals(store)
    hits = store.search([1, 0.1, 0], mode="vector", k=3)
    assert _ids(hits) == ["cat", "dog", "bird"]
    # Cosine: the length of the query does not matter.
    assert _ids(store.search([10, 1, 0], mode="vector", k=3)) == ["cat", "dog", "bird"]
    expected = 1 / math.sqrt(1.01)
    assert hits[0].score == pytest.approx(expected, rel=1e-6)
    assert hits[0].score >= hits[1].score >= hits[2].score


def test_text_search_is_bm25_over_unicode_words(store: memcommit.MemoryStore) -> None:
    _animals(store)
    store.put("Straße und CAFÉ", id="de")
    store.put("東京の天気", id="ja")
    assert _ids(store.search("cat", mode="text")) == ["dog", "cat"]  # the shorter text first
    assert _ids(store.search("café", mode="text")) == ["de"]
    assert _ids(store.search("STRASSE straße", mode="text")) == ["de"]
    assert _ids(store.search("京", mode="text")) == ["ja"]
    assert store.search("elephant", mode="text") == []
    assert all(h.score > 0 for h in store.search("the", mode="text"))


def test_hybrid_fuses_the_two_rankings(store: memcommit.MemoryStore) -> None:
    _animals(store)
    # By vector alone the bird is first; by words only the tea matches "afternoon".
    hits = store.search([0, 1, 0.2], mode="hybrid", k=4)
    assert _ids(hits)[0] == "bird"
    both = store.search("afternoon", mode="hybrid")
    assert _ids(both) == ["tea"]  # no embedder: a string ranks by words alone
    # Reciprocal rank: first in one ranking scores 1/61.
    assert both[0].score == pytest.approx(1 / 61)


def test_a_hit_reads_as_its_memory_and_unpacks(store: memcommit.MemoryStore) -> None:
    _animals(store)
    hit = store.search([1, 0, 0], mode="vector", k=1)[0]
    memory, score = hit
    assert memory == store.get("cat") == hit.memory
    assert (hit.id, hit.text, hit.kind, hit.tags) == ("cat", memory.text, "note", ("pet",))
    assert hit.vector == (1.0, 0.0, 0.0)
    assert isinstance(score, float)


# -- filters inside the search -------------------------------------------------------------------


def test_filters_apply_inside_the_search(store: memcommit.MemoryStore) -> None:
    _animals(store)
    q = [1, 0, 0]
    assert _ids(store.search(q, mode="vector", kind="fact")) == ["bird"]
    assert _ids(store.search(q, mode="vector", task="t1")) == ["tea"]
    assert _ids(store.search(q, mode="vector", tags=["pet", "loud"])) == ["dog"]
    assert _ids(store.search("the", mode="text", tags=["pet"])) == ["dog", "cat"]
    assert store.search(q, mode="vector", kind="nothing-like-this") == []
    assert store.search(q, mode="vector", tags=["unknown-tag"]) == []


def test_k_results_come_back_when_k_match_however_few_match(tmp_path: Path) -> None:
    with memcommit.open(str(tmp_path / "m.db")) as store:
        with store.commit() as c:
            # 500 near neighbours of the query that are not facts, 12 far ones that are.
            for i in range(500):
                c.put(f"noise {i}", vector=[1, i / 1000, 0])
            for i in range(12):
                c.put(f"fact {i}", kind="fact", vector=[0, 1, i / 100])
        hits = store.search([1, 0, 0], mode="vector", k=10, kind="fact")
        assert len(hits) == 10
        assert all(h.kind == "fact" for h in hits)


def test_stale_moved_and_restored_memories(store: memcommit.MemoryStore) -> None:
    _animals(store)
    store.stale("cat", reason="wrong")
    assert "cat" not in _ids(store.search([1, 0, 0], mode="vector"))
    assert "cat" not in _ids(store.search("cat mat", mode="text"))
    assert "cat" in _ids(store.search([1, 0, 0], mode="vector", status="stale"))
    assert "cat" in _ids(store.search([1, 0, 0], mode="vector", status=None))
    store.restore("cat")
    assert _ids(store.search([1, 0, 0], mode="vector", k=1)) == ["cat"]
    store.move("cat", "long")
    assert "cat" not in _ids(store.search([1, 0, 0], mode="vector", tier="working"))
    assert _ids(store.search([1, 0, 0], mode="vector", tier="long")) == ["cat"]


def test_a_re_put_replaces_text_and_vector(store: memcommit.MemoryStore) -> None:
    _animals(store)
    store.put("a quiet library", id="cat", vector=[0, 0, -1])
    assert "cat" not in _ids(store.search("mat", mode="text"))
    assert _ids(store.search("library", mode="text")) == ["cat"]
    assert _ids(store.search([0, 0, -1], mode="vector", k=1)) == ["cat"]
    # A put carries the memory's whole state: without a vector it has none.
    store.put("a quiet library", id="cat")
    got = store.get("cat")
    assert got is not None and got.vector is None
    assert "cat" not in _ids(store.search([0, 0, -1], mode="vector"))
    assert _ids(store.search("library", mode="text")) == ["cat"]


def test_a_commit_is_searchable_the_moment_it_returns(store: memcommit.MemoryStore) -> None:
    assert store.search("anything") == []
    for i in range(50):
        mid = store.put(f"word{i} common", vector=[1, i, 0])
        assert _ids(store.search(f"word{i}", mode="text")) == [mid]
    assert len(store.search("common", mode="text", k=100)) == 50


def test_a_k_larger_than_any_store_returns_every_match_in_each_mode(
    store: memcommit.MemoryStore,
) -> None:
    _animals(store)
    for k in (2**62, 2**64 - 1):
        for mode in ("hybrid", "text"):
            assert sorted(_ids(store.search("cat", mode=mode, k=k))) == ["cat", "dog"]
        assert len(store.search([1, 0, 0], mode="vector", k=k)) == 4


def test_a_memory_whose_vector_is_zeros_is_ranked_by_its_words_alone(tmp_path: Path) -> None:
    # An embedder gives zeros to a text it knows nothing of: such a vector has no direction,
    # so it matches no query vector (an orthogonal one still ranks, below).
    with memcommit.open(tmp_path / "m.db") as store:
        lunch = store.put("Lunch is at noon.", vector=[0, 0, 0], id="lunch")
        standup = store.put("Standup moved to 10am.", vector=[0, 0, 0], id="standup")
        refund = store.put("Refund rounding fixed.", vector=[1, 1, 0], id="refund")
        side = store.put("A side note.", vector=[0, 0, 1], id="side")
        assert _ids(store.search([1, 0, 0], mode="vector")) == [refund, side]
        assert _ids(store.search("refund", mode="hybrid")) == [refund]
        assert _ids(store.search("lunch", mode="hybrid")) == [lunch]
        # The context puts the relevant first, then the rest newest first.
        picked = store.context(budget_chars=45, query="refund rounding")
        assert [m.id for m in picked] == [refund, side]
        assert standup not in _ids(store.search([0, 1, 0], mode="vector"))


def test_vector_values_out_of_reach_are_refused_naming_the_value(tmp_path: Path) -> None:
    with memcommit.open(tmp_path / "m.db") as store:
        with pytest.raises(memcommit.InvalidValue) as err:
            store.put("x", vector=[10**400, 1, 1])
        assert "vector[0]" in str(err.value) and "32-bit" in str(err.value)
        with pytest.raises(memcommit.InvalidValue) as err:
            store.search([1e39, 1], mode="vector")
        assert "query" in str(err.value) and "32-bit" in str(err.value)
        with pytest.raises(memcommit.InvalidType) as type_err:
            with store.commit() as c:
                c.put_many(["x", "y"], vectors="ab")
        assert "vectors" in str(type_err.value)
        assert store.lsn == 0


# -- the embedder ------------------------------------------------------------------------------


class Embedder:
    """A deterministic embedder: a bag of letters. Counts its calls."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[float(t.lower().count(ch)) for ch in "aeiou"] for t in texts]


def test_the_embedder_vectors_every_put_once_per_commit(tmp_path: Path) -> None:
    embed = Embedder()
    with memcommit.open(str(tmp_path / "m.db"), embed=embed) as store:
        assert store.embedder is embed
        a = store.put("aaa")
        assert embed.calls == [["aaa"]]
        with store.commit() as c:
            b = c.put("eee")
            c.put_many(["iii", "ooo"])
            c.put("uuu", vector=[0, 0, 0, 0, 1])  # given: not embedded
        assert embed.calls[1] == ["eee", "iii", "ooo"]
        assert len(embed.calls) == 2
        got_a, got_b = store.get(a), store.get(b)
        assert got_a is not None and got_a.vector == (3.0, 0.0, 0.0, 0.0, 0.0)
        assert got_b is not None and got_b.vector == (0.0, 3.0, 0.0, 0.0, 0.0)
        # A string query is embedded too, and ranks by meaning and by words.
        assert _ids(store.search("a", mode="vector", k=1)) == [a]
        assert _ids(store.search("eee", k=1)) == [b]


def test_bulk_puts_take_vectors_and_the_embedder_fills_the_missing_ones(tmp_path: Path) -> None:
    embed = Embedder()
    with memcommit.open(str(tmp_path / "m.db"), embed=embed) as store:
        with store.commit() as c:
            c.put_many(["aa", "ee"], ids=["p", "q"], vectors=[[9, 9, 9, 9, 9], None])
            c.put_rows([{"id": "r", "text": "ii", "vector": [1, 2, 3, 4, 5]}, ("s", "oo")])
        assert embed.calls == [["ee", "oo"]]
        got = {m.id: m.vector for m in store.find()}
        assert got == {
            "p": (9.0,) * 5,
            "q": (0.0, 2.0, 0.0, 0.0, 0.0),
            "r": (1.0, 2.0, 3.0, 4.0, 5.0),
            "s": (0.0, 0.0, 0.0, 2.0, 0.0),
        }
    with memcommit.open(str(tmp_path / "plain.db")) as store:
        with store.commit() as c:
            c.put_many(["a", "b"], ids=["a", "b"], vectors=[[1, 0], None])
            c.put_rows([("c", "c", "note", None, "working", None, (), (), [0, 1])])
        got = {m.id: m.vector for m in store.find()}
        assert got == {"a": (1.0, 0.0), "b": None, "c": (0.0, 1.0)}
        with pytest.raises(ValueError, match="vectors: 1 vectors for 2 texts"):
            with store.commit() as c:
                c.put_many(["x", "y"], vectors=[[1, 0]])
        with pytest.raises(ValueError, match=r"vector: the memory .* value 1 is NaN"):
            with store.commit() as c:
                c.put_rows([{"text": "x", "vector": [1, float("nan")]}])


def test_an_embedder_that_fails_or_lies_writes_nothing(tmp_path: Path) -> None:
    def broken(texts: list[str]) -> list[list[float]]:
        raise RuntimeError("model offline")

    with memcommit.open(str(tmp_path / "m.db"), embed=broken) as store:
        with pytest.raises(RuntimeError, match="model offline"):
            store.put("x")
        assert store.lsn == 0
    with memcommit.open(str(tmp_path / "m.db"), embed=lambda ts: [[1.0]]) as store:
        with pytest.raises(ValueError, match="returned 1 vectors for 2 texts"):
            with store.commit() as c:
                c.put("x")
                c.put("y")
        assert store.lsn == 0
    with memcommit.open(str(tmp_path / "m.db"), embed=lambda ts: ["nope" for _ in ts]) as store:
        with pytest.raises(TypeError, match="embedder's vector 0"):
            store.put("x")
        assert store.lsn == 0
    with pytest.raises(TypeError, match="embed must be a callable"):
        memcommit.open(str(tmp_path / "m.db"), embed=42)  # type: ignore[arg-type]


def test_a_query_the_embedder_gives_zeros_is_ranked_by_words() -> None:
    """An embedder that finds nothing of a query to place (a word it does not know) gives a
    vector of zeros, which has no direction: hybrid search (and `context`) then ranks by the
    words alone, as without an embedder; only `mode="vector"` refuses it."""

    def embed(texts: list[str]) -> list[list[float]]:  # the README's example embedder
        words = ("refund", "deploy", "rounding", "friday")
        return [[float(t.lower().count(w)) for w in words] for t in texts]

    store = memcommit.open(":memory:", embed=embed)
    fact = store.put("Deploys happen on Friday after the freeze.", kind="fact")
    store.put("Refunds are rounded to the cent.", kind="fact")
    assert [h.id for h in store.search("freeze")] == [fact]
    assert [h.id for h in store.search("freeze", mode="text")] == [fact]
    assert next(m.id for m in store.context(query="freeze")) == fact
    with pytest.raises(memcommit.InvalidValue, match="vector of zeros"):
        store.search("freeze", mode="vector")
    with pytest.raises(memcommit.InvalidValue, match="vector of zeros"):
        store.search([0.0, 0.0, 0.0, 0.0])


def test_vector_mode_with_words_needs_an_embedder(store: memcommit.MemoryStore) -> None:
    _animals(store)
    with pytest.raises(ValueError, match="needs an embedder"):
        store.search("cat", mode="vector")


# -- bad input ----------------------------------------------------------------------------------


def test_a_vector_of_another_length_names_the_memory_and_writes_nothing(
    store: memcommit.MemoryStore,
) -> None:
    store.put("first", id="a", vector=[1, 2, 3])
    lsn = store.lsn
    with pytest.raises(ValueError, match=r'memory "b" has a vector of 2 values.* have 3'):
        store.put("second", id="b", vector=[1, 2])
    with pytest.raises(ValueError, match='memory "c"'):
        with store.commit() as c:
            c.put("fine", id="ok", vector=[1, 2, 3])
            c.put("bad", id="c", vector=[1, 2, 3, 4])
    with pytest.raises(ValueError, match=r"vectors\[1\]|memory"):
        with store.commit() as c:
            c.put_many(["x", "y"], ids=["x", "y"], vectors=[[1, 2, 3], [1, 2]])
    assert store.lsn == lsn
    assert store.get("ok") is None


def test_the_first_commit_sets_the_length_for_the_store(store: memcommit.MemoryStore) -> None:
    with pytest.raises(ValueError, match='memory "b"'):
        with store.commit() as c:
            c.put("a", id="a", vector=[1, 2])
            c.put("b", id="b", vector=[1, 2, 3])
    assert store.lsn == 0
    store.put("b", id="b", vector=[1, 2, 3])  # nothing was committed: 3 is the length now
    with pytest.raises(ValueError, match="have 3"):
        store.put("a", id="a", vector=[1, 2])


def test_the_length_is_the_held_vectors_before_and_after_a_reopen(tmp_path: Path) -> None:
    """Once no memory holds a vector any length may come next: the same answer a store opened
    from the log (which builds its vectors from each memory's last put) gives."""
    path = str(tmp_path / "m.db")
    with memcommit.open(path) as store:
        store.put("a", id="a", vector=[1, 0])
        store.put("b", id="b", vector=[0, 1])
        store.put("a again", id="a")  # "b" still holds one: 2 stays the length
        with pytest.raises(ValueError, match="have 2"):
            store.put("c", id="c", vector=[1, 0, 0])
        store.put("b again", id="b")  # none held now
        store.put("c", id="c", vector=[1, 0, 0])
        assert [m.id for m, _ in store.search([1, 0, 0], mode="vector")] == ["c"]
    with memcommit.open(path) as store:
        with pytest.raises(ValueError, match="have 3"):
            store.put("d", id="d", vector=[1, 0])
        assert [m.id for m, _ in store.search([1, 0, 0], mode="vector")] == ["c"]


@pytest.mark.parametrize(
    ("vector", "error", "match"),
    [
        ([], ValueError, "a vector has 1 to 65535"),
        ([1.0, float("nan")], ValueError, "value 1 is NaN, not a finite number"),
        ([1.0, float("inf")], ValueError, "not a finite number"),
        ([1e300], ValueError, "not a finite number"),  # beyond 32-bit floats
        ("abc", TypeError, "vector must be a sequence of numbers, not str"),
        ([1, "x"], TypeError, r"vector\[1\] must be a number"),
        ([True, 1.0], TypeError, r"vector\[0\] must be a number"),
        (5, TypeError, "vector must be a sequence of numbers, not int"),
    ],
)
def test_bad_vectors_are_refused(
    store: memcommit.MemoryStore, vector: object, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        store.put("x", id="x", vector=vector)  # type: ignore[arg-type]
    assert store.lsn == 0


def test_bad_queries_are_refused(store: memcommit.MemoryStore) -> None:
    _animals(store)
    with pytest.raises(
        ValueError, match="query: a vector of 2 values; this store's vectors have 3"
    ):
        store.search([1, 0], mode="vector")
    with pytest.raises(ValueError, match="query: a vector of zeros has no direction"):
        store.search([0, 0, 0], mode="vector")
    with pytest.raises(ValueError, match="mode: 'fuzzy' is not a mode"):
        store.search("cat", mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode='text' ranks by words"):
        store.search([1, 0, 0], mode="text")
    with pytest.raises(TypeError, match="query must be a str or a sequence of numbers"):
        store.search(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"query\[0\] must be a number"):
        store.search(["a"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="k must be an int"):
        store.search("cat", k="3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k: must be 0 or more"):
        store.search("cat", k=-1)
    with pytest.raises(ValueError, match="tier"):
        store.search("cat", tier="attic")
    assert store.search("cat", k=0) == []


# -- every path a record takes -------------------------------------------------------------------


def _snapshot(store: memcommit.MemoryStore) -> dict[str, list[str]]:
    return {
        "vector": _ids(store.search([1, 0.2, 0.1], mode="vector", k=20)),
        "text": _ids(store.search("the cat", mode="text", k=20)),
        "hybrid": _ids(store.search([0, 1, 0], k=20)),
    }


def test_reopen_replays_and_the_index_file_keep_vectors(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    with memcommit.open(path) as store:
        _animals(store)
        store.stale("bird")
        before = _snapshot(store)
        vectors = {m.id: m.vector for m in store.find(status=None)}
    with memcommit.open(path) as store:
        assert _snapshot(store) == before
        assert {m.id: m.vector for m in store.find(status=None)} == vectors
    # Enough records that closing writes an index file; opening from it finds the same.
    with memcommit.open(path) as store:
        with store.commit() as c:
            c.put_many([f"filler {i}" for i in range(100_000)])
        before = _snapshot(store)
    assert os.path.exists(path + ".index")
    with memcommit.open(path) as store:
        assert store.info()["index_file"] == "loaded"
        assert _snapshot(store) == before


def test_a_reader_finds_what_the_writer_commits(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    with memcommit.open(path) as writer, memcommit.open(path, read_only=True) as reader:
        writer.put("first words", id="a", vector=[1, 0])
        reader.refresh()
        assert _ids(reader.search([1, 0], mode="vector")) == ["a"]
        writer.put("second words", id="b", vector=[0, 1])
        writer.stale("a")
        reader.refresh()
        assert _ids(reader.search([1, 0], mode="vector")) == ["b"]
        assert _ids(reader.search("words", mode="text")) == ["b"]


def test_log_compaction_keeps_vectors_and_purged_memories_are_never_found(
    tmp_path: Path, clock: ControllableClock
) -> None:
    path = str(tmp_path / "m.db")
    with memcommit.open(path, clock=clock) as store:
        _animals(store)
        store.put("the cat sat on the sofa", id="cat", vector=[1, 0.1, 0])  # a re-put
        store.move("bird", "archive")
        before = _ids(store.search([1, 0, 0], mode="vector", status=None))
        assert "bird" in before
        compact(store, ArchivedOlderThan(0))
        assert store.is_purged("bird")
        after = _ids(store.search([1, 0, 0], mode="vector", status=None))
        assert after == [i for i in before if i != "bird"]
        assert "bird" not in _ids(store.search("bird", mode="text", status=None))
        cat = store.get("cat")
        assert cat is not None and cat.vector == pytest.approx((1, 0.1, 0))
    with memcommit.open(path) as store:
        assert _ids(store.search([1, 0, 0], mode="vector", status=None)) == after


def test_a_snapshot_keeps_vectors(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    with memcommit.open(path) as store:
        _animals(store)
        store.save_snapshot(tmp_path / "snap")
        before = _snapshot(store)
    with memcommit.open(path, snapshot=tmp_path / "snap") as store:
        assert _snapshot(store) == before


def test_export_and_import_carry_vectors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.db"
    with memcommit.open(str(path)) as store:
        _animals(store)
        store.put("no vector here", id="plain")
        before = _snapshot(store)
        vectors = {m.id: m.vector for m in store.find(status=None)}
    dump, copy = tmp_path / "dump.jsonl", tmp_path / "copy.db"
    assert main(["export", str(path), "--out", str(dump)]) == 0
    assert main(["import", str(copy), str(dump)]) == 0, capsys.readouterr().err
    with memcommit.open(str(copy)) as store:
        assert {m.id: m.vector for m in store.find(status=None)} == vectors
        assert _snapshot(store) == before


def test_records_show_the_vector(store: memcommit.MemoryStore) -> None:
    store.put("v", id="v", vector=[0.5, -2])
    store.put("n", id="n")
    fields = {r.key: r.fields["vector"] for r in store.records()}
    assert fields == {"v": (0.5, -2.0), "n": None}


def test_the_async_facade_searches(tmp_path: Path) -> None:
    import asyncio

    from memcommit.aio import AsyncMemoryStore

    async def run() -> list[str]:
        async with AsyncMemoryStore(memcommit.open(str(tmp_path / "m.db"))) as astore:
            await astore.put("async words", id="a", vector=[1.0, 0.0])
            return _ids(await astore.search([1.0, 0.0], mode="vector"))

    assert asyncio.run(run()) == ["a"]


def test_a_large_store_searches_through_the_approximate_index_once_built(
    tmp_path: Path,
) -> None:
    """From 50,000 vectors the graph is built beside the store; searches stay right meanwhile."""
    rng = random.Random(7)
    n, dims = 60_000, 8
    vectors = [[rng.gauss(0, 1) for _ in range(dims)] for _ in range(n)]
    store = memcommit.open(str(tmp_path / "m.db"), durability="none")
    ids = [f"m{i}" for i in range(n)]
    with store.commit() as c:
        c.put_many([f"memory {i}" for i in range(n)], ids=ids, vectors=vectors)

    def exact(q: list[float], k: int, alive: set[str]) -> list[str]:
        def cos(v: list[float]) -> float:
            dot = sum(a * b for a, b in zip(q, v, strict=True))
            return dot / (math.sqrt(sum(a * a for a in q)) * math.sqrt(sum(b * b for b in v)))

        ranked = sorted((i for i in range(n) if ids[i] in alive), key=lambda i: -cos(vectors[i]))
        return [ids[i] for i in ranked[:k]]

    alive = set(ids)
    queries = [vectors[rng.randrange(n)] for _ in range(20)]
    # Before the graph is ready, searches are exact (the first one starts the build).
    for q in queries[:3]:
        assert _ids(store.search(q, k=10, mode="vector")) == exact(q, 10, alive)
    # Commits go on while it builds; the graph takes them in.
    with store.commit() as c:
        for i in range(0, 2000, 2):
            c.stale(ids[i])
    alive -= {ids[i] for i in range(0, 2000, 2)}
    assert store.wait_for_vector_index() is True
    hits = 0
    for q in queries:
        got = _ids(store.search(q, k=10, mode="vector"))
        assert len(got) == 10
        assert all(mid in alive for mid in got), "a stale memory was found"
        hits += len(set(got) & set(exact(q, 10, alive)))
    assert hits >= 0.9 * 10 * len(queries), f"recall@10 {hits / (10 * len(queries))}"
    # A small store has no approximate index to wait for.
    small = memcommit.open(str(tmp_path / "small.db"))
    small.put("one", vector=[1.0, 0.0])
    assert small.wait_for_vector_index() is False
    store.close()
    small.close()


class _Stop(Exception):
    """What the test's signal handler raises."""


def _store_over_the_index_threshold(tmp_path: Path, dims: int, seed: int) -> memcommit.MemoryStore:
    """A store of 60,000 random vectors: enough for the approximate index."""
    rng = random.Random(seed)
    store = memcommit.open(str(tmp_path / "m.db"), durability="none")
    with store.commit() as c:
        c.put_many(
            [f"memory {i}" for i in range(60_000)],
            vectors=[[rng.gauss(0, 1) for _ in range(dims)] for _ in range(60_000)],
        )
    return store


def test_ctrl_c_stops_the_wait_for_the_approximate_index(tmp_path: Path) -> None:
    """The wait (minutes at a million vectors) runs the process's signal handlers as it
    waits, so Ctrl-C ends it; the build goes on, and a later wait sees it through."""
    dims = 8
    store = _store_over_the_index_threshold(tmp_path, dims, seed=11)
    calls = [0]

    def stop(signum: int, frame: object) -> None:
        # Run only once a blocked call returns, a handler is called at most once for all the
        # ticks meanwhile; a third call means it ran while the wait went on.
        calls[0] += 1
        if calls[0] == 3:
            raise _Stop

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, 0.01, 0.01)
    try:
        with pytest.raises(_Stop):
            store.wait_for_vector_index()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert store.wait_for_vector_index() is True
    assert len(store.search([1.0] * dims, k=10, mode="vector")) == 10
    store.close()


def test_the_wait_for_the_approximate_index_goes_on_across_log_compaction(tmp_path: Path) -> None:
    """compact: "the store stays open and usable afterwards"; a call waiting for the index
    while log compaction replaced the log raised StoreClosed (every other call goes on with
    the new generation)."""
    dims = 8
    store = _store_over_the_index_threshold(tmp_path, dims, seed=12)
    compacted = threading.Event()

    def compact_soon() -> None:
        time.sleep(0.2)
        compact(store)
        compacted.set()

    thread = threading.Thread(target=compact_soon)
    thread.start()
    try:
        assert store.wait_for_vector_index() is True
    finally:
        thread.join(120)
    assert compacted.is_set() and store.generation == 1 and not store.closed
    assert len(store.search([1.0] * dims, k=10, mode="vector")) == 10
    store.close()


def test_context_with_a_query_spends_the_budget_on_relevant_memories(
    store: memcommit.MemoryStore,
) -> None:
    store.put("the deploy runs on fridays", id="deploy", vector=[1, 0])
    store.put("lunch is at noon", id="lunch", vector=[0, 1])
    store.put("the weather was mild", id="weather", vector=[0, 1])
    newest_first = store.context(budget_chars=40)
    assert [m.id for m in newest_first] == ["lunch", "weather"]
    relevant = store.context(budget_chars=40, query="deploy fridays")
    # 26 characters for the deploy note leave too few for either of the others.
    assert [m.id for m in relevant] == ["deploy"]


def test_context_leaves_out_the_memories_that_index_other_records(
    store: memcommit.MemoryStore,
) -> None:
    from memcommit.tiers import INDEX_KINDS

    store.put("deploy notes", id="note", vector=[1, 0])
    for kind in sorted(INDEX_KINDS):
        store.put("deploy deploy deploy", id=kind, kind=kind, vector=[1, 0])
    assert [m.id for m in store.context()] == ["note"]
    assert [m.id for m in store.context(query="deploy")] == ["note"]


# -- a model of search under random commits ------------------------------------------------------


def test_search_agrees_with_a_model_under_random_commits(tmp_path: Path) -> None:
    """Random puts, re-puts, stales, restores, moves and compactions; after each step every
    search agrees with a brute-force model over the live memories: nothing stale (unless
    asked), moved out of the tier asked for, or purged is ever returned."""
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    live: dict[str, dict[str, object]] = {}
    purged: set[str] = set()
    clock = ControllableClock()
    path = str(tmp_path / "m.db")
    store = memcommit.open(path, clock=clock)
    try:
        for _ in range(300):
            action = rng.random()
            ids = sorted(live)
            if action < 0.45 or not ids:
                mid = f"m{rng.randrange(60)}"
                if mid in purged:
                    continue
                text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 5)))
                vec = [rng.uniform(-1, 1) for _ in range(4)] if rng.random() < 0.8 else None
                kind = rng.choice(["note", "fact"])
                store.put(text, id=mid, vector=vec, kind=kind)
                old = live.get(mid)
                live[mid] = {
                    "text": text,
                    "vector": vec,
                    "kind": kind,
                    "status": old["status"] if old else "active",
                    "tier": old["tier"] if old else "working",
                }
            elif action < 0.6:
                mid = rng.choice(ids)
                store.stale(mid)
                live[mid]["status"] = "stale"
            elif action < 0.7:
                mid = rng.choice(ids)
                store.restore(mid)
                live[mid]["status"] = "active"
            elif action < 0.85:
                mid = rng.choice(ids)
                tier = rng.choice(["working", "mid", "long", "archive"])
                store.move(mid, tier)
                live[mid]["tier"] = tier
            elif action < 0.9:
                clock.advance(10_000)
                compact(store, ArchivedOlderThan(1))
                for mid in [m for m, s in live.items() if s["tier"] == "archive"]:
                    del live[mid]
                    purged.add(mid)
            else:
                store.close()
                store = memcommit.open(path, clock=clock)
            _check_against_model(store, live, rng, words)
    finally:
        store.close()


def _check_against_model(
    store: memcommit.MemoryStore,
    live: dict[str, dict[str, object]],
    rng: random.Random,
    words: list[str],
) -> None:
    status = rng.choice(["active", "stale", None])
    tier = rng.choice([None, "working", "mid"])
    kind = rng.choice([None, "fact"])

    def allowed(s: dict[str, object]) -> bool:
        return (
            (status is None or s["status"] == status)
            and (tier is None or s["tier"] == tier)
            and (kind is None or s["kind"] == kind)
        )

    candidates = {mid: s for mid, s in live.items() if allowed(s)}
    q = [rng.uniform(-1, 1) for _ in range(4)]
    hits = store.search(q, mode="vector", k=5, status=status, tier=tier, kind=kind)

    def cos(v: Sequence[float]) -> float:
        n = math.sqrt(sum(x * x for x in v)) * math.sqrt(sum(x * x for x in q))
        return sum(a * b for a, b in zip(v, q, strict=True)) / n

    with_vectors = {mid: s for mid, s in candidates.items() if s["vector"] is not None}
    want = sorted(with_vectors, key=lambda m: -cos(with_vectors[m]["vector"]))  # type: ignore[arg-type]
    assert len(hits) == min(5, len(want))
    for h, m in zip(hits, want, strict=False):
        assert h.id in with_vectors
        assert h.score == pytest.approx(cos(with_vectors[m]["vector"]), abs=1e-5)  # type: ignore[arg-type]
    word = rng.choice(words)
    found = _ids(store.search(word, mode="text", k=100, status=status, tier=tier, kind=kind))
    assert sorted(found) == sorted(
        mid for mid, s in candidates.items() if word in str(s["text"]).split()
    )


# -- through `memcommit serve` ------------------------------------------------------------------


def test_a_remote_store_searches_its_replica_and_embeds_its_puts(tmp_path: Path) -> None:
    from memcommit.testing import ServerProcess

    embed = Embedder()
    with (
        ServerProcess(tmp_path / "served.db") as server,
        memcommit.RemoteStore(server.url, embed=embed) as remote,
        memcommit.RemoteStore(server.url) as other,
    ):
        a = remote.put("aaa words")
        with remote.commit() as c:
            b = c.put("eee words")
            c.put_many(["iii", "ooo"], ids=["i", "o"])
            given = c.put("uuu", vector=[0, 0, 0, 0, 1])
        assert embed.calls == [["aaa words"], ["eee words", "iii", "ooo"]]
        got = remote.get(b)
        assert got is not None and got.vector == (0.0, 3.0, 0.0, 1.0, 0.0)  # e e e, o
        assert _ids(remote.search("a", mode="vector", k=1)) == [a]
        assert _ids(remote.search([0, 0, 0, 0, 1], mode="vector", k=1)) == [given]
        # Another client (no embedder) sees the same vectors and words on its own replica.
        other.refresh()
        assert _ids(other.search([0, 3, 0, 0, 0], mode="vector", k=1)) == [b]
        assert sorted(_ids(other.search("words", mode="text"))) == sorted([a, b])
        other.stale(a)
        assert _ids(other.search("words", mode="text")) == [b]
        remote.refresh()
        assert _ids(remote.search("words", mode="text")) == [b]
        with pytest.raises(ValueError, match="have 5"):
            other.put("x", vector=[1, 2])


def test_search_by_an_empty_task_finds_what_find_finds() -> None:
    # README: the filters are find's. The empty task matched memories without a task.
    store = memcommit.open(":memory:")
    store.put("refund rounding note")
    store.put("refund rounding for ci", task="ci-318")
    assert store.find(task="") == []
    for mode in ("text", "hybrid"):
        assert store.search("refund", task="", mode=mode) == []  # type: ignore[arg-type]
    assert [h.memory.task for h in store.search("refund", task="ci-318")] == ["ci-318"]
