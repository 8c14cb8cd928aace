"""memcommit serve and RemoteStore, with real server processes on loopback ports.

No test asserts a time: waits are bounded only so that a broken build fails instead of hanging.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memcommit
import memcommit.remote.replica
from holding_proxy import HoldingProxy
from memcommit.server import is_loopback
from memcommit.testing import ServerProcess
from memcommit.wire import CommitOutcomeUnknown, ServerError, ServerUnavailable

TOKEN = "a-test-token-that-is-long-enough"


def raw(
    url: str,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request, without RemoteStore in the way."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.request(method, path, body, headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def commit_body(*commits: dict[str, Any], retry_of: str | None = None) -> bytes:
    return json.dumps({"commits": list(commits), "retry_of": retry_of}).encode()


def put_op(id: str, text: str) -> list[Any]:
    return ["put", id, text, "note", None, "working", None, [], []]


def compact_offline(path: Path) -> None:
    """Compact a served log while its server is stopped, as the README says to."""
    subprocess.run(
        [sys.executable, "-m", "memcommit", "compact", str(path), "--archived-older-than", "0"],
        check=True,
        capture_output=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("served") / "memory.db") as process:
        yield process


@pytest.fixture
def store(server: ServerProcess) -> Iterator[memcommit.RemoteStore]:
    with memcommit.RemoteStore(server.url) as remote:
        yield remote


# -- the store API through the server ---------------------------------------------------------


def test_a_remote_store_is_a_store(store: memcommit.RemoteStore) -> None:
    assert isinstance(store, memcommit.MemoryStore)
    fact = store.put("User prefers dark mode", kind="fact", data={"since": 2024}, tags=("ui",))
    got = store.get(fact)
    assert got is not None
    assert (got.text, got.kind, got.data, got.tags) == (
        "User prefers dark mode",
        "fact",
        {"since": 2024},
        ("ui",),
    )
    assert fact in store and "nope" not in store
    assert store.find(kind="fact", tags=["ui"])[-1].id == fact
    lsn = store.move(fact, "long")
    assert store.get(fact).tier == "long" and store.get(fact).lsn == lsn == store.lsn
    store.stale(fact, "changed their mind")
    store.restore(fact)
    assert [r.op for r in store.history(fact)] == ["put", "move", "status", "status"]
    assert [r.lsn for r in store.records(after=lsn)] == [lsn + 1, lsn + 2]
    store.finish_task("task-1")
    assert store.is_task_finished("task-1")
    assert store.get_many([fact, "nope"])[1] is None
    assert store.read_only is False and store.path is None and store.url.startswith("http://")


def test_a_commit_is_all_or_nothing_with_guards(store: memcommit.RemoteStore) -> None:
    t1 = store.put("trace one", kind="trace", task="t")
    t2 = store.put("trace two", kind="trace", task="t")
    head = store.lsn
    with store.commit(expect_lsn=head) as c:
        summary = c.put("two traces", kind="summary", sources=(t1, t2), tier="mid")
        c.expect(t1, tier="working")
        c.move(t1, "archive")
        c.move(t2, "archive")
    assert (c.first_lsn, c.lsn) == (head + 1, head + 3)
    assert store.get(summary).sources == (t1, t2)
    with pytest.raises(memcommit.Rejected) as refused, store.commit(expect_lsn=head) as c:
        c.put("never written")
    assert refused.value.guard is not None and refused.value.guard.kind == "expect_lsn"
    assert str(head) in refused.value.reason
    with pytest.raises(memcommit.Rejected) as refused, store.commit() as c:
        c.put("not written either")
        c.expect(t2, tier="working")  # it is archived now
    assert refused.value.guard is not None and refused.value.guard.actual == "archive"
    with pytest.raises(RuntimeError, match="boom"), store.commit() as c:
        c.put("dropped with the block")
        raise RuntimeError("boom")
    with pytest.raises(memcommit.Rejected, match="typo-id") as refused:
        store.put("derived from nothing", sources=(t1, "typo-id"))  # the server refuses it
    assert refused.value.guard is not None and refused.value.guard.id == "typo-id"
    assert store.lsn == head + 3


def test_refusals_carry_the_servers_reason(store: memcommit.RemoteStore) -> None:
    with pytest.raises(memcommit.Rejected, match="no memory") as refused:
        store.stale("no-such-memory")
    assert refused.value.guard is not None and refused.value.guard.id == "no-such-memory"
    before = store.lsn
    with pytest.raises(ValueError, match="tier"):
        store.put("x", tier="attic")
    with pytest.raises(TypeError, match="text"):
        store.put(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="data"):
        store.put("x", data={"k": object()})
    with pytest.raises(TypeError, match="tags"):
        store.put("x", tags="one")
    with pytest.raises(ValueError, match="surrogate"):
        store.put("\ud800")
    assert store.lsn == before


def test_a_record_over_the_servers_limit_is_refused_with_its_message(
    store: memcommit.RemoteStore,
) -> None:
    before = store.lsn
    with pytest.raises(ValueError, match="max_record_bytes"):
        store.put("x" * (16 * 1024 * 1024 + 10))
    assert store.lsn == before


def test_seals_are_written_by_the_server_and_verified_by_the_replica(
    store: memcommit.RemoteStore,
) -> None:
    store.put("sealed in")
    plain = memcommit.seal(store)
    keyed = memcommit.seal(store, key=b"the key holder's secret")
    assert (plain.lsn, keyed.lsn) == (plain.record_lsn - 1, plain.record_lsn)
    assert store.lsn == keyed.record_lsn and store.seals()[-2:] == [plain, keyed]
    report = memcommit.verify(store, key=b"the key holder's secret")
    assert report.ok and report.lsn == store.lsn
    with pytest.raises(memcommit.NotSupported, match="AutoSeal"):
        memcommit.AutoSeal(store, every=10)
    with pytest.raises(memcommit.NotSupported, match="snapshot"):
        store.save_snapshot("anywhere.json")


def test_a_remote_commit_used_without_with_refuses_operations(
    store: memcommit.RemoteStore,
) -> None:
    head = store.lsn
    c = store.commit()
    for op in (
        lambda: c.put("never written"),
        lambda: c.put_many(["never", "written"]),
        lambda: c.stale("m1"),
        lambda: c.move("m1", "long"),
        lambda: c.finish_task("t"),
        lambda: c.expect("m1", exists=True),
    ):
        with pytest.raises(RuntimeError, match=r"with store\.commit\(\) as c:"):
            op()
    assert store.lsn == head
    with c:
        mid = c.put("written")
    assert store.get(mid) is not None and c.lsn == store.lsn == head + 1


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (-1, ValueError, r"^expect_lsn: must not be negative, got -1$"),
        (2**64, ValueError, r"^expect_lsn: must be at most 18446744073709551615"),
        ("1", TypeError, r"^expect_lsn must be an int, not str$"),
    ],
)
def test_a_remote_commits_expect_lsn_is_checked_as_a_local_one(
    store: memcommit.RemoteStore, value: Any, error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        store.commit(expect_lsn=value)


def test_put_many_and_ids_made_by_the_client(store: memcommit.RemoteStore) -> None:
    with store.commit() as c:
        ids = c.put_many(["a", "b", "c"], kind=["note", "fact", "note"], task="bulk")
        named = c.put("named", id="my-own-id")
    assert ids == sorted(ids) and named == "my-own-id"
    assert [m.text for m in store.get_many(ids)] == ["a", "b", "c"]  # type: ignore[union-attr]
    assert store.get(ids[1]).kind == "fact"


@pytest.mark.parametrize(
    ("arguments", "error", "names"),
    [
        ({"url": 3}, memcommit.InvalidType, "url"),
        ({"timeout": "a"}, memcommit.InvalidType, "timeout"),
        ({"timeout": 0}, memcommit.InvalidValue, "timeout"),
        ({"timeout": float("nan")}, memcommit.InvalidValue, "timeout"),
        ({"retry_seconds": "a"}, memcommit.InvalidType, "retry_seconds"),
        ({"retry_seconds": -1}, memcommit.InvalidValue, "retry_seconds"),
        ({"follow": "no"}, memcommit.InvalidType, "follow"),
        ({"token": 7}, memcommit.InvalidType, "token"),
        ({"token": "secret\r\nX-Injected: 1"}, memcommit.InvalidValue, "token"),
        ({"token": ""}, memcommit.InvalidValue, "token"),
        ({"ca_file": 5}, memcommit.InvalidType, "ca_file"),
        ({"url": "http://127.0.0.1:99999"}, memcommit.InvalidValue, "url"),
        ({"url": "http://127.0.0.1:port"}, memcommit.InvalidValue, "url"),
        (
            {"url": "https://127.0.0.1:9", "ca_file": "/nonexistent/ca.pem"},
            memcommit.InvalidValue,
            "ca_file /nonexistent/ca.pem: cannot read it",
        ),
        (
            {"url": "https://127.0.0.1:9", "ca_file": __file__},
            memcommit.InvalidValue,
            f"ca_file {__file__}: not a PEM file",
        ),
    ],
)
def test_a_remote_stores_arguments_are_checked_before_it_connects(
    arguments: dict[str, Any], error: type[Exception], names: str
) -> None:
    """Each refused with the argument named, before a request is sent: nothing listens on
    the URL, so a request would fail otherwise (a token with a line break would have put a
    header of its own into every request)."""
    given: dict[str, Any] = {"url": "http://127.0.0.1:9", "retry_seconds": 0.1, **arguments}
    url = given.pop("url")
    with pytest.raises(error) as refused:
        memcommit.RemoteStore(url, **given)
    assert str(refused.value).startswith(names)


def test_bad_reads_name_their_argument(store: memcommit.RemoteStore) -> None:
    with pytest.raises(memcommit.InvalidType, match=r"^wait must be a number of seconds"):
        store.refresh(wait="a")  # type: ignore[arg-type]
    with pytest.raises(memcommit.InvalidValue, match=r"^wait: must be a finite number"):
        store.refresh(wait=-1)
    with pytest.raises(memcommit.InvalidType, match=r"^id must be str, not int"):
        store.is_purged(1)  # type: ignore[arg-type]
    with pytest.raises(memcommit.InvalidType, match=r"^id must be str, not int"):
        memcommit.open(":memory:").is_purged(1)  # type: ignore[arg-type]


def test_other_clients_see_commits_after_refresh(server: ServerProcess) -> None:
    with memcommit.RemoteStore(server.url) as a, memcommit.RemoteStore(server.url) as b:
        b.refresh()
        mid = a.put("from a")
        assert b.get(mid) is None  # b reads its replica: it has not looked yet
        assert b.refresh() == 1
        assert b.get(mid) is not None and b.lsn == a.lsn
        assert b.refresh() == 0


def test_a_refresh_of_a_thousand_commits_is_one_request(
    server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memcommit.remote.pipeline import Pipeline

    with memcommit.RemoteStore(server.url) as writer, memcommit.RemoteStore(server.url) as reader:
        reader.refresh()
        for i in range(1000):
            writer.put(f"commit {i}")
        reads: list[str] = []
        request = Pipeline.request

        def counted(self: Pipeline, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
            if path.startswith("/v1/log"):
                reads.append(path)
            return request(self, method, path, *args, **kwargs)

        monkeypatch.setattr(Pipeline, "request", counted)
        assert reader.refresh() == 1000
        assert len(reads) == 1 and reader.lsn == writer.lsn


def put_noting(store: memcommit.RemoteStore, text: str, outcomes: dict[str, str]) -> None:
    """Put `text`; note in `outcomes` "ok" or the name of what was raised (any BaseException)."""
    try:
        store.put(text, kind="note")
        outcomes[text] = "ok"
    except BaseException as e:  # KeyboardInterrupt included
        outcomes[text] = type(e).__name__


def wait_for(what: Callable[[], bool]) -> None:
    """Wait until `what()` holds (bounded, so a broken build fails instead of hanging)."""
    deadline = time.monotonic() + 30
    while not what():
        assert time.monotonic() < deadline
        time.sleep(0.001)


def test_a_stores_threads_share_one_request_in_flight_by_default(server: ServerProcess) -> None:
    """While one commit's request is in flight, the commits of the store's other threads
    wait, then go together in the next request (max_in_flight=1, the default)."""
    outcomes: dict[str, str] = {}
    with (
        HoldingProxy(server.url, hold=lambda body: b"blocker" in body) as proxy,
        memcommit.RemoteStore(proxy.url) as store,
    ):
        blocker = threading.Thread(target=put_noting, args=(store, "blocker", outcomes))
        blocker.start()
        wait_for(lambda: len(proxy.held) == 1)
        riders = [
            threading.Thread(target=put_noting, args=(store, f"rider {i}", outcomes))
            for i in range(3)
        ]
        for t in riders:
            t.start()
        pipeline = store._engine._pipeline
        wait_for(lambda: pipeline.queued() == 3)  # every rider queued, none sent
        assert len(proxy.bodies) == 1
        proxy.release()
        for t in (blocker, *riders):
            t.join(30)
        assert set(outcomes.values()) == {"ok"} and len(outcomes) == 4
        assert len(proxy.bodies) == 2, "the three riders went in one request"
        assert all(f"rider {i}".encode() in proxy.bodies[1] for i in range(3))
        texts = {m.text for m in store.find(kind="note", limit=None)}
        assert {"blocker", "rider 0", "rider 1", "rider 2"} <= texts


def test_a_close_on_another_thread_is_what_a_waiting_call_reports(server: ServerProcess) -> None:
    """A commit whose request was in flight when another thread closed the RemoteStore was
    told the server closed the connection (CommitOutcomeUnknown "within 10 s"), one still
    queued that nothing was committed because the server cannot be reached, and a long poll
    ServerUnavailable; the server was up. Each now says the store was closed."""
    outcomes: dict[str, BaseException] = {}

    def put(store: memcommit.RemoteStore, text: str) -> None:
        try:
            store.put(text)
        except BaseException as error:  # every outcome is what the test looks at
            outcomes[text] = error

    with HoldingProxy(server.url, hold=lambda body: b"in flight" in body) as proxy:
        store = memcommit.RemoteStore(proxy.url)
        sent = threading.Thread(target=put, args=(store, "in flight"))
        sent.start()
        wait_for(lambda: len(proxy.held) == 1)
        queued = threading.Thread(target=put, args=(store, "queued"))
        queued.start()
        wait_for(lambda: store._engine._pipeline.queued() == 1)
        polled: list[BaseException | None] = []
        poll = threading.Thread(target=lambda: polled.append(_raised(store.refresh, 30)))
        poll.start()
        time.sleep(0.2)
        store.close()
        for t in (sent, queued, poll):
            t.join(30)
        proxy.release()
    unknown = outcomes["in flight"]
    assert isinstance(unknown, CommitOutcomeUnknown)
    assert "was closed while 1 commit(s) were in flight" in str(unknown)
    assert isinstance(outcomes["queued"], memcommit.StoreClosed), outcomes
    assert "nothing was committed" in str(outcomes["queued"])
    assert len(polled) == 1 and isinstance(polled[0], memcommit.StoreClosed), polled


def _raised(call: Callable[..., object], *args: object) -> BaseException | None:
    try:
        call(*args)
    except BaseException as error:  # the outcome is what the caller looks at
        return error
    return None


class _Stop(Exception):
    """What a test's signal handler raises."""


