"""The benchmark suite as the README's "Benchmarks" paragraph describes it, and its tables.

The suite itself runs in ``make bench-smoke``, not here: these check what the README says of
it (its targets, sizes, peers, cache and baselines), that its generated log has the histories
it claims, and that ``benches/tables.py`` writes only between its markers.
"""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import memcommit

ROOT = Path(__file__).resolve().parent.parent
BENCHES = ROOT / "benches"
MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.fixture
def suite(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The suite's modules, imported as pytest imports them (``benches`` on the path)."""
    monkeypatch.syspath_prepend(str(BENCHES))
    import suite.loggen
    import suite.peers
    import suite.sizes

    return suite


def _recipe(target: str) -> list[str]:
    match = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)+)", MAKEFILE, re.M)
    assert match is not None, f"the Makefile has no {target} target"
    return [line.strip() for line in match.group(1).splitlines()]


def test_readme_has_the_benchmarks_paragraph() -> None:
    assert "Benchmarks: `make bench` runs the pytest-benchmark suite in `benches/suite`" in README
    assert (
        "`memcommit bench compact PATH\n[--archived-older-than AGE] [--kinds-after KIND=AGE]`"
        in (README)
    )


def test_make_bench_runs_the_suite_into_json_and_writes_the_tables() -> None:
    steps = _recipe("bench")
    run = next(s for s in steps if "pytest benches/suite" in s)
    assert "--bench-size $(BENCH_SIZE)" in run and "--benchmark-json $(BENCH_JSON)" in run
    assert re.search(r"^BENCH_JSON \?= bench-data/", MAKEFILE, re.M)
    assert re.search(r"^BENCH_SIZE \?= 1m$", MAKEFILE, re.M)
    tables = next(s for s in steps if "benches/tables.py" in s)
    assert "$(BENCH_JSON) --write BENCHMARKS.md" in tables
    assert "<!-- benches/tables.py: begin" in (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")


def test_make_test_runs_the_suite_once_at_the_tiny_size_untimed() -> None:
    prerequisites = re.search(r"^test:([^#\n]*)", MAKEFILE, re.M)
    assert prerequisites is not None and "bench-smoke" in prerequisites.group(1).split()
    assert _recipe("bench-smoke") == [
        "$(PYTHON) -m pytest -q benches/suite --benchmark-disable --bench-size tiny"
    ]
    # ... and the main test command collects only tests/, never the suite.
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]
    extras = pyproject["project"]["optional-dependencies"]
    assert any(d.startswith("pytest-benchmark") for d in extras["dev"])
    assert any(d.startswith("pytest-benchmark") for d in extras["bench"])


def test_the_sizes_are_the_records_of_the_generated_log(suite: Any) -> None:
    sizes = suite.sizes.SIZES
    assert list(sizes) == ["tiny", "1m", "10m", "50m"]
    assert [s.log_records for s in sizes.values()] == [20_000, 1_000_000, 10_000_000, 50_000_000]
    conftest = (BENCHES / "suite" / "conftest.py").read_text(encoding="utf-8")
    assert '"--bench-size",\n        choices=sorted(SIZES)' in conftest


def test_the_peers_are_the_ones_named(suite: Any) -> None:
    names = list(suite.peers.CONTENDERS)
    assert names[0] == "memcommit"
    assert [n.split()[0] for n in names[1:]] == ["sqlite", "lmdb", "rocksdb"]
    langgraph = (BENCHES / "suite" / "test_langgraph.py").read_text(encoding="utf-8")
    assert "SAVERS, STORES" in langgraph
    script = (BENCHES / "langgraph_bench.py").read_text(encoding="utf-8")
    assert '("InMemorySaver", memory_saver)' in script
    assert '("InMemoryStore", memory_store)' in script


def test_each_log_figure_has_its_cp_sync_baseline() -> None:
    logs = (BENCHES / "suite" / "test_logs.py").read_text(encoding="utf-8")
    groups = set(re.findall(r'@pytest\.mark\.benchmark\(group="([^"]+)"\)', logs))
    assert groups == {
        "compact",
        "compact with retention",
        "reopen after compact",
        "verify",
        "snapshot save",
        "snapshot open",
    }
    baselines = re.search(r"^BASELINES = \{\n(.*?)^\}", logs, re.M | re.S)
    assert baselines is not None
    assert set(re.findall(r'^    "([^"]+)":', baselines.group(1), re.M)) == groups
    assert 'subprocess.run(["cp", source, target]' in (
        ROOT / "python" / "memcommit" / "cli" / "bench.py"
    ).read_text(encoding="utf-8")


