"""Checking and copying the values the roles store.

One rule for every role and every store kind: a value is a JSON document (``None``, ``bool``,
``int``, ``float``, ``str``, ``list``, ``dict`` with ``str`` keys), and the in-memory store is
no more permissive than a SQL database would be. So these are refused, at the write, with the
field named:

* ``TypeError``: tuples, sets, bytes and other objects; dict keys that are not ``str``;
* ``ValueError``: ``NaN`` and infinities (JSON has none); a NUL character (U+0000) in a string or
  key (SQL text refuses it); lone surrogates (they are not UTF-8).

Values are copied on the way in (:func:`check_json` returns a fresh copy) and on the way out
(:func:`copy_json`), so nobody shares a mutable value with the store.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import math
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeAlias, TypeVar, cast

from ..errors import InvalidType, InvalidValue

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_TTL_MS",
    "Check",
    "Count",
    "Json",
    "JsonIn",
    "Namespace",
    "OptionalCount",
    "OptionalText",
    "Text",
    "Ttl",
    "canonical_json",
    "check_bytes",
    "check_count",
    "check_json",
    "check_metadata",
    "check_namespace",
    "check_optional_int",
    "check_optional_text",
    "check_text",
    "check_ttl",
    "checked",
    "checksum",
    "copy_json",
    "copy_metadata",
    "record_reader",
    "same_json",
]

Json: TypeAlias = Any
"""A JSON value: None, bool, int, float, str, list of Json, dict of str to Json.

(Spelled ``Any`` because a recursive alias makes every caller cast; :func:`check_json` is what
enforces the shape.)"""

Namespace: TypeAlias = tuple[str, ...]
"""A non-empty tuple of non-empty labels, e.g. ``("agent", "a1", "user", "u7")``."""


def _check_str_value(value: str, where: str) -> str:
    if "\x00" in value:
        raise InvalidValue(f'{where}: strings must not contain "\\x00" (SQL text refuses it)')
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidValue(f"{where}: a lone surrogate is not UTF-8") from None
    # A str subclass (a str Enum) is stored as the plain string it holds.
    return value if type(value) is str else value[:]


def check_text(value: object, field: str, *, empty: bool = False) -> str:
    """Return `value` if it is a str fit for an id, name or label.

    Args:
        value: The value to check.
        field: The argument's name, for the message.
        empty: Whether the empty string is allowed.

    Raises:
        TypeError: `value` is not a str.
        ValueError: `value` is empty (unless allowed), or holds a NUL (U+0000) or a lone surrogate.
    """
    if not isinstance(value, str):
        raise InvalidType(f"{field} must be str, not {type(value).__name__}")
    if not value and not empty:
        raise InvalidValue(f"{field}: must not be empty")
    return _check_str_value(value, field)


def check_optional_text(value: object, field: str, *, empty: bool = False) -> str | None:
    """Return `value` if it is None or a str :func:`check_text` accepts (with `empty`)."""
    return None if value is None else check_text(value, field, empty=empty)


MAX_JSON_DEPTH = 190
"""How deeply a role's JSON value may nest lists and objects: every store takes the same
values, a remote one included (a request may nest :data:`memcommit.wire.MAX_DEPTH` levels,
200, the call around the value included; a request nested deeper is refused with a 400)."""


def _copy_in(value: object, where: str, depth: int = 1) -> Json:
    # Exact types first: they are what nearly every call passes.
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return value
    if kind is str:
        return _check_str_value(value, where)  # type: ignore[arg-type]
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise InvalidValue(f"{where}: {value!r} is not a JSON number")
        return value
    if isinstance(value, (dict, list)) and depth > MAX_JSON_DEPTH:
        raise InvalidValue(
            f"{where}: nested more than {MAX_JSON_DEPTH} levels deep (lists and objects); "
            "a role's value nests at most that: flatten it"
        )
    if isinstance(value, dict):
        out: dict[str, Json] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidType(
                    f"{where}: dict keys must be str, not {type(key).__name__} ({key!r})"
                )
            key = _check_str_value(key, f"{where} key {key!r}")
            out[key] = _copy_in(item, f"{where}[{key!r}]", depth + 1)
        return out
    if isinstance(value, list):
        return [_copy_in(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _copy_in(float(value), where, depth)
    if isinstance(value, str):
        return _check_str_value(value, where)
    if isinstance(value, tuple):
        raise InvalidType(f"{where}: tuples are not JSON; pass a list")
    raise InvalidType(f"{where}: {type(value).__name__} is not a JSON value")


def check_json(value: object, field: str) -> Json:
    """Return a fresh copy of `value` after checking it is a JSON document.

    Raises:
        TypeError: A tuple, set, bytes or other object, or a non-str dict key, anywhere in it.
        ValueError: NaN or an infinity, a NUL (U+0000) or a lone surrogate in a string, anywhere;
            lists and objects nested more than :data:`MAX_JSON_DEPTH` levels deep.
    """
    return _copy_in(value, field)


def check_metadata(value: object, field: str = "metadata") -> dict[str, Json]:
    """Return a fresh copy of `value`, a JSON object (dict) or None (read as ``{}``)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidType(f"{field} must be a dict or None, not {type(value).__name__}")
    copied: dict[str, Json] = _copy_in(value, field)
    return copied


