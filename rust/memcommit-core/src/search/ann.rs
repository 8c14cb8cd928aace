//! Approximate vector search: an HNSW graph (the `usearch` crate) over the unit vectors that
//! [`Vectors`](super::vectors::Vectors) holds, keyed by entry number.
//!
//! The graph holds its own copy of the vectors, quantized to 8-bit integers (a quarter of the
//! matrix's bytes), beside the exact matrix, which stays the truth: a query takes
//! [`FETCH`] times the results it wants from the graph and keeps the best by their exact
//! similarity, and exact search is what a query falls back to. Measured on 100,000 clustered
//! 384-dimensional vectors (BENCHMARKS.md), the 8-bit graph with this reranking found as many
//! of the true top 10 as a 32-bit one at the same expansion, in a seventh of the build time,
//! with a third of the memory and faster queries.
//!
//! It takes inserts one at a time; a removed entry becomes a tombstone that no search returns
//! and whose slot the next insert reuses, and a replaced one is removed and inserted again.
//! [`Ann::worn`] says when churn has left the graph worth rebuilding.
//!
//! usearch was chosen over `hnsw_rs`, `instant-distance` and `hnsw` (BENCHMARKS.md,
//! "Approximate vector search against hnswlib"): it removes and reuses entries, filters with a
//! predicate during the graph walk, inserts and searches from several threads at once, and
//! needs no `unsafe` here; `hnsw_rs` built 15 times slower with filtered queries 10 to 40
//! times slower, and the other two neither remove nor filter.

use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

/// Neighbours kept per node (HNSW's M; the base layer keeps twice as many) in a graph built
/// over fewer than [`WIDE_FROM`] entries.
const CONNECTIVITY: usize = 16;

/// Neighbours kept per node in a graph built over [`WIDE_FROM`] entries or more. Measured on
/// the clustered 384-dimensional vectors (BENCHMARKS.md, 2026-12-06): on 1,000,000, M 32 at
/// ef 64 found as many of the true top 10 as M 16 at ef 127 (0.973 and 0.974) at 1.1-1.7x the
/// queries a second, in five rounds taken in turn, for a third more graph memory (1,065
/// bytes a vector against 797); on 500,000, M 16 at ef 48 (0.972) answered 1.4x as many as
/// M 32 at ef 32 (0.985), and on 100,000 M 16 was faster at every recall measured.
const CONNECTIVITY_WIDE: usize = 32;

/// From this many entries at the build the graph keeps [`CONNECTIVITY_WIDE`] neighbours a
/// node: between the two sizes measured, 500,000 (where the narrower graph was faster) and
/// 1,000,000 (where the wider one was).
const WIDE_FROM: usize = 750_000;

/// Candidates kept while inserting (HNSW's ef_construction).
const EXPANSION_ADD: usize = 128;

/// Candidates kept while searching (HNSW's ef) in a graph of up to [`EXPANSION_AT`] entries,
/// or as many as a query asks for if more. Recall@10 on the measured data (100,000 vectors):
/// 0.984 at 20, 0.998 at 32; more leaves margin for data harder than the measured.
const EXPANSION_SEARCH: usize = 32;

/// Past this many entries the search expansion of a graph of [`CONNECTIVITY`] grows with the
/// graph's size to the power 0.6: a larger graph needs more candidates for the same recall.
/// On 500,000 of the measured vectors its recall@10 was 0.92 at ef 32, 0.972 at 48 and 0.985
/// at 64; on 1,000,000, 0.77 at 32, 0.91-0.92 at 64, 0.946-0.961 at 96 and 0.974-0.976 at
/// 127-128 (hnswlib's, built with ef_construction 200: 0.84 at 32, 0.946 at 48, 0.974 at 64).
/// This gives 74 at 400,000.
const EXPANSION_AT: usize = 100_000;

/// The search expansion of a graph of [`CONNECTIVITY_WIDE`] at [`WIDE_FROM`] entries, growing
/// with the same power beyond: this gives 59 at 1,000,000. There, on the measured vectors, its
/// recall@10 was 0.92 at ef 32, 0.963 at 48, 0.973 at 64 and 0.985 at 80 built on two threads,
/// and 0.966 at 40, 0.981 at 48 and 0.983-0.989 at 59 built on one, as a store on two cores
/// builds it (hnswlib's: 0.959 at 52, 0.974 at 64, 0.988 at 80).
const EXPANSION_WIDE: usize = 50;

