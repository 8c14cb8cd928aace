//! Appending to the log file with group commit.
//!
//! A finished commit's bytes are queued here, in memory, and the committer then asks for them
//! to be written (or made durable). Whoever holds the I/O lock writes everything queued so far
//! with one `pwrite` and, for durability, one `fdatasync`; the committers that queued while it
//! worked find their bytes written by the next holder, so one fsync covers many commits.
//!
//! Why a queue instead of writing at commit time: while `fdatasync` writes a page back, a
//! `pwrite` to that same page (the log's last page) can wait for the writeback to finish
//! (stable pages). Writing at commit time under the writer lock therefore serialised every
//! commit behind the previous fsync; queueing lets commits go on while the fsync runs.
//!
//! Readers of recent offsets see queued bytes: `read_at` serves what is still queued from the
//! queue and the rest from the file.
//!
//! Small commits write into space the appender zero-filled ahead of them (`PREALLOCATE` at a
//! time). An fdatasync that must also record a new file size commits the file system's journal;
//! one over bytes that only overwrite already-written blocks does not, and costs 25-40% less
//! here. While a writer is open the file may therefore end in zeros: op 0 is reserved, so they
//! never parse as a record, and a reader treats an all-zero tail as free space, not a torn
//! write. `close` cuts them; after a crash the next writer's open does. The zeros are written
//! (`pwrite`), not reserved with `posix_fallocate`/`fallocate`: a reserved but unwritten
//! extent must still be converted to written at the first write into it, a journal commit
//! of its own, which is the cost the preallocation is there to avoid; and writing zeros
//! works the same on every Unix (macOS has no `posix_fallocate`).
//!
//! Per platform: `sync_file_range` (a writeback hint) exists only on Linux and is a no-op
//! elsewhere; durability comes from `vfs::File::sync_data`, which is `fdatasync` on Linux and
//! `fcntl(F_FULLFSYNC)` on macOS.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Condvar;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::recovery::scan::ReadAt;
use crate::vfs::File;

#[derive(Default)]
struct Leader {
    busy: bool,
    failed: Option<Failure>,
}

/// Why writing the log out or syncing it failed.
#[derive(Clone, Debug)]
pub struct Failure {
    /// `"write"` or `"fsync"`.
    pub during: &'static str,
    /// The OS error's text.
    pub message: String,
    /// The OS error number, if it had one.
    pub errno: Option<i32>,
    /// For a full disk: the bytes past the end of the file that were being written (at least
    /// what the disk must make room for).
    pub needed: Option<u64>,
}

impl Failure {
    fn new(during: &'static str, e: &io::Error, needed: Option<u64>) -> Failure {
        let needed = needed.filter(|_| crate::vfs::no_space(e));
        Failure { during, message: e.to_string(), errno: e.raw_os_error(), needed }
    }

    /// What failed, as a sentence's clause: `write failed: No space left on device (os error 28);
    /// the disk is full: ...`.
    pub fn reason(&self) -> String {
        // What was being written, past the file's end: all of a commit that fits in one write,
        // the current piece of a larger one.
        let space = self
            .needed
            .map(|n| format!("; {}", crate::error::space_needed("at least", n)))
            .unwrap_or_default();
        format!("{} failed: {}{space}", self.during, self.message)
    }

    /// The failure as an `io::Error` (with its errno, when it had one).
    pub fn into_io(self) -> io::Error {
        match self.errno {
            Some(n) => io::Error::from_raw_os_error(n),
            None => io::Error::other(self.message),
        }
    }
}

struct Queue {
    /// The file offset of `bytes[0]`; everything before it is in the file.
    start: u64,
    bytes: Vec<u8>,
}

/// The log file with its write queue.
pub struct FileAppender {
    file: File,
    queue: Mutex<Queue>,
    /// Held while writing the queue out and while syncing.
    io: Mutex<()>,
    /// Whether a thread is syncing (the leader), and whether a sync failed.
    leader: std::sync::Mutex<Leader>,
    /// Signalled when a sync ends.
    synced_cv: Condvar,
    written: AtomicU64,
    synced: AtomicU64,
    syncs: AtomicU64,
    /// The file's size: everything past `written` up to here is zeros written ahead.
    allocated: AtomicU64,
    /// Committers inside a commit that have not queued their bytes yet.
    arriving: AtomicUsize,
    /// Commits queued since the last sync started, and how many the last sync covered.
    queued_commits: AtomicUsize,
    last_batch: AtomicUsize,
}

