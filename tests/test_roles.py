"""The agent-runtime roles: the contract suite on the in-memory store, and what is in-memory only.

The star import below collects every contract test class (``TestRuns`` ... ``TestCrossCutting``)
into this module, with the ``harness`` fixture over the default in-memory backend, exactly as a
third-party store would run the suite inside its own tests.
"""

from __future__ import annotations

import copy
import json
import pathlib
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import memcommit
from memcommit.clock import SystemClock, millisecond_reader, to_milliseconds
from memcommit.errors import MemcommitError, NotSupported
from memcommit.roles import (
    ROLE_NAMES,
    ClaimLostError,
    LeaseLostError,
    Medium,
    MemoryAgentRevisionRepository,
    MemoryArtifactRepository,
    MemoryCheckpointRepository,
    MemoryConversationRepository,
    MemoryEffectRepository,
    MemoryIdempotencyRepository,
    MemoryLockRepository,
    MemoryMedium,
    MemoryRunRepository,
    MemoryStateRepository,
    MemoryStepRepository,
    NewTurn,
    RoleError,
    RoleSet,
    RunNotFoundError,
    error_from_wire,
)
from memcommit.roles import errors as role_errors
from memcommit.roles.medium import KINDS, Change, State, child_prefix, entity_key
from memcommit.roles.values import check_json
from memcommit.testing import CLOCK_START as START
from memcommit.testing import Backend, ControllableClock, Harness, race, run_contract
from memcommit.testing.contract.calls import READS, WRITES, prepared
from memcommit.testing.contract.harness import stated_most
from memcommit.testing.contract.plugin import _load
from memcommit.testing.contract.suite import *  # noqa: F403  (the contract suite, collected here)

START_MS = 1_767_225_600_000
TTL = 1_000


# -- the clock -------------------------------------------------------------------------------


def test_controllable_clock_takes_a_datetime_or_epoch_ms() -> None:
    by_date = ControllableClock(START)
    by_ms = ControllableClock(START_MS)
    assert by_date.now_ms() == by_ms.now_ms() == START_MS
    assert by_date.now() == by_ms.now() == START
    assert by_ms.now().tzinfo is not None
    assert ControllableClock().now() == START
    assert ControllableClock(0).now() == datetime(1970, 1, 1, tzinfo=timezone.utc)


def test_controllable_clock_advances_by_ms_or_timedelta() -> None:
    clock = ControllableClock(START_MS)
    clock.advance(1_000)
    clock.advance(timedelta(seconds=2, microseconds=500))
    assert clock.now() == START + timedelta(seconds=3, microseconds=500)
    assert clock.now_ms() == START_MS + 3_000
    clock.advance(0)
    assert clock.now_ms() == START_MS + 3_000


def test_controllable_clock_refuses_bad_steps() -> None:
    clock = ControllableClock(START)
    for bad in (1.5, True, "1", None):
        with pytest.raises(TypeError):
            clock.advance(bad)  # type: ignore[arg-type]
    for negative in (-1, timedelta(milliseconds=-1)):
        with pytest.raises(ValueError):
            clock.advance(negative)
    with pytest.raises(ValueError):
        ControllableClock(datetime(2026, 1, 1))  # naive
    with pytest.raises(TypeError):
        ControllableClock(True)
    assert clock.now() == START


def test_controllable_clock_set_never_goes_back() -> None:
    clock = ControllableClock(START)
    clock.set(START_MS + 5)
    assert clock.now_ms() == START_MS + 5
    clock.set(START + timedelta(seconds=1))
    assert clock.now_ms() == START_MS + 1_000
    with pytest.raises(ValueError):
        clock.set(START)
    with pytest.raises(ValueError):
        clock.set(START_MS)
    assert clock.now_ms() == START_MS + 1_000


def test_system_clock_reads_milliseconds() -> None:
    clock = SystemClock()
    before = time.time_ns() // 1_000_000
    now = clock.now_ms()
    after = time.time_ns() // 1_000_000
    assert type(now) is int and before <= now <= after
    assert isinstance(clock, memcommit.Clock)
    assert isinstance(ControllableClock(), memcommit.Clock)


