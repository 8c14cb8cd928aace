"""The server: one process owns the log and runs every commit, for many client processes.

``memcommit serve memory.db`` (or ``python -m memcommit serve``) runs a :class:`MemoryServer`.
Clients use :class:`~memcommit.remote.RemoteStore`; the protocol is in :mod:`memcommit.wire`.

How a commit travels: the HTTP layer (Starlette on uvicorn) checks the request's shape and
queues each commit for **the writer**, one thread that takes everything queued, runs it in
arrival order (each commit's guards checked against the state its predecessors left, each
role call under the store's one roles lock), then makes the whole batch durable with **one
fsync**, and only then answers every client in the batch. Many clients, one fsync: group
commit. LSNs come from one place, so a guard or a role's compare-and-set holds across
processes exactly as it holds across threads of one process.

Why one thread rather than the engine's own group commit from many threads: the order in
which commits are checked is then the order they arrived, a role call never waits on another
thread's lock, and log reads can be served between batches, when everything in the log is on
disk, so a reader never sees a commit that a crash could still take back. The log is opened
with the engine's ``durability="none"`` and the writer calls ``flush()`` (one fsync) per batch
itself under ``--durability commit``; ``batch`` leaves the fsync to the engine's timer and
``none`` to the OS, with the loss bounds :func:`memcommit.open` documents.

Security: the server binds loopback unless told otherwise and refuses any other address
without a token (``--token-file``); the token is compared in constant time and a request
without it gets 401. TLS with ``--tls-cert``/``--tls-key``. Requests are limited in size
(``--max-request-bytes``, 413 above it) and in JSON nesting (:data:`memcommit.wire.MAX_DEPTH`
levels); a malformed one gets 400 with a message and changes nothing.

Shutdown: on SIGTERM (or SIGINT) the server stops taking commits (503), wakes every waiting
reader, lets the commits already queued finish and be fsynced, answers them, then closes the
log and exits. A ``kill -9`` loses no acknowledged commit: a commit is answered only after its
fsync.

``--test-clock [START]`` makes the server read a :class:`~memcommit.testing.ControllableClock`
that ``POST /v1/test/clock`` sets: a testing aid, so a test can move the clock the server's
roles decide by (the contract suite runs that way on a ``RemoteStore``). Without the flag the
endpoint does not exist.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from types import FrameType
from typing import Any

from . import wire
from .clock import Clock
from .commit import Commit
from .errors import MemcommitError
from .roles.roleset import ROLE_NAMES
from .store import Durability, MemoryStore
from .store import open as open_store

__all__ = ["MemoryServer", "ServerProcess", "add_serve_command", "is_loopback", "role_methods"]

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_MAX_COMMITS_PER_REQUEST = 10_000
_MAX_BATCH = 4_096  # commits the writer takes at once: bounds the latency of a huge backlog
_DEFAULT_READ_BYTES = 4 * 1024 * 1024
_MAX_READ_BYTES = 64 * 1024 * 1024
_MAX_WAIT_SECONDS = 60.0
_MIN_TOKEN_CHARS = 16
_ID_MAX = 128
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)
_TEST_CLOCK_START = "2026-01-01T00:00:00+00:00"

_OP_ARITY = {
    wire.OP_PUT: 9,
    wire.OP_PUT_MANY: 9,
    wire.OP_STALE: 3,
    wire.OP_RESTORE: 2,
    wire.OP_MOVE: 3,
    wire.OP_FINISH: 2,
    wire.OP_EXPECT: 6,
}


def is_loopback(host: str) -> bool:
    """Return whether `host` names only this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def role_methods() -> dict[str, frozenset[str]]:
    """The methods a client may call on each role: the public functions of its class."""
    import inspect

    from .roles.roleset import RoleSet

    roles = RoleSet()
    out = {}
    for name in ROLE_NAMES:
        cls = type(getattr(roles, name))
        out[name] = frozenset(
            attr
            for attr, value in inspect.getmembers(cls, inspect.isfunction)
            if not attr.startswith("_")
        )
    return out


_NO_BODY = object()


class _BadRequest(Exception):
    """A request that is not what the protocol says; answered 400, nothing changed."""

    def __init__(self, message: str, status: int = 400, code: str = "bad_request") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


# -- the writer ------------------------------------------------------------------------------

_COMMIT, _CALL, _READ, _SNAPSHOT, _FLUSH, _SEAL = range(6)


class _Group:
    """The works of one request: one future, resolved when the last of them is done."""

    __slots__ = ("future", "remaining")

    def __init__(self, future: asyncio.Future[None], remaining: int) -> None:
        self.future = future
        self.remaining = remaining


class _Work:
    """One unit for the writer: a commit, a role call, a log read or a flush."""

    __slots__ = ("commit_id", "group", "kind", "queued_at", "result", "spec", "waiters", "wrote")

    def __init__(self, kind: int, spec: Any, group: _Group, commit_id: str | None = None) -> None:
        self.kind = kind
        self.spec = spec
        self.group = group
        self.commit_id = commit_id
        self.queued_at = time.perf_counter()
        self.result: Any = None
        self.wrote = False
        # Futures of resends of this commit that arrived while it was in flight (rare).
        self.waiters: list[asyncio.Future[Any]] | None = None


_STOP = object()


@dataclass(frozen=True)
class _Identity:
    """What names the log a client follows: its store id and generation, and the head."""

    store_id: str
    generation: int
    head: int


