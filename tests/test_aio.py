"""AsyncMemoryStore: every method a coroutine; writes in one worker thread, in order."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

import memcommit
from memcommit.aio import AsyncMemoryStore, AsyncRole
from memcommit.errors import to_wire
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
                made = getattr(astore, name)()
                if name == "records":
                    # It checks its arguments at the call, as the store's does, then gives an
                    # async iterator (an async generator's, which reads nothing until iterated).
                    assert inspect.isasyncgen(made), name
                    await made.aclose()
                else:
                    # Not awaited itself: it must give an async context manager (commit).
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


@pytest.mark.parametrize(
    "after", [-1, 2**64, True, "1", None], ids=["negative", "too-big", "bool", "str", "none"]
)
def test_records_checks_after_at_the_call_as_the_store_does(tmp_path: Path, after: object) -> None:
    """``astore.records(after=-1)`` raised only once the iteration began; the store's
    ``records(after=-1)`` raises at the call: the same error, at the same point."""
    store = memcommit.open(tmp_path / "after.db")
    store.put("one memory")
    with pytest.raises((TypeError, ValueError)) as sync:
        store.records(after=after)  # type: ignore[arg-type]

    async def main() -> None:
        async with AsyncMemoryStore(store) as astore:
            with pytest.raises(type(sync.value)) as raised:
                astore.records(after=after)  # type: ignore[arg-type]
            assert str(raised.value) == str(sync.value)
            assert [r.lsn async for r in astore.records(after=0)] == [1]

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


def stalled_puts(store: MemoryStore) -> tuple[threading.Event, threading.Event, threading.Event]:
    """Make `store.put` wait for the `release` event (`started` is set as it waits).

    `closed` is set once `store.close()` returned (``store.closed`` is True a little before:
    as the close begins).
    """
    started, release, closed = threading.Event(), threading.Event(), threading.Event()
    original_put, original_close = store.put, store.close

    def slow_put(*args: object, **kwargs: object) -> str:
        started.set()
        release.wait(30)
        return original_put(*args, **kwargs)  # type: ignore[arg-type]

    def close() -> None:
        original_close()
        closed.set()

    store.put = slow_put  # type: ignore[method-assign]
    store.close = close  # type: ignore[method-assign]
    return started, release, closed


async def wait_until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("where", ["file", "ram"])
def test_every_call_on_a_closed_facade_raises_store_closed(tmp_path: Path, where: str) -> None:
    """As on the sync store: StoreClosed (not the executor's RuntimeError), naming the store."""
    store = memcommit.open(tmp_path / "closed.db" if where == "file" else ":memory:")
    mid = store.put("kept")
    store.close()
    with pytest.raises(memcommit.StoreClosed) as sync:
        store.get(mid)
    with pytest.raises(memcommit.StoreClosed, match="is closed"):
        AsyncMemoryStore(store)  # a facade over a closed store
    reopened = memcommit.open(tmp_path / "closed.db" if where == "file" else ":memory:")

    async def main() -> None:
        astore = AsyncMemoryStore(reopened)
        await astore.close()
        assert astore.closed
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "put": lambda: astore.put("late"),
            "get": lambda: astore.get(mid),
            "find": lambda: astore.find(),
            "lsn": lambda: astore.lsn(),
            "flush": lambda: astore.flush(),
            "refresh": lambda: astore.refresh(),
            "info": lambda: astore.info(),
            "locks.acquire": lambda: astore.locks.acquire("job", "a", 1_000),
            "runs.create": lambda: astore.runs.create(agent_id="agent-1"),
        }
        for name, call in calls.items():
            with pytest.raises(memcommit.StoreClosed) as raised:
                await call()
            assert to_wire(raised.value)["code"] == "store_closed", name
            assert str(raised.value) == str(sync.value), name
        with pytest.raises(memcommit.StoreClosed, match="is closed"):
            async with astore.commit() as c:
                c.put("late")
        with pytest.raises(memcommit.StoreClosed, match="is closed"):
            [r async for r in astore.records()]
        await astore.close()  # closing again is fine

    run(main())


