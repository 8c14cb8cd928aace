//! The bulk puts of a commit, `put_many` (columns) and `put_rows` (rows as dicts or tuples,
//! turned into the same columns as they are checked): checked when they are given, then read
//! from the columns in batches when the commit is written
//! and pushed with `Commit::push_puts`, with the GIL released, so that the encoding,
//! checksums, index and writing cost what they cost in Rust, on both cores.
//!
//! Nothing of a record is copied: a batch holds a reference to each string it reads (so a
//! string stays alive while the GIL is released, whatever another thread does to the rows)
//! and the core borrows the strings' UTF-8 bytes in place.

use std::sync::Arc;

use memcommit_core::{PutCommand, Tier};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::commit::{data_arg, key, str_tuple, text_of, tier_arg, Column};
use crate::convert::{get_vector, items_of, type_error};
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

/// Records read from Python per call of `push_puts`: enough that the second thread has work,
/// few enough that a batch's references and commands stay small and warm in the cache.
pub const BATCH: usize = 1 << 16;

/// The records of one `put_many` or `put_rows` call.
pub struct Bulk {
    /// Every record's id, given or generated (what the call returned).
    ids: Py<PyList>,
    /// The texts, in order (`put_rows` reads them out of its rows when it checks them, so the
    /// commit reads no row again).
    texts: Py<PyList>,
    /// The kind and task of every record: one for all, or one each.
    kind: Column,
    task: Column,
    /// What a row that gives none of these gets (`put_many`: every record).
    shared: Shared,
    /// The rows that give a tier, data, tags or sources of their own, in row order.
    own: Vec<Own>,
    /// Each record's vector (`put_many(vectors=)`, or the store's embedder), or empty: none.
    vectors: Vec<Option<Arc<[f32]>>>,
}

/// The tier, data, tags and sources of every record of a bulk call that gives none of its own.
pub struct Shared {
    tier: Tier,
    data: Option<Py<PyString>>,
    tags: Py<PyTuple>,
    sources: Py<PyTuple>,
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
        Ok(Shared {
            tier: given(tier).map(tier_arg).transpose()?.unwrap_or(Tier::Working),
            data: data_arg(py, given(data))?,
            tags: str_tuple(py, given(tags), "tags")?,
            sources: str_tuple(py, given(sources), "sources")?,
        })
    }
}

/// What one row gives of its own beyond id, text, kind and task (checked, as the core takes it).
struct Own {
    row: usize,
    tier: Option<Tier>,
    data: Option<Py<PyString>>,
    tags: Option<Py<PyTuple>>,
    sources: Option<Py<PyTuple>>,
}

/// The same error as `e`, its message prefixed with `where_` (`rows[3]`).
fn at(py: Python<'_>, where_: &str, e: PyErr) -> PyErr {
    let msg = e.value(py).to_string();
    let ty = e.get_type(py);
    if ty.is(py.get_type::<PyTypeError>()) {
        PyTypeError::new_err(format!("{where_}: {msg}"))
    } else if ty.is(py.get_type::<PyValueError>()) {
        PyValueError::new_err(format!("{where_}: {msg}"))
    } else {
        e
    }
}

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

impl Bulk {
    /// `put_many`'s records: `ids` (checked, as long as `texts`), the texts (checked) and the
    /// fields every record shares or takes from a column.
    pub fn columns(ids: Py<PyList>, texts: Py<PyList>, kind: Column, task: Column, shared: Shared) -> Bulk {
        Bulk { ids, texts, kind, task, shared, own: Vec::new(), vectors: Vec::new() }
    }

    /// Give the records vectors, one each (None: none), as many as there are records.
    pub fn set_vectors(&mut self, vectors: Vec<Option<Arc<[f32]>>>) {
        self.vectors = vectors;
    }

    /// Each record's vector, one slot per record (None: none yet), to fill in.
    pub fn vectors_mut(&mut self, py: Python<'_>) -> &mut Vec<Option<Arc<[f32]>>> {
        let n = self.len(py);
        self.vectors.resize(n, None);
        &mut self.vectors
    }