class _Writer:
    """The one thread that runs every commit, role call and log read (module docstring)."""

    def __init__(
        self,
        store: MemoryStore,
        loop: asyncio.AbstractEventLoop,
        sync_each_batch: bool,
        done: Callable[[list[_Work], _Identity], None],
    ) -> None:
        self._store = store
        self._loop = loop
        self._sync = sync_each_batch
        self._done = done
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="memcommit-writer", daemon=True)
        self.batches = 0
        self.fsyncs = 0
        self.batched_commits = 0
        self.failed: str | None = None

    @property
    def _native(self) -> Any:
        # Looked up each time: log compaction in this process swaps the store's log.
        return self._store._native

    def start(self) -> None:
        self._thread.start()

    def submit(self, works: list[_Work]) -> None:
        """Queue works (those of one request go in one put, so one batch usually has them)."""
        self._queue.put(works)

    def stop(self) -> None:
        """Finish everything queued, then end the thread (blocks until it has)."""
        self._queue.put(_STOP)
        self._thread.join()

    def identity(self) -> _Identity:
        info = self._native.info()
        return _Identity(str(info["store_id"]), int(info["generation"]), int(info["lsn"]))

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch: list[_Work] = []
            item = self._queue.get()
            while True:
                if item is _STOP:
                    stopping = True
                else:
                    batch.extend(item)
                if len(batch) >= _MAX_BATCH:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                try:
                    self._run_batch(batch)
                except BaseException as e:  # a bug: answer the batch rather than hang it
                    self.failed = f"the writer failed: {type(e).__name__}: {e}"
                    failure = {"ok": False, "error": wire.encode_error(e)}
                    for work in batch:
                        if work.result is None:
                            work.result = e if work.kind in (_READ, _SNAPSHOT) else failure
                    self._loop.call_soon_threadsafe(self._done, batch, _Identity("", 0, 0))

    def _run_batch(self, batch: list[_Work]) -> None:
        # Reads first: everything in the log now was made durable by the previous batch.
        for work in batch:
            if work.kind in (_READ, _SNAPSHOT):
                work.result = self._read(work)
        wrote = False
        for work in batch:
            if work.kind == _COMMIT:
                work.result = self._commit(work)
            elif work.kind == _CALL:
                work.result = self._call(work)
            elif work.kind == _FLUSH:
                work.result = self._flush_all()
            elif work.kind == _SEAL:
                work.result = self._seal(work)
            wrote = wrote or work.wrote
        if wrote and self._sync:
            failure = self._flush_all()
            if failure is not None:
                for work in batch:
                    if work.wrote:
                        work.result = failure
        self.batches += 1
        self.batched_commits += sum(1 for w in batch if w.kind in (_COMMIT, _CALL, _SEAL))
        try:
            identity = self.identity()
        except MemcommitError:  # closed under us: answer with what the batch knew
            identity = _Identity("", 0, 0)
        self._loop.call_soon_threadsafe(self._done, batch, identity)

    def _flush_all(self) -> dict[str, Any] | None:
        try:
            self._native.flush()
            self.fsyncs += 1
            return None
        except Exception as e:  # WriterFailed: the log is poisoned; every later write fails
            self.failed = str(e)
            return {"ok": False, "error": wire.encode_error(e)}

    def _commit(self, work: _Work) -> dict[str, Any]:
        spec = work.spec
        try:
            with self._store.commit(expect_lsn=spec["expect_lsn"]) as c:
                _apply_ops(c, spec["ops"])
        except Exception as e:
            return {"ok": False, "error": wire.encode_error(e)}
        work.wrote = c.lsn is not None
        return {"ok": True, "first_lsn": c.first_lsn, "lsn": c.lsn}

    def _call(self, work: _Work) -> dict[str, Any]:
        spec = work.spec
        before = self._native.lsn
        try:
            method = getattr(getattr(self._store, spec["role"]), spec["method"])
            value = method(*spec["args"], **spec["kwargs"])
            encoded = wire.encode_value(value)
        except Exception as e:
            work.wrote = self._native.lsn != before  # a refused call writes nothing, but check
            return {"ok": False, "error": wire.encode_error(e)}
        after = self._native.lsn
        work.wrote = after != before
        return {"ok": True, "value": encoded, "lsn": after if work.wrote else None}

    def _seal(self, work: _Work) -> dict[str, Any]:
        try:
            sealed = self._native.seal(self._store._now_us(), work.spec["key"])
        except Exception as e:
            return {"ok": False, "error": wire.encode_error(e)}
        work.wrote = True
        return {"ok": True, "seal": list(sealed), "first_lsn": sealed[1], "lsn": sealed[1]}

    def _read(self, work: _Work) -> Any:
        after, max_bytes, want = work.spec
        try:
            identity = self.identity()
            if work.kind == _SNAPSHOT:
                data, last = self._native.read_raw(0, max_bytes)
                return identity, self._native.header() + data, last
            if want is not None and (
                want[0] != identity.store_id or want[1] != identity.generation
            ):
                return identity, None, after
            data, last = self._native.read_raw(after, max_bytes)
            return identity, data, last
        except Exception as e:
            return e


def _apply_ops(c: Commit, ops: list[list[Any]]) -> None:
    """Run a commit's wire operations on a native commit (arguments checked there)."""
    for op in ops:
        name = op[0]
        if name == wire.OP_PUT:
            _, id, text, kind, task, tier, data, tags, sources = op
            c.put(
                text,
                kind=kind,
                id=id,
                task=task,
                tier=tier,
                data=_data(data),
                tags=tags,
                sources=sources,
            )
        elif name == wire.OP_PUT_MANY:
            _, ids, texts, kind, task, tier, data, tags, sources = op
            c.put_many(
                texts,
                kind=kind,
                ids=ids,
                task=task,
                tier=tier,
                data=_data(data),
                tags=tags,
                sources=sources,
            )
        elif name == wire.OP_STALE:
            c.stale(op[1], op[2])
        elif name == wire.OP_RESTORE:
            c.restore(op[1])
        elif name == wire.OP_MOVE:
            c.move(op[1], op[2])
        elif name == wire.OP_FINISH:
            c.finish_task(op[1])
        elif name == wire.OP_EXPECT:
            _, id, exists, status, tier, lsn = op
            c.expect(id, exists=exists, status=status, tier=tier, lsn=lsn)


