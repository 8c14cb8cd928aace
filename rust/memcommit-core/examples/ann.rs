//! Approximate vector search measured against exact search.
//!
//! python benches/ann_hnswlib.py data DIR --n 100000
//! cargo run --release --example ann -p memcommit-core -- DIR [--threads 2] [--ef 16,32,64]
//!     [--only exact,memcommit,usearch] [--quant f32|bf16|i8|i8ip|i8cos] [--fetch 2] [--m 16]
//!     [--efc 200] [--filters none,half,tenth,hundredth] [--cache DIR] [--sizes 5000,10000]
//!
//! Reads DIR/base.f32 and DIR/queries.f32 (a u32 count, a u32 dimension, then f32 values),
//! takes the exact top 10 of every query from `Vectors::search_exact` (for no filter, every
//! second entry, every tenth and every hundredth), and reports:
//!
//! * `memcommit`: `Vectors::search` as the store runs it (the approximate index above
//!   `ANN_FROM` vectors, its graph built in the background and waited for, with its exact
//!   fallbacks);
//! * `usearch`: the crate's graph on its own, built as hnswlib is by the Python side (M
//!   `--m`, default 16, ef_construction `--efc`, default 200, `--threads` threads), its
//!   vectors as `--quant` (`i8` by usearch's conversion, as the store's graph holds them: each
//!   vector times 127 over its norm, truncated; `i8ip` every vector by one scale that takes
//!   the largest value of any to 127, rounded; `i8cos` each vector by its own such scale,
//!   under the cosine), taking `--fetch` times 10 results and keeping the best 10 by the exact
//!   vectors, for each search expansion (ef) of `--ef`; with `--cache DIR` the graph is saved
//!   there, and loaded by a later run with the same `--quant`, `--m` and `--efc`;
//!
//! each with the build time, the resident memory it added per vector, and per filter
//! recall@10, queries per second on one thread (by wall time and by the thread's CPU time,
//! steadier on a shared machine) and the median latency, for the filters `--filters` names
//! (all four if none). `--sizes` instead compares the exact scan with the approximate index on
//! the first N vectors, for choosing `ANN_FROM`.
//!
//! The first version of this example measured `hnsw_rs` too (its commit holds the code).

use std::collections::HashSet;
use std::time::Instant;

use memcommit_core::search::vectors::{Vectors, ANN_FROM};

const K: usize = 10;
const FILTERS: [(&str, u32); 4] = [("none", 1), ("half", 2), ("tenth", 10), ("hundredth", 100)];

fn read(path: &std::path::Path) -> (usize, usize, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let n = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes")) as usize;
    let d = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes")) as usize;
    let data: Vec<f32> =
        bytes[8..].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
    assert_eq!(data.len(), n * d, "{}: a short file", path.display());
    (n, d, data)
}

fn normalized(v: &[f32]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / norm).collect()
}

fn rss_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<usize>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// This thread's time on a CPU so far, in seconds (the first field of its schedstat): queries
/// per second by CPU time hold still on a machine that others share, where wall time does not.
fn thread_cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    s.split_whitespace().next().and_then(|x| x.parse::<f64>().ok()).map_or(0.0, |ns| ns / 1e9)
}

struct Measured {
    recall: f64,
    qps: f64,
    cpu_qps: f64,
    p50_us: f64,
}

/// Run every query through `search` (which returns entry numbers), one thread.
fn measure(queries: &[Vec<f32>], truth: &[Vec<u32>], mut search: impl FnMut(&[f32]) -> Vec<u32>) -> Measured {
    let mut lat = Vec::with_capacity(queries.len());
    let mut hits = 0usize;
    let (t0, c0) = (Instant::now(), thread_cpu_s());
    for (q, want) in queries.iter().zip(truth) {
        let t = Instant::now();
        let got = search(q);
        lat.push(t.elapsed().as_secs_f64());
        let want: HashSet<u32> = want.iter().copied().collect();
        hits += got.iter().take(K).filter(|n| want.contains(n)).count();
    }
    let total = t0.elapsed().as_secs_f64();
    let cpu = thread_cpu_s() - c0;
    lat.sort_by(f64::total_cmp);
    let expected: usize = truth.iter().map(|t| t.len()).sum();
    Measured {
        recall: hits as f64 / expected.max(1) as f64,
        qps: queries.len() as f64 / total,
        cpu_qps: queries.len() as f64 / cpu,
        p50_us: lat[lat.len() / 2] * 1e6,
    }
}

