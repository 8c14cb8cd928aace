"""DeferredCommit: a commit whose operations are checked as they are made and run later.

The operations of :mod:`memcommit.ops`, each checked at once on a native commit that is never
written (the same checks and messages as a local commit), are kept in their wire form; when the
``with`` block ends they go, all at once, to the engine's ``run_commit``: a server's
(:class:`~memcommit.remote.RemoteStore`) or a database's (:mod:`memcommit.postgres`).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from . import ops
from .clock import SystemClock
from .commit import Commit
from .errors import InvalidType

if TYPE_CHECKING:
    from . import _native

__all__ = ["DeferredCommit", "DeferringEngine"]


class DeferringEngine(Protocol):
    """What a :class:`DeferredCommit` needs from its engine."""

    @property
    def scratch(self) -> _native.NativeLog:
        """A log in RAM whose commits check operations (never written)."""
        ...

    @property
    def embedder(self) -> Callable[[list[str]], Any] | None:
        """The store's embedder: the puts without a vector get theirs before the run."""
        ...

    def run_commit(
        self, wire_ops: list[list[Any]], expect_lsn: int | None
    ) -> tuple[int | None, int | None]:
        """Run the operations as one commit; its first and last LSN."""
        ...


_CLOCK = SystemClock().now_us  # never read: a checking commit is never ended


class DeferredCommit:
    """The operations and guards of one commit run later (``with store.commit() as c:``).

    The same methods as :class:`~memcommit.Commit`, one per operation of
    :mod:`memcommit.ops`, each checking its arguments at once on a native commit that is never
    written (the same checks, the same messages) and recording the operation's wire form; the
    operations go to ``engine.run_commit`` when the block ends without an exception. `lsn` and
    `first_lsn` are the LSNs of its last and first record once it is written.
    """

    def __init__(
        self, engine: DeferringEngine, expect_lsn: int | None, id_ms: int | None = None
    ) -> None:
        """A commit whose operations `engine` runs; the ids its puts make carry `id_ms`.

        `id_ms` is the store's time in milliseconds since the epoch, as a local commit's ids
        carry it; None: this host's clock (a server's client, whose store's clock is the
        server's).
        """
        self._engine = engine
        self._expect_lsn = expect_lsn
        # A native commit on a scratch log checks each operation as a local commit would; it
        # is never written (its block is never ended).
        made_ms = time.time_ns() // 1_000_000 if id_ms is None else id_ms
        self._check = Commit(engine.scratch, _CLOCK, None, made_ms)
        self._ops: list[list[Any]] = []
        self._entered = False
        self._ended = False
        self.lsn: int | None = None
        self.first_lsn: int | None = None

    def _add(self, op: ops.Operation, values: dict[str, Any]) -> None:
        if self._ended:
            raise RuntimeError("this commit has already ended; start a new one with store.commit()")
        if not self._entered:
            raise RuntimeError(
                "this commit is not open: use it as `with store.commit() as c:` (its operations "
                "are written when the block ends; without `with` nothing would ever be written)"
            )
        self._ops.append(ops.to_wire(op, values))

    def __enter__(self) -> DeferredCommit:
        self._entered = True
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> Literal[False]:
        if self._ended:
            raise RuntimeError("this commit has already ended; start a new one with store.commit()")
        self._ended = True
        if exc_type is not None:
            return False
        if not self._ops and self._expect_lsn is None:
            return False
        if self._engine.embedder is not None:
            ops.embed_missing(self._ops, self._engine.embedder)
        self.first_lsn, self.lsn = self._engine.run_commit(self._ops, self._expect_lsn)
        return False


def _put_rows(
    self: DeferredCommit,
    rows: Iterable[Mapping[str, Any] | tuple[Any, ...]],
    *,
    fields: Sequence[str] | None = None,
    kind: str = "note",
    task: str | None = None,
    tier: str = "working",
    data: Mapping[str, Any] | None = None,
    tags: Sequence[str] = (),
    sources: Sequence[str] = (),
) -> list[str]:
    rows = list(_once(rows)) if not isinstance(rows, (str, Mapping)) else rows
    ids = self._check.put_rows(
        rows, fields=fields, kind=kind, task=task, tier=tier, data=data, tags=tags, sources=sources
    )
    # Checked: each row travels as the put it makes, every field given.
    order = tuple(fields) if fields is not None else ops.PUT.fields
    defaults = {
        "kind": kind,
        "task": task,
        "tier": tier,
        "data": data,
        "tags": tags,
        "sources": sources,
        "vector": None,
    }
    for row, made in zip(rows, ids, strict=True):
        given = dict(row) if isinstance(row, Mapping) else dict(zip(order, row, strict=False))
        values = {"id": made, "text": given["text"]}
        for name, default in defaults.items():
            value = given.get(name)
            values[name] = default if value is None else value
        self._add(ops.PUT, values)
    return ids


_put_rows.__name__ = "put_rows"
_put_rows.__qualname__ = "DeferredCommit.put_rows"
_put_rows.__doc__ = Commit.put_rows.__doc__
DeferredCommit.put_rows = _put_rows  # type: ignore[attr-defined]


_AS_IS = frozenset({str, bytes, list, tuple, dict, int, float, bool, type(None)})
"""The types most arguments have, which `_once` returns as they are without asking the ABCs."""


def _once(value: Any) -> Any:
    """`value`, with an iterable (a generator, say) made a list, so it can be read twice."""
    if type(value) in _AS_IS:
        return value
    if isinstance(value, (str, bytes, bytearray, Mapping, list, tuple)):
        return value
    return list(value) if isinstance(value, Iterable) else value


def _operation(op: ops.Operation) -> Callable[..., Any]:
    """The method of operation `op`: the native commit's, whose checks run here first.

    It takes the native :class:`~memcommit.Commit` method's parameters (and has its
    docstring); what the check returns (the ids a put made) is the operation's first field
    on the wire, as :mod:`memcommit.ops` declares.
    """
    checked = getattr(Commit, op.name)
    signature = inspect.signature(checked)
    params = list(signature.parameters.values())[1:]  # after self
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        raise InvalidType(f"Commit.{op.name} must name every parameter")
    # What signature.bind would give for a call the native check accepted, without binding
    # each call: the defaults, then the positional values by name, then the keywords.
    names = [p.name for p in params]
    defaults = {p.name: p.default for p in params if p.default is not p.empty}

    def method(self: DeferredCommit, *args: Any, **kwargs: Any) -> Any:
        args = tuple(_once(a) for a in args)
        kwargs = {name: _once(v) for name, v in kwargs.items()}
        made = getattr(self._check, op.name)(*args, **kwargs)
        values = dict(defaults)
        values.update(zip(names, args, strict=False))  # the check took them all
        values.update(kwargs)
        if made is not None:
            values[op.fields[0]] = made
        self._add(op, values)
        return made

    method.__name__ = op.name
    method.__qualname__ = f"DeferredCommit.{op.name}"
    method.__doc__ = checked.__doc__
    method.__signature__ = signature  # type: ignore[attr-defined]
    return method


for _op in ops.OPERATIONS:
    setattr(DeferredCommit, _op.name, _operation(_op))
del _op
