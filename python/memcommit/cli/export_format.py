"""The export file's format: a record as one JSON line, and a line checked back into a change.

``memcommit export`` writes what :func:`record_line` makes, after one line that
:func:`purged_line` makes when log compaction purged memories of the store; ``memcommit
import`` reads them back with :func:`parse_line`, which checks every field before anything is
written, and an entity line against the role that keeps it (``roles=True``, see
:func:`check_entity`).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal, Union

import memcommit
from memcommit import ops
from memcommit.roles import (
    ArtifactVersion,
    Checkpoint,
    Conversation,
    EffectRecord,
    IdempotencyRecord,
    Lease,
    Revision,
    Run,
    StateEntry,
    Step,
    Turn,
)
from memcommit.roles import medium as _medium
from memcommit.roles.groupings import KEPT
from memcommit.roles.logged_groupings import MARKER, entry_kind

from ..errors import InvalidType

# The largest record the importing store takes (memcommit.open's default), and the longest
# key of a record (the format's limit): entity lines are checked against them before any of
# their batch is written.
MAX_RECORD_BYTES = 16 * 1024 * 1024
_MAX_KEY_BYTES = 1024


def _json_default(value: object) -> object:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, tuple | frozenset | set):
        return list(value)
    raise InvalidType(f"cannot write {type(value).__name__} as JSON")


def record_line(record: memcommit.Record) -> str:
    """`record` as one line of an export file (without its newline)."""
    return json.dumps(
        {
            "lsn": record.lsn,
            "op": record.op,
            "at": record.at.isoformat(),
            "key": record.key,
            "fields": record.fields,
        },
        ensure_ascii=False,
        separators=(",", ":"),
        default=_json_default,
    )


def purged_line(ids: list[str]) -> str:
    """The line that lists the ids the store's log compactions purged (without its newline).

    ``{"purged": [...]}``, before the records: a record's ``sources`` may name one of them
    (a reference to a purged memory is deliberate), so the importing store must know them.
    """
    return json.dumps({"purged": ids}, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Purged:
    """The purged ids an export file lists (its ``{"purged": [...]}`` line)."""

    line: int
    ids: tuple[str, ...]


@dataclass(frozen=True)
class Change:
    """One record of an export file, checked and ready to apply.

    A put's `tier` and `status` are the memory's state as the put recorded it (None when the
    line does not say): after log compaction a memory's last put is all that is left of the
    moves and status changes before it, so import applies them from there.
    """

    line: int
    op: str
    key: str
    text: str = ""
    kind: str = "note"
    task: str | None = None
    tier: str | None = None
    data: dict[str, Any] | None = None
    tags: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    vector: tuple[float, ...] | None = None
    status: str | None = None
    reason: str | None = None
    state: bytes | None = None  # an entity's new state as JSON; None removes it


class BadLine(Exception):
    """A line of an export file that is not a record import can apply, and why."""


_CHANGE_FIELDS = {f.name for f in dataclasses.fields(Change)}
_EXPECTED_OPS = ", ".join(kind.name for kind in ops.RECORDS[:-1]) + f" or {ops.RECORDS[-1].name}"


def _check_entity_key(key: str) -> None:
    """Refuse an entity's key (``kind NUL key``) that the log cannot hold.

    A memory record's key is the id its commit checks; an entity's is written as it is.
    """
    try:
        key_bytes = len(key.encode())
    except UnicodeEncodeError:
        raise BadLine("'key' is not valid Unicode (it holds a lone surrogate)") from None
    if key_bytes > _MAX_KEY_BYTES:
        raise BadLine(f"'key' is {key_bytes:,} bytes; a record's key is at most {_MAX_KEY_BYTES:,}")


def _entity_payload(state: Any) -> bytes | None:
    """An entity's state as the payload the log keeps (None: the entity is removed)."""
    if state is None:
        return None
    try:
        # As the roles' log medium encodes a state.
        text = json.dumps(state, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        payload = text.encode()
    except (ValueError, UnicodeEncodeError) as error:
        raise BadLine(f"fields.state cannot be stored as JSON ({error})") from None
    if len(payload) + 1 > MAX_RECORD_BYTES:
        raise BadLine(
            f"fields.state is {len(payload):,} bytes as JSON; the store takes at most "
            f"{MAX_RECORD_BYTES - 1:,}"
        )
    return payload


def _purged(ids: Any, line: int) -> Purged:
    """The ids of a ``{"purged": [...]}`` line, checked as the keys of memory records."""
    if not isinstance(ids, list):
        raise BadLine(f"'purged' must be a list of ids, got {type(ids).__name__}")
    for index, id in enumerate(ids):
        if not isinstance(id, str) or not id:
            raise BadLine(f"purged[{index}] must be a non-empty string, got {id!r:.100}")
        try:
            id_bytes = len(id.encode())
        except UnicodeEncodeError:
            raise BadLine(f"purged[{index}] is not valid Unicode (a lone surrogate)") from None
        if id_bytes > _MAX_KEY_BYTES:
            raise BadLine(
                f"purged[{index}] is {id_bytes:,} bytes; a memory's id is at most "
                f"{_MAX_KEY_BYTES:,}"
            )
    return Purged(line=line, ids=tuple(ids))


def parse_line(raw: bytes, line: int, *, roles: bool = False) -> Change | Purged | None:
    """Check one line of an export file; returns None for a blank line or a seal.

    The fields of each kind of record are checked as :data:`memcommit.ops.RECORDS` declares
    them. The line that lists the purged ids (an object with ``purged`` and no ``op``) is
    returned as :class:`Purged`. With `roles` (what ``memcommit import`` asks), an entity
    line is also checked against the role that keeps it (:func:`check_entity`).
    """
    if not raw.strip():
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise BadLine(f"not valid JSON ({error})") from None
    if not isinstance(obj, dict):
        raise BadLine(f"expected a JSON object, got {type(obj).__name__}")
    if "purged" in obj and "op" not in obj:
        return _purged(obj["purged"], line)
    kind = ops.record_kind(obj.get("op"))
    if kind is not None and not kind.imported:
        return None
    key = obj.get("key")
    record_fields = obj.get("fields")
    if not isinstance(key, str) or not key:
        raise BadLine(f"'key' must be a non-empty string, got {key!r}")
    if not isinstance(record_fields, dict):
        raise BadLine(f"'fields' must be an object, got {record_fields!r}")
    if kind is None:
        raise BadLine(f"unknown op {obj.get('op')!r} (expected {_EXPECTED_OPS})")
    if kind.name == "entity":
        _check_entity_key(key)
    try:
        values = ops.check_fields(kind, record_fields)
    except ops.BadField as error:
        raise BadLine(str(error)) from None
    if kind.name == "entity":
        if roles:
            check_entity(key, values["state"])
        values["state"] = _entity_payload(values["state"])
    # A task record says only that the task finished: nothing of it but its key is kept.
    carried = {name: value for name, value in values.items() if name in _CHANGE_FIELDS}
    return Change(line=line, op=kind.name, key=key, **carried)


# -- an entity line against its role -----------------------------------------------------------


@dataclass(frozen=True)
class _RevisionState(Revision):
    """A revision's state: the record its role's reads build, and the order of its drafts."""

    created_seq: int


@dataclass(frozen=True)
class _CounterState:
    """A counter's state (``read_counter`` and ``bump_counter`` read its value)."""

    value: int


@dataclass(frozen=True)
class _ArtifactDataState:
    """An artifact's bytes, base64 (``artifacts.load`` decodes them)."""

    data_b64: str


@dataclass(frozen=True)
class _AgentPointerState:
    """An agent's current revision (``agent_revisions`` reads its version)."""

    agent_id: str
    current_version: int | None


# The state of each kind of entity the roles keep: the record (frozen dataclass) the role's
# reads build from it with ``memcommit.roles.values.record_reader``, whose fields are keys of
# the state. The three kinds no record is built of (a counter, an artifact's bytes, an agent's
# current revision) name the fields their role reads.
_ROLE_STATES: dict[str, type] = {
    _medium.RUN: Run,
    _medium.STEP: Step,
    _medium.CHECKPOINT: Checkpoint,
    _medium.IDEMPOTENCY: IdempotencyRecord,
    _medium.LOCK: Lease,
    _medium.EFFECT: EffectRecord,
    _medium.STATE: StateEntry,
    _medium.ARTIFACT: ArtifactVersion,
    _medium.ARTIFACT_DATA: _ArtifactDataState,
    _medium.REVISION: _RevisionState,
    _medium.REVISION_AGENT: _AgentPointerState,
    _medium.CONVERSATION: Conversation,
    _medium.TURN: Turn,
    _medium.COUNTER: _CounterState,
}

# The entities of the LangGraph integration (memcommit.integrations.langgraph: its saver's
# CHECKPOINT, WRITES and HEAD, its store's ITEM), named here because that package needs the
# langgraph extra to import, and a store of them must import without it. Their states are
# read by the integration with LangGraph's serializer: only their keys and that each state is
# an object are checked.
LANGGRAPH_KINDS = ("lg.checkpoint", "lg.writes", "lg.head", "lg.item")

_SEP = "\x00"  # between an entity's kind and its key (memcommit.roles.medium.full_key)
_SHOWN = 100  # characters of a refused value a message shows


@functools.cache
def _kept_groupings() -> dict[str, str]:
    """The kinds of the entries of every grouping the log keeps, and the kind each groups.

    Read once: the roles declare their groupings as their modules are imported, before this.
    """
    return {entry_kind(kind, name): kind for kind, named in KEPT.items() for name in named}


@functools.cache
def _known_kinds() -> tuple[str, ...]:
    return (*_ROLE_STATES, *LANGGRAPH_KINDS, MARKER, *_kept_groupings())


@functools.cache
def _check_of(hint: Any) -> Callable[[Any], bool]:
    """The test of whether a JSON value is what a record's field typed `hint` holds."""
    if hint is Any:
        return lambda value: True  # Json: any JSON value (the line's JSON was parsed already)
    if hint is type(None):
        return lambda value: value is None
    if hint is str:
        return lambda value: type(value) is str
    if hint is int:
        return lambda value: type(value) is int  # not a bool, not 1.0
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Literal:
        allowed = frozenset(args)
        kinds = frozenset(type(arg) for arg in args)
        return lambda value: type(value) in kinds and value in allowed
    if origin in (Union, types.UnionType):
        checks = tuple(_check_of(arg) for arg in args)
        return lambda value: any(check(value) for check in checks)
    if origin is dict:  # dict[str, Json]: an object (JSON keys are strings)
        item = _check_of(args[1])
        return lambda value: type(value) is dict and all(map(item, value.values()))
    if origin is tuple:  # Namespace: a JSON array of strings, read as a tuple
        item = _check_of(args[0])
        return lambda value: type(value) is list and all(map(item, value))
    raise InvalidType(f"an entity's state has a field of type {hint!r}, which import cannot check")


@functools.cache
def _fields_of(state_type: type) -> tuple[tuple[str, Any, Callable[[Any], bool]], ...]:
    """The fields of `state_type` (a frozen dataclass): name, type and its test, in order."""
    hints = typing.get_type_hints(state_type)
    return tuple(
        (f.name, hints[f.name], _check_of(hints[f.name])) for f in dataclasses.fields(state_type)
    )


def _describe(hint: Any) -> str:
    """What a field typed `hint` must be, for "must be ..." in a message."""
    if hint is Any:
        return "JSON"
    if hint is type(None):
        return "null"
    if hint is str:
        return "a string"
    if hint is int:
        return "an integer"
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Literal:
        return " or ".join(repr(arg) for arg in args)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(arg) for arg in args)
    if origin is dict:
        return "an object"
    return "a list of strings"  # tuple[str, ...]


