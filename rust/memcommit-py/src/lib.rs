//! The PyO3 binding that builds `memcommit._native`.
//!
//! Thin by design: Python inputs are extracted into owned Rust values, the GIL is released for
//! the core's work (I/O, fsync, replay, hashing), and core errors are mapped to the exception
//! classes of `memcommit.errors` in one place (`to_py`).

use std::path::PathBuf;
use std::sync::Arc;

use memcommit_core::error::{Error, Rejection};
use memcommit_core::format::{self, Op};
use memcommit_core::memory::{self, Command, Expect, PutCommand, Status, Tier};
use memcommit_core::{Durability, Log, MemoryRead, Options, Query};
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

pyo3::import_exception!(memcommit.errors, Rejected);
pyo3::import_exception!(memcommit.errors, StoreLocked);
pyo3::import_exception!(memcommit.errors, StoreClosed);
pyo3::import_exception!(memcommit.errors, ReadOnlyStore);
pyo3::import_exception!(memcommit.errors, WriterFailed);
pyo3::import_exception!(memcommit.errors, CorruptLog);

/// Map a core error to the Python exception users catch. Every variant has its own arm.
fn to_py(err: Error) -> PyErr {
    let msg = err.to_string();
    match err {
        Error::Io { source, path, .. } => match source.raw_os_error() {
            Some(code) => PyOSError::new_err((code, msg, path)),
            None => PyOSError::new_err(msg),
        },
        Error::WriterFailed { .. } => WriterFailed::new_err(msg),
        Error::Locked { path } => StoreLocked::new_err((msg, path)),
        Error::Corrupt { path, offset, lsn, .. } => CorruptLog::new_err((msg, path, offset, lsn)),
        Error::Rejected(r) => rejected(r),
        Error::Invalid { .. } => PyValueError::new_err(msg),
        Error::Closed { .. } => StoreClosed::new_err(msg),
        Error::ReadOnly { .. } => ReadOnlyStore::new_err(msg),
    }
}

fn rejected(r: Rejection) -> PyErr {
    use memcommit_core::GuardKind as K;
    Python::attach(|py| {
        // The guard's values in their natural types: LSNs as int, existence as bool.
        let value = |v: &str| -> PyResult<Py<PyAny>> {
            Ok(match r.kind {
                K::ExpectLsn | K::Lsn => {
                    v.parse::<u64>().unwrap_or_default().into_pyobject(py)?.into_any().unbind()
                }
                K::Exists | K::UnknownId => pyo3::types::PyBool::new(
                    py,
                    v.starts_with("exists") || v.starts_with("a memory that exists"),
                )
                .to_owned()
                .into_any()
                .unbind(),
                K::Status | K::Tier => PyString::new(py, v).into_any().unbind(),
            })
        };
        let guard = (|| {
            let cls = py.import("memcommit.errors")?.getattr("Guard")?;
            cls.call1((r.kind.name(), r.id.clone(), value(&r.expected)?, value(&r.actual)?))
        })();
        match guard {
            Ok(g) => Rejected::new_err((r.reason, g.unbind())),
            Err(e) => e,
        }
    })
}

/// Run core work with the GIL released, then map its error.
fn release<T: Send>(py: Python<'_>, f: impl FnOnce() -> memcommit_core::Result<T> + Send) -> PyResult<T> {
    py.detach(f).map_err(to_py)
}

fn type_error(field: &str, want: &str, got: &Bound<'_, PyAny>) -> PyErr {
    let name = got.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    PyTypeError::new_err(format!("{field} must be {want}, not {name}"))
}

fn get_str(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<String> {
    match obj.cast::<PyString>() {
        Ok(s) => Ok(s.to_str()?.to_owned()),
        Err(_) => Err(type_error(field, "str", obj)),
    }
}

fn get_opt_str(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Option<String>> {
    if obj.is_none() {
        Ok(None)
    } else {
        get_str(obj, field).map(Some)
    }
}

fn get_strs(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Vec<String>> {
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{field} must be a sequence of str, not a single str (wrap it in a tuple)"
        )));
    }
    let mut out = Vec::new();
    for item in obj.try_iter().map_err(|_| type_error(field, "a sequence of str", obj))? {
        out.push(get_str(&item?, field)?);
    }
    Ok(out)
}

