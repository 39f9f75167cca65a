//! What the HTTP backends (REST and S3) share: one blocking `ureq` agent
//! with request timeouts, a limit on requests in flight (`--connections`),
//! upload and download rate limits (`--limit-upload`, `--limit-download`,
//! KiB/s, averaged over whole requests), the retry policy around every
//! request, and a count of the requests made.
//!
//! Responses are classified here: transport failures and the statuses a
//! busy or failing server answers (408, 429, 5xx) are retried; everything
//! else goes back to the backend, which knows what a 404 or 412 means.

use super::retry::{Failure, RetryPolicy};
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Environment variable: the timeout, in seconds, for connecting, for the
/// response to start, and for every read or write that stalls.
pub const REQUEST_TIMEOUT_ENV: &str = "LARDER_REQUEST_TIMEOUT";
/// The default of [`REQUEST_TIMEOUT_ENV`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How remote backends transfer (from the global options).
#[derive(Clone, Debug)]
pub struct RemoteOptions {
    /// Requests in flight at once.
    pub connections: usize,
    /// Upload limit in KiB/s.
    pub limit_upload: Option<u64>,
    /// Download limit in KiB/s.
    pub limit_download: Option<u64>,
    pub retry: RetryPolicy,
    pub timeout: Duration,
    /// Where packs wait for their upload (the cache directory, which
    /// backups skip; by default the system's temporary directory).
    pub stage_dir: std::path::PathBuf,
    /// The TLS settings of `--cacert` and `--insecure-tls` ([`tls_config`]);
    /// `None`: Mozilla's root certificates, verified.
    pub tls: Option<ureq::tls::TlsConfig>,
}

/// The TLS settings for `https` servers: `cacert`, PEM files whose
/// certificates are then the only roots trusted (restic's `--cacert`: for
/// a server with a certificate of its own making); `insecure`, no check of
/// the server's certificate at all (restic's `--insecure-tls`). `None`
/// when neither is asked for. Errors name the file.
pub fn tls_config(
    cacert: &[std::path::PathBuf],
    insecure: bool,
) -> Result<Option<ureq::tls::TlsConfig>> {
    use ureq::tls::{PemItem, RootCerts, TlsConfig};
    if cacert.is_empty() && !insecure {
        return Ok(None);
    }
    let mut roots = Vec::new();
    for file in cacert {
        let bad = |why: String| Error::Usage(format!("cacert {}: {why}", file.display()));
        // A bundle of every public root is about 200 KiB; a FIFO or a file
        // of /proc says nothing of its size, so the read itself is bounded.
        const MAX: u64 = 16 << 20;
        let mut pem = Vec::new();
        std::fs::File::open(file)
            .and_then(|f| {
                std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX + 1), &mut pem)
            })
            .map_err(|e| Error::io(file, e))?;
        if pem.len() as u64 > MAX {
            return Err(bad("larger than 16 MiB: not a certificate file".into()));
        }
        let before = roots.len();
        for item in ureq::tls::parse_pem(&pem) {
            if let PemItem::Certificate(c) = item.map_err(|e| bad(format!("not PEM: {e}")))? {
                roots.push(c);
            }
        }
        if roots.len() == before {
            return Err(bad(
                "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
            ));
        }
    }
    let mut b = TlsConfig::builder().disable_verification(insecure);
    if !roots.is_empty() {
        b = b.root_certs(RootCerts::Specific(std::sync::Arc::new(roots)));
    }
    Ok(Some(b.build()))
}

impl RemoteOptions {
    /// Defaults: 5 connections, no limits, retry and timeout from the
    /// environment.
    pub fn from_env() -> Result<RemoteOptions> {
        let timeout = match std::env::var(REQUEST_TIMEOUT_ENV) {
            Ok(v) => v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "{REQUEST_TIMEOUT_ENV}={v:?} is not a number of seconds"
                    ))
                })?,
            Err(_) => DEFAULT_REQUEST_TIMEOUT,
        };
        Ok(RemoteOptions {
            connections: 5,
            limit_upload: None,
            limit_download: None,
            retry: RetryPolicy::from_env()?,
            timeout,
            stage_dir: std::env::temp_dir(),
            tls: None,
        })
    }
}

/// A counting semaphore: requests in flight.
struct Slots {
    free: Mutex<usize>,
    cv: Condvar,
}

struct Slot<'a>(&'a Slots);

impl Slots {
    fn acquire(&self) -> Slot<'_> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.cv.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
        Slot(self)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut free = self.0.free.lock().unwrap_or_else(|p| p.into_inner());
        *free += 1;
        self.0.cv.notify_one();
    }
}

/// A rate limit shared by all threads: each transfer reserves its share of
/// time on one timeline and waits until its reservation ends. Every remote
/// backend uses it for `--limit-upload` and `--limit-download`.
pub(crate) struct Throttle {
    bytes_per_sec: f64,
    next: Mutex<Instant>,
}

