"""The errors the agent-runtime roles raise.

Every role error derives from :class:`memcommit.errors.MemcommitError` through
:class:`RoleError`, carries its structured fields as attributes, and has a stable class-level
``code``. A remote store sends ``err.to_wire()`` and the client rebuilds the same class with
:func:`error_from_wire`; pickling round-trips the same way.

Three families:

* not found (writes only; reads of a missing thing return ``None`` or ``[]``):
  :class:`RunNotFoundError`, :class:`StepNotFoundError`, :class:`CheckpointNotFoundError`,
  :class:`ConversationNotFoundError`, :class:`RevisionNotFoundError`;
* conflicts (optimistic concurrency, non-determinism, record-once): :class:`VersionConflictError`,
  :class:`SequenceConflictError`, :class:`StepConflictError`, :class:`EffectConflictError`,
  :class:`IdempotencyConflictError`, :class:`RevisionImmutableError` and the
  ``...AlreadyExistsError`` classes;
* leases and fencing: :class:`AlreadyClaimedError`, :class:`LeaseLostError`,
  :class:`ClaimLostError`; and :class:`InvalidStateError` for a transition the current state
  does not allow.

A refused write leaves no trace: when one of these is raised, nothing of the call was stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from ..errors import MemcommitError

__all__ = [
    "AlreadyClaimedError",
    "AlreadyExistsError",
    "CheckpointNotFoundError",
    "ClaimLostError",
    "ConflictError",
    "ConversationAlreadyExistsError",
    "ConversationNotFoundError",
    "EffectConflictError",
    "IdempotencyConflictError",
    "InvalidStateError",
    "LeaseError",
    "LeaseLostError",
    "LostReason",
    "NotFoundError",
    "RevisionAlreadyExistsError",
    "RevisionImmutableError",
    "RevisionNotFoundError",
    "RoleError",
    "RunAlreadyExistsError",
    "RunNotFoundError",
    "SequenceConflictError",
    "StepConflictError",
    "StepNotFoundError",
    "VersionConflictError",
    "error_from_wire",
]

LostReason = Literal["stale", "expired", "released", "not_active"]
"""Why a token no longer holds: a newer token exists (``stale``), the lease ran out
(``expired``), the holder gave it back (``released``), or the run is no longer running
(``not_active``: completed, failed, suspended or cancelled)."""

_REGISTRY: dict[str, type[RoleError]] = {}


class RoleError(MemcommitError):
    """The base of every error an agent-runtime role raises.

    Attributes:
        code: A stable identifier of the class, for the wire and for logs.
        fields: The structured fields, by name (the same values as the attributes).
    """

    code: ClassVar[str] = "role_error"
    _fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("code")
        if code is None:
            raise TypeError(f"{cls.__name__} must define its own stable `code`")
        if code in _REGISTRY:
            raise TypeError(f"{cls.__name__}: code {code!r} is taken by {_REGISTRY[code]}")
        _REGISTRY[code] = cls

    def __init__(self, message: str | None = None, **fields: Any) -> None:
        missing = [name for name in self._fields if name not in fields]
        unknown = [name for name in fields if name not in self._fields]
        if missing or unknown:
            raise TypeError(
                f"{type(self).__name__}: missing fields {missing}, unknown fields {unknown}"
            )
        for name in self._fields:
            setattr(self, name, fields[name])
        self.message = message if message is not None else self._describe()
        super().__init__(self.message)

    def _describe(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({inner})"

    @property
    def fields(self) -> dict[str, Any]:
        """The structured fields, by name."""
        return {name: getattr(self, name) for name in self._fields}

    def to_wire(self) -> dict[str, Any]:
        """Return a JSON-able description: ``{"code", "message", "fields"}``."""
        return {"code": self.code, "message": self.message, "fields": self.fields}

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.code, self.message, self.fields))

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and isinstance(other, RoleError)
            and other.message == self.message
            and other.fields == self.fields
        )

    def __hash__(self) -> int:
        return hash((self.code, self.message))


def _rebuild(code: str, message: str, fields: Mapping[str, Any]) -> RoleError:
    return _REGISTRY[code](message, **fields)


def error_from_wire(wire: Mapping[str, Any]) -> RoleError:
    """Rebuild the error :meth:`RoleError.to_wire` described, as the same class.

    Raises:
        KeyError: The wire names a code no role error has.
    """
    code = wire["code"]
    if code not in _REGISTRY:
        raise KeyError(f"code: {code!r} is not a role error code")
    return _REGISTRY[code](wire.get("message"), **dict(wire.get("fields", {})))


# RoleError itself has a code but is defined before the hook can see it.
_REGISTRY[RoleError.code] = RoleError


# -- not found -------------------------------------------------------------------------------


class NotFoundError(RoleError):
    """A write named something the store does not have; reads return None or [] instead."""

    code = "not_found"


class RunNotFoundError(NotFoundError):
    """A write named a run the store does not have (as a foreign key would refuse it).

    Attributes:
        run_id: The run.
    """

    code = "run_not_found"
    _fields = ("run_id",)
    run_id: str

    def __init__(self, message: str | None = None, *, run_id: str) -> None:
        super().__init__(message, run_id=run_id)

    def _describe(self) -> str:
        return f"run {self.run_id!r} does not exist; create it with runs.create() first"


class StepNotFoundError(NotFoundError):
    """A step was completed or failed before it was started.

    Attributes:
        run_id: The run.
        step_id: The step.
    """

    code = "step_not_found"
    _fields = ("run_id", "step_id")
    run_id: str
    step_id: str

    def __init__(self, message: str | None = None, *, run_id: str, step_id: str) -> None:
        super().__init__(message, run_id=run_id, step_id=step_id)

    def _describe(self) -> str:
        return (
            f"step {self.step_id!r} of run {self.run_id!r} was never started; "
            "call steps.start() first"
        )


class CheckpointNotFoundError(NotFoundError):
    """A checkpoint named as a parent is not one of the same run and namespace.

    Attributes:
        run_id: The run.
        checkpoint_id: The checkpoint.
    """

    code = "checkpoint_not_found"
    _fields = ("run_id", "checkpoint_id")
    run_id: str
    checkpoint_id: str

    def __init__(self, message: str | None = None, *, run_id: str, checkpoint_id: str) -> None:
        super().__init__(message, run_id=run_id, checkpoint_id=checkpoint_id)

    def _describe(self) -> str:
        return (
            f"checkpoint {self.checkpoint_id!r} is not a checkpoint of run {self.run_id!r} "
            "in that namespace"
        )


class ConversationNotFoundError(NotFoundError):
    """A write named a conversation the store does not have (appends never create one).

    Attributes:
        conversation_id: The conversation.
    """

    code = "conversation_not_found"
    _fields = ("conversation_id",)
    conversation_id: str

    def __init__(self, message: str | None = None, *, conversation_id: str) -> None:
        super().__init__(message, conversation_id=conversation_id)

    def _describe(self) -> str:
        return (
            f"conversation {self.conversation_id!r} does not exist; "
            "create it with conversations.create() first"
        )


class RevisionNotFoundError(NotFoundError):
    """A write named a revision (by id or by published version) the agent does not have.

    Attributes:
        agent_id: The agent.
        revision_id: The revision asked for, or None when asked by version.
        version: The version asked for, or None when asked by id.
    """

    code = "revision_not_found"
    _fields = ("agent_id", "revision_id", "version")
    agent_id: str
    revision_id: str | None
    version: int | None

    def __init__(
        self,
        message: str | None = None,
        *,
        agent_id: str,
        revision_id: str | None = None,
        version: int | None = None,
    ) -> None:
        super().__init__(message, agent_id=agent_id, revision_id=revision_id, version=version)

    def _describe(self) -> str:
        which = (
            f"revision {self.revision_id!r}"
            if self.version is None
            else (f"version {self.version}")
        )
        return f"agent {self.agent_id!r} has no {which}"


# -- conflicts -------------------------------------------------------------------------------


class ConflictError(RoleError):
    """A write conflicts with what the store holds; nothing was written."""

    code = "conflict"


class AlreadyExistsError(ConflictError):
    """A create named an id that already exists; the existing one is untouched."""

    code = "already_exists"


class RunAlreadyExistsError(AlreadyExistsError):
    """A run with this id exists.

    Attributes:
        run_id: The run.
    """

    code = "run_already_exists"
    _fields = ("run_id",)
    run_id: str

    def __init__(self, message: str | None = None, *, run_id: str) -> None:
        super().__init__(message, run_id=run_id)

    def _describe(self) -> str:
        return f"run {self.run_id!r} already exists; pick another id or omit it"


class ConversationAlreadyExistsError(AlreadyExistsError):
    """A conversation with this id exists.

    Attributes:
        conversation_id: The conversation.
    """

    code = "conversation_already_exists"
    _fields = ("conversation_id",)
    conversation_id: str

    def __init__(self, message: str | None = None, *, conversation_id: str) -> None:
        super().__init__(message, conversation_id=conversation_id)

    def _describe(self) -> str:
        return f"conversation {self.conversation_id!r} already exists"


class RevisionAlreadyExistsError(AlreadyExistsError):
    """A revision with this id exists for the agent.

    Attributes:
        agent_id: The agent.
        revision_id: The revision.
    """

    code = "revision_already_exists"
    _fields = ("agent_id", "revision_id")
    agent_id: str
    revision_id: str

    def __init__(self, message: str | None = None, *, agent_id: str, revision_id: str) -> None:
        super().__init__(message, agent_id=agent_id, revision_id=revision_id)

    def _describe(self) -> str:
        return f"agent {self.agent_id!r} already has revision {self.revision_id!r}"


class VersionConflictError(ConflictError):
    """An expected version (or checksum) did not match the stored one.

    Attributes:
        what: The thing whose version was compared, in words.
        expected: The version the caller expected.
        actual: The version the store has (0 or None when the thing is absent).
    """

    code = "version_conflict"
    _fields = ("what", "expected", "actual")
    what: str
    expected: int | str | None
    actual: int | str | None

    def __init__(
        self,
        message: str | None = None,
        *,
        what: str,
        expected: int | str | None,
        actual: int | str | None,
    ) -> None:
        super().__init__(message, what=what, expected=expected, actual=actual)

    def _describe(self) -> str:
        return (
            f"{self.what}: expected version {self.expected!r} but the store has "
            f"{self.actual!r}; re-read and retry"
        )


class SequenceConflictError(VersionConflictError):
    """A conversation's ``expected_last_seq`` did not match its last turn."""

    code = "sequence_conflict"


