//! The log engine: open and replay, commit with group commit, refresh, reads.
//!
//! One `Log` is one open store. A file-backed writer holds an exclusive OS lock on
//! `<path>.lock` for as long as it is open; a read-only `Log` takes no lock and catches up with
//! `refresh`. A `Log` over RAM (`Log::memory`) runs the same code on a growing buffer.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use crate::engine::appender::{Failure, FileAppender};
use crate::engine::chainer::Chainer;
use crate::engine::replay::replay;
use crate::engine::state::{Medium, State};
use crate::error::{Error, Result};
use crate::format::chain::{self, ChainValue};
use crate::format::memory::{self, Command, PutCommand};
use crate::format::{self, parse_record, FileHeader, Op, HEADER_LEN, MAX_KEY_LEN};
use crate::persist::index_file::{self, IndexFileStatus};
use crate::recovery::scan::Item;
use crate::state::index::{Entry, Index, Query};
use crate::vfs::{self, File, Locked, Open};

/// When a commit's records reach stable storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// fsync before the commit returns; concurrent commits share one fsync.
    Commit,
    /// fsync on a timer and on flush/close.
    Batch,
    /// Left to the OS.
    None,
}

impl Durability {
    /// The mode a user names.
    pub fn parse(s: &str) -> Option<Durability> {
        match s {
            "commit" => Some(Durability::Commit),
            "batch" => Some(Durability::Batch),
            "none" => Some(Durability::None),
            _ => None,
        }
    }

    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Commit => "commit",
            Durability::Batch => "batch",
            Durability::None => "none",
        }
    }
}

/// How to open a log.
#[derive(Clone, Debug)]
pub struct Options {
    /// When commits reach stable storage.
    pub durability: Durability,
    /// The `Batch` timer.
    pub flush_interval_ms: u64,
    /// The largest record a commit may write.
    pub max_record_bytes: usize,
    /// Open as a reader.
    pub read_only: bool,
    /// A writer saves the index file when it closes a log that has grown by at least this
    /// many records since the index file it opened with (or since its creation); 0: never.
    pub index_file_every: u64,
    /// From how many vectors vector search goes to the approximate index (`search::ann`;
    /// default [`ANN_FROM`](crate::search::vectors::ANN_FROM)); `None`: always the exact scan.
    /// The first search that needs the graph starts its build on a thread of its own and
    /// searches are answered by the exact scan until it is ready (12 s at 100,000 vectors,
    /// minutes at 1,000,000: BENCHMARKS.md); commits never wait for it.
    pub approximate_from: Option<usize>,
    /// What errors call a log in RAM (default `:memory:`): a replica names the store it
    /// copies (a store in a database, say), so that damage found in its records says whose.
    pub name: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            durability: Durability::Commit,
            flush_interval_ms: 50,
            max_record_bytes: 16 << 20,
            read_only: false,
            index_file_every: 100_000,
            approximate_from: Some(crate::search::vectors::ANN_FROM),
            name: None,
        }
    }
}

/// What a reader sees of a memory: its index entry and its last put record.
#[derive(Clone, Debug)]
pub struct MemoryRead {
    /// The index entry.
    pub entry: Entry,
    /// The bytes of its last put record.
    pub put: Vec<u8>,
}

/// Facts about an open log.
#[derive(Clone, Debug)]
pub struct LogInfo {
    /// Records in the log.
    pub records: u64,
    /// Newest committed LSN.
    pub lsn: u64,
    /// Bytes of the log, header included.
    pub bytes: u64,
    /// Log generation.
    pub generation: u64,
    /// The store id, hex.
    pub store_id: String,
    /// Memories.
    pub memories: u64,
    /// Bytes cut from a torn tail when the log was opened.
    pub recovered_bytes: u64,
    /// fsyncs since the log was opened.
    pub fsyncs: u64,
    /// What the open made of the index file.
    pub index_file: IndexFileStatus,
}

/// The `Batch` timer thread and the flag that stops it.
type Flusher = (JoinHandle<()>, Arc<(std::sync::Mutex<bool>, Condvar)>);

/// One open store.
pub struct Log {
    pub(crate) state: RwLock<State>,
    /// The file and its write queue (group commit); `None` in RAM.
    pub(crate) appender: Option<Arc<FileAppender>>,
    poisoned: Mutex<Option<(String, Option<i32>)>>,
    is_poisoned: AtomicBool,
    lock_file: Mutex<Option<File>>,
    /// The writer's `flock` on the log file itself, on a handle of its own: a second name for
    /// the same file (a hard link) has a lock file of its own, but not a file of its own.
    file_lock: Mutex<Option<File>>,
    flusher: Mutex<Option<Flusher>>,
    pub(crate) opts: Options,
    path: Option<PathBuf>,
    pub(crate) display: String,
    recovered_bytes: u64,
    /// Keeps the hash chain of a file log current (`None` in RAM: computed when asked).
    pub(crate) chainer: OnceLock<Chainer>,
    /// The chain of a log in RAM as far as it was computed: (offset, value).
    pub(crate) ram_chain: Mutex<(u64, ChainValue)>,
    /// Seal automatically every so many records (`AutoSeal`).
    pub(crate) auto_seal: Mutex<Option<AutoSeal>>,
    /// Automatic seals that had to wait for the chain thread.
    pub(crate) auto_seal_waits: AtomicU64,
    /// What the open made of the index file.
    index_file_status: IndexFileStatus,
    /// Whether the open started from a snapshot (and so read only the log after it).
    opened_from_snapshot: bool,
    /// Ids that log compaction purged (from the compaction manifest).
    pub(crate) purged: Mutex<hashbrown::HashSet<String>>,
    /// Whether a put may name sources the store does not hold yet (an import replaying a log
    /// whose records compaction reordered); see [`Log::trust_sources`].
    trusted_sources: AtomicBool,
    /// The search index, built on first use (`engine::search`). Taken after the state lock;
    /// queries share it, bringing it up to date takes it alone.
    pub(crate) search: RwLock<crate::search::SearchState>,
}

/// Automatic sealing: after a commit that brings the records since the newest seal to
/// `every`, the writer appends a seal (keyed with `key`, if given).
#[derive(Clone, Copy, Debug)]
pub struct AutoSeal {
    /// Records between seals.
    pub every: u64,
    /// The seal key.
    pub key: Option<crate::format::seal::SealKey>,
}

/// A temp file beside the log, named so that a writer's open removes it if it is left behind:
/// `<log>.tmp-<what>-<pid>`.
pub(crate) fn temp_path(path: &Path, what: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".tmp-{what}-{}", std::process::id()));
    path.with_file_name(name)
}

fn new_store_id(display: &str) -> Result<[u8; 16]> {
    let mut id = [0u8; 16];
    getrandom::fill(&mut id)
        .map_err(|e| Error::io(display, "draw a store id for", io::Error::other(e.to_string())))?;
    Ok(id)
}

