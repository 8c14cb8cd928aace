"""Commits: several operations and guards that are written together or not at all.

The `Commit` class itself is native (its `put` is the per-record path of bulk loads); this
module holds the checks it calls back into Python for (JSON data, sequences of tags) and the
checks of the store's arguments that Python reads (ids, LSNs), so that every entry point
refuses bad input with the same message.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._native import Commit
from .errors import InvalidType, InvalidValue

__all__ = ["MAX_U64", "TIERS", "Commit", "as_str_tuple", "check_ids", "check_u64", "encode_data"]

#: The tiers a memory can be in, from freshest to the archive.
TIERS = ("working", "mid", "long", "archive")

#: The largest LSN, and the largest count the engine takes: 2**64 - 1.
MAX_U64 = 2**64 - 1


def encode_data(data: Mapping[str, Any] | None) -> str | None:
    """Encode a memory's data object as JSON text.

    Raises:
        TypeError: `data` is not a dict, or holds something JSON cannot represent.
        ValueError: `data` would not come back the same (non-str keys, tuples, NaN), or is
            nested too deeply for Python's JSON to write and read back (about a thousand
            levels, Python's recursion limit).
    """
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise InvalidType(f"data must be a JSON object (a dict) or None, not {type(data).__name__}")
    if not isinstance(data, dict):  # another mapping: its items, as the object it stands for
        data = dict(data)
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        same = json.loads(text) == data
    except TypeError as e:
        raise InvalidType(f"data is not JSON: {e}") from None
    except RecursionError:
        raise InvalidValue(
            "data: nested too deeply to store (Python's JSON gives up at its recursion limit, "
            f"about {sys.getrecursionlimit()} levels); flatten it"
        ) from None
    except ValueError as e:
        raise InvalidValue(f"data is not JSON: {e}") from None
    if not same:
        raise InvalidValue(
            "data does not survive a JSON round trip unchanged "
            "(keys must be str; use lists, not tuples or sets)"
        )
    return text


def as_str_tuple(value: Sequence[str], field: str) -> tuple[str, ...]:
    """Return `value` as a tuple (the form the engine takes), refusing a lone str.

    Also refused: bytes (a sequence of ints), and a mapping (whose keys alone iterating it
    would keep).
    """
    if type(value) is tuple:
        return value
    if isinstance(value, str):
        raise InvalidType(
            f"{field} must be a sequence of str, not a single str (wrap it in a tuple)"
        )
    if isinstance(value, (bytes, bytearray, memoryview, Mapping)):
        raise InvalidType(f"{field} must be a sequence of str, not {type(value).__name__}")
    try:
        return tuple(value)
    except TypeError:
        raise InvalidType(
            f"{field} must be a sequence of str, not {type(value).__name__}"
        ) from None


def check_id(id: object, field: str = "id") -> str:
    """Return `id` if it is a non-empty str, else raise."""
    if not isinstance(id, str):
        raise InvalidType(f"{field} must be str, not {type(id).__name__}")
    if not id:
        raise InvalidValue(f"{field}: must not be empty")
    return id


def check_ids(ids: object, field: str = "ids") -> list[str]:
    """Return `ids` as a list of ids (non-empty str), refusing a lone str.

    Raises:
        TypeError: `ids` is a str (it would read as one id per character) or not a sequence,
            or an entry is not a str.
        ValueError: An entry is empty.
    """
    if isinstance(ids, str):
        raise InvalidType(
            f"{field} must be a sequence of ids, not a single str (wrap it in a list)"
        )
    if not isinstance(ids, Iterable):
        raise InvalidType(f"{field} must be a sequence of ids, not {type(ids).__name__}")
    out = list(ids)
    for i, id in enumerate(out):
        if type(id) is not str or not id:
            check_id(id, f"{field}[{i}]")
    return out


def _show_int(value: int) -> str:
    # Python refuses to print an int of more than 4300 digits; say its size instead.
    bits = value.bit_length()
    return str(value) if bits <= 256 else f"an int of {bits} bits"


def check_u64(value: object, field: str) -> int:
    """Return `value` if it is an int from 0 to :data:`MAX_U64` (an LSN, a count), else raise.

    The same check (and message) as the native layer's for the arguments it reads.

    Raises:
        TypeError: `value` is not an int (a bool is not one).
        ValueError: `value` is negative or above :data:`MAX_U64`.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"{field} must be an int, not {type(value).__name__}")
    if value < 0:
        raise InvalidValue(f"{field}: must not be negative, got {_show_int(value)}")
    if value > MAX_U64:
        raise InvalidValue(
            f"{field}: must be at most {MAX_U64} (2**64 - 1), got {_show_int(value)}"
        )
    return int(value)
