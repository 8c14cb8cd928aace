"""``memcommit compact`` and ``memcommit snapshot``: rewrite the log, or save its state."""

from __future__ import annotations

import argparse
import os
import sys
import time

import memcommit
from memcommit.cli._common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    Subcommands,
    add_store_command,
    as_int,
    check_out_file,
    open_read_only,
    open_writer,
    progress_to,
    require_file,
    writing_error,
)
from memcommit.errors import CommandError
from memcommit.manifest import ManifestEntry, read_manifest
from memcommit.postgres.dsn import hide_password, is_postgres_url
from memcommit.progress import Progress
from memcommit.storage import (
    ArchivedOlderThan,
    CompactionReport,
    KindsAfter,
    RetentionPolicy,
    compact,
)

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


def add_retention_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--archived-older-than`` and ``--kinds-after`` (read by :func:`retention_from`)."""
    parser.add_argument(
        "--archived-older-than",
        metavar="AGE",
        type=_age,
        help="purge archived memories whose last move is at least AGE old",
    )
    parser.add_argument(
        "--kinds-after",
        metavar="KIND=AGE",
        action="append",
        default=[],
        type=_kind_age,
        help="purge memories of KIND created at least AGE ago (repeatable)",
    )


def retention_from(args: argparse.Namespace) -> RetentionPolicy | None:
    """The retention policy the options of :func:`add_retention_options` name, if any."""
    policies: list[RetentionPolicy] = []
    if args.archived_older_than is not None:
        policies.append(ArchivedOlderThan(seconds=args.archived_older_than))
    # A kind named twice is purged at the shorter age, as policies joined with `|` are.
    policies.extend(KindsAfter({kind: age}) for kind, age in args.kinds_after)
    retention: RetentionPolicy | None = None
    for p in policies:
        retention = p if retention is None else retention | p
    return retention


def add_commands(commands: Subcommands) -> None:
    """Add ``compact`` and ``snapshot`` to the command line's subcommands."""
    compact_cmd = add_store_command(commands, "compact", _run_compact)
    add_retention_options(compact_cmd)
    compact_cmd.add_argument("--horizon", metavar="LSN", type=_lsn, help="fold history up to LSN")
    compact_cmd.add_argument(
        "--dry-run",
        action="store_true",
        help="report what would be kept, purged and reclaimed; write nothing",
    )
    snapshot_cmd = add_store_command(commands, "snapshot", _run_snapshot)
    snapshot_cmd.add_argument("out", metavar="OUT", help="the snapshot file to write")


