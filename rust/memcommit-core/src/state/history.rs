//! Where each memory's older records are: the put, status and move records of a memory that
//! its index entry no longer points to, so that a memory's history reads that memory's records
//! and no others, whatever the size of the log.
//!
//! An entry points to a memory's last put, its last status record and its last move. When a
//! record of one of those ops comes after the one the entry points to, the one it replaces
//! becomes a [`Link`]: its offset, its length when the index knows it, and the memory's link
//! before it. A memory's records are its entry's pointers and its chain of links.
//!
//! Memory: a memory whose every record its entry points to (most memories of a bulk load: a
//! single put) costs nothing here. Each older record costs a 16-byte link, and a memory with
//! any holds one slot of `heads` (entry number to its newest link: the id table's kind of
//! table, keyed by entry number). Links are appended in the order records are applied, so
//! taking a commit back is cutting the links after a mark and stepping back the heads it moved;
//! both are arrays of plain values, which an index file stores and maps as they are.
//!
//! Links are numbered with 32 bits. An index that would need more stops keeping history
//! ([`History::is_tracked`] turns false, for good, and says so in what it saves): a history is
//! then found by reading the whole log, as it was before there were links. Never a wrong one.

use crate::state::idtable::IdTable;
use crate::state::slab::Slab;

/// One older record of a memory. Its layout (`repr(C)`, no padding) is the index file's link
/// row on a little-endian machine, so a mapped index file is used as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Link {
    /// Byte offset of the record.
    pub off: u64,
    /// Its length, or 0 when the index does not know it (a status record: its length depends
    /// on its reason, and the entry that pointed to it does not keep it).
    pub len: u32,
    /// The memory's link before this one, as its number + 1; 0: none.
    pub prev: u32,
}

const _: () = {
    assert!(std::mem::size_of::<Link>() == 16);
    assert!(std::mem::offset_of!(Link, len) == 8);
    assert!(std::mem::offset_of!(Link, prev) == 12);
};

/// The most links an index keeps: a link's number + 1 must fit in 32 bits, and so must the id
/// table's packing of it.
const MAX_LINKS: u32 = u32::MAX - 1;

/// Every memory's older records (see the module documentation).
#[derive(Debug)]
pub struct History {
    pub(crate) links: Slab<Link>,
    /// Entry number (in the table's hash half) to the number of its newest link.
    pub(crate) heads: IdTable,
    tracked: bool,
    /// `MAX_LINKS`, lower in tests.
    limit: u32,
}

impl Default for History {
    fn default() -> Self {
        History { links: Slab::default(), heads: IdTable::default(), tracked: true, limit: MAX_LINKS }
    }
}

impl History {
    /// A history that keeps nothing (an index built for one look and thrown away, or one that
    /// outgrew 32-bit link numbers).
    pub(crate) fn untracked() -> History {
        History { tracked: false, ..History::default() }
    }

    /// Links and heads an index file stored (checked by its loader: every link's `prev` below
    /// its own number + 1, every head a link of an entry that exists).
    pub(crate) fn from_saved(links: Slab<Link>, heads: IdTable) -> History {
        History { links, heads, ..History::default() }
    }

    /// Whether every older record is linked; if not, a history must be read from the log.
    pub fn is_tracked(&self) -> bool {
        self.tracked
    }

    /// Lower the number of links this history may hold (to reach the limit in a test).
    #[cfg(test)]
    pub(crate) fn set_limit(&mut self, limit: u32) {
        self.limit = limit;
    }

    /// The number of entry `n`'s newest link.
    fn head(&self, n: u32) -> Option<u32> {
        // The key is the entry number itself, so a match of the hash half is the match.
        self.heads.find(n, |_| true)
    }

    /// Start loading the heads' slot of entry `n` into the cache: a record of it is about to
    /// replace one (a hint only).
    pub(crate) fn prefetch(&self, n: u32) {
        if self.tracked {
            self.heads.prefetch(n);
        }
    }

    /// Entry `n`'s record at `off` (of `len` bytes, 0 when not known) is no longer the one its
    /// entry points to: link it.
    pub(crate) fn supersede(&mut self, n: u32, off: u64, len: u32) {
        if !self.tracked {
            return;
        }
        if self.links.len() >= self.limit as usize {
            // Stop for good: dropping what is kept is what makes a wrong history impossible.
            *self = History::untracked();
            return;
        }
        let head = self.head(n);
        let new = self.links.len() as u32;
        self.links.push(Link { off, len, prev: head.map_or(0, |h| h + 1) });
        match head {
            Some(h) => {
                self.heads.replace(n, h, new);
            }
            None => self.heads.insert_new(n, new),
        }
    }

