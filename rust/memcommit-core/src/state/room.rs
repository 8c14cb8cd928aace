//! `Room`: memory a coming write will touch, faulted in ahead by another thread.
//!
//! Why: a bulk commit of a million puts writes about 100 MB of index the process never touched
//! (the entries and the id table grow into fresh memory), and the kernel supplies each 4 KiB
//! page of it at its first write: tens of milliseconds of page faults on the thread that
//! applies the puts, the one the whole commit waits for. While the binding reads a
//! `put_rows` call's rows, the other core is idle: it asks the kernel for those pages then.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::vfs::os_page;

/// Address ranges to fault in, writable, before they are written.
#[derive(Debug, Default)]
pub struct Room {
    ranges: Vec<Range<usize>>,
}

impl Room {
    /// No memory.
    pub fn new() -> Room {
        Room::default()
    }

    /// Add the bytes `range` (addresses) covers.
    pub(crate) fn add(&mut self, range: Range<usize>) {
        if range.end > range.start {
            self.ranges.push(range);
        }
    }

    /// Add the room `v` has past its values, for as many more as it has room for.
    pub fn add_spare<T>(&mut self, v: &Vec<T>) {
        let size = std::mem::size_of::<T>();
        let at = v.as_ptr() as usize;
        self.add(at + v.len() * size..at + v.capacity() * size);
    }

    /// Add the ranges of `later`, after these.
    pub fn extend(&mut self, later: Room) {
        self.ranges.extend(later.ranges);
    }

    /// Whether there is nothing to fault in.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Have the kernel supply every page of the ranges now, in order, writable, as a first
    /// write to each would, without changing a byte of them (`MADV_POPULATE_WRITE`): the
    /// thread that writes there next finds them mapped. Meant for another thread than the
    /// writer's, while the writer does something else; it stops early once `stop` is set.
    ///
    /// Harmless if the memory has moved meanwhile (a vector that grew, an index another commit
    /// replaced): the advice changes no byte of whatever is there now, and on memory no longer
    /// mapped it fails, and this stops. Linux 5.14 on; elsewhere it does nothing.
    pub fn populate(&self, stop: &AtomicBool) {
        #[cfg(target_os = "linux")]
        {
            /// Faulted in per call, so that a writer on the same memory waits for at most
            /// this much of it.
            const STEP: usize = 2 << 20;
            let page = os_page();
            for r in &self.ranges {
                let (mut at, end) = (r.start.next_multiple_of(page), r.end.next_multiple_of(page));
                while at < end && !stop.load(Ordering::Relaxed) {
                    let to = (at + STEP).min(end);
                    #[allow(unsafe_code)]
                    // SAFETY: MADV_POPULATE_WRITE reads and writes no byte of the range; it
                    // maps pages (or fails on an unmapped or unwritable range), so it cannot
                    // change memory any Rust value owns, whoever owns that memory now.
                    let done =
                        unsafe { libc::madvise(at as *mut libc::c_void, to - at, libc::MADV_POPULATE_WRITE) };
                    if done != 0 {
                        return;
                    }
                    at = to;
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (os_page, stop);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn populating_changes_no_byte_even_while_another_thread_writes() {
        let mut v: Vec<u64> = Vec::with_capacity(1 << 20);
        v.extend(0..1000);
        let mut room = Room::new();
        room.add(v.as_ptr() as usize..v.as_ptr() as usize + v.len() * 8);
        room.add_spare(&v);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| room.populate(&stop));
            v.extend(1000..(1 << 20));
        });
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
    }

    #[test]
    fn memory_freed_before_it_is_populated_is_harmless() {
        let mut room = Room::new();
        let v: Vec<u8> = Vec::with_capacity(64 << 20);
        room.add_spare(&v);
        drop(v); // a large allocation: unmapped on free
        room.populate(&AtomicBool::new(false));
        let w = vec![7u8; 64 << 20];
        assert!(w.iter().all(|&b| b == 7));
    }
}
