"""``memcommit seal`` and ``memcommit verify``: write the hash chain, and check it."""

from __future__ import annotations

import argparse

import memcommit
from memcommit import _native
from memcommit.cli._common import (
    EXIT_OK,
    Subcommands,
    add_store_command,
    as_int,
    open_read_only,
    open_writer,
    progress_to,
    require_file,
)
from memcommit.errors import CommandError
from memcommit.postgres.dsn import hide_password, is_postgres_url
from memcommit.progress import Progress

# A log's header, the first bytes of its file and of a store's bytes in PostgreSQL (the format's
# HEADER_LEN, docs/format.md): counted in info()'s bytes, but not in verify's progress.
_LOG_HEADER_BYTES = 64


def add_commands(commands: Subcommands) -> None:
    """Add ``seal`` and ``verify`` to the command line's subcommands."""
    seal_cmd = add_store_command(commands, "seal", _run_seal)
    seal_cmd.add_argument(
        "--key-file",
        metavar="F",
        help="make a keyed seal with the secret in F (its bytes exactly as they are)",
    )
    verify_cmd = add_store_command(commands, "verify", _run_verify)
    verify_cmd.add_argument("--key-file", metavar="F", help="the secret of keyed seals")
    verify_cmd.add_argument(
        "--anchor",
        metavar="FILE",
        action="append",
        default=[],
        help="a seal written by 'memcommit seal' that the log must still hold (repeatable)",
    )


def _read_key(path: str | None) -> bytes | None:
    if path is None:
        return None
    require_file(path, "key")
    with open(path, "rb") as f:
        key = f.read()
    if not key:
        raise CommandError(f"{path}: the key file is empty")
    return key


def _run_seal(args: argparse.Namespace) -> int:
    """Write a seal (the hash chain up to now) into the log.

    Seal the store: write the blake3 hash chain over every record into the log. Prints the seal
    as one JSON object, an anchor to keep elsewhere for 'memcommit verify --anchor'.
    """
    path: str = args.path
    key = _read_key(args.key_file)
    with open_writer(path) as store:
        sealed = memcommit.seal(store, key=key)
    print(sealed.to_json())
    return EXIT_OK


def _run_verify(args: argparse.Namespace) -> int:
    """Recompute the hash chain and check every seal and reference.

    Recompute the hash chain over the whole log, check every seal (keyed ones with --key-file),
    every anchor given, and that every memory's sources exist. Exits 0 when everything checks
    and 1 on the first difference, saying where.
    """
    path: str = args.path
    key = _read_key(args.key_file)
    anchors = []
    for anchor in args.anchor:
        require_file(anchor, "anchor")
        with open(anchor, encoding="utf-8") as f:
            try:
                anchors.append(memcommit.Seal.from_json(f.read()))
            except ValueError as error:
                raise CommandError(f"{anchor}: {error}") from None
    try:
        opened = open_read_only(path, "verify")
    except memcommit.CorruptLog:
        # A record that does not apply behind a valid checksum: an edit a seal may cover. The
        # seals, checked against the bytes without replaying them, say which (SealMismatch).
        if not is_postgres_url(path):
            _native.check_log_seals(path, key)
        raise
    with opened as store:
        # What verify reads and reports as done: the records, after the header (checked when
        # the store was opened), so that the bar's last count is its total.
        total = max(as_int(store.info()["bytes"], "bytes") - _LOG_HEADER_BYTES, 0)
        with Progress(total, "verify", unit="bytes") as bar:
            report = memcommit.verify(store, key=key, anchors=anchors, progress=progress_to(bar))
    print(f"ok: {hide_password(path)}")
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
