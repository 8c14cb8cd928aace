//! Full-text search: an inverted index over the memories' texts, ranked by BM25.
//!
//! The tokenizer splits text at Unicode word boundaries (UAX #29: so words of any script, with
//! each CJK ideograph a word of its own) and lowercases each word (Unicode's full mapping).
//! A memory whose text changes gets a new generation number; its old postings stay in their
//! lists, skipped because their generation is stale, until they outnumber the live ones and
//! every list is rebuilt from the documents.

use hashbrown::HashMap;
use parking_lot::Mutex;
use unicode_segmentation::UnicodeSegmentation;

use crate::search::TopK;

/// BM25's term-frequency saturation.
const K1: f32 = 1.2;
/// BM25's length normalisation.
const B: f32 = 0.75;

/// The words of a text, lowercased, in order.
pub fn tokenize(text: &str) -> impl Iterator<Item = String> + '_ {
    text.unicode_words().map(|w| w.to_lowercase())
}

#[derive(Clone, Copy, Debug)]
struct Posting {
    entry: u32,
    tf: u32,
    generation: u32,
}

#[derive(Debug, Default)]
struct Doc {
    generation: u32,
    live: bool,
    len: u32,
    /// (term, frequency) of each distinct term.
    terms: Box<[(u32, u32)]>,
}

/// The texts of one store, by entry number.
#[derive(Debug, Default)]
pub struct TextIndex {
    terms: HashMap<Box<str>, u32>,
    postings: Vec<Vec<Posting>>,
    /// Live documents holding each term.
    df: Vec<u32>,
    docs: Vec<Doc>,
    live_docs: u64,
    total_len: u64,
    postings_total: usize,
    postings_dead: usize,
    scratch: Mutex<Scratch>,
}

impl TextIndex {
    /// How many memories are indexed.
    pub fn len(&self) -> u64 {
        self.live_docs
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.live_docs == 0
    }

    /// Bytes held, roughly.
    pub fn heap_bytes(&self) -> usize {
        self.postings_total * std::mem::size_of::<Posting>()
            + self.docs.iter().map(|d| d.terms.len() * 8).sum::<usize>()
            + self.docs.capacity() * std::mem::size_of::<Doc>()
            + self.terms.keys().map(|k| k.len() + 24).sum::<usize>()
    }

    /// Index entry `n`'s text (replacing what it had).
    pub fn set(&mut self, n: u32, text: &str) {
        self.remove(n);
        let mut counts: HashMap<u32, u32> = HashMap::new();
        let mut len = 0u32;
        for word in tokenize(text) {
            let next = self.terms.len() as u32;
            let t = *self.terms.entry(word.into_boxed_str()).or_insert(next);
            if t == next {
                self.postings.push(Vec::new());
                self.df.push(0);
            }
            *counts.entry(t).or_insert(0) += 1;
            len += 1;
        }
        if self.docs.len() <= n as usize {
            self.docs.resize_with(n as usize + 1, Doc::default);
        }
        let doc = &mut self.docs[n as usize];
        doc.generation = doc.generation.wrapping_add(1);
        doc.live = true;
        doc.len = len;
        let mut terms: Vec<(u32, u32)> = counts.into_iter().collect();
        terms.sort_unstable();
        for &(t, tf) in &terms {
            self.postings[t as usize].push(Posting { entry: n, tf, generation: doc.generation });
            self.df[t as usize] += 1;
        }
        self.postings_total += terms.len();
        doc.terms = terms.into_boxed_slice();
        self.live_docs += 1;
        self.total_len += len as u64;
    }

    /// Take entry `n` out of the index.
    pub fn remove(&mut self, n: u32) {
        let Some(doc) = self.docs.get_mut(n as usize) else { return };
        if !doc.live {
            return;
        }
        doc.live = false;
        for &(t, _) in doc.terms.iter() {
            self.df[t as usize] -= 1;
        }
        self.postings_dead += doc.terms.len();
        self.live_docs -= 1;
        self.total_len -= doc.len as u64;
        doc.terms = Box::new([]);
        if self.postings_dead > 1024 && self.postings_dead * 2 > self.postings_total {
            self.drop_dead_postings();
        }
    }

    fn drop_dead_postings(&mut self) {
        let docs = &self.docs;
        for list in &mut self.postings {
            list.retain(|p| {
                let d = &docs[p.entry as usize];
                d.live && d.generation == p.generation
            });
        }
        self.postings_total -= self.postings_dead;
        self.postings_dead = 0;
    }

