"""Log compaction and retention: what the disk holds.

Example:
    ```python
    from memcommit.storage import ArchivedOlderThan, compact

    report = compact(store, retention=ArchivedOlderThan(seconds=30 * 86400))
    print(report.before, "->", report.after, "records; purged", len(report.purged))
    ```

Up to the horizon (an LSN; default the head) each memory keeps exactly the original records
replay needs: its last put, and its last status change and last move when they come after
that put (a put carries the memory's whole state); each role entity its newest record; each
finished task one record. Every record after the horizon is kept as it is (old seals aside:
they vouch for the old log, whose chain the manifest keeps; the new log gets a seal of its
own). LSNs are never renumbered. The rewrite streams in the Rust core.

Retention purges, here and only here, the memories a policy names that have no record after
the horizon. ``ArchivedOlderThan`` and ``KindsAfter`` are evaluated in Rust; any other
:class:`RetentionPolicy` implements ``selects(memory, now)``; ``|`` combines them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from . import manifest as _manifest
from ._native import Memory
from .engine import CompactionPlan
from .errors import InvalidType, InvalidValue, NotSupported

if TYPE_CHECKING:
    from .store import MemoryStore

__all__ = [
    "AnyOf",
    "ArchivedOlderThan",
    "CompactionReport",
    "KindsAfter",
    "RetentionPolicy",
    "compact",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_FAILPOINT_ENV = "MEMCOMMIT_FAILPOINT"


def _seconds(value: object, name: str) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidType(f"{name} must be seconds (int or float) or a timedelta, not {value!r}")
    if not value >= 0 or value == float("inf"):
        raise InvalidValue(f"{name} must be a finite number of seconds >= 0, not {value!r}")
    return float(value)


class RetentionPolicy:
    """Names the memories log compaction may purge. Subclass and implement :meth:`selects`.

    Policies combine with ``|``: a memory is purged when any of them selects it.
    """

    def selects(self, memory: Memory, now: datetime) -> bool:
        """Whether `memory` should be purged at time `now` (the store's clock)."""
        raise NotImplementedError(f"{type(self).__name__} must implement selects(memory, now)")

    def __or__(self, other: RetentionPolicy) -> AnyOf:
        if not isinstance(other, RetentionPolicy):
            return NotImplemented
        return AnyOf(self, other)


def _at_least(seconds: float, when: datetime, now: datetime) -> bool:
    """Whether `when` is at least `seconds` before `now`.

    An age longer than the calendar reaches back is longer than any memory's.
    """
    try:
        return when <= now - timedelta(seconds=seconds)
    except OverflowError:
        return False


def _age_us(seconds: float, now: datetime) -> int:
    """An age in microseconds for the core.

    One longer than the time since the epoch (before any memory) is cut to just past it, which
    selects nothing, as any longer age would.
    """
    past_all = _us(now) + 1
    age_us = seconds * 1e6  # may be inf for a finite but huge age
    return round(age_us) if age_us < past_all else past_all


@dataclass(frozen=True)
class ArchivedOlderThan(RetentionPolicy):
    """Memories in the archive tier whose last move is at least `seconds` old."""

    seconds: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "seconds", _seconds(self.seconds, "seconds"))

    def selects(self, memory: Memory, now: datetime) -> bool:
        """The same rule in Python (compaction evaluates it in Rust): counted from the last move."""
        return memory.tier == "archive" and _at_least(self.seconds, memory.moved_at, now)


@dataclass(frozen=True)
class KindsAfter(RetentionPolicy):
    """Memories of a kind created at least so many seconds ago: ``{"trace": 7 * 86400}``."""

    ages: Mapping[str, float]

    def __post_init__(self) -> None:
        if not isinstance(self.ages, Mapping) or not self.ages:
            raise InvalidType(
                f"ages must be a non-empty mapping of kind to seconds, not {self.ages!r}"
            )
        clean: dict[str, float] = {}
        for kind, age in self.ages.items():
            if not isinstance(kind, str) or not kind:
                raise InvalidType(f"ages: a kind must be a non-empty str, not {kind!r}")
            clean[kind] = _seconds(age, f"ages[{kind!r}]")
        object.__setattr__(self, "ages", clean)

    def selects(self, memory: Memory, now: datetime) -> bool:
        """Evaluated in Rust during compaction; this is the same rule in Python."""
        age = self.ages.get(memory.kind)
        return age is not None and _at_least(age, memory.created_at, now)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.ages.items())))