fn report(name: &str, filter: &str, ef: usize, m: &Measured) {
    println!(
        "{name:10} filter {filter:9}  ef {ef:4}  recall@10 {:.4}  qps {:8.0}  by CPU time {:8.0}  p50 {:7.0} us",
        m.recall, m.qps, m.cpu_qps, m.p50_us
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: ann DIR [--threads N] [--ef LIST]"));
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut efs = vec![16usize, 32, 48, 64, 96, 128];
    let mut only: Option<Vec<String>> = None;
    let mut sizes: Option<Vec<usize>> = None;
    let mut quant = "f32".to_string();
    let mut fetch = 1usize;
    let mut efc = 200usize;
    let mut m = 16usize;
    let mut filters: Option<Vec<String>> = None;
    let mut cache: Option<std::path::PathBuf> = None;
    while let Some(a) = args.next() {
        let v = args.next().expect("a value");
        match a.as_str() {
            "--threads" => threads = v.parse().expect("a number"),
            "--ef" => efs = v.split(',').map(|x| x.parse().expect("a number")).collect(),
            "--only" => only = Some(v.split(',').map(str::to_owned).collect()),
            "--quant" => quant = v,
            "--fetch" => fetch = v.parse().expect("a number"),
            "--efc" => efc = v.parse().expect("a number"),
            "--m" => m = v.parse().expect("a number"),
            "--cache" => cache = Some(std::path::PathBuf::from(v)),
            "--filters" => filters = Some(v.split(',').map(str::to_owned).collect()),
            "--sizes" => sizes = Some(v.split(',').map(|x| x.parse().expect("a number")).collect()),
            _ => panic!("unknown argument {a}"),
        }
    }
    let filtered = |name: &str| filters.as_ref().is_none_or(|f| f.iter().any(|x| x == name));
    let wants = |name: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == name));
    let (n, dims, base) = read(&dir.join("base.f32"));
    let (nq, _, qdata) = read(&dir.join("queries.f32"));
    let queries: Vec<Vec<f32>> = qdata.chunks_exact(dims).map(normalized).collect();
    println!("{n} x {dims}, {nq} queries, build on {threads} threads, queries on one");
    if let Some(sizes) = sizes {
        return by_size(&base, dims, &queries, &sizes);
    }

    let before = rss_bytes();
    let t = Instant::now();
    let mut exact = Vectors::default();
    for (i, v) in base.chunks_exact(dims).enumerate() {
        exact.set(i as u32, Some(v));
    }
    println!(
        "exact      build {:.2} s, {:.0} bytes per vector",
        t.elapsed().as_secs_f64(),
        (rss_bytes() - before) as f64 / n as f64
    );
    let mut truths = Vec::new();
    for (name, every) in FILTERS {
        if !filtered(name) {
            truths.push(Vec::new());
            continue;
        }
        let accept = move |e: u32| e.is_multiple_of(every);
        let mut truth = Vec::new();
        let m = measure(&queries, &vec![Vec::new(); nq], |q| {
            let got: Vec<u32> = exact.search_exact(q, K, &accept).into_iter().map(|x| x.0).collect();
            truth.push(got.clone());
            got
        });
        println!(
            "exact      filter {name:9}  qps {:8.0}  p50 {:7.0} us  (the scan's own threads above 4M values)",
            m.qps, m.p50_us
        );
        truths.push(truth);
    }

    if wants("memcommit") {
        exact.set_approximate_from(Some(ANN_FROM));
        run_memcommit(&exact, &queries, &truths, n, &filtered);
    }
    drop(exact);
    if wants("usearch") {
        let graph = Graph { threads, efs: &efs, quant: &quant, fetch, m, efc, cache: cache.as_deref() };
        run_usearch(&base, dims, &queries, &truths, &graph, &filtered);
    }
}

