//! `NativeLog`, the engine under `memcommit.MemoryStore`, and the file-level functions.

use std::path::PathBuf;
use std::sync::Arc;

use memcommit_core::compact::{Compacted, Hooks, Plan, Retention};
use memcommit_core::log::AutoSeal;
use memcommit_core::seal::{self, Checked, SealEntry};
use memcommit_core::{Durability, Log, Options};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use crate::commit::{text_str, PutArgs};
use crate::convert::{get_opt_u64, get_str, Filters};
use crate::errors::{to_py, InvalidValue};
use crate::gate::{self, release};
use crate::values::{memory_from_read, record_from_bytes, Memory, Record};

/// An open log: the store's engine. `memcommit.MemoryStore` wraps it.
///
/// Every method that takes one of the log's locks releases the GIL first: a streamed commit
/// holds the log's state lock while it reads Python strings (so it needs the GIL), and a
/// thread that waited for that lock holding the GIL would deadlock with it.
///
/// Log compaction replaces the log with its next generation in place (`compact`), so every
/// holder of this object goes on with the new one. A call that was waiting for the lock
/// compaction held finds the old generation closed (`Closed` with a reason): `across_swaps`
/// waits for the new one and makes the call again there, so no caller sees the swap.
///
/// `close` closes the log and lets go of it: the log's file, its index and its memory are
/// freed as soon as a call still running on it ends, not when Python collects this object
/// (a descriptor left open keeps a FUSE mount busy). Every later call raises `StoreClosed`.
#[pyclass(frozen, module = "memcommit._native")]
pub struct NativeLog {
    /// The current log; `None` once closed.
    log: parking_lot::RwLock<Option<Arc<Log>>>,
    /// The log's path (or ":memory:"), for the error of a call after close.
    display: String,
    /// The same as a Python str, made once: the memories read hold it for the error of a
    /// `data` that does not decode.
    display_py: pyo3::sync::PyOnceLock<Py<PyString>>,
    /// The compactions running and how many have ended (swapped or not), and their waiters.
    ended: (parking_lot::Mutex<Compactions>, parking_lot::Condvar),
    /// The store's embedder (`memcommit.open(path, embed=fn)`): called with a list of texts,
    /// it returns their vectors. Puts without a vector get one from it.
    embedder: pyo3::sync::PyOnceLock<Py<PyAny>>,
}

/// How long a call waits for log compaction to hand over the new generation.
const SWAP_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

impl NativeLog {
    pub(crate) fn new(log: Arc<Log>) -> Self {
        let display = log.display().to_string();
        NativeLog {
            log: parking_lot::RwLock::new(Some(log)),
            display,
            display_py: pyo3::sync::PyOnceLock::new(),
            ended: Default::default(),
            embedder: pyo3::sync::PyOnceLock::new(),
        }
    }

    /// The store's embedder, if it was opened with one.
    pub(crate) fn embedder<'py>(&self, py: Python<'py>) -> Option<&Bound<'py, PyAny>> {
        self.embedder.get(py).map(|e| e.bind(py))
    }

    /// The log's path as a Python str (made on first use).
    fn display_py(&self, py: Python<'_>) -> &Py<PyString> {
        self.display_py.get_or_init(py, || PyString::new(py, &self.display).unbind())
    }

    /// The current log, or `Closed` once `close` let go of it.
    pub(crate) fn log(&self) -> memcommit_core::Result<Arc<Log>> {
        self.log
            .read()
            .clone()
            .ok_or_else(|| memcommit_core::Error::Closed { path: self.display.clone(), why: None })
    }

    /// Whether the current log is `log`.
    fn holds(&self, log: &Arc<Log>) -> bool {
        self.log.read().as_ref().is_some_and(|now| Arc::ptr_eq(now, log))
    }

    /// How many compactions have ended so far (read before a call that may need `successor`).
    fn compactions_ended(&self) -> u64 {
        self.ended.0.lock().ended
    }

    /// After a call on `old` failed because log compaction retired it (`Closed` with a
    /// reason): wait, without the GIL, for the compaction to end, and return the generation
    /// that replaced `old` (`None` if none did, or the store was closed meanwhile). `seen` is
    /// `compactions_ended` from before the call.
    fn successor(&self, old: &Arc<Log>, seen: u64) -> Option<Arc<Log>> {
        let mut ended = self.ended.0.lock();
        let deadline = std::time::Instant::now() + SWAP_WAIT;
        while ended.ended == seen && self.holds(old) {
            if self.ended.1.wait_until(&mut ended, deadline).timed_out() {
                break;
            }
        }
        drop(ended);
        let now = self.log.read().clone()?;
        (!Arc::ptr_eq(&now, old)).then_some(now)
    }

    /// Run `attempt` on the current log, and again on the new generation whenever log
    /// compaction retired the log it was given while it waited for that log's lock (`Closed`
    /// with a reason): the one place a call goes on across a generation swap. Returns its
    /// result and the log it ran on. `attempt` is called with the GIL held and releases it for
    /// its own work (through `gate`); the wait for the new generation is without the GIL.
    pub(crate) fn across_swaps<T>(
        &self,
        py: Python<'_>,
        mut attempt: impl FnMut(&Arc<Log>) -> memcommit_core::Result<T>,
    ) -> PyResult<(T, Arc<Log>)> {
        let mut log = self.log().map_err(to_py)?;
        loop {
            let seen = self.compactions_ended();
            match attempt(&log) {
                Err(e @ memcommit_core::Error::Closed { why: Some(_), .. }) => {
                    log = match gate::detach(py, || self.successor(&log, seen)) {
                        Some(next) => next,
                        // No new generation: the compaction failed (its error stands), or the
                        // store was closed meanwhile (that is what the caller is told).
                        None => return Err(to_py(self.log().err().unwrap_or(e))),
                    };
                }
                other => return other.map(|t| (t, log)).map_err(to_py),
            }
        }
    }

    /// Run `f` on the current log with the GIL released (`across_swaps`); returns its result
    /// and the log it ran on.
    pub(crate) fn run_on<T: Send>(
        &self,
        py: Python<'_>,
        f: impl Fn(&Log) -> memcommit_core::Result<T> + Send + Sync,
    ) -> PyResult<(T, Arc<Log>)> {
        self.across_swaps(py, |log| gate::detach(py, || f(log)))
    }

    /// `run_on`, for a caller that needs only the result.
    pub(crate) fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl Fn(&Log) -> memcommit_core::Result<T> + Send + Sync,
    ) -> PyResult<T> {
        self.run_on(py, f).map(|(t, _)| t)
    }
}

