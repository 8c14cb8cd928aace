"""Focused tests of the public API (SPEC sections 2, 3, 4 and 10)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import memcommit
from memcommit import (
    CorruptLog,
    ForgedReference,
    IntegrityError,
    MemcommitError,
    NotSupported,
    Purged,
    Rejected,
    SealMismatch,
    SnapshotMismatch,
    StoreLocked,
)
from memcommit.storage import compact
from memcommit.testing import CLOCK_START as START
from memcommit.testing import ControllableClock

HEADER_BYTES = 64  # ARCHITECTURE.md: the log header


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "memory.db")


@pytest.fixture
def store(path: str) -> Iterator[Any]:
    with memcommit.open(path, durability="none") as s:
        yield s


def snapshot(store: Any) -> list[tuple[int, str, str, dict[str, Any]]]:
    return [(r.lsn, r.op, r.key, r.fields) for r in store.records()]


# -- put / get ---------------------------------------------------------------------------


def test_put_get_round_trips_every_field(path: str, clock: ControllableClock) -> None:
    data = {
        "n": 42,
        "big": 2**53,
        "neg": -7,
        "f": 0.1,
        "half": 1.5,
        "ok": True,
        "no": False,
        "none": None,
        "list": [1, "two", [3.25, {"k": "v"}]],
        "nested": {"ü": {"深": ["🙂"]}},
        "": "empty key",
    }
    text = "Üser prefers dark mode — 深色模式 🙂\n\ttab\x00nul"
    with memcommit.open(path, clock=clock, durability="none") as store:
        src1 = store.put("source one", kind="trace")
        src2 = store.put("source two", kind="trace")
        clock.advance(1_500)
        mid = store.put(
            text,
            kind="preference",
            id="pref-1",
            task="onboarding",
            tier="long",
            data=data,
            tags=("ui", "théme", "dark"),
            sources=(src1, src2),
        )
        assert mid == "pref-1"
        for m in (store.get(mid), store.get_many([mid])[0]):
            assert m.id == "pref-1"
            assert m.kind == "preference"
            assert m.text == text
            assert m.data == data
            assert m.task == "onboarding"
            assert m.tier == "long"
            assert m.status == "active"
            assert m.tags == ("ui", "théme", "dark")
            assert m.sources == (src1, src2)
            assert m.created_at == START + timedelta(milliseconds=1_500)
            assert m.updated_at == m.created_at
            assert m.created_at.utcoffset() == timedelta(0)
            assert m.lsn == 3 == store.lsn
    # Everything survives a reopen (replay), byte for byte.
    with memcommit.open(path, durability="none") as store:
        m = store.get("pref-1")
        assert (m.text, m.data, m.tags, m.sources, m.tier, m.task) == (
            text,
            data,
            ("ui", "théme", "dark"),
            (src1, src2),
            "long",
            "onboarding",
        )
        assert m.created_at == START + timedelta(milliseconds=1_500)


def test_a_clock_before_1970_writes_commits_and_puts(tmp_path: Any) -> None:
    """Times before the epoch are recorded as they are; the ids made then carry the epoch's
    millisecond (an id's time counts from 1970), and still sort by creation."""
    clock = ControllableClock(datetime(1960, 5, 1, tzinfo=timezone.utc))
    with memcommit.open(tmp_path / "old.db", clock=clock) as store:
        with store.commit() as c:
            first = c.put("in a commit")
        second = store.put("on its own")
        assert first < second
        assert store.get(first).created_at == datetime(1960, 5, 1, tzinfo=timezone.utc)
        assert store.get(second).created_at.year == 1960


def test_put_defaults(store: Any) -> None:
    mid = store.put("plain")
    m = store.get(mid)
    assert (m.kind, m.task, m.tier, m.status, m.data, m.tags, m.sources) == (
        "note",
        None,
        "working",
        "active",
        None,
        (),
        (),
    )
    assert isinstance(m.tags, tuple) and isinstance(m.sources, tuple)


def test_tags_and_sources_accept_any_iterable_of_str(store: Any) -> None:
    mid = store.put("x", tags=["a", "b"], sources=[])
    assert store.get(mid).tags == ("a", "b")


@pytest.mark.parametrize("rows", [3, 5_000], ids=["few", "a bulk run"])
def test_a_source_the_store_never_held_is_refused_and_nothing_is_written(
    store: Any, rows: int
) -> None:
    """`verify` would report the reference as forged, so the commit naming it is refused."""
    real = store.put("real")
    lsn = store.lsn
    with pytest.raises(Rejected, match='sources name "typo-id"') as ei:
        store.put("derived", id="derived", sources=(real, "typo-id"))
    assert ei.value.guard is not None and ei.value.guard.id == "typo-id"
    last = {"id": "last", "text": "x", "sources": ["typo-id"]}
    with pytest.raises(Rejected, match="typo-id"):
        with store.commit() as c:
            c.put("first", id="first")
            c.put_rows([{"id": f"r{i}", "text": f"row {i}"} for i in range(rows - 1)] + [last])
    assert store.lsn == lsn
    assert store.get("first") is None and store.get("derived") is None and store.get("last") is None
    assert memcommit.verify(store).ok


def test_a_source_made_later_in_the_same_commit_is_accepted(store: Any) -> None:
    with store.commit() as c:
        c.put("summary", id="s", sources=("t1", "t2"))
        c.put_rows([("t1", "one"), ("t2", "two")])
    assert store.get("s").sources == ("t1", "t2")
    assert memcommit.verify(store).ok


def test_generated_ids_sort_by_creation(store: Any) -> None:
    ids = [store.put(f"m{i}") for i in range(40)]
    with store.commit() as c:
        ids += [c.put(f"c{i}") for i in range(10)]
        ids += c.put_many([f"p{i}" for i in range(10)])
    ids += [store.put(f"n{i}") for i in range(5)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert [m.id for m in store.find()] == ids


def test_put_replaces_content_keeping_tier_status_and_creation(
    path: str, clock: ControllableClock
) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("first", id="m", kind="fact", tier="mid", tags=("a",), data={"v": 1}, task="t")
        other = store.put("other")
        store.move("m", "long")
        store.stale("m")
        clock.advance(10_000)
        store.put("second", id="m", kind="summary", tier="working", tags=("b",))
        m = store.get("m")
        assert (m.text, m.kind, m.tags, m.data, m.task) == ("second", "summary", ("b",), None, None)
        assert (m.tier, m.status) == ("long", "stale")
        assert m.created_at == START
        assert m.updated_at == START + timedelta(seconds=10)
        assert m.lsn == store.lsn == 5
        assert len(store) == 2
        # Creation order is the first put's, not the replacement's.
        assert [x.id for x in store.find(status=None)] == ["m", other]


def test_updated_at_and_lsn_follow_the_newest_record(clock: ControllableClock) -> None:
    store = memcommit.create_memory_store(clock=clock)
    mid = store.put("x")
    clock.advance(1_000)
    lsn = store.move(mid, "mid")
    m = store.get(mid)
    assert lsn == 2 == m.lsn
    assert m.created_at == START
    assert m.updated_at == START + timedelta(seconds=1)
    clock.advance(1_000)
    store.finish_task("unrelated")
    assert store.get(mid).updated_at == START + timedelta(seconds=1)  # a task record is not its


def test_memory_is_immutable_and_detached_from_the_store(store: Any) -> None:
    data = {"k": [1, 2], "d": {"x": 1}}
    mid = store.put("text", data=data, tags=("a",))
    data["k"].append(3)  # the caller's dict after put does not reach the store
    data["d"]["x"] = 99
    m = store.get(mid)
    assert m.data == {"k": [1, 2], "d": {"x": 1}}
    for name, value in [("text", "changed"), ("tier", "archive"), ("status", "stale"), ("id", "y")]:
        with pytest.raises((AttributeError, TypeError)):
            setattr(m, name, value)
    assert m.text == "text"
    m.data["k"].append(4)
    m.data["new"] = True
    m.data["d"]["x"] = 5
    fresh = store.get(mid)
    assert fresh.data == {"k": [1, 2], "d": {"x": 1}}
    assert fresh.data is not store.get(mid).data  # a fresh copy each time
    assert store.find()[0].data == {"k": [1, 2], "d": {"x": 1}}


def test_records_returned_cannot_change_the_store(store: Any) -> None:
    mid = store.put("text", data={"a": 1})
    rec = store.history(mid)[0]
    with pytest.raises((AttributeError, TypeError)):
        rec.lsn = 99
    try:
        rec.fields["text"] = "changed"
        rec.fields["data"]["a"] = 2
    except TypeError:
        pass  # a read-only mapping is fine too
    again = store.history(mid)[0]
    assert again.fields["text"] == "text"
    assert again.fields["data"] == {"a": 1}
    assert store.get(mid).text == "text"


def test_get_unknown_and_contains(store: Any) -> None:
    mid = store.put("x")
    assert store.get("nope") is None
    assert store.get_many([mid, "nope"])[1] is None
    assert store.get_many([mid, "nope"])[0].id == mid
    assert mid in store
    assert "nope" not in store
    assert len(store) == 1


# -- find ----------------------------------------------------------------------------------


@pytest.fixture
def filled(store: Any) -> Any:
    store.put("z1", id="z", kind="fact", task="t1", tier="working", tags=("a", "b"))
    store.put("y1", id="y", kind="trace", task="t1", tier="mid", tags=("a",))
    store.put("x1", id="x", kind="fact", task="t2", tier="long", tags=("b", "c"))
    store.put("w1", id="w", kind="note", tier="archive", tags=("a", "b", "c"))
    store.put("v1", id="v", kind="fact", task="t1", tags=())
    store.stale("y")
    store.stale("v")
    return store


def ids_of(ms: list[Any]) -> list[str]:
    return [m.id for m in ms]


def test_find_defaults_to_active_in_creation_order(filled: Any) -> None:
    # Creation order, not id order: z was created first.
    assert ids_of(filled.find()) == ["z", "x", "w"]
    assert ids_of(filled.find(status=None)) == ["z", "y", "x", "w", "v"]
    assert ids_of(filled.find(status="stale")) == ["y", "v"]


def test_find_filters(filled: Any) -> None:
    assert ids_of(filled.find(tier="working")) == ["z"]
    assert ids_of(filled.find(tier="mid", status=None)) == ["y"]
    assert ids_of(filled.find(tier="archive")) == ["w"]
    assert ids_of(filled.find(kind="fact")) == ["z", "x"]
    assert ids_of(filled.find(kind="fact", status=None)) == ["z", "x", "v"]
    assert ids_of(filled.find(task="t1", status=None)) == ["z", "y", "v"]
    assert ids_of(filled.find(task="t2")) == ["x"]
    assert ids_of(filled.find(tags=["a"])) == ["z", "w"]
    assert ids_of(filled.find(tags=("a", "b"))) == ["z", "w"]  # all of the given tags
    assert ids_of(filled.find(tags=("b", "c"), status=None)) == ["x", "w"]
    assert ids_of(filled.find(tags=("nope",))) == []
    assert ids_of(filled.find(kind="fact", tags=("b",), tier="long")) == ["x"]
    assert ids_of(filled.find(status=None, limit=2)) == ["z", "y"]
    assert ids_of(filled.find(status=None, limit=0)) == []
    assert ids_of(filled.find(limit=100)) == ["z", "x", "w"]


def test_find_sees_moves_and_restores(filled: Any) -> None:
    filled.move("z", "archive")
    filled.restore("y")
    assert ids_of(filled.find(tier="archive")) == ["z", "w"]
    assert ids_of(filled.find()) == ["z", "y", "x", "w"]


def test_find_rejects_unknown_tier(filled: Any) -> None:
    with pytest.raises(ValueError, match="tier"):
        filled.find(tier="attic")


# -- history, records, tasks ---------------------------------------------------------------------


def test_history_and_records(store: Any) -> None:
    a = store.put("a1", id="a")
    store.put("b1", id="b")
    store.put("a2", id="a")
    store.stale("a", reason="wrong")
    store.move("a", "archive")
    store.finish_task("t")
    store.restore("a")
    hist = store.history(a)
    assert [(r.lsn, r.op, r.key) for r in hist] == [
        (1, "put", "a"),
        (3, "put", "a"),
        (4, "status", "a"),
        (5, "move", "a"),
        (7, "status", "a"),
    ]
    assert hist[1].fields["text"] == "a2"
    assert hist[2].fields["status"] == "stale"
    assert hist[2].fields["reason"] == "wrong"
    assert hist[3].fields["tier"] == "archive"
    assert hist[4].fields["status"] == "active"
    assert set(hist[0].fields) >= {
        "kind",
        "text",
        "data",
        "task",
        "tier",
        "status",
        "tags",
        "sources",
        "created_at",
    }
    assert store.history("nope") == []
    recs = list(store.records())
    assert [r.lsn for r in recs] == list(range(1, 8))
    assert [r.op for r in recs] == ["put", "put", "put", "status", "move", "task", "status"]
    assert recs[5].key == "t"
    assert recs[5].fields["finished"] is True
    assert [r.lsn for r in store.records(after=5)] == [6, 7]
    assert list(store.records(after=7)) == []
    for r in recs:
        assert r.at.tzinfo is not None and r.at.utcoffset() == timedelta(0)


def test_finish_task(store: Any) -> None:
    assert not store.is_task_finished("t")
    lsn = store.finish_task("t")
    assert lsn == store.lsn == 1
    assert store.is_task_finished("t")
    assert not store.is_task_finished("other")


def test_single_calls_return_their_lsn(store: Any) -> None:
    mid = store.put("x")
    assert store.lsn == 1
    assert store.stale(mid) == 2
    assert store.restore(mid) == 3
    assert store.move(mid, "mid") == 4
    assert store.finish_task("t") == 5
    assert store.lsn == 5


def test_put_many(store: Any) -> None:
    with store.commit() as c:
        got = c.put_many(["a", "b", "c"], kind="fact", tier="mid", tags=("x",), task="t")
    assert c.lsn == 3 == store.lsn
    assert [store.get(i).text for i in got] == ["a", "b", "c"]
    assert {(m.kind, m.tier, m.tags, m.task) for m in store.get_many(got)} == {
        ("fact", "mid", ("x",), "t")
    }
    with store.commit() as c:
        named = c.put_many(["d", "e"], ids=["d1", "e1"])
    assert named == ["d1", "e1"]
    assert store.get("e1").text == "e"


# -- bad input ---------------------------------------------------------------------------------


def assert_nothing_written(store: Any, lsn: int, count: int) -> None:
    assert store.lsn == lsn
    assert len(store) == count
    assert [r.lsn for r in store.records()] == list(range(1, lsn + 1))


class NotJson:
    pass


BAD_PUTS: list[tuple[str, dict[str, Any], Any, str]] = [
    ("int text", {"text": 123}, TypeError, "text"),
    ("bytes text", {"text": b"bytes"}, TypeError, "text"),
    ("None text", {"text": None}, TypeError, "text"),
    ("unknown tier", {"tier": "attic"}, ValueError, "tier"),
    ("object in data", {"data": {"x": NotJson()}}, (TypeError, ValueError), "data"),
    ("set in data", {"data": {"x": {1, 2}}}, (TypeError, ValueError), "data"),
    ("bytes in data", {"data": {"x": b"raw"}}, (TypeError, ValueError), "data"),
    ("list data", {"data": [1, 2]}, TypeError, "data"),
    ("str data", {"data": "text"}, TypeError, "data"),
    ("empty id", {"id": ""}, ValueError, "id"),
    ("int id", {"id": 7}, TypeError, "id"),
    ("int tag", {"tags": ("ok", 3)}, TypeError, "tag"),
    ("str tags", {"tags": "abc"}, TypeError, "tags"),
    ("int source", {"sources": (1,)}, TypeError, "source"),
    ("int kind", {"kind": 5}, TypeError, "kind"),
    ("int task", {"task": 5}, TypeError, "task"),
    ("lone surrogate in text", {"text": "bad \ud800"}, ValueError, "text"),
    ("lone surrogate in tag", {"tags": ("\udfff",)}, ValueError, "tag"),
    # lengths the record format stores in 16 bits must be refused, never cut
    ("huge id", {"id": "i" * 70_000}, ValueError, "id"),
    ("huge tag", {"tags": ("t" * 70_000,)}, ValueError, "tag"),
    ("huge kind", {"kind": "k" * 70_000}, ValueError, "kind"),
    ("70k tags", {"tags": tuple(f"t{i}" for i in range(70_000))}, ValueError, "tags"),
]


@pytest.mark.parametrize(
    ("kwargs", "exc", "word"), [b[1:] for b in BAD_PUTS], ids=[b[0] for b in BAD_PUTS]
)
def test_bad_put_raises_naming_the_field_and_writes_nothing(
    store: Any, kwargs: dict[str, Any], exc: Any, word: str
) -> None:
    store.put("existing", id="e")
    args = {"text": "fine", **kwargs}
    text = args.pop("text")
    with pytest.raises(exc, match=word):
        store.put(text, **args)
    assert_nothing_written(store, 1, 1)
    # The same input staged in a commit: the whole commit writes nothing.
    with pytest.raises(exc, match=word):
        with store.commit() as c:
            c.put("good one", id="good")
            c.put(text, **args)
    assert_nothing_written(store, 1, 1)
    assert store.get("good") is None


def test_bad_tier_in_move_and_bad_status_args(store: Any) -> None:
    mid = store.put("x")
    with pytest.raises(ValueError, match="tier"):
        store.move(mid, "attic")
    with pytest.raises(TypeError, match="id"):
        store.stale(123)
    with pytest.raises(ValueError, match="tier"):
        with store.commit() as c:
            c.move(mid, "attic")
    assert_nothing_written(store, 1, 1)


def test_record_over_max_record_bytes(path: str) -> None:
    with memcommit.open(path, durability="none", max_record_bytes=4096) as store:
        store.put("small")
        with pytest.raises(ValueError, match="max_record_bytes"):
            store.put("x" * 5000)
        with pytest.raises(ValueError, match="max_record_bytes"):
            store.put("small text", data={"blob": "y" * 5000})
        with pytest.raises(ValueError, match="max_record_bytes"):
            with store.commit() as c:
                c.put("fine")
                c.put("z" * 5000)
        assert_nothing_written(store, 1, 1)
        store.put("a" * 3000)  # under the limit: accepted
        assert store.lsn == 2


def test_default_max_record_bytes_is_16_mib(store: Any) -> None:
    with pytest.raises(ValueError, match="max_record_bytes"):
        store.put("x" * (16 * 1024 * 1024 + 1))
    assert store.lsn == 0
    mid = store.put("y" * (1024 * 1024))
    assert len(store.get(mid).text) == 1024 * 1024


def test_bad_open_arguments(path: str) -> None:
    with pytest.raises(ValueError, match="durability"):
        memcommit.open(path, durability="sometimes")


# -- commits and guards ---------------------------------------------------------------------


def test_commit_is_all_or_nothing_with_consecutive_lsns(store: Any) -> None:
    t1 = store.put("t1")
    t2 = store.put("t2")
    head = store.lsn
    with store.commit(expect_lsn=head) as c:
        s = c.put("User prefers dark mode", kind="fact", sources=(t1, t2))
        c.expect(t1, tier="working")
        c.move(t1, "archive")
        c.expect(t1, tier="archive")  # sees the commit's own earlier op
        c.expect(s, exists=True, status="active")
        c.expect(t2, status="active", lsn=2)
        c.stale(t2)
    assert c.lsn == store.lsn == head + 3
    assert [(r.lsn, r.op) for r in store.records(after=head)] == [
        (3, "put"),
        (4, "move"),
        (5, "status"),
    ]
    assert store.get(t1).tier == "archive"
    assert store.get(s).sources == (t1, t2)


def test_expect_lsn_behind_or_ahead_of_the_store_says_which(store: Any) -> None:
    store.put("one")
    store.put("two")
    with pytest.raises(Rejected, match="another commit came first"):
        with store.commit(expect_lsn=1) as c:
            c.put("x")
    with pytest.raises(Rejected, match="has not reached that LSN"):
        with store.commit(expect_lsn=999) as c:
            c.put("x")
    assert store.lsn == 2


def test_put_many_names_the_text_it_refuses(store: Any) -> None:
    lsn = store.lsn
    with pytest.raises(TypeError, match=r"texts\[3\] must be str, not int"):
        with store.commit() as c:
            c.put_many(["a", "b", "c", 4])
    assert store.lsn == lsn


def test_a_guard_with_no_field_is_that_the_memory_exists(store: Any) -> None:
    there = store.put("there")
    with store.commit() as c:
        c.expect(there)
        c.put("written")
    lsn = store.lsn
    with pytest.raises(Rejected) as refused:
        with store.commit() as c:
            c.put("not written")
            c.expect("does-not-exist")
    assert refused.value.guard is not None and refused.value.guard.kind == "exists"
    assert store.lsn == lsn


def test_guard_lsn_sees_the_commits_own_records(store: Any) -> None:
    mid = store.put("x")
    with store.commit() as c:
        c.move(mid, "mid")
        c.expect(mid, lsn=2)
        c.put("y", id="new")
        c.expect("new", exists=True, lsn=3)
    assert store.lsn == 3


def test_a_commit_spanning_stale_and_restore(store: Any) -> None:
    mid = store.put("x")
    with store.commit() as c:
        c.stale(mid)
        c.expect(mid, status="stale")
        c.restore(mid)
        c.expect(mid, status="active")
    assert store.get(mid).status == "active"
    assert store.lsn == 3


def rejected(store: Any, build: Any, expect_lsn: int | None = None) -> Rejected:
    before = snapshot(store)
    with pytest.raises(Rejected) as info:
        with store.commit(expect_lsn=expect_lsn) as c:
            build(c)
    assert snapshot(store) == before, "a rejected commit wrote records"
    err = info.value
    assert isinstance(err, MemcommitError)
    assert isinstance(err.reason, str) and err.reason
    return err


def test_rejected_expect_lsn(store: Any) -> None:
    store.put("x")
    err = rejected(store, lambda c: c.put("y", id="y"), expect_lsn=0)
    assert err.guard.kind == "expect_lsn"
    assert (err.guard.expected, err.guard.actual) == (0, 1)
    assert store.get("y") is None
    with store.commit(expect_lsn=1) as c:
        c.put("y", id="y")
    assert store.get("y") is not None


def test_rejected_exists(store: Any) -> None:
    mid = store.put("x", id="m")
    err = rejected(store, lambda c: (c.put("a", id="a"), c.expect("ghost", exists=True)))
    assert (err.guard.kind, err.guard.id) == ("exists", "ghost")
    assert (err.guard.expected, err.guard.actual) == (True, False)
    assert "ghost" in err.reason
    err = rejected(store, lambda c: c.expect(mid, exists=False))
    assert (err.guard.kind, err.guard.id) == ("exists", "m")
    assert (err.guard.expected, err.guard.actual) == (False, True)
    # exists=False then creating it in the same commit is the "create if absent" idiom
    with store.commit() as c:
        c.expect("fresh", exists=False)
        c.put("fresh", id="fresh")
        c.expect("fresh", exists=True)
    assert store.get("fresh").text == "fresh"


def test_rejected_status(store: Any) -> None:
    store.put("x", id="m")
    err = rejected(store, lambda c: c.expect("m", status="stale"))
    assert (err.guard.kind, err.guard.id) == ("status", "m")
    assert (err.guard.expected, err.guard.actual) == ("stale", "active")
    # against the commit's own earlier op
    err = rejected(store, lambda c: (c.stale("m"), c.expect("m", status="active")))
    assert (err.guard.kind, err.guard.expected, err.guard.actual) == ("status", "active", "stale")
    assert store.get("m").status == "active"


def test_rejected_tier(store: Any) -> None:
    store.put("x", id="m", tier="mid")
    err = rejected(store, lambda c: (c.move("m", "long"), c.expect("m", tier="mid")))
    assert (err.guard.kind, err.guard.id) == ("tier", "m")
    assert (err.guard.expected, err.guard.actual) == ("mid", "long")
    assert store.get("m").tier == "mid"


def test_rejected_lsn(store: Any) -> None:
    store.put("x", id="m")
    store.put("y", id="other")
    store.move("m", "long")
    err = rejected(store, lambda c: (c.put("z", id="z"), c.expect("m", lsn=1)))
    assert (err.guard.kind, err.guard.id) == ("lsn", "m")
    assert (err.guard.expected, err.guard.actual) == (1, 3)
    assert "z" not in store


@pytest.mark.parametrize("op", ["stale", "restore", "move"])
def test_rejected_unknown_id(store: Any, op: str) -> None:
    store.put("x", id="m")
    calls = {
        "stale": lambda t: t.stale("ghost"),
        "restore": lambda t: t.restore("ghost"),
        "move": lambda t: t.move("ghost", "long"),
    }
    with pytest.raises(Rejected) as info:
        calls[op](store)
    assert (info.value.guard.kind, info.value.guard.id) == ("unknown_id", "ghost")
    assert "ghost" in info.value.reason
    assert store.lsn == 1
    err = rejected(store, lambda c: (c.put("a", id="a"), calls[op](c)))
    assert (err.guard.kind, err.guard.id) == ("unknown_id", "ghost")
    assert "a" not in store
    # a memory created earlier in the same commit is known to the later ops
    with store.commit() as c:
        c.put("g", id="ghost")
        calls[op](c)
    assert "ghost" in store


def test_exception_inside_commit_writes_nothing(store: Any) -> None:
    mid = store.put("x")
    before = snapshot(store)

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with store.commit() as c:
            c.put("never", id="never")
            c.stale(mid)
            c.finish_task("t")
            raise Boom
    assert snapshot(store) == before
    assert "never" not in store
    assert store.get(mid).status == "active"
    assert not store.is_task_finished("t")
    # the store is still usable
    with store.commit() as c:
        c.put("after", id="after")
    assert c.lsn == 2


def test_empty_commit_writes_nothing(store: Any) -> None:
    store.put("x")
    with store.commit() as c:
        pass
    assert c.lsn is None
    assert store.lsn == 1


def test_concurrent_commits_get_consecutive_lsns(path: str) -> None:
    """Threads committing at once (group commit): each commit's records stay together."""
    spans: list[tuple[int, str]] = []
    lock = threading.Lock()

    def work(t: int) -> None:
        for i in range(40):
            with store.commit() as c:
                for j in range(3):
                    c.put(f"{t}-{i}-{j}", id=f"{t}-{i}-{j}")
            with lock:
                spans.append((c.lsn, f"{t}-{i}"))

    with memcommit.open(path) as store:
        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert store.lsn == 4 * 40 * 3
        keys = {r.lsn: r.key for r in store.records()}
    assert sorted(keys) == list(range(1, 481))
    assert sorted(lsn for lsn, _ in spans) == list(range(3, 481, 3))
    for lsn, prefix in spans:
        assert [keys[lsn - 2], keys[lsn - 1], keys[lsn]] == [f"{prefix}-{j}" for j in range(3)]
    with memcommit.open(path) as store:
        assert store.lsn == 480 and len(store) == 480


# -- locking and readers -----------------------------------------------------------------------


def test_second_writer_in_process_gets_store_locked(path: str) -> None:
    first = memcommit.open(path)
    try:
        first.put("x")
        with pytest.raises(StoreLocked) as info:
            memcommit.open(path)
        assert path in str(info.value) or os.path.basename(path) in str(info.value)
        assert first.put("still writable")
        assert first.lsn == 2
    finally:
        first.close()
    with memcommit.open(path) as again:  # released by close
        assert again.lsn == 2


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_a_second_name_for_the_log_file_gets_store_locked_too(
    path: str, tmp_path: Path, link: str
) -> None:
    """A link has a lock file of its own name, but the log is one file: one writer."""
    other = str(tmp_path / "other-name.db")
    with memcommit.open(path) as first:
        first.put("one", id="one")
        (os.symlink if link == "symbolic" else os.link)(path, other)
        with pytest.raises(StoreLocked):
            memcommit.open(other)
        res = run_python(
            "import sys, memcommit\n"
            "try:\n    memcommit.open(sys.argv[1])\n"
            "except memcommit.StoreLocked:\n    print('LOCKED')\n",
            other,
        )
        assert res.stdout.strip() == "LOCKED", res.stdout + res.stderr
        first.put("two", id="two")
    with memcommit.open(other) as again:  # the first writer let go of both names
        assert [again.get(i).text for i in ("one", "two")] == ["one", "two"]
        again.put("three", id="three")
        if link == "symbolic":
            assert again.path == os.path.realpath(path)
    with memcommit.open(path) as store:
        assert store.lsn == 3 and store.recovered_bytes == 0


def test_compaction_through_a_symbolic_link_replaces_the_file_it_names(
    path: str, tmp_path: Path
) -> None:
    link = str(tmp_path / "link.db")
    with memcommit.open(path) as store:
        store.put("kept", id="kept")
    os.symlink(path, link)
    with memcommit.open(link) as store:
        compact(store)
        store.put("after", id="after")
    assert os.path.islink(link)
    with memcommit.open(path) as store:
        assert store.generation == 1 and store.get("after").text == "after"


def run_python(code: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_second_writer_in_another_process_gets_store_locked(path: str) -> None:
    code = """
        import sys, memcommit
        try:
            memcommit.open(sys.argv[1])
        except memcommit.StoreLocked as e:
            print("LOCKED", e)
        else:
            print("OPENED")
    """
    with memcommit.open(path) as store:
        store.put("x")
        res = run_python(code, path)
        assert res.returncode == 0, res.stderr
        assert res.stdout.startswith("LOCKED"), res.stdout + res.stderr
        assert store.put("y")
    assert os.path.getsize(path) > HEADER_BYTES
    with memcommit.open(path) as store:
        assert store.lsn == 2


def test_writer_in_another_process_locks_this_one_out(path: str) -> None:
    code = """
        import sys, memcommit
        s = memcommit.open(sys.argv[1])
        s.put("from child", id="child")
        print("READY", flush=True)
        sys.stdin.readline()
        s.close()
        print("CLOSED", flush=True)
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "READY"
        with pytest.raises(StoreLocked):
            memcommit.open(path)
        # a reader coexists with the other process's writer
        with memcommit.open(path, read_only=True) as reader:
            assert reader.get("child").text == "from child"
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "CLOSED"
    finally:
        proc.wait(60)
        if proc.stderr is not None:
            proc.stderr.close()
        if proc.stdout is not None:
            proc.stdout.close()
        if proc.stdin is not None:
            proc.stdin.close()
    assert proc.returncode == 0
    with memcommit.open(path) as store:
        assert store.get("child").text == "from child"


def test_read_only_store_coexists_and_refreshes(path: str) -> None:
    with memcommit.open(path) as writer:
        writer.put("one", id="one")
        with memcommit.open(path, read_only=True) as reader:
            assert reader.read_only and not writer.read_only
            assert reader.lsn == 1
            assert reader.get("one").text == "one"
            writer.put("two", id="two")
            with writer.commit() as c:
                c.move("one", "long")
                c.put("three", id="three")
            assert reader.refresh() == 3
            assert reader.lsn == writer.lsn == 4
            assert reader.get("two").text == "two"
            assert reader.get("one").tier == "long"
            assert [m.id for m in reader.find()] == ["one", "two", "three"]
            assert reader.refresh() == 0
            before = writer.lsn
            with pytest.raises(memcommit.ReadOnlyStore, match=r"read-only|read_only"):
                reader.put("from reader")
            with pytest.raises(memcommit.ReadOnlyStore):
                with reader.commit() as c:
                    c.put("from reader")
            with pytest.raises(memcommit.ReadOnlyStore):
                reader.stale("one")
            assert writer.lsn == before
            assert reader.refresh() == 0


def test_reader_never_sees_part_of_a_commit(path: str) -> None:
    """A reader refreshing while a commit is half on disk applies all of it or nothing."""
    with memcommit.open(path) as w:
        w.put("a", id="a")
        before = w.info()["bytes"]
        with w.commit() as c:
            c.put("b", id="b")
            c.stale("a")
            c.put("c", id="c")
        after = w.info()["bytes"]
    raw = Path(path).read_bytes()
    os.truncate(path, before)  # as if the writer had not appended the commit yet
    with memcommit.open(path, read_only=True) as reader:
        assert reader.lsn == 1
        with open(path, "ab") as f:
            for i in range(before, after - 1):  # the writer's append, one byte at a time
                f.write(raw[i : i + 1])
                f.flush()
                assert reader.refresh() == 0, f"applied part of a commit at byte {i}"
                assert reader.lsn == 1 and "b" not in reader
                assert reader.get("a").status == "active"
            f.write(raw[after - 1 : after])
        assert reader.refresh() == 3
        assert reader.lsn == 4
        assert [m.id for m in reader.find(status=None)] == ["a", "b", "c"]
        assert reader.get("a").status == "stale"


def test_read_only_open_of_a_missing_file_does_not_create_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises((FileNotFoundError, MemcommitError, OSError)):
        memcommit.open(str(missing), read_only=True)
    assert not missing.exists()


# -- recovery: torn tails and damage ------------------------------------------------------------


def build_log(path: str, commits: int = 6) -> list[int]:
    """Write commits of 1..3 records; return the file size after each commit (0: header)."""
    ends: list[int] = []
    with memcommit.open(path) as store:
        ends.append(store.info()["bytes"])
        for i in range(commits):
            with store.commit() as c:
                for j in range(1 + i % 3):
                    c.put(f"commit {i} record {j} " + "é" * (i * 7), id=f"m{i}-{j}")
            ends.append(store.info()["bytes"])
    assert os.path.getsize(path) == ends[-1]
    return ends


def lsns_at(ends: list[int]) -> list[int]:
    """LSN after each commit in build_log (commit i has 1 + i % 3 records)."""
    out = [0]
    for i in range(len(ends) - 1):
        out.append(out[-1] + 1 + i % 3)
    return out


def test_info(path: str) -> None:
    ends = build_log(path, 3)
    with memcommit.open(path, durability="batch") as store:
        info = store.info()
        assert info["path"] == path == store.path
        assert info["records"] == 6 == info["lsn"] == store.lsn
        assert info["bytes"] == ends[-1]
        assert info["generation"] == 0 == store.generation
        assert info["store_id"] == store.store_id
        int(store.store_id, 16)
        assert info["memories"] == 6
        assert info["durability"] == "batch"
        assert store.recovered_bytes == 0


def test_torn_tail_sweep(path: str, tmp_path: Path) -> None:
    """Cut the file at every byte offset of the last commits (plan T4)."""
    ends = build_log(path)
    lsn_after = lsns_at(ends)
    full = Path(path).read_bytes()
    cut_path = tmp_path / "cut.db"
    first = ends[-4]  # the last three commits: 1, 2 and 3 records
    for cut in range(first, len(full)):
        whole = max(i for i, e in enumerate(ends) if e <= cut)
        cut_path.write_bytes(full[:cut])
        # a reader sees the whole commits and leaves the file alone
        with memcommit.open(str(cut_path), read_only=True) as reader:
            assert reader.lsn == lsn_after[whole], cut
        assert cut_path.stat().st_size == cut
        with memcommit.open(str(cut_path)) as store:
            assert store.lsn == lsn_after[whole], f"cut at {cut}"
            assert store.recovered_bytes == cut - ends[whole], f"cut at {cut}"
            assert [r.lsn for r in store.records()] == list(range(1, store.lsn + 1))
            assert len(store) == lsn_after[whole]
        assert cut_path.stat().st_size == ends[whole], f"cut at {cut}"


@pytest.mark.parametrize("tail", ["zeros", "garbage", "old record", "half record", "header"])
def test_appended_tail_is_truncated(path: str, tail: str) -> None:
    ends = build_log(path)
    full = Path(path).read_bytes()
    junk = {
        "zeros": b"\0" * 4096,
        "garbage": bytes((i * 131 + 7) % 256 for i in range(3000)),
        "old record": full[ends[0] : ends[1]],  # a valid record of LSN 1, duplicated
        "half record": full[ends[1] : ends[2]][: (ends[2] - ends[1]) // 2],
        "header": full[:HEADER_BYTES],
    }[tail]
    with open(path, "ab") as f:
        f.write(junk)
    with memcommit.open(path) as store:
        assert store.lsn == 12
        assert store.recovered_bytes == len(junk)
        assert store.get("m5-0").text.startswith("commit 5 record 0")
        store.put("after recovery", id="after")
    assert os.path.getsize(path) > ends[-1]
    with memcommit.open(path) as store:
        assert store.lsn == 13
        assert store.recovered_bytes == 0
        assert store.get("after").text == "after recovery"


def record_spans(raw: bytes) -> list[tuple[int, int, int]]:
    """(offset, end, lsn) of each record, read with the layout in ARCHITECTURE.md."""
    out = []
    off = HEADER_BYTES
    while off < len(raw):
        lsn = int.from_bytes(raw[off + 8 : off + 16], "little")
        key_len = int.from_bytes(raw[off + 24 : off + 26], "little")
        length = int.from_bytes(raw[off + 28 : off + 32], "little")
        end = off + 32 + key_len + length + 4
        out.append((off, end, lsn))
        off = end
    assert off == len(raw)
    return out


def test_record_layout_matches_the_architecture_notes(path: str) -> None:
    ends = build_log(path)
    spans = record_spans(Path(path).read_bytes())
    assert [lsn for _, _, lsn in spans] == list(range(1, 13))
    assert {e for _, e, _ in spans} >= set(ends[1:])


def test_damage_mid_log_raises_corrupt_log(path: str) -> None:
    ends = build_log(path)
    raw = bytearray(Path(path).read_bytes())
    # commit 2 holds LSNs 4..6; damage the text of LSN 6, its last record
    off, end, lsn = record_spans(bytes(raw))[5]
    assert lsn == 6 and end == ends[3]
    raw[end - 10] ^= 0x40
    Path(path).write_bytes(bytes(raw))
    with pytest.raises(CorruptLog) as info:
        memcommit.open(path)
    err = info.value
    assert isinstance(err, IntegrityError) and isinstance(err, MemcommitError)
    assert err.offset == off
    assert err.lsn == 6
    assert str(off) in str(err)
    assert Path(path).read_bytes() == bytes(raw), "a damaged log must not be truncated"
    with pytest.raises(CorruptLog) as info:
        memcommit.open(path, read_only=True)
    assert (info.value.offset, info.value.lsn) == (off, 6)
    assert Path(path).read_bytes() == bytes(raw)


def test_damage_to_the_first_record_is_not_a_torn_tail(path: str) -> None:
    ends = build_log(path)
    raw = bytearray(Path(path).read_bytes())
    raw[ends[0] + 9] ^= 0xFF  # inside the LSN field of record 1
    Path(path).write_bytes(bytes(raw))
    with pytest.raises(CorruptLog) as info:
        memcommit.open(path)
    assert info.value.offset == ends[0]
    assert info.value.lsn == 1
    assert Path(path).read_bytes() == bytes(raw)


def test_missing_commit_mid_log_is_corrupt(path: str) -> None:
    """A hole on a whole-record boundary (plan 3.6: the RocksDB gap bug)."""
    ends = build_log(path)
    raw = Path(path).read_bytes()
    holed = raw[: ends[2]] + raw[ends[3] :]  # commit 2 (LSNs 4..6) removed
    Path(path).write_bytes(holed)
    with pytest.raises(CorruptLog) as info:
        memcommit.open(path)
    assert info.value.offset == ends[2]
    assert info.value.lsn == 4
    assert Path(path).read_bytes() == holed


# -- in-memory stores --------------------------------------------------------------------------


@pytest.mark.parametrize("make", ["open", "create"])
def test_memory_store_works_the_same(make: str, clock: ControllableClock) -> None:
    if make == "open":
        store = memcommit.open(":memory:")
    else:
        store = memcommit.create_memory_store(clock=clock)
    with store:
        assert store.path is None
        assert store.lsn == 0 and len(store) == 0
        mid = store.put("hello", tags=("a",), data={"x": [1]})
        with store.commit(expect_lsn=1) as c:
            c.expect(mid, status="active")
            c.move(mid, "long")
            other = c.put("world")
        assert c.lsn == 3 == store.lsn
        assert store.get(mid).tier == "long"
        assert [m.id for m in store.find(status=None)] == [mid, other]
        with pytest.raises(Rejected):
            store.stale("ghost")
        with pytest.raises(Rejected):
            with store.commit(expect_lsn=0) as c:
                c.put("no")
        assert store.lsn == 3
        assert [r.op for r in store.records()] == ["put", "move", "put"]
        assert [r.lsn for r in store.history(mid)] == [1, 2]
        if make == "create":
            assert store.get(mid).created_at == START
    # two in-memory stores are independent
    a = memcommit.open(":memory:")
    b = memcommit.open(":memory:")
    a.put("only in a", id="x")
    assert "x" not in b
    a.close()
    b.close()


# -- durability modes ------------------------------------------------------------------------


@pytest.mark.parametrize("durability", ["commit", "batch", "none"])
def test_durability_modes_persist_after_close(path: str, durability: str) -> None:
    store = memcommit.open(path, durability=durability, flush_interval_ms=10_000)
    assert store.info()["durability"] == durability
    ids = [store.put(f"m{i}") for i in range(20)]
    with store.commit() as c:
        c.stale(ids[0])
    store.flush()
    assert store.lsn == 21
    store.close()
    with memcommit.open(path, durability=durability) as again:
        assert again.lsn == 21
        assert [m.id for m in again.find()] == ids[1:]
        assert again.get(ids[0]).status == "stale"


def test_batch_close_flushes_without_explicit_flush(path: str) -> None:
    with memcommit.open(path, durability="batch", flush_interval_ms=60_000) as store:
        for i in range(50):
            store.put(f"m{i}", id=f"m{i}")
    with memcommit.open(path, read_only=True) as reader:
        assert reader.lsn == 50
        assert reader.get("m49").text == "m49"


def test_context_manager_releases_the_lock(path: str) -> None:
    with memcommit.open(path) as store:
        store.put("x")
    with memcommit.open(path) as store:
        assert store.lsn == 1


def test_closed_store_refuses_work(path: str) -> None:
    store = memcommit.open(path)
    store.put("x")
    store.close()
    store.close()  # twice is fine
    with pytest.raises(memcommit.StoreClosed, match="closed"):
        store.put("y")
    with pytest.raises(memcommit.StoreClosed):
        with store.commit() as c:
            c.put("y")
    with memcommit.open(path) as again:
        assert again.lsn == 1


# -- errors ----------------------------------------------------------------------------------


def test_error_hierarchy() -> None:
    for cls in (
        Rejected,
        Purged,
        StoreLocked,
        IntegrityError,
        SnapshotMismatch,
        NotSupported,
        memcommit.ReadOnlyStore,
        memcommit.StoreClosed,
    ):
        assert issubclass(cls, MemcommitError), cls
    for cls in (CorruptLog, SealMismatch, ForgedReference):
        assert issubclass(cls, IntegrityError), cls
    assert issubclass(MemcommitError, Exception)
    assert not issubclass(Rejected, IntegrityError)
    assert memcommit.MemcommitError is MemcommitError
    for name in ("Commit", "Memory", "Record", "Guard", "Clock", "SystemClock", "MemoryStore"):
        assert hasattr(memcommit, name), name


def test_system_clock_is_aware_utc() -> None:
    store = memcommit.open(":memory:")
    before = datetime.now(timezone.utc)
    mid = store.put("x")
    after = datetime.now(timezone.utc)
    m = store.get(mid)
    assert m.created_at.utcoffset() == timedelta(0)
    assert before - timedelta(seconds=1) <= m.created_at <= after + timedelta(seconds=1)


def test_opening_a_directory_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "a-directory"
    target.mkdir()
    with pytest.raises(IsADirectoryError):
        memcommit.open(str(target))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-directory"]


def test_opening_a_fifo_or_a_device_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    """A writer would have replaced it with a log file (a store is a regular file). A device
    takes the same path as the FIFO, so no test risks one of the machine's."""
    fifo = tmp_path / "a-fifo"
    os.mkfifo(fifo)
    for read_only in (False, True):
        with pytest.raises(OSError, match="not a regular file"):
            memcommit.open(str(fifo), read_only=read_only)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-fifo"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"clock": 5}, "clock: int has neither"),
        ({"embed": 5}, "embed must be a callable"),
        ({"read_only": "yes"}, "read_only must be a bool"),
    ],
)
def test_a_bad_argument_to_open_creates_nothing(
    tmp_path: Path, arguments: dict[str, Any], error: str
) -> None:
    with pytest.raises(TypeError, match=error):
        memcommit.open(str(tmp_path / "memory.db"), **arguments)
    assert list(tmp_path.iterdir()) == []


def test_put_many_takes_one_kind_and_task_per_text(store: Any) -> None:
    with store.commit() as c:
        ids = c.put_many(
            ["a", "b", "c"],
            kind=["fact", "trace", "note"],
            task=["t1", None, "t2"],
            ids=["x1", "x2", "x3"],
        )
    assert ids == ["x1", "x2", "x3"]
    got = [(m.id, m.kind, m.task) for m in store.get_many(ids)]
    assert got == [("x1", "fact", "t1"), ("x2", "trace", None), ("x3", "note", "t2")]
    lsn = store.lsn
    with pytest.raises(ValueError, match="kind: 2 values for 3 texts"):
        with store.commit() as c:
            c.put_many(["d", "e", "f"], kind=["fact", "fact"])
    with pytest.raises(TypeError, match=r"task\[1\]"):
        with store.commit() as c:
            c.put_many(["d", "e"], task=["t", 5])
    assert store.lsn == lsn


def test_opening_in_a_missing_directory_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    with pytest.raises(FileNotFoundError, match="no-such-dir does not exist"):
        memcommit.open(str(missing / "memory.db"))
    assert not missing.exists()


def test_after_a_kill_the_open_cuts_only_the_zeros_written_ahead(path: str) -> None:
    """README: after a kill -9, `recovered_bytes` counts the zeros the writer wrote ahead of
    its commits (at most 2 MiB), and no byte of an acknowledged commit."""
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, signal, sys, memcommit\n"
            "s = memcommit.open(sys.argv[1])\n"
            "for i in range(50):\n"
            "    s.put(f'note {i}', id=f'n{i}')\n"
            "print(s.info()['bytes'], flush=True)\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n",
            path,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    end = int(child.stdout)
    left = os.path.getsize(path)
    assert left > end  # the zeros written ahead are still there
    with memcommit.open(path) as store:
        assert store.recovered_bytes == left - end
        assert 0 < store.recovered_bytes <= 2 * 1024 * 1024
        assert [store.get(f"n{i}").text for i in range(50)] == [f"note {i}" for i in range(50)]
        assert store.info()["bytes"] == end


@pytest.mark.parametrize("form", ["now_ms", "now"])
def test_a_clock_with_either_form_of_the_time_stamps_every_write(tmp_path: Path, form: str) -> None:
    """open() takes a clock with now_ms() or now() alone; memories, records and leases then
    all carry its time (a clock with only now_ms() is read in whole milliseconds)."""
    instant = datetime(2026, 1, 1, 12, 0, 0, 123000, tzinfo=timezone.utc)

    class OneForm:
        pass

    clock = OneForm()
    if form == "now_ms":
        clock.now_ms = lambda: 1767268800123  # type: ignore[attr-defined]
    else:
        clock.now = lambda: instant  # type: ignore[attr-defined]
    with memcommit.open(str(tmp_path / "m.db"), clock=clock) as store:  # type: ignore[arg-type]
        mid = store.put("x")
        assert store.get(mid).created_at == instant
        assert [r.at for r in store.records()] == [instant]
        lease = store.locks.acquire("job", "me", 1_000)
        assert lease and lease.acquired_at_ms == 1767268800123


def test_a_record_too_large_names_the_field_that_makes_it_so(tmp_path: Path) -> None:
    with memcommit.open(str(tmp_path / "m.db"), max_record_bytes=1024) as store:
        store.put("x", id="m")
        for fields, field in (
            ({"data": {"blob": "y" * 4000}}, "data"),
            ({"tags": [f"tag-{i:04}" for i in range(300)]}, "tags"),
            ({}, "text"),
        ):
            text = "x" * 4000 if field == "text" else "x"
            with pytest.raises(ValueError, match=rf'^{field}: the memory "d" would make a'):
                store.put(text, id="d", **fields)
        with pytest.raises(ValueError, match=r'^reason: the status change of memory "m" would'):
            store.stale("m", reason="r" * 4000)
        with pytest.raises(TypeError, match="task must be a str, not NoneType"):
            store.is_task_finished(None)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="value 0 is inf as a 32-bit float"):
            store.put("v", vector=[1e300])
        assert store.lsn == 1


