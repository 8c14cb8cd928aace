"""Bulk puts from rows (``Commit.put_rows``) and columns (``Commit.put_many``): the records
they write, the errors that name the bad row and field, and all-or-nothing commits."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest

import memcommit
from memcommit.testing import CLOCK_START, ControllableClock

N = 5_000  # above the size where the native side encodes on a second thread


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "memory.db")


def _rows(n: int, prefix: str = "m") -> list[tuple[str, str, str | None, str]]:
    return [
        (
            f"{prefix}{i:06d}",
            ("trace", "fact", "note")[i % 3],
            f"task-{i % 17}" if i % 4 else None,
            f"text {i} " + "x" * (i % 300),
        )
        for i in range(n)
    ]


def _masked(raw: bytes) -> bytes:
    """A record's bytes without its salt and checksum (which come from the store's id)."""
    return raw[:4] + raw[8:-4]


def _same_store(a: Any, b: Any) -> None:
    ra, rb = list(a.records()), list(b.records())
    assert [_masked(r.raw()) for r in ra] == [_masked(r.raw()) for r in rb]
    assert [(r.lsn, r.op, r.key, r.fields) for r in ra] == [
        (r.lsn, r.op, r.key, r.fields) for r in rb
    ]


def test_rows_write_the_records_a_put_per_record_writes(tmp_path: Path) -> None:
    clock = ControllableClock(CLOCK_START)
    rows = _rows(N)
    stores = [
        memcommit.open(str(tmp_path / f"{k}.db"), clock=clock) for k in ("each", "rows", "cols")
    ]
    each, by_rows, by_cols = stores
    for s in stores:  # an existing memory the runs put again, and one put twice in the run
        s.put("old", kind="fact", id="m000003", tier="long")
    with each.commit() as c:
        for rid, kind, task, text in rows + rows[:2]:
            c.put(text, kind=kind, id=rid, task=task, tags=("t",))
    with by_rows.commit() as c:
        c.put_rows(rows + rows[:2], fields=("id", "kind", "task", "text"), tags=("t",))
    with by_cols.commit() as c:
        both = rows + rows[:2]
        c.put_many(
            [r[3] for r in both],
            ids=[r[0] for r in both],
            kind=[r[1] for r in both],
            task=[r[2] for r in both],
            tags=("t",),
        )
    _same_store(each, by_rows)
    _same_store(each, by_cols)
    assert by_rows.get("m000003").tier == "long"  # an existing memory keeps its tier
    for s in stores:
        s.close()


def test_rows_with_fields_of_their_own_write_what_a_put_per_record_writes(tmp_path: Path) -> None:
    # Some rows give a tier, data, tags, sources or a vector of their own, scattered through
    # a run long enough for the bulk path: each record takes its own row's fields, and the
    # keywords' where the row gives none.
    clock = ControllableClock(CLOCK_START)
    keywords: dict[str, Any] = {"kind": "fact", "tier": "mid", "data": {"k": 0}, "tags": ("s",)}
    rows: list[dict[str, Any]] = []
    for i in range(N):
        row: dict[str, Any] = {"id": f"r{i:05d}", "text": f"row {i} " + "y" * (i % 90)}
        if i % 7 == 3:
            row["tier"] = "long"
        if i % 11 == 5:
            row["data"] = {"i": i}
        if i % 13 == 6:
            row["tags"] = (f"own-{i}",)
        if i % 17 == 8:
            row["sources"] = (f"r{i - 1:05d}",)
        if i % 19 == 9:
            row["vector"] = [float(i), 1.0]
        rows.append(row)
    each, by_rows = (memcommit.open(str(tmp_path / f"{k}.db"), clock=clock) for k in "er")
    with each.commit() as c:
        for row in rows:
            c.put(**{**keywords, **row})
    with by_rows.commit() as c:
        c.put_rows(rows, **keywords)
    _same_store(each, by_rows)
    last = by_rows.get(f"r{N - 1 - (N - 1 - 9) % 19:05d}")
    assert last is not None and last.vector is not None
    for s in (each, by_rows):
        s.close()


def test_long_runs_of_single_puts_write_what_short_runs_write(tmp_path: Path) -> None:
    # A commit's long runs of c.put are pushed as the bulk path pushes put_many; short runs
    # (here cut by guards, which write nothing) one by one. The two write the same bytes, with
    # every field of every put in its place and the other operations between the runs.
    clock = ControllableClock(CLOCK_START)
    long_runs, short_runs = (memcommit.open(str(tmp_path / f"{k}.db"), clock=clock) for k in "ls")
    for s in (long_runs, short_runs):
        s.put("old", id="old-1", tier="long", tags=("kept",))

    def puts(c: Any, first: int, n: int, cut: bool) -> None:
        for i in range(first, first + n):
            if cut and i % 1000 == 0:
                c.expect("old-1", exists=True)
            c.put(
                f"memory {i} " + "z" * (i % 40),
                id="old-1" if i == first + 7 else f"p{i:06d}",
                kind=("trace", "fact", "note")[i % 3],
                task=f"task-{i % 13}" if i % 4 else None,
                tier=(None, "mid", "long")[i % 3],
                data={"i": i} if i % 5 == 0 else None,
                tags=("a", "b")[: i % 3],
                sources=(f"p{i - 1:06d}",) if i % 7 == 0 and i else (),
                vector=[float(i % 3), 1.0] if i % 6 == 0 else None,
            )

    for s, cut in ((long_runs, False), (short_runs, True)):
        with s.commit() as c:
            puts(c, 0, 6_000, cut)
            c.stale("p000010", "superseded")
            c.move("p000011", "archive")
            puts(c, 6_000, 5_000, cut)
    _same_store(long_runs, short_runs)
    got = long_runs.get_many(["p000010", "p000011", "p000012", "p000014", "old-1"])
    assert [(m.status, m.tier) for m in got[:2]] == [("stale", "mid"), ("active", "archive")]
    assert (got[2].tags, got[2].task, got[2].vector) == ((), None, (0.0, 1.0))
    assert (got[3].sources, got[3].tags, got[3].task) == (("p000013",), ("a", "b"), "task-1")
    assert got[4].tier == "long" and got[4].text.startswith("memory 6007")
    for s in (long_runs, short_runs):
        s.close()


def test_rows_as_dicts_and_tuples_with_every_field(path: str) -> None:
    Row = namedtuple("Row", "id text kind")
    with memcommit.open(path) as store:
        with store.commit() as c:
            ids = c.put_rows(
                [
                    {
                        "id": "d1",
                        "text": "from a dict",
                        "kind": "fact",
                        "task": "t1",
                        "tier": "mid",
                        "data": {"n": [1, 2]},
                        "tags": ["a", "b"],
                        "sources": ("t2",),
                    },
                    ("t2", "from a tuple", "trace", "t1", "long", None, ("c",)),
                    ("t3", "short tuple"),
                    Row("t4", "a named tuple", "note"),
                    {"text": "no id: generated"},
                    {"text": "None takes the default", "kind": None, "tier": None},
                ],
                kind="episode",
                tier="archive",
                tags=("shared",),
            )
        assert ids[:4] == ["d1", "t2", "t3", "t4"]
        assert len(ids) == 6 and ids[4] != ids[5]
        d1, t2, t3, t4, gen, dflt = store.get_many(ids)
        assert (d1.kind, d1.task, d1.tier, d1.data, d1.tags, d1.sources) == (
            "fact",
            "t1",
            "mid",
            {"n": [1, 2]},
            ("a", "b"),
            ("t2",),
        )
        assert (t2.kind, t2.tier, t2.data, t2.tags) == ("trace", "long", None, ("c",))
        assert (t3.kind, t3.tier, t3.tags) == ("episode", "archive", ("shared",))
        assert (t4.text, t4.kind) == ("a named tuple", "note")
        assert gen.text == "no id: generated"
        assert (dflt.kind, dflt.tier) == ("episode", "archive")


def test_rows_are_read_when_given_so_changing_them_after_changes_nothing(path: str) -> None:
    rows: list[dict[str, Any]] = [
        {"id": f"r{i:05d}", "text": f"text {i}", "kind": "fact", "task": "t"} for i in range(N)
    ]
    with memcommit.open(path) as store:
        with store.commit() as c:
            c.put_rows(rows, kind="note", task="default")
            for row in rows:
                row["text"], row["kind"], row["task"] = 42, "changed", None
            rows.clear()
        got = store.get_many([f"r{i:05d}" for i in (0, N // 2, N - 1)])
        assert [(m.text, m.kind, m.task) for m in got] == [
            (f"text {i}", "fact", "t") for i in (0, N // 2, N - 1)
        ]
        assert len(store) == N


def _churn() -> list[str]:
    """Make many new strs of many sizes, so that the memory of any str freed before is
    reused (and overwritten) by them."""
    return [f"{j:08d}" * (1 + j % 40) for j in range(200_000)]


def test_strs_given_to_a_bulk_call_and_then_dropped_are_written_as_given(path: str) -> None:
    # Every str a bulk call was given stays as the call saw it until the commit is written,
    # whatever happens to the lists and rows it came in (and to the ids list returned).
    texts = [f"column text {i} " + "y" * (i % 50) for i in range(N)]
    ids = [f"c{i:06d}" + "z" * (i % 7) for i in range(N)]
    kinds = [f"kind-{i % 5}-" + "k" * (i % 3) for i in range(N)]
    tasks = [None if i % 3 == 0 else f"task {i % 11} " + "t" * (i % 4) for i in range(N)]
    rows = [
        {"text": f"row text {i} " + "w" * (i % 60), "kind": f"rk{i % 4}", "task": f"rt{i}"}
        for i in range(N)
    ]
    tuples = [(f"tuple text {i} " + "v" * (i % 30), f"tk{i % 6}") for i in range(N)]
    want_columns = list(zip(list(ids), list(texts), list(kinds), list(tasks), strict=True))
    want_rows = [(r["text"], r["kind"], r["task"]) for r in rows]
    want_tuples = list(tuples)
    with memcommit.open(path) as store:
        with store.commit() as c:
            got_ids = c.put_many(texts, ids=ids, kind=kinds, task=tasks)
            row_ids = c.put_rows(rows)
            tuple_ids = c.put_rows(tuples, fields=("text", "kind"))
            # Keep the values only as bytes, then drop every object the calls were given.
            want_columns = [
                tuple(None if v is None else v.encode() for v in w) for w in want_columns
            ]
            want_rows = [tuple(v.encode() for v in w) for w in want_rows]
            want_tuples = [tuple(v.encode() for v in w) for w in want_tuples]
            row_id_bytes = [i.encode() for i in row_ids]
            tuple_id_bytes = [i.encode() for i in tuple_ids]
            for r in rows:
                r.clear()
            for lst in (texts, ids, kinds, tasks, rows, tuples, got_ids, row_ids, tuple_ids):
                lst.clear()
            churn = _churn()
        del churn
        got = store.get_many([i.decode() for i, *_ in want_columns])
        assert [
            (
                m.id.encode(),
                m.text.encode(),
                m.kind.encode(),
                None if m.task is None else m.task.encode(),
            )
            for m in got
        ] == want_columns
        got = store.get_many([i.decode() for i in row_id_bytes])
        assert [(m.text.encode(), m.kind.encode(), m.task.encode()) for m in got] == want_rows
        got = store.get_many([i.decode() for i in tuple_id_bytes])
        assert [(m.text.encode(), m.kind.encode()) for m in got] == want_tuples
        assert len(store) == 3 * N


def test_a_row_giving_some_fields_of_its_own_takes_the_keywords_for_the_others(path: str) -> None:
    rows: list[dict[str, Any]] = [
        {"text": "own tags", "tags": ("mine",)},
        {"text": "own tier", "tier": "archive"},
        {"text": "own data", "data": {"k": 2}},
        {"text": "nothing of its own"},
    ] * (N // 4)
    with memcommit.open(path) as store:
        with store.commit() as c:
            ids = c.put_rows(rows, data={"k": 1}, tags=("shared",), tier="mid")
        got = [(m.data, m.tags, m.tier) for m in store.get_many(ids[:4])]
        assert got == [
            ({"k": 1}, ("mine",), "mid"),
            ({"k": 1}, ("shared",), "archive"),
            ({"k": 2}, ("shared",), "mid"),
            ({"k": 1}, ("shared",), "mid"),
        ]


def test_rows_from_a_generator_and_a_large_run(path: str) -> None:
    with memcommit.open(path) as store:
        with store.commit() as c:
            ids = c.put_rows(((f"g{i}", f"text {i}") for i in range(3 * N)), kind="fact")
        assert len(store) == 3 * N and ids[-1] == f"g{3 * N - 1}"
        assert store.get("g7").text == "text 7"
        assert [r.lsn for r in store.records()][-1] == c.lsn == 3 * N


BAD: list[tuple[object, type[Exception], str]] = [
    ("not rows", TypeError, r"^rows must be an iterable of rows"),
    ([("ok", "fine"), "a str"], TypeError, r"^rows\[1\] must be a dict or a tuple, not str"),
    ([("ok", "fine"), ["a", "list"]], TypeError, r"^rows\[1\] must be a dict or a tuple, not list"),
    ([("ok", "fine"), ("id",)], ValueError, r"^rows\[1\]: text: a row must give a text"),
    ([("ok", "fine"), {"text": 5}], TypeError, r"^rows\[1\]: text must be str, not int"),
    ([("ok", "fine"), {"txt": "x"}], ValueError, r"^rows\[1\]: 'txt' is not a field of a put"),
    ([("ok", "fine"), tuple("abcdefghij")], ValueError, r"^rows\[1\]: 10 values for the 9 fields"),
    ([("ok", "fine"), ("", "x")], ValueError, r"^rows\[1\]: id: must not be empty"),
    ([("ok", "fine"), (7, "x")], TypeError, r"^rows\[1\]: id must be str, not int"),
    ([("ok", "fine"), ("a", "x", "")], ValueError, r"^rows\[1\]: kind: must not be empty"),
    ([("ok", "fine"), ("a", "x", 3)], TypeError, r"^rows\[1\]: kind must be str, not int"),
    ([("ok", "fine"), ("a", "x", "k", 9)], TypeError, r"^rows\[1\]: task must be str, not int"),
    (
        [("ok", "fine"), {"text": "x", "tier": "nope"}],
        ValueError,
        r"^rows\[1\]: tier: \"nope\" is not a tier",
    ),
    (
        [("ok", "fine"), {"text": "x", "data": 5}],
        TypeError,
        r"^rows\[1\]: data must be a JSON object",
    ),
    (
        [("ok", "fine"), {"text": "x", "data": {1: 2}}],
        ValueError,
        r"^rows\[1\]: data does not survive",
    ),
    (
        [("ok", "fine"), {"text": "x", "tags": "ab"}],
        TypeError,
        r"^rows\[1\]: tags must be a sequence of str",
    ),
    (
        [("ok", "fine"), {"text": "x", "sources": [""]}],
        ValueError,
        r"^rows\[1\]: sources: must not be empty",
    ),
    ([("ok", "fine"), {"text": "\ud800"}], ValueError, r"^rows\[1\]: text: holds a lone surrogate"),
]


@pytest.mark.parametrize(("rows", "error", "message"), BAD, ids=[m for _, _, m in BAD])
def test_a_bad_row_is_named_and_nothing_is_written(
    path: str, rows: object, error: type[Exception], message: str
) -> None:
    with memcommit.open(path) as store:
        store.put("before", id="kept")
        lsn, size = store.lsn, store.info()["bytes"]
        # Row N of a large run, after many good ones.
        good = [(f"g{i}", "good") for i in range(N)]
        for bad in (rows, good + list(rows) if isinstance(rows, list) else rows):
            with pytest.raises(error, match=message.replace(r"rows\[1\]", r"rows\[\d+\]")):
                with store.commit() as c:
                    c.put("also not written", id="other")
                    c.put_rows(bad)  # type: ignore[arg-type]
            assert (store.lsn, store.info()["bytes"], len(store)) == (lsn, size, 1)
            assert "other" not in store


def test_bad_fields_and_keywords_are_named(path: str) -> None:
    with memcommit.open(path) as store:
        _bad_fields(store)
        assert len(store) == 0


def _bad_fields(store: Any) -> None:
    with store.commit() as c:
        with pytest.raises(ValueError, match=r'^fields: "txt" is not a field of a put'):
            c.put_rows([("a",)], fields=("txt",))
        with pytest.raises(ValueError, match=r'^fields: "id" is named twice'):
            c.put_rows([("a", "b")], fields=("id", "id", "text"))
        with pytest.raises(ValueError, match=r"^fields: must name \"text\""):
            c.put_rows([("a",)], fields=("id",))
        with pytest.raises(ValueError, match=r"^tier: \"x\" is not a tier"):
            c.put_rows([("a", "b")], tier="x")
        with pytest.raises(ValueError, match=r"^rows\[0\]: 3 values for the 2 fields \(id, text\)"):
            c.put_rows([("a", "b", "c")], fields=("id", "text"))


def test_a_bad_text_or_id_of_put_many_is_named_by_its_place(path: str) -> None:
    with memcommit.open(path) as store:
        with store.commit() as c:
            with pytest.raises(TypeError, match=r"^texts\[1\] must be str, not int"):
                c.put_many(["a", 2])
            with pytest.raises(ValueError, match=r"^texts\[1\]: holds a lone surrogate"):
                c.put_many(["a", "\udc80"])
            with pytest.raises(ValueError, match=r"^ids\[1\]: must not be empty"):
                c.put_many(["a", "b"], ids=["x", ""])
            with pytest.raises(ValueError, match=r"^ids\[0\]: holds a lone surrogate"):
                c.put_many(["a"], ids=["\udc80"])
        assert len(store) == 0


def test_a_guard_refusing_a_bulk_commit_leaves_nothing(path: str) -> None:
    with memcommit.open(path) as store:
        store.put("x", id="kept")
        lsn, size = store.lsn, store.info()["bytes"]
        with pytest.raises(memcommit.Rejected):
            with store.commit(expect_lsn=lsn + 5) as c:
                c.put_rows(_rows(N))
        with pytest.raises(memcommit.Rejected):
            with store.commit() as c:
                c.put_rows(_rows(N))
                c.expect("kept", exists=False)
        assert (store.lsn, store.info()["bytes"], len(store)) == (lsn, size, 1)
        assert "m000001" not in store
    with memcommit.open(path) as store:
        assert (store.lsn, len(store)) == (lsn, 1)


def test_a_record_over_the_limits_is_refused_by_the_call_that_gives_it(path: str) -> None:
    # Key lengths and the record size are checked by the call, as the commit will check them:
    # the error names the row, and nothing of the call joins the commit, which goes on.
    rows = _rows(40_000)
    rows[36_000] = ("too-big", "fact", None, "y" * 5_000)
    long_id = [*_rows(3), ("i" * 2_000, "fact", None, "text")]
    with memcommit.open(path, max_record_bytes=4096) as store:
        store.put("x", id="kept")
        lsn, size = store.lsn, store.info()["bytes"]
        with store.commit() as c:
            with pytest.raises(
                ValueError, match=r'rows\[36000\]: text: the memory "too-big" would'
            ):
                c.put_rows(rows, fields=("id", "kind", "task", "text"))
            with pytest.raises(
                ValueError, match=r"rows\[3\]: id: is 2000 bytes; the limit is 1024"
            ):
                c.put_rows(long_id, fields=("id", "kind", "task", "text"))
            with pytest.raises(
                ValueError, match=r"record 1 of put_many: text: .* max_record_bytes"
            ):
                c.put_many(["fine", "z" * 5_000])
            c.put("after", id="after")
        assert (store.lsn, len(store)) == (lsn + 1, 2)
        assert store.info()["bytes"] > size
        assert "m000001" not in store and "too-big" not in store
    with memcommit.open(path) as store:
        assert (store.lsn, len(store)) == (lsn + 1, 2)
        assert store.get("after").text == "after"


def test_put_rows_outside_its_block_is_refused(path: str) -> None:
    with memcommit.open(path) as store:
        c = store.commit()
        with pytest.raises(RuntimeError, match="not open"):
            c.put_rows([("a", "b")])


CHILD = textwrap.dedent(
    """
    import sys
    import memcommit
    store = memcommit.open(sys.argv[1])
    n = int(sys.argv[2])
    rows = [(f"k{i:07d}", "text of the memory " + str(i) * 20) for i in range(n)]
    print("B", store.lsn, flush=True)
    with store.commit() as c:
        c.put_rows(rows, kind="fact")
    print("A", store.lsn, flush=True)
    """
)


def test_a_kill_during_a_bulk_commit_leaves_all_of_it_or_none(tmp_path: Path) -> None:
    """kill -9 of a writer while it writes one large bulk commit, at random moments."""
    rng = random.Random(int(os.environ.get("MEMCOMMIT_CRASH_SEED", "7")))
    n = 300_000
    outcomes = []
    for it in range(6):
        path = str(tmp_path / f"kill{it}.db")
        with memcommit.open(path) as store:
            store.put("before", id="first")
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, path, str(n)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("B "), line
        time.sleep(rng.uniform(0.0, 1.5))
        proc.send_signal(signal.SIGKILL)
        rest = proc.stdout.read()
        proc.stdout.close()
        proc.wait()
        acknowledged = "A " in rest
        with memcommit.open(path) as store:
            count = len(store)
            assert count in (1, n + 1), f"iteration {it}: {count} memories, a part of the commit"
            if acknowledged:
                assert count == n + 1, f"iteration {it}: an acknowledged commit was lost"
            if count > 1:
                assert store.get(f"k{n - 1:07d}") is not None and store.lsn == n + 1
            outcomes.append(count > 1)
    # The kill landed before, during or after the commit; in every case all or none of it.
    assert len(outcomes) == 6


def test_a_remote_commit_takes_rows_and_the_server_writes_them(tmp_path: Path) -> None:
    from memcommit.testing import ServerProcess

    with (
        ServerProcess(tmp_path / "served.db") as server,
        memcommit.RemoteStore(server.url) as remote,
    ):
        with remote.commit() as c:
            ids = c.put_rows(
                [("r1", "fact", "t", "from a tuple"), {"text": "from a dict", "tags": ["x"]}],
                fields=("id", "kind", "task", "text"),
                tier="mid",
            )
            with pytest.raises(TypeError, match=r"^rows\[0\]: text must be str, not int"):
                c.put_rows([{"text": 1}])
        # A key's length (and a record's size) is the server's to check, when it commits.
        called = False
        with pytest.raises(ValueError, match="id: is 2000 bytes; the limit is 1024"):
            with remote.commit() as c:
                c.put_rows([("i" * 2_000, "too long an id")], fields=("id", "text"))
                called = True
        assert called
        first, second = remote.get_many(ids)
        assert (first.id, first.kind, first.task, first.tier, first.text) == (
            "r1",
            "fact",
            "t",
            "mid",
            "from a tuple",
        )
        assert (second.text, second.tags, second.tier, second.kind) == (
            "from a dict",
            ("x",),
            "mid",
            "note",
        )
        assert len(remote) == 2
