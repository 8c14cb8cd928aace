//! Reading records in order from a file or a buffer, in large chunks.

use std::io;

use crate::format::{
    parse_record, view_trusted, ParseError, RecordView, HEADER_LEN, RECORD_HEADER_LEN, RECORD_MAGIC,
};

/// Something records can be read from by offset.
pub trait ReadAt {
    /// Read up to `buf.len()` bytes at `off`; fewer only at the end.
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize>;

    /// The bytes from `off` to `end` mapped into memory, when they are all in a real file
    /// (`None`: read them with `read_at`).
    fn map(&self, off: u64, end: u64) -> Option<io::Result<crate::vfs::Mapped>> {
        let _ = (off, end);
        None
    }
}

impl ReadAt for crate::vfs::File {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        crate::vfs::File::read_at(self, buf, off)
    }

    fn map(&self, off: u64, end: u64) -> Option<io::Result<crate::vfs::Mapped>> {
        let len = usize::try_from(end - off).ok()?;
        // Only what the file holds now can be mapped.
        if self.len().ok()? < end {
            return None;
        }
        self.map_read(off, len)
    }
}

impl ReadAt for Vec<u8> {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let start = (off as usize).min(self.len());
        let n = buf.len().min(self.len() - start);
        buf[..n].copy_from_slice(&self[start..start + n]);
        Ok(n)
    }
}

/// What the scanner found next.
pub enum Item<'a> {
    /// A valid record at a byte offset.
    Record(u64, RecordView<'a>),
    /// Bytes that are not a valid record at an offset (see the `ParseError`).
    Bad(u64, ParseError),
    /// Clean end: the last record ended exactly at `end`.
    End,
}

const CHUNK: usize = 4 << 20;

/// Reads records from `start` up to `end` through a buffer of a few MiB.
pub struct Scanner<'s, S: ReadAt + ?Sized> {
    src: &'s S,
    buf: Vec<u8>,
    buf_off: u64,
    pos: usize,
    filled: usize,
    end: u64,
    salt: u32,
    max_payload: usize,
}

impl<'s, S: ReadAt + ?Sized> Scanner<'s, S> {
    /// A scanner over `src` from byte `start` to byte `end`.
    pub fn new(src: &'s S, start: u64, end: u64, salt: u32, max_payload: usize) -> Self {
        Scanner { src, buf: Vec::new(), buf_off: start, pos: 0, filled: 0, end, salt, max_payload }
    }

    /// The offset of the next byte to parse.
    pub fn offset(&self) -> u64 {
        self.buf_off + self.pos as u64
    }

    fn refill(&mut self, need: usize) -> io::Result<()> {
        // Move the unparsed rest to the front and read more after it.
        self.buf.copy_within(self.pos..self.filled, 0);
        self.buf_off += self.pos as u64;
        self.filled -= self.pos;
        self.pos = 0;
        let want = need.max(CHUNK).min((self.end - self.buf_off) as usize);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let upto = ((self.end - self.buf_off) as usize).min(self.buf.len());
        if upto > self.filled {
            let n = self.src.read_at(&mut self.buf[self.filled..upto], self.buf_off + self.filled as u64)?;
            self.filled += n;
        }
        Ok(())
    }

