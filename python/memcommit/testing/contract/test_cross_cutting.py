"""Contract: what holds for every role (research/roles.md 4.0; ROLES.md decisions 9-12)."""

# Test methods say what they check in their names; only some need a docstring.
# ruff: noqa: D102

from __future__ import annotations

import inspect
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from ...errors import MemcommitError, ReadOnlyStore
from ...roles import (
    ROLE_NAMES,
    ClaimLostError,
    ConversationNotFoundError,
    LeaseLostError,
    NewTurn,
    RoleError,
    RunNotFoundError,
    SequenceConflictError,
    VersionConflictError,
    error_from_wire,
)
from .calls import READS, WRITES, fresh, prepared, unclassified
from .harness import Harness, fresh_id, fresh_run, requires

TTL = 1_000

Reader = Callable[[], Any]


def _claimed(store: Any) -> tuple[str, int]:
    run_id = fresh_run(store)
    return run_id, int(store.runs.claim(run_id, worker_id="w", ttl_ms=TTL).token)


def _runs_input(store: Any, value: Any) -> Reader:
    run_id = store.runs.create(agent_id=fresh_id("agent"), input=value).run_id
    return lambda: store.runs.get(run_id).input


def _runs_metadata(store: Any, value: Any) -> Reader:
    run_id = store.runs.create(agent_id=fresh_id("agent"), metadata={"v": value}).run_id
    return lambda: store.runs.get(run_id).metadata["v"]


def _runs_output(store: Any, value: Any) -> Reader:
    run_id, token = _claimed(store)
    store.runs.complete(run_id, token=token, output=value)
    return lambda: store.runs.get(run_id).output


def _runs_cancel_reason(store: Any, value: Any) -> Reader:
    run_id = fresh_run(store)
    store.runs.cancel(run_id, reason=value)
    return lambda: store.runs.get(run_id).reason


def _steps_input(store: Any, value: Any) -> Reader:
    run_id = fresh_run(store)
    store.steps.start(run_id, "1", name="n", input=value)
    return lambda: store.steps.get(run_id, "1").input


def _steps_output(store: Any, value: Any) -> Reader:
    run_id = fresh_run(store)
    store.steps.start(run_id, "1", name="n")
    store.steps.complete(run_id, "1", output=value)
    return lambda: store.steps.get(run_id, "1").output


def _checkpoint_state(store: Any, value: Any) -> Reader:
    run_id = fresh_run(store)
    store.checkpoints.put(run_id, state=value)
    return lambda: store.checkpoints.get(run_id).state


def _checkpoint_metadata(store: Any, value: Any) -> Reader:
    run_id = fresh_run(store)
    store.checkpoints.put(run_id, state=None, metadata={"v": value})
    return lambda: store.checkpoints.get(run_id).metadata["v"]


def _idempotency_result(store: Any, value: Any) -> Reader:
    key = fresh_id("key")
    token = store.idempotency.reserve(key, ttl_ms=TTL).record.token
    store.idempotency.complete(key, token=token, result=value)
    return lambda: store.idempotency.get(key).result


def _effect_result(store: Any, value: Any) -> Reader:
    run_id = fresh_run(store)
    store.effects.record(run_id, "e", result=value)
    return lambda: store.effects.get(run_id, "e").result


def _effect_error(store: Any, value: Any) -> Reader:
    run_id = fresh_run(store)
    store.effects.record(run_id, "e", error=value)
    return lambda: store.effects.get(run_id, "e").error


def _state_value(store: Any, value: Any) -> Reader:
    ns = ("agent", fresh_id("a"))
    store.state.put(ns, "k", value)
    return lambda: store.state.get(ns, "k").value


def _artifact_metadata(store: Any, value: Any) -> Reader:
    owner = ("run", fresh_id("r"))
    store.artifacts.save(owner, "doc", b"x", metadata={"v": value})
    return lambda: store.artifacts.head(owner, "doc").metadata["v"]


def _revision_definition(store: Any, value: Any) -> Reader:
    agent = fresh_id("agent")
    revision_id = store.agent_revisions.create_draft(agent, value).revision_id
    return lambda: store.agent_revisions.get(agent, revision_id).definition


def _conversation_metadata(store: Any, value: Any) -> Reader:
    conversation_id = store.conversations.create(metadata={"v": value}).conversation_id
    return lambda: store.conversations.get(conversation_id).metadata["v"]


