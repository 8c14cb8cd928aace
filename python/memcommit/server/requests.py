"""What a request must be: reading and checking bodies and parameters before anything runs.

Every function here raises :class:`BadRequest` (answered 400, or 413 for a body or batch
over a limit) for a request that is not what :mod:`memcommit.wire` describes; a request
refused here changes nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, MutableMapping
from typing import Any, TypeVar

from .. import wire
from ..ops import check_wire
from ..roles.roleset import ROLE_NAMES, RoleSet
from .writer import CALL, COMMIT, SEAL

__all__ = [
    "DEFAULT_READ_BYTES",
    "MAX_READ_BYTES",
    "BadRequest",
    "BodyStream",
    "ClientGone",
    "float_param",
    "int_param",
    "log_identity",
    "parse_commits",
    "read_json",
    "role_methods",
]

MAX_COMMITS_PER_REQUEST = 10_000
DEFAULT_READ_BYTES = 4 * 1024 * 1024
MAX_READ_BYTES = 64 * 1024 * 1024
ID_MAX = 128

_NO_BODY = object()


class BadRequest(Exception):
    """A request that is not what the protocol says; answered 400, nothing changed."""

    def __init__(self, message: str, status: int = 400, code: str = "bad_request") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def role_methods() -> dict[str, frozenset[str]]:
    """The methods a client may call on each role: the public functions of its class."""
    roles = RoleSet()
    out = {}
    for name in ROLE_NAMES:
        cls = type(getattr(roles, name))
        out[name] = frozenset(
            attr
            for attr, value in inspect.getmembers(cls, inspect.isfunction)
            if not attr.startswith("_")
        )
    return out


class ClientGone(Exception):
    """The client went away before its request's body arrived whole.

    Nothing of the request was run, and nobody is left to answer.
    """


class BodyStream:
    """What :func:`read_json` reads of a bare ASGI request: its headers and its body's chunks.

    The same two things a Starlette request gives, for routes that skip Starlette.
    """

    def __init__(self, scope: MutableMapping[str, Any], receive: Any) -> None:
        # Only the one header read_json reads (ASGI gives header names in lower case).
        self.headers: dict[str, str] = {}
        for name, value in scope["headers"]:
            if name == b"content-length":
                self.headers["content-length"] = value.decode("latin-1")
        self._receive = receive

    async def stream(self) -> AsyncIterator[bytes]:
        """The body's chunks, as they arrive.

        Raises:
            ClientGone: The client disconnected first.
        """
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                raise ClientGone
            chunk = message.get("body", b"")
            if chunk:
                yield chunk
            if not message.get("more_body", False):
                return


async def read_json(request: Any, limit: int, empty: Any = _NO_BODY) -> Any:
    """The request's JSON body (`empty` for an empty body, if given).

    Raises:
        BadRequest: Over `limit` bytes (413), not JSON, or nested deeper than wire.MAX_DEPTH.
        ClientGone: The client disconnected before the body was whole.
    """
    body = await _read_body(request, limit)
    if not body and empty is not _NO_BODY:
        return empty
    try:
        doc = wire.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(f"the body is not JSON: {e}") from None
    except RecursionError:
        doc = None  # nested past what Python's JSON parser reads: deeper than the limit
    else:
        if not wire.too_deep(doc):
            return doc
    raise BadRequest(
        f"the body is JSON nested more than {wire.MAX_DEPTH} levels deep, the protocol's "
        "limit; nothing was applied"
    )


async def _read_body(request: Any, limit: int) -> bytes:
    length = request.headers.get("content-length")
    if length is not None:
        try:
            declared = int(length)
        except ValueError:
            raise BadRequest("content-length is not an int") from None
        if declared > limit:
            raise BadRequest(
                f"the body is {declared} bytes; this server takes at most {limit} "
                "(--max-request-bytes)",
                413,
                "too_large",
            )
    from starlette.requests import ClientDisconnect

    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BadRequest(
                    f"the body is over {limit} bytes (--max-request-bytes)", 413, "too_large"
                )
            chunks.append(chunk)
    except ClientDisconnect:  # a Starlette request's word for it
        raise ClientGone from None
    return b"".join(chunks)


def parse_commits(
    doc: Any, methods: dict[str, frozenset[str]]
) -> tuple[list[tuple[int, str, Any]], str | None]:
    """The works of a ``POST /v1/commit`` body, and the server start it is a resend to.

    Args:
        doc: The decoded body.
        methods: The methods each role may be called with (:func:`role_methods`).

    Returns:
        ``(kind, commit id, spec)`` per commit, in order, and the body's ``retry_of``.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("commits"), list):
        raise BadRequest('the body must be a JSON object with a "commits" list')
    commits = doc["commits"]
    if len(commits) > MAX_COMMITS_PER_REQUEST:
        raise BadRequest(
            f"{len(commits)} commits in one request; the limit is {MAX_COMMITS_PER_REQUEST}",
            413,
            "too_large",
        )
    retry_of = doc.get("retry_of")
    if retry_of is not None and not isinstance(retry_of, str):
        raise BadRequest("retry_of must be a str or null")
    works: list[tuple[int, str, Any]] = []
    seen: set[str] = set()
    for i, spec in enumerate(commits):
        where = f"commits[{i}]"
        if not isinstance(spec, dict):
            raise BadRequest(f"{where} must be an object")
        commit_id = spec.get("id")
        if not isinstance(commit_id, str) or not 0 < len(commit_id) <= ID_MAX:
            raise BadRequest(f"{where}.id must be a str of 1 to {ID_MAX} characters")
        if commit_id in seen:
            raise BadRequest(f"{where}.id {commit_id!r} appears twice in the request")
        seen.add(commit_id)
        if "ops" in spec:
            works.append((COMMIT, commit_id, _parse_ops(spec, where)))
        elif spec.get("seal") is True:
            works.append((SEAL, commit_id, _parse_seal(spec, where)))
        elif "role" in spec:
            works.append((CALL, commit_id, _parse_call(spec, where, methods)))
        else:
            raise BadRequest(
                f'{where} needs "ops" (memory operations), "role" (a role call) or "seal": true'
            )
    return works, retry_of


