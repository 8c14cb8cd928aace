"""The exceptions memcommit raises.

Every error derives from :class:`MemcommitError`, and every message names the thing involved
(an id, an LSN, a path, a byte offset) and what the user can do about it. The Rust core raises
these same classes, so code catching them never needs to know which side raised.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CommandError",
    "CorruptLog",
    "ForgedReference",
    "Guard",
    "IntegrityError",
    "MemcommitError",
    "NotSupported",
    "Purged",
    "ReadOnlyStore",
    "Rejected",
    "SealMismatch",
    "SnapshotMismatch",
    "StoreClosed",
    "StoreLocked",
    "WriterFailed",
]


class MemcommitError(Exception):
    """The base of every error memcommit raises on purpose."""


class CommandError(Exception):
    """A failure the command line reports as one line of text, without a traceback.

    Raised by the commands (``memcommit.cli`` and the server's ``serve``), never by the
    library's API.

    Args:
        message: What went wrong and what the user can do, naming the path or line.
        code: The exit code: 1 for a failure, 2 for a usage error.

    """

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Guard:
    """The guard that refused a commit.

    Attributes:
        kind: ``"expect_lsn"``, ``"exists"``, ``"status"``, ``"tier"``, ``"lsn"`` or
            ``"unknown_id"`` (an operation named a memory the store does not have).
        id: The memory the guard is about, or None for ``expect_lsn``.
        expected: What the guard asked for: an int for ``expect_lsn`` and ``lsn``, a bool for
            ``exists`` and ``unknown_id`` (whether the memory should exist), else a str.
        actual: What the store had, in the same type.
    """

    kind: str
    id: str | None
    expected: int | bool | str
    actual: int | bool | str


class Rejected(MemcommitError):
    """A commit refused by a guard; nothing of it was written.

    Attributes:
        reason: A sentence saying which guard failed and what the store had.
        guard: The :class:`Guard` that failed.
    """

    def __init__(self, reason: str, guard: Guard | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.guard = guard


class Purged(MemcommitError):
    """The memory was purged by a retention policy during log compaction."""


class StoreLocked(MemcommitError):
    """Another writer holds the log file (in this process or another)."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class StoreClosed(MemcommitError):
    """The store was closed."""


class ReadOnlyStore(MemcommitError):
    """A write was attempted on a store opened with ``read_only=True``."""


class WriterFailed(MemcommitError):
    """A write or fsync failed; the writer stopped and the store must be reopened.

    After a failed fsync the kernel may have dropped the unwritten pages, so no later success
    can prove the data safe. Reopening recovers from what is on disk.
    """


class NotSupported(MemcommitError):
    """The operation does not apply to this kind of store.

    A store in RAM (``":memory:"``) keeps its hash-chained log in memory, so seals and
    ``verify`` work on it; what needs a log file does not: ``save_snapshot``, opening with
    ``snapshot=`` or ``read_only=True``, and log compaction.
    """


class IntegrityError(MemcommitError):
    """The log's bytes are not what was written."""


class CorruptLog(IntegrityError):
    """A damaged record inside committed data (not a torn tail).

    Attributes:
        path: The log file.
        offset: Byte offset of the damaged record.
        lsn: The LSN expected there.
    """

    def __init__(
        self,
        message: str,
        path: str | None = None,
        offset: int | None = None,
        lsn: int | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset
        self.lsn = lsn


class SealMismatch(IntegrityError):
    """The hash chain recomputed from the log and a seal (or an anchor) disagree.

    Attributes:
        path: The log file.
        lsn: LSN of the seal's own record (``Seal.record_lsn``), for a seal in the log or an
            anchor the log lacks.
        offset: Byte offset of that seal's record (None for an anchor the log lacks).
        after_lsn: LSN of the last record the previous matching seal covered: the change lies
            after it and before ``lsn``.
    """

    def __init__(
        self,
        message: str,
        path: str | None = None,
        lsn: int | None = None,
        offset: int | None = None,
        after_lsn: int | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.lsn = lsn
        self.offset = offset
        self.after_lsn = after_lsn


class ForgedReference(IntegrityError):
    """A reference to a memory that never existed and was never purged.

    Attributes:
        path: The log file.
        id: The id referred to.
        by: The memory whose ``sources`` name it.
        lsn: LSN of the put that refers to it.
        offset: Byte offset of that put.
    """

    def __init__(
        self,
        message: str,
        path: str | None = None,
        id: str | None = None,
        by: str | None = None,
        lsn: int | None = None,
        offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.id = id
        self.by = by
        self.lsn = lsn
        self.offset = offset


class SnapshotMismatch(MemcommitError):
    """A snapshot does not belong to the log it was opened with."""
