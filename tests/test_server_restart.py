"""A RemoteStore across a server restart: the first commit after it is sent, not lost.

A restart closes the connections the old server process held; the store's idle keep-alive
connection to it is dropped before a request would be written to it, so the commit goes to the
new server and is applied (not lost after it was written, which would make it a resend of
unknown outcome). Real server processes; no test asserts a time.
"""

from __future__ import annotations

import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import memcommit
from memcommit.testing import ServerProcess


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: a Unix socket's path is limited to about 100 bytes."""
    with tempfile.TemporaryDirectory(prefix="mc-", dir="/tmp") as d:
        yield Path(d)


def stop(process: ServerProcess, how: str) -> None:
    if how == "sigterm":
        assert process.terminate() == -signal.SIGTERM
    else:
        assert process.kill() == -signal.SIGKILL


@pytest.mark.parametrize("how", ["sigterm", "kill-9"])
@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_the_first_commit_and_role_call_after_a_restart_are_applied(
    short_dir: Path, transport: str, how: str
) -> None:
    path, sock = short_dir / "memory.db", str(short_dir / "m.sock")
    process = ServerProcess(path, "--socket", sock)
    url = process.unix_url if transport == "unix" else process.url
    assert url is not None
    with memcommit.RemoteStore(url, retry_seconds=30) as store:
        try:
            store.put("before", id="before")
            stop(process, how)
            process = ServerProcess(path, "--socket", sock, port=process.port)
            assert store.put("after", id="after") == "after"
            store.refresh()
            assert len(store.history("after")) == 1 and store.get("after") is not None
            stop(process, how)
            process = ServerProcess(path, "--socket", sock, port=process.port)
            lease = store.locks.acquire("job", "worker-a", 30_000)  # a role call, the same way
            assert lease is not None and store.locks.get("job") is not None
        finally:
            process.terminate()