class StepConflictError(ConflictError):
    """A step was started under another name, or completed with another output.

    Attributes:
        run_id: The run.
        step_id: The step.
        reason: ``"name_mismatch"`` (the replay is not deterministic) or
            ``"output_mismatch"`` (a second writer recorded a different output).
    """

    code = "step_conflict"
    _fields = ("run_id", "step_id", "reason")
    run_id: str
    step_id: str
    reason: str

    def __init__(
        self, message: str | None = None, *, run_id: str, step_id: str, reason: str
    ) -> None:
        super().__init__(message, run_id=run_id, step_id=step_id, reason=reason)

    def _describe(self) -> str:
        return f"step {self.step_id!r} of run {self.run_id!r}: {self.reason}"


class EffectConflictError(ConflictError):
    """An effect was recorded again with a different outcome; the first record stands.

    Attributes:
        run_id: The run.
        effect_key: The effect.
    """

    code = "effect_conflict"
    _fields = ("run_id", "effect_key")
    run_id: str
    effect_key: str

    def __init__(self, message: str | None = None, *, run_id: str, effect_key: str) -> None:
        super().__init__(message, run_id=run_id, effect_key=effect_key)

    def _describe(self) -> str:
        return (
            f"effect {self.effect_key!r} of run {self.run_id!r} is already recorded with a "
            "different outcome; an effect is recorded once"
        )


