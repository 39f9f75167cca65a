//! The run cycle of one profile: `before` hook → backup → forget (when the
//! profile has a retention policy) → prune (when its schedule is due) →
//! check (when due) → `after` hook → `on-success` or `on-failure` hook.
//!
//! - A failing `before` hook stops the run: no step runs, the run fails.
//! - A failed step skips every later step. Transient failures are retried
//!   with backoff first (see [`super::retry`]).
//! - A stop request (SIGTERM) is honoured between steps (and a step that
//!   fails once a stop was requested, as a backup unwinding with
//!   `Interrupted` does, counts as stopped, not failed): the rest are
//!   skipped, the run is recorded as interrupted (exit code 130), the
//!   `after` hook still runs (it usually undoes what `before` did), the
//!   `on-success`/`on-failure` hooks do not.
//! - A failing `after` hook fails an otherwise good run; a failing
//!   `on-success`/`on-failure` hook is recorded but changes nothing.
//! - The run is recorded in the state database from its start; a record,
//!   log or metrics write that fails becomes a warning in the summary.
//!
//! [`run_profile`] wraps the cycle with the profile's run lock and the
//! `--if-due` decision.

use super::clock::{Clock, Sleeper, StopFlag};
use super::events::{Event, EventSink};
use super::health;
use super::hooks::{HookEnv, run_hook};
use super::profile::Profile;
use super::records::{Records, RunEnd, RunResult, StepRecord, StepStatus};
use super::retry::with_retries;
use super::runlock::RunLock;
use super::steps::{StepResult, Steps};
use crate::error::{Error, Result};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::Serialize;
use std::path::Path;

/// The exit code of a run stopped by a stop request.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Everything a cycle needs from its surroundings.
pub struct Context<'a> {
    pub state_dir: &'a Path,
    pub records: &'a Records,
    pub events: &'a dyn EventSink,
    pub clock: &'a dyn Clock,
    pub sleeper: &'a dyn Sleeper,
    /// The zone schedules are read in (normally `TimeZone::system()`).
    pub tz: TimeZone,
    pub stop: StopFlag,
}

/// What a run did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunSummary {
    pub run_id: i64,
    pub profile: String,
    pub result: RunResult,
    pub exit_code: i32,
    pub error: Option<String>,
    pub snapshot_id: Option<String>,
    pub files_added: u64,
    pub bytes_added: u64,
    #[serde(serialize_with = "super::timefmt::ser")]
    pub started: Timestamp,
    #[serde(serialize_with = "super::timefmt::ser")]
    pub ended: Timestamp,
    pub steps: Vec<StepRecord>,
    /// Problems that did not fail the run (a log or metrics file that could
    /// not be written).
    pub warnings: Vec<String>,
}

/// What `larder run` was asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunRequest {
    /// Run only when the schedule says so (see [`super::health`]).
    pub if_due: bool,
    /// Wait for a running cycle of the same profile instead of failing.
    pub wait: bool,
}

/// The outcome of [`run_profile`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "outcome")]
pub enum RunOutcome {
    Ran(RunSummary),
    NotDue {
        #[serde(serialize_with = "super::timefmt::ser_opt")]
        next_due: Option<Timestamp>,
    },
}

/// Takes the profile's run lock (failing at once with [`Error::Locked`],
/// or waiting), closes runs a killed process left open, decides `--if-due`,
/// and runs the cycle.
pub fn run_profile(
    ctx: &Context,
    profile: &Profile,
    req: RunRequest,
    steps: &mut dyn Steps,
) -> Result<RunOutcome> {
    let _lock = if req.wait {
        RunLock::acquire_waiting(ctx.state_dir, &profile.name, ctx.sleeper, &ctx.stop)?
    } else {
        RunLock::try_acquire(ctx.state_dir, &profile.name)?
    };
    let now = ctx.clock.now();
    ctx.records
        .mark_unfinished_interrupted(&profile.name, now)?;
    if req.if_due {
        let schedule = profile.schedule.as_ref().ok_or_else(|| {
            profile.error_at(
                "schedule",
                "has no schedule, so --if-due cannot tell when it is due",
            )
        })?;
        let history = ctx.records.history(&profile.name)?;
        if health::due_time(schedule, &ctx.tz, now, &history).is_none() {
            let next_due = schedule.next_after(now, &ctx.tz).ok();
            ctx.events.emit(
                &Event::new(now, "not-due", Some(&profile.name))
                    .with("next_due", next_due.map(|t| t.to_string())),
            );
            return Ok(RunOutcome::NotDue { next_due });
        }
    }
    if profile.paths.is_empty() && profile.backup.stdin_from_command.is_empty() {
        return Err(profile.error_at("paths", "no paths to back up"));
    }
    Ok(RunOutcome::Ran(run_cycle(ctx, profile, steps)?))
}