class AnyOf(RetentionPolicy):
    """Purge what any of the policies selects (what ``a | b`` builds)."""

    def __init__(self, *policies: RetentionPolicy) -> None:
        """Combine `policies`."""
        for p in policies:
            if not isinstance(p, RetentionPolicy):
                raise InvalidType(f"AnyOf takes RetentionPolicy objects, not {type(p).__name__}")
        self.policies = tuple(q for p in policies for q in _parts(p))

    def selects(self, memory: Memory, now: datetime) -> bool:
        """Whether any policy selects `memory`."""
        return any(p.selects(memory, now) for p in self.policies)

    def __repr__(self) -> str:
        return " | ".join(repr(p) for p in self.policies)


def _parts(policy: RetentionPolicy) -> tuple[RetentionPolicy, ...]:
    """The simple policies `policy` combines (itself, unless it is an :class:`AnyOf`)."""
    return policy.policies if isinstance(policy, AnyOf) else (policy,)


@dataclass(frozen=True)
class CompactionReport:
    """What :func:`compact` did.

    Attributes:
        before: Records in the log before.
        after: Records in the new log (its new seal included).
        purged: Ids retention purged.
        horizon: The horizon LSN.
        bytes_before: Bytes of the log before.
        bytes_after: Bytes of the new log.
        seconds: How long it took.
        generation: The new log's generation.
        dry_run: Whether this is what a compaction would do (``compact(..., dry_run=True)``):
            nothing was written, and `after`, `bytes_after`, `purged` and `generation` are what
            the compaction would leave.
    """

    before: int
    after: int
    purged: tuple[str, ...]
    horizon: int
    bytes_before: int
    bytes_after: int
    seconds: float
    generation: int
    dry_run: bool = False


def _us(when: datetime) -> int:
    return (when - _EPOCH) // timedelta(microseconds=1)


def _failpoint(step: str) -> None:
    """Crash tests: ``MEMCOMMIT_FAILPOINT=<step>`` kills the process at that step."""
    if os.environ.get(_FAILPOINT_ENV) == step:
        os.kill(os.getpid(), 9)


