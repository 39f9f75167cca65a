//! What `larder status` and `larder config check` show, assembled from the
//! library's parts: per profile its schedule, next due time, last run and
//! last success, health word, whether a run holds its lock, and when prune
//! and check are next due; and the resolved profile with its schedules'
//! next due times and systemd `OnCalendar=` form.

use super::calendar::Schedule;
use super::health::{self, Health, Word};
use super::profile::Profile;
use super::records::Records;
use super::runlock;
use crate::error::Result;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::Serialize;
use std::path::Path;

/// One profile's line (or JSON object) in `larder status`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ProfileStatus {
    pub profile: String,
    pub schedule: Option<String>,
    #[serde(flatten)]
    pub health: Health,
    /// The pid of the run holding the profile's lock, if one does (`Some(None)`:
    /// held, pid unknown).
    pub running: Option<Option<u32>>,
    /// The last run's duration in seconds.
    pub last_run_seconds: Option<f64>,
    /// When prune is due next, or is due since (if due now).
    #[serde(serialize_with = "super::timefmt::ser_opt")]
    pub prune_due: Option<Timestamp>,
    #[serde(serialize_with = "super::timefmt::ser_opt")]
    pub check_due: Option<Timestamp>,
}

/// The due time of a step with its own schedule: since when it is due, or
/// when it will be.
fn step_due(
    records: &Records,
    p: &Profile,
    step: &str,
    s: Option<&Schedule>,
    tz: &TimeZone,
    now: Timestamp,
) -> Result<Option<Timestamp>> {
    let Some(s) = s else { return Ok(None) };
    let last = records.last_step_success(&p.name, step)?;
    Ok(health::step_due(s, tz, now, last).or_else(|| s.next_after(now, tz).ok()))
}

/// The status of one profile at `now`.
pub fn status(
    records: &Records,
    state_dir: &Path,
    p: &Profile,
    tz: &TimeZone,
    now: Timestamp,
) -> Result<ProfileStatus> {
    let history = records.history(&p.name)?;
    let running = runlock::holder(state_dir, &p.name)?;
    let health = health::assess(p.schedule.as_ref(), tz, now, &history, running.is_some());
    Ok(ProfileStatus {
        profile: p.name.clone(),
        schedule: p.schedule.as_ref().map(|s| s.as_str().to_string()),
        last_run_seconds: history
            .last_run
            .as_ref()
            .and_then(|r| r.duration())
            .map(|d| d.as_secs_f64()),
        health,
        running,
        prune_due: step_due(records, p, "prune", p.prune.as_ref(), tz, now)?,
        check_due: step_due(records, p, "check", p.check.as_ref(), tz, now)?,
    })
}

/// Whether every profile is `ok` (`status` exits non-zero otherwise).
pub fn all_ok(statuses: &[ProfileStatus]) -> bool {
    statuses.iter().all(|s| s.health.word == Word::Ok)
}

/// A resolved profile as `larder config check` prints it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ProfileView<'a> {
    #[serde(flatten)]
    pub profile: &'a Profile,
    #[serde(serialize_with = "super::timefmt::ser_opt")]
    pub next_due: Option<Timestamp>,
    /// The timer's `OnCalendar=` value…
    pub on_calendar: Option<String>,
    /// …or why the schedule has none (install with `--cron` instead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_calendar_error: Option<String>,
    #[serde(serialize_with = "super::timefmt::ser_opt")]
    pub prune_next_due: Option<Timestamp>,
    #[serde(serialize_with = "super::timefmt::ser_opt")]
    pub check_next_due: Option<Timestamp>,
}