def test_ctrl_c_in_a_leading_thread_is_that_threads_alone(server: ServerProcess) -> None:
    """The thread whose request carries other threads' commits is interrupted (Ctrl-C) while
    it waits for the answer: it raises KeyboardInterrupt; the others learn their commits'
    outcome is unknown, and the store goes on."""

    def hold(body: bytes) -> bool:
        return b"blocker" in body or body.count(b"rider") >= 2

    def ctrl_c(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    outcomes: dict[str, str] = {}
    with (
        HoldingProxy(server.url, hold=hold) as proxy,
        memcommit.RemoteStore(proxy.url, max_in_flight=1) as store,
    ):
        pipeline = store._engine._pipeline
        blocker = threading.Thread(target=put_noting, args=(store, "blocker", outcomes))
        rider = threading.Thread(target=put_noting, args=(store, "rider 2", outcomes))

        def conduct() -> None:
            """This (main) thread queues first, so it leads the next request; then the rider."""
            wait_for(lambda: pipeline.queued() == 1)
            rider.start()
            wait_for(lambda: pipeline.queued() == 2)
            proxy.release()  # the blocker's answer: the lead passes to this thread
            wait_for(lambda: len(proxy.held) == 1)  # its request, with both riders, is held
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGALRM)

        blocker.start()
        wait_for(lambda: len(proxy.held) == 1)
        conductor = threading.Thread(target=conduct)
        previous = signal.signal(signal.SIGALRM, ctrl_c)
        try:
            conductor.start()
            put_noting(store, "rider 1", outcomes)
        finally:
            signal.signal(signal.SIGALRM, previous)
            proxy.release()
        for t in (conductor, blocker, rider):
            t.join(30)
        assert outcomes == {
            "blocker": "ok",
            "rider 1": "KeyboardInterrupt",
            "rider 2": "CommitOutcomeUnknown",
        }
        store.put("after", kind="note")  # the pipeline was not left without a leader
        assert [m.text for m in store.find(kind="note", limit=None)][-1] == "after"


