"""memcommit: an embedded, log-structured memory database for AI agents.

Example:
    >>> import memcommit
    >>> store = memcommit.open(":memory:")
    >>> mid = store.put("User prefers dark mode", kind="fact")
    >>> store.get(mid).text
    'User prefers dark mode'
"""

from __future__ import annotations

from ._native import Memory, Record
from .clock import Clock, SystemClock
from .commit import TIERS, Commit
from .errors import (
    CorruptLog,
    ForgedReference,
    Guard,
    IntegrityError,
    MemcommitError,
    NotSupported,
    Purged,
    ReadOnlyStore,
    Rejected,
    SealMismatch,
    SnapshotMismatch,
    StoreClosed,
    StoreLocked,
    WriterFailed,
)
from .seals import AutoSeal, Seal, VerifyReport, check_seal, seal, verify
from .store import MemoryStore, create_memory_store, open
from .tiers import MemoryCompactionReport, TierPolicy, compact_memory

__all__ = [
    "TIERS",
    "AutoSeal",
    "Clock",
    "Commit",
    "CorruptLog",
    "ForgedReference",
    "Guard",
    "IntegrityError",
    "MemcommitError",
    "Memory",
    "MemoryCompactionReport",
    "MemoryStore",
    "NotSupported",
    "Purged",
    "ReadOnlyStore",
    "Record",
    "Rejected",
    "Seal",
    "SealMismatch",
    "SnapshotMismatch",
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
