//! Approximate vector search measured against exact search, for the candidate crates.
//!
//! python benches/ann_hnswlib.py data DIR --n 100000
//! cargo run --release --example ann -p memcommit-core -- DIR [--threads 2] [--ef 16,32,64]
//!     [--only exact,usearch,hnsw_rs]
//!
//! Reads DIR/base.f32 and DIR/queries.f32 (a u32 count, a u32 dimension, then f32 values),
//! takes the exact top 10 of every query from `Vectors::search` (for no filter, every second
//! entry and every tenth), and for each candidate reports the build time (`--threads`
//! threads), the resident memory the build added per vector, and per filter and search
//! expansion (ef) recall@10, queries per second on one thread and the median latency.

use std::collections::HashSet;
use std::time::Instant;

use memcommit_core::search::vectors::Vectors;

const K: usize = 10;
const FILTERS: [(&str, u32); 3] = [("none", 1), ("half", 2), ("tenth", 10)];

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
        "{name:10} filter {filter:5}  ef {ef:4}  recall@10 {:.4}  qps {:8.0}  by CPU time {:8.0}  p50 {:7.0} us",
        m.recall, m.qps, m.cpu_qps, m.p50_us
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: ann DIR [--threads N] [--ef LIST]"));
    let mut threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut efs = vec![16usize, 32, 48, 64, 96, 128];
    let mut only: Option<Vec<String>> = None;
    while let Some(a) = args.next() {
        let v = args.next().expect("a value");
        match a.as_str() {
            "--threads" => threads = v.parse().expect("a number"),
            "--ef" => efs = v.split(',').map(|x| x.parse().expect("a number")).collect(),
            "--only" => only = Some(v.split(',').map(str::to_owned).collect()),
            _ => panic!("unknown argument {a}"),
        }
    }
    let wants = |name: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == name));
    let (n, dims, base) = read(&dir.join("base.f32"));
    let (nq, _, qdata) = read(&dir.join("queries.f32"));
    let queries: Vec<Vec<f32>> = qdata.chunks_exact(dims).map(normalized).collect();
    println!("{n} x {dims}, {nq} queries, build on {threads} threads, queries on one");

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
        let accept = move |e: u32| e % every == 0;
        let mut truth = Vec::new();
        let m = measure(&queries, &vec![Vec::new(); nq], |q| {
            let got: Vec<u32> = exact.search(q, K, &accept).into_iter().map(|x| x.0).collect();
            truth.push(got.clone());
            got
        });
        println!(
            "exact      filter {name:5}  qps {:8.0}  p50 {:7.0} us  (the scan's own threads above 4M values)",
            m.qps, m.p50_us
        );
        truths.push(truth);
    }

    if wants("usearch") {
        run_usearch(&base, dims, &queries, &truths, threads, &efs);
    }
    if wants("hnsw_rs") {
        run_hnsw_rs(&base, dims, &queries, &truths, &efs);
    }
}

fn run_usearch(base: &[f32], dims: usize, queries: &[Vec<f32>], truths: &[Vec<Vec<u32>>], threads: usize, efs: &[usize]) {
    use usearch::{Index, IndexOptions, MetricKind, ScalarKind};
    let n = base.len() / dims;
    let unit: Vec<Vec<f32>> = base.chunks_exact(dims).map(normalized).collect();
    let before = rss_bytes();
    let t = Instant::now();
    let opts = IndexOptions {
        dimensions: dims,
        metric: MetricKind::IP,
        quantization: ScalarKind::F32,
        connectivity: 16,
        expansion_add: 200,
        expansion_search: 64,
        multi: false,
    };
    let index = Index::new(&opts).expect("an index");
    index.reserve_capacity_and_threads(n, threads).expect("reserve");
    std::thread::scope(|s| {
        for t in 0..threads {
            let (index, unit) = (&index, &unit);
            s.spawn(move || {
                for i in (t..n).step_by(threads) {
                    index.add(i as u64, &unit[i]).expect("add");
                }
            });
        }
    });
    let took = t.elapsed().as_secs_f64();
    println!(
        "usearch    build {took:.2} s, {:.0} bytes per vector (RSS growth; memory_usage {:.0})",
        (rss_bytes() - before) as f64 / n as f64,
        index.memory_usage() as f64 / n as f64
    );
    for ((name, every), truth) in FILTERS.iter().zip(truths) {
        for &ef in efs {
            index.change_expansion_search(ef);
            let m = measure(queries, truth, |q| {
                let found = if *every == 1 {
                    index.search(q, K).expect("search")
                } else {
                    index.filtered_search(q, K, |key| key % u64::from(*every) == 0).expect("search")
                };
                found.keys.iter().map(|&k| k as u32).collect()
            });
            report("usearch", name, ef, &m);
        }
    }
}

fn run_hnsw_rs(base: &[f32], dims: usize, queries: &[Vec<f32>], truths: &[Vec<Vec<u32>>], efs: &[usize]) {
    use hnsw_rs::prelude::{DistDot, Hnsw};
    let n = base.len() / dims;
    let unit: Vec<Vec<f32>> = base.chunks_exact(dims).map(normalized).collect();
    let before = rss_bytes();
    let t = Instant::now();
    let mut index: Hnsw<'_, f32, DistDot> = Hnsw::new(16, n, 16, 200, DistDot);
    let items: Vec<(&[f32], usize)> = unit.iter().enumerate().map(|(i, v)| (v.as_slice(), i)).collect();
    index.parallel_insert_slice(&items);
    index.set_searching_mode(true);
    let took = t.elapsed().as_secs_f64();
    println!(
        "hnsw_rs    build {took:.2} s (rayon's threads), {:.0} bytes per vector (RSS growth)",
        (rss_bytes() - before) as f64 / n as f64
    );
    for ((name, every), truth) in FILTERS.iter().zip(truths) {
        for &ef in efs {
            let m = measure(queries, truth, |q| {
                let found = if *every == 1 {
                    index.search(q, K, ef)
                } else {
                    let keep = |id: &usize| *id % *every as usize == 0;
                    index.search_filter(q, K, ef, Some(&keep))
                };
                found.iter().map(|x| x.d_id as u32).collect()
            });
            report("hnsw_rs", name, ef, &m);
        }
    }
}