/// How [`run_usearch`] builds and searches its graph: `quant` is the vectors' type in the
/// graph (f32, bf16, i8 by usearch's conversion, i8ip and i8cos by this example's), with
/// `fetch` above 1 a query takes `fetch × 10` from the graph and keeps the 10 best by the f32
/// vectors' exact similarity, `m` is the graph's connectivity, `efc` the build's expansion and
/// `efs` the searches', and a graph built with a `cache` directory is saved there and loaded by
/// the next run with the same settings.
struct Graph<'a> {
    threads: usize,
    efs: &'a [usize],
    quant: &'a str,
    fetch: usize,
    m: usize,
    efc: usize,
    cache: Option<&'a std::path::Path>,
}

/// usearch's graph alone.
fn run_usearch(
    base: &[f32],
    dims: usize,
    queries: &[Vec<f32>],
    truths: &[Vec<Vec<u32>>],
    graph: &Graph<'_>,
    filtered: &dyn Fn(&str) -> bool,
) {
    use usearch::{Index, IndexOptions, MetricKind, ScalarKind};
    let Graph { threads, efs, quant, fetch, m, efc, cache } = *graph;
    let n = base.len() / dims;
    let unit: Vec<Vec<f32>> = base.chunks_exact(dims).map(normalized).collect();
    let before = rss_bytes();
    let t = Instant::now();
    let opts = IndexOptions {
        dimensions: dims,
        metric: if quant == "i8cos" { MetricKind::Cos } else { MetricKind::IP },
        quantization: match quant {
            "f32" => ScalarKind::F32,
            "bf16" => ScalarKind::BF16,
            "i8" | "i8cos" | "i8ip" => ScalarKind::I8,
            _ => panic!("--quant is f32, bf16, i8, i8cos or i8ip"),
        },
        connectivity: m,
        expansion_add: efc,
        expansion_search: 64,
        multi: false,
    };
    let index = Index::new(&opts).expect("an index");
    println!(
        "usearch    kernels: {}, vectors as {quant}, fetch {fetch} x 10, M {m}, ef_construction {efc}",
        index.hardware_acceleration()
    );
    index.reserve_capacity_and_threads(n, threads).expect("reserve");
    let file = cache.map(|d| d.join(format!("usearch-{quant}-{m}-{efc}.bin")));
    let cached = file.as_ref().filter(|f| f.exists());
    // i8cos: each vector scaled by its own largest value, rounded (cosine ignores the scale);
    // i8ip: every vector by one scale, the largest value of any (inner products keep order).
    let largest = |values: &mut dyn Iterator<Item = &f32>| values.fold(0f32, |m, x| m.max(x.abs()));
    // Only for a build of i8ip (its queries take their own scale).
    let global = (quant == "i8ip" && cached.is_none()).then(|| 127.0 / largest(&mut unit.iter().flatten()));
    let scaled = |v: &[f32], global: Option<f32>| {
        let scale = global.unwrap_or_else(|| 127.0 / largest(&mut v.iter()));
        v.iter().map(|x| (x * scale).round().clamp(-127.0, 127.0) as i8).collect::<Vec<i8>>()
    };
    let own = |v: &[f32]| scaled(v, global);
    // A query's own scale keeps the order of inner products with it.
    let query = |v: &[f32]| scaled(v, None);
    let ours = quant == "i8cos" || quant == "i8ip";
    if let Some(file) = cached {
        index.load(file.to_str().expect("a UTF-8 path")).expect("load");
        println!("usearch    loaded {}", file.display());
    } else {
        add_all(&index, threads, &unit, ours.then_some(&own));
        if let Some(file) = &file {
            index.save(file.to_str().expect("a UTF-8 path")).expect("save");
        }
    }
    let took = t.elapsed().as_secs_f64();
    println!(
        "usearch    build {took:.2} s, {:.0} bytes per vector (RSS growth; memory_usage {:.0})",
        (rss_bytes() - before) as f64 / n as f64,
        index.memory_usage() as f64 / n as f64
    );
    for ((name, every), truth) in FILTERS.iter().zip(truths) {
        if !filtered(name) {
            continue;
        }
        for &ef in efs {
            index.change_expansion_search(ef);
            let m = measure(queries, truth, |q| {
                let every = u64::from(*every);
                let found = match (ours, every) {
                    (false, 1) => index.search(q, K * fetch).expect("search"),
                    (false, _) => {
                        index.filtered_search(q, K * fetch, |key| key.is_multiple_of(every)).expect("search")
                    }
                    (true, 1) => index.search(&query(q), K * fetch).expect("search"),
                    (true, _) => index
                        .filtered_search(&query(q), K * fetch, |key| key.is_multiple_of(every))
                        .expect("search"),
                };
                let keys = found.keys.iter().map(|&k| k as u32);
                if fetch == 1 {
                    return keys.collect();
                }
                // Each candidate scored once by its exact vector, as the store reranks.
                let mut scored: Vec<(f32, u32)> = keys
                    .map(|n| (unit[n as usize].iter().zip(q).map(|(a, b)| a * b).sum::<f32>(), n))
                    .collect();
                scored.sort_by(|a, b| b.0.total_cmp(&a.0));
                scored.into_iter().take(K).map(|(_, n)| n).collect()
            });
            report("usearch", name, ef, &m);
        }
    }
}