/// How much zero-filled space the appender keeps ahead of small commits.
pub const PREALLOCATE: u64 = 1 << 20;

/// A write at least this large extends the file itself instead (bulk loads write each byte once).
const LARGE_WRITE: usize = 256 << 10;

static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

/// The longest a syncing thread waits for committers on their way.
const MAX_GATHER: Duration = Duration::from_micros(200);

/// Counts one committer as arriving until it queues its bytes or gives up.
pub struct Arrival<'a>(&'a AtomicUsize);

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl FileAppender {
    /// An appender for `file`, whose bytes up to `end` are already durable (its whole length).
    pub fn new(file: File, end: u64) -> FileAppender {
        FileAppender {
            file,
            queue: Mutex::new(Queue { start: end, bytes: Vec::new() }),
            io: Mutex::new(()),
            leader: std::sync::Mutex::new(Leader::default()),
            synced_cv: Condvar::new(),
            written: AtomicU64::new(end),
            synced: AtomicU64::new(end),
            syncs: AtomicU64::new(0),
            allocated: AtomicU64::new(end),
            arriving: AtomicUsize::new(0),
            queued_commits: AtomicUsize::new(0),
            last_batch: AtomicUsize::new(0),
        }
    }

    /// A read-only view of `file`: every read goes to the file, whatever its length.
    pub fn reader(file: File) -> FileAppender {
        let a = FileAppender::new(file, u64::MAX);
        a.written.store(u64::MAX, Ordering::Release);
        a
    }

    /// Count a committer as on its way to the queue (see `sync_to`).
    pub fn arrive(&self) -> Arrival<'_> {
        self.arriving.fetch_add(1, Ordering::AcqRel);
        Arrival(&self.arriving)
    }

    /// The file itself (for metadata and truncation).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Count one finished commit as queued (see `sync_to`).
    pub fn count_commit(&self) {
        self.queued_commits.fetch_add(1, Ordering::AcqRel);
    }

    /// Queue `bytes`, which belong at offset `off`: right after everything queued before.
    pub fn queue(&self, off: u64, bytes: &[u8]) {
        let mut q = self.queue.lock();
        debug_assert_eq!(q.start + q.bytes.len() as u64, off, "appends must be contiguous");
        let _ = off;
        q.bytes.extend_from_slice(bytes);
    }

    /// Write out the queue (the I/O lock is held by the caller).
    fn drain(&self) -> Result<(), Failure> {
        let mut q = self.queue.lock();
        if !q.bytes.is_empty() {
            let end = q.start + q.bytes.len() as u64;
            let allocated = self.allocated.load(Ordering::Acquire);
            if end > allocated {
                if q.bytes.len() < LARGE_WRITE {
                    let to = (end / PREALLOCATE + 2) * PREALLOCATE;
                    match self.zero_fill(allocated, to) {
                        Ok(()) => self.allocated.store(to, Ordering::Release),
                        // Writing zeros ahead is only a saving: on a full disk (or past the
                        // process's file size limit) the commit is written without them, into
                        // whatever room is left.
                        Err((reached, e))
                            if crate::vfs::no_space(&e) || e.raw_os_error() == Some(libc::EFBIG) =>
                        {
                            self.allocated.store(reached.max(end), Ordering::Release)
                        }
                        Err((_, e)) => return Err(Failure::new("write", &e, None)),
                    }
                } else {
                    self.allocated.store(end, Ordering::Release);
                }
            }
            // The queue stays locked during the write, so a reader finds each byte either in
            // the queue or, after this, in the file.
            if let Err(e) = self.file.write_all_at(&q.bytes, q.start) {
                let size = self.file.len().unwrap_or(allocated);
                return Err(Failure::new("write", &e, Some(end.saturating_sub(size))));
            }
            q.start += q.bytes.len() as u64;
            q.bytes.clear();
            if q.bytes.capacity() > 8 << 20 {
                q.bytes = Vec::new();
            }
            self.written.store(q.start, Ordering::Release);
        }
        Ok(())
    }

    /// Write zeros from `from` to `to` (space for the commits to come); on failure, how far
    /// the zeros got.
    fn zero_fill(&self, mut from: u64, to: u64) -> Result<(), (u64, io::Error)> {
        while from < to {
            let n = ZEROS.len().min((to - from) as usize);
            self.file.write_all_at(&ZEROS[..n], from).map_err(|e| (from, e))?;
            from += n as u64;
        }
        Ok(())
    }

    /// Write `bytes`, which belong at offset `off` (right after everything queued before), to
    /// the file at once, without copying them into the queue first: a large commit's chunks,
    /// which the commit has whole in a buffer of its own. Whatever is queued before them is
    /// written first; readers find every byte in the queue or the file throughout.
    pub fn write_now(&self, off: u64, bytes: &[u8]) -> Result<(), Failure> {
        let _io = self.io.lock();
        self.drain()?;
        let mut q = self.queue.lock();
        debug_assert!(q.bytes.is_empty() && q.start == off, "appends must be contiguous");
        let end = off + bytes.len() as u64;
        if end > self.allocated.load(Ordering::Acquire) {
            self.allocated.store(end, Ordering::Release);
        }
        // The queue stays locked during the write, as in `drain`: a reader of these offsets
        // waits for it, then reads them from the file.
        if let Err(e) = self.file.write_all_at(bytes, off) {
            // Left as a failed `drain` leaves them: queued, not written (so the cut of the
            // refused commit meets the same failure, and the writer stops).
            q.bytes.extend_from_slice(bytes);
            let size = self.file.len().unwrap_or(off);
            return Err(Failure::new("write", &e, Some(end.saturating_sub(size))));
        }
        q.start = end;
        self.written.store(end, Ordering::Release);
        Ok(())
    }

    /// Make sure every byte before `end` is in the file (not necessarily durable).
    pub fn write_to(&self, end: u64) -> Result<(), Failure> {
        if self.written.load(Ordering::Acquire) >= end {
            return Ok(());
        }
        let _io = self.io.lock();
        self.drain()
    }

    /// Ask the kernel to start writing `from..to` of the file back to the disk now, without
    /// waiting for it (a large commit's chunks, as they are written): the fdatasync that ends
    /// the commit then finds most of them already on their way. A hint: durability still
    /// comes only from `sync_to`.
    pub fn start_writeback(&self, from: u64, to: u64) {
        self.file.start_writeback(from, to);
    }

    /// Make every byte before `end` durable: write the queue out and fdatasync, unless a sync
    /// that started after those bytes were queued already did. An error here leaves the file
    /// in an unknown state; the caller must stop writing (fsyncgate), and every later call
    /// fails too.
    ///
    /// One thread at a time leads: it writes the queue and syncs, the others wait on a
    /// condition variable and are all woken together when it is done. (Waiting on the I/O
    /// mutex instead woke them one by one, and the next sync started before most of them had
    /// queued their next commit.)
    pub fn sync_to(&self, end: u64) -> Result<(), Failure> {
        let mut g = self.leader.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if self.synced.load(Ordering::Acquire) >= end {
                return Ok(());
            }
            if let Some(f) = &g.failed {
                return Err(f.clone());
            }
            if !g.busy {
                break;
            }
            g = self.synced_cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        g.busy = true;
        drop(g);
        // Let committers that are on their way queue first, for at most a fraction of an
        // fsync: waiting a few microseconds for them costs far less than the whole extra fsync
        // they would otherwise wait for (PostgreSQL's commit_delay with commit_siblings,
        // bounded and only when someone is coming). On their way: inside a commit and not yet
        // queued; and, while fewer commits are queued than the last sync covered, the
        // committers that sync woke, who usually come straight back with their next commit.
        let deadline = Instant::now() + MAX_GATHER;
        let expect = self.last_batch.load(Ordering::Acquire);
        loop {
            std::thread::yield_now();
            let coming = self.arriving.load(Ordering::Acquire) > 0
                || self.queued_commits.load(Ordering::Acquire) < expect;
            if !coming || Instant::now() >= deadline {
                break;
            }
        }
        let result: Result<(), Failure> = (|| {
            let _io = self.io.lock();
            self.drain()?;
            let target = self.written.load(Ordering::Acquire);
            self.last_batch.store(self.queued_commits.swap(0, Ordering::AcqRel), Ordering::Release);
            self.file.sync_data().map_err(|e| Failure::new("fsync", &e, None))?;
            self.synced.store(target, Ordering::Release);
            self.syncs.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })();
        let mut g = self.leader.lock().unwrap_or_else(|e| e.into_inner());
        g.busy = false;
        if let Err(f) = &result {
            g.failed = Some(f.clone());
        }
        self.synced_cv.notify_all();
        result
    }

    /// The offset after the last queued byte.
    pub fn queued_end(&self) -> u64 {
        let q = self.queue.lock();
        q.start + q.bytes.len() as u64
    }

    /// The offset up to which the file holds every queued byte.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// The offset up to which bytes are known durable.
    pub fn synced(&self) -> u64 {
        self.synced.load(Ordering::Acquire)
    }

    /// fsyncs done so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Cut the zeros written ahead past `end`, the last commit's end (at close: a closed log
    /// holds nothing but its records). Not synced: if a crash undoes the cut, the zeros are
    /// back, harmless, and the next writer's open cuts them.
    pub fn trim(&self, end: u64) -> io::Result<()> {
        let _io = self.io.lock();
        if self.allocated.load(Ordering::Acquire) > end && self.written.load(Ordering::Acquire) <= end {
            self.file.set_len(end)?;
            self.allocated.store(end, Ordering::Release);
        }
        Ok(())
    }

    /// Cut the file (and the queue) back to `len`: a refused commit's bytes. Nothing from
    /// other commits can be queued meanwhile: the caller holds the writer lock.
    pub fn truncate(&self, len: u64) -> io::Result<()> {
        // Holding the I/O lock: no sync runs meanwhile (a sync holds it until it ends).
        let _io = self.io.lock();
        self.drain().map_err(Failure::into_io)?;
        self.file.set_len(len)?;
        let mut q = self.queue.lock();
        q.start = len;
        self.written.store(len, Ordering::Release);
        self.allocated.store(len, Ordering::Release);
        // Durability past the cut meant the cut bytes (a sync that ran while the refused
        // commit's chunks were written covered them): the bytes that come next there need a
        // sync of their own.
        self.synced.fetch_min(len, Ordering::AcqRel);
        Ok(())
    }
}

