//! Checking a chain linked per commit (format version 3; the rule is in `format::chain`).
//!
//! Each chunk of the log is read and framed once (lengths, magic, salt). Its commits are cut
//! into work: a commit of at most one [`PIECE`] is hashed whole, a larger one in pieces that
//! are independent blake3 subtrees, so one large commit is shared between cores too. Two
//! threads hash the work, each its share of the chunk (the share adapts to which finishes
//! first; the second one, started once for the whole check, also reads and frames the next
//! chunk, asking for its bytes ahead of the framing). Then one thread walks the
//! records in order: LSNs, a link per commit, and every seal against the chain at the commit
//! it covers.
//!
//! Checksums wait: a seal that matches vouches for every byte before the commit it covers
//! (each one is in the chain), so the records it covers need no checksum of their own. The
//! records no seal has vouched for are checked when they are more than `UNVOUCHED` bytes
//! behind, when something fails (so the first damaged record is the one named, as when every
//! checksum is checked in order), and at the end.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{mpsc, Arc};
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
use crate::vfs::Mapped;

/// How much is read at a time: small enough that what one thread reads, the others hash (and
/// check) while it is still in the cache.
const CHUNK: usize = 2 << 20;
/// How many bytes of records no seal has vouched for yet may wait for one before their
/// checksums are checked.
const UNVOUCHED: usize = 16 * CHUNK;

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

/// What one thread did with its share of a chunk.
#[derive(Default)]
struct Share {
    results: Vec<[u8; 32]>,
    refs: Vec<Reference>,
    /// The first record whose checksum does not match (when asked to check them).
    bad: Option<(u64, u64)>,
    took: Duration,
}

/// Hash `work`, and collect the references of the records `spans` of the chunk and check their
/// checksums at or after byte `check_from` (`None`: check none), the record before them
/// having LSN `lsn_before`.
fn run_share(
    c: &Chunk,
    work: &[Work],
    spans: &[(u32, u32)],
    refs: bool,
    check_from: Option<u64>,
    lsn_before: u64,
) -> Share {
    let t = Instant::now();
    let mut out = Share { results: Vec::with_capacity(work.len()), ..Default::default() };
    // The records are read right after the piece that holds them is hashed, while its bytes
    // are in the cache.
    let mut next = 0;
    let mut lsn = lsn_before;
    let mut records = |upto: usize, out: &mut Share| {
        let first = next;
        while next < spans.len() && (spans[next].0 as usize) < upto {
            next += 1;
        }
        let group = &spans[first..next];
        let bytes = |i: usize| {
            let (start, len) = group[i];
            &c.buf[start as usize..(start + len) as usize]
        };
        let lsn_of = |i: usize| u64::from_le_bytes(bytes(i)[8..16].try_into().expect("8 bytes"));
        if refs {
            for (i, &(start, _)) in group.iter().enumerate() {
                collect_references(bytes(i), c.base + start as u64, &mut out.refs);
            }
        }
        if let (Some(from), None) = (check_from, out.bad) {
            out.bad = first_bad(c, group, &(from..u64::MAX), lsn);
        }
        if !group.is_empty() {
            lsn = lsn_of(group.len() - 1);
        }
    };
    for w in work {
        out.results.push(w.run(&c.buf));
        if let Bytes::Chunk(r) = &w.bytes {
            records(r.end, &mut out);
        }
    }
    records(usize::MAX, &mut out);
    out.took = t.elapsed();
    out
}

/// The LSN of the record before `spans[i]` of chunk `c` (`lsn_before` for the first).
fn lsn_before_span(c: &Chunk, i: usize, lsn_before: u64) -> u64 {
    match i {
        0 => lsn_before,
        _ => {
            let start = c.spans[i - 1].0 as usize;
            u64::from_le_bytes(c.buf[start + 8..start + 16].try_into().expect("8 bytes"))
        }
    }
}

/// A chunk walked whose records no seal has vouched for yet.
struct Unvouched<'m> {
    chunk: Chunk<'m>,
    /// LSN of the record before the chunk.
    lsn_before: u64,
}

