//! The index replay builds: every memory by id, with what queries, guards and retention need,
//! the offsets of its last put, status and move records, and (`history`) those of its older
//! ones.
//!
//! Memory per memory is what limits how large a store can grow in RAM, so an entry is a
//! fixed 96-byte struct: strings that repeat (kinds, tasks, tag sets) are interned to u32,
//! the id lives once in an arena, and the id table stores an entry number and the id's hash
//! (so growing the table never reads entries, and most probes never touch them).

use foldhash::fast::FixedState;
use hashbrown::HashMap;
use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::ops::Bound;

use crate::format::memory::{self, Status, Tier};
use crate::format::seal::{self, SealEntry};
use crate::format::{Op, RecordView, RECORD_OVERHEAD};
use crate::state::by_task::ByTask;
use crate::state::history::History;
use crate::state::idtable::IdTable;
use crate::state::room::Room;
use crate::state::slab::Slab;

/// An offset that is not there (a memory with no status or move record).
pub const NO_OFFSET: u64 = u64::MAX;

/// One memory, as the index keeps it. Its layout (`repr(C)`, no padding) is the index file's
/// entry row on a little-endian machine, so a mapped index file is used as it is.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Entry {
    /// Where the id's bytes start in the arena.
    pub id_off: u64,
    /// Byte offset of the memory's last put record.
    pub put_off: u64,
    /// Byte offset of its last status record, or `NO_OFFSET`.
    pub status_off: u64,
    /// Byte offset of its last move record, or `NO_OFFSET`.
    pub move_off: u64,
    /// LSN of the newest record that touched it.
    pub lsn: u64,
    /// LSN of its first put (creation order).
    pub created_lsn: u64,
    /// Creation time, microseconds since the epoch.
    pub created_at: i64,
    /// Time of the newest record that touched it.
    pub updated_at: i64,
    /// Time of its last move (or its creation, if never moved).
    pub moved_at: i64,
    /// Length of the last put record.
    pub put_len: u32,
    /// Interned kind.
    pub kind: u32,
    /// Interned task; 0 for none.
    pub task: u32,
    /// Interned tag set; 0 for no tags.
    pub tags: u32,
    /// The id's hash (what the id table is keyed by; kept so growing the table never
    /// rehashes ids).
    pub hash: u32,
    /// Length of the id.
    pub id_len: u16,
    /// Tier.
    pub tier: Tier,
    /// Status.
    pub status: Status,
}

const _: () = {
    assert!(std::mem::size_of::<Entry>() == 96);
    assert!(std::mem::offset_of!(Entry, created_at) == 48);
    assert!(std::mem::offset_of!(Entry, put_len) == 72);
    assert!(std::mem::offset_of!(Entry, hash) == 88);
    assert!(std::mem::offset_of!(Entry, id_len) == 92);
    assert!(std::mem::offset_of!(Entry, tier) == 94);
    assert!(std::mem::offset_of!(Entry, status) == 95);
};

/// Two entries are equal when they describe the same memory at the same place; `hash` is a
/// cache (its seed differs from one open to the next) and takes no part.
impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        let key = |e: &Entry| {
            (
                (e.id_off, e.put_off, e.status_off, e.move_off, e.lsn, e.created_lsn),
                (e.created_at, e.updated_at, e.moved_at, e.put_len, e.kind, e.task, e.tags, e.id_len),
                (e.tier, e.status),
            )
        };
        key(self) == key(o)
    }
}

impl Eq for Entry {}

/// What to do to take back one applied record. Memories created since the `Mark` need no
/// undo entry: taking back a commit cuts them off the end.
#[derive(Clone, Debug)]
pub enum Undo {
    /// A memory changed: put back its old entry.
    Changed(u32, Entry),
    /// A task's finished mark changed.
    Task(u32, bool),
    /// An entity's newest record changed: its key and where its record was before.
    Entity(Box<[u8]>, Option<(u64, u32)>),
    /// An existing memory was listed under a task (a put moved it there): task, entry.
    Listed(u32, u32),
}

/// The index's size before a commit, to take the commit back.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    entries: usize,
    arena: usize,
    seals: usize,
    links: usize,
}

/// Strings interned to small numbers. Number 0 is the empty string / "none".
#[derive(Default, Debug)]
pub struct Interner {
    names: Vec<Box<str>>,
    ids: HashMap<Box<str>, u32>,
    /// The last string interned: batches repeat one kind or task many times over.
    last: u32,
}

