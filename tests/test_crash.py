"""Kill -9 loop (storage-reliability plan, test T1): no acknowledged commit is ever lost.

A child process (``tests/crash_child.py``) opens one store file with a given durability
(see below) and commits a seeded random mix of work: single puts, replacing puts,
stale/restore/move, multi-record commits mixing put/stale/move, and commits of several
puts. Before each commit it announces the records it is about to append, and
after the commit returns it reports the acknowledged LSN, both on a pipe. The parent
sends SIGKILL at a random moment (sometimes before or during open and recovery), reads
every line that got through, reopens the store and checks that

* every acknowledged commit is present, record by record, with the right content;
* the log is a prefix with no holes: ``store.records()`` yields LSNs 1..store.lsn;
* nothing partial survives: past the last acknowledged commit there is either nothing
  or the whole in-flight commit, never part of it;
* the replayed state (text, kind, data, tags, tier, status of every memory) equals the
  state the acknowledged records describe.

The next iteration reopens the SAME file, so later kills hit a longer log. In about a
third of the iterations the parent checks through a read-only open, which never
truncates, so any torn tail is left for the next child's open to cut. A SIGKILL seldom
lands inside a write() (the child also makes multi-megabyte commits to widen that
window), so after some writer checks the parent also leaves a real torn tail itself: it
commits a few puts and cuts the file at a random byte inside them. The next child's open
must cut exactly those bytes (checked), and half the time the kill aims at that open.

This is a process crash, not a power loss: data the kernel accepted survives the kill
(power loss would need a fault-injecting file system, plan T3).

The loop runs once per durability mode, each on its own file: ``test_kill9_loop`` under
"commit" (the default), ``test_kill9_loop_unsynced`` under "batch" and "none", whose
commits return once written to the OS, before any fsync. README's durability table
promises the same for all three in its kill -9 column ("nothing acknowledged" lost), so
every check is the same in every mode (see ``kill9_loop``). What the modes differ in, what
a power loss can take, is out of reach here. ``test_none_fsyncs_only_at_close_*`` check the
other half of the "none" row: no fsync before close().

Iterations come from ``MEMCOMMIT_KILLS`` (default 50, for CI) for "commit", and a third of
that (default 16) each for "batch" and "none". The release setting (10000 kills under
"commit", 3333 under each of the other two):

    MEMCOMMIT_KILLS=10000 pytest tests/test_crash.py

``MEMCOMMIT_CRASH_SEED`` fixes the seed (printed in every failure message); the kill
timing is real time and so not reproducible exactly.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import memcommit

sys.path.insert(0, str(Path(__file__).parent))
from crash_child import content_digest, every_kind_of_commit

CHILD = Path(__file__).with_name("crash_child.py")
KILLS = int(os.environ.get("MEMCOMMIT_KILLS", "50"))
# "batch" and "none" each run a third as many kills (CI: 16 each, so about half as long again).
UNSYNCED_KILLS = max(1, KILLS // 3)
SEED = int(os.environ.get("MEMCOMMIT_CRASH_SEED", str(random.SystemRandom().randrange(2**32))))
# A long run starts a fresh file once the log holds this many records or bytes, so that
# one iteration's check and the child's replay stay bounded.
ROTATE_RECORDS = 100_000
ROTATE_BYTES = 256 * 1024 * 1024
# Every FULL_EVERY iterations (and at the end) the check recomputes every content digest.
FULL_EVERY = 20
HEADER_BYTES = 64  # ARCHITECTURE.md: a log file starts with a 64-byte header


@dataclass
class ChildReport:
    opened: bool = False
    ready_lsn: int | None = None
    ready_count: int | None = None
    recovered: int | None = None
    commits: list[tuple[list[list[Any]], int]] = field(default_factory=list)  # (ops, lsn)
    in_flight: list[list[Any]] | None = None


def parse(out: bytes) -> ChildReport:
    """Read the child's lines; a line cut by the kill (no newline) never counts."""
    rep = ChildReport()
    text = out.decode("utf-8")
    lines = text.split("\n")
    complete = lines[:-1]  # the last piece has no newline: empty or cut
    for line in complete:
        tag, _, rest = line.partition(" ")
        if tag == "O":
            rep.opened = True
        elif tag == "R":
            a, b, c = rest.split()
            rep.ready_lsn, rep.ready_count, rep.recovered = int(a), int(b), int(c)
        elif tag == "B":
            assert rep.in_flight is None, f"two intents without an ack: {line!r}"
            rep.in_flight = json.loads(rest)
        elif tag == "A":
            assert rep.in_flight is not None, f"ack without intent: {line!r}"
            rep.commits.append((rep.in_flight, int(rest)))
            rep.in_flight = None
        else:
            raise AssertionError(f"unexpected child output line {line!r}")
    return rep


