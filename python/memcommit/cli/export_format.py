"""The export file's format: a record as one JSON line, and a line checked back into a change.

``memcommit export`` writes what :func:`record_line` makes; ``memcommit import`` reads it
back with :func:`parse_line`, which checks every field before anything is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import memcommit

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
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


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
    status: str | None = None
    reason: str | None = None
    state: bytes | None = None  # an entity's new state as JSON; None removes it


class BadLine(Exception):
    """A line of an export file that is not a record import can apply, and why."""


def _field_str(fields: dict[str, Any], name: str, *, default: str | None = None) -> str:
    value = fields.get(name, default)
    if not isinstance(value, str):
        raise BadLine(f"fields.{name} must be a string, got {value!r}")
    return value


def _field_optional_str(fields: dict[str, Any], name: str) -> str | None:
    value = fields.get(name)
    if value is not None and not isinstance(value, str):
        raise BadLine(f"fields.{name} must be a string or null, got {value!r}")
    return value


def _field_strings(fields: dict[str, Any], name: str) -> tuple[str, ...]:
    value = fields.get(name, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise BadLine(f"fields.{name} must be a list of strings, got {value!r}")
    return tuple(value)


def _field_status(fields: dict[str, Any], *, required: bool) -> str | None:
    status = fields.get("status")
    if status is None and not required:
        return None
    if status not in ("active", "stale"):
        raise BadLine(f"fields.status must be 'active' or 'stale', got {status!r}")
    return str(status)


def _entity_change(key: str, fields: dict[str, Any], line: int) -> Change:
    """An entity record: role entity `key` (``kind NUL key``) takes the state, or goes (null)."""
    try:
        key_bytes = len(key.encode())
    except UnicodeEncodeError:
        raise BadLine("'key' is not valid Unicode (it holds a lone surrogate)") from None
    if key_bytes > _MAX_KEY_BYTES:
        raise BadLine(f"'key' is {key_bytes:,} bytes; a record's key is at most {_MAX_KEY_BYTES:,}")
    if "state" not in fields:
        raise BadLine("an entity record must have fields.state (an object, or null to remove)")
    state = fields["state"]
    payload = None
    if state is not None:
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
    return Change(line=line, op="entity", key=key, state=payload)


def parse_line(raw: bytes, line: int) -> Change | None:
    """Check one line of an export file; returns None for a blank line."""
    if not raw.strip():
        return None
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise BadLine(f"not valid JSON ({error})") from None
    if not isinstance(obj, dict):
        raise BadLine(f"expected a JSON object, got {type(obj).__name__}")
    op = obj.get("op")
    if op == "seal":
        # A seal vouches for the bytes of the log it was written in; the importing store
        # writes records of its own, and seals them itself.
        return None
    key = obj.get("key")
    fields = obj.get("fields")
    if not isinstance(key, str) or not key:
        raise BadLine(f"'key' must be a non-empty string, got {key!r}")
    if not isinstance(fields, dict):
        raise BadLine(f"'fields' must be an object, got {fields!r}")
    if op == "put":
        data = fields.get("data")
        if data is not None and not isinstance(data, dict):
            raise BadLine(f"fields.data must be an object or null, got {data!r}")
        tier = fields.get("tier")
        if tier is not None and not isinstance(tier, str):
            raise BadLine(f"fields.tier must be a string, got {tier!r}")
        return Change(
            line=line,
            op="put",
            key=key,
            text=_field_str(fields, "text"),
            kind=_field_str(fields, "kind", default="note"),
            task=_field_optional_str(fields, "task"),
            tier=tier,
            data=data,
            tags=_field_strings(fields, "tags"),
            sources=_field_strings(fields, "sources"),
            status=_field_status(fields, required=False),
        )
    if op == "status":
        return Change(
            line=line,
            op="status",
            key=key,
            status=_field_status(fields, required=True),
            reason=_field_optional_str(fields, "reason"),
        )
    if op == "move":
        return Change(line=line, op="move", key=key, tier=_field_str(fields, "tier"))
    if op == "task":
        if fields.get("finished", True) is not True:
            raise BadLine("a task record must have fields.finished = true")
        return Change(line=line, op="task", key=key)
    if op == "entity":
        return _entity_change(key, fields, line)
    raise BadLine(f"unknown op {op!r} (expected put, status, move, task, entity or seal)")