    /// Find the next record: its (offset, start in the buffer, length), or a bad spot or the end.
    fn advance(&mut self) -> io::Result<Result<(u64, usize, usize), Item<'static>>> {
        loop {
            let off = self.offset();
            if off >= self.end {
                return Ok(Err(Item::End));
            }
            let avail = &self.buf[self.pos..self.filled];
            match parse_record(avail, self.salt, self.max_payload) {
                Ok(rec) => {
                    let n = rec.bytes.len();
                    let start = self.pos;
                    self.pos += n;
                    return Ok(Ok((off, start, n)));
                }
                Err(ParseError::Incomplete) => {
                    let remaining = (self.end - off) as usize;
                    if avail.len() >= remaining {
                        return Ok(Err(Item::Bad(off, ParseError::Incomplete)));
                    }
                    let need = declared_len(avail).unwrap_or(RECORD_HEADER_LEN).max(avail.len() + 1);
                    let had = avail.len();
                    self.refill(need)?;
                    if self.filled - self.pos <= had {
                        // The file ends before `end` (it shrank under us): nothing more to read.
                        return Ok(Err(Item::Bad(off, ParseError::Incomplete)));
                    }
                }
                Err(e) => return Ok(Err(Item::Bad(off, e))),
            }
        }
    }

    /// The next record, a bad spot, or the end.
    pub fn next_item(&mut self) -> io::Result<Item<'_>> {
        Ok(match self.advance()? {
            Ok((off, start, n)) => Item::Record(off, view_trusted(&self.buf[start..start + n])),
            Err(other) => other,
        })
    }

    /// `next_item`, with the key of the record after it when the buffer already holds it
    /// (unchecked: only a hint, for prefetching; empty when unknown).
    pub fn next_with_lookahead(&mut self) -> io::Result<(Item<'_>, &[u8])> {
        let step = self.advance()?;
        let rest = &self.buf[self.pos..self.filled];
        let next_key = match declared_len(rest) {
            Some(_) => {
                let key_len = u16::from_le_bytes([rest[24], rest[25]]) as usize;
                rest.get(RECORD_HEADER_LEN..RECORD_HEADER_LEN + key_len).unwrap_or(&[])
            }
            None => &[],
        };
        Ok(match step {
            Ok((off, start, n)) => (Item::Record(off, view_trusted(&self.buf[start..start + n])), next_key),
            Err(other) => (other, next_key),
        })
    }
}

/// Where to start reading for the records after LSN `after`, given a sparse index of
/// (LSN, offset) points in LSN order: the nearest point at or before `after + 1` (the header's
/// end when none), as (the LSN before it, its offset).
pub fn scan_start(sparse: &[(u64, u64)], after: u64) -> (u64, u64) {
    let i = sparse.partition_point(|&(lsn, _)| lsn <= after.saturating_add(1));
    match i {
        0 => (0, HEADER_LEN as u64),
        _ => (sparse[i - 1].0 - 1, sparse[i - 1].1),
    }
}

/// A record that did not parse where one was due: its offset, the LSN it would have had, and
/// what is wrong.
#[derive(Clone, Copy, Debug)]
pub struct BadRecord {
    /// Byte offset of the bad bytes.
    pub offset: u64,
    /// The LSN the record there would have had.
    pub lsn: u64,
    /// What is wrong, for the error message.
    pub reason: &'static str,
}

/// The offset of the first record after LSN `lsn` in records that end at `end` (`end` when
/// none follows), read from the sparse index's nearest point before it (see [`scan_start`]).
pub fn offset_after<S: ReadAt + ?Sized>(
    src: &S,
    sparse: &[(u64, u64)],
    salt: u32,
    end: u64,
    lsn: u64,
) -> io::Result<Result<u64, BadRecord>> {
    let (mut prev, start) = scan_start(sparse, lsn);
    let mut sc = Scanner::new(src, start, end, salt, crate::format::MAX_PAYLOAD_LEN);
    loop {
        match sc.next_item()? {
            Item::Record(off, rec) if rec.lsn > lsn => return Ok(Ok(off)),
            Item::Record(_, rec) => prev = rec.lsn,
            Item::End => return Ok(Ok(end)),
            Item::Bad(offset, e) => {
                let reason = match e {
                    ParseError::Incomplete => "the file ends inside a record",
                    ParseError::Invalid(r) => r,
                };
                return Ok(Err(BadRecord { offset, lsn: prev + 1, reason }));
            }
        }
    }
}

/// The total length a record header declares, when enough of it is there.
fn declared_len(b: &[u8]) -> Option<usize> {
    if b.len() < RECORD_HEADER_LEN {
        return None;
    }
    let key_len = u16::from_le_bytes([b[24], b[25]]) as usize;
    let len = u32::from_le_bytes(b[28..32].try_into().expect("4 bytes")) as usize;
    Some(crate::format::RECORD_OVERHEAD + key_len + len)
}

