"""The ``memcommit`` command line.

Subcommands: ``info``, ``export``, ``import``, ``repair``, ``compact``, ``snapshot``, ``seal``,
``verify``, ``serve`` and ``demo``. Run
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
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import IO, Any, NoReturn

import memcommit
from memcommit import demo as demo_workload
from memcommit.progress import Progress

__all__ = ["CommandError", "build_parser", "main"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

# Records per commit during import: large enough that the per-commit fsync is noise,
# small enough that a bad line far into a big file costs at most one batch.
DEFAULT_IMPORT_BATCH = 10_000

# Lines written to the export stream per write call.
_EXPORT_CHUNK = 1024

_INFO_ORDER = (
    "path",
    "records",
    "lsn",
    "bytes",
    "generation",
    "store_id",
    "memories",
    "seals",
    "last_seal",
)


class CommandError(Exception):
    """A failure the command line reports as one line of text, without a traceback.

    Args:
        message: What went wrong and what the user can do, naming the path or line.
        code: The exit code: 1 for a failure, 2 for a usage error.

    """

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    """An argument parser that raises instead of exiting, so ``main`` can return codes."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise CommandError(f"{message} (see {self.prog} --help)", EXIT_USAGE)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


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
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    info = commands.add_parser(
        "info",
        help="show records, LSN, size, generation and memories of a store",
        description="Open the store read-only and print what it holds as 'key: value' lines.",
    )
    info.add_argument("path", metavar="PATH", help="the store file")
    info.add_argument("--json", action="store_true", help="print one JSON object instead")
    info.set_defaults(handler=_run_info)

    export = commands.add_parser(
        "export",
        help="write every record as JSON lines",
        description="Write every record of the store, in LSN order, as one JSON object per "
        "line: lsn, op, at (ISO-8601, UTC), key and fields.",
    )
    export.add_argument("path", metavar="PATH", help="the store file")
    export.add_argument(
        "--out", metavar="FILE", help="write to FILE (replaced only when complete), not stdout"
    )
    export.set_defaults(handler=_run_export)

    load = commands.add_parser(
        "import",
        help="restore JSON lines written by export into a new store",
        description="Apply the records in FILE (JSON lines as written by 'memcommit export') "
        "to a new or empty store at PATH, creating it if missing: the memories with their "
        "tiers and status, the finished tasks and every role's entities, so that the store "
        "replays to the state that was exported. A store that holds records is refused. "
        "Records are committed in batches; a bad line stops the import and nothing of its "
        "batch is written, and if nothing was imported nothing is left at PATH. The store "
        "assigns new LSNs and timestamps (a memory's created_at is the time of its import).",
    )
    load.add_argument(
        "path", metavar="PATH", help="the store file: new (created), empty, or a log of no records"
    )
    load.add_argument("file", metavar="FILE", help="the JSON-lines file; '-' for stdin")
    load.add_argument(
        "--batch",
        type=_count,
        default=DEFAULT_IMPORT_BATCH,
        metavar="N",
        help=f"records per commit (default {DEFAULT_IMPORT_BATCH:,})",
    )
    load.set_defaults(handler=_run_import)

    repair = commands.add_parser(
        "repair",
        help="check a log and cut a damaged tail, keeping a backup",
        description="Check the log without opening the store; refused while a writer has it "
        "open. Zeros after the last commit are free space a writer wrote ahead, not damage. "
        "If a record is damaged, show where, and (with --yes, or after typing 'yes' on a "
        "terminal) copy the file to PATH.bak-<UTC time> and cut the log after its last good "
        "commit.",
    )
    repair.add_argument("path", metavar="PATH", help="the store file")
    repair.add_argument(
        "--yes", action="store_true", help="back up and cut without asking for confirmation"
    )
    repair.set_defaults(handler=_run_repair)

    compact_cmd = commands.add_parser(
        "compact",
        help="rewrite the log into what replay needs, purging what retention names",
        description="Compact the log: up to the horizon (default the newest LSN) keep only the "
        "records replay needs, keep every later record as it is, and purge the memories the "
        "retention options name that have no record after the horizon. The compaction "
        "manifest (PATH.manifest) records what was done. Ages: 30d, 12h, 45m, 90s or seconds.",
    )
    compact_cmd.add_argument("path", metavar="PATH", help="the store file")
    compact_cmd.add_argument(
        "--archived-older-than",
        metavar="AGE",
        type=_age,
        help="purge archived memories whose last move is at least AGE old",
    )
    compact_cmd.add_argument(
        "--kinds-after",
        metavar="KIND=AGE",
        action="append",
        default=[],
        type=_kind_age,
        help="purge memories of KIND created at least AGE ago (repeatable)",
    )
    compact_cmd.add_argument("--horizon", metavar="LSN", type=int, help="fold history up to LSN")
    compact_cmd.set_defaults(handler=_run_compact)

    snapshot_cmd = commands.add_parser(
        "snapshot",
        help="write the store's state as JSON, to open it quickly later",
        description="Write a snapshot of the store at PATH to OUT (atomically): its state as "
        "JSON with the LSN, log generation and chain hash it covers. "
        "memcommit.open(PATH, snapshot=OUT) then replays only the records after it.",
    )
    snapshot_cmd.add_argument("path", metavar="PATH", help="the store file")
    snapshot_cmd.add_argument("out", metavar="OUT", help="the snapshot file to write")
    snapshot_cmd.set_defaults(handler=_run_snapshot)

    seal_cmd = commands.add_parser(
        "seal",
        help="write a seal (the hash chain up to now) into the log",
        description="Seal the store: write the blake3 hash chain over every record into the log. "
        "Prints the seal as one JSON object, an anchor to keep elsewhere for "
        "'memcommit verify --anchor'.",
    )
    seal_cmd.add_argument("path", metavar="PATH", help="the store file")
    seal_cmd.add_argument(
        "--key-file",
        metavar="F",
        help="make a keyed seal with the secret in F (its bytes exactly as they are)",
    )
    seal_cmd.set_defaults(handler=_run_seal)

    verify_cmd = commands.add_parser(
        "verify",
        help="recompute the hash chain and check every seal and reference",
        description="Recompute the hash chain over the whole log, check every seal (keyed ones "
        "with --key-file), every anchor given, and that every memory's sources exist. Exits 0 "
        "when everything checks and 1 on the first difference, saying where.",
    )
    verify_cmd.add_argument("path", metavar="PATH", help="the store file")
    verify_cmd.add_argument("--key-file", metavar="F", help="the secret of keyed seals")
    verify_cmd.add_argument(
        "--anchor",
        metavar="FILE",
        action="append",
        default=[],
        help="a seal written by 'memcommit seal' that the log must still hold (repeatable)",
    )
    verify_cmd.set_defaults(handler=_run_verify)

    demo = commands.add_parser(
        "demo",
        help="write a realistic fleet workload to a new store",
        description="Create a store and run a fleet of agents on it: tasks, traces, facts, "
        "notes and episodes, stale/restore/move histories and guarded commits. Prints what "
        "was written and how fast.",
    )
    demo.add_argument("--path", default="memory.db", help="store file (default memory.db)")
    demo.add_argument("--agents", type=_count, default=100, help="agents (default 100)")
    demo.add_argument("--tasks", type=_count, default=1000, help="tasks (default 1000)")
    demo.add_argument("--memories", type=_count, default=100_000, help="memories (default 100000)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument(
        "--durability",
        choices=sorted(demo_workload.DURABILITY_NOTES),
        default="batch",
        help="store durability mode (default batch)",
    )
    demo.add_argument("--force", action="store_true", help="replace an existing file")
    demo.set_defaults(handler=_run_demo)
    from memcommit.server import add_serve_command  # the server's options live beside it

    add_serve_command(commands)
    return parser


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
        with _reading(path) if isinstance(path, str) else contextlib.nullcontext():
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
        return 130


