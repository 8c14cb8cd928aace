"""``memcommit bench compact``: time a real compaction of a copy of the user's own log.

The command copies the log (with ``cp`` and ``sync``, which is also the baseline it is
measured against), compacts the copy with the retention options given, reopens it, and
prints the figures the benchmark suite (``benches/suite``) records for its generated logs:
MB/s in and out, records/s, space reclaimed and the peak resident memory of the
compaction. The original file is only read. The figures and how they are computed live here,
so the command and the suite cannot drift apart.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import memcommit
from memcommit.cli._common import (
    EXIT_OK,
    Subcommands,
    add_store_command,
    empty_file,
    require_file,
)
from memcommit.cli.compact import add_retention_options, retention_from
from memcommit.errors import CommandError
from memcommit.storage import CompactionReport, compact

__all__ = [
    "FIGURES",
    "PeakRss",
    "add_commands",
    "compaction_figures",
    "copy_sidecars",
    "cp_sync",
]

FIGURES = (
    "seconds",
    "mb_in_per_s",
    "mb_out_per_s",
    "records_per_s",
    "records_before",
    "records_after",
    "bytes_before",
    "bytes_after",
    "reclaimed_bytes",
    "reclaimed_fraction",
    "purged",
    "peak_rss_mib",
)
"""The names of the figures of one compaction, in the order they are printed."""

SIDECARS = (".index", ".manifest")
"""The files beside a log that a copy of it takes along (its index file and manifest)."""


def compaction_figures(report: CompactionReport, peak_rss_bytes: int) -> dict[str, float]:
    """The figures of one compaction, named as in :data:`FIGURES`.

    Args:
        report: What :func:`memcommit.storage.compact` returned.
        peak_rss_bytes: The peak resident memory of the process while it compacted.
    """
    seconds = max(report.seconds, 1e-9)
    reclaimed = report.bytes_before - report.bytes_after
    return {
        "seconds": report.seconds,
        "mb_in_per_s": report.bytes_before / seconds / 1e6,
        "mb_out_per_s": report.bytes_after / seconds / 1e6,
        "records_per_s": report.before / seconds,
        "records_before": report.before,
        "records_after": report.after,
        "bytes_before": report.bytes_before,
        "bytes_after": report.bytes_after,
        "reclaimed_bytes": reclaimed,
        "reclaimed_fraction": reclaimed / report.bytes_before if report.bytes_before else 0.0,
        "purged": len(report.purged),
        "peak_rss_mib": peak_rss_bytes / 2**20,
    }


class PeakRss:
    """The peak resident memory of this process over a ``with`` block (``.bytes`` after it).

    On Linux the kernel's high-water mark is reset as the block starts (``/proc/self/
    clear_refs``), so the figure is the block's own peak, counted from what the process held
    as it started (``.start_bytes``); elsewhere, or where the reset is refused, it is the peak
    of the whole process so far (``reset`` is then False).
    """

    def __init__(self) -> None:
        self.bytes = 0
        self.start_bytes = 0
        self.reset = False

    def __enter__(self) -> PeakRss:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.reset = True
        except OSError:
            self.reset = False
        self.start_bytes = _status_bytes("VmRSS:") or 0
        return self

    def __exit__(self, *exc: object) -> None:
        peak = _status_bytes("VmHWM:")
        if peak is None:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            peak *= 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB elsewhere
        self.bytes = peak


def _status_bytes(field: str) -> int | None:
    """A size from ``/proc/self/status`` (``VmRSS:``, ``VmHWM:``), or None without one."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def cp_sync(source: str, target: str) -> float:
    """Copy `source` to `target` with ``cp``, then ``sync`` the copy; return the seconds."""
    started = time.perf_counter()
    subprocess.run(["cp", source, target], check=True)
    subprocess.run(["sync", target], check=True)
    return time.perf_counter() - started


def copy_sidecars(source: str, target: str) -> None:
    """Copy the files of :data:`SIDECARS` that the log `source` has to beside `target`."""
    for suffix in SIDECARS:
        if os.path.exists(source + suffix):
            shutil.copyfile(source + suffix, target + suffix)


def add_commands(commands: Subcommands) -> None:
    """Add ``bench`` (with its subcommand ``compact``) to the command line's subcommands."""
    bench = commands.add_parser(
        "bench",
        help="time memcommit on your own data (bench compact PATH)",
        description="Time memcommit on your own data; the original files are only read.",
    )
    kinds = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    compact_cmd = add_store_command(kinds, "compact", _run_compact)
    add_retention_options(compact_cmd)
    compact_cmd.add_argument(
        "--dir",
        metavar="DIR",
        help="where to put the copy (default: a new directory beside PATH, on its disk)",
    )
    compact_cmd.add_argument("--json", action="store_true", help="print the figures as JSON")


