//! The bulk puts of a commit, `put_many` (columns) and `put_rows` (rows as dicts or tuples):
//! checked when they are given, then written when the commit ends with `Commit::push_puts`,
//! with the GIL released, so that the encoding, checksums, index and writing cost what they
//! cost in Rust, on both cores.
//!
//! Nothing of a record is copied, and the commit reads no Python object again: the call that
//! checks a string keeps where its UTF-8 bytes are (a [`Utf8`]) beside a reference to the
//! string, and the commit builds its puts from those. A row or list changed after the call
//! changes nothing written.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use memcommit_core::log::Log;
use memcommit_core::{PutCommand, PutRun, Room, Tier};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::commit::{data_arg, key_str, str_tuple, text_str};
use crate::convert::{get_tier, get_vector, items_of, type_error};
use crate::errors::{to_py, InvalidType, InvalidValue};
use crate::gate;
use crate::store::IDS;

/// The fields of a put, in the order of `store.put`'s wire form (`memcommit.ops.PUT`): the
/// order of a tuple row's values unless `put_rows` is given `fields=`.
pub const FIELDS: [&str; 9] = ["id", "text", "kind", "task", "tier", "data", "tags", "sources", "vector"];
const ID: usize = 0;
const TEXT: usize = 1;
const KIND: usize = 2;
const TASK: usize = 3;
const TIER: usize = 4;
const DATA: usize = 5;
const TAGS: usize = 6;
const SOURCES: usize = 7;
const VECTOR: usize = 8;

/// Calls with this many rows or more have the other core fault in the memory they are read
/// into (`Room`) while this one reads them.
pub const POPULATE_FROM: usize = 1 << 15;

/// Run `read` (the reading of a bulk call's `n` records) while another thread populates
/// `room`, when they are many; the other thread stops when `read` ends.
fn while_populating<T>(room: &Room, n: usize, read: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    if n < POPULATE_FROM {
        return read();
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| room.populate(&stop));
        let got = read();
        stop.store(true, Ordering::Relaxed);
        got
    })
}

