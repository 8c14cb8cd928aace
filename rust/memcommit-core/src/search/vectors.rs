//! Exact vector search: every memory's vector, normalised, in one row-major matrix, scanned
//! with SIMD dot products (cosine similarity of unit vectors).
//!
//! Rows are numbered apart from entries so a store where few memories carry vectors holds only
//! theirs; a memory whose new put has no vector frees its row for the next one.

use simsimd::SpatialSimilarity;

use crate::search::TopK;

const NONE: u32 = u32::MAX;

/// Above this many values (rows × dims) a scan is split between threads.
const PARALLEL_FROM: usize = 1 << 22;

/// The vectors of one store, by entry number.
#[derive(Debug, Default)]
pub struct Vectors {
    dims: usize,
    /// `rows × dims` values, each row a unit vector (or zeros for a zero vector).
    data: Vec<f32>,
    entry_of_row: Vec<u32>,
    row_of_entry: Vec<u32>,
    free: Vec<u32>,
    live: usize,
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
        self.data.capacity() * 4 + (self.entry_of_row.capacity() + self.row_of_entry.capacity()) * 4
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
            self.entry_of_row.push(NONE);
            self.data.resize(self.data.len() + self.dims, 0.0);
            (self.entry_of_row.len() - 1) as u32
        };
        if self.row_of_entry.len() <= n as usize {
            self.row_of_entry.resize(n as usize + 1, NONE);
        }
        self.row_of_entry[n as usize] = row;
        self.entry_of_row[row as usize] = n;
        let dst = &mut self.data[row as usize * self.dims..(row as usize + 1) * self.dims];
        normalize_into(v, dst);
        true
    }

    /// The `k` entries most similar to `query` (cosine) among those `accept` lets through, best
    /// first, with their similarity. `query` must have the store's dimension.
    pub fn search(&self, query: &[f32], k: usize, accept: &(dyn Fn(u32) -> bool + Sync)) -> Vec<(u32, f32)> {
        if self.dims == 0 || query.len() != self.dims || k == 0 {
            return Vec::new();
        }
        let mut q = vec![0.0; self.dims];
        normalize_into(query, &mut q);
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

    /// `search` over the entries `among` only (a task's memories, say).
    pub fn search_among(
        &self,
        query: &[f32],
        among: &[u32],
        k: usize,
        accept: &(dyn Fn(u32) -> bool + Sync),
    ) -> Vec<(u32, f32)> {
        if self.dims == 0 || query.len() != self.dims || k == 0 {
            return Vec::new();
        }
        let mut q = vec![0.0; self.dims];
        normalize_into(query, &mut q);
        let mut top = TopK::new(k);
        for &n in among {
            match self.row_of_entry.get(n as usize) {
                Some(&row) if row != NONE && accept(n) => top.push(dot(&q, self.row(row as usize)), n),
                _ => {}
            }
        }
        top.into_sorted()
    }

    /// The similarity of `query` to entry `n`'s vector, if it has one.
    pub fn score(&self, query: &[f32], n: u32) -> Option<f32> {
        let row = *self.row_of_entry.get(n as usize)?;
        if row == NONE || query.len() != self.dims {
            return None;
        }
        let mut q = vec![0.0; self.dims];
        normalize_into(query, &mut q);
        Some(dot(&q, self.row(row as usize)))
    }

    fn row(&self, r: usize) -> &[f32] {
        &self.data[r * self.dims..(r + 1) * self.dims]
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
            top.push(dot(q, self.row(r)), n);
        }
        top
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
}
