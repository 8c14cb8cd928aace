//! The on-disk byte format: the file header and record framing.
//!
//! Every integer is little-endian. The golden files in `tests/vectors/` freeze these bytes:
//! a change here that alters them is a new format version, never an accident.
//!
//! ```text
//! header (64 bytes)
//!   0  magic        8  b"MEMCMLOG"
//!   8  version      u32
//!  12  header_len   u32 (64)
//!  16  store_id     16 bytes
//!  32  generation   u64
//!  40  dense_from   u64  LSNs above this are strictly consecutive
//!  48  reserved     12 bytes, zero
//!  60  crc32c       u32 over bytes 0..60
//!
//! record
//!   0  magic        u16 0x4D43
//!   2  op           u8  nonzero: 0 is reserved so a zero-filled tail never parses
//!   3  flags        u8  bit 0: COMMIT_END
//!   4  salt         u32 the first four bytes of the store id
//!   8  lsn          u64
//!  16  at           i64 microseconds since the Unix epoch (UTC)
//!  24  key_len      u16
//!  26  durable_gap  u16 (version 2 on; zero in version 1) how far before this record, in 32-byte
//!                   units rounded down, the log's durable end was when it was written
//!  28  len          u32 payload length
//!  32  key, payload, then crc32c u32 over every byte before it
//! ```

pub mod chain;
pub mod memory;
pub mod seal;

/// The eight bytes every log file starts with.
pub const FILE_MAGIC: &[u8; 8] = b"MEMCMLOG";
/// The format version this build writes (it reads this one, 3, 2 and 1).
///
/// Version 2 gives each record a `durable_gap` (see [`durable_gap`]), so that recovery can
/// tell a power loss that kept a later record while an earlier unsynced one tore from damage
/// in committed data. Version 1 logs read as they always did (their records say nothing
/// about durability, which recovery takes as "all before me was durable"), and a writer
/// appending to one keeps writing version 1 records.
///
/// Version 3 changes only the hash chain: it links once per commit instead of once per record
/// (see [`chain`]). Records are framed as in version 2. A log keeps the version of its header:
/// a writer appending to a version 1 or 2 log goes on writing and chaining as that version
/// does, and log compaction (`memcommit compact`) rewrites any log as the current version.
///
/// Version 4 lets a put carry the memory's vector (flag bit 2 of the put payload, see
/// [`memory`]); records are framed and chained as in version 3. A build that predates it
/// refuses a version 4 log for its version, rather than reading such a put as damage. A writer
/// of an older log refuses a put with a vector ([`VECTOR_VERSION`]) until log compaction has
/// rewritten the log as version 4.
pub const FORMAT_VERSION: u32 = 4;
/// The first format version whose puts may carry a vector.
pub const VECTOR_VERSION: u32 = 4;
/// The oldest format version this build reads.
pub const OLDEST_READABLE_VERSION: u32 = 1;
/// The unit of `durable_gap`: less than the shortest record (`RECORD_OVERHEAD`), so that the
/// bound it gives falls inside the record the durable end stood before; a gap of up to 2 MiB
/// is recorded, a longer one saturates (and says less).
pub const DURABLE_GAP_UNIT: u64 = 32;

/// The `durable_gap` of a record written at offset `off` while the log was durable up to
/// `synced`: the distance, in [`DURABLE_GAP_UNIT`]s rounded down, saturating. Read back it is
/// an upper bound: the log was durable to at most `off - durable_gap * DURABLE_GAP_UNIT`.
pub fn durable_gap(off: u64, synced: u64) -> u16 {
    (off.saturating_sub(synced) / DURABLE_GAP_UNIT).min(u16::MAX as u64) as u16
}
/// The size of the file header.
pub const HEADER_LEN: usize = 64;
/// The two bytes every record starts with ("MC").
pub const RECORD_MAGIC: u16 = 0x4D43;
/// The fixed part of a record before its key.
pub const RECORD_HEADER_LEN: usize = 32;
/// The checksum after the payload.
pub const RECORD_TRAILER_LEN: usize = 4;
/// Framing bytes around key and payload.
pub const RECORD_OVERHEAD: usize = RECORD_HEADER_LEN + RECORD_TRAILER_LEN;
/// The longest key (memory id, task name) a record can carry.
pub const MAX_KEY_LEN: usize = 1024;
/// The largest payload the framing accepts at all; stores enforce a lower configurable limit.
pub const MAX_PAYLOAD_LEN: usize = 1 << 30;

