"""memcommit's tables in PostgreSQL, and the migrations that make them.

One schema (``memcommit`` unless the URL says ``schema=``) holds every store of a database:

* ``stores``: one row per store: its name and its 64-byte log header (store id, salt, format),
  the same header a log file starts with.
* ``records``: the store's log, one row per commit (or run of commits written together): the
  records' bytes exactly as a log file frames them, so the same Rust code that replays a file
  checks and applies them; the first and last LSN they hold, and the commit id of the writer
  that wrote them (unique per store: how a writer whose COMMIT reply was lost finds out whether
  it was applied). Since version 4 it is partitioned by store: each store's rows are a table of
  their own (:func:`partition`), made with the store, which log compaction replaces whole (a
  new table filled, swapped in, the old one dropped: no dead rows left behind).
* ``manifest``: one row per log compaction of a store (version 2): what it kept, purged and
  the old generation's chain, as the JSON entry a log file's manifest holds.
* ``section_begin(store, lock_key, lsn, page)`` (version 3): a write's first round trip. It
  takes the store's advisory lock (transaction-scoped), then reads the database's clock and the
  store's generation and rows from the one ending at LSN `lsn`, each by a statement of its own,
  so with a snapshot taken once the lock is held: it sees every commit made before.
* ``schema_version``: the migrations applied.

A store's row also holds its generation (version 2), which log compaction bumps in the
transaction that replaces the store's records, so a reader knows to start again.

Every transaction memcommit runs is ``READ COMMITTED`` (:data:`BEGIN`, :func:`transaction`),
whatever the database's or the role's ``default_transaction_isolation``: each one takes an
advisory lock, then reads what was committed before the lock was granted.

:func:`migrate` is idempotent and takes an advisory lock, so several hosts opening the same
database at once apply each migration exactly once.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from typing import Any

__all__ = [
    "BEGIN",
    "VERSION",
    "migrate",
    "partition",
    "partitions",
    "pending",
    "quoted",
    "transaction",
]

VERSION = 4
"""The schema version this package writes and reads."""

_MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE TABLE IF NOT EXISTS {s}.stores ("
        " name text PRIMARY KEY,"
        " header bytea NOT NULL,"
        " created_at timestamptz NOT NULL DEFAULT now())",
        "CREATE TABLE IF NOT EXISTS {s}.records ("
        " store text NOT NULL REFERENCES {s}.stores (name),"
        " first_lsn bigint NOT NULL,"
        " last_lsn bigint NOT NULL,"
        " bytes bytea NOT NULL,"
        " commit_id text,"
        " PRIMARY KEY (store, last_lsn))",
        "CREATE UNIQUE INDEX IF NOT EXISTS records_commit_id"
        " ON {s}.records (store, commit_id) WHERE commit_id IS NOT NULL",
    ],
    2: [
        "ALTER TABLE {s}.stores ADD COLUMN IF NOT EXISTS generation bigint NOT NULL DEFAULT 0",
        "CREATE TABLE IF NOT EXISTS {s}.manifest ("
        " store text NOT NULL REFERENCES {s}.stores (name),"
        " generation bigint NOT NULL,"
        " entry jsonb NOT NULL,"
        " PRIMARY KEY (store, generation))",
    ],
    3: [
        "CREATE OR REPLACE FUNCTION {s}.section_begin("
        " p_store text, p_key text, p_lsn bigint, p_page integer)"
        " RETURNS TABLE (now_us bigint, generation bigint, last_lsn bigint, bytes bytea)"
        " LANGUAGE plpgsql VOLATILE AS $$"
        " DECLARE t bigint;"
        " BEGIN"
        "  PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 0));"
        "  t := (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;"
        "  RETURN QUERY SELECT t, s.generation, r.last_lsn, r.bytes FROM {s}.stores s"
        "   LEFT JOIN LATERAL (SELECT x.last_lsn, x.bytes FROM {s}.records x"
        "    WHERE x.store = s.name AND x.last_lsn >= p_lsn ORDER BY x.last_lsn LIMIT p_page) r"
        "   ON true WHERE s.name = p_store;"
        " END $$",
    ],
    4: [
        "ALTER TABLE {s}.records RENAME TO records_v3",
        "ALTER INDEX {s}.records_pkey RENAME TO records_v3_pkey",
        "ALTER INDEX {s}.records_commit_id RENAME TO records_v3_commit_id",
        "CREATE TABLE {s}.records ("
        " store text NOT NULL REFERENCES {s}.stores (name),"
        " first_lsn bigint NOT NULL,"
        " last_lsn bigint NOT NULL,"
        " bytes bytea NOT NULL,"
        " commit_id text,"
        " PRIMARY KEY (store, last_lsn)) PARTITION BY LIST (store)",
        "CREATE UNIQUE INDEX records_commit_id ON {s}.records (store, commit_id)",
        "DO $$ DECLARE r record; BEGIN"
        " FOR r IN SELECT name, generation FROM {s}.stores LOOP"
        "  EXECUTE format('CREATE TABLE {s}.%I PARTITION OF {s}.records FOR VALUES IN (%L)',"
        "   'records_' || left(md5(r.name), 16) || '_g' || r.generation, r.name);"
        " END LOOP; END $$",
        "INSERT INTO {s}.records SELECT store, first_lsn, last_lsn, bytes, commit_id"
        " FROM {s}.records_v3",
        "DROP TABLE {s}.records_v3",
    ],
}


BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
"""How a transaction of memcommit's begins, whatever the database's or role's default level.