/// Whether every byte from `from` to `end` is zero: space written ahead for commits to come
/// (op 0 is reserved, so zeros never parse as a record), not a torn write.
pub fn all_zeros<S: ReadAt + ?Sized>(src: &S, mut from: u64, end: u64) -> io::Result<bool> {
    let mut buf = vec![0u8; CHUNK.min((end.saturating_sub(from)) as usize).max(1)];
    while from < end {
        let want = buf.len().min((end - from) as usize);
        let n = src.read_at(&mut buf[..want], from)?;
        if n == 0 {
            return Ok(true);
        }
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        from += n as u64;
    }
    Ok(true)
}

/// What lies where a scan found no record that follows the last one: the one rule that open
/// (and so `info` and `verify`), a reader's refresh and `inspect` (`repair`) share, so they
/// can never disagree about a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Zeros to the end: space a writer wrote ahead for the commits to come.
    FreeSpace,
    /// Nothing of the log's future follows: a torn tail (a crash mid-write), or a live
    /// writer's append that is not in the file yet.
    Torn,
    /// A record that follows parses there now: a live writer was writing it when it was first
    /// read. Scan again from the same offset.
    Changed,
    /// A valid record of the log's future follows at this offset, and the bytes here stayed as
    /// they were after it was seen: damage in committed data.
    Damage(u64),
}

/// How long `judge` waits before its last look at bytes it is about to call damage.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(2);

/// Judge the spot at `off` where the record after LSN `prev` should start but none that
/// `follows` does.
///
/// A writer appends in offset order (one `pwrite` of its queue at a time, each copied into the
/// page cache from low offsets to high), so once a reader has seen a valid record at a later
/// offset, every byte before it is as the writer left it. Hence: bytes that parse now were
/// being written (`Changed`); zeros to the end are free space; nothing of the log's future
/// after them is a torn tail; and only bytes that still fail after a later valid record was
/// seen, and read the same twice, are damage. Bytes before `durable`, the end a clean close
/// made durable, are damage whatever follows them while the file still reaches that end: the
/// close fsynced them and trimmed the space written ahead, and a later writer appends after
/// them. A writer's own open sees no other
/// writer, so for it `Changed` never happens and the verdict is the file's.
pub fn judge<S: ReadAt + ?Sized>(
    src: &S,
    off: u64,
    end: u64,
    (salt, dense_from, durable): (u32, u64, u64),
    prev: u64,
    follows: &dyn Fn(u64) -> bool,
) -> io::Result<Stop> {
    let max = crate::format::MAX_PAYLOAD_LEN;
    if record_at(src, off, end, salt)?.is_some_and(follows) {
        return Ok(Stop::Changed);
    }
    // Before `durable` (a clean close's marker) every byte was fsynced and the space written
    // ahead trimmed: neither a torn write nor free space, even in the last record. (A file cut
    // short of it lost that part already, by hand or from an older copy: cut back to its last
    // whole commit as a torn tail is.)
    if off < durable && end >= durable {
        let later = find_valid_after(src, off + 1, end, salt, prev, max)?;
        return Ok(Stop::Damage(later.unwrap_or(off)));
    }
    if all_zeros(src, off, end)? {
        return Ok(Stop::FreeSpace);
    }
    let Some(later) = find_valid_after(src, off + 1, end, salt, prev, max)? else {
        return Ok(Stop::Torn);
    };
    if written_while_undurable(src, off, later, end, (salt, dense_from), prev)? {
        return Ok(Stop::Torn);
    }
    let span = (later - off).min(64 << 10) as usize;
    let mut first = vec![0u8; span];
    let n = src.read_at(&mut first, off)?;
    if record_at(src, off, end, salt)?.is_some_and(follows) {
        return Ok(Stop::Changed);
    }
    std::thread::sleep(SETTLE);
    let mut again = vec![0u8; span];
    let m = src.read_at(&mut again, off)?;
    if first[..n] != again[..m] || record_at(src, off, end, salt)?.is_some_and(follows) {
        return Ok(Stop::Changed);
    }
    Ok(Stop::Damage(later))
}

