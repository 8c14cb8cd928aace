"""The operations a commit can hold, each declared once, and their wire form.

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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .commit import encode_data

__all__ = [
    "EXPECT",
    "FINISH_TASK",
    "MOVE",
    "OPERATIONS",
    "PUT",
    "PUT_MANY",
    "RESTORE",
    "STALE",
    "Operation",
    "apply",
    "by_name",
    "check_wire",
    "to_wire",
]


@dataclass(frozen=True)
class Operation:
    """One kind of operation: its name (the commit's method) and its fields in wire order.

    `positional` is the field the method takes first, by position (the text or the id); the
    others are keywords on the methods that take them as such. `json` names the fields that
    travel as JSON text.
    """

    name: str
    fields: tuple[str, ...]
    positional: str
    json: frozenset[str] = frozenset()

    @property
    def arity(self) -> int:
        """How many values follow the name in the wire list."""
        return len(self.fields)


_DATA = frozenset({"data"})

PUT = Operation(
    "put", ("id", "text", "kind", "task", "tier", "data", "tags", "sources"), "text", _DATA
)
PUT_MANY = Operation(
    "put_many", ("ids", "texts", "kind", "task", "tier", "data", "tags", "sources"), "texts", _DATA
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
        elif isinstance(value, tuple):
            value = list(value)
        out.append(value)
    return out


def check_wire(op: object, where: str) -> Operation:
    """The operation the wire list `op` (found at `where`) names, with its length checked.

    Raises:
        ValueError: `op` is not a list that starts with an operation's name and holds that
            operation's number of values; the message names `where` and says which.
    """
    if not isinstance(op, list) or not op or not isinstance(op[0], str) or op[0] not in _BY_NAME:
        raise ValueError(f"{where} must be a list starting with one of {sorted(_BY_NAME)}")
    spec = _BY_NAME[op[0]]
    if len(op) != spec.arity + 1:
        raise ValueError(f"{where}: {op[0]!r} takes {spec.arity} values, not {len(op) - 1}")
    return spec


def apply(commit: Any, op: list[Any]) -> None:
    """Run the wire operation `op` (checked by :func:`check_wire`) on `commit`.

    The commit checks every value as it would for a local caller.
    """
    spec = _BY_NAME[op[0]]
    values = dict(zip(spec.fields, op[1:], strict=True))
    for field in spec.json:
        values[field] = _data(values[field])
    first = values.pop(spec.positional)
    getattr(commit, spec.name)(first, **values)


def _data(text: Any) -> Any:
    """A memory's data as the wire carries it (its JSON text, checked by the client)."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"data must travel as JSON text, not {type(text).__name__}")
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValueError(f"data is not JSON: {e}") from None
    except RecursionError:
        raise ValueError(
            "data: nested too deeply to store (Python's JSON gives up at its recursion limit); "
            "flatten it"
        ) from None
