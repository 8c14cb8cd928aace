"""A LangGraph checkpointer over a memcommit store's log.

Why the medium and not the ``checkpoints`` role: the role assigns its own ids (``ckpt-`` and
a store-wide sequence number), checks every put against a run of the ``runs`` role, keeps one
namespace string per run and has no pending writes. LangGraph brings its own ids (uuid6, which
sort in creation order), addresses checkpoints by ``(thread_id, checkpoint_ns,
checkpoint_id)``, and needs pending writes keyed by task id and index, kept idempotently. So
the saver keeps entities of its own kinds in the store's medium (:mod:`memcommit.roles.medium`),
the way every role does: each operation reads what it needs under the medium's lock and hands
one :meth:`~memcommit.roles.medium.Medium.write` the full new state of every entity it changes,
which is one commit of the log (atomic, durable as the store's durability mode says, and
group-committed with the other threads' writes).

Entities (every key part is a str; see :func:`~memcommit.roles.medium.entity_key`):

* ``lg.checkpoint``, key ``(thread_id, checkpoint_ns, checkpoint_id)``: ``thread_id``,
  ``checkpoint_ns``, ``checkpoint_id``, ``parent_checkpoint_id?``, ``type`` and ``data`` (the
  serde bytes of the whole checkpoint, base64), ``metadata?`` (JSON), ``metadata_typed?``
  (``[type, base64]``, when the metadata is not JSON), ``run_id?``.
* ``lg.writes``, key ``(thread_id, checkpoint_ns, checkpoint_id, task_id)``: the same ids, and
  ``writes``: ``[[idx, channel, type, base64, task_path], ...]`` in idx order.
* ``lg.head``, key ``(thread_id, checkpoint_ns)``: ``checkpoint_id``, the newest (highest id),
  so "the latest checkpoint" is one lookup.

The checkpoint is stored whole, channel values inline, as ``SqliteSaver`` stores it. Pending
writes follow ``SqliteSaver`` and ``PostgresSaver``: a task's write at an index it already wrote
is kept, unless every write of the call is a special channel (``ERROR``, ``INTERRUPT``,
``SCHEDULED``, ``RESUME``), which replace.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import random
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ...errors import InvalidType, InvalidValue
from ...roles.medium import (
    Change,
    KeyRoom,
    State,
    StateTooLarge,
    child_prefix,
    entity_key,
    full_key,
)
from ...roles.values import copy_json
from ._common import (
    MISSING,
    b64decode,
    b64encode,
    checked_text,
    json_equal,
    lookup,
    medium_of,
    opened,
    writes_block,
)

if TYPE_CHECKING:
    from ...store import Durability, MemoryStore

__all__ = ["CHECKPOINT", "HEAD", "WRITES", "MemcommitSaver"]

CHECKPOINT = "lg.checkpoint"
WRITES = "lg.writes"
HEAD = "lg.head"

# The keys a checkpoint and a task's pending writes bring, checked before a write (a key of
# the log is at most 1,024 bytes): an error names the argument that takes the most of it.
_CHECKPOINT_KEYS = KeyRoom(
    "a checkpoint",
    lambda thread_id, checkpoint_ns, checkpoint_id: (
        full_key(CHECKPOINT, thread_id, checkpoint_ns, checkpoint_id),
        full_key(HEAD, thread_id, checkpoint_ns),
    ),
)
_WRITES_KEYS = KeyRoom(
    "a pending write",
    lambda thread_id, checkpoint_ns, checkpoint_id, task_id: (
        full_key(WRITES, thread_id, checkpoint_ns, checkpoint_id, task_id),
    ),
)


def _json_or_none(value: Any) -> Any:
    """Return `value` as the JSON the log will hold, or None if it is not JSON.

    Raises:
        InvalidValue: `value` (the metadata) is JSON but holds a lone surrogate.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return json.loads(checked_text(text, "metadata"))