fn get_tier(obj: &Bound<'_, PyAny>) -> PyResult<Tier> {
    tier_from(obj.cast::<PyString>().map_err(|_| type_error("tier", "str", obj))?.to_str()?)
}

fn tier_from(s: &str) -> PyResult<Tier> {
    Tier::parse(s).ok_or_else(|| {
        PyValueError::new_err(format!("tier: {s:?} is not a tier; use one of working, mid, long, archive"))
    })
}

fn status_from(s: &str) -> PyResult<Status> {
    Status::parse(s)
        .ok_or_else(|| PyValueError::new_err(format!("status: {s:?} is not a status; use active or stale")))
}

fn get_status(obj: &Bound<'_, PyAny>) -> PyResult<Status> {
    status_from(obj.cast::<PyString>().map_err(|_| type_error("status", "str", obj))?.to_str()?)
}

// Extraction while a commit holds the writer lock borrows the Python strings instead of
// copying them. It runs no Python code (no __iter__ or __index__ of user classes: the Python
// layer passes tuples of str); every lock in the core is taken with the GIL released, so even
// a thread switch here could not deadlock.

fn bstr<'a>(obj: &'a Bound<'_, PyAny>, field: &str) -> PyResult<&'a str> {
    match obj.cast::<PyString>() {
        Ok(s) => s.to_str(),
        Err(_) => Err(type_error(field, "str", obj)),
    }
}

fn bopt<'a>(obj: &'a Bound<'_, PyAny>, field: &str) -> PyResult<Option<&'a str>> {
    if obj.is_none() {
        Ok(None)
    } else {
        bstr(obj, field).map(Some)
    }
}

/// The items of a tuple of str (the Python layer turns any other sequence into a tuple).
fn tuple_items<'py>(obj: &Bound<'py, PyAny>, field: &str, out: &mut Vec<Bound<'py, PyAny>>) -> PyResult<()> {
    out.clear();
    let t = obj.cast::<PyTuple>().map_err(|_| type_error(field, "a tuple of str", obj))?;
    out.extend(t.iter());
    Ok(())
}

fn strs<'a>(items: &'a [Bound<'_, PyAny>], field: &str) -> PyResult<Vec<&'a str>> {
    items.iter().map(|i| bstr(i, field)).collect()
}

/// Reusable holders for the Python objects one operation tuple references.
#[derive(Default)]
struct OpItems<'py> {
    items: Vec<Bound<'py, PyAny>>,
    tags: Vec<Bound<'py, PyAny>>,
    sources: Vec<Bound<'py, PyAny>>,
}

impl<'py> OpItems<'py> {
    /// Take in one operation tuple from `memcommit.commit`.
    fn load(&mut self, op: &Bound<'py, PyAny>) -> PyResult<()> {
        let t = op.cast::<PyTuple>().map_err(|_| PyTypeError::new_err("operation must be a tuple"))?;
        self.items.clear();
        self.items.extend(t.iter());
        let code: u8 =
            self.items.first().ok_or_else(|| PyValueError::new_err("empty operation"))?.extract()?;
        if code == 0 {
            if self.items.len() != 9 {
                return Err(PyValueError::new_err("a put operation has 9 fields"));
            }
            tuple_items(&self.items[7], "tags", &mut self.tags)?;
            tuple_items(&self.items[8], "sources", &mut self.sources)?;
        }
        Ok(())
    }

