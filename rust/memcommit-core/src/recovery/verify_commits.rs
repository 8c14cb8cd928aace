//! Checking a chain linked per commit (format version 3; the rule is in `format::chain`).
//!
//! Each chunk of the log is read and framed once (lengths, magic, salt: no checksums yet).
//! Its commits are cut into work: a commit of at most one [`PIECE`] is hashed whole, a larger
//! one in pieces that are independent blake3 subtrees, so one large commit is shared between
//! cores too. Two threads then hash the work and check the records' checksums, each its share
//! of the chunk (the share adapts to which finishes first; the second one also reads and
//! frames the next chunk). Last, one thread walks the records in order: LSNs, a link per
//! commit, and every seal against the chain at the commit it covers.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::{Duration, Instant};

use blake3::hazmat::ChainingValue;

use super::verify::{
    check_seal_record, collect_references, read_chunk, CheckOptions, Checked, Chunk, Failure, Reference,
    Source, Start,
};
use crate::format::chain::{self, Boundaries, ChainValue, Pieces, Units, PIECE};
use crate::format::seal::{decode, SEAL_WINDOW};
use crate::format::{self, FileHeader, Op};
use crate::recovery::lsn_follows;

/// How much is read at a time.
const CHUNK: usize = 8 << 20;

/// The commit being hashed when a chunk ends inside it.
#[derive(Default)]
struct OpenUnit {
    /// Bytes of the unit so far.
    len: u64,
    /// Pieces of it already given out as work.
    pieces: u64,
    /// Chaining values of those pieces, once hashed.
    cvs: Vec<ChainingValue>,
    /// Its bytes after those pieces (at most one piece), not yet given out.
    carry: Vec<u8>,
}

/// Bytes to hash: a range of the chunk, or bytes put together from two chunks.
enum Bytes {
    Chunk(Range<usize>),
    Owned(Vec<u8>),
}

/// One piece of hashing work.
struct Work {
    bytes: Bytes,
    /// `None`: a whole unit of at most one piece (its digest); `Some(i)`: piece `i` of a larger
    /// unit (its chaining value).
    piece: Option<u64>,
}

impl Work {
    fn len(&self) -> usize {
        match &self.bytes {
            Bytes::Chunk(r) => r.len(),
            Bytes::Owned(v) => v.len(),
        }
    }

    fn run(&self, buf: &[u8]) -> [u8; 32] {
        let bytes = match &self.bytes {
            Bytes::Chunk(r) => &buf[r.clone()],
            Bytes::Owned(v) => v,
        };
        match self.piece {
            None => chain::digest(bytes),
            Some(i) => Pieces::piece(i, bytes),
        }
    }
}

/// A unit that ends in this chunk: the work that holds its digest or its last pieces.
struct Closing {
    work: Range<usize>,
    /// Chaining values of its pieces from earlier chunks.
    prior: Vec<ChainingValue>,
    /// Its length: it is one piece, whole, when this is at most `PIECE` and `prior` is empty.
    len: u64,
}

/// The hashing work of a chunk's units.
#[derive(Default)]
struct Plan {
    work: Vec<Work>,
    closing: Vec<Closing>,
    /// Work whose chaining values belong to the unit still open at the chunk's end.
    continuing: Range<usize>,
}

impl Plan {
    /// Give out the unit bytes `carry ++ buf[from..to]` as pieces; all of them when the unit
    /// ends with them (`last`), else all but the last piece, which stays in the carry.
    fn pieces(
        &mut self,
        open: &mut OpenUnit,
        buf: &[u8],
        from: usize,
        to: usize,
        last: bool,
    ) -> Range<usize> {
        let first = self.work.len();
        let mut p = from;
        let mut carry = std::mem::take(&mut open.carry);
        loop {
            let want = PIECE - carry.len();
            let avail = to - p;
            // Keep the last piece back unless the unit ends here (more bytes may follow).
            if !last && avail <= want {
                carry.extend_from_slice(&buf[p..to]);
                break;
            }
            let take = want.min(avail);
            let bytes = if carry.is_empty() {
                Bytes::Chunk(p..p + take)
            } else {
                let mut v = std::mem::take(&mut carry);
                v.extend_from_slice(&buf[p..p + take]);
                Bytes::Owned(v)
            };
            p += take;
            self.work.push(Work { bytes, piece: Some(open.pieces) });
            open.pieces += 1;
            if last && p == to {
                break;
            }
        }
        open.carry = carry;
        first..self.work.len()
    }