/// Where the UTF-8 bytes of a str are, found once: when a bulk call checks the str.
///
/// A `Utf8` is made only from a str that its `Bulk` holds a reference to, itself or through an
/// object nothing else can change (in `Bulk::held` or `Shared::held`: never handed out), and
/// read only through `Bulk::str`, which borrows the `Bulk`. A str never changes, and CPython
/// keeps the UTF-8 bytes it gave out where they are until the str is freed.
#[derive(Clone, Copy)]
struct Utf8 {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a `Utf8` points at bytes nothing writes to (a str's UTF-8, which CPython never
// changes once given out), kept alive by the `Bulk` holding it: reading them is sound on any
// thread, and needs no GIL.
#[allow(unsafe_code)]
unsafe impl Send for Utf8 {}
// SAFETY: as for `Send`.
#[allow(unsafe_code)]
unsafe impl Sync for Utf8 {}

impl Utf8 {
    fn of(s: &str) -> Utf8 {
        Utf8 { ptr: NonNull::from(s.as_bytes()).cast(), len: s.len() }
    }
}

/// The views of a tuple of strs (tags or sources, as `str_tuple` checked them).
fn tuple_views(t: &Bound<'_, PyTuple>) -> PyResult<Vec<Utf8>> {
    t.iter().map(|i| Ok(Utf8::of(i.cast::<PyString>()?.to_str()?))).collect()
}

/// One value for every record, or one each.
enum Col<T> {
    One(T),
    Each(Vec<T>),
}

impl<T: Copy> Col<T> {
    fn at(&self, i: usize) -> T {
        match self {
            Col::One(v) => *v,
            Col::Each(v) => v[i],
        }
    }
}

/// The records of one `put_many` or `put_rows` call.
pub struct Bulk {
    /// Each record's id, text, kind and task.
    id: Vec<Utf8>,
    text: Vec<Utf8>,
    kind: Col<Utf8>,
    task: Col<Option<Utf8>>,
    /// What a row that gives none of these gets (`put_many`: every record).
    shared: Shared,
    /// The rows that give a tier, data, tags or sources of their own, in row order.
    own: Vec<Own>,
    /// Where each row's `Own` is in `own` (`u32::MAX`: none), or empty when `own` is.
    own_at: Vec<u32>,
    /// What holds every str that `id`, `text`, `kind`, `task` or `own` point into, and that
    /// no one else can change: the call's own copies of the lists it was given (of texts and
    /// ids, or of rows, whose tuples hold their values), a dict row's values, generated ids,
    /// data, tags and sources. Held, never read.
    #[allow(dead_code)]
    held: Vec<Py<PyAny>>,
    /// Each record's vector (`put_many(vectors=)`, or the store's embedder), or empty: none.
    vectors: Vec<Option<Arc<[f32]>>>,
}

/// The tier, data, tags and sources of every record of a bulk call that gives none of its own.
pub struct Shared {
    tier: Tier,
    data: Option<Utf8>,
    tags: Vec<Utf8>,
    sources: Vec<Utf8>,
    /// The data str and the tags and sources tuples: held, never read.
    #[allow(dead_code)]
    held: Vec<Py<PyAny>>,
}

impl Shared {
    /// Read and check the keywords `tier=`, `data=`, `tags=` and `sources=` of `put_many` or
    /// `put_rows` (left out or None: the default).
    pub fn from_keywords(
        py: Python<'_>,
        tier: Option<&Bound<'_, PyAny>>,
        data: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
        sources: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Shared> {
        fn given<'a, 'py>(o: Option<&'a Bound<'py, PyAny>>) -> Option<&'a Bound<'py, PyAny>> {
            o.filter(|o| !o.is_none())
        }
        let mut held = Vec::new();
        let data = match data_arg(py, given(data))? {
            Some(d) => {
                let view = Utf8::of(d.bind(py).to_str()?);
                held.push(d.into_any());
                Some(view)
            }
            None => None,
        };
        let mut list = |obj, field| -> PyResult<Vec<Utf8>> {
            let t = str_tuple(py, obj, field)?;
            let views = tuple_views(t.bind(py))?;
            held.push(t.into_any());
            Ok(views)
        };
        let (tags, sources) = (list(given(tags), "tags")?, list(given(sources), "sources")?);
        Ok(Shared {
            tier: given(tier).map(get_tier).transpose()?.unwrap_or(Tier::Working),
            data,
            tags,
            sources,
            held,
        })
    }
}

/// What one row gives of its own beyond id, text, kind and task (checked, as the core takes it).
struct Own {
    row: usize,
    tier: Option<Tier>,
    data: Option<Utf8>,
    tags: Option<Vec<Utf8>>,
    sources: Option<Vec<Utf8>>,
}

/// The same error as `e`, its message prefixed with `where_` (`rows[3]`).
fn at(py: Python<'_>, where_: &str, e: PyErr) -> PyErr {
    let msg = e.value(py).to_string();
    let ty = e.get_type(py);
    if ty.is_subclass_of::<PyTypeError>().unwrap_or(false) {
        InvalidType::new_err(format!("{where_}: {msg}"))
    } else if ty.is_subclass_of::<PyValueError>().unwrap_or(false) {
        InvalidValue::new_err(format!("{where_}: {msg}"))
    } else {
        e
    }
}

/// From this many records on, `Bulk::check` checks the second half on another thread.
const CHECK_SPLIT: usize = 1 << 16;

/// A row of `put_rows`, its kind found once.
enum Row<'py> {
    Tuple(Bound<'py, PyTuple>),
    Dict(Bound<'py, PyDict>),
}

impl<'py> Row<'py> {
    fn of(row: Bound<'py, PyAny>) -> Option<Row<'py>> {
        match row.cast_into::<PyTuple>() {
            Ok(t) => Some(Row::Tuple(t)),
            Err(e) => e.into_inner().cast_into::<PyDict>().ok().map(Row::Dict),
        }
    }

    /// The value the row gives for field `f`: None when it gives none (or None).
    fn field(&self, places: &[Option<usize>; 9], f: usize) -> PyResult<Option<Bound<'py, PyAny>>> {
        let v = match self {
            Row::Tuple(t) => match places[f] {
                Some(p) if p < t.len() => Some(t.get_item(p)?),
                _ => None,
            },
            Row::Dict(d) => d.get_item(FIELDS[f])?,
        };
        Ok(v.filter(|v| !v.is_none()))
    }
}

/// `kind=` or `task=` of `put_many` for `n` records: one str for all (the default when not
/// given: "note", or no task), or a list of one each (a task may be None). Holds what the
/// views point into in `held`.
fn column(
    py: Python<'_>,
    obj: Option<&Bound<'_, PyAny>>,
    field: &str,
    n: usize,
    optional: bool,
    held: &mut Vec<Py<PyAny>>,
) -> PyResult<Col<Option<Utf8>>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        if optional {
            return Ok(Col::One(None));
        }
        let note = pyo3::intern!(py, "note");
        held.push(note.clone().into_any().unbind());
        return Ok(Col::One(Some(Utf8::of(note.to_str()?))));
    };
    if obj.is_instance_of::<PyString>() {
        let view = Utf8::of(key_str(obj, field)?);
        held.push(obj.clone().unbind());
        return Ok(Col::One(Some(view)));
    }
    let list = items_of(obj, |_| type_error(field, "a str or a list of str", obj))?;
    if list.len() != n {
        return Err(InvalidValue::new_err(format!("{field}: {} values for {n} texts", list.len())));
    }
    let mut views = Vec::with_capacity(n);
    for (i, item) in list.iter().enumerate() {
        if optional && item.is_none() {
            views.push(None);
            continue;
        }
        let view = key_str(&item, field).map(Utf8::of).map_err(|e| {
            match key_str(&item, &format!("{field}[{i}]")) {
                Err(named) => named,
                Ok(_) => e,
            }
        })?;
        views.push(Some(view));
    }
    held.push(list.into_any().unbind());
    Ok(Col::Each(views))
}

impl Bulk {
    /// `put_many`'s records: the texts, `ids` (generated when not given) and the fields every
    /// record shares or takes from a column, checked now (an error names the field and the
    /// place, and nothing is kept). `later` is memory the records will be written to (as for
    /// `rows`). Returns them with a new list of their ids.
    #[allow(clippy::too_many_arguments)] // the fields of put_many
    pub fn columns(
        py: Python<'_>,
        id_ms: u64,
        texts: &Bound<'_, PyAny>,
        ids: Option<&Bound<'_, PyAny>>,
        kind: Option<&Bound<'_, PyAny>>,
        task: Option<&Bound<'_, PyAny>>,
        shared: Shared,
        later: Room,
    ) -> PyResult<(Bulk, Py<PyList>)> {
        if texts.is_instance_of::<PyString>() {
            return Err(InvalidType::new_err("texts must be a sequence of str, not a single str"));
        }
        // Copies of the caller's lists: a list changed after the call changes nothing here.
        let texts = items_of(texts, |e| e)?;
        let n = texts.len();
        let ids = match ids.filter(|i| !i.is_none()) {
            Some(i) => {
                if i.is_instance_of::<PyString>() {
                    // It would read as one id per character.
                    return Err(InvalidType::new_err(
                        "ids must be a sequence of str, not a single str (wrap it in a list)",
                    ));
                }
                let l = items_of(i, |e| e)?;
                if l.len() != n {
                    return Err(InvalidValue::new_err(format!("ids: {} ids for {n} texts", l.len())));
                }
                l
            }
            None => PyList::new(py, IDS.next_ids(id_ms, n))?,
        };
        let (mut text, mut id) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut held = Vec::new();
        // The other core faults in the memory the strs' places go to, then the index's room
        // for the records, while this one reads them (as `rows` does).
        let mut room = Room::new();
        room.add_spare(&text);
        room.add_spare(&id);
        room.extend(later);
        let (kind, task) = while_populating(&room, n, || {
            for (i, t) in texts.iter().enumerate() {
                // As for the ids below: the place is named only on an error.
                let s = text_str(&t, "texts").map_err(|_| match text_str(&t, &format!("texts[{i}]")) {
                    Err(e) => e,
                    Ok(_) => unreachable!("the same check failed a moment ago"),
                })?;
                text.push(Utf8::of(s));
            }
            for (i, item) in ids.iter().enumerate() {
                // The field is named only on an error: formatting it for every id costs more
                // than the check.
                let s = key_str(&item, "ids").map_err(|_| match key_str(&item, &format!("ids[{i}]")) {
                    Err(e) => e,
                    Ok(_) => unreachable!("the same check failed a moment ago"),
                })?;
                id.push(Utf8::of(s));
            }
            let kind = match column(py, kind, "kind", n, false, &mut held)? {
                Col::One(k) => Col::One(k.expect("a kind for every record")),
                Col::Each(k) => {
                    Col::Each(k.into_iter().map(|k| k.expect("a kind for every record")).collect())
                }
            };
            let task = column(py, task, "task", n, true, &mut held)?;
            Ok((kind, task))
        })?;
        let given = ids.get_slice(0, n).unbind();
        held.push(ids.into_any().unbind());
        held.push(texts.into_any().unbind());
        let bulk = Bulk {
            id,
            text,
            kind,
            task,
            shared,
            own: Vec::new(),
            own_at: Vec::new(),
            held,
            vectors: Vec::new(),
        };
        Ok((bulk, given))
    }

    /// Check every record now as `log`'s commit of it will (`Log::check_put`: its keys, its
    /// vector's values, its size against `max_record_bytes`), so that a bad one is refused by
    /// the call that gives it, named by `place(i)`, and not only when the commit is written.
    /// With the GIL released, a large call's records on both cores; the error raised is the
    /// first bad record's.
    pub fn check(&self, py: Python<'_>, log: &Log, place: impl Fn(usize) -> String) -> PyResult<()> {
        let first_bad = |records: std::ops::Range<usize>| {
            let mut p = PutCommand::default();
            records.into_iter().find_map(|i| {
                self.fill(i, &mut p);
                log.check_put(&p).err().map(|e| (i, e))
            })
        };
        let n = self.len();
        let bad = gate::detach(py, || {
            if n < CHECK_SPLIT {
                return first_bad(0..n);
            }
            std::thread::scope(|s| {
                let second = s.spawn(|| first_bad(n / 2..n));
                let first = first_bad(0..n / 2);
                let second = second.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                first.or(second)
            })
        });
        match bad {
            Some((i, e)) => Err(at(py, &place(i), to_py(e))),
            None => Ok(()),
        }
    }

    /// Give the records vectors, one each (None: none), as many as there are records.
    pub fn set_vectors(&mut self, vectors: Vec<Option<Arc<[f32]>>>) {
        self.vectors = vectors;
    }

    /// Each record's vector, one slot per record (None: none yet), to fill in.
    pub fn vectors_mut(&mut self) -> &mut Vec<Option<Arc<[f32]>>> {
        let n = self.len();
        self.vectors.resize(n, None);
        &mut self.vectors
    }

    /// The texts of the records that have no vector, in order (new strs).
    pub fn texts_without_vector<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyString>> {
        (0..self.len())
            .filter(|&i| self.vectors.get(i).is_none_or(|v| v.is_none()))
            .map(|i| PyString::new(py, self.str(self.text[i])))
            .collect()
    }

    /// `put_rows`' records: each row a dict of put fields or a tuple of values in the order of
    /// `fields`, checked and read now (an error names the row and the field, and nothing is
    /// kept; the commit reads no row again); the
    /// keywords are what a row that gives no value for a field gets. `later` is memory the
    /// rows will be written to later (the index's, from `Log::make_room`), faulted in with
    /// the memory they are read into. Returns them with a new list of their ids.
    #[allow(clippy::too_many_arguments)] // the fields of put_rows
    pub fn rows(
        py: Python<'_>,
        id_ms: u64,
        rows: &Bound<'_, PyAny>,
        fields: Option<&Bound<'_, PyAny>>,
        kind: Option<&Bound<'_, PyAny>>,
        task: Option<&Bound<'_, PyAny>>,
        tier: Option<&Bound<'_, PyAny>>,
        data: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
        sources: Option<&Bound<'_, PyAny>>,
        later: Room,
    ) -> PyResult<(Bulk, Py<PyList>)> {
        if rows.is_instance_of::<PyString>() || rows.is_instance_of::<PyDict>() {
            return Err(type_error("rows", "an iterable of rows (dicts or tuples)", rows));
        }
        let (places, order) = places_of(py, fields)?;
        let rows = items_of(rows, |_| type_error("rows", "an iterable of rows (dicts or tuples)", rows))?;
        let n = rows.len();
        let mut held: Vec<Py<PyAny>> = Vec::new();
        // What a row that gives no kind or task gets.
        let mut default = |obj: Option<&Bound<'_, PyAny>>, field| -> PyResult<Option<Utf8>> {
            let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(None) };
            let view = Utf8::of(key_str(obj, field)?);
            held.push(obj.clone().unbind());
            Ok(Some(view))
        };
        let note = pyo3::intern!(py, "note").clone().into_any();
        let default_kind = default(Some(kind.filter(|k| !k.is_none()).unwrap_or(&note)), "kind")?
            .expect("a kind to default to");
        let default_task = default(task, "task")?;
        let shared = Shared::from_keywords(py, tier, data, tags, sources)?;
        let mut ids: Vec<Option<Bound<'_, PyAny>>> = Vec::with_capacity(n);
        // Where the bytes of each row's strs are, as they are checked.
        let (mut id, mut text) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut kind_of, mut task_of) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut own = Vec::new();
        let mut vectors: Vec<Option<Arc<[f32]>>> = Vec::new();
        let mut missing = 0;
        let mut dict_values = Vec::new();
        // The other core faults in the memory the rows are read into, then the index's room
        // for them, while this one reads them.
        let mut room = Room::new();
        room.add_spare(&ids);
        room.add_spare(&id);
        room.add_spare(&text);
        room.add_spare(&kind_of);
        room.add_spare(&task_of);
        room.extend(later);
        while_populating(&room, n, || {
            for (i, row) in rows.iter().enumerate() {
                let where_ = || format!("rows[{i}]");
                let Some(row) = Row::of(row.clone()) else {
                    return Err(type_error(&where_(), "a dict or a tuple", &row));
                };
                if let Row::Tuple(t) = &row {
                    if t.len() > order.len() {
                        return Err(InvalidValue::new_err(format!(
                            "{}: {} values for the {} fields ({})",
                            where_(),
                            t.len(),
                            order.len(),
                            order.join(", ")
                        )));
                    }
                } else if let Row::Dict(d) = &row {
                    for k in d.keys() {
                        let known = k
                            .cast::<PyString>()
                            .ok()
                            .and_then(|k| k.to_str().ok().filter(|k| FIELDS.contains(k)));
                        if known.is_none() {
                            return Err(InvalidValue::new_err(format!(
                                "{}: {} is not a field of a put (the fields are {})",
                                where_(),
                                k.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".into()),
                                FIELDS.join(", ")
                            )));
                        }
                    }
                }
                // A tuple holds its values for as long as the rows are held; a dict may change.
                let dict = matches!(row, Row::Dict(_));
                let get = |f: usize| row.field(&places, f);
                let mut hold = |v: &Bound<'_, PyAny>| {
                    if dict {
                        dict_values.push(v.clone().unbind());
                    }
                };
                let checked = (|| -> PyResult<()> {
                    match get(TEXT)? {
                        Some(t) => {
                            text.push(Utf8::of(text_str(&t, "text")?));
                            hold(&t);
                        }
                        None => return Err(InvalidValue::new_err("text: a row must give a text")),
                    }
                    match get(ID)? {
                        Some(i) => {
                            id.push(Some(Utf8::of(key_str(&i, "id")?)));
                            hold(&i);
                            ids.push(Some(i));
                        }
                        None => {
                            id.push(None);
                            ids.push(None);
                            missing += 1;
                        }
                    }
                    match get(KIND)? {
                        Some(k) => {
                            kind_of.push(Utf8::of(key_str(&k, "kind")?));
                            hold(&k);
                        }
                        None => kind_of.push(default_kind),
                    }
                    match get(TASK)? {
                        Some(t) => {
                            task_of.push(Some(Utf8::of(key_str(&t, "task")?)));
                            hold(&t);
                        }
                        None => task_of.push(default_task),
                    }
                    let mut mine = Own {
                        row: i,
                        tier: get(TIER)?.map(|t| get_tier(&t)).transpose()?,
                        data: None,
                        tags: None,
                        sources: None,
                    };
                    if let Some(d) = data_arg(py, get(DATA)?.as_ref())? {
                        mine.data = Some(Utf8::of(d.bind(py).to_str()?));
                        held.push(d.into_any());
                    }
                    for (f, name, slot) in
                        [(TAGS, "tags", &mut mine.tags), (SOURCES, "sources", &mut mine.sources)]
                    {
                        if let Some(v) = get(f)? {
                            let t = str_tuple(py, Some(&v), name)?;
                            *slot = Some(tuple_views(t.bind(py))?);
                            held.push(t.into_any());
                        }
                    }
                    if mine.tier.is_some()
                        || mine.data.is_some()
                        || mine.tags.is_some()
                        || mine.sources.is_some()
                    {
                        own.push(mine);
                    }
                    if let Some(v) = get(VECTOR)? {
                        // Rows before the first with a vector have none.
                        vectors.resize(i, None);
                        vectors.push(Some(get_vector(&v, "vector")?));
                    }
                    Ok(())
                })();
                checked.map_err(|e| at(py, &where_(), e))?;
            }
            Ok(())
        })?;
        held.push(rows.into_any().unbind());
        held.append(&mut dict_values);
        let mut made = IDS.next_ids(id_ms, missing).into_iter();
        let mut all = Vec::with_capacity(n);
        for (v, given) in id.iter_mut().zip(ids) {
            let obj = match given {
                Some(obj) => obj,
                None => {
                    let obj = PyString::new(py, &made.next().expect("an id per missing one"));
                    *v = Some(Utf8::of(obj.to_str()?));
                    held.push(obj.clone().into_any().unbind());
                    obj.into_any()
                }
            };
            all.push(obj);
        }
        let id = id.into_iter().map(|v| v.expect("every id given or made")).collect();
        if !vectors.is_empty() {
            vectors.resize(n, None);
        }
        let mut own_at = Vec::new();
        if !own.is_empty() {
            own_at = vec![u32::MAX; n];
            for (k, o) in own.iter().enumerate() {
                own_at[o.row] = k as u32;
            }
        }
        let bulk = Bulk {
            id,
            text,
            kind: Col::Each(kind_of),
            task: Col::Each(task_of),
            shared,
            own,
            own_at,
            held,
            vectors,
        };
        Ok((bulk, PyList::new(py, all)?.unbind()))
    }

    /// The bytes `v` points at.
    fn str(&self, v: Utf8) -> &str {
        // SAFETY: every `Utf8` of this `Bulk` was made from a str it holds a reference to, for
        // as long as it lives (see `Utf8`): the bytes are there, unchanged, and valid UTF-8
        // (`PyString::to_str` checked them) while `self` is borrowed.
        #[allow(unsafe_code)]
        unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(v.ptr.as_ptr(), v.len))
        }
    }
}

