"""Model-based test: random operations against a store and a plain-Python model of SPEC 3-4.

A hypothesis state machine drives a store of each kind (a log file with durability "none"
for speed, ``:memory:``, and a ``RemoteStore`` on a ``memcommit serve --test-clock`` process
of its own per example) and a model written from the spec alone:

* ``put`` creates a memory, or replaces the content of an existing id (kind, text, data,
  task, tags, sources) keeping its tier, status, creation time and creation order;
* ``stale``/``restore``/``move`` of an unknown id is ``Rejected`` (guard kind
  ``unknown_id``);
* every operation is one record; a memory's ``lsn`` and ``updated_at`` come from the
  newest record touching it, ``created_at`` from its first put;
* a commit's guards see the state including the commit's earlier operations, and a
  rejected commit, or one whose block raises, writes nothing.

After every step get/get_many/find/len/lsn/contains/history agree with the model; one
rule closes and reopens the store (a new client, for a RemoteStore: it must catch up with
the whole log) and checks the whole log.

CI runs a modest number of examples per kind; ``MEMCOMMIT_LONG=1`` runs many more.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import memcommit
from memcommit import Rejected
from memcommit.clock import to_microseconds
from memcommit.testing import CLOCK_START as START
from memcommit.testing import ControllableClock, ServerProcess

LONG = os.environ.get("MEMCOMMIT_LONG") == "1"
TIERS = ("working", "mid", "long", "archive")
KINDS = ("note", "fact", "trace")
TASKS = (None, "t1", "t2")
TAGS = ("red", "green", "blue")
PENDING = "\0pending"  # model-only key of a memory whose generated id is not known yet
POOL = ("a", "b", "c", "d", "e", "f")  # explicit ids; generated ids join the model as they come

json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.text(max_size=8)
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
data_st = st.none() | st.dictionaries(st.text(max_size=5), json_value, max_size=3)
text_st = st.text(max_size=40)
tags_st = st.lists(st.sampled_from(TAGS), unique=True, max_size=3).map(tuple)


class Boom(Exception):
    """Raised inside a commit block on purpose."""


@dataclass
class M:
    id: str
    kind: str
    text: str
    data: dict[str, Any] | None
    task: str | None
    tier: str
    status: str
    tags: tuple[str, ...]
    sources: tuple[str, ...]
    created_at: datetime
    updated_at: datetime
    lsn: int
    order: int  # LSN of the first put: creation order


@dataclass
class Model:
    mems: dict[str, M] = field(default_factory=dict)
    lsn: int = 0
    finished: set[str] = field(default_factory=set)
    log: list[tuple[int, str, str]] = field(default_factory=list)  # (lsn, op, key)

    def copy(self) -> Model:
        return Model(
            {k: replace(v) for k, v in self.mems.items()},
            self.lsn,
            set(self.finished),
            list(self.log),
        )


class Refused(Exception):
    """The model refuses an op: carries the guard kind and id the store must report."""

    def __init__(self, kind: str, mid: str | None) -> None:
        super().__init__(kind, mid)
        self.kind = kind
        self.mid = mid


def model_apply(m: Model, op: tuple[Any, ...], now: datetime) -> None:
    """Apply one op (or guard) to the model in place; raise Refused when it fails."""
    name = op[0]
    if name == "put":
        _, mid, kw = op
        m.lsn += 1
        old = m.mems.get(mid)
        if old is None:
            m.mems[mid] = M(
                id=mid,
                kind=kw["kind"],
                text=kw["text"],
                data=kw["data"],
                task=kw["task"],
                tier=kw["tier"],
                status="active",
                tags=kw["tags"],
                sources=kw["sources"],
                created_at=now,
                updated_at=now,
                lsn=m.lsn,
                order=m.lsn,
            )
        else:
            old.kind, old.text, old.data = kw["kind"], kw["text"], kw["data"]
            old.task, old.tags, old.sources = kw["task"], kw["tags"], kw["sources"]
            old.updated_at, old.lsn = now, m.lsn
        m.log.append((m.lsn, "put", mid))
    elif name in ("stale", "restore", "move"):
        mid = op[1]
        mem = m.mems.get(mid)
        if mem is None:
            raise Refused("unknown_id", mid)
        m.lsn += 1
        if name == "move":
            mem.tier = op[2]
        else:
            mem.status = "stale" if name == "stale" else "active"
        mem.updated_at, mem.lsn = now, m.lsn
        m.log.append((m.lsn, "move" if name == "move" else "status", mid))
    elif name == "finish_task":
        m.lsn += 1
        m.finished.add(op[1])
        m.log.append((m.lsn, "task", op[1]))
    elif name == "expect":
        _, mid, what, value = op
        mem = m.mems.get(mid)
        if what == "exists":
            if (mem is not None) != value:
                raise Refused("exists", mid)
        else:
            assert mem is not None  # the strategies only guard fields of known memories
            if getattr(mem, what) != value:
                raise Refused(what, mid)
    else:
        raise AssertionError(op)


def put_drawn(target: Any, kw: dict[str, Any], **id: str) -> Any:
    """``target.put`` (on a store or a Commit) of the fields ``StoreMachine.put_kwargs`` drew;
    under the ``id`` given, or a new id the store makes when none is."""
    fields = ("kind", "task", "tier", "data", "tags", "sources")
    return target.put(kw["text"], **id, **{name: kw[name] for name in fields})


def run_op(target: Any, op: tuple[Any, ...]) -> Any:
    """Issue one op on a store (single call) or a Commit (staged)."""
    name = op[0]
    if name == "put":
        _, mid, kw = op
        return put_drawn(target, kw, id=mid)
    if name == "stale":
        return target.stale(op[1], reason=op[2])
    if name == "restore":
        return target.restore(op[1])
    if name == "move":
        return target.move(op[1], op[2])
    if name == "finish_task":
        return target.finish_task(op[1])
    if name == "expect":
        _, mid, what, value = op
        return target.expect(mid, **{what: value})
    raise AssertionError(op)


# -- the store kinds ---------------------------------------------------------------------------


class Kind:
    """How one kind of store is opened, reopened and disposed of, for one example."""

    clock: ControllableClock
    store: Any

    def reopen(self) -> Any:
        """Close the store and return it opened again on the same log."""
        raise NotImplementedError

    def close(self) -> None:
        self.store.close()


class FileKind(Kind):
    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="memcommit-model-")
        self.path = os.path.join(self.dir, "model.db")
        self.clock = ControllableClock(START)
        self.store = memcommit.open(self.path, clock=self.clock, durability="none")

    def reopen(self) -> Any:
        self.store.close()
        self.store = memcommit.open(self.path, clock=self.clock, durability="none")
        return self.store

    def close(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class MemoryKind(Kind):
    def __init__(self) -> None:
        self.clock = ControllableClock(START)
        self.store = memcommit.open(":memory:", clock=self.clock)

    def reopen(self) -> Any:
        return self.store  # a RAM store has nothing to reopen from: it stays open


class ServerClock(ControllableClock):
    """A ControllableClock that moves the server's (``--test-clock``) clock with it."""

    def __init__(self, url: str) -> None:
        super().__init__(START)
        self._url = url

    def advance(self, ms: int | timedelta) -> None:
        super().advance(ms)
        body = json.dumps({"now_us": to_microseconds(self.now())}).encode()
        request = urllib.request.Request(f"{self._url}/v1/test/clock", body, method="POST")
        with urllib.request.urlopen(request) as answer:
            assert answer.status == 200


