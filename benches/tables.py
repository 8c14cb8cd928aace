"""The Markdown tables of the benchmark suite, from its ``--benchmark-json`` output.

    python benches/tables.py out.json                          # print the tables
    python benches/tables.py 1m.json 10m.json 50m.json         # and how the figures grow
    python benches/tables.py out.json --write BENCHMARKS.md    # into its marked section
    python benches/tables.py 1m.json 10m.json --plot growth.svg  # and a plot of the growth

One table per group (per figure): each benchmark's median time, records/s and MB/s in and out
(from ``extra_info``'s ``records``, ``bytes_in`` and ``bytes_out`` over the median), peak RSS
where it was measured, and its time over the group's reference: ``cp`` + ``sync`` where the
group has it (the log benchmarks), else memcommit. With several JSON files (one per
``--bench-size``), a table of how each figure grows with the size follows, and one of the
compaction figures per size; ``--plot`` draws how the log benchmarks' median times grow with
the log's records (log-log, one line per benchmark, as an SVG file). ``--write`` replaces
what lies between :data:`BEGIN` and :data:`END` in the file (appending the section when they
are missing), so the hand-written parts of the file stay.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

BEGIN = "<!-- benches/tables.py: begin (generated, edit benches/tables.py instead) -->"
END = "<!-- benches/tables.py: end -->"
SIZE_ORDER = ("tiny", "1m", "10m", "50m")


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


def group_tables(run: dict[str, Any]) -> list[str]:
    """One Markdown table per group of `run`."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for bench in run["benchmarks"]:
        groups.setdefault(str(bench.get("group") or bench["name"]), []).append(bench)
    lines: list[str] = []
    for group, benches in groups.items():
        reference = next((b for b in benches if is_reference(b, benches)), None)
        ref_name = label(reference) if reference is not None else ""
        lines += [
            f"#### {group} ({size_of(run)})",
            "",
            "| benchmark | median | records/s | MB/s in | MB/s out | peak RSS "
            f"| time ÷ {ref_name} |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        ref_median = float(reference["stats"]["median"]) if reference is not None else 0.0
        for bench in sorted(benches, key=lambda b: float(b["stats"]["median"])):
            median = float(bench["stats"]["median"])
            info = bench.get("extra_info", {})
            rss = info.get("peak_rss_mib")
            ratio = f"{median / ref_median:.2f}" if ref_median > 0 else ""
            lines.append(
                f"| {label(bench)} | {_seconds(median)} | {_rate(info.get('records'), median)} "
                f"| {_rate(info.get('bytes_in'), median, 1e6)} "
                f"| {_rate(info.get('bytes_out'), median, 1e6)} "
                f"| {f'{rss:,.0f} MiB' if isinstance(rss, (int, float)) else ''} | {ratio} |"
            )
        lines.append("")
    return lines


def growth_tables(runs: Sequence[dict[str, Any]]) -> list[str]:
    """How each figure grows with the size, and the compaction figures per size."""
    ordered = sorted(
        runs, key=lambda r: SIZE_ORDER.index(s) if (s := size_of(r)) in SIZE_ORDER else 99
    )
    sizes = [size_of(r) for r in ordered]
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for size, run in zip(sizes, ordered, strict=True):
        for bench in run["benchmarks"]:
            key = (str(bench.get("group")), label(bench))
            rows.setdefault(key, {})[size] = float(bench["stats"]["median"])
    lines = [
        "#### Median time by size",
        "",
        "| group | benchmark | " + " | ".join(sizes) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in sizes) + " |",
    ]
    for (group, name), by_size in rows.items():
        cells = [_seconds(by_size[s]) if s in by_size else "" for s in sizes]
        lines.append(f"| {group} | {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "#### Compaction by size",
        "",
        "| size | group | records | log MB | median | MB/s in | MB/s out | records/s "
        "| reclaimed | purged | peak RSS | ÷ cp + sync |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for size, run in zip(sizes, ordered, strict=True):
        for bench in run["benchmarks"]:
            info = bench.get("extra_info", {})
            if label(bench) == "cp + sync" or "reclaimed_bytes" not in info:
                continue
            beside = [b for b in run["benchmarks"] if b.get("group") == bench.get("group")]
            base = next((b for b in beside if label(b) == "cp + sync"), None)
            median = float(bench["stats"]["median"])
            ratio = f"{median / float(base['stats']['median']):.2f}" if base else ""
            lines.append(
                f"| {size} | {bench.get('group')} | {info['records_before']:,} "
                f"| {info['bytes_before'] / 1e6:,.0f} | {_seconds(median)} "
                f"| {_rate(info['bytes_before'], median, 1e6)} "
                f"| {_rate(info['bytes_after'], median, 1e6)} "
                f"| {_rate(info['records_before'], median)} "
                f"| {info['reclaimed_fraction']:.1%} | {info['purged']:,} "
                f"| {info['peak_rss_mib']:,.0f} MiB | {ratio} |"
            )
    lines.append("")
    return lines


def growth_series(runs: Sequence[dict[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """Per log benchmark (``group: name``), its (records in the log, median seconds) points.

    Only benchmarks on the generated log (those whose ``extra_info`` names the log's records)
    measured at two sizes or more; ``cp + sync``, the baseline each group repeats, once (as the
    ``compact`` group measured it).
    """
    series: dict[str, list[tuple[float, float]]] = {}
    for run in runs:
        for bench in run["benchmarks"]:
            records = bench.get("extra_info", {}).get("log_records")
            if not isinstance(records, (int, float)) or records <= 0:
                continue
            name = f"{bench.get('group')}: {label(bench)}"
            if label(bench) == "cp + sync":
                if bench.get("group") != "compact":
                    continue
                name = "cp + sync"
            series.setdefault(name, []).append((float(records), float(bench["stats"]["median"])))
    return {k: sorted(v) for k, v in sorted(series.items()) if len({x for x, _ in v}) > 1}


_COLOURS = ("#1b6ca8", "#d1495b", "#2a9d8f", "#e9a03b", "#6c4f9c", "#5c5c5c", "#8ab17d")


def plot_svg(series: dict[str, list[tuple[float, float]]], title: str) -> str:
    """`series` as a log-log line plot (records across, median seconds up), an SVG document."""
    if not series:
        raise SystemExit("nothing to plot: no log benchmark was measured at two sizes or more")
    width, height, left, right, top, bottom = 760, 420, 70, 250, 40, 50
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
    for i, (name, points) in enumerate(series.items()):
        colour = _COLOURS[i % len(_COLOURS)]
        dash = ' stroke-dasharray="5,4"' if name.endswith("cp + sync") else ""
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
    commit = run.get("commit_info", {}).get("id") or "?"
    return (
        f"{run.get('datetime', '?')}, commit {str(commit)[:10]}, Python "
        f"{info.get('python_version', '?')}, {cpu.get('brand_raw', info.get('machine', '?'))}, "
        f"{cpu.get('count', '?')} cores; size {size_of(run)}."
    )


def render(runs: Sequence[dict[str, Any]], command: str) -> str:
    """The whole generated section: the command, each run's tables, the growth tables."""
    lines = [f"Made by `{command}`.", ""]
    for run in runs:
        lines += [f"Run: {machine(run)}", "", *group_tables(run)]
    if len(runs) > 1:
        lines += growth_tables(runs)
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
    args = parser.parse_args(argv)
    runs = load(args.json)
    body = render(runs, args.command)
    if args.plot:
        title = "median time by log size (log-log; dashed: cp + sync of the same file)"
        Path(args.plot).write_text(plot_svg(growth_series(runs), title), encoding="utf-8")
    if args.write:
        write_section(Path(args.write), body)
    else:
        sys.stdout.write(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
