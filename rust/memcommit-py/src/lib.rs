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
    Python::attach(|py| {
        let guard = py
            .import("memcommit.errors")
            .and_then(|m| m.getattr("Guard"))
            .and_then(|g| g.call1((r.kind.name(), r.id.clone(), r.expected.clone(), r.actual.clone())));
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
    let s = get_str(obj, "tier")?;
    Tier::parse(&s).ok_or_else(|| {
        PyValueError::new_err(format!("tier: {s:?} is not a tier; use one of working, mid, long, archive"))
    })
}

fn get_status(obj: &Bound<'_, PyAny>) -> PyResult<Status> {
    let s = get_str(obj, "status")?;
    Status::parse(&s).ok_or_else(|| PyValueError::new_err(format!("status: {s:?} is not a status; use active or stale")))
}

/// Decode one operation tuple from `memcommit.commit` into a core command.
fn extract_command(op: &Bound<'_, PyAny>) -> PyResult<Command> {
    let t = op.cast::<PyTuple>().map_err(|_| PyTypeError::new_err("operation must be a tuple"))?;
    let code: u8 = t.get_item(0)?.extract()?;
    Ok(match code {
        0 => {
            let tier = t.get_item(6)?;
            Command::Put(PutCommand {
                id: get_str(&t.get_item(1)?, "id")?,
                kind: get_str(&t.get_item(2)?, "kind")?,
                text: get_str(&t.get_item(3)?, "text")?,
                data: get_opt_str(&t.get_item(4)?, "data")?,
                task: get_opt_str(&t.get_item(5)?, "task")?,
                tier: if tier.is_none() { None } else { Some(get_tier(&tier)?) },
                tags: get_strs(&t.get_item(7)?, "tags")?,
                sources: get_strs(&t.get_item(8)?, "sources")?,
            })
        }
        1 => Command::SetStatus {
            id: get_str(&t.get_item(1)?, "id")?,
            status: get_status(&t.get_item(2)?)?,
            reason: get_opt_str(&t.get_item(3)?, "reason")?,
        },
        2 => Command::Move { id: get_str(&t.get_item(1)?, "id")?, tier: get_tier(&t.get_item(2)?)? },
        3 => Command::FinishTask { task: get_str(&t.get_item(1)?, "task")? },
        4 => {
            let exists = t.get_item(2)?;
            let status = t.get_item(3)?;
            let tier = t.get_item(4)?;
            let lsn = t.get_item(5)?;
            Command::Expect(Expect {
                id: get_str(&t.get_item(1)?, "id")?,
                exists: if exists.is_none() { None } else { Some(exists.extract::<bool>()?) },
                status: if status.is_none() { None } else { Some(get_status(&status)?) },
                tier: if tier.is_none() { None } else { Some(get_tier(&tier)?) },
                lsn: if lsn.is_none() {
                    None
                } else {
                    Some(lsn.extract::<u64>().map_err(|_| type_error("lsn", "a non-negative int", &lsn))?)
                },
            })
        }
        _ => return Err(PyValueError::new_err(format!("unknown operation code {code}"))),
    })
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
    let delta = pyo3::types::PyDelta::new(py, days as i32, (rem / 1_000_000) as i32, (rem % 1_000_000) as i32, false)?;
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
        let Ok(o) = other.cast::<Memory>() else { return Ok(false) };
        let o = o.get();
        Ok(self.id.bind(py).as_any().eq(o.id.bind(py))?
            && self.kind.bind(py).as_any().eq(o.kind.bind(py))?
            && self.text.bind(py).as_any().eq(o.text.bind(py))?
            && self.data_json == o.data_json
            && self.task.as_ref().map(|t| t.bind(py).to_string()) == o.task.as_ref().map(|t| t.bind(py).to_string())
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
    let body = memory::decode_put(rec.payload)
        .ok_or_else(|| CorruptLog::new_err(format!("{}: malformed put record at LSN {}", log.display(), rec.lsn)))?;
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
                d.set_item("data", match b.data {
                    Some(s) => json_loads(py, s)?,
                    None => py.None().into_bound(py),
                })?;
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
            PyValueError::new_err(format!("durability: {durability:?} is not a mode; use commit, batch or none"))
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
        let mut cmds = Vec::with_capacity(ops.len());
        for op in ops.iter() {
            cmds.push(extract_command(&op)?);
        }
        let log = &self.log;
        release(py, || log.commit(&cmds, expect_lsn, at_us))
    }

    /// Put many memories sharing kind, task, tier, data, tags and sources, in one commit.
    #[pyo3(signature = (ids, texts, kind, task, tier, data, tags, sources, expect_lsn, at_us))]
    #[allow(clippy::too_many_arguments)]
    fn put_many(
        &self,
        py: Python<'_>,
        ids: &Bound<'_, PyList>,
        texts: &Bound<'_, PyAny>,
        kind: String,
        task: Option<String>,
        tier: Option<&Bound<'_, PyAny>>,
        data: Option<String>,
        tags: &Bound<'_, PyAny>,
        sources: &Bound<'_, PyAny>,
        expect_lsn: Option<u64>,
        at_us: i64,
    ) -> PyResult<Option<(u64, u64)>> {
        let tier = match tier {
            Some(t) if !t.is_none() => Some(get_tier(t)?),
            _ => None,
        };
        let tags = get_strs(tags, "tags")?;
        let sources = get_strs(sources, "sources")?;
        let mut cmds = Vec::with_capacity(ids.len());
        let mut texts_iter = texts.try_iter().map_err(|_| type_error("texts", "a sequence of str", texts))?;
        for id in ids.iter() {
            let text = texts_iter.next().ok_or_else(|| PyValueError::new_err("texts: fewer texts than ids"))??;
            cmds.push(Command::Put(PutCommand {
                id: get_str(&id, "id")?,
                kind: kind.clone(),
                text: get_str(&text, "text")?,
                data: data.clone(),
                task: task.clone(),
                tier,
                tags: tags.clone(),
                sources: sources.clone(),
            }));
        }
        let log = &self.log;
        release(py, || log.commit(&cmds, expect_lsn, at_us))
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
            log.find(&Query { tier, kind: kind.as_deref(), task: task.as_deref(), status, tags: tags.as_deref(), limit })
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
    fn read_records(&self, py: Python<'_>, after: u64, start: u64, max: usize) -> PyResult<(Vec<Record>, u64)> {
        let log = &self.log;
        let (recs, next) = release(py, || log.read_records(after, start, max))?;
        Ok((recs.into_iter().map(|b| record_from_bytes(py, b)).collect(), next))
    }

    /// Newest committed LSN.
    #[getter]
    fn lsn(&self) -> u64 {
        self.log.lsn()
    }

    fn __len__(&self) -> PyResult<usize> {
        self.log.len().map_err(to_py)
    }

    fn contains(&self, id: &str) -> PyResult<bool> {
        self.log.contains(id).map_err(to_py)
    }

    fn is_task_finished(&self, task: &str) -> PyResult<bool> {
        self.log.is_task_finished(task).map_err(to_py)
    }

    /// Facts about the log as a dict.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let i = self.log.info().map_err(to_py)?;
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
    fn closed(&self) -> bool {
        self.log.is_closed()
    }

    /// Bytes of heap the index holds.
    fn index_heap_bytes(&self) -> usize {
        self.log.index_heap_bytes()
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
