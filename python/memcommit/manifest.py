"""The compaction manifest: what log compaction did, kept beside the log.

``<log>.manifest`` is a JSON object ``{"store_id": ..., "entries": [...]}``, one entry per
log compaction: its time, horizon, record and byte counts, the ids retention purged, and the old
log's chain (generation, last LSN, final hash and its seals), so a later reference to a purged
memory is known to be deliberate and an old seal can be recognised as superseded.
``memcommit import`` of an export that lists purged ids adds one entry of another shape for
them: ``generation``, ``at``, ``imported_from`` (the file) and ``purged``, no counts or chain.

The manifest is replaced whole, durably (temp file, fsync, rename, fsync of the directory),
and before the compacted log replaces the old one. A crash between the two, or a compaction
abandoned after the manifest's rename (its directory's fsync failed), leaves an entry for a
generation the log does not have; the writer's next open drops it (the old log is still
whole), and so does the next compaction, which writes its entry after those of the
generations the log has reached (:func:`reconcile`), so the manifest and the log always agree.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import InvalidValue
from .files import replace_durably

__all__ = ["ManifestEntry", "manifest_path", "read_manifest", "reconcile", "write_manifest"]

ManifestEntry = dict[str, Any]
"""One compaction: ``generation``, ``at``, ``horizon``, ``before``, ``after``,
``bytes_before``, ``bytes_after``, ``purged`` and ``old_chain``; or an import's purged ids:
``generation``, ``at``, ``imported_from`` and ``purged``."""


def manifest_path(log_path: str) -> str:
    """Where the manifest of the log at `log_path` lives."""
    return log_path + ".manifest"


def read_manifest(log_path: str, store_id: str | None) -> list[ManifestEntry]:
    """Return the manifest's entries, oldest first ([] when there is none).

    `store_id` is the log's: a manifest of another store (copied beside this log, say) would
    mark its purged ids here and vouch for its seals, so it is refused. None skips the check
    (a caller that has not opened the log).

    Raises:
        ValueError: The manifest is not valid JSON of the expected shape, or is another
            store's (names the file).
    """
    path = manifest_path(log_path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return []
    except json.JSONDecodeError as e:
        raise InvalidValue(f"{path}: the compaction manifest is not valid JSON ({e})") from None
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise InvalidValue(f"{path}: the compaction manifest has no list of entries")
    if store_id is not None and data.get("store_id") != store_id:
        raise InvalidValue(
            f"{path}: the compaction manifest is of store {data.get('store_id')!r}, not of the "
            f"log's store {store_id!r}; move it away (it is not this log's) and open again"
        )
    return entries


def write_manifest(log_path: str, store_id: str, entries: list[ManifestEntry]) -> None:
    """Replace the manifest durably: temp file, fsync, rename, fsync the directory.

    The temp file is named like the log's own temp files (``<log>.tmp-manifest``), which a
    writer's open removes if a crash left one behind.
    """
    data = json.dumps({"store_id": store_id, "entries": entries}, indent=1, sort_keys=True)
    replace_durably(manifest_path(log_path), log_path + ".tmp-manifest", data.encode("utf-8"))


def reconcile(log_path: str, store_id: str, generation: int, *, write: bool) -> list[ManifestEntry]:
    """Return the entries that belong to the log as it is, dropping later ones.

    An entry for a generation above the log's is a compaction that crashed before its log
    replaced the old one. With `write` (a writer's open) the manifest is rewritten without it.
    """
    entries = read_manifest(log_path, store_id)
    kept = [e for e in entries if int(e.get("generation", 0)) <= generation]
    if write and len(kept) != len(entries):
        write_manifest(log_path, store_id, kept)
    return kept
