//! `memcommit.Commit`: operations and guards collected in a `with` block, written all at once.
//!
//! `put` is the per-record path of bulk loads, so the class is native: each call checks its
//! arguments and keeps references to the caller's objects (no copies, no tuples); at the end
//! of the block the strings are read in place while the writer lock is held.

use std::sync::Arc;

use memcommit_core::Log;
use memcommit_core::{Command, Expect, PutCommand, PutRun, Room, Status, Tier};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::bulk::{Bulk, Shared, POPULATE_FROM};
use crate::convert::{get_opt_u64, get_status, get_tier, get_vector, items_of, type_error};
use crate::errors::{to_py, InvalidType, InvalidValue};
use crate::gate::{self, release};
use crate::store::IDS;

/// One collected operation, holding the caller's objects.
enum Op {
    Put {
        id: Py<PyString>,
        kind: Py<PyString>,
        text: Py<PyString>,
        data: Option<Py<PyString>>,
        task: Option<Py<PyString>>,
        tier: Tier,
        tags: Py<PyTuple>,
        sources: Py<PyTuple>,
        vector: Option<Arc<[f32]>>,
    },
    /// `put_many` or `put_rows`: written with the core's bulk path. Boxed: a commit of a
    /// million single puts holds a million `Op`s, each as large as the largest variant.
    Bulk(Box<Bulk>),
    Status {
        id: Py<PyString>,
        status: Status,
        reason: Option<Py<PyString>>,
    },
    Move {
        id: Py<PyString>,
        tier: Tier,
    },
    Finish {
        task: Py<PyString>,
    },
    Expect {
        id: Py<PyString>,
        exists: Option<bool>,
        status: Option<Status>,
        tier: Option<Tier>,
        lsn: Option<u64>,
    },
}

// A commit of a million single puts holds a million `Op`s: keep them small (a variant that
// grows past this goes in a box, as `Bulk` does).
const _: () = assert!(std::mem::size_of::<Op>() <= 80);

/// Operations and guards collected inside ``with store.commit() as c:``.
///
/// Nothing is written until the block ends without an exception; then every operation is
/// written with consecutive LSNs, or, when a guard fails, none is and `Rejected` is raised.
/// A commit from `store.commit()` takes operations only inside its `with` block: used
/// without `with` it could never be written, so its methods raise `RuntimeError` instead
/// of returning ids of memories that would never exist.
/// Guards are checked by the writer against the store's state including this commit's own
/// earlier operations. `lsn` and `first_lsn` give the LSNs of its last and first record once
/// it is written (None before, and for a commit that wrote nothing).
#[pyclass(module = "memcommit", name = "Commit")]
pub struct Commit {
    native: Py<crate::store::NativeLog>,
    /// The store's clock: called once, when the block ends, for the commit's time
    /// (microseconds since the Unix epoch).
    clock: Py<PyAny>,
    expect_lsn: Option<u64>,
    id_ms: u64,
    ops: Vec<Op>,
    /// Whether operations are refused outside the `with` block (`store.commit()`); a commit
    /// built only to check operations (a remote store's) takes them without one.
    require_with: bool,
    /// Whether the `with` block began.
    entered: bool,
    done: bool,
    #[pyo3(get)]
    lsn: Option<u64>,
    #[pyo3(get)]
    first_lsn: Option<u64>,
}

static HELPERS: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();

/// `memcommit.commit.encode_data` and `as_str_tuple`, the checks that stay in Python.
fn helpers(py: Python<'_>) -> PyResult<&(Py<PyAny>, Py<PyAny>)> {
    HELPERS.get_or_try_init(py, || {
        let m = py.import("memcommit.commit")?;
        Ok((m.getattr("encode_data")?.unbind(), m.getattr("as_str_tuple")?.unbind()))
    })
}

/// The text of a str argument, refusing what UTF-8 cannot hold (lone surrogates).
fn utf8<'a>(s: &'a Bound<'_, PyString>, field: &str) -> PyResult<&'a str> {
    s.to_str().map_err(|_| {
        InvalidValue::new_err(format!(
            "{field}: holds a lone surrogate (as from a bad decode), which cannot be stored as UTF-8 text"
        ))
    })
}

