"""Backends and harnesses: how the contract suite gets a store to test.

A **backend** is a name, a factory and a list of known divergences. The factory takes a fresh
temporary directory and yields a :class:`Harness`: the store under test (any object with the
ten role attributes), the :class:`~memcommit.testing.ControllableClock` that store consults
(the server's clock for a remote store), the store's capabilities, for a durable store a
``reopen`` that closes it and opens it again on the same data, and for a store that can also be
opened read-only an ``open_reader`` that does so beside it. The factory may be a context manager
factory, a generator function (``yield`` the harness, clean up after), or a plain function
returning a harness.

Divergences map a test name (``"TestLocks.test_renew_after_expiry_fails"`` or just the
method name) to a written reason. Each becomes a strict xfail: the test must fail, and the
day it passes the run fails until the entry is removed.
"""

from __future__ import annotations

import contextlib
import inspect
import pathlib
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import InvalidType, InvalidValue, NotSupported
from ..clock import CLOCK_START, ControllableClock

__all__ = [
    "Backend",
    "Harness",
    "as_backend",
    "fresh_id",
    "log_backend",
    "memory_backend",
    "opened_backend",
    "requires",
    "store_memory_backend",
]


@dataclass
class Harness:
    """A store under test, with the clock it consults.

    Attributes:
        store: The store: an object with the ten role attributes (``runs`` ...
            ``conversations``).
        clock: The clock the store reads; tests move it.
        capabilities: Optional features the store has: ``"reopen"`` for durable stores,
            ``"read_only"`` for those that can be opened read-only.
        reopener: Closes the store and returns it opened again on the same data, or None.
        reader: Returns the store's data opened again, read-only, beside the store (the
            factory closes it after the test), or None.
    """

    store: Any
    clock: ControllableClock
    capabilities: frozenset[str] = frozenset()
    reopener: Callable[[], Any] | None = None
    reader: Callable[[], Any] | None = None

    def __post_init__(self) -> None:
        if self.reopener is not None:
            self.capabilities = self.capabilities | {"reopen"}
        if self.reader is not None:
            self.capabilities = self.capabilities | {"read_only"}

    def reopen(self) -> Any:
        """Close the store, open it again on the same data with the same clock, and return it.

        Raises:
            NotSupported: The store keeps nothing to reopen (it has no ``reopen`` capability).
        """
        if self.reopener is None:
            raise NotSupported("this store cannot be reopened: it keeps nothing")
        self.store = self.reopener()
        return self.store

    def open_reader(self) -> Any:
        """Open the store's data again, read-only, beside the store, and return it.

        Raises:
            NotSupported: The store cannot be opened read-only (no ``read_only`` capability).
        """
        if self.reader is None:
            raise NotSupported("this store cannot be opened read-only")
        return self.reader()


HarnessFactory = Callable[[pathlib.Path], Any]
"""``factory(tmp_path)``: a context manager or generator yielding a Harness, or a Harness."""


@dataclass(frozen=True)
class Backend:
    """A kind of store the suite runs against.

    Attributes:
        name: A short name for test ids (``"memory"``, ``"log"``, ``"remote"``).
        make: The harness factory (see the module docstring).
        divergences: Test name to the reason it is known to fail on this backend.
    """

    name: str
    make: HarnessFactory
    divergences: Mapping[str, str] = field(default_factory=dict)

    @contextlib.contextmanager
    def open(self, tmp_path: pathlib.Path) -> Iterator[Harness]:
        """Yield a harness from :attr:`make`, cleaning up after."""
        made = self.make(tmp_path)
        if isinstance(made, Harness):
            yield made
        elif inspect.isgenerator(made):
            harness = next(made)
            try:
                yield _checked(self.name, harness)
            finally:
                with contextlib.suppress(StopIteration):
                    next(made)
        elif isinstance(made, contextlib.AbstractContextManager):
            with made as entered:
                yield _checked(self.name, entered)
        else:
            raise InvalidType(
                f"backend {self.name!r}: make() returned {type(made).__name__}, not a Harness, "
                "a generator or a context manager"
            )