/// The last record of a commit carries this flag; records after the last one that does are
/// an unfinished commit.
pub const FLAG_COMMIT_END: u8 = 1;

/// Record kinds. 0 is reserved and never valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Op {
    /// Create a memory or replace its content.
    Put = 1,
    /// Change a memory's status.
    Status = 2,
    /// Change a memory's tier.
    Move = 3,
    /// Mark a task finished.
    Task = 4,
    /// A seal: the hash chain's value at a commit boundary (see `seal`).
    Seal = 5,
    /// The whole new state of one entity of the agent-runtime roles (or its removal).
    Entity = 6,
}

impl Op {
    /// The op for a byte, or `None` for a byte that names no op (0 among them).
    pub fn from_u8(b: u8) -> Option<Op> {
        match b {
            1 => Some(Op::Put),
            2 => Some(Op::Status),
            3 => Some(Op::Move),
            4 => Some(Op::Task),
            5 => Some(Op::Seal),
            6 => Some(Op::Entity),
            _ => None,
        }
    }

    /// The op's name as users see it.
    pub fn name(self) -> &'static str {
        match self {
            Op::Put => "put",
            Op::Status => "status",
            Op::Move => "move",
            Op::Task => "task",
            Op::Seal => "seal",
            Op::Entity => "entity",
        }
    }
}

/// The fields of a log file's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// The format version (`FORMAT_VERSION` for a log this build creates).
    pub version: u32,
    /// Random at creation; identifies the store across generations.
    pub store_id: [u8; 16],
    /// 0 for a new log, one more for every log compaction.
    pub generation: u64,
    /// Records with an LSN above this one follow each other with no gap.
    pub dense_from: u64,
}

impl FileHeader {
    /// The salt every record of this store carries.
    pub fn salt(&self) -> u32 {
        u32::from_le_bytes(self.store_id[..4].try_into().expect("4 bytes"))
    }

    /// The header's 64 bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(FILE_MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        b[16..32].copy_from_slice(&self.store_id);
        b[32..40].copy_from_slice(&self.generation.to_le_bytes());
        b[40..48].copy_from_slice(&self.dense_from.to_le_bytes());
        let crc = crc32c::crc32c(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parse a header, saying what is wrong with one that does not parse.
    pub fn decode(b: &[u8]) -> Result<FileHeader, &'static str> {
        if b.len() < HEADER_LEN {
            return Err("the file is shorter than a log header");
        }
        if &b[0..8] != FILE_MAGIC {
            return Err("the file does not start with the memcommit log magic");
        }
        let crc = u32::from_le_bytes(b[60..64].try_into().expect("4 bytes"));
        if crc32c::crc32c(&b[..60]) != crc {
            return Err("the log header's checksum does not match");
        }
        let version = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err("the log was written in a format version this build cannot read");
        }
        let header_len = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
        if header_len as usize != HEADER_LEN {
            return Err("the log header has an unexpected length");
        }
        let mut store_id = [0u8; 16];
        store_id.copy_from_slice(&b[16..32]);
        Ok(FileHeader {
            version,
            store_id,
            generation: u64::from_le_bytes(b[32..40].try_into().expect("8 bytes")),
            dense_from: u64::from_le_bytes(b[40..48].try_into().expect("8 bytes")),
        })
    }
}

/// The lock file beside a log (`<log>.lock`): the writer's `flock`, and its clean-close marker.
pub fn lock_path(log: &std::path::Path) -> std::path::PathBuf {
    let mut p = log.as_os_str().to_owned();
    p.push(".lock");
    std::path::PathBuf::from(p)
}

/// What a writer's clean close leaves in the lock file beside the log: the log of this store
/// and generation was durable through `end` (fsynced) when it closed. Recovery reads damage
/// before `end` as damage in committed data, whatever the records' `durable_gap` says; a
/// marker of another store or generation, or one that does not parse, says nothing.
///
/// ```text
///   0  magic       8  b"MCCLOSED"
///   8  store_id   16
///  24  generation u64
///  32  end        u64
///  40  crc32c     u32 over bytes 0..40
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanClose {
    /// The store.
    pub store_id: [u8; 16],
    /// The log generation.
    pub generation: u64,
    /// The offset the log was durable through.
    pub end: u64,
}

impl CleanClose {
    /// The marker's size.
    pub const LEN: usize = 44;

