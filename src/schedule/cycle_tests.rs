//! Tests of the run cycle with scripted steps, real hooks and a fake clock: order, retries, failures, stops, --if-due, locks.

use super::*;
use crate::schedule::clock::FakeClock;
use crate::schedule::config::Config;
use crate::schedule::events::Memory;
use crate::schedule::paths::Env;
use crate::schedule::steps::{StepFailure, StepReport};
use crate::schedule::testutil::ts;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;

/// Steps that answer from a script and log their calls.
#[derive(Default)]
struct Scripted {
    answers: HashMap<&'static str, VecDeque<StepResult>>,
    calls: Vec<&'static str>,
    stop_during_backup: Option<StopFlag>,
}

impl Scripted {
    fn answer(&mut self, step: &'static str) -> StepResult {
        self.calls.push(step);
        self.answers
            .get_mut(step)
            .and_then(VecDeque::pop_front)
            .unwrap_or_else(|| Ok(StepReport::message(format!("{step} done"))))
    }
    fn script(mut self, step: &'static str, results: Vec<StepResult>) -> Self {
        self.answers.insert(step, results.into());
        self
    }
}

impl Steps for Scripted {
    fn backup(&mut self, _: &Profile) -> StepResult {
        if let Some(s) = &self.stop_during_backup {
            s.request();
        }
        self.answer("backup")
    }
    fn forget(&mut self, _: &Profile) -> StepResult {
        self.answer("forget")
    }
    fn prune(&mut self, _: &Profile) -> StepResult {
        self.answer("prune")
    }
    fn check(&mut self, _: &Profile) -> StepResult {
        self.answer("check")
    }
}

fn snapshot() -> StepResult {
    Ok(StepReport {
        message: "snapshot 1a2b3c4d saved".into(),
        snapshot_id: Some("1a2b3c4d".into()),
        files_added: 7,
        bytes_added: 4096,
    })
}

/// A test bed: a state directory, a profile from TOML, a fake clock.
struct Bed {
    tmp: tempfile::TempDir,
    state: PathBuf,
    records: Records,
    events: Memory,
    clock: FakeClock,
    stop: StopFlag,
}

impl Bed {
    fn new() -> Bed {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let records = Records::open(&state).unwrap();
        Bed {
            tmp,
            state,
            records,
            events: Memory::default(),
            clock: FakeClock::new(ts("2025-06-10T02:00:00Z")),
            stop: StopFlag::new(),
        }
    }

    fn dir(&self) -> PathBuf {
        self.tmp.path().to_path_buf()
    }

    fn ctx(&self) -> Context<'_> {
        Context {
            state_dir: self.records_dir(),
            records: &self.records,
            events: &self.events,
            clock: &self.clock,
            sleeper: &self.clock,
            tz: TimeZone::UTC,
            stop: self.stop.clone(),
        }
    }

    fn records_dir(&self) -> &Path {
        &self.state
    }

    /// A profile `p` with `extra` TOML lines.
    fn profile(&self, extra: &str) -> Profile {
        let text = format!(
            "[profile.p]\nrepository = \"/r\"\npassword-command = \"echo pw\"\npaths = [\"/data\"]\n\
             retry-delay = \"10s\"\n{extra}\n"
        );
        let cfg = Config::parse(&text, &self.dir().join("larder.toml"), &Env::default()).unwrap();
        cfg.profiles["p"].clone()
    }

    /// A hook command that writes its environment to `name` in the bed.
    fn env_hook(&self, name: &str) -> String {
        format!(
            "printf '%s|' \"$LARDER_RESULT\" \"$LARDER_EXIT_CODE\" \"$LARDER_ERROR\" \"$LARDER_SNAPSHOT_ID\" \"$LARDER_BYTES_ADDED\" > '{}'",
            self.dir().join(name).display()
        )
    }

    fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.dir().join(name)).ok()
    }

    fn step_statuses(summary: &RunSummary) -> Vec<(String, StepStatus)> {
        summary
            .steps
            .iter()
            .map(|s| (s.step.clone(), s.status))
            .collect()
    }
}

fn st(list: &[(&str, StepStatus)]) -> Vec<(String, StepStatus)> {
    list.iter().map(|(a, b)| (a.to_string(), *b)).collect()
}

use StepStatus::{Failed, Ok as Done, Skipped};