impl ReadAt for FileAppender {
    fn map(&self, off: u64, end: u64) -> Option<io::Result<crate::vfs::Mapped>> {
        // Bytes still in the write queue are not in the file yet.
        if end > self.written.load(Ordering::Acquire) {
            return None;
        }
        ReadAt::map(&self.file, off, end)
    }

    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let end = off + buf.len() as u64;
        if end <= self.written.load(Ordering::Acquire) {
            return ReadAt::read_at(&self.file, buf, off);
        }
        let q = self.queue.lock();
        if end <= q.start {
            // Written out since the check above.
            return ReadAt::read_at(&self.file, buf, off);
        }
        let from_file = q.start.saturating_sub(off).min(buf.len() as u64) as usize;
        let mut n = 0;
        if from_file > 0 {
            n = ReadAt::read_at(&self.file, &mut buf[..from_file], off)?;
            if n < from_file {
                return Ok(n);
            }
        }
        let qoff = (off + n as u64 - q.start) as usize;
        if qoff < q.bytes.len() {
            let take = (buf.len() - n).min(q.bytes.len() - qoff);
            buf[n..n + take].copy_from_slice(&q.bytes[qoff..qoff + take]);
            n += take;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn appender() -> (tempfile::TempDir, FileAppender) {
        let dir = tempfile::tempdir().unwrap();
        let f = crate::vfs::Open::create_truncate().open(&dir.path().join("a.log")).unwrap();
        (dir, FileAppender::new(f, 0))
    }

    #[test]
    fn bytes_written_again_after_a_cut_get_a_sync_of_their_own() {
        let (_dir, a) = appender();
        a.queue(0, &[1u8; 300]);
        a.sync_to(300).unwrap();
        assert_eq!((a.synced(), a.syncs()), (300, 1));
        // A refused commit's bytes are cut; a smaller commit takes their place.
        a.truncate(100).unwrap();
        assert_eq!(a.synced(), 100);
        a.queue(100, &[2u8; 50]);
        a.sync_to(150).unwrap();
        assert_eq!(a.syncs(), 2, "the new bytes were acknowledged without an fsync");
        assert_eq!(a.synced(), 150);
    }

    #[test]
    fn concurrent_committers_are_all_made_durable_and_share_syncs() {
        let (_dir, a) = appender();
        let next = Mutex::new(0u64);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..200 {
                        let end = {
                            let mut n = next.lock();
                            a.queue(*n, &[7u8; 100]);
                            *n += 100;
                            *n
                        };
                        a.sync_to(end).unwrap();
                        assert!(a.synced() >= end);
                    }
                });
            }
        });
        assert_eq!(a.synced(), 8 * 200 * 100);
        assert!(a.syncs() < 8 * 200, "{} syncs for {} commits: none shared", a.syncs(), 8 * 200);
        let mut back = vec![0u8; 8 * 200 * 100];
        ReadAt::read_at(a.file(), &mut back, 0).unwrap();
        assert!(back.iter().all(|&b| b == 7));
    }
}