def run_child(
    path: Path, seed: int, rng: random.Random, aim_at_open: bool = False, durability: str = "commit"
) -> tuple[ChildReport, str, str]:
    """Start the child, SIGKILL it at a random moment, return what it acknowledged.

    With ``aim_at_open`` (a torn tail is waiting to be cut) half the kills aim at the open.
    """
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(path), str(seed), durability],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    chunks: list[bytes] = []
    errs: list[bytes] = []
    opening = threading.Event()
    ready = threading.Event()

    def pump_out() -> None:
        assert proc.stdout is not None
        while True:
            chunk = proc.stdout.read1(65536)
            if not chunk:
                break
            chunks.append(chunk)
            joined = b"".join(chunks)
            if joined.startswith(b"O\n"):
                opening.set()
            if b"\nR " in joined:
                ready.set()
        opening.set()
        ready.set()

    def pump_err() -> None:
        assert proc.stderr is not None
        errs.append(proc.stderr.read())

    threads = [threading.Thread(target=pump_out), threading.Thread(target=pump_err)]
    for t in threads:
        t.start()
    mode = rng.random()
    if aim_at_open and rng.random() < 0.5:
        mode = 0.1
    if mode < 0.08:
        how = "early"  # anywhere in interpreter start, import or open
        threading.Event().wait(rng.uniform(0.0, 0.25))
    elif mode < 0.18:
        how = "opening"  # right as open (and any recovery) runs
        opening.wait(30)
        threading.Event().wait(rng.uniform(0.0, 0.004))
    else:
        how = "committing"
        ready.wait(30)
        threading.Event().wait(rng.uniform(0.0, 0.3))
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    for t in threads:
        t.join(30)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    err = b"".join(errs).decode("utf-8", "replace")
    assert proc.returncode == -signal.SIGKILL, (
        f"child exited by itself with {proc.returncode} (seed {seed}):\n{err}"
    )
    return parse(b"".join(chunks)), how, err


