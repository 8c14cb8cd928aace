"""The remote engine: reads from a replica of a server's log, writes run by the server.

Every read first makes the replica fresh (:meth:`.replica.Replica.fresh`: of the server's log,
with this store's own commits); commits, seals and role calls travel through the pipeline
(:mod:`.pipeline`) and are run by the server's writer. What the server keeps to itself (the
log file, so log compaction, snapshots and the roles' entities) is refused here, naming the
server. :class:`~memcommit.RemoteStore` is :class:`~memcommit.MemoryStore` on this engine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, NoReturn, cast

from .. import _native, wire
from .._native import Memory
from ..clock import Clock
from ..commit import Commit
from ..engine import CompactionPlan, SealTuple
from ..errors import InvalidType, InvalidValue, NotSupported
from ..manifest import ManifestEntry
from ..roles.roleset import ROLE_NAMES, Roles
from ..roles.values import MAX_JSON_DEPTH
from .commit import RemoteCommit
from .pipeline import Headers, Http, Pipeline
from .replica import Replica
from .roles import remote_role

__all__ = ["RemoteEngine", "ServerClock"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_PUT_FIELDS = ("kind", "id", "task", "tier", "data", "tags", "sources", "vector")
"""The fields of an engine's put after its text, in their order."""


def _unread_clock() -> int:
    """The clock of a remote commit: never read (the server's clock times the commit)."""
    raise AssertionError("a remote commit is timed by the server's clock")


class ServerClock:
    """The server's clock, the one its commits record: each reading asks the server."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline

    def now_us(self) -> int:
        """The server's time, in microseconds since the Unix epoch (one request)."""
        _, _, data = self._pipeline.request("GET", "/v1/clock")
        now_us = wire.loads(data).get("now_us")
        if isinstance(now_us, bool) or not isinstance(now_us, int):
            raise wire.ServerError(
                f"{self._pipeline.url}: /v1/clock answered without a time", url=self._pipeline.url
            )
        return now_us

    def now(self) -> datetime:
        """The server's time, as an aware UTC datetime."""
        return _EPOCH + timedelta(microseconds=self.now_us())

    def now_ms(self) -> int:
        """The server's time, in milliseconds since the Unix epoch."""
        return self.now_us() // 1000