def _turn_content(store: Any, value: Any) -> Reader:
    run_id = fresh_run(store)
    conversation_id = store.conversations.create().conversation_id
    store.conversations.append(conversation_id, [NewTurn("user", value)], run_id=run_id)
    return lambda: store.conversations.list_turns(conversation_id)[0].content


def _turn_metadata(store: Any, value: Any) -> Reader:
    run_id = fresh_run(store)
    conversation_id = store.conversations.create().conversation_id
    store.conversations.append(conversation_id, [NewTurn("user", "x", {"v": value})], run_id=run_id)
    return lambda: store.conversations.list_turns(conversation_id)[0].metadata["v"]


@dataclass(frozen=True)
class Site:
    """A place a JSON value goes in and comes back out."""

    name: str
    field: str
    write: Callable[[Any, Any], Reader]


SITES = [
    Site("runs.input", "input", _runs_input),
    Site("runs.metadata", "metadata", _runs_metadata),
    Site("runs.output", "output", _runs_output),
    Site("runs.cancel_reason", "reason", _runs_cancel_reason),
    Site("steps.input", "input", _steps_input),
    Site("steps.output", "output", _steps_output),
    Site("checkpoints.state", "state", _checkpoint_state),
    Site("checkpoints.metadata", "metadata", _checkpoint_metadata),
    Site("idempotency.result", "result", _idempotency_result),
    Site("effects.result", "result", _effect_result),
    Site("effects.error", "error", _effect_error),
    Site("state.value", "value", _state_value),
    Site("artifacts.metadata", "metadata", _artifact_metadata),
    Site("agent_revisions.definition", "definition", _revision_definition),
    Site("conversations.metadata", "metadata", _conversation_metadata),
    Site("turns.content", "content", _turn_content),
    Site("turns.metadata", "metadata", _turn_metadata),
]

FAITHFUL = [
    "text",
    "",
    "ünïcødé ✓ 𝄞 \n\t\"'\\",
    0,
    -1,
    2**53 + 1,
    2**64,
    -(2**70),
    1.5,
    -0.25,
    1e300,
    True,
    False,
    None,
    [],
    {},
    [1, "a", None, [2.5, {"x": []}]],
    {"nested": {"deep": [{"k": "v"}]}, "empty": {}, "list": [], "true": True, "one": 1},
]

REFUSED: list[tuple[Any, type[Exception]]] = [
    ((1, 2), TypeError),
    ({1, 2}, TypeError),
    ({1: "a"}, TypeError),
    (object(), TypeError),
    (b"bytes", TypeError),
    ({"a": (1,)}, TypeError),
    ([{"k": {2: 3}}], TypeError),
    (float("nan"), ValueError),
    (float("inf"), ValueError),
    (float("-inf"), ValueError),
    ("a\x00b", ValueError),
    ({"k\x00": 1}, ValueError),
    ("\ud800", ValueError),
    ([1, {"a": float("nan")}], ValueError),
]


