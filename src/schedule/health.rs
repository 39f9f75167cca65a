//! Is a profile due, and is it healthy? Pure functions of a schedule, the
//! run history, a time zone and "now" (an injected clock's reading).
//!
//! **Due** (`larder run --if-due`, the daemon): let D be the schedule's
//! latest due time at or before now. A run is due when D exists and no run
//! that finished (ok or failed) started at or after D; with no finished run
//! at all, it is due at once. So a due time missed while the machine was off
//! or asleep is caught up by the next check, once, however many due times
//! were missed; an interrupted run does not count (it is run again); and a
//! failed run is not repeated until the next due time (no retry storm:
//! retries of transient errors happen inside the run).
//!
//! **Health word**, first match wins:
//! - `never`: no run has finished (ok or failed);
//! - `failing`: the last finished run failed;
//! - `late`: the profile has a schedule, with interval I (see
//!   [`Schedule::interval`]) and grace G = I clamped to 5 minutes..1 hour,
//!   and either no success started within the last 2·I + G, or no run is in
//!   progress and the first due time after the last run's start (any
//!   result) is more than G ago: a due run that did not start;
//! - `ok`.

use super::calendar::Schedule;
use super::records::{History, RunRecord, RunResult};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use std::time::Duration;

/// The health word of a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Word {
    Ok,
    Late,
    Failing,
    Never,
}

impl Word {
    /// The word as `status` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Word::Ok => "ok",
            Word::Late => "late",
            Word::Failing => "failing",
            Word::Never => "never",
        }
    }
}

/// A profile's health at one instant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Health {
    pub word: Word,
    /// Why, in one sentence (empty for `ok`).
    pub reason: String,
    /// The schedule's next due time after now.
    #[serde(serialize_with = "super::timefmt::ser_opt")]
    pub next_due: Option<Timestamp>,
    /// The missed due time `--if-due` would run for now, if any.
    #[serde(serialize_with = "super::timefmt::ser_opt")]
    pub due_since: Option<Timestamp>,
    pub last_run: Option<RunRecord>,
    pub last_success: Option<RunRecord>,
}

/// The slack allowed between a due time and the run's start: the interval,
/// at least 5 minutes and at most an hour. It covers a timer's randomized
/// delay and a cron poll's period.
pub fn grace(interval: Duration) -> Duration {
    interval.clamp(Duration::from_secs(5 * 60), Duration::from_secs(3600))
}

fn signed(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

/// The due time a run would be for now, if the profile is due (see the
/// module documentation).
pub fn due_time(s: &Schedule, tz: &TimeZone, now: Timestamp, h: &History) -> Option<Timestamp> {
    let d = s.latest_at_or_before(now, tz)?;
    match &h.last_finished {
        Some(r) if r.started >= d => None,
        _ => Some(d),
    }
}

/// Whether a step with its own schedule (prune, check) is due: its latest
/// due time at or before now is after the step's last success (or it never
/// succeeded). Returns that due time.
pub fn step_due(
    s: &Schedule,
    tz: &TimeZone,
    now: Timestamp,
    last_success: Option<Timestamp>,
) -> Option<Timestamp> {
    let d = s.latest_at_or_before(now, tz)?;
    match last_success {
        Some(t) if t >= d => None,
        _ => Some(d),
    }
}

/// The health of a profile with schedule `s` (if any) and history `h`;
/// `running` says whether a run of it holds its lock now.
pub fn assess(
    s: Option<&Schedule>,
    tz: &TimeZone,
    now: Timestamp,
    h: &History,
    running: bool,
) -> Health {
    let mut health = Health {
        word: Word::Ok,
        reason: String::new(),
        next_due: s.and_then(|s| s.next_after(now, tz).ok()),
        due_since: s.and_then(|s| due_time(s, tz, now, h)),
        last_run: h.last_run.clone(),
        last_success: h.last_success.clone(),
    };
    let (word, reason) = word(s, tz, now, h, running);
    health.word = word;
    health.reason = reason;
    health
}

fn word(
    s: Option<&Schedule>,
    tz: &TimeZone,
    now: Timestamp,
    h: &History,
    running: bool,
) -> (Word, String) {
    let Some(finished) = &h.last_finished else {
        let why = if running {
            "the first run is in progress"
        } else {
            "no run has finished yet"
        };
        return (Word::Never, why.into());
    };
    if finished.result == RunResult::Failed {
        let err = finished.error.as_deref().unwrap_or("no error recorded");
        return (
            Word::Failing,
            format!("the last run (started {}) failed: {err}", finished.started),
        );
    }
    let Some(s) = s else {
        return (Word::Ok, String::new());
    };
    let interval = s.interval();
    let g = signed(grace(interval));
    let allowed = signed(interval.saturating_mul(2))
        .checked_add(g)
        .unwrap_or(SignedDuration::MAX);
    match &h.last_success {
        Some(ok) if now.duration_since(ok.started) > allowed => {
            return (
                Word::Late,
                format!(
                    "no successful run since {} (more than twice the schedule's interval of {})",
                    ok.started,
                    super::values::duration_text(interval)
                ),
            );
        }
        _ => {}
    }
    if !running
        && let Some(last) = &h.last_run
        && let Ok(d) = s.next_after(last.started, tz)
        && now.duration_since(d) > g
    {
        return (
            Word::Late,
            format!("a run was due at {d} and has not started"),
        );
    }
    (Word::Ok, String::new())
}

#[cfg(test)]
#[path = "health_tests.rs"]
mod tests;
