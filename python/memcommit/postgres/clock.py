"""One clock for every host of a store: the database's, made monotonic per store.

Leases, claims and idempotency keys expire by the store's clock. On a log file one process
reads one clock; a store in PostgreSQL is written from many hosts, and a host whose clock runs
ahead would expire another host's lease early. So a store in PostgreSQL reads the database's
clock (``clock_timestamp()``), sampled at the start of every write (under the store's lock)
and at every refresh, and carried forward between samples by this host's monotonic clock. It
never goes back, nor before the newest record of the store (whoever wrote it), so the times in
the log rise with the LSNs. Tests pass their own clock (a
:class:`~memcommit.testing.ControllableClock`) to :func:`memcommit.open` instead.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

__all__ = ["DatabaseClock"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class DatabaseClock:
    """The database's clock as this host sees it (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._db_us: int | None = None
        self._mono_ns = 0
        self._floor_us = 0

    def sample(self, db_us: int, floor_us: int = 0) -> None:
        """The database said it is `db_us` now; the store's newest record is at `floor_us`."""
        with self._lock:
            self._db_us = db_us
            self._mono_ns = time.monotonic_ns()
            self._floor_us = max(self._floor_us, floor_us)

    def now_us(self) -> int:
        """Microseconds since the Unix epoch, by the database's clock (never going back)."""
        with self._lock:
            if self._db_us is None:
                base = time.time_ns() // 1000  # not sampled yet: this host's own
            else:
                base = self._db_us + (time.monotonic_ns() - self._mono_ns) // 1000
            now = max(base, self._floor_us)
            self._floor_us = now
            return now

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch, by the database's clock."""
        return self.now_us() // 1000

    def now(self) -> datetime:
        """The database's time, as an aware UTC datetime."""
        return _EPOCH + timedelta(microseconds=self.now_us())
