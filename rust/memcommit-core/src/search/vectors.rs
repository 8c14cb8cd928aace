//! Vector search: every memory's vector, normalised, in one row-major matrix, scanned with SIMD
//! dot products (cosine similarity of unit vectors); above [`ANN_FROM`] vectors, an approximate
//! index ([`ann`](super::ann), an HNSW graph) beside it.
//!
//! Rows are numbered apart from entries so a store where few memories carry vectors holds only
//! theirs; a memory whose new put has no vector frees its row for the next one.
//!
//! The matrix stays the truth. The graph is built in the background, on a thread of its own,
//! once a search finds the store above the threshold (or the graph worn), and searches are
//! answered by the scan until it is ready: a store never stops for a build (12 s at 100,000
//! vectors, minutes at a million). The build reads a snapshot of the matrix, which is kept in
//! blocks shared copy-on-write, so taking it copies nothing and a write during the build
//! copies only the block it changes; the entries written meanwhile are noted and put into the
//! graph as they are now when it is installed. From then on the graph follows every
//! [`Vectors::set`] (a removed or replaced entry's old vector is a tombstone no search
//! returns). Every result it gives is scored again from the matrix and checked against the
//! query's filter, so what comes back is what the store holds now. A query is answered exactly
//! when the store is small, when its filter lets few vectors through (the scan then only
//! scores those), while the graph is being built, and when the graph finds fewer than `k`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use simsimd::SpatialSimilarity;

use crate::search::ann::{self, Ann};
use crate::search::TopK;

const NONE: u32 = u32::MAX;

/// Above this many values (rows × dims) a scan is split between threads.
const PARALLEL_FROM: usize = 1 << 22;

/// From this many vectors, a store's searches go to the approximate index. Measured with
/// `examples/ann.rs --sizes` on 384-dimensional vectors (BENCHMARKS.md, "Approximate vector
/// search"; a shared 2-core machine): at 20,000 the scan's median query took 0.79 ms and the
/// graph's 0.44 ms, too small a gain for a second copy of the vectors and a 7 s build; at
/// 50,000, 5.1 ms against 0.48 ms, and the scan grows with the store while the graph barely
/// does. Below it the scan is exact and a few milliseconds at most.
pub const ANN_FROM: usize = 50_000;

/// A filter that lets through less than one in this many of the vectors (estimated from
/// [`FILTER_SAMPLE`] of them) is answered by the exact scan, which scores only the vectors that
/// pass, while the graph walks past ever more that do not. Measured on 100,000 vectors
/// (`examples/ann.rs`): a filter passing one vector in ten cost the 8-bit graph 1.5 ms a query
/// and the scan 4.8 ms; one in a hundred, the graph 7 to 9 ms (recall@10 0.95) and the scan
/// 0.3 ms. The scan's cost per vector that fails a filter is small, so the share, not the
/// store's size, decides.
const SELECTIVE: usize = 20;

/// Vectors a query's filter is tried on to estimate its share.
const FILTER_SAMPLE: usize = 256;

/// Rows per block of the matrix: the unit a write during a graph build copies.
const BLOCK_ROWS: usize = 1024;

/// A graph being built in the background: its result once the thread is done, and the flag
/// that tells the thread to give up (the store closed, or dropped below the threshold).
#[derive(Debug)]
struct Build {
    result: Arc<Mutex<Option<Option<Ann>>>>,
    cancel: Arc<AtomicBool>,
}

impl Build {
    fn done(&self) -> bool {
        self.result.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }
}

/// Entries written during a build that one search puts into the finished graph, at most: the
/// rest wait for the next searches, so no search (nor the commits that wait for its lock)
/// stalls while a long build's writes are caught up (25,000 of them at 1,000,000 vectors took
/// seconds in one go).
const INSTALL_STEP: usize = 256;

/// The approximate index: the graph in use, and the one being built.
#[derive(Debug, Default)]
struct AnnSlot {
    graph: Option<Ann>,
    building: Option<Build>,
    /// A finished build's graph, catching up with the entries written since its snapshot.
    built: Option<Ann>,
    /// Entries written since the build's snapshot: put into the new graph as they are when it
    /// is installed.
    written: Vec<u32>,
    /// usearch could not build or update it: searches stay exact until the store drops below
    /// half the threshold.
    failed: bool,
}

impl AnnSlot {
    /// Whether a graph should be built: there is none, or it is worn, and none is on its way.
    fn to_build(&self) -> bool {
        !self.failed && self.building.is_none() && self.graph.as_ref().is_none_or(Ann::worn)
    }

    fn cancel(&mut self) {
        if let Some(b) = self.building.take() {
            b.cancel.store(true, Ordering::Relaxed);
        }
        self.built = None;
        self.written.clear();
    }