def _lsn(text: str) -> int:
    """An argument type: an LSN, a whole number >= 0 (``--horizon``)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: an LSN is a whole number >= 0")
    return value


def _run_compact(args: argparse.Namespace) -> int:
    """Rewrite the log into what replay needs, purging what retention names.

    Compact the log: up to the horizon (default the newest LSN) keep only the records replay
    needs, keep every later record as it is, and purge the memories the retention options name
    that have no record after the horizon. The compaction manifest (PATH.manifest, or the
    manifest table of a store in PostgreSQL: PATH may be its URL) records what was done. Ages:
    30d, 12h, 45m, 90s or seconds. With --dry-run, only report what it would keep, purge and
    reclaim, and how long finding out took: the log is opened read-only (beside a running
    writer too) and nothing is written.
    """
    path: str = args.path
    horizon: int | None = args.horizon
    dry_run: bool = args.dry_run
    if not is_postgres_url(path):
        require_file(path)
        if horizon and os.path.getsize(path) == 0:  # refused before a writer makes it a log
            raise CommandError(
                f"--horizon {horizon}: must be between 0 and the newest LSN 0 ({path} is "
                "an empty file)"
            )
        if horizon and not dry_run:
            # Checked read-only first, as --dry-run opens the log: a writer's open makes the
            # lock file, and a refused command creates nothing. (LSNs only grow, so a horizon
            # in range now is in range for the writer too; it checks again all the same.)
            with open_read_only(path, "compact") as reader:
                _check_horizon(horizon, reader.lsn)
    retention = retention_from(args)
    opened = open_read_only(path, "compact") if dry_run else open_writer(path)
    report: CompactionReport | None = None
    generation: int | None = None
    log: str | None = None
    started = time.perf_counter()
    try:
        with opened as store:
            if horizon is not None:
                _check_horizon(horizon, store.lsn)
            total = as_int(store.info()["bytes"], "bytes")
            generation = store.generation
            log = None if is_postgres_url(path) else store.path
            started = time.perf_counter()
            with Progress(total, "compact", unit="bytes") as bar:
                report = compact(
                    store,
                    retention=retention,
                    horizon=horizon,
                    progress=progress_to(bar),
                    dry_run=dry_run,
                )
    except KeyboardInterrupt:
        if report is None and generation is not None and not dry_run:
            # Ctrl-C inside the compaction, after the new log may have replaced the old one
            # (the core checks for it at each step, the last one after the swap): what the
            # log is now says whether it did, and the manifest what it did.
            report = _stood(path, log, generation, time.perf_counter() - started)
        if report is None:
            raise  # stopped before the new log replaced the old: the old is as it was
        # The new log replaced the old one before the interrupt: the compaction stands.
        _print_report(path, report, dry_run)
        print(
            f"memcommit compact: interrupted after {hide_password(path)} was compacted (the "
            "compaction stands; its index file is written again at the next open if it was "
            "not now)",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    _print_report(path, report, dry_run)
    return EXIT_OK


def _check_horizon(horizon: int, lsn: int) -> None:
    if not 0 <= horizon <= lsn:
        raise CommandError(f"--horizon {horizon}: must be between 0 and the newest LSN {lsn}")


def _stood(path: str, log: str | None, generation: int, seconds: float) -> CompactionReport | None:
    """What the compaction an interrupt cut short did, if its new log replaced the old one.

    The report of the compaction of `path` (the log file `log`, None in PostgreSQL) from
    `generation` (None: the old log is as it was), read from the log as it is now and from its
    manifest, whose entry for the new generation (written before the swap) holds the report's
    counts. Without that entry there was no swap, and the log is not opened again.
    """
    done = generation + 1
    if log is not None:
        try:
            entries = read_manifest(log, None)
        except (OSError, memcommit.MemcommitError):
            entries = None  # unreadable: the log says
        if entries is not None and not any(_is_report_of(e, done) for e in entries):
            return None
    with memcommit.open(path, read_only=True) as store:
        if store.generation <= generation:
            return None
        entry = next((e for e in reversed(store.manifest()) if _is_report_of(e, done)), None)
    if entry is None:
        return None
    return CompactionReport(
        before=int(entry["before"]),
        after=int(entry["after"]),
        purged=tuple(entry.get("purged", ())),
        horizon=int(entry["horizon"]),
        bytes_before=int(entry["bytes_before"]),
        bytes_after=int(entry["bytes_after"]),
        seconds=seconds,
        generation=done,
        dry_run=False,
    )


def _is_report_of(entry: ManifestEntry, generation: int) -> bool:
    """Whether manifest `entry` is a compaction's that made `generation` (not an import's)."""
    return entry.get("generation") == generation and "before" in entry


def _print_report(path: str, report: CompactionReport, dry_run: bool) -> None:
    shown = hide_password(path)  # a store's URL, without its password
    if dry_run:
        print(f"dry run: {shown} (nothing written; would make generation {report.generation})")
    else:
        print(f"compacted: {shown} (generation {report.generation})")
    print(f"records: {report.before} -> {report.after}")
    print(f"bytes: {report.bytes_before} -> {report.bytes_after}")
    print(f"horizon: {report.horizon}")
    print(f"purged: {len(report.purged)}")
    print(f"seconds: {report.seconds:.3f}")


def _run_snapshot(args: argparse.Namespace) -> int:
    """Write the store's state as JSON, to open it quickly later.

    Write a snapshot of the store at PATH to OUT (atomically): its state as JSON with the LSN,
    log generation and chain hash it covers. memcommit.open(PATH, snapshot=OUT) then replays
    only the records after it.
    """
    path: str = args.path
    out: str = args.out
    check_out_file(out, "", path)
    with open_read_only(path, "snapshot") as store:
        try:
            store.save_snapshot(out)
        except OSError as error:
            raise writing_error(out, error) from error
        lsn, generation, memories = store.lsn, store.generation, len(store)
    size = os.path.getsize(out)
    print(f"snapshot: {out} ({size} bytes)")
    print(f"lsn: {lsn}")
    print(f"generation: {generation}")
    print(f"memories: {memories}")
    return EXIT_OK
