"""One store in PostgreSQL, clients on three hosts: network namespaces on this machine.

Each host is a network namespace (:mod:`memcommit.testing.netns`) joined to the database's by
a veth pair on a bridge; its clients are processes started in it, so they reach the database
over a network that a test can cut. Needs root (for the namespaces) and the machine's
PostgreSQL; skipped without them.
No test asserts a time: waits are bounded only so that a broken build fails instead of hanging.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

import memcommit
from memcommit.testing.netns import HOSTS, Hosts, available
from memcommit.testing.postgres import PostgresCluster

pytestmark = pytest.mark.skipif(
    not available(), reason="needs root, iproute2 and PostgreSQL to make hosts in namespaces"
)


@pytest.fixture(scope="module")
def hosts() -> Iterator[Hosts]:
    with Hosts() as made:
        yield made


def _finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    return out


COUNTER = """
import sys, memcommit
store = memcommit.open(sys.argv[1])
done = refused = 0
while done < int(sys.argv[2]):
    store.refresh()
    now = store.get("counter")
    try:
        with store.commit() as c:
            c.expect("counter", lsn=now.lsn)
            c.put("counter", id="counter", data={"n": now.data["n"] + 1})
        done += 1
    except memcommit.Rejected:
        refused += 1
print(done, refused)
"""


def test_a_compare_and_set_counter_is_exact_across_hosts(hosts: Hosts) -> None:
    url = hosts.url(f"counter-{uuid.uuid4().hex[:8]}")
    with memcommit.open(hosts.url(url.rsplit("=", 1)[1])) as store:
        store.put("counter", id="counter", data={"n": 0})
    per_host = 25
    runs = [hosts.start(h, COUNTER, url, str(per_host)) for h in range(HOSTS)]
    outputs = [_finish(r) for r in runs]
    with memcommit.open(url) as store:
        assert store.get("counter").data == {"n": HOSTS * per_host}
        assert [r.lsn for r in store.records()] == list(range(1, store.lsn + 1))
    assert all(int(out.split()[0]) == per_host for out in outputs)


FENCING = """
import json, sys, memcommit
store = memcommit.open(sys.argv[1])
tokens = []
for _ in range(int(sys.argv[2])):
    lease = store.locks.acquire("shared", sys.argv[3], 60_000)
    if lease is not None:
        tokens.append(lease.token)
        assert store.locks.release("shared", token=lease.token)
print(json.dumps(tokens))
"""


def test_lock_fencing_tokens_are_unique_and_rising_across_hosts(hosts: Hosts) -> None:
    url = hosts.url(f"fencing-{uuid.uuid4().hex[:8]}")
    runs = [hosts.start(h, FENCING, url, "30", f"host-{h}") for h in range(HOSTS)]
    per_host = [json.loads(_finish(r)) for r in runs]
    every = [t for tokens in per_host for t in tokens]
    assert every and len(every) == len(set(every)), "two hosts held the same token"
    assert all(tokens == sorted(tokens) for tokens in per_host)
    with memcommit.open(url) as store:
        lease = store.locks.acquire("shared", "checker", 1000)
        assert lease is not None and lease.token == max(every) + 1


WRITER = """
import sys, time, memcommit
store = memcommit.open(sys.argv[1])
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    try:
        mid = store.put("from a host that may be cut off")
        print("ack", mid, flush=True)
    except (memcommit.ServerUnavailable, memcommit.CommitOutcomeUnknown) as e:
        print("err", type(e).__name__, flush=True)
        time.sleep(0.2)
"""


def test_a_host_cut_off_gets_clear_errors_and_no_acknowledgement_it_cannot_back(
    hosts: Hosts,
) -> None:
    url = hosts.url(f"cut-{uuid.uuid4().hex[:8]}", connect_timeout="2", tcp_user_timeout="2000")
    with memcommit.open(url):
        pass
    writer = hosts.start(1, WRITER, url, "14")
    assert writer.stdout is not None
    lines: list[str] = []
    while sum(line.startswith("ack") for line in lines) < 20:
        line = writer.stdout.readline()
        assert line, writer.stderr.read() if writer.stderr else ""
        lines.append(line.strip())
    hosts.cut(1, up=False)
    time.sleep(5)  # the host stays cut off for a while (not a timing assertion)
    hosts.cut(1, up=True)
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err[-3000:]
    lines += out.split("\n")
    kinds = [line.split()[0] for line in lines if line]
    errors = {line.split()[1] for line in lines if line.startswith("err")}
    acked = [line.split()[1] for line in lines if line.startswith("ack")]
    assert "err" in kinds, "the host was cut off and never told"
    assert errors <= {"ServerUnavailable", "CommitOutcomeUnknown"}
    assert kinds[-1] == "ack" or "ack" in kinds[kinds.index("err") :], "it never reconnected"
    with memcommit.open(url) as store:
        assert [mid for mid in acked if store.get(mid) is None] == []


def test_a_hot_standby_serves_a_reader_in_lsn_order(hosts: Hosts) -> None:
    assert hosts.db is not None
    store_name = f"standby-{uuid.uuid4().hex[:8]}"
    url = hosts.url(store_name)
    with memcommit.open(url) as primary:
        primary.put("before the standby")
        with PostgresCluster(primary=hosts.db) as standby:
            primary.put("counter", id="counter", data={"n": 0})
            reader = memcommit.open(f"{standby.dsn}?store={store_name}", read_only=True)
            writers = [hosts.start(h, COUNTER, url, "10") for h in range(HOSTS)]
            seen: list[int] = []
            for w in writers:
                _finish(w)
            primary.refresh()
            want = primary.lsn
            deadline = time.monotonic() + 120
            while reader.lsn < want and time.monotonic() < deadline:
                reader.refresh(wait=1.0)
                seen.append(reader.lsn)
            assert reader.lsn == want
            assert seen == sorted(seen)
            assert [r.lsn for r in reader.records()] == list(range(1, want + 1))
            assert reader.get("counter").data == {"n": HOSTS * 10}
            with pytest.raises(memcommit.ReadOnlyStore):
                reader.put("a standby takes no writes")
            reader.close()
            # A writer there is refused at open, told the server takes no writes and where to
            # go instead (not to check the host and port, which are right).
            with pytest.raises(memcommit.ServerUnavailable) as refused:
                memcommit.open(f"{standby.dsn}?store={store_name}")
            message = str(refused.value)
            assert "takes no writes" in message and "primary" in message
            assert "read_only=True" in message and "host, port" not in message