    /// The marker's bytes.
    pub fn encode(&self) -> [u8; CleanClose::LEN] {
        let mut b = [0u8; CleanClose::LEN];
        b[0..8].copy_from_slice(b"MCCLOSED");
        b[8..24].copy_from_slice(&self.store_id);
        b[24..32].copy_from_slice(&self.generation.to_le_bytes());
        b[32..40].copy_from_slice(&self.end.to_le_bytes());
        let crc = crc32c::crc32c(&b[..40]);
        b[40..44].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// The marker in `b`, if `b` holds a whole one.
    pub fn decode(b: &[u8]) -> Option<CleanClose> {
        let b = b.get(..CleanClose::LEN)?;
        if &b[0..8] != b"MCCLOSED"
            || crc32c::crc32c(&b[..40]) != u32::from_le_bytes(b[40..44].try_into().ok()?)
        {
            return None;
        }
        Some(CleanClose {
            store_id: b[8..24].try_into().ok()?,
            generation: u64::from_le_bytes(b[24..32].try_into().ok()?),
            end: u64::from_le_bytes(b[32..40].try_into().ok()?),
        })
    }
}

/// A record parsed in place: borrowed views into the bytes it was read from.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    /// What the record does.
    pub op: Op,
    /// Flag bits (`FLAG_COMMIT_END`).
    pub flags: u8,
    /// How far before the record the durable end was at most when it was written, in
    /// [`DURABLE_GAP_UNIT`]s (0 in a version 1 log).
    pub durable_gap: u16,
    /// Log sequence number.
    pub lsn: u64,
    /// Microseconds since the Unix epoch, UTC.
    pub at: i64,
    /// The memory id or task name, as UTF-8 bytes.
    pub key: &'a [u8],
    /// The op's payload.
    pub payload: &'a [u8],
    /// Every byte of the record, framing included.
    pub bytes: &'a [u8],
}

impl<'a> RecordView<'a> {
    /// The key as text. Keys are validated as UTF-8 when they are written; a record read back
    /// passed its checksum, so the fallback only guards against a forged checksum.
    pub fn key_str(&self) -> &'a str {
        std::str::from_utf8(self.key).unwrap_or("\u{fffd}")
    }

    /// Whether this record closes its commit (its COMMIT_END flag).
    pub fn ends_commit(&self) -> bool {
        self.flags & FLAG_COMMIT_END != 0
    }

    /// Whether the log counts this record as the end of a commit: its COMMIT_END flag, or an
    /// LSN at or below the header's `dense_from`. Log compaction keeps only some records of
    /// old commits, as their original bytes, so in the compacted part every record stands
    /// alone.
    pub fn closes_commit(&self, dense_from: u64) -> bool {
        self.ends_commit() || self.lsn <= dense_from
    }
}

/// Why bytes did not parse as a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// The bytes end before the record does: a torn tail, or a reader that is early.
    Incomplete,
    /// The bytes are not a valid record (what is wrong, for the error message).
    Invalid(&'static str),
}

/// Check the framing of the record at the start of `b` and return its length, without its
/// checksum: `salt` must match the store's; `max_payload` bounds the declared length before
/// anything is trusted. [`parse_record`] is this and the checksum.
pub fn frame(b: &[u8], salt: u32, max_payload: usize) -> Result<usize, ParseError> {
    if b.len() < RECORD_HEADER_LEN {
        // A prefix of a header that is already wrong is invalid, not incomplete.
        if b.len() >= 2 && u16::from_le_bytes([b[0], b[1]]) != RECORD_MAGIC {
            return Err(ParseError::Invalid("bad record magic"));
        }
        return Err(ParseError::Incomplete);
    }
    if u16::from_le_bytes([b[0], b[1]]) != RECORD_MAGIC {
        return Err(ParseError::Invalid("bad record magic"));
    }
    if Op::from_u8(b[2]).is_none() {
        return Err(ParseError::Invalid("unknown record op"));
    }
    if b[3] & !FLAG_COMMIT_END != 0 {
        return Err(ParseError::Invalid("unknown record flags"));
    }
    if u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")) != salt {
        return Err(ParseError::Invalid("record belongs to another store"));
    }
    let key_len = u16::from_le_bytes([b[24], b[25]]) as usize;
    if key_len > MAX_KEY_LEN {
        return Err(ParseError::Invalid("record key too long"));
    }
    let len = u32::from_le_bytes(b[28..32].try_into().expect("4 bytes")) as usize;
    if len > max_payload.min(MAX_PAYLOAD_LEN) {
        return Err(ParseError::Invalid("record length out of bounds"));
    }
    let total = RECORD_OVERHEAD + key_len + len;
    if b.len() < total {
        return Err(ParseError::Incomplete);
    }
    Ok(total)
}

