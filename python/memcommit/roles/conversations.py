"""Conversations: ordered turns, each written by a run.

A conversation is created explicitly; appending to an unknown one raises
:class:`~memcommit.roles.ConversationNotFoundError`. Turns get sequence numbers 1, 2, ... across
batches; a batch is atomic. Sequence numbers are never reused (ROLES.md decision 5): after
``truncate(after_seq=k)`` the next turn gets a number above every one handed out.

``Conversation.last_seq`` is what ``expected_last_seq`` compares against (optimistic
concurrency by sequence number, not time: decision 10). It rises with every change to the
turns and never takes a value twice: an append sets it to its newest turn's number; a
truncate or a run delete that removes turns, and a delete of the conversation, each take one
more number from the conversation's counter (a number no turn will have) and set it there.
Were it rewound to the newest turn left, a writer holding ``last_seq`` ``n`` while others
appended ``n + 1`` and truncated back to ``n`` would append as if nothing had changed (ABA);
instead every writer holding a ``last_seq`` from before a removal fails.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..errors import InvalidType
from ._base import RunLinked, check_optional_token, writes
from .errors import (
    ConversationAlreadyExistsError,
    ConversationNotFoundError,
    SequenceConflictError,
)
from .logged_groupings import kept_keys
from .medium import (
    CONVERSATION,
    COUNTER,
    TURN,
    WHAT,
    Change,
    KeyRoom,
    Medium,
    State,
    bump_counter,
    child_prefix,
    entity_key,
    full_key,
    read_counter,
)
from .values import (
    Count,
    Json,
    OptionalCount,
    Text,
    check_json,
    check_metadata,
    check_optional_int,
    check_optional_text,
    check_text,
    checked,
    record_reader,
)

__all__ = [
    "Conversation",
    "ConversationRepository",
    "MemoryConversationRepository",
    "NewTurn",
    "Turn",
    "turns_removed",
]


@dataclass(frozen=True)
class Conversation:
    """A conversation.

    Attributes:
        conversation_id: Its id.
        agent_id: The agent it is with, or None.
        metadata: Free JSON metadata.
        last_seq: What ``expected_last_seq`` compares against; it only rises. The number of
            its newest turn after an append; after turns were removed (a truncate, a run
            delete) or the conversation deleted and created again, a number above every
            turn's, which no turn takes. 0 for a conversation whose id is new.
        created_at_ms: When it was created.
        updated_at_ms: When it last changed.
    """

    conversation_id: str
    agent_id: str | None
    metadata: dict[str, Json]
    last_seq: int
    created_at_ms: int
    updated_at_ms: int


@dataclass(frozen=True)
class NewTurn:
    """A turn to append.

    Attributes:
        role: ``"user"``, ``"assistant"``, ``"tool"``, ``"system"`` or any other label.
        content: The turn's content (JSON).
        metadata: Free JSON metadata, or None.
    """

    role: str
    content: Json
    metadata: dict[str, Json] | None = None


@dataclass(frozen=True)
class Turn:
    """A stored turn.

    Attributes:
        conversation_id: The conversation.
        seq: Its sequence number: 1, 2, ...; never reused.
        run_id: The run that wrote it.
        role: Its role label.
        content: Its content.
        metadata: Its metadata.
        created_at_ms: When it was appended.
    """

    conversation_id: str
    seq: int
    run_id: str
    role: str
    content: Json
    metadata: dict[str, Json]
    created_at_ms: int


class ConversationRepository(Protocol):
    """The ``conversations`` role: turns of conversations."""

    def create(
        self,
        *,
        conversation_id: str | None = None,
        agent_id: str | None = None,
        metadata: dict[str, Json] | None = None,
    ) -> Conversation:
        """Create a conversation (a random id when None).

        Raises:
            ConversationAlreadyExistsError: The id exists.
        """
        ...

    def get(self, conversation_id: str) -> Conversation | None:
        """Return the conversation, or None."""
        ...

    def append(
        self,
        conversation_id: str,
        turns: Sequence[NewTurn],
        *,
        run_id: str,
        expected_last_seq: int | None = None,
        token: int | None = None,
    ) -> builtins.list[Turn]:
        """Append turns as one atomic batch.

        Raises:
            RunNotFoundError: The run does not exist; nothing was appended.
            ConversationNotFoundError: The conversation does not exist.
            SequenceConflictError: `expected_last_seq` is not the conversation's ``last_seq``.
            ClaimLostError: `token` no longer holds the run; nothing was appended.
        """
        ...

    def list_turns(
        self,
        conversation_id: str,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
        last: int | None = None,
    ) -> builtins.list[Turn]:
        """Return turns in order (``[]`` for an unknown conversation).

        Args:
            conversation_id: The conversation.
            after_seq: Only turns after this sequence number.
            limit: At most this many, from the oldest.
            last: Only the newest `last` turns (still in order); 0 gives ``[]``.
        """
        ...

    def truncate(
        self, conversation_id: str, *, after_seq: int, expected_last_seq: int | None = None
    ) -> int:
        """Remove the turns after `after_seq` (a rewind); return how many.

        When it removes any, ``last_seq`` moves to a number never handed out, so every writer
        holding an earlier one fails; when none, nothing changes.

        Raises:
            ConversationNotFoundError: The conversation does not exist.
            SequenceConflictError: `expected_last_seq` does not match.
        """
        ...

    def delete(self, conversation_id: str) -> bool:
        """Delete the conversation and its turns; False if absent.

        Created again, it continues its sequence numbers and its ``last_seq``.
        """
        ...


_conversation = record_reader(Conversation)


_turn = record_reader(Turn)

_SEQ = "conversations.seq"
"""The counter of each conversation's turns and ``last_seq`` marks."""


