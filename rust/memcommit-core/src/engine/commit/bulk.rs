//! A run of puts pushed in one call (`Commit::push_puts`): the bulk path of `put_many` and
//! `put_rows`, on both cores.
//!
//! The records are the ones `Commit::push` would write for the same puts, byte for byte: the
//! same LSNs, time, `durable_gap`, state fields and payload encoding (a test holds the two
//! paths to that). What differs is who does the work:
//!
//! * the calling thread checks each put and applies it to the index, in order, as `push` does:
//!   that is the part that must be sequential, since a put's state (a new memory, or the tier
//!   and creation of an existing one, an earlier put of the run included) depends on the ones
//!   before it. The check gives the record's size without encoding it, so the pass also knows
//!   each record's offset. A bad put ends the run with its error, as `push` would at that put:
//!   the commit must then be dropped, which takes back what was applied and cuts off what was
//!   written (a run with vectors checks them all, and their dimension, before it starts,
//!   since that check needs the commit);
//! * a second thread encodes the records and their CRC32Cs chunk by chunk, as the index pass
//!   hands the chunks over, and writes each chunk to the log (starting its writeback) while
//!   later ones are still being applied and encoded.
//!
//! The last chunk stays in the commit's buffer, unwritten, as in `push`: it holds the record
//! `finish` marks COMMIT_END, or the commit goes on with more operations.
//!
//! The puts come as a [`PutRun`], read by position, so one call takes a whole `put_rows` of a
//! million rows as the binding holds them: one pipeline from the first put to the last (a run
//! cut into batches drained the encoder at the end of every batch, with this thread waiting),
//! and no command built for each put beforehand.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use super::{gap_for, note_sources, put_state, Commit, Outlet, CHUNK};
use crate::engine::state::{Medium, State};
use crate::error::{Error, Result};
use crate::format::memory::{self, PutCommand, PutState};
use crate::format::{encode_record_unsummed, prefetch, sum_record, sum_records3, Op, RecordHead};
use crate::state::index::PutApply;

/// Runs shorter than this many puts take `push`, one by one: a second thread costs more than
/// it saves on them.
const SMALL_RUN: usize = 2048;

/// How many ids ahead the index pass hashes, and asks the CPU to load their id table slots.
const AHEAD: usize = 8;

/// How many puts ahead the encoder asks the CPU to load a put's id and text. A caller's
/// strings are scattered over its heap and usually out of the cache (a binding lends a million
/// Python strs, read by nothing since they were made): without this, the copy of each text
/// waits for memory.
const TEXT_AHEAD: usize = 4;

/// The numbers the index gave the kinds and tasks of one run of puts, by where their bytes
/// are: a binding lends the strings of its caller's objects, and a caller passes one object
/// for each kind and task, so a run of a million puts holds a handful of kinds and some
/// thousands of tasks at as many addresses. Found by address, a number costs a compare
/// instead of hashing and comparing the string. Every string of a run is borrowed for the
/// whole run, so two of them at one address with one length are the same bytes.
struct Names {
    /// (address, length, number), in slots by the address's hash; address 0: empty.
    slots: Vec<(usize, usize, u32)>,
}

impl Names {
    const BITS: u32 = 12;

    fn new() -> Names {
        Names { slots: vec![(0, 0, 0); 1 << Self::BITS] }
    }

    /// The number of `s`: from `intern` the first time it is seen at its address.
    fn of(&mut self, s: &str, intern: impl FnOnce(&str) -> u32) -> u32 {
        let at = s.as_ptr() as usize;
        let hash = (at as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - Self::BITS);
        let slot = &mut self.slots[hash as usize];
        if slot.0 == at && slot.1 == s.len() {
            return slot.2;
        }
        let n = intern(s);
        *slot = (at, s.len(), n);
        n
    }
}

/// One chunk of the run, handed from the index pass to the encoder.
struct Chunk {
    /// The puts `first..end` of the run.
    first: usize,
    end: usize,
    /// The log offset of its first record, and the bytes its records take.
    off: u64,
    bytes: usize,
    /// The LSN of its first record.
    lsn: u64,
    /// The puts of the chunk that do not create a memory (an existing id, or one an earlier put
    /// of the run created): their place in the run and the state they carry. Every other put
    /// carries a new memory's state.
    states: Vec<(usize, PutState)>,
    /// Whether this is the run's last chunk (kept in the commit's buffer, not written).
    last: bool,
}

