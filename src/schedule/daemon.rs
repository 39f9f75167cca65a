//! The daemon loop (`larder daemon`): a foreground scheduler for machines
//! without systemd or cron. Every profile with a schedule is run when due
//! by the rule of [`super::health`] and the run records, so what was missed
//! while the daemon was down (or the machine asleep) is caught up once at
//! start. Runs happen one at a time, which keeps them one at a time per
//! repository too. Between runs the loop sleeps until the next due time in
//! slices of at most a minute (so a changed wall clock is noticed) and
//! returns promptly once the stop flag is set; a run in progress ends at
//! its next step boundary and is recorded as interrupted.

use super::cycle::{Context, RunOutcome, RunRequest, is_busy, run_profile};
use super::events::Event;
use super::health;
use super::profile::Profile;
use super::steps::{StepFailure, StepResult, Steps};
use crate::error::Result;
use jiff::Timestamp;
use std::collections::HashMap;
use std::time::Duration;

/// The longest the loop sleeps before looking at the clock again (and the
/// wait before retrying a profile another process is running).
pub const MAX_SLEEP: Duration = Duration::from_secs(60);

/// What the loop did before it stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DaemonReport {
    /// Runs started, by profile, in order.
    pub runs: Vec<String>,
}

/// Makes the steps for one run of a profile (opening the repository lazily
/// is best: an error there then becomes a recorded, failed backup step).
pub type StepsFactory<'s> = dyn FnMut(&Profile) -> Result<Box<dyn Steps + 's>> + 's;

/// Runs the loop until `ctx.stop` is set.
pub fn run(
    ctx: &Context,
    profiles: &[Profile],
    make_steps: &mut StepsFactory,
) -> Result<DaemonReport> {
    let mut report = DaemonReport::default();
    let scheduled: Vec<&Profile> = profiles.iter().filter(|p| p.schedule.is_some()).collect();
    let names: Vec<&str> = scheduled.iter().map(|p| p.name.as_str()).collect();
    ctx.events
        .emit(&Event::new(ctx.clock.now(), "daemon-start", None).with("profiles", &names));
    let mut announced: Option<Timestamp> = None;
    // Profiles whose run could not start (other than "busy"), held off
    // until their next due time instead of failing again every minute.
    let mut held: HashMap<String, Timestamp> = HashMap::new();
    while !ctx.stop.is_set() {
        for p in due_now(ctx, &scheduled)? {
            if ctx.stop.is_set() {
                break;
            }
            let now = ctx.clock.now();
            if held.get(&p.name).is_some_and(|until| now < *until) {
                continue;
            }
            held.remove(&p.name);
            if !run_one(ctx, p, make_steps, &mut report)
                && let Some(next) = p
                    .schedule
                    .as_ref()
                    .and_then(|s| s.next_after(now, &ctx.tz).ok())
            {
                held.insert(p.name.clone(), next);
            }
        }
        if ctx.stop.is_set() {
            break;
        }
        let now = ctx.clock.now();
        let next = scheduled
            .iter()
            .filter_map(|p| p.schedule.as_ref()?.next_after(now, &ctx.tz).ok())
            .min();
        if next != announced {
            ctx.events
                .emit(&Event::new(now, "idle", None).with("next_due", next.map(|t| t.to_string())));
            announced = next;
        }
        let wait = next
            .and_then(|n| Duration::try_from(n.duration_since(now)).ok())
            .unwrap_or(MAX_SLEEP)
            .clamp(Duration::from_millis(100), MAX_SLEEP);
        ctx.sleeper.sleep(wait, &ctx.stop);
    }
    ctx.events
        .emit(&Event::new(ctx.clock.now(), "daemon-stop", None).with("runs", report.runs.len()));
    Ok(report)
}

/// The profiles due now, earliest due time first.
fn due_now<'p>(ctx: &Context, profiles: &[&'p Profile]) -> Result<Vec<&'p Profile>> {
    let now = ctx.clock.now();
    let mut due = Vec::new();
    for p in profiles {
        let Some(s) = &p.schedule else { continue };
        let h = ctx.records.history(&p.name)?;
        if let Some(d) = health::due_time(s, &ctx.tz, now, &h) {
            due.push((d, *p));
        }
    }
    due.sort_by(|a, b| (a.0, &a.1.name).cmp(&(b.0, &b.1.name)));
    Ok(due.into_iter().map(|(_, p)| p).collect())
}

/// Runs one due profile; returns `false` when the run could not start for
/// a reason other than another process running it.
fn run_one(
    ctx: &Context,
    p: &Profile,
    make_steps: &mut StepsFactory,
    report: &mut DaemonReport,
) -> bool {
    let mut steps = match make_steps(p) {
        Ok(s) => s,
        Err(e) => Box::new(Refused(StepFailure::from(&e))),
    };
    match run_profile(
        ctx,
        p,
        RunRequest {
            if_due: true,
            wait: false,
        },
        steps.as_mut(),
    ) {
        Ok(RunOutcome::Ran(_)) => {
            report.runs.push(p.name.clone());
            true
        }
        Ok(RunOutcome::NotDue { .. }) => true,
        Err(e) if is_busy(&e) => {
            ctx.events.emit(
                &Event::new(ctx.clock.now(), "busy", Some(&p.name)).with("message", e.to_string()),
            );
            true
        }
        Err(e) => {
            ctx.events.emit(
                &Event::new(ctx.clock.now(), "error", Some(&p.name)).with("message", e.to_string()),
            );
            false
        }
    }
}

/// Steps for a profile whose steps could not be made: the backup fails
/// with that error (recorded like any failure), the rest never run.
struct Refused(StepFailure);

impl Steps for Refused {
    fn backup(&mut self, _: &Profile) -> StepResult {
        Err(StepFailure {
            transient: false,
            ..self.0.clone()
        })
    }
    fn forget(&mut self, _: &Profile) -> StepResult {
        Err(self.0.clone())
    }
    fn prune(&mut self, _: &Profile) -> StepResult {
        Err(self.0.clone())
    }
    fn check(&mut self, _: &Profile) -> StepResult {
        Err(self.0.clone())
    }
}

#[cfg(test)]
#[path = "daemon_tests.rs"]
mod tests;
