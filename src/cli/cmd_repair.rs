//! `larder repair index`: rebuild the index from the pack headers.

use super::Global;
use super::output::{print_json, safe};
use crate::error::Result;

/// Repair repository metadata.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    cmd: RepairCmd,
}

#[derive(clap::Subcommand, Debug)]
enum RepairCmd {
    /// Rebuild `index/` from the pack headers.
    #[command(after_help = "Example:\n  larder repair index")]
    Index,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    match a.cmd {
        RepairCmd::Index => {
            let repo = g.open()?;
            let rep = repo.repair_index()?;
            for p in &rep.problems {
                eprintln!("warning: {}", safe(p));
            }
            if g.json {
                print_json(&rep);
            } else if !g.quiet {
                println!(
                    "rebuilt index from {} packs ({} blobs)",
                    rep.packs, rep.blobs
                );
            }
            Ok(if rep.problems.is_empty() { 0 } else { 1 })
        }
    }
}
