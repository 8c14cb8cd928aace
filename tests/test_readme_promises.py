"""Promises of README.md that no other test checked, one test each.

Each test quotes the README's words it checks. Sections: "Use" (to "Durability"), "Memory
tiers", "Seals", "Log compaction, retention and snapshots", "Agent-runtime roles", "Install:
wheels, extras and platforms" and "Layout" (and the first paragraph's demo figures).
"""

from __future__ import annotations

import contextlib
import fcntl
import inspect
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import logbytes
import memcommit
from memcommit.cli import build_parser, main
from memcommit.roles.roleset import ROLE_NAMES

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
FENCE = re.compile(r"^```(\S*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
SERVER_MODULES = ("starlette", "uvicorn", "httptools", "uvloop")


def _text(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


def _header_version(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[8:12], "little")


def _set_header_version(path: Path, version: int) -> None:
    """Rewrite the log header's format version (bytes 8..12), with its CRC32C (60..64)."""
    header = bytearray(path.read_bytes())
    header[8:12] = version.to_bytes(4, "little")
    header[60:64] = logbytes.crc32c(header[:60]).to_bytes(4, "little")
    path.write_bytes(bytes(header))


# -- Intro ---------------------------------------------------------------------------------


def test_the_demo_defaults_to_100_agents_1000_tasks_100000_memories_in_memory_db() -> None:
    # "a fleet of 100 agents working through 1,000 tasks writes 100,000 memories ... into
    # `./memory.db`"
    args = build_parser().parse_args(["demo"])
    assert (args.agents, args.tasks, args.memories, args.path) == (100, 1000, 100_000, "memory.db")


# -- Use ------------------------------------------------------------------------------------


def test_open_has_the_defaults_the_readme_names(tmp_path: Path) -> None:
    # "memcommit.open(path, *, snapshot=None, clock=None, durability="commit",
    # read_only=False, flush_interval_ms=50, max_record_bytes=16 MiB)"
    parameters = inspect.signature(memcommit.open).parameters
    defaults = {
        name: parameters[name].default
        for name in (
            "snapshot",
            "clock",
            "durability",
            "read_only",
            "flush_interval_ms",
            "max_record_bytes",
        )
    }
    assert defaults == {
        "snapshot": None,
        "clock": None,
        "durability": "commit",
        "read_only": False,
        "flush_interval_ms": 50,
        "max_record_bytes": 16 * 1024 * 1024,
    }
    for name in defaults:
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY, name
    with memcommit.open(tmp_path / "memory.db") as store:
        assert store.info()["durability"] == "commit" and not store.read_only


def test_the_writer_holds_an_os_lock_on_memory_db_lock_and_on_the_log_itself(
    tmp_path: Path,
) -> None:
    # "enforced by an OS lock on `memory.db.lock` and on the log file itself"; Install: "The
    # writer's lock is `flock` on both."
    path = tmp_path / "memory.db"

    def flock_free(name: Path) -> bool:
        fd = os.open(name, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)  # closing the descriptor lets go of a lock it took
        return True

    writer = memcommit.open(path)
    try:
        writer.put("x")
        for name in (Path(f"{path}.lock"), path):
            assert not flock_free(name), f"no flock held on {name.name}"
        with memcommit.open(path, read_only=True) as reader:  # readers coexist with it
            assert len(reader) == 1
    finally:
        writer.close()
    for name in (Path(f"{path}.lock"), path):
        assert flock_free(name), f"{name.name} still locked after close"


@pytest.fixture(scope="module")
def remote() -> Iterator[Any]:
    from memcommit.testing import ServerProcess

    with (
        tempfile.TemporaryDirectory() as where,
        ServerProcess(Path(where) / "served.db") as server,
        memcommit.RemoteStore(server.url) as store,
    ):
        yield store


TOO_BIG = "x" * (16 * 1024 * 1024 + 1)


def test_a_remote_put_rows_leaves_the_record_size_to_the_server_which_names_the_field(
    remote: Any,
) -> None:
    # "a `RemoteStore`'s commit leaves those two [key lengths, record size] to the server,
    # when it commits, and the server's error names the field, not the row"
    lsn = remote.lsn
    called = False
    with pytest.raises(memcommit.InvalidValue) as refused:
        with remote.commit() as c:
            c.put_rows([("ok", "fine"), ("big", TOO_BIG)], fields=("id", "text"))
            called = True
    assert called, "refused by the call, not by the server when it commits"
    message = str(refused.value)
    assert message.startswith("text: ") and "max_record_bytes" in message, message
    assert "rows[" not in message
    assert remote.lsn == lsn and "ok" not in remote


def test_a_remote_put_many_record_too_large_is_named_by_its_record(remote: Any) -> None:
    # "a `RemoteStore`'s commit leaves those two to the server, when it commits; the server's
    # error names the field, and for `put_many` the record"
    lsn = remote.lsn
    called = False
    with pytest.raises(memcommit.InvalidValue) as refused:
        with remote.commit() as c:
            c.put_many(["fine", TOO_BIG])
            called = True
    assert called and remote.lsn == lsn
    message = str(refused.value)
    assert message.startswith("record 1 of put_many: text: "), message


# -- Memory tiers -----------------------------------------------------------------------------


def test_the_tiers_example_prints_the_summary_then_its_traces_archived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "for m in store.context(task="ci-318", budget_chars=4000):  # working, then mid, then
    # long" ... "print([m.tier for m in store.lineage(summary)])  # the traces, archived,
    # never deleted"
    (code,) = [
        block
        for language, block in (m.groups() for m in FENCE.finditer(README))
        if language == "python" and "compact_memory(" in block
    ]
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md, the tiers block", "exec"), namespace)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("fold: 1 created, 4 moved")
    context = lines[1:-1]
    assert context and all(line.split()[0] in ("working", "mid", "long") for line in context)
    order = {"working": 0, "mid": 1, "long": 2}
    tiers = [order[line.split()[0]] for line in context]
    assert tiers == sorted(tiers)
    assert context[0].startswith("mid summary ")  # the one summary the fold made
    assert lines[-1] == str(["archive"] * 4)
    with memcommit.open(tmp_path / "tiers.db") as store:  # never deleted: all four still read
        traces = store.find(kind="trace", tier="archive", task="ci-318")
        assert len(traces) == 4 and all(m.text for m in traces)


# -- Seals ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_a_log_of_format_1_or_2_opens_appends_seals_and_verifies(
    tmp_path: Path, version: int
) -> None:
    # "A log written by an earlier release (format 1 or 2, one link per record) opens,
    # appends, seals and verifies as it did"
    path = tmp_path / "old.db"
    memcommit.open(path).close()
    _set_header_version(path, version)
    with memcommit.open(path) as store:
        store.put("a", id="a")
        with store.commit() as c:
            c.put("b", id="b", sources=("a",))
            c.put("c", id="c")
        anchor = memcommit.seal(store).to_json()
        store.put("d", id="d")
        memcommit.seal(store)
    assert _header_version(path) == version  # appending kept the log's version
    with memcommit.open(path) as store:
        report = memcommit.verify(store, anchors=[anchor])
        assert (report.ok, report.seals_checked, report.anchors_checked) == (True, 2, 1)
        assert memcommit.check_seal(store).ok
        assert [m.id for m in store.find()] == ["a", "b", "c", "d"]


def test_memcommit_compact_rewrites_a_format_2_log_in_todays_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "`memcommit compact` rewrites it in today's format, 4."
    path = tmp_path / "old.db"
    memcommit.open(path).close()
    _set_header_version(path, 2)
    with memcommit.open(path) as store:
        store.put("a", id="a")
        memcommit.seal(store)
    assert main(["compact", str(path)]) == 0
    capsys.readouterr()
    with memcommit.open(path) as store:
        assert memcommit.verify(store).ok and store.get("a") is not None
    assert _header_version(path) == 4


# -- Agent-runtime roles ------------------------------------------------------------------------


def test_each_roles_methods_are_in_its_docstrings(tmp_path: Path) -> None:
    # "each role's methods are in its docstrings, `help(store.runs)`"
    with memcommit.open(tmp_path / "memory.db") as store:
        for name in ROLE_NAMES:
            role = getattr(store, name)
            assert (type(role).__doc__ or "").strip(), f"store.{name} has no class docstring"
            public = [m for m in dir(role) if not m.startswith("_") and callable(getattr(role, m))]
            assert public, name
            undocumented = [m for m in public if not (getattr(role, m).__doc__ or "").strip()]
            assert undocumented == [], f"store.{name}: {undocumented}"
            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                help(role)
            for method in public:
                assert method in text.getvalue(), (name, method)


# -- Install: wheels, extras and platforms -------------------------------------------------------


def test_wheels_are_one_per_cpython_3_10_to_3_14_on_the_named_platforms() -> None:
    # "installs a wheel ... for CPython 3.10 to 3.14 on Linux x86_64 and aarch64
    # (manylinux2014 ...; and musllinux_1_2: Alpine) and macOS x86_64 and arm64. There is one
    # wheel per CPython version, not one abi3 wheel"
    workflow = _text(".github/workflows/wheels.yml")
    interpreters = "-i python3.10 python3.11 python3.12 python3.13 python3.14"
    linux = re.search(r"^  linux:\n(.*?)^  macos:\n(.*?)^  sdist:", workflow, re.M | re.S)
    assert linux is not None
    linux_job, macos_job = linux.group(1), linux.group(2)
    for libc in ("manylinux2014", "musllinux_1_2"):
        for target in ("x86_64", "aarch64"):
            assert re.search(
                rf"\{{ target: {target}, runner: [^,]+, libc: {libc} \}}", linux_job
            ), (libc, target)
    assert "manylinux: ${{ matrix.libc }}" in linux_job and interpreters in linux_job
    for target in ("x86_64", "aarch64"):  # aarch64 is macOS's arm64
        assert f"- {{ target: {target}, runner: macos-" in macos_job, target
    assert interpreters in macos_job
    pyo3 = re.search(r"^pyo3 = (.*)$", _text("rust/memcommit-py/Cargo.toml"), re.M)
    assert pyo3 is not None and "abi3" not in pyo3.group(1), "the binding is built for abi3"
    assert "abi3" not in workflow.replace("(abi3)", "")
    pyproject = _text("pyproject.toml")
    assert 'requires-python = ">=3.10"' in pyproject


def test_the_sdist_build_needs_rust_1_89() -> None:
    # "Elsewhere pip builds the sdist, which needs Rust 1.89 or later"
    assert re.search(r'^rust-version = "1\.89"$', _text("Cargo.toml"), re.M)
    for crate in ("memcommit-core", "memcommit-wire", "memcommit-py"):
        assert "rust-version.workspace = true" in _text(f"rust/{crate}/Cargo.toml"), crate


def test_the_engine_refuses_to_compile_off_unix() -> None:
    # "Windows is not supported yet: the engine maps files and uses Unix I/O calls, and its
    # core does not compile there"
    sources = (ROOT / "rust/memcommit-core/src").rglob("*.rs")
    guarded = [
        p
        for p in sources
        if re.search(r"#\[cfg\(not\(unix\)\)\]\s*compile_error!", p.read_text(encoding="utf-8"))
    ]
    assert guarded, "no compile_error! under #[cfg(not(unix))] in memcommit-core"


def test_make_wheel_builds_a_manylinux2014_wheel_with_zig_into_dist() -> None:
    # "`make wheel` builds a manylinux2014 wheel on a Linux machine (maturin with zig from
    # PyPI's `ziglang`; `auditwheel show` must report `manylinux_2_17`) into `dist/`"
    makefile = _text("Makefile")
    recipe = re.search(r"^wheel:[^\n]*\n((?:\t[^\n]*\n|\t?#[^\n]*\n)+)", makefile, re.M)
    assert recipe is not None
    steps = recipe.group(1)
    assert re.search(r"^WHEEL_DIR \?= dist$", makefile, re.M)
    assert "ziglang" in steps and "auditwheel" in steps
    build = next(line for line in steps.splitlines() if "maturin build" in line)
    assert "--zig" in build and "--compatibility manylinux2014" in build
    assert "--out $(WHEEL_DIR)" in build
    assert "auditwheel show" in steps and "grep -q '\"manylinux_2_17_'" in steps


def test_the_extras_hold_the_packages_the_readme_names() -> None:
    # "`memcommit[postgres]` for stores in PostgreSQL (psycopg 3), `memcommit[langgraph]`,
    # `memcommit[bench]` (LMDB, for `benches/`)"
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    extras = tomllib.loads(_text("pyproject.toml"))["project"]["optional-dependencies"]

    def names(extra: str) -> set[str]:
        return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower() for r in extras[extra]}

    assert "psycopg" in names("postgres")
    assert any(r.startswith("psycopg[binary]>=3") for r in extras["postgres"])
    assert "lmdb" in names("bench")
    assert "langgraph-checkpoint" in names("langgraph")


