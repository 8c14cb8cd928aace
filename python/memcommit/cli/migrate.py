"""``memcommit migrate URL``: create or upgrade memcommit's tables in a PostgreSQL database."""

from __future__ import annotations

import argparse

from memcommit._extras import require
from memcommit.cli._common import EXIT_FAILURE, EXIT_OK, Subcommands, add_command
from memcommit.errors import CommandError
from memcommit.postgres.dsn import hide_password, is_postgres_url, parse


def add_commands(commands: Subcommands) -> None:
    """Add ``migrate`` to the command line's subcommands."""
    migrate = add_command(commands, "migrate", _run_migrate)
    migrate.add_argument("url", metavar="URL", help="postgresql://... (schema= picks the schema)")
    migrate.add_argument(
        "--check",
        action="store_true",
        help="change nothing: exit 1 if the schema needs migrations, 0 if it is up to date",
    )


def _run_migrate(args: argparse.Namespace) -> int:
    """Create or upgrade memcommit's tables in a PostgreSQL database.

    Apply the migrations the schema (memcommit, or the URL's schema=) still needs, in one
    transaction under an advisory lock, so hosts running it at once apply each exactly once;
    a schema that is up to date is left as it is. memcommit.open runs it too, unless the URL
    says migrate=false. With --check nothing is changed: the exit code says whether any
    migration is pending.
    """
    url: str = args.url
    if not is_postgres_url(url):
        raise CommandError(f"{hide_password(url)}: not a postgresql:// URL")
    require("postgres")
    import psycopg

    from memcommit.postgres import schema

    try:
        target = parse(url)
    except ValueError as e:
        raise CommandError(str(e), 2) from None
    try:
        with psycopg.connect(target.conninfo, prepare_threshold=None, connect_timeout=10) as conn:
            if args.check:
                todo = schema.pending(conn, target.schema)
                conn.rollback()
                if todo:
                    print(f"{target.shown}: schema {target.schema} needs migrations {todo}")
                    return EXIT_FAILURE
                print(f"{target.shown}: schema {target.schema} is up to date ({schema.VERSION})")
                return EXIT_OK
            applied = schema.migrate(conn, target.schema)
    except psycopg.Error as e:
        raise CommandError(
            f"{target.shown}: the PostgreSQL server cannot be used ({str(e).strip()}); check "
            "that it is running and that the URL's host, port, user and database are right"
        ) from None
    if applied:
        print(f"{target.shown}: schema {target.schema}: applied migrations {applied}")
    else:
        print(f"{target.shown}: schema {target.schema} is up to date ({schema.VERSION})")
    return EXIT_OK
