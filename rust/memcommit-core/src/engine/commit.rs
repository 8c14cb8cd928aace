//! A commit in progress: commands become records under the writer lock, all or none.
//!
//! `Log::begin` takes the writer lock and checks `expect_lsn`; `Commit::push` checks a guard or
//! turns a command into a record, applies it to the index (so later guards see it) and streams
//! the records to the log in chunks of about a megabyte; `Commit::finish` marks the last
//! record COMMIT_END, writes the rest and publishes the commit. Dropping an unfinished commit
//! takes everything back: the index is rolled back and the bytes written so far are cut off
//! (they carry no COMMIT_END, so a crash before the cut leaves a torn commit that replay drops).

use parking_lot::RwLockWriteGuard;

use crate::engine::appender::{Arrival, Failure};
use crate::engine::log::Log;
use crate::engine::state::{Medium, State, SPARSE_EVERY};
use crate::error::{Error, GuardKind, GuardValue, Rejection, Result};
use crate::format::chain::ChainValue;
use crate::format::memory::{self, Command, PutState, Status};
use crate::format::seal::{self, SealEntry, SealKey};
use crate::format::{self, encode_record, Op};
use crate::state::index::{Index, Mark, Slot};
use crate::state::room::Room;

mod bulk;
pub use bulk::PutRun;

/// Records are written to the log in chunks of about this size while a large commit runs.
const CHUNK: usize = 1 << 20;

/// What a finished commit wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    /// LSN of its first record.
    pub first_lsn: u64,
    /// LSN of its last record.
    pub last_lsn: u64,
    /// The log offset after it, and after the automatic seal appended with it if one was due:
    /// durable once `Log::wait_durable(end)` returns.
    pub end: u64,
}

/// A commit holding the writer lock. See the module documentation.
pub struct Commit<'a> {
    log: &'a Log,
    st: RwLockWriteGuard<'a, State>,
    mark: Mark,
    /// Where the commit's first record goes.
    base: u64,
    /// Bytes of this commit already written to the log, before `st.buf`.
    flushed: u64,
    lsn: u64,
    at: i64,
    records: u64,
    done: bool,
    /// Counts this commit as on its way to the write queue until it queues (or gives up).
    arrival: Option<Arrival<'a>>,
    /// The dimension vectors must have, once this commit has looked it up (or set it).
    dims: Option<usize>,
    /// (put id, source) of each source its put named before the store held it
    /// ([`note_sources`]): the commit must make it.
    unresolved: Vec<(String, String)>,
}

impl Log {
    /// Start a commit: take the writer lock and check `expect_lsn`. `hint` is how many
    /// commands are coming (to reserve room).
    pub fn begin(&self, expect_lsn: Option<u64>, at: i64, hint: usize) -> Result<Commit<'_>> {
        self.check_not_holding("commit")?;
        let arrival = self.appender.as_ref().map(|a| a.arrive());
        let mut st = self.state.write();
        self.check_writer(&st)?;
        if let Some(want) = expect_lsn {
            if want != st.lsn {
                return Err(Error::Rejected(Rejection::new(
                    GuardKind::ExpectLsn,
                    None,
                    GuardValue::Lsn(want),
                    GuardValue::Lsn(st.lsn),
                )));
            }
        }
        if hint > 1 {
            st.index.reserve(hint.min(1 << 24));
        }
        st.buf.clear();
        st.undo.clear();
        Ok(Commit {
            mark: st.index.mark(),
            base: st.end,
            flushed: 0,
            lsn: st.lsn_base(),
            records: st.records,
            at,
            log: self,
            st,
            done: false,
            arrival,
            dims: None,
            unresolved: Vec::new(),
        })
    }
}

impl Log {
    /// Make room in the index for `puts` new memories that follow `after` others in a commit
    /// to come, as `begin` does for a commit of that many, ahead of it, and return the memory
    /// those `puts` will be written to, for [`Room::populate`] on another thread while the
    /// caller gathers them. Empty, and nothing done, when another thread holds the state (this
    /// never waits) or the log takes no writes.
    pub fn make_room(&self, after: usize, puts: usize) -> Room {
        let mut room = Room::new();
        if let Some(mut st) = self.state.try_write() {
            if self.check_writer(&st).is_ok() {
                let all = after.saturating_add(puts).min(1 << 24);
                st.index.reserve(all);
                st.index.add_room(after.min(all)..all, &mut room);
            }
        }
        room
    }
}

