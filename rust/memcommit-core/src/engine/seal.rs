//! Seals on an open log: writing them (by hand and automatically) and checking the chain
//! through the log with the state lock released. The seal payload and the check itself are
//! in `format::seal`, the check in `recovery::verify`.

use std::io;
use std::sync::Arc;

use crate::format;
use crate::format::chain::ChainValue;
use crate::format::seal::{SealEntry, SealKey, SEAL_PAYLOAD_LEN};
use crate::recovery::verify::{check, CheckOptions, Checked, Failure, Source, Start};

use crate::engine::chainer;
use crate::engine::log::{AutoSeal, Log};
use crate::engine::state::{Medium, State};
use crate::error::{Error, Result};
use crate::recovery::scan;

/// An automatic seal waits for the chain thread when it has at most this much left to hash
/// (a few microseconds), so small commits are sealed exactly every N records.
const AUTO_SEAL_WAIT_BYTES: u64 = 64 << 10;

/// Where a check reads from once the state lock is released.
enum Owned {
    File(Arc<crate::engine::appender::FileAppender>),
}

impl Log {
    /// The chain through the newest commit (waits for the chain thread to get there).
    pub(crate) fn chain_to_end(&self, st: &State) -> Result<(u64, ChainValue)> {
        let fail = |e: String| Error::io(&self.display, "hash the chain of", io::Error::other(e));
        match &st.medium {
            Medium::File(a) => {
                let c = self.chainer.get_or_init(|| chainer::Chainer::start(a.clone(), &st.header, st.end));
                Ok((st.lsn, c.value(st.end).map_err(fail)?))
            }
            Medium::Memory(v) => {
                let mut rc = self.ram_chain.lock();
                let (pos, value) = &mut *rc;
                if *pos < st.end {
                    *value = chainer::extend(v, &st.header, *value, *pos, st.end)
                        .map_err(|e| fail(e.to_string()))?;
                    *pos = st.end;
                }
                Ok((st.lsn, *value))
            }
        }
    }

    /// The chain through the newest commit already hashed: (the offset after it, its last LSN,
    /// value). Never waits for a file log's chain thread.
    fn chain_hashed(&self, st: &State) -> Result<chainer::CommitEnd> {
        match (self.chainer.get(), &st.medium) {
            (Some(c), Medium::File(_)) => c
                .newest_commit_end()
                .map_err(|e| Error::io(&self.display, "hash the chain of", io::Error::other(e))),
            _ => {
                let (lsn, value) = self.chain_to_end(st)?;
                Ok((st.end, lsn, value))
            }
        }
    }

    /// Write a seal over every record committed so far (a one-record commit of its own), and
    /// return it once it is durable as the durability mode promises.
    pub fn seal(&self, key: Option<&SealKey>, at: i64) -> Result<SealEntry> {
        self.check_not_holding("seal")?;
        let mut st = self.state.write();
        self.check_writer(&st)?;
        let (lsn, value) = self.chain_to_end(&st)?;
        let seal = crate::engine::commit::append_seal(self, &mut st, lsn, &value, key, at)?;
        let end = st.end;
        drop(st);
        self.wait_durable(end)?;
        Ok(seal)
    }

    /// After a commit: append an automatic seal if one is due. Never waits for the chain
    /// thread unless it is more than a commit behind.
    pub(crate) fn auto_seal_after_commit(&self, st: &mut State, at: i64) -> Result<()> {
        let Some(AutoSeal { every, key }) = *self.auto_seal.lock() else { return Ok(()) };
        let (last, last_record) = st.index.seals().last().map_or((0, 0), |s| (s.lsn, s.record_lsn));
        if st.lsn.saturating_sub(last_record) < every {
            return Ok(());
        }
        // When little is left to hash (small commits), wait for it and cover the newest commit.
        // Otherwise cover the newest commit the chain thread has hashed, if it is one of the
        // last SEAL_WINDOW commits; if it has hashed nothing new, try again after the next
        // commit; wait only when it falls out of the window.
        let (end, lsn, value) = self.chain_hashed(st)?;
        let oldest = st.recent_commits.front().copied().unwrap_or(0);
        let found = if st.end - end <= AUTO_SEAL_WAIT_BYTES {
            self.chain_to_end(st)?
        } else if lsn >= oldest && lsn > last {
            (lsn, value)
        } else if lsn >= oldest {
            return Ok(());
        } else {
            self.auto_seal_waits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.chain_to_end(st)?
        };
        crate::engine::commit::append_seal(self, st, found.0, &found.1, key.as_ref(), at)?;
        Ok(())
    }

