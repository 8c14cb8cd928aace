//! Full-text search: an inverted index over the memories' texts, ranked by BM25.
//!
//! The tokenizer splits text at Unicode word boundaries (UAX #29: so words of any script, with
//! each CJK ideograph a word of its own) and lowercases each word (Unicode's full mapping).
//! A memory whose text changes gets a new generation number; its old postings stay in their
//! lists, skipped because their generation is stale, until they outnumber the live ones and
//! every list is rebuilt from the documents.

use hashbrown::HashMap;
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
        let mut scores: HashMap<u32, f32> = HashMap::new();
        let mut refused: hashbrown::HashSet<u32> = hashbrown::HashSet::new();
        for t in wanted {
            let df = self.df[t as usize] as f32;
            if df == 0.0 {
                continue;
            }
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for p in &self.postings[t as usize] {
                let d = &self.docs[p.entry as usize];
                if !d.live || d.generation != p.generation || refused.contains(&p.entry) {
                    continue;
                }
                let score = match scores.get_mut(&p.entry) {
                    Some(s) => s,
                    None => {
                        if !accept(p.entry) {
                            refused.insert(p.entry);
                            continue;
                        }
                        scores.entry(p.entry).or_insert(0.0)
                    }
                };
                let tf = p.tf as f32;
                *score += idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * d.len as f32 / avg));
            }
        }
        let mut top = TopK::new(k);
        for (e, s) in scores {
            top.push(s, e);
        }
        top.into_sorted()
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
