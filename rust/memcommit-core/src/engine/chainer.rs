//! The thread that keeps a file log's hash chain current.
//!
//! Hashing every record with blake3 costs about as much as everything else a commit does, so
//! the writer does not do it: each published commit moves `published` forward, and this thread
//! hashes the committed records (from the page cache, or the write queue) on the other core. Only committed bytes
//! are ever published, so a refused commit never reaches the chain. `value()` waits until the
//! chain covers everything published (a seal reads it there).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::engine::appender::FileAppender;
use crate::format::chain::{self, ChainValue, Linker};
use crate::format::{self, FileHeader, ParseError, HEADER_LEN};
use crate::recovery::scan::ReadAt;

struct Progress {
    /// The chain covers every record before this offset.
    pos: u64,
    value: ChainValue,
    /// The chain at the end of the newest commit hashed: (offset after it, its last LSN, value).
    last_end: CommitEnd,
    error: Option<String>,
}

/// The chain at the end of a commit: (offset after the commit, its last LSN, the value there).
pub type CommitEnd = (u64, u64, ChainValue);

struct Shared {
    published: AtomicU64,
    sleeping: AtomicBool,
    stop: AtomicBool,
    progress: Mutex<Progress>,
    work: Condvar,
    done: Condvar,
}

/// A running chain thread for one log file.
pub struct Chainer {
    shared: Arc<Shared>,
    handle: Mutex<Option<JoinHandle<()>>>,
}

/// How much the chain thread reads at a time.
const READ: usize = 4 << 20;

/// Hash records from `from` (a unit boundary where the chain is `value`) up to `end`,
/// extending the chain of a log with this header.
pub fn extend<S: ReadAt + ?Sized>(
    src: &S,
    header: &FileHeader,
    value: ChainValue,
    from: u64,
    end: u64,
) -> io::Result<ChainValue> {
    let mut last_end = (from, 0, value);
    extend_tracking(src, header, &mut last_end, end)
}

/// `extend` from the commit end `last_end`, leaving in it the chain at the end of the newest
/// commit hashed; returns the chain over everything up to `end`.
pub fn extend_tracking<S: ReadAt + ?Sized>(
    src: &S,
    header: &FileHeader,
    last_end: &mut CommitEnd,
    end: u64,
) -> io::Result<ChainValue> {
    let mut linker = Linker::new(header, last_end.2, last_end.1);
    let (salt, mut pos) = (header.salt(), last_end.0);
    let mut buf = Vec::new();
    while pos < end {
        let n = read_whole(src, pos, end, salt, &mut buf)?;
        linker.feed(&buf[..n], pos, |off, lsn, v| *last_end = (off, lsn, *v));
        pos += n as u64;
    }
    if let Some(lsn) = linker.finish() {
        *last_end = (end, lsn, linker.value());
    }
    Ok(linker.value())
}

/// Read whole records from `pos` (about `READ` bytes, more for one large record) into `buf`,
/// checking their framing (the checksums were checked when the records were written or
/// replayed); returns how many bytes of whole records `buf` holds.
fn read_whole<S: ReadAt + ?Sized>(
    src: &S,
    pos: u64,
    end: u64,
    salt: u32,
    buf: &mut Vec<u8>,
) -> io::Result<usize> {
    let damaged = |off: u64| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("damaged record at byte offset {off} while hashing the chain"),
        )
    };
    let mut want = (READ as u64).min(end - pos) as usize;
    loop {
        buf.resize(want, 0);
        let got = src.read_at(buf, pos)?;
        let mut off = 0;
        while off < got {
            match format::frame(&buf[off..got], salt, format::MAX_PAYLOAD_LEN) {
                Ok(len) => off += len,
                Err(ParseError::Incomplete) if got == want && pos + (got as u64) < end => break,
                Err(_) => return Err(damaged(pos + off as u64)),
            }
        }
        if off > 0 {
            return Ok(off);
        }
        if got < want {
            return Err(damaged(pos));
        }
        // One record larger than `want`: read it whole.
        want = (format::record_len(&buf[..]).max(want + 1) as u64).min(end - pos) as usize;
    }
}

