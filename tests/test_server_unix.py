"""memcommit serve on a Unix domain socket (``--socket``), beside TCP or alone (``--no-tcp``).

Real server processes; no test asserts a time: waits are bounded only so that a broken build
fails instead of hanging.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import memcommit
from memcommit.errors import Rejected
from memcommit.testing import ServerProcess
from memcommit.wire import ServerError, ServerUnavailable

TOKEN = "a-test-token-that-is-long-enough"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: a Unix socket's path is limited to about 100 bytes."""
    with tempfile.TemporaryDirectory(prefix="mc-", dir="/tmp") as d:
        yield Path(d)


@pytest.fixture
def both(short_dir: Path) -> Iterator[ServerProcess]:
    """A server on TCP and on a Unix socket."""
    with ServerProcess(short_dir / "memory.db", "--socket", str(short_dir / "m.sock")) as p:
        yield p


def serve(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``memcommit serve`` expecting it to fail at once; return what it did."""
    return subprocess.run(
        [sys.executable, "-m", "memcommit", "serve", str(path), "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_store_api_works_over_the_socket(both: ServerProcess, short_dir: Path) -> None:
    assert both.unix_url == f"unix://{short_dir / 'm.sock'}"
    assert both.url.startswith("http://127.0.0.1:")
    with memcommit.RemoteStore(both.unix_url) as store:
        assert store.url == both.unix_url
        fact = store.put("User prefers dark mode", kind="fact", task="t1")
        with store.commit() as c:
            c.expect(fact, exists=True)
            c.stale(fact, reason="changed her mind")
        assert store.get(fact).status == "stale"
        with pytest.raises(Rejected):
            with store.commit() as c:
                c.expect(fact, status="active")
                c.put("never written", kind="note")
        assert [m.text for m in store.find(task="t1", status="stale")] == ["User prefers dark mode"]
        # A role call is decided by the server, as over TCP.
        lease = store.locks.acquire("job", "replica-a", 30_000)
        assert lease is not None
        assert store.locks.acquire("job", "replica-b", 30_000) is None
        assert store.info()["url"] == both.unix_url


def test_socket_and_tcp_clients_share_one_writer(both: ServerProcess) -> None:
    """Commits over either transport get LSNs from the one log, and each client sees both."""
    assert both.unix_url is not None
    with (
        memcommit.RemoteStore(both.unix_url) as local,
        memcommit.RemoteStore(both.url) as tcp,
    ):
        a = local.put("from the socket", kind="note")
        b = tcp.put("from TCP", kind="note")
        local.refresh()
        assert local.get(b).text == "from TCP"
        assert tcp.get(a).text == "from the socket"
        # The same compare-and-set across transports: exactly one of two racing guards wins.
        lsn = tcp.get(a).lsn
        wins = []
        for client in (local, tcp):
            try:
                with client.commit() as c:
                    c.expect(a, lsn=lsn)
                    c.move(a, "archive" if client is local else "working")
                wins.append(client)
            except Rejected:
                pass
        assert wins == [local]


def test_a_long_poll_over_the_socket_hears_of_a_commit(both: ServerProcess) -> None:
    assert both.unix_url is not None
    with (
        memcommit.RemoteStore(both.unix_url) as follower,
        memcommit.RemoteStore(both.unix_url) as writer,
    ):
        follower.refresh()
        before = follower.lsn
        heard: list[int] = []
        thread = threading.Thread(target=lambda: heard.append(follower.refresh(wait=30)))
        thread.start()
        mid = writer.put("news", kind="note")
        thread.join(60)
        assert follower.lsn > before
        assert follower.get(mid).text == "news"


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_signals_do_not_fail_a_clients_requests(both: ServerProcess, transport: str) -> None:
    """A client process whose calls a signal interrupts (EINTR: a handler of its own, a
    sampling profiler) still connects, commits and reads: each interrupted call is made
    again, not reported as a server that cannot be reached."""
    url = both.unix_url if transport == "unix" else both.url
    assert url is not None
    with memcommit.RemoteStore(url) as writer:
        with writer.commit() as c:  # a log of some MiB, read back in many reads
            c.put_many([f"{i:06d} " + "x" * 1000 for i in range(6_000)], kind="note")
    fired = [0]

    def count(signum: int, frame: object) -> None:
        fired[0] += 1

    previous = signal.signal(signal.SIGALRM, count)  # installed without SA_RESTART
    signal.setitimer(signal.ITIMER_REAL, 0.0002, 0.0002)
    try:
        for _ in range(3):
            with memcommit.RemoteStore(url) as store:  # connects and reads the whole log
                assert store.find(kind="note", limit=None)[-1].text.startswith("005999 ")
                for i in range(50):
                    store.put(f"under signals {i}", kind="fact")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, previous)
    assert fired[0] > 0  # the calls above were interrupted, not left alone
    with memcommit.RemoteStore(url) as store:
        assert len(store.find(kind="fact", limit=None)) == 150


class _Stop(Exception):
    """What the test's signal handler raises."""


def test_a_signal_handler_that_raises_ends_a_long_poll(both: ServerProcess) -> None:
    """A handler that raises (Ctrl-C's KeyboardInterrupt is one) ends a wait for the server
    and its exception is raised in place, as Python's own I/O does; the store works on."""
    assert both.unix_url is not None
    with (
        memcommit.RemoteStore(both.unix_url) as store,
        memcommit.RemoteStore(both.unix_url) as other,
    ):
        store.refresh()
        before = store.lsn
        raised = threading.Event()
        committed: list[str] = []

        def commit_unless_raised() -> None:
            # Ends the wait if the signal could not.
            if not raised.wait(20):
                committed.append(other.put("ended the wait", kind="note"))

        def stop(signum: int, frame: object) -> None:
            raise _Stop

        helper = threading.Thread(target=commit_unless_raised)
        previous = signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        helper.start()
        try:
            with pytest.raises(_Stop):
                store.refresh(wait=30)
        finally:
            raised.set()
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            helper.join()
        assert committed == []  # the signal ended the wait, not a commit
        assert store.lsn == before
        mid = store.put("after the signal", kind="note")
        assert store.get(mid).text == "after the signal"


def test_the_socket_is_owner_only_and_removed_on_sigterm(short_dir: Path) -> None:
    path = short_dir / "m.sock"
    process = ServerProcess(short_dir / "memory.db", "--socket", str(path))
    try:
        mode = os.stat(path).st_mode
        assert stat.S_ISSOCK(mode)
        assert stat.S_IMODE(mode) == 0o600
    finally:
        assert process.terminate() == -signal.SIGTERM
    assert not path.exists()


def test_no_tcp_serves_the_socket_alone(short_dir: Path) -> None:
    sock = short_dir / "m.sock"
    with ServerProcess(short_dir / "memory.db", "--socket", str(sock), "--no-tcp") as process:
        assert process.url == f"unix://{sock}"
        assert process.unix_url == process.url
        listening = next(line for line in process.output if "listening on" in line)
        assert "http" not in listening.split("(")[0]
        with memcommit.RemoteStore(process.url) as store:
            mid = store.put("only local", kind="note")
            assert store.get(mid).text == "only local"


def test_no_tcp_without_a_socket_is_a_usage_error(short_dir: Path) -> None:
    done = serve(short_dir / "memory.db", "--no-tcp")
    assert done.returncode == 2
    assert "--no-tcp needs --socket" in done.stderr
    assert not (short_dir / "memory.db").exists()


def test_a_socket_left_by_a_dead_server_is_replaced(short_dir: Path) -> None:
    path = short_dir / "m.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))  # a socket file nobody listens on
    dead.close()
    with ServerProcess(short_dir / "memory.db", "--socket", str(path)) as process:
        assert process.unix_url is not None
        with memcommit.RemoteStore(process.unix_url) as store:
            assert store.put("served", kind="note")


def test_a_socket_in_use_or_a_file_in_the_way_is_refused(
    both: ServerProcess, short_dir: Path
) -> None:
    other = short_dir / "other"
    other.mkdir()
    done = serve(other / "memory.db", "--socket", str(short_dir / "m.sock"))
    assert done.returncode == 1
    assert f"--socket {short_dir / 'm.sock'}: a running server is listening on it" in done.stderr
    assert "Traceback" not in done.stderr
    # The running server's socket is untouched and still serves.
    assert both.unix_url is not None
    with memcommit.RemoteStore(both.unix_url) as store:
        assert store.put("still served", kind="note")

    in_the_way = short_dir / "notes.txt"
    in_the_way.write_text("keep me")
    done = serve(other / "memory.db", "--socket", str(in_the_way))
    assert done.returncode == 1
    assert "exists and is not a socket" in done.stderr
    assert in_the_way.read_text() == "keep me"

    done = serve(other / "memory.db", "--socket", str(short_dir / "missing" / "m.sock"))
    assert done.returncode == 1
    assert f"the directory {short_dir / 'missing'} does not exist" in done.stderr
    assert list(other.iterdir()) == [], "refused before the store was created"


def test_a_token_is_checked_over_the_socket_too(short_dir: Path) -> None:
    token_file = short_dir / "token"
    token_file.write_text(TOKEN)
    sock = str(short_dir / "m.sock")
    with ServerProcess(
        short_dir / "memory.db", "--socket", sock, "--token-file", str(token_file)
    ) as process:
        assert process.unix_url is not None
        with pytest.raises(ServerError) as info:
            memcommit.RemoteStore(process.unix_url).put("no token", kind="note")
        assert info.value.status == 401
        with memcommit.RemoteStore(process.unix_url, token=TOKEN) as store:
            assert store.put("with the token", kind="note")


@pytest.mark.parametrize(
    "url",
    ["unix://host/m.sock", "unix:", "unix:///m.sock?x=1", "ftp://h/m.sock", "/tmp/m.sock"],
)
def test_a_bad_url_is_refused_by_name(url: str) -> None:
    with pytest.raises(ValueError) as info:
        memcommit.RemoteStore(url)
    assert repr(url) in str(info.value)


def test_a_missing_socket_is_unavailable_and_named(short_dir: Path) -> None:
    url = f"unix://{short_dir / 'nobody.sock'}"
    with pytest.raises(ServerUnavailable) as info:
        memcommit.RemoteStore(url, retry_seconds=0.1).put("lost", kind="note")
    assert url in str(info.value)


def test_kill_9_loses_no_commit_acknowledged_over_the_socket(short_dir: Path) -> None:
    path = short_dir / "memory.db"
    process = ServerProcess(path, "--socket", str(short_dir / "m.sock"))
    acknowledged: list[str] = []
    assert process.unix_url is not None
    store = memcommit.RemoteStore(process.unix_url, retry_seconds=0.2)
    stop = threading.Event()

    def write(n: int) -> None:
        i = 0
        while not stop.is_set():
            try:
                acknowledged.append(store.put(f"commit {n}.{i}", kind="note"))
            except memcommit.MemcommitError:
                return
            i += 1

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(acknowledged) < 200 and time.monotonic() < deadline:
        threads[0].join(0.01)
    process.kill()
    stop.set()
    for t in threads:
        t.join(60)
    store.close()
    with memcommit.open(path, read_only=True) as survived:
        missing = [mid for mid in acknowledged if survived.get(mid) is None]
    assert len(acknowledged) >= 200
    assert missing == []


def test_serve_help_names_the_socket_options() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memcommit", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    for option in ("--socket", "--no-tcp"):
        assert option in done.stdout
