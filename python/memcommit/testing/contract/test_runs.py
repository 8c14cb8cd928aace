"""Contract: runs and their claims (research/roles.md 4.1; ROLES.md decisions 4 and 11)."""

# Test methods say what they check in their names; only some need a docstring.
# ruff: noqa: D102

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ...errors import InvalidValue
from ...roles import (
    AlreadyClaimedError,
    Claim,
    ClaimLostError,
    InvalidStateError,
    NewTurn,
    RunAlreadyExistsError,
    RunNotFoundError,
)
from ..race import race
from .harness import Harness, fresh_id, fresh_sized_id, stated_most

TTL = 1_000


def _pending(store: Any, agent: str, n: int = 1, **kwargs: Any) -> list[str]:
    ids = []
    for _ in range(n):
        ids.append(store.runs.create(agent_id=agent, run_id=fresh_id("run"), **kwargs).run_id)
    return ids


def _claimed(harness: Harness) -> tuple[str, str, Claim]:
    """Create a run of a fresh agent and have worker "A" claim it; return agent, run, claim."""
    agent = fresh_id("agent")
    (run_id,) = _pending(harness.store, agent)
    claim = harness.store.runs.claim_next(worker_id="A", ttl_ms=TTL, agent_id=agent)
    assert claim is not None
    return agent, run_id, claim


