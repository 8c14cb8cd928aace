//! Checking seals against a log's bytes (the seal payload itself is `format::seal`).
//!
//! [`check`] streams records from a starting chain value, recomputing every link, and compares
//! each seal it meets with the chain at the LSN the seal names. Both cores work: each chunk of
//! the log is read and parsed once, its records' digests are computed by two threads, and the
//! links (the only part that must run in order) are walked by one while the other digests.

use std::collections::VecDeque;
use std::io;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::format::chain::{self, ChainValue, Scheme};
use crate::format::memory;
use crate::format::seal::{decode, mac, SealEntry, SealKey, SEAL_WINDOW};
use crate::format::{self, hex, parse_record, Op, ParseError, RECORD_HEADER_LEN};
use crate::recovery::lsn_follows;
use crate::recovery::scan::ReadAt;

/// Where a check starts: the chain value over every record before `offset`, whose last LSN is
/// `lsn` (0 at the start of a log).
#[derive(Clone, Copy, Debug)]
pub struct Start {
    /// Byte offset of the first record to check.
    pub offset: u64,
    /// The chain value before it.
    pub value: ChainValue,
    /// LSN of the record before it (0 for none).
    pub lsn: u64,
}

impl Start {
    /// The start of a log: its first record, after the chain value its own header gives.
    pub fn at_header(src: &(dyn ReadAt + '_)) -> io::Result<Start> {
        let mut hb = [0u8; format::HEADER_LEN];
        src.read_at(&mut hb, 0)?;
        Ok(Start { offset: format::HEADER_LEN as u64, value: chain::start(&hb), lsn: 0 })
    }
}

/// What a check went over.
#[derive(Clone, Debug, Default)]
pub struct Checked {
    /// Seals whose chain value (and keyed hash, given the key) matched.
    pub seals_checked: u64,
    /// Keyed seals whose chain value matched but whose keyed hash was not checked (no key).
    pub keyed_unchecked: u64,
    /// Records hashed.
    pub records: u64,
    /// Bytes hashed.
    pub bytes: u64,
    /// The chain value after the last record.
    pub value: ChainValue,
    /// LSN of the last record.
    pub lsn: u64,
    /// The last seal that matched, if any.
    pub last_good: Option<SealEntry>,
    /// The chain is known good through this LSN (the start, or the last seal that matched).
    pub good_through: u64,
    /// Every seal met, in order.
    pub seals: Vec<SealEntry>,
    /// Every `sources` entry of every put: (the id referred to, the referring memory, LSN,
    /// byte offset), when asked for.
    pub references: Vec<Reference>,
}

/// A `sources` entry: (the id referred to, the referring memory, LSN, byte offset).
pub type Reference = (String, String, u64, u64);

/// Why a check failed.
#[derive(Debug)]
pub enum Failure {
    /// Reading failed.
    Io(io::Error),
    /// A record is damaged (bad framing or checksum, or an LSN out of order).
    Corrupt {
        /// Byte offset of the damage.
        offset: u64,
        /// The LSN expected there.
        lsn: u64,
        /// What is wrong.
        reason: String,
    },
    /// The chain and a seal disagree.
    Mismatch {
        /// The seal (as decoded from the log).
        seal: Box<SealEntry>,
        /// What disagrees, and where to look.
        reason: String,
        /// The last LSN the last seal before it that matched covers.
        after_lsn: u64,
    },
    /// The caller's progress callback stopped the check (an interrupt), with its error.
    Stopped(crate::error::Error),
}

impl Failure {
    /// The error this failure is for the log `display`; `damaged` words a damaged record (its
    /// offset, the LSN expected there, what is wrong).
    pub(crate) fn into_error(self, display: &str, damaged: impl FnOnce(u64, u64, String) -> Error) -> Error {
        match self {
            Failure::Io(e) => Error::io(display, "read", e),
            Failure::Stopped(e) => e,
            Failure::Corrupt { offset, lsn, reason } => damaged(offset, lsn, reason),
            Failure::Mismatch { seal, reason, after_lsn } => Error::SealMismatch {
                path: display.to_string(),
                lsn: seal.record_lsn,
                offset: seal.offset,
                after_lsn,
                reason,
            },
        }
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::Io(e)
    }
}

/// How the check reads: the source, its salt and `dense_from`, and where to stop.
pub struct Source<'a> {
    /// The log's bytes.
    pub src: &'a (dyn ReadAt + Sync + 'a),
    /// The log's salt.
    pub salt: u32,
    /// LSNs at or below this may have gaps (compacted); after it they are dense.
    pub dense_from: u64,
    /// Stop at this byte offset (the end of the last committed record).
    pub end: u64,
    /// The format version of the log's header (which chain scheme it follows).
    pub version: u32,
}

