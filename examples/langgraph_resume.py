"""A LangGraph run killed with ``kill -9`` resumes from its memcommit checkpoint.

Run it with no arguments (offline: no model, every node is a deterministic function)::

    python examples/langgraph_resume.py [--path run.log]

The graph::

    fetch -> parse -> (score_a, score_b in parallel) -> report

What happens:

1. A child process runs the graph on a memcommit log with ``durability="sync"`` (LangGraph
   saves each step's checkpoint before the next step starts). ``score_b`` stops to wait, as if
   a slow tool call hung, while ``score_a`` finishes: its result is stored as a pending write
   of the checkpoint (``put_writes``).
2. This process follows the log as a read-only reader until ``score_a``'s pending write is
   there, then kills the child with SIGKILL: no ``finally``, no flush, no close.
3. It opens the log again (a torn record at the tail, if any, is cut at open) and calls
   ``graph.invoke(None, config)``: LangGraph continues from the last checkpoint. ``fetch``,
   ``parse`` and ``score_a`` do not run again; only ``score_b`` and ``report`` do.

The report is also kept in the long-term store (:class:`MemcommitStore`), in the same log.
The last line printed is a JSON summary (what ran before the kill, what ran after, the
final state), which ``tests/test_langgraph.py`` checks.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Annotated, Any, TypedDict

from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph

import memcommit
from memcommit.integrations.langgraph import MemcommitSaver, MemcommitStore

THREAD = {"configurable": {"thread_id": "report-2026-01"}}
PAUSE_AT: str | None = None  # set in the child: the node that hangs
_PRINTING = threading.Lock()


class Pipeline(TypedDict, total=False):
    """The graph's state."""

    seed: int
    numbers: list[int]
    squares: list[int]
    a_score: int
    b_score: int
    report: str
    ran: Annotated[list[str], operator.add]


def _say(line: str) -> None:
    with _PRINTING:  # parallel nodes print from two threads: one whole line at a time
        print(line, flush=True)


def _enter(name: str) -> None:
    _say(f"ran {name}")
    if name == PAUSE_AT:
        _say(f"paused at {name}")
        time.sleep(3600)  # the parent kills us here


def fetch(state: Pipeline) -> Pipeline:
    """Make the input: ten numbers from the seed."""
    _enter("fetch")
    return {"numbers": [state["seed"] + i for i in range(10)], "ran": ["fetch"]}


def parse(state: Pipeline) -> Pipeline:
    """Square every number."""
    _enter("parse")
    return {"squares": [n * n for n in state["numbers"]], "ran": ["parse"]}


def score_a(state: Pipeline) -> Pipeline:
    """Score A: the sum of the squares."""
    _enter("score_a")
    return {"a_score": sum(state["squares"]), "ran": ["score_a"]}


def score_b(state: Pipeline) -> Pipeline:
    """Score B: the largest square (this is the node that hangs in the child)."""
    _enter("score_b")
    return {"b_score": max(state["squares"]), "ran": ["score_b"]}


def report(state: Pipeline) -> Pipeline:
    """Combine the scores, and keep the report in the long-term store."""
    _enter("report")
    text = f"a={state['a_score']} b={state['b_score']}"
    get_store().put(("reports",), THREAD["configurable"]["thread_id"], {"text": text})
    return {"report": text, "ran": ["report"]}


def build(store: memcommit.MemoryStore) -> Any:
    """Compile the graph with a checkpointer and a long-term store over `store`."""
    builder = StateGraph(Pipeline)
    for node in (fetch, parse, score_a, score_b, report):
        builder.add_node(node.__name__, node)
    builder.add_edge(START, "fetch")
    builder.add_edge("fetch", "parse")
    builder.add_edge("parse", "score_a")
    builder.add_edge("parse", "score_b")
    builder.add_edge(["score_a", "score_b"], "report")
    builder.add_edge("report", END)
    return builder.compile(checkpointer=MemcommitSaver(store), store=MemcommitStore(store))


def run_child(path: str) -> None:
    """Run the graph from the start; the node named by ``--pause-at`` hangs."""
    store = memcommit.open(path)
    build(store).invoke({"seed": 3}, THREAD, durability="sync")
    store.close()


def _wait_for_pending_write(path: str, channel: str, timeout_s: float = 60.0) -> None:
    """Follow the log as a reader until the newest checkpoint has a write to `channel`."""
    reader = memcommit.open(path, read_only=True)
    try:
        saver = MemcommitSaver(reader)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            reader.refresh()
            found = saver.get_tuple(THREAD)
            if found and any(w[1] == channel for w in found.pending_writes or ()):
                return
            time.sleep(0.01)
        raise TimeoutError(f"no pending write to {channel!r} within {timeout_s} s")
    finally:
        reader.close()


def demo(path: str) -> dict[str, Any]:
    """Run, kill -9, resume; return what ran when and the final state."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", "--path", path, "--pause-at", "score_b"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    before: list[str] = []
    try:
        for line in child.stdout:
            line = line.strip()
            if line.startswith("ran "):
                before.append(line[4:])
            if line == "paused at score_b":
                break
        else:
            raise RuntimeError(f"the child exited (code {child.wait()}) before pausing")
        _wait_for_pending_write(path, "a_score")
    finally:
        os.kill(child.pid, signal.SIGKILL)  # also when waiting failed: never leave it hanging
        child.wait()
        # score_a and score_b run in parallel: score_a's line may come after the pause.
        before += [line[4:] for line in child.stdout.read().splitlines() if line.startswith("ran ")]
        child.stdout.close()
    print(f"killed the child (pid {child.pid}) with SIGKILL after: {', '.join(before)}")

    import contextlib
    import io

    store = memcommit.open(path)
    try:
        graph = build(store)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            final = graph.invoke(None, THREAD)
        after = [line[4:] for line in out.getvalue().splitlines() if line.startswith("ran ")]
        print(f"resumed from the checkpoint; ran: {', '.join(after)}")
        kept = MemcommitStore(store).get(("reports",), THREAD["configurable"]["thread_id"])
        return {
            "before_kill": before,
            "after_resume": after,
            "ran": final["ran"],
            "report": final["report"],
            "long_term": None if kept is None else kept.value,
        }
    finally:
        store.close()


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments; run the demo, or the child it starts."""
    global PAUSE_AT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", help="the memcommit log (default: a new temporary file)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pause-at", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        PAUSE_AT = args.pause_at
        run_child(args.path)
        return
    path = args.path or os.path.join(tempfile.mkdtemp(prefix="memcommit-"), "run.log")
    print(json.dumps(demo(path)))


if __name__ == "__main__":
    main()