impl Commit<'_> {
    /// A hint that a command about memory `id` comes soon: start loading its slot of the id
    /// table, so that lookup is not a cache miss when it comes.
    pub fn prefetch(&self, id: &str) {
        self.st.index.prefetch(id.as_bytes());
    }

    /// Check a guard, or turn a command into a record and apply it. On an error the commit
    /// must be dropped (which takes it back).
    pub fn push<S: AsRef<str>>(&mut self, cmd: &Command<S>) -> Result<()> {
        self.log.validate(cmd)?;
        if let Command::Put(p) = cmd {
            if let Some(v) = &p.vector {
                self.check_dims(p.id.as_ref(), v.len())?;
            }
        }
        let st = &mut *self.st;
        let (key, slot) = match cmd {
            Command::Expect(x) => return check_guard(st, x, self.log),
            Command::Put(p) => {
                note_sources(&st.index, self.log, p, &mut self.unresolved);
                (p.id.as_ref(), st.index.lookup(p.id.as_ref().as_bytes()))
            }
            Command::SetStatus { id, .. } | Command::Move { id, .. } => {
                let slot = st.index.lookup(id.as_ref().as_bytes());
                if slot.pos.is_none() {
                    let what = match cmd {
                        Command::SetStatus { status: Status::Stale, .. } => "stale",
                        Command::SetStatus { .. } => "restore",
                        _ => "move",
                    };
                    return Err(unknown(id.as_ref(), what, self.log.is_purged(id.as_ref())));
                }
                (id.as_ref(), slot)
            }
            Command::FinishTask { task } => (task.as_ref(), Slot::default()),
        };
        // The previous record is not the commit's last: it can go to the log now.
        if st.buf.len() >= CHUNK {
            self.flush_chunk(true)?;
        }
        let st = &mut *self.st;
        self.lsn += 1;
        let (salt, lsn, at) = (st.header.salt(), self.lsn, self.at);
        let gap = gap_at(st, self.base + self.flushed + st.buf.len() as u64);
        let range = match cmd {
            Command::Put(p) => {
                let state = put_state(&st.index, slot, p, at);
                encode_record(&mut st.buf, Op::Put, 0, gap, salt, lsn, at, key.as_bytes(), |o| {
                    memory::encode_put(o, state, p)
                })
            }
            Command::SetStatus { status, reason, .. } => {
                encode_record(&mut st.buf, Op::Status, 0, gap, salt, lsn, at, key.as_bytes(), |o| {
                    memory::encode_status(o, *status, reason.as_ref().map(|r| r.as_ref()))
                })
            }
            Command::Move { tier, .. } => {
                encode_record(&mut st.buf, Op::Move, 0, gap, salt, lsn, at, key.as_bytes(), |o| {
                    o.push(*tier as u8)
                })
            }
            Command::FinishTask { .. } => {
                encode_record(&mut st.buf, Op::Task, 0, gap, salt, lsn, at, key.as_bytes(), |o| o.push(1))
            }
            Command::Expect(_) => unreachable!("handled above"),
        };
        let off = self.base + self.flushed + range.start as u64;
        let State { index, buf, undo, .. } = st;
        let rec = format::view_trusted(&buf[range]);
        index.apply_at(&rec, off, slot, Some(undo)).map_err(|reason| {
            Error::invalid(
                "record",
                format!("internal error: a record the writer built does not apply: {reason}"),
            )
        })
    }

    /// A vector must have the store's dimension: that of the vectors committed, or, in a store
    /// with none yet, of this commit's first.
    pub(crate) fn check_dims(&mut self, id: &str, got: usize) -> Result<()> {
        let version = self.st.header.version;
        if version < format::VECTOR_VERSION {
            return Err(Error::invalid(
                "vector",
                format!(
                    "the memory {id:?} has a vector, and {} is a format version {version} log, which \
                     cannot hold one; run `memcommit compact {}` once (it rewrites the log in the \
                     current format, version {}) and put it again",
                    self.log.display(),
                    self.log.display(),
                    format::FORMAT_VERSION
                ),
            ));
        }
        let want = match self.dims {
            Some(d) => d,
            None => self.log.search_state(&self.st)?.vector_dims().unwrap_or(got),
        };
        self.dims = Some(want);
        if got != want {
            return Err(Error::invalid(
                "vector",
                format!("the memory {id:?} has a vector of {got} values; this store's vectors have {want}"),
            ));
        }
        Ok(())
    }

    /// Append a record of `op` with `key` and the payload `payload` writes, and apply it (for
    /// records that are not memory commands: the roles' entities).
    pub(crate) fn push_raw(&mut self, op: Op, key: &[u8], payload: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
        if self.st.buf.len() >= CHUNK {
            self.flush_chunk(true)?;
        }
        let st = &mut *self.st;
        self.lsn += 1;
        let gap = gap_at(st, self.base + self.flushed + st.buf.len() as u64);
        let range = encode_record(&mut st.buf, op, 0, gap, st.header.salt(), self.lsn, self.at, key, payload);
        let off = self.base + self.flushed + range.start as u64;
        let State { index, buf, undo, .. } = st;
        index.apply(&format::view_trusted(&buf[range]), off, Some(undo)).map_err(|reason| {
            Error::invalid(
                "record",
                format!("internal error: a record the writer built does not apply: {reason}"),
            )
        })
    }

    /// Hand the records in the buffer to the log: queue them, and with `write_now` (a chunk
    /// of a large commit) write them to the file at once.
    fn flush_chunk(&mut self, write_now: bool) -> Result<()> {
        let st = &mut *self.st;
        let at = self.base + self.flushed;
        let mut out = Outlet { medium: &mut st.medium, sparse: &mut st.sparse, records: &mut self.records };
        if let Err(f) = out.hand_over(at, &st.buf, write_now) {
            return Err(self.log.failed(f));
        }
        self.flushed += st.buf.len() as u64;
        st.buf.clear();
        Ok(())
    }

    /// Mark the last record COMMIT_END, write what is left and publish the commit. Returns
    /// `None` for a commit that wrote nothing (only guards, which held).
    pub fn finish(mut self) -> Result<Option<Committed>> {
        check_sources(&self.st.index, self.log, &self.unresolved)?;
        if self.flushed == 0 && self.st.buf.is_empty() {
            self.done = true;
            return Ok(None);
        }
        let last = format::last_record_start(&self.st.buf);
        format::set_commit_end(&mut self.st.buf[last..], true);
        self.flush_chunk(false)?;
        if let Some(a) = &self.log.appender {
            a.count_commit();
        }
        self.arrival = None;
        let st = &mut *self.st;
        let first_lsn = st.lsn_base() + 1;
        st.records = self.records;
        st.end = self.base + self.flushed;
        st.lsn = self.lsn;
        st.undo.clear();
        if st.buf.capacity() > 4 * CHUNK {
            st.buf = Vec::new();
        }
        st.note_commit();
        if let Some(c) = self.log.chainer.get() {
            c.publish(st.end);
        }
        self.done = true;
        if let Err(e) = self.log.auto_seal_after_commit(st, self.at) {
            // The commit stands; the writer stops, as after any failure it cannot explain.
            self.log.poison(format!("automatic seal failed: {e}"), e.errno());
        }
        // The end covers the automatic seal too: whoever waits for the commit's durability
        // waits for the seal's, so the log never reports an LSN a crash could take back.
        Ok(Some(Committed { first_lsn, last_lsn: self.lsn, end: st.end }))
    }
}

