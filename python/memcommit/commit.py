"""Commits: several operations and guards that are written together or not at all.

The `Commit` class itself is native (its `put` is the per-record path of bulk loads); this
module holds the checks it calls back into Python for: JSON data and sequences of tags.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._native import Commit

__all__ = ["TIERS", "Commit", "as_str_tuple", "encode_data"]

#: The tiers a memory can be in, from freshest to the archive.
TIERS = ("working", "mid", "long", "archive")


def encode_data(data: Mapping[str, Any] | None) -> str | None:
    """Encode a memory's data object as JSON text.

    Raises:
        TypeError: `data` is not a dict, or holds something JSON cannot represent.
        ValueError: `data` would not come back the same (non-str keys, tuples, NaN).
    """
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise TypeError(f"data must be a JSON object (a dict) or None, not {type(data).__name__}")
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except TypeError as e:
        raise TypeError(f"data is not JSON: {e}") from None
    except ValueError as e:
        raise ValueError(f"data is not JSON: {e}") from None
    if json.loads(text) != data:
        raise ValueError(
            "data does not survive a JSON round trip unchanged "
            "(keys must be str; use lists, not tuples or sets)"
        )
    return text


def as_str_tuple(value: Sequence[str], field: str) -> tuple[str, ...]:
    """Return `value` as a tuple (the form the engine takes), refusing a lone str."""
    if type(value) is tuple:
        return value
    if isinstance(value, str):
        raise TypeError(f"{field} must be a sequence of str, not a single str (wrap it in a tuple)")
    try:
        return tuple(value)
    except TypeError:
        raise TypeError(f"{field} must be a sequence of str, not {type(value).__name__}") from None


def check_id(id: object, field: str = "id") -> str:
    """Return `id` if it is a non-empty str, else raise."""
    if not isinstance(id, str):
        raise TypeError(f"{field} must be str, not {type(id).__name__}")
    if not id:
        raise ValueError(f"{field}: must not be empty")
    return id
