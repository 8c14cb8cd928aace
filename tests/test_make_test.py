"""The README's second command runs what the README says it runs (the Makefile's targets)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _recipe(makefile: str, target: str) -> tuple[list[str], str]:
    """A target's prerequisites and its recipe's text."""
    match = re.search(rf"^{re.escape(target)}:([^#\n]*).*?\n((?:\t.*\n)*)", makefile, re.M)
    assert match, f"the Makefile has no target {target!r}"
    return match.group(1).split(), match.group(2)


def test_make_test_runs_every_check_the_readme_names() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "The second runs every check CI runs" in readme
    needs, _ = _recipe(makefile, "test")
    assert {"lint", "test-rust", "test-python", "bench-smoke", "wheel-test"} <= set(needs)
    _, lint = _recipe(makefile, "lint")
    for tool in ("$(CARGO) fmt", "$(CARGO) clippy", "ruff check", "ruff format", "mypy.stubtest"):
        assert tool in lint, tool
    assert "-m mypy\n" in lint
    assert "check_jsonschema --builtin-schema vendor.github-workflows" in lint
    _, smoke = _recipe(makefile, "bench-smoke")
    assert "benches/suite" in smoke and "--bench-size tiny" in smoke
    assert "pytest" in _recipe(makefile, "test-python")[1]
    assert "$(CARGO) test" in _recipe(makefile, "test-rust")[1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.rstrip().endswith("make test")
