//! Time and waiting, injectable: the [`Clock`] that says what time it is,
//! the [`Sleeper`] that waits, and the [`StopFlag`] that cuts a wait short
//! when the process is asked to stop. Tests use [`FakeClock`], whose sleeper
//! moves the clock instead of waiting.

use jiff::{SignedDuration, Timestamp};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The longest single wait: a sleeper wakes at least this often to look at
/// the stop flag and the wall clock (which may have jumped after a suspend).
pub const WAIT_SLICE: Duration = Duration::from_secs(1);

/// What time it is.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// Waiting for a while, cut short by a stop request.
pub trait Sleeper: Send + Sync {
    /// Waits `d` or until `stop` is set; returns `true` when it stopped early
    /// (or `stop` was already set).
    fn sleep(&self, d: Duration, stop: &StopFlag) -> bool;
}

/// The operating system's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// Real waiting on the stop flag's condition variable, in slices of at most
/// [`WAIT_SLICE`] so that a flag set without notification (from a signal
/// handler through [`StopFlag::atomic`]) is still seen within a second.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealSleeper;

impl Sleeper for RealSleeper {
    fn sleep(&self, d: Duration, stop: &StopFlag) -> bool {
        let end = std::time::Instant::now() + d;
        loop {
            if stop.is_set() {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= end {
                return false;
            }
            stop.wait_timeout((end - now).min(WAIT_SLICE));
        }
    }
}

/// A shared "please stop" flag: set once (by a SIGTERM handler or a test),
/// seen by every loop and wait that holds a clone.
#[derive(Clone, Debug, Default)]
pub struct StopFlag {
    inner: Arc<StopInner>,
}

#[derive(Debug, Default)]
struct StopInner {
    flag: Arc<AtomicBool>,
    lock: Mutex<()>,
    cond: Condvar,
}

impl StopFlag {
    /// A flag that is not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// A flag backed by `flag` (normally [`crate::interrupt::shared_flag`]):
    /// set when a signal handler stores `true` to it.
    pub fn from_atomic(flag: Arc<AtomicBool>) -> Self {
        StopFlag {
            inner: Arc::new(StopInner {
                flag,
                lock: Mutex::new(()),
                cond: Condvar::new(),
            }),
        }
    }

    /// Sets the flag and wakes every waiter.
    pub fn request(&self) {
        self.inner.flag.store(true, Ordering::SeqCst);
        // A poisoned mutex still lets us notify: the data is `()`.
        let _guard = self.inner.lock.lock();
        self.inner.cond.notify_all();
    }

    /// Whether the flag is set.
    pub fn is_set(&self) -> bool {
        self.inner.flag.load(Ordering::SeqCst)
    }

    /// The bare atomic, for a signal handler that may only store to it;
    /// waiters then notice within [`WAIT_SLICE`].
    pub fn atomic(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.inner.flag)
    }

    /// Waits up to `d` for [`StopFlag::request`].
    fn wait_timeout(&self, d: Duration) {
        let guard = match self.inner.lock.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if self.is_set() {
            return;
        }
        let _ = self.inner.cond.wait_timeout(guard, d);
    }
}

/// A clock for tests: it stands still until moved, and its sleeper moves it
/// forward by the time asked instead of waiting. Every sleep is recorded.
#[derive(Clone, Debug)]
pub struct FakeClock {
    inner: Arc<Mutex<FakeState>>,
}

#[derive(Debug)]
struct FakeState {
    now: Timestamp,
    sleeps: Vec<Duration>,
}

impl FakeClock {
    /// A clock that reads `start`.
    pub fn new(start: Timestamp) -> Self {
        FakeClock {
            inner: Arc::new(Mutex::new(FakeState {
                now: start,
                sleeps: Vec::new(),
            })),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Sets the time.
    pub fn set(&self, t: Timestamp) {
        self.state().now = t;
    }

    /// Moves the time forward by `d`.
    pub fn advance(&self, d: Duration) {
        let mut s = self.state();
        let step = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
        s.now = s.now.saturating_add(step).unwrap_or(s.now);
    }

    /// Every duration slept so far, in order.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.state().sleeps.clone()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Timestamp {
        self.state().now
    }
}

impl Sleeper for FakeClock {
    fn sleep(&self, d: Duration, stop: &StopFlag) -> bool {
        if stop.is_set() {
            return true;
        }
        self.state().sleeps.push(d);
        self.advance(d);
        stop.is_set()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_sleeper_moves_the_fake_clock() {
        let t0: Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
        let c = FakeClock::new(t0);
        let stop = StopFlag::new();
        assert!(!c.sleep(Duration::from_secs(90), &stop));
        assert_eq!(
            c.now(),
            "2025-01-01T00:01:30Z".parse::<Timestamp>().unwrap()
        );
        stop.request();
        assert!(c.sleep(Duration::from_secs(90), &stop));
        assert_eq!(c.sleeps(), vec![Duration::from_secs(90)]);
    }

    #[test]
    fn real_sleeper_wakes_when_stop_is_requested() {
        let stop = StopFlag::new();
        let s2 = stop.clone();
        let t = std::thread::spawn(move || RealSleeper.sleep(Duration::from_secs(3600), &s2));
        std::thread::sleep(Duration::from_millis(20));
        stop.request();
        // Would hang for an hour (and the test time out) if the wait ignored the flag.
        assert!(t.join().unwrap());
    }

    #[test]
    fn real_sleeper_sees_a_bare_atomic_store() {
        let stop = StopFlag::new();
        stop.atomic().store(true, Ordering::SeqCst);
        assert!(RealSleeper.sleep(Duration::from_secs(3600), &stop));
    }
}
