"""Every contract test class and the fixtures they need, for ``from ... import *``.

Importing this module into a test module makes that module run the whole suite against its
``memcommit_backend`` fixture (define your own after the import to test your store).
"""

from __future__ import annotations

from .plugin import harness, memcommit_backend
from .test_artifacts import TestArtifacts
from .test_checkpoints import TestCheckpoints
from .test_conversations import TestConversations
from .test_cross_cutting import TestCrossCutting
from .test_effects import TestEffects
from .test_idempotency import TestIdempotency
from .test_locks import TestLocks
from .test_revisions import TestRevisions
from .test_runs import TestRuns
from .test_state import TestState
from .test_steps import TestSteps

CONTRACT_CLASSES: tuple[type, ...] = (
    TestRuns,
    TestSteps,
    TestCheckpoints,
    TestIdempotency,
    TestLocks,
    TestEffects,
    TestState,
    TestArtifacts,
    TestRevisions,
    TestConversations,
    TestCrossCutting,
)
"""Every class of contract tests."""

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
