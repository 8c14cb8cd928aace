"""What every in-memory role shares: its clock, its medium, and the run checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..clock import Clock, SystemClock, millisecond_reader
from ..errors import NotSupported
from .errors import RunNotFoundError
from .medium import Medium, MemoryMedium
from .values import check_count

__all__ = ["ClaimCheck", "HasRun", "RoleBase", "RunLinked", "check_token"]

HasRun = Callable[[str], bool]
"""The ``has_run(run_id)`` lookup: whether the run exists (a foreign key check)."""


class ClaimCheck(Protocol):
    """The ``check_claim(run_id, token=..., now_ms=...)`` lookup.

    It raises unless `token` holds the run at `now_ms` (the instant the calling operation
    read from its clock, so that one operation reads the clock once).
    """

    def __call__(self, run_id: str, *, token: int, now_ms: int | None = None) -> None:
        """Raise :class:`~memcommit.roles.ClaimLostError` unless `token` holds `run_id`."""
        ...


def check_token(token: object, field: str = "token") -> int:
    """Return `token` if it is an int of at least 1 (tokens start at 1)."""
    return check_count(token, field, minimum=1)


class RoleBase:
    """A role's clock and medium.

    Args:
        clock: The clock every decision and stamp reads (default :class:`SystemClock`).
        medium: Where the entities live (default: a new :class:`MemoryMedium`, so the
            repository stands alone). Roles given the same medium share its lock.
    """

    def __init__(self, *, clock: Clock | None = None, medium: Medium | None = None) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._now = millisecond_reader(self.clock)
        self._medium: Medium = medium if medium is not None else MemoryMedium()

    @property
    def medium(self) -> Medium:
        """The medium this repository keeps its entities in."""
        return self._medium


class RunLinked(RoleBase):
    """A role whose entities belong to runs: steps, checkpoints, effects and turns.

    Args:
        clock: See :class:`RoleBase`.
        medium: See :class:`RoleBase`.
        has_run: ``has_run(run_id) -> bool``; a write naming a run it denies raises
            :class:`RunNotFoundError`. Without it any run id is accepted.
        check_claim: ``check_claim(run_id, token=..., now_ms=...)``, run on every write given a
            ``token=`` in the same critical section as the write (when the runs share this
            role's medium, or its lock). Without it a ``token=`` raises ``NotSupported``
            rather than be ignored.
    """

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        medium: Medium | None = None,
        has_run: HasRun | None = None,
        check_claim: ClaimCheck | None = None,
    ) -> None:
        super().__init__(clock=clock, medium=medium)
        if has_run is not None and not callable(has_run):
            raise TypeError(f"has_run must be callable, not {type(has_run).__name__}")
        if check_claim is not None and not callable(check_claim):
            raise TypeError(f"check_claim must be callable, not {type(check_claim).__name__}")
        self._has_run = has_run
        self._check_claim = check_claim

    def _check_run(self, run_id: str, token: int | None, now: int) -> None:
        """Raise unless the run exists and, when `token` is given, the token holds it at `now`.

        Call under the medium's lock, before deciding anything.
        """
        if self._has_run is not None and not self._has_run(run_id):
            raise RunNotFoundError(run_id=run_id)
        if token is not None:
            if self._check_claim is None:
                raise NotSupported(
                    f"token={token}: this {type(self).__name__} was built without "
                    "check_claim, so it cannot check a claim token; build it with "
                    "check_claim=runs.check_claim"
                )
            self._check_claim(run_id, token=token, now_ms=now)
