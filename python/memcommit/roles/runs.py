"""Runs and their claims: the queue of agent runs and who works on each.

A run is created ``pending``. A worker claims it for ``ttl_ms`` (a lease) and gets a fencing
token; the token is the run's ``attempt``, rising by one per claim for the life of the store.
The worker heartbeats to extend the claim, and ends it by ``release`` (back to pending),
``complete``, ``fail`` or ``suspend``. A claim not renewed expires at exactly
``claimed_at + ttl_ms``, after which another worker may take the run over; the old token is
then refused everywhere (:class:`~memcommit.roles.ClaimLostError`), including on the steps,
checkpoints, effects and turns it writes with ``token=``.
"""

from __future__ import annotations

import itertools
import sys
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, get_args

from ..errors import InvalidType, InvalidValue
from ._base import RoleBase, Token, check_token, writes
from .conversations import turns_removed
from .errors import (
    AlreadyClaimedError,
    ClaimLostError,
    InvalidStateError,
    LostReason,
    RunAlreadyExistsError,
    RunNotFoundError,
)
from .groupings import grouping_of, keep
from .logged_groupings import kept_keys
from .medium import (
    CHECKPOINT,
    CONVERSATION,
    COUNTER,
    EFFECT,
    RUN,
    STEP,
    TURN,
    WHAT,
    Change,
    KeyRoom,
    Medium,
    State,
    bump_counter,
    entity_key,
    full_key,
)
from .values import (
    Json,
    JsonIn,
    OptionalCount,
    Text,
    check_metadata,
    check_optional_int,
    check_optional_text,
    check_text,
    check_ttl,
    checked,
    record_reader,
)

__all__ = [
    "TERMINAL_STATUSES",
    "Claim",
    "MemoryRunRepository",
    "Run",
    "RunRepository",
    "RunStatus",
]

RunStatus = Literal["pending", "running", "suspended", "succeeded", "failed", "cancelled"]
_STATUSES: frozenset[str] = frozenset(get_args(RunStatus))
TERMINAL_STATUSES: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
"""Statuses a run never leaves."""


@dataclass(frozen=True)
class Run:
    """A run of an agent.

    Attributes:
        run_id: The run's id.
        agent_id: The agent it runs.
        revision_id: The agent revision pinned at creation, or None.
        status: ``pending``, ``running``, ``suspended``, ``succeeded``, ``failed`` or
            ``cancelled``.
        input: What the run was created with.
        output: What ``complete`` recorded, or None.
        error: What ``fail`` recorded, or None.
        reason: Why it was suspended or cancelled, or None.
        metadata: Free JSON metadata.
        seq: Store-assigned, strictly increasing: the FIFO order of claims.
        attempt: The token of the latest claim (0 = never claimed).
        claimed_by: The worker holding (or last holding, while running) the claim.
        claim_expires_at_ms: When the current claim expires, or None.
        available_at_ms: Not claimable before this instant, or None.
        created_at_ms: When it was created (from the store's clock).
        updated_at_ms: When it last changed.
    """

    run_id: str
    agent_id: str
    revision_id: str | None
    status: RunStatus
    input: Json
    output: Json
    error: Json
    reason: Json
    metadata: dict[str, Json]
    seq: int
    attempt: int
    claimed_by: str | None
    claim_expires_at_ms: int | None
    available_at_ms: int | None
    created_at_ms: int
    updated_at_ms: int


@dataclass(frozen=True)
class Claim:
    """A worker's claim on a run.

    Attributes:
        run: The run as the claim left it.
        token: The fencing token (equal to ``run.attempt``); pass it to every write.
        worker_id: The worker holding the claim.
        expires_at_ms: When the claim expires unless renewed.
    """

    run: Run
    token: int
    worker_id: str
    expires_at_ms: int


