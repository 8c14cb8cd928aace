"""Every contract test class and the fixtures they need, for ``from ... import *``.

Importing this module into a test module makes that module run the whole suite against its
``memcommit_backend`` fixture (define your own after the import to test your store).
"""

from __future__ import annotations

from .classes import (
    TestArtifacts,
    TestCheckpoints,
    TestConversations,
    TestCrossCutting,
    TestEffects,
    TestIdempotency,
    TestLocks,
    TestRevisions,
    TestRuns,
    TestState,
    TestSteps,
)
from .plugin import harness, memcommit_backend

__all__ = [
    "TestArtifacts",
    "TestCheckpoints",
    "TestConversations",
    "TestCrossCutting",
    "TestEffects",
    "TestIdempotency",
    "TestLocks",
    "TestRevisions",
    "TestRuns",
    "TestState",
    "TestSteps",
    "harness",
    "memcommit_backend",
]
