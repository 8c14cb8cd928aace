"""``memcommit export`` and ``memcommit import``: a store to JSON lines and back.

The format of a line, both ways, is :mod:`memcommit.cli.export_format`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import IO, Any, NoReturn

import memcommit
from memcommit import _native
from memcommit.cli._common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    Subcommands,
    add_command,
    add_store_command,
    as_int,
    check_out_file,
    inspect_log,
    lock_path,
    not_a_log,
    open_read_only,
    positive_count,
    postgres_store_exists,
    require_file,
    writing_error,
)
from memcommit.cli.export_format import (
    MAX_RECORD_BYTES,
    BadLine,
    Change,
    Purged,
    parse_line,
    purged_line,
    record_line,
)
from memcommit.engine import LocalEngine
from memcommit.errors import CommandError, MemcommitError
from memcommit.files import replaced_but_not_synced, sync_directory, temp_of_this_process
from memcommit.postgres.dsn import hide_password, is_postgres_url
from memcommit.postgres.engine import PostgresEngine
from memcommit.progress import Progress

# Records per commit during import: large enough that the per-commit fsync is noise,
# small enough that a bad line far into a big file costs at most one batch.
DEFAULT_IMPORT_BATCH = 10_000

# Lines written to the export stream per write call.
_EXPORT_CHUNK = 1024


def add_commands(commands: Subcommands) -> None:
    """Add ``export`` and ``import`` to the command line's subcommands."""
    export = add_store_command(commands, "export", _run_export)
    export.add_argument(
        "--out", metavar="FILE", help="write to FILE (replaced only when complete), not stdout"
    )
    load = add_command(commands, "import", _run_import)
    load.add_argument(
        "path", metavar="PATH", help="the store file: new (created), empty, or a log of no records"
    )
    load.add_argument(
        "file",
        metavar="FILE",
        nargs="?",
        default="-",
        help="the JSON-lines file; '-' or none for stdin (memcommit export PATH | memcommit "
        "import URL)",
    )
    load.add_argument(
        "--batch",
        type=positive_count,
        default=DEFAULT_IMPORT_BATCH,
        metavar="N",
        help=f"records per commit (default {DEFAULT_IMPORT_BATCH:,})",
    )


def _purged_ids(store: memcommit.MemoryStore) -> list[str]:
    """Every id the store's log compactions purged (what its manifest lists), sorted."""
    return sorted({str(id) for entry in store.manifest() for id in entry.get("purged", ())})


def _write_records(
    store: memcommit.MemoryStore, out: IO[bytes], bar: Progress, purged: list[str]
) -> int:
    """Write the line of purged ids (if any), then every record; returns the records written."""
    if purged:
        out.write((purged_line(purged) + "\n").encode())
    count = 0
    chunk: list[str] = []
    for record in store.records():
        chunk.append(record_line(record))
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
    """Write every record as JSON lines.

    Write every record of the store, in LSN order, as one JSON object per line: lsn, op, at
    (ISO-8601, UTC), key and fields. If log compaction purged memories, a first line lists
    their ids ({"purged": [...]}), so that the importing store knows that sources naming
    them are deliberate.
    """
    path: str = args.path
    target: str | None = args.out
    stdout = sys.stdout
    if target is not None:
        check_out_file(target, "--out ", path)
    elif stdout is None:  # Python's sys.stdout when standard output was closed (>&-)
        raise CommandError(
            f"standard output is closed: nowhere to write {hide_password(path)}'s records; "
            "redirect it to a file or a pipe, or give --out FILE"
        )
    with open_read_only(path, "export") as store:
        total = as_int(store.info().get("records", 0), "records")
        purged = _purged_ids(store)
        if target is None:
            assert stdout is not None  # refused above
            # Draw no bar over records printed to the same terminal.
            enabled = None if not stdout.isatty() else False
            stdout.flush()
            out = stdout.buffer
            try:
                with Progress(total, "export", unit="records", enabled=enabled) as bar:
                    _write_records(store, out, bar, purged)
                out.flush()
            except BrokenPipeError:
                raise
            except OSError as error:
                raise CommandError(
                    f"writing {hide_password(path)}'s records to standard output: "
                    f"{error.strerror or error}"
                ) from error
            return EXIT_OK
        # Write beside the target (a temp file of this process), fsync, rename at the end so
        # FILE is never half written, and fsync the directory so the rename survives a power
        # loss: what memcommit.files.replace_durably does, streamed.
        partial = temp_of_this_process(target)
        replaced = False
        try:
            with (
                open(partial, "wb") as out_file,
                Progress(total, "export", unit="records") as bar,
            ):
                count = _write_records(store, out_file, bar, purged)
                out_file.flush()
                os.fsync(out_file.fileno())
            os.replace(partial, target)
            replaced = True
            sync_directory(target)
        except BaseException as error:
            if not replaced:
                with contextlib.suppress(OSError):
                    os.remove(partial)
            if isinstance(error, OSError) and replaced:
                raise CommandError(replaced_but_not_synced(target, error)) from error
            if isinstance(error, OSError) and error.filename in (None, partial, target):
                # Name the file the user asked for, not the temp file beside it.
                raise writing_error(target, error) from error
            raise
    print(
        f"exported {count:,} records{_purged_note(len(purged))} from {hide_password(path)} "
        f"to {target}"
    )
    return EXIT_OK


