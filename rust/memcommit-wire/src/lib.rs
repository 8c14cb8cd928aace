//! The client end of memcommit's wire: HTTP/1.1 keep-alive connections to `memcommit serve`,
//! over TCP or a Unix domain socket.
//!
//! A [`Client`] keeps a pool of connections to one server: a request takes an idle one (or
//! connects), writes the whole request in one write, reads the answer, and puts the
//! connection back unless the server said it will close it. An idle connection the server
//! has closed meanwhile (it stopped or restarted, or its keep-alive ran out) is dropped
//! before a request would be written to it, so a request after a server restart goes over a
//! new connection instead of failing on the old one. Each connection remembers the
//! server start (`X-Memcommit-Boot`) that last answered on it, so the caller can ask whether
//! that server process is still running ([`Client::hears`]): a new process cannot hold its
//! predecessor's connections.
//!
//! What a failure means for a commit is the caller's question, so failures say only whether
//! the request surely did not reach the server ([`Failure::NotSent`]: no connection could be
//! made, or the request could not be written whole, so the server cannot have read it) or may
//! have ([`Failure::MaybeSent`]: the connection failed after the whole request was written).
//!
//! A read or a connect a signal interrupts (EINTR) asks the caller's `on_signal` whether to go
//! on, as Python's own I/O does (PEP 475): the binding runs the process's signal handlers
//! there, so Ctrl-C stops a long poll ([`Failure::Stopped`]) and any other signal is waited
//! through.
//!
//! This is the whole of the protocol the client needs: a request with a `Content-Length`
//! body, and an answer framed by `Content-Length`, `Transfer-Encoding: chunked`, or the end of
//! the connection. Answer heads are parsed by `httparse`.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The most headers an answer may carry.
const MAX_HEADERS: usize = 64;
/// The largest answer head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// The header naming the server start that answered.
const BOOT: &str = "x-memcommit-boot";

/// Where the server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A TCP address.
    Tcp {
        /// The host name or address.
        host: String,
        /// The port.
        port: u16,
    },
    /// A Unix domain socket's path.
    Unix(PathBuf),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp { host, port } => write!(f, "{host}:{port}"),
            Endpoint::Unix(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Why a request has no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No connection could be made, or the request could not be written whole: the server
    /// surely did not read it (it acts on a whole request only).
    NotSent(String),
    /// The connection failed after the request was written: it may have reached the server.
    MaybeSent(String),
    /// The caller's `on_signal` said to stop: the request may have reached the server.
    Stopped(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::NotSent(why) | Failure::MaybeSent(why) | Failure::Stopped(why) => f.write_str(why),
        }
    }
}

