"""The medium: where the roles keep their entities, and the seam for a durable store.

Every role is a state machine over **entities**: JSON objects addressed by ``(kind, key)``.
A role operation is always, under the medium's lock:

1. read the clock once (``now``), check the arguments;
2. read the entities it needs (:meth:`Medium.get`, :meth:`Medium.scan`);
3. decide; raise with nothing written, or
4. hand **one** :meth:`Medium.write` the full new state of every entity it changes (an upsert)
   or ``None`` for each entity it removes (a delete), as one atomic batch.

So a medium needs no knowledge of the roles. The in-memory store uses :class:`MemoryMedium`
(dicts). A durable store implements the same three methods and the lock over its log:
``write`` appends the batch as one commit (all or nothing, in order) and applies it to its
cache only once the commit is durable; ``get``/``scan`` read the cache; opening replays the
batches in order. Because states never hold "now" but only resolved values (granted tokens,
absolute ``expires_at_ms``, assigned versions and sequence numbers), a replay rebuilds exactly
the state that was acknowledged, whatever the clock says at replay; expiry is then judged
lazily against the clock of the moment, as it was before the restart.

A role that must find the first entity of a kind that meets a condition (the lowest-``seq``
claimable run) asks the medium for the kind's entities in groups, each group in rank order
(:mod:`~memcommit.roles.groupings`), which the medium keeps in step with its writes: the lookup
then walks only the groups it needs instead of every entity of the kind. Keeping groupings is
optional: :class:`MemoryMedium` and the log's medium do, with a method
``grouping(kind, name, grouper)`` (the log's medium keeps the groupings a role declares with
:func:`~memcommit.roles.groupings.keep` in the log itself, see
:mod:`~memcommit.roles.logged_groupings`); on a medium without it the role builds the grouping
from a :meth:`Medium.scan` on each call (correct, at the cost of reading every entity of the
kind).

**Keys** are str, built by :func:`entity_key` from parts (str, non-negative int, or a tuple of
str for a namespace): the JSON array of the parts, with ints written as 20 zero-padded digits
so that key order is numeric order, e.g. ``entity_key("run-1", 3) ==
'["run-1","00000000000000000003"]'``. :func:`child_prefix` gives the prefix that matches exactly
the keys whose leading parts are the given ones (``'["run-1",'``), so ``"doc"`` never matches
``"doc/nested"`` or ``"docs"``. ``scan`` returns entities in key order (code-point order of the
key string, which is UTF-8 byte order).

**Counters** that must never be reused (fencing tokens, versions, sequence numbers) are
entities of kind :data:`COUNTER`, state ``{"value": n}`` (the last value handed out), which
are never deleted, so a delete, truncate, release or expiry never lets a number come back.

**Kinds and states** (``?`` = may be null; every ``*_ms`` is an absolute epoch millisecond):

========================  ==================================  ======================================
kind                      key parts                           state
========================  ==================================  ======================================
``run``                   run_id                              run_id, agent_id, revision_id?,
                                                              status, input, output?, error?,
                                                              reason?, metadata, seq, attempt,
                                                              claimed_by?, claim_expires_at_ms?,
                                                              available_at_ms?, created_at_ms,
                                                              updated_at_ms
``step``                  run_id, step_id                     run_id, step_id, seq, name, status,
                                                              attempt, input, output?, error?,
                                                              started_at_ms, finished_at_ms?
``checkpoint``            run_id, checkpoint_id               run_id, checkpoint_id, seq,
                                                              namespace, parent_id?, state,
                                                              metadata, created_at_ms
``idempotency``           key                                 key, state, token, owner?,
                                                              fingerprint?, result?,
                                                              created_at_ms, expires_at_ms
``lock``                  name                                name, owner, token,
                                                              acquired_at_ms, expires_at_ms
``effect``                run_id, effect_key                  run_id, effect_key, seq, outcome,
                                                              result?, error?, fingerprint?,
                                                              recorded_at_ms
``state``                 namespace, key                      namespace (list), key, value,
                                                              version, updated_at_ms
``artifact``              owner, name, version                owner (list), name, version,
                                                              media_type, size, sha256, metadata,
                                                              created_at_ms
``artifact.data``         owner, name, version                data_b64 (the bytes, base64)
``revision``              agent_id, revision_id               agent_id, revision_id, status,
                                                              version?, definition, checksum,
                                                              parent_revision_id?, created_seq,
                                                              created_at_ms, updated_at_ms,
                                                              published_at_ms?
``revision.agent``        agent_id                            agent_id, current_version?
``conversation``          conversation_id                     conversation_id, agent_id?,
                                                              metadata, last_seq,
                                                              created_at_ms, updated_at_ms
``turn``                  conversation_id, seq                conversation_id, seq, run_id, role,
                                                              content, metadata, created_at_ms
``counter``               name, parts...                      value
========================  ==================================  ======================================

Counter names: ``runs.seq`` (no parts: the FIFO order of runs), ``runs.token`` (run_id: the
run's last claim token, kept across a delete and re-create), ``steps.seq`` (run_id),
``checkpoints.seq`` (no parts: checkpoint ids are ``ckpt-`` and this number in 20 digits, so
they sort in creation order and are unique in the store), ``idempotency.token`` (key),
``locks.token`` (name), ``effects.seq`` (run_id), ``state.version`` (namespace, key),
``artifacts.version`` (owner, name), ``revisions.version`` and ``revisions.seq`` (agent_id),
``conversations.seq`` (conversation_id).

A role never mutates a state it read: it builds a new dict for each upsert. The in-memory
medium therefore stores and returns states by reference, and the roles copy JSON payloads
on the way in and out of records.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence
from json.encoder import encode_basestring as _quote
from typing import Any, Protocol, TypeAlias, runtime_checkable

from ..errors import InvalidValue
from .groupings import Grouper, Grouping, Groupings
from .values import Json

__all__ = [
    "ARTIFACT",
    "ARTIFACT_DATA",
    "CHECKPOINT",
    "CONVERSATION",
    "COUNTER",
    "EFFECT",
    "IDEMPOTENCY",
    "KINDS",
    "LOCK",
    "REVISION",
    "REVISION_AGENT",
    "RUN",
    "STATE",
    "STEP",
    "TURN",
    "Change",
    "Medium",
    "MemoryMedium",
    "State",
    "bump_counter",
    "child_prefix",
    "entity_key",
    "read_counter",
]

State: TypeAlias = dict[str, Json]
"""An entity's full state: a JSON object."""

