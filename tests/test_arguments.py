"""Bad arguments get a clear error naming the argument, and nothing is written.

``TypeError`` for a value of the wrong type, ``ValueError`` for a bad value of the right type;
every entry point that takes the same kind of argument gives the same answer. And a message
never contradicts itself ("lsn must be an int, not int") or reads as nonsense ("expected
exists exists").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memcommit
from memcommit import AutoSeal, Rejected
from memcommit.roles.values import MAX_TTL_MS

MAX_U64 = 2**64 - 1


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[memcommit.MemoryStore]:
    where = str(tmp_path / "memory.db") if request.param == "file" else ":memory:"
    with memcommit.open(where, durability="none") as s:
        s.put("first", id="m1")
        yield s


def unchanged(
    store: memcommit.MemoryStore, call: Callable[[], object], error: type, match: str
) -> None:
    """`call` raises `error` matching `match` and writes nothing."""
    head, count = store.lsn, len(store)
    with pytest.raises(error, match=match) as ei:
        call()
    assert error is not TypeError or " not int" not in str(ei.value), str(ei.value)
    assert (store.lsn, len(store)) == (head, count)


# -- LSNs and counts: the ints the engine keeps in 64 bits ------------------------------------


def u64_cases(name: str, must_be: str, a_str: str, a_bool: bool) -> list[tuple[object, type, str]]:
    """(value, error, match) for the four wrong values every 64-bit int argument refuses:
    negative, too large, a str (`a_str`) and a bool (`a_bool`), for an argument that must be
    `must_be` ("an int", "an int or None")."""
    return [
        (-1, ValueError, rf"^{name}: must not be negative, got -1$"),
        (2**64, ValueError, rf"^{name}: must be at most 18446744073709551615"),
        (a_str, TypeError, rf"^{name} must be {must_be}, not str$"),
        (a_bool, TypeError, rf"^{name} must be {must_be}, not bool$"),
    ]


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (-1, ValueError, r"^after: must not be negative, got -1$"),
        (2**64, ValueError, r"^after: must be at most 18446744073709551615 \(2\*\*64 - 1\)"),
        pytest.param(10**5000, ValueError, r"^after: .*an int of 16610 bits", id="huge"),
        ("1", TypeError, r"^after must be an int, not str$"),
        (True, TypeError, r"^after must be an int, not bool$"),
        (1.0, TypeError, r"^after must be an int, not float$"),
    ],
)
def test_records_after(store: memcommit.MemoryStore, value: Any, error: type, match: str) -> None:
    # Raised by the call itself, before anything is iterated.
    unchanged(store, lambda: store.records(after=value), error, match)
    assert [r.lsn for r in store.records(after=MAX_U64)] == []
    assert [r.lsn for r in store.records(after=0)] == [1]


@pytest.mark.parametrize(("value", "error", "match"), u64_cases("expect_lsn", "an int", "1", True))
def test_commit_expect_lsn(
    store: memcommit.MemoryStore, value: Any, error: type, match: str
) -> None:
    unchanged(store, lambda: store.commit(expect_lsn=value), error, match)
    with pytest.raises(Rejected):
        with store.commit(expect_lsn=MAX_U64) as c:
            c.put("refused")


@pytest.mark.parametrize(
    ("value", "error", "match"), u64_cases("lsn", "an int or None", "1", False)
)
def test_expect_lsn_guard(
    store: memcommit.MemoryStore, value: Any, error: type, match: str
) -> None:
    def commit() -> None:
        with store.commit() as c:
            c.put("would be written", id="other")
            c.expect("m1", lsn=value)

    unchanged(store, commit, error, match)
    assert "other" not in store


@pytest.mark.parametrize(
    ("value", "error", "match"), u64_cases("limit", "an int or None", "3", True)
)
def test_find_limit(store: memcommit.MemoryStore, value: Any, error: type, match: str) -> None:
    unchanged(store, lambda: store.find(limit=value), error, match)
    assert [m.id for m in store.find(limit=MAX_U64)] == ["m1"]
    assert store.find(limit=0) == []


def test_open_and_auto_seal_ints(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    for name in ("flush_interval_ms", "max_record_bytes"):
        with pytest.raises(ValueError, match=f"^{name}: must be at most 18446744073709551615"):
            memcommit.open(path, **{name: 2**64})
        with pytest.raises(ValueError, match=f"^{name}: must be positive, got 0$"):
            memcommit.open(path, **{name: 0})
        with pytest.raises(TypeError, match=f"^{name} must be an int, not str$"):
            memcommit.open(path, **{name: "1"})
    assert not path.exists()
    with memcommit.open(":memory:") as store:
        with pytest.raises(ValueError, match=r"^every: must be at most 18446744073709551615"):
            AutoSeal(store, every=2**64)
        assert store.seals() == []


# -- guards: the reason reads as a sentence ------------------------------------------------


def refused(store: memcommit.MemoryStore, **guard: Any) -> Rejected:
    with pytest.raises(Rejected) as ei:
        with store.commit() as c:
            c.expect(guard.pop("id", "m1"), **guard)
    return ei.value


def test_every_guard_reason_reads_well(store: memcommit.MemoryStore) -> None:
    cases = {
        "must exist": (
            dict(id="ghost", exists=True),
            'guard failed on memory "ghost": the commit expects it to exist, but the store '
            "has no memory with that id; nothing was written",
        ),
        "must not exist": (
            dict(exists=False),
            'guard failed on memory "m1": the commit expects no memory with that id, but one '
            "exists; nothing was written",
        ),
        "a field of a memory that does not exist": (
            dict(id="ghost", status="active"),
            'guard failed on memory "ghost": the commit expects it to exist, but the store '
            "has no memory with that id; nothing was written",
        ),
        "status": (
            dict(status="stale"),
            'guard failed on memory "m1": the commit expects status stale, but it is active; '
            "nothing was written",
        ),
        "tier": (
            dict(tier="long"),
            'guard failed on memory "m1": the commit expects tier long, but it is in tier '
            "working; nothing was written",
        ),
        "lsn": (
            dict(lsn=5),
            'guard failed on memory "m1": the commit expects its newest record at LSN 5, but '
            "that is at LSN 1 (another commit changed it: read it again and retry); nothing "
            "was written",
        ),
    }
    for name, (guard, reason) in cases.items():
        err = refused(store, **guard)
        assert err.reason == reason == str(err), name
        assert "exists exists" not in err.reason
    # The guard's values keep their natural types.
    assert refused(store, id="ghost", exists=True).guard == memcommit.Guard(
        "exists", "ghost", True, False
    )
    assert refused(store, lsn=5).guard == memcommit.Guard("lsn", "m1", 5, 1)
    assert store.lsn == 1


# -- ids -------------------------------------------------------------------------------------


def test_get_many_refuses_a_single_str(store: memcommit.MemoryStore) -> None:
    with pytest.raises(TypeError, match=r"^ids must be a sequence of ids, not a single str"):
        store.get_many("m1")
    with pytest.raises(TypeError, match=r"^ids\[1\] must be str, not int$"):
        store.get_many(["m1", 1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"^ids\[0\]: must not be empty$"):
        store.get_many([""])
    with pytest.raises(TypeError, match=r"^ids must be a sequence of ids, not int$"):
        store.get_many(5)  # type: ignore[arg-type]
    got = store.get_many(("m1", "none"))
    assert got[0] is not None and got[0].id == "m1" and got[1] is None
    assert store.get_many(iter(["m1"]))[0] is not None


def test_a_put_names_an_unknown_field_and_writes_nothing(store: memcommit.MemoryStore) -> None:
    def in_commit(op: Callable[[memcommit.Commit], object]) -> Callable[[], object]:
        def call() -> None:
            with store.commit() as c:
                op(c)

        return call

    bad: list[tuple[Callable[[], object], str]] = [
        (lambda: store.put("x", colour="red"), "colour"),  # type: ignore[call-arg]
        (in_commit(lambda c: c.put("x", colour="red")), "colour"),  # type: ignore[call-arg]
        (in_commit(lambda c: c.put("x", ids=["a"])), "ids"),  # type: ignore[call-arg]
        (in_commit(lambda c: c.put_many(["x"], id="a")), "id"),  # type: ignore[call-arg]
        (in_commit(lambda c: c.put_many(["x"], tag=["a"])), "tag"),  # type: ignore[call-arg]
    ]
    for call, name in bad:
        unchanged(store, call, TypeError, rf"unexpected keyword argument '{name}'")
    # None is a field's default, as when it is left out.
    with store.commit() as c:
        mid = c.put("y", kind=None, tier=None, tags=None)  # type: ignore[arg-type]
        (many,) = c.put_many(["z"], kind=None, ids=None, task=None)  # type: ignore[arg-type]
    got, got_many = store.get(mid), store.get(many)
    assert got is not None and (got.kind, got.tier, got.tags) == ("note", "working", ())
    assert got_many is not None and (got_many.kind, got_many.task) == ("note", None)


# -- a commit is a with block ----------------------------------------------------------------


def test_a_commit_used_without_with_refuses_operations(store: memcommit.MemoryStore) -> None:
    c = store.commit()
    for op in (
        lambda: c.put("never written"),
        lambda: c.put_many(["never", "written"]),
        lambda: c.stale("m1"),
        lambda: c.restore("m1"),
        lambda: c.move("m1", "long"),
        lambda: c.finish_task("t"),
        lambda: c.expect("m1", exists=True),
    ):
        unchanged(store, op, RuntimeError, r"with store\.commit\(\) as c:")
    # Entered late, it works as any commit.
    with c:
        mid = c.put("written")
    assert store.get(mid) is not None and c.lsn == store.lsn == 2


# -- data ------------------------------------------------------------------------------------


def nested(depth: int) -> dict[str, Any]:
    data: dict[str, Any] = {}
    inner = data
    for _ in range(depth):
        inner["a"] = {}
        inner = inner["a"]
    return data


def test_deeply_nested_data_is_a_value_error_at_every_entry_point(
    store: memcommit.MemoryStore,
) -> None:
    deep = nested(5_000)

    def in_commit(put: Callable[[Any], object]) -> Callable[[], None]:
        def run() -> None:
            with store.commit() as c:
                c.put("would be written", id="other")
                put(c)

        return run

    for call in (
        lambda: store.put("deep", data=deep),
        in_commit(lambda c: c.put("deep", data=deep)),
        in_commit(lambda c: c.put_many(["deep"], data=deep)),
    ):
        unchanged(store, call, ValueError, r"^data: nested too deeply to store")
    assert "other" not in store
    mid = store.put("shallow enough", data=nested(100))
    assert store.get(mid).data == nested(100)


# -- the roles: a lease's length -------------------------------------------------------------


def test_a_lease_longer_than_a_century_is_refused(store: memcommit.MemoryStore) -> None:
    for ttl in (10**30, MAX_TTL_MS + 1, 10**5000):
        unchanged(
            store,
            lambda ttl=ttl: store.locks.acquire("job", "a", ttl),
            ValueError,
            "^ttl_ms: must be at most",
        )
    assert store.locks.get("job") is None
    lease = store.locks.acquire("job", "a", MAX_TTL_MS)
    assert lease is not None
    unchanged(
        store,
        lambda: store.locks.renew("job", token=lease.token, ttl_ms=10**30),
        ValueError,
        "^ttl_ms: must be at most",
    )
    store.runs.create(agent_id="a", run_id="r1")
    unchanged(
        store,
        lambda: store.runs.claim("r1", worker_id="w", ttl_ms=10**30),
        ValueError,
        "^ttl_ms: must be at most",
    )


def test_put_many_refuses_ids_given_as_one_str(store: memcommit.MemoryStore) -> None:
    """A str is a sequence of characters: read as ids, "ab" put two memories, "a" and "b"."""

    def put() -> None:
        with store.commit() as c:
            c.put_many(["first", "second"], ids="ab")

    unchanged(store, put, memcommit.InvalidType, r"^ids must be a sequence of str, not a single")


@pytest.mark.parametrize("field", ["tags", "sources"])
@pytest.mark.parametrize("value", [b"ab", bytearray(b"ab"), {"a": 1}])
def test_tags_and_sources_refuse_bytes_and_mappings(
    store: memcommit.MemoryStore, field: str, value: Any
) -> None:
    """Bytes iterate as ints and a mapping as its keys: neither is a sequence of str."""
    match = rf"^{field} must be a sequence of str, not {type(value).__name__}"
    unchanged(store, lambda: store.put("t", **{field: value}), memcommit.InvalidType, match)
    if field == "tags":
        with pytest.raises(memcommit.InvalidType, match=r"^tags must be"):
            store.find(tags=value)


@pytest.mark.parametrize("value", [{0: 0.5, 1: 0.25}, {0.5, 0.25}, frozenset({0.5})])
def test_a_vector_is_not_a_mapping_or_a_set(store: memcommit.MemoryStore, value: Any) -> None:
    """A mapping iterates as its keys and a set has no order: either would store other numbers
    than the caller meant."""
    match = rf"^vector must be a sequence of numbers, not {type(value).__name__}"
    unchanged(store, lambda: store.put("t", vector=value), memcommit.InvalidType, match)


LONE = "\ud800"


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda s: s.get(LONE), "id"),
        (lambda s: s.get_many(["m1", LONE]), r"ids\[1\]"),
        (lambda s: s.history(LONE), "id"),
        (lambda s: LONE in s, "id"),
        (lambda s: s.is_purged(LONE), "id"),
        (lambda s: s.is_task_finished(LONE), "task"),
        (lambda s: s.find(kind=LONE), "kind"),
        (lambda s: s.find(task=LONE), "task"),
        (lambda s: s.find(tags=[LONE]), "tags"),
        (lambda s: s.find(tier=LONE), "tier"),
        (lambda s: s.find(status=LONE), "status"),
        (lambda s: s.search(LONE, mode="text"), "query"),
        (lambda s: s.search("x", kind=LONE), "kind"),
        (lambda s: s.lineage(LONE), "id"),
        (lambda s: s.move("m1", LONE), "tier"),
    ],
)
def test_a_lone_surrogate_in_a_read_or_a_tier_names_the_argument(
    store: memcommit.MemoryStore, call: Callable[[memcommit.MemoryStore], object], names: str
) -> None:
    """A str UTF-8 cannot hold (a lone surrogate, as from a bad decode) is a bad value of the
    argument that holds it, as for writes: not Python's UnicodeEncodeError."""
    match = rf"^{names}: holds a lone surrogate"
    unchanged(store, lambda: call(store), memcommit.InvalidValue, match)


@pytest.mark.parametrize(
    ("path", "match"), [("", r"^path: must not be empty"), ("a\x00b.db", r"^path: .* NUL")]
)
def test_a_path_no_file_can_have_is_refused_and_nothing_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, match: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(memcommit.InvalidValue, match=match):
        memcommit.open(path)
    assert list(tmp_path.iterdir()) == []
