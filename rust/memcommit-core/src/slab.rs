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

use std::fs::File;
use std::io;
use std::ops::{Deref, DerefMut};
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// A page, the unit of mappings (4 KiB on the machines memcommit runs on; `map` checks).
pub const PAGE: usize = 4096;

/// Reserved memory: a mapping of `bytes` at `base`, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Region {
    base: NonNull<u8>,
    bytes: usize,
    /// Bytes at the start that come from the file (the rest is anonymous).
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
    /// Map `len` bytes of `file` at `offset` (a multiple of `PAGE`) privately and writably, at
    /// the start of `reserve` bytes (at least `len`) of reserved memory.
    pub(crate) fn map(file: &File, offset: u64, len: usize, reserve: usize) -> io::Result<Region> {
        #[allow(unsafe_code)]
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page != PAGE as libc::c_long || !(offset as usize).is_multiple_of(PAGE) {
            return Err(io::Error::other("the mapping is not page-aligned"));
        }
        let file_bytes = len.next_multiple_of(PAGE);
        let bytes = reserve.max(len).next_multiple_of(PAGE).max(PAGE);
        let offset = libc::off_t::try_from(offset).map_err(io::Error::other)?;
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
        let region =
            Region { base: NonNull::new(base.cast()).expect("mmap never returns null"), bytes, file_bytes };
        if file_bytes > 0 {
            #[allow(unsafe_code)]
            // SAFETY: MAP_FIXED replaces the start of the range reserved just above, which this
            // function owns and nothing references yet.
            let at = unsafe {
                libc::mmap(
                    base,
                    file_bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_FIXED,
                    file.as_raw_fd(),
                    offset,
                )
            };
            if at == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(region)
    }

    /// The bytes mapped from the file (up to the page after the asked length).
    pub(crate) fn file_bytes(&self) -> &[u8] {
        #[allow(unsafe_code)]
        // SAFETY: the first `file_bytes` bytes are mapped readable, live as long as `self`,
        // and are only written through `&mut` of the slab that owns `self`.
        unsafe {
            std::slice::from_raw_parts(self.base.as_ptr(), self.file_bytes)
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
    /// The region must start at an address aligned for `T` (a page is), and its first
    /// `len * size_of::<T>()` bytes must each be a valid `T`: checked by the caller (for an
    /// index entry: its tier and status bytes).
    #[allow(unsafe_code)]
    pub(crate) unsafe fn from_region(region: Region, len: usize) -> Slab<T> {
        let size = std::mem::size_of::<T>().max(1);
        assert!(len * size <= region.file_bytes, "the values lie inside the mapped file");
        let cap = region.bytes / size;
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
                    region.base.as_ptr().cast::<T>().add(*len).write(value);
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
                    std::slice::from_raw_parts(region.base.as_ptr().cast::<T>(), *len)
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
                    std::slice::from_raw_parts_mut(region.base.as_ptr().cast::<T>(), *len)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_mapped_slab_reads_the_file_and_grows_in_place_then_on_the_heap() {
        let mut f = tempfile::tempfile().unwrap();
        let values: Vec<u64> = (0..3000u64).collect();
        let mut bytes = vec![0u8; PAGE];
        bytes.extend(values.iter().flat_map(|v| v.to_le_bytes()));
        bytes.resize(bytes.len().next_multiple_of(PAGE), 0);
        f.write_all(&bytes).unwrap();
        let region = Region::map(&f, PAGE as u64, 3000 * 8, 2 * PAGE * 8).unwrap();
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
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut back, (PAGE + 7 * 8) as u64).unwrap();
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
}
