//! Search on an open log: the store's [`SearchIndex`] kept up with the log, and the queries.
//!
//! The search index is derived, like the index, from the log's put records; it is built the
//! first time a store is searched (or takes a vector), by reading each memory's last put, and
//! from then on brought up to the log's LSN before every query by reading only the records
//! since the last one. Both happen under the state lock, so a query sees exactly the committed
//! state: a memory re-put, marked stale, moved or (by log compaction, which opens a new
//! generation with an index of its own) purged is never found as it was. A store that is
//! never searched pays nothing.

use hashbrown::HashMap;
use parking_lot::{RwLockReadGuard, RwLockWriteGuard};

use crate::engine::log::{Log, MemoryRead};
use crate::engine::state::State;
use crate::error::{Error, Result};
use crate::format::memory::{self, PutBody};
use crate::format::{view_trusted, Op};
use crate::recovery::scan::Item;
use crate::search::{Mode, SearchIndex, SearchState};
use crate::state::index::{Entry, Query, Undo};

/// One query.
#[derive(Clone, Debug)]
pub struct SearchQuery<'a> {
    /// How to rank.
    pub mode: Mode,
    /// The words to rank texts by (text and hybrid modes).
    pub text: Option<&'a str>,
    /// The vector to rank vectors by (vector and hybrid modes).
    pub vector: Option<&'a [f32]>,
    /// How many memories at most.
    pub k: usize,
    /// Which memories may be returned (its `limit` is ignored: `k` is the limit).
    pub filter: Query<'a>,
}

/// Entries read per batch while the search index is built.
const BUILD_BATCH: usize = 4096;

/// How often [`Log::wait_for_vector_graph_between`] calls its `between` while it waits.
pub const WAIT_STEP: std::time::Duration = std::time::Duration::from_millis(50);

impl Log {
    /// The `k` memories that best match a query, best first, with their scores: cosine
    /// similarity (vector mode), BM25 (text mode) or the fused reciprocal-rank score (hybrid).
    /// The filter is tested on each candidate as it is scored, so `k` memories come back
    /// whenever `k` match.
    pub fn search(&self, q: &SearchQuery<'_>) -> Result<Vec<(MemoryRead, f32)>> {
        let st = self.state.read();
        self.check_open(&st)?;
        let s = self.search_state(&st)?;
        if q.vector.is_some_and(|v| v.iter().all(|x| *x == 0.0)) {
            return Err(Error::invalid("query", "a vector of zeros has no direction to compare"));
        }
        if let (Some(v), Some(d)) = (q.vector, s.index.vectors.dims()) {
            if v.len() != d {
                return Err(Error::invalid(
                    "query",
                    format!("a vector of {} values; this store's vectors have {d}", v.len()),
                ));
            }
        }
        let Some(filter) = st.index.filter(&q.filter) else { return Ok(Vec::new()) };
        let index = &st.index;
        let accept = |n: u32| filter.matches(index.entry(n));
        let hits = match (filter.task, q.mode) {
            // A task's memories are few: score them, not every vector in the store.
            (Some(t), Mode::Vector) => q
                .vector
                .map_or_else(Vec::new, |v| s.index.vectors.search_among(v, index.of_task(t), q.k, &accept)),
            _ => s.index.search(q.mode, q.text, q.vector, q.k, &accept),
        };
        drop(s);
        let entries = hits.iter().map(|&(n, _)| Some(*index.entry(n))).collect();
        let reads = self.read_puts(&st, entries)?;
        Ok(reads.into_iter().zip(hits).filter_map(|(r, (_, score))| r.map(|r| (r, score))).collect())
    }

    /// Build the approximate vector index now if the store is large enough to use it and it is
    /// not built (searches start that build themselves, in the background, and are answered
    /// exactly until it is ready), and wait for it. The locks are taken only for moments, so
    /// commits and searches go on meanwhile. True once the graph is in place; false when the
    /// store does not use one (too few vectors, or not turned on) or it could not be built.
    pub fn wait_for_vector_graph(&self) -> Result<bool> {
        self.wait_for_vector_graph_between(&mut || Ok(()))
    }

