//! Replicas: a log in RAM that follows another log's bytes.
//!
//! One process owns a log file and runs every commit; other processes keep a replica: a RAM log
//! with the same header (so the same store id, salt and chain), fed the owner's records as raw
//! bytes (`read_raw` on the owner, `apply_raw` on the replica). A replica refuses commits of its
//! own (it is read-only); it checks each record's framing, checksum and LSN order exactly as
//! replay does, and applies only whole commits.

use std::sync::Arc;

use crate::engine::log::{Log, Options};
use crate::engine::state::{Medium, SPARSE_EVERY};
use crate::error::{Error, Result};
use crate::format::{self, FileHeader, ParseError, HEADER_LEN};
use crate::recovery::lsn_follows;
use crate::recovery::scan::Item;

impl Log {
    /// The log's 64-byte file header.
    pub fn header_bytes(&self) -> [u8; HEADER_LEN] {
        self.state.read().header.encode()
    }

    /// A read-only RAM log with `header` (another log's `header_bytes`), empty, to be fed with
    /// `apply_raw`.
    pub fn replica(header: &[u8], opts: Options) -> Result<Arc<Log>> {
        let header =
            FileHeader::decode(header).map_err(|reason| Error::invalid("header", reason.to_string()))?;
        Log::memory_with(header, Options { read_only: true, ..opts })
    }

    /// A RAM log with `header` that takes both another writer's raw records (`apply_raw`) and
    /// commits of its own, whose records the caller copies to the shared log (`read_raw`): the
    /// client's copy of a store whose records live in a database, where each commit is run
    /// here, under the database's lock, after the records before it were applied.
    pub fn follower(header: &[u8], opts: Options) -> Result<Arc<Log>> {
        let header =
            FileHeader::decode(header).map_err(|reason| Error::invalid("header", reason.to_string()))?;
        Log::memory_with(header, Options { read_only: false, ..opts })
    }

    /// Where a log in RAM ends, and its LSN there: what `raw_since` later reads from.
    pub fn ram_end(&self) -> Result<(u64, u64)> {
        let st = self.state.read();
        self.check_open(&st)?;
        match st.medium {
            Medium::Memory(_) => Ok((st.end, st.lsn)),
            Medium::File(_) => Err(Error::invalid("ram_end", "only a log in RAM")),
        }
    }

    /// The bytes of a log in RAM from `offset` (an end `ram_end` gave, so the end of a commit)
    /// to its end: the records committed since, whole commits, without a scan for where they
    /// start.
    pub fn raw_since(&self, offset: u64) -> Result<Vec<u8>> {
        let st = self.state.read();
        self.check_open(&st)?;
        let Medium::Memory(v) = &st.medium else {
            return Err(Error::invalid("raw_since", "only a log in RAM"));
        };
        if offset < HEADER_LEN as u64 || offset > st.end {
            return Err(Error::invalid(
                "offset",
                format!("{offset} is outside the log's records (bytes {HEADER_LEN} to {})", st.end),
            ));
        }
        Ok(v[offset as usize..st.end as usize].to_vec())
    }

    /// The bytes of whole commits after LSN `after`, at least one commit when there is one and
    /// about `max_bytes` at most; with the LSN of their last record (`after` when none).
    pub fn read_raw(&self, after: u64, max_bytes: usize) -> Result<(Vec<u8>, u64)> {
        self.read_raw_upto(after, max_bytes, u64::MAX)
    }

    /// `read_raw`, of the commits that end at or below LSN `upto` only: a server answers a
    /// follower with what its last group commit made durable, while the next one is written.
    pub fn read_raw_upto(&self, after: u64, max_bytes: usize, upto: u64) -> Result<(Vec<u8>, u64)> {
        let st = self.state.read();
        self.check_open(&st)?;
        let start = st.scan_start(after).1;
        let mut sc = st.records_from(start);
        let (mut out, mut kept, mut last) = (Vec::new(), 0, after);
        loop {
            match sc.next_item().map_err(|e| Error::io(self.display(), "read", e))? {
                Item::Record(_, rec) if rec.lsn > upto => break,
                Item::Record(_, rec) if rec.lsn > after => {
                    out.extend_from_slice(rec.bytes);
                    if rec.closes_commit(st.header.dense_from) {
                        (kept, last) = (out.len(), rec.lsn);
                        if out.len() >= max_bytes {
                            break;
                        }
                    }
                }
                Item::Record(..) => {}
                Item::End => break,
                Item::Bad(offset, _) => {
                    return Err(self.damaged(offset, last + 1, "the record no longer matches its checksum"))
                }
            }
        }
        out.truncate(kept);
        Ok((out, last))
    }