class TestRuns:
    """Runs, claims, fencing and the run foreign key."""

    def test_create_and_get(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        run_id, agent = fresh_id("run"), fresh_id("agent")
        run = store.runs.create(
            agent_id=agent, input={"q": [1, "x"]}, run_id=run_id, metadata={"m": True}
        )
        assert (run.run_id, run.agent_id, run.status) == (run_id, agent, "pending")
        assert (run.input, run.metadata) == ({"q": [1, "x"]}, {"m": True})
        assert (run.attempt, run.claimed_by, run.claim_expires_at_ms) == (0, None, None)
        assert run.output is None and run.error is None and run.revision_id is None
        assert run.created_at_ms == run.updated_at_ms == clock.now_ms()
        assert store.runs.get(run_id) == run
        assert store.runs.exists(run_id) is True

    def test_create_with_an_existing_id_keeps_the_original(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        (run_id,) = _pending(store, agent, input="first")
        before = store.runs.get(run_id)
        with pytest.raises(RunAlreadyExistsError) as caught:
            store.runs.create(agent_id=agent, run_id=run_id, input="second")
        assert caught.value.run_id == run_id
        assert store.runs.get(run_id) == before

    def test_create_without_an_id_assigns_distinct_ids(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        ids = {store.runs.create(agent_id=agent).run_id for _ in range(5)}
        assert len(ids) == 5
        assert all(store.runs.exists(i) for i in ids)

    def test_reads_of_an_unknown_run_return_none_or_empty(self, harness: Harness) -> None:
        """Decision 4: reads of an unknown run return None or []."""
        store = harness.store
        run_id = fresh_id("run")
        assert store.runs.get(run_id) is None
        assert store.runs.exists(run_id) is False
        assert store.steps.get(run_id, "1") is None
        assert store.steps.list(run_id) == []
        assert store.checkpoints.get(run_id) is None
        assert store.checkpoints.list(run_id) == []
        assert store.effects.get(run_id, "e") is None
        assert store.effects.list(run_id) == []

    def test_writes_to_an_unknown_run_raise(self, harness: Harness) -> None:
        """Decisions 3 and 4: every write naming an unknown run raises RunNotFoundError."""
        store = harness.store
        run_id = fresh_id("run")
        conversation = store.conversations.create(conversation_id=fresh_id("conv"))
        writes: list[Callable[[], object]] = [
            lambda: store.runs.claim(run_id, worker_id="w", ttl_ms=TTL),
            lambda: store.runs.heartbeat(run_id, token=1, ttl_ms=TTL),
            lambda: store.runs.check_claim(run_id, token=1),
            lambda: store.runs.release(run_id, token=1),
            lambda: store.runs.complete(run_id, token=1),
            lambda: store.runs.fail(run_id, token=1, error="x"),
            lambda: store.runs.suspend(run_id, token=1),
            lambda: store.runs.resume(run_id),
            lambda: store.runs.cancel(run_id),
            lambda: store.steps.start(run_id, "1", name="n"),
            lambda: store.steps.complete(run_id, "1"),
            lambda: store.steps.fail(run_id, "1", error="x"),
            lambda: store.checkpoints.put(run_id, state={}),
            lambda: store.effects.record(run_id, "e", result=1),
            lambda: store.conversations.append(
                conversation.conversation_id, [NewTurn("user", "hi")], run_id=run_id
            ),
        ]
        for write in writes:
            with pytest.raises(RunNotFoundError) as caught:
                write()
            assert caught.value.run_id == run_id
        assert store.runs.get(run_id) is None
        assert store.steps.list(run_id) == []
        assert store.checkpoints.list(run_id) == []
        assert store.effects.list(run_id) == []
        assert store.conversations.list_turns(conversation.conversation_id) == []
        assert store.conversations.get(conversation.conversation_id) == conversation

    def test_delete_of_an_unknown_run_is_false(self, harness: Harness) -> None:
        assert harness.store.runs.delete(fresh_id("run")) is False

    def test_claim_boundary(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        t0 = clock.now_ms()
        agent, run_id, first = _claimed(harness)
        assert (first.run.run_id, first.token, first.worker_id) == (run_id, 1, "A")
        assert first.expires_at_ms == t0 + TTL
        assert first.run.status == "running" and first.run.attempt == 1
        clock.set(t0 + TTL - 1)
        assert store.runs.claim_next(worker_id="B", ttl_ms=TTL, agent_id=agent) is None
        with pytest.raises(AlreadyClaimedError) as caught:
            store.runs.claim(run_id, worker_id="B", ttl_ms=TTL)
        assert (caught.value.resource, caught.value.holder) == (run_id, "A")
        assert caught.value.expires_at_ms == t0 + TTL
        clock.set(t0 + TTL)
        second = store.runs.claim_next(worker_id="B", ttl_ms=TTL, agent_id=agent)
        assert second is not None
        assert (second.run.run_id, second.token, second.worker_id) == (run_id, 2, "B")

    def test_claim_of_a_live_claim_raises_even_for_the_holder(self, harness: Harness) -> None:
        store = harness.store
        (run_id,) = _pending(store, fresh_id("agent"))
        claim = store.runs.claim(run_id, worker_id="A", ttl_ms=TTL)
        with pytest.raises(AlreadyClaimedError):
            store.runs.claim(run_id, worker_id="A", ttl_ms=TTL)
        assert store.runs.get(run_id) == claim.run

    def test_stale_token_after_takeover_is_refused_everywhere(self, harness: Harness) -> None:
        """Decision 11: a stale token is refused on every holder write, leaving no trace."""
        store, clock = harness.store, harness.clock
        agent = fresh_id("agent")
        (run_id,) = _pending(store, agent)
        conversation = store.conversations.create(conversation_id=fresh_id("conv"))
        conversation_id = conversation.conversation_id
        store.runs.claim_next(worker_id="A", ttl_ms=TTL, agent_id=agent)
        clock.advance(TTL)
        taken = store.runs.claim_next(worker_id="B", ttl_ms=TTL, agent_id=agent)
        assert taken is not None and taken.token == 2
        before = store.runs.get(run_id)
        writes: list[Callable[[], object]] = [
            lambda: store.runs.heartbeat(run_id, token=1, ttl_ms=TTL),
            lambda: store.runs.complete(run_id, token=1, output="late"),
            lambda: store.runs.fail(run_id, token=1, error="late"),
            lambda: store.runs.release(run_id, token=1),
            lambda: store.runs.suspend(run_id, token=1),
            lambda: store.runs.check_claim(run_id, token=1),
            lambda: store.steps.start(run_id, "1", name="n", token=1),
            lambda: store.checkpoints.put(run_id, state={"late": True}, token=1),
            lambda: store.effects.record(run_id, "e", result="late", token=1),
            lambda: store.conversations.append(
                conversation_id, [NewTurn("assistant", "late")], run_id=run_id, token=1
            ),
        ]
        for write in writes:
            with pytest.raises(ClaimLostError) as caught:
                write()
            assert caught.value.reason == "stale"
            assert (caught.value.resource, caught.value.token) == (run_id, 1)
            assert caught.value.current_token == 2
        assert store.runs.get(run_id) == before
        assert store.steps.list(run_id) == []
        assert store.checkpoints.list(run_id) == []
        assert store.effects.list(run_id) == []
        assert store.conversations.list_turns(conversation_id) == []
        assert store.conversations.get(conversation_id) == conversation

    def test_fenced_write_interleaved_with_a_takeover(self, harness: Harness) -> None:
        """A write prepared under A's claim lands after B took over: refused, B unharmed."""
        store, clock = harness.store, harness.clock
        agent, run_id, a = _claimed(harness)
        store.steps.start(run_id, "1", name="fetch", token=a.token)

        def late_write() -> object:
            return store.steps.complete(run_id, "1", output="from A", token=a.token)

        clock.advance(TTL)
        b = store.runs.claim_next(worker_id="B", ttl_ms=TTL, agent_id=agent)
        assert b is not None
        b_step = store.steps.start(run_id, "1", name="fetch", token=b.token)
        with pytest.raises(ClaimLostError):
            late_write()
        assert store.steps.get(run_id, "1") == b_step
        assert store.runs.get(run_id) == b.run

    def test_expired_claim_is_lost_even_when_not_taken(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        agent, run_id, _ = _claimed(harness)
        clock.advance(TTL)
        with pytest.raises(ClaimLostError) as caught:
            store.runs.heartbeat(run_id, token=1, ttl_ms=TTL)
        assert caught.value.reason == "expired"
        assert caught.value.current_token is None
        with pytest.raises(ClaimLostError):
            store.runs.complete(run_id, token=1)
        again = store.runs.claim_next(worker_id="A", ttl_ms=TTL, agent_id=agent)
        assert again is not None and again.token == 2

    def test_heartbeat_extends_from_now(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        t0 = clock.now_ms()
        agent, run_id, claim = _claimed(harness)
        clock.set(t0 + 500)
        beat = store.runs.heartbeat(run_id, token=claim.token, ttl_ms=TTL)
        assert beat.expires_at_ms == t0 + 1_500 and beat.token == claim.token
        assert beat.run.updated_at_ms == t0 + 500
        clock.set(t0 + 1_499)
        assert store.runs.claim_next(worker_id="B", ttl_ms=TTL, agent_id=agent) is None
        store.runs.check_claim(run_id, token=claim.token)
        clock.set(t0 + 1_500)
        taken = store.runs.claim_next(worker_id="B", ttl_ms=TTL, agent_id=agent)
        assert taken is not None and taken.run.run_id == run_id

    def test_fifo_with_equal_timestamps(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        ids = _pending(store, agent, 3)
        claimed = []
        for _ in ids:
            claim = store.runs.claim_next(worker_id="w", ttl_ms=TTL, agent_id=agent)
            assert claim is not None
            claimed.append(claim.run.run_id)
        assert claimed == ids
        assert store.runs.claim_next(worker_id="w", ttl_ms=TTL, agent_id=agent) is None

    def test_available_at(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        agent = fresh_id("agent")
        t0 = clock.now_ms()
        (run_id,) = _pending(store, agent, available_at_ms=t0 + 100)
        clock.set(t0 + 99)
        assert store.runs.claim_next(worker_id="w", ttl_ms=TTL, agent_id=agent) is None
        with pytest.raises(InvalidStateError):
            store.runs.claim(run_id, worker_id="w", ttl_ms=TTL)
        clock.set(t0 + 100)
        claim = store.runs.claim_next(worker_id="w", ttl_ms=TTL, agent_id=agent)
        assert claim is not None and claim.run.run_id == run_id
        released = store.runs.release(run_id, token=claim.token, available_at_ms=t0 + 300)
        assert released.status == "pending" and released.claimed_by is None
        assert released.attempt == claim.token and released.available_at_ms == t0 + 300
        clock.set(t0 + 299)
        assert store.runs.claim_next(worker_id="w", ttl_ms=TTL, agent_id=agent) is None
        clock.set(t0 + 300)
        again = store.runs.claim_next(worker_id="w", ttl_ms=TTL, agent_id=agent)
        assert again is not None and again.token == 2

    def test_complete_fail_and_terminal_runs(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        agent = fresh_id("agent")
        done_id, failed_id = _pending(store, agent, 2)
        done_claim = store.runs.claim(done_id, worker_id="w", ttl_ms=TTL)
        failed_claim = store.runs.claim(failed_id, worker_id="w", ttl_ms=TTL)
        clock.advance(10)
        done = store.runs.complete(done_id, token=done_claim.token, output={"answer": 42})
        assert (done.status, done.output, done.updated_at_ms) == (
            "succeeded",
            {"answer": 42},
            clock.now_ms(),
        )
        failed = store.runs.fail(failed_id, token=failed_claim.token, error={"kind": "boom"})
        assert (failed.status, failed.error) == ("failed", {"kind": "boom"})
        clock.advance(10 * TTL)
        assert store.runs.claim_next(worker_id="w", ttl_ms=TTL, agent_id=agent) is None
        for run_id in (done_id, failed_id):
            with pytest.raises(InvalidStateError):
                store.runs.claim(run_id, worker_id="w", ttl_ms=TTL)
            with pytest.raises(ClaimLostError) as caught:
                store.runs.heartbeat(run_id, token=1, ttl_ms=TTL)
            assert caught.value.reason == "not_active"
        assert store.runs.get(done_id) == done
        assert store.runs.get(failed_id) == failed

    def test_suspend_and_resume(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        (run_id,) = _pending(store, agent)
        claim = store.runs.claim(run_id, worker_id="w", ttl_ms=TTL)
        suspended = store.runs.suspend(run_id, token=claim.token, reason={"waiting": "human"})
        assert (suspended.status, suspended.reason) == ("suspended", {"waiting": "human"})
        assert store.runs.claim_next(worker_id="w", ttl_ms=TTL, agent_id=agent) is None
        with pytest.raises(InvalidStateError):
            store.runs.claim(run_id, worker_id="w", ttl_ms=TTL)
        with pytest.raises(ClaimLostError) as caught:
            store.runs.check_claim(run_id, token=claim.token)
        assert caught.value.reason == "not_active"
        resumed = store.runs.resume(run_id)
        assert resumed.status == "pending"
        with pytest.raises(InvalidStateError):
            store.runs.resume(run_id)
        again = store.runs.claim_next(worker_id="w", ttl_ms=TTL, agent_id=agent)
        assert again is not None and again.token == 2

    def test_cancel(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        running_id, done_id = _pending(store, agent, 2)
        claim = store.runs.claim(running_id, worker_id="w", ttl_ms=TTL)
        cancelled = store.runs.cancel(running_id, reason="user asked")
        assert (cancelled.status, cancelled.reason) == ("cancelled", "user asked")
        with pytest.raises(ClaimLostError) as caught:
            store.runs.complete(running_id, token=claim.token)
        assert caught.value.reason == "not_active"
        with pytest.raises(ClaimLostError):
            store.steps.start(running_id, "1", name="n", token=claim.token)
        assert store.runs.cancel(running_id, reason="again") == cancelled
        assert store.runs.get(running_id) == cancelled
        done_claim = store.runs.claim(done_id, worker_id="w", ttl_ms=TTL)
        done = store.runs.complete(done_id, token=done_claim.token)
        with pytest.raises(InvalidStateError) as refused:
            store.runs.cancel(done_id)
        assert (refused.value.current, refused.value.attempted) == ("succeeded", "cancel")
        assert store.runs.get(done_id) == done
        assert store.runs.claim_next(worker_id="w", ttl_ms=TTL, agent_id=agent) is None

    def test_cancel_of_a_pending_run(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        (run_id,) = _pending(store, agent)
        assert store.runs.cancel(run_id).status == "cancelled"
        assert store.runs.claim_next(worker_id="w", ttl_ms=TTL, agent_id=agent) is None

    def test_tokens_strictly_increase(self, harness: Harness) -> None:
        """Decision 11: release, expiry and takeover never reuse a token."""
        store, clock = harness.store, harness.clock
        agent = fresh_id("agent")
        (run_id,) = _pending(store, agent)
        first = store.runs.claim(run_id, worker_id="a", ttl_ms=TTL)
        store.runs.release(run_id, token=first.token)
        second = store.runs.claim(run_id, worker_id="b", ttl_ms=TTL)
        clock.advance(TTL)
        third = store.runs.claim(run_id, worker_id="c", ttl_ms=TTL)
        assert [first.token, second.token, third.token] == [1, 2, 3]
        run = store.runs.get(run_id)
        assert run is not None and run.attempt == 3

    def test_release_makes_the_token_dead(self, harness: Harness) -> None:
        store = harness.store
        (run_id,) = _pending(store, fresh_id("agent"))
        claim = store.runs.claim(run_id, worker_id="a", ttl_ms=TTL)
        store.runs.release(run_id, token=claim.token)
        with pytest.raises(ClaimLostError) as caught:
            store.runs.check_claim(run_id, token=claim.token)
        assert caught.value.reason == "released"

    def test_delete_and_recreate_never_reuses_tokens(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        (run_id,) = _pending(store, agent)
        first = store.runs.claim(run_id, worker_id="a", ttl_ms=TTL)
        assert store.runs.delete(run_id) is True
        store.runs.create(agent_id=agent, run_id=run_id)
        again = store.runs.claim(run_id, worker_id="b", ttl_ms=TTL)
        assert again.token > first.token
        with pytest.raises(ClaimLostError):
            store.runs.check_claim(run_id, token=first.token)

    def test_list(self, harness: Harness) -> None:
        store = harness.store
        agent, other = fresh_id("agent"), fresh_id("agent")
        ids = _pending(store, agent, 3)
        _pending(store, other)
        store.runs.claim(ids[1], worker_id="w", ttl_ms=TTL)
        assert [r.run_id for r in store.runs.list(agent_id=agent)] == ids
        assert [r.run_id for r in store.runs.list(agent_id=agent, status="pending")] == [
            ids[0],
            ids[2],
        ]
        assert [
            r.run_id for r in store.runs.list(agent_id=agent, status=["running", "succeeded"])
        ] == [ids[1]]
        assert [r.run_id for r in store.runs.list(agent_id=agent, limit=2)] == ids[:2]
        first = store.runs.get(ids[0])
        assert first is not None
        after = store.runs.list(agent_id=agent, after_seq=first.seq)
        assert [r.run_id for r in after] == ids[1:]
        seqs = [r.seq for r in store.runs.list(agent_id=agent)]
        assert seqs == sorted(seqs) and len(set(seqs)) == 3

    def test_concurrent_claim_next_on_one_run(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        (run_id,) = _pending(store, agent)
        outcomes = race(
            16, lambda i: store.runs.claim_next(worker_id=f"w{i}", ttl_ms=TTL, agent_id=agent)
        )
        claims = [o for o in outcomes if o is not None]
        assert len(claims) == 1
        assert outcomes.count(None) == 15
        assert claims[0].run.run_id == run_id  # type: ignore[union-attr]

    def test_concurrent_claim_next_on_many_runs(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        ids = _pending(store, agent, 16)
        outcomes = race(
            16, lambda i: store.runs.claim_next(worker_id=f"w{i}", ttl_ms=TTL, agent_id=agent)
        )
        claimed = {o.run.run_id for o in outcomes if o is not None}  # type: ignore[union-attr]
        assert claimed == set(ids)

    def test_delete_cascades(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        run_id, other_id = _pending(store, agent, 2)
        conversation_id = store.conversations.create(conversation_id=fresh_id("c")).conversation_id
        store.steps.start(run_id, "1", name="n")
        store.checkpoints.put(run_id, state={"s": 1})
        store.effects.record(run_id, "e", result=1)
        store.conversations.append(conversation_id, [NewTurn("user", "mine")], run_id=run_id)
        kept = store.conversations.append(
            conversation_id, [NewTurn("user", "other")], run_id=other_id
        )
        other_step = store.steps.start(other_id, "1", name="n")
        assert store.runs.delete(run_id) is True
        assert store.runs.get(run_id) is None
        assert store.steps.list(run_id) == []
        assert store.checkpoints.list(run_id) == []
        assert store.effects.list(run_id) == []
        assert store.conversations.list_turns(conversation_id) == kept
        assert store.steps.list(other_id) == [other_step]
        with pytest.raises(RunNotFoundError):
            store.steps.start(run_id, "2", name="n")
        with pytest.raises(RunNotFoundError):
            store.effects.record(run_id, "e2", result=1)
        assert store.runs.delete(run_id) is False

    def test_revision_is_pinned_at_creation(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        r1 = store.agent_revisions.create_draft(agent, {"v": 1})
        store.agent_revisions.publish(agent, r1.revision_id)
        (run_id,) = _pending(store, agent, revision_id=r1.revision_id)
        r2 = store.agent_revisions.create_draft(agent, {"v": 2})
        store.agent_revisions.publish(agent, r2.revision_id)
        run = store.runs.get(run_id)
        assert run is not None and run.revision_id == r1.revision_id
        current = store.agent_revisions.get_current(agent)
        assert current is not None and current.revision_id == r2.revision_id

    def test_a_run_id_too_long_for_the_runs_keys_is_refused_naming_it(
        self, harness: Harness
    ) -> None:
        """The limit leaves room for every key a run brings: its claims, its statuses, its parts."""
        store = harness.store
        agent = fresh_id("agent")
        with pytest.raises(InvalidValue) as caught:
            store.runs.create(agent_id=agent, run_id=fresh_sized_id("run", 1000))
        message = str(caught.value)
        assert message.startswith("run_id: 1000 bytes is too long; a run's run_id (with its ")
        most = stated_most(message)
        longest, longer = fresh_sized_id("run", most), fresh_sized_id("run", most + 1)
        store.runs.create(agent_id=agent, run_id=longest)
        claim = store.runs.claim(longest, worker_id="w", ttl_ms=TTL)
        store.steps.start(longest, "s", name="n", token=claim.token)
        store.checkpoints.put(longest, state={}, token=claim.token)
        store.effects.record(longest, "e", result=1, token=claim.token)
        store.runs.suspend(longest, token=claim.token)
        store.runs.resume(longest)
        cancelled = store.runs.cancel(longest)
        assert cancelled.status == "cancelled" and cancelled.attempt == 1
        with pytest.raises(InvalidValue, match=f"^run_id: {most + 1} bytes is too long;"):
            store.runs.create(agent_id=agent, run_id=longer)
        assert store.runs.get(longer) is None
        assert [run.run_id for run in store.runs.list(agent_id=agent)] == [longest]

    def test_an_input_too_large_for_one_record_is_refused_naming_it(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_id("run")
        with pytest.raises(InvalidValue) as caught:
            store.runs.create(
                agent_id=fresh_id("agent"), run_id=run_id, input={"text": "x" * (16 * 2**20)}
            )
        assert str(caught.value).startswith(
            "input: 16777227 bytes as JSON is too large for one record; with the rest of a run, "
            "input may be at most "
        )
        assert store.runs.get(run_id) is None