/// Say in the lock file that the log (of `header`) is durable through `end`: the writer just
/// fsynced it (see `format::CleanClose`). A hint for recovery: if it cannot be written, the
/// records' own `durable_gap` still say what they can.
fn mark_clean_close(lock: &File, header: &FileHeader, end: u64) {
    let marker = format::CleanClose { store_id: header.store_id, generation: header.generation, end };
    let _ = lock.write_all_at(&marker.encode(), 0).and_then(|()| lock.sync_data());
}

/// The writer's lock file, held. `made` when this call created it: dropped without `keep`
/// (an open that failed), it removes the file again before letting go of the lock, so a refused
/// file gets nothing left beside it.
struct WriterLock {
    file: Option<File>,
    made: Option<PathBuf>,
}

impl WriterLock {
    /// Keep the lock (and the file) for a store that opened.
    fn keep(mut self) -> File {
        self.made = None;
        self.file.take().expect("a WriterLock holds its file until kept")
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        // The name goes first, the lock after it (when `file` drops): a process that opened the
        // same file meanwhile finds, once it has the lock, that the name is gone (`lock_writer`).
        if let Some(lp) = self.made.take() {
            let _ = vfs::remove_file(&lp);
        }
    }
}

/// Take the writer's lock on `<path>.lock`, at once or not at all (`vfs::File::try_lock`,
/// `flock`). The lock is held as long as the returned file stays open. A lock taken on a file
/// whose name was removed meanwhile (a failed open that had made it) is let go and taken again
/// on the file now at the name.
fn lock_writer(path: &Path, display: &str) -> Result<WriterLock> {
    let lp = format::lock_path(path);
    let shown = || lp.display().to_string();
    for _ in 0..16 {
        let (f, made) = match Open::create_new().open(&lp) {
            Ok(f) => (f, true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let f = Open::read_write().open(&lp);
                match f {
                    Ok(f) => (f, false),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // removed meanwhile
                    Err(e) => return Err(Error::io(&shown(), "open the lock file", e)),
                }
            }
            Err(e) => return Err(Error::io(&shown(), "open the lock file", e)),
        };
        match f.try_lock() {
            Locked::Taken => {}
            Locked::Busy => return Err(Error::Locked { path: display.to_string() }),
            Locked::Failed(e) => return Err(Error::io(display, "lock", e)),
        }
        let ours = f.identity().map_err(|e| Error::io(&shown(), "stat the lock file", e))?;
        if vfs::identity(&lp).is_ok_and(|id| id == ours) {
            return Ok(WriterLock { file: Some(f), made: made.then(|| lp.clone()) });
        }
    }
    Err(Error::Locked { path: display.to_string() })
}

/// Take the writer's `flock` on the log file itself too, at once or not at all: the lock file
/// is named after the path, so two names of one file (hard links) would otherwise each get a
/// writer. A handle of its own, read-write (an exclusive lock over NFS needs one).
fn lock_log_file(path: &Path, display: &str) -> Result<File> {
    let f = Open::read_write().open(path).map_err(|e| Error::io(display, "open", e))?;
    match f.try_lock() {
        Locked::Taken => Ok(f),
        Locked::Busy => Err(Error::Locked { path: display.to_string() }),
        Locked::Failed(e) => Err(Error::io(display, "lock", e)),
    }
}

/// The header of the log file `file` and its bytes, or `Corrupt` for a file that does not
/// start with one.
fn read_header(file: &File, display: &str) -> Result<(FileHeader, [u8; HEADER_LEN])> {
    let mut hb = [0u8; HEADER_LEN];
    let n = file.read_at(&mut hb, 0).map_err(|e| Error::io(display, "read", e))?;
    let header = FileHeader::decode(&hb[..n]).map_err(|reason| Error::Corrupt {
        path: display.to_string(),
        offset: 0,
        lsn: 0,
        reason: format!(
            "{reason}. memcommit will not take over a file it does not recognise: check the path, \
             or restore the log from a backup"
        ),
    })?;
    Ok((header, hb))
}

/// Remove `<name>.tmp-*` files a crash left beside the log (a header that was never renamed
/// into place). Called only by the writer, which holds the lock.
fn remove_stale_temp_files(path: &Path) {
    let Some(name) = path.file_name() else { return };
    let mut prefix = name.to_owned();
    prefix.push(".tmp-");
    let prefix = prefix.to_string_lossy().into_owned();
    if let Ok(names) = vfs::names_beside(path) {
        for n in names {
            if n.to_string_lossy().starts_with(&prefix) {
                let _ = vfs::remove_file(&path.with_file_name(n));
            }
        }
    }
}

/// Create a new, empty log file durably: write a temp file, fsync, rename, fsync the directory.
fn create_log_file(path: &Path, display: &str) -> Result<()> {
    let store_id = new_store_id(display)?;
    let header = FileHeader { version: format::FORMAT_VERSION, store_id, generation: 0, dense_from: 0 };
    vfs::write_file_durably(&temp_path(path, "create"), path, |f| io::Write::write_all(f, &header.encode()))
        .map_err(|e| Error::io(display, "create the log", e))
}

impl Log {
    /// Open (creating if missing, unless read-only) the log at `path`.
    pub fn open(path: &Path, opts: Options) -> Result<Arc<Log>> {
        Log::open_inner(path, opts, None, None, &mut || Ok(()))
    }

    /// [`open`](Self::open), with the snapshot in the file `snapshot` if one is given (see
    /// [`open_with_snapshot_file`](Self::open_with_snapshot_file)), calling `between` every
    /// few megabytes of the replay: an open with no index file replays the whole log, which
    /// takes seconds at tens of millions of records. An error from `between` stops the open
    /// and is returned; the open has written nothing by then, and the lock is let go. The
    /// binding checks for Ctrl-C there.
    pub fn open_between(
        path: &Path,
        opts: Options,
        snapshot: Option<&Path>,
        between: &mut (dyn FnMut() -> Result<()> + Send),
    ) -> Result<Arc<Log>> {
        let snap = match snapshot {
            Some(file) => {
                let name = file.display().to_string();
                let text = vfs::read(file).map_err(|e| Error::io(&name, "read", e))?;
                Some(crate::persist::snapshot::parse(&text, &name)?)
            }
            None => None,
        };
        Log::open_inner(path, opts, None, snap, between)
    }

    /// Open with a snapshot (its JSON text): restore the index it holds, after checking it
    /// against the log, and replay only the records after it (see `snapshot`).
    pub fn open_with_snapshot(path: &Path, opts: Options, snapshot: &[u8]) -> Result<Arc<Log>> {
        let snap = crate::persist::snapshot::parse(snapshot, &path.display().to_string())?;
        Log::open_inner(path, opts, None, Some(snap), &mut || Ok(()))
    }