def test_ctrl_c_while_a_thread_waits_its_turn_takes_its_commit_back(
    server: ServerProcess,
) -> None:
    """A thread queued behind another's request that a signal handler interrupts (Ctrl-C)
    raises; its commit is never sent, and the commits queued after it still go."""
    outcomes: dict[str, str] = {}
    with (
        HoldingProxy(server.url, hold=lambda body: b"blocker" in body) as proxy,
        memcommit.RemoteStore(proxy.url, max_in_flight=1) as store,
    ):
        pipeline = store._engine._pipeline
        late = threading.Thread(target=put_noting, args=(store, "late", outcomes))

        def stop(signum: int, frame: object) -> None:
            if pipeline.queued() < 2:  # not yet this thread queued and "late" behind it
                if pipeline.queued() == 1 and not late.is_alive():
                    late.start()
                signal.setitimer(signal.ITIMER_REAL, 0.05)
                return
            raise _Stop

        blocker = threading.Thread(target=put_noting, args=(store, "blocker", outcomes))
        blocker.start()
        wait_for(lambda: len(proxy.held) == 1)  # the blocker's request is in flight
        previous = signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        try:
            with pytest.raises(_Stop):
                store.put("interrupted", kind="note")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            proxy.release()
        for t in (blocker, late):
            t.join(30)
        assert outcomes == {"blocker": "ok", "late": "ok"}
        texts = [m.text for m in store.find(kind="note", limit=None)]
        assert "late" in texts and "interrupted" not in texts
        assert not any(b"interrupted" in body for body in proxy.bodies)


