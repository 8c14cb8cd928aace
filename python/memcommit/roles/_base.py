"""What every in-memory role shares: clock, medium, operation steps, lease, version, run checks."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Protocol, TypeAlias, TypeGuard, TypeVar, cast

from ..clock import Clock, SystemClock, millisecond_reader
from ..errors import InvalidType, InvalidValue, NotSupported
from .errors import LeaseLostError, LostReason, RunNotFoundError, VersionConflictError
from .medium import (
    WHAT,
    Change,
    KeyPart,
    Medium,
    MemoryMedium,
    State,
    StateTooLarge,
    child_prefix,
    entity_key,
    read_counter,
    state_bytes,
)
from .values import Check, Json, check_count, same_json

__all__ = [
    "Argument",
    "ClaimCheck",
    "HasRun",
    "OptionalToken",
    "RoleBase",
    "RunLinked",
    "Token",
    "check_optional_token",
    "check_token",
    "check_version",
    "holds",
    "lease_lost",
    "live",
    "same_or_conflict",
    "writes",
]

_Record = TypeVar("_Record")
_Method = TypeVar("_Method", bound=Callable[..., Any])

Argument = Callable[[str, str, str], str]
"""``argument(kind, key, field)``: the caller's name for what field `field` of entity
``(kind, key)`` holds, for the message refusing it (the field's own name unless a role says)."""

HasRun = Callable[[str], bool]
"""The ``has_run(run_id)`` lookup: whether the run exists (a foreign key check)."""


class ClaimCheck(Protocol):
    """The ``check_claim(run_id, token=..., now_ms=...)`` lookup.

    It raises unless `token` holds the run at `now_ms` (the instant the calling operation
    read from its clock, so that one operation reads the clock once).
    """

    def __call__(self, run_id: str, *, token: int, now_ms: int | None = None) -> None:
        """Raise :class:`~memcommit.roles.ClaimLostError` unless `token` holds `run_id`."""
        ...


def check_token(token: object, field: str = "token") -> int:
    """Return `token` if it is an int of at least 1 (tokens start at 1)."""
    return check_count(token, field, minimum=1)


def check_optional_token(token: object) -> int | None:
    """Return `token` if it is None (a write without a claim) or what :func:`check_token` takes."""
    return None if token is None else check_token(token)


Token: TypeAlias = Annotated[int, Check(check_token)]
"""A fencing token: an int of at least 1, checked by :func:`check_token`."""
OptionalToken: TypeAlias = Annotated[
    int | None, Check(lambda token, _: check_optional_token(token))
]
"""None (a write without a claim) or a :data:`Token`."""


def check_version(expected: int | None, state: State | None, what: str) -> None:
    """Raise :class:`VersionConflictError` unless `state` is at version `expected`.

    Args:
        expected: The version the write expects (0: no entity); None expects nothing.
        state: The entity (with ``version``), or None when absent (version 0).
        what: What the entity is, for the message.
    """
    if expected is None:
        return
    actual = 0 if state is None else int(state["version"])
    if actual != expected:
        raise VersionConflictError(what=what, expected=expected, actual=actual)


def live(state: State | None, now: int) -> TypeGuard[State]:
    """Whether the lease or reservation `state` (None: absent) is live at `now`.

    Live while ``now < expires_at_ms``: a lease granted at T for ``ttl_ms`` ends at exactly
    ``T + ttl_ms``.
    """
    return state is not None and now < state["expires_at_ms"]


def holds(state: State | None, token: int, now: int) -> TypeGuard[State]:
    """Whether `token` holds the lease or reservation `state` at `now`: live, and its token."""
    return live(state, now) and state["token"] == token


def lease_lost(
    resource: str, token: int, state: State | None, now: int, last_token: int
) -> LeaseLostError:
    """Return the error for `token` not holding the lease `state` (of a lock or a key).

    Args:
        resource: The lock name or idempotency key, for the message.
        token: The token the caller gave.
        state: The lease's entity (with ``token`` and ``expires_at_ms``), or None when absent.
        now: The instant of the operation.
        last_token: The last token handed out for `resource`: when the lease is gone and
            `token` is that one, its holder released it.
    """
    reason: LostReason
    if state is not None and state["token"] == token:
        reason = "expired"
    elif state is None and token == last_token:
        reason = "released"
    else:
        reason = "stale"
    current = state["token"] if live(state, now) else None
    return LeaseLostError(resource=resource, token=token, current_token=current, reason=reason)


def same_or_conflict(
    state: State,
    read: Callable[[State], _Record],
    recorded: Mapping[str, Json],
    conflict: Callable[[], Exception],
) -> _Record:
    """Return the record of `state` if it already holds `recorded`; raise ``conflict()`` otherwise.

    The record-once rule: the first write stands, a repeat with equal values (by
    :func:`~memcommit.roles.values.same_json`) returns it, and a different one is a conflict.

    Args:
        state: The stored entity.
        read: Builds its record.
        recorded: The fields the write gives and their values, to compare with `state`'s.
        conflict: Builds the error for a write with other values.
    """
    if all(same_json(state[field], value) for field, value in recorded.items()):
        return read(state)
    raise conflict()


def writes(method: _Method) -> _Method:
    """Mark a role method as a write: on a read-only store it raises ``ReadOnlyStore`` first.

    First of all, before its arguments are checked and whatever the data: a read-only store
    refuses every write, not only those that would change something (a delete of nothing, a
    purge with nothing expired). The medium says whether its store takes writes: its
    optional ``check_writable()`` (see :mod:`~memcommit.roles.medium`).
    """

    @functools.wraps(method)
    def call(self: RoleBase, *args: Any, **kwargs: Any) -> Any:
        self._check_writable()
        return method(self, *args, **kwargs)

    return cast(_Method, call)


def _takes_writes() -> None:
    """The write check of a medium without ``check_writable()``: it takes writes."""


class RoleBase:
    """A role's clock and medium.

    Args:
        clock: The clock every decision and stamp reads (default :class:`SystemClock`).
        medium: Where the entities live (default: a new :class:`MemoryMedium`, so the
            repository stands alone). Roles given the same medium share its lock.
    """

    def __init__(self, *, clock: Clock | None = None, medium: Medium | None = None) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._medium: Medium = medium if medium is not None else MemoryMedium()
        # A medium whose writes record a time reads the clock itself, once an operation.
        reads = getattr(self._medium, "now_ms", None)
        self._now = reads if callable(reads) else millisecond_reader(self.clock)
        # Whether the role was given its time (a clock, or a medium that reads one), rather
        # than reading the system clock of its own.
        self._given_time = clock is not None or callable(reads)
        # A medium of a store opened read-only raises ReadOnlyStore here; every write calls
        # it first (see :func:`writes`). A medium without it takes writes.
        check = getattr(self._medium, "check_writable", None)
        self._check_writable: Callable[[], None] = check if callable(check) else _takes_writes

    @property
    def medium(self) -> Medium:
        """The medium this repository keeps its entities in."""
        return self._medium

    def _save(
        self, kind: str, key: str, state: State, read: Callable[[State], _Record], *used: Change
    ) -> _Record:
        """Write `state` as entity ``(kind, key)`` and return its record built by `read`.

        One batch: the counter changes in `used` (the numbers `state` took), then `state`.
        Call under the medium's lock, last in the operation.
        """
        self._write([*used, (kind, key, state)])
        return read(state)

    def _write(self, changes: Sequence[Change], argument: Argument | None = None) -> None:
        """Write `changes` as one batch: every entity a role writes goes through here.

        A state too large for one record of the store (the medium raises
        :class:`~memcommit.roles.medium.StateTooLarge`) is refused naming the caller's argument
        that takes the most of it, by `argument` (default: the state's field, which has the
        argument's name), with the room that argument has. Nothing is written then. Call under
        the medium's lock, last in the operation.
        """
        try:
            self._medium.write(changes)
        except StateTooLarge as refused:
            raise self._too_large(refused, changes, argument) from None

    def _too_large(
        self, refused: StateTooLarge, changes: Sequence[Change], argument: Argument | None
    ) -> InvalidValue:
        """The error naming the argument that takes the most of the state `refused` names."""
        state = next(
            (s for kind, key, s in changes if (kind, key) == (refused.kind, refused.key)), None
        )
        if not state:
            return refused
        sizes = {field: state_bytes(value) for field, value in state.items()}
        field = max(sizes, key=sizes.__getitem__)
        # What the rest of the state takes stays; the field has what is left of the record.
        room = refused.max_record_bytes - 1 - (refused.size - sizes[field])
        name = field if argument is None else argument(refused.kind, refused.key, field)
        return self._oversized(refused.kind, state, name, sizes[field], room, refused)

    def _oversized(
        self, kind: str, state: State, name: str, size: int, room: int, refused: StateTooLarge
    ) -> InvalidValue:
        """The error for argument `name`, `size` bytes as JSON in `state`, where `room` fit.

        A role whose entity holds an argument in another form says so here (artifacts: base64).
        """
        return InvalidValue(
            f"{name}: {size} bytes as JSON is too large for one record; with the rest of "
            f"{WHAT.get(kind, kind)}, {name} may be at most {max(room, 0)} bytes as JSON (the "
            f"store's max_record_bytes is {refused.max_record_bytes}): make it smaller, or "
            "split it"
        )

    def _delete(self, changes: list[Change]) -> int:
        """Write `changes` (deletes), unless there are none; return how many there were."""
        if changes:
            self._write(changes)
        return len(changes)

    def _deletions(self, kind: str, *parts: KeyPart) -> list[Change]:
        """Return the changes deleting every entity of `kind` whose key starts with `parts`.

        Call under the medium's lock.
        """
        return [(kind, key, None) for key, _ in self._medium.scan(kind, child_prefix(*parts))]

    def _read(self, kind: str, *parts: KeyPart) -> tuple[str, State | None]:
        """Return the key of entity ``(kind, parts)`` and its state (None: absent).

        Call under the medium's lock.
        """
        key = entity_key(*parts)
        return key, self._medium.get(kind, key)

    def _states(self, kind: str, *parts: KeyPart) -> list[State]:
        """Return the states of the entities of `kind` whose keys start with `parts`.

        In key order; every entity of `kind` without `parts`. Takes the medium's lock.
        """
        with self._medium.lock:
            return [state for _, state in self._medium.scan(kind, child_prefix(*parts))]

    def _held_lease(self, kind: str, counter: str, name: str, token: int) -> tuple[str, State, int]:
        """Return (key, state, now) of the lease ``(kind, name)`` if `token` holds it now.

        For the entities a token holds until they expire: a lock's lease, an idempotency
        reservation. Otherwise raise the :func:`lease_lost` error, which reads the last token
        handed out for `name` from the counter named `counter`.
        Call under the medium's lock, first in the operation.
        """
        now = self._now()
        key, state = self._read(kind, name)
        if holds(state, token, now):
            return key, state, now
        raise lease_lost(name, token, state, now, read_counter(self._medium, counter, name))

    def _release_held(
        self,
        kind: str,
        name: str,
        token: int,
        releasable: Callable[[State], bool] | None = None,
    ) -> bool:
        """Delete the lease ``(kind, name)`` if `token` holds it now; return whether it did.

        With `releasable`, only a lease it accepts is deleted. Takes the medium's lock.
        """
        with self._medium.lock:
            now = self._now()
            key, state = self._read(kind, name)
            if not holds(state, token, now) or (releasable is not None and not releasable(state)):
                return False
            self._write([(kind, key, None)])
            return True

    def _lookup(
        self, kind: str, read: Callable[[State], _Record], *parts: KeyPart
    ) -> _Record | None:
        """Return the record of entity ``(kind, parts)`` built by `read`, or None."""
        with self._medium.lock:
            state = self._medium.get(kind, entity_key(*parts))
            return None if state is None else read(state)

    def _lookup_live(
        self, kind: str, read: Callable[[State], _Record], *parts: KeyPart
    ) -> _Record | None:
        """Return the record of entity ``(kind, parts)`` while it is live, or None.

        For the entities that expire (a lease, a reservation): live while
        ``now < expires_at_ms``.
        """
        with self._medium.lock:
            now = self._now()
            state = self._medium.get(kind, entity_key(*parts))
            return read(state) if live(state, now) else None


class RunLinked(RoleBase):
    """A role whose entities belong to runs: steps, checkpoints, effects and turns.

    Args:
        clock: See :class:`RoleBase`.
        medium: See :class:`RoleBase`.
        has_run: ``has_run(run_id) -> bool``; a write naming a run it denies raises
            :class:`RunNotFoundError`. Without it any run id is accepted.
        check_claim: ``check_claim(run_id, token=..., now_ms=...)``, run on every write given a
            ``token=`` in the same critical section as the write (when the runs share this
            role's medium, or its lock). Without it a ``token=`` raises ``NotSupported``
            rather than be ignored. A role given a clock (or a medium that reads one) passes
            the time its operation read as ``now_ms``; one built without leaves the time to
            ``check_claim``, so the runs' own clock judges their claims.
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        medium: Medium | None = None,
        has_run: HasRun | None = None,
        check_claim: ClaimCheck | None = None,
    ) -> None:
        super().__init__(clock=clock, medium=medium)
        if has_run is not None and not callable(has_run):
            raise InvalidType(f"has_run must be callable, not {type(has_run).__name__}")
        if check_claim is not None and not callable(check_claim):
            raise InvalidType(f"check_claim must be callable, not {type(check_claim).__name__}")
        self._has_run = has_run
        self._check_claim = check_claim

    def _now_on_run(self, run_id: str, token: int | None) -> int:
        """Read the clock for a write to `run_id`, and check the run and `token` at that instant.

        Call under the medium's lock, first in the operation.
        """
        now = self._now()
        self._check_run(run_id, token, now)
        return now

    def _read_on_run(
        self, kind: str, run_id: str, token: int | None, *parts: KeyPart
    ) -> tuple[str, State | None, int]:
        """Return (key, state, now) of entity ``(kind, run_id, parts)``, a part of run `run_id`.

        Reads the clock and checks the run and `token` first (:meth:`_now_on_run`); the state
        is None when the entity is absent. Call under the medium's lock, first in the operation.
        """
        now = self._now_on_run(run_id, token)
        key, state = self._read(kind, run_id, *parts)
        return key, state, now

    def _check_run(self, run_id: str, token: int | None, now: int) -> None:
        """Raise unless the run exists and, when `token` is given, the token holds it at `now`.

        Call under the medium's lock, before deciding anything.
        """
        if self._has_run is not None and not self._has_run(run_id):
            raise RunNotFoundError(run_id=run_id)
        if token is not None:
            if self._check_claim is None:
                raise NotSupported(
                    f"token={token}: this {type(self).__name__} was built without "
                    "check_claim, so it cannot check a claim token; build it with "
                    "check_claim=runs.check_claim"
                )
            if self._given_time:
                self._check_claim(run_id, token=token, now_ms=now)
            else:
                # Stamping times is all this role needs a clock for: whether a claim is live
                # is the runs' decision, made on their clock.
                self._check_claim(run_id, token=token)