    /// `open`, for a writer that already holds the lock file (log compaction hands it over),
    /// with a snapshot, and calling `between` during the replay (see `open_between`).
    pub(crate) fn open_inner(
        path: &Path,
        opts: Options,
        held: Option<File>,
        snapshot: Option<crate::persist::snapshot::Snapshot>,
        between: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Arc<Log>> {
        let display = path.display().to_string();
        if opts.max_record_bytes == 0 || opts.max_record_bytes > format::MAX_PAYLOAD_LEN {
            return Err(Error::invalid(
                "max_record_bytes",
                format!("must be between 1 and {}", format::MAX_PAYLOAD_LEN),
            ));
        }
        if vfs::is_dir(path) {
            // Before anything is created beside it (the lock file).
            return Err(Error::io(&display, "open", io::Error::from_raw_os_error(21 /* EISDIR */)));
        }
        if vfs::is_special(path) {
            // A writer would replace a device or a FIFO with a log file of its own.
            return Err(Error::io(
                &display,
                "open",
                io::Error::other("not a regular file (a device, a FIFO or a socket); a store is a file"),
            ));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !vfs::is_dir(d)) {
            return Err(Error::io(
                &display,
                "open",
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("the directory {} does not exist", dir.display()),
                ),
            ));
        }
        let lock_file = if opts.read_only {
            None
        } else {
            // A file that is there and is not a log is refused before the lock file is made,
            // so nothing is left beside it.
            if held.is_none() {
                if let Ok(f) = Open::read().open(path) {
                    if f.len().is_ok_and(|n| n > 0) {
                        read_header(&f, &display)?;
                    }
                }
            }
            let f = match held {
                Some(f) => WriterLock { file: Some(f), made: None },
                None => lock_writer(path, &display)?,
            };
            // A missing file, or an empty one (nothing to lose: `touch memory.db`), becomes a
            // new log. Anything else must parse as a log: never overwrite an unknown file.
            // Only a file that is not there is missing: a stat that fails otherwise (an I/O
            // error, a permission) must never make a new log over the old one.
            let empty = match vfs::len(path) {
                Ok(n) => n == 0,
                Err(e) if e.kind() == io::ErrorKind::NotFound => true,
                Err(e) => return Err(Error::io(&display, "stat", e)),
            };
            if empty {
                remove_stale_temp_files(path);
                create_log_file(path, &display)?;
            }
            Some((f, lock_log_file(path, &display)?))
        };
        let (lock_file, file_lock) = lock_file.unzip();
        let file = Open::writable(!opts.read_only).open(path).map_err(|e| Error::io(&display, "open", e))?;
        let file_len = file.len().map_err(|e| Error::io(&display, "stat", e))?;
        let (header, hb) = read_header(&file, &display)?;
        let mut index_file_status = IndexFileStatus::NotUsed;
        let mut drop_index_file = false;
        let mut st = State::empty(header, Medium::File(Arc::new(FileAppender::reader(file))));
        st.durable_floor = crate::recovery::durable_floor(path, &header);
        let mut chain_from = None;
        let Medium::File(a) = &st.medium else { unreachable!("opened a file") };
        let opened_from_snapshot = snapshot.is_some();
        let restored = if let Some(snap) = snapshot {
            Some(crate::persist::snapshot::restore(snap, a.file(), file_len, &header, &display)?)
        } else {
            match index_file::load(path, a.file(), file_len, &header, &display) {
                Ok(r) => {
                    index_file_status =
                        if r.is_some() { IndexFileStatus::Loaded } else { IndexFileStatus::Absent };
                    r
                }
                Err(why) => {
                    drop_index_file = !opts.read_only;
                    index_file_status = IndexFileStatus::Ignored(why);
                    None
                }
            }
        };
        if let Some(r) = restored {
            (st.index, st.end, st.lsn, st.records, st.sparse) = (r.index, r.end, r.lsn, r.records, r.sparse);
            if index_file_status == IndexFileStatus::Loaded {
                st.indexed_records = r.records;
            }
            chain_from = Some((r.end, r.lsn, r.chain));
        }
        let replay_from = st.end;
        let good_end = replay(&mut st, replay_from, file_len, &display, between)?;
        st.index.finish_replay();
        st.recent_commits = VecDeque::from([st.lsn]);
        let mut recovered_bytes = 0;
        let Medium::File(appender) = &st.medium else { unreachable!("opened a file") };
        let file = appender.file();
        if !opts.read_only && good_end < file_len {
            // Truncating is safe only here: nothing valid follows `good_end` (replay checked),
            // so the bytes after it are a write that never finished, never acknowledged, or
            // zeros a writer wrote ahead and did not get to trim.
            file.set_len(good_end).map_err(|e| Error::io(&display, "truncate the torn tail of", e))?;
            file.sync_all().map_err(|e| Error::io(&display, "fsync", e))?;
            recovered_bytes = file_len - good_end;
        }
        if !opts.read_only {
            // Only an open that succeeds changes what lies beside the log: temp files a crash
            // left, and an index file that does not fit (of an older generation, or damaged),
            // which the next close writes afresh when it is worth it.
            remove_stale_temp_files(path);
            if drop_index_file {
                let _ = vfs::remove_file(&index_file::path_for(path));
            }
            // The log's own name made durable before a commit is acknowledged in it: a crash
            // (or a failed fsync) right after a compaction's rename can leave the directory
            // entry unsynced, and a power loss would then bring back the old generation
            // without the commits made here.
            vfs::sync_dir(path).map_err(|e| Error::io(&display, "fsync the directory of", e))?;
        }
        if let Some(lock) = lock_file.as_ref().and_then(|l| l.file.as_ref()) {
            // A clean close's marker past the end this open found (a log cut by hand, or put
            // back from an older copy) would make a later tear there look like damage: the
            // log is made durable and the marker moved back to where it ends.
            if st.durable_floor > good_end {
                file.sync_all().map_err(|e| Error::io(&display, "fsync", e))?;
                mark_clean_close(lock, &st.header, good_end);
                st.durable_floor = good_end;
            }
        }
        // A writer appends after the last commit; a reader reads whatever the file holds.
        let file = file.try_clone().map_err(|e| Error::io(&display, "open", e))?;
        let appender = Arc::new(if opts.read_only {
            FileAppender::reader(file)
        } else {
            FileAppender::new(file, st.end)
        });
        st.medium = Medium::File(appender.clone());
        // A writer keeps the chain current from the start (a seal costs nothing extra); a
        // reader starts hashing only when first asked for the chain (`chain_value`).
        let chainer = OnceLock::new();
        if !opts.read_only {
            let c = match chain_from {
                Some(from) => Chainer::start_from(appender.clone(), &st.header, from, st.end),
                None => Chainer::start(appender.clone(), &st.header, st.end),
            };
            let _ = chainer.set(c);
        } else if let Some(from) = chain_from {
            let _ = chainer.set(Chainer::start_from(appender.clone(), &st.header, from, st.end));
        }
        let log = Arc::new(Log {
            state: RwLock::new(st),
            appender: Some(appender),
            poisoned: Mutex::new(None),
            is_poisoned: AtomicBool::new(false),
            lock_file: Mutex::new(lock_file.map(WriterLock::keep)),
            file_lock: Mutex::new(file_lock),
            flusher: Mutex::new(None),
            opts,
            path: Some(path.to_path_buf()),
            display,
            recovered_bytes,
            chainer,
            ram_chain: Mutex::new((HEADER_LEN as u64, chain::start(&hb))),
            auto_seal: Mutex::new(None),
            auto_seal_waits: AtomicU64::new(0),
            purged: Mutex::new(hashbrown::HashSet::new()),
            trusted_sources: AtomicBool::new(false),
            search: RwLock::new(Default::default()),
            index_file_status,
            opened_from_snapshot,
        });
        if !log.opts.read_only && log.opts.durability == Durability::Batch {
            log.start_flusher();
        }
        Ok(log)
    }

