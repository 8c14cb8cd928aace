"""Every step of the files Python writes beside the log, failed one at a time.

The compaction manifest and snapshots are written by :func:`memcommit.files.replace_durably`
(temp file, write, fsync, rename, fsync of the directory), and ``memcommit export --out`` with
the same steps, outside the Rust core and so outside its simulated file system
(RELIABILITY.md). Here each of those steps fails in turn, once the steps before it have
happened, as a process dying there would leave things: the store must reopen on exactly the
old or the new generation (or snapshot), whole, the export is the old file or the new, and no
temp file is left beside them.
"""

from __future__ import annotations

import builtins
import errno
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import memcommit
from memcommit import StorageError, files
from memcommit.cli import main, transfer
from memcommit.seals import verify
from memcommit.storage import KindsAfter, compact

# replace_durably's steps, in order.
STEPS = ("open the temp file", "fsync it", "rename it", "open the directory", "fsync the directory")


@contextmanager
def failing_at(step: int, writer: ModuleType = files) -> Iterator[list[str]]:
    """Make the `step`th of replace_durably's steps fail with EIO (once); yields the steps taken.

    `writer` is the module whose ``open`` writes the temp file (``memcommit.cli.transfer``
    for an export).
    """
    taken: list[str] = []
    real_open, real_fsync, real_replace, real_os_open = (
        builtins.open,
        os.fsync,
        os.replace,
        os.open,
    )

    def hit(name: str) -> None:
        if len(taken) == step:
            taken.append(f"failed: {name}")
            raise OSError(errno.EIO, f"injected at {name}")
        taken.append(name)

    def fake_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "w" in mode:
            hit(STEPS[0])
        return real_open(file, mode, *args, **kwargs)

    def fake_fsync(fd: int) -> None:
        hit(STEPS[1] if len(taken) < 2 else STEPS[4])
        real_fsync(fd)

    def fake_replace(a: Any, b: Any) -> None:
        hit(STEPS[2])
        real_replace(a, b)

    def fake_os_open(p: Any, flags: int, *args: Any) -> int:
        hit(STEPS[3])
        return real_os_open(p, flags, *args)

    with pytest.MonkeyPatch.context() as mp:
        # `open` in the writing module only (a module global shadowing the builtin); the os
        # functions everywhere, for the block: nothing else in it writes files from Python.
        mp.setattr(writer, "open", fake_open, raising=False)
        mp.setattr(os, "fsync", fake_fsync)
        mp.setattr(os, "replace", fake_replace)
        mp.setattr(os, "open", fake_os_open)
        yield taken


def _state(store: memcommit.MemoryStore) -> dict[str, tuple[object, ...]]:
    return {m.id: (m.text, m.status, m.tier) for m in store.find(status=None)}


def _no_temp_files(directory: Path) -> None:
    left = sorted(p.name for p in directory.iterdir() if ".tmp-" in p.name)
    assert left == [], left


@pytest.mark.parametrize("step", range(len(STEPS) + 1), ids=[*STEPS, "none"])
def test_a_compaction_whose_manifest_write_stops_at_each_step(tmp_path: Path, step: int) -> None:
    path = tmp_path / "memory.db"
    with memcommit.open(path) as store:
        for i in range(300):
            store.put(f"memory {i}", kind="trace" if i % 2 else "fact", id=f"m{i}")
        for i in range(0, 300, 3):
            store.put(f"memory {i}, again", kind="fact", id=f"m{i}")
        before = _state(store)
        with failing_at(step) as taken:
            if step < len(STEPS):
                with pytest.raises(OSError):
                    compact(store)
            else:
                compact(store)
        assert len(taken) == min(step + 1, len(STEPS)), taken
    with memcommit.open(path) as store:
        # The old generation, or (the manifest and the rename both done) the new one.
        assert store.generation in (0, 1)
        if step < len(STEPS):
            assert store.generation == 0, taken
            assert store.manifest() == []  # an entry for a generation the log lacks is dropped
        else:
            assert [e["generation"] for e in store.manifest()] == [1]
        assert _state(store) == before
        assert verify(store).records_checked == store.info()["records"]
    _no_temp_files(tmp_path)


@pytest.mark.parametrize("step", range(len(STEPS) + 1), ids=[*STEPS, "none"])
def test_a_snapshot_write_that_stops_at_each_step_leaves_the_old_one_or_the_new(
    tmp_path: Path, step: int
) -> None:
    path, snap = tmp_path / "memory.db", tmp_path / "state.snap"
    with memcommit.open(path) as store:
        store.put("first", id="a")
        store.save_snapshot(snap)
        old = snap.read_bytes()
        store.put("second", id="b")
        with failing_at(step):
            if step < len(STEPS):
                with pytest.raises(OSError):
                    store.save_snapshot(snap)
            else:
                store.save_snapshot(snap)
        want = _state(store)
    # The rename is the switch: before it the old snapshot is there, after it the new one.
    renamed = step > STEPS.index("rename it")
    assert (snap.read_bytes() != old) == renamed
    with memcommit.open(path, snapshot=snap) as store:
        assert _state(store) == want
    _no_temp_files(tmp_path)