Change: TypeAlias = tuple[str, str, "State | None"]
"""One entry of a write: ``(kind, key, state)``; a state of None deletes the entity."""

RUN = "run"
STEP = "step"
CHECKPOINT = "checkpoint"
IDEMPOTENCY = "idempotency"
LOCK = "lock"
EFFECT = "effect"
STATE = "state"
ARTIFACT = "artifact"
ARTIFACT_DATA = "artifact.data"
REVISION = "revision"
REVISION_AGENT = "revision.agent"
CONVERSATION = "conversation"
TURN = "turn"
COUNTER = "counter"

KINDS = (
    RUN,
    STEP,
    CHECKPOINT,
    IDEMPOTENCY,
    LOCK,
    EFFECT,
    STATE,
    ARTIFACT,
    ARTIFACT_DATA,
    REVISION,
    REVISION_AGENT,
    CONVERSATION,
    TURN,
    COUNTER,
)
"""Every entity kind the roles use."""


KeyPart: TypeAlias = "str | int | tuple[str, ...]"


def _part(part: str | int | tuple[str, ...]) -> str:
    if type(part) is str:
        return _quote(part)
    if isinstance(part, tuple):
        return "[" + ",".join(_quote(label) for label in part) + "]"
    if isinstance(part, int) and not isinstance(part, bool) and part >= 0:
        return f'"{part:020d}"'
    raise InvalidValue(f"key part: {part!r} is not a str, a tuple of str or an int >= 0")


def entity_key(*parts: str | int | tuple[str, ...]) -> str:
    """Return the key of the entity named by `parts` (see the module docstring).

    The same text as ``json.dumps(parts, ensure_ascii=False, separators=(",", ":"))`` with
    ints written as 20-digit strings and tuples as arrays, built without the encoder's
    per-call setup (a key is built on every operation).
    """
    return "[" + ",".join([_part(p) for p in parts]) + "]"


def child_prefix(*parts: str | int | tuple[str, ...]) -> str:
    """Return the prefix matching exactly the keys that start with `parts` and go on."""
    if not parts:
        return ""
    return entity_key(*parts)[:-1] + ","