    /// Plan a unit segment `buf[from..to]`, continuing `open`; `closes` when the unit ends there.
    fn segment(&mut self, open: &mut OpenUnit, buf: &[u8], from: usize, to: usize, closes: bool) {
        open.len += (to - from) as u64;
        if !closes {
            self.continuing = self.pieces(open, buf, from, to, false);
            return;
        }
        let len = open.len;
        let work = if open.pieces == 0 && len <= PIECE as u64 {
            let bytes = if open.carry.is_empty() {
                Bytes::Chunk(from..to)
            } else {
                let mut v = std::mem::take(&mut open.carry);
                v.extend_from_slice(&buf[from..to]);
                Bytes::Owned(v)
            };
            self.work.push(Work { bytes, piece: None });
            self.work.len() - 1..self.work.len()
        } else {
            self.pieces(open, buf, from, to, true)
        };
        self.closing.push(Closing { work, prior: std::mem::take(&mut open.cvs), len });
        *open = OpenUnit::default();
    }

    /// The digests of the closing units, given the work's results; the chaining values of the
    /// continuing work go to `open`.
    fn finish(self, results: &[[u8; 32]], open: &mut OpenUnit) -> Vec<ChainValue> {
        open.cvs.extend_from_slice(&results[self.continuing]);
        self.closing
            .into_iter()
            .map(|c| {
                if c.prior.is_empty() && c.len <= PIECE as u64 {
                    results[c.work.start]
                } else {
                    let mut cvs = c.prior;
                    cvs.extend_from_slice(&results[c.work]);
                    let last = (c.len - (cvs.len() as u64 - 1) * PIECE as u64) as usize;
                    Pieces::root(&cvs, last)
                }
            })
            .collect()
    }
}

/// What one thread found in its share of a chunk.
#[derive(Default)]
struct Share {
    results: Vec<[u8; 32]>,
    /// The first record in the share whose checksum does not match.
    bad: Option<u64>,
    refs: Vec<Reference>,
    took: Duration,
}

/// Hash `work` and check the checksums of the records `spans` of the chunk.
fn run_share(c: &Chunk, work: &[Work], spans: &[(u32, u32)], refs: bool) -> Share {
    let t = Instant::now();
    let mut out = Share { results: work.iter().map(|w| w.run(&c.buf)).collect(), ..Default::default() };
    for &(start, len) in spans {
        let bytes = &c.buf[start as usize..(start + len) as usize];
        if !format::checksum_matches(bytes) {
            out.bad = Some(c.base + start as u64);
            break;
        }
        if refs {
            collect_references(bytes, c.base + start as u64, &mut out.refs);
        }
    }
    out.took = t.elapsed();
    out
}

/// The walk's state across chunks.
struct Walk<'k> {
    done: Checked,
    /// The chain at the ends of the last SEAL_WINDOW commits (a seal covers one of them).
    ends: VecDeque<(u64, ChainValue)>,
    key: Option<&'k crate::format::seal::SealKey>,
    only: Option<u64>,
    dense_from: u64,
}

impl Walk<'_> {
    fn close(&mut self, digest: &ChainValue) {
        self.done.value = chain::link(&self.done.value, digest);
        if self.ends.len() == SEAL_WINDOW {
            self.ends.pop_front();
        }
        self.ends.push_back((self.done.lsn, self.done.value));
    }

    /// Walk the records of a chunk before `stop`, linking `digests` at the unit ends.
    fn chunk(
        &mut self,
        c: &Chunk,
        marks: &[Boundaries],
        digests: &[ChainValue],
        stop: u64,
    ) -> Result<(), Failure> {
        let mut digests = digests.iter();
        for (&(start, len), b) in c.spans.iter().zip(marks) {
            let offset = c.base + start as u64;
            if offset >= stop {
                break;
            }
            if b.closes_before {
                self.close(digests.next().expect("a digest for every unit end"));
            }
            let bytes = &c.buf[start as usize..(start + len) as usize];
            let lsn = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
            if !lsn_follows(self.done.lsn, lsn, self.dense_from) {
                return Err(Failure::Corrupt {
                    offset,
                    lsn: self.done.lsn + 1,
                    reason: format!(
                        "LSN {lsn} follows LSN {}: a record is missing or out of place",
                        self.done.lsn
                    ),
                });
            }
            if bytes[2] == Op::Seal as u8 {
                let rec = format::view_trusted(bytes);
                let Some(seal) = decode(&rec, offset) else {
                    return Err(Failure::Corrupt { offset, lsn, reason: "malformed seal payload".into() });
                };
                if self.only.is_none_or(|l| l == seal.record_lsn) {
                    check_seal_record(&seal, &self.ends, self.key, &mut self.done)?;
                }
            }
            self.done.lsn = lsn;
            self.done.records += 1;
            self.done.bytes += len as u64;
            if b.closes_after {
                self.close(digests.next().expect("a digest for every unit end"));
            }
        }
        Ok(())
    }
}