def _purged_note(count: int) -> str:
    """What an export or import says of the purged ids it carried ("" for none)."""
    return f" and {count:,} purged id{'s' if count != 1 else ''}" if count else ""


# A memory's (tier, status), as the import has left it so far.
_MemoryState = tuple[str, str]


@dataclass
class _Import:
    """The state of one import: where it reads, what it wrote so far."""

    store: memcommit.MemoryStore
    source: str
    imported: int = 0
    commits: int = 0
    batch: list[Change] = field(default_factory=list)
    # The ids the file lists as purged (its first line), and whether a record was read yet.
    purged: set[str] = field(default_factory=set)
    read_records: bool = False
    # Whether puts may name sources the store does not hold (yet): the view trusting them.
    trust: bool = False
    trusted: _native.NativeLog | None = None
    # Takes the purged ids back out of the store (set once they are in it).
    unmark: Callable[[], None] | None = None
    # Whether the store's manifest is this import's: its purged ids, or none of an earlier one.
    marked: bool = False

    def read(self, raw: bytes, number: int) -> Change | None:
        """Line `number` as a change to apply (None: nothing to apply), or raise naming it.

        The purged ids it lists are kept in :attr:`purged`; they come before the records.
        """
        try:
            parsed = parse_line(raw, number, roles=True)
        except BadLine as error:
            raise self.fail(number, str(error)) from None
        if isinstance(parsed, Purged):
            if self.read_records:
                raise self.fail(number, "the line of purged ids must come before the records")
            self.purged.update(parsed.ids)
            return None
        if parsed is not None:
            self.read_records = True
        return parsed

    def fail(self, line: int, problem: str) -> CommandError:
        first = self.batch[0].line if self.batch else line
        # A store in PostgreSQL has no path: its URL (without the password) says where.
        where = self.store.path or self.store.info().get("url", "the store")
        written = (
            f"{self.imported:,} records from lines before {first} were imported into "
            f"{where} (import again only into a new store: remove it first)"
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
        self._prepare()
        memories = [change for change in self.batch if change.op != "entity"]
        entities = [change for change in self.batch if change.op == "entity"]
        if memories:
            self._commit_memories(memories)
        if entities:
            # No public call writes a role's entity records as they are; this is the one the
            # roles' log medium (memcommit.roles.logmedium) writes them with.
            native = self.store.engine
            try:
                end = native.write_entities(
                    self.store.now_us(), [(change.key, change.state) for change in entities]
                )
            except (ValueError, TypeError) as error:
                raise self.fail(entities[-1].line, str(error)) from error
            native.wait_durable(end)
            self.commits += 1
        self.imported += len(self.batch)
        self.batch.clear()

    def _prepare(self) -> None:
        """Before a commit: the store knows the purged ids, and trusts sources if it may.

        The view is looked at each time: a store in PostgreSQL starts a new one (its follower)
        if it must read the store again.
        """
        if not self.marked:
            # The file's purged ids replace any an earlier import left (one killed before its
            # first commit leaves an empty store with its entry); a file of none removes it.
            self.unmark = _mark_purged(self.store, sorted(self.purged), self.source)
            self.marked = True
        view = _view(self.store)
        if self.trust and view is not None and view is not self.trusted:
            view.trust_sources(True)
            self.trusted = view

    def _commit_memories(self, changes: list[Change]) -> None:
        current = 0
        pending: dict[str, _MemoryState] = {}
        # Puts go to the commit as rows, a run at a time (the bulk path): a run ends where a
        # record must follow a put in order (its move or status change, or another op).
        rows = _Rows()
        try:
            with self.store.commit() as commit:
                for change in changes:
                    current = change.line
                    self._apply(commit, change, pending, rows)
                current = 0
                rows.flush(commit)
        except memcommit.Rejected as error:
            line = current or self._line_for(error)
            raise self.fail(line or changes[-1].line, f"refused: {error}") from error
        except (ValueError, TypeError) as error:
            row_line, problem = rows.locate(error)
            line = row_line or current or changes[-1].line
            raise self.fail(line, problem) from error
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
        self,
        commit: memcommit.Commit,
        change: Change,
        pending: dict[str, _MemoryState],
        rows: _Rows,
    ) -> None:
        key = change.key
        before = self._state(key, pending)
        if change.op == "put":
            rows.add(change)
            # A new memory starts active in the put's tier; an existing one keeps both. The
            # put says what they were: bring the memory there (after log compaction the
            # moves and status changes before this put are no longer in the log).
            tier, status = before if before is not None else (change.tier or "working", "active")
            if change.tier is not None and change.tier != tier:
                rows.flush(commit)
                commit.move(key, change.tier)
                tier = change.tier
            if change.status is not None and change.status != status:
                rows.flush(commit)
                _set_status(commit, key, change.status, None)
                status = change.status
            pending[key] = (tier, status)
            return
        rows.flush(commit)
        if change.op == "status":
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


