"""Search by meaning and by words: what a search returns and how a query is made.

:meth:`memcommit.MemoryStore.search` ranks memories against a query in the Rust core:

* ``mode="vector"``: cosine similarity of the memories' vectors (given per put as
  ``vector=``, or computed by the store's embedder) to the query's vector, by an exact scan
  with SIMD kernels;
* ``mode="text"``: BM25 (k1 = 1.2, b = 0.75) over the memories' texts, split at Unicode word
  boundaries and lowercased (each CJK ideograph is a word of its own);
* ``mode="hybrid"`` (the default): both rankings fused by reciprocal rank: a memory ranked
  ``r`` (from 1) by a ranking scores ``1 / (60 + r)`` from it, summed over the two, each
  ranking its best ``max(4 k, 100)`` matches first. A query with no vector (a string, and the
  store has no embedder, or its embedder gives the string a vector of zeros) is ranked by
  text alone, and a query given as a vector by vectors alone.

The filters (`kind`, `tier`, `task`, `status`, `tags`) are tested on each candidate as it is
scored, so `k` memories come back whenever `k` match; a stale memory (unless asked for), one
moved out of the tier asked for, or one purged is never returned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple, cast

from ._native import Memory
from .errors import InvalidType, InvalidValue

__all__ = ["Embedder", "SearchHit", "SearchMode", "embed_one", "query_parts"]

SearchMode = Literal["hybrid", "vector", "text"]
"""How :meth:`~memcommit.MemoryStore.search` ranks."""

Embedder = Callable[[list[str]], Sequence[Sequence[float]]]
"""An embedder: takes a list of texts, returns one vector per text, in order."""

_MODES = ("hybrid", "vector", "text")


class SearchHit(NamedTuple):
    """One memory a search found, with its score (higher is better).

    The score is the cosine similarity (``mode="vector"``), the BM25 score (``"text"``) or the
    fused reciprocal-rank score (``"hybrid"``). A hit unpacks as ``memory, score``, and reads
    the memory's attributes through: ``hit.id``, ``hit.text``, ``hit.kind`` and the rest are
    the memory's.
    """

    memory: Memory
    score: float

    @property
    def id(self) -> str:
        """The memory's id."""
        return self.memory.id

    @property
    def text(self) -> str:
        """The memory's text."""
        return self.memory.text

    def __getattr__(self, name: str) -> Any:
        # Anything else a Memory has (kind, tier, data, tags, vector, ...).
        return getattr(self.memory, name)


def embed_one(embed: Embedder, text: str) -> list[float]:
    """The vector `embed` gives one text.

    Raises:
        ValueError: The embedder did not return one vector.
    """
    out = embed([text])
    if len(out) != 1:
        raise InvalidValue(f"embed: the embedder returned {len(out)} vectors for 1 text")
    return list(out[0])


def query_parts(
    query: object, mode: str, embed: Embedder | None
) -> tuple[str | None, Sequence[float] | None]:
    """The words and the vector a search ranks by, from its `query` and `mode`.

    A string is the words, and also (through `embed`, when the store has one and the mode
    ranks vectors) the vector; a sequence of numbers is the vector.

    Raises:
        TypeError: `query` is neither a string nor a sequence of numbers.
        ValueError: `mode` is not a mode, or ``mode="vector"`` with a string and no embedder,
            or ``mode="text"`` with a vector.
    """
    if mode not in _MODES:
        raise InvalidValue(f"mode: {mode!r} is not a mode; use 'hybrid', 'vector' or 'text'")
    if isinstance(query, str):
        if mode == "text" or embed is None:
            if mode == "vector":
                raise InvalidValue(
                    "query: mode='vector' with a string needs an embedder: open the store "
                    "with memcommit.open(path, embed=fn), or pass the query's vector"
                )
            return query, None
        vector = embed_one(embed, query)
        if mode == "hybrid" and all(x == 0 for x in vector):
            # The embedder found nothing in it to place (a word it does not know): a vector
            # of zeros has no direction, so the words alone rank, as with no embedder.
            return query, None
        return query, vector
    if isinstance(query, (bytes, bytearray)) or not hasattr(query, "__iter__"):
        raise InvalidType(
            f"query must be a str or a sequence of numbers, not {type(query).__name__}"
        )
    if mode == "text":
        raise InvalidValue("query: mode='text' ranks by words; give the query as a string")
    # The core reads the numbers in one pass and names any that is not one (query[i]).
    return None, cast("Sequence[float]", query)
