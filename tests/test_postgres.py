"""Stores in PostgreSQL: one store shared by many clients, as if each were on its own host.

A throwaway server (tests/conftest.py) serves the session; every test gets a store of its own.
Two clients of one store are two engines with their own connection and follower, which is all
a second host would have. The roles' contract suite runs here too, on a fresh store per test.
No test asserts a time.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import memcommit
from memcommit.postgres.dsn import parse
from memcommit.postgres.schema import migrate, partitions
from memcommit.storage import compact
from memcommit.testing import Backend, opened_backend
from memcommit.testing.contract.suite import *  # noqa: F403  (the contract suite, collected here)
from memcommit.testing.postgres import PostgresCluster
from memcommit.wire import CommitOutcomeUnknown, ServerUnavailable


@pytest.fixture
def memcommit_backend(postgres: PostgresCluster) -> Backend:
    """The contract suite's backend: a new store in the session's database per test."""
    return opened_backend(
        "postgres", lambda tmp: f"{postgres.dsn}?store=contract-{uuid.uuid4().hex[:12]}"
    )


# -- the memory API ----------------------------------------------------------------------------


def test_a_store_in_postgres_is_a_store(pg_url: str) -> None:
    with memcommit.open(pg_url) as store:
        fact = store.put("User prefers dark mode", kind="fact", task="t1", tags=("ui",))
        assert store.get(fact).text == "User prefers dark mode"
        with store.commit() as c:
            note = c.put("a note", data={"n": 1})
            c.move(fact, "long")
        assert store.get(note).data == {"n": 1}
        assert [m.id for m in store.find(tier="long")] == [fact]
        assert [r.op for r in store.history(fact)] == ["put", "move"]
        assert [r.lsn for r in store.records()] == [1, 2, 3]
        assert [h.id for h in store.search("dark mode", mode="text")] == [fact]
        near = store.put("a vector", vector=[1.0, 0.0])
        store.put("another", vector=[0.0, 1.0])
        assert [h.id for h in store.search([0.9, 0.1], k=1, mode="vector")] == [near]
        with memcommit.open(pg_url) as other:  # another host's copy has the vectors too
            assert [h.id for h in other.search([0.9, 0.1], k=1, mode="vector")] == [near]
        assert store.info()["store"] == parse(pg_url).store
        assert "postgresql://" in repr(store)


def test_a_refused_commit_writes_nothing_anywhere(pg_url: str) -> None:
    with memcommit.open(pg_url) as a, memcommit.open(pg_url) as b:
        mid = a.put("v1")
        with pytest.raises(memcommit.Rejected):
            with a.commit() as c:
                c.put("never written")
                c.expect(mid, status="stale")
        b.refresh()
        assert len(b) == 1 and b.lsn == a.lsn == 1


def test_a_second_client_sees_commits_after_refresh_and_a_new_one_at_once(pg_url: str) -> None:
    with memcommit.open(pg_url) as a, memcommit.open(pg_url) as b:
        mid = a.put("from a")
        assert b.get(mid) is None
        assert b.refresh() == 1
        assert b.get(mid).text == "from a"
        with memcommit.open(pg_url) as c:
            assert c.get(mid).text == "from a"


def test_refresh_wait_is_woken_by_another_clients_notify(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memcommit.postgres.engine as pg_engine

    # Only a NOTIFY can wake the wait before its deadline now.
    monkeypatch.setattr(pg_engine, "_RECHECK_SECONDS", 60.0)
    with memcommit.open(pg_url) as a, memcommit.open(pg_url) as b:
        engine: Any = b.engine
        listening = engine._listening
        waiting = threading.Event()

        class Watched:
            """The LISTEN connection, saying when the wait on it begins."""

            def __init__(self, conn: Any) -> None:
                self._conn = conn

            def notifies(self, **kwargs: Any) -> Any:
                waiting.set()
                return self._conn.notifies(**kwargs)

        monkeypatch.setattr(engine, "_listening", lambda: Watched(listening()))
        heard: list[int] = []
        thread = threading.Thread(target=lambda: heard.append(b.refresh(wait=30)))
        thread.start()
        assert waiting.wait(30)
        a.put("news")
        thread.join(60)
        assert heard and heard[0] >= 1
        assert engine.notifications >= 1


def test_refresh_wait_polls_where_listen_is_not_available(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with memcommit.open(pg_url) as a, memcommit.open(pg_url) as b:
        engine: Any = b.engine
        monkeypatch.setattr(engine, "_listening", lambda: None)
        heard: list[int] = []
        thread = threading.Thread(target=lambda: heard.append(b.refresh(wait=30)))
        thread.start()
        a.put("news")
        thread.join(60)
        assert heard and heard[0] >= 1 and engine.notifications == 0


def test_guards_hold_across_clients_compare_and_set_counter(pg_url: str) -> None:
    """Clients on two 'hosts', four threads each, increment one counter by compare-and-set."""
    with memcommit.open(pg_url) as a, memcommit.open(pg_url) as b:
        counter = a.put("counter", id="counter", data={"n": 0})
        per_thread, refused = 15, [0]

        def bump(store: memcommit.MemoryStore) -> None:
            done = 0
            while done < per_thread:
                store.refresh()
                now = store.get(counter)
                try:
                    with store.commit() as c:
                        c.expect(counter, lsn=now.lsn)
                        c.put("counter", id=counter, data={"n": now.data["n"] + 1})
                    done += 1
                except memcommit.Rejected:
                    refused[0] += 1

        threads = [threading.Thread(target=bump, args=(s,)) for s in (a, b, a, b, a, b, a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        a.refresh()
        assert a.get(counter).data == {"n": 8 * per_thread}
        # LSNs are gap-free and in commit order, whichever client wrote them.
        assert [r.lsn for r in a.records()] == list(range(1, a.lsn + 1))


def test_locks_and_fencing_tokens_hold_across_clients(pg_url: str) -> None:
    with memcommit.open(pg_url) as a, memcommit.open(pg_url) as b:
        lease = a.locks.acquire("job", "host-a", 60_000)
        assert lease is not None
        assert b.locks.acquire("job", "host-b", 60_000) is None
        assert a.locks.release("job", token=lease.token)
        second = b.locks.acquire("job", "host-b", 60_000)
        assert second is not None and second.token > lease.token


def test_roles_race_across_clients_one_winner(pg_url: str) -> None:
    with memcommit.open(pg_url) as a, memcommit.open(pg_url) as b:
        outcomes: list[Any] = []
        lock = threading.Lock()

        def take(store: memcommit.MemoryStore, n: int) -> None:
            got = store.locks.acquire("prize", f"w{n}", 60_000)
            with lock:
                outcomes.append(got)

        threads = [threading.Thread(target=take, args=((a, b)[n % 2], n)) for n in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len([o for o in outcomes if o is not None]) == 1


# -- failures ----------------------------------------------------------------------------------


def _lose_commit_replies(monkeypatch: pytest.MonkeyPatch, *, applied: bool) -> None:
    """Make every COMMIT's reply lost: after the server applied it, or before it got there.

    A section ends with one query carrying its COMMIT (an insert, COMMIT, NOTIFY), sent
    through a client-side cursor: the fault is injected there (not in the query that begins
    it, ``READ COMMITTED``).
    """
    import re

    import psycopg

    real = psycopg.ClientCursor.execute

    def lost(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if not re.search(r"\bCOMMIT\b", str(query)):
            return real(self, query, params, **kwargs)
        if applied:
            real(self, query, params, **kwargs)
        raise psycopg.OperationalError("the connection was reset (injected)")

    monkeypatch.setattr(psycopg.ClientCursor, "execute", lost)


def test_a_lost_commit_reply_is_resolved_by_the_commit_id(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with memcommit.open(pg_url) as store, memcommit.open(pg_url) as other:
        engine = store.engine
        with monkeypatch.context() as patched:
            _lose_commit_replies(patched, applied=True)
            mid = store.put("applied, reply lost")
        assert store.get(mid).text == "applied, reply lost"
        other.refresh()
        assert other.get(mid).text == "applied, reply lost"

        with monkeypatch.context() as patched:
            _lose_commit_replies(patched, applied=False)
            with pytest.raises(ServerUnavailable):
                store.put("never applied")
        # The follower was rebuilt from the database: no phantom record.
        assert store.lsn == 1 and len(store) == 1
        assert engine is store.engine
        assert store.put("next") and store.lsn == 2


def test_a_lost_reply_that_cannot_be_checked_is_commit_outcome_unknown(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with memcommit.open(pg_url) as store:
        engine: Any = store.engine
        _lose_commit_replies(monkeypatch, applied=False)
        monkeypatch.setattr(engine, "_was_applied", lambda commit_id: None)
        with pytest.raises(CommitOutcomeUnknown) as info:
            store.put("unknown")
        assert info.value.commit_id


def test_a_follower_that_could_not_be_rebuilt_is_rebuilt_before_the_next_write(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed COMMIT while the database is away: the next write starts from the database."""
    with memcommit.open(pg_url) as store:
        store.put("first")
        engine: Any = store.engine

        def away() -> Any:
            raise ServerUnavailable("the database is away (injected)")

        with monkeypatch.context() as patched:
            _lose_commit_replies(patched, applied=False)
            patched.setattr(engine, "_was_applied", lambda commit_id: None)
            patched.setattr(engine, "_new_follower", away)
            with pytest.raises(CommitOutcomeUnknown):
                store.put("lost with the database away")
            # The follower still holds the lost commit; it must not be the base of the next.
            assert store.lsn == 2
        mid = store.put("next")
        assert store.lsn == 2 and store.get(mid).text == "next"
    with memcommit.open(pg_url) as fresh:
        assert [r.lsn for r in fresh.records()] == [1, 2]
        assert [m.text for m in fresh.find()] == ["first", "next"]