#[test]
fn a_good_run_does_every_due_step_and_records_it() {
    let bed = Bed::new();
    let prom = bed.dir().join("larder-p.prom");
    let p = bed.profile(&format!(
        "keep-daily = 7\nprune = \"weekly\"\ncheck = \"daily\"\nbefore = \"true\"\nafter = \"{}\"\non-success = \"{}\"\non-failure = \"touch {}\"\nprometheus-textfile = \"{}\"",
        bed.env_hook("after").replace('"', "\\\""),
        bed.env_hook("success").replace('"', "\\\""),
        bed.dir().join("failure").display(),
        prom.display()
    ));
    let mut steps = Scripted::default().script("backup", vec![snapshot()]);
    let s = run_cycle(&bed.ctx(), &p, &mut steps).unwrap();
    assert_eq!(steps.calls, vec!["backup", "forget", "prune", "check"]);
    assert_eq!(
        (s.result, s.exit_code, s.error.clone()),
        (RunResult::Ok, 0, None)
    );
    assert_eq!(
        Bed::step_statuses(&s),
        st(&[
            ("before-hook", Done),
            ("backup", Done),
            ("forget", Done),
            ("prune", Done),
            ("check", Done),
            ("after-hook", Done),
            ("on-success-hook", Done),
        ])
    );
    assert_eq!(bed.read("after").unwrap(), "ok|0||1a2b3c4d|4096|");
    assert_eq!(bed.read("success").unwrap(), "ok|0||1a2b3c4d|4096|");
    assert!(bed.read("failure").is_none());
    // Recorded, logged and exported.
    let h = bed.records.history("p").unwrap();
    let last = h.last_success.unwrap();
    assert_eq!(
        (last.snapshot_id.as_deref(), last.bytes_added),
        (Some("1a2b3c4d"), Some(4096))
    );
    assert_eq!(last.steps.len(), 7);
    let kinds: Vec<String> = bed
        .events
        .events()
        .iter()
        .map(|e| e.event.clone())
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("run-start"));
    assert_eq!(kinds.last().map(String::as_str), Some("run-end"));
    assert_eq!(kinds.iter().filter(|k| *k == "step").count(), 7);
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(
        text.contains("larder_last_run_success{profile=\"p\"} 1"),
        "{text}"
    );
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
}

#[test]
fn a_failing_before_hook_stops_the_run() {
    let bed = Bed::new();
    let p = bed.profile(&format!(
        "before = \"echo cannot mount >&2; exit 4\"\nafter = \"touch {}\"\non-failure = \"{}\"",
        bed.dir().join("after").display(),
        bed.env_hook("failure").replace('"', "\\\""),
    ));
    let mut steps = Scripted::default();
    let s = run_cycle(&bed.ctx(), &p, &mut steps).unwrap();
    assert!(steps.calls.is_empty());
    assert_eq!((s.result, s.exit_code), (RunResult::Failed, 1));
    let err = s.error.clone().unwrap();
    assert_eq!(err, "before hook exited with status 4: cannot mount");
    assert_eq!(
        Bed::step_statuses(&s),
        st(&[
            ("before-hook", Failed),
            ("backup", Skipped),
            ("forget", Skipped),
            ("prune", Skipped),
            ("check", Skipped),
            ("after-hook", Done),
            ("on-failure-hook", Done),
        ])
    );
    assert!(bed.read("after").is_some());
    assert_eq!(bed.read("failure").unwrap(), format!("failed|1|{err}||0|"));
    let h = bed.records.history("p").unwrap();
    assert_eq!(
        h.last_finished.unwrap().error.as_deref(),
        Some(err.as_str())
    );
}

#[test]
fn transient_backup_errors_are_retried_then_succeed() {
    let bed = Bed::new();
    let p = bed.profile("");
    let busy = || Err(StepFailure::transient("repository is locked: pid 9"));
    let mut steps = Scripted::default().script("backup", vec![busy(), busy(), snapshot()]);
    let s = run_cycle(&bed.ctx(), &p, &mut steps).unwrap();
    assert_eq!(s.result, RunResult::Ok);
    assert_eq!(steps.calls, vec!["backup", "backup", "backup"]);
    assert_eq!(
        s.steps
            .iter()
            .find(|x| x.step == "backup")
            .unwrap()
            .attempts,
        3
    );
    // Two backoff waits, on the fake clock: 10 s then 20 s, jittered.
    let sleeps = bed.clock.sleeps();
    assert_eq!(sleeps.len(), 2);
    assert!(sleeps[1] > std::time::Duration::from_secs(9));
}

