//! Snapshots: the state as JSON, to open a log without replaying what it covers.
//!
//! A snapshot holds the log's identity (store id, generation, `dense_from`), where it ends
//! (LSN, byte offset, record count, the chain value there and the digest of its last record),
//! and the index: every memory's fields (id, kind, task, tags, tier, status, LSNs and times)
//! with where its last put, status and move records are and where its older ones are (what a
//! memory's history reads), finished tasks, role entities, seals.
//! Texts and data stay in the log, read when asked for, as after a replay. Memories are stored
//! column by column (one JSON array per field), which keeps a snapshot of a million memories
//! compact and quick to parse.
//!
//! The text ends with its checksum, `,"checksum":"<64 hex digits>"}`: the blake3 hash of every
//! byte before that member. A snapshot of version 1 (before the checksum) is refused: nothing
//! says it is unchanged, and a snapshot is only a cache of what the log holds. So is one of
//! version 2 (before the older records): a history read from it would have to read the whole
//! log.
//!
//! Opening with a snapshot checks it against the log: the checksum, the same store and
//! generation, a file long enough, and at the snapshot's end the same last record (LSN, bytes'
//! digest, commit end). Then every record it points to is read (in offset order, 256 KiB at a
//! time, on two threads for a large snapshot) and must be what the snapshot says: each memory's put, status and move records are
//! records of that id whose fields (kind, task, tags, creation, tier, status, LSN and time of
//! the newest) give the memory's entry; each entity's record is that entity's, of that length;
//! each seal is that seal; each sparse-index entry names a record of that LSN. Anything else is
//! `SnapshotMismatch`, naming the snapshot and what differs. So is a chain value other than the
//! log's: the chain is recomputed from the newest seal the snapshot holds (from the log's first
//! record when it holds none) to the snapshot's end. Then only the records after it are
//! replayed, and the chain thread continues from the snapshot's chain value. What pointers cannot show, a snapshot whose checksum was recomputed by hand
//! could still hide (a memory or entity left out, a finished task added, a pointer to an older
//! record of the same id that agrees with the lie, or into a memory's text where bytes were
//! crafted to parse as a record): only a full replay rules those out.
//!
//! The older records are not read at open: they are most of the log's records, and reading
//! them all is what a replay costs. Their offsets must lie inside what the snapshot covers,
//! and a history read checks each record it reads (its checksum, and that it is a put, status
//! or move of that memory, once), so a wrong offset is an error there, never a wrong record; a
//! record left out of a memory's list is another thing only a replay would show.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::chain::{self, ChainValue};
use crate::format::memory::{self, Status, Tier};
use crate::format::seal::{self, SealEntry};
use crate::format::{self, FileHeader, Op, RecordView, RECORD_OVERHEAD};
use crate::persist::SavedAt;
use crate::recovery::scan::{self, ReadAt};
use crate::recovery::verify;
use crate::state::index::{Entry, Index, Parts, NO_OFFSET};

const FORMAT: &str = "memcommit-snapshot";
/// 2: the text ends with its checksum. 3: it says where each memory's older records are.
const VERSION: u32 = 3;
/// What comes between the body and the checksum's hex digits.
const CHECKSUM_KEY: &[u8] = b",\"checksum\":\"";
/// The checksum member and the closing brace, at the end of the text.
const CHECKSUM_SUFFIX_LEN: usize = CHECKSUM_KEY.len() + 64 + 2;

/// A snapshot as its JSON says it.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Snapshot {
    format: String,
    version: u32,
    /// The store id, hex.
    pub store_id: String,
    /// The log generation.
    pub generation: u64,
    dense_from: u64,
    /// The last LSN it covers.
    pub lsn: u64,
    /// The byte offset after its last record.
    pub end: u64,
    /// Records it covers.
    pub records: u64,
    /// The chain value at `end`, hex.
    pub chain: String,
    last_record: Option<(u64, String)>,
    kinds: Vec<String>,
    tasks: Vec<String>,
    tags: Vec<String>,
    tagsets: Vec<Vec<u32>>,
    finished: Vec<u32>,
    memories: Memories,
    /// `None`: the index kept no history (`History::is_tracked`); also what a snapshot older
    /// than version 3 parses to (it is refused for its version).
    history: Option<OlderRecords>,
    entities: Vec<(String, u64, u32)>,
    seals: Vec<SealJson>,
    sparse: Vec<(u64, u64)>,
    /// The name of the snapshot's file, for messages.
    #[serde(skip)]
    file: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default)]