def test_a_long_poll_hears_of_a_commit(server: ServerProcess) -> None:
    with memcommit.RemoteStore(server.url) as writer, memcommit.RemoteStore(server.url) as reader:
        reader.refresh()
        got: list[int] = []
        waiting = threading.Thread(target=lambda: got.append(reader.refresh(wait=30)))
        waiting.start()
        mid = writer.put("wake up")
        waiting.join(60)
        assert got and got[0] >= 1
        assert reader.get(mid) is not None


def test_a_follower_keeps_its_replica_current(server: ServerProcess) -> None:
    with memcommit.RemoteStore(server.url, follow=True) as follower:
        with memcommit.RemoteStore(server.url) as writer:
            mid = writer.put("followed")
        deadline = time.monotonic() + 30
        while follower.get(mid) is None:
            assert time.monotonic() < deadline, "the follower never got the commit"
            time.sleep(0.01)


def test_tiers_and_lineage_work_through_a_remote_store(store: memcommit.RemoteStore) -> None:
    from memcommit.tiers import compact_memory

    task = f"fold-{time.time_ns()}"
    traces = [store.put(f"step {i}", kind="trace", task=task) for i in range(3)]
    store.finish_task(task)
    report = compact_memory(store)
    folded = [m for m in store.get_many(report.created) if m and set(m.sources) == set(traces)]
    assert len(folded) == 1
    assert {m.id for m in store.lineage(folded[0].id)} >= set(traces)
    assert all(store.get(t).tier == "archive" for t in traces)


def test_threads_share_one_remote_store_and_their_commits_group(
    server: ServerProcess, store: memcommit.RemoteStore
) -> None:
    ids: list[str] = []
    guard = threading.Lock()

    def work(n: int) -> None:
        for i in range(25):
            mid = store.put(f"thread {n} memory {i}")
            with guard:
                ids.append(mid)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 200
    assert all(m is not None for m in store.get_many(ids))


def test_one_request_of_many_commits_shares_fsyncs(server: ServerProcess) -> None:
    def fsyncs() -> int:
        _, _, text = raw(server.url, "GET", "/v1/metrics")
        line = next(x for x in text.decode().splitlines() if x.startswith("memcommit_fsyncs_total"))
        return int(float(line.split()[1]))

    before = fsyncs()
    commits = [
        {"id": f"group-{time.time_ns()}-{i}", "ops": [put_op(f"g{i}-{time.time_ns()}", "x")]}
        for i in range(200)
    ]
    status, _, body = raw(server.url, "POST", "/v1/commit", commit_body(*commits))
    assert status == 200
    results = json.loads(body)["results"]
    assert all(r["ok"] for r in results) and len({r["lsn"] for r in results}) == 200
    assert fsyncs() - before < 200  # a count, not a time: concurrent commits share an fsync


# -- the protocol ------------------------------------------------------------------------------


def test_health_info_and_metrics(server: ServerProcess) -> None:
    status, headers, body = raw(server.url, "GET", "/v1/health")
    assert (status, json.loads(body)) == (200, {"status": "ok"})
    status, headers, body = raw(server.url, "GET", "/v1/info")
    info = json.loads(body)
    assert status == 200 and info["protocol"] == 1 and info["durability"] == "commit"
    assert (
        headers["x-memcommit-store"] == info["store_id"]
        and headers["x-memcommit-boot"] == info["boot"]
    )
    status, headers, body = raw(server.url, "GET", "/v1/metrics")
    text = body.decode()
    assert status == 200 and headers["content-type"].startswith("text/plain")
    for name in ("memcommit_up 1", "memcommit_commits_total{", "memcommit_commit_seconds_bucket{"):
        assert name in text


def test_a_remote_stores_info_gives_the_servers_durability_not_the_replicas(
    store: memcommit.RemoteStore,
) -> None:
    store.put("so the server has fsynced")
    info = store.info()
    assert info["durability"] == "commit"  # the server's mode; the replica in RAM has none
    assert "fsyncs" not in info  # the server's are in its /v1/metrics


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not JSON"),
        (b"[]", '"commits" list'),
        (json.dumps({"commits": [{"ops": []}]}).encode(), ".id"),
        (json.dumps({"commits": [{"id": "x", "ops": [["drop_table"]]}]}).encode(), "one of"),
        (json.dumps({"commits": [{"id": "x", "ops": [["put", "a"]]}]}).encode(), "takes 8 values"),
        (
            json.dumps({"commits": [{"id": "x", "role": "shell", "method": "run"}]}).encode(),
            "not a role",
        ),
        (
            json.dumps({"commits": [{"id": "x", "role": "locks", "method": "_medium"}]}).encode(),
            "not a method",
        ),
        (
            json.dumps(
                {
                    "commits": [
                        {
                            "id": "x",
                            "role": "locks",
                            "method": "get",
                            "args": [{"$t": "dc", "c": "os.system", "v": {}}],
                        }
                    ]
                }
            ).encode(),
            "not a type the wire carries",
        ),
        (
            json.dumps({"commits": [{"id": "x", "ops": [], "expect_lsn": "3"}]}).encode(),
            "expect_lsn",
        ),
        (
            json.dumps({"commits": [{"id": "x", "ops": []}, {"id": "x", "ops": []}]}).encode(),
            "twice",
        ),
    ],
)
def test_a_malformed_request_gets_400_and_changes_nothing(
    server: ServerProcess, body: bytes, message: str
) -> None:
    _, headers, _ = raw(server.url, "GET", "/v1/info")
    head = headers["x-memcommit-lsn"]
    status, headers, answer = raw(server.url, "POST", "/v1/commit", body)
    assert status == 400, answer
    assert message in json.loads(answer)["error"]["message"]
    assert headers["x-memcommit-lsn"] == head


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