def test_the_generated_log_is_built_once_into_the_cache(
    suite: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMCOMMIT_BENCH_CACHE", raising=False)
    assert suite.loggen.cache_dir() == BENCHES / ".cache"
    monkeypatch.setenv("MEMCOMMIT_BENCH_CACHE", str(tmp_path))
    assert suite.loggen.cache_dir() == tmp_path
    made = suite.loggen.generated_log(3_000)
    assert Path(made.path).parent == tmp_path and made.records >= 3_000
    built = Path(made.path).stat().st_mtime_ns
    assert suite.loggen.generated_log(3_000) == made
    assert Path(made.path).stat().st_mtime_ns == built  # not built again
    with memcommit.open(made.path, read_only=True) as store:
        ops = collections.Counter(r.op for r in store.records())
        entities = {r.key.partition("\x00")[0] for r in store.records() if r.op == "entity"}
        history = store.history("mem-0000000000")
    assert {"put", "status", "move", "task", "entity", "seal"} <= set(ops)
    assert {"run", "step", "state"} <= entities
    assert len(history) > 1  # re-puts, stale, restore and moves of one memory


def _run(json_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCHES / "tables.py"), str(json_path), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def _bench(group: str, name: str, median: float, **extra: object) -> dict[str, object]:
    return {
        "group": group,
        "name": name,
        "stats": {"median": median},
        "extra_info": {"size": "tiny", **extra},
    }


def test_tables_write_only_between_the_markers(tmp_path: Path) -> None:
    run = {
        "datetime": "2026-12-01",
        "benchmarks": [
            _bench("compact", "test_cp_sync[compact]", 0.5, bytes_in=10**8),
            _bench("compact", "test_compact", 2.0, bytes_in=10**8, bytes_out=10**7, records=10),
            _bench("get", "test_get[memcommit]", 1.0, records=1000),
            _bench("get", "test_get[lmdb]", 0.25, records=1000),
        ],
    }
    data = tmp_path / "out.json"
    data.write_text(json.dumps(run), encoding="utf-8")
    shown = _run(data)
    assert shown.returncode == 0, shown.stderr
    assert "| compact | 2.00 s | 5.00 | 50 | 5.00 |  | 4.00 |" in shown.stdout
    assert "| lmdb | 250.00 ms | 4,000 |  |  |  | 0.25 |" in shown.stdout
    target = tmp_path / "BENCHMARKS.md"
    target.write_text("# Hand-written\n\nkept\n", encoding="utf-8")
    assert _run(data, "--write", str(target)).returncode == 0
    first = target.read_text(encoding="utf-8")
    assert first.startswith("# Hand-written\n\nkept\n") and shown.stdout in first
    target.write_text(first + "\nafter\n", encoding="utf-8")
    assert _run(data, "--write", str(target)).returncode == 0
    assert target.read_text(encoding="utf-8") == first + "\nafter\n"  # replaced in place


def test_tables_refuse_a_run_without_timings(tmp_path: Path) -> None:
    data = tmp_path / "out.json"
    data.write_text(json.dumps({"benchmarks": []}), encoding="utf-8")
    refused = _run(data)
    assert refused.returncode == 1
    assert f"{data}: holds no timed benchmarks" in refused.stderr


def test_the_plot_draws_one_line_per_log_benchmark_measured_at_two_sizes(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ElementTree

    def run(size: str, records: int, scale: float) -> dict[str, object]:
        log = {"log_records": records}
        return {
            "benchmarks": [
                _bench("compact", "test_cp_sync[compact]", 0.1 * scale, **log),
                _bench("compact", "test_compact", 0.5 * scale, **log),
                _bench("verify", "test_cp_sync[verify]", 0.1 * scale, **log),
                _bench("verify", "test_verify", 0.2 * scale, **log),
                _bench("get", "test_get[memcommit]", 1.0, records=1000),  # not a log benchmark
            ]
        }

    paths = []
    for size, records, scale in (("1m", 10**6, 1.0), ("10m", 10**7, 12.0)):
        paths.append(tmp_path / f"{size}.json")
        paths[-1].write_text(json.dumps(run(size, records, scale)), encoding="utf-8")
    svg = tmp_path / "growth.svg"
    done = subprocess.run(
        [sys.executable, str(BENCHES / "tables.py"), *map(str, paths), "--plot", str(svg)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    root = ElementTree.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    lines = root.findall(f"{ns}polyline")
    legend = [t.text for t in root.findall(f"{ns}text")]
    # compact, verify and the baseline once; the get benchmark is not on the log.
    assert len(lines) == 3
    assert {"compact: compact", "verify: verify", "cp + sync"} <= set(legend)
    assert all(len(line.get("points", "").split()) == 2 for line in lines)
    assert [line.get("stroke-dasharray") is not None for line in lines].count(True) == 1
    one = tmp_path / "one.json"
    one.write_text(json.dumps(run("1m", 10**6, 1.0)), encoding="utf-8")
    refused = _run(one, "--plot", str(tmp_path / "no.svg"))
    assert refused.returncode != 0 and "nothing to plot" in refused.stderr
