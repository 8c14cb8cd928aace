"""Contract: conversations (research/roles.md 4.10; ROLES.md decisions 5 and 7)."""

# Test methods say what they check in their names; only some need a docstring.
# ruff: noqa: D102

from __future__ import annotations

import pytest

from ...errors import InvalidValue
from ...roles import (
    ConversationAlreadyExistsError,
    ConversationNotFoundError,
    NewTurn,
    RunNotFoundError,
    SequenceConflictError,
)
from ..race import race
from .harness import Harness, fresh_id, fresh_run, fresh_sized_id, stated_most


def _setup(harness: Harness) -> tuple[str, str]:
    run_id = fresh_run(harness.store)
    conversation = harness.store.conversations.create(conversation_id=fresh_id("conv"))
    return conversation.conversation_id, run_id


def _turns(*texts: str) -> list[NewTurn]:
    return [NewTurn("user", text) for text in texts]


class TestConversations:
    """Ordered turns written by runs."""

    def test_create_and_get(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        conversation_id, agent = fresh_id("conv"), fresh_id("agent")
        created = store.conversations.create(
            conversation_id=conversation_id, agent_id=agent, metadata={"channel": "web"}
        )
        assert (created.conversation_id, created.agent_id, created.last_seq) == (
            conversation_id,
            agent,
            0,
        )
        assert created.metadata == {"channel": "web"}
        assert created.created_at_ms == created.updated_at_ms == clock.now_ms()
        assert store.conversations.get(conversation_id) == created
        with pytest.raises(ConversationAlreadyExistsError):
            store.conversations.create(conversation_id=conversation_id)
        assert store.conversations.get(conversation_id) == created
        generated = store.conversations.create()
        assert generated.conversation_id != conversation_id

    def test_reads_of_an_unknown_conversation(self, harness: Harness) -> None:
        conversation_id = fresh_id("conv")
        assert harness.store.conversations.get(conversation_id) is None
        assert harness.store.conversations.list_turns(conversation_id) == []
        assert harness.store.conversations.delete(conversation_id) is False

    def test_append_with_an_unknown_run(self, harness: Harness) -> None:
        store = harness.store
        conversation_id, _ = _setup(harness)
        before = store.conversations.get(conversation_id)
        with pytest.raises(RunNotFoundError):
            store.conversations.append(conversation_id, _turns("hi"), run_id=fresh_id("run"))
        assert store.conversations.list_turns(conversation_id) == []
        assert store.conversations.get(conversation_id) == before

    def test_append_to_an_unknown_conversation(self, harness: Harness) -> None:
        """Decision 7: appending never creates a conversation."""
        store = harness.store
        _, run_id = _setup(harness)
        conversation_id = fresh_id("conv")
        with pytest.raises(ConversationNotFoundError) as caught:
            store.conversations.append(conversation_id, _turns("hi"), run_id=run_id)
        assert caught.value.conversation_id == conversation_id
        assert store.conversations.get(conversation_id) is None
        with pytest.raises(ConversationNotFoundError):
            store.conversations.truncate(conversation_id, after_seq=0)

    def test_append_numbers_turns_across_batches(self, harness: Harness) -> None:
        store, clock = harness.store, harness.clock
        conversation_id, run_id = _setup(harness)
        first = store.conversations.append(
            conversation_id,
            [NewTurn("user", "hi", {"lang": "en"}), NewTurn("assistant", {"text": "hello"})],
            run_id=run_id,
        )
        assert [t.seq for t in first] == [1, 2]
        assert [t.role for t in first] == ["user", "assistant"]
        assert first[0].metadata == {"lang": "en"} and first[1].metadata == {}
        assert all(t.run_id == run_id and t.created_at_ms == clock.now_ms() for t in first)
        clock.advance(9)
        second = store.conversations.append(conversation_id, _turns("again"), run_id=run_id)
        assert [t.seq for t in second] == [3]
        conversation = store.conversations.get(conversation_id)
        assert conversation is not None
        assert (conversation.last_seq, conversation.updated_at_ms) == (3, clock.now_ms())
        assert store.conversations.list_turns(conversation_id) == first + second

    def test_a_batch_is_atomic(self, harness: Harness) -> None:
        store = harness.store
        conversation_id, run_id = _setup(harness)
        bad = [NewTurn("user", "ok"), NewTurn("user", float("nan"))]
        with pytest.raises(ValueError):
            store.conversations.append(conversation_id, bad, run_id=run_id)
        with pytest.raises(TypeError):
            store.conversations.append(
                conversation_id, [NewTurn("user", "ok"), NewTurn("user", (1, 2))], run_id=run_id
            )
        assert store.conversations.list_turns(conversation_id) == []
        conversation = store.conversations.get(conversation_id)
        assert conversation is not None and conversation.last_seq == 0

    def test_expected_last_seq(self, harness: Harness) -> None:
        store = harness.store
        conversation_id, run_id = _setup(harness)
        store.conversations.append(conversation_id, _turns("a", "b"), run_id=run_id)
        with pytest.raises(SequenceConflictError) as caught:
            store.conversations.append(
                conversation_id, _turns("c"), run_id=run_id, expected_last_seq=1
            )
        assert (caught.value.expected, caught.value.actual) == (1, 2)
        assert len(store.conversations.list_turns(conversation_id)) == 2
        added = store.conversations.append(
            conversation_id, _turns("c"), run_id=run_id, expected_last_seq=2
        )
        assert [t.seq for t in added] == [3]

    def test_list_turns_windows(self, harness: Harness) -> None:
        store = harness.store
        conversation_id, run_id = _setup(harness)
        turns = store.conversations.append(
            conversation_id, _turns("1", "2", "3", "4", "5"), run_id=run_id
        )
        list_turns = store.conversations.list_turns
        assert list_turns(conversation_id) == turns
        assert list_turns(conversation_id, after_seq=3) == turns[3:]
        assert list_turns(conversation_id, limit=2) == turns[:2]
        assert list_turns(conversation_id, last=2) == turns[3:]
        assert list_turns(conversation_id, last=0) == []
        assert list_turns(conversation_id, last=-1) == []
        assert list_turns(conversation_id, last=99) == turns
        assert list_turns(conversation_id, after_seq=1, limit=2) == turns[1:3]

    def test_truncate_never_reuses_seq(self, harness: Harness) -> None:
        """Decision 5: after truncate, the next turn and ``last_seq`` get numbers never used.

        ``last_seq`` moves above every number handed out (research 4.10.6: a writer holding
        one from before the truncate fails, because it changed), never back to 2, which it was.
        """
        store = harness.store
        conversation_id, run_id = _setup(harness)
        turns = store.conversations.append(
            conversation_id, _turns("1", "2", "3", "4"), run_id=run_id
        )
        with pytest.raises(SequenceConflictError):
            store.conversations.truncate(conversation_id, after_seq=2, expected_last_seq=3)
        assert store.conversations.truncate(conversation_id, after_seq=2, expected_last_seq=4) == 2
        assert store.conversations.list_turns(conversation_id) == turns[:2]
        conversation = store.conversations.get(conversation_id)
        assert conversation is not None and conversation.last_seq > 4
        for stale in (4, 2):
            with pytest.raises(SequenceConflictError) as caught:
                store.conversations.append(
                    conversation_id, _turns("stale"), run_id=run_id, expected_last_seq=stale
                )
            assert caught.value.actual == conversation.last_seq
        added = store.conversations.append(
            conversation_id, _turns("5"), run_id=run_id, expected_last_seq=conversation.last_seq
        )
        assert added[0].seq > conversation.last_seq
        assert [t.seq for t in store.conversations.list_turns(conversation_id)] == [
            1,
            2,
            added[0].seq,
        ]
        after = store.conversations.get(conversation_id)
        assert after is not None and after.last_seq == added[0].seq
        assert store.conversations.truncate(conversation_id, after_seq=99) == 0
        assert store.conversations.get(conversation_id) == after

    def test_a_writer_from_before_a_rewind_fails_though_last_seq_came_back(
        self, harness: Harness
    ) -> None:
        """Decisions 5 and 10: no ABA, where a rewound ``last_seq`` would let a stale writer in.

        W reads ``last_seq`` 1; another appends 2 and truncates it away; W's append expecting 1
        must fail, as the conversation changed under it.
        """
        store = harness.store
        conversation_id, run_id = _setup(harness)
        store.conversations.append(conversation_id, _turns("hi"), run_id=run_id)
        seen = store.conversations.get(conversation_id)
        assert seen is not None and seen.last_seq == 1
        store.conversations.append(conversation_id, _turns("x"), run_id=run_id)
        assert store.conversations.truncate(conversation_id, after_seq=1) == 1
        before = store.conversations.get(conversation_id)
        assert before is not None and before.last_seq not in (0, 1, 2)
        with pytest.raises(SequenceConflictError) as caught:
            store.conversations.append(
                conversation_id, _turns("late"), run_id=run_id, expected_last_seq=seen.last_seq
            )
        assert (caught.value.expected, caught.value.actual) == (1, before.last_seq)
        with pytest.raises(SequenceConflictError):
            store.conversations.truncate(conversation_id, after_seq=0, expected_last_seq=1)
        assert store.conversations.get(conversation_id) == before
        assert [t.seq for t in store.conversations.list_turns(conversation_id)] == [1]

    def test_a_run_delete_that_removes_turns_moves_last_seq_on(self, harness: Harness) -> None:
        """A run delete cascades to its turns; like a truncate, it never rewinds ``last_seq``."""
        store = harness.store
        conversation_id, run_id = _setup(harness)
        other = fresh_run(store)
        store.conversations.append(conversation_id, _turns("hi"), run_id=run_id)
        seen = store.conversations.get(conversation_id)
        assert seen is not None and seen.last_seq == 1
        store.conversations.append(conversation_id, _turns("by the other"), run_id=other)
        assert store.runs.delete(other) is True
        after = store.conversations.get(conversation_id)
        assert after is not None and after.last_seq > 2
        assert after.updated_at_ms == harness.clock.now_ms()
        for stale in (1, 2):
            with pytest.raises(SequenceConflictError):
                store.conversations.append(
                    conversation_id, _turns("late"), run_id=run_id, expected_last_seq=stale
                )
        assert store.conversations.get(conversation_id) == after
        added = store.conversations.append(
            conversation_id, _turns("now"), run_id=run_id, expected_last_seq=after.last_seq
        )
        assert added[0].seq > after.last_seq
        assert [t.seq for t in store.conversations.list_turns(conversation_id)] == [
            1,
            added[0].seq,
        ]

    def test_delete_and_recreate_never_reuses_seq(self, harness: Harness) -> None:
        """Decision 5: the conversation created again continues the numbers and ``last_seq``.

        So a writer holding a ``last_seq`` of the deleted one (0 included) fails on the new.
        """
        store = harness.store
        conversation_id, run_id = _setup(harness)
        store.conversations.append(conversation_id, _turns("a", "b"), run_id=run_id)
        assert store.conversations.delete(conversation_id) is True
        assert store.conversations.delete(conversation_id) is False
        assert store.conversations.list_turns(conversation_id) == []
        again = store.conversations.create(conversation_id=conversation_id)
        assert again.last_seq > 2
        for stale in (0, 2):
            with pytest.raises(SequenceConflictError):
                store.conversations.append(
                    conversation_id, _turns("c"), run_id=run_id, expected_last_seq=stale
                )
        added = store.conversations.append(
            conversation_id, _turns("c"), run_id=run_id, expected_last_seq=again.last_seq
        )
        assert added[0].seq > again.last_seq
        empty = store.conversations.create(conversation_id=fresh_id("conv")).conversation_id
        assert store.conversations.delete(empty) is True
        assert store.conversations.create(conversation_id=empty).last_seq > 0

    def test_concurrent_appends_with_expected_last_seq(self, harness: Harness) -> None:
        store = harness.store
        conversation_id, run_id = _setup(harness)
        outcomes = race(
            2,
            lambda i: store.conversations.append(
                conversation_id, _turns(f"from {i}"), run_id=run_id, expected_last_seq=0
            ),
        )
        winners = [o for o in outcomes if isinstance(o, list)]
        losers = [o for o in outcomes if isinstance(o, Exception)]
        assert len(winners) == 1 and len(losers) == 1
        assert isinstance(losers[0], SequenceConflictError)
        assert store.conversations.list_turns(conversation_id) == winners[0]

    def test_isolation_and_copies(self, harness: Harness) -> None:
        store = harness.store
        a, run_id = _setup(harness)
        b = store.conversations.create(conversation_id=fresh_id("conv")).conversation_id
        content = {"parts": ["x"]}
        turn = store.conversations.append(a, [NewTurn("user", content)], run_id=run_id)[0]
        content["parts"].append("mutated")
        assert store.conversations.list_turns(b) == []
        listed = store.conversations.list_turns(a)
        assert listed == [turn] and listed[0].content == {"parts": ["x"]}
        listed[0].content["parts"].append("mutated")
        assert store.conversations.list_turns(a)[0].content == {"parts": ["x"]}
        assert store.conversations.append(a, [], run_id=run_id) == []

    def test_a_conversation_id_too_long_for_its_keys_is_refused_naming_it(
        self, harness: Harness
    ) -> None:
        """The limit leaves room for the keys of its turns (which also hold their run's id)."""
        store = harness.store
        with pytest.raises(InvalidValue) as caught:
            store.conversations.create(conversation_id=fresh_sized_id("conv", 1000))
        message = str(caught.value)
        assert message.startswith(
            "conversation_id: 1000 bytes is too long; a conversation's conversation_id (with its "
        )
        most = stated_most(message)
        longest, longer = fresh_sized_id("conv", most), fresh_sized_id("conv", most + 1)
        assert store.conversations.create(conversation_id=longest).last_seq == 0
        with pytest.raises(InvalidValue, match=f"^conversation_id: {most + 1} bytes is too long;"):
            store.conversations.create(conversation_id=longer)
        assert store.conversations.get(longer) is None
        half = store.conversations.create(conversation_id=fresh_sized_id("conv", most // 2))
        run_id = fresh_run(store)
        turns = store.conversations.append(half.conversation_id, _turns("hi"), run_id=run_id)
        assert [t.seq for t in turns] == [1]

    def test_a_turn_whose_keys_are_too_long_is_refused_naming_the_longest_id(
        self, harness: Harness
    ) -> None:
        """A turn's keys hold its conversation's id and its run's: the longer one is named."""
        store = harness.store
        conversation_id = store.conversations.create(
            conversation_id=fresh_id("conv")
        ).conversation_id
        run_id = fresh_sized_id("run", 970)
        store.runs.create(agent_id=fresh_id("agent"), run_id=run_id)
        with pytest.raises(InvalidValue) as caught:
            store.conversations.append(conversation_id, _turns("hi"), run_id=run_id)
        message = str(caught.value)
        assert message.startswith("run_id: 970 bytes is too long; a turn's run_id (with its ")
        assert " with this conversation_id: " in message
        conversation = store.conversations.get(conversation_id)
        assert conversation is not None and conversation.last_seq == 0
        assert store.conversations.list_turns(conversation_id) == []
        most = stated_most(message)
        fits = fresh_sized_id("run", most)
        store.runs.create(agent_id=fresh_id("agent"), run_id=fits)
        turns = store.conversations.append(conversation_id, _turns("hi"), run_id=fits)
        assert [t.seq for t in turns] == [1]
