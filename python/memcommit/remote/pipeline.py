"""The road to the server: keep-alive connections, retries, and commits that travel together.

* :class:`Http` is a small pool of HTTP/1.1 keep-alive connections: native over TCP and Unix
  sockets, the standard library's ``http.client`` over TLS.
* :class:`Pipeline` sends requests over it: a read is retried while the server is away
  (:meth:`Pipeline.request`); commits and role calls from many threads of one process are
  pipelined (:meth:`Pipeline.submit`): the ones queued together travel in one request, and
  the server fsyncs them together.
* Sharing a request never changes a commit's outcome: the commits of one request are kept
  within the server's ``--max-request-bytes`` (its ``/v1/info`` says how many; asked once per
  server start, and only for a request that could be over the limit), and a request of
  several commits that the server refuses as a whole (400 or 413: refused before anything in
  it ran) is sent again split, down to one commit a request, so that each commit gets the
  answer it would have got alone.
* A commit whose answer is lost (a reset connection, a timeout) is resent with the same
  commit id and is not applied twice: the resend names the server start it may have reached
  (``retry_of``), and a server started since then answers
  :class:`~memcommit.wire.CommitOutcomeUnknown` rather than guess. If no answer comes back
  within the retry window, the outcome is unknown too and that error is raised here.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import os
import secrets
import select
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, cast

from .. import _native, wire
from ..errors import InvalidType, InvalidValue, StoreClosed

__all__ = ["CommitIds", "Http", "MaybeSent", "NotSent", "Pipeline", "seconds_arg"]

_MAX_BATCH = 512  # commits per request from one store
_MAX_USERS = 4096  # threads a pipeline remembers having sent through it
_ASK_BYTES = 1024 * 1024  # a request of several commits under this goes without asking the limit
_ENVELOPE = len(b'{"commits":[],"retry_of":}') + 64  # a request body's bytes besides its commits
_REFUSED = (400, 413)  # refused as a whole, before anything in it ran (requests.BadRequest)


class NotSent(Exception):
    """The request surely did not reach the server (no connection, or not written whole)."""


class MaybeSent(Exception):
    """The request may have reached the server; its answer was lost."""


Headers = Mapping[str, str]
"""An answer's headers, names lowercased (the :mod:`memcommit.wire` ``H_*`` names)."""


class _TlsConnection(http.client.HTTPSConnection):
    """An HTTPS keep-alive connection that remembers which server start last answered on it."""

    heard: str | None = None


