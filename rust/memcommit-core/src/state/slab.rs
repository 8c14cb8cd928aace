//! `Slab`: a vector of plain values held on the heap, or in a private mapping of part of a file
//! (the index file's large sections), used in place.
//!
//! Why: opening a million memories from the index file reads 140 MB. Copied into fresh heap
//! memory, most of the time goes to page faults on that memory, not to the copy; mapped, the
//! values are the page cache's pages already in RAM, and nothing is copied. The mapping is
//! private (`MAP_PRIVATE`): a value changed in place copies its page for this process only and
//! never reaches the file. It sits at the start of a larger reserved range of anonymous memory,
//! so appending goes on in place, into pages the kernel supplies on first touch; only past
//! that range does the slab move its values to the heap.
//!
//! The one rule that keeps a mapping sound: the file is never changed in place while mapped.
//! memcommit writes an index file whole under a temporary name and renames it, so a mapped
//! file is never written again (the mapping keeps the old file alive after the rename).
//!
//! Page sizes: the index file aligns its sections to [`ALIGN`] (4 KiB) whatever the machine,
//! so a file written on one machine opens on another. `mmap` needs offsets that are multiples
//! of the OS's page size, which is larger on some machines (16 KiB on Apple silicon, 64 KiB on
//! some aarch64 Linux kernels): a section is mapped from the page boundary at or before it,
//! and its values start that many bytes into the mapping.

#[cfg(not(unix))]
compile_error!(
    "memcommit's engine runs on Unix (Linux, macOS) only for now: it maps files with mmap, \
     reads and writes with pread/pwrite and has no Windows port yet"
);

use std::io;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::vfs::{os_page, File};

/// The alignment of the sections of an index file on disk: a fixed constant, not the machine's
/// page size, so that files stay portable. Mappings use [`os_page`].
pub const ALIGN: usize = 4096;

/// Reserved memory: a mapping of `bytes` at `base`, unmapped on drop. The values start at
/// `base + start`.
#[derive(Debug)]
pub(crate) struct Region {
    base: NonNull<u8>,
    bytes: usize,
    /// Where the values start in the mapping: the distance from the page boundary the file
    /// was mapped from to the asked offset (0 when it is on a page boundary).
    start: usize,
    /// Bytes from `start` on that come from the file, the asked length rounded up to
    /// [`ALIGN`] (the rest is other bytes of the file or anonymous memory).
    file_bytes: usize,
}

// SAFETY: a `Region` is plain memory that only its owner reaches (through `&`/`&mut` of the
// slab that holds it), like a `Vec`'s buffer.
#[allow(unsafe_code)]
unsafe impl Send for Region {}
// SAFETY: as above; shared access only reads.
#[allow(unsafe_code)]
unsafe impl Sync for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        #[allow(unsafe_code)]
        // SAFETY: `base..base + bytes` is the range `map` reserved, and nothing borrows it any
        // more (the slab holding this region is being dropped).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.bytes);
        }
    }
}

impl Region {
    /// Map `len` bytes of `file` at `offset` (a multiple of [`ALIGN`]) privately and writably,
    /// at the start of `reserve` bytes (at least `len`) of reserved memory. The file must hold
    /// at least `len` rounded up to [`ALIGN`] bytes at `offset`.
    pub(crate) fn map(file: &File, offset: u64, len: usize, reserve: usize) -> io::Result<Region> {
        Region::map_with_page(file, offset, len, reserve, os_page())
    }

