"""Every class of contract tests, in one tuple (the suite and the plugin both read it)."""

from __future__ import annotations

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
    "CONTRACT_CLASSES",
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
]
