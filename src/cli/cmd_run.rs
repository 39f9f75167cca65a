//! `larder run PROFILE`: one run cycle of a profile (hooks, backup, forget,
//! prune and check when due), recorded in the state directory. A second
//! run of the same profile exits at once with code 11 naming the process
//! that holds it (or waits, with `--wait`).

use super::Global;
use super::output::{print_json, safe};
use super::profiles::Setup;
use crate::error::{Error, Result};
use crate::repo_steps::RepoSteps;
use crate::schedule::cycle::is_busy;
use crate::schedule::{RunOutcome, RunRequest, RunSummary, run_profile};

/// The exit code of a run refused because another run holds the profile
/// (the code of a lock held by another process).
const BUSY: i32 = 11;

/// Run a profile's backup cycle now.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  larder run home\n  \
    larder run --if-due home     # what a timer or crontab line runs\n\n\
    Exit codes: 0 ok, 1 failed, 3 partial backup, 10 no repository, \
    11 the profile (or its repository) is busy, 12 wrong password, 130 stopped")]
pub struct Args {
    /// The profile to run.
    profile: String,
    /// Run only if the schedule has a due time since the last finished run
    /// (catches up a run missed while the machine was off).
    #[arg(long)]
    if_due: bool,
    /// Wait for a run of the same profile in progress instead of exiting.
    #[arg(long)]
    wait: bool,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let setup = Setup::new(g)?;
    let cfg = setup.load()?;
    let profile = cfg.profile(&a.profile)?;
    let records = setup.records()?;
    let log = setup.log();
    let ctx = setup.context(&records, &log)?;
    let mut steps = RepoSteps::new(setup.dirs(g))
        .with_lock_retry(g.retry_lock.unwrap_or_default())
        .with_storage(g.storage());
    let req = RunRequest {
        if_due: a.if_due,
        wait: a.wait,
    };
    let outcome = match run_profile(&ctx, profile, req, &mut steps) {
        Err(Error::Locked(why)) if is_busy(&Error::Locked(why.clone())) => {
            eprintln!("larder: {} (--wait waits for it)", safe(&why));
            return Ok(BUSY);
        }
        other => other?,
    };
    match outcome {
        RunOutcome::NotDue { next_due } => {
            if g.json {
                print_json(&RunOutcome::NotDue { next_due });
            } else if !g.quiet {
                let next = next_due.map_or("never".to_string(), |t| t.to_string());
                println!("profile {} is not due (next due {next})", safe(&a.profile));
            }
            Ok(0)
        }
        RunOutcome::Ran(s) => {
            for w in &s.warnings {
                eprintln!("warning: {}", safe(w));
            }
            if g.json {
                print_json(&s);
            } else if !g.quiet {
                print_summary(&s);
            }
            if let Some(e) = &s.error {
                eprintln!("larder: {}", safe(e));
            }
            Ok(s.exit_code)
        }
    }
}

fn print_summary(s: &RunSummary) {
    for step in &s.steps {
        println!(
            "{:<16} {:<8} {}",
            step.step,
            step.status.as_str(),
            safe(&step.message)
        );
    }
    println!(
        "run {} of profile {}: {}{}",
        s.run_id,
        safe(&s.profile),
        s.result.as_str(),
        s.snapshot_id
            .as_deref()
            .map(|id| format!(
                " (snapshot {}, {} bytes added)",
                &id[..8.min(id.len())],
                s.bytes_added
            ))
            .unwrap_or_default()
    );
}
