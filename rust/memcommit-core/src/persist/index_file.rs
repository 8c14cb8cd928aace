//! The index file: the index that replay builds, saved beside the log (`<log>.index`) so the
//! next open reads it back instead of replaying every record it covers.
//!
//! It is a cache, never the truth. A writer saves one when it closes a log that has grown by
//! `Options::index_file_every` records since the last one (or when asked:
//! `Log::write_index_file`). Opening reads it only when it fits the log: the same store,
//! generation and `dense_from`, a file that still reaches its end, and there the very record
//! it ends with (offset, LSN, blake3 digest, closing a commit). Then only the records after
//! it are replayed, and the chain thread continues from its chain value. A file that does
//! not fit, does not parse, or fails a checksum is ignored (`Log::index_file_status` says
//! why) and the log is replayed as if it were not there; the next close writes a fresh one.
//!
//! # Layout (little-endian)
//!
//! * The first page: a 256-byte header, then zeros. The header: magic `MCINDEX\0`, version,
//!   the log's identity and end (store id, generation, `dense_from`, LSN, end offset,
//!   records, chain value, the last record's offset and digest), the id hash's seed and a
//!   probe of it (the table is stored as it is, so the hash must be the same function: a
//!   different one means the file is ignored), the size of each section, a CRC32C of each,
//!   and a CRC32C of the header.
//! * Entries: 96 bytes each, the fields of `Entry` in declaration order (its `repr(C)`
//!   layout).
//! * The id arena: every id's bytes.
//! * The id table's slots: 8 bytes each.
//! * The links of the memories' older records (`state::history`): 16 bytes each, the fields
//!   of `Link` in declaration order (its `repr(C)` layout).
//! * The heads of those links: slots of the id table's kind, keyed by entry number.
//! * The rest, small: interned kinds, tasks and tags, tag sets, finished tasks, live
//!   entities, seals, the sparse LSN index.
//!
//! Each section starts on a 4 KiB boundary (whatever the machine's page size), zeros
//! between. Open maps the five large sections (`slab`) instead of copying them, and uses
//! them in place once two threads have checked
//! their CRCs and every entry and link: one takes the links and most entries, the other the
//! ids, the tables and the last entries, a megabyte at a time while the bytes are in cache.
//!
//! Version 2 added the links and their heads; a file of version 1 is ignored (the log is
//! replayed, and the writer's next close writes a version 2 one).

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::format::chain::ChainValue;
use crate::format::memory::{Status, Tier};
use crate::format::seal::SealEntry;
use crate::format::{self, FileHeader};
use crate::persist::snapshot::{check_end, Restored, SavedEnd};
use crate::persist::SavedAt;
use crate::recovery::scan::ReadAt;
use crate::state::by_task::ByTask;
use crate::state::history::{History, Link};
use crate::state::idtable::IdTable;
use crate::state::index::{Entry, Index, Interner};
use crate::state::slab::{Region, Slab, ALIGN};
use crate::vfs::{File, Open, Writer};

const MAGIC: &[u8; 8] = b"MCINDEX\0";
/// 2: the links of older records and their heads.
const VERSION: u32 = 2;
const HEADER_BYTES: usize = 256;
const ENTRY_BYTES: usize = 96;
const LINK_BYTES: usize = 16;
/// Header flag: the index kept no history of older records (`History::is_tracked`), so the
/// file holds no links.
const FLAG_UNTRACKED: u32 = 1;
/// Entries decoded per read: about a megabyte, so a chunk is still in cache when decoded.
const CHUNK_ENTRIES: usize = 10_922;
const CHUNK_BYTES: usize = 1 << 20;
/// What the id hash's probe hashes: a file whose probe differs was written with another hash.
const PROBE: &[u8] = b"memcommit index file";

/// Where the index file of the log at `log` lives.
pub fn path_for(log: &Path) -> PathBuf {
    let mut name = log.file_name().unwrap_or_default().to_owned();
    name.push(".index");
    log.with_file_name(name)
}

/// What an open made of the index file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexFileStatus {
    /// Not looked for (a log in RAM, a replica, or an open with a snapshot).
    NotUsed,
    /// There was none.
    Absent,
    /// Read: the open replayed only what followed it.
    Loaded,
    /// There was one, but it did not fit the log or did not read back whole: why.
    Ignored(String),
}

impl std::fmt::Display for IndexFileStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IndexFileStatus::NotUsed => f.write_str("not used"),
            IndexFileStatus::Absent => f.write_str("absent"),
            IndexFileStatus::Loaded => f.write_str("loaded"),
            IndexFileStatus::Ignored(why) => write!(f, "ignored: {why}"),
        }
    }
}

/// The header's fields.
#[derive(Clone, Debug, Default, PartialEq)]
struct Head {
    store_id: [u8; 16],
    generation: u64,
    dense_from: u64,
    lsn: u64,
    end: u64,
    records: u64,
    chain: ChainValue,
    /// Offset of the last record (0 when the log has none) and its digest.
    last_off: u64,
    last_digest: [u8; 32],
    seed: u64,
    probe: u32,
    entries: u64,
    arena: u64,
    slots: u64,
    small: u64,
    entity_records: u64,
    /// CRC32C of the entries, the arena, the slots and the small section.
    crcs: [u32; 4],
    flags: u32,
    /// Links, head slots, and heads (memories with older records).
    links: u64,
    head_slots: u64,
    heads: u64,
    /// CRC32C of the links and of the head slots.
    link_crcs: [u32; 2],
}

