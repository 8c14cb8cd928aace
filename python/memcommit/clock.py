"""Where a store's time comes from.

Every record carries the time its commit ran, read from the store's clock: `created_at` and
`updated_at` of a memory come from there, and so do retention ages. Tests pass a
:class:`memcommit.testing.ControllableClock` to make time a thing they set.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "SystemClock", "to_microseconds"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


@runtime_checkable
class Clock(Protocol):
    """A source of the current time."""

    def now(self) -> datetime:
        """Return the current time as an aware datetime."""
        ...


class SystemClock:
    """The operating system's clock, in UTC."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(timezone.utc)

    def now_us(self) -> int:
        """Return the current time in microseconds since the Unix epoch."""
        return time.time_ns() // 1000


def to_microseconds(when: datetime) -> int:
    """Convert an aware datetime to whole microseconds since the Unix epoch.

    Raises:
        ValueError: `when` is naive (has no time zone), so the instant it means is unknown.
    """
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError(
            f"clock: {when!r} is a naive datetime; a clock must return aware datetimes"
        )
    return (when - _EPOCH) // _MICROSECOND