/// The first record of `spans` (of chunk `c`, the one before them having LSN `lsn_before`)
/// in the bytes `range` whose checksum does not match: (offset, the LSN expected there).
/// Three records are checked at once (`format::checksums_match3`).
fn first_bad(c: &Chunk, spans: &[(u32, u32)], range: &Range<u64>, lsn_before: u64) -> Option<(u64, u64)> {
    let bytes = |i: usize| {
        let (start, len) = spans[i];
        &c.buf[start as usize..(start + len) as usize]
    };
    let expected = |i: usize| match i {
        0 => lsn_before + 1,
        _ => u64::from_le_bytes(bytes(i - 1)[8..16].try_into().expect("8 bytes")) + 1,
    };
    let from = spans.partition_point(|&(start, _)| c.base + (start as u64) < range.start);
    let to = spans.partition_point(|&(start, _)| c.base + (start as u64) < range.end);
    let mut i = from;
    while i < to {
        let n = if i + 3 <= to { 3 } else { 1 };
        let bad = if n == 3 {
            let ok = format::checksums_match3([bytes(i), bytes(i + 1), bytes(i + 2)]);
            (0..3).find(|&j| !ok[j]).map(|j| i + j)
        } else {
            (!format::checksum_matches(bytes(i))).then_some(i)
        };
        if let Some(b) = bad {
            return Some((c.base + spans[b].0 as u64, expected(b)));
        }
        i += n;
    }
    None
}

/// Check the checksums of an unvouched chunk's records in the bytes `range`, on both cores.
fn check_unvouched(u: &Unvouched<'_>, range: Range<u64>) -> Option<(u64, u64)> {
    let spans = &u.chunk.spans;
    let half = spans.len() / 2;
    let lsn_at_half = lsn_before_span(&u.chunk, half, u.lsn_before);
    let (first, second) = std::thread::scope(|scope| {
        let h = scope.spawn(|| first_bad(&u.chunk, &spans[half..], &range, lsn_at_half));
        (first_bad(&u.chunk, &spans[..half], &range, u.lsn_before), h.join().expect("no panic"))
    });
    first.or(second)
}

/// The walk's state across chunks.
struct Walk<'k> {
    done: Checked,
    /// The chain at the ends of the last SEAL_WINDOW commits (a seal covers one of them).
    ends: VecDeque<(u64, ChainValue)>,
    /// The byte offset after each of those commits.
    end_offsets: VecDeque<u64>,
    /// A seal that matched vouches for every record before this offset.
    vouched: u64,
    key: Option<&'k crate::format::seal::SealKey>,
    only: Option<u64>,
    dense_from: u64,
}

impl Walk<'_> {
    fn close(&mut self, digest: &ChainValue, offset: u64) {
        self.done.value = chain::link(&self.done.value, digest);
        if self.ends.len() == SEAL_WINDOW {
            self.ends.pop_front();
            self.end_offsets.pop_front();
        }
        self.ends.push_back((self.done.lsn, self.done.value));
        self.end_offsets.push_back(offset);
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
                self.close(digests.next().expect("a digest for every unit end"), offset);
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
                    let at =
                        self.ends.iter().position(|(l, _)| *l == seal.lsn).expect("the seal matched one");
                    self.vouched = self.vouched.max(self.end_offsets[at]);
                }
            }
            self.done.lsn = lsn;
            self.done.records += 1;
            self.done.bytes += len as u64;
            if b.closes_after {
                self.close(digests.next().expect("a digest for every unit end"), offset + len as u64);
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

/// A chunk hashed and waiting for its walk, which runs beside the hashing of the next one.
struct Hashed<'m> {
    chunk: Chunk<'m>,
    marks: Vec<Boundaries>,
    digests: Vec<ChainValue>,
    /// The first damage in it: (offset, LSN expected there, or `u64::MAX` for "the one after
    /// the last record walked", reason).
    damage: Option<(u64, u64, String)>,
    refs: Vec<Reference>,
    /// Its checksums were checked as it was hashed.
    checked: bool,
}

