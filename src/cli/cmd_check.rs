//! `larder check`: verify the repository's structure, and its data with
//! `--read-data` or `--read-data-subset`.

use super::Global;
use super::output::{print_json, safe};
use crate::check::{self, CheckOptions};
use crate::error::{Error, Result};

/// Verify the repository's structure (and with --read-data, its data).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  larder check\n  larder check --read-data-subset 10%")]
pub struct Args {
    /// Decrypt and re-hash every blob.
    #[arg(long)]
    read_data: bool,
    /// Read only this share of the packs, e.g. `10%`.
    #[arg(long, value_name = "N%")]
    read_data_subset: Option<String>,
}

/// Parses `10%` (or `10`) into a percentage in (0, 100].
fn parse_subset(s: &str) -> Result<f64> {
    s.trim_end_matches('%')
        .parse::<f64>()
        .ok()
        .filter(|p| *p > 0.0 && *p <= 100.0)
        .ok_or_else(|| Error::Usage(format!("invalid --read-data-subset {s:?}; use e.g. 10%")))
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    crate::interrupt::install_handlers()?;
    let repo = g.open()?;
    let subset = a
        .read_data_subset
        .as_deref()
        .map(parse_subset)
        .transpose()?;
    let rep = check::check(
        &repo,
        &CheckOptions {
            read_data: a.read_data || subset.is_some(),
            subset_percent: subset,
        },
    )?;
    if g.json {
        print_json(&rep);
    } else {
        for p in &rep.problems {
            eprintln!("error: {}", safe(p));
        }
        for n in &rep.notices {
            eprintln!("notice: {}", safe(n));
        }
        if !g.quiet {
            let read = if rep.packs_read > 0 {
                format!("; read {} packs, {} blobs", rep.packs_read, rep.blobs_read)
            } else {
                String::new()
            };
            println!(
                "checked {} keys, {} index segments, {} packs, {} snapshots, {} trees{read}",
                rep.keys, rep.index_segments, rep.packs, rep.snapshots, rep.trees,
            );
            if rep.ok() {
                println!("no errors were found");
            }
        }
    }
    if rep.ok() {
        Ok(0)
    } else {
        eprintln!("larder: check found {} problem(s)", rep.problems.len());
        Ok(1)
    }
}