impl Interner {
    fn new() -> Self {
        let mut i = Interner::default();
        i.intern("");
        i
    }

    /// The number for a string, adding it if new.
    pub fn intern(&mut self, s: &str) -> u32 {
        if !self.names.is_empty() && &*self.names[self.last as usize] == s {
            return self.last;
        }
        if let Some(&id) = self.ids.get(s) {
            self.last = id;
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(s.into());
        self.ids.insert(s.into(), id);
        id
    }

    /// The number for a string already seen.
    pub fn lookup(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }

    /// An interner holding `names` in number order; `None` if the first is not the empty
    /// string or a name appears twice.
    pub(crate) fn from_names(names: Vec<Box<str>>) -> Option<Self> {
        if names.first().is_none_or(|n| !n.is_empty()) {
            return None;
        }
        let mut ids = HashMap::with_capacity(names.len());
        for (n, name) in names.iter().enumerate() {
            if ids.insert(name.clone(), n as u32).is_some() {
                return None;
            }
        }
        Some(Interner { names, ids, last: 0 })
    }

    /// The string for a number.
    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// How many strings.
    pub fn len(&self) -> usize {
        self.names.len()
    }
}

/// The whole index.
///
/// The id table is keyed by a seeded hash whose seed the index keeps (`seed`), so the table
/// can be written to an index file and read back as it is (see `index_file`).
#[derive(Debug)]
pub struct Index {
    pub(crate) entries: Slab<Entry>,
    pub(crate) arena: Slab<u8>,
    pub(crate) table: IdTable,
    pub(crate) seed: u64,
    hasher: FixedState,
    /// Kinds.
    pub kinds: Interner,
    /// Task names.
    pub tasks: Interner,
    /// Tags.
    pub tags: Interner,
    pub(crate) tagsets: Vec<Box<[u32]>>,
    tagset_ids: HashMap<Box<[u32]>, u32>,
    pub(crate) finished: Vec<bool>,
    /// Whether entries are in creation order; a compacted log can replay out of order.
    sorted: bool,
    /// The seals of this log, in log order.
    pub(crate) seals: Vec<SealEntry>,
    /// Every live entity of the roles: its key and (offset, length) of its newest record, in
    /// key order (the roles read one entity, or every entity under a key prefix).
    pub(crate) entities: BTreeMap<Box<[u8]>, (u64, u32)>,
    /// Entity records applied so far (a reader reloads the roles only when it moves).
    pub(crate) entity_records: u64,
    /// Where each memory's older records are.
    pub(crate) history: History,
    /// The memories of each task.
    pub(crate) by_task: ByTask,
}

/// A record that does not make sense against the state (a status of an unknown memory...).
pub type ApplyError = &'static str;

impl Default for Index {
    fn default() -> Self {
        Self::new()
    }
}

impl Index {
    /// An empty index, its id hash seeded at random.
    pub fn new() -> Self {
        let mut seed = [0u8; 8];
        // Without randomness the index works the same; only its resistance to chosen ids
        // that collide suffers.
        let _ = getrandom::fill(&mut seed);
        Index::with_seed(u64::from_le_bytes(seed))
    }

    /// An empty index whose id hash has this seed.
    pub(crate) fn with_seed(seed: u64) -> Self {
        let mut tagset_ids = HashMap::default();
        tagset_ids.insert(Vec::new().into_boxed_slice(), 0);
        Index {
            entries: Slab::default(),
            arena: Slab::default(),
            table: IdTable::default(),
            seed,
            hasher: FixedState::with_seed(seed),
            kinds: Interner::new(),
            tasks: Interner::new(),
            tags: Interner::new(),
            tagsets: vec![Vec::new().into_boxed_slice()],
            tagset_ids,
            finished: vec![false],
            sorted: true,
            seals: Vec::new(),
            entities: BTreeMap::new(),
            entity_records: 0,
            history: History::default(),
            by_task: ByTask::default(),
        }
    }

    /// An empty index that keeps no history of older records (see `History`): one built for
    /// one look and thrown away (log compaction's view of the log at its horizon).
    pub(crate) fn without_history() -> Self {
        Index { history: History::untracked(), ..Index::new() }
    }

    /// Number of memories.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every entry, in creation order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries[..]
    }