/// Ask the CPU to start loading the cache line at `p` (records about to be framed, a table
/// slot about to be probed), so it is on its way while the caller works on something else. A
/// hint only: it never waits, and does nothing where the processor has no such instruction.
#[allow(unsafe_code)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 has no architectural effect and never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Whether a framed record's checksum matches its bytes (`record` is exactly one record).
pub fn checksum_matches(record: &[u8]) -> bool {
    let body_end = record.len() - RECORD_TRAILER_LEN;
    let crc = u32::from_le_bytes(record[body_end..].try_into().expect("4 bytes"));
    crc32c::crc32c(&record[..body_end]) == crc
}

/// [`checksum_matches`] of three framed records at once: the CRC instruction takes several
/// cycles to give its result, so three independent records run side by side where the
/// processor has it (x86-64 with SSE 4.2), as fast as one alone.
pub fn checksums_match3(records: [&[u8]; 3]) -> [bool; 3] {
    let bodies = records.map(|r| &r[..r.len() - RECORD_TRAILER_LEN]);
    let crcs = crc32c_3(bodies);
    let mut out = [false; 3];
    for i in 0..3 {
        let r = records[i];
        let want = u32::from_le_bytes(r[r.len() - RECORD_TRAILER_LEN..].try_into().expect("4 bytes"));
        out[i] = crcs[i] == want;
    }
    out
}

/// The CRC32C of three byte strings.
fn crc32c_3(b: [&[u8]; 3]) -> [u32; 3] {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            #[allow(unsafe_code)]
            // SAFETY: the processor has SSE 4.2, checked just above.
            return unsafe { crc32c_3_sse42(b) };
        }
    }
    b.map(crc32c::crc32c)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn crc32c_3_sse42(b: [&[u8]; 3]) -> [u32; 3] {
    use std::arch::x86_64::_mm_crc32_u64;
    let words = b.iter().map(|x| x.len() / 8).min().expect("three");
    let (mut c0, mut c1, mut c2) = (!0u64, !0u64, !0u64);
    let word = |x: &[u8], i: usize| u64::from_le_bytes(x[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    for i in 0..words {
        c0 = _mm_crc32_u64(c0, word(b[0], i));
        c1 = _mm_crc32_u64(c1, word(b[1], i));
        c2 = _mm_crc32_u64(c2, word(b[2], i));
    }
    // The rest of each one, from the CRC so far (`crc32c_append` takes a finished CRC).
    let done = words * 8;
    [
        crc32c::crc32c_append(!(c0 as u32), &b[0][done..]),
        crc32c::crc32c_append(!(c1 as u32), &b[1][done..]),
        crc32c::crc32c_append(!(c2 as u32), &b[2][done..]),
    ]
}

/// Parse the record at the start of `b`. `salt` must match the store's; `max_payload` bounds
/// the declared length before anything is trusted.
pub fn parse_record(b: &[u8], salt: u32, max_payload: usize) -> Result<RecordView<'_>, ParseError> {
    let total = frame(b, salt, max_payload)?;
    if !checksum_matches(&b[..total]) {
        return Err(ParseError::Invalid("record checksum does not match"));
    }
    Ok(view_trusted(&b[..total]))
}

/// A view of bytes that already parsed as one whole record (no checks repeated).
pub fn view_trusted(b: &[u8]) -> RecordView<'_> {
    let key_len = u16::from_le_bytes([b[24], b[25]]) as usize;
    RecordView {
        op: Op::from_u8(b[2]).expect("a record that parsed before"),
        flags: b[3],
        durable_gap: u16::from_le_bytes([b[26], b[27]]),
        lsn: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
        at: i64::from_le_bytes(b[16..24].try_into().expect("8 bytes")),
        key: &b[RECORD_HEADER_LEN..RECORD_HEADER_LEN + key_len],
        payload: &b[RECORD_HEADER_LEN + key_len..b.len() - RECORD_TRAILER_LEN],
        bytes: b,
    }
}

