"""memcommit serve with TLS: beside a plain Unix socket, across restarts, and refused trust.

Real server processes; no test asserts a time: waits are bounded only so that a broken build
fails instead of hanging.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import memcommit
from memcommit.testing import ServerProcess
from memcommit.wire import ServerUnavailable


@pytest.fixture(scope="module")
def cert_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and its key (PEM files)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return str(cert), str(key)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: a Unix socket's path is limited to about 100 bytes."""
    with tempfile.TemporaryDirectory(prefix="mc-", dir="/tmp") as d:
        yield Path(d)


def plain_health(sock: str) -> bytes:
    """The first line of ``GET /v1/health``'s answer, asked in plain HTTP on a Unix socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(sock)
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
    return answer.split(b"\r\n", 1)[0]


def test_the_unix_socket_speaks_plain_http_while_tcp_speaks_tls(
    cert_pair: tuple[str, str], short_dir: Path
) -> None:
    cert, key = cert_pair
    sock = str(short_dir / "m.sock")
    with ServerProcess(
        short_dir / "memory.db", "--socket", sock, "--tls-cert", cert, "--tls-key", key
    ) as server:
        assert server.url.startswith("https://") and server.unix_url == f"unix://{sock}"
        assert plain_health(sock) == b"HTTP/1.1 200 OK"
        with memcommit.RemoteStore(server.unix_url, retry_seconds=2) as local:
            mid = local.put("over the socket, in plain HTTP")
        with memcommit.RemoteStore(server.url, ca_file=cert) as remote:
            assert remote.get(mid) is not None
            remote.put("over TCP, in TLS")


@pytest.mark.parametrize("how", ["sigterm", "kill-9"])
def test_the_first_commit_after_a_restart_is_applied_over_tls(
    cert_pair: tuple[str, str], tmp_path: Path, how: str
) -> None:
    cert, key = cert_pair
    path, tls = tmp_path / "memory.db", ("--tls-cert", cert, "--tls-key", key)
    process = ServerProcess(path, *tls)
    with memcommit.RemoteStore(process.url, ca_file=cert, retry_seconds=30) as store:
        try:
            store.put("before", id="before")
            if how == "sigterm":
                assert process.terminate() == -signal.SIGTERM
            else:
                assert process.kill() == -signal.SIGKILL
            process = ServerProcess(path, *tls, port=process.port)
            assert store.put("after", id="after") == "after"
            store.refresh()
            assert len(store.history("after")) == 1
        finally:
            process.terminate()


def test_an_untrusted_certificate_is_refused_at_once_naming_ca_file(
    cert_pair: tuple[str, str], tmp_path: Path
) -> None:
    cert, key = cert_pair
    with ServerProcess(tmp_path / "memory.db", "--tls-cert", cert, "--tls-key", key) as server:
        # The system's authorities do not trust a self-signed certificate: no retry helps.
        with pytest.raises(ServerUnavailable) as refused:
            memcommit.RemoteStore(server.url, retry_seconds=5)
        assert refused.value.code == "untrusted_certificate"
        message = str(refused.value)
        assert "certificate was not trusted" in message and "ca_file" in message
        assert "cannot be reached" not in message
