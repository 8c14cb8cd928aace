"""The key-value contenders of the batch, durable, open and get figures, behind one interface.

Each contender stores the records of ``benches/_peers.py`` (``(id, kind, task, text)``) as
durably as it can: memcommit with ``durability="commit"``, SQLite in WAL mode with
``synchronous=FULL``, LMDB with ``sync=True`` and ``metasync=True``, RocksDB with synced
writes. A contender whose library does not import is listed with the reason, and its
benchmarks are skipped.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import _peers
import memcommit
from _peers import Record


class Contender(Protocol):
    """An open store of one contender (a directory of its own)."""

    def put_batch(self, records: Sequence[Record]) -> None:
        """Write every record in one transaction, durable when this returns."""

    def put_durable(self, record: Record) -> None:
        """Write one record as its own durable transaction."""

    def get(self, rid: str) -> object:
        """Read the record with id `rid` (None when there is none)."""

    def close(self) -> None:
        """Close the store."""


class Memcommit:
    """memcommit, ``durability="commit"``: a batch is one ``put_many`` in one commit."""

    def __init__(self, directory: str, records: int) -> None:
        self.store = memcommit.open(os.path.join(directory, "memory.db"), durability="commit")

    def put_batch(self, records: Sequence[Record]) -> None:
        with self.store.commit() as c:
            c.put_many(
                [r[3] for r in records],
                ids=[r[0] for r in records],
                kind=[r[1] for r in records],
                task=[r[2] for r in records],
            )

    def put_durable(self, record: Record) -> None:
        rid, kind, task, text = record
        self.store.put(text, kind=kind, id=rid, task=task)

    def get(self, rid: str) -> object:
        return self.store.get(rid)

    def close(self) -> None:
        self.store.close()


class Sqlite:
    """SQLite, WAL, ``synchronous=FULL``: a batch is one ``executemany`` in one transaction."""

    INSERT = "INSERT OR REPLACE INTO memories (id, kind, task, text) VALUES (?, ?, ?, ?)"

    def __init__(self, directory: str, records: int) -> None:
        self.con: sqlite3.Connection = _peers.sqlite_create(os.path.join(directory, "sqlite.db"))

    def put_batch(self, records: Sequence[Record]) -> None:
        self.con.execute("BEGIN")
        self.con.executemany(self.INSERT, records)
        self.con.execute("COMMIT")

    def put_durable(self, record: Record) -> None:
        self.con.execute(self.INSERT, record)

    def get(self, rid: str) -> object:
        return self.con.execute("SELECT * FROM memories WHERE id = ?", (rid,)).fetchone()

    def close(self) -> None:
        self.con.close()


class Lmdb:
    """LMDB, ``sync=True``: a batch is one write transaction of ``putmulti``."""

    def __init__(self, directory: str, records: int) -> None:
        self.env = _peers.lmdb_env(os.path.join(directory, "lmdb"), max(records, 1))

    def put_batch(self, records: Sequence[Record]) -> None:
        with self.env.begin(write=True) as txn:
            txn.cursor().putmulti(
                (rid.encode(), _peers.lmdb_value(kind, task, text))
                for rid, kind, task, text in records
            )

    def put_durable(self, record: Record) -> None:
        rid, kind, task, text = record
        with self.env.begin(write=True) as txn:
            txn.put(rid.encode(), _peers.lmdb_value(kind, task, text))

    def get(self, rid: str) -> object:
        with self.env.begin() as txn:
            return txn.get(rid.encode())

    def close(self) -> None:
        self.env.close()


class Rocksdb:
    """RocksDB through ``rocksdict``, synced writes: a batch is one ``WriteBatch``."""

    def __init__(self, directory: str, records: int) -> None:
        import rocksdict

        self.rocksdict: Any = rocksdict
        self.db = rocksdict.Rdict(
            os.path.join(directory, "rocksdb"), rocksdict.Options(raw_mode=True)
        )
        self.synced = rocksdict.WriteOptions()
        self.synced.sync = True

    def put_batch(self, records: Sequence[Record]) -> None:
        batch = self.rocksdict.WriteBatch(raw_mode=True)
        for rid, kind, task, text in records:
            batch.put(rid.encode(), _peers.lmdb_value(kind, task, text))
        self.db.write(batch, self.synced)

    def put_durable(self, record: Record) -> None:
        rid, kind, task, text = record
        self.db.put(rid.encode(), _peers.lmdb_value(kind, task, text), self.synced)

    def get(self, rid: str) -> object:
        return self.db.get(rid.encode())

    def close(self) -> None:
        self.db.close()


def _missing(module: str) -> str | None:
    """Why `module` cannot be used (it is not installed), or None when it is there."""
    found = importlib.util.find_spec(module) is not None
    return None if found else f"{module} is not installed: pip install 'memcommit[bench]'"


CONTENDERS: dict[str, tuple[Callable[[str, int], Contender], str | None]] = {
    "memcommit": (Memcommit, None),
    "sqlite (WAL, synchronous=FULL)": (Sqlite, None),
    "lmdb": (Lmdb, _missing("lmdb")),
    "rocksdb (rocksdict)": (Rocksdb, _missing("rocksdict")),
}
"""Each contender's name: how to open it in a directory for so many records, and why it is
skipped (None: it runs)."""
