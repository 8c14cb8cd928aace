"""RemoteCommit: a commit whose operations are checked here and run by the server.

It is a :class:`~memcommit.deferred.DeferredCommit` whose engine's ``run_commit`` sends the
operations to the server (:class:`~memcommit.remote.engine.RemoteEngine`).
"""

from __future__ import annotations

from ..deferred import DeferredCommit

__all__ = ["RemoteCommit"]

RemoteCommit = DeferredCommit
