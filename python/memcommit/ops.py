"""The operations a commit can hold and the records the log keeps, each declared once.

A commit is a list of operations (``put``, ``put_many``, ``stale``, ``restore``, ``move``,
``finish_task``) and guards (``expect``). Each is a method of the same name, with the same
parameters, on :class:`~memcommit.Commit` and on a remote store's commit; the one-operation
shortcuts of :class:`~memcommit.MemoryStore` and :class:`~memcommit.aio.AsyncMemoryStore`
take the same parameters too (``tests/test_ops.py`` holds every one of them to this table).

On the wire (see :mod:`memcommit.wire`) an operation is a JSON list: its name, then its
fields in the order declared here, with a memory's ``data`` as JSON text (the client encodes
and checks it, so the server reads back exactly what the client's own checks accepted).
:func:`to_wire` makes that list, :func:`check_wire` checks its shape and :func:`apply` runs it
on a commit, whose own checks then judge every value.

The log keeps records (``put``, ``status``, ``move``, ``task``, ``entity``, ``seal``):
:data:`RECORDS` declares each kind with its op number in the log and its fields, in the order
and with the types :attr:`memcommit.Record.fields` gives them and an export file's lines carry
them (``docs/format.md``, "The export file"). ``memcommit import`` checks a line's fields with
:func:`check_fields`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .clock import parse_iso
from .commit import encode_data
from .errors import InvalidType, InvalidValue

__all__ = [
    "EXPECT",
    "FINISH_TASK",
    "MOVE",
    "OPERATIONS",
    "PUT",
    "PUT_MANY",
    "RECORDS",
    "REQUIRED",
    "RESTORE",
    "STALE",
    "BadField",
    "FieldType",
    "Operation",
    "RecordField",
    "RecordKind",
    "apply",
    "by_name",
    "check_fields",
    "check_wire",
    "embed_missing",
    "record_kind",
    "to_wire",
]


@dataclass(frozen=True)
class Operation:
    """One kind of operation: its name (the commit's method) and its fields in wire order.

    `positional` is the field the method takes first, by position (the text or the id); the
    others are keywords on the methods that take them as such. `json` names the fields that
    travel as JSON text. `optional` is how many of the last fields a wire list may leave out
    (None then): fields added after the wire form was first fixed, so a client that does not
    know them is still understood.
    """

    name: str
    fields: tuple[str, ...]
    positional: str
    json: frozenset[str] = frozenset()
    optional: int = 0

    @property
    def arity(self) -> int:
        """How many values follow the name in the wire list (at most)."""
        return len(self.fields)

    @property
    def least(self) -> int:
        """How many values at least follow the name in the wire list."""
        return len(self.fields) - self.optional


_DATA = frozenset({"data"})

PUT = Operation(
    "put",
    ("id", "text", "kind", "task", "tier", "data", "tags", "sources", "vector"),
    "text",
    _DATA,
    optional=1,
)
PUT_MANY = Operation(
    "put_many",
    ("ids", "texts", "kind", "task", "tier", "data", "tags", "sources", "vectors"),
    "texts",
    _DATA,
    optional=1,
)
STALE = Operation("stale", ("id", "reason"), "id")
RESTORE = Operation("restore", ("id",), "id")
MOVE = Operation("move", ("id", "tier"), "id")
FINISH_TASK = Operation("finish_task", ("task",), "task")
EXPECT = Operation("expect", ("id", "exists", "status", "tier", "lsn"), "id")

OPERATIONS: tuple[Operation, ...] = (PUT, PUT_MANY, STALE, RESTORE, MOVE, FINISH_TASK, EXPECT)
_BY_NAME = {op.name: op for op in OPERATIONS}


def by_name(name: str) -> Operation | None:
    """The operation called `name`, or None."""
    return _BY_NAME.get(name)


def to_wire(op: Operation, values: Mapping[str, Any]) -> list[Any]:
    """`op` with `values` (every field, already checked by a commit) as its wire list."""
    out: list[Any] = [op.name]
    for field in op.fields:
        value = values[field]
        if field in op.json:
            value = encode_data(value)
        elif field == "vector":
            value = _floats(value)
        elif field == "vectors":
            value = None if value is None else [_floats(v) for v in value]
        elif isinstance(value, tuple):
            value = list(value)
        out.append(value)
    return out


def _floats(vector: Any) -> list[float] | None:
    """A vector (checked by a commit) as the wire carries it: a list of floats, or None."""
    return None if vector is None else [float(x) for x in vector]


_VECTOR = 1 + PUT.fields.index("vector")
_VECTORS = 1 + PUT_MANY.fields.index("vectors")
_TEXTS = 1 + PUT_MANY.fields.index("texts")


def embed_missing(wire_ops: list[list[Any]], embed: Callable[[list[str]], Any]) -> None:
    """Give the puts of `wire_ops` that carry no vector the vectors `embed` makes of them.

    One call of `embed` for all their texts.

    Raises:
        ValueError: The embedder did not return one vector per text.
    """
    wanted: list[tuple[list[Any], int]] = []  # (where the vector goes, at which index)
    texts: list[str] = []
    for op in wire_ops:
        if op[0] == PUT.name and op[_VECTOR] is None:
            wanted.append((op, _VECTOR))
            texts.append(op[1 + PUT.fields.index("text")])
        elif op[0] == PUT_MANY.name:
            if op[_VECTORS] is None:
                op[_VECTORS] = [None] * len(op[_TEXTS])
            for i, v in enumerate(op[_VECTORS]):
                if v is None:
                    wanted.append((op[_VECTORS], i))
                    texts.append(op[_TEXTS][i])
    if not texts:
        return
    vectors = list(embed(texts))
    if len(vectors) != len(texts):
        raise InvalidValue(
            f"embed: the embedder returned {len(vectors)} vectors for {len(texts)} texts"
        )
    for (where, i), v in zip(wanted, vectors, strict=True):
        where[i] = _floats(v)


def check_wire(op: object, where: str) -> Operation:
    """The operation the wire list `op` (found at `where`) names, with its length checked.

    Raises:
        ValueError: `op` is not a list that starts with an operation's name and holds that
            operation's number of values; the message names `where` and says which.
    """
    if not isinstance(op, list) or not op or not isinstance(op[0], str) or op[0] not in _BY_NAME:
        raise InvalidValue(f"{where} must be a list starting with one of {sorted(_BY_NAME)}")
    spec = _BY_NAME[op[0]]
    if not spec.least <= len(op) - 1 <= spec.arity:
        takes = f"{spec.least} values"
        if spec.optional:
            takes += f" ({spec.arity} with {', '.join(spec.fields[spec.least :])})"
        raise InvalidValue(f"{where}: {op[0]!r} takes {takes}, not {len(op) - 1}")
    return spec


def apply(commit: Any, op: list[Any]) -> None:
    """Run the wire operation `op` (checked by :func:`check_wire`) on `commit`.

    The commit checks every value as it would for a local caller.
    """
    spec = _BY_NAME[op[0]]
    given = op[1:] + [None] * (spec.arity - (len(op) - 1))
    values = dict(zip(spec.fields, given, strict=True))
    for field in spec.json:
        values[field] = _data(values[field])
    first = values.pop(spec.positional)
    getattr(commit, spec.name)(first, **values)


def _data(text: Any) -> Any:
    """A memory's data as the wire carries it (its JSON text, checked by the client)."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise InvalidType(f"data must travel as JSON text, not {type(text).__name__}")
    try:
        return json.loads(text)
    except ValueError as e:
        raise InvalidValue(f"data is not JSON: {e}") from None
    except RecursionError:
        raise InvalidValue(
            "data: nested too deeply to store (Python's JSON gives up at its recursion limit); "
            "flatten it"
        ) from None


# -- records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldType:
    """What a record field holds, as an export line carries it (JSON).

    `name` is its Python type as :attr:`memcommit.Record.fields` gives it; `describe` completes
    "fields.NAME must be ...", `holds` says whether a JSON value is one, and `load` turns a
    checked value into what import applies (a list of tags into a tuple).
    """

    name: str
    describe: str
    holds: Callable[[Any], bool]
    load: Callable[[Any], Any] = lambda value: value


def _is_time(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        parse_iso(value)
    except ValueError:
        return False
    return True


STRING = FieldType("str", "a string", lambda v: isinstance(v, str))
OPTIONAL_STRING = FieldType(
    "str | None", "a string or null", lambda v: v is None or isinstance(v, str)
)
STRINGS = FieldType(
    "tuple[str, ...]",
    "a list of strings",
    lambda v: isinstance(v, list | tuple) and all(isinstance(item, str) for item in v),
    tuple,
)
OPTIONAL_VECTOR = FieldType(
    "tuple[float, ...] | None",
    "a list of numbers or null",
    lambda v: (
        v is None
        or (
            isinstance(v, list | tuple)
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)
        )
    ),
    lambda v: None if v is None else tuple(float(x) for x in v),
)
OPTIONAL_OBJECT = FieldType(
    "dict | None", "an object or null", lambda v: v is None or isinstance(v, dict)
)
STATUS = FieldType("str", "'active' or 'stale'", lambda v: v in ("active", "stale"))
TIME = FieldType("datetime", "a time in ISO 8601", _is_time)
LSN = FieldType("int", "an LSN", lambda v: type(v) is int and v >= 0)
BOOLEAN = FieldType("bool", "true or false", lambda v: type(v) is bool)
TRUE = FieldType("bool", "true", lambda v: v is True)
JSON = FieldType("JSON", "JSON", lambda v: True)


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""The `default` of a field an export line must carry."""


@dataclass(frozen=True)
class RecordField:
    """One field of a record: its name, type, and what a line that lacks it means.

    `default` is the value of a field a line leaves out (:data:`REQUIRED`: none, the line must
    carry it); a field whose default is None may also be null, meaning the line does not say.
    `refusal` replaces the usual "fields.NAME must be ..." message. `imported` is False for a
    field import does not apply (a put's ``created_at``: the store stamps its own times).
    """

    name: str
    type: FieldType
    default: Any = None
    refusal: str | None = None
    imported: bool = True


@dataclass(frozen=True)
class RecordKind:
    """One kind of record: its name (``Record.op``), op number in the log, key and fields.

    `key` says what a record's key names. `imported` is False for a kind import skips (a seal
    vouches for the bytes of the log it was written in; the importing store seals its own).
    """

    name: str
    code: int
    key: str
    fields: tuple[RecordField, ...]
    imported: bool = True


RECORDS: tuple[RecordKind, ...] = (
    RecordKind(
        "put",
        1,
        "memory id",
        (
            RecordField("kind", STRING, default="note"),
            RecordField("text", STRING, default=REQUIRED),
            RecordField("data", OPTIONAL_OBJECT),
            RecordField("task", OPTIONAL_STRING),
            RecordField("tier", STRING),  # the memory's tier and status after the put
            RecordField("status", STATUS),
            RecordField("tags", STRINGS, default=()),
            RecordField("sources", STRINGS, default=()),
            RecordField("created_at", TIME, imported=False),
            RecordField("vector", OPTIONAL_VECTOR),
        ),
    ),
    RecordKind(
        "status",
        2,
        "memory id",
        (
            RecordField("status", STATUS, default=REQUIRED),
            RecordField("reason", OPTIONAL_STRING),
        ),
    ),
    RecordKind("move", 3, "memory id", (RecordField("tier", STRING, default=REQUIRED),)),
    RecordKind(
        "task",
        4,
        "task name",
        (
            RecordField(
                "finished",
                TRUE,
                default=True,
                refusal="a task record must have fields.finished = true",
            ),
        ),
    ),
    RecordKind(
        "entity",
        6,
        "kind NUL key",
        (
            RecordField(
                "state",
                JSON,
                default=REQUIRED,
                refusal="an entity record must have fields.state (an object, or null to remove)",
            ),
        ),
    ),
    RecordKind(
        "seal",
        5,
        "empty",
        (
            RecordField("lsn", LSN, default=REQUIRED),
            RecordField("hash", STRING, default=REQUIRED),
            RecordField("keyed", BOOLEAN, default=REQUIRED),
        ),
        imported=False,
    ),
)
_RECORDS_BY_NAME = {kind.name: kind for kind in RECORDS}


def record_kind(name: object) -> RecordKind | None:
    """The kind of record called `name` (``Record.op``), or None."""
    return _RECORDS_BY_NAME.get(name) if isinstance(name, str) else None


class BadField(ValueError):
    """A record field that is not what its kind declares; the message says which and why."""


def check_fields(kind: RecordKind, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a record of `kind` that import applies, each checked against the table.

    Fields the table does not name are ignored; a field a line leaves out takes its default.

    Raises:
        BadField: the first field, in the table's order, that is missing or of the wrong type.
    """
    out: dict[str, Any] = {}
    for field in kind.fields:
        if not field.imported:
            continue
        if field.default is REQUIRED and field.name not in fields and field.refusal:
            raise BadField(field.refusal)
        value = fields.get(field.name, None if field.default is REQUIRED else field.default)
        if not (value is None and field.default is None) and not field.type.holds(value):
            raise BadField(
                field.refusal or f"fields.{field.name} must be {field.type.describe}, got {value!r}"
            )
        out[field.name] = None if value is None else field.type.load(value)
    return out
