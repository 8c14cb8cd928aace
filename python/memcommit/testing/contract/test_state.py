"""Contract: agent state (research/roles.md 4.7; ROLES.md decisions 5 and 10)."""

# Test methods say what they check in their names; only some need a docstring.
# ruff: noqa: D102

from __future__ import annotations

import pytest

from ...errors import InvalidValue
from ...roles import StateEntry, VersionConflictError
from ...roles.values import MAX_JSON_DEPTH
from ..race import race
from .harness import Harness, fresh_id, fresh_sized_id, stated_most


class TestState:
    """Versioned key/value per namespace."""

    def test_put_and_get(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        ns = ("agent", fresh_id("a"))
        assert store.state.get(ns, "k") is None
        first = store.state.put(ns, "k", {"v": 1})
        assert (first.namespace, first.key, first.value, first.version) == (ns, "k", {"v": 1}, 1)
        assert first.updated_at_ms == clock.now_ms()
        assert type(first.version) is int
        second = store.state.put(ns, "k", {"v": 2})
        assert (second.value, second.version) == ({"v": 2}, 2)
        assert store.state.get(ns, "k") == second

    def test_compare_and_set(self, harness: Harness) -> None:
        store = harness.store
        ns = ("agent", fresh_id("a"))
        store.state.put(ns, "k", "v1", expected_version=0)
        current = store.state.put(ns, "k", "v2", expected_version=1)
        with pytest.raises(VersionConflictError) as caught:
            store.state.put(ns, "k", "v3", expected_version=1)
        assert (caught.value.expected, caught.value.actual) == (1, 2)
        with pytest.raises(VersionConflictError) as create_only:
            store.state.put(ns, "k", "v3", expected_version=0)
        assert (create_only.value.expected, create_only.value.actual) == (0, 2)
        with pytest.raises(VersionConflictError) as absent:
            store.state.put(ns, "missing", "v", expected_version=3)
        assert (absent.value.expected, absent.value.actual) == (3, 0)
        assert store.state.get(ns, "k") == current
        assert store.state.get(ns, "missing") is None

    def test_delete(self, harness: Harness) -> None:
        store = harness.store
        ns = ("agent", fresh_id("a"))
        entry = store.state.put(ns, "k", 1)
        with pytest.raises(VersionConflictError):
            store.state.delete(ns, "k", expected_version=7)
        assert store.state.get(ns, "k") == entry
        assert store.state.delete(ns, "k", expected_version=1) is True
        assert store.state.get(ns, "k") is None
        assert store.state.delete(ns, "k") is False

    def test_versions_are_never_reused(self, harness: Harness) -> None:
        """Decision 5: put v1, delete, put again gives v2, so a writer holding v1 fails."""
        store = harness.store
        ns = ("agent", fresh_id("a"))
        store.state.put(ns, "k", "old")
        store.state.delete(ns, "k")
        again = store.state.put(ns, "k", "new")
        assert again.version == 2
        with pytest.raises(VersionConflictError):
            store.state.put(ns, "k", "stale writer", expected_version=1)
        assert store.state.get(ns, "k") == again

    def test_namespaces_are_isolated(self, harness: Harness) -> None:
        store = harness.store
        root = fresh_id("a")
        parent, child, sibling = (root,), (root, "b"), (root, "b2")
        p = store.state.put(parent, "k", "parent")
        c = store.state.put(child, "k", "child")
        s = store.state.put(sibling, "k", "sibling")
        assert store.state.list(parent) == [p]
        assert store.state.list(child) == [c]
        assert store.state.list(sibling) == [s]
        assert store.state.get(child, "k") == c
        assert store.state.list_namespaces(prefix=(root,)) == [parent, child, sibling]
        assert store.state.list_namespaces(prefix=child) == [child]
        assert child in store.state.list_namespaces()

    def test_list_sorting_prefix_and_limit(self, harness: Harness) -> None:
        store = harness.store
        ns = ("agent", fresh_id("a"))
        for key in ("b", "a2", "c", "a1"):
            store.state.put(ns, key, key)
        assert [e.key for e in store.state.list(ns)] == ["a1", "a2", "b", "c"]
        assert [e.key for e in store.state.list(ns, key_prefix="a")] == ["a1", "a2"]
        assert [e.key for e in store.state.list(ns, limit=3)] == ["a1", "a2", "b"]
        assert store.state.list(("agent", fresh_id("empty"))) == []

    def test_delete_namespace(self, harness: Harness) -> None:
        store = harness.store
        root = fresh_id("a")
        for key in ("x", "y"):
            store.state.put((root,), key, 1)
        kept = store.state.put((root, "child"), "x", 1)
        assert store.state.delete_namespace((root,)) == 2
        assert store.state.list((root,)) == []
        assert store.state.list((root, "child")) == [kept]

    def test_concurrent_compare_and_set(self, harness: Harness) -> None:
        store = harness.store
        ns = ("agent", fresh_id("a"))
        store.state.put(ns, "k", 0)
        outcomes = race(8, lambda i: store.state.put(ns, "k", i, expected_version=1))
        winners = [o for o in outcomes if isinstance(o, StateEntry)]
        assert len(winners) == 1
        assert all(isinstance(o, VersionConflictError) for o in outcomes if o not in winners)
        assert store.state.get(ns, "k") == winners[0]

    def test_invalid_namespaces(self, harness: Harness) -> None:
        store = harness.store
        for bad in ((), ("a", ""), ("a", "b\x00")):
            with pytest.raises(ValueError):
                store.state.put(bad, "k", 1)
        for wrong in ("agent", ("a", 1), None):
            with pytest.raises(TypeError):
                store.state.put(wrong, "k", 1)

    def test_a_value_nests_at_most_max_json_depth_levels(self, harness: Harness) -> None:
        store = harness.store
        ns = ("agent", fresh_id("a"))

        def nested(levels: int) -> object:
            value: object = 1
            for _ in range(levels):
                value = [value]
            return value

        deepest = nested(MAX_JSON_DEPTH)
        assert store.state.put(ns, "k", deepest).value == deepest
        for levels in (MAX_JSON_DEPTH + 1, 2000):  # the same refusal on every store
            with pytest.raises(ValueError, match=f"more than {MAX_JSON_DEPTH} levels") as caught:
                store.state.put(ns, "k", nested(levels))
            assert getattr(caught.value, "code", None) == "invalid_value"
        entry = store.state.get(ns, "k")
        assert entry is not None and entry.version == 1

    def test_a_key_or_namespace_too_long_for_the_entity_key_is_refused_naming_it(
        self, harness: Harness
    ) -> None:
        store = harness.store
        ns = ("agent", fresh_id("a"))
        with pytest.raises(InvalidValue) as caught:
            store.state.put(ns, fresh_sized_id("k", 1000), 1)
        message = str(caught.value)
        assert message.startswith("key: 1000 bytes is too long; a state entry's key (with its ")
        assert message.endswith(
            " with this namespace: pass a shorter one (a digest of a long one, say)"
        )
        most = stated_most(message)
        longest, longer = fresh_sized_id("k", most), fresh_sized_id("k", most + 1)
        assert store.state.put(ns, longest, 1).version == 1
        with pytest.raises(InvalidValue, match=f"^key: {most + 1} bytes is too long;"):
            store.state.put(ns, longer, 1)
        assert [e.key for e in store.state.list(ns)] == [longest]
        wide = ("agent", fresh_sized_id("a", 1500))
        with pytest.raises(InvalidValue) as labels:
            store.state.put(wide, "k", 1)
        assert str(labels.value).startswith(
            "namespace: its labels are 1505 bytes together, too long; a state entry's namespace"
        )
        assert store.state.list(wide) == []

    def test_a_value_too_large_for_one_record_is_refused_naming_it(self, harness: Harness) -> None:
        """A state entry is one record of the store (max_record_bytes, 16 MiB by default)."""
        store = harness.store
        ns = ("agent", fresh_id("a"))
        with pytest.raises(InvalidValue) as caught:
            store.state.put(ns, "k", "x" * (16 * 2**20))
        message = str(caught.value)
        assert message.startswith(
            "value: 16777218 bytes as JSON is too large for one record; with the rest of a "
            "state entry, value may be at most "
        )
        assert "max_record_bytes" in message and "state\\0" not in message
        assert store.state.get(ns, "k") is None
        most = stated_most(message)
        entry = store.state.put(ns, "k", "x" * (most - 2))  # a JSON string of `most` bytes
        assert entry.version == 1
        with pytest.raises(InvalidValue, match=f"^value: {most + 1} bytes as JSON is too large"):
            store.state.put(ns, "k", "x" * (most - 1))
        assert store.state.get(ns, "k") == entry
