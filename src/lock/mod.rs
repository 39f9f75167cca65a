//! Repository locks (`locks/<id>`): shared for backup, restore, check and
//! forget, exclusive for operations that delete what others may read
//! (`repair index`), maintenance for prune and key changes (beside
//! backups, never beside another prune or key change). This module owns
//! the lock object ([`LockInfo`]), taking and holding a lock
//! ([`LockGuard`], refreshed in the background, able to say when it was
//! lost), deciding whether another lock is stale ([`stale`]), and
//! `larder unlock` ([`unlock()`]).
//!
//! The rules in short (exactly: `repo-format/SPEC.md`, section 16): a lock
//! is stale when its holder, in this machine's pid space, has exited or its
//! pid now names another process; or when the lock object has not been
//! rewritten for longer than its lifetime, measured by the storage's clock
//! alone. Stale locks never block and are removed by whoever finds them; a
//! holder that cannot refresh its lock, or finds it removed, reports
//! [`Error::LockLost`] from [`LockHandle::check`] and must stop writing.

mod guard;
mod seen;
pub mod stale;
mod unlock;

pub use guard::{LockGuard, LockHandle};
pub use stale::{Assessed, Verdict, assess_all};
pub use unlock::{UnlockReport, UnlockedLock, unlock};

use crate::backend::{Backend, Kind};
use crate::crypto::Keys;
use crate::error::{Error, Result};
use crate::host::{ProcessSpace, hostname, now_secs, process_space, process_start, username};
use crate::id::Id;
use crate::object::{self, ObjectType};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// How often a held lock is rewritten (by default).
pub const LOCK_REFRESH: Duration = Duration::from_secs(5 * 60);
/// A lock's lifetime is this many refresh intervals (30 minutes by default).
pub const LIFETIME_PER_REFRESH: u32 = 6;
/// The longest lifetime a reader honours, whatever a lock declares.
pub const MAX_LOCK_LIFETIME: Duration = Duration::from_secs(30 * 60);
/// Largest stored lock object a reader accepts.
pub const MAX_LOCK_STORED: u64 = 4096;
/// Longest host or user name in a lock, in bytes (writers cut longer ones).
pub const MAX_LOCK_NAME_LEN: usize = 255;
/// Test knob: the refresh interval in seconds (1 ..= 300), so tests of lock
/// loss run in seconds. Not meant for production use: it only shortens
/// this process's own refresh interval and lifetime.
pub const REFRESH_ENV: &str = "LARDER_LOCK_REFRESH_SECS";

/// How locks are held and judged by this process.
#[derive(Clone, Debug)]
pub struct LockConfig {
    /// How often a held lock is rewritten; its lifetime is
    /// [`LIFETIME_PER_REFRESH`] times this.
    pub refresh: Duration,
    /// Where this host records when it first saw each lock, for backends
    /// that cannot tell an object's age (`Backend::age` = None). Without
    /// it such locks are never stale by age.
    pub state_dir: Option<PathBuf>,
    /// How long taking a lock keeps trying while a conflicting live lock is
    /// held (restic's `--retry-lock`); zero fails at once.
    pub retry: Duration,
    /// Told once what holds the lock when such a wait begins (the CLI
    /// prints it).
    pub on_wait: Option<OnWait>,
    /// The format version byte of the locks written: the repository's
    /// (an older larder reads only its own version's locks, and would not
    /// see a reader's lock written as version 5).
    pub format: u8,
}

/// What is told, once, that taking a lock waits for another's
/// ([`LockConfig::on_wait`]).
pub type OnWait = fn(&str);

impl LockConfig {
    /// The defaults: refresh every 5 minutes, lifetime 30 minutes.
    pub fn new(state_dir: Option<PathBuf>) -> Self {
        LockConfig {
            refresh: LOCK_REFRESH,
            state_dir,
            retry: Duration::ZERO,
            on_wait: None,
            format: crate::object::FORMAT_VERSION,
        }
    }

    /// The defaults, with the refresh interval from [`REFRESH_ENV`] if set.
    pub fn from_env(state_dir: Option<PathBuf>) -> Result<Self> {
        let refresh = parse_refresh(std::env::var(REFRESH_ENV).ok().as_deref())?;
        Ok(LockConfig {
            refresh,
            ..LockConfig::new(state_dir)
        })
    }

    /// The lifetime this process declares in its locks.
    pub fn lifetime(&self) -> Duration {
        (self.refresh * LIFETIME_PER_REFRESH).min(MAX_LOCK_LIFETIME)
    }
}

