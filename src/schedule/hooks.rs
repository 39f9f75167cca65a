//! Hooks: shell commands run through `sh -c` in their own process group,
//! with a time limit (on expiry the whole group gets SIGTERM, then SIGKILL
//! five seconds later), the run's facts in `LARDER_*` environment variables,
//! and the last 4 KiB of their output (stdout and stderr together) kept for
//! the record. `LARDER_PASSWORD` is removed from their environment.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How much of a hook's output is kept.
pub const OUTPUT_TAIL: usize = 4096;
/// How long a hook has to exit after SIGTERM before SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// What a hook is told about the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HookEnv {
    pub profile: String,
    /// `running` (for `before`), `ok` or `failed`.
    pub result: String,
    pub exit_code: i32,
    pub error: String,
    pub snapshot_id: String,
    pub files_added: u64,
    pub bytes_added: u64,
}

impl HookEnv {
    /// The variables, by name.
    pub fn vars(&self, hook: &str) -> Vec<(&'static str, String)> {
        vec![
            ("LARDER_HOOK", hook.to_string()),
            ("LARDER_PROFILE", self.profile.clone()),
            ("LARDER_RESULT", self.result.clone()),
            ("LARDER_EXIT_CODE", self.exit_code.to_string()),
            ("LARDER_ERROR", self.error.clone()),
            ("LARDER_SNAPSHOT_ID", self.snapshot_id.clone()),
            ("LARDER_FILES_ADDED", self.files_added.to_string()),
            ("LARDER_BYTES_ADDED", self.bytes_added.to_string()),
        ]
    }
}

/// How a hook ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookResult {
    pub ok: bool,
    /// `exited with status 0`, `exited with status 3`, `timed out after 2s`…
    pub message: String,
    /// The tail of its output.
    pub output: String,
}

/// Runs `command` as hook `hook` (`before`, `after`, `on-success`,
/// `on-failure`) with a time limit.
pub fn run_hook(hook: &str, command: &str, env: &HookEnv, timeout: Duration) -> HookResult {
    let fail = |message: String| HookResult {
        ok: false,
        message,
        output: String::new(),
    };
    let (reader, writer) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => return fail(format!("cannot create a pipe: {e}")),
    };
    let writer2 = match writer.try_clone() {
        Ok(w) => w,
        Err(e) => return fail(format!("cannot create a pipe: {e}")),
    };
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2)
        .env_remove("LARDER_PASSWORD")
        .envs(env.vars(hook))
        .process_group(0);
    let spawned = cmd.spawn();
    // The parent's copies of the pipe's write end go with `cmd`, so the
    // reader sees end-of-file when the hook (and its children) are done.
    drop(cmd);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return fail(format!("cannot start sh: {e}")),
    };
    let output = Arc::new(Mutex::new(Vec::new()));
    let (eof_tx, eof_rx) = channel();
    let sink = Arc::clone(&output);
    std::thread::spawn(move || {
        read_tail(reader, &sink);
        let _ = eof_tx.send(());
    });
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (status_tx, status_rx) = channel();
    std::thread::spawn(move || {
        let _ = status_tx.send(child.wait());
    });
    let (status, timed_out) = match status_rx.recv_timeout(timeout) {
        Ok(s) => (s, false),
        Err(RecvTimeoutError::Timeout) => (stop_group(pgid, &status_rx), true),
        Err(RecvTimeoutError::Disconnected) => return fail("lost track of the hook".into()),
    };
    // Output written just before exit may still be in the pipe.
    let _ = eof_rx.recv_timeout(Duration::from_secs(2));
    let output = tail_text(&output);
    let (ok, message) = match (timed_out, status) {
        (true, _) => (
            false,
            format!("timed out after {}", super::values::duration_text(timeout)),
        ),
        (false, Ok(s)) => (s.success(), describe(s)),
        (false, Err(e)) => (false, format!("cannot wait for the hook: {e}")),
    };
    HookResult {
        ok,
        message,
        output,
    }
}

/// SIGTERM to the hook's process group, SIGKILL if it lingers.
fn stop_group(
    pgid: nix::unistd::Pid,
    status: &std::sync::mpsc::Receiver<std::io::Result<ExitStatus>>,
) -> std::io::Result<ExitStatus> {
    use nix::sys::signal::{Signal, killpg};
    let _ = killpg(pgid, Signal::SIGTERM);
    match status.recv_timeout(KILL_GRACE) {
        Ok(s) => {
            // The shell is gone; make sure its children are too.
            let _ = killpg(pgid, Signal::SIGKILL);
            s
        }
        Err(_) => {
            let _ = killpg(pgid, Signal::SIGKILL);
            status
                .recv()
                .unwrap_or_else(|_| Err(std::io::Error::other("hook did not exit")))
        }
    }
}

fn describe(s: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "ended".into(),
    }
}

/// Reads everything, keeping the last [`OUTPUT_TAIL`] bytes.
fn read_tail(mut r: impl Read, sink: &Mutex<Vec<u8>>) {
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        let mut v = match sink.lock() {
            Ok(v) => v,
            Err(p) => p.into_inner(),
        };
        v.extend_from_slice(&buf[..n]);
        if v.len() > OUTPUT_TAIL {
            let cut = v.len() - OUTPUT_TAIL;
            v.drain(..cut);
        }
    }
}

fn tail_text(v: &Mutex<Vec<u8>>) -> String {
    let bytes = match v.lock() {
        Ok(v) => v.clone(),
        Err(p) => p.into_inner().clone(),
    };
    String::from_utf8_lossy(&bytes).trim_end().to_string()
}

#[cfg(test)]
#[path = "hooks_tests.rs"]
mod tests;