def _data(text: Any) -> Any:
    """A memory's data as the wire carries it (its JSON text, checked by the client)."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"data must travel as JSON text, not {type(text).__name__}")
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValueError(f"data is not JSON: {e}") from None
    except RecursionError:
        raise ValueError(
            "data: nested too deeply to store (Python's JSON gives up at its recursion limit); "
            "flatten it"
        ) from None


# -- metrics ---------------------------------------------------------------------------------


class _Metrics:
    """Counters for ``/v1/metrics`` (Prometheus text format), kept by the event loop."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        self.commits: dict[str, int] = {"ok": 0, "rejected": 0, "error": 0}
        self.calls: dict[str, int] = {"ok": 0, "error": 0}
        self.resends = 0
        self.unknown = 0
        self.latency = [0] * (len(_LATENCY_BUCKETS) + 1)
        self.latency_sum = 0.0
        self.latency_count = 0
        self.log_reads = 0
        self.log_bytes = 0
        self.waiting_readers = 0

    def observe(self, seconds: float) -> None:
        for i, bound in enumerate(_LATENCY_BUCKETS):
            if seconds <= bound:
                self.latency[i] += 1
                break
        else:
            self.latency[-1] += 1
        self.latency_sum += seconds
        self.latency_count += 1


# -- the server ------------------------------------------------------------------------------