def test_a_clock_with_only_now_still_works() -> None:
    class OldClock:
        def now(self) -> datetime:
            return START + timedelta(microseconds=1_999)

    read = millisecond_reader(OldClock())
    assert read() == START_MS + 1
    assert to_milliseconds(START) == START_MS
    locks = MemoryLockRepository(clock=OldClock())  # type: ignore[arg-type]
    lease = locks.acquire("job", "a", TTL)
    assert lease is not None and lease.expires_at_ms == START_MS + 1 + TTL
    with pytest.raises(TypeError):
        millisecond_reader(object())


class CountingClock(ControllableClock):
    def __init__(self) -> None:
        super().__init__(START)
        self.reads = 0

    def now_ms(self) -> int:
        self.reads += 1
        return super().now_ms()


def test_each_operation_reads_the_clock_at_most_once() -> None:
    clock = CountingClock()
    roles = RoleSet(clock=clock)
    run_id = roles.runs.create(agent_id="a").run_id
    conversation_id = roles.conversations.create().conversation_id
    operations: list[Callable[[], object]] = [
        lambda: roles.runs.claim_next(worker_id="w", ttl_ms=TTL),
        lambda: roles.runs.heartbeat(run_id, token=1, ttl_ms=TTL),
        lambda: roles.steps.start(run_id, "1", name="n", token=1),
        lambda: roles.steps.complete(run_id, "1", output=1, token=1),
        lambda: roles.checkpoints.put(run_id, state=1, token=1),
        lambda: roles.effects.record(run_id, "e", result=1, token=1),
        lambda: roles.conversations.append(
            conversation_id, [NewTurn("user", "x")], run_id=run_id, token=1
        ),
        lambda: roles.locks.acquire("job", "a", TTL),
        lambda: roles.locks.renew("job", token=1, ttl_ms=TTL),
        lambda: roles.idempotency.reserve("k", ttl_ms=TTL),
        lambda: roles.idempotency.complete("k", token=1, result=1),
        lambda: roles.state.put(("ns",), "k", 1),
        lambda: roles.artifacts.save(("o",), "a", b""),
        lambda: roles.agent_revisions.create_draft("agent", {}),
        lambda: roles.runs.complete(run_id, token=1),
    ]
    for operation in operations:
        before = clock.reads
        operation()
        assert clock.reads - before <= 1, operation


def test_roles_built_without_a_clock_judge_claims_on_the_runs_clock() -> None:
    """ROLES.md, Time: only runs, idempotency, locks and conversations need a clock for their
    decisions; steps, checkpoints and effects built without one check a claim on the runs'.

    They used to pass their own reading of the system clock, so a claim live on the runs'
    clock was refused as expired, and one expired on it accepted.
    """
    clock = ControllableClock(START)
    runs = MemoryRunRepository(clock=clock)
    run_id = runs.create(agent_id="a").run_id
    token = runs.claim(run_id, worker_id="w", ttl_ms=60_000).token
    linked = {"check_claim": runs.check_claim, "has_run": runs.exists}
    steps = MemoryStepRepository(**linked)
    checkpoints = MemoryCheckpointRepository(**linked)
    effects = MemoryEffectRepository(**linked)
    writes: list[Callable[[int], object]] = [
        lambda n: steps.start(run_id, f"s{n}", name="n", token=token),
        lambda n: checkpoints.put(run_id, state=n, token=token),
        lambda n: effects.record(run_id, f"e{n}", result=n, token=token),
    ]
    for write in writes:
        write(1)  # live on the runs' clock, whatever the system clock says
    clock.advance(60_000)
    for write in writes:
        with pytest.raises(ClaimLostError):
            write(2)
    assert steps.get(run_id, "s2") is None and effects.get(run_id, "e2") is None


# -- race ------------------------------------------------------------------------------------


def test_race_returns_results_and_exceptions_in_order() -> None:
    def work(i: int) -> int:
        if i == 2:
            raise KeyError(i)
        return i * 10

    outcomes = race(4, work)
    assert outcomes[:2] == [0, 10] and outcomes[3] == 30
    assert isinstance(outcomes[2], KeyError)


def test_race_releases_every_thread_together() -> None:
    arrived = []
    gate = threading.Lock()

    def work(i: int) -> int:
        with gate:
            arrived.append(i)
        return len(arrived)

    outcomes = race(8, work)
    assert sorted(arrived) == list(range(8))
    assert sorted(o for o in outcomes if isinstance(o, int)) == list(range(1, 9))
    with pytest.raises(ValueError):
        race(0, work)