def turns_removed(medium: Medium, state: State, now: int) -> list[Change]:
    """The changes marking conversation `state` as having lost turns at `now`.

    Its ``last_seq`` takes the counter's next number, which no turn will have, so a writer
    holding any earlier ``last_seq`` fails (see the module docstring). For every write that
    removes turns: a truncate, a run delete. Call under the medium's lock.
    """
    conversation_id = str(state["conversation_id"])
    mark, mark_change = bump_counter(medium, _SEQ, conversation_id)
    new = {**state, "last_seq": mark, "updated_at_ms": now}
    return [mark_change, (CONVERSATION, entity_key(conversation_id), new)]


def _turn_keys(conversation_id: str, run_id: str) -> list[str]:
    """The keys of a turn of `run_id`: its own, its conversation's counter's, its run entry's."""
    key = entity_key(conversation_id, 0)  # a seq is 20 digits in a key, whichever
    turn = {"run_id": run_id, "conversation_id": conversation_id}
    return [
        full_key(TURN, conversation_id, 0),
        full_key(COUNTER, _SEQ, conversation_id),
        *kept_keys(TURN, key, turn),
    ]


_KEYS = KeyRoom(
    WHAT[CONVERSATION],
    # Room for its turns too, of a run whose id has one byte at least.
    lambda conversation_id: [
        full_key(CONVERSATION, conversation_id),
        *_turn_keys(conversation_id, "r"),
    ],
)
"""The keys of a conversation: its own and those of its turns."""

_TURN_KEYS = KeyRoom(WHAT[TURN], _turn_keys)
"""The keys of a turn."""


def _new_turn(turn: object, field: str) -> tuple[str, Json, dict[str, Json]]:
    if isinstance(turn, NewTurn):
        role, content, metadata = turn.role, turn.content, turn.metadata
    elif isinstance(turn, Mapping):
        unknown = set(turn) - {"role", "content", "metadata"}
        if unknown or "role" not in turn:
            raise InvalidType(f"{field}: a turn mapping has role, content and metadata keys")
        role, content, metadata = turn["role"], turn.get("content"), turn.get("metadata")
    else:
        raise InvalidType(f"{field} must be a NewTurn, not {type(turn).__name__}")
    return (
        check_text(role, f"{field}.role"),
        check_json(content, f"{field}.content"),
        check_metadata(metadata, f"{field}.metadata"),
    )


