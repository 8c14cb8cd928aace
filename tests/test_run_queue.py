"""The run queue: claim_next and list by status walk the runs they need, not every run.

The medium keeps the runs grouped by status, each status in ``seq`` order
(:mod:`memcommit.roles.groupings`); the log's medium keeps that grouping in the log itself
(:mod:`memcommit.roles.logged_groupings`). These tests pin that the grouping agrees with the
runs themselves through every kind of change (writes, a reader's refresh, a reopen, log
compaction, a store written before the log kept it), and that a claim reads only the runs it
walks: in memory once the grouping is built, on a log store from the first claim after open.
"""

from __future__ import annotations

import contextlib
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import memcommit
from memcommit.roles import NewTurn, RoleSet
from memcommit.roles.groupings import KEPT, Grouping
from memcommit.roles.logged_groupings import LoggedGrouping, entry_kind
from memcommit.roles.medium import RUN, TURN, Medium, MemoryMedium, State
from memcommit.roles.roleset import Roles
from memcommit.roles.runs import RunStatus
from memcommit.storage import compact
from memcommit.testing import ControllableClock

STATUSES = ("pending", "running", "suspended", "succeeded", "failed", "cancelled")


def _by_parity(state: State) -> tuple[str, int] | None:
    n = state["n"]
    assert isinstance(n, int)
    return None if n < 0 else ("even" if n % 2 == 0 else "odd", n)


def test_a_grouping_keeps_each_group_in_rank_order_through_moves_and_deletes() -> None:
    grouping = Grouping(_by_parity, [("c", {"n": 3}), ("a", {"n": 1}), ("b", {"n": 2})])
    assert list(grouping.keys(["odd"])) == ["a", "c"]
    assert list(grouping.keys()) == ["a", "b", "c"]  # every group, merged by rank
    grouping.update("a", {"n": 4})  # moves from odd to even
    grouping.update("d", {"n": 0})  # new
    grouping.update("c", None)  # deleted
    grouping.update("b", {"n": -1})  # left out by the grouper
    grouping.update("e", {"n": 4})  # same rank as "a": the key breaks the tie
    assert list(grouping.keys(["even"])) == ["d", "a", "e"]
    assert list(grouping.keys(["odd"])) == []
    assert list(grouping.keys(["even"], after=0)) == ["a", "e"]
    assert list(grouping.keys(["nothing"])) == []


def _stored(medium: Medium | None) -> list[State]:
    """Every run's state, read straight from the medium (not through the grouping), by seq."""
    assert medium is not None
    return sorted((state for _, state in medium.scan(RUN)), key=lambda s: int(str(s["seq"])))


def _expected(
    medium: Medium | None, statuses: tuple[str, ...] | None, after: int | None
) -> list[str]:
    """The run ids list() must return, by a full read."""
    return [
        str(s["run_id"])
        for s in _stored(medium)
        if (statuses is None or s["status"] in statuses)
        and (after is None or int(str(s["seq"])) > after)
    ]


def _drive(roles: Roles, clock: ControllableClock, rng: random.Random, steps: int) -> None:
    """Random run traffic: creates, claims, takeovers, releases, suspends, finishes, deletes."""
    runs = roles.runs
    for _ in range(steps):
        live = [r for s in _stored(roles.medium) if (r := runs.get(str(s["run_id"])))]
        choice = rng.random()
        if choice < 0.3 or not live:
            delay = rng.choice([None, None, 500])
            runs.create(
                agent_id=rng.choice(["a", "b"]), available_at_ms=delay and clock.now_ms() + delay
            )
        elif choice < 0.5:
            runs.claim_next(worker_id="w", ttl_ms=rng.choice([100, 10_000]))
        elif choice < 0.6:
            clock.advance(rng.choice([50, 200, 1_000]))
        else:
            run = rng.choice(live)
            expires = run.claim_expires_at_ms
            if run.status == "running" and expires is not None and expires > clock.now_ms():
                token = run.attempt
                act = rng.choice(["complete", "fail", "release", "suspend"])
                if act == "complete":
                    runs.complete(run.run_id, token=token, output=1)
                elif act == "fail":
                    runs.fail(run.run_id, token=token, error="e")
                elif act == "release":
                    runs.release(run.run_id, token=token)
                else:
                    runs.suspend(run.run_id, token=token)
            elif run.status == "suspended":
                runs.resume(run.run_id)
            elif run.status in ("pending", "running"):
                runs.cancel(run.run_id)
            else:
                runs.delete(run.run_id)


