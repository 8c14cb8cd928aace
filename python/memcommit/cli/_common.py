"""What every command shares: its error, exit codes, path checks and what a file is.

The one judgement of what a file is (missing, empty, not a log, damaged) and the words
every command uses for it live here, so that ``info``, ``export``, ``import``, ``repair``,
``compact``, ``snapshot``, ``seal``, ``verify`` and ``serve`` agree (see the package
docstring of :mod:`memcommit.cli`).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import memcommit
from memcommit import _native
from memcommit._extras import require
from memcommit.errors import CommandError, ServerUnavailable
from memcommit.files import is_store_file
from memcommit.postgres.dsn import hide_password, is_postgres_url, parse
from memcommit.progress import Progress

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped


class Subcommands(Protocol):
    """Where a command group adds its subcommands: ``ArgumentParser.add_subparsers()``."""

    def add_parser(
        self, name: str, *, help: str | None = ..., description: str | None = ...
    ) -> argparse.ArgumentParser:
        """Add the subcommand `name` and return its parser."""
        ...


def add_command(
    commands: Subcommands, name: str, handler: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    """Add the subcommand `name`, run by `handler` and described by the handler's docstring.

    The docstring's summary line is the command's line in ``memcommit --help`` (as a phrase:
    its first letter in lower case, without the full stop) and the paragraph after it the
    description ``memcommit NAME --help`` prints, so each command's words are written once,
    on the function that runs it.

    Returns:
        The subcommand's parser, to add its arguments to.

    """
    summary, _, rest = inspect.cleandoc(handler.__doc__ or "").partition("\n")
    phrase = summary[:1].lower() + summary[1:].removesuffix(".")
    parser = commands.add_parser(name, help=phrase, description=" ".join(rest.split()))
    parser.set_defaults(handler=handler)
    return parser


def add_store_command(
    commands: Subcommands, name: str, handler: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    """Add the subcommand `name` (see :func:`add_command`), whose first argument is the store.

    Returns:
        The subcommand's parser, to add its options to.

    """
    parser = add_command(commands, name, handler)
    parser.add_argument("path", metavar="PATH", help="the store file")
    return parser


def positive_count(text: str) -> int:
    """An argument type: a whole number of at least 1 (``--batch``, ``--agents``...)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def as_int(value: object, name: str) -> int:
    """`value`, a count the store reported as `name`, checked to be an int."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise CommandError(f"unexpected {name} value {value!r} from the store")
    return value


def require_file(path: str, what: str = "store") -> None:
    """Refuse a `path` that is a directory or does not exist, calling it a `what` file.

    A store or log must also be a regular file: a device, FIFO or socket is refused by name
    (other inputs, such as an import's file, may be a pipe). A URL given where a file is
    expected is named without its password.
    """
    if os.path.isdir(path):
        article = "an" if what[:1] in ("a", "e", "i", "o", "u") else "a"
        raise CommandError(f"{path}: is a directory, not {article} {what} file")
    if not os.path.exists(path):
        raise CommandError(f"{hide_password(path)}: no such {what} file")
    if what in ("store", "log") and not stat.S_ISREG(os.stat(path).st_mode):
        raise CommandError(
            f"{path}: not a regular file (a device, a FIFO or a socket); a {what} is a file"
        )


def lock_path(path: str) -> str:
    """The lock file a writer of the store at `path` holds."""
    return f"{path}.lock"


def progress_to(bar: Progress) -> Callable[..., None]:
    """A progress callback that moves `bar` to the units done, its first argument."""

    def progress(done: int, *_rest: int) -> None:
        bar.update(done - bar.count)

    return progress


def inspect_log(path: str) -> dict[str, Any]:
    """The core's look at a log file, without opening a store or changing anything."""
    return _native.inspect_log(path)


def empty_file(path: str) -> str:
    """What an empty (0-byte) file at `path` is, and what makes it a log."""
    return (
        f"{path} is an empty file (0 bytes), not yet a memcommit log; a writer opening it "
        "(memcommit import, compact or seal, or memcommit.open) makes it a new, empty log"
    )


def not_a_log(path: str, detail: object) -> str:
    """What a file without a valid log header is, `detail` saying what the core found."""
    return (
        f"{path} is not a memcommit log, or its header (the first 64 bytes) is damaged"
        + (f" ({detail})" if detail else "")
        + "; repair cannot recover a file without its header: check the path, "
        "or restore the file from a backup"
    )


def _naming(path: str, message: str) -> str:
    return message if path in message else f"{path}: {message}"


def damage_at(path: str, report: dict[str, Any]) -> str:
    """The damage `report` found, in the words repair uses."""
    offset = as_int(report["damage_offset"], "damage_offset")
    damage_lsn = report.get("damage_lsn")
    at_lsn = f" (LSN {as_int(damage_lsn, 'damage_lsn'):,})" if damage_lsn is not None else ""
    reason = report.get("damage_reason")
    return f"{path}: damaged record at byte offset {offset:,}{at_lsn}" + (
        f": {reason}" if reason else ""
    )


# The core's own advice in a damage message (`memcommit repair PATH` can back up the file and
# cut it there; close the store and run `memcommit repair PATH`): one clause of it.
_CORE_REPAIR_ADVICE = re.compile(r";[^;]*`memcommit repair [^`]*`[^;]*")


def _advice(path: str, problem: str, *, decoded: bool = False) -> str:
    """`problem` with the advice that agrees with what repair finds in the file now.

    The core's own advice in `problem`, if any, gives way to it, so the message gives advice
    once. `decoded`: the problem is a record that does not decode behind a valid checksum,
    which no writer in flight explains.
    """
    try:
        if os.path.getsize(path) == 0:
            return empty_file(path)
        report = inspect_log(path)
    except (OSError, memcommit.MemcommitError):
        return problem
    problem = _CORE_REPAIR_ADVICE.sub("", problem)
    if not report["header_ok"]:
        return not_a_log(path, report.get("header_error"))
    if report.get("damage_offset") is not None:
        return f"{problem}; run 'memcommit repair {path}' to see the damage and cut it"
    if decoded:
        return (
            f"{problem}; 'memcommit repair {path}' finds no damaged bytes to cut (the "
            "record's checksum is valid): restore the log from a backup"
        )
    return (
        f"{problem}; 'memcommit repair {path}' finds no damaged bytes to cut: if a writer "
        "was committing, run the command again, otherwise restore the log from a backup"
    )


@contextlib.contextmanager
def reporting_damage(path: str) -> Iterator[None]:
    """Report a damaged log as one line naming `path`, however the damage surfaced.

    ``CorruptLog`` from the core, and the errors of decoding a record whose checksum is valid
    but whose payload is not what its op says (text that is not UTF-8, data that is not JSON,
    a time out of range), all become a :class:`CommandError`. A ``postgresql://`` `path` is
    named without its password.
    """
    named = hide_password(path)
    try:
        yield
    except memcommit.CorruptLog as error:
        raise CommandError(_advice(path, _naming(named, str(error)))) from error
    except (UnicodeError, json.JSONDecodeError, OverflowError) as error:
        # Not every ValueError: an argument refused is not damage in the log.
        problem = f"{named}: a record does not decode ({type(error).__name__}: {error})"
        raise CommandError(_advice(path, problem, decoded=True)) from error


def open_read_only(path: str, verb: str) -> memcommit.MemoryStore:
    """Open `path` to `verb` it (``main`` reports a damaged log, see :func:`reporting_damage`).

    `path` may be a ``postgresql://`` URL: the store it names is read from the database.
    """
    if is_postgres_url(path):
        return memcommit.open(path, read_only=True)
    require_file(path)
    if os.path.getsize(path) == 0:
        raise CommandError(f"{empty_file(path)}; there is nothing to {verb}")
    return memcommit.open(path, read_only=True)


def open_writer(path: str) -> memcommit.MemoryStore:
    """Open an existing store as its writer (``main`` reports a damaged log).

    The open itself refuses a file that is not a log, or a damaged one, and then leaves no lock
    file beside it that it made, so nothing here needs to read the file first. A store in
    PostgreSQL that does not exist is refused before the open, which would make it.
    """
    if is_postgres_url(path):
        require_postgres_store(path)
        return memcommit.open(path)
    require_file(path)
    return memcommit.open(path)


def postgres_store_exists(url: str) -> bool:
    """Whether the store the ``postgresql://`` `url` names exists, asked without making it.

    A writer's open (``memcommit.open(url)``) makes the store, and memcommit's tables, when
    they are not there; a reader's refuses a schema that needs migrations, whether or not the
    store is in it. This looks for the store's row as the engine does (in the ``stores``
    table of the URL's schema, see :mod:`memcommit.postgres.schema`), reading nothing else.

    Raises:
        ServerUnavailable: The database cannot be asked (the message names it).
    """
    require("postgres")
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from memcommit.postgres import schema

    target = parse(url)
    stores = f"{schema.quoted(target.schema)}.stores"
    try:
        options: dict[str, Any] = {"prepare_threshold": None}
        if "connect_timeout" not in conninfo_to_dict(target.conninfo):  # the URL's own wins
            options["connect_timeout"] = 10
        with psycopg.connect(target.conninfo, **options) as conn:
            made = conn.execute("SELECT to_regclass(%s)", (stores,)).fetchone()
            if made is None or made[0] is None:  # no tables yet: no store either
                return False
            row = conn.execute(
                f"SELECT 1 FROM {stores} WHERE name = %s", (target.store,)
            ).fetchone()
            return row is not None
    except psycopg.Error as e:
        raise ServerUnavailable(
            f"{target.shown}: the PostgreSQL server cannot be used "
            f"({str(e).strip() or type(e).__name__}); check that it is running, that the host, "
            "port, user and database in the URL are right, and that this host may connect",
            url=target.shown,
            code="unavailable",
        ) from None


def require_postgres_store(url: str) -> None:
    """Refuse a store in PostgreSQL that does not exist, as :func:`require_file` a missing file.

    For a command that writes to a store it does not make (``seal``, ``compact``): a writer's
    open would make a new, empty store of a mistyped name.
    """
    if not postgres_store_exists(url):
        target = parse(url)
        raise CommandError(
            f"{target.shown}: no such store {target.store!r} (schema {target.schema}); check "
            "the URL's store= and schema= (memcommit import URL FILE makes a store)"
        )


def check_out_file(out: str, option: str, store: str) -> None:
    """Refuse an output path that cannot be written, naming it as the user gave it.

    The log `store` and the files beside it are refused too: writing there would replace it.
    (A URL, of the store or given as the output, is named without its password.)
    """
    if is_store_file(out, store):
        raise CommandError(
            f"{option}{hide_password(out)}: is the store {hide_password(store)} or a file of it; "
            "writing there would replace it: give another file"
        )
    if os.path.isdir(out):
        raise CommandError(f"{option}{out}: is a directory; give the name of a file to write")
    directory = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(directory):
        raise CommandError(f"{option}{out}: the directory {directory} does not exist")


def writing_error(out: str, error: OSError) -> CommandError:
    """An error writing beside `out` (a temp file), told as an error writing `out`."""
    return CommandError(f"{out}: cannot write it: {error.strerror or error}")
