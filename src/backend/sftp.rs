//! The SFTP backend: a repository on any host the user reaches with `ssh`
//! (`sftp:user@host:/srv/repo`, `sftp:alias:relative/path`, or restic's
//! `sftp://user@host:2222//srv/repo` with a port). It runs the user's own
//! `ssh` (`ssh [-p PORT] -s -- [user@]host sftp`), so `~/.ssh/config`
//! (ports, identity files, jump hosts), the agent and known_hosts apply
//! exactly as they do for `ssh` itself; a port in the repository string
//! wins over the configured one, as on ssh's command line. Password and
//! keyboard-interactive logins are switched off (key-based only).
//! `LARDER_SFTP_COMMAND`, a shell command line, replaces that command for
//! unusual setups and tests; it sees the target in `LARDER_SFTP_HOST`,
//! `LARDER_SFTP_USER`, `LARDER_SFTP_PORT` (empty when none was given) and
//! `LARDER_SFTP_DESTINATION` (`[user@]host`).
//!
//! The layout is the local backend's. Write-once: an object is uploaded to a
//! `.tmp-*` name beside its final one (created exclusively), flushed with
//! `fsync@openssh.com` where offered, closed, and renamed with SFTP v3
//! RENAME, which fails if the name exists (never `posix-rename`, which
//! would replace it; but for [`Backend::replace_config`], the one
//! replacement, where the server offers `posix-rename@openssh.com`).
//! A run killed mid-upload leaves only a `.tmp-*` file,
//! which listings skip and [`Backend::leftovers`] reports. Packs are staged
//! in a local temporary file, not in memory. Reads look at the name with
//! LSTAT first and refuse what is not a regular file; every read is bounded
//! (see [`super::read_limited`]) and so is every packet from the server.
//!
//! Up to `LARDER_SFTP_CONNECTIONS` sessions (default 4) run at once, each
//! its own ssh process; the protocol itself is in `sftp/proto.rs` and
//! `sftp/client.rs`. Once a session has connected, a lost connection (the
//! server restarted, the network dropped) is retried on a new session with
//! the backoff and time budget of the other remote backends
//! ([`super::retry`]); a first connection that fails (no route, refused,
//! authentication) is reported at once. `--limit-upload` and
//! `--limit-download` apply as for the other remote backends.

mod client;
/// The wire format, public so that `tests/it/untrusted.rs` and the fuzz
/// target `sftp_reply` can feed its parsers bytes a server could send.
pub mod proto;

use super::http::{RemoteOptions, Throttle};
use super::retry::{Failure, RetryPolicy};
use super::{Backend, Entry, Kind, Staged, StagedFile, TMP_PREFIX};
use crate::error::{Error, Result};
use client::{SResult, Session, SftpError};
use proto::{Attrs, FileType};
use std::io::{Read, Seek};
use std::os::unix::fs::OpenOptionsExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Prefix of the probe files `age` creates to read the server's clock.
const PROBE_PREFIX: &str = ".probe-";
/// Environment variable: a shell command line replacing `ssh … -s sftp`.
pub const COMMAND_VAR: &str = "LARDER_SFTP_COMMAND";
/// Environment variable: how many sessions may run at once.
pub const CONNECTIONS_VAR: &str = "LARDER_SFTP_CONNECTIONS";
/// Environment variable: seconds to wait for any answer before giving up.
pub const TIMEOUT_VAR: &str = "LARDER_SFTP_TIMEOUT";

/// Where an SFTP repository is: `[user@]host:path`, and a port when the
/// repository string gave one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SftpTarget {
    pub user: Option<String>,
    /// A host name, address or `~/.ssh/config` alias.
    pub host: String,
    /// Passed to ssh as `-p`; `None` leaves it to ssh and its configuration.
    pub port: Option<u16>,
    /// Absolute, or relative to the login directory.
    pub path: String,
}

impl SftpTarget {
    /// Parses `[user@]host:path` (the part after `sftp:`); an IPv6 address
    /// goes in brackets (`[::1]:/srv/repo`).
    pub fn parse(s: &str) -> Result<SftpTarget> {
        let bad = |why: &str| {
            Error::Usage(format!(
                "sftp:{s}: {why}; expected sftp:[user@]host:/path (or sftp:alias:path for a host in ~/.ssh/config)"
            ))
        };
        let at = s.find(['[', ':']).and_then(|i| s[..i].rfind('@'));
        let (user, rest) = match at {
            Some(i) => (Some(&s[..i]), &s[i + 1..]),
            None => (None, s),
        };
        let (host, path) = if let Some(r) = rest.strip_prefix('[') {
            let (h, p) = r.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
            let p = p.strip_prefix(':').ok_or_else(|| bad("no ':' after ']'"))?;
            (h, p)
        } else {
            rest.split_once(':')
                .ok_or_else(|| bad("no ':' between host and path"))?
        };
        SftpTarget::new(user, host, None, path).map_err(|why| bad(&why))
    }