class RunRepository(Protocol):
    """The ``runs`` role: runs and their claims."""

    def create(
        self,
        *,
        agent_id: str,
        input: Json = None,
        run_id: str | None = None,
        revision_id: str | None = None,
        metadata: dict[str, Json] | None = None,
        available_at_ms: int | None = None,
    ) -> Run:
        """Create a pending run.

        Args:
            agent_id: The agent.
            input: A JSON value.
            run_id: The id; a random one when None.
            revision_id: The agent revision to pin.
            metadata: A JSON object.
            available_at_ms: Not claimable before this epoch millisecond.

        Returns:
            The new run.

        Raises:
            RunAlreadyExistsError: `run_id` exists; it is left untouched.
        """
        ...

    def get(self, run_id: str) -> Run | None:
        """Return the run, or None."""
        ...

    def exists(self, run_id: str) -> bool:
        """Return whether the run exists (the ``has_run`` lookup of the other roles)."""
        ...

    def list(
        self,
        *,
        status: RunStatus | Iterable[RunStatus] | None = None,
        agent_id: str | None = None,
        limit: int | None = None,
        after_seq: int | None = None,
    ) -> list[Run]:
        """Return runs matching every filter given, by ``seq`` ascending."""
        ...

    def claim_next(
        self, *, worker_id: str, ttl_ms: int, agent_id: str | None = None
    ) -> Claim | None:
        """Claim the lowest-``seq`` claimable run, or return None.

        Claimable: pending and available (``available_at_ms`` is None or reached), or running
        under an expired claim (a takeover). The claim gets token ``attempt + 1`` and expires
        at ``now + ttl_ms``.
        """
        ...

    def claim(self, run_id: str, *, worker_id: str, ttl_ms: int) -> Claim:
        """Claim this run.

        Raises:
            RunNotFoundError: No such run.
            AlreadyClaimedError: A live claim holds it (the caller's own included).
            InvalidStateError: It is suspended, terminal, or not yet available.
        """
        ...

    def heartbeat(self, run_id: str, *, token: int, ttl_ms: int) -> Claim:
        """Extend the claim to ``now + ttl_ms``.

        Raises:
            ClaimLostError: `token` does not hold a live claim (an expired claim is lost
                even when nobody took it over).
        """
        ...

    def check_claim(self, run_id: str, *, token: int, now_ms: int | None = None) -> None:
        """Raise :class:`ClaimLostError` unless `token` holds a live claim on the run.

        Args:
            run_id: The run.
            token: The claim's token.
            now_ms: Judge at this instant instead of reading the clock: a role checking a
                claim inside its own operation passes the time it read, so that the
                operation reads the clock once.
        """
        ...

    def release(self, run_id: str, *, token: int, available_at_ms: int | None = None) -> Run:
        """Give the run back: pending again, claim cleared, ``attempt`` kept."""
        ...

    def complete(self, run_id: str, *, token: int, output: Json = None) -> Run:
        """Finish the run as ``succeeded`` with `output`."""
        ...

    def fail(self, run_id: str, *, token: int, error: Json) -> Run:
        """Finish the run as ``failed`` with `error`."""
        ...

    def suspend(self, run_id: str, *, token: int, reason: Json = None) -> Run:
        """Park the run (``suspended``, not claimable) until :meth:`resume`."""
        ...

    def resume(self, run_id: str) -> Run:
        """Make a suspended run pending again."""
        ...

    def cancel(self, run_id: str, *, reason: Json = None) -> Run:
        """Cancel a run that has not finished; its claim token dies with it.

        Cancelling a cancelled run returns it unchanged.

        Raises:
            InvalidStateError: The run succeeded or failed.
        """
        ...

    def delete(self, run_id: str) -> bool:
        """Delete the run with its steps, checkpoints, effects and turns; False if absent."""
        ...


_run = record_reader(Run)


def _claim(state: State) -> Claim:
    run = _run(state)
    return Claim(
        run=run,
        token=state["attempt"],
        worker_id=state["claimed_by"],
        expires_at_ms=state["claim_expires_at_ms"],
    )


def _live(state: State, now: int) -> bool:
    return bool(state["status"] == "running" and now < state["claim_expires_at_ms"])


def _claimable(state: State, now: int) -> bool:
    status = state["status"]
    if status == "pending":
        available = state["available_at_ms"]
        return available is None or bool(now >= available)
    return bool(status == "running" and now >= state["claim_expires_at_ms"])


_CLAIMABLE = ("pending", "running")
"""The statuses a claimable run can have (a running one, once its claim expired)."""

_BY_STATUS = "by_status"
"""The medium's grouping of runs: by status, each status in ``seq`` order."""


def _status_seq(state: State) -> tuple[str, int]:
    return str(state["status"]), int(state["seq"])


keep(RUN, _BY_STATUS, _status_seq)


_BY_RUN = "by_run"
"""The medium's grouping of conversation turns by the run that wrote them."""


def _run_turn(turn: State) -> tuple[str, str]:
    return str(turn["run_id"]), str(turn["conversation_id"])


keep(TURN, _BY_RUN, _run_turn)

_SEQ = "runs.seq"
"""The counter of the runs' FIFO order."""
_TOKENS = "runs.token"
"""The counter of each run's last claim token."""