impl Drop for Commit<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let st = &mut *self.st;
        let mark = self.mark;
        st.index.rollback(mark, &mut st.undo);
        st.sparse.retain(|&(_, off)| off < self.base);
        st.buf.clear();
        if self.flushed > 0 {
            // Cut off what this commit wrote. It carries no COMMIT_END, so even if the cut
            // fails (and the writer stops) replay drops it as a torn commit.
            match &mut st.medium {
                Medium::Memory(v) => v.truncate(self.base as usize),
                Medium::File(a) => {
                    if let Err(e) = a.truncate(self.base) {
                        self.log.poison(format!("could not cut off a refused commit: {e}"), e.raw_os_error());
                    }
                }
            }
        }
    }
}

fn unknown(id: &str, what: &str, purged: bool) -> Error {
    use crate::error::GuardValue as V;
    let actual = if purged { V::Purged } else { V::Exists(false) };
    let r = Rejection::new(GuardKind::UnknownId, Some(id), V::Exists(true), actual);
    let why = if purged {
        "it was purged by a retention policy during log compaction (see store.manifest())"
    } else {
        "the store has no memory with that id"
    };
    Error::Rejected(Rejection {
        reason: format!("cannot {what} memory {id:?}: {why}; nothing was written"),
        ..r
    })
}

