"""Contract: locks (research/roles.md 4.5; ROLES.md decisions 1, 2 and 11)."""

# Test methods say what they check in their names; only some need a docstring.
# ruff: noqa: D102

from __future__ import annotations

import pytest

from ...errors import InvalidValue
from ...roles import Lease, LeaseLostError
from ..race import race
from .harness import Harness, fresh_id, fresh_sized_id, stated_most

TTL = 1_000


def _acquired(harness: Harness) -> tuple[str, Lease]:
    """Acquire a fresh lock for owner "a"; return its name and the lease."""
    name = fresh_id("lock")
    lease = harness.store.locks.acquire(name, "a", TTL)
    assert lease is not None
    return name, lease


def _taken_over(harness: Harness) -> tuple[str, Lease]:
    """Let owner "a"'s lease on a fresh lock expire and owner "b" take it; return b's."""
    name = fresh_id("lock")
    harness.store.locks.acquire(name, "a", TTL)
    harness.clock.advance(TTL)
    current = harness.store.locks.acquire(name, "b", TTL)
    assert current is not None
    return name, current


class TestLocks:
    """Named leases with fencing tokens."""

    def test_seed_example_positional_form(self, harness: Harness) -> None:
        """The seed's lock example, as written (positional owner and ttl_ms)."""
        store, clock = harness.store, harness.clock
        job = fresh_id("job")
        assert store.locks.acquire(job, "replica-a", 1_000)  # truthy: a Lease
        assert not store.locks.acquire(job, "replica-b", 1_000)  # None: held by replica-a
        clock.advance(1_000)  # a lease expires at exactly T + ttl_ms
        lease = store.locks.acquire(job, "replica-b", 1_000)
        assert lease
        assert lease.owner == "replica-b"
        assert lease.token == 2

    def test_acquire_a_free_lock(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        t0 = clock.now_ms()
        name, lease = _acquired(harness)
        assert (lease.name, lease.owner, lease.token) == (name, "a", 1)
        assert (lease.acquired_at_ms, lease.expires_at_ms) == (t0, t0 + TTL)
        assert store.locks.acquire(name, "b", TTL) is None
        assert store.locks.get(name) == lease

    def test_get_of_a_free_lock_is_none(self, harness: Harness) -> None:
        assert harness.store.locks.get(fresh_id("lock")) is None

    def test_expiry_boundary(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        name, first = _acquired(harness)
        clock.advance(TTL - 1)
        assert store.locks.get(name) == first
        assert store.locks.acquire(name, "b", TTL) is None
        clock.advance(1)
        assert store.locks.get(name) is None
        second = store.locks.acquire(name, "b", TTL)
        assert second is not None
        assert second.token == 2

    def test_fencing_counter_never_resets(self, harness: Harness) -> None:
        """Decision 11: tokens rise per name through release and expiry."""
        store, clock = harness.store, harness.clock
        name, other = fresh_id("lock"), fresh_id("lock")
        first = store.locks.acquire(name, "a", TTL)
        assert first is not None and first.token == 1
        assert store.locks.release(name, token=1)
        second = store.locks.acquire(name, "b", TTL)
        assert second is not None and second.token == 2
        clock.advance(TTL)
        third = store.locks.acquire(name, "c", TTL)
        assert third is not None and third.token == 3
        independent = store.locks.acquire(other, "a", TTL)
        assert independent is not None and independent.token == 1

    def test_same_owner_reacquire_keeps_the_token(self, harness: Harness) -> None:
        """Decision 1: the live holder gets the same token, expiry reset to now + ttl."""
        store, clock = harness.store, harness.clock
        name, first = _acquired(harness)
        clock.advance(600)
        again = store.locks.acquire(name, "a", 2 * TTL)
        assert again is not None
        assert again.token == first.token
        assert again.expires_at_ms == clock.now_ms() + 2 * TTL
        assert store.locks.get(name) == again

    def test_same_owner_after_expiry_gets_a_new_token(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        name = fresh_id("lock")
        store.locks.acquire(name, "a", TTL)
        clock.advance(TTL)
        again = store.locks.acquire(name, "a", TTL)
        assert again is not None and again.token == 2

    def test_renew_extends_from_now(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        t0 = clock.now_ms()
        name, lease = _acquired(harness)
        clock.advance(500)
        renewed = store.locks.renew(name, token=lease.token, ttl_ms=TTL)
        assert renewed.expires_at_ms == t0 + 1_500
        assert renewed.token == lease.token
        clock.set(t0 + 1_499)
        assert store.locks.get(name) == renewed
        clock.set(t0 + 1_500)
        assert store.locks.get(name) is None

    def test_renew_after_expiry_fails(self, harness: Harness) -> None:
        """Decision 2: renewing an expired lease fails even when nobody took over."""
        store, clock = harness.store, harness.clock
        name, lease = _acquired(harness)
        clock.advance(TTL)
        with pytest.raises(LeaseLostError) as caught:
            store.locks.renew(name, token=lease.token, ttl_ms=TTL)
        assert caught.value.reason == "expired"
        assert caught.value.resource == name
        assert caught.value.token == lease.token
        assert caught.value.current_token is None
        assert store.locks.get(name) is None

    def test_renew_with_a_stale_token_fails_and_changes_nothing(self, harness: Harness) -> None:
        store = harness.store
        name, current = _taken_over(harness)
        with pytest.raises(LeaseLostError) as caught:
            store.locks.renew(name, token=1, ttl_ms=5 * TTL)
        assert caught.value.reason == "stale"
        assert caught.value.current_token == current.token
        assert store.locks.get(name) == current

    def test_release_refusals_leave_the_lease(self, harness: Harness) -> None:
        store = harness.store
        name, current = _taken_over(harness)
        assert store.locks.release(name, token=1) is False  # stale
        assert store.locks.release(name, token=99) is False  # never issued
        assert store.locks.get(name) == current
        assert store.locks.release(name, token=current.token) is True
        assert store.locks.release(name, token=current.token) is False  # double release
        assert store.locks.get(name) is None

    def test_release_after_expiry_is_false(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        name, lease = _acquired(harness)
        clock.advance(TTL)
        assert store.locks.release(name, token=lease.token) is False
        again = store.locks.acquire(name, "b", TTL)
        assert again is not None and again.token == 2

    def test_release_of_an_unknown_lock_is_false(self, harness: Harness) -> None:
        assert harness.store.locks.release(fresh_id("lock"), token=1) is False

    def test_validate(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        name, lease = _acquired(harness)
        assert store.locks.validate(name, token=lease.token) is None
        clock.advance(TTL)
        with pytest.raises(LeaseLostError) as expired:
            store.locks.validate(name, token=lease.token)
        assert expired.value.reason == "expired"
        taken = store.locks.acquire(name, "b", TTL)
        assert taken is not None
        with pytest.raises(LeaseLostError) as stale:
            store.locks.validate(name, token=lease.token)
        assert stale.value.reason == "stale"
        assert stale.value.current_token == taken.token
        assert store.locks.release(name, token=taken.token)
        with pytest.raises(LeaseLostError) as released:
            store.locks.validate(name, token=taken.token)
        assert released.value.reason == "released"

    def test_concurrent_acquire_has_one_winner_per_round(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        name = fresh_id("lock")
        tokens = []
        for _ in range(3):
            outcomes = race(16, lambda i: store.locks.acquire(name, f"owner-{i}", TTL))
            assert not any(isinstance(o, Exception) for o in outcomes)
            winners = [o for o in outcomes if isinstance(o, Lease)]
            assert len(winners) == 1 and outcomes.count(None) == 15
            tokens.append(winners[0].token)
            clock.advance(TTL)
        assert tokens == [1, 2, 3]

    def test_a_name_too_long_for_its_key_is_refused_naming_it(self, harness: Harness) -> None:
        """The same limit on every store: the lock's key and its token counter's must fit."""
        store = harness.store
        with pytest.raises(InvalidValue) as caught:
            store.locks.acquire(fresh_sized_id("lock", 2000), "owner", TTL)
        assert str(caught.value) == (
            "name: 2000 bytes is too long; a lock's name (with its other key parts) may be "
            "at most 998 bytes: pass a shorter one (a digest of a long one, say)"
        )
        longest, longer = fresh_sized_id("lock", 998), fresh_sized_id("lock", 999)
        lease = store.locks.acquire(longest, "owner", TTL)
        assert lease is not None and store.locks.get(longest) == lease
        with pytest.raises(InvalidValue, match=r"^name: 999 bytes is too long;"):
            store.locks.acquire(longer, "owner", TTL)
        assert store.locks.get(longer) is None
        assert stated_most(str(caught.value)) == 998
