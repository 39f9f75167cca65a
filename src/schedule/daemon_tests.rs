//! Tests of the daemon loop on a fake clock: catch-up, ordering, stop requests, busy profiles, hold-off.

use super::*;
use crate::schedule::clock::{Clock, FakeClock, StopFlag};
use crate::schedule::config::Config;
use crate::schedule::events::Memory;
use crate::schedule::paths::Env;
use crate::schedule::records::{Records, RunEnd, RunResult};
use crate::schedule::runlock::RunLock;
use crate::schedule::steps::StepReport;
use crate::schedule::testutil::ts;
use jiff::tz::TimeZone;
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

/// Steps that log "profile@time" per backup and can stop the daemon.
struct Logged {
    log: Rc<RefCell<Vec<String>>>,
    clock: FakeClock,
    stop_after: usize,
    stop: StopFlag,
}

impl Steps for Logged {
    fn backup(&mut self, p: &Profile) -> StepResult {
        let mut log = self.log.borrow_mut();
        log.push(format!("{}@{}", p.name, self.clock.now()));
        if log.len() >= self.stop_after {
            self.stop.request();
        }
        Ok(StepReport::message("saved"))
    }
    fn forget(&mut self, _: &Profile) -> StepResult {
        Ok(StepReport::default())
    }
    fn prune(&mut self, _: &Profile) -> StepResult {
        Ok(StepReport::default())
    }
    fn check(&mut self, _: &Profile) -> StepResult {
        Ok(StepReport::default())
    }
}

struct Bed {
    _tmp: tempfile::TempDir,
    state: PathBuf,
    records: Records,
    events: Memory,
    clock: FakeClock,
    stop: StopFlag,
    profiles: Vec<Profile>,
}

impl Bed {
    fn new(start: &str, toml: &str) -> Bed {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let records = Records::open(&state).unwrap();
        let cfg = Config::parse(toml, &tmp.path().join("larder.toml"), &Env::default()).unwrap();
        Bed {
            _tmp: tmp,
            state,
            records,
            events: Memory::default(),
            clock: FakeClock::new(ts(start)),
            stop: StopFlag::new(),
            profiles: cfg.profiles.into_values().collect(),
        }
    }

    fn ctx(&self) -> Context<'_> {
        Context {
            state_dir: &self.state,
            records: &self.records,
            events: &self.events,
            clock: &self.clock,
            sleeper: &self.clock,
            tz: TimeZone::UTC,
            stop: self.stop.clone(),
        }
    }

    fn succeeded(&self, profile: &str, at: &str) {
        let id = self.records.begin(profile, ts(at), 1).unwrap();
        let end = RunEnd {
            result: Some(RunResult::Ok),
            ..RunEnd::default()
        };
        self.records.finish(id, ts(at), &end).unwrap();
    }

    /// Runs the daemon until `stop_after` backups; returns "profile@time".
    fn run(&self, stop_after: usize) -> Vec<String> {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut make = |_: &Profile| -> Result<Box<dyn Steps>> {
            Ok(Box::new(Logged {
                log: Rc::clone(&log),
                clock: self.clock.clone(),
                stop_after,
                stop: self.stop.clone(),
            }))
        };
        run(&self.ctx(), &self.profiles, &mut make).unwrap();
        log.take()
    }
}

