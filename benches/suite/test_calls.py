"""What one call costs as the log grows: p50 and p99 per call, on the generated log and on a
run queue added to a copy of it.

Each benchmark times one call per round (:func:`suite.measure.per_call`), so its group's
median is the call's p50; ``extra_info`` carries ``p50_s``, ``p99_s``, the calls timed, the
peak RSS over them and the generated log's records (the N ``benches/tables.py`` judges the
growth against). Arguments are drawn at random (seeded) and untimed.

On the generated log, opened once as a reader:

* ``get``: a random memory by id;
* ``find kind + task``: ``find(kind="fact", task=T)`` of a random task (at most 15 memories);
* ``find tier, limit 50`` and ``find status, limit 50``: the first 50 memories of a random
  tier, or of the stale ones. The limit stops the scan early, so these two stay flat even
  where the query scans: ``find kind + task`` is the one that shows a scan;
* ``history``: the records of a random memory;
* ``records after, last 1,000``: ``records(after=A)`` read to the head, `A` a random LSN among
  the head's last 1,000.

On the run queue (:func:`suite.loggen.add_run_queue` on a copy of the generated log:
``size.runs`` runs added, all but ``size.open_runs`` finished), opened as a writer by each
benchmark:

* ``claim_next``: claims the first claimable run; the claim before it is completed, untimed,
  as a worker would (so the running runs do not pile up ahead of the pending ones);
* ``claim_next, first after open``: the first claim after a reopen, which builds the runs'
  grouping by status (one round per reopen; its p50 is the median of the rounds);
* ``list pending, limit 10`` and ``list succeeded, limit 10``: ``runs.list(status=...,
  limit=10)``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import memcommit
from memcommit.cli.bench import PeakRss
from suite.loggen import TIERS, GeneratedLog, RunQueueLog, memory_id, task_of
from suite.measure import describe, each_round, per_call, record_rss
from suite.sizes import Size

Figure = tuple[Callable[[Any], object], Callable[[], Any], Callable[[Any], bool]]
"""A per-call figure: the call, what draws its argument, and what checks its last answer."""


def _log_figure(name: str, store: memcommit.MemoryStore, log: GeneratedLog) -> Figure:
    rng = random.Random(f"{name} {log.records}")
    memories = log.memories
    if name == "get":
        return store.get, lambda: memory_id(rng.randrange(memories)), lambda m: m is not None
    if name == "find kind + task":
        return (
            lambda task: store.find(kind="fact", task=task),
            lambda: task_of(rng.randrange(memories)),
            lambda found: isinstance(found, list) and len(found) <= 15,
        )
    if name == "find tier, limit 50":
        return (
            lambda tier: store.find(tier=tier, limit=50),
            lambda: rng.choice(TIERS),
            lambda found: len(found) == 50,
        )
    if name == "find status, limit 50":
        return (
            lambda status: store.find(status=status, limit=50),
            lambda: "stale",
            lambda found: len(found) == 50 and all(m.status == "stale" for m in found),
        )
    if name == "history":
        return (
            store.history,
            lambda: memory_id(rng.randrange(memories)),
            lambda records: len(records) >= 1,
        )
    if name == "records after, last 1,000":
        head = store.lsn
        return (
            lambda after: list(store.records(after=after)),
            lambda: head - rng.randint(1, 1_000),
            lambda records: 1 <= len(records) <= 1_000 and records[-1].lsn == head,
        )
    raise AssertionError(f"no figure {name!r}")


LOG_FIGURES = (
    "get",
    "find kind + task",
    "find tier, limit 50",
    "find status, limit 50",
    "history",
    "records after, last 1,000",
)


@pytest.mark.benchmark(group="calls on the generated log")
@pytest.mark.parametrize("figure", LOG_FIGURES)
def test_log_call(
    benchmark: Any, figure: str, reader: memcommit.MemoryStore, generated: GeneratedLog, size: Size
) -> None:
    call, draw, check = _log_figure(figure, reader, generated)
    answer = per_call(benchmark, call, draw, size)
    assert check(answer), f"{figure}: {answer!r}"
    describe(benchmark, generated)


@pytest.fixture
def queue(run_queue_log: RunQueueLog) -> Iterator[memcommit.MemoryStore]:
    """The run queue's log opened as a writer (``durability="none"``: the lookup, not the
    fsync, is what is measured)."""
    with memcommit.open(run_queue_log.path, durability="none") as store:
        store.engine.view().chain_hex()
        yield store


def _describe_queue(benchmark: Any, log: GeneratedLog, queue_log: RunQueueLog) -> None:
    describe(benchmark, log)
    benchmark.extra_info.update(
        runs=queue_log.runs, runs_added=queue_log.added, runs_pending=queue_log.pending
    )


QUEUE_FIGURES = ("claim_next", "list pending, limit 10", "list succeeded, limit 10")


@pytest.mark.benchmark(group="calls on the run queue")
@pytest.mark.parametrize("figure", QUEUE_FIGURES)
def test_queue_call(
    benchmark: Any,
    figure: str,
    queue: memcommit.MemoryStore,
    run_queue_log: RunQueueLog,
    generated: GeneratedLog,
    size: Size,
) -> None:
    runs = queue.runs
    if figure == "claim_next":
        claims: list[Any] = []

        def complete_last() -> None:
            while claims:
                claim = claims.pop()
                runs.complete(claim.run.run_id, token=claim.token)

        def claim(_: None) -> Any:
            claims.append(runs.claim_next(worker_id="bench", ttl_ms=600_000))
            return claims[-1]

        # Each call takes a pending run: leave half of them for the other figures.
        answer = per_call(benchmark, claim, complete_last, size, most=run_queue_log.pending // 2)
        complete_last()
        assert answer is not None and answer.run.status == "running", answer
    else:
        status = "pending" if figure.startswith("list pending") else "succeeded"
        answer = per_call(
            benchmark, lambda _: runs.list(status=status, limit=10), lambda: None, size
        )
        assert len(answer) == 10 and all(r.status == status for r in answer), answer
    _describe_queue(benchmark, generated, run_queue_log)


@pytest.mark.benchmark(group="calls on the run queue")
@pytest.mark.parametrize("figure", ["claim_next, first after open"])
def test_queue_first_call(
    benchmark: Any, figure: str, run_queue_log: RunQueueLog, generated: GeneratedLog, size: Size
) -> None:
    """The first ``claim_next`` of a store just opened (the open untimed, one per round)."""

    claims: list[Any] = []

    def reopen() -> memcommit.MemoryStore:
        store = memcommit.open(run_queue_log.path, durability="none")
        store.engine.view().chain_hex()
        return store

    def first_claim(store: memcommit.MemoryStore) -> Any:
        with PeakRss() as rss:
            claims.append(store.runs.claim_next(worker_id="bench", ttl_ms=600_000))
        record_rss(benchmark, rss)
        return claims[-1]

    def complete_and_close(store: memcommit.MemoryStore) -> None:
        for claim in claims:
            store.runs.complete(claim.run.run_id, token=claim.token)
        claims.clear()
        store.close()

    answer = each_round(benchmark, reopen, first_claim, max(size.rounds, 3), complete_and_close)
    assert answer is not None and answer.run.status == "running", answer
    _describe_queue(benchmark, generated, run_queue_log)
