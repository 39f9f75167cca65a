//! Repository locks (`locks/<id>`): shared for backup and restore, exclusive
//! only for the deletion step of a future prune. A lock is refreshed while it
//! is held; a lock whose expiry has passed, or whose holder on this host is
//! dead, is stale: it is removed and never waited for.

use crate::backend::{Backend, Kind};
use crate::crypto::Keys;
use crate::crypto::MasterKey;
use crate::error::{Error, Result};
use crate::host::{hostname, now_secs, username};
use crate::id::Id;
use crate::object::{self, ObjectType};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a lock stays valid without a refresh.
pub const LOCK_TTL_SECS: i64 = 30 * 60;
/// How often a held lock is refreshed.
pub const LOCK_REFRESH: Duration = Duration::from_secs(5 * 60);

/// The contents of a lock object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    pub hostname: String,
    pub username: String,
    pub pid: u32,
    pub created: i64,
    pub expires: i64,
    pub exclusive: bool,
    /// Random bytes so two locks never share a name.
    pub nonce: [u8; 16],
}

impl LockInfo {
    /// Whether the holder is gone: expired, or a dead process on this host.
    pub fn is_stale(&self, now: i64) -> bool {
        if self.expires < now {
            return true;
        }
        if self.hostname == hostname() {
            let pid = nix::unistd::Pid::from_raw(self.pid as i32);
            return matches!(
                nix::sys::signal::kill(pid, None),
                Err(nix::errno::Errno::ESRCH)
            );
        }
        false
    }
}

/// A held lock; released (deleted) on drop.
pub struct LockGuard {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

fn write_lock(backend: &dyn Backend, keys: &Keys, exclusive: bool) -> Result<String> {
    let mut nonce = [0u8; 16];
    crate::crypto::fill_random(&mut nonce)?;
    let now = now_secs();
    let info = LockInfo {
        hostname: hostname(),
        username: username(),
        pid: std::process::id(),
        created: now,
        expires: now + LOCK_TTL_SECS,
        exclusive,
        nonce,
    };
    let bytes = object::seal(keys, ObjectType::Lock, &info)?;
    let name = Id::of_object(&bytes).to_hex();
    backend.write(Kind::Lock, &name, &bytes)?;
    Ok(name)
}

/// Reads every lock; removes stale ones; returns the live ones (not ours).
pub fn live_locks(backend: &dyn Backend, keys: &Keys, ours: Option<&str>) -> Result<Vec<LockInfo>> {
    let now = now_secs();
    let mut out = Vec::new();
    for e in backend.list(Kind::Lock)? {
        if Some(e.name.as_str()) == ours {
            continue;
        }
        let what = Kind::Lock.path(&e.name);
        let bytes = match backend.read_bounded(Kind::Lock, &e.name, 1 << 20) {
            Ok(b) => b,
            Err(_) => continue, // removed meanwhile
        };
        match object::open::<LockInfo>(keys, ObjectType::Lock, &what, &bytes) {
            Ok(info) if info.is_stale(now) => {
                let _ = backend.delete(Kind::Lock, &e.name);
            }
            Ok(info) => out.push(info),
            // An unreadable lock cannot be honoured; it does not block.
            Err(_) => {}
        }
    }
    Ok(out)
}

impl LockGuard {
    /// Takes a lock. A shared lock conflicts only with a live exclusive lock;
    /// an exclusive lock conflicts with any live lock (error exit code 11).
    pub fn acquire(
        backend: Arc<dyn Backend>,
        master: &MasterKey,
        exclusive: bool,
    ) -> Result<LockGuard> {
        let keys = Keys::derive(master);
        let name = write_lock(backend.as_ref(), &keys, exclusive)?;
        let others = live_locks(backend.as_ref(), &keys, Some(&name))?;
        if let Some(c) = others.iter().find(|l| exclusive || l.exclusive) {
            let _ = backend.delete(Kind::Lock, &name);
            return Err(Error::Locked(format!(
                "{} lock held by pid {} on {} (user {}) since {}",
                if c.exclusive { "an exclusive" } else { "a" },
                c.pid,
                c.hostname,
                c.username,
                c.created
            )));
        }
        let (tx, rx): (Sender<()>, Receiver<()>) = channel();
        let thread = std::thread::spawn(move || {
            let mut current = name;
            loop {
                match rx.recv_timeout(LOCK_REFRESH) {
                    Err(RecvTimeoutError::Timeout) => {
                        if let Ok(new) = write_lock(backend.as_ref(), &keys, exclusive) {
                            let _ = backend.delete(Kind::Lock, &current);
                            current = new;
                        }
                    }
                    _ => {
                        let _ = backend.delete(Kind::Lock, &current);
                        return;
                    }
                }
            }
        });
        Ok(LockGuard {
            stop: Some(tx),
            thread: Some(thread),
        })
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