def _ids(value: Sequence[str], name: str) -> builtins.list[str]:
    """`value`, a sequence of ids, as a list of str; a bare str is refused, not its characters.

    Raises:
        InvalidType: `value` is a str or bytes (one id, which would be read as its characters).
    """
    if isinstance(value, (str, bytes)):
        raise InvalidType(
            f"{name} must be a list of ids, not a {type(value).__name__}: pass [{value!r}] "
            "for that one (a str would be read as its characters)"
        )
    return [checked_text(str(one), name) for one in value]


def _too_large(refused: StateTooLarge) -> InvalidValue:
    """The error naming the argument whose entity's state `refused` is."""
    room = (
        f"one record of the store holds at most {refused.max_record_bytes - 1} bytes "
        f"(max_record_bytes is {refused.max_record_bytes})"
    )
    if refused.kind == WRITES:
        return InvalidValue(
            f"writes: this task's pending writes at {refused.key} would take {refused.size} "
            f"bytes as JSON (their serialized values in base64, 4 characters for every 3 "
            f"bytes); {room}: write smaller values, or open the store with a larger "
            "max_record_bytes"
        )
    return InvalidValue(
        f"checkpoint: the checkpoint {refused.key} would take {refused.size} bytes as JSON (its "
        f"serialized bytes in base64, 4 characters for every 3 bytes, and its metadata); "
        f"{room}, so a checkpoint of at most about 3/4 of that: keep large values out of the "
        "graph's state, or open the store with a larger max_record_bytes"
    )


def _where(config: RunnableConfig) -> tuple[str, str]:
    """The ``thread_id`` and ``checkpoint_ns`` (default ``""``) of `config`, as str.

    Raises:
        InvalidValue: One holds a lone surrogate.
    """
    conf = config["configurable"]
    return (
        checked_text(str(conf["thread_id"]), "thread_id"),
        checked_text(str(conf.get("checkpoint_ns", "")), "checkpoint_ns"),
    )


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


class MemcommitSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer that keeps checkpoints in a memcommit store.

    Checkpoints and pending writes are entities of the store's log (see the module docstring),
    so they survive a crash as the store's durability mode says (``"commit"``: every put has
    reached the disk when it returns), and are sealed and compacted with the rest of the log.
    Any number of threads may share one saver; async methods run fsync-bound writes in a worker
    thread.

    Args:
        store: The memcommit store (``memcommit.open(path)``); the saver does not close it.
        serde: LangGraph's serializer for checkpoints and writes (default: its JSON-plus one).

    Example:
        >>> import memcommit
        >>> from langgraph.graph import StateGraph
        >>> saver = MemcommitSaver(memcommit.open(":memory:"))
        >>> builder = StateGraph(int).add_node("add_one", lambda x: x + 1)
        >>> builder = builder.set_entry_point("add_one").set_finish_point("add_one")
        >>> graph = builder.compile(checkpointer=saver)
        >>> graph.invoke(1, {"configurable": {"thread_id": "t1"}})
        2
    """

    def __init__(self, store: MemoryStore, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        self.store = store
        self._medium = medium_of(store)
        self._thread_writes = writes_block(store)

    @classmethod
    @contextmanager
    def from_path(
        cls,
        path: str,
        *,
        durability: Durability = "commit",
        serde: SerializerProtocol | None = None,
    ) -> Iterator[MemcommitSaver]:
        """Open the store at `path` and yield a saver over it; close the store afterwards.

        Args:
            path: The log file (created if missing), or ``":memory:"``.
            durability: The store's durability mode (see :func:`memcommit.open`).
            serde: LangGraph's serializer (default: its JSON-plus one).

        Yields:
            The saver.
        """
        with opened(path, durability) as store:
            yield cls(store, serde=serde)

    # -- reading -------------------------------------------------------------------------

    def _load_writes(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> list[Any]:
        """Return the raw pending writes of a checkpoint (call under the medium's lock)."""
        found = self._medium.scan(WRITES, child_prefix(thread_id, checkpoint_ns, checkpoint_id))
        return [(state["task_id"], entry) for _, state in found for entry in state["writes"]]

    def _pending_writes(self, raw: builtins.list[Any]) -> builtins.list[PendingWrite]:
        raw.sort(key=lambda w: writes_sort_key(w[1][4], w[0], w[1][0]))
        return [
            (task_id, channel, self.serde.loads_typed((type_, b64decode(data))))
            for task_id, (_idx, channel, type_, data, _path) in raw
        ]

    def _metadata(self, state: State) -> dict[str, Any]:
        typed = state.get("metadata_typed")
        if typed is not None:
            return cast(dict[str, Any], self.serde.loads_typed((typed[0], b64decode(typed[1]))))
        return cast(dict[str, Any], copy_json(state["metadata"]))

    def _tuple(
        self, state: State, raw_writes: builtins.list[Any], metadata: dict[str, Any] | None = None
    ) -> CheckpointTuple:
        thread_id = state["thread_id"]
        checkpoint_ns = state["checkpoint_ns"]
        parent = state["parent_checkpoint_id"]
        checkpoint: Checkpoint = self.serde.loads_typed((state["type"], b64decode(state["data"])))
        return CheckpointTuple(
            config=_config(thread_id, checkpoint_ns, state["checkpoint_id"]),
            checkpoint=checkpoint,
            metadata=cast(
                CheckpointMetadata, metadata if metadata is not None else self._metadata(state)
            ),
            parent_config=None if parent is None else _config(thread_id, checkpoint_ns, parent),
            pending_writes=self._pending_writes(raw_writes),
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Return the checkpoint `config` names, or its thread's newest, or None.

        Args:
            config: ``configurable`` holds ``thread_id``, ``checkpoint_ns`` (default ``""``)
                and optionally ``checkpoint_id``; without one, the newest checkpoint of that
                thread and namespace.

        Returns:
            The checkpoint with its metadata, parent config and pending writes (in
            ``writes_sort_key`` order), or None.
        """
        thread_id, checkpoint_ns = _where(config)
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            checkpoint_id = checked_text(str(checkpoint_id), "checkpoint_id")
        with self._medium.lock:
            if not checkpoint_id:
                head = self._medium.get(HEAD, entity_key(thread_id, checkpoint_ns))
                if head is None:
                    return None
                checkpoint_id = str(head["checkpoint_id"])
            state = self._medium.get(
                CHECKPOINT, entity_key(thread_id, checkpoint_ns, checkpoint_id)
            )
            if state is None:
                return None
            raw = self._load_writes(thread_id, checkpoint_ns, checkpoint_id)
        return self._tuple(state, raw)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Yield the checkpoints matching every criterion, newest (highest id) first.

        Args:
            config: ``thread_id`` (every thread when None or absent), ``checkpoint_ns`` (every
                namespace when absent) and ``checkpoint_id`` (only that one) to match.
            filter: Metadata every yielded checkpoint has, key by key (equality as
                ``InMemorySaver`` has it: ``True`` is ``1``, a missing key is ``None``; a
                dotted key missing at the top level is read as a path).
            before: Only checkpoints whose id sorts below this config's ``checkpoint_id``.
            limit: At most this many.

        Yields:
            Checkpoint tuples with their pending writes.
        """
        conf = config.get("configurable", {}) if config else {}
        thread_id = conf.get("thread_id")
        checkpoint_ns = conf.get("checkpoint_ns")
        only_id = conf.get("checkpoint_id")
        before_id = get_checkpoint_id(before) if before else None
        if checkpoint_ns is not None:
            checkpoint_ns = checked_text(str(checkpoint_ns), "checkpoint_ns")
        if thread_id is None:
            prefix = ""
        elif checkpoint_ns is None:
            prefix = child_prefix(checked_text(str(thread_id), "thread_id"))
        else:
            prefix = child_prefix(checked_text(str(thread_id), "thread_id"), checkpoint_ns)
        if limit is not None and limit <= 0:
            return
        with self._medium.lock:
            found = self._medium.scan(CHECKPOINT, prefix)
        # Without a thread_id the scan covers every thread: the namespace is matched here.
        states = [
            state
            for _, state in found
            if (checkpoint_ns is None or state["checkpoint_ns"] == checkpoint_ns)
            and (not only_id or state["checkpoint_id"] == only_id)
            and (not before_id or state["checkpoint_id"] < before_id)
        ]
        states.sort(
            key=lambda s: (s["checkpoint_id"], s["thread_id"], s["checkpoint_ns"]), reverse=True
        )
        yielded = 0
        for state in states:
            metadata = self._metadata(state)
            if filter and not all(
                json_equal(None if (v := lookup(metadata, k)) is MISSING else v, wanted)
                for k, wanted in filter.items()
            ):
                continue
            with self._medium.lock:
                raw = self._load_writes(
                    state["thread_id"], state["checkpoint_ns"], state["checkpoint_id"]
                )
            yield self._tuple(state, raw, metadata)
            yielded += 1
            if limit is not None and yielded >= limit:
                return

    # -- writing -------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint (one commit); the config's ``checkpoint_id`` is its parent.

        Args:
            config: ``thread_id``, ``checkpoint_ns`` and the parent's ``checkpoint_id``.
            checkpoint: The checkpoint, stored whole (channel values inline).
            metadata: Its metadata, merged with the config's as LangGraph's savers do.
            new_versions: The channel versions this step wrote (unused: values are inline).

        Returns:
            The config naming the stored checkpoint.

        Raises:
            InvalidValue: An id holds a lone surrogate, or the ids make a key of the log longer
                than 1,024 bytes (the message names the longest), or the checkpoint with its
                metadata is too large for one record of the store (as JSON, its serialized
                bytes in base64); nothing was written.
        """
        conf = config["configurable"]
        thread_id, checkpoint_ns = _where(config)
        parent = conf.get("checkpoint_id")
        checkpoint_id = checked_text(str(checkpoint["id"]), "checkpoint_id")
        _CHECKPOINT_KEYS.check(
            thread_id=thread_id, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id
        )
        type_, data = self.serde.dumps_typed(checkpoint)
        md = get_checkpoint_metadata(config, metadata)
        state: State = {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
            "parent_checkpoint_id": None if parent is None else str(parent),
            "type": type_,
            "data": b64encode(data),
        }
        as_json = _json_or_none(md)
        if as_json is None:
            md_type, md_data = self.serde.dumps_typed(md)
            state["metadata"] = None
            state["metadata_typed"] = [md_type, b64encode(md_data)]
        else:
            state["metadata"] = as_json
        run_id = md.get("run_id")
        state["run_id"] = None if run_id is None else str(run_id)
        head_key = entity_key(thread_id, checkpoint_ns)
        with self._medium.lock:
            changes: builtins.list[Change] = [
                (CHECKPOINT, entity_key(thread_id, checkpoint_ns, checkpoint_id), state)
            ]
            head = self._medium.get(HEAD, head_key)
            if head is None or head["checkpoint_id"] < checkpoint_id:
                changes.append((HEAD, head_key, {"checkpoint_id": checkpoint_id}))
            self._commit(changes)
        return {
            "configurable": {
                "thread_id": conf["thread_id"],
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes against the checkpoint `config` names (one commit).

        Writes are keyed by ``(task_id, index)``; special channels use LangGraph's negative
        indexes (``WRITES_IDX_MAP``). A write at a key already stored is kept, unless every
        write of this call is a special channel (see the module docstring).

        Args:
            config: ``thread_id``, ``checkpoint_ns`` and ``checkpoint_id``.
            writes: ``(channel, value)`` pairs.
            task_id: The task that made them.
            task_path: The task's path (orders writes within a step).

        Raises:
            InvalidValue: An id, a channel or `task_path` holds a lone surrogate, or the ids
                make a key of the log longer than 1,024 bytes (the message names the longest),
                or the task's writes are too large for one record of the store (as JSON, their
                serialized values in base64); nothing was written.
        """
        if not writes:
            return
        conf = config["configurable"]
        thread_id, checkpoint_ns = _where(config)
        checkpoint_id = checked_text(str(conf["checkpoint_id"]), "checkpoint_id")
        task_id = checked_text(str(task_id), "task_id")
        task_path = checked_text(task_path, "task_path")
        _WRITES_KEYS.check(
            thread_id=thread_id,
            checkpoint_ns=checkpoint_ns,
            checkpoint_id=checkpoint_id,
            task_id=task_id,
        )
        replace = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        new: dict[int, builtins.list[Any]] = {}
        for idx, (channel, value) in enumerate(writes):
            type_, data = self.serde.dumps_typed(value)
            key_idx = WRITES_IDX_MAP.get(channel, idx)
            new[key_idx] = [
                key_idx,
                checked_text(channel, "writes"),
                type_,
                b64encode(data),
                task_path,
            ]
        key = entity_key(thread_id, checkpoint_ns, checkpoint_id, task_id)
        with self._medium.lock:
            old = self._medium.get(WRITES, key)
            merged: dict[int, Any] = {} if old is None else {e[0]: e for e in old["writes"]}
            changed = False
            for key_idx, entry in new.items():
                if key_idx in merged and not replace:
                    continue
                merged[key_idx] = entry
                changed = True
            if not changed:
                return
            state: State = {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
                "task_id": task_id,
                "writes": [merged[i] for i in sorted(merged)],
            }
            self._commit([(WRITES, key, state)])

    def _commit(self, changes: builtins.list[Change]) -> None:
        """Write `changes` as one commit; a state too large names the argument it holds."""
        try:
            self._medium.write(changes)
        except StateTooLarge as refused:
            raise _too_large(refused) from None

    def _thread_changes(self, thread_id: str) -> builtins.list[Change]:
        prefix = child_prefix(thread_id)
        return [
            (kind, key, None)
            for kind in (CHECKPOINT, WRITES, HEAD)
            for key, _ in self._medium.scan(kind, prefix)
        ]

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and pending write of a thread (one commit).

        Args:
            thread_id: The thread; a thread with nothing stored is no error.
        """
        thread_id = checked_text(str(thread_id), "thread_id")
        with self._medium.lock:
            changes = self._thread_changes(thread_id)
            if changes:
                self._commit(changes)

    def _drop(
        self, victims: builtins.list[State], changes: builtins.list[Change]
    ) -> builtins.list[Change]:
        """Add the deletes of `victims` (checkpoint states) and their writes to `changes`.

        Then recompute the head of each thread and namespace they were in. Call under the lock.
        """
        gone: set[tuple[str, str, str]] = set()
        spaces: set[tuple[str, str]] = set()
        for state in victims:
            where = (state["thread_id"], state["checkpoint_ns"], state["checkpoint_id"])
            gone.add(where)
            spaces.add(where[:2])
            changes.append((CHECKPOINT, entity_key(*where), None))
            changes.extend(
                (WRITES, key, None) for key, _ in self._medium.scan(WRITES, child_prefix(*where))
            )
        for thread_id, checkpoint_ns in sorted(spaces):
            alive = [
                s["checkpoint_id"]
                for _, s in self._medium.scan(CHECKPOINT, child_prefix(thread_id, checkpoint_ns))
                if (thread_id, checkpoint_ns, s["checkpoint_id"]) not in gone
            ]
            head_key = entity_key(thread_id, checkpoint_ns)
            changes.append((HEAD, head_key, {"checkpoint_id": max(alive)} if alive else None))
        return changes

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata ``run_id`` is listed.

        One commit. This scans every checkpoint of the store (there is no index by run).

        Args:
            run_ids: The runs; unknown ones are no error.

        Raises:
            InvalidType: `run_ids` is a str (or bytes), not a list of them; nothing was deleted.
        """
        wanted = set(_ids(run_ids, "run_ids"))
        if not wanted:
            return
        with self._medium.lock:
            victims = [s for _, s in self._medium.scan(CHECKPOINT) if s.get("run_id") in wanted]
            if victims:
                self._commit(self._drop(victims, []))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and pending write of a thread to another (one commit).

        Checkpoints the target already has (same namespace and id) are left as they are.

        Args:
            source_thread_id: The thread to copy; an empty one copies nothing.
            target_thread_id: The thread to copy to.

        Raises:
            InvalidValue: A thread id holds a lone surrogate, or the target's id makes a key of
                the log longer than 1,024 bytes; nothing was written.
        """
        source = checked_text(str(source_thread_id), "source_thread_id")
        target = checked_text(str(target_thread_id), "target_thread_id")
        with self._medium.lock:
            # Each copy: its kind, the parts of its key after the thread id, its state.
            copies: builtins.list[tuple[str, tuple[str, ...], State]] = []
            heads: dict[str, str] = {}
            for _, state in self._medium.scan(CHECKPOINT, child_prefix(source)):
                ns, cid = state["checkpoint_ns"], state["checkpoint_id"]
                if self._medium.get(CHECKPOINT, entity_key(target, ns, cid)) is not None:
                    continue
                copies.append((CHECKPOINT, (ns, cid), {**state, "thread_id": target}))
                for _, w in self._medium.scan(WRITES, child_prefix(source, ns, cid)):
                    copies.append((WRITES, (ns, cid, w["task_id"]), {**w, "thread_id": target}))
                heads[ns] = max(heads.get(ns, cid), cid)
            # The source's keys fit, the target's may not: an error names target_thread_id.
            KeyRoom(
                "a copied checkpoint",
                lambda target_thread_id: [
                    *(full_key(kind, target_thread_id, *parts) for kind, parts, _ in copies),
                    *(full_key(HEAD, target_thread_id, ns) for ns in heads),
                ],
            ).check(target_thread_id=target)
            changes: builtins.list[Change] = [
                (kind, entity_key(target, *parts), state) for kind, parts, state in copies
            ]
            for ns, cid in heads.items():
                head_key = entity_key(target, ns)
                head = self._medium.get(HEAD, head_key)
                if head is None or head["checkpoint_id"] < cid:
                    changes.append((HEAD, head_key, {"checkpoint_id": cid}))
            if changes:
                self._commit(changes)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Drop old checkpoints of the given threads (one commit).

        ``DeltaChannel`` (beta in LangGraph) rebuilds some channels from ancestors' writes;
        ``"keep_latest"`` drops those ancestors, so do not prune threads of graphs that use it
        (see ``BaseCheckpointSaver.prune``).

        Args:
            thread_ids: The threads.
            strategy: ``"keep_latest"`` keeps the newest checkpoint of each namespace with its
                writes; ``"delete"`` removes every checkpoint.

        Raises:
            InvalidType: `thread_ids` is a str (or bytes), not a list of them.
            InvalidValue: `strategy` is neither of those.

        Nothing is deleted when either is raised.
        """
        if strategy not in ("keep_latest", "delete"):
            raise InvalidValue(f"strategy: {strategy!r} is not keep_latest or delete")
        threads = _ids(thread_ids, "thread_ids")
        with self._medium.lock:
            changes: builtins.list[Change] = []
            for thread_id in dict.fromkeys(threads):
                if strategy == "delete":
                    changes.extend(self._thread_changes(thread_id))
                    continue
                newest: dict[str, str] = {}
                found = self._medium.scan(CHECKPOINT, child_prefix(thread_id))
                for _, s in found:
                    ns = s["checkpoint_ns"]
                    newest[ns] = max(newest.get(ns, s["checkpoint_id"]), s["checkpoint_id"])
                victims = [s for _, s in found if s["checkpoint_id"] != newest[s["checkpoint_ns"]]]
                self._drop(victims, changes)
            if changes:
                self._commit(changes)

    # -- async ---------------------------------------------------------------------------

    async def _write(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if self._thread_writes:
            return await asyncio.to_thread(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple` (a read of the in-memory index: runs inline)."""
        return self.get_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`."""
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`."""
        return cast(
            RunnableConfig, await self._write(self.put, config, checkpoint, metadata, new_versions)
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes`."""
        await self._write(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        await self._write(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        await self._write(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        await self._write(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async :meth:`prune`."""
        await self._write(self.prune, thread_ids, strategy=strategy)

    # -- versions ------------------------------------------------------------------------

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Return the next channel version (LangGraph's SQL savers' scheme).

        A zero-padded counter and a random fraction: ``"000...0002.0.4271..."``, so versions
        sort as strings and two writers never produce the same one.
        """
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"
