"""The Markdown tables of the benchmark suite, from its ``--benchmark-json`` output.

    python benches/tables.py out.json                          # print the tables
    python benches/tables.py 1m.json 10m.json 50m.json         # and how the figures grow
    python benches/tables.py out.json --write BENCHMARKS.md    # into its marked section
    python benches/tables.py 1m.json 10m.json --plot growth.svg --plot-calls calls.svg

One table per group (per figure): each benchmark's median time, records/s and MB/s in and out
(from ``extra_info``'s ``records``, ``bytes_in`` and ``bytes_out`` over the median), peak RSS
where it was measured, and its time over the group's reference: ``cp`` + ``sync`` where the
group has it (the log benchmarks), else memcommit. A group of per-call benchmarks (their
``extra_info`` has ``p99_s``) shows each call's p50 and p99 and how many calls were timed.

Several files of one size are merged: a benchmark (group and name) in a later file replaces the
one in an earlier file, so a rerun of a few groups (``-k``) updates just those; the tables say
which run (commit, time) each group comes from. With two sizes or more:

* "Growth with N": every figure on the generated log (median, or p50 and p99 per call, the
  peak RSS and the RSS added over what the process held as the measure began) at each size,
  the log-log slope between the sizes (N: the log's records) and what the slope from the
  smallest size to the largest makes it (:func:`growth`: flat below :data:`FLAT`, linear from
  :data:`LINEAR` to :data:`WORSE`, worse than linear above, sublinear between flat and
  linear; memory of :data:`RSS_FLOOR` or less is not judged);
* the medians of the benchmarks not on the generated log (the peers), by size;
* the compaction figures per size.

``--plot`` draws how the log benchmarks' median times grow with the log's records (log-log,
one line per benchmark, as an SVG file), ``--plot-calls`` the per-call p50 (solid) and p99
(dotted). ``--write`` replaces what lies between :data:`BEGIN` and :data:`END` in the file
(appending the section when they are missing), so the hand-written parts of the file stay.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

BEGIN = "<!-- benches/tables.py: begin (generated, edit benches/tables.py instead) -->"
END = "<!-- benches/tables.py: end -->"
SIZE_ORDER = ("tiny", "1m", "10m", "50m")
FLAT, LINEAR, WORSE = 0.2, 0.8, 1.2
"""The log-log slope thresholds of :func:`growth`: a figure that grows as N**s with s below
FLAT is flat, with s from LINEAR to WORSE linear, above WORSE worse than linear."""
RSS_FLOOR = 16 * 2**20
"""Memory at or below this (16 MiB) is not judged: the slope of noise says nothing."""


def load(paths: Iterable[str]) -> list[dict[str, Any]]:
    """The runs in the JSON files at `paths`, each checked to hold timed benchmarks."""
    runs = []
    for path in paths:
        try:
            run = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise SystemExit(f"{path}: not a pytest-benchmark JSON file ({error})") from None
        if not isinstance(run, dict) or not run.get("benchmarks"):
            raise SystemExit(
                f"{path}: holds no timed benchmarks (was it written with --benchmark-disable?)"
            )
        runs.append(run)
    return runs


def size_of(run: dict[str, Any]) -> str:
    """The ``--bench-size`` a run was made at (every benchmark records it)."""
    sizes = {b.get("extra_info", {}).get("size", "?") for b in run["benchmarks"]}
    return ", ".join(sorted(sizes))


def label(bench: dict[str, Any]) -> str:
    """A benchmark's name in its group's table: its parameter (the contender), else its test."""
    test, _, param = str(bench["name"]).removeprefix("test_").partition("[")
    if test == "cp_sync":
        return "cp + sync"
    return param.removesuffix("]") if param else test.replace("_", " ")


def is_reference(bench: dict[str, Any], group: Sequence[dict[str, Any]]) -> bool:
    """Whether `bench` is its group's reference: cp + sync, else the first memcommit one."""
    if any(label(b) == "cp + sync" for b in group):
        return label(bench) == "cp + sync"
    subjects = [b for b in group if "memcommit" in label(b).lower()]
    return bool(subjects) and bench is subjects[0]