def test_a_cancelled_close_still_closes_the_store(tmp_path: Path) -> None:
    """A close() that times out behind a slow write closes the store once the write is done."""
    path = tmp_path / "cancelled.db"
    store = memcommit.open(path)
    started, release, closed = stalled_puts(store)

    async def main() -> None:
        astore = AsyncMemoryStore(store)
        put = asyncio.ensure_future(astore.put("slow"))
        await wait_until(started.is_set)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(astore.close(), 0.05)
        assert astore.closed and not store.closed  # closing: the write runs first
        with pytest.raises(memcommit.StoreClosed):
            await astore.put("after close")
        release.set()
        assert await put  # the write awaited before close() is written
        await wait_until(closed.is_set)  # with nobody awaiting the close any more
        await astore.close()

    run(main())
    with memcommit.open(path) as reopened:  # not StoreLocked: the file was released
        assert [m.text for m in reopened.find()] == ["slow"]


def test_a_later_close_closes_the_store_after_a_cancelled_one(tmp_path: Path) -> None:
    """A close() after a cancelled one waits for the store's close, then the file is free."""
    path = tmp_path / "again.db"
    store = memcommit.open(path)
    started, release, closed = stalled_puts(store)

    async def main() -> None:
        astore = AsyncMemoryStore(store)
        put = asyncio.ensure_future(astore.put("slow"))
        await wait_until(started.is_set)
        closing = asyncio.ensure_future(astore.close())
        await asyncio.sleep(0.05)
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing
        asyncio.get_running_loop().call_later(0.05, release.set)
        await astore.close()
        assert closed.is_set() and await put

    run(main())
    with memcommit.open(path) as reopened:
        assert len(reopened) == 1


def test_a_task_cancelled_in_the_exit_of_async_with_still_closes_the_store(
    tmp_path: Path,
) -> None:
    path = tmp_path / "exit.db"
    store = memcommit.open(path)
    started, release, closed = stalled_puts(store)

    async def main() -> None:
        puts: list[asyncio.Future[str]] = []

        async def body() -> None:
            async with AsyncMemoryStore(store) as astore:
                puts.append(asyncio.ensure_future(astore.put("slow")))
                await wait_until(started.is_set)
            # The exit awaits close(), behind the slow write.

        task = asyncio.ensure_future(body())
        await wait_until(lambda: bool(puts) and started.is_set())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        assert await puts[0]
        await wait_until(closed.is_set)  # with nobody awaiting the close any more

    run(main())
    with memcommit.open(path) as reopened:
        assert [m.text for m in reopened.find()] == ["slow"]


def test_closed_is_true_once_the_store_was_closed_directly(tmp_path: Path) -> None:
    async def main() -> None:
        astore = AsyncMemoryStore(memcommit.open(tmp_path / "direct.db"))
        assert not astore.closed
        astore.store.close()
        assert astore.closed
        with pytest.raises(memcommit.StoreClosed):
            await astore.put("late")
        await astore.close()
        assert astore.closed

    run(main())


def test_read_only_is_a_fixed_fact(tmp_path: Path) -> None:
    """Read when the facade is made: still known once the store is closed."""
    path = tmp_path / "reader.db"
    with memcommit.open(path) as writer:
        writer.put("one")
        reader = AsyncMemoryStore(memcommit.open(path, read_only=True))
        written = AsyncMemoryStore(writer)
        assert reader.read_only is True and written.read_only is False
        run(reader.close())
        assert reader.read_only is True
        writer.close()
        assert written.read_only is False
        run(written.close())


def test_read_only_of_a_remote_store_asks_no_server(
    server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither making the facade nor reading `read_only` does a round trip on the loop."""
    remote = memcommit.RemoteStore(server.url)
    asked: list[str] = []

    def no_round_trip(*args: object) -> object:
        asked.append("info")
        raise AssertionError("read_only asked the server")

    monkeypatch.setattr(remote.engine, "info", no_round_trip)
    monkeypatch.setattr(remote.engine, "view", no_round_trip)
    astore = AsyncMemoryStore(remote)
    assert astore.read_only is False and asked == []
    monkeypatch.undo()
    run(astore.close())


def test_a_closed_facade_over_a_remote_store_raises_store_closed(server: ServerProcess) -> None:
    async def main() -> None:
        astore = AsyncMemoryStore(memcommit.RemoteStore(server.url))
        await astore.close()
        with pytest.raises(memcommit.StoreClosed, match=server.url):
            await astore.put("late")
        with pytest.raises(memcommit.StoreClosed, match=server.url):
            await astore.locks.acquire("job", "a", 1_000)

    run(main())