    /// Whether a build has finished, so a search has work to do in [`Vectors::install`].
    fn finished(&self) -> bool {
        self.built.is_some() || self.building.as_ref().is_some_and(Build::done)
    }
}

impl Drop for AnnSlot {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// The vectors of one store, by entry number.
#[derive(Debug, Default)]
pub struct Vectors {
    dims: usize,
    /// The matrix: rows of `dims` values, each a unit vector (or zeros for a zero vector), in
    /// blocks of [`BLOCK_ROWS`] rows shared copy-on-write with a graph build's snapshot.
    blocks: Vec<Arc<Vec<f32>>>,
    entry_of_row: Vec<u32>,
    row_of_entry: Vec<u32>,
    free: Vec<u32>,
    live: usize,
    /// Behind a lock because a search (`&self`) starts a build and installs its graph:
    /// searches share it, and hold it alone only for those two moments.
    ann: RwLock<AnnSlot>,
    /// From how many vectors searches go to the approximate index; `None`: never.
    approximate_from: Option<usize>,
}

impl Vectors {
    /// The dimension every vector has; `None` before the first.
    pub fn dims(&self) -> Option<usize> {
        (self.dims > 0).then_some(self.dims)
    }

    /// How many memories have a vector.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no memory has one.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Bytes held.
    pub fn heap_bytes(&self) -> usize {
        let graph = self.ann.read().graph.as_ref().map_or(0, Ann::heap_bytes);
        self.blocks.iter().map(|b| b.capacity() * 4).sum::<usize>()
            + (self.entry_of_row.capacity() + self.row_of_entry.capacity()) * 4
            + graph
    }

    /// Whether [`search`](Self::search) goes to the approximate index (it is turned on, and
    /// the store holds at least that many vectors).
    pub fn approximate(&self) -> bool {
        self.approximate_from.is_some_and(|from| self.live >= from)
    }

    /// Send searches to the approximate index from `from` vectors on ([`ANN_FROM`] is the
    /// measured point where it starts to pay); `None`: always the exact scan.
    pub fn set_approximate_from(&mut self, from: Option<usize>) {
        self.approximate_from = from;
    }

    /// Give entry `n` the vector `v`, or take its vector away. A vector whose dimension is not
    /// the store's is not indexed (the writer refuses such puts; only a log written by other
    /// means could hold one): returns false for it.
    pub fn set(&mut self, n: u32, v: Option<&[f32]>) -> bool {
        let old = self.row_of_entry.get(n as usize).copied().unwrap_or(NONE);
        let Some(v) = v else {
            if old != NONE {
                self.row_of_entry[n as usize] = NONE;
                self.entry_of_row[old as usize] = NONE;
                self.free.push(old);
                self.live -= 1;
                if self.live == 0 {
                    // No memory holds a vector now, so the next may have any length: what a
                    // store opened now, which builds this from each memory's last put, takes.
                    self.ann.get_mut().cancel();
                    *self = Vectors { approximate_from: self.approximate_from, ..Vectors::default() };
                    return true;
                }
                let live = self.live;
                // Below half the threshold the approximate index is let go (and built again
                // from the threshold): apart from it so a store that hovers there does not
                // rebuild.
                let until = self.approximate_from.map_or(0, |from| from / 2);
                let slot = self.ann.get_mut();
                if let Some(g) = &mut slot.graph {
                    if live < until || !g.remove(n) {
                        slot.graph = None;
                    }
                }
                if live < until {
                    slot.failed = false;
                    slot.cancel();
                } else if slot.building.is_some() {
                    slot.written.push(n);
                }
            }
            return true;
        };
        if self.dims == 0 {
            self.dims = v.len();
        }
        if v.len() != self.dims {
            self.set(n, None);
            return false;
        }
        let row = if old != NONE {
            old
        } else if let Some(r) = self.free.pop() {
            self.live += 1;
            r
        } else {
            self.live += 1;
            let r = self.entry_of_row.len();
            self.entry_of_row.push(NONE);
            if r.is_multiple_of(BLOCK_ROWS) {
                self.blocks.push(Arc::new(vec![0.0; BLOCK_ROWS * self.dims]));
            }
            r as u32
        };
        if self.row_of_entry.len() <= n as usize {
            self.row_of_entry.resize(n as usize + 1, NONE);
        }
        self.row_of_entry[n as usize] = row;
        self.entry_of_row[row as usize] = n;
        let (b, at) = (row as usize / BLOCK_ROWS, (row as usize % BLOCK_ROWS) * self.dims);
        // Copied first if a graph build's snapshot holds the block.
        let block = Arc::make_mut(&mut self.blocks[b]);
        normalize_into(v, &mut block[at..at + self.dims]);
        let slot = self.ann.get_mut();
        if slot.building.is_some() {
            slot.written.push(n);
        }
        if let Some(g) = &mut slot.graph {
            if !g.insert(n, &self.blocks[b][at..at + self.dims]) {
                slot.graph = None;
                slot.failed = true;
            }
        }
        true
    }