    /// Turn automatic sealing on (`Some`) or off.
    pub fn set_auto_seal(&self, auto: Option<AutoSeal>) -> Result<()> {
        let st = self.state.read();
        self.check_writer(&st)?;
        if let Some(a) = &auto {
            if a.every == 0 {
                return Err(Error::invalid("every", "must be a positive number of records"));
            }
        }
        *self.auto_seal.lock() = auto;
        Ok(())
    }

    /// How many automatic seals had to wait for the chain thread (it was more than a commit
    /// behind the writer).
    pub fn auto_seal_waits(&self) -> u64 {
        self.auto_seal_waits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The seals of the log, oldest first.
    pub fn seals(&self) -> Result<Vec<SealEntry>> {
        let st = self.state.read();
        self.check_open(&st)?;
        Ok(st.index.seals().to_vec())
    }

    fn failure(&self, f: Failure) -> Error {
        f.into_error(&self.display, |offset, lsn, reason| self.damaged(offset, lsn, &reason))
    }

    /// Run a check from `start` to `end` with the state lock released (a file) or held (RAM).
    fn run_check(
        &self,
        st: parking_lot::RwLockReadGuard<'_, State>,
        start: impl FnOnce(&dyn crate::recovery::scan::ReadAt) -> Result<Start>,
        end: u64,
        opts: CheckOptions<'_>,
    ) -> Result<Checked> {
        let (salt, dense_from, version) = (st.header.salt(), st.header.dense_from, st.header.version);
        let owned = match &st.medium {
            Medium::File(a) => Some(Owned::File(a.clone())),
            Medium::Memory(_) => None,
        };
        let result = match owned {
            Some(Owned::File(a)) => {
                drop(st);
                let start = start(&*a)?;
                check(&Source { src: &*a, salt, dense_from, end, version }, start, opts)
            }
            None => {
                let src = st.medium.source();
                let start = start(src)?;
                check(&Source { src, salt, dense_from, end, version }, start, opts)
            }
        };
        result.map_err(|f| self.failure(f))
    }

    /// Recheck the newest seal, hashing only the records since the seal before it.
    pub fn check_newest_seal(&self, key: Option<&SealKey>) -> Result<(SealEntry, Checked)> {
        let st = self.state.read();
        self.check_open(&st)?;
        let seals = st.index.seals();
        let Some(&newest) = seals.last() else {
            return Err(Error::invalid(
                "store",
                "the log holds no seal to check yet; write one with seal(store)",
            ));
        };
        if newest.keyed && key.is_none() {
            return Err(Error::invalid(
                "key",
                format!("the newest seal (LSN {}) is keyed: pass its key to check it", newest.record_lsn),
            ));
        }
        let prev = seals.len().checked_sub(2).map(|i| seals[i]);
        let first = match prev {
            Some(p) => Some(offset_after(self, &st, p.lsn)?),
            None => None,
        };
        let end = newest.offset + (format::RECORD_OVERHEAD + SEAL_PAYLOAD_LEN) as u64;
        let start = move |src: &dyn crate::recovery::scan::ReadAt| -> Result<Start> {
            match (prev, first) {
                (Some(p), Some(offset)) => Ok(Start { offset, value: p.chain, lsn: p.lsn }),
                _ => Start::at_header(src).map_err(|e| Error::io(&self.display, "read", e)),
            }
        };
        let opts = CheckOptions { key, only: Some(newest.record_lsn), ..Default::default() };
        let done = self.run_check(st, start, end, opts)?;
        Ok((newest, done))
    }

    /// Recompute the chain over the whole log, check every seal and collect references.
    pub fn verify<'a>(
        &self,
        key: Option<&'a SealKey>,
        progress: Option<&'a mut dyn FnMut(u64) -> Result<()>>,
    ) -> Result<Checked> {
        let st = self.state.read();
        self.check_open(&st)?;
        let end = st.end;
        let start = |src: &dyn crate::recovery::scan::ReadAt| {
            Start::at_header(src).map_err(|e| Error::io(&self.display, "read", e))
        };
        let mut done =
            self.run_check(st, start, end, CheckOptions { key, references: true, progress, only: None })?;
        let st = self.state.read();
        for (id, by, lsn, offset) in &done.references {
            if st.index.position(id).is_none() && !self.is_purged(id) {
                return Err(Error::ForgedReference {
                    path: self.display.clone(),
                    id: id.clone(),
                    by: by.clone(),
                    lsn: *lsn,
                    offset: *offset,
                });
            }
        }
        done.references = Vec::new();
        Ok(done)
    }
}

/// The offset of the first record after LSN `lsn`.
fn offset_after(log: &Log, st: &State, lsn: u64) -> Result<u64> {
    scan::offset_after(st.medium.source(), &st.sparse, st.header.salt(), st.end, lsn)
        .map_err(|e| Error::io(log.display(), "read", e))?
        .map_err(|b| log.damaged(b.offset, b.lsn, b.reason))
}
