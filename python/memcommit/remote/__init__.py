"""RemoteStore: the whole store API over a :class:`~memcommit.server.MemoryServer`.

Commits and role calls go to the server, which runs every one of them (so guards and the
roles' compare-and-set hold across processes); memory reads are served from a **local
replica**: a read-only log in RAM fed with the server's raw records and checked by the same
Rust code that replays a log file.

* A new store starts with everything the server had committed when it connected (however
  many requests the log takes to fetch).
* Your own commits are visible to your next read: a read first pulls the log up to the
  newest commit this store made (read-your-writes), and nothing else.
* :meth:`RemoteStore.refresh` pulls what other processes committed; ``refresh(wait=5)``
  waits up to five seconds for the next commit when there is none (a long poll), and
  ``RemoteStore(url, follow=True)`` keeps a thread doing that, so reads stay current.
* A refused commit raises :class:`~memcommit.Rejected` with the server's reason; a role error
  arrives as the same class the server raised, with its fields.
* After a log compaction on the server (a new generation), or when the server's log is
  another store's, the replica is rebuilt from a snapshot on the next read or refresh. A
  served log is compacted or replaced only while its server is stopped, so a read asks the
  server nothing while a connection that server answered on is still open; once none is, it
  asks which log the server serves (one small request) before reading, and reads from the
  replica as it stands if the server cannot be reached.
* Commits from many threads of one process are pipelined: the ones queued together travel in
  one request, and the server fsyncs them together.
* A commit whose answer is lost (a reset connection, a timeout) is resent with the same
  commit id and is not applied twice; if the server restarted meanwhile, the outcome cannot
  be known and :class:`~memcommit.wire.CommitOutcomeUnknown` is raised instead.

The package, one idea a module: :mod:`.client` (:class:`RemoteStore`, the store on a
remote engine), :mod:`.engine` (the remote engine: reads from the replica, writes to the
server), :mod:`.commit` (:class:`RemoteCommit`), :mod:`.pipeline` (connections, retries,
pipelined commits and resends), :mod:`.replica` (bootstrap, catch-up, resync) and
:mod:`.roles` (role calls forwarded to the server).

Example:
    >>> import memcommit
    >>> store = memcommit.RemoteStore("http://127.0.0.1:7411")  # doctest: +SKIP
    >>> mid = store.put("User prefers dark mode", kind="fact")  # doctest: +SKIP
    >>> store.get(mid).text  # doctest: +SKIP
    'User prefers dark mode'
"""

from __future__ import annotations

from .client import RemoteCommit, RemoteStore

__all__ = ["RemoteCommit", "RemoteStore"]
