"""Every public method of every role, called: for the tests that hold for all of them.

:data:`READS` calls each read method, :data:`WRITES` each write method, in ways that change
something and in ways that change nothing (a delete of nothing, a claim with nothing to
claim). :func:`prepared` makes in a store what the calls name; :func:`fresh` names what no
store holds. :func:`unclassified` finds a role method in neither table, so that a new method
joins the tests of reads (they write nothing) and of writes (a read-only store refuses each).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...roles import ROLE_NAMES, NewTurn, RoleError
from .harness import fresh_id

__all__ = ["READS", "WRITES", "Call", "Names", "fresh", "prepared", "unclassified"]

_TTL = 60_000  # longer than any test moves the clock between preparing and calling


@dataclass(frozen=True)
class Names:
    """What the calls name, and the tokens that hold it.

    Attributes:
        run: A pending run of `agent`.
        claimed: A running run, claimed with `claim_token`, with step ``"1"``, effect ``"e"``,
            a checkpoint, the artifact ``doc`` of `owner`, and a turn of `conversation`.
        claim_token: The claim's token.
        agent: An agent with version 1 published, and the draft `draft`.
        draft: A draft revision of `agent`.
        key: An idempotency key reserved with `key_token`.
        key_token: Its reservation's token.
        lock: A lock held by ``"owner"`` with `lock_token`.
        lock_token: Its lease's token.
        ns: A namespace with the entry ``"k"``.
        owner: The owner of the artifact ``doc``.
        conversation: A conversation with one turn.
    """

    run: str
    claimed: str
    claim_token: int
    agent: str
    draft: str
    key: str
    key_token: int
    lock: str
    lock_token: int
    ns: tuple[str, ...]
    owner: tuple[str, ...]
    conversation: str


def prepared(store: Any) -> Names:
    """Make in `store` everything :class:`Names` says, under fresh ids; return their names."""
    agent = fresh_id("agent")
    run = store.runs.create(agent_id=agent, run_id=fresh_id("run")).run_id
    claimed = store.runs.create(agent_id=fresh_id("agent"), run_id=fresh_id("run")).run_id
    claim_token = store.runs.claim(claimed, worker_id="w", ttl_ms=_TTL).token
    store.steps.start(claimed, "1", name="n", token=claim_token)
    store.checkpoints.put(claimed, state={"s": 1}, token=claim_token)
    store.effects.record(claimed, "e", result=1, token=claim_token)
    key = fresh_id("key")
    key_token = store.idempotency.reserve(key, ttl_ms=_TTL).record.token
    lock = fresh_id("lock")
    lock_token = store.locks.acquire(lock, "owner", _TTL).token
    ns = ("agent", fresh_id("a"))
    store.state.put(ns, "k", 1)
    owner = ("run", claimed)
    store.artifacts.save(owner, "doc", b"x")
    published = store.agent_revisions.create_draft(agent, {"v": 1}).revision_id
    store.agent_revisions.publish(agent, published)
    draft = store.agent_revisions.create_draft(agent, {"v": 2}).revision_id
    conversation = store.conversations.create().conversation_id
    store.conversations.append(
        conversation, [NewTurn("user", "hi")], run_id=claimed, token=claim_token
    )
    return Names(
        run=run,
        claimed=claimed,
        claim_token=claim_token,
        agent=agent,
        draft=draft,
        key=key,
        key_token=key_token,
        lock=lock,
        lock_token=lock_token,
        ns=ns,
        owner=owner,
        conversation=conversation,
    )


def fresh() -> Names:
    """Names of nothing any store holds (tokens 1)."""
    return Names(
        run=fresh_id("run"),
        claimed=fresh_id("run"),
        claim_token=1,
        agent=fresh_id("agent"),
        draft=fresh_id("rev"),
        key=fresh_id("key"),
        key_token=1,
        lock=fresh_id("lock"),
        lock_token=1,
        ns=("agent", fresh_id("a")),
        owner=("run", fresh_id("r")),
        conversation=fresh_id("conv"),
    )


def _quietly(call: Callable[[], object]) -> object:
    """Call a read that raises when the token does not hold (a role error is its answer)."""
    with contextlib.suppress(RoleError):
        return call()
    return None


@dataclass(frozen=True)
class Call:
    """One call of a role method on a store, for the names it is given.

    Attributes:
        method: ``role.method``.
        how: What the call is, for a message (``"of nothing"``).
        run: ``run(store, names)`` makes the call and returns its answer.
        changes: Whether it may change something (False: it changes nothing, whatever else
            the store holds).
    """

    method: str
    how: str
    run: Callable[[Any, Names], object]
    changes: bool = True

    @property
    def label(self) -> str:
        """The method and how it is called."""
        return f"{self.method} ({self.how})"


READS = [
    Call("runs.get", "", lambda s, n: s.runs.get(n.run), False),
    Call("runs.exists", "", lambda s, n: s.runs.exists(n.run), False),
    Call("runs.list", "all", lambda s, n: s.runs.list(), False),
    Call(
        "runs.list",
        "filtered",
        lambda s, n: s.runs.list(status=["pending"], agent_id=n.agent, after_seq=0, limit=5),
        False,
    ),
    Call(
        "runs.check_claim",
        "",
        lambda s, n: _quietly(lambda: s.runs.check_claim(n.claimed, token=n.claim_token)),
        False,
    ),
    Call("steps.get", "", lambda s, n: s.steps.get(n.claimed, "1"), False),
    Call("steps.list", "", lambda s, n: s.steps.list(n.claimed), False),
    Call("checkpoints.get", "", lambda s, n: s.checkpoints.get(n.claimed), False),
    Call("checkpoints.list", "", lambda s, n: s.checkpoints.list(n.claimed), False),
    Call("idempotency.get", "", lambda s, n: s.idempotency.get(n.key), False),
    Call("locks.get", "", lambda s, n: s.locks.get(n.lock), False),
    Call(
        "locks.validate",
        "",
        lambda s, n: _quietly(lambda: s.locks.validate(n.lock, token=n.lock_token)),
        False,
    ),
    Call("effects.get", "", lambda s, n: s.effects.get(n.claimed, "e"), False),
    Call("effects.list", "", lambda s, n: s.effects.list(n.claimed), False),
    Call("state.get", "", lambda s, n: s.state.get(n.ns, "k"), False),
    Call("state.list", "", lambda s, n: s.state.list(n.ns), False),
    Call("state.list_namespaces", "", lambda s, n: s.state.list_namespaces(prefix=n.ns), False),
    Call("artifacts.load", "", lambda s, n: s.artifacts.load(n.owner, "doc"), False),
    Call("artifacts.head", "", lambda s, n: s.artifacts.head(n.owner, "doc"), False),
    Call("artifacts.list_names", "", lambda s, n: s.artifacts.list_names(n.owner), False),
    Call(
        "artifacts.list_versions", "", lambda s, n: s.artifacts.list_versions(n.owner, "doc"), False
    ),
    Call("agent_revisions.get", "", lambda s, n: s.agent_revisions.get(n.agent, n.draft), False),
    Call(
        "agent_revisions.get_version",
        "",
        lambda s, n: s.agent_revisions.get_version(n.agent, 1),
        False,
    ),
    Call(
        "agent_revisions.get_current",
        "",
        lambda s, n: s.agent_revisions.get_current(n.agent),
        False,
    ),
    Call("agent_revisions.list", "", lambda s, n: s.agent_revisions.list(n.agent), False),
    Call("conversations.get", "", lambda s, n: s.conversations.get(n.conversation), False),
    Call(
        "conversations.list_turns",
        "",
        lambda s, n: s.conversations.list_turns(n.conversation),
        False,
    ),
]
"""A call of every read method (each changes nothing)."""

_TURN = [NewTurn("user", "more")]

WRITES = [
    Call("runs.create", "", lambda s, n: s.runs.create(agent_id=n.agent, run_id=fresh_id("run"))),
    Call(
        "runs.claim_next",
        "with a run to claim",
        lambda s, n: s.runs.claim_next(worker_id="w", ttl_ms=_TTL, agent_id=n.agent),
    ),
    Call(
        "runs.claim_next",
        "with none to claim",
        lambda s, n: s.runs.claim_next(worker_id="w", ttl_ms=_TTL, agent_id=fresh_id("agent")),
        False,
    ),
    Call("runs.claim", "", lambda s, n: s.runs.claim(n.run, worker_id="w", ttl_ms=_TTL)),
    Call(
        "runs.heartbeat",
        "",
        lambda s, n: s.runs.heartbeat(n.claimed, token=n.claim_token, ttl_ms=_TTL),
    ),
    Call("runs.release", "", lambda s, n: s.runs.release(n.claimed, token=n.claim_token)),
    Call("runs.complete", "", lambda s, n: s.runs.complete(n.claimed, token=n.claim_token)),
    Call("runs.fail", "", lambda s, n: s.runs.fail(n.claimed, token=n.claim_token, error="e")),
    Call("runs.suspend", "", lambda s, n: s.runs.suspend(n.claimed, token=n.claim_token)),
    Call("runs.resume", "of a pending run", lambda s, n: s.runs.resume(n.run)),
    Call("runs.cancel", "", lambda s, n: s.runs.cancel(n.run)),
    Call("runs.delete", "", lambda s, n: s.runs.delete(n.run)),
    Call("runs.delete", "of nothing", lambda s, n: s.runs.delete(fresh_id("run")), False),
    Call(
        "steps.start",
        "",
        lambda s, n: s.steps.start(n.claimed, "2", name="n", token=n.claim_token),
    ),
    Call(
        "steps.complete",
        "",
        lambda s, n: s.steps.complete(n.claimed, "1", output=1, token=n.claim_token),
    ),
    Call(
        "steps.fail", "", lambda s, n: s.steps.fail(n.claimed, "1", error="e", token=n.claim_token)
    ),
    Call(
        "checkpoints.put",
        "",
        lambda s, n: s.checkpoints.put(n.claimed, state={"s": 2}, token=n.claim_token),
    ),
    Call(
        "checkpoints.prune",
        "of nothing",
        lambda s, n: s.checkpoints.prune(n.claimed, keep_last=9),
        False,
    ),
    Call(
        "idempotency.reserve", "", lambda s, n: s.idempotency.reserve(fresh_id("key"), ttl_ms=_TTL)
    ),
    Call(
        "idempotency.reserve",
        "of a live key",
        lambda s, n: s.idempotency.reserve(n.key, ttl_ms=_TTL),
        False,
    ),
    Call(
        "idempotency.complete",
        "",
        lambda s, n: s.idempotency.complete(n.key, token=n.key_token, result=1),
    ),
    Call("idempotency.release", "", lambda s, n: s.idempotency.release(n.key, token=n.key_token)),
    # What it purges is what has expired, which may be others' on a shared store.
    Call("idempotency.purge_expired", "", lambda s, n: s.idempotency.purge_expired()),
    Call("locks.acquire", "", lambda s, n: s.locks.acquire(fresh_id("lock"), "owner", _TTL)),
    Call(
        "locks.acquire",
        "held by another",
        lambda s, n: s.locks.acquire(n.lock, "another", _TTL),
        False,
    ),
    Call("locks.renew", "", lambda s, n: s.locks.renew(n.lock, token=n.lock_token, ttl_ms=_TTL)),
    Call("locks.release", "", lambda s, n: s.locks.release(n.lock, token=n.lock_token)),
    Call(
        "locks.release",
        "of nothing",
        lambda s, n: s.locks.release(fresh_id("lock"), token=1),
        False,
    ),
    Call(
        "effects.record",
        "",
        lambda s, n: s.effects.record(n.claimed, "e2", result=1, token=n.claim_token),
    ),
    Call("state.put", "", lambda s, n: s.state.put(n.ns, "k", 2)),
    Call("state.delete", "", lambda s, n: s.state.delete(n.ns, "k")),
    Call("state.delete", "of nothing", lambda s, n: s.state.delete(n.ns, "missing"), False),
    Call("state.delete_namespace", "", lambda s, n: s.state.delete_namespace(n.ns)),
    Call(
        "state.delete_namespace",
        "of nothing",
        lambda s, n: s.state.delete_namespace(("agent", fresh_id("a"))),
        False,
    ),
    Call("artifacts.save", "", lambda s, n: s.artifacts.save(n.owner, "doc", b"y")),
    Call("artifacts.delete", "", lambda s, n: s.artifacts.delete(n.owner, "doc")),
    Call(
        "artifacts.delete", "of nothing", lambda s, n: s.artifacts.delete(n.owner, "missing"), False
    ),
    Call(
        "agent_revisions.create_draft",
        "",
        lambda s, n: s.agent_revisions.create_draft(n.agent, {"v": 3}),
    ),
    Call(
        "agent_revisions.update_draft",
        "",
        lambda s, n: s.agent_revisions.update_draft(n.agent, n.draft, {"v": 4}),
    ),
    Call("agent_revisions.publish", "", lambda s, n: s.agent_revisions.publish(n.agent, n.draft)),
    Call("agent_revisions.set_current", "", lambda s, n: s.agent_revisions.set_current(n.agent, 1)),
    Call("agent_revisions.archive", "", lambda s, n: s.agent_revisions.archive(n.agent, n.draft)),
    Call("conversations.create", "", lambda s, n: s.conversations.create()),
    Call(
        "conversations.append",
        "",
        lambda s, n: s.conversations.append(
            n.conversation, _TURN, run_id=n.claimed, token=n.claim_token
        ),
    ),
    Call(
        "conversations.truncate",
        "",
        lambda s, n: s.conversations.truncate(n.conversation, after_seq=0),
    ),
    Call(
        "conversations.truncate",
        "of nothing",
        lambda s, n: s.conversations.truncate(n.conversation, after_seq=99),
        False,
    ),
    Call("conversations.delete", "", lambda s, n: s.conversations.delete(n.conversation)),
    Call(
        "conversations.delete",
        "of nothing",
        lambda s, n: s.conversations.delete(fresh_id("conv")),
        False,
    ),
]
"""Calls of every write method: each way it changes something, and some that change nothing."""


def unclassified(store: Any) -> set[str]:
    """The public methods of `store`'s roles (``role.method``) that neither table calls."""
    called = {call.method for call in READS + WRITES}
    methods = set()
    for name in ROLE_NAMES:
        role = getattr(store, name)
        for attribute in dir(role):
            if not attribute.startswith("_") and callable(getattr(role, attribute)):
                methods.add(f"{name}.{attribute}")
    return methods - called