    /// The id of an entry.
    pub fn id_of(&self, e: &Entry) -> &str {
        let b = &self.arena[e.id_off as usize..e.id_off as usize + e.id_len as usize];
        // Ids are copied from keys validated as UTF-8 when written.
        std::str::from_utf8(b).unwrap_or("\u{fffd}")
    }

    /// The tags of an entry.
    pub fn tags_of(&self, e: &Entry) -> impl Iterator<Item = &str> {
        self.tagsets[e.tags as usize].iter().map(|&t| self.tags.name(t))
    }

    /// The task of an entry.
    pub fn task_of(&self, e: &Entry) -> Option<&str> {
        (e.task != 0).then(|| self.tasks.name(e.task))
    }

    pub(crate) fn hash(&self, id: &[u8]) -> u32 {
        self.hasher.hash_one(id) as u32
    }

    /// Say whether the entries are in creation order (`finish_replay` sorts them if not).
    pub(crate) fn set_sorted(&mut self, sorted: bool) {
        self.sorted = sorted;
    }

    /// Rebuild the lookup table of tag sets (after they were read back from an index file).
    pub(crate) fn rebuild_tagset_ids(&mut self) {
        self.tagset_ids = self.tagsets.iter().enumerate().map(|(n, s)| (s.clone(), n as u32)).collect();
    }

    /// The entry number of an id.
    pub fn position(&self, id: &str) -> Option<u32> {
        self.position_bytes(id.as_bytes())
    }

    /// `position` for an id given as bytes (a record's key: no UTF-8 check needed to look it up).
    fn position_bytes(&self, id: &[u8]) -> Option<u32> {
        self.lookup(id).pos
    }

    /// An id's hash and entry number: what `apply_at` needs, so the id is hashed once.
    pub fn lookup(&self, id: &[u8]) -> Slot {
        let hash = self.hash(id);
        Slot { hash, pos: self.find_hashed(id, hash) }
    }

    fn find_hashed(&self, id: &[u8], h: u32) -> Option<u32> {
        let (entries, arena) = (&self.entries, &self.arena);
        self.table.find(h, |i| {
            let e = &entries[i as usize];
            &arena[e.id_off as usize..e.id_off as usize + e.id_len as usize] == id
        })
    }

    /// `lookup` for an id whose hash (`hash`) the caller already computed.
    pub(crate) fn lookup_hashed(&self, id: &[u8], hash: u32) -> Slot {
        Slot { hash, pos: self.find_hashed(id, hash) }
    }

    /// `prefetch` for an id whose hash the caller already computed.
    pub(crate) fn prefetch_hashed(&self, hash: u32) {
        self.table.prefetch(hash);
    }

    /// Start loading the id table's slot for `id` into the cache (replay calls it one record
    /// ahead).
    pub fn prefetch(&self, id: &[u8]) {
        self.table.prefetch(self.hash(id));
    }

