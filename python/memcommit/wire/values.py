"""Values on the wire: JSON, with tags for the Python types JSON lacks.

Role call arguments and results travel as :func:`encode_value` makes them and come back as
the same Python types through :func:`decode_value`, so the server's checks refuse exactly what
a local store refuses (the tags are in :mod:`memcommit.wire` and ``docs/format.md``).
"""

from __future__ import annotations

import base64
import dataclasses
import math
from typing import Any

from .. import roles
from ..errors import Guard, InvalidValue

__all__ = ["decode_value", "encode_value"]

_TAG = "$t"
_DATACLASSES: dict[str, type[Any]] = {}
_OPAQUE: dict[str, type[Any]] = {}


def _dataclasses() -> dict[str, type[Any]]:
    """The dataclasses a value may be: every one :mod:`memcommit.roles` exports, and Guard."""
    if not _DATACLASSES:
        for name in roles.__all__:
            cls = getattr(roles, name)
            if isinstance(cls, type) and dataclasses.is_dataclass(cls):
                _DATACLASSES[cls.__name__] = cls
        _DATACLASSES[Guard.__name__] = Guard
    return _DATACLASSES


class _Opaque:
    """A stand-in for a value the wire cannot carry; only its type's name survives."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} (a stand-in: the value itself did not cross the wire)>"


def _opaque(name: str) -> Any:
    cls = _OPAQUE.get(name)
    if cls is None:
        if len(_OPAQUE) >= 1024:  # names come from clients: keep the cache bounded
            _OPAQUE.clear()
        cls = _OPAQUE[name] = type(name, (_Opaque,), {})
    return cls()


def encode_value(value: Any) -> Any:
    """Return `value` as JSON-able data that :func:`decode_value` turns back into it.

    Plain JSON values stay as they are; tuples, sets, bytes, dicts with keys that are not
    str, the roles' dataclasses and anything else are tagged (see :mod:`memcommit.wire`).
    """
    if value is None or value is True or value is False:
        return value
    kind = type(value)
    if kind is str or kind is int:
        return value
    if kind is float:
        return value if math.isfinite(value) else {_TAG: "float", "v": repr(value)}
    if kind is list:
        return [encode_value(item) for item in value]
    if kind is dict:
        if all(type(k) is str for k in value) and _TAG not in value:
            return {k: encode_value(v) for k, v in value.items()}
        return {_TAG: "map", "v": [[encode_value(k), encode_value(v)] for k, v in value.items()]}
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)  # the string it holds: a str Enum's str() is its name
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return encode_value(float(value))
    if isinstance(value, tuple) and not dataclasses.is_dataclass(value):
        return {_TAG: "tuple", "v": [encode_value(item) for item in value]}
    if isinstance(value, (set, frozenset)):
        tag = "set" if isinstance(value, set) else "frozenset"
        return {_TAG: tag, "v": [encode_value(item) for item in value]}
    if isinstance(value, (bytes, bytearray)):
        tag = "bytes" if isinstance(value, bytes) else "bytearray"
        return {_TAG: tag, "b": base64.b64encode(value).decode("ascii")}
    if isinstance(value, memoryview):
        return {_TAG: "bytes", "b": base64.b64encode(value.tobytes()).decode("ascii")}
    if isinstance(value, dict):
        return encode_value(dict(value))
    if isinstance(value, list):
        return [encode_value(item) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if _dataclasses().get(name) is type(value):
            fields = {
                f.name: encode_value(getattr(value, f.name)) for f in dataclasses.fields(value)
            }
            return {_TAG: "dc", "c": name, "v": fields}
    return {_TAG: "opaque", "c": type(value).__name__}


def decode_value(data: Any) -> Any:
    """Rebuild a value :func:`encode_value` encoded.

    Raises:
        ValueError: `data` is not something :func:`encode_value` makes (a malformed request).
    """
    kind = type(data)
    if data is None or kind is bool or kind is int or kind is str or kind is float:
        return data
    if kind is list:
        return [decode_value(item) for item in data]
    if kind is not dict:
        raise InvalidValue(f"value: {kind.__name__} is not a wire value")
    tag = data.get(_TAG)
    if tag is None:
        return {k: decode_value(v) for k, v in data.items()}
    try:
        if tag == "tuple":
            return tuple(decode_value(item) for item in data["v"])
        if tag == "set":
            return {decode_value(item) for item in data["v"]}
        if tag == "frozenset":
            return frozenset(decode_value(item) for item in data["v"])
        if tag == "bytes":
            return base64.b64decode(data["b"], validate=True)
        if tag == "bytearray":
            return bytearray(base64.b64decode(data["b"], validate=True))
        if tag == "float":
            text = data["v"]
            if text not in ("nan", "inf", "-inf"):
                raise InvalidValue(f"value: {text!r} is not a float the wire tags")
            return float(text)
        if tag == "map":
            return {decode_value(k): decode_value(v) for k, v in data["v"]}
        if tag == "dc":
            cls = _dataclasses().get(data["c"])
            if cls is None:
                raise InvalidValue(f"value: {data['c']!r} is not a type the wire carries")
            return cls(**{str(k): decode_value(v) for k, v in data["v"].items()})
        if tag == "opaque":
            name = data["c"]
            if not isinstance(name, str) or not name.isidentifier():
                raise InvalidValue(f"value: {name!r} is not a type name")
            return _opaque(name)
    except (KeyError, TypeError, AttributeError) as e:
        raise InvalidValue(f"value: a malformed {tag!r} value ({e})") from None
    raise InvalidValue(f"value: {tag!r} is not a wire tag")
