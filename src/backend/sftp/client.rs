//! One SFTP session: a child process (`ssh … -s sftp`, or the user's own
//! command) speaking SFTP version 3 over its stdin and stdout, and the
//! requests the backend makes through it. Writes and reads are pipelined
//! (up to [`WINDOW`] requests in flight, each at most 32 KiB of data).
//!
//! Nothing waits forever: every wait for the server is a `poll` with a
//! timeout, and a child that exits (ssh could not connect, the connection
//! dropped) ends the session with an error that carries ssh's exit status
//! and the last lines it wrote to stderr. A session that failed that way,
//! or saw a reply it cannot trust, is marked dead and never used again.

use super::proto::{self, Attrs, Reply, Request};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::collections::VecDeque;
use std::fmt;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Requests in flight at once in a pipelined read or write.
pub const WINDOW: usize = 16;

/// The most of ssh's stderr kept for error messages.
const STDERR_KEEP: usize = 4096;

/// What went wrong in a request.
#[derive(Debug)]
pub enum SftpError {
    /// The server answered with an error status.
    Status { code: u32, message: String },
    /// The session is gone or unusable (the child exited, a timeout, a
    /// malformed reply); the message says why.
    Transport(String),
    /// Reading the local data to upload failed.
    Local(std::io::Error),
}

impl SftpError {
    /// The I/O error kind callers test for (not found, permission denied).
    pub fn kind(&self) -> ErrorKind {
        match self {
            SftpError::Status { code, .. } if *code == proto::FX_NO_SUCH_FILE => {
                ErrorKind::NotFound
            }
            SftpError::Status { code, .. } if *code == proto::FX_PERMISSION_DENIED => {
                ErrorKind::PermissionDenied
            }
            SftpError::Status { code, .. } if *code == proto::FX_OP_UNSUPPORTED => {
                ErrorKind::Unsupported
            }
            SftpError::Status { .. } => ErrorKind::Other,
            SftpError::Transport(_) => ErrorKind::BrokenPipe,
            SftpError::Local(e) => e.kind(),
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }
}

impl fmt::Display for SftpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SftpError::Status { code, message } if message.is_empty() => {
                write!(f, "the server says {}", proto::status_name(*code))
            }
            SftpError::Status { code, message } => {
                write!(
                    f,
                    "the server says {message:?} ({})",
                    proto::status_name(*code)
                )
            }
            SftpError::Transport(m) => f.write_str(m),
            SftpError::Local(e) => write!(f, "reading the data to upload: {e}"),
        }
    }
}

pub type SResult<T> = Result<T, SftpError>;

/// A live SFTP session over a child process.
pub struct Session {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_thread: Option<JoinHandle<()>>,
    next_id: u32,
    fsync_ext: bool,
    /// The server offers `posix-rename@openssh.com`.
    posix_rename_ext: bool,
    dead: bool,
    /// The child has been waited for: its pid (and process group id) may
    /// belong to another process now, so no signal goes there any more.
    reaped: bool,
    timeout: Duration,
    /// What was started, for messages ("ssh", "LARDER_SFTP_COMMAND").
    what: String,
}