/// Note the `sources` of put `p` that name no memory the store holds now and none log
/// compaction purged: [`Commit::finish`] refuses the commit unless a later put of the same
/// commit made them (`verify` would report any other as forged). Nothing to note while the
/// log trusts sources ([`Log::trust_sources`]).
pub(crate) fn note_sources<S: AsRef<str>>(
    index: &Index,
    log: &Log,
    p: &memory::PutCommand<S>,
    unresolved: &mut Vec<(String, String)>,
) {
    if p.sources.is_empty() || log.trusts_sources() {
        return;
    }
    let id = p.id.as_ref();
    for source in &p.sources {
        let source = source.as_ref();
        if source != id && index.position(source).is_none() && !log.is_purged(source) {
            unresolved.push((id.to_owned(), source.to_owned()));
        }
    }
}

/// The first source noted by [`note_sources`] that the commit did not make, refused.
fn check_sources(index: &Index, log: &Log, unresolved: &[(String, String)]) -> Result<()> {
    for (id, source) in unresolved {
        if index.position(source).is_some() || log.is_purged(source) {
            continue;
        }
        let r = Rejection::new(
            GuardKind::UnknownId,
            Some(source),
            GuardValue::Exists(true),
            GuardValue::Exists(false),
        );
        return Err(Error::Rejected(Rejection {
            reason: format!(
                "cannot put memory {id:?}: its sources name {source:?}, but neither the store nor \
                 this commit holds a memory with that id; nothing was written"
            ),
            ..r
        }));
    }
    Ok(())
}

fn refuse(kind: GuardKind, id: &str, expected: GuardValue, actual: GuardValue) -> Error {
    Error::Rejected(Rejection::new(kind, Some(id), expected, actual))
}

fn check_guard<S: AsRef<str>>(st: &State, x: &memory::Expect<S>, log: &Log) -> Result<()> {
    let id = x.id.as_ref();
    let e = st.index.get(id);
    // A purged memory does not exist: `exists=False` alone holds for it, and any other guard
    // fails saying it was purged.
    let absent_only = x.exists == Some(false) && x.status.is_none() && x.tier.is_none() && x.lsn.is_none();
    if e.is_none() && !absent_only && log.is_purged(id) {
        return Err(refuse(GuardKind::Exists, id, GuardValue::Exists(true), GuardValue::Purged));
    }
    if let Some(want) = x.exists {
        if want != e.is_some() {
            return Err(refuse(
                GuardKind::Exists,
                id,
                GuardValue::Exists(want),
                GuardValue::Exists(e.is_some()),
            ));
        }
    }
    if x.status.is_none() && x.tier.is_none() && x.lsn.is_none() {
        return Ok(());
    }
    let Some(e) = e else {
        return Err(refuse(GuardKind::Exists, id, GuardValue::Exists(true), GuardValue::Exists(false)));
    };
    if let Some(s) = x.status.filter(|s| *s != e.status) {
        return Err(refuse(GuardKind::Status, id, GuardValue::Status(s), GuardValue::Status(e.status)));
    }
    if let Some(t) = x.tier.filter(|t| *t != e.tier) {
        return Err(refuse(GuardKind::Tier, id, GuardValue::Tier(t), GuardValue::Tier(e.tier)));
    }
    if let Some(l) = x.lsn.filter(|l| *l != e.lsn) {
        return Err(refuse(GuardKind::Lsn, id, GuardValue::Lsn(l), GuardValue::Lsn(e.lsn)));
    }
    Ok(())
}