NESTED_BODIES = {
    "/v1/commit": [
        "{inner}",
        '{{"commits": {inner}}}',
        '{{"commits": [{inner}]}}',
        '{{"commits": [{{"id": {inner}, "ops": []}}]}}',
        '{{"commits": [{{"id": "n", "ops": {inner}}}]}}',
        '{{"commits": [{{"id": "n", "ops": [{inner}]}}]}}',
        '{{"commits": [{{"id": "n", "ops": [["put", "a", {inner}, "note", null, "working", '
        "null, [], []]]}}]}}",
        '{{"commits": [{{"id": "n", "ops": [], "expect_lsn": {inner}}}]}}',
        '{{"commits": [{{"id": "n", "role": {inner}, "method": "get"}}]}}',
        '{{"commits": [{{"id": "n", "role": "locks", "method": {inner}}}]}}',
        '{{"commits": [{{"id": "n", "role": "state", "method": "put", '
        '"args": [["a"], "k", {inner}]}}]}}',
        '{{"commits": [{{"id": "n", "role": "state", "method": "put", "args": [["a"], "k"], '
        '"kwargs": {{"value": {inner}}}}}]}}',
        '{{"commits": [{{"id": "n", "seal": true, "key": {inner}}}]}}',
        '{{"commits": [], "retry_of": {inner}}}',
    ],
    "/v1/flush": ["{inner}", '{{"x": {inner}}}'],
    "/v1/test/clock": ["{inner}", '{{"now_us": {inner}}}'],
}
NESTED_CASES = [
    (path, template, depth)
    for path, templates in NESTED_BODIES.items()
    for template in templates
    for depth in (memcommit.wire.MAX_DEPTH + 1, 100_000)
]


@pytest.fixture(scope="module")
def clock_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("clocked") / "memory.db", "--test-clock") as p:
        yield p


def test_the_test_clock_answers_the_time_it_is_never_one_it_did_not_set(
    clock_server: ServerProcess,
) -> None:
    now = json.loads(raw(clock_server.url, "GET", "/v1/test/clock")[2])["now_us"]
    back = json.dumps({"now_us": now - 10_000_000}).encode()
    status, _, answer = raw(clock_server.url, "POST", "/v1/test/clock", back)
    assert status == 200 and json.loads(answer)["now_us"] == now  # never moved back
    ahead = json.dumps({"now_us": now + 5_000_000}).encode()
    status, _, answer = raw(clock_server.url, "POST", "/v1/test/clock", ahead)
    assert status == 200 and json.loads(answer)["now_us"] == now + 5_000_000
    current = json.loads(raw(clock_server.url, "GET", "/v1/test/clock")[2])["now_us"]
    assert current == now + 5_000_000


@pytest.mark.parametrize(("path", "template", "depth"), NESTED_CASES)
def test_a_deeply_nested_body_gets_400_and_changes_nothing(
    clock_server: ServerProcess, path: str, template: str, depth: int
) -> None:
    before = json.loads(raw(clock_server.url, "GET", "/v1/info")[2])
    clock = raw(clock_server.url, "GET", "/v1/test/clock")[2]
    body = template.format(inner=nested(depth)).encode()
    status, headers, answer = raw(clock_server.url, "POST", path, body)
    assert status == 400, answer
    error = json.loads(answer)["error"]
    assert error["code"] == "bad_request"
    assert f"nested more than {memcommit.wire.MAX_DEPTH} levels" in error["message"]
    assert json.loads(raw(clock_server.url, "GET", "/v1/info")[2]) == before
    assert headers["x-memcommit-lsn"] == str(before["lsn"])
    assert raw(clock_server.url, "GET", "/v1/test/clock")[2] == clock
    assert not any("Traceback" in line or "RecursionError" in line for line in clock_server.output)


@pytest.mark.parametrize(
    "body",
    [
        {"commits": [{"id": "u1", "ops": [[["put"]]]}]},
        {"commits": [{"id": "u2", "ops": [[{"put": 1}]]}]},
        {"commits": [{"id": "u3", "role": ["locks"], "method": "get"}]},
        {"commits": [{"id": "u4", "role": {"a": 1}, "method": "get"}]},
        {"commits": [{"id": "u5", "role": "locks", "method": ["get"]}]},
    ],
)
def test_an_unhashable_name_gets_400_and_changes_nothing(
    clock_server: ServerProcess, body: dict[str, Any]
) -> None:
    before = json.loads(raw(clock_server.url, "GET", "/v1/info")[2])
    status, _, answer = raw(clock_server.url, "POST", "/v1/commit", json.dumps(body).encode())
    assert status == 400, answer
    assert json.loads(raw(clock_server.url, "GET", "/v1/info")[2]) == before
    assert not any("Traceback" in line for line in clock_server.output)


def test_a_flush_body_must_be_empty_or_an_object(server: ServerProcess) -> None:
    assert raw(server.url, "POST", "/v1/flush")[0] == 200
    assert raw(server.url, "POST", "/v1/flush", b"{}")[0] == 200
    for body in (b"[]", b"not json", b"3"):
        status, _, answer = raw(server.url, "POST", "/v1/flush", body)
        assert status == 400, answer


def test_values_nest_up_to_the_wire_limit_through_a_remote_store(
    store: memcommit.RemoteStore,
) -> None:
    def value(depth: int) -> Any:
        out: Any = "leaf"
        for _ in range(depth):
            out = [out]
        return out

    ns = ("deep", str(time.monotonic_ns()))
    fits = value(memcommit.wire.MAX_DEPTH - 10)
    assert store.state.put(ns, "fits", fits).value == fits
    assert store.state.get(ns, "fits").value == fits
    head = store.lsn
    with pytest.raises(ServerError) as caught:
        store.state.put(ns, "too-deep", value(memcommit.wire.MAX_DEPTH))
    assert caught.value.status == 400 and "nested more than" in str(caught.value)
    assert store.refresh() == 0 and store.lsn == head
    assert store.state.get(ns, "too-deep") is None
    # Data travels as JSON text: it nests as deep as a local store allows.
    deep_data = {"d": value(500)}
    mid = store.put("deep data", data=deep_data)
    assert store.get(mid).data == deep_data


