"""Errors on the wire: an error described by its stable code, and rebuilt as the same class.

The description is :func:`memcommit.errors.to_wire`'s, its fields as wire values
(:mod:`memcommit.wire.values`); the client raises what :func:`decode_error` rebuilds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from .. import errors
from ..errors import ServerError
from .values import decode_value, encode_value

__all__ = ["decode_error", "encode_error"]


def encode_error(error: BaseException) -> dict[str, Any]:
    """Describe `error` for the wire, so that :func:`decode_error` raises the same class.

    The description is :func:`memcommit.errors.to_wire`'s, its fields as wire values.
    """
    return cast(dict[str, Any], encode_value(errors.to_wire(error)))


def decode_error(data: Mapping[str, Any], url: str = "") -> BaseException:
    """Rebuild the error :func:`encode_error` described (an error to raise, not raised).

    A server error rebuilt without a server's address gets `url`; what no error's code names
    (``internal``: a server bug) is a :class:`ServerError` with status 500.
    """
    try:
        error = errors.from_wire(decode_value(dict(data)))
    except (KeyError, TypeError, ValueError):
        return ServerError(
            f"the server at {url or '?'} failed: {data.get('class', 'error')}: "
            f"{data.get('message', '')}",
            status=500,
            code=str(data.get("code", "internal")),
            url=url,
        )
    if isinstance(error, ServerError) and not error.url:
        error.url = url
    return error