    /// [`wait_for_vector_graph`](Self::wait_for_vector_graph), calling `between` every
    /// [`WAIT_STEP`] or so while it waits; an error from it stops the wait (the build goes on)
    /// and is returned. The binding checks for Ctrl-C there.
    pub fn wait_for_vector_graph_between(
        &self,
        between: &mut (dyn FnMut() -> Result<()> + Send),
    ) -> Result<bool> {
        let mut since = std::time::Instant::now();
        loop {
            let ready = {
                let st = self.state.read();
                self.check_open(&st)?;
                let s = self.search_state(&st)?;
                if !s.index.vectors.approximate() {
                    return Ok(false);
                }
                s.index.vectors.poll_graph()
            };
            if let Some(ready) = ready {
                return Ok(ready);
            }
            if since.elapsed() >= WAIT_STEP {
                between()?;
                since = std::time::Instant::now();
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The dimension of this store's vectors; `None` while no memory has one.
    pub fn vector_dims(&self) -> Result<Option<usize>> {
        let st = self.state.read();
        self.check_open(&st)?;
        Ok(self.search_state(&st)?.index.vectors.dims())
    }

    /// Bytes the search index holds (0 before it is built).
    pub fn search_heap_bytes(&self) -> usize {
        let s = self.search.read();
        s.index.vectors.heap_bytes() + s.index.text.heap_bytes()
    }

    /// The search state, built or brought up to `st`'s last commit. Safe inside a commit
    /// (`st` then holds the commit's own records, applied but not committed): it reads
    /// committed records only, and each memory's committed entry (the commit's undo list
    /// keeps the entries it changed as they were).
    pub(crate) fn search_state<'a>(&'a self, st: &State) -> Result<RwLockReadGuard<'a, SearchState>> {
        let s = self.search.read();
        if s.built && s.lsn == st.lsn {
            return Ok(s);
        }
        drop(s);
        let mut s = self.search.write();
        if !s.built {
            let mut index = SearchIndex::default();
            index.vectors.set_approximate_from(self.opts.approximate_from);
            self.index_committed_puts(st, &mut index)?;
            *s = SearchState { index, lsn: st.lsn, built: true };
        } else if s.lsn < st.lsn {
            self.index_puts_after(st, &mut s)?;
        }
        Ok(RwLockWriteGuard::downgrade(s))
    }

    /// Index every memory's last committed put.
    fn index_committed_puts(&self, st: &State, into: &mut SearchIndex) -> Result<()> {
        let mut before: HashMap<u32, Entry> = HashMap::new();
        for u in &st.undo {
            if let Undo::Changed(n, e) = u {
                before.entry(*n).or_insert(*e);
            }
        }
        let count = st.index.len() as u32;
        let mut n = 0u32;
        while n < count {
            let mut batch: Vec<(u32, Entry)> = Vec::with_capacity(BUILD_BATCH);
            while n < count && batch.len() < BUILD_BATCH {
                let e = before.get(&n).copied().unwrap_or(*st.index.entry(n));
                // Created by the commit in progress: not committed yet.
                if e.created_lsn <= st.lsn {
                    batch.push((n, e));
                }
                n += 1;
            }
            let reads = self.read_puts(st, batch.iter().map(|(_, e)| Some(*e)).collect())?;
            for ((n, e), read) in batch.into_iter().zip(reads) {
                let read = read.expect("an entry's put");
                self.index_put(into, n, &read.put, e.put_off, e.lsn)?;
            }
        }
        Ok(())
    }

    /// Index the puts committed since the search state's LSN.
    fn index_puts_after(&self, st: &State, s: &mut SearchState) -> Result<()> {
        let mut sc = st.records_from(st.scan_start(s.lsn).1);
        loop {
            match sc.next_item().map_err(|e| Error::io(&self.display, "read", e))? {
                Item::Record(off, rec) => {
                    if rec.lsn <= s.lsn || rec.op != Op::Put {
                        continue;
                    }
                    let Some(n) = st.index.position(rec.key_str()) else { continue };
                    let body = decode(self, rec.payload, off, rec.lsn)?;
                    set(&mut s.index, n, &body);
                }
                Item::End => break,
                Item::Bad(off, _) => {
                    return Err(self.damaged(off, 0, "the record no longer matches its checksum"))
                }
            }
        }
        s.lsn = st.lsn;
        Ok(())
    }

    fn index_put(&self, into: &mut SearchIndex, n: u32, bytes: &[u8], off: u64, lsn: u64) -> Result<()> {
        // `read_puts` checked the record.
        let rec = view_trusted(bytes);
        let body = decode(self, rec.payload, off, lsn)?;
        set(into, n, &body);
        Ok(())
    }
}

fn decode<'a>(log: &Log, payload: &'a [u8], off: u64, lsn: u64) -> Result<PutBody<'a>> {
    memory::decode_put(payload).ok_or_else(|| log.undecodable(off, lsn))
}

fn set(index: &mut SearchIndex, n: u32, body: &PutBody<'_>) {
    let vector = body.vector_values();
    index.set(n, body.text, vector.as_deref());
}
