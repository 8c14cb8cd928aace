"""Golden vectors of the roles' entity JSON: one file per role, frozen byte for byte.

Each role (and the LangGraph checkpointer and store, whose state is entity records too) has a
scenario here: fixed ids, a :class:`~memcommit.testing.ControllableClock`, every kind of write
the role makes (creates, updates, removals). The scenario runs on a fresh store and the entity
records it wrote (op ``entity``, read back with :meth:`MemoryStore.records` and
:meth:`Record.raw`) are rendered as ``tests/vectors/entities/<role>.json``:

* ``lsn``, ``at`` (the record's time, epoch microseconds) and ``end`` (its COMMIT_END flag:
  a role operation is one commit, so the records of one operation end with ``true``);
* ``kind`` and ``key``: the record key is ``kind``, a NUL and ``key``;
* ``state``: the record's JSON **as its payload holds it** (copied verbatim into the file, so
  key order and number spelling are frozen too), or ``null`` for a removal.

The rendered text must equal the committed file byte for byte. After a deliberate change to an
entity's JSON (which changes what old logs hold: the roles must still read them) regenerate
with ``MEMCOMMIT_WRITE_VECTORS=1 python -m pytest tests/test_entity_vectors.py``.

Nothing random reaches these records: every id the roles would generate (run, revision and
conversation ids) is passed in, LangGraph checkpoint ids are given, and the LangGraph
checkpointer gets a fixed JSON serde instead of its default serializer, whose bytes are
LangGraph's business (the ``type`` and ``data`` fields hold whatever the serde returns).
"""

from __future__ import annotations

import base64
import json
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import memcommit
from memcommit import MemoryStore
from memcommit.roles import NewTurn
from memcommit.roles.groupings import KEPT
from memcommit.roles.logged_groupings import MARKER, entry_kind
from memcommit.roles.medium import KINDS
from memcommit.testing import ControllableClock

VECTORS = Path(__file__).parent / "vectors" / "entities"
REGENERATE = "MEMCOMMIT_WRITE_VECTORS=1 python -m pytest tests/test_entity_vectors.py"
SECOND = 1_000

Scenario = Callable[[MemoryStore, ControllableClock], None]


def _claimed_run(store: MemoryStore, run_id: str = "run-1") -> int:
    """Create and claim a run; return its token (setup, not frozen)."""
    store.runs.create(agent_id="support-bot", run_id=run_id)
    claim = store.runs.claim(run_id, worker_id="worker-1", ttl_ms=600_000)
    return claim.token


# -- the scenarios: (setup, frozen part) ------------------------------------------------------


def _runs(store: MemoryStore, clock: ControllableClock) -> None:
    runs = store.runs
    runs.create(
        agent_id="support-bot",
        run_id="run-1",
        input={"ticket": 42, "subject": "héllo ✓"},
        revision_id="rev-1",
        metadata={"priority": "high"},
    )
    clock.advance(SECOND)
    runs.create(agent_id="support-bot", run_id="run-2", available_at_ms=clock.now_ms() + 60_000)
    clock.advance(SECOND)
    claim = runs.claim_next(worker_id="worker-1", ttl_ms=30_000)
    assert claim is not None and claim.run.run_id == "run-1"
    clock.advance(SECOND)
    runs.heartbeat("run-1", token=claim.token, ttl_ms=30_000)
    clock.advance(SECOND)
    runs.release("run-1", token=claim.token, available_at_ms=clock.now_ms() + 5_000)
    clock.advance(10 * SECOND)
    claim = runs.claim("run-1", worker_id="worker-2", ttl_ms=30_000)
    clock.advance(SECOND)
    runs.suspend("run-1", token=claim.token, reason={"waiting_for": "approval"})
    clock.advance(SECOND)
    runs.resume("run-1")
    clock.advance(SECOND)
    claim = runs.claim("run-1", worker_id="worker-2", ttl_ms=30_000)
    runs.complete("run-1", token=claim.token, output={"answer": "done"})
    clock.advance(60 * SECOND)
    claim = runs.claim("run-2", worker_id="worker-1", ttl_ms=30_000)
    runs.fail("run-2", token=claim.token, error={"code": "E_TIMEOUT"})
    clock.advance(SECOND)
    runs.create(agent_id="support-bot", run_id="run-3")
    runs.cancel("run-3", reason="duplicate")
    # A delete removes the run and, in one commit, what belongs to it.
    runs.create(agent_id="support-bot", run_id="run-4")
    store.steps.start("run-4", "1", name="fetch")
    store.checkpoints.put("run-4", state={"n": 1})
    store.effects.record("run-4", "email", result="sent")
    store.conversations.create(conversation_id="conv-1")
    store.conversations.append("conv-1", [NewTurn(role="user", content="hi")], run_id="run-1")
    store.conversations.append("conv-1", [NewTurn(role="user", content="again")], run_id="run-4")
    clock.advance(SECOND)
    assert runs.delete("run-4")