    /// The `k` entries most similar to `query` (cosine) among those `accept` lets through, best
    /// first, with their similarity. `query` must have the store's dimension.
    ///
    /// Exact below [`ANN_FROM`] vectors and for filters that let few through; above, from the
    /// approximate index (most of the true `k` best, recall@10 0.95 or more on the measured
    /// data) once its graph is built, falling back to the exact scan when it finds fewer than
    /// `k`. The first search above the threshold starts the build in the background and is
    /// answered by the scan, as are the searches that come before the graph is ready.
    pub fn search(&self, query: &[f32], k: usize, accept: &(dyn Fn(u32) -> bool + Sync)) -> Vec<(u32, f32)> {
        if !self.approximate() || self.dims == 0 || query.len() != self.dims || k == 0 {
            return self.search_exact(query, k, accept);
        }
        if self.selective(accept) {
            return self.search_exact(query, k, accept);
        }
        let slot = self.graph_now();
        match self.through_graph(&slot, query, k, accept) {
            Some(hits) if hits.len() >= k.min(self.live) => hits,
            _ => {
                drop(slot);
                self.search_exact(query, k, accept)
            }
        }
    }

    /// [`search`](Self::search) from the approximate index whatever the store's size, its
    /// graph built (or rebuilt, if worn) first if it is not ready, waiting for that: `None`
    /// if usearch cannot build it. It may find fewer than `k`, and need not find the true
    /// best; what it finds is scored from the store's vectors and let through by `accept`. For
    /// measurements and tests.
    pub fn search_approximate(
        &self,
        query: &[f32],
        k: usize,
        accept: &(dyn Fn(u32) -> bool + Sync),
    ) -> Option<Vec<(u32, f32)>> {
        if !self.wait_for_graph() {
            return None;
        }
        let slot = self.ann.read();
        self.through_graph(&slot, query, k, accept)
    }