# -- RoleSet wiring --------------------------------------------------------------------------


def test_roleset_has_the_ten_roles_on_one_medium_and_clock() -> None:
    clock = ControllableClock(START)
    roles = RoleSet(clock=clock)
    classes = {
        "runs": MemoryRunRepository,
        "steps": MemoryStepRepository,
        "checkpoints": MemoryCheckpointRepository,
        "idempotency": MemoryIdempotencyRepository,
        "locks": MemoryLockRepository,
        "effects": MemoryEffectRepository,
        "state": MemoryStateRepository,
        "artifacts": MemoryArtifactRepository,
        "agent_revisions": MemoryAgentRevisionRepository,
        "conversations": MemoryConversationRepository,
    }
    assert tuple(classes) == ROLE_NAMES
    for name, cls in classes.items():
        role = getattr(roles, name)
        assert type(role) is cls
        assert role.medium is roles.medium
        assert role.clock is clock
    assert roles.clock is clock
    assert isinstance(RoleSet().clock, SystemClock)


def test_roleset_checks_runs_through_its_own_run_repository() -> None:
    roles = RoleSet(clock=ControllableClock(START))
    with pytest.raises(RunNotFoundError):
        roles.steps.start("nope", "1", name="n")
    run_id = roles.runs.create(agent_id="a").run_id
    claim = roles.runs.claim(run_id, worker_id="w", ttl_ms=TTL)
    assert roles.steps.start(run_id, "1", name="n", token=claim.token).status == "running"


def test_replacing_runs_in_a_copy_leaves_the_others_checking_the_original() -> None:
    """The seed's rule for a store copied with another ``runs``."""
    clock = ControllableClock(START)
    original = RoleSet(clock=clock)
    custom = MemoryRunRepository(clock=clock)
    copied = original.replace(runs=custom)
    assert copied.runs is custom and original.runs is not custom
    assert copied.steps is original.steps
    custom_run = custom.create(agent_id="a", run_id="only-in-custom").run_id
    with pytest.raises(RunNotFoundError):
        copied.steps.start(custom_run, "1", name="n")
    original_run = original.runs.create(agent_id="a", run_id="only-in-original").run_id
    assert copied.steps.start(original_run, "1", name="n").run_id == original_run
    rebuilt = copied.replace(
        steps=MemoryStepRepository(
            clock=clock, has_run=custom.exists, check_claim=custom.check_claim
        )
    )
    assert rebuilt.steps.start(custom_run, "1", name="n").run_id == custom_run
    with pytest.raises(RunNotFoundError):
        rebuilt.steps.start(original_run, "2", name="n")
    shallow = copy.copy(original)
    shallow.runs = custom
    with pytest.raises(RunNotFoundError):
        shallow.checkpoints.put(custom_run, state=1)
    with pytest.raises(TypeError):
        original.replace(nope=custom)


def test_roles_stand_alone() -> None:
    steps = MemoryStepRepository()
    assert steps.start("any-run", "1", name="n").run_id == "any-run"
    with pytest.raises(NotSupported):
        steps.start("any-run", "2", name="n", token=1)
    assert steps.list("any-run")[0].step_id == "1"
    effects = MemoryEffectRepository(has_run=lambda run_id: run_id == "known")
    assert effects.record("known", "e", result=1).outcome == "succeeded"
    with pytest.raises(RunNotFoundError):
        effects.record("unknown", "e", result=1)
    conversations = MemoryConversationRepository()
    conversation_id = conversations.create().conversation_id
    assert conversations.append(conversation_id, [NewTurn("user", "x")], run_id="r")[0].seq == 1
    assert MemoryStateRepository().put(("ns",), "k", 1).version == 1
    with pytest.raises(TypeError):
        MemoryStepRepository(has_run="yes")  # type: ignore[arg-type]


def test_standalone_roles_with_a_shared_medium_share_its_lock() -> None:
    medium = MemoryMedium()
    clock = ControllableClock(START)
    runs = MemoryRunRepository(clock=clock, medium=medium)
    steps = MemoryStepRepository(
        clock=clock, medium=medium, has_run=runs.exists, check_claim=runs.check_claim
    )
    run_id = runs.create(agent_id="a").run_id
    claim = runs.claim(run_id, worker_id="w", ttl_ms=TTL)
    steps.start(run_id, "1", name="n", token=claim.token)
    assert runs.delete(run_id) is True
    assert steps.list(run_id) == []  # the cascade reached the shared medium