class Oracle:
    """What the log must hold: one expected record per LSN, and the state they build."""

    def __init__(self) -> None:
        self.log: list[list[Any]] = []  # index i holds the op of LSN i + 1
        self.acked = 0  # acknowledged commits, all iterations
        self.verified = 0  # records whose content a check has verified

    def extend(self, ops: list[list[Any]]) -> None:
        self.log.extend(ops)

    def state(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for op in self.log:
            if op[0] == "put":
                m = out.get(op[1])
                if m is None:
                    out[op[1]] = {"digest": op[2], "tier": op[3], "status": "active"}
                else:
                    m["digest"] = op[2]
            elif op[0] == "status":
                out[op[1]]["status"] = op[2]
            else:
                out[op[1]]["tier"] = op[2]
        return out


OP_NAMES = {"put": "put", "status": "status", "move": "move"}


def record_matches(rec: Any, op: list[Any], content: bool = True) -> bool:
    """Whether `rec` is the record `op` describes (with content=False: same op and key)."""
    if rec.key != op[1]:
        return False
    if not content:
        return bool(rec.op == OP_NAMES[op[0]])
    f = rec.fields
    if op[0] == "put":
        return (
            rec.op == "put" and content_digest(f["kind"], f["text"], f["data"], f["tags"]) == op[2]
        )
    if op[0] == "status":
        return rec.op == "status" and f["status"] == op[2]
    return rec.op == "move" and f["tier"] == op[2]


def check(store: Any, oracle: Oracle, rep: ChildReport, ctx: str, full: bool) -> None:
    """Check the reopened store against the oracle plus this child's report.

    On success the oracle is extended with what the log now holds (the acknowledged
    commits, and the in-flight commit if it was found whole). Every record's LSN, op and
    key, and every memory's tier and status, are checked each time; the content digests
    of records and memories an earlier check already verified are recomputed only when
    `full` (the digests cost time in proportion to the whole log's bytes).
    """
    verified = 0 if full else oracle.verified
    base = len(oracle.log)
    if rep.ready_lsn is not None:
        assert rep.ready_lsn == base, f"{ctx}: child opened at LSN {rep.ready_lsn}, expected {base}"
    expected = list(oracle.log)
    lsn = base
    for ops, ack in rep.commits:
        assert ack == lsn + len(ops), (
            f"{ctx}: commit of {len(ops)} records acknowledged at LSN {ack}, previous head {lsn}"
        )
        expected.extend(ops)
        lsn = ack
    last_ack = lsn

    records = list(store.records())
    lsns = [r.lsn for r in records]
    assert lsns == list(range(1, len(records) + 1)), f"{ctx}: the log has holes or disorder"
    assert store.lsn == len(records), f"{ctx}: store.lsn {store.lsn} but {len(records)} records"

    # (a) every acknowledged record present, (b) as a prefix
    assert store.lsn >= last_ack, (
        f"{ctx}: LOST acknowledged commits: head {store.lsn} < acknowledged {last_ack}"
    )
    for i, op in enumerate(expected):
        rec = records[i]
        assert record_matches(rec, op, content=i >= verified), (
            f"{ctx}: LSN {rec.lsn} holds {rec.op} {rec.key!r} {rec.fields!r}, expected {op!r}"
        )

    # all or nothing past the last acknowledged commit
    extra = store.lsn - last_ack
    if extra:
        flight = rep.in_flight
        assert flight is not None, (
            f"{ctx}: {extra} records past the last acknowledged LSN {last_ack}, and no commit "
            f"was in flight"
        )
        assert extra == len(flight), (
            f"{ctx}: PARTIAL commit: {extra} of the {len(flight)} records of the in-flight "
            f"commit survived"
        )
        for i, op in enumerate(flight):
            rec = records[last_ack + i]
            assert record_matches(rec, op), f"{ctx}: in-flight LSN {rec.lsn} {rec!r} != {op!r}"
        expected.extend(flight)

    oracle.log = expected
    oracle.acked += len(rep.commits)
    touched = {op[1] for op in expected[verified:]}
    oracle.verified = len(expected)

    # (c) replayed state equals the state the records describe
    want = oracle.state()
    assert len(store) == len(want), f"{ctx}: {len(store)} memories, expected {len(want)}"
    ids = sorted(want)
    for mid, m in zip(ids, store.get_many(ids), strict=True):
        assert m is not None, f"{ctx}: memory {mid!r} missing"
        digest = want[mid]["digest"]
        if mid in touched:
            digest = content_digest(m.kind, m.text, m.data, m.tags)
        got = {"digest": digest, "tier": m.tier, "status": m.status}
        assert got == want[mid], f"{ctx}: memory {mid!r} is {got}, expected {want[mid]}"


def tear_a_commit(path: Path, rng: random.Random) -> int:
    """Leave the torn tail a crash mid-write leaves: a commit cut at a random byte.

    Commits a few puts, then cuts the file inside that commit (possibly on a record
    boundary, which still lacks the commit's end). Returns the bytes the next open must cut.
    """
    with memcommit.open(str(path), durability="none") as store:
        before = store.info()["bytes"]
        with store.commit() as c:
            c.put_many([f"torn {i} " * rng.randint(1, 400) for i in range(rng.randint(1, 5))])
        after = store.info()["bytes"]
    cut = rng.randrange(before + 1, after)
    os.truncate(path, cut)
    return cut - before


def test_kill9_loop(tmp_path: Path) -> None:
    kill9_loop(tmp_path, "commit", KILLS)


@pytest.mark.parametrize("durability", ["batch", "none"])
def test_kill9_loop_unsynced(tmp_path: Path, durability: str) -> None:
    """The same loop when commits return before any fsync (README: kill -9 loses nothing)."""
    kill9_loop(tmp_path, durability, UNSYNCED_KILLS)


def kill9_loop(tmp_path: Path, durability: str, kills: int) -> None:
    """Kill the child `kills` times, checking the store after each kill (module docstring).

    The checks hold alike in every mode. A SIGKILL leaves the kernel's page cache, so the
    next open reads what the child wrote whether or not it had been fsynced; the zeros a
    writer writes ahead of its commits (``recovered_bytes`` after a kill) are written in
    every mode; and what an open cuts depends on the file, not on the mode it is opened in.
    """
    # "commit" keeps the seeds it has always had; the other modes get kill timings of their
    # own (and the child mixes the mode into its workload's seed).
    rng = random.Random(SEED if durability == "commit" else f"{durability} {SEED}")
    path = tmp_path / "crash.db"
    oracle = Oracle()
    hows: dict[str, int] = {}
    truncated: list[int] = []
    child_cuts = 0  # child opens that cut a torn tail
    killed_in_recovery = 0  # kills after "O" and before "R" with a torn tail to cut
    files = 1
    # Bytes the next open must cut from the tail: known after a tear_a_commit, None when a
    # kill may have torn a write (then any amount is fine).
    torn: int | None = 0
    for it in range(kills):
        if len(oracle.log) > ROTATE_RECORDS or (
            path.exists() and path.stat().st_size > ROTATE_BYTES
        ):
            files += 1
            path = tmp_path / f"crash{files}.db"
            oracle = Oracle()
            torn = 0
        seed = SEED * 100_000 + it
        rep, how, _err = run_child(path, seed, rng, aim_at_open=bool(torn), durability=durability)
        hows[how] = hows.get(how, 0) + 1
        ctx = (
            f"iteration {it} (durability {durability}, MEMCOMMIT_CRASH_SEED={SEED}, "
            f"child seed {seed}, kill {how})"
        )
        if not path.exists():
            # Killed before the child created the file: nothing can have been acknowledged.
            assert not rep.commits and rep.ready_lsn is None, ctx
            continue
        child_cuts += bool(rep.recovered)
        killed_in_recovery += bool(rep.opened and rep.ready_lsn is None and torn)
        if rep.ready_lsn is not None and torn is not None:
            assert rep.recovered == torn, f"{ctx}: the child's open cut {rep.recovered}, not {torn}"
        # Whatever the child's open had to cut is still there if the kill came before it.
        may_cut = {0, torn} if rep.ready_lsn is None and torn is not None else None
        if rng.random() < 0.33:
            # A reader never truncates: the torn tail stays for the next child's open.
            size = path.stat().st_size
            with memcommit.open(str(path), read_only=True) as store:
                assert store.read_only
                check(store, oracle, rep, ctx + " [read-only]", full=it % FULL_EVERY == 0)
            assert path.stat().st_size == size, f"{ctx}: a read-only open changed the file"
            # Known only if no child open or commit can have touched the tail.
            torn = 0 if rep.ready_lsn is None and torn == 0 else None
        else:
            with memcommit.open(str(path)) as store:
                truncated.append(store.recovered_bytes)
                if may_cut is not None:
                    assert store.recovered_bytes in may_cut, (
                        f"{ctx}: open cut {store.recovered_bytes} bytes, expected one of {may_cut}"
                    )
                size_at_open = store.info()["bytes"]
                check(store, oracle, rep, ctx, full=it % FULL_EVERY == 0)
            assert path.stat().st_size == size_at_open, (
                f"{ctx}: file is {path.stat().st_size} bytes after recovery, store said "
                f"{size_at_open}"
            )
            torn = 0
            if rng.random() < 0.3:
                torn = tear_a_commit(path, rng)
    # A final writer open recovers whatever the last kill left and loses nothing checked.
    with memcommit.open(str(path)) as store:
        assert store.lsn == len(oracle.log)
        check(store, oracle, ChildReport(), f"final check ({durability})", full=True)
        if torn is not None:
            assert store.recovered_bytes == torn
    print(
        f"\nkill -9 loop ({durability}): {kills} kills (seed {SEED}), {oracle.acked} "
        f"acknowledged commits "
        f"in the last file, {len(oracle.log)} records, kills by phase {hows}, "
        f"writer opens that cut a torn tail: {sum(1 for t in truncated if t)} of "
        f"{len(truncated)}, bytes cut max {max(truncated, default=0)}, child opens that cut "
        f"one: {child_cuts}, kills during an open with a tail to cut: {killed_in_recovery}"
    )


@pytest.mark.parametrize("n", [1, 3])
def test_parse_ignores_cut_lines(n: int) -> None:
    """The harness itself: a line without its newline is not acknowledged."""
    ops = [["put", f"x{i}", "d", "working"] for i in range(n)]
    out = f"O\nR 0 0 0\nB {json.dumps(ops)}\nA {n}\nB {json.dumps(ops)}\nA {2 * n}".encode()
    rep = parse(out)
    assert rep.opened and rep.ready_lsn == 0
    assert [lsn for _, lsn in rep.commits] == [n]
    assert rep.in_flight == ops


def test_a_kill_under_batch_keeps_every_automatic_seal_it_reported(tmp_path: Path) -> None:
    """README, "batch" row: a crash of the process loses nothing, automatic seals included.

    Each put returns with its record and the automatic seal appended after it in the file.
    The flusher, writing the put out while the seal waited for the chain thread, used to leave
    the seal queued, so the store reported an LSN that a ``kill -9`` then took back (the last
    put's seal, in about half the runs of this child).
    """
    child = textwrap.dedent(
        """
        import os, signal, sys
        import memcommit
        store = memcommit.open(sys.argv[1], durability="batch", flush_interval_ms=1)
        memcommit.AutoSeal(store, every=1)
        for i in range(100):
            store.put(f"note {i} " + "x" * 60_000)  # a long hash for the seal to wait on
        print(store.lsn, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    paths = [tmp_path / f"sealed-{n}.db" for n in range(12)]
    for group in (paths[:6], paths[6:]):
        runs = [
            subprocess.Popen(
                [sys.executable, "-c", child, str(p)], stdout=subprocess.PIPE, text=True
            )
            for p in group
        ]
        for run in runs:
            out, _ = run.communicate(timeout=120)
            assert run.returncode == -signal.SIGKILL
            assert out.split() == ["200"]
    for path in paths:
        with memcommit.open(str(path), read_only=True) as store:
            assert (store.lsn, len(store.seals())) == (200, 100), path.name
            assert memcommit.verify(store).seals_checked == 100


def test_kill_during_create_leaves_an_openable_store(tmp_path: Path) -> None:
    """A new log appears whole (temp file, fsync, rename) or not at all.

    What a kill during creation can leave at the path is nothing or an empty file (for
    example from ``touch``); both open as a new, empty store.
    """
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with memcommit.open(str(empty)) as store:
        assert store.lsn == 0 and len(store) == 0
        mid = store.put("after the cut")
    with memcommit.open(str(empty)) as store:
        assert store.lsn == 1
        assert store.get(mid).text == "after the cut"
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]


@pytest.mark.parametrize("keep", [1, 8, 40, 63])
def test_a_partial_header_is_refused_not_overwritten(tmp_path: Path, keep: int) -> None:
    """A file that is not a whole log is never taken over: it may be someone else's."""
    full = tmp_path / "full.db"
    with memcommit.open(str(full)):
        pass
    header = full.read_bytes()[:HEADER_BYTES]
    assert len(header) == HEADER_BYTES
    cut = tmp_path / "cut.db"
    cut.write_bytes(header[:keep])
    with pytest.raises(memcommit.CorruptLog) as info:
        memcommit.open(str(cut))
    assert info.value.offset == 0
    assert str(cut) in str(info.value)
    assert cut.read_bytes() == header[:keep]


def test_none_fsyncs_only_at_close_by_counter(tmp_path: Path) -> None:
    """README, "none" row: "fsync only at close()" (flush() asks for one explicitly).

    The store's own count of log fsyncs (``info()["fsyncs"]``) stays 0 through every kind of
    commit, on a new log and on a reopened one; flush() moves it, so the count is live.
    """
    path = tmp_path / "none.db"
    for reopen in (False, True):
        with memcommit.open(str(path), durability="none") as store:
            assert store.info()["durability"] == "none"
            start = store.lsn
            every_kind_of_commit(store)
            assert store.lsn > start
            assert store.info()["fsyncs"] == 0, f"reopen={reopen}: a commit fsynced"
            store.flush()
            assert store.info()["fsyncs"] == 1
            store.put("after the flush")
            assert store.info()["fsyncs"] == 1, f"reopen={reopen}: a commit fsynced"
    with memcommit.open(str(path), read_only=True) as store:
        assert [r.lsn for r in store.records()] == list(range(1, store.lsn + 1))


NONE_SYSCALL_CHILD = """
import os, sys
import memcommit
sys.path.insert(0, sys.argv[3])
from crash_child import every_kind_of_commit

def mark(name):
    try:
        os.close(os.open(sys.argv[2] + name, os.O_RDONLY))
    except FileNotFoundError:
        pass

store = memcommit.open(sys.argv[1], durability="none")
mark("-opened")
every_kind_of_commit(store)
n = store.info()["fsyncs"]
mark("-closing")
store.close()
mark("-closed")
print("fsyncs", n)
"""


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
@pytest.mark.parametrize("existing", [False, True], ids=["new", "reopened"])
def test_none_fsyncs_only_at_close_by_strace(tmp_path: Path, existing: bool) -> None:
    """The same, seen from the kernel: no fsync or fdatasync from any thread of the process
    (the Rust core's included) between the end of open() and close(), at least one in close().
    """
    path = tmp_path / "none.db"
    if existing:
        with memcommit.open(str(path)) as store:
            every_kind_of_commit(store)
    marker = str(tmp_path / "MARK")
    trace = tmp_path / "strace.txt"
    child = [sys.executable, "-c", NONE_SYSCALL_CHILD, str(path), marker, str(CHILD.parent)]
    proc = subprocess.run(
        ["strace", "-f", "-e", "trace=fsync,fdatasync,openat", "-o", str(trace), *child],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0 and "ptrace" in proc.stderr and "fsyncs" not in proc.stdout:
        pytest.skip(f"strace cannot trace here: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 0, proc.stderr
    phase = "open"
    syncs: dict[str, list[str]] = {"open": [], "commits": [], "close": []}
    for line in trace.read_text().splitlines():
        if marker + "-opened" in line:
            phase = "commits"
        elif marker + "-closing" in line:
            phase = "close"
        elif marker + "-closed" in line:
            phase = "after"
        elif re.search(r"\b(fsync|fdatasync)\(", line) and phase != "after":
            syncs[phase].append(line)
    assert phase == "after", "the markers are missing from the trace"
    assert not syncs["commits"], "fsyncs between open() and close() under durability='none':\n" + (
        "\n".join(syncs["commits"])
    )
    assert syncs["close"], "close() made no fsync at all: is the trace seeing them?"
    assert proc.stdout.split() == ["fsyncs", "0"], proc.stdout  # the store's count agrees