/// One cycle (the caller holds the profile's run lock).
pub fn run_cycle(ctx: &Context, profile: &Profile, steps: &mut dyn Steps) -> Result<RunSummary> {
    let started = ctx.clock.now();
    let run_id = ctx
        .records
        .begin(&profile.name, started, std::process::id())?;
    ctx.events.emit(
        &Event::new(started, "run-start", Some(&profile.name))
            .with("run_id", run_id)
            .with("pid", std::process::id()),
    );
    let mut c = Cycle {
        ctx,
        profile,
        run_id,
        done: Vec::new(),
        warnings: Vec::new(),
        failure: None,
        interrupted: false,
        snapshot_id: None,
        files_added: 0,
        bytes_added: 0,
    };
    c.before_hook();
    c.repository_steps(steps);
    let result = c.finish_hooks();
    Ok(c.close(started, result))
}

/// The state of a cycle in progress.
struct Cycle<'a> {
    ctx: &'a Context<'a>,
    profile: &'a Profile,
    run_id: i64,
    done: Vec<StepRecord>,
    warnings: Vec<String>,
    /// The first failure: its message and exit code.
    failure: Option<(String, i32)>,
    interrupted: bool,
    snapshot_id: Option<String>,
    files_added: u64,
    bytes_added: u64,
}

