"""A clock that moves only when a test moves it."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

from ..clock import to_microseconds
from ..errors import InvalidType, InvalidValue

__all__ = ["CLOCK_START", "ControllableClock"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
CLOCK_START = datetime(2026, 1, 1, tzinfo=timezone.utc)
"""Where a :class:`ControllableClock` starts unless told otherwise (2026-01-01T00:00:00Z)."""


def _instant_us(value: object, field: str) -> int:
    """Return `value` (an aware datetime or epoch milliseconds) in epoch microseconds."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidValue(f"{field}: {value!r} is naive; pass an aware datetime")
        return to_microseconds(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(
            f"{field} must be an aware datetime or int epoch milliseconds, "
            f"not {type(value).__name__}"
        )
    return value * 1000


class ControllableClock:
    """A clock that moves only when told to.

    It answers :meth:`now_ms` (epoch milliseconds) and :meth:`now` (an aware UTC datetime) for
    the same instant, and moves forward only through :meth:`advance` and :meth:`set`. Pass the
    same clock to the store and to the code under test.

    Example:
        >>> clock = ControllableClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
        >>> clock.advance(1_000)
        >>> clock.now().isoformat()
        '2026-01-01T00:00:01+00:00'
        >>> clock.now_ms()
        1767225601000
    """

    def __init__(self, start: datetime | int | None = None) -> None:
        """Start the clock.

        Args:
            start: An aware datetime, or epoch milliseconds as an int; default
                2026-01-01T00:00:00Z.

        Raises:
            TypeError: `start` is neither a datetime nor an int (bools are refused).
            ValueError: `start` is a naive datetime.
        """
        self._us = _instant_us(CLOCK_START if start is None else start, "start")
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """Return the clock's current time as an aware UTC datetime."""
        return _EPOCH + timedelta(microseconds=self._us)

    def now_ms(self) -> int:
        """Return the clock's current time in whole epoch milliseconds."""
        return self._us // 1000

    def advance(self, ms: int | timedelta) -> None:
        """Move the clock forward.

        Args:
            ms: Milliseconds as an int, or a timedelta.

        Raises:
            TypeError: `ms` is neither an int nor a timedelta (bools and floats are refused).
            ValueError: `ms` is negative: this clock never goes back.
        """
        if isinstance(ms, timedelta):
            step = ms // timedelta(microseconds=1)
        elif isinstance(ms, bool) or not isinstance(ms, int):
            raise InvalidType(f"ms must be an int of milliseconds or a timedelta, not {ms!r}")
        else:
            step = ms * 1000
        if step < 0:
            raise InvalidValue(f"ms: cannot advance by a negative amount ({ms})")
        with self._lock:
            self._us += step

    def set(self, when: datetime | int) -> None:
        """Set the clock to `when` (an aware datetime or epoch ms), never earlier than now.

        Raises:
            TypeError: `when` is neither a datetime nor an int.
            ValueError: `when` is before the clock's time, or a naive datetime.
        """
        target = _instant_us(when, "when")
        with self._lock:
            if target < self._us:
                raise InvalidValue(
                    f"when: {when!r} is before the clock's time {self.now().isoformat()}; "
                    "this clock never goes back"
                )
            self._us = target
