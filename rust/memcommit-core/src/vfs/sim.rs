//! A simulated file system for the fault tests (the `fault-injection` feature; never in a
//! release wheel).
//!
//! [`SimFs::mount`] puts one in place of a directory: every file the core opens, renames,
//! removes or lists directly in that directory is the simulation's from then on (the files are
//! in memory; nothing reaches the disk). It keeps, per file, the bytes a reader sees and the
//! bytes that would survive a power loss (those some fsync covered, with the writes since then
//! kept in order), and for the directory the entries a directory fsync made durable.
//!
//! What it can do, as LevelDB's and RocksDB's fault-injection environments and SQLite's crash
//! VFS do:
//!
//! * **Lose power** ([`SimFs::power_loss`]): every file goes back to what fsyncs covered plus,
//!   depending on the [`Crash`] mode, nothing, a random prefix, or a random subset of the writes
//!   since (torn at sector granularity, with garbage where the file had grown); the directory
//!   goes back to its durable entries; every file open before is dead (any call fails).
//! * **Stop the process at an operation** ([`SimFs::crash_at`]): the `n`th mutating operation
//!   (create, write, truncate, sync, directory sync, rename, unlink) and every call after it
//!   fail with `EIO`, as if the process died there; a power loss then decides what survives.
//! * **Fail an operation** ([`SimFs::fail`]): the `n`th operation of a kind (or of any kind)
//!   fails once or from then on with an errno, or a write comes back short. A failed fsync
//!   forgets the writes it was to make durable, as Linux does (they stay readable, and a later
//!   fsync that succeeds does not write them): a writer that retries and trusts loses data.
//! * **Fill up** ([`SimFs::set_capacity`]): writes past the capacity are cut short and then
//!   fail with `ENOSPC`.
//!
//! Everything random comes from the seed a test passes, so one seed replays one run.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::{Locked, Open};

static MOUNTS: RwLock<Vec<Arc<SimFs>>> = RwLock::new(Vec::new());

/// The simulation mounted on the directory holding `path`, if any.
pub(crate) fn mounted(path: &Path) -> Option<Arc<SimFs>> {
    let mounts = MOUNTS.read().unwrap_or_else(|e| e.into_inner());
    if mounts.is_empty() {
        return None;
    }
    let dir = super::parent(path);
    mounts.iter().find(|m| m.root == dir).cloned()
}

/// Whether `path` is a directory a simulation is mounted on.
pub(crate) fn is_root(path: &Path) -> bool {
    MOUNTS.read().unwrap_or_else(|e| e.into_inner()).iter().any(|m| m.root == path)
}

/// The kinds of file operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Opening a file that exists.
    Open,
    /// Opening that creates (or empties) a file.
    Create,
    /// A read.
    Read,
    /// A write.
    Write,
    /// A truncation or extension.
    SetLen,
    /// `fdatasync`.
    SyncData,
    /// `fsync`.
    SyncAll,
    /// `fsync` of the directory.
    SyncDir,
    /// A rename.
    Rename,
    /// Removing a file.
    Unlink,
    /// Taking a lock.
    Lock,
}

impl Op {
    /// Whether the operation changes what is on the disk (the points a crash can fall between).
    pub fn mutates(self) -> bool {
        !matches!(self, Op::Open | Op::Read | Op::Lock)
    }
}

/// What of the writes since a file's last fsync survives a power loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crash {
    /// None of them.
    DropUnsynced,
    /// A random prefix of them, in the order they were made; the last one kept may be cut.
    KeepPrefix,
    /// A random subset, sector by sector (`sector` bytes, 512 or 4096): each sector of each
    /// write kept or lost on its own, and a lost sector past the file's durable end may hold
    /// garbage.
    KeepSubset {
        /// The sector size.
        sector: usize,
    },
}

/// An injected I/O error.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    /// The kind of operation to fail (`None`: any).
    pub op: Option<Op>,
    /// Which one, counting from 0 from when the fault is set.
    pub nth: u64,
    /// The errno (`libc::EIO`, `libc::ENOSPC`, `libc::EDQUOT`, ...).
    pub errno: i32,
    /// Fail every matching operation from then on, not only that one.
    pub persistent: bool,
    /// For a write: write half of the bytes and report that instead of failing.
    pub short_write: bool,
}