impl Head {
    fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        let mut w = Put { b: &mut b, at: 0 };
        w.bytes(MAGIC);
        w.u32(VERSION);
        w.u32(self.flags);
        w.bytes(&self.store_id);
        for v in [self.generation, self.dense_from, self.lsn, self.end, self.records] {
            w.u64(v);
        }
        w.bytes(&self.chain);
        w.u64(self.last_off);
        w.bytes(&self.last_digest);
        w.u64(self.seed);
        w.u32(self.probe);
        for v in [self.entries, self.arena, self.slots, self.small, self.entity_records] {
            w.u64(v);
        }
        for c in self.crcs {
            w.u32(c);
        }
        for v in [self.links, self.head_slots, self.heads] {
            w.u64(v);
        }
        for c in self.link_crcs {
            w.u32(c);
        }
        let crc = crc32c::crc32c(&b[..HEADER_BYTES - 4]);
        b[HEADER_BYTES - 4..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8; HEADER_BYTES]) -> std::result::Result<Head, String> {
        if &b[..8] != MAGIC {
            return Err("it is not a memcommit index file".into());
        }
        let crc = u32::from_le_bytes(b[HEADER_BYTES - 4..].try_into().expect("4 bytes"));
        if crc32c::crc32c(&b[..HEADER_BYTES - 4]) != crc {
            return Err("its header fails its checksum".into());
        }
        let mut r = Get { b: &b[8..HEADER_BYTES - 4] };
        let version = r.u32().ok_or("short header")?;
        if version != VERSION {
            return Err(format!("it is of version {version}; this build reads version {VERSION}"));
        }
        let flags = r.u32().ok_or("short header")?;
        if flags & !FLAG_UNTRACKED != 0 {
            return Err(format!("its header has flags {flags:#x} this build does not know"));
        }
        let short = || "short header".to_string();
        let mut h = Head { store_id: r.array().ok_or_else(short)?, flags, ..Head::default() };
        h.generation = r.u64().ok_or_else(short)?;
        h.dense_from = r.u64().ok_or_else(short)?;
        h.lsn = r.u64().ok_or_else(short)?;
        h.end = r.u64().ok_or_else(short)?;
        h.records = r.u64().ok_or_else(short)?;
        h.chain = r.array().ok_or_else(short)?;
        h.last_off = r.u64().ok_or_else(short)?;
        h.last_digest = r.array().ok_or_else(short)?;
        h.seed = r.u64().ok_or_else(short)?;
        h.probe = r.u32().ok_or_else(short)?;
        h.entries = r.u64().ok_or_else(short)?;
        h.arena = r.u64().ok_or_else(short)?;
        h.slots = r.u64().ok_or_else(short)?;
        h.small = r.u64().ok_or_else(short)?;
        h.entity_records = r.u64().ok_or_else(short)?;
        for c in &mut h.crcs {
            *c = r.u32().ok_or_else(short)?;
        }
        h.links = r.u64().ok_or_else(short)?;
        h.head_slots = r.u64().ok_or_else(short)?;
        h.heads = r.u64().ok_or_else(short)?;
        for c in &mut h.link_crcs {
            *c = r.u32().ok_or_else(short)?;
        }
        Ok(h)
    }

    // Each large section starts on a 4 KiB boundary of its own (`ALIGN`, fixed whatever the
    // machine's page size, so files are portable), so it can be mapped where it is; the bytes
    // between sections are zeros.
    fn entries_at(&self) -> u64 {
        ALIGN as u64
    }

    fn arena_at(&self) -> u64 {
        (self.entries_at() + self.entries * ENTRY_BYTES as u64).next_multiple_of(ALIGN as u64)
    }

    fn slots_at(&self) -> u64 {
        (self.arena_at() + self.arena).next_multiple_of(ALIGN as u64)
    }

    fn links_at(&self) -> u64 {
        (self.slots_at() + self.slots * 8).next_multiple_of(ALIGN as u64)
    }

    fn heads_at(&self) -> u64 {
        (self.links_at() + self.links * LINK_BYTES as u64).next_multiple_of(ALIGN as u64)
    }

    fn small_at(&self) -> u64 {
        (self.heads_at() + self.head_slots * 8).next_multiple_of(ALIGN as u64)
    }
}

/// Writes little-endian values into a fixed buffer.
struct Put<'a> {
    b: &'a mut [u8],
    at: usize,
}

impl Put<'_> {
    fn bytes(&mut self, v: &[u8]) {
        self.b[self.at..self.at + v.len()].copy_from_slice(v);
        self.at += v.len();
    }
    fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
}

/// Reads little-endian values; `None` past the end.
struct Get<'a> {
    b: &'a [u8],
}