class Servers:
    """Fresh ``memcommit serve`` processes, one per example, the next started ahead."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._count = 0
        self._pool = ThreadPoolExecutor(2, thread_name_prefix="model-servers")
        self._next: Future[ServerProcess] | None = None

    def _start(self, path: Path) -> ServerProcess:
        start_ms = str(int(START.timestamp() * 1000))
        return ServerProcess(path, "--test-clock", start_ms, "--durability", "none")

    def take(self) -> ServerProcess:
        upcoming = self._next or self._pool.submit(self._start, self._path())
        self._next = self._pool.submit(self._start, self._path())
        return upcoming.result()

    def _path(self) -> Path:
        self._count += 1
        return self._root / f"model-{self._count}.db"

    def dispose(self, server: ServerProcess) -> None:
        self._pool.submit(server.terminate)

    def close(self) -> None:
        if self._next is not None:
            self._next.result().terminate()
        self._pool.shutdown(wait=True)


class RemoteKind(Kind):
    def __init__(self, servers: Servers) -> None:
        self.servers = servers
        self.server = servers.take()
        self.clock = ServerClock(self.server.url)
        try:
            self.store = memcommit.RemoteStore(self.server.url)
        except BaseException:
            servers.dispose(self.server)
            raise

    def reopen(self) -> Any:
        # A new client: its first read must see the whole log, with no refresh().
        self.store.close()
        self.store = memcommit.RemoteStore(self.server.url)
        return self.store

    def close(self) -> None:
        self.store.close()
        self.servers.dispose(self.server)


class PostgresKind(Kind):
    """A new store in the session's PostgreSQL database per example."""

    def __init__(self, dsn: str) -> None:
        self.url = f"{dsn}?store=model-{uuid.uuid4().hex[:12]}"
        self.clock = ControllableClock(START)
        self.store = memcommit.open(self.url, clock=self.clock)

    def reopen(self) -> Any:
        # A new client: it reads the whole store from the database.
        self.store.close()
        self.store = memcommit.open(self.url, clock=self.clock)
        return self.store