    /// Checks the parts of a target, however the repository string spelled
    /// them; the error says what is wrong, for the caller to name the
    /// string. A user or host must not look like an ssh option or hold
    /// spaces or control characters, the path holds no NUL byte, and a
    /// trailing `/` is dropped (but the root's).
    pub fn new(
        user: Option<&str>,
        host: &str,
        port: Option<u16>,
        path: &str,
    ) -> std::result::Result<SftpTarget, String> {
        if host.is_empty() {
            return Err("no host".into());
        }
        if user.is_some_and(str::is_empty) {
            return Err("empty user name".into());
        }
        if path.is_empty() {
            return Err("no path".into());
        }
        if port == Some(0) {
            return Err("port 0".into());
        }
        let unsafe_text =
            |t: &str| t.starts_with('-') || t.chars().any(|c| c.is_control() || c.is_whitespace());
        if unsafe_text(host) || user.is_some_and(unsafe_text) {
            return Err("a user or host may not start with '-' or contain spaces".into());
        }
        if path.contains('\0') {
            return Err("a NUL byte in the path".into());
        }
        let mut path = path.trim_end_matches('/').to_string();
        if path.is_empty() {
            path.push('/');
        }
        Ok(SftpTarget {
            user: user.map(str::to_string),
            host: host.to_string(),
            port,
            path,
        })
    }

    /// `[user@]host`, as ssh takes it.
    pub fn destination(&self) -> String {
        match &self.user {
            Some(u) => format!("{u}@{}", self.host),
            None => self.host.clone(),
        }
    }
}

impl std::fmt::Display for SftpTarget {
    /// `sftp:[user@]host:path`, or with a port restic's
    /// `sftp://[user@]host:port/path` (an absolute path after `//`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(port) => {
                // As the URL form is parsed back: `%`-escaped.
                use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
                const PATH: &AsciiSet = &CONTROLS.add(b' ').add(b'%').add(b'?').add(b'#');
                const USER: &AsciiSet = &PATH.add(b'@').add(b':').add(b'/');
                let user = self
                    .user
                    .as_deref()
                    .map(|u| format!("{}@", utf8_percent_encode(u, USER)))
                    .unwrap_or_default();
                let path = utf8_percent_encode(&self.path, PATH);
                write!(f, "sftp://{user}{host}:{port}/{path}")
            }
            None => {
                let user = self
                    .user
                    .as_deref()
                    .map(|u| format!("{u}@"))
                    .unwrap_or_default();
                write!(f, "sftp:{user}{host}:{}", self.path)
            }
        }
    }
}

/// What an upload reads from: it starts again from the beginning when a
/// stale session is replaced.
trait ReadSeek: Read + Seek {}

impl<T: Read + Seek> ReadSeek for T {}

/// A failure inside a session's work: from the protocol, or larder's own.
enum Fail {
    Sftp(SftpError),
    Larder(Error),
}

impl From<SftpError> for Fail {
    fn from(e: SftpError) -> Self {
        Fail::Sftp(e)
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Larder(e)
    }
}

type FResult<T> = std::result::Result<T, Fail>;

/// Idle sessions, and how many exist.
struct PoolState {
    idle: Vec<Session>,
    live: usize,
}

/// A session on loan from the pool; goes back (or, if dead, away) on drop.
struct Lease<'a> {
    backend: &'a SftpBackend,
    session: Option<Session>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let Some(s) = self.session.take() else { return };
        let mut st = self.backend.lock_pool();
        if s.is_dead() {
            st.live = st.live.saturating_sub(1);
            drop(st);
            drop(s);
        } else {
            st.idle.push(s);
            drop(st);
        }
        self.backend.pool_cv.notify_one();
    }
}

/// A repository reached over SFTP.
pub struct SftpBackend {
    target: SftpTarget,
    pool: Mutex<PoolState>,
    pool_cv: Condvar,
    max_sessions: usize,
    timeout: Duration,
    /// The shell command line replacing `ssh`, if any.
    command_line: Option<String>,
    retry: RetryPolicy,
    /// Whether any session has connected (see the module comment).
    connected: AtomicBool,
    up: Option<Throttle>,
    down: Option<Throttle>,
}