def test_data_may_be_any_mapping_and_is_stored_as_the_object_it_stands_for() -> None:
    """put's data is typed Mapping[str, Any]: a read-only mapping is a JSON object too."""
    import types

    with memcommit.open(":memory:") as store:
        mid = store.put("x", data=types.MappingProxyType({"a": 1, "b": [2]}))
        assert store.get(mid).data == {"a": 1, "b": [2]}


def test_a_system_clock_subclass_that_sets_the_time_stamps_every_write() -> None:
    # SPEC 15: every timestamp from the store's clock. A subclass of the public SystemClock
    # overriding now() (or only now_ms()) was ignored by store.put (stamped natively with the
    # system clock) and by commits (its inherited now_us()).
    fixed = datetime(2020, 1, 1, tzinfo=timezone.utc)

    class Frozen(memcommit.SystemClock):
        def now(self) -> datetime:
            return fixed

        def now_ms(self) -> int:
            return int(fixed.timestamp() * 1000)

    class FrozenMs(memcommit.SystemClock):
        def now_ms(self) -> int:
            return int(fixed.timestamp() * 1000)

    for clock in (Frozen(), FrozenMs()):
        store = memcommit.open(":memory:", clock=clock)
        a = store.put("single")
        with store.commit() as c:
            b = c.put("in a commit")
        store.stale(a)
        got = [store.get(a).created_at, store.get(b).created_at, store.get(a).updated_at]
        assert got == [fixed] * 3, (type(clock).__name__, got)


@pytest.mark.parametrize(
    ("wait", "error"),
    [
        ("x", memcommit.InvalidType),
        (True, memcommit.InvalidType),
        (None, memcommit.InvalidType),
        (-1, memcommit.InvalidValue),
        (float("nan"), memcommit.InvalidValue),
    ],
)
def test_a_local_refresh_names_a_bad_wait(tmp_path: Path, wait: object, error: type) -> None:
    # As a RemoteStore's refresh does; NotSupported is for a wait a local store cannot do.
    with memcommit.open(tmp_path / "m.db") as store:
        with pytest.raises(error, match=r"^wait\b"):
            store.refresh(wait)  # type: ignore[arg-type]
        with pytest.raises(memcommit.NotSupported):
            store.refresh(1.5)
        assert store.refresh(0) == 0