def _check(roles: Roles) -> None:
    runs, medium = roles.runs, roles.medium
    seqs = [int(str(s["seq"])) for s in _stored(medium)]
    choices: list[tuple[RunStatus, ...] | None] = [
        None,
        ("pending",),
        ("pending", "running"),
        ("succeeded", "failed"),
    ]
    for statuses in choices:
        for after in [None, seqs[len(seqs) // 2] if seqs else None]:
            got = [r.run_id for r in runs.list(status=statuses, after_seq=after)]
            assert got == _expected(medium, statuses, after), (statuses, after)
    heads = runs.list(status="pending", limit=3)
    assert [r.run_id for r in heads] == _expected(medium, ("pending",), None)[:3]


class PlainMedium:
    """A medium with only the three methods and the lock: it keeps no groupings."""

    def __init__(self) -> None:
        self._inner = MemoryMedium()
        self.lock = self._inner.lock
        self.get = self._inner.get
        self.scan = self._inner.scan
        self.write = self._inner.write


@pytest.mark.parametrize("where", ["log", "memory", "plain medium"])
def test_list_and_claim_next_agree_with_the_runs_through_random_traffic(
    tmp_path: Path, where: str
) -> None:
    clock = ControllableClock()
    rng = random.Random(20261202)
    store = None
    if where == "log":
        store = memcommit.open(str(tmp_path / "runs.db"), clock=clock, durability="none")
        roles: Roles = store
    elif where == "memory":
        roles = RoleSet(clock=clock)
    else:
        roles = RoleSet(clock=clock, medium=PlainMedium())
        assert not hasattr(roles.medium, "grouping")
    for _ in range(12):
        _drive(roles, clock, rng, 25)
        _check(roles)
        # claim_next takes the lowest-seq claimable run, as a full read finds it.
        now = clock.now_ms()
        claimable = [
            str(s["run_id"])
            for s in _stored(roles.medium)
            if (
                s["status"] == "pending"
                and (s["available_at_ms"] is None or now >= int(str(s["available_at_ms"])))
            )
            or (s["status"] == "running" and now >= int(str(s["claim_expires_at_ms"])))
        ]
        claim = roles.runs.claim_next(worker_id="checker", ttl_ms=1_000)
        if claimable:
            assert claim is not None and claim.run.run_id == claimable[0]
        else:
            assert claim is None
    if store is not None:
        store.close()


def test_a_claim_reads_only_the_runs_it_walks_once_the_grouping_is_built() -> None:
    medium = MemoryMedium()
    calls = {"scan": 0, "get": 0}
    scan, get = medium.scan, medium.get

    def counting_scan(kind: str, prefix: str = "") -> list[tuple[str, State]]:
        calls["scan"] += kind == RUN
        return scan(kind, prefix)

    def counting_get(kind: str, key: str) -> State | None:
        calls["get"] += kind == RUN
        return get(kind, key)

    medium.scan = counting_scan  # type: ignore[method-assign]
    medium.get = counting_get  # type: ignore[method-assign]
    runs = RoleSet(medium=medium).runs
    for i in range(300):
        run = runs.create(agent_id="agent")
        if i < 290:  # a long finished history, ten pending
            # A lease long enough to outlast a loaded machine between the claim and the completion.
            claim = runs.claim(run.run_id, worker_id="w", ttl_ms=60_000)
            runs.complete(run.run_id, token=claim.token)
    runs.claim_next(worker_id="w", ttl_ms=60_000)  # builds the grouping: one scan
    calls.update(scan=0, get=0)
    claim = runs.claim_next(worker_id="w", ttl_ms=60_000)
    assert claim is not None
    assert calls["scan"] == 0
    # The one running run (live claim) and the first pending one, plus the grant's own reads.
    assert calls["get"] <= 4, calls
    calls.update(scan=0, get=0)
    assert len(runs.list(status="succeeded", limit=5)) == 5
    assert calls == {"scan": 0, "get": 5}


def test_a_reader_lists_runs_the_writer_changed_after_it_refreshes(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    with memcommit.open(path) as writer:
        first = writer.runs.create(agent_id="a")
        with memcommit.open(path, read_only=True) as reader:
            assert [r.run_id for r in reader.runs.list(status="pending")] == [first.run_id]
            second = writer.runs.create(agent_id="a")
            claim = writer.runs.claim(first.run_id, worker_id="w", ttl_ms=60_000)
            writer.runs.complete(first.run_id, token=claim.token)
            assert reader.refresh() > 0
            assert [r.run_id for r in reader.runs.list(status="pending")] == [second.run_id]
            assert [r.run_id for r in reader.runs.list(status="succeeded")] == [first.run_id]


def test_the_queue_survives_a_reopen_and_log_compaction(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    with memcommit.open(path) as store:
        made = [store.runs.create(agent_id="a").run_id for _ in range(5)]
        store.runs.list(status="pending")  # builds the grouping before compaction
        claim = store.runs.claim_next(worker_id="w", ttl_ms=60_000)
        assert claim is not None and claim.run.run_id == made[0]
        report = compact(store)
        assert report.after < report.before  # the log was rewritten; the store moved onto it
        claim = store.runs.claim_next(worker_id="w", ttl_ms=60_000)
        assert claim is not None and claim.run.run_id == made[1]
        assert [r.run_id for r in store.runs.list(status="pending")] == made[2:]
    with memcommit.open(path) as store:
        assert [r.run_id for r in store.runs.list(status="running")] == made[:2]
        claim = store.runs.claim_next(worker_id="w", ttl_ms=60_000)
        assert claim is not None and claim.run.run_id == made[2]


def test_the_run_queue_benchmark_runs_at_a_small_size() -> None:
    """benches/run_queue.py prints one row per figure and contender (a broken bench fails)."""
    script = Path(__file__).parent.parent / "benches" / "run_queue.py"
    out = subprocess.run(
        [sys.executable, str(script), "--runs", "120", "--open", "20", "--calls", "5"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    rows = [line for line in out.splitlines() if line.startswith("| 120 |")]
    assert len(rows) == 10, out
    assert {row.split("|")[2].strip() for row in rows} == {"log store", "in memory"}


@pytest.mark.parametrize("where", ["log", "memory", "plain medium"])
def test_deleting_a_run_removes_its_turns_and_only_them_as_turns_come_and_go(
    tmp_path: Path, where: str
) -> None:
    store = None
    if where == "log":
        store = memcommit.open(str(tmp_path / "runs.db"), durability="none")
        roles: Roles = store
    else:
        roles = RoleSet(medium=PlainMedium() if where == "plain medium" else None)
    runs, talk = roles.runs, roles.conversations
    a, b = talk.create().conversation_id, talk.create().conversation_id
    made = [runs.create(agent_id="agent").run_id for _ in range(4)]
    talk.append(a, [NewTurn("user", "r0 in a")], run_id=made[0])
    talk.append(b, [NewTurn("user", "r1 in b")], run_id=made[1])
    assert runs.delete(made[0])  # builds the turns' grouping by run (where one is kept)
    # Turns written after the grouping was built are found by the next delete.
    talk.append(a, [NewTurn("user", "r1 in a"), NewTurn("user", "r1 in a, too")], run_id=made[1])
    talk.append(a, [NewTurn("user", "r2 in a")], run_id=made[2])
    talk.append(b, [NewTurn("user", "r3 in b")], run_id=made[3])
    assert runs.delete(made[1])
    left_a = [(t.content, t.run_id) for t in talk.list_turns(a)]
    left_b = [(t.content, t.run_id) for t in talk.list_turns(b)]
    assert left_a == [("r2 in a", made[2])]
    assert left_b == [("r3 in b", made[3])]
    assert runs.delete(made[2])
    assert talk.list_turns(a) == []
    assert [t.content for t in talk.list_turns(b)] == ["r3 in b"]
    if store is not None:
        store.close()


class _Counting:
    """The store's engine, counting the role states read from it (entries are not states)."""

    def __init__(self, native: object) -> None:
        self._native = native
        self.runs_read = 0

    def entity(self, key: str) -> bytes | None:
        self.runs_read += key.startswith(RUN + "\x00")
        return self._native.entity(key)  # type: ignore[attr-defined, no-any-return]

    def entities_of(self, keys: list[str]) -> list[bytes | None]:
        self.runs_read += sum(k.startswith(RUN + "\x00") for k in keys)
        return self._native.entities_of(keys)  # type: ignore[attr-defined, no-any-return]

    def __getattr__(self, name: str) -> object:
        return getattr(self._native, name)


def _history(store: memcommit.MemoryStore, finished: int, pending: int) -> list[str]:
    """`finished` runs created, claimed and completed, then `pending` more; their ids."""
    runs = store.runs
    made = []
    for i in range(finished + pending):
        run = runs.create(agent_id="agent", run_id=f"run-{i:04d}")
        made.append(run.run_id)
        if i < finished:
            # A lease long enough to outlast a loaded machine between the claim and the completion.
            claim = runs.claim(run.run_id, worker_id="w", ttl_ms=60_000)
            runs.complete(run.run_id, token=claim.token)
    return made


def test_after_a_reopen_the_first_claim_reads_only_the_runs_it_walks(tmp_path: Path) -> None:
    path = str(tmp_path / "runs.db")
    with memcommit.open(path) as store:
        made = _history(store, 300, 5)
    for round_ in range(2):  # the second open loads the index file the first close wrote
        with memcommit.open(path) as store:
            counting = _Counting(store.medium._native)  # type: ignore[union-attr]
            store.medium._native = counting  # type: ignore[union-attr, assignment]
            claim = store.runs.claim_next(worker_id="w", ttl_ms=60_000)
            assert claim is not None and claim.run.run_id == made[300 + round_]
            # The first pending run (and the grant's own reads), not 305 runs.
            assert counting.runs_read <= 2, counting.runs_read
            counting.runs_read = 0
            done = store.runs.list(status="succeeded", limit=5)
            assert [r.run_id for r in done] == made[:5]
            assert counting.runs_read == 5
            store.runs.complete(claim.run.run_id, token=claim.token)
    with memcommit.open(path, read_only=True) as reader:
        succeeded = [r.run_id for r in reader.runs.list(status="succeeded")]
        assert succeeded == made[:302]
        assert [r.run_id for r in reader.runs.list(status="pending")] == made[302:]


@contextlib.contextmanager
def _before_the_queue_was_kept(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Write as a store did before its run queue was kept in the log: with no entries."""
    with monkeypatch.context() as old:
        old.delitem(KEPT, RUN)
        old.delitem(KEPT, TURN)
        yield


def test_a_store_written_before_the_queue_was_kept_is_read_then_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "runs.db")
    with _before_the_queue_was_kept(monkeypatch), memcommit.open(path) as store:
        made = _history(store, 40, 3)
        talk = store.conversations
        conversation = talk.create().conversation_id
        talk.append(conversation, [NewTurn("user", "hi")], run_id=made[41])
    assert RUN in KEPT and TURN in KEPT
    entries = entry_kind(RUN, "by_status") + "\x00"
    with memcommit.open(path, read_only=True) as reader:
        # A reader cannot write the entries: it reads the runs as before.
        assert [r.run_id for r in reader.runs.list(status="pending")] == made[40:]
        assert reader.engine.view().entity_count(entries) == 0
    with memcommit.open(path) as store:
        lsn = store.lsn
        # The first to ask passes a grouper of its own: the entries the log keeps are still
        # the declared grouping's, which every later write keeps up.
        grouping = store.medium.grouping(RUN, "by_status", lambda s: None)  # type: ignore[union-attr]
        assert isinstance(grouping, LoggedGrouping)
        assert store.lsn == lsn + 1 + 43, "the writer kept the queue: its marker and 43 entries"
        assert [r.run_id for r in store.runs.list(status="succeeded", limit=3)] == made[:3]
        assert store.engine.view().entity_count(entries) == 43
        assert store.medium.count() == len(store.medium.scan(RUN)) + store.medium.count(  # type: ignore[union-attr]
            "counter"
        ) + store.medium.count("conversation") + store.medium.count(TURN), "entries are not counted"  # type: ignore[union-attr]
        claim = store.runs.claim_next(worker_id="w", ttl_ms=60_000)
        assert claim is not None and claim.run.run_id == made[40]
        # The turns' grouping is kept by the first write of a turn... or a delete that reads it.
        assert store.runs.delete(made[41])
        assert store.conversations.list_turns(conversation) == []
    with memcommit.open(path) as store:
        assert [r.run_id for r in store.runs.list(status="running")] == [made[40]]
        assert [r.run_id for r in store.runs.list(status="pending")] == [made[42]]


def test_the_kept_queue_agrees_with_the_runs_across_reopens_readers_and_compaction(
    tmp_path: Path,
) -> None:
    clock = ControllableClock()
    rng = random.Random(20261203)
    path = str(tmp_path / "runs.db")
    for round_ in range(6):
        with memcommit.open(path, clock=clock, durability="none") as store:
            _check(store)  # as reopened
            _drive(store, clock, rng, 30)
            _check(store)
            with memcommit.open(path, read_only=True) as reader:
                _check(reader)
            if round_ % 2:
                compact(store)
                _check(store)