class MemoryServer:
    """Serve the store in `path` to :class:`~memcommit.remote.RemoteStore` clients over HTTP.

    The server owns the log (a second writer gets ``StoreLocked``) and runs every commit, so
    guards and the roles' compare-and-set hold across processes. See the module docstring for
    the design and :mod:`memcommit.wire` for the protocol.

    Args:
        path: The log file (created if missing).
        host: The address to bind: loopback (``127.0.0.1``) by default; any other needs
            `token`.
        port: The TCP port (0: any free one; the ``listening on`` line names it).
        token: The shared secret clients send as ``Authorization: Bearer TOKEN`` (at least
            16 characters). Without one, only a loopback bind is allowed.
        tls_cert: A PEM certificate chain file, to serve HTTPS (with `tls_key`).
        tls_key: The certificate's PEM private key file.
        durability: ``"commit"`` (default): a commit is answered once it is fsynced, one fsync
            per batch of concurrent commits; ``"batch"`` or ``"none"`` as in
            :func:`memcommit.open`.
        clock: The store's clock (default: the system clock).
        test_clock: Let ``POST /v1/test/clock`` set `clock`, which must then be a
            :class:`~memcommit.testing.ControllableClock` (a testing aid; never in production).
        max_request_bytes: The largest request body accepted (413 above it).
        remember: How many answers of commits that wrote are kept for resends.

    Raises:
        ValueError: A non-loopback `host` without a token, a short token, half a TLS pair, or
            `test_clock` without a ControllableClock.

    Example:
        >>> server = MemoryServer("memory.db", port=7411)  # doctest: +SKIP
        >>> server.run()  # blocks until SIGTERM or SIGINT  # doctest: +SKIP
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        port: int = wire.DEFAULT_PORT,
        token: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        durability: Durability = "commit",
        clock: Clock | None = None,
        test_clock: bool = False,
        max_request_bytes: int = wire.DEFAULT_MAX_REQUEST_BYTES,
        remember: int = wire.DEFAULT_REMEMBER,
    ) -> None:
        if token is not None and len(token) < _MIN_TOKEN_CHARS:
            raise ValueError(
                f"token: {len(token)} characters is too short; use at least {_MIN_TOKEN_CHARS} "
                "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        if not is_loopback(host) and token is None:
            raise ValueError(
                f"host: {host!r} is not a loopback address; serving it needs a token "
                "(--token-file), or bind 127.0.0.1"
            )
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls: give both --tls-cert and --tls-key, or neither")
        if durability not in ("commit", "batch", "none"):
            raise ValueError(f"durability: {durability!r} is not a mode; use commit, batch or none")
        if test_clock:
            from .testing.clock import ControllableClock

            if clock is None:
                clock = ControllableClock(datetime.fromisoformat(_TEST_CLOCK_START))
            if not isinstance(clock, ControllableClock):
                raise ValueError("test_clock: the clock must be a ControllableClock")
        for name, value in (("max_request_bytes", max_request_bytes), ("remember", remember)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: must be a positive int, got {value!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port: must be an int from 0 to 65535, got {port!r}")
        self.path = os.fspath(path)
        self.host = host
        self.port = port
        self.tls = tls_cert is not None
        self._tls_cert = tls_cert
        self._tls_key = tls_key
        self._token_digest = None if token is None else hashlib.sha256(token.encode()).digest()
        self.durability: Durability = durability
        self._clock = clock
        self._test_clock = test_clock
        self.max_request_bytes = max_request_bytes
        self._remember = remember
        self.boot = secrets.token_hex(8)
        self._methods = role_methods()
        self._store: MemoryStore | None = None
        self._writer: _Writer | None = None
        self._identity = _Identity("", 0, 0)
        self._changed: asyncio.Event | None = None
        self._closing = False
        self._inflight: dict[str, _Work] = {}
        self._remembered: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._metrics = _Metrics()
        self._started = time.time()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.app = self._build_app()

    # -- life ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL clients use (with the bound port once the server is listening)."""
        scheme = "https" if self.tls else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"

    async def _startup(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        # The writer fsyncs each batch itself; see the module docstring.
        native_durability: Durability = "none" if self.durability == "commit" else self.durability
        store = open_store(self.path, clock=self._clock, durability=native_durability)
        self._store = store
        self._writer = _Writer(store, loop, self.durability == "commit", self._finish)
        self._identity = self._writer.identity()
        self._changed = asyncio.Event()
        self._writer.start()

    async def _shutdown(self) -> None:
        self.begin_shutdown()
        writer, store = self._writer, self._store
        if writer is not None:
            await asyncio.get_running_loop().run_in_executor(None, writer.stop)
        if store is not None:
            with contextlib.suppress(MemcommitError):
                store.flush()
            store.close()
            print(f"memcommit serve: stopped; {self.path} is closed", file=sys.stderr, flush=True)

    def begin_shutdown(self) -> None:
        """Stop taking commits (503) and wake every waiting reader; queued commits finish."""
        self._closing = True
        if self._changed is not None:
            self._changed.set()

    def run(self) -> None:
        """Serve until SIGTERM or SIGINT; then finish in-flight commits, fsync, and return.

        Prints ``memcommit serve: listening on URL`` to standard error once it accepts.
        """
        import uvicorn

        config = uvicorn.Config(
            self.app,
            host=self.host,
            port=self.port,
            log_level="warning",
            access_log=False,
            lifespan="on",
            ssl_certfile=self._tls_cert,
            ssl_keyfile=self._tls_key,
            timeout_graceful_shutdown=60,
            server_header=False,
            date_header=False,
            proxy_headers=False,  # never trust X-Forwarded-*: clients are who they connect as
            limit_concurrency=4096,  # beyond it, 503 rather than unbounded tasks
            timeout_keep_alive=75,
        )
        server = _uvicorn_server(config, self)
        sock = config.bind_socket()
        self.port = int(sock.getsockname()[1])
        # uvicorn re-raises SIGTERM/SIGINT once it has shut down, so a supervisor sees the
        # usual exit status for the signal; the log is closed by then.
        server.run(sockets=[sock])

    # -- bookkeeping on the event loop -----------------------------------------------------

    def _finish(self, batch: list[_Work], identity: _Identity) -> None:
        """Answer a batch the writer finished (runs on the event loop)."""
        now = time.perf_counter()
        m = self._metrics
        for work in batch:
            result = work.result
            group = work.group
            group.remaining -= 1
            if group.remaining == 0 and not group.future.done():
                group.future.set_result(None)
            if work.waiters:
                for waiter in work.waiters:
                    if not waiter.done():
                        waiter.set_result(result)
            if work.kind in (_COMMIT, _CALL, _SEAL):
                m.observe(now - work.queued_at)
                ok = bool(result.get("ok"))
                if work.kind != _CALL:
                    err = None if ok else result["error"].get("class")
                    m.commits["ok" if ok else "rejected" if err == "Rejected" else "error"] += 1
                else:
                    m.calls["ok" if ok else "error"] += 1
                if work.commit_id is not None:
                    self._inflight.pop(work.commit_id, None)
                    if work.wrote:
                        self._remembered[work.commit_id] = result
                        if len(self._remembered) > self._remember:
                            self._remembered.popitem(last=False)
        if identity.store_id:
            self._identity = identity
        if self._changed is not None and any(w.wrote for w in batch):
            self._changed.set()
            self._changed = asyncio.Event()

    def _headers(self, ident: _Identity | None = None) -> dict[str, str]:
        ident = self._identity if ident is None else ident
        return {
            wire.H_STORE: ident.store_id,
            wire.H_GENERATION: str(ident.generation),
            wire.H_LSN: str(ident.head),
            wire.H_BOOT: self.boot,
        }

    # -- HTTP ------------------------------------------------------------------------------

    def _build_app(self) -> Callable[[_Scope, _Receive, _Send], Awaitable[None]]:
        from starlette.applications import Starlette
        from starlette.routing import Route

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            await self._startup()
            try:
                yield
            finally:
                await self._shutdown()

        routes = [
            Route("/v1/health", self._health, methods=["GET"]),
            Route("/v1/info", self._info, methods=["GET"]),
            Route("/v1/commit", self._commit, methods=["POST"]),
            Route("/v1/log", self._log, methods=["GET"]),
            Route("/v1/snapshot", self._snapshot, methods=["GET"]),
            Route("/v1/manifest", self._manifest, methods=["GET"]),
            Route("/v1/flush", self._flush, methods=["POST"]),
            Route("/v1/metrics", self._metrics_endpoint, methods=["GET"]),
        ]
        if self._test_clock:
            routes.append(Route("/v1/test/clock", self._clock_endpoint, methods=["GET", "POST"]))
        inner = Starlette(routes=routes, lifespan=lifespan)
        return _Guard(inner, self._token_digest, self.max_request_bytes, self._metrics)

    def _json(self, status: int, body: Any) -> Any:
        from starlette.responses import Response

        return Response(wire.dumps(body), status, self._headers(), "application/json")

    def _error(self, status: int, code: str, message: str) -> Any:
        return self._json(status, {"error": {"code": code, "message": message}})

    async def _health(self, request: Any) -> Any:
        failed = self._writer is not None and self._writer.failed is not None
        if failed or self._closing:
            return self._json(503, {"status": "failed" if failed else "stopping"})
        return self._json(200, {"status": "ok"})

    async def _info(self, request: Any) -> Any:
        ident = self._identity
        return self._json(
            200,
            {
                "protocol": wire.PROTOCOL,
                "store_id": ident.store_id,
                "generation": ident.generation,
                "lsn": ident.head,
                "boot": self.boot,
                "durability": self.durability,
                "max_request_bytes": self.max_request_bytes,
                "test_clock": self._test_clock,
            },
        )

    async def _body(self, request: Any, empty: Any = _NO_BODY) -> Any:
        """The request's JSON body (`empty` for an empty body, if given).

        Raises:
            _BadRequest: Too large (413), not JSON, or nested deeper than wire.MAX_DEPTH.
        """
        body = await _read_body(request, self.max_request_bytes)
        if not body and empty is not _NO_BODY:
            return empty
        try:
            doc = wire.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise _BadRequest(f"the body is not JSON: {e}") from None
        except RecursionError:
            doc = None  # nested past what Python's JSON parser reads: deeper than the limit
        else:
            if not wire.too_deep(doc):
                return doc
        raise _BadRequest(
            f"the body is JSON nested more than {wire.MAX_DEPTH} levels deep, the protocol's "
            "limit; nothing was applied"
        )

    async def _commit(self, request: Any) -> Any:
        try:
            doc = await self._body(request)
            works, retry_of = self._parse_commits(doc)
        except _BadRequest as e:
            return self._error(e.status, e.code, str(e))
        if self._closing:
            return self._error(503, "stopping", "the server is shutting down; nothing was applied")
        assert self._writer is not None
        loop = asyncio.get_running_loop()
        group = _Group(loop.create_future(), 0)
        answers: list[Any] = []  # per commit: a result, a _Work of this request, or a future
        new: list[_Work] = []
        waits: list[asyncio.Future[Any]] = [group.future]
        for kind, commit_id, spec in works:
            known = self._remembered.get(commit_id)
            inflight = self._inflight.get(commit_id)
            if known is not None:
                self._metrics.resends += 1
                answers.append(known)
            elif inflight is not None:
                self._metrics.resends += 1
                waiter: asyncio.Future[Any] = loop.create_future()
                inflight.waiters = [*(inflight.waiters or ()), waiter]
                answers.append(waiter)
                waits.append(waiter)
            elif retry_of is not None and retry_of != self.boot:
                self._metrics.unknown += 1
                answers.append({"ok": False, "error": _unknown(commit_id)})
            else:
                work = _Work(kind, spec, group, commit_id)
                self._inflight[commit_id] = work
                answers.append(work)
                new.append(work)
        group.remaining = len(new)
        if new:
            self._writer.submit(new)
        else:
            group.future.set_result(None)
        # asyncio.wait, not gather: a client that goes away must not cancel a shared commit.
        await asyncio.wait(waits)
        results = [
            a.result if isinstance(a, _Work) else a.result() if isinstance(a, asyncio.Future) else a
            for a in answers
        ]
        return self._json(200, {"results": results})

    def _parse_commits(self, doc: Any) -> tuple[list[tuple[int, str, Any]], str | None]:
        if not isinstance(doc, dict) or not isinstance(doc.get("commits"), list):
            raise _BadRequest('the body must be a JSON object with a "commits" list')
        commits = doc["commits"]
        if len(commits) > _MAX_COMMITS_PER_REQUEST:
            raise _BadRequest(
                f"{len(commits)} commits in one request; the limit is {_MAX_COMMITS_PER_REQUEST}",
                413,
                "too_large",
            )
        retry_of = doc.get("retry_of")
        if retry_of is not None and not isinstance(retry_of, str):
            raise _BadRequest("retry_of must be a str or null")
        works: list[tuple[int, str, Any]] = []
        seen: set[str] = set()
        for i, spec in enumerate(commits):
            where = f"commits[{i}]"
            if not isinstance(spec, dict):
                raise _BadRequest(f"{where} must be an object")
            commit_id = spec.get("id")
            if not isinstance(commit_id, str) or not 0 < len(commit_id) <= _ID_MAX:
                raise _BadRequest(f"{where}.id must be a str of 1 to {_ID_MAX} characters")
            if commit_id in seen:
                raise _BadRequest(f"{where}.id {commit_id!r} appears twice in the request")
            seen.add(commit_id)
            if "ops" in spec:
                works.append((_COMMIT, commit_id, _parse_ops(spec, where)))
            elif spec.get("seal") is True:
                works.append((_SEAL, commit_id, _parse_seal(spec, where)))
            elif "role" in spec:
                works.append((_CALL, commit_id, self._parse_call(spec, where)))
            else:
                raise _BadRequest(
                    f'{where} needs "ops" (memory operations), "role" (a role call) or "seal": true'
                )
        return works, retry_of

    def _parse_call(self, spec: dict[str, Any], where: str) -> dict[str, Any]:
        role, method = spec.get("role"), spec.get("method")
        if not isinstance(role, str) or role not in self._methods:
            raise _BadRequest(f"{where}.role {role!r} is not a role; the roles are {ROLE_NAMES}")
        if not isinstance(method, str) or method not in self._methods[role]:
            raise _BadRequest(f"{where}.method {method!r} is not a method of {role}")
        args, kwargs = spec.get("args", []), spec.get("kwargs", {})
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise _BadRequest(f"{where}: args must be a list and kwargs an object")
        try:
            return {
                "role": role,
                "method": method,
                "args": [wire.decode_value(a) for a in args],
                "kwargs": {str(k): wire.decode_value(v) for k, v in kwargs.items()},
            }
        except (ValueError, RecursionError) as e:
            raise _BadRequest(f"{where}: {e}") from None

    def _check_identity(self, request: Any) -> tuple[str, int] | None:
        q = request.query_params
        store, generation = q.get("store"), q.get("generation")
        if store is None and generation is None:
            return None
        try:
            return str(store), int(generation or "")
        except ValueError:
            raise _BadRequest("generation must be an int") from None

    async def _log(self, request: Any) -> Any:
        from starlette.responses import Response

        try:
            q = request.query_params
            after = _int_param(q, "after", 0, 0)
            max_bytes = min(_int_param(q, "max_bytes", _DEFAULT_READ_BYTES, 1), _MAX_READ_BYTES)
            wait = _float_param(q, "wait", 0.0)
            want = self._check_identity(request)
        except _BadRequest as e:
            return self._error(e.status, e.code, str(e))
        ident = self._identity
        if want is not None and want != (ident.store_id, ident.generation):
            return self._resync(
                f"the server's log is store {ident.store_id} generation "
                f"{ident.generation}, not {want[0]} generation {want[1]}"
            )
        if after > ident.head:
            return self._resync(f"after={after} is beyond the server's head LSN {ident.head}")
        if after == ident.head and wait > 0 and not self._closing and self._changed is not None:
            self._metrics.waiting_readers += 1
            try:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), min(wait, _MAX_WAIT_SECONDS))
            finally:
                self._metrics.waiting_readers -= 1
        if after >= self._identity.head:
            headers = {**self._headers(), wire.H_LAST: str(after)}
            return Response(b"", 200, headers, "application/octet-stream")
        outcome = await self._read(_READ, (after, max_bytes, want))
        if isinstance(outcome, Response):
            return outcome
        ident, data, last = outcome
        if data is None:
            return self._resync("the server's log changed generation")
        self._metrics.log_reads += 1
        self._metrics.log_bytes += len(data)
        # The identity the writer read with: the same instant as the bytes.
        headers = {**self._headers(ident), wire.H_LAST: str(last)}
        return Response(data, 200, headers, "application/octet-stream")

    async def _snapshot(self, request: Any) -> Any:
        from starlette.responses import Response

        try:
            max_bytes = _int_param(request.query_params, "max_bytes", _DEFAULT_READ_BYTES, 1)
        except _BadRequest as e:
            return self._error(e.status, e.code, str(e))
        outcome = await self._read(_SNAPSHOT, (0, min(max_bytes, _MAX_READ_BYTES), None))
        if isinstance(outcome, Response):
            return outcome
        ident, data, last = outcome
        headers = {**self._headers(ident), wire.H_LAST: str(last)}
        return Response(data, 200, headers, "application/octet-stream")

    async def _read(self, kind: int, spec: Any) -> Any:
        if self._writer is None:
            return self._error(503, "starting", "the server is not ready")
        work = _Work(kind, spec, _Group(asyncio.get_running_loop().create_future(), 1))
        self._writer.submit([work])
        await asyncio.wait([work.group.future])
        outcome = work.result
        if isinstance(outcome, BaseException):
            return self._json(500, {"error": wire.encode_error(outcome)})
        return outcome

    def _resync(self, why: str) -> Any:
        return self._error(409, "resync", f"{why}; fetch /v1/snapshot and follow from there")

    async def _manifest(self, request: Any) -> Any:
        if self._store is None:
            return self._error(503, "starting", "the server is not ready")
        return self._json(200, {"manifest": wire.encode_value(self._store.manifest())})

    async def _flush(self, request: Any) -> Any:
        try:
            doc = await self._body(request, empty={})
            if not isinstance(doc, dict):
                raise _BadRequest("the body must be empty or a JSON object")
        except _BadRequest as e:
            return self._error(e.status, e.code, str(e))
        if self._writer is None:
            return self._error(503, "starting", "the server is not ready")
        work = _Work(_FLUSH, None, _Group(asyncio.get_running_loop().create_future(), 1))
        self._writer.submit([work])
        await asyncio.wait([work.group.future])
        failure = work.result
        if failure is not None:
            return self._json(500, failure)
        return self._json(200, {"ok": True})

    async def _clock_endpoint(self, request: Any) -> Any:
        from .clock import to_microseconds
        from .testing.clock import ControllableClock

        clock = self._clock
        assert isinstance(clock, ControllableClock)
        if request.method == "GET":
            return self._json(200, {"now_us": to_microseconds(clock.now())})
        try:
            doc = await self._body(request)
            now_us = doc.get("now_us") if isinstance(doc, dict) else None
            if isinstance(now_us, bool) or not isinstance(now_us, int):
                raise _BadRequest('the body must be {"now_us": int}')
        except _BadRequest as e:
            return self._error(e.status, e.code, str(e))
        when = datetime.fromtimestamp(0, timezone.utc) + _microseconds(now_us)
        try:
            if when > clock.now():
                clock.set(when)
        except ValueError as e:
            return self._error(400, "bad_request", str(e))
        return self._json(200, {"now_us": now_us})

    async def _metrics_endpoint(self, request: Any) -> Any:
        from starlette.responses import Response

        return Response(
            self.metrics_text(),
            200,
            self._headers(),
            "text/plain; version=0.0.4; charset=utf-8",
        )

    def metrics_text(self) -> str:
        """The server's metrics in the Prometheus text exposition format."""
        m, ident, w = self._metrics, self._identity, self._writer
        lines: list[str] = []

        def metric(name: str, kind: str, help: str, samples: Sequence[tuple[str, float]]) -> None:
            lines.append(f"# HELP memcommit_{name} {help}")
            lines.append(f"# TYPE memcommit_{name} {kind}")
            for labels, value in samples:
                lines.append(f"memcommit_{name}{labels} {value:g}")

        metric(
            "up", "gauge", "1 while the server takes commits.", [("", 0 if self._closing else 1)]
        )
        metric("lsn", "gauge", "The durable head LSN.", [("", ident.head)])
        metric("generation", "gauge", "The log generation.", [("", ident.generation)])
        metric(
            "commits_total",
            "counter",
            "Memory commits answered, by outcome.",
            [(f'{{result="{k}"}}', v) for k, v in m.commits.items()],
        )
        metric(
            "role_calls_total",
            "counter",
            "Role calls answered, by outcome.",
            [(f'{{result="{k}"}}', v) for k, v in m.calls.items()],
        )
        metric(
            "resends_total", "counter", "Resent commits answered from memory.", [("", m.resends)]
        )
        metric(
            "outcome_unknown_total",
            "counter",
            "Resends from before a restart, answered commit_outcome_unknown.",
            [("", m.unknown)],
        )
        batches = w.batches if w else 0
        metric("batches_total", "counter", "Batches the writer ran.", [("", batches)])
        metric("fsyncs_total", "counter", "fsyncs the writer made.", [("", w.fsyncs if w else 0)])
        metric(
            "batched_commits_total",
            "counter",
            "Commits and role calls the writer ran (divide by batches for the group size).",
            [("", w.batched_commits if w else 0)],
        )
        cumulative, samples = 0, list[tuple[str, float]]()
        for bound, count in zip((*_LATENCY_BUCKETS, float("inf")), m.latency, strict=True):
            cumulative += count
            le = "+Inf" if bound == float("inf") else f"{bound:g}"
            samples.append((f'_bucket{{le="{le}"}}', cumulative))
        samples += [("_sum", m.latency_sum), ("_count", m.latency_count)]
        metric(
            "commit_seconds",
            "histogram",
            "From a commit's arrival to its durable answer.",
            samples,
        )
        metric(
            "log_reads_total", "counter", "Log reads answered with records.", [("", m.log_reads)]
        )
        metric("log_bytes_total", "counter", "Raw log bytes sent to replicas.", [("", m.log_bytes)])
        metric("waiting_readers", "gauge", "Long polls waiting now.", [("", m.waiting_readers)])
        metric(
            "http_requests_total",
            "counter",
            "HTTP requests, by path and status.",
            [(f'{{path="{p}",status="{s}"}}', n) for (p, s), n in sorted(m.requests.items())],
        )
        metric("start_time_seconds", "gauge", "When the server started.", [("", self._started)])
        return "\n".join(lines) + "\n"