def compact(
    store: MemoryStore,
    retention: RetentionPolicy | None = None,
    horizon: int | None = None,
    progress: Callable[[int, int], object] | None = None,
    *,
    dry_run: bool = False,
) -> CompactionReport:
    """Compact the store's log into a new generation (see the module docstring).

    Holds the writer for the duration (on PostgreSQL: the store's lock, so every client's
    commits wait, and their reads go on); the store stays open and usable afterwards. With
    `dry_run`, only finds out what the compaction would keep, purge and reclaim, and writes
    nothing (also on a read-only store; commits wait while it reads the log).

    Args:
        store: A writable store on a log file or in PostgreSQL.
        retention: What to purge (default nothing).
        horizon: The LSN up to which history is folded (default the head).
        progress: Called with (bytes read, total bytes) as the log is read.
        dry_run: Write nothing; report what the compaction would do.

    Returns:
        The report.

    Raises:
        NotSupported: The store keeps no log of its own (it is in RAM, or a server's).
        ValueError: `horizon` is past the head or not an int.
        SealMismatch, ForgedReference, CorruptLog: The log holds seals and `verify` fails
            on it: a compaction would carry the change into a log whose seals match it.
    """
    from .store import MemoryStore

    if not isinstance(store, MemoryStore):
        raise InvalidType(f"store must be a memcommit.MemoryStore, not {type(store).__name__}")
    if "remote" in store.capabilities:
        raise NotSupported(
            "compact: a RemoteStore's log belongs to its server; stop the server, run "
            "'memcommit compact PATH' on the log, and start it again (clients resync)"
        )
    if "compact" not in store.capabilities:
        raise NotSupported("compact: a store in RAM keeps no log file to compact")
    if horizon is not None and (isinstance(horizon, bool) or not isinstance(horizon, int)):
        raise InvalidType(f"horizon must be an int LSN or None, not {horizon!r}")
    if horizon is not None and horizon < 0:
        raise InvalidValue(f"horizon must be >= 0, not {horizon}")
    if not isinstance(dry_run, bool):
        raise InvalidType(f"dry_run must be a bool, not {dry_run!r}")
    if progress is not None and not callable(progress):
        raise InvalidType(f"progress must be a callable or None, not {type(progress).__name__}")
    if retention is not None and not isinstance(retention, RetentionPolicy):
        raise InvalidType(f"retention must be a RetentionPolicy, not {type(retention).__name__}")
    if store.seals():
        # The old seals go to the manifest and the new log is sealed afresh, so a log whose
        # bytes its seals no longer vouch for would come out verifying: check them first
        # (`verify`, with the same errors), so a changed record stops the compaction.
        store.engine.view().verify(None, None)
    now = _EPOCH + timedelta(microseconds=store.now_us())
    archived: float | None = None
    kinds: dict[str, float] = {}
    custom: list[RetentionPolicy] = []
    for p in _parts(retention) if retention is not None else ():
        if type(p) is ArchivedOlderThan:
            archived = p.seconds if archived is None else min(archived, p.seconds)
        elif type(p) is KindsAfter:
            for kind, age in p.ages.items():
                kinds[kind] = min(age, kinds.get(kind, age))
        else:
            custom.append(p)
    ids: list[str] = []
    if custom:
        # The policies judge each memory as it stands at `horizon`; a memory written after
        # it (while they ran) has a record past the horizon, so the compaction keeps it.
        if horizon is None:
            horizon = store.lsn
        for m in store.find(status=None):
            if m.lsn <= horizon and any(p.selects(m, now) for p in custom):
                ids.append(m.id)
    path = store.path
    store_id = store.store_id

    def entry(done: dict[str, Any]) -> _manifest.ManifestEntry:
        return {
            "generation": done["generation"],
            "at": now.isoformat(),
            "horizon": done["horizon"],
            "before": done["before"],
            "after": done["after"],
            "bytes_before": done["bytes_before"],
            "bytes_after": done["bytes_after"],
            "purged": sorted(done["purged"]),
            "old_chain": {
                "generation": done["old_generation"],
                "lsn": done["old_lsn"],
                "hash": done["old_chain"],
                "seals": [
                    {"lsn": s[0], "record_lsn": s[1], "hash": s[5], "keyed": s[4], "at_us": s[3]}
                    for s in done["old_seals"]
                ],
            },
        }

    def before_swap(done: dict[str, Any]) -> None:
        assert path is not None  # called by a log file's engine only
        # The entries of the generations the log has reached, as a writer's open keeps them:
        # an earlier compaction whose manifest was renamed into place but that failed after
        # (its directory's fsync) left one for the generation this one makes, which the
        # log never reached (its purge never happened).
        entries = _manifest.reconcile(path, store_id, int(done["old_generation"]), write=False)
        _manifest.write_manifest(path, store_id, [*entries, entry(done)])

    started = time.perf_counter()
    plan = CompactionPlan(
        horizon=horizon,
        archived_older_than_us=None if archived is None else _age_us(archived, now),
        kinds_after_us=[(k, _age_us(v, now)) for k, v in kinds.items()],
        ids=ids,
        now_us=_us(now),
        at_us=store.now_us(),
        before_swap=before_swap,
        entry=entry,
        step=_failpoint,
        progress=progress,
        dry_run=dry_run,
    )
    report = store.engine.compact(plan)
    return CompactionReport(
        before=int(report["before"]),
        after=int(report["after"]),
        purged=tuple(report["purged"]),
        horizon=int(report["horizon"]),
        bytes_before=int(report["bytes_before"]),
        bytes_after=int(report["bytes_after"]),
        seconds=time.perf_counter() - started,
        generation=int(report["generation"]),
        dry_run=dry_run,
    )