struct Memories {
    id: Vec<String>,
    kind: Vec<u32>,
    task: Vec<u32>,
    tags: Vec<u32>,
    tier: Vec<u8>,
    status: Vec<u8>,
    lsn: Vec<u64>,
    created_lsn: Vec<u64>,
    created_at: Vec<i64>,
    updated_at: Vec<i64>,
    moved_at: Vec<i64>,
    put_off: Vec<u64>,
    put_len: Vec<u32>,
    /// -1 for none.
    status_off: Vec<i64>,
    /// -1 for none.
    move_off: Vec<i64>,
}

/// Each memory's older records (the put, status and move records its entry no longer points
/// to), one array per field: by memory, oldest first.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
struct OlderRecords {
    /// The memory's number (its index in `memories`).
    memory: Vec<u32>,
    off: Vec<u64>,
    /// The record's length, 0 when the index does not know it.
    len: Vec<u32>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
struct SealJson {
    lsn: u64,
    record_lsn: u64,
    offset: u64,
    at: i64,
    keyed: bool,
    chain: String,
    mac: String,
}

fn unhex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn off_in(o: u64) -> i64 {
    if o == NO_OFFSET {
        -1
    } else {
        o as i64
    }
}

fn off_out(o: i64) -> u64 {
    if o < 0 {
        NO_OFFSET
    } else {
        o as u64
    }
}

/// The state saved at `at` (its index's `parts` and sparse index) as a snapshot's JSON text.
pub(crate) fn encode(at: &SavedAt, p: Parts, sparse: Vec<(u64, u64)>) -> Result<String> {
    let SavedAt { header, lsn, chain, end, records, last } = *at;
    let last_record = last.map(|(off, d)| (off, format::hex(&d)));
    let mut m = Memories::default();
    for (id, e) in p.memories {
        m.id.push(id);
        m.kind.push(e.kind);
        m.task.push(e.task);
        m.tags.push(e.tags);
        m.tier.push(e.tier as u8);
        m.status.push(e.status as u8);
        m.lsn.push(e.lsn);
        m.created_lsn.push(e.created_lsn);
        m.created_at.push(e.created_at);
        m.updated_at.push(e.updated_at);
        m.moved_at.push(e.moved_at);
        m.put_off.push(e.put_off);
        m.put_len.push(e.put_len);
        m.status_off.push(off_in(e.status_off));
        m.move_off.push(off_in(e.move_off));
    }
    let snap = Snapshot {
        format: FORMAT.into(),
        version: VERSION,
        store_id: format::hex(&header.store_id),
        generation: header.generation,
        dense_from: header.dense_from,
        lsn,
        end,
        records,
        chain: format::hex(&chain),
        last_record,
        kinds: p.kinds,
        tasks: p.tasks,
        tags: p.tags,
        tagsets: p.tagsets,
        finished: p.finished,
        memories: m,
        history: p.history.map(|h| {
            let mut o = OlderRecords::default();
            for (n, off, len) in h {
                o.memory.push(n);
                o.off.push(off);
                o.len.push(len);
            }
            o
        }),
        entities: p
            .entities
            .into_iter()
            .map(|(k, o, l)| (String::from_utf8_lossy(&k).into_owned(), o, l))
            .collect(),
        seals: p
            .seals
            .iter()
            .map(|s| SealJson {
                lsn: s.lsn,
                record_lsn: s.record_lsn,
                offset: s.offset,
                at: s.at,
                keyed: s.keyed,
                chain: format::hex(&s.chain),
                mac: format::hex(&s.mac),
            })
            .collect(),
        sparse,
        file: String::new(),
    };
    let body = serde_json::to_string(&snap).map_err(|e| Error::invalid("snapshot", e.to_string()))?;
    Ok(seal_text(body))
}

/// A snapshot's JSON body (an object) with its checksum appended as the last member.
fn seal_text(mut body: String) -> String {
    debug_assert!(body.ends_with('}'));
    body.pop();
    let sum = format::hex(blake3::hash(body.as_bytes()).as_bytes());
    body.push_str(std::str::from_utf8(CHECKSUM_KEY).expect("ASCII"));
    body.push_str(&sum);
    body.push_str("\"}");
    body
}

/// Whether the text ends with a checksum member that matches the bytes before it.
fn checksum_matches(text: &[u8]) -> bool {
    let Some(split) = text.len().checked_sub(CHECKSUM_SUFFIX_LEN) else { return false };
    let (body, suffix) = text.split_at(split);
    let Some(hex) = suffix.strip_prefix(CHECKSUM_KEY).and_then(|s| s.strip_suffix(b"\"}")) else {
        return false;
    };
    format::hex(blake3::hash(body).as_bytes()).as_bytes() == hex
}

/// Why a text whose checksum does not check out is refused.
fn why_unchecked(text: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Head {
        format: Option<serde_json::Value>,
        version: Option<serde_json::Value>,
    }
    let head: Head = match serde_json::from_slice(text) {
        Ok(h) => h,
        Err(e) => return format!("not a snapshot: {e}"),
    };
    if head.format.as_ref().and_then(|f| f.as_str()) != Some(FORMAT) {
        return "not a snapshot: it does not say it is a memcommit snapshot".into();
    }
    match head.version.as_ref().and_then(|v| v.as_u64()) {
        Some(1) => "it is of snapshot version 1, which carries no checksum, so nothing shows it is \
                    unchanged; take a new snapshot (it is only a cache: the log holds the truth)"
            .into(),
        Some(v) if v < VERSION as u64 => older_version(v),
        Some(v) if v == VERSION as u64 => {
            "its checksum does not match its contents: it was changed after it was written".into()
        }
        Some(v) => format!("it is of snapshot version {v}, and this memcommit reads version {VERSION}"),
        None => "not a snapshot: it has no version".into(),
    }
}

/// Why a snapshot of an older version than this build writes (2 and up) is refused.
fn older_version(v: u64) -> String {
    format!(
        "it is of snapshot version {v}, which does not say where each memory's older records are \
         (what a memory's history reads); take a new snapshot (it is only a cache: the log holds \
         the truth)"
    )
}

/// What a checked snapshot restores.
pub(crate) struct Restored {
    pub index: Index,
    pub end: u64,
    pub lsn: u64,
    pub records: u64,
    pub sparse: Vec<(u64, u64)>,
    pub chain: ChainValue,
}

/// Parse a snapshot's JSON and check its checksum; `name` (the snapshot's file) is what its
/// errors, now and when it is checked against the log, name.
pub fn parse(text: &[u8], name: &str) -> Result<Snapshot> {
    let mismatch = |reason: String| Error::SnapshotMismatch { path: name.into(), reason };
    if !checksum_matches(text) {
        return Err(mismatch(why_unchecked(text)));
    }
    let mut snap: Snapshot =
        serde_json::from_slice(text).map_err(|e| mismatch(format!("not a snapshot: {e}")))?;
    if snap.format == FORMAT && snap.version > 1 && snap.version < VERSION {
        return Err(mismatch(older_version(snap.version.into())));
    }
    if snap.format != FORMAT || snap.version != VERSION {
        return Err(mismatch(format!(
            "not a memcommit snapshot of version {VERSION} ({} {})",
            snap.format, snap.version
        )));
    }
    snap.file = name.into();
    Ok(snap)
}

/// Where a saved state (a snapshot or an index file) ends: the byte offset, the last LSN and
/// record count there, and the last record's offset and digest (`None` for an empty log).
pub(crate) struct SavedEnd<'a> {
    pub end: u64,
    pub lsn: u64,
    pub records: u64,
    pub last: Option<(u64, &'a [u8; 32])>,
}

/// Check that a saved state still fits the log file: the file reaches its end, and the record
/// that ends there is still there, with its LSN and digest, closing a commit. `Err` says what
/// differs.
pub(crate) fn check_end(
    file: &dyn ReadAt,
    file_len: u64,
    header: &FileHeader,
    saved: &SavedEnd<'_>,
    display: &str,
) -> std::result::Result<(), String> {
    let &SavedEnd { end, lsn, records, last } = saved;
    if end > file_len {
        return Err(format!("it reaches byte {end} but the log has {file_len} bytes (cut since?)"));
    }
    let Some((off, digest)) = last else {
        if records != 0 || end != format::HEADER_LEN as u64 {
            return Err("it names no last record".into());
        }
        return Ok(());
    };
    let len = end.checked_sub(off).filter(|&l| l > 0 && l <= format::MAX_PAYLOAD_LEN as u64);
    let len = len.ok_or("its last record's offset is out of range")?;
    let mut buf = vec![0u8; len as usize];
    let n = file.read_at(&mut buf, off).map_err(|e| format!("cannot read {display}: {e}"))?;
    let rec = format::parse_record(&buf[..n], header.salt(), format::MAX_PAYLOAD_LEN)
        .map_err(|_| format!("the log holds no record at byte {off}, where its last record was"))?;
    if rec.bytes.len() as u64 != len
        || rec.lsn != lsn
        || !rec.closes_commit(header.dense_from)
        || chain::digest(rec.bytes) != *digest
    {
        return Err(format!("the log's record at byte {off} is not its last record (LSN {lsn})"));
    }
    Ok(())
}

/// Check a snapshot against the log's file and header, and rebuild its index.
pub(crate) fn restore(
    mut snap: Snapshot,
    file: &(dyn ReadAt + Sync),
    file_len: u64,
    header: &FileHeader,
    display: &str,
) -> Result<Restored> {
    let name = std::mem::take(&mut snap.file);
    let mismatch = |reason: String| Error::SnapshotMismatch { path: name.clone(), reason };
    if snap.store_id != format::hex(&header.store_id) {
        return Err(mismatch(format!(
            "the snapshot is of store {}, the log is store {}",
            snap.store_id,
            format::hex(&header.store_id)
        )));
    }
    if snap.generation != header.generation || snap.dense_from != header.dense_from {
        return Err(mismatch(format!(
            "the snapshot is of log generation {}, the log is generation {} (compacted since?)",
            snap.generation, header.generation
        )));
    }
    let last = match &snap.last_record {
        None => None,
        Some((off, digest)) => Some((
            *off,
            unhex32(digest)
                .ok_or_else(|| mismatch("its last record's digest is not 64 hex digits".into()))?,
        )),
    };
    let saved = SavedEnd {
        end: snap.end,
        lsn: snap.lsn,
        records: snap.records,
        last: last.as_ref().map(|(o, d)| (*o, d)),
    };
    check_end(file, file_len, header, &saved, display).map_err(mismatch)?;
    let chain =
        unhex32(&snap.chain).ok_or_else(|| mismatch("its chain value is not 64 hex digits".into()))?;
    let m = snap.memories;
    let n = m.id.len();
    let cols = [
        m.kind.len(),
        m.task.len(),
        m.tags.len(),
        m.tier.len(),
        m.status.len(),
        m.lsn.len(),
        m.created_lsn.len(),
        m.created_at.len(),
        m.updated_at.len(),
        m.moved_at.len(),
        m.put_off.len(),
        m.put_len.len(),
        m.status_off.len(),
        m.move_off.len(),
    ];
    if cols.iter().any(|&c| c != n) {
        return Err(mismatch("its memory columns differ in length".into()));
    }
    let mut memories = Vec::with_capacity(n);
    for (i, id) in m.id.into_iter().enumerate() {
        let tier = Tier::from_u8(m.tier[i]).ok_or_else(|| mismatch(format!("memory {id:?}: bad tier")))?;
        let status =
            Status::from_u8(m.status[i]).ok_or_else(|| mismatch(format!("memory {id:?}: bad status")))?;
        let put_off = m.put_off[i];
        if put_off >= snap.end {
            return Err(mismatch(format!("memory {id:?}: its put is past the snapshot's end")));
        }
        memories.push((
            id,
            Entry {
                hash: 0,
                id_off: 0,
                put_off,
                status_off: off_out(m.status_off[i]),
                move_off: off_out(m.move_off[i]),
                lsn: m.lsn[i],
                created_lsn: m.created_lsn[i],
                created_at: m.created_at[i],
                updated_at: m.updated_at[i],
                moved_at: m.moved_at[i],
                put_len: m.put_len[i],
                kind: m.kind[i],
                task: m.task[i],
                tags: m.tags[i],
                id_len: 0,
                tier,
                status,
            },
        ));
    }
    let mut seals = Vec::with_capacity(snap.seals.len());
    for s in &snap.seals {
        seals.push(SealEntry {
            lsn: s.lsn,
            record_lsn: s.record_lsn,
            offset: s.offset,
            at: s.at,
            keyed: s.keyed,
            chain: unhex32(&s.chain).ok_or_else(|| mismatch("a seal's chain is not 64 hex digits".into()))?,
            mac: unhex32(&s.mac).ok_or_else(|| mismatch("a seal's hash is not 64 hex digits".into()))?,
        });
    }
    let history = match snap.history.take() {
        None => None,
        Some(h) => Some(older_records(h, n, snap.end).map_err(mismatch)?),
    };
    let parts = Parts {
        kinds: snap.kinds.clone(),
        tasks: snap.tasks.clone(),
        tags: snap.tags.clone(),
        tagsets: snap.tagsets.clone(),
        finished: snap.finished.clone(),
        memories,
        entities: snap.entities.iter().map(|(k, o, l)| (k.clone().into_bytes(), *o, *l)).collect(),
        seals,
        history,
    };
    let index = Index::from_parts(parts).map_err(mismatch)?;
    check_records(&index, &snap.sparse, file, header, snap.end).map_err(mismatch)?;
    let at = check_chain(&index, &snap.sparse, file, header, snap.end, display)?;
    if at.value != chain {
        return Err(mismatch(format!(
            "its chain value differs from the log's at LSN {} (the log's records before the \
             snapshot's end changed since it was taken, or it is of another copy of the store)",
            at.lsn
        )));
    }
    Ok(Restored {
        index,
        end: snap.end,
        lsn: snap.lsn,
        records: snap.records,
        sparse: snap.sparse.clone(),
        chain,
    })
}

/// The log's chain at a snapshot's end (`end`), recomputed from the newest seal the snapshot
/// holds (a record the log holds, checked above), or from the log's first record when it
/// holds none: with seals every so often, a few records' hashing. A damaged record on the way
/// is the log's damage, as a replay would report it.
fn check_chain(
    index: &Index,
    sparse: &[(u64, u64)],
    file: &(dyn ReadAt + Sync),
    header: &FileHeader,
    end: u64,
    display: &str,
) -> Result<verify::Checked> {
    let start = match index.seals().iter().max_by_key(|s| s.lsn) {
        Some(seal) => verify::Start {
            offset: scan::offset_after(file, sparse, header.salt(), end, seal.lsn)
                .map_err(|e| Error::io(display, "read", e))?
                .map_err(|b| damaged(display, b.offset, b.lsn, b.reason.into()))?,
            value: seal.chain,
            lsn: seal.lsn,
        },
        None => verify::Start::at_header(file).map_err(|e| Error::io(display, "read", e))?,
    };
    let source = verify::Source {
        src: file,
        salt: header.salt(),
        dense_from: header.dense_from,
        end,
        version: header.version,
    };
    // LSN 0 names no seal record: the seals on the way are hashed, not checked (`verify`'s).
    let opts = verify::CheckOptions { only: Some(0), ..Default::default() };
    verify::check(&source, start, opts)
        .map_err(|f| f.into_error(display, |offset, lsn, reason| damaged(display, offset, lsn, reason)))
}

/// The log `display`'s damage at byte `offset`, where LSN `lsn` was expected.
fn damaged(display: &str, offset: u64, lsn: u64, reason: String) -> Error {
    Error::Corrupt { path: display.to_string(), offset, lsn, reason }
}

/// A snapshot's older records as (memory number, offset, length), each inside the records it
/// covers (up to `end`) and of one of its `memories`. They are not read here (see the module
/// documentation): a history read checks each.
fn older_records(
    h: OlderRecords,
    memories: usize,
    end: u64,
) -> std::result::Result<Vec<(u32, u64, u32)>, String> {
    let n = h.memory.len();
    if h.off.len() != n || h.len.len() != n {
        return Err("its older-record columns differ in length".into());
    }
    let mut out = Vec::with_capacity(n);
    for ((memory, off), len) in h.memory.into_iter().zip(h.off).zip(h.len) {
        if memory as usize >= memories {
            return Err(format!("an older record names memory number {memory}, of {memories}"));
        }
        let shortest = u64::from(len).max(RECORD_OVERHEAD as u64);
        if off < format::HEADER_LEN as u64 || off.checked_add(shortest).is_none_or(|e| e > end) {
            return Err(format!("an older record at byte {off} is outside the records the snapshot covers"));
        }
        out.push((memory, off, len));
    }
    Ok(out)
}

/// The bytes read at a time when checking the records a snapshot points to (a buffer small
/// enough to stay in the cache; fresh memory costs more than the extra reads).
const WINDOW: usize = 256 << 10;

/// Reads records by offset, in ascending order, through a window of a few MiB: the records
/// a snapshot points to are read with a few large reads, not one small read each.
struct Window<'a> {
    file: &'a (dyn ReadAt + Sync),
    salt: u32,
    /// Where the snapshot's records end.
    end: u64,
    buf: Vec<u8>,
    off: u64,
    len: usize,
}

