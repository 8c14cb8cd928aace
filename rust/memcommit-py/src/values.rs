//! The values the store hands out: `Memory` and `Record`.

use memcommit_core::format::memory;
use memcommit_core::format::{self, Op};
use memcommit_core::{Log, MemoryRead};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple};

use crate::errors::CorruptLog;

static UTC_EPOCH: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static JSON_LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Microseconds since the epoch as an aware UTC datetime, exactly (no float rounding).
pub fn datetime_from_us<'py>(py: Python<'py>, us: i64) -> PyResult<Bound<'py, PyAny>> {
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
pub struct Memory {
    #[pyo3(get)]
    id: Py<PyString>,
    #[pyo3(get)]
    kind: Py<PyString>,
    #[pyo3(get)]
    text: Py<PyString>,
    data_json: Option<String>,
    /// Where `data_json` was read (the log, the put's offset), for the error if it does not
    /// decode; only a memory with data keeps it.
    origin: Option<(Py<PyString>, u64)>,
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
    moved_us: i64,
    #[pyo3(get)]
    lsn: u64,
    /// The vector's bytes (little-endian f32s), decoded when asked for.
    vector_bytes: Option<Box<[u8]>>,
}

#[pymethods]
impl Memory {
    /// The memory's JSON object, decoded afresh on every access, or None.
    ///
    /// Decoded here, not when the memory is read: text whose checksum matched but that is not
    /// JSON (a tool wrote it, not memcommit) is `CorruptLog` naming the log, offset and LSN.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let Some(text) = &self.data_json else { return Ok(py.None().into_bound(py)) };
        json_loads(py, text).map_err(|e| match &self.origin {
            Some((log, off))
                if e.is_instance_of::<pyo3::exceptions::PyValueError>(py)
                    || e.is_instance_of::<pyo3::exceptions::PyRecursionError>(py) =>
            {
                damaged_put(
                    &log.bind(py).to_string_lossy(),
                    *off,
                    self.lsn,
                    "a put whose data is not valid JSON",
                )
            }
            _ => e,
        })
    }

    /// The memory's vector (a tuple of floats), or None.
    #[getter]
    fn vector<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.vector_bytes.as_deref().map(|b| PyTuple::new(py, memory::vector_from_bytes(b))).transpose()
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

    /// When the memory's tier last changed (its creation, if it never moved): what
    /// retention's `ArchivedOlderThan` counts from.
    #[getter]
    fn moved_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime_from_us(py, self.moved_us)
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
            && self.lsn == o.lsn
            && self.vector_bytes == o.vector_bytes)
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

/// The memory a read returned. `path` is the log's path as a Python str (the store's, made
/// once), which a memory with data keeps for the error of data that does not decode.
pub fn memory_from_read(py: Python<'_>, path: &Py<PyString>, log: &Log, m: &MemoryRead) -> PyResult<Memory> {
    let rec = format::view_trusted(&m.put);
    // Checked in full on every read: replay keeps only the head of a put, so a record whose
    // checksum matches but whose text or data does not decode is found here.
    let damaged = |reason: &str| damaged_put(log.display(), m.entry.put_off, rec.lsn, reason);
    let id = std::str::from_utf8(rec.key).map_err(|_| damaged("the record's key is not UTF-8"))?;
    let body = memory::decode_put(rec.payload)
        .ok_or_else(|| damaged("malformed put payload (or text that is not UTF-8)"))?;
    let e = &m.entry;
    Ok(Memory {
        id: PyString::new(py, id).unbind(),
        kind: PyString::intern(py, body.head.kind).unbind(),
        text: PyString::new(py, body.text).unbind(),
        data_json: body.data.map(str::to_owned),
        origin: body.data.map(|_| (path.clone_ref(py), m.entry.put_off)),
        task: body.head.task.map(|t| PyString::intern(py, t).unbind()),
        tier: e.tier.name(),
        status: e.status.name(),
        tags: PyTuple::new(py, body.head.tags.iter().map(|t| PyString::intern(py, t)))?.unbind(),
        sources: PyTuple::new(py, &body.sources)?.unbind(),
        created_us: e.created_at,
        updated_us: e.updated_at,
        moved_us: e.moved_at,
        lsn: e.lsn,
        vector_bytes: body.vector.map(Box::from),
    })
}

/// A put record whose checksum matched but whose contents do not decode.
fn damaged_put(log: &str, offset: u64, lsn: u64, reason: &str) -> PyErr {
    CorruptLog::new_err(format!(
        "{log}: damaged log at byte offset {offset} (LSN {lsn}): {reason}, though its checksum matches; \
         `memcommit repair {log}` can back up the file and cut it there"
    ))
}

/// One record of the log. `fields` is decoded afresh on every access.
#[pyclass(frozen, module = "memcommit", name = "Record")]
pub struct Record {
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
                d.set_item("vector", b.vector_values().map(|v| PyTuple::new(py, v)).transpose()?)?;
            }
            Op::Status => {
                let (status, reason) = memory::decode_status(rec.payload).ok_or_else(bad)?;
                d.set_item("status", status.name())?;
                d.set_item("reason", reason)?;
            }
            Op::Move => d.set_item("tier", memory::decode_move(rec.payload).ok_or_else(bad)?.name())?,
            Op::Task => d.set_item("finished", memory::decode_task(rec.payload).ok_or_else(bad)?)?,
            Op::Entity => match memory::decode_entity(rec.payload).ok_or_else(bad)? {
                Some(json) => {
                    d.set_item("state", json_loads(py, std::str::from_utf8(json).map_err(|_| bad())?)?)?
                }
                None => d.set_item("state", py.None())?,
            },
            Op::Seal => {
                let s = memcommit_core::seal::decode(&rec, 0).ok_or_else(bad)?;
                d.set_item("lsn", s.lsn)?;
                d.set_item("hash", memcommit_core::seal::hex(s.hash()))?;
                d.set_item("keyed", s.keyed)?;
            }
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

pub fn record_from_bytes(py: Python<'_>, bytes: Vec<u8>) -> Record {
    let rec = format::view_trusted(&bytes);
    Record {
        lsn: rec.lsn,
        op: rec.op.name(),
        at_us: rec.at,
        key: PyString::new(py, rec.key_str()).unbind(),
        bytes: bytes.clone(),
    }
}
