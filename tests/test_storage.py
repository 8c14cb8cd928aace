"""Log compaction, retention and the compaction manifest (SPEC section 6, issue 3).

What is checked, and how:

* the report and the seed's example; ``progress``;
* what the folded log holds, read from the file's bytes (64-byte header, then records:
  magic u16, op u8, flags u8, salt u32, lsn u64, at i64, key_len u16, durable_gap u16,
  payload len u32, key, payload, crc32c u32): up to the horizon exactly the records replay
  needs, after it every record verbatim, seals never carried over, LSNs never renumbered,
  and a fresh seal at the end;
* retention (``ArchivedOlderThan``, ``KindsAfter``, custom policies, ``|``), purging only in
  ``compact`` and only memories with no record after the horizon;
* the manifest, ``is_purged``, ``Purged`` and ``Rejected`` for purged ids, ``verify`` and
  references to purged memories;
* crash safety: a child process killed (SIGKILL) at each named protocol step through
  ``MEMCOMMIT_FAILPOINT``, and at random moments while compacting a log of 200k records;
* a read-only store resyncing after the writer compacted;
* property tests (hypothesis) over random histories and horizons;
* bad input, and the store staying usable (puts, seals, AutoSeal, roles, reopen).
"""

from __future__ import annotations

import contextlib
import copy
import faulthandler
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import logbytes
import memcommit
from forging import put_unchecked
from logbytes import OP_ENTITY, OP_MOVE, OP_PUT, OP_SEAL, OP_STATUS, OP_TASK, Log, Rec, parse_log
from memcommit import (
    AutoSeal,
    ForgedReference,
    NotSupported,
    Purged,
    Rejected,
    check_seal,
    seal,
    verify,
)
from memcommit.storage import (
    AnyOf,
    ArchivedOlderThan,
    CompactionReport,
    KindsAfter,
    RetentionPolicy,
    compact,
)
from memcommit.testing import CLOCK_START as START
from memcommit.testing import ControllableClock

DAY_MS = 86_400_000
DAY_S = 86_400
TIERS = ("working", "mid", "long", "archive")
LONG_TTL_MS = 10**12  # leases that never expire within a test


def read_log(path: str | Path) -> Log:
    """Parse a log file: the header and every whole record (stops at a zero-filled tail)."""
    data = Path(path).read_bytes()
    log = parse_log(data, str(path))
    tail = data[log.end :]
    assert tail.count(0) == len(tail), f"{path}: bytes after the last record are not zero"
    return log


def expected_kept(old: Log, horizon: int, purged: set[str]) -> list[bytes]:
    """The records a compaction at `horizon` keeps, computed from the old log's bytes.

    Up to the horizon: a memory's last put, and its last status and last move when they come
    after that put; an entity's newest record unless it is a removal; a task's first record.
    After the horizon: every record but seals. Nothing of a purged memory.
    """
    last_put: dict[bytes, int] = {}
    last_status: dict[bytes, int] = {}
    last_move: dict[bytes, int] = {}
    entity_last: dict[bytes, Rec] = {}
    first_task: dict[bytes, int] = {}
    for r in old.recs:
        if r.lsn > horizon:
            continue
        if r.op == OP_PUT:
            last_put[r.key] = r.lsn
        elif r.op == OP_STATUS:
            last_status[r.key] = r.lsn
        elif r.op == OP_MOVE:
            last_move[r.key] = r.lsn
        elif r.op == OP_ENTITY:
            entity_last[r.key] = r
        elif r.op == OP_TASK:
            first_task.setdefault(r.key, r.lsn)
    keep: set[int] = set(first_task.values())
    for key, put in last_put.items():
        if key.decode() in purged:
            continue
        keep.add(put)
        for later in (last_status.get(key, 0), last_move.get(key, 0)):
            if later > put:
                keep.add(later)
    keep.update(r.lsn for r in entity_last.values() if r.payload[:1] == b"\x01")
    return [
        r.data
        for r in old.recs
        if (r.lsn <= horizon and r.lsn in keep) or (r.lsn > horizon and r.op != OP_SEAL)
    ]


def check_new_log(old: Log, new: Log, horizon: int, purged: set[str], head: int) -> None:
    """The new generation's file: same store, generation + 1, the kept records, a fresh seal."""
    assert new.store_id == old.store_id
    assert new.generation == old.generation + 1
    assert new.dense_from == head
    assert [r.data for r in new.recs[:-1]] == expected_kept(old, horizon, purged)
    last = new.recs[-1]
    assert last.op == OP_SEAL and last.lsn == head + 1
    lsns = new.lsns()
    assert lsns == sorted(set(lsns)), "LSNs must stay in order and never repeat"


# -- the state a store replays to --------------------------------------------------------


def fields(m: Any) -> tuple[Any, ...]:
    return (
        m.id,
        m.kind,
        m.text,
        m.data,
        m.task,
        m.tier,
        m.status,
        m.tags,
        m.sources,
        m.created_at,
        m.updated_at,
        m.lsn,
    )


def state_of(
    store: memcommit.MemoryStore,
    tasks: tuple[str, ...] = (),
    locks: tuple[str, ...] = (),
    gets: bool = True,
) -> dict[str, Any]:
    """Everything a user can read: every memory's fields (find and get), len, tasks, roles."""
    memories = [fields(m) for m in store.find(status=None)]
    out: dict[str, Any] = {
        "memories": memories,
        "len": len(store),
        "tasks": {t: store.is_task_finished(t) for t in tasks},
        "locks": {n: store.locks.get(n) for n in locks},
        "state": {ns: store.state.list(ns) for ns in store.state.list_namespaces()},
    }
    if gets:
        got = {}
        for m in memories:
            g = store.get(m[0])
            assert g is not None, m[0]
            got[m[0]] = fields(g)
        out["get"] = got
    return out


def minus(state: dict[str, Any], purged: set[str]) -> dict[str, Any]:
    """`state` without the purged memories."""
    out = dict(state)
    out["memories"] = [m for m in state["memories"] if m[0] not in purged]
    out["len"] = state["len"] - sum(1 for m in state["memories"] if m[0] in purged)
    if "get" in state:
        out["get"] = {k: v for k, v in state["get"].items() if k not in purged}
    return out


def leftovers(path: Path) -> list[str]:
    """Files beside the log other than the log, its lock, its manifest and its index file."""
    allowed = {path.name, path.name + ".lock", path.name + ".manifest", path.name + ".index"}
    return sorted(p.name for p in path.parent.iterdir() if p.name not in allowed)


def manifest_on_disk(path: Path) -> list[dict[str, Any]]:
    m = Path(str(path) + ".manifest")
    if not m.exists():
        return []
    return json.loads(m.read_text())["entries"]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


# -- the API and the report ----------------------------------------------------------------


