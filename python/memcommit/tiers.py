"""Memory tiers: compaction that decides what agents see, and the view agents read.

Memories live in four tiers: ``working`` (what an agent is doing now), ``mid`` (summaries of
finished work), ``long`` (consolidated, lasting knowledge) and ``archive`` (what was replaced).
:func:`compact_memory` moves memories down that road in three steps:

1. **fold**: the active ``trace`` memories of the working tier that belong to a finished task
   become one ``summary`` (tier ``mid``, same task, `sources` = the traces);
2. **consolidate**: a cold mid-term segment (the active ``mid`` memories of one task, or of
   one time window of ``policy.window`` when they have no task) becomes one memory of tier
   ``long`` with `sources`; a segment is cold when the newest record of each of its memories
   is older than ``policy.cold_after``;
3. **merge**: two or more active ``mid`` summaries of one task become one.

Each step moves what it replaced to the archive; nothing is ever deleted, and
:func:`memcommit.lineage.lineage` leads from any result back to its originals. Each group is
written with guards on every memory it replaces (active, in the tier it was read in, and
unchanged since: its LSN), so a group that a concurrent writer changed is skipped whole and
picked up by the next run. The summarizer runs before the commit and outside any lock: a slow
model call holds nothing up and can never overwrite what was written meanwhile.

:func:`context` is the other half: the active memories an agent should read, working tier
first, then the mid-term summaries, then long-term memory, within a budget of characters.

Example:
    >>> import memcommit
    >>> from memcommit.tiers import compact_memory, context
    >>> store = memcommit.open(":memory:")
    >>> _ = store.put("Opened the settings page.", kind="trace", task="ui-42")
    >>> _ = store.put("Switched the theme to dark; the user confirmed.", kind="trace",
    ...               task="ui-42")
    >>> _ = store.finish_task("ui-42")
    >>> report = compact_memory(store)
    >>> print(report)
    fold: 1 created, 2 moved; consolidate: nothing to do; merge: nothing to do
    >>> [(m.kind, m.tier) for m in context(store, task="ui-42")]
    [('summary', 'mid')]
    >>> context(store, task="ui-42")[0].text
    'Opened the settings page. Switched the theme to dark; the user confirmed.'
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ._native import Memory
from .errors import InvalidType, InvalidValue, Rejected
from .summarize import Summarizer, default_summarizer

if TYPE_CHECKING:
    from .store import MemoryStore

__all__ = [
    "MemoryCompactionReport",
    "Replacement",
    "Skipped",
    "StepReport",
    "TierPolicy",
    "compact_memory",
    "context",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# The earliest time a datetime holds: where a window reaching back further is said to start.
_FIRST = datetime.min.replace(tzinfo=timezone.utc)
_ID = attrgetter("id")
_US = timedelta(microseconds=1)
# The tiers an agent reads, in the order it reads them.
_VISIBLE = ("working", "mid", "long")
# The kinds of memory that index other records rather than hold what an agent knows: the
# LangGraph store's vectors of its items (``memcommit.integrations.langgraph.store.VECTOR``
# and ``VECTOR_SEQ``). A context never includes them.
INDEX_KINDS = frozenset({"lg.vector", "lg.vector.seq"})
# Groups are written several to a commit (fewer fsyncs and calls); a commit is closed once
# it holds about this many records, or once its first summary is this old: with a slow
# summarizer (a model) each group is written soon after it is summarized, while what it read
# is fresh. A guard failing in a shared commit sends its groups back one per commit, so only
# the group that changed is skipped.
_RECORDS_PER_COMMIT = 8192
_SECONDS_PER_COMMIT = 0.05


def _duration(value: object, name: str) -> timedelta:
    """A policy field as a timedelta: a timedelta, or a number of seconds."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidType(
            f"{name} must be a timedelta or a number of seconds, not {type(value).__name__}"
        )
    if not math.isfinite(value):
        raise InvalidValue(f"{name}: must be a finite number of seconds, got {value!r}")
    try:
        return timedelta(seconds=value)
    except OverflowError:
        raise InvalidValue(
            f"{name}: {value!r} seconds is out of range "
            f"(a timedelta holds at most {timedelta.max.days} days)"
        ) from None


