"""AsyncMemoryStore: a store for an asyncio event loop.

The store's API is synchronous (ROLES.md decision 9); this facade gives every method as a
coroutine, so an event loop never blocks on an fsync or a network round trip:

* **Writes** (``put``, ``stale``, ``restore``, ``move``, ``finish_task``, the end of an
  ``async with astore.commit()`` block, ``flush``, ``close``) and **every role call** run in
  one worker thread, one at a time, in the order they were awaited. A commit awaited before
  another is written before it, as on one thread.
* **Reads** (``get``, ``find``, ``history``, ``records``, ...) run on a few reader threads,
  beside the writer; a read awaited after a write sees it.

It wraps any store: :func:`memcommit.open`, ``create_memory_store()`` or a
:class:`~memcommit.RemoteStore`.

Example:
    >>> import asyncio, memcommit
    >>> async def main() -> str:
    ...     async with memcommit.AsyncMemoryStore(memcommit.open(":memory:")) as astore:
    ...         mid = await astore.put("User prefers dark mode", kind="fact")
    ...         async with astore.commit() as c:
    ...             c.move(mid, "long")
    ...         lease = await astore.locks.acquire("job", "replica-a", 1_000)
    ...         return (await astore.get(mid)).tier
    >>> asyncio.run(main())
    'long'
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from ._native import Record
from .commit import Commit, check_u64
from .engine import MEMORY, Engine
from .errors import InvalidType, InvalidValue, StoreClosed
from .roles.roleset import ROLE_NAMES
from .seals import AutoSeal, Seal
from .search import Embedder
from .store import MemoryStore

__all__ = ["AsyncCommit", "AsyncMemoryStore", "AsyncRole"]

T = TypeVar("T")
P = ParamSpec("P")

_RECORD_CHUNK = 4096


class AsyncRole:
    """A role of an :class:`AsyncMemoryStore`: every public method of the role, as a coroutine.

    Calls run in the store's one worker thread, in the order they are awaited.
    """

    def __init__(self, role: Any, run: Callable[[Callable[[], Any]], Any]) -> None:
        self._role = role
        self._run = run

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        attribute = getattr(self._role, name)
        if not callable(attribute):
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._run(functools.partial(attribute, *args, **kwargs))

        functools.update_wrapper(call, attribute)
        del call.__wrapped__  # type: ignore[attr-defined]
        return call

    def __dir__(self) -> list[str]:
        return sorted(
            name
            for name in dir(self._role)
            if not name.startswith("_") and callable(getattr(self._role, name, None))
        )

    def __repr__(self) -> str:
        return f"<async {self._role!r}>"


def _forwarded(
    method: Callable[Concatenate[MemoryStore, P], T], *, writes: bool
) -> Callable[Concatenate[AsyncMemoryStore, P], Coroutine[Any, Any, T]]:
    """The store's `method` as a coroutine, with its name, parameters and docstring.

    A write runs in the worker thread (in order), a read on a reader thread.
    """
    name = method.__name__

    async def call(self: AsyncMemoryStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        run = self._write if writes else self._read
        # Looked up on the store each call, as a direct call would (it may be wrapped).
        bound: Callable[P, T] = getattr(self.store, name)
        return await run(functools.partial(bound, *args, **kwargs))

    functools.update_wrapper(call, method)
    return call


class AsyncCommit:
    """``async with astore.commit(expect_lsn=...) as c:`` -- collect, then commit in the worker.

    Inside the block `c` is the store's own commit object: ``c.put(...)``, ``c.expect(...)``
    and the rest are plain calls (they only collect; nothing is sent or written until the
    block ends). The end of the block runs the commit in the worker thread.
    """

    def __init__(
        self,
        begin: Callable[[], Commit],
        write: Callable[[Callable[[], bool]], Awaitable[bool]],
    ) -> None:
        self._begin = begin
        self._write = write
        self._commit: Any = None

    async def __aenter__(self) -> Any:
        self._commit = self._begin()
        return self._commit.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        commit = self._commit
        return bool(await self._write(lambda: commit.__exit__(exc_type, exc, tb)))

    @property
    def lsn(self) -> int | None:
        """The LSN of the commit's last record, once written."""
        return None if self._commit is None else self._commit.lsn

    @property
    def first_lsn(self) -> int | None:
        """The LSN of the commit's first record, once written."""
        return None if self._commit is None else self._commit.first_lsn