/// Appends framed records to a buffer.
///
/// A record is written in place: the header with a zero length, the key, then the payload
/// through the closure, then the length is patched and the checksum appended. No payload is
/// built in a buffer of its own and copied.
#[allow(clippy::too_many_arguments)] // the header's fields, written in order
pub fn encode_record(
    out: &mut Vec<u8>,
    op: Op,
    flags: u8,
    durable_gap: u16,
    salt: u32,
    lsn: u64,
    at: i64,
    key: &[u8],
    payload: impl FnOnce(&mut Vec<u8>),
) -> std::ops::Range<usize> {
    let r = encode_record_unsummed(out, RecordHead { op, flags, durable_gap, salt, lsn, at }, key, payload);
    sum_record(out, r.clone());
    r
}

/// The fields of a record's header that its writer chooses (the rest are the magic and the
/// lengths).
#[derive(Clone, Copy, Debug)]
pub struct RecordHead {
    /// The operation.
    pub op: Op,
    /// The flags (`FLAG_COMMIT_END` and the like).
    pub flags: u8,
    /// The `durable_gap` (see [`durable_gap`]).
    pub durable_gap: u16,
    /// The store's salt.
    pub salt: u32,
    /// The record's LSN.
    pub lsn: u64,
    /// Its commit's time, microseconds since the epoch.
    pub at: i64,
}

/// [`encode_record`] with the checksum left zero, for [`sum_record`] or [`sum_records3`]
/// to write.
pub fn encode_record_unsummed(
    out: &mut Vec<u8>,
    head: RecordHead,
    key: &[u8],
    payload: impl FnOnce(&mut Vec<u8>),
) -> std::ops::Range<usize> {
    debug_assert!(key.len() <= MAX_KEY_LEN);
    let start = out.len();
    out.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
    out.push(head.op as u8);
    out.push(head.flags);
    out.extend_from_slice(&head.salt.to_le_bytes());
    out.extend_from_slice(&head.lsn.to_le_bytes());
    out.extend_from_slice(&head.at.to_le_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&head.durable_gap.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(key);
    let payload_start = out.len();
    payload(out);
    let len = (out.len() - payload_start) as u32;
    out[start + 28..start + 32].copy_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&[0; RECORD_TRAILER_LEN]);
    start..out.len()
}

/// Write the checksum of the framed record `out[r]`, over every byte before it.
pub fn sum_record(out: &mut [u8], r: std::ops::Range<usize>) {
    let body_end = r.end - RECORD_TRAILER_LEN;
    let crc = crc32c::crc32c(&out[r.start..body_end]);
    out[body_end..r.end].copy_from_slice(&crc.to_le_bytes());
}

/// [`sum_record`] of three framed records of `out` at once, side by side (see
/// [`checksums_match3`]): for a writer that encodes many records in a row.
pub fn sum_records3(out: &mut [u8], r: [std::ops::Range<usize>; 3]) {
    let crcs = {
        let body = |r: &std::ops::Range<usize>| &out[r.start..r.end - RECORD_TRAILER_LEN];
        crc32c_3([body(&r[0]), body(&r[1]), body(&r[2])])
    };
    for (r, crc) in r.into_iter().zip(crcs) {
        out[r.end - RECORD_TRAILER_LEN..r.end].copy_from_slice(&crc.to_le_bytes());
    }
}

/// The length of the record at the start of `b`, which holds whole, valid records.
pub fn record_len(b: &[u8]) -> usize {
    let key_len = u16::from_le_bytes([b[24], b[25]]) as usize;
    let len = u32::from_le_bytes(b[28..32].try_into().expect("4 bytes")) as usize;
    RECORD_OVERHEAD + key_len + len
}

/// The offset of the last record in a buffer of whole records.
pub fn last_record_start(b: &[u8]) -> usize {
    let (mut off, mut last) = (0, 0);
    while off < b.len() {
        last = off;
        off += record_len(&b[off..]);
    }
    last
}

/// Set or clear COMMIT_END on an encoded record and recompute its checksum.
pub fn set_commit_end(record: &mut [u8], end: bool) {
    let flags = if end { FLAG_COMMIT_END } else { 0 };
    if record[3] == flags {
        return;
    }
    record[3] = flags;
    let body_end = record.len() - RECORD_TRAILER_LEN;
    let crc = crc32c::crc32c(&record[..body_end]);
    record[body_end..].copy_from_slice(&crc.to_le_bytes());
}