/// The unit boundaries of a chunk's records, and its segments: `(from, to, closes)`.
fn boundaries(c: &Chunk, units: &mut Units) -> (Vec<Boundaries>, Vec<(usize, usize, bool)>) {
    let mut marks = Vec::with_capacity(c.spans.len());
    let mut segs = Vec::new();
    let mut from = 0;
    for &(start, len) in &c.spans {
        let (start, end) = (start as usize, (start + len) as usize);
        let b = &c.buf[start..end];
        let lsn = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        let m = units.next(lsn, b[3]);
        if m.closes_before {
            segs.push((from, start, true));
            from = start;
        }
        if m.closes_after {
            segs.push((from, end, true));
            from = end;
        }
        marks.push(m);
    }
    if from < c.buf.len() {
        segs.push((from, c.buf.len(), false));
    }
    (marks, segs)
}

/// Recompute a per-commit chain from `start` (a commit end) to `s.end`: see `verify::check`.
pub(super) fn check(s: &Source<'_>, start: Start, opts: CheckOptions<'_>) -> Result<Checked, Failure> {
    let CheckOptions { key, references, mut progress, only } = opts;
    let header =
        FileHeader { version: s.version, store_id: [0; 16], generation: 0, dense_from: s.dense_from };
    let mut units = Units::new(&header);
    let mut walk = Walk {
        done: Checked { value: start.value, lsn: start.lsn, good_through: start.lsn, ..Default::default() },
        ends: VecDeque::with_capacity(SEAL_WINDOW + 1),
        key,
        only,
        dense_from: s.dense_from,
    };
    walk.ends.push_back((start.lsn, start.value));
    let mut open = OpenUnit::default();
    // Share of each chunk the walking thread hashes, tuned as it goes.
    let mut share = 0.5f64;
    let mut next = if start.offset < s.end {
        Some(read_chunk(s, start.offset, Vec::new(), CHUNK, false)?)
    } else {
        None
    };
    // The buffer of the chunk before, free for the one after.
    let mut spare = Vec::new();
    while let Some(c) = next.take() {
        let (marks, segs) = boundaries(&c, &mut units);
        let mut plan = Plan::default();
        for &(from, to, closes) in &segs {
            plan.segment(&mut open, &c.buf, from, to, closes);
        }
        let after = c.base + c.buf.len() as u64;
        let more = c.damage.is_none() && after < s.end;
        // Split the work and the checksums between the two threads by bytes.
        let total: usize = plan.work.iter().map(Work::len).sum();
        let mut split_work = 0;
        let mut acc = 0;
        while split_work < plan.work.len() && (acc as f64) < share * total as f64 {
            acc += plan.work[split_work].len();
            split_work += 1;
        }
        let split_spans = ((c.spans.len() as f64) * share) as usize;
        let (mine, theirs, read) = std::thread::scope(|scope| {
            let (work, spans) = (&plan.work[split_work..], &c.spans[split_spans..]);
            let (c, buf) = (&c, std::mem::take(&mut spare));
            let helper = scope.spawn(move || {
                let share = run_share(c, work, spans, references);
                let t = Instant::now();
                let read = more.then(|| read_chunk(s, after, buf, CHUNK, false));
                (share, t.elapsed(), read)
            });
            let mine = run_share(c, &plan.work[..split_work], &c.spans[..split_spans], references);
            let (theirs, reading, read) = helper.join().expect("the hashing thread does not panic");
            (mine, Share { took: theirs.took + reading, ..theirs }, read)
        });
        let (m, o) = (mine.took.as_secs_f64(), theirs.took.as_secs_f64());
        if m + o > 0.0 {
            share = (share * (1.0 + 0.5 * (o - m) / (m + o))).clamp(0.05, 0.95);
        }
        let mut results = mine.results;
        results.extend(theirs.results);
        let digests = plan.finish(&results, &mut open);
        // The first damage: a checksum (mine come first), else the framing.
        let bad = mine.bad.or(theirs.bad).map(|o| (o, "record checksum does not match".to_string()));
        let damage = bad.or(c.damage.clone());
        walk.chunk(&c, &marks, &digests, damage.as_ref().map_or(u64::MAX, |d| d.0))?;
        if let Some((offset, reason)) = damage {
            return Err(Failure::Corrupt { offset, lsn: walk.done.lsn + 1, reason });
        }
        walk.done.references.extend(mine.refs);
        walk.done.references.extend(theirs.refs);
        if let Some(p) = progress.as_mut() {
            // The caller may stop the check here (an interrupt): its error ends it.
            p(walk.done.bytes).map_err(Failure::Stopped)?;
        }
        next = read.transpose()?;
        spare = c.buf;
    }
    if units.open_at_end() {
        // The data ends among the compacted records: their unit ends with it.
        let mut plan = Plan::default();
        plan.segment(&mut open, &[], 0, 0, true);
        let results: Vec<_> = plan.work.iter().map(|w| w.run(&[])).collect();
        let digest = plan.finish(&results, &mut open);
        walk.close(&digest[0]);
    }
    Ok(walk.done)
}