impl Throttle {
    pub(crate) fn new(kib_per_sec: Option<u64>) -> Option<Throttle> {
        kib_per_sec.filter(|k| *k > 0).map(|k| Throttle {
            bytes_per_sec: k as f64 * 1024.0,
            next: Mutex::new(Instant::now()),
        })
    }

    pub(crate) fn take(&self, bytes: usize) {
        let cost = Duration::from_secs_f64(bytes as f64 / self.bytes_per_sec);
        let until = {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            let start = (*next).max(now);
            *next = start + cost;
            *next
        };
        let now = Instant::now();
        if until > now {
            std::thread::sleep(until - now);
        }
    }
}

/// The HTTP client of one backend.
pub struct Http {
    agent: ureq::Agent,
    slots: Slots,
    up: Option<Throttle>,
    down: Option<Throttle>,
    retry: RetryPolicy,
    /// The backend's location, as messages show it (no password).
    pub location: String,
    requests: AtomicU64,
    connections: usize,
    /// See [`RemoteOptions::stage_dir`].
    pub stage_dir: std::path::PathBuf,
}

/// A response whose status the backend interprets.
pub type Response = ureq::http::Response<ureq::Body>;

impl Http {
    pub fn new(location: String, opts: &RemoteOptions) -> Http {
        let t = Some(opts.timeout);
        let mut config = ureq::Agent::config_builder();
        if let Some(tls) = &opts.tls {
            config = config.tls_config(tls.clone());
        }
        let agent: ureq::Agent = config
            .http_status_as_error(false)
            .timeout_connect(t)
            .timeout_send_request(t)
            .timeout_recv_response(t)
            .timeout_per_read(t)
            .timeout_per_write(t)
            .max_idle_connections_per_host(opts.connections.max(1) * 2)
            .user_agent(concat!("larder/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Http {
            agent,
            slots: Slots {
                free: Mutex::new(opts.connections.max(1)),
                cv: Condvar::new(),
            },
            up: Throttle::new(opts.limit_upload),
            down: Throttle::new(opts.limit_download),
            retry: opts.retry.clone(),
            location,
            requests: AtomicU64::new(0),
            connections: opts.connections.max(1),
            stage_dir: opts.stage_dir.clone(),
        }
    }

    /// The agent, to build requests with.
    pub fn agent(&self) -> &ureq::Agent {
        &self.agent
    }

    /// Requests in flight at most.
    pub fn connections(&self) -> usize {
        self.connections
    }

    /// Requests made so far (attempts, retries included).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Runs `attempt` under the retry policy, each attempt holding one of
    /// the connection slots. Errors name `object`.
    pub fn run<T>(
        &self,
        object: &str,
        mut attempt: impl FnMut() -> std::result::Result<T, Failure>,
    ) -> Result<T> {
        self.retry.run(&self.location, object, || {
            let _slot = self.slots.acquire();
            self.requests.fetch_add(1, Ordering::Relaxed);
            attempt()
        })
    }

    /// Waits for the upload limit before sending `bytes`.
    pub fn throttle_up(&self, bytes: usize) {
        if let Some(t) = &self.up {
            t.take(bytes);
        }
    }

    /// Waits for the download limit after receiving `bytes`.
    pub fn throttle_down(&self, bytes: usize) {
        if let Some(t) = &self.down {
            t.take(bytes);
        }
    }

    /// Sends a request (built by `send`) and classifies the outcome: a
    /// transport failure or a 408/429/5xx answer is transient (its cause
    /// read from a short error body), anything else is returned.
    pub fn exchange(
        &self,
        send: impl FnOnce(&ureq::Agent) -> std::result::Result<Response, ureq::Error>,
    ) -> std::result::Result<Response, Failure> {
        let mut resp = send(&self.agent).map_err(transport)?;
        let status = resp.status().as_u16();
        if status == 408 || status == 429 || status >= 500 {
            return Err(Failure::Transient(describe_status(&mut resp)));
        }
        Ok(resp)
    }
}

/// What a request sends: bytes in memory, or a staged file streamed from
/// its start (so a pack being uploaded is not held in memory; every
/// attempt reads the file again from offset 0).
#[derive(Clone, Copy)]
pub enum Body<'a> {
    Bytes(&'a [u8]),
    File(&'a std::fs::File, u64),
}

impl Body<'_> {
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> u64 {
        match self {
            Body::Bytes(b) => b.len() as u64,
            Body::File(_, n) => *n,
        }
    }

    /// Sends `req` (its headers set) with this body on `agent`.
    pub fn send(
        self,
        agent: &ureq::Agent,
        req: ureq::http::request::Builder,
    ) -> std::result::Result<Response, ureq::Error> {
        match self {
            Body::Bytes(d) => agent.run(req.body(d).map_err(ureq::Error::Http)?),
            Body::File(f, len) => {
                let mut reader = FileFromStart {
                    file: f,
                    at: 0,
                    len,
                };
                let req = req
                    .header("content-length", len.to_string())
                    .body(ureq::SendBody::from_reader(&mut reader))
                    .map_err(ureq::Error::Http)?;
                agent.run(req)
            }
        }
    }
}

/// Reads the first `len` bytes of a file with positioned reads (the file's
/// own offset is left alone).
struct FileFromStart<'a> {
    file: &'a std::fs::File,
    at: u64,
    len: u64,
}