def test_memory_store_roles_are_independent_per_store() -> None:
    a, b = RoleSet(), RoleSet()
    a.state.put(("ns",), "k", 1)
    assert b.state.get(("ns",), "k") is None


# -- errors ----------------------------------------------------------------------------------

_SAMPLE_FIELDS: dict[str, Any] = {
    "run_id": "r",
    "step_id": "s",
    "checkpoint_id": "c",
    "conversation_id": "conv",
    "agent_id": "a",
    "revision_id": "rev",
    "version": 3,
    "what": "thing",
    "expected": 1,
    "actual": 2,
    "reason": "stale",
    "effect_key": "e",
    "key": "k",
    "resource": "res",
    "holder": "h",
    "expires_at_ms": 5,
    "token": 1,
    "current_token": None,
    "current": "draft",
    "attempted": "publish",
}


def _all_error_classes() -> list[type[RoleError]]:
    return [
        value
        for value in vars(role_errors).values()
        if isinstance(value, type) and issubclass(value, RoleError)
    ]


def test_every_role_error_has_a_unique_code_and_survives_the_wire() -> None:
    classes = _all_error_classes()
    assert len(classes) >= 20
    assert len({cls.code for cls in classes}) == len(classes)
    for cls in classes:
        assert issubclass(cls, MemcommitError)
        assert issubclass(cls, memcommit.MemcommitError)
        fields = {name: _SAMPLE_FIELDS[name] for name in cls._fields}
        err = cls(**fields)
        assert err.fields == fields
        assert str(err) and err.code == cls.code
        for copy_ in (error_from_wire(err.to_wire()), pickle.loads(pickle.dumps(err))):
            assert type(copy_) is cls
            assert copy_ == err and copy_.fields == fields and str(copy_) == str(err)
        json.dumps(err.to_wire())
    with pytest.raises(KeyError):
        error_from_wire({"code": "no_such_code"})


def test_error_hierarchy() -> None:
    assert issubclass(ClaimLostError, LeaseLostError)
    assert issubclass(role_errors.SequenceConflictError, role_errors.VersionConflictError)
    assert issubclass(RunNotFoundError, role_errors.NotFoundError)
    with pytest.raises(TypeError):
        RunNotFoundError()  # type: ignore[call-arg]


# -- values ----------------------------------------------------------------------------------


def test_bad_values_name_where_they_are() -> None:
    with pytest.raises(TypeError, match=r"input\['a'\]\[1\]: tuples are not JSON"):
        check_json({"a": [1, (2,)]}, "input")
    with pytest.raises(ValueError, match=r"state\['k'\]: nan is not a JSON number"):
        check_json({"k": float("nan")}, "state")
    with pytest.raises(TypeError, match="dict keys must be str"):
        check_json({1: 2}, "metadata")


def test_checked_values_are_plain_copies() -> None:
    from collections import OrderedDict
    from enum import Enum, IntEnum

    class Color(str, Enum):
        RED = "red"

    class Level(IntEnum):
        HIGH = 3

    value = OrderedDict(color=Color.RED, level=Level.HIGH, items=[1])
    checked = check_json(value, "v")
    assert checked == {"color": "red", "level": 3, "items": [1]}
    assert type(checked) is dict and type(checked["color"]) is str
    assert type(checked["level"]) is int and checked["items"] is not value["items"]


# -- the medium seam -------------------------------------------------------------------------