    /// The loaded operation as a core command borrowing its strings.
    fn command(&self) -> PyResult<Command<&str>> {
        let it = &self.items;
        let need = |n: usize| {
            if it.len() == n {
                Ok(())
            } else {
                Err(PyValueError::new_err(format!("operation has {} fields, expected {n}", it.len())))
            }
        };
        let code: u8 = it[0].extract()?;
        Ok(match code {
            0 => Command::Put(PutCommand {
                id: bstr(&it[1], "id")?,
                kind: bstr(&it[2], "kind")?,
                text: bstr(&it[3], "text")?,
                data: bopt(&it[4], "data")?,
                task: bopt(&it[5], "task")?,
                tier: if it[6].is_none() { None } else { Some(tier_from(bstr(&it[6], "tier")?)?) },
                tags: strs(&self.tags, "tags")?,
                sources: strs(&self.sources, "sources")?,
            }),
            1 => {
                need(4)?;
                Command::SetStatus {
                    id: bstr(&it[1], "id")?,
                    status: status_from(bstr(&it[2], "status")?)?,
                    reason: bopt(&it[3], "reason")?,
                }
            }
            2 => {
                need(3)?;
                Command::Move { id: bstr(&it[1], "id")?, tier: tier_from(bstr(&it[2], "tier")?)? }
            }
            3 => {
                need(2)?;
                Command::FinishTask { task: bstr(&it[1], "task")? }
            }
            4 => {
                need(6)?;
                let lsn = &it[5];
                Command::Expect(Expect {
                    id: bstr(&it[1], "id")?,
                    exists: if it[2].is_none() { None } else { Some(it[2].extract::<bool>()?) },
                    status: if it[3].is_none() { None } else { Some(status_from(bstr(&it[3], "status")?)?) },
                    tier: if it[4].is_none() { None } else { Some(tier_from(bstr(&it[4], "tier")?)?) },
                    lsn: if lsn.is_none() {
                        None
                    } else {
                        Some(lsn.extract::<u64>().map_err(|_| type_error("lsn", "a non-negative int", lsn))?)
                    },
                })
            }
            _ => return Err(PyValueError::new_err(format!("unknown operation code {code}"))),
        })
    }
}

/// Run a commit: take the writer lock with the GIL released, feed it commands extracted (with
/// the GIL) straight from the Python objects, then finish and wait for durability with the
/// GIL released again.
fn run_commit<'py>(
    py: Python<'py>,
    log: &Log,
    expect_lsn: Option<u64>,
    at_us: i64,
    hint: usize,
    feed: impl FnOnce(&mut memcommit_core::Commit<'_>) -> PyResult<()>,
) -> PyResult<Option<(u64, u64)>> {
    let mut c = release(py, || log.begin(expect_lsn, at_us, hint))?;
    feed(&mut c)?;
    let done = release(py, || c.finish())?;
    match done {
        Some(d) => {
            release(py, || log.wait_durable(d.end))?;
            Ok(Some((d.first_lsn, d.last_lsn)))
        }
        None => Ok(None),
    }
}

static UTC_EPOCH: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static JSON_LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Microseconds since the epoch as an aware UTC datetime, exactly (no float rounding).
fn datetime_from_us<'py>(py: Python<'py>, us: i64) -> PyResult<Bound<'py, PyAny>> {
    let epoch = UTC_EPOCH.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        let dt = py.import("datetime")?;
        let utc = dt.getattr("timezone")?.getattr("utc")?;
        Ok(dt.getattr("datetime")?.call1((1970, 1, 1, 0, 0, 0, 0, utc))?.unbind())
    })?;
    let days = us.div_euclid(86_400_000_000);
    let rem = us.rem_euclid(86_400_000_000);
    let delta = pyo3::types::PyDelta::new(
        py,
        days as i32,
        (rem / 1_000_000) as i32,
        (rem % 1_000_000) as i32,
        false,
    )?;
    epoch.bind(py).call_method1("__add__", (delta,))
}

fn json_loads<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    let loads = JSON_LOADS.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        Ok(py.import("json")?.getattr("loads")?.unbind())
    })?;
    loads.bind(py).call1((text,))
}

/// One memory, as the store returned it. Immutable: no attribute can be set, and `data` is
/// decoded afresh on every access, so changing what it returns never changes the store.
#[pyclass(frozen, module = "memcommit", name = "Memory")]
struct Memory {
    #[pyo3(get)]
    id: Py<PyString>,
    #[pyo3(get)]
    kind: Py<PyString>,
    #[pyo3(get)]
    text: Py<PyString>,
    data_json: Option<String>,
    #[pyo3(get)]
    task: Option<Py<PyString>>,
    #[pyo3(get)]
    tier: &'static str,
    #[pyo3(get)]
    status: &'static str,
    #[pyo3(get)]
    tags: Py<PyTuple>,
    #[pyo3(get)]
    sources: Py<PyTuple>,
    created_us: i64,
    updated_us: i64,
    #[pyo3(get)]
    lsn: u64,
}

