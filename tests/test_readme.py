"""README.md's code blocks, run as a reader runs them.

Every ```python block runs, in README order, in one namespace (a later block goes on with the
names an earlier one made, as in one Python session) and in one fresh directory. The block
that talks to ``memcommit serve`` gets a real server on the file the README serves; only its
URL is rewritten, to the free port the server took; likewise a ``postgresql://`` URL is
rewritten to the session's throwaway PostgreSQL server, keeping its ``store=``. The ```sh
blocks are the set-up commands:
they are checked, not run (one installs the package, the other runs the whole CI).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

import memcommit
from memcommit.cli import build_parser
from memcommit.testing import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")

FENCE = re.compile(r"^```(\S*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
LOCAL_URL = re.compile(r"http://127\.0\.0\.1:\d+")
POSTGRES_URL = re.compile(r"postgresql://[^?\"\s]+")


def blocks(language: str) -> list[tuple[int, str]]:
    """The README's `language` blocks, in order, each with the line its fence opens on."""
    return [
        (README.count("\n", 0, match.start()) + 1, match.group(2))
        for match in FENCE.finditer(README)
        if match.group(1) == language
    ]


def test_every_code_block_is_python_or_sh() -> None:
    # A block in another language (or none) would escape both tests below.
    languages = [match.group(1) for match in FENCE.finditer(README)]
    assert languages and set(languages) <= {"python", "sh"}, languages
    assert README.count("```") == 2 * len(languages)  # every fence is closed


def test_sh_blocks_are_the_two_set_up_commands() -> None:
    assert [code.strip() for _, code in blocks("sh")] == [
        "pip install . && memcommit demo",
        "make test",
    ]
    # `pip install .` installs a `memcommit` command that has a `demo` subcommand...
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    scripts = re.search(r"^\[project\.scripts\]\n(.*?)(?:^\[|\Z)", pyproject, re.M | re.S)
    assert scripts is not None
    assert 'memcommit = "memcommit.cli:main"' in scripts.group(1).splitlines()
    assert build_parser().parse_args(["demo"]).command == "demo"
    # ... and the Makefile has the `test` target.
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^test:", makefile, re.MULTILINE)


def _close_all(namespace: dict[str, Any]) -> None:
    for value in namespace.values():
        if isinstance(value, memcommit.AsyncMemoryStore):
            asyncio.run(value.close())
    for value in namespace.values():
        if isinstance(value, memcommit.MemoryStore) and not value.closed:
            value.close()


def test_python_blocks_run_in_order_in_one_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    python = blocks("python")
    assert python
    served = re.search(r"`memcommit serve (\S+)`", README)
    assert served is not None, "the README no longer says which file `memcommit serve` serves"
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(_close_all, namespace)
        for line, code in python:
            urls = set(LOCAL_URL.findall(code))
            if urls:
                server = cleanup.enter_context(ServerProcess(tmp_path / served.group(1)))
                for url in urls:
                    code = code.replace(url, server.url)
                cleanup.callback(_close_all, namespace)  # clients first, then the server
            for url in set(POSTGRES_URL.findall(code)):
                code = code.replace(url, request.getfixturevalue("postgres").dsn)
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    exec(compile(code, f"README.md, the block at line {line}", "exec"), namespace)
            except Exception as e:
                raise AssertionError(
                    f"README.md's python block at line {line} failed after the blocks before "
                    f"it: {e!r}\n--- its output ---\n{out.getvalue()}"
                ) from e
            # Where a block shows what a print prints, the print prints that.
            for shown in re.findall(r"^\s*print\(report\)\s+#\s*(.+)$", code, re.MULTILINE):
                assert shown.strip() in out.getvalue().splitlines(), (line, out.getvalue())


def test_layout_table_names_every_crate_and_only_paths_that_exist() -> None:
    section = README.split("## Layout", 1)[1].split("\n## ", 1)[0]
    listed = {
        path.rstrip("/")
        for row in section.splitlines()
        if row.startswith("| `")
        for path in re.findall(r"`([^`]+)`", row.split("|")[1])
    }
    assert listed, "the README's Layout table lists no paths"
    for path in listed:
        assert (ROOT / path).exists(), f"README.md's Layout names {path}, which is not there"
    workspace = (ROOT / "Cargo.toml").read_text(encoding="utf-8")
    members = re.search(r"members\s*=\s*\[([^\]]*)\]", workspace)
    assert members is not None
    crates = set(re.findall(r'"([^"]+)"', members.group(1)))
    assert crates and crates <= listed, f"crates missing from README.md's Layout: {crates - listed}"
