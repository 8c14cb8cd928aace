"""The demo workload behind ``memcommit demo``: a fleet of agents writing one memory log.

Agents take tasks from a queue and work on them in steps. Each step is one commit of a
few records: traces of tool calls, facts learned, notes to self, and at the end of a task
an episode that cites the memories it came from. Along the way agents mark memories stale
(guarded with ``expect(status="active")``), restore some, revise facts, move finished
work to the ``mid`` and ``long`` tiers and cold work to the ``archive``, and finish tasks.
Now and then two agents race for the same memory and the guard refuses the loser's whole
commit, which then retries without the conflicting change. Everything is deterministic
from the seed.

Example:
    >>> from memcommit.demo import DemoOptions, run_demo
    >>> report = run_demo(DemoOptions(path="memory.db", memories=2000, agents=5, tasks=20))
    ... # doctest: +SKIP

"""

from __future__ import annotations

import errno
import os
import random
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import memcommit
from memcommit.postgres.dsn import is_postgres_url
from memcommit.progress import Progress

from .errors import InvalidValue
from .files import WriterHolds, holding_writer_locks

__all__ = [
    "DURABILITY_NOTES",
    "DemoOptions",
    "DemoReport",
    "Durability",
    "format_report",
    "run_demo",
]

Durability = Literal["commit", "batch", "none"]

TIERS = ("working", "mid", "long", "archive")
STATUSES = ("active", "stale")

DURABILITY_NOTES: dict[Durability, str] = {
    "batch": "batch (fsync every 50 ms and at close, like a fleet's shared writer; "
    "--durability commit fsyncs every commit)",
    "commit": "commit (every commit is fsynced before it returns; slowest, safest)",
    "none": "none (the OS decides when to write; bulk-load speed, no power-loss guarantee)",
}

# Per-step chances. About a quarter of steps stale one earlier memory of the task, which
# leaves roughly 10% of all memories stale once restores are counted.
_P_STALE = 0.27
_P_RESTORE = 0.03
_P_REVISE = 0.04
_P_RACE = 0.006
_P_MOVE_TRACE_TO_MID = 0.35
_P_MOVE_FACT_TO_LONG = 0.3
_P_ARCHIVE = 0.6
_ARCHIVE_CHUNK = 12
_MAX_SOURCES = 5

# A small vocabulary: enough variety for realistic-looking text, small enough to read.
_TOPICS = (
    "billing-migration",
    "onboarding-flow",
    "search-ranking",
    "invoice-export",
    "refund-policy",
    "latency-regression",
    "schema-upgrade",
    "support-triage",
    "pricing-page",
    "data-retention",
    "auth-tokens",
    "report-builder",
)
_TOOLS = (
    "search_docs",
    "run_sql",
    "http_get",
    "read_file",
    "write_file",
    "run_tests",
    "grep_repo",
    "list_tickets",
    "send_email",
    "fetch_metrics",
)
_OBJECTS = (
    "customer table",
    "invoice batch",
    "staging cluster",
    "nightly job",
    "retry queue",
    "pricing config",
    "login endpoint",
    "export script",
    "cache layer",
    "audit log",
    "feature flag",
    "migration plan",
    "error budget",
    "support macro",
)
_OUTCOMES = (
    "found nothing unusual",
    "saw two timeouts",
    "confirmed the fix",
    "hit a permission error",
    "got a stale cache entry",
    "matched the expected totals",
    "needs a second look",
    "found a duplicate row",
    "saw the p95 drop",
    "was rate limited once",
)
_CUSTOMERS = ("Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark", "Wayne", "Tyrell")
_SETTINGS = ("timeout", "batch size", "retry limit", "region", "currency", "plan tier")
_VALUES = ("30 s", "500 rows", "3 retries", "eu-west-1", "EUR", "enterprise", "2 MB", "us-east")
_SOURCES = ("the runbook", "a support ticket", "the on-call log", "the user", "a dashboard")
_VERBS = ("check", "back up", "re-run", "rotate", "review", "pin", "warm up", "diff")
_EVENTS = ("the deploy", "the next export", "Friday's release", "the audit", "the cutover")
_PROBLEMS = (
    "a silent truncation",
    "clock skew",
    "a missing index",
    "a flaky test",
    "an expired token",
    "a double charge",
    "a slow query",
    "an empty page",
)
_FIXES = (
    "adding an index",
    "pinning the version",
    "a retry with backoff",
    "a config rollback",
    "splitting the batch",
    "refreshing the token",
    "a cache flush",
)
_ASIDES = (
    "worth a follow-up later",
    "logged for the weekly review",
    "same as last run",
    "no user impact so far",
    "ask the owner before changing it",
    "cheap to verify again",
)
_REASONS = ("superseded", "wrong customer", "outdated", "duplicate", "failed check")
_KINDS = ("trace", "trace", "trace", "trace", "trace", "fact", "fact", "note", "note")


