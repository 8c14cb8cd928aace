"""A throwaway PostgreSQL server, for tests of stores in PostgreSQL.

:class:`PostgresCluster` makes a new cluster with the machine's own PostgreSQL (``initdb``
and ``pg_ctl`` from ``/usr/lib/postgresql/*/bin``, or ``$PATH``), starts it on a free port on
127.0.0.1 with its Unix socket in the cluster's directory, and stops and deletes it on exit.
Run as root, it runs the server as the ``postgres`` user (``initdb`` refuses root). With
``MEMCOMMIT_PG_DSN`` set, that server is used instead and nothing is started.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from types import TracebackType

__all__ = ["PostgresCluster", "postgres_binaries"]


def postgres_binaries() -> str | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (the newest version), or None."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: [int(x) for x in p.split("/")[-2].split(".") if x.isdigit()],
    )
    for directory in reversed(found):
        if os.path.exists(os.path.join(directory, "initdb")):
            return directory
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresCluster:
    """A PostgreSQL server for the length of a ``with`` block; :attr:`dsn` reaches it.

    Args:
        listen: The addresses the server listens on (127.0.0.1 always).
        allow: Networks (CIDR) whose clients may connect without a password, beside loopback.
        primary: Start as a hot standby of this (running) cluster, copied with
            ``pg_basebackup``, instead of a new cluster.

    Raises:
        RuntimeError: No PostgreSQL binaries, or the server did not start (its log is in the
            message).
    """

    def __init__(
        self,
        *,
        listen: tuple[str, ...] = (),
        allow: tuple[str, ...] = (),
        primary: PostgresCluster | None = None,
    ) -> None:
        self.dsn = "" if primary is not None else os.environ.get("MEMCOMMIT_PG_DSN", "")
        self.port = 0
        self._listen = ("127.0.0.1", *listen)
        self._allow = allow
        self._primary = primary
        self._dir: str | None = None
        self._bin = ""
        self._as: list[str] = []

    def __enter__(self) -> PostgresCluster:
        if self.dsn:
            return self
        binaries = postgres_binaries()
        if binaries is None:
            raise RuntimeError("no PostgreSQL server here (initdb not found); set MEMCOMMIT_PG_DSN")
        self._bin = binaries
        self._dir = tempfile.mkdtemp(prefix="memcommit-pg-")
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self._dir, "postgres")
        data = os.path.join(self._dir, "data")
        port = self.port = _free_port()
        if self._primary is None:
            self._run(
                "initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
                "--locale=C.UTF-8", "--no-sync",
            )  # fmt: skip
            with open(os.path.join(data, "pg_hba.conf"), "a") as hba:
                hba.write("host replication all 127.0.0.1/32 trust\n")
                for network in self._allow:
                    hba.write(f"host all all {network} trust\n")
        else:
            self._run(
                "pg_basebackup", "-d", self._primary.dsn, "-D", data, "-R", "-X", "stream",
                "--no-sync",
            )  # fmt: skip
        options = (
            f"-c listen_addresses={','.join(self._listen)} -p {port} "
            f"-c unix_socket_directories={self._dir} -c max_connections=200 -c fsync=on "
            "-c hot_standby=on"
        )
        try:
            self._run(
                "pg_ctl",
                "-D",
                data,
                "-l",
                os.path.join(self._dir, "server.log"),
                "-w",
                "-o",
                options,
                "start",
            )
        except RuntimeError:
            self._remove()
            raise
        self.dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        return self

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [*self._as, os.path.join(self._bin, tool), *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            log = ""
            if self._dir is not None:
                try:
                    with open(os.path.join(self._dir, "server.log")) as f:
                        log = f.read()[-2000:]
                except OSError:
                    pass
            raise RuntimeError(f"{tool} failed: {done.stderr.strip()} {log}".strip())

    def url(self, host: str = "127.0.0.1") -> str:
        """The server's URL through `host` (one of the addresses it listens on)."""
        return self.dsn.replace("127.0.0.1", host, 1)

    def restart(self) -> None:
        """Restart the server at once (``pg_ctl restart -m immediate``: a crash, then recovery)."""
        assert self._dir is not None, "a server given by MEMCOMMIT_PG_DSN is not restarted"
        self._run(
            "pg_ctl",
            "-D",
            os.path.join(self._dir, "data"),
            "-m",
            "immediate",
            "-w",
            "-l",
            os.path.join(self._dir, "server.log"),
            "restart",
        )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._dir is None:
            return
        try:
            self._run("pg_ctl", "-D", os.path.join(self._dir, "data"), "-m", "fast", "-w", "stop")
        finally:
            self._remove()

    def _remove(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
