"""Recorded effects: the outcome of a side effect, recorded once per run and key.

At-least-once execution, exactly-once recording: a runner checks ``get`` before calling an
external API and records the outcome after. An effect that ran but whose record did not
commit will run again, so the effect key is also what the runner hands the external API as
its own idempotency key. The first record wins; an identical re-record returns it, and a
different one raises :class:`~memcommit.roles.EffectConflictError`.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from ._base import OptionalToken, RunLinked, same_or_conflict, writes
from .errors import EffectConflictError
from .medium import COUNTER, EFFECT, WHAT, KeyRoom, State, bump_counter, full_key
from .values import (
    Json,
    JsonIn,
    OptionalText,
    Text,
    check_text,
    checked,
    record_reader,
)

__all__ = ["EffectRecord", "EffectRepository", "MemoryEffectRepository"]


@dataclass(frozen=True)
class EffectRecord:
    """The recorded outcome of one side effect.

    Attributes:
        run_id: The run.
        effect_key: The effect's key within the run.
        seq: The order of recording within the run (1, 2, ...).
        outcome: ``succeeded`` (a result) or ``failed`` (an error).
        result: The result, or None.
        error: The error, or None.
        fingerprint: The caller's hash of the request, if given.
        recorded_at_ms: When it was recorded.
    """

    run_id: str
    effect_key: str
    seq: int
    outcome: Literal["succeeded", "failed"]
    result: Json
    error: Json
    fingerprint: str | None
    recorded_at_ms: int


class EffectRepository(Protocol):
    """The ``effects`` role: side effects recorded once."""

    def record(
        self,
        run_id: str,
        effect_key: str,
        *,
        result: Json = None,
        error: Json = None,
        fingerprint: str | None = None,
        token: int | None = None,
    ) -> EffectRecord:
        """Record the effect's outcome (``failed`` when `error` is not None).

        Raises:
            RunNotFoundError: The run does not exist.
            EffectConflictError: The effect is recorded with another outcome, result, error
                or fingerprint; the stored record is unchanged.
            ClaimLostError: `token` no longer holds the run; nothing was recorded.
        """
        ...

    def get(self, run_id: str, effect_key: str) -> EffectRecord | None:
        """Return the record, or None."""
        ...

    def list(self, run_id: str) -> builtins.list[EffectRecord]:
        """Return the run's records in recording order (``[]`` for an unknown run)."""
        ...


_effect = record_reader(EffectRecord)

_SEQ = "effects.seq"
"""The counter of each run's effects, in recording order."""

_KEYS = KeyRoom(
    WHAT[EFFECT],
    lambda run_id, effect_key: (
        full_key(EFFECT, run_id, effect_key),
        full_key(COUNTER, _SEQ, run_id),
    ),
)
"""The keys of an effect: its own and its run's effect counter's."""


class MemoryEffectRepository(RunLinked):
    """The in-memory ``effects`` role; :class:`RunLinked` documents its arguments."""

    @writes
    @checked
    def record(
        self,
        run_id: Text,
        effect_key: Text,
        *,
        result: JsonIn = None,
        error: JsonIn = None,
        fingerprint: OptionalText = None,
        token: OptionalToken = None,
    ) -> EffectRecord:
        """Record an outcome once. See :meth:`EffectRepository.record`."""
        _KEYS.check(run_id=run_id, effect_key=effect_key)
        with self._medium.lock:
            key, state, now = self._read_on_run(EFFECT, run_id, token, effect_key)
            if state is not None:
                recorded = {"result": result, "error": error, "fingerprint": fingerprint}
                return same_or_conflict(
                    state,
                    _effect,
                    recorded,
                    lambda: EffectConflictError(run_id=run_id, effect_key=effect_key),
                )
            seq, seq_change = bump_counter(self._medium, _SEQ, run_id)
            new: State = {
                "run_id": run_id,
                "effect_key": effect_key,
                "seq": seq,
                "outcome": "succeeded" if error is None else "failed",
                "result": result,
                "error": error,
                "fingerprint": fingerprint,
                "recorded_at_ms": now,
            }
            return self._save(EFFECT, key, new, _effect, seq_change)

    def get(self, run_id: str, effect_key: str) -> EffectRecord | None:
        """Return the record, or None."""
        return self._lookup(
            EFFECT, _effect, check_text(run_id, "run_id"), check_text(effect_key, "effect_key")
        )

    @checked
    def list(self, run_id: Text) -> builtins.list[EffectRecord]:
        """Return the run's records in recording order."""
        states = self._states(EFFECT, run_id)
        states.sort(key=lambda s: int(s["seq"]))
        return [_effect(s) for s in states]


if TYPE_CHECKING:
    _: type[EffectRepository] = MemoryEffectRepository