/// Options of a check.
#[derive(Default)]
pub struct CheckOptions<'a> {
    /// The seal key, to check keyed seals' hashes.
    pub key: Option<&'a SealKey>,
    /// Collect every `sources` entry of every put (for the reference check).
    pub references: bool,
    /// Called after each chunk with the bytes checked so far.
    pub progress: Option<&'a mut dyn FnMut(u64) -> Result<()>>,
    /// Check only the seal whose record has this LSN (the others are hashed, not checked).
    pub only: Option<u64>,
}

const CHUNK: usize = 4 << 20;

/// A chunk's bytes: read into a buffer, or borrowed from a mapping of the log.
pub(super) enum Buf<'m> {
    Owned(Vec<u8>),
    Mapped(&'m [u8]),
}

impl std::ops::Deref for Buf<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Buf::Owned(v) => v,
            Buf::Mapped(m) => m,
        }
    }
}

impl Buf<'_> {
    /// The buffer, to read the next chunk into (a new one for mapped bytes).
    pub(super) fn recycle(self) -> Vec<u8> {
        match self {
            Buf::Owned(v) => v,
            Buf::Mapped(_) => Vec::new(),
        }
    }
}

/// One chunk of whole records read from the log.
pub(super) struct Chunk<'m> {
    pub(super) buf: Buf<'m>,
    /// Offset of `buf[0]` in the log.
    pub(super) base: u64,
    /// (start, length) of each record in `buf`.
    pub(super) spans: Vec<(u32, u32)>,
    digests: Vec<ChainValue>,
    refs: Vec<Reference>,
    /// Where the bytes after the last whole record stop being a record, and why.
    pub(super) damage: Option<(u64, String)>,
}

/// How far ahead of the record being framed its bytes are asked for.
const PREFETCH_AHEAD: usize = 2048;

/// Read the whole records from `pos` (up to about `size` bytes, more for one large record),
/// checking their framing, and their checksums when `checksums` is set. With `map` (the log's
/// bytes from offset `map.1` to `s.end`, mapped) the chunk borrows them instead of reading.
pub(super) fn read_chunk<'m>(
    s: &Source<'_>,
    pos: u64,
    mut buf: Vec<u8>,
    size: usize,
    checksums: bool,
    map: Option<(&'m [u8], u64)>,
) -> Result<Chunk<'m>, Failure> {
    let mut want = (size as u64).min(s.end - pos) as usize;
    loop {
        let (data, n): (&[u8], usize) = match map {
            Some((m, base)) => {
                let from = (pos - base) as usize;
                (&m[from..from + want], want)
            }
            None => {
                buf.resize(want, 0);
                let n = s.src.read_at(&mut buf, pos)?;
                buf.truncate(n);
                (&buf[..], n)
            }
        };
        // Fewer bytes than asked for: the file ends before the range being checked does.
        let short = n < want;
        let mut spans = Vec::with_capacity(n / 128);
        let mut off = 0usize;
        let mut damage = None;
        // Each record's length says where the next one starts, so the walk waits on every
        // header it loads: the bytes ahead are asked for before they are needed.
        let mut ahead = 0usize;
        while off < data.len() {
            while ahead < (off + PREFETCH_AHEAD).min(data.len()) {
                format::prefetch(data[ahead..].as_ptr());
                ahead += 64;
            }
            let framed = if checksums {
                parse_record(&data[off..], s.salt, format::MAX_PAYLOAD_LEN).map(|r| r.bytes.len())
            } else {
                format::frame(&data[off..], s.salt, format::MAX_PAYLOAD_LEN)
            };
            match framed {
                Ok(len) => {
                    spans.push((off as u32, len as u32));
                    off += len;
                }
                Err(ParseError::Incomplete) if !short && pos + (n as u64) < s.end => break,
                Err(ParseError::Incomplete) => {
                    damage = Some((pos + off as u64, "the file ends inside a record".to_string()));
                    break;
                }
                Err(ParseError::Invalid(r)) => {
                    damage = Some((pos + off as u64, r.to_string()));
                    break;
                }
            }
        }
        if damage.is_none() && short && off == data.len() {
            damage = Some((
                pos + off as u64,
                format!("the file ends at byte {} but its records reach byte {}", pos + off as u64, s.end),
            ));
        }
        if !spans.is_empty() || damage.is_some() {
            let buf = match map {
                Some((m, base)) => {
                    let from = (pos - base) as usize;
                    Buf::Mapped(&m[from..from + off])
                }
                None => {
                    buf.truncate(off);
                    Buf::Owned(buf)
                }
            };
            return Ok(Chunk { buf, base: pos, spans, digests: Vec::new(), refs: Vec::new(), damage });
        }
        // One record larger than the chunk: read it whole.
        let rest = data;
        let len = if rest.len() >= RECORD_HEADER_LEN {
            let key_len = u16::from_le_bytes([rest[24], rest[25]]) as usize;
            let len = u32::from_le_bytes(rest[28..32].try_into().expect("4 bytes")) as usize;
            format::RECORD_OVERHEAD + key_len + len
        } else {
            RECORD_HEADER_LEN
        };
        want = len.max(want + 1).min((s.end - pos) as usize);
    }
}