#[derive(Clone)]
enum Pending {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Clone, Default)]
struct Inode {
    data: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<Pending>,
}

#[derive(Default)]
struct State {
    epoch: u64,
    next_ino: u64,
    next_handle: u64,
    inodes: HashMap<u64, Inode>,
    names: BTreeMap<OsString, u64>,
    durable_names: BTreeMap<OsString, u64>,
    steps: u64,
    trace: Vec<(Op, String)>,
    crash_at: Option<u64>,
    stopped: bool,
    fault: Option<Fault>,
    fault_seen: u64,
    fault_fired: bool,
    injected: u64,
    fired: Option<(Op, String)>,
    capacity: Option<u64>,
    locks: HashMap<u64, u64>,
}

/// What an operation that may go on is to do.
enum Go {
    Normal,
    Short,
}

impl State {
    /// Count `op` (on `name`) and decide whether it fails: a stopped process, a crash point,
    /// or an injected fault.
    fn enter(&mut self, op: Op, name: &str, epoch: Option<u64>) -> io::Result<Go> {
        if epoch.is_some_and(|e| e != self.epoch) {
            return Err(io::Error::other("the file was opened before a simulated power loss"));
        }
        if self.stopped {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        if op.mutates() {
            if self.crash_at == Some(self.steps) {
                self.stopped = true;
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            self.steps += 1;
            self.trace.push((op, name.to_string()));
            if std::env::var_os("MEMCOMMIT_FAULT_TRACE").is_some() {
                eprintln!("  sim step {}: {op:?} {name}", self.steps - 1);
            }
        }
        if let Some(f) = self.fault {
            if f.op.is_none_or(|o| o == op) {
                let fire = if self.fault_fired {
                    f.persistent
                } else {
                    self.fault_seen += 1;
                    self.fault_seen == f.nth + 1
                };
                if fire {
                    self.fault_fired = true;
                    self.injected += 1;
                    self.fired.get_or_insert_with(|| (op, name.to_string()));
                    if f.short_write && op == Op::Write {
                        return Ok(Go::Short);
                    }
                    return Err(io::Error::from_raw_os_error(f.errno));
                }
            }
        }
        Ok(Go::Normal)
    }

    fn used(&self) -> u64 {
        self.inodes.values().map(|i| i.data.len() as u64).sum()
    }

    /// How many bytes may be added to the disk.
    fn room(&self) -> u64 {
        self.capacity.map_or(u64::MAX, |c| c.saturating_sub(self.used()))
    }
}

/// A simulated directory of files.
pub struct SimFs {
    root: PathBuf,
    state: Mutex<State>,
}

impl SimFs {
    /// Mount a new, empty simulation on the directory `root` (which need not exist on the disk).
    /// Panics if one is mounted there already.
    pub fn mount(root: impl Into<PathBuf>) -> Arc<SimFs> {
        let fs = Arc::new(SimFs { root: root.into(), state: Mutex::new(State::default()) });
        let mut mounts = MOUNTS.write().unwrap_or_else(|e| e.into_inner());
        assert!(!mounts.iter().any(|m| m.root == fs.root), "a simulation is mounted on {:?}", fs.root);
        mounts.push(fs.clone());
        fs
    }

    /// Take the simulation off its directory.
    pub fn unmount(&self) {
        MOUNTS.write().unwrap_or_else(|e| e.into_inner()).retain(|m| m.root != self.root);
    }

    /// The directory it is mounted on.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn st(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stop the process at the `step`th mutating operation from the start (see
    /// [`SimFs::steps`]): it and everything after it fail with `EIO`.
    pub fn crash_at(&self, step: u64) {
        self.st().crash_at = Some(step);
    }

    /// Whether a crash point was reached (and everything now fails).
    pub fn stopped(&self) -> bool {
        self.st().stopped
    }

    /// Mutating operations so far.
    pub fn steps(&self) -> u64 {
        self.st().steps
    }

    /// Each mutating operation so far, with the name of the file (or directory entry) it was on.
    pub fn trace(&self) -> Vec<(Op, String)> {
        self.st().trace.clone()
    }

    /// Fail operations (replacing any fault set before).
    pub fn fail(&self, fault: Fault) {
        let mut st = self.st();
        (st.fault, st.fault_seen, st.fault_fired) = (Some(fault), 0, false);
    }

    /// Clear the injected fault and the capacity: the disk works again.
    pub fn heal(&self) {
        let mut st = self.st();
        (st.fault, st.capacity) = (None, None);
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.st().injected
    }

    /// The first operation an injected fault failed, and the file it was on.
    pub fn fired(&self) -> Option<(Op, String)> {
        self.st().fired.clone()
    }

    /// Limit the bytes all files may hold together (`None`: no limit).
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.st().capacity = bytes;
    }

    /// The bytes all files hold together.
    pub fn used(&self) -> u64 {
        self.st().used()
    }

    /// The names in the directory.
    pub fn names(&self) -> Vec<OsString> {
        self.st().names.keys().cloned().collect()
    }

    /// What a reader sees of the file `name`, if it is there.
    pub fn contents(&self, name: &str) -> Option<Vec<u8>> {
        let st = self.st();
        st.names.get(&OsString::from(name)).map(|ino| st.inodes[ino].data.clone())
    }

    /// Put a file in the directory, durably (a test's setup).
    pub fn put_file(&self, name: &str, bytes: &[u8]) {
        let mut st = self.st();
        let ino = st.next_ino;
        st.next_ino += 1;
        st.inodes.insert(ino, Inode { data: bytes.to_vec(), durable: bytes.to_vec(), pending: Vec::new() });
        st.names.insert(name.into(), ino);
        st.durable_names.insert(name.into(), ino);
    }

    /// Lose power: see the module's documentation. Every file open before is dead, the crash
    /// point and the fault are cleared (the capacity stays), and the process may start again.
    pub fn power_loss(&self, mode: Crash, seed: u64) {
        let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
        let mut st = self.st();
        st.epoch += 1;
        (st.stopped, st.crash_at, st.fault, st.fault_fired, st.fault_seen) = (false, None, None, false, 0);
        st.locks.clear();
        st.names = st.durable_names.clone();
        let live: std::collections::HashSet<u64> = st.names.values().copied().collect();
        st.inodes.retain(|ino, _| live.contains(ino));
        let mut inos: Vec<u64> = st.inodes.keys().copied().collect();
        inos.sort_unstable();
        for ino in inos {
            let node = st.inodes.get_mut(&ino).expect("listed");
            let kept = survive(node, mode, &mut rng);
            *node = Inode { data: kept.clone(), durable: kept, pending: Vec::new() };
        }
    }

    fn name_of(&self, path: &Path) -> io::Result<OsString> {
        path.file_name()
            .map(|n| n.to_owned())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))
    }

    pub(crate) fn open(self: &Arc<Self>, path: &Path, how: Open) -> io::Result<Handle> {
        let name = self.name_of(path)?;
        let shown = name.to_string_lossy().into_owned();
        let mut st = self.st();
        let existing = st.names.get(&name).copied();
        let creates = existing.is_none() && (how.create || how.create_new);
        let op = if creates || (existing.is_some() && how.truncate) { Op::Create } else { Op::Open };
        if existing.is_some() && how.create_new {
            st.enter(Op::Open, &shown, None)?;
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        if existing.is_none() && !creates {
            st.enter(Op::Open, &shown, None)?;
            return Err(io::ErrorKind::NotFound.into());
        }
        st.enter(op, &shown, None)?;
        let ino = match existing {
            Some(ino) => {
                if how.truncate {
                    let node = st.inodes.get_mut(&ino).expect("named");
                    node.data.clear();
                    node.pending.push(Pending::SetLen(0));
                }
                ino
            }
            None => {
                let ino = st.next_ino;
                st.next_ino += 1;
                st.inodes.insert(ino, Inode::default());
                st.names.insert(name.clone(), ino);
                ino
            }
        };
        let id = st.next_handle;
        st.next_handle += 1;
        let epoch = st.epoch;
        Ok(Handle(Arc::new(Shared { fs: self.clone(), ino, epoch, id, write: how.write, name: shown })))
    }

    pub(crate) fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (a, b) = (self.name_of(from)?, self.name_of(to)?);
        let mut st = self.st();
        st.enter(Op::Rename, &b.to_string_lossy(), None)?;
        let ino = st.names.remove(&a).ok_or(io::ErrorKind::NotFound)?;
        st.names.insert(b, ino);
        Ok(())
    }

    pub(crate) fn unlink(&self, path: &Path) -> io::Result<()> {
        let name = self.name_of(path)?;
        let mut st = self.st();
        st.enter(Op::Unlink, &name.to_string_lossy(), None)?;
        st.names.remove(&name).map(|_| ()).ok_or_else(|| io::ErrorKind::NotFound.into())
    }

    pub(crate) fn sync_dir(&self) -> io::Result<()> {
        let mut st = self.st();
        st.enter(Op::SyncDir, ".", None)?;
        st.durable_names = st.names.clone();
        Ok(())
    }
}