/// A conversion of a vector to the graph's 8-bit values.
type Quantize<'a> = dyn Fn(&[f32]) -> Vec<i8> + Sync + 'a;

/// Add every vector of `unit` to `index` on `threads` threads, by number, converted by
/// `quantize` if given (else by usearch).
fn add_all(index: &usearch::Index, threads: usize, unit: &[Vec<f32>], quantize: Option<&Quantize<'_>>) {
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for i in (t..unit.len()).step_by(threads) {
                    match quantize {
                        Some(quantize) => index.add(i as u64, &quantize(&unit[i])),
                        None => index.add(i as u64, &unit[i]),
                    }
                    .expect("add");
                }
            });
        }
    });
}

/// `Vectors::search` as a store runs it, the approximate index on from `ANN_FROM` vectors; the
/// graph is built in the background as a store's is (on all cores but one), waited for here.
fn run_memcommit(
    vectors: &Vectors,
    queries: &[Vec<f32>],
    truths: &[Vec<Vec<u32>>],
    n: usize,
    filtered: &dyn Fn(&str) -> bool,
) {
    let before = rss_bytes();
    let t = Instant::now();
    assert!(vectors.wait_for_graph(), "usearch could not build the graph");
    println!(
        "memcommit  approximate {} (ANN_FROM {ANN_FROM}); the graph's build {:.2} s, {:.0} bytes per vector more",
        vectors.approximate(),
        t.elapsed().as_secs_f64(),
        (rss_bytes().saturating_sub(before)) as f64 / n as f64
    );
    for ((name, every), truth) in FILTERS.iter().zip(truths) {
        if !filtered(name) {
            continue;
        }
        let every = *every;
        let m = measure(queries, truth, |q| {
            vectors.search(q, K, &move |e: u32| e.is_multiple_of(every)).into_iter().map(|x| x.0).collect()
        });
        // The graph's own expansion: 32 up to 100,000 vectors, more beyond (0 in the report).
        report("memcommit", name, 0, &m);
    }
}

/// The exact scan against the approximate index on the first `size` vectors, for each size.
fn by_size(base: &[f32], dims: usize, queries: &[Vec<f32>], sizes: &[usize]) {
    for &size in sizes {
        let mut v = Vectors::default();
        for (i, x) in base.chunks_exact(dims).take(size).enumerate() {
            v.set(i as u32, Some(x));
        }
        let mut truth = Vec::new();
        let exact = measure(queries, &vec![Vec::new(); queries.len()], |q| {
            let got: Vec<u32> = v.search_exact(q, K, &|_| true).into_iter().map(|x| x.0).collect();
            truth.push(got.clone());
            got
        });
        let t = Instant::now();
        v.search_approximate(&queries[0], K, &|_| true).expect("a graph");
        let build = t.elapsed().as_secs_f64();
        let approx = measure(queries, &truth, |q| {
            let got = v.search_approximate(q, K, &|_| true).expect("a graph");
            got.into_iter().map(|x| x.0).collect()
        });
        println!(
            "{size:8} vectors  exact: qps {:7.0} by CPU time {:7.0} p50 {:6.0} us  approximate: \
             build {build:6.2} s, recall@10 {:.4} qps {:7.0} by CPU time {:7.0} p50 {:6.0} us",
            exact.qps, exact.cpu_qps, exact.p50_us, approx.recall, approx.qps, approx.cpu_qps, approx.p50_us
        );
    }
}
