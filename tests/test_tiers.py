"""Memory tiers (SPEC section 5): fold, consolidate, merge, the default summarizer, the view
agents read (`context`) and lineage."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import memcommit
from memcommit import Memory, MemoryStore, storage
from memcommit.lineage import descendants, lineage
from memcommit.summarize import ExtractiveSummarizer, default_summarizer
from memcommit.testing import CLOCK_START as START
from memcommit.testing import ControllableClock
from memcommit.tiers import (
    MemoryCompactionReport,
    Replacement,
    Skipped,
    TierPolicy,
    compact_memory,
    context,
)

HOUR = 3_600_000  # ms, for ControllableClock.advance
DAY = 24 * HOUR


@pytest.fixture
def store(clock: ControllableClock) -> Iterator[MemoryStore]:
    with memcommit.create_memory_store(clock=clock) as s:
        yield s


def joined(memories: Sequence[Memory], purpose: str) -> str:
    """A summarizer whose output shows exactly what it was given."""
    return " | ".join(m.text for m in memories)


def traces(store: MemoryStore, task: str | None, n: int, prefix: str = "step") -> list[str]:
    return [store.put(f"{prefix} {i} of {task}.", kind="trace", task=task) for i in range(n)]


def text_as_of(store: MemoryStore, id: str, lsn: int) -> str:
    """The text memory `id` had just before LSN `lsn`."""
    puts = [r for r in store.history(id) if r.op == "put" and r.lsn < lsn]
    return str(puts[-1].fields["text"])


def live_reach(store: MemoryStore) -> set[str]:
    """Every id reachable by lineage from a memory that is not archived."""
    reach: set[str] = set()
    for m in store.find(status=None):
        if m.tier != "archive":
            reach.add(m.id)
            reach.update(x.id for x in lineage(store, m.id))
    return reach


# -- fold --------------------------------------------------------------------------------


def test_fold_makes_one_mid_summary_per_finished_task(store: MemoryStore) -> None:
    a = [
        store.put("Opened the settings page.", kind="trace", task="ui", tags=("ui",)),
        store.put("Switched to dark mode.", kind="trace", task="ui", tags=("ui", "theme")),
    ]
    stale = store.put("A wrong step.", kind="trace", task="ui")
    store.stale(stale)
    note = store.put("Remember the user's name is Ada.", task="ui")
    open_task = traces(store, "billing", 2)
    loose = store.put("A trace of no task.", kind="trace")
    store.finish_task("ui")

    report = compact_memory(store, summarizer=joined)

    (r,) = report.fold.replaced
    assert r.sources == tuple(a) and r.task == "ui" and r.window is None
    assert report.fold.created == (r.created,) and report.fold.moved == tuple(a)
    s = store.get(r.created)
    assert s is not None
    assert (s.kind, s.tier, s.status, s.task) == ("summary", "mid", "active", "ui")
    assert s.sources == tuple(a)
    assert s.text == "Opened the settings page. | Switched to dark mode."
    assert s.tags == ("ui", "theme")
    assert s.data == {"compaction": "fold", "summarizer": f"{__name__}.joined"}
    for i in a:
        m = store.get(i)
        assert m is not None and (m.tier, m.status) == ("archive", "active")
    # Untouched: the stale trace, the note, an unfinished task's traces, a task-less trace.
    for i in (stale, note, loose, *open_task):
        m = store.get(i)
        assert m is not None and m.tier == "working"
    assert report.consolidate.replaced == report.merge.replaced == ()
    assert report.created == (r.created,) and report.moved == tuple(a) and report.wrote


def test_fold_records_say_what_replaced_what(store: MemoryStore) -> None:
    ids = traces(store, "t", 3)
    store.finish_task("t")
    before = store.lsn
    report = compact_memory(store)
    (created,) = report.created
    records = list(store.records(after=before))
    # One commit: the summary, then one move per trace.
    assert [(r.op, r.key) for r in records] == [("put", created)] + [("move", i) for i in ids]
    assert records[0].fields["sources"] == tuple(ids)
    assert all(r.fields == {"tier": "archive"} for r in records[1:])
    assert [r.lsn for r in records] == list(range(before + 1, before + 5))


def test_a_second_run_writes_nothing(store: MemoryStore, clock: ControllableClock) -> None:
    traces(store, "t1", 3)
    traces(store, "t2", 2)
    store.finish_task("t1")
    store.finish_task("t2")
    store.put("a loose mid note", tier="mid")
    first = compact_memory(store)
    assert len(first.fold.created) == 2
    lsn = store.lsn
    second = compact_memory(store)
    assert store.lsn == lsn
    assert not second.wrote and second.created == second.moved == ()
    assert second.skipped == ()
    assert str(second) == "fold: nothing to do; consolidate: nothing to do; merge: nothing to do"
    # Time passing makes segments cold: that is something new, once.
    clock.advance(8 * DAY)
    third = compact_memory(store)
    assert len(third.consolidate.created) == 3
    lsn = store.lsn
    clock.advance(100 * DAY)
    assert not compact_memory(store).wrote and store.lsn == lsn


def test_late_traces_fold_again_and_merge(store: MemoryStore) -> None:
    first = traces(store, "t", 2)
    store.finish_task("t")
    (s1,) = compact_memory(store, summarizer=joined).fold.created
    late = traces(store, "t", 2, prefix="late")

    report = compact_memory(store, summarizer=joined)

    (s2,) = report.fold.created
    assert report.fold.moved == tuple(late)
    (merged,) = report.merge.replaced
    assert merged.sources == (s1, s2) and merged.task == "t"
    m = store.get(merged.created)
    assert m is not None and (m.kind, m.tier, m.task) == ("summary", "mid", "t")
    assert m.text == "step 0 of t. | step 1 of t. | late 0 of t. | late 1 of t."
    assert m.data == {"compaction": "merge", "summarizer": f"{__name__}.joined"}
    assert [x.tier for x in store.get_many([s1, s2]) if x] == ["archive", "archive"]
    assert {x.id for x in lineage(store, merged.created)} == {s1, s2, *first, *late}
    assert store.find(tier="mid", kind="summary", task="t") == [m]
    assert not compact_memory(store).wrote


# -- consolidate -------------------------------------------------------------------------


def test_consolidate_a_cold_task_segment_into_long(
    store: MemoryStore, clock: ControllableClock
) -> None:
    traces(store, "t", 3)
    store.finish_task("t")
    (summary,) = compact_memory(store).fold.created
    fact = store.put("The user's name is Ada.", kind="fact", task="t", tier="mid")

    clock.advance(7 * DAY)  # the newest record is exactly cold_after old: not older
    assert not compact_memory(store).wrote
    clock.advance(1)
    report = compact_memory(store, summarizer=joined)

    (r,) = report.consolidate.replaced
    assert r.sources == (summary, fact) and r.task == "t"
    long_ = store.get(r.created)
    assert long_ is not None
    assert (long_.tier, long_.kind, long_.task) == ("long", "summary", "t")
    assert long_.data == {"compaction": "consolidate", "summarizer": f"{__name__}.joined"}
    assert long_.text.endswith("| The user's name is Ada.")
    assert [m.tier for m in store.get_many([summary, fact]) if m] == ["archive", "archive"]
    # Long-term memories are never inputs: nothing more, however long we wait.
    clock.advance(365 * DAY)
    assert not compact_memory(store).wrote


def test_a_segment_waits_until_all_of_it_is_cold(
    store: MemoryStore, clock: ControllableClock
) -> None:
    old = store.put("old mid fact", kind="fact", task="t", tier="mid")
    clock.advance(6 * DAY)
    recent = store.put("recent mid fact", kind="fact", task="t", tier="mid")
    clock.advance(2 * DAY)
    assert not compact_memory(store).wrote  # `recent` is 2 days old
    store.put("old mid fact, corrected", kind="fact", task="t", id=old)  # newer: warm again
    clock.advance(7 * DAY + 1)
    report = compact_memory(store, summarizer=joined)
    (r,) = report.consolidate.replaced
    assert r.sources == (old, recent)
    m = store.get(r.created)
    assert m is not None and m.kind == "fact"  # all the segment's memories are facts
    assert m.text == "old mid fact, corrected | recent mid fact"


def test_taskless_mid_memories_consolidate_by_time_window(
    store: MemoryStore, clock: ControllableClock
) -> None:
    clock.advance(2 * HOUR)
    day1 = [store.put("note a", tier="mid"), store.put("pref b", kind="preference", tier="mid")]
    clock.advance(20 * HOUR)  # still 2026-01-01
    day1.append(store.put("note c", tier="mid", tags=("x",)))
    clock.advance(4 * HOUR)  # 2026-01-02
    day2 = [store.put("note d", tier="mid")]
    clock.advance(30 * DAY)

    report = compact_memory(store, summarizer=joined)

    r1, r2 = report.consolidate.replaced
    assert (r1.sources, r1.task, r1.window) == (tuple(day1), None, START)
    assert (r2.sources, r2.window) == (tuple(day2), START + timedelta(days=1))
    m1, m2 = store.get_many([r1.created, r2.created])
    assert m1 is not None and m2 is not None
    assert (m1.tier, m1.task, m1.kind, m1.tags) == ("long", None, "summary", ("x",))
    assert m1.text == "note a | pref b | note c"
    assert m1.data is not None and m1.data["window"] == START.isoformat()
    assert m2.kind == "note"  # one memory, one kind: kept


def test_policy_window_and_cold_after_take_seconds(
    store: MemoryStore, clock: ControllableClock
) -> None:
    a = store.put("a", tier="mid")
    clock.advance(HOUR)
    b = store.put("b", tier="mid")
    clock.advance(HOUR // 2 - 1)
    report = compact_memory(store, TierPolicy(cold_after=1800, window=3600.0), joined)
    assert [r.sources for r in report.consolidate.replaced] == [(a,)]  # b is not 30 min old
    clock.advance(2)
    report = compact_memory(store, TierPolicy(cold_after=1800, window=3600.0), joined)
    assert [r.sources for r in report.consolidate.replaced] == [(b,)]


# -- merge -------------------------------------------------------------------------------


def test_merge_joins_the_mid_summaries_of_each_task(store: MemoryStore) -> None:
    t = [store.put(f"summary {i} of t.", kind="summary", task="t", tier="mid") for i in range(3)]
    lone = store.put("the only summary of u.", kind="summary", task="u", tier="mid")
    loose = [store.put(f"loose {i}.", kind="summary", tier="mid") for i in range(2)]
    fact = store.put("a mid fact of t", kind="fact", task="t", tier="mid")
    stale = store.put("a stale summary of t.", kind="summary", task="t", tier="mid")
    store.stale(stale)
    old_long = store.put("a long summary of t.", kind="summary", task="t", tier="long")

    report = compact_memory(store, summarizer=joined)

    (r,) = report.merge.replaced
    assert r.sources == tuple(t) and r.task == "t"
    m = store.get(r.created)
    assert m is not None and (m.tier, m.kind, m.sources) == ("mid", "summary", tuple(t))
    assert m.text == "summary 0 of t. | summary 1 of t. | summary 2 of t."
    for i in (lone, *loose, fact, old_long):
        x = store.get(i)
        assert x is not None and x.tier != "archive"
    x = store.get(stale)
    assert x is not None and (x.status, x.tier) == ("stale", "mid")


# -- failures and concurrency ------------------------------------------------------------


def test_a_summarizer_that_raises_leaves_its_group_untouched(store: MemoryStore) -> None:
    bad = traces(store, "bad", 2)
    good = traces(store, "good", 2)
    store.finish_task("bad")
    store.finish_task("good")

    def flaky(memories: Sequence[Memory], purpose: str) -> str:
        if memories[0].task == "bad":
            raise RuntimeError("model overloaded")
        return joined(memories, purpose)

    report = compact_memory(store, summarizer=flaky)

    assert report.fold.moved == tuple(good)
    (skipped,) = report.fold.skipped
    assert skipped == Skipped(
        tuple(bad), "bad", None, "the summarizer raised RuntimeError: model overloaded"
    )
    assert all(m is not None and m.tier == "working" for m in store.get_many(bad))
    assert str(report.fold) == "fold: 1 created, 2 moved, 1 group skipped"
    # The next run, with a summarizer that works, picks the group up.
    assert compact_memory(store).fold.moved == tuple(bad)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (None, "the summarizer returned NoneType, not str"),
        ("  \n", "the summarizer returned no text"),
        (b"bytes", "the summarizer returned bytes, not str"),
    ],
)
def test_a_summarizer_answer_that_is_no_text_skips_the_group(
    store: MemoryStore, answer: object, reason: str
) -> None:
    ids = traces(store, "t", 2)
    store.finish_task("t")
    lsn = store.lsn
    report = compact_memory(store, summarizer=lambda ms, p: answer)  # type: ignore[arg-type,return-value]
    assert report.fold.skipped == (Skipped(tuple(ids), "t", None, reason),)
    assert store.lsn == lsn


def test_the_summarizer_gets_each_group_oldest_first_with_its_purpose(
    store: MemoryStore, clock: ControllableClock
) -> None:
    calls: list[tuple[str, tuple[str, ...]]] = []

    def spy(memories: Sequence[Memory], purpose: str) -> str:
        assert all(isinstance(m, Memory) for m in memories)
        calls.append((purpose, tuple(m.id for m in memories)))
        return "summary."

    ids = traces(store, "t", 3)
    store.finish_task("t")
    old = store.put("older summary of t", kind="summary", task="t", tier="mid")
    (fold,) = compact_memory(store, summarizer=spy).fold.created
    assert calls[0] == ("fold", tuple(ids))
    assert calls[1] == ("merge", (old, fold))
    clock.advance(8 * DAY)
    compact_memory(store, summarizer=spy)
    assert calls[2][0] == "consolidate" and len(calls) == 3


def test_a_group_changed_during_compaction_is_skipped_and_taken_next_time(
    store: MemoryStore,
) -> None:
    a = traces(store, "a", 3)
    b = traces(store, "b", 3)
    store.finish_task("a")
    store.finish_task("b")

    def meddling(memories: Sequence[Memory], purpose: str) -> str:
        # Another agent rewrites a trace of task a while its summary is being written.
        if memories[0].task == "a" and store.get(a[1]).text == "step 1 of a.":  # type: ignore[union-attr]
            store.put("step 1 of a, corrected.", kind="trace", task="a", id=a[1])
        return joined(memories, purpose)

    report = compact_memory(store, summarizer=meddling)

    (skipped,) = report.fold.skipped
    assert skipped.sources == tuple(a) and skipped.task == "a"
    assert skipped.reason.startswith("changed during compaction:")
    assert a[1] in skipped.reason
    assert report.fold.moved == tuple(b)  # its commit-mate was written on its own
    assert [m.tier for m in store.get_many(a) if m] == ["working"] * 3
    again = compact_memory(store, summarizer=joined)
    (created,) = again.fold.created
    m = store.get(created)
    assert m is not None and "step 1 of a, corrected." in m.text


def test_compaction_beside_a_writer_thread(tmp_path: Path) -> None:
    """A writer rewrites, adds and stales traces while compaction runs: nothing is lost, and
    every summary was made from its sources exactly as they were when it was written."""
    rng = random.Random(5)
    with memcommit.open(tmp_path / "m.db", durability="none") as store:
        tasks = [f"t{i}" for i in range(12)]
        ids = {t: traces(store, t, 6) for t in tasks}
        for t in tasks:
            store.finish_task(t)
        final: dict[str, str] = {i: store.get(i).text for v in ids.values() for i in v}  # type: ignore[union-attr]
        stop = threading.Event()

        def writer() -> None:
            for n in range(400):
                t = rng.choice(tasks)
                i = rng.choice(ids[t])
                if n % 5 == 4:
                    new = store.put(f"late {n} of {t}.", kind="trace", task=t)
                    ids[t].append(new)
                    final[new] = f"late {n} of {t}."
                elif n % 7 == 6:
                    store.stale(i)
                    store.restore(i)
                else:
                    final[i] = f"rewrite {n} of {t}."
                    store.put(final[i], kind="trace", task=t, id=i)
                if n % 8 == 0:
                    time.sleep(0.001)
            stop.set()

        def slow(memories: Sequence[Memory], purpose: str) -> str:
            time.sleep(0.0005)  # let the writer in between the read and the commit
            return joined(memories, purpose)

        thread = threading.Thread(target=writer)
        thread.start()
        reports: list[MemoryCompactionReport] = []
        while not stop.is_set():
            reports.append(compact_memory(store, summarizer=slow))
        thread.join()
        for _ in range(5):
            reports.append(compact_memory(store, summarizer=joined))
            if not reports[-1].wrote:
                break
        assert not reports[-1].wrote

        # Nothing lost: every trace is there with the writer's last text.
        assert {m.id: m.text for m in store.get_many(list(final)) if m} == final
        # Everything folded in the end: one mid summary per task, no working trace left.
        assert store.find(tier="working") == []
        for t in tasks:
            (summary,) = store.find(tier="mid", task=t)
            traced = {m.id for m in lineage(store, summary.id) if m.kind == "trace"}
            assert traced == set(ids[t])
        # Each summary's text is its sources' texts as of the summary's own record.
        made = [r for rep in reports for s in rep.steps for r in s.replaced]
        assert made
        for r in made:
            lsn = store.history(r.created)[0].lsn
            texts = [text_as_of(store, i, lsn) for i in r.sources]
            assert store.get(r.created).text == " | ".join(texts)  # type: ignore[union-attr]
        assert live_reach(store) >= {m.id for m in store.find(tier="archive", status=None)}


# -- input checks ------------------------------------------------------------------------


def test_policy_accepts_timedelta_or_seconds_and_checks_them() -> None:
    assert TierPolicy() == TierPolicy(timedelta(days=7), timedelta(days=1))
    p = TierPolicy(cold_after=60, window=0.5)
    assert p.cold_after == timedelta(seconds=60) and p.window == timedelta(milliseconds=500)
    assert TierPolicy(cold_after=0).cold_after == timedelta(0)
    with pytest.raises(TypeError, match="cold_after"):
        TierPolicy(cold_after="7d")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="window"):
        TierPolicy(window=True)
    with pytest.raises(ValueError, match="cold_after"):
        TierPolicy(cold_after=-1)
    with pytest.raises(ValueError, match="window"):
        TierPolicy(window=timedelta(0))
    with pytest.raises(ValueError, match="cold_after"):
        TierPolicy(cold_after=float("inf"))
    with pytest.raises(AttributeError):
        p.window = timedelta(1)  # type: ignore[misc]


def test_compact_memory_checks_its_arguments(store: MemoryStore) -> None:
    with pytest.raises(TypeError, match="store"):
        compact_memory("memory.db")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="policy"):
        compact_memory(store, policy={"cold_after": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="summarizer"):
        compact_memory(store, summarizer="gpt")  # type: ignore[arg-type]
    assert store.lsn == 0


# -- context -----------------------------------------------------------------------------


def test_context_reads_working_then_mid_then_long(store: MemoryStore) -> None:
    long_ = store.put("User prefers dark mode.", kind="preference", tier="long")
    mid = store.put("Summary of t.", kind="summary", task="t", tier="mid")
    w1 = store.put("Now editing settings.py.", task="t")
    w2 = store.put("Tests pass.", kind="trace", task="t")
    other = store.put("Another task's note.", task="u")
    archived = store.put("archived", task="t")
    store.move(archived, "archive")
    stale = store.put("stale", task="t")
    store.stale(stale)

    assert [m.id for m in context(store)] == [w1, w2, other, mid, long_]
    assert [m.id for m in context(store, task="t")] == [w1, w2, mid, long_]
    assert [m.id for m in context(store, task="u")] == [other, long_]
    assert context(store, budget_chars=0) == []


def test_context_spends_the_budget_on_the_newest_first(store: MemoryStore) -> None:
    old = store.put("x" * 50)
    big = store.put("y" * 80)
    new = store.put("z" * 30)
    summary = store.put("s" * 10, tier="mid")
    # 30 (new) fits, 80 (big) does not fit in the 70 left, 50 (old) does; then 20 for mid.
    assert [m.id for m in context(store, budget_chars=100)] == [old, new, summary]
    assert [m.id for m in context(store, budget_chars=30)] == [new]
    assert sum(len(m.text) for m in context(store, budget_chars=95)) <= 95
    assert [m.id for m in context(store, budget_chars=10_000)] == [old, big, new, summary]


def test_context_checks_its_arguments(store: MemoryStore) -> None:
    with pytest.raises(TypeError, match="budget_chars"):
        context(store, budget_chars=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="budget_chars"):
        context(store, budget_chars=-1)
    with pytest.raises(TypeError, match="task"):
        context(store, task=3)  # type: ignore[arg-type]


# -- lineage -----------------------------------------------------------------------------


def test_lineage_and_descendants_cross_every_step(
    store: MemoryStore, clock: ControllableClock
) -> None:
    first = traces(store, "t", 2)
    store.finish_task("t")
    (s1,) = compact_memory(store).fold.created
    late = traces(store, "t", 1, prefix="late")
    report = compact_memory(store)
    (s2,) = report.fold.created
    (merged,) = report.merge.created
    clock.advance(8 * DAY)
    (long_,) = compact_memory(store).consolidate.created

    assert [m.id for m in lineage(store, long_)] == [merged, s1, s2, *first, *late]
    assert all(m.tier == "archive" for m in lineage(store, long_))
    assert [m.id for m in descendants(store, first[0])] == [s1, merged, long_]
    assert [m.id for m in descendants(store, late[0])] == [s2, merged, long_]
    assert lineage(store, first[0]) == [] and descendants(store, long_) == []


def test_lineage_survives_cycles_and_purged_sources(tmp_path: Path) -> None:
    """A source retention purged is left out of the lineage (no Purged raised), and a cycle
    of sources ends."""
    clock = ControllableClock()
    with memcommit.open(tmp_path / "memory.db", clock=clock) as store:
        store.put("ran the job", id="t", kind="trace")
        store.put("a", id="a", sources=("t",))
        store.put("b", id="b", sources=("a",))
        store.put("a again", id="a", sources=("b", "t"))  # a cycle: a <- b <- a
        clock.advance(8 * DAY)
        storage.compact(store, retention=storage.KindsAfter({"trace": 7 * DAY // 1000}))
        assert store.is_purged("t") and store.get("a") is not None
        assert [m.id for m in lineage(store, "a")] == ["b"]
        assert [m.id for m in descendants(store, "a")] == ["b"]
        with pytest.raises(ValueError, match="no memory 'zzz'"):
            lineage(store, "zzz")
        with pytest.raises(ValueError, match="no memory 'zzz'"):
            descendants(store, "zzz")
        with pytest.raises(TypeError, match="id"):
            lineage(store, 3)  # type: ignore[arg-type]


def test_compaction_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with memcommit.open(path, durability="none") as store:
        ids = traces(store, "t", 3)
        store.finish_task("t")
        (created,) = compact_memory(store).created
    with memcommit.open(path) as store:
        assert [m.id for m in lineage(store, created)] == ids
        assert not compact_memory(store).wrote


# -- the default summarizer --------------------------------------------------------------

STEPS = [
    "User asked to fix the failing CI job on the payments service.",
    "Opened .ci/run and read the logs. The job fails in test_refund_rounding.",
    "Ran pytest tests/test_refunds.py locally: 1 failed, 41 passed.",
    "The failure: refund of 10.005 EUR rounds to 10.00 instead of 10.01.",
    "Read payments/money.py. round() uses banker's rounding.",
    "Changed money.round_eur to use Decimal with ROUND_HALF_UP.",
    "Ran pytest tests/test_refunds.py again: 42 passed.",
    "Pushed branch fix-refund-rounding and opened PR 318.",
    "CI passed on PR 318. Task done: refunds now round half up.",
]


def sentences_of(texts: Sequence[str]) -> set[str]:
    out: set[str] = set()
    for t in texts:
        for s in t.replace(". ", ".\n").split("\n"):
            out.add(s.strip())
    return out


def test_default_summary_keeps_whole_sentences_within_budget() -> None:
    summary = ExtractiveSummarizer(max_chars=300).summarize(STEPS)
    assert summary == (
        "User asked to fix the failing CI job on the payments service. "
        "Ran pytest tests/test_refunds.py locally: 1 failed, 41 passed. "
        "The failure: refund of 10.005 EUR rounds to 10.00 instead of 10.01. "
        "Pushed branch fix-refund-rounding and opened PR 318. "
        "Task done: refunds now round half up."
    )
    for budget in (40, 100, 200, 600, 5000):
        text = ExtractiveSummarizer(max_chars=budget).summarize(STEPS)
        assert 0 < len(text) <= budget
        kept = sentences_of([text])
        assert kept <= sentences_of(STEPS)  # whole sentences, nothing invented
    # The whole text fits in a large budget: every sentence is kept, in order.
    assert ExtractiveSummarizer(max_chars=5000).summarize(STEPS) == " ".join(STEPS)


def test_default_summary_is_deterministic_and_drops_repeats(store: MemoryStore) -> None:
    texts = ["Retried the upload.", "Retried the upload.", "retried the upload!", "Done."]
    assert ExtractiveSummarizer().summarize(texts) == "retried the upload! Done."
    ids = [store.put(t, kind="trace") for t in STEPS]
    memories = store.get_many(ids)
    a = default_summarizer(memories, "fold")  # type: ignore[arg-type]
    assert a == default_summarizer(memories, "merge") == ExtractiveSummarizer()(memories, "x")  # type: ignore[arg-type]
    assert a == ExtractiveSummarizer(600).summarize(STEPS)


def test_default_summary_prefers_informative_sentences() -> None:
    texts = [
        "Started the task.",
        "ok.",
        "The invoice 4471 for ACME was overcharged by 120 EUR because of a duplicated line.",
        "ok.",
        "Refunded 120 EUR to ACME on invoice 4471.",
        "Closed the ticket.",
    ]
    summary = ExtractiveSummarizer(max_chars=140).summarize(texts)
    assert "invoice 4471" in summary and "ok." not in summary


def test_default_summary_edge_cases() -> None:
    s = ExtractiveSummarizer(max_chars=40)
    assert s.summarize([]) == ""
    assert s.summarize(["", "  \n "]) == "(2 memories without text.)"
    assert s.summarize(["Version v1.2 of money.py works"]) == "Version v1.2 of money.py works."
    long_sentence = "word " * 30
    cut = s.summarize([long_sentence])
    assert cut.endswith("…") and len(cut) <= 40 and cut.startswith("word word")
    assert s.summarize(["First line\nsecond line"]) == "First line. second line."
    with pytest.raises(TypeError, match="max_chars"):
        ExtractiveSummarizer(max_chars="600")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_chars"):
        ExtractiveSummarizer(max_chars=5)


# -- the property: nothing is ever lost --------------------------------------------------


class Compaction(RuleBasedStateMachine):
    """Random traces, mid memories, finished tasks, stale/restore, time and compaction runs.

    After every step: every memory ever written is still there with its text, and every
    archived memory is reachable by lineage from one that is not archived. After every
    compaction: a second run at once writes nothing.
    """

    def __init__(self) -> None:
        super().__init__()
        self.clock = ControllableClock(START)
        self.store = memcommit.create_memory_store(clock=self.clock)
        self.texts: dict[str, str] = {}
        self.n = 0

    def teardown(self) -> None:
        self.store.close()

    def _put(self, **kw: Any) -> None:
        self.n += 1
        text = f"memory {self.n}. it says {self.n * 7 % 13}."
        self.texts[self.store.put(text, **kw)] = text

    @rule(task=st.sampled_from(["a", "b", "c"]))
    def trace(self, task: str) -> None:
        self._put(kind="trace", task=task)

    @rule(
        task=st.sampled_from([None, "a", "b"]),
        kind=st.sampled_from(["summary", "fact", "note"]),
    )
    def mid(self, task: str | None, kind: str) -> None:
        self._put(kind=kind, task=task, tier="mid")

    @rule(task=st.sampled_from(["a", "b", "c"]))
    def finish(self, task: str) -> None:
        self.store.finish_task(task)

    @rule(hours=st.integers(min_value=1, max_value=24 * 10))
    def advance(self, hours: int) -> None:
        self.clock.advance(hours * HOUR)

    @precondition(lambda self: bool(self.texts))
    @rule(data=st.data(), restore=st.booleans())
    def stale_or_restore(self, data: st.DataObject, restore: bool) -> None:
        i = data.draw(st.sampled_from(sorted(self.texts)))
        if restore:
            self.store.restore(i)
        else:
            self.store.stale(i)

    @rule(failing=st.sampled_from([None, "fold", "consolidate", "merge"]))
    def compact(self, failing: str | None) -> None:
        def summarizer(memories: Sequence[Memory], purpose: str) -> str:
            if purpose == failing:
                raise RuntimeError("down")
            return default_summarizer(memories, purpose)

        report = compact_memory(self.store, summarizer=summarizer)
        for r in report.created:
            m = self.store.get(r)
            assert m is not None
            self.texts[r] = m.text
        assert len(report.moved) == len(set(report.moved))
        if failing is None:
            assert report.skipped == ()
            lsn = self.store.lsn
            assert not compact_memory(self.store).wrote
            assert self.store.lsn == lsn

    @invariant()
    def nothing_is_lost(self) -> None:
        ids = list(self.texts)
        found = self.store.get_many(ids)
        assert [m.text if m else None for m in found] == list(self.texts.values())
        assert len(self.store) == len(ids)

    @invariant()
    def archived_memories_are_reachable(self) -> None:
        archived = {m.id for m in self.store.find(tier="archive", status=None)}
        assert archived <= live_reach(self.store)


Compaction.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCompaction = Compaction.TestCase


def test_replacement_and_report_values() -> None:
    r = Replacement("new", ("a", "b"), "t")
    report = MemoryCompactionReport()
    assert r.window is None and not report.wrote and report.steps[0].step == "fold"


def test_the_store_methods_are_the_module_functions() -> None:
    store = memcommit.open(":memory:")
    a = store.put("Checked the logs. Found the timeout.", kind="trace", task="t")
    b = store.put("Raised the timeout to 30 s. Tests pass.", kind="trace", task="t")
    store.finish_task("t")
    report = compact_memory(store)
    (summary,) = report.fold.created
    assert [m.id for m in store.context(task="t")] == [summary]
    assert {m.id for m in store.lineage(summary)} == {a, b}
    assert [m.id for m in store.descendants(a)] == [summary]


# -- policies beyond the calendar, and the summary's budget ------------------------------


def test_a_cold_after_beyond_the_calendar_makes_nothing_cold(
    store: MemoryStore, clock: ControllableClock
) -> None:
    """A cutoff before the earliest datetime is one no memory is older than: nothing
    consolidates, and the fold and merge steps run as usual."""
    older = store.put("An older summary of t.", kind="summary", task="t", tier="mid")
    note = store.put("A loose mid note.", tier="mid")
    ids = traces(store, "t", 2)
    store.finish_task("t")
    clock.advance(365 * DAY)
    beyond: tuple[timedelta | float, ...] = (timedelta.max, timedelta(days=999_999_999), 8e13)
    for n, cold_after in enumerate(beyond):
        lsn = store.lsn
        report = compact_memory(store, TierPolicy(cold_after=cold_after), joined)
        assert report.consolidate.replaced == () and report.consolidate.skipped == ()
        if n == 0:
            (fold,) = report.fold.replaced
            assert fold.sources == tuple(ids)
            (merge,) = report.merge.replaced
            assert merge.sources == (older, fold.created)
        else:
            assert not report.wrote and store.lsn == lsn
    m = store.get(note)
    assert m is not None and m.tier == "mid"
    # A cold_after the calendar holds still consolidates.
    clock.advance(1)
    assert len(compact_memory(store, TierPolicy(cold_after=0)).consolidate.created) == 2


@pytest.mark.parametrize("name", ["cold_after", "window"])
@pytest.mark.parametrize("seconds", [1e300, -1e300, 1e15, 2**70, -(2**70)])
def test_policy_durations_a_timedelta_cannot_hold_are_invalid_values(
    store: MemoryStore, name: str, seconds: float
) -> None:
    with pytest.raises(memcommit.InvalidValue, match=name):
        TierPolicy(**{name: seconds})
    assert store.lsn == 0


def test_a_window_reaching_before_the_calendar_starts_at_its_first_day() -> None:
    """A task-less memory from before 1970 in a window longer than the calendar reaches
    back: the window is reported as starting at the earliest datetime."""
    clock = ControllableClock(datetime(1960, 1, 1, tzinfo=timezone.utc))
    with memcommit.create_memory_store(clock=clock) as store:
        note = store.put("A note from 1960.", tier="mid")
        clock.set(START)
        report = compact_memory(store, TierPolicy(cold_after=0, window=timedelta.max), joined)
        (r,) = report.consolidate.replaced
        first = datetime.min.replace(tzinfo=timezone.utc)
        assert r.sources == (note,) and r.window == first
        m = store.get(r.created)
        assert m is not None and m.data is not None and m.data["window"] == first.isoformat()


def test_default_summary_keeps_every_sentence_when_they_fit() -> None:
    pair = ["Deploy failed.", "Deploy failed again."]
    assert ExtractiveSummarizer(35).summarize(pair) == "Deploy failed. Deploy failed again."
    bare = ["Deploy failed", "Deploy failed again"]  # a full stop is added to each
    assert ExtractiveSummarizer(35).summarize(bare) == "Deploy failed. Deploy failed again."
    full = " ".join(STEPS)
    assert ExtractiveSummarizer(len(full)).summarize(STEPS) == full
    assert len(ExtractiveSummarizer(len(full) - 1).summarize(STEPS)) < len(full)


_WORDS = ["deploy", "failed", "again", "the", "cache", "ok", "Retry", "v1.2"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5).map(tuple),
            st.booleans(),
        ),
        min_size=1,
        max_size=12,
        unique_by=lambda s: tuple(w.lower() for w in s[0]),
    ),
    st.integers(min_value=0, max_value=3),
)
def test_default_summary_keeps_all_exactly_when_all_fits(
    sentences: list[tuple[tuple[str, ...], bool]], spare: int
) -> None:
    texts = [" ".join(words) + ("." if stop else "") for words, stop in sentences]
    everything = " ".join(t if t.endswith(".") else t + "." for t in texts)
    budget = max(20, len(everything) + spare)
    assert ExtractiveSummarizer(budget).summarize(texts) == everything


def test_the_placeholder_for_memories_without_text_fits_max_chars() -> None:
    assert ExtractiveSummarizer(20).summarize(["...", "!!"]) == "(no text.)"
    assert ExtractiveSummarizer(23).summarize([""]) == "(no text.)"
    assert ExtractiveSummarizer(24).summarize([""]) == "(1 memory without text.)"
    assert ExtractiveSummarizer(26).summarize(["...", "!!"]) == "(2 memories without text.)"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(alphabet="ab .!?…\n", max_size=30), max_size=8),
    st.integers(min_value=20, max_value=60),
)
def test_default_summary_never_exceeds_max_chars(texts: list[str], max_chars: int) -> None:
    summary = ExtractiveSummarizer(max_chars).summarize(texts)
    assert len(summary) <= max_chars
    assert bool(summary) == bool(texts)