def copy_json(value: Json) -> Json:
    """Return a deep copy of a JSON value already checked (lists and dicts are rebuilt)."""
    kind = type(value)
    if kind is dict:
        return {key: copy_json(item) for key, item in value.items()}
    if kind is list:
        return [copy_json(item) for item in value]
    return value


def copy_metadata(value: Mapping[str, Json]) -> dict[str, Json]:
    """Return a deep copy of a stored metadata object."""
    return {key: copy_json(item) for key, item in value.items()}


_Record = TypeVar("_Record")

#: The field types a record copies out of the state (JSON payloads a caller could mutate).
_COPIED_TYPES = frozenset({"Json", "dict[str, Json]"})


def record_reader(cls: type[_Record]) -> Callable[[Mapping[str, Json]], _Record]:
    """Return the function that builds a `cls` record from an entity's state.

    `cls` is a frozen dataclass whose fields are keys of the state, of the same name. A field
    typed ``Json`` or ``dict[str, Json]`` is deep-copied (:func:`copy_json`), so the caller
    never shares a mutable value with the store; a ``Namespace`` (a JSON array in the state)
    becomes a tuple; every other field is taken as it is.
    """
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    plain = tuple(f.name for f in fields if f.type not in _COPIED_TYPES | {"Namespace"})
    copied = tuple(f.name for f in fields if f.type in _COPIED_TYPES)
    tuples = tuple(f.name for f in fields if f.type == "Namespace")

    def read(state: Mapping[str, Json]) -> _Record:
        values = {name: state[name] for name in plain}
        for name in copied:
            values[name] = copy_json(state[name])
        for name in tuples:
            values[name] = tuple(state[name])
        return cls(**values)

    read.__qualname__ = read.__name__ = f"read_{cls.__name__}"
    return read


#: The longest lease or retention window a role takes: 100 years of milliseconds. A longer
#: one would put its expiry (now + ttl_ms) past what a datetime or a SQL bigint can hold.
MAX_TTL_MS = 3_155_760_000_000  # 100 years of 365.25 days


def check_ttl(ttl_ms: object, field: str = "ttl_ms") -> int:
    """Return `ttl_ms` if it is a positive int of milliseconds, at most :data:`MAX_TTL_MS`.

    Raises:
        TypeError: `ttl_ms` is a bool, a float or anything but an int.
        ValueError: `ttl_ms` is 0 or negative, or longer than 100 years.
    """
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int):
        raise InvalidType(f"{field} must be an int of milliseconds, not {ttl_ms!r}")
    if ttl_ms <= 0:
        raise InvalidValue(f"{field}: must be positive, not {ttl_ms}")
    if ttl_ms > MAX_TTL_MS:
        shown = ttl_ms if ttl_ms.bit_length() <= 256 else f"an int of {ttl_ms.bit_length()} bits"
        raise InvalidValue(
            f"{field}: must be at most {MAX_TTL_MS} (100 years of milliseconds), not {shown}"
        )
    return int(ttl_ms)


