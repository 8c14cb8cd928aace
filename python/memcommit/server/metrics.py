"""The server's metrics: counters kept by the event loop, served as ``GET /v1/metrics``.

The text is the Prometheus exposition format (:mod:`memcommit.prometheus`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..prometheus import CONTENT_TYPE, Exposition, Histogram, labels
from .writer import CALL, Identity, Writer

__all__ = ["CONTENT_TYPE", "Metrics"]


class Metrics:
    """Counters for ``/v1/metrics`` (Prometheus text format), kept by the event loop."""

    def __init__(self) -> None:
        self.paths: frozenset[str] = frozenset()
        """The paths of the server's routes: requests are counted by them (others as one)."""
        self.requests: dict[tuple[str, int], int] = {}
        self.commits: dict[str, int] = {"ok": 0, "rejected": 0, "error": 0}
        self.calls: dict[str, int] = {"ok": 0, "error": 0}
        self.resends = 0
        self.unknown = 0
        self.latency = Histogram()
        self.log_reads = 0
        self.log_bytes = 0
        self.waiting_readers = 0

    def request(self, path: str, status: int) -> None:
        """Count an answer to a request for `path`.

        Paths the server has no route for count as ``other``: whatever a client asks for
        (unauthenticated, too) adds no series, so the metrics stay bounded.
        """
        key = (path if path in self.paths else "other", status)
        self.requests[key] = self.requests.get(key, 0) + 1

    def answered(self, kind: int, result: dict[str, Any], seconds: float) -> None:
        """Count a commit, role call or seal answered `seconds` after it arrived."""
        self.observe(seconds)
        ok = bool(result.get("ok"))
        if kind != CALL:
            err = None if ok else result["error"].get("class")
            self.commits["ok" if ok else "rejected" if err == "Rejected" else "error"] += 1
        else:
            self.calls["ok" if ok else "error"] += 1

    def observe(self, seconds: float) -> None:
        """Add one commit latency to the histogram."""
        self.latency.observe(seconds)

    def text(self, *, up: bool, ident: Identity, writer: Writer | None, started: float) -> str:
        """The metrics in the Prometheus text exposition format.

        Args:
            up: Whether the server takes commits.
            ident: The log served and its durable head.
            writer: The writer whose batches and fsyncs to report (None before it starts).
            started: When the server started (seconds since the epoch).
        """
        m, w = self, writer
        out = Exposition()
        metric = out.metric

        def by_result(counts: Mapping[str, int]) -> list[tuple[str, float]]:
            return [(labels(result=k), v) for k, v in counts.items()]

        metric("up", "gauge", "1 while the server takes commits.", 1 if up else 0)
        metric("lsn", "gauge", "The durable head LSN.", ident.head)
        metric("generation", "gauge", "The log generation.", ident.generation)
        metric(
            "commits_total", "counter", "Memory commits answered, by outcome.", by_result(m.commits)
        )
        metric(
            "role_calls_total", "counter", "Role calls answered, by outcome.", by_result(m.calls)
        )
        metric("resends_total", "counter", "Resent commits answered from memory.", m.resends)
        unknown = (
            "Resends answered commit_outcome_unknown (sent before a restart, or their answers "
            "forgotten)."
        )
        metric("outcome_unknown_total", "counter", unknown, m.unknown)
        metric("batches_total", "counter", "Batches the writer ran.", w.batches if w else 0)
        metric("fsyncs_total", "counter", "fsyncs the writer made.", w.fsyncs if w else 0)
        batched = "Commits and role calls the writer ran (divide by batches for the group size)."
        metric("batched_commits_total", "counter", batched, w.batched_commits if w else 0)
        out.histogram("commit_seconds", "From a commit's arrival to its durable answer.", m.latency)
        metric("log_reads_total", "counter", "Log reads answered with records.", m.log_reads)
        metric("log_bytes_total", "counter", "Raw log bytes sent to replicas.", m.log_bytes)
        metric("waiting_readers", "gauge", "Long polls waiting now.", m.waiting_readers)
        requests = [(labels(path=p, status=s), n) for (p, s), n in sorted(m.requests.items())]
        metric("http_requests_total", "counter", "HTTP requests, by path and status.", requests)
        metric("start_time_seconds", "gauge", "When the server started.", started)
        return out.text()