def _fail(command: str, message: str) -> None:
    sys.stdout.flush()
    print(f"{command}: error: {message}", file=sys.stderr)


def _describe_os_error(error: OSError) -> str:
    reason = error.strerror or str(error)
    if error.filename is not None:
        return f"{error.filename}: {reason}"
    return reason


def _version() -> str:
    try:
        from importlib.metadata import version

        return f"memcommit {version('memcommit')}"
    except Exception:  # not installed as a distribution (a source checkout)
        return "memcommit (version unknown)"


def _as_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CommandError(f"unexpected {name} value {value!r} from the store")
    return value


def _require_file(path: str, what: str = "store") -> None:
    if os.path.isdir(path):
        raise CommandError(f"{path}: is a directory, not a {what} file")
    if not os.path.exists(path):
        raise CommandError(f"{path}: no such {what} file")


# --- what the file is: one judgement for every command ------------------------------------


def _inspect(path: str) -> dict[str, Any]:
    """The core's look at a log file, without opening a store or changing anything."""
    from memcommit import _native

    return _native.inspect_log(path)


def _empty_file(path: str) -> str:
    return (
        f"{path} is an empty file (0 bytes), not yet a memcommit log; a writer opening it "
        "(memcommit import, compact or seal, or memcommit.open) makes it a new, empty log"
    )


def _not_a_log(path: str, detail: object) -> str:
    return (
        f"{path} is not a memcommit log, or its header (the first 64 bytes) is damaged"
        + (f" ({detail})" if detail else "")
        + "; repair cannot recover a file without its header: check the path, "
        "or restore the file from a backup"
    )


def _naming(path: str, message: str) -> str:
    return message if path in message else f"{path}: {message}"


def _damage_at(path: str, report: dict[str, Any]) -> str:
    """The damage `report` found, in the words repair uses."""
    offset = _as_int(report["damage_offset"], "damage_offset")
    damage_lsn = report.get("damage_lsn")
    at_lsn = f" (LSN {_as_int(damage_lsn, 'damage_lsn'):,})" if damage_lsn is not None else ""
    reason = report.get("damage_reason")
    return f"{path}: damaged record at byte offset {offset:,}{at_lsn}" + (
        f": {reason}" if reason else ""
    )