class _TextMaker:
    """Generates realistic-looking memory texts of about 120 characters."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def _pick(self, words: tuple[str, ...]) -> str:
        return words[int(self._rng.random() * len(words))]

    def text(self, kind: str, agent: str, topic: str) -> str:
        pick = self._pick
        rng = self._rng
        if kind == "trace":
            text = (
                f"{agent} called {pick(_TOOLS)} on the {pick(_OBJECTS)} for {topic}, "
                f"{rng.randint(1, 900)} results in {rng.randint(3, 2500)} ms and "
                f"{pick(_OUTCOMES)}"
            )
        elif kind == "fact":
            text = (
                f"{pick(_CUSTOMERS)} uses {pick(_SETTINGS)} {pick(_VALUES)} on the "
                f"{pick(_OBJECTS)}, confirmed by {pick(_SOURCES)}"
            )
        elif kind == "episode":
            text = (
                f"Finished {topic}: {agent} went through {rng.randint(2, 40)} steps, "
                f"{pick(_PROBLEMS)} was resolved by {pick(_FIXES)}"
            )
        else:
            text = (
                f"Remember to {pick(_VERBS)} the {pick(_OBJECTS)} before {pick(_EVENTS)}, "
                f"{pick(_PROBLEMS)} showed up there"
            )
        while len(text) < 100:
            text += f"; {pick(_ASIDES)}"
        return text + "."


@dataclass(frozen=True)
class _Op:
    """One change an agent plans for its next commit."""

    op: str  # "put", "revise", "stale", "restore", "move" or "finish"
    key: str = ""  # memory id (task name for "finish"); empty for a new memory
    kind: str = "note"
    text: str = ""
    task: str | None = None
    tier: str = "working"
    data: dict[str, object] | None = None
    tags: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    reason: str | None = None
    race: bool = False  # a change another agent already made; its guard will refuse it


class _Bag:
    """A set of ids with O(1) add, remove and random pick."""

    def __init__(self) -> None:
        self._items: list[str] = []
        self._where: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: str) -> None:
        if item not in self._where:
            self._where[item] = len(self._items)
            self._items.append(item)

    def remove(self, item: str) -> None:
        index = self._where.pop(item, None)
        if index is None:
            return
        last = self._items.pop()
        if index < len(self._items):
            self._items[index] = last
            self._where[last] = index

    def pick(self, rng: random.Random) -> str:
        return self._items[int(rng.random() * len(self._items))]


@dataclass
class _Agent:
    name: str
    task: str = ""
    topic: str = ""
    remaining: int = 0
    steps: int = 0
    memories: list[tuple[str, str]] = field(default_factory=list)  # (id, kind)


@dataclass(frozen=True)
class DemoOptions:
    """What ``memcommit demo`` runs.

    Args:
        path: The store file to create, or the ``postgresql://`` URL of a new (or empty)
            store in a database (durability is then the database's: every commit).
        agents: How many agents work at once.
        tasks: How many tasks they share.
        memories: How many memories they write in all.
        seed: Seed for every random choice; the same seed writes the same memories.
        durability: The store's durability mode.
        force: Replace an existing file at ``path`` instead of refusing (never a log another
            writer has open: that is refused with ``StoreLocked``).

    """

    path: str = "memory.db"
    agents: int = 100
    tasks: int = 1000
    memories: int = 100_000
    seed: int = 0
    durability: Durability = "batch"
    force: bool = False


@dataclass(frozen=True)
class DemoReport:
    """What a demo run wrote and how fast.

    Args:
        options: The options the run used.
        memories: Memories in the store at the end.
        records: Records in the log.
        commits: Commits that were written.
        refused: Commits a guard refused (nothing of them was written).
        lsn: The store's head LSN.
        file_bytes: Size of the log file after close.
        tasks_finished: Tasks marked finished.
        counts: Memories per ``(tier, status)``, from ``store.find``.
        seconds: Wall time from open to close, including the final flush.
        reopen_seconds: Time to open the file again (replaying the whole log).
        reopened_memories: Memories the reopened store holds.

    """

    options: DemoOptions
    memories: int
    records: int
    commits: int
    refused: int
    lsn: int
    file_bytes: int
    tasks_finished: int
    counts: dict[tuple[str, str], int]
    seconds: float
    reopen_seconds: float
    reopened_memories: int

    @property
    def reopen_matches(self) -> bool:
        """Whether the reopened store holds exactly the memories the run wrote."""
        return self.reopened_memories == self.memories == self.options.memories


class _Fleet:
    """Runs the workload against one open store and keeps a model of what it wrote."""

    def __init__(self, store: memcommit.MemoryStore, options: DemoOptions, bar: Progress):
        self.store = store
        self.options = options
        self.bar = bar
        self.rng = random.Random(options.seed)
        self.texts = _TextMaker(self.rng)
        self.status: dict[str, str] = {}
        self.tier: dict[str, str] = {}
        self.stale = _Bag()
        self.cold: deque[str] = deque()  # ids in "mid", oldest first: archive candidates
        self.commits = 0
        self.refused = 0
        self.tasks_finished = 0

    def run(self) -> None:
        options = self.options
        base, extra = divmod(options.memories, options.tasks)
        budgets = [base + (1 if i < extra else 0) for i in range(options.tasks)]
        queue = deque(range(options.tasks))
        working: list[_Agent] = []
        for i in range(min(options.agents, options.tasks)):
            agent = _Agent(name=f"agent-{i:03d}")
            self._assign(agent, queue.popleft(), budgets)
            working.append(agent)
        while working:
            index = int(self.rng.random() * len(working))
            agent = working[index]
            if self._step(agent):
                if queue:
                    self._assign(agent, queue.popleft(), budgets)
                else:
                    working[index] = working[-1]
                    working.pop()

    def _assign(self, agent: _Agent, number: int, budgets: list[int]) -> None:
        agent.topic = _TOPICS[number % len(_TOPICS)]
        agent.task = f"task-{number:05d}-{agent.topic}"
        agent.remaining = budgets[number]
        agent.steps = 0
        agent.memories = []

    def _new_memory(self, agent: _Agent, kind: str) -> _Op:
        rng = self.rng
        data: dict[str, object] | None = None
        if kind == "trace" and rng.random() < 0.6:
            data = {
                "tool": _TOOLS[int(rng.random() * len(_TOOLS))],
                "ms": rng.randint(3, 2500),
                "ok": rng.random() < 0.9,
                "step": agent.steps,
            }
        elif kind == "fact":
            data = {"confidence": round(rng.uniform(0.5, 1.0), 2), "revision": 1}
        tags: tuple[str, ...] = ()
        roll = rng.random()
        if roll < 0.35:
            tags = (agent.topic,)
        elif roll < 0.45:
            tags = (agent.topic, "urgent")
        elif roll < 0.5:
            tags = ("customer-visible",)
        return _Op(
            "put",
            kind=kind,
            text=self.texts.text(kind, agent.name, agent.topic),
            task=agent.task,
            data=data,
            tags=tags,
        )

    def _step(self, agent: _Agent) -> bool:
        """Run one step of ``agent``: one commit. Returns whether its task is finished."""
        rng = self.rng
        agent.steps += 1
        plan: list[_Op] = []
        finishing = agent.remaining <= 1
        if finishing:
            if agent.remaining == 1:
                sources = tuple(memory_id for memory_id, _ in agent.memories[-_MAX_SOURCES:])
                episode = self._new_memory(agent, "episode")
                plan.append(
                    _Op(
                        "put",
                        kind="episode",
                        text=episode.text,
                        task=agent.task,
                        data={"steps": agent.steps, "memories": len(agent.memories) + 1},
                        tags=(agent.topic, "summary"),
                        sources=sources,
                    )
                )
            plan.extend(self._consolidate(agent))
            plan.append(_Op("finish", key=agent.task))
        else:
            count = min(rng.choice((1, 1, 2, 2, 3, 4)), agent.remaining - 1)
            for _ in range(count):
                plan.append(self._new_memory(agent, _KINDS[int(rng.random() * len(_KINDS))]))
        plan.extend(self._upkeep(agent))
        written = self._commit(plan, expect_head=finishing)
        if written is None:
            # A racing agent got there first: drop the conflicting change and retry.
            plan = [op for op in plan if not op.race]
            written = self._commit(plan, expect_head=finishing, retry=True)
            assert written is not None  # a refused retry raises instead
        self._apply(agent, plan, written)
        return finishing

    def _upkeep(self, agent: _Agent) -> list[_Op]:
        """Plan the stale, restore, revise and race changes that ride along with a step."""
        rng = self.rng
        plan: list[_Op] = []
        restored = ""
        if len(self.stale) and rng.random() < _P_RESTORE:
            restored = self.stale.pick(rng)
            plan.append(_Op("restore", key=restored))
        staled = ""
        if agent.memories and rng.random() < _P_STALE:
            memory_id, _ = agent.memories[int(rng.random() * len(agent.memories))]
            if self.status[memory_id] == "active" and memory_id != restored:
                staled = memory_id
                plan.append(_Op("stale", key=memory_id, reason=rng.choice(_REASONS)))
        if agent.memories and rng.random() < _P_REVISE:
            memory_id, kind = agent.memories[int(rng.random() * len(agent.memories))]
            if kind == "fact" and memory_id not in (restored, staled):
                plan.append(
                    _Op(
                        "revise",
                        key=memory_id,
                        kind="fact",
                        text=self.texts.text("fact", agent.name, agent.topic),
                        task=agent.task,
                        data={"confidence": round(rng.uniform(0.7, 1.0), 2), "revision": 2},
                        tags=(agent.topic,),
                    )
                )
        if len(self.stale) and rng.random() < _P_RACE:
            target = self.stale.pick(rng)
            if target != restored:
                plan.insert(0, _Op("stale", key=target, reason="superseded", race=True))
        return plan

    def _consolidate(self, agent: _Agent) -> list[_Op]:
        """Plan the moves at the end of a task: traces to mid, facts to long, cold to archive."""
        rng = self.rng
        plan: list[_Op] = []
        for memory_id, kind in agent.memories:
            if self.tier[memory_id] != "working":
                continue
            if kind == "trace" and rng.random() < _P_MOVE_TRACE_TO_MID:
                plan.append(_Op("move", key=memory_id, tier="mid"))
            elif kind == "fact" and rng.random() < _P_MOVE_FACT_TO_LONG:
                plan.append(_Op("move", key=memory_id, tier="long"))
        if rng.random() < _P_ARCHIVE:
            for _ in range(min(_ARCHIVE_CHUNK, len(self.cold))):
                memory_id = self.cold.popleft()
                if self.tier[memory_id] == "mid":
                    plan.append(_Op("move", key=memory_id, tier="archive"))
        return plan

    def _commit(
        self, plan: list[_Op], *, expect_head: bool, retry: bool = False
    ) -> list[str] | None:
        """Write ``plan`` as one guarded commit; returns the new ids, or None if refused.

        A retry must pass: the model knows every change, so a refusal then means the
        store and the model disagree, and the Rejected error is raised to the caller.
        """
        # Finishing a task is a compare-and-set on the whole store: the agent read the
        # head, decided, and commits only if nothing landed in between. One process runs
        # this fleet, so it always holds; in a real fleet the loser re-reads and retries.
        expect_lsn = self.store.lsn if expect_head else None
        new_ids: list[str] = []
        try:
            with self.store.commit(expect_lsn=expect_lsn) as c:
                for op in plan:
                    if op.op in ("put", "revise"):
                        # A revise puts new text under an id the agent knows exists.
                        if op.op == "revise":
                            c.expect(op.key, exists=True)
                        memory_id = c.put(
                            op.text,
                            kind=op.kind,
                            id=op.key or None,
                            task=op.task,
                            data=op.data,
                            tags=op.tags,
                            sources=op.sources,
                        )
                        if op.op == "put":
                            new_ids.append(memory_id)
                    elif op.op == "stale":
                        c.expect(op.key, status="active")
                        c.stale(op.key, reason=op.reason)
                    elif op.op == "restore":
                        c.expect(op.key, status="stale")
                        c.restore(op.key)
                    elif op.op == "move":
                        c.expect(op.key, tier=self.tier[op.key])
                        c.move(op.key, op.tier)
                    else:
                        c.finish_task(op.key)
        except memcommit.Rejected:
            if retry:
                raise
            self.refused += 1
            return None
        self.commits += 1
        return new_ids

    def _apply(self, agent: _Agent, plan: list[_Op], new_ids: list[str]) -> None:
        """Update the model after ``plan`` was committed with ``new_ids``."""
        fresh = iter(new_ids)
        puts = 0
        for op in plan:
            if op.op == "put":
                memory_id = next(fresh)
                self.status[memory_id] = "active"
                self.tier[memory_id] = "working"
                agent.memories.append((memory_id, op.kind))
                puts += 1
            elif op.op == "stale":
                self.status[op.key] = "stale"
                self.stale.add(op.key)
            elif op.op == "restore":
                self.status[op.key] = "active"
                self.stale.remove(op.key)
            elif op.op == "move":
                self.tier[op.key] = op.tier
                if op.tier == "mid":
                    self.cold.append(op.key)
            elif op.op == "finish":
                self.tasks_finished += 1
        agent.remaining -= puts
        self.bar.update(puts)


def _check_options(options: DemoOptions) -> None:
    for name in ("agents", "tasks", "memories"):
        value = getattr(options, name)
        if value < 1:
            raise InvalidValue(f"--{name} must be at least 1, got {value}")
    if options.durability not in DURABILITY_NOTES:
        raise InvalidValue(
            f"durability must be one of {', '.join(DURABILITY_NOTES)}, got {options.durability!r}"
        )


def _remove_unless_a_writer_holds(path: str) -> None:
    """Remove the file at `path` (``--force``), holding the locks its writer would hold.

    A log another writer has open is never removed: that writer would go on committing to a
    file no name reaches any more, and every one of its commits would be lost.

    Raises:
        StoreLocked: A writer (in this process or another) has it open; nothing was removed.
    """
    try:
        with holding_writer_locks(path):
            os.remove(path)
    except WriterHolds as held:
        raise memcommit.StoreLocked(
            f"{path} is open for writing by another store (in this process or another; "
            f"{held}), so it was not replaced: close that writer first, or write the demo "
            "somewhere else (--path)",
            path,
        ) from None


def run_demo(options: DemoOptions, *, progress: bool | None = None) -> DemoReport:
    """Create a store at ``options.path`` and run the fleet workload on it.

    Args:
        options: What to run.
        progress: Draw a progress bar on standard error; by default only on a terminal.

    Returns:
        What was written and how fast, including a reopen check.

    Raises:
        FileExistsError: ``options.path`` exists and ``options.force`` is false.
        StoreLocked: ``options.path`` is a log another writer has open (``force`` or not):
            it is left as it is.
        ValueError: An option is out of range.
        memcommit.MemcommitError: The store refused to open or write.

    """
    _check_options(options)
    path = options.path
    shared = is_postgres_url(path)
    if shared:
        pass  # a store in a database: checked once open (it must hold nothing yet)
    elif os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a store file", path)
    elif os.path.lexists(path):
        if not options.force:
            raise FileExistsError(errno.EEXIST, "already exists; pass --force to replace it", path)
        _remove_unless_a_writer_holds(path)

    started = time.perf_counter()
    with (
        memcommit.open(path, durability="commit" if shared else options.durability) as store,
        Progress(options.memories, "demo", unit="memories", enabled=progress) as bar,
    ):
        if shared and store.lsn:
            raise FileExistsError(
                errno.EEXIST,
                f"the store already holds {store.lsn:,} records; name a new one (store=)",
                path,
            )
        fleet = _Fleet(store, options, bar)
        fleet.run()
        counts = {
            (tier, status): len(store.find(tier=tier, status=status))
            for tier in TIERS
            for status in STATUSES
        }
        memories = len(store)
        records = store.info()["records"]
        assert isinstance(records, int)
        lsn = store.lsn
        log_bytes = store.info()["bytes"]
    seconds = time.perf_counter() - started
    file_bytes = os.path.getsize(path) if not shared else int(str(log_bytes))

    reopen_started = time.perf_counter()
    with memcommit.open(path, read_only=True) as reopened:
        reopened_memories = len(reopened)
    reopen_seconds = time.perf_counter() - reopen_started

    return DemoReport(
        options=options,
        memories=memories,
        records=records,
        commits=fleet.commits,
        refused=fleet.refused,
        lsn=lsn,
        file_bytes=file_bytes,
        tasks_finished=fleet.tasks_finished,
        counts=counts,
        seconds=seconds,
        reopen_seconds=reopen_seconds,
        reopened_memories=reopened_memories,
    )


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{n:,} B" if unit == "B" else f"{value:.1f} {unit} ({n:,} B)"
        value /= 1000
    raise AssertionError("unreachable")  # pragma: no cover


def format_report(report: DemoReport) -> str:
    """Describe a demo run for people: what it wrote, how fast, and what to try next.

    Args:
        report: The run to describe.

    Returns:
        Several lines of text, without a trailing newline.

    """
    options = report.options
    seconds = max(report.seconds, 1e-9)
    lines = [
        f"wrote {options.path}",
        f"  memories        {report.memories:,}",
        f"  records         {report.records:,} (LSN {report.lsn:,})",
        f"  commits         {report.commits:,}"
        f" (+{report.refused:,} refused by a guard and retried: two agents raced"
        " to stale the same memory)",
        f"  tasks finished  {report.tasks_finished:,} of {options.tasks:,}",
        f"  file size       {_size(report.file_bytes)}",
        "  by tier         "
        + "   ".join(
            f"{tier} {report.counts[(tier, 'active')]:,}"
            + (
                f" (+{report.counts[(tier, 'stale')]:,} stale)"
                if report.counts[(tier, "stale")]
                else ""
            )
            for tier in TIERS
        ),
        f"  stale           {sum(report.counts[(t, 'stale')] for t in TIERS):,}",
        f"speed: {report.seconds:.2f} s, {report.records / seconds:,.0f} records/s, "
        f"{report.commits / seconds:,.0f} commits/s",
        f"reopen: {report.reopen_seconds:.3f} s to replay the log, "
        f"{report.reopened_memories:,} memories "
        + ("(matches)" if report.reopen_matches else f"(EXPECTED {options.memories:,})"),
        "try next:",
        f"  memcommit info {options.path}",
        f"  memcommit export {options.path} --out memories.jsonl",
        '  python -c "import memcommit; s = memcommit.open('
        f"{options.path!r}, read_only=True); print(s.find(kind='fact', limit=3))\"",
    ]
    return "\n".join(lines)
