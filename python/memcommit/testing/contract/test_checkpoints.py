"""Contract: checkpoints (research/roles.md 4.3)."""

# Test methods say what they check in their names; only some need a docstring.
# ruff: noqa: D102

from __future__ import annotations

import pytest

from ...roles import CheckpointNotFoundError, ClaimLostError, RunNotFoundError
from .harness import Harness, fresh_id, fresh_run

TTL = 1_000


class TestCheckpoints:
    """Snapshots of runs."""

    def test_put_on_an_unknown_run_raises(self, harness: Harness) -> None:
        run_id = fresh_id("run")
        with pytest.raises(RunNotFoundError):
            harness.store.checkpoints.put(run_id, state={"s": 1})
        assert harness.store.checkpoints.list(run_id) == []

    def test_put_and_get(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        run_id = fresh_run(harness.store)
        assert store.checkpoints.get(run_id) is None
        checkpoint = store.checkpoints.put(run_id, state={"step": 1}, metadata={"source": "loop"})
        assert (checkpoint.run_id, checkpoint.namespace, checkpoint.parent_id) == (run_id, "", None)
        assert (checkpoint.state, checkpoint.metadata) == ({"step": 1}, {"source": "loop"})
        assert checkpoint.created_at_ms == clock.now_ms()
        assert store.checkpoints.get(run_id) == checkpoint
        assert store.checkpoints.get(run_id, checkpoint.checkpoint_id) == checkpoint
        assert store.checkpoints.get(run_id, "nope") is None

    def test_latest_without_advancing_the_clock(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        puts = [store.checkpoints.put(run_id, state={"n": n}) for n in range(3)]
        assert store.checkpoints.get(run_id) == puts[2]
        ids = [c.checkpoint_id for c in puts]
        assert ids == sorted(ids) and len(set(ids)) == 3
        assert [c.seq for c in puts] == sorted(c.seq for c in puts)

    def test_list_newest_first_and_paginate(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        puts = [store.checkpoints.put(run_id, state={"n": n}) for n in range(5)]
        newest_first = list(reversed(puts))
        assert store.checkpoints.list(run_id) == newest_first
        assert store.checkpoints.list(run_id, limit=1) == newest_first[:1]
        assert store.checkpoints.list(run_id, before=puts[2].checkpoint_id) == [puts[1], puts[0]]
        pages, cursor = [], None
        while True:
            page = store.checkpoints.list(run_id, before=cursor, limit=2)
            if not page:
                break
            pages.extend(page)
            cursor = page[-1].checkpoint_id
        assert pages == newest_first
        assert store.checkpoints.list(run_id, before=puts[0].checkpoint_id) == []

    def test_namespaces_are_isolated(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        root = store.checkpoints.put(run_id, state={"root": 1})
        child = store.checkpoints.put(run_id, state={"child": 1}, namespace="child:abc")
        assert store.checkpoints.get(run_id) == root
        assert store.checkpoints.get(run_id, namespace="child:abc") == child
        assert store.checkpoints.get(run_id, child.checkpoint_id) is None
        assert store.checkpoints.get(run_id, child.checkpoint_id, namespace="child:abc") == child
        assert store.checkpoints.list(run_id, namespace="") == [root]
        assert store.checkpoints.list(run_id, namespace="child:abc") == [child]
        assert store.checkpoints.list(run_id) == [child, root]

    def test_parent_must_be_of_the_same_run_and_namespace(self, harness: Harness) -> None:
        store = harness.store
        run_id, other_run = fresh_run(harness.store), fresh_run(harness.store)
        parent = store.checkpoints.put(run_id, state={"n": 0})
        elsewhere = store.checkpoints.put(other_run, state={"n": 0})
        nested = store.checkpoints.put(run_id, state={"n": 0}, namespace="child")
        for bad in ("nope", elsewhere.checkpoint_id, nested.checkpoint_id):
            with pytest.raises(CheckpointNotFoundError) as caught:
                store.checkpoints.put(run_id, state={"n": 1}, parent_id=bad)
            assert (caught.value.run_id, caught.value.checkpoint_id) == (run_id, bad)
        assert store.checkpoints.list(run_id, namespace="") == [parent]
        child = store.checkpoints.put(run_id, state={"n": 1}, parent_id=parent.checkpoint_id)
        assert child.parent_id == parent.checkpoint_id
        assert store.checkpoints.get(run_id) == child

    def test_metadata_filter(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        a = store.checkpoints.put(run_id, state=1, metadata={"source": "loop", "step": 1})
        b = store.checkpoints.put(run_id, state=2, metadata={"source": "input", "step": 1})
        c = store.checkpoints.put(run_id, state=3, metadata={"source": "loop", "step": 2, "x": []})
        assert store.checkpoints.list(run_id, metadata_filter={"source": "loop"}) == [c, a]
        assert store.checkpoints.list(run_id, metadata_filter={"source": "loop", "step": 1}) == [a]
        assert store.checkpoints.list(run_id, metadata_filter={"step": 1}) == [b, a]
        assert store.checkpoints.list(run_id, metadata_filter={"x": []}) == [c]
        assert store.checkpoints.list(run_id, metadata_filter={"source": "nope"}) == []
        assert store.checkpoints.list(run_id, metadata_filter={"step": True}) == []

    def test_prune_keeps_the_newest_per_namespace(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        for n in range(3):
            store.checkpoints.put(run_id, state=n)
            store.checkpoints.put(run_id, state=n, namespace="child")
        newest_root = store.checkpoints.get(run_id)
        newest_child = store.checkpoints.get(run_id, namespace="child")
        assert store.checkpoints.prune(run_id, keep_last=1) == 4
        assert store.checkpoints.list(run_id) == [newest_child, newest_root]
        assert store.checkpoints.prune(run_id, keep_last=1) == 0

    def test_prune_one_namespace(self, harness: Harness) -> None:
        store = harness.store
        run_id = fresh_run(harness.store)
        root = [store.checkpoints.put(run_id, state=n) for n in range(2)]
        store.checkpoints.put(run_id, state=0, namespace="child")
        assert store.checkpoints.prune(run_id, keep_last=0, namespace="child") == 1
        assert store.checkpoints.list(run_id) == list(reversed(root))

    def test_fencing(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        run_id = fresh_run(harness.store)
        old = store.runs.claim(run_id, worker_id="a", ttl_ms=TTL)
        kept = store.checkpoints.put(run_id, state={"n": 1}, token=old.token)
        clock.advance(TTL)
        new = store.runs.claim(run_id, worker_id="b", ttl_ms=TTL)
        with pytest.raises(ClaimLostError):
            store.checkpoints.put(run_id, state={"n": 2}, token=old.token)
        assert store.checkpoints.list(run_id) == [kept]
        fresh = store.checkpoints.put(run_id, state={"n": 2}, token=new.token)
        assert store.checkpoints.get(run_id) == fresh