impl<'a> Get<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.b.len() < n {
            return None;
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Some(head)
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N).map(|s| s.try_into().expect("N bytes"))
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|s| s[0])
    }
    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.array().map(i64::from_le_bytes)
    }
    /// A count of items each at least `min` bytes long: refused if the rest cannot hold them,
    /// so a damaged count never makes a huge allocation.
    fn count(&mut self, min: usize) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n.checked_mul(min.max(1))? <= self.b.len()).then_some(n)
    }
    fn blob(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

fn put_blob(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

fn encode_entry(out: &mut Vec<u8>, e: &Entry) {
    for v in [e.id_off, e.put_off, e.status_off, e.move_off, e.lsn, e.created_lsn] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in [e.created_at, e.updated_at, e.moved_at] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in [e.put_len, e.kind, e.task, e.tags, e.hash] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&e.id_len.to_le_bytes());
    out.push(e.tier as u8);
    out.push(e.status as u8);
}

fn decode_entry(b: &[u8]) -> Option<Entry> {
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    Some(Entry {
        id_off: u64_at(0),
        put_off: u64_at(8),
        status_off: u64_at(16),
        move_off: u64_at(24),
        lsn: u64_at(32),
        created_lsn: u64_at(40),
        created_at: u64_at(48) as i64,
        updated_at: u64_at(56) as i64,
        moved_at: u64_at(64) as i64,
        put_len: u32_at(72),
        kind: u32_at(76),
        task: u32_at(80),
        tags: u32_at(84),
        hash: u32_at(88),
        id_len: u16::from_le_bytes([b[92], b[93]]),
        tier: Tier::from_u8(b[94])?,
        status: Status::from_u8(b[95])?,
    })
}

/// Interned names, tag sets, finished tasks, entities, seals and the sparse index.
fn encode_small(idx: &Index, sparse: &[(u64, u64)]) -> Vec<u8> {
    let mut out = Vec::new();
    for names in [&idx.kinds, &idx.tasks, &idx.tags] {
        out.extend_from_slice(&(names.len() as u64).to_le_bytes());
        for n in 0..names.len() as u32 {
            put_blob(&mut out, names.name(n).as_bytes());
        }
    }
    out.extend_from_slice(&(idx.tagsets.len() as u64).to_le_bytes());
    for set in &idx.tagsets {
        out.extend_from_slice(&(set.len() as u64).to_le_bytes());
        for t in set.iter() {
            out.extend_from_slice(&t.to_le_bytes());
        }
    }
    out.extend_from_slice(&(idx.finished.len() as u64).to_le_bytes());
    out.extend(idx.finished.iter().map(|&f| f as u8));
    out.extend_from_slice(&(idx.entities.len() as u64).to_le_bytes());
    for (k, &(off, len)) in &idx.entities {
        put_blob(&mut out, k);
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
    }
    out.extend_from_slice(&(idx.seals.len() as u64).to_le_bytes());
    for s in &idx.seals {
        for v in [s.lsn, s.record_lsn, s.offset] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&s.at.to_le_bytes());
        out.push(s.keyed as u8);
        out.extend_from_slice(&s.chain);
        out.extend_from_slice(&s.mac);
    }
    out.extend_from_slice(&(sparse.len() as u64).to_le_bytes());
    for &(lsn, off) in sparse {
        out.extend_from_slice(&lsn.to_le_bytes());
        out.extend_from_slice(&off.to_le_bytes());
    }
    out
}

/// Read back what `encode_small` wrote into a fresh index; also returns the sparse index.
fn decode_small(b: &[u8], idx: &mut Index) -> Option<Vec<(u64, u64)>> {
    let mut r = Get { b };
    let mut interners = Vec::with_capacity(3);
    for _ in 0..3 {
        let n = r.count(4)?;
        let mut names = Vec::with_capacity(n);
        for _ in 0..n {
            names.push(Box::<str>::from(std::str::from_utf8(r.blob()?).ok()?));
        }
        interners.push(Interner::from_names(names)?);
    }
    idx.tags = interners.pop()?;
    idx.tasks = interners.pop()?;
    idx.kinds = interners.pop()?;
    let n = r.count(8)?;
    let mut tagsets = Vec::with_capacity(n);
    for _ in 0..n {
        let len = r.count(4)?;
        let set: Option<Vec<u32>> = (0..len).map(|_| r.u32()).collect();
        let set = set?;
        if set.iter().any(|&t| t as usize >= idx.tags.len()) {
            return None;
        }
        tagsets.push(set.into_boxed_slice());
    }
    if tagsets.first().is_none_or(|s| !s.is_empty()) {
        return None;
    }
    idx.tagsets = tagsets;
    idx.rebuild_tagset_ids();
    let n = r.count(1)?;
    if n != idx.tasks.len() {
        return None;
    }
    idx.finished = r.take(n)?.iter().map(|&f| f != 0).collect();
    let n = r.count(16)?;
    let mut entities = Vec::with_capacity(n);
    for _ in 0..n {
        let k = r.blob()?;
        let (off, len) = (r.u64()?, r.u32()?);
        entities.push((k.into(), (off, len)));
    }
    // Written in key order, so this builds the tree in one pass.
    idx.entities = entities.into_iter().collect();
    let n = r.count(97)?;
    for _ in 0..n {
        idx.seals.push(SealEntry {
            lsn: r.u64()?,
            record_lsn: r.u64()?,
            offset: r.u64()?,
            at: r.i64()?,
            keyed: r.u8()? != 0,
            chain: r.array()?,
            mac: r.array()?,
        });
    }
    let n = r.count(16)?;
    let sparse: Option<Vec<(u64, u64)>> = (0..n).map(|_| Some((r.u64()?, r.u64()?))).collect();
    r.b.is_empty().then_some(())?;
    sparse
}