def _same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down (True is not 1, 1.0 is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


_site_ids = [site.name for site in SITES]


def _head(store: Any) -> int:
    """The store's LSN, once it has what others committed (a remote store's replica)."""
    if getattr(store, "lsn", None) is None:
        pytest.skip("the store has no LSN to watch")
    refresh = getattr(store, "refresh", None)
    if callable(refresh):
        refresh()
    return int(store.lsn)


class TestCrossCutting:
    """Values, copies, clocks, errors and the store as a whole."""

    def test_no_overrides_DO_NOT_OVERRIDE(self, request: pytest.FixtureRequest) -> None:
        """No collected class overrides a contract test: divergences are declared, not hidden.

        A backend's known failures go in ``Backend.divergences`` (strict xfails with a reason);
        a subclass that redefines a contract test would hide one, so it fails here.
        """
        for item in request.session.items:
            cls = getattr(item, "cls", None)
            if cls is None:
                continue
            # The contract classes a collected class derives from: those of this package's
            # test modules (found by their module, so this module needs no list of them).
            for contract in cls.__mro__[1:]:
                if not contract.__module__.startswith(f"{__package__}.test_"):
                    continue
                for name in dir(contract):
                    if name.startswith("test_"):
                        assert getattr(cls, name) is getattr(contract, name), (
                            f"{cls.__name__}.{name} overrides the contract test; declare a "
                            "divergence instead"
                        )
        assert request.session.items, "the session collected nothing"

    def test_store_has_the_ten_roles(self, harness: Harness) -> None:
        for name in ROLE_NAMES:
            assert getattr(harness.store, name, None) is not None, name

    def test_api_is_synchronous(self, harness: Harness) -> None:
        """Decision 9: every role method is a plain synchronous method."""
        for name in ROLE_NAMES:
            role = getattr(harness.store, name)
            methods = [m for m in dir(role) if not m.startswith("_")]
            assert methods, name
            for method in methods:
                attribute = getattr(role, method)
                if callable(attribute):
                    assert not inspect.iscoroutinefunction(attribute), f"{name}.{method}"
                    assert not inspect.isasyncgenfunction(attribute), f"{name}.{method}"
        assert harness.store.runs.get(fresh_id("run")) is None  # not an awaitable

    @pytest.mark.parametrize("site", SITES, ids=_site_ids)
    def test_json_fidelity(self, harness: Harness, site: Site) -> None:
        for value in FAITHFUL:
            read = site.write(harness.store, value)
            got = read()
            assert _same(got, value), (site.name, value, got)

    @pytest.mark.parametrize("site", SITES, ids=_site_ids)
    def test_values_are_copied_in_and_out(self, harness: Harness, site: Site) -> None:
        value = {"list": [1, {"inner": "x"}], "map": {"k": "v"}}
        read = site.write(harness.store, value)
        value["list"].append("mutated")  # type: ignore[attr-defined]
        value["map"]["k"] = "mutated"  # type: ignore[index]
        expected = {"list": [1, {"inner": "x"}], "map": {"k": "v"}}
        first = read()
        assert first == expected
        first["list"][1]["inner"] = "mutated"
        first["map"].clear()
        second = read()
        assert second == expected
        assert read() is not read()

    @pytest.mark.parametrize("site", SITES, ids=_site_ids)
    def test_unsupported_values_are_refused(self, harness: Harness, site: Site) -> None:
        for value, error in REFUSED:
            with pytest.raises(error) as caught:
                site.write(harness.store, value)
            assert site.field in str(caught.value), (site.name, str(caught.value))

    def test_ttl_must_be_a_positive_int(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(store)
        name, key = fresh_id("lock"), fresh_id("key")
        calls: list[Callable[[Any], Any]] = [
            lambda ttl: store.runs.claim_next(worker_id="w", ttl_ms=ttl, agent_id="none"),
            lambda ttl: store.runs.claim(run_id, worker_id="w", ttl_ms=ttl),
            lambda ttl: store.locks.acquire(name, "a", ttl),
            lambda ttl: store.idempotency.reserve(key, ttl_ms=ttl),
        ]
        for call in calls:
            for bad, error in (
                (0, ValueError),
                (-1, ValueError),
                (True, TypeError),
                (1.5, TypeError),
            ):
                with pytest.raises(error):
                    call(bad)
        assert store.locks.get(name) is None
        assert store.idempotency.get(key) is None
        run = store.runs.get(run_id)
        assert run is not None and run.status == "pending" and run.attempt == 0
        claim = store.runs.claim(run_id, worker_id="w", ttl_ms=TTL)
        lease = store.locks.acquire(name, "a", TTL)
        token = store.idempotency.reserve(key, ttl_ms=TTL).record.token
        assert lease is not None
        holder_calls: list[Callable[[Any], Any]] = [
            lambda ttl: store.runs.heartbeat(run_id, token=claim.token, ttl_ms=ttl),
            lambda ttl: store.locks.renew(name, token=lease.token, ttl_ms=ttl),
            lambda ttl: store.idempotency.complete(key, token=token, ttl_ms=ttl),
        ]
        for call in holder_calls:
            for bad, error in (
                (0, ValueError),
                (-5, ValueError),
                (False, TypeError),
                (2.0, TypeError),
            ):
                with pytest.raises(error):
                    call(bad)
        assert store.locks.get(name) == lease
        assert store.runs.get(run_id) == claim.run

    def test_bad_ids_are_refused(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(store)
        calls: list[Callable[[Any], Any]] = [
            lambda bad: store.runs.create(agent_id="a", run_id=bad),
            lambda bad: store.runs.create(agent_id=bad),
            lambda bad: store.runs.get(bad),
            lambda bad: store.steps.start(run_id, bad, name="n"),
            lambda bad: store.steps.start(run_id, "1", name=bad),
            lambda bad: store.checkpoints.put(run_id, state=1, namespace=f"ns-{bad}"),
            lambda bad: store.idempotency.reserve(bad, ttl_ms=TTL),
            lambda bad: store.locks.acquire(bad, "owner", TTL),
            lambda bad: store.locks.acquire("lock", bad, TTL),
            lambda bad: store.effects.record(run_id, bad, result=1),
            lambda bad: store.state.put(("ns",), bad, 1),
            lambda bad: store.artifacts.save(("owner",), bad, b""),
            lambda bad: store.agent_revisions.create_draft(bad, {}),
            lambda bad: store.conversations.create(conversation_id=bad),
        ]
        for call in calls:
            for bad in ("a\x00b", "\ud800"):
                with pytest.raises(ValueError):
                    call(bad)
        namespaced = calls.pop(5)  # a checkpoint namespace may be "" (the root)
        assert namespaced("").namespace == "ns-"
        for call in calls:
            with pytest.raises(ValueError):
                call("")
            with pytest.raises(TypeError):
                call(5)
        with pytest.raises(TypeError):
            store.checkpoints.put(run_id, state=1, namespace=None)
        assert store.steps.list(run_id) == []
        assert store.effects.list(run_id) == []
        assert len(store.checkpoints.list(run_id)) == 1

    def test_timestamps_come_from_the_clock(self, harness: Harness) -> None:
        """The store reads time only from its clock: jump ten years and it follows."""
        store, clock = harness.store, harness.clock
        clock.advance(10 * 365 * 24 * 3_600_000)
        now = clock.now_ms()
        run = store.runs.create(agent_id=fresh_id("agent"))
        claim = store.runs.claim(run.run_id, worker_id="w", ttl_ms=TTL)
        lease = store.locks.acquire(fresh_id("lock"), "a", TTL)
        assert lease is not None
        key = store.idempotency.reserve(fresh_id("key"), ttl_ms=TTL).record
        step = store.steps.start(run.run_id, "1", name="n")
        checkpoint = store.checkpoints.put(run.run_id, state=1)
        effect = store.effects.record(run.run_id, "e", result=1)
        entry = store.state.put(("ns", fresh_id("a")), "k", 1)
        artifact = store.artifacts.save(("o", fresh_id("a")), "doc", b"")
        revision = store.agent_revisions.create_draft(fresh_id("agent"), {})
        conversation = store.conversations.create()
        turn = store.conversations.append(
            conversation.conversation_id, [NewTurn("user", "x")], run_id=run.run_id
        )[0]
        stamps = [
            run.created_at_ms,
            claim.run.updated_at_ms,
            lease.acquired_at_ms,
            key.created_at_ms,
            step.started_at_ms,
            checkpoint.created_at_ms,
            effect.recorded_at_ms,
            entry.updated_at_ms,
            artifact.created_at_ms,
            revision.created_at_ms,
            conversation.created_at_ms,
            turn.created_at_ms,
        ]
        assert stamps == [now] * len(stamps)
        assert [claim.expires_at_ms, lease.expires_at_ms, key.expires_at_ms] == [now + TTL] * 3
        clock.advance(5)
        later = store.state.put(entry.namespace, "k", 2)
        assert later.updated_at_ms == now + 5

    def test_expiry_follows_only_the_clock(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        name = fresh_id("lock")
        day = 24 * 3_600_000
        lease = store.locks.acquire(name, "a", day)
        assert lease is not None
        clock.advance(day - 1)
        assert store.locks.get(name) == lease
        clock.advance(1)
        assert store.locks.get(name) is None

    def test_optimistic_concurrency_needs_no_clock_tick(self, harness: Harness) -> None:
        """Decision 10: versions and sequence numbers, never timestamps."""
        store = harness.store
        ns = ("agent", fresh_id("a"))
        versions = [store.state.put(ns, "k", n).version for n in range(3)]
        assert versions == [1, 2, 3] and all(type(v) is int for v in versions)
        with pytest.raises(VersionConflictError):
            store.state.put(ns, "k", "x", expected_version=2)
        run_id = fresh_run(store)
        conversation_id = store.conversations.create().conversation_id
        store.conversations.append(conversation_id, [NewTurn("user", "a")], run_id=run_id)
        with pytest.raises(SequenceConflictError):
            store.conversations.append(
                conversation_id, [NewTurn("user", "b")], run_id=run_id, expected_last_seq=0
            )

    def test_errors_carry_fields_and_codes(self, harness: Harness) -> None:
        """Decision 12: every error is a MemcommitError with its fields and a stable code."""
        store, clock = harness.store, harness.clock
        caught: list[RoleError] = []

        def catch(expected: type[RoleError], call: Callable[[], Any]) -> None:
            with pytest.raises(expected) as info:
                call()
            caught.append(info.value)

        missing_run = fresh_id("run")
        catch(RunNotFoundError, lambda: store.steps.start(missing_run, "1", name="n"))
        catch(
            ConversationNotFoundError,
            lambda: store.conversations.append(fresh_id("c"), [], run_id=fresh_run(store)),
        )
        ns = ("agent", fresh_id("a"))
        store.state.put(ns, "k", 1)
        catch(VersionConflictError, lambda: store.state.put(ns, "k", 2, expected_version=5))
        name = fresh_id("lock")
        lease = store.locks.acquire(name, "a", TTL)
        assert lease is not None
        clock.advance(TTL)
        catch(LeaseLostError, lambda: store.locks.renew(name, token=lease.token, ttl_ms=TTL))
        run_id, token = _claimed(store)
        clock.advance(TTL)
        catch(ClaimLostError, lambda: store.runs.heartbeat(run_id, token=token, ttl_ms=TTL))
        expected_fields = [
            {"run_id": missing_run},
            None,
            {"expected": 5, "actual": 1},
            {"resource": name, "token": lease.token, "reason": "expired"},
            {"resource": run_id, "token": token, "reason": "expired"},
        ]
        for err, fields in zip(caught, expected_fields, strict=True):
            assert isinstance(err, MemcommitError)
            assert isinstance(err.code, str) and err.code == type(err).code
            assert str(err)
            for field_name, value in (fields or {}).items():
                assert getattr(err, field_name) == value
                assert err.fields[field_name] == value
            wired = error_from_wire(err.to_wire())
            assert type(wired) is type(err) and wired.fields == err.fields
            assert str(wired) == str(err)
            pickled = pickle.loads(pickle.dumps(err))
            assert type(pickled) is type(err) and pickled.fields == err.fields

    def test_every_role_method_is_a_read_or_a_write(self, harness: Harness) -> None:
        """The calls the next tests make reach every role method: a new one must join them."""
        assert unclassified(harness.store) == set()

    def test_reads_write_nothing(self, harness: Harness) -> None:
        """A read is never a commit, from a new store on, nor is a write that changes nothing.

        So a caller's ``commit(expect_lsn=...)`` holds across its reads of the roles, the
        first reads of a new store's included.
        """
        store = harness.store
        head = _head(store)
        nothing = fresh()
        for call in READS:
            call.run(store, nothing)
        claim_next = store.runs.claim_next
        assert claim_next(worker_id="w", ttl_ms=TTL, agent_id=nothing.agent) is None
        assert _head(store) == head
        names = prepared(store)
        head = _head(store)
        for call in READS:
            call.run(store, names)
            call.run(store, nothing)
        unchanged = [call for call in WRITES if not call.changes]
        for call in unchanged:
            call.run(store, names)
        assert _head(store) == head, [call.label for call in unchanged]

    def test_a_read_only_store_refuses_every_write(self, harness: Harness) -> None:
        """Whether or not the write would change anything (a delete of nothing too)."""
        requires(harness, "read_only")
        store = harness.store
        names = prepared(store)
        head = _head(store)
        reader = harness.open_reader()
        answered: dict[str, str] = {}
        for call in WRITES:
            try:
                answered[call.label] = repr(call.run(reader, names))
            except ReadOnlyStore:
                pass
            except MemcommitError as error:
                answered[call.label] = type(error).__name__
        assert answered == {}, "these answered instead of refusing"
        assert _head(store) == head

    @pytest.mark.parametrize("bound", [10**20 - 1, 10**20, 2**63, 10**30])
    def test_any_non_negative_int_bound_is_taken(self, harness: Harness, bound: int) -> None:
        """A ``limit``, ``after_seq`` or ``last`` beyond anything stored answers as a large one.

        The same on every store: none refuses it for a range of its own (a sequence number's
        20 digits in a key, the largest slice), and none raises a plain ValueError.
        """
        store = harness.store
        names = prepared(store)
        runs = store.runs.list(agent_id=names.agent)
        assert store.runs.list(agent_id=names.agent, limit=bound) == runs != []
        assert store.runs.list(after_seq=bound) == []
        assert store.runs.list(status=["pending", "running"], after_seq=bound, limit=bound) == []
        steps = store.steps.list(names.claimed)
        assert store.steps.list(names.claimed, limit=bound) == steps != []
        assert store.steps.list(names.claimed, after_seq=bound) == []
        checkpoints = store.checkpoints.list(names.claimed)
        assert store.checkpoints.list(names.claimed, limit=bound) == checkpoints != []
        entries = store.state.list(names.ns)
        assert store.state.list(names.ns, limit=bound) == entries != []
        turns = store.conversations.list_turns(names.conversation)
        assert store.conversations.list_turns(names.conversation, limit=bound) == turns != []
        assert store.conversations.list_turns(names.conversation, last=bound) == turns
        assert store.conversations.list_turns(names.conversation, after_seq=bound) == []
        assert store.idempotency.purge_expired(limit=bound) >= 0

    def test_reopen_keeps_everything(self, harness: Harness) -> None:
        """Durable stores: every role reads back the same after close and reopen."""
        requires(harness, "reopen")
        store, clock = harness.store, harness.clock
        run_id, token = _claimed(store)
        store.steps.start(run_id, "1", name="n", input={"a": 1}, token=token)
        store.checkpoints.put(run_id, state={"s": [1, 2]}, token=token)
        store.effects.record(run_id, "e", result="r", token=token)
        live_lock, dead_lock = fresh_id("lock"), fresh_id("lock")
        store.locks.acquire(dead_lock, "a", 10)
        store.locks.acquire(live_lock, "a", 10 * TTL)
        pending, done = fresh_id("key"), fresh_id("key")
        store.idempotency.reserve(pending, ttl_ms=10 * TTL)
        done_token = store.idempotency.reserve(done, ttl_ms=TTL).record.token
        store.idempotency.complete(done, token=done_token, result={"ok": True}, ttl_ms=10 * TTL)
        ns = ("agent", fresh_id("a"))
        store.state.put(ns, "k", 1)
        store.state.delete(ns, "k")
        owner = ("run", run_id)
        store.artifacts.save(owner, "doc", b"\x00bytes")
        agent = fresh_id("agent")
        revision = store.agent_revisions.create_draft(agent, {"v": 1})
        store.agent_revisions.publish(agent, revision.revision_id)
        conversation_id = store.conversations.create(metadata={"m": 1}).conversation_id
        store.conversations.append(
            conversation_id, [NewTurn("user", "a"), NewTurn("user", "b")], run_id=run_id
        )
        store.conversations.truncate(conversation_id, after_seq=1)
        clock.advance(100)

        def snapshot(s: Any) -> list[Any]:
            return [
                s.runs.get(run_id),
                s.steps.list(run_id),
                s.checkpoints.list(run_id),
                s.effects.list(run_id),
                s.locks.get(live_lock),
                s.locks.get(dead_lock),
                s.idempotency.get(pending),
                s.idempotency.get(done),
                s.state.get(ns, "k"),
                s.artifacts.load(owner, "doc"),
                s.agent_revisions.list(agent),
                s.agent_revisions.get_current(agent),
                s.conversations.get(conversation_id),
                s.conversations.list_turns(conversation_id),
            ]

        before = snapshot(store)
        reopened = harness.reopen()
        assert snapshot(reopened) == before
        reopened.runs.check_claim(run_id, token=token)
        assert reopened.locks.acquire(live_lock, "b", TTL) is None
        taken = reopened.locks.acquire(dead_lock, "b", TTL)
        assert taken is not None and taken.token == 2
        assert reopened.state.put(ns, "k", 2).version == 2
        assert reopened.artifacts.save(owner, "doc", b"2").version == 2
        turn = reopened.conversations.append(conversation_id, [NewTurn("user", "c")], run_id=run_id)
        conversation = before[12]
        assert conversation.last_seq > 2  # the truncate moved it past every number handed out
        assert turn[0].seq == conversation.last_seq + 1
        assert reopened.idempotency.reserve(pending, ttl_ms=TTL).acquired is False
        clock.advance(10 * TTL)
        assert reopened.idempotency.reserve(pending, ttl_ms=TTL).record.token == 2
