"""Hosts for tests and benches: network namespaces on this machine, and a database among them.

Each host is a network namespace (``ip netns``) joined to the database's by a veth pair on a
bridge, with its own address; its clients are processes started in it (``ip netns exec``), so
they reach the database over a network that can be cut. The database (a throwaway cluster of
the machine's PostgreSQL) listens on the bridge. Needs root and iproute2: :func:`available`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from .postgres import PostgresCluster, postgres_binaries

__all__ = ["HOSTS", "SUBNET", "Hosts", "available"]

SUBNET = "10.77.0"
HOSTS = 3


def available() -> bool:
    """Whether hosts can be made here (root, iproute2 and PostgreSQL's binaries)."""
    return os.geteuid() == 0 and shutil.which("ip") is not None and postgres_binaries() is not None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Hosts:
    """`count` namespaces on a bridge, and a database listening on the bridge."""

    def __init__(self, count: int = HOSTS) -> None:
        tag = f"{os.getpid() % 10000}"
        self.bridge = f"mcbr{tag}"
        self.names = [f"mch{tag}-{i}" for i in range(count)]
        self.links = [f"mcv{tag}{i}" for i in range(count)]
        self.db: PostgresCluster | None = None

    def __enter__(self) -> Hosts:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{SUBNET}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i, (name, link) in enumerate(zip(self.names, self.links, strict=True)):
            _ip("netns", "add", name)
            _ip("link", "add", link, "type", "veth", "peer", "name", f"{link}p")
            _ip("link", "set", f"{link}p", "netns", name)
            _ip("link", "set", link, "master", self.bridge)
            _ip("link", "set", link, "up")
            _ip("netns", "exec", name, "ip", "addr", "add", f"{SUBNET}.{10 + i}/24", "dev",
                f"{link}p")  # fmt: skip
            _ip("netns", "exec", name, "ip", "link", "set", f"{link}p", "up")
            _ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
        self.db = PostgresCluster(listen=(f"{SUBNET}.1",), allow=(f"{SUBNET}.0/24",))
        self.db.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.db is not None:
            self.db.__exit__(None, None, None)
        for name, link in zip(self.names, self.links, strict=True):
            subprocess.run(["ip", "link", "del", link], capture_output=True, check=False)
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, check=False)

    def url(self, store: str, **params: str) -> str:
        """The store's URL as the hosts reach it (through the bridge)."""
        assert self.db is not None
        extra = "".join(f"&{k}={v}" for k, v in params.items())
        return f"{self.db.url(f'{SUBNET}.1')}?store={store}{extra}"

    def start(self, host: int, script: str, *args: str) -> subprocess.Popen[str]:
        """Run `script` (Python) in host `host`'s namespace."""
        return subprocess.Popen(
            ["ip", "netns", "exec", self.names[host], sys.executable, "-c", script, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def cut(self, host: int, up: bool) -> None:
        """Take host `host`'s link down (or up again)."""
        _ip("link", "set", self.links[host], "up" if up else "down")