    /// A log in RAM: the same engine, nothing durable.
    pub fn memory(opts: Options) -> Result<Arc<Log>> {
        let store_id = new_store_id(":memory:")?;
        Log::memory_with(
            FileHeader { version: format::FORMAT_VERSION, store_id, generation: 0, dense_from: 0 },
            opts,
        )
    }

    /// A log in RAM with this header (a replica's: the same store id, so the same salt).
    pub(crate) fn memory_with(header: FileHeader, opts: Options) -> Result<Arc<Log>> {
        let hb = header.encode();
        let st = State::empty(header, Medium::Memory(hb.to_vec()));
        Ok(Arc::new(Log {
            state: RwLock::new(st),
            appender: None,
            poisoned: Mutex::new(None),
            is_poisoned: AtomicBool::new(false),
            lock_file: Mutex::new(None),
            file_lock: Mutex::new(None),
            flusher: Mutex::new(None),
            display: opts.name.clone().unwrap_or_else(|| ":memory:".to_string()),
            opts: Options { durability: Durability::None, ..opts },
            path: None,
            recovered_bytes: 0,
            chainer: OnceLock::new(),
            ram_chain: Mutex::new((HEADER_LEN as u64, chain::start(&hb))),
            auto_seal: Mutex::new(None),
            auto_seal_waits: AtomicU64::new(0),
            purged: Mutex::new(hashbrown::HashSet::new()),
            trusted_sources: AtomicBool::new(false),
            search: RwLock::new(Default::default()),
            index_file_status: IndexFileStatus::NotUsed,
            opened_from_snapshot: false,
        }))
    }

    fn start_flusher(self: &Arc<Self>) {
        let weak: Weak<Log> = Arc::downgrade(self);
        let stop = Arc::new((std::sync::Mutex::new(false), Condvar::new()));
        let stop2 = stop.clone();
        let interval = Duration::from_millis(self.opts.flush_interval_ms.max(1));
        let handle = std::thread::spawn(move || loop {
            let (lock, cv) = &*stop2;
            let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
            // The flag is checked before waiting too: a close that came before this thread
            // first waited must not wait out a whole interval.
            let (guard, _) = cv
                .wait_timeout_while(guard, interval, |stopped| !*stopped)
                .unwrap_or_else(|e| e.into_inner());
            if *guard {
                return;
            }
            drop(guard);
            let Some(log) = weak.upgrade() else { return };
            // A failure poisons the writer; the next commit reports it.
            let _ = log.sync_to(u64::MAX);
        });
        *self.flusher.lock() = Some((handle, stop));
    }

    /// The path, or ":memory:".
    pub fn display(&self) -> &str {
        &self.display
    }

    /// The path of a file-backed log.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The options the log was opened with.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Refuse a call on a closed store, or on one whose writer failed. A commit is visible to
    /// reads as soon as it is applied, before its fsync; once a write or fsync has failed, the
    /// state in memory may hold commits the disk never got, so reads are refused as well as
    /// writes (`WriterFailed`) until the store is reopened from what is on disk.
    pub(crate) fn check_open(&self, st: &State) -> Result<()> {
        if st.closed {
            return Err(Error::Closed { path: self.display.clone(), why: st.closed_why.clone() });
        }
        self.check_not_failed()
    }

    /// Refuse a read once a write or fsync has failed (`WriterFailed`). Takes no lock (a flag),
    /// so callers outside the core that keep state of their own (the roles' cache) can ask it
    /// before every read.
    pub fn check_not_failed(&self) -> Result<()> {
        if self.is_poisoned.load(Ordering::Acquire) {
            let (reason, errno) = self.poisoned.lock().clone().unwrap_or_default();
            return Err(Error::WriterFailed {
                path: self.display.clone(),
                reason: format!(
                    "{reason}; reads are refused too, since the state in memory may hold commits the \
                     disk does not: reopen the store"
                ),
                errno,
            });
        }
        Ok(())
    }

    pub(crate) fn check_writer(&self, st: &State) -> Result<()> {
        self.check_open(st)?;
        if self.opts.read_only {
            return Err(Error::ReadOnly { path: self.display.clone() });
        }
        self.check_poison()
    }

    pub(crate) fn poison(&self, reason: String, errno: Option<i32>) {
        let mut p = self.poisoned.lock();
        if p.is_none() {
            *p = Some((reason, errno));
        }
        self.is_poisoned.store(true, Ordering::Release);
    }

    /// Stop the writer after the log's write or fsync failed, and say so.
    pub(crate) fn failed(&self, f: Failure) -> Error {
        let reason = f.reason();
        self.poison(reason.clone(), f.errno);
        Error::WriterFailed { path: self.display.clone(), reason, errno: f.errno }
    }

    /// Check one put's input as a commit of it will, before anything is locked or written:
    /// its id, kind, task, tags and sources as keys, its vector's values, and the size of the
    /// record it makes against `max_record_bytes`. Returns that size. (Whether a vector has
    /// the store's dimension is the commit's check.)
    pub fn check_put<S: AsRef<str>>(&self, p: &PutCommand<S>) -> Result<usize> {
        check_key("id", p.id.as_ref())?;
        check_key("kind", p.kind.as_ref())?;
        if let Some(t) = &p.task {
            check_key("task", t.as_ref())?;
        }
        if p.tags.len() > u16::MAX as usize {
            return Err(Error::invalid("tags", "too many tags"));
        }
        if p.sources.len() > u16::MAX as usize {
            return Err(Error::invalid("sources", "too many sources"));
        }
        for t in &p.tags {
            check_key("tags", t.as_ref())?;
        }
        for s in &p.sources {
            check_key("sources", s.as_ref())?;
        }
        if let Some(v) = &p.vector {
            check_vector(p.id.as_ref(), v)?;
        }
        let size = format::RECORD_OVERHEAD + p.id.as_ref().len() + memory::put_payload_len(p);
        if size > self.opts.max_record_bytes {
            // Named after the field that takes the most of the record.
            let parts = [
                ("text", p.text.as_ref().len()),
                ("data", p.data.as_ref().map_or(0, |d| d.as_ref().len())),
                ("tags", p.tags.iter().map(|t| 2 + t.as_ref().len()).sum()),
                ("sources", p.sources.iter().map(|s| 2 + s.as_ref().len()).sum()),
                ("vector", p.vector.as_ref().map_or(0, |v| 4 * v.len())),
            ];
            let (field, bytes) = parts.into_iter().max_by_key(|&(_, n)| n).unwrap_or(("text", 0));
            return Err(Error::invalid(
                field,
                format!(
                    "the memory {:?} would make a {size}-byte record ({bytes} bytes of it its \
                     {field}); max_record_bytes is {}",
                    p.id.as_ref(),
                    self.opts.max_record_bytes
                ),
            ));
        }
        Ok(size)
    }

