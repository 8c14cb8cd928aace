"""Resends: a commit whose answer was lost is answered again, never applied twice.

Every commit carries an id its client made. The server remembers the answer of each commit
that wrote (the newest ``remember`` of them) and knows every commit still in flight, so a
resend is answered with the first attempt's answer, or waits for it. A resend that says it
may have reached another server start (``retry_of``) and is not known here cannot be told
apart from a new commit: it is answered ``commit_outcome_unknown`` instead of guessing.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from .. import wire
from .metrics import Metrics
from .writer import Work

__all__ = ["Resends"]


class Resends:
    """The commits in flight and the remembered answers, by commit id (on the event loop).

    Args:
        boot: This server start's id.
        remember: How many answers of commits that wrote to keep.
        metrics: Where resends and unknown outcomes are counted.
    """

    def __init__(self, boot: str, remember: int, metrics: Metrics) -> None:
        self._boot = boot
        self._remember = remember
        self._metrics = metrics
        self._inflight: dict[str, Work] = {}
        self._remembered: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def answer(
        self, commit_id: str, retry_of: str | None, loop: asyncio.AbstractEventLoop
    ) -> dict[str, Any] | asyncio.Future[Any] | None:
        """What commit `commit_id` gets instead of running, or None: run it.

        Returns:
            The remembered answer; a future of the answer of the same commit in flight; an
            unknown outcome, for a resend from another server start; or None for a commit
            this server has not seen.
        """
        known = self._remembered.get(commit_id)
        if known is not None:
            self._metrics.resends += 1
            return known
        inflight = self._inflight.get(commit_id)
        if inflight is not None:
            self._metrics.resends += 1
            waiter: asyncio.Future[Any] = loop.create_future()
            inflight.waiters = [*(inflight.waiters or ()), waiter]
            return waiter
        if retry_of is not None and retry_of != self._boot:
            self._metrics.unknown += 1
            return {"ok": False, "error": _unknown(commit_id)}
        return None

    def started(self, work: Work) -> None:
        """`work` (with a commit id) was handed to the writer."""
        assert work.commit_id is not None
        self._inflight[work.commit_id] = work

    def finished(self, work: Work) -> None:
        """The writer answered `work`: remember the answer if it wrote."""
        if work.commit_id is None:
            return
        self._inflight.pop(work.commit_id, None)
        if work.wrote:
            self._remembered[work.commit_id] = work.result
            if len(self._remembered) > self._remember:
                self._remembered.popitem(last=False)


def _unknown(commit_id: str) -> dict[str, Any]:
    return wire.encode_error(
        wire.CommitOutcomeUnknown(
            f"commit {commit_id}: its answer was lost and the server has restarted since it was "
            "sent, so whether it was applied is unknown; refresh and check before committing "
            "it again",
            commit_id=commit_id,
        )
    )