/// Little helpers for the payload encodings.
/// Lower-case hex: how the text forms (seal hashes, snapshot JSON, error messages) write bytes.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub(crate) mod wire {
    pub fn put_str16(out: &mut Vec<u8>, s: &[u8]) {
        out.extend_from_slice(&(s.len() as u16).to_le_bytes());
        out.extend_from_slice(s);
    }

    pub fn put_str32(out: &mut Vec<u8>, s: &[u8]) {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s);
    }

    /// A cursor over payload bytes; every read is bounds-checked.
    pub struct Reader<'a> {
        pub b: &'a [u8],
        pub pos: usize,
    }

    impl<'a> Reader<'a> {
        pub fn new(b: &'a [u8]) -> Self {
            Reader { b, pos: 0 }
        }

        pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
            let end = self.pos.checked_add(n)?;
            let s = self.b.get(self.pos..end)?;
            self.pos = end;
            Some(s)
        }

        pub fn u8(&mut self) -> Option<u8> {
            self.take(1).map(|s| s[0])
        }

        pub fn u16(&mut self) -> Option<u16> {
            self.take(2).map(|s| u16::from_le_bytes([s[0], s[1]]))
        }

        pub fn u32(&mut self) -> Option<u32> {
            self.take(4).map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes")))
        }

        pub fn u64(&mut self) -> Option<u64> {
            self.take(8).map(|s| u64::from_le_bytes(s.try_into().expect("8 bytes")))
        }

        pub fn str16(&mut self) -> Option<&'a str> {
            let n = self.u16()? as usize;
            std::str::from_utf8(self.take(n)?).ok()
        }

        pub fn str32(&mut self) -> Option<&'a str> {
            let n = self.u32()? as usize;
            std::str::from_utf8(self.take(n)?).ok()
        }

        pub fn done(&self) -> bool {
            self.pos == self.b.len()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_checksums_at_once_agree_with_one_at_a_time() {
        let mut rng = 7u64;
        let mut bytes = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (rng >> 33) as u8
                })
                .collect()
        };
        for lens in [[4, 4, 4], [5, 300, 17], [228, 229, 230], [4096, 12, 1000], [9, 9, 2000]] {
            let mut recs: Vec<Vec<u8>> = lens.iter().map(|&n| bytes(n)).collect();
            for r in recs.iter_mut() {
                let n = r.len() - 4;
                let crc = crc32c::crc32c(&r[..n]);
                r[n..].copy_from_slice(&crc.to_le_bytes());
            }
            let view = [&recs[0][..], &recs[1][..], &recs[2][..]];
            assert_eq!(checksums_match3(view), [true; 3], "{lens:?}");
            for (i, r) in recs.iter().enumerate() {
                assert_eq!(crc32c_3(view)[i], crc32c::crc32c(r), "{lens:?}");
            }
            recs[1][0] ^= 1;
            let view = [&recs[0][..], &recs[1][..], &recs[2][..]];
            assert_eq!(checksums_match3(view), [true, false, true], "{lens:?}");
        }
    }

    #[test]
    fn header_round_trip() {
        let h = FileHeader { version: FORMAT_VERSION, store_id: [7; 16], generation: 3, dense_from: 42 };
        assert_eq!(FileHeader::decode(&h.encode()).unwrap(), h);
        let mut b = h.encode();
        b[33] ^= 1;
        assert!(FileHeader::decode(&b).is_err());
    }

    #[test]
    fn record_round_trip_and_zero_tail() {
        let mut out = Vec::new();
        let r = encode_record(&mut out, Op::Put, FLAG_COMMIT_END, 0, 9, 5, -3, b"id", |o| {
            o.extend_from_slice(b"xyz")
        });
        let v = parse_record(&out[r.clone()], 9, 1 << 20).unwrap();
        assert_eq!((v.op, v.lsn, v.at, v.key, v.payload), (Op::Put, 5, -3, &b"id"[..], &b"xyz"[..]));
        assert!(v.ends_commit());
        assert_eq!(
            parse_record(&[0u8; 64], 9, 1 << 20).unwrap_err(),
            ParseError::Invalid("bad record magic")
        );
        assert_eq!(parse_record(&out[..10], 9, 1 << 20).unwrap_err(), ParseError::Incomplete);
        assert!(parse_record(&out, 8, 1 << 20).is_err());
    }
}