/// What survives of a file at a power loss, in `mode`.
fn survive(node: &Inode, mode: Crash, rng: &mut Rng) -> Vec<u8> {
    let mut out = node.durable.clone();
    let n = node.pending.len();
    match mode {
        Crash::DropUnsynced => {}
        Crash::KeepPrefix => {
            let k = rng.below(n as u64 + 1) as usize;
            node.pending[..k].iter().for_each(|p| apply(&mut out, p));
            if let Some(Pending::Write(off, bytes)) = node.pending.get(k) {
                let cut = rng.below(bytes.len() as u64) as usize;
                write_into(&mut out, *off, &bytes[..cut]);
            }
        }
        Crash::KeepSubset { sector } => {
            let durable_end = node.durable.len() as u64;
            for p in &node.pending {
                match p {
                    Pending::SetLen(_) => {
                        if rng.below(2) == 0 {
                            apply(&mut out, p);
                        }
                    }
                    Pending::Write(off, bytes) => {
                        let end = off + bytes.len() as u64;
                        let mut at = *off;
                        while at < end {
                            let to = ((at / sector as u64 + 1) * sector as u64).min(end);
                            let piece = &bytes[(at - off) as usize..(to - off) as usize];
                            match rng.below(4) {
                                0 | 1 => write_into(&mut out, at, piece),
                                2 if at >= durable_end => {
                                    let junk: Vec<u8> = (0..piece.len()).map(|_| rng.draw() as u8).collect();
                                    write_into(&mut out, at, &junk);
                                }
                                _ => {}
                            }
                            at = to;
                        }
                    }
                }
            }
        }
    }
    out
}

