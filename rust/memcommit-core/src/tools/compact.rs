//! Log compaction: rewrite the log into a new generation that replays to the same state.
//!
//! Up to the horizon (an LSN, default the head) the new log keeps exactly the records replay
//! needs, as their original bytes with their original LSNs: for each memory its last put, its
//! last status change and its last move (those after its last put: a put carries the whole
//! state); for each role entity its newest record; for each
//! finished task one task record. Every record after the horizon is kept as it is. Seal records
//! are not kept (a seal vouches for the old log's chain, which the manifest keeps); the new log
//! ends with a fresh seal over everything it holds. Retention purges memories that a policy
//! names and that have no record after the horizon: none of their records is kept.
//!
//! The new header has generation + 1 and `dense_from` = the old head's LSN: below it LSNs may
//! have gaps, and every record counts as a whole commit (its commit's other records may be
//! gone), so the kept bytes never need their flags changed.
//!
//! The protocol, crash-safe at every step: write the new log to `<path>.tmp-compact` and fsync
//! it; let the caller write the compaction manifest durably (`before_swap`); rename the new log
//! over the old one and fsync the directory. Killed before the rename, the store reopens to the
//! old generation (the writer's open removes the temp file, and the caller drops a manifest
//! entry whose generation the log does not have); after it, to the new one.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hashbrown::HashSet;

use crate::engine::generation::Frozen;
use crate::engine::log::Log;
use crate::error::{Error, Result};
use crate::format::chain::{self, ChainValue};
use crate::format::memory::Tier;
use crate::format::seal::{self, SealEntry};
use crate::format::{self, encode_record, FileHeader, Op, FLAG_COMMIT_END, HEADER_LEN};
use crate::recovery::scan::Item;
use crate::state::index::{Index, NO_OFFSET};
use crate::vfs::{self, Open, Writer};

/// Which memories retention purges (those with no record after the horizon).
#[derive(Clone, Debug, Default)]
pub struct Retention {
    /// Memories in the archive tier whose last move is at least this many µs old.
    pub archived_older_than_us: Option<i64>,
    /// Memories of a kind created at least this many µs ago.
    pub kinds_after_us: Vec<(String, i64)>,
    /// Memories named by id (policies evaluated by the caller).
    pub ids: Vec<String>,
    /// "Now" for the ages, µs since the epoch.
    pub now_us: i64,
}

/// What a compaction did: what its plan said, and the swap of generations.
#[derive(Clone, Debug)]
pub struct Compacted {
    /// What it kept, purged and reclaimed (what `Log::compaction_plan` foretold).
    pub plan: Plan,
    /// The old log's generation.
    pub old_generation: u64,
    /// The new log's generation.
    pub generation: u64,
    /// The old log's last LSN and its chain value there.
    pub old_lsn: u64,
    /// The old log's final chain value.
    pub old_chain: ChainValue,
    /// The old log's seals.
    pub old_seals: Vec<SealEntry>,
    /// The new log's seal (none in a copy made without one: `Log::compacted_copy`).
    pub seal: Option<SealEntry>,
}

/// What a compaction keeps, purges and reclaims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The horizon LSN.
    pub horizon: u64,
    /// Records in the old log.
    pub before: u64,
    /// Records in the new log (its new seal included).
    pub after: u64,
    /// Bytes of the old log.
    pub bytes_before: u64,
    /// Bytes of the new log.
    pub bytes_after: u64,
    /// Ids purged by retention.
    pub purged: Vec<String>,
}

/// What a compaction keeps: its horizon, who retention purges, and the offsets of the
/// records replay needs up to the horizon (sorted).
struct Selection {
    horizon: u64,
    purged: Vec<String>,
    keep: Vec<u64>,
}

/// The caller's part of the protocol.
pub trait Hooks {
    /// Bytes of the old log read so far, of `total`. An error stops the compaction there (the
    /// old log stays, the copy is removed): how an interrupt ends it.
    fn progress(&mut self, _done: u64, _total: u64) -> Result<()> {
        Ok(())
    }
    /// The new log is written and durable; write the manifest durably now. An error aborts
    /// the compaction (the old log stays).
    fn before_swap(&mut self, done: &Compacted) -> Result<()>;
    /// A named step of the protocol was reached (for crash tests: kill the process here).
    fn step(&mut self, _name: &str) -> Result<()> {
        Ok(())
    }
}

/// The index as it stood after LSN `horizon` (without the older records' history: only the
/// newest records are kept, and this index is thrown away after the selection).
fn index_at(log: &Log, st: &Frozen<'_>, horizon: u64) -> Result<Index> {
    let mut idx = Index::without_history();
    let mut sc = st.records();
    loop {
        match sc.next_item().map_err(|e| Error::io(log.display(), "read", e))? {
            Item::Record(_, rec) if rec.lsn > horizon => break,
            Item::Record(off, rec) => {
                idx.apply(&rec, off, None).map_err(|reason| log.damaged(off, rec.lsn, reason))?
            }
            Item::End => break,
            Item::Bad(off, _) => {
                return Err(log.damaged(off, 0, "the record no longer matches its checksum"))
            }
        }
    }
    Ok(idx)
}

fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_owned()).unwrap_or_default();
    name.push(".tmp-compact");
    path.with_file_name(name)
}

impl Log {
    /// Compact the log (see the module documentation). Commits wait until it is done; reads
    /// do not. On
    /// success returns the report and the store reopened on the new generation (this `Log`
    /// is closed; the OS lock passes to the new one without a gap).
    pub fn compact(
        &self,
        horizon: Option<u64>,
        retention: &Retention,
        at: i64,
        hooks: &mut dyn Hooks,
    ) -> Result<(Compacted, Arc<Log>)> {
        // Commits wait (they take the lock for writing); reads go on beside the rewrite.
        let st = self.freeze_commits()?;
        let display = self.display().to_string();
        let Some(path) = self.file_path().map(Path::to_path_buf) else {
            return Err(Error::invalid("store", "a store in RAM keeps no log file to compact"));
        };
        if !st.in_file() {
            return Err(Error::invalid("store", "a store in RAM keeps no log file to compact"));
        }
        let (lsn, end, old_header) = (st.lsn(), st.end(), *st.header());
        let sel = self.select(&st, horizon, retention)?;

        // Write the new generation.
        let tmp = temp_path(&path);
        let header = FileHeader {
            version: format::FORMAT_VERSION,
            store_id: old_header.store_id,
            generation: old_header.generation + 1,
            dense_from: lsn,
        };
        let result = (|| -> Result<Compacted> {
            let file = Open::create_truncate()
                .open(&tmp)
                .map_err(|e| Error::io_needing(&display, "create the compacted copy of", e, end + 4096))?;
            let mut out = BufWriter::with_capacity(1 << 20, Writer::new(&file));
            // At most the old log's bytes and a seal: what a full disk must make room for.
            let room = end + 4096;
            let werr = |e: io::Error| Error::io_needing(&display, "write the compacted copy of", e, room);
            let done = self.write_generation(&st, &sel, &header, Some(at), &mut *hooks, &mut |bytes| {
                out.write_all(bytes).map_err(werr)
            })?;
            out.into_inner().map_err(|e| werr(e.into_error()))?;
            file.sync_all()
                .map_err(|e| Error::io_needing(&display, "fsync the compacted copy of", e, room))?;
            hooks.progress(end, end)?;
            hooks.step("new-log-written")?;
            Ok(done)
        })()
        .and_then(|done| {
            hooks.before_swap(&done)?;
            hooks.step("manifest-written")?;
            Ok(done)
        });
        let done = match result {
            Ok(d) => d,
            Err(e) => {
                let _ = vfs::remove_file(&tmp);
                return Err(e);
            }
        };
        vfs::rename(&tmp, &path).map_err(|e| {
            let _ = vfs::remove_file(&tmp);
            Error::io(&display, "rename the compacted log over", e)
        })?;
        // From here the new generation is the log, and the old one takes no more commits (they
        // wait for `st` until it retires). Until the directory is fsynced a power loss may
        // bring the old one back: if that fails, going on with the new one could acknowledge
        // commits a power loss then takes, so the store stops, as after any failed fsync, and
        // the next open goes on from what the directory holds.
        if let Err(e) = vfs::sync_dir(&path) {
            let error = Error::io(&display, "fsync the directory of", e);
            st.retire_because(format!(
                "log compaction renamed generation {} into place, but then failed: {error}; \
                 whether a power loss keeps the rename is unknown, so this store takes no more \
                 calls: reopen it",
                header.generation
            ));
            return Err(error);
        }
        st.retire(header.generation);
        hooks.step("renamed")?;
        let reopened = self.reopen_next(&path)?;
        reopened.add_purged(&done.plan.purged);
        Ok((done, reopened))
    }
}

impl Log {
    /// The new generation a compaction would write (header, kept records, seal), made in RAM
    /// and returned instead of replacing this log: for an engine whose records live elsewhere
    /// (a database), which swaps them itself. Works on any log, a RAM follower included;
    /// commits wait while it reads. Returns the report and the new generation's bytes.
    ///
    /// With `at` None the copy ends without a seal: its header's `dense_from` is this log's
    /// head, so the records committed after it can follow in the new generation as they are
    /// (LSNs above `dense_from` are consecutive), and a seal after them covers everything.
    pub fn compacted_copy(
        &self,
        horizon: Option<u64>,
        retention: &Retention,
        at: Option<i64>,
        hooks: &mut dyn Hooks,
    ) -> Result<(Compacted, Vec<u8>)> {
        let st = self.hold_still()?;
        let sel = self.select(&st, horizon, retention)?;
        let old = *st.header();
        let header = FileHeader {
            version: format::FORMAT_VERSION,
            store_id: old.store_id,
            generation: old.generation + 1,
            dense_from: st.lsn(),
        };
        let mut bytes = Vec::with_capacity(st.end() as usize / 2);
        let done = self.write_generation(&st, &sel, &header, at, hooks, &mut |b| {
            bytes.extend_from_slice(b);
            Ok(())
        })?;
        hooks.progress(st.end(), st.end())?;
        Ok((done, bytes))
    }

