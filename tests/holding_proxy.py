"""A loopback HTTP proxy in front of a server, which records the commit requests it passes,
holds the ones a test picks until the test releases them, and loses the answers a test
picks: to see what a client sends, and what it does while an answer is late or lost,
whatever the client is made of."""

from __future__ import annotations

import http.client
import socket
import threading
import urllib.parse
from collections.abc import Callable

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class HoldingProxy:
    """Listens on a free loopback port (:attr:`url`) and passes each request to `upstream`.

    Args:
        upstream: The server's ``http://`` URL.
        hold: Called with each ``POST /v1/commit`` body; true holds that request until
            :meth:`release`.
        lose: Called with each ``POST /v1/commit`` body; true passes that request on, then
            closes the client's connection instead of answering (the answer is lost).
    """

    def __init__(
        self,
        upstream: str,
        hold: Callable[[bytes], bool] = lambda body: False,
        lose: Callable[[bytes], bool] = lambda body: False,
    ) -> None:
        parts = urllib.parse.urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._hold = hold
        self._lose = lose
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.bodies: list[bytes] = []
        """Every commit request's body, in the order they arrived."""
        self.held: list[bytes] = []
        """The bodies of the commit requests held now."""
        self._gates: list[threading.Event] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def release(self) -> None:
        """Let every request held now go on (a request held later waits for the next call)."""
        with self._lock:
            gates, self._gates = self._gates, []
            self.held.clear()
        for gate in gates:
            gate.set()

    def close(self) -> None:
        """Stop accepting and release whatever is held."""
        self._closed = True
        self.release()
        self._listener.close()

    def __enter__(self) -> HoldingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        upstream = http.client.HTTPConnection(*self._upstream, timeout=60)
        reader = conn.makefile("rb")
        try:
            while True:
                line = reader.readline()
                if not line:
                    return
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers: list[tuple[str, str]] = []
                length = 0
                while (header := reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, value = header.decode("latin-1").split(":", 1)
                    headers.append((name.strip(), value.strip()))
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = reader.read(length) if length else b""
                commit = method == "POST" and path.endswith("/v1/commit")
                if commit:
                    self._pass(body)
                upstream.request(
                    method,
                    path,
                    body if length else None,
                    {n: v for n, v in headers if n.lower() not in _HOP},
                )
                answer = upstream.getresponse()
                data = answer.read()
                if commit and self._lose(body):
                    return
                head = [f"HTTP/1.1 {answer.status} {answer.reason}\r\n"]
                head += [f"{n}: {v}\r\n" for n, v in answer.getheaders() if n.lower() not in _HOP]
                head.append(f"Content-Length: {len(data)}\r\n\r\n")
                conn.sendall("".join(head).encode("latin-1") + data)
        except OSError:
            return
        finally:
            reader.close()
            conn.close()
            upstream.close()

    def _pass(self, body: bytes) -> None:
        gate = None
        with self._lock:
            self.bodies.append(body)
            if self._hold(body) and not self._closed:
                gate = threading.Event()
                self._gates.append(gate)
                self.held.append(body)
        if gate is not None:
            gate.wait(60)
