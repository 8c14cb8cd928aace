"""One open-time / memory measurement, run by ``benches/compare.py`` in a fresh process.

Usage: ``python _open_child.py MODE PATH ID N``. Imports happen first and are not timed;
the clock runs from just before the store is opened until the first read of ``ID`` has
answered. Prints one JSON object: ``seconds``, VmRSS/RssAnon/RssFile (bytes) read from
``/proc/self/status`` before the open and after the read, and ``found``.

Modes:
  memcommit       memcommit.open(PATH) (the writer) + store.get(ID)
  memcommit_ro    memcommit.open(PATH, read_only=True) + store.get(ID)
  sqlite_load     SELECT every row into a dict {id: (kind, task, text)}, then look ID up
  lmdb_load       iterate a cursor into a dict {id: value} (raw bytes), then look ID up
  sqlite_point    connect + SELECT ... WHERE id = ? (no load; for context)
  lmdb_point      open the environment + txn.get(ID) (no load; for context)
  read_bytes      open(PATH, 'rb').read() of the memcommit log, then nothing
  read_index      the same of the log's index file (PATH.index), if its writer left one
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


def status() -> dict[str, int]:
    out: dict[str, int] = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[key] = int(rest.split()[0]) * 1024  # kB -> bytes
    return out


@dataclass
class Span:
    """What ``measured`` saw: the status before the block, and the seconds the block took."""

    before: dict[str, int]
    seconds: float = 0.0


@contextlib.contextmanager
def measured() -> Iterator[Span]:
    """Read ``status()``, then time the block (the open and the first read; imports go before)."""
    span = Span(status())
    t0 = time.perf_counter()
    yield span
    span.seconds = time.perf_counter() - t0


def main() -> None:
    mode, path, rid, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    keep: Any = None
    found = False
    index_file = None
    if mode in ("memcommit", "memcommit_ro"):
        import memcommit

        ro = mode == "memcommit_ro"
        with measured() as span:
            store = memcommit.open(path, read_only=ro)
            got = store.get(rid)
        found = got is not None and got.id == rid
        index_file = store.info()["index_file"]
        keep = store
    elif mode in ("sqlite_load", "sqlite_point"):
        import sqlite3

        with measured() as span:
            con = sqlite3.connect(path)
            if mode == "sqlite_load":
                d = {r[0]: r[1:] for r in con.execute("SELECT id, kind, task, text FROM memories")}
                row = d.get(rid)
                keep = d
            else:
                row = con.execute(
                    "SELECT kind, task, text FROM memories WHERE id = ?", (rid,)
                ).fetchone()
                keep = con
        found = row is not None
    elif mode in ("lmdb_load", "lmdb_point"):
        import lmdb

        with measured() as span:
            env = lmdb.open(path, readonly=True, lock=False, map_size=max(1 << 30, n * 2048))
            with env.begin() as txn:
                if mode == "lmdb_load":
                    d = dict(txn.cursor())
                    val = d.get(rid.encode())
                    keep = d
                else:
                    val = txn.get(rid.encode())
                    keep = env
        found = val is not None
    elif mode in ("read_bytes", "read_index"):
        with measured() as span:
            with open(path if mode == "read_bytes" else f"{path}.index", "rb") as f:
                data = f.read()
        found = len(data) > 0
        keep = data
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    after = status()
    del keep
    print(
        json.dumps(
            {
                "mode": mode,
                "seconds": span.seconds,
                "found": found,
                "index_file": index_file,
                "before": span.before,
                "after": after,
            }
        )
    )


if __name__ == "__main__":
    main()
