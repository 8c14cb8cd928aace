"""Contract: steps (research/roles.md 4.2)."""

# Test methods say what they check in their names; only some need a docstring.
# ruff: noqa: D102

from __future__ import annotations

import pytest

from ...errors import InvalidValue
from ...roles import (
    ClaimLostError,
    InvalidStateError,
    RunNotFoundError,
    StepConflictError,
    StepNotFoundError,
)
from .harness import Harness, fresh_id, fresh_run, fresh_sized_id, stated_most

TTL = 1_000


class TestSteps:
    """The orchestration journal."""

    def test_start_of_an_unknown_run_raises(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_id("run")
        with pytest.raises(RunNotFoundError):
            store.steps.start(run_id, "1", name="fetch")
        assert store.steps.list(run_id) == []
        assert store.steps.get(run_id, "1") is None

    def test_start_records_a_new_step(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        run_id = fresh_run(harness.store)
        step = store.steps.start(run_id, "1", name="fetch", input={"url": "u"})
        assert (step.run_id, step.step_id, step.name) == (run_id, "1", "fetch")
        assert (step.seq, step.attempt, step.status) == (1, 1, "running")
        assert step.input == {"url": "u"}
        assert step.output is None and step.error is None and step.finished_at_ms is None
        assert step.started_at_ms == clock.now_ms()
        assert store.steps.get(run_id, "1") == step

    def test_retry_keeps_seq_and_counts_attempts(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        run_id = fresh_run(harness.store)
        first = store.steps.start(run_id, "1", name="fetch")
        failed = store.steps.fail(run_id, "1", error={"kind": "timeout"})
        assert (failed.status, failed.error) == ("failed", {"kind": "timeout"})
        assert failed.finished_at_ms == clock.now_ms()
        clock.advance(5)
        retried = store.steps.start(run_id, "1", name="fetch")
        assert (retried.seq, retried.attempt, retried.status) == (first.seq, 2, "running")
        assert retried.error is None and retried.started_at_ms == clock.now_ms()
        done = store.steps.complete(run_id, "1", output="ok")
        assert (done.status, done.output, done.attempt) == ("succeeded", "ok", 2)

    def test_name_mismatch_is_a_conflict(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        first = store.steps.start(run_id, "1", name="fetch")
        with pytest.raises(StepConflictError) as caught:
            store.steps.start(run_id, "1", name="search")
        assert caught.value.reason == "name_mismatch"
        assert (caught.value.run_id, caught.value.step_id) == (run_id, "1")
        assert store.steps.get(run_id, "1") == first

    def test_complete_is_idempotent_for_an_equal_output(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        run_id = fresh_run(harness.store)
        store.steps.start(run_id, "1", name="fetch")
        done = store.steps.complete(run_id, "1", output={"a": [1, 2]})
        clock.advance(5)
        assert store.steps.complete(run_id, "1", output={"a": [1, 2]}) == done
        with pytest.raises(StepConflictError) as caught:
            store.steps.complete(run_id, "1", output={"a": [1, 3]})
        assert caught.value.reason == "output_mismatch"
        assert store.steps.get(run_id, "1") == done

    def test_equal_outputs_are_equal_json(self, harness: Harness) -> None:
        """1, 1.0 and True are three JSON documents; key order is not significant."""
        store = harness.store
        run_id = fresh_run(harness.store)
        store.steps.start(run_id, "1", name="n")
        done = store.steps.complete(run_id, "1", output={"a": 1, "b": 2})
        assert store.steps.complete(run_id, "1", output={"b": 2, "a": 1}) == done
        for other in ({"a": True, "b": 2}, {"a": 1.0, "b": 2}):
            with pytest.raises(StepConflictError):
                store.steps.complete(run_id, "1", output=other)
        assert store.steps.get(run_id, "1") == done

    def test_complete_or_fail_of_a_step_never_started(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        with pytest.raises(StepNotFoundError) as caught:
            store.steps.complete(run_id, "9", output=1)
        assert (caught.value.run_id, caught.value.step_id) == (run_id, "9")
        with pytest.raises(StepNotFoundError):
            store.steps.fail(run_id, "9", error="x")
        assert store.steps.list(run_id) == []

    def test_fail_after_success_is_invalid(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        store.steps.start(run_id, "1", name="fetch")
        done = store.steps.complete(run_id, "1", output=1)
        with pytest.raises(InvalidStateError) as caught:
            store.steps.fail(run_id, "1", error="late")
        assert (caught.value.current, caught.value.attempted) == ("succeeded", "fail")
        assert store.steps.get(run_id, "1") == done

    def test_complete_of_a_failed_step_is_invalid(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        store.steps.start(run_id, "1", name="fetch")
        failed = store.steps.fail(run_id, "1", error="e")
        assert store.steps.fail(run_id, "1", error="e") == failed
        with pytest.raises(InvalidStateError):
            store.steps.complete(run_id, "1", output=1)
        assert store.steps.get(run_id, "1") == failed

    def test_start_of_a_succeeded_step_replays_it(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        run_id = fresh_run(harness.store)
        store.steps.start(run_id, "1", name="fetch")
        done = store.steps.complete(run_id, "1", output="result")
        clock.advance(50)
        replayed = store.steps.start(run_id, "1", name="fetch")
        assert replayed == done
        assert replayed.attempt == 1

    def test_list_is_in_first_start_order(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        for step_id in ("9", "10", "2"):
            store.steps.start(run_id, step_id, name=f"s{step_id}")
        store.steps.complete(run_id, "2", output=1)
        store.steps.complete(run_id, "9", output=1)
        store.steps.fail(run_id, "10", error=1)
        store.steps.start(run_id, "10", name="s10")
        listed = store.steps.list(run_id)
        assert [s.step_id for s in listed] == ["9", "10", "2"]
        assert [s.seq for s in listed] == [1, 2, 3]
        assert [s.step_id for s in store.steps.list(run_id, after_seq=1)] == ["10", "2"]
        assert [s.step_id for s in store.steps.list(run_id, limit=2)] == ["9", "10"]
        assert [s.step_id for s in store.steps.list(run_id, after_seq=1, limit=1)] == ["10"]

    def test_same_step_id_in_two_runs_is_independent(self, harness: Harness) -> None:
        store = harness.store
        a, b = fresh_run(harness.store), fresh_run(harness.store)
        store.steps.start(a, "1", name="fetch")
        other = store.steps.start(b, "1", name="search")
        store.steps.complete(a, "1", output="a")
        assert store.steps.get(b, "1") == other
        assert other.seq == 1

    def test_fencing(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        agent = fresh_id("agent")
        run_id = store.runs.create(agent_id=agent, run_id=fresh_id("run")).run_id
        old = store.runs.claim(run_id, worker_id="a", ttl_ms=TTL)
        started = store.steps.start(run_id, "1", name="fetch", token=old.token)
        clock.advance(TTL)
        new = store.runs.claim(run_id, worker_id="b", ttl_ms=TTL)
        with pytest.raises(ClaimLostError):
            store.steps.start(run_id, "2", name="other", token=old.token)
        with pytest.raises(ClaimLostError):
            store.steps.complete(run_id, "1", output="stale", token=old.token)
        with pytest.raises(ClaimLostError):
            store.steps.fail(run_id, "1", error="stale", token=old.token)
        assert store.steps.list(run_id) == [started]
        done = store.steps.complete(run_id, "1", output="fresh", token=new.token)
        assert done.output == "fresh"

    def test_a_step_id_too_long_for_its_keys_is_refused_naming_it(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(store)
        with pytest.raises(InvalidValue) as caught:
            store.steps.start(run_id, fresh_sized_id("step", 1000), name="n")
        message = str(caught.value)
        assert message.startswith("step_id: 1000 bytes is too long; a step's step_id (with its ")
        assert " with this run_id: " in message
        most = stated_most(message)
        longest, longer = fresh_sized_id("step", most), fresh_sized_id("step", most + 1)
        started = store.steps.start(run_id, longest, name="n")
        with pytest.raises(InvalidValue, match=f"^step_id: {most + 1} bytes is too long;"):
            store.steps.start(run_id, longer, name="n")
        assert store.steps.list(run_id) == [started]