#[pymethods]
impl Memory {
    /// The memory's JSON object, decoded afresh on every access, or None.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.data_json {
            Some(s) => json_loads(py, s),
            None => Ok(py.None().into_bound(py)),
        }
    }

    /// When the memory was created (aware UTC datetime from the store's clock).
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime_from_us(py, self.created_us)
    }

    /// When the newest record touching the memory was written.
    #[getter]
    fn updated_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime_from_us(py, self.updated_us)
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(o) = other.cast::<Memory>() else {
            return Ok(false);
        };
        let o = o.get();
        Ok(self.id.bind(py).as_any().eq(o.id.bind(py))?
            && self.kind.bind(py).as_any().eq(o.kind.bind(py))?
            && self.text.bind(py).as_any().eq(o.text.bind(py))?
            && self.data_json == o.data_json
            && self.task.as_ref().map(|t| t.bind(py).to_string())
                == o.task.as_ref().map(|t| t.bind(py).to_string())
            && self.tier == o.tier
            && self.status == o.status
            && self.tags.bind(py).as_any().eq(o.tags.bind(py))?
            && self.sources.bind(py).as_any().eq(o.sources.bind(py))?
            && self.created_us == o.created_us
            && self.updated_us == o.updated_us
            && self.lsn == o.lsn)
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        (self.id.bind(py), self.lsn).into_pyobject(py)?.hash()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Memory(id={}, kind={}, tier='{}', status='{}', lsn={}, text={})",
            self.id.bind(py).repr()?,
            self.kind.bind(py).repr()?,
            self.tier,
            self.status,
            self.lsn,
            self.text.bind(py).repr()?
        ))
    }
}

fn memory_from_read(py: Python<'_>, log: &Log, m: &MemoryRead) -> PyResult<Memory> {
    let rec = format::view_trusted(&m.put);
    let body = memory::decode_put(rec.payload).ok_or_else(|| {
        CorruptLog::new_err(format!("{}: malformed put record at LSN {}", log.display(), rec.lsn))
    })?;
    let e = &m.entry;
    Ok(Memory {
        id: PyString::new(py, rec.key_str()).unbind(),
        kind: PyString::intern(py, body.head.kind).unbind(),
        text: PyString::new(py, body.text).unbind(),
        data_json: body.data.map(str::to_owned),
        task: body.head.task.map(|t| PyString::intern(py, t).unbind()),
        tier: e.tier.name(),
        status: e.status.name(),
        tags: PyTuple::new(py, body.head.tags.iter().map(|t| PyString::intern(py, t)))?.unbind(),
        sources: PyTuple::new(py, &body.sources)?.unbind(),
        created_us: e.created_at,
        updated_us: e.updated_at,
        lsn: e.lsn,
    })
}

/// One record of the log. `fields` is decoded afresh on every access.
#[pyclass(frozen, module = "memcommit", name = "Record")]
struct Record {
    #[pyo3(get)]
    lsn: u64,
    #[pyo3(get)]
    op: &'static str,
    at_us: i64,
    #[pyo3(get)]
    key: Py<PyString>,
    bytes: Vec<u8>,
}

