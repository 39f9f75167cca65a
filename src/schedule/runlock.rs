//! One run at a time per profile: an exclusive, non-blocking `flock` on
//! `locks/PROFILE.lock` in the state directory, holding the holder's pid so
//! a refused run can say who has it. The kernel drops the lock when the
//! holder exits, however it exits, so a lock is never stale.

use super::clock::{Sleeper, StopFlag};
use crate::error::{Error, Result};
use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often a waiting run tries the lock again.
pub const WAIT_POLL: Duration = Duration::from_secs(1);

/// A held run lock; released when dropped.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    path: PathBuf,
}

/// The lock file of a profile.
pub fn lock_path(state_dir: &Path, profile: &str) -> PathBuf {
    state_dir.join("locks").join(format!("{profile}.lock"))
}

fn open(state_dir: &Path, profile: &str) -> Result<(File, PathBuf)> {
    let path = lock_path(state_dir, profile);
    let file = open_lock_file(&path)?;
    Ok((file, path))
}

/// Opens (creating it and its directory if needed) a lock file in the
/// state directory, for reading and writing, without truncating it.
pub(super) fn open_lock_file(path: &Path) -> Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| Error::io(path, e))
}

/// The pid written in a lock file, if any.
fn recorded_pid(file: &mut File) -> Option<u32> {
    let mut s = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut s).ok()?;
    s.trim().parse().ok()
}

impl RunLock {
    /// Takes the profile's lock, or fails at once with [`Error::Locked`]
    /// naming the process that holds it.
    pub fn try_acquire(state_dir: &Path, profile: &str) -> Result<RunLock> {
        let (mut file, path) = open(state_dir, profile)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let who = match recorded_pid(&mut file) {
                    Some(pid) => format!("process {pid}"),
                    None => "another process".to_string(),
                };
                return Err(Error::Locked(format!(
                    "profile {profile} is already running: {who} holds {}",
                    path.display()
                )));
            }
            Err(TryLockError::Error(e)) => return Err(Error::io(&path, e)),
        }
        let written = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()));
        written.map_err(|e| Error::io(&path, e))?;
        Ok(RunLock { _file: file, path })
    }

    /// Takes the profile's lock, waiting while another run holds it; fails
    /// only on an I/O error or when `stop` is set.
    pub fn acquire_waiting(
        state_dir: &Path,
        profile: &str,
        sleeper: &dyn Sleeper,
        stop: &StopFlag,
    ) -> Result<RunLock> {
        loop {
            match RunLock::try_acquire(state_dir, profile) {
                Err(Error::Locked(why)) => {
                    if sleeper.sleep(WAIT_POLL, stop) {
                        return Err(Error::Locked(format!("{why} (stopped while waiting)")));
                    }
                }
                other => return other,
            }
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Whether a run of the profile holds its lock now, and its pid if known.
/// (Probes by taking and releasing the lock.)
pub fn holder(state_dir: &Path, profile: &str) -> Result<Option<Option<u32>>> {
    let path = lock_path(state_dir, profile);
    let mut file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(None),
        Err(TryLockError::WouldBlock) => Ok(Some(recorded_pid(&mut file))),
        Err(TryLockError::Error(e)) => Err(Error::io(&path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::clock::FakeClock;

    /// The holder once the lock is free, or the holder still seen after a
    /// generous wait. An `flock` belongs to the open file description, and a
    /// `fork` by another test thread (one that spawns a process) shares that
    /// description with the child until its `exec` closes it: for that
    /// moment a dropped lock is still held.
    fn released_soon(dir: &Path, profile: &str) -> Option<Option<u32>> {
        let mut seen = holder(dir, profile).unwrap();
        for _ in 0..500 {
            if seen.is_none() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            seen = holder(dir, profile).unwrap();
        }
        seen
    }

    #[test]
    fn a_second_run_is_refused_and_told_who_holds_the_lock() {
        let tmp = tempfile::tempdir().unwrap();
        let held = RunLock::try_acquire(tmp.path(), "home").unwrap();
        let err = RunLock::try_acquire(tmp.path(), "home").unwrap_err();
        assert_eq!(err.exit_code(), 11);
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("process {}", std::process::id())),
            "{msg}"
        );
        assert!(msg.contains("locks/home.lock"), "{msg}");
        assert_eq!(
            holder(tmp.path(), "home").unwrap(),
            Some(Some(std::process::id()))
        );
        // Another profile is independent.
        let _other = RunLock::try_acquire(tmp.path(), "work").unwrap();
        drop(held);
        assert_eq!(released_soon(tmp.path(), "home"), None);
        let _again = RunLock::try_acquire(tmp.path(), "home").unwrap();
        assert_eq!(holder(tmp.path(), "nothing").unwrap(), None);
    }

    #[test]
    fn waiting_gives_up_when_asked_to_stop() {
        let tmp = tempfile::tempdir().unwrap();
        let _held = RunLock::try_acquire(tmp.path(), "home").unwrap();
        let clock = FakeClock::new("2025-01-01T00:00:00Z".parse().unwrap());
        let stop = StopFlag::new();
        stop.request();
        let err = RunLock::acquire_waiting(tmp.path(), "home", &clock, &stop).unwrap_err();
        assert!(err.to_string().contains("stopped while waiting"), "{err}");
    }

    #[test]
    fn waiting_gets_the_lock_once_it_is_released() {
        let tmp = tempfile::tempdir().unwrap();
        let held = RunLock::try_acquire(tmp.path(), "home").unwrap();
        let dir = tmp.path().to_path_buf();
        let waiter = std::thread::spawn(move || {
            RunLock::acquire_waiting(
                &dir,
                "home",
                &crate::schedule::RealSleeper,
                &StopFlag::new(),
            )
            .map(|l| l.path().to_path_buf())
        });
        std::thread::sleep(Duration::from_millis(50));
        drop(held);
        let got = waiter.join().unwrap().unwrap();
        assert_eq!(got, lock_path(tmp.path(), "home"));
    }
}
