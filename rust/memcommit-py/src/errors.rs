//! One mapping from core errors to the exception classes of `memcommit.errors`, and the one
//! place that releases the GIL for core work.

use memcommit_core::error::{Error, Rejection};
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyPermissionError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;

pyo3::import_exception!(memcommit.errors, Rejected);
pyo3::import_exception!(memcommit.errors, StoreLocked);
pyo3::import_exception!(memcommit.errors, StoreClosed);
pyo3::import_exception!(memcommit.errors, ReadOnlyStore);
pyo3::import_exception!(memcommit.errors, WriterFailed);
pyo3::import_exception!(memcommit.errors, CorruptLog);
pyo3::import_exception!(memcommit.errors, SealMismatch);
pyo3::import_exception!(memcommit.errors, ForgedReference);
pyo3::import_exception!(memcommit.errors, SnapshotMismatch);

/// Map a core error to the Python exception users catch. Every variant has its own arm.
pub fn to_py(err: Error) -> PyErr {
    let msg = err.to_string();
    match err {
        Error::Io { source, path, .. } => match source.raw_os_error() {
            Some(code) => PyOSError::new_err((code, msg, path)),
            // No errno: pick the OSError subclass from the kind of error.
            None => match source.kind() {
                std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
                std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
                _ => PyOSError::new_err(msg),
            },
        },
        Error::WriterFailed { .. } => WriterFailed::new_err(msg),
        Error::Locked { path } => StoreLocked::new_err((msg, path)),
        Error::Corrupt { path, offset, lsn, .. } => CorruptLog::new_err((msg, path, offset, lsn)),
        Error::SealMismatch { path, lsn, offset, after_lsn, .. } => {
            SealMismatch::new_err((msg, path, lsn, offset, after_lsn))
        }
        Error::ForgedReference { path, id, by, lsn, offset } => {
            ForgedReference::new_err((msg, path, id, by, lsn, offset))
        }
        Error::SnapshotMismatch { .. } => SnapshotMismatch::new_err(msg),
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
            Ok(g) => Rejected::new_err((reason(&r), g.unbind())),
            Err(e) => e,
        }
    })
}

/// The sentence a refused commit raises: what the guard asked of the memory and what it
/// found, in words (the core's reasons for a purged memory, an unknown id and `expect_lsn`
/// already read so; for the other guards it composes "expected exists exists").
fn reason(r: &Rejection) -> String {
    use memcommit_core::GuardKind as K;
    let Some(id) = &r.id else { return r.reason.clone() };
    let (want, have) = (r.expected.as_str(), r.actual.as_str());
    let what = match r.kind {
        K::Exists if have == "purged" => return r.reason.clone(),
        K::Exists if want == "exists" => {
            "the commit expects it to exist, but the store has no memory with that id".to_string()
        }
        K::Exists => "the commit expects no memory with that id, but one exists".to_string(),
        K::Status => format!("the commit expects status {want}, but it is {have}"),
        K::Tier => format!("the commit expects tier {want}, but it is in tier {have}"),
        K::Lsn => format!(
            "the commit expects its newest record at LSN {want}, but that is at LSN {have} \
             (another commit changed it: read it again and retry)"
        ),
        K::ExpectLsn | K::UnknownId => return r.reason.clone(),
    };
    format!("guard failed on memory {id:?}: {what}; nothing was written")
}

/// Run core work with the GIL released, then map its error.
pub fn release<T: Send>(py: Python<'_>, f: impl FnOnce() -> memcommit_core::Result<T> + Send) -> PyResult<T> {
    py.detach(f).map_err(to_py)
}
