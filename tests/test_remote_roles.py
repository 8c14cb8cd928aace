"""The contract suite on a RemoteStore: every role call decided by a real server process.

One `memcommit serve --test-clock` process serves the whole module (the suite uses fresh ids,
so tests share a store as they would share a database); each test gets its own RemoteStore
and a clock that moves the server's clock with it. The reopen test restarts the server on the
same log file. Role errors must arrive as the same classes, with their fields. The module runs
twice: clients on TCP, then on the server's Unix socket (``--socket``).
"""

from __future__ import annotations

import enum
import json
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import memcommit
from memcommit.clock import to_microseconds
from memcommit.testing import Backend, ControllableClock, Harness, ServerProcess, race
from memcommit.testing.contract.suite import *  # noqa: F403  (the contract suite, collected here)

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class Served:
    """The module's server process, restartable on the same log file.

    It listens on TCP and on a Unix socket; its clients use `transport`'s. The test clock is
    set over TCP.
    """

    def __init__(self, path: Path, transport: str) -> None:
        self.path = path
        self.transport = transport
        self.process = self._start()

    def _start(self, *args: str) -> ServerProcess:
        sock = str(self.path.with_suffix(".sock"))
        return ServerProcess(self.path, "--test-clock", *args, "--socket", sock)

    @property
    def url(self) -> str:
        """The URL clients use."""
        unix = self.process.unix_url
        return unix if self.transport == "unix" and unix is not None else self.process.url

    def now_us(self) -> int:
        with urllib.request.urlopen(f"{self.process.url}/v1/test/clock") as answer:
            return int(json.load(answer)["now_us"])

    def set_us(self, now_us: int) -> None:
        body = json.dumps({"now_us": now_us}).encode()
        request = urllib.request.Request(f"{self.process.url}/v1/test/clock", body, method="POST")
        with urllib.request.urlopen(request) as answer:
            assert answer.status == 200

    def restart(self, clock_ms: int) -> None:
        assert self.process.terminate() in (0, -15)
        self.process = self._start(str(clock_ms))

    def stop(self) -> None:
        self.process.terminate()


class ServerClock(ControllableClock):
    """A ControllableClock that moves the server's clock with it (the server never goes back)."""

    def __init__(self, served: Served) -> None:
        self._served = served
        super().__init__(_EPOCH + timedelta(microseconds=served.now_us()))

    def advance(self, ms: int | timedelta) -> None:
        super().advance(ms)
        self._served.set_us(to_microseconds(self.now()))

    def set(self, when: datetime | int) -> None:
        super().set(when)
        self._served.set_us(to_microseconds(self.now()))


@pytest.fixture(scope="module", params=["tcp", "unix"])
def served(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Served]:
    server = Served(tmp_path_factory.mktemp("remote") / "roles.db", request.param)
    yield server
    server.stop()


@pytest.fixture
def memcommit_backend(served: Served) -> Backend:
    """The remote backend: a RemoteStore per test on the module's server."""

    def make(tmp_path: Path) -> Iterator[Harness]:
        clock = ServerClock(served)
        stores = [memcommit.RemoteStore(served.url)]

        def reopen() -> Any:
            stores[-1].close()
            served.restart(clock.now_ms())
            stores.append(memcommit.RemoteStore(served.url))
            return stores[-1]

        yield Harness(store=stores[0], clock=clock, reopener=reopen)
        stores[-1].close()

    return Backend("remote", make)


# -- beyond the suite: what only a remote store can show --------------------------------------


def test_compare_and_set_holds_across_processes(served: Served) -> None:
    """Two clients (two connections, as two processes would be) race for one lock."""
    a, b = memcommit.RemoteStore(served.url), memcommit.RemoteStore(served.url)
    try:
        name = f"job-{datetime.now().timestamp()}"
        outcomes = race(16, lambda i: (a if i % 2 else b).locks.acquire(name, f"w{i}", 60_000))
        winners = [o for o in outcomes if o is not None]
        assert len(winners) == 1
        held = b.locks.get(name)
        assert held is not None and held == winners[0]
        # The loser's view and the winner's agree: the lock lives on the server, not a replica.
        assert a.locks.get(name) == held
    finally:
        a.close()
        b.close()


