//! Saving an open log's state: the index file (written whole, then renamed into place) and
//! the snapshot. What the bytes are is `persist`'s; when and how durably they are written,
//! and what of the state they save, is the engine's.

use std::collections::VecDeque;
use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::engine::log::{temp_path, Log, Options};
use crate::engine::replay::replay;
use crate::engine::state::{Medium, State};
use crate::error::{Error, Result};
use crate::format::{self, chain, chain::ChainValue};
use crate::persist::{index_file, snapshot, SavedAt};
use crate::vfs;

impl Log {
    /// The state as a snapshot's JSON text.
    pub fn snapshot_json(&self) -> Result<String> {
        let st = self.state.read();
        self.check_open(&st)?;
        let at = self.saved_at(&st)?;
        // Copy out under the lock; build and write the JSON without it (commits go on).
        let p = st.index.parts();
        let sparse = st.sparse.clone();
        drop(st);
        snapshot::encode(&at, p, sparse)
    }

    /// Open with the snapshot in the file `snapshot` (see `open_with_snapshot`); every
    /// `SnapshotMismatch` names that file.
    pub fn open_with_snapshot_file(path: &Path, opts: Options, snapshot: &Path) -> Result<Arc<Log>> {
        Log::open_between(path, opts, Some(snapshot), &mut || Ok(()))
    }

    /// A follower (see `follower`) of the store whose log is `image` (its header, then its
    /// records: a store's rows, read from a database), with the index restored from
    /// `snapshot` (its JSON text; `name`, the snapshot's file, is what its errors name) after
    /// the checks an open with a snapshot makes against a log file, and only the records
    /// after the snapshot replayed. The chain goes on from the snapshot's value.
    pub fn follower_with_snapshot(
        image: Vec<u8>,
        opts: Options,
        snapshot: &[u8],
        name: &str,
    ) -> Result<Arc<Log>> {
        let snap = snapshot::parse(snapshot, name)?;
        let header = image.get(..format::HEADER_LEN).ok_or_else(|| {
            Error::invalid("image", format!("{} bytes is shorter than a log's header", image.len()))
        })?;
        let log = Log::follower(header, opts)?;
        let mut st = log.state.write();
        let len = image.len() as u64;
        let r = snapshot::restore(snap, &image, len, &st.header, log.display())?;
        st.medium = Medium::Memory(image);
        (st.index, st.end, st.lsn, st.records, st.sparse) = (r.index, r.end, r.lsn, r.records, r.sparse);
        let good_end = replay(&mut st, r.end, len, log.display(), &mut || Ok(()))?;
        if good_end < len {
            return Err(Error::Corrupt {
                path: log.display().to_string(),
                offset: good_end,
                lsn: st.lsn + 1,
                reason: "the records after the snapshot end inside a commit or are damaged".into(),
            });
        }
        st.index.finish_replay();
        st.recent_commits = VecDeque::from([st.lsn]);
        *log.ram_chain.lock() = (r.end, r.chain);
        drop(st);
        Ok(log)
    }

    /// Save the index to the index file now (see `persist::index_file`): whatever the log
    /// holds is made durable first, and the file is replaced whole or not at all. A writer's
    /// call; commits wait while it runs (about half a second for a million memories, fsync
    /// included), reads do not.
    pub fn write_index_file(&self) -> Result<()> {
        let st = self.state.read();
        self.check_writer(&st)?;
        self.write_index_file_locked(&st)
    }

    /// `write_index_file` for a caller that holds the state.
    ///
    /// The log is made durable first, whatever the durability mode: the index file is, and
    /// one that points at records a power loss can still take away would be read as true
    /// (only its last record is checked against the log when it is loaded).
    pub(crate) fn write_index_file_locked(&self, st: &State) -> Result<()> {
        let (Some(path), Medium::File(_)) = (self.file_path(), &st.medium) else {
            return Ok(());
        };
        self.sync_to(st.end)?;
        let dest = index_file::path_for(path);
        let fail = |e: io::Error| {
            let size = index_file::size_of(&st.index, &st.sparse);
            Error::io_needing(&dest.display().to_string(), "write the index file", e, size)
        };
        let at = self.saved_at(st)?;
        vfs::write_file_durably(&temp_path(path, "index"), &dest, |f| {
            index_file::write(f, &at, &st.index, &st.sparse)
        })
        .map_err(fail)
    }

    /// Where the log stands, as a saved state records it: the chain through the newest commit
    /// (waiting for the chain thread) and the last record.
    fn saved_at(&self, st: &State) -> Result<SavedAt> {
        let (lsn, chain) = self.chain_to_end(st)?;
        let last = last_record(self, st)?;
        Ok(SavedAt { header: st.header, lsn, chain, end: st.end, records: st.records, last })
    }
}

/// (offset, digest) of the last record before `st.end`, found from the sparse index.
fn last_record(log: &Log, st: &State) -> Result<Option<(u64, ChainValue)>> {
    if st.records == 0 {
        return Ok(None);
    }
    let start = st.sparse.last().map_or(format::HEADER_LEN as u64, |&(_, off)| off);
    let mut sc = st.records_from(start);
    let mut last = None;
    loop {
        match sc.next_item().map_err(|e| Error::io(log.display(), "read", e))? {
            crate::recovery::scan::Item::Record(off, rec) => last = Some((off, chain::digest(rec.bytes))),
            crate::recovery::scan::Item::End => return Ok(last),
            crate::recovery::scan::Item::Bad(off, _) => {
                return Err(log.damaged(off, 0, "the record no longer matches its checksum"))
            }
        }
    }
}
