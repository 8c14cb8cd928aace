"""``memcommit demo``: the command's options and output; the workload is :mod:`memcommit.demo`."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from memcommit import demo as demo_workload
from memcommit.cli._common import EXIT_OK, Subcommands, add_command, positive_count
from memcommit.errors import CommandError
from memcommit.postgres.dsn import hide_password, is_postgres_url


def add_commands(commands: Subcommands) -> None:
    """Add ``demo`` to the command line's subcommands."""
    demo = add_command(commands, "demo", _run_demo)
    demo.add_argument("--path", default="memory.db", help="store file (default memory.db)")
    demo.add_argument(
        "--url",
        help="run on a store in PostgreSQL instead (postgresql://...?store=NAME; a new or empty "
        "store; needs memcommit[postgres])",
    )
    demo.add_argument("--agents", type=positive_count, default=100, help="agents (default 100)")
    demo.add_argument("--tasks", type=positive_count, default=1000, help="tasks (default 1000)")
    demo.add_argument(
        "--memories", type=positive_count, default=100_000, help="memories (default 100000)"
    )
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument(
        "--durability",
        choices=sorted(demo_workload.DURABILITY_NOTES),
        default="batch",
        help="store durability mode (default batch)",
    )
    demo.add_argument(
        "--force",
        action="store_true",
        help="replace an existing file (never a log another writer has open)",
    )


def _run_demo(args: argparse.Namespace) -> int:
    """Write a realistic fleet workload to a new store.

    Create a store and run a fleet of agents on it: tasks, traces, facts, notes and episodes,
    stale/restore/move histories and guarded commits. Prints what was written and how fast.
    """
    # Each option's dest is the name of its DemoOptions field (--url is a path too).
    if args.url is not None:
        if not is_postgres_url(args.url):
            raise CommandError(f"--url {hide_password(args.url)}: not a postgresql:// URL")
        args.path, args.durability = args.url, "commit"
    fields = dataclasses.fields(demo_workload.DemoOptions)
    options = demo_workload.DemoOptions(**{f.name: getattr(args, f.name) for f in fields})
    if args.url is None and os.path.isdir(options.path):
        # Not replaced with --force either: say so at once, without suggesting it.
        raise CommandError(
            f"{options.path}: is a directory, not a store file; give --path the name of a "
            "file to write"
        )
    if args.url is None and os.path.lexists(options.path) and not options.force:
        raise CommandError(
            f"{options.path} already exists; pass --force to replace it "
            "or --path to write somewhere else"
        )
    shown = hide_password(options.path)  # a store's URL, without its password
    print(
        f"memcommit demo: {options.agents:,} agents, {options.tasks:,} tasks, "
        f"{options.memories:,} memories, seed {options.seed} -> {shown}"
    )
    print(f"durability: {demo_workload.DURABILITY_NOTES[options.durability]}")
    sys.stdout.flush()
    report = demo_workload.run_demo(options)
    # The report names the store (what it wrote, what to try next): by the URL shown.
    described = dataclasses.replace(report, options=dataclasses.replace(options, path=shown))
    print(demo_workload.format_report(described))
    if not report.reopen_matches:
        raise CommandError(
            f"{shown}: reopened with {report.reopened_memories:,} memories, "
            f"expected {options.memories:,}"
        )
    return EXIT_OK
