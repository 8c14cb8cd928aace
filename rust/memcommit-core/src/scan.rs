//! Reading records in order from a file or a buffer, in large chunks.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::format::{parse_record, view_trusted, ParseError, RecordView, RECORD_HEADER_LEN, RECORD_MAGIC};

/// Something records can be read from by offset.
pub trait ReadAt {
    /// Read up to `buf.len()` bytes at `off`; fewer only at the end.
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize>;
}

impl ReadAt for File {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match FileExt::read_at(self, &mut buf[done..], off + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
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