impl SftpBackend {
    /// A backend for `target`; nothing is connected until first used.
    /// Reads `LARDER_SFTP_CONNECTIONS` and `LARDER_SFTP_TIMEOUT`.
    pub fn new(target: SftpTarget) -> Result<SftpBackend> {
        let num = |var: &str, default: u64, max: u64| -> Result<u64> {
            match std::env::var(var) {
                Ok(v) if !v.trim().is_empty() => match v.trim().parse::<u64>() {
                    Ok(n) if (1..=max).contains(&n) => Ok(n),
                    _ => Err(Error::Usage(format!(
                        "{var}={v:?}: expected a whole number from 1 to {max}"
                    ))),
                },
                _ => Ok(default),
            }
        };
        let command_line = std::env::var(COMMAND_VAR)
            .ok()
            .filter(|c| !c.trim().is_empty());
        if let (Some(port), Some(line)) = (target.port, &command_line)
            && !line.contains("LARDER_SFTP_PORT")
        {
            // It would reach whatever port it names, not the one asked for.
            return Err(Error::Usage(format!(
                "{target}: the repository string gives port {port}, but {COMMAND_VAR} ({line}) \
                 does not use $LARDER_SFTP_PORT"
            )));
        }
        Ok(SftpBackend {
            target,
            pool: Mutex::new(PoolState {
                idle: Vec::new(),
                live: 0,
            }),
            pool_cv: Condvar::new(),
            max_sessions: num(CONNECTIONS_VAR, 4, 64)? as usize,
            timeout: Duration::from_secs(num(TIMEOUT_VAR, 120, 86_400)?),
            command_line,
            retry: RetryPolicy::from_env()?,
            connected: AtomicBool::new(false),
            up: None,
            down: None,
        })
    }

    /// The same backend with the retry budget and bandwidth limits of
    /// `opts` (the global options).
    pub fn with_transfer(mut self, opts: &RemoteOptions) -> SftpBackend {
        self.retry = opts.retry.clone();
        self.up = Throttle::new(opts.limit_upload);
        self.down = Throttle::new(opts.limit_download);
        self
    }

    /// The same backend with retry policy `retry`.
    pub fn with_retry(mut self, retry: RetryPolicy) -> SftpBackend {
        self.retry = retry;
        self
    }

    /// The same backend, starting sessions with the shell command line
    /// `line` instead of `ssh` (what `LARDER_SFTP_COMMAND` sets).
    pub fn with_command(mut self, line: &str) -> SftpBackend {
        self.command_line = Some(line.to_string());
        self
    }

    /// Parses `user@host:/path` (after `sftp:`) and makes a backend for it.
    pub fn open(spec: &str) -> Result<SftpBackend> {
        Self::new(SftpTarget::parse(spec)?)
    }

