"""memcommit: an embedded, log-structured memory database for AI agents.

Example:
    >>> import memcommit
    >>> store = memcommit.open(":memory:")
    >>> mid = store.put("User prefers dark mode", kind="fact")
    >>> store.get(mid).text
    'User prefers dark mode'
"""

from __future__ import annotations

from . import roles
from ._native import Memory, Record
from .aio import AsyncMemoryStore
from .clock import Clock, SystemClock
from .commit import TIERS, Commit
from .errors import (
    CorruptLog,
    ForgedReference,
    Guard,
    IntegrityError,
    InvalidType,
    InvalidValue,
    MemcommitError,
    NotSupported,
    Purged,
    ReadOnlyStore,
    Rejected,
    SealMismatch,
    SnapshotMismatch,
    StorageError,
    StoreClosed,
    StoreLocked,
    WriterFailed,
)
from .remote import RemoteStore
from .roles import (
    MemoryAgentRevisionRepository,
    MemoryArtifactRepository,
    MemoryCheckpointRepository,
    MemoryConversationRepository,
    MemoryEffectRepository,
    MemoryIdempotencyRepository,
    MemoryLockRepository,
    MemoryRunRepository,
    MemoryStateRepository,
    MemoryStepRepository,
    NewTurn,
    RoleSet,
)
from .roles.errors import *  # noqa: F403  (the role errors: roles.errors.__all__ lists them)
from .seals import AutoSeal, Seal, VerifyReport, check_seal, seal, verify
from .search import SearchHit
from .server import MemoryServer
from .store import MemoryStore, create_memory_store, open
from .tiers import MemoryCompactionReport, TierPolicy, compact_memory
from .wire import CommitOutcomeUnknown, ServerError, ServerUnavailable

__all__ = [
    "TIERS",
    "AsyncMemoryStore",
    "AutoSeal",
    "Clock",
    "Commit",
    "CommitOutcomeUnknown",
    "CorruptLog",
    "ForgedReference",
    "Guard",
    "IntegrityError",
    "InvalidType",
    "InvalidValue",
    "MemcommitError",
    "Memory",
    "MemoryAgentRevisionRepository",
    "MemoryArtifactRepository",
    "MemoryCheckpointRepository",
    "MemoryCompactionReport",
    "MemoryConversationRepository",
    "MemoryEffectRepository",
    "MemoryIdempotencyRepository",
    "MemoryLockRepository",
    "MemoryRunRepository",
    "MemoryServer",
    "MemoryStateRepository",
    "MemoryStepRepository",
    "MemoryStore",
    "NewTurn",
    "NotSupported",
    "Purged",
    "ReadOnlyStore",
    "Record",
    "Rejected",
    "RemoteStore",
    "RoleSet",
    "Seal",
    "SealMismatch",
    "SearchHit",
    "ServerError",
    "ServerUnavailable",
    "SnapshotMismatch",
    "StorageError",
    "StoreClosed",
    "StoreLocked",
    "SystemClock",
    "TierPolicy",
    "VerifyReport",
    "WriterFailed",
    "check_seal",
    "compact_memory",
    "create_memory_store",
    "open",
    "seal",
    "verify",
]
# Every role error, as memcommit.roles.errors names them; their wire helper and the LostReason
# type stay there only.
__all__ += roles.errors.__all__
__all__.remove("error_from_wire")
__all__.remove("LostReason")
del error_from_wire, LostReason  # noqa: F821  (star-imported above)