def _microseconds(us: int) -> Any:
    from datetime import timedelta

    return timedelta(microseconds=us)


def _unknown(commit_id: str) -> dict[str, Any]:
    return wire.encode_error(
        wire.CommitOutcomeUnknown(
            f"commit {commit_id}: its answer was lost and the server has restarted since it was "
            "sent, so whether it was applied is unknown; refresh and check before committing "
            "it again",
            commit_id=commit_id,
        )
    )


def _int_param(q: Any, name: str, default: int, minimum: int) -> int:
    raw = q.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _BadRequest(f"{name}: {raw!r} is not an int") from None
    if value < minimum:
        raise _BadRequest(f"{name}: must be at least {minimum}, got {value}")
    return value


def _float_param(q: Any, name: str, default: float) -> float:
    raw = q.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise _BadRequest(f"{name}: {raw!r} is not a number") from None
    if not 0 <= value < float("inf"):
        raise _BadRequest(f"{name}: must be a number of seconds >= 0, got {raw!r}")
    return value


def _parse_seal(spec: dict[str, Any], where: str) -> dict[str, Any]:
    key = spec.get("key")
    if key is None:
        return {"key": None}
    try:
        decoded = wire.decode_value(key)
    except ValueError as e:
        raise _BadRequest(f"{where}.key: {e}") from None
    if not isinstance(decoded, bytes):
        raise _BadRequest(f"{where}.key must be bytes")
    return {"key": decoded}