def chunked(url: str, path: str, chunks: list[bytes]) -> tuple[int, bytes]:
    """A POST whose body travels chunked, with no Content-Length to check up front."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        conn.request("POST", path, iter(chunks), encode_chunked=True)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_a_chunked_commit_is_read_whole_and_held_to_the_limit(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "small.db", "--max-request-bytes", "1000") as small:
        body = commit_body({"id": "c1", "ops": [put_op("m1", "in chunks")]})
        status, answer = chunked(small.url, "/v1/commit", [body[:7], body[7:20], body[20:]])
        assert status == 200, answer
        assert json.loads(answer)["results"][0]["ok"]
        status, answer = chunked(small.url, "/v1/commit", [b"{" + b" " * 600, b" " * 600 + b"}"])
        assert status == 413 and "1000" in json.loads(answer)["error"]["message"]
        assert raw(small.url, "GET", "/v1/commit")[0] == 405
        with memcommit.RemoteStore(small.url) as remote:
            assert remote.get("m1").text == "in chunks"
            assert remote.lsn == 1


@pytest.mark.parametrize("route", ["/v1/commit", "/v1/flush", "/v1/test/clock"])
def test_a_client_gone_before_its_body_is_whole_changes_nothing(tmp_path: Path, route: str) -> None:
    with ServerProcess(tmp_path / "cut.db", "--test-clock") as served:
        body = {
            "/v1/commit": commit_body({"id": "cut", "ops": [put_op("m1", "never whole")]}),
            "/v1/flush": b"{}" + b" " * 64,
            "/v1/test/clock": b'{"now_us": 4102444800000000}',
        }[route]
        with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
            sock.sendall(
                f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n".encode()
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body[: len(body) // 2]
            )
        with memcommit.RemoteStore(served.url) as remote:  # the server answers on
            assert remote.lsn == 0 and remote.get("m1") is None
            remote.put("after", kind="note")
            assert remote.lsn == 1
            # The clock did not move to 2100: the half-sent time was never applied.
            status, _, answer = raw(served.url, "GET", "/v1/test/clock")
            assert status == 200 and json.loads(answer)["now_us"] < 4102444800000000
        assert not any("Traceback" in line for line in served.output)


def test_limits_on_request_size(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "small.db", "--max-request-bytes", "1000") as small:
        status, _, answer = raw(small.url, "POST", "/v1/commit", b"{" + b" " * 2000 + b"}")
        assert status == 413 and "1000" in json.loads(answer)["error"]["message"]
        with memcommit.RemoteStore(small.url) as remote:
            with pytest.raises(ServerError) as caught:
                remote.put("y" * 5000)
            assert caught.value.status == 413
            assert remote.lsn == 0


def test_the_log_endpoint_serves_raw_commits_and_asks_strangers_to_resync(
    server: ServerProcess, store: memcommit.RemoteStore
) -> None:
    store.put("for the log")
    ident = f"store={store.store_id}&generation={store.generation}"
    status, headers, body = raw(server.url, "GET", f"/v1/log?after=0&{ident}")
    assert status == 200 and headers["content-type"] == "application/octet-stream"
    replica = memcommit._native.NativeLog.replica(
        raw(server.url, "GET", "/v1/snapshot?max_bytes=1")[2][:64]
    )
    assert replica.apply_raw(body) == int(headers["x-memcommit-last"])
    status, _, answer = raw(server.url, "GET", f"/v1/log?after=0&store={'0' * 32}&generation=0")
    assert status == 409 and json.loads(answer)["error"]["code"] == "resync"
    status, _, answer = raw(server.url, "GET", f"/v1/log?after=999999999&{ident}")
    assert status == 409
    status, _, answer = raw(server.url, "GET", "/v1/log?after=-1")
    assert status == 400


def test_the_test_clock_endpoint_exists_only_with_the_flag(server: ServerProcess) -> None:
    status, _, _ = raw(server.url, "POST", "/v1/test/clock", b'{"now_us": 1}')
    assert status == 404


# -- resends: a lost answer is not a second commit --------------------------------------------


def test_a_resent_commit_is_answered_not_applied_again(
    server: ServerProcess, store: memcommit.RemoteStore
) -> None:
    mid = f"resent-{time.time_ns()}"
    body = commit_body({"id": f"c-{mid}", "ops": [put_op(mid, "once")]})
    status, headers, first = raw(server.url, "POST", "/v1/commit", body)
    boot = headers["x-memcommit-boot"]
    again = commit_body({"id": f"c-{mid}", "ops": [put_op(mid, "once")]}, retry_of=boot)
    status2, _, second = raw(server.url, "POST", "/v1/commit", again)
    assert (status, status2) == (200, 200)
    assert json.loads(first) == json.loads(second)
    store.refresh()  # the commits went around the store: it must look
    assert len(store.history(mid)) == 1


def test_a_resend_from_before_a_restart_is_not_guessed(
    server: ServerProcess, store: memcommit.RemoteStore
) -> None:
    mid = f"unknown-{time.time_ns()}"
    body = commit_body(
        {"id": f"c-{mid}", "ops": [put_op(mid, "maybe")]}, retry_of="an-earlier-boot"
    )
    status, _, answer = raw(server.url, "POST", "/v1/commit", body)
    result = json.loads(answer)["results"][0]
    assert status == 200 and result["ok"] is False
    assert result["error"]["class"] == "CommitOutcomeUnknown"
    store.refresh()
    assert store.get(mid) is None


def test_a_remote_store_resends_through_a_dropped_connection(server: ServerProcess) -> None:
    """The first attempt's answer is lost (the connection drops after the request went out):
    the commit is resent, naming the server start it may have reached, and applied once."""
    lost: list[bytes] = []

    def lose(body: bytes) -> bool:
        if lost:
            return False
        lost.append(body)
        return True

    with (
        HoldingProxy(server.url, lose=lose) as proxy,
        memcommit.RemoteStore(proxy.url) as store,
    ):
        mid = store.put("sent twice, written once", id=f"flaky-{time.time_ns()}")
        assert len(lost) == 1 and len(proxy.bodies) == 2
        first, resent = (json.loads(body) for body in proxy.bodies)
        assert first["commits"] == resent["commits"]
        assert first["retry_of"] is None and resent["retry_of"] == store.info()["server_boot"]
        assert len(store.history(mid)) == 1


# -- security --------------------------------------------------------------------------------


def test_only_loopback_without_a_token(tmp_path: Path) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "memcommit",
            "serve",
            str(tmp_path / "x.db"),
            "--host",
            "0.0.0.0",
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "needs a token" in done.stderr and not (tmp_path / "x.db").exists()


def test_a_token_is_required_and_checked(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with ServerProcess(
        tmp_path / "t.db", "--host", "0.0.0.0", "--token-file", str(token_file)
    ) as guarded:
        url = guarded.url.replace("0.0.0.0", "127.0.0.1")
        assert raw(url, "GET", "/v1/health")[0] == 200  # probes need no token
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
            status, answer_headers, _ = raw(url, "GET", "/v1/info", headers=headers)
            assert status == 401 and answer_headers["www-authenticate"].startswith("Bearer")
        status, _, _ = raw(
            url, "POST", "/v1/commit", commit_body({"id": "x", "ops": [put_op("x", "x")]})
        )
        assert status == 401
        with pytest.raises(ServerError) as refused:
            memcommit.RemoteStore(url, token="wrong-token-but-long-enough")
        assert refused.value.status == 401
        assert "the token sent is not the server's" in str(refused.value)
        with pytest.raises(ServerError) as refused:
            memcommit.RemoteStore(url)
        assert refused.value.status == 401
        assert "no token was sent" in str(refused.value) and "token=" in str(refused.value)
        with memcommit.RemoteStore(url, token=TOKEN) as remote:
            assert remote.get(remote.put("with the token")) is not None
            assert "x" not in remote


def test_a_tls_file_that_cannot_be_read_or_loaded_is_refused_by_name(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    for cert, key, named in (
        (tmp_path / "missing.pem", junk, "--tls-cert"),
        (junk, tmp_path, "--tls-key"),
        (junk, junk, "not a PEM certificate chain"),
    ):
        serve = [sys.executable, "-m", "memcommit", "serve", str(tmp_path / "tls.db")]
        done = subprocess.run(
            [*serve, "--port", "0", "--tls-cert", str(cert), "--tls-key", str(key)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert named in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.pem"], "no store was made"


def test_tls(tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    with ServerProcess(
        tmp_path / "tls.db", "--tls-cert", str(cert), "--tls-key", str(key)
    ) as secure:
        assert secure.url.startswith("https://")
        with memcommit.RemoteStore(secure.url, ca_file=str(cert)) as remote:
            assert remote.get(remote.put("over TLS")).text == "over TLS"  # type: ignore[union-attr]
        with pytest.raises(ServerUnavailable):
            memcommit.RemoteStore(secure.url, retry_seconds=0.1)  # the system CAs do not trust it
        # A client's idle keep-alive TLS connection never answers a TLS close: SIGTERM does
        # not wait for it (the TLS close's own limit is 30 s).
        idle = memcommit.RemoteStore(secure.url, ca_file=str(cert))
        try:
            idle.put("then idle")
            assert secure.terminate(timeout=15) == -signal.SIGTERM
        finally:
            idle.close()


# -- life: restarts, SIGTERM, kill -9 ----------------------------------------------------------


def test_a_second_server_on_the_same_log_is_refused(server: ServerProcess) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memcommit", "serve", server.path, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "StoreLocked" in done.stderr


def test_sigterm_finishes_commits_in_flight_then_exits(tmp_path: Path) -> None:
    path = tmp_path / "term.db"
    process = ServerProcess(path)
    acked: list[str] = []
    failures: list[BaseException] = []
    started = threading.Barrier(5)

    def client(n: int) -> None:
        with memcommit.RemoteStore(process.url, retry_seconds=0.2) as remote:
            started.wait()
            for i in range(10_000):
                try:
                    acked.append(remote.put(f"client {n} commit {i}", id=f"c{n}-{i}"))
                except ServerError as e:
                    failures.append(e)
                    return

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    started.wait()
    while len(acked) < 200:
        time.sleep(0.01)
    code = process.terminate()
    for t in threads:
        t.join(60)
    assert code in (0, -15)
    assert any("stopped" in line for line in process.output)
    assert len(failures) == 4  # every client ended on the server going away
    with memcommit.open(path) as local:
        assert all(local.get(mid) is not None for mid in acked)
        assert local.recovered_bytes == 0  # a clean stop: nothing torn


def test_kill_9_loses_no_acknowledged_commit(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    process = ServerProcess(path)
    acked: list[str] = []
    unknown: list[str] = []
    stop = threading.Event()

    def client() -> None:
        with memcommit.RemoteStore(process.url, retry_seconds=0.2) as remote:
            i = 0
            while not stop.is_set():
                mid = f"m-{i}"
                try:
                    remote.put(f"commit {i}", id=mid)
                    acked.append(mid)
                except (CommitOutcomeUnknown, ServerUnavailable):
                    unknown.append(mid)
                    return
                i += 1

    threads = [threading.Thread(target=client) for _ in range(1)]
    for t in threads:
        t.start()
    while len(acked) < 300:
        time.sleep(0.005)
    process.kill()
    stop.set()
    for t in threads:
        t.join(60)
    restarted = ServerProcess(path, port=process.port)
    try:
        with memcommit.RemoteStore(restarted.url) as remote:
            remote.refresh()
            for mid in acked:
                history = remote.history(mid)
                assert len(history) == 1, mid  # present, and written once
            # The commit in flight at the kill may or may not be there; nothing else is.
            assert len(remote) in (len(acked), len(acked) + len(unknown))
    finally:
        restarted.terminate()


def test_a_client_resyncs_when_the_log_is_compacted_or_replaced(tmp_path: Path) -> None:
    path = tmp_path / "gen.db"
    process = ServerProcess(path)
    port = process.port
    try:
        with memcommit.RemoteStore(process.url, retry_seconds=20) as remote:
            keep = remote.put("kept")
            gone = remote.put("archived long ago")
            remote.move(gone, "archive")
            for _ in range(5):
                remote.stale(keep)
                remote.restore(keep)
            generation = remote.generation
            assert len(remote.history(keep)) == 11
            process.terminate()
            compact_offline(path)
            process = ServerProcess(path, port=port)
            remote.refresh()
            assert remote.generation == generation + 1
            assert len(remote.history(keep)) < 11  # the replica holds the compacted log
            assert remote.get(keep) is not None and remote.get(keep).status == "active"
            # The purge travels too: the replica knows the manifest's purged ids.
            with pytest.raises(memcommit.Purged):
                remote.get(gone)
            assert remote.is_purged(gone) and gone in remote.manifest()[0]["purged"]
            with pytest.raises(memcommit.Rejected, match="purged"):
                remote.move(gone, "long")
            after = remote.put("after the compaction")
            assert remote.get(after) is not None
            # Another store's log at the same address: the replica starts over. (The old
            # log's companion files go with it: a manifest of another store is refused.)
            process.terminate()
            for old in tmp_path.glob("gen.db*"):
                os.remove(old)
            process = ServerProcess(path, port=port)
            remote.refresh()
            assert remote.get(keep) is None and len(remote) == 0
    finally:
        process.terminate()


def test_reads_on_other_threads_go_on_while_a_following_client_resyncs(tmp_path: Path) -> None:
    """README: a served log is compacted offline and clients resync; a store is safe to share
    between threads. The resync closed the old replica under the reads other threads were
    making on it, which raised StoreClosed on a RemoteStore nobody closed."""
    path = tmp_path / "gen.db"
    process = ServerProcess(path)
    port = process.port
    errors: list[str] = []
    stop = threading.Event()
    try:
        with memcommit.RemoteStore(process.url, retry_seconds=20, follow=True) as remote:
            first = remote.put("first")
            with remote.commit() as c:
                c.put_many([f"filler {i}" for i in range(2000)])

            def read() -> None:
                while not stop.is_set():
                    try:
                        assert remote.get(first) is not None
                        remote.find(limit=500)
                    except Exception as error:  # every error is the finding
                        errors.append(f"{type(error).__name__}: {error}")

            threads = [threading.Thread(target=read) for _ in range(3)]
            for t in threads:
                t.start()
            try:
                for generation in (1, 2, 3):
                    process.terminate()
                    compact_offline(path)
                    process = ServerProcess(path, port=port)
                    deadline = time.monotonic() + 20
                    while remote.generation < generation and time.monotonic() < deadline:
                        time.sleep(0.05)
                    time.sleep(0.3)  # reads on the new replica too
            finally:
                stop.set()
                for t in threads:
                    t.join(30)
            assert errors == []
            assert remote.generation == 3 and not remote.closed
    finally:
        process.terminate()


def requests_served(url: str, path: str) -> int:
    """How many requests for `path` the server has answered (its own metrics)."""
    text = raw(url, "GET", "/v1/metrics")[2].decode()
    prefix = f'memcommit_http_requests_total{{path="{path}",'
    return sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


@pytest.mark.parametrize("page_bytes", [None, 300])
def test_a_new_client_sees_everything_committed_before_it_connected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, page_bytes: int | None
) -> None:
    if page_bytes is not None:  # small pages: the catch-up takes many requests
        monkeypatch.setattr(memcommit.remote.replica, "_READ_BYTES", page_bytes)
    with ServerProcess(tmp_path / "full.db") as process:
        with memcommit.RemoteStore(process.url) as writer:
            ids = [writer.put(f"memory {i}", kind="fact", task="t") for i in range(100)]
            for mid in ids[::3]:
                writer.move(mid, "long")
            for mid in ids[1::7]:
                writer.stale(mid, "outdated")
            writer.finish_task("t")
            head = writer.lsn
            want = {m.id: (m.tier, m.status, m.lsn) for m in writer.get_many(ids) if m}
        with memcommit.RemoteStore(process.url) as reader:
            assert reader.lsn == head
            assert len(reader) == 100 and all(mid in reader for mid in ids)
            got = {m.id: (m.tier, m.status, m.lsn) for m in reader.get_many(ids) if m}
            assert got == want
            assert reader.is_task_finished("t")
            assert [r.lsn for r in reader.records()] == list(range(1, head + 1))


def test_a_read_after_an_offline_compaction_rebuilds_the_replica(tmp_path: Path) -> None:
    """No refresh(): the read itself notices the server's new generation."""
    path = tmp_path / "offline.db"
    process = ServerProcess(path)
    try:
        with memcommit.RemoteStore(process.url, retry_seconds=20) as remote:
            keep = remote.put("kept")
            gone = remote.put("archived long ago")
            remote.move(gone, "archive")
            assert remote.get(gone) is not None and remote.generation == 0
            port = process.port
            process.terminate()
            compact_offline(path)
            process = ServerProcess(path, port=port)
            with pytest.raises(memcommit.Purged):
                remote.get(gone)
            assert remote.generation == 1 and remote.is_purged(gone)
            assert gone not in remote and len(remote) == 1
            assert [m.id for m in remote.find(status=None)] == [keep]
            assert [m.id for m in remote.find(tier="archive", status=None)] == []
    finally:
        process.terminate()


