//! The file layer: every file operation of the core (open, read, write, sync, truncate, rename,
//! unlink, lock, listing a directory, the index file's mapping) goes through here, so that one
//! place decides what reaches the operating system.
//!
//! Two implementations sit behind it. The real one is `std::fs` and `libc` and nothing more: a
//! [`File`] is a plain `std::fs::File` in a build without the `fault-injection` feature (the
//! release wheel), so the hot path costs what it did. With the feature, paths under a directory
//! mounted on a [`sim::SimFs`] reach the simulation instead: it keeps, per file, what is durable
//! and what is only written, and per directory which entries are durable; it can lose power
//! (dropping what no fsync covered, or keeping a random part of it) and fail any operation with
//! an errno. The crate's fault tests run the whole engine on it.
//!
//! Platform syncs live here: [`File::sync_data`] is `fdatasync` on Linux and
//! `fcntl(F_FULLFSYNC)` on macOS, where `fsync` does not flush the drive's cache.

#[cfg(feature = "fault-injection")]
pub mod sim;

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

/// An open file.
pub struct File(Inner);

enum Inner {
    Real(fs::File),
    #[cfg(feature = "fault-injection")]
    Sim(sim::Handle),
}

/// How to open a file (the subset of `std::fs::OpenOptions` the core uses).
#[derive(Clone, Copy, Debug, Default)]
pub struct Open {
    pub(crate) write: bool,
    pub(crate) create: bool,
    pub(crate) create_new: bool,
    pub(crate) truncate: bool,
}

impl Open {
    /// Read only.
    pub(crate) fn read() -> Open {
        Open::default()
    }

    /// Read and write an existing file.
    pub(crate) fn read_write() -> Open {
        Open { write: true, ..Open::default() }
    }

    /// Read and write, or not, as `write` says.
    pub(crate) fn writable(write: bool) -> Open {
        Open { write, ..Open::default() }
    }

    /// Create a new file (refused if one is there), read and write.
    pub(crate) fn create_new() -> Open {
        Open { write: true, create_new: true, ..Open::default() }
    }

    /// Create or empty the file, read and write.
    pub(crate) fn create_truncate() -> Open {
        Open { write: true, create: true, truncate: true, ..Open::default() }
    }

    /// Open `path` so.
    pub(crate) fn open(self, path: &Path) -> io::Result<File> {
        #[cfg(feature = "fault-injection")]
        if let Some(fs) = sim::mounted(path) {
            return fs.open(path, self).map(|h| File(Inner::Sim(h)));
        }
        fs::OpenOptions::new()
            .read(true)
            .write(self.write)
            .create(self.create)
            .create_new(self.create_new)
            .truncate(self.truncate)
            .open(path)
            .map(|f| File(Inner::Real(f)))
    }
}

/// Whether the lock was taken, refused because another holder has it, or failed.
pub(crate) enum Locked {
    Taken,
    Busy,
    Failed(io::Error),
}

