"""``memcommit bench compact PATH``: a timed compaction of a copy, the original only read."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import memcommit
from memcommit.cli import main
from memcommit.cli.bench import FIGURES, compaction_figures
from memcommit.storage import CompactionReport


def _log_with_history(path: Path) -> Path:
    """A log where compaction has something to fold: re-puts, stale, restore, move."""
    with memcommit.open(path, durability="none") as store:
        for round_ in range(5):
            with store.commit() as c:
                for i in range(100):
                    c.put(
                        f"memory {i}, version {round_}",
                        id=f"m{i}",
                        kind="trace" if i % 2 else "fact",
                    )
            with store.commit() as c:
                for i in range(0, 100, 3):
                    c.stale(f"m{i}")
                    c.restore(f"m{i}")
                    c.move(f"m{i}", "archive")
    return path


def _digests(directory: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file()
    }


def test_it_compacts_a_copy_and_prints_the_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log_with_history(tmp_path / "memory.db")
    before = _digests(tmp_path)
    assert main(["bench", "compact", str(log)]) == 0
    out = capsys.readouterr().out
    assert _digests(tmp_path) == before  # the original and its files, byte for byte
    assert not any(p.name.startswith(".memcommit-bench-") for p in tmp_path.iterdir())
    lines = {line.partition(":")[0]: line for line in out.splitlines()}
    assert {"cp + sync", "open", "compact", "records", "bytes", "MB/s in", "reclaimed"} <= set(
        lines
    )
    assert {"peak RSS", "reopen"} <= set(lines)
    with memcommit.open(log, read_only=True) as store:
        records = store.info()["records"]
    assert lines["records"].startswith(f"records: {records} -> ")
    assert "the file itself is unchanged" in out


def test_json_holds_the_figures_the_suite_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log_with_history(tmp_path / "memory.db")
    size = log.stat().st_size
    assert main(["bench", "compact", str(log), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert set(FIGURES) <= set(figures)
    assert figures["path"] == str(log)
    assert figures["bytes_before"] == size
    assert figures["records_before"] > figures["records_after"] > 0
    assert figures["reclaimed_bytes"] == figures["bytes_before"] - figures["bytes_after"] > 0
    assert figures["purged"] == 0
    assert figures["peak_rss_mib"] > 0 and figures["cp_sync_seconds"] > 0
    assert figures["mb_in_per_s"] == pytest.approx(size / figures["seconds"] / 1e6)


def test_retention_options_purge_in_the_copy_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log_with_history(tmp_path / "memory.db")
    argv = ["bench", "compact", str(log), "--json", "--kinds-after", "trace=0s"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["purged"] == 50  # the odd ids are traces
    assert main([*argv[:4], "--archived-older-than", "0s"]) == 0
    assert json.loads(capsys.readouterr().out)["purged"] == 34  # every third id, archived
    with memcommit.open(log, read_only=True) as store:
        assert len(store) == 100 and not store.manifest()


def test_the_copy_goes_where_dir_says_and_is_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log_with_history(tmp_path / "memory.db")
    elsewhere = tmp_path / "scratch"
    elsewhere.mkdir()
    assert main(["bench", "compact", str(log), "--dir", str(elsewhere)]) == 0
    assert list(elsewhere.iterdir()) == []


def test_compaction_figures_are_the_named_ones() -> None:
    report = CompactionReport(
        before=1000, after=100, purged=("a",), horizon=1000, bytes_before=4_000_000,
        bytes_after=1_000_000, seconds=0.5, generation=1,
    )  # fmt: skip
    figures = compaction_figures(report, 3 * 2**20)
    assert tuple(figures) == FIGURES
    assert figures["mb_in_per_s"] == 8.0 and figures["mb_out_per_s"] == 2.0
    assert figures["records_per_s"] == 2000.0 and figures["reclaimed_bytes"] == 3_000_000
    assert figures["reclaimed_fraction"] == 0.75 and figures["purged"] == 1
    assert figures["peak_rss_mib"] == 3.0


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: None, "no such log file"),
        (lambda p: p.mkdir(), "is a directory, not a log file"),
        (lambda p: p.write_bytes(b""), "is an empty file (0 bytes)"),
        (lambda p: p.write_bytes(b"not a log at all"), "shorter than a log header"),
        (lambda p: p.write_bytes(b"x" * 4096), "damaged log at byte offset 0"),
    ],
    ids=["missing", "directory", "empty", "short", "not a log"],
)
def test_a_bad_path_is_a_clear_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: object, says: str
) -> None:
    path = tmp_path / "bad.db"
    make(path)  # type: ignore[operator]
    before = _digests(tmp_path)
    assert main(["bench", "compact", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"memcommit bench: error: {path}"), err
    assert says in err
    assert ".memcommit-bench-" not in err  # the copy's name never shows
    assert len(err.strip().splitlines()) == 1
    assert _digests(tmp_path) == before
    assert not any(p.name.startswith(".memcommit-bench-") for p in tmp_path.iterdir())


def test_a_missing_dir_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _log_with_history(tmp_path / "memory.db")
    missing = tmp_path / "nowhere"
    assert main(["bench", "compact", str(log), "--dir", str(missing)]) == 1
    assert f"{missing}: no such directory for the copy" in capsys.readouterr().err


def test_bench_needs_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench"]) == 2
    assert "BENCH" in capsys.readouterr().err
