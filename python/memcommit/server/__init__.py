"""The server: one process owns the log and runs every commit, for many client processes.

``memcommit serve memory.db`` (or ``python -m memcommit serve``) runs a :class:`MemoryServer`.
Clients use :class:`~memcommit.remote.RemoteStore`; the protocol is in :mod:`memcommit.wire`.

How a commit travels: the HTTP layer (uvicorn; Starlette routes every request but
``POST /v1/commit``, which a bare ASGI route answers) checks the request's shape and
queues each commit for **the writer**, one thread that takes everything queued, runs it in
arrival order (each commit's guards checked against the state its predecessors left, each
role call under the store's one roles lock), then makes the whole batch durable with **one
fsync**, and only then answers every client in the batch. Many clients, one fsync: group
commit. LSNs come from one place, so a guard or a role's compare-and-set holds across
processes exactly as it holds across threads of one process.

Why one thread rather than the engine's own group commit from many threads: the order in
which commits are checked is then the order they arrived, a role call never waits on another
thread's lock, and the writer knows where each batch's fsync left the log durable: a log read
is answered on the event loop with the whole commits up to the head the last batch made
durable (the LSN it reported when it answered), while the writer goes on with the next batch,
so a reader never sees a commit that a crash could still take back, and never waits for a
batch to see one that was acknowledged. The log is opened
with the engine's ``durability="none"`` and the writer calls ``flush()`` (one fsync) per batch
itself under ``--durability commit``; ``batch`` leaves the fsync to the engine's timer and
``none`` to the OS, with the loss bounds :func:`memcommit.open` documents.

Transports: TCP (``--host``/``--port``), and with ``--socket PATH`` a Unix domain socket too,
for clients on the same host (``RemoteStore("unix:///PATH")``): the same protocol and the same
writer, without the TCP stack. The socket file is owner-only (mode 0600), so the file system
decides who may connect; ``--no-tcp`` serves the socket alone.

Security: the server binds loopback unless told otherwise and refuses any other address
without a token (``--token-file``); the token is compared in constant time and a request
without it gets 401. TLS with ``--tls-cert``/``--tls-key``. Requests are limited in size
(``--max-request-bytes``, 413 above it) and in JSON nesting (:data:`memcommit.wire.MAX_DEPTH`
levels); a malformed one gets 400 with a message and changes nothing.

Shutdown: on SIGTERM (or SIGINT) the server stops taking commits (503; a resend of a commit
it has answered or is running still gets that answer), wakes every waiting reader, lets the
commits already queued finish and be fsynced, answers them, then closes the log and exits.
A ``kill -9`` loses no acknowledged commit: a commit is answered only after its fsync.

``--test-clock [START]`` makes the server read a :class:`~memcommit.testing.ControllableClock`
that ``POST /v1/test/clock`` sets: a testing aid, so a test can move the clock the server's
roles decide by (the contract suite runs that way on a ``RemoteStore``). Without the flag the
endpoint does not exist.

The package, one idea a module: :mod:`.http` (:class:`MemoryServer`, its routes),
:mod:`.requests` (what a request must be), :mod:`.writer` (the writer thread and group
commit), :mod:`.resends` (a resent commit is answered, not applied twice), :mod:`.auth`
(loopback, token, TLS), :mod:`.metrics` (Prometheus), :mod:`.listen` (uvicorn, sockets, signals)
and :mod:`.command` (``memcommit serve``).
"""

from __future__ import annotations

from typing import Any

from .auth import is_loopback
from .command import add_serve_command
from .http import MemoryServer
from .requests import role_methods

__all__ = ["MemoryServer", "ServerProcess", "add_serve_command", "is_loopback", "role_methods"]


def __getattr__(name: str) -> Any:
    # ServerProcess is a testing aid and lives in memcommit.testing (which this package
    # does not import, so a server does not load the testing tools); the name stays here
    # for the scripts that import it from memcommit.server.
    if name == "ServerProcess":
        from ..testing.server import ServerProcess

        return ServerProcess
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