    /// `map` for a page size of `page` bytes (a power of two, at least the OS's).
    fn map_with_page(
        file: &File,
        offset: u64,
        len: usize,
        reserve: usize,
        page: usize,
    ) -> io::Result<Region> {
        let offset = usize::try_from(offset).map_err(io::Error::other)?;
        if !offset.is_multiple_of(ALIGN) {
            return Err(io::Error::other("the mapping does not start on a 4 KiB boundary"));
        }
        let start = offset % page;
        let file_bytes = len.next_multiple_of(ALIGN);
        let file_map = if file_bytes > 0 { (start + file_bytes).next_multiple_of(page) } else { 0 };
        let bytes = (start + reserve.max(len)).next_multiple_of(page).max(file_map).max(page);
        let map_at = libc::off_t::try_from(offset - start).map_err(io::Error::other)?;
        #[allow(unsafe_code)]
        // SAFETY: a fresh anonymous mapping at an address the kernel picks: it overlaps
        // nothing. MAP_NORESERVE: untouched pages cost nothing.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let region = Region {
            base: NonNull::new(base.cast()).expect("mmap never returns null"),
            bytes,
            start,
            file_bytes,
        };
        let Some(fd) = file.mappable() else {
            // A simulated file: its bytes are copied in.
            #[allow(unsafe_code)]
            // SAFETY: `data()..data() + file_bytes` lies inside the mapping just made (`bytes`
            // covers `start + len.max(reserve)`, and `file_map` at least `start + file_bytes`),
            // which nothing else references yet.
            let dst = unsafe { std::slice::from_raw_parts_mut(region.data(), file_bytes) };
            file.read_exact_at(dst, offset as u64)?;
            return Ok(region);
        };
        if file_map > 0 {
            #[allow(unsafe_code)]
            // SAFETY: MAP_FIXED replaces the start of the range reserved just above, which this
            // function owns and nothing references yet. `map_at` is a multiple of the page
            // size. The file holds `offset + file_bytes` bytes, so the last page mapped holds
            // some of the file (no page lies wholly past its end, which would fault).
            let at = unsafe {
                libc::mmap(
                    base,
                    file_map,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_FIXED,
                    fd,
                    map_at,
                )
            };
            if at == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(region)
    }

    /// Where the values start.
    fn data(&self) -> *mut u8 {
        #[allow(unsafe_code)]
        // SAFETY: `start` is less than a page, and the mapping is at least a page long.
        unsafe {
            self.base.as_ptr().add(self.start)
        }
    }

    /// The bytes mapped from the file: the asked length and its padding up to [`ALIGN`].
    pub(crate) fn file_bytes(&self) -> &[u8] {
        #[allow(unsafe_code)]
        // SAFETY: the `file_bytes` bytes from `start` on are mapped readable, live as long as
        // `self`, and are only written through `&mut` of the slab that owns `self`.
        unsafe {
            std::slice::from_raw_parts(self.data(), self.file_bytes)
        }
    }
}

/// Values on the heap or in a mapped region.
#[derive(Debug)]
pub(crate) enum Slab<T: Copy> {
    /// On the heap.
    Heap(Vec<T>),
    /// In a mapping: `len` values at the start of the region, room for `cap`.
    Mapped { region: Region, len: usize, cap: usize, _t: std::marker::PhantomData<T> },
}

impl<T: Copy> Default for Slab<T> {
    fn default() -> Self {
        Slab::Heap(Vec::new())
    }
}

impl<T: Copy> From<Vec<T>> for Slab<T> {
    fn from(v: Vec<T>) -> Self {
        Slab::Heap(v)
    }
}

impl<T: Copy> Slab<T> {
    /// The first `len` values of `region`, with the rest of it as room to grow.
    ///
    /// # Safety
    ///
    /// The region's values must start at an address aligned for `T` (an [`ALIGN`] boundary
    /// is), and its first
    /// `len * size_of::<T>()` bytes must each be a valid `T`: checked by the caller (for an
    /// index entry: its tier and status bytes).
    #[allow(unsafe_code)]
    pub(crate) unsafe fn from_region(region: Region, len: usize) -> Slab<T> {
        let size = std::mem::size_of::<T>().max(1);
        assert!(len * size <= region.file_bytes, "the values lie inside the mapped file");
        let cap = (region.bytes - region.start) / size;
        Slab::Mapped { region, len, cap, _t: std::marker::PhantomData }
    }

    /// Move the values to the heap, with room for `extra` more (growing past the region).
    fn move_to_heap(&mut self, extra: usize) -> &mut Vec<T> {
        if let Slab::Mapped { len, .. } = self {
            let mut v = Vec::with_capacity((*len + extra).max(*len * 2));
            v.extend_from_slice(self);
            *self = Slab::Heap(v);
        }
        match self {
            Slab::Heap(v) => v,
            Slab::Mapped { .. } => unreachable!("moved to the heap above"),
        }
    }

    /// Make room for `extra` more values without moving again.
    pub(crate) fn reserve(&mut self, extra: usize) {
        match self {
            Slab::Heap(v) => v.reserve(extra),
            Slab::Mapped { len, cap, .. } if *len + extra <= *cap => {}
            Slab::Mapped { .. } => {
                self.move_to_heap(extra);
            }
        }
    }

    /// Append a value.
    pub(crate) fn push(&mut self, value: T) {
        match self {
            Slab::Heap(v) => v.push(value),
            Slab::Mapped { region, len, cap, .. } if *len < *cap => {
                #[allow(unsafe_code)]
                // SAFETY: `len < cap`, so the slot lies inside the region, which is writable
                // and aligned for `T`; it becomes part of the slab by the `len` increment.
                unsafe {
                    region.data().cast::<T>().add(*len).write(value);
                }
                *len += 1;
            }
            Slab::Mapped { .. } => self.move_to_heap(1).push(value),
        }
    }

