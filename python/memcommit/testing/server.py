"""A ``memcommit serve`` child process, for tests and scripts that need a real server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

__all__ = ["ServerProcess"]


class ServerProcess:
    """A ``memcommit serve`` child process, started on a free port and stopped on exit.

    Args:
        path: The store file.
        *args: More ``serve`` options (``"--test-clock"``, ``"--token-file", F``...).
        port: The port (default 0: a free one, read from the server's ``listening on`` line).
        timeout: Seconds to wait for the server to listen.

    Raises:
        RuntimeError: The server exited or did not listen in time (its output is included).

    Example:
        >>> with ServerProcess("memory.db") as server:  # doctest: +SKIP
        ...     store = memcommit.RemoteStore(server.url)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *args: str,
        port: int = 0,
        timeout: float = 30.0,
    ) -> None:
        self.path = os.fspath(path)
        self.args = args
        cmd = [sys.executable, "-m", "memcommit", "serve", self.path, "--port", str(port), *args]
        self.process = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self.output: list[str] = []
        urls = self._wait_listening(timeout)
        self.url = urls[0]
        """The first URL the server listens on (TCP's, unless it was started ``--no-tcp``)."""
        self.unix_url = next((u for u in urls if u.startswith("unix:")), None)
        """The Unix socket's URL, when started with ``--socket``."""
        self.port = int(self.url.rsplit(":", 1)[1]) if self.url.startswith("http") else 0
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()

    def _wait_listening(self, timeout: float) -> list[str]:
        assert self.process.stderr is not None
        deadline = time.monotonic() + timeout
        timer = threading.Timer(timeout, self.process.kill)
        timer.start()
        try:
            for raw in self.process.stderr:
                line = raw.decode("utf-8", "replace").rstrip()
                self.output.append(line)
                marker = "listening on "
                if marker in line:
                    return line.split(marker, 1)[1].split(" (", 1)[0].split(" and ")
                if time.monotonic() > deadline:
                    break
        finally:
            timer.cancel()
        self.process.wait()
        self.process.stderr.close()
        raise RuntimeError(
            f"memcommit serve {self.path} did not start (exit {self.process.returncode}): "
            + " | ".join(self.output[-10:])
        )

    def _read_rest(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            self.output.append(raw.decode("utf-8", "replace").rstrip())

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self.process.pid

    def terminate(self, timeout: float = 60.0) -> int:
        """Send SIGTERM and wait for the server to finish; return its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> int:
        """SIGKILL the server (a crash) and reap it; return its exit code."""
        if self.process.poll() is None:
            self.process.kill()
        return self.wait(30.0)

    def wait(self, timeout: float = 60.0) -> int:
        """Wait for the process to exit and return its exit code."""
        code = self.process.wait(timeout)
        self._drain.join(5)
        if self.process.stderr is not None and not self._drain.is_alive():
            self.process.stderr.close()
        return code

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            try:
                self.terminate(30.0)
            except subprocess.TimeoutExpired:
                self.kill()
