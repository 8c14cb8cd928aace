"""Idempotency keys: do a piece of work once, and answer its retries with the first result.

A caller reserves a key for ``ttl_ms``; the one that gets ``acquired=True`` does the
work and completes the key with the result (or releases it on failure). Every
other caller sees the pending or completed record. A key has one expiry, ``expires_at_ms``:
a pending reservation not completed by then can be taken over (and its holder's token is
refused), and ``complete(ttl_ms=...)`` sets how long the result is kept. Tokens rise per key
for the life of the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from ._base import RoleBase, Token, live, same_or_conflict, writes
from .errors import IdempotencyConflictError
from .medium import COUNTER, IDEMPOTENCY, WHAT, Change, KeyRoom, State, bump_counter, full_key
from .values import (
    Json,
    JsonIn,
    OptionalCount,
    Text,
    check_optional_text,
    check_text,
    check_ttl,
    checked,
    record_reader,
)

__all__ = [
    "IdempotencyRecord",
    "IdempotencyRepository",
    "MemoryIdempotencyRepository",
    "Reservation",
]


@dataclass(frozen=True)
class IdempotencyRecord:
    """The live state of an idempotency key.

    Attributes:
        key: The key.
        state: ``pending`` (reserved, work in progress) or ``completed``.
        token: The reservation's token; rises per key, never reused.
        owner: Who reserved it, if they said.
        fingerprint: The caller's hash of the request, if given.
        result: The completed work's result (None while pending).
        created_at_ms: When this reservation was made.
        expires_at_ms: When the key expires (live while ``now < expires_at_ms``).
    """

    key: str
    state: Literal["pending", "completed"]
    token: int
    owner: str | None
    fingerprint: str | None
    result: Json
    created_at_ms: int
    expires_at_ms: int


@dataclass(frozen=True)
class Reservation:
    """What :meth:`IdempotencyRepository.reserve` answered; truthy when acquired.

    Attributes:
        acquired: True: the caller must do the work, then ``complete`` or ``release``.
            False: someone else holds the key; `record` shows whether the work is pending
            or completed (with its result).
        record: The key's record.
    """

    acquired: bool
    record: IdempotencyRecord

    def __bool__(self) -> bool:
        return self.acquired


class IdempotencyRepository(Protocol):
    """The ``idempotency`` role: keys that let work happen once."""

    def reserve(
        self,
        key: str,
        *,
        ttl_ms: int,
        fingerprint: str | None = None,
        owner: str | None = None,
    ) -> Reservation:
        """Reserve `key` for ``ttl_ms`` unless it is live.

        A missing or expired key gets a new pending reservation with the next token,
        expiring at ``now + ttl_ms``. A live key is returned with ``acquired=False``.

        Raises:
            IdempotencyConflictError: The key is live for another fingerprint (both given).
        """
        ...

    def complete(
        self, key: str, *, token: int, result: Json = None, ttl_ms: int | None = None
    ) -> IdempotencyRecord:
        """Record the result of the reserved work.

        With `ttl_ms` the key then expires at ``now + ttl_ms`` (the retention window);
        otherwise the reservation's expiry stays. Completing again with the same token and
        an equal result returns the record unchanged.

        Raises:
            LeaseLostError: `token` is stale, or its reservation expired or was released.
            IdempotencyConflictError: Already completed with a different result.
        """
        ...

    def release(self, key: str, *, token: int) -> bool:
        """Drop a live pending reservation (the work failed); False if `token` does not hold it."""
        ...

    def get(self, key: str) -> IdempotencyRecord | None:
        """Return the key's record, or None when it is absent or expired."""
        ...

    def purge_expired(self, *, limit: int | None = None) -> int:
        """Remove expired records (at most `limit`); return how many. Reads do not change."""
        ...


_record = record_reader(IdempotencyRecord)

_TOKENS = "idempotency.token"
"""The counter of each key's last token."""