#[test]
fn a_permanent_failure_skips_the_rest_and_runs_on_failure() {
    let bed = Bed::new();
    let p = bed.profile(&format!(
        "keep-last = 3\nprune = \"daily\"\non-failure = \"{}\"\non-success = \"touch {}\"",
        bed.env_hook("failure").replace('"', "\\\""),
        bed.dir().join("success").display()
    ));
    let mut steps = Scripted::default().script(
        "backup",
        vec![Err(StepFailure::permanent(
            "wrong password or no key found that opens the repository",
            12,
        ))],
    );
    let s = run_cycle(&bed.ctx(), &p, &mut steps).unwrap();
    assert_eq!(steps.calls, vec!["backup"]);
    assert_eq!((s.result, s.exit_code), (RunResult::Failed, 12));
    assert!(bed.clock.sleeps().is_empty());
    assert_eq!(
        bed.read("failure").unwrap(),
        "failed|12|backup failed: wrong password or no key found that opens the repository||0|"
    );
    assert!(bed.read("success").is_none());
    let skipped: Vec<_> = s
        .steps
        .iter()
        .filter(|x| x.status == Skipped)
        .map(|x| x.step.as_str())
        .collect();
    assert_eq!(skipped, vec!["forget", "prune", "check"]);
}

#[test]
fn an_exhausted_retry_budget_fails_the_run() {
    let bed = Bed::new();
    let p = bed.profile("retries = 1");
    let busy = || Err(StepFailure::transient("connection reset"));
    let mut steps = Scripted::default().script("backup", vec![busy(), busy(), busy()]);
    let s = run_cycle(&bed.ctx(), &p, &mut steps).unwrap();
    assert_eq!(steps.calls, vec!["backup", "backup"]);
    assert_eq!(
        s.error.as_deref(),
        Some("backup failed (after 2 attempts): connection reset")
    );
}

#[test]
fn prune_and_check_run_only_when_due() {
    let bed = Bed::new();
    let p = bed.profile("prune = \"weekly\"\ncheck = \"daily\"");
    // 2025-06-10 (Tuesday) 02:00: both never ran, so both are due.
    let mut steps = Scripted::default();
    run_cycle(&bed.ctx(), &p, &mut steps).unwrap();
    assert_eq!(steps.calls, vec!["backup", "prune", "check"]);
    // The next day: check is due again, prune not until Sunday.
    bed.clock.set(ts("2025-06-11T02:00:00Z"));
    let mut steps = Scripted::default();
    let s = run_cycle(&bed.ctx(), &p, &mut steps).unwrap();
    assert_eq!(steps.calls, vec!["backup", "check"]);
    let prune = s.steps.iter().find(|x| x.step == "prune").unwrap();
    assert_eq!(prune.message, "not due until 2025-06-15T00:00:00Z");
    // A failed prune does not count: it is due again at the next run.
    bed.clock.set(ts("2025-06-16T02:00:00Z"));
    let mut steps =
        Scripted::default().script("prune", vec![Err(StepFailure::permanent("disk full", 1))]);
    run_cycle(&bed.ctx(), &p, &mut steps).unwrap();
    bed.clock.set(ts("2025-06-17T02:00:00Z"));
    let mut steps = Scripted::default();
    run_cycle(&bed.ctx(), &p, &mut steps).unwrap();
    assert_eq!(steps.calls, vec!["backup", "prune", "check"]);
}

#[test]
fn a_stop_request_interrupts_between_steps() {
    let bed = Bed::new();
    let p = bed.profile(&format!(
        "keep-last = 3\nafter = \"{}\"\non-failure = \"touch {}\"",
        bed.env_hook("after").replace('"', "\\\""),
        bed.dir().join("failure").display()
    ));
    let mut steps = Scripted {
        stop_during_backup: Some(bed.stop.clone()),
        ..Scripted::default()
    };
    let s = run_cycle(&bed.ctx(), &p, &mut steps).unwrap();
    assert_eq!(steps.calls, vec!["backup"]);
    assert_eq!(
        (s.result, s.exit_code),
        (RunResult::Interrupted, EXIT_INTERRUPTED)
    );
    assert_eq!(
        bed.read("after").unwrap().split('|').next(),
        Some("interrupted")
    );
    assert!(bed.read("failure").is_none());
    let h = bed.records.history("p").unwrap();
    assert_eq!(h.last_run.unwrap().result, RunResult::Interrupted);
    assert!(h.last_finished.is_none());
}

/// Steps whose backup unwinds as the library does on SIGTERM.
struct StoppedMidBackup(StopFlag);

