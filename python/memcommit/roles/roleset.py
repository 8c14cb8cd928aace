"""The ten roles of one store, wired together."""

from __future__ import annotations

import copy
from typing import Any

from ..clock import Clock, SystemClock
from ..errors import InvalidType
from .artifacts import MemoryArtifactRepository
from .checkpoints import MemoryCheckpointRepository
from .conversations import MemoryConversationRepository
from .effects import MemoryEffectRepository
from .idempotency import MemoryIdempotencyRepository
from .locks import MemoryLockRepository
from .medium import Medium, MemoryMedium
from .revisions import MemoryAgentRevisionRepository
from .runs import MemoryRunRepository
from .state import MemoryStateRepository
from .steps import MemoryStepRepository

__all__ = ["ROLE_NAMES", "RoleSet", "Roles"]

ROLE_NAMES = (
    "runs",
    "steps",
    "checkpoints",
    "idempotency",
    "locks",
    "effects",
    "state",
    "artifacts",
    "agent_revisions",
    "conversations",
)
"""The attribute names of the ten roles on a store."""


class Roles:
    """The ten agent-runtime roles of a store, by name (what a store and a :class:`RoleSet` carry).

    `medium` is where their entities live, or None when they run elsewhere (a remote store's
    roles run on its server).
    """

    runs: MemoryRunRepository
    steps: MemoryStepRepository
    checkpoints: MemoryCheckpointRepository
    idempotency: MemoryIdempotencyRepository
    locks: MemoryLockRepository
    effects: MemoryEffectRepository
    state: MemoryStateRepository
    artifacts: MemoryArtifactRepository
    agent_revisions: MemoryAgentRevisionRepository
    conversations: MemoryConversationRepository
    medium: Medium | None


class RoleSet(Roles):
    """The ten agent-runtime roles of one store, sharing one medium, one lock and one clock.

    The steps, checkpoints, effects and conversations check runs through this set's own
    ``runs`` (``has_run=runs.exists``, ``check_claim=runs.check_claim``), inside the same
    critical section as their write, because every role holds the medium's one lock.

    Replacing ``runs`` in a copy (``roles.replace(runs=custom)``, or ``copy.copy(roles)``
    and assigning) leaves the other roles checking the *original* run repository: they were
    built with its lookups. To have them check the replacement, build them with
    ``has_run=custom.exists`` (and ``check_claim=custom.check_claim``) and replace them too.

    Args:
        clock: The clock every role reads (default :class:`~memcommit.SystemClock`).
        medium: Where the entities live (default: a new in-memory medium). A durable store
            passes its log-backed medium.

    Example:
        >>> from datetime import datetime, timezone
        >>> from memcommit.testing import ControllableClock
        >>> clock = ControllableClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
        >>> roles = RoleSet(clock=clock)
        >>> bool(roles.locks.acquire("job", "replica-a", 1_000))
        True
        >>> roles.locks.acquire("job", "replica-b", 1_000) is None
        True
        >>> clock.advance(1_000)
        >>> bool(roles.locks.acquire("job", "replica-b", 1_000))
        True
    """

    medium: Medium

    def __init__(self, clock: Clock | None = None, *, medium: Medium | None = None) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.medium: Medium = medium if medium is not None else MemoryMedium()
        shared: dict[str, Any] = {"clock": self.clock, "medium": self.medium}
        runs = MemoryRunRepository(**shared)
        linked: dict[str, Any] = {
            **shared,
            "has_run": runs.exists,
            "check_claim": runs.check_claim,
        }
        self.runs = runs
        self.steps = MemoryStepRepository(**linked)
        self.checkpoints = MemoryCheckpointRepository(**linked)
        self.idempotency = MemoryIdempotencyRepository(**shared)
        self.locks = MemoryLockRepository(**shared)
        self.effects = MemoryEffectRepository(**linked)
        self.state = MemoryStateRepository(**shared)
        self.artifacts = MemoryArtifactRepository(**shared)
        self.agent_revisions = MemoryAgentRevisionRepository(**shared)
        self.conversations = MemoryConversationRepository(**linked)

    def replace(self, **roles: Any) -> RoleSet:
        """Return a shallow copy with the given roles replaced (the seed's spread store).

        The roles not replaced are the same objects, still checking the original ``runs``.

        Raises:
            TypeError: A name is not one of the ten roles.
        """
        unknown = sorted(set(roles) - set(ROLE_NAMES))
        if unknown:
            raise InvalidType(f"replace: {unknown} are not roles; the roles are {ROLE_NAMES}")
        out = copy.copy(self)
        for name, role in roles.items():
            setattr(out, name, role)
        return out

    def __repr__(self) -> str:
        return f"RoleSet(clock={self.clock!r})"