def _steps_setup(store: MemoryStore, clock: ControllableClock) -> None:
    _claimed_run(store)


def _steps(store: MemoryStore, clock: ControllableClock) -> None:
    steps = store.steps
    steps.start("run-1", "1", name="fetch", input={"url": "https://example.invalid/ä"}, token=1)
    clock.advance(SECOND)
    steps.complete("run-1", "1", output="ok", token=1)
    clock.advance(SECOND)
    steps.start("run-1", "2", name="parse")
    clock.advance(SECOND)
    steps.fail("run-1", "2", error={"message": "bad input"})
    clock.advance(SECOND)
    steps.start("run-1", "2", name="parse")
    clock.advance(SECOND)
    steps.complete("run-1", "2", output=[1, 2.5, None, True])


def _checkpoints_setup(store: MemoryStore, clock: ControllableClock) -> None:
    _claimed_run(store)


def _checkpoints(store: MemoryStore, clock: ControllableClock) -> None:
    cps = store.checkpoints
    first = cps.put("run-1", state={"step": 1}, metadata={"source": "input"}, token=1)
    clock.advance(SECOND)
    cps.put("run-1", state={"step": 2}, parent_id=first.checkpoint_id)
    clock.advance(SECOND)
    cps.put("run-1", state=["sub"], namespace="child")
    clock.advance(SECOND)
    assert cps.prune("run-1", keep_last=1) == 1


def _idempotency(store: MemoryStore, clock: ControllableClock) -> None:
    idem = store.idempotency
    r = idem.reserve("charge-1", ttl_ms=60_000, fingerprint="sha256:ab", owner="worker-1")
    clock.advance(SECOND)
    idem.complete("charge-1", token=r.record.token, result={"charge": "ch_1"}, ttl_ms=86_400_000)
    clock.advance(SECOND)
    r = idem.reserve("charge-2", ttl_ms=60_000)
    clock.advance(SECOND)
    assert idem.release("charge-2", token=r.record.token)
    idem.reserve("charge-3", ttl_ms=1_000)
    clock.advance(2 * SECOND)
    assert idem.purge_expired() == 1


def _locks(store: MemoryStore, clock: ControllableClock) -> None:
    locks = store.locks
    lease = locks.acquire("job", "worker-1", 30_000)
    assert lease is not None
    clock.advance(SECOND)
    locks.acquire("job", "worker-1", 30_000)
    clock.advance(SECOND)
    locks.renew("job", token=lease.token, ttl_ms=60_000)
    clock.advance(SECOND)
    assert locks.release("job", token=lease.token)
    locks.acquire("job", "worker-2", 30_000)


def _effects_setup(store: MemoryStore, clock: ControllableClock) -> None:
    _claimed_run(store)


def _effects(store: MemoryStore, clock: ControllableClock) -> None:
    store.effects.record("run-1", "send-email", result={"message_id": "m-1"}, fingerprint="fp-1")
    clock.advance(SECOND)
    store.effects.record("run-1", "charge", error={"code": "card_declined"}, token=1)


def _state(store: MemoryStore, clock: ControllableClock) -> None:
    state = store.state
    state.put(("agent", "préfs"), "greeting", "héllo")
    clock.advance(SECOND)
    state.put(("agent", "préfs"), "greeting", {"text": "hi"}, expected_version=1)
    clock.advance(SECOND)
    state.put(("agent",), "counts", [1, 2, 3])
    clock.advance(SECOND)
    assert state.delete(("agent", "préfs"), "greeting")
    assert state.delete_namespace(("agent",)) == 1


def _artifacts(store: MemoryStore, clock: ControllableClock) -> None:
    arts = store.artifacts
    arts.save(("run-1",), "report", b"hello", media_type="text/plain", metadata={"pages": 1})
    clock.advance(SECOND)
    arts.save(("run-1",), "report", b"\x00\xff binary", expected_version=1)
    clock.advance(SECOND)
    assert arts.delete(("run-1",), "report") == 2