@dataclass(frozen=True, init=False)
class TierPolicy:
    """When memory compaction consolidates mid-term memories.

    Args:
        cold_after: A mid-term segment is cold, and consolidates into long-term memory, once
            the newest record of each of its memories is older than this (a timedelta or
            seconds; default 7 days; zero allowed). One reaching back before the earliest
            datetime (``timedelta.max``, say) makes nothing cold.
        window: Mid-term memories without a task are grouped into segments by when they were
            created, in windows of this length counted from the Unix epoch (a timedelta or
            seconds; default 1 day).

    Raises:
        TypeError: A field is neither a timedelta nor a number.
        ValueError: `cold_after` is negative, `window` is not positive, or a number of
            seconds is more than a timedelta holds.

    Example:
        >>> policy = TierPolicy(cold_after=3600, window=timedelta(hours=6))
        >>> policy.cold_after, policy.window
        (datetime.timedelta(seconds=3600), datetime.timedelta(seconds=21600))
    """

    cold_after: timedelta
    window: timedelta

    def __init__(
        self,
        cold_after: timedelta | float = timedelta(days=7),
        window: timedelta | float = timedelta(days=1),
    ) -> None:
        cold = _duration(cold_after, "cold_after")
        win = _duration(window, "window")
        if cold < timedelta(0):
            raise InvalidValue(f"cold_after: must not be negative, got {cold}")
        if win // _US <= 0:
            raise InvalidValue(f"window: must be at least one microsecond, got {win}")
        object.__setattr__(self, "cold_after", cold)
        object.__setattr__(self, "window", win)


@dataclass(frozen=True)
class Replacement:
    """One memory a step created, and the memories it replaced (now in the archive).

    Attributes:
        created: The new memory's id.
        sources: The ids it replaced, oldest first (also its `sources`).
        task: The task of the group, or None.
        window: For a segment of memories without a task, the start of its time window.
    """

    created: str
    sources: tuple[str, ...]
    task: str | None
    window: datetime | None = None


@dataclass(frozen=True)
class Skipped:
    """A group a step left untouched; the next run tries it again.

    Attributes:
        sources: The ids of the group, as read.
        task: The task of the group, or None.
        window: For a segment of memories without a task, the start of its time window.
        reason: Why: a memory changed under compaction (the guard's reason), the
            summarizer raised (its error) or returned no text.
    """

    sources: tuple[str, ...]
    task: str | None
    window: datetime | None
    reason: str


@dataclass(frozen=True)
class StepReport:
    """What one step of memory compaction did.

    Attributes:
        step: ``"fold"``, ``"consolidate"`` or ``"merge"``.
        replaced: One :class:`Replacement` per group written, in order.
        skipped: One :class:`Skipped` per group left untouched.
    """

    step: str
    replaced: tuple[Replacement, ...] = ()
    skipped: tuple[Skipped, ...] = ()

    @property
    def created(self) -> tuple[str, ...]:
        """The ids of the memories the step created."""
        return tuple(r.created for r in self.replaced)

    @property
    def moved(self) -> tuple[str, ...]:
        """The ids the step moved to the archive."""
        return tuple(i for r in self.replaced for i in r.sources)

    def __str__(self) -> str:
        if not self.replaced and not self.skipped:
            return f"{self.step}: nothing to do"
        text = f"{self.step}: {len(self.replaced)} created, {len(self.moved)} moved"
        if self.skipped:
            n = len(self.skipped)
            text += f", {n} group{'' if n == 1 else 's'} skipped"
        return text


@dataclass(frozen=True)
class MemoryCompactionReport:
    """What :func:`compact_memory` did, step by step.

    Attributes:
        fold: The fold step.
        consolidate: The consolidate step.
        merge: The merge step.
    """

    fold: StepReport = field(default_factory=lambda: StepReport("fold"))
    consolidate: StepReport = field(default_factory=lambda: StepReport("consolidate"))
    merge: StepReport = field(default_factory=lambda: StepReport("merge"))

    @property
    def steps(self) -> tuple[StepReport, StepReport, StepReport]:
        """The three step reports, in the order they ran."""
        return (self.fold, self.consolidate, self.merge)

    @property
    def created(self) -> tuple[str, ...]:
        """The ids of every memory created, step after step."""
        return tuple(i for s in self.steps for i in s.created)

    @property
    def moved(self) -> tuple[str, ...]:
        """The ids of every memory moved to the archive."""
        return tuple(i for s in self.steps for i in s.moved)

    @property
    def skipped(self) -> tuple[Skipped, ...]:
        """Every group left untouched, step after step."""
        return tuple(g for s in self.steps for g in s.skipped)

    @property
    def wrote(self) -> bool:
        """Whether the run wrote anything."""
        return any(s.replaced for s in self.steps)

    def __str__(self) -> str:
        return "; ".join(str(s) for s in self.steps)


