"""Commits of several threads that share one request end as each would have ended alone.

A RemoteStore sends the commits its threads queue while a request is in flight together in
the next one. A request the server refuses as a whole (413: over --max-request-bytes; 400:
one commit it cannot read) must not fail the commits that merely travelled with the culprit.

Each test holds a first request at a proxy so that the others queue behind it and go
together. No test asserts a time: waits are bounded only so that a broken build fails.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import memcommit
import memcommit.remote.pipeline
from holding_proxy import HoldingProxy
from memcommit.testing import ServerProcess
from memcommit.wire import ServerError

LIMIT = 100_000
"""The server's --max-request-bytes in these tests."""

RIDER_BYTES = 30_000
"""The text of a rider: four fit a request alone, not together."""


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    path = tmp_path_factory.mktemp("batches") / "memory.db"
    with ServerProcess(path, "--max-request-bytes", str(LIMIT)) as process:
        yield process


def wait_for(what: Callable[[], bool]) -> None:
    """Wait until `what()` holds (bounded, so a broken build fails instead of hanging)."""
    deadline = time.monotonic() + 30
    while not what():
        assert time.monotonic() < deadline
        time.sleep(0.001)


def nest(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def noting(name: str, outcomes: dict[str, BaseException | None], call: Callable[[], Any]) -> None:
    """Run `call`; note under `name` None (it returned) or what it raised."""
    try:
        call()
        outcomes[name] = None
    except BaseException as e:
        outcomes[name] = e


def together(
    store: memcommit.RemoteStore, proxy: HoldingProxy, calls: dict[str, Callable[[], Any]]
) -> dict[str, BaseException | None]:
    """Make the `calls` in threads of their own while a blocker's request is held, so that
    all of them queue and then leave in one batch; each call's outcome, and the blocker's."""
    outcomes: dict[str, BaseException | None] = {}
    pipeline = store._engine._pipeline
    blocker = threading.Thread(
        target=noting, args=("blocker", outcomes, lambda: store.put("blocker", kind="note"))
    )
    blocker.start()
    wait_for(lambda: len(proxy.held) == 1)
    threads = [threading.Thread(target=noting, args=(n, outcomes, c)) for n, c in calls.items()]
    for t in threads:
        t.start()
    wait_for(lambda: pipeline.queued() == len(calls))  # every one queued, none sent
    proxy.release()
    for t in (blocker, *threads):
        t.join(60)
        assert not t.is_alive()
    return outcomes


def put(store: memcommit.RemoteStore, text: str) -> Callable[[], Any]:
    return lambda: store.put(text, kind="note")


def commit_count(body: bytes) -> int:
    return len(json.loads(body)["commits"])


@pytest.mark.parametrize("ask_first", [False, True], ids=["refused-then-split", "asks-limit"])
def test_commits_that_fit_alone_but_not_together_all_succeed(
    small: ServerProcess, monkeypatch: pytest.MonkeyPatch, ask_first: bool
) -> None:
    if ask_first:  # the client asks the server's limit before sending any batch
        monkeypatch.setattr(memcommit.remote.pipeline, "_ASK_BYTES", 0, raising=False)
    texts = [f"rider {i} " + "x" * RIDER_BYTES for i in range(6)]
    with (
        HoldingProxy(small.url, hold=lambda body: b'"blocker"' in body) as proxy,
        memcommit.RemoteStore(proxy.url) as store,
    ):
        before = store.lsn
        outcomes = together(store, proxy, {text[:7]: put(store, text) for text in texts})
        assert outcomes == dict.fromkeys(["blocker", *(t[:7] for t in texts)])
        stored = {m.text for m in store.find(kind="note", limit=None)}
        assert set(texts) <= stored
        assert store.lsn == before + 1 + len(texts)
        riders = [b for b in proxy.bodies if b"rider" in b]
        # They still shared requests, as many as fit in one.
        assert any(commit_count(b) > 1 for b in riders if len(b) <= LIMIT)
        if ask_first:
            assert all(len(b) <= LIMIT for b in proxy.bodies)
        # Once the limit is known, the next batch is cut to it before it is sent.
        sent = len(proxy.bodies)
        more = [f"again {i} " + "y" * RIDER_BYTES for i in range(6)]
        outcomes = together(store, proxy, {text[:7]: put(store, text) for text in more})
        assert all(e is None for e in outcomes.values()), outcomes
        assert all(len(b) <= LIMIT for b in proxy.bodies[sent:])
        assert set(more) <= {m.text for m in store.find(kind="note", limit=None)}


@pytest.mark.parametrize("bad", ["too-large", "too-deep"])
def test_a_refused_commit_fails_alone_and_its_companions_succeed(
    small: ServerProcess, bad: str
) -> None:
    with memcommit.RemoteStore(small.url) as alone:
        culprit: Callable[[memcommit.RemoteStore], Any] = {
            "too-large": lambda s: s.put("culprit " + "z" * (2 * LIMIT), kind="note"),
            "too-deep": lambda s: s.state.put(("culprit",), "deep", nest(198)),
        }[bad]
        with pytest.raises(ServerError) as solo:
            culprit(alone)
    texts = [f"good {bad} {i}" for i in range(5)]
    with (
        HoldingProxy(small.url, hold=lambda body: b'"blocker"' in body) as proxy,
        memcommit.RemoteStore(proxy.url) as store,
    ):
        before = store.lsn
        calls = {text: put(store, text) for text in texts[:2]}
        calls["culprit"] = lambda: culprit(store)
        calls.update({text: put(store, text) for text in texts[2:]})
        outcomes = together(store, proxy, calls)
        # The culprit left in one request with the good ones.
        assert any(b"culprit" in b and texts[-1].encode() in b for b in proxy.bodies)
        error = outcomes.pop("culprit")
        assert outcomes == dict.fromkeys(["blocker", *texts])
        assert isinstance(error, ServerError)
        assert (error.status, error.code) == (solo.value.status, solo.value.code)
        assert error.status == (413 if bad == "too-large" else 400)
        # Nothing of the culprit was written; every good commit was, once.
        assert store.lsn == before + 1 + len(texts)
        notes = [m.text for m in store.find(kind="note", limit=None)]
        assert not any(t.startswith("culprit") for t in notes)
        assert sorted(t for t in notes if t.startswith(f"good {bad}")) == texts
        assert store.state.get(("culprit",), "deep") is None


def test_a_resend_refused_as_a_whole_is_split_and_applied_once(small: ServerProcess) -> None:
    """The answer to a batch is lost, its resend (same ids, retry_of) is refused as a whole:
    the commits go on in smaller requests, still marked as resends, and each is applied once."""
    lost: list[bytes] = []

    def lose(body: bytes) -> bool:
        if not lost and b"lost " in body and commit_count(body) > 1:
            lost.append(body)
            return True
        return False

    texts = [f"lost {i} " + "w" * RIDER_BYTES for i in range(4)]
    with (
        HoldingProxy(small.url, hold=lambda body: b'"blocker"' in body, lose=lose) as proxy,
        memcommit.RemoteStore(proxy.url) as store,
    ):
        before = store.lsn
        outcomes = together(store, proxy, {text[:6]: put(store, text) for text in texts})
        assert outcomes == dict.fromkeys(["blocker", *(t[:6] for t in texts)])
        assert lost and json.loads(lost[0])["retry_of"] is None
        after = proxy.bodies[proxy.bodies.index(lost[0]) + 1 :]
        assert after and all(json.loads(b)["retry_of"] is not None for b in after)
        assert store.lsn == before + 1 + len(texts)
        notes = [m.text for m in store.find(kind="note", limit=None)]
        assert sorted(t for t in notes if t.startswith("lost ")) == texts