#[pymethods]
impl Record {
    /// When the record was written (aware UTC datetime from the store's clock).
    #[getter]
    fn at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime_from_us(py, self.at_us)
    }

    /// The record's fields as a dict.
    #[getter]
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let rec = format::view_trusted(&self.bytes);
        let d = PyDict::new(py);
        let bad = || CorruptLog::new_err(format!("malformed {} record at LSN {}", self.op, self.lsn));
        match rec.op {
            Op::Put => {
                let b = memory::decode_put(rec.payload).ok_or_else(bad)?;
                d.set_item("kind", b.head.kind)?;
                d.set_item("text", b.text)?;
                d.set_item(
                    "data",
                    match b.data {
                        Some(s) => json_loads(py, s)?,
                        None => py.None().into_bound(py),
                    },
                )?;
                d.set_item("task", b.head.task)?;
                d.set_item("tier", b.head.state.tier.name())?;
                d.set_item("status", b.head.state.status.name())?;
                d.set_item("tags", PyTuple::new(py, &b.head.tags)?)?;
                d.set_item("sources", PyTuple::new(py, &b.sources)?)?;
                d.set_item("created_at", datetime_from_us(py, b.head.state.created_at)?)?;
            }
            Op::Status => {
                let (status, reason) = memory::decode_status(rec.payload).ok_or_else(bad)?;
                d.set_item("status", status.name())?;
                d.set_item("reason", reason)?;
            }
            Op::Move => d.set_item("tier", memory::decode_move(rec.payload).ok_or_else(bad)?.name())?,
            Op::Task => d.set_item("finished", memory::decode_task(rec.payload).ok_or_else(bad)?)?,
        }
        Ok(d)
    }

    /// The record's bytes exactly as they are in the log.
    fn raw<'py>(&self, py: Python<'py>) -> Bound<'py, pyo3::types::PyBytes> {
        pyo3::types::PyBytes::new(py, &self.bytes)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<Record>().is_ok_and(|o| o.get().bytes == self.bytes)
    }

    fn __hash__(&self) -> u64 {
        self.lsn
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("Record(lsn={}, op={:?}, key={})", self.lsn, self.op, self.key.bind(py).repr()?))
    }
}

fn record_from_bytes(py: Python<'_>, bytes: Vec<u8>) -> Record {
    let rec = format::view_trusted(&bytes);
    Record {
        lsn: rec.lsn,
        op: rec.op.name(),
        at_us: rec.at,
        key: PyString::new(py, rec.key_str()).unbind(),
        bytes: bytes.clone(),
    }
}

/// An open log: the store's engine. `memcommit.MemoryStore` wraps it.
#[pyclass(frozen, module = "memcommit._native")]
struct NativeLog {
    log: Arc<Log>,
}

