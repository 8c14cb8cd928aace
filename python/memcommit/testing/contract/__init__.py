"""The contract suite every store's agent-runtime roles must pass.

Run it on the in-memory store with ``pytest --pyargs memcommit.testing``, on your own store
with :func:`memcommit.testing.run_contract` or ``MEMCOMMIT_CONTRACT_BACKEND=pkg.mod:backend
pytest --pyargs memcommit.testing``, or inside your own test run by importing the test
classes and the fixtures into a test module and overriding ``memcommit_backend``::

    from memcommit.testing import Backend
    from memcommit.testing.contract.suite import *  # noqa: F403

    @pytest.fixture
    def memcommit_backend() -> Backend:
        return Backend("mine", make_my_harness)

Every test uses fresh ids, so backends may share a database between tests.

This package imports no pytest until its test modules are collected; :mod:`.suite` gathers the
test classes and fixtures.
"""

from __future__ import annotations

from . import harness
from .harness import *  # noqa: F403  (the names harness.__all__ lists)

__all__: list[str] = []
__all__ += harness.__all__