    fn lock_pool(&self) -> std::sync::MutexGuard<'_, PoolState> {
        // The state is two plain fields: a panic elsewhere leaves it usable.
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The command that starts a session, and how to name it in messages.
    fn command(&self) -> (Command, String) {
        let t = &self.target;
        match &self.command_line {
            Some(line) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(line)
                    .env("LARDER_SFTP_HOST", &t.host)
                    .env("LARDER_SFTP_USER", t.user.as_deref().unwrap_or(""))
                    .env(
                        "LARDER_SFTP_PORT",
                        t.port.map(|p| p.to_string()).unwrap_or_default(),
                    )
                    .env("LARDER_SFTP_DESTINATION", t.destination());
                (c, format!("{COMMAND_VAR} ({line})"))
            }
            None => {
                let mut c = Command::new("ssh");
                c.args([
                    "-o",
                    "PasswordAuthentication=no",
                    "-o",
                    "KbdInteractiveAuthentication=no",
                ]);
                if let Some(port) = t.port {
                    c.arg("-p").arg(port.to_string());
                }
                c.args(["-s", "--"]).arg(t.destination()).arg("sftp");
                (c, "ssh".to_string())
            }
        }
    }

    /// A session from the pool, a new one if fewer than the maximum run,
    /// or else the next one handed back; and whether it was used before.
    fn lease(&self) -> SResult<(Lease<'_>, bool)> {
        let mut st = self.lock_pool();
        loop {
            if let Some(s) = st.idle.pop() {
                let lease = Lease {
                    backend: self,
                    session: Some(s),
                };
                return Ok((lease, true));
            }
            if st.live < self.max_sessions {
                st.live += 1;
                drop(st);
                let (cmd, what) = self.command();
                return match Session::start(cmd, &what, self.timeout) {
                    Ok(s) => Ok((
                        Lease {
                            backend: self,
                            session: Some(s),
                        },
                        false,
                    )),
                    Err(e) => {
                        self.lock_pool().live -= 1;
                        self.pool_cv.notify_one();
                        Err(e)
                    }
                };
            }
            st = self.pool_cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Runs `f` on a session; an SFTP error becomes an error naming
    /// `object` and this repository. A lost connection (a transport error,
    /// or a new session that cannot start after one has connected) is
    /// retried on a new session within the retry budget; a first session
    /// that cannot start is reported at once.
    fn with<T>(&self, object: &str, mut f: impl FnMut(&mut Session) -> FResult<T>) -> Result<T> {
        let location = self.location();
        self.retry.run(&location, object, || {
            let mut lease = match self.lease() {
                Ok((lease, _)) => lease,
                Err(e @ SftpError::Transport(_)) if self.connected.load(Ordering::Relaxed) => {
                    return Err(Failure::Transient(e.to_string()));
                }
                Err(e) => return Err(Failure::Fatal(self.obj_err(object, e))),
            };
            self.connected.store(true, Ordering::Relaxed);
            let Some(s) = lease.session.as_mut() else {
                return Err(Failure::Fatal(Error::internal("an empty SFTP lease")));
            };
            match f(s) {
                Ok(v) => Ok(v),
                Err(Fail::Sftp(e @ SftpError::Transport(_))) => {
                    Err(Failure::Transient(e.to_string()))
                }
                Err(Fail::Sftp(e)) => Err(Failure::Fatal(self.obj_err(object, e))),
                Err(Fail::Larder(e)) => Err(Failure::Fatal(e)),
            }
        })
    }

    fn obj_err(&self, object: &str, e: SftpError) -> Error {
        Error::Backend {
            object: object.to_string(),
            source: std::io::Error::new(e.kind(), format!("{}: {e}", self.target)),
        }
    }

    /// `rel` under the repository root.
    fn join(&self, rel: &str) -> String {
        let root = &self.target.path;
        match (root.ends_with('/'), rel.is_empty()) {
            (_, true) => root.clone(),
            (true, false) => format!("{root}{rel}"),
            (false, false) => format!("{root}/{rel}"),
        }
    }

    /// The remote path of an object, after checking its name.
    fn object_path(&self, kind: Kind, name: &str) -> Result<String> {
        if name.is_empty() || name.contains('/') || name.contains('\0') || name.starts_with('.') {
            return Err(Error::internal(format!("invalid object name {name:?}")));
        }
        Ok(self.join(&kind.path(name)))
    }

    /// Uploads `src` as object `name` (see the module comment). Returns
    /// whether it was created (false: the name existed).
    fn upload(&self, kind: Kind, name: &str, src: &mut dyn ReadSeek) -> Result<()> {
        let target = self.object_path(kind, name)?;
        let config = self.object_path(Kind::Config, "config")?;
        let object = kind.path(name);
        let dir = match target.rfind('/') {
            Some(i) => target[..i].to_string(),
            None => ".".to_string(),
        };
        let created = self.with(&object, |s| {
            // From the start on every attempt, under a name of its own (a
            // lost connection may leave the last attempt's file behind).
            src.rewind().map_err(SftpError::Local)?;
            let mut rnd = [0u8; 8];
            crate::crypto::fill_random(&mut rnd)?;
            let tmp = format!("{dir}/{TMP_PREFIX}{}", hex::encode(rnd));
            let flags = proto::FXF_WRITE | proto::FXF_CREAT | proto::FXF_EXCL;
            let h = match s.open(&tmp, flags, 0o600) {
                Err(e) if e.is_not_found() && kind == Kind::Pack => {
                    // The pack's fan-out directory is made on first use.
                    mkdir_all(s, &dir)?;
                    s.open(&tmp, flags, 0o600)?
                }
                // So is a kind's directory that an older format's
                // repository never had (`marks/`, `dicts/`): that one
                // directory, and only beside the repository's config.
                Err(e) if e.is_not_found() && kind != Kind::Config && s.lstat(&config).is_ok() => {
                    s.mkdir(&dir, 0o700)?;
                    s.open(&tmp, flags, 0o600)?
                }
                r => r?,
            };
            let mut limited = Limited {
                inner: &mut *src,
                throttle: self.up.as_ref(),
            };
            let res =
                write_and_close(s, &h, &mut limited).and_then(|()| match s.rename(&tmp, &target) {
                    Ok(()) => Ok(true),
                    Err(e @ SftpError::Status { .. }) => match s.lstat(&target) {
                        Ok(_) => Ok(false),
                        Err(_) => Err(e),
                    },
                    Err(e) => Err(e),
                });
            if !matches!(res, Ok(true)) && !s.is_dead() {
                let _ = s.remove(&tmp);
            }
            Ok(res?)
        })?;
        match (created, kind) {
            (false, Kind::Config) => Err(Error::RepositoryExists(self.location())),
            _ => Ok(()),
        }
    }

    /// LSTATs object `name`, which must be a regular file; returns its size.
    fn stat_object(&self, s: &mut Session, kind: Kind, name: &str) -> FResult<u64> {
        let a = s.lstat(&self.object_path(kind, name)?)?;
        check_regular(kind, name, &a)?;
        a.size.ok_or_else(|| {
            Fail::Larder(Error::corrupt(
                kind.path(name),
                "the server did not report its size; not read",
            ))
        })
    }

    /// Every directory holding objects of the listable kinds, packs' fan-out
    /// directories included, relative to the root.
    fn object_dirs(&self, s: &mut Session) -> FResult<Vec<String>> {
        let mut dirs: Vec<String> = Kind::LISTABLE.iter().map(|k| k.dir().to_string()).collect();
        let packs = Kind::Pack.dir();
        match s.read_dir(&self.join(packs)) {
            Ok(v) => dirs.extend(
                v.into_iter()
                    .filter(|(n, a)| is_dir_entry(n, a))
                    .map(|(n, _)| format!("{packs}/{n}")),
            ),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        Ok(dirs)
    }
}

/// Whether a listed entry is a directory to descend into (servers that
/// send no type: any name that is not hidden).
fn is_dir_entry(name: &str, a: &Attrs) -> bool {
    !name.starts_with('.')
        && match a.file_type() {
            Some(t) => t == FileType::Directory,
            None => true,
        }
}

/// Refuses what is not a regular file in an object's place, as the local
/// backend does (a server that sends no type is taken at its word).
fn check_regular(kind: Kind, name: &str, a: &Attrs) -> Result<()> {
    let what = match a.file_type() {
        None | Some(FileType::Regular) => return Ok(()),
        Some(FileType::Directory) => "a directory",
        Some(FileType::Symlink) => "a symbolic link",
        Some(FileType::Other(w)) => w,
    };
    let link = if what == "a symbolic link" {
        " (larder does not follow links to objects)"
    } else {
        ""
    };
    Err(Error::corrupt(
        kind.path(name),
        format!("is {what}, not a regular file{link}; not read"),
    ))
}

/// Writes `src` to the open file, flushes it to disk where the server can,
/// and closes it (also after a failure, when the session still works).
fn write_and_close(s: &mut Session, h: &[u8], src: &mut dyn Read) -> SResult<()> {
    let res = s.write_from(h, src).and_then(|_| s.fsync(h)).map(|_| ());
    match res {
        Ok(()) => s.close(h),
        Err(e) => {
            if !s.is_dead() {
                let _ = s.close(h);
            }
            Err(e)
        }
    }
}

/// MKDIR of `path` and of each missing parent (one that exists as a
/// directory is fine).
fn mkdir_all(s: &mut Session, path: &str) -> SResult<()> {
    let mut prefix = String::new();
    for (i, part) in path.split('/').enumerate() {
        if i > 0 {
            prefix.push('/');
        }
        prefix.push_str(part);
        if part.is_empty() || part == "." || part == ".." {
            continue;
        }
        if let Err(e) = s.mkdir(&prefix, 0o700) {
            match s.stat(&prefix) {
                Ok(a) if matches!(a.file_type(), Some(FileType::Directory) | None) => {}
                _ => return Err(e),
            }
        }
    }
    Ok(())
}

/// A source read at most as fast as the upload limit allows.
struct Limited<'a> {
    inner: &'a mut dyn ReadSeek,
    throttle: Option<&'a Throttle>,
}

impl Read for Limited<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(t) = self.throttle {
            t.take(n);
        }
        Ok(n)
    }
}

