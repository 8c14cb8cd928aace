"""RemoteStore: the whole store API over a :class:`~memcommit.server.MemoryServer`.

Commits and role calls go to the server, which runs every one of them (so guards and the
roles' compare-and-set hold across processes); memory reads are served from a **local
replica**: a read-only log in RAM fed with the server's raw records and checked by the same
Rust code that replays a log file.

* A new store starts with everything the server had committed when it connected (however
  many requests the log takes to fetch).
* Your own commits are visible to your next read: a read first pulls the log up to the
  newest commit this store made (read-your-writes), and nothing else.
* :meth:`RemoteStore.refresh` pulls what other processes committed; ``refresh(wait=5)``
  waits up to five seconds for the next commit when there is none (a long poll), and
  ``RemoteStore(url, follow=True)`` keeps a thread doing that, so reads stay current.
* A refused commit raises :class:`~memcommit.Rejected` with the server's reason; a role error
  arrives as the same class the server raised, with its fields.
* After a log compaction on the server (a new generation), or when the server's log is
  another store's, the replica is rebuilt from a snapshot on the next read or refresh. A
  served log is compacted or replaced only while its server is stopped, so a read asks the
  server nothing while a connection that server answered on is still open; once none is, it
  asks which log the server serves (one small request) before reading, and reads from the
  replica as it stands if the server cannot be reached.
* Commits from many threads of one process are pipelined: the ones queued together travel in
  one request, and the server fsyncs them together.
* A commit whose answer is lost (a reset connection, a timeout) is resent with the same
  commit id and is not applied twice; if the server restarted meanwhile, the outcome cannot
  be known and :class:`~memcommit.wire.CommitOutcomeUnknown` is raised instead.

Example:
    >>> import memcommit
    >>> store = memcommit.RemoteStore("http://127.0.0.1:7411")  # doctest: +SKIP
    >>> mid = store.put("User prefers dark mode", kind="fact")  # doctest: +SKIP
    >>> store.get(mid).text  # doctest: +SKIP
    'User prefers dark mode'
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import inspect
import itertools
import os
import secrets
import select
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, cast

from . import _native, wire
from ._native import Memory, Record
from .commit import Commit, as_str_tuple, check_u64, encode_data
from .errors import NotSupported, StoreClosed
from .roles.logmedium import LogMedium
from .roles.roleset import ROLE_NAMES, RoleSet
from .store import MemoryStore

__all__ = ["RemoteCommit", "RemoteStore"]

_MAX_BATCH = 512  # commits per request from one store
_READ_BYTES = 8 * 1024 * 1024
_WAIT_MARGIN = 15.0


class _NotSent(Exception):
    """The request surely did not reach the server (it could not connect)."""


class _MaybeSent(Exception):
    """The request may have reached the server; its answer was lost."""


class _Connection(http.client.HTTPConnection):
    """A keep-alive connection that remembers which server start last answered on it."""

    heard: str | None = None


class _TlsConnection(http.client.HTTPSConnection):
    """An HTTPS keep-alive connection that remembers which server start last answered on it."""

    heard: str | None = None


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


class _Http:
    """A small pool of keep-alive HTTP/1.1 connections to one server (stdlib ``http.client``).

    Safe to share between threads: each request takes a connection of its own. Each
    connection remembers the server start (``X-Memcommit-Boot``) that last answered on it:
    while such a connection stays open, that server process is still running
    (:meth:`hears`).
    """

    def __init__(self, url: str, token: str | None, timeout: float, ca_file: str | None) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url: {url!r} is not an http:// or https:// URL")
        self.url = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout
        self._context: ssl.SSLContext | None = None
        if self._https:
            self._context = ssl.create_default_context(cafile=ca_file)
        self._headers = {"Content-Type": "application/json"}
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._idle: list[_Connection | _TlsConnection] = []
        self._busy: set[_Connection | _TlsConnection] = set()
        self._lock = threading.Lock()
        self._closed = False

    def _connection(self, timeout: float) -> _Connection | _TlsConnection:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            if self._https:
                conn = _TlsConnection(
                    self._host, self._port, timeout=timeout, context=self._context
                )
            else:
                conn = _Connection(self._host, self._port, timeout=timeout)
        if conn.sock is None:
            try:
                conn.connect()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise _NotSent(str(e) or type(e).__name__) from e
            sock: socket.socket | None = conn.sock
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        elif conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def request(
        self, method: str, path: str, body: bytes | None = None, timeout: float | None = None
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """Send one request; return status, headers and body.

        Raises:
            _NotSent: No connection could be made.
            _MaybeSent: The connection failed after the request may have been sent.
        """
        conn = self._connection(self._timeout if timeout is None else timeout)
        with self._lock:
            self._busy.add(conn)
        response: http.client.HTTPResponse | None = None
        try:
            conn.request(method, self._prefix + path, body, self._headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as e:
            if response is not None:
                response.close()
            conn.close()
            raise _MaybeSent(str(e) or type(e).__name__) from e
        finally:
            with self._lock:
                self._busy.discard(conn)
        conn.heard = response.headers.get(wire.H_BOOT) or None
        if response.will_close or self._closed:
            conn.close()
        else:
            with self._lock:
                self._idle.append(conn)
        return response.status, response.headers, data

    def hears(self, boot: str | None) -> bool:
        """Whether an idle connection that server start `boot` last answered on is still open.

        Open means that server process has been running ever since (a new process cannot
        hold its predecessor's connections). Idle connections found closed are dropped.
        """
        if boot is None:
            return False
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
        with self._lock:
            self._closed = True
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

    __slots__ = ("error", "gate", "leader", "result", "spec")

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.gate = threading.Lock()
        self.gate.acquire()
        self.leader = False
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # already open: the sleeper will see the news
            self.gate.release()


class _CommitIds:
    """Commit ids: a random prefix per store and a counter (unique without a syscall each)."""

    def __init__(self) -> None:
        self._prefix = secrets.token_hex(8)
        self._next = itertools.count(1).__next__

    def __call__(self) -> str:
        return f"{self._prefix}-{self._next():x}"


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
        self._check = Commit(store._scratch, store, None, time.time_ns() // 1_000_000)
        self._ops: list[list[Any]] = []
        self._entered = False
        self._ended = False
        self.lsn: int | None = None
        self.first_lsn: int | None = None

    def _add(self, op: list[Any]) -> None:
        if self._ended:
            raise RuntimeError("this commit has already ended; start a new one with store.commit()")
        if not self._entered:
            raise RuntimeError(
                "this commit is not open: use it as `with store.commit() as c:` (its operations "
                "are written when the block ends; without `with` nothing would ever be written)"
            )
        self._ops.append(op)

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
            [
                wire.OP_PUT,
                mid,
                text,
                kind,
                task,
                tier,
                encode_data(data),
                list(as_str_tuple(tags, "tags")),
                list(as_str_tuple(sources, "sources")),
            ]
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
            [
                wire.OP_PUT_MANY,
                made,
                texts,
                kind,
                task,
                tier,
                encode_data(data),
                list(as_str_tuple(tags, "tags")),
                list(as_str_tuple(sources, "sources")),
            ]
        )
        return made

    def stale(self, id: str, reason: str | None = None) -> None:
        """Mark memory `id` stale."""
        self._check.stale(id, reason)
        self._add([wire.OP_STALE, id, reason])

    def restore(self, id: str) -> None:
        """Mark memory `id` active again."""
        self._check.restore(id)
        self._add([wire.OP_RESTORE, id])

    def move(self, id: str, tier: str) -> None:
        """Move memory `id` to `tier`."""
        self._check.move(id, tier)
        self._add([wire.OP_MOVE, id, tier])

    def finish_task(self, task: str) -> None:
        """Mark `task` finished."""
        self._check.finish_task(task)
        self._add([wire.OP_FINISH, task])

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
        self._add([wire.OP_EXPECT, id, exists, status, tier, lsn])

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

    See the module docstring for what reads see and when. The roles (``runs``, ``locks``...)
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

    _replica: _native.NativeLog

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
        self._http = _Http(url, token, timeout, ca_file)
        self._retry_seconds = retry_seconds
        self._sync_lock = threading.RLock()
        self._want = 0
        self._want_lock = threading.Lock()
        self._resync_needed = False
        self._boot: str | None = None
        self._identity = ("", 0)
        # The server start that last answered with the replica's store and generation: while
        # a connection it answered on is open, the log cannot have been compacted or replaced.
        self._confirmed: str | None = None
        self._scratch = _native.NativeLog.memory()
        self._commit_id = _CommitIds()
        self._pipe: list[_Pending] = []
        self._pipe_lock = threading.Lock()
        self._senders = 0
        self._max_in_flight = max_in_flight
        self._closed = False
        self._follower: threading.Thread | None = None
        self._manifest: list[dict[str, Any]] = []
        try:
            replica = self._bootstrap()
        except BaseException:
            self._http.close()
            raise
        manifest = self._manifest
        super().__init__(replica, clock=None, path=None)
        self._manifest = manifest
        for name in ROLE_NAMES:
            setattr(self, name, cast(Any, _remote_role(name)(self)))
        if follow:
            self._follower = threading.Thread(
                target=self._follow, name="memcommit-follow", daemon=True
            )
            self._follower.start()

    # -- the wire ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The server's URL."""
        return self._http.url

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(f"{self.url}: this RemoteStore is closed; make a new one")

    def _note(self, headers: http.client.HTTPMessage) -> None:
        """Take in the identity headers of an answer."""
        boot = headers.get(wire.H_BOOT)
        if boot:
            self._boot = boot
        store, generation = headers.get(wire.H_STORE), headers.get(wire.H_GENERATION)
        if store and generation is not None:
            if (store, int(generation)) == self._identity:
                self._confirmed = boot or None
            elif self._identity[0]:
                self._resync_needed = True

    def _request(
        self, method: str, path: str, body: bytes | None = None, timeout: float | None = None
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """Send a request that is safe to repeat (a read), retrying while the server is away."""
        deadline = time.monotonic() + self._retry_seconds
        delay = 0.02
        while True:
            try:
                status, headers, data = self._http.request(method, path, body, timeout)
            except (_NotSent, _MaybeSent) as e:
                if time.monotonic() + delay > deadline or self._closed:
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
                        raise self._http_error(status, data)
                    return status, headers, data
                if time.monotonic() + delay > deadline:
                    raise self._http_error(status, data)
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _http_error(self, status: int, data: bytes) -> wire.ServerError:
        code, message = "http_error", data[:500].decode("utf-8", "replace")
        try:
            error = wire.loads(data)["error"]
            if "kind" in error:
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

    # -- the pipeline: commits and role calls ------------------------------------------------

    def _submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Send one commit or role call (pipelined with other threads'); return its result."""
        self._check_open()
        pending = _Pending(spec)
        with self._pipe_lock:
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
            pending.gate.acquire()

    def _lead(self, me: _Pending) -> None:
        """Send what is queued, batch after batch, until `me` is answered; then hand over."""
        while True:
            # Let the threads just answered queue their next commits first (yield the GIL while
            # the queue keeps growing), so that they travel together instead of one alone and
            # the rest a round trip later.
            queued = -1
            while queued != len(self._pipe) and queued < _MAX_BATCH:
                queued = len(self._pipe)
                time.sleep(0)
            with self._pipe_lock:
                batch = self._pipe[:_MAX_BATCH]
                del self._pipe[:_MAX_BATCH]
                if not batch:
                    self._senders -= 1
                    me.leader = False
                    return
            self._send(batch)
            if me.result is not None or me.error is not None:
                with self._pipe_lock:
                    me.leader = False
                    successor = next((p for p in self._pipe if not p.leader), None)
                    if successor is not None:
                        successor.leader = True  # this sender's slot passes to it
                        successor.wake()
                    else:
                        self._senders -= 1
                return

    def _send(self, batch: list[_Pending]) -> None:
        try:
            results = self._post_commits([p.spec for p in batch])
            for pending, result in zip(batch, results, strict=True):
                pending.result = result
        except BaseException as e:
            for pending in batch:
                pending.error = e
        for pending in batch:
            pending.wake()

    def _post_commits(self, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        deadline = time.monotonic() + self._retry_seconds
        delay = 0.02
        retry_of: str | None = None
        while True:
            body = wire.dumps({"commits": specs, "retry_of": retry_of})
            try:
                status, headers, data = self._http.request("POST", "/v1/commit", body)
            except _NotSent as e:
                failure: Exception = e
            except _MaybeSent as e:
                # It may have been applied: resend with the same ids, saying to which server
                # start, so a restarted server does not apply it a second time.
                retry_of = retry_of or self._boot or "unknown"
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
                if status != 503:
                    raise self._http_error(status, data)
                failure = self._http_error(status, data)
            if self._closed or time.monotonic() + delay > deadline:
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

    def _wrote(self, lsn: int) -> None:
        with self._want_lock:
            if lsn > self._want:
                self._want = lsn

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

    # -- the replica -------------------------------------------------------------------------

    def _bootstrap(self) -> _native.NativeLog:
        """Build a replica of the server's log as it is now, however many pages it takes.

        The snapshot gives the header, the first commits and the head at that instant; the
        log is then read page after page up to that head. If the server's log changes
        generation meanwhile, it starts over.
        """
        while True:
            _, headers, data = self._request("GET", f"/v1/snapshot?max_bytes={_READ_BYTES}")
            identity = (str(headers[wire.H_STORE]), int(headers[wire.H_GENERATION]))
            head = int(headers[wire.H_LSN])
            replica = _native.NativeLog.replica(data[:64])
            try:
                if len(data) > 64:
                    replica.apply_raw(data[64:])
                caught_up = self._catch_up(replica, identity, head)
                if caught_up:
                    # Purges happen only in log compaction, which starts a new generation and
                    # so a new bootstrap: the manifest read here stays right for this
                    # replica's life (if its answer is of the same log).
                    _, answer, body = self._request("GET", "/v1/manifest")
                    same = (answer.get(wire.H_STORE), answer.get(wire.H_GENERATION)) == (
                        identity[0],
                        str(identity[1]),
                    )
                    caught_up = same
            except BaseException:
                replica.close()
                raise
            if caught_up:
                break
            replica.close()
        manifest = wire.decode_value(wire.loads(body)["manifest"])
        purged = [str(i) for entry in manifest for i in entry.get("purged", ())]
        if purged:
            replica.add_purged(purged)
        self._manifest = manifest
        self._identity = identity
        self._confirmed = answer.get(wire.H_BOOT) or None
        self._resync_needed = False
        return replica

    def _catch_up(self, replica: _native.NativeLog, identity: tuple[str, int], head: int) -> bool:
        """Apply the server's log to a new replica up to `head`, page by page.

        Returns False if the server's log is no longer the one named by `identity` (or no
        longer reaches `head`): the bootstrap must start over.
        """
        store, generation = identity
        while replica.lsn < head:
            query = (
                f"/v1/log?after={replica.lsn}&store={store}&generation={generation}"
                f"&max_bytes={_READ_BYTES}"
            )
            status, _, data = self._request("GET", query)
            if status == 409 or not data:
                return False
            replica.apply_raw(data)
        return True

    def _pull(self, target: int | None, wait: float = 0.0) -> int:
        """Apply the server's commits until the replica reaches `target` (None: the head).

        The request (a long poll when `wait`) is made without holding the replica's lock, so
        reads and :meth:`close` never wait for it; what comes back is applied only if the
        replica is still where it was when asked. Returns how many records this call applied
        (after a resync: how many the new replica holds).
        """
        applied = 0
        while True:
            with self._sync_lock:
                self._check_open()
                if self._resync_needed:
                    applied = self._resync()
                native = self._replica
                after = native.lsn
                if target is not None and after >= target:
                    return applied
                store, generation = self._identity
            query = (
                f"/v1/log?after={after}&store={store}&generation={generation}"
                f"&max_bytes={_READ_BYTES}&wait={wait:g}"
            )
            status, headers, data = self._request(
                "GET", query, timeout=(wait + _WAIT_MARGIN) if wait else None
            )
            wait = 0.0
            with self._sync_lock:
                self._check_open()
                if status == 409:
                    applied = self._resync()
                    continue
                if self._replica is not native or native.lsn != after:
                    continue  # another thread moved the replica meanwhile: ask again
                if data:
                    before = int(native.info()["records"])
                    native.apply_raw(data)
                    applied += int(native.info()["records"]) - before
            head = int(headers.get(wire.H_LSN, "0"))
            if not data and (target is None or target > head):
                if target is not None and target > head:
                    self._lost(target, head)
                return applied
            if target is None and native.lsn >= head:
                return applied

    def _lost(self, target: int, head: int) -> None:
        """The server's log ends before this store's own acknowledged commits."""
        with self._want_lock:
            self._want = head
        raise wire.ServerError(
            f"{self.url}: the server's log ends at LSN {head}, but this store's commits reached "
            f"LSN {target}: the server lost acknowledged commits (was its log restored from an "
            "older copy?); the replica now follows the server's log as it is",
            url=self.url,
            code="lost_commits",
        )

    def _resync(self) -> int:
        """Rebuild the replica from scratch (a new generation, or another store's log).

        Returns how many records the new replica holds.
        """
        with self._sync_lock:
            store_id = self._identity[0]
            replica = self._bootstrap()
            if self._identity[0] != store_id:
                with self._want_lock:
                    self._want = 0  # this store's commits were to another log
            old = self._replica
            self._replica = replica
            self._medium = LogMedium(replica, self._now_us)
            old.close()
            return int(replica.info()["records"])

    def _fresh(self) -> None:
        """Before a read: make sure the replica is of the server's log, with our own commits.

        The replica's log is still the server's as long as a connection the server answered
        on (with this log's store and generation) is open: a log is compacted or replaced
        only while its server is stopped, and a stopped server's connections are closed.
        Otherwise one request asks the server which log it serves; a new generation or
        another store's log rebuilds the replica before the read. If the server cannot be
        reached, the read is served from the replica as it stands.
        """
        self._check_open()
        if not self._resync_needed and not self._http.hears(self._confirmed):
            self._probe()
        if self._resync_needed or self._replica.lsn < self._want:
            self._pull(self._want)

    def _probe(self) -> None:
        """Ask the server once which log it serves (its answer's headers say); never wait."""
        try:
            status, headers, _ = self._http.request("GET", "/v1/info")
        except (_NotSent, _MaybeSent):
            return  # the server is away: the replica is the best this store knows
        if status != 503:
            self._note(headers)

    def refresh(self, wait: float = 0.0) -> int:
        """Apply what was committed on the server since the last look.

        Args:
            wait: Seconds to wait for a commit when there is none yet (a long poll); 0 returns
                at once.

        Returns:
            How many records were applied (after a resync: how many the new replica holds).
        """
        self._check_open()
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait < 0:
            raise ValueError(f"wait: must be a number of seconds >= 0, got {wait!r}")
        return self._pull(None, float(wait))

    def _follow(self) -> None:
        delay = 0.1
        while not self._closed:
            try:
                self.refresh(wait=30.0)
                delay = 0.1
            except Exception:  # the server is away: keep trying until closed
                if self._closed:
                    return
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    # What the rest of memcommit sees as the store's log (MemoryStore's reads, seals.py):
    # the replica, caught up with this store's own commits first, behind a view that sends
    # seal() to the server.

    @property
    def _native(self) -> _native.NativeLog:
        self._fresh()
        return cast(_native.NativeLog, _ReplicaView(self, self._replica))

    @_native.setter
    def _native(self, replica: _native.NativeLog) -> None:
        self._replica = replica

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
        self._request("POST", "/v1/flush", b"{}")

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
        return self._replica.lsn

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
        return self._closed

    def info(self) -> dict[str, Any]:
        """The replica's facts (records, lsn, generation, store_id...), with the server's url."""
        self._fresh()
        info = dict(self._replica.info())
        info.update(path=None, url=self.url, server_boot=self._boot, read_only=False)
        return info

    def close(self) -> None:
        """Stop following, close the connections and drop the replica. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._http.close()
        follower = self._follower
        if follower is not None and follower is not threading.current_thread():
            follower.join(timeout=1.0)
        with self._sync_lock:
            self._replica.close()

    def __enter__(self) -> RemoteStore:
        return self

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"lsn={self._replica.lsn}"
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


# -- the roles, run on the server ------------------------------------------------------------


class _RemoteRole:
    """A role of a RemoteStore: each public method runs on the server."""

    _role = ""

    def __init__(self, store: RemoteStore) -> None:
        self._store = store

    def __repr__(self) -> str:
        return f"<remote {self._role} of {self._store.url}>"


def _forwarder(role: str, name: str, original: Any) -> Any:
    def method(self: _RemoteRole, *args: Any, **kwargs: Any) -> Any:
        return self._store._call(role, name, args, kwargs)

    functools.update_wrapper(method, original)
    del method.__wrapped__  # type: ignore[attr-defined]  # the signature stays, the code is ours
    method.__signature__ = inspect.signature(original)  # type: ignore[attr-defined]
    return method


@functools.cache
def _remote_role(role: str) -> type[_RemoteRole]:
    """The class of role `role` on a RemoteStore: the in-memory class's methods, forwarded."""
    local = type(getattr(RoleSet(), role))
    namespace: dict[str, Any] = {"_role": role, "__doc__": local.__doc__}
    for name, function in inspect.getmembers(local, inspect.isfunction):
        if not name.startswith("_"):
            namespace[name] = _forwarder(role, name, function)
    return type(f"Remote{local.__name__.removeprefix('Memory')}", (_RemoteRole,), namespace)