/// A run of puts for [`Commit::push_puts`], read by position: once to check them, once to
/// apply them to the index and once to encode them, that last on another thread. A caller that
/// holds its puts in another shape (the binding's columns of one `put_rows` call) lends them
/// as they are, without building a command for each first.
pub trait PutRun: Sync {
    /// How many puts.
    fn len(&self) -> usize;

    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The id of put `i` (below `len`).
    fn id(&self, i: usize) -> &str;

    /// The text of put `i`.
    fn text(&self, i: usize) -> &str;

    /// Make `p` put `i`, every field of it, in the memory `p`'s lists already have (a reader
    /// fills one command over and over, allocating nothing once its lists are long enough).
    fn fill<'r>(&'r self, i: usize, p: &mut PutCommand<&'r str>);

    /// Whether any put of the run may have a vector (`true` unless the reader knows none
    /// does): a run with vectors is checked whole before it is applied.
    fn has_vectors(&self) -> bool {
        true
    }
}

impl PutRun for [PutCommand<&str>] {
    fn len(&self) -> usize {
        <[_]>::len(self)
    }

    fn id(&self, i: usize) -> &str {
        self[i].id
    }

    fn text(&self, i: usize) -> &str {
        self[i].text
    }

    fn fill<'r>(&'r self, i: usize, p: &mut PutCommand<&'r str>) {
        let q = &self[i];
        (p.id, p.kind, p.text, p.data, p.task, p.tier) = (q.id, q.kind, q.text, q.data, q.task, q.tier);
        p.tags.clear();
        p.tags.extend_from_slice(&q.tags);
        p.sources.clear();
        p.sources.extend_from_slice(&q.sources);
        p.vector.clone_from(&q.vector);
    }

    fn has_vectors(&self) -> bool {
        self.iter().any(|p| p.vector.is_some())
    }
}

impl Commit<'_> {
    /// Push a run of puts, as `push` would push each of them in turn (the same records), with
    /// the encoding, the checksums and the writing on a second thread. On an error the commit
    /// must be dropped (which takes it back); the error is the first bad put's.
    pub fn push_puts<R: PutRun + ?Sized>(&mut self, puts: &R) -> Result<()> {
        let n = puts.len();
        let mut p = PutCommand::default();
        if n < SMALL_RUN {
            for i in 0..n {
                puts.fill(i, &mut p);
                self.push(&memory::Command::Put(p.clone()))?;
            }
            return Ok(());
        }
        if puts.has_vectors() {
            for i in 0..n {
                puts.fill(i, &mut p);
                self.log.check_put(&p)?;
                if let Some(v) = &p.vector {
                    self.check_dims(p.id, v.len())?;
                }
            }
        }
        // The records already in the buffer are not the commit's last: out they go first.
        if !self.st.buf.is_empty() {
            self.flush_chunk(true)?;
        }
        let log = self.log;
        let at = self.at;
        let first_lsn = self.lsn + 1;
        let base = self.base + self.flushed;
        let Commit { st, records, unresolved, .. } = self;
        let State { header, medium, index, sparse, undo, .. } = &mut **st;
        let (salt, version) = (header.salt(), header.version);
        index.reserve(n);
        let mut out = Outlet { medium, sparse, records };
        let (tx, rx) = mpsc::sync_channel::<Chunk>(4);
        // What the encoder wrote, even when the run fails: the commit's drop cuts it off.
        let written = AtomicU64::new(0);
        let result = std::thread::scope(|s| {
            let encoder = std::thread::Builder::new()
                .name("memcommit-encode".into())
                .spawn_scoped(s, || {
                    let mut enc = Vec::with_capacity(CHUNK + (CHUNK >> 2));
                    for c in rx {
                        enc.clear();
                        encode_chunk(&mut enc, &c, puts, out.medium, version, salt, at);
                        if enc.len() != c.bytes {
                            return Err(Error::invalid(
                                "record",
                                format!(
                                    "internal error: a chunk of puts encoded to {} bytes, {} expected",
                                    enc.len(),
                                    c.bytes
                                ),
                            ));
                        }
                        if c.last {
                            return Ok(enc);
                        }
                        out.hand_over(c.off, &enc, true).map_err(|f| log.failed(f))?;
                        written.fetch_add(enc.len() as u64, Ordering::Relaxed);
                    }
                    Err(Error::invalid(
                        "record",
                        "internal error: a run of puts ended without its last chunk",
                    ))
                })
                .map_err(|e| Error::invalid("record", format!("could not start the encoding thread: {e}")));
            let encoder = match encoder {
                Ok(h) => h,
                Err(e) => return Err(e),
            };
            // The index pass, in order; each chunk goes to the encoder as soon as it is applied.
            let mut hashes = [0u32; AHEAD];
            for (i, h) in hashes.iter_mut().enumerate().take(n) {
                *h = index.hash(puts.id(i).as_bytes());
                index.prefetch_hashed(*h);
            }
            let mut chunk = Chunk {
                first: 0,
                end: 0,
                off: base,
                bytes: 0,
                lsn: first_lsn,
                states: Vec::new(),
                last: false,
            };
            let (mut off, mut lsn) = (base, first_lsn);
            let (mut kinds, mut tasks) = (Names::new(), Names::new());
            let mut refused = None;
            for i in 0..n {
                let hash = hashes[i % AHEAD];
                if i + AHEAD < n {
                    hashes[i % AHEAD] = index.hash(puts.id(i + AHEAD).as_bytes());
                    index.prefetch_hashed(hashes[i % AHEAD]);
                }
                if chunk.bytes >= CHUNK {
                    chunk.end = i;
                    let next =
                        Chunk { first: i, end: 0, off, bytes: 0, lsn, states: Vec::new(), last: false };
                    if tx.send(std::mem::replace(&mut chunk, next)).is_err() {
                        break; // the encoder stopped: its error says why
                    }
                }
                puts.fill(i, &mut p);
                let len = match log.check_put(&p) {
                    Ok(len) => len,
                    Err(e) => {
                        refused = Some(e);
                        break;
                    }
                };
                note_sources(index, log, &p, unresolved);
                let slot = index.lookup_hashed(p.id.as_bytes(), hash);
                let state = put_state(index, slot, &p, at);
                if slot.pos.is_some() {
                    chunk.states.push((i, state));
                }
                let put = PutApply {
                    key: p.id.as_bytes(),
                    state,
                    kind: p.kind,
                    task: p.task,
                    tags: &p.tags,
                    lsn,
                    at,
                    off,
                    len: len as u32,
                };
                let kind = kinds.of(p.kind, |k| index.intern_kind(k));
                let task = p.task.map_or(0, |t| tasks.of(t, |t| index.intern_task(t)));
                index.apply_put_interned(&put, kind, task, slot, Some(undo));
                off += len as u64;
                lsn += 1;
                chunk.bytes += len;
            }
            if refused.is_none() {
                chunk.end = n;
                chunk.last = true;
                let _ = tx.send(chunk);
            }
            drop(tx);
            let encoded = encoder.join().unwrap_or_else(|_| {
                Err(Error::invalid("record", "internal error: the encoding thread panicked"))
            });
            match refused {
                Some(e) => Err(e),
                None => encoded,
            }
        });
        self.flushed += written.into_inner();
        let tail = result?;
        self.lsn += n as u64;
        debug_assert!(self.st.buf.is_empty());
        self.st.buf = tail;
        Ok(())
    }
}