def _run_keys(run_id: str) -> list[str]:
    """The keys of a run: its own, its token counter's, its status entry's in every status."""
    key = entity_key(run_id)
    keys = [full_key(RUN, run_id), full_key(COUNTER, _TOKENS, run_id)]
    for status in sorted(_STATUSES):
        keys += kept_keys(RUN, key, {"status": status, "seq": 0})  # a seq is 20 digits there
    return keys


_KEYS = KeyRoom(WHAT[RUN], _run_keys)
"""The keys of a run. Its status entries hold its id with more around it than its checkpoints'
keys and its counters do, so a run that fits leaves them room."""


def _statuses(status: object) -> frozenset[str] | None:
    if status is None:
        return None
    values = [status] if isinstance(status, str) else status
    if not isinstance(values, Iterable):
        raise InvalidType(f"status must be a str or an iterable of str, not {status!r}")
    out = set()
    for value in values:
        if value not in _STATUSES:
            raise InvalidValue(f"status: {value!r} is not one of {sorted(_STATUSES)}")
        out.add(str(value))
    return frozenset(out)


class MemoryRunRepository(RoleBase):
    """The in-memory ``runs`` role.

    Args:
        clock: The clock for claim expiry and stamps (default :class:`SystemClock`).
        medium: Where the entities live; a store passes the medium its roles share.

    Example:
        >>> from memcommit.testing import ControllableClock
        >>> clock = ControllableClock()
        >>> runs = MemoryRunRepository(clock=clock)
        >>> run = runs.create(agent_id="a", run_id="r1")
        >>> claim = runs.claim_next(worker_id="w", ttl_ms=1_000)
        >>> claim.token, claim.run.status
        (1, 'running')
    """

    # -- reading ---------------------------------------------------------------------------

    def get(self, run_id: str) -> Run | None:
        """Return the run, or None. See :meth:`RunRepository.get`."""
        return self._lookup(RUN, _run, check_text(run_id, "run_id"))

    @checked
    def exists(self, run_id: Text) -> bool:
        """Return whether the run exists."""
        with self._medium.lock:
            return self._medium.get(RUN, entity_key(run_id)) is not None

    def list(
        self,
        *,
        status: RunStatus | Iterable[RunStatus] | None = None,
        agent_id: str | None = None,
        limit: int | None = None,
        after_seq: int | None = None,
    ) -> list[Run]:
        """Return matching runs by ``seq`` ascending. See :meth:`RunRepository.list`."""
        statuses = _statuses(status)
        agent_id = check_optional_text(agent_id, "agent_id")
        limit = check_optional_int(limit, "limit")
        after_seq = check_optional_int(after_seq, "after_seq")
        with self._medium.lock:
            matching = (
                state
                for _, state in self._by_status(statuses, after=after_seq)
                if agent_id is None or state["agent_id"] == agent_id
            )
            # No list holds more than sys.maxsize runs, and islice takes no larger stop.
            states = list(
                itertools.islice(matching, None if limit is None else min(limit, sys.maxsize))
            )
        return [_run(state) for state in states]

    # -- writing ---------------------------------------------------------------------------

    @writes
    @checked
    def create(
        self,
        *,
        agent_id: Text,
        input: JsonIn = None,
        run_id: str | None = None,
        revision_id: str | None = None,
        metadata: dict[str, Json] | None = None,
        available_at_ms: int | None = None,
    ) -> Run:
        """Create a pending run. See :meth:`RunRepository.create`."""
        run_id = uuid.uuid4().hex if run_id is None else check_text(run_id, "run_id")
        revision_id = check_optional_text(revision_id, "revision_id")
        meta = check_metadata(metadata)
        available_at_ms = check_optional_int(available_at_ms, "available_at_ms")
        _KEYS.check(run_id=run_id)
        key = entity_key(run_id)
        with self._medium.lock:
            now = self._now()
            if self._medium.get(RUN, key) is not None:
                raise RunAlreadyExistsError(run_id=run_id)
            seq, seq_change = bump_counter(self._medium, _SEQ)
            state: State = {
                "run_id": run_id,
                "agent_id": agent_id,
                "revision_id": revision_id,
                "status": "pending",
                "input": input,
                "output": None,
                "error": None,
                "reason": None,
                "metadata": meta,
                "seq": seq,
                "attempt": 0,
                "claimed_by": None,
                "claim_expires_at_ms": None,
                "available_at_ms": available_at_ms,
                "created_at_ms": now,
                "updated_at_ms": now,
            }
            return self._save(RUN, key, state, _run, seq_change)

    def _grant(self, key: str, state: State, worker_id: str, ttl_ms: int, now: int) -> Claim:
        """Write a new claim on `state` and return it (under the lock)."""
        token, token_change = bump_counter(self._medium, _TOKENS, state["run_id"])
        new = {
            **state,
            "status": "running",
            "attempt": token,
            "claimed_by": worker_id,
            "claim_expires_at_ms": now + ttl_ms,
            "available_at_ms": None,
            "updated_at_ms": now,
        }
        return self._save(RUN, key, new, _claim, token_change)

    @writes
    @checked
    def claim_next(
        self, *, worker_id: Text, ttl_ms: int, agent_id: str | None = None
    ) -> Claim | None:
        """Claim the first claimable run, or None. See :meth:`RunRepository.claim_next`."""
        ttl_ms = check_ttl(ttl_ms)
        agent_id = check_optional_text(agent_id, "agent_id")
        with self._medium.lock:
            now = self._now()
            # Pending and running runs in seq order: the first claimable one is the answer.
            for key, state in self._by_status(_CLAIMABLE):
                if agent_id is not None and state["agent_id"] != agent_id:
                    continue
                if _claimable(state, now):
                    return self._grant(key, state, worker_id, ttl_ms, now)
            return None

    @writes
    @checked
    def claim(self, run_id: Text, *, worker_id: Text, ttl_ms: int) -> Claim:
        """Claim this run. See :meth:`RunRepository.claim`."""
        ttl_ms = check_ttl(ttl_ms)
        with self._medium.lock:
            now = self._now()
            key, state = self._stored(run_id)
            if _live(state, now):
                raise AlreadyClaimedError(
                    resource=run_id,
                    holder=state["claimed_by"],
                    expires_at_ms=state["claim_expires_at_ms"],
                )
            if not _claimable(state, now):
                status = state["status"]
                message = None
                if status == "pending":
                    message = (
                        f"run {run_id!r} is not available before {state['available_at_ms']} ms"
                    )
                raise InvalidStateError(message, current=status, attempted="claim")
            return self._grant(key, state, worker_id, ttl_ms, now)

    def _by_status(
        self, statuses: Iterable[str] | None, after: int | None = None
    ) -> Iterator[tuple[str, State]]:
        """Yield ``(key, state)`` of the runs in `statuses` (all when None) by seq, above `after`.

        Under the lock; stop iterating before writing.
        """
        grouping = grouping_of(self._medium, RUN, _BY_STATUS, _status_seq)
        for key in grouping.keys(statuses, after=after):
            state = self._medium.get(RUN, key)
            assert state is not None, key  # the grouping holds only stored runs
            yield key, state

    def _stored(self, run_id: str) -> tuple[str, State]:
        """Return the key and state of run `run_id`; raise if there is none. Under the lock."""
        key, state = self._read(RUN, run_id)
        if state is None:
            raise RunNotFoundError(run_id=run_id)
        return key, state

    def _held(self, run_id: str, token: object, now: int | None = None) -> tuple[str, State, int]:
        """Return (key, state, now) if `token` holds a live claim; raise otherwise.

        Call under the lock.
        """
        if now is None:
            now = self._now()
        key, state = self._stored(run_id)
        assert isinstance(token, int)
        if _live(state, now) and state["attempt"] == token:
            return key, state, now
        reason: LostReason
        if state["attempt"] != token:
            reason = "stale"
        elif state["status"] == "running":
            reason = "expired"
        elif state["status"] == "pending":
            reason = "released"
        else:
            reason = "not_active"
        current = state["attempt"] if _live(state, now) else None
        raise ClaimLostError(resource=run_id, token=token, current_token=current, reason=reason)

    @checked
    def check_claim(self, run_id: Text, *, token: Token, now_ms: OptionalCount = None) -> None:
        """Raise :class:`ClaimLostError` unless `token` holds a live claim on the run.

        See :meth:`RunRepository.check_claim`.

        Raises:
            RunNotFoundError: No such run.
            ClaimLostError: The token is stale, expired, released or its run not running.
        """
        with self._medium.lock:
            self._held(run_id, token, now_ms)

    @writes
    @checked
    def heartbeat(self, run_id: Text, *, token: Token, ttl_ms: int) -> Claim:
        """Extend the claim to now + ttl_ms. See :meth:`RunRepository.heartbeat`."""
        ttl_ms = check_ttl(ttl_ms)
        with self._medium.lock:
            key, state, now = self._held(run_id, token)
            new = {**state, "claim_expires_at_ms": now + ttl_ms, "updated_at_ms": now}
            return self._save(RUN, key, new, _claim)

    def _finish(self, run_id: str, token: object, **changes: Json) -> Run:
        run_id = check_text(run_id, "run_id")
        token = check_token(token)
        with self._medium.lock:
            key, state, now = self._held(run_id, token)
            new = {**state, **changes, "updated_at_ms": now}
            if new["status"] != "running":
                new["claim_expires_at_ms"] = None
            if new["status"] == "pending":
                new["claimed_by"] = None
            return self._save(RUN, key, new, _run)

    @writes
    @checked
    def release(self, run_id: str, *, token: int, available_at_ms: OptionalCount = None) -> Run:
        """Give the run back. See :meth:`RunRepository.release`."""
        return self._finish(run_id, token, status="pending", available_at_ms=available_at_ms)

    @writes
    @checked
    def complete(self, run_id: str, *, token: int, output: JsonIn = None) -> Run:
        """Finish the run as succeeded. See :meth:`RunRepository.complete`."""
        return self._finish(run_id, token, status="succeeded", output=output)

    @writes
    @checked
    def fail(self, run_id: str, *, token: int, error: JsonIn) -> Run:
        """Finish the run as failed. See :meth:`RunRepository.fail`."""
        return self._finish(run_id, token, status="failed", error=error)

    @writes
    @checked
    def suspend(self, run_id: str, *, token: int, reason: JsonIn = None) -> Run:
        """Park the run. See :meth:`RunRepository.suspend`."""
        return self._finish(run_id, token, status="suspended", reason=reason)

    @writes
    @checked
    def resume(self, run_id: Text) -> Run:
        """Make a suspended run pending. See :meth:`RunRepository.resume`.

        Raises:
            RunNotFoundError: No such run.
            InvalidStateError: The run is not suspended.
        """
        with self._medium.lock:
            now = self._now()
            key, state = self._stored(run_id)
            if state["status"] != "suspended":
                raise InvalidStateError(current=state["status"], attempted="resume")
            new = {
                **state,
                "status": "pending",
                "claimed_by": None,
                "available_at_ms": None,
                "updated_at_ms": now,
            }
            return self._save(RUN, key, new, _run)

    @writes
    @checked
    def cancel(self, run_id: Text, *, reason: JsonIn = None) -> Run:
        """Cancel the run. See :meth:`RunRepository.cancel`."""
        with self._medium.lock:
            now = self._now()
            key, state = self._stored(run_id)
            if state["status"] == "cancelled":
                return _run(state)
            if state["status"] in TERMINAL_STATUSES:
                raise InvalidStateError(current=state["status"], attempted="cancel")
            new = {
                **state,
                "status": "cancelled",
                "reason": reason,
                "claim_expires_at_ms": None,
                "updated_at_ms": now,
            }
            return self._save(RUN, key, new, _run)

    @writes
    @checked
    def delete(self, run_id: Text) -> bool:
        """Delete the run and everything of it. See :meth:`RunRepository.delete`.

        The cascade reaches the steps, checkpoints, effects and turns kept in this
        repository's medium (all of them in a store, whose roles share one medium). Counters
        are kept, so a run re-created under the same id continues its token and sequence
        numbers. Removing a run's turns leaves a gap in its conversations' sequence numbers,
        and moves their ``last_seq`` on, as a truncate does.
        """
        key = entity_key(run_id)
        with self._medium.lock:
            now = self._now()
            if self._medium.get(RUN, key) is None:
                return False
            changes: list[Change] = [(RUN, key, None)]
            for kind in (STEP, CHECKPOINT, EFFECT):
                changes.extend(self._deletions(kind, run_id))
            changes.extend(_cascade_turns(self._medium, run_id, now))
            self._write(changes)
            return True


def _cascade_turns(medium: Medium, run_id: str, now: int) -> list[Change]:
    """Return the changes removing the turns of `run_id` and marking their conversations.

    Each conversation that loses turns gets a new ``last_seq`` (:func:`turns_removed`), as
    after a truncate, so a writer holding one from before the delete fails.
    """
    changes: list[Change] = []
    touched: dict[str, None] = {}  # the conversations, in the order their turns come
    for key in grouping_of(medium, TURN, _BY_RUN, _run_turn).keys([run_id]):
        turn = medium.get(TURN, key)
        assert turn is not None, key  # the grouping holds only stored turns
        changes.append((TURN, key, None))
        touched[str(turn["conversation_id"])] = None
    for conversation_id in touched:
        conversation = medium.get(CONVERSATION, entity_key(conversation_id))
        if conversation is not None:
            changes.extend(turns_removed(medium, conversation, now))
    return changes


if TYPE_CHECKING:
    _: type[RunRepository] = MemoryRunRepository
