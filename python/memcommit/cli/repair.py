"""``memcommit repair``: show a damaged log's damage and cut it, keeping a backup."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import NoReturn

import memcommit
from memcommit import _native
from memcommit.cli._common import (
    EXIT_OK,
    Subcommands,
    add_store_command,
    as_int,
    damage_at,
    empty_file,
    inspect_log,
    not_a_log,
    require_file,
)
from memcommit.errors import CommandError
from memcommit.files import WriterHolds, holding_writer_locks
from memcommit.postgres.dsn import is_postgres_url, parse


def add_commands(commands: Subcommands) -> None:
    """Add ``repair`` to the command line's subcommands."""
    repair = add_store_command(commands, "repair", _run_repair)
    repair.add_argument(
        "--yes", action="store_true", help="back up and cut without asking for confirmation"
    )


@contextlib.contextmanager
def _no_writer(path: str) -> Iterator[None]:
    """Hold the writer's locks of `path` for the block, or refuse at once naming the one held.

    Both locks a writer takes, under any name of the log: the lock file of the file a symbolic
    link names, and the log file's own lock, which a writer that opened it as a hard link (or
    under the link's target name) holds too. Creates nothing: without a lock file, no writer
    opened the log under that name. Where ``flock`` is not available the block runs unguarded
    (the core's truncate still refuses a held lock).
    """
    try:
        with holding_writer_locks(path):
            yield
    except WriterHolds as held:
        raise CommandError(
            f"{path} is open for writing by another process ({held}): repair checked nothing "
            "and changed nothing; close the writer and run repair again"
        ) from None


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
    stdin, stdout = sys.stdin, sys.stdout  # None where the stream was closed (<&-, >&-)
    if stdin is None or stdout is None or not (stdin.isatty() and stdout.isatty()):
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


def _refuse_a_database(url: str) -> NoReturn:
    """Refuse the store in PostgreSQL at `url`, named without its password: no tail to cut."""
    try:
        target = parse(url)
        where = f"{target.shown} (store {target.store!r})"
    except ValueError:  # not a store's URL either: name it without echoing a password
        where = "a postgresql:// URL"
    raise CommandError(
        f"{where}: repair applies to store files only; a store in PostgreSQL has no torn tail "
        "to cut (each commit is one transaction, there whole or not at all): check it with "
        "'memcommit verify URL'"
    )


def _run_repair(args: argparse.Namespace) -> int:
    """Check a log and cut a damaged tail, keeping a backup.

    Check the log without opening the store; refused while a writer has it open. Zeros after the
    last commit are free space a writer wrote ahead, not damage. If a record is damaged, show
    where, and (with --yes, or after typing 'yes' on a terminal) copy the file to PATH.bak-<UTC
    time> and cut the log after its last good commit.
    """
    path: str = args.path
    if is_postgres_url(path):
        _refuse_a_database(path)
    require_file(path)
    # The writer lock first: a live writer's tail is a commit in flight or the zeros it
    # wrote ahead, never damage to report or cut. Held until the backup is made, so no
    # writer starts under the check.
    with _no_writer(path):
        size = os.path.getsize(path)
        if size == 0:
            print(f"{path}: nothing to repair: {empty_file(path)}")
            return EXIT_OK
        report = inspect_log(path)
        if not report["header_ok"]:
            raise CommandError(not_a_log(path, report.get("header_error")))
        records = as_int(report["records"], "records")
        lsn = as_int(report["lsn"], "lsn")
        good_end = as_int(report["good_end"], "good_end")
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
        offset = good_end if damage_offset is None else as_int(damage_offset, "damage_offset")
        reason = report.get("damage_reason")
        because = f": {reason}" if reason else ""
        if mid_log:
            print(damage_at(path, report))
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

    try:
        # Cut only what was inspected and backed up: the length is checked under the lock.
        _native.truncate_log(path, good_end, size)
    except ValueError as error:
        os.remove(backup)
        raise CommandError(
            f"{path} changed while repair ran (a writer opened it?), so nothing was cut and "
            "the backup was removed; run repair again"
        ) from error
    except memcommit.StoreLocked as error:
        # A writer opened the log after the check: what looked damaged may be its commit.
        os.remove(backup)
        raise CommandError(
            f"{path} is open for writing by another process, so nothing was cut and the "
            f"backup was removed; close the writer and run repair again ({error})"
        ) from error
    after = inspect_log(path)
    if after.get("damage_offset") is not None:
        raise CommandError(f"{path}: still damaged after the cut; the original is in {backup}")
    print(
        f"cut {cut:,} bytes from {path}: it now holds "
        f"{as_int(after['records'], 'records'):,} records up to LSN "
        f"{as_int(after['lsn'], 'lsn'):,} ({os.path.getsize(path):,} bytes)"
    )
    return EXIT_OK
