"""The contract suite's fixtures: ``memcommit_backend`` and ``harness``.

``memcommit_backend`` gives the backend to test. The default, in order: the backends handed
to :func:`memcommit.testing.run_contract`; the ``MEMCOMMIT_CONTRACT_BACKEND`` environment
variable (``"package.module:attribute"``, naming a Backend, a harness factory, a list of them, or a
function of no arguments returning one of those); the
in-memory backend. Override the fixture to test your own store inside your own test run.

``harness`` opens a fresh harness of that backend for each test, and turns the backend's
known divergences into strict xfails.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pathlib
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from .harness import Backend, Harness, as_backend, memory_backend

__all__ = ["BACKEND_ENV", "BackendPlugin", "configured_backends", "harness", "memcommit_backend"]

BACKEND_ENV = "MEMCOMMIT_CONTRACT_BACKEND"


class BackendPlugin:
    """A pytest plugin object carrying the backends :func:`run_contract` was given."""

    def __init__(self, backends: Sequence[Backend]) -> None:
        self.memcommit_backends = list(backends)


def _takes_no_arguments(function: Any) -> bool:
    try:
        return not inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


def _load(spec: str) -> list[Backend]:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise pytest.UsageError(f"{BACKEND_ENV}={spec!r}: write it as 'package.module:attribute'")
    target: Any = getattr(importlib.import_module(module_name), attribute)
    if callable(target) and not isinstance(target, Backend) and _takes_no_arguments(target):
        target = target()  # a function returning the backend(s), like memory_backend
    items = target if isinstance(target, (list, tuple)) else [target]
    return [as_backend(item) for item in items]


def configured_backends(config: pytest.Config) -> list[Backend]:
    """Return the backends this run tests (see the module docstring)."""
    for plugin in config.pluginmanager.get_plugins():
        backends = getattr(plugin, "memcommit_backends", None)
        if isinstance(backends, list) and backends:
            return backends
    spec = os.environ.get(BACKEND_ENV)
    if spec:
        return _load(spec)
    return [memory_backend()]


@pytest.fixture
def memcommit_backend(request: pytest.FixtureRequest) -> Backend:
    """The backend under test (parametrized over every configured one by the conftest)."""
    param = getattr(request, "param", None)
    if isinstance(param, Backend):
        return param
    return configured_backends(request.config)[0]


def _contract_test_names() -> set[str]:
    from .classes import CONTRACT_CLASSES

    names = set()
    for cls in CONTRACT_CLASSES:
        for name in dir(cls):
            if name.startswith("test_"):
                names.add(name)
                names.add(f"{cls.__name__}.{name}")
    return names


@pytest.fixture
def harness(
    memcommit_backend: Backend | Any, request: pytest.FixtureRequest, tmp_path: pathlib.Path
) -> Iterator[Harness]:
    """A fresh harness of the backend under test, for one test."""
    backend = as_backend(memcommit_backend)
    unknown = set(backend.divergences) - _contract_test_names()
    if unknown:
        raise pytest.UsageError(
            f"backend {backend.name!r} lists divergences for tests that do not exist: "
            f"{sorted(unknown)}"
        )
    name = request.node.originalname
    qualified = f"{request.cls.__name__}.{name}" if request.cls is not None else name
    reason = backend.divergences.get(qualified) or backend.divergences.get(name)
    if reason:
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=reason))
    with backend.open(tmp_path) as opened:
        yield opened