impl File {
    /// Read up to `buf.len()` bytes at `off`; fewer only at the end of the file.
    pub fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        match &self.0 {
            Inner::Real(f) => {
                let mut done = 0;
                while done < buf.len() {
                    match FileExt::read_at(f, &mut buf[done..], off + done as u64) {
                        Ok(0) => break,
                        Ok(n) => done += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(done)
            }
            #[cfg(feature = "fault-injection")]
            Inner::Sim(h) => h.read_at(buf, off),
        }
    }

    /// Read exactly `buf.len()` bytes at `off`, or fail.
    pub fn read_exact_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        if self.read_at(buf, off)? < buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file ends before the bytes asked for",
            ));
        }
        Ok(())
    }

    /// Write all of `buf` at `off` (a short write is continued; an error is returned as is).
    pub fn write_all_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        match &self.0 {
            Inner::Real(f) => f.write_all_at(buf, off),
            #[cfg(feature = "fault-injection")]
            Inner::Sim(h) => {
                let mut done = 0;
                while done < buf.len() {
                    match h.write_at(&buf[done..], off + done as u64)? {
                        0 => return Err(io::ErrorKind::WriteZero.into()),
                        n => done += n,
                    }
                }
                Ok(())
            }
        }
    }

    /// Make the bytes written durable: on the disk itself, not only handed to it.
    ///
    /// * Linux and other Unixes: `fdatasync` (`File::sync_data`): the data and the metadata
    ///   needed to read it back (the file's size), with the drive's write cache flushed.
    /// * macOS and iOS: `fcntl(F_FULLFSYNC)`. There `fsync`/`fdatasync` hand the data to the
    ///   drive but do not make the drive write its cache to the medium, so a power loss can
    ///   still lose (or reorder) acknowledged commits. A file system that does not support
    ///   `F_FULLFSYNC` (some network and FAT file systems answer `ENOTSUP` or `EINVAL`) gets
    ///   `fsync`, the most it offers, as SQLite does; any other error is returned as it is.
    pub fn sync_data(&self) -> io::Result<()> {
        match &self.0 {
            #[cfg(target_vendor = "apple")]
            Inner::Real(f) => full_fsync(f),
            #[cfg(not(target_vendor = "apple"))]
            Inner::Real(f) => f.sync_data(),
            #[cfg(feature = "fault-injection")]
            Inner::Sim(h) => h.sync(sim::Op::SyncData),
        }
    }

    /// Make the file durable with all of its metadata (a new file, before it is renamed into
    /// place): `fsync` on Linux, `fcntl(F_FULLFSYNC)` on macOS (see [`File::sync_data`]).
    pub fn sync_all(&self) -> io::Result<()> {
        match &self.0 {
            #[cfg(target_vendor = "apple")]
            Inner::Real(f) => full_fsync(f),
            #[cfg(not(target_vendor = "apple"))]
            Inner::Real(f) => f.sync_all(),
            #[cfg(feature = "fault-injection")]
            Inner::Sim(h) => h.sync(sim::Op::SyncAll),
        }
    }

    /// Cut or extend the file to `len` bytes.
    pub fn set_len(&self, len: u64) -> io::Result<()> {
        match &self.0 {
            Inner::Real(f) => f.set_len(len),
            #[cfg(feature = "fault-injection")]
            Inner::Sim(h) => h.set_len(len),
        }
    }

    /// The file's size.
    pub fn len(&self) -> io::Result<u64> {
        match &self.0 {
            Inner::Real(f) => Ok(f.metadata()?.len()),
            #[cfg(feature = "fault-injection")]
            Inner::Sim(h) => h.len(),
        }
    }

    /// Which file this is: (device, inode), to tell whether a name still leads to it.
    pub fn identity(&self) -> io::Result<(u64, u64)> {
        match &self.0 {
            Inner::Real(f) => f.metadata().map(|m| (m.dev(), m.ino())),
            #[cfg(feature = "fault-injection")]
            Inner::Sim(h) => h.identity(),
        }
    }

    /// Take an exclusive lock on the file at once or not at all (`flock(LOCK_EX | LOCK_NB)`),
    /// held while this open file lives. `flock` locks belong to an open file description, so
    /// a second open in the same process is refused too.
    pub(crate) fn try_lock(&self) -> Locked {
        match &self.0 {
            Inner::Real(f) => match f.try_lock() {
                Ok(()) => Locked::Taken,
                Err(fs::TryLockError::WouldBlock) => Locked::Busy,
                Err(fs::TryLockError::Error(e)) => Locked::Failed(e),
            },
            #[cfg(feature = "fault-injection")]
            Inner::Sim(h) => h.try_lock(),
        }
    }

    /// Another handle on the same open file.
    pub fn try_clone(&self) -> io::Result<File> {
        match &self.0 {
            Inner::Real(f) => f.try_clone().map(|f| File(Inner::Real(f))),
            #[cfg(feature = "fault-injection")]
            Inner::Sim(h) => h.try_clone().map(|h| File(Inner::Sim(h))),
        }
    }

    /// Ask the kernel to start writing `from..to` back to the disk now, without waiting (Linux's
    /// `sync_file_range`; nothing elsewhere). A hint: durability comes only from the syncs.
    pub fn start_writeback(&self, from: u64, to: u64) {
        #[cfg(target_os = "linux")]
        #[allow(irrefutable_let_patterns)] // without the simulation a file is always real
        if let Inner::Real(f) = &self.0 {
            use std::os::fd::AsRawFd;
            let (Ok(off), Ok(len)) =
                (libc::off64_t::try_from(from), libc::off64_t::try_from(to.saturating_sub(from)))
            else {
                return;
            };
            #[allow(unsafe_code)]
            // SAFETY: sync_file_range only reads its integer arguments; the descriptor is this
            // open file's. Its result is ignored: it is a hint.
            unsafe {
                libc::sync_file_range(f.as_raw_fd(), off, len, libc::SYNC_FILE_RANGE_WRITE);
            }
        }
        let _ = (from, to);
    }

    /// Map `len` bytes at `offset` read-only, to read them without copying; `None` for a file
    /// of the simulation (read it with `read_at`). The bytes must be in the file, and stay:
    /// memcommit never shortens a log below bytes it has committed (only a torn tail past
    /// them is cut), which is what a mapping needs.
    pub fn map_read(&self, offset: u64, len: usize) -> Option<io::Result<Mapped>> {
        let fd = self.mappable()?;
        Some(Mapped::new(fd, offset, len))
    }

    /// The descriptor to map the file from, if it is a real file (the simulation's files are
    /// copied into memory instead).
    pub(crate) fn mappable(&self) -> Option<std::os::fd::RawFd> {
        match &self.0 {
            Inner::Real(f) => Some(std::os::fd::AsRawFd::as_raw_fd(f)),
            #[cfg(feature = "fault-injection")]
            Inner::Sim(_) => None,
        }
    }
}

