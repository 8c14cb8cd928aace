"""Tools for testing code that uses memcommit."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

__all__ = ["ControllableClock"]


class ControllableClock:
    """A clock that moves only when told to.

    Example:
        >>> clock = ControllableClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
        >>> clock.advance(1_000)
        >>> clock.now().isoformat()
        '2026-01-01T00:00:01+00:00'
    """

    def __init__(self, start: datetime | None = None) -> None:
        """Start the clock at `start` (an aware datetime; default 2026-01-01 UTC)."""
        if start is None:
            start = datetime(2026, 1, 1, tzinfo=timezone.utc)
        if start.tzinfo is None or start.utcoffset() is None:
            raise ValueError(f"start: {start!r} is naive; pass an aware datetime")
        self._now = start

    def now(self) -> datetime:
        """Return the clock's current time."""
        return self._now

    def advance(self, ms: int) -> None:
        """Move the clock forward by `ms` milliseconds.

        Raises:
            ValueError: `ms` is negative: this clock never goes back.
        """
        if ms < 0:
            raise ValueError(f"ms: cannot advance by a negative amount ({ms})")
        self._now += timedelta(milliseconds=ms)

    def set(self, when: datetime) -> None:
        """Set the clock to `when`, which must not be earlier than now."""
        if when < self._now:
            raise ValueError(
                f"when: {when.isoformat()} is before the clock's time {self._now.isoformat()}"
            )
        self._now = when
