"""Running the server's ASGI app on uvicorn: the sockets, the ``listening on`` line, signals.

The server listens on TCP, on a Unix domain socket, or on both (one uvicorn server accepts on
every socket). With ``--tls-cert``, TCP speaks TLS and the Unix socket plain HTTP: the socket
is for clients on the server's own host, whom the file system lets in, not the network. A
Unix socket is made owner-only (mode 0600, set by the umask while it is bound, so no other
user can connect in between) and removed when the server stops; a socket file left by a
server that died is replaced, but one a live server still listens on is refused. The TCP
socket is bound here too, not by uvicorn (which logs a failing bind and exits the process): a
port in use, or an address this machine does not have, is a :class:`CannotListen` naming it;
``memcommit serve`` binds it (:func:`reserve_tcp`) before it opens, and perhaps creates, the
store.

On SIGTERM or SIGINT uvicorn stops accepting and waits (up to a minute) for the requests in
flight, the server's own shutdown (see :mod:`memcommit.server`) having been started first;
then uvicorn re-raises the signal, so a supervisor sees the usual exit status for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import stat
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from .auth import App

__all__ = ["CannotListen", "bind_tcp", "bind_unix", "check_unix", "reserve_tcp", "serve"]

SOCKET_MODE = 0o600
"""The mode of the server's Unix socket: only its owner may connect."""


class CannotListen(Exception):
    """The server cannot listen where it was told to; the message names the address."""


def check_unix(path: str) -> bool:
    """Refuse a Unix socket path :func:`bind_unix` could not bind.

    Returns whether a socket that a server now gone left is there (bind_unix replaces it).

    Raises:
        CannotListen: As :func:`bind_unix`, for all but a failing bind; the message names
            `path`.
    """
    if len(os.fsencode(path)) >= 104:  # sun_path holds 104 bytes on macOS, 108 on Linux
        raise CannotListen(f"--socket {path}: too long for a Unix socket (at most 103 bytes)")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CannotListen(f"--socket {path}: the directory {directory} does not exist")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(mode):
        raise CannotListen(f"--socket {path}: exists and is not a socket; choose another path")
    if _listening(path):
        raise CannotListen(f"--socket {path}: a running server is listening on it")
    return True