def _agent_revisions(store: MemoryStore, clock: ControllableClock) -> None:
    revs = store.agent_revisions
    draft = revs.create_draft("bot", {"prompt": "Hello"}, revision_id="rev-1")
    clock.advance(SECOND)
    revs.update_draft("bot", "rev-1", {"prompt": "Hello!"}, expected_checksum=draft.checksum)
    clock.advance(SECOND)
    revs.publish("bot", "rev-1")
    clock.advance(SECOND)
    revs.create_draft("bot", {"prompt": "Hi"}, parent_revision_id="rev-1", revision_id="rev-2")
    clock.advance(SECOND)
    revs.publish("bot", "rev-2")
    clock.advance(SECOND)
    revs.set_current("bot", 1)
    clock.advance(SECOND)
    revs.archive("bot", "rev-2")


def _conversations_setup(store: MemoryStore, clock: ControllableClock) -> None:
    _claimed_run(store)


def _conversations(store: MemoryStore, clock: ControllableClock) -> None:
    convs = store.conversations
    convs.create(conversation_id="conv-1", agent_id="support-bot", metadata={"channel": "web"})
    clock.advance(SECOND)
    turns = [
        NewTurn(role="user", content="Bonjour ✓"),
        NewTurn(role="assistant", content={"text": "Hi"}, metadata={"model": "m"}),
    ]
    convs.append("conv-1", turns, run_id="run-1", expected_last_seq=0, token=1)
    clock.advance(SECOND)
    convs.append("conv-1", [NewTurn(role="user", content="more")], run_id="run-1")
    clock.advance(SECOND)
    assert convs.truncate("conv-1", after_seq=2) == 1
    clock.advance(SECOND)
    assert convs.delete("conv-1")