    /// Move the header's `dense_from` up to `dense_from`, on a log in RAM whose records are all
    /// at or below it (a compacted copy, to which the records committed after it are then
    /// added as records of its compacted part: see `compacted_copy`). The header's bytes are
    /// rewritten and the chain starts again from them (they seed it).
    pub fn raise_dense_from(&self, dense_from: u64) -> Result<()> {
        let mut st = self.state.write();
        self.check_open(&st)?;
        if !matches!(st.medium, Medium::Memory(_)) {
            return Err(Error::invalid("dense_from", "only a log in RAM takes a new header"));
        }
        if dense_from < st.header.dense_from || st.lsn > dense_from {
            return Err(Error::invalid(
                "dense_from",
                format!(
                    "{dense_from} is below the header's {} or the head LSN {}; it may only rise, \
                     over every record",
                    st.header.dense_from, st.lsn
                ),
            ));
        }
        st.header.dense_from = dense_from;
        let header = st.header.encode();
        if let Medium::Memory(v) = &mut st.medium {
            v[..HEADER_LEN].copy_from_slice(&header);
        }
        *self.ram_chain.lock() = (HEADER_LEN as u64, crate::format::chain::start(&header));
        Ok(())
    }

    /// The time (microseconds since the epoch) of the newest record `apply_raw` applied; 0
    /// when none was.
    pub fn applied_at(&self) -> i64 {
        self.state.read().applied_at
    }

    /// Apply the whole commits in `bytes` (records as `read_raw` returns them) to a replica.
    /// Returns the replica's LSN after them. Damage, another store's records, an LSN out of
    /// order or bytes that end inside a commit raise `Corrupt` and apply nothing.
    pub fn apply_raw(&self, bytes: &[u8]) -> Result<u64> {
        let mut st = self.state.write();
        self.check_open(&st)?;
        if !matches!(st.medium, Medium::Memory(_)) {
            return Err(Error::invalid("apply_raw", "only a replica (a log in RAM) takes raw records"));
        }
        let damaged = |offset: usize, lsn: u64, reason: String| Error::Corrupt {
            path: self.display().to_string(),
            offset: offset as u64,
            lsn,
            reason: format!("{reason} (in the raw records given to a replica, at byte {offset} of them)"),
        };
        // Check everything first: framing, checksums, LSN order, whole commits.
        let (salt, dense_from) = (st.header.salt(), st.header.dense_from);
        let (mut off, mut prev, mut spans, mut at) = (0, st.lsn, Vec::new(), st.applied_at);
        while off < bytes.len() {
            let rec = match format::parse_record(&bytes[off..], salt, format::MAX_PAYLOAD_LEN) {
                Ok(r) => r,
                Err(ParseError::Incomplete) => {
                    return Err(damaged(off, prev + 1, "a record is cut short".into()))
                }
                Err(ParseError::Invalid(r)) => return Err(damaged(off, prev + 1, r.into())),
            };
            if !lsn_follows(prev, rec.lsn, dense_from) {
                return Err(damaged(off, prev + 1, format!("LSN {} follows LSN {prev}", rec.lsn)));
            }
            spans.push((off, rec.bytes.len(), rec.lsn, rec.closes_commit(dense_from)));
            (prev, at) = (rec.lsn, rec.at);
            off += rec.bytes.len();
        }
        if spans.last().is_some_and(|s| !s.3) {
            return Err(damaged(bytes.len(), prev + 1, "the raw records end inside a commit".into()));
        }
        // Then apply, all or nothing.
        let st = &mut *st;
        let base = st.end;
        let mark = st.index.mark();
        let mut undo = Vec::new();
        for &(off, len, lsn, _) in &spans {
            let rec = format::view_trusted(&bytes[off..off + len]);
            if let Err(reason) = st.index.apply(&rec, base + off as u64, Some(&mut undo)) {
                st.index.rollback(mark, &mut undo);
                return Err(damaged(off, lsn, reason.to_string()));
            }
        }
        for &(off, _, lsn, ends) in &spans {
            if st.records.is_multiple_of(SPARSE_EVERY) {
                st.sparse.push((lsn, base + off as u64));
            }
            st.records += 1;
            if ends {
                st.lsn = lsn;
                st.note_commit();
            }
        }
        if let Medium::Memory(v) = &mut st.medium {
            v.extend_from_slice(bytes);
        }
        st.end = base + bytes.len() as u64;
        st.applied_at = at;
        st.index.finish_replay();
        Ok(st.lsn)
    }
}