@contextmanager
def _scratch(path: str, parent: str | None) -> Iterator[str]:
    """A new directory for the copy of `path`, removed afterwards."""
    where = parent if parent is not None else os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(where):
        if os.path.exists(where):
            raise CommandError(
                f"{where}: not a directory; give --dir the directory to put the copy of {path} in"
            )
        raise CommandError(f"{where}: no such directory for the copy")
    try:
        scratch = tempfile.mkdtemp(prefix=".memcommit-bench-", dir=where)
    except OSError as error:
        raise CommandError(
            f"{where}: cannot make a directory for the copy of {path} ({error.strerror}); "
            "pass --dir DIR"
        ) from error
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _open_copy(path: str, copy: str) -> memcommit.MemoryStore:
    """Open the copy as its writer; an error names the original, the file the user gave."""
    try:
        return memcommit.open(copy)
    except memcommit.MemcommitError as error:
        message = str(error).replace(copy, path)
        raise CommandError(message if path in message else f"{path}: {message}") from error


def _run_compact(args: argparse.Namespace) -> int:
    """Time a compaction of a copy of the log at PATH.

    Copy the log at PATH (cp and sync, the baseline), compact the copy with the retention
    options given, reopen it, and print the figures the benchmark suite records: MB/s in and
    out, records/s, space reclaimed, peak RSS. PATH is only read; the copy is removed
    afterwards. Ages: 30d, 12h, 45m, 90s or seconds.
    """
    path: str = args.path
    require_file(path, "log")
    size = os.path.getsize(path)
    if size == 0:
        raise CommandError(f"{empty_file(path)}; there is nothing to compact")
    retention = retention_from(args)
    with _scratch(path, args.dir) as scratch:
        copy = os.path.join(scratch, os.path.basename(path))
        with open(path, "rb") as f:  # read it once, so cp and compact both find it cached
            while f.read(1 << 24):
                pass
        cp_seconds = cp_sync(path, copy)
        copy_sidecars(path, copy)
        started = time.perf_counter()
        store = _open_copy(path, copy)
        try:
            open_seconds = time.perf_counter() - started
            # A writer hashes its log from the open on; a running store's chain is current,
            # so the compaction is timed after it caught up.
            store.engine.view().chain_hex()
            with PeakRss() as rss:
                report = compact(store, retention=retention)
        finally:
            store.close()
        started = time.perf_counter()
        with memcommit.open(copy, read_only=True) as reopened:
            reopened.get("memcommit-bench-no-such-id")
        reopen_seconds = time.perf_counter() - started
    figures = compaction_figures(report, rss.bytes)
    extra = {
        "cp_sync_seconds": cp_seconds,
        "cp_sync_mb_per_s": size / max(cp_seconds, 1e-9) / 1e6,
        "vs_cp_sync": report.seconds / max(cp_seconds, 1e-9),
        "open_seconds": open_seconds,
        "reopen_seconds": reopen_seconds,
    }
    if args.json:
        print(json.dumps({"path": path, **figures, **extra}, indent=2))
        return EXIT_OK
    print(f"memcommit bench compact: {path} (a copy; the file itself is unchanged)")
    print(f"cp + sync: {cp_seconds:.3f} s, {extra['cp_sync_mb_per_s']:.1f} MB/s")
    print(f"open: {open_seconds:.3f} s")
    print(f"compact: {report.seconds:.3f} s, {extra['vs_cp_sync']:.2f}x the time of cp + sync")
    print(f"records: {report.before} -> {report.after} ({figures['records_per_s']:.0f}/s)")
    print(f"bytes: {report.bytes_before} -> {report.bytes_after}")
    print(f"MB/s in: {figures['mb_in_per_s']:.1f}, out: {figures['mb_out_per_s']:.1f}")
    print(
        f"reclaimed: {report.bytes_before - report.bytes_after} bytes "
        f"({figures['reclaimed_fraction']:.1%}), purged: {len(report.purged)} memories"
    )
    print(f"peak RSS: {figures['peak_rss_mib']:.1f} MiB" + ("" if rss.reset else " (process)"))
    print(f"reopen: {reopen_seconds:.3f} s")
    return EXIT_OK
