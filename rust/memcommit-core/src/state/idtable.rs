//! The table from a memory id's hash to its entry number.
//!
//! Open addressing with linear probing in one flat array of 8-byte slots (entry number + 1 in
//! the high half, the id's 32-bit hash in the low half; 0 is empty), at most half full. A
//! lookup of an id that is not there usually reads one cache line, and because the slot of a
//! hash is plain arithmetic, replay can ask for the next record's slot while it works on the
//! current one (`prefetch`): on a large store the probe is a cache miss, the largest single
//! cost of replay.
//!
//! The same table, keyed by entry number instead of a hash (each key then appears once), maps
//! a memory to the newest of its older records (`state::history`).

use crate::state::slab::Slab;

/// Maps id hashes to entry numbers; the caller confirms a match by comparing ids.
#[derive(Debug, Default)]
pub struct IdTable {
    slots: Slab<u64>,
    len: usize,
    /// log2 of the number of slots.
    bits: u32,
}

const MIN_BITS: u32 = 4;

fn pack(n: u32, hash: u32) -> u64 {
    ((n as u64 + 1) << 32) | hash as u64
}

fn entry_of(slot: u64) -> u32 {
    ((slot >> 32) - 1) as u32
}

impl IdTable {
    /// The slot where a hash's probe starts (Fibonacci hashing: the top bits of a multiply).
    fn home(&self, hash: u32) -> usize {
        ((hash as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits)) as usize
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The addresses of its slots, for a [`Room`](crate::state::room::Room).
    pub(crate) fn memory(&self) -> std::ops::Range<usize> {
        self.slots.addresses()
    }

    /// Entries held (the unit tests check it against a model).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table is empty.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the slots take.
    pub(crate) fn bytes(&self) -> usize {
        self.slots.bytes()
    }

    /// The slots as they are (what an index file stores).
    pub(crate) fn slots(&self) -> &[u64] {
        &self.slots
    }

    /// A table from slots an index file stored, holding `len` values, each below `values`
    /// (for the id table: `entries` entry numbers, `len` = `values` = `entries`); `None` unless
    /// the slot count is a power of two (or zero), at most half full, and every value is below
    /// `values` and appears once. A slot's place in its probe run is not checked: a misplaced
    /// slot can only make a lookup miss, and the file's checksum vouches for the layout.
    pub(crate) fn from_slots(slots: Slab<u64>, values: u32, len: usize) -> Option<IdTable> {
        let n = slots.len();
        if n != 0 && (!n.is_power_of_two() || n < 1 << MIN_BITS) {
            return None;
        }
        let want = len;
        let mut seen = vec![0u64; (values as usize).div_ceil(64)];
        let mut len = 0usize;
        for &s in slots.iter().filter(|&&s| s != 0) {
            if (s >> 32) == 0 || entry_of(s) >= values {
                return None;
            }
            let e = entry_of(s) as usize;
            if seen[e / 64] & (1 << (e % 64)) != 0 {
                return None;
            }
            seen[e / 64] |= 1 << (e % 64);
            len += 1;
        }
        if len != want || len * 2 > n {
            return None;
        }
        let bits = if n == 0 { 0 } else { n.trailing_zeros() };
        Some(IdTable { slots, len, bits })
    }

    /// The slot of the probe run from `hash`'s home that `hit` picks (None at the run's end):
    /// the one walk a lookup and a removal make.
    fn probe(&self, hash: u32, mut hit: impl FnMut(u64) -> bool) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut i = self.home(hash);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if hit(s) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The entry whose hash is `hash` and for which `eq` confirms the id.
    pub fn find(&self, hash: u32, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        let i = self.probe(hash, |s| s as u32 == hash && eq(entry_of(s)))?;
        Some(entry_of(self.slots[i]))
    }

    /// Ask the CPU to start loading the slot a lookup of `hash` reads first, so the cache line
    /// is on its way while the caller works on something else. A hint only: it never waits.
    pub fn prefetch(&self, hash: u32) {
        if self.slots.is_empty() {
            return;
        }
        let slot: *const u64 = &self.slots[self.home(hash)];
        crate::format::prefetch(slot.cast());
    }

    /// Make room for `additional` more entries without growing again.
    pub fn reserve(&mut self, additional: usize) {
        let want = (self.len + additional).saturating_mul(2).max(1 << MIN_BITS);
        if want > self.slots.len() {
            self.resize(want.next_power_of_two().trailing_zeros());
        }
    }

    fn resize(&mut self, bits: u32) {
        let old = std::mem::replace(&mut self.slots, Slab::from(vec![0; 1 << bits]));
        self.bits = bits;
        let mask = self.mask();
        for s in old.iter().copied().filter(|&s| s != 0) {
            let mut i = self.home(s as u32);
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
    }

    /// Put `new` in the place of entry `old` (whose hash is `hash`); `false` if it is not there.
    pub fn replace(&mut self, hash: u32, old: u32, new: u32) -> bool {
        let Some(i) = self.probe(hash, |s| s == pack(old, hash)) else { return false };
        self.slots[i] = pack(new, hash);
        true
    }

    /// Every (hash, entry) the table holds, in slot order.
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.slots.iter().filter(|&&s| s != 0).map(|&s| (s as u32, entry_of(s)))
    }

    /// Add entry `n` with `hash`; the caller knows its id is not in the table yet.
    pub fn insert_new(&mut self, hash: u32, n: u32) {
        if (self.len + 1) * 2 > self.slots.len() {
            self.resize((self.bits + 1).max(MIN_BITS));
        }
        let mask = self.mask();
        let mut i = self.home(hash);
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = pack(n, hash);
        self.len += 1;
    }

    /// Remove entry `n` (whose hash is `hash`), shifting later slots of the same probe run
    /// back so that no lookup stops short at the hole.
    pub fn remove(&mut self, hash: u32, n: u32) -> bool {
        let Some(i) = self.probe(hash, |s| s == pack(n, hash)) else { return false };
        let mask = self.mask();
        // Backward-shift deletion (Knuth 6.4, algorithm R).
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            let home = self.home(s as u32);
            // Move `s` into the hole unless its home lies cyclically in (hole, j].
            let stays = if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
            if !stays {
                self.slots[hole] = s;
                hole = j;
            }
        }
        self.slots[hole] = 0;
        self.len -= 1;
        true
    }

    /// Remove everything (keeping the allocation).
    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = 0);
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn insert_find_remove_against_a_map() {
        let mut t = IdTable::default();
        let mut model: HashMap<u32, u32> = HashMap::new();
        // Few distinct hashes so probe runs collide and wrap.
        let hash_of = |n: u32| n.wrapping_mul(2654435761) % 97;
        for n in 0..2000u32 {
            t.insert_new(hash_of(n), n);
            model.insert(n, hash_of(n));
            if n % 3 == 0 {
                let victim = n / 2;
                if model.remove(&victim).is_some() {
                    assert!(t.remove(hash_of(victim), victim));
                }
            }
        }
        assert_eq!(t.len(), model.len());
        for n in 0..2000u32 {
            let found = t.find(hash_of(n), |i| i == n);
            assert_eq!(found.is_some(), model.contains_key(&n), "entry {n}");
        }
        t.clear();
        assert!(t.is_empty() && t.find(hash_of(1), |_| true).is_none());
    }
}