def test_a_client_with_an_embedder_goes_on_after_compactions_and_rebuilds(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every follower a client makes (a new generation, a rebuild) embeds its puts; a commit
    that fails still raises the database's error, and the client goes on."""

    def embed(texts: list[str]) -> list[list[float]]:
        return [[float(len(t)), 1.0] for t in texts]

    with memcommit.open(pg_url) as a, memcommit.open(pg_url, embed=embed) as b:
        b.put("first")
        a.refresh()
        a.put("from a")
        compact(a)  # b's next commit goes on with the new generation
        short = b.put("ab")
        assert b.info()["generation"] == 1
        assert [h.id for h in b.search([2.0, 1.0], k=1, mode="vector")] == [short]
        compact(b)  # and with its own
        assert b.info()["generation"] == 2
        with b.commit() as c:
            c.put("in a commit")
        before = b.lsn
        with monkeypatch.context() as patched:
            _lose_commit_replies(patched, applied=False)
            with pytest.raises(ServerUnavailable):
                b.put("never applied")  # the follower is rebuilt from the database
        longer = b.put("a longer text")
        assert b.lsn == before + 1 and b.get(longer).text == "a longer text"
        a.refresh()
        assert [h.id for h in a.search([13.0, 1.0], k=1, mode="vector")] == [longer]


def test_a_client_killed_mid_run_leaves_only_whole_commits(pg_url: str) -> None:
    script = (
        "import sys, memcommit\n"
        "s = memcommit.open(sys.argv[1])\n"
        "i = 0\n"
        "while True:\n"
        "    with s.commit() as c:\n"
        "        c.put_many([f'{i}-{j}' for j in range(20)], task=f't{i}')\n"
        "    print(i, flush=True)\n"
        "    i += 1\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, pg_url], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    acknowledged = [int(child.stdout.readline()) for _ in range(30)]
    child.kill()
    child.wait(30)
    child.stdout.close()
    with memcommit.open(pg_url) as store:
        for i in acknowledged:
            assert len(store.find(task=f"t{i}")) == 20
        tasks: dict[str, int] = {}
        for m in store.find(limit=None):
            tasks[m.task or ""] = tasks.get(m.task or "", 0) + 1
        assert all(n == 20 for n in tasks.values()), "a commit was half applied"


def test_a_database_restarted_under_load_loses_no_acknowledged_commit(pg_url: str) -> None:
    if os.environ.get("MEMCOMMIT_PG_DSN"):
        pytest.skip("restarts only a server the tests started")
    postgres = _server_of(pg_url)
    acknowledged: list[str] = []
    failures: list[BaseException] = []
    stop = threading.Event()
    with memcommit.open(pg_url) as store:

        def write() -> None:
            i = 0
            while not stop.is_set():
                try:
                    acknowledged.append(store.put(f"commit {i}"))
                except memcommit.MemcommitError as e:
                    failures.append(e)
                i += 1

        thread = threading.Thread(target=write)
        thread.start()
        while len(acknowledged) < 50:
            thread.join(0.01)
        postgres.restart()
        count = len(acknowledged)
        while len(acknowledged) < count + 50 and thread.is_alive():
            thread.join(0.01)
        stop.set()
        thread.join(60)
    assert all(isinstance(e, ServerUnavailable | CommitOutcomeUnknown) for e in failures)
    with memcommit.open(pg_url) as fresh:
        assert [mid for mid in acknowledged if fresh.get(mid) is None] == []
        assert len(acknowledged) >= count + 50, "the client did not reconnect by itself"


_SERVERS: dict[str, PostgresCluster] = {}


@pytest.fixture(autouse=True)
def _remember_server(postgres: PostgresCluster) -> None:
    _SERVERS[postgres.dsn] = postgres


def _server_of(url: str) -> PostgresCluster:
    return _SERVERS[url.split("?", 1)[0]]


# -- bad input ---------------------------------------------------------------------------------


def test_a_database_that_cannot_be_reached_is_named() -> None:
    with pytest.raises(ServerUnavailable) as info:
        memcommit.open("postgresql://nobody@127.0.0.1:1/none?store=x")
    assert "127.0.0.1:1" in str(info.value)
    assert "check that it is running" in str(info.value)


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("store=", "store"),
        ("store=a&store=b", "store"),
        ("schema=1bad", "schema"),
        ("schema=a-b", "schema"),
    ],
)
def test_bad_store_or_schema_names_are_refused(
    postgres: PostgresCluster, query: str, named: str
) -> None:
    with pytest.raises(ValueError) as info:
        memcommit.open(f"{postgres.dsn}?{query}")
    assert str(info.value).startswith(f"{named}:")


def test_a_url_without_a_host_part_opens_as_libpq_reads_it(postgres: PostgresCluster) -> None:
    """``postgresql:///db?host=...`` (how a Unix socket is named) keeps its ``//``."""
    server = urllib.parse.urlsplit(postgres.dsn)
    store = f"hostless-{uuid.uuid4().hex[:8]}"
    url = (
        f"postgresql:///postgres?host={server.hostname}&port={server.port}&user=postgres"
        f"&store={store}"
    )
    assert parse(url).conninfo.startswith("postgresql:///postgres?host=")
    assert parse("postgresql:///db?store=s").conninfo == "postgresql:///db"
    with memcommit.open(url) as hostless:
        mid = hostless.put("through a URL without a host part")
    with memcommit.open(f"{postgres.dsn}?store={store}") as same:
        assert same.get(mid) is not None


def test_a_url_parameter_libpq_does_not_take_and_a_closed_connection_are_named(
    postgres: PostgresCluster,
) -> None:
    import psycopg

    with pytest.raises(memcommit.InvalidValue, match='"stor"'):
        memcommit.open(f"{postgres.dsn}?stor=typo")
    closed = psycopg.connect(postgres.dsn)
    closed.close()
    with pytest.raises(memcommit.InvalidValue, match="closed"):
        memcommit.open(closed, store="s")


def test_options_a_database_store_cannot_take_are_refused(pg_url: str) -> None:
    with pytest.raises(ValueError, match="durability"):
        memcommit.open(pg_url, durability="none")


def _snapshot_view(store: memcommit.MemoryStore) -> tuple[object, ...]:
    store.refresh()
    mems = [
        (m.id, m.kind, m.text, m.task, m.tier, m.status, m.tags, m.lsn, m.created_at, m.updated_at)
        for m in store.find(status=None)
    ]
    histories = [[r.lsn for r in store.history(m[0])] for m in mems]
    seals = [(s.lsn, s.hash) for s in store.seals()]
    return mems, histories, store.lsn, store.is_task_finished("t1"), store.locks.get("job"), seals


