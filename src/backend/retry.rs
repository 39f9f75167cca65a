//! Retrying remote requests: exponential backoff with jitter for what a
//! network and a busy server do (5xx, 429, S3's SlowDown, resets, timeouts),
//! within a bounded total time (`LARDER_RETRY_TIME`, default 120 s). An
//! error that stays names the backend, the object and the last cause.

use crate::error::{Error, Result};
use std::time::{Duration, Instant};

/// Environment variable: the total time, in seconds, one request may spend
/// being retried before it fails.
pub const RETRY_TIME_ENV: &str = "LARDER_RETRY_TIME";
/// The default of [`RETRY_TIME_ENV`].
pub const DEFAULT_RETRY_TIME: Duration = Duration::from_secs(120);

/// How one attempt failed.
#[derive(Debug)]
pub enum Failure {
    /// Worth another try (server busy or failing, connection reset or
    /// timed out); the text is the cause, for the final message.
    Transient(String),
    /// Final: retrying would not help (not found, refused, corrupt).
    Fatal(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Fatal(e)
    }
}

/// When to try again and when to give up.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// Total time from the first attempt after which no new attempt starts.
    pub budget: Duration,
    /// The first backoff; doubled after every failure up to `cap`.
    pub base: Duration,
    pub cap: Duration,
}

impl RetryPolicy {
    /// The policy with the budget from [`RETRY_TIME_ENV`] (seconds, may be
    /// fractional), or the default.
    pub fn from_env() -> Result<RetryPolicy> {
        let budget = match std::env::var(RETRY_TIME_ENV) {
            Ok(v) => v
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e9)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| {
                    Error::Usage(format!("{RETRY_TIME_ENV}={v:?} is not a number of seconds"))
                })?,
            Err(_) => DEFAULT_RETRY_TIME,
        };
        Ok(RetryPolicy {
            budget,
            base: Duration::from_millis(200),
            cap: Duration::from_secs(15),
        })
    }

    /// Runs `attempt` until it succeeds, fails for good, or the budget is
    /// spent. The final error is [`Error::Backend`] on `object`, whose
    /// cause names `backend`, the last cause and how long it tried.
    pub fn run<T>(
        &self,
        backend: &str,
        object: &str,
        mut attempt: impl FnMut() -> std::result::Result<T, Failure>,
    ) -> Result<T> {
        let start = Instant::now();
        let mut tries: u32 = 0;
        loop {
            tries += 1;
            let cause = match attempt() {
                Ok(v) => return Ok(v),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Transient(c)) => c,
            };
            let wait = self.backoff(tries);
            let spent = start.elapsed();
            if spent + wait > self.budget {
                return Err(Error::Backend {
                    object: object.to_string(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "{backend}: {cause} (gave up after {tries} attempt{} in {:.1} s; \
                             {RETRY_TIME_ENV} allows {} s)",
                            if tries == 1 { "" } else { "s" },
                            spent.as_secs_f64(),
                            self.budget.as_secs_f64()
                        ),
                    ),
                });
            }
            std::thread::sleep(wait);
        }
    }

    /// The wait after failure number `tries`: half the doubled delay plus a
    /// random share of the other half ("equal jitter"), so that many
    /// clients failing together do not come back together.
    fn backoff(&self, tries: u32) -> Duration {
        let exp = self
            .base
            .saturating_mul(1u32 << tries.saturating_sub(1).min(16))
            .min(self.cap);
        let half = exp / 2;
        let mut r = [0u8; 4];
        let frac = match crate::crypto::fill_random(&mut r) {
            Ok(()) => f64::from(u32::from_le_bytes(r)) / f64::from(u32::MAX),
            Err(_) => 0.5,
        };
        half + half.mul_f64(frac)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick(budget_ms: u64) -> RetryPolicy {
        RetryPolicy {
            budget: Duration::from_millis(budget_ms),
            base: Duration::from_millis(1),
            cap: Duration::from_millis(4),
        }
    }

    #[test]
    fn transient_failures_are_retried_until_success() {
        let mut n = 0;
        let v = quick(10_000)
            .run("rest:http://h/", "packs/ab", || {
                n += 1;
                if n < 4 {
                    Err(Failure::Transient("HTTP 503".into()))
                } else {
                    Ok(n)
                }
            })
            .unwrap();
        assert_eq!(v, 4);
    }

    #[test]
    fn fatal_failures_are_not_retried() {
        let mut n = 0;
        let e = quick(10_000)
            .run::<()>("b", "config", || {
                n += 1;
                Err(Failure::Fatal(Error::Usage("no".into())))
            })
            .unwrap_err();
        assert_eq!(n, 1);
        assert_eq!(e.to_string(), "no");
    }

    #[test]
    fn the_final_error_names_backend_object_and_cause() {
        let mut n = 0;
        let e = quick(30)
            .run::<()>("s3:http://127.0.0.1:9/b", "index/cafe", || {
                n += 1;
                Err(Failure::Transient(format!("connection refused #{n}")))
            })
            .unwrap_err();
        let s = e.to_string();
        assert!(s.contains("index/cafe"), "{s}");
        assert!(s.contains("s3:http://127.0.0.1:9/b"), "{s}");
        assert!(s.contains(&format!("connection refused #{n}")), "{s}");
        assert!(n > 1, "retried before giving up");
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            budget: Duration::ZERO,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
        };
        let b1 = p.backoff(1);
        assert!(b1 >= Duration::from_millis(50) && b1 <= Duration::from_millis(100));
        let b3 = p.backoff(3);
        assert!(b3 >= Duration::from_millis(200) && b3 <= Duration::from_millis(400));
        assert!(p.backoff(30) <= Duration::from_secs(1));
    }
}