/// Encode the records of chunk `c` of `puts` into `out`, as `Commit::push` encodes a put.
fn encode_chunk<R: PutRun + ?Sized>(
    out: &mut Vec<u8>,
    c: &Chunk,
    puts: &R,
    medium: &Medium,
    version: u32,
    salt: u32,
    at: i64,
) {
    let mut states = c.states.iter().peekable();
    let mut p = PutCommand::default();
    // Records whose checksums are still to write, three at a time (`sum_records3`).
    let mut unsummed: [Range<usize>; 3] = [0..0, 0..0, 0..0];
    let mut pending = 0;
    for i in c.first..c.end {
        if i + TEXT_AHEAD < puts.len() {
            prefetch(puts.id(i + TEXT_AHEAD).as_ptr());
            for line in puts.text(i + TEXT_AHEAD).as_bytes().chunks(64) {
                prefetch(line.as_ptr());
            }
        }
        let known = match states.peek() {
            Some(&&(j, st)) if j == i => {
                states.next();
                Some(st)
            }
            _ => None,
        };
        let gap = gap_for(medium, version, c.off + out.len() as u64);
        let lsn = c.lsn + (i - c.first) as u64;
        puts.fill(i, &mut p);
        let state = known.unwrap_or_else(|| PutState::new_memory(p.tier, at));
        let head = RecordHead { op: Op::Put, flags: 0, durable_gap: gap, salt, lsn, at };
        unsummed[pending] =
            encode_record_unsummed(out, head, p.id.as_bytes(), |o| memory::encode_put(o, state, &p));
        pending += 1;
        if pending == 3 {
            sum_records3(out, unsummed.clone());
            pending = 0;
        }
    }
    for r in &unsummed[..pending] {
        sum_record(out, r.clone());
    }
}