    /// Check a command's input before anything is locked or written.
    pub(crate) fn validate<S: AsRef<str>>(&self, cmd: &Command<S>) -> Result<()> {
        match cmd {
            Command::Put(p) => {
                self.check_put(p)?;
            }
            Command::SetStatus { id, reason, .. } => {
                check_key("id", id.as_ref())?;
                if let Some(r) = reason {
                    let size = r.as_ref().len() + format::RECORD_OVERHEAD + id.as_ref().len() + 6;
                    if size > self.opts.max_record_bytes {
                        return Err(Error::invalid(
                            "reason",
                            format!(
                                "the status change of memory {:?} would make a {size}-byte record \
                                 ({} bytes of it its reason); max_record_bytes is {}",
                                id.as_ref(),
                                r.as_ref().len(),
                                self.opts.max_record_bytes
                            ),
                        ));
                    }
                }
            }
            Command::Move { id, .. } => check_key("id", id.as_ref())?,
            Command::FinishTask { task } => check_key("task", task.as_ref())?,
            Command::Expect(x) => check_key("id", x.id.as_ref())?,
        }
        Ok(())
    }

    /// Run a commit: check `expect_lsn` and every guard against the state as the commit's own
    /// earlier operations leave it, then append all records with consecutive LSNs, or none;
    /// under `Durability::Commit`, return only once they are on stable storage.
    /// Returns the first and last LSN written, or `None` when nothing was written.
    pub fn commit<S: AsRef<str>>(
        &self,
        cmds: &[Command<S>],
        expect_lsn: Option<u64>,
        at: i64,
    ) -> Result<Option<(u64, u64)>> {
        let mut c = self.begin(expect_lsn, at, cmds.len())?;
        for (i, cmd) in cmds.iter().enumerate() {
            if let Some(next) = cmds.get(i + 1).and_then(Command::memory_id) {
                c.prefetch(next);
            }
            c.push(cmd)?;
        }
        let done = c.finish()?;
        match done {
            Some(d) => {
                self.wait_durable(d.end)?;
                Ok(Some((d.first_lsn, d.last_lsn)))
            }
            None => Ok(None),
        }
    }

    /// Wait until every byte up to `end` is durable, as the durability mode promises: under
    /// `Commit` this syncs (sharing the fsync with concurrent committers); otherwise it
    /// returns at once.
    pub fn wait_durable(&self, end: u64) -> Result<()> {
        match self.opts.durability {
            Durability::Commit => self.sync_to(end),
            // In the OS's hands when the commit returns: a crash of the process loses nothing.
            Durability::Batch | Durability::None => self.write_to(end),
        }
    }

    /// Make every committed byte before `end` durable (`u64::MAX`: everything queued).
    ///
    /// Group commit happens in the appender: one fdatasync covers every commit queued before
    /// it started. An fsync error is fatal for the writer: after a failed fsync the kernel
    /// may have dropped the dirty pages, so a retry that "succeeds" proves nothing (fsyncgate).
    pub(crate) fn sync_to(&self, end: u64) -> Result<()> {
        let Some(a) = &self.appender else { return Ok(()) };
        if a.synced() >= end {
            return Ok(());
        }
        self.check_poison()?;
        let end = end.min(a.queued_end());
        a.sync_to(end).map_err(|f| self.failed(f))
    }

    /// Make sure every committed byte before `end` is in the file (no fsync).
    pub(crate) fn write_to(&self, end: u64) -> Result<()> {
        let Some(a) = &self.appender else { return Ok(()) };
        if a.written() >= end {
            return Ok(());
        }
        self.check_poison()?;
        a.write_to(end).map_err(|f| self.failed(f))
    }

    fn check_poison(&self) -> Result<()> {
        if self.is_poisoned.load(Ordering::Acquire) {
            let (reason, errno) = self.poisoned.lock().clone().unwrap_or_default();
            return Err(Error::WriterFailed { path: self.display.clone(), reason, errno });
        }
        Ok(())
    }

    /// fsync everything written, whatever the durability mode.
    pub fn flush(&self) -> Result<()> {
        {
            let st = self.state.read();
            self.check_open(&st)?;
        }
        if self.opts.read_only {
            return Ok(());
        }
        self.sync_to(u64::MAX)
    }