def _is_entity_key(text: str) -> bool:
    """Whether `text` is an entity's key as the roles make it (``entity_key(*parts)``).

    The JSON array of its parts (strings, a namespace an array of strings), written as
    :func:`memcommit.roles.medium.entity_key` writes it.
    """
    try:
        parts = json.loads(text)
    except ValueError:
        return False
    if not isinstance(parts, list) or not parts:
        return False
    made: list[str | tuple[str, ...]] = []
    for part in parts:
        if isinstance(part, str):
            made.append(part)
        elif isinstance(part, list) and all(isinstance(label, str) for label in part):
            made.append(tuple(part))
        else:
            return False
    return _medium.entity_key(*made) == text


def _check_entity_key_of(kind: str, rest: str) -> None:
    """Refuse `rest`, the key after the kind, unless it is one an entity of `kind` has."""
    if kind == MARKER:  # a kept grouping's marker: the grouping's name
        if rest not in _kept_groupings():
            raise BadLine(
                f"'key': a {MARKER!r} entity marks a grouping the log keeps, one of "
                f"{', '.join(sorted(_kept_groupings()))}; got {rest!r:.{_SHOWN}}"
            )
        return
    if kind in _kept_groupings():  # an entry: GROUP NUL RANK NUL the grouped entity's key
        pieces = rest.split(_SEP, 2)
        if len(pieces) != 3 or not _is_entity_key(pieces[2]):
            raise BadLine(
                f"'key': an entry of grouping {kind!r} is its group, a NUL, its rank, a NUL "
                f"and the key of a {_kept_groupings()[kind]!r} entity; got {rest!r:.{_SHOWN}}"
            )
        return
    if not _is_entity_key(rest):
        raise BadLine(
            f"'key': the key of an entity of kind {kind!r}, after the NUL, is the JSON array "
            'of its key parts as the roles write it (["run-1"], ["run-1","00000000000000000001"]'
            f"); got {rest!r:.{_SHOWN}}"
        )


