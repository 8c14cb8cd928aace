"""Lineage: what a memory was derived from, and what was derived from it.

A memory's `sources` name the memories it was made from: the traces a summary folds, the
summaries a merge joins, what a user or an extractor cited. Memory compaction archives the
originals but never deletes them, so these links always lead somewhere: from a long-term
memory back to every trace it came from, and from a trace (say, one found to be wrong or
poisoned) forward to everything that repeats it.

Example:
    >>> import memcommit
    >>> from memcommit.lineage import descendants, lineage
    >>> store = memcommit.open(":memory:")
    >>> t = store.put("The API key expired on May 2.", kind="trace", task="ops")
    >>> s = store.put("Rotated the expired API key.", kind="summary", sources=(t,))
    >>> [m.id for m in lineage(store, s)] == [t]
    True
    >>> [m.id for m in descendants(store, t)] == [s]
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._native import Memory
from .commit import check_id
from .errors import InvalidValue

if TYPE_CHECKING:
    from .store import MemoryStore

__all__ = ["descendants", "lineage"]


def lineage(store: MemoryStore, id: str) -> list[Memory]:
    """Every memory `id` was derived from, following `sources` recursively.

    Archived and stale memories are included: they are the record of where a memory came
    from. Sources the store does not have (one retention purged during log compaction, or,
    in a log written before sources were checked, one never written) are left out.

    Args:
        store: The store to read.
        id: The memory whose origins to list.

    Returns:
        The memories, breadth first (its direct sources first, in the order it names them),
        each once, without the memory `id` itself.

    Raises:
        TypeError: `id` is not a str.
        ValueError: `id` is empty, or the store has no memory `id`.
    """
    start = _get(store, id)
    seen = {id}
    found: list[Memory] = []
    frontier = [s for s in start.sources if s not in seen]
    while frontier:
        ids = list(dict.fromkeys(frontier))
        seen.update(ids)
        frontier = []
        for m in store.engine.get_many(ids):  # None for a purged id: no Purged raised
            if m is not None:
                found.append(m)
                frontier.extend(s for s in m.sources if s not in seen)
    return found


def descendants(store: MemoryStore, id: str) -> list[Memory]:
    """Every memory derived from `id`, following `sources` backwards, recursively.

    Every tier and status is searched, the archive included. This reads every memory of the
    store once (there is no index from a source to what cites it), so its cost grows with
    the store.

    Args:
        store: The store to read.
        id: The memory whose derivations to list.

    Returns:
        The memories, breadth first (those citing `id` directly first, oldest first), each
        once, without the memory `id` itself.

    Raises:
        TypeError: `id` is not a str.
        ValueError: `id` is empty, or the store has no memory `id`.
    """
    _get(store, id)
    cited_by: dict[str, list[Memory]] = {}
    for m in store.find(status=None):
        for s in m.sources:
            cited_by.setdefault(s, []).append(m)
    seen = {id}
    found: list[Memory] = []
    frontier = [id]
    while frontier:
        nxt: list[str] = []
        for source in frontier:
            for m in cited_by.get(source, ()):
                if m.id not in seen:
                    seen.add(m.id)
                    found.append(m)
                    nxt.append(m.id)
        frontier = nxt
    return found


def _get(store: MemoryStore, id: str) -> Memory:
    m = store.get(check_id(id))
    if m is None:
        raise InvalidValue(f"id: the store has no memory {id!r}")
    return m