_KEYS = KeyRoom(
    WHAT[IDEMPOTENCY], lambda key: (full_key(IDEMPOTENCY, key), full_key(COUNTER, _TOKENS, key))
)
"""The keys of an idempotency record: its own and its token counter's."""


def _pending(state: State) -> bool:
    return bool(state["state"] == "pending")


class MemoryIdempotencyRepository(RoleBase):
    """The in-memory ``idempotency`` role.

    Args:
        clock: The clock for expiry and stamps (default :class:`SystemClock`).
        medium: Where the entities live; a store passes the medium its roles share.
    """

    @writes
    @checked
    def reserve(
        self,
        key: Text,
        *,
        ttl_ms: int,
        fingerprint: str | None = None,
        owner: str | None = None,
    ) -> Reservation:
        """Reserve a key. See :meth:`IdempotencyRepository.reserve`."""
        ttl_ms = check_ttl(ttl_ms)
        fingerprint = check_optional_text(fingerprint, "fingerprint")
        owner = check_optional_text(owner, "owner")
        _KEYS.check(key=key)
        with self._medium.lock:
            now = self._now()
            ekey, state = self._read(IDEMPOTENCY, key)
            if live(state, now):
                stored = state["fingerprint"]
                if fingerprint is not None and stored is not None and stored != fingerprint:
                    raise IdempotencyConflictError(
                        f"idempotency key {key!r} is live for fingerprint {stored!r}, "
                        f"not {fingerprint!r}",
                        key=key,
                    )
                return Reservation(acquired=False, record=_record(state))
            token, token_change = bump_counter(self._medium, _TOKENS, key)
            new: State = {
                "key": key,
                "state": "pending",
                "token": token,
                "owner": owner,
                "fingerprint": fingerprint,
                "result": None,
                "created_at_ms": now,
                "expires_at_ms": now + ttl_ms,
            }
            record = self._save(IDEMPOTENCY, ekey, new, _record, token_change)
            return Reservation(acquired=True, record=record)

    @writes
    @checked
    def complete(
        self, key: Text, *, token: Token, result: JsonIn = None, ttl_ms: int | None = None
    ) -> IdempotencyRecord:
        """Record the result. See :meth:`IdempotencyRepository.complete`."""
        ttl_ms = None if ttl_ms is None else check_ttl(ttl_ms)
        with self._medium.lock:
            ekey, state, now = self._held_lease(IDEMPOTENCY, _TOKENS, key, token)
            if state["state"] == "completed":
                return same_or_conflict(
                    state,
                    _record,
                    {"result": result},
                    lambda: IdempotencyConflictError(
                        f"idempotency key {key!r} is already completed with another result; "
                        "the first result stands",
                        key=key,
                    ),
                )
            expires = state["expires_at_ms"] if ttl_ms is None else now + ttl_ms
            new = {**state, "state": "completed", "result": result, "expires_at_ms": expires}
            return self._save(IDEMPOTENCY, ekey, new, _record)

    @writes
    @checked
    def release(self, key: Text, *, token: Token) -> bool:
        """Drop a pending reservation. See :meth:`IdempotencyRepository.release`."""
        return self._release_held(IDEMPOTENCY, key, token, _pending)

    def get(self, key: str) -> IdempotencyRecord | None:
        """Return the live record, or None. See :meth:`IdempotencyRepository.get`."""
        return self._lookup_live(IDEMPOTENCY, _record, check_text(key, "key"))

    @writes
    @checked
    def purge_expired(self, *, limit: OptionalCount = None) -> int:
        """Remove expired records. See :meth:`IdempotencyRepository.purge_expired`."""
        with self._medium.lock:
            now = self._now()
            changes: list[Change] = []
            for ekey, state in self._medium.scan(IDEMPOTENCY):
                if limit is not None and len(changes) >= limit:
                    break
                if not live(state, now):
                    changes.append((IDEMPOTENCY, ekey, None))
            return self._delete(changes)


if TYPE_CHECKING:
    _: type[IdempotencyRepository] = MemoryIdempotencyRepository
