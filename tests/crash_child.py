"""Writer process for the kill -9 test (tests/test_crash.py); not a test module itself.

Usage: ``python tests/crash_child.py PATH SEED [DURABILITY]``

Opens the store at PATH with DURABILITY ("commit", the default, "batch" or "none"), then
commits a seeded random mix of work until it is killed. Everything it says goes to stdout,
one line at a time, each line flushed before the next step, so the parent knows exactly
what was acknowledged when the SIGKILL landed:

    O                  about to call memcommit.open (the kill may land inside recovery)
    R <lsn> <n> <cut>  open returned: head LSN, number of memories, torn-tail bytes it cut
    B <json ops>       intent: the records the next commit will append, in order
    A <lsn>            that commit returned (under "commit" fsynced; under "batch" and
                       "none" written to the OS): the LSN of its last record

Under "commit" the workload comes from ``random.Random(SEED)``; under the other modes from
``random.Random(f"{DURABILITY} {SEED}")``, so that the modes do not all replay one workload.

Each op in a B line is one record: ["put", id, digest, tier], ["status", id, status] or
["move", id, tier]. ``digest`` is :func:`content_digest` of the put's kind, text, data
and tags.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from typing import Any

TIERS = ("working", "mid", "long", "archive")
DURABILITIES = ("commit", "batch", "none")
KINDS = ("note", "fact", "trace", "episode")


def content_digest(kind: str, text: str, data: Any, tags: Any) -> str:
    """Digest of the content a put record carries (shared with the parent)."""
    blob = json.dumps([kind, text, data, list(tags)], sort_keys=True, ensure_ascii=False)
    return hashlib.blake2b(blob.encode("utf-8"), digest_size=12).hexdigest()


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def every_kind_of_commit(store: Any) -> None:
    """A few commits of every kind the child makes (for test_crash's fsync tests)."""
    a = store.put("first")
    store.put("replaced", id=a)
    with store.commit() as c:
        ids = c.put_many([f"many {i}" for i in range(8)], tier="mid")
        c.stale(ids[0], reason="superseded")
        c.move(ids[1], "long")
    store.restore(ids[0])
    store.move(a, "archive")
    # Large commits take the other write paths: over 256 KiB a commit extends the file
    # itself (no zeros written ahead), over 1 MiB it is written in chunks as it is built.
    for n in (4, 24):
        with store.commit() as c:
            c.put_many(["bulk " * 20_000 + str(i) for i in range(n)], kind="trace")


class Child:
    def __init__(self, store: Any, rng: random.Random, seed: int) -> None:
        self.store = store
        self.rng = rng
        self.seed = seed
        self.counter = 0
        # Texts are slices of one seeded random string: cheap, so commits come fast.
        alphabet = "abcdefghijklmnopqrstuvwxyz ÄéΩ漢字🙂"
        self.pool = "".join(rng.choices(alphabet, k=70_000))
        # id -> [tier, status], read from the store at open and kept up to date.
        self.known: dict[str, list[str]] = {
            m.id: [m.tier, m.status] for m in store.find(status=None)
        }

    def text(self) -> str:
        r = self.rng.random()
        if r < 0.02:
            size = self.rng.randint(8_000, 60_000)  # big records: kills land mid-write
        elif r < 0.3:
            size = self.rng.randint(200, 3_000)
        else:
            size = self.rng.randint(1, 120)
        start = self.rng.randrange(len(self.pool) - size)
        return self.pool[start : start + size]

    def content(self) -> dict[str, Any]:
        kind = self.rng.choice(KINDS)
        data = None
        if self.rng.random() < 0.4:
            data = {"n": self.rng.randint(-(10**9), 10**9), "s": self.text()[:20], "ok": True}
        tags = tuple(sorted(self.rng.sample(["a", "b", "c", "d"], self.rng.randint(0, 2))))
        return {"kind": kind, "text": self.text(), "data": data, "tags": tags}

    def new_id(self) -> str:
        self.counter += 1
        return f"k{self.seed}-{self.counter}"

    def pick(self) -> str | None:
        if not self.known:
            return None
        return self.rng.choice(list(self.known))

    def put_op(self, mid: str, c: dict[str, Any], tier: str) -> list[Any]:
        digest = content_digest(c["kind"], c["text"], c["data"], c["tags"])
        if mid in self.known:
            tier = self.known[mid][0]  # a replacing put keeps tier and status
        return ["put", mid, digest, tier]

    def apply(self, ops: list[list[Any]]) -> None:
        for op in ops:
            if op[0] == "put":
                self.known.setdefault(op[1], [op[3], "active"])
            elif op[0] == "status":
                self.known[op[1]][1] = op[2]
            else:
                self.known[op[1]][0] = op[2]

    # -- one step: one commit ------------------------------------------------------------

    def step(self) -> None:
        r = self.rng.random()
        target = self.pick()
        if r < 0.3 or target is None:
            self.single_put(self.new_id())
        elif r < 0.4:
            self.single_put(target)
        elif r < 0.5:
            self.single_change(target)
        elif r < 0.78:
            self.mixed_commit()
        elif r < 0.99:
            self.many_puts()
        else:
            self.bulk_commit()

    def single_put(self, mid: str) -> None:
        c = self.content()
        tier = self.rng.choice(TIERS)
        ops = [self.put_op(mid, c, tier)]
        _say("B " + json.dumps(ops))
        got = self.store.put(
            c["text"], kind=c["kind"], id=mid, tier=tier, data=c["data"], tags=c["tags"]
        )
        assert got == mid, (got, mid)
        lsn = self.store.lsn
        _say(f"A {lsn}")
        self.apply(ops)

    def single_change(self, mid: str) -> None:
        tier, status = self.known[mid]
        if self.rng.random() < 0.5:
            new_status = "active" if status == "stale" else "stale"
            ops = [["status", mid, new_status]]
            _say("B " + json.dumps(ops))
            if new_status == "stale":
                lsn = self.store.stale(mid, reason="crash test")
            else:
                lsn = self.store.restore(mid)
        else:
            new_tier = self.rng.choice([t for t in TIERS if t != tier])
            ops = [["move", mid, new_tier]]
            _say("B " + json.dumps(ops))
            lsn = self.store.move(mid, new_tier)
        _say(f"A {lsn}")
        self.apply(ops)

    def mixed_commit(self) -> None:
        """Put (new and replace), stale/restore and move in one commit."""
        ops: list[list[Any]] = []
        with self.store.commit() as c:
            for _ in range(self.rng.randint(2, 6)):
                r = self.rng.random()
                target = self.pick()
                if r < 0.35 or target is None:
                    content = self.content()
                    tier = self.rng.choice(TIERS)
                    mid = c.put(
                        content["text"],
                        kind=content["kind"],
                        tier=tier,
                        data=content["data"],
                        tags=content["tags"],
                    )
                    ops.append(self.put_op(mid, content, tier))
                elif r < 0.5:
                    content = self.content()
                    c.put(
                        content["text"],
                        kind=content["kind"],
                        id=target,
                        data=content["data"],
                        tags=content["tags"],
                    )
                    ops.append(self.put_op(target, content, "working"))
                elif r < 0.75:
                    status = self.known[target][1]
                    if status == "active":
                        c.stale(target, reason="superseded")
                        ops.append(["status", target, "stale"])
                    else:
                        c.restore(target)
                        ops.append(["status", target, "active"])
                else:
                    tier = self.rng.choice(TIERS)
                    c.move(target, tier)
                    ops.append(["move", target, tier])
                # Later ops in this commit see the earlier ones.
                self.apply(ops[-1:])
            # Everything is staged; the records are appended when the block exits.
            _say("B " + json.dumps(ops))
        _say(f"A {c.lsn}")

    def many_puts(self) -> None:
        """A commit of several new memories (put_many or repeated put)."""
        n = self.rng.randint(3, 12)
        contents = [self.content() for _ in range(n)]
        tier = self.rng.choice(TIERS)
        with self.store.commit() as c:
            if self.rng.random() < 0.5:
                # put_many shares kind/data/tags: use the first content's.
                first = contents[0]
                texts = [x["text"] for x in contents]
                ids = c.put_many(
                    texts, kind=first["kind"], tier=tier, data=first["data"], tags=first["tags"]
                )
                contents = [{**first, "text": t} for t in texts]
            else:
                ids = [
                    c.put(x["text"], kind=x["kind"], tier=tier, data=x["data"], tags=x["tags"])
                    for x in contents
                ]
            ops = [self.put_op(mid, x, tier) for mid, x in zip(ids, contents, strict=True)]
            _say("B " + json.dumps(ops))
        _say(f"A {c.lsn}")
        self.apply(ops)

    def bulk_commit(self) -> None:
        """A commit of megabytes: long writes, so that some kills tear a record."""
        n = self.rng.randint(4, 16)
        start = self.rng.randrange(len(self.pool) - 512)
        chunk = self.pool[start : start + 512]
        texts = [chunk * self.rng.randint(10, 60) + str(i) for i in range(n)]
        tier = self.rng.choice(TIERS)
        with self.store.commit() as c:
            ids = c.put_many(texts, kind="trace", tier=tier)
            ops = [
                self.put_op(mid, {"kind": "trace", "text": t, "data": None, "tags": ()}, tier)
                for mid, t in zip(ids, texts, strict=True)
            ]
            _say("B " + json.dumps(ops))
        _say(f"A {c.lsn}")
        self.apply(ops)


def workload_rng(seed: int, durability: str) -> random.Random:
    """The child's random source (under "commit", ``random.Random(seed)`` as always)."""
    if durability == "commit":
        return random.Random(seed)
    return random.Random(f"{durability} {seed}")


def main() -> None:
    path, seed = sys.argv[1], int(sys.argv[2])
    durability = sys.argv[3] if len(sys.argv) > 3 else "commit"
    if durability not in DURABILITIES:
        raise SystemExit(f"crash_child: durability {durability!r} is not one of {DURABILITIES}")
    import memcommit

    _say("O")
    store = memcommit.open(path, durability=durability)
    _say(f"R {store.lsn} {len(store)} {store.recovered_bytes}")
    child = Child(store, workload_rng(seed, durability), seed)
    while True:
        child.step()


if __name__ == "__main__":
    main()