    /// Start a graph build if one is due (none, or a worn one, and none on its way), and wait
    /// until a graph built since is in place. False if usearch could not build one.
    pub fn wait_for_graph(&self) -> bool {
        loop {
            if let Some(ready) = self.poll_graph() {
                return ready;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// One step of [`wait_for_graph`](Self::wait_for_graph): install a finished build, start
    /// a due one; `Some(whether a graph is in place)` once none is under way, `None` while one
    /// is.
    pub fn poll_graph(&self) -> Option<bool> {
        let mut slot = self.ann.write();
        self.install(&mut slot);
        if slot.failed {
            return Some(false);
        }
        if slot.to_build() {
            self.start_build(&mut slot);
        }
        slot.building.is_none().then_some(slot.graph.is_some())
    }

    /// Whether a graph build is under way.
    pub fn building_graph(&self) -> bool {
        self.ann.read().building.is_some()
    }

    /// The slot, with a finished build's graph installed and a due build started (each
    /// under the write lock for a moment, and only when there is one).
    fn graph_now(&self) -> RwLockReadGuard<'_, AnnSlot> {
        let slot = self.ann.read();
        if !slot.finished() && !slot.to_build() {
            return slot;
        }
        drop(slot);
        let mut w = self.ann.write();
        self.install(&mut w);
        if w.to_build() {
            self.start_build(&mut w);
        }
        RwLockWriteGuard::downgrade(w)
    }

    /// The graph's answer to a query, scored again from the matrix; `None` without a graph or
    /// when usearch fails.
    fn through_graph(
        &self,
        slot: &AnnSlot,
        query: &[f32],
        k: usize,
        accept: &(dyn Fn(u32) -> bool + Sync),
    ) -> Option<Vec<(u32, f32)>> {
        let Some(q) = self.unit_query(query, k) else { return Some(Vec::new()) };
        let keys = slot.graph.as_ref()?.search(&q, k.saturating_mul(ann::FETCH), accept)?;
        // Ranked again by the exact vectors. The graph follows `set`, so each is live; checked
        // all the same, as is the filter.
        let mut top = TopK::new(k);
        for n in keys {
            match self.row_of_entry.get(n as usize) {
                Some(&row) if row != NONE && accept(n) => {
                    if let Some(d) = self.similarity(&q, row as usize) {
                        top.push(d, n);
                    }
                }
                _ => {}
            }
        }
        Some(top.into_sorted())
    }

    /// Build a graph over a snapshot of the matrix on a thread of its own (on all cores but
    /// one, so the store's own work keeps one).
    fn start_build(&self, slot: &mut AnnSlot) {
        let snapshot = Snapshot {
            dims: self.dims,
            blocks: self.blocks.clone(),
            entry_of_row: self.entry_of_row.clone(),
            live: self.live,
        };
        let result = Arc::new(Mutex::new(None));
        let cancel = Arc::new(AtomicBool::new(false));
        let (out, stop) = (Arc::clone(&result), Arc::clone(&cancel));
        let threads =
            std::thread::available_parallelism().map_or(1, |n| n.get()).saturating_sub(1).clamp(1, 8);
        let spawned = std::thread::Builder::new().name("memcommit-graph".into()).spawn(move || {
            let graph = snapshot.build(threads, &stop);
            *out.lock().unwrap_or_else(|e| e.into_inner()) = Some(graph);
        });
        match spawned {
            Ok(_) => {
                slot.written.clear();
                slot.building = Some(Build { result, cancel });
            }
            Err(_) => slot.failed = true,
        }
    }

    /// Bring a finished build's graph up to date with the entries written since its snapshot,
    /// [`INSTALL_STEP`] of them per call, and put it in place once none is left.
    fn install(&self, slot: &mut AnnSlot) {
        if slot.built.is_none() {
            let Some(build) = &slot.building else { return };
            let Some(graph) = build.result.lock().unwrap_or_else(|e| e.into_inner()).take() else {
                return;
            };
            let Some(graph) = graph else {
                slot.building = None;
                slot.written.clear();
                slot.failed = true;
                return;
            };
            slot.built = Some(graph);
        }
        let step = slot.written.len().min(INSTALL_STEP);
        let caught_up = {
            let AnnSlot { built, written, .. } = &mut *slot;
            let graph = built.as_mut().expect("a finished graph");
            written.drain(..step).all(|n| match self.row_of_entry.get(n as usize) {
                Some(&row) if row != NONE => graph.insert(n, self.row(row as usize)),
                _ => graph.remove(n),
            })
        };
        if !caught_up {
            slot.cancel();
            slot.failed = true;
            slot.graph = None;
            return;
        }
        if slot.written.is_empty() {
            slot.graph = slot.built.take();
            slot.building = None;
        }
    }

    /// Whether `accept` lets through less than one in [`SELECTIVE`] vectors, estimated from
    /// [`FILTER_SAMPLE`] rows spread over the matrix. The sampling stops as soon as enough have
    /// passed that the rest cannot change the answer: an unfiltered query calls `accept` on
    /// [`FILTER_SAMPLE`] / [`SELECTIVE`] rows, not all of them (each call reads an entry of
    /// the store's index, a cache miss on a large store).
    fn selective(&self, accept: &(dyn Fn(u32) -> bool + Sync)) -> bool {
        let rows = self.entry_of_row.len();
        let samples = FILTER_SAMPLE.min(rows);
        let (mut seen, mut passed) = (0usize, 0usize);
        // A Weyl sequence: spread evenly without lining up with a filter's period.
        let step = ((rows as f64 * 0.618_033_988_749_895) as usize).max(1);
        let mut r = 0usize;
        for _ in 0..samples {
            let n = self.entry_of_row[r];
            if n != NONE {
                seen += 1;
                passed += usize::from(accept(n));
                if passed * SELECTIVE >= samples {
                    return false; // at least one in SELECTIVE of every row sampled or left
                }
            }
            r = (r + step) % rows;
        }
        // No live row sampled: nothing to say the filter is narrow.
        seen > 0 && passed * SELECTIVE < seen
    }

    /// [`search`](Self::search) by the exact scan over every vector, whatever the store's size.
    pub fn search_exact(
        &self,
        query: &[f32],
        k: usize,
        accept: &(dyn Fn(u32) -> bool + Sync),
    ) -> Vec<(u32, f32)> {
        let Some(q) = self.unit_query(query, k) else { return Vec::new() };
        let rows = self.entry_of_row.len();
        let threads = if rows * self.dims >= PARALLEL_FROM {
            std::thread::available_parallelism().map_or(1, |n| n.get()).min(8)
        } else {
            1
        };
        if threads <= 1 {
            return self.scan(&q, 0..rows, k, accept).into_sorted();
        }
        let per = rows.div_ceil(threads);
        let parts: Vec<TopK> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let q = &q;
                    let range = (t * per).min(rows)..((t + 1) * per).min(rows);
                    s.spawn(move || self.scan(q, range, k, accept))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a search thread panicked")).collect()
        });
        let mut top = TopK::new(k);
        for p in parts {
            top.merge(p);
        }
        top.into_sorted()
    }

    /// The query as a unit vector, or `None` when there is nothing to search for: no vectors,
    /// another dimension, or `k` 0.
    fn unit_query(&self, query: &[f32], k: usize) -> Option<Vec<f32>> {
        if self.dims == 0 || query.len() != self.dims || k == 0 {
            return None;
        }
        let mut q = vec![0.0; self.dims];
        normalize_into(query, &mut q);
        Some(q)
    }