#[pymethods]
impl NativeLog {
    /// Open or create the log at `path`.
    #[staticmethod]
    #[pyo3(signature = (path, durability="commit", read_only=false, flush_interval_ms=50, max_record_bytes=16*1024*1024))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        durability: &str,
        read_only: bool,
        flush_interval_ms: u64,
        max_record_bytes: usize,
    ) -> PyResult<Self> {
        let durability = Durability::parse(durability).ok_or_else(|| {
            PyValueError::new_err(format!(
                "durability: {durability:?} is not a mode; use commit, batch or none"
            ))
        })?;
        let opts = Options { durability, flush_interval_ms, max_record_bytes, read_only };
        let log = release(py, || Log::open(&path, opts))?;
        Ok(NativeLog { log })
    }

    /// A log in RAM.
    #[staticmethod]
    #[pyo3(signature = (max_record_bytes=16*1024*1024))]
    fn memory(max_record_bytes: usize) -> PyResult<Self> {
        let log = Log::memory(Options { max_record_bytes, ..Options::default() }).map_err(to_py)?;
        Ok(NativeLog { log })
    }

    /// Run a commit of operation tuples. Returns (first LSN, last LSN) or None.
    #[pyo3(signature = (ops, expect_lsn, at_us))]
    fn commit(
        &self,
        py: Python<'_>,
        ops: &Bound<'_, PyList>,
        expect_lsn: Option<u64>,
        at_us: i64,
    ) -> PyResult<Option<(u64, u64)>> {
        run_commit(py, &self.log, expect_lsn, at_us, ops.len(), |c| {
            let mut op = OpItems::default();
            for item in ops.iter() {
                op.load(&item)?;
                c.push(&op.command()?).map_err(to_py)?;
            }
            Ok(())
        })
    }

    /// Put many memories sharing kind, task, tier, data, tags and sources, in one commit.
    #[pyo3(signature = (ids, texts, kind, task, tier, data, tags, sources, expect_lsn, at_us))]
    #[allow(clippy::too_many_arguments)]
    fn put_many(
        &self,
        py: Python<'_>,
        ids: &Bound<'_, PyList>,
        texts: &Bound<'_, PyList>,
        kind: &str,
        task: Option<&str>,
        tier: &str,
        data: Option<&str>,
        tags: &Bound<'_, PyTuple>,
        sources: &Bound<'_, PyTuple>,
        expect_lsn: Option<u64>,
        at_us: i64,
    ) -> PyResult<Option<(u64, u64)>> {
        if ids.len() != texts.len() {
            return Err(PyValueError::new_err(format!("ids: {} ids for {} texts", ids.len(), texts.len())));
        }
        let tier = tier_from(tier)?;
        let (mut tag_items, mut source_items) = (Vec::new(), Vec::new());
        tuple_items(tags.as_any(), "tags", &mut tag_items)?;
        tuple_items(sources.as_any(), "sources", &mut source_items)?;
        let tags = strs(&tag_items, "tags")?;
        let sources = strs(&source_items, "sources")?;
        run_commit(py, &self.log, expect_lsn, at_us, ids.len(), |c| {
            for i in 0..ids.len() {
                let (id, text) = (ids.get_item(i)?, texts.get_item(i)?);
                let put = PutCommand {
                    id: bstr(&id, "id")?,
                    kind,
                    text: bstr(&text, "text")?,
                    data,
                    task,
                    tier: Some(tier),
                    tags: tags.clone(),
                    sources: sources.clone(),
                };
                c.push(&Command::Put(put)).map_err(to_py)?;
            }
            Ok(())
        })
    }

    /// Memories by id (None where missing).
    fn get_many(&self, py: Python<'_>, ids: Vec<String>) -> PyResult<Vec<Option<Memory>>> {
        let log = &self.log;
        let reads = release(py, || log.get_many(&ids))?;
        reads.iter().map(|r| r.as_ref().map(|m| memory_from_read(py, log, m)).transpose()).collect()
    }

    /// One memory by id, or None.
    fn get(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<Option<Memory>> {
        let id = get_str(id, "id")?;
        let log = &self.log;
        let mut reads = release(py, || log.get_many(&[id]))?;
        reads.pop().flatten().map(|m| memory_from_read(py, log, &m)).transpose()
    }

    /// Memories matching every given filter, in creation order.
    #[pyo3(signature = (tier=None, kind=None, task=None, status=None, tags=None, limit=None))]
    #[allow(clippy::too_many_arguments)] // the Python signature of find
    fn find(
        &self,
        py: Python<'_>,
        tier: Option<&Bound<'_, PyAny>>,
        kind: Option<&Bound<'_, PyAny>>,
        task: Option<&Bound<'_, PyAny>>,
        status: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
        limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<Memory>> {
        let tier = tier.filter(|t| !t.is_none()).map(get_tier).transpose()?;
        let status = status.filter(|s| !s.is_none()).map(get_status).transpose()?;
        let kind = kind.map(|k| get_opt_str(k, "kind")).transpose()?.flatten();
        let task = task.map(|t| get_opt_str(t, "task")).transpose()?.flatten();
        let tags = tags.filter(|t| !t.is_none()).map(|t| get_strs(t, "tags")).transpose()?;
        let limit = match limit.filter(|l| !l.is_none()) {
            None => None,
            Some(l) => {
                if l.is_instance_of::<pyo3::types::PyBool>() {
                    return Err(type_error("limit", "an int", l));
                }
                let n: i64 = l.extract().map_err(|_| type_error("limit", "an int", l))?;
                if n < 0 {
                    return Err(PyValueError::new_err(format!("limit: must not be negative, got {n}")));
                }
                Some(n as usize)
            }
        };
        let log = &self.log;
        let reads = release(py, || {
            log.find(&Query {
                tier,
                kind: kind.as_deref(),
                task: task.as_deref(),
                status,
                tags: tags.as_deref(),
                limit,
            })
        })?;
        reads.iter().map(|m| memory_from_read(py, log, m)).collect()
    }

    /// The records of one memory still in the log, oldest first.
    fn history(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<Vec<Record>> {
        let id = get_str(id, "id")?;
        let log = &self.log;
        let recs = release(py, || log.history(&id))?;
        Ok(recs.into_iter().map(|b| record_from_bytes(py, b)).collect())
    }

    /// Up to `max` records with LSN above `after`, scanning from byte `start` (0: from the LSN).
    /// Returns (records, offset to continue from).
    fn read_records(
        &self,
        py: Python<'_>,
        after: u64,
        start: u64,
        max: usize,
    ) -> PyResult<(Vec<Record>, u64)> {
        let log = &self.log;
        let (recs, next) = release(py, || log.read_records(after, start, max))?;
        Ok((recs.into_iter().map(|b| record_from_bytes(py, b)).collect(), next))
    }

    /// Newest committed LSN.
    #[getter]
    fn lsn(&self, py: Python<'_>) -> u64 {
        py.detach(|| self.log.lsn())
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        release(py, || self.log.len())
    }

    fn contains(&self, py: Python<'_>, id: &str) -> PyResult<bool> {
        release(py, || self.log.contains(id))
    }

    fn is_task_finished(&self, py: Python<'_>, task: &str) -> PyResult<bool> {
        release(py, || self.log.is_task_finished(task))
    }

    /// Facts about the log as a dict.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let i = release(py, || self.log.info())?;
        let d = PyDict::new(py);
        d.set_item("path", self.log.path().map(|p| p.display().to_string()))?;
        d.set_item("records", i.records)?;
        d.set_item("lsn", i.lsn)?;
        d.set_item("bytes", i.bytes)?;
        d.set_item("generation", i.generation)?;
        d.set_item("store_id", i.store_id)?;
        d.set_item("memories", i.memories)?;
        d.set_item("durability", self.log.options().durability.name())?;
        d.set_item("read_only", self.log.options().read_only)?;
        d.set_item("recovered_bytes", i.recovered_bytes)?;
        Ok(d)
    }

    /// The current blake3 chain value, hex.
    fn chain_hex(&self, py: Python<'_>) -> PyResult<String> {
        let log = &self.log;
        let v = release(py, || log.chain_value())?;
        Ok(v.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Catch a reader up. Returns how many records were applied.
    fn refresh(&self, py: Python<'_>) -> PyResult<u64> {
        let log = &self.log;
        release(py, || log.refresh())
    }

    /// fsync everything written.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let log = &self.log;
        release(py, || log.flush())
    }

    /// Flush (unless durability is "none") and release the file.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let log = &self.log;
        release(py, || log.close())
    }

    /// Whether the log is closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        py.detach(|| self.log.is_closed())
    }

    /// Bytes of heap the index holds.
    fn index_heap_bytes(&self, py: Python<'_>) -> usize {
        py.detach(|| self.log.index_heap_bytes())
    }
}