/// A chunk read and framed, with its unit boundaries.
type Framed<'m> = (Chunk<'m>, Vec<Boundaries>, Vec<(usize, usize, bool)>);

/// Read and frame the chunk at `pos` and find its unit boundaries (`units` moves past it).
fn read_framed<'m>(
    s: &Source<'_>,
    pos: u64,
    buf: Vec<u8>,
    map: Option<(&'m [u8], u64)>,
    units: &mut Units,
) -> Result<Framed<'m>, Failure> {
    let c = read_chunk(s, pos, buf, CHUNK, false, map)?;
    let (marks, segs) = boundaries(&c, units);
    Ok((c, marks, segs))
}

/// The state of a check between chunks.
struct Checker<'m, 'k> {
    walk: Walk<'k>,
    unvouched: VecDeque<Unvouched<'m>>,
    unvouched_bytes: usize,
    spare: Vec<Vec<u8>>,
    /// The log's mapping, and the log offset of its first byte (`None`: chunks are read).
    mapped: Option<(&'m Mapped, u64)>,
}

impl<'m> Checker<'m, '_> {
    /// A chunk checked and no longer needed: its buffer is kept for the next read, or its
    /// pages of the mapping are let go, so a check of a large log holds in memory what it is
    /// checking, not all it has checked.
    fn done(&mut self, chunk: Chunk<'m>) {
        if let Some((m, base)) = self.mapped {
            let from = (chunk.base - base) as usize;
            m.release(from..from + chunk.buf.len());
        }
        self.spare.push(chunk.buf.recycle());
    }

    /// Walk a hashed chunk; then drop what a seal vouched for and check the checksums of what
    /// waited too long, or of everything before a failure (a damaged record before it is the
    /// first thing wrong).
    fn walk(&mut self, h: Hashed<'m>, lsn_before: u64) -> Result<(), Failure> {
        let stop = h.damage.as_ref().map_or(u64::MAX, |d| d.0);
        let walked = self.walk.chunk(&h.chunk, &h.marks, &h.digests, stop);
        let failure = match walked {
            Err(f) => Some(f),
            Ok(()) => h.damage.map(|(offset, lsn, reason)| Failure::Corrupt {
                offset,
                lsn: if lsn == u64::MAX { self.walk.done.lsn + 1 } else { lsn },
                reason,
            }),
        };
        let until = match &failure {
            Some(Failure::Corrupt { offset, .. }) => *offset,
            Some(Failure::Mismatch { seal, .. }) => seal.offset,
            _ => u64::MAX,
        };
        if h.checked {
            self.done(h.chunk);
        } else {
            self.unvouched_bytes += h.chunk.buf.len();
            self.unvouched.push_back(Unvouched { chunk: h.chunk, lsn_before });
        }
        let vouched = self.walk.vouched;
        while self.unvouched.front().is_some_and(|u| u.chunk.base + u.chunk.buf.len() as u64 <= vouched) {
            let u = self.unvouched.pop_front().expect("a front");
            self.unvouched_bytes -= u.chunk.buf.len();
            self.done(u.chunk);
        }
        while self.unvouched_bytes > UNVOUCHED || (failure.is_some() && !self.unvouched.is_empty()) {
            let u = self.unvouched.pop_front().expect("a front");
            if let Some((offset, lsn)) = check_unvouched(&u, vouched..until) {
                return Err(Failure::Corrupt {
                    offset,
                    lsn,
                    reason: "record checksum does not match".into(),
                });
            }
            self.unvouched_bytes -= u.chunk.buf.len();
            self.done(u.chunk);
        }
        if let Some(f) = failure {
            return Err(f);
        }
        self.walk.done.references.extend(h.refs);
        Ok(())
    }
}

/// The LSN of a chunk's last record (`lsn_before` when it has none).
fn last_lsn(c: &Chunk<'_>, lsn_before: u64) -> u64 {
    lsn_before_span(c, c.spans.len(), lsn_before)
}