def _advice(path: str, problem: str, *, decoded: bool = False) -> str:
    """`problem` with the advice that agrees with what repair finds in the file now.

    `decoded`: the problem is a record that does not decode behind a valid checksum, which
    no writer in flight explains.
    """
    try:
        if os.path.getsize(path) == 0:
            return _empty_file(path)
        report = _inspect(path)
    except (OSError, memcommit.MemcommitError):
        return problem
    if not report["header_ok"]:
        return _not_a_log(path, report.get("header_error"))
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
def _reading(path: str) -> Iterator[None]:
    """Report a damaged log as one line naming `path`, however the damage surfaced.

    ``CorruptLog`` from the core, and the errors of decoding a record whose checksum is valid
    but whose payload is not what its op says (text that is not UTF-8, data that is not JSON,
    a time out of range), all become a :class:`CommandError`.
    """
    try:
        yield
    except memcommit.CorruptLog as error:
        raise CommandError(_advice(path, _naming(path, str(error)))) from error
    except (UnicodeError, json.JSONDecodeError, OverflowError) as error:
        # Not every ValueError: an argument refused is not damage in the log.
        problem = f"{path}: a record does not decode ({type(error).__name__}: {error})"
        raise CommandError(_advice(path, problem, decoded=True)) from error


def _open_read_only(path: str, verb: str) -> memcommit.MemoryStore:
    """Open `path` to `verb` it (``main`` reports a damaged log, see :func:`_reading`)."""
    _require_file(path)
    if os.path.getsize(path) == 0:
        raise CommandError(f"{_empty_file(path)}; there is nothing to {verb}")
    return memcommit.open(path, read_only=True)


