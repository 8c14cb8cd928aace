"""The remote engine: reads from a replica of a server's log, writes run by the server.

Every read first makes the replica fresh (:meth:`.replica.Replica.fresh`: of the server's log,
with this store's own commits); commits, seals and role calls travel through the pipeline
(:mod:`.pipeline`) and are run by the server's writer. What the server keeps to itself (the
log file, so log compaction, snapshots and the roles' entities) is refused here, naming the
server. :class:`~memcommit.RemoteStore` is :class:`~memcommit.MemoryStore` on this engine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from http.client import HTTPMessage
from typing import TYPE_CHECKING, Any, NoReturn, cast

from .. import _native, wire
from ..clock import Clock
from ..commit import Commit
from ..engine import SealTuple
from ..errors import NotSupported
from ..manifest import ManifestEntry
from ..roles.roleset import ROLE_NAMES, Roles
from .commit import RemoteCommit
from .pipeline import Http, Pipeline
from .replica import Replica
from .roles import remote_role

if TYPE_CHECKING:
    from .._native import Memory, Record

__all__ = ["RemoteEngine"]


class RemoteEngine:
    """A server's log, as a :class:`~memcommit.engine.Engine` (arguments: RemoteStore's).

    Raises:
        ServerError: The server refused (401: wrong token) or could not be reached.
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
        self._replica: Replica | None = None
        self._pipeline = Pipeline(
            url,
            token,
            timeout=timeout,
            retry_seconds=retry_seconds,
            ca_file=ca_file,
            max_in_flight=max_in_flight,
            on_answer=self._note,
        )
        self.scratch = _native.NativeLog.memory()
        """A log in RAM that is never written: a remote commit checks its operations on it."""
        self._follower: threading.Thread | None = None
        try:
            self._replica = replica = Replica(self._pipeline)
        except BaseException:
            self._pipeline.http.close()
            raise
        self._live = replica
        if follow:
            self._follower = threading.Thread(
                target=replica.follow, name="memcommit-follow", daemon=True
            )
            self._follower.start()

    @property
    def url(self) -> str:
        """The server's URL."""
        return self._pipeline.url

    @property
    def http(self) -> Http:
        """The pool of connections to the server (what every request travels over)."""
        return self._pipeline.http

    @property
    def capabilities(self) -> frozenset[str]:
        """``"remote"`` and ``"seal"``: the server runs the commits and writes the seals.

        The log file, and so log compaction and snapshots, are the server's.
        """
        return frozenset({"remote", "seal"})

    @property
    def path(self) -> None:
        """None: the log file is the server's."""
        return None

    def describe(self) -> str:
        """The server's URL and the replica's head LSN, or ``closed``."""
        state = "closed" if self._pipeline.closed else f"lsn={self._live.log.lsn}"
        return f"{self.url} {state}"

    def _note(self, headers: HTTPMessage) -> None:
        """Take in the identity headers of an answer (once the replica exists)."""
        if self._replica is not None:
            self._replica.note(headers)

    def _log(self) -> _native.NativeLog:
        """The replica, fresh for a read: of the server's log, with this store's commits."""
        self._live.fresh()
        return self._live.log

    def _refuse(self, what: str, why: str) -> NoReturn:
        raise NotSupported(f"{what}: {self.url} serves the log; {why}")

    def _send(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Send one commit, seal or role call (pipelined with other threads'); its result.

        The next read waits for the replica to have what it wrote.
        """
        result = self._pipeline.submit({"id": self._pipeline.new_id(), **spec})
        if result.get("lsn") is not None:
            self._live.wrote(int(result["lsn"]))
        return result

    # -- writing

    def begin(self, expect_lsn: int | None, now_us: Callable[[], int]) -> Commit:
        """A :class:`RemoteCommit`, with the methods of :class:`~memcommit.Commit`.

        The server's clock times it, so `now_us` is not read.
        """
        self._pipeline.check_open()
        return cast(Commit, RemoteCommit(self, expect_lsn))

    def run_commit(
        self, wire_ops: list[list[Any]], expect_lsn: int | None
    ) -> tuple[int | None, int | None]:
        """Have the server run a commit's wire operations; its first and last LSN."""
        result = self._send({"expect_lsn": expect_lsn, "ops": wire_ops})
        return result["first_lsn"], result["lsn"]

    def put(
        self,
        at_us: int | None,
        text: str,
        kind: str,
        id: str | None,
        task: str | None,
        tier: str,
        data: Mapping[str, Any] | None,
        tags: Sequence[str],
        sources: Sequence[str],
    ) -> str:
        """One put as its own commit, on the server (which stamps its own time)."""
        with self.begin(None, lambda: 0) as c:
            mid = c.put(
                text, kind=kind, id=id, task=task, tier=tier, data=data, tags=tags, sources=sources
            )
        return mid

    def write_entities(self, at_us: int, changes: list[tuple[str, bytes | None]]) -> int:
        """Refused: the roles' entities are written by the server's roles."""
        self._refuse("write_entities", "its roles write their entities (import into the file)")

    def wait_durable(self, end: int) -> None:
        """Refused: durability is the server's (see :meth:`flush`)."""
        self._refuse("wait_durable", "flush() has the server make its log durable")

    def _call(self, role: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run a role method on the server and return what it returned."""
        result = self._send(
            {
                "role": role,
                "method": method,
                "args": [wire.encode_value(a) for a in args],
                "kwargs": {k: wire.encode_value(v) for k, v in kwargs.items()},
            }
        )
        return wire.decode_value(result.get("value"))

    def roles(self, clock: Clock, now_us: Callable[[], int]) -> Roles:
        """The ten roles, each method run on the server (under the server's roles lock)."""
        roles = Roles()
        for name in ROLE_NAMES:
            setattr(roles, name, cast(Any, remote_role(name)(self._call, self.url)))
        return roles

    # -- reading (from the replica, caught up with this store's own commits)

    def get(self, id: str) -> Memory | None:
        """The memory `id`, or None."""
        return self._log().get(id)

    def get_many(self, ids: list[str]) -> list[Memory | None]:
        """The memories `ids`."""
        return self._log().get_many(ids)

    def find(
        self,
        tier: str | None,
        kind: str | None,
        task: str | None,
        status: str | None,
        tags: Sequence[str] | None,
        limit: int | None,
    ) -> list[Memory]:
        """The memories matching every filter given."""
        return self._log().find(tier, kind, task, status, tags, limit)

    def history(self, id: str) -> list[Record]:
        """The records of memory `id` still in the server's log."""
        return self._log().history(id)

    def read_records(self, after: int, start: int, max: int) -> tuple[list[Record], int]:
        """A batch of records above LSN `after`."""
        return self._log().read_records(after, start, max)

    def entities(self) -> list[tuple[str, bytes]]:
        """Every live role entity, as the replica holds them."""
        return self._log().entities()

    @property
    def lsn(self) -> int:
        """The newest LSN in the replica (at least that of this store's own last commit)."""
        return self._log().lsn

    def __len__(self) -> int:
        return len(self._log())

    def contains(self, id: str) -> bool:
        """Whether memory `id` exists."""
        return self._log().contains(id)

    def is_purged(self, id: str) -> bool:
        """Whether log compaction on the server purged memory `id`."""
        return self._log().is_purged(id)

    def is_task_finished(self, task: str) -> bool:
        """Whether `task` was marked finished."""
        return self._log().is_task_finished(task)

    def info(self) -> dict[str, Any]:
        """The replica's facts (records, lsn, generation, store_id...), with the server's url."""
        info = dict(self._log().info())
        info.update(path=None, url=self.url, server_boot=self._pipeline.boot, read_only=False)
        return info

    def manifest(self) -> list[ManifestEntry]:
        """The server's compaction manifest, as of this replica's generation."""
        self._live.fresh()
        return self._live.manifest

    # -- the log as a whole

    def seal(self, at_us: int, key: bytes | None = None) -> SealTuple:
        """Have the server seal its log (the key, if any, travels to it; its clock stamps it)."""
        spec: dict[str, Any] = {"seal": True}
        if key is not None:
            spec["key"] = wire.encode_value(key)
        return cast(SealTuple, tuple(self._send(spec)["seal"]))

    def seals(self) -> list[SealTuple]:
        """The seals of the server's current generation, from the replica."""
        return self._log().seals()

    def check_seal(self, key: bytes | None = None) -> tuple[SealTuple, dict[str, Any]]:
        """Check the newest seal against the replica's chain."""
        return self._log().check_seal(key)

    def verify(
        self, key: bytes | None = None, progress: Callable[[int], object] | None = None
    ) -> dict[str, Any]:
        """Check the replica (the server's records, checked here) and every seal."""
        return self._log().verify(key, progress)

    def set_auto_seal(self, every: int | None, key: bytes | None = None) -> None:
        """Refused: auto-sealing belongs to the server's store."""
        raise NotSupported(
            f"AutoSeal: {self.url} writes the log; auto-sealing belongs to the server's "
            "store (seal(remote_store) seals it on demand)"
        )

    def compact(
        self,
        horizon: int | None,
        archived_older_than_us: int | None,
        kinds_after_us: list[tuple[str, int]],
        ids: list[str],
        now_us: int,
        at_us: int,
        before_swap: Callable[[dict[str, Any]], object],
        step: Callable[[str], object] | None = None,
        progress: Callable[[int, int], object] | None = None,
    ) -> dict[str, Any]:
        """Refused: the log file is the server's."""
        self._refuse("compact", "compact it on the server's host with 'memcommit compact PATH'")

    def snapshot_json(self) -> str:
        """Refused: a snapshot opens a log file, and the log is the server's."""
        self._refuse("save_snapshot", "a snapshot belongs beside the log file on the server's host")

    def header(self) -> bytes:
        """The replica's header (the server's log's)."""
        return self._log().header()

    def read_raw(self, after: int, max_bytes: int = 4194304) -> tuple[bytes, int]:
        """The replica's raw records above LSN `after`."""
        return self._log().read_raw(after, max_bytes)

    def refresh(self, wait: float = 0.0) -> int:
        """Pull what was committed on the server (a long poll of up to `wait` seconds)."""
        return self._live.refresh(wait)

    def flush(self) -> None:
        """Have the server fsync everything it has written, whatever its durability mode."""
        self._pipeline.check_open()
        self._pipeline.request("POST", "/v1/flush", b"{}")

    def close(self) -> None:
        """Stop following, close the connections and drop the replica. Safe to call twice."""
        if self._pipeline.closed:
            return
        self._pipeline.close()
        follower = self._follower
        if follower is not None and follower is not threading.current_thread():
            follower.join(timeout=1.0)
        with self._live.lock:
            self._live.log.close()

    @property
    def closed(self) -> bool:
        """Whether the engine (its pipeline) is closed."""
        return self._pipeline.closed