#[pymethods]
impl NativeLog {
    /// Open or create the log at `path`.
    #[staticmethod]
    #[pyo3(signature = (path, durability="commit", read_only=false, flush_interval_ms=50, max_record_bytes=16_777_216, snapshot=None))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        durability: &str,
        read_only: bool,
        flush_interval_ms: u64,
        max_record_bytes: usize,
        snapshot: Option<PathBuf>,
    ) -> PyResult<Self> {
        let durability = Durability::parse(durability).ok_or_else(|| {
            InvalidValue::new_err(format!(
                "durability: {durability:?} is not a mode; use commit, batch or none"
            ))
        })?;
        let opts =
            Options { durability, flush_interval_ms, max_record_bytes, read_only, ..Options::default() };
        // Without an index file the whole log is replayed: Ctrl-C stops that (see `gate`).
        let log =
            gate::stoppable(py, |between| Log::open_between(&path, opts, snapshot.as_deref(), between))?;
        Ok(NativeLog::new(log))
    }

    /// A read-only replica in RAM of the log whose header is `header` (fed with `apply_raw`);
    /// `writable`: one that also takes commits of its own (a follower: see the core's
    /// `Log::follower`); `name`: what its errors call it (default `:memory:`).
    #[staticmethod]
    #[pyo3(signature = (header, max_record_bytes=16_777_216, writable=false, name=None))]
    fn replica(
        header: &[u8],
        max_record_bytes: usize,
        writable: bool,
        name: Option<String>,
    ) -> PyResult<Self> {
        let opts = Options { max_record_bytes, name, ..Options::default() };
        let log =
            if writable { Log::follower(header, opts) } else { Log::replica(header, opts) }.map_err(to_py)?;
        Ok(NativeLog::new(log))
    }

    /// A follower of the store whose log is `image` (its header, then its records, in
    /// pieces joined here), its state restored from the snapshot `snapshot` (JSON text; `name`
    /// is its file, for errors) and only the records after it replayed: the core's
    /// `Log::follower_with_snapshot`.
    #[staticmethod]
    #[pyo3(signature = (image, snapshot, name, max_record_bytes=16_777_216))]
    fn follower_with_snapshot(
        py: Python<'_>,
        image: Vec<Bound<'_, PyBytes>>,
        snapshot: &[u8],
        name: &str,
        max_record_bytes: usize,
    ) -> PyResult<Self> {
        let mut joined = Vec::with_capacity(image.iter().map(|b| b.as_bytes().len()).sum());
        for piece in &image {
            joined.extend_from_slice(piece.as_bytes());
        }
        let opts = Options { max_record_bytes, ..Options::default() };
        let log = release(py, || Log::follower_with_snapshot(joined, opts, snapshot, name))?;
        Ok(NativeLog::new(log))
    }

    /// Move the header's `dense_from` up (a compacted copy taking the records committed after
    /// it: the core's `Log::raise_dense_from`).
    fn raise_dense_from(&self, py: Python<'_>, dense_from: u64) -> PyResult<()> {
        self.run(py, |log| log.raise_dense_from(dense_from))
    }

    /// The log's 64-byte header.
    fn header<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let header = self.run(py, |log| Ok(log.header_bytes()))?;
        Ok(PyBytes::new(py, &header))
    }

    /// Where this log in RAM ends (a byte offset) and its LSN there (the core's `ram_end`).
    fn ram_end(&self, py: Python<'_>) -> PyResult<(u64, u64)> {
        self.run(py, |log| log.ram_end())
    }

    /// The bytes of this log in RAM from `offset` (an end `ram_end` gave) to its end.
    fn raw_since<'py>(&self, py: Python<'py>, offset: u64) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.run(py, |log| log.raw_since(offset))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The raw bytes of whole commits after LSN `after` (about `max_bytes` at most, at least
    /// one commit), and the LSN of their last record; with `upto`, only commits that end at or
    /// below that LSN.
    #[pyo3(signature = (after, max_bytes=4_194_304, upto=None))]
    fn read_raw<'py>(
        &self,
        py: Python<'py>,
        after: u64,
        max_bytes: usize,
        upto: Option<u64>,
    ) -> PyResult<(Bound<'py, PyBytes>, u64)> {
        let (bytes, last) = self.run(py, |log| match after {
            // No LSN lies above the largest (and the core's scan would look from `after + 1`).
            u64::MAX => log.len().map(|_| (Vec::new(), after)),
            _ => log.read_raw_upto(after, max_bytes, upto.unwrap_or(u64::MAX)),
        })?;
        Ok((PyBytes::new(py, &bytes), last))
    }

    /// The time (microseconds since the epoch) of the newest record `apply_raw` applied; 0
    /// when none was. A read of one field: the GIL is kept.
    #[getter]
    fn applied_at_us(&self) -> PyResult<i64> {
        Ok(self.log().map_err(to_py)?.applied_at())
    }

    /// The largest record a commit may write (`max_record_bytes` at open): an entity's state
    /// is at most one byte less.
    #[getter]
    fn max_record_bytes(&self) -> PyResult<usize> {
        Ok(self.log().map_err(to_py)?.options().max_record_bytes)
    }

    /// Apply raw records (from another log's `read_raw`) to this replica; returns its LSN.
    fn apply_raw(&self, py: Python<'_>, data: &[u8]) -> PyResult<u64> {
        self.run(py, |log| log.apply_raw(data))
    }

    /// A log in RAM.
    #[staticmethod]
    #[pyo3(signature = (max_record_bytes=16_777_216))]
    fn memory(max_record_bytes: usize) -> PyResult<Self> {
        let log = Log::memory(Options { max_record_bytes, ..Options::default() }).map_err(to_py)?;
        Ok(NativeLog::new(log))
    }

    /// `store.put`: one memory, one commit, one call. Returns the id. `at_us` None reads the
    /// system clock; `fields` are `store.put`'s keywords in their order (kind, id, task, tier,
    /// data, tags, sources), as the engine passes them.
    #[pyo3(signature = (at_us, text, *fields))]
    fn put<'py>(
        &self,
        py: Python<'py>,
        at_us: Option<i64>,
        text: Bound<'py, PyAny>,
        fields: &Bound<'py, PyTuple>,
    ) -> PyResult<Py<PyString>> {
        // None: the system clock, read here (one Python call less per put).
        let at_us = at_us.unwrap_or_else(now_us);
        crate::commit::put_one(py, self, at_us, PutArgs::positional(text, fields)?)
    }

    /// Set the store's embedder (once): puts without a vector get theirs from it.
    fn set_embedder(&self, py: Python<'_>, embed: Py<PyAny>) -> PyResult<()> {
        if !embed.bind(py).is_callable() {
            return Err(crate::convert::type_error("embed", "a callable", embed.bind(py)));
        }
        self.embedder.set(py, embed).map_err(|_| {
            pyo3::exceptions::PyRuntimeError::new_err("embed: this store has an embedder already")
        })
    }

    /// Whether the store has an embedder.
    fn has_embedder(&self, py: Python<'_>) -> bool {
        self.embedder.get(py).is_some()
    }

    /// The dimension of the store's vectors; None while no memory has one.
    fn vector_dims(&self, py: Python<'_>) -> PyResult<Option<usize>> {
        self.run(py, |log| log.vector_dims())
    }

    /// Build the approximate vector index now if the store uses one, and wait for it
    /// (`MemoryStore.wait_for_vector_index`).
    fn wait_for_vector_index(&self, py: Python<'_>) -> PyResult<bool> {
        // The build takes minutes at a million vectors: Ctrl-C stops the wait (see `gate`), and
        // a log compaction meanwhile moves the wait to the new generation's index.
        let (waited, _) = self.across_swaps(py, |log| {
            match gate::stoppable(py, |between| Ok(log.wait_for_vector_graph_between(between))) {
                Ok(done) => done.map(Ok),
                Err(interrupted) => Ok(Err(interrupted)),
            }
        })?;
        waited
    }

    /// The `k` best memories for a query with their scores, best first (`MemoryStore.search`).
    #[pyo3(signature = (mode, text, vector, k, tier=None, kind=None, task=None, status=None, tags=None))]
    #[allow(clippy::too_many_arguments)] // the Python signature of search
    fn search(
        &self,
        py: Python<'_>,
        mode: &str,
        text: Option<&Bound<'_, PyAny>>,
        vector: Option<&Bound<'_, PyAny>>,
        k: &Bound<'_, PyAny>,
        tier: Option<&Bound<'_, PyAny>>,
        kind: Option<&Bound<'_, PyAny>>,
        task: Option<&Bound<'_, PyAny>>,
        status: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<(Memory, f64)>> {
        let mode = memcommit_core::search::Mode::parse(mode).ok_or_else(|| {
            InvalidValue::new_err(format!("mode: {mode:?} is not a mode; use 'hybrid', 'vector' or 'text'"))
        })?;
        let text = text.filter(|t| !t.is_none()).map(|t| get_str(t, "query")).transpose()?;
        let vector =
            vector.filter(|v| !v.is_none()).map(|v| crate::convert::get_vector(v, "query")).transpose()?;
        if let Some(v) = &vector {
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                return Err(InvalidValue::new_err(format!(
                    "query: value {i} is {} as a 32-bit float, not a finite number (vectors are \
                     stored as 32-bit floats, which reach about 3.4e38)",
                    v[i]
                )));
            }
            if v.is_empty() {
                return Err(InvalidValue::new_err("query: an empty vector"));
            }
        }
        let k = get_opt_u64(Some(k), "k")?.map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
        let filters = Filters::read(tier, kind, task, status, tags)?;
        let (hits, log) = self.run_on(py, |log| {
            log.search(&memcommit_core::SearchQuery {
                mode,
                text: text.as_deref(),
                vector: vector.as_deref(),
                k,
                filter: filters.query(None),
            })
        })?;
        let path = self.display_py(py);
        hits.iter().map(|(m, score)| Ok((memory_from_read(py, path, &log, m)?, *score as f64))).collect()
    }

    /// Memories by id (None where missing).
    fn get_many(&self, py: Python<'_>, ids: Vec<Bound<'_, PyAny>>) -> PyResult<Vec<Option<Memory>>> {
        // The place is named only on an error: formatting it for every id costs more than the check.
        let ids = ids
            .iter()
            .enumerate()
            .map(|(i, id)| get_str(id, "ids").map_err(|_| get_str(id, &format!("ids[{i}]")).unwrap_err()))
            .collect::<PyResult<Vec<String>>>()?;
        let (reads, log) = self.run_on(py, |log| log.get_many(&ids))?;
        let path = self.display_py(py);
        reads.iter().map(|r| r.as_ref().map(|m| memory_from_read(py, path, &log, m)).transpose()).collect()
    }

    /// One memory by id, or None.
    fn get(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<Option<Memory>> {
        let id = get_str(id, "id")?;
        let (mut reads, log) = self.run_on(py, |log| log.get_many(std::slice::from_ref(&id)))?;
        reads.pop().flatten().map(|m| memory_from_read(py, self.display_py(py), &log, &m)).transpose()
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
        let filters = Filters::read(tier, kind, task, status, tags)?;
        // A limit beyond what the address space can hold returns everything there is.
        let limit = get_opt_u64(limit, "limit")?.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        let (reads, log) = self.run_on(py, |log| log.find(&filters.query(limit)))?;
        let path = self.display_py(py);
        reads.iter().map(|m| memory_from_read(py, path, &log, m)).collect()
    }

    /// The records of one memory still in the log, oldest first.
    fn history(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<Vec<Record>> {
        let id = get_str(id, "id")?;
        let recs = self.run(py, |log| log.history(&id))?;
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
        let (recs, next) = self.run(py, |log| match after {
            // No LSN lies above the largest (and the core's scan would look from `after + 1`).
            u64::MAX => log.len().map(|_| (Vec::new(), start)),
            _ => log.read_records(after, start, max),
        })?;
        Ok((recs.into_iter().map(|b| record_from_bytes(py, b)).collect(), next))
    }

    /// Newest committed LSN.
    #[getter]
    fn lsn(&self, py: Python<'_>) -> PyResult<u64> {
        // `len` is the cheapest call that checks the log is open.
        self.run(py, |log| log.len().map(|_| log.lsn()))
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.run(py, |log| log.len())
    }

    fn contains(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<bool> {
        let id = text_str(id, "id")?;
        self.run(py, |log| log.contains(id))
    }

    fn is_task_finished(&self, py: Python<'_>, task: &Bound<'_, PyAny>) -> PyResult<bool> {
        let task = text_str(task, "task")?;
        self.run(py, |log| log.is_task_finished(task))
    }

    /// Facts about the log as a dict.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (i, log) = self.run_on(py, |log| log.info())?;
        let d = PyDict::new(py);
        d.set_item("path", log.path().map(|p| p.display().to_string()))?;
        d.set_item("records", i.records)?;
        d.set_item("lsn", i.lsn)?;
        d.set_item("bytes", i.bytes)?;
        d.set_item("generation", i.generation)?;
        d.set_item("store_id", i.store_id)?;
        d.set_item("memories", i.memories)?;
        d.set_item("durability", log.options().durability.name())?;
        d.set_item("read_only", log.options().read_only)?;
        d.set_item("recovered_bytes", i.recovered_bytes)?;
        d.set_item("fsyncs", i.fsyncs)?;
        d.set_item("index_file", i.index_file.to_string())?;
        Ok(d)
    }

    /// The current blake3 chain value, hex.
    fn chain_hex(&self, py: Python<'_>) -> PyResult<String> {
        let v = self.run(py, |log| log.chain_value())?;
        Ok(v.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Write a seal over every committed record; `key` is the secret of a keyed seal.
    #[pyo3(signature = (at_us, key=None))]
    fn seal(&self, py: Python<'_>, at_us: i64, key: Option<&[u8]>) -> PyResult<SealTuple> {
        let key = seal_key(key)?;
        let s = self.run(py, |log| log.seal(key.as_ref(), at_us))?;
        Ok(seal_tuple(&s))
    }

    /// The seals of the log, oldest first.
    fn seals(&self, py: Python<'_>) -> PyResult<Vec<SealTuple>> {
        Ok(self.run(py, |log| log.seals())?.iter().map(seal_tuple).collect())
    }

    /// Seal automatically every `every` records (None: stop).
    #[pyo3(signature = (every, key=None))]
    fn set_auto_seal(&self, py: Python<'_>, every: Option<u64>, key: Option<&[u8]>) -> PyResult<()> {
        let key = seal_key(key)?;
        let auto = every.map(|every| AutoSeal { every, key });
        self.run(py, |log| log.set_auto_seal(auto))
    }

    /// Recheck the newest seal from the one before it. Returns (the seal, the report).
    #[pyo3(signature = (key=None))]
    fn check_seal<'py>(
        &self,
        py: Python<'py>,
        key: Option<&[u8]>,
    ) -> PyResult<(SealTuple, Bound<'py, PyDict>)> {
        let key = seal_key(key)?;
        let (newest, done) = self.run(py, |log| log.check_newest_seal(key.as_ref()))?;
        Ok((seal_tuple(&newest), report(py, &done)?))
    }

    /// Recompute the chain over the whole log, checking every seal and every reference.
    /// `progress(bytes_done)` is called after each few MiB.
    #[pyo3(signature = (key=None, progress=None))]
    fn verify<'py>(
        &self,
        py: Python<'py>,
        key: Option<&[u8]>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let key = seal_key(key)?;
        let log = self.log().map_err(to_py)?;
        // Between chunks: the caller's callback, and a check for Ctrl-C (see `gate`).
        let mut failed: Option<PyErr> = None;
        let result = {
            let mut step = |n: u64| {
                gate::between_steps(&mut failed, |py| match &progress {
                    Some(cb) => cb.call1(py, (n,)).map(|_| ()),
                    None => Ok(()),
                })
            };
            let step: &mut (dyn FnMut(u64) -> memcommit_core::Result<()> + Send) = &mut step;
            gate::detach(py, || log.verify(key.as_ref(), Some(step)))
        };
        report(py, &gate::finish(failed, result)?)
    }

    /// Append the roles' entity changes ((key, state JSON bytes or None)) as one commit,
    /// without waiting for durability. Returns the log offset to pass to `wait_durable`.
    fn write_entities(
        &self,
        py: Python<'_>,
        at_us: i64,
        changes: Vec<(String, Option<Vec<u8>>)>,
    ) -> PyResult<u64> {
        let done = self.run(py, |log| {
            let refs: Vec<(&str, Option<&[u8]>)> =
                changes.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect();
            log.write_entities(&refs, at_us)
        })?;
        Ok(done.map_or(0, |d| d.end))
    }

    /// Wait until everything up to log offset `end` is as durable as the mode promises.
    fn wait_durable(&self, py: Python<'_>, end: u64) -> PyResult<()> {
        self.run(py, |log| log.wait_durable(end))
    }

    /// Raise WriterFailed if a write or fsync of this store has failed (the state in memory
    /// may then hold commits the disk does not), StoreClosed after close. Takes no lock of the
    /// log's and keeps the GIL: it is asked before every read of the roles' cache.
    fn check_not_failed(&self) -> PyResult<()> {
        self.log().and_then(|log| log.check_not_failed()).map_err(to_py)
    }

    /// A number that changes whenever an entity may have changed.
    fn entity_version(&self, py: Python<'_>) -> PyResult<u64> {
        self.run(py, |log| Ok(log.entity_version()))
    }

    /// Every live entity of the roles: (key, state JSON bytes), in key order.
    fn entities<'py>(&self, py: Python<'py>) -> PyResult<Vec<(String, Bound<'py, PyBytes>)>> {
        let all = self.run(py, |log| log.entities())?;
        Ok(all.into_iter().map(|(k, v)| (k, PyBytes::new(py, &v))).collect())
    }

    /// The state JSON bytes of entity `key`, or None if it is not live.
    fn entity<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let found = self.run(py, |log| log.entity(key.as_bytes()))?;
        Ok(found.map(|v| PyBytes::new(py, &v)))
    }

    /// The state JSON bytes of each of entities `keys` (None for one not live), in order.
    fn entities_of<'py>(
        &self,
        py: Python<'py>,
        keys: Vec<String>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        let found =
            self.run(py, |log| log.entities_of(&keys.iter().map(|k| k.as_bytes()).collect::<Vec<_>>()))?;
        Ok(found.into_iter().map(|v| v.map(|v| PyBytes::new(py, &v))).collect())
    }

    /// The keys of the live entities whose key starts with `prefix`, in key order: only those
    /// after `after` when it is given, and at most `limit` of them.
    #[pyo3(signature = (prefix="", after=None, limit=None))]
    fn entity_keys(
        &self,
        py: Python<'_>,
        prefix: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> PyResult<Vec<String>> {
        let after = after.map(str::as_bytes);
        self.run(py, |log| log.entity_keys_after(prefix.as_bytes(), after, limit.unwrap_or(usize::MAX)))
    }

    /// How many live entities have a key that starts with `prefix` (every one by default).
    #[pyo3(signature = (prefix=""))]
    fn entity_count(&self, py: Python<'_>, prefix: &str) -> PyResult<u64> {
        self.run(py, |log| log.entity_count(prefix.as_bytes()))
    }

    /// Compact the log (see memcommit.storage.compact). `before_swap(report)` must write the
    /// manifest durably; `step(name)` is called at each step of the protocol; `progress(done,
    /// total)` with bytes read. Returns (report, this same object, now on the new generation).
    #[pyo3(signature = (horizon, archived_older_than_us, kinds_after_us, ids, now_us, at_us, before_swap, step=None, progress=None))]
    #[allow(clippy::too_many_arguments)] // the parts of a compaction request
    fn compact<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
        horizon: Option<u64>,
        archived_older_than_us: Option<i64>,
        kinds_after_us: Vec<(String, i64)>,
        ids: Vec<String>,
        now_us: i64,
        at_us: i64,
        before_swap: Py<PyAny>,
        step: Option<Py<PyAny>>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<(Bound<'py, PyDict>, Bound<'py, NativeLog>)> {
        let this = slf.get();
        let retention = Retention { archived_older_than_us, kinds_after_us, ids, now_us };
        let log = this.log().map_err(to_py)?;
        this.ended.0.lock().running.push(std::thread::current().id());
        let mut hooks = PyHooks { before_swap, step, progress, failed: None };
        let result = gate::detach(py, || log.compact(horizon, &retention, at_us, &mut hooks));
        // The new generation takes the old one's place here, and calls that waited for it
        // (`across_swaps`) go on there. A compaction that failed wakes them too: they see no swap
        // and report what they got.
        // A store closed while it compacted closes the new generation too.
        if let Ok((_, reopened)) = &result {
            let mut slot = this.log.write();
            if slot.is_some() {
                *slot = Some(reopened.clone());
            } else {
                drop(slot);
                let _ = gate::detach(py, || reopened.close());
            }
        }
        {
            let mut c = this.ended.0.lock();
            let me = std::thread::current().id();
            if let Some(i) = c.running.iter().position(|t| *t == me) {
                c.running.swap_remove(i);
            }
            c.ended += 1;
        }
        this.ended.1.notify_all();
        if let Some(e) = hooks.failed.take() {
            return Err(e);
        }
        let (done, _) = result.map_err(to_py)?;
        Ok((compacted_dict(py, &done)?, slf.clone()))
    }

    /// What `compact` with these arguments would do, writing nothing (on a writer or a
    /// read-only reader): a dict of horizon, before, after, bytes_before, bytes_after and
    /// purged. `progress(done, total)` with bytes read.
    #[allow(clippy::too_many_arguments)] // the parts of a compaction request
    #[pyo3(signature = (horizon, archived_older_than_us, kinds_after_us, ids, now_us, progress=None))]
    fn compaction_plan<'py>(
        &self,
        py: Python<'py>,
        horizon: Option<u64>,
        archived_older_than_us: Option<i64>,
        kinds_after_us: Vec<(String, i64)>,
        ids: Vec<String>,
        now_us: i64,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let retention = Retention { archived_older_than_us, kinds_after_us, ids, now_us };
        let log = self.log().map_err(to_py)?;
        let mut hooks = PyHooks { before_swap: py.None(), step: None, progress, failed: None };
        let result = gate::detach(py, || log.compaction_plan(horizon, &retention, &mut hooks));
        if let Some(e) = hooks.failed.take() {
            return Err(e);
        }
        plan_dict(py, &result.map_err(to_py)?)
    }

    /// The new generation a compaction would write, made in RAM and returned instead of
    /// replacing this log (an engine that keeps its records in a database swaps them itself):
    /// the report `compact` gives, and the new generation's bytes (its header first). With
    /// `at_us` None, without the seal (`Log::compacted_copy`).
    #[allow(clippy::too_many_arguments)] // the parts of a compaction request
    #[pyo3(signature = (horizon, archived_older_than_us, kinds_after_us, ids, now_us, at_us))]
    fn compacted_copy<'py>(
        &self,
        py: Python<'py>,
        horizon: Option<u64>,
        archived_older_than_us: Option<i64>,
        kinds_after_us: Vec<(String, i64)>,
        ids: Vec<String>,
        now_us: i64,
        at_us: Option<i64>,
    ) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyBytes>)> {
        let retention = Retention { archived_older_than_us, kinds_after_us, ids, now_us };
        let log = self.log().map_err(to_py)?;
        let mut hooks = PyHooks { before_swap: py.None(), step: None, progress: None, failed: None };
        let (done, bytes) =
            gate::detach(py, || log.compacted_copy(horizon, &retention, at_us, &mut hooks)).map_err(to_py)?;
        Ok((compacted_dict(py, &done)?, PyBytes::new(py, &bytes)))
    }

    /// The state as a snapshot's JSON text.
    fn snapshot_json(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, |log| log.snapshot_json())
    }

    /// Add ids to the purged set (from the compaction manifest).
    fn add_purged(&self, py: Python<'_>, ids: Vec<String>) -> PyResult<()> {
        self.run(py, |log| {
            log.add_purged(&ids);
            Ok(())
        })
    }

    /// Let puts name sources the store does not hold yet (`on`: an import replaying another
    /// store's log), or check them again.
    fn trust_sources(&self, py: Python<'_>, on: bool) -> PyResult<()> {
        self.run(py, |log| log.len().map(|_| log.trust_sources(on)))
    }

    /// Whether log compaction purged `id`.
    fn is_purged(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<bool> {
        let id = text_str(id, "id")?;
        self.run(py, |log| log.len().map(|_| log.is_purged(id)))
    }

    /// Whether log compaction replaced the file at this log's path (a reader must reopen).
    fn replaced_on_disk(&self, py: Python<'_>) -> PyResult<bool> {
        self.run(py, |log| log.replaced_on_disk())
    }

    /// Catch a reader up. Returns how many records were applied.
    fn refresh(&self, py: Python<'_>) -> PyResult<u64> {
        // A reader far behind replays a long backlog: Ctrl-C stops that at a whole commit (see
        // `gate`). Only a read-only log refreshes, and no compaction swaps one under it.
        let log = self.log().map_err(to_py)?;
        gate::stoppable(py, |between| log.refresh_between(between))
    }

    /// fsync everything written.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |log| log.flush())
    }

    /// Sync the log (in every durability mode), release the file and let go of the log: its
    /// descriptor is closed when this returns (or, if another thread's call is still running
    /// on it, when that call ends). A log compaction running on another thread is waited for:
    /// it closes the generation it made, so the file and its lock are released when this
    /// returns. Safe to call twice.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(log) = self.log.write().take() else { return Ok(()) };
        release(py, || {
            let closed = log.close();
            // Dropped here, without the GIL: the last handle's drop closes the file.
            drop(log);
            let me = std::thread::current().id();
            let mut c = self.ended.0.lock();
            // (A close from inside a compaction's own callback cannot wait for it.)
            while c.running.iter().any(|t| *t != me) {
                self.ended.1.wait(&mut c);
            }
            closed
        })
    }

    /// Whether the log is closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        gate::detach(py, || self.log.read().as_ref().is_none_or(|log| log.is_closed()))
    }

    /// Bytes of heap the index holds.
    fn index_heap_bytes(&self, py: Python<'_>) -> PyResult<usize> {
        self.run(py, |log| Ok(log.index_heap_bytes()))
    }
}

