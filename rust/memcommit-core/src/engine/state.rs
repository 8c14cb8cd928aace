//! The open log's state behind its lock (`State`) and where its bytes live (`Medium`): shared
//! by open and replay, the commit path, reads, seals, saving and compaction.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::engine::appender::FileAppender;
use crate::format::{FileHeader, HEADER_LEN};
use crate::recovery::scan::{ReadAt, Scanner};
use crate::state::index::{Index, Undo};

/// Where the log's bytes are: a file (through its appender) or a buffer in RAM.
pub(crate) enum Medium {
    File(Arc<FileAppender>),
    Memory(Vec<u8>),
}

impl Medium {
    pub(crate) fn source(&self) -> &(dyn ReadAt + Sync) {
        match self {
            Medium::File(f) => &**f,
            Medium::Memory(v) => v,
        }
    }
}

/// What the state lock guards: the header, the bytes, the index over them and where the log
/// ends. Replay builds it, the writer advances it, reads look it up.
pub(crate) struct State {
    pub(crate) header: FileHeader,
    pub(crate) medium: Medium,
    pub(crate) index: Index,
    /// Offset after the last complete commit.
    pub(crate) end: u64,
    /// LSN of the last complete commit.
    pub(crate) lsn: u64,
    /// Records in the log.
    pub(crate) records: u64,
    /// Every 1024th record: (LSN, offset), to start `records(after=)` near the right place.
    pub(crate) sparse: Vec<(u64, u64)>,
    pub(crate) closed: bool,
    pub(crate) buf: Vec<u8>,
    pub(crate) undo: Vec<Undo>,
    /// Last LSNs of the newest `SEAL_WINDOW` commits, oldest first: a seal covers one.
    pub(crate) recent_commits: VecDeque<u64>,
    /// Records the index file on disk covers, as far as this store knows (0: none).
    pub(crate) indexed_records: u64,
    /// Why the log was closed, when its owner did not close it (see `Error::Closed`).
    pub(crate) closed_why: Option<String>,
    /// The log is known durable before this offset (a writer's clean close said so): damage
    /// there is never a torn write (see `format::CleanClose`).
    pub(crate) durable_floor: u64,
    /// The time of the newest record `apply_raw` applied (microseconds; 0: none yet).
    pub(crate) applied_at: i64,
}

/// One sparse-index point every this many records.
pub(crate) const SPARSE_EVERY: u64 = 1024;

impl State {
    /// The LSN the next record follows: the head, or the header's `dense_from` when that is
    /// past it (a compacted copy whose last records were not kept ends below it, and LSNs up
    /// to `dense_from` are the compacted records').
    pub(crate) fn lsn_base(&self) -> u64 {
        self.lsn.max(self.header.dense_from)
    }

    /// The state of a log with a header and no records yet, its bytes in `medium`.
    pub(crate) fn empty(header: FileHeader, medium: Medium) -> State {
        State {
            header,
            medium,
            index: Index::new(),
            end: HEADER_LEN as u64,
            lsn: 0,
            records: 0,
            sparse: Vec::new(),
            closed: false,
            buf: Vec::new(),
            undo: Vec::new(),
            recent_commits: VecDeque::from([0]),
            indexed_records: 0,
            closed_why: None,
            durable_floor: 0,
            applied_at: 0,
        }
    }

    /// Where to start reading for the records after LSN `after`: the sparse index's nearest
    /// recorded record at or before `after + 1` (the header's end when none), as (the LSN
    /// before it, its offset).
    pub(crate) fn scan_start(&self, after: u64) -> (u64, u64) {
        crate::recovery::scan::scan_start(&self.sparse, after)
    }

    /// A scanner over the committed records from byte `start` (where a record begins).
    pub(crate) fn records_from(&self, start: u64) -> Scanner<'_, dyn ReadAt + '_> {
        Scanner::new(
            self.medium.source(),
            start,
            self.end,
            self.header.salt(),
            crate::format::MAX_PAYLOAD_LEN,
        )
    }

    /// Remember the newest commit for seals (`SEAL_WINDOW` of them).
    pub(crate) fn note_commit(&mut self) {
        if self.recent_commits.len() == crate::format::seal::SEAL_WINDOW {
            self.recent_commits.pop_front();
        }
        self.recent_commits.push_back(self.lsn);
    }
}