/// The state fields a put of `p` at time `at` carries: those of the memory the index has in
/// `slot`, or a new memory's.
pub(crate) fn put_state<S: AsRef<str>>(
    index: &Index,
    slot: Slot,
    p: &memory::PutCommand<S>,
    at: i64,
) -> PutState {
    match slot.pos {
        Some(i) => {
            let e = index.entry(i);
            PutState {
                tier: e.tier,
                status: e.status,
                created_lsn: e.created_lsn,
                created_at: e.created_at,
                moved_at: e.moved_at,
            }
        }
        None => PutState::new_memory(p.tier, at),
    }
}

/// Where a commit's records go once encoded: the log's bytes, with the sparse LSN index and
/// the record count that follow them.
pub(crate) struct Outlet<'a> {
    pub(crate) medium: &'a mut Medium,
    pub(crate) sparse: &'a mut Vec<(u64, u64)>,
    pub(crate) records: &'a mut u64,
}

impl Outlet<'_> {
    /// Hand `buf`, whole records that belong at offset `at`, to the log: queue them, and with
    /// `write_now` (a chunk of a large commit) write them to the file and start their
    /// writeback at once.
    pub(crate) fn hand_over(
        &mut self,
        at: u64,
        buf: &[u8],
        write_now: bool,
    ) -> std::result::Result<(), Failure> {
        let mut off = 0;
        while off < buf.len() {
            let len = format::record_len(&buf[off..]);
            if self.records.is_multiple_of(SPARSE_EVERY) {
                let lsn = u64::from_le_bytes(buf[off + 8..off + 16].try_into().expect("8 bytes"));
                self.sparse.push((lsn, at + off as u64));
            }
            *self.records += 1;
            off += len;
        }
        match &mut *self.medium {
            Medium::Memory(v) => v.extend_from_slice(buf),
            Medium::File(a) if write_now => {
                a.write_now(at, buf)?;
                a.start_writeback(at, at + buf.len() as u64);
            }
            Medium::File(a) => a.queue(at, buf),
        }
        Ok(())
    }
}

/// The `durable_gap` of a record written at `off` now: how far behind it the log's durable end
/// is (0 in RAM and in a version 1 log, which record nothing).
fn gap_at(st: &State, off: u64) -> u16 {
    gap_for(&st.medium, st.header.version, off)
}

/// `gap_at` for a log of format `version` whose bytes are in `medium`.
pub(crate) fn gap_for(medium: &Medium, version: u32, off: u64) -> u16 {
    match medium {
        Medium::File(a) if version >= 2 => format::durable_gap(off, a.synced()),
        _ => 0,
    }
}

/// Append a seal (its own one-record commit) saying the chain through LSN `lsn` is `chain`.
pub(crate) fn append_seal(
    log: &Log,
    st: &mut State,
    lsn: u64,
    chain: &ChainValue,
    key: Option<&SealKey>,
    at: i64,
) -> Result<SealEntry> {
    let base = st.end;
    let record_lsn = st.lsn_base() + 1;
    st.buf.clear();
    let gap = gap_at(st, base);
    let range = encode_record(
        &mut st.buf,
        Op::Seal,
        format::FLAG_COMMIT_END,
        gap,
        st.header.salt(),
        record_lsn,
        at,
        b"",
        |o| seal::encode_payload(o, lsn, chain, key),
    );
    let State { index, buf, .. } = &mut *st;
    index.apply(&format::view_trusted(&buf[range]), base, None).map_err(|reason| {
        Error::invalid("seal", format!("internal error: a seal the writer built does not apply: {reason}"))
    })?;
    if st.records.is_multiple_of(SPARSE_EVERY) {
        st.sparse.push((record_lsn, base));
    }
    match &mut st.medium {
        Medium::Memory(v) => v.extend_from_slice(&st.buf),
        Medium::File(a) => {
            a.queue(base, &st.buf);
            a.count_commit();
        }
    }
    st.records += 1;
    st.end = base + st.buf.len() as u64;
    st.lsn = record_lsn;
    st.buf.clear();
    st.note_commit();
    if let Some(c) = log.chainer.get() {
        c.publish(st.end);
    }
    Ok(*st.index.seals().last().expect("the seal just applied"))
}