/// Neighbours kept per node in a graph that is `wide` or not.
fn connectivity(wide: bool) -> usize {
    if wide {
        CONNECTIVITY_WIDE
    } else {
        CONNECTIVITY
    }
}

/// The search expansion for a graph of `n` entries, `wide` if it keeps
/// [`CONNECTIVITY_WIDE`] neighbours a node.
fn expansion_for(n: usize, wide: bool) -> usize {
    let (base, at) = if wide { (EXPANSION_WIDE, WIDE_FROM) } else { (EXPANSION_SEARCH, EXPANSION_AT) };
    let grown = (n.max(at) as f64 / at as f64).powf(0.6);
    (base as f64 * grown).round() as usize
}

/// A query takes this many times the results it wants from the graph, to rank them again by
/// the exact vectors (the graph's 8-bit distances misorder close ones).
pub(crate) const FETCH: usize = 2;

/// Searches the graph serves at once (usearch keeps a search context for each); one beyond
/// them finds none free, fails, and is answered by the exact scan.
const CONTEXTS: usize = 16;

/// An HNSW graph over unit vectors, by entry number.
pub(crate) struct Ann {
    index: Index,
    /// The most entries the graph has held since it was built: slots that many, of which
    /// `slots - index.size()` are tombstones waiting for reuse.
    slots: usize,
    /// Entries removed or replaced since the build.
    churn: usize,
    /// Whether the graph keeps [`CONNECTIVITY_WIDE`] neighbours a node (it was built over
    /// [`WIDE_FROM`] entries or more).
    wide: bool,
    /// The search expansion set, [`expansion_for`] the graph's size.
    expansion: usize,
}

impl std::fmt::Debug for Ann {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ann").field("len", &self.index.size()).field("churn", &self.churn).finish()
    }
}

