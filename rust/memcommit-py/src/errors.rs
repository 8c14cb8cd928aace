//! One mapping from core errors to the exception classes of `memcommit.errors`.

use memcommit_core::error::{Error, Rejection};
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyPermissionError};
use pyo3::prelude::*;
use pyo3::types::PyString;

pyo3::import_exception!(memcommit.errors, Rejected);
pyo3::import_exception!(memcommit.errors, StoreLocked);
pyo3::import_exception!(memcommit.errors, StoreClosed);
pyo3::import_exception!(memcommit.errors, ReadOnlyStore);
pyo3::import_exception!(memcommit.errors, WriterFailed);
pyo3::import_exception!(memcommit.errors, StorageError);
pyo3::import_exception!(memcommit.errors, CorruptLog);
pyo3::import_exception!(memcommit.errors, SealMismatch);
pyo3::import_exception!(memcommit.errors, ForgedReference);
pyo3::import_exception!(memcommit.errors, SnapshotMismatch);
pyo3::import_exception!(memcommit.errors, InvalidValue);
pyo3::import_exception!(memcommit.errors, InvalidType);

/// The OS errors that mean the disk failed, filled up or went read-only: an I/O error with one
/// of them is a `StorageError` (`memcommit.files` raises it for the same list, `_native.STORAGE_ERRNOS`).
pub const STORAGE_ERRNOS: [i32; 5] = [libc::EIO, libc::ENOSPC, libc::EDQUOT, libc::EROFS, libc::EFBIG];

/// Map a core error to the Python exception users catch. Every variant has its own arm.
pub fn to_py(err: Error) -> PyErr {
    let msg = err.to_string();
    match err {
        Error::Io { source, path, .. } => match source.raw_os_error() {
            // The disk failed, filled up or went read-only: a memcommit error and an OSError.
            Some(code) if STORAGE_ERRNOS.contains(&code) => StorageError::new_err((msg, path, code)),
            Some(code) => PyOSError::new_err((code, msg, path)),
            // No errno: pick the OSError subclass from the kind of error.
            None => match source.kind() {
                std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
                std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
                _ => PyOSError::new_err(msg),
            },
        },
        Error::WriterFailed { path, errno, .. } => WriterFailed::new_err((msg, path, errno)),
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
        Error::Invalid { .. } => InvalidValue::new_err(msg),
        Error::Closed { .. } => StoreClosed::new_err(msg),
        Error::ReadOnly { .. } => ReadOnlyStore::new_err(msg),
    }
}

fn rejected(r: Rejection) -> PyErr {
    use memcommit_core::GuardValue as V;
    Python::attach(|py| {
        // The guard's values in their natural types: LSNs as int, existence as bool (a purged
        // memory does not exist), status and tier by name.
        let value = |v: V| -> PyResult<Py<PyAny>> {
            Ok(match v {
                V::Lsn(n) => n.into_pyobject(py)?.into_any().unbind(),
                V::Exists(b) => pyo3::types::PyBool::new(py, b).to_owned().into_any().unbind(),
                V::Purged => pyo3::types::PyBool::new(py, false).to_owned().into_any().unbind(),
                V::Status(s) => PyString::new(py, s.name()).into_any().unbind(),
                V::Tier(t) => PyString::new(py, t.name()).into_any().unbind(),
            })
        };
        let guard = (|| {
            let cls = py.import("memcommit.errors")?.getattr("Guard")?;
            cls.call1((r.kind.name(), r.id.clone(), value(r.expected)?, value(r.actual)?))
        })();
        match guard {
            Ok(g) => Rejected::new_err((r.reason, g.unbind())),
            Err(e) => e,
        }
    })
}
