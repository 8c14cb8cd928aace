"""The contract suite on the store itself: a log file (with reopen) and a store in RAM.

The roles' changes are entity records in the store's log, so this runs every contract test
through the log engine, and the durable backend's reopen test replays them.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

import memcommit
from memcommit.testing import Backend, ControllableClock, log_backend, store_memory_backend
from memcommit.testing.contract.suite import *  # noqa: F403  (the contract suite, collected here)


@pytest.fixture(params=[log_backend(), store_memory_backend()], ids=lambda b: b.name)
def memcommit_backend(request: pytest.FixtureRequest) -> Backend:
    """Both store kinds."""
    backend: Backend = request.param
    return backend


def test_roles_survive_reopen_with_their_leases_tokens_and_versions(tmp_path: Path) -> None:
    clock = ControllableClock()
    path = str(tmp_path / "roles.db")
    with memcommit.open(path, clock=clock) as store:
        lease = store.locks.acquire("job", "replica-a", 5_000)
        assert lease and lease.token == 1
        store.runs.create(run_id="run-1", agent_id="agent-1", input={"q": 1})
        store.state.put(("agent-1",), "mood", "curious")
        store.idempotency.reserve("key-1", ttl_ms=60_000)
    with memcommit.open(path, clock=clock) as store:
        assert store.locks.acquire("job", "replica-b", 5_000) is None  # still held
        assert store.runs.get("run-1") is not None
        assert store.state.get(("agent-1",), "mood").value == "curious"
        clock.advance(5_000)
        lease = store.locks.acquire("job", "replica-b", 5_000)
        assert lease and lease.token == 2  # fencing tokens never go back
        sealed = memcommit.seal(store)
        assert memcommit.verify(store).seals_checked == 1
        assert sealed.lsn == store.lsn - 1


def test_a_reader_sees_the_writers_roles_after_refresh(tmp_path: Path) -> None:
    path = str(tmp_path / "roles.db")
    with memcommit.open(path) as writer:
        reader = memcommit.open(path, read_only=True)
        writer.locks.acquire("job", "a", 60_000)
        assert reader.locks.get("job") is None
        assert reader.refresh() > 0
        held = reader.locks.get("job")
        assert held is not None and held.owner == "a"
        with pytest.raises(memcommit.ReadOnlyStore):
            reader.locks.acquire("other", "b", 1_000)
        reader.close()


@pytest.mark.parametrize("where", ["memory", "file"])
def test_reading_the_roles_of_a_new_store_keeps_a_commit_expecting_its_lsn(
    tmp_path: Path, where: str
) -> None:
    """A read is no commit: not even the first read of a new store's runs."""
    path = ":memory:" if where == "memory" else str(tmp_path / "roles.db")
    with memcommit.open(path) as store:
        store.put("a fact", kind="fact")
        head = store.lsn
        assert store.runs.list() == []
        assert store.runs.claim_next(worker_id="w", ttl_ms=1_000) is None
        assert store.runs.delete("no-such-run") is False
        assert store.lsn == head
        with store.commit(expect_lsn=head) as commit:
            commit.put("another", kind="fact")
        run = store.runs.create(agent_id="a")  # the first write of a run keeps its queue
        assert store.runs.list() == [run]


def test_a_reader_forgets_what_it_read_when_the_writer_changes_it(tmp_path: Path) -> None:
    path = str(tmp_path / "roles.db")
    with memcommit.open(path) as writer:
        lease = writer.locks.acquire("job", "a", 60_000)
        assert lease
        writer.state.put(("ns",), "k1", {"v": 1})
        with memcommit.open(path, read_only=True) as reader:
            assert reader.locks.get("job") is not None  # read, and kept
            assert [e.key for e in reader.state.list(("ns",))] == ["k1"]
            assert writer.locks.release("job", token=lease.token)
            writer.state.put(("ns",), "k0", {"v": 0})
            assert reader.locks.get("job") is not None  # until it refreshes
            assert reader.refresh() > 0
            assert reader.locks.get("job") is None
            assert [e.key for e in reader.state.list(("ns",))] == ["k0", "k1"]