/// Reads an open remote file sequentially (pipelined), for
/// [`super::read_limited`].
struct RemoteReader<'a> {
    s: &'a mut Session,
    h: &'a [u8],
    offset: u64,
    location: &'a str,
}

impl Read for RemoteReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        match self.s.read_at(self.h, self.offset, buf) {
            Ok(n) => {
                self.offset += n as u64;
                Ok(n)
            }
            Err(e) => Err(std::io::Error::new(
                e.kind(),
                format!("{}: {e}", self.location),
            )),
        }
    }
}

impl Backend for SftpBackend {
    fn location(&self) -> String {
        self.target.to_string()
    }

    fn create(&self) -> Result<()> {
        let root = self.target.path.clone();
        self.with("config", |s| {
            match s.lstat(&self.join("config")) {
                Ok(_) => return Err(Error::RepositoryExists(self.location()).into()),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
            let found = match s.read_dir(&root) {
                Ok(v) => v,
                Err(e) if e.is_not_found() => {
                    mkdir_all(s, &root)?;
                    Vec::new()
                }
                Err(e) => return Err(e.into()),
            };
            let entries: Vec<(String, bool)> = found
                .iter()
                .map(|(n, a)| (n.clone(), a.file_type() == Some(FileType::Directory)))
                .collect();
            let empty = |name: &str| s.read_dir(&self.join(name)).map(|v| v.is_empty());
            if !super::unfinished_layout(&entries, empty)? {
                return Err(Error::Usage(format!(
                    "{} exists and is not empty; refusing to create a repository there",
                    self.location()
                ))
                .into());
            }
            for k in Kind::LISTABLE {
                mkdir_all(s, &self.join(k.dir()))?;
            }
            Ok(())
        })
    }

    fn exists(&self, kind: Kind, name: &str) -> Result<bool> {
        let p = self.object_path(kind, name)?;
        self.with(&kind.path(name), |s| match s.lstat(&p) {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e.into()),
        })
    }