@runtime_checkable
class Medium(Protocol):
    """Where the roles keep their entities (see the module docstring).

    Implementations must make :meth:`write` atomic (all of a batch or nothing, applied in
    order) and must hand out a re-entrant :attr:`lock` that every role operation holds from
    its first read to its write; roles sharing a medium share that lock, so a check in one
    role (``has_run``, a claim token) and a write in another are one critical section.
    """

    @property
    def lock(self) -> Any:
        """A re-entrant lock (a context manager), one per store."""
        ...

    def get(self, kind: str, key: str) -> State | None:
        """Return the state of entity ``(kind, key)``, or None. Never mutate it."""
        ...

    def scan(self, kind: str, prefix: str = "") -> list[tuple[str, State]]:
        """Return ``(key, state)`` of every entity of `kind` whose key starts with `prefix`.

        In key order. The states must not be mutated.
        """
        ...

    def write(self, changes: Sequence[Change]) -> None:
        """Apply `changes` (upserts and deletes) atomically, in order."""
        ...


class MemoryMedium:
    """A :class:`Medium` in dicts: gone with the process.

    Each kind has a dict of states and a sorted list of its keys (kept with ``bisect``), so a
    prefix scan costs the log of the kind's size plus its matches.
    """

    def __init__(self) -> None:
        # One re-entrant lock per store: a role's check may call into another role (has_run,
        # check_claim) that takes the same lock.
        self._lock = threading.RLock()
        self._states: dict[str, dict[str, State]] = {}
        self._keys: dict[str, list[str]] = {}
        self._groupings = Groupings()

    @property
    def lock(self) -> threading.RLock:
        """The store's one re-entrant lock."""
        return self._lock

    def get(self, kind: str, key: str) -> State | None:
        """Return the state of ``(kind, key)``, or None."""
        states = self._states.get(kind)
        return None if states is None else states.get(key)

    def scan(self, kind: str, prefix: str = "") -> list[tuple[str, State]]:
        """Return ``(key, state)`` of the entities of `kind` whose key starts with `prefix`."""
        states = self._states.get(kind)
        if not states:
            return []
        keys = self._keys[kind]
        if not prefix:
            return [(key, states[key]) for key in keys]
        out = []
        for i in range(bisect.bisect_left(keys, prefix), len(keys)):
            key = keys[i]
            if not key.startswith(prefix):
                break
            out.append((key, states[key]))
        return out

    def write(self, changes: Sequence[Change]) -> None:
        """Apply `changes` in order (atomic: nothing here can fail half-way)."""
        with self._lock:
            for kind, key, state in changes:
                states = self._states.get(kind)
                if states is None:
                    states = self._states[kind] = {}
                    self._keys[kind] = []
                if state is None:
                    if states.pop(key, None) is not None:
                        keys = self._keys[kind]
                        del keys[bisect.bisect_left(keys, key)]
                else:
                    if key not in states:
                        bisect.insort(self._keys[kind], key)
                    states[key] = state
                self._groupings.update(kind, key, state)

    def grouping(self, kind: str, name: str, grouper: Grouper) -> Grouping:
        """Return the entities of `kind` grouped and ranked by `grouper`, kept up to date.

        `name` identifies the grouping (one `grouper` per name). Call and read it under
        :attr:`lock`.
        """
        with self._lock:
            return self._groupings.get(kind, name, grouper, lambda: self.scan(kind))

    def count(self, kind: str | None = None) -> int:
        """Return how many entities the medium holds (of `kind`, or of every kind)."""
        if kind is not None:
            return len(self._states.get(kind, ()))
        return sum(len(states) for states in self._states.values())


def read_counter(medium: Medium, name: str, *parts: str | int | tuple[str, ...]) -> int:
    """Return the last value counter `name` (for `parts`) handed out, 0 if none."""
    state = medium.get(COUNTER, entity_key(name, *parts))
    return 0 if state is None else int(state["value"])


def bump_counter(
    medium: Medium, name: str, *parts: str | int | tuple[str, ...]
) -> tuple[int, Change]:
    """Return the counter's next value and the change that records it as handed out."""
    key = entity_key(name, *parts)
    state = medium.get(COUNTER, key)
    value = (0 if state is None else int(state["value"])) + 1
    return value, (COUNTER, key, {"value": value})
