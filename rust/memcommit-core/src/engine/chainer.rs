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
use crate::format::chain::{self, ChainValue};
use crate::format::{self, HEADER_LEN};
use crate::recovery::scan::{Item, ReadAt, Scanner};

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

/// Hash records from `from` up to `end`, extending `value`.
pub fn extend<S: ReadAt + ?Sized>(
    src: &S,
    value: ChainValue,
    from: u64,
    end: u64,
    salt: u32,
) -> io::Result<ChainValue> {
    let mut last_end = (0, 0, value);
    extend_tracking(src, value, from, end, salt, 0, &mut last_end)
}

/// `extend`, also remembering the chain at the end of the newest commit in `last_end`.
pub fn extend_tracking<S: ReadAt + ?Sized>(
    src: &S,
    mut value: ChainValue,
    from: u64,
    end: u64,
    salt: u32,
    dense_from: u64,
    last_end: &mut CommitEnd,
) -> io::Result<ChainValue> {
    let mut sc = Scanner::new(src, from, end, salt, format::MAX_PAYLOAD_LEN);
    loop {
        match sc.next_item()? {
            Item::Record(off, rec) => {
                value = chain::step(&value, rec.bytes);
                if rec.closes_commit(dense_from) {
                    *last_end = (off + rec.bytes.len() as u64, rec.lsn, value);
                }
            }
            Item::End => return Ok(value),
            Item::Bad(off, _) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("damaged record at byte offset {off} while hashing the chain"),
                ))
            }
        }
    }
}

impl Chainer {
    /// Start hashing `file` (whose header is `header`) up to `end`, then whatever is published.
    pub fn start(file: Arc<FileAppender>, header: &[u8], salt: u32, end: u64) -> Chainer {
        Chainer::start_from(file, header, salt, (HEADER_LEN as u64, 0, chain::start(header)), end)
    }

    /// Start from a known point: the chain is `from.2` after the record ending at byte
    /// `from.0`, whose LSN is `from.1` (a snapshot's).
    pub fn start_from(
        file: Arc<FileAppender>,
        header: &[u8],
        salt: u32,
        from: CommitEnd,
        end: u64,
    ) -> Chainer {
        let dense_from = format::FileHeader::decode(header).map_or(0, |h| h.dense_from);
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
            .spawn(move || run(&s, &file, salt, dense_from))
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

fn run(s: &Shared, file: &FileAppender, salt: u32, dense_from: u64) {
    let (mut pos, mut value, mut last_end) = {
        let p = s.progress.lock().unwrap_or_else(|e| e.into_inner());
        (p.pos, p.value, p.last_end)
    };
    loop {
        let target = s.published.load(Ordering::SeqCst);
        if pos < target {
            let step_end = target;
            let result = extend_tracking(file, value, pos, step_end, salt, dense_from, &mut last_end);
            let mut p = s.progress.lock().unwrap_or_else(|e| e.into_inner());
            match result {
                Ok(v) => {
                    (pos, value) = (step_end, v);
                    (p.pos, p.value, p.last_end) = (pos, value, last_end);
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
