//! Retrying transient step failures: exponential backoff with jitter, a
//! bounded number of times, waiting on an injectable [`Sleeper`] so tests do
//! not sleep and a stop request cuts the wait short.

use super::clock::{Sleeper, StopFlag};
use super::steps::{StepFailure, StepResult};
pub use super::values::RetryPolicy;
use std::time::Duration;

/// A random wait in `[b/2, b]` ("equal jitter"), so that runs that failed
/// together do not retry together.
pub fn jittered(b: Duration) -> Duration {
    let mut bytes = [0u8; 8];
    let r = match getrandom::getrandom(&mut bytes) {
        Ok(()) => u64::from_le_bytes(bytes),
        Err(_) => 0,
    };
    let half = b / 2;
    let span = (b - half).as_nanos() as u64;
    half + Duration::from_nanos(if span == 0 { 0 } else { r % (span + 1) })
}

/// Runs `attempt` until it succeeds, fails permanently, the retries are
/// spent, or `stop` is set. Returns the last result and how many attempts
/// were made.
pub fn with_retries(
    policy: &RetryPolicy,
    sleeper: &dyn Sleeper,
    stop: &StopFlag,
    mut attempt: impl FnMut() -> StepResult,
) -> (StepResult, u32) {
    let mut made = 0;
    loop {
        made += 1;
        let result = attempt();
        let retry_no = made - 1;
        match &result {
            Err(StepFailure {
                transient: true, ..
            }) if retry_no < policy.retries => {
                if sleeper.sleep(jittered(policy.backoff(retry_no)), stop) {
                    return (result, made);
                }
            }
            _ => return (result, made),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::clock::FakeClock;
    use crate::schedule::steps::StepReport;

    fn policy(retries: u32) -> RetryPolicy {
        RetryPolicy {
            retries,
            delay: Duration::from_secs(10),
            max_delay: Duration::from_secs(25),
        }
    }

    fn transient() -> StepResult {
        Err(StepFailure::transient("repository is locked by pid 7"))
    }

    #[test]
    fn transient_twice_then_success() {
        let clock = FakeClock::new("2025-01-01T00:00:00Z".parse().unwrap());
        let mut calls = 0;
        let (r, n) = with_retries(&policy(3), &clock, &StopFlag::new(), || {
            calls += 1;
            if calls <= 2 {
                transient()
            } else {
                Ok(StepReport::default())
            }
        });
        assert!(r.is_ok());
        assert_eq!((n, calls), (3, 3));
        let sleeps = clock.sleeps();
        assert_eq!(sleeps.len(), 2);
        // Backoff 10 s then 20 s, each jittered into [b/2, b].
        assert!(sleeps[0] >= Duration::from_secs(5) && sleeps[0] <= Duration::from_secs(10));
        assert!(sleeps[1] >= Duration::from_secs(10) && sleeps[1] <= Duration::from_secs(20));
    }

    #[test]
    fn permanent_error_is_not_retried() {
        let clock = FakeClock::new("2025-01-01T00:00:00Z".parse().unwrap());
        let (r, n) = with_retries(&policy(3), &clock, &StopFlag::new(), || {
            Err(StepFailure::permanent("wrong password", 12))
        });
        assert_eq!(r.unwrap_err().exit_code, 12);
        assert_eq!(n, 1);
        assert!(clock.sleeps().is_empty());
    }

    #[test]
    fn retry_budget_exhausted() {
        let clock = FakeClock::new("2025-01-01T00:00:00Z".parse().unwrap());
        let (r, n) = with_retries(&policy(2), &clock, &StopFlag::new(), transient);
        assert!(r.unwrap_err().transient);
        assert_eq!(n, 3);
        assert_eq!(clock.sleeps().len(), 2);
    }

    #[test]
    fn a_stop_request_ends_the_waiting() {
        let clock = FakeClock::new("2025-01-01T00:00:00Z".parse().unwrap());
        let stop = StopFlag::new();
        stop.request();
        let (r, n) = with_retries(&policy(5), &clock, &stop, transient);
        assert!(r.is_err());
        assert_eq!(n, 1);
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let p = policy(9);
        let got: Vec<u64> = (0..4).map(|k| p.backoff(k).as_secs()).collect();
        assert_eq!(got, vec![10, 20, 25, 25]);
        assert_eq!(p.backoff(200), Duration::from_secs(25));
        for _ in 0..100 {
            let j = jittered(Duration::from_millis(1000));
            assert!(j >= Duration::from_millis(500) && j <= Duration::from_millis(1000));
        }
    }
}