/// Digest records `spans[from..to]` of a chunk (and collect their references).
fn digest_range(
    buf: &[u8],
    base: u64,
    spans: &[(u32, u32)],
    refs: bool,
) -> (Vec<ChainValue>, Vec<Reference>) {
    let mut out = Vec::with_capacity(spans.len());
    let mut found = Vec::new();
    for &(start, len) in spans {
        let bytes = &buf[start as usize..(start + len) as usize];
        out.push(chain::digest(bytes));
        if refs {
            collect_references(bytes, base + start as u64, &mut found);
        }
    }
    (out, found)
}

/// Add the `sources` entries of the record `bytes` (at `offset`), if it is a put, to `found`.
pub(super) fn collect_references(bytes: &[u8], offset: u64, found: &mut Vec<Reference>) {
    if bytes[2] != Op::Put as u8 {
        return;
    }
    let rec = format::view_trusted(bytes);
    for s in memory::decode_put_sources(rec.payload).unwrap_or_default() {
        found.push((s.to_string(), rec.key_str().to_string(), rec.lsn, offset));
    }
}

/// Recompute the chain from `start` (a commit end) to `s.end`, checking every record's
/// framing, checksum and LSN order, and every seal on the way.
pub fn check(s: &Source<'_>, start: Start, opts: CheckOptions<'_>) -> Result<Checked, Failure> {
    match Scheme::of(s.version) {
        Scheme::PerRecord => check_records(s, start, opts),
        Scheme::PerCommit => super::verify_commits::check(s, start, opts),
    }
}

/// [`check`] of a chain linked per record (format versions 1 and 2).
fn check_records(s: &Source<'_>, start: Start, opts: CheckOptions<'_>) -> Result<Checked, Failure> {
    let CheckOptions { key, references, mut progress, only } = opts;
    let mut done =
        Checked { value: start.value, lsn: start.lsn, good_through: start.lsn, ..Default::default() };
    // The chain at the ends of the last SEAL_WINDOW commits (a seal covers one of them).
    let mut ends: VecDeque<(u64, ChainValue)> = VecDeque::with_capacity(SEAL_WINDOW + 1);
    ends.push_back((start.lsn, start.value));
    let mut pos = start.offset;
    let mut pending: Option<Chunk> = None;
    // Share of each chunk's digests the walking thread takes, tuned as it goes.
    let mut share = 0.3f64;
    let mut spare = Vec::new();
    let mut damaged = false;
    loop {
        let next = if pos < s.end && !damaged {
            let c = read_chunk(s, pos, std::mem::take(&mut spare), CHUNK, true, None)?;
            pos += c.buf.len() as u64;
            damaged = c.damage.is_some();
            Some(c)
        } else {
            None
        };
        if next.is_none() && pending.is_none() {
            break;
        }
        let (walked, digested) = std::thread::scope(|scope| {
            let helper = next.as_ref().map(|c| {
                let split = ((c.spans.len() as f64) * share) as usize;
                let (buf, base, tail) = (&c.buf, c.base, &c.spans[split..]);
                let handle = scope.spawn(move || {
                    let t = Instant::now();
                    let r = digest_range(buf, base, tail, references);
                    (r, t.elapsed())
                });
                (c, split, handle)
            });
            let t = Instant::now();
            let walked = match pending.take() {
                Some(c) => walk(&c, &mut done, &mut ends, s.dense_from, key, only).map(|()| Some(c)),
                None => Ok(None),
            };
            let digested = helper.map(|(c, split, handle)| {
                let (mut d, mut r) = digest_range(&c.buf, c.base, &c.spans[..split], references);
                let mine = t.elapsed();
                let ((d2, r2), theirs) = handle.join().expect("the digest thread does not panic");
                d.extend(d2);
                r.extend(r2);
                // Move work toward the thread that finished first.
                let (m, o) = (mine.as_secs_f64(), theirs.as_secs_f64());
                if m + o > 0.0 {
                    share = (share * (1.0 + 0.5 * (o - m) / (m + o))).clamp(0.02, 0.98);
                }
                (d, r)
            });
            (walked, digested)
        });
        let mut next = next;
        if let (Some(c), Some((d, r))) = (next.as_mut(), digested) {
            c.digests = d;
            c.refs = r;
        }
        if let Some(c) = walked? {
            done.references.extend(c.refs);
            spare = c.buf.recycle();
            if let Some(p) = progress.as_mut() {
                // The caller may stop the check here (an interrupt): its error ends it.
                p(done.bytes).map_err(Failure::Stopped)?;
            }
        }
        pending = next;
    }
    Ok(done)
}