# -- compaction --------------------------------------------------------------------------


class _Group:
    """Memories that become one, read in one step (oldest first), and the text made for them."""

    __slots__ = ("ids", "members", "task", "text", "window")

    def __init__(self, members: list[Memory], task: str | None, window: datetime | None = None):
        self.members = members
        self.ids: tuple[str, ...] = tuple(map(_ID, members))
        self.task = task
        self.window = window
        self.text = ""

    def skip(self, reason: str) -> Skipped:
        return Skipped(self.ids, self.task, self.window, reason)


def compact_memory(
    store: MemoryStore,
    policy: TierPolicy | None = None,
    summarizer: Summarizer | None = None,
) -> MemoryCompactionReport:
    """Fold, consolidate and merge memories; move what they replace to the archive.

    The three steps run in that order (see the module's documentation), each reading the
    store once and writing each group in a guarded commit. Nothing is deleted. A second run
    with nothing new (no newly finished task, no new trace of one, no segment gone cold)
    writes nothing.

    Each created memory has kind ``summary`` (a consolidation of memories that all share
    another kind keeps that kind), the group's task, the union of the group's tags, `sources`
    = the group (oldest first) and `data` saying which step and summarizer made it, e.g.
    ``{"compaction": "fold", "summarizer": "memcommit.summarize.ExtractiveSummarizer"}``.

    Groups are chosen as follows. fold: per finished task, every active trace of the working
    tier (traces without a task are never folded). consolidate: every cold segment of one
    memory or more (one lone summary is consolidated too, or a task's memory would never
    reach the long tier); long-term memories are never inputs, so a consolidation is never
    consolidated again. merge: per task, two or more active summaries of the mid tier.

    Args:
        store: The store to compact. Its clock gives "now" for `policy.cold_after`.
        policy: When segments are cold and how task-less memories are grouped
            (default: ``TierPolicy()``).
        summarizer: ``summarizer(memories, purpose) -> str``, called once per group with the
            group oldest first and the step's name as purpose (default:
            :data:`memcommit.summarize.default_summarizer`). One that raises, or returns an
            empty or non-str text, leaves its group untouched; the report says so.

    Returns:
        A :class:`MemoryCompactionReport` of what was created, moved and skipped.

    Raises:
        TypeError: `store`, `policy` or `summarizer` has the wrong type.
    """
    if not all(hasattr(store, a) for a in ("find", "commit", "is_task_finished", "now_us")):
        raise InvalidType(f"store must be a MemoryStore, not {type(store).__name__}")
    if policy is None:
        policy = TierPolicy()
    elif not isinstance(policy, TierPolicy):
        raise InvalidType(f"policy must be a TierPolicy or None, not {type(policy).__name__}")
    if summarizer is None:
        summarizer = default_summarizer
    elif not callable(summarizer):
        raise InvalidType(f"summarizer must be callable, not {type(summarizer).__name__}")
    made_by = _name_of(summarizer)
    cutoff = _cutoff(store.now_us(), policy.cold_after)
    fold = _Step(store, "fold", "working", summarizer, made_by).run(_fold_groups(store))
    consolidate = _Step(store, "consolidate", "mid", summarizer, made_by).run(
        _cold_segments(store, policy, cutoff)
    )
    merge = _Step(store, "merge", "mid", summarizer, made_by).run(_merge_groups(store))
    return MemoryCompactionReport(fold, consolidate, merge)


def _fold_groups(store: MemoryStore) -> list[_Group]:
    """The active working-tier traces of each finished task."""
    by_task: dict[str, list[Memory]] = {}
    for m in store.find(tier="working", kind="trace"):
        task = m.task
        if task is not None:
            group = by_task.get(task)
            if group is None:
                by_task[task] = [m]
            else:
                group.append(m)
    return [_Group(ms, t) for t, ms in by_task.items() if store.is_task_finished(t)]


def _cutoff(now_us: int, cold_after: timedelta) -> datetime | None:
    """`cold_after` before now: a memory last written before then is cold.

    None when that is before the earliest datetime: no memory is older, so none is cold.
    """
    try:
        return _EPOCH + (now_us * _US - cold_after)
    except OverflowError:
        return None