    /// The entry of an id.
    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.position(id).map(|i| &self.entries[i as usize])
    }

    /// Whether a task has been marked finished.
    pub fn is_finished(&self, task: &str) -> bool {
        self.tasks.lookup(task).is_some_and(|t| self.finished[t as usize])
    }

    fn intern_tagset(&mut self, tags: &[&str]) -> u32 {
        if tags.is_empty() {
            return 0;
        }
        let mut ids: Vec<u32> = tags.iter().map(|t| self.tags.intern(t)).collect();
        ids.sort_unstable();
        ids.dedup();
        if let Some(&id) = self.tagset_ids.get(ids.as_slice()) {
            return id;
        }
        let id = self.tagsets.len() as u32;
        let b = ids.into_boxed_slice();
        self.tagsets.push(b.clone());
        self.tagset_ids.insert(b, id);
        id
    }

    /// The number of a kind, adding it if new.
    pub(crate) fn intern_kind(&mut self, kind: &str) -> u32 {
        self.kinds.intern(kind)
    }

    /// The number of a task, adding it if new.
    pub(crate) fn intern_task(&mut self, task: &str) -> u32 {
        let t = self.tasks.intern(task);
        if self.finished.len() <= t as usize {
            self.finished.resize(t as usize + 1, false);
        }
        t
    }

    /// Where the index stands now, to take back everything applied after it.
    pub fn mark(&self) -> Mark {
        Mark {
            entries: self.entries.len(),
            arena: self.arena.len(),
            seals: self.seals.len(),
            links: self.history.mark(),
        }
    }

    /// Apply one record at byte offset `off`. With `undo`, remember how to take it back.
    pub fn apply(
        &mut self,
        rec: &RecordView<'_>,
        off: u64,
        undo: Option<&mut Vec<Undo>>,
    ) -> Result<(), ApplyError> {
        let slot = match rec.op {
            Op::Task | Op::Seal | Op::Entity => Slot::default(),
            _ => self.lookup(rec.key),
        };
        self.apply_at(rec, off, slot, undo)
    }

    /// `apply`, for a caller that already looked the record's key up (`lookup`).
    pub fn apply_at(
        &mut self,
        rec: &RecordView<'_>,
        off: u64,
        slot: Slot,
        undo: Option<&mut Vec<Undo>>,
    ) -> Result<(), ApplyError> {
        let pos = slot.pos;
        if let (Some(i), Op::Put | Op::Status | Op::Move) = (pos, rec.op) {
            // Where its older records are linked: a likely cache miss, loaded while the record
            // is decoded.
            self.history.prefetch(i);
        }
        match rec.op {
            Op::Put => {
                let head = memory::decode_put_head_only(rec.payload).ok_or("malformed put payload")?;
                let put = PutApply {
                    key: rec.key,
                    state: head.state,
                    kind: head.kind,
                    task: head.task,
                    tags: &head.tags,
                    lsn: rec.lsn,
                    at: rec.at,
                    off,
                    len: rec.bytes.len() as u32,
                };
                self.apply_put(&put, slot, undo);
            }
            Op::Status | Op::Move => {
                let i = pos.ok_or("status or move record for a memory the log never created")?;
                let e = &mut self.entries[i as usize];
                let before = *e;
                if rec.op == Op::Status {
                    let (status, _) = memory::decode_status(rec.payload).ok_or("malformed status payload")?;
                    if e.status_off != NO_OFFSET {
                        self.history.supersede(i, e.status_off, 0);
                    }
                    e.status = status;
                    e.status_off = off;
                } else {
                    e.tier = memory::decode_move(rec.payload).ok_or("malformed move payload")?;
                    if e.move_off != NO_OFFSET {
                        self.history.supersede(i, e.move_off, move_len(e.id_len));
                    }
                    e.move_off = off;
                    e.moved_at = rec.at;
                }
                e.lsn = rec.lsn;
                e.updated_at = rec.at;
                if let Some(u) = undo {
                    u.push(Undo::Changed(i, before));
                }
            }
            Op::Task => {
                memory::decode_task(rec.payload).ok_or("malformed task payload")?;
                let t = self.intern_task(rec.key_str());
                if let Some(u) = undo {
                    u.push(Undo::Task(t, self.finished[t as usize]));
                }
                self.finished[t as usize] = true;
            }
            Op::Seal => {
                let seal = seal::decode(rec, off).ok_or("malformed seal payload")?;
                self.seals.push(seal);
            }
            Op::Entity => {
                std::str::from_utf8(rec.key).map_err(|_| "an entity whose key is not UTF-8")?;
                memory::check_entity(rec.payload)?;
                let live = memory::decode_entity(rec.payload).ok_or("malformed entity payload")?.is_some();
                let before = if live {
                    self.entities.insert(rec.key.into(), (off, rec.bytes.len() as u32))
                } else {
                    self.entities.remove(rec.key)
                };
                if let Some(u) = undo {
                    u.push(Undo::Entity(rec.key.into(), before));
                }
                self.entity_records += 1;
            }
        }
        Ok(())
    }

    /// Apply one put record, given by its fields (`apply_at` decodes them from the record; a
    /// bulk commit passes the fields it encodes the record from), its key looked up in `slot`.
    pub(crate) fn apply_put(&mut self, put: &PutApply<'_>, slot: Slot, undo: Option<&mut Vec<Undo>>) {
        let kind = self.intern_kind(put.kind);
        let task = match put.task {
            Some(t) => self.intern_task(t),
            None => 0,
        };
        self.apply_put_interned(put, kind, task, slot, undo)
    }

    /// `apply_put`, with the numbers `intern_kind` and `intern_task` gave the put's kind and
    /// task (0: no task).
    pub(crate) fn apply_put_interned(
        &mut self,
        put: &PutApply<'_>,
        kind: u32,
        task: u32,
        slot: Slot,
        undo: Option<&mut Vec<Undo>>,
    ) {
        let tags = self.intern_tagset(put.tags);
        let st = put.state;
        match slot.pos {
            Some(i) => {
                let e = &mut self.entries[i as usize];
                let listed = task != e.task && self.by_task.add(task, i);
                if let Some(u) = undo {
                    u.push(Undo::Changed(i, *e));
                    if listed {
                        u.push(Undo::Listed(task, i));
                    }
                }
                self.history.supersede(i, e.put_off, e.put_len);
                e.put_off = put.off;
                e.put_len = put.len;
                e.kind = kind;
                e.task = task;
                e.tags = tags;
                e.tier = st.tier;
                e.status = st.status;
                e.lsn = put.lsn;
                e.updated_at = put.at;
            }
            None => {
                let created_lsn = if st.created_lsn == 0 { put.lsn } else { st.created_lsn };
                if let Some(last) = self.entries.last() {
                    if last.created_lsn > created_lsn {
                        self.sorted = false;
                    }
                }
                let hash = slot.hash;
                let entry = Entry {
                    hash,
                    id_off: self.arena.len() as u64,
                    put_off: put.off,
                    status_off: NO_OFFSET,
                    move_off: NO_OFFSET,
                    lsn: put.lsn,
                    created_lsn,
                    created_at: st.created_at,
                    updated_at: put.at,
                    moved_at: st.moved_at,
                    put_len: put.len,
                    kind,
                    task,
                    tags,
                    id_len: put.key.len() as u16,
                    tier: st.tier,
                    status: st.status,
                };
                self.arena.extend_from_slice(put.key);
                let n = self.entries.len() as u32;
                self.entries.push(entry);
                self.table.insert_new(hash, n);
                self.by_task.push(task, n);
            }
        }
    }

    /// Take back everything applied since `mark`, newest first.
    pub fn rollback(&mut self, mark: Mark, undo: &mut Vec<Undo>) {
        while let Some(u) = undo.pop() {
            match u {
                Undo::Changed(i, e) => {
                    self.entries[i as usize] = e;
                    self.history.unwind(i, mark.links);
                }
                Undo::Task(t, was) => self.finished[t as usize] = was,
                Undo::Listed(t, i) => self.by_task.remove(t, i),
                Undo::Entity(key, was) => match was {
                    Some(place) => {
                        self.entities.insert(key, place);
                    }
                    None => {
                        self.entities.remove(&key);
                    }
                },
            }
        }
        while self.entries.len() > mark.entries {
            let e = self.entries.pop().expect("an entry to remove");
            let n = self.entries.len() as u32;
            self.table.remove(e.hash, n);
            self.by_task.remove(e.task, n);
        }
        self.arena.truncate(mark.arena);
        self.seals.truncate(mark.seals);
        self.history.truncate(mark.links);
    }

    /// Every live entity: (key, offset and length of its newest record), in key order.
    pub fn entities(&self) -> impl Iterator<Item = (&[u8], (u64, u32))> + '_ {
        self.entities_under(b"")
    }

    /// The live entities whose key starts with `prefix`, in key order.
    pub fn entities_under<'a>(
        &'a self,
        prefix: &'a [u8],
    ) -> impl Iterator<Item = (&'a [u8], (u64, u32))> + 'a {
        self.entities_under_after(prefix, None)
    }

    /// `entities_under`, only the keys after `after` (when given).
    pub fn entities_under_after<'a>(
        &'a self,
        prefix: &'a [u8],
        after: Option<&'a [u8]>,
    ) -> impl Iterator<Item = (&'a [u8], (u64, u32))> + 'a {
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a),
            _ => Bound::Included(prefix),
        };
        self.entities
            .range::<[u8], _>((start, Bound::Unbounded))
            .take_while(move |(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (&**k, *v))
    }

    /// Where the newest record of entity `key` is, if it is live.
    pub fn entity(&self, key: &[u8]) -> Option<(u64, u32)> {
        self.entities.get(key).copied()
    }

    /// How many entity records were ever applied: it changes whenever an entity may have.
    pub fn entity_records(&self) -> u64 {
        self.entity_records
    }

    /// The seals of the log, oldest first.
    pub fn seals(&self) -> &[SealEntry] {
        &self.seals
    }

    /// Make room for `n` more memories.
    pub fn reserve(&mut self, n: usize) {
        self.entries.reserve(n);
        self.table.reserve(n);
    }

    /// Add to `room` the memory new memories `next` (counted from the next one: `0..n` are
    /// the next `n`) write: their entries (as far as reserved) and the id table's slots.
    pub(crate) fn add_room(&self, next: std::ops::Range<usize>, room: &mut Room) {
        room.add(self.entries.room_for(next));
        room.add(self.table.memory());
    }

    /// Put entries back in creation order after a replay that saw them out of order.
    pub fn finish_replay(&mut self) {
        if !self.sorted {
            // Sorted by (creation, old number): the order a stable sort by creation gives. The
            // keys are sorted apart from the entries (sequential, cache-friendly), and the
            // entries then moved into place cycle by cycle; the history's heads are keyed by
            // entry number, so they follow.
            let mut keys: Vec<(u64, u32)> =
                self.entries.iter().enumerate().map(|(n, e)| (e.created_lsn, n as u32)).collect();
            keys.sort_unstable();
            let order: Vec<u32> = keys.into_iter().map(|(_, n)| n).collect();
            permute(&mut self.entries, &order);
            let mut new_of = vec![0u32; order.len()];
            for (new, &old) in order.iter().enumerate() {
                new_of[old as usize] = new as u32;
            }
            self.history.renumber(&new_of);
            self.by_task = ByTask::of_tasks(self.entries.iter().map(|e| e.task), 0);
            self.table.clear();
            for n in 0..self.entries.len() {
                let e = self.entries[n];
                self.table.insert_new(e.hash, n as u32);
            }
            self.sorted = true;
        }
        self.entries.shrink_to_fit();
        self.arena.shrink_to_fit();
        self.history.shrink_to_fit();
    }

    /// Where every put, status and move record of entry `n` still in the log is, in log order:
    /// (offset, length, or 0 where the index does not know it: read it from the record's
    /// header). `None` when the index keeps no history (`History::is_tracked`): then only a
    /// read of the whole log finds them.
    pub fn records_of(&self, n: u32) -> Option<Vec<(u64, u32)>> {
        if !self.history.is_tracked() {
            return None;
        }
        let e = &self.entries[n as usize];
        let mut out: Vec<(u64, u32)> = self.history.older(n).collect();
        out.push((e.put_off, e.put_len));
        if e.status_off != NO_OFFSET {
            out.push((e.status_off, 0));
        }
        if e.move_off != NO_OFFSET {
            out.push((e.move_off, move_len(e.id_len)));
        }
        out.sort_unstable();
        Some(out)
    }

    /// The test of a query's fields on one entry; `None` when the query names a kind, task or
    /// tag the store has never seen (it matches nothing).
    pub fn filter(&self, q: &Query<'_>) -> Option<Filter> {
        let kind = match q.kind {
            Some(k) => Some(self.kinds.lookup(k)?),
            None => None,
        };
        let task = match q.task {
            // "" is no task's name (the interned "no task" is not a task to filter by).
            Some("") => return None,
            Some(t) => Some(self.tasks.lookup(t)?),
            None => None,
        };
        // Which tag sets carry every wanted tag: decided once per set, not per memory.
        let tagsets: Option<Vec<bool>> = match q.tags {
            Some(wanted) if !wanted.is_empty() => {
                let mut ids = Vec::with_capacity(wanted.len());
                for t in wanted {
                    ids.push(self.tags.lookup(t)?);
                }
                Some(
                    self.tagsets
                        .iter()
                        .map(|set| ids.iter().all(|id| set.binary_search(id).is_ok()))
                        .collect(),
                )
            }
            _ => None,
        };
        Some(Filter { tier: q.tier, status: q.status, kind, task, tagsets })
    }

    /// The entry numbers of a task's memories, in creation order.
    pub fn of_task(&self, task: u32) -> &[u32] {
        self.by_task.of(task)
    }

    /// Entry numbers matching a query, in creation order.
    pub fn find(&self, q: &Query<'_>) -> Vec<u32> {
        let Some(filter) = self.filter(q) else { return Vec::new() };
        let limit = q.limit.unwrap_or(usize::MAX);
        let mut out = Vec::new();
        if limit == 0 {
            return out;
        }
        let matches = |e: &Entry| filter.matches(e);
        // Whether `n` matched and the limit is now reached.
        let mut full = |n: u32| {
            let hit = matches(&self.entries[n as usize]);
            if hit {
                out.push(n);
            }
            hit && out.len() >= limit
        };
        match filter.task {
            // Only the task's memories are tested; its list is in creation order too.
            Some(t) => {
                for &n in self.by_task.of(t) {
                    if full(n) {
                        break;
                    }
                }
            }
            None => {
                for n in 0..self.entries.len() as u32 {
                    if full(n) {
                        break;
                    }
                }
            }
        }
        out
    }

    /// The entry at a number.
    pub fn entry(&self, n: u32) -> &Entry {
        &self.entries[n as usize]
    }

    /// Bytes the index holds in RAM (on the heap, or mapped from an index file), for reports.
    pub fn heap_bytes(&self) -> usize {
        self.entries.bytes()
            + self.arena.bytes()
            + self.table.bytes()
            + self.history.bytes()
            + self.by_task.bytes()
    }
}