def test_role_errors_cross_the_wire_as_the_same_class(served: Served) -> None:
    with memcommit.RemoteStore(served.url) as store:
        with pytest.raises(memcommit.RunNotFoundError) as caught:
            store.steps.start("no-such-run", "1", name="n")
        assert caught.value.run_id == "no-such-run"
        assert caught.value.code == "run_not_found"
        ns = ("agent", f"a-{datetime.now().timestamp()}")
        store.state.put(ns, "k", 1)
        with pytest.raises(memcommit.VersionConflictError) as conflict:
            store.state.put(ns, "k", 2, expected_version=7)
        assert (conflict.value.expected, conflict.value.actual) == (7, 1)
        with pytest.raises(TypeError, match="tuples are not JSON") as bad_type:
            store.state.put(ns, "k", (1, 2))
        # A bad argument is a MemcommitError too, with its code, on both sides of the wire.
        assert isinstance(bad_type.value, memcommit.InvalidType)
        assert bad_type.value.code == "invalid_type"
        with pytest.raises(ValueError, match="ttl_ms") as bad_value:
            store.locks.acquire(f"lock-{ns[1]}", "owner", 0)
        assert isinstance(bad_value.value, memcommit.InvalidValue)
        assert isinstance(bad_value.value, memcommit.MemcommitError)
        assert bad_value.value.code == "invalid_value"
        assert store.locks.get(f"lock-{ns[1]}") is None


def test_role_writes_reach_every_replica_as_log_records(served: Served) -> None:
    with memcommit.RemoteStore(served.url) as writer, memcommit.RemoteStore(served.url) as reader:
        before = reader.lsn
        writer.runs.create(agent_id="agent-x")
        assert reader.refresh() >= 1
        assert [r.op for r in reader.records(after=before)][-1] == "entity"


def test_a_str_enum_is_sent_as_the_string_it_holds(served: Served) -> None:
    """As every store keeps it (the roles' values rule), not as the enum member's name."""

    class Agent(str, enum.Enum):
        A = "agent-a"

    run_id = f"enum-{datetime.now().timestamp()}"
    with memcommit.RemoteStore(served.url) as store:
        run = store.runs.create(agent_id=Agent.A, run_id=run_id)
        assert run.agent_id == "agent-a"
        assert run_id in [r.run_id for r in store.runs.list(agent_id="agent-a")]
        ns = ("enum", run_id)
        assert store.state.put(ns, "k", {"who": Agent.A}).value == {"who": "agent-a"}
        lease = store.locks.acquire(Agent.A, run_id, 1_000)
        assert lease and lease.name == "agent-a"
        assert store.locks.get("agent-a") == lease
        assert store.locks.release("agent-a", token=lease.token)


def test_an_iterator_argument_is_sent_as_the_list_it_gives(served: Served) -> None:
    """A role takes any iterable (``status=`` of runs.list, say); a generator could not cross
    the wire and was refused as a stand-in."""
    run_id = f"gen-{datetime.now().timestamp()}"
    with memcommit.RemoteStore(served.url) as store:
        store.runs.create(agent_id="g", run_id=run_id)
        statuses = (s for s in ["pending"])
        assert run_id in [r.run_id for r in store.runs.list(agent_id="g", status=statuses)]


def test_a_remote_stores_clock_is_the_servers(served: Served) -> None:
    """now_us() is what the store's commits record: the server's clock, not the client's."""
    served.set_us(served.now_us() + 86_400_000_000)  # a day ahead of the client's
    with memcommit.RemoteStore(served.url) as store:
        now = served.now_us()
        assert store.now_us() == now
        mid = store.put("stamped by the server")
        assert store.get(mid).created_at == _EPOCH + timedelta(microseconds=now)
