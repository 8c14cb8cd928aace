"""What readers see once a write or fsync has failed (the durability table's last rule).

A commit is visible to every reader of the store as soon as it is applied, before its fsync
(group commit shares one fsync between many commits). If that write or fsync then fails, the
state in memory may hold commits the disk never got: from then on every call, reads as well
as writes, raises ``WriterFailed`` until the store is reopened from what is on disk.

The failure here is real, not simulated: the child process caps its file size
(``RLIMIT_FSIZE``), so the writer's next write past the space it wrote ahead fails with
``EFBIG``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import memcommit

CHILD = r"""
import json, os, resource, signal, sys
import memcommit

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap fails with EFBIG instead
path = sys.argv[1]
store = memcommit.open(path)
before = store.put("acknowledged before the failure", kind="fact")
store.locks.acquire("job", "replica-a", 60_000)
size = os.path.getsize(path)
resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
out = {"before": before, "failed_put": None}
try:
    for i in range(1000):  # fills the space written ahead, then needs more
        store.put("x" * 100_000, kind="fact", task="big")
except memcommit.WriterFailed as e:
    out["failed_put"] = str(e)
reads = {
    "get": lambda: store.get(before),
    "get_many": lambda: store.get_many([before]),
    "find": lambda: store.find(kind="fact"),
    "len": lambda: len(store),
    "contains": lambda: before in store,
    "history": lambda: store.history(before),
    "records": lambda: list(store.records()),
    "locks": lambda: store.locks.get("job"),
    "put": lambda: store.put("after", kind="fact"),
    "acquire": lambda: store.locks.acquire("other", "replica-a", 1_000),
}
for name, read in reads.items():
    try:
        read()
        out[name] = "answered"
    except memcommit.WriterFailed as e:
        out[name] = "WriterFailed: " + str(e)
try:
    store.close()  # releases the file, then reports the flush that cannot succeed
    out["close"] = "closed"
except memcommit.WriterFailed:
    out["close"] = "WriterFailed"
print(json.dumps(out))
"""


def test_after_a_failed_write_every_read_and_write_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["failed_put"] is not None
    assert "File too large" in out["failed_put"] or "EFBIG" in out["failed_put"]
    for name in ("get", "get_many", "find", "len", "contains", "history", "records", "locks"):
        assert out[name].startswith("WriterFailed: "), (name, out[name])
        assert "reads are refused too" in out[name]
        assert str(path) in out[name]
    assert out["put"].startswith("WriterFailed: ")
    assert out["acquire"].startswith("WriterFailed: ")
    assert out["close"] == "WriterFailed"
    # Reopened, the store holds what the disk holds: everything acknowledged before.
    with memcommit.open(path) as store:
        assert store.get(out["before"]).text == "acknowledged before the failure"
        assert store.locks.get("job") is not None


SMALL_CHILD = r"""
import json, resource, signal, sys
import memcommit

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
store = memcommit.open(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))  # less than the zeros ahead
acked, failure = 0, None
try:
    for i in range(10_000):
        store.put("x" * 200, id=f"m{i}")
        acked += 1
except memcommit.WriterFailed as e:
    failure = str(e)
print(json.dumps({"acked": acked, "failure": failure}))
"""


def test_under_a_file_size_limit_small_commits_fill_it_before_one_fails(tmp_path: Path) -> None:
    """The zeros written ahead of small commits are only a saving: past the process's file
    size limit (EFBIG), as on a full disk, the commits go on into the room that is left."""
    path = tmp_path / "memory.db"
    done = subprocess.run(
        [sys.executable, "-c", SMALL_CHILD, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["acked"] > 1_000 and out["failure"] is not None, out  # ~280 bytes a commit
    with memcommit.open(str(path)) as store:
        assert [m is not None for m in store.get_many([f"m{i}" for i in range(out["acked"])])] == [
            True
        ] * out["acked"]
