//! The blake3 hash chain over a log's records.
//!
//! From format version 3 the chain links once per commit, over the blake3 hash of the commit's
//! bytes:
//!
//! ```text
//! chain_0 = blake3(the 64-byte file header)          (store id and generation seed it)
//! chain_k = blake3(chain_{k-1} || blake3(unit_k))    (one 64-byte block)
//! ```
//!
//! `unit_k` is the exact bytes of the k-th commit's records (framing and checksums included,
//! so their LSNs, times and salt too), concatenated in log order: a commit's records are
//! contiguous in the log and its last one carries `COMMIT_END`. In a compacted log the records
//! at or below the header's `dense_from` (what log compaction kept of old commits) form one
//! unit together, which ends before the first record above `dense_from`. A seal covers the end
//! of a commit, where the chain has a value.
//!
//! Hashing a whole commit at once lets blake3 hash its 1 KiB chunks side by side with SIMD,
//! where a ~200-byte record is a single chunk hashed one block at a time; and a large commit
//! can be hashed on several cores, as independent subtrees ([`Pieces`]). Only the links are
//! sequential, one compression per commit.
//!
//! Versions 1 and 2 link every record instead (`chain_i = blake3(chain_{i-1} ||
//! blake3(record_i))`); a log keeps the scheme of the version its header names, so a writer
//! appending to an older log goes on linking per record, and log compaction writes version 3.

use blake3::hazmat::{merge_subtrees_non_root, merge_subtrees_root, ChainingValue, HasherExt, Mode};

use crate::format::{self, FileHeader, FLAG_COMMIT_END};

/// A chain value.
pub type ChainValue = [u8; 32];

/// The first format version whose chain links per commit.
pub const PER_COMMIT_VERSION: u32 = 3;

/// How a log's chain links its records, by the version its header names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Versions 1 and 2: one link per record.
    PerRecord,
    /// Version 3 on: one link per commit (and one for the compacted records).
    PerCommit,
}

impl Scheme {
    /// The scheme of a log whose header names `version`.
    pub fn of(version: u32) -> Scheme {
        if version >= PER_COMMIT_VERSION {
            Scheme::PerCommit
        } else {
            Scheme::PerRecord
        }
    }
}

/// The chain value before the first record of a log with this header.
pub fn start(header: &[u8]) -> ChainValue {
    *blake3::hash(header).as_bytes()
}

/// The digest of one unit's bytes (a record's, in a per-record chain).
pub fn digest(bytes: &[u8]) -> ChainValue {
    *blake3::hash(bytes).as_bytes()
}

/// Extend the chain by one unit, given its digest.
pub fn link(prev: &ChainValue, digest: &ChainValue) -> ChainValue {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(prev);
    block[32..].copy_from_slice(digest);
    *blake3::hash(&block).as_bytes()
}

/// Extend the chain by one unit (its bytes).
pub fn step(prev: &ChainValue, bytes: &[u8]) -> ChainValue {
    link(prev, &digest(bytes))
}

/// Where a record stands in its log's units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Boundaries {
    /// A unit ends just before this record (the compacted records end here).
    pub closes_before: bool,
    /// A unit ends with this record.
    pub closes_after: bool,
}

/// Tracks unit boundaries record by record: the one rule every reader of a chain follows.
#[derive(Clone, Copy, Debug)]
pub struct Units {
    scheme: Scheme,
    dense_from: u64,
    /// Compacted records have been seen and their unit is still open.
    compacted_open: bool,
}

impl Units {
    /// The units of a log with this header, from a unit boundary.
    pub fn new(header: &FileHeader) -> Units {
        Units { scheme: Scheme::of(header.version), dense_from: header.dense_from, compacted_open: false }
    }

    /// The scheme these units follow.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The boundaries around the next record, given its LSN and flags.
    pub fn next(&mut self, lsn: u64, flags: u8) -> Boundaries {
        let compacted = lsn <= self.dense_from;
        match self.scheme {
            Scheme::PerRecord => {
                Boundaries { closes_before: false, closes_after: flags & FLAG_COMMIT_END != 0 || compacted }
            }
            Scheme::PerCommit if compacted => {
                self.compacted_open = true;
                Boundaries { closes_before: false, closes_after: false }
            }
            Scheme::PerCommit => Boundaries {
                closes_before: std::mem::replace(&mut self.compacted_open, false),
                closes_after: flags & FLAG_COMMIT_END != 0,
            },
        }
    }

    /// Whether the compacted records' unit is open (it closes at the end of the data).
    pub fn open_at_end(&self) -> bool {
        self.compacted_open
    }
}

/// The chain extended over whole records, in order: what a writer's chain thread, log
/// compaction and a log in RAM use (a verifier runs the same rule in parallel, see
/// `recovery::verify`).
pub struct Linker {
    units: Units,
    /// The chain after the last closed unit.
    value: ChainValue,
    /// The open unit's bytes so far (per-commit chains), from an earlier `feed`.
    unit: blake3::Hasher,
    /// Whether `unit` holds any.
    started: bool,
    /// LSN of the last record fed.
    last_lsn: u64,
}

impl Linker {
    /// A chain over a log with this header, at a unit boundary where its value is `value`
    /// after the record with LSN `lsn`.
    pub fn new(header: &FileHeader, value: ChainValue, lsn: u64) -> Linker {
        Linker {
            units: Units::new(header),
            value,
            unit: blake3::Hasher::new(),
            started: false,
            last_lsn: lsn,
        }
    }

    /// The chain after the last closed unit.
    pub fn value(&self) -> ChainValue {
        self.value
    }