/// Walk the links of one chunk whose digests are known, checking LSNs and seals.
fn walk(
    c: &Chunk,
    done: &mut Checked,
    ends: &mut VecDeque<(u64, ChainValue)>,
    dense_from: u64,
    key: Option<&SealKey>,
    only: Option<u64>,
) -> Result<(), Failure> {
    for (&(start, len), digest) in c.spans.iter().zip(&c.digests) {
        let bytes = &c.buf[start as usize..(start + len) as usize];
        let offset = c.base + start as u64;
        let lsn = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
        if !lsn_follows(done.lsn, lsn, dense_from) {
            return Err(Failure::Corrupt {
                offset,
                lsn: done.lsn + 1,
                reason: format!("LSN {lsn} follows LSN {}: a record is missing or out of place", done.lsn),
            });
        }
        if bytes[2] == Op::Seal as u8 {
            let rec = format::view_trusted(bytes);
            let Some(seal) = decode(&rec, offset) else {
                return Err(Failure::Corrupt { offset, lsn, reason: "malformed seal payload".into() });
            };
            if only.is_none_or(|l| l == seal.record_lsn) {
                check_seal_record(&seal, ends, key, done)?;
            }
        }
        done.value = chain::link(&done.value, digest);
        done.lsn = lsn;
        done.records += 1;
        done.bytes += len as u64;
        if bytes[3] & format::FLAG_COMMIT_END != 0 || lsn <= dense_from {
            if ends.len() == SEAL_WINDOW {
                ends.pop_front();
            }
            ends.push_back((lsn, done.value));
        }
    }
    match &c.damage {
        Some((offset, reason)) => {
            Err(Failure::Corrupt { offset: *offset, lsn: done.lsn + 1, reason: reason.clone() })
        }
        None => Ok(()),
    }
}

pub(super) fn check_seal_record(
    seal: &SealEntry,
    ends: &VecDeque<(u64, ChainValue)>,
    key: Option<&SealKey>,
    done: &mut Checked,
) -> Result<(), Failure> {
    let after_lsn = done.good_through;
    let mismatch = |reason: String| Failure::Mismatch { seal: Box::new(*seal), reason, after_lsn };
    let changed = format!(
        "a record after LSN {after_lsn} and up to this seal was changed, added, removed or reordered; \
         restore the log from a backup or from a copy that verifies"
    );
    let Some(&(_, value)) = ends.iter().find(|(l, _)| *l == seal.lsn) else {
        return Err(mismatch(format!(
            "it claims to cover LSN {}, which does not end any of the {SEAL_WINDOW} commits before it: {changed}",
            seal.lsn
        )));
    };
    if value != seal.chain {
        return Err(mismatch(format!(
            "the chain recomputed through LSN {} is {} but the seal says {}: {changed}",
            seal.lsn,
            hex(&value),
            hex(&seal.chain)
        )));
    }
    if seal.keyed {
        match key {
            Some(k) if mac(k, &value, seal.lsn) != seal.mac => {
                return Err(mismatch(format!(
                    "its keyed hash does not match the chain under this key: the key is not the one \
                     that sealed it, or someone without the key rewrote the records after LSN {after_lsn} \
                     and the chain values with them"
                )))
            }
            Some(_) => {}
            None => {
                done.keyed_unchecked += 1;
                done.last_good = Some(*seal);
                done.good_through = seal.lsn;
                done.seals.push(*seal);
                return Ok(());
            }
        }
    } else if seal.mac != [0; 32] {
        return Err(mismatch(format!("an unkeyed seal carries a keyed hash: {changed}")));
    }
    done.seals_checked += 1;
    done.last_good = Some(*seal);
    done.good_through = seal.lsn;
    done.seals.push(*seal);
    Ok(())
}