Its statements after an advisory lock must see the commits made before the lock was granted:
a ``REPEATABLE READ`` (or ``SERIALIZABLE``) transaction's snapshot is taken at its first
statement, the one that waits for the lock, so it would miss the previous holder's commit (a
catch-up that misses records, LSNs given twice)."""


@contextlib.contextmanager
def transaction(conn: Any) -> Iterator[None]:
    """``conn.transaction()`` at ``READ COMMITTED`` (see :data:`BEGIN`).

    psycopg begins it at the connection's level, the database's default unless the caller
    set one; ``SET TRANSACTION`` before its first statement makes it ours.
    """
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        yield


def partition(store: str, generation: int) -> str:
    """The name of the table that holds generation `generation` of `store`'s records."""
    return f"{partitions(store)}{generation}"


def partitions(store: str) -> str:
    """What the names of the tables of `store`'s records begin with, whatever the generation."""
    digest = hashlib.md5(store.encode(), usedforsecurity=False).hexdigest()[:16]
    return f"records_{digest}_g"  # as version 4's migration names them in SQL


def quoted(schema: str) -> str:
    """`schema` as an SQL identifier: in double quotes, so its case is kept.

    ``TeamA`` unquoted is ``teama``, in a statement and in a name ``to_regclass`` reads alike.
    """
    return '"' + schema.replace('"', '""') + '"'


def _lock_key(schema: str) -> str:
    return f"memcommit.migrate.{schema}"


def pending(conn: Any, schema: str, upto: int = VERSION) -> list[int]:
    """The migrations `schema` still needs (every one when it does not exist), up to `upto`."""
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass(%s)", (f"{quoted(schema)}.schema_version",))
        row = cur.fetchone()
        if row is None or row[0] is None:
            return [v for v in sorted(_MIGRATIONS) if v <= upto]
        cur.execute(f"SELECT coalesce(max(v), 0) FROM {quoted(schema)}.schema_version")
        done = cur.fetchone()
    applied = int(done[0]) if done else 0
    if applied > VERSION:
        raise RuntimeError(
            f"schema {schema}: version {applied} was written by a newer memcommit (this one "
            f"knows up to {VERSION}); upgrade memcommit"
        )
    return [v for v in sorted(_MIGRATIONS) if applied < v <= upto]


def migrate(conn: Any, schema: str, upto: int = VERSION) -> list[int]:
    """Apply the migrations `schema` needs, in one transaction under an advisory lock.

    Returns the versions applied (none when it was up to date). `upto`: stop at that version
    (what an upgrade test builds an older schema with).
    """
    with transaction(conn):
        with conn.cursor() as cur:
            cur.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (_lock_key(schema),)
            )
            todo = pending(conn, schema, upto)
            if not todo:
                return []
            name = quoted(schema)
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {name}")
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {name}.schema_version ("
                " v integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for version in todo:
                for statement in _MIGRATIONS[version]:
                    cur.execute(statement.format(s=name))
                cur.execute(f"INSERT INTO {name}.schema_version (v) VALUES (%s)", (version,))
    return todo
