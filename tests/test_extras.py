"""The extras: what `pip install memcommit` pulls, and the error naming a missing extra."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import memcommit
from memcommit._extras import EXTRAS, MissingExtra, require

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pyproject() -> dict[str, object]:
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return dict(tomllib.load(f)["project"])


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return match.group(0).lower()


def test_a_missing_module_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes `import uvicorn` fail as if it were not installed.
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    with pytest.raises(MissingExtra) as info:
        require("server")
    e = info.value
    assert isinstance(e, ImportError) and isinstance(e, memcommit.NotSupported)
    assert e.extra == "server"
    assert e.missing == ("uvicorn",)
    assert e.name == "uvicorn"
    assert "pip install 'memcommit[server]'" in str(e)
    assert "uvicorn" in str(e)


def test_every_missing_module_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "starlette", None)
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    with pytest.raises(MissingExtra, match=r"starlette, uvicorn") as info:
        require("server")
    assert info.value.missing == ("starlette", "uvicorn")


def test_the_modules_given_are_checked_instead_of_the_extras_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "memcommit_no_such_module", None)
    with pytest.raises(MissingExtra, match=r"pip install 'memcommit\[langgraph\]'") as info:
        require("langgraph", "json", "memcommit_no_such_module")
    assert info.value.missing == ("memcommit_no_such_module",)
    require("bench", "json")  # present: no error, and lmdb (bench's own module) not checked


def test_installed_modules_pass() -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    require("server")


def test_an_unknown_extra_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"extra: 'servre' is not one of memcommit's extras"):
        require("servre")


def test_the_embedded_store_depends_on_nothing_and_each_extra_is_declared() -> None:
    project = _pyproject()
    assert project["dependencies"] == []
    optional = project["optional-dependencies"]
    assert isinstance(optional, dict)
    for extra in EXTRAS:
        assert extra in optional, f"pyproject.toml declares no {extra!r} extra"
    server = {_name(r) for r in optional["server"]}
    assert {"starlette", "uvicorn", "httptools", "uvloop"} <= server
    # dev installs everything the test suite needs: the server's and LangGraph's packages.
    dev = {_name(r) for r in optional["dev"]}
    needed = server | {_name(r) for r in optional["langgraph"]} | {"pytest", "hypothesis"}
    assert needed <= dev, f"dev lacks {sorted(needed - dev)}"


def test_importing_memcommit_needs_no_extra() -> None:
    code = (
        "import sys\n"
        "for m in ('starlette', 'uvicorn', 'httptools', 'uvloop', 'langgraph', 'lmdb'):\n"
        "    sys.modules[m] = None\n"
        "import memcommit, memcommit.cli, memcommit.testing\n"
        "s = memcommit.open(':memory:'); s.put('x', kind='fact'); assert len(s) == 1\n"
        "print('ok')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_serve_without_the_server_extra_names_it_and_writes_nothing(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "served.db")
    code = (
        "import sys\n"
        "for m in ('starlette', 'uvicorn', 'httptools', 'uvloop'):\n"
        "    sys.modules[m] = None\n"
        "from memcommit.cli import main\n"
        f"sys.exit(main(['serve', {path!r}, '--port', '0']))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0
    assert "pip install 'memcommit[server]'" in out.stderr, out.stderr
    assert not os.path.exists(path)


def test_the_langgraph_integration_without_its_extra_names_it() -> None:
    code = "import sys\nsys.modules['langgraph'] = None\nimport memcommit.integrations.langgraph\n"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0
    assert "MissingExtra" in out.stderr, out.stderr
    assert "pip install 'memcommit[langgraph]'" in out.stderr, out.stderr
