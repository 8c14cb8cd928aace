//! The one gate between Python and the core's work: the GIL is released here and nowhere
//! else (clippy's `disallowed_methods` keeps `Python::detach` out of every other file), core
//! errors are mapped on the way out (`errors::to_py`), and long work that reports progress
//! takes the GIL back between its steps only to run the caller's callback and check for
//! signals, so Ctrl-C stops a long verify, compaction, open or vector-index wait.
//! (`NativeLog::across_swaps` adds the retry across a log generation swap on top of `detach`;
//! no other code retries.)

use std::time::{Duration, Instant};

use pyo3::prelude::*;

use crate::errors::to_py;

/// Run work with the GIL released.
#[allow(clippy::disallowed_methods)] // the one place the GIL is released
pub fn detach<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
    py.detach(f)
}

/// Run core work with the GIL released, then map its error.
pub fn release<T: Send>(py: Python<'_>, f: impl FnOnce() -> memcommit_core::Result<T> + Send) -> PyResult<T> {
    detach(py, f).map_err(to_py)
}

/// Between two steps of long core work running without the GIL: take the GIL for a moment,
/// check for signals (a pending Ctrl-C raises KeyboardInterrupt) and run `f` (the caller's
/// progress callback). The first Python error is kept in `failed`, for the caller to raise in
/// place of the core's, and the work is told to stop.
pub fn between_steps(
    failed: &mut Option<PyErr>,
    f: impl FnOnce(Python<'_>) -> PyResult<()>,
) -> memcommit_core::Result<()> {
    if failed.is_some() {
        return Err(stopped("an earlier step failed".into()));
    }
    match Python::attach(|py| py.check_signals().and_then(|()| f(py))) {
        Ok(()) => Ok(()),
        Err(e) => {
            let message = Python::attach(|py| e.value(py).to_string());
            *failed = Some(e);
            Err(stopped(message))
        }
    }
}

/// How often `stoppable` work checks for signals: often enough that Ctrl-C feels immediate,
/// seldom enough that waiting for the GIL (up to Python's switch interval, 5 ms, when other
/// threads run Python) costs the work little.
const CHECK_EVERY: Duration = Duration::from_millis(50);

/// Run core work with the GIL released, handing it a `between` to call between its steps,
/// which checks for signals every [`CHECK_EVERY`] (a pending Ctrl-C stops the work there and
/// is raised in place of its result): `detach`, `between_steps` and `finish` together, for
/// work with no progress callback. Work shorter than that (most refreshes) never takes the
/// GIL; off the main thread, where Python runs no signal handler, `between` takes it once, to
/// learn so, and never again.
pub fn stoppable<T: Send>(
    py: Python<'_>,
    work: impl FnOnce(&mut (dyn FnMut() -> memcommit_core::Result<()> + Send)) -> memcommit_core::Result<T> + Send,
) -> PyResult<T> {
    let mut failed: Option<PyErr> = None;
    let mut checked = Instant::now();
    let mut main: Option<bool> = None;
    let result = {
        let mut between = || {
            if main == Some(false) || checked.elapsed() < CHECK_EVERY {
                return Ok(());
            }
            checked = Instant::now();
            // The signal check first, then (once) whether there is any to make on this thread.
            between_steps(&mut failed, |py| {
                if main.is_none() {
                    main = Some(on_main_thread(py)?);
                }
                Ok(())
            })
        };
        detach(py, || work(&mut between))
    };
    finish(failed, result)
}

/// Whether this is Python's main thread, the one that runs signal handlers.
fn on_main_thread(py: Python<'_>) -> PyResult<bool> {
    let threading = py.import("threading")?;
    let main = threading.call_method0("main_thread")?;
    Ok(main.is(&threading.call_method0("current_thread")?))
}

/// The core error that stops work a Python error interrupted (replaced by that error).
fn stopped(message: String) -> memcommit_core::Error {
    memcommit_core::Error::Invalid { field: "interrupted", message }
}

/// The result of work `between_steps` may have stopped: the Python error that stopped it,
/// else the work's own result.
pub fn finish<T>(failed: Option<PyErr>, result: memcommit_core::Result<T>) -> PyResult<T> {
    match failed {
        Some(e) => Err(e),
        None => result.map_err(to_py),
    }
}
