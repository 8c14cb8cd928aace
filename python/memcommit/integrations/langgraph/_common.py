"""What the checkpointer and the store share: bytes in JSON, filters, arguments, the medium.

Filters follow LangGraph's reference implementations (``InMemorySaver`` and
``InMemoryStore``) and, where those say nothing, its SQL ones (``SqliteSaver``, ``SqliteStore``):

* a filter key names a top-level field; if the value has no such field and the key holds
  dots, it is read as a path (``"user.access-level"`` is ``value["user"]["access-level"]``),
  as the SQL savers read ``$.user.access-level``;
* values compare as Python's ``==`` compares them, as the in-memory references do (and the
  SQL ones at the top level): ``True`` is ``1`` and ``False`` is ``0``, ``1`` is ``1.0``; lists
  compare item by item, and a tuple in a filter is a list;
* a field the value does not have is ``None``: ``{"theme": None}`` matches a value without a
  ``theme`` (every reference agrees);
* in a store filter, a dict with ``$``-operators (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
  ``$lte``) compares (``$gt`` and the others order numbers, ``True`` among them as ``1``, or
  two strings; a missing field is in no order), and a dict without operators matches a stored
  dict that has at least those keys with matching values (``InMemoryStore``'s rule).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ...errors import InvalidType, InvalidValue, NotSupported
from ...store import MemoryStore
from ...store import open as open_store

if TYPE_CHECKING:
    from ...roles.medium import Medium
    from ...store import Durability

__all__ = [
    "MISSING",
    "b64decode",
    "b64encode",
    "checked_text",
    "compile_store_filter",
    "json_equal",
    "lookup",
    "store_filter_matches",
    "writes_block",
]


class _Missing:
    """The value of a field a document does not have."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""Returned by :func:`lookup` for a field the document does not have."""


def b64encode(data: bytes) -> str:
    """Return `data` as base64 text (entity states are JSON, so bytes travel as text)."""
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str) -> bytes:
    """Return the bytes :func:`b64encode` wrote as `text`."""
    return base64.b64decode(text)


@contextmanager
def opened(path: str, durability: Durability) -> Iterator[MemoryStore]:
    """The store at `path`, opened for the block and closed after it (``from_path``)."""
    store = open_store(path, durability=durability)
    try:
        yield store
    finally:
        store.close()


def medium_of(store: MemoryStore) -> Medium:
    """The medium `store`'s roles keep their entities in, where LangGraph's entities go too.

    Raises:
        TypeError: `store` is not a memcommit store (a path, say).
        NotSupported: The store's roles run on a server (a RemoteStore), which keeps them.
    """
    if not isinstance(store, MemoryStore):
        raise InvalidType(
            f"store must be a memcommit store, not {type(store).__name__}: pass "
            "memcommit.open(path) (or use from_path(path))"
        )
    if store.medium is None:
        raise NotSupported(
            f"{store!r}: its roles' entities live on its server; open the store itself "
            "(memcommit.open) where LangGraph runs"
        )
    return store.medium


def checked_text(text: str, name: str) -> str:
    """Return `text`, refused if it holds a lone surrogate (no key or state of the log can).

    Raises:
        InvalidValue: `text` holds a lone surrogate; the message names argument `name`.
    """
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError as e:
            raise InvalidValue(
                f"{name}: holds a lone surrogate ({text[e.start]!r}), which UTF-8 cannot "
                "encode; pass valid Unicode text"
            ) from None
    return text


def writes_block(store: MemoryStore) -> bool:
    """Return whether a write to `store` waits for an fsync (durability ``"commit"``).

    The async methods hand such writes to a worker thread so the event loop does not wait for
    the disk; other writes are a queue append and run inline.
    """
    info = store.info()
    return info.get("path") is not None and info.get("durability") == "commit"


def lookup(document: Mapping[str, Any], key: str) -> Any:
    """Return the field `key` of `document`, reading a dotted key as a path if need be.

    Returns:
        The value, or :data:`MISSING`.
    """
    if key in document:
        return document[key]
    if "." not in key:
        return MISSING
    value: Any = document
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return MISSING
        value = value[part]
    return value


def json_equal(a: Any, b: Any) -> bool:
    """Return whether two JSON values are equal as Python's ``==`` says (``True`` is ``1``).

    As LangGraph's in-memory references compare; a tuple is the list it is in JSON.
    """
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):  # bool is an int
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return len(a) == len(b) and all(k in b and json_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    json_types = (bool, int, float, list, tuple, dict)
    if type(a) in json_types or type(b) in json_types:
        return False
    return bool(a == b)


def _number(value: Any) -> float | None:
    """`value` as a number to order (``True`` is 1, as in every reference), or None."""
    if not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:  # an int too large for a float
        return math.inf if value > 0 else -math.inf


def _ordered(value: Any, operator: str, bound: Any) -> bool:
    left: Any = _number(value)
    right: Any = _number(bound)
    if left is None or right is None:
        if not (isinstance(value, str) and isinstance(bound, str)):
            return False  # no order between a number and a string, or with a missing field
        left, right = value, bound
    if operator == "$gt":
        return bool(left > right)
    if operator == "$gte":
        return bool(left >= right)
    if operator == "$lt":
        return bool(left < right)
    return bool(left <= right)


def _apply_operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return json_equal(None if value is MISSING else value, operand)
    if operator == "$ne":
        return not json_equal(None if value is MISSING else value, operand)
    if operator in ("$gt", "$gte", "$lt", "$lte"):
        return value is not MISSING and _ordered(value, operator, operand)
    raise InvalidValue(f"filter: unsupported operator {operator!r}; use $eq $ne $gt $gte $lt $lte")


def _matches(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(_apply_operator(value, op, operand) for op, operand in wanted.items())
        if not isinstance(value, Mapping):
            return False
        return all(_matches(value.get(k, MISSING), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, list)
            and len(value) == len(wanted)
            and all(_matches(x, y) for x, y in zip(value, wanted, strict=True))
        )
    return json_equal(None if value is MISSING else value, wanted)


def store_filter_matches(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """Return whether an item's value passes a ``BaseStore.search`` filter (module docstring).

    Raises:
        ValueError: The filter uses an operator other than the six supported.
    """
    return all(_matches(lookup(value, key), wanted) for key, wanted in filter.items())


def _field_check(key: str, wanted: Any) -> Callable[[Mapping[str, Any]], bool]:
    kind = type(wanted)
    if kind is str or kind is int or kind is float or kind is bool or wanted is None:
        # The common case, a field equal to a scalar, without the general machinery.
        def equal(value: Mapping[str, Any]) -> bool:
            found = value.get(key, MISSING)
            if found is MISSING and "." in key:
                found = lookup(value, key)
            if kind is str:
                return type(found) is str and found == wanted
            if wanted is None:
                return found is None or found is MISSING
            return type(found) in (bool, int, float) and found == wanted

        return equal

    def general(value: Mapping[str, Any]) -> bool:
        return _matches(lookup(value, key), wanted)

    return general


def compile_store_filter(filter: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    """Return a predicate equal to ``store_filter_matches(value, filter)``, built once.

    A search applies one filter to every item of a namespace range; the predicate does the
    per-filter work (what kind of comparison each key needs) once.
    """
    checks = [_field_check(key, wanted) for key, wanted in filter.items()]
    if len(checks) == 1:
        return checks[0]
    return lambda value: all(check(value) for check in checks)
