"""Writing a reference the writer refuses: how a log comes to hold one it should not."""

from __future__ import annotations

from typing import Any

import memcommit


def put_unchecked(store: memcommit.MemoryStore, text: str, **fields: Any) -> str:
    """Put `text` without the writer checking its ``sources``, as an import's puts are not.

    A `sources` entry naming an id the store never held gets into a log this way (an edited
    dump imported), and ``verify`` then reports it as forged.
    """
    log = store.engine.view()
    log.trust_sources(True)
    try:
        return store.put(text, **fields)
    finally:
        log.trust_sources(False)