def _snapshot_fill(store: memcommit.MemoryStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        mid = store.put(f"note {i}", kind="fact" if i % 2 else "trace", task=f"t{i % 3}")
        if i % 4 == 0:
            store.stale(mid, reason="old")
        if i % 5 == 0:
            store.move(mid, "long")


def test_a_snapshot_opens_a_client_to_the_state_a_full_read_gives(
    pg_url: str, tmp_path: Path
) -> None:
    snap = str(tmp_path / "state.json")
    with memcommit.open(pg_url) as store:
        _snapshot_fill(store, 40)
        store.finish_task("t1")
        store.locks.acquire("job", "a", 60_000)
        memcommit.seal(store)
        store.save_snapshot(snap)
        covered = store.lsn
    with memcommit.open(pg_url) as other:  # another host writes after the snapshot
        _snapshot_fill(other, 15, start=40)
        memcommit.seal(other)
    with memcommit.open(pg_url) as full:
        want = _snapshot_view(full)
    assert want[2] > covered
    with memcommit.open(pg_url, snapshot=snap) as store:
        assert _snapshot_view(store) == want
        store.put("written after opening from the snapshot")
        report = memcommit.verify(store)
        assert report.ok and report.seals_checked == 2
    with memcommit.open(pg_url, snapshot=snap, read_only=True) as reader:
        assert len(reader) == 56
        with pytest.raises(memcommit.ReadOnlyStore):
            reader.put("no")


def test_a_snapshot_of_another_store_or_generation_is_refused(pg_url: str, tmp_path: Path) -> None:
    snap, file_snap = str(tmp_path / "state.json"), str(tmp_path / "file.json")
    with memcommit.open(pg_url) as store:
        _snapshot_fill(store, 10)
        store.save_snapshot(snap)
    with memcommit.open(str(tmp_path / "m.db")) as local:
        _snapshot_fill(local, 10)
        local.save_snapshot(file_snap)
    with pytest.raises(memcommit.SnapshotMismatch, match="store"):
        memcommit.open(pg_url, snapshot=file_snap)
    with pytest.raises(memcommit.SnapshotMismatch, match="store"):
        memcommit.open(f"{pg_url}-other", snapshot=snap)
    with pytest.raises(memcommit.SnapshotMismatch, match="store"):
        memcommit.open(str(tmp_path / "m.db"), snapshot=snap)
    with memcommit.open(pg_url) as store:
        compact(store)
    with pytest.raises(memcommit.SnapshotMismatch, match="generation"):
        memcommit.open(pg_url, snapshot=snap)
    with pytest.raises(FileNotFoundError):
        memcommit.open(pg_url, snapshot=str(tmp_path / "missing.json"))
    with memcommit.open(pg_url) as store:  # and the store opens without one
        assert len(store) == 10


def test_a_reader_refuses_writes_and_a_missing_store(pg_url: str) -> None:
    with pytest.raises(memcommit.NotSupported, match="no store"):
        memcommit.open(pg_url, read_only=True)
    with memcommit.open(pg_url) as writer:
        mid = writer.put("x")
    with memcommit.open(pg_url, read_only=True) as reader:
        assert reader.get(mid).text == "x"
        with pytest.raises(memcommit.ReadOnlyStore):
            reader.put("y")


def test_stores_and_schemas_are_apart(postgres: PostgresCluster) -> None:
    name = uuid.uuid4().hex[:8]
    with (
        memcommit.open(f"{postgres.dsn}?store={name}") as a,
        memcommit.open(f"{postgres.dsn}?store={name}-other") as b,
        memcommit.open(f"{postgres.dsn}?store={name}&schema=other_{name}") as c,
    ):
        a.put("in a")
        assert len(b) == 0 and len(c) == 0
        assert a.info()["store_id"] != b.info()["store_id"]


def test_a_file_store_moves_to_postgres_with_export_and_import(pg_url: str, tmp_path: Path) -> None:
    """The README's way from a file to PostgreSQL: export, import into the URL; info, verify."""
    src = tmp_path / "src.db"
    with memcommit.open(str(src)) as store:
        fact = store.put("one", kind="fact", tags=("a",))
        store.locks.acquire("job", "owner", 60_000)
    dump = tmp_path / "dump.jsonl"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memcommit", *args], capture_output=True, text=True, timeout=120
        )

    assert cli("export", "--out", str(dump), str(src)).returncode == 0
    done = cli("import", pg_url, str(dump))
    assert done.returncode == 0, done.stderr
    info = cli("info", pg_url)
    assert info.returncode == 0 and "memories: 1" in info.stdout
    assert cli("verify", pg_url).returncode == 0
    exported = cli("export", pg_url)
    assert exported.returncode == 0 and '"text":"one"' in exported.stdout
    snap = tmp_path / "state.json"
    saved = cli("snapshot", pg_url, str(snap))
    assert saved.returncode == 0 and "memories: 1" in saved.stdout, saved.stderr
    with memcommit.open(pg_url, snapshot=str(snap)) as restored:
        assert restored.get(fact).text == "one"
    with memcommit.open(pg_url) as moved:
        assert moved.get(fact).text == "one" and moved.get(fact).tags == ("a",)
        assert moved.locks.acquire("job", "other", 60_000) is None
    again = cli("import", pg_url, str(dump))
    assert again.returncode == 1 and "already holds" in again.stderr


def test_the_demo_runs_on_a_store_in_postgres(pg_url: str) -> None:
    def demo() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "memcommit",
                "demo",
                "--url",
                pg_url,
                "--memories",
                "600",
                "--tasks",
                "20",
                "--agents",
                "5",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )

    done = demo()
    assert done.returncode == 0, done.stderr
    assert "600 memories (matches)" in done.stdout
    with memcommit.open(pg_url) as store:
        assert len(store) == 600
    again = demo()
    assert again.returncode == 1 and "already holds" in again.stderr


def test_a_host_whose_clock_runs_ahead_does_not_expire_anothers_lease(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Leases expire by the database's clock: a host an hour ahead sees the lease still held."""
    import time as time_module

    with memcommit.open(pg_url) as a:
        lease = a.locks.acquire("job", "host-a", 60_000)
        assert lease is not None
        real = time_module.time_ns
        monkeypatch.setattr(time_module, "time_ns", lambda: real() + 3600 * 10**9)
        with memcommit.open(pg_url) as skewed:
            assert skewed.locks.acquire("job", "host-b", 60_000) is None
            # And its records are stamped by the database's clock, not its own.
            mid = skewed.put("stamped")
            stamped = skewed.get(mid).created_at.timestamp()
            assert abs(stamped - real() / 1e9) < 600
    with memcommit.open(pg_url) as reader:
        times = [r.at for r in reader.records()]
        assert times == sorted(times)


def test_a_commit_is_never_stamped_before_the_newest_record_another_client_wrote(
    pg_url: str,
) -> None:
    """The database's clock is floored by the newest record a catch-up brings (here one an
    hour ahead, from a client with a clock of its own)."""
    import time as time_module

    from memcommit.testing import ControllableClock

    ahead = ControllableClock(int(time_module.time() * 1000) + 3600 * 1000)
    with memcommit.open(pg_url) as b, memcommit.open(pg_url, clock=ahead) as a:
        b.put("before")
        future = a.get(a.put("from the future")).created_at
        for i in range(3):
            assert b.get(b.put(f"after {i}")).created_at >= future
        b.refresh()
        times = [r.at for r in b.records()]
        assert times == sorted(times)


def test_ids_made_in_a_commit_carry_the_stores_clock(pg_url: str) -> None:
    """An id begins with its time (ULID-like): a commit's puts take it from the store's clock,
    as a put's and a local store's do, not from this host's."""
    from memcommit.testing import ControllableClock

    def ids(store: memcommit.MemoryStore) -> list[str]:
        with store.commit() as c:
            made = c.put("in a commit")
            made_too = c.put_many(["one", "two"])
        return [store.put("alone"), made, *made_too]

    clock = ControllableClock(datetime(2021, 6, 1, tzinfo=timezone.utc))
    with (
        memcommit.open(":memory:", clock=clock) as local,
        memcommit.open(pg_url, clock=clock) as db,
    ):
        want = {mid[:10] for mid in ids(local)}
        made = ids(db)
        assert len(want) == 1 and {mid[:10] for mid in made} == want
        assert all(db.get(mid).created_at == clock.now() for mid in made)


def test_migrate_applies_once_checks_and_opening_can_leave_it_to_the_command(
    postgres: PostgresCluster,
) -> None:
    schema = f"mig_{uuid.uuid4().hex[:8]}"
    base = f"{postgres.dsn}?schema={schema}"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memcommit", "migrate", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    # Nothing there: --check says so and changes nothing; opening with migrate=false refuses.
    check = cli(base, "--check")
    assert check.returncode == 1 and "needs migrations [1, 2, 3, 4]" in check.stdout
    with pytest.raises(memcommit.NotSupported, match="memcommit migrate"):
        memcommit.open(f"{base}&store=s&migrate=false")
    assert cli(base, "--check").returncode == 1
    # Applied once, however many run it at once; then up to date.
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "memcommit", "migrate", base],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [r.communicate(timeout=120)[0] for r in runs]
    assert all(r.returncode == 0 for r in runs)
    assert sum("applied migrations [1, 2, 3, 4]" in out for out in outputs) == 1
    assert cli(base, "--check").returncode == 0
    with memcommit.open(f"{base}&store=s&migrate=false") as store:
        assert store.put("after the migration")
    bad = cli("postgresql://nobody@127.0.0.1:1/none")
    assert bad.returncode == 1 and "127.0.0.1:1" in bad.stderr
    with pytest.raises(ValueError, match="migrate"):
        memcommit.open(f"{base}&migrate=maybe")