def _rate(amount: object, seconds: float, scale: float = 1.0) -> str:
    if not isinstance(amount, (int, float)) or seconds <= 0:
        return ""
    rate = amount / seconds / scale
    return f"{rate:,.0f}" if rate >= 10 else f"{rate:,.2f}"


def _seconds(value: float) -> str:
    if value >= 1:
        return f"{value:,.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:,.2f} ms"
    return f"{value * 1e6:,.1f} µs"


def merge(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs of each size merged into one, ordered by size.

    A benchmark (group and name) in a later run of a size replaces the one of an earlier run.
    Each merged run has ``size``, ``benchmarks`` (each with ``_source``: its run's place in
    ``sources``) and ``sources`` (the runs, in the order given).
    """
    merged: dict[str, dict[str, Any]] = {}
    for run in runs:
        size = size_of(run)
        into = merged.setdefault(size, {"size": size, "sources": [], "by_key": {}})
        into["sources"].append(run)
        for bench in run["benchmarks"]:
            key = (bench.get("group"), bench["name"])
            into["by_key"][key] = {**bench, "_source": len(into["sources"]) - 1}
    ordered = sorted(
        merged.values(),
        key=lambda r: SIZE_ORDER.index(r["size"]) if r["size"] in SIZE_ORDER else 99,
    )
    return [
        {"size": r["size"], "sources": r["sources"], "benchmarks": list(r["by_key"].values())}
        for r in ordered
    ]


def _groups(benches: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for bench in benches:
        groups.setdefault(str(bench.get("group") or bench["name"]), []).append(bench)
    return groups


def per_call_groups(runs: Iterable[dict[str, Any]]) -> set[str]:
    """The groups of per-call benchmarks: those with a benchmark whose extra_info has p99_s."""
    return {
        str(b.get("group"))
        for run in runs
        for b in run["benchmarks"]
        if "p99_s" in b.get("extra_info", {})
    }


def _rss(info: dict[str, Any]) -> str:
    """The peak RSS, and what the process held as its measure began (the peak counts it)."""
    rss, start = info.get("peak_rss_mib"), info.get("rss_at_start_mib")
    if not isinstance(rss, (int, float)):
        return ""
    return f"{rss:,.0f} MiB" + (f" ({start:,.0f})" if isinstance(start, (int, float)) else "")


def group_tables(run: dict[str, Any]) -> list[str]:
    """One Markdown table per group of `run`."""
    lines: list[str] = []
    calls = per_call_groups([run])
    for group, benches in _groups(run["benchmarks"]).items():
        if group in calls:
            lines += _call_table(group, benches, size_of(run))
            continue
        reference = next((b for b in benches if is_reference(b, benches)), None)
        ref_name = label(reference) if reference is not None else ""
        lines += [
            f"#### {group} ({size_of(run)})",
            "",
            "| benchmark | median | records/s | MB/s in | MB/s out | peak RSS (at start) "
            f"| time ÷ {ref_name} |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        ref_median = float(reference["stats"]["median"]) if reference is not None else 0.0
        for bench in sorted(benches, key=lambda b: float(b["stats"]["median"])):
            median = float(bench["stats"]["median"])
            info = bench.get("extra_info", {})
            ratio = f"{median / ref_median:.2f}" if ref_median > 0 else ""
            lines.append(
                f"| {label(bench)} | {_seconds(median)} | {_rate(info.get('records'), median)} "
                f"| {_rate(info.get('bytes_in'), median, 1e6)} "
                f"| {_rate(info.get('bytes_out'), median, 1e6)} "
                f"| {_rss(info)} | {ratio} |"
            )
        lines.append("")
    return lines


def _call_table(group: str, benches: Sequence[dict[str, Any]], size: str) -> list[str]:
    """A group of per-call benchmarks: p50, p99 and the calls timed (a benchmark without
    p99_s, one call per round, shows its median as p50 and its rounds as calls)."""
    lines = [
        f"#### {group} ({size})",
        "",
        "| benchmark | p50 | p99 | calls | peak RSS (at start) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for bench in benches:
        info = bench.get("extra_info", {})
        p50 = float(info.get("p50_s", bench["stats"]["median"]))
        p99 = info.get("p99_s")
        count = info.get("calls", bench["stats"].get("rounds", ""))
        lines.append(
            f"| {label(bench)} | {_seconds(p50)} "
            f"| {_seconds(float(p99)) if isinstance(p99, (int, float)) else ''} "
            f"| {f'{count:,}' if isinstance(count, int) else count} | {_rss(info)} |"
        )
    lines.append("")
    return lines


def slope(a: tuple[float, float], b: tuple[float, float], floor: float = 0.0) -> float | None:
    """The log-log slope from the point `a` to `b` (each (N, value)), or None if undefined or
    a value is not above `floor`."""
    (n0, v0), (n1, v1) = a, b
    if min(n0, n1) <= 0 or min(v0, v1) <= floor or n0 == n1:
        return None
    return math.log(v1 / v0) / math.log(n1 / n0)


def growth(s: float) -> str:
    """What a log-log slope makes a figure: see :data:`FLAT`, :data:`LINEAR`, :data:`WORSE`."""
    if s < FLAT:
        return "flat"
    if s < LINEAR:
        return "sublinear"
    if s <= WORSE:
        return "linear"
    return "worse than linear"


def growth_rows(
    runs: Sequence[dict[str, Any]],
) -> dict[tuple[str, str], dict[str, tuple[float, float]]]:
    """Every figure on the generated log, per statistic: ``(figure, statistic)`` to, per size,
    ``(N, value)`` (N: the log's records; the value in seconds, or bytes for peak RSS).

    A per-call benchmark gives its p50 and p99, any other its median; each its peak RSS where
    measured. ``cp + sync``, the baseline each group repeats, once (as ``compact`` measured it).
    """
    rows: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}
    for run in runs:
        for bench in run["benchmarks"]:
            info = bench.get("extra_info", {})
            n = info.get("log_records")
            if not isinstance(n, (int, float)) or n <= 0:
                continue
            name = f"{bench.get('group')}: {label(bench)}"
            if label(bench) == "cp + sync":
                if bench.get("group") != "compact":
                    continue
                name = "cp + sync"
            figures: list[tuple[str, float]] = (
                [("p50", float(info["p50_s"])), ("p99", float(info["p99_s"]))]
                if "p99_s" in info
                else [("median", float(bench["stats"]["median"]))]
            )
            peak, start = info.get("peak_rss_mib"), info.get("rss_at_start_mib")
            if isinstance(peak, (int, float)):
                figures.append(("peak RSS", float(peak) * 2**20))
                if isinstance(start, (int, float)):
                    figures.append(("RSS added", max(0.0, float(peak) - float(start)) * 2**20))
            for statistic, value in figures:
                rows.setdefault((name, statistic), {})[run["size"]] = (float(n), value)
    return rows


def growth_table(runs: Sequence[dict[str, Any]]) -> list[str]:
    """The "Growth with N" table: each figure by size, its slopes and what they make it."""
    sizes = [r["size"] for r in runs]
    rows = growth_rows(runs)
    if not rows:
        return []
    pairs = list(itertools.pairwise(sizes))
    ends = (sizes[0], sizes[-1])
    slope_heads = [f"slope {a}→{b}" for a, b in pairs] if len(pairs) > 1 else []
    n_of = {s: next(p[s][0] for p in rows.values() if s in p) for s in sizes}
    lines = [
        "#### Growth with N",
        "",
        "N is the generated log's records ("
        + "; ".join(f"{s}: {n_of[s]:,.0f}" for s in sizes)
        + "). The slope is the log-log slope of the figure against N; the growth is what the "
        f"slope from {ends[0]} to {ends[-1]} makes it: flat below {FLAT}, sublinear from "
        f"{FLAT} to {LINEAR}, linear from {LINEAR} to {WORSE}, worse than linear above. "
        "Peak RSS is the process's, counting what it held as the measure began (the store "
        "opened for the work, and what earlier benchmarks left); RSS added is the peak less "
        f"that. Memory of {RSS_FLOOR // 2**20} MiB or less is not judged.",
        "",
        "| figure | statistic | "
        + " | ".join(sizes + slope_heads + [f"growth {ends[0]}→{ends[-1]} (slope)"])
        + " |",
        "| --- | --- | " + " | ".join("---:" for _ in sizes + slope_heads) + " | --- |",
    ]
    for (name, statistic), by_size in rows.items():
        memory = statistic in ("peak RSS", "RSS added")
        show = _mib if memory else _seconds
        floor = RSS_FLOOR if memory else 0.0
        cells = [show(by_size[s][1]) if s in by_size else "" for s in sizes]
        if slope_heads:
            for a, b in pairs:
                k = slope(by_size[a], by_size[b], floor) if a in by_size and b in by_size else None
                cells.append(f"{k:.2f}" if k is not None else "")
        have = [s for s in sizes if s in by_size]
        whole = slope(by_size[have[0]], by_size[have[-1]], floor) if len(have) > 1 else None
        cells.append(f"{growth(whole)} ({whole:.2f})" if whole is not None else "")
        lines.append(f"| {name} | {statistic} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _mib(value: float) -> str:
    return f"{value / 2**20:,.0f} MiB"


def growth_tables(runs: Sequence[dict[str, Any]]) -> list[str]:
    """How each figure grows with the size, the peers' medians by size, the compaction figures
    per size (`runs`: merged, one per size, see :func:`merge`)."""
    sizes = [r["size"] for r in runs]
    lines = growth_table(runs)
    others: dict[tuple[str, str], dict[str, float]] = {}
    for run in runs:
        for bench in run["benchmarks"]:
            if "log_records" in bench.get("extra_info", {}):
                continue
            key = (str(bench.get("group")), label(bench))
            others.setdefault(key, {})[run["size"]] = float(bench["stats"]["median"])
    if others:
        lines += [
            "#### Median time by size, the benchmarks not on the generated log",
            "",
            "| group | benchmark | " + " | ".join(sizes) + " |",
            "| --- | --- | " + " | ".join("---:" for _ in sizes) + " |",
        ]
        for (group, name), by_size in others.items():
            cells = [_seconds(by_size[s]) if s in by_size else "" for s in sizes]
            lines.append(f"| {group} | {name} | " + " | ".join(cells) + " |")
        lines.append("")
    compactions = []
    for run in runs:
        for bench in run["benchmarks"]:
            info = bench.get("extra_info", {})
            if label(bench) == "cp + sync" or "reclaimed_bytes" not in info:
                continue
            beside = [b for b in run["benchmarks"] if b.get("group") == bench.get("group")]
            base = next((b for b in beside if label(b) == "cp + sync"), None)
            median = float(bench["stats"]["median"])
            ratio = f"{median / float(base['stats']['median']):.2f}" if base else ""
            compactions.append(
                f"| {run['size']} | {bench.get('group')} | {info['records_before']:,} "
                f"| {info['bytes_before'] / 1e6:,.0f} | {_seconds(median)} "
                f"| {_rate(info['bytes_before'], median, 1e6)} "
                f"| {_rate(info['bytes_after'], median, 1e6)} "
                f"| {_rate(info['records_before'], median)} "
                f"| {info['reclaimed_fraction']:.1%} | {info['purged']:,} "
                f"| {info['peak_rss_mib']:,.0f} MiB | {ratio} |"
            )
    if compactions:
        lines += [
            "#### Compaction by size",
            "",
            "| size | group | records | log MB | median | MB/s in | MB/s out | records/s "
            "| reclaimed | purged | peak RSS | ÷ cp + sync |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            *compactions,
            "",
        ]
    return lines


def growth_series(runs: Sequence[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """Per log benchmark (``group: name``), its (records in the log, median seconds) points.

    Only benchmarks on the generated log (those whose ``extra_info`` names the log's records)
    measured at two sizes or more, not the per-call ones (see :func:`calls_series`);
    ``cp + sync``, the baseline each group repeats, once (as the ``compact`` group measured it).
    """
    calls = per_call_groups(runs)
    series: dict[str, list[tuple[float, float]]] = {}
    for (name, statistic), by_size in growth_rows(runs).items():
        if statistic == "median" and name.partition(": ")[0] not in calls:
            series[name] = sorted(by_size.values())
    return {k: v for k, v in sorted(series.items()) if len({x for x, _ in v}) > 1}


def calls_series(runs: Sequence[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """Per per-call benchmark, its (records in the log, seconds) points: ``name p50`` and
    ``name p99`` (a benchmark timed once per round: its median, as ``name p50``)."""
    calls = per_call_groups(runs)
    series: dict[str, list[tuple[float, float]]] = {}
    for (name, statistic), by_size in growth_rows(runs).items():
        group, _, bench = name.partition(": ")
        if group in calls and statistic in ("median", "p50", "p99"):
            tag = "p50" if statistic == "median" else statistic
            series[f"{bench} {tag}"] = sorted(by_size.values())
    return {k: v for k, v in series.items() if len({x for x, _ in v}) > 1}


_COLOURS = (
    "#1b6ca8",
    "#d1495b",
    "#2a9d8f",
    "#e9a03b",
    "#6c4f9c",
    "#5c5c5c",
    "#8ab17d",
    "#b5651d",
    "#e377c2",
    "#17becf",
    "#7f7f00",
    "#000080",
)


def plot_svg(series: dict[str, list[tuple[float, float]]], title: str) -> str:
    """`series` as a log-log line plot (records across, seconds up), an SVG document.

    A series named ``cp + sync`` (or ending so) is dashed; one ending in `` p99`` is dotted,
    in the colour of the series of the same name ending in `` p50``.
    """
    if not series:
        raise SystemExit("nothing to plot: no log benchmark was measured at two sizes or more")
    width, left, right, top, bottom = 760, 70, 250, 40, 50
    height = max(420, top + bottom + 16 * len(series) + 16)
    xs = [x for points in series.values() for x, _ in points]
    ys = [y for points in series.values() for _, y in points]
    x0, x1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    x1, y1 = max(x1, x0 + 1), max(y1, y0 + 1)

    def at(x: float, y: float) -> tuple[float, float]:
        px = left + (math.log10(x) - x0) / (x1 - x0) * (width - left - right)
        py = height - bottom - (math.log10(y) - y0) / (y1 - y0) * (height - top - bottom)
        return round(px, 1), round(py, 1)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="22" font-size="14">{_escape(title)}</text>',
    ]
    for e in range(x0, x1 + 1):
        px, _ = at(10.0**e, 10.0**y0)
        out.append(f'<line x1="{px}" y1="{top}" x2="{px}" y2="{height - bottom}" stroke="#ddd"/>')
        out.append(f'<text x="{px}" y="{height - bottom + 16}" text-anchor="middle">1e{e}</text>')
    for e in range(y0, y1 + 1):
        _, py = at(10.0**x0, 10.0**e)
        out.append(f'<line x1="{left}" y1="{py}" x2="{width - right}" y2="{py}" stroke="#ddd"/>')
        out.append(
            f'<text x="{left - 6}" y="{py + 4}" text-anchor="end">{_seconds(10.0**e)}</text>'
        )
    out.append(
        f'<text x="{(left + width - right) / 2}" y="{height - 12}" text-anchor="middle">'
        "records in the log</text>"
    )
    colours: dict[str, str] = {}
    for i, (name, points) in enumerate(series.items()):
        stem = name.removesuffix(" p50").removesuffix(" p99")
        colour = colours.setdefault(stem, _COLOURS[len(colours) % len(_COLOURS)])
        dash = ""
        if name.endswith("cp + sync"):
            dash = ' stroke-dasharray="5,4"'
        elif name.endswith(" p99"):
            dash = ' stroke-dasharray="2,3"'
        path = " ".join(f"{px},{py}" for px, py in (at(x, y) for x, y in points))
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        ly = top + 16 * i + 8
        out.append(
            f'<line x1="{width - right + 12}" y1="{ly - 4}" x2="{width - right + 32}" '
            f'y2="{ly - 4}" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        out.append(f'<text x="{width - right + 38}" y="{ly}">{_escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def machine(run: dict[str, Any]) -> str:
    """One line naming where and when `run` was made."""
    info = run.get("machine_info", {})
    cpu = info.get("cpu", {})
    commit_info = run.get("commit_info", {})
    commit = str(commit_info.get("id") or "?")[:10]
    if commit_info.get("dirty"):
        commit += " with uncommitted changes"
    return (
        f"{run.get('datetime', '?')}, commit {commit}, Python "
        f"{info.get('python_version', '?')}, {cpu.get('brand_raw', info.get('machine', '?'))}, "
        f"{cpu.get('count', '?')} cores; size {size_of(run)}."
    )


def provenance(run: dict[str, Any]) -> list[str]:
    """Which run each group of the merged `run` comes from (see :func:`merge`)."""
    sources = run["sources"]
    if len(sources) == 1:
        return [f"Run: {machine(sources[0])}", ""]
    groups: dict[int, list[str]] = {}
    for group, benches in _groups(run["benchmarks"]).items():
        groups.setdefault(benches[0]["_source"], []).append(group)
    lines = [f"Size {run['size']}, merged from {len(sources)} runs:", ""]
    for i, source in enumerate(sources):
        held = ", ".join(groups.get(i, [])) or "none (every group was rerun later)"
        lines.append(f"* Run {i + 1}: {machine(source)} Groups: {held}.")
    return [*lines, ""]


def render(runs: Sequence[dict[str, Any]], command: str) -> str:
    """The whole generated section: the command, each size's tables, the growth tables."""
    sized = merge(runs)
    lines = [f"Made by `{command}`.", ""]
    for run in sized:
        lines += [*provenance(run), *group_tables(run)]
    if len(sized) > 1:
        lines += growth_tables(sized)
    return "\n".join(lines).rstrip() + "\n"


def write_section(path: Path, body: str) -> None:
    """Put `body` between the markers in `path`, keeping everything outside them."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    section = f"{BEGIN}\n{body}{END}"
    start, end = text.find(BEGIN), text.find(END)
    if start >= 0 and end > start:
        text = text[:start] + section + text[end + len(END) :]
    elif start >= 0 or end >= 0:
        raise SystemExit(f"{path}: has only one of the markers {BEGIN!r} and {END!r}")
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + "## The suite's tables\n\n"
        text += section + "\n"
    path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="+", help="--benchmark-json files (one per size)")
    parser.add_argument("--write", metavar="FILE", help="write into FILE's marked section")
    parser.add_argument(
        "--command", default="make bench", help="the command named above the tables"
    )
    parser.add_argument(
        "--plot", metavar="SVG", help="also draw the log benchmarks' growth with size into SVG"
    )
    parser.add_argument(
        "--plot-calls", metavar="SVG", help="also draw the per-call p50 and p99 by size into SVG"
    )
    args = parser.parse_args(argv)
    runs = load(args.json)
    body = render(runs, args.command)
    sized = merge(runs)
    if args.plot:
        title = "median time by log size (log-log; dashed: cp + sync of the same file)"
        Path(args.plot).write_text(plot_svg(growth_series(sized), title), encoding="utf-8")
    if args.plot_calls:
        title = "time per call by log size (log-log; solid: p50, dotted: p99)"
        Path(args.plot_calls).write_text(plot_svg(calls_series(sized), title), encoding="utf-8")
    if args.write:
        write_section(Path(args.write), body)
    else:
        sys.stdout.write(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