impl Window<'_> {
    /// Make bytes `at..at + n` (or up to `end`) be in the window.
    fn ensure(&mut self, at: u64, n: usize) -> std::result::Result<(), String> {
        if at >= self.off && at + n as u64 <= self.off + self.len as u64 {
            return Ok(());
        }
        let want = n.max(WINDOW).min((self.end - at) as usize);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        self.len = self
            .file
            .read_at(&mut self.buf[..want], at)
            .map_err(|e| format!("cannot read the log at byte {at}: {e}"))?;
        self.off = at;
        Ok(())
    }

    /// The whole, valid record at `at`, which must end by `end`; `Err` says why not.
    fn record(&mut self, at: u64) -> std::result::Result<RecordView<'_>, String> {
        let header = format::RECORD_HEADER_LEN;
        if at < format::HEADER_LEN as u64 || at + header as u64 > self.end {
            return Err(format!("byte {at} is outside the records the snapshot covers"));
        }
        self.ensure(at, header)?;
        let rel = (at - self.off) as usize;
        let b = &self.buf[rel..self.len];
        if b.len() < header {
            return Err(format!("the log ends before byte {}", at + header as u64));
        }
        let key_len = u16::from_le_bytes([b[24], b[25]]) as u64;
        let len = u32::from_le_bytes(b[28..32].try_into().expect("4 bytes")) as u64;
        let total = format::RECORD_OVERHEAD as u64 + key_len + len;
        if at + total > self.end {
            return Err(format!(
                "the log holds no record at byte {at} (one there would run past the snapshot's end)"
            ));
        }
        self.ensure(at, total as usize)?;
        let rel = (at - self.off) as usize;
        let b = &self.buf[rel..self.len.min(rel + total as usize)];
        format::parse_record(b, self.salt, format::MAX_PAYLOAD_LEN).map_err(|e| {
            let why = match e {
                format::ParseError::Incomplete => "the log ends inside it",
                format::ParseError::Invalid(why) => why,
            };
            format!("the log holds no record at byte {at} ({why})")
        })
    }
}