/// The length of a move record of an id of `id_len` bytes (its payload is one byte).
fn move_len(id_len: u16) -> u32 {
    (RECORD_OVERHEAD + id_len as usize + 1) as u32
}

/// Put `values` in `order`: afterwards `values[new]` is what `values[order[new]]` was.
/// `order` must be a permutation of `0..values.len()`. In place, one cycle at a time.
fn permute<T: Copy>(values: &mut [T], order: &[u32]) {
    let mut done = vec![false; values.len()];
    for start in 0..values.len() {
        if done[start] {
            continue;
        }
        let first = values[start];
        let mut at = start;
        loop {
            done[at] = true;
            let from = order[at] as usize;
            if from == start {
                values[at] = first;
                break;
            }
            values[at] = values[from];
            at = from;
        }
    }
}

/// An id's hash and, if the index has it, its entry number.
#[derive(Clone, Copy, Debug, Default)]
pub struct Slot {
    /// The id's hash.
    pub hash: u32,
    /// The entry number, if the id is known.
    pub pos: Option<u32>,
}

/// The fields of one put record that the index keeps, with where the record lies.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PutApply<'a> {
    /// The memory id (the record's key).
    pub key: &'a [u8],
    /// The state fields the record carries.
    pub state: memory::PutState,
    /// Kind.
    pub kind: &'a str,
    /// Task.
    pub task: Option<&'a str>,
    /// Tags, in the order given.
    pub tags: &'a [&'a str],
    /// The record's LSN and time.
    pub lsn: u64,
    /// Time, microseconds since the epoch.
    pub at: i64,
    /// Byte offset of the record.
    pub off: u64,
    /// Length of the record.
    pub len: u32,
}

