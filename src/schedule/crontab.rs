//! Crontab entries for hosts without systemd (or with `--cron`): a marked
//! block per profile holding one line that runs `larder run --if-due
//! PROFILE` often enough to catch up missed runs: at every minute the
//! schedule fires in plus every quarter hour, or every minute when that
//! would be more than 12 times an hour or the schedule has seconds. The
//! editing is pure (crontab text in, crontab text out): installing twice
//! gives the same text, and removing gives back the text as it was before
//! installing, byte for byte. `read`/`write` are the thin `crontab -l` and
//! `crontab -` calls, and [`edit`] runs one read, change and write while
//! holding the state directory's crontab lock, so that two larder
//! processes editing at once never drop each other's blocks.

use super::invocation::{Invocation, check_line_safe, shell_word};
use super::profile::Profile;
use super::values::IoNice;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

const BEGIN: &str = "# BEGIN larder profile ";
const END: &str = "# END larder profile ";
/// Noted in the BEGIN line when larder had to end the previous last line.
const ADDED_NEWLINE: &str = "; added a final newline";

/// The minute field of the polling line.
pub fn poll_minutes(profile: &Profile) -> Result<String> {
    let s = profile
        .schedule
        .as_ref()
        .ok_or_else(|| profile.error_at("schedule", "has no schedule to install"))?;
    let (mut minutes, has_seconds) = s.minutes();
    minutes.extend([0, 15, 30, 45]);
    minutes.sort_unstable();
    minutes.dedup();
    if has_seconds || minutes.len() > 12 {
        return Ok("*".into());
    }
    Ok(minutes
        .iter()
        .map(u8::to_string)
        .collect::<Vec<_>>()
        .join(","))
}

/// Programs that lower a job's priority, found on this host when the
/// crontab is written (cron's PATH is short, so they are named by path).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PriorityTools {
    pub nice: Option<PathBuf>,
    pub ionice: Option<PathBuf>,
}

impl PriorityTools {
    /// Looks for `nice` and `ionice` in `$PATH`.
    pub fn find() -> Self {
        let find = |name: &str| {
            std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join(name))
                    .find(|f| f.is_file())
            })
        };
        PriorityTools {
            nice: find("nice"),
            ionice: find("ionice"),
        }
    }
}

/// The crontab line for a profile (without newline).
pub fn line(profile: &Profile, inv: &Invocation, tools: &PriorityTools) -> Result<String> {
    let minutes = poll_minutes(profile)?;
    let mut words = vec![format!(
        "LARDER_STATE_DIR={}",
        shell_word(&inv.state_dir.to_string_lossy())
    )];
    if let Some(nice) = &tools.nice {
        words.extend([
            shell_word(&nice.to_string_lossy()),
            "-n".into(),
            profile.nice.to_string(),
        ]);
    }
    if let Some(ionice) = &tools.ionice {
        match profile.ionice {
            IoNice::Unchanged => {}
            IoNice::Idle => words.extend([
                shell_word(&ionice.to_string_lossy()),
                "-c".into(),
                "3".into(),
            ]),
            IoNice::BestEffort(l) => words.extend([
                shell_word(&ionice.to_string_lossy()),
                "-c".into(),
                "2".into(),
                "-n".into(),
                l.to_string(),
            ]),
        }
    }
    words.extend(inv.argv(&profile.name, true).iter().map(|w| shell_word(w)));
    let line = format!("{minutes} * * * * {}", words.join(" "));
    check_line_safe("crontab line", &line)?;
    Ok(line)
}

/// Where a profile's block sits: byte range, and whether larder added the
/// newline just before it.
fn find_block(text: &str, profile: &str) -> Option<(usize, usize, bool)> {
    let mut pos = 0;
    let mut start = None;
    let mut added = false;
    for l in text.split_inclusive('\n') {
        let body = l.trim_end_matches('\n');
        if start.is_none()
            && let Some(rest) = body.strip_prefix(BEGIN)
            && rest.split([';', ' ']).next() == Some(profile)
        {
            start = Some(pos);
            added = body.ends_with(ADDED_NEWLINE);
        } else if let Some(s) = start
            && body.strip_prefix(END) == Some(profile)
        {
            return Some((s, pos + l.len(), added));
        }
        pos += l.len();
    }
    None
}

fn block(profile: &str, line: &str, added_newline: bool) -> String {
    format!(
        "{BEGIN}{profile}; remove with: larder schedule remove {profile}{}\n{line}\n{END}{profile}\n",
        if added_newline { ADDED_NEWLINE } else { "" }
    )
}

