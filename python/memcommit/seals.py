"""Seals: tamper evidence for a log, from the blake3 hash chain over its records.

The chain starts from the log's header (its store id and generation) and takes in every
record's exact bytes in order, so its value at an LSN stands for everything before it. A seal
writes that value into the log itself; :func:`verify` recomputes the chain from the first
record and checks every seal (every link, not only the ends), and :func:`check_seal` rechecks
only the newest seal, from the one before it. A keyed seal (``key=``) carries a blake3 keyed
hash of the chain: only the key's holder can make one that checks, or check it.

An anchor is a seal kept somewhere else (``seal.to_json()``): ``verify(store, anchors=[...])``
checks that the log still holds it, which catches a rewrite of the whole file (seals
included) or a rollback to an earlier copy.

A store in RAM (``":memory:"``) keeps the same log, hash chain and seal records in memory, so
everything here works on it too (to check in a test that the chain holds, say); nothing of it
outlives the process.

Example:
    >>> import memcommit
    >>> from memcommit.seals import seal, verify
    >>> store = memcommit.open(":memory:")
    >>> _ = store.put("User prefers dark mode", kind="fact")
    >>> s = seal(store)
    >>> verify(store).ok
    True
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, cast

from .clock import parse_iso
from .commit import check_u64
from .errors import InvalidType, InvalidValue, SealMismatch

if TYPE_CHECKING:
    from .store import MemoryStore

__all__ = ["AutoSeal", "Seal", "VerifyReport", "check_seal", "seal", "verify"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

# What the native layer returns for a seal: (lsn, record_lsn, offset, at_us, keyed, hash, chain).
_SealTuple = tuple[int, int, int, int, bool, str, str]


@dataclass(frozen=True)
class Seal:
    """A seal: the hash chain over a log up to ``lsn``.

    Attributes:
        lsn: The last LSN the seal covers.
        hash: The chain value there (hex), or for a keyed seal its keyed hash.
        at: When the seal was written (the store's clock).
        keyed: Whether the seal carries a keyed hash.
        record_lsn: LSN of the seal's own record.
        store_id: The store it belongs to.
        generation: The log generation it belongs to (log compaction starts a new one).
    """

    lsn: int
    hash: str
    at: datetime
    keyed: bool
    record_lsn: int
    store_id: str
    generation: int

    def to_json(self) -> str:
        """This seal as a JSON object, to keep outside the log as an anchor."""
        return json.dumps(
            {
                "memcommit_seal": 1,
                "store_id": self.store_id,
                "generation": self.generation,
                "lsn": self.lsn,
                "record_lsn": self.record_lsn,
                "hash": self.hash,
                "keyed": self.keyed,
                "at": self.at.isoformat(),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | bytes | dict[str, Any]) -> Seal:
        """Read a seal written by :meth:`to_json` (a JSON string, bytes or a parsed dict).

        Raises:
            ValueError: The text is not a seal.
        """
        try:
            d = json.loads(text) if isinstance(text, (str, bytes)) else dict(text)
            if not isinstance(d, dict):
                raise InvalidValue(f"expected a JSON object, got {type(d).__name__}")
            if d.get("memcommit_seal") != 1:
                raise InvalidValue("it has no memcommit_seal: 1 field")
            return cls(
                lsn=_int(d["lsn"], "lsn"),
                hash=_hex64(d["hash"]),
                at=parse_iso(str(d["at"])),
                keyed=bool(d["keyed"]),
                record_lsn=_int(d["record_lsn"], "record_lsn"),
                store_id=str(d["store_id"]),
                generation=_int(d["generation"], "generation"),
            )
        except (KeyError, TypeError, json.JSONDecodeError, ValueError) as e:
            raise InvalidValue(f"anchor: not a memcommit seal ({e})") from None


def _int(v: object, field: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InvalidValue(f"{field} must be a non-negative int, not {v!r}")
    return v


def _hex64(v: object) -> str:
    if not isinstance(v, str) or len(v) != 64 or any(c not in "0123456789abcdef" for c in v):
        raise InvalidValue(f"hash must be 64 lower-case hex digits, not {v!r}")
    return v


@dataclass(frozen=True)
class VerifyReport:
    """What :func:`verify` or :func:`check_seal` went over. Failures raise instead.

    Attributes:
        ok: True (a check that fails raises :class:`~memcommit.IntegrityError`).
        seals_checked: Seals whose chain value (and keyed hash) matched.
        records_checked: Records whose bytes were hashed.
        bytes_checked: Bytes hashed.
        keyed_unchecked: Keyed seals whose chain matched but whose keyed hash could not be
            checked because no key was given.
        anchors_checked: Anchors checked (found in the log, or superseded).
        superseded: Anchors from an earlier log generation that the compaction manifest holds:
            compaction replaced them by design, so they are not failures.
        lsn: The last LSN checked.
        chain: The chain value there (hex).
        seal: For :func:`check_seal`, the seal it rechecked.
    """

    ok: bool
    seals_checked: int
    records_checked: int
    bytes_checked: int
    keyed_unchecked: int = 0
    anchors_checked: int = 0
    superseded: int = 0
    lsn: int = 0
    chain: str = ""
    seal: Seal | None = None


def _key(key: bytes | str | None) -> bytes | None:
    if key is None or isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode()
    raise InvalidType(f"key must be bytes, str or None, not {type(key).__name__}")


def _seal(store: MemoryStore, t: _SealTuple) -> Seal:
    lsn, record_lsn, _offset, at_us, keyed, hash_hex, _chain = t
    return Seal(
        lsn=lsn,
        hash=hash_hex,
        at=_EPOCH + timedelta(microseconds=at_us),
        keyed=keyed,
        record_lsn=record_lsn,
        store_id=store.store_id,
        generation=store.generation,
    )


def _store(store: object) -> MemoryStore:
    # Checked by what a store has (its engine and clock), so this module needs the store
    # module only for types: the store's seals() calls into here, not the other way round.
    if not all(hasattr(store, a) for a in ("engine", "now_us", "store_id", "generation")):
        raise InvalidType(f"store must be a memcommit.MemoryStore, not {type(store).__name__}")
    return cast("MemoryStore", store)


# The AutoSeal attached to each store (at most one), without a field on the store.
_ATTACHED: weakref.WeakKeyDictionary[MemoryStore, AutoSeal] = weakref.WeakKeyDictionary()


def attached_auto_seal(store: MemoryStore) -> AutoSeal | None:
    """The :class:`AutoSeal` attached to `store`, or None (``store.auto_seal``)."""
    return _ATTACHED.get(store)


def seal(store: MemoryStore, key: bytes | str | None = None) -> Seal:
    """Write a seal over every record committed so far.

    The seal is a record of its own (it takes the next LSN) and is durable as the store's
    durability mode promises when this returns.

    Args:
        store: The store to seal.
        key: A secret (bytes or str, any length; 32 random bytes is best) for a keyed seal.

    Returns:
        The seal written.
    """
    s = _store(store)
    return _seal(s, s.engine.seal(s.now_us(), _key(key)))


def seals(store: MemoryStore) -> list[Seal]:
    """The seals of the store's current log generation, oldest first."""
    s = _store(store)
    return [_seal(s, t) for t in s.engine.view().seals()]


def check_seal(store: MemoryStore, key: bytes | str | None = None) -> VerifyReport:
    """Recheck the newest seal, hashing only the records since the seal before it.

    Args:
        store: The store.
        key: The secret, when the newest seal is keyed.

    Returns:
        The report, with ``seal`` set to the seal rechecked.

    Raises:
        SealMismatch: The chain and the seal disagree (names the LSN and byte offset).
        CorruptLog: A record is damaged.
        ValueError: The log holds no seal, or the newest is keyed and no key was given.
    """
    s = _store(store)
    newest, r = s.engine.view().check_seal(_key(key))
    return _report(r, seal=_seal(s, newest))


def verify(
    store: MemoryStore,
    key: bytes | str | None = None,
    anchors: Iterable[Seal | str | bytes | dict[str, Any]] = (),
    progress: Callable[[int], object] | None = None,
) -> VerifyReport:
    """Recompute the chain over the whole log and check every seal, anchor and reference.

    Runs in Rust with the GIL released, hashing on both cores.

    Args:
        store: The store.
        key: The secret, to check keyed seals' keyed hashes (without it their chain values are
            still checked and ``keyed_unchecked`` counts them).
        anchors: Seals kept outside the log (:class:`Seal` or its JSON): each must still be
            in the log, at its LSN with its hash.
        progress: Called with the bytes checked so far, every few MiB.

    Returns:
        The report.

    Raises:
        SealMismatch: The chain disagrees with a seal, or an anchor is not in the log.
        ForgedReference: A memory's ``sources`` name an id the log never held.
        CorruptLog: A record is damaged or out of order.
    """
    s = _store(store)
    if progress is not None and not callable(progress):
        raise InvalidType(f"progress must be a callable or None, not {type(progress).__name__}")
    wanted = [a if isinstance(a, Seal) else Seal.from_json(a) for a in anchors]
    r = s.engine.view().verify(_key(key), progress)
    found = {(t[0], t[5], t[4]) for t in r["seals"]}
    superseded = 0
    for a in wanted:
        superseded += _check_anchor(s, a, found)
    return _report(r, anchors_checked=len(wanted), superseded=superseded)


def _check_anchor(store: MemoryStore, a: Seal, found: set[tuple[int, str, bool]]) -> int:
    """Check one anchor against the log; 1 if it is superseded, else 0.

    Superseded: a seal of an earlier generation that the compaction manifest holds (compaction
    replaced it by design, so it is not a failure).
    """
    where = store.path or ":memory:"
    if a.generation < store.generation and a.store_id == store.store_id:
        for entry in store.manifest():
            old = entry.get("old_chain", {})
            if old.get("generation") != a.generation:
                continue
            for s in old.get("seals", ()):
                if (s.get("lsn"), s.get("hash"), s.get("keyed")) == (a.lsn, a.hash, a.keyed):
                    return 1
        raise _mismatch(
            where,
            a,
            f"the anchor at LSN {a.lsn} is from log generation {a.generation}, and the "
            "compaction manifest holds no such seal of that generation: the log or its manifest "
            "was rewritten",
        )
    if a.store_id != store.store_id:
        raise _mismatch(
            where,
            a,
            f"the anchor at LSN {a.lsn} belongs to store {a.store_id}, "
            f"but this log is store {store.store_id}",
        )
    if a.generation != store.generation:
        raise _mismatch(
            where,
            a,
            f"the anchor at LSN {a.lsn} is from log generation {a.generation}, but the "
            f"log is generation {store.generation}: it was replaced by an older or a foreign copy",
        )
    if (a.lsn, a.hash, a.keyed) not in found:
        raise _mismatch(
            where,
            a,
            f"the log holds no seal at LSN {a.lsn} with hash {a.hash}: it was rewritten "
            "or rolled back since the anchor was taken; restore it from a copy that verifies",
        )
    return 0


def _mismatch(where: str, anchor: Seal, why: str) -> SealMismatch:
    """The error for `anchor`, which the log at `where` does not hold: `why`."""
    return SealMismatch(f"{where}: {why}", where, anchor.record_lsn)


def _report(
    r: dict[str, Any],
    *,
    seal: Seal | None = None,
    anchors_checked: int = 0,
    superseded: int = 0,
) -> VerifyReport:
    return VerifyReport(
        ok=True,
        seals_checked=int(r["seals_checked"]),
        records_checked=int(r["records_checked"]),
        bytes_checked=int(r["bytes_checked"]),
        keyed_unchecked=int(r["keyed_unchecked"]),
        anchors_checked=anchors_checked,
        superseded=superseded,
        lsn=int(r["lsn"]),
        chain=str(r["chain"]),
        seal=seal,
    )


class AutoSeal:
    """Seal a store automatically after every ``every`` records.

    Once ``every`` records have been written since the last seal's, the writer appends a seal
    right after a commit, covering the newest commit the chain thread has already hashed, so
    commits do not wait on hashing. With small commits that is the commit that made the seal
    due (the writer waits the few microseconds its hashing takes); with large ones the chain
    thread may be behind: the seal then covers an earlier commit, or waits for the next commit
    if nothing new was hashed, and a commit waits for the hashing only when the newest commit
    hashed falls more than 64 commits behind. So seals are at least ``every`` records apart and
    may lag the records they cover by up to 64 commits. A crash between a record and its seal
    leaves a valid log; the next seal covers what the lost one would have. Use it as a context
    manager, or call :meth:`close`.

    Example:
        >>> import memcommit
        >>> store = memcommit.open(":memory:")
        >>> with AutoSeal(store, every=2):
        ...     for i in range(4):
        ...         _ = store.put(f"note {i}")
        >>> len(store.seals()) >= 1
        True
    """

    def __init__(
        self, store: MemoryStore, every: int = 1000, key: bytes | str | None = None
    ) -> None:
        """Attach to ``store``.

        Raises:
            ValueError: ``every`` is not a positive int, or the store already has an AutoSeal.
        """
        self._store = _store(store)
        if isinstance(every, bool) or not isinstance(every, int) or every <= 0:
            raise InvalidValue(f"every must be a positive int, not {every!r}")
        check_u64(every, "every")
        if _ATTACHED.get(self._store) is not None:
            raise InvalidValue("store already has an AutoSeal attached; close() it first")
        self.every = every
        self._key = _key(key)
        self._store.engine.set_auto_seal(every, self._key)
        _ATTACHED[self._store] = self

    def close(self) -> None:
        """Detach: no more automatic seals. Idempotent."""
        if _ATTACHED.get(self._store) is self:
            del _ATTACHED[self._store]
            if not self._store.closed:
                self._store.engine.set_auto_seal(None)

    def __enter__(self) -> AutoSeal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