    /// Append values.
    pub(crate) fn extend_from_slice(&mut self, values: &[T]) {
        self.reserve(values.len());
        match self {
            Slab::Heap(v) => v.extend_from_slice(values),
            Slab::Mapped { .. } => values.iter().for_each(|&x| self.push(x)),
        }
    }

    /// The address of the first value, the values and the room for them.
    fn layout(&self) -> (usize, usize, usize) {
        match self {
            Slab::Heap(v) => (v.as_ptr() as usize, v.len(), v.capacity()),
            Slab::Mapped { region, len, cap, .. } => (region.data() as usize, *len, *cap),
        }
    }

    /// The addresses of its values, for a [`Room`](crate::state::room::Room).
    pub(crate) fn addresses(&self) -> std::ops::Range<usize> {
        let (at, len, _) = self.layout();
        at..at + len * std::mem::size_of::<T>()
    }

    /// The addresses of the room for values `next` past the last one (`0..n`: the next `n`),
    /// as much of it as is reserved, for a [`Room`](crate::state::room::Room).
    pub(crate) fn room_for(&self, next: std::ops::Range<usize>) -> std::ops::Range<usize> {
        let (at, len, cap) = self.layout();
        let size = std::mem::size_of::<T>();
        let (from, to) = ((len + next.start).min(cap), (len + next.end).min(cap));
        at + from * size..at + to * size
    }

    /// Remove and return the last value.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let last = *self.last()?;
        match self {
            Slab::Heap(v) => {
                v.pop();
            }
            Slab::Mapped { len, .. } => *len -= 1,
        }
        Some(last)
    }

    /// Keep the first `n` values.
    pub(crate) fn truncate(&mut self, n: usize) {
        match self {
            Slab::Heap(v) => v.truncate(n),
            Slab::Mapped { len, .. } => *len = (*len).min(n),
        }
    }

    /// Give back unused heap capacity (a mapping keeps its reserve: it costs no memory).
    pub(crate) fn shrink_to_fit(&mut self) {
        if let Slab::Heap(v) = self {
            v.shrink_to_fit();
        }
    }

    /// Values it has room for without moving.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        match self {
            Slab::Heap(v) => v.capacity(),
            Slab::Mapped { cap, .. } => *cap,
        }
    }

    /// Bytes it holds in RAM: the heap's capacity, or the mapped values (pages of the file
    /// in the page cache; the untouched reserve costs nothing).
    pub(crate) fn bytes(&self) -> usize {
        let size = std::mem::size_of::<T>();
        match self {
            Slab::Heap(v) => v.capacity() * size,
            Slab::Mapped { len, .. } => len * size,
        }
    }

    /// Whether the values are mapped from a file.
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self, Slab::Mapped { .. })
    }
}

impl<T: Copy> Deref for Slab<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Slab::Heap(v) => v,
            Slab::Mapped { region, len, .. } => {
                #[allow(unsafe_code)]
                // SAFETY: the first `len` values are initialized and valid (`from_region`'s
                // contract, then written by `push`), aligned, and live as long as `self`.
                unsafe {
                    std::slice::from_raw_parts(region.data().cast::<T>(), *len)
                }
            }
        }
    }
}