/// A query's fields resolved against one index (`Index::filter`): names turned into the
/// numbers entries hold, the tag sets that qualify decided once.
#[derive(Clone, Debug)]
pub struct Filter {
    tier: Option<Tier>,
    status: Option<Status>,
    kind: Option<u32>,
    /// The interned task, when the query names one.
    pub task: Option<u32>,
    tagsets: Option<Vec<bool>>,
}

impl Filter {
    /// Whether an entry matches every field of the query.
    pub fn matches(&self, e: &Entry) -> bool {
        self.tier.is_none_or(|t| t == e.tier)
            && self.status.is_none_or(|s| s == e.status)
            && self.kind.is_none_or(|k| k == e.kind)
            && self.task.is_none_or(|t| t == e.task)
            && self.tagsets.as_ref().is_none_or(|m| m.get(e.tags as usize).copied().unwrap_or(false))
    }
}

/// A `find` query; `None` matches anything.
#[derive(Clone, Debug, Default)]
pub struct Query<'a> {
    /// Tier.
    pub tier: Option<Tier>,
    /// Kind.
    pub kind: Option<&'a str>,
    /// Task.
    pub task: Option<&'a str>,
    /// Status.
    pub status: Option<Status>,
    /// Tags the memory must all carry.
    pub tags: Option<&'a [String]>,
    /// At most this many.
    pub limit: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_stays_small() {
        assert!(std::mem::size_of::<Entry>() <= 96, "{}", std::mem::size_of::<Entry>());
    }
}