/// The log compactions of a store: the threads running one, and how many have ended.
#[derive(Default)]
struct Compactions {
    running: Vec<std::thread::ThreadId>,
    ended: u64,
}

/// Microseconds since the Unix epoch from the system clock.
fn now_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// Read a log file without opening a store or changing it: how far it is good and where it is
/// damaged.
#[pyfunction]
pub fn inspect_log<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
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

/// Check the seals of the log file at `path` against its bytes without replaying it (what
/// `memcommit verify` falls back on for a log an open refuses): the report `verify` gives,
/// or `SealMismatch` naming the first seal the chain disagrees with.
#[pyfunction]
#[pyo3(signature = (path, key=None))]
pub fn check_log_seals<'py>(
    py: Python<'py>,
    path: PathBuf,
    key: Option<&[u8]>,
) -> PyResult<Bound<'py, PyDict>> {
    let key = seal_key(key)?;
    let done = release(py, || memcommit_core::check_file_seals(&path, key.as_ref()))?;
    report(py, &done)
}

/// Cut a log file at `good_end` and fsync it (after a backup; used by `memcommit repair`);
/// with `expect_len`, only if the file still has that length, checked under the writer's lock.
#[pyfunction]
#[pyo3(signature = (path, good_end, expect_len=None))]
pub fn truncate_log(py: Python<'_>, path: PathBuf, good_end: u64, expect_len: Option<u64>) -> PyResult<()> {
    release(py, || match expect_len {
        Some(len) => memcommit_core::truncate_expecting(&path, good_end, len),
        None => memcommit_core::truncate(&path, good_end),
    })
}