    /// Sync (in every durability mode), stop the timer, release the lock. Idempotent.
    pub fn close(&self) -> Result<()> {
        if let Some((handle, stop)) = self.flusher.lock().take() {
            *stop.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
            stop.1.notify_all();
            // The timer thread itself closes the log when it held the last handle (it upgrades
            // its weak one to sync): it cannot wait for itself, and returns right after.
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
        let mut st = self.state.write();
        if st.closed {
            if let Some(c) = self.chainer.get() {
                c.stop();
            }
            return Ok(());
        }
        // Every mode syncs at close (one fsync), so that the clean-close marker below can say
        // the log is durable.
        let mut result = if !self.opts.read_only { self.sync_to(u64::MAX) } else { Ok(()) };
        // A closed log holds nothing but its records: cut the zeros written ahead.
        if let (Ok(()), Some(a)) = (&result, &self.appender) {
            if !self.opts.read_only {
                result = a
                    .trim(st.end)
                    .map_err(|e| Error::io(&self.display, "trim the space written ahead in", e));
            }
        }
        // The index file, when the log has grown enough since the last one. It is a cache: a
        // failure to write it loses nothing, so it does not fail the close.
        let every = self.opts.index_file_every;
        if result.is_ok()
            && !self.opts.read_only
            && every > 0
            && st.records >= st.indexed_records.saturating_add(every)
            && !self.is_poisoned.load(Ordering::SeqCst)
            && self.write_index_file_locked(&st).is_ok()
        {
            st.indexed_records = st.records;
        }
        if result.is_ok() && !self.opts.read_only && !self.is_poisoned.load(Ordering::SeqCst) {
            if let Some(lock) = self.lock_file.lock().as_ref() {
                mark_clean_close(lock, &st.header, st.end);
            }
        }
        if let Some(c) = self.chainer.get() {
            c.stop();
        }
        st.closed = true;
        // A closed log reads nothing more: free the index now (and unmap an index file it
        // was read from), not when the last handle goes; and the search index, which stops a
        // graph build under way.
        st.index = Index::new();
        *self.search.write() = Default::default();
        drop(st);
        // Dropping the lock file's handle, and the log file's own, releases the OS locks.
        self.lock_file.lock().take();
        self.file_lock.lock().take();
        result
    }

    /// Take the lock file's handle (the OS lock stays held while the handle lives).
    pub(crate) fn take_lock_file(&self) -> Option<File> {
        self.lock_file.lock().take()
    }

    /// The file path, if the log has one.
    pub(crate) fn file_path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Add ids to the set of purged ids (from the compaction manifest).
    pub fn add_purged<S: AsRef<str>>(&self, ids: &[S]) {
        let mut p = self.purged.lock();
        p.extend(ids.iter().map(|s| s.as_ref().to_string()));
    }

    /// Let puts name sources the store does not hold yet (`on`), or check them again: for an
    /// import, which replays another store's records in their log's order, where a memory's
    /// last put may come after the puts that name it.
    pub fn trust_sources(&self, on: bool) {
        self.trusted_sources.store(on, Ordering::Release);
    }

    /// Whether puts may name sources the store does not hold yet ([`Log::trust_sources`]).
    pub fn trusts_sources(&self) -> bool {
        self.trusted_sources.load(Ordering::Acquire)
    }

    /// Whether log compaction purged this id.
    pub fn is_purged(&self, id: &str) -> bool {
        self.purged.lock().contains(id)
    }

    /// Whether the file at the log's path is no longer the file this log reads (log compaction
    /// replaced it): a reader must open it again.
    pub fn replaced_on_disk(&self) -> Result<bool> {
        let (Some(path), Some(a)) = (&self.path, &self.appender) else { return Ok(false) };
        let ours = a.file().identity().map_err(|e| Error::io(&self.display, "stat", e))?;
        match vfs::identity(path) {
            Ok(id) => Ok(id != ours),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io(&self.display, "stat", e)),
        }
    }

    /// Whether the log is closed.
    pub fn is_closed(&self) -> bool {
        self.state.read().closed
    }

    /// Catch a reader up with what the writer appended. Returns how many records were applied.
    pub fn refresh(&self) -> Result<u64> {
        self.refresh_between(&mut || Ok(()))
    }

    /// [`refresh`](Self::refresh), calling `between` every few megabytes of what it applies
    /// (a reader far behind may have millions of records to catch up with). An error from it
    /// stops the refresh at the last whole commit applied, and is returned: the reader is
    /// then behind, never half way through a commit, and the next refresh goes on from there.
    pub fn refresh_between(&self, between: &mut (dyn FnMut() -> Result<()> + Send)) -> Result<u64> {
        let mut st = self.state.write();
        self.check_open(&st)?;
        let Medium::File(f) = &st.medium else {
            return Ok(0);
        };
        if !self.opts.read_only {
            return Ok(0);
        }
        let len = f.file().len().map_err(|e| Error::io(&self.display, "stat", e))?;
        if len <= st.end {
            return Ok(0);
        }
        let before = st.records;
        let start = st.end;
        // A writer may be mid-append: a record cut short at the end is simply not there yet.
        let replayed = replay(&mut st, start, len, &self.display, between);
        if let Some(c) = self.chainer.get() {
            c.publish(st.end);
        }
        replayed.map(|_| st.records - before)
    }

    /// Facts about the log.
    pub fn info(&self) -> Result<LogInfo> {
        let st = self.state.read();
        self.check_open(&st)?;
        Ok(LogInfo {
            records: st.records,
            lsn: st.lsn,
            bytes: st.end,
            generation: st.header.generation,
            store_id: format::hex(&st.header.store_id),
            memories: st.index.len() as u64,
            recovered_bytes: self.recovered_bytes,
            fsyncs: self.appender.as_ref().map_or(0, |a| a.syncs()),
            index_file: self.index_file_status.clone(),
        })
    }

    /// Newest committed LSN.
    pub fn lsn(&self) -> u64 {
        self.state.read().lsn
    }

    /// Number of memories.
    pub fn len(&self) -> Result<usize> {
        let st = self.state.read();
        self.check_open(&st)?;
        Ok(st.index.len())
    }

    /// Whether the store has no memories.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Whether a memory exists.
    pub fn contains(&self, id: &str) -> Result<bool> {
        let st = self.state.read();
        self.check_open(&st)?;
        Ok(st.index.position(id).is_some())
    }

    /// Whether a task was marked finished.
    pub fn is_task_finished(&self, task: &str) -> Result<bool> {
        let st = self.state.read();
        self.check_open(&st)?;
        Ok(st.index.is_finished(task))
    }

    /// The chain value over every committed record (waits for the chain thread to catch up).
    pub fn chain_value(&self) -> Result<ChainValue> {
        let st = self.state.read();
        self.check_open(&st)?;
        Ok(self.chain_to_end(&st)?.1)
    }

    /// Read memories by id; `None` for ids the store does not have.
    pub fn get_many<S: AsRef<str>>(&self, ids: &[S]) -> Result<Vec<Option<MemoryRead>>> {
        let st = self.state.read();
        self.check_open(&st)?;
        let entries: Vec<Option<Entry>> = ids.iter().map(|id| st.index.get(id.as_ref()).copied()).collect();
        self.read_puts(&st, entries)
    }

    /// Memories matching a query, in creation order.
    pub fn find(&self, q: &Query<'_>) -> Result<Vec<MemoryRead>> {
        let st = self.state.read();
        self.check_open(&st)?;
        let entries = st.index.find(q).into_iter().map(|n| Some(*st.index.entry(n))).collect();
        Ok(self.read_puts(&st, entries)?.into_iter().flatten().collect())
    }

    /// Read the put record of each entry, coalescing neighbouring records into one read.
    pub(crate) fn read_puts(
        &self,
        st: &State,
        entries: Vec<Option<Entry>>,
    ) -> Result<Vec<Option<MemoryRead>>> {
        let src = st.medium.source();
        let mut out = Vec::with_capacity(entries.len());
        // Runs of entries whose records lie close together in the file are read at once.
        let mut i = 0;
        while i < entries.len() {
            let Some(first) = entries[i] else {
                out.push(None);
                i += 1;
                continue;
            };
            let start = first.put_off;
            let mut stop = start + first.put_len as u64;
            let mut j = i + 1;
            while j < entries.len() && j - i < 4096 {
                match entries[j] {
                    Some(e) if e.put_off >= stop && e.put_off - stop <= 4096 => {
                        stop = e.put_off + e.put_len as u64;
                        j += 1;
                    }
                    _ => break,
                }
            }
            let mut chunk = vec![0u8; (stop - start) as usize];
            let n = src.read_at(&mut chunk, start).map_err(|e| Error::io(&self.display, "read", e))?;
            if n < chunk.len() {
                return Err(self.damaged(start, first.lsn, "the file ends before the record"));
            }
            for e in entries[i..j].iter().flatten() {
                let rel = (e.put_off - start) as usize;
                let bytes = &chunk[rel..rel + e.put_len as usize];
                // Records are checked again on every read: damage after open is reported, never returned.
                if parse_record(bytes, st.header.salt(), format::MAX_PAYLOAD_LEN).is_err() {
                    return Err(self.damaged(e.put_off, e.lsn, "the record no longer matches its checksum"));
                }
                out.push(Some(MemoryRead { entry: *e, put: bytes.to_vec() }));
            }
            i = j;
        }
        Ok(out)
    }