impl std::io::Read for FileFromStart<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let left = self.len - self.at;
        let n = (buf.len() as u64).min(left) as usize;
        if n == 0 {
            return Ok(0);
        }
        let got = self.file.read_at(&mut buf[..n], self.at)?;
        if got == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the staged file is shorter than when it was staged",
            ));
        }
        self.at += got as u64;
        Ok(got)
    }
}

/// "HTTP 503 Service Unavailable (SlowDown)": the status and, for an S3
/// error body, its code.
pub fn describe_status(resp: &mut Response) -> String {
    let status = resp.status();
    let mut s = format!(
        "HTTP {} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    let body = resp
        .body_mut()
        .with_config()
        .limit(16 * 1024)
        .read_to_string()
        .unwrap_or_default();
    if let Some(code) = xml_field(&body, "Code") {
        s.push_str(&format!(" ({code})"));
    }
    s.trim_end().to_string()
}

/// The text of the first `<name>…</name>` in `xml` (for error bodies).
pub fn xml_field(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&format!("</{name}>"))? + start;
    let v: String = xml[start..end]
        .chars()
        .filter(|c| !c.is_control())
        .take(100)
        .collect();
    Some(v)
}

/// A ureq error as a failure: transport trouble is transient, a request
/// that cannot be built is not. Never includes a URL.
pub fn transport(e: ureq::Error) -> Failure {
    match e {
        ureq::Error::BadUri(_) | ureq::Error::Http(_) | ureq::Error::InvalidProxyUrl => {
            Failure::Fatal(Error::internal("cannot build the HTTP request".to_string()))
        }
        ureq::Error::Timeout(t) => Failure::Transient(format!("timed out ({t:?})")),
        ureq::Error::Io(io) => Failure::Transient(io.to_string()),
        ureq::Error::ConnectionFailed => Failure::Transient("connection failed".into()),
        ureq::Error::HostNotFound => Failure::Transient("host not found".into()),
        other => Failure::Transient(other.to_string()),
    }
}

/// A read of a response body that failed midway: transient.
pub fn body_failure(e: Error) -> Failure {
    match e {
        Error::Backend { source, .. } => {
            Failure::Transient(format!("reading the response: {source}"))
        }
        other => Failure::Fatal(other),
    }
}

/// The Content-Length of a response, if it has one.
pub fn content_length(resp: &Response) -> Option<u64> {
    resp.headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// The response's body, at most `max` bytes, exactly its Content-Length
/// (see [`super::read_limited`]). A body without a length is read up to
/// `max + 1` bytes and refused past `max`.
pub fn read_body(object: &str, resp: &mut Response, max: u64) -> Result<Vec<u8>> {
    match content_length(resp) {
        Some(n) => super::read_limited(object, resp.body_mut().as_reader(), n, max),
        None => {
            use std::io::Read;
            let mut buf = Vec::new();
            resp.body_mut()
                .as_reader()
                .take(max.saturating_add(1))
                .read_to_end(&mut buf)
                .map_err(|e| Error::Backend {
                    object: object.to_string(),
                    source: e,
                })?;
            if buf.len() as u64 > max {
                return Err(Error::corrupt(
                    object,
                    format!("more than the {max} bytes such an object may have; stopped reading"),
                ));
            }
            Ok(buf)
        }
    }
}

/// How long ago the object of a HEAD or GET response was written, by the
/// server's clock alone: its `Date` header minus `Last-Modified`.
pub fn age_from_headers(resp: &Response) -> Option<Duration> {
    let get = |h: &str| -> Option<jiff::Timestamp> {
        let v = resp.headers().get(h)?.to_str().ok()?;
        jiff::fmt::rfc2822::parse(v).ok().map(|z| z.timestamp())
    };
    let (now, modified) = (get("date")?, get("last-modified")?);
    let secs = now.as_second().saturating_sub(modified.as_second());
    Some(Duration::from_secs(secs.max(0) as u64))
}

/// An error for an answer the backend did not expect, naming the object.
pub fn unexpected(location: &str, object: &str, resp: &mut Response) -> Error {
    Error::Backend {
        object: object.to_string(),
        source: std::io::Error::other(format!("{location}: {}", describe_status(resp))),
    }
}

/// A "not found" error for `object`, as the local backend gives it.
pub fn not_found(location: &str, object: &str) -> Error {
    Error::Backend {
        object: object.to_string(),
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{location}: no such object"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_codes_are_found() {
        let b = "<?xml?><Error><Code>SlowDown</Code><Message>x</Message></Error>";
        assert_eq!(xml_field(b, "Code").as_deref(), Some("SlowDown"));
        assert_eq!(xml_field(b, "Nope"), None);
    }
}