/// An answer: its status, its headers (names lowercased, in order) and its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Answer {
    /// The value of header `name` (lowercase), if the answer has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn set_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(timeout).and_then(|()| s.set_write_timeout(timeout)),
            Stream::Unix(s) => s.set_read_timeout(timeout).and_then(|()| s.set_write_timeout(timeout)),
        }
    }

    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    fn shutdown(&self) {
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One keep-alive connection: its stream, bytes read past the last answer (none, with a
/// well-behaved server) and the server start that last answered on it.
struct Connection {
    stream: Stream,
    /// A second handle on the stream, made once when it connects, which [`Client::close`]
    /// shuts down while a request waits on it (None if the handle could not be made).
    shutter: Option<Arc<Stream>>,
    /// The read and write timeout the stream has now, set again only when a request asks
    /// for another.
    timeout: Option<Duration>,
    buf: Vec<u8>,
    heard: Option<String>,
}

impl Connection {
    fn new(stream: Stream) -> Connection {
        let shutter = stream.try_clone().ok().map(Arc::new);
        Connection { stream, shutter, timeout: None, buf: Vec::new(), heard: None }
    }

    fn set_timeout(&mut self, timeout: Duration) -> io::Result<()> {
        if self.timeout != Some(timeout) {
            self.stream.set_timeout(Some(timeout))?;
            self.timeout = Some(timeout);
        }
        Ok(())
    }
}

/// A pool of keep-alive connections to one server. See the crate documentation.
pub struct Client {
    endpoint: Endpoint,
    /// The request head up to its headers: the `Host` line and the fixed headers.
    fixed: String,
    idle: Mutex<Vec<Connection>>,
    /// A handle on the stream of each request in flight, so `close` can end them.
    busy: Mutex<HashMap<u64, Arc<Stream>>>,
    next: AtomicU64,
    closed: AtomicBool,
}

impl Client {
    /// A client of the server at `endpoint`, sending `headers` with every request (the
    /// `Host` header is `host` for TCP and `localhost` for a Unix socket).
    pub fn new(endpoint: Endpoint, headers: &[(String, String)]) -> Client {
        let host = match &endpoint {
            Endpoint::Tcp { host, port } if host.contains(':') => format!("[{host}]:{port}"),
            Endpoint::Tcp { host, port } => format!("{host}:{port}"),
            Endpoint::Unix(_) => "localhost".to_owned(),
        };
        let mut fixed = format!("Host: {host}\r\n");
        for (name, value) in headers {
            fixed.push_str(name);
            fixed.push_str(": ");
            fixed.push_str(value);
            fixed.push_str("\r\n");
        }
        Client {
            endpoint,
            fixed,
            idle: Mutex::new(Vec::new()),
            busy: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        }
    }

    /// The server's address.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn connect(&self, timeout: Duration, on_signal: OnSignal<'_>) -> Result<Connection, Failure> {
        let not_sent = |e: io::Error| Failure::NotSent(format!("{}: {e}", self.endpoint));
        let stream = match &self.endpoint {
            // A connect a signal interrupted may go on in the background: start afresh.
            Endpoint::Unix(path) => Stream::Unix(loop {
                match UnixStream::connect(path) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                        if !on_signal() {
                            return Err(Failure::Stopped(format!("{}: {STOPPED}", self.endpoint)));
                        }
                    }
                    made => break made.map_err(not_sent)?,
                }
            }),
            Endpoint::Tcp { host, port } => {
                let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
                let mut made = None;
                for addr in (host.as_str(), *port).to_socket_addrs().map_err(not_sent)? {
                    match TcpStream::connect_timeout(&addr, timeout) {
                        Ok(s) => {
                            made = Some(s);
                            break;
                        }
                        Err(e) => last = e,
                    }
                }
                let s = made.ok_or_else(|| not_sent(last))?;
                s.set_nodelay(true).map_err(not_sent)?;
                Stream::Tcp(s)
            }
        };
        Ok(Connection::new(stream))
    }

    /// Send one request and read its answer.
    ///
    /// `headers` are sent after the client's own; `timeout` bounds connecting and each read
    /// and write. `on_signal` is asked whether to go on each time a signal interrupts a read
    /// or a connect; false stops the request ([`Failure::Stopped`]).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        timeout: Duration,
        on_signal: OnSignal<'_>,
    ) -> Result<Answer, Failure> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Failure::NotSent("the client is closed".to_owned()));
        }
        let mut conn = match self.take_idle() {
            Some(c) => c,
            None => self.connect(timeout, &mut *on_signal)?,
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if let Some(handle) = &conn.shutter {
            self.busy.lock().unwrap_or_else(|e| e.into_inner()).insert(id, Arc::clone(handle));
        }
        let outcome = conn
            .set_timeout(timeout)
            .map_err(Exchange::Unwritten)
            .and_then(|()| self.exchange(&mut conn, method, path, headers, body, on_signal));
        self.busy.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        let (answer, keep) = outcome.map_err(|e| match e {
            Exchange::Unwritten(e) => Failure::NotSent(format!(
                "{}: the request could not be written whole, so the server did not read it: {e}",
                self.endpoint
            )),
            Exchange::Unanswered(e) => {
                let why = format!("{}: {e}", self.endpoint);
                if e.get_ref().is_some_and(|inner| inner.is::<StoppedBySignal>()) {
                    Failure::Stopped(why)
                } else {
                    Failure::MaybeSent(why)
                }
            }
        })?;
        conn.heard = answer.header(BOOT).filter(|b| !b.is_empty()).map(str::to_owned);
        if keep && !self.closed.load(Ordering::Acquire) {
            self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(conn);
        }
        Ok(answer)
    }

    /// An idle connection the server has not closed, if the pool has one; the closed ones
    /// it finds are dropped.
    ///
    /// An idle HTTP/1.1 connection receives nothing until it sends a request, so one that is
    /// readable holds an end of stream (the server stopped, or its keep-alive ran out) or bytes
    /// no request asked for. A request written to it would be lost, and lost after it was
    /// written: reported as perhaps sent, which makes a commit resent as one that may have
    /// reached the old server, and so of unknown outcome once a new server answers.
    fn take_idle(&self) -> Option<Connection> {
        loop {
            let conn = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()?;
            if !readable(&conn.stream) {
                return Some(conn);
            }
        }
    }

    /// Write the request on `conn` and read its answer. The server acts only on a whole
    /// request, so a failure before all of it was written ([`Exchange::Unwritten`]) means it
    /// was not read.
    fn exchange(
        &self,
        conn: &mut Connection,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        on_signal: OnSignal<'_>,
    ) -> Result<(Answer, bool), Exchange> {
        let mut request = Vec::with_capacity(256 + self.fixed.len() + body.len());
        request.extend_from_slice(method.as_bytes());
        request.push(b' ');
        request.extend_from_slice(path.as_bytes());
        request.extend_from_slice(b" HTTP/1.1\r\n");
        request.extend_from_slice(self.fixed.as_bytes());
        for (name, value) in headers {
            request.extend_from_slice(name.as_bytes());
            request.extend_from_slice(b": ");
            request.extend_from_slice(value.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        if !body.is_empty() || method == "POST" || method == "PUT" {
            request.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
        }
        request.extend_from_slice(b"\r\n");
        request.extend_from_slice(body);
        conn.stream.write_all(&request).map_err(Exchange::Unwritten)?;
        read_answer(&mut Signals { inner: &mut conn.stream, on_signal }, &mut conn.buf, method == "HEAD")
            .map_err(Exchange::Unanswered)
    }

    /// Whether an idle connection that server start `boot` last answered on is still open.
    ///
    /// Open means that server process has been running ever since. Idle connections found
    /// closed (or holding bytes no request asked for) are dropped.
    pub fn hears(&self, boot: &str) -> bool {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let mut open = false;
        idle.retain(|c| {
            if c.heard.as_deref() != Some(boot) || open {
                return true;
            }
            // An idle HTTP/1.1 connection receives nothing until it sends a request: one that
            // is readable holds an end of stream or stray bytes, and is done either way.
            let alive = !readable(&c.stream);
            open = alive;
            alive
        });
        open
    }

    /// Close every connection; a request waiting on one (a long poll) fails at once.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).clear();
        for stream in self.busy.lock().unwrap_or_else(|e| e.into_inner()).values() {
            stream.shutdown();
        }
    }
}

