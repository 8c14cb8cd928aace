"""A body on the wire as JSON text: how it is written, read, and how deeply it may nest."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_DEPTH", "dumps", "loads", "too_deep"]

MAX_DEPTH = 200
"""How deeply a request body's JSON may nest lists and objects (400 beyond it).

It bounds what the server parses and answers, so that a value accepted in a role call can
always be sent back: the commit envelope takes about five levels and each tuple, set or
dataclass in a value two more.
"""


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True)
"""What `json.dumps` with these arguments would build on every call: one, made once."""


def dumps(value: Any) -> bytes:
    """Encode a JSON-able value as compact ASCII JSON (lone surrogates survive as escapes)."""
    return _ENCODER.encode(value).encode("ascii")


def loads(data: bytes | str) -> Any:
    """Decode JSON text (NaN and infinities are read back as floats)."""
    return json.loads(data)


def too_deep(doc: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether decoded JSON `doc` nests lists and objects more than `limit` levels deep.

    Walks the document without recursion, so any depth is measured safely.
    """
    if type(doc) is not list and type(doc) is not dict:
        return False
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        for child in value.values() if type(value) is dict else value:
            if type(child) is list or type(child) is dict:
                stack.append((child, depth + 1))
    return False
