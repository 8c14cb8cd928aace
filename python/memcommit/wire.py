"""The wire between a :class:`~memcommit.server.MemoryServer` and its clients.

The server and :class:`~memcommit.remote.RemoteStore` speak HTTP/1.1. Commits and role calls
travel as JSON; the log travels as the raw bytes of whole commits, exactly as they are in the
server's file, so a client checks and applies them with the same Rust code that replays a log.

Endpoints (all under ``/v1``; every one but ``health`` needs ``Authorization: Bearer TOKEN``
when the server has a token):

* ``GET /v1/health``: ``{"status": "ok"}``; no token needed (for probes); says nothing else.
  ``503`` with ``{"status": "stopping"}`` or ``{"status": "failed"}`` while the server shuts
  down or after its writer failed.
* ``GET /v1/info``: ``store_id``, ``generation``, ``lsn`` (the durable head), ``boot`` (a
  random id per server start), ``durability``, ``max_request_bytes``, ``protocol`` and
  ``test_clock``.
* ``POST /v1/commit``: ``{"commits": [...], "retry_of": BOOT | null}``; each commit is either
  memory operations ``{"id", "expect_lsn", "ops": [[name, ...], ...]}`` or a role call
  ``{"id", "role", "method", "args", "kwargs"}``. The answer is ``{"results": [...]}``, one
  per commit, in order: ``{"ok": true, "first_lsn", "lsn"}`` (memory operations),
  ``{"ok": true, "value", "lsn"}`` (a role call; ``lsn`` null when it wrote nothing), or
  ``{"ok": false, "error": {...}}`` (see :func:`encode_error`). A commit may also be a seal,
  ``{"id", "seal": true, "key": BYTES | null}``, answered ``{"ok": true, "seal": [...],
  "first_lsn", "lsn"}``.
* ``GET /v1/log?after=LSN&store=ID&generation=N&wait=SECONDS&max_bytes=N``: the raw bytes of
  the whole commits after ``after`` (``application/octet-stream``), waiting up to ``wait``
  seconds for one when there is none yet (a long poll). ``409`` with code ``resync`` when the
  client's log is not the server's (another store or generation, or ahead of it).
* ``GET /v1/snapshot?max_bytes=N``: the 64-byte log header, then the raw commits from the
  start (about ``max_bytes``); the client goes on with ``/v1/log`` from there.
* ``GET /v1/manifest``: ``{"manifest": [...]}``, the store's compaction manifest (the purged
  ids among it), which a replica needs to answer ``Purged``.
* ``POST /v1/flush``: fsync everything, whatever the server's durability mode (the body is
  empty or ``{}``).
* ``GET /v1/metrics``: Prometheus text format.
* ``POST /v1/test/clock``: ``{"now_us": N}`` sets the server's clock (never back); ``GET``
  answers ``{"now_us"}``. Only on a server started with ``--test-clock`` (a testing aid for the
  contract suite); 404 otherwise.

Memory operations (``ops``): ``["put", id, text, kind, task, tier, data, tags, sources]``
(``data`` as JSON text), ``["put_many", ids, texts, kind, task, tier, data, tags, sources]``,
``["stale", id, reason]``, ``["restore", id]``, ``["move", id, tier]``,
``["finish_task", task]``, ``["expect", id, exists, status, tier, lsn]``, as
:mod:`memcommit.ops` declares them. The client checks them as a local commit would; the
server runs them in one native commit, all or nothing.

A request body is JSON nested at most :data:`MAX_DEPTH` levels deep; a body that is too
large (``413``), not JSON, too deeply nested or not of the shape above (``400``) changes
nothing.

Every answer of an endpoint (not a 401 for a missing token, nor a 404 of an unknown path)
carries the headers ``X-Memcommit-Store``, ``X-Memcommit-Generation``,
``X-Memcommit-Lsn`` (the durable head) and ``X-Memcommit-Boot``; a raw log answer adds
``X-Memcommit-Last`` (the LSN of its last record, ``after`` when it holds none).

**Commit ids.** Every commit carries an id the client makes. The server remembers the answer
of each commit that wrote (the newest :data:`DEFAULT_REMEMBER` of them) and of every commit
still in flight, so a commit resent because its answer was lost is answered, not applied
again. A resend says which server start it may have reached (``retry_of``); a server started
since then cannot know whether that start applied it and answers ``commit_outcome_unknown``
(:class:`CommitOutcomeUnknown`) instead of guessing.

**Values** (role call arguments and results) are JSON with tags for what JSON lacks, so a
value arrives as the same Python type and the server's checks refuse exactly what a local
store refuses: ``{"$t": "tuple", "v": [...]}``, ``"set"``, ``"frozenset"``, ``"bytes"`` and
``"bytearray"`` (``"b"``: base64), ``"map"`` (a dict with a key that is not a str, or the key
``"$t"``: ``"v"`` is its items), ``"dc"`` (one of the roles' dataclasses: ``"c"`` its name,
``"v"`` its fields) and ``"opaque"`` (anything else: ``"c"`` its type's name; the server
rebuilds a stand-in of a type with that name, which every check refuses).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any, cast

from . import errors, roles
from .errors import CommitOutcomeUnknown, Guard, ServerError, ServerUnavailable

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_PORT",
    "DEFAULT_REMEMBER",
    "MAX_DEPTH",
    "PROTOCOL",
    "CommitOutcomeUnknown",
    "ServerError",
    "ServerUnavailable",
    "decode_error",
    "decode_value",
    "dumps",
    "encode_error",
    "encode_value",
    "loads",
    "too_deep",
]

PROTOCOL = 1
"""The protocol version (the ``/v1`` of every path)."""

DEFAULT_PORT = 7411
"""The port ``memcommit serve`` listens on unless told otherwise."""

DEFAULT_MAX_REQUEST_BYTES = 64 * 1024 * 1024
"""The largest request body a server accepts by default (413 above it)."""

DEFAULT_REMEMBER = 100_000
"""How many answers of commits that wrote a server remembers for resends."""

MAX_DEPTH = 200
"""How deeply a request body's JSON may nest lists and objects (400 beyond it).