/// How a request's exchange failed: before the whole request was written, or after.
enum Exchange {
    Unwritten(io::Error),
    Unanswered(io::Error),
}

/// Whether `stream` has something to read (or is closed, or failed) right now: one
/// `recv(MSG_PEEK | MSG_DONTWAIT)`, which leaves what it sees in the socket and the socket
/// blocking.
fn readable(stream: &Stream) -> bool {
    use rustix::net::{recv, RecvFlags};
    let fd = match stream {
        Stream::Tcp(s) => s.as_fd(),
        Stream::Unix(s) => s.as_fd(),
    };
    let mut byte = [0u8; 1];
    loop {
        match recv(fd, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT) {
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::WOULDBLOCK) => return false,
            // A byte the server sent unasked, its end of the connection (0), or an error.
            _ => return true,
        }
    }
}

/// Asked whether to go on each time a signal interrupts a read or a connect.
pub type OnSignal<'a> = &'a mut dyn FnMut() -> bool;

const STOPPED: &str = "stopped by a signal handler while waiting for the server";

/// The error a read returns when `on_signal` said to stop.
#[derive(Debug)]
struct StoppedBySignal;

impl fmt::Display for StoppedBySignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(STOPPED)
    }
}

impl std::error::Error for StoppedBySignal {}

