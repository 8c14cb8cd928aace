"""Locks: named leases with fencing tokens.

``acquire(name, owner, ttl_ms)`` returns a :class:`Lease` (truthy) or ``None`` when another
owner holds the name. A lease taken at T is live while ``now < T + ttl_ms``. Every grant gets
a token one above the last token of that name, for the life of the store (release and expiry
never reset it), so a resource that remembers the highest token it has seen can refuse a late
write from a holder whose lease ran out. The live holder acquiring again gets the same token
with its expiry reset (so a caller can recover from a lost response); owners must therefore be
unique per holder instance.

Example:
    >>> from memcommit.testing import ControllableClock
    >>> clock = ControllableClock()
    >>> locks = MemoryLockRepository(clock=clock)
    >>> bool(locks.acquire("job", "replica-a", 1_000))
    True
    >>> locks.acquire("job", "replica-b", 1_000) is None
    True
    >>> clock.advance(1_000)
    >>> locks.acquire("job", "replica-b", 1_000).token
    2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ._base import RoleBase, Token, live, writes
from .medium import COUNTER, LOCK, WHAT, KeyRoom, bump_counter, full_key
from .values import Text, check_text, check_ttl, checked, record_reader

__all__ = ["Lease", "LockRepository", "MemoryLockRepository"]


@dataclass(frozen=True)
class Lease:
    """A held lock.

    Attributes:
        name: The lock.
        owner: Who holds it.
        token: The fencing token: rises per name, never reused.
        acquired_at_ms: When this lease was granted.
        expires_at_ms: When it expires unless renewed (live while ``now < expires_at_ms``).
    """

    name: str
    owner: str
    token: int
    acquired_at_ms: int
    expires_at_ms: int


class LockRepository(Protocol):
    """The ``locks`` role: named leases."""

    def acquire(self, name: str, owner: str, ttl_ms: int) -> Lease | None:
        """Take the lock for ``ttl_ms``, or return None if another owner holds it.

        A free or expired lock gets a new lease with the next token. The live holder
        acquiring again gets the same token, expiring at ``now + ttl_ms``.

        Raises:
            TypeError: `ttl_ms` is not an int (a bool or a float included).
            ValueError: `ttl_ms` is not positive, or longer than 100 years
                (:data:`~memcommit.roles.values.MAX_TTL_MS`).
        """
        ...

    def renew(self, name: str, *, token: int, ttl_ms: int) -> Lease:
        """Extend a live lease to ``now + ttl_ms``.

        Raises:
            LeaseLostError: `token` does not hold a live lease (an expired lease is lost even
                when nobody took it over).
        """
        ...

    def release(self, name: str, *, token: int) -> bool:
        """Free the lock if `token` holds it live; False otherwise (nothing changes)."""
        ...

    def get(self, name: str) -> Lease | None:
        """Return the live lease, or None when the lock is free or expired."""
        ...

    def validate(self, name: str, *, token: int) -> None:
        """Raise :class:`LeaseLostError` unless `token` holds a live lease (a sequencer check)."""
        ...


_lease = record_reader(Lease)

_TOKENS = "locks.token"
"""The counter of each name's last token."""

_KEYS = KeyRoom(WHAT[LOCK], lambda name: (full_key(LOCK, name), full_key(COUNTER, _TOKENS, name)))
"""The keys of a lock: its own and its token counter's."""


class MemoryLockRepository(RoleBase):
    """The in-memory ``locks`` role.

    Args:
        clock: The clock for expiry (default :class:`SystemClock`).
        medium: Where the entities live; a store passes the medium its roles share.
    """

    @writes
    @checked
    def acquire(self, name: Text, owner: Text, ttl_ms: int) -> Lease | None:
        """Take the lock or return None. See :meth:`LockRepository.acquire`."""
        ttl_ms = check_ttl(ttl_ms)
        _KEYS.check(name=name)
        with self._medium.lock:
            now = self._now()
            key, state = self._read(LOCK, name)
            if live(state, now):
                if state["owner"] != owner:
                    return None
                new = {**state, "expires_at_ms": now + ttl_ms}
                return self._save(LOCK, key, new, _lease)
            token, token_change = bump_counter(self._medium, _TOKENS, name)
            new = {
                "name": name,
                "owner": owner,
                "token": token,
                "acquired_at_ms": now,
                "expires_at_ms": now + ttl_ms,
            }
            return self._save(LOCK, key, new, _lease, token_change)

    @writes
    @checked
    def renew(self, name: Text, *, token: Token, ttl_ms: int) -> Lease:
        """Extend a live lease. See :meth:`LockRepository.renew`."""
        ttl_ms = check_ttl(ttl_ms)
        with self._medium.lock:
            key, state, now = self._held_lease(LOCK, _TOKENS, name, token)
            new = {**state, "expires_at_ms": now + ttl_ms}
            return self._save(LOCK, key, new, _lease)

    @writes
    @checked
    def release(self, name: Text, *, token: Token) -> bool:
        """Free the lock. See :meth:`LockRepository.release`."""
        return self._release_held(LOCK, name, token)

    def get(self, name: str) -> Lease | None:
        """Return the live lease, or None. See :meth:`LockRepository.get`."""
        return self._lookup_live(LOCK, _lease, check_text(name, "name"))

    @checked
    def validate(self, name: Text, *, token: Token) -> None:
        """Check a token. See :meth:`LockRepository.validate`.

        Raises:
            LeaseLostError: `token` does not hold a live lease.
        """
        with self._medium.lock:
            self._held_lease(LOCK, _TOKENS, name, token)


if TYPE_CHECKING:
    _: type[LockRepository] = MemoryLockRepository