impl Steps for StoppedMidBackup {
    fn backup(&mut self, _: &Profile) -> StepResult {
        self.0.request();
        Err(StepFailure::from(crate::error::Error::Interrupted))
    }
    fn forget(&mut self, _: &Profile) -> StepResult {
        panic!("forget after a stop")
    }
    fn prune(&mut self, _: &Profile) -> StepResult {
        panic!("prune after a stop")
    }
    fn check(&mut self, _: &Profile) -> StepResult {
        panic!("check after a stop")
    }
}

#[test]
fn a_step_stopped_mid_way_makes_the_run_interrupted_not_failed() {
    let bed = Bed::new();
    let p = bed.profile(&format!(
        "keep-last = 3\non-failure = \"touch {}\"",
        bed.dir().join("failure").display()
    ));
    let s = run_cycle(&bed.ctx(), &p, &mut StoppedMidBackup(bed.stop.clone())).unwrap();
    assert_eq!(
        (s.result, s.exit_code),
        (RunResult::Interrupted, EXIT_INTERRUPTED)
    );
    assert_eq!(s.error.as_deref(), Some("stopped by request"));
    assert!(s.steps[0].message.contains("stopped by request"), "{s:?}");
    assert!(bed.read("failure").is_none());
    let h = bed.records.history("p").unwrap();
    assert_eq!(h.last_run.unwrap().result, RunResult::Interrupted);
}

#[test]
fn a_failing_after_hook_fails_the_run() {
    let bed = Bed::new();
    let p = bed.profile("after = \"exit 9\"");
    let s = run_cycle(&bed.ctx(), &p, &mut Scripted::default()).unwrap();
    assert_eq!(s.result, RunResult::Failed);
    assert_eq!(s.error.as_deref(), Some("after hook exited with status 9"));
}

#[test]
fn if_due_runs_only_when_due_and_the_lock_keeps_runs_apart() {
    let bed = Bed::new();
    let p = bed.profile("schedule = \"0 2 * * *\"");
    let due = RunRequest {
        if_due: true,
        wait: false,
    };
    // Never ran: due.
    let out = run_profile(&bed.ctx(), &p, due, &mut Scripted::default()).unwrap();
    assert!(matches!(out, RunOutcome::Ran(ref s) if s.result == RunResult::Ok));
    // Same day, later: not due.
    bed.clock.set(ts("2025-06-10T09:00:00Z"));
    let out = run_profile(&bed.ctx(), &p, due, &mut Scripted::default()).unwrap();
    assert_eq!(
        out,
        RunOutcome::NotDue {
            next_due: Some(ts("2025-06-11T02:00:00Z"))
        }
    );
    assert_eq!(bed.records.recent("p", 10).unwrap().len(), 1);
    // A run in progress elsewhere: refused at once, nothing recorded.
    let held = RunLock::try_acquire(bed.records_dir(), "p").unwrap();
    let err = run_profile(
        &bed.ctx(),
        &p,
        RunRequest::default(),
        &mut Scripted::default(),
    )
    .unwrap_err();
    assert!(is_busy(&err), "{err}");
    assert_eq!(bed.records.recent("p", 10).unwrap().len(), 1);
    drop(held);
    // A run a killed process left "running" is closed as interrupted.
    bed.records
        .begin("p", ts("2025-06-10T10:00:00Z"), 999_999)
        .unwrap();
    bed.clock.set(ts("2025-06-11T02:00:05Z"));
    let out = run_profile(&bed.ctx(), &p, due, &mut Scripted::default()).unwrap();
    assert!(matches!(out, RunOutcome::Ran(_)));
    let results: Vec<RunResult> = bed
        .records
        .recent("p", 10)
        .unwrap()
        .iter()
        .map(|r| r.result)
        .collect();
    assert_eq!(
        results,
        vec![RunResult::Ok, RunResult::Interrupted, RunResult::Ok]
    );
}

#[test]
fn if_due_needs_a_schedule_and_a_run_needs_paths() {
    let bed = Bed::new();
    let p = bed.profile("");
    let err = run_profile(
        &bed.ctx(),
        &p,
        RunRequest {
            if_due: true,
            wait: false,
        },
        &mut Scripted::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("has no schedule"), "{err}");
    let mut p = bed.profile("");
    p.paths.clear();
    let err = run_profile(
        &bed.ctx(),
        &p,
        RunRequest::default(),
        &mut Scripted::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string().ends_with("profile p: no paths to back up"),
        "{err}"
    );
}
