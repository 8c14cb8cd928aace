//! The engine's side of log compaction, the generation swap: holding commits off while a new
//! generation is written from the old one (`Frozen`), retiring the old generation once the new
//! one is at its path, and opening the new one in its place (`Log::reopen_next`). Compaction
//! itself (what to keep, the protocol) is in `tools::compact`; it uses the log only through
//! these methods.

use std::cell::Cell;
use std::path::Path;
use std::sync::Arc;

use parking_lot::RwLockUpgradableReadGuard;

use crate::engine::log::Log;
use crate::engine::state::{Medium, State};
use crate::error::{Error, Result};
use crate::format::chain::ChainValue;
use crate::format::FileHeader;
use crate::recovery::scan::{ReadAt, Scanner};
use crate::state::index::Index;

/// An open writer's log with its commits held off: reads go on beside it (the state lock is
/// held upgradable), nothing is appended until it is dropped or `retire`d. What compaction
/// reads the old generation through.
pub(crate) struct Frozen<'a> {
    log: &'a Log,
    st: RwLockUpgradableReadGuard<'a, State>,
    _here: HeldHere,
}

thread_local! {
    /// The log whose commits this thread holds off (from `freeze_commits` or `hold_still` until
    /// the `Frozen` goes), as its address; 0 for none.
    static HOLDING: Cell<usize> = const { Cell::new(0) };
}

/// Marks this thread as holding a log's commits off while it lives.
struct HeldHere;

impl HeldHere {
    fn new(log: &Log) -> HeldHere {
        HOLDING.set(log as *const Log as usize);
        HeldHere
    }
}

impl Drop for HeldHere {
    fn drop(&mut self) {
        HOLDING.set(0);
    }
}

impl Log {
    /// Hold commits off (they wait for the state lock) and look at the log as it stands.
    /// Fails as a commit would on a log that is closed, read-only or failed.
    pub(crate) fn freeze_commits(&self) -> Result<Frozen<'_>> {
        let st = self.state.upgradable_read();
        self.check_writer(&st)?;
        Ok(Frozen { log: self, st, _here: HeldHere::new(self) })
    }

    /// Look at the log as it stands, commits (or a reader's refresh) held off, on a writer or
    /// a read-only reader: what a dry run of compaction reads, writing nothing.
    pub(crate) fn hold_still(&self) -> Result<Frozen<'_>> {
        let st = self.state.upgradable_read();
        self.check_open(&st)?;
        Ok(Frozen { log: self, st, _here: HeldHere::new(self) })
    }

    /// Refuse a write from the thread that holds this log's commits off: a log compaction's
    /// callback (its progress, its retention policy) writing to the store it compacts would
    /// wait for the compaction, which waits for the callback.
    pub(crate) fn check_not_holding(&self, what: &'static str) -> Result<()> {
        if HOLDING.get() == self as *const Log as usize {
            return Err(Error::invalid(
                what,
                "called from inside a log compaction of this store (its progress callback or \
                 retention policy), which holds its commits off until it ends: it would wait \
                 for itself; write once the compaction returns",
            ));
        }
        Ok(())
    }

    /// Close this log, retired by log compaction, and open the new generation at `path` in
    /// its place. The OS lock passes from this log to the new one without a gap; the ids
    /// purged so far and the automatic seal policy go on as they were.
    pub(crate) fn reopen_next(&self, path: &Path) -> Result<Arc<Log>> {
        let lock = self.take_lock_file();
        // Stops the flush timer and the chain thread.
        let _ = self.close();
        // The closed log's index is dead weight: free it before the new one is built, so the
        // peak is one index, not two.
        self.state.write().index = Index::new();
        let reopened = Log::open_inner(path, self.options().clone(), lock, None, &mut || Ok(()))?;
        reopened.add_purged(&self.purged.lock().iter().cloned().collect::<Vec<_>>());
        *reopened.auto_seal.lock() = *self.auto_seal.lock();
        Ok(reopened)
    }
}

impl Frozen<'_> {
    /// The file header.
    pub(crate) fn header(&self) -> &FileHeader {
        &self.st.header
    }

    /// The LSN of the last complete commit.
    pub(crate) fn lsn(&self) -> u64 {
        self.st.lsn
    }

    /// The offset after the last complete commit.
    pub(crate) fn end(&self) -> u64 {
        self.st.end
    }

    /// The index over every committed record.
    pub(crate) fn index(&self) -> &Index {
        &self.st.index
    }

    /// Whether the log's bytes are in a file (not in RAM).
    pub(crate) fn in_file(&self) -> bool {
        matches!(self.st.medium, Medium::File(_))
    }

    /// A scanner over the committed records, from the first.
    pub(crate) fn records(&self) -> Scanner<'_, dyn ReadAt + '_> {
        self.st.records_from(crate::format::HEADER_LEN as u64)
    }

    /// The chain through the newest commit (waits for the chain thread to get there).
    pub(crate) fn chain_to_end(&self) -> Result<(u64, ChainValue)> {
        self.log.chain_to_end(&self.st)
    }

    /// Mark the log closed for good, because log compaction put generation `next` at its path:
    /// a committer waiting for the lock gets `Closed` with this reason (and the binding goes on
    /// with the new generation) instead of appending to a file no longer at the path, being
    /// acknowledged, and being lost. (So its close writes nothing either: no index file for a
    /// generation that is gone.)
    pub(crate) fn retire(self, next: u64) {
        self.retire_because(format!(
            "log compaction replaced it with generation {next} while this call waited; nothing of \
             the call was written: call again on the store, which goes on with the new generation"
        ));
    }

    /// [`retire`](Self::retire) with another reason: the new generation is at the path, but
    /// the store cannot go on with it.
    pub(crate) fn retire_because(self, why: String) {
        let mut st = RwLockUpgradableReadGuard::upgrade(self.st);
        st.closed = true;
        st.closed_why = Some(why);
    }
}
