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

A medium whose store may be opened read-only has a method ``check_writable()`` that raises
:class:`~memcommit.ReadOnlyStore` when it is (the log's medium does). Every role write calls it
first, so such a store refuses a write whatever it would change (a delete of nothing too); a
medium without it takes writes.

**Keys** are str, built by :func:`entity_key` from parts (str, non-negative int, or a tuple of
str for a namespace): the JSON array of the parts, with ints written as 20 zero-padded digits
so that key order is numeric order, e.g. ``entity_key("run-1", 3) ==
'["run-1","00000000000000000003"]'``. :func:`child_prefix` gives the prefix that matches exactly
the keys whose leading parts are the given ones (``'["run-1",'``), so ``"doc"`` never matches
``"doc/nested"`` or ``"docs"``. ``scan`` returns entities in key order (code-point order of the
key string, which is UTF-8 byte order).

**Limits**, the same on every store: an entity's full key (its kind, a NUL and its key) is at
most :data:`MAX_KEY_BYTES` bytes, and its state one record of the store (its JSON at most
``max_record_bytes - 1`` bytes). A role checks the keys of a write before making it, with the
:class:`KeyRoom` it declares (every key the entity brings, counters and grouping entries
included), and names the caller's argument that does not fit; a medium refuses a state too large
with :class:`StateTooLarge`, which the role turns into an error naming the caller's argument.

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
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from json.encoder import encode_basestring as _quote
from typing import Any, Protocol, TypeAlias, runtime_checkable

from ..errors import InvalidValue
from .groupings import Grouper, Grouping, Groupings
from .values import Json, check_count

__all__ = [
    "ARTIFACT",
    "ARTIFACT_DATA",
    "CHECKPOINT",
    "CONVERSATION",
    "COUNTER",
    "DEFAULT_MAX_RECORD_BYTES",
    "EFFECT",
    "IDEMPOTENCY",
    "KINDS",
    "LOCK",
    "MAX_KEY_BYTES",
    "REVISION",
    "REVISION_AGENT",
    "RUN",
    "STATE",
    "STEP",
    "TURN",
    "WHAT",
    "Change",
    "KeyArgument",
    "KeyRoom",
    "Medium",
    "MemoryMedium",
    "State",
    "StateTooLarge",
    "bump_counter",
    "child_prefix",
    "entity_key",
    "full_key",
    "read_counter",
    "state_bytes",
    "state_json",
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

WHAT = {
    RUN: "a run",
    STEP: "a step",
    CHECKPOINT: "a checkpoint",
    IDEMPOTENCY: "an idempotency record",
    LOCK: "a lock",
    EFFECT: "an effect",
    STATE: "a state entry",
    ARTIFACT: "an artifact's description",
    ARTIFACT_DATA: "an artifact",
    REVISION: "a revision",
    REVISION_AGENT: "an agent's current revision",
    CONVERSATION: "a conversation",
    TURN: "a turn",
    COUNTER: "a counter",
}
"""What an entity of each kind is, for messages (``"a lock"``)."""

MAX_KEY_BYTES = 1024
"""The most UTF-8 bytes an entity's full key (:func:`full_key`) may have, on every store.

A store's log holds no longer key; the roles refuse a write whose keys would be longer, naming
the caller's argument (:class:`KeyRoom`), whatever the medium."""

DEFAULT_MAX_RECORD_BYTES = 16 * 1024 * 1024
"""A store's default ``max_record_bytes``, which a :class:`MemoryMedium` keeps too: an entity's
state is one record, its JSON at most ``max_record_bytes - 1`` bytes."""

_SEP = "\x00"  # between the kind and the key of a full key: never in a kind or a key


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


def full_key(kind: str, *parts: KeyPart) -> str:
    """Return the full key of entity ``(kind, parts)``: `kind`, a NUL and :func:`entity_key`.

    What a store's log keeps the entity under, and what :data:`MAX_KEY_BYTES` bounds.
    """
    return kind + _SEP + entity_key(*parts)


KeyArgument: TypeAlias = "str | tuple[str, ...]"
"""A caller's argument that goes into keys: an id or name, or a namespace of labels."""


def _key_bytes(key: str) -> int:
    return len(key) if key.isascii() else len(key.encode())


def _longest(keys: Iterable[str]) -> int:
    return max(map(_key_bytes, keys), default=0)


def _filled(value: KeyArgument, fill: str) -> KeyArgument:
    """Return `value` with its text replaced by `fill`.

    A namespace keeps its number of labels: the first one is `fill`, the others empty.
    """
    if isinstance(value, str):
        return fill
    return tuple(fill if i == 0 else "" for i in range(len(value)))


def _text_bytes(value: KeyArgument, escaped: bool = False) -> int:
    """Return the UTF-8 bytes of `value` (of a namespace: of its labels together).

    With `escaped`, as JSON text holds it in a key: a quote, a backslash or a control
    character as its escape.
    """
    labels = (value,) if isinstance(value, str) else value
    if escaped:
        return sum(len(_quote(label).encode()) - 2 for label in labels)
    return sum(len(label.encode()) for label in labels)


def _listed(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


class KeyRoom:
    """The keys a write of a role makes from the caller's arguments, and the check they fit.

    A role declares one for each kind of entity a caller names (a lock by its name, a state
    entry by its namespace and key...) and calls :meth:`check` with the caller's arguments, by
    the caller's names for them, before it writes: so every store refuses the same arguments,
    with a message naming the argument and the most bytes it may have.

    Args:
        what: The entity, for the message (``"a lock"``).
        keys: ``keys(**arguments)`` returns every full key (:func:`full_key`) that the entity
            of these arguments brings, at its longest: its own, the counters it takes, the
            entities written with it, and the entries of the groupings kept for it, now or
            later (a run's every status).
    """

    def __init__(self, what: str, keys: Callable[..., Iterable[str]]) -> None:
        self.what = what
        self._keys = keys
        # By the arguments' names and number of labels: (the longest key with every argument
        # empty, the most times one argument is in one key).
        self._bounds: dict[tuple[object, ...], tuple[int, int]] = {}

    def check(self, **arguments: KeyArgument) -> None:
        """Return if every key fits in :data:`MAX_KEY_BYTES`; raise naming an argument otherwise.

        Raises:
            InvalidValue: A key would be too long. The longest of the arguments in the keys too
                long is named, with the most bytes it may have with the others as they are.
        """
        # Short arguments fit without building the keys: a character takes at most 6 bytes in
        # a key (a control character's JSON escape).
        chars = 0
        shape: list[object] = []
        for name, value in arguments.items():
            if isinstance(value, str):
                chars += len(value)
                shape.append(name)
            else:
                chars += sum(map(len, value))
                shape.append((name, len(value)))
        bound = self._bounds.get(tuple(shape))
        if bound is None:
            bound = self._bound(arguments)
            if len(self._bounds) < 64:
                self._bounds[tuple(shape)] = bound
        empty, times = bound
        if empty + times * 6 * chars <= MAX_KEY_BYTES:
            return
        keys = list(self._keys(**arguments))
        if _longest(keys) <= MAX_KEY_BYTES:
            return
        raise self._too_long(arguments, [_key_bytes(key) for key in keys])

    def _bound(self, arguments: dict[str, KeyArgument]) -> tuple[int, int]:
        """Return (the longest key with every argument empty, the most times one is in a key)."""
        empty = {name: _filled(value, "") for name, value in arguments.items()}
        rests = [_key_bytes(key) for key in self._keys(**empty)]
        times = 0
        for name, value in arguments.items():
            ones = [_key_bytes(key) for key in self._keys(**{**empty, name: _filled(value, "x")})]
            times = max([times, *(one - rest for one, rest in zip(ones, rests, strict=True))])
        return max(rests, default=0), times

    def _room(self, name: str, arguments: dict[str, KeyArgument]) -> tuple[int, int]:
        """Return (the most bytes argument `name` may have, how many keys too long hold it)."""
        value = arguments[name]
        sizes = [_key_bytes(key) for key in self._keys(**arguments)]
        # The keys with `name` emptied, and with one byte in it: what the rest takes in each
        # key, and how many times the argument is in it.
        rests = [_key_bytes(key) for key in self._keys(**{**arguments, name: _filled(value, "")})]
        ones = [_key_bytes(key) for key in self._keys(**{**arguments, name: _filled(value, "x")})]
        most, held = MAX_KEY_BYTES, 0
        for size, rest, one in zip(sizes, rests, ones, strict=True):
            times = one - rest
            if times > 0:
                most = min(most, (MAX_KEY_BYTES - rest) // times)
                held += size > MAX_KEY_BYTES
        return max(most, 0), held

    def _too_long(self, arguments: dict[str, KeyArgument], sizes: list[int]) -> InvalidValue:
        rooms = {name: self._room(name, arguments) for name in arguments}
        named = [name for name, (_, held) in rooms.items() if held]
        if not named:  # the role's own parts alone are too long: a bug, said plainly
            return InvalidValue(
                f"key: {self.what}'s keys would be {max(sizes)} bytes, more than "
                f"{MAX_KEY_BYTES}, whatever {_listed(list(arguments))} were"
            )
        name = max(named, key=lambda n: _text_bytes(arguments[n], escaped=True))
        value, most = arguments[name], rooms[name][0]
        size = _text_bytes(value)
        others = [other for other in arguments if other != name]
        beside = f" with this {_listed(others)}" if others else ""
        escapes = (
            " (each quote, backslash or control character in it counts as its JSON escape, "
            "2 or 6 bytes)"
            if _text_bytes(value, escaped=True) != size
            else ""
        )
        if isinstance(value, str):
            said, unit = f"{name}: {size} bytes is too long", "bytes"
            advice = "pass a shorter one (a digest of a long one, say)"
        else:
            said = f"{name}: its labels are {size} bytes together, too long"
            unit, advice = "bytes of labels", "pass shorter labels"
        return InvalidValue(
            f"{said}; {self.what}'s {name} (with its other key parts) may be at most "
            f"{most} {unit}{beside}{escapes}: {advice}"
        )


class StateTooLarge(InvalidValue):
    """A medium's refusal of an entity's state too large for one record of its store.

    A role turns it into an error naming the caller's argument; nothing was written. Raised
    with :data:`WHAT` the entity is and its size, for a direct writer of the medium.

    Attributes:
        kind: The entity's kind.
        key: The entity's key.
        size: The UTF-8 bytes of the state's JSON.
        max_record_bytes: The store's largest record: a state's JSON and a byte.
    """

    def __init__(
        self, kind: str = "", key: str = "", size: int = 0, max_record_bytes: int = 0
    ) -> None:
        super().__init__(
            f"state: the state of {WHAT.get(kind, kind)} {key} is {size} bytes as JSON; one "
            f"record holds at most {max_record_bytes - 1} (max_record_bytes is "
            f"{max_record_bytes})"
        )
        self.kind = kind
        self.key = key
        self.size = size
        self.max_record_bytes = max_record_bytes


def _refuse(value: object) -> None:
    raise TypeError(f"{type(value).__name__} is not JSON")


def _compact_json() -> Callable[[Json], str]:
    """The JSON text of a checked value as a store writes it: compact, not ASCII-escaped.

    The C encoder made once where there is one (``json.dumps`` makes one per call, which costs
    more than encoding a small state); ``json.dumps``'s own encoder otherwise.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is not None:
        try:
            # No markers: a checked value is a tree. The arguments are json.encoder's own.
            encode = make(None, _refuse, _quote, None, ":", ",", False, False, False)
        except TypeError:
            pass
        else:
            return lambda value: "".join(encode(value, 0))
    return json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


_json_text = _compact_json()


def state_json(state: Json) -> str:
    """Return `state`'s JSON as a store keeps it: compact, not ASCII-escaped, keys in order.

    The same text as ``json.dumps(state, ensure_ascii=False, allow_nan=False,
    separators=(",", ":"))``, for a checked value.
    """
    return _json_text(state)


def state_bytes(state: Json) -> int:
    """Return the UTF-8 bytes of :func:`state_json` of `state`."""
    text = _json_text(state)
    return len(text) if text.isascii() else len(text.encode())


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

    @property
    def max_record_bytes(self) -> int:
        """The largest record a write may make.

        A state whose JSON has ``max_record_bytes`` bytes or more is refused
        (:class:`StateTooLarge`) before anything of its write is.
        """
        ...

    def write(self, changes: Sequence[Change]) -> None:
        """Apply `changes` (upserts and deletes) atomically, in order."""
        ...


class MemoryMedium:
    """A :class:`Medium` in dicts: gone with the process.

    Each kind has a dict of states and a sorted list of its keys (kept with ``bisect``), so a
    prefix scan costs the log of the kind's size plus its matches.

    Args:
        max_record_bytes: The largest record of a store, which it keeps as well: a state whose
            JSON is larger than ``max_record_bytes - 1`` bytes is refused
            (:class:`StateTooLarge`), as a store's log refuses it.
    """

    def __init__(self, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        self._max_record_bytes = check_count(max_record_bytes, "max_record_bytes", minimum=1)
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

    @property
    def max_record_bytes(self) -> int:
        """The largest record: a state's JSON may have one byte less."""
        return self._max_record_bytes

    def write(self, changes: Sequence[Change]) -> None:
        """Apply `changes` in order (atomic: a state too large is refused before any change).

        Raises:
            StateTooLarge: A state's JSON is more than ``max_record_bytes - 1`` bytes.
        """
        most = self._max_record_bytes - 1
        for kind, key, state in changes:
            if state is not None:
                size = state_bytes(state)
                if size > most:
                    raise StateTooLarge(kind, key, size, self._max_record_bytes)
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
