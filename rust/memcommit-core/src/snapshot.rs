//! Snapshots: the state as JSON, to open a log without replaying what it covers.
//!
//! A snapshot holds the log's identity (store id, generation, `dense_from`), where it ends
//! (LSN, byte offset, record count, the chain value there and the digest of its last record),
//! and the index: every memory's fields (id, kind, task, tags, tier, status, LSNs and times)
//! with where its last put, status and move records are, finished tasks, role entities, seals.
//! Texts and data stay in the log, read when asked for, as after a replay. Memories are stored
//! column by column (one JSON array per field), which keeps a snapshot of a million memories
//! compact and quick to parse.
//!
//! Opening with a snapshot checks it against the log: the same store and generation, a file
//! long enough, and at the snapshot's end the same last record (LSN, bytes' digest, commit
//! end). Anything else is `SnapshotMismatch`. Then only the records after it are replayed, and
//! the chain thread continues from the snapshot's chain value; `verify` recomputes the chain
//! from the log's first record, so a snapshot whose chain value lies is caught there.

use serde::{Deserialize, Serialize};

use crate::chain::{self, ChainValue};
use crate::error::{Error, Result};
use crate::format::{self, FileHeader};
use crate::index::{Entry, Index, Parts, NO_OFFSET};
use crate::log::{Log, State};
use crate::memory::{Status, Tier};
use crate::scan::ReadAt;
use crate::seal::{self, SealEntry};

const FORMAT: &str = "memcommit-snapshot";
const VERSION: u32 = 1;

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
    entities: Vec<(String, u64, u32)>,
    seals: Vec<SealJson>,
    sparse: Vec<(u64, u64)>,
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

impl Log {
    /// The state as a snapshot's JSON text.
    pub fn snapshot_json(&self) -> Result<String> {
        let st = self.state.read();
        self.check_open(&st)?;
        let (lsn, chain) = self.chain_to_end(&st)?;
        let last_record = last_record(self, &st)?.map(|(off, d)| (off, seal::hex(&d)));
        // Copy out under the lock; build and write the JSON without it (commits go on).
        let p = st.index.parts();
        let (header, end, records, sparse) = (st.header, st.end, st.records, st.sparse.clone());
        drop(st);
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
            store_id: seal::hex(&header.store_id),
            generation: header.generation,
            dense_from: header.dense_from,
            lsn,
            end,
            records,
            chain: seal::hex(&chain),
            last_record,
            kinds: p.kinds,
            tasks: p.tasks,
            tags: p.tags,
            tagsets: p.tagsets,
            finished: p.finished,
            memories: m,
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
                    chain: seal::hex(&s.chain),
                    mac: seal::hex(&s.mac),
                })
                .collect(),
            sparse,
        };
        serde_json::to_string(&snap).map_err(|e| Error::invalid("snapshot", e.to_string()))
    }
}

/// (offset, digest) of the last record before `st.end`, found from the sparse index.
pub(crate) fn last_record(log: &Log, st: &State) -> Result<Option<(u64, ChainValue)>> {
    if st.records == 0 {
        return Ok(None);
    }
    let start = st.sparse.last().map_or(format::HEADER_LEN as u64, |&(_, off)| off);
    let mut sc = crate::scan::Scanner::new(
        st.medium.source(),
        start,
        st.end,
        st.header.salt(),
        format::MAX_PAYLOAD_LEN,
    );
    let mut last = None;
    loop {
        match sc.next_item().map_err(|e| Error::io(log.display(), "read", e))? {
            crate::scan::Item::Record(off, rec) => last = Some((off, chain::digest(rec.bytes))),
            crate::scan::Item::End => return Ok(last),
            crate::scan::Item::Bad(off, _) => {
                return Err(log.damaged(off, 0, "the record no longer matches its checksum"))
            }
        }
    }
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

/// Parse a snapshot's JSON.
pub fn parse(text: &[u8], display: &str) -> Result<Snapshot> {
    let snap: Snapshot = serde_json::from_slice(text).map_err(|e| Error::SnapshotMismatch {
        path: display.into(),
        reason: format!("not a snapshot: {e}"),
    })?;
    if snap.format != FORMAT || snap.version != VERSION {
        return Err(Error::SnapshotMismatch {
            path: display.into(),
            reason: format!(
                "not a memcommit snapshot of version {VERSION} ({} {})",
                snap.format, snap.version
            ),
        });
    }
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
    snap: Snapshot,
    file: &dyn ReadAt,
    file_len: u64,
    header: &FileHeader,
    display: &str,
) -> Result<Restored> {
    let mismatch = |reason: String| Error::SnapshotMismatch { path: display.into(), reason };
    if snap.store_id != seal::hex(&header.store_id) {
        return Err(mismatch(format!(
            "the snapshot is of store {}, the log is store {}",
            snap.store_id,
            seal::hex(&header.store_id)
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
    let parts = Parts {
        kinds: snap.kinds.clone(),
        tasks: snap.tasks.clone(),
        tags: snap.tags.clone(),
        tagsets: snap.tagsets.clone(),
        finished: snap.finished.clone(),
        memories,
        entities: snap.entities.iter().map(|(k, o, l)| (k.clone().into_bytes(), *o, *l)).collect(),
        seals,
    };
    let index = Index::from_parts(parts).map_err(mismatch)?;
    Ok(Restored {
        index,
        end: snap.end,
        lsn: snap.lsn,
        records: snap.records,
        sparse: snap.sparse.clone(),
        chain,
    })
}
