"""The errors the agent-runtime roles raise.

Every role error derives from :class:`memcommit.errors.MemcommitError` through
:class:`RoleError`, carries its structured fields as attributes, and has a stable class-level
``code``. A remote store sends ``err.to_wire()`` and the client rebuilds the same class with
:func:`error_from_wire`; pickling round-trips the same way. The classes are declared, with
every other error of memcommit, in :mod:`memcommit.errors`; this module names the roles' own.

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
from typing import Any

from ..errors import (
    AlreadyClaimedError,
    AlreadyExistsError,
    CheckpointNotFoundError,
    ClaimLostError,
    ConflictError,
    ConversationAlreadyExistsError,
    ConversationNotFoundError,
    EffectConflictError,
    IdempotencyConflictError,
    InvalidStateError,
    LeaseError,
    LeaseLostError,
    LostReason,
    NotFoundError,
    RevisionAlreadyExistsError,
    RevisionImmutableError,
    RevisionNotFoundError,
    RoleError,
    RunAlreadyExistsError,
    RunNotFoundError,
    SequenceConflictError,
    StepConflictError,
    StepNotFoundError,
    VersionConflictError,
    from_wire,
)

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


def error_from_wire(wire: Mapping[str, Any]) -> RoleError:
    """Rebuild the error :meth:`RoleError.to_wire` described, as the same class.

    Raises:
        KeyError: The wire names a code no role error has.
    """
    error = from_wire(wire)
    if not isinstance(error, RoleError):
        raise KeyError(f"code: {wire.get('code')!r} is not a role error code")
    return error