class AsyncMemoryStore:
    """Every method of a store as a coroutine; writes in one worker thread, in order.

    Every public member of :class:`~memcommit.MemoryStore` is here under the same name:
    methods as coroutines (``records`` as an async iterator, ``commit`` as an ``async with``
    block); the properties that read the store's state (``lsn``, ``generation``,
    ``store_id``, ``recovered_bytes``) as coroutine methods, since reading them may catch a
    :class:`~memcommit.RemoteStore` up over the network; ``path``, ``read_only`` and
    ``closed``, fixed facts, as properties. ``len(store)`` is :meth:`count` and
    ``id in store`` is :meth:`contains`. Once the facade is closed, every call (a role's, the
    end of a commit block, a read) raises :class:`~memcommit.StoreClosed`, as on the store.

    Args:
        store: The store to wrap (a :class:`~memcommit.MemoryStore` or a
            :class:`~memcommit.RemoteStore`). Closing the facade closes it.
        readers: Threads for reads (default 4).

    Raises:
        StoreClosed: `store` is closed.

    Attributes:
        store: The wrapped store, for synchronous use from other threads.
        runs, steps, checkpoints, idempotency, locks, effects, state, artifacts,
        agent_revisions, conversations: The roles, as :class:`AsyncRole` (coroutine methods
            run in the worker thread).
    """

    runs: AsyncRole
    steps: AsyncRole
    checkpoints: AsyncRole
    idempotency: AsyncRole
    locks: AsyncRole
    effects: AsyncRole
    state: AsyncRole
    artifacts: AsyncRole
    agent_revisions: AsyncRole
    conversations: AsyncRole

    def __init__(self, store: MemoryStore, *, readers: int = 4) -> None:
        if not isinstance(store, MemoryStore):
            raise InvalidType(
                f"store must be a MemoryStore or RemoteStore, not {type(store).__name__}"
            )
        if isinstance(readers, bool) or not isinstance(readers, int) or readers < 1:
            raise InvalidValue(f"readers: must be a positive int, got {readers!r}")
        self.store = store
        # Where the log is, as the store's own StoreClosed names it.
        self._where: str = store.path or getattr(store.engine, "url", None) or MEMORY
        if store.closed:
            raise StoreClosed(f"the store {self._where} is closed")
        # Fixed at open. A RemoteStore's is False (the server writes), and asking its
        # `read_only` would catch its replica up over the network; any other store answers
        # from memory.
        self._read_only = False if "remote" in store.capabilities else store.read_only
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="memcommit-commit")
        self._readers = ThreadPoolExecutor(readers, thread_name_prefix="memcommit-read")
        self._closing: Future[None] | None = None  # the store's close, once close() began
        for name in ROLE_NAMES:
            setattr(self, name, AsyncRole(getattr(store, name), self._write))

    def _check_open(self) -> None:
        """Raise StoreClosed once close() began (the threads take no more work)."""
        if self._closing is not None:
            raise StoreClosed(f"the store {self._where} is closed")

    async def _run(self, executor: Executor, fn: Callable[[], T]) -> T:
        self._check_open()
        return await asyncio.get_running_loop().run_in_executor(executor, fn)

    async def _write(self, fn: Callable[[], T]) -> T:
        return await self._run(self._writer, fn)

    async def _read(self, fn: Callable[[], T]) -> T:
        return await self._run(self._readers, fn)

    def _begin(self, expect_lsn: int | None) -> Commit:
        self._check_open()
        return self.store.commit(expect_lsn)

    # -- writes, in the worker thread --------------------------------------------------------

    def commit(self, expect_lsn: int | None = None) -> AsyncCommit:
        """Start a commit: ``async with astore.commit(expect_lsn=head) as c: c.put(...)``.

        Raises:
            Rejected: (at the end of the block) a guard failed; nothing was written.
        """
        return AsyncCommit(functools.partial(self._begin, expect_lsn), self._write)

    put = _forwarded(MemoryStore.put, writes=True)
    stale = _forwarded(MemoryStore.stale, writes=True)
    restore = _forwarded(MemoryStore.restore, writes=True)
    move = _forwarded(MemoryStore.move, writes=True)
    finish_task = _forwarded(MemoryStore.finish_task, writes=True)

    async def flush(self) -> None:
        """Make everything written so far durable (after the writes awaited before it)."""
        await self._write(self.store.flush)

    async def refresh(self, *args: Any, **kwargs: Any) -> int:
        """Apply what others committed (see the wrapped store's ``refresh``)."""
        return await self._read(lambda: self.store.refresh(*args, **kwargs))

    # -- reads, on the reader threads --------------------------------------------------------

    get = _forwarded(MemoryStore.get, writes=False)
    get_many = _forwarded(MemoryStore.get_many, writes=False)
    find = _forwarded(MemoryStore.find, writes=False)
    search = _forwarded(MemoryStore.search, writes=False)
    wait_for_vector_index = _forwarded(MemoryStore.wait_for_vector_index, writes=False)
    history = _forwarded(MemoryStore.history, writes=False)

    def records(self, after: int = 0) -> AsyncIterator[Record]:
        """Iterate over every record with an LSN above `after` (read in chunks off the loop).

        `after` is checked at the call, as the store's ``records`` checks it.

        Raises:
            TypeError: `after` is not an int.
            ValueError: `after` is not an LSN (negative, or above 2**64 - 1).
        """
        return self._records(check_u64(after, "after"))

    async def _records(self, after: int) -> AsyncIterator[Record]:
        iterator = await self._read(lambda: self.store.records(after))

        def chunk() -> list[Record]:
            out = []
            for record in iterator:
                out.append(record)
                if len(out) >= _RECORD_CHUNK:
                    break
            return out

        while True:
            records = await self._read(chunk)
            for record in records:
                yield record
            if len(records) < _RECORD_CHUNK:
                return

    is_task_finished = _forwarded(MemoryStore.is_task_finished, writes=False)

    async def lsn(self) -> int:
        """The newest committed LSN (the store's ``lsn``)."""
        return await self._read(lambda: self.store.lsn)

    async def count(self) -> int:
        """How many memories the store holds (``len(store)``)."""
        return await self._read(lambda: len(self.store))

    async def contains(self, id: str) -> bool:
        """Whether the store has memory `id` (``id in store``)."""
        return await self._read(lambda: id in self.store)

    async def info(self) -> dict[str, Any]:
        """Facts about the store (the store's ``info()``)."""
        return await self._read(self.store.info)

    context = _forwarded(MemoryStore.context, writes=False)

    lineage = _forwarded(MemoryStore.lineage, writes=False)

    descendants = _forwarded(MemoryStore.descendants, writes=False)

    async def seals(self) -> list[Seal]:
        """The seals of the current log generation (``store.seals()``)."""
        return await self._read(self.store.seals)

    is_purged = _forwarded(MemoryStore.is_purged, writes=False)

    async def manifest(self) -> list[dict[str, Any]]:
        """The compaction manifest's entries, oldest first (``store.manifest()``)."""
        return await self._read(self.store.manifest)

    async def save_snapshot(self, path: str | os.PathLike[str]) -> None:
        """Write the store's state as JSON to `path` (``store.save_snapshot``), off the loop.

        It sees every write awaited before it.
        """
        await self._read(lambda: self.store.save_snapshot(path))

    async def generation(self) -> int:
        """The log generation (the store's ``generation``)."""
        return await self._read(lambda: self.store.generation)

    async def store_id(self) -> str:
        """The store's random id (the store's ``store_id``)."""
        return await self._read(lambda: self.store.store_id)

    async def recovered_bytes(self) -> int:
        """Bytes cut from the file's tail at open (the store's ``recovered_bytes``)."""
        return await self._read(lambda: self.store.recovered_bytes)

    # -- the facade itself -------------------------------------------------------------------

    @property
    def path(self) -> str | None:
        """The store's log file, or None (in RAM, or a RemoteStore): fixed at open."""
        return self.store.path

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only: fixed at open, read when the facade was made."""
        return self._read_only

    @property
    def engine(self) -> Engine:
        """The engine under the store (the store's ``engine``)."""
        return self.store.engine

    @property
    def auto_seal(self) -> AutoSeal | None:
        """The AutoSeal attached to the store, or None (the store's ``auto_seal``)."""
        return self.store.auto_seal

    @property
    def capabilities(self) -> frozenset[str]:
        """What the store can do beyond reads and commits (the store's ``capabilities``)."""
        return self.store.capabilities

    @property
    def embedder(self) -> Embedder | None:
        """The store's embedder, or None (the store's ``embedder``)."""
        return self.store.embedder

    async def now_us(self) -> int:
        """The store's clock, in microseconds (the store's ``now_us()``)."""
        return await self._read(self.store.now_us)

    @property
    def closed(self) -> bool:
        """Whether the facade (and its store) is closed.

        True once :meth:`close` began (the store's close may still be waiting for the writes
        awaited before it), or once the store was closed directly.
        """
        return self._closing is not None or self.store.closed

    async def close(self) -> None:
        """Close the store after every write awaited before, then stop the threads.

        The store's close runs even if the caller is cancelled (or times out) while it waits
        for those writes; every ``close()`` returns once it ran, raising its error if it failed.
        Safe to call twice.
        """
        if self._closing is None:
            # Submitted to the worker directly: cancelling the caller cannot take it off the
            # queue, and the threads stop once the queue is done.
            self._closing = self._writer.submit(self.store.close)
            self._writer.shutdown(wait=False)
            self._readers.shutdown(wait=False)
        await asyncio.shield(asyncio.wrap_future(self._closing))

    async def __aenter__(self) -> AsyncMemoryStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncMemoryStore over {self.store!r}>"