    /// `search` over the entries `among` only (a task's memories, say).
    pub fn search_among(
        &self,
        query: &[f32],
        among: &[u32],
        k: usize,
        accept: &(dyn Fn(u32) -> bool + Sync),
    ) -> Vec<(u32, f32)> {
        let Some(q) = self.unit_query(query, k) else { return Vec::new() };
        let mut top = TopK::new(k);
        for &n in among {
            match self.row_of_entry.get(n as usize) {
                Some(&row) if row != NONE && accept(n) => {
                    if let Some(d) = self.similarity(&q, row as usize) {
                        top.push(d, n);
                    }
                }
                _ => {}
            }
        }
        top.into_sorted()
    }

    /// The similarity of `query` to entry `n`'s vector, if it has one.
    pub fn score(&self, query: &[f32], n: u32) -> Option<f32> {
        let row = *self.row_of_entry.get(n as usize)?;
        if row == NONE {
            return None;
        }
        let q = self.unit_query(query, 1)?;
        self.similarity(&q, row as usize)
    }

    /// The similarity of the unit vector `q` to row `r`; `None` for a row of zeros, which is
    /// similar to nothing (its memory is ranked by its words alone, as if it had no vector).
    fn similarity(&self, q: &[f32], r: usize) -> Option<f32> {
        let row = self.row(r);
        let d = dot(q, row);
        (d != 0.0 || row.iter().any(|&x| x != 0.0)).then_some(d)
    }

    fn row(&self, r: usize) -> &[f32] {
        let at = (r % BLOCK_ROWS) * self.dims;
        &self.blocks[r / BLOCK_ROWS][at..at + self.dims]
    }

    fn scan(
        &self,
        q: &[f32],
        rows: std::ops::Range<usize>,
        k: usize,
        accept: &(dyn Fn(u32) -> bool + Sync),
    ) -> TopK {
        let mut top = TopK::new(k);
        for r in rows {
            let n = self.entry_of_row[r];
            if n == NONE || !accept(n) {
                continue;
            }
            if let Some(d) = self.similarity(q, r) {
                top.push(d, n);
            }
        }
        top
    }
}

/// What a graph build reads: the matrix as it was when the build started.
struct Snapshot {
    dims: usize,
    blocks: Vec<Arc<Vec<f32>>>,
    entry_of_row: Vec<u32>,
    live: usize,
}

impl Snapshot {
    /// A graph over every row, on `threads` threads; `None` if usearch could not, or `stop`
    /// was set.
    fn build(&self, threads: usize, stop: &AtomicBool) -> Option<Ann> {
        let dims = self.dims;
        let rows = self.entry_of_row.iter().enumerate().filter(|(_, &n)| n != NONE).map(move |(r, &n)| {
            let at = (r % BLOCK_ROWS) * dims;
            (n, &self.blocks[r / BLOCK_ROWS][at..at + dims])
        });
        Ann::build(dims, rows, self.live, threads, stop)
    }
}

/// The dot product, with the widest SIMD kernel this CPU has.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    match f32::dot(a, b) {
        Some(d) => d as f32,
        None => a.iter().zip(b).map(|(x, y)| x * y).sum(),
    }
}