    /// The `k` entries that best match `query` by BM25 among those `accept` lets through, best
    /// first, with their scores. Entries matching no word of the query are not returned.
    ///
    /// The query's words are taken rarest first (MaxScore): once the `k`-th best score so far
    /// is above what every word left could still add to a memory that has none of the words
    /// read so far, no such memory can enter the top `k`, and the words left (the common
    /// ones, with the longest lists) are looked up in the candidates' own word lists instead of
    /// read through. The scores are exactly BM25's.
    pub fn search(&self, query: &str, k: usize, accept: &dyn Fn(u32) -> bool) -> Vec<(u32, f32)> {
        if k == 0 || self.live_docs == 0 {
            return Vec::new();
        }
        let mut wanted: Vec<u32> =
            tokenize(query).filter_map(|w| self.terms.get(w.as_str()).copied()).collect();
        wanted.sort_unstable();
        wanted.dedup();
        let n = self.live_docs as f32;
        let avg = (self.total_len as f32 / n).max(1.0);
        // (term, idf), the largest possible contribution (the rarest word) first.
        let mut terms: Vec<(u32, f32)> = wanted
            .into_iter()
            .filter(|&t| self.df[t as usize] > 0)
            .map(|t| {
                let df = self.df[t as usize] as f32;
                (t, (1.0 + (n - df + 0.5) / (df + 0.5)).ln())
            })
            .collect();
        terms.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        // A word adds at most idf * (k1 + 1) to a memory's score (as its count grows).
        let bound = |idf: f32| idf * (K1 + 1.0);
        let weight = |idf: f32, tf: u32, len: u32| {
            let tf = tf as f32;
            idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len as f32 / avg))
        };
        let mut scratch = Scratch::take(&self.scratch, self.docs.len());
        let scores = &mut scratch.scores;
        // Accepted candidates (score > 0) and refused ones (score < 0), to reset the scratch.
        let mut seen: Vec<u32> = Vec::new();
        let mut refused: Vec<u32> = Vec::new();
        let mut read = 0;
        while read < terms.len() {
            // What the words left could add to a memory none of the words read so far is in.
            let rest: f32 = terms[read..].iter().map(|&(_, idf)| bound(idf)).sum();
            // Strictly above: a memory not seen yet that would tie could still win on age.
            if seen.len() >= k && kth_best(scores, &seen, k) > rest {
                break;
            }
            let (t, idf) = terms[read];
            for p in &self.postings[t as usize] {
                let d = &self.docs[p.entry as usize];
                if !d.live || d.generation != p.generation {
                    continue;
                }
                let s = &mut scores[p.entry as usize];
                if *s < 0.0 {
                    continue;
                }
                if *s == 0.0 {
                    if !accept(p.entry) {
                        *s = -1.0;
                        refused.push(p.entry);
                        continue;
                    }
                    seen.push(p.entry);
                }
                *s += weight(idf, p.tf, d.len);
            }
            read += 1;
        }
        for &(t, idf) in &terms[read..] {
            for &e in &seen {
                let d = &self.docs[e as usize];
                if let Ok(j) = d.terms.binary_search_by_key(&t, |&(term, _)| term) {
                    scores[e as usize] += weight(idf, d.terms[j].1, d.len);
                }
            }
        }
        let mut top = TopK::new(k);
        for &e in &seen {
            top.push(scores[e as usize], e);
            scores[e as usize] = 0.0;
        }
        for &e in &refused {
            scores[e as usize] = 0.0;
        }
        scratch.give_back(&self.scratch);
        top.into_sorted()
    }
}

/// The `k`-th best score among `seen` (at least `k` of them).
fn kth_best(scores: &[f32], seen: &[u32], k: usize) -> f32 {
    let mut s: Vec<f32> = seen.iter().map(|&e| scores[e as usize]).collect();
    let (_, kth, _) = s.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
    *kth
}

/// A score per entry, all zero between queries: kept by the index for the next query (a
/// query running beside another makes its own).
#[derive(Debug, Default)]
struct Scratch {
    scores: Vec<f32>,
}

impl Scratch {
    fn take(pool: &Mutex<Scratch>, len: usize) -> Scratch {
        let mut s = pool.try_lock().map(|mut p| std::mem::take(&mut *p)).unwrap_or_default();
        if s.scores.len() < len {
            s.scores.resize(len, 0.0);
        }
        s
    }