def _cold_segments(store: MemoryStore, policy: TierPolicy, cutoff: datetime | None) -> list[_Group]:
    """The active mid-tier segments whose every memory was last written before `cutoff`."""
    if cutoff is None:
        return []
    window_us = policy.window // _US
    segments: dict[str | int, list[Memory]] = {}
    for m in store.find(tier="mid"):
        task = m.task
        key = task if task is not None else ((m.created_at - _EPOCH) // _US) // window_us
        members = segments.get(key)
        if members is None:
            segments[key] = [m]
        else:
            members.append(m)
    return [
        _Group(ms, None, _window_start(key, window_us)) if isinstance(key, int) else _Group(ms, key)
        for key, ms in segments.items()
        if all(m.updated_at < cutoff for m in ms)
    ]


def _window_start(key: int, window_us: int) -> datetime:
    """The start of time window `key`, counted from the epoch.

    The earliest datetime for a window of memories from before 1970 that reaches back further.
    """
    try:
        return _EPOCH + key * window_us * _US
    except OverflowError:
        return _FIRST


def _merge_groups(store: MemoryStore) -> list[_Group]:
    """The active mid-tier summaries of each task that has two or more."""
    by_task: dict[str, list[Memory]] = {}
    for m in store.find(tier="mid", kind="summary"):
        if m.task is not None:
            by_task.setdefault(m.task, []).append(m)
    return [_Group(ms, t) for t, ms in by_task.items() if len(ms) >= 2]


class _Step:
    """One step: summarize each group, then write the groups in guarded commits."""

    def __init__(
        self, store: MemoryStore, step: str, tier: str, summarizer: Summarizer, made_by: str
    ) -> None:
        self.store = store
        self.step = step
        self.tier = tier  # the tier the groups were read in (guarded)
        self.new_tier = "long" if step == "consolidate" else "mid"
        self.summarizer = summarizer
        self.made_by = made_by
        self.replaced: list[Replacement] = []
        self.skipped: list[Skipped] = []

    def run(self, groups: Iterable[_Group]) -> StepReport:
        batch: list[_Group] = []
        records = 0
        started = 0.0
        for g in groups:
            if not batch:
                started = time.monotonic()
            if not self._summarize(g):
                continue
            batch.append(g)
            records += 2 * len(g.members) + 1
            if records >= _RECORDS_PER_COMMIT or time.monotonic() - started > _SECONDS_PER_COMMIT:
                self._write_batch(batch)
                batch, records = [], 0
        if batch:
            self._write_batch(batch)
        return StepReport(self.step, tuple(self.replaced), tuple(self.skipped))

    def _summarize(self, g: _Group) -> bool:
        """Run the summarizer on `g`; on failure record it as skipped and return False."""
        try:
            text = self.summarizer(tuple(g.members), self.step)
        except Exception as e:
            self.skipped.append(g.skip(f"the summarizer raised {type(e).__name__}: {e}"))
            return False
        if not isinstance(text, str):
            self.skipped.append(g.skip(f"the summarizer returned {type(text).__name__}, not str"))
            return False
        if not text.strip():
            self.skipped.append(g.skip("the summarizer returned no text"))
            return False
        g.text = text
        return True

    def _write_batch(self, batch: Sequence[_Group]) -> None:
        if len(batch) > 1:
            try:
                created = self._commit(batch)
            except (Rejected, ValueError, TypeError):
                pass  # find the group at fault: write each alone
            else:
                self.replaced.extend(
                    self._replacement(g, c) for g, c in zip(batch, created, strict=True)
                )
                return
        for g in batch:
            try:
                (created_one,) = self._commit([g])
            except Rejected as e:
                self.skipped.append(g.skip(f"changed during compaction: {e.reason}"))
            except (ValueError, TypeError) as e:
                self.skipped.append(g.skip(f"could not be written: {e}"))
            else:
                self.replaced.append(self._replacement(g, created_one))

    def _commit(self, batch: Sequence[_Group]) -> list[str]:
        """Write `batch` in one commit: per group, guards, the new memory, the moves."""
        created: list[str] = []
        tier = self.tier
        with self.store.commit() as c:
            expect, move = c.expect, c.move
            for g in batch:
                members = g.members
                for m in members:
                    expect(m.id, status="active", tier=tier, lsn=m.lsn)
                created.append(
                    c.put(
                        g.text,
                        kind=self._kind(members),
                        task=g.task,
                        tier=self.new_tier,
                        data=self._data(g),
                        tags=_tags(members),
                        sources=g.ids,
                    )
                )
                for i in g.ids:
                    move(i, "archive")
        return created

    def _kind(self, members: Sequence[Memory]) -> str:
        if self.step == "consolidate":
            kind = members[0].kind
            if all(m.kind == kind for m in members):
                return kind
        return "summary"

    def _data(self, g: _Group) -> dict[str, Any]:
        data: dict[str, Any] = {"compaction": self.step, "summarizer": self.made_by}
        if g.window is not None:
            data["window"] = g.window.isoformat()
        return data

    def _replacement(self, g: _Group, created: str) -> Replacement:
        return Replacement(created, g.ids, g.task, g.window)


def _tags(members: Sequence[Memory]) -> tuple[str, ...]:
    """The tags of `members`, each once, in order of first appearance."""
    if len(members) == 1:
        return members[0].tags
    return tuple(dict.fromkeys(t for m in members for t in m.tags))


def _name_of(summarizer: Summarizer) -> str:
    """A name for the summarizer, kept in what it writes (e.g. the module and class)."""
    qualname = getattr(summarizer, "__qualname__", None)
    if not isinstance(qualname, str):
        qualname = type(summarizer).__qualname__
    module = getattr(summarizer, "__module__", None)
    return f"{module}.{qualname}" if isinstance(module, str) else qualname


# -- what agents see ---------------------------------------------------------------------


def context(
    store: MemoryStore,
    task: str | None = None,
    budget_chars: int = 4000,
    query: str | None = None,
) -> list[Memory]:
    """The active memories an agent should read, most immediate first, within a budget.

    The working tier comes first, then the mid-term summaries, then long-term memory; never
    archived or stale memories, nor the memories that index other records (``INDEX_KINDS``:
    the LangGraph store's vectors). The budget is spent tier by tier in that order, and within a
    tier on the newest memories first: a memory whose text does not fit in what is left is
    passed over for older, shorter ones. The memories chosen are returned grouped by tier
    and, within a tier, oldest first, so they read as a story.

    With a `query`, the budget is spent within each tier on the memories most relevant to it
    first (:meth:`~memcommit.MemoryStore.search`, hybrid: by meaning where the memories have
    vectors, and by words), then on the rest newest first; the memories chosen are returned
    grouped by tier and, within a tier, in that order (most relevant first).

    Args:
        store: The store to read.
        task: Only the memories of this task and those of no task (what holds for every
            task: preferences, facts); None (default) for every memory.
        budget_chars: The most characters of text, summed over the memories returned.
        query: What the agent is about to do, to rank each tier's memories by (None: newest
            first).

    Returns:
        The memories, working tier first, then ``mid``, then ``long``.

    Raises:
        TypeError: `task` or `query` is not a str or None, or `budget_chars` is not an int.
        ValueError: `budget_chars` is negative.
    """
    if task is not None and not isinstance(task, str):
        raise InvalidType(f"task must be str or None, not {type(task).__name__}")
    if isinstance(budget_chars, bool) or not isinstance(budget_chars, int):
        raise InvalidType(f"budget_chars must be int, not {type(budget_chars).__name__}")
    if budget_chars < 0:
        raise InvalidValue(f"budget_chars: must not be negative, got {budget_chars}")
    if query is not None and not isinstance(query, str):
        raise InvalidType(f"query must be str or None, not {type(query).__name__}")
    left = budget_chars
    chosen: list[Memory] = []
    for tier in _VISIBLE:
        if left <= 0:
            break
        in_tier = store.find(tier=tier)
        found = [m for m in in_tier if m.kind not in INDEX_KINDS]
        if task is not None:
            found = [m for m in found if m.task is None or m.task == task]
        # The order the budget is spent in: newest first, or most relevant first.
        order = list(reversed(found))
        if query is not None and found:
            ranked = [h.memory for h in store.search(query, k=len(in_tier), tier=tier)]
            ranked_ids = {m.id for m in ranked}
            allowed = {m.id for m in found}
            order = [m for m in ranked if m.id in allowed]
            order += [m for m in reversed(found) if m.id not in ranked_ids]
        picked: list[Memory] = []
        for m in order:
            size = len(m.text)
            if size <= left:
                picked.append(m)
                left -= size
                if not left:
                    break
        if query is None:
            picked.reverse()
        chosen.extend(picked)
    return chosen