def test_concurrent_role_operations_share_fsyncs_and_stay_correct(tmp_path: Path) -> None:
    path = str(tmp_path / "roles.db")
    with memcommit.open(path) as store:
        tokens: list[int] = []
        guard = threading.Lock()

        def work(n: int) -> None:
            for i in range(25):
                lease = store.locks.acquire(f"res-{n}-{i}", f"w{n}", 60_000)
                assert lease
                with guard:
                    tokens.append(lease.token)
                assert store.locks.release(f"res-{n}-{i}", token=lease.token)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(tokens) == 200
        fsyncs = store.info()["fsyncs"]
    with memcommit.open(path) as store:
        assert store.locks.get("res-0-0") is None
        assert store.lsn >= 400
    # Eight threads, 400 commits: group commit shares fsyncs (this is a count, not a time).
    assert fsyncs <= 400


def test_replacing_runs_on_a_copied_store_leaves_the_others_checking_the_original() -> None:
    import copy

    store = memcommit.create_memory_store()
    custom = memcommit.MemoryRunRepository()
    spread = copy.copy(store)
    spread.runs = custom
    run = custom.create(run_id="only-in-custom", agent_id="a")
    # The other roles were built over the store's own runs, which never saw this run.
    with pytest.raises(memcommit.RunNotFoundError):
        spread.steps.start(run.run_id, "step-1", name="s")
    assert store.runs.get("only-in-custom") is None


def test_the_log_medium_scans_by_key_with_what_it_has_not_read_yet(tmp_path: Path) -> None:
    path = str(tmp_path / "medium.db")
    changes: list[tuple[str, str, dict[str, object] | None]] = [
        ("k", "b", {"n": 2}),
        ("k", "a", {}),
        ("k", "ab", {"n": 3}),
        ("k2", "a", {"other": True}),
        ("k", "c", {"n": 4}),
        ("k", "c", None),
    ]
    with memcommit.open(path) as store:
        medium = store.medium
        assert medium is not None
        with medium.lock:
            medium.write(changes)
        want = [("a", {}), ("ab", {"n": 3}), ("b", {"n": 2})]
        assert medium.scan("k") == want
        assert medium.scan("k", "a") == want[:2]
        assert medium.count("k") == 3 and medium.count() == 4
    with memcommit.open(path, read_only=True) as reader:  # nothing read yet
        medium = reader.medium
        assert medium is not None
        assert medium.get("k", "ab") == {"n": 3}  # one read, then the scan reads the rest
        assert medium.scan("k") == want
        assert medium.scan("k2") == [("a", {"other": True})]
        assert medium.get("k", "c") is None


class _TickingClock:
    """A clock that moves one millisecond at every reading, and counts them."""

    def __init__(self) -> None:
        self.ms = 1_767_225_600_000
        self.reads = 0

    def now_ms(self) -> int:
        self.reads += 1
        self.ms += 1
        return self.ms

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.now_ms() / 1000, timezone.utc)


@pytest.mark.parametrize("where", ["file", "memory"])
def test_a_role_write_reads_the_clock_once_and_its_record_carries_that_time(
    tmp_path: Path, where: str
) -> None:
    """ROLES.md: each operation reads the clock once; the commit records that reading."""
    clock = _TickingClock()
    store = (
        memcommit.open(str(tmp_path / "m.db"), clock=clock)  # type: ignore[arg-type]
        if where == "file"
        else memcommit.create_memory_store(clock=clock)  # type: ignore[arg-type]
    )
    with store:
        for write in (
            lambda: store.locks.acquire("job", "me", 1_000),
            lambda: store.state.put(("ns",), "k", 1),
            lambda: store.runs.create(agent_id="a", run_id="r"),
        ):
            before, lsn = clock.reads, store.lsn
            made = write()
            assert clock.reads == before + 1
            stamp = getattr(made, "acquired_at_ms", None) or getattr(made, "updated_at_ms", None)
            stamp = stamp or getattr(made, "created_at_ms", None)
            assert stamp == clock.ms
            ats = {r.at for r in store.records(after=lsn)}
            assert ats == {datetime.fromtimestamp(clock.ms / 1000, timezone.utc)}
