"""Contract: agent revisions (research/roles.md 4.9; ROLES.md decision 8)."""

# Test methods say what they check in their names; only some need a docstring.
# ruff: noqa: D102

from __future__ import annotations

from collections.abc import Callable

import pytest

from ...errors import InvalidValue
from ...roles import (
    InvalidStateError,
    Revision,
    RevisionAlreadyExistsError,
    RevisionImmutableError,
    RevisionNotFoundError,
    VersionConflictError,
)
from ..race import race
from .harness import Harness, fresh_id, fresh_sized_id, stated_most


class TestRevisions:
    """Versioned agent definitions."""

    def test_create_and_update_a_draft(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        agent = fresh_id("agent")
        draft = store.agent_revisions.create_draft(agent, {"prompt": "hi"})
        assert (draft.agent_id, draft.status, draft.version) == (agent, "draft", None)
        assert draft.created_at_ms == draft.updated_at_ms == clock.now_ms()
        assert draft.published_at_ms is None and draft.parent_revision_id is None
        clock.advance(3)
        updated = store.agent_revisions.update_draft(agent, draft.revision_id, {"prompt": "yo"})
        assert updated.definition == {"prompt": "yo"} and updated.checksum != draft.checksum
        assert updated.updated_at_ms == clock.now_ms()
        assert store.agent_revisions.get(agent, draft.revision_id) == updated
        with pytest.raises(VersionConflictError):
            store.agent_revisions.update_draft(
                agent, draft.revision_id, {"prompt": "x"}, expected_checksum=draft.checksum
            )
        checked = store.agent_revisions.update_draft(
            agent, draft.revision_id, {"prompt": "z"}, expected_checksum=updated.checksum
        )
        assert checked.definition == {"prompt": "z"}

    def test_create_with_ids(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        base = store.agent_revisions.create_draft(agent, {}, revision_id="r1")
        assert base.revision_id == "r1"
        with pytest.raises(RevisionAlreadyExistsError):
            store.agent_revisions.create_draft(agent, {"other": 1}, revision_id="r1")
        assert store.agent_revisions.get(agent, "r1") == base
        child = store.agent_revisions.create_draft(agent, {}, parent_revision_id="r1")
        assert child.parent_revision_id == "r1"
        with pytest.raises(RevisionNotFoundError):
            store.agent_revisions.create_draft(agent, {}, parent_revision_id="nope")
        assert store.agent_revisions.get(agent, "nope") is None

    def test_publish_assigns_versions_and_moves_current(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        assert store.agent_revisions.get_current(agent) is None
        r1 = store.agent_revisions.create_draft(agent, {"v": 1})
        r2 = store.agent_revisions.create_draft(agent, {"v": 2})
        p1 = store.agent_revisions.publish(agent, r1.revision_id)
        assert (p1.status, p1.version) == ("published", 1)
        assert p1.published_at_ms is not None
        assert store.agent_revisions.get_current(agent) == p1
        p2 = store.agent_revisions.publish(agent, r2.revision_id)
        assert p2.version == 2
        assert store.agent_revisions.get_current(agent) == p2
        assert store.agent_revisions.get_version(agent, 1) == p1
        assert store.agent_revisions.get_version(agent, 3) is None

    def test_published_revisions_are_immutable(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        draft = store.agent_revisions.create_draft(agent, {"v": 1})
        published = store.agent_revisions.publish(agent, draft.revision_id)
        with pytest.raises(RevisionImmutableError) as caught:
            store.agent_revisions.update_draft(agent, draft.revision_id, {"v": 9})
        assert (caught.value.agent_id, caught.value.revision_id) == (agent, draft.revision_id)
        assert store.agent_revisions.get(agent, draft.revision_id) == published

    def test_publish_twice_returns_it_unchanged(self, harness: Harness) -> None:
        """Decision 8: publishing a published revision returns it; no version is used up."""
        store, clock = harness.store, harness.clock
        agent = fresh_id("agent")
        r1 = store.agent_revisions.create_draft(agent, {"v": 1})
        first = store.agent_revisions.publish(agent, r1.revision_id)
        clock.advance(5)
        assert store.agent_revisions.publish(agent, r1.revision_id) == first
        r2 = store.agent_revisions.create_draft(agent, {"v": 2})
        assert store.agent_revisions.publish(agent, r2.revision_id).version == 2

    def test_publishing_equal_content_makes_a_new_version(self, harness: Harness) -> None:
        """Decision 8: publishing always makes a new version."""
        store = harness.store
        agent = fresh_id("agent")
        a = store.agent_revisions.create_draft(agent, {"same": [1, 2]})
        b = store.agent_revisions.create_draft(agent, {"same": [1, 2]})
        assert a.checksum == b.checksum
        store.agent_revisions.publish(agent, a.revision_id)
        second = store.agent_revisions.publish(agent, b.revision_id)
        assert second.version == 2 and second.revision_id == b.revision_id

    def test_archive(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        r1 = store.agent_revisions.create_draft(agent, {"v": 1})
        current = store.agent_revisions.publish(agent, r1.revision_id)
        with pytest.raises(InvalidStateError):
            store.agent_revisions.archive(agent, r1.revision_id)
        assert store.agent_revisions.get(agent, r1.revision_id) == current
        draft = store.agent_revisions.create_draft(agent, {"v": 2})
        archived = store.agent_revisions.archive(agent, draft.revision_id)
        assert archived.status == "archived"
        assert store.agent_revisions.archive(agent, draft.revision_id) == archived
        with pytest.raises(InvalidStateError) as caught:
            store.agent_revisions.publish(agent, draft.revision_id)
        assert (caught.value.current, caught.value.attempted) == ("archived", "publish")
        with pytest.raises(RevisionImmutableError):
            store.agent_revisions.update_draft(agent, draft.revision_id, {"v": 3})

    def test_set_current(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        ids = [store.agent_revisions.create_draft(agent, {"v": n}).revision_id for n in (1, 2)]
        p1, p2 = (store.agent_revisions.publish(agent, i) for i in ids)
        assert store.agent_revisions.set_current(agent, 1) == p1
        assert store.agent_revisions.get_current(agent) == p1
        with pytest.raises(RevisionNotFoundError) as caught:
            store.agent_revisions.set_current(agent, 99)
        assert (caught.value.agent_id, caught.value.version) == (agent, 99)
        assert store.agent_revisions.get_current(agent) == p1
        store.agent_revisions.archive(agent, p2.revision_id)
        with pytest.raises(InvalidStateError):
            store.agent_revisions.set_current(agent, 2)
        r3 = store.agent_revisions.create_draft(agent, {"v": 3})
        assert store.agent_revisions.publish(agent, r3.revision_id).version == 3

    def test_versions_are_contiguous_and_agents_isolated(self, harness: Harness) -> None:
        store = harness.store
        a, b = fresh_id("agent"), fresh_id("agent")
        for n in range(3):
            store.agent_revisions.publish(a, store.agent_revisions.create_draft(a, n).revision_id)
        only = store.agent_revisions.publish(
            b, store.agent_revisions.create_draft(b, "b").revision_id
        )
        assert [r.version for r in store.agent_revisions.list(a)] == [3, 2, 1]
        assert only.version == 1
        assert store.agent_revisions.list(b) == [only]

    def test_list_order_and_status(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        d1 = store.agent_revisions.create_draft(agent, 1)
        p = store.agent_revisions.create_draft(agent, 2)
        d2 = store.agent_revisions.create_draft(agent, 3)
        published = store.agent_revisions.publish(agent, p.revision_id)
        listed = store.agent_revisions.list(agent)
        assert [r.revision_id for r in listed] == [p.revision_id, d1.revision_id, d2.revision_id]
        assert store.agent_revisions.list(agent, status="published") == [published]
        assert [r.revision_id for r in store.agent_revisions.list(agent, status="draft")] == [
            d1.revision_id,
            d2.revision_id,
        ]
        assert store.agent_revisions.list(fresh_id("agent")) == []

    def test_checksum_is_canonical(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        a = store.agent_revisions.create_draft(agent, {"a": 1, "b": [1, {"c": 2, "d": 3}]})
        b = store.agent_revisions.create_draft(agent, {"b": [1, {"d": 3, "c": 2}], "a": 1})
        c = store.agent_revisions.create_draft(agent, {"a": 1, "b": [1, {"c": 2, "d": 4}]})
        assert a.checksum == b.checksum != c.checksum
        assert len(a.checksum) == 64

    def test_concurrent_publish(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        ids = [store.agent_revisions.create_draft(agent, n).revision_id for n in range(2)]
        outcomes = race(2, lambda i: store.agent_revisions.publish(agent, ids[i]))
        assert all(isinstance(o, Revision) for o in outcomes)
        assert sorted(o.version for o in outcomes) == [1, 2]  # type: ignore[union-attr]

    def test_unknown_revision_writes_raise(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        writes: list[Callable[[], object]] = [
            lambda: store.agent_revisions.publish(agent, "nope"),
            lambda: store.agent_revisions.update_draft(agent, "nope", {}),
            lambda: store.agent_revisions.archive(agent, "nope"),
        ]
        for write in writes:
            with pytest.raises(RevisionNotFoundError) as caught:
                write()
            assert caught.value.revision_id == "nope"
        assert store.agent_revisions.list(agent) == []

    def test_an_id_too_long_for_the_keys_is_refused_naming_it(self, harness: Harness) -> None:
        store = harness.store
        agent = fresh_id("agent")
        with pytest.raises(InvalidValue) as caught:
            store.agent_revisions.create_draft(agent, {}, revision_id=fresh_sized_id("rev", 1000))
        message = str(caught.value)
        assert message.startswith(
            "revision_id: 1000 bytes is too long; a revision's revision_id (with its "
        )
        most = stated_most(message)
        longest, longer = fresh_sized_id("rev", most), fresh_sized_id("rev", most + 1)
        store.agent_revisions.create_draft(agent, {}, revision_id=longest)
        published = store.agent_revisions.publish(agent, longest)
        with pytest.raises(InvalidValue, match=f"^revision_id: {most + 1} bytes is too long;"):
            store.agent_revisions.create_draft(agent, {}, revision_id=longer)
        assert store.agent_revisions.list(agent) == [published]
        wide = fresh_sized_id("agent", 1000)
        with pytest.raises(InvalidValue, match=r"^agent_id: 1000 bytes is too long; a revision"):
            store.agent_revisions.create_draft(wide, {})
        assert store.agent_revisions.list(wide) == []
