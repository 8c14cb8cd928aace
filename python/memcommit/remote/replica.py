"""A RemoteStore's local replica: a read-only log in RAM that follows the server's log.

The replica is fed with the server's raw records and checked by the same Rust code that
replays a log file.

* **Bootstrap**: a new replica starts with everything the server had committed when it
  connected, however many requests the log takes to fetch (a snapshot, then page after page
  up to the head the snapshot named; over again if the log changes generation meanwhile).
* **Catch-up**: a read first pulls the log up to the newest commit this store made
  (read-your-writes), and nothing else; :meth:`Replica.refresh` pulls what other processes
  committed, waiting for the next commit when asked to (a long poll).
* **Resync**: after a log compaction on the server (a new generation), or when the server's
  log is another store's, the replica is rebuilt from a snapshot on the next read or
  refresh. A served log is compacted or replaced only while its server is stopped, so a read
  asks the server nothing while a connection that server answered on is still open; once
  none is, it asks which log the server serves (one small request) before reading, and reads
  from the replica as it stands if the server cannot be reached.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from .. import _native, wire
from .pipeline import Headers, Pipeline, seconds_arg

__all__ = ["Replica"]

_READ_BYTES = 8 * 1024 * 1024
_WAIT_MARGIN = 15.0


class Replica:
    """The replica of one server's log, kept by a RemoteStore.

    Args:
        pipeline: The requests to the server.

    Raises:
        ServerError: The server refused the first read or could not be reached.
    """

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        self.lock = threading.RLock()
        """Held while the replica is read, moved or replaced."""
        self._want = 0
        self._want_lock = threading.Lock()
        self._resync_needed = False
        self._identity = ("", 0)
        # The server start that last answered with the replica's store and generation: while
        # a connection it answered on is open, the log cannot have been compacted or replaced.
        self._confirmed: str | None = None
        self.manifest: list[dict[str, Any]] = []
        """The server's compaction manifest, as of the replica's generation."""
        self.log = self._bootstrap()

    def note(self, headers: Headers) -> None:
        """Take in the identity headers of an answer (the log the server serves now)."""
        boot = headers.get(wire.H_BOOT)
        store, generation = headers.get(wire.H_STORE), headers.get(wire.H_GENERATION)
        if store and generation is not None:
            if (store, int(generation)) == self._identity:
                self._confirmed = boot or None
            elif self._identity[0]:
                self._resync_needed = True

    def wrote(self, lsn: int) -> None:
        """This store's commit reached `lsn`: the next read waits for the replica to have it."""
        with self._want_lock:
            if lsn > self._want:
                self._want = lsn

    def _bootstrap(self) -> _native.NativeLog:
        """Build a replica of the server's log as it is now, however many pages it takes.

        The snapshot gives the header, the first commits and the head at that instant; the
        log is then read page after page up to that head. If the server's log changes
        generation meanwhile, it starts over.
        """
        while True:
            _, headers, data = self._pipeline.request(
                "GET", f"/v1/snapshot?max_bytes={_READ_BYTES}"
            )
            identity = (str(headers[wire.H_STORE]), int(headers[wire.H_GENERATION]))
            head = int(headers[wire.H_LSN])
            replica = _native.NativeLog.replica(
                data[:64], name=f"the replica of {self._pipeline.url}"
            )
            try:
                if len(data) > 64:
                    replica.apply_raw(data[64:])
                caught_up = self._catch_up(replica, identity, head)
                if caught_up:
                    # Purges happen only in log compaction, which starts a new generation and
                    # so a new bootstrap: the manifest read here stays right for this
                    # replica's life (if its answer is of the same log).
                    _, answer, body = self._pipeline.request("GET", "/v1/manifest")
                    same = (answer.get(wire.H_STORE), answer.get(wire.H_GENERATION)) == (
                        identity[0],
                        str(identity[1]),
                    )
                    caught_up = same
            except BaseException:
                replica.close()
                raise
            if caught_up:
                break
            replica.close()
        manifest = wire.decode_value(wire.loads(body)["manifest"])
        purged = [str(i) for entry in manifest for i in entry.get("purged", ())]
        if purged:
            replica.add_purged(purged)
        self.manifest = manifest
        self._identity = identity
        self._confirmed = answer.get(wire.H_BOOT) or None
        self._resync_needed = False
        return replica

    def _catch_up(self, replica: _native.NativeLog, identity: tuple[str, int], head: int) -> bool:
        """Apply the server's log to a new replica up to `head`, page by page.

        Returns False if the server's log is no longer the one named by `identity` (or no
        longer reaches `head`): the bootstrap must start over.
        """
        store, generation = identity
        while replica.lsn < head:
            query = (
                f"/v1/log?after={replica.lsn}&store={store}&generation={generation}"
                f"&max_bytes={_READ_BYTES}"
            )
            status, _, data = self._pipeline.request("GET", query)
            if status == 409 or not data:
                return False
            replica.apply_raw(data)
        return True

    def _pull(self, target: int | None, wait: float = 0.0) -> int:
        """Apply the server's commits until the replica reaches `target` (None: the head).

        The request (a long poll when `wait`) is made without holding the replica's lock, so
        reads and :meth:`close` never wait for it; what comes back is applied only if the
        replica is still where it was when asked. Returns how many records this call applied
        (after a resync: how many the new replica holds).
        """
        applied = 0
        while True:
            with self.lock:
                self._pipeline.check_open()
                if self._resync_needed:
                    applied = self._resync()
                native = self.log
                after = native.lsn
                if target is not None and after >= target:
                    return applied
                store, generation = self._identity
            query = (
                f"/v1/log?after={after}&store={store}&generation={generation}"
                f"&max_bytes={_READ_BYTES}&wait={wait:g}"
            )
            status, headers, data = self._pipeline.request(
                "GET", query, timeout=(wait + _WAIT_MARGIN) if wait else None
            )
            wait = 0.0
            with self.lock:
                self._pipeline.check_open()
                if status == 409:
                    applied = self._resync()
                    continue
                if self.log is not native or native.lsn != after:
                    continue  # another thread moved the replica meanwhile: ask again
                if data:
                    before = int(native.info()["records"])
                    native.apply_raw(data)
                    applied += int(native.info()["records"]) - before
            head = int(headers.get(wire.H_LSN, "0"))
            if not data and (target is None or target > head):
                if target is not None and target > head:
                    self._lost(target, head)
                return applied
            if target is None and native.lsn >= head:
                return applied

    def _lost(self, target: int, head: int) -> None:
        """The server's log ends before this store's own acknowledged commits."""
        with self._want_lock:
            self._want = head
        url = self._pipeline.url
        raise wire.ServerError(
            f"{url}: the server's log ends at LSN {head}, but this store's commits reached "
            f"LSN {target}: the server lost acknowledged commits (was its log restored from an "
            "older copy?); the replica now follows the server's log as it is",
            url=url,
            code="lost_commits",
        )

    def _resync(self) -> int:
        """Rebuild the replica from scratch (a new generation, or another store's log).

        Returns how many records the new replica holds.
        """
        with self.lock:
            store_id = self._identity[0]
            replica = self._bootstrap()
            if self._identity[0] != store_id:
                with self._want_lock:
                    self._want = 0  # this store's commits were to another log
            # The old replica is not closed here: reads other threads are making on it end on
            # the log they began on, and it goes when the last of them lets go of it.
            self.log = replica
            return int(replica.info()["records"])

    def fresh(self) -> None:
        """Before a read: make sure the replica is of the server's log, with our own commits.

        The replica's log is still the server's as long as a connection the server answered
        on (with this log's store and generation) is open: a log is compacted or replaced
        only while its server is stopped, and a stopped server's connections are closed.
        Otherwise one request asks the server which log it serves; a new generation or
        another store's log rebuilds the replica before the read. If the server cannot be
        reached, the read is served from the replica as it stands.
        """
        self._pipeline.check_open()
        if not self._resync_needed and not self._pipeline.http.hears(self._confirmed):
            self._probe()
        if self._resync_needed or self.log.lsn < self._want:
            self._pull(self._want)

    def _probe(self) -> None:
        """Ask the server once which log it serves (its answer's headers say); never wait."""
        # The server away: the replica is the best this store knows.
        self._pipeline.ask_once("GET", "/v1/info")

    def refresh(self, wait: float = 0.0) -> int:
        """Pull the server's new commits, as :meth:`memcommit.RemoteStore.refresh` documents."""
        self._pipeline.check_open()
        return self._pull(None, seconds_arg(wait, "wait"))

    def follow(self) -> None:
        """Pull commits as they happen until the pipeline closes (a follower thread's loop)."""
        delay = 0.1
        while not self._pipeline.closed:
            try:
                self.refresh(wait=30.0)
                delay = 0.1
            except Exception:  # the server is away: keep trying until closed
                if self._pipeline.closed:
                    return
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