/// The value of [`REFRESH_ENV`]: unset means [`LOCK_REFRESH`].
pub fn parse_refresh(value: Option<&str>) -> Result<Duration> {
    let Some(v) = value else {
        return Ok(LOCK_REFRESH);
    };
    match v.trim().parse::<u64>() {
        Ok(n) if (1..=LOCK_REFRESH.as_secs()).contains(&n) => Ok(Duration::from_secs(n)),
        _ => Err(Error::Usage(format!(
            "{REFRESH_ENV}={v:?}: expected whole seconds from 1 to {} (a test knob)",
            LOCK_REFRESH.as_secs()
        ))),
    }
}

/// What a lock allows others to do at the same time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockMode {
    /// Backups, restores, checks: any number at once.
    Shared,
    /// Operations that delete what anyone may read (`repair index`):
    /// alone.
    Exclusive,
    /// Prune and key changes: beside any number of shared locks (backups
    /// never wait for them), but never beside another maintenance or an
    /// exclusive lock.
    Maintenance,
    /// Commands that replace or remove snapshots (`forget`, `tag`,
    /// `rewrite`, `repair snapshots`): beside backups, readers and prune,
    /// but never beside another of their kind, which could bring back a
    /// snapshot this one removed or leave two in the place of one.
    Snapshots,
}

impl LockMode {
    /// Whether a lock of this mode and one of `other` cannot be held at
    /// once.
    pub fn conflicts_with(self, other: LockMode) -> bool {
        use LockMode::*;
        !matches!(
            (self, other),
            (Shared, Shared | Maintenance | Snapshots)
                | (Maintenance, Shared | Snapshots)
                | (Snapshots, Shared | Maintenance)
        )
    }

    /// A word for messages.
    pub fn word(self) -> &'static str {
        match self {
            LockMode::Shared => "shared",
            LockMode::Exclusive => "exclusive",
            LockMode::Maintenance => "maintenance",
            LockMode::Snapshots => "snapshot-changing",
        }
    }
}

/// The contents of a lock object (format version 4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    /// Shown to people only; never used to decide anything.
    pub hostname: String,
    /// Shown to people only.
    pub username: String,
    /// See [`ProcessSpace`]: the holder's machine, boot and pid namespace.
    pub machine_id: [u8; 16],
    pub boot_id: [u8; 16],
    pub pid_ns: u64,
    pub pid: u32,
    /// The holder's start time (field 22 of `/proc/PID/stat`); 0 if unknown.
    pub start_time: u64,
    /// Seconds since the Unix epoch by the holder's clock: shown to people
    /// only, never compared with another clock.
    pub created: i64,
    /// The holder rewrites its lock well within this many seconds.
    pub lifetime_secs: u32,
    pub mode: LockMode,
    /// Random bytes so two locks never share a name.
    pub nonce: [u8; 16],
}

impl LockInfo {
    /// A lock for this process, declaring `lifetime`.
    pub fn for_this_process(mode: LockMode, lifetime: Duration) -> Result<LockInfo> {
        let mut nonce = [0u8; 16];
        crate::crypto::fill_random(&mut nonce)?;
        let space = process_space();
        let pid = std::process::id();
        Ok(LockInfo {
            hostname: cut(hostname()),
            username: cut(username()),
            machine_id: space.machine_id,
            boot_id: space.boot_id,
            pid_ns: space.pid_ns,
            pid,
            start_time: process_start(pid).map_or(0, |(s, _)| s),
            created: now_secs(),
            lifetime_secs: u32::try_from(lifetime.as_secs()).unwrap_or(u32::MAX),
            mode,
            nonce,
        })
    }

    /// Where the holder runs.
    pub fn space(&self) -> ProcessSpace {
        ProcessSpace {
            machine_id: self.machine_id,
            boot_id: self.boot_id,
            pid_ns: self.pid_ns,
        }
    }

    /// The lifetime a reader applies: the declared one, at most
    /// [`MAX_LOCK_LIFETIME`].
    pub fn lifetime(&self) -> Duration {
        Duration::from_secs(self.lifetime_secs.into()).min(MAX_LOCK_LIFETIME)
    }

    /// "exclusive lock of pid 12 on host (user bob), created … by its clock".
    pub fn describe(&self) -> String {
        let created = jiff::Timestamp::from_second(self.created)
            .map(|t| t.to_string())
            .unwrap_or_else(|_| self.created.to_string());
        format!(
            "{} lock of pid {} on {} (user {}), created {created} by its clock",
            self.mode.word(),
            self.pid,
            self.hostname,
            self.username,
        )
    }
}