#[cfg(target_vendor = "apple")]
fn full_fsync(file: &fs::File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    loop {
        #[allow(unsafe_code)]
        // SAFETY: F_FULLFSYNC takes no argument and touches no memory of ours; `fd` is open
        // for as long as `file` is borrowed.
        let rc = unsafe { libc::fcntl(fd, libc::F_FULLFSYNC) };
        if rc != -1 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ENOTSUP | libc::EOPNOTSUPP | libc::EINVAL | libc::ENOTTY) => break,
            _ => return Err(e),
        }
    }
    // Plain fsync(2): std's `sync_all` is F_FULLFSYNC itself on Apple targets.
    loop {
        #[allow(unsafe_code)]
        // SAFETY: as above.
        let rc = unsafe { libc::fsync(fd) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Writes a file from its start, in order (`io::Write` over [`File::write_all_at`]).
pub struct Writer<'a> {
    file: &'a File,
    at: u64,
}

impl<'a> Writer<'a> {
    /// A writer at the start of `file`.
    pub fn new(file: &'a File) -> Writer<'a> {
        Writer { file, at: 0 }
    }

    /// The file written.
    pub fn file(&self) -> &File {
        self.file
    }
}

impl io::Write for Writer<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write_all_at(buf, self.at)?;
        self.at += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Whether `e` says the disk (or the user's quota) is full.
pub(crate) fn no_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// Rename `from` to `to`, replacing `to`.
pub(crate) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    #[cfg(feature = "fault-injection")]
    if let Some(fs) = sim::mounted(to) {
        return fs.rename(from, to);
    }
    fs::rename(from, to)
}

/// Remove the file `path`.
pub(crate) fn remove_file(path: &Path) -> io::Result<()> {
    #[cfg(feature = "fault-injection")]
    if let Some(fs) = sim::mounted(path) {
        return fs.unlink(path);
    }
    fs::remove_file(path)
}

/// The directory that holds `path` (`.` for a bare name).
fn parent(path: &Path) -> &Path {
    path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// fsync the directory that holds `path` (after a rename into it, or a file created in it), so
/// that its entries survive a power loss.
pub(crate) fn sync_dir(path: &Path) -> io::Result<()> {
    #[cfg(feature = "fault-injection")]
    if let Some(fs) = sim::mounted(path) {
        return fs.sync_dir();
    }
    let dir = fs::File::open(parent(path))?;
    #[cfg(target_vendor = "apple")]
    return full_fsync(&dir);
    #[cfg(not(target_vendor = "apple"))]
    dir.sync_all()
}

/// The whole file at `path`.
pub(crate) fn read(path: &Path) -> io::Result<Vec<u8>> {
    #[cfg(feature = "fault-injection")]
    if sim::mounted(path).is_some() {
        let f = Open::read().open(path)?;
        let mut buf = vec![0u8; f.len()? as usize];
        f.read_exact_at(&mut buf, 0)?;
        return Ok(buf);
    }
    fs::read(path)
}

/// The size of the file at `path`.
pub(crate) fn len(path: &Path) -> io::Result<u64> {
    #[cfg(feature = "fault-injection")]
    if sim::mounted(path).is_some() {
        return Open::read().open(path)?.len();
    }
    fs::metadata(path).map(|m| m.len())
}

/// Which file `path` leads to: (device, inode).
pub(crate) fn identity(path: &Path) -> io::Result<(u64, u64)> {
    #[cfg(feature = "fault-injection")]
    if sim::mounted(path).is_some() {
        return Open::read().open(path)?.identity();
    }
    fs::metadata(path).map(|m| (m.dev(), m.ino()))
}

/// Whether `path` is a directory.
pub(crate) fn is_dir(path: &Path) -> bool {
    #[cfg(feature = "fault-injection")]
    if sim::is_root(path) {
        return true;
    }
    path.is_dir()
}

/// Whether `path` is there and is neither a regular file nor a directory (a device, a FIFO,
/// a socket), following symbolic links.
pub(crate) fn is_special(path: &Path) -> bool {
    #[cfg(feature = "fault-injection")]
    if sim::mounted(path).is_some() {
        return false;
    }
    fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// The names in the directory that holds `path`.
pub(crate) fn names_beside(path: &Path) -> io::Result<Vec<OsString>> {
    #[cfg(feature = "fault-injection")]
    if let Some(fs) = sim::mounted(path) {
        return Ok(fs.names());
    }
    Ok(fs::read_dir(parent(path))?.flatten().map(|e| e.file_name()).collect())
}

/// Put a new file at `dest` whole or not at all: `write` fills the new temp file `tmp`, which
/// is fsynced, renamed over `dest`, and the directory fsynced. On failure the temp file is
/// removed and `dest` is as it was.
pub(crate) fn write_file_durably(
    tmp: &Path,
    dest: &Path,
    write: impl FnOnce(&mut Writer<'_>) -> io::Result<()>,
) -> io::Result<()> {
    let res = (|| -> io::Result<()> {
        let f = Open::create_new().open(tmp)?;
        write(&mut Writer::new(&f))?;
        f.sync_all()?;
        drop(f);
        rename(tmp, dest)?;
        sync_dir(dest)
    })();
    if res.is_err() {
        let _ = remove_file(tmp);
    }
    res
}

/// Bytes of a file mapped read-only ([`File::map_read`]).
pub struct Mapped {
    base: std::ptr::NonNull<u8>,
    /// Bytes mapped, from the page boundary at or before the offset asked for.
    mapped: usize,
    /// Where the bytes asked for start in the mapping.
    start: usize,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value alone; reading it from any thread is
// reading memory.
#[allow(unsafe_code)]
unsafe impl Send for Mapped {}
// SAFETY: as for `Send`: shared access only reads the mapped bytes.
#[allow(unsafe_code)]
unsafe impl Sync for Mapped {}

impl Mapped {
    fn new(fd: std::os::fd::RawFd, offset: u64, len: usize) -> io::Result<Mapped> {
        let page = os_page() as u64;
        let from = offset - offset % page;
        let start = (offset - from) as usize;
        let mapped = (start + len).max(1);
        let at = libc::off_t::try_from(from).map_err(io::Error::other)?;
        #[allow(unsafe_code)]
        // SAFETY: a new shared read-only mapping at an address the kernel picks, of a file
        // descriptor that is open; it overlaps nothing.
        let base =
            unsafe { libc::mmap(std::ptr::null_mut(), mapped, libc::PROT_READ, libc::MAP_SHARED, fd, at) };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        #[allow(unsafe_code)]
        // SAFETY: the range was just mapped; the advice only tunes read-ahead.
        unsafe {
            libc::madvise(base, mapped, libc::MADV_SEQUENTIAL)
        };
        let base = std::ptr::NonNull::new(base.cast()).expect("mmap never returns null");
        Ok(Mapped { base, mapped, start, len })
    }

    /// Stop holding the whole pages of bytes `range` (of the bytes asked for) in this process:
    /// their page-table entries go, the file's pages stay in the page cache, and a later read
    /// maps them again. A long read of a large file through the mapping then holds what it is
    /// reading in the process's resident memory, not all it has read.
    pub(crate) fn release(&self, range: std::ops::Range<usize>) {
        let page = os_page();
        let (from, to) = (self.start + range.start, (self.start + range.end).min(self.start + self.len));
        let (from, to) = (from.next_multiple_of(page), to - to % page);
        if to <= from {
            return;
        }
        #[allow(unsafe_code)]
        // SAFETY: `from..to` lies inside the mapping made in `new` (page-aligned from its
        // page-aligned base). MADV_DONTNEED on a shared file mapping drops only this process's
        // entries for those pages; the next read of them faults the file's bytes back in,
        // unchanged (the mapped bytes of a log never change while mapped: see `map_read`), as
        // after the kernel reclaims clean file pages under memory pressure, which it may do at
        // any time. Its result is ignored: it is a hint.
        unsafe {
            libc::madvise(self.base.as_ptr().add(from).cast(), to - from, libc::MADV_DONTNEED);
        }
    }
}

/// The OS's page size (`sysconf(_SC_PAGESIZE)`), the unit `mmap` offsets and `madvise`
/// ranges come in.
pub(crate) fn os_page() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        #[allow(unsafe_code)]
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(page).ok().filter(|p| p.is_power_of_two()).unwrap_or(4096)
    })
}

impl std::ops::Deref for Mapped {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        #[allow(unsafe_code)]
        // SAFETY: `start + len` bytes from `base` are mapped readable for as long as `self`
        // lives, and the file keeps them (see `File::map_read`).
        unsafe {
            std::slice::from_raw_parts(self.base.as_ptr().add(self.start), self.len)
        }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        #[allow(unsafe_code)]
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.mapped);
        }
    }
}