    /// Damage found by a read after the store opened: the bytes changed on disk since replay
    /// checked them, or (an open from the index file or a snapshot) were never checked.
    pub(crate) fn damaged(&self, offset: u64, lsn: u64, reason: &str) -> Error {
        // An open from the index file or a snapshot reads only the records after it (and the
        // last one it covers), so it cannot say the rest was intact then.
        let when = match (&self.index_file_status, self.opened_from_snapshot) {
            (IndexFileStatus::Loaded, _) => {
                "the store opened from its index file, which checks only the log's newest \
                 records: the damage may be older than the open"
            }
            (_, true) => {
                "the store opened from a snapshot, which checks only the log's newest records: \
                 the damage may be older than the open"
            }
            _ => "it was intact when the store opened: something changed the file since",
        };
        Error::Corrupt {
            path: self.display.clone(),
            offset,
            lsn,
            reason: format!("{reason} ({when}); close the store and run `memcommit repair {}`", self.display),
        }
    }

    /// A put found by a read that does not decode behind a valid checksum: no open decodes
    /// every put, so it may have been there before the store opened.
    pub(crate) fn undecodable(&self, offset: u64, lsn: u64) -> Error {
        Error::Corrupt {
            path: self.display.clone(),
            offset,
            lsn,
            reason: format!(
                "a put record that does not decode {} (no open decodes every put, so it may have \
                 been there before the store opened); close the store and run `memcommit repair {}`",
                memory::CHECKSUM_MATCHES,
                self.display
            ),
        }
    }

    /// Every put, status and move record of one memory still in the log, oldest first.
    ///
    /// Reads that memory's records and no others: the index knows where each one is (its
    /// entry's last put, status and move, and its older records: `state::history`), so the cost
    /// is one lookup and one read per record, whatever the size of the log. Each record is
    /// checked as every read checks one (its checksum), and must be a put, status or move of
    /// this id. An index that keeps no history (`History::is_tracked`) reads the whole log.
    pub fn history(&self, id: &str) -> Result<Vec<Vec<u8>>> {
        let st = self.state.read();
        self.check_open(&st)?;
        let Some(n) = st.index.position(id) else { return Ok(Vec::new()) };
        let Some(places) = st.index.records_of(n) else { return self.history_by_scan(&st, id) };
        let mut out = Vec::with_capacity(places.len());
        for (i, &(off, len)) in places.iter().enumerate() {
            if i > 0 && places[i - 1].0 == off {
                return Err(self.index_disagrees(
                    off,
                    0,
                    &format!("it names a record of memory {id:?} twice"),
                ));
            }
            out.push(self.memory_record_at(&st, off, len, id)?);
        }
        Ok(out)
    }

    /// The record of memory `id` at byte `off`, `len` bytes long (0: as long as its header
    /// says), checked: its checksum, and that it is a put, status or move of `id`.
    fn memory_record_at(&self, st: &State, off: u64, len: u32, id: &str) -> Result<Vec<u8>> {
        let src = st.medium.source();
        let room = st.end.saturating_sub(off);
        // A status record's length depends on its reason: read enough for a short one, and the
        // rest after its header says how long it is.
        let want = if len > 0 { len as usize } else { format::RECORD_OVERHEAD + id.len() + 64 };
        let mut buf = vec![0u8; (want as u64).min(room) as usize];
        let read = |buf: &mut [u8], at: u64| -> Result<usize> {
            src.read_at(buf, at).map_err(|e| Error::io(&self.display, "read", e))
        };
        let mut got = read(&mut buf, off)?;
        if len == 0 && got >= format::RECORD_HEADER_LEN {
            let total = format::record_len(&buf) as u64;
            if total > got as u64 && total <= room {
                buf.resize(total as usize, 0);
                got += read(&mut buf[got..], off + got as u64)?;
            }
        }
        buf.truncate(got);
        let rec = parse_record(&buf, st.header.salt(), format::MAX_PAYLOAD_LEN)
            .map_err(|_| self.damaged(off, 0, "the record no longer matches its checksum"))?;
        if !matches!(rec.op, Op::Put | Op::Status | Op::Move) || rec.key != id.as_bytes() {
            let what = format!(
                "the record there is a {} record of {:?}, not one of memory {id:?}",
                rec.op.name(),
                rec.key_str()
            );
            return Err(self.index_disagrees(off, rec.lsn, &what));
        }
        let n = rec.bytes.len();
        buf.truncate(n);
        Ok(buf)
    }

    /// The index this log opened with points at a record that is not what it says: an index
    /// file or snapshot that does not fit the log (its checksums held, its contents did not).
    fn index_disagrees(&self, offset: u64, lsn: u64, what: &str) -> Error {
        Error::Corrupt {
            path: self.display.clone(),
            offset,
            lsn,
            reason: format!(
                "the index says a record of a memory's history is here, but {what}: the index file or \
                 snapshot the store was opened with does not fit the log; close the store and open it \
                 again without them (a full replay)"
            ),
        }
    }

