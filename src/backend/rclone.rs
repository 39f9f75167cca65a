//! Repositories reached through rclone (`rclone:REMOTE:PATH`), as restic's
//! rclone backend: any of rclone's storage systems (Google Drive, B2,
//! OneDrive, WebDAV, ...), configured in rclone as usual. larder starts
//! `rclone serve restic` for the path on a random port of 127.0.0.1, with a
//! random user and password that only this process knows (given in
//! rclone's environment, which other users cannot read), reads the
//! address rclone reports, and talks restic's REST protocol to it (the
//! REST backend). The server lives as long as the backend.
//!
//! rclone runs under a small shell wrapper that ends it when larder's end
//! of the wrapper's standard input closes: when larder drops the backend,
//! exits, or is killed with SIGKILL, so no server is left behind. If rclone
//! exits first (a remote that does not exist, a wrong path), its last
//! words are the error.

use super::location::RestLocation;
use crate::error::{Error, Result};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Environment variable: the rclone program to run (default `rclone`).
pub const PROGRAM_VAR: &str = "LARDER_RCLONE_PROGRAM";

/// What rclone prints once it serves: `… Serving restic REST API on
/// http://127.0.0.1:PORT/`.
const SERVING: &str = "Serving restic REST API on ";

/// How many of rclone's last lines are kept for an error.
const KEEP_LINES: usize = 20;

/// The wrapper: rclone (`$0 "$@"`) in the background, ended when standard
/// input closes; the wrapper exits with rclone. Standard input is passed
/// on as descriptor 3 (a background job's own standard input is
/// `/dev/null`), and its reader writes nothing to standard error, so
/// rclone's exit closes that. Once rclone has exited on its own, the
/// watcher is ended before it could signal a process that took over
/// rclone's process id.
const WRAPPER: &str = r#"exec 3<&0
"$0" "$@" </dev/null 3<&- & p=$!
(cat <&3 >/dev/null; kill $p 2>/dev/null) 2>/dev/null & w=$!
exec 3<&-
wait $p; s=$?
kill $w 2>/dev/null
exit $s"#;

/// A running `rclone serve restic`, ended when dropped.
pub struct RcloneServer {
    child: Child,
    /// Held open while the server should run.
    stdin: Option<ChildStdin>,
}

impl Drop for RcloneServer {
    fn drop(&mut self) {
        // Closing its standard input ends rclone, then the wrapper.
        drop(self.stdin.take());
        if let Err(e) = self.child.wait() {
            eprintln!("warning: waiting for rclone: {e}");
        }
    }
}

/// Starts rclone serving `remote` (what follows `rclone:`), waiting up to
/// `timeout` for it to say where; returns the server and where to reach it.
pub fn start(remote: &str, timeout: Duration) -> Result<(RcloneServer, RestLocation)> {
    let shown = format!("rclone:{remote}");
    let program = std::env::var(PROGRAM_VAR).unwrap_or_else(|_| "rclone".into());
    let (user, password) = (random_word()?, random_word()?);
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(WRAPPER)
        .arg(&program)
        .args(["serve", "restic", "--addr", "127.0.0.1:0", remote])
        // As environment variables (rclone reads every flag so), which
        // other users cannot read, unlike arguments.
        .env("RCLONE_USER", &user)
        .env("RCLONE_PASS", &password)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // Its own process group: a Ctrl-C meant for larder leaves the
        // server up while larder stops cleanly (unlocks, saves).
        .process_group(0)
        .spawn()
        .map_err(|e| Error::Usage(format!("{shown}: cannot start {program}: {e}")))?;
    let (stdin, stderr) = (child.stdin.take(), child.stderr.take());
    let server = RcloneServer { child, stdin };
    let Some(stderr) = stderr else {
        return Err(Error::internal("rclone: no pipe from its standard error"));
    };
    // Its messages are read to the end (so it never blocks writing them);
    // the address goes back at once, or the last of them when it exits.
    let (tx, rx) = mpsc::channel::<std::result::Result<String, String>>();
    std::thread::spawn(move || {
        let mut log: VecDeque<String> = VecDeque::new();
        let mut sent = false;
        let mut reader = BufReader::new(stderr);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if sent {
                continue;
            }
            let line = String::from_utf8_lossy(&buf).trim_end().to_string();
            if let Some(at) = line.find(SERVING) {
                sent = true;
                let _ = tx.send(Ok(line[at + SERVING.len()..].to_string()));
            } else {
                log.push_back(line);
                if log.len() > KEEP_LINES {
                    log.pop_front();
                }
            }
        }
        if !sent {
            let _ = tx.send(Err(log.into_iter().collect::<Vec<_>>().join("\n")));
        }
    });
    let url = match rx.recv_timeout(timeout) {
        Ok(Ok(url)) => url,
        Ok(Err(log)) => {
            return Err(Error::Usage(format!(
                "{shown}: rclone stopped: {}",
                last_words(&log, &program)
            )));
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            return Err(Error::Usage(format!(
                "{shown}: rclone did not start serving within {} s",
                timeout.as_secs()
            )));
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            return Err(Error::internal("rclone: the reader of its messages ended"));
        }
    };
    let url = served_url(&url).ok_or_else(|| {
        Error::Usage(format!(
            "{shown}: rclone serves at {url:?}, not an address on 127.0.0.1"
        ))
    })?;
    let loc = RestLocation {
        url,
        user: Some(user),
        password: Some(password),
    };
    Ok((server, loc))
}

