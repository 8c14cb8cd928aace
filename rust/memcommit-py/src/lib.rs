//! The PyO3 binding that builds `memcommit._native`.
//!
//! Thin by design: Python inputs are read into core values (`convert`), the GIL is released
//! for the core's work (I/O, fsync, replay, hashing) in one gate (`gate`), and core errors are
//! mapped to the exception classes of `memcommit.errors` in one place (`errors`).

mod bulk;
mod commit;
mod convert;
mod errors;
mod gate;
mod http;
mod store;
mod values;

use pyo3::prelude::*;

/// The native half of memcommit. Users import `memcommit`, not this module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<store::NativeLog>()?;
    m.add_class::<commit::Commit>()?;
    m.add_class::<values::Memory>()?;
    m.add_class::<values::Record>()?;
    m.add_class::<http::HttpClient>()?;
    m.add_function(wrap_pyfunction!(store::inspect_log, m)?)?;
    m.add_function(wrap_pyfunction!(store::check_log_seals, m)?)?;
    m.add_function(wrap_pyfunction!(store::truncate_log, m)?)?;
    m.add_function(wrap_pyfunction!(store::new_ids, m)?)?;
    m.add("FORMAT_VERSION", memcommit_core::format::FORMAT_VERSION)?;
    m.add("STORAGE_ERRNOS", errors::STORAGE_ERRNOS.to_vec())?;
    Ok(())
}