def _parse_ops(spec: dict[str, Any], where: str) -> dict[str, Any]:
    ops, expect_lsn = spec["ops"], spec.get("expect_lsn")
    if not isinstance(ops, list):
        raise _BadRequest(f"{where}.ops must be a list")
    if expect_lsn is not None and (isinstance(expect_lsn, bool) or not isinstance(expect_lsn, int)):
        raise _BadRequest(f"{where}.expect_lsn must be an int or null")
    for j, op in enumerate(ops):
        if (
            not isinstance(op, list)
            or not op
            or not isinstance(op[0], str)
            or op[0] not in _OP_ARITY
        ):
            raise _BadRequest(
                f"{where}.ops[{j}] must be a list starting with one of {sorted(_OP_ARITY)}"
            )
        if len(op) != _OP_ARITY[op[0]]:
            wanted = _OP_ARITY[op[0]] - 1
            raise _BadRequest(
                f"{where}.ops[{j}]: {op[0]!r} takes {wanted} values, not {len(op) - 1}"
            )
    return {"ops": ops, "expect_lsn": expect_lsn}


async def _read_body(request: Any, limit: int) -> bytes:
    length = request.headers.get("content-length")
    if length is not None:
        try:
            declared = int(length)
        except ValueError:
            raise _BadRequest("content-length is not an int") from None
        if declared > limit:
            raise _BadRequest(
                f"the body is {declared} bytes; this server takes at most {limit} "
                "(--max-request-bytes)",
                413,
                "too_large",
            )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _BadRequest(
                f"the body is over {limit} bytes (--max-request-bytes)", 413, "too_large"
            )
        chunks.append(chunk)
    return b"".join(chunks)