/// Whether every valid record of the log's future from `first` on was written while the log
/// was durable only up to `off` or less (its `durable_gap` says so, to within less than a
/// record): then the bytes at `off`
/// were not yet durable when any of them was written, and a power loss that kept some of a
/// drive's unsynced writes and not others (drives keep them in any order) explains what is
/// there. That is a torn write, not damage in committed data: nothing past `off` was durable
/// when the last of them was written. A record of a version 1 log (gap 0) never says so, nor
/// one at or below `dense_from`: log compaction copies the records it keeps with the gaps they
/// had in the old log, but the new generation was fsynced whole before it was renamed in.
fn written_while_undurable<S: ReadAt + ?Sized>(
    src: &S,
    off: u64,
    first: u64,
    end: u64,
    (salt, dense_from): (u32, u64),
    prev: u64,
) -> io::Result<bool> {
    let max = crate::format::MAX_PAYLOAD_LEN;
    let mut at = Some(first);
    while let Some(pos) = at {
        let (gap, len) = match Scanner::new(src, pos, end, salt, max).next_item()? {
            Item::Record(_, rec) if rec.lsn <= dense_from => (0, rec.bytes.len() as u64),
            Item::Record(_, rec) => (rec.durable_gap as u64, rec.bytes.len() as u64),
            _ => return Ok(false),
        };
        // The durable end was at most `bound` when this record was written, and it stands on
        // a record boundary: before the end of the record at `off` (at least RECORD_OVERHEAD
        // bytes long) means at or before `off`.
        let bound = pos.saturating_sub(gap * crate::format::DURABLE_GAP_UNIT);
        if bound >= off + crate::format::RECORD_OVERHEAD as u64 {
            return Ok(false);
        }
        at = find_valid_after(src, pos + len, end, salt, prev, max)?;
    }
    Ok(true)
}

/// The LSN of the valid record at `off`, if one starts there and ends by `end`.
pub fn record_at<S: ReadAt + ?Sized>(src: &S, off: u64, end: u64, salt: u32) -> io::Result<Option<u64>> {
    let mut head = [0u8; RECORD_HEADER_LEN];
    if end.saturating_sub(off) < RECORD_HEADER_LEN as u64 || src.read_at(&mut head, off)? < head.len() {
        return Ok(None);
    }
    // The header's own checks first, so a garbage length is never allocated.
    if matches!(parse_record(&head, salt, crate::format::MAX_PAYLOAD_LEN), Err(ParseError::Invalid(_))) {
        return Ok(None);
    }
    let Some(len) = declared_len(&head) else { return Ok(None) };
    if len as u64 > end - off {
        return Ok(None);
    }
    let mut buf = vec![0u8; len];
    if src.read_at(&mut buf, off)? < len {
        return Ok(None);
    }
    Ok(parse_record(&buf, salt, crate::format::MAX_PAYLOAD_LEN).ok().map(|r| r.lsn))
}