def seconds_arg(value: object, field: str, *, zero: bool = True) -> float:
    """A number of seconds a caller gave as `field`, checked.

    An int or float, finite, at least 0 (above 0 unless `zero`).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidType(f"{field} must be a number of seconds, not {type(value).__name__}")
    if not (value >= 0 if zero else value > 0) or value == float("inf"):
        least = "0 or more" if zero else "more than 0"
        raise InvalidValue(f"{field}: must be a finite number of seconds, {least}, got {value!r}")
    return float(value)


def _token_arg(token: object) -> str | None:
    """The bearer token, checked: it goes into a header line as it is."""
    if token is None:
        return None
    if not isinstance(token, str):
        raise InvalidType(f"token must be str or None, not {type(token).__name__}")
    if not token or any(c < " " or c == "\x7f" for c in token) or not token.isascii():
        raise InvalidValue(
            "token: must be non-empty ASCII text without control characters (a header "
            "carries it as it is: a line break would end the header)"
        )
    return token


def _port_arg(url: str, parts: urllib.parse.SplitResult) -> int | None:
    """The port `url` names (None: the scheme's own), checked."""
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise InvalidValue(f"url: {url!r}: the port must be a number from 1 to 65535")
    return port


def _tls_context(ca_file: str | os.PathLike[str] | None) -> ssl.SSLContext:
    """The TLS settings of an ``https://`` client, trusting `ca_file` (or the system's CAs)."""
    if ca_file is None:
        return ssl.create_default_context()
    name = os.fspath(ca_file)
    try:
        return ssl.create_default_context(cafile=name)
    except ssl.SSLError as e:  # an OSError too: first
        raise InvalidValue(
            f"ca_file {name}: not a PEM file of certificates ({e.reason or e})"
        ) from None
    except OSError as e:
        raise InvalidValue(f"ca_file {name}: cannot read it: {e.strerror or e}") from None


def _closed_by_peer(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle connection was closed (or written to) by the other end.

    An idle HTTP/1.1 connection receives nothing until it sends a request, so a socket that
    is readable now holds an end of stream (the server closed it: it stopped, or its
    keep-alive ran out) or bytes no request asked for; either way it is done.
    """
    sock = conn.sock
    if sock is None:
        return True
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class Http:
    """A small pool of keep-alive HTTP/1.1 connections to one server.

    Over TCP (``http://``) or a Unix domain socket (``unix:///path``, or ``unix:path``
    relative to the working directory), the pool is native (:class:`memcommit._native.
    HttpClient`: the request written and its answer read and parsed with the GIL released);
    over TLS (``https://``) it is the standard library's ``http.client``.

    Safe to share between threads: each request takes a connection of its own. Each
    connection remembers the server start (``X-Memcommit-Boot``) that last answered on it:
    while such a connection stays open, that server process is still running
    (:meth:`hears`).
    """

    def __init__(self, url: str, token: str | None, timeout: float, ca_file: str | None) -> None:
        if not isinstance(url, str):
            raise InvalidType(f"url must be str, not {type(url).__name__}")
        token = _token_arg(token)
        timeout = seconds_arg(timeout, "timeout", zero=False)
        if ca_file is not None and not isinstance(ca_file, (str, os.PathLike)):
            raise InvalidType(f"ca_file must be a path or None, not {type(ca_file).__name__}")
        parts = urllib.parse.urlsplit(url)
        unix: str | None = None
        if parts.scheme == "unix":
            if parts.netloc or not parts.path or parts.query or parts.fragment:
                raise InvalidValue(
                    f"url: {url!r} is not a Unix socket URL; write unix:///absolute/path "
                    "or unix:relative/path"
                )
            unix = os.path.abspath(urllib.parse.unquote(parts.path))
        elif parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidValue(
                f"url: {url!r} is not an http://, https:// or unix:// (Unix socket) URL"
            )
        self.url = url.rstrip("/") if unix is None else f"unix://{unix}"
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "localhost"
        self._port = _port_arg(url, parts) or (443 if self._https else 80)
        self._prefix = "" if unix is not None else parts.path.rstrip("/")
        self._timeout = timeout
        self._headers = {"Content-Type": "application/json"}
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._native: _native.HttpClient | None = None
        self._context: ssl.SSLContext | None = None
        if self._https:
            self._context = _tls_context(ca_file)
        elif unix is not None:
            self._native = _native.HttpClient(unix_path=unix, headers=list(self._headers.items()))
        else:
            self._native = _native.HttpClient(
                host=self._host, port=self._port, headers=list(self._headers.items())
            )
        self._idle: list[_TlsConnection] = []
        self._busy: set[_TlsConnection] = set()
        self._lock = threading.Lock()
        self.closed = False

    def _connection(self, timeout: float) -> _TlsConnection:
        """An idle connection the server has not closed, or a new one.

        An idle connection the server closed (it stopped or restarted, or its keep-alive ran
        out) is dropped rather than written to: a request written to it would be lost after it
        was sent (:class:`MaybeSent`), so a commit would be resent as one that may have
        reached the old server, of unknown outcome once a new server answers.

        Raises:
            NotSent: No connection could be made.
            ServerUnavailable: The server's certificate is not trusted (at once: waiting would
                not change it).
        """
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or not _closed_by_peer(conn):
                break
            conn.close()
        if conn is None:
            conn = _TlsConnection(self._host, self._port, timeout=timeout, context=self._context)
        if conn.sock is None:
            try:
                conn.connect()
            except ssl.SSLCertVerificationError as e:
                conn.close()
                raise wire.ServerUnavailable(
                    f"{self.url}: the server's TLS certificate was not trusted "
                    f"({e.verify_message or e.reason}); pass ca_file= the PEM file of the "
                    "certificate authority that signed it (or of the server's own certificate, "
                    "if self-signed) to RemoteStore",
                    url=self.url,
                    code="untrusted_certificate",
                ) from None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise NotSent(str(e) or type(e).__name__) from e
            sock: socket.socket | None = conn.sock
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        elif conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def request(
        self, method: str, path: str, body: bytes | None = None, timeout: float | None = None
    ) -> tuple[int, Headers, bytes]:
        """Send one request; return status, headers (names lowercased) and body.

        Raises:
            NotSent: No connection could be made, or the request could not be written whole
                (so the server did not read it).
            MaybeSent: The connection failed after the request was written.
            ServerUnavailable: The server's TLS certificate is not trusted.
        """
        wait = self._timeout if timeout is None else timeout
        if self._native is not None:
            if self.closed:
                raise NotSent("the store is closed")
            return self._native.request(method, self._prefix + path, body, wait)
        conn = self._connection(wait)
        with self._lock:
            self._busy.add(conn)
        response: http.client.HTTPResponse | None = None
        try:
            try:
                conn.request(method, self._prefix + path, body, self._headers)
            except (OSError, http.client.HTTPException) as e:
                # Not written whole: the server acts only on a whole request.
                conn.close()
                raise NotSent(f"the request could not be written whole: {e}") from e
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as e:
            if response is not None:
                response.close()
            conn.close()
            raise MaybeSent(str(e) or type(e).__name__) from e
        finally:
            with self._lock:
                self._busy.discard(conn)
        headers = {name.lower(): value for name, value in response.getheaders()}
        conn.heard = headers.get(wire.H_BOOT) or None
        if response.will_close or self.closed:
            conn.close()
        else:
            with self._lock:
                self._idle.append(conn)
        return response.status, headers, data

    def hears(self, boot: str | None) -> bool:
        """Whether an idle connection that server start `boot` last answered on is still open.

        Open means that server process has been running ever since (a new process cannot
        hold its predecessor's connections). Idle connections found closed are dropped.
        """
        if boot is None:
            return False
        if self._native is not None:
            return self._native.hears(boot)
        with self._lock:
            for conn in list(self._idle):
                if conn.heard != boot:
                    continue
                if not _closed_by_peer(conn):
                    return True
                self._idle.remove(conn)
                conn.close()
        return False

    def close(self) -> None:
        """Close every connection; a request waiting on one (a long poll) fails at once."""
        if self._native is not None:
            self.closed = True
            self._native.close()
            return
        with self._lock:
            self.closed = True
            idle, self._idle = self._idle, []
            busy = list(self._busy)
        for conn in idle:
            conn.close()
        for conn in busy:
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


class _Pending:
    """A commit or role call waiting in the pipeline for its answer.

    Its thread sleeps on `gate`, a plain lock used as a binary semaphore (far cheaper than an
    Event under many threads): whoever sets `result`, `error` or `leader` then calls
    :meth:`wake`; a wake that finds the gate open already is dropped, since the sleeper reads
    the fields after waking anyway.
    """

    __slots__ = ("error", "gate", "leader", "result", "sent", "spec")

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.gate = threading.Lock()
        self.gate.acquire()
        self.leader = False
        self.sent = False  # a request carrying it was started (set for requests of several)
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # already open: the sleeper will see the news
            self.gate.release()


class _Refused(Exception):
    """A request of several commits refused as a whole (400 or 413): none of them ran."""

    def __init__(self, status: int, retry_of: str | None) -> None:
        super().__init__(status)
        self.status = status
        self.retry_of = retry_of


def _body(parts: list[bytes], retry_of: str | None) -> bytes:
    """The body of a commit request whose commits are encoded in `parts`.

    The same bytes as ``wire.dumps({"commits": specs, "retry_of": retry_of})``.
    """
    return b'{"commits":[' + b",".join(parts) + b'],"retry_of":' + wire.dumps(retry_of) + b"}"


def _limit_of(info: Mapping[str, Any]) -> int:
    """The largest request body a server takes, as its `info` says (or the default)."""
    said = info.get("max_request_bytes")
    if isinstance(said, int) and not isinstance(said, bool) and said > 0:
        return said
    return wire.DEFAULT_MAX_REQUEST_BYTES


def _runs(sizes: list[int], limit: int) -> list[slice]:
    """Consecutive runs of commits (of encoded `sizes`) each within a body of `limit` bytes.

    A commit over the limit by itself goes alone (the server answers it as it would alone).
    """
    runs: list[slice] = []
    start, size = 0, _ENVELOPE - 1  # the first commit needs no comma
    for i, n in enumerate(sizes):
        if i > start and size + 1 + n > limit:
            runs.append(slice(start, i))
            start, size = i, _ENVELOPE - 1
        size += 1 + n
    runs.append(slice(start, len(sizes)))
    return runs


class CommitIds:
    """Commit ids: a random prefix per store and a counter (unique without a syscall each)."""

    def __init__(self) -> None:
        self._prefix = secrets.token_hex(8)
        self._next = itertools.count(1).__next__

    def __call__(self) -> str:
        """A new commit id."""
        return f"{self._prefix}-{self._next():x}"


class Pipeline:
    """Requests to one server: reads retried while it is away, commits pipelined.

    Args:
        url: The server, e.g. ``"http://127.0.0.1:7411"``.
        token: The server's bearer token, if it has one.
        timeout: Seconds to wait for an answer to one request.
        retry_seconds: How long to keep resending when the server cannot be reached.
        ca_file: A PEM file of the certificate authority to trust for ``https://``.
        max_in_flight: Requests kept in flight at once (commits of many threads ride along).
        on_answer: Called with the headers of every answer but a 503 (the log it names);
            settable later, as :attr:`on_answer`.

    Raises:
        TypeError: `max_in_flight` is not an int.
        ValueError: `max_in_flight` is below 1, `url` is not an http(s) or unix URL (or its
            port is not one), or `ca_file` cannot be read or holds no PEM certificate.
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout: float,
        retry_seconds: float,
        ca_file: str | None,
        max_in_flight: int,
        on_answer: Callable[[Headers], None] | None = None,
    ) -> None:
        if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int):
            raise InvalidType(f"max_in_flight must be int, not {type(max_in_flight).__name__}")
        if max_in_flight < 1:
            raise InvalidValue(f"max_in_flight: must be at least 1, got {max_in_flight}")
        retry_seconds = seconds_arg(retry_seconds, "retry_seconds")
        self.http = Http(url, token, timeout, ca_file)
        self.new_id = CommitIds()
        self.boot: str | None = None
        """The server start that last answered (``X-Memcommit-Boot``)."""
        self.closed = False
        self._retry_seconds = retry_seconds
        self._max_in_flight = max_in_flight
        self.on_answer = on_answer
        """Called with the headers of every answer but a 503, if set."""
        self._pipe: list[_Pending] = []
        self._pipe_lock = threading.Lock()
        self._senders = 0
        # The threads that have sent through this pipeline (at most _MAX_USERS remembered):
        # once all of them are queued, no other commit can join the next request.
        self._users: set[int] = set()
        # The server's /v1/info (its --max-request-bytes...), and the server start that said it.
        self._info: tuple[str | None, dict[str, Any]] | None = None

    @property
    def url(self) -> str:
        """The server's URL."""
        return self.http.url

    def check_open(self) -> None:
        """Raise StoreClosed once :meth:`close` was called."""
        if self.closed:
            raise StoreClosed(f"{self.url}: this RemoteStore is closed; make a new one")

    def close(self) -> None:
        """Close every connection; a request waiting on one fails at once."""
        self.closed = True
        self.http.close()

    def queued(self) -> int:
        """The commits and role calls queued and not yet sent."""
        with self._pipe_lock:
            return len(self._pipe)

    def _note(self, headers: Headers) -> None:
        boot = headers.get(wire.H_BOOT)
        if boot:
            self.boot = boot
        if self.on_answer is not None:
            self.on_answer(headers)

    def ask_once(self, method: str, path: str) -> tuple[int, Headers] | None:
        """Send one request, never retried; None if the server could not be reached."""
        try:
            status, headers, _ = self.http.request(method, path)
        except (NotSent, MaybeSent):
            return None
        if status != 503:
            self._note(headers)
        return status, headers

    def request(
        self, method: str, path: str, body: bytes | None = None, timeout: float | None = None
    ) -> tuple[int, Headers, bytes]:
        """Send a request that is safe to repeat (a read), retrying while the server is away."""
        deadline = time.monotonic() + self._retry_seconds
        delay = 0.02
        while True:
            try:
                status, headers, data = self.http.request(method, path, body, timeout)
            except (NotSent, MaybeSent) as e:
                # A close on another thread shut the connection down: say so, not the server.
                self.check_open()
                if time.monotonic() + delay > deadline:
                    raise wire.ServerUnavailable(
                        f"{self.url}: the server cannot be reached ({e}); is "
                        "'memcommit serve' running there?",
                        url=self.url,
                        code="unavailable",
                    ) from None
            else:
                if status != 503:
                    self._note(headers)
                    if status >= 400 and status != 409:
                        raise self.error(status, data)
                    return status, headers, data
                if time.monotonic() + delay > deadline:
                    raise self.error(status, data)
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def error(self, status: int, data: bytes) -> wire.ServerError:
        """The error an answer with `status` and body `data` stands for."""
        code, message = "http_error", data[:500].decode("utf-8", "replace")
        try:
            error = wire.loads(data)["error"]
            if "class" in error:  # an error encode_error described
                decoded = wire.decode_error(error, self.url)
                if isinstance(decoded, wire.ServerError):
                    return decoded
                message = str(decoded)
            code, message = str(error.get("code", code)), str(error.get("message", message))
        except (ValueError, KeyError, TypeError):
            pass
        return wire.ServerError(
            f"{self.url}: HTTP {status} ({code}): {message}", status=status, code=code, url=self.url
        )

    def submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Send one commit or role call (pipelined with other threads'); return its result."""
        self.check_open()
        pending = _Pending(spec)
        with self._pipe_lock:
            if len(self._users) < _MAX_USERS:
                self._users.add(threading.get_ident())
            self._pipe.append(pending)
            if self._senders < self._max_in_flight:
                self._senders += 1
                pending.leader = True
        while True:
            if pending.leader:
                self._lead(pending)
            if pending.error is not None:
                raise pending.error
            if pending.result is not None:
                result = pending.result
                if not result.get("ok"):
                    raise wire.decode_error(result.get("error", {}), self.url)
                return result
            try:
                pending.gate.acquire()
            except BaseException:  # a signal handler raised (Ctrl-C) while this thread waited
                self._withdraw(pending)
                raise

    def _withdraw(self, pending: _Pending) -> None:
        """Take back a commit whose thread stopped waiting.

        Still queued, it is never sent; handed the lead meanwhile, it passes the lead on. A
        request already carrying it goes on.
        """
        with self._pipe_lock:
            if pending in self._pipe:
                self._pipe.remove(pending)
            if pending.leader:
                pending.leader = False
                self._hand_over()

    def _hand_over(self) -> None:
        """Pass a sender's slot to the first queued commit not leading, or free it.

        The caller holds the pipe's lock.
        """
        successor = next((p for p in self._pipe if not p.leader), None)
        if successor is not None:
            successor.leader = True
            successor.wake()
        else:
            self._senders -= 1

    def _lead(self, me: _Pending) -> None:
        """Send what is queued, batch after batch, until `me` is answered; then hand over."""
        while True:
            # Let the threads just answered queue their next commits first (yield the GIL while
            # the queue keeps growing), so that they travel together instead of one alone and
            # the rest a round trip later; no wait when every thread is queued already (one
            # thread alone never waits).
            queued = len(self._pipe)
            while queued < min(len(self._users), _MAX_BATCH):
                time.sleep(0)
                if len(self._pipe) == queued:
                    break
                queued = len(self._pipe)
            with self._pipe_lock:
                batch = self._pipe[:_MAX_BATCH]
                del self._pipe[:_MAX_BATCH]
                if not batch:
                    self._senders -= 1
                    me.leader = False
                    return
            self._send(batch, me)
            if me.result is not None or me.error is not None:
                with self._pipe_lock:
                    me.leader = False
                    self._hand_over()
                return

    def _send(self, batch: list[_Pending], leader: _Pending) -> None:
        try:
            if len(batch) == 1:
                results = self._post_commits([p.spec for p in batch])
                for pending, result in zip(batch, results, strict=True):
                    pending.result = result
            else:
                self._send_several(batch)
        except Exception as e:
            for pending in batch:
                if pending.result is None and pending.error is None:
                    pending.error = e
        except BaseException as e:
            # Ctrl-C (or SystemExit) in the leader's thread: that thread raises it, not the
            # threads whose commits rode along, which may have been sent. Those answered
            # already keep their answers; those never sent go back to the queue.
            unsent = []
            for pending in batch:
                if pending is leader:
                    pending.error = e
                elif pending.result is not None or pending.error is not None:
                    continue
                elif len(batch) > 1 and not pending.sent:
                    unsent.append(pending)
                else:
                    pending.error = self._interrupted(pending, e)
            with self._pipe_lock:
                self._pipe[0:0] = unsent
                if leader not in batch and leader in self._pipe:
                    # still queued: it must not be sent after its thread gave up
                    self._pipe.remove(leader)
            if leader not in batch:
                leader.error = e
        for pending in batch:
            pending.wake()

    def _send_several(self, batch: list[_Pending]) -> None:
        """Send the commits of `batch` (more than one), setting each one's result or error.

        They go in as few requests as the server's request limit allows; each commit ends
        as it would have ended sent alone.
        """
        deadline = time.monotonic() + self._retry_seconds
        # The common case, as cheap as one commit's: the batch encoded at once, well within
        # the limit. Only a batch that may be over it, or holds a commit that cannot be
        # encoded, is encoded commit by commit (to cut it, or to tell which one fails).
        try:
            body = wire.dumps({"commits": [p.spec for p in batch], "retry_of": None})
        except Exception:
            body = None
        if body is not None and len(body) <= (self._known_limit() or _ASK_BYTES):
            self._send_run(batch, None, None, deadline, body)
            return
        group: list[_Pending] = []
        parts: list[bytes] = []
        for pending in batch:
            try:
                parts.append(wire.dumps(pending.spec))
            except Exception as e:  # what it would have raised alone
                pending.error = e
            else:
                group.append(pending)
        if not group:
            return
        sizes = [len(part) for part in parts]
        limit = self._known_limit()
        if limit is None and _ENVELOPE + sum(sizes) + len(sizes) > _ASK_BYTES:
            limit = self._ask_limit()
        runs = [slice(0, len(group))] if limit is None else _runs(sizes, limit)
        for run in runs:
            self._send_run(group[run], parts[run], None, deadline)

    def _send_run(
        self,
        group: list[_Pending],
        parts: list[bytes] | None,
        retry_of: str | None,
        deadline: float,
        body: bytes | None = None,
    ) -> None:
        """Send `group` in one request; split it if refused.

        Its commits are encoded in `parts`, or all together in `body` (then encoded one by one
        only if the request is refused).
        """
        for pending in group:
            pending.sent = True
        try:
            results = self._post_commits(
                [p.spec for p in group], parts, retry_of=retry_of, deadline=deadline, body=body
            )
        except _Refused as refused:
            # Nothing in it ran: send its commits again in smaller requests (the same ids,
            # and the same retry_of, should it have been a resend), down to one a request.
            if parts is None:
                parts = [wire.dumps(p.spec) for p in group]
            runs: list[slice] = []
            if refused.status == 413:  # over the limit (the server may have a new one)
                self._info = None
                runs = _runs([len(part) for part in parts], self._ask_limit())
            if len(runs) < 2:
                half = len(group) // 2
                runs = [slice(0, half), slice(half, len(group))]
            for run in runs:
                self._send_run(group[run], parts[run], refused.retry_of, deadline)
            return
        except Exception as e:
            for pending in group:
                pending.error = e
            return
        for pending, result in zip(group, results, strict=True):
            pending.result = result

    def server_info(self) -> dict[str, Any] | None:
        """The server's ``/v1/info`` (its durability, its request limit...).

        Asked once per server start, never retried: None if the server cannot answer now. An
        answer that is not an info document is taken as an empty one.
        """
        known = self._info
        if known is not None and known[0] == self.boot:
            return known[1]
        try:
            status, headers, data = self.http.request("GET", "/v1/info")
        except (NotSent, MaybeSent):
            return None
        if status == 503:
            return None
        self._note(headers)
        info: dict[str, Any] = {}
        if status == 200:
            with contextlib.suppress(ValueError, TypeError):
                doc = wire.loads(data)
                if isinstance(doc, dict):
                    info = doc
        self._info = (headers.get(wire.H_BOOT) or None, info)
        return info

    def _known_limit(self) -> int | None:
        """The largest request body the server takes, if known for the server start now."""
        known = self._info
        if known is not None and known[0] == self.boot:
            return _limit_of(known[1])
        return None

    def _ask_limit(self) -> int:
        """The largest request body the server takes: its ``/v1/info`` says (asked once)."""
        info = self.server_info()
        if info is None:
            return wire.DEFAULT_MAX_REQUEST_BYTES  # the commit request will say what is wrong
        return _limit_of(info)

    def _interrupted(self, pending: _Pending, e: BaseException) -> wire.CommitOutcomeUnknown:
        """What a commit learns when the request carrying it was interrupted in another thread."""
        return wire.CommitOutcomeUnknown(
            f"{self.url}: the request carrying this commit was interrupted in another thread "
            f"({type(e).__name__}) after it may have been sent; whether it was applied is "
            "unknown: refresh and check before committing again",
            commit_id=str(pending.spec["id"]),
            url=self.url,
        )

    def _post_commits(
        self,
        specs: list[dict[str, Any]],
        parts: list[bytes] | None = None,
        *,
        retry_of: str | None = None,
        deadline: float | None = None,
        body: bytes | None = None,
    ) -> list[dict[str, Any]]:
        """Send `specs` (encoded in `parts`, if given) in one request; their results.

        Resent while the server is away, until `deadline` (default: the retry window from
        now); `retry_of` names the server start an earlier request with them may have reached.
        `body`: the request's body already encoded, with no `retry_of`.

        Raises:
            _Refused: Several commits, refused as a whole (400 or 413): none of them ran.
        """
        if deadline is None:
            deadline = time.monotonic() + self._retry_seconds
        delay = 0.02
        while True:
            if body is None or retry_of is not None:  # else the caller's body still holds
                if parts is None:
                    body = wire.dumps({"commits": specs, "retry_of": retry_of})
                else:
                    body = _body(parts, retry_of)
            try:
                status, headers, data = self.http.request("POST", "/v1/commit", body)
            except NotSent as e:
                failure: Exception = e
            except MaybeSent as e:
                # It may have been applied: resend with the same ids, saying to which server
                # start, so a restarted server does not apply it a second time.
                retry_of = retry_of or self.boot or "unknown"
                failure = e
            else:
                self._note(headers)
                if status == 200:
                    results = wire.loads(data)["results"]
                    if len(results) != len(specs):
                        raise wire.ServerError(
                            f"{self.url}: {len(results)} answers for {len(specs)} commits",
                            url=self.url,
                        )
                    return cast(list[dict[str, Any]], results)
                if status in _REFUSED and len(specs) > 1:
                    raise _Refused(status, retry_of)
                if status != 503:
                    raise self.error(status, data)
                failure = self.error(status, data)
            if self.closed:
                # A close on another thread shut the request down, not the server.
                if retry_of is not None:
                    raise wire.CommitOutcomeUnknown(
                        f"{self.url}: this RemoteStore was closed while {len(specs)} commit(s) "
                        "were in flight: they were sent, and whether they were applied is "
                        "unknown: check from a new RemoteStore before committing again",
                        commit_id=str(specs[0]["id"]),
                        url=self.url,
                    )
                raise StoreClosed(
                    f"{self.url}: this RemoteStore was closed before {len(specs)} commit(s) "
                    "could be sent; nothing was committed; make a new one"
                )
            if time.monotonic() + delay > deadline:
                if retry_of is not None:
                    raise wire.CommitOutcomeUnknown(
                        f"{self.url}: {len(specs)} commit(s) were sent but no answer came back "
                        f"within {self._retry_seconds:g} s ({failure}); whether they were "
                        "applied is unknown: refresh and check before committing again",
                        commit_id=str(specs[0]["id"]),
                        url=self.url,
                    )
                raise wire.ServerUnavailable(
                    f"{self.url}: the server cannot be reached ({failure}); nothing was "
                    "committed; is 'memcommit serve' running there?",
                    url=self.url,
                    code="unavailable",
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