const TWO: &str = "
[profile.a]
repository = \"/r\"
password-command = \"true\"
paths = [\"/a\"]
schedule = \"hourly\"

[profile.b]
inherit = \"a\"
paths = [\"/b\"]
schedule = \"0 2 * * *\"

[profile.manual]
inherit = \"a\"
schedule = \"daily\"
";

#[test]
fn runs_what_is_due_catches_up_once_then_follows_the_schedules() {
    let mut bed = Bed::new("2025-06-10T22:30:00Z", TWO);
    bed.profiles.retain(|p| p.name != "manual");
    bed.succeeded("a", "2025-06-10T21:00:00Z");
    // b last ran three days ago: one catch-up run, not three.
    bed.succeeded("b", "2025-06-07T02:00:00Z");
    let got = bed.run(7);
    assert_eq!(
        got,
        vec![
            "b@2025-06-10T22:30:00Z", // due since 2025-06-10T02:00
            "a@2025-06-10T22:30:00Z", // due since 22:00
            "a@2025-06-10T23:00:00Z",
            "a@2025-06-11T00:00:00Z",
            "a@2025-06-11T01:00:00Z",
            "a@2025-06-11T02:00:00Z", // both due at 02:00: a first by name
            "b@2025-06-11T02:00:00Z",
        ]
    );
    let kinds: Vec<String> = bed
        .events
        .events()
        .iter()
        .map(|e| e.event.clone())
        .collect();
    assert_eq!(kinds.first().map(String::as_str), Some("daemon-start"));
    assert_eq!(kinds.last().map(String::as_str), Some("daemon-stop"));
    // It never slept past a due time, nor more than a minute at once.
    assert!(bed.clock.sleeps().iter().all(|d| *d <= MAX_SLEEP));
}

#[test]
fn stops_at_once_when_the_flag_is_already_set() {
    let bed = Bed::new("2025-06-10T22:30:00Z", TWO);
    bed.stop.request();
    assert!(bed.run(1).is_empty());
    assert!(bed.clock.sleeps().is_empty());
}

#[test]
fn a_stop_during_a_run_ends_the_loop_and_the_run_is_interrupted() {
    let bed = Bed::new("2025-06-10T22:30:00Z", TWO);
    // The first backup requests the stop: its run is recorded interrupted,
    // and no other profile starts.
    let got = bed.run(1);
    assert_eq!(got.len(), 1);
    let name = got[0].split('@').next().unwrap();
    let h = bed.records.history(name).unwrap();
    assert_eq!(h.last_run.unwrap().result, RunResult::Interrupted);
    // An interrupted run is caught up when the daemon starts again.
    bed.stop
        .atomic()
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let again = bed.run(1);
    assert_eq!(again.first(), got.first());
}

#[test]
fn a_profile_run_elsewhere_is_skipped_and_retried() {
    let mut bed = Bed::new("2025-06-10T22:30:00Z", TWO);
    bed.profiles.retain(|p| p.name == "a");
    bed.succeeded("a", "2025-06-10T21:00:00Z");
    // Another process holds a's lock until the daemon's first sleep.
    let sleeper = Stopper {
        clock: bed.clock.clone(),
        stop: bed.stop.clone(),
        limit: ts("2025-06-10T22:45:00Z"),
        release: std::sync::Mutex::new(Some(RunLock::try_acquire(&bed.state, "a").unwrap())),
    };
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut make = |_: &Profile| -> Result<Box<dyn Steps>> {
        Ok(Box::new(Logged {
            log: Rc::clone(&log),
            clock: bed.clock.clone(),
            stop_after: 99,
            stop: bed.stop.clone(),
        }))
    };
    let ctx = Context {
        sleeper: &sleeper,
        ..bed.ctx()
    };
    run(&ctx, &bed.profiles, &mut make).unwrap();
    let busy: Vec<_> = bed
        .events
        .events()
        .into_iter()
        .filter(|e| e.event == "busy")
        .collect();
    assert_eq!(busy.len(), 1);
    assert_eq!(busy[0].time, ts("2025-06-10T22:30:00Z"));
    // Retried after at most a minute, once the other run was over.
    assert_eq!(*log.borrow(), vec!["a@2025-06-10T22:31:00Z".to_string()]);
}

#[test]
fn a_profile_whose_run_cannot_start_is_held_off_until_its_next_due_time() {
    let mut bed = Bed::new("2025-06-10T22:30:00Z", TWO);
    bed.profiles.retain(|p| p.name == "a");
    bed.profiles[0].paths.clear(); // "no paths to back up"
    let mut make =
        |_: &Profile| -> Result<Box<dyn Steps>> { Err(crate::Error::Usage("unused".into())) };
    let sleeper = Stopper {
        clock: bed.clock.clone(),
        stop: bed.stop.clone(),
        limit: ts("2025-06-11T00:30:00Z"),
        release: std::sync::Mutex::new(None),
    };
    let ctx = Context {
        sleeper: &sleeper,
        ..bed.ctx()
    };
    run(&ctx, &bed.profiles, &mut make).unwrap();
    let errors: Vec<_> = bed
        .events
        .events()
        .into_iter()
        .filter(|e| e.event == "error")
        .collect();
    // 22:30, 23:00 and 00:00: one error per due time, not one a minute.
    let times: Vec<Timestamp> = errors.iter().map(|e| e.time).collect();
    assert_eq!(
        times,
        vec![
            ts("2025-06-10T22:30:00Z"),
            ts("2025-06-10T23:00:00Z"),
            ts("2025-06-11T00:00:00Z")
        ]
    );
    assert!(
        errors[0].fields["message"]
            .as_str()
            .unwrap()
            .ends_with("no paths to back up")
    );
}

/// A fake sleeper that releases a lock at its first sleep and sets the
/// stop flag once the clock passes `limit`.
struct Stopper {
    clock: FakeClock,
    stop: StopFlag,
    limit: Timestamp,
    release: std::sync::Mutex<Option<RunLock>>,
}

impl crate::schedule::clock::Sleeper for Stopper {
    fn sleep(&self, d: Duration, stop: &StopFlag) -> bool {
        self.release.lock().unwrap().take();
        self.clock.advance(d);
        if self.clock.now() >= self.limit {
            self.stop.request();
        }
        stop.is_set()
    }
}
