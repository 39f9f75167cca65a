//! `larder daemon`: the foreground scheduler. Runs every scheduled profile
//! when due (catching up what was missed), logs JSON lines on stdout and in
//! the state directory, and stops cleanly on SIGTERM or SIGINT.

use super::Global;
use super::profiles::Setup;
use crate::error::Result;
use crate::repo_steps::RepoSteps;
use crate::schedule::daemon;
use crate::schedule::events::{Stdout, Tee};
use crate::schedule::steps::Steps;

/// Run scheduled profiles when due, in the foreground (for containers and
/// machines without systemd or cron).
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  larder --config /etc/larder/larder.toml daemon")]
pub struct Args {}

pub fn run(g: &Global, _a: Args) -> Result<i32> {
    let setup = Setup::new(g)?;
    let cfg = setup.load()?;
    let records = setup.records()?;
    let log = setup.log();
    let events = Tee(vec![&log, &Stdout]);
    let ctx = setup.context(&records, &events)?;
    let profiles: Vec<_> = cfg.profiles.values().cloned().collect();
    let dirs = setup.dirs(g);
    let wait = g.retry_lock.unwrap_or_default();
    let storage = g.storage();
    let mut make = move |_: &crate::schedule::Profile| -> Result<Box<dyn Steps>> {
        Ok(Box::new(
            RepoSteps::new(dirs.clone())
                .with_lock_retry(wait)
                .with_storage(storage.clone()),
        ))
    };
    daemon::run(&ctx, &profiles, &mut make)?;
    Ok(0)
}
