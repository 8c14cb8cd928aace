"""Resends: a commit whose answer was lost is answered again, never applied twice.

Every commit carries an id its client made. The server remembers the answer of each commit
that wrote (the newest ``remember`` of them) and knows every commit still in flight, so a
resend is answered with the first attempt's answer, or waits for it. A resend (one that says,
with ``retry_of``, which server start it may have reached) that is not known here cannot be
told apart from a new commit when its answer may have existed and be gone: when it names
another server start, or once this server has forgotten an answer to keep within
``remember`` (its answer may have been that one). It is answered ``commit_outcome_unknown``
then instead of guessing. So the memory stays bounded, at the price that a resend of a commit
that never arrived is answered unknown too, once the server has run ``remember`` commits.
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
        self._forgot = False  # whether an answer was dropped since this server started

    def known(self, commit_id: str, retry_of: str | None) -> bool:
        """Whether :meth:`answer` answers commit `commit_id` without running it."""
        return (
            commit_id in self._remembered
            or commit_id in self._inflight
            or self._unknowable(retry_of) is not None
        )

    def answer(
        self, commit_id: str, retry_of: str | None, loop: asyncio.AbstractEventLoop
    ) -> dict[str, Any] | asyncio.Future[Any] | None:
        """What commit `commit_id` gets instead of running, or None: run it.

        Returns:
            The remembered answer; a future of the answer of the same commit in flight; an
            unknown outcome, for a resend whose answer may have been lost to a restart or
            forgotten; or None for a commit this server has not seen.
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
        why = self._unknowable(retry_of)
        if why is not None:
            self._metrics.unknown += 1
            return {"ok": False, "error": _unknown(commit_id, why)}
        return None

    def _unknowable(self, retry_of: str | None) -> str | None:
        """Why a resend naming `retry_of` and not known here has an unknown outcome, if so."""
        if retry_of is None:
            return None  # a first attempt
        if retry_of != self._boot:
            return "the server has restarted since it was sent"
        if self._forgot:
            return (
                f"the server keeps the answers of its newest {self._remember} commits only and "
                "has forgotten older ones, its among them perhaps"
            )
        # Every answer of this server start that wrote is remembered: the first attempt never
        # arrived, or wrote nothing (refused), and running it now is what it would have been.
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
                self._forgot = True


def _unknown(commit_id: str, why: str) -> dict[str, Any]:
    return wire.encode_error(
        wire.CommitOutcomeUnknown(
            f"commit {commit_id}: its answer was lost and {why}, so whether it was applied is "
            "unknown; refresh and check before committing it again",
            commit_id=commit_id,
        )
    )