/// Read a log file without opening a store or changing it: how far it is good and where it is
/// damaged.
#[pyfunction]
fn inspect_log<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let i = release(py, || memcommit_core::inspect(&path))?;
    let d = PyDict::new(py);
    d.set_item("header_ok", i.header_ok)?;
    d.set_item("header_error", i.header_error)?;
    d.set_item("records", i.records)?;
    d.set_item("lsn", i.lsn)?;
    d.set_item("bytes", i.bytes)?;
    d.set_item("generation", i.generation)?;
    d.set_item("store_id", i.store_id)?;
    d.set_item("good_end", i.good_end)?;
    d.set_item("damage_offset", i.damage_offset)?;
    d.set_item("damage_lsn", i.damage_lsn)?;
    d.set_item("damage_mid_log", i.damage_mid_log)?;
    d.set_item("damage_reason", i.damage_reason)?;
    Ok(d)
}

/// Cut a log file at `good_end` and fsync it (after a backup; used by `memcommit repair`).
#[pyfunction]
fn truncate_log(py: Python<'_>, path: PathBuf, good_end: u64) -> PyResult<()> {
    release(py, || memcommit_core::truncate(&path, good_end))
}

static IDS: memcommit_core::ids::IdGenerator = memcommit_core::ids::IdGenerator::new();

/// `n` new memory ids for a clock reading of `ms`, in increasing order.
#[pyfunction]
fn new_ids(ms: u64, n: usize) -> Vec<String> {
    IDS.next_ids(ms, n)
}

/// The native half of memcommit. Users import `memcommit`, not this module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeLog>()?;
    m.add_class::<Memory>()?;
    m.add_class::<Record>()?;
    m.add_function(wrap_pyfunction!(inspect_log, m)?)?;
    m.add_function(wrap_pyfunction!(truncate_log, m)?)?;
    m.add_function(wrap_pyfunction!(new_ids, m)?)?;
    m.add("FORMAT_VERSION", format::FORMAT_VERSION)?;
    Ok(())
}