/// Streams sections into the file, keeping a CRC32C of the current one.
struct Sections<W: Write> {
    w: W,
    crc: u32,
    /// Bytes written so far.
    at: u64,
}

impl<W: Write> Sections<W> {
    fn write(&mut self, b: &[u8]) -> io::Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, b);
        self.at += b.len() as u64;
        self.w.write_all(b)
    }

    /// Zeros up to the next page (not part of any section's CRC).
    fn pad_to_page(&mut self) -> io::Result<()> {
        let pad = (self.at.next_multiple_of(ALIGN as u64) - self.at) as usize;
        self.w.write_all(&[0u8; ALIGN][..pad])?;
        self.at += pad as u64;
        Ok(())
    }

    /// End a section: its CRC, and the next one starts on a fresh page.
    fn end_section(&mut self) -> io::Result<u32> {
        self.pad_to_page()?;
        Ok(std::mem::take(&mut self.crc))
    }
}

/// The size of the index file `write` makes of `idx` and `sparse` (what a full disk must
/// make room for).
pub(crate) fn size_of(idx: &Index, sparse: &[(u64, u64)]) -> u64 {
    let page = |n: u64| n.next_multiple_of(ALIGN as u64);
    let entries = page(idx.entries.len() as u64 * ENTRY_BYTES as u64);
    let slots = page(idx.table.slots().len() as u64 * 8);
    let h = &idx.history;
    let history = page(h.links.len() as u64 * LINK_BYTES as u64) + page(h.heads.slots().len() as u64 * 8);
    ALIGN as u64
        + entries
        + page(idx.arena.len() as u64)
        + slots
        + history
        + encode_small(idx, sparse).len() as u64
}

/// Write the index file's bytes for the state saved at `at` (its index and sparse index) into
/// `f`, a new empty file: the engine writes it under a temporary name and renames it.
pub(crate) fn write(f: &mut Writer<'_>, at: &SavedAt, idx: &Index, sparse: &[(u64, u64)]) -> io::Result<()> {
    let (last_off, last_digest) = at.last.unwrap_or_default();
    let small = encode_small(idx, sparse);
    let mut head = Head {
        store_id: at.header.store_id,
        generation: at.header.generation,
        dense_from: at.header.dense_from,
        lsn: at.lsn,
        end: at.end,
        records: at.records,
        chain: at.chain,
        last_off,
        last_digest,
        seed: idx.seed,
        probe: idx.hash(PROBE),
        entries: idx.entries.len() as u64,
        arena: idx.arena.len() as u64,
        slots: idx.table.slots().len() as u64,
        small: small.len() as u64,
        entity_records: idx.entity_records,
        crcs: [0; 4],
        flags: if idx.history.is_tracked() { 0 } else { FLAG_UNTRACKED },
        links: idx.history.links.len() as u64,
        head_slots: idx.history.heads.slots().len() as u64,
        heads: idx.history.heads.pairs().count() as u64,
        link_crcs: [0; 2],
    };
    // The first page: the header (written last, once the CRCs are known), then zeros.
    let mut s = Sections { w: BufWriter::with_capacity(CHUNK_BYTES, &mut *f), crc: 0, at: 0 };
    s.w.write_all(&[0u8; ALIGN])?;
    s.at = ALIGN as u64;
    let mut buf = Vec::with_capacity(CHUNK_ENTRIES * ENTRY_BYTES);
    for chunk in idx.entries.chunks(CHUNK_ENTRIES) {
        buf.clear();
        chunk.iter().for_each(|e| encode_entry(&mut buf, e));
        s.write(&buf)?;
    }
    head.crcs[0] = s.end_section()?;
    s.write(&idx.arena)?;
    head.crcs[1] = s.end_section()?;
    for chunk in idx.table.slots().chunks(CHUNK_BYTES / 8) {
        buf.clear();
        chunk.iter().for_each(|v| buf.extend_from_slice(&v.to_le_bytes()));
        s.write(&buf)?;
    }
    head.crcs[2] = s.end_section()?;
    for chunk in idx.history.links.chunks(CHUNK_BYTES / LINK_BYTES) {
        buf.clear();
        for l in chunk {
            buf.extend_from_slice(&l.off.to_le_bytes());
            buf.extend_from_slice(&l.len.to_le_bytes());
            buf.extend_from_slice(&l.prev.to_le_bytes());
        }
        s.write(&buf)?;
    }
    head.link_crcs[0] = s.end_section()?;
    for chunk in idx.history.heads.slots().chunks(CHUNK_BYTES / 8) {
        buf.clear();
        chunk.iter().for_each(|v| buf.extend_from_slice(&v.to_le_bytes()));
        s.write(&buf)?;
    }
    head.link_crcs[1] = s.end_section()?;
    s.write(&small)?;
    head.crcs[3] = s.crc;
    s.w.flush()?;
    drop(s);
    f.file().write_all_at(&head.encode(), 0)
}

