"""Fixtures the test modules share."""

from __future__ import annotations

import pytest

from memcommit.testing import CLOCK_START, ControllableClock


@pytest.fixture
def clock() -> ControllableClock:
    """A clock standing at CLOCK_START until the test moves it: pass it to the store."""
    return ControllableClock(CLOCK_START)
