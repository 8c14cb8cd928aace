"""The ``memcommit`` command line.

Subcommands: ``info``, ``export``, ``import``, ``repair``, ``compact``, ``snapshot``, ``seal``,
``verify``, ``serve``, ``demo`` and ``bench compact`` (times a compaction of a copy of a
log). Run
``memcommit --help`` or ``memcommit COMMAND --help`` for their options.

Exit codes: 0 on success, 1 when the command failed (a missing file, a damaged log, a
refused commit), 2 for a usage error (an unknown option or a bad value). Errors are one
line on standard error, naming the path, line, LSN or byte offset involved; no tracebacks,
also for a record whose checksum is valid but whose payload does not decode.

What a file is, every command agreeing: a missing or empty (0-byte) file is not yet a log.
Writers (``import``, ``compact``, ``seal``) make an empty file a new, empty log, as
``memcommit.open`` does; readers (``info``, ``export``, ``verify``, ``snapshot``) say it is
empty and exit 1, and ``repair`` says there is nothing to repair. A file without a valid log
header is not taken over by anything: every command says so and that ``repair`` cannot
recover it. Damage after the header is what ``repair`` shows and cuts, and the other
commands point to it only when ``repair`` finds damage to cut. A writer command refused
before it opens the log creates nothing beside the file (no ``.lock``).

Example:
    >>> from memcommit.cli import main
    >>> main(["info", "memory.db", "--json"])  # doctest: +SKIP
    0

"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import memcommit
from memcommit.cli import bench, compact, demo, info, migrate, repair, seal, transfer
from memcommit.cli._common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Subcommands,
    reporting_damage,
)
from memcommit.errors import CommandError
from memcommit.postgres.dsn import hide_password

__all__ = ["CommandError", "build_parser", "main"]


# A '-' followed by a digit, or by '.' and a digit: a negative number or age (-5, -1d, -.5h).
_NEGATIVE_VALUE = re.compile(r"-\.?[0-9]")


class _Parser(argparse.ArgumentParser):
    """An argument parser that raises instead of exiting, so ``main`` can return codes."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise CommandError(f"{message} (see {self.prog} --help)", EXIT_USAGE)

    def _parse_optional(self, arg_string: str) -> Any:
        # argparse takes '-5' for a value but '-1d' for an option, and then reports that the
        # option before it "expected one argument". No option starts with a digit: either is
        # a value, which the option's type then refuses with what is wrong with it.
        if _NEGATIVE_VALUE.match(arg_string):
            return None
        return super()._parse_optional(arg_string)


class _CommandParser(_Parser):
    """A subcommand's parser: it refuses arguments it does not know itself.

    argparse hands a subcommand's unknown arguments back to the parser above it, which
    refuses them with its own usage (``memcommit [-h] [--version] COMMAND ...``); refused
    here, the error shows the usage of the command they were given to.
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def build_parser() -> argparse.ArgumentParser:
    """Build the parser for every subcommand.

    Returns:
        The parser; each subcommand's namespace carries its handler as ``handler``.

    """
    parser = _Parser(
        prog="memcommit",
        description="memcommit: an embedded, log-structured memory database for AI agents.",
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    # In the order --help lists them.
    info.add_commands(commands)
    transfer.add_commands(commands)
    repair.add_commands(commands)
    compact.add_commands(commands)
    seal.add_commands(commands)
    demo.add_commands(commands)
    migrate.add_commands(commands)
    bench.add_commands(commands)
    _add_serve_command(commands)
    return parser


def _add_serve_command(commands: Subcommands) -> None:
    # The server's options live beside it. Imported when the parser is built, not at the
    # top, so a command other than serve does not load the web server's packages.
    from memcommit.server import add_serve_command

    add_serve_command(commands)


def main(argv: list[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: The arguments after the program name; ``sys.argv[1:]`` when None.

    Returns:
        The exit code: 0 on success, 1 on failure, 2 on a usage error.

    """
    parser = build_parser()
    command = "memcommit"
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exit_:  # --help and --version print and exit here
            return exit_.code if isinstance(exit_.code, int) else EXIT_OK
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        command = f"memcommit {args.command}"
        handler: Callable[[argparse.Namespace], int] = args.handler
        path = getattr(args, "path", None)
        # Every command on a store (serve too) reports a damaged log in one line.
        with reporting_damage(path) if isinstance(path, str) else contextlib.nullcontext():
            return handler(args)
    except CommandError as error:
        _fail(command, str(error))
        return error.code
    except memcommit.MemcommitError as error:
        _fail(command, f"{type(error).__name__}: {error}")
        return EXIT_FAILURE
    except BrokenPipeError:
        # The reader went away (``memcommit export x | head``): stop quietly. Point stdout
        # at /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # not a real file (tests): nothing to redirect
            pass
        finally:
            os.close(devnull)
        return EXIT_FAILURE
    except OSError as error:
        _fail(command, _describe_os_error(error))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        _fail(command, "interrupted")
        return EXIT_INTERRUPTED


def _fail(command: str, message: str) -> None:
    if sys.stdout is not None:  # None when standard output was closed (>&-)
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
    print(f"{command}: error: {message}", file=sys.stderr)


def _describe_os_error(error: OSError) -> str:
    reason = error.strerror or str(error)
    if error.filename is not None:
        # The "file" may be a store's postgresql:// URL (memcommit demo --url): no password.
        return f"{hide_password(str(error.filename))}: {reason}"
    return reason


def _version() -> str:
    try:
        from importlib.metadata import version

        return f"memcommit {version('memcommit')}"
    except Exception:  # not installed as a distribution (a source checkout)
        return "memcommit (version unknown)"
