"""Tools for testing code that uses memcommit, and the roles' contract suite.

* :class:`ControllableClock`: a clock that moves only when told to; pass it to the store and
  to the code under test.
* :func:`race`: run a function on many threads released together.
* :class:`ServerProcess`: a ``memcommit serve`` child process on a free port.
* The contract suite every store's agent-runtime roles must pass
  (:mod:`memcommit.testing.contract`): run it with ``pytest --pyargs memcommit.testing``, or
  on your own store with :func:`run_contract`.
"""

from __future__ import annotations

from collections.abc import Sequence

from .clock import CLOCK_START, ControllableClock
from .contract.harness import (
    Backend,
    Harness,
    HarnessFactory,
    log_backend,
    memory_backend,
    opened_backend,
    store_memory_backend,
)
from .race import race
from .server import ServerProcess

__all__ = [
    "CLOCK_START",
    "Backend",
    "ControllableClock",
    "Harness",
    "ServerProcess",
    "log_backend",
    "memory_backend",
    "opened_backend",
    "race",
    "run_contract",
    "store_memory_backend",
]


def run_contract(
    factory: Backend | HarnessFactory | Sequence[Backend | HarnessFactory], *pytest_args: str
) -> int:
    """Run the contract suite on a store, in this process, and return pytest's exit code.

    Args:
        factory: A :class:`Backend`, a harness factory (``factory(tmp_path)`` yielding or
            returning a :class:`Harness`), or a list of them.
        *pytest_args: More pytest arguments (``"-x"``, ``"-k", "locks"``, ``"-q"``).

    Returns:
        0 when every test passed (known divergences failing as declared), else pytest's
        nonzero exit code.

    Example:
        >>> from memcommit.testing import memory_backend, run_contract
        >>> run_contract(memory_backend(), "-q")  # doctest: +SKIP
        0
    """
    import pytest

    from .contract.harness import as_backend
    from .contract.plugin import BackendPlugin

    items: list[Backend | HarnessFactory] = (
        list(factory) if isinstance(factory, (list, tuple)) else [factory]  # type: ignore[list-item]
    )
    backends = [as_backend(item) for item in items]
    args = ["--pyargs", "memcommit.testing.contract", "-p", "no:cacheprovider", *pytest_args]
    return int(pytest.main(args, plugins=[BackendPlugin(backends)]))