class _Guard:
    """ASGI middleware: the token check (constant time), and request counting."""

    def __init__(
        self,
        app: Callable[[_Scope, _Receive, _Send], Awaitable[None]],
        token_digest: bytes | None,
        limit: int,
        metrics: _Metrics,
    ) -> None:
        self._app = app
        self._digest = token_digest
        self._limit = limit
        self._metrics = metrics

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        path = scope["path"]
        counted = path if path.startswith("/v1/") and len(path) < 32 else "other"

        async def counting_send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                key = (counted, int(message["status"]))
                self._metrics.requests[key] = self._metrics.requests.get(key, 0) + 1
            await send(message)

        if self._digest is not None and path != "/v1/health" and not self._authorized(scope):
            body = wire.dumps(
                {"error": {"code": "unauthorized", "message": "a valid bearer token is required"}}
            )
            await counting_send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b'Bearer realm="memcommit"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self._app(scope, receive, counting_send)

    def _authorized(self, scope: _Scope) -> bool:
        assert self._digest is not None
        given = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                given = value
                break
        scheme, _, token = given.partition(b" ")
        # Hash first so the comparison takes the same time whatever the token's length.
        digest = hashlib.sha256(token.strip()).digest()
        return hmac.compare_digest(digest, self._digest) and scheme.lower() == b"bearer"


