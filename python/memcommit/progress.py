"""A tiny progress bar for long command-line operations.

It draws on a terminal and stays silent when its stream is piped or redirected, so
``memcommit demo | tee out.txt`` and CI logs get clean output. No dependencies.

Example:
    >>> with Progress(total=3, label="work") as bar:
    ...     for _ in range(3):
    ...         bar.update(1)

"""

from __future__ import annotations

import shutil
import sys
import time
from types import TracebackType
from typing import TextIO

__all__ = ["Progress"]

# Redraw at most this often: a redraw costs a write system call, an update costs an add.
_REDRAW_SECONDS = 0.1


class Progress:
    """A progress bar that counts up to ``total`` units.

    Args:
        total: The number of units the whole operation will count; ``0`` or less draws a
            counter without a bar.
        label: A short word or two shown before the bar.
        unit: The name of a unit, shown after the counts.
        stream: Where to draw; standard error by default.
        enabled: Draw or not; by default, only when ``stream`` is a terminal.

    """

    def __init__(
        self,
        total: int,
        label: str = "",
        *,
        unit: str = "",
        stream: TextIO | None = None,
        enabled: bool | None = None,
    ) -> None:
        self.total = total
        self.label = label
        self.unit = unit
        self.count = 0
        self._stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self._stream, "isatty", None)
            enabled = bool(isatty()) if callable(isatty) else False
        self.enabled = enabled
        self._started = time.monotonic()
        self._next_draw = self._started
        self._drawn = False
        self._closed = False

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units done and redraw if enough time has passed.

        Args:
            n: How many units were completed since the last call.

        """
        self.count += n
        if self.enabled:
            now = time.monotonic()
            if now >= self._next_draw:
                self._next_draw = now + _REDRAW_SECONDS
                self._draw(now)

    def close(self) -> None:
        """Draw the final state and end the line; later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        if self.enabled:
            self._draw(time.monotonic())
            self._stream.write("\n")
            self._stream.flush()

    def clear(self) -> None:
        """Erase the bar from the terminal line and end it without drawing again."""
        if self._closed:
            return
        self._closed = True
        if self.enabled and self._drawn:
            self._stream.write("\r\x1b[K")
            self._stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # On an error, leave the terminal line clean for the error message that follows.
        if exc_type is None:
            self.close()
        else:
            self.clear()

    def _draw(self, now: float) -> None:
        elapsed = now - self._started
        width = shutil.get_terminal_size((80, 20)).columns
        unit = f" {self.unit}" if self.unit else ""
        label = f"{self.label} " if self.label else ""
        if self.total > 0:
            fraction = min(self.count / self.total, 1.0)
            total = f"{self.total:,}"
            count = f"{self.count:,}".rjust(len(total))
            tail = f" {fraction:4.0%} {count}/{total}{unit} {elapsed:5.1f}s"
            bar_width = max(width - len(label) - len(tail) - 3, 10)
            filled = int(fraction * bar_width)
            bar = "#" * filled + "." * (bar_width - filled)
            line = f"{label}[{bar}]{tail}"
        else:
            line = f"{label}{self.count:,}{unit} {elapsed:5.1f}s"
        self._stream.write("\r" + line[: max(width - 1, 1)])
        self._stream.flush()
        self._drawn = True