class _JsonSerde:
    """A fixed serde for the checkpointer: JSON, with bytes as ``{"__bytes__": base64}``."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        def bytes_as_json(value: Any) -> Any:
            if isinstance(value, bytes):
                return {"__bytes__": base64.b64encode(value).decode("ascii")}
            raise TypeError(type(value).__name__)

        return "test-json", json.dumps(obj, default=bytes_as_json).encode()

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return json.loads(data[1])


def _checkpoint(checkpoint_id: str, step: int) -> dict[str, Any]:
    return {
        "v": 4,
        "id": checkpoint_id,
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {"count": step},
        "channel_versions": {"count": step},
        "versions_seen": {},
    }


def _langgraph_saver(store: MemoryStore, clock: ControllableClock) -> None:
    from memcommit.integrations.langgraph import MemcommitSaver

    saver = MemcommitSaver(store, serde=_JsonSerde())
    ids = ["1f000000-0000-6000-8000-000000000001", "1f000000-0000-6000-8000-000000000002"]
    config: Any = {"configurable": {"thread_id": "thread-1", "checkpoint_ns": ""}}
    first = saver.put(config, _checkpoint(ids[0], 1), {"source": "input", "step": -1}, {})
    saver.put_writes(first, [("count", 1), ("__error__", "boom")], task_id="task-1")
    saver.put_writes(first, [("count", 2)], task_id="task-1", task_path="~__pregel_pull")
    meta: Any = {"source": "loop", "step": 0, "run_id": "run-1", "blob": b"\x01"}
    saver.put(first, _checkpoint(ids[1], 2), meta, {})
    saver.copy_thread("thread-1", "thread-2")
    saver.prune(["thread-1"])
    saver.delete_thread("thread-2")


def _langgraph_store(store: MemoryStore, clock: ControllableClock) -> None:
    from memcommit.integrations.langgraph import MemcommitStore

    items = MemcommitStore(store)
    items.put(("docs", "notes"), "a", {"text": "héllo", "n": 1})
    clock.advance(SECOND)
    items.put(("docs", "notes"), "a", {"text": "héllo", "n": 2})
    items.put(("docs",), "b", {"n": 3}, ttl=1.5)
    clock.advance(SECOND)
    items.delete(("docs", "notes"), "a")
    clock.advance(120 * SECOND)
    assert items.sweep_ttl() == 1


# The scenario behind each vector: the entity records it writes are what the vector freezes.
LANGGRAPH: dict[str, Scenario] = {
    "langgraph_saver": _langgraph_saver,
    "langgraph_store": _langgraph_store,
}
SCENARIOS: dict[str, Scenario] = {
    "runs": _runs,
    "steps": _steps,
    "checkpoints": _checkpoints,
    "idempotency": _idempotency,
    "locks": _locks,
    "effects": _effects,
    "state": _state,
    "artifacts": _artifacts,
    "agent_revisions": _agent_revisions,
    "conversations": _conversations,
    **LANGGRAPH,
}
# What some scenarios need written first (a run, a claim); not part of the vector.
SETUPS: dict[str, Scenario] = {
    "steps": _steps_setup,
    "checkpoints": _checkpoints_setup,
    "effects": _effects_setup,
    "conversations": _conversations_setup,
}


# -- rendering ------------------------------------------------------------------------------


def _entity_records(store: MemoryStore, after: int) -> list[tuple[int, int, bool, str, bytes]]:
    """Return (lsn, at_us, commit_end, full key, payload) of the entity records after `after`."""
    out = []
    for record in store.records(after):
        assert record.op == "entity", f"LSN {record.lsn} is a {record.op} record"
        raw = record.raw()
        (key_len,) = struct.unpack_from("<H", raw, 24)
        (at_us,) = struct.unpack_from("<q", raw, 16)
        key = raw[32 : 32 + key_len].decode("utf-8")
        assert key == record.key
        out.append((record.lsn, at_us, bool(raw[3] & 1), key, raw[32 + key_len : -4]))
    return out


def _render(role: str, records: list[tuple[int, int, bool, str, bytes]]) -> str:
    """Return the vector file's text: each state's JSON copied from its payload as it is."""
    lines = []
    for lsn, at_us, end, full_key, payload in records:
        kind, sep, key = full_key.partition("\x00")
        assert sep, f"LSN {lsn}: the key {full_key!r} has no NUL"
        if payload[:1] == b"\x01":
            state = payload[1:].decode("utf-8")
        else:
            assert payload == b"\x00", f"LSN {lsn}: payload {payload!r} is neither 1+JSON nor 0"
            state = "null"
        head = json.dumps(
            {"lsn": lsn, "at": at_us, "end": end, "kind": kind, "key": key}, ensure_ascii=False
        )
        lines.append(f'    {head[:-1]}, "state": {state}}}')
    description = (
        f"The entity records the {role} scenario of tests/test_entity_vectors.py writes, "
        "each state as its record's payload holds it; regenerate with " + REGENERATE
    )
    return (
        "{\n"
        f'  "description": {json.dumps(description)},\n'
        f'  "role": {json.dumps(role)},\n'
        '  "records": [\n' + ",\n".join(lines) + "\n  ]\n}\n"
    )


def _replay(role: str) -> list[tuple[int, int, bool, str, bytes]]:
    clock = ControllableClock()
    with memcommit.open(":memory:", clock=clock) as store:
        if role in SETUPS:
            SETUPS[role](store, clock)
        after = store.lsn
        clock.advance(60 * SECOND)
        SCENARIOS[role](store, clock)
        return _entity_records(store, after)


@pytest.mark.parametrize("role", list(SCENARIOS))
def test_role_entity_json_matches_its_vector(role: str) -> None:
    if role in LANGGRAPH:
        pytest.importorskip("langgraph.checkpoint.base")
    records = _replay(role)
    assert records, f"the {role} scenario wrote no entity record"
    text = _render(role, records)
    parsed = json.loads(text)
    assert [r["state"] is None for r in parsed["records"]] == [p == b"\x00" for *_, p in records]
    path = VECTORS / f"{role}.json"
    if os.environ.get("MEMCOMMIT_WRITE_VECTORS") == "1":
        VECTORS.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing; generate it with {REGENERATE}"
    golden = path.read_text(encoding="utf-8")
    if golden != text:
        diff = next(
            (
                i + 1
                for i, (a, b) in enumerate(
                    zip(golden.splitlines(), text.splitlines(), strict=False)
                )
                if a != b
            ),
            min(len(golden.splitlines()), len(text.splitlines())) + 1,
        )
        pytest.fail(
            f"{path} differs from the entity records the {role} scenario writes (line {diff}): "
            f"an entity's key or JSON changed. If that is deliberate (old logs must still read), "
            f"regenerate with {REGENERATE}"
        )


def test_the_vectors_cover_every_entity_kind_with_a_live_state_and_a_removal() -> None:
    pytest.importorskip("langgraph.checkpoint.base")
    from memcommit.integrations.langgraph import saver, store

    live: set[str] = set()
    removed: set[str] = set()
    for role in SCENARIOS:
        for record in json.loads((VECTORS / f"{role}.json").read_text(encoding="utf-8"))["records"]:
            (live if record["state"] is not None else removed).add(record["kind"])
    # The entries of the groupings the log keeps, and their markers.
    kept = {entry_kind(kind, name) for kind, named in KEPT.items() for name in named}
    every = {*KINDS, saver.CHECKPOINT, saver.WRITES, saver.HEAD, store.ITEM, *kept, MARKER}
    assert live == every
    # Counters, agent revisions and markers have no removal; every other kind is removed
    # somewhere.
    assert removed == every - {"counter", "revision", "revision.agent", MARKER}
    assert sorted(p.stem for p in VECTORS.glob("*.json")) == sorted(SCENARIOS)