/// `Err` unless a section's CRC32C is what the header says.
fn check_sum(sum: u32, want: u32, what: &str) -> std::result::Result<(), String> {
    if sum != want {
        return Err(format!("its {what} fail their checksum"));
    }
    Ok(())
}

/// `Err` unless the bytes after a section, to its page's end, are zeros.
fn check_padding(bytes: &[u8], what: &str) -> std::result::Result<(), String> {
    if bytes.iter().any(|&b| b != 0) {
        return Err(format!("the bytes after its {what} are not zeros"));
    }
    Ok(())
}

/// CRC32C of `bytes`, a megabyte at a time, handing each piece to `each` while it is in cache.
fn sum_pieces(
    bytes: &[u8],
    piece: usize,
    mut each: impl FnMut(&[u8]) -> std::result::Result<(), String>,
) -> std::result::Result<u32, String> {
    let mut sum = 0u32;
    for chunk in bytes.chunks(piece) {
        sum = crc32c::crc32c_append(sum, chunk);
        each(chunk)?;
    }
    Ok(sum)
}

/// Check the entry rows `bytes` (numbered from `first`): each has a valid tier and status and
/// points inside the file and the log.
fn check_entries(
    bytes: &[u8],
    first: u64,
    h: &Head,
    idx: &Index,
) -> std::result::Result<EntriesRead, String> {
    let mut sorted = true;
    let (mut first_created, mut last_created) = (None, 0u64);
    let (kinds, tasks, tagsets) = (idx.kinds.len(), idx.tasks.len(), idx.tagsets.len());
    let mut n = first;
    let mut by_task = ByTask::default();
    let crc = sum_pieces(bytes, CHUNK_ENTRIES * ENTRY_BYTES, |chunk| {
        for b in chunk.chunks_exact(ENTRY_BYTES) {
            let e = decode_entry(b).ok_or_else(|| format!("entry {n} has no valid tier or status"))?;
            let fits = (e.kind as usize) < kinds
                && (e.task as usize) < tasks
                && (e.tags as usize) < tagsets
                && e.id_off.checked_add(e.id_len as u64).is_some_and(|x| x <= h.arena)
                && e.put_off.checked_add(e.put_len as u64).is_some_and(|x| x <= h.end);
            if !fits {
                return Err(format!("entry {n} points outside what the file holds"));
            }
            sorted &= e.created_lsn >= last_created;
            last_created = e.created_lsn;
            first_created.get_or_insert(e.created_lsn);
            by_task.push(e.task, n as u32);
            n += 1;
        }
        Ok(())
    })?;
    Ok(EntriesRead { crc, len: bytes.len() as u64, sorted, first_created, last_created, by_task })
}

/// Map `len` bytes at `at` (a 4 KiB boundary), with room to grow to `reserve` bytes in all.
fn map_bytes(f: &File, at: u64, len: u64, reserve: u64, what: &str) -> std::result::Result<Region, String> {
    let too_large = || format!("its {what} are too large to map");
    let len = usize::try_from(len).map_err(|_| too_large())?;
    let reserve = usize::try_from(reserve).map_err(|_| too_large())?;
    Region::map(f, at, len, reserve).map_err(|e| format!("mapping its {what}: {e}"))
}

/// Map a section of `len` bytes at `at` (room to grow to `reserve`), and check its CRC and
/// the zeros after it.
fn map_section(
    f: &File,
    at: u64,
    len: u64,
    reserve: u64,
    want_crc: u32,
    what: &str,
) -> std::result::Result<Region, String> {
    let region = map_bytes(f, at, len, reserve, what)?;
    let bytes = region.file_bytes();
    let len = len as usize;
    check_sum(sum_pieces(&bytes[..len], CHUNK_BYTES, |_| Ok(()))?, want_crc, what)?;
    check_padding(&bytes[len..], what)?;
    Ok(region)
}

/// What checking a run of entries found.
struct EntriesRead {
    /// CRC32C of their bytes, and how many bytes.
    crc: u32,
    len: u64,
    /// Whether they are in creation order, and their first and last creation LSNs.
    sorted: bool,
    first_created: Option<u64>,
    last_created: u64,
    /// The memories of each task among them.
    by_task: ByTask,
}

impl EntriesRead {
    /// The same for this run followed by `next`.
    fn then(mut self, next: EntriesRead) -> EntriesRead {
        let joins = next.first_created.is_none_or(|first| first >= self.last_created);
        self.by_task.append(next.by_task);
        EntriesRead {
            by_task: self.by_task,
            crc: crc32c::crc32c_combine(self.crc, next.crc, next.len as usize),
            len: self.len + next.len,
            sorted: self.sorted && next.sorted && joins,
            first_created: self.first_created.or(next.first_created),
            last_created: if next.first_created.is_some() { next.last_created } else { self.last_created },
        }
    }
}

