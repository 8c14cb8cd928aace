"""Where a store's time comes from.

Every record carries the time its commit ran, read from the store's clock: `created_at` and
`updated_at` of a memory come from there, and so do retention ages. The agent-runtime roles
(:mod:`memcommit.roles`) read the same clock, as integer epoch milliseconds, for every expiry
decision. Tests pass a :class:`memcommit.testing.ControllableClock` to make time a thing they
set.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Protocol, runtime_checkable

from .errors import InvalidType, InvalidValue

__all__ = [
    "Clock",
    "SystemClock",
    "millisecond_reader",
    "parse_iso",
    "to_microseconds",
    "to_milliseconds",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


@runtime_checkable
class Clock(Protocol):
    """A source of the current time.

    A clock answers in two forms: :meth:`now_ms` (integer milliseconds since the Unix epoch,
    what every lease and expiry compares) and :meth:`now` (an aware datetime). Both must
    describe the same instant.
    """

    def now(self) -> datetime:
        """Return the current time as an aware datetime."""
        ...

    def now_ms(self) -> int:
        """Return the current time in whole milliseconds since the Unix epoch."""
        ...


class SystemClock:
    """The operating system's clock, in UTC."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(timezone.utc)

    def now_ms(self) -> int:
        """Return the current time in milliseconds since the Unix epoch."""
        return time.time_ns() // 1_000_000

    def now_us(self) -> int:
        """Return the current time in microseconds since the Unix epoch."""
        return time.time_ns() // 1000


def parse_iso(text: str) -> datetime:
    """An ISO-8601 time, read the same on every Python this supports.

    :meth:`datetime.fromisoformat`, with a trailing ``Z`` (UTC), which 3.11 takes and 3.10
    refuses, read as ``+00:00``.

    Raises:
        ValueError: `text` is not such a time.
    """
    if text[-1:] in ("Z", "z"):
        text = f"{text[:-1]}+00:00"
    return datetime.fromisoformat(text)


def to_microseconds(when: datetime) -> int:
    """Convert an aware datetime to whole microseconds since the Unix epoch.

    Raises:
        ValueError: `when` is naive (has no time zone), so the instant it means is unknown.
    """
    if when.tzinfo is None or when.utcoffset() is None:
        raise InvalidValue(
            f"clock: {when!r} is a naive datetime; a clock must return aware datetimes"
        )
    return (when - _EPOCH) // _MICROSECOND


def to_milliseconds(when: datetime) -> int:
    """Convert an aware datetime to whole milliseconds since the Unix epoch (rounded down).

    Raises:
        ValueError: `when` is naive (has no time zone).
    """
    return to_microseconds(when) // 1000


def millisecond_reader(clock: object) -> Callable[[], int]:
    """Return a function reading `clock` in epoch milliseconds.

    A clock written before :meth:`Clock.now_ms` existed (one with only ``now()``) still works:
    its datetime is converted. The choice is made once, so each read costs one call.

    Raises:
        TypeError: `clock` has neither ``now_ms()`` nor ``now()``.
    """
    now_ms = getattr(clock, "now_ms", None)
    if callable(now_ms):
        return now_ms  # type: ignore[no-any-return]
    now = getattr(clock, "now", None)
    if callable(now):
        return lambda: to_milliseconds(now())
    raise InvalidType(f"clock: {type(clock).__name__} has neither now_ms() nor now()")


def _most_derived(clock: object) -> str | None:
    """The clock method the most derived class of `clock` defines, or None.

    Of ``now_us``, ``now`` and ``now_ms``, in that order within one class. A subclass of
    :class:`SystemClock` that sets the time overrides ``now()`` or ``now_ms()``; the
    ``now_us()`` it inherits would read the system clock instead.
    """
    for k in type(clock).__mro__:
        for name in ("now_us", "now", "now_ms"):
            if name in vars(k):
                return name
    return None


def microsecond_reader(clock: object) -> Callable[[], int]:
    """Return a function reading `clock` in epoch microseconds (what a record's time is).

    From the clock's own ``now_us()`` if it has one (:class:`SystemClock`, a database's or a
    server's clock), else ``now()``; a clock with only :meth:`Clock.now_ms` is read in whole
    milliseconds.

    Raises:
        TypeError: `clock` has neither ``now()`` nor ``now_ms()``.
    """
    derived = _most_derived(clock)
    now_us = getattr(clock, "now_us", None)
    if callable(now_us) and callable(getattr(clock, "now", None)) and derived in ("now_us", None):
        return now_us  # type: ignore[no-any-return]
    now = getattr(clock, "now", None)
    if callable(now) and derived != "now_ms":
        return lambda: to_microseconds(now())
    now_ms = getattr(clock, "now_ms", None)
    if callable(now_ms):
        return lambda: int(now_ms()) * 1000
    raise InvalidType(f"clock: {type(clock).__name__} has neither now_ms() nor now()")
