"""AsyncMemoryStore: every method a coroutine; writes in one worker thread, in order."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import memcommit
from memcommit.aio import AsyncMemoryStore, AsyncRole
from memcommit.store import MemoryStore
from memcommit.testing import ControllableClock, ServerProcess


def run(coroutine: object) -> object:
    return asyncio.run(coroutine)  # type: ignore[arg-type]


def test_every_store_method_is_a_coroutine(tmp_path: Path) -> None:
    astore = AsyncMemoryStore(memcommit.open(tmp_path / "a.db"))
    for name in ("put", "stale", "restore", "move", "finish_task", "get", "get_many", "find"):
        assert inspect.iscoroutinefunction(getattr(astore, name)), name
    for name in ("history", "is_task_finished", "lsn", "count", "contains", "flush", "close"):
        assert inspect.iscoroutinefunction(getattr(astore, name)), name
    assert inspect.iscoroutinefunction(astore.locks.acquire)
    assert "acquire" in dir(astore.locks)
    run(astore.close())
    assert astore.store.closed


def public(cls: type) -> list[str]:
    return sorted(name for name in dir(cls) if not name.startswith("_"))


def forwards_everything(function: object) -> bool:
    kinds = {p.kind for p in inspect.signature(function).parameters.values()}  # type: ignore[arg-type]
    return {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD} <= kinds


def test_the_facade_covers_every_public_member_of_a_store(tmp_path: Path) -> None:
    """By reflection: each public name of MemoryStore is on AsyncMemoryStore, as its kind says."""
    store = memcommit.open(tmp_path / "cover.db")
    store.put("one memory")
    astore = AsyncMemoryStore(store)
    missing = [n for n in public(MemoryStore) if not hasattr(AsyncMemoryStore, n)]
    assert missing == [], f"AsyncMemoryStore lacks {missing}"

    async def check() -> None:
        for name in public(MemoryStore):
            sync = inspect.getattr_static(MemoryStore, name)
            facade = inspect.getattr_static(AsyncMemoryStore, name)
            if isinstance(sync, property):
                # A property: a property, or a coroutine method of no arguments giving its value.
                if isinstance(facade, property):
                    assert getattr(astore, name) == getattr(store, name), name
                else:
                    assert inspect.iscoroutinefunction(facade), name
                    assert list(inspect.signature(facade).parameters) == ["self"], name
                    assert await getattr(astore, name)() == getattr(store, name), name
                continue
            assert inspect.isfunction(sync) and inspect.isfunction(facade), name
            if not forwards_everything(facade):
                assert list(inspect.signature(facade).parameters) == list(
                    inspect.signature(sync).parameters
                ), name
            if not (inspect.iscoroutinefunction(facade) or inspect.isasyncgenfunction(facade)):
                # Not awaited itself: it must give an async context manager (commit).
                made = getattr(astore, name)()
                assert hasattr(made, "__aenter__") and hasattr(made, "__aexit__"), name
        # The roles (instance attributes, declared on the class) and the container protocol.
        assert set(MemoryStore.__annotations__) <= set(AsyncMemoryStore.__annotations__)
        for role in MemoryStore.__annotations__:
            cls = type(getattr(store, role))
            assert isinstance(getattr(astore, role), AsyncRole), role
            methods = {n for n in public(cls) if inspect.isfunction(inspect.getattr_static(cls, n))}
            assert methods <= set(dir(getattr(astore, role))), role
        assert await astore.count() == len(store) and await astore.contains(store.find()[0].id)
        await astore.close()

    run(check())


def test_snapshot_and_manifest_through_the_facade(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncMemoryStore(memcommit.open(tmp_path / "snap.db")) as astore:
            mid = await astore.put("snapshotted")
            await astore.save_snapshot(tmp_path / "state.json")
            assert await astore.manifest() == [] and not await astore.is_purged(mid)
            assert astore.path == str(tmp_path / "snap.db")

    run(main())
    with memcommit.open(tmp_path / "snap.db", snapshot=tmp_path / "state.json") as reopened:
        assert [m.text for m in reopened.find()] == ["snapshotted"]


def test_reads_writes_commits_and_roles(tmp_path: Path) -> None:
    clock = ControllableClock()

    async def main() -> None:
        async with AsyncMemoryStore(memcommit.open(tmp_path / "b.db", clock=clock)) as astore:
            t1 = await astore.put("opened the settings page", kind="trace", task="ui")
            t2 = await astore.put("switched to dark mode", kind="trace", task="ui")
            head = await astore.lsn()
            async with astore.commit(expect_lsn=head) as c:
                summary = c.put("dark mode", kind="summary", sources=(t1, t2), tier="mid")
                c.move(t1, "archive")
            assert (await astore.get(summary)).sources == (t1, t2)  # type: ignore[union-attr]
            assert (await astore.get(t1)).tier == "archive"  # type: ignore[union-attr]
            assert await astore.count() == 3 and await astore.contains(t2)
            assert [r.op for r in await astore.history(t1)] == ["put", "move"]
            assert [r.lsn async for r in astore.records(after=head)] == [head + 1, head + 2]
            with pytest.raises(memcommit.Rejected):
                async with astore.commit(expect_lsn=head) as c:
                    c.put("too late")
            with pytest.raises(KeyError):
                async with astore.commit() as c:
                    c.put("dropped")
                    raise KeyError("nothing of this block is written")
            assert await astore.lsn() == head + 2
            lease = await astore.locks.acquire("job", "a", 1_000)
            assert lease and await astore.locks.acquire("job", "b", 1_000) is None
            clock.advance(1_000)
            assert await astore.locks.acquire("job", "b", 1_000)
            with pytest.raises(memcommit.RunNotFoundError):
                await astore.steps.start("no-such-run", "1", name="n")

    run(main())


def test_commits_run_one_at_a_time_in_the_order_awaited(tmp_path: Path) -> None:
    threads: set[str] = set()
    store = memcommit.open(tmp_path / "c.db")
    original = store.put

    def spying_put(*args: object, **kwargs: object) -> str:
        threads.add(threading.current_thread().name)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    store.put = spying_put  # type: ignore[method-assign]

    async def main() -> list[str]:
        async with AsyncMemoryStore(store) as astore:
            ids = await asyncio.gather(*(astore.put(f"memory {i}") for i in range(50)))
            memories = await astore.get_many(ids)
            return [m.text for m in memories if m is not None]

    texts = run(main())
    assert texts == [f"memory {i}" for i in range(50)]
    assert len(threads) == 1 and next(iter(threads)).startswith("memcommit-commit")
    with memcommit.open(tmp_path / "c.db") as reopened:
        # LSN order is the order the coroutines were started in.
        assert [m.text for m in reopened.find(limit=None)] == [f"memory {i}" for i in range(50)]


def test_the_loop_runs_while_a_commit_waits(tmp_path: Path) -> None:
    """A slow commit (blocked in the worker) does not stop the event loop."""
    store = memcommit.open(tmp_path / "d.db")
    release = threading.Event()
    original = store.put

    def slow_put(*args: object, **kwargs: object) -> str:
        release.wait(30)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    store.put = slow_put  # type: ignore[method-assign]

    async def main() -> int:
        async with AsyncMemoryStore(store) as astore:
            pending = asyncio.ensure_future(astore.put("slow"))
            ticks = 0
            while ticks < 5:  # the loop goes on while the put is parked in the worker
                await asyncio.sleep(0)
                ticks += 1
            assert not pending.done()
            release.set()
            await pending
            return await astore.count()

    assert run(main()) == 1


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("aio") / "served.db") as process:
        yield process


def test_an_async_remote_store(server: ServerProcess, tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncMemoryStore(memcommit.RemoteStore(server.url)) as astore:
            ids = await asyncio.gather(*(astore.put(f"remote {i}") for i in range(20)))
            assert [m.text for m in await astore.get_many(ids)] == [
                f"remote {i}" for i in range(20)
            ]  # type: ignore[union-attr]
            run_ = await astore.runs.create(agent_id="agent-1", input={"q": 1})
            claim = await astore.runs.claim(run_.run_id, worker_id="w", ttl_ms=60_000)
            with pytest.raises(memcommit.ClaimLostError):
                await astore.steps.start(run_.run_id, "1", name="n", token=claim.token + 1)
            assert await astore.refresh() >= 0
            assert astore.path is None and astore.read_only is False
            assert await astore.generation() == 0 and await astore.manifest() == []
            assert await astore.store_id() == astore.store.store_id
            assert not await astore.is_purged(ids[0])
            with pytest.raises(memcommit.NotSupported):
                await astore.save_snapshot(tmp_path / "remote.json")

    run(main())