fn apply(out: &mut Vec<u8>, p: &Pending) {
    match p {
        Pending::Write(off, bytes) => write_into(out, *off, bytes),
        Pending::SetLen(len) => out.resize(*len as usize, 0),
    }
}

fn write_into(out: &mut Vec<u8>, off: u64, bytes: &[u8]) {
    let (off, end) = (off as usize, off as usize + bytes.len());
    if out.len() < end {
        out.resize(end, 0);
    }
    out[off..end].copy_from_slice(bytes);
}

/// splitmix64: small, and the same on every platform (the fault tests draw their workloads
/// from it too).
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn draw(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 for 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.draw() % n
        }
    }
}

struct Shared {
    fs: Arc<SimFs>,
    ino: u64,
    epoch: u64,
    id: u64,
    write: bool,
    name: String,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let mut st = self.fs.st();
        if st.epoch == self.epoch && st.locks.get(&self.ino) == Some(&self.id) {
            st.locks.remove(&self.ino);
        }
    }
}

/// An open simulated file (its clones share the open file description, and so its lock).
pub(crate) struct Handle(Arc<Shared>);

impl Handle {
    fn with<T>(&self, op: Op, f: impl FnOnce(&mut State, Go) -> io::Result<T>) -> io::Result<T> {
        let s = &self.0;
        let mut st = s.fs.st();
        let go = st.enter(op, &s.name, Some(s.epoch))?;
        if !st.inodes.contains_key(&s.ino) {
            return Err(io::Error::other("the simulated file is gone"));
        }
        f(&mut st, go)
    }