    fn list(&self, kind: Kind) -> Result<Vec<Entry>> {
        self.with(kind.dir(), |s| {
            let mut dirs = vec![kind.dir().to_string()];
            if kind == Kind::Pack {
                dirs = self.object_dirs(s)?;
                dirs.retain(|d| d.starts_with(&format!("{}/", Kind::Pack.dir())));
            }
            let mut out = Vec::new();
            for d in dirs {
                let entries = match s.read_dir(&self.join(&d)) {
                    Ok(v) => v,
                    Err(e) if e.is_not_found() => continue,
                    Err(e) => return Err(e.into()),
                };
                out.extend(
                    entries
                        .into_iter()
                        .filter(|(n, _)| !n.starts_with('.'))
                        .map(|(name, a)| Entry {
                            name,
                            size: a.size.unwrap_or(0),
                        }),
                );
            }
            Ok(out)
        })
    }

    fn read_bounded(&self, kind: Kind, name: &str, max: u64) -> Result<Vec<u8>> {
        let object = kind.path(name);
        let p = self.object_path(kind, name)?;
        let location = self.location();
        self.with(&object, |s| {
            let size = self.stat_object(s, kind, name)?;
            if size > max {
                // Refused before the file is even opened.
                return Ok(super::read_limited(&object, std::io::empty(), size, max)?);
            }
            let h = s.open(&p, proto::FXF_READ, 0)?;
            let reader = RemoteReader {
                s: &mut *s,
                h: &h,
                offset: 0,
                location: &location,
            };
            let res = super::read_limited(&object, reader, size, max);
            if !s.is_dead() {
                let _ = s.close(&h);
            }
            let data = res?;
            if let Some(t) = &self.down {
                t.take(data.len());
            }
            Ok(data)
        })
    }

    fn read_range(&self, kind: Kind, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let object = kind.path(name);
        let p = self.object_path(kind, name)?;
        self.with(&object, |s| {
            let size = self.stat_object(s, kind, name)?;
            if offset.checked_add(len).is_none_or(|end| end > size) {
                return Err(Error::corrupt(
                    &object,
                    format!("range {offset}+{len} is beyond the object's {size} bytes"),
                )
                .into());
            }
            let n = usize::try_from(len).map_err(|_| Error::internal("range too large"))?;
            let mut buf = vec![0u8; n];
            let h = s.open(&p, proto::FXF_READ, 0)?;
            let res = s.read_at(&h, offset, &mut buf);
            if !s.is_dead() {
                let _ = s.close(&h);
            }
            let got = res?;
            if let Some(t) = &self.down {
                t.take(got);
            }
            if got < n {
                return Err(Error::corrupt(
                    &object,
                    format!(
                        "{got} bytes at {offset} where {len} were expected (changed while read?)"
                    ),
                )
                .into());
            }
            Ok(buf)
        })
    }

    fn size(&self, kind: Kind, name: &str) -> Result<u64> {
        self.with(&kind.path(name), |s| self.stat_object(s, kind, name))
    }

    fn write(&self, kind: Kind, name: &str, data: &[u8]) -> Result<()> {
        self.upload(kind, name, &mut std::io::Cursor::new(data))
    }

    /// A local temporary file (TMPDIR), uploaded at commit.
    fn stage(&self, kind: Kind) -> Result<Staged> {
        let _ = kind;
        let mut rnd = [0u8; 8];
        crate::crypto::fill_random(&mut rnd)?;
        let path = std::env::temp_dir().join(format!("larder-sftp-{}", hex::encode(rnd)));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        Ok(Staged::File(StagedFile {
            file: Some(file),
            path,
        }))
    }

