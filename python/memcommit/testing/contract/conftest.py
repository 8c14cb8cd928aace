"""Wires the contract suite's fixtures in for ``pytest --pyargs memcommit.testing``."""

from __future__ import annotations

import pytest

from .plugin import configured_backends, harness, memcommit_backend

__all__ = ["harness", "memcommit_backend", "pytest_generate_tests"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every contract test once per configured backend, with the backend's name as id."""
    if "memcommit_backend" in metafunc.fixturenames:
        backends = configured_backends(metafunc.config)
        metafunc.parametrize(
            "memcommit_backend", backends, ids=[b.name for b in backends], indirect=True
        )