/// Map the links and check them: their CRC, each inside the log's records before `end`, its
/// `prev` an earlier link (so a chain always ends).
fn load_links(f: &File, h: &Head) -> std::result::Result<Slab<Link>, String> {
    let bytes = h.links * LINK_BYTES as u64;
    // Room to grow in place: as many links again.
    let region = map_bytes(f, h.links_at(), bytes, 2 * bytes, "links")?;
    check_padding(&region.file_bytes()[bytes as usize..], "links")?;
    let mut n = 0u64;
    let crc = sum_pieces(&region.file_bytes()[..bytes as usize], CHUNK_BYTES, |chunk| {
        for b in chunk.chunks_exact(LINK_BYTES) {
            let off = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
            let len = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
            let prev = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
            let shortest = u64::from(len).max(format::RECORD_OVERHEAD as u64);
            let inside =
                off >= format::HEADER_LEN as u64 && off.checked_add(shortest).is_some_and(|e| e <= h.end);
            if !inside || u64::from(prev) > n {
                return Err(format!("link {n} points outside what the file holds"));
            }
            n += 1;
        }
        Ok(())
    })?;
    check_sum(crc, h.link_crcs[0], "links")?;
    #[allow(unsafe_code)]
    // SAFETY: any 16 bytes are a valid `Link` (two integers, no padding: `repr(C)`, checked at
    // compile time, little-endian: see `load`), and a 4 KiB boundary is aligned for it.
    Ok(unsafe { Slab::from_region(region, h.links as usize) })
}

/// Map the links' heads and check them: their CRC, each head a link and of an entry that
/// exists, each entry once.
fn load_heads(f: &File, h: &Head) -> std::result::Result<IdTable, String> {
    let slots =
        map_section(f, h.heads_at(), h.head_slots * 8, h.head_slots * 8, h.link_crcs[1], "link heads")?;
    #[allow(unsafe_code)]
    // SAFETY: a 4 KiB boundary is aligned for u64, and any 8 bytes are a valid u64.
    let slots: Slab<u64> = unsafe { Slab::from_region(slots, h.head_slots as usize) };
    let heads = IdTable::from_slots(slots, h.links as u32, h.heads as usize)
        .ok_or("its link heads do not fit its links")?;
    let mut seen = vec![0u64; (h.entries as usize).div_ceil(64)];
    for (entry, _) in heads.pairs() {
        let e = entry as usize;
        if entry as u64 >= h.entries || seen[e / 64] & (1 << (e % 64)) != 0 {
            return Err("its link heads do not fit its entries".into());
        }
        seen[e / 64] |= 1 << (e % 64);
    }
    Ok(heads)
}

