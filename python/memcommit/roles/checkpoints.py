"""Checkpoints: snapshots of a run's state, newest first, optionally in namespaces.

Checkpoint ids are assigned by the store and sort in creation order (``ckpt-`` and a
store-wide sequence number), so "newest" never depends on timestamps: three checkpoints put
within one millisecond are still ordered.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ._base import RunLinked, check_optional_token, writes
from .errors import CheckpointNotFoundError
from .medium import (
    CHECKPOINT,
    WHAT,
    Change,
    KeyRoom,
    State,
    bump_counter,
    child_prefix,
    entity_key,
    full_key,
)
from .values import (
    Count,
    Json,
    OptionalText,
    Text,
    check_json,
    check_metadata,
    check_optional_int,
    check_optional_text,
    check_text,
    checked,
    record_reader,
    same_json,
)

__all__ = ["Checkpoint", "CheckpointRepository", "MemoryCheckpointRepository"]


@dataclass(frozen=True)
class Checkpoint:
    """A snapshot of a run's state.

    Attributes:
        run_id: The run.
        checkpoint_id: Store-assigned; ids sort in creation order.
        seq: The store-wide sequence number behind the id.
        namespace: ``""`` for the root, else e.g. ``"child:abc"`` for a sub-agent.
        parent_id: The checkpoint this one follows, or None.
        state: The snapshot (JSON).
        metadata: Free JSON metadata, filterable by :meth:`CheckpointRepository.list`.
        created_at_ms: When it was put.
    """

    run_id: str
    checkpoint_id: str
    seq: int
    namespace: str
    parent_id: str | None
    state: Json
    metadata: dict[str, Json]
    created_at_ms: int


class CheckpointRepository(Protocol):
    """The ``checkpoints`` role: snapshots of runs."""

    def put(
        self,
        run_id: str,
        *,
        state: Json,
        metadata: dict[str, Json] | None = None,
        parent_id: str | None = None,
        namespace: str = "",
        token: int | None = None,
    ) -> Checkpoint:
        """Store a new checkpoint.

        Raises:
            RunNotFoundError: The run does not exist.
            CheckpointNotFoundError: `parent_id` is not a checkpoint of this run and
                namespace.
            ClaimLostError: `token` no longer holds the run; nothing was written.
        """
        ...

    def get(
        self, run_id: str, checkpoint_id: str | None = None, *, namespace: str = ""
    ) -> Checkpoint | None:
        """Return a checkpoint of the run in `namespace`, or None.

        Without an id, the newest in `namespace`; with one, that checkpoint if it is in
        `namespace` (an id of another namespace or run gives None).
        """
        ...

    def list(
        self,
        run_id: str,
        *,
        namespace: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        metadata_filter: dict[str, Json] | None = None,
    ) -> builtins.list[Checkpoint]:
        """Return checkpoints newest first.

        Args:
            run_id: The run.
            namespace: Only this namespace; every namespace when None.
            before: Only checkpoints older than this id (an exclusive cursor).
            limit: At most this many.
            metadata_filter: Only checkpoints whose metadata has every key with an equal value.
        """
        ...

    def prune(self, run_id: str, *, keep_last: int, namespace: str | None = None) -> int:
        """Keep the newest `keep_last` checkpoints per namespace; return how many went."""
        ...


_checkpoint = record_reader(Checkpoint)


def _checkpoint_id(seq: int) -> str:
    """The id of the checkpoint that took store-wide sequence number `seq`."""
    return f"ckpt-{seq:020d}"


_KEYS = KeyRoom(WHAT[CHECKPOINT], lambda run_id: (full_key(CHECKPOINT, run_id, _checkpoint_id(0)),))
"""The keys of a checkpoint (its counter has no parts)."""


class MemoryCheckpointRepository(RunLinked):
    """The in-memory ``checkpoints`` role; :class:`RunLinked` documents its arguments."""

    @writes
    @checked
    def put(
        self,
        run_id: Text,
        *,
        state: Json,
        metadata: dict[str, Json] | None = None,
        parent_id: str | None = None,
        namespace: str = "",
        token: int | None = None,
    ) -> Checkpoint:
        """Store a new checkpoint. See :meth:`CheckpointRepository.put`."""
        snapshot = check_json(state, "state")
        meta = check_metadata(metadata)
        parent_id = check_optional_text(parent_id, "parent_id")
        namespace = check_text(namespace, "namespace", empty=True)
        token = check_optional_token(token)
        _KEYS.check(run_id=run_id)
        with self._medium.lock:
            now = self._now_on_run(run_id, token)
            if parent_id is not None and self._in_namespace(run_id, parent_id, namespace) is None:
                raise CheckpointNotFoundError(run_id=run_id, checkpoint_id=parent_id)
            seq, seq_change = bump_counter(self._medium, "checkpoints.seq")
            checkpoint_id = _checkpoint_id(seq)
            new: State = {
                "run_id": run_id,
                "checkpoint_id": checkpoint_id,
                "seq": seq,
                "namespace": namespace,
                "parent_id": parent_id,
                "state": snapshot,
                "metadata": meta,
                "created_at_ms": now,
            }
            return self._save(
                CHECKPOINT, entity_key(run_id, checkpoint_id), new, _checkpoint, seq_change
            )

    def _in_namespace(self, run_id: str, checkpoint_id: str, namespace: str) -> State | None:
        """Return the state of the run's checkpoint `checkpoint_id` if it is in `namespace`.

        None when there is no such checkpoint, or it is in another namespace. Call under the
        medium's lock.
        """
        state = self._medium.get(CHECKPOINT, entity_key(run_id, checkpoint_id))
        return state if state is not None and state["namespace"] == namespace else None

    def _newest_first(self, run_id: str) -> builtins.list[tuple[str, State]]:
        found = self._medium.scan(CHECKPOINT, child_prefix(run_id))
        found.sort(key=lambda item: -int(item[1]["seq"]))
        return found

    @checked
    def get(
        self, run_id: Text, checkpoint_id: OptionalText = None, *, namespace: str = ""
    ) -> Checkpoint | None:
        """Return a checkpoint or None. See :meth:`CheckpointRepository.get`."""
        namespace = check_text(namespace, "namespace", empty=True)
        with self._medium.lock:
            if checkpoint_id is not None:
                state = self._in_namespace(run_id, checkpoint_id, namespace)
                return None if state is None else _checkpoint(state)
            for _, state in self._newest_first(run_id):
                if state["namespace"] == namespace:
                    return _checkpoint(state)
            return None

    @checked
    def list(
        self,
        run_id: Text,
        *,
        namespace: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        metadata_filter: dict[str, Json] | None = None,
    ) -> builtins.list[Checkpoint]:
        """Return checkpoints newest first. See :meth:`CheckpointRepository.list`."""
        namespace = check_optional_text(namespace, "namespace", empty=True)
        before = check_optional_text(before, "before")
        limit = check_optional_int(limit, "limit")
        wanted = None if metadata_filter is None else check_metadata(metadata_filter)
        with self._medium.lock:
            found = self._newest_first(run_id)
        out: builtins.list[Checkpoint] = []
        for _, state in found:
            if limit is not None and len(out) >= limit:
                break
            if namespace is not None and state["namespace"] != namespace:
                continue
            if before is not None and not state["checkpoint_id"] < before:
                continue
            if wanted is not None:
                meta = state["metadata"]
                if not all(k in meta and same_json(meta[k], v) for k, v in wanted.items()):
                    continue
            out.append(_checkpoint(state))
        return out

    @writes
    @checked
    def prune(self, run_id: Text, *, keep_last: Count, namespace: str | None = None) -> int:
        """Drop all but the newest checkpoints. See :meth:`CheckpointRepository.prune`."""
        namespace = check_optional_text(namespace, "namespace", empty=True)
        with self._medium.lock:
            self._check_run(run_id, None, 0)
            kept: dict[str, int] = {}
            changes: builtins.list[Change] = []
            for key, state in self._newest_first(run_id):
                ns = state["namespace"]
                if namespace is not None and ns != namespace:
                    continue
                kept[ns] = kept.get(ns, 0) + 1
                if kept[ns] > keep_last:
                    changes.append((CHECKPOINT, key, None))
            return self._delete(changes)


if TYPE_CHECKING:
    _: type[CheckpointRepository] = MemoryCheckpointRepository