/// The index taken apart into plain values (for a snapshot), and put back together.
#[derive(Clone, Debug, Default)]
pub struct Parts {
    /// Interned kinds, tasks and tags, in number order (number 0 is "").
    pub kinds: Vec<String>,
    /// Task names.
    pub tasks: Vec<String>,
    /// Tag names.
    pub tags: Vec<String>,
    /// Tag sets (tag numbers), in number order (set 0 is empty).
    pub tagsets: Vec<Vec<u32>>,
    /// Finished task numbers.
    pub finished: Vec<u32>,
    /// Every memory: its id and entry (`id_off`, `id_len` and `hash` are rebuilt).
    pub memories: Vec<(String, Entry)>,
    /// Live entities: key, offset and length of the newest record.
    pub entities: Vec<(Vec<u8>, u64, u32)>,
    /// Seals.
    pub seals: Vec<SealEntry>,
    /// Each memory's older records: (memory number in `memories`, offset, length or 0), by
    /// memory and oldest first; `None` when the index keeps no history (`History`).
    pub history: Option<Vec<(u32, u64, u32)>>,
}

impl Index {
    /// The index as plain values.
    pub fn parts(&self) -> Parts {
        let names = |i: &Interner| (0..i.len() as u32).map(|n| i.name(n).to_string()).collect::<Vec<_>>();
        Parts {
            kinds: names(&self.kinds),
            tasks: names(&self.tasks),
            tags: names(&self.tags),
            tagsets: self.tagsets.iter().map(|s| s.to_vec()).collect(),
            finished: (0..self.finished.len() as u32).filter(|&t| self.finished[t as usize]).collect(),
            memories: self.entries.iter().map(|e| (self.id_of(e).to_string(), *e)).collect(),
            entities: self.entities.iter().map(|(k, &(o, l))| (k.to_vec(), o, l)).collect(),
            seals: self.seals.clone(),
            history: self.history.parts(),
        }
    }