@pytest.mark.parametrize("step", range(len(STEPS) + 1), ids=[*STEPS, "none"])
def test_replace_durably_says_whether_the_target_was_replaced(tmp_path: Path, step: int) -> None:
    """Before the rename the target is as it was; after it, it is the new file, of unknown
    durability (its directory's fsync failed), and the error says so."""
    target = tmp_path / "file"
    target.write_bytes(b"old")
    with failing_at(step):
        if step < len(STEPS):
            with pytest.raises(StorageError) as caught:
                files.replace_durably(str(target), f"{target}.tmp-1", b"new")
        else:
            files.replace_durably(str(target), f"{target}.tmp-1", b"new")
    renamed = step > STEPS.index("rename it")
    assert target.read_bytes() == (b"new" if renamed else b"old")
    if step < len(STEPS):
        error = caught.value
        assert (error.path, error.errno) == (str(target), errno.EIO)
        message = str(error)
        assert str(target) in message and "os error 5" in message
        if renamed:
            assert "was replaced" in message and "durability is unknown" in message, message
        else:
            assert "replaced" not in message, message
    _no_temp_files(tmp_path)


def test_a_compaction_whose_manifest_was_renamed_but_not_synced_leaves_no_false_entry(
    tmp_path: Path,
) -> None:
    """The directory's fsync after the manifest's rename fails: the compaction is abandoned,
    and the manifest on disk holds an entry (a purge) for a generation the log never reached.
    The next compaction in the same process must not carry it over, nor a reopen keep it."""
    path = tmp_path / "memory.db"
    with memcommit.open(path) as store:
        store.put("an old trace", kind="trace", id="a")
        store.put("a fact", id="b")
        before = _state(store)
        with failing_at(STEPS.index("fsync the directory")) as taken:
            with pytest.raises(StorageError) as caught:
                compact(store, retention=KindsAfter({"trace": 0}))
        assert taken[-1] == "failed: fsync the directory", taken
        assert f"{path}.manifest" in str(caught.value)
        # Abandoned: the log is the old generation, `a` is there and not purged.
        assert store.generation == 0 and store.manifest() == []
        assert _state(store) == before and not store.is_purged("a")

        assert compact(store).generation == 1  # no retention: purges nothing
        assert [(e["generation"], e["purged"]) for e in store.manifest()] == [(1, [])]
        assert _state(store) == before and not store.is_purged("a")
        store.put("after", id="c", sources=("a",))  # `a` is a memory, not a purged id
    for read_only in (True, False):
        with memcommit.open(path, read_only=read_only) as store:
            assert store.generation == 1
            assert [(e["generation"], e["purged"]) for e in store.manifest()] == [(1, [])]
            assert store.get("a") is not None and not store.is_purged("a")
            assert verify(store).records_checked == store.info()["records"]
    _no_temp_files(tmp_path)
    # The error said what happened: the manifest was replaced, and not known to be durable.
    assert "was replaced" in str(caught.value) and "durability is unknown" in str(caught.value)


@pytest.mark.parametrize("step", range(len(STEPS) + 1), ids=[*STEPS, "none"])
def test_an_export_whose_output_write_stops_at_each_step_leaves_the_old_file_or_the_new(
    tmp_path: Path, step: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """``memcommit export --out FILE`` replaces FILE as replace_durably does: a temp file of
    this process, fsynced, renamed, then the directory fsynced (the last step, so a failure
    to sync it after the rename is seen)."""
    path, out = tmp_path / "memory.db", tmp_path / "dump.jsonl"
    with memcommit.open(path) as store:
        store.put("first", id="a")
        store.put("second", id="b")
    out.write_text("the old export\n")
    with failing_at(step, transfer) as taken:
        code = main(["export", str(path), "--out", str(out)])
    assert len(taken) == min(step + 1, len(STEPS)), taken
    err = capsys.readouterr().err
    renamed = step > STEPS.index("rename it")
    if step < len(STEPS):
        assert code != 0
        assert str(out) in err and ".tmp-" not in err, err
        if renamed:
            assert "replaced" in err and "power loss" in err, err
    else:
        assert code == 0, err
    if renamed:
        assert [json.loads(line)["key"] for line in out.read_text().splitlines()] == ["a", "b"]
    else:
        assert out.read_text() == "the old export\n"
    _no_temp_files(tmp_path)
    assert not any(p.name.endswith(".partial") for p in tmp_path.iterdir())
