"""Steps: the orchestration journal of a run.

A runner names each step with a deterministic ``step_id`` and records its start, its output
or its error. On replay, ``start`` of a step that already succeeded returns it unchanged (the
runner reuses the output instead of running it again); a step started under a different name
than the journal holds is a non-determinism error (:class:`~memcommit.roles.StepConflictError`).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from ._base import OptionalToken, RunLinked, same_or_conflict, writes
from .errors import InvalidStateError, StepConflictError, StepNotFoundError
from .medium import COUNTER, STEP, WHAT, KeyRoom, State, bump_counter, full_key
from .values import (
    Json,
    JsonIn,
    OptionalCount,
    Text,
    check_text,
    checked,
    record_reader,
    same_json,
)

__all__ = ["MemoryStepRepository", "Step", "StepRepository", "StepStatus"]

StepStatus = Literal["running", "succeeded", "failed"]


@dataclass(frozen=True)
class Step:
    """One step of a run.

    Attributes:
        run_id: The run.
        step_id: The runner's deterministic key for the step.
        seq: The order of its first start within the run (1, 2, ...).
        name: What the step is; compared on replay.
        status: ``running``, ``succeeded`` or ``failed``.
        attempt: How many times it was started.
        input: What its first start recorded.
        output: What ``complete`` recorded, or None.
        error: What ``fail`` recorded, or None.
        started_at_ms: When its latest attempt started.
        finished_at_ms: When it succeeded or failed, or None.
    """

    run_id: str
    step_id: str
    seq: int
    name: str
    status: StepStatus
    attempt: int
    input: Json
    output: Json
    error: Json
    started_at_ms: int
    finished_at_ms: int | None


class StepRepository(Protocol):
    """The ``steps`` role: each run's journal of steps."""

    def start(
        self,
        run_id: str,
        step_id: str,
        *,
        name: str,
        input: Json = None,
        token: int | None = None,
    ) -> Step:
        """Start a step, retry it, or replay it.

        A new step gets the next ``seq``, attempt 1, ``running``. A running or failed step
        is retried: attempt + 1, ``running``. A succeeded step is returned unchanged.

        Raises:
            RunNotFoundError: The run does not exist.
            StepConflictError: The step exists under another name (``name_mismatch``).
            ClaimLostError: `token` no longer holds the run; nothing was written.
        """
        ...

    def complete(
        self, run_id: str, step_id: str, *, output: Json = None, token: int | None = None
    ) -> Step:
        """Record the step's output (``succeeded``).

        Completing again with an equal output returns the step unchanged.

        Raises:
            StepNotFoundError: The step was never started.
            StepConflictError: It succeeded with a different output (``output_mismatch``).
            InvalidStateError: It failed and was not started again.
        """
        ...

    def fail(self, run_id: str, step_id: str, *, error: Json, token: int | None = None) -> Step:
        """Record the step's error (``failed``); failing again with an equal error is a no-op.

        Raises:
            StepNotFoundError: The step was never started.
            InvalidStateError: It succeeded, or failed with another error.
        """
        ...

    def get(self, run_id: str, step_id: str) -> Step | None:
        """Return the step, or None."""
        ...

    def list(
        self, run_id: str, *, after_seq: int | None = None, limit: int | None = None
    ) -> builtins.list[Step]:
        """Return the run's steps by ``seq`` ascending (``[]`` for an unknown run)."""
        ...


_step = record_reader(Step)

_SEQ = "steps.seq"
"""The counter of each run's steps, in the order they first started."""

_KEYS = KeyRoom(
    WHAT[STEP],
    lambda run_id, step_id: (full_key(STEP, run_id, step_id), full_key(COUNTER, _SEQ, run_id)),
)
"""The keys of a step: its own and its run's step counter's."""