impl<T: Copy> DerefMut for Slab<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Slab::Heap(v) => v,
            Slab::Mapped { region, len, .. } => {
                #[allow(unsafe_code)]
                // SAFETY: as in `deref`; the mapping is writable (private: writes stay in this
                // process), and `&mut self` makes this the only reference.
                unsafe {
                    std::slice::from_raw_parts_mut(region.data().cast::<T>(), *len)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file holding `bytes`, and the directory it is in.
    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().unwrap();
        let f = crate::vfs::Open::create_truncate().open(&dir.path().join("f")).unwrap();
        f.write_all_at(bytes, 0).unwrap();
        (dir, f)
    }

    #[test]
    fn the_room_for_values_past_the_last_is_where_they_will_go_within_the_reserve() {
        let mut slab: Slab<u64> = Slab::from(Vec::with_capacity(100));
        for v in 0..10 {
            slab.push(v);
        }
        let at = slab.addresses().start;
        assert_eq!(slab.addresses(), at..at + 80);
        assert_eq!(slab.room_for(5..20), at + 15 * 8..at + 30 * 8);
        assert_eq!(slab.room_for(0..500), at + 80..at + slab.capacity() * 8);
        assert!(slab.room_for(slab.capacity()..slab.capacity() + 9).is_empty());
    }

    #[test]
    fn a_mapped_slab_reads_the_file_and_grows_in_place_then_on_the_heap() {
        let values: Vec<u64> = (0..3000u64).collect();
        let mut bytes = vec![0u8; ALIGN];
        bytes.extend(values.iter().flat_map(|v| v.to_le_bytes()));
        bytes.resize(bytes.len().next_multiple_of(ALIGN), 0);
        let (_dir, f) = file_of(&bytes);
        let region = Region::map(&f, ALIGN as u64, 3000 * 8, 2 * ALIGN * 8).unwrap();
        assert_eq!(&region.file_bytes()[..8], &0u64.to_le_bytes());
        #[allow(unsafe_code)]
        // SAFETY: any 8 bytes are a valid u64, and a page is aligned for one.
        let mut s: Slab<u64> = unsafe { Slab::from_region(region, 3000) };
        assert!(s.is_mapped());
        assert_eq!(&s[..], &values[..]);
        s[7] = 70;
        s.push(3000);
        s.extend_from_slice(&[3001, 3002]);
        assert_eq!(s.pop(), Some(3002));
        s.truncate(2999);
        assert!(s.is_mapped() && s.len() == 2999 && s[7] == 70);
        // The file is untouched by writes to the private mapping.
        let mut back = vec![0u8; 8];
        f.read_exact_at(&mut back, (ALIGN + 7 * 8) as u64).unwrap();
        assert_eq!(u64::from_le_bytes(back.try_into().unwrap()), 7);
        // Growing past the reserve moves to the heap with every value.
        let cap = s.capacity();
        for v in 0..(cap - s.len() + 10) as u64 {
            s.push(v);
        }
        assert!(!s.is_mapped());
        assert_eq!(s[7], 70);
        assert_eq!(s[2998], 2998);
    }

    /// A file written with 4 KiB alignment maps on machines with larger pages (16 KiB on
    /// Apple silicon, 64 KiB on some aarch64 kernels): the mapping starts at the page boundary
    /// before the section, and the section's values and padding are exactly its own.
    #[test]
    fn a_section_maps_at_a_4k_offset_whatever_the_page_size() {
        // Sections at 4, 8 and 20 KiB, each padded to the next: none on a 16 or 64 KiB boundary.
        let sections: [(u64, u64); 3] = [(1, 500), (2, 1500), (5, 300)];
        let mut bytes = vec![0u8; 6 * ALIGN + 4 * ALIGN];
        bytes[..ALIGN].fill(0xEE); // a header page that is not zeros
        for (page, n) in sections {
            let at = page as usize * ALIGN;
            for v in 0..n {
                let i = at + v as usize * 8;
                bytes[i..i + 8].copy_from_slice(&(page * 1_000_000 + v).to_le_bytes());
            }
        }
        bytes[9 * ALIGN..].fill(0xAB); // the file's tail (the index file's small section)
        let (_dir, f) = file_of(&bytes);
        for page in [ALIGN, 4 * ALIGN, 16 * ALIGN] {
            for (at, n) in sections {
                let len = n as usize * 8;
                let region = Region::map_with_page(&f, at * ALIGN as u64, len, 2 * len, page).unwrap();
                assert_eq!(region.file_bytes().len(), len.next_multiple_of(ALIGN));
                assert!(region.file_bytes()[len..].iter().all(|&b| b == 0), "page {page}: the padding");
                #[allow(unsafe_code)]
                // SAFETY: any 8 bytes are a valid u64, and an ALIGN boundary is aligned for one.
                let mut s: Slab<u64> = unsafe { Slab::from_region(region, n as usize) };
                let want: Vec<u64> = (0..n).map(|v| at * 1_000_000 + v).collect();
                assert_eq!(&s[..], &want[..], "page {page}, section at {at}");
                for v in 0..n {
                    s.push(v);
                }
                assert!(s.is_mapped(), "page {page}: grows in place up to its reserve");
                assert_eq!(s[n as usize * 2 - 1], n - 1);
                assert_eq!(s[0], at * 1_000_000);
            }
        }
        // The file is untouched by the writes to the private mappings.
        let mut back = vec![0u8; bytes.len()];
        f.read_exact_at(&mut back, 0).unwrap();
        assert!(back == bytes);
        // An offset off the on-disk alignment is refused.
        assert!(Region::map_with_page(&f, 100, 8, 8, ALIGN).is_err());
    }
}
