"""The export file's format: a record as one JSON line, and a line checked back into a change.

``memcommit export`` writes what :func:`record_line` makes, after one line that
:func:`purged_line` makes when log compaction purged memories of the store; ``memcommit
import`` reads them back with :func:`parse_line`, which checks every field before anything is
written.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import memcommit
from memcommit import ops

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


def parse_line(raw: bytes, line: int) -> Change | Purged | None:
    """Check one line of an export file; returns None for a blank line or a seal.

    The fields of each kind of record are checked as :data:`memcommit.ops.RECORDS` declares
    them. The line that lists the purged ids (an object with ``purged`` and no ``op``) is
    returned as :class:`Purged`.
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
        values["state"] = _entity_payload(values["state"])
    # A task record says only that the task finished: nothing of it but its key is kept.
    carried = {name: value for name, value in values.items() if name in _CHANGE_FIELDS}
    return Change(line=line, op=kind.name, key=key, **carried)
