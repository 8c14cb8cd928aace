"""Commits: several operations and guards that are written together or not at all."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import MemoryStore

__all__ = ["TIERS", "Commit", "encode_data"]

#: The tiers a memory can be in, from freshest to the archive.
TIERS = ("working", "mid", "long", "archive")
_STATUSES = ("active", "stale")

# Operation codes shared with the native commit (see rust/memcommit-py).
PUT, STATUS, MOVE, FINISH, EXPECT = 0, 1, 2, 3, 4


def encode_data(data: Mapping[str, Any] | None) -> str | None:
    """Encode a memory's data object as JSON text.

    Raises:
        TypeError: `data` is not a dict, or holds something JSON cannot represent.
        ValueError: `data` would not come back the same (non-str keys, tuples, NaN).
    """
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise TypeError(f"data must be a JSON object (a dict) or None, not {type(data).__name__}")
    try:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except TypeError as e:
        raise TypeError(f"data is not JSON: {e}") from None
    except ValueError as e:
        raise ValueError(f"data is not JSON: {e}") from None
    if json.loads(text) != data:
        raise ValueError(
            "data does not survive a JSON round trip unchanged "
            "(keys must be str; use lists, not tuples or sets)"
        )
    return text


def check_text(text: object) -> None:
    """Raise TypeError unless `text` is a str."""
    if type(text) is not str and not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")


def check_tier(tier: object) -> None:
    """Raise unless `tier` names a tier."""
    if tier not in TIERS:
        if not isinstance(tier, str):
            raise TypeError(f"tier must be str, not {type(tier).__name__}")
        raise ValueError(f"tier: {tier!r} is not a tier; use one of {', '.join(TIERS)}")


def as_str_tuple(value: Sequence[str], field: str) -> tuple[str, ...]:
    """Return `value` as a tuple (the form the engine takes), refusing a lone str."""
    if type(value) is tuple:
        return value
    if isinstance(value, str):
        raise TypeError(f"{field} must be a sequence of str, not a single str (wrap it in a tuple)")
    try:
        return tuple(value)
    except TypeError:
        raise TypeError(f"{field} must be a sequence of str, not {type(value).__name__}") from None


def check_id(id: object, field: str = "id") -> str:
    """Return `id` if it is a non-empty str, else raise."""
    if not isinstance(id, str):
        raise TypeError(f"{field} must be str, not {type(id).__name__}")
    if not id:
        raise ValueError(f"{field}: must not be empty")
    return id


class Commit:
    """Operations and guards collected inside ``with store.commit() as c:``.

    Nothing is written until the block ends without an exception; then every operation is
    written with consecutive LSNs, or, when a guard fails, none is and :class:`Rejected` is
    raised. Guards are checked by the writer against the store's state including this
    commit's own earlier operations.

    Attributes:
        lsn: The LSN of the commit's last record once it has been written (None before, and
            for a commit that wrote nothing).
        first_lsn: The LSN of its first record.
    """

    def __init__(self, store: MemoryStore, expect_lsn: int | None) -> None:
        if expect_lsn is not None and (
            isinstance(expect_lsn, bool) or not isinstance(expect_lsn, int)
        ):
            raise TypeError(f"expect_lsn must be int or None, not {type(expect_lsn).__name__}")
        self._store = store
        self._expect_lsn = expect_lsn
        self._ops: list[tuple[Any, ...]] = []
        self._done = False
        self.lsn: int | None = None
        self.first_lsn: int | None = None

    def _add(self, op: tuple[Any, ...]) -> None:
        if self._done:
            raise RuntimeError("this commit has already ended; start a new one with store.commit()")
        self._ops.append(op)

    def put(
        self,
        text: str,
        *,
        kind: str = "note",
        id: str | None = None,
        task: str | None = None,
        tier: str = "working",
        data: Mapping[str, Any] | None = None,
        tags: Sequence[str] = (),
        sources: Sequence[str] = (),
    ) -> str:
        """Create a memory, or replace the content of an existing one (its tier and status stay).

        Returns:
            The memory's id (generated when not given; generated ids sort by creation).
        """
        # The checks are inlined: this is the per-record path of bulk loads.
        if type(text) is not str:
            check_text(text)
        if tier not in TIERS:
            check_tier(tier)
        if id is None:
            id = self._store._new_ids(1)[0]
        elif type(id) is not str or not id:
            check_id(id)
        if self._done:
            raise RuntimeError("this commit has already ended; start a new one with store.commit()")
        self._ops.append(
            (
                PUT,
                id,
                kind,
                text,
                None if data is None else encode_data(data),
                task,
                tier,
                tags if type(tags) is tuple else as_str_tuple(tags, "tags"),
                sources if type(sources) is tuple else as_str_tuple(sources, "sources"),
            )
        )
        return id

    def put_many(
        self,
        texts: Sequence[str],
        *,
        kind: str = "note",
        ids: Sequence[str] | None = None,
        task: str | None = None,
        tier: str = "working",
        data: Mapping[str, Any] | None = None,
        tags: Sequence[str] = (),
        sources: Sequence[str] = (),
    ) -> list[str]:
        """Put many memories that share kind, task, tier, data, tags and sources.

        The fast path for bulk loads: the texts cross into the engine as one batch.

        Returns:
            The ids, in the order of `texts`.
        """
        check_tier(tier)
        texts = list(texts)
        if ids is None:
            id_list = self._store._new_ids(len(texts))
        else:
            id_list = list(ids)
            if len(id_list) != len(texts):
                raise ValueError(f"ids: {len(id_list)} ids for {len(texts)} texts")
        self._add(
            (
                "many",
                id_list,
                texts,
                kind,
                task,
                tier,
                encode_data(data),
                as_str_tuple(tags, "tags"),
                as_str_tuple(sources, "sources"),
            )
        )
        return id_list

    def stale(self, id: str, reason: str | None = None) -> None:
        """Mark a memory stale (superseded or wrong); it stays in the store."""
        self._add((STATUS, check_id(id), "stale", reason))

    def restore(self, id: str) -> None:
        """Mark a stale memory active again."""
        self._add((STATUS, check_id(id), "active", None))

    def move(self, id: str, tier: str) -> None:
        """Move a memory to another tier (the archive is a tier)."""
        check_tier(tier)
        self._add((MOVE, check_id(id), tier))

    def finish_task(self, task: str) -> None:
        """Mark a task finished (memory compaction folds the traces of finished tasks)."""
        self._add((FINISH, check_id(task, "task")))

    def expect(
        self,
        id: str,
        *,
        exists: bool | None = None,
        status: str | None = None,
        tier: str | None = None,
        lsn: int | None = None,
    ) -> None:
        """Guard: refuse the whole commit unless the memory matches every given field.

        Args:
            id: The memory.
            exists: Whether it must exist (True) or must not (False).
            status: The status it must have.
            tier: The tier it must be in.
            lsn: The LSN of the newest record that touched it (compare-and-set).
        """
        if tier is not None:
            check_tier(tier)
        if status is not None and status not in _STATUSES:
            raise ValueError(f"status: {status!r} is not a status; use active or stale")
        if lsn is not None and (isinstance(lsn, bool) or not isinstance(lsn, int)):
            raise TypeError(f"lsn must be int or None, not {type(lsn).__name__}")
        self._add((EXPECT, check_id(id), exists, status, tier, lsn))

    def __enter__(self) -> Commit:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._done = True
        if exc_type is not None:
            self._ops.clear()
            return
        self._store._run_commit(self, self._ops, self._expect_lsn)


def flatten(ops: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Expand `put_many` entries into single puts (for commits that mix them with other ops)."""
    out: list[tuple[Any, ...]] = []
    for op in ops:
        if op[0] == "many":
            _, ids, texts, kind, task, tier, data, tags, sources = op
            out.extend(
                (PUT, i, kind, t, data, task, tier, tags, sources)
                for i, t in zip(ids, texts, strict=True)
            )
        else:
            out.append(op)
    return out