/// A chunk's share for the helper thread: its work from `split_work` on and its records
/// from `split_spans` on; then the chunk at `after` to read and frame, if any.
struct Job<'m> {
    chunk: Arc<(Chunk<'m>, Plan)>,
    split_work: usize,
    split_spans: usize,
    check_now: Option<u64>,
    lsn_at_split: u64,
    after: Option<u64>,
    buf: Vec<u8>,
    units: Units,
}

/// What the helper thread did with a job: its share, and the next chunk read.
struct Helped<'m> {
    share: Share,
    read: Option<Result<Framed<'m>, Failure>>,
    units: Units,
}

/// Recompute a per-commit chain from `start` (a commit end) to `s.end`: see `verify::check`.
pub(super) fn check(s: &Source<'_>, start: Start, opts: CheckOptions<'_>) -> Result<Checked, Failure> {
    let CheckOptions { key, references, mut progress, only } = opts;
    let header =
        FileHeader { version: s.version, store_id: [0; 16], generation: 0, dense_from: s.dense_from };
    let mut units = Units::new(&header);
    // A log in a file is read through a mapping (no copy), the simulation's by reading.
    let mapped = if start.offset < s.end { s.src.map(start.offset, s.end).transpose()? } else { None };
    let mut ck = Checker {
        walk: Walk {
            done: Checked {
                value: start.value,
                lsn: start.lsn,
                good_through: start.lsn,
                ..Default::default()
            },
            ends: VecDeque::with_capacity(SEAL_WINDOW + 1),
            end_offsets: VecDeque::with_capacity(SEAL_WINDOW + 1),
            vouched: start.offset,
            key,
            only,
            dense_from: s.dense_from,
        },
        unvouched: VecDeque::new(),
        unvouched_bytes: 0,
        spare: Vec::new(),
        mapped: mapped.as_ref().map(|m| (m, start.offset)),
    };
    ck.walk.ends.push_back((start.lsn, start.value));
    ck.walk.end_offsets.push_back(start.offset);
    let mut open = OpenUnit::default();
    // Share of each chunk the walking thread hashes, tuned as it goes.
    let mut share = 0.5f64;
    let map = mapped.as_deref().map(|m| (m, start.offset));
    let mut next = if start.offset < s.end {
        Some(read_framed(s, start.offset, Vec::new(), map, &mut units)?)
    } else {
        None
    };
    // The chunk hashed before, walked while this one is hashed, and the LSN before it.
    let mut prev: Option<(Hashed<'_>, u64)> = None;
    // The LSN of the record before the chunk being hashed.
    let mut lsn_before = start.lsn;
    std::thread::scope(|scope| -> Result<(), Failure> {
        // One helper for the whole check (not one a chunk): it hashes its share of each chunk
        // and then reads and frames the next one.
        let (jobs, job_rx) = mpsc::sync_channel::<Job<'_>>(0);
        let (done_tx, dones) = mpsc::sync_channel::<Helped<'_>>(0);
        scope.spawn(move || {
            for mut job in job_rx {
                let (c, plan) = &*job.chunk;
                let work = &plan.work[job.split_work..];
                let spans = &c.spans[job.split_spans..];
                let share = run_share(c, work, spans, references, job.check_now, job.lsn_at_split);
                let t = Instant::now();
                let read = job.after.map(|after| read_framed(s, after, job.buf, map, &mut job.units));
                let took = share.took + t.elapsed();
                drop(job.chunk);
                if done_tx.send(Helped { share: Share { took, ..share }, read, units: job.units }).is_err() {
                    break; // the check stopped: nothing waits for this
                }
            }
        });
        while let Some((c, marks, segs)) = next.take() {
            let mut plan = Plan::default();
            for &(from, to, closes) in &segs {
                plan.segment(&mut open, &c.buf, from, to, closes);
            }
            let after = c.base + c.buf.len() as u64;
            let more = c.damage.is_none() && after < s.end;
            // Split the work between the two threads by bytes; the records go with the work
            // that hashes them.
            let total: usize = plan.work.iter().map(Work::len).sum();
            let mut split_work = 0;
            let mut acc = 0;
            while split_work < plan.work.len() && (acc as f64) < share * total as f64 {
                acc += plan.work[split_work].len();
                split_work += 1;
            }
            let split_at = plan.work[split_work..]
                .iter()
                .find_map(|w| match &w.bytes {
                    Bytes::Chunk(r) => Some(r.start),
                    Bytes::Owned(_) => None,
                })
                .unwrap_or(c.buf.len());
            let split_spans = c.spans.partition_point(|&(start, _)| (start as usize) < split_at);
            // After `UNVOUCHED` bytes with no seal to vouch for them the log is likely not
            // sealed (or not here): check the checksums as the chunk is hashed, while it is in
            // the cache.
            let check_now =
                (c.base.saturating_sub(ck.walk.vouched) >= UNVOUCHED as u64).then_some(ck.walk.vouched);
            let lsn_at_split = lsn_before_span(&c, split_spans, lsn_before);
            let chunk = Arc::new((c, plan));
            let job = Job {
                chunk: Arc::clone(&chunk),
                split_work,
                split_spans,
                check_now,
                lsn_at_split,
                after: more.then_some(after),
                buf: ck.spare.pop().unwrap_or_default(),
                units,
            };
            jobs.send(job).expect("the hashing thread does not panic");
            let t = Instant::now();
            let walked = prev.take().map(|(h, lsn)| ck.walk(h, lsn));
            let (c, plan) = &*chunk;
            let (work, spans) = (&plan.work[..split_work], &c.spans[..split_spans]);
            let mut mine = run_share(c, work, spans, references, check_now, lsn_before);
            mine.took = t.elapsed();
            let Helped { share: theirs, read, units: units_after } =
                dones.recv().expect("the hashing thread does not panic");
            let Ok((c, plan)) = Arc::try_unwrap(chunk) else {
                unreachable!("the hashing thread let go of the chunk before it answered")
            };
            units = units_after;
            walked.transpose()?;
            if let Some(p) = progress.as_mut() {
                // The caller may stop the check here (an interrupt): its error ends it.
                p(ck.walk.done.bytes).map_err(Failure::Stopped)?;
            }
            let (m, o) = (mine.took.as_secs_f64(), theirs.took.as_secs_f64());
            if m + o > 0.0 {
                share = (share * (1.0 + 0.5 * (o - m) / (m + o))).clamp(0.05, 0.95);
            }
            let mut results = mine.results;
            results.extend(theirs.results);
            let digests = plan.finish(&results, &mut open);
            // The first damage: a checksum (mine come first), else the framing.
            let bad = mine
                .bad
                .or(theirs.bad)
                .map(|(offset, lsn)| (offset, lsn, "record checksum does not match".to_string()));
            let framing = c.damage.clone().map(|(offset, reason)| (offset, u64::MAX, reason));
            let mut refs = mine.refs;
            refs.extend(theirs.refs);
            let next_lsn = last_lsn(&c, lsn_before);
            let hashed = Hashed {
                chunk: c,
                marks,
                digests,
                damage: bad.or(framing),
                refs,
                checked: check_now.is_some(),
            };
            prev = Some((hashed, lsn_before));
            lsn_before = next_lsn;
            next = read.transpose()?;
        }
        Ok(())
    })?;
    if let Some((h, lsn)) = prev.take() {
        ck.walk(h, lsn)?;
        if let Some(p) = progress.as_mut() {
            p(ck.walk.done.bytes).map_err(Failure::Stopped)?;
        }
    }
    for u in &ck.unvouched {
        if let Some((offset, lsn)) = check_unvouched(u, ck.walk.vouched..u64::MAX) {
            return Err(Failure::Corrupt { offset, lsn, reason: "record checksum does not match".into() });
        }
    }
    let mut walk = ck.walk;
    if units.open_at_end() {
        // The data ends among the compacted records: their unit ends with it.
        let mut plan = Plan::default();
        plan.segment(&mut open, &[], 0, 0, true);
        let results: Vec<_> = plan.work.iter().map(|w| w.run(&[])).collect();
        let digest = plan.finish(&results, &mut open);
        walk.close(&digest[0], s.end);
    }
    Ok(walk.done)
}
