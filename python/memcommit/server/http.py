"""The server's HTTP side: :class:`MemoryServer`, its routes and how each is answered.

A route checks its request (:mod:`.requests`), hands the work to the writer thread
(:mod:`.writer`) and answers once the writer is done; a resent commit is answered, not
applied again (:mod:`.resends`). The protocol is
:mod:`memcommit.wire`; the design is in :mod:`memcommit.server`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
import time
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from typing import Any

from .. import wire
from .._extras import require
from ..clock import Clock, to_microseconds
from ..errors import InvalidValue, MemcommitError
from ..store import Durability, MemoryStore
from ..store import open as open_store
from . import listen
from .auth import App, Receive, Scope, Send, TokenGuard, check_access, token_digest
from .metrics import CONTENT_TYPE, Metrics
from .requests import (
    DEFAULT_READ_BYTES,
    MAX_READ_BYTES,
    BadRequest,
    BodyStream,
    ClientGone,
    float_param,
    int_param,
    log_identity,
    parse_commits,
    read_json,
    role_methods,
)
from .resends import Resends
from .writer import FLUSH, READ, SNAPSHOT, WRITES, Group, Identity, Work, Writer

__all__ = ["TEST_CLOCK_START", "MemoryServer"]

TEST_CLOCK_START = "2026-01-01T00:00:00+00:00"
"""Where ``--test-clock`` starts when given no time."""

_MAX_WAIT_SECONDS = 60.0


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
        unix_socket: Also serve on a Unix domain socket at this path (owner-only, mode 0600;
            removed when the server stops), for clients on the same host
            (``RemoteStore("unix:///path")``).
        tcp: Serve on TCP (`host`, `port`); False serves the Unix socket alone.
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
        unix_socket: str | os.PathLike[str] | None = None,
        tcp: bool = True,
        token: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        durability: Durability = "commit",
        clock: Clock | None = None,
        test_clock: bool = False,
        max_request_bytes: int = wire.DEFAULT_MAX_REQUEST_BYTES,
        remember: int = wire.DEFAULT_REMEMBER,
    ) -> None:
        require("server")  # starlette and uvicorn: the 'server' extra
        check_access(host, token, tls_cert, tls_key)
        if durability not in ("commit", "batch", "none"):
            raise InvalidValue(
                f"durability: {durability!r} is not a mode; use commit, batch or none"
            )
        if test_clock:
            from ..testing.clock import ControllableClock

            if clock is None:
                clock = ControllableClock(datetime.fromisoformat(TEST_CLOCK_START))
            if not isinstance(clock, ControllableClock):
                raise InvalidValue("test_clock: the clock must be a ControllableClock")
        for name, value in (("max_request_bytes", max_request_bytes), ("remember", remember)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidValue(f"{name}: must be a positive int, got {value!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise InvalidValue(f"port: must be an int from 0 to 65535, got {port!r}")
        if not tcp and unix_socket is None:
            raise InvalidValue("tcp=False needs unix_socket: the server must listen somewhere")
        self.path = os.fspath(path)
        self.host = host
        self.port = port
        self.unix_socket = None if unix_socket is None else os.path.abspath(unix_socket)
        self.tcp = tcp
        self.tls = tls_cert is not None
        self._tls_cert = tls_cert
        self._tls_key = tls_key
        self._token_digest = token_digest(token)
        self.durability: Durability = durability
        self._clock = clock
        self._test_clock = test_clock
        self.max_request_bytes = max_request_bytes
        self.boot = secrets.token_hex(8)
        self._methods = role_methods()
        self._store: MemoryStore | None = None
        self._writer: Writer | None = None
        self._identity = Identity("", 0, 0)
        self._changed: asyncio.Event | None = None
        self._closing = False
        self._metrics = Metrics()
        self._resends = Resends(self.boot, remember, self._metrics)
        self._started = time.time()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.app = self._build_app()

    # -- life ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL clients use.

        TCP's (with the bound port once the server is listening), or the Unix socket's when
        the server has no TCP.
        """
        if not self.tcp:
            return self.unix_url or ""
        scheme = "https" if self.tls else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"

    @property
    def unix_url(self) -> str | None:
        """The Unix socket's URL (``unix:///path``), if the server has one."""
        return None if self.unix_socket is None else f"unix://{self.unix_socket}"

    async def _startup(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        # The writer fsyncs each batch itself; see the module docstring.
        native_durability: Durability = "none" if self.durability == "commit" else self.durability
        store = open_store(self.path, clock=self._clock, durability=native_durability)
        self._store = store
        self._writer = Writer(store, loop, self.durability == "commit", self._finish)
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

        Prints ``memcommit serve: listening on URL`` (``URL and unix:///path`` with a Unix
        socket) to standard error once it accepts.

        Raises:
            CannotListen: The Unix socket cannot be made (the message names its path).
        """
        listen.serve(
            self.app,
            host=self.host if self.tcp else None,
            port=self.port,
            unix_socket=self.unix_socket,
            tls_cert=self._tls_cert,
            tls_key=self._tls_key,
            on_bound=self._bound,
            on_listening=self._listening,
            on_signal=self._signalled,
        )

    def _bound(self, port: int) -> None:
        self.port = port

    def _listening(self) -> None:
        urls = [self.url] if self.tcp else []
        if self.unix_url is not None:
            urls.append(self.unix_url)
        print(
            f"memcommit serve: listening on {' and '.join(urls)} ({self.path}, "
            f"lsn {self._identity.head}, durability {self.durability})",
            file=sys.stderr,
            flush=True,
        )

    def _signalled(self) -> None:
        """A signal asks the server to stop (runs in the signal handler, off the loop)."""
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self.begin_shutdown)

    # -- bookkeeping on the event loop -----------------------------------------------------

    def _finish(self, batch: list[Work], identity: Identity) -> None:
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
            if work.kind in WRITES:
                m.answered(work.kind, result, now - work.queued_at)
                self._resends.finished(work)
        if identity.store_id:
            self._identity = identity
        if self._changed is not None and any(w.wrote for w in batch):
            self._changed.set()
            self._changed = asyncio.Event()

    def _headers(self, ident: Identity | None = None) -> dict[str, str]:
        ident = self._identity if ident is None else ident
        return {
            wire.H_STORE: ident.store_id,
            wire.H_GENERATION: str(ident.generation),
            wire.H_LSN: str(ident.head),
            wire.H_BOOT: self.boot,
        }

    # -- HTTP ------------------------------------------------------------------------------

    def _build_app(self) -> App:
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
            Route("/v1/clock", self._now, methods=["GET"]),
            # Reached only by other methods (405): `app` below answers POST before Starlette.
            Route("/v1/commit", _AsgiEndpoint(self._commit_asgi), methods=["POST"]),
            Route("/v1/log", self._log, methods=["GET"]),
            Route("/v1/snapshot", self._snapshot, methods=["GET"]),
            Route("/v1/manifest", self._manifest, methods=["GET"]),
            Route("/v1/flush", self._flush, methods=["POST"]),
            Route("/v1/metrics", self._metrics_endpoint, methods=["GET"]),
        ]
        if self._test_clock:
            routes.append(Route("/v1/test/clock", self._clock_endpoint, methods=["GET", "POST"]))
        self._metrics.paths = frozenset(route.path for route in routes)
        inner = Starlette(
            routes=routes, lifespan=lifespan, exception_handlers={ClientGone: self._client_gone}
        )

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            # Commits, most of what a server answers, skip Starlette's layers: the same
            # answer (self._commit_answer) sent as two ASGI messages.
            if scope["type"] == "http" and scope["method"] == "POST":
                if scope["path"] == "/v1/commit":
                    await self._commit_asgi(scope, receive, send)
                    return
            await inner(scope, receive, send)

        return TokenGuard(app, self._token_digest, self._metrics.request)

    def _json(self, status: int, body: Any) -> Any:
        from starlette.responses import Response

        return Response(wire.dumps(body), status, self._headers(), "application/json")

    def _error(self, status: int, code: str, message: str) -> Any:
        return self._json(status, _error_doc(code, message))

    async def _client_gone(self, request: Any, exc: Exception) -> Any:
        """A route's client went away mid-body: nothing ran, and nobody reads the answer."""
        from starlette.responses import Response

        return Response(status_code=400)

    async def _health(self, request: Any) -> Any:
        failed = self._writer is not None and self._writer.failed is not None
        if failed or self._closing:
            return self._json(503, {"status": "failed" if failed else "stopping"})
        return self._json(200, {"status": "ok"})

    async def _now(self, request: Any) -> Any:
        if self._store is None:
            return self._error(503, "starting", "the server is not ready")
        return self._json(200, {"now_us": self._store.now_us()})

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

    async def _commit_asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``POST /v1/commit`` as a bare ASGI app: :meth:`_commit_answer`, then its answer."""
        try:
            status, body = await self._commit_answer(BodyStream(scope, receive))
        except ClientGone:
            return  # nothing was queued: the body never arrived whole
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        headers.extend((k.encode(), v.encode()) for k, v in self._headers().items())
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _commit_answer(self, request: Any) -> tuple[int, bytes]:
        """The status and JSON body that answer a ``POST /v1/commit`` `request`.

        `request` has what :func:`.requests.read_json` reads: ``headers`` and ``stream()``.
        """
        try:
            doc = await read_json(request, self.max_request_bytes)
            works, retry_of = parse_commits(doc, self._methods)
        except BadRequest as e:
            return e.status, wire.dumps(_error_doc(e.code, str(e)))
        if self._closing and not all(self._resends.known(c, retry_of) for _, c, _ in works):
            # A resend whose first attempt was answered, or is still running, is answered
            # while the server drains: its answer exists (or will, before the server stops).
            message = "the server is shutting down; nothing was applied"
            return 503, wire.dumps(_error_doc("stopping", message))
        assert self._writer is not None
        loop = asyncio.get_running_loop()
        group = Group(loop.create_future(), 0)
        answers: list[Any] = []  # per commit: a result, a Work of this request, or a future
        new: list[Work] = []
        waits: list[asyncio.Future[Any]] = [group.future]
        for kind, commit_id, spec in works:
            earlier = self._resends.answer(commit_id, retry_of, loop)
            if earlier is None:
                work = Work(kind, spec, group, commit_id)
                self._resends.started(work)
                answers.append(work)
                new.append(work)
            else:
                answers.append(earlier)
                if isinstance(earlier, asyncio.Future):
                    waits.append(earlier)
        group.remaining = len(new)
        if new:
            self._writer.submit(new)
        else:
            group.future.set_result(None)
        if len(waits) == 1:
            # The request's own future: cancelled with the request (a server stopping), it
            # leaves the commits to run, and _finish answers only futures not done.
            await group.future
        else:
            # asyncio.wait, not gather: a request cancelled must not cancel the futures of
            # resends it waits on.
            await asyncio.wait(waits)
        results = [
            a.result if isinstance(a, Work) else a.result() if isinstance(a, asyncio.Future) else a
            for a in answers
        ]
        return 200, wire.dumps({"results": results})

    async def _log(self, request: Any) -> Any:
        from starlette.responses import Response

        try:
            q = request.query_params
            after = int_param(q, "after", 0, 0)
            max_bytes = min(int_param(q, "max_bytes", DEFAULT_READ_BYTES, 1), MAX_READ_BYTES)
            wait = float_param(q, "wait", 0.0)
            want = log_identity(q)
        except BadRequest as e:
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
        ident = self._identity
        if after >= ident.head:
            headers = {**self._headers(), wire.H_LAST: str(after)}
            return Response(b"", 200, headers, "application/octet-stream")
        outcome = self._read_here(ident, after, max_bytes, want)
        if outcome is None:
            outcome = await self._read(READ, (after, max_bytes, want))
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
            max_bytes = int_param(request.query_params, "max_bytes", DEFAULT_READ_BYTES, 1)
        except BadRequest as e:
            return self._error(e.status, e.code, str(e))
        outcome = await self._read(SNAPSHOT, (0, min(max_bytes, MAX_READ_BYTES), None))
        if isinstance(outcome, Response):
            return outcome
        ident, data, last = outcome
        headers = {**self._headers(ident), wire.H_LAST: str(last)}
        return Response(data, 200, headers, "application/octet-stream")

    def _read_here(
        self, ident: Identity, after: int, max_bytes: int, want: tuple[str, int] | None
    ) -> tuple[Identity, bytes | None, int] | None:
        """A log read on the event loop, up to what the writer's last batch left durable.

        The commits up to `ident`'s head are read while the writer goes on with the next
        batch, so a follower waits for none. None when it cannot be done here (no log to
        read, or the read failed): the writer reads instead. The read takes the log's read
        lock with the GIL released: while the writer is inside a commit it waits for that
        commit (microseconds for the usual few records; a commit of a request near
        ``--max-request-bytes`` holds it for tens of milliseconds), and the event loop with it.
        """
        if ident.view is None:
            return None
        if want is not None and want != (ident.store_id, ident.generation):
            return ident, None, after
        try:
            data, last = ident.view.read_raw(after, max_bytes, ident.head)
            # Log compaction may have moved the view to a new generation since the batch: then
            # the bytes may not be the ones `ident` names (checked after the read, so a move
            # before it is seen too).
            if int(ident.view.info()["generation"]) != ident.generation:
                return None
        except MemcommitError:  # closed, or damaged: the writer says
            return None
        return ident, data, last

    async def _read(self, kind: int, spec: Any) -> Any:
        if self._writer is None:
            return self._error(503, "starting", "the server is not ready")
        outcome = await _run_one(self._writer, kind, spec)
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
            doc = await read_json(request, self.max_request_bytes, empty={})
            if not isinstance(doc, dict):
                raise BadRequest("the body must be empty or a JSON object")
        except BadRequest as e:
            return self._error(e.status, e.code, str(e))
        if self._writer is None:
            return self._error(503, "starting", "the server is not ready")
        failure = await _run_one(self._writer, FLUSH, None)
        if failure is not None:
            return self._json(500, failure)
        return self._json(200, {"ok": True})

    async def _clock_endpoint(self, request: Any) -> Any:
        from ..testing.clock import ControllableClock

        clock = self._clock
        assert isinstance(clock, ControllableClock)
        if request.method == "GET":
            return self._json(200, {"now_us": to_microseconds(clock.now())})
        try:
            doc = await read_json(request, self.max_request_bytes)
            now_us = doc.get("now_us") if isinstance(doc, dict) else None
            if isinstance(now_us, bool) or not isinstance(now_us, int):
                raise BadRequest('the body must be {"now_us": int}')
        except BadRequest as e:
            return self._error(e.status, e.code, str(e))
        when = datetime.fromtimestamp(0, timezone.utc) + timedelta(microseconds=now_us)
        try:
            if when > clock.now():
                clock.set(when)
        except ValueError as e:
            return self._error(400, "bad_request", str(e))
        # The clock as it now is: never moved back, so an earlier time leaves it where it was.
        return self._json(200, {"now_us": to_microseconds(clock.now())})

    async def _metrics_endpoint(self, request: Any) -> Any:
        from starlette.responses import Response

        return Response(
            self.metrics_text(),
            200,
            self._headers(),
            CONTENT_TYPE,
        )

    def metrics_text(self) -> str:
        """The server's metrics in the Prometheus text exposition format."""
        return self._metrics.text(
            up=not self._closing, ident=self._identity, writer=self._writer, started=self._started
        )


async def _run_one(writer: Writer, kind: int, spec: Any) -> Any:
    """Have the writer run one work of `kind` and return its result."""
    work = Work(kind, spec, Group(asyncio.get_running_loop().create_future(), 1))
    writer.submit([work])
    await asyncio.wait([work.group.future])
    return work.result


def _error_doc(code: str, message: str) -> dict[str, Any]:
    """The body of an error answer."""
    return {"error": {"code": code, "message": message}}


class _AsgiEndpoint:
    """A bound method that is an ASGI app, wrapped so that Starlette's `Route` takes it as one.

    Given the method itself, `Route` would call it with a request.
    """

    def __init__(self, app: App) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)
