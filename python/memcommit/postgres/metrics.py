"""A PostgreSQL store's metrics, in the Prometheus text format: :func:`metrics`.

Each client counts what it did: its commits and how they ended, how long a commit took from
the call to its COMMIT (``commit_seconds``), how long it waited for the store's lock
(``lock_wait_seconds``), how old the newest record a catch-up brought was by the database's
clock (``refresh_lag_seconds``), how long its log compactions held the store's lock
(``compaction_lock_seconds``), follower rebuilds and NOTIFYs heard. A scrape adds what the
database says now: the records since the store's newest seal (``seal_lag_records``), and the
size and rows of the store's table of records (``table_bytes``, ``table_live_rows``,
``table_dead_rows``; log compaction replaces the table whole, leaving no dead rows).

Example:
    ```python
    from memcommit.postgres import metrics

    text = metrics(store)  # serve it at /metrics with the web framework at hand
    ```
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ..errors import InvalidType
from ..prometheus import CONTENT_TYPE, Exposition, Histogram

if TYPE_CHECKING:
    from ..store import MemoryStore

__all__ = ["CONTENT_TYPE", "Counters", "metrics"]


class Counters:
    """What one client of a store counts (kept by its engine; safe across threads)."""

    def __init__(self) -> None:
        self.commit_seconds = Histogram()
        self.lock_wait_seconds = Histogram()
        self.refresh_lag_seconds = Histogram()
        self.compaction_lock_seconds = Histogram()
        self.commits = {"ok": 0, "rejected": 0, "error": 0}
        self.sections = 0
        self.rebuilds = 0
        self.outcome_unknown = 0
        self._lock = threading.Lock()

    def commit(self, result: str, seconds: float) -> None:
        """Count a commit that ended with `result` (ok, rejected, error) after `seconds`."""
        with self._lock:
            self.commits[result] += 1
        self.commit_seconds.observe(seconds)

    def section(self) -> None:
        """Count a section that wrote (one transaction carrying one or more commits)."""
        with self._lock:
            self.sections += 1


def metrics(store: MemoryStore) -> str:
    """The metrics of `store`, a store in PostgreSQL, in the Prometheus text format.

    Asks the database for the size and dead rows of the store's table of records (one short
    query).

    Raises:
        TypeError: `store` is not a store in PostgreSQL.
        ServerUnavailable: The database cannot be asked.
    """
    engine: Any = getattr(store, "engine", None)
    if not isinstance(getattr(engine, "counters", None), Counters):  # a PostgresEngine's
        raise InvalidType(
            f"metrics: {store!r} is not a store in PostgreSQL (a file store's writer is in "
            "this process; `memcommit serve` has /v1/metrics)"
        )
    c = engine.counters
    table = engine.table_stats()
    out = Exposition()
    out.metric("lsn", "gauge", "The head LSN of this client's copy of the store.", store.lsn)
    out.metric("generation", "gauge", "The store's log generation.", engine.generation)
    out.metric(
        "commits_total",
        "counter",
        "Commits this client ran, by outcome.",
        [(f'{{result="{k}"}}', v) for k, v in c.commits.items()],
    )
    out.metric("sections_total", "counter", "Transactions that wrote records.", c.sections)
    out.histogram("commit_seconds", "From a commit's call to its COMMIT.", c.commit_seconds)
    out.histogram("lock_wait_seconds", "Waits for the store's advisory lock.", c.lock_wait_seconds)
    out.histogram(
        "refresh_lag_seconds",
        "Age of the newest record a catch-up brought (by the database's clock).",
        c.refresh_lag_seconds,
    )
    out.metric(
        "seal_lag_records", "gauge", "Records after the store's newest seal.", engine.seal_lag()
    )
    out.histogram(
        "compaction_lock_seconds",
        "How long log compactions by this client held the store's lock (its last step).",
        c.compaction_lock_seconds,
    )
    out.metric("rebuilds_total", "counter", "Times this client read the store anew.", c.rebuilds)
    out.metric(
        "outcome_unknown_total",
        "counter",
        "Commits whose COMMIT went unanswered and could not be looked up.",
        c.outcome_unknown,
    )
    out.metric("notifications_total", "counter", "NOTIFYs heard.", engine.notifications)
    out.metric(
        "table_bytes", "gauge", "The store's table of records: size on disk.", table["bytes"]
    )
    out.metric(
        "table_live_rows", "gauge", "The store's table of records: live rows.", table["live"]
    )
    out.metric(
        "table_dead_rows", "gauge", "The store's table of records: dead rows.", table["dead"]
    )
    return out.text()