impl Session {
    /// Starts `cmd` (in its own process group, so that a Ctrl-C meant for
    /// larder does not kill the transfer under it) and does the INIT /
    /// VERSION exchange. `timeout` bounds every wait for the server.
    pub fn start(mut cmd: Command, what: &str, timeout: Duration) -> SResult<Session> {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| SftpError::Transport(format!("cannot start {what}: {e}")))?;
        let (Some(stdin), Some(stdout), Some(mut err)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(SftpError::Transport(format!(
                "{what}: no pipes to the child"
            )));
        };
        // Writes poll for room instead of blocking on a stalled connection.
        let nb = nix::fcntl::fcntl(
            stdin.as_fd(),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        );
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let keep = stderr.clone();
        let stderr_thread = std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut k) = keep.lock() {
                    k.extend_from_slice(&buf[..n]);
                    let over = k.len().saturating_sub(STDERR_KEEP);
                    k.drain(..over);
                }
            }
        });
        let mut s = Session {
            child,
            stdin,
            stdout,
            stderr,
            stderr_thread: Some(stderr_thread),
            next_id: 1,
            fsync_ext: false,
            posix_rename_ext: false,
            dead: false,
            reaped: false,
            timeout,
            what: what.to_string(),
        };
        if let Err(e) = nb {
            return Err(s.fail(format!("cannot make the pipe to {what} non-blocking: {e}")));
        }
        s.handshake()?;
        Ok(s)
    }

    fn handshake(&mut self) -> SResult<()> {
        self.send(&Request::init().finish())?;
        let body = self.recv_body()?;
        let (version, ext) = match proto::parse_version(&body) {
            Ok(v) => v,
            Err(e) => return Err(self.fail(e.to_string())),
        };
        if version != proto::VERSION {
            return Err(self.fail(format!(
                "the server speaks SFTP version {version}; larder speaks version 3"
            )));
        }
        self.fsync_ext = ext.iter().any(|e| e == "fsync@openssh.com");
        self.posix_rename_ext = ext.iter().any(|e| e == "posix-rename@openssh.com");
        Ok(())
    }

    /// Whether the session can no longer be used.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Ends the session after a failure: kills the child's process group,
    /// and returns an error saying `what` happened, with the child's exit
    /// status and the end of its stderr.
    fn fail(&mut self, what: String) -> SftpError {
        self.dead = true;
        // A child that is exiting by itself (ssh could not connect) gets a
        // moment to do so, so that its own status and message are reported.
        let deadline = Instant::now() + Duration::from_secs(2);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => {
                    self.reaped = true;
                    break Some(s);
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    self.kill();
                    break None;
                }
            }
        };
        self.kill();
        // The stderr reader ends when the last holder of the pipe exits.
        let deadline = Instant::now() + Duration::from_millis(500);
        while self
            .stderr_thread
            .as_ref()
            .is_some_and(|t| !t.is_finished())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        let err = self
            .stderr
            .lock()
            .map(|v| String::from_utf8_lossy(&v).trim().to_string())
            .unwrap_or_default();
        let mut msg = what;
        if let Some(s) = status {
            msg.push_str(&format!("; {} exited with {s}", self.what));
        }
        if !err.is_empty() {
            let tail: Vec<&str> = err.lines().rev().take(4).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            msg.push_str(&format!("; it said: {}", tail.join(" / ")));
        }
        SftpError::Transport(msg)
    }

    fn kill(&mut self) {
        if self.reaped {
            return;
        }
        // The whole group (a shell's ssh too), while the child's pid is
        // still reserved for it (not yet waited for).
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.reaped = true;
    }

    fn wait_for(&mut self, flags: PollFlags, reading: bool) -> SResult<()> {
        let ms = i32::try_from(self.timeout.as_millis()).unwrap_or(i32::MAX);
        let ready = {
            let fd = if reading {
                self.stdout.as_fd()
            } else {
                self.stdin.as_fd()
            };
            let mut fds = [PollFd::new(fd, flags)];
            loop {
                match poll(
                    &mut fds,
                    PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
                ) {
                    Err(nix::errno::Errno::EINTR) => continue,
                    other => break other,
                }
            }
        };
        match ready {
            Ok(0) => Err(self.fail(format!(
                "no answer from the server for {} s; gave up (LARDER_SFTP_TIMEOUT sets the limit)",
                self.timeout.as_secs()
            ))),
            Ok(_) => Ok(()),
            Err(e) => Err(self.fail(format!("waiting for {}: {e}", self.what))),
        }
    }

    fn send(&mut self, mut pkt: &[u8]) -> SResult<()> {
        if self.dead {
            return Err(SftpError::Transport("the SFTP session is closed".into()));
        }
        while !pkt.is_empty() {
            match self.stdin.write(pkt) {
                Ok(0) => return Err(self.fail(format!("{} stopped reading", self.what))),
                Ok(n) => pkt = &pkt[n..],
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.wait_for(PollFlags::POLLOUT, false)?
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(self.fail(format!("the connection to the server is gone ({e})")));
                }
            }
        }
        Ok(())
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> SResult<()> {
        let mut got = 0;
        while got < buf.len() {
            self.wait_for(PollFlags::POLLIN, true)?;
            match self.stdout.read(&mut buf[got..]) {
                Ok(0) => return Err(self.fail("the connection to the server closed".into())),
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => {
                    return Err(self.fail(format!("reading from the server: {e}")));
                }
            }
        }
        Ok(())
    }

    /// One packet's body, its length bounded by [`proto::MAX_PACKET`]
    /// before anything is allocated for it.
    fn recv_body(&mut self) -> SResult<Vec<u8>> {
        if self.dead {
            return Err(SftpError::Transport("the SFTP session is closed".into()));
        }
        let mut len = [0u8; 4];
        self.read_exact(&mut len)?;
        let len = u32::from_be_bytes(len) as usize;
        if len == 0 || len > proto::MAX_PACKET {
            return Err(self.fail(format!(
                "the server sent a packet of {len} bytes (at most {} are accepted); is the remote shell printing text?",
                proto::MAX_PACKET
            )));
        }
        let mut body = vec![0u8; len];
        self.read_exact(&mut body)?;
        Ok(body)
    }

    fn recv(&mut self) -> SResult<(u32, Reply)> {
        let body = self.recv_body()?;
        match proto::parse_reply(&body) {
            Ok(r) => Ok(r),
            Err(e) => Err(self.fail(e.to_string())),
        }
    }

    fn id(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        id
    }

    /// Sends one request built by `build` (given the request id) and waits
    /// for its reply.
    fn call(&mut self, build: impl FnOnce(u32) -> Request) -> SResult<Reply> {
        let id = self.id();
        self.send(&build(id).finish())?;
        let (got, reply) = self.recv()?;
        if got != id {
            return Err(self.fail(format!(
                "the server answered request {got} where {id} was expected"
            )));
        }
        Ok(reply)
    }

    fn unexpected(&mut self, reply: &Reply, wanted: &str) -> SftpError {
        self.fail(format!(
            "the server sent {} where {wanted} was expected",
            describe(reply)
        ))
    }

    fn status(&mut self, reply: Reply) -> SResult<()> {
        match reply {
            Reply::Status { code: 0, .. } => Ok(()),
            Reply::Status { code, message } => Err(SftpError::Status { code, message }),
            r => Err(self.unexpected(&r, "a status")),
        }
    }

    fn attrs(&mut self, reply: Reply) -> SResult<Attrs> {
        match reply {
            Reply::Attrs(a) => Ok(a),
            Reply::Status { code, message } if code != 0 => {
                Err(SftpError::Status { code, message })
            }
            r => Err(self.unexpected(&r, "attributes")),
        }
    }

    fn handle(&mut self, reply: Reply) -> SResult<Vec<u8>> {
        match reply {
            Reply::Handle(h) => Ok(h),
            Reply::Status { code, message } if code != 0 => {
                Err(SftpError::Status { code, message })
            }
            r => Err(self.unexpected(&r, "a handle")),
        }
    }

    /// Opens `path` with the `FXF_*` flags `flags`, new files with `mode`.
    pub fn open(&mut self, path: &str, flags: u32, mode: u32) -> SResult<Vec<u8>> {
        let r = self.call(|id| {
            Request::new(proto::FXP_OPEN, id)
                .str(path)
                .u32(flags)
                .perms(mode)
        })?;
        self.handle(r)
    }

    pub fn close(&mut self, handle: &[u8]) -> SResult<()> {
        let r = self.call(|id| Request::new(proto::FXP_CLOSE, id).bytes(handle))?;
        self.status(r)
    }

    /// The attributes of `path`, not following a link.
    pub fn lstat(&mut self, path: &str) -> SResult<Attrs> {
        let r = self.call(|id| Request::new(proto::FXP_LSTAT, id).str(path))?;
        self.attrs(r)
    }

    /// The attributes of `path`, following links.
    pub fn stat(&mut self, path: &str) -> SResult<Attrs> {
        let r = self.call(|id| Request::new(proto::FXP_STAT, id).str(path))?;
        self.attrs(r)
    }

    pub fn fstat(&mut self, handle: &[u8]) -> SResult<Attrs> {
        let r = self.call(|id| Request::new(proto::FXP_FSTAT, id).bytes(handle))?;
        self.attrs(r)
    }

    pub fn remove(&mut self, path: &str) -> SResult<()> {
        let r = self.call(|id| Request::new(proto::FXP_REMOVE, id).str(path))?;
        self.status(r)
    }

    pub fn mkdir(&mut self, path: &str, mode: u32) -> SResult<()> {
        let r = self.call(|id| Request::new(proto::FXP_MKDIR, id).str(path).perms(mode))?;
        self.status(r)
    }

    /// SFTP v3 RENAME, which (unlike `posix-rename@openssh.com`) fails if
    /// `to` exists: the write-once primitive.
    pub fn rename(&mut self, from: &str, to: &str) -> SResult<()> {
        let r = self.call(|id| Request::new(proto::FXP_RENAME, id).str(from).str(to))?;
        self.status(r)
    }

    /// Whether the server offers `posix-rename@openssh.com`.
    pub fn has_posix_rename(&self) -> bool {
        self.posix_rename_ext
    }

    /// `posix-rename@openssh.com`: POSIX rename(2) of `from` to `to`, which
    /// atomically replaces `to` if it exists. Refused (as unsupported)
    /// without sending anything if the server does not offer it.
    pub fn posix_rename(&mut self, from: &str, to: &str) -> SResult<()> {
        if !self.posix_rename_ext {
            return Err(SftpError::Status {
                code: proto::FX_OP_UNSUPPORTED,
                message: "posix-rename@openssh.com is not offered".into(),
            });
        }
        let r = self.call(|id| {
            Request::new(proto::FXP_EXTENDED, id)
                .str("posix-rename@openssh.com")
                .str(from)
                .str(to)
        })?;
        self.status(r)
    }

    /// Flushes an open file to the server's disk, if the server offers
    /// `fsync@openssh.com`; returns whether it did.
    pub fn fsync(&mut self, handle: &[u8]) -> SResult<bool> {
        if !self.fsync_ext {
            return Ok(false);
        }
        let r = self.call(|id| {
            Request::new(proto::FXP_EXTENDED, id)
                .str("fsync@openssh.com")
                .bytes(handle)
        })?;
        self.status(r).map(|()| true)
    }

    /// Every entry of directory `path` but `.` and `..`.
    pub fn read_dir(&mut self, path: &str) -> SResult<Vec<(String, Attrs)>> {
        let r = self.call(|id| Request::new(proto::FXP_OPENDIR, id).str(path))?;
        let h = self.handle(r)?;
        let mut out = Vec::new();
        let res = loop {
            let r = self.call(|id| Request::new(proto::FXP_READDIR, id).bytes(&h))?;
            match r {
                Reply::Name(v) => out.extend(v.into_iter().filter(|(n, _)| n != "." && n != "..")),
                Reply::Status { code, .. } if code == proto::FX_EOF => break Ok(()),
                Reply::Status { code, message } => break Err(SftpError::Status { code, message }),
                r => return Err(self.unexpected(&r, "directory entries")),
            }
        };
        let closed = self.close(&h);
        res.and(closed)?;
        Ok(out)
    }

    /// Reads from `offset` into `buf` until it is full or the file ends;
    /// returns the bytes read. Requests are pipelined in batches.
    pub fn read_at(&mut self, handle: &[u8], offset: u64, buf: &mut [u8]) -> SResult<usize> {
        let mut pos = 0usize;
        while pos < buf.len() {
            // (id, start in buf, length asked, bytes got, hit the end)
            let mut batch: Vec<(u32, usize, usize, usize, bool)> = Vec::with_capacity(WINDOW);
            let mut next = pos;
            while next < buf.len() && batch.len() < WINDOW {
                let len = (buf.len() - next).min(proto::MAX_CHUNK);
                let id = self.id();
                let off = offset + next as u64;
                self.send(
                    &Request::new(proto::FXP_READ, id)
                        .bytes(handle)
                        .u64(off)
                        .u32(len as u32)
                        .finish(),
                )?;
                batch.push((id, next, len, 0, false));
                next += len;
            }
            let mut err = None;
            for _ in 0..batch.len() {
                let (id, reply) = self.recv()?;
                let Some(slot) = batch.iter_mut().find(|b| b.0 == id && b.3 == 0 && !b.4) else {
                    return Err(self.fail(format!("the server answered unknown request {id}")));
                };
                match reply {
                    Reply::Data(d) if d.len() <= slot.2 => {
                        buf[slot.1..slot.1 + d.len()].copy_from_slice(&d);
                        slot.3 = d.len();
                        if d.is_empty() {
                            slot.4 = true;
                        }
                    }
                    Reply::Data(d) => {
                        let msg =
                            format!("the server sent {} bytes for a read of {}", d.len(), slot.2);
                        return Err(self.fail(msg));
                    }
                    Reply::Status { code, .. } if code == proto::FX_EOF => slot.4 = true,
                    Reply::Status { code, message } => {
                        slot.4 = true;
                        err.get_or_insert(SftpError::Status { code, message });
                    }
                    r => return Err(self.unexpected(&r, "data")),
                }
            }
            if let Some(e) = err {
                return Err(e);
            }
            // Bytes count up to the first short or missing answer; the
            // rest is asked again (servers may return short reads).
            for &(_, start, len, got, eof) in &batch {
                pos = start + got;
                if eof && got == 0 {
                    return Ok(pos);
                }
                if got < len {
                    break;
                }
            }
        }
        Ok(pos)
    }

    /// Writes everything `src` yields to `handle` from offset 0, pipelined
    /// in chunks of at most 32 KiB; returns the bytes written.
    pub fn write_from(&mut self, handle: &[u8], src: &mut dyn Read) -> SResult<u64> {
        let mut chunk = vec![0u8; proto::MAX_CHUNK];
        let mut outstanding: VecDeque<u32> = VecDeque::with_capacity(WINDOW);
        let mut offset = 0u64;
        let mut done = false;
        let mut err: Option<SftpError> = None;
        loop {
            if !done && err.is_none() && outstanding.len() < WINDOW {
                let n = match fill(src, &mut chunk) {
                    Ok(n) => n,
                    Err(e) => {
                        err = Some(SftpError::Local(e));
                        continue;
                    }
                };
                if n == 0 {
                    done = true;
                    continue;
                }
                let id = self.id();
                self.send(
                    &Request::new(proto::FXP_WRITE, id)
                        .bytes(handle)
                        .u64(offset)
                        .bytes(&chunk[..n])
                        .finish(),
                )?;
                outstanding.push_back(id);
                offset += n as u64;
                continue;
            }
            if outstanding.is_empty() {
                break;
            }
            let (id, reply) = self.recv()?;
            let Some(i) = outstanding.iter().position(|&o| o == id) else {
                return Err(self.fail(format!("the server answered unknown request {id}")));
            };
            outstanding.remove(i);
            if let Err(e) = self.status(reply) {
                if self.dead {
                    return Err(e);
                }
                err.get_or_insert(e);
            }
        }
        match err {
            Some(e) => Err(e),
            None => Ok(offset),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Every request has been answered (or the session failed): nothing
        // is lost by ending the child at once.
        self.kill();
    }
}

/// Reads until `buf` is full or `src` ends.
fn fill(src: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match src.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn describe(r: &Reply) -> &'static str {
    match r {
        Reply::Status { .. } => "a status",
        Reply::Handle(_) => "a handle",
        Reply::Data(_) => "data",
        Reply::Name(_) => "directory entries",
        Reply::Attrs(_) => "attributes",
        Reply::Extended => "an extended reply",
    }
}