    /// Hand `out` the new generation's bytes in order: `header`, the records `sel` keeps, and
    /// a seal over them stamped `at` (the chain hashed on another thread meanwhile); no seal
    /// (and no hashing) when `at` is None.
    fn write_generation(
        &self,
        st: &Frozen<'_>,
        sel: &Selection,
        header: &FileHeader,
        at: Option<i64>,
        hooks: &mut dyn Hooks,
        out: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<Compacted> {
        let (lsn, end, old_header) = (st.lsn(), st.end(), *st.header());
        let old_seals = st.index().seals().to_vec();
        let hb = header.encode();
        let salt = header.salt();
        out(&hb)?;
        // The new log's chain is hashed on another thread, from batches of kept bytes (when
        // it gets a seal).
        let mut hashing = None;
        if at.is_some() {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
            let mut linker = chain::Linker::new(header, chain::start(&hb), 0);
            let hasher = std::thread::Builder::new()
                .name("memcommit-compact-chain".into())
                .spawn(move || {
                    for batch in rx {
                        linker.feed(&batch, 0, |_, _, _| {});
                    }
                    // The kept records are one unit, closed before the seal that covers them.
                    linker.finish();
                    linker.value()
                })
                .map_err(|e| Error::io(self.display(), "start the chain thread for", e))?;
            hashing = Some((tx, hasher));
        }
        let mut batch = Vec::new();
        let (mut after, mut written) = (0u64, HEADER_LEN as u64);
        let streamed = self.stream_kept(st, sel, &mut *hooks, |bytes| {
            out(bytes)?;
            if let Some((tx, _)) = &hashing {
                batch.extend_from_slice(bytes);
                if batch.len() >= 1 << 20 {
                    let _ = tx.send(std::mem::take(&mut batch));
                }
            }
            after += 1;
            written += bytes.len() as u64;
            Ok(())
        });
        let value = hashing.map(|(tx, hasher)| {
            let _ = tx.send(batch);
            drop(tx);
            hasher.join().expect("the chain thread does not panic")
        });
        let (before, last_lsn) = streamed?;
        // The old log's chain, for the manifest: the chain thread has been hashing it
        // meanwhile (a running store's is already current).
        let (old_lsn, old_chain) = st.chain_to_end()?;
        // The new log's seal, over everything it holds.
        let mut new_seal = None;
        if let (Some(at), Some(value)) = (at, value) {
            let buf = seal_record(salt, lsn + 1, at, last_lsn, &value);
            new_seal = Some(seal::decode(&format::view_trusted(&buf), written).expect("a seal just encoded"));
            out(&buf)?;
            written += buf.len() as u64;
            after += 1;
        }
        Ok(Compacted {
            plan: Plan {
                horizon: sel.horizon,
                before,
                after,
                bytes_before: end,
                bytes_after: written,
                purged: sel.purged.clone(),
            },
            old_generation: old_header.generation,
            generation: header.generation,
            old_lsn,
            old_chain,
            old_seals,
            seal: new_seal,
        })
    }
}

impl Log {
    /// What `compact` with these arguments would do, found without writing anything: the
    /// records it would keep and their bytes (its new seal included), the ids retention would
    /// purge. Works on a writer and on a read-only reader; commits (or a reader's refresh)
    /// wait while it reads the log, as during a compaction.
    pub fn compaction_plan(
        &self,
        horizon: Option<u64>,
        retention: &Retention,
        hooks: &mut dyn Hooks,
    ) -> Result<Plan> {
        let st = self.hold_still()?;
        if !st.in_file() {
            return Err(Error::invalid("store", "a store in RAM keeps no log file to compact"));
        }
        let (lsn, end) = (st.lsn(), st.end());
        let sel = self.select(&st, horizon, retention)?;
        let (mut after, mut bytes_after) = (1u64, HEADER_LEN as u64);
        let (before, last_lsn) = self.stream_kept(&st, &sel, hooks, |bytes| {
            after += 1;
            bytes_after += bytes.len() as u64;
            Ok(())
        })?;
        // The new seal's length does not depend on the chain value it carries.
        let salt = st.header().salt();
        bytes_after += seal_record(salt, lsn + 1, 0, last_lsn, &chain::start(&[0; HEADER_LEN])).len() as u64;
        hooks.progress(end, end)?;
        Ok(Plan { horizon: sel.horizon, before, after, bytes_before: end, bytes_after, purged: sel.purged })
    }

