"""A built wheel works on its own: installed in a fresh virtualenv, with no Rust toolchain.

Skipped unless ``MEMCOMMIT_WHEEL`` names a wheel file; ``make wheel-test`` builds one
(``make wheel``) and runs this file against it. Everything runs from a directory outside the
source tree, without PYTHONPATH, on a PATH stripped of cargo and rustc, so only the wheel's
files can answer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

WHEEL = os.environ.get("MEMCOMMIT_WHEEL", "")

pytestmark = [
    pytest.mark.wheel,
    pytest.mark.skipif(not WHEEL, reason="MEMCOMMIT_WHEEL names no wheel (make wheel-test)"),
]


@dataclass(frozen=True)
class Env:
    """The virtualenv the wheel went into, and how to run things in it."""

    root: Path
    python: Path
    bin: Path
    work: Path
    env: dict[str, str]

    def run(self, *args: str | os.PathLike[str], timeout: float = 300) -> str:
        out = subprocess.run(
            [str(a) for a in args],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert out.returncode == 0, f"{args} exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
        return out.stdout


def _path_without_rust() -> str:
    keep = []
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if d and not any(os.path.exists(os.path.join(d, tool)) for tool in ("cargo", "rustc")):
            keep.append(d)
    return os.pathsep.join(keep)


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    wheel = Path(WHEEL).resolve()
    assert wheel.is_file() and wheel.suffix == ".whl", f"MEMCOMMIT_WHEEL={WHEEL}: not a wheel"
    root = tmp_path_factory.mktemp("wheel-venv")
    venv.create(root / "venv", with_pip=True, clear=True)
    bindir = root / "venv" / ("Scripts" if sys.platform == "win32" else "bin")
    work = root / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join([str(bindir), _path_without_rust()])
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    e = Env(root / "venv", bindir / "python", bindir, work, env)
    # The wheel alone, from no index: it must need nothing else to install.
    e.run(e.python, "-m", "pip", "install", "-q", "--no-index", wheel)
    # The contract suite's runner (not a dependency of memcommit's).
    e.run(e.python, "-m", "pip", "install", "-q", "pytest>=8")
    yield e
    shutil.rmtree(root, ignore_errors=True)


def test_no_rust_toolchain_is_on_the_path(wheel_env: Env) -> None:
    for tool in ("cargo", "rustc"):
        assert shutil.which(tool, path=wheel_env.env["PATH"]) is None


def test_the_wheel_is_what_imports(wheel_env: Env) -> None:
    out = wheel_env.run(
        wheel_env.python,
        "-c",
        "import memcommit, memcommit._native as n; print(memcommit.__file__); print(n.__file__)",
    )
    package, native = out.split()
    assert Path(package).is_relative_to(wheel_env.root), package
    assert Path(native).is_relative_to(wheel_env.root), native
    if "-abi3-" in Path(WHEEL).name:
        assert native.endswith(".abi3.so"), native


def test_installing_it_pulls_no_dependency(wheel_env: Env) -> None:
    out = wheel_env.run(
        wheel_env.python,
        "-c",
        "import importlib.metadata as m; print('\\n'.join(m.requires('memcommit') or []))",
    )
    unconditional = [r for r in out.splitlines() if r and "extra ==" not in r]
    assert unconditional == [], f"pip install memcommit would pull {unconditional}"


def test_the_demo_runs(wheel_env: Env) -> None:
    # The README's first command's job, at its default size (a few seconds).
    out = wheel_env.run(wheel_env.bin / "memcommit", "demo", "--path", wheel_env.work / "demo.db")
    assert "100,000 memories (matches)" in out, out
    info = wheel_env.run(wheel_env.bin / "memcommit", "info", wheel_env.work / "demo.db")
    assert "demo.db" in info, info


def test_the_contract_suite_passes(wheel_env: Env) -> None:
    out = wheel_env.run(
        wheel_env.python,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--pyargs",
        "memcommit.testing",
    )
    assert " passed" in out and " failed" not in out, out