def test_reads_are_local_while_the_server_runs_and_served_while_it_is_away(
    tmp_path: Path,
) -> None:
    process = ServerProcess(tmp_path / "local.db")
    try:
        with memcommit.RemoteStore(process.url, retry_seconds=1) as remote:
            mid = remote.put("read me")
            asked = requests_served(process.url, "/v1/info")
            for _ in range(20):
                assert remote.get(mid) is not None and len(remote) == 1
            # Reads asked the server nothing: the open connection vouches for the replica.
            assert requests_served(process.url, "/v1/info") == asked
            process.terminate()
            assert remote.get(mid) is not None and remote.lsn == 1  # from the replica
    finally:
        process.terminate()


def test_serve_help_names_its_options() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memcommit", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    for option in ("--host", "--port", "--token-file", "--tls-cert", "--tls-key", "--test-clock"):
        assert option in done.stdout


def test_a_log_read_on_the_event_loop_stops_at_the_head_the_last_batch_made_durable(
    tmp_path: Path,
) -> None:
    # The server answers a follower from the event loop with the commits up to the head its
    # writer's last batch reported (durable then), never a commit written after it.
    from memcommit.server.http import MemoryServer
    from memcommit.server.writer import Identity

    server = MemoryServer(tmp_path / "unused.db")
    with memcommit.open(tmp_path / "log.db") as store:
        for i in range(3):
            with store.commit() as c:
                c.put(f"first {i}")
                c.put(f"second {i}")
        view = store.engine.view()
        info = view.info()
        at_batch = Identity(str(info["store_id"]), int(info["generation"]), 4, view)
        got = server._read_here(at_batch, 0, 1 << 20, None)
        assert got is not None
        ident, data, last = got
        assert (ident, last) == (at_batch, 4)
        assert data == view.read_raw(0, 1 << 20)[0][: len(data)]
        assert data and len(data) < len(view.read_raw(0, 1 << 20)[0])
        # From the head on there is nothing to read; a client naming another log resyncs.
        assert server._read_here(at_batch, 4, 1 << 20, None) == (at_batch, b"", 4)
        assert server._read_here(at_batch, 0, 1 << 20, ("another", 0)) == (at_batch, None, 0)
        # A view that moved to another generation since the batch, or none: the writer reads.
        moved = Identity(at_batch.store_id, at_batch.generation + 1, 4, view)
        assert server._read_here(moved, 0, 1 << 20, None) is None
        assert server._read_here(Identity(at_batch.store_id, 0, 4), 0, 1 << 20, None) is None
