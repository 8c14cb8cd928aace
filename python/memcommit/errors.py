"""The exceptions memcommit raises, each declared once.

Every error of the library derives from :class:`MemcommitError`, and every message names the
thing involved (an id, an LSN, a path, a byte offset) and what the user can do about it. The
Rust core raises these same classes, so code catching them never needs to know which side
raised. :class:`CommandError` is the commands' one-line failure, not a library error. A bad argument
is :class:`InvalidType` or :class:`InvalidValue`, a :class:`TypeError` or :class:`ValueError`
as well.

**One declaration per error.** A class states its stable ``code`` (for the wire and for logs)
in its header, its fields as annotations (a default makes one optional; they are keyword-only
unless the header says ``kw_only=False``, which the classes the Rust binding builds with
positional arguments do), and its message as a ``template`` over the fields (or a
``_describe`` method) used when no message is given. From that follow the constructor, the
attributes, ``.fields``, the message, equality, pickling and the wire form
(:func:`to_wire`, :func:`from_wire`). A subclass without a ``code`` (your own, say) declares
nothing new: it travels on the wire as its nearest declared ancestor.

The roles' errors (:class:`RoleError` and its three families) are listed, with when each is
raised, in :mod:`memcommit.roles.errors`. A refused write leaves no trace: when one of these
is raised, nothing of the call was stored.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # the decorator only informs type checkers; Python 3.10 has it in typing_extensions
    _T = TypeVar("_T")

    def dataclass_transform(**_: Any) -> Callable[[_T], _T]:
        return lambda cls: cls


__all__ = [
    "AlreadyClaimedError",
    "AlreadyExistsError",
    "CheckpointNotFoundError",
    "ClaimLostError",
    "CommandError",
    "CommitOutcomeUnknown",
    "ConflictError",
    "ConversationAlreadyExistsError",
    "ConversationNotFoundError",
    "CorruptLog",
    "EffectConflictError",
    "ForgedReference",
    "Guard",
    "IdempotencyConflictError",
    "IntegrityError",
    "InvalidStateError",
    "InvalidType",
    "InvalidValue",
    "LeaseError",
    "LeaseLostError",
    "LostReason",
    "MemcommitError",
    "NotFoundError",
    "NotSupported",
    "Purged",
    "ReadOnlyStore",
    "Rejected",
    "RevisionAlreadyExistsError",
    "RevisionImmutableError",
    "RevisionNotFoundError",
    "RoleError",
    "RunAlreadyExistsError",
    "RunNotFoundError",
    "SealMismatch",
    "SequenceConflictError",
    "ServerError",
    "ServerUnavailable",
    "SnapshotMismatch",
    "StepConflictError",
    "StepNotFoundError",
    "StorageError",
    "StoreClosed",
    "StoreLocked",
    "VersionConflictError",
    "WriterFailed",
    "from_wire",
    "to_wire",
]

_REQUIRED: Any = object()

# Every error class the wire can name, by code, and back. memcommit's own checks raise
# InvalidType and InvalidValue (declared below); the built-in errors something else raises
# (Python binding a call, a user's callback) travel by these codes.
_BY_CODE: dict[str, type[BaseException]] = {
    "type_error": TypeError,
    "value_error": ValueError,
    "key_error": KeyError,
    "index_error": IndexError,
    "lookup_error": LookupError,
    "overflow_error": OverflowError,
    "not_implemented_error": NotImplementedError,
    "runtime_error": RuntimeError,
}
_CODE_OF: dict[type[BaseException], str] = {cls: code for code, cls in _BY_CODE.items()}


@dataclass_transform(eq_default=False, kw_only_default=True)
class _Declared(Exception):
    """The declaration machinery under every memcommit exception (see the module docstring)."""

    message: str | None  # a str once built: the given message, or the description
    template: ClassVar[str] = ""
    _spec: ClassVar[dict[str, Any]] = {}  # every field, message first, with its default
    _positional: ClassVar[tuple[str, ...]] = ()  # the fields a caller may give by position
    _fields: ClassVar[tuple[str, ...]] = ()  # the structured fields: all but the message

    def __init_subclass__(
        cls, *, code: str | None = None, kw_only: bool = True, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        if code is None:
            return
        if code in _BY_CODE:
            raise TypeError(f"{cls.__name__}: code {code!r} is taken by {_BY_CODE[code]}")
        _BY_CODE[code] = cls
        _CODE_OF[cls] = code
        spec = dict(cls._spec)  # a field declared again keeps its place, as in a dataclass
        positional = list(cls._positional)
        for name, annotation in inspect.get_annotations(cls).items():
            if not str(annotation).startswith(("ClassVar", "typing.ClassVar")):
                spec[name] = cls.__dict__.get(name, _REQUIRED)
                if not kw_only and name not in positional:
                    positional.append(name)
        cls._spec = spec
        cls._positional = tuple(positional)
        cls._fields = tuple(name for name in spec if name != "message")
        # What help() and inspect.signature() show; also refuses a required positional field
        # after one with a default, as a dataclass would.
        cls.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [
                _parameter(name, spec[name], inspect.Parameter.POSITIONAL_OR_KEYWORD)
                for name in positional
            ]
            + [
                _parameter(name, default, inspect.Parameter.KEYWORD_ONLY)
                for name, default in spec.items()
                if name not in positional
            ]
        )
        if "code" not in spec:
            cls.code = code  # type: ignore[attr-defined]  # typed where a family declares it

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        if len(args) > 1 and not kwargs and not cls._fields:
            # No structured fields (MemcommitError itself, or a user's subclass of it): several
            # arguments are taken as Exception takes them.
            super().__init__(*args)
            self.message = str(self)
            return
        if len(args) > len(cls._positional):
            raise TypeError(
                f"{cls.__name__}() takes {len(cls._positional)} positional arguments "
                f"but {len(args)} were given"
            )
        values = dict(zip(cls._positional, args, strict=False))
        twice = values.keys() & kwargs.keys()
        if twice:
            raise TypeError(f"{cls.__name__}() got multiple values for {sorted(twice)}")
        values.update(kwargs)
        # What a subclass without a code passes on goes to its next base (ImportError's name=).
        passed_on = {name: values.pop(name) for name in kwargs if name not in cls._spec}
        missing = [name for name in cls._spec if name not in values]
        missing = [name for name in missing if cls._spec[name] is _REQUIRED]
        if missing or (passed_on and cls in _CODE_OF):
            raise TypeError(
                f"{cls.__name__}: missing fields {missing}, unknown fields {sorted(passed_on)}"
            )
        for name, default in cls._spec.items():
            setattr(self, name, values.get(name, default))
        if not self.message:
            self.message = self._describe()
        super().__init__(self.message, **passed_on)

    def _describe(self) -> str:
        """The message when none was given: the template over the fields, or the fields."""
        if self.template:
            return self.template.format(**self.fields)
        inner = ", ".join(f"{name}={value!r}" for name, value in self.fields.items())
        return f"{type(self).__name__}({inner})"

    @property
    def fields(self) -> dict[str, Any]:
        """The structured fields, by name (the same values as the attributes)."""
        return {name: getattr(self, name, None) for name in self._fields}

    def to_wire(self) -> dict[str, Any]:
        """Return a description :func:`from_wire` rebuilds: see :func:`to_wire`."""
        return to_wire(self)

    def __reduce__(self) -> str | tuple[Any, ...]:
        if type(self) not in _CODE_OF:
            return super().__reduce__()
        state = {k: v for k, v in vars(self).items() if k not in self._spec}
        return (_rebuild, (type(self), self.message, self.fields), state or None)

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and isinstance(other, _Declared)
            and other.message == self.message
            and other.fields == self.fields
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.message))


def _parameter(name: str, default: Any, kind: Any) -> inspect.Parameter:
    empty = inspect.Parameter.empty
    return inspect.Parameter(name, kind, default=empty if default is _REQUIRED else default)


def _rebuild(cls: type[_Declared], message: str, fields: Mapping[str, Any]) -> _Declared:
    return cls(message, **fields)


def _declared(cls: type[BaseException]) -> type[BaseException] | None:
    """The nearest class in the MRO of `cls` that has a code."""
    return next((c for c in cls.__mro__ if c in _CODE_OF), None)


def to_wire(error: BaseException) -> dict[str, Any]:
    """Describe `error` as ``{"code", "class", "message", "fields"}`` for :func:`from_wire`.

    The code is that of the nearest class of `error` with one (a subclass without its own
    code travels as its parent; a subclass of ``ValueError`` as ``ValueError``); ``class`` is
    that class's name. An error with no code at all is ``internal``: a bug, described by its
    own class name and message. The fields are Python values (JSON-able for every error but
    :class:`Rejected`, whose guard the wire's value codec tags).
    """
    cls = _declared(type(error))
    if cls is None:
        return {
            "code": "internal",
            "class": type(error).__name__,
            "message": str(error),
            "fields": {},
        }
    if isinstance(error, _Declared):
        message, fields = getattr(error, "message", None) or str(error), error.fields
    else:  # a built-in error: KeyError's str() would quote its message
        message, fields = error.args[0] if len(error.args) == 1 else str(error), {}
    return {"code": _CODE_OF[cls], "class": cls.__name__, "message": str(message), "fields": fields}


def from_wire(wire: Mapping[str, Any]) -> BaseException:
    """Rebuild the error :func:`to_wire` described, as the same class (to raise, not raised).

    Raises:
        KeyError: The description names a code no error has (``internal`` among them).
        TypeError: Its fields are not the fields of that error.
    """
    code = wire.get("code")
    if code not in _BY_CODE:
        raise KeyError(f"code: {code!r} is not the code of a memcommit error")
    return _BY_CODE[code](str(wire.get("message") or ""), **dict(wire.get("fields") or {}))


# -- the store -------------------------------------------------------------------------------


class MemcommitError(_Declared, code="memcommit_error", kw_only=False):
    """The base of every error memcommit raises on purpose."""

    message: str | None = None


class InvalidValue(MemcommitError, ValueError, code="invalid_value", kw_only=False):
    """An argument memcommit refuses for its value: out of range, malformed, or unknown.

    A :class:`ValueError` too (``except ValueError`` works), and a :class:`MemcommitError`.
    The message names the argument (or the field, row or line) and the value. Nothing of the
    call was written.
    """

    message: str | None = None


class InvalidType(MemcommitError, TypeError, code="invalid_type", kw_only=False):
    """An argument of a type memcommit does not take.

    A :class:`TypeError` too (``except TypeError`` works), and a :class:`MemcommitError`. The
    message names the argument and the type given. Nothing of the call was written. (A call
    Python itself cannot bind, with an unknown keyword say, raises Python's own
    ``TypeError``.)
    """

    message: str | None = None


class CommandError(_Declared, code="command_error", kw_only=False):
    """A failure the command line reports as one line of text, without a traceback.

    Raised by the commands (``memcommit.cli`` and the server's ``serve``), never by the
    library's API.

    Args:
        message: What went wrong and what the user can do, naming the path or line.
        code: The exit code: 1 for a failure, 2 for a usage error.

    """

    message: str
    code: int = 1


@dataclass(frozen=True)
class Guard:
    """The guard that refused a commit.

    Attributes:
        kind: ``"expect_lsn"``, ``"exists"``, ``"status"``, ``"tier"``, ``"lsn"`` or
            ``"unknown_id"`` (an operation named a memory the store does not have).
        id: The memory the guard is about, or None for ``expect_lsn``.
        expected: What the guard asked for: an int for ``expect_lsn`` and ``lsn``, a bool for
            ``exists`` and ``unknown_id`` (whether the memory should exist), else a str.
        actual: What the store had, in the same type.
    """

    kind: str
    id: str | None
    expected: int | bool | str
    actual: int | bool | str


class Rejected(MemcommitError, code="rejected", kw_only=False):
    """A commit refused by a guard; nothing of it was written.

    Attributes:
        reason: A sentence saying which guard failed and what the store had.
        guard: The :class:`Guard` that failed.
    """

    guard: Guard | None = None

    @property
    def reason(self) -> str:
        """A sentence saying which guard failed and what the store had (the message)."""
        return str(self.message)


class Purged(MemcommitError, code="purged"):
    """The memory was purged by a retention policy during log compaction."""


class StoreLocked(MemcommitError, code="store_locked", kw_only=False):
    """Another writer holds the log file (in this process or another)."""

    path: str | None = None


class StoreClosed(MemcommitError, code="store_closed"):
    """The store was closed."""


class ReadOnlyStore(MemcommitError, code="read_only_store"):
    """A write was attempted on a store opened with ``read_only=True``."""


class WriterFailed(MemcommitError, code="writer_failed", kw_only=False):
    """A write or fsync failed; the writer stopped and the store must be reopened.

    After a failed fsync the kernel may have dropped the unwritten pages, so no later success
    can prove the data safe. Reopening recovers from what is on disk. The message says whether
    the write or the fsync failed and, for a full disk, how many more bytes it needed.

    Attributes:
        path: The log file.
        errno: The OS error number of the failure (``errno.ENOSPC`` for a full disk), if any.
    """

    path: str | None = None
    errno: int | None = None


class StorageError(MemcommitError, OSError, code="storage_error", kw_only=False):
    """The disk failed, is full, or is read-only, outside the log's own commits.

    Raised by what writes files beside the log (log compaction's new generation, the index
    file, snapshots, a new log) for ``EIO``, ``ENOSPC``, ``EDQUOT``, ``EROFS`` and ``EFBIG``;
    the store is as it was before the call. An :class:`OSError` too (``except OSError`` and
    ``e.errno`` work), and a :class:`MemcommitError`. The message names the file and, for a
    full disk, how many more bytes of free space the operation needs.

    Attributes:
        path: The file involved.
        errno: The OS error number.
    """

    path: str | None = None
    errno: int | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # What OSError's own readers look at.
        self.filename = self.path
        self.strerror = self.message

    def __str__(self) -> str:  # the message, not OSError's "[Errno n] ...: 'file'" form
        return str(self.message)


class NotSupported(MemcommitError, code="not_supported"):
    """The operation does not apply to this kind of store.

    A store in RAM (``":memory:"``) keeps its hash-chained log in memory, so seals and
    ``verify`` work on it; what needs a log file does not: ``save_snapshot``, opening with
    ``snapshot=`` or ``read_only=True``, and log compaction.
    """

    # Written out, for MissingExtra (an ImportError too) passes ImportError's name= through it.
    def __init__(self, message: str | None = None, **passed_on: Any) -> None:
        super().__init__(message, **passed_on)


class IntegrityError(MemcommitError, code="integrity_error"):
    """The log's bytes are not what was written."""


class CorruptLog(IntegrityError, code="corrupt_log", kw_only=False):
    """A damaged record inside committed data (not a torn tail).

    Attributes:
        path: The log file.
        offset: Byte offset of the damaged record.
        lsn: The LSN expected there.
    """

    path: str | None = None
    offset: int | None = None
    lsn: int | None = None


class SealMismatch(IntegrityError, code="seal_mismatch", kw_only=False):
    """The hash chain recomputed from the log and a seal (or an anchor) disagree.

    Attributes:
        path: The log file.
        lsn: LSN of the seal's own record (``Seal.record_lsn``), for a seal in the log or an
            anchor the log lacks.
        offset: Byte offset of that seal's record (None for an anchor the log lacks).
        after_lsn: LSN of the last record the previous matching seal covered: the change lies
            after it and before ``lsn``.
    """

    path: str | None = None
    lsn: int | None = None
    offset: int | None = None
    after_lsn: int | None = None


class ForgedReference(IntegrityError, code="forged_reference", kw_only=False):
    """A reference to a memory that never existed and was never purged.

    Attributes:
        path: The log file.
        id: The id referred to.
        by: The memory whose ``sources`` name it.
        lsn: LSN of the put that refers to it.
        offset: Byte offset of that put.
    """

    path: str | None = None
    id: str | None = None
    by: str | None = None
    lsn: int | None = None
    offset: int | None = None


class SnapshotMismatch(MemcommitError, code="snapshot_mismatch"):
    """A snapshot does not belong to the log it was opened with."""


# -- the server ------------------------------------------------------------------------------


class ServerError(MemcommitError, code="server_error"):
    """The server refused a request or failed (not a refused commit: that is ``Rejected``).

    Attributes:
        status: The HTTP status (401 without the right token, 400 for a malformed request,
            413 for one over the size limit, 503 while shutting down, 500 for a server bug),
            or None when there was no answer.
        code: A stable identifier of the failure (``unauthorized``, ``bad_request``...).
        url: The server.
    """

    status: int | None = None
    code: str = "server_error"
    url: str = ""


class ServerUnavailable(ServerError, code="server_unavailable"):
    """The server could not be reached (refused, reset or timed out) within the retry window."""


class CommitOutcomeUnknown(ServerError, code="commit_outcome_unknown"):
    """A commit was sent, its answer was lost, and the server restarted before it was resent.

    The commit may or may not be in the log: the server that could have applied it is gone,
    and a resend cannot be told apart from a new commit. Read the store (``refresh()``) to
    find out before committing it again.

    Attributes:
        commit_id: The commit's id.
    """

    code: str = "commit_outcome_unknown"
    commit_id: str = ""


# -- the roles -------------------------------------------------------------------------------

LostReason = Literal["stale", "expired", "released", "not_active"]
"""Why a token no longer holds: a newer token exists (``stale``), the lease ran out
(``expired``), the holder gave it back (``released``), or the run is no longer running
(``not_active``: completed, failed, suspended or cancelled)."""


class RoleError(MemcommitError, code="role_error"):
    """The base of every error an agent-runtime role raises.

    Attributes:
        code: A stable identifier of the class, for the wire and for logs.
        fields: The structured fields, by name (the same values as the attributes).
    """

    code: ClassVar[str]


class NotFoundError(RoleError, code="not_found"):
    """A write named something the store does not have; reads return None or [] instead."""


class RunNotFoundError(NotFoundError, code="run_not_found"):
    """A write named a run the store does not have (as a foreign key would refuse it).

    Attributes:
        run_id: The run.
    """

    run_id: str
    template = "run {run_id!r} does not exist; create it with runs.create() first"


class StepNotFoundError(NotFoundError, code="step_not_found"):
    """A step was completed or failed before it was started.

    Attributes:
        run_id: The run.
        step_id: The step.
    """

    run_id: str
    step_id: str
    template = "step {step_id!r} of run {run_id!r} was never started; call steps.start() first"


class CheckpointNotFoundError(NotFoundError, code="checkpoint_not_found"):
    """A checkpoint named as a parent is not one of the same run and namespace.

    Attributes:
        run_id: The run.
        checkpoint_id: The checkpoint.
    """

    run_id: str
    checkpoint_id: str
    template = (
        "checkpoint {checkpoint_id!r} is not a checkpoint of run {run_id!r} in that namespace"
    )


class ConversationNotFoundError(NotFoundError, code="conversation_not_found"):
    """A write named a conversation the store does not have (appends never create one).

    Attributes:
        conversation_id: The conversation.
    """

    conversation_id: str
    template = (
        "conversation {conversation_id!r} does not exist; create it with conversations.create() "
        "first"
    )


class RevisionNotFoundError(NotFoundError, code="revision_not_found"):
    """A write named a revision (by id or by published version) the agent does not have.

    Attributes:
        agent_id: The agent.
        revision_id: The revision asked for, or None when asked by version.
        version: The version asked for, or None when asked by id.
    """

    agent_id: str
    revision_id: str | None = None
    version: int | None = None

    def _describe(self) -> str:
        which = (
            f"revision {self.revision_id!r}" if self.version is None else f"version {self.version}"
        )
        return f"agent {self.agent_id!r} has no {which}"


class ConflictError(RoleError, code="conflict"):
    """A write conflicts with what the store holds; nothing was written."""


class AlreadyExistsError(ConflictError, code="already_exists"):
    """A create named an id that already exists; the existing one is untouched."""


class RunAlreadyExistsError(AlreadyExistsError, code="run_already_exists"):
    """A run with this id exists.

    Attributes:
        run_id: The run.
    """

    run_id: str
    template = "run {run_id!r} already exists; pick another id or omit it"


class ConversationAlreadyExistsError(AlreadyExistsError, code="conversation_already_exists"):
    """A conversation with this id exists.

    Attributes:
        conversation_id: The conversation.
    """

    conversation_id: str
    template = "conversation {conversation_id!r} already exists"


class RevisionAlreadyExistsError(AlreadyExistsError, code="revision_already_exists"):
    """A revision with this id exists for the agent.

    Attributes:
        agent_id: The agent.
        revision_id: The revision.
    """

    agent_id: str
    revision_id: str
    template = "agent {agent_id!r} already has revision {revision_id!r}"


class VersionConflictError(ConflictError, code="version_conflict"):
    """An expected version (or checksum) did not match the stored one.

    Attributes:
        what: The thing whose version was compared, in words.
        expected: The version the caller expected.
        actual: The version the store has (0 or None when the thing is absent).
    """

    what: str
    expected: int | str | None
    actual: int | str | None
    template = (
        "{what}: expected version {expected!r} but the store has {actual!r}; re-read and retry"
    )


class SequenceConflictError(VersionConflictError, code="sequence_conflict"):
    """A conversation's ``expected_last_seq`` did not match its ``last_seq`` (it changed since)."""


class StepConflictError(ConflictError, code="step_conflict"):
    """A step was started under another name, or completed with another output.

    Attributes:
        run_id: The run.
        step_id: The step.
        reason: ``"name_mismatch"`` (the replay is not deterministic) or
            ``"output_mismatch"`` (a second writer recorded a different output).
    """

    run_id: str
    step_id: str
    reason: str
    template = "step {step_id!r} of run {run_id!r}: {reason}"


class EffectConflictError(ConflictError, code="effect_conflict"):
    """An effect was recorded again with a different outcome; the first record stands.

    Attributes:
        run_id: The run.
        effect_key: The effect.
    """

    run_id: str
    effect_key: str
    template = (
        "effect {effect_key!r} of run {run_id!r} is already recorded with a different outcome; "
        "an effect is recorded once"
    )


class IdempotencyConflictError(ConflictError, code="idempotency_conflict"):
    """A live idempotency key was used with another request fingerprint or result.

    Attributes:
        key: The key.
    """

    key: str
    template = "idempotency key {key!r} is live for a different request or result"


class RevisionImmutableError(ConflictError, code="revision_immutable"):
    """A published or archived revision cannot change.

    Attributes:
        agent_id: The agent.
        revision_id: The revision.
    """

    agent_id: str
    revision_id: str
    template = (
        "revision {revision_id!r} of agent {agent_id!r} is no longer a draft; create a new "
        "draft to change it"
    )


class LeaseError(RoleError, code="lease_error"):
    """A lease, claim or fencing token did not allow the operation."""


class AlreadyClaimedError(LeaseError, code="already_claimed"):
    """The run is held by a live claim (of any worker, the caller's own included).

    Attributes:
        resource: The run.
        holder: The worker holding it.
        expires_at_ms: When that claim expires, in epoch milliseconds.
    """

    resource: str
    holder: str
    expires_at_ms: int
    template = (
        "{resource!r} is held by {holder!r} until {expires_at_ms} ms; wait for expiry or claim "
        "another"
    )


class LeaseLostError(LeaseError, code="lease_lost"):
    """A fencing token no longer holds its lease; the write it carried was refused.

    Attributes:
        resource: The lock name, idempotency key or run.
        token: The token the caller gave.
        current_token: The live holder's token, or None when nobody holds it.
        reason: ``"stale"``, ``"expired"``, ``"released"`` or ``"not_active"``.
    """

    resource: str
    token: int
    current_token: int | None
    reason: LostReason

    def _describe(self) -> str:
        current = self.current_token
        holder = "nobody holds it" if current is None else f"token {current} holds it"
        return (
            f"{self.resource!r}: token {self.token} is {self.reason} ({holder}); "
            "stop working on it and acquire it again"
        )


class ClaimLostError(LeaseLostError, code="claim_lost"):
    """A run claim's token no longer holds the run."""


class InvalidStateError(RoleError, code="invalid_state"):
    """The thing's current state does not allow the operation.

    Attributes:
        current: The current state (a status).
        attempted: The operation that was refused.
    """

    current: str
    attempted: str
    template = "cannot {attempted} from state {current!r}"