class StoreMachine(RuleBasedStateMachine):
    def __init__(self, kind: Kind) -> None:
        super().__init__()
        self.kind = kind
        self.clock = kind.clock
        self.store = kind.store
        self.model = Model()
        self.generated: list[str] = []

    def teardown(self) -> None:
        self.kind.close()

    # -- helpers ---------------------------------------------------------------------------

    def ids(self) -> list[str]:
        return sorted(set(POOL) | set(self.model.mems))

    def now(self) -> datetime:
        return self.clock.now()

    def tick(self, ms: int) -> None:
        if ms:
            self.clock.advance(ms)

    def put_kwargs(self, draw: Any) -> dict[str, Any]:
        known = sorted(self.model.mems)
        return {
            "text": draw(text_st),
            "kind": draw(st.sampled_from(KINDS)),
            "task": draw(st.sampled_from(TASKS)),
            "tier": draw(st.sampled_from(TIERS)),
            "data": draw(data_st),
            "tags": draw(tags_st),
            "sources": tuple(draw(st.lists(st.sampled_from(known), max_size=2))) if known else (),
        }

    def draw_op(self, draw: Any, state: Model, touched: tuple[str, ...] = ()) -> tuple[Any, ...]:
        """One op valid to *ask* for against ``state`` (it may still be refused).

        ``touched`` holds the ids this commit's earlier ops named: guards aim at them half
        the time, with values taken from the state before or after those ops, so that a
        guard checked against the wrong state is caught.
        """
        ids = sorted(set(POOL) | {k for k in state.mems if not k.startswith(PENDING)})
        choice = draw(st.sampled_from(["put", "stale", "restore", "move", "task", "expect"]))
        if choice == "expect" and touched and draw(st.booleans()):
            mid = draw(st.sampled_from(touched))
        else:
            mid = draw(st.sampled_from(ids))
        if choice == "put":
            return ("put", mid, self.put_kwargs(draw))
        if choice == "stale":
            return ("stale", mid, draw(st.none() | st.just("outdated")))
        if choice == "restore":
            return ("restore", mid)
        if choice == "move":
            return ("move", mid, draw(st.sampled_from(TIERS)))
        if choice == "task":
            return ("finish_task", draw(st.sampled_from(["t1", "t2"])))
        mem = state.mems.get(mid)
        if mem is None:
            return ("expect", mid, "exists", draw(st.booleans()))
        what = draw(st.sampled_from(["exists", "status", "tier", "lsn"]))
        if what == "exists":
            return ("expect", mid, "exists", draw(st.booleans()))
        before = self.model.mems.get(mid)  # the state before this commit
        values = [getattr(mem, what)]
        if before is not None:
            values.append(getattr(before, what))
        if what == "status":
            values.append("active" if mem.status == "stale" else "stale")
        elif what == "tier":
            values.append(draw(st.sampled_from([t for t in TIERS if t != mem.tier])))
        else:
            values.append(mem.lsn + draw(st.sampled_from([-1, 1, 7])))
        return ("expect", mid, what, draw(st.sampled_from(values)))

    def check_rejected(self, err: Rejected, kind: str, mid: str | None) -> None:
        assert isinstance(err.reason, str) and err.reason
        assert err.guard.kind == kind, (err.guard.kind, kind, err.reason)
        if mid is not None:
            assert err.guard.id == mid, (err.guard.id, mid)

    # -- rules -----------------------------------------------------------------------------

    @rule(data=st.data(), ms=st.integers(0, 5_000))
    def single(self, data: Any, ms: int) -> None:
        """One call on the store: a one-record commit."""
        self.tick(ms)
        op = data.draw(st.sampled_from(["put", "put_new", "stale", "restore", "move", "task"]))
        if op == "put_new":
            kw = self.put_kwargs(data.draw)
            new_id = put_drawn(self.store, kw)
            assert isinstance(new_id, str) and new_id
            assert new_id not in self.model.mems
            # Generated ids sort by creation.
            assert all(g < new_id for g in self.generated), (self.generated[-1:], new_id)
            self.generated.append(new_id)
            model_apply(self.model, ("put", new_id, kw), self.now())
            return
        mid = data.draw(st.sampled_from(self.ids()))
        full: tuple[Any, ...]
        if op == "put":
            full = ("put", mid, self.put_kwargs(data.draw))
        elif op == "stale":
            full = ("stale", mid, data.draw(st.none() | st.just("outdated")))
        elif op == "restore":
            full = ("restore", mid)
        elif op == "move":
            full = ("move", mid, data.draw(st.sampled_from(TIERS)))
        else:
            full = ("finish_task", data.draw(st.sampled_from(["t1", "t2"])))
        before = self.model.lsn
        trial = self.model.copy()
        try:
            model_apply(trial, full, self.now())
        except Refused as want:
            try:
                run_op(self.store, full)
            except Rejected as err:
                self.check_rejected(err, want.kind, want.mid)
            else:
                raise AssertionError(f"{full!r} was accepted; the model refuses it ({want.kind})")
            assert self.store.lsn == before
            return
        got = run_op(self.store, full)
        self.model = trial
        if full[0] == "put":
            assert got == full[1]
        else:
            assert got == self.model.lsn  # stale/restore/move/finish_task return the LSN

    @rule(
        data=st.data(),
        ms=st.integers(0, 5_000),
        n=st.integers(0, 6),
        head=st.sampled_from(["none", "right", "wrong"]),
    )
    def commit(self, data: Any, ms: int, n: int, head: str) -> None:
        """A multi-op commit with guards; all or nothing."""
        self.tick(ms)
        trial = self.model.copy()
        ops: list[tuple[Any, ...]] = []
        refused: Refused | None = None
        expect_lsn = None
        if head == "right":
            expect_lsn = self.model.lsn
        elif head == "wrong":
            expect_lsn = self.model.lsn + data.draw(st.sampled_from([-1, 1, 3]))
            if expect_lsn < 0:
                expect_lsn = self.model.lsn + 1
        now = self.now()
        for _ in range(n):
            touched = tuple(dict.fromkeys(o[1] for o in ops if o[0] != "finish_task"))
            op = self.draw_op(data.draw, trial, touched)
            # Generated ids inside a commit: the id comes back from c.put at once.
            gen = op[0] == "put" and data.draw(st.booleans()) and op[1] not in trial.mems
            ops.append(op + (("gen",) if gen else ()))
            if refused is None:
                try:
                    if gen:
                        # The id is not known yet; any fresh id behaves the same in the model.
                        model_apply(trial, ("put", f"{PENDING}{len(ops)}", op[2]), now)
                    else:
                        model_apply(trial, op, now)
                except Refused as r:
                    refused = r
        op_refused = refused
        if expect_lsn is not None and expect_lsn != self.model.lsn:
            refused = Refused("expect_lsn", None)  # the commit-level guard comes first
        before = self.model.lsn
        new_ids: list[str] = []
        try:
            with self.store.commit(expect_lsn=expect_lsn) as c:
                for op in ops:
                    if op[-1] == "gen":
                        kw = op[2]
                        new_id = put_drawn(c, kw)
                        new_ids.append(new_id)
                    else:
                        run_op(c, op)
        except Rejected as err:
            assert refused is not None, f"commit {ops!r} rejected ({err.reason}); model accepts"
            if refused.kind == "expect_lsn" and op_refused is not None:
                # Both the head guard and an op fail: the spec does not order the two checks.
                assert err.guard.kind in ("expect_lsn", op_refused.kind), err.guard.kind
            else:
                self.check_rejected(err, refused.kind, refused.mid)
            assert self.store.lsn == before, "a rejected commit wrote records"
            return
        assert refused is None, f"commit {ops!r} accepted; the model refuses ({refused.kind})"
        # Replay the commit on the real model with the ids the store handed out.
        gen_iter = iter(new_ids)
        for op in ops:
            if op[-1] == "gen":
                new_id = next(gen_iter)
                assert new_id not in self.model.mems
                assert all(g < new_id for g in self.generated)
                self.generated.append(new_id)
                model_apply(self.model, ("put", new_id, op[2]), now)
            else:
                model_apply(self.model, op, now)
        records = self.model.lsn - before
        assert c.lsn == (self.model.lsn if records else None)
        assert self.store.lsn == self.model.lsn

    @rule(data=st.data(), what=st.sampled_from(["status", "tier", "lsn", "exists"]))
    def change_then_guard(self, data: Any, what: str) -> None:
        """A guard right after an op on the same memory in one commit: it sees the op."""
        known = sorted(self.model.mems)
        fresh = data.draw(st.booleans()) or not known
        mid = data.draw(st.sampled_from(POOL)) if fresh else data.draw(st.sampled_from(known))
        if mid in self.model.mems:
            old = self.model.mems[mid]
            change: tuple[Any, ...] = data.draw(
                st.sampled_from(
                    [
                        ("stale", mid, None) if old.status == "active" else ("restore", mid),
                        ("move", mid, "archive" if old.tier != "archive" else "working"),
                        ("put", mid, self.put_kwargs(data.draw)),
                    ]
                )
            )
            before: Any = {"status": old.status, "tier": old.tier, "lsn": old.lsn, "exists": True}
        else:
            change = ("put", mid, self.put_kwargs(data.draw))
            before = {"status": None, "tier": None, "lsn": None, "exists": False}
        trial = self.model.copy()
        model_apply(trial, change, self.now())
        after = trial.mems[mid]
        now_value = {"status": after.status, "tier": after.tier, "lsn": after.lsn, "exists": True}
        choices = [v for v in (now_value[what], before[what]) if v is not None]
        value = data.draw(st.sampled_from(choices))
        guard = ("expect", mid, what, value)
        want_ok = value == now_value[what]
        lsn = self.store.lsn
        try:
            with self.store.commit() as c:
                run_op(c, change)
                run_op(c, guard)
        except Rejected as err:
            assert not want_ok, f"{change[:2]} then {guard}: rejected ({err.reason})"
            self.check_rejected(err, what, mid)
            assert self.store.lsn == lsn
            return
        assert want_ok, f"{change[:2]} then {guard}: accepted, but the guard saw the old state"
        self.model = trial

    @rule(data=st.data(), n=st.integers(0, 4))
    def commit_that_raises(self, data: Any, n: int) -> None:
        """An exception inside the with-block: it propagates and nothing is written."""
        before = self.store.lsn
        ops = [self.draw_op(data.draw, self.model) for _ in range(n)]
        ops = [op for op in ops if op[0] not in ("stale", "restore", "move", "expect")]
        boom = Boom("inside the block")
        try:
            with self.store.commit() as c:
                for op in ops:
                    run_op(c, op)
                raise boom
        except Boom as err:
            assert err is boom
        else:
            raise AssertionError("the exception was swallowed")
        assert self.store.lsn == before

    @rule()
    def empty_commit(self) -> None:
        before = self.store.lsn
        with self.store.commit() as c:
            pass
        assert c.lsn is None
        assert self.store.lsn == before

    @rule()
    def reopen(self) -> None:
        self.store = self.kind.reopen()
        self.check_log()

    # -- checks ----------------------------------------------------------------------------

    def check_memory(self, got: Any, want: M) -> None:
        assert got is not None, f"{want.id!r} missing"
        fields = ("id", "kind", "text", "data", "task", "tier", "status", "tags", "sources")
        fields += ("created_at", "updated_at", "lsn")
        for name in fields:
            assert getattr(got, name) == getattr(want, name), (
                f"{want.id!r}.{name}: store {getattr(got, name)!r}, model {getattr(want, name)!r}"
            )

    def check_log(self) -> None:
        recs = list(self.store.records())
        got = [(r.lsn, r.op, r.key) for r in recs]
        assert got == self.model.log
        for r in recs:
            assert r.at.tzinfo is not None and r.at.utcoffset() == timedelta(0)

    @invariant()
    def agrees_with_model(self) -> None:
        store, model = self.store, self.model
        assert store.lsn == model.lsn
        assert len(store) == len(model.mems)
        ids = [*self.ids(), "zz-unknown"]
        for mid, got in zip(ids, store.get_many(ids), strict=True):
            want = model.mems.get(mid)
            assert (mid in store) == (want is not None), mid
            if want is None:
                assert got is None and store.get(mid) is None
            else:
                self.check_memory(got, want)
                self.check_memory(store.get(mid), want)
                hist = store.history(mid)
                assert [(r.lsn, r.op) for r in hist] == [
                    (lsn, op) for lsn, op, key in model.log if key == mid and op != "task"
                ]
        for task in ("t1", "t2", "t3"):
            assert store.is_task_finished(task) == (task in model.finished)
        ordered = sorted(model.mems.values(), key=lambda m: m.order)

        def want(
            tier: str | None = None,
            kind: str | None = None,
            task: str | None = None,
            status: str | None = "active",
            tags: tuple[str, ...] | None = None,
            limit: int | None = None,
        ) -> list[str]:
            out = [
                m.id
                for m in ordered
                if (tier is None or m.tier == tier)
                and (kind is None or m.kind == kind)
                and (task is None or m.task == task)
                and (status is None or m.status == status)
                and (tags is None or set(tags) <= set(m.tags))
            ]
            return out if limit is None else out[:limit]

        queries: list[dict[str, Any]] = [
            {},
            {"status": None},
            {"status": "stale"},
            {"limit": 2},
            {"status": None, "limit": 0},
            {"tags": ("red",)},
            {"tags": ("red", "blue"), "status": None},
            {"tags": ()},
            {"kind": "fact", "status": None},
            {"task": "t1"},
            {"tier": "archive", "status": None},
            {"tier": "working", "kind": "note", "tags": ("green",)},
        ] + [{"tier": t} for t in TIERS]
        for q in queries:
            got = [m.id for m in store.find(**q)]
            assert got == want(**q), f"find({q}) -> {got}, model {want(**q)}"
        for m in store.find(status=None):
            self.check_memory(m, model.mems[m.id])


# Examples per kind: CI keeps the whole file to a few tens of seconds; MEMCOMMIT_LONG=1
# runs the long setting.
EXAMPLES = (
    {"file": 2_000, "memory": 2_000, "remote": 300, "postgres": 300}
    if LONG
    else {"file": 100, "memory": 50, "remote": 20, "postgres": 20}
)
STEPS = 100 if LONG else 50


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    pool = Servers(tmp_path_factory.mktemp("model-served"))
    yield pool
    pool.close()


@pytest.mark.parametrize("kind", ["file", "memory", "remote", "postgres"])
def test_store_model(kind: str, request: pytest.FixtureRequest) -> None:
    make: Callable[[], Kind]
    if kind == "file":
        make = FileKind
    elif kind == "memory":
        make = MemoryKind
    elif kind == "postgres":
        dsn = request.getfixturevalue("postgres").dsn

        def make() -> Kind:
            return PostgresKind(dsn)

    else:
        pool: Servers = request.getfixturevalue("servers")

        def make() -> Kind:
            return RemoteKind(pool)

    run_state_machine_as_test(
        lambda: StoreMachine(make()),
        settings=settings(
            max_examples=EXAMPLES[kind],
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
