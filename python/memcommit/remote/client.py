"""RemoteStore: the store API on a remote engine, with commits run by the server.

What a read sees and when is the replica's (:mod:`.replica`); how requests travel, the
pipelining and the resends, the pipeline's (:mod:`.pipeline`); the engine that joins them,
:mod:`.engine`. See :mod:`memcommit.remote`.
"""

from __future__ import annotations

from ..search import Embedder
from ..store import MemoryStore
from .commit import RemoteCommit
from .engine import RemoteEngine
from .pipeline import Pipeline

__all__ = ["RemoteCommit", "RemoteStore"]


class RemoteStore(MemoryStore):
    """A store served by ``memcommit serve``: commits on the server, reads from a replica.

    A :class:`~memcommit.MemoryStore` on a :class:`~memcommit.remote.engine.RemoteEngine`.
    See :mod:`memcommit.remote` for what reads see and when. Its commits are
    :class:`RemoteCommit` objects, with the methods of :class:`~memcommit.Commit`. The roles
    (``runs``, ``locks``...) run on the server, every call of them (reads included), under the
    server's one roles lock; their errors arrive as the same classes. What the server keeps
    to itself (its log file: snapshots, log compaction, auto-sealing) raises
    :class:`~memcommit.NotSupported`.

    Args:
        url: The server, e.g. ``"http://127.0.0.1:7411"`` (``https://`` for TLS), or its Unix
            socket on this host, ``"unix:///run/memcommit.sock"`` (``memcommit serve
            --socket``).
        token: The server's bearer token, if it has one.
        timeout: Seconds to wait for an answer to one request.
        retry_seconds: How long to keep resending when the server cannot be reached (it is
            restarting, say) before raising :class:`~memcommit.wire.ServerUnavailable`.
        ca_file: A PEM file of the certificate authority (or self-signed certificate) to
            trust for ``https://``; the system's by default.
        follow: Keep a thread pulling commits as they happen, so reads stay current without
            calling :meth:`refresh`.
        max_in_flight: Requests this store keeps in flight at once. With 1, the default, the
            commits its threads make while a request is in flight go together in the next
            one: the fewest requests, so the least CPU a commit on both sides (the server's
            group commit already overlaps many clients). More may shorten a commit's wait
            where the round trip to the server is long against its fsync.
        embed: An embedder (see :func:`memcommit.open`): this client embeds its puts' texts
            before a commit is sent, and :meth:`search` runs on the replica.

    Raises:
        InvalidValue: A malformed argument, named: `url` (its port too), or a `ca_file` that
            cannot be read or holds no PEM certificate.
        ServerError: The server refused (401: no token sent, or not the server's) or could
            not be reached (:class:`~memcommit.wire.ServerUnavailable`; at once if its TLS
            certificate is not trusted: pass `ca_file`).

    Example:
        >>> store = RemoteStore("http://127.0.0.1:7411")  # doctest: +SKIP
        >>> with store.commit() as c:  # doctest: +SKIP
        ...     fact = c.put("User prefers dark mode", kind="fact")
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        retry_seconds: float = 10.0,
        ca_file: str | None = None,
        follow: bool = False,
        max_in_flight: int = 1,
        embed: Embedder | None = None,
    ) -> None:
        pipeline = Pipeline(
            url,
            token,
            timeout=timeout,
            retry_seconds=retry_seconds,
            ca_file=ca_file,
            max_in_flight=max_in_flight,
        )
        self._remote = RemoteEngine(pipeline, follow=follow)
        try:
            super().__init__(self._remote, clock=self._remote.clock, embed=embed)
        except BaseException:
            pipeline.close()
            raise

    @property
    def url(self) -> str:
        """The server's URL."""
        return self._remote.url