    /// `history` by reading the whole log (for an index that keeps no history).
    fn history_by_scan(&self, st: &State, id: &str) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        let mut sc = st.records_from(HEADER_LEN as u64);
        loop {
            match sc.next_item().map_err(|e| Error::io(&self.display, "read", e))? {
                Item::Record(_, rec) => {
                    if matches!(rec.op, Op::Put | Op::Status | Op::Move) && rec.key == id.as_bytes() {
                        out.push(rec.bytes.to_vec());
                    }
                }
                Item::End => return Ok(out),
                Item::Bad(off, _) => {
                    return Err(self.damaged(off, 0, "the record no longer matches its checksum"))
                }
            }
        }
    }

    /// Up to `max` records with an LSN above `after`, starting the scan at `from` (0: find the
    /// place from the LSN). Returns the records and the offset to continue from.
    pub fn read_records(&self, after: u64, from: u64, max: usize) -> Result<(Vec<Vec<u8>>, u64)> {
        let st = self.state.read();
        self.check_open(&st)?;
        let start = if from >= HEADER_LEN as u64 { from } else { st.scan_start(after).1 };
        let mut out = Vec::new();
        let mut sc = st.records_from(start);
        while out.len() < max {
            match sc.next_item().map_err(|e| Error::io(&self.display, "read", e))? {
                Item::Record(_, rec) => {
                    if rec.lsn > after {
                        out.push(rec.bytes.to_vec());
                    }
                }
                Item::End => break,
                Item::Bad(off, _) => {
                    return Err(self.damaged(off, 0, "the record no longer matches its checksum"))
                }
            }
        }
        Ok((out, sc.offset()))
    }

    /// Bytes of heap the index holds.
    pub fn index_heap_bytes(&self) -> usize {
        self.state.read().index.heap_bytes()
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// Cut a log file at `good_end` and fsync it (what `memcommit repair` does after its backup).
/// Refuses while a writer holds the log.
pub fn truncate(path: &Path, good_end: u64) -> Result<()> {
    cut(path, good_end, None)
}

/// `truncate`, only if the file is still `expect_len` bytes long, checked under the writer's
/// lock: what was inspected (and backed up) is what is cut, even if a writer came and went
/// between the look and the cut.
pub fn truncate_expecting(path: &Path, good_end: u64, expect_len: u64) -> Result<()> {
    cut(path, good_end, Some(expect_len))
}

fn cut(path: &Path, good_end: u64, expect_len: Option<u64>) -> Result<()> {
    let display = path.display().to_string();
    let lock = lock_writer(path, &display)?;
    let _file_lock = lock_log_file(path, &display)?;
    if good_end < HEADER_LEN as u64 {
        return Err(Error::invalid("good_end", format!("{good_end} would cut into the log header")));
    }
    let f = Open::read_write().open(path).map_err(|e| Error::io(&display, "open", e))?;
    if let Some(want) = expect_len {
        let len = f.len().map_err(|e| Error::io(&display, "stat", e))?;
        if len != want {
            return Err(Error::invalid(
                "expect_len",
                format!(
                    "{display} is {len} bytes, not the {want} it had when it was inspected: it changed since"
                ),
            ));
        }
    }
    f.set_len(good_end).map_err(|e| Error::io(&display, "truncate", e))?;
    f.sync_all().map_err(|e| Error::io(&display, "fsync", e))?;
    // What a clean close said of the cut bytes no longer holds: the log is durable to here.
    if let Ok((header, _)) = read_header(&f, &display) {
        if let Some(held) = &lock.file {
            mark_clean_close(held, &header, good_end);
        }
    }
    Ok(())
}

/// A put of `text` under `id` with `kind` and nothing else (for examples and tests).
pub fn put(id: &str, kind: &str, text: &str) -> Command {
    Command::Put(memory::PutCommand {
        id: id.into(),
        kind: kind.into(),
        text: text.into(),
        ..Default::default()
    })
}

/// Refuse an empty key, or one longer than a record's key may be.
fn check_key(field: &'static str, s: &str) -> Result<()> {
    if s.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if s.len() > MAX_KEY_LEN {
        return Err(Error::invalid(field, format!("is {} bytes; the limit is {MAX_KEY_LEN}", s.len())));
    }
    Ok(())
}

/// A vector's own check (its dimension against the store's is the commit's): 1 to
/// `memory::MAX_DIMS` finite values.
fn check_vector(id: &str, v: &[f32]) -> Result<()> {
    if v.is_empty() || v.len() > memory::MAX_DIMS {
        return Err(Error::invalid(
            "vector",
            format!(
                "the memory {id:?} has a vector of {} values; a vector has 1 to {}",
                v.len(),
                memory::MAX_DIMS
            ),
        ));
    }
    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
        return Err(Error::invalid(
            "vector",
            if v[i].is_nan() {
                format!("the memory {id:?} has a vector whose value {i} is NaN, not a finite number")
            } else {
                format!(
                    "the memory {id:?} has a vector whose value {i} is {} as a 32-bit float, not a \
                     finite number (vectors are stored as 32-bit floats, which reach about 3.4e38)",
                    v[i]
                )
            },
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index that outgrew its links keeps none and reads a history from the whole log; an
    /// index file and a snapshot of it say so, and open the same way; a replay links again.
    #[test]
    fn past_the_link_limit_a_history_is_read_from_the_whole_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.log");
        let opts = Options { durability: Durability::None, index_file_every: 0, ..Options::default() };
        let tracked = |log: &Log| log.state.read().index.history.is_tracked();
        let lsns = |log: &Log| -> Vec<u64> {
            log.history("a").unwrap().iter().map(|b| format::view_trusted(b).lsn).collect()
        };
        let want: Vec<u64> = (0..10).map(|v| 2 * v + 1).collect();
        let log = Log::open(&path, opts.clone()).unwrap();
        log.state.write().index.history.set_limit(5);
        for v in 0..10 {
            log.commit(&[put("a", "k", &format!("v{v}")), put("b", "k", "x")], None, v).unwrap();
        }
        assert!(!tracked(&log));
        assert_eq!(lsns(&log), want);
        log.write_index_file().unwrap();
        log.close().unwrap();

        let log = Log::open(&path, opts.clone()).unwrap();
        assert_eq!(log.info().unwrap().index_file, IndexFileStatus::Loaded);
        assert!(!tracked(&log));
        assert_eq!(lsns(&log), want);
        let snap = log.snapshot_json().unwrap();
        assert!(snap.contains("\"history\":null"), "{snap}");
        log.close().unwrap();

        let log = Log::open_with_snapshot(&path, opts.clone(), snap.as_bytes()).unwrap();
        assert!(!tracked(&log));
        assert_eq!(lsns(&log), want);
        log.close().unwrap();

        vfs::remove_file(&index_file::path_for(&path)).unwrap();
        let log = Log::open(&path, opts).unwrap();
        assert!(tracked(&log));
        assert_eq!(lsns(&log), want);
    }

    /// Under "batch" a commit is in the file when it returns (a crash of the process loses
    /// nothing), and so is the automatic seal it appended: the flusher can write the commit out
    /// while the seal waits for the chain thread, and the seal must not be left in the queue
    /// (the log would report an LSN that a `kill -9` takes back, and that the flusher's next
    /// fsync, which covers whatever is in the file, would not cover).
    #[test]
    fn an_automatic_seal_is_in_the_file_when_its_commit_returns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.log");
        let opts = Options {
            durability: Durability::Batch,
            flush_interval_ms: 1,
            index_file_every: 0,
            ..Options::default()
        };
        let log = Log::open(&path, opts).unwrap();
        log.set_auto_seal(Some(AutoSeal { every: 1, key: None })).unwrap();
        let appender = log.appender.clone().unwrap();
        for v in 0..3000 {
            log.commit(&[put("a", "k", &format!("v{v}"))], None, v).unwrap();
            let (lsn, end) = {
                let st = log.state.read();
                (st.lsn, st.end)
            };
            assert!(
                appender.written() >= end,
                "commit {v}: LSN {lsn} ends at {end}, the file holds {}",
                appender.written()
            );
        }
    }
}
