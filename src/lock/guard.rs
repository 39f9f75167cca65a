//! Taking and holding a lock. A held lock is rewritten under a new name
//! every refresh interval by a background thread; the guard tracks whether
//! it still holds it, and [`LockHandle::check`] tells an operation, cheaply,
//! before each write.
//!
//! The lock is lost (for good) when a refresh cannot write the new lock
//! object, when the previous lock object is found removed, or when
//! more than half the lifetime has passed (on `CLOCK_BOOTTIME`, which counts
//! suspended time) since the last refresh began: by then another host may
//! already judge the lock stale. Checking the previous object *after* the
//! new one is written makes the holding continuous: if someone removed our
//! lock at any moment, the next refresh sees it.

use super::{LockConfig, LockInfo, LockMode, assess_all, write_lock_as};
use crate::backend::{Backend, Kind};
use crate::crypto::{Keys, MasterKey};
use crate::error::{Error, Result};
use crate::host::boottime;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The first pause before a lock is tried again (`LockConfig::retry`); each
/// next one doubles, up to [`LONGEST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// Sleeps `d`, stopping early with [`Error::Interrupted`] once a stop is
/// asked for (Ctrl-C, SIGTERM).
fn pause_for(d: Duration) -> Result<()> {
    let end = Instant::now() + d;
    loop {
        crate::interrupt::check()?;
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

/// A held lock; released (deleted) on drop.
pub struct LockGuard {
    health: LockHandle,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// A cheap, cloneable view of a held lock's health, for worker threads.
#[derive(Clone)]
pub struct LockHandle(Arc<Health>);

struct Health {
    /// Why the lock was lost, once it is.
    lost: OnceLock<String>,
    /// `boottime()` in milliseconds when the last successful write began.
    refreshed_ms: AtomicU64,
    /// How long without a refresh before the lock counts as lost.
    max_gap: Duration,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl LockHandle {
    /// `Err(Error::LockLost)` once the lock failed to refresh, was removed
    /// by someone else, or has gone unrefreshed for half its lifetime. Call
    /// it before every write to the repository; it costs one clock read.
    pub fn check(&self) -> Result<()> {
        let h = &self.0;
        if let Some(why) = h.lost.get() {
            return Err(Error::LockLost(why.clone()));
        }
        let gap = boottime().saturating_sub(Duration::from_millis(
            h.refreshed_ms.load(Ordering::Acquire),
        ));
        if gap > h.max_gap {
            h.lose(format!(
                "the repository lock was last refreshed {}s ago, more than half its \
                 lifetime: another process may already treat it as stale",
                gap.as_secs()
            ));
            return Err(Error::LockLost(h.lost.get().cloned().unwrap_or_default()));
        }
        Ok(())
    }
}

impl Health {
    fn lose(&self, why: String) {
        let _ = self.lost.set(why);
    }
}

/// What the refresh thread needs.
struct Refresher {
    backend: Arc<dyn Backend>,
    keys: Keys,
    mode: LockMode,
    lifetime: Duration,
    health: LockHandle,
    /// The format version byte of the locks written ([`LockConfig::format`]).
    format: u8,
}

impl Refresher {
    /// Writes a new lock, confirms the previous one is still there, removes
    /// it; returns the new name, or why the lock is lost.
    fn refresh(&self, current: &str) -> std::result::Result<String, String> {
        let started = boottime();
        let info = LockInfo::for_this_process(self.mode, self.lifetime)
            .map_err(|e| format!("refreshing the lock failed: {e}"))?;
        let new = write_lock_as(self.backend.as_ref(), &self.keys, &info, self.format)
            .map_err(|e| format!("refreshing the lock failed: {e}"))?;
        let what = Kind::Lock.path(current);
        let gone = match self.backend.exists(Kind::Lock, current) {
            Ok(true) => None,
            Ok(false) => Some(format!(
                "{what} was removed by another process (`larder unlock --remove-all`?)"
            )),
            Err(e) => Some(format!("cannot confirm that {what} is still there: {e}")),
        };
        if let Some(why) = gone {
            let _ = self.backend.delete(Kind::Lock, &new);
            return Err(why);
        }
        self.health
            .0
            .refreshed_ms
            .store(ms(started), Ordering::Release);
        // A previous lock left behind is ours and goes stale with us.
        let _ = self.backend.delete(Kind::Lock, current);
        Ok(new)
    }

    fn run(self, rx: Receiver<()>, refresh: Duration, mut current: String) {
        loop {
            match rx.recv_timeout(refresh) {
                Err(RecvTimeoutError::Timeout) if self.health.0.lost.get().is_none() => {
                    match self.refresh(&current) {
                        Ok(new) => current = new,
                        Err(why) => self.health.0.lose(why),
                    }
                }
                Err(RecvTimeoutError::Timeout) => {} // lost: hold still until released
                _ => break,
            }
        }
        let _ = self.backend.delete(Kind::Lock, &current);
    }
}

impl LockGuard {
    /// Takes a lock of `mode`; it conflicts with the live locks whose mode
    /// [`LockMode::conflicts_with`] it (`Error::Locked`, exit code 11).
    /// Stale locks found on the way are removed; unreadable ones never
    /// conflict. While a conflicting lock is held, it tries again for up
    /// to `cfg.retry`, at growing intervals (1 s, doubling to 30 s), with
    /// no lock object of its own in storage between tries.
    pub fn acquire(
        backend: Arc<dyn Backend>,
        master: &MasterKey,
        mode: LockMode,
        cfg: &LockConfig,
    ) -> Result<LockGuard> {
        let keys = Keys::derive(master);
        let deadline = Instant::now() + cfg.retry;
        let mut pause = FIRST_PAUSE;
        let (name, started) = loop {
            let started = boottime();
            let info = LockInfo::for_this_process(mode, cfg.lifetime())?;
            let name = write_lock_as(backend.as_ref(), &keys, &info, cfg.format)?;
            let Err(e) = check_others(backend.as_ref(), &keys, cfg, &name, mode) else {
                break (name, started);
            };
            let _ = backend.delete(Kind::Lock, &name);
            let left = deadline.saturating_duration_since(Instant::now());
            let Error::Locked(why) = e else {
                return Err(e);
            };
            if left.is_zero() {
                return Err(Error::Locked(if cfg.retry.is_zero() {
                    why
                } else {
                    format!(
                        "{why} (still held after {} s of trying)",
                        cfg.retry.as_secs()
                    )
                }));
            }
            if pause == FIRST_PAUSE
                && let Some(tell) = cfg.on_wait
            {
                tell(&format!(
                    "{why}; waiting up to {} s for it",
                    cfg.retry.as_secs()
                ));
            }
            pause_for(pause.min(left))?;
            pause = (pause * 2).min(LONGEST_PAUSE);
        };
        let health = LockHandle(Arc::new(Health {
            lost: OnceLock::new(),
            refreshed_ms: AtomicU64::new(ms(started)),
            max_gap: cfg.lifetime() / 2,
        }));
        let refresher = Refresher {
            backend,
            keys,
            mode,
            lifetime: cfg.lifetime(),
            health: health.clone(),
            format: cfg.format,
        };
        let (tx, rx): (Sender<()>, Receiver<()>) = channel();
        let refresh = cfg.refresh;
        let thread = std::thread::Builder::new()
            .name("larder-lock".into())
            .spawn(move || refresher.run(rx, refresh, name))
            .map_err(|e| Error::internal(format!("cannot start the lock refresh thread: {e}")))?;
        Ok(LockGuard {
            health,
            stop: Some(tx),
            thread: Some(thread),
        })
    }

    /// See [`LockHandle::check`].
    pub fn check(&self) -> Result<()> {
        self.health.check()
    }

    /// A handle to pass into worker threads.
    pub fn handle(&self) -> LockHandle {
        self.health.clone()
    }
}

/// Removes stale locks; fails if a live one conflicts with ours.
fn check_others(
    backend: &dyn Backend,
    keys: &Keys,
    cfg: &LockConfig,
    ours: &str,
    mode: LockMode,
) -> Result<()> {
    let mut conflict = None;
    for a in assess_all(backend, keys, cfg, Some(ours))? {
        if a.verdict.is_stale() {
            // One that cannot be removed blocks nobody all the same.
            let _ = backend.delete(Kind::Lock, &a.name);
            continue;
        }
        if let Some(i) = &a.info
            && mode.conflicts_with(i.mode)
            && conflict.is_none()
        {
            conflict = Some(format!(
                "repository is locked: {} ({}): {}. `larder unlock` removes stale locks",
                i.describe(),
                Kind::Lock.path(&a.name),
                a.verdict.reason()
            ));
        }
    }
    match conflict {
        Some(c) => Err(Error::Locked(c)),
        None => Ok(()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_can_go_to_worker_threads() {
        fn shareable<T: Send + Sync + Clone + 'static>() {}
        shareable::<LockHandle>();
        let h = LockHandle(Arc::new(Health {
            lost: OnceLock::new(),
            refreshed_ms: AtomicU64::new(ms(boottime())),
            max_gap: Duration::from_secs(3600),
        }));
        let h2 = h.clone();
        std::thread::spawn(move || h2.check())
            .join()
            .unwrap()
            .unwrap();
        h.0.lose("gone".into());
        h.0.lose("second reason is ignored".into());
        match h.check() {
            Err(Error::LockLost(why)) => assert_eq!(why, "gone"),
            other => panic!("{other:?}"),
        }
        // A handle whose last refresh is older than its gap is lost.
        let old = LockHandle(Arc::new(Health {
            lost: OnceLock::new(),
            refreshed_ms: AtomicU64::new(0),
            max_gap: Duration::ZERO,
        }));
        std::thread::sleep(Duration::from_millis(2));
        assert!(matches!(old.check(), Err(Error::LockLost(_))));
    }
}
