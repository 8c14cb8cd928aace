//! Memories by task: for each task, the numbers of the entries that carry it, ascending (so in
//! creation order), so that `find(task=)` walks one task's memories instead of every entry.
//!
//! A list may still hold an entry that a later put moved to another task: a reader checks the
//! entry's task, as it checks every other filter. An entry is listed at most once per task.

/// The entries of each task (see the module docs), by interned task number; task 0 ("none")
/// is never listed.
#[derive(Clone, Debug, Default)]
pub struct ByTask {
    lists: Vec<Vec<u32>>,
}

impl ByTask {
    /// The lists of entries whose tasks are `tasks` in entry order, the first numbered
    /// `first`.
    pub fn of_tasks(tasks: impl IntoIterator<Item = u32>, first: u32) -> ByTask {
        let mut by = ByTask::default();
        for (n, task) in (first..).zip(tasks) {
            by.push(task, n);
        }
        by
    }

    /// The entries listed under `task`, ascending (some may have moved to another task since).
    pub fn of(&self, task: u32) -> &[u32] {
        self.lists.get(task as usize).map_or(&[], |l| l.as_slice())
    }

    /// List entry `n`, newer than every entry listed, under `task`.
    pub fn push(&mut self, task: u32, n: u32) {
        if task == 0 {
            return;
        }
        let list = self.list_mut(task);
        debug_assert!(list.last().is_none_or(|&last| last < n), "entry {n} is not the newest");
        list.push(n);
    }

    /// List entry `n` under `task`, wherever it falls; false if it was listed there already.
    pub fn add(&mut self, task: u32, n: u32) -> bool {
        if task == 0 {
            return false;
        }
        let list = self.list_mut(task);
        match list.last() {
            Some(&last) if last < n => list.push(n),
            None => list.push(n),
            Some(_) => match list.binary_search(&n) {
                Ok(_) => return false,
                Err(at) => list.insert(at, n),
            },
        }
        true
    }

    /// Take entry `n` off the list of `task` (taking back an `add` or a `push`).
    pub fn remove(&mut self, task: u32, n: u32) {
        if let Some(list) = self.lists.get_mut(task as usize) {
            if list.last() == Some(&n) {
                list.pop();
            } else if let Ok(at) = list.binary_search(&n) {
                list.remove(at);
            }
        }
    }

    /// Append `next`'s lists, whose entries are all newer than this one's.
    pub fn append(&mut self, next: ByTask) {
        if self.lists.len() < next.lists.len() {
            self.lists.resize_with(next.lists.len(), Vec::new);
        }
        for (list, more) in self.lists.iter_mut().zip(next.lists) {
            if list.is_empty() {
                *list = more;
            } else {
                list.extend(more);
            }
        }
    }

    /// Bytes held, for reports.
    pub fn bytes(&self) -> usize {
        let lists = self.lists.capacity() * std::mem::size_of::<Vec<u32>>();
        lists + self.lists.iter().map(|l| l.capacity() * 4).sum::<usize>()
    }

    fn list_mut(&mut self, task: u32) -> &mut Vec<u32> {
        let t = task as usize;
        if self.lists.len() <= t {
            self.lists.resize_with(t + 1, Vec::new);
        }
        &mut self.lists[t]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_keeps_each_list_ascending_and_without_repeats() {
        let mut by = ByTask::default();
        by.push(2, 1);
        by.push(2, 5);
        assert!(by.add(2, 3), "an older entry moved to the task");
        assert!(!by.add(2, 3), "listed once");
        assert!(by.add(2, 9));
        assert!(!by.add(0, 4), "task 0 is none");
        assert_eq!(by.of(2), &[1, 3, 5, 9]);
        assert_eq!(by.of(0), &[] as &[u32]);
        assert_eq!(by.of(7), &[] as &[u32], "a task never seen");
        by.remove(2, 3);
        by.remove(2, 9);
        by.remove(2, 4);
        assert_eq!(by.of(2), &[1, 5]);
    }

    #[test]
    fn append_joins_the_lists_of_two_runs_of_entries() {
        let mut a = ByTask::default();
        a.push(1, 0);
        a.push(3, 1);
        let mut b = ByTask::default();
        b.push(1, 2);
        b.push(4, 3);
        a.append(b);
        assert_eq!((a.of(1), a.of(3), a.of(4)), (&[0, 2][..], &[1][..], &[3][..]));
    }
}