class MemoryConversationRepository(RunLinked):
    """The in-memory ``conversations`` role; :class:`RunLinked` documents its arguments."""

    @writes
    def create(
        self,
        *,
        conversation_id: str | None = None,
        agent_id: str | None = None,
        metadata: dict[str, Json] | None = None,
    ) -> Conversation:
        """Create a conversation. See :meth:`ConversationRepository.create`."""
        conversation_id = (
            uuid.uuid4().hex
            if conversation_id is None
            else check_text(conversation_id, "conversation_id")
        )
        agent_id = check_optional_text(agent_id, "agent_id")
        meta = check_metadata(metadata)
        _KEYS.check(conversation_id=conversation_id)
        key = entity_key(conversation_id)
        with self._medium.lock:
            now = self._now()
            if self._medium.get(CONVERSATION, key) is not None:
                raise ConversationAlreadyExistsError(conversation_id=conversation_id)
            new: State = {
                "conversation_id": conversation_id,
                "agent_id": agent_id,
                "metadata": meta,
                # Above every mark the id had before a delete (which took a number).
                "last_seq": read_counter(self._medium, _SEQ, conversation_id),
                "created_at_ms": now,
                "updated_at_ms": now,
            }
            return self._save(CONVERSATION, key, new, _conversation)

    def get(self, conversation_id: str) -> Conversation | None:
        """Return the conversation, or None."""
        return self._lookup(
            CONVERSATION, _conversation, check_text(conversation_id, "conversation_id")
        )

    def _existing(self, conversation_id: str, expected_last_seq: int | None) -> tuple[str, State]:
        key, state = self._read(CONVERSATION, conversation_id)
        if state is None:
            raise ConversationNotFoundError(conversation_id=conversation_id)
        if expected_last_seq is not None and expected_last_seq != state["last_seq"]:
            raise SequenceConflictError(
                what=f"conversation {conversation_id!r}",
                expected=expected_last_seq,
                actual=state["last_seq"],
            )
        return key, state

    @writes
    @checked
    def append(
        self,
        conversation_id: Text,
        turns: Sequence[NewTurn],
        *,
        run_id: str,
        expected_last_seq: int | None = None,
        token: int | None = None,
    ) -> builtins.list[Turn]:
        """Append turns atomically. See :meth:`ConversationRepository.append`."""
        if isinstance(turns, (str, bytes, Mapping, NewTurn)) or not isinstance(turns, Sequence):
            raise InvalidType(f"turns must be a list of NewTurn, not {type(turns).__name__}")
        new_turns = [_new_turn(turn, f"turns[{i}]") for i, turn in enumerate(turns)]
        run_id = check_text(run_id, "run_id")
        expected_last_seq = check_optional_int(expected_last_seq, "expected_last_seq")
        token = check_optional_token(token)
        _TURN_KEYS.check(conversation_id=conversation_id, run_id=run_id)
        with self._medium.lock:
            now = self._now_on_run(run_id, token)
            key, state = self._existing(conversation_id, expected_last_seq)
            if not new_turns:
                return []
            top = read_counter(self._medium, _SEQ, conversation_id)
            changes: builtins.list[Change] = []
            added = []
            for role, content, metadata in new_turns:
                top += 1
                turn: State = {
                    "conversation_id": conversation_id,
                    "seq": top,
                    "run_id": run_id,
                    "role": role,
                    "content": content,
                    "metadata": metadata,
                    "created_at_ms": now,
                }
                added.append(turn)
                changes.append((TURN, entity_key(conversation_id, top), turn))
            changes.append((COUNTER, entity_key(_SEQ, conversation_id), {"value": top}))
            changes.append((CONVERSATION, key, {**state, "last_seq": top, "updated_at_ms": now}))
            given = {entity_key(conversation_id, turn["seq"]): i for i, turn in enumerate(added)}

            def argument(kind: str, key: str, field: str) -> str:
                """Turns' fields by the caller's names (``turns[1].content``)."""
                if kind == TURN and field in ("role", "content", "metadata"):
                    return f"turns[{given[key]}].{field}"
                return field

            self._write(changes, argument)
            return [_turn(t) for t in added]

    @checked
    def list_turns(
        self,
        conversation_id: Text,
        *,
        after_seq: OptionalCount = None,
        limit: OptionalCount = None,
        last: int | None = None,
    ) -> builtins.list[Turn]:
        """Return turns in order. See :meth:`ConversationRepository.list_turns`."""
        if last is not None:
            if isinstance(last, bool) or not isinstance(last, int):
                raise InvalidType(f"last must be int, not {type(last).__name__}")
        # Keys hold the sequence number zero-padded, so key order is turn order.
        states = self._states(TURN, conversation_id)
        if after_seq is not None:
            states = [s for s in states if s["seq"] > after_seq]
        if last is not None:
            states = states[-last:] if last > 0 else []
        if limit is not None:
            states = states[:limit]
        return [_turn(s) for s in states]

    @writes
    @checked
    def truncate(
        self, conversation_id: Text, *, after_seq: Count, expected_last_seq: OptionalCount = None
    ) -> int:
        """Remove the turns after `after_seq`. See :meth:`ConversationRepository.truncate`."""
        with self._medium.lock:
            now = self._now()
            _, state = self._existing(conversation_id, expected_last_seq)
            removed: builtins.list[Change] = [
                (TURN, tkey, None)
                for tkey, turn in self._medium.scan(TURN, child_prefix(conversation_id))
                if turn["seq"] > after_seq
            ]
            if removed:
                self._write([*removed, *turns_removed(self._medium, state, now)])
            return len(removed)

    @writes
    @checked
    def delete(self, conversation_id: Text) -> bool:
        """Delete the conversation and its turns. See :meth:`ConversationRepository.delete`.

        Its counter stays and takes one more number, so the conversation created again under
        this id starts above every ``last_seq`` this one had.
        """
        key = entity_key(conversation_id)
        with self._medium.lock:
            if self._medium.get(CONVERSATION, key) is None:
                return False
            _, mark_change = bump_counter(self._medium, _SEQ, conversation_id)
            turns = self._deletions(TURN, conversation_id)
            self._write([mark_change, (CONVERSATION, key, None), *turns])
            return True


if TYPE_CHECKING:
    _: type[ConversationRepository] = MemoryConversationRepository