class IdempotencyConflictError(ConflictError):
    """A live idempotency key was used with another request fingerprint or result.

    Attributes:
        key: The key.
    """

    code = "idempotency_conflict"
    _fields = ("key",)
    key: str

    def __init__(self, message: str | None = None, *, key: str) -> None:
        super().__init__(message, key=key)

    def _describe(self) -> str:
        return f"idempotency key {self.key!r} is live for a different request or result"


class RevisionImmutableError(ConflictError):
    """A published or archived revision cannot change.

    Attributes:
        agent_id: The agent.
        revision_id: The revision.
    """

    code = "revision_immutable"
    _fields = ("agent_id", "revision_id")
    agent_id: str
    revision_id: str

    def __init__(self, message: str | None = None, *, agent_id: str, revision_id: str) -> None:
        super().__init__(message, agent_id=agent_id, revision_id=revision_id)

    def _describe(self) -> str:
        return (
            f"revision {self.revision_id!r} of agent {self.agent_id!r} is no longer a draft; "
            "create a new draft to change it"
        )


# -- leases ----------------------------------------------------------------------------------


class LeaseError(RoleError):
    """A lease, claim or fencing token did not allow the operation."""

    code = "lease_error"


class AlreadyClaimedError(LeaseError):
    """The run is held by a live claim (of any worker, the caller's own included).

    Attributes:
        resource: The run.
        holder: The worker holding it.
        expires_at_ms: When that claim expires, in epoch milliseconds.
    """

    code = "already_claimed"
    _fields = ("resource", "holder", "expires_at_ms")
    resource: str
    holder: str
    expires_at_ms: int

    def __init__(
        self, message: str | None = None, *, resource: str, holder: str, expires_at_ms: int
    ) -> None:
        super().__init__(message, resource=resource, holder=holder, expires_at_ms=expires_at_ms)

    def _describe(self) -> str:
        return (
            f"{self.resource!r} is held by {self.holder!r} until {self.expires_at_ms} ms; "
            "wait for expiry or claim another"
        )