    fn give_back(self, pool: &Mutex<Scratch>) {
        if let Some(mut p) = pool.try_lock() {
            if p.scores.len() < self.scores.len() {
                *p = self;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_unicode_words_lowercased() {
        let words: Vec<String> = tokenize("Straße, CAFÉ au-lait! 東京都 naïve").collect();
        assert_eq!(words, ["straße", "café", "au", "lait", "東", "京", "都", "naïve"]);
    }

    #[test]
    fn bm25_ranks_rarer_and_more_frequent_terms_higher_and_follows_updates() {
        let mut t = TextIndex::default();
        t.set(0, "the cat sat on the mat");
        t.set(1, "the dog chased the cat");
        t.set(2, "a bird sang");
        t.set(3, "cat cat cat");
        let ids = |v: Vec<(u32, f32)>| v.into_iter().map(|x| x.0).collect::<Vec<_>>();
        // Three times in three words first; then the shorter of the two texts that say it once.
        assert_eq!(ids(t.search("cat", 10, &|_| true)), [3, 1, 0]);
        assert_eq!(ids(t.search("dog cat", 10, &|_| true))[0], 1);
        assert_eq!(ids(t.search("CAT", 10, &|n| n != 3)), [1, 0]);
        assert!(t.search("elephant", 10, &|_| true).is_empty());
        // A new text replaces the old one; a removed memory is never found.
        t.set(3, "a quiet afternoon");
        assert_eq!(ids(t.search("cat", 10, &|_| true)), [1, 0]);
        t.remove(0);
        assert_eq!(ids(t.search("cat mat", 10, &|_| true)), [1]);
        assert_eq!(t.len(), 3);
    }

    /// BM25 the plain way: every word of the query over every live document.
    fn naive(
        docs: &[Option<String>],
        query: &str,
        k: usize,
        accept: &dyn Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        let live: Vec<(u32, Vec<String>)> = docs
            .iter()
            .enumerate()
            .filter_map(|(n, d)| d.as_ref().map(|t| (n as u32, tokenize(t).collect())))
            .collect();
        let n = live.len() as f32;
        let avg = (live.iter().map(|(_, w)| w.len()).sum::<usize>() as f32 / n).max(1.0);
        let mut words: Vec<String> = tokenize(query).collect();
        words.sort();
        words.dedup();
        let dfs: Vec<f32> =
            words.iter().map(|w| live.iter().filter(|(_, d)| d.contains(w)).count() as f32).collect();
        let mut top = TopK::new(k);
        for (e, doc) in &live {
            if !accept(*e) {
                continue;
            }
            let mut score = 0.0f32;
            let mut any = false;
            for (w, &df) in words.iter().zip(&dfs) {
                let tf = doc.iter().filter(|x| *x == w).count() as f32;
                if tf > 0.0 {
                    any = true;
                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                    score += idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * doc.len() as f32 / avg));
                }
            }
            if any {
                top.push(score, *e);
            }
        }
        top.into_sorted()
    }

    #[test]
    fn search_agrees_with_plain_bm25_under_updates_filters_and_pruning() {
        let mut rng = 11u64;
        let mut next = |m: u64| {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (rng >> 33) % m
        };
        // A few very common words and many rare ones, so pruning has work to skip.
        let vocab: Vec<String> = (0..60).map(|i| format!("w{i}")).collect();
        let draw_word = |next: &mut dyn FnMut(u64) -> u64| {
            let r = next(100);
            if r < 50 {
                vocab[(r % 3) as usize].clone()
            } else {
                vocab[3 + next(57) as usize].clone()
            }
        };
        let mut t = TextIndex::default();
        let mut docs: Vec<Option<String>> = vec![None; 400];
        for round in 0..6 {
            for _ in 0..300 {
                let n = next(400) as u32;
                if next(10) == 0 {
                    t.remove(n);
                    docs[n as usize] = None;
                } else {
                    let len = 1 + next(12);
                    let text: Vec<String> = (0..len).map(|_| draw_word(&mut next)).collect();
                    let text = text.join(" ");
                    t.set(n, &text);
                    docs[n as usize] = Some(text);
                }
            }
            for q in 0..40 {
                let words = 1 + next(4);
                let query: Vec<String> = (0..words).map(|_| draw_word(&mut next)).collect();
                let query = query.join(" ");
                let k = 1 + next(15) as usize;
                let modulo = 1 + (q % 3) as u32;
                let accept = |e: u32| e.is_multiple_of(modulo);
                let got = t.search(&query, k, &accept);
                let want = naive(&docs, &query, k, &accept);
                assert_eq!(got.len(), want.len(), "round {round}, {query:?}, k {k}");
                for (g, w) in got.iter().zip(&want) {
                    assert!((g.1 - w.1).abs() <= 1e-4 * w.1.abs().max(1.0), "{query:?}: {got:?} vs {want:?}");
                }
                // The same memories, but for those tied (to within rounding) with the last one.
                let last = want.last().map_or(0.0, |x| x.1);
                for (e, score) in &want {
                    if *score > last + 1e-4 {
                        assert!(got.iter().any(|g| g.0 == *e), "{query:?}: {got:?} vs {want:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn dead_postings_are_dropped_without_changing_results() {
        let mut t = TextIndex::default();
        for round in 0..5u32 {
            for n in 0..2000u32 {
                t.set(n, &format!("word{} common round{round}", n % 50));
            }
        }
        assert!(t.postings_total <= 2 * 2000 * 3 + 1024 * 2, "{}", t.postings_total);
        let got = t.search("word7 round4", 100, &|_| true);
        assert_eq!(got.len(), 100);
        assert!(got[..40].iter().all(|(n, _)| n % 50 == 7));
        assert!(t.search("round3", 10, &|_| true).is_empty());
    }
}