    /// The records' texts, in order.
    pub fn texts<'py>(&self, py: Python<'py>) -> Bound<'py, PyList> {
        self.texts.bind(py).clone()
    }

    /// `put_rows`' records: each row a dict of put fields or a tuple of values in the order of
    /// `fields`, checked and read now (an error names the row and the field, and nothing is
    /// kept; the commit reads no row again); the
    /// keywords are what a row that gives no value for a field gets.
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
    ) -> PyResult<Bulk> {
        if rows.is_instance_of::<PyString>() || rows.is_instance_of::<PyDict>() {
            return Err(type_error("rows", "an iterable of rows (dicts or tuples)", rows));
        }
        let (places, order) = places_of(py, fields)?;
        let rows = items_of(rows, |_| type_error("rows", "an iterable of rows (dicts or tuples)", rows))?;
        let kind = match kind.filter(|k| !k.is_none()) {
            Some(k) => key(k, "kind")?,
            None => pyo3::intern!(py, "note").clone().unbind(),
        };
        let task = task.filter(|t| !t.is_none()).map(|t| key(t, "task")).transpose()?;
        let shared = Shared::from_keywords(py, tier, data, tags, sources)?;
        let mut ids: Vec<Option<Bound<'_, PyAny>>> = Vec::with_capacity(rows.len());
        // Each row's text, kind and task (the keyword's where it gives none), as it is checked.
        let mut texts = Vec::with_capacity(rows.len());
        let mut kinds = Vec::with_capacity(rows.len());
        let mut tasks = Vec::with_capacity(rows.len());
        let (default_kind, no_task) = (kind.bind(py).clone().into_any(), py.None().into_bound(py));
        let default_task = task.as_ref().map_or(no_task, |t| t.bind(py).clone().into_any());
        let mut own = Vec::new();
        let mut vectors: Vec<Option<Arc<[f32]>>> = Vec::new();
        let mut missing = 0;
        for (i, row) in rows.iter().enumerate() {
            let where_ = || format!("rows[{i}]");
            let Some(row) = Row::of(row.clone()) else {
                return Err(type_error(&where_(), "a dict or a tuple", &row));
            };
            if let Row::Tuple(t) = &row {
                if t.len() > order.len() {
                    return Err(PyValueError::new_err(format!(
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
                        return Err(PyValueError::new_err(format!(
                            "{}: {} is not a field of a put (the fields are {})",
                            where_(),
                            k.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".into()),
                            FIELDS.join(", ")
                        )));
                    }
                }
            }
            let get = |f: usize| row.field(&places, f);
            let checked = (|| -> PyResult<()> {
                match get(TEXT)? {
                    Some(t) => {
                        text_of(&t, "text")?;
                        texts.push(t);
                    }
                    None => return Err(PyValueError::new_err("text: a row must give a text")),
                }
                match get(ID)? {
                    Some(id) => {
                        key(&id, "id")?;
                        ids.push(Some(id));
                    }
                    None => {
                        ids.push(None);
                        missing += 1;
                    }
                }
                match get(KIND)? {
                    Some(k) => {
                        key(&k, "kind")?;
                        kinds.push(k);
                    }
                    None => kinds.push(default_kind.clone()),
                }
                match get(TASK)? {
                    Some(t) => {
                        key(&t, "task")?;
                        tasks.push(t);
                    }
                    None => tasks.push(default_task.clone()),
                }
                let mine = Own {
                    row: i,
                    tier: get(TIER)?.map(|t| tier_arg(&t)).transpose()?,
                    data: data_arg(py, get(DATA)?.as_ref())?,
                    tags: get(TAGS)?.map(|t| str_tuple(py, Some(&t), "tags")).transpose()?,
                    sources: get(SOURCES)?.map(|s| str_tuple(py, Some(&s), "sources")).transpose()?,
                };
                if mine.tier.is_some() || mine.data.is_some() || mine.tags.is_some() || mine.sources.is_some()
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
        let mut made = IDS.next_ids(id_ms, missing).into_iter();
        let ids = PyList::new(
            py,
            ids.into_iter()
                .map(|id| match id {
                    Some(id) => Ok(id),
                    None => Ok(PyString::new(py, &made.next().expect("an id per missing one")).into_any()),
                })
                .collect::<PyResult<Vec<_>>>()?,
        )?;
        let texts_len = texts.len();
        Ok(Bulk {
            ids: ids.unbind(),
            texts: PyList::new(py, texts)?.unbind(),
            kind: Column::Each(PyList::new(py, kinds)?.unbind()),
            task: Column::Each(PyList::new(py, tasks)?.unbind()),
            shared,
            own,
            vectors: if vectors.is_empty() {
                vectors
            } else {
                let n = texts_len;
                vectors.resize(n, None);
                vectors
            },
        })
    }

    /// The records' ids, in order.
    pub fn ids<'py>(&self, py: Python<'py>) -> Bound<'py, PyList> {
        self.ids.bind(py).clone()
    }

    /// How many records.
    pub fn len(&self, py: Python<'_>) -> usize {
        self.ids.bind(py).len()
    }

    /// Hand the records to `f` in order, `batch` at a time, as core puts borrowing the
    /// strings in place (each batch keeps a reference to every string it lends).
    pub fn each_batch(
        &self,
        py: Python<'_>,
        batch: usize,
        mut f: impl FnMut(&[PutCommand<&str>]) -> PyResult<()>,
    ) -> PyResult<()> {
        let ids = self.ids.bind(py);
        let n = ids.len();
        let tag_items = tuple_strs(self.shared.tags.bind(py))?;
        let source_items = tuple_strs(self.shared.sources.bind(py))?;
        let default_data = self.shared.data.as_ref().map(|d| d.bind(py).clone());
        let mut own = self.own.iter().peekable();
        let mut start = 0;
        while start < n {
            let end = (start + batch.max(1)).min(n);
            // Every string the batch lends, kept alive until the batch is done: per record its
            // id, text and kind, then its task if it has one; then its own data, tags and
            // sources, if any (their places in `lent`).
            let mut lent: Vec<Bound<'_, PyString>> = Vec::with_capacity((end - start) * 4);
            let mut shape: Vec<Shape> = Vec::with_capacity(end - start);
            for i in start..end {
                let (text, kind, task) = self.read(py, i)?;
                let at = lent.len();
                lent.push(ids.get_item(i)?.cast_into::<PyString>()?);
                lent.push(text);
                lent.push(kind);
                let has_task = task.is_some();
                lent.extend(task);
                let mut s =
                    Shape { at, has_task, tier: self.shared.tier, data: None, tags: None, sources: None };
                if own.peek().is_some_and(|o| o.row == i) {
                    let o = own.next().expect("peeked");
                    s.tier = o.tier.unwrap_or(self.shared.tier);
                    if let Some(d) = &o.data {
                        s.data = Some(lent.len());
                        lent.push(d.bind(py).clone());
                    }
                    for (list, slot) in [(&o.tags, &mut s.tags), (&o.sources, &mut s.sources)] {
                        if let Some(t) = list {
                            let items = tuple_strs(t.bind(py))?;
                            *slot = Some((lent.len(), items.len()));
                            lent.extend(items);
                        }
                    }
                } else if let Some(d) = &default_data {
                    s.data = Some(lent.len());
                    lent.push(d.clone());
                }
                shape.push(s);
            }
            let strs = lent.iter().map(|s| s.to_str()).collect::<PyResult<Vec<&str>>>()?;
            let shared_tags = tag_items.iter().map(|s| s.to_str()).collect::<PyResult<Vec<&str>>>()?;
            let shared_sources = source_items.iter().map(|s| s.to_str()).collect::<PyResult<Vec<&str>>>()?;
            fn list<'s>(strs: &[&'s str], own: Option<(usize, usize)>, shared: &[&'s str]) -> Vec<&'s str> {
                match own {
                    Some((at, len)) => strs[at..at + len].to_vec(),
                    None => shared.to_vec(),
                }
            }
            let vectors = self.vectors.get(start..end);
            let cmds: Vec<PutCommand<&str>> = shape
                .iter()
                .enumerate()
                .map(|(i, s)| PutCommand {
                    id: strs[s.at],
                    text: strs[s.at + 1],
                    kind: strs[s.at + 2],
                    task: s.has_task.then(|| strs[s.at + 3]),
                    data: s.data.map(|d| strs[d]),
                    tier: Some(s.tier),
                    tags: list(&strs, s.tags, &shared_tags),
                    sources: list(&strs, s.sources, &shared_sources),
                    vector: vectors.and_then(|v| v[i].clone()),
                })
                .collect();
            f(&cmds)?;
            start = end;
        }
        Ok(())
    }

    /// The text, kind and task of record `i`.
    #[allow(clippy::type_complexity)]
    fn read<'py>(
        &self,
        py: Python<'py>,
        i: usize,
    ) -> PyResult<(Bound<'py, PyString>, Bound<'py, PyString>, Option<Bound<'py, PyString>>)> {
        let of = |c: &Column| match c {
            Column::One(v) => v.as_ref().map(|v| v.bind(py).clone()),
            Column::Each(list) => {
                let item = list.bind(py).get_item(i).ok()?;
                (!item.is_none()).then(|| item.cast_into::<PyString>().ok()).flatten()
            }
        };
        let text = self.texts.bind(py).get_item(i)?.cast_into::<PyString>()?;
        let kind = of(&self.kind).expect("every record has a kind");
        Ok((text, kind, of(&self.task)))
    }
}

/// Where one record's strings are in its batch's `lent`, and the fields that are not strings.
struct Shape {
    at: usize,
    has_task: bool,
    tier: Tier,
    data: Option<usize>,
    tags: Option<(usize, usize)>,
    sources: Option<(usize, usize)>,
}

fn tuple_strs<'py>(t: &Bound<'py, PyTuple>) -> PyResult<Vec<Bound<'py, PyString>>> {
    t.iter().map(|i| i.cast_into::<PyString>().map_err(Into::into)).collect()
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
            return Err(PyValueError::new_err(format!(
                "fields: {name:?} is not a field of a put (the fields are {})",
                FIELDS.join(", ")
            )));
        };
        if places[f].is_some() {
            return Err(PyValueError::new_err(format!("fields: {name:?} is named twice")));
        }
        places[f] = Some(p);
        order.push(FIELDS[f]);
    }
    if places[TEXT].is_none() {
        return Err(PyValueError::new_err("fields: must name \"text\" (every put has a text)"));
    }
    Ok((places, order))
}
