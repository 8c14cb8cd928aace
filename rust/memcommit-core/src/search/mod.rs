//! Search by meaning and by words: the vectors and texts of a store's memories, by entry
//! number, and the ranking of a query against them.
//!
//! * [`vectors`]: cosine search over normalised vectors: exact with SIMD kernels, and from an
//!   approximate index ([`ann`], an HNSW graph) above [`vectors::ANN_FROM`] vectors.
//! * [`text`]: a BM25 inverted index over Unicode words.
//!
//! A [`SearchIndex`] holds no status, tier, kind, task or tags: a query's filter is the index's
//! own (`state::index::Filter`), tested on the live entry as each candidate is scored, so a
//! memory marked stale or moved is filtered the moment the index says so.

mod ann;
pub mod text;
pub mod vectors;

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// How a query ranks memories.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Cosine similarity of the memories' vectors to the query vector.
    Vector,
    /// BM25 over the memories' texts.
    Text,
    /// Both, fused by reciprocal rank ([`RRF_K`]).
    Hybrid,
}

impl Mode {
    /// The mode a user names.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "vector" => Some(Mode::Vector),
            "text" => Some(Mode::Text),
            "hybrid" => Some(Mode::Hybrid),
            _ => None,
        }
    }
}

/// Reciprocal rank fusion's constant: a memory ranked `r` (from 1) by a list scores
/// `1 / (RRF_K + r)` from it, and its fused score is the sum over the lists.
pub const RRF_K: f32 = 60.0;

/// In hybrid mode each list ranks at least this many memories (and at least `4 k`) before they
/// are fused, so a memory second in one list and absent from the other's top k still counts.
pub const HYBRID_DEPTH: usize = 100;

/// The vectors and texts of one store.
#[derive(Debug, Default)]
pub struct SearchIndex {
    /// The vectors.
    pub vectors: vectors::Vectors,
    /// The texts.
    pub text: text::TextIndex,
}

impl SearchIndex {
    /// Index entry `n`'s current put: its text, and its vector or none.
    pub fn set(&mut self, n: u32, text: &str, vector: Option<&[f32]>) {
        self.text.set(n, text);
        self.vectors.set(n, vector);
    }

    /// The `k` best entries for a query, best first, with their scores. `text` is the query's
    /// words (none: no text ranking), `vector` its vector (none: no vector ranking).
    pub fn search(
        &self,
        mode: Mode,
        text: Option<&str>,
        vector: Option<&[f32]>,
        k: usize,
        accept: &(dyn Fn(u32) -> bool + Sync),
    ) -> Vec<(u32, f32)> {
        match mode {
            Mode::Vector => vector.map_or_else(Vec::new, |v| self.vectors.search(v, k, accept)),
            Mode::Text => text.map_or_else(Vec::new, |t| self.text.search(t, k, accept)),
            Mode::Hybrid => {
                let depth = k.saturating_mul(4).max(HYBRID_DEPTH);
                let by_vector = vector.map_or_else(Vec::new, |v| self.vectors.search(v, depth, accept));
                let by_text = text.map_or_else(Vec::new, |t| self.text.search(t, depth, accept));
                fuse(&[by_vector, by_text], k)
            }
        }
    }
}

/// A store's search index and the LSN it is current to (what an open log keeps: see
/// `engine::search`).
#[derive(Debug, Default)]
pub struct SearchState {
    pub(crate) index: SearchIndex,
    pub(crate) lsn: u64,
    pub(crate) built: bool,
}

impl SearchState {
    /// The dimension of the store's vectors, `None` while it has none.
    pub fn vector_dims(&self) -> Option<usize> {
        self.index.vectors.dims()
    }
}

/// Reciprocal rank fusion of ranked lists: the `k` best by summed `1 / (RRF_K + rank)`; ties go
/// to the memory ranked better in the first list that has it.
pub fn fuse(lists: &[Vec<(u32, f32)>], k: usize) -> Vec<(u32, f32)> {
    let mut scores: hashbrown::HashMap<u32, f32> = hashbrown::HashMap::new();
    for list in lists {
        for (rank, (n, _)) in list.iter().enumerate() {
            *scores.entry(*n).or_insert(0.0) += 1.0 / (RRF_K + rank as f32 + 1.0);
        }
    }
    let mut top = TopK::new(k);
    for (n, s) in scores {
        top.push(s, n);
    }
    top.into_sorted()
}

/// One scored entry; ordered so that the heap's top is the worst kept (lowest score, then the
/// highest entry number: among equal scores the older memory wins).
#[derive(Clone, Copy, Debug)]
struct Scored(f32, u32);

impl PartialEq for Scored {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Scored {}
impl PartialOrd for Scored {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scored {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: a better entry is "less", so the max-heap's top is the worst.
        o.0.total_cmp(&self.0).then(self.1.cmp(&o.1))
    }
}

/// The best `k` of a stream of scored entries.
#[derive(Debug)]
pub struct TopK {
    k: usize,
    heap: BinaryHeap<Scored>,
}

impl TopK {
    /// Keep the best `k`.
    pub fn new(k: usize) -> TopK {
        TopK { k, heap: BinaryHeap::with_capacity(k.min(1 << 16) + 1) }
    }

    /// Offer one entry.
    pub fn push(&mut self, score: f32, n: u32) {
        if self.k == 0 {
            return;
        }
        let s = Scored(score, n);
        if self.heap.len() < self.k {
            self.heap.push(s);
        } else if let Some(worst) = self.heap.peek() {
            if s < *worst {
                self.heap.pop();
                self.heap.push(s);
            }
        }
    }

    /// Offer every entry another `TopK` kept.
    pub fn merge(&mut self, other: TopK) {
        for Scored(s, n) in other.heap {
            self.push(s, n);
        }
    }

    /// The kept entries, best first.
    pub fn into_sorted(self) -> Vec<(u32, f32)> {
        self.heap.into_sorted_vec().into_iter().map(|Scored(s, n)| (n, s)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_keeps_the_best_in_order_and_prefers_older_entries_on_ties() {
        let mut t = TopK::new(3);
        for (s, n) in [(0.5, 1), (0.9, 2), (0.1, 3), (0.9, 0), (0.7, 4)] {
            t.push(s, n);
        }
        assert_eq!(t.into_sorted(), vec![(0, 0.9), (2, 0.9), (4, 0.7)]);
    }

    #[test]
    fn fusion_rewards_agreement() {
        let a = vec![(1, 0.9), (2, 0.8), (3, 0.7)];
        let b = vec![(3, 5.0), (2, 4.0), (9, 1.0)];
        let got: Vec<u32> = fuse(&[a, b], 4).into_iter().map(|x| x.0).collect();
        // 1/61 + 1/63 is a little more than 2/62: a first place weighs more than two seconds.
        assert_eq!(got, [3, 2, 1, 9]);
    }
}
