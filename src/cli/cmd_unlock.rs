//! `larder unlock`: remove stale locks (`--remove-all`: every lock).

use super::Global;
use super::output::print_json;
use crate::error::Result;
use crate::lock::UnlockedLock;

/// Remove stale locks: those whose holder has exited or that were not
/// refreshed within their lifetime. Live locks are kept, each with the
/// reason it is live.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  larder unlock\n  larder unlock --remove-all --json")]
pub struct Args {
    /// Remove every lock, live ones too. Only for someone who knows that no
    /// larder process is using the repository anywhere: a running backup
    /// whose lock is removed stops at its next refresh, and a prune that
    /// starts meanwhile could delete data that backup still needs.
    #[arg(long)]
    remove_all: bool,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let repo = g.open()?;
    let report = repo.unlock(a.remove_all)?;
    if g.json {
        print_json(&report);
        return Ok(0);
    }
    if !g.quiet {
        for l in &report.removed {
            println!("removed {}", line(l));
        }
        for l in &report.kept {
            println!("kept {}", line(l));
        }
        println!(
            "removed {} lock(s), kept {} live lock(s)",
            report.removed.len(),
            report.kept.len()
        );
    }
    Ok(0)
}

fn line(l: &UnlockedLock) -> String {
    let short = l.id.get(..8).unwrap_or(&l.id);
    match &l.holder {
        Some(h) => format!("locks/{short} ({h}): {}", l.reason),
        None => format!("locks/{short}: {}", l.reason),
    }
}