/// Cuts a name to [`MAX_LOCK_NAME_LEN`] bytes at a character boundary.
fn cut(mut s: String) -> String {
    if s.len() > MAX_LOCK_NAME_LEN {
        let mut end = MAX_LOCK_NAME_LEN;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// Reads lock `name`: Ok(None) if it no longer exists, an error if it
/// cannot be read, opened or is out of bounds.
pub fn read_lock(backend: &dyn Backend, keys: &Keys, name: &str) -> Result<Option<LockInfo>> {
    let what = Kind::Lock.path(name);
    let bytes = match backend.read_bounded(Kind::Lock, name, MAX_LOCK_STORED) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let info: LockInfo = object::open(keys, ObjectType::Lock, &what, &bytes)?;
    if info.hostname.len() > MAX_LOCK_NAME_LEN || info.username.len() > MAX_LOCK_NAME_LEN {
        return Err(Error::corrupt(
            &what,
            format!("host or user name longer than {MAX_LOCK_NAME_LEN} bytes"),
        ));
    }
    Ok(Some(info))
}

/// Seals and writes `info` as a new lock object; returns its name.
pub fn write_lock(backend: &dyn Backend, keys: &Keys, info: &LockInfo) -> Result<String> {
    write_lock_as(backend, keys, info, object::FORMAT_VERSION)
}

/// [`write_lock`] with format version byte `version` (see
/// [`LockConfig::format`]): versions 3 and 4 wrote locks in the same bytes.
pub fn write_lock_as(
    backend: &dyn Backend,
    keys: &Keys,
    info: &LockInfo,
    version: u8,
) -> Result<String> {
    let bytes = object::seal_as(keys, ObjectType::Lock, version, info)?;
    let name = Id::of_object(&bytes).to_hex();
    // Until the lock is in place this run is no holder, so a prune that
    // lists its temporary file meanwhile takes it for a killed run's
    // leftover and may remove it (repo-format/SPEC.md, section 21): the
    // write then fails with "not found", and is simply made again.
    let mut again = 0;
    loop {
        match backend.write(Kind::Lock, &name, &bytes) {
            Err(e) if e.is_not_found() && again < LOCK_WRITE_RETRIES => again += 1,
            r => return r.map(|()| name),
        }
    }
}

/// How many times a lock write whose temporary file vanished is made
/// again (see [`write_lock`]).
const LOCK_WRITE_RETRIES: u32 = 3;

/// A duration for people: "1h 2m", "3m 4s", "5s".
pub(crate) fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m {s}s"),
        (h, m, _) => format!("{h}h {m}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_knob_is_bounded() {
        assert_eq!(parse_refresh(None).unwrap(), LOCK_REFRESH);
        assert_eq!(parse_refresh(Some("2")).unwrap(), Duration::from_secs(2));
        for bad in ["0", "301", "-1", "1.5", "soon"] {
            let e = parse_refresh(Some(bad)).unwrap_err();
            assert!(e.to_string().contains(REFRESH_ENV), "{e}");
        }
        let cfg = LockConfig {
            refresh: Duration::from_secs(2),
            ..LockConfig::new(None)
        };
        assert_eq!(cfg.lifetime(), Duration::from_secs(12));
        assert_eq!(LockConfig::new(None).lifetime(), MAX_LOCK_LIFETIME);
    }

    #[test]
    fn conflicts_are_symmetric_and_as_the_spec_says() {
        use LockMode::*;
        let modes = [Shared, Exclusive, Maintenance, Snapshots];
        let conflicting: Vec<(LockMode, LockMode)> = modes
            .iter()
            .flat_map(|a| modes.iter().map(move |b| (*a, *b)))
            .filter(|(a, b)| a.conflicts_with(*b))
            .collect();
        for (a, b) in &conflicting {
            assert!(b.conflicts_with(*a), "{a:?} {b:?}");
        }
        // Exclusive with all; maintenance and snapshot changes each with
        // their own kind; shared with nothing else.
        let mut want = vec![(Maintenance, Maintenance), (Snapshots, Snapshots)];
        for m in modes {
            want.push((Exclusive, m));
            if m != Exclusive {
                want.push((m, Exclusive));
            }
        }
        assert_eq!(conflicting.len(), want.len(), "{conflicting:?}");
        for w in want {
            assert!(conflicting.contains(&w), "{w:?}");
        }
    }

    #[test]
    fn names_are_cut_at_a_char_boundary_and_lifetimes_capped() {
        let long = "é".repeat(200); // 400 bytes
        let c = cut(long);
        assert!(c.len() <= MAX_LOCK_NAME_LEN && c.len() >= MAX_LOCK_NAME_LEN - 1);
        assert!(c.chars().all(|ch| ch == 'é'));
        let mut info =
            LockInfo::for_this_process(LockMode::Shared, Duration::from_secs(60)).unwrap();
        assert_eq!(info.lifetime(), Duration::from_secs(60));
        info.lifetime_secs = u32::MAX;
        assert_eq!(info.lifetime(), MAX_LOCK_LIFETIME);
        assert_eq!(info.pid, std::process::id());
        assert_ne!(info.start_time, 0);
    }
}