    fn node<'a>(&self, st: &'a mut State) -> &'a mut Inode {
        st.inodes.get_mut(&self.0.ino).expect("checked in `with`")
    }

    pub(crate) fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        self.with(Op::Read, |st, _| {
            let data = &self.node(st).data;
            let start = (off as usize).min(data.len());
            let n = buf.len().min(data.len() - start);
            buf[..n].copy_from_slice(&data[start..start + n]);
            Ok(n)
        })
    }

    pub(crate) fn write_at(&self, buf: &[u8], off: u64) -> io::Result<usize> {
        if !self.0.write {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        self.with(Op::Write, |st, go| {
            let len = self.node(st).data.len() as u64;
            let mut n = buf.len();
            if matches!(go, Go::Short) {
                n = n.div_ceil(2);
            }
            let grows = (off + n as u64).saturating_sub(len);
            let room = st.room();
            if grows > room {
                let fits = (len + room).saturating_sub(off) as usize;
                if fits == 0 {
                    return Err(io::Error::from_raw_os_error(libc::ENOSPC));
                }
                n = n.min(fits);
            }
            let node = self.node(st);
            write_into(&mut node.data, off, &buf[..n]);
            node.pending.push(Pending::Write(off, buf[..n].to_vec()));
            Ok(n)
        })
    }

    pub(crate) fn set_len(&self, len: u64) -> io::Result<()> {
        if !self.0.write {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        self.with(Op::SetLen, |st, _| {
            let now = self.node(st).data.len() as u64;
            if len > now && len - now > st.room() {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let node = self.node(st);
            node.data.resize(len as usize, 0);
            node.pending.push(Pending::SetLen(len));
            Ok(())
        })
    }

    pub(crate) fn sync(&self, op: Op) -> io::Result<()> {
        let s = &self.0;
        let mut st = s.fs.st();
        match st.enter(op, &s.name, Some(s.epoch)) {
            Ok(_) => {
                if let Some(node) = st.inodes.get_mut(&s.ino) {
                    let pending = std::mem::take(&mut node.pending);
                    pending.iter().for_each(|p| apply(&mut node.durable, p));
                }
                Ok(())
            }
            Err(e) => {
                // Linux marks the pages clean after a failed writeback: the writes stay
                // readable but are never written (unless the process is dead anyway).
                if !st.stopped {
                    if let Some(node) = st.inodes.get_mut(&s.ino) {
                        node.pending.clear();
                    }
                }
                Err(e)
            }
        }
    }

    pub(crate) fn len(&self) -> io::Result<u64> {
        let s = &self.0;
        let st = s.fs.st();
        if st.epoch != s.epoch || st.stopped {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        st.inodes.get(&s.ino).map(|n| n.data.len() as u64).ok_or_else(|| io::Error::other("gone"))
    }

    pub(crate) fn identity(&self) -> io::Result<(u64, u64)> {
        Ok((u64::MAX, self.0.ino))
    }

    pub(crate) fn try_lock(&self) -> Locked {
        let s = &self.0;
        let mut st = s.fs.st();
        if let Err(e) = st.enter(Op::Lock, &s.name, Some(s.epoch)) {
            return Locked::Failed(e);
        }
        match st.locks.get(&s.ino) {
            Some(&holder) if holder != s.id => Locked::Busy,
            _ => {
                st.locks.insert(s.ino, s.id);
                Locked::Taken
            }
        }
    }

    pub(crate) fn try_clone(&self) -> io::Result<Handle> {
        Ok(Handle(self.0.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(fs: &SimFs, name: &str) -> Vec<u8> {
        fs.contents(name).unwrap_or_else(|| panic!("{name} is gone"))
    }

    fn mount(dir: &str) -> Arc<SimFs> {
        SimFs::mount(format!("/sim-unit/{dir}"))
    }

    #[test]
    fn a_power_loss_keeps_what_fsyncs_covered_and_drops_the_rest() {
        let fs = mount("drop");
        let p = fs.root().join("a");
        let f = Open::create_new().open(&p).unwrap();
        f.write_all_at(b"durable", 0).unwrap();
        f.sync_all().unwrap();
        fs.sync_dir().unwrap();
        f.write_all_at(b" and not", 7).unwrap();
        assert_eq!(file(&fs, "a"), b"durable and not");
        fs.power_loss(Crash::DropUnsynced, 1);
        assert_eq!(file(&fs, "a"), b"durable");
        // The handle from before the power loss is dead.
        assert!(f.read_at(&mut [0u8; 4], 0).is_err());
        fs.unmount();
    }

    #[test]
    fn directory_entries_need_a_directory_fsync() {
        let fs = mount("dir");
        let (a, b) = (fs.root().join("a"), fs.root().join("b"));
        let f = Open::create_new().open(&a).unwrap();
        f.write_all_at(b"x", 0).unwrap();
        f.sync_all().unwrap();
        fs.power_loss(Crash::KeepPrefix, 1);
        assert!(fs.contents("a").is_none(), "a new file survived without a directory fsync");
        let f = Open::create_new().open(&a).unwrap();
        f.write_all_at(b"x", 0).unwrap();
        f.sync_all().unwrap();
        fs.sync_dir().unwrap();
        fs.rename(&a, &b).unwrap();
        fs.power_loss(Crash::DropUnsynced, 2);
        assert_eq!(fs.names(), vec![OsString::from("a")], "a rename survived without a directory fsync");
        fs.rename(&a, &b).unwrap();
        fs.sync_dir().unwrap();
        fs.power_loss(Crash::DropUnsynced, 3);
        assert_eq!(fs.names(), vec![OsString::from("b")]);
        fs.unmount();
    }

    #[test]
    fn a_failed_fsync_forgets_its_writes_and_a_later_one_does_not_bring_them_back() {
        let fs = mount("fsyncgate");
        let p = fs.root().join("a");
        fs.put_file("a", b"old");
        let f = Open::read_write().open(&p).unwrap();
        f.write_all_at(b"new", 0).unwrap();
        fs.fail(Fault {
            op: Some(Op::SyncData),
            nth: 0,
            errno: libc::EIO,
            persistent: false,
            short_write: false,
        });
        assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(libc::EIO));
        assert_eq!(file(&fs, "a"), b"new", "the write stays readable");
        f.sync_data().expect("the next fsync succeeds");
        fs.power_loss(Crash::KeepPrefix, 4);
        assert_eq!(file(&fs, "a"), b"old", "the forgotten write came back");
        fs.unmount();
    }

    #[test]
    fn the_crash_modes_keep_nothing_a_prefix_or_sectors() {
        for seed in 0..20 {
            let fs = mount(&format!("modes-{seed}"));
            fs.put_file("a", &[]);
            let f = Open::read_write().open(&fs.root().join("a")).unwrap();
            for i in 0..8u8 {
                f.write_all_at(&[i + 1; 512], i as u64 * 512).unwrap();
            }
            let image = file(&fs, "a");
            fs.power_loss(Crash::KeepPrefix, seed);
            let kept = file(&fs, "a");
            assert_eq!(kept[..], image[..kept.len()], "seed {seed}: not a prefix");
            fs.unmount();
            let fs = mount(&format!("sectors-{seed}"));
            fs.put_file("a", &[0; 4096]);
            let f = Open::read_write().open(&fs.root().join("a")).unwrap();
            f.write_all_at(&[7; 4096], 0).unwrap();
            fs.power_loss(Crash::KeepSubset { sector: 512 }, seed);
            for sector in file(&fs, "a").chunks(512) {
                assert!(
                    sector.iter().all(|&b| b == 7) || sector.iter().all(|&b| b == 0),
                    "seed {seed}: a torn sector"
                );
            }
            fs.unmount();
        }
    }

    #[test]
    fn a_full_disk_cuts_the_write_short_then_refuses() {
        let fs = mount("full");
        fs.set_capacity(Some(100));
        let f = Open::create_new().open(&fs.root().join("a")).unwrap();
        assert_eq!(f.write_all_at(&[1; 150], 0).unwrap_err().raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(file(&fs, "a").len(), 100);
        fs.heal();
        f.write_all_at(&[1; 150], 0).unwrap();
        fs.unmount();
    }

    #[test]
    fn a_crash_point_stops_every_operation_from_there() {
        let fs = mount("stop");
        fs.crash_at(1);
        let f = Open::create_new().open(&fs.root().join("a")).unwrap();
        assert!(f.write_all_at(b"x", 0).is_err());
        assert!(fs.stopped() && f.read_at(&mut [0u8; 1], 0).is_err() && f.len().is_err());
        assert_eq!(fs.steps(), 1);
        fs.unmount();
    }
}