It bounds what the server parses and answers, so that a value accepted in a role call can
always be sent back: the commit envelope takes about five levels and each tuple, set or
dataclass in a value two more.
"""

H_STORE = "x-memcommit-store"
H_GENERATION = "x-memcommit-generation"
H_LSN = "x-memcommit-lsn"
H_BOOT = "x-memcommit-boot"
H_LAST = "x-memcommit-last"

# -- JSON ------------------------------------------------------------------------------------


def dumps(value: Any) -> bytes:
    """Encode a JSON-able value as compact ASCII JSON (lone surrogates survive as escapes)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True).encode("ascii")


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


# -- values ----------------------------------------------------------------------------------

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
    str, the roles' dataclasses and anything else are tagged (see the module docstring).
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
        return str(value)
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
        raise ValueError(f"value: {kind.__name__} is not a wire value")
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
                raise ValueError(f"value: {text!r} is not a float the wire tags")
            return float(text)
        if tag == "map":
            return {decode_value(k): decode_value(v) for k, v in data["v"]}
        if tag == "dc":
            cls = _dataclasses().get(data["c"])
            if cls is None:
                raise ValueError(f"value: {data['c']!r} is not a type the wire carries")
            return cls(**{str(k): decode_value(v) for k, v in data["v"].items()})
        if tag == "opaque":
            name = data["c"]
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"value: {name!r} is not a type name")
            return _opaque(name)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"value: a malformed {tag!r} value ({e})") from None
    raise ValueError(f"value: {tag!r} is not a wire tag")


# -- errors ----------------------------------------------------------------------------------


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