/// The address in what follows [`SERVING`]: `http://127.0.0.1:PORT/`,
/// or a list of them in brackets (rclone 1.61 and later).
fn served_url(text: &str) -> Option<url::Url> {
    text.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split([' ', ','])
        .filter_map(|u| url::Url::parse(u.trim()).ok())
        .find(|u| u.scheme() == "http" && u.host_str() == Some("127.0.0.1"))
}

/// rclone's messages, without the time stamps, or a word that it said none.
fn last_words(log: &str, program: &str) -> String {
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| !l.contains("Config file") || !l.contains("not found"))
        .map(without_stamp)
        .collect();
    match lines.is_empty() {
        true => format!("{program} exited without a message (is it installed?)"),
        false => lines.join("; "),
    }
}

/// A line of rclone's log without its `YYYY/MM/DD HH:MM:SS ` and level.
fn without_stamp(line: &str) -> &str {
    let stamped = line.len() > 20
        && line.as_bytes()[..19]
            .iter()
            .all(|b| b.is_ascii_digit() || matches!(b, b'/' | b':' | b' '));
    let rest = match stamped {
        true => line.get(20..).unwrap_or(line),
        false => line,
    };
    for level in ["NOTICE", "ERROR", "INFO", "DEBUG", "CRITICAL"] {
        if let Some(r) = rest.strip_prefix(level) {
            return r.trim_start_matches([' ', ':']);
        }
    }
    rest
}

/// 16 random bytes as hex: a user or password for this server only.
fn random_word() -> Result<String> {
    let mut b = [0u8; 16];
    crate::crypto::fill_random(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rclones_messages_lose_their_time_stamps() {
        let log = "2026/12/07 18:23:11 NOTICE: Config file \"/root/.config/rclone/rclone.conf\" not found - using defaults\n\
                   2026/12/07 18:23:11 Failed to create file system for \"nope:x\": didn't find section in config file\n";
        assert_eq!(
            last_words(log, "rclone"),
            "Failed to create file system for \"nope:x\": didn't find section in config file"
        );
        assert!(last_words("", "rclone").contains("is it installed"));
        assert_eq!(
            without_stamp("2026/12/07 18:23:1é x"),
            "2026/12/07 18:23:1é x"
        );
    }

    /// rclone 1.60 names one address; later versions a list in brackets.
    #[test]
    fn the_served_address_is_read_in_either_form() {
        for text in [
            "http://127.0.0.1:37173/",
            "[http://127.0.0.1:37173/]",
            "[http://[::1]:1/ http://127.0.0.1:37173/]",
        ] {
            let u = served_url(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(u.port(), Some(37173), "{text}");
        }
        assert!(served_url("http://10.0.0.1:80/").is_none());
        assert!(served_url("[]").is_none());
    }
}