/// A stream whose reads a signal interrupts ask `on_signal` whether to read again.
struct Signals<'a, R> {
    inner: R,
    on_signal: OnSignal<'a>,
}

impl<R: Read> Read for Signals<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.inner.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    if !(self.on_signal)() {
                        return Err(io::Error::other(StoppedBySignal));
                    }
                }
                read => return read,
            }
        }
    }
}

fn bad(why: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.into())
}

/// Read more bytes into `buf`; an end of stream is an error (`what` was still expected).
/// (A client's reads go through [`Signals`], which decides what a signal's EINTR means.)
fn fill(stream: &mut impl Read, buf: &mut Vec<u8>, what: &str) -> io::Result<()> {
    let mut chunk = [0u8; 16 * 1024];
    let n = stream.read(&mut chunk)?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the server closed the connection before {what}"),
        ));
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

/// Read one answer from `stream` (`buf` holds bytes already read); returns it and whether
/// the connection stays open for another request.
fn read_answer(stream: &mut impl Read, buf: &mut Vec<u8>, head_only: bool) -> io::Result<(Answer, bool)> {
    let (status, headers, keep_alive, consumed) = loop {
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut slots);
        match response.parse(buf).map_err(|e| bad(format!("a malformed answer: {e}")))? {
            httparse::Status::Complete(n) => {
                let status = response.code.unwrap_or(0);
                let http10 = response.version == Some(0);
                let mut headers = Vec::with_capacity(response.headers.len());
                for h in response.headers.iter() {
                    let value =
                        std::str::from_utf8(h.value).map_err(|_| bad("a header that is not UTF-8"))?;
                    headers.push((h.name.to_ascii_lowercase(), value.trim().to_owned()));
                }
                let connection =
                    headers.iter().find(|(n, _)| n == "connection").map(|(_, v)| v.to_ascii_lowercase());
                let keep = match connection.as_deref() {
                    Some(v) if v.contains("close") => false,
                    Some(v) if v.contains("keep-alive") => true,
                    _ => !http10,
                };
                break (status, headers, keep, n);
            }
            httparse::Status::Partial => {
                if buf.len() > MAX_HEAD {
                    return Err(bad("an answer head over 64 KiB"));
                }
                fill(stream, buf, "its answer")?;
            }
        }
    };
    buf.drain(..consumed);
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    let no_body = head_only || status == 204 || status == 304 || (100..200).contains(&status);
    let (body, keep) = if no_body {
        (Vec::new(), keep_alive)
    } else if header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        (read_chunked(stream, buf)?, keep_alive)
    } else if let Some(length) = header("content-length") {
        let length: usize = length.parse().map_err(|_| bad(format!("a Content-Length of {length:?}")))?;
        while buf.len() < length {
            fill(stream, buf, "the end of its answer")?;
        }
        (buf.drain(..length).collect(), keep_alive)
    } else {
        // Framed by the end of the connection.
        stream.read_to_end(buf)?;
        (std::mem::take(buf), false)
    };
    Ok((Answer { status, headers, body }, keep))
}