def _uvicorn_server(config: Any, owner: MemoryServer) -> Any:
    """Return a uvicorn server that tells `owner` when a signal asks it to stop."""
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, telling the MemoryServer when a signal asks it to stop."""

        def __init__(self, config: Any, owner: MemoryServer) -> None:
            super().__init__(config)
            self._owner = owner

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            loop = self._owner._loop
            if loop is not None:
                loop.call_soon_threadsafe(self._owner.begin_shutdown)
            super().handle_exit(sig, frame)

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                owner = self._owner
                print(
                    f"memcommit serve: listening on {owner.url} ({owner.path}, "
                    f"lsn {owner._identity.head}, durability {owner.durability})",
                    file=sys.stderr,
                    flush=True,
                )

    return Server(config, owner)


# -- the command line ------------------------------------------------------------------------


def add_serve_command(commands: Any) -> None:
    """Add ``serve`` to the ``memcommit`` command line's subcommands."""
    serve = commands.add_parser(
        "serve",
        help="serve a store to other processes over HTTP (RemoteStore)",
        description="Own the store's log and run every commit for RemoteStore clients. "
        "Binds 127.0.0.1 unless told otherwise; any other address needs --token-file. "
        "Stops cleanly on SIGTERM: commits in flight finish and are fsynced.",
    )
    serve.add_argument("path", metavar="PATH", help="the store file (created if missing)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument(
        "--port",
        type=int,
        default=wire.DEFAULT_PORT,
        help=f"TCP port (default {wire.DEFAULT_PORT}; 0 picks a free one)",
    )
    serve.add_argument("--token-file", help="file holding the bearer token clients must send")
    serve.add_argument("--tls-cert", help="PEM certificate chain, to serve HTTPS")
    serve.add_argument("--tls-key", help="PEM private key of --tls-cert")
    serve.add_argument(
        "--durability",
        choices=("commit", "batch", "none"),
        default="commit",
        help="commit (default): answer a commit once fsynced, one fsync per batch",
    )
    serve.add_argument(
        "--max-request-bytes",
        type=int,
        default=wire.DEFAULT_MAX_REQUEST_BYTES,
        help=f"largest request body accepted (default {wire.DEFAULT_MAX_REQUEST_BYTES})",
    )
    serve.add_argument(
        "--test-clock",
        nargs="?",
        const=_TEST_CLOCK_START,
        metavar="START",
        help="TESTING AID: read a controllable clock (starting at START, ISO-8601 or epoch "
        "ms) that POST /v1/test/clock sets. Never use it in production.",
    )
    serve.set_defaults(handler=_run_serve)


def _read_token(path: str) -> str:
    from .cli import CommandError

    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as e:
        raise CommandError(f"{path}: cannot read the token file: {e.strerror or e}") from None
    if not token:
        raise CommandError(f"{path}: the token file is empty")
    return token


def _parse_start(text: str) -> datetime:
    from .cli import CommandError

    try:
        if text.lstrip("-").isdigit():
            return datetime.fromtimestamp(int(text) / 1000, timezone.utc)
        when = datetime.fromisoformat(text)
    except (ValueError, OverflowError):
        raise CommandError(f"--test-clock: {text!r} is not ISO-8601 or epoch ms", 2) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def _run_serve(args: argparse.Namespace) -> int:
    from .cli import CommandError

    token = _read_token(args.token_file) if args.token_file else None
    clock = None
    if args.test_clock is not None:
        from .testing.clock import ControllableClock

        clock = ControllableClock(_parse_start(args.test_clock))
        print(
            "memcommit serve: WARNING: --test-clock is a testing aid; the clock moves only "
            "when POST /v1/test/clock says so",
            file=sys.stderr,
        )
    try:
        server = MemoryServer(
            args.path,
            host=args.host,
            port=args.port,
            token=token,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            durability=args.durability,
            clock=clock,
            test_clock=args.test_clock is not None,
            max_request_bytes=args.max_request_bytes,
        )
    except ValueError as e:
        raise CommandError(str(e), 2) from None
    if not is_loopback(args.host) and not server.tls:
        print(
            f"memcommit serve: WARNING: serving {args.host} without TLS sends the token and "
            "every memory in clear text; use --tls-cert/--tls-key",
            file=sys.stderr,
        )
    # Open the store before binding, so a locked or damaged log fails as a one-line error.
    with open_store(args.path, durability="none"):
        pass
    server.run()
    return 0


# -- running a server as a child process (tests, scripts) ------------------------------------


class ServerProcess:
    """A ``memcommit serve`` child process, started on a free port and stopped on exit.

    Args:
        path: The store file.
        *args: More ``serve`` options (``"--test-clock"``, ``"--token-file", F``...).
        port: The port (default 0: a free one, read from the server's ``listening on`` line).
        timeout: Seconds to wait for the server to listen.

    Raises:
        RuntimeError: The server exited or did not listen in time (its output is included).

    Example:
        >>> with ServerProcess("memory.db") as server:  # doctest: +SKIP
        ...     store = memcommit.RemoteStore(server.url)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *args: str,
        port: int = 0,
        timeout: float = 30.0,
    ) -> None:
        self.path = os.fspath(path)
        self.args = args
        cmd = [sys.executable, "-m", "memcommit", "serve", self.path, "--port", str(port), *args]
        self.process = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self.output: list[str] = []
        self.url = self._wait_listening(timeout)
        self.port = int(self.url.rsplit(":", 1)[1])
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()

    def _wait_listening(self, timeout: float) -> str:
        assert self.process.stderr is not None
        deadline = time.monotonic() + timeout
        timer = threading.Timer(timeout, self.process.kill)
        timer.start()
        try:
            for raw in self.process.stderr:
                line = raw.decode("utf-8", "replace").rstrip()
                self.output.append(line)
                marker = "listening on "
                if marker in line:
                    return line.split(marker, 1)[1].split(" ", 1)[0]
                if time.monotonic() > deadline:
                    break
        finally:
            timer.cancel()
        self.process.wait()
        self.process.stderr.close()
        raise RuntimeError(
            f"memcommit serve {self.path} did not start (exit {self.process.returncode}): "
            + " | ".join(self.output[-10:])
        )

    def _read_rest(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            self.output.append(raw.decode("utf-8", "replace").rstrip())

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self.process.pid

    def terminate(self, timeout: float = 60.0) -> int:
        """Send SIGTERM and wait for the server to finish; return its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> int:
        """SIGKILL the server (a crash) and reap it; return its exit code."""
        if self.process.poll() is None:
            self.process.kill()
        return self.wait(30.0)

    def wait(self, timeout: float = 60.0) -> int:
        """Wait for the process to exit and return its exit code."""
        code = self.process.wait(timeout)
        self._drain.join(5)
        if self.process.stderr is not None and not self._drain.is_alive():
            self.process.stderr.close()
        return code

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            try:
                self.terminate(30.0)
            except subprocess.TimeoutExpired:
                self.kill()