impl Ann {
    /// A graph over `rows` (entry number and unit vector of `dims` values), built on `threads`
    /// threads. `None` if usearch cannot allocate it, or once `stop` is set (checked every
    /// few hundred rows).
    pub(crate) fn build<'a>(
        dims: usize,
        rows: impl Iterator<Item = (u32, &'a [f32])> + Clone + Send,
        count: usize,
        threads: usize,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Option<Ann> {
        let wide = count >= WIDE_FROM;
        let opts = IndexOptions {
            dimensions: dims,
            metric: MetricKind::IP,
            quantization: ScalarKind::I8,
            connectivity: connectivity(wide),
            expansion_add: EXPANSION_ADD,
            expansion_search: expansion_for(count, wide),
            multi: false,
        };
        let index = Index::new(&opts).ok()?;
        let threads = threads.clamp(1, CONTEXTS);
        index.reserve_capacity_and_threads(count.max(1024), CONTEXTS).ok()?;
        let failed = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            for t in 0..threads {
                let (index, rows, failed) = (&index, rows.clone(), &failed);
                s.spawn(move || {
                    for (i, (n, v)) in rows.skip(t).step_by(threads).enumerate() {
                        let stopped = i % 256 == 0 && stop.load(std::sync::atomic::Ordering::Relaxed);
                        if stopped || index.add(u64::from(n), v).is_err() {
                            failed.store(true, std::sync::atomic::Ordering::Relaxed);
                            return;
                        }
                    }
                });
            }
        });
        if failed.into_inner() {
            return None;
        }
        let slots = index.size();
        Some(Ann { index, slots, churn: 0, wide, expansion: expansion_for(count, wide) })
    }

    /// Give entry `n` the unit vector `v` (replacing the one it had; usearch quantizes it). False if usearch could
    /// not: the graph is then missing `n` and must not be used.
    pub(crate) fn insert(&mut self, n: u32, v: &[f32]) -> bool {
        let key = u64::from(n);
        if self.index.contains(key) {
            if self.index.remove(key).is_err() {
                return false;
            }
            self.churn += 1;
        }
        if self.index.size() + 1 > self.index.capacity() {
            let grown = (self.index.capacity() * 2).max(1024);
            if self.index.reserve_capacity_and_threads(grown, CONTEXTS).is_err() {
                return false;
            }
        }
        if self.index.add(key, v).is_err() {
            return false;
        }
        self.slots = self.slots.max(self.index.size());
        self.follow_size();
        true
    }

    /// Set the search expansion for the graph's size now. Here, under `&mut self`, and not in
    /// a search: usearch reads it unlocked while searching.
    fn follow_size(&mut self) {
        let want = expansion_for(self.index.size(), self.wide);
        // Only on a change of a tenth, so inserts one at a time do not each reset it.
        if want.abs_diff(self.expansion) * 10 > self.expansion {
            self.index.change_expansion_search(want);
            self.expansion = want;
        }
    }

    /// Take entry `n` out. False if usearch could not.
    pub(crate) fn remove(&mut self, n: u32) -> bool {
        match self.index.remove(u64::from(n)) {
            Ok(0) => true,
            Ok(_) => {
                self.churn += 1;
                self.follow_size();
                true
            }
            Err(_) => false,
        }
    }

    /// Whether so much has been removed or replaced since the build that a new graph would
    /// search better: tombstones are a quarter of the slots, or there have been more
    /// removals and replacements than entries (each reinsertion links a node into a graph
    /// that was shaped without it).
    pub(crate) fn worn(&self) -> bool {
        let live = self.index.size();
        let tombstones = self.slots.saturating_sub(live);
        tombstones * 4 > self.slots || self.churn > live.max(1024)
    }

    /// Up to `k` entries near the unit vector `q` among those `accept` lets through, nearest
    /// first as the graph ranks them (by 8-bit distances: ask for more than you keep). `None`
    /// if usearch failed (as it does when [`CONTEXTS`] searches are under way). Safe from
    /// several threads at once: it changes nothing in the graph.
    pub(crate) fn search(
        &self,
        q: &[f32],
        k: usize,
        accept: &(dyn Fn(u32) -> bool + Sync),
    ) -> Option<Vec<u32>> {
        let found = self.index.filtered_search(q, k, |key| u32::try_from(key).is_ok_and(accept)).ok()?;
        Some(found.keys.iter().filter_map(|&key| u32::try_from(key).ok()).collect())
    }

    /// Whether entry `n` is in the graph.
    #[cfg(test)]
    pub(crate) fn contains(&self, n: u32) -> bool {
        self.index.contains(u64::from(n))
    }

    /// Bytes the graph holds (usearch's own estimate).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.index.memory_usage()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_graph_built_over_wide_from_entries_or_more_keeps_more_neighbours() {
        let stop = std::sync::atomic::AtomicBool::new(false);
        let rows: Vec<(u32, [f32; 2])> =
            (0..64u32).map(|n| (n, [(n as f32).cos(), (n as f32).sin()])).collect();
        let ann = Ann::build(2, rows.iter().map(|(n, v)| (*n, v.as_slice())), rows.len(), 1, &stop).unwrap();
        assert!(!ann.wide);
        assert_eq!(ann.index.connectivity(), CONNECTIVITY);
        assert_eq!(ann.expansion, EXPANSION_SEARCH);
        // Said to be as large as WIDE_FROM (the count sizes the graph; its rows are few).
        let wide = Ann::build(2, rows.iter().map(|(n, v)| (*n, v.as_slice())), WIDE_FROM, 1, &stop).unwrap();
        assert!(wide.wide);
        assert_eq!(wide.index.connectivity(), CONNECTIVITY_WIDE);
        assert_eq!(wide.expansion, EXPANSION_WIDE);
    }

    #[test]
    fn the_search_expansion_grows_past_its_threshold() {
        assert_eq!(expansion_for(0, false), EXPANSION_SEARCH);
        assert_eq!(expansion_for(EXPANSION_AT, false), EXPANSION_SEARCH);
        assert_eq!(expansion_for(400_000, false), 74);
        assert_eq!(expansion_for(1_000_000, false), 127);
        // A wide graph (built over 750,000 entries or more) needs fewer.
        assert_eq!(expansion_for(WIDE_FROM, true), EXPANSION_WIDE);
        assert_eq!(expansion_for(1_000_000, true), 59);
        // One that shrank since its build keeps its floor.
        assert_eq!(expansion_for(100_000, true), EXPANSION_WIDE);
    }
}