fn read_chunked(stream: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
                break i;
            }
            if buf.len() > MAX_HEAD {
                return Err(bad("a chunk size line over 64 KiB"));
            }
            fill(stream, buf, "a chunk")?;
        };
        let line = std::str::from_utf8(&buf[..line_end]).map_err(|_| bad("a chunk size that is not text"))?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| bad(format!("a chunk size of {size_text:?}")))?;
        buf.drain(..line_end + 2);
        if size == 0 {
            // Trailers (none expected), then the blank line.
            loop {
                if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
                    buf.drain(..i + 2);
                    if i == 0 {
                        return Ok(body);
                    }
                    continue;
                }
                fill(stream, buf, "the end of a chunked answer")?;
            }
        }
        while buf.len() < size + 2 {
            fill(stream, buf, "a whole chunk")?;
        }
        body.extend_from_slice(&buf[..size]);
        if &buf[size..size + 2] != b"\r\n" {
            return Err(bad("a chunk not followed by CRLF"));
        }
        buf.drain(..size + 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream that gives 3 bytes a read, each after a read a signal interrupted (EINTR), so
    /// every partial state is exercised.
    struct Slow<'a>(&'a [u8], bool);

    impl Read for Slow<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            self.1 = !self.1;
            if self.1 {
                return Err(io::Error::from(io::ErrorKind::Interrupted));
            }
            let n = self.0.len().min(3).min(out.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn answer(bytes: &[u8]) -> io::Result<(Answer, bool, Vec<u8>)> {
        let mut buf = Vec::new();
        let mut asked = 0;
        let mut on_signal = || {
            asked += 1;
            true
        };
        let (a, keep) = read_answer(
            &mut Signals { inner: Slow(bytes, false), on_signal: &mut on_signal },
            &mut buf,
            false,
        )?;
        assert!(asked > 0, "each interrupted read asks whether to go on");
        Ok((a, keep, buf))
    }

    #[test]
    fn a_signal_handler_that_says_stop_ends_the_read() {
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        let mut asked = 0;
        let mut on_signal = || {
            asked += 1;
            asked < 3
        };
        let e = read_answer(
            &mut Signals { inner: Slow(answer, false), on_signal: &mut on_signal },
            &mut Vec::new(),
            false,
        )
        .unwrap_err();
        assert!(e.get_ref().is_some_and(|inner| inner.is::<StoppedBySignal>()), "{e}");
        assert_eq!(asked, 3);
    }

    #[test]
    fn a_content_length_answer_keeps_the_connection() {
        let (a, keep, rest) =
            answer(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Memcommit-Boot: b1\r\n\r\nhelloHTTP/1.1")
                .unwrap();
        assert_eq!(a.status, 200);
        assert_eq!(a.body, b"hello");
        assert_eq!(a.header("x-memcommit-boot"), Some("b1"));
        assert!(keep);
        assert!(b"HTTP/1.1".starts_with(&rest), "bytes read past the answer stay for the next one: {rest:?}");
    }

    #[test]
    fn connection_close_and_http_10_end_the_connection() {
        let (_, keep, _) =
            answer(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").unwrap();
        assert!(!keep);
        let (a, keep, _) = answer(b"HTTP/1.0 200 OK\r\n\r\nto the end").unwrap();
        assert!(!keep);
        assert_eq!(a.body, b"to the end");
    }

    #[test]
    fn a_chunked_answer_is_joined() {
        let (a, keep, _) =
            answer(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=1\r\n world\r\n0\r\n\r\n")
                .unwrap();
        assert_eq!(a.body, b"hello world");
        assert!(keep);
    }

    #[test]
    fn a_cut_or_malformed_answer_is_an_error() {
        let cut = answer(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort").unwrap_err();
        assert_eq!(cut.kind(), io::ErrorKind::UnexpectedEof);
        let cut = answer(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap_err();
        assert_eq!(cut.kind(), io::ErrorKind::UnexpectedEof);
        let bad = answer(b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n").unwrap_err();
        assert!(bad.to_string().contains("Content-Length"), "{bad}");
        let bad = answer(b"NOT HTTP\r\n\r\n").unwrap_err();
        assert_eq!(bad.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn a_request_to_nobody_is_not_sent() {
        let dir = std::env::temp_dir().join(format!("memcommit-wire-{}", std::process::id()));
        let client = Client::new(Endpoint::Unix(dir.join("nobody.sock")), &[]);
        let failure =
            client.request("GET", "/v1/health", &[], b"", Duration::from_secs(1), &mut || true).unwrap_err();
        assert!(matches!(failure, Failure::NotSent(_)), "{failure:?}");
    }

    /// A Unix socket listening in a scratch directory of the test's own `name`, and its path.
    fn listener(name: &str) -> (PathBuf, std::os::unix::net::UnixListener) {
        let dir = std::env::temp_dir().join(format!("memcommit-wire-{name}-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        (path, listener)
    }

    #[test]
    fn requests_travel_and_connections_are_reused_and_heard() {
        let (path, listener) = listener("t");
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut seen = Vec::new();
            for _ in 0..2 {
                let mut buf = Vec::new();
                loop {
                    fill(&mut s, &mut buf, "a request").unwrap();
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..i]).to_string();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("Content-Length: "))
                            .map_or(0, |v| v.parse().unwrap());
                        while buf.len() < i + 4 + len {
                            fill(&mut s, &mut buf, "a body").unwrap();
                        }
                        seen.push((head, buf[i + 4..i + 4 + len].to_vec()));
                        break;
                    }
                }
                s.write_all(b"HTTP/1.1 200 OK\r\nX-Memcommit-Boot: boot-1\r\nContent-Length: 2\r\n\r\nok")
                    .unwrap();
            }
            // Keep the connection open until the client has checked it.
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            seen
        });
        let client =
            Client::new(Endpoint::Unix(path.clone()), &[("Authorization".into(), "Bearer t".into())]);
        let a = client
            .request(
                "POST",
                "/v1/commit",
                &[("Content-Type", "application/json")],
                b"{}",
                Duration::from_secs(5),
                &mut || true,
            )
            .unwrap();
        assert_eq!((a.status, a.body.as_slice()), (200, &b"ok"[..]));
        assert!(client.hears("boot-1"));
        assert!(!client.hears("boot-2"));
        let b = client.request("GET", "/v1/info", &[], b"", Duration::from_secs(5), &mut || true).unwrap();
        assert_eq!(b.status, 200);
        assert!(client.hears("boot-1"), "the one connection went back to the pool");
        client.close();
        let seen = server.join().unwrap();
        assert_eq!(seen.len(), 2, "both requests went over one connection");
        assert!(seen[0]
            .0
            .starts_with("POST /v1/commit HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer t\r\n"));
        assert!(seen[0].0.contains("Content-Type: application/json"));
        assert_eq!(seen[0].1, b"{}");
        assert!(seen[1].0.starts_with("GET /v1/info HTTP/1.1"));
        assert!(!client.hears("boot-1"), "closed");
        let _ = std::fs::remove_file(&path);
    }

    /// Read one request (head and `Content-Length` body) from `s`; false at the end of stream.
    fn read_request(s: &mut impl Read) -> bool {
        let mut buf = Vec::new();
        loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..i]).to_string();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: "))
                    .map_or(0, |v| v.parse().unwrap());
                while buf.len() < i + 4 + len {
                    if fill(s, &mut buf, "a body").is_err() {
                        return false;
                    }
                }
                return true;
            }
            if fill(s, &mut buf, "a request").is_err() {
                return false;
            }
        }
    }

    /// A server that answers one request on each of two connections and closes each after its
    /// answer (a server that stopped, then one started in its place); `closed` hears of the
    /// first connection's close.
    fn answer_once_then_close<S: Read + Write>(
        mut accept: impl FnMut() -> S + Send + 'static,
        closed: std::sync::mpsc::Sender<()>,
    ) -> std::thread::JoinHandle<usize> {
        std::thread::spawn(move || {
            let mut served = 0;
            for boot in ["boot-1", "boot-2"] {
                let mut s = accept();
                if read_request(&mut s) {
                    let answer =
                        format!("HTTP/1.1 200 OK\r\nX-Memcommit-Boot: {boot}\r\nContent-Length: 2\r\n\r\nok");
                    s.write_all(answer.as_bytes()).unwrap();
                    served += 1;
                }
                drop(s);
                let _ = closed.send(());
            }
            served
        })
    }

    fn a_request_after_a_restart(
        endpoint: Endpoint,
        server: std::thread::JoinHandle<usize>,
        closed: std::sync::mpsc::Receiver<()>,
    ) {
        let client = Client::new(endpoint, &[]);
        let wait = Duration::from_secs(10);
        let first = client.request("POST", "/v1/commit", &[], b"{}", wait, &mut || true).unwrap();
        assert_eq!(first.header(BOOT), Some("boot-1"));
        closed.recv().unwrap(); // the first server's end of the kept connection is closed
                                // Written to the closed connection, the commit would be lost after it was written
                                // (MaybeSent, an unknown outcome); it goes over a new connection instead.
        let second = client.request("POST", "/v1/commit", &[], b"{}", wait, &mut || true);
        assert_eq!(second.map(|a| a.header(BOOT).map(str::to_owned)), Ok(Some("boot-2".to_owned())));
        client.close();
        assert_eq!(server.join().unwrap(), 2);
    }

    #[test]
    fn a_kept_connection_the_server_closed_is_not_written_to_over_a_unix_socket() {
        let (path, listener) = listener("restart");
        let (tx, rx) = std::sync::mpsc::channel();
        let server = answer_once_then_close(move || listener.accept().unwrap().0, tx);
        a_request_after_a_restart(Endpoint::Unix(path.clone()), server, rx);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_kept_connection_the_server_closed_is_not_written_to_over_tcp() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tx, rx) = std::sync::mpsc::channel();
        let server = answer_once_then_close(move || listener.accept().unwrap().0, tx);
        a_request_after_a_restart(Endpoint::Tcp { host: "127.0.0.1".into(), port }, server, rx);
    }

    /// A server on a Unix socket that answers the first `answered` requests of its one
    /// connection and then reads on without answering.
    fn silent_after(name: &str, answered: usize) -> (PathBuf, std::thread::JoinHandle<()>) {
        let (path, listener) = listener(name);
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = Vec::new();
            for _ in 0..answered {
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    fill(&mut s, &mut buf, "a request").unwrap();
                }
                buf.clear();
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").unwrap();
            }
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
        });
        (path, server)
    }

    #[test]
    fn close_ends_a_request_waiting_on_a_kept_connection() {
        let (path, server) = silent_after("close", 1);
        let client = std::sync::Arc::new(Client::new(Endpoint::Unix(path.clone()), &[]));
        let wait = Duration::from_secs(30);
        assert_eq!(client.request("GET", "/a", &[], b"", wait, &mut || true).unwrap().status, 200);
        let closer = {
            let client = std::sync::Arc::clone(&client);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                client.close();
            })
        };
        let failure = client.request("GET", "/b", &[], b"", wait, &mut || true).unwrap_err();
        // Shut down under it, the read ends at once with the end of the stream (a read that
        // timed out would say so instead).
        assert!(
            matches!(&failure, Failure::MaybeSent(why) if why.contains("closed the connection before its answer")),
            "{failure:?}"
        );
        closer.join().unwrap();
        server.join().unwrap();
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_kept_connection_takes_each_requests_own_timeout() {
        let (path, server) = silent_after("timeout", 1);
        let client = Client::new(Endpoint::Unix(path.clone()), &[]);
        let long = Duration::from_secs(30);
        assert_eq!(client.request("GET", "/a", &[], b"", long, &mut || true).unwrap().status, 200);
        let started = std::time::Instant::now();
        let failure =
            client.request("GET", "/b", &[], b"", Duration::from_millis(300), &mut || true).unwrap_err();
        assert!(matches!(failure, Failure::MaybeSent(_)), "{failure:?}");
        assert!(started.elapsed() < Duration::from_secs(10), "the second request's timeout, not the first's");
        client.close();
        server.join().unwrap();
        let _ = std::fs::remove_file(&path);
    }
}
