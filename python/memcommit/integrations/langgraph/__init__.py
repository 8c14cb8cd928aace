"""LangGraph on memcommit: a checkpointer and a long-term store over one store's log.

Install with ``pip install memcommit[langgraph]``. Both classes keep their data as entities of
the store's log (the medium every agent-runtime role uses, see :mod:`memcommit.roles.medium`),
so a graph's checkpoints, pending writes and long-term memory are commits like any other:
durable as the store's durability mode says, sealed, compacted and replayed at open.

* :class:`MemcommitSaver`: a ``BaseCheckpointSaver`` (sync and async; pending writes, ``list``
  with filters and ``before``, ``delete_thread``, ``delete_for_runs``, ``copy_thread``,
  ``prune``).
* :class:`MemcommitStore`: a ``BaseStore`` (namespaces, put/get/search/delete,
  ``list_namespaces``, TTL), and semantic search with ``index={"embed": ..., "dims": ...,
  "fields": [...]}``, ranked by the store's vector search.

Example:
    >>> import memcommit
    >>> from memcommit.integrations.langgraph import MemcommitSaver, MemcommitStore
    >>> store = memcommit.open(":memory:")
    >>> saver = MemcommitSaver(store)
    >>> long_term = MemcommitStore(store)
    >>> long_term.put(("users", "u1"), "prefs", {"theme": "dark"})
    >>> long_term.get(("users", "u1"), "prefs").value
    {'theme': 'dark'}
"""

from __future__ import annotations

from ..._extras import require

require("langgraph")  # before the imports below need it: an error naming the extra

from .saver import MemcommitSaver  # noqa: E402
from .store import MemcommitStore  # noqa: E402

__all__ = ["MemcommitSaver", "MemcommitStore"]