pub static IDS: memcommit_core::ids::IdGenerator = memcommit_core::ids::IdGenerator::new();

/// `n` new memory ids for a clock reading of `ms`, in increasing order.
#[pyfunction]
pub fn new_ids(ms: u64, n: usize) -> Vec<String> {
    IDS.next_ids(ms, n)
}

/// A seal as Python receives it: (lsn, record_lsn, offset, at_us, keyed, hash hex, chain hex).
type SealTuple = (u64, u64, u64, i64, bool, String, String);

fn seal_tuple(s: &SealEntry) -> SealTuple {
    (s.lsn, s.record_lsn, s.offset, s.at, s.keyed, seal::hex(s.hash()), seal::hex(&s.chain))
}

/// The seal key for a secret (None: unkeyed).
fn seal_key(secret: Option<&[u8]>) -> PyResult<Option<seal::SealKey>> {
    match secret {
        Some([]) => Err(InvalidValue::new_err(
            "key: the secret is empty; pass at least one byte (32 random bytes is best)",
        )),
        Some(s) => Ok(Some(seal::derive_key(s))),
        None => Ok(None),
    }
}

fn report<'py>(py: Python<'py>, done: &Checked) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("seals_checked", done.seals_checked)?;
    d.set_item("keyed_unchecked", done.keyed_unchecked)?;
    d.set_item("records_checked", done.records)?;
    d.set_item("bytes_checked", done.bytes)?;
    d.set_item("lsn", done.lsn)?;
    d.set_item("chain", seal::hex(&done.value))?;
    d.set_item("seals", done.seals.iter().map(seal_tuple).collect::<Vec<_>>())?;
    Ok(d)
}

