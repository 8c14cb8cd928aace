"""Fixtures the test modules share."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from memcommit.testing import CLOCK_START, ControllableClock
from memcommit.testing.postgres import PostgresCluster


@pytest.fixture
def clock() -> ControllableClock:
    """A clock standing at CLOCK_START until the test moves it: pass it to the store."""
    return ControllableClock(CLOCK_START)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """A throwaway PostgreSQL server for the whole run (MEMCOMMIT_PG_DSN: use that one)."""
    with PostgresCluster() as cluster:
        yield cluster


@pytest.fixture
def pg_url(postgres: PostgresCluster) -> str:
    """The URL of a new, empty store on the session's PostgreSQL server."""
    return f"{postgres.dsn}?store=test-{uuid.uuid4().hex[:12]}"