/// The offset of the first valid record with an LSN above `prev` that starts after `from`,
/// if any, up to `end`.
///
/// This is how damage is classified: a torn tail has nothing of the log's future after it;
/// damage followed by such a record is in committed data. Old records (LSN at or below
/// `prev`, stale bytes) are no evidence of either.
pub fn find_valid_after<S: ReadAt + ?Sized>(
    src: &S,
    from: u64,
    end: u64,
    salt: u32,
    prev: u64,
    max_payload: usize,
) -> io::Result<Option<u64>> {
    let magic = RECORD_MAGIC.to_le_bytes();
    let mut off = from;
    let mut buf = vec![0u8; CHUNK];
    while off < end {
        let n = src.read_at(&mut buf[..((end - off) as usize).min(CHUNK)], off)?;
        if n < 2 {
            break;
        }
        for i in 0..n - 1 {
            if buf[i] == magic[0] && buf[i + 1] == magic[1] {
                let at = off + i as u64;
                let mut sc = Scanner::new(src, at, end, salt, max_payload);
                if let Item::Record(_, rec) = sc.next_item()? {
                    if rec.lsn > prev {
                        return Ok(Some(at));
                    }
                }
            }
        }
        off += (n - 1) as u64;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::format::{encode_record, Op};

    const SALT: u32 = 7;

    fn record(lsn: u64) -> Vec<u8> {
        let mut out = Vec::new();
        encode_record(&mut out, Op::Task, 1, 0, SALT, lsn, 0, b"task", |p| p.push(1));
        out
    }

    /// Bytes that a writer fills in after the first `reads_before` reads of `at..`.
    struct Live {
        before: Vec<u8>,
        after: Vec<u8>,
        reads_before: usize,
        reads: Cell<usize>,
    }

    impl ReadAt for Live {
        fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
            let n = self.reads.get();
            self.reads.set(n + 1);
            let src = if n < self.reads_before { &self.before } else { &self.after };
            src.read_at(buf, off)
        }
    }

    fn follows_one(lsn: u64) -> bool {
        lsn == 1
    }

    #[test]
    fn zeros_to_the_end_are_free_space() {
        let file = vec![0u8; 4096];
        assert_eq!(judge(&file, 0, 4096, (SALT, 0, 0), 0, &follows_one).unwrap(), Stop::FreeSpace);
    }

    #[test]
    fn a_half_written_record_with_nothing_after_it_is_a_torn_tail() {
        let mut file = record(1);
        file.truncate(file.len() - 3);
        file.resize(4096, 0);
        assert_eq!(judge(&file, 0, 4096, (SALT, 0, 0), 0, &follows_one).unwrap(), Stop::Torn);
    }

    #[test]
    fn a_bad_last_record_a_clean_close_made_durable_is_damage_not_a_torn_tail() {
        let mut file = record(1);
        file[40] ^= 1;
        let len = file.len() as u64;
        // Nothing follows it: a torn tail, unless a clean close made it durable.
        assert_eq!(judge(&file, 0, len, (SALT, 0, 0), 0, &follows_one).unwrap(), Stop::Torn);
        assert_eq!(judge(&file, 0, len, (SALT, 0, len), 0, &follows_one).unwrap(), Stop::Damage(0));
        // Zeros over it are damage too: a clean close trims the space written ahead.
        let zeros = vec![0u8; len as usize];
        assert_eq!(judge(&zeros, 0, len, (SALT, 0, len), 0, &follows_one).unwrap(), Stop::Damage(0));
        // A file cut short of that end lost its tail already: the fragment is a torn tail.
        let short = record(1)[..len as usize - 3].to_vec();
        let end = short.len() as u64;
        assert_eq!(judge(&short, 0, end, (SALT, 0, len), 0, &follows_one).unwrap(), Stop::Torn);
        // Past the durable end (a writer's later appends), the old rule.
        let mut after = record(1);
        let at = after.len() as u64;
        after.extend(file);
        let end = after.len() as u64;
        assert_eq!(judge(&after, at, end, (SALT, 0, at), 1, &|l| l == 2).unwrap(), Stop::Torn);
    }

    #[test]
    fn a_bad_record_followed_by_the_logs_future_is_damage() {
        let mut file = record(1);
        file[40] ^= 1;
        let at = file.len() as u64;
        file.extend(record(2));
        let end = file.len() as u64;
        assert_eq!(judge(&file, 0, end, (SALT, 0, 0), 0, &follows_one).unwrap(), Stop::Damage(at));
    }

    #[test]
    fn bytes_a_writer_filled_in_while_they_were_judged_are_read_again_not_called_damage() {
        // The reader saw zeros at 0 and, by the time it looked further, the writer had written
        // record 1 and record 2 after it: the spot changed, it is not damage.
        let mut after = record(1);
        after.extend(record(2));
        let end = after.len() as u64;
        let mut before = vec![0u8; after.len()];
        let second = record(1).len();
        before[second..].copy_from_slice(&after[second..]);
        for reads_before in 0..6 {
            let live =
                Live { before: before.clone(), after: after.clone(), reads_before, reads: Cell::new(0) };
            let stop = judge(&live, 0, end, (SALT, 0, 0), 0, &follows_one).unwrap();
            assert_eq!(stop, Stop::Changed, "with the writer done after {reads_before} reads");
        }
    }
}