def test_seed_example_runs_verbatim(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = memcommit.open(path)
    a = store.put("old note")
    store.move(a, "archive")
    store.put("fresh note")
    store.stale(a)
    from memcommit.storage import ArchivedOlderThan, compact

    report = compact(store, retention=ArchivedOlderThan(seconds=30 * 86400))
    print(report.before, "->", report.after, "records; purged", len(report.purged))
    assert capsys.readouterr().out == "4 -> 5 records; purged 0\n"  # all kept, and a seal
    assert isinstance(report, CompactionReport)
    assert store.get(a) is not None  # moved a moment ago: not 30 days old
    store.close()


def test_report_fields(path: Path, clock: ControllableClock) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        for i in range(10):
            store.put(f"note {i}", id=f"n{i}")
        for i in range(10):
            store.put(f"note {i} v2", id=f"n{i}")  # folds away the first put of each
        store.move("n0", "archive")
        seal(store)
        clock.advance(31 * DAY_MS)
        store.flush()
        old = read_log(path)
        head = store.lsn
        report = compact(store, retention=ArchivedOlderThan(seconds=30 * DAY_S))
        assert report.before == len(old.recs) == 22
        assert report.bytes_before == old.end
        assert report.horizon == head == 22
        assert report.purged == ("n0",)
        assert report.generation == 1 == store.generation
        assert report.seconds >= 0
        new = read_log(path)
        assert report.after == len(new.recs) == 9 + 1  # n1..n9's second puts and the seal
        assert report.bytes_after == new.end
        assert report.bytes_after < report.bytes_before
        check_new_log(old, new, head, {"n0"}, head)


def test_progress_reports_bytes_read_of_total(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        for i in range(2000):
            store.put("x" * 200, id=f"m{i:04d}")
            store.put("y" * 200, id=f"m{i:04d}")
        calls: list[tuple[int, int]] = []
        report = compact(store, progress=lambda done, total: calls.append((done, total)))
    assert calls, "progress was never called"
    assert all(total == report.bytes_before for _, total in calls)
    assert all(0 <= done <= total for done, total in calls)
    dones = [d for d, _ in calls]
    assert dones == sorted(dones)
    assert calls[-1] == (report.bytes_before, report.bytes_before)


def test_compact_holds_nothing_back_when_nothing_given(path: Path) -> None:
    """compact(store) with no retention purges nothing and keeps every memory."""
    with memcommit.open(path, durability="none") as store:
        ids = [store.put(f"n{i}", tier=TIERS[i % 4]) for i in range(20)]
        before = state_of(store)
        report = compact(store)
        assert report.purged == ()
        assert state_of(store) == before
        assert all(store.get(i) is not None for i in ids)


# -- what the folded log holds -------------------------------------------------------------


def _folding_scenario(store: memcommit.MemoryStore) -> None:
    with store.commit() as c:  # LSNs 1, 2: one commit of two records
        c.put("a1", id="a")
        c.put("b1", id="b", task="t")
    store.stale("a")  # 3  before a's last put: dropped
    store.move("a", "mid")  # 4  before a's last put: dropped
    store.put("a2", id="a")  # 5  a's last put (tier mid, status stale carried over)
    store.restore("a")  # 6  after it: kept
    store.move("b", "long")  # 7  superseded by 8
    store.move("b", "archive")  # 8  kept
    store.finish_task("t")  # 9  kept: a task keeps one record
    store.finish_task("t")  # 10 dropped
    seal(store)  # 11 seals never carried over
    store.state.put(("ns",), "k", {"v": 1})  # 12 counter, 13 entity
    store.state.put(("ns",), "k", {"v": 2})  # 14 counter, 15 entity: newest kept
    store.state.put(("ns",), "gone", 1)  # 16 counter (kept), 17 entity
    store.state.delete(("ns",), "gone")  # 18 removal: the entity is gone, no record kept
    store.put("c1", id="c")  # 19
    seal(store)  # 20
    store.stale("b")  # 21 after the horizon: verbatim
    store.put("c2", id="c")  # 22 after the horizon: verbatim
    seal(store)  # 23 after the horizon, but a seal: dropped


def test_fold_keeps_exactly_what_replay_needs(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        _folding_scenario(store)
        assert store.lsn == 23
        store.flush()
        old = read_log(path)
        assert old.lsns() == list(range(1, 24))
        before = state_of(store, tasks=("t",))
        report = compact(store, horizon=20)
        assert report.horizon == 20
        assert state_of(store, tasks=("t",)) == before
        assert [r.lsn for r in store.history("a")] == [5, 6]
        assert [r.lsn for r in store.history("b")] == [2, 8, 21]
        assert [r.lsn for r in store.history("c")] == [19, 22]
    new = read_log(path)
    assert new.lsns() == [2, 5, 6, 8, 9, 14, 15, 16, 19, 21, 22, 24]
    by_lsn = {r.lsn: r.data for r in old.recs}
    assert [r.data for r in new.recs[:-1]] == [by_lsn[n] for n in new.lsns()[:-1]]
    check_new_log(old, new, 20, set(), 23)
    with memcommit.open(path) as store:
        assert state_of(store, tasks=("t",)) == before
        a = store.get("a")
        assert a is not None and (a.text, a.tier, a.status) == ("a2", "mid", "active")
        assert store.state.get(("ns",), "gone") is None
        assert store.state.get(("ns",), "k").value == {"v": 2}  # type: ignore[union-attr]
        assert verify(store).ok


def test_records_after_the_horizon_are_byte_identical(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        for i in range(30):
            store.put(f"n{i % 7} rev {i}", id=f"n{i % 7}", data={"i": i}, tags=("x",))
            if i % 4 == 0:
                store.move(f"n{i % 7}", TIERS[i % 4])
            if i % 10 == 9:
                seal(store)
        horizon = 17
        store.flush()
        old = read_log(path)
        compact(store, horizon=horizon)
    new = read_log(path)
    after_old = [r.data for r in old.recs if r.lsn > horizon and r.op != OP_SEAL]
    after_new = [r.data for r in new.recs if r.lsn > horizon and r.op != OP_SEAL]
    assert after_new == after_old
    assert len(after_old) > 5


def test_seals_are_not_carried_over_and_a_fresh_seal_ends_the_new_log(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        for i in range(12):
            store.put(f"n{i}")
            if i % 4 == 3:
                seal(store, key=b"k" * 32 if i == 7 else None)
        old_seals = store.seals()
        assert len(old_seals) == 3
        head = store.lsn
        compact(store)
        got = store.seals()
        assert len(got) == 1
        s = got[0]
        assert (s.record_lsn, s.generation, s.keyed) == (head + 1, 1, False)
        assert s.lsn == 14  # the newest record it holds (the last put), not a seal
        assert check_seal(store).seal == s
        r = verify(store)
        assert (r.seals_checked, r.records_checked) == (1, 13)
    new = read_log(path)
    assert [r.op for r in new.recs].count(OP_SEAL) == 1
    assert new.recs[-1].op == OP_SEAL


def test_role_entities_survive_compaction(path: Path, clock: ControllableClock) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        lease = store.locks.acquire("job", "replica-a", 60_000)
        assert lease is not None
        old = store.locks.acquire("old", "replica-a", 60_000)
        assert old is not None and store.locks.release("old", token=old.token)
        store.state.put(("agent", "1"), "plan", {"steps": [1, 2]})
        store.state.put(("agent", "1"), "plan", {"steps": [1, 2, 3]})
        store.idempotency.reserve("req-1", owner="w", ttl_ms=60_000)
        reserved = store.idempotency.get("req-1")
        assert reserved is not None
        before = state_of(store, locks=("job", "old"))
        compact(store)
        assert state_of(store, locks=("job", "old")) == before
        assert store.locks.get("job") == lease
        assert store.locks.acquire("job", "replica-b", 1_000) is None  # still held by a
        again = store.locks.acquire("old", "replica-b", 1_000)
        assert again is not None and again.token > old.token  # token counter survived
        assert store.idempotency.get("req-1") == reserved
    with memcommit.open(path, clock=clock) as store:
        assert store.locks.get("job") == lease
        assert store.state.get(("agent", "1"), "plan").value == {"steps": [1, 2, 3]}  # type: ignore[union-attr]
        assert store.idempotency.get("req-1") == reserved


# -- retention -------------------------------------------------------------------------------


def test_archived_older_than_counts_from_the_last_move(
    path: Path, clock: ControllableClock
) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("created archived", id="born", tier="archive")  # t0
        store.put("moved at t0", id="early")
        store.move("early", "archive")  # t0
        store.put("moved later", id="late")  # t0
        clock.advance(20 * DAY_MS)
        store.move("late", "archive")  # t0 + 20d
        store.put("old but working", id="working")  # t0 + 20d, never archived
        store.put("stale after its move", id="stale")
        store.move("stale", "archive")  # t0 + 20d
        clock.advance(5 * DAY_MS)
        store.stale("stale")  # t0 + 25d: a status change is not a move
        clock.advance(5 * DAY_MS)  # now t0 + 30d
        policy = ArchivedOlderThan(seconds=10 * DAY_S)
        assert compact(store, retention=policy).purged == ("born", "early", "late", "stale")
        assert store.get("working") is not None


def test_archived_older_than_selects_is_the_same_rule_in_python(
    path: Path, clock: ControllableClock
) -> None:
    """ArchivedOlderThan.selects (documented as the Rust rule in Python) agrees with compact."""
    policy = ArchivedOlderThan(seconds=30 * DAY_S)
    kinds = KindsAfter({"trace": 30 * DAY_S})
    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("a", id="a", kind="trace")
        store.move("a", "archive")
        clock.advance(40 * DAY_MS)
        store.stale("a")  # a status change 1 day before compaction: not a move
        clock.advance(DAY_MS)
        m = store.get("a")
        assert m is not None
        assert kinds.selects(m, clock.now()) is True
        assert policy.selects(m, clock.now()) is True, (
            "ArchivedOlderThan.selects counts from updated_at (the stale a day ago), not from "
            "the last move 41 days ago as compact does"
        )
        assert compact(store, retention=policy).purged == ("a",)


def test_archived_older_than_boundary(path: Path, clock: ControllableClock) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("a", id="a", tier="archive")
        clock.advance(DAY_MS - 1)
        assert compact(store, retention=ArchivedOlderThan(seconds=DAY_S)).purged == ()
        clock.advance(1)  # exactly one day old: that old
        assert compact(store, retention=ArchivedOlderThan(seconds=DAY_S)).purged == ("a",)


def test_archived_older_than_takes_a_timedelta(path: Path, clock: ControllableClock) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("a", id="a", tier="archive")
        clock.advance(3 * DAY_MS)
        policy = ArchivedOlderThan(seconds=timedelta(days=2))  # type: ignore[arg-type]
        assert policy.seconds == 2 * DAY_S
        assert compact(store, retention=policy).purged == ("a",)


@pytest.mark.parametrize("age", [1e13, 1e20, 1e300 * DAY_S / 1e10, 1.7e308])
def test_an_age_longer_than_the_calendar_purges_nothing(
    path: Path, clock: ControllableClock, age: float
) -> None:
    """Nothing is that old: the same answer as any long age, in Rust and in Python."""
    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("t", id="old-trace", kind="trace", tier="archive")
        clock.advance(400 * DAY_MS)
        policies = [ArchivedOlderThan(seconds=age), KindsAfter({"trace": age})]
        m = store.get("old-trace")
        assert m is not None
        for policy in policies:
            assert policy.selects(m, clock.now()) is False
            assert compact(store, retention=policy, dry_run=True).purged == ()
            assert compact(store, retention=policy).purged == ()
        assert store.get("old-trace") is not None


def test_kinds_after_counts_from_creation(path: Path, clock: ControllableClock) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("t", id="trace-old", kind="trace")
        store.put("e", id="episode-old", kind="episode")
        store.put("f", id="fact-old", kind="fact")
        clock.advance(6 * DAY_MS)
        store.put("t", id="trace-new", kind="trace")
        store.put("t again", id="trace-old", kind="trace")  # replaced: creation unchanged
        store.move("episode-old", "long")
        clock.advance(DAY_MS)  # trace-old 7 days old, trace-new 1 day
        policy = KindsAfter({"trace": 7 * DAY_S, "episode": 30 * DAY_S})
        assert compact(store, retention=policy).purged == ("trace-old",)
        clock.advance(23 * DAY_MS)  # episode-old 30 days old, trace-new 24
        assert sorted(compact(store, retention=policy).purged) == ["episode-old", "trace-new"]
        assert [m.id for m in store.find(status=None)] == ["fact-old"]


class TaggedForPurge(RetentionPolicy):
    """A custom policy: memories tagged "purge"; remembers what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, datetime]] = []

    def selects(self, memory: Any, now: datetime) -> bool:
        self.calls.append((memory.id, now))
        return "purge" in memory.tags


def test_custom_policy_gets_memories_and_the_store_clock(
    path: Path, clock: ControllableClock
) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("keep", id="keep")
        store.put("drop", id="drop", tags=("purge",))
        store.put("stale drop", id="stale-drop", tags=("purge", "x"))
        store.stale("stale-drop")
        clock.advance(12_345)
        policy = TaggedForPurge()
        report = compact(store, retention=policy)
        assert sorted(report.purged) == ["drop", "stale-drop"]
        assert policy.calls, "the custom policy was never asked"
        assert {now for _, now in policy.calls} == {clock.now()}
        assert {"keep", "drop", "stale-drop"} <= {i for i, _ in policy.calls}
        assert [m.id for m in store.find(status=None)] == ["keep"]


def test_a_memory_rewritten_while_a_custom_policy_runs_is_kept(
    path: Path, clock: ControllableClock
) -> None:
    # The policy saw X archived; while it ran, X came back and was rewritten. Retention purges
    # only what the policy names as it stands: X, written after what it judged, is kept.
    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("important", id="X", tier="archive")
        store.put("old", id="Y", tier="archive")

        class RewritesWhileJudging(RetentionPolicy):
            def selects(self, memory: Any, now: datetime) -> bool:
                if memory.id == "X":
                    store.move("X", "working")
                    store.put("X re-edited", id="X")
                return memory.tier == "archive"

        report = compact(store, retention=RewritesWhileJudging())
        assert report.purged == ("Y",)
        assert store.get("X").text == "X re-edited"
    with memcommit.open(path) as store:
        assert store.get("X").text == "X re-edited" and store.is_purged("Y")


def test_a_sealed_log_whose_records_changed_is_not_compacted(path: Path) -> None:
    # Compaction moves the old seals to the manifest and seals the new log afresh: were it to
    # compact a changed record, verify would pass on the result. It refuses, as verify does.
    with memcommit.open(path) as store:
        store.put("balance is 200 EUR", id="m1")
        store.put("another", id="m2")
        memcommit.seal(store)
    log = logbytes.read_log(path)
    rec = log.by_lsn(1)
    rec.replace(b"200 EUR", b"900 EUR")
    rec.fix_crc()
    logbytes.write_log(path, log)
    before = path.read_bytes()
    with memcommit.open(path) as store:
        assert store.get("m1").text == "balance is 900 EUR"  # the forgery is well-formed
        for dry_run in (True, False):
            with pytest.raises(memcommit.SealMismatch):
                compact(store, dry_run=dry_run)
        assert store.generation == 0 and store.manifest() == []
    assert path.read_bytes() == before
    assert not Path(str(path) + ".manifest").exists()


def test_another_stores_manifest_is_refused(tmp_path: Path) -> None:
    # A manifest copied beside a log from another store would mark its purged ids here (and
    # vouch for references to them): the open refuses it, naming the file.
    other, mine = tmp_path / "other.db", tmp_path / "mine.db"
    with memcommit.open(other) as store:
        store.put("a ghost", id="GHOST", kind="trace")
        compact(store, retention=KindsAfter({"trace": 0}))
        assert store.is_purged("GHOST")
    with memcommit.open(mine) as store:
        store.put("mine")
        compact(store)
    shutil.copy(str(other) + ".manifest", str(mine) + ".manifest")
    copied = Path(str(mine) + ".manifest").read_bytes()
    for read_only in (True, False):
        with pytest.raises(memcommit.InvalidValue, match="manifest is of store") as refused:
            memcommit.open(mine, read_only=read_only)
        assert f"{mine}.manifest" in str(refused.value)
    assert Path(str(mine) + ".manifest").read_bytes() == copied


@pytest.mark.parametrize("same_size", [False, True])
def test_records_iterated_across_a_compaction_go_on_in_the_new_log(
    path: Path, same_size: bool
) -> None:
    # The iterator paged by byte offset: across a compaction it read the new log at the old
    # log's offset, a false CorruptLog or (records all one size) records silently skipped.
    with memcommit.open(path, durability="none") as store:
        with store.commit() as c:
            for i in range(3000):
                c.put(f"v{i:05d}" if same_size else "v" * (i % 7), id=f"a{i % 30:05d}")
        with store.commit() as c:
            for i in range(9000):
                c.put(f"w{i:05d}" if same_size else "w" * (i % 5), id=f"b{i:05d}")
        head = store.lsn
        it = store.records()
        first = [next(it) for _ in range(5000)]
        compact(store)
        rest = list(it)
        lsns = [r.lsn for r in first + rest]
        assert lsns == sorted(set(lsns))
        # Everything after what was given before the compaction, and the compaction's seal.
        assert [n for n in lsns if n > 5000] == [*range(5001, head + 1), store.lsn]


def test_policies_combine_with_or(path: Path, clock: ControllableClock) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("archived", id="archived", tier="archive")
        store.put("trace", id="trace", kind="trace")
        store.put("tagged", id="tagged", tags=("purge",))
        store.put("kept", id="kept")
        clock.advance(10 * DAY_MS)
        combo = ArchivedOlderThan(seconds=DAY_S) | KindsAfter({"trace": DAY_S}) | TaggedForPurge()
        assert isinstance(combo, AnyOf)
        assert isinstance(combo, RetentionPolicy)
        assert len(combo.policies) == 3  # flattened
        report = compact(store, retention=combo)
        assert sorted(report.purged) == ["archived", "tagged", "trace"]
        assert [m.id for m in store.find(status=None)] == ["kept"]


@pytest.mark.parametrize(
    "policy",
    [
        ArchivedOlderThan(seconds=0),
        KindsAfter({"note": 0}),
        ArchivedOlderThan(seconds=0) | KindsAfter({"note": 0}),
    ],
    ids=["archived", "kinds", "both"],
)
def test_only_memories_with_no_record_after_the_horizon_are_purged(
    path: Path, clock: ControllableClock, policy: RetentionPolicy
) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        for name in ("quiet", "touched", "replaced", "moved"):
            store.put(name, id=name, tier="archive")
        horizon = store.lsn
        store.stale("touched")
        store.put("replaced again", id="replaced")
        store.move("moved", "archive")
        clock.advance(DAY_MS)
        report = compact(store, retention=policy, horizon=horizon)
        assert report.purged == ("quiet",)
        assert {m.id for m in store.find(status=None)} == {"touched", "replaced", "moved"}
        # custom policies too
        store.put("t", id="tagged", tags=("purge",))
        store.put("t", id="tagged-later", tags=("purge",))
        h = store.lsn - 1
        store.stale("tagged-later")
        assert compact(store, retention=TaggedForPurge(), horizon=h).purged == ("tagged",)


def test_nothing_is_purged_anywhere_but_in_compact(path: Path, clock: ControllableClock) -> None:
    from memcommit.tiers import compact_memory

    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("archived", id="a", tier="archive")
        store.put("trace", id="t", kind="trace", task="job")
        store.finish_task("job")
        clock.advance(400 * DAY_MS)
        compact_memory(store)  # memory compaction never deletes
        assert store.get("a") is not None and store.get("t") is not None
        assert compact(store).purged == ()  # no retention: nothing purged
    with memcommit.open(path, clock=clock) as store:
        assert store.get("a") is not None and store.get("t") is not None
        assert not store.is_purged("a") and not store.is_purged("t")
        report = compact(store, retention=ArchivedOlderThan(seconds=DAY_S))
        assert report.purged == ("a",)
        assert store.get("t") is not None


def test_policy_selecting_nothing_known_is_harmless(path: Path, clock: ControllableClock) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("n", id="n")
        clock.advance(100 * DAY_MS)
        assert compact(store, retention=KindsAfter({"no-such-kind": 0})).purged == ()
        assert store.get("n") is not None


def test_a_fold_does_not_change_what_archived_older_than_selects(
    path: Path, clock: ControllableClock
) -> None:
    """The last move's time must survive a fold that drops the move record.

    "a" moves to the archive at t0 + 20d, and its content is replaced at t0 + 21d (so the
    move record comes before its last put and is folded away). Its last move stays at
    t0 + 20d: at t0 + 45d it is 25 days old and ArchivedOlderThan(30 days) must not name it,
    whether or not the log was compacted in between; nor may a second compaction with the
    same policy at the same instant purge what the first one did not.
    """
    policy = ArchivedOlderThan(seconds=30 * DAY_S)
    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("a", id="a")
        clock.advance(20 * DAY_MS)
        store.move("a", "archive")
        clock.advance(DAY_MS)
        store.put("a, revised", id="a")  # tier archive kept
        clock.advance(24 * DAY_MS)  # now t0 + 45d
        first = compact(store, retention=policy)
        assert first.purged == ()
        second = compact(store, retention=policy)
        assert second.purged == (), (
            "the second compaction at the same instant purged what the first kept: the fold "
            "dropped the move record and the last move's time went with it"
        )
        assert store.get("a") is not None


# -- the manifest, purged ids and references -----------------------------------------------


def test_manifest_entry(path: Path, clock: ControllableClock) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        assert store.manifest() == []
        for i in range(6):
            store.put(f"t{i}", id=f"t{i}", kind="trace")
            store.put(f"n{i}", id=f"n{i}")
        s1 = seal(store)
        s2 = seal(store, key="secret")
        clock.advance(8 * DAY_MS)
        store.put("fresh", id="fresh", sources=("t0",))
        before = verify(store, key="secret")
        old_seals = store.seals()
        head = store.lsn
        report = compact(store, retention=KindsAfter({"trace": 7 * DAY_S}))
        (entry,) = store.manifest()
        assert entry["generation"] == 1
        assert datetime.fromisoformat(entry["at"]) == clock.now()
        assert entry["horizon"] == report.horizon == head
        assert (entry["before"], entry["after"]) == (report.before, report.after)
        assert (entry["bytes_before"], entry["bytes_after"]) == (
            report.bytes_before,
            report.bytes_after,
        )
        assert entry["purged"] == sorted(report.purged) == [f"t{i}" for i in range(6)]
        chain = entry["old_chain"]
        assert chain["generation"] == 0
        assert (chain["lsn"], chain["hash"]) == (before.lsn, before.chain) == (head, before.chain)
        assert [(x["lsn"], x["record_lsn"], x["hash"], x["keyed"]) for x in chain["seals"]] == [
            (s.lsn, s.record_lsn, s.hash, s.keyed) for s in old_seals
        ]
        assert [x["record_lsn"] for x in chain["seals"]] == [s1.record_lsn, s2.record_lsn]
        assert manifest_on_disk(path) == store.manifest()
        clock.advance(DAY_MS)
        compact(store)
        entries = store.manifest()
        assert [e["generation"] for e in entries] == [1, 2]
        assert entries[0] == entry
        assert entries[1]["old_chain"]["generation"] == 1
        assert entries[1]["purged"] == []
    with memcommit.open(path, read_only=True) as ro:
        assert ro.manifest() == entries
    with memcommit.open(path) as store:
        assert store.manifest() == entries
        assert all(store.is_purged(f"t{i}") for i in range(6))


def test_anchors_of_the_old_generation_are_superseded_not_failed(path: Path) -> None:
    """The manifest keeps the old log's seals: an anchor taken before compaction is known."""
    with memcommit.open(path, durability="none") as store:
        store.put("a", id="a")
        anchor = seal(store)
        store.put("b", id="b")
        assert verify(store, anchors=[anchor.to_json()]).anchors_checked == 1
        compact(store)
        r = verify(store, anchors=[anchor.to_json()])
        assert (r.ok, r.anchors_checked, r.superseded) == (True, 1, 1)
        forged = json.loads(anchor.to_json())
        forged["hash"] = "f" * 64
        with pytest.raises(memcommit.SealMismatch):
            verify(store, anchors=[forged])
        fresh = store.seals()[-1]
        assert verify(store, anchors=[fresh]).superseded == 0


def test_manifest_returns_copies(path: Path, clock: ControllableClock) -> None:
    """What store.manifest() returns is the caller's: changing it never changes the store."""
    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("t", id="t", kind="trace")
        store.put("n", id="n")
        seal(store)
        compact(store, retention=KindsAfter({"trace": 0}))
        want = copy.deepcopy(store.manifest())
        got = store.manifest()
        got[0]["purged"].clear()
        got[0]["old_chain"]["seals"].clear()
        got[0]["old_chain"]["hash"] = "0" * 64
        got.clear()
        assert store.manifest() == want, "mutating the returned manifest changed the store's"
        assert store.is_purged("t")


def _purged_store(path: Path, clock: ControllableClock) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        store.put("old trace", id="gone", kind="trace")
        store.put("kept", id="kept", sources=("gone",))
        clock.advance(2 * DAY_MS)
        assert compact(store, retention=KindsAfter({"trace": DAY_S})).purged == ("gone",)
        _check_purged(store)


def _check_purged(store: memcommit.MemoryStore) -> None:
    assert store.is_purged("gone")
    assert not store.is_purged("kept") and not store.is_purged("never")
    with pytest.raises(Purged) as ei:
        store.get("gone")
    assert "gone" in str(ei.value)
    assert store.get("never") is None
    assert "gone" not in store
    with pytest.raises(Purged, match="'gone'"):
        store.get_many(["kept", "gone"])
    assert store.get_many(["kept", "never"])[1] is None
    assert verify(store).ok  # "kept" names a purged memory: deliberate, not forged


def test_purged_ids_read_and_write(path: Path, clock: ControllableClock) -> None:
    _purged_store(path, clock)
    for _ in range(2):  # across reopen, twice
        with memcommit.open(path, clock=clock) as store:
            _check_purged(store)
            head = store.lsn
            for call in (
                lambda: store.stale("gone"),
                lambda: store.stale("gone", reason="why"),
                lambda: store.restore("gone"),
                lambda: store.move("gone", "long"),
            ):
                with pytest.raises(Rejected) as ei:
                    call()
                assert "purged" in ei.value.reason
                assert "gone" in ei.value.reason
                assert ei.value.guard is not None and ei.value.guard.id == "gone"
            for guard in ({}, {"status": "active"}, {"tier": "working"}):
                with pytest.raises(Rejected) as ei, store.commit() as c:
                    c.put("would be written", id="other")
                    c.expect("gone", **guard)
                assert "purged" in ei.value.reason
                assert ei.value.guard is not None and ei.value.guard.expected is True
            assert store.lsn == head  # nothing written
            assert "other" not in store
    with memcommit.open(path, read_only=True) as ro:
        _check_purged(ro)
    with memcommit.open(path, clock=clock) as store:  # a purged memory does not exist
        with store.commit() as c:
            c.expect("gone", exists=False)
            c.put("again", id="gone")
        assert store.get("gone").text == "again"


def test_references_to_purged_ids_verify_and_forged_ones_do_not(
    path: Path, clock: ControllableClock
) -> None:
    _purged_store(path, clock)
    with memcommit.open(path, clock=clock) as store:
        store.put("derived later", id="later", sources=("gone", "kept"))
        seal(store)
        assert verify(store).ok
        put_unchecked(store, "forged", id="forged", sources=("never-existed",))
        with pytest.raises(ForgedReference) as ei:
            verify(store)
        assert ei.value.id == "never-existed"


# -- a read-only store ---------------------------------------------------------------------


def test_reader_resyncs_after_compaction(path: Path, clock: ControllableClock) -> None:
    with memcommit.open(path, clock=clock, durability="none") as store:
        for i in range(20):
            store.put(f"n{i}", id=f"n{i}", kind="trace" if i % 2 else "note")
            store.put(f"n{i} v2", id=f"n{i}", kind="trace" if i % 2 else "note")
        store.locks.acquire("job", "w", LONG_TTL_MS)
        store.flush()
        ro = memcommit.open(path, read_only=True, clock=clock)
        try:
            assert ro.refresh() == 0
            assert len(ro) == 20 and ro.generation == 0
            clock.advance(2 * DAY_MS)
            report = compact(store, retention=KindsAfter({"trace": DAY_S}))
            assert len(report.purged) == 10
            store.put("after", id="after")
            store.flush()
            ro.refresh()
            assert ro.generation == store.generation == 1
            assert ro.lsn == store.lsn
            assert len(ro) == len(store) == 11
            assert state_of(ro, locks=("job",)) == state_of(store, locks=("job",))
            assert ro.manifest() == store.manifest()
            with pytest.raises(Purged):
                ro.get("n1")
            assert ro.get("after") is not None
            assert verify(ro).ok
            # twice more without a refresh in between: still one resync
            compact(store)
            store.put("later", id="later")
            compact(store, horizon=store.lsn - 1)
            store.flush()
            ro.refresh()
            assert ro.generation == store.generation == 3
            assert state_of(ro, locks=("job",)) == state_of(store, locks=("job",))
            # and plain appends keep flowing
            store.put("tail", id="tail")
            store.flush()
            assert ro.refresh() == 1
            assert ro.get("tail") is not None
        finally:
            ro.close()


# -- bad input -----------------------------------------------------------------------------


def test_horizon_past_the_head(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        store.put("a")
        with pytest.raises(ValueError, match="horizon"):
            compact(store, horizon=store.lsn + 1)
        with pytest.raises(ValueError, match="horizon"):
            compact(store, horizon=-1)
        with pytest.raises(TypeError, match="horizon"):
            compact(store, horizon="1")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="horizon"):
            compact(store, horizon=True)
        assert store.generation == 0 and store.manifest() == []
        assert leftovers(path) == []
        assert compact(store, horizon=store.lsn).horizon == 1


@pytest.mark.parametrize(
    "retention",
    ["30d", 30, lambda m, now: True, ArchivedOlderThan, {"trace": 7}],
    ids=["str", "int", "function", "class", "dict"],
)
def test_retention_not_a_policy(path: Path, retention: Any) -> None:
    with memcommit.open(path, durability="none") as store:
        store.put("a")
        with pytest.raises(TypeError, match="retention"):
            compact(store, retention=retention)
        assert store.generation == 0


def test_compact_of_a_store_in_ram() -> None:
    store = memcommit.open(":memory:")
    store.put("a")
    with pytest.raises(NotSupported):
        compact(store)
    assert len(store) == 1
    with pytest.raises(NotSupported):
        compact(memcommit.create_memory_store(), retention=ArchivedOlderThan(seconds=0))


def test_compact_of_something_else() -> None:
    with pytest.raises(TypeError, match="store"):
        compact("memory.db")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: KindsAfter({}), "ages"),
        (lambda: KindsAfter({"trace": -1}), "ages"),
        (lambda: KindsAfter({"trace": float("nan")}), "ages"),
        (lambda: KindsAfter({"trace": "7d"}), "ages"),
        (lambda: KindsAfter({"": 1}), "ages"),
        (lambda: KindsAfter([("trace", 1)]), "ages"),
        (lambda: ArchivedOlderThan(seconds=-1), "seconds"),
        (lambda: ArchivedOlderThan(seconds=float("inf")), "seconds"),
        (lambda: ArchivedOlderThan(seconds="30d"), "seconds"),
        (lambda: ArchivedOlderThan(seconds=True), "seconds"),
    ],
)
def test_bad_policy_arguments_name_the_field(make: Any, field: str) -> None:
    with pytest.raises((TypeError, ValueError), match=field):
        make()


def test_policies_combine_only_with_policies() -> None:
    with pytest.raises(TypeError):
        ArchivedOlderThan(seconds=1) | "trace"  # type: ignore[operator]
    with pytest.raises(TypeError):
        AnyOf(ArchivedOlderThan(seconds=1), "trace")  # type: ignore[arg-type]


def test_a_failing_policy_leaves_the_store_as_it_was(path: Path) -> None:
    class Boom(RetentionPolicy):
        def selects(self, memory: Any, now: datetime) -> bool:
            raise RuntimeError("policy exploded")

    class Unfinished(RetentionPolicy):
        pass

    with memcommit.open(path, durability="none") as store:
        store.put("a", id="a")
        before = state_of(store)
        with pytest.raises(RuntimeError, match="exploded"):
            compact(store, retention=Boom())
        with pytest.raises(NotImplementedError, match="selects"):
            compact(store, retention=Unfinished())
        assert store.generation == 0 and store.manifest() == []
        assert state_of(store) == before
        assert leftovers(path) == []
        store.put("b", id="b")
        assert len(store) == 2


def test_a_manifest_that_cannot_be_written_aborts_the_compaction(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        store.put("a", id="a")
        store.put("a2", id="a")
        store.flush()
        old = read_log(path)
        before = state_of(store)
        blocker = Path(str(path) + ".manifest")
        blocker.mkdir()  # the manifest cannot be read or replaced
        with pytest.raises(OSError):
            compact(store)
        blocker.rmdir()
        assert store.generation == 0
        assert state_of(store) == before
        assert read_log(path).recs == old.recs
        store.put("b", id="b")  # still the writer
    with memcommit.open(path) as store:
        assert leftovers(path) == []
        assert store.generation == 0 and len(store) == 2
        assert compact(store).generation == 1


def test_a_compaction_drops_the_entry_of_a_generation_the_log_never_reached(
    path: Path,
) -> None:
    """An earlier compaction abandoned after its manifest's rename (the directory's fsync
    failed) left an entry, a purge of `a`, for generation 1 while the log stayed at 0; the
    writer still has the log open. The next compaction writes its entry after the manifest's
    entries of the generations the log has reached, not after that one."""
    with memcommit.open(path, durability="none") as store:
        store.put("a", id="a", kind="trace")
        store.put("b", id="b")
        before = state_of(store)
        stale = {"generation": 1, "at": "2024-01-01T00:00:00+00:00", "purged": ["a"]}
        Path(str(path) + ".manifest").write_text(
            json.dumps({"store_id": store.store_id, "entries": [stale]})
        )
        report = compact(store)
        assert report.generation == 1 and report.purged == ()
        assert [(e["generation"], e["purged"]) for e in store.manifest()] == [(1, [])]
        assert manifest_on_disk(path) == store.manifest()
        assert not store.is_purged("a") and state_of(store) == before
    with memcommit.open(path) as store:
        assert [(e["generation"], e["purged"]) for e in store.manifest()] == [(1, [])]
        assert not store.is_purged("a") and state_of(store) == before


def test_the_writer_open_removes_what_a_crashed_compaction_left(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        store.put("a", id="a")
        expected = state_of(store)
    Path(str(path) + ".tmp-compact").write_bytes(b"MEMCMLOG" + bytes(200))
    Path(str(path) + ".tmp-manifest").write_text('{"store_id": "x", "entries": [')
    with memcommit.open(path, read_only=True) as ro:
        assert state_of(ro) == expected
    with memcommit.open(path) as store:
        assert leftovers(path) == []
        assert state_of(store) == expected
        assert store.generation == 0 and store.manifest() == []


# -- the store stays usable ----------------------------------------------------------------


def test_store_stays_usable_after_compact(path: Path, clock: ControllableClock) -> None:
    with memcommit.open(path, clock=clock) as store:
        for i in range(10):
            store.put(f"n{i}", id=f"n{i}")
        store.locks.acquire("job", "w", LONG_TTL_MS)
        compact(store)
        head = store.lsn
        new_id = store.put("after", sources=("n1",))
        assert store.lsn == head + 1
        assert store.get(new_id).text == "after"  # type: ignore[union-attr]
        store.stale("n2")
        store.move("n3", "long")
        with store.commit(expect_lsn=store.lsn) as c:
            c.put("in a commit", id="c1")
            c.expect("n3", tier="long")
        store.finish_task("job")
        s = seal(store)
        assert s.record_lsn == store.lsn and s.generation == 1
        assert [x.record_lsn for x in store.seals()] == [head, s.record_lsn]
        assert store.locks.acquire("job", "other", 1_000) is None
        assert store.state.put(("a",), "k", 1).version == 1
        assert verify(store).seals_checked == 2
        expected = state_of(store, tasks=("job",), locks=("job",))
        assert list(store.records(after=head)) != []
    with memcommit.open(path, clock=clock) as store:
        assert state_of(store, tasks=("job",), locks=("job",)) == expected
        assert store.generation == 1
        assert verify(store).ok
        compact(store)
        assert state_of(store, tasks=("job",), locks=("job",)) == expected
        assert store.generation == 2


def test_auto_seal_keeps_sealing_after_compact(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        auto = AutoSeal(store, every=5)
        for i in range(12):
            store.put(f"n{i}")
        assert len(store.seals()) == 2
        compact(store)
        compacted = store.lsn
        assert len(store.seals()) == 1
        for i in range(12):
            store.put(f"m{i}")
        later = [x for x in store.seals() if x.record_lsn > compacted]
        assert len(later) == 2, store.seals()
        assert verify(store).seals_checked == 3
        auto.close()
        n = len(store.seals())
        for i in range(12):
            store.put(f"k{i}")
        assert len(store.seals()) == n  # detached: no more seals
        # and a new one can be attached to the compacted store
        with AutoSeal(store, every=3):
            for i in range(3):
                store.put(f"j{i}")
        assert len(store.seals()) == n + 1


def test_a_second_writer_is_still_refused_after_compact(path: Path) -> None:
    with memcommit.open(path, durability="none") as store:
        store.put("a")
        compact(store)
        with pytest.raises(memcommit.StoreLocked):
            memcommit.open(path)
        store.put("b")
    with memcommit.open(path) as store:
        assert len(store) == 2


# -- crash safety ----------------------------------------------------------------------------

_COMPACT_CHILD = textwrap.dedent(
    """
    import sys, threading
    from datetime import datetime
    import memcommit
    from memcommit.storage import ArchivedOlderThan, KindsAfter, compact
    from memcommit.testing import ControllableClock

    path, now, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    clock = ControllableClock(datetime.fromisoformat(now))
    store = memcommit.open(path, clock=clock)
    retention = ArchivedOlderThan(seconds=30 * 86400) | KindsAfter({"trace": 7 * 86400})
    print("compacting", flush=True)
    report = compact(store, retention=retention)
    print("compacted", report.generation, flush=True)
    if mode == "wait":
        threading.Event().wait(60)
    """
)

CRASH_NOW = START + timedelta(days=45)
CRASH_TASKS = ("job", "other")
CRASH_LOCKS = ("crash-lock",)
# Purged at CRASH_NOW: archived at START (n01, n11, n16, n21, n26; n06 moved again at +40d)
# and traces created at START (t00..t09; t-new was created at +40d).
CRASH_PURGED = {"n01", "n11", "n16", "n21", "n26"} | {f"t{i:02d}" for i in range(10)}


def _build_crash_store(path: Path) -> dict[str, Any]:
    clock = ControllableClock(START)
    with memcommit.open(path, clock=clock, durability="none") as s:
        for i in range(30):
            s.put(f"note {i}", id=f"n{i:02d}", task="job" if i % 3 == 0 else None)
        for i in range(10):
            s.put(f"trace {i}", id=f"t{i:02d}", kind="trace", task="job", data={"i": i})
        seal(s)
        for i in range(0, 30, 4):
            s.stale(f"n{i:02d}")
        for i in range(1, 30, 5):
            s.move(f"n{i:02d}", "archive")
        s.finish_task("job")
        s.locks.acquire("crash-lock", "parent", LONG_TTL_MS)
        s.state.put(("agent",), "k", {"v": 1})
        s.state.put(("agent",), "k", {"v": 2})
        for i in range(0, 30, 7):
            s.put(f"note {i} v2", id=f"n{i:02d}", tags=("v2",))
        seal(s)
        clock.advance(40 * DAY_MS)
        s.put("fresh", id="fresh", sources=("t00", "n01"))
        s.move("n06", "archive")
        s.put("fresh trace", id="t-new", kind="trace")
        s.finish_task("job")
        seal(s)
        clock.set(CRASH_NOW)
        return state_of(s, tasks=CRASH_TASKS, locks=CRASH_LOCKS)


def _run_compact_child(path: Path, env: dict[str, str], mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _COMPACT_CHILD, str(path), CRASH_NOW.isoformat(), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


def _check_whole(
    store: memcommit.MemoryStore,
    generation: int,
    expected: dict[str, Any],
    purged: set[str],
    gets: bool = True,
) -> None:
    """The store is wholly generation `generation`: its state and manifest agree."""
    assert store.generation == generation
    assert [e["generation"] for e in store.manifest()] == list(range(1, generation + 1))
    assert state_of(store, tasks=CRASH_TASKS, locks=CRASH_LOCKS, gets=gets) == minus(
        expected, purged
    )
    for i in purged:
        assert store.is_purged(i)
    assert verify(store).ok


@pytest.mark.parametrize("step", ["new-log-written", "manifest-written", "renamed"])
def test_crash_at_each_step_of_the_protocol(path: Path, step: str) -> None:
    expected = _build_crash_store(path)
    old = read_log(path)
    proc = _run_compact_child(path, {"MEMCOMMIT_FAILPOINT": step}, "exit")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"the child was not killed at {step}:\n{err}"
    assert out == "compacting\n", out
    tmp_compact = Path(str(path) + ".tmp-compact")
    renamed = step == "renamed"
    # What the crash left, before anyone opens the store.
    assert tmp_compact.exists() == (not renamed)
    on_disk = manifest_on_disk(path)
    assert [e["generation"] for e in on_disk] == ([] if step == "new-log-written" else [1])
    generation, purged = (1, CRASH_PURGED) if renamed else (0, set())

    # A reader first: it sees one whole generation and changes nothing on disk.
    with memcommit.open(path, read_only=True, clock=ControllableClock(CRASH_NOW)) as ro:
        _check_whole(ro, generation, expected, purged)
    assert [e["generation"] for e in manifest_on_disk(path)] == [e["generation"] for e in on_disk]

    # Then the writer: it cleans up what the crash left.
    with memcommit.open(path, clock=ControllableClock(CRASH_NOW)) as store:
        _check_whole(store, generation, expected, purged)
        assert leftovers(path) == []
        disk = manifest_on_disk(path)
        if renamed:
            assert [e["generation"] for e in disk] == [1]
            assert sorted(disk[0]["purged"]) == sorted(CRASH_PURGED)
        else:
            assert all(e["generation"] != 1 for e in disk)
            assert read_log(path).recs == old.recs  # the old log, byte for byte
        store.put("after the crash", id="after", sources=("t00",))
        assert verify(store).ok
    with memcommit.open(path, clock=ControllableClock(CRASH_NOW)) as store:
        assert store.get("after") is not None
        assert store.generation == generation
        # and a compaction now runs to the end
        report = compact(store, retention=ArchivedOlderThan(seconds=30 * DAY_S))
        assert report.generation == generation + 1
        assert store.manifest()[-1]["generation"] == generation + 1
        assert leftovers(path) == []


def test_a_compaction_that_is_not_killed_gives_the_same_new_generation(path: Path) -> None:
    """The child without a failpoint: the reference for the crash tests above."""
    expected = _build_crash_store(path)
    old = read_log(path)
    proc = _run_compact_child(path, {"MEMCOMMIT_FAILPOINT": "no-such-step"}, "exit")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == "compacting\ncompacted 1\n"
    with memcommit.open(path, clock=ControllableClock(CRASH_NOW)) as store:
        _check_whole(store, 1, expected, CRASH_PURGED)
        assert leftovers(path) == []
    check_new_log(old, read_log(path), old.recs[-1].lsn, CRASH_PURGED, old.recs[-1].lsn)


BIG_MEMORIES = 100_000  # 200k records


def _build_big_store(path: Path) -> dict[str, Any]:
    clock = ControllableClock(START)
    with memcommit.open(path, clock=clock, durability="none") as s:
        for b in range(0, BIG_MEMORIES, 2000):
            with s.commit() as c:
                for i in range(b, b + 2000):
                    c.put(f"memory {i}", id=f"m{i:06d}", kind="trace" if i % 10 == 0 else "note")
        for b in range(0, BIG_MEMORIES, 2000):
            with s.commit() as c:
                for i in range(b, b + 2000):
                    if i % 3 == 0:
                        c.stale(f"m{i:06d}")
                    elif i % 3 == 1:
                        c.move(f"m{i:06d}", "long")
                    else:
                        c.put(f"memory {i} v2", id=f"m{i:06d}")
        s.locks.acquire("crash-lock", "parent", LONG_TTL_MS)
        s.finish_task("job")
        seal(s)
        assert s.lsn == 2 * BIG_MEMORIES + 4
        clock.set(CRASH_NOW)
        return state_of(s, tasks=CRASH_TASKS, locks=CRASH_LOCKS, gets=False)


def _drain(pipe: Any, sink: list[str]) -> None:
    sink.append(pipe.read())


def test_kill_at_a_random_moment_while_compacting(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    expected = _build_big_store(path)
    # traces, but for those whose second put (kind "note") replaced the kind
    traces = {f"m{i:06d}" for i in range(0, BIG_MEMORIES, 10) if i % 3 != 2}
    rng = random.Random()
    seen: set[int] = set()
    purged: set[str] = set()
    for _ in range(4):
        with memcommit.open(path, read_only=True) as ro:
            before = ro.generation
        proc = _run_compact_child(path, {}, "wait")
        assert proc.stdout is not None and proc.stderr is not None
        errs: list[str] = []
        pump = threading.Thread(target=_drain, args=(proc.stderr, errs))
        pump.start()
        line = proc.stdout.readline()
        assert line == "compacting\n", (line, errs)
        threading.Event().wait(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        rest = proc.stdout.read()
        proc.wait(30)
        pump.join(30)
        proc.stdout.close()
        proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL, errs
        with memcommit.open(path, clock=ControllableClock(CRASH_NOW)) as store:
            generation = store.generation
            assert generation in (before, before + 1), (before, generation, rest)
            if generation == before + 1:
                purged = traces  # the first new generation purges them; later ones nothing
                assert store.manifest()[-1]["purged"] == (sorted(traces) if generation == 1 else [])
            _check_whole(store, generation, expected, purged, gets=False)
            assert leftovers(path) == []
            seen.add(generation - before)
    assert seen <= {0, 1}


# -- property tests ------------------------------------------------------------------------

IDS = ("m0", "m1", "m2", "m3", "m4")
TASKS = ("t0", "t1")
KINDS = ("note", "trace", "fact")
STATE_KEYS = ("a", "b")
LOCK_NAMES = ("L0", "L1")
_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)

_op = st.one_of(
    st.tuples(
        st.just("put"),
        st.sampled_from(IDS),
        st.sampled_from(KINDS),
        st.sampled_from(TIERS),
        st.one_of(st.none(), st.sampled_from(TASKS)),
        _text,
        st.booleans(),
        st.one_of(st.none(), st.sampled_from(IDS)),
    ),
    st.tuples(st.just("stale"), st.sampled_from(IDS)),
    st.tuples(st.just("restore"), st.sampled_from(IDS)),
    st.tuples(st.just("move"), st.sampled_from(IDS), st.sampled_from(TIERS)),
    st.tuples(st.just("multi"), st.sampled_from(IDS), st.sampled_from(TIERS)),
    st.tuples(st.just("finish"), st.sampled_from(TASKS)),
    st.tuples(st.just("state_put"), st.sampled_from(STATE_KEYS), st.integers(0, 9)),
    st.tuples(st.just("state_delete"), st.sampled_from(STATE_KEYS)),
    st.tuples(st.just("lock"), st.sampled_from(LOCK_NAMES)),
    st.tuples(st.just("unlock"), st.sampled_from(LOCK_NAMES)),
    st.tuples(st.just("seal")),
    st.tuples(st.just("advance"), st.integers(1, 20)),
)
_history = st.lists(_op, max_size=40)
_retention = st.one_of(
    st.none(),
    st.tuples(st.just("archived"), st.integers(0, 60)),
    st.tuples(st.just("kinds"), st.integers(0, 60)),
    st.tuples(st.just("custom")),
    st.tuples(st.just("combo"), st.integers(0, 60)),
)
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class _Tagged(RetentionPolicy):
    def selects(self, memory: Any, now: datetime) -> bool:
        return "purge" in memory.tags


def _policy(spec: Any) -> RetentionPolicy | None:
    if spec is None:
        return None
    if spec[0] == "archived":
        return ArchivedOlderThan(seconds=spec[1] * DAY_S)
    if spec[0] == "kinds":
        return KindsAfter({"trace": spec[1] * DAY_S})
    if spec[0] == "custom":
        return _Tagged()
    return ArchivedOlderThan(seconds=spec[1] * DAY_S) | KindsAfter({"trace": 0}) | _Tagged()


def _run_history(store: memcommit.MemoryStore, clock: ControllableClock, ops: list[Any]) -> None:
    for op in ops:
        name = op[0]
        if name == "put":
            _, i, kind, tier, task, text, tag, source = op
            store.put(
                text,
                id=i,
                kind=kind,
                tier=tier,
                task=task,
                tags=("purge",) if tag else (),
                sources=(source,) if source in store else (),  # never a forged reference
            )
        elif name in ("stale", "restore") and op[1] in store:
            getattr(store, name)(op[1])
        elif name == "move" and op[1] in store:
            store.move(op[1], op[2])
        elif name == "multi":
            with store.commit() as c:
                c.put(f"multi {op[1]}", id=op[1], data={"tier": op[2]})
                c.move(op[1], op[2])
                c.stale(op[1])
        elif name == "finish":
            store.finish_task(op[1])
        elif name == "state_put":
            store.state.put(("ns",), op[1], {"v": op[2]})
        elif name == "state_delete":
            store.state.delete(("ns",), op[1])
        elif name == "lock":
            store.locks.acquire(op[1], "owner", LONG_TTL_MS)
        elif name == "unlock":
            lease = store.locks.get(op[1])
            if lease is not None:
                store.locks.release(op[1], token=lease.token)
        elif name == "seal":
            seal(store)
        elif name == "advance":
            clock.advance(op[1] * DAY_MS)


def _expected_purge(
    store: memcommit.MemoryStore, spec: Any, horizon: int, now: datetime
) -> set[str]:
    """Which memories retention must purge, computed from the original log's records."""
    if spec is None:
        return set()
    kind = spec[0]
    age = timedelta(days=spec[1]) if len(spec) > 1 else timedelta(0)
    moved_at = {r.key: r.at for r in store.records() if r.op == "move"}
    out = set()
    for m in store.find(status=None):
        if m.lsn > horizon:
            continue  # a record after the horizon: never purged
        archived = m.tier == "archive" and moved_at.get(m.id, m.created_at) <= now - age
        if kind == "archived":
            hit = archived
        elif kind == "kinds":
            hit = m.kind == "trace" and m.created_at <= now - age
        elif kind == "custom":
            hit = "purge" in m.tags
        else:
            hit = archived or m.kind == "trace" or "purge" in m.tags
        if hit:
            out.add(m.id)
    return out


def _history_state(store: memcommit.MemoryStore) -> dict[str, Any]:
    """Everything a history can change: memories, the history's tasks and its locks."""
    return state_of(store, tasks=TASKS, locks=LOCK_NAMES)


@contextlib.contextmanager
def _scratch() -> Iterator[Path]:
    """A fresh directory per hypothesis example (tmp_path is per test, not per example)."""
    with tempfile.TemporaryDirectory() as d:
        yield Path(d) / "p.db"


@contextlib.contextmanager
def _after_history(
    ops: list[Any],
) -> Iterator[tuple[Path, memcommit.MemoryStore, ControllableClock]]:
    """A writer in a scratch directory that has run the history `ops`, and its clock.

    The caller closes the store (``with store:``) and may go on using the path after."""
    with _scratch() as path:
        clock = ControllableClock(START)
        store = memcommit.open(path, clock=clock, durability="none")
        try:
            _run_history(store, clock, ops)
        except BaseException:
            store.close()
            raise
        yield path, store, clock


@PROPERTY
@given(ops=_history, pct=st.integers(0, 100), spec=_retention)
def test_property_fold_replays_to_the_original_minus_the_purged(
    ops: list[Any], pct: int, spec: Any
) -> None:
    with _after_history(ops) as (path, store, clock):
        with store:
            store.flush()
            old = read_log(path)
            head = store.lsn
            horizon = head * pct // 100
            want = _expected_purge(store, spec, horizon, clock.now())
            before = _history_state(store)
            original = path.with_name("original.db")
            shutil.copyfile(path, original)
            with memcommit.open(original, clock=clock) as replayed:  # replay of the original
                assert _history_state(replayed) == before
            report = compact(store, retention=_policy(spec), horizon=horizon)
            assert sorted(report.purged) == sorted(want)
            assert report.horizon == horizon and report.before == len(old.recs)
            assert _history_state(store) == minus(before, want)
            for i in want:
                assert store.is_purged(i)
                with pytest.raises(Purged):
                    store.get(i)
        new = read_log(path)
        check_new_log(old, new, horizon, want, head)
        assert (report.after, report.bytes_after) == (len(new.recs), new.end)
        with memcommit.open(path, clock=clock) as store:
            assert _history_state(store) == minus(before, want)
            assert all(store.is_purged(i) for i in want)
            assert verify(store).ok


@PROPERTY
@given(
    ops=_history,
    pct=st.integers(0, 100),
    spec=st.one_of(
        st.none(),
        st.tuples(st.just("kinds"), st.integers(0, 60)),
        st.tuples(st.just("custom")),
    ),
)
def test_property_compacting_twice_equals_compacting_once(
    ops: list[Any], pct: int, spec: Any
) -> None:
    with _after_history(ops) as (path, store, _):
        with store:
            horizon = store.lsn * pct // 100
            first = compact(store, retention=_policy(spec), horizon=horizon)
            once = read_log(path)
            state = _history_state(store)
            second = compact(store, retention=_policy(spec), horizon=horizon)
            assert second.purged == ()
            assert second.after == first.after
            assert _history_state(store) == state
        twice = read_log(path)
        assert twice.without_seals() == once.without_seals()
        assert twice.generation == once.generation + 1 == 2


_fresh_op = st.one_of(
    st.tuples(
        st.just("new"),
        st.sampled_from(KINDS),
        st.sampled_from(TIERS),
        st.booleans(),
        st.one_of(st.none(), st.sampled_from(TIERS)),
    ),
    st.tuples(st.just("seal")),
    st.tuples(st.just("task")),
    st.tuples(st.just("state")),
    st.tuples(st.just("lock")),
)


@PROPERTY
@given(ops=st.lists(_fresh_op, max_size=40), at_zero=st.booleans())
def test_property_nothing_to_fold_comes_out_unchanged(ops: list[Any], at_zero: bool) -> None:
    with _scratch() as path:
        with memcommit.open(path, durability="none") as store:
            for n, op in enumerate(ops):
                if op[0] == "new":  # a fresh id; its one status and one move come after its put
                    _, kind, tier, stale, move = op
                    store.put(f"fresh {n}", id=f"f{n}", kind=kind, tier=tier)
                    if stale:
                        store.stale(f"f{n}")
                    if move is not None:
                        store.move(f"f{n}", move)
                elif op[0] == "seal":
                    seal(store)
                elif op[0] == "task":
                    store.finish_task(f"task {n}")
                elif op[0] == "state":
                    store.state.put(("ns",), f"key {n}", n)
                else:
                    store.locks.acquire(f"lock {n}", "owner", LONG_TTL_MS)
            store.flush()
            old = read_log(path)
            before = state_of(store)
            report = compact(store, horizon=0 if at_zero else None)
            assert state_of(store) == before
            assert report.purged == ()
        new = read_log(path)
        assert new.without_seals() == old.without_seals()
        assert report.after == len(old.without_seals()) + 1


def _race_compaction(path: Path) -> None:
    """One round: a putter and a committer thread write while compaction runs."""
    store = memcommit.open(path, durability="none")
    with store.commit() as c:
        c.put_many([f"old {i}" for i in range(30_000)], kind="trace")
    acked: list[str] = []
    failed: list[BaseException] = []
    stop = threading.Event()
    started = threading.Barrier(3)

    def writer(write: Callable[[int], None]) -> threading.Thread:
        """A thread that calls ``write(1)``, ``write(2)``, ... until stopped, keeping a failure."""

        def run() -> None:
            started.wait()
            i = 0
            try:
                while not stop.is_set():
                    i += 1
                    write(i)
            except BaseException as e:
                failed.append(e)

        return threading.Thread(target=run)

    def put(i: int) -> None:
        acked.append(store.put(f"new {i}", kind="note"))

    def commit(i: int) -> None:
        with store.commit() as c:
            ids = c.put_many([f"bulk {i} {j}" for j in range(300)], kind="note")
        acked.extend(ids)

    threads = [writer(put), writer(commit)]
    for t in threads:
        t.start()
    started.wait()
    compact(store)
    assert store.info()["generation"] == 1
    stop.set()
    for t in threads:
        t.join()
    assert not failed, failed[:1]
    store.put("after", kind="note")
    store.close()
    with memcommit.open(path, read_only=True) as reader:
        found = reader.get_many(acked)
        lost = [a for a, m in zip(acked, found, strict=True) if m is None]
        assert not lost, f"{len(lost)} acknowledged puts lost"
        assert reader.info()["generation"] == 1


def test_puts_racing_log_compaction_wait_and_go_on_in_the_new_generation(tmp_path: Path) -> None:
    """Puts and commits from other threads wait while compaction runs; one that was waiting
    when the new generation replaced the old goes on there. None fails, and every one that
    returned is in the new generation."""
    # A deadlock here would hang the suite: dump every thread's stack and exit instead.
    faulthandler.dump_traceback_later(120, exit=True)
    try:
        for round_ in range(3):
            _race_compaction(tmp_path / f"race{round_}.db")
    finally:
        faulthandler.cancel_dump_traceback_later()


def test_a_progress_that_cannot_be_called_is_refused_by_name(path: Path) -> None:
    with memcommit.open(path) as store:
        store.put("x")
        head = store.lsn
        with pytest.raises(TypeError, match="progress must be a callable or None, not int"):
            compact(store, progress=5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="progress must be a callable or None, not int"):
            verify(store, progress=5)  # type: ignore[arg-type]
        assert store.lsn == head and store.generation == 0


def test_a_write_from_inside_a_compaction_of_the_same_store_is_refused_not_hung(
    tmp_path: Path,
) -> None:
    """A compaction holds the store's commits off until it ends; a put from its own progress
    callback waited for it forever (the store hung). It is refused, naming the call, and the
    store goes on; a read there still works."""
    store = memcommit.open(tmp_path / "memory.db", durability="none")
    with store.commit() as c:
        c.put_many([f"memory {i}" for i in range(20_000)])
    reads: list[int] = []

    def progress(done: int, total: int) -> None:
        reads.append(len(store))
        store.put("from inside")

    with pytest.raises(memcommit.InvalidValue, match="inside a log compaction"):
        compact(store, progress=progress)
    assert reads == [20_000]
    assert store.generation == 0 and len(store) == 20_000
    store.put("after")
    assert len(store) == 20_001
    store.close()