def bind_unix(path: str) -> socket.socket:
    """A listening Unix domain socket at `path`, owner-only.

    Raises:
        CannotListen: `path` is too long for a Unix socket, is in a directory that does not
            exist, exists and is not a socket, is a socket another server is listening on,
            or cannot be bound; the message names `path`.
    """
    if check_unix(path):
        os.unlink(path)  # left by a server that is gone
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o777 & ~SOCKET_MODE)
    try:
        sock.bind(path)
    except OSError as e:
        sock.close()
        raise CannotListen(f"--socket {path}: cannot bind: {e.strerror or e}") from None
    finally:
        os.umask(old)
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def bind_tcp(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host`:`port` (0: any free port), not yet listening.

    Bound as uvicorn binds it (IPv6 for a host with a ':', ``SO_REUSEADDR``), for uvicorn to
    listen on.

    Raises:
        CannotListen: The port is in use, `host` is not an address of this machine, or not
            one at all (a name that does not resolve), or the bind fails otherwise; the
            message names the address.
    """
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family=family, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except socket.gaierror as e:
        sock.close()
        raise CannotListen(
            f"{where}: not an address, nor a name that resolves to one ({e.strerror}); check --host"
        ) from None
    except OSError as e:
        sock.close()
        raise CannotListen(f"{where}: {_bind_problem(e)}") from None
    sock.set_inheritable(True)
    return sock


def _bind_problem(error: OSError) -> str:
    if error.errno == errno.EADDRINUSE:
        return (
            "address already in use (another process listens on the port): choose another "
            "--port, or 0 for any free one"
        )
    if error.errno == errno.EADDRNOTAVAIL:
        return (
            "not an address of this machine, so it cannot be bound: give --host one of its "
            "addresses (0.0.0.0 for all of them)"
        )
    if error.errno in (errno.EACCES, errno.EPERM):
        return (
            f"cannot bind: {error.strerror} (a port below 1024 needs privileges): choose "
            "another --port"
        )
    return f"cannot bind: {error.strerror or error}"


# TCP sockets bound ahead of `serve` by `reserve_tcp`, by the (host, port) asked for.
_reserved: dict[tuple[str, int], socket.socket] = {}


@contextlib.contextmanager
def reserve_tcp(host: str, port: int) -> Iterator[int]:
    """Bind `host`:`port` now, for the next :func:`serve` on them in this process to listen on.

    So that a port in use, or a host that cannot be bound, is refused before anything else
    is done (``memcommit serve`` opens, and may create, the store after this), and the port
    0 picked is the one served. Yields the bound port; at the end of the block the socket is
    closed if no `serve` took it.

    Raises:
        CannotListen: As :func:`bind_tcp`.
    """
    key = (host, port)
    sock = bind_tcp(host, port)
    _reserved[key] = sock
    try:
        yield int(sock.getsockname()[1])
    finally:
        if _reserved.get(key) is sock:
            del _reserved[key]
        sock.close()  # serve closes a socket it took too; a second close does nothing


def _listening(path: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError as e:
        return e.errno not in (errno.ECONNREFUSED, errno.ENOENT)
    finally:
        probe.close()
    return True


def serve(
    app: App,
    *,
    host: str | None,
    port: int,
    unix_socket: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    on_bound: Callable[[int], None],
    on_listening: Callable[[], None],
    on_signal: Callable[[], None],
) -> None:
    """Serve `app` until SIGTERM or SIGINT.

    Args:
        app: The ASGI application (its lifespan opens and closes the store).
        host: The address to bind, or None for no TCP.
        port: The TCP port (0: any free one).
        unix_socket: The path of a Unix domain socket to serve on too (or alone), or None.
        tls_cert: A PEM certificate chain file, to serve HTTPS on TCP (with `tls_key`; the
            Unix socket speaks plain HTTP).
        tls_key: The certificate's PEM private key file.
        on_bound: Called with the bound TCP port (0 without TCP), before anything is served.
        on_listening: Called once the server accepts connections.
        on_signal: Called (in the thread the signal interrupts) when a signal asks the
            server to stop, before uvicorn stops.

    Raises:
        CannotListen: The TCP address (unless :func:`reserve_tcp` bound it already) or the
            Unix socket cannot be bound; the message names it.
    """
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host or "127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        timeout_graceful_shutdown=60,
        server_header=False,
        date_header=False,
        proxy_headers=False,  # never trust X-Forwarded-*: clients are who they connect as
        limit_concurrency=4096,  # beyond it, 503 rather than unbounded tasks
        timeout_keep_alive=75,
    )

    class Server(uvicorn.Server):
        """uvicorn's server, telling the MemoryServer when a signal asks it to stop."""

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            on_signal()
            super().handle_exit(sig, frame)

        async def startup(self, sockets: Any = None) -> None:
            # uvicorn serves each socket it is given with the config's TLS: it is given the
            # TCP socket alone, and the Unix socket is served here, in plain HTTP.
            tcp = [sock for sock in sockets or () if sock.family != socket.AF_UNIX]
            await super().startup(sockets=tcp)
            if not self.started:
                return
            for sock in sockets or ():
                if sock.family == socket.AF_UNIX:
                    self.servers.append(
                        await asyncio.get_running_loop().create_server(
                            self._protocol, sock=sock, backlog=self.config.backlog
                        )
                    )
            on_listening()

        def _protocol(self) -> asyncio.Protocol:
            """A connection's HTTP protocol, as uvicorn's own startup makes one."""
            protocol: asyncio.Protocol = self.config.http_protocol_class(  # type: ignore[call-arg]
                config=self.config, server_state=self.server_state, app_state=self.lifespan.state
            )
            return protocol

        async def shutdown(self, sockets: Any = None) -> None:
            cut = asyncio.ensure_future(self._cut_closing()) if tls_cert is not None else None
            try:
                await super().shutdown(sockets=sockets)
            finally:
                if cut is not None:
                    cut.cancel()
            # Before uvicorn re-raises the signal, which ends the process.
            _remove(unix_socket)

        async def _cut_closing(self) -> None:
            """Drop each TLS connection that is closing and has sent all it had to send.

            Closing a TLS connection waits (up to 30 s) for the client's close_notify, and
            a client's idle keep-alive connection reads nothing, so never sends it: the
            server would wait that long to stop. Nothing is lost by not waiting.
            """
            while True:
                await asyncio.sleep(0.1)
                for connection in list(self.server_state.connections):
                    transport = getattr(connection, "transport", None)
                    if (
                        transport is not None
                        and transport.is_closing()
                        and transport.get_write_buffer_size() == 0
                    ):
                        transport.abort()

    server = Server(config)
    sockets: list[socket.socket] = []
    try:
        if host is not None:
            # Bound here rather than by uvicorn, which logs a failure and exits the process.
            reserved = _reserved.pop((host, port), None)
            sockets.append(reserved if reserved is not None else bind_tcp(host, port))
        if unix_socket is not None:
            sockets.append(bind_unix(unix_socket))
        on_bound(int(sockets[0].getsockname()[1]) if host is not None else 0)
        # uvicorn re-raises SIGTERM/SIGINT once it has shut down, so a supervisor sees the
        # usual exit status for the signal; the log is closed by then.
        server.run(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()
        if len(sockets) == (host is not None) + (unix_socket is not None):
            _remove(unix_socket)  # bound by this call, so ours


def _remove(path: str | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            os.unlink(path)