def _checked(name: str, harness: object) -> Harness:
    if not isinstance(harness, Harness):
        raise InvalidType(f"backend {name!r}: yielded {type(harness).__name__}, not a Harness")
    return harness


def as_backend(factory: Backend | HarnessFactory, name: str | None = None) -> Backend:
    """Return `factory` as a :class:`Backend` (a bare factory gets its function's name)."""
    if isinstance(factory, Backend):
        return factory
    if not callable(factory):
        raise InvalidType(f"factory must be a Backend or callable, not {type(factory).__name__}")
    return Backend(name or str(getattr(factory, "__name__", "backend")), factory)


def _memory_harness(tmp_path: pathlib.Path) -> Harness:
    from ...roles import RoleSet

    clock = ControllableClock(CLOCK_START)
    return Harness(store=RoleSet(clock=clock), clock=clock)


def memory_backend() -> Backend:
    """Return the in-memory backend: a :class:`~memcommit.roles.RoleSet` per test."""
    return Backend("memory", _memory_harness)


def opened_backend(name: str, where: Callable[[pathlib.Path], str]) -> Backend:
    """Return a backend of stores :func:`memcommit.open` opens at ``where(tmp_path)``.

    `where` names a new store per test (a log file in `tmp_path`, or a ``postgresql://`` URL
    with a store of its own); the harness can ``reopen`` it there, with the same clock, and
    open it there ``read_only=True`` beside it.
    """

    def make(tmp_path: pathlib.Path) -> Iterator[Harness]:
        import memcommit

        clock = ControllableClock(CLOCK_START)
        place = where(tmp_path)
        stores = [memcommit.open(place, clock=clock)]
        readers: list[Any] = []

        def reopen() -> Any:
            stores[-1].close()
            stores.append(memcommit.open(place, clock=clock))
            return stores[-1]

        def read_only() -> Any:
            readers.append(memcommit.open(place, clock=clock, read_only=True))
            return readers[-1]

        yield Harness(store=stores[0], clock=clock, reopener=reopen, reader=read_only)
        for reader in readers:
            reader.close()
        stores[-1].close()

    return Backend(name, make)


def log_backend() -> Backend:
    """Return the durable backend: a :class:`~memcommit.MemoryStore` on a log file per test.

    It has ``reopen``: the roles' records are in its log.
    """
    return opened_backend("log", lambda tmp: str(tmp / f"roles-{uuid.uuid4().hex[:8]}.db"))


def _store_memory_harness(tmp_path: pathlib.Path) -> Harness:
    import memcommit

    clock = ControllableClock(CLOCK_START)
    return Harness(store=memcommit.create_memory_store(clock=clock), clock=clock)


def store_memory_backend() -> Backend:
    """Return ``memcommit.create_memory_store(clock=)``: the same store over a log in RAM."""
    return Backend("memory-store", _store_memory_harness)


def fresh_id(prefix: str) -> str:
    """Return a new unique id, so tests never collide in a shared database."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def fresh_sized_id(prefix: str, size: int) -> str:
    """Return a new unique id of exactly `size` bytes: :func:`fresh_id`, padded with ``x``."""
    made = fresh_id(prefix)
    if size < len(made):
        raise InvalidValue(f"size: {size} is shorter than a fresh id ({len(made)} bytes)")
    return made + "x" * (size - len(made))


def stated_most(message: str) -> int:
    """Return N from the "at most N bytes" that an error's message states."""
    found = re.search(r"at most (\d+) bytes", message)
    assert found is not None, f"no 'at most N bytes' in {message!r}"
    return int(found.group(1))


def fresh_run(store: Any) -> str:
    """Create a pending run of a fresh agent, under a fresh id, in `store`; return its id."""
    run_id = fresh_id("run")
    store.runs.create(agent_id=fresh_id("agent"), run_id=run_id)
    return run_id


def requires(harness: Harness, capability: str) -> None:
    """Skip the calling test unless the harness has `capability`."""
    if capability not in harness.capabilities:
        import pytest

        pytest.skip(f"the store has no {capability!r} capability")