/// Read the index file of the log at `log_path`, if there is one that fits the log (`file`,
/// `file_len` bytes, with `header`). `Ok(None)`: there is none. `Err`: why it was not used.
pub(crate) fn load(
    log_path: &Path,
    file: &dyn ReadAt,
    file_len: u64,
    header: &FileHeader,
    display: &str,
) -> std::result::Result<Option<Restored>, String> {
    let f = match Open::read().open(&path_for(log_path)) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open it: {e}")),
    };
    if cfg!(target_endian = "big") {
        // The mapped rows are the little-endian layout of `Entry`.
        return Err("index files are read on little-endian machines only".into());
    }
    let size = f.len().map_err(|e| format!("cannot stat it: {e}"))?;
    let mut first_page = vec![0u8; ALIGN];
    f.read_exact_at(&mut first_page, 0).map_err(|_| "it is shorter than its header".to_string())?;
    let h = Head::decode(first_page[..HEADER_BYTES].try_into().expect("a header's bytes"))?;
    check_padding(&first_page[HEADER_BYTES..], "header")?;
    if h.store_id != header.store_id {
        return Err("it is of another store".into());
    }
    if h.generation != header.generation || h.dense_from != header.dense_from {
        return Err(format!(
            "it is of log generation {}, the log is generation {} (compacted since)",
            h.generation, header.generation
        ));
    }
    // Each count bounded by the file's size first, so the offsets cannot overflow.
    let sizes_fit = h.entries <= size / ENTRY_BYTES as u64
        && h.arena <= size
        && h.slots <= size / 8
        && h.links <= size / LINK_BYTES as u64
        && h.head_slots <= size / 8
        && h.heads <= h.head_slots
        && (h.flags & FLAG_UNTRACKED == 0 || h.links + h.head_slots == 0)
        && h.links < u32::MAX as u64
        && h.small <= size
        && h.small_at() + h.small == size
        && h.entries <= u32::MAX as u64;
    if !sizes_fit {
        return Err(format!("its sections do not add up to its {size} bytes"));
    }
    let saved = SavedEnd {
        end: h.end,
        lsn: h.lsn,
        records: h.records,
        last: (h.records > 0).then_some((h.last_off, &h.last_digest)),
    };
    check_end(file, file_len, header, &saved, display)?;
    let mut idx = Index::with_seed(h.seed);
    if idx.hash(PROBE) != h.probe {
        return Err("it was written with another id hash (another build of memcommit)".into());
    }
    let mut small = vec![0u8; h.small as usize];
    f.read_exact_at(&mut small, h.small_at()).map_err(|e| format!("reading it: {e}"))?;
    if crc32c::crc32c(&small) != h.crcs[3] {
        return Err("its names, entities and seals fail their checksum".into());
    }
    let sparse = decode_small(&small, &mut idx).ok_or("its names, entities and seals do not parse")?;
    drop(small);
    // Two threads check the mapped sections: the first entries and the links here; the ids,
    // the tables and the last entries beside them. The split evens out their work, counting
    // a byte of entries as 3/4 of a byte of the other sections (without links it gives this
    // thread four fifths of the entries, the split measured best). The CRCs of the two runs
    // of entries are combined.
    let n = h.entries;
    let tracked = h.flags & FLAG_UNTRACKED == 0;
    let entry_bytes = n * ENTRY_BYTES as u64;
    let beside = h.arena + h.slots * 8 + h.head_slots * 8;
    let here = h.links * LINK_BYTES as u64;
    let cut_bytes = ((beside + entry_bytes * 3 / 4).saturating_sub(here) * 2 / 3).min(entry_bytes);
    let split = cut_bytes / ENTRY_BYTES as u64;
    // Room to grow in place: as many entries again (untouched reserve costs no memory).
    let entries = map_bytes(&f, h.entries_at(), entry_bytes, 2 * entry_bytes, "entries")?;
    let rows = &entries.file_bytes()[..entry_bytes as usize];
    check_padding(&entries.file_bytes()[entry_bytes as usize..], "entries")?;
    let cut = (split * ENTRY_BYTES as u64) as usize;
    let (head, rest) = std::thread::scope(|s| {
        let rest = s.spawn(|| {
            let arena = map_section(&f, h.arena_at(), h.arena, 2 * h.arena, h.crcs[1], "ids")?;
            let slots = map_section(&f, h.slots_at(), h.slots * 8, h.slots * 8, h.crcs[2], "id table")?;
            #[allow(unsafe_code)]
            // SAFETY: a 4 KiB boundary is aligned for u64, and any 8 bytes are a valid u64.
            let slots: Slab<u64> = unsafe { Slab::from_region(slots, h.slots as usize) };
            let table = IdTable::from_slots(slots, n as u32, n as usize)
                .ok_or("its id table does not fit its entries")?;
            let heads = if tracked { Some(load_heads(&f, &h)?) } else { None };
            let read = check_entries(&rows[cut..], split, &h, &idx)?;
            Ok::<_, String>((arena, table, heads, read))
        });
        let head = check_entries(&rows[..cut], 0, &h, &idx)
            .and_then(|read| Ok((read, if tracked { Some(load_links(&f, &h)?) } else { None })));
        (head, rest.join().unwrap_or_else(|_| Err("reading it failed".into())))
    });
    let (arena, table, heads, tail_read) = rest?;
    let (head_read, links) = head?;
    let read = head_read.then(tail_read);
    let history = match (links, heads) {
        (Some(links), Some(heads)) => History::from_saved(links, heads),
        _ => History::untracked(),
    };
    check_sum(read.crc, h.crcs[0], "entries")?;
    #[allow(unsafe_code)]
    // SAFETY: `check_entries` found a valid tier and status in every row (the only fields
    // with invalid bit patterns), rows are laid out as `Entry` is (`repr(C)`, checked at
    // compile time, little-endian: see `load`), and a 4 KiB boundary is aligned for it.
    let entries: Slab<Entry> = unsafe { Slab::from_region(entries, n as usize) };
    #[allow(unsafe_code)]
    // SAFETY: any byte is a valid u8.
    let arena: Slab<u8> = unsafe { Slab::from_region(arena, h.arena as usize) };
    idx.table = table;
    idx.entries = entries;
    idx.arena = arena;
    idx.entity_records = h.entity_records;
    idx.history = history;
    idx.by_task = read.by_task;
    idx.set_sorted(read.sorted);
    Ok(Some(Restored { index: idx, end: h.end, lsn: h.lsn, records: h.records, sparse, chain: h.chain }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_refuses_damage() {
        let h = Head {
            store_id: [7; 16],
            generation: 3,
            lsn: 99,
            end: 4096,
            records: 120,
            chain: [1; 32],
            last_off: 4000,
            last_digest: [2; 32],
            seed: 42,
            probe: 5,
            entries: 10,
            arena: 260,
            slots: 32,
            small: 77,
            entity_records: 4,
            crcs: [1, 2, 3, 4],
            ..Head::default()
        };
        let b = h.encode();
        assert_eq!(Head::decode(&b).unwrap(), h);
        for i in 0..HEADER_BYTES {
            let mut d = b;
            d[i] ^= 0x10;
            assert!(Head::decode(&d).is_err(), "a flip at byte {i} went unnoticed");
        }
    }

    /// Damage that a checksum would not catch (the file's CRCs recomputed after it: a bug in
    /// a writer, or a forged file) is refused by the checks, or loads into an index that
    /// answers without panicking. Never a crash: the index is mapped and used in place.
    #[test]
    fn damage_behind_good_checksums_is_refused_or_harmless() {
        use crate::engine::log::{put, Durability, Log, Options};
        use crate::format::memory::{Command, PutCommand, Status};
        use crate::Query;

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.log");
        let opts = Options { durability: Durability::None, index_file_every: 0, ..Options::default() };
        let log = Log::open(&path, opts.clone()).unwrap();
        for i in 0..40 {
            let tags = if i % 3 == 0 { vec!["x".to_string()] } else { vec![] };
            let p = PutCommand::<String> {
                id: format!("m{i}"),
                kind: "k".into(),
                text: "t".into(),
                task: Some(format!("t{}", i % 4)),
                tags,
                ..PutCommand::default()
            };
            log.commit(&[Command::Put(p)], None, 1).unwrap();
        }
        log.commit(
            &[Command::<String>::SetStatus { id: "m3".into(), status: Status::Stale, reason: None }],
            None,
            1,
        )
        .unwrap();
        log.commit(&[put("m1", "k2", "again")], None, 2).unwrap();
        for i in 0..6 {
            // Older records: puts, status changes and moves that newer ones replaced.
            let again = put(&format!("m{}", i % 3), "k", &format!("version {i}"));
            let stale = Command::<String>::SetStatus {
                id: format!("m{}", 3 + i % 2),
                status: if i % 4 < 2 { Status::Active } else { Status::Stale },
                reason: Some("a reason".into()),
            };
            let tier = if i % 2 == 0 { crate::Tier::Long } else { crate::Tier::Mid };
            let moved = Command::<String>::Move { id: format!("m{}", i % 5), tier };
            log.commit(&[again, stale, moved], None, 2).unwrap();
        }
        log.commit(&[Command::<String>::FinishTask { task: "t1".into() }], None, 2).unwrap();
        log.write_entities(&[("lock\0a", Some(b"{}")), ("run\0b", Some(b"{}"))], 3).unwrap();
        log.seal(None, 4).unwrap();
        log.write_index_file().unwrap();
        log.close().unwrap();
        let idx_path = path_for(&path);
        let good = std::fs::read(&idx_path).unwrap();
        let head = Head::decode(good[..HEADER_BYTES].try_into().unwrap()).unwrap();
        let sections = [
            (head.entries_at() as usize, (head.entries * ENTRY_BYTES as u64) as usize),
            (head.arena_at() as usize, head.arena as usize),
            (head.slots_at() as usize, (head.slots * 8) as usize),
            (head.small_at() as usize, head.small as usize),
            (head.links_at() as usize, (head.links * LINK_BYTES as u64) as usize),
            (head.heads_at() as usize, (head.head_slots * 8) as usize),
        ];
        assert!(head.links > 10 && head.heads > 3, "the log has older records");
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n.max(1) as u64) as usize
        };
        let (mut loaded, mut refused) = (0, 0);
        for _ in 0..400 {
            let mut bad = good.clone();
            let (at, len) = sections[next(sections.len())];
            for _ in 0..1 + next(3) {
                let i = at + next(len);
                bad[i] = match next(3) {
                    0 => bad[i] ^ (1 << next(8)),
                    1 => 0xff,
                    _ => next(256) as u8,
                };
            }
            // Sign the damage: recompute every section's CRC and the header's.
            let mut h = head.clone();
            let crcs: Vec<u32> =
                sections.iter().map(|&(at, len)| crc32c::crc32c(&bad[at..at + len])).collect();
            h.crcs.copy_from_slice(&crcs[..4]);
            h.link_crcs.copy_from_slice(&crcs[4..]);
            bad[..HEADER_BYTES].copy_from_slice(&h.encode());
            std::fs::write(&idx_path, &bad).unwrap();
            let log = Log::open(&path, Options { read_only: true, ..opts.clone() }).unwrap();
            if log.info().unwrap().index_file == IndexFileStatus::Loaded {
                loaded += 1;
                // Whatever it answers, it answers.
                let ids: Vec<String> = (0..42).map(|i| format!("m{i}")).collect();
                let _ = log.get_many(&ids);
                let _ = log.find(&Query::default());
                let _ = log.find(&Query { task: Some("t2"), ..Query::default() });
                let _ = log.entities();
                let _ = log.seals();
                let _ = log.is_task_finished("t1");
                let _ = log.read_records(0, 0, 1000);
                for id in &ids {
                    let _ = log.history(id);
                }
                let _ = log.verify(None, None);
            } else {
                refused += 1;
            }
        }
        assert!(refused > 0 && loaded > 0 && loaded + refused == 400, "{loaded} loaded, {refused} refused");
    }

    #[test]
    fn the_id_hash_is_frozen() {
        // The table is stored as it is: if the hash function changes (a new foldhash), old
        // index files are ignored by their probe, and this test says the files' format moved.
        assert_eq!(Index::with_seed(1).hash(PROBE), 0xc40a_aef0, "the id hash changed");
    }
}