    /// An index from plain values; refuses numbers that point nowhere.
    pub fn from_parts(p: Parts) -> Result<Index, String> {
        let mut idx = Index::new();
        let names = |v: &[String], what: &str| {
            Interner::from_names(v.iter().map(|n| n.as_str().into()).collect()).ok_or_else(|| {
                format!("{what}: the first name must be the empty string, and none may appear twice")
            })
        };
        idx.kinds = names(&p.kinds, "kinds")?;
        idx.tasks = names(&p.tasks, "tasks")?;
        idx.tags = names(&p.tags, "tags")?;
        idx.finished = vec![false; p.tasks.len()];
        for t in p.finished {
            *idx.finished.get_mut(t as usize).ok_or("a finished task number points nowhere")? = true;
        }
        if p.tagsets.first().is_none_or(|s| !s.is_empty()) {
            return Err("tagsets: set 0 must be empty".into());
        }
        for set in p.tagsets.into_iter().skip(1) {
            if set.iter().any(|&t| t as usize >= p.tags.len()) {
                return Err("a tag number points nowhere".into());
            }
            let b = set.into_boxed_slice();
            let n = idx.tagsets.len() as u32;
            idx.tagsets.push(b.clone());
            idx.tagset_ids.insert(b, n);
        }
        idx.entries.reserve(p.memories.len());
        idx.table.reserve(p.memories.len());
        idx.arena.reserve(p.memories.iter().map(|(id, _)| id.len()).sum());
        for (id, mut e) in p.memories {
            if e.kind as usize >= p.kinds.len()
                || e.task as usize >= p.tasks.len()
                || e.tags as usize >= idx.tagsets.len()
            {
                return Err(format!("memory {id:?}: a kind, task or tag set number points nowhere"));
            }
            let slot = idx.lookup(id.as_bytes());
            if slot.pos.is_some() {
                return Err(format!("memory {id:?} appears twice"));
            }
            e.hash = slot.hash;
            e.id_off = idx.arena.len() as u64;
            e.id_len = id.len() as u16;
            idx.arena.extend_from_slice(id.as_bytes());
            if let Some(last) = idx.entries.last() {
                if last.created_lsn > e.created_lsn {
                    idx.sorted = false;
                }
            }
            let n = idx.entries.len() as u32;
            idx.entries.push(e);
            idx.table.insert_new(e.hash, n);
        }
        idx.entities = p.entities.into_iter().map(|(k, o, l)| (k.into_boxed_slice(), (o, l))).collect();
        idx.seals = p.seals;
        idx.history = History::from_parts(idx.entries.len(), p.history)?;
        idx.by_task = ByTask::of_tasks(idx.entries.iter().map(|e| e.task), 0);
        idx.finish_replay();
        Ok(idx)
    }
}
