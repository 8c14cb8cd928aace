"""Contract: idempotency keys (research/roles.md 4.4; ROLES.md decision 6)."""

# Test methods say what they check in their names; only some need a docstring.
# ruff: noqa: D102

from __future__ import annotations

import pytest

from ...roles import IdempotencyConflictError, LeaseLostError
from ..race import race
from .harness import Harness, fresh_id, fresh_sized_id, stated_most

TTL = 1_000


class TestIdempotency:
    """Keys that let work happen once."""

    def test_reserve_a_new_key(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        key = fresh_id("key")
        t0 = clock.now_ms()
        reservation = store.idempotency.reserve(key, ttl_ms=TTL, fingerprint="fp", owner="w1")
        assert reservation.acquired is True
        record = reservation.record
        assert (record.key, record.state, record.token) == (key, "pending", 1)
        assert (record.owner, record.fingerprint, record.result) == ("w1", "fp", None)
        assert (record.created_at_ms, record.expires_at_ms) == (t0, t0 + TTL)
        assert store.idempotency.get(key) == record

    def test_get_of_an_unknown_key_is_none(self, harness: Harness) -> None:
        assert harness.store.idempotency.get(fresh_id("key")) is None

    def test_second_reserve_while_live(self, harness: Harness) -> None:
        store = harness.store
        key = fresh_id("key")
        first = store.idempotency.reserve(key, ttl_ms=TTL)
        second = store.idempotency.reserve(key, ttl_ms=TTL)
        assert second.acquired is False
        assert second.record == first.record

    def test_expiry_boundary_and_takeover(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        key = fresh_id("key")
        t0 = clock.now_ms()
        store.idempotency.reserve(key, ttl_ms=TTL, owner="A")
        clock.set(t0 + TTL - 1)
        held = store.idempotency.reserve(key, ttl_ms=TTL, owner="B")
        assert held.acquired is False and held.record.state == "pending"
        clock.set(t0 + TTL)
        assert store.idempotency.get(key) is None
        taken = store.idempotency.reserve(key, ttl_ms=TTL, owner="B")
        assert taken.acquired is True and taken.record.token == 2
        with pytest.raises(LeaseLostError) as caught:
            store.idempotency.complete(key, token=1, result="A's")
        assert caught.value.reason == "stale"
        assert caught.value.current_token == 2
        assert store.idempotency.get(key) == taken.record
        done = store.idempotency.complete(key, token=2, result="B's")
        assert (done.state, done.result, done.token) == ("completed", "B's", 2)

    def test_complete_after_expiry_fails(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        key = fresh_id("key")
        reservation = store.idempotency.reserve(key, ttl_ms=TTL)
        clock.advance(TTL)
        with pytest.raises(LeaseLostError) as caught:
            store.idempotency.complete(key, token=reservation.record.token, result=1)
        assert caught.value.reason == "expired"
        assert store.idempotency.get(key) is None

    def test_fingerprint_conflict(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        key = fresh_id("key")
        first = store.idempotency.reserve(key, ttl_ms=TTL, fingerprint="a")
        with pytest.raises(IdempotencyConflictError) as caught:
            store.idempotency.reserve(key, ttl_ms=TTL, fingerprint="b")
        assert caught.value.key == key
        assert store.idempotency.get(key) == first.record
        same = store.idempotency.reserve(key, ttl_ms=TTL, fingerprint="a")
        assert same.acquired is False
        unfingerprinted = store.idempotency.reserve(key, ttl_ms=TTL)
        assert unfingerprinted.acquired is False
        clock.advance(TTL)
        after = store.idempotency.reserve(key, ttl_ms=TTL, fingerprint="b")
        assert after.acquired is True and after.record.fingerprint == "b"

    def test_completed_key_replays_its_result(self, harness: Harness) -> None:
        store = harness.store
        key = fresh_id("key")
        reservation = store.idempotency.reserve(key, ttl_ms=TTL, fingerprint="fp")
        result = {"order": 7, "items": [1, 2]}
        done = store.idempotency.complete(key, token=reservation.record.token, result=result)
        result["order"] = 8
        replay = store.idempotency.reserve(key, ttl_ms=TTL, fingerprint="fp")
        assert replay.acquired is False
        assert replay.record == done
        assert replay.record.result == {"order": 7, "items": [1, 2]}
        replay.record.result["items"].append(3)
        got = store.idempotency.get(key)
        assert got is not None and got.result == {"order": 7, "items": [1, 2]}

    def test_complete_ttl_sets_the_retention_window(self, harness: Harness) -> None:
        """Decision 6: one expiry per key; complete(ttl_ms=X) moves it to now + X."""
        store, clock = harness.store, harness.clock
        key = fresh_id("key")
        reservation = store.idempotency.reserve(key, ttl_ms=TTL)
        clock.advance(400)
        t1 = clock.now_ms()
        done = store.idempotency.complete(
            key, token=reservation.record.token, result="r", ttl_ms=10 * TTL
        )
        assert done.expires_at_ms == t1 + 10 * TTL
        clock.set(t1 + 10 * TTL - 1)
        assert store.idempotency.get(key) == done
        clock.set(t1 + 10 * TTL)
        assert store.idempotency.get(key) is None
        assert store.idempotency.reserve(key, ttl_ms=TTL).acquired is True

    def test_complete_without_ttl_keeps_the_reservation_expiry(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        key = fresh_id("key")
        reservation = store.idempotency.reserve(key, ttl_ms=TTL)
        clock.advance(400)
        done = store.idempotency.complete(key, token=reservation.record.token, result="r")
        assert done.expires_at_ms == reservation.record.expires_at_ms
        clock.set(reservation.record.expires_at_ms)
        assert store.idempotency.get(key) is None

    def test_complete_twice(self, harness: Harness) -> None:
        store = harness.store
        key = fresh_id("key")
        token = store.idempotency.reserve(key, ttl_ms=TTL).record.token
        done = store.idempotency.complete(key, token=token, result={"a": 1})
        assert store.idempotency.complete(key, token=token, result={"a": 1}) == done
        with pytest.raises(IdempotencyConflictError):
            store.idempotency.complete(key, token=token, result={"a": 2})
        assert store.idempotency.get(key) == done

    def test_release(self, harness: Harness) -> None:
        store = harness.store
        key = fresh_id("key")
        first = store.idempotency.reserve(key, ttl_ms=TTL)
        assert store.idempotency.release(key, token=99) is False
        assert store.idempotency.get(key) == first.record
        assert store.idempotency.release(key, token=1) is True
        assert store.idempotency.get(key) is None
        assert store.idempotency.release(key, token=1) is False
        with pytest.raises(LeaseLostError) as caught:
            store.idempotency.complete(key, token=1, result="late")
        assert caught.value.reason == "released"
        again = store.idempotency.reserve(key, ttl_ms=TTL)
        assert again.acquired is True and again.record.token == 2

    def test_release_of_a_completed_key_is_false(self, harness: Harness) -> None:
        store = harness.store
        key = fresh_id("key")
        token = store.idempotency.reserve(key, ttl_ms=TTL).record.token
        done = store.idempotency.complete(key, token=token, result=1)
        assert store.idempotency.release(key, token=token) is False
        assert store.idempotency.get(key) == done

    def test_purge_expired(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        expired, live = fresh_id("key"), fresh_id("key")
        store.idempotency.reserve(expired, ttl_ms=TTL)
        clock.advance(TTL - 1)
        live_record = store.idempotency.reserve(live, ttl_ms=TTL).record
        clock.advance(1)
        assert store.idempotency.get(expired) is None
        assert store.idempotency.purge_expired() >= 1
        assert store.idempotency.get(live) == live_record
        clock.advance(TTL - 2)
        store.idempotency.purge_expired()
        assert store.idempotency.get(live) == live_record  # live at T + ttl - 1: kept
        after = store.idempotency.reserve(expired, ttl_ms=TTL)
        assert after.acquired is True and after.record.token == 2

    def test_purge_limit(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        keys = [fresh_id("key") for _ in range(3)]
        for key in keys:
            store.idempotency.reserve(key, ttl_ms=TTL)
        clock.advance(TTL)
        assert store.idempotency.purge_expired(limit=2) == 2
        assert store.idempotency.purge_expired() >= 1
        assert all(store.idempotency.get(key) is None for key in keys)

    def test_concurrent_reserve_has_one_winner(self, harness: Harness) -> None:
        store = harness.store
        key = fresh_id("key")
        outcomes = race(16, lambda i: store.idempotency.reserve(key, ttl_ms=TTL, owner=f"w{i}"))
        assert not any(isinstance(o, Exception) for o in outcomes)
        acquired = [o for o in outcomes if o.acquired]  # type: ignore[union-attr]
        assert len(acquired) == 1
        tokens = {o.record.token for o in outcomes}  # type: ignore[union-attr]
        assert tokens == {1}

    def test_a_key_too_long_for_its_entity_key_is_refused_naming_it(self, harness: Harness) -> None:
        store = harness.store
        with pytest.raises(
            ValueError, match=r"^key: 1500 bytes is too long; an idempotency"
        ) as caught:
            store.idempotency.reserve(fresh_sized_id("key", 1500), ttl_ms=TTL)
        assert getattr(caught.value, "code", None) == "invalid_value"
        most = stated_most(str(caught.value))
        longest, longer = fresh_sized_id("key", most), fresh_sized_id("key", most + 1)
        assert store.idempotency.reserve(longest, ttl_ms=TTL).acquired
        with pytest.raises(ValueError, match=f"^key: {most + 1} bytes is too long;"):
            store.idempotency.reserve(longer, ttl_ms=TTL)
        assert store.idempotency.get(longer) is None