class RecordingMedium(MemoryMedium):
    """Keeps every batch it was written, as JSON text, like a log would."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[str] = []

    def write(self, changes: Sequence[Change]) -> None:
        self.batches.append(json.dumps([list(c) for c in changes], allow_nan=False))
        super().write(changes)


def _workload(roles: RoleSet, clock: ControllableClock) -> None:
    run_id = roles.runs.create(agent_id="a", run_id="run-1", input={"q": 1}).run_id
    claim = roles.runs.claim(run_id, worker_id="w", ttl_ms=TTL)
    roles.steps.start(run_id, "1", name="n", token=claim.token)
    roles.steps.complete(run_id, "1", output=[1, 2], token=claim.token)
    roles.checkpoints.put(run_id, state={"s": 1}, token=claim.token)
    roles.effects.record(run_id, "e", error={"code": 1}, token=claim.token)
    roles.locks.acquire("short", "a", 10)
    roles.locks.acquire("long", "a", 100 * TTL)
    reserved = roles.idempotency.reserve("key", ttl_ms=TTL)
    roles.idempotency.complete("key", token=reserved.record.token, result="r", ttl_ms=50 * TTL)
    roles.state.put(("ns", "a"), "k", {"v": 1})
    roles.state.delete(("ns", "a"), "k")
    roles.state.put(("ns", "a"), "k2", None)
    roles.artifacts.save(("run", run_id), "doc", b"\x00\xffbytes", metadata={"m": 1})
    draft = roles.agent_revisions.create_draft("agent", {"prompt": "p"})
    roles.agent_revisions.publish("agent", draft.revision_id)
    conversation_id = roles.conversations.create(conversation_id="c1").conversation_id
    roles.conversations.append(
        conversation_id, [NewTurn("user", "a"), NewTurn("assistant", "b")], run_id=run_id
    )
    roles.conversations.truncate(conversation_id, after_seq=1)
    clock.advance(20)


def _snapshot(roles: RoleSet) -> list[Any]:
    return [
        roles.runs.list(),
        roles.steps.list("run-1"),
        roles.checkpoints.list("run-1"),
        roles.effects.list("run-1"),
        roles.locks.get("short"),
        roles.locks.get("long"),
        roles.idempotency.get("key"),
        roles.state.list(("ns", "a")),
        roles.artifacts.load(("run", "run-1"), "doc"),
        roles.agent_revisions.list("agent"),
        roles.agent_revisions.get_current("agent"),
        roles.conversations.get("c1"),
        roles.conversations.list_turns("c1"),
    ]


def _entities(medium: MemoryMedium) -> dict[str, list[tuple[str, State]]]:
    return {kind: medium.scan(kind) for kind in KINDS}


def test_every_operation_writes_one_batch_of_json_states() -> None:
    clock = ControllableClock(START)
    medium = RecordingMedium()
    roles = RoleSet(clock=clock, medium=medium)
    _workload(roles, clock)
    assert len(medium.batches) == 19  # one per write operation of the workload
    for kind, entities in _entities(medium).items():
        assert kind in KINDS
        for key, state in entities:
            assert json.loads(json.dumps(state, allow_nan=False)) == state
            assert json.loads(key)  # keys are JSON arrays of their parts


def test_replaying_the_batches_rebuilds_the_same_state_whatever_the_clock() -> None:
    """What a log-backed medium does on open: apply the batches in order."""
    clock = ControllableClock(START)
    medium = RecordingMedium()
    roles = RoleSet(clock=clock, medium=medium)
    _workload(roles, clock)
    replayed = MemoryMedium()
    for batch in medium.batches:
        replayed.write([(kind, key, state) for kind, key, state in json.loads(batch)])
    assert _entities(replayed) == _entities(medium)
    reopened = RoleSet(clock=clock, medium=replayed)
    assert _snapshot(reopened) == _snapshot(roles)
    assert reopened.locks.get("short") is None and reopened.locks.get("long") is not None
    later = ControllableClock(START_MS + 10**9)  # a replay long after: leases judged lazily
    late = RoleSet(clock=later, medium=replayed)
    assert late.locks.get("long") is None and late.idempotency.get("key") is None
    assert _entities(replayed) == _entities(medium)  # reading changed nothing
    assert late.locks.acquire("long", "b", TTL).token == 2  # type: ignore[union-attr]
    assert late.state.put(("ns", "a"), "k", 2).version == 2
    conversation = late.conversations.get("c1")
    assert conversation is not None and conversation.last_seq == 3  # the truncate's mark
    assert late.conversations.append("c1", [NewTurn("user", "c")], run_id="run-1")[0].seq == 4


def test_a_medium_that_takes_no_writes_has_every_write_refused_first() -> None:
    """The seam a read-only store uses: ``check_writable()``, which every write calls first.

    Before it checks its arguments and whatever it would change; reads go on.
    """

    class Closed(MemoryMedium):
        closed = False

        def check_writable(self) -> None:
            if self.closed:
                raise memcommit.ReadOnlyStore("closed for writes")

    medium = Closed()
    roles = RoleSet(clock=ControllableClock(START), medium=medium)
    names = prepared(roles)
    before = _entities(medium)
    medium.closed = True
    for call in WRITES:
        with pytest.raises(memcommit.ReadOnlyStore):
            call.run(roles, names)
    with pytest.raises(memcommit.ReadOnlyStore):
        roles.state.put(42, "k", 1)  # type: ignore[arg-type]
    assert _entities(medium) == before
    for call in READS:
        call.run(roles, names)  # reads go on


def test_a_failed_write_leaves_no_trace() -> None:
    """A medium that cannot write (a log that failed) raises, and nothing changes."""

    class Failing(MemoryMedium):
        fail = False

        def write(self, changes: Sequence[Change]) -> None:
            if self.fail:
                raise OSError("disk full")
            super().write(changes)

    medium = Failing()
    roles = RoleSet(clock=ControllableClock(START), medium=medium)
    roles.locks.acquire("job", "a", TTL)
    before = _entities(medium)
    medium.fail = True
    with pytest.raises(OSError):
        roles.locks.acquire("other", "a", TTL)
    with pytest.raises(OSError):
        roles.conversations.create(conversation_id="c")
    assert _entities(medium) == before


def test_entity_keys_sort_and_scan_without_prefix_leaks() -> None:
    medium = MemoryMedium()
    keys = [entity_key("doc", 2), entity_key("doc", 10), entity_key("doc/nested", 1)]
    keys.append(entity_key("docs", 1))
    medium.write([("k", key, {"i": i}) for i, key in enumerate(keys)])
    assert [key for key, _ in medium.scan("k", child_prefix("doc"))] == keys[:2]
    assert entity_key("doc", 2) < entity_key("doc", 10)
    assert entity_key(("a", "b"), "k").startswith(child_prefix(("a", "b")))
    assert not entity_key(("a", "b2"), "k").startswith(child_prefix(("a", "b")))
    medium.write([("k", keys[0], None), ("k", "absent", None)])
    assert medium.count("k") == 3 and medium.count() == 3
    assert isinstance(medium, Medium)


# -- the suite as a product ------------------------------------------------------------------


def _skewed_harness(tmp_path: pathlib.Path) -> Harness:
    # A store that does not read the clock the harness moves: expiry never happens.
    return Harness(store=RoleSet(clock=ControllableClock(START)), clock=ControllableClock(START))


def test_run_contract_passes_on_the_memory_store() -> None:
    from memcommit.testing import memory_backend

    assert run_contract(memory_backend(), "-q", "-k", "TestLocks or test_reopen") == 0


def test_run_contract_fails_a_store_that_ignores_the_clock() -> None:
    backend = Backend("skewed", _skewed_harness)
    assert run_contract(backend, "-q", "-k", "TestLocks and test_expiry_boundary") != 0


def test_divergences_are_strict_xfails() -> None:
    name = "TestLocks.test_expiry_boundary"
    known = Backend("skewed", _skewed_harness, divergences={name: "ignores the clock"})
    assert run_contract(known, "-q", "-k", "TestLocks and test_expiry_boundary") == 0
    fixed = Backend("memory", _memory, divergences={name: "fixed since"})
    assert run_contract(fixed, "-q", "-k", "TestLocks and test_expiry_boundary") != 0
    typo = Backend("memory", _memory, divergences={"test_no_such_test": "typo"})
    assert run_contract(typo, "-q", "-k", "test_seed_example") != 0


def _memory(tmp_path: pathlib.Path) -> Any:
    clock = ControllableClock(START)
    yield Harness(store=RoleSet(clock=clock), clock=clock)


def test_backends_from_the_environment_variable(tmp_path: pathlib.Path) -> None:
    (backend,) = _load("memcommit.testing.contract.harness:memory_backend")
    assert backend.name == "memory"
    with backend.open(tmp_path) as harness:
        assert harness.store.locks.acquire("job", "a", TTL) is not None
    with pytest.raises(pytest.UsageError):
        _load("memcommit.testing.contract.harness")


def test_a_generator_factory_is_cleaned_up(tmp_path: pathlib.Path) -> None:
    closed = []

    def make(path: pathlib.Path) -> Any:
        clock = ControllableClock(START)
        yield Harness(store=RoleSet(clock=clock), clock=clock)
        closed.append(path)

    with Backend("gen", make).open(tmp_path) as harness:
        assert harness.capabilities == frozenset()
        with pytest.raises(NotSupported):
            harness.reopen()
    assert closed == [tmp_path]
    reopening = Harness(store=None, clock=ControllableClock(), reopener=lambda: "again")
    assert "reopen" in reopening.capabilities and reopening.reopen() == "again"


# -- a store with a small max_record_bytes ---------------------------------------------------


def _small_store(where: str, tmp_path: pathlib.Path) -> Any:
    if where == "file":
        return memcommit.open(str(tmp_path / "small.db"), max_record_bytes=1000)
    if where == "ram":
        return memcommit.open(":memory:", max_record_bytes=1000)
    return RoleSet(medium=MemoryMedium(max_record_bytes=1000))


@pytest.mark.parametrize("where", ["file", "ram", "roles"])
def test_a_value_too_large_for_one_record_names_the_argument_and_writes_nothing(
    where: str, tmp_path: pathlib.Path
) -> None:
    """The caller's argument and the room it has, not an entity's key and state size."""
    store = _small_store(where, tmp_path)
    with pytest.raises(memcommit.InvalidValue) as value:
        store.state.put(("ns",), "k", "x" * 2000)
    message = str(value.value)
    assert message.startswith(
        "value: 2002 bytes as JSON is too large for one record; with the rest of a state "
        "entry, value may be at most "
    )
    assert message.endswith("(the store's max_record_bytes is 1000): make it smaller, or split it")
    most = stated_most(message)
    assert store.state.get(("ns",), "k") is None
    assert store.state.put(("ns",), "k", "x" * (most - 2)).version == 1
    with pytest.raises(memcommit.InvalidValue, match=f"^value: {most + 1} bytes as JSON"):
        store.state.put(("ns",), "k", "x" * (most - 1))

    with pytest.raises(memcommit.InvalidValue, match=r"^input: 2002 bytes as JSON is too large"):
        store.runs.create(agent_id="a", run_id="big", input="x" * 2000)
    assert store.runs.get("big") is None
    run_id = store.runs.create(agent_id="a", run_id="r").run_id
    with pytest.raises(memcommit.InvalidValue, match=r"^state: 2002 bytes as JSON is too large"):
        store.checkpoints.put(run_id, state="x" * 2000)
    with pytest.raises(memcommit.InvalidValue, match=r"^metadata: 2008 bytes as JSON is too large"):
        store.checkpoints.put(run_id, state=1, metadata={"m": "x" * 2000})
    assert store.checkpoints.list(run_id) == []
    store.steps.start(run_id, "s", name="n")
    with pytest.raises(memcommit.InvalidValue, match=r"^output: 2002 bytes as JSON is too large"):
        store.steps.complete(run_id, "s", output="x" * 2000)
    assert [step.status for step in store.steps.list(run_id)] == ["running"]
    conversation_id = store.conversations.create(conversation_id="c").conversation_id
    turns = [NewTurn("user", "hi"), NewTurn("assistant", "x" * 2000)]
    with pytest.raises(memcommit.InvalidValue, match=r"^turns\[1\]\.content: 2002 bytes as JSON"):
        store.conversations.append(conversation_id, turns, run_id=run_id)
    assert store.conversations.list_turns(conversation_id) == []

    with pytest.raises(memcommit.InvalidValue) as data:
        store.artifacts.save(("o",), "blob", b"\x01" * 1000)
    assert str(data.value) == (
        "data: 1000 bytes is too large; an artifact's data is stored base64-encoded in one "
        "record, so the largest artifact is 738 bytes (about three quarters of the store's "
        "max_record_bytes, 1000): split it into several artifacts"
    )
    assert store.artifacts.list_versions(("o",), "blob") == []
    assert store.artifacts.save(("o",), "blob", bytes(738)).version == 1
    with pytest.raises(memcommit.InvalidValue, match=r"^data: 739 bytes is too large;"):
        store.artifacts.save(("o",), "blob", bytes(739))
    assert store.artifacts.save(("o",), "blob", b"x").version == 2
    close = getattr(store, "close", None)
    if close is not None:
        close()
