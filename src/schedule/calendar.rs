//! Schedules: the shorthands (`hourly`, `daily`, `weekly`, `monthly`,
//! `yearly`, and cron's `@daily` forms) and cron expressions of five fields
//! (or six, seconds first), parsed by `croner`; their due times in a time
//! zone, and their nominal interval.
//!
//! Time zone rules (those of cron(8), which `croner` follows): on the day
//! the clocks go forward, a job whose minute, hour and second are single
//! values (`30 2 * * *`) and whose time does not exist that day runs at the
//! first instant after the gap (03:00 in Europe/Berlin), so a daily job
//! never skips a day; a job with a wildcard or a range in its time fields
//! (`hourly`, `*/15 * * * *`) simply has no due time inside the gap. On the
//! day the clocks go back, a fixed-time job runs once, on the first of the
//! two instants with its wall-clock time; a wildcard job runs on both, so an
//! hourly job still runs every real hour. systemd timers differ on those two
//! days (see [`super::oncalendar`]).

use crate::error::{Error, Result};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use std::time::Duration;

/// The shorthands and the cron expressions they stand for.
const SHORTHANDS: &[(&str, &str)] = &[
    ("hourly", "0 * * * *"),
    ("daily", "0 0 * * *"),
    ("midnight", "0 0 * * *"),
    ("weekly", "0 0 * * 0"),
    ("monthly", "0 0 1 * *"),
    ("yearly", "0 0 1 1 *"),
    ("annually", "0 0 1 1 *"),
];

/// A parsed schedule.
#[derive(Clone, Debug)]
pub struct Schedule {
    text: String,
    cron: Cron,
    interval: Duration,
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Schedule {
    /// Parses a shorthand or a cron expression. The error message says what
    /// is accepted; the caller adds the file and line.
    pub fn parse(text: &str) -> std::result::Result<Schedule, String> {
        let trimmed = text.trim();
        let lower = trimmed.to_ascii_lowercase();
        let word = lower.strip_prefix('@').unwrap_or(&lower);
        let expr = match SHORTHANDS.iter().find(|(name, _)| *name == word) {
            Some((_, expr)) => *expr,
            None if trimmed.starts_with('@') => {
                return Err(format!(
                    "schedule {text:?}: the @ forms are @hourly, @daily, @weekly, @monthly and @yearly"
                ));
            }
            None => trimmed,
        };
        let fields = expr.split_whitespace().count();
        if fields != 5 && fields != 6 {
            return Err(format!(
                "schedule {text:?}: expected hourly, daily, weekly, monthly, yearly, or a cron \
                 expression of 5 fields (minute hour day-of-month month weekday) or 6 (seconds \
                 first), found {fields} field(s)"
            ));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(expr)
            .map_err(|e| format!("schedule {text:?}: {e}"))?;
        let interval = nominal_interval(&cron).map_err(|e| format!("schedule {text:?}: {e}"))?;
        Ok(Schedule {
            text: trimmed.to_string(),
            cron,
            interval,
        })
    }

    /// The schedule as written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The parsed cron pattern (shorthands expanded).
    pub(crate) fn pattern(&self) -> &croner::CronPattern {
        &self.cron.pattern
    }

    /// The longest time between two consecutive due times, measured in UTC
    /// so that daylight saving time does not stretch it: one hour for
    /// `hourly`, a day for `daily`, three days for `0 2 * * 1-5`, 31 days
    /// for `monthly`. The `late` rule of [`super::health`] is built on it.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The minutes of the hour the schedule can fire in, and whether it
    /// fires on a second other than :00 (then it needs a finer poll).
    pub fn minutes(&self) -> (Vec<u8>, bool) {
        let minutes = self
            .cron
            .pattern
            .minutes
            .values()
            .into_iter()
            .filter_map(|m| u8::try_from(m).ok())
            .collect();
        let seconds = self.cron.pattern.seconds.values();
        (minutes, seconds != [0])
    }

    /// The first due time strictly after `t`.
    pub fn next_after(&self, t: Timestamp, tz: &TimeZone) -> Result<Timestamp> {
        let start = whole_second(t).to_zoned(tz.clone());
        self.cron
            .find_next_occurrence(&start, false)
            .map(|z| z.timestamp())
            .map_err(|e| {
                Error::Usage(format!(
                    "schedule {:?}: no due time after {t}: {e}",
                    self.text
                ))
            })
    }

    /// The latest due time at or before `t`, if there is one.
    ///
    /// `croner` searches backwards with its own reading of the hours around
    /// a clock change; this walks forwards from its answer so that the
    /// result is always one of the times [`Schedule::next_after`] yields.
    pub fn latest_at_or_before(&self, t: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let t = whole_second(t);
        let mut probe = t;
        for _ in 0..8 {
            let candidate = self
                .cron
                .find_previous_occurrence(&probe.to_zoned(tz.clone()), true)
                .ok()?
                .timestamp();
            let mut best = None;
            let before = candidate
                .checked_sub(jiff::SignedDuration::from_secs(1))
                .ok()?;
            let mut x = self.next_after(before, tz).ok()?;
            while x <= t {
                best = Some(x);
                match self.next_after(x, tz) {
                    Ok(n) => x = n,
                    Err(_) => break,
                }
            }
            if best.is_some() {
                return best;
            }
            probe = before;
        }
        None
    }

    /// The first due time in `(after, until]`, if any.
    pub fn first_due_between(
        &self,
        after: Timestamp,
        until: Timestamp,
        tz: &TimeZone,
    ) -> Option<Timestamp> {
        self.next_after(after, tz).ok().filter(|d| *d <= until)
    }
}

impl std::fmt::Display for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl serde::Serialize for Schedule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

/// `t` without its fraction of a second (schedules have whole seconds).
fn whole_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// The largest gap between consecutive due times in UTC, sampled from a
/// fixed start over at least 400 days or 2000 due times. A pattern with no
/// due time at all (`0 0 31 2 *`) is an error.
fn nominal_interval(cron: &Cron) -> std::result::Result<Duration, String> {
    let utc = TimeZone::UTC;
    let start: Timestamp = Timestamp::from_second(978_307_200).map_err(|e| e.to_string())?; // 2001-01-01
    let horizon = jiff::SignedDuration::from_hours(400 * 24);
    let mut prev = cron
        .find_next_occurrence(&start.to_zoned(utc.clone()), true)
        .map_err(|_| "this pattern never matches a real date".to_string())?;
    let mut widest = jiff::SignedDuration::ZERO;
    for count in 0.. {
        let next = match cron.find_next_occurrence(&prev, false) {
            Ok(n) => n,
            Err(_) if count > 0 => break,
            Err(_) => return Err("this pattern matches only once".into()),
        };
        let gap = next.timestamp().duration_since(prev.timestamp());
        widest = widest.max(gap);
        prev = next;
        if count >= 2000 || prev.timestamp().duration_since(start) > horizon {
            break;
        }
    }
    Duration::try_from(widest).map_err(|e| e.to_string())
}

#[cfg(test)]
#[path = "calendar_tests.rs"]
mod tests;