# How a ``put_rows`` error names the row it refused: ``rows[3]: tier: ...`` (or ``rows[3]
# must be ...``).
_ROW = re.compile(r"rows\[(\d+)\](: )?")


@dataclass
class _Rows:
    """A run of an import's puts, waiting to go to the commit as rows (``put_rows``)."""

    rows: list[tuple[Any, ...]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    # The lines of the runs already handed to the commit (a refused row names its run's index).
    sent: list[list[int]] = field(default_factory=list)

    def add(self, change: Change) -> None:
        self.rows.append(
            (
                change.key,
                change.text,
                change.kind,
                change.task,
                change.tier or "working",
                change.data,
                change.tags,
                change.sources,
                change.vector,
            )
        )
        self.lines.append(change.line)

    def flush(self, commit: memcommit.Commit) -> None:
        if self.rows:
            lines, self.lines = self.lines, []
            self.sent.append(lines)
            rows, self.rows = self.rows, []
            commit.put_rows(rows)

    def locate(self, error: Exception) -> tuple[int, str]:
        """The line of the row a ``put_rows`` error names (``rows[3]: ...``), and the problem.

        The problem is the error's message without the row's index, which is its place in
        the run of puts, not in the file (the line says where it is). Without a row of the
        last run named: 0 and the message as it is.
        """
        message = str(error)
        found = _ROW.match(message)
        if not found or not self.sent:
            return 0, message
        lines = self.sent[-1]
        index = int(found.group(1))
        if index >= len(lines):
            return 0, message
        rest = message[found.end() :]
        return lines[index], rest if found.group(2) else f"the put{rest}"


def _set_status(commit: memcommit.Commit, key: str, status: str, reason: str | None) -> None:
    if status == "stale":
        commit.stale(key, reason=reason)
    else:
        commit.restore(key)


def _open_source(source: str, closing: contextlib.ExitStack) -> tuple[IO[bytes], int]:
    """Open the import source; returns it and its size (0 if unknown)."""
    if source == "-":
        stdin = sys.stdin  # None when standard input was closed (<&-)
        if stdin is None or stdin.isatty():  # nothing piped in: do not wait on the terminal
            raise CommandError(
                "no FILE given and nothing piped in: give the export file, or pipe one in "
                "(memcommit export PATH | memcommit import TARGET)"
            )
        return stdin.buffer, 0
    require_file(source, "import")
    handle = closing.enter_context(open(source, "rb"))
    return handle, os.fstat(handle.fileno()).st_size


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _view(store: memcommit.MemoryStore) -> _native.NativeLog | None:
    """The native log the store's commits run on (None: not one this process runs)."""
    engine = store.engine
    return engine.view() if isinstance(engine, LocalEngine | PostgresEngine) else None


def _mark_purged(store: memcommit.MemoryStore, ids: list[str], source: str) -> Callable[[], None]:
    """Keep `ids` in `store` as ids log compaction purged; returns what takes them out again.

    No `ids` takes out the entry of an earlier import of this generation, if there is one.

    They go in as a compaction manifest entry of the store's generation that says it came from
    an import (``imported_from``): appended to ``<log>.manifest`` for a log file, the manifest
    row of its generation for a store in PostgreSQL (each engine's ``set_import_entry``). So
    ``verify``, ``is_purged``, ``get`` and ``lineage`` treat them as the exported store did,
    now and at every later open.
    """
    engine = store.engine
    if not isinstance(engine, LocalEngine | PostgresEngine):  # import opens one of the two
        raise CommandError(f"{store!r} keeps no compaction manifest for the purged ids")
    if not ids:
        if any("imported_from" in e for e in engine.manifest()):
            engine.set_import_entry(None)
        return lambda: None
    engine.set_import_entry(
        {
            "at": (_EPOCH + timedelta(microseconds=store.now_us())).isoformat(),
            "imported_from": "<stdin>" if source == "-" else source,
            "purged": ids,
        }
    )
    return lambda: engine.set_import_entry(None)


def _check_whole_file(job: _Import, source: IO[bytes], bar: Progress, first: int = 0) -> IO[bytes]:
    """Read the whole file before anything is written; returns it to read again from the start.

    For a store in PostgreSQL, whose commits check every put's sources: after log compaction
    a memory's last put (the one exported) may come after the puts naming it, in a later
    batch, so the import trusts sources (as a log file's import does) once this check has
    found that each one is put somewhere in the file, or listed as purged. A line that
    cannot be imported is refused here too. A source that cannot be read twice (a pipe) is
    copied to a temporary file as it is read. The first `first` records are left in
    ``job.batch`` (the import's first batch, for a trial run).
    """
    start = source.tell() if source.seekable() else None
    copy = None if start is not None else tempfile.TemporaryFile()
    put: set[str] = set()
    ahead: dict[str, tuple[int, str]] = {}  # a source named before its put: (line, by)
    try:
        for number, raw in enumerate(source, start=1):
            bar.update(len(raw))
            if copy is not None:
                copy.write(raw)
            change = job.read(raw, number)
            if change is not None and len(job.batch) < first:
                job.batch.append(change)
            if change is None or change.op != "put":
                continue
            for name in change.sources:
                if name not in put and name != change.key:
                    ahead.setdefault(name, (number, change.key))
            put.add(change.key)
        for name, (number, by) in ahead.items():
            if name not in put and name not in job.purged:
                raise job.fail(
                    number,
                    f"memory {by!r} names {name!r} among its sources, but the file neither "
                    "puts a memory with that id nor lists it as purged",
                )
    except BaseException:
        if copy is not None:
            copy.close()
        raise
    job.read_records = False  # read again from the start
    if copy is None:
        assert start is not None
        source.seek(start)
        return source
    copy.seek(0)
    return copy


def _check_before_opening(
    url: str, source: str, given: IO[bytes], size: int, batch_size: int
) -> IO[bytes]:
    """Check an import into the store in PostgreSQL at `url` before the store is opened.

    The whole file is read first (:func:`_check_whole_file`): a bad line is refused before
    anything is made or written. Opening a store that does not exist makes it, so for such a
    store the first batch is also committed to a store in memory first: a line the store
    refuses (a status change of a memory never put, say) is refused before the store is made,
    and the store is made only for an import that then commits its first batch. Returns the
    file to read again from the start (a temporary copy of a pipe: the caller closes it).
    """
    first = 0 if postgres_store_exists(url) else batch_size
    with memcommit.open(":memory:", max_record_bytes=MAX_RECORD_BYTES) as trial:
        # Sources trusted and no purged ids kept, as the import into the database will be.
        job = _Import(store=trial, source=source, trust=True, marked=True)
        with Progress(size, "check", unit="bytes") as bar:
            lines = _check_whole_file(job, given, bar, first)
        try:
            job.flush()
        except BaseException:
            if lines is not given:
                lines.close()
            raise
    return lines


def _undo(job: _Import, path: str, existed: set[str], was_empty: bool) -> None:
    """Leave nothing of an import that imported nothing: its purged ids, its new files."""
    if job.unmark is not None:
        with contextlib.suppress(MemcommitError, OSError):
            job.unmark()
    _discard_new_files(path, existed, was_empty)


def _refuse_a_store_with_records(path: str, records: int, lsn: int) -> NoReturn:
    raise CommandError(
        f"{hide_password(path)} already holds {records:,} records (LSN {lsn:,}); import "
        "restores an export into a new or empty store, so nothing was written: give a path "
        "that does not exist yet"
    )


def _check_import_target(path: str) -> None:
    """Refuse a target that is not a new or empty store, before anything is created."""
    if os.path.isdir(path):
        raise CommandError(f"{path}: is a directory, not a store file")
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    report = inspect_log(path)
    if not report["header_ok"]:
        raise CommandError(not_a_log(path, report.get("header_error")))
    records = as_int(report["records"], "records")
    if records or report.get("damage_mid_log"):
        _refuse_a_store_with_records(path, records, as_int(report["lsn"], "lsn"))


def _was_empty(path: str) -> bool:
    """Whether `path` is an empty (0-byte) file, which opening the store makes a log header."""
    try:
        return os.path.getsize(path) == 0
    except OSError:  # not there (or not a file): nothing to leave as it was
        return False


def _discard_new_files(path: str, existed: set[str], was_empty: bool) -> None:
    """Leave `path` as it was before an import that wrote no record.

    Remove the files it created (the log and its lock file), and make a file that was empty
    (`was_empty`) until the open made it a log empty again. Called while the store is still
    open, so the lock is held as they go: no writer can have taken over a file that is
    removed, or written to one that is cut back to nothing.
    """
    for name in (path, lock_path(path)):
        if name not in existed:
            with contextlib.suppress(FileNotFoundError):
                os.remove(name)
    if was_empty and path in existed:
        with open(path, "r+b") as log:
            log.truncate(0)
            os.fsync(log.fileno())


def _run_import(args: argparse.Namespace) -> int:
    """Restore JSON lines written by export into a new store.

    Apply the records in FILE (JSON lines as written by 'memcommit export') to a new or empty
    store at PATH, creating it if missing: the memories with their tiers and status, the
    finished tasks and every role's entities, so that the store replays to the state that was
    exported. A store that holds records is refused. Records are committed in batches; a bad
    line stops the import and nothing of its batch is written, and if nothing was imported
    nothing is left at PATH. The store assigns new LSNs and timestamps (a memory's created_at
    is the time of its import). The ids the file lists as purged by log compaction are kept in
    the new store's compaction manifest (an entry marked imported_from), so sources naming them
    are deliberate there too. An entity line must be one its role can read back: a key of a
    known kind, a state with the fields that role reads. An import into PostgreSQL reads the
    whole file first: a bad line, or a source the file neither puts nor lists as purged, is
    refused before anything is written, and a store that does not exist is made only for an
    import whose first batch it takes (tried on a store in memory first).
    """
    path: str = args.path
    source: str = args.file
    batch_size: int = args.batch
    _check_import_target(path)
    with contextlib.ExitStack() as closing:
        given, size = _open_source(source, closing)
        lines = given
        if is_postgres_url(path):
            # Before the open, which makes the store if it does not exist.
            lines = _check_before_opening(path, source, given, size, batch_size)
            if lines is not given:  # its copy in a temporary file
                closing.enter_context(lines)
        existed = {name for name in (path, lock_path(path)) if os.path.lexists(name)}
        was_empty = _was_empty(path)
        store = closing.enter_context(memcommit.open(path, max_record_bytes=MAX_RECORD_BYTES))
        records = as_int(store.info()["records"], "records")
        if records:  # a writer committed between the check and the open: leave it be
            _refuse_a_store_with_records(path, records, store.lsn)
        first_lsn = store.lsn + 1
        # A log file's import trusts its records' sources (`verify` checks them afterwards):
        # the records come in their log's order, which log compaction may have changed, so a
        # memory's last put (the one exported) can follow the puts naming it. A store in
        # PostgreSQL trusts them once the whole file was read and each was found in it
        # (_check_before_opening).
        job = _Import(store=store, source=source, trust=True)
        try:
            with Progress(size, "import", unit="bytes") as bar:
                for number, raw in enumerate(lines, start=1):
                    bar.update(len(raw))
                    change = job.read(raw, number)
                    if change is None:
                        continue
                    job.batch.append(change)
                    if len(job.batch) >= batch_size:
                        job.flush()
                job.flush()
        except KeyboardInterrupt:
            if not job.imported:
                _undo(job, path, existed, was_empty)
                raise  # nothing was written: "interrupted" says it all
            print(
                f"memcommit import: interrupted after {job.imported:,} "
                f"record{'s were' if job.imported != 1 else ' was'} imported into "
                f"{hide_password(path)} "
                f"(LSN {first_lsn:,}..{store.lsn:,}); it holds a partial import: "
                "remove it (and its .lock, .index and .manifest files) and import again",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED
        except BaseException:
            if not job.imported:
                _undo(job, path, existed, was_empty)
            raise
        lsn = store.lsn
        if not job.imported:  # a file of no records: PATH is left as it was
            _discard_new_files(path, existed, was_empty)
    if job.imported:
        print(
            f"imported {job.imported:,} records{_purged_note(len(job.purged))} from {source} "
            f"into {hide_password(path)} "
            f"in {job.commits:,} commit{'s' if job.commits != 1 else ''} "
            f"(LSN {first_lsn:,}..{lsn:,})"
        )
    else:
        print(
            f"imported 0 records from {source}: the file holds no records, so nothing was "
            f"written to {hide_password(path)}"
        )
    return EXIT_OK