def _parse_call(
    spec: dict[str, Any], where: str, methods: dict[str, frozenset[str]]
) -> dict[str, Any]:
    role, method = spec.get("role"), spec.get("method")
    if not isinstance(role, str) or role not in methods:
        raise BadRequest(f"{where}.role {role!r} is not a role; the roles are {ROLE_NAMES}")
    if not isinstance(method, str) or method not in methods[role]:
        raise BadRequest(f"{where}.method {method!r} is not a method of {role}")
    args, kwargs = spec.get("args", []), spec.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise BadRequest(f"{where}: args must be a list and kwargs an object")
    try:
        return {
            "role": role,
            "method": method,
            "args": [wire.decode_value(a) for a in args],
            "kwargs": {str(k): wire.decode_value(v) for k, v in kwargs.items()},
        }
    except (ValueError, RecursionError) as e:
        raise BadRequest(f"{where}: {e}") from None


def _parse_seal(spec: dict[str, Any], where: str) -> dict[str, Any]:
    key = spec.get("key")
    if key is None:
        return {"key": None}
    try:
        decoded = wire.decode_value(key)
    except ValueError as e:
        raise BadRequest(f"{where}.key: {e}") from None
    if not isinstance(decoded, bytes):
        raise BadRequest(f"{where}.key must be bytes")
    return {"key": decoded}


def _parse_ops(spec: dict[str, Any], where: str) -> dict[str, Any]:
    ops, expect_lsn = spec["ops"], spec.get("expect_lsn")
    if not isinstance(ops, list):
        raise BadRequest(f"{where}.ops must be a list")
    if expect_lsn is not None and (isinstance(expect_lsn, bool) or not isinstance(expect_lsn, int)):
        raise BadRequest(f"{where}.expect_lsn must be an int or null")
    for j, op in enumerate(ops):
        try:
            check_wire(op, f"{where}.ops[{j}]")
        except ValueError as e:
            raise BadRequest(str(e)) from None
    return {"ops": ops, "expect_lsn": expect_lsn}


def log_identity(query: Any) -> tuple[str, int] | None:
    """The store id and generation a log read names (None when it names none)."""
    store, generation = query.get("store"), query.get("generation")
    if store is None and generation is None:
        return None
    try:
        return str(store), int(generation or "")
    except ValueError:
        raise BadRequest("generation must be an int") from None


_N = TypeVar("_N", int, float)


def _number_param(q: Any, name: str, default: _N, parse: Callable[[str], _N], what: str) -> _N:
    """Query parameter `name` parsed by `parse` (`default` when absent); `what` names the type."""
    raw = q.get(name)
    if raw is None:
        return default
    try:
        return parse(raw)
    except ValueError:
        raise BadRequest(f"{name}: {raw!r} is not {what}") from None


def int_param(q: Any, name: str, default: int, minimum: int) -> int:
    """Query parameter `name` as an int of at least `minimum` (`default` when absent)."""
    value = _number_param(q, name, default, int, "an int")
    if value < minimum:
        raise BadRequest(f"{name}: must be at least {minimum}, got {value}")
    return value


def float_param(q: Any, name: str, default: float) -> float:
    """Query parameter `name` as a finite number of seconds >= 0 (`default` when absent)."""
    value = _number_param(q, name, default, float, "a number")
    if not 0 <= value < float("inf"):
        raise BadRequest(f"{name}: must be a number of seconds >= 0, got {q.get(name)!r}")
    return value