/// The records as the core's puts, each built when asked for, its strings borrowed in place.
/// Needs no GIL: it reads no Python object.
impl PutRun for Bulk {
    fn len(&self) -> usize {
        self.id.len()
    }

    fn id(&self, i: usize) -> &str {
        self.str(self.id[i])
    }

    fn text(&self, i: usize) -> &str {
        self.str(self.text[i])
    }

    fn fill<'r>(&'r self, i: usize, p: &mut PutCommand<&'r str>) {
        let own = self.own_at.get(i).and_then(|&k| self.own.get(k as usize));
        p.id = self.str(self.id[i]);
        p.text = self.str(self.text[i]);
        p.kind = self.str(self.kind.at(i));
        p.task = self.task.at(i).map(|t| self.str(t));
        p.data = own.and_then(|o| o.data).or(self.shared.data).map(|d| self.str(d));
        p.tier = Some(own.and_then(|o| o.tier).unwrap_or(self.shared.tier));
        let tags = own.and_then(|o| o.tags.as_deref()).unwrap_or(&self.shared.tags);
        p.tags.clear();
        p.tags.extend(tags.iter().map(|v| self.str(*v)));
        let sources = own.and_then(|o| o.sources.as_deref()).unwrap_or(&self.shared.sources);
        p.sources.clear();
        p.sources.extend(sources.iter().map(|v| self.str(*v)));
        p.vector = self.vectors.get(i).cloned().flatten();
    }

    fn has_vectors(&self) -> bool {
        !self.vectors.is_empty()
    }
}