def test_a_mixed_case_schema_is_the_same_schema_at_every_open(postgres: PostgresCluster) -> None:
    """A schema name keeps its case (``TeamA`` is not ``teama``), in every statement and in the
    look-up that finds its tables: it opens again, and ``migrate --check`` finds it current."""
    schema = f"TeamA_{uuid.uuid4().hex[:8]}"
    url = f"{postgres.dsn}?store=s&schema={schema}"
    for i in range(2):
        with memcommit.open(url) as store:
            store.put(f"open {i}")
            assert len(store) == i + 1
    with memcommit.open(url) as store:
        assert compact(store).generation == 1
    with memcommit.open(f"{url}&migrate=false", read_only=True) as reader:
        assert [m.text for m in reader.find()] == ["open 0", "open 1"]
    check = subprocess.run(
        [
            sys.executable,
            "-m",
            "memcommit",
            "migrate",
            f"{postgres.dsn}?schema={schema}",
            "--check",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0 and "is up to date" in check.stdout


def test_a_seal_by_one_client_covers_every_hosts_records_and_tampering_is_found(
    pg_url: str,
) -> None:
    import psycopg

    key = b"k" * 32
    with memcommit.open(pg_url) as a, memcommit.open(pg_url) as b:
        a.put("from a")
        b.put("from b")
        sealed = memcommit.seals.seal(b, key=key)
        assert sealed.lsn == 2
        a.refresh()
        report = memcommit.seals.verify(a, key=key)
        assert report.ok and report.seals_checked == 1 and report.records_checked == 3
    dsn, store = pg_url.split("?store=")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            # One bit of the record's id flipped: a changed byte whatever it held ('X' before
            # in 1 of 32 ids, which then changed nothing).
            "UPDATE memcommit.records SET bytes = set_byte(bytes, 39, get_byte(bytes, 39) # 1) "
            "WHERE store = %s AND first_lsn = 1",
            (store,),
        )
    with pytest.raises(memcommit.CorruptLog) as caught:
        memcommit.open(pg_url)
    assert f"(store {store})" in str(caught.value)  # the store, not ":memory:"
    assert ":memory:" not in str(caught.value)


# -- log compaction, automatic seals and the schema's upgrade ----------------------------------


def _rows(pg_url: str, table: str = "records") -> int:
    import psycopg

    dsn, store = pg_url.split("?store=")
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(f"SELECT count(*) FROM memcommit.{table} WHERE store = %s", (store,))
        return int(row.fetchone()[0])  # type: ignore[index]


def _state(store: memcommit.MemoryStore) -> list[tuple[str, str, str, str, str]]:
    return sorted((m.id, m.text, m.kind, m.status, m.tier) for m in store.find(status=None))


def test_log_compaction_is_online_and_every_client_goes_on_with_the_new_generation(
    pg_url: str,
) -> None:
    from memcommit.storage import KindsAfter, compact

    with memcommit.open(pg_url) as a, memcommit.open(pg_url) as b:
        traces = [a.put(f"step {i}", kind="trace", task="t") for i in range(20)]
        facts = [a.put(f"fact {i}", kind="fact") for i in range(20)]
        for mid in facts[:10]:
            a.put(f"fact {mid} again", id=mid, kind="fact")
        with a.commit() as c:
            c.stale(facts[10], reason="wrong")
            c.move(facts[11], "long")
        lease = a.locks.acquire("res", "host-a", 60_000)
        assert lease is not None
        b.refresh()
        kept = [m for m in _state(b) if m[2] != "trace"]
        rows_before = _rows(pg_url)

        report = compact(a, retention=KindsAfter({"trace": 0}))

        assert report.generation == 1 and not report.dry_run
        assert sorted(report.purged) == sorted(traces)
        assert report.after < report.before and report.bytes_after < report.bytes_before
        assert _rows(pg_url, "manifest") == 1 and _rows(pg_url) < rows_before
        # The compacting client goes on with the new generation at once.
        assert a.info()["generation"] == 1 and _state(a) == kept
        # The other client, not refreshed, writes: its section sees the new generation first.
        late = b.put("written after the compaction")
        assert b.info()["generation"] == 1
        assert [m for m in _state(b) if m[0] != late] == kept
        with pytest.raises(memcommit.Purged):
            b.get(traces[0])
        assert b.is_purged(traces[0]) and not b.is_purged(facts[0])
        assert [e["generation"] for e in b.manifest()] == [1]
        assert sorted(b.manifest()[0]["purged"]) == sorted(traces)
        # The roles' state came through: the lease still holds, and is still fenced.
        assert b.locks.acquire("res", "host-b", 1_000) is None
        assert a.locks.release("res", token=lease.token)
        second = b.locks.acquire("res", "host-b", 1_000)
        assert second is not None and second.token > lease.token
        a.refresh()
        assert a.get(late).text == "written after the compaction"
        # A new client reads the new generation, whose fresh seal verifies.
        with memcommit.open(pg_url) as c:
            assert [m for m in _state(c) if m[0] != late] == kept
            assert c.is_purged(traces[-1])
            report2 = memcommit.seals.verify(c)
            assert report2.ok and report2.seals_checked == 1
        # And again: generations follow one another; the manifest keeps every entry.
        assert compact(b).generation == 2
        a.put("after the second")
        assert [e["generation"] for e in a.manifest()] == [1, 2]
        assert memcommit.seals.verify(a).ok


def test_commits_of_other_clients_during_compactions_are_all_kept(pg_url: str) -> None:
    from memcommit.storage import compact

    stop = threading.Event()
    written: list[tuple[str, str]] = []  # (id, text) of each acknowledged put, in order
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            with memcommit.open(pg_url) as w:
                i = 0
                while not stop.is_set():
                    text = f"writer {n} put {i}"
                    written.append((w.put(text, id=f"w{n}-{i % 50}"), text))
                    i += 1
        except BaseException as e:  # reported below
            errors.append(e)

    with memcommit.open(pg_url) as a:
        a.put("first")
        threads = [threading.Thread(target=write, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        while len(written) < 30:
            stop.wait(0.01)
        generations = [compact(a).generation for _ in range(3)]
        stop.set()
        for t in threads:
            t.join()
    assert not errors and generations == [1, 2, 3]
    with memcommit.open(pg_url) as fresh:
        # Every acknowledged id is there, with the text of its newest acknowledged put (each
        # id is one writer's, whose puts are acknowledged in order).
        newest = dict(written)
        for mid, text in newest.items():
            assert fresh.get(mid).text == text
        assert memcommit.seals.verify(fresh).ok


def test_every_transaction_is_read_committed_whatever_the_databases_default(
    postgres: PostgresCluster,
) -> None:
    """A database whose transactions are REPEATABLE READ unless told otherwise: a snapshot
    taken before the store's lock was granted would miss the commit of its last holder (LSNs
    given twice, acknowledged commits lost). Clients migrate and commit at once, one compacts
    meanwhile: every acknowledged commit is kept, the rows' LSNs follow on, the store opens."""
    import psycopg

    database = f"rr_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {database}")
        admin.execute(
            f"ALTER DATABASE {database} SET default_transaction_isolation = 'repeatable read'"
        )
    dsn = f"{postgres.dsn.rsplit('/', 1)[0]}/{database}"
    url = f"{dsn}?store=rr"
    acknowledged: list[str] = []
    errors: list[BaseException] = []
    ready, underway = threading.Barrier(4), threading.Event()

    def write(n: int) -> None:
        try:
            ready.wait(60)
            with memcommit.open(url) as w:
                for i in range(60):
                    with w.commit() as c:
                        for j in range(1 + (n + i) % 3):
                            c.put(f"writer {n} commit {i} put {j}", id=f"w{n}-{i}-{j}")
                    acknowledged.extend(f"w{n}-{i}-{j}" for j in range(1 + (n + i) % 3))
                    if i == 10:
                        underway.set()
        except BaseException as e:  # reported below
            errors.append(e)

    try:
        threads = [threading.Thread(target=write, args=(n,)) for n in range(3)]
        for t in threads:
            t.start()
        ready.wait(60)
        with memcommit.open(url) as a:
            underway.wait(60)
            generations = [compact(a).generation for _ in range(2)]
        for t in threads:
            t.join(120)
        assert not errors and generations == [1, 2]
        with memcommit.open(url) as fresh:
            assert [mid for mid in acknowledged if fresh.get(mid) is None] == []
            assert memcommit.seals.verify(fresh).ok
            with psycopg.connect(dsn, autocommit=True) as conn:
                rows = conn.execute(
                    "SELECT first_lsn, last_lsn FROM memcommit.records WHERE store = 'rr' "
                    "ORDER BY first_lsn"
                ).fetchall()
            assert [first for first, _ in rows] == [1] + [last + 1 for _, last in rows[:-1]]
            assert rows[-1][1] == fresh.lsn
    finally:
        with psycopg.connect(postgres.dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {database} WITH (FORCE)")


def test_the_compaction_seal_is_stamped_by_the_stores_clock(pg_url: str) -> None:
    """As on a log file: a clock given to open() stamps every record, compaction's seal too."""
    from memcommit.testing import ControllableClock

    clock = ControllableClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
    with memcommit.open(pg_url, clock=clock) as store:
        store.put("x")
        compact(store)
        store.put("y")
        assert {r.at for r in store.records()} == {clock.now()}
        assert [s.at for s in store.seals()] == [clock.now()]


def test_a_compaction_dry_run_writes_nothing(pg_url: str) -> None:
    from memcommit.storage import KindsAfter, compact

    with memcommit.open(pg_url) as a:
        trace = a.put("a trace", kind="trace")
        mid = a.put("a fact")
        a.put("the fact again", id=mid)
        rows, lsn = _rows(pg_url), a.lsn
    with memcommit.open(pg_url, read_only=True) as reader:
        report = compact(reader, retention=KindsAfter({"trace": 0}), dry_run=True)
        assert report.dry_run and report.generation == 1 and report.purged == (trace,)
        assert report.after == 2  # the fact's newest put and the new seal
    assert _rows(pg_url) == rows and _rows(pg_url, "manifest") == 0
    with memcommit.open(pg_url) as a:
        assert a.lsn == lsn and a.info()["generation"] == 0 and a.get(trace) is not None


def test_a_read_only_client_reads_the_roles_and_refuses_their_writes(pg_url: str) -> None:
    # Every role call took the store's lock, which a read-only client refuses: reads raised
    # ReadOnlyStore. They read what the client last read, as a reader of a log file does.
    with memcommit.open(pg_url) as writer:
        run = writer.runs.create(agent_id="a1")
        writer.state.put(("n",), "k", {"v": 1})
        with memcommit.open(pg_url, read_only=True) as reader:
            assert reader.runs.get(run.run_id) == run
            assert [r.run_id for r in reader.runs.list()] == [run.run_id]
            assert reader.state.get(("n",), "k").value == {"v": 1}  # type: ignore[union-attr]
            lsn = writer.lsn
            for write in (
                lambda: reader.runs.create(agent_id="a2"),
                lambda: reader.state.delete(("n",), "missing"),  # a write of nothing too
            ):
                with pytest.raises(memcommit.ReadOnlyStore, match="opened read-only"):
                    write()
            writer.refresh()
            assert writer.lsn == lsn
            writer.state.put(("n",), "k", {"v": 2})
            reader.refresh()
            assert reader.state.get(("n",), "k").value == {"v": 2}  # type: ignore[union-attr]


def test_the_compact_command_takes_the_url(pg_url: str) -> None:
    with memcommit.open(pg_url) as a:
        trace = a.put("a trace", kind="trace")
        a.put("a fact")
    done = subprocess.run(
        [sys.executable, "-m", "memcommit", "compact", pg_url, "--kinds-after", "trace=0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "(generation 1)" in done.stdout and "purged: 1" in done.stdout
    with memcommit.open(pg_url) as a:
        assert a.is_purged(trace)


def _store_made(url: str) -> bool:
    """Whether the store `url` names has its row in its schema's table of stores."""
    import psycopg

    target = parse(url)
    schema = f'"{target.schema}"'
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        table = conn.execute("SELECT to_regclass(%s)", (f"{schema}.stores",)).fetchone()
        if table is None or table[0] is None:
            return False
        row = conn.execute(f"SELECT 1 FROM {schema}.stores WHERE name = %s", (target.store,))
        return row.fetchone() is not None


def _migrated(postgres: PostgresCluster) -> None:
    """The default schema's tables made (a reader of a store then says there is no store)."""
    import psycopg

    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        migrate(admin, "memcommit")


@pytest.mark.parametrize("schema", ["memcommit", "fresh"], ids=["migrated", "no-tables-yet"])
def test_seal_and_compact_refuse_a_store_that_does_not_exist_and_make_none(
    postgres: PostgresCluster, capsys: pytest.CaptureFixture[str], schema: str
) -> None:
    """A mistyped store= made a new, empty store and sealed or compacted it; a missing file is
    refused ("no such store file"), and so is a missing store, by name, with nothing made."""
    from memcommit.cli import main

    _migrated(postgres)
    if schema == "fresh":
        schema = f"fresh_{uuid.uuid4().hex[:8]}"
    store = f"typo-{uuid.uuid4().hex[:8]}"
    url = f"{postgres.dsn}?store={store}&schema={schema}"
    for argv in (
        ["seal", url],
        ["compact", url],
        ["compact", url, "--kinds-after", "trace=0", "--horizon", "1"],
    ):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert f"no such store {store!r} (schema {schema})" in err, err
        assert "://" in err and "Traceback" not in err
    assert not _store_made(url)
    if schema == "memcommit":
        assert main(["info", url]) == 1
        assert f"there is no store {store!r}" in capsys.readouterr().err
    else:  # not even the schema's tables were made
        import psycopg

        with psycopg.connect(postgres.dsn, autocommit=True) as conn:
            found = conn.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone()
        assert found is not None and found[0] is None
    # A store that exists is sealed and compacted as before.
    with memcommit.open(url) as made:
        made.put("a trace", kind="trace")
    assert main(["seal", url]) == 0
    assert main(["compact", url, "--kinds-after", "trace=0"]) == 0
    with memcommit.open(url, read_only=True) as made:
        assert made.generation == 1 and len(made) == 0


_GOOD_PUT = {"op": "put", "key": "m0", "fields": {"text": "fine"}}


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        (
            [{"op": "entity", "key": 'run\x00["r1"]', "fields": {"state": 5}}],
            "line 1: fields.state of entity kind 'run' must be an object",
        ),
        ([_GOOD_PUT, "not json"], "line 2: not valid JSON"),
        (
            [_GOOD_PUT, {"op": "status", "key": "never-put", "fields": {"status": "stale"}}],
            "line 2: refused",
        ),
        (
            [_GOOD_PUT, {"op": "put", "key": "m1", "fields": {"text": "x", "tier": "attic"}}],
            "line 2: ",
        ),
    ],
    ids=["bad-entity-line", "bad-json", "refused-by-the-store", "refused-by-a-put-check"],
)
def test_an_import_that_imports_nothing_makes_no_store(
    postgres: PostgresCluster,
    pg_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    lines: list[Any],
    problem: str,
) -> None:
    """`memcommit import URL bad.jsonl` said "nothing was imported" and left an empty store
    (which `memcommit info URL` then showed): the store is made only when something is."""
    from memcommit.cli import main

    _migrated(postgres)
    dump = tmp_path / "bad.jsonl"
    dump.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
        encoding="utf-8",
    )
    assert main(["import", pg_url, str(dump)]) == 1
    err = capsys.readouterr().err
    assert f"{dump}, {problem}" in err and "nothing was imported" in err, err
    assert not _store_made(pg_url)
    assert main(["info", pg_url]) == 1
    assert "there is no store" in capsys.readouterr().err
    # From a pipe too (read through a copy in a temporary file).
    piped = subprocess.run(
        [sys.executable, "-m", "memcommit", "import", pg_url],
        input=dump.read_bytes(),
        capture_output=True,
        timeout=120,
    )
    assert piped.returncode == 1 and b"nothing was imported" in piped.stderr, piped.stderr
    assert not _store_made(pg_url)
    # A file without the bad line makes the store, with what it holds.
    dump.write_text(json.dumps(_GOOD_PUT) + "\n", encoding="utf-8")
    assert main(["import", pg_url, str(dump)]) == 0, capsys.readouterr().err
    assert _store_made(pg_url)
    with memcommit.open(pg_url, read_only=True) as store:
        assert store.get("m0").text == "fine"  # type: ignore[union-attr]


def test_an_import_into_an_empty_store_that_exists_leaves_it_there(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memcommit.cli import main

    memcommit.open(pg_url).close()
    dump = tmp_path / "bad.jsonl"
    dump.write_text(
        json.dumps(_GOOD_PUT)
        + "\n"
        + json.dumps({"op": "move", "key": "nope", "fields": {"tier": "mid"}}),
        encoding="utf-8",
    )
    assert main(["import", pg_url, str(dump)]) == 1
    assert f"{dump}, line 2: " in capsys.readouterr().err
    assert _store_made(pg_url)
    with memcommit.open(pg_url, read_only=True) as store:
        assert store.lsn == 0 and store.manifest() == []


def test_auto_seals_are_written_once_by_whichever_client_makes_one_due(pg_url: str) -> None:
    key = b"s" * 32
    with memcommit.open(pg_url) as a, memcommit.open(pg_url) as b:
        with (
            memcommit.seals.AutoSeal(a, every=10, key=key),
            memcommit.seals.AutoSeal(b, every=10, key=key),
        ):
            for i in range(60):
                (a if i % 3 else b).put(f"put {i}")
        a.refresh()
        seals = [s.lsn for s in a.seals()]
        # One seal per ten records, by either client, never two for the same ten.
        assert len(seals) >= 5
        assert all(later - earlier > 10 for earlier, later in itertools.pairwise(seals))
        assert a.lsn - seals[-1] <= 10
        report = memcommit.seals.verify(a, key=key)
        assert report.ok and report.seals_checked == len(seals)
        b.put("no seal: the AutoSeal is closed")
        b.refresh()
        assert [s.lsn for s in b.seals()] == seals


def test_a_version_1_schema_is_upgraded_with_its_stores(pg_url: str) -> None:
    """A schema as version 1 made it, holding a store, is migrated with the store intact."""
    import psycopg

    from memcommit.postgres import schema
    from memcommit.storage import compact

    with memcommit.open(pg_url) as a:
        mid = a.put("written before the upgrade")
        a.put("and a second commit")
    dsn, name = pg_url.split("?store=")
    old = f"v1_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert schema.migrate(conn, old, upto=1) == [1]
        # The store's header and rows, as version 1 held them (the same columns).
        conn.execute(
            f"INSERT INTO {old}.stores (name, header) "
            "SELECT name, header FROM memcommit.stores WHERE name = %s",
            (name,),
        )
        conn.execute(
            f"INSERT INTO {old}.records SELECT store, first_lsn, last_lsn, bytes, commit_id "
            "FROM memcommit.records WHERE store = %s",
            (name,),
        )
    url = f"{dsn}?schema={old}&store={name}"
    check = subprocess.run(
        [sys.executable, "-m", "memcommit", "migrate", f"{dsn}?schema={old}", "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 1 and "needs migrations [2, 3, 4]" in check.stdout
    with pytest.raises(memcommit.NotSupported, match="memcommit migrate"):
        memcommit.open(f"{url}&migrate=false")
    with memcommit.open(url) as a:  # migrates
        assert a.get(mid).text == "written before the upgrade"
        assert a.lsn == 2 and memcommit.seals.verify(a).ok
        a.put("after the upgrade")
        assert compact(a).generation == 1
    with memcommit.open(url) as b:
        assert [m.text for m in b.find()] == [
            "written before the upgrade",
            "and a second commit",
            "after the upgrade",
        ]


def test_compaction_swaps_the_stores_table_and_leaves_no_dead_rows(pg_url: str) -> None:
    import psycopg

    from memcommit.postgres import schema
    from memcommit.storage import compact

    dsn, name = pg_url.split("?store=")

    def tables() -> list[str]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT relid::regclass::text FROM pg_partition_tree('memcommit.records') "
                "WHERE isleaf ORDER BY 1"
            ).fetchall()
        return [
            r[0] for r in rows if r[0].split(".")[-1].startswith(schema.partition(name, 0)[:25])
        ]

    with memcommit.open(pg_url) as a:
        assert tables() == [f"memcommit.{schema.partition(name, 0)}"]
        for _ in range(5):
            with a.commit() as c:
                c.put_many([f"note {i}" for i in range(200)])
        before = a.engine.table_stats()["bytes"]
        compact(a)
        assert tables() == [f"memcommit.{schema.partition(name, 1)}"]
        after = a.engine.table_stats()
        assert after["dead"] == 0 and 0 < after["bytes"]
        assert a.lsn == 1001 and len(a) == 1000 and before > 0


# -- a psycopg connection or pool in place of a URL ---------------------------------------------


def test_a_store_opens_on_a_psycopg_connection_and_leaves_it_to_its_owner(
    postgres: PostgresCluster,
) -> None:
    import psycopg

    name = f"conn-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        store = memcommit.open(conn, store=name)
        mid = store.put("through the caller's connection")
        assert store.info()["store"] == name
        store.close()
        # Left open and idle for its owner, as it was, who goes on using it.
        assert not conn.closed and conn.autocommit
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with memcommit.open(f"{postgres.dsn}?store={name}") as by_url:
        assert by_url.get(mid).text == "through the caller's connection"
    # A connection in the middle of its owner's transaction is refused, the work left alone.
    with psycopg.connect(postgres.dsn) as busy:
        busy.execute("CREATE TEMP TABLE mine (x int)")
        with pytest.raises(ValueError, match="in a transaction"):
            memcommit.open(busy, store=name)
        assert busy.execute("SELECT count(*) FROM mine").fetchone() == (0,)


def test_a_store_on_a_connection_that_fails_connects_again_with_its_parameters(
    postgres: PostgresCluster,
) -> None:
    import psycopg

    name = f"conn-{uuid.uuid4().hex[:8]}"
    conn = psycopg.connect(postgres.dsn)
    with memcommit.open(conn, store=name) as store:
        store.put("before")
        with psycopg.connect(postgres.dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        store.put("after")  # on a new connection, made with the same parameters
        assert [m.text for m in store.find()] == ["before", "after"]
    assert conn.closed


def test_a_store_opens_on_a_pool_and_gives_its_connection_back(postgres: PostgresCluster) -> None:
    from psycopg_pool import ConnectionPool

    from memcommit.storage import compact

    name = f"pool-{uuid.uuid4().hex[:8]}"
    with ConnectionPool(postgres.dsn, min_size=1, max_size=2, open=True) as pool:
        with memcommit.open(pool, store=name, schema="memcommit") as a:
            assert pool.get_stats()["pool_available"] < pool.get_stats()["pool_size"]
            a.put("through the pool")
            with memcommit.open(pool, store=name) as b:  # the pool's second connection
                assert [m.text for m in b.find()] == ["through the pool"]
                b.put("from b")
            a.refresh()
            assert len(a.find()) == 2
            # Compaction takes a connection of its own, even with the pool's last one lent.
            assert compact(a).generation == 1
            assert len(a.find()) == 2
        stats = pool.get_stats()
        assert stats["pool_available"] == stats["pool_size"]  # every connection back
        with pool.connection() as conn:  # as the pool made it: not in autocommit
            assert not conn.autocommit


def test_store_and_schema_beside_a_url_or_a_path(postgres: PostgresCluster, tmp_path: Path) -> None:
    name = f"named-{uuid.uuid4().hex[:8]}"
    with memcommit.open(postgres.dsn, store=name) as store:
        assert store.info()["store"] == name
    with pytest.raises(ValueError, match="store: given both"):
        memcommit.open(f"{postgres.dsn}?store=a", store="b")
    with pytest.raises(ValueError, match="only a store in PostgreSQL"):
        memcommit.open(tmp_path / "a.log", store="x")
    with pytest.raises(TypeError, match="store must be a str"):
        memcommit.open(postgres.dsn, store=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="psycopg connection or pool"):
        memcommit.open(object())  # type: ignore[arg-type]
    assert not (tmp_path / "a.log").exists()


def test_an_async_connection_is_refused_with_the_way_to_asyncio(
    postgres: PostgresCluster,
) -> None:
    import asyncio

    import psycopg

    async def main() -> None:
        conn = await psycopg.AsyncConnection.connect(postgres.dsn)
        try:
            with pytest.raises(TypeError, match="AsyncMemoryStore"):
                memcommit.open(conn)
        finally:
            await conn.close()

    asyncio.run(main())


def test_metrics_count_commits_lock_waits_lags_and_the_tables_bloat(pg_url: str) -> None:
    from memcommit.postgres import metrics
    from memcommit.storage import compact

    def sample(text: str, name: str) -> float:
        (line,) = [x for x in text.splitlines() if x.startswith(f"memcommit_{name} ")]
        return float(line.split()[-1])

    with memcommit.open(pg_url) as a, memcommit.open(pg_url) as b:
        first = a.put("one")
        a.put("two")
        with pytest.raises(memcommit.Rejected):
            with a.commit() as c:
                c.expect(first, lsn=99)
                c.put("refused")
        b.put("from b")
        a.refresh()
        memcommit.seals.seal(a)
        a.put("after the seal")
        text = metrics(a)
        for name in ("commit_seconds", "lock_wait_seconds", "refresh_lag_seconds"):
            assert f"# TYPE memcommit_{name} histogram" in text
        assert 'memcommit_commits_total{result="ok"} 3' in text
        assert 'memcommit_commits_total{result="rejected"} 1' in text
        assert sample(text, "commit_seconds_count") == 4
        assert sample(text, "lock_wait_seconds_count") >= 4
        assert sample(text, "refresh_lag_seconds_count") >= 1  # b's record came to a
        assert sample(text, "seal_lag_records") == 1
        assert sample(text, "lsn") == a.lsn and sample(text, "generation") == 0
        for _ in range(3):
            a.put("again", id=first)
        compact(a)
        after = metrics(a)
        assert sample(after, "generation") == 1 and sample(after, "seal_lag_records") == 0
        assert sample(after, "compaction_lock_seconds_count") == 1
        assert sample(after, "table_bytes") > 0
        assert sample(after, "table_dead_rows") >= 0
    with pytest.raises(TypeError, match="not a store in PostgreSQL"):
        metrics(memcommit.open(":memory:"))


COMPACT_CHILD = """
import sys, memcommit
from memcommit.storage import KindsAfter, compact
store = memcommit.open(sys.argv[1])
print("compacting", flush=True)
compact(store, retention=KindsAfter({"trace": 0}))
print("done", flush=True)
"""


@pytest.mark.parametrize("step", ["new-log-written", "manifest-written", "renamed"])
def test_a_client_killed_at_each_step_of_a_compaction_leaves_one_whole_generation(
    pg_url: str, step: str
) -> None:
    import signal

    with memcommit.open(pg_url) as a:
        traces = {a.put(f"trace {i}", kind="trace") for i in range(10)}
        facts = {a.put(f"fact {i}", kind="fact") for i in range(10)}
        for mid in sorted(facts)[:5]:
            a.put("again", id=mid, kind="fact")
        before = _state(a)
    child = subprocess.Popen(
        [sys.executable, "-c", COMPACT_CHILD, pg_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MEMCOMMIT_FAILPOINT": step},
    )
    out, err = child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL, f"not killed at {step}:\n{err}"
    assert out == "compacting\n"
    committed = step == "renamed"
    with memcommit.open(pg_url) as b:
        assert b.info()["generation"] == (1 if committed else 0)
        assert [e["generation"] for e in b.manifest()] == ([1] if committed else [])
        kept = [m for m in before if m[0] not in traces] if committed else before
        assert _state(b) == kept
        assert all(b.is_purged(t) == committed for t in traces)
        assert memcommit.seals.verify(b).ok
        # The old generation's table, dropped after the commit, is left by a crash there.
        assert _tables(pg_url) == (2 if committed else 1)
        # The store goes on: a write, and a compaction that finishes (and drops what was left).
        b.put("after the crash")
        from memcommit.storage import compact

        assert compact(b).generation == (2 if committed else 1)
        assert _tables(pg_url) == 1


def _tables(pg_url: str) -> int:
    """How many tables of the store's records there are (its partition, and any left over)."""
    import psycopg

    with psycopg.connect(parse(pg_url).conninfo, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_class WHERE relkind = 'r' AND starts_with(relname, %s)",
            (partitions(parse(pg_url).store),),
        ).fetchone()
    assert row is not None
    return int(row[0])


def _application_role(admin: Any, role: str) -> None:
    """Make `role`, a user of memcommit's tables that may not create any."""
    admin.execute(f"CREATE ROLE {role} LOGIN")
    admin.execute(f"GRANT USAGE ON SCHEMA memcommit TO {role}")
    admin.execute(f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA memcommit TO {role}")


def test_a_user_without_create_uses_stores_and_is_told_what_a_new_one_needs(
    postgres: PostgresCluster,
) -> None:
    import psycopg

    from memcommit.errors import ServerError

    role = f"app_{uuid.uuid4().hex[:8]}"
    existing = f"granted-{uuid.uuid4().hex[:8]}"
    with memcommit.open(f"{postgres.dsn}?store={existing}") as owner:
        owner.put("made by the owner")
    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        _application_role(admin, role)
    as_role = postgres.dsn.replace("postgres@", f"{role}@", 1)
    with memcommit.open(f"{as_role}?store={existing}") as user:
        user.put("written by the application's user")
        assert len(user.find()) == 2
    with pytest.raises(ServerError, match="CREATE on the schema") as info:
        memcommit.open(f"{as_role}?store=new-{uuid.uuid4().hex[:8]}")
    assert info.value.code == "forbidden"


def test_a_user_who_may_not_flush_the_wal_is_refused_as_a_writer_not_as_a_reader(
    postgres: PostgresCluster,
) -> None:
    import psycopg

    from memcommit.errors import ServerError

    role = f"app_{uuid.uuid4().hex[:8]}"
    store = f"flush-{uuid.uuid4().hex[:8]}"
    function = "pg_logical_emit_message(boolean, text, text)"
    with memcommit.open(f"{postgres.dsn}?store={store}") as owner:
        owner.put("made by the owner")
    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        _application_role(admin, role)
        admin.execute(f"REVOKE EXECUTE ON FUNCTION {function} FROM PUBLIC")
        try:
            as_role = postgres.dsn.replace("postgres@", f"{role}@", 1)
            with pytest.raises(ServerError, match="pg_logical_emit_message") as info:
                memcommit.open(f"{as_role}?store={store}")
            assert info.value.code == "forbidden"
            with memcommit.open(f"{as_role}?store={store}", read_only=True) as reader:
                assert len(reader) == 1
        finally:
            admin.execute(f"GRANT EXECUTE ON FUNCTION {function} TO PUBLIC")


def test_a_commit_returns_once_the_wal_holding_it_is_flushed(pg_url: str) -> None:
    """The section's COMMIT lets the lock go before the WAL flush; the same query flushes.

    Right after each commit returns, the WAL's flush position is read with its insert
    position: with the flush done they are equal, unless a background process wrote WAL in
    between (which can only make a check fail, never pass); without it, the flush lags
    behind every time (the WAL writer flushes on its timer, every 200 ms).
    """
    import psycopg

    flushed = 0
    with memcommit.open(pg_url) as store, psycopg.connect(parse(pg_url).conninfo) as conn:
        conn.autocommit = True
        for i in range(20):
            store.put(f"durable {i}")
            row = conn.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_flush_lsn(), pg_current_wal_insert_lsn())"
            ).fetchone()
            assert row is not None
            flushed += row[0] >= 0
    assert flushed >= 15, f"the WAL was flushed through only {flushed} of 20 commits"


def test_clients_that_read_a_commit_the_database_then_lost_rebuild_their_copy(
    pg_url: str,
) -> None:
    """A commit is visible at its COMMIT, a moment before its flush: a crash of the database
    in that moment loses it (never acknowledged). Here its row is deleted instead: every
    client that read it, the writer included, goes on with the database's records."""
    import psycopg

    store = parse(pg_url).store
    with memcommit.open(pg_url) as writer, memcommit.open(pg_url) as reader:
        kept = writer.put("kept")
        lost = writer.put("lost")
        reader.refresh()
        assert reader.get(lost) is not None
        with psycopg.connect(parse(pg_url).conninfo, autocommit=True) as admin:
            admin.execute(
                "DELETE FROM memcommit.records WHERE store = %s AND last_lsn = "
                "(SELECT max(last_lsn) FROM memcommit.records WHERE store = %s)",
                (store, store),
            )
        reader.refresh()
        assert reader.get(lost) is None and reader.get(kept).text == "kept"
        after = writer.put("after")
        assert writer.get(lost) is None
        reader.refresh()
        assert reader.get(after).text == "after" and reader.lsn == writer.lsn
        assert memcommit.verify(reader).ok


def test_commits_go_on_while_compaction_makes_the_new_generation(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the two steps of a compaction other clients commit (without waiting for it):
    their records, a seal among them, join the new generation."""
    import memcommit.storage as storage

    with memcommit.open(pg_url) as a, memcommit.open(pg_url) as b:
        traces = [a.put(f"trace {i}", kind="trace") for i in range(5)]
        facts = [a.put(f"fact {i}", kind="fact") for i in range(5)]
        for mid in facts:
            a.put("again", id=mid, kind="fact")
        during: list[str] = []

        def meanwhile(step: str) -> None:
            if step == "new-log-written":  # the new table filled, the store's lock not taken
                during.append(b.put("written during the compaction"))
                with b.commit() as c:
                    c.stale(facts[0], reason="changed meanwhile")
                memcommit.seals.seal(b)  # a seal of the old chain: left out of the new one
                during.append(b.put("after that seal"))

        monkeypatch.setattr(storage, "_failpoint", meanwhile)
        report = storage.compact(a, retention=storage.KindsAfter({"trace": 0}))
        assert len(during) == 2 and report.generation == 1
        assert sorted(report.purged) == sorted(traces)
        b.refresh()
        for store in (a, b):
            assert store.info()["generation"] == 1
            assert [store.get(mid).text for mid in during] == [
                "written during the compaction",
                "after that seal",
            ]
            assert store.get(facts[0]).status == "stale"
            assert all(store.is_purged(t) for t in traces)
        seals = a.seals()
        assert len(seals) == 1 and seals[0].lsn == a.lsn - 1  # the new seal, after the rest
        assert memcommit.seals.verify(a).ok
        with memcommit.open(pg_url) as c:
            assert _state(c) == _state(a) and memcommit.seals.verify(c).ok


def test_a_compaction_holds_no_other_stores_lock(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock that lets one compaction of a store run at a time is no store's write lock,
    not even that of the store named like it with ``.compact`` after."""
    import memcommit.storage as storage

    with memcommit.open(pg_url) as x, memcommit.open(f"{pg_url}.compact") as y:
        x.put("in x")
        y.put("in y")
        during: list[str] = []
        waited: list[bool] = []

        def meanwhile(step: str) -> None:
            if step == "new-log-written":  # the compaction's lock held, not x's
                writer = threading.Thread(target=lambda: during.append(y.put("during")))
                writer.start()
                writer.join(60)  # bounded only so that a broken build fails
                waited.append(writer.is_alive())

        monkeypatch.setattr(storage, "_failpoint", meanwhile)
        assert storage.compact(x).generation == 1
        assert waited == [False] and y.get(during[0]).text == "during"


def _await_lock_waits(admin: Any, count: int) -> None:
    """Wait until `count` of memcommit's connections wait for a lock (bounded: 60 s)."""
    for _ in range(6000):
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'memcommit' "
            "AND wait_event_type = 'Lock'"
        ).fetchone()
        if row[0] >= count:
            return
        time.sleep(0.01)
    raise AssertionError(f"{count} of memcommit's connections never waited for a lock")


def test_a_compaction_and_a_section_of_another_store_do_not_deadlock(pg_url: str) -> None:
    """A section holds ``stores`` from its first read, then reads ``records``; the swap holds
    ``records``: it must not then wait for ``stores`` (the old table is dropped after it)."""
    import psycopg

    with memcommit.open(pg_url) as a:
        a.put("a")
        results: list[object] = []
        with psycopg.connect(parse(pg_url).conninfo, autocommit=True) as admin:
            section = psycopg.connect(parse(pg_url).conninfo)  # another store's, as it begins
            try:
                section.execute("SELECT 1 FROM memcommit.stores LIMIT 1")
                compacting = threading.Thread(target=lambda: results.append(_compacted(a)))
                compacting.start()
                _await_lock_waits(admin, 1)  # the compaction waits for `section`
                section.execute("SELECT 1 FROM memcommit.records LIMIT 1")
                section.commit()
            finally:
                section.close()
            compacting.join(60)
        assert results == [1]
        assert a.put("after") and a.info()["generation"] == 1
        assert _tables(pg_url) == 1  # the old table was dropped


def _compacted(store: memcommit.MemoryStore) -> object:
    """The generation `store`'s compaction made, or the error it raised."""
    try:
        return compact(store).generation
    except memcommit.MemcommitError as e:
        return e


def test_stores_made_at_once_do_not_deadlock(postgres: PostgresCluster) -> None:
    """Making a store makes its table of records, then its row: two made at once, each
    waiting for the records table, do not hold what the other needs next."""
    import psycopg

    names = [f"made-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    results: list[object] = []

    def make(name: str) -> None:
        try:
            with memcommit.open(f"{postgres.dsn}?store={name}") as store:
                results.append(store.put(name))
        except memcommit.MemcommitError as e:
            results.append(e)

    with psycopg.connect(postgres.dsn, autocommit=True) as admin:
        migrate(admin, "memcommit")
        reader = psycopg.connect(postgres.dsn)  # holds the records table until both wait
        try:
            reader.execute("SELECT 1 FROM memcommit.records LIMIT 1")
            makers = [threading.Thread(target=make, args=(name,)) for name in names]
            for t in makers:
                t.start()
            _await_lock_waits(admin, 2)
            reader.commit()
        finally:
            reader.close()
        for t in makers:
            t.join(60)
    assert len(results) == 2 and all(isinstance(r, str) for r in results), results


def test_a_purged_memory_changed_during_compaction_makes_it_run_under_the_lock(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memcommit.storage as storage

    with memcommit.open(pg_url) as a, memcommit.open(pg_url) as b:
        trace = a.put("a trace", kind="trace")
        kept = a.put("a fact", kind="fact")
        steps: list[str] = []

        def meanwhile(step: str) -> None:
            steps.append(step)
            if step == "new-log-written" and steps.count(step) == 1:
                b.put("the trace, changed", id=trace, kind="trace")

        monkeypatch.setattr(storage, "_failpoint", meanwhile)
        report = storage.compact(a, retention=storage.KindsAfter({"trace": 0}))
        # The first attempt gave up before taking the lock; the second ran under it.
        assert steps.count("new-log-written") == 2 and steps[-1] == "renamed"
        assert report.generation == 1 and report.purged == (trace,)
        b.refresh()
        assert b.is_purged(trace) and b.get(kept).text == "a fact"
        assert memcommit.seals.verify(b).ok


# -- a URL's password is never shown -----------------------------------------------------------

# A password the throwaway server ignores (it trusts local connections), so a URL may carry it.
_SECRET = "Sekret-Pw-4711"


def _secret_url(postgres: PostgresCluster, where: str, query: str) -> str:
    """The server's URL with `query`, and _SECRET in its user part or as ``password=``."""
    if not postgres.port:
        pytest.skip("a server given by MEMCOMMIT_PG_DSN may check passwords")
    parts = urllib.parse.urlsplit(postgres.dsn)
    user, host = parts.username or "postgres", parts.netloc.rpartition("@")[2]
    if where == "netloc":
        return f"{parts.scheme}://{user}:{_SECRET}@{host}{parts.path}?{query}"
    return f"{parts.scheme}://{user}@{host}{parts.path}?password={_SECRET}&{query}"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """Run the command line in this process: its exit code, and stdout and stderr together."""
    from memcommit.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out + err


def test_hide_password_hides_the_user_parts_and_the_query_parameters() -> None:
    from memcommit.postgres.dsn import hide_password

    assert hide_password("postgresql://u:pw@h:5432/db?store=a") == (
        "postgresql://u:***@h:5432/db?store=a"
    )
    assert hide_password("postgresql://u@h/db?password=pw&store=a&sslmode=require") == (
        "postgresql://u@h/db?password=***&store=a&sslmode=require"
    )
    assert hide_password("postgres:///db?host=/run/pg&sslpassword=pw&Pass%77ord=pw") == (
        "postgres:///db?host=/run/pg&sslpassword=***&Pass%77ord=***"
    )
    assert hide_password("postgresql://u:p@w@h1:1,h2:2/db?passwords=kept") == (
        "postgresql://u:***@h1:1,h2:2/db?passwords=kept"
    )
    for unchanged in ("memory.db", "/a/b:c@d", ":memory:", "postgresql://u@h/db?store=a"):
        assert hide_password(unchanged) == unchanged
    # What the engine names the store by, in its messages and info().
    assert parse("postgresql://u:pw@h/db?password=pw&store=a").shown == (
        "postgresql://u:***@h/db?password=***"
    )


@pytest.mark.parametrize("where", ["netloc", "query"])
def test_the_commands_name_a_url_without_its_password(
    postgres: PostgresCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    store = f"pw-{uuid.uuid4().hex[:8]}"
    url = _secret_url(postgres, where, f"store={store}")
    with memcommit.open(url) as made:
        made.put("a trace", kind="trace")
        made.put("a fact", kind="fact")
    dump, snap = tmp_path / "dump.jsonl", tmp_path / "state.json"
    host = urllib.parse.urlsplit(postgres.dsn).netloc.rpartition("@")[2]
    schema = f"pw_{uuid.uuid4().hex[:8]}"
    migrating = _secret_url(postgres, where, f"schema={schema}")
    # The URL as given, its password hidden (store= and all), or the engine's (without).
    given = f"{host}/postgres?{'password=***&' if where == 'query' else ''}store={store}"
    shown = f"{host}/postgres{'?password=***' if where == 'query' else ''}"
    for argv, code, named in [
        (["info", url], 0, [f"url: postgresql://postgres{'@' if where == 'query' else ':***@'}"]),
        (["info", url, "--json"], 0, [f'"store": "{store}"', shown]),
        (["verify", url], 0, [f"ok: postgresql://postgres{':***' * (where == 'netloc')}@{given}"]),
        (["export", url], 0, ['"text":"a fact"']),  # the records alone
        (["export", url, "--out", str(dump)], 0, ["from postgresql://", given]),
        (["snapshot", url, str(snap)], 0, ["memories: 2"]),
        (["seal", url], 0, ['"memcommit_seal"']),
        (["compact", url, "--dry-run"], 0, ["dry run: postgresql://", given]),
        (["compact", url, "--kinds-after", "trace=0"], 0, ["compacted: postgresql://", given]),
        (["import", url, str(dump)], 1, [f"{given} already holds"]),
        (["repair", url], 1, [f"{shown} (store '{store}')"]),
        (["migrate", migrating, "--check"], 1, [f"{shown}: schema {schema} needs"]),
        (["migrate", migrating], 0, [f"{shown}: schema {schema}: applied"]),
        (["migrate", migrating, "--check"], 0, [f"{shown}: schema {schema} is up to date"]),
    ]:
        done, said = _run(capsys, *argv)
        assert done == code, (argv, said)
        assert _SECRET not in said, (argv, said)
        assert all(text in said for text in named), (argv, named, said)


@pytest.mark.parametrize("where", ["netloc", "query"])
def test_errors_name_a_url_without_its_password(
    postgres: PostgresCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    _migrated(postgres)
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    url = _secret_url(postgres, where, f"store={missing}")
    host = urllib.parse.urlsplit(postgres.dsn).netloc.rpartition("@")[2]
    for argv, code, named in [
        (["seal", url], 1, f"no such store {missing!r}"),
        (["compact", url], 1, f"no such store {missing!r}"),
        (["compact", url, "--dry-run"], 1, f"there is no store {missing!r}"),
        (["info", url], 1, f"there is no store {missing!r}"),
        (["verify", url], 1, f"there is no store {missing!r}"),
        (["export", url], 1, f"there is no store {missing!r}"),
        (["snapshot", url, str(tmp_path / "s.json")], 1, f"there is no store {missing!r}"),
        (["bench", "compact", url], 1, f"store={missing}: no such log file"),
        (["migrate", _secret_url(postgres, where, "store=a&store=b")], 2, "given twice"),
        (["migrate", _secret_url(postgres, where, "stor=typo")], 1, '"stor"'),
    ]:
        done, said = _run(capsys, *argv)
        assert done == code, (argv, said)
        assert _SECRET not in said, (argv, said)
        assert named in said and host in said, (argv, said)
    done, said = _run(capsys, "migrate", f"mysql://u:{_SECRET}@db.internal/x")
    assert done == 1 and _SECRET not in said and "db.internal" in said, said
    done, said = _run(capsys, "demo", "--url", f"mysql://u:{_SECRET}@db.internal/x")
    assert done == 1 and _SECRET not in said and "db.internal" in said, said
    assert not _store_made(url)


@pytest.mark.parametrize("where", ["netloc", "query"])
def test_a_refused_or_damaged_import_and_verify_name_the_url_without_its_password(
    postgres: PostgresCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """An import refused after a batch went in names the store it went into; a damaged row,
    found by verify, names the store too: by its URL, without the password."""
    import psycopg

    store = f"pw-{uuid.uuid4().hex[:8]}"
    url = _secret_url(postgres, where, f"store={store}")
    dump = tmp_path / "dump.jsonl"
    refused = {"op": "status", "key": "never-put", "fields": {"status": "stale"}}
    dump.write_text("\n".join(json.dumps(line) for line in (_GOOD_PUT, refused)) + "\n")
    done, said = _run(capsys, "import", url, str(dump), "--batch", "1")
    assert done == 1 and "line 2: refused" in said, said
    assert _SECRET not in said and "were imported into postgresql://" in said, said
    assert "None" not in said, said
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE memcommit.records SET bytes = set_byte(bytes, 39, get_byte(bytes, 39) # 1) "
            "WHERE store = %s AND first_lsn = 1",
            (store,),
        )
    done, said = _run(capsys, "verify", url)
    assert done == 1 and f"(store {store})" in said, said
    assert _SECRET not in said, said


@pytest.mark.parametrize("where", ["netloc", "query"])
def test_the_demo_names_its_url_without_its_password(
    postgres: PostgresCluster, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    store = f"pw-demo-{uuid.uuid4().hex[:8]}"
    url = _secret_url(postgres, where, f"store={store}")
    argv = ["demo", "--url", url, "--memories", "20", "--tasks", "2", "--agents", "1"]
    done, said = _run(capsys, *argv)
    assert done == 0 and "20 memories (matches)" in said, said
    assert _SECRET not in said and f"store={store}" in said, said
    again, said = _run(capsys, *argv)  # a store that holds records is refused
    assert again == 1 and "already holds" in said, said
    assert _SECRET not in said and f"store={store}" in said, said


@pytest.mark.parametrize("where", ["netloc", "query"])
def test_memcommit_open_names_a_url_without_its_password(
    postgres: PostgresCluster, where: str
) -> None:
    store = f"pw-{uuid.uuid4().hex[:8]}"
    url = _secret_url(postgres, where, f"store={store}")
    for query, error, named in [
        (f"store={store}", memcommit.NotSupported, f"there is no store {store!r}"),
        ("store=a&store=b", memcommit.InvalidValue, "given twice"),
        ("store=a&stor=typo", memcommit.InvalidValue, '"stor"'),
    ]:
        with pytest.raises(error) as caught:
            memcommit.open(_secret_url(postgres, where, query), read_only=True)
        assert named in str(caught.value) and "127.0.0.1" in str(caught.value), caught.value
        assert _SECRET not in str(caught.value), caught.value
    unreachable = (
        f"postgresql://nobody:{_SECRET}@127.0.0.1:1/none?store=x"
        if where == "netloc"
        else f"postgresql://nobody@127.0.0.1:1/none?password={_SECRET}&store=x"
    )
    with pytest.raises(ServerUnavailable) as down:
        memcommit.open(unreachable)
    assert "127.0.0.1:1" in str(down.value) and _SECRET not in str(down.value)
    assert _SECRET not in (down.value.url or "")
    with memcommit.open(url) as writer:
        writer.put("x")
        assert _SECRET not in repr(writer) and _SECRET not in str(writer.info())
        assert writer.info()["url"].count("***") == 1
    with memcommit.open(url, read_only=True) as reader:
        with pytest.raises(memcommit.ReadOnlyStore) as refused:
            reader.put("y")
        assert _SECRET not in str(refused.value) and "127.0.0.1" in str(refused.value)