    /// Who retention purges (named by it, no record after the horizon) and which records up to
    /// the horizon replay needs (see the module documentation).
    fn select(&self, st: &Frozen<'_>, horizon: Option<u64>, retention: &Retention) -> Result<Selection> {
        let lsn = st.lsn();
        let horizon = horizon.unwrap_or(lsn);
        if horizon > lsn {
            return Err(Error::invalid(
                "horizon",
                format!("LSN {horizon} is past the newest LSN {lsn}; pass at most {lsn}"),
            ));
        }

        // Who is purged: named by retention, and no record after the horizon.
        let kinds: Vec<(u32, i64)> = retention
            .kinds_after_us
            .iter()
            .filter_map(|(k, age)| st.index().kinds.lookup(k).map(|id| (id, *age)))
            .collect();
        let named: HashSet<&str> = retention.ids.iter().map(String::as_str).collect();
        let mut purged: Vec<String> = Vec::new();
        for e in st.index().entries() {
            if e.lsn > horizon {
                continue;
            }
            let id = st.index().id_of(e);
            let archived = retention
                .archived_older_than_us
                .is_some_and(|age| e.tier == Tier::Archive && e.moved_at <= retention.now_us - age);
            let by_kind = kinds.iter().any(|&(k, age)| e.kind == k && e.created_at <= retention.now_us - age);
            if archived || by_kind || named.contains(id) {
                purged.push(id.to_string());
            }
        }
        let purged_set: HashSet<&str> = purged.iter().map(String::as_str).collect();

        // What replay needs up to the horizon: offsets of the records to keep.
        let owned;
        let idx: &Index = if horizon == lsn {
            st.index()
        } else {
            owned = index_at(self, st, horizon)?;
            &owned
        };
        let mut keep: Vec<u64> = Vec::with_capacity(idx.len() + 16);
        for e in idx.entries() {
            if purged_set.contains(idx.id_of(e)) {
                continue;
            }
            // A put carries the memory's whole state, so a status or move before its last put
            // is not needed (and would replay before the memory exists).
            keep.push(e.put_off);
            for off in [e.status_off, e.move_off] {
                if off != NO_OFFSET && off > e.put_off {
                    keep.push(off);
                }
            }
        }
        keep.extend(idx.entities().map(|(_, (off, _))| off));
        keep.sort_unstable();
        drop(purged_set);
        Ok(Selection { horizon, purged, keep })
    }

    /// Read the frozen log's records in order and hand `kept` the bytes of each one the new
    /// log keeps (see the module documentation). Returns how many records were read and the
    /// LSN of the last one kept.
    fn stream_kept(
        &self,
        st: &Frozen<'_>,
        sel: &Selection,
        hooks: &mut dyn Hooks,
        mut kept: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<(u64, u64)> {
        let end = st.end();
        let (mut before, mut last_lsn) = (0u64, 0u64);
        let mut tasks: HashSet<Vec<u8>> = HashSet::new();
        let mut next_keep = 0usize;
        let mut sc = st.records();
        let mut reported = 0;
        loop {
            let (off, rec) = match sc.next_item().map_err(|e| Error::io(self.display(), "read", e))? {
                Item::Record(off, rec) => (off, rec),
                Item::End => return Ok((before, last_lsn)),
                Item::Bad(off, _) => {
                    return Err(self.damaged(
                        off,
                        last_lsn + 1,
                        "the record no longer matches its checksum; nothing was compacted",
                    ))
                }
            };
            before += 1;
            while next_keep < sel.keep.len() && sel.keep[next_keep] < off {
                next_keep += 1;
            }
            let keep = match rec.op {
                Op::Seal => false,
                _ if rec.lsn > sel.horizon => true,
                Op::Task => tasks.insert(rec.key.to_vec()),
                _ => sel.keep.get(next_keep) == Some(&off),
            };
            if keep {
                kept(rec.bytes)?;
                last_lsn = rec.lsn;
            }
            if off - reported >= 4 << 20 {
                reported = off;
                hooks.progress(off, end)?;
            }
        }
    }
}

/// The seal record a compacted log ends with: over everything up to `last_lsn`, chain `value`.
fn seal_record(salt: u32, seal_lsn: u64, at: i64, last_lsn: u64, value: &ChainValue) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_record(&mut buf, Op::Seal, FLAG_COMMIT_END, 0, salt, seal_lsn, at, b"", |o| {
        seal::encode_payload(o, last_lsn, value, None)
    });
    buf
}
