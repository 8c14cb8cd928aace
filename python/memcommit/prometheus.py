"""The Prometheus text exposition format (version 0.0.4), for the metrics memcommit serves.

Every metric is named ``memcommit_*`` and has a ``# HELP`` and a ``# TYPE`` line. The server's
``/v1/metrics`` and a PostgreSQL store's :func:`memcommit.postgres.metrics` are written with it.
Label values are escaped (:func:`labels`), so no value can end a line or a label; sample
values are written exactly (an int as its digits, a float as its shortest round-trip form).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

__all__ = ["CONTENT_TYPE", "LATENCY_BUCKETS", "Exposition", "Histogram", "labels"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)
"""The bounds (seconds) of latency histograms' buckets."""


def labels(**values: object) -> str:
    r"""A sample's labels, ``{name="value",...}``, each value escaped as the format says.

    A backslash, a double quote and a line feed in a value are written ``\\``, ``\"`` and
    ``\n``, so a value cannot end its label or its line.
    """
    return "{" + ",".join(f'{name}="{_escape(v)}"' for name, v in values.items()) + "}"


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    """A sample value, written exactly: an int's digits, a float's shortest round-trip form.

    Not ``{:g}``, whose six significant digits turn an LSN of 1234567 into ``1.23457e+06``.
    """
    if isinstance(value, int):
        return str(int(value))  # a bool as 0 or 1
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class Histogram:
    """Observations counted into buckets (a Prometheus histogram); safe across threads."""

    def __init__(self, bounds: Sequence[float] = LATENCY_BUCKETS) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        """Count one observation."""
        with self._lock:
            for i, bound in enumerate(self.bounds):
                if value <= bound:
                    self.counts[i] += 1
                    break
            else:
                self.counts[-1] += 1
            self.sum += value
            self.count += 1

    def samples(self) -> list[tuple[str, float]]:
        """The cumulative buckets, the sum and the count, as (suffix and labels, value)."""
        cumulative, samples = 0, list[tuple[str, float]]()
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            cumulative += count
            samples.append(("_bucket" + labels(le=_number(bound)), cumulative))
        return [*samples, ("_sum", self.sum), ("_count", self.count)]


class Exposition:
    """Metrics written one after another into the text format."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def metric(
        self, name: str, kind: str, help: str, samples: Sequence[tuple[str, float]] | float
    ) -> None:
        """Add ``memcommit_<name>``: a single value, or its samples as (labels, value).

        A sample's labels are a suffix of the name and :func:`labels`'s text (``""``: none).
        """
        self.lines.append(f"# HELP memcommit_{name} {help}")
        self.lines.append(f"# TYPE memcommit_{name} {kind}")
        for suffix, value in [("", samples)] if isinstance(samples, (int, float)) else samples:
            self.lines.append(f"memcommit_{name}{suffix} {_number(value)}")

    def histogram(self, name: str, help: str, histogram: Histogram) -> None:
        """Add a histogram."""
        self.metric(name, "histogram", help, histogram.samples())

    def text(self) -> str:
        """The exposition, ending with a newline."""
        return "\n".join(self.lines) + "\n"
