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
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
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
        "build",
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
    assert 0.07 < made.memories / made.records < 0.13  # about a tenth of the records


def test_the_run_queue_is_added_through_the_public_api(suite: Any, tmp_path: Path) -> None:
    path = tmp_path / "queue.db"
    suite.loggen.build(str(path), 3_000)
    with memcommit.open(path, read_only=True) as store:
        before = len(store.runs.list())
    made = suite.loggen.add_run_queue(str(path), 300, 40)
    assert (made.added, made.runs, made.pending) == (300, before + 300, 40)
    with memcommit.open(path, read_only=True) as store:
        pending = store.runs.list(status="pending")
        assert len(pending) == 40
        assert len(store.runs.list(status="succeeded")) == before + 260


class _FakeBenchmark:
    """What :func:`suite.measure.per_call` uses of pytest-benchmark's fixture, timing nothing:
    each round's "time" is the argument its setup drew."""

    def __init__(self) -> None:
        self.disabled = False
        self.extra_info: dict[str, Any] = {}
        self.stats: Any = None
        self.rounds = 0

    def pedantic(self, target: Any, setup: Any, rounds: int, **_: Any) -> Any:
        data = []
        for _ in range(rounds):
            (argument,), _kwargs = setup()
            answer = target(argument)
            data.append(float(argument))
        self.rounds = rounds
        self.stats = type("Meta", (), {"stats": type("Stats", (), {"data": data})})()
        return answer


def test_per_call_records_p50_and_p99_of_the_timed_calls(suite: Any) -> None:
    import dataclasses
    import time

    import suite.measure

    # Calls that take at least 10 ms each as they are judged (the first three), with 0.1 s to
    # spend: the fewest calls are timed.
    size = dataclasses.replace(suite.sizes.SIZES["tiny"], calls=50, call_seconds=0.1)
    drawn = iter(range(1, 10_000))

    def call(n: int) -> int:
        if n <= 3:
            time.sleep(0.01)
        return n * 2

    bench = _FakeBenchmark()
    answer = suite.measure.per_call(bench, call, lambda: next(drawn), size)
    assert bench.rounds == suite.sizes.MIN_CALLS == bench.extra_info["calls"] == 20
    assert answer == 2 * (3 + 20)  # the last call's answer
    timed = list(range(4, 4 + 20))  # the fake's round "times": what setup drew
    assert bench.extra_info["p50_s"] == (timed[9] + timed[10]) / 2
    assert bench.extra_info["p99_s"] == timed[-1]  # 20 calls: the slowest
    assert bench.extra_info["peak_rss_mib"] > 0
    # Cheap calls: size.calls of them, capped by `most`.
    bench = _FakeBenchmark()
    suite.measure.per_call(bench, lambda n: n, lambda: 1e-9, size)
    assert bench.rounds == 50
    bench = _FakeBenchmark()
    suite.measure.per_call(bench, lambda n: n, lambda: 1e-9, size, most=33)
    assert bench.rounds == 33
    assert suite.measure.percentile([float(n) for n in range(1, 1001)], 0.99) == 990.0


