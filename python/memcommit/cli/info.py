"""``memcommit info``: what a store holds, as ``key: value`` lines or one JSON object."""

from __future__ import annotations

import argparse
import json

from memcommit.cli._common import EXIT_OK, Subcommands, add_store_command, open_read_only

_INFO_ORDER = (
    "path",
    "url",
    "store",
    "schema",
    "records",
    "lsn",
    "bytes",
    "generation",
    "store_id",
    "memories",
    "seals",
    "last_seal",
)


def add_commands(commands: Subcommands) -> None:
    """Add ``info`` to the command line's subcommands."""
    info = add_store_command(commands, "info", _run_info)
    info.add_argument("--json", action="store_true", help="print one JSON object instead")


def _run_info(args: argparse.Namespace) -> int:
    """Show records, LSN, size, generation and memories of a store.

    Open the store read-only and print what it holds as 'key: value' lines.
    """
    path: str = args.path
    with open_read_only(path, "show") as store:
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
    if info.get("path") is None:
        # A store in PostgreSQL has no file: its url (without the password), store and schema
        # say where it is.
        info.pop("path", None)
    ordered = [key for key in _INFO_ORDER if key in info]
    ordered += sorted(key for key in info if key not in _INFO_ORDER)
    for key in ordered:
        print(f"{key}: {info[key]}")
    return EXIT_OK