/// `obj` checked as a key (a non-empty str that is valid UTF-8): its text.
pub fn key_str<'a>(obj: &'a Bound<'_, PyAny>, field: &str) -> PyResult<&'a str> {
    let t = text_str(obj, field)?;
    if t.is_empty() {
        return Err(InvalidValue::new_err(format!("{field}: must not be empty")));
    }
    Ok(t)
}

/// `obj` checked as a text (a str that is valid UTF-8): its text.
pub fn text_str<'a>(obj: &'a Bound<'_, PyAny>, field: &str) -> PyResult<&'a str> {
    utf8(obj.cast::<PyString>().map_err(|_| type_error(field, "str", obj))?, field)
}

pub fn key(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Py<PyString>> {
    key_str(obj, field)?;
    Ok(obj.cast::<PyString>()?.clone().unbind())
}

pub fn text_of(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Py<PyString>> {
    text_str(obj, field)?;
    Ok(obj.cast::<PyString>()?.clone().unbind())
}

fn opt_key(obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<Py<PyString>>> {
    match obj {
        Some(o) if !o.is_none() => key(o, field).map(Some),
        _ => Ok(None),
    }
}

/// `kind=`, "note" when not given.
fn kind_arg(py: Python<'_>, kind: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyString>> {
    match kind {
        Some(k) => key(k, "kind"),
        None => Ok(pyo3::intern!(py, "note").clone().unbind()),
    }
}

/// `tier=`, "working" when not given.
fn tier_or_working(tier: Option<&Bound<'_, PyAny>>) -> PyResult<Tier> {
    Ok(tier.map(get_tier).transpose()?.unwrap_or(Tier::Working))
}

pub fn data_arg(py: Python<'_>, data: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Py<PyString>>> {
    match data {
        Some(d) if !d.is_none() => {
            let text = helpers(py)?.0.bind(py).call1((d,))?.cast_into::<PyString>()?;
            utf8(&text, "data")?;
            Ok(Some(text.unbind()))
        }
        _ => Ok(None),
    }
}

pub fn str_tuple(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Py<PyTuple>> {
    let Some(obj) = obj else { return Ok(PyTuple::empty(py).unbind()) };
    let t = match obj.cast::<PyTuple>() {
        Ok(t) => t.clone(),
        Err(_) => helpers(py)?.1.bind(py).call1((obj, field))?.cast_into::<PyTuple>()?,
    };
    for item in t.iter() {
        key(&item, field)?;
    }
    Ok(t.unbind())
}

impl Commit {
    fn add(&mut self, op: Op) -> PyResult<()> {
        self.check_open()?;
        self.ops.push(op);
        Ok(())
    }

    /// Refuse operations on a commit that ended, or (`store.commit()`) outside its block.
    fn check_open(&self) -> PyResult<()> {
        if self.done {
            return Err(PyRuntimeError::new_err(
                "this commit has already ended; start a new one with store.commit()",
            ));
        }
        if self.require_with && !self.entered {
            return Err(PyRuntimeError::new_err(
                "this commit is not open: use it as `with store.commit() as c:` (its operations \
                 are written when the block ends; without `with` nothing would ever be written)",
            ));
        }
        Ok(())
    }

    /// Write the collected operations: take the writer lock with the GIL released, read each
    /// operation's strings in place, then finish and wait for durability without the GIL.
    fn write(&mut self, py: Python<'_>) -> PyResult<()> {
        if let Some(embed) = self.native.get().embedder(py).cloned() {
            self.embed_missing(py, &embed)?;
        }
        let at_us: i64 = self.clock.bind(py).call0()?.extract()?;
        let hint = self.puts();
        let native = self.native.get();
        let expect_lsn = self.expect_lsn;
        let bulk = self.ops.iter().any(|o| matches!(o, Op::Bulk(_)));
        let span = if hint <= SMALL && !bulk {
            // A small commit copies its few strings and then releases the GIL once for the
            // whole commit: under many threads, each GIL hand-off costs more than the copies.
            let mut cmds: Vec<Command<String>> = Vec::with_capacity(hint);
            for op in &self.ops {
                each_command(py, op, None, |cmd, _| {
                    cmds.push(cmd.to_owned());
                    Ok(())
                })?;
            }
            native.run(py, |log| log.commit(&cmds, expect_lsn, at_us))?
        } else {
            // Begin on the current log, or on the new generation if log compaction retired
            // it while this waited for its lock; then stream the operations with the GIL.
            let (streamed, _) = native.across_swaps(py, |log| {
                gate::detach(py, || log.begin(expect_lsn, at_us, hint)).map(|c| self.stream(py, log, c))
            })?;
            streamed?
        };
        if let Some((first, last)) = span {
            self.first_lsn = Some(first);
            self.lsn = Some(last);
        }
        Ok(())
    }
}

impl Commit {
    /// Give every put without a vector one from the store's embedder: one call for the whole
    /// commit, before the writer lock is taken.
    fn embed_missing(&mut self, py: Python<'_>, embed: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut texts: Vec<Bound<'_, PyString>> = Vec::new();
        for op in &mut self.ops {
            match op {
                Op::Put { text, vector: None, .. } => texts.push(text.bind(py).clone()),
                Op::Bulk(b) => texts.extend(b.texts_without_vector(py)),
                _ => {}
            }
        }
        if texts.is_empty() {
            return Ok(());
        }
        let mut vectors = embed_texts(embed, texts)?.into_iter();
        for op in &mut self.ops {
            match op {
                Op::Put { vector: v @ None, .. } => *v = vectors.next().flatten(),
                Op::Bulk(b) => {
                    for v in b.vectors_mut().iter_mut().filter(|v| v.is_none()) {
                        *v = vectors.next().flatten();
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// How many records the operations so far write, at most (a bulk call's, one each for the
    /// others).
    fn puts(&self) -> usize {
        self.ops.iter().map(|o| if let Op::Bulk(b) = o { b.len() } else { 1 }).sum()
    }

    /// Check a bulk call's records as the store's commit will (`Bulk::check`), now. A commit
    /// that only checks operations (a remote store's, whose server has limits of its own)
    /// leaves that to the commit, and one that refuses operations need not check them.
    fn check_bulk(&self, py: Python<'_>, bulk: &Bulk, place: impl Fn(usize) -> String) -> PyResult<()> {
        match self.native.get().log() {
            Ok(log) if self.require_with && self.check_open().is_ok() => bulk.check(py, &log, place),
            _ => Ok(()),
        }
    }

    /// Room in the index for the records of a bulk call given `items` (a list or a tuple of
    /// them; an iterator's length is not known before it is read), made now by a store's
    /// open commit: see `Log::make_room`. A commit that only checks operations (a remote
    /// store's) is never written here, and makes none; nor does one that refuses operations.
    fn room_for(&self, py: Python<'_>, items: &Bound<'_, PyAny>) -> Room {
        let n = match (items.cast::<PyList>(), items.cast::<PyTuple>()) {
            (Ok(l), _) => l.len(),
            (_, Ok(t)) => t.len(),
            _ => 0,
        };
        match self.native.get().log() {
            Ok(log) if self.require_with && n >= POPULATE_FROM && self.check_open().is_ok() => {
                // Past the memories the commit's earlier operations may create.
                let after = self.puts();
                // The GIL let go: growing a large index's id table takes a while.
                gate::detach(py, || log.make_room(after, n))
            }
            _ => Room::new(),
        }
    }

    /// Push every operation into the begun commit `c` on `log`, reading each operation's
    /// strings in place, then finish it and wait for durability without the GIL. Returns the
    /// first and last LSN written, if any.
    fn stream(
        &self,
        py: Python<'_>,
        log: &Log,
        mut c: memcommit_core::Commit<'_>,
    ) -> PyResult<Option<(u64, u64)>> {
        let mut i = 0;
        while i < self.ops.len() {
            let op = &self.ops[i];
            if let Op::Bulk(b) = op {
                // Pushed with the GIL released: it reads no Python object.
                release(py, || c.push_puts(&**b))?;
                i += 1;
                continue;
            }
            let run = self.ops[i..].iter().take_while(|o| matches!(o, Op::Put { .. })).count();
            if run >= PUT_RUN {
                push_put_run(py, &self.ops[i..i + run], &mut c)?;
                i += run;
                continue;
            }
            i += 1;
            let after = match self.ops.get(i) {
                Some(Op::Put { id, .. }) => id.to_str(py).ok(),
                _ => None,
            };
            each_command(py, op, after, |cmd, next| {
                if let Some(n) = next {
                    c.prefetch(n);
                }
                c.push(cmd).map_err(to_py)
            })?;
        }
        Ok(match release(py, || c.finish())? {
            Some(d) => {
                release(py, || log.wait_durable(d.end))?;
                Some((d.first_lsn, d.last_lsn))
            }
            None => None,
        })
    }
}

/// Runs of this many `c.put` in a row, or more, are pushed as bulk runs (`push_put_run`).
const PUT_RUN: usize = 4096;

/// The puts of such a run built per call of `push_puts`: enough that the second thread has
/// work, few enough that a batch's commands stay small and warm in the cache.
const BATCH: usize = 1 << 16;

/// Push `ops`, all `Op::Put`, as the bulk path pushes a `put_many` (`Commit::push_puts`: the
/// records encoded and written on a second thread while this one applies them to the index),
/// `BATCH` at a time: each batch's strings read in place with the GIL, then pushed with it
/// released. The commit holds every object read, and nothing can change its operations while
/// it is written (the write borrows it mutably).
fn push_put_run(py: Python<'_>, ops: &[Op], c: &mut memcommit_core::Commit<'_>) -> PyResult<()> {
    for batch in ops.chunks(BATCH) {
        // Each put's tags and sources, kept alive until the batch is pushed.
        let lists = batch
            .iter()
            .map(|op| match op {
                Op::Put { tags, sources, .. } => Ok((strs(tags.bind(py))?, strs(sources.bind(py))?)),
                _ => unreachable!("a run of puts holds puts only"),
            })
            .collect::<PyResult<Vec<_>>>()?;
        let cmds = batch
            .iter()
            .zip(&lists)
            .map(|(op, (tags, sources))| put_command(py, op, views(tags)?, views(sources)?))
            .collect::<PyResult<Vec<_>>>()?;
        release(py, || c.push_puts(cmds.as_slice()))?;
    }
    Ok(())
}

/// The core's command for `op`, an `Op::Put`, its strings read in place, with the `tags` and
/// `sources` read from its tuples.
fn put_command<'a>(
    py: Python<'_>,
    op: &'a Op,
    tags: Vec<&'a str>,
    sources: Vec<&'a str>,
) -> PyResult<PutCommand<&'a str>> {
    let Op::Put { id, kind, text, data, task, tier, vector, .. } = op else {
        unreachable!("a put's command is made of a put")
    };
    Ok(PutCommand {
        id: s(py, id)?,
        kind: s(py, kind)?,
        text: s(py, text)?,
        data: so(py, data)?,
        task: so(py, task)?,
        tier: Some(*tier),
        tags,
        sources,
        vector: vector.clone(),
    })
}

/// The text of a str the commit holds (borrowed: the commit keeps the object alive).
fn s<'a>(py: Python<'_>, p: &'a Py<PyString>) -> PyResult<&'a str> {
    p.to_str(py)
}

fn so<'a>(py: Python<'_>, p: &'a Option<Py<PyString>>) -> PyResult<Option<&'a str>> {
    p.as_ref().map(|p| p.to_str(py)).transpose()
}

fn strs<'py>(t: &Bound<'py, PyTuple>) -> PyResult<Vec<Bound<'py, PyString>>> {
    t.iter().map(|i| i.cast_into::<PyString>().map_err(Into::into)).collect()
}

fn views<'a>(items: &'a [Bound<'_, PyString>]) -> PyResult<Vec<&'a str>> {
    items.iter().map(|i| i.to_str()).collect()
}

/// Commits of at most this many records take the one-GIL-release path.
const SMALL: usize = 64;

/// Hand each core command of one collected operation to `f`, its strings read in place.
/// With each command comes the id of the put after it, when known: the core starts loading
/// that id's slot of the id table (`Commit::prefetch`) while it works on this one. `after` is
/// the id that follows this whole operation.
fn each_command(
    py: Python<'_>,
    op: &Op,
    after: Option<&str>,
    mut f: impl FnMut(&Command<&str>, Option<&str>) -> PyResult<()>,
) -> PyResult<()> {
    match op {
        Op::Put { tags, sources, .. } => {
            let (tag_items, source_items) = (strs(tags.bind(py))?, strs(sources.bind(py))?);
            let cmd = Command::Put(put_command(py, op, views(&tag_items)?, views(&source_items)?)?);
            f(&cmd, after)
        }
        Op::Bulk(b) => {
            let mut p = PutCommand::default();
            (0..b.len()).try_for_each(|i| {
                b.fill(i, &mut p);
                f(&Command::Put(p.clone()), None)
            })
        }
        Op::Status { id, status, reason } => {
            f(&Command::SetStatus { id: s(py, id)?, status: *status, reason: so(py, reason)? }, after)
        }
        Op::Move { id, tier } => f(&Command::Move { id: s(py, id)?, tier: *tier }, after),
        Op::Finish { task } => f(&Command::FinishTask { task: s(py, task)? }, after),
        Op::Expect { id, exists, status, tier, lsn } => f(
            &Command::Expect(Expect {
                id: s(py, id)?,
                exists: *exists,
                status: *status,
                tier: *tier,
                lsn: *lsn,
            }),
            after,
        ),
    }
}

/// The arguments of one put as Python passed them (`store.put`, `Commit.put`, `put_many`),
/// unchecked: the text (or texts), then the fields, None where not given.
pub struct PutArgs<'py> {
    pub text: Bound<'py, PyAny>,
    pub kind: Option<Bound<'py, PyAny>>,
    /// `id` of a put, `ids` of `put_many`.
    pub id: Option<Bound<'py, PyAny>>,
    pub task: Option<Bound<'py, PyAny>>,
    pub tier: Option<Bound<'py, PyAny>>,
    pub data: Option<Bound<'py, PyAny>>,
    pub tags: Option<Bound<'py, PyAny>>,
    pub sources: Option<Bound<'py, PyAny>>,
    /// A put's vector; `put_many`'s `vectors`.
    pub vector: Option<Bound<'py, PyAny>>,
}

/// The fields of a put after its text, in the order of `store.put`'s keywords: the order the
/// engine passes them to `NativeLog.put`.
const PUT_FIELDS: [&str; 8] = ["kind", "id", "task", "tier", "data", "tags", "sources", "vector"];

impl<'py> PutArgs<'py> {
    /// The one place the fields are named: the slot of field `name`, if it is one.
    fn slot(&mut self, name: &str) -> Option<&mut Option<Bound<'py, PyAny>>> {
        Some(match name {
            "kind" => &mut self.kind,
            "id" => &mut self.id,
            "task" => &mut self.task,
            "tier" => &mut self.tier,
            "data" => &mut self.data,
            "tags" => &mut self.tags,
            "sources" => &mut self.sources,
            "vector" => &mut self.vector,
            _ => return None,
        })
    }

    fn bare(text: Bound<'py, PyAny>) -> Self {
        PutArgs {
            text,
            kind: None,
            id: None,
            task: None,
            tier: None,
            data: None,
            tags: None,
            sources: None,
            vector: None,
        }
    }

    /// `NativeLog.put`'s arguments: the text, then up to seven fields in `PUT_FIELDS` order.
    pub fn positional(text: Bound<'py, PyAny>, fields: &Bound<'py, PyTuple>) -> PyResult<Self> {
        if fields.len() > PUT_FIELDS.len() {
            return Err(InvalidType::new_err(format!(
                "put() takes the text and at most {} fields, got {}",
                PUT_FIELDS.len(),
                fields.len()
            )));
        }
        let mut args = PutArgs::bare(text);
        for (name, value) in PUT_FIELDS.iter().zip(fields.iter()) {
            *args.slot(name).expect("a put field") = given(value);
        }
        Ok(args)
    }

    /// `put_many`'s keyword arguments: the fields of a put, with `ids` in place of `id`.
    pub fn put_many_keywords(
        texts: Bound<'py, PyAny>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Self> {
        let mut args = PutArgs::bare(texts);
        for (name, value) in kwargs.into_iter().flatten() {
            let name = name.cast_into::<PyString>()?;
            let name = name.to_str()?;
            let slot = match name {
                "ids" => Some(&mut args.id),
                "vectors" => Some(&mut args.vector),
                "id" | "vector" => None,
                other => args.slot(other),
            };
            let Some(slot) = slot else {
                return Err(InvalidType::new_err(format!(
                    "put_many() got an unexpected keyword argument '{name}'"
                )));
            };
            *slot = given(value);
        }
        Ok(args)
    }
}

/// `put_many`'s `vectors=`: one vector (or None) per text.
fn vectors_arg(obj: &Bound<'_, PyAny>, n: usize) -> PyResult<Vec<Option<Arc<[f32]>>>> {
    // A str or bytes is a sequence, but not of vectors.
    if obj.is_instance_of::<pyo3::types::PyString>() || obj.is_instance_of::<pyo3::types::PyBytes>() {
        return Err(type_error("vectors", "a list of vectors", obj));
    }
    let list = items_of(obj, |_| type_error("vectors", "a list of vectors", obj))?;
    if list.len() != n {
        return Err(InvalidValue::new_err(format!("vectors: {} vectors for {n} texts", list.len())));
    }
    list.iter()
        .enumerate()
        .map(|(i, v)| (!v.is_none()).then(|| get_vector(&v, &format!("vectors[{i}]"))).transpose())
        .collect()
}

/// A field's value, None when Python passed None (the field's default, as when left out).
fn given(value: Bound<'_, PyAny>) -> Option<Bound<'_, PyAny>> {
    (!value.is_none()).then_some(value)
}

/// Check `put`'s arguments and collect them as an operation; returns the id with it.
fn put_op(py: Python<'_>, id_ms: u64, args: PutArgs<'_>) -> PyResult<(Py<PyString>, Op)> {
    let text = text_of(&args.text, "text")?;
    let kind = kind_arg(py, args.kind.as_ref())?;
    let tier = tier_or_working(args.tier.as_ref())?;
    let id = match &args.id {
        Some(i) if !i.is_none() => key(i, "id")?,
        _ => PyString::new(py, &IDS.next_ids(id_ms, 1).pop().expect("one id")).unbind(),
    };
    let op = Op::Put {
        id: id.clone_ref(py),
        kind,
        text,
        data: data_arg(py, args.data.as_ref())?,
        task: opt_key(args.task.as_ref(), "task")?,
        tier,
        tags: str_tuple(py, args.tags.as_ref(), "tags")?,
        sources: str_tuple(py, args.sources.as_ref(), "sources")?,
        vector: args.vector.as_ref().map(|v| get_vector(v, "vector")).transpose()?,
    };
    Ok((id, op))
}

/// The vectors the store's embedder gives `texts`, one each, checked: the embedder is called
/// once, with a list of the texts.
pub fn embed_texts(
    embed: &Bound<'_, PyAny>,
    texts: Vec<Bound<'_, PyString>>,
) -> PyResult<Vec<Option<Arc<[f32]>>>> {
    let n = texts.len();
    let got = embed.call1((PyList::new(embed.py(), texts)?,))?;
    let items = items_of(&got, |_| type_error("the embedder's result", "a list of vectors", &got))?;
    if items.len() != n {
        return Err(InvalidValue::new_err(format!(
            "embed: the embedder returned {} vectors for {n} texts",
            items.len()
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, v)| get_vector(&v, &format!("the embedder's vector {i}")).map(Some))
        .collect()
}

/// `store.put` in one call: one record, one commit, the GIL released once for all of it.
pub fn put_one(
    py: Python<'_>,
    native: &crate::store::NativeLog,
    at_us: i64,
    args: PutArgs<'_>,
) -> PyResult<Py<PyString>> {
    // Ids carry milliseconds since the epoch, from 0 (a clock before 1970: the epoch's).
    let (id, mut op) = put_op(py, (at_us.max(0) / 1000) as u64, args)?;
    if let (Some(embed), Op::Put { text, vector: v @ None, .. }) = (native.embedder(py), &mut op) {
        *v = embed_texts(embed, vec![text.bind(py).clone()])?.pop().flatten();
    }
    let mut cmd = None;
    each_command(py, &op, None, |c, _| {
        cmd = Some(c.to_owned());
        Ok(())
    })?;
    let cmds = [cmd.expect("a put makes one command")];
    native.run(py, |log| log.commit(&cmds, None, at_us))?;
    Ok(id)
}

#[pymethods]
impl Commit {
    #[new]
    #[pyo3(signature = (log, clock, expect_lsn, id_ms, require_with=false))]
    fn new(
        log: &Bound<'_, crate::store::NativeLog>,
        clock: Py<PyAny>,
        expect_lsn: Option<&Bound<'_, PyAny>>,
        id_ms: u64,
        require_with: bool,
    ) -> PyResult<Self> {
        Ok(Commit {
            native: log.clone().unbind(),
            clock,
            expect_lsn: get_opt_u64(expect_lsn, "expect_lsn")?,
            id_ms,
            ops: Vec::new(),
            require_with,
            entered: false,
            done: false,
            lsn: None,
            first_lsn: None,
        })
    }

    /// Create a memory, or replace the content of an existing one (its tier and status stay).
    ///
    /// Returns the memory's id (generated when not given; generated ids sort by creation).
    // The fields are declared here one by one, not read from `**fields` as in `put_many`: this
    // is the per-record path of bulk loads, and PyO3 reads declared keywords without building a
    // dict (measured on a release build: about 1.8 µs a put through `**fields`, 1.0 declared).
    #[pyo3(
        signature = (text, *, kind=None, id=None, task=None, tier=None, data=None, tags=None, sources=None, vector=None),
        text_signature = "(self, text, *, kind='note', id=None, task=None, tier='working', data=None, tags=(), sources=(), vector=None)"
    )]
    #[allow(clippy::too_many_arguments)] // the keyword arguments of put
    fn put<'py>(
        &mut self,
        text: Bound<'py, PyAny>,
        kind: Option<Bound<'py, PyAny>>,
        id: Option<Bound<'py, PyAny>>,
        task: Option<Bound<'py, PyAny>>,
        tier: Option<Bound<'py, PyAny>>,
        data: Option<Bound<'py, PyAny>>,
        tags: Option<Bound<'py, PyAny>>,
        sources: Option<Bound<'py, PyAny>>,
        vector: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Py<PyString>> {
        let args = PutArgs { text, kind, id, task, tier, data, tags, sources, vector };
        let (id, op) = put_op(args.text.py(), self.id_ms, args)?;
        self.add(op)?;
        Ok(id)
    }

    /// Put many memories in one call: the fast path for bulk loads. `kind` and `task` are one
    /// value for all, or a list with one per text (a task may be None); tier, data, tags and
    /// sources are shared. Returns the ids, in the order of `texts`.
    #[pyo3(
        signature = (texts, **fields),
        text_signature = "(self, texts, *, kind='note', ids=None, task=None, tier='working', data=None, tags=(), sources=(), vectors=None)"
    )]
    fn put_many(
        &mut self,
        texts: Bound<'_, PyAny>,
        fields: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyList>> {
        let py = texts.py();
        let PutArgs { text: texts, kind, id: ids, task, tier, data, tags, sources, vector: vectors } =
            PutArgs::put_many_keywords(texts, fields)?;
        let shared =
            Shared::from_keywords(py, tier.as_ref(), data.as_ref(), tags.as_ref(), sources.as_ref())?;
        let room = self.room_for(py, &texts);
        let (mut bulk, ids) =
            Bulk::columns(py, self.id_ms, &texts, ids.as_ref(), kind.as_ref(), task.as_ref(), shared, room)?;
        if let Some(v) = vectors {
            bulk.set_vectors(vectors_arg(&v, bulk.len())?);
        }
        self.check_bulk(py, &bulk, |i| format!("record {i} of put_many"))?;
        self.add(Op::Bulk(Box::new(bulk)))?;
        Ok(ids)
    }

    /// Put many memories given as rows: the fast path for bulk loads from records.
    ///
    /// Each row is a dict of a put's fields (`id`, `text`, `kind`, `task`, `tier`, `data`,
    /// `tags`, `sources`; `text` required) or a tuple of values in the order of `fields`
    /// (default: that same order; a shorter tuple gives the first fields). A field a row
    /// does not give (or gives as None) takes the keyword's value; an id not given is
    /// generated. Every row is checked and read now: an error names the row and the field,
    /// and adds nothing to the commit; changing a row afterwards changes nothing the commit
    /// writes. Returns the ids, in the order of the rows.
    #[pyo3(
        signature = (rows, *, fields=None, kind=None, task=None, tier=None, data=None, tags=None, sources=None),
        text_signature = "(self, rows, *, fields=None, kind='note', task=None, tier='working', data=None, tags=(), sources=())"
    )]
    #[allow(clippy::too_many_arguments)] // the keyword arguments of put_rows
    fn put_rows(
        &mut self,
        rows: &Bound<'_, PyAny>,
        fields: Option<&Bound<'_, PyAny>>,
        kind: Option<&Bound<'_, PyAny>>,
        task: Option<&Bound<'_, PyAny>>,
        tier: Option<&Bound<'_, PyAny>>,
        data: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
        sources: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyList>> {
        let py = rows.py();
        self.check_open()?;
        let room = self.room_for(py, rows);
        let (bulk, ids) =
            Bulk::rows(py, self.id_ms, rows, fields, kind, task, tier, data, tags, sources, room)?;
        self.check_bulk(py, &bulk, |i| format!("rows[{i}]"))?;
        self.add(Op::Bulk(Box::new(bulk)))?;
        Ok(ids)
    }

    /// Mark a memory stale (superseded or wrong); it stays in the store.
    #[pyo3(signature = (id, reason=None))]
    fn stale(&mut self, id: &Bound<'_, PyAny>, reason: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let reason = match reason {
            Some(r) if !r.is_none() => Some(text_of(r, "reason")?),
            _ => None,
        };
        self.add(Op::Status { id: key(id, "id")?, status: Status::Stale, reason })
    }

    /// Mark a stale memory active again.
    fn restore(&mut self, id: &Bound<'_, PyAny>) -> PyResult<()> {
        self.add(Op::Status { id: key(id, "id")?, status: Status::Active, reason: None })
    }

    /// Move a memory to another tier (the archive is a tier).
    #[pyo3(name = "move")]
    fn move_(&mut self, id: &Bound<'_, PyAny>, tier: &Bound<'_, PyAny>) -> PyResult<()> {
        let tier = get_tier(tier)?;
        self.add(Op::Move { id: key(id, "id")?, tier })
    }

    /// Mark a task finished (memory compaction folds the traces of finished tasks).
    fn finish_task(&mut self, task: &Bound<'_, PyAny>) -> PyResult<()> {
        self.add(Op::Finish { task: key(task, "task")? })
    }

    /// Guard: refuse the whole commit unless the memory matches every given field.
    ///
    /// `exists` (must exist, or must not), `status`, `tier`, and `lsn` (the LSN of the newest
    /// record that touched it: compare-and-set). With no field given, the memory must exist.
    #[pyo3(signature = (id, *, exists=None, status=None, tier=None, lsn=None))]
    fn expect(
        &mut self,
        id: &Bound<'_, PyAny>,
        exists: Option<&Bound<'_, PyAny>>,
        status: Option<&Bound<'_, PyAny>>,
        tier: Option<&Bound<'_, PyAny>>,
        lsn: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let id = key(id, "id")?;
        let exists = match exists {
            Some(e) if !e.is_none() => Some(
                e.cast::<pyo3::types::PyBool>()
                    .map_err(|_| type_error("exists", "bool or None", e))?
                    .is_true(),
            ),
            _ => None,
        };
        let status = match status {
            Some(st) if !st.is_none() => Some(get_status(st)?),
            _ => None,
        };
        let tier = match tier {
            Some(t) if !t.is_none() => Some(get_tier(t)?),
            _ => None,
        };
        let lsn = get_opt_u64(lsn, "lsn")?;
        // No field given: the guard is that the memory exists.
        let exists = exists.or((status.is_none() && tier.is_none() && lsn.is_none()).then_some(true));
        self.add(Op::Expect { id, exists, status, tier, lsn })
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf.borrow_mut().entered = true;
        slf
    }

    #[pyo3(signature = (exc_type, _exc=None, _tb=None))]
    fn __exit__(
        &mut self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if self.done {
            return Err(PyRuntimeError::new_err("this commit has already ended"));
        }
        self.done = true;
        let ops_result = if exc_type.is_some_and(|e| !e.is_none()) { Ok(()) } else { self.write(py) };
        self.ops.clear();
        ops_result.map(|()| false)
    }
}