def test_memory_server_without_the_server_extra_raises_missing_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "in Python `MemoryServer` raises `MissingExtra` (an `ImportError`) saying the same"
    from memcommit._extras import MissingExtra

    for module in SERVER_MODULES:
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtra) as refused:
        memcommit.MemoryServer(tmp_path / "served.db", port=0)
    assert isinstance(refused.value, ImportError)
    assert "pip install 'memcommit[server]'" in str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_serve_without_the_server_extra_exits_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # "Without the server extra, `memcommit serve` exits with a one-line error naming the
    # extra to install (`pip install 'memcommit[server]'`)"
    for module in SERVER_MODULES:
        monkeypatch.setitem(sys.modules, module, None)
    assert main(["serve", str(tmp_path / "served.db"), "--port", "0"]) != 0
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "pip install 'memcommit[server]'" in lines[0]


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux row of the table")
def test_on_linux_a_commit_is_an_fdatasync_and_a_new_file_an_fsync_with_its_directory(
    tmp_path: Path,
) -> None:
    # "| Linux | `fdatasync` (`fsync` for a new file and its directory)" and
    # "`durability="commit"` at each commit"
    path = tmp_path / "memory.db"
    trace = tmp_path / "strace.txt"
    code = textwrap.dedent(
        """
        import sys, memcommit
        store = memcommit.open(sys.argv[1])
        for i in range(3):
            store.put(f"m{i}")
        store.close()
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    strace = ["strace", "-f", "-y", "-e", "trace=fsync,fdatasync", "-o", str(trace)]
    proc = subprocess.run(
        [*strace, sys.executable, "-c", code, str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0 and "PTRACE" in proc.stderr.upper():
        pytest.skip(f"strace cannot trace here: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 0, proc.stderr
    calls = re.findall(r"\b(fsync|fdatasync)\(\d+<([^>]*)>\)\s*=\s*0", trace.read_text())
    assert calls, trace.read_text()[-2000:]
    log_syncs = [call for call, name in calls if name == str(path)]
    assert log_syncs.count("fdatasync") >= 3, calls  # one per commit
    new_files = [name for call, name in calls if call == "fsync" and name.startswith(f"{path}.")]
    assert new_files, f"no fsync of the new file: {calls}"
    assert ("fsync", str(tmp_path)) in calls, f"no fsync of the directory: {calls}"


# -- Layout ---------------------------------------------------------------------------------------


def test_the_engine_and_the_wire_crates_have_no_python_and_the_binding_builds_native() -> None:
    # "`rust/memcommit-core` | the engine, in Rust with no Python"; "`rust/memcommit-wire` |
    # ... in Rust with no Python"; "`rust/memcommit-py` | the thin PyO3 binding that builds
    # `memcommit._native`"
    for crate in ("memcommit-core", "memcommit-wire"):
        manifest = _text(f"rust/{crate}/Cargo.toml")
        assert not re.search(r"^\s*pyo3", manifest, re.M), crate
    binding = _text("rust/memcommit-py/Cargo.toml")
    assert re.search(r"^pyo3 = ", binding, re.M) and 'name = "_native"' in binding
    assert 'module-name = "memcommit._native"' in _text("pyproject.toml")
    assert 'manifest-path = "rust/memcommit-py/Cargo.toml"' in _text("pyproject.toml")


def test_make_help_lists_lint_fmt_bench_and_bench_quick() -> None:
    # "`make help` lists the rest: `make lint`, `make fmt`, `make bench`, `make bench-quick`."
    makefile = _text("Makefile")
    help_recipe = re.search(r"^help:[^\n]*\n((?:\t[^\n]*\n)+)", makefile, re.M)
    assert help_recipe is not None and "##" in help_recipe.group(1)  # it prints the ## notes
    for target in ("lint", "fmt", "bench", "bench-quick"):
        assert re.search(rf"^{re.escape(target)}:[^#\n]*## \S", makefile, re.M), target