class LeaseLostError(LeaseError):
    """A fencing token no longer holds its lease; the write it carried was refused.

    Attributes:
        resource: The lock name, idempotency key or run.
        token: The token the caller gave.
        current_token: The live holder's token, or None when nobody holds it.
        reason: ``"stale"``, ``"expired"``, ``"released"`` or ``"not_active"``.
    """

    code = "lease_lost"
    _fields = ("resource", "token", "current_token", "reason")
    resource: str
    token: int
    current_token: int | None
    reason: LostReason

    def __init__(
        self,
        message: str | None = None,
        *,
        resource: str,
        token: int,
        current_token: int | None,
        reason: LostReason,
    ) -> None:
        super().__init__(
            message, resource=resource, token=token, current_token=current_token, reason=reason
        )

    def _describe(self) -> str:
        holder = (
            "nobody holds it"
            if self.current_token is None
            else (f"token {self.current_token} holds it")
        )
        return (
            f"{self.resource!r}: token {self.token} is {self.reason} ({holder}); "
            "stop working on it and acquire it again"
        )


class ClaimLostError(LeaseLostError):
    """A run claim's token no longer holds the run."""

    code = "claim_lost"


class InvalidStateError(RoleError):
    """The thing's current state does not allow the operation.

    Attributes:
        current: The current state (a status).
        attempted: The operation that was refused.
    """

    code = "invalid_state"
    _fields = ("current", "attempted")
    current: str
    attempted: str

    def __init__(self, message: str | None = None, *, current: str, attempted: str) -> None:
        super().__init__(message, current=current, attempted=attempted)

    def _describe(self) -> str:
        return f"cannot {self.attempted} from state {self.current!r}"