/// What a snapshot says is at a byte offset: a memory's last put, status or move record (by
/// entry number), an entity's newest record, a seal, a sparse-index entry (by number).
#[derive(Clone, Copy)]
enum Points {
    Put(u32),
    Status(u32),
    Move(u32),
    Entity(u32),
    Seal(u32),
    Sparse(u32),
}

/// Check every record the restored index (and the snapshot's sparse index) points to: it is
/// there, before the snapshot's end, of the right op and key, and says what the entry says.
///
/// The records are read in offset order. Offsets follow LSNs in a log, so which of a memory's
/// put, status and move records is the newer is known from the entry's offsets alone, and each
/// record is checked as it is read: the newest of them gives the entry's LSN and time, a status
/// or move record after the put gives its status or tier, else the put does.
fn check_records(
    index: &Index,
    sparse: &[(u64, u64)],
    file: &(dyn ReadAt + Sync),
    header: &FileHeader,
    end: u64,
) -> std::result::Result<(), String> {
    let entries = index.entries();
    let entities: Vec<(&[u8], (u64, u32))> = index.entities().collect();
    let seals = index.seals();
    for w in sparse.windows(2) {
        if w[1].0 <= w[0].0 || w[1].1 <= w[0].1 {
            return Err("its sparse index is not in LSN and offset order".into());
        }
    }
    let mut points = Vec::with_capacity(entries.len() + entities.len() + seals.len() + sparse.len());
    // Puts, then status records, then moves: each mostly in offset order already, so the
    // (stable, run-merging) sort below mostly merges a few runs.
    let numbered = || entries.iter().enumerate().map(|(n, e)| (n as u32, e));
    points.extend(numbered().map(|(n, e)| (e.put_off, Points::Put(n))));
    let status = numbered().filter(|(_, e)| e.status_off != NO_OFFSET);
    points.extend(status.map(|(n, e)| (e.status_off, Points::Status(n))));
    let moves = numbered().filter(|(_, e)| e.move_off != NO_OFFSET);
    points.extend(moves.map(|(n, e)| (e.move_off, Points::Move(n))));
    points.extend(entities.iter().enumerate().map(|(n, (_, (off, _)))| (*off, Points::Entity(n as u32))));
    points.extend(seals.iter().enumerate().map(|(n, s)| (s.offset, Points::Seal(n as u32))));
    points.extend(sparse.iter().enumerate().map(|(n, &(_, off))| (off, Points::Sparse(n as u32))));
    // Two pointers at one record are a lie but for the sparse index's: the one that is not a
    // put's is checked first, so the message says which record is not what it claims.
    points.sort_by_key(|&(off, what)| (off, matches!(what, Points::Put(_) | Points::Sparse(_))));

    // Two threads when there is much to read: each record is checked on its own.
    let salt = header.salt();
    let seen = Seen { index, entities: &entities, sparse };
    if points.len() < PARALLEL_FROM {
        return seen.check(&points, file, salt, end);
    }
    let (a, b) = points.split_at(points.len() / 2);
    std::thread::scope(|s| {
        let second = s.spawn(|| seen.check(b, file, salt, end));
        let first = seen.check(a, file, salt, end);
        // The first error in offset order.
        first.and(second.join().unwrap_or_else(|_| Err("checking the snapshot's records failed".into())))
    })
}

