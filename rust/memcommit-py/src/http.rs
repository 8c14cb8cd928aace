//! `HttpClient`: `memcommit-wire`'s keep-alive client for `RemoteStore`, its I/O done with
//! the GIL released. A failure raises `memcommit.remote.pipeline.NotSent` (no connection
//! could be made) or `MaybeSent` (the request may have reached the server). A signal that
//! interrupts a wait runs the process's signal handlers; what one raises (Ctrl-C's
//! KeyboardInterrupt) ends the request and is raised in its place.

use std::path::PathBuf;
use std::time::Duration;

use memcommit_wire::{Client, Endpoint, Failure};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::InvalidValue;
use crate::gate;

/// A pool of keep-alive HTTP/1.1 connections to one server, over TCP or a Unix socket.
#[pyclass(module = "memcommit._native", frozen)]
pub struct HttpClient {
    client: Client,
}

#[pymethods]
impl HttpClient {
    /// A client of `host`:`port` over TCP, or of the Unix socket at `unix_path`, sending
    /// `headers` with every request.
    #[new]
    #[pyo3(signature = (*, host=None, port=0, unix_path=None, headers=Vec::new()))]
    fn new(
        host: Option<String>,
        port: u16,
        unix_path: Option<PathBuf>,
        headers: Vec<(String, String)>,
    ) -> PyResult<Self> {
        let endpoint = match (host, unix_path) {
            (Some(host), None) => Endpoint::Tcp { host, port },
            (None, Some(path)) => Endpoint::Unix(path),
            _ => return Err(InvalidValue::new_err("HttpClient: give either host and port or unix_path")),
        };
        Ok(HttpClient { client: Client::new(endpoint, &headers) })
    }

    /// Send one request; return its status, its headers (a dict, names lowercased) and its
    /// body. `timeout` (seconds) bounds connecting and each read and write.
    #[pyo3(signature = (method, path, body, timeout, headers=Vec::new()))]
    fn request<'py>(
        &self,
        py: Python<'py>,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        timeout: f64,
        headers: Vec<(String, String)>,
    ) -> PyResult<(u16, Bound<'py, PyDict>, Bound<'py, PyBytes>)> {
        let timeout = Duration::try_from_secs_f64(timeout)
            .map_err(|_| InvalidValue::new_err(format!("timeout: {timeout} is not a number of seconds")))?;
        let body = body.unwrap_or_default();
        let mut raised = None;
        let answer = gate::detach(py, || {
            let extra: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            self.client.request(method, path, &extra, body, timeout, &mut || {
                gate::between_steps(&mut raised, |_| Ok(())).is_ok()
            })
        });
        let answer = match (answer, raised) {
            (Ok(a), _) => a,
            // What a signal handler raised (KeyboardInterrupt), in place of the request.
            (Err(Failure::Stopped(_)), Some(e)) => return Err(e),
            (Err(failure), _) => return Err(raise(py, failure)),
        };
        let dict = PyDict::new(py);
        for (name, value) in &answer.headers {
            dict.set_item(name, value)?;
        }
        Ok((answer.status, dict, PyBytes::new(py, &answer.body)))
    }

    /// Whether an idle connection that server start `boot` last answered on is still open.
    fn hears(&self, boot: &str) -> bool {
        self.client.hears(boot)
    }

    /// Close every connection; a request waiting on one (a long poll) fails at once.
    fn close(&self) {
        self.client.close();
    }
}

fn raise(py: Python<'_>, failure: Failure) -> PyErr {
    let (name, message) = match failure {
        Failure::NotSent(m) => ("NotSent", m),
        Failure::MaybeSent(m) | Failure::Stopped(m) => ("MaybeSent", m),
    };
    match py
        .import("memcommit.remote.pipeline")
        .and_then(|m| m.getattr(name))
        .and_then(|c| c.call1((message,)))
    {
        Ok(e) => PyErr::from_value(e),
        Err(e) => e,
    }
}
