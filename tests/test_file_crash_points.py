"""Every step of the files Python writes beside the log, failed one at a time.

The compaction manifest and snapshots are written by :func:`memcommit.files.replace_durably`
(temp file, write, fsync, rename, fsync of the directory), outside the Rust core and so
outside its simulated file system (RELIABILITY.md). Here each of those steps fails in turn,
once the steps before it have happened, as a process dying there would leave things: the
store must reopen on exactly the old or the new generation (or snapshot), whole, with no temp
file left beside it.
"""

from __future__ import annotations

import builtins
import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import memcommit
from memcommit import files
from memcommit.seals import verify
from memcommit.storage import compact

# replace_durably's steps, in order.
STEPS = ("open the temp file", "fsync it", "rename it", "open the directory", "fsync the directory")


@contextmanager
def failing_at(step: int) -> Iterator[list[str]]:
    """Make the `step`th of replace_durably's steps fail with EIO (once); yields the steps taken."""
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
        # `open` in memcommit.files only (a module global shadowing the builtin); the os
        # functions everywhere, for the block: nothing else in it writes files from Python.
        mp.setattr(files, "open", fake_open, raising=False)
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