def _check_before_writing(path: str) -> None:
    """Refuse what a writer's open would refuse, before that open creates ``PATH.lock``."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return  # a writer makes a missing or empty file a new log
    report = _inspect(path)
    if not report["header_ok"]:
        raise CommandError(_not_a_log(path, report.get("header_error")))
    if report.get("damage_mid_log") and not os.path.exists(_lock_path(path)):
        # With a lock file, a writer may be appending: let the open judge (and say so).
        raise CommandError(
            f"{_damage_at(path, report)}; run 'memcommit repair {path}' to see the damage "
            "and cut it"
        )


def _open_writer(path: str) -> memcommit.MemoryStore:
    """Open an existing store as its writer (``main`` reports a damaged log)."""
    _require_file(path)
    _check_before_writing(path)
    return memcommit.open(path)


def _lock_path(path: str) -> str:
    return f"{path}.lock"


@contextlib.contextmanager
def _no_writer(path: str) -> Iterator[None]:
    """Hold the writer lock of `path` for the block, or refuse at once naming the lock.

    Never creates the lock file: without one, no writer has the log open. Where ``flock`` is
    not available the block runs unguarded (the core's truncate still refuses a held lock).
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    try:
        fd = os.open(_lock_path(path), os.O_RDONLY)
    except FileNotFoundError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CommandError(
                f"{path} is open for writing by another process (it holds the lock on "
                f"{_lock_path(path)}): repair checked nothing and changed nothing; close the "
                "writer and run repair again"
            ) from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


# --- info ---------------------------------------------------------------------------------


def _run_info(args: argparse.Namespace) -> int:
    path: str = args.path
    with _open_read_only(path, "show") as store:
        info = dict(store.info())
        store_seals = store.seals()
    info["seals"] = len(store_seals)
    if store_seals:
        info["last_seal"] = f"LSN {store_seals[-1].lsn} {store_seals[-1].hash}"
    # These describe this read-only open, not the store: a reader has no durability mode of
    # its own and never cuts a torn tail (recovered_bytes is always 0 here).
    for key in ("durability", "read_only", "recovered_bytes", "fsyncs"):
        info.pop(key, None)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return EXIT_OK
    ordered = [key for key in _INFO_ORDER if key in info]
    ordered += sorted(key for key in info if key not in _INFO_ORDER)
    for key in ordered:
        print(f"{key}: {info[key]}")
    return EXIT_OK


# --- compact ------------------------------------------------------------------------------

_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _age(text: str) -> float:
    """Parse an age: ``30d``, ``12h``, ``45m``, ``90s``, ``2w`` or plain seconds."""
    raw = text.strip().lower()
    unit = _AGE_UNITS.get(raw[-1:], None)
    number = raw[:-1] if unit is not None else raw
    try:
        value = float(number) * (unit or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an age; use a number with d, h, m, s or w (e.g. 30d)"
        ) from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: an age must be a finite number >= 0")
    return value


def _kind_age(text: str) -> tuple[str, float]:
    kind, sep, age = text.partition("=")
    if not sep or not kind:
        raise argparse.ArgumentTypeError(f"{text!r} is not KIND=AGE (e.g. trace=7d)")
    return kind, _age(age)


def _run_compact(args: argparse.Namespace) -> int:
    from memcommit.storage import ArchivedOlderThan, KindsAfter, RetentionPolicy, compact

    path: str = args.path
    _require_file(path)
    policies: list[RetentionPolicy] = []
    if args.archived_older_than is not None:
        policies.append(ArchivedOlderThan(seconds=args.archived_older_than))
    if args.kinds_after:
        policies.append(KindsAfter(dict(args.kinds_after)))
    retention: RetentionPolicy | None = None
    for p in policies:
        retention = p if retention is None else retention | p
    with _open_writer(path) as store:
        if args.horizon is not None and not 0 <= args.horizon <= store.lsn:
            raise CommandError(
                f"--horizon {args.horizon}: must be between 0 and the newest LSN {store.lsn}"
            )
        total = _as_int(store.info()["bytes"], "bytes")
        with Progress(total, "compact", unit="bytes") as bar:

            def progress(done: int, _total: int) -> None:
                bar.update(done - bar.count)

            report = compact(store, retention=retention, horizon=args.horizon, progress=progress)
    print(f"compacted: {path} (generation {report.generation})")
    print(f"records: {report.before} -> {report.after}")
    print(f"bytes: {report.bytes_before} -> {report.bytes_after}")
    print(f"horizon: {report.horizon}")
    print(f"purged: {len(report.purged)}")
    print(f"seconds: {report.seconds:.3f}")
    return EXIT_OK


# --- snapshot -----------------------------------------------------------------------------


def _check_out_file(out: str, option: str) -> None:
    """Refuse an output path that cannot be written, naming it as the user gave it."""
    if os.path.isdir(out):
        raise CommandError(f"{option}{out}: is a directory; give the name of a file to write")
    directory = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(directory):
        raise CommandError(f"{option}{out}: the directory {directory} does not exist")


def _writing_error(out: str, error: OSError) -> CommandError:
    """An error writing beside `out` (a temp file), told as an error writing `out`."""
    return CommandError(f"{out}: cannot write it: {error.strerror or error}")


def _run_snapshot(args: argparse.Namespace) -> int:
    path: str = args.path
    out: str = args.out
    _check_out_file(out, "")
    with _open_read_only(path, "snapshot") as store:
        try:
            store.save_snapshot(out)
        except OSError as error:
            raise _writing_error(out, error) from error
        lsn, generation, memories = store.lsn, store.generation, len(store)
    size = os.path.getsize(out)
    print(f"snapshot: {out} ({size} bytes)")
    print(f"lsn: {lsn}")
    print(f"generation: {generation}")
    print(f"memories: {memories}")
    return EXIT_OK


# --- seal and verify ----------------------------------------------------------------------


def _read_key(path: str | None) -> bytes | None:
    if path is None:
        return None
    _require_file(path, "key")
    with open(path, "rb") as f:
        key = f.read()
    if not key:
        raise CommandError(f"{path}: the key file is empty")
    return key


def _run_seal(args: argparse.Namespace) -> int:
    path: str = args.path
    key = _read_key(args.key_file)
    with _open_writer(path) as store:
        sealed = memcommit.seal(store, key=key)
    print(sealed.to_json())
    return EXIT_OK


def _run_verify(args: argparse.Namespace) -> int:
    path: str = args.path
    key = _read_key(args.key_file)
    anchors = []
    for anchor in args.anchor:
        _require_file(anchor, "anchor")
        with open(anchor, encoding="utf-8") as f:
            try:
                anchors.append(memcommit.Seal.from_json(f.read()))
            except ValueError as error:
                raise CommandError(f"{anchor}: {error}") from None
    with _open_read_only(path, "verify") as store:
        total = _as_int(store.info()["bytes"], "bytes")
        with Progress(total, "verify", unit="bytes") as bar:

            def progress(done: int) -> None:
                bar.update(done - bar.count)

            report = memcommit.verify(store, key=key, anchors=anchors, progress=progress)
    print(f"ok: {path}")
    print(f"records_checked: {report.records_checked}")
    print(f"bytes_checked: {report.bytes_checked}")
    print(f"seals_checked: {report.seals_checked}")
    if report.keyed_unchecked:
        print(f"keyed_unchecked: {report.keyed_unchecked} (pass --key-file to check them)")
    if anchors:
        print(f"anchors_checked: {report.anchors_checked}")
    if report.superseded:
        print(f"superseded: {report.superseded} (seals of an earlier generation, in the manifest)")
    print(f"chain: {report.chain}")
    return EXIT_OK


# --- export -------------------------------------------------------------------------------


def _json_default(value: object) -> object:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, tuple | frozenset | set):
        return list(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _record_line(record: memcommit.Record) -> str:
    return json.dumps(
        {
            "lsn": record.lsn,
            "op": record.op,
            "at": record.at.isoformat(),
            "key": record.key,
            "fields": record.fields,
        },
        ensure_ascii=False,
        separators=(",", ":"),
        default=_json_default,
    )


def _write_records(store: memcommit.MemoryStore, out: IO[bytes], bar: Progress) -> int:
    count = 0
    chunk: list[str] = []
    for record in store.records():
        chunk.append(_record_line(record))
        if len(chunk) >= _EXPORT_CHUNK:
            out.write(("\n".join(chunk) + "\n").encode())
            count += len(chunk)
            bar.update(len(chunk))
            chunk.clear()
    if chunk:
        out.write(("\n".join(chunk) + "\n").encode())
        count += len(chunk)
        bar.update(len(chunk))
    return count


def _run_export(args: argparse.Namespace) -> int:
    path: str = args.path
    target: str | None = args.out
    if target is not None:
        _check_out_file(target, "--out ")
    with _open_read_only(path, "export") as store:
        total = _as_int(store.info().get("records", 0), "records")
        if target is None:
            # Draw no bar over records printed to the same terminal.
            enabled = None if not sys.stdout.isatty() else False
            sys.stdout.flush()
            out = sys.stdout.buffer
            try:
                with Progress(total, "export", unit="records", enabled=enabled) as bar:
                    _write_records(store, out, bar)
                out.flush()
            except BrokenPipeError:
                raise
            except OSError as error:
                raise CommandError(
                    f"writing {path}'s records to standard output: {error.strerror or error}"
                ) from error
            return EXIT_OK
        # Write beside the target and rename at the end, so FILE is never half written.
        partial = f"{target}.partial"
        try:
            with (
                open(partial, "wb") as out_file,
                Progress(total, "export", unit="records") as bar,
            ):
                count = _write_records(store, out_file, bar)
                out_file.flush()
                os.fsync(out_file.fileno())
            os.replace(partial, target)
        except BaseException as error:
            with contextlib.suppress(OSError):
                os.remove(partial)
            if isinstance(error, OSError) and error.filename in (None, partial, target):
                # Name the file the user asked for, not the temp file beside it.
                raise _writing_error(target, error) from error
            raise
    print(f"exported {count:,} records from {path} to {target}")
    return EXIT_OK


# --- import -------------------------------------------------------------------------------


# The largest record the importing store takes (memcommit.open's default), and the longest
# key of a record (the format's limit): entity lines are checked against them before any of
# their batch is written.
_MAX_RECORD_BYTES = 16 * 1024 * 1024
_MAX_KEY_BYTES = 1024


@dataclass(frozen=True)
class _Change:
    """One record of an export file, checked and ready to apply.

    A put's `tier` and `status` are the memory's state as the put recorded it (None when the
    line does not say): after log compaction a memory's last put is all that is left of the
    moves and status changes before it, so import applies them from there.
    """

    line: int
    op: str
    key: str
    text: str = ""
    kind: str = "note"
    task: str | None = None
    tier: str | None = None
    data: dict[str, Any] | None = None
    tags: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    status: str | None = None
    reason: str | None = None
    state: bytes | None = None  # an entity's new state as JSON; None removes it


class _BadLine(Exception):
    pass


def _field_str(fields: dict[str, Any], name: str, *, default: str | None = None) -> str:
    value = fields.get(name, default)
    if not isinstance(value, str):
        raise _BadLine(f"fields.{name} must be a string, got {value!r}")
    return value


def _field_optional_str(fields: dict[str, Any], name: str) -> str | None:
    value = fields.get(name)
    if value is not None and not isinstance(value, str):
        raise _BadLine(f"fields.{name} must be a string or null, got {value!r}")
    return value


def _field_strings(fields: dict[str, Any], name: str) -> tuple[str, ...]:
    value = fields.get(name, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _BadLine(f"fields.{name} must be a list of strings, got {value!r}")
    return tuple(value)


def _field_status(fields: dict[str, Any], *, required: bool) -> str | None:
    status = fields.get("status")
    if status is None and not required:
        return None
    if status not in ("active", "stale"):
        raise _BadLine(f"fields.status must be 'active' or 'stale', got {status!r}")
    return str(status)


def _entity_change(key: str, fields: dict[str, Any], line: int) -> _Change:
    """An entity record: role entity `key` (``kind NUL key``) takes the state, or goes (null)."""
    try:
        key_bytes = len(key.encode())
    except UnicodeEncodeError:
        raise _BadLine("'key' is not valid Unicode (it holds a lone surrogate)") from None
    if key_bytes > _MAX_KEY_BYTES:
        raise _BadLine(
            f"'key' is {key_bytes:,} bytes; a record's key is at most {_MAX_KEY_BYTES:,}"
        )
    if "state" not in fields:
        raise _BadLine("an entity record must have fields.state (an object, or null to remove)")
    state = fields["state"]
    payload = None
    if state is not None:
        try:
            # As the roles' log medium encodes a state.
            text = json.dumps(state, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            payload = text.encode()
        except (ValueError, UnicodeEncodeError) as error:
            raise _BadLine(f"fields.state cannot be stored as JSON ({error})") from None
        if len(payload) + 1 > _MAX_RECORD_BYTES:
            raise _BadLine(
                f"fields.state is {len(payload):,} bytes as JSON; the store takes at most "
                f"{_MAX_RECORD_BYTES - 1:,}"
            )
    return _Change(line=line, op="entity", key=key, state=payload)


def _parse_line(raw: bytes, line: int) -> _Change | None:
    """Check one line of an export file; returns None for a blank line."""
    if not raw.strip():
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise _BadLine(f"not valid JSON ({error})") from None
    if not isinstance(obj, dict):
        raise _BadLine(f"expected a JSON object, got {type(obj).__name__}")
    op = obj.get("op")
    if op == "seal":
        # A seal vouches for the bytes of the log it was written in; the importing store
        # writes records of its own, and seals them itself.
        return None
    key = obj.get("key")
    fields = obj.get("fields")
    if not isinstance(key, str) or not key:
        raise _BadLine(f"'key' must be a non-empty string, got {key!r}")
    if not isinstance(fields, dict):
        raise _BadLine(f"'fields' must be an object, got {fields!r}")
    if op == "put":
        data = fields.get("data")
        if data is not None and not isinstance(data, dict):
            raise _BadLine(f"fields.data must be an object or null, got {data!r}")
        tier = fields.get("tier")
        if tier is not None and not isinstance(tier, str):
            raise _BadLine(f"fields.tier must be a string, got {tier!r}")
        return _Change(
            line=line,
            op="put",
            key=key,
            text=_field_str(fields, "text"),
            kind=_field_str(fields, "kind", default="note"),
            task=_field_optional_str(fields, "task"),
            tier=tier,
            data=data,
            tags=_field_strings(fields, "tags"),
            sources=_field_strings(fields, "sources"),
            status=_field_status(fields, required=False),
        )
    if op == "status":
        return _Change(
            line=line,
            op="status",
            key=key,
            status=_field_status(fields, required=True),
            reason=_field_optional_str(fields, "reason"),
        )
    if op == "move":
        return _Change(line=line, op="move", key=key, tier=_field_str(fields, "tier"))
    if op == "task":
        if fields.get("finished", True) is not True:
            raise _BadLine("a task record must have fields.finished = true")
        return _Change(line=line, op="task", key=key)
    if op == "entity":
        return _entity_change(key, fields, line)
    raise _BadLine(f"unknown op {op!r} (expected put, status, move, task, entity or seal)")


# A memory's (tier, status), as the import has left it so far.
_MemoryState = tuple[str, str]


@dataclass
class _Import:
    """The state of one import: where it reads, what it wrote so far."""

    store: memcommit.MemoryStore
    source: str
    imported: int = 0
    commits: int = 0
    batch: list[_Change] = field(default_factory=list)

    def fail(self, line: int, problem: str) -> CommandError:
        first = self.batch[0].line if self.batch else line
        written = (
            f"{self.imported:,} records from lines before {first} were imported into "
            f"{self.store.path} (import again only into a new store: remove it first)"
            if self.imported
            else "nothing was imported"
        )
        lines = f"line {line}" if first == line else f"lines {first}-{line}"
        return CommandError(
            f"{self.source}, line {line}: {problem}; nothing from {lines} was written, {written}"
        )

    def flush(self) -> None:
        """Commit the current batch, or raise naming the line that was refused.

        The memory records go in one commit and the role entities in one more: the two are
        independent state, so applying a batch's entities after its memories replays to the
        same store. Every line was checked before either is written.
        """
        if not self.batch:
            return
        memories = [change for change in self.batch if change.op != "entity"]
        entities = [change for change in self.batch if change.op == "entity"]
        if memories:
            self._commit_memories(memories)
        if entities:
            # No public call writes a role's entity records as they are; this is the one the
            # roles' log medium (memcommit.roles.logmedium) writes them with.
            native = self.store._native
            try:
                end = native.write_entities(
                    self.store._now_us(), [(change.key, change.state) for change in entities]
                )
            except (ValueError, TypeError) as error:
                raise self.fail(entities[-1].line, str(error)) from error
            native.wait_durable(end)
            self.commits += 1
        self.imported += len(self.batch)
        self.batch.clear()

    def _commit_memories(self, changes: list[_Change]) -> None:
        current = 0
        pending: dict[str, _MemoryState] = {}
        try:
            with self.store.commit() as commit:
                for change in changes:
                    current = change.line
                    self._apply(commit, change, pending)
                current = 0
        except memcommit.Rejected as error:
            line = current or self._line_for(error)
            raise self.fail(line or changes[-1].line, f"refused: {error}") from error
        except (ValueError, TypeError) as error:
            raise self.fail(current or changes[-1].line, str(error)) from error
        self.commits += 1

    def _state(self, key: str, pending: dict[str, _MemoryState]) -> _MemoryState | None:
        """Memory `key`'s (tier, status) with this commit's earlier records applied."""
        if key in pending:
            return pending[key]
        if key not in self.store:  # the common case, and cheaper than building a Memory
            return None
        memory = self.store.get(key)
        return None if memory is None else (memory.tier, memory.status)

    def _apply(
        self, commit: memcommit.Commit, change: _Change, pending: dict[str, _MemoryState]
    ) -> None:
        key = change.key
        before = self._state(key, pending)
        if change.op == "put":
            commit.put(
                change.text,
                kind=change.kind,
                id=key,
                task=change.task,
                tier=change.tier or "working",
                data=change.data,
                tags=change.tags,
                sources=change.sources,
            )
            # A new memory starts active in the put's tier; an existing one keeps both. The
            # put says what they were: bring the memory there (after log compaction the
            # moves and status changes before this put are no longer in the log).
            tier, status = before if before is not None else (change.tier or "working", "active")
            if change.tier is not None and change.tier != tier:
                commit.move(key, change.tier)
                tier = change.tier
            if change.status is not None and change.status != status:
                _set_status(commit, key, change.status, None)
                status = change.status
            pending[key] = (tier, status)
        elif change.op == "status":
            assert change.status is not None
            _set_status(commit, key, change.status, change.reason)
            if before is not None:
                pending[key] = (before[0], change.status)
        elif change.op == "move":
            assert change.tier is not None
            commit.move(key, change.tier)
            if before is not None:
                pending[key] = (change.tier, before[1])
        else:
            commit.finish_task(key)

    def _line_for(self, error: memcommit.Rejected) -> int:
        """Find the first line of the batch that touched the id a refused guard names."""
        guard_id = getattr(getattr(error, "guard", None), "id", None)
        for change in self.batch:
            if change.key == guard_id and change.op in ("status", "move"):
                return change.line
        return 0


def _set_status(commit: memcommit.Commit, key: str, status: str, reason: str | None) -> None:
    if status == "stale":
        commit.stale(key, reason=reason)
    else:
        commit.restore(key)


def _read_lines(source: str) -> tuple[Iterator[bytes], int, Callable[[], None]]:
    """Open the import source; returns its lines, its size (0 if unknown) and a closer."""
    if source == "-":
        return iter(sys.stdin.buffer), 0, lambda: None
    _require_file(source, "import")
    handle = open(source, "rb")
    return iter(handle), os.fstat(handle.fileno()).st_size, handle.close


def _refuse_a_store_with_records(path: str, records: int, lsn: int) -> NoReturn:
    raise CommandError(
        f"{path} already holds {records:,} records (LSN {lsn:,}); import restores an export "
        "into a new or empty store, so nothing was written: give a path that does not exist "
        "yet"
    )


def _check_import_target(path: str) -> None:
    """Refuse a target that is not a new or empty store, before anything is created."""
    if os.path.isdir(path):
        raise CommandError(f"{path}: is a directory, not a store file")
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    report = _inspect(path)
    if not report["header_ok"]:
        raise CommandError(_not_a_log(path, report.get("header_error")))
    records = _as_int(report["records"], "records")
    if records or report.get("damage_mid_log"):
        _refuse_a_store_with_records(path, records, _as_int(report["lsn"], "lsn"))


def _discard_new_files(path: str, existed: set[str]) -> None:
    """Remove the files a refused import created: the log and its lock file.

    Called while the store is still open, so the lock is held as they go: no writer can have
    taken over a file that is removed.
    """
    for name in (path, _lock_path(path)):
        if name not in existed:
            with contextlib.suppress(FileNotFoundError):
                os.remove(name)


def _run_import(args: argparse.Namespace) -> int:
    path: str = args.path
    source: str = args.file
    batch_size: int = args.batch
    _check_import_target(path)
    lines, size, close = _read_lines(source)
    existed = {name for name in (path, _lock_path(path)) if os.path.lexists(name)}
    try:
        store = memcommit.open(path, max_record_bytes=_MAX_RECORD_BYTES)
        with store, Progress(size, "import", unit="bytes") as bar:
            records = _as_int(store.info()["records"], "records")
            if records:  # a writer committed between the check and the open: leave it be
                _refuse_a_store_with_records(path, records, store.lsn)
            first_lsn = store.lsn + 1
            job = _Import(store=store, source=source)
            try:
                for number, raw in enumerate(lines, start=1):
                    bar.update(len(raw))
                    try:
                        change = _parse_line(raw, number)
                    except _BadLine as error:
                        raise job.fail(number, str(error)) from None
                    if change is None:
                        continue
                    job.batch.append(change)
                    if len(job.batch) >= batch_size:
                        job.flush()
                job.flush()
            except BaseException:
                if not job.imported:
                    _discard_new_files(path, existed)
                raise
            lsn = store.lsn
    finally:
        close()
    if job.imported:
        print(
            f"imported {job.imported:,} records from {source} into {path} "
            f"in {job.commits:,} commit{'s' if job.commits != 1 else ''} "
            f"(LSN {first_lsn:,}..{lsn:,})"
        )
    else:
        print(f"imported 0 records from {source} into {path}: the file holds no records")
    return EXIT_OK


# --- repair -------------------------------------------------------------------------------


def _fsync_directory(directory: str) -> None:
    if os.name == "nt":  # Windows cannot open a directory for fsync; NTFS journals names
        return
    fd = os.open(directory or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _backup(path: str) -> str:
    """Copy ``path`` to ``path.bak-<UTC time>``, durably, and return the copy's name."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    backup = f"{path}.bak-{stamp}"
    suffix = 1
    while os.path.lexists(backup):
        backup = f"{path}.bak-{stamp}-{suffix}"
        suffix += 1
    with open(path, "rb") as source, open(backup, "xb") as copy:
        shutil.copyfileobj(source, copy, 1 << 20)
        copy.flush()
        # The backup must be on disk before the original is cut: fsync the file, then
        # the directory entry that names it.
        os.fsync(copy.fileno())
    shutil.copymode(path, backup)
    _fsync_directory(os.path.dirname(os.path.abspath(backup)))
    if os.path.getsize(backup) != os.path.getsize(path):
        raise CommandError(f"{backup}: the backup is incomplete; {path} was not changed")
    return backup


def _confirm(prompt: str) -> bool | None:
    """Ask for 'yes' on a terminal; None when there is no terminal to ask on."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return None
    try:
        answer = input(prompt)
    except EOFError:
        return False
    return answer.strip().lower() == "yes"


def _all_zeros(path: str, start: int, end: int) -> bool:
    """Whether bytes `start`..`end` of `path` are all zero (a writer's space written ahead)."""
    with open(path, "rb") as f:
        f.seek(start)
        left = end - start
        while left > 0:
            chunk = f.read(min(left, 1 << 20))
            if not chunk:
                return True  # the file is shorter now: nothing there to call damage
            if chunk.strip(b"\0"):
                return False
            left -= len(chunk)
    return True


def _run_repair(args: argparse.Namespace) -> int:
    path: str = args.path
    _require_file(path)
    # The writer lock first: a live writer's tail is a commit in flight or the zeros it
    # wrote ahead, never damage to report or cut. Held until the backup is made, so no
    # writer starts under the check.
    with _no_writer(path):
        size = os.path.getsize(path)
        if size == 0:
            print(f"{path}: nothing to repair: {_empty_file(path)}")
            return EXIT_OK
        report = _inspect(path)
        if not report["header_ok"]:
            raise CommandError(_not_a_log(path, report.get("header_error")))
        records = _as_int(report["records"], "records")
        lsn = _as_int(report["lsn"], "lsn")
        good_end = _as_int(report["good_end"], "good_end")
        damage_offset = report.get("damage_offset")
        mid_log = bool(report.get("damage_mid_log", False)) and damage_offset is not None
        healthy = f"{path}: healthy: {records:,} records, LSN {lsn:,}, {size:,} bytes"
        if good_end >= size and damage_offset is None:
            print(healthy)
            return EXIT_OK
        if not mid_log and _all_zeros(path, good_end, size):
            # The format's free space (op 0 never parses): the last commit ends at good_end.
            print(
                f"{healthy}; the last {size - good_end:,} bytes are zeros a writer wrote "
                "ahead, free space rather than damage (the next writer's open trims them)"
            )
            return EXIT_OK

        cut = size - good_end
        offset = good_end if damage_offset is None else _as_int(damage_offset, "damage_offset")
        reason = report.get("damage_reason")
        because = f": {reason}" if reason else ""
        if mid_log:
            print(_damage_at(path, report))
        else:
            print(
                f"{path}: torn tail at byte offset {offset:,}{because}; an unfinished commit "
                "that was never acknowledged (a writer opening the store also cuts it)"
            )
        print(f"  last good commit ends at byte {good_end:,}: {records:,} records, LSN {lsn:,}")
        print(
            f"  repair would cut {cut:,} bytes (offsets {good_end:,}..{size:,})"
            + (", including any intact records after the damage" if mid_log else "")
        )
        if not args.yes:
            confirmed = _confirm(f"Back up {path} and cut {cut:,} bytes? Type 'yes' to go on: ")
            if confirmed is None:
                raise CommandError(
                    f"{path} was not changed; pass --yes to back it up and cut the damaged part"
                )
            if not confirmed:
                raise CommandError(f"{path} was not changed (the answer was not 'yes')")
        backup = _backup(path)
        print(f"backed up {path} to {backup} ({size:,} bytes)")

    from memcommit import _native

    if os.path.getsize(path) != size:
        os.remove(backup)
        raise CommandError(
            f"{path} changed while repair ran (a writer opened it?), so nothing was cut and "
            "the backup was removed; run repair again"
        )
    try:
        _native.truncate_log(path, good_end)
    except memcommit.StoreLocked as error:
        # A writer opened the log after the check: what looked damaged may be its commit.
        os.remove(backup)
        raise CommandError(
            f"{path} is open for writing by another process, so nothing was cut and the "
            f"backup was removed; close the writer and run repair again ({error})"
        ) from error
    after = _inspect(path)
    if after.get("damage_offset") is not None:
        raise CommandError(f"{path}: still damaged after the cut; the original is in {backup}")
    print(
        f"cut {cut:,} bytes from {path}: it now holds "
        f"{_as_int(after['records'], 'records'):,} records up to LSN "
        f"{_as_int(after['lsn'], 'lsn'):,} ({os.path.getsize(path):,} bytes)"
    )
    return EXIT_OK


# --- demo ---------------------------------------------------------------------------------


def _run_demo(args: argparse.Namespace) -> int:
    options = demo_workload.DemoOptions(
        path=args.path,
        agents=args.agents,
        tasks=args.tasks,
        memories=args.memories,
        seed=args.seed,
        durability=args.durability,
        force=args.force,
    )
    if os.path.lexists(options.path) and not options.force:
        raise CommandError(
            f"{options.path} already exists; pass --force to replace it "
            "or --path to write somewhere else"
        )
    print(
        f"memcommit demo: {options.agents:,} agents, {options.tasks:,} tasks, "
        f"{options.memories:,} memories, seed {options.seed} -> {options.path}"
    )
    print(f"durability: {demo_workload.DURABILITY_NOTES[options.durability]}")
    sys.stdout.flush()
    report = demo_workload.run_demo(options)
    print(demo_workload.format_report(report))
    if not report.reopen_matches:
        raise CommandError(
            f"{options.path}: reopened with {report.reopened_memories:,} memories, "
            f"expected {options.memories:,}"
        )
    return EXIT_OK
