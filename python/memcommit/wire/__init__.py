"""The wire between a :class:`~memcommit.server.MemoryServer` and its clients.

The server and :class:`~memcommit.remote.RemoteStore` speak HTTP/1.1, over TCP or over a Unix
domain socket (``unix:///path``; the ``Host`` header is then ``localhost``). Commits and role calls
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

Memory operations (``ops``): ``["put", id, text, kind, task, tier, data, tags, sources,
vector]`` (``data`` as JSON text, ``vector`` a list of numbers or null, and may be left out),
``["put_many", ids, texts, kind, task, tier, data, tags, sources, vectors]`` (``vectors`` may be
left out),
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

The parts, each in its own module and all importable from here: :mod:`~memcommit.wire.body`
(a body as JSON text, :data:`MAX_DEPTH`), :mod:`~memcommit.wire.values` (the tagged values)
and :mod:`~memcommit.wire.errors` (an error as its code and fields); the operations a commit
sends are declared in :mod:`memcommit.ops`. ``docs/format.md`` describes the protocol byte
for byte.
"""

from __future__ import annotations

from ..errors import CommitOutcomeUnknown, ServerError, ServerUnavailable
from .body import MAX_DEPTH, dumps, loads, too_deep
from .errors import decode_error, encode_error
from .values import decode_value, encode_value

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_PORT",
    "DEFAULT_REMEMBER",
    "H_BOOT",
    "H_GENERATION",
    "H_LAST",
    "H_LSN",
    "H_STORE",
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

H_STORE = "x-memcommit-store"
"""The header naming the server's store id, on every answer of an endpoint."""
H_GENERATION = "x-memcommit-generation"
"""The header giving the server's log generation."""
H_LSN = "x-memcommit-lsn"
"""The header giving the server's durable head LSN."""
H_BOOT = "x-memcommit-boot"
"""The header naming the server start (a random id per start)."""
H_LAST = "x-memcommit-last"
"""The header of a raw log answer: the LSN of its last record (``after`` when it holds none)."""
