"""What the checkpointer and the store share: bytes in JSON, filters, the medium's cost.

Filters follow LangGraph's reference implementations (``InMemorySaver`` and
``InMemoryStore``) and, where those say nothing, its SQL ones (``SqliteSaver``, ``SqliteStore``):

* a filter key names a top-level field; if the value has no such field and the key holds
  dots, it is read as a path (``"user.access-level"`` is ``value["user"]["access-level"]``),
  as the SQL savers read ``$.user.access-level``;
* values compare as JSON documents: ``True`` is not ``1`` (the SQL stores agree), ``1`` is
  ``1.0``, lists compare item by item, and a tuple in a filter is a list;
* in a store filter, a dict with ``$``-operators (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
  ``$lte``) compares, and a dict without operators matches a stored dict that has at least
  those keys with matching values (``InMemoryStore``'s rule).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ...errors import InvalidValue, NotSupported
from ...store import open as open_store

if TYPE_CHECKING:
    from ...roles.medium import Medium
    from ...store import Durability, MemoryStore

__all__ = [
    "MISSING",
    "b64decode",
    "b64encode",
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
        NotSupported: The store's roles run on a server (a RemoteStore), which keeps them.
    """
    if store.medium is None:
        raise NotSupported(
            f"{store!r}: its roles' entities live on its server; open the store itself "
            "(memcommit.open) where LangGraph runs"
        )
    return store.medium


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
    """Return whether two values are the same JSON document (``True`` is not ``1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return len(a) == len(b) and all(k in b and json_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if type(a) in (int, float, list, tuple, dict) or type(b) in (int, float, list, tuple, dict):
        return False
    return bool(a == b)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
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
        return value is not MISSING and json_equal(value, operand)
    if operator == "$ne":
        return value is MISSING or not json_equal(value, operand)
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
    return value is not MISSING and json_equal(value, wanted)


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
            if kind is str or wanted is None or kind is bool:
                return type(found) is kind and found == wanted
            return type(found) in (int, float) and found == wanted

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
