"""Contract: recorded effects (research/roles.md 4.6; ROLES.md decision 3)."""

# Test methods say what they check in their names; only some need a docstring.
# ruff: noqa: D102

from __future__ import annotations

import pytest

from ...roles import ClaimLostError, EffectConflictError, EffectRecord, RunNotFoundError
from ..race import race
from .harness import Harness, fresh_id, fresh_run, fresh_sized_id, stated_most

TTL = 1_000


class TestEffects:
    """Side effects recorded once."""

    def test_record_on_an_unknown_run_raises(self, harness: Harness) -> None:
        """Decision 3: effects check the run like steps, checkpoints and turns."""
        run_id = fresh_id("run")
        with pytest.raises(RunNotFoundError) as caught:
            harness.store.effects.record(run_id, "charge", result={"ok": True})
        assert caught.value.run_id == run_id
        assert harness.store.effects.get(run_id, "charge") is None

    def test_record_once(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        run_id = fresh_run(harness.store)
        first = store.effects.record(run_id, "charge", result={"id": "ch_1"}, fingerprint="f")
        assert (first.run_id, first.effect_key, first.seq) == (run_id, "charge", 1)
        assert (first.outcome, first.result, first.error) == ("succeeded", {"id": "ch_1"}, None)
        assert first.recorded_at_ms == clock.now_ms()
        clock.advance(100)
        again = store.effects.record(run_id, "charge", result={"id": "ch_1"}, fingerprint="f")
        assert again == first
        assert store.effects.get(run_id, "charge") == first

    def test_conflicting_record(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        first = store.effects.record(run_id, "charge", result={"id": "ch_1"}, fingerprint="f")
        for kwargs in (
            {"result": {"id": "ch_2"}, "fingerprint": "f"},
            {"result": {"id": "ch_1"}, "fingerprint": "g"},
            {"result": {"id": "ch_1"}},
            {"result": {"id": "ch_1"}, "error": "e", "fingerprint": "f"},
        ):
            with pytest.raises(EffectConflictError) as caught:
                store.effects.record(run_id, "charge", **kwargs)
            assert (caught.value.run_id, caught.value.effect_key) == (run_id, "charge")
        assert store.effects.get(run_id, "charge") == first

    def test_failure_outcome(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        failed = store.effects.record(run_id, "email", error={"status": 503})
        assert (failed.outcome, failed.error, failed.result) == ("failed", {"status": 503}, None)
        assert store.effects.record(run_id, "email", error={"status": 503}) == failed
        with pytest.raises(EffectConflictError):
            store.effects.record(run_id, "email", result="sent")
        assert store.effects.get(run_id, "email") == failed

    def test_get_list_and_isolation(self, harness: Harness) -> None:
        store = harness.store
        a, b = fresh_run(harness.store), fresh_run(harness.store)
        assert store.effects.get(a, "missing") is None
        recorded = [store.effects.record(a, key, result=key) for key in ("z", "a", "m")]
        other = store.effects.record(b, "z", result="other")
        assert store.effects.list(a) == recorded
        assert [r.seq for r in recorded] == [1, 2, 3]
        assert store.effects.list(b) == [other]
        assert store.effects.get(a, "z") == recorded[0]

    def test_concurrent_records_of_one_key(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        outcomes = race(16, lambda i: store.effects.record(run_id, "charge", result={"by": i}))
        records = [o for o in outcomes if isinstance(o, EffectRecord)]
        errors = [o for o in outcomes if isinstance(o, Exception)]
        assert len(records) == 1
        assert len(errors) == 15 and all(isinstance(e, EffectConflictError) for e in errors)
        assert store.effects.list(run_id) == records

    def test_concurrent_identical_records(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        outcomes = race(16, lambda i: store.effects.record(run_id, "charge", result="same"))
        assert all(isinstance(o, EffectRecord) for o in outcomes)
        assert len({o.seq for o in outcomes}) == 1  # type: ignore[union-attr]

    def test_fencing(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        run_id = fresh_run(harness.store)
        old = store.runs.claim(run_id, worker_id="a", ttl_ms=TTL)
        clock.advance(TTL)
        new = store.runs.claim(run_id, worker_id="b", ttl_ms=TTL)
        with pytest.raises(ClaimLostError):
            store.effects.record(run_id, "charge", result="stale", token=old.token)
        assert store.effects.list(run_id) == []
        fresh = store.effects.record(run_id, "charge", result="fresh", token=new.token)
        assert store.effects.list(run_id) == [fresh]

    def test_result_mutated_after_record(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        result = {"items": [1, 2]}
        store.effects.record(run_id, "e", result=result)
        result["items"].append(3)
        got = store.effects.get(run_id, "e")
        assert got is not None and got.result == {"items": [1, 2]}

    def test_an_effect_key_too_long_for_its_keys_is_refused_naming_it(
        self, harness: Harness
    ) -> None:
        store = harness.store
        run_id = fresh_run(store)
        with pytest.raises(ValueError) as caught:
            store.effects.record(run_id, fresh_sized_id("effect", 1000), result=1)
        message = str(caught.value)
        assert message.startswith("effect_key: 1000 bytes is too long; an effect's effect_key")
        assert getattr(caught.value, "code", None) == "invalid_value"
        most = stated_most(message)
        longest, longer = fresh_sized_id("effect", most), fresh_sized_id("effect", most + 1)
        recorded = store.effects.record(run_id, longest, result=1)
        with pytest.raises(ValueError, match=f"^effect_key: {most + 1} bytes is too long;"):
            store.effects.record(run_id, longer, result=1)
        assert store.effects.list(run_id) == [recorded]