def check_count(value: object, field: str, *, minimum: int = 0) -> int:
    """Return `value` if it is an int (not a bool) of at least `minimum`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"{field} must be int, not {type(value).__name__}")
    if value < minimum:
        raise InvalidValue(f"{field}: must be at least {minimum}, not {value}")
    return int(value)


def check_optional_int(value: object, field: str, *, minimum: int = 0) -> int | None:
    """Return `value` if it is None or an int :func:`check_count` accepts."""
    return None if value is None else check_count(value, field, minimum=minimum)


def check_namespace(value: object, field: str = "namespace", *, empty: bool = False) -> Namespace:
    """Return `value` as a tuple of labels.

    Args:
        value: A tuple (or list) of non-empty str labels.
        field: The argument's name, for the message.
        empty: Whether the empty tuple is allowed (a prefix may be empty; a namespace not).

    Raises:
        TypeError: `value` is not a tuple or list of str.
        ValueError: `value` is empty (unless allowed), or a label is empty or holds
            a NUL (U+0000).
    """
    if not isinstance(value, (tuple, list)):
        raise InvalidType(f"{field} must be a tuple of str, not {type(value).__name__}")
    if not value and not empty:
        raise InvalidValue(f"{field}: must have at least one label")
    return tuple(check_text(label, f"{field}[{i}]") for i, label in enumerate(value))


def check_bytes(value: object, field: str) -> bytes:
    """Return `value` as bytes if it is bytes, bytearray or memoryview (a str is refused)."""
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise InvalidType(f"{field} must be bytes, not {type(value).__name__}")


def canonical_json(value: Json) -> str:
    """Return the canonical text of a checked JSON value: sorted keys, no whitespace."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def same_json(a: Json, b: Json) -> bool:
    """Return whether two checked JSON values are the same document.

    Compared by canonical text, so key order does not matter but ``True`` is not ``1`` and
    ``1`` is not ``1.0``: the rule every store kind can keep.
    """
    return canonical_json(a) == canonical_json(b)


def checksum(value: Json) -> str:
    """Return the sha256 hex digest of :func:`canonical_json` of `value`."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


# -- checked parameters ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Check:
    """How :func:`checked` checks a parameter: ``check(value, name)`` returns the value to use."""

    check: Callable[[Any, str], Any]


Text: TypeAlias = Annotated[str, Check(check_text)]
"""A non-empty str, checked by :func:`check_text`."""
OptionalText: TypeAlias = Annotated[str | None, Check(check_optional_text)]
"""None or a :data:`Text`."""
JsonIn: TypeAlias = Annotated[Json, Check(check_json)]
"""A JSON value, checked and copied in by :func:`check_json`."""
Count: TypeAlias = Annotated[int, Check(check_count)]
"""An int of at least 0, checked by :func:`check_count`."""
OptionalCount: TypeAlias = Annotated[int | None, Check(check_optional_int)]
"""None or a :data:`Count`."""
Ttl: TypeAlias = Annotated[int, Check(check_ttl)]
"""A lease or retention window in milliseconds, checked by :func:`check_ttl`."""

_Method = TypeVar("_Method", bound=Callable[..., Any])


def checked(method: _Method) -> _Method:
    """Check a role method's arguments by their annotations, then call it with the results.

    Each parameter annotated with an alias that carries a :class:`Check` (:data:`Text`,
    :data:`JsonIn`, ...) is checked, whether given or left at its default, in parameter order,
    and the method sees what the check returned; other parameters pass as they are. So a
    method declares each argument's check once, in its signature. The annotations are read
    once, here (a postponed one as a name in the method's module).
    """
    params = list(inspect.signature(method).parameters.values())[1:]  # after self
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if any(p.kind not in kinds for p in params):
        raise InvalidType(f"@checked {method.__qualname__}: only named parameters can be checked")
    positional = sum(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)
    plan: list[tuple[str, int, Any, Callable[[Any, str], Any]]] = []
    for index, p in enumerate(params):
        # A postponed annotation is the alias's name in the method's module; else the alias.
        annotation = p.annotation
        alias = method.__globals__.get(annotation) if isinstance(annotation, str) else annotation
        check = next((m for m in getattr(alias, "__metadata__", ()) if isinstance(m, Check)), None)
        if check is not None:
            at = index if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD else positional
            plan.append((p.name, at, p.default, check.check))

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if len(args) > positional:
            return method(self, *args, **kwargs)  # Python's own TypeError
        values = list(args)
        for name, at, default, check in plan:
            if at < len(values):
                values[at] = check(values[at], name)
            elif name in kwargs:
                kwargs[name] = check(kwargs[name], name)
            elif default is not inspect.Parameter.empty:
                kwargs[name] = check(default, name)
            # else it is missing, and the call raises Python's own TypeError
        return method(self, *values, **kwargs)

    return cast(_Method, call)