/// The view of `p` at `now`.
pub fn profile_view<'a>(p: &'a Profile, tz: &TimeZone, now: Timestamp) -> ProfileView<'a> {
    let next = |s: Option<&Schedule>| s.and_then(|s| s.next_after(now, tz).ok());
    ProfileView {
        profile: p,
        next_due: next(p.schedule.as_ref()),
        on_calendar: p.schedule.as_ref().and_then(|s| s.on_calendar().ok()),
        on_calendar_error: p.schedule.as_ref().and_then(|s| s.on_calendar().err()),
        prune_next_due: next(p.prune.as_ref()),
        check_next_due: next(p.check.as_ref()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::config::Config;
    use crate::schedule::paths::Env;
    use crate::schedule::records::{RunEnd, RunResult};
    use crate::schedule::runlock::RunLock;
    use crate::schedule::testutil::ts;

    fn profile() -> Profile {
        let text = "[profile.home]\nrepository = \"/r\"\npassword-command = \"x\"\npaths = [\"/h\"]\n\
                    schedule = \"daily\"\nprune = \"weekly\"\ncheck = \"0 0 1 * 1\"\n";
        Config::parse(text, Path::new("/c.toml"), &Env::default())
            .unwrap()
            .profiles["home"]
            .clone()
    }

    #[test]
    fn status_gathers_health_lock_and_step_due_times() {
        let tmp = tempfile::tempdir().unwrap();
        let records = Records::open(tmp.path()).unwrap();
        let p = profile();
        let now = ts("2025-06-10T12:00:00Z");
        let s = status(&records, tmp.path(), &p, &TimeZone::UTC, now).unwrap();
        assert_eq!(s.health.word, Word::Never);
        assert!(!all_ok(std::slice::from_ref(&s)));
        assert_eq!(s.running, None);
        // Never pruned: due since the latest Sunday midnight.
        assert_eq!(s.prune_due, Some(ts("2025-06-08T00:00:00Z")));
        let id = records
            .begin("home", ts("2025-06-10T00:00:00Z"), 5)
            .unwrap();
        records
            .add_step(
                id,
                &crate::schedule::records::StepRecord {
                    step: "prune".into(),
                    status: crate::schedule::records::StepStatus::Ok,
                    message: String::new(),
                    started: ts("2025-06-10T00:01:00Z"),
                    ended: ts("2025-06-10T00:02:00Z"),
                    attempts: 1,
                },
            )
            .unwrap();
        records
            .finish(
                id,
                ts("2025-06-10T00:05:00Z"),
                &RunEnd {
                    result: Some(RunResult::Ok),
                    ..RunEnd::default()
                },
            )
            .unwrap();
        let _lock = RunLock::try_acquire(tmp.path(), "home").unwrap();
        let s = status(&records, tmp.path(), &p, &TimeZone::UTC, now).unwrap();
        assert_eq!(s.health.word, Word::Ok);
        assert!(all_ok(std::slice::from_ref(&s)));
        assert_eq!(s.running, Some(Some(std::process::id())));
        assert_eq!(s.last_run_seconds, Some(300.0));
        assert_eq!(s.prune_due, Some(ts("2025-06-15T00:00:00Z")));
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["word"], "ok");
        assert_eq!(v["next-due"], "2025-06-11T00:00:00Z");
        assert_eq!(v["last-run"]["result"], "ok");
    }

    #[test]
    fn the_config_view_adds_due_times_and_the_timer_form() {
        let p = profile();
        let v = serde_json::to_value(profile_view(&p, &TimeZone::UTC, ts("2025-06-10T12:00:00Z")))
            .unwrap();
        assert_eq!(v["name"], "home");
        assert_eq!(v["schedule"], "daily");
        assert_eq!(v["next-due"], "2025-06-11T00:00:00Z");
        assert_eq!(v["on-calendar"], "*-*-* 00:00:00");
        assert!(v.get("on-calendar-error").is_none());
        let mut q = p.clone();
        q.schedule = q.check.clone();
        let v = serde_json::to_value(profile_view(&q, &TimeZone::UTC, ts("2025-06-10T12:00:00Z")))
            .unwrap();
        assert!(v["on-calendar"].is_null());
        assert!(
            v["on-calendar-error"]
                .as_str()
                .unwrap()
                .contains("either one")
        );
        assert_eq!(v["prune-next-due"], "2025-06-15T00:00:00Z");
        assert_eq!(v["check-next-due"], "2025-06-16T00:00:00Z");
    }
}