impl Chainer {
    /// Start hashing `file` (whose header is `header`) up to `end`, then whatever is published.
    pub fn start(file: Arc<FileAppender>, header: &FileHeader, end: u64) -> Chainer {
        let start = (HEADER_LEN as u64, 0, chain::start(&header.encode()));
        Chainer::start_from(file, header, start, end)
    }

    /// Start from a known point: the chain is `from.2` after the record ending at byte
    /// `from.0`, whose LSN is `from.1` (a snapshot's).
    pub fn start_from(file: Arc<FileAppender>, header: &FileHeader, from: CommitEnd, end: u64) -> Chainer {
        let header = *header;
        let shared = Arc::new(Shared {
            published: AtomicU64::new(end),
            sleeping: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            progress: Mutex::new(Progress { pos: from.0, value: from.2, last_end: from, error: None }),
            work: Condvar::new(),
            done: Condvar::new(),
        });
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("memcommit-chain".into())
            .spawn(move || run(&s, &file, &header))
            .expect("spawn the chain thread");
        Chainer { shared, handle: Mutex::new(Some(handle)) }
    }

    /// Committed records now reach `end`.
    pub fn publish(&self, end: u64) {
        self.shared.published.store(end, Ordering::SeqCst);
        if self.shared.sleeping.load(Ordering::SeqCst) {
            let _g = self.shared.progress.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.work.notify_one();
        }
    }

    /// The chain value over every record before `end` (waits for the thread to get there).
    pub fn value(&self, end: u64) -> Result<ChainValue, String> {
        self.publish(end.max(self.shared.published.load(Ordering::SeqCst)));
        let mut p = self.shared.progress.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(e) = &p.error {
                return Err(e.clone());
            }
            if p.pos >= end {
                return Ok(p.value);
            }
            p = self.shared.done.wait(p).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The chain at the end of the newest commit the thread has hashed; never waits.
    pub fn newest_commit_end(&self) -> Result<CommitEnd, String> {
        let p = self.shared.progress.lock().unwrap_or_else(|e| e.into_inner());
        match &p.error {
            Some(e) => Err(e.clone()),
            None => Ok(p.last_end),
        }
    }

    /// Stop the thread (what is published and not yet hashed is left unhashed).
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        {
            let _g = self.shared.progress.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.work.notify_one();
        }
        if let Some(h) = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }
}

impl Drop for Chainer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(s: &Shared, file: &FileAppender, header: &FileHeader) {
    let (mut pos, mut last_end) = {
        let p = s.progress.lock().unwrap_or_else(|e| e.into_inner());
        (p.pos, p.last_end)
    };
    loop {
        let target = s.published.load(Ordering::SeqCst);
        if pos < target {
            let step_end = target;
            let result = extend_tracking(file, header, &mut last_end, step_end);
            let mut p = s.progress.lock().unwrap_or_else(|e| e.into_inner());
            match result {
                Ok(v) => {
                    pos = step_end;
                    (p.pos, p.value, p.last_end) = (pos, v, last_end);
                }
                Err(e) => {
                    p.error = Some(e.to_string());
                    s.done.notify_all();
                    return;
                }
            }
            s.done.notify_all();
            continue;
        }
        let p = s.progress.lock().unwrap_or_else(|e| e.into_inner());
        s.sleeping.store(true, Ordering::SeqCst);
        if s.stop.load(Ordering::SeqCst) {
            return;
        }
        if s.published.load(Ordering::SeqCst) > pos {
            s.sleeping.store(false, Ordering::SeqCst);
            continue;
        }
        let _p = s.work.wait_timeout(p, Duration::from_millis(200)).unwrap_or_else(|e| e.into_inner());
        s.sleeping.store(false, Ordering::SeqCst);
    }
}