/// The compaction protocol's callbacks into Python. A Python error stops the compaction and
/// is raised as itself once the GIL is back.
struct PyHooks {
    before_swap: Py<PyAny>,
    step: Option<Py<PyAny>>,
    progress: Option<Py<PyAny>>,
    failed: Option<PyErr>,
}

impl PyHooks {
    fn call(&mut self, f: impl FnOnce(Python<'_>) -> PyResult<()>) -> memcommit_core::Result<()> {
        gate::between_steps(&mut self.failed, f)
    }
}

impl Hooks for PyHooks {
    /// Between chunks: the caller's callback, and a check for Ctrl-C (see `gate`).
    fn progress(&mut self, done: u64, total: u64) -> memcommit_core::Result<()> {
        let p = Python::attach(|py| self.progress.as_ref().map(|p| p.clone_ref(py)));
        self.call(|py| match p {
            Some(p) => p.call1(py, (done, total)).map(|_| ()),
            None => Ok(()),
        })
    }

    fn before_swap(&mut self, done: &Compacted) -> memcommit_core::Result<()> {
        let f = Python::attach(|py| self.before_swap.clone_ref(py));
        self.call(|py| f.call1(py, (compacted_dict(py, done)?,)).map(|_| ()))
    }

    fn step(&mut self, name: &str) -> memcommit_core::Result<()> {
        match &self.step {
            Some(s) => {
                let s = Python::attach(|py| s.clone_ref(py));
                self.call(|py| s.call1(py, (name,)).map(|_| ()))
            }
            None => Ok(()),
        }
    }
}

fn plan_dict<'py>(py: Python<'py>, p: &Plan) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("horizon", p.horizon)?;
    d.set_item("before", p.before)?;
    d.set_item("after", p.after)?;
    d.set_item("bytes_before", p.bytes_before)?;
    d.set_item("bytes_after", p.bytes_after)?;
    d.set_item("purged", &p.purged)?;
    Ok(d)
}

fn compacted_dict<'py>(py: Python<'py>, c: &Compacted) -> PyResult<Bound<'py, PyDict>> {
    let d = plan_dict(py, &c.plan)?;
    d.set_item("old_generation", c.old_generation)?;
    d.set_item("generation", c.generation)?;
    d.set_item("old_lsn", c.old_lsn)?;
    d.set_item("old_chain", seal::hex(&c.old_chain))?;
    d.set_item("old_seals", c.old_seals.iter().map(seal_tuple).collect::<Vec<_>>())?;
    d.set_item("seal", c.seal.as_ref().map(seal_tuple))?;
    Ok(d)
}