    fn close(&mut self) {
        let d = *self.unit.finalize().as_bytes();
        self.value = link(&self.value, &d);
        self.unit.reset();
        self.started = false;
    }

    /// Close the open unit whose last bytes are `rest`: a unit wholly in `rest` is hashed in
    /// one call (cheaper than the incremental hasher for a small commit).
    fn close_with(&mut self, rest: &[u8]) {
        if self.started {
            self.unit.update(rest);
            self.close();
        } else {
            self.value = step(&self.value, rest);
        }
    }

    /// Extend the chain over `buf`, whole records that start at log offset `base`. At the end
    /// of every commit `on_end(offset after it, its last LSN, the chain there)` is called.
    pub fn feed(&mut self, buf: &[u8], base: u64, mut on_end: impl FnMut(u64, u64, &ChainValue)) {
        let mut off = 0;
        // Where the bytes not yet given to the unit's hasher start.
        let mut pending = 0;
        while off < buf.len() {
            let len = format::record_len(&buf[off..]);
            let lsn = u64::from_le_bytes(buf[off + 8..off + 16].try_into().expect("8 bytes"));
            let b = self.units.next(lsn, buf[off + 3]);
            match self.units.scheme() {
                Scheme::PerRecord => {
                    self.value = step(&self.value, &buf[off..off + len]);
                    off += len;
                    pending = off;
                }
                Scheme::PerCommit => {
                    if b.closes_before {
                        self.close_with(&buf[pending..off]);
                        pending = off;
                        on_end(base + off as u64, self.last_lsn, &self.value);
                    }
                    off += len;
                    if b.closes_after {
                        self.close_with(&buf[pending..off]);
                        pending = off;
                    }
                }
            }
            self.last_lsn = lsn;
            if b.closes_after {
                on_end(base + off as u64, lsn, &self.value);
            }
        }
        if pending < buf.len() {
            self.unit.update(&buf[pending..]);
            self.started = true;
        }
    }

    /// Close the compacted records' unit if it is open: the data ends here (log compaction
    /// before its seal, or a range that ends among the compacted records). Returns the LSN
    /// that ends it when it closed one.
    pub fn finish(&mut self) -> Option<u64> {
        if !self.units.open_at_end() {
            return None;
        }
        self.units.compacted_open = false;
        self.close();
        Some(self.last_lsn)
    }
}

/// The size of the independent subtrees a large unit is hashed in (a power of two of 1 KiB
/// chunks): big enough for blake3's widest SIMD, small enough to share between cores.
pub const PIECE: usize = 64 << 10;

/// A unit's digest from the chaining values of its pieces, in order: piece `i` covers bytes
/// `i * PIECE ..` of the unit, and every piece but the last is whole. A unit of one piece has
/// no chaining value: hash it with [`digest`].
pub struct Pieces;

impl Pieces {
    /// The chaining value of piece `index` of a unit of more than one piece.
    pub fn piece(index: u64, bytes: &[u8]) -> ChainingValue {
        blake3::Hasher::new().set_input_offset(index * PIECE as u64).update(bytes).finalize_non_root()
    }

    /// The unit's digest from its pieces' chaining values (at least two), the last piece
    /// `last_len` bytes long.
    pub fn root(cvs: &[ChainingValue], last_len: usize) -> ChainValue {
        assert!(cvs.len() >= 2, "a unit of one piece is hashed whole");
        let total = (cvs.len() - 1) as u64 * PIECE as u64 + last_len as u64;
        let split = (blake3::hazmat::left_subtree_len(total) / PIECE as u64) as usize;
        let left = subtree(&cvs[..split]);
        let right = subtree(&cvs[split..]);
        *merge_subtrees_root(&left, &right, Mode::Hash).as_bytes()
    }
}

/// The chaining value of consecutive pieces that form a subtree (all whole but maybe the last).
fn subtree(cvs: &[ChainingValue]) -> ChainingValue {
    if cvs.len() == 1 {
        return cvs[0];
    }
    // A subtree of n pieces (n > 1) splits at the largest power of two below n pieces: the
    // left side is whole pieces, so the rule on bytes gives the same split.
    let split = (cvs.len() - 1).next_power_of_two().max(1);
    let split = if split >= cvs.len() { split / 2 } else { split };
    merge_subtrees_non_root(&subtree(&cvs[..split]), &subtree(&cvs[split..]), Mode::Hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 % 251) as u8).collect()
    }

    #[test]
    fn pieces_give_the_digest_of_the_whole() {
        for n in [PIECE + 1, 2 * PIECE, 2 * PIECE + 7, 3 * PIECE, 5 * PIECE - 1, 9 * PIECE + 100, 16 * PIECE]
        {
            let b = bytes(n);
            let cvs: Vec<_> = b.chunks(PIECE).enumerate().map(|(i, p)| Pieces::piece(i as u64, p)).collect();
            let last = n - (cvs.len() - 1) * PIECE;
            assert_eq!(Pieces::root(&cvs, last), digest(&b), "{n} bytes");
        }
    }

    #[test]
    fn subtree_splits_at_the_largest_power_of_two_below() {
        // 3 pieces: ((0,1),2); 5 pieces: ((0..4),4); 4 pieces: ((0,1),(2,3)).
        for n in 2..40 {
            let b = bytes(n * PIECE);
            let cvs: Vec<_> = b.chunks(PIECE).enumerate().map(|(i, p)| Pieces::piece(i as u64, p)).collect();
            assert_eq!(Pieces::root(&cvs, PIECE), digest(&b), "{n} pieces");
        }
    }
}