def _check_role_state(kind: str, state_type: type, state: Any) -> None:
    """Refuse `state` unless the reads of the role that keeps `kind` take it."""
    fields = _fields_of(state_type)
    if not isinstance(state, dict):
        raise _not_an_object(kind, state)
    missing = [name for name, _, _ in fields if name not in state]
    if missing:
        raise BadLine(
            f"fields.state of entity kind {kind!r} lacks {', '.join(map(repr, missing))} (the "
            "state of every entity of that kind has it: its role reads it)"
        )
    for name, hint, holds in fields:
        if not holds(state[name]):
            raise BadLine(
                f"fields.state.{name} of entity kind {kind!r} must be {_describe(hint)}, got "
                f"{state[name]!r:.{_SHOWN}}"
            )
    if state_type is _ArtifactDataState:
        try:
            base64.b64decode(state["data_b64"], validate=True)
        except (binascii.Error, ValueError):
            raise BadLine(
                f"fields.state.data_b64 of entity kind {kind!r} must be an artifact's bytes in "
                "base64"
            ) from None


def _not_an_object(kind: str, state: Any) -> BadLine:
    return BadLine(
        f"fields.state of entity kind {kind!r} must be an object (or null to remove the "
        f"entity), got {state!r:.{_SHOWN}}"
    )