/// Below this many records to check, one thread reads them all.
const PARALLEL_FROM: usize = 16_384;

/// What the checks of records read: the restored index, its entities, the sparse index.
#[derive(Clone, Copy)]
struct Seen<'a> {
    index: &'a Index,
    entities: &'a [(&'a [u8], (u64, u32))],
    sparse: &'a [(u64, u64)],
}

impl Seen<'_> {
    /// Check the records at `points` (in offset order).
    fn check(
        &self,
        points: &[(u64, Points)],
        file: &(dyn ReadAt + Sync),
        salt: u32,
        end: u64,
    ) -> std::result::Result<(), String> {
        let Seen { index, entities, sparse } = *self;
        let entries = index.entries();
        let seals = index.seals();
        let mut window = Window { file, salt, end, buf: Vec::new(), off: 0, len: 0 };
        let mut tags = Vec::new();
        for &(off, what) in points {
            let rec = window.record(off).map_err(|why| {
                format!("{} is at byte {off}, but {why}", whose(index, entities, sparse, what))
            })?;
            let not = |want: &str| {
                format!(
                    "{} is at byte {off}, but the record there is a {} record of {:?} (LSN {}), not {want}",
                    whose(index, entities, sparse, what),
                    rec.op.name(),
                    rec.key_str(),
                    rec.lsn
                )
            };
            match what {
                Points::Put(n) | Points::Status(n) | Points::Move(n) => {
                    let e = &entries[n as usize];
                    let id = index.id_of(e);
                    let (op, name) = match what {
                        Points::Put(_) => (Op::Put, "put"),
                        Points::Status(_) => (Op::Status, "status"),
                        _ => (Op::Move, "move"),
                    };
                    if rec.op != op || rec.key != id.as_bytes() {
                        return Err(not(&format!("a {name} of {id:?}")));
                    }
                    let bad = |field: &str, snap: &dyn std::fmt::Debug, log: &dyn std::fmt::Debug| {
                        format!(
                            "memory {id:?}: it says {field} {snap:?}, but its {name} record at byte {off} \
                             (LSN {}) says {log:?}",
                            rec.lsn
                        )
                    };
                    let later = |o: u64| o != NO_OFFSET && o > off;
                    let (status_later, move_later) = (later(e.status_off), later(e.move_off));
                    let put_later = e.put_off > off;
                    match op {
                        Op::Put => {
                            let head = memory::decode_put_head_only(rec.payload)
                                .ok_or_else(|| not("a put whose payload decodes"))?;
                            if rec.bytes.len() as u64 != u64::from(e.put_len) {
                                return Err(bad("a put length of", &e.put_len, &rec.bytes.len()));
                            }
                            if head.kind != index.kinds.name(e.kind) {
                                return Err(bad("kind", &index.kinds.name(e.kind), &head.kind));
                            }
                            if head.task != index.task_of(e) {
                                return Err(bad("task", &index.task_of(e), &head.task));
                            }
                            tags.clear();
                            tags.extend(head.tags.iter().map(|t| index.tags.lookup(t).unwrap_or(u32::MAX)));
                            tags.sort_unstable();
                            tags.dedup();
                            if tags[..] != index.tagsets[e.tags as usize][..] {
                                return Err(bad("tags", &index.tags_of(e).collect::<Vec<_>>(), &head.tags));
                            }
                            let st = head.state;
                            let created_lsn = if st.created_lsn == 0 { rec.lsn } else { st.created_lsn };
                            if e.created_lsn != created_lsn {
                                return Err(bad("created_lsn", &e.created_lsn, &created_lsn));
                            }
                            if e.created_at != st.created_at {
                                return Err(bad("created_at", &e.created_at, &st.created_at));
                            }
                            if !status_later && e.status != st.status {
                                return Err(bad("status", &e.status.name(), &st.status.name()));
                            }
                            if !move_later && e.tier != st.tier {
                                return Err(bad("tier", &e.tier.name(), &st.tier.name()));
                            }
                            if !move_later && e.moved_at != st.moved_at {
                                return Err(bad("moved_at", &e.moved_at, &st.moved_at));
                            }
                        }
                        Op::Status => {
                            let (status, _) = memory::decode_status(rec.payload)
                                .ok_or_else(|| not("a status that decodes"))?;
                            if !put_later && e.status != status {
                                return Err(bad("status", &e.status.name(), &status.name()));
                            }
                        }
                        _ => {
                            let tier =
                                memory::decode_move(rec.payload).ok_or_else(|| not("a move that decodes"))?;
                            if !put_later && e.tier != tier {
                                return Err(bad("tier", &e.tier.name(), &tier.name()));
                            }
                            if !put_later && e.moved_at != rec.at {
                                return Err(bad("moved_at", &e.moved_at, &rec.at));
                            }
                        }
                    }
                    // The newest of its records gives its LSN and time.
                    let newest = !put_later && !status_later && !move_later;
                    if newest && (e.lsn, e.updated_at) != (rec.lsn, rec.at) {
                        return Err(format!(
                            "memory {id:?}: it says its newest record is LSN {} at {}, but its newest, \
                             the {name} record at byte {off}, is LSN {} at {}",
                            e.lsn, e.updated_at, rec.lsn, rec.at
                        ));
                    }
                }
                Points::Entity(n) => {
                    let (key, (_, len)) = entities[n as usize];
                    let live = matches!(memory::decode_entity(rec.payload), Some(Some(_)));
                    if rec.op != Op::Entity || rec.key != key || !live {
                        return Err(not("that entity's live state"));
                    }
                    if rec.bytes.len() as u64 != u64::from(len) {
                        return Err(format!(
                            "{} at byte {off} is {} bytes long, the snapshot says {len}",
                            whose(index, entities, sparse, what),
                            rec.bytes.len()
                        ));
                    }
                }
                Points::Seal(n) => {
                    if rec.op != Op::Seal {
                        return Err(not("a seal"));
                    }
                    if seal::decode(&rec, off).as_ref() != Some(&seals[n as usize]) {
                        return Err(format!(
                            "{} at byte {off} is another seal than the snapshot says",
                            whose(index, entities, sparse, what)
                        ));
                    }
                }
                Points::Sparse(n) => {
                    let lsn = sparse[n as usize].0;
                    if rec.lsn != lsn {
                        return Err(format!(
                            "its sparse index puts LSN {lsn} at byte {off}, where the log holds LSN {}",
                            rec.lsn
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// What a snapshot says a record is, for a message.
fn whose(index: &Index, entities: &[(&[u8], (u64, u32))], sparse: &[(u64, u64)], what: Points) -> String {
    let memory = |n: u32| format!("memory {:?}", index.id_of(&index.entries()[n as usize]));
    match what {
        Points::Put(n) => format!("{}: its last put record", memory(n)),
        Points::Status(n) => format!("{}: its last status record", memory(n)),
        Points::Move(n) => format!("{}: its last move record", memory(n)),
        Points::Entity(n) => {
            format!("entity {:?}: its record", String::from_utf8_lossy(entities[n as usize].0))
        }
        Points::Seal(n) => format!("the seal of LSN {}: its record", index.seals()[n as usize].lsn),
        Points::Sparse(n) => format!("its sparse index entry for LSN {}", sparse[n as usize].0),
    }
}
