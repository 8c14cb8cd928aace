"""The agent-runtime roles: what an agent runtime keeps beside its memories.

A store exposes ten roles as attributes: ``runs``, ``steps``, ``checkpoints``,
``idempotency``, ``locks``, ``effects``, ``state``, ``artifacts``, ``agent_revisions`` and
``conversations``. Each is an interface (a :class:`typing.Protocol`: :class:`RunRepository`
...) with one implementation per store kind; the in-memory ones are public classes usable
alone (:class:`MemoryRunRepository` ...), and :class:`RoleSet` wires the ten together.

The contract every implementation keeps (pinned by ``memcommit.testing``'s contract suite):

* Values are JSON documents (bytes for artifact data), checked and deep-copied on the way in
  and out; records are frozen dataclasses.
* Each operation is atomic and reads the clock once. A lease granted at T with ``ttl_ms`` is
  live while ``now < T + ttl_ms``; ``ttl_ms`` is a positive int.
* Fencing tokens, versions and sequence numbers are integers that are never reused.
* Reads of an unknown run return None or ``[]``; writes raise :class:`RunNotFoundError`.
* Every error derives from :class:`memcommit.MemcommitError` and has a stable ``code``.
* The API is synchronous.

Example:
    >>> from memcommit.roles import RoleSet
    >>> roles = RoleSet()
    >>> run = roles.runs.create(agent_id="support-bot", input={"ticket": 42})
    >>> claim = roles.runs.claim_next(worker_id="w1", ttl_ms=30_000)
    >>> step = roles.steps.start(run.run_id, "1", name="fetch", token=claim.token)
    >>> roles.steps.complete(run.run_id, "1", output="ok", token=claim.token).status
    'succeeded'
"""

from __future__ import annotations

from . import errors
from .artifacts import Artifact, ArtifactRepository, ArtifactVersion, MemoryArtifactRepository
from .checkpoints import Checkpoint, CheckpointRepository, MemoryCheckpointRepository
from .conversations import (
    Conversation,
    ConversationRepository,
    MemoryConversationRepository,
    NewTurn,
    Turn,
)
from .effects import EffectRecord, EffectRepository, MemoryEffectRepository
from .errors import *  # noqa: F403  (the role errors: errors.__all__ lists them)
from .idempotency import (
    IdempotencyRecord,
    IdempotencyRepository,
    MemoryIdempotencyRepository,
    Reservation,
)
from .locks import Lease, LockRepository, MemoryLockRepository
from .medium import Medium, MemoryMedium
from .revisions import MemoryAgentRevisionRepository, Revision, RevisionRepository
from .roleset import ROLE_NAMES, RoleSet
from .runs import Claim, MemoryRunRepository, Run, RunRepository
from .state import AgentStateRepository, MemoryStateRepository, StateEntry
from .steps import MemoryStepRepository, Step, StepRepository
from .values import Json, Namespace

__all__ = [
    "ROLE_NAMES",
    "AgentStateRepository",
    "Artifact",
    "ArtifactRepository",
    "ArtifactVersion",
    "Checkpoint",
    "CheckpointRepository",
    "Claim",
    "Conversation",
    "ConversationRepository",
    "EffectRecord",
    "EffectRepository",
    "IdempotencyRecord",
    "IdempotencyRepository",
    "Json",
    "Lease",
    "LockRepository",
    "Medium",
    "MemoryAgentRevisionRepository",
    "MemoryArtifactRepository",
    "MemoryCheckpointRepository",
    "MemoryConversationRepository",
    "MemoryEffectRepository",
    "MemoryIdempotencyRepository",
    "MemoryLockRepository",
    "MemoryMedium",
    "MemoryRunRepository",
    "MemoryStateRepository",
    "MemoryStepRepository",
    "Namespace",
    "NewTurn",
    "Reservation",
    "Revision",
    "RevisionRepository",
    "RoleSet",
    "Run",
    "RunRepository",
    "StateEntry",
    "Step",
    "StepRepository",
    "Turn",
]
# Every role error, as memcommit.roles.errors names them; the LostReason type stays there only.
__all__ += errors.__all__
__all__.remove("LostReason")
del LostReason  # noqa: F821  (star-imported above)