/// `fields=` of `put_rows`: the field each place of a tuple row holds (every field, in
/// `FIELDS` order, when not given). Returns each field's place, and the fields in order.
fn places_of(
    py: Python<'_>,
    fields: Option<&Bound<'_, PyAny>>,
) -> PyResult<([Option<usize>; 9], Vec<&'static str>)> {
    let mut places = [None; 9];
    let Some(fields) = fields.filter(|f| !f.is_none()) else {
        for (f, p) in places.iter_mut().enumerate() {
            *p = Some(f);
        }
        return Ok((places, FIELDS.to_vec()));
    };
    let names = str_tuple(py, Some(fields), "fields")?;
    let mut order = Vec::new();
    for (p, name) in names.bind(py).iter().enumerate() {
        let name = name.cast::<PyString>()?.to_str()?.to_owned();
        let Some(f) = FIELDS.iter().position(|n| *n == name) else {
            return Err(InvalidValue::new_err(format!(
                "fields: {name:?} is not a field of a put (the fields are {})",
                FIELDS.join(", ")
            )));
        };
        if places[f].is_some() {
            return Err(InvalidValue::new_err(format!("fields: {name:?} is named twice")));
        }
        places[f] = Some(p);
        order.push(FIELDS[f]);
    }
    if places[TEXT].is_none() {
        return Err(InvalidValue::new_err("fields: must name \"text\" (every put has a text)"));
    }
    Ok((places, order))
}