/// Write `v / |v|` into `out` (zeros for a zero vector: it is similar to nothing).
fn normalize_into(v: &[f32], out: &mut [f32]) {
    let norm = v.iter().map(|x| (*x as f64) * (*x as f64)).sum::<f64>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        out.fill(0.0);
        return;
    }
    for (o, x) in out.iter_mut().zip(v) {
        *o = (*x as f64 / norm) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(vs: &[(u32, Vec<f32>)], q: &[f32], k: usize) -> Vec<u32> {
        let cos = |a: &[f32], b: &[f32]| {
            let d: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            let n = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
            d / (n(a) * n(b))
        };
        let mut s: Vec<(f32, u32)> = vs.iter().map(|(n, v)| (cos(v, q), *n)).collect();
        s.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        s.into_iter().take(k).map(|x| x.1).collect()
    }

    #[test]
    fn a_zero_vector_is_similar_to_nothing() {
        let mut v = Vectors::default();
        assert!(v.set(0, Some(&[0.0, 0.0, 0.0])));
        assert!(v.set(1, Some(&[1.0, 0.0, 0.0])));
        assert!(v.set(2, Some(&[0.0, 1.0, 0.0])));
        let all = |_: u32| true;
        let got: Vec<u32> = v.search(&[1.0, 0.0, 0.0], 10, &all).into_iter().map(|x| x.0).collect();
        assert_eq!(got, vec![1, 2], "an orthogonal vector ranks, a zero one does not");
        let among: Vec<u32> =
            v.search_among(&[0.0, 1.0, 0.0], &[0, 1, 2], 10, &all).into_iter().map(|x| x.0).collect();
        assert_eq!(among, vec![2, 1]);
        assert_eq!(v.score(&[1.0, 0.0, 0.0], 0), None);
        assert_eq!(v.score(&[0.0, 1.0, 0.0], 1), Some(0.0));
    }

    #[test]
    fn search_matches_a_brute_force_scan_and_follows_updates() {
        let mut rng = 7u64;
        let mut next = || {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((rng >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        let mut v = Vectors::default();
        let mut model: Vec<(u32, Vec<f32>)> = Vec::new();
        for n in 0..300u32 {
            let x: Vec<f32> = (0..16).map(|_| next()).collect();
            assert!(v.set(n, Some(&x)));
            model.push((n, x));
        }
        // Take some away and replace others.
        for n in (0..300u32).step_by(7) {
            v.set(n, None);
            model.retain(|(m, _)| *m != n);
        }
        for n in (1..300u32).step_by(11) {
            let x: Vec<f32> = (0..16).map(|_| next()).collect();
            v.set(n, Some(&x));
            model.retain(|(m, _)| *m != n);
            model.push((n, x));
        }
        assert_eq!(v.len(), model.len());
        let q: Vec<f32> = (0..16).map(|_| next()).collect();
        let got: Vec<u32> = v.search(&q, 10, &|_| true).into_iter().map(|x| x.0).collect();
        assert_eq!(got, brute(&model, &q, 10));
        let odd: Vec<(u32, Vec<f32>)> = model.iter().filter(|(n, _)| n % 2 == 1).cloned().collect();
        let got: Vec<u32> = v.search(&q, 10, &|n| n % 2 == 1).into_iter().map(|x| x.0).collect();
        assert_eq!(got, brute(&odd, &q, 10));
        // A vector of another dimension is refused and leaves the entry without one.
        assert!(!v.set(1, Some(&[1.0, 2.0])));
        assert!(v.score(&q, 1).is_none());
    }

    /// Clustered vectors, seeded: 64 centres, each vector a centre plus noise that falls off
    /// with the dimension.
    struct Clustered {
        rng: u64,
        centres: Vec<Vec<f32>>,
    }

    impl Clustered {
        fn new(seed: u64, dims: usize) -> Clustered {
            let mut c = Clustered { rng: seed, centres: Vec::new() };
            c.centres = (0..64).map(|_| (0..dims).map(|_| c.normal()).collect()).collect();
            c
        }

        fn uniform(&mut self) -> f32 {
            self.rng = self.rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.rng >> 40) as f32 / (1u64 << 24) as f32
        }

        fn normal(&mut self) -> f32 {
            (0..4).map(|_| self.uniform()).sum::<f32>() - 2.0
        }

        fn next(&mut self) -> Vec<f32> {
            let c = (self.uniform() * 64.0) as usize % 64;
            let dims = self.centres[c].len();
            (0..dims)
                .map(|i| self.centres[c][i] + 0.8 * self.normal() / (1.0 + i as f32 / 8.0).sqrt())
                .collect()
        }
    }

    fn ids(hits: &[(u32, f32)]) -> Vec<u32> {
        hits.iter().map(|h| h.0).collect()
    }

    /// Recall@10 of `search` against `search_exact` over `queries`.
    fn recall(v: &Vectors, queries: &[Vec<f32>], accept: &(dyn Fn(u32) -> bool + Sync)) -> f64 {
        let mut hits = 0;
        for q in queries {
            let want = ids(&v.search_exact(q, 10, accept));
            let got = ids(&v.search(q, 10, accept));
            assert_eq!(got.len(), 10);
            hits += got.iter().filter(|n| want.contains(n)).count();
        }
        hits as f64 / (10 * queries.len()) as f64
    }

    const DIMS: usize = 32;

    fn large(seed: u64) -> (Vectors, Clustered) {
        let mut data = Clustered::new(seed, DIMS);
        let mut v = Vectors::default();
        v.set_approximate_from(Some(ANN_FROM));
        for n in 0..(ANN_FROM + 10_000) as u32 {
            v.set(n, Some(&data.next()));
        }
        assert!(v.approximate());
        (v, data)
    }

    /// One large store and 200 queries for the tests that only search (a graph's build is the
    /// slow part of these tests).
    fn shared() -> &'static (Vectors, Vec<Vec<f32>>) {
        static SHARED: std::sync::OnceLock<(Vectors, Vec<Vec<f32>>)> = std::sync::OnceLock::new();
        SHARED.get_or_init(|| {
            let (v, mut data) = large(11);
            let queries: Vec<Vec<f32>> = (0..200).map(|_| data.next()).collect();
            // Built here, before the tests share it: a search that arrives while another builds
            // the graph is answered by the scan, and `search_approximate` returns `None` for it.
            assert!(v.search_approximate(&queries[0], 10, &|_| true).is_some());
            (v, queries)
        })
    }

    #[test]
    fn approximate_search_recalls_the_exact_top_ten() {
        let (v, queries) = shared();
        let all = recall(v, queries, &|_| true);
        assert!(all >= 0.95, "recall@10 {all}");
        // Filtered, through the graph walking past those that do not pass.
        for every in [2u32, 10] {
            let r = recall(v, queries, &move |n: u32| n.is_multiple_of(every));
            assert!(r >= 0.95, "recall@10 with one in {every} passing: {r}");
        }
        // The graph is there, beside the matrix.
        assert!(v.heap_bytes() > v.len() * DIMS * 4 + v.len() * 64);
    }

    #[test]
    fn removed_and_replaced_vectors_are_never_returned() {
        let (mut v, mut data) = large(12);
        let olds: Vec<(u32, Vec<f32>)> = (0..400u32).map(|i| (i * 37, data.next())).collect();
        for (n, old) in &olds {
            v.set(*n, Some(old));
        }
        // The graph is built, and finds most of them by their own vectors.
        let found = olds.iter().filter(|(n, old)| ids(&v.search(old, 10, &|_| true)).contains(n)).count();
        assert!(found * 100 >= olds.len() * 95, "{found} of {} found", olds.len());
        let mut news = Vec::new();
        for (i, (n, _)) in olds.iter().enumerate() {
            if i.is_multiple_of(2) {
                v.set(*n, None);
            } else {
                let new = data.next();
                v.set(*n, Some(&new));
                news.push((*n, new));
            }
        }
        for (i, (n, old)) in olds.iter().enumerate() {
            for hits in [v.search(old, 10, &|_| true), v.search_approximate(old, 10, &|_| true).unwrap()] {
                for (m, score) in hits {
                    if i.is_multiple_of(2) {
                        assert_ne!(m, *n, "a removed vector was returned");
                    }
                    // Every score is that of the entry's vector now.
                    assert_eq!(Some(score), v.score(old, m));
                }
            }
        }
        // And finds most replaced ones by their new vectors (the graph is approximate: one
        // may be missed, as any other vector may).
        let found = news.iter().filter(|(n, new)| ids(&v.search(new, 10, &|_| true)).contains(n)).count();
        assert!(found * 100 >= news.len() * 95, "{found} of {} replaced vectors found", news.len());
    }

    #[test]
    fn the_graph_is_built_in_the_background_and_catches_up_with_writes_made_meanwhile() {
        let (mut v, mut data) = large(14);
        let q = data.next();
        // The first search above the threshold starts the build and is answered by the scan.
        assert_eq!(v.search(&q, 10, &|_| true), v.search_exact(&q, 10, &|_| true));
        assert!(v.building_graph());
        assert!(v.ann.read().graph.is_none());
        // Writes while it builds (the build's snapshot is not theirs): the new graph must
        // hold each entry as it is when the graph is put in place.
        let mut news = Vec::new();
        for i in 0..600u32 {
            let n = i * 97;
            if i.is_multiple_of(2) {
                v.set(n, None);
            } else {
                let new = data.next();
                v.set(n, Some(&new));
                news.push((n, new));
            }
        }
        let added = v.len() as u32 + 1000;
        for n in added..added + 200 {
            let new = data.next();
            v.set(n, Some(&new));
            news.push((n, new));
        }
        // Once built, the graph takes the 800 writes a step per search, and is put in place
        // only when it has them all: a search never stalls on a long build's writes.
        while !v.ann.read().finished() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(v.search(&q, 10, &|_| true), v.search_exact(&q, 10, &|_| true));
        assert!(v.ann.read().graph.is_none() && v.ann.read().built.is_some());
        assert_eq!(v.ann.read().written.len(), 800 - INSTALL_STEP);
        assert!(v.wait_for_graph());
        assert!(!v.building_graph());
        let found = news
            .iter()
            .filter(|(n, new)| {
                let hits = v.search_approximate(new, 10, &|_| true).unwrap();
                assert!(hits.iter().all(|(m, _)| !(m % 97 == 0 && m / 97 < 600 && (m / 97) % 2 == 0)));
                ids(&hits).contains(n)
            })
            .count();
        assert!(found * 100 >= news.len() * 95, "{found} of {} written during the build found", news.len());
        // Removed during the build: not in the graph at all; written: in it.
        let graph = v.ann.read();
        let g = graph.graph.as_ref().unwrap();
        for i in (0..600u32).step_by(2) {
            assert!(!g.contains(i * 97), "entry {}, removed during the build, is in the graph", i * 97);
        }
        assert!(news.iter().all(|(n, _)| g.contains(*n)));
    }

    #[test]
    fn dropping_the_store_stops_its_build() {
        let (v, mut data) = large(15);
        v.search(&data.next(), 10, &|_| true);
        let cancel = Arc::clone(&v.ann.read().building.as_ref().unwrap().cancel);
        drop(v);
        assert!(cancel.load(Ordering::Relaxed));
    }

    #[test]
    fn searches_share_the_graph_across_threads() {
        let (v, queries) = shared();
        let want: Vec<Vec<u32>> = queries.iter().map(|q| ids(&v.search(q, 10, &|_| true))).collect();
        std::thread::scope(|s| {
            for t in 0..4 {
                let want = &want;
                s.spawn(move || {
                    for (q, w) in queries.iter().zip(want).skip(t) {
                        assert_eq!(&ids(&v.search(q, 10, &|_| true)), w);
                    }
                });
            }
        });
    }

    #[test]
    fn churn_rebuilds_the_graph_and_recall_holds() {
        let (mut v, mut data) = large(13);
        let queries: Vec<Vec<f32>> = (0..100).map(|_| data.next()).collect();
        assert!(v.wait_for_graph());
        // Replace a sixth of the vectors and take a third away: the graph is worn, and the next
        // search through it builds it again.
        let count = v.len() as u32;
        for n in (1..count).step_by(6) {
            v.set(n, Some(&data.next()));
        }
        for n in (0..count).step_by(3) {
            v.set(n, None);
        }
        assert!(v.ann.read().graph.as_ref().is_some_and(Ann::worn));
        let mut hits = 0;
        for q in &queries {
            let want = ids(&v.search_exact(q, 10, &|_| true));
            let got = ids(&v.search_approximate(q, 10, &|_| true).unwrap());
            assert!(got.iter().all(|n| !n.is_multiple_of(3)), "a removed vector was returned");
            hits += got.iter().filter(|n| want.contains(n)).count();
        }
        let r = hits as f64 / (10 * queries.len()) as f64;
        assert!(r >= 0.95, "recall@10 after churn {r}");
        assert!(v.ann.read().graph.as_ref().is_some_and(|g| !g.worn()));
        // Below the threshold the graph is let go.
        for n in 0..count {
            v.set(n, None);
        }
        assert!(v.ann.read().graph.is_none());
    }

    #[test]
    fn a_wide_filter_is_told_from_a_few_rows_and_a_narrow_one_from_the_whole_sample() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (v, _) = shared();
        let calls = &AtomicUsize::new(0);
        let count = |pass: bool| {
            calls.store(0, Ordering::Relaxed);
            move |_: u32| {
                calls.fetch_add(1, Ordering::Relaxed);
                pass
            }
        };
        // Every row passes: settled once one in SELECTIVE of the whole sample has.
        assert!(!v.selective(&count(true)));
        assert_eq!(calls.load(Ordering::Relaxed), FILTER_SAMPLE.div_ceil(SELECTIVE));
        // None passes: every row of the sample is tried.
        assert!(v.selective(&count(false)));
        assert_eq!(calls.load(Ordering::Relaxed), FILTER_SAMPLE);
        for every in [2u32, 7, 15] {
            assert!(!v.selective(&move |n: u32| n.is_multiple_of(every)), "every {every}");
        }
        for every in [25u32, 1000] {
            assert!(v.selective(&move |n: u32| n.is_multiple_of(every)), "every {every}");
        }
    }

    #[test]
    fn a_filtered_search_returns_k_whenever_k_match() {
        let (v, queries) = shared();
        let q = &queries[0];
        let live = v.len() as u32;
        // Filters that let less than `SELECTIVE` through are answered by the scan, exactly: all
        // that match, up to k.
        for every in [25u32, 1000, 5000, live / 3, live] {
            let accept = move |n: u32| n.is_multiple_of(every);
            let got = v.search(q, 10, &accept);
            assert_eq!(got.len(), (0..live).filter(|&n| accept(n)).count().min(10), "every {every}");
            assert_eq!(ids(&got), ids(&v.search_exact(q, 10, &accept)), "every {every}");
        }
        // Wider ones go to the graph, which walks on past what they turn away.
        for every in [2u32, 7, 15] {
            let accept = move |n: u32| n.is_multiple_of(every);
            let got = v.search(q, 10, &accept);
            assert_eq!(got.len(), 10, "every {every}");
            assert!(got.iter().all(|(n, _)| n.is_multiple_of(every)));
            let got = v.search_approximate(q, 10, &accept).unwrap();
            assert_eq!(got.len(), 10, "every {every}");
        }
    }
}