    fn commit(&self, kind: Kind, name: &str, staged: Staged) -> Result<()> {
        let mut staged = match staged {
            Staged::Memory(v) => return self.write(kind, name, &v),
            Staged::File(f) => f,
        };
        let Some(file) = staged.file.take() else {
            return Err(Error::internal(format!(
                "{} is closed",
                staged.path.display()
            )));
        };
        let res = self.upload(kind, name, &mut std::io::BufReader::new(file));
        drop(staged); // removes the local file
        res
    }

    /// Where the server offers `posix-rename@openssh.com` (rename(2) on
    /// OpenSSH's server, an atomic replace): the bytes go to a `.tmp-*`
    /// file at the root as [`Backend::write`]'s do, flushed and closed,
    /// which is renamed over `config`, there and a regular file. Without
    /// the extension, refused (SFTP v3 RENAME does not replace).
    fn replace_config(&self, data: &[u8]) -> Result<()> {
        let (kind, name) = (Kind::Config, "config");
        let target = self.object_path(kind, name)?;
        let location = self.location();
        self.with(&kind.path(name), |s| {
            if !s.has_posix_rename() {
                return Err(Error::Usage(format!(
                    "{location}: this storage cannot replace the config atomically (the SFTP server does not offer posix-rename@openssh.com), so larder will not migrate it here"
                ))
                .into());
            }
            match s.lstat(&target) {
                Ok(a) => check_regular(kind, name, &a)?,
                Err(e) if e.is_not_found() => {
                    return Err(Error::NoRepository(location.clone()).into());
                }
                Err(e) => return Err(e.into()),
            }
            let mut rnd = [0u8; 8];
            crate::crypto::fill_random(&mut rnd)?;
            let tmp = self.join(&format!("{TMP_PREFIX}{}", hex::encode(rnd)));
            let flags = proto::FXF_WRITE | proto::FXF_CREAT | proto::FXF_EXCL;
            let h = s.open(&tmp, flags, 0o600)?;
            let mut limited = Limited {
                inner: &mut std::io::Cursor::new(data),
                throttle: self.up.as_ref(),
            };
            let res =
                write_and_close(s, &h, &mut limited).and_then(|()| s.posix_rename(&tmp, &target));
            if res.is_err() && !s.is_dead() {
                let _ = s.remove(&tmp);
            }
            Ok(res?)
        })
    }

