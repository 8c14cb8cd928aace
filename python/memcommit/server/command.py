"""The ``memcommit serve`` command: its options, and running a :class:`MemoryServer`.

The command line (:mod:`memcommit.cli`) adds it with :func:`add_serve_command`, so the
server's options are written beside the server.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from datetime import datetime, timezone
from typing import Any

from .. import wire
from .._extras import require
from ..clock import parse_iso
from ..errors import CommandError
from ..store import open as open_store
from .auth import is_loopback
from .http import TEST_CLOCK_START, MemoryServer
from .listen import CannotListen, check_unix, reserve_tcp

__all__ = ["add_serve_command"]


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
    serve.add_argument(
        "--socket",
        metavar="SOCKET",
        help="also serve on a Unix domain socket at this path (owner-only; for clients on "
        "this host: RemoteStore('unix:///path'))",
    )
    serve.add_argument(
        "--no-tcp",
        action="store_true",
        help="serve on --socket only, with no TCP port",
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
        const=TEST_CLOCK_START,
        metavar="START",
        help="TESTING AID: read a controllable clock (starting at START, ISO-8601 or epoch "
        "ms) that POST /v1/test/clock sets. Never use it in production.",
    )
    serve.set_defaults(handler=_run_serve)


def _refuse(message: str, code: int = 1) -> Exception:
    """The command line's one-line error, exit code `code` (1 a failure, 2 a usage error)."""
    return CommandError(message, code)


def _read_token(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as e:
        raise _refuse(f"{path}: cannot read the token file: {e.strerror or e}") from None
    if not token:
        raise _refuse(f"{path}: the token file is empty")
    return token


def _parse_start(text: str) -> datetime:
    try:
        if text.lstrip("-").isdigit():
            return datetime.fromtimestamp(int(text) / 1000, timezone.utc)
        when = parse_iso(text)
    except (ValueError, OverflowError, OSError):  # OSError: a time the platform cannot hold
        raise _refuse(f"--test-clock: {text!r} is not ISO-8601 or epoch ms", 2) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def _run_serve(args: argparse.Namespace) -> int:
    require("server")  # before anything is read or opened
    if args.no_tcp and args.socket is None:
        raise _refuse("--no-tcp needs --socket: the server must listen somewhere", 2)
    token = _read_token(args.token_file) if args.token_file else None
    clock = None
    if args.test_clock is not None:
        from ..testing.clock import ControllableClock

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
            unix_socket=args.socket,
            tcp=not args.no_tcp,
            token=token,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            durability=args.durability,
            clock=clock,
            test_clock=args.test_clock is not None,
            max_request_bytes=args.max_request_bytes,
        )
    except ValueError as e:
        raise _refuse(str(e), 2) from None
    try:
        with contextlib.ExitStack() as reserved:
            # Where it is to listen is settled before the store is opened (which creates a
            # new one): the TCP port is bound now (uvicorn listens on that very socket), and
            # the Unix socket's path checked. The store is opened before uvicorn starts, so a
            # locked or damaged log fails as a one-line error too.
            if server.tcp:
                reserved.enter_context(reserve_tcp(args.host, args.port))
            if args.socket is not None:
                check_unix(args.socket)
            if server.tcp and not is_loopback(args.host) and not server.tls:
                print(
                    f"memcommit serve: WARNING: serving {args.host} without TLS sends the "
                    "token and every memory in clear text; use --tls-cert/--tls-key",
                    file=sys.stderr,
                )
            with open_store(args.path, durability="none"):
                pass
            server.run()
    except CannotListen as e:
        raise _refuse(str(e)) from None
    return 0
