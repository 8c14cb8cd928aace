"""RemoteCommit: a commit whose operations are checked here and run by the server."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from .. import ops
from ..clock import SystemClock
from ..commit import Commit, as_str_tuple
from ..engine import clock_for_commit

if TYPE_CHECKING:
    from .engine import RemoteEngine

__all__ = ["RemoteCommit"]

_CLOCK = clock_for_commit(SystemClock().now_us)  # never read: a checking commit is never ended


class RemoteCommit:
    """The operations and guards of one commit to a server (``with store.commit() as c:``).

    The same methods as :class:`~memcommit.Commit`, each checking its arguments at once
    exactly as a local commit does (the same checks, the same messages); the commit travels
    to the server when the block ends without an exception. `lsn` and `first_lsn` are the
    LSNs of its last and first record once it is written.
    """

    def __init__(self, engine: RemoteEngine, expect_lsn: int | None) -> None:
        self._engine = engine
        self._expect_lsn = expect_lsn
        # A native commit on a scratch log checks each operation as a local commit would; it
        # is never written (its block is never ended).
        self._check = Commit(engine.scratch, _CLOCK, None, time.time_ns() // 1_000_000)
        self._ops: list[list[Any]] = []
        self._entered = False
        self._ended = False
        self.lsn: int | None = None
        self.first_lsn: int | None = None

    def _add(self, op: ops.Operation, **values: Any) -> None:
        if self._ended:
            raise RuntimeError("this commit has already ended; start a new one with store.commit()")
        if not self._entered:
            raise RuntimeError(
                "this commit is not open: use it as `with store.commit() as c:` (its operations "
                "are written when the block ends; without `with` nothing would ever be written)"
            )
        self._ops.append(ops.to_wire(op, values))

    def put(
        self,
        text: str,
        *,
        kind: str = "note",
        id: str | None = None,
        task: str | None = None,
        tier: str = "working",
        data: Mapping[str, Any] | None = None,
        tags: Sequence[str] = (),
        sources: Sequence[str] = (),
    ) -> str:
        """Create a memory, or replace the content of an existing id. Returns the id."""
        mid = self._check.put(
            text, kind=kind, id=id, task=task, tier=tier, data=data, tags=tags, sources=sources
        )
        self._add(
            ops.PUT,
            id=mid,
            text=text,
            kind=kind,
            task=task,
            tier=tier,
            data=data,
            tags=as_str_tuple(tags, "tags"),
            sources=as_str_tuple(sources, "sources"),
        )
        return mid

    def put_many(
        self,
        texts: Sequence[str],
        *,
        kind: str | Sequence[str] = "note",
        ids: Sequence[str] | None = None,
        task: str | Sequence[str | None] | None = None,
        tier: str = "working",
        data: Mapping[str, Any] | None = None,
        tags: Sequence[str] = (),
        sources: Sequence[str] = (),
    ) -> list[str]:
        """Put many memories; `kind` and `task` one value for all or one per text."""
        if not isinstance(texts, str):
            texts = list(texts)
        if kind is not None and not isinstance(kind, str):
            kind = list(kind)
        if task is not None and not isinstance(task, str):
            task = list(task)
        if ids is not None and not isinstance(ids, str):
            ids = list(ids)
        made = self._check.put_many(
            texts, kind=kind, ids=ids, task=task, tier=tier, data=data, tags=tags, sources=sources
        )
        self._add(
            ops.PUT_MANY,
            ids=made,
            texts=texts,
            kind=kind,
            task=task,
            tier=tier,
            data=data,
            tags=as_str_tuple(tags, "tags"),
            sources=as_str_tuple(sources, "sources"),
        )
        return made

    def stale(self, id: str, reason: str | None = None) -> None:
        """Mark memory `id` stale."""
        self._check.stale(id, reason)
        self._add(ops.STALE, id=id, reason=reason)

    def restore(self, id: str) -> None:
        """Mark memory `id` active again."""
        self._check.restore(id)
        self._add(ops.RESTORE, id=id)

    def move(self, id: str, tier: str) -> None:
        """Move memory `id` to `tier`."""
        self._check.move(id, tier)
        self._add(ops.MOVE, id=id, tier=tier)

    def finish_task(self, task: str) -> None:
        """Mark `task` finished."""
        self._check.finish_task(task)
        self._add(ops.FINISH_TASK, task=task)

    def expect(
        self,
        id: str,
        *,
        exists: bool | None = None,
        status: str | None = None,
        tier: str | None = None,
        lsn: int | None = None,
    ) -> None:
        """Guard: refuse the commit unless memory `id` is as given when the server runs it."""
        self._check.expect(id, exists=exists, status=status, tier=tier, lsn=lsn)
        self._add(ops.EXPECT, id=id, exists=exists, status=status, tier=tier, lsn=lsn)

    def __enter__(self) -> RemoteCommit:
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
        self.first_lsn, self.lsn = self._engine.run_commit(self._ops, self._expect_lsn)
        return False