class RemoteEngine:
    """A server's log, as a :class:`~memcommit.engine.Engine`.

    Args:
        pipeline: The requests to the server (this engine notes the log each answer names,
            and closes the pipeline if the first read fails).
        follow: Keep a thread pulling commits as they happen.

    Raises:
        ServerError: The server refused (401: wrong token) or could not be reached.
    """

    def __init__(self, pipeline: Pipeline, *, follow: bool = False) -> None:
        if not isinstance(follow, bool):
            pipeline.close()
            raise InvalidType(f"follow must be True or False, not {type(follow).__name__}")
        self._pipeline = pipeline
        self.clock = ServerClock(pipeline)
        """The server's clock: what the store's ``now_us()`` reads and its commits record."""
        self._replica: Replica | None = None
        pipeline.on_answer = self._note
        self.scratch = _native.NativeLog.memory()
        """A log in RAM that is never written: a remote commit checks its operations on it."""
        self.embedder: Callable[[list[str]], Sequence[Sequence[float]]] | None = None
        """The store's embedder: a remote commit embeds its puts' texts before it is sent."""
        self._follower: threading.Thread | None = None
        try:
            self._replica = replica = Replica(pipeline)
        except BaseException:
            pipeline.close()
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

    def _note(self, headers: Headers) -> None:
        """Take in the identity headers of an answer (once the replica exists)."""
        if self._replica is not None:
            self._replica.note(headers)

    def view(self) -> _native.NativeLog:
        """The replica, fresh for a read: of the server's log, with this store's commits."""
        self._live.fresh()
        return self._live.log

    def get(self, id: str) -> Memory | None:
        """The memory `id` in the fresh replica."""
        return self.view().get(id)

    def get_many(self, ids: list[str]) -> list[Memory | None]:
        """The memories `ids` in the fresh replica."""
        return self.view().get_many(ids)

    def is_purged(self, id: str) -> bool:
        """Whether the server's compactions purged `id` (as the fresh replica knows)."""
        return self.view().is_purged(id)

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

    def put(self, at_us: int | None, text: str, *fields: Any) -> str:
        """One put as its own commit, on the server (which stamps its own time).

        `fields` are the rest of :meth:`~memcommit.engine.Engine.put`'s, in its order.
        """
        with self.begin(None, _unread_clock) as c:
            mid = c.put(text, **dict(zip(_PUT_FIELDS, fields, strict=True)))
        return mid

    def set_embedder(self, embed: Callable[[list[str]], Sequence[Sequence[float]]]) -> None:
        """Embed the puts without a vector here, before each commit is sent."""
        self.embedder = embed

    def write_entities(self, at_us: int, changes: list[tuple[str, bytes | None]]) -> int:
        """Refused: the roles' entities are written by the server's roles."""
        self._refuse("write_entities", "its roles write their entities (import into the file)")

    def wait_durable(self, end: int) -> None:
        """Refused: durability is the server's (see :meth:`flush`)."""
        self._refuse("wait_durable", "flush() has the server make its log durable")

    def _call(self, role: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run a role method on the server and return what it returned.

        The server checks the arguments (a value nested more than ``MAX_JSON_DEPTH`` levels is
        its role's :class:`~memcommit.InvalidValue`, one too deep for a request a 400); one
        too deep to encode at all is refused here, with the same InvalidValue.
        """
        try:
            spec = {
                "role": role,
                "method": method,
                "args": [wire.encode_value(_once(a)) for a in args],
                "kwargs": {k: wire.encode_value(_once(v)) for k, v in kwargs.items()},
            }
        except RecursionError:
            raise InvalidValue(
                f"{role}.{method}: an argument is nested more than {MAX_JSON_DEPTH} levels deep "
                "(lists and objects); a role's value nests at most that: flatten it"
            ) from None
        result = self._send(spec)
        return wire.decode_value(result.get("value"))

    def roles(self, clock: Clock, now_us: Callable[[], int]) -> Roles:
        """The ten roles, each method run on the server (under the server's roles lock)."""
        roles = Roles()
        roles.medium = None
        for name in ROLE_NAMES:
            setattr(roles, name, cast(Any, remote_role(name)(self._call, self.url)))
        return roles

    def info(self) -> dict[str, Any]:
        """The replica's facts (records, lsn, generation, store_id...), with the server's own.

        The server's url and start, and its durability mode (left out while the server cannot
        say). Never the replica's durability or fsyncs: a replica in RAM has none, and the
        server's fsyncs are in its ``/v1/metrics``.
        """
        info = dict(self.view().info())
        info.pop("fsyncs", None)
        info.pop("durability", None)
        server = self._pipeline.server_info()
        durability = None if server is None else server.get("durability")
        if durability in ("commit", "batch", "none"):
            info["durability"] = durability
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

    def set_auto_seal(self, every: int | None, key: bytes | None = None) -> None:
        """Refused: auto-sealing belongs to the server's store."""
        raise NotSupported(
            f"AutoSeal: {self.url} writes the log; auto-sealing belongs to the server's "
            "store (seal(remote_store) seals it on demand)"
        )

    def compact(self, plan: CompactionPlan) -> dict[str, Any]:
        """Refused: the log file is the server's."""
        self._refuse("compact", "compact it on the server's host with 'memcommit compact PATH'")

    def snapshot_json(self) -> str:
        """Refused: a snapshot opens a log file, and the log is the server's."""
        self._refuse("save_snapshot", "a snapshot belongs beside the log file on the server's host")

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


def _once(value: Any) -> Any:
    """`value`, an iterator read into a list: the role takes any iterable, the wire a list."""
    return list(value) if isinstance(value, Iterator) else value