def check_entity(key: str, state: Any) -> None:
    """Refuse an entity line whose key or state the roles could not read back.

    The key must be a kind the roles (or the LangGraph integration, or the groupings the log
    keeps for them) write, a NUL, and a key as they make it. The state, unless it is null (the
    entity removed), must be one the reads of that kind's role take: every field of the record
    they build, each of the type the record declares (the roles' own records, read by
    ``memcommit.roles.values.record_reader``), so that a read of the imported store never
    fails on it.

    Raises:
        BadLine: Saying what is wrong with the key or the state.
    """
    kind, sep, rest = key.partition(_SEP)
    if not sep:
        raise BadLine(
            "'key' of an entity is its kind, a NUL (\\u0000) and its key, as the roles write "
            f'it ("run\\u0000[\\"run-1\\"]"); got {key!r:.{_SHOWN}}'
        )
    known = _known_kinds()
    if kind not in _ROLE_STATES and kind not in known:
        raise BadLine(
            f"'key' names entity kind {kind!r:.{_SHOWN}}, which no role keeps (the kinds are "
            f"{', '.join(known)})"
        )
    _check_entity_key_of(kind, rest)
    if state is None:
        return
    state_type = _ROLE_STATES.get(kind)
    if state_type is not None:
        _check_role_state(kind, state_type, state)
    elif not isinstance(state, dict):
        raise _not_an_object(kind, state)