    fn delete(&self, kind: Kind, name: &str) -> Result<()> {
        let p = self.object_path(kind, name)?;
        self.with(&kind.path(name), |s| match s.remove(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e.into()),
        })
    }

    /// The `.tmp-*` uploads in every object directory, and the files at
    /// the root (a killed `init`'s config write), relative to the root.
    fn leftovers(&self) -> Result<Vec<String>> {
        self.with("leftovers", |s| {
            let mut out = Vec::new();
            let mut dirs = self.object_dirs(s)?;
            dirs.push(String::new());
            for d in dirs {
                let entries = match s.read_dir(&self.join(&d)) {
                    Ok(v) => v,
                    Err(e) if e.is_not_found() => continue,
                    Err(e) => return Err(e.into()),
                };
                out.extend(
                    entries
                        .into_iter()
                        .filter(|(n, a)| {
                            n.starts_with(TMP_PREFIX)
                                && !(d.is_empty() && a.file_type() == Some(FileType::Directory))
                        })
                        .map(|(n, _)| if d.is_empty() { n } else { format!("{d}/{n}") }),
                );
            }
            out.sort();
            Ok(out)
        })
    }

    fn remove_leftover(&self, name: &str) -> Result<()> {
        let parts: Vec<&str> = name.split('/').collect();
        let ok = parts.last().is_some_and(|f| f.starts_with(TMP_PREFIX))
            && parts
                .iter()
                .all(|p| !p.is_empty() && *p != "." && *p != ".." && !p.contains('\0'));
        if !ok {
            return Err(Error::internal(format!("{name:?} is not a leftover")));
        }
        let p = self.join(name);
        self.with(name, |s| match s.remove(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e.into()),
        })
    }

    /// The object's mtime against the mtime the server gives a new probe
    /// file in the same directory: both from the server's clock.
    fn age(&self, kind: Kind, name: &str) -> Result<Option<Duration>> {
        let p = self.object_path(kind, name)?;
        let mut rnd = [0u8; 8];
        crate::crypto::fill_random(&mut rnd)?;
        let probe = self.join(&format!(
            "{}/{PROBE_PREFIX}{}",
            kind.dir(),
            hex::encode(rnd)
        ));
        self.with(&kind.path(name), |s| {
            let modified = s.lstat(&p)?.mtime;
            let flags = proto::FXF_WRITE | proto::FXF_CREAT | proto::FXF_EXCL;
            let h = s.open(&probe, flags, 0o600)?;
            let now = s.fstat(&h).map(|a| a.mtime);
            let _ = s.close(&h);
            let _ = s.remove(&probe);
            Ok(match (now?, modified) {
                (Some(now), Some(m)) => Some(Duration::from_secs(u64::from(now.saturating_sub(m)))),
                _ => None,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(user: Option<&str>, host: &str, path: &str) -> SftpTarget {
        SftpTarget {
            user: user.map(str::to_string),
            host: host.to_string(),
            port: None,
            path: path.to_string(),
        }
    }

    #[test]
    fn targets_parse() {
        let ok = [
            ("user@host:/srv/repo", t(Some("user"), "host", "/srv/repo")),
            ("alias:repo", t(None, "alias", "repo")),
            ("alias:repo/", t(None, "alias", "repo")),
            ("h:/", t(None, "h", "/")),
            ("a@b@host:/x:y", t(Some("a@b"), "host", "/x:y")),
            ("me@[::1]:/r", t(Some("me"), "::1", "/r")),
            ("[fe80::1]:r", t(None, "fe80::1", "r")),
        ];
        for (s, want) in ok {
            assert_eq!(SftpTarget::parse(s).unwrap(), want, "{s}");
        }
        assert_eq!(
            SftpTarget::parse("me@[::1]:/r").unwrap().to_string(),
            "sftp:me@[::1]:/r"
        );
        assert_eq!(SftpTarget::parse("u@h:/r").unwrap().destination(), "u@h");
        for bad in [
            "host",
            ":/path",
            "host:",
            "@host:/p",
            "-oProxyCommand=x:/p",
            "u@-h:/p",
            "[::1/p",
            "h st:/p",
        ] {
            let e = SftpTarget::parse(bad).unwrap_err();
            assert!(
                e.to_string().contains("sftp:[user@]host:/path"),
                "{bad}: {e}"
            );
        }
    }

    /// A port from the repository string reaches ssh as `-p` before the
    /// destination (and a command line as `LARDER_SFTP_PORT`); without one,
    /// ssh's own configuration decides.
    #[test]
    fn a_port_reaches_ssh() {
        let args = |t: SftpTarget| -> Vec<String> {
            let mut b = SftpBackend::new(t).unwrap();
            b.command_line = None;
            let (c, _) = b.command();
            assert_eq!(c.get_program(), "ssh");
            c.get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let with = SftpTarget::new(Some("me"), "nas", Some(2222), "/r").unwrap();
        let got = args(with.clone());
        let p = got.iter().position(|a| a == "-p").unwrap();
        assert_eq!(got[p + 1], "2222");
        let dest = got.iter().position(|a| a == "me@nas").unwrap();
        assert!(p < dest && got[dest - 1] == "--", "{got:?}");
        assert!(!args(t(Some("me"), "nas", "/r")).contains(&"-p".to_string()));

        let mut b = SftpBackend::new(with).unwrap();
        b.command_line = Some("true".into());
        let (c, _) = b.command();
        let port = c.get_envs().find(|(k, _)| *k == "LARDER_SFTP_PORT");
        assert_eq!(
            port.and_then(|(_, v)| v),
            Some(std::ffi::OsStr::new("2222"))
        );
    }

    #[test]
    fn objects_join_the_root() {
        let b = SftpBackend::new(t(None, "h", "/srv/r")).unwrap();
        assert_eq!(
            b.object_path(Kind::Pack, "abcd").unwrap(),
            "/srv/r/packs/ab/abcd"
        );
        assert_eq!(
            b.object_path(Kind::Config, "config").unwrap(),
            "/srv/r/config"
        );
        assert!(b.object_path(Kind::Snapshot, "../x").is_err());
        assert!(b.object_path(Kind::Snapshot, ".tmp-1").is_err());
        let b = SftpBackend::new(t(None, "h", "/")).unwrap();
        assert_eq!(b.object_path(Kind::Key, "k").unwrap(), "/keys/k");
    }

    #[test]
    fn leftover_names_are_checked() {
        let b = SftpBackend::new(t(None, "h", "/srv/r")).unwrap();
        for bad in ["packs/ab/abcd", "../.tmp-1", "/.tmp-1", "packs//.tmp-1"] {
            assert!(b.remove_leftover(bad).is_err(), "{bad}");
        }
    }
}