impl Cycle<'_> {
    fn record(
        &mut self,
        step: &str,
        status: StepStatus,
        message: String,
        started: Timestamp,
        attempts: u32,
    ) {
        let rec = StepRecord {
            step: step.to_string(),
            status,
            message,
            started,
            ended: self.ctx.clock.now(),
            attempts,
        };
        if let Err(e) = self.ctx.records.add_step(self.run_id, &rec) {
            self.warnings
                .push(format!("cannot record step {step}: {e}"));
        }
        self.ctx.events.emit(
            &Event::new(rec.ended, "step", Some(&self.profile.name))
                .with("run_id", self.run_id)
                .with("step", step)
                .with("status", status)
                .with("message", &rec.message)
                .with("attempts", attempts),
        );
        self.done.push(rec);
    }

    fn fail(&mut self, message: String, exit_code: i32) {
        if self.failure.is_none() {
            self.failure = Some((message, exit_code));
        }
    }

    fn hook_env(&self, result: &str) -> HookEnv {
        let (error, exit_code) = self.failure.clone().unwrap_or_default();
        HookEnv {
            profile: self.profile.name.clone(),
            result: result.to_string(),
            exit_code,
            error,
            snapshot_id: self.snapshot_id.clone().unwrap_or_default(),
            files_added: self.files_added,
            bytes_added: self.bytes_added,
        }
    }

    /// Runs hook `hook` if the profile has one; returns whether it failed.
    fn hook(&mut self, hook: &str, command: Option<&String>, result: &str) -> bool {
        let Some(command) = command else { return false };
        let started = self.ctx.clock.now();
        let r = run_hook(
            hook,
            command,
            &self.hook_env(result),
            self.profile.hooks.timeout,
        );
        let mut message = format!("{hook} hook {}", r.message);
        if !r.ok && !r.output.is_empty() {
            message = format!("{message}: {}", r.output);
        }
        let status = if r.ok {
            StepStatus::Ok
        } else {
            StepStatus::Failed
        };
        self.record(&format!("{hook}-hook"), status, message.clone(), started, 1);
        if !r.ok && hook != "on-success" && hook != "on-failure" {
            self.fail(message, 1);
        }
        !r.ok
    }

    fn before_hook(&mut self) {
        let cmd = self.profile.hooks.before.clone();
        self.hook("before", cmd.as_ref(), "running");
    }

    /// Runs one repository step with retries, unless an earlier step
    /// failed or a stop was requested.
    fn step(&mut self, name: &str, attempt: &mut dyn FnMut() -> StepResult) -> bool {
        let started = self.ctx.clock.now();
        if self.failure.is_some() {
            self.record(
                name,
                StepStatus::Skipped,
                "an earlier step failed".into(),
                started,
                0,
            );
            return false;
        }
        if self.interrupted || self.ctx.stop.is_set() {
            self.interrupted = true;
            self.record(
                name,
                StepStatus::Skipped,
                "stop requested".into(),
                started,
                0,
            );
            return false;
        }
        let (result, attempts) = with_retries(
            &self.profile.retry,
            self.ctx.sleeper,
            &self.ctx.stop,
            attempt,
        );
        match result {
            Ok(report) => {
                if report.snapshot_id.is_some() {
                    self.snapshot_id = report.snapshot_id;
                }
                self.files_added += report.files_added;
                self.bytes_added += report.bytes_added;
                self.record(name, StepStatus::Ok, report.message, started, attempts);
                true
            }
            Err(f) if self.ctx.stop.is_set() => {
                // The step gave up because a stop was requested (the library
                // unwinds with `Interrupted`): the run is interrupted, not failed.
                let message = format!("{name} stopped by request: {}", f.message);
                self.record(name, StepStatus::Failed, message, started, attempts);
                self.interrupted = true;
                false
            }
            Err(f) => {
                let tries = if attempts > 1 {
                    format!(" (after {attempts} attempts)")
                } else {
                    String::new()
                };
                let message = format!("{name} failed{tries}: {}", f.message);
                self.record(name, StepStatus::Failed, message.clone(), started, attempts);
                self.fail(message, f.exit_code);
                false
            }
        }
    }

    fn skip(&mut self, name: &str, why: String) {
        let now = self.ctx.clock.now();
        self.record(name, StepStatus::Skipped, why, now, 0);
    }

    fn repository_steps(&mut self, steps: &mut dyn Steps) {
        let p = self.profile;
        self.step("backup", &mut || steps.backup(p));
        if p.retention.is_set() {
            self.step("forget", &mut || steps.forget(p));
        } else {
            self.skip("forget", "no retention policy".into());
        }
        match self.due_step("prune", p.prune.as_ref()) {
            Ok(()) => {
                self.step("prune", &mut || steps.prune(p));
            }
            Err(why) => self.skip("prune", why),
        }
        match self.due_step("check", p.check.as_ref()) {
            Ok(()) => {
                self.step("check", &mut || steps.check(p));
            }
            Err(why) => self.skip("check", why),
        }
    }

    /// Whether a step with its own schedule is due now; else why not.
    fn due_step(
        &mut self,
        step: &str,
        s: Option<&super::Schedule>,
    ) -> std::result::Result<(), String> {
        let s = s.ok_or_else(|| format!("no {step} schedule"))?;
        let now = self.ctx.clock.now();
        let last = match self.ctx.records.last_step_success(&self.profile.name, step) {
            Ok(l) => l,
            Err(e) => {
                self.warnings
                    .push(format!("cannot read when {step} last ran: {e}"));
                None
            }
        };
        match health::step_due(s, &self.ctx.tz, now, last) {
            Some(_) => Ok(()),
            None => Err(match s.next_after(now, &self.ctx.tz) {
                Ok(next) => format!("not due until {next}"),
                Err(_) => "not due".into(),
            }),
        }
    }

    /// The `after` hook, then `on-success` or `on-failure`; returns the
    /// run's result.
    fn finish_hooks(&mut self) -> RunResult {
        let hooks = self.profile.hooks.clone();
        let interrupted = self.interrupted || (self.failure.is_none() && self.ctx.stop.is_set());
        let word = |c: &Cycle| match (interrupted, c.failure.is_some()) {
            (true, _) => "interrupted",
            (false, true) => "failed",
            (false, false) => "ok",
        };
        let w = word(self);
        self.hook("after", hooks.after.as_ref(), w);
        if interrupted {
            return RunResult::Interrupted;
        }
        if self.failure.is_some() {
            self.hook("on-failure", hooks.on_failure.as_ref(), "failed");
            RunResult::Failed
        } else {
            self.hook("on-success", hooks.on_success.as_ref(), "ok");
            RunResult::Ok
        }
    }

    /// Records the end of the run, logs it, and rewrites the metrics file.
    fn close(mut self, started: Timestamp, result: RunResult) -> RunSummary {
        let ended = self.ctx.clock.now();
        let (error, exit_code) = match (result, &self.failure) {
            (RunResult::Interrupted, f) => (
                Some(
                    f.as_ref()
                        .map_or("stopped by request".to_string(), |f| f.0.clone()),
                ),
                EXIT_INTERRUPTED,
            ),
            (_, Some((m, code))) => (Some(m.clone()), *code),
            _ => (None, 0),
        };
        let end = RunEnd {
            result: Some(result),
            exit_code,
            error: error.clone(),
            snapshot_id: self.snapshot_id.clone(),
            files_added: self.files_added,
            bytes_added: self.bytes_added,
        };
        if let Err(e) = self.ctx.records.finish(self.run_id, ended, &end) {
            self.warnings
                .push(format!("cannot record the end of the run: {e}"));
        }
        self.ctx.events.emit(
            &Event::new(ended, "run-end", Some(&self.profile.name))
                .with("run_id", self.run_id)
                .with("result", result)
                .with("exit_code", exit_code)
                .with("error", &error)
                .with("snapshot_id", &self.snapshot_id)
                .with("files_added", self.files_added)
                .with("bytes_added", self.bytes_added)
                .with("duration_s", ended.duration_since(started).as_secs_f64()),
        );
        self.write_metrics();
        RunSummary {
            run_id: self.run_id,
            profile: self.profile.name.clone(),
            result,
            exit_code,
            error,
            snapshot_id: self.snapshot_id,
            files_added: self.files_added,
            bytes_added: self.bytes_added,
            started,
            ended,
            steps: self.done,
            warnings: self.warnings,
        }
    }

    fn write_metrics(&mut self) {
        let Some(path) = &self.profile.prometheus_textfile else {
            return;
        };
        let written = self
            .ctx
            .records
            .history(&self.profile.name)
            .and_then(|h| super::prometheus::write(path, &self.profile.name, &h));
        if let Err(e) = written {
            self.warnings
                .push(format!("cannot write the Prometheus textfile: {e}"));
        }
    }
}

/// An error that means "the profile's lock is held by another run".
pub fn is_busy(e: &Error) -> bool {
    matches!(e, Error::Locked(m) if m.contains("is already running"))
}

#[cfg(test)]
#[path = "cycle_tests.rs"]
mod tests;