class MemoryStepRepository(RunLinked):
    """The in-memory ``steps`` role; :class:`RunLinked` documents its arguments."""

    @writes
    @checked
    def start(
        self,
        run_id: Text,
        step_id: Text,
        *,
        name: Text,
        input: JsonIn = None,
        token: OptionalToken = None,
    ) -> Step:
        """Start, retry or replay a step. See :meth:`StepRepository.start`."""
        _KEYS.check(run_id=run_id, step_id=step_id)
        with self._medium.lock:
            key, state, now = self._read_on_run(STEP, run_id, token, step_id)
            if state is None:
                seq, seq_change = bump_counter(self._medium, _SEQ, run_id)
                new: State = {
                    "run_id": run_id,
                    "step_id": step_id,
                    "seq": seq,
                    "name": name,
                    "status": "running",
                    "attempt": 1,
                    "input": input,
                    "output": None,
                    "error": None,
                    "started_at_ms": now,
                    "finished_at_ms": None,
                }
                return self._save(STEP, key, new, _step, seq_change)
            if state["name"] != name:
                raise StepConflictError(
                    f"step {step_id!r} of run {run_id!r} was recorded as {state['name']!r}, "
                    f"not {name!r}: the replay is not deterministic",
                    run_id=run_id,
                    step_id=step_id,
                    reason="name_mismatch",
                )
            if state["status"] == "succeeded":
                return _step(state)
            new = {
                **state,
                "status": "running",
                "attempt": state["attempt"] + 1,
                "error": None,
                "started_at_ms": now,
                "finished_at_ms": None,
            }
            return self._save(STEP, key, new, _step)

    def _existing(self, run_id: str, step_id: str, token: int | None) -> tuple[str, State, int]:
        key, state, now = self._read_on_run(STEP, run_id, token, step_id)
        if state is None:
            raise StepNotFoundError(run_id=run_id, step_id=step_id)
        return key, state, now

    @writes
    @checked
    def complete(
        self, run_id: Text, step_id: Text, *, output: JsonIn = None, token: OptionalToken = None
    ) -> Step:
        """Record the step's output. See :meth:`StepRepository.complete`."""
        with self._medium.lock:
            key, state, now = self._existing(run_id, step_id, token)
            if state["status"] == "succeeded":
                return same_or_conflict(
                    state,
                    _step,
                    {"output": output},
                    lambda: StepConflictError(
                        f"step {step_id!r} of run {run_id!r} already succeeded with another "
                        "output; the first output stands",
                        run_id=run_id,
                        step_id=step_id,
                        reason="output_mismatch",
                    ),
                )
            if state["status"] == "failed":
                raise InvalidStateError(current="failed", attempted="complete")
            new = {**state, "status": "succeeded", "output": output, "finished_at_ms": now}
            return self._save(STEP, key, new, _step)

    @writes
    @checked
    def fail(
        self, run_id: Text, step_id: Text, *, error: JsonIn, token: OptionalToken = None
    ) -> Step:
        """Record the step's error. See :meth:`StepRepository.fail`."""
        with self._medium.lock:
            key, state, now = self._existing(run_id, step_id, token)
            if state["status"] == "failed" and same_json(state["error"], error):
                return _step(state)
            if state["status"] != "running":
                raise InvalidStateError(current=state["status"], attempted="fail")
            new = {**state, "status": "failed", "error": error, "finished_at_ms": now}
            return self._save(STEP, key, new, _step)

    def get(self, run_id: str, step_id: str) -> Step | None:
        """Return the step, or None."""
        return self._lookup(
            STEP, _step, check_text(run_id, "run_id"), check_text(step_id, "step_id")
        )

    @checked
    def list(
        self, run_id: Text, *, after_seq: OptionalCount = None, limit: OptionalCount = None
    ) -> builtins.list[Step]:
        """Return the run's steps by ``seq``. See :meth:`StepRepository.list`."""
        states = self._states(STEP, run_id)
        states.sort(key=lambda s: int(s["seq"]))
        if after_seq is not None:
            states = [s for s in states if s["seq"] > after_seq]
        if limit is not None:
            states = states[:limit]
        return [_step(s) for s in states]


if TYPE_CHECKING:
    _: type[StepRepository] = MemoryStepRepository