/// The crontab with the profile's block added, or replaced in place.
pub fn install(crontab: &str, profile: &str, line: &str) -> String {
    if let Some((start, end, added)) = find_block(crontab, profile) {
        return format!(
            "{}{}{}",
            &crontab[..start],
            block(profile, line, added),
            &crontab[end..]
        );
    }
    let added = !crontab.is_empty() && !crontab.ends_with('\n');
    let sep = if added { "\n" } else { "" };
    format!("{crontab}{sep}{}", block(profile, line, added))
}

/// The crontab without the profile's block (unchanged if it has none).
pub fn remove(crontab: &str, profile: &str) -> String {
    let Some((start, end, added)) = find_block(crontab, profile) else {
        return crontab.to_string();
    };
    let (before, rest) = (&crontab[..start], &crontab[end..]);
    if !added {
        return format!("{before}{rest}");
    }
    // The newline larder added before this block: dropped when the block
    // was last; else it now separates what follows, so the note moves to
    // the next larder block (user lines after it keep the newline).
    match rest.split_once('\n') {
        None if rest.is_empty() => before.strip_suffix('\n').unwrap_or(before).to_string(),
        Some((first, tail)) if first.starts_with(BEGIN) && !first.ends_with(ADDED_NEWLINE) => {
            format!("{before}{first}{ADDED_NEWLINE}\n{tail}")
        }
        _ => format!("{before}{rest}"),
    }
}

/// The profiles with a block in the crontab.
pub fn installed(crontab: &str) -> Vec<String> {
    crontab
        .lines()
        .filter_map(|l| l.strip_prefix(BEGIN))
        .filter_map(|r| r.split([';', ' ']).next())
        .filter(|p| find_block(crontab, p).is_some())
        .map(str::to_string)
        .collect()
}

/// How long [`edit`] waits for another larder process's crontab edit.
pub const EDIT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The lock file that serialises crontab edits: `locks/.crontab.lock` in
/// the state directory (a profile name cannot start with a dot, so it never
/// meets a profile's run lock).
pub fn edit_lock_path(state_dir: &Path) -> PathBuf {
    state_dir.join("locks").join(".crontab.lock")
}

/// Reads the crontab, applies `change`, and writes the result if it
/// differs, all under an exclusive `flock` on [`edit_lock_path`], waited
/// for up to `wait`. `crontab` itself has no lock: without this, two
/// installs at once both read the old table and the last write drops the
/// other's block. The kernel drops the lock when its holder exits, however
/// it exits. Returns the table before and after.
pub fn edit(
    state_dir: &Path,
    wait: std::time::Duration,
    change: impl FnOnce(&str) -> Result<String>,
) -> Result<(String, String)> {
    let _lock = lock_for_edit(state_dir, wait)?;
    let old = read()?;
    let new = change(&old)?;
    if new != old {
        write(&new)?;
    }
    Ok((old, new))
}

fn lock_for_edit(state_dir: &Path, wait: std::time::Duration) -> Result<std::fs::File> {
    use std::fs::TryLockError;
    let path = edit_lock_path(state_dir);
    // The state directory is made as every command makes it (0700, tagged),
    // in case this is the first command to need it.
    crate::host::prepare_state_dir(state_dir)?;
    let file = super::runlock::open_lock_file(&path)?;
    let deadline = std::time::Instant::now() + wait;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(Error::Locked(format!(
                    "another larder process has been editing the crontab for {} s (it holds {}); try again once it ends",
                    wait.as_secs(),
                    path.display()
                )));
            }
            Err(TryLockError::Error(e)) => return Err(Error::io(&path, e)),
        }
    }
}

/// The current user's crontab (`crontab -l`; none yet is empty).
pub fn read() -> Result<String> {
    let out = std::process::Command::new("crontab")
        .arg("-l")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| Error::Usage(format!("crontab -l: {e} (is cron installed?)")))?;
    if out.status.success() {
        return String::from_utf8(out.stdout)
            .map_err(|_| Error::Usage("crontab -l: the crontab is not UTF-8".into()));
    }
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("no crontab for") {
        return Ok(String::new());
    }
    Err(Error::Usage(format!("crontab -l failed: {}", err.trim())))
}

/// Replaces the current user's crontab (`crontab -`).
pub fn write(text: &str) -> Result<()> {
    use std::io::Write;
    let mut child = std::process::Command::new("crontab")
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| Error::Usage(format!("crontab -: {e} (is cron installed?)")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| Error::io(Path::new("crontab -"), e))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::io(Path::new("crontab -"), e))?;
    if !out.status.success() {
        return Err(Error::Usage(format!(
            "crontab - failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
#[path = "crontab_tests.rs"]
mod tests;
