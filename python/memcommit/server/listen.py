"""Running the server's ASGI app on uvicorn: the socket, the ``listening on`` line, signals.

On SIGTERM or SIGINT uvicorn stops accepting and waits (up to a minute) for the requests in
flight, the server's own shutdown (see :mod:`memcommit.server`) having been started first;
then uvicorn re-raises the signal, so a supervisor sees the usual exit status for it.
"""

from __future__ import annotations

from collections.abc import Callable
from types import FrameType
from typing import Any

from .auth import App

__all__ = ["serve"]


def serve(
    app: App,
    *,
    host: str,
    port: int,
    tls_cert: str | None,
    tls_key: str | None,
    on_bound: Callable[[int], None],
    on_listening: Callable[[], None],
    on_signal: Callable[[], None],
) -> None:
    """Serve `app` until SIGTERM or SIGINT.

    Args:
        app: The ASGI application (its lifespan opens and closes the store).
        host: The address to bind.
        port: The TCP port (0: any free one).
        tls_cert: A PEM certificate chain file, to serve HTTPS (with `tls_key`).
        tls_key: The certificate's PEM private key file.
        on_bound: Called with the bound port, before anything is served.
        on_listening: Called once the server accepts connections.
        on_signal: Called (in the thread the signal interrupts) when a signal asks the
            server to stop, before uvicorn stops.
    """
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
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
            await super().startup(sockets=sockets)
            if self.started:
                on_listening()

    server = Server(config)
    sock = config.bind_socket()
    on_bound(int(sock.getsockname()[1]))
    # uvicorn re-raises SIGTERM/SIGINT once it has shut down, so a supervisor sees the
    # usual exit status for the signal; the log is closed by then.
    server.run(sockets=[sock])
