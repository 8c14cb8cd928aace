"""RemoteStore and RemoteCommit: the store API, with commits run by the server.

What a read sees and when is the replica's (:mod:`.replica`); how requests travel, the
pipelining and the resends, the pipeline's (:mod:`.pipeline`). See :mod:`memcommit.remote`.
"""

from __future__ import annotations

import http.client
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, cast

from .. import _native, ops, wire
from .._native import Memory, Record
from ..commit import Commit, as_str_tuple, check_u64
from ..errors import NotSupported
from ..roles.logmedium import LogMedium
from ..roles.roleset import ROLE_NAMES
from ..store import MemoryStore
from .pipeline import Pipeline
from .replica import Replica
from .roles import remote_role

__all__ = ["RemoteCommit", "RemoteStore"]


class RemoteCommit:
    """The operations and guards of one commit to a server (``with store.commit() as c:``).

    The same methods as :class:`~memcommit.Commit`, each checking its arguments at once
    exactly as a local commit does (the same checks, the same messages); the commit travels
    to the server when the block ends without an exception. `lsn` and `first_lsn` are the
    LSNs of its last and first record once it is written.
    """

    def __init__(self, store: RemoteStore, expect_lsn: int | None) -> None:
        self._store = store
        self._expect_lsn = expect_lsn
        # A native commit on a scratch log checks each operation as a local commit would; it
        # is never written (its block is never ended).
        self._check = Commit(store._scratch, store.now_us, None, time.time_ns() // 1_000_000)
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
        result = self._store._submit(
            {"id": self._store._commit_id(), "expect_lsn": self._expect_lsn, "ops": self._ops}
        )
        self.first_lsn, self.lsn = result["first_lsn"], result["lsn"]
        if self.lsn is not None:
            self._store._wrote(self.lsn)
        return False


class RemoteStore(MemoryStore):
    """A store served by ``memcommit serve``: commits on the server, reads from a replica.

    See :mod:`memcommit.remote` for what reads see and when. The roles (``runs``, ``locks``...)
    run on the server, every call of them (reads included), under the server's one roles
    lock; their errors arrive as the same classes.

    Args:
        url: The server, e.g. ``"http://127.0.0.1:7411"`` (``https://`` for TLS).
        token: The server's bearer token, if it has one.
        timeout: Seconds to wait for an answer to one request.
        retry_seconds: How long to keep resending when the server cannot be reached (it is
            restarting, say) before raising :class:`~memcommit.wire.ServerUnavailable`.
        ca_file: A PEM file of the certificate authority (or self-signed certificate) to
            trust for ``https://``; the system's by default.
        follow: Keep a thread pulling commits as they happen, so reads stay current without
            calling :meth:`refresh`.
        max_in_flight: Requests this store keeps in flight at once (commits from many threads
            ride along in them).

    Raises:
        ServerError: The server refused (401: wrong token) or could not be reached.

    Example:
        >>> store = RemoteStore("http://127.0.0.1:7411")  # doctest: +SKIP
        >>> with store.commit() as c:  # doctest: +SKIP
        ...     fact = c.put("User prefers dark mode", kind="fact")
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        retry_seconds: float = 10.0,
        ca_file: str | None = None,
        follow: bool = False,
        max_in_flight: int = 2,
    ) -> None:
        if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int):
            raise TypeError(f"max_in_flight must be int, not {type(max_in_flight).__name__}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight: must be at least 1, got {max_in_flight}")
        self._pipeline = Pipeline(
            url,
            token,
            timeout=timeout,
            retry_seconds=retry_seconds,
            ca_file=ca_file,
            max_in_flight=max_in_flight,
            on_answer=self._note,
        )
        self._http = self._pipeline.http
        self._scratch = _native.NativeLog.memory()
        self._follower: threading.Thread | None = None
        try:
            self._replica = Replica(self._pipeline, on_replace=self._replaced)
        except BaseException:
            self._http.close()
            raise
        manifest = self._replica.manifest
        super().__init__(self._replica.log, clock=None, path=None)
        self._manifest = manifest
        for name in ROLE_NAMES:
            setattr(self, name, cast(Any, remote_role(name)(self._call, self.url)))
        if follow:
            self._follower = threading.Thread(
                target=self._replica.follow, name="memcommit-follow", daemon=True
            )
            self._follower.start()

    # -- the server and the replica ----------------------------------------------------------

    @property
    def url(self) -> str:
        """The server's URL."""
        return self._pipeline.url

    def _check_open(self) -> None:
        self._pipeline.check_open()

    def _note(self, headers: http.client.HTTPMessage) -> None:
        """Take in the identity headers of an answer (once the replica exists)."""
        replica: Replica | None = getattr(self, "_replica", None)
        if replica is not None:
            replica.note(headers)

    def _replaced(self, log: _native.NativeLog, manifest: list[dict[str, Any]]) -> None:
        """A resync replaced the replica's log."""
        self._medium = LogMedium(log, self.now_us)
        self._manifest = manifest

    def _fresh(self) -> None:
        """Before a read: the replica is of the server's log, with this store's commits."""
        self._replica.fresh()

    def _submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Send one commit or role call (pipelined with other threads'); return its result."""
        return self._pipeline.submit(spec)

    def _commit_id(self) -> str:
        return self._pipeline.new_id()

    def _wrote(self, lsn: int) -> None:
        self._replica.wrote(lsn)

    def _call(self, role: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run a role method on the server and return what it returned."""
        result = self._submit(
            {
                "id": self._commit_id(),
                "role": role,
                "method": method,
                "args": [wire.encode_value(a) for a in args],
                "kwargs": {k: wire.encode_value(v) for k, v in kwargs.items()},
            }
        )
        if result.get("lsn") is not None:
            self._wrote(int(result["lsn"]))
        return wire.decode_value(result.get("value"))

    def refresh(self, wait: float = 0.0) -> int:
        """Apply what was committed on the server since the last look.

        Args:
            wait: Seconds to wait for a commit when there is none yet (a long poll); 0 returns
                at once.

        Returns:
            How many records were applied (after a resync: how many the new replica holds).
        """
        return self._replica.refresh(wait)

    @property
    def capabilities(self) -> frozenset[str]:
        """``"remote"`` and ``"seal"``: the server runs the commits and writes the seals.

        The log file, and so log compaction and snapshots, are the server's.
        """
        return frozenset({"remote", "seal"})

    # What the rest of memcommit sees as the store's log (MemoryStore's reads, seals.py):
    # the replica, caught up with this store's own commits first, behind a view that sends
    # seal() to the server.

    @property
    def _native(self) -> _native.NativeLog:
        self._fresh()
        return cast(_native.NativeLog, _ReplicaView(self, self._replica.log))

    @_native.setter
    def _native(self, replica: _native.NativeLog) -> None:
        self._replica.log = replica

    def _seal(self, at_us: int, key: bytes | None) -> tuple[int, int, int, int, bool, str, str]:
        """Have the server seal its log (the key, if any, travels to it)."""
        spec: dict[str, Any] = {"id": self._commit_id(), "seal": True}
        if key is not None:
            spec["key"] = wire.encode_value(key)
        result = self._submit(spec)
        sealed = tuple(result["seal"])
        self._wrote(int(sealed[1]))
        return cast(tuple[int, int, int, int, bool, str, str], sealed)

    # -- writing -----------------------------------------------------------------------------

    def commit(self, expect_lsn: int | None = None) -> RemoteCommit:  # type: ignore[override]
        """Start a commit that the server runs: ``with store.commit(expect_lsn=head) as c:``.

        Args:
            expect_lsn: Refuse the commit unless the server's newest LSN is this one.

        Returns:
            A :class:`RemoteCommit` with the methods of :class:`~memcommit.Commit`.
        """
        self._check_open()
        if expect_lsn is not None:
            check_u64(expect_lsn, "expect_lsn")
        return RemoteCommit(self, expect_lsn)

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
        """Create a memory, or replace the content of an existing id (see MemoryStore.put)."""
        with self.commit() as c:
            mid = c.put(
                text, kind=kind, id=id, task=task, tier=tier, data=data, tags=tags, sources=sources
            )
        return mid

    def stale(self, id: str, reason: str | None = None) -> int:
        """Mark a memory stale. Returns the record's LSN.

        Raises:
            Rejected: The store has no memory `id`.
        """
        with self.commit() as c:
            c.stale(id, reason)
        return _lsn(c)

    def restore(self, id: str) -> int:
        """Mark a stale memory active again. Returns the record's LSN.

        Raises:
            Rejected: The store has no memory `id`.
        """
        with self.commit() as c:
            c.restore(id)
        return _lsn(c)

    def move(self, id: str, tier: str) -> int:
        """Move a memory to `tier`. Returns the record's LSN.

        Raises:
            Rejected: The store has no memory `id`.
            ValueError: `tier` is not a tier.
        """
        with self.commit() as c:
            c.move(id, tier)
        return _lsn(c)

    def finish_task(self, task: str) -> int:
        """Mark a task finished. Returns the record's LSN."""
        with self.commit() as c:
            c.finish_task(task)
        return _lsn(c)

    def flush(self) -> None:
        """Have the server fsync everything it has written, whatever its durability mode."""
        self._check_open()
        self._pipeline.request("POST", "/v1/flush", b"{}")

    # -- reading (from the replica, caught up with this store's own commits) -----------------

    def get(self, id: str) -> Memory | None:
        """Return the memory `id`, or None if the store has none."""
        self._fresh()
        return super().get(id)

    def get_many(self, ids: Sequence[str]) -> list[Memory | None]:
        """Return the memories `ids` (None for each the store does not have)."""
        self._fresh()
        return super().get_many(ids)

    def find(
        self,
        tier: str | None = None,
        kind: str | None = None,
        task: str | None = None,
        status: str | None = "active",
        tags: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Memory]:
        """Return the memories matching every given filter, in creation order."""
        self._fresh()
        return super().find(tier, kind, task, status, tags, limit)

    def history(self, id: str) -> list[Record]:
        """Return the records of memory `id` that are still in the log, oldest first."""
        self._fresh()
        return super().history(id)

    def records(self, after: int = 0) -> Iterator[Record]:
        """Iterate over every record with an LSN above `after`, in LSN order."""
        self._fresh()
        return super().records(after)

    def is_task_finished(self, task: str) -> bool:
        """Return whether `task` was marked finished."""
        self._fresh()
        return super().is_task_finished(task)

    @property
    def lsn(self) -> int:
        """The newest LSN in the replica (at least that of this store's own last commit)."""
        self._fresh()
        return self._replica.log.lsn

    def __len__(self) -> int:
        self._fresh()
        return super().__len__()

    def __contains__(self, id: object) -> bool:
        self._fresh()
        return super().__contains__(id)

    def is_purged(self, id: str) -> bool:
        """Whether log compaction on the server purged memory `id`."""
        self._fresh()
        return super().is_purged(id)

    def manifest(self) -> list[dict[str, Any]]:
        """The server's compaction manifest, as of this replica's generation."""
        self._fresh()
        return super().manifest()

    def save_snapshot(self, path: str | os.PathLike[str]) -> None:
        """Not for a RemoteStore: a snapshot opens a log file, and the log is the server's.

        Raises:
            NotSupported: Always; take the snapshot on the server's host, from its log file.
        """
        raise NotSupported(
            f"save_snapshot: {self.url} serves the log; a snapshot belongs beside the log "
            "file on the server's host"
        )

    @property
    def read_only(self) -> bool:
        """False: a RemoteStore commits (on the server)."""
        return False

    @property
    def closed(self) -> bool:
        """Whether this RemoteStore is closed."""
        return self._pipeline.closed

    def info(self) -> dict[str, Any]:
        """The replica's facts (records, lsn, generation, store_id...), with the server's url."""
        self._fresh()
        info = dict(self._replica.log.info())
        info.update(path=None, url=self.url, server_boot=self._pipeline.boot, read_only=False)
        return info

    def close(self) -> None:
        """Stop following, close the connections and drop the replica. Safe to call twice."""
        if self._pipeline.closed:
            return
        self._pipeline.close()
        follower = self._follower
        if follower is not None and follower is not threading.current_thread():
            follower.join(timeout=1.0)
        with self._replica.lock:
            self._replica.log.close()

    def __enter__(self) -> RemoteStore:
        return self

    def __repr__(self) -> str:
        state = "closed" if self._pipeline.closed else f"lsn={self._replica.log.lsn}"
        return f"<RemoteStore {self.url} {state}>"


def _lsn(c: RemoteCommit) -> int:
    assert c.lsn is not None
    return c.lsn


class _ReplicaView:
    """A RemoteStore's replica as ``store._native``: seals go to the server, auto-seals refused."""

    __slots__ = ("_replica", "_store")

    def __init__(self, store: RemoteStore, replica: _native.NativeLog) -> None:
        self._store = store
        self._replica = replica

    def __getattr__(self, name: str) -> Any:
        return getattr(self._replica, name)

    def __len__(self) -> int:
        return len(self._replica)

    def seal(
        self, at_us: int, key: bytes | None = None
    ) -> tuple[int, int, int, int, bool, str, str]:
        return self._store._seal(at_us, key)

    def set_auto_seal(self, every: int | None, key: bytes | None = None) -> None:
        raise NotSupported(
            f"AutoSeal: {self._store.url} writes the log; auto-sealing belongs to the server's "
            "store (seal(remote_store) seals it on demand)"
        )