def _run(json_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCHES / "tables.py"), str(json_path), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def _bench(
    group: str, name: str, median: float, size: str = "tiny", **extra: object
) -> dict[str, object]:
    return {
        "group": group,
        "name": name,
        "stats": {"median": median},
        "extra_info": {"size": size, **extra},
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
        log: dict[str, Any] = {"log_records": records, "size": size}
        return {
            "benchmarks": [
                _bench("compact", "test_cp_sync[compact]", 0.1 * scale, **log),
                _bench("compact", "test_compact", 0.5 * scale, **log),
                _bench("verify", "test_cp_sync[verify]", 0.1 * scale, **log),
                _bench("verify", "test_verify", 0.2 * scale, **log),
                # neither a log benchmark nor ...
                _bench("get", "test_get[memcommit]", 1.0, size, records=1000),
                # ... a whole-log one (a per-call figure: --plot-calls draws it)
                _bench("calls", "test_log_call[get]", 1e-6, p50_s=1e-6, p99_s=2e-6, **log),
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


def _sized(size: str, records: int, benches: list[dict[str, object]]) -> dict[str, object]:
    for bench in benches:
        extra = bench["extra_info"]
        assert isinstance(extra, dict)
        extra.update(size=size, log_records=records)
    return {
        "datetime": f"run at {size}",
        "commit_info": {"id": f"commit-{size}"},
        "benchmarks": benches,
    }


def _growth_runs() -> list[dict[str, object]]:
    runs = []
    for size, n in (("1m", 10**6), ("10m", 10**7), ("50m", 5 * 10**7)):
        k = n / 10**6
        runs.append(
            _sized(
                size,
                n,
                [
                    _bench(
                        "compact",
                        "test_compact",
                        0.5 * k,
                        peak_rss_mib=100.0 * k,
                        rss_at_start_mib=60.0 * k,
                    ),
                    _bench("compact", "test_cp_sync[compact]", 0.1 * k),
                    _bench("verify", "test_cp_sync[verify]", 0.1 * k),
                    _bench("snapshot open", "test_snapshot_open[full replay]", 0.4 * k**1.5),
                    _bench(
                        "calls",
                        "test_log_call[get]",
                        1e-6,
                        p50_s=1e-6,
                        p99_s=3e-6,
                        peak_rss_mib=100.0,
                        rss_at_start_mib=95.0,
                    ),
                    _bench(
                        "calls", "test_log_call[history]", 0.1 * k, p50_s=0.1 * k, p99_s=0.2 * k
                    ),
                    _bench("calls", "test_first", 0.01 * k**0.5),
                ],
            )
        )
    return runs


def test_growth_with_n_judges_each_figure_by_its_log_log_slope(tmp_path: Path) -> None:
    paths = []
    for run in _growth_runs():
        paths.append(tmp_path / f"{len(paths)}.json")
        paths[-1].write_text(json.dumps(run), encoding="utf-8")
    shown = subprocess.run(
        [sys.executable, str(BENCHES / "tables.py"), *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "#### Growth with N" in out
    assert "1m: 1,000,000; 10m: 10,000,000; 50m: 50,000,000" in out
    head = "| figure | statistic | 1m | 10m | 50m | slope 1m→10m | slope 10m→50m |"
    assert head + " growth 1m→50m (slope) |" in out
    assert (
        "| compact: compact | median | 500.00 ms | 5.00 s | 25.00 s | 1.00 | 1.00 | linear (1.00) |"
        in out
    )
    assert (
        "| compact: compact | peak RSS | 100 MiB | 1,000 MiB | 5,000 MiB | 1.00 | 1.00 "
        "| linear (1.00) |" in out
    )
    assert "| snapshot open: full replay | median |" in out and "worse than linear (1.50) |" in out
    assert "| calls: get | p50 | 1.0 µs | 1.0 µs | 1.0 µs | 0.00 | 0.00 | flat (0.00) |" in out
    assert "| calls: get | p99 | 3.0 µs | 3.0 µs | 3.0 µs | 0.00 | 0.00 | flat (0.00) |" in out
    assert (
        "| calls: get | peak RSS | 100 MiB | 100 MiB | 100 MiB | 0.00 | 0.00 | flat (0.00) |" in out
    )
    # 5 MiB added at every size: at or below the floor, not judged
    assert "| calls: get | RSS added | 5 MiB | 5 MiB | 5 MiB |  |  |  |" in out
    assert (
        "| compact: compact | RSS added | 40 MiB | 400 MiB | 2,000 MiB | 1.00 | 1.00 "
        "| linear (1.00) |" in out
    )
    assert (
        "| calls: history | p99 | 200.00 ms | 2.00 s | 10.00 s | 1.00 | 1.00 | linear (1.00) |"
        in out
    )
    assert "| calls: first | median |" in out and "sublinear (0.50) |" in out
    # the baseline once, as compact measured it
    assert out.count("| cp + sync | median |") == 1
    # a per-call group's table: p50, p99 and the calls
    assert "| benchmark | p50 | p99 | calls | peak RSS (at start) |" in out
    assert "| history | 100.00 ms | 200.00 ms |" in out
    assert "| compact | 25.00 s |  |  |  | 5,000 MiB (3,000) | 5.00 |" in out


def test_growth_verdicts_follow_the_documented_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHES))
    import tables

    assert (tables.FLAT, tables.LINEAR, tables.WORSE) == (0.2, 0.8, 1.2)
    verdicts = [tables.growth(s) for s in (-0.3, 0.19, 0.2, 0.79, 0.8, 1.2, 1.21)]
    assert verdicts == [
        "flat",
        "flat",
        "sublinear",
        "sublinear",
        "linear",
        "linear",
        "worse than linear",
    ]
    assert tables.slope((1e6, 2.0), (1e7, 20.0)) == pytest.approx(1.0)
    assert tables.slope((1e6, 2.0), (1e6, 3.0)) is None


def test_tables_merge_the_runs_of_one_size_later_ones_winning(tmp_path: Path) -> None:
    first = _sized(
        "1m",
        10**6,
        [
            _bench("compact", "test_compact", 2.0),
            _bench("verify", "test_verify", 1.0),
        ],
    )
    second = _sized("1m", 10**6, [_bench("verify", "test_verify", 0.5)])
    second["commit_info"] = {"id": "abcdef0123456789", "dirty": True}
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path, run in zip(paths, (first, second), strict=True):
        path.write_text(json.dumps(run), encoding="utf-8")
    shown = subprocess.run(
        [sys.executable, str(BENCHES / "tables.py"), *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "Size 1m, merged from 2 runs:" in out
    assert "* Run 1: run at 1m, commit commit-1m," in out and "Groups: compact." in out
    assert "commit abcdef0123 with uncommitted changes" in out and "Groups: verify." in out
    assert "| verify | 500.00 ms |" in out and "| verify | 1.00 s |" not in out
    assert "| compact | 2.00 s |" in out
    assert "Growth with N" not in out  # one size: nothing grows


def test_the_calls_plot_draws_p50_solid_and_p99_dotted_in_one_colour(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ElementTree

    paths = []
    for run in _growth_runs():
        paths.append(tmp_path / f"{len(paths)}.json")
        paths[-1].write_text(json.dumps(run), encoding="utf-8")
    calls, whole = tmp_path / "calls.svg", tmp_path / "whole.svg"
    plots = ["--plot", str(whole), "--plot-calls", str(calls)]
    done = subprocess.run(
        [sys.executable, str(BENCHES / "tables.py"), *map(str, paths), *plots],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    ns = "{http://www.w3.org/2000/svg}"
    root = ElementTree.parse(calls).getroot()
    lines = {
        text.text: line
        for text, line in zip(
            root.findall(f"{ns}text")[-5:], root.findall(f"{ns}polyline"), strict=True
        )
    }
    assert set(lines) == {"get p50", "get p99", "history p50", "history p99", "first p50"}
    assert lines["get p50"].get("stroke") == lines["get p99"].get("stroke")
    assert lines["get p50"].get("stroke") != lines["history p50"].get("stroke")
    assert lines["get p50"].get("stroke-dasharray") is None
    assert lines["get p99"].get("stroke-dasharray") == "2,3"
    legend = {t.text for t in ElementTree.parse(whole).getroot().findall(f"{ns}text")}
    assert "compact: compact" in legend and "cp + sync" in legend
    assert not any(t and t.startswith("calls") for t in legend)  # per-call figures apart