    /// Entry `n`'s older records, newest link first: (offset, length or 0).
    pub(crate) fn older(&self, n: u32) -> impl Iterator<Item = (u64, u32)> + '_ {
        let mut next = self.head(n);
        // Each link's `prev` is below its own number (the loaders check it), so this ends; the
        // bound is one more guard.
        (0..self.links.len()).map_while(move |_| {
            let l = self.links[next? as usize];
            next = l.prev.checked_sub(1);
            Some((l.off, l.len))
        })
    }

    /// Where the history stands now, to take back what is linked after it.
    pub(crate) fn mark(&self) -> usize {
        self.links.len()
    }

    /// Take back entry `n`'s links numbered `mark` or above (a commit taken back).
    pub(crate) fn unwind(&mut self, n: u32, mark: usize) {
        let Some(top) = self.head(n) else { return };
        let mut h = Some(top);
        while let Some(at) = h.filter(|&at| at as usize >= mark) {
            h = self.links[at as usize].prev.checked_sub(1);
        }
        match h {
            Some(back) if back != top => {
                self.heads.replace(n, top, back);
            }
            Some(_) => {}
            None => {
                self.heads.remove(n, top);
            }
        }
    }

    /// Drop the links numbered `mark` or above (after `unwind` of every entry that has any).
    pub(crate) fn truncate(&mut self, mark: usize) {
        self.links.truncate(mark);
    }

    /// The entries were put in a new order: entry `old` is now `new_of[old]`.
    pub(crate) fn renumber(&mut self, new_of: &[u32]) {
        let pairs: Vec<(u32, u32)> = self.heads.pairs().collect();
        if pairs.is_empty() {
            return;
        }
        let mut heads = IdTable::default();
        heads.reserve(pairs.len());
        for (old, link) in pairs {
            heads.insert_new(new_of[old as usize], link);
        }
        self.heads = heads;
    }

    /// Give back unused heap capacity.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.links.shrink_to_fit();
    }

    /// Bytes it holds in RAM.
    pub(crate) fn bytes(&self) -> usize {
        self.links.bytes() + self.heads.bytes()
    }

    /// Every older record as (entry number, offset, length or 0), by entry number and, for
    /// each entry, oldest link first (what a snapshot stores); `None` when not tracked.
    pub(crate) fn parts(&self) -> Option<Vec<(u32, u64, u32)>> {
        if !self.tracked {
            return None;
        }
        let mut heads: Vec<u32> = self.heads.pairs().map(|(n, _)| n).collect();
        heads.sort_unstable();
        let mut out = Vec::with_capacity(self.links.len());
        for n in heads {
            let from = out.len();
            out.extend(self.older(n).map(|(off, len)| (n, off, len)));
            out[from..].reverse();
        }
        Some(out)
    }

    /// The history `parts` describes, for `entries` entries; `None` for none tracked. Refuses
    /// an entry number that points nowhere.
    pub(crate) fn from_parts(entries: usize, parts: Option<Vec<(u32, u64, u32)>>) -> Result<History, String> {
        let Some(parts) = parts else { return Ok(History::untracked()) };
        let mut h = History::default();
        if parts.len() > MAX_LINKS as usize {
            return Err("more older records than an index keeps".into());
        }
        h.links.reserve(parts.len());
        for (n, off, len) in parts {
            if n as usize >= entries {
                return Err(format!("an older record's memory number {n} points nowhere"));
            }
            h.supersede(n, off, len);
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(h: &History, n: u32) -> Vec<u64> {
        h.older(n).map(|(off, _)| off).collect()
    }

    #[test]
    fn links_chain_per_entry_and_unwind_to_a_mark() {
        let mut h = History::default();
        h.supersede(0, 100, 10);
        h.supersede(1, 200, 0);
        h.supersede(0, 300, 30);
        let mark = h.mark();
        h.supersede(0, 400, 40);
        h.supersede(2, 500, 50);
        assert_eq!(chain(&h, 0), [400, 300, 100]);
        assert_eq!(chain(&h, 1), [200]);
        assert_eq!(chain(&h, 2), [500]);
        assert!(chain(&h, 3).is_empty());
        for n in 0..3 {
            h.unwind(n, mark);
        }
        h.truncate(mark);
        assert_eq!(chain(&h, 0), [300, 100]);
        assert_eq!(chain(&h, 1), [200]);
        assert!(chain(&h, 2).is_empty());
        assert_eq!(h.heads.pairs().count(), 2);
        // What a snapshot stores rebuilds the same chains.
        let parts = h.parts().unwrap();
        assert_eq!(parts, [(0, 100, 10), (0, 300, 30), (1, 200, 0)]);
        let back = History::from_parts(2, Some(parts)).unwrap();
        assert_eq!(chain(&back, 0), [300, 100]);
        assert_eq!(chain(&back, 1), [200]);
        assert!(History::from_parts(1, back.parts()).is_err(), "entry 1 of 1");
        // Renumbered: entry 0 became 1 and 1 became 0.
        h.renumber(&[1, 0]);
        assert_eq!(chain(&h, 1), [300, 100]);
        assert_eq!(chain(&h, 0), [200]);
    }

    #[test]
    fn past_its_limit_it_keeps_nothing_and_says_so() {
        let mut h = History::default();
        h.set_limit(2);
        h.supersede(0, 100, 10);
        h.supersede(0, 200, 10);
        assert!(h.is_tracked());
        h.supersede(1, 300, 10);
        assert!(!h.is_tracked());
        assert!(chain(&h, 0).is_empty() && h.parts().is_none());
        h.supersede(1, 400, 10);
        assert_eq!(h.mark(), 0);
        assert!(!History::from_parts(3, None).unwrap().is_tracked());
    }
}
