//! `larder check`: verify the repository's structure, and its data with
//! `--read-data` or `--read-data-subset` (a share of the packs in rotation,
//! or restic's fixed slice `n/t`).

use super::Global;
use super::cmd_stats::age_text;
use super::output::human_bytes;
use super::output::{print_json, safe};
use super::progress::{Mode, TermProgress};
use crate::check::rotation::{Coverage, DataSubset};
use crate::check::{self, CheckOptions};
use crate::error::{Error, Result};

/// Verify the repository's structure (and with --read-data, its data).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  larder check
  larder check --read-data
  larder check --read-data-subset 5%     # nightly: every pack is read within 20 runs
  larder check --read-data-subset 2G     # the 2 GiB of packs verified longest ago
  larder check --read-data-subset 1/7    # restic's fixed slice 1 of 7, by pack id")]
pub struct Args {
    /// Decrypt and re-hash every blob.
    #[arg(long)]
    read_data: bool,
    /// Read only part of the packs: `N%` or a size (`500M`) takes the packs
    /// verified longest ago (never verified first) and remembers what it
    /// read; `n/t` reads restic's fixed slice n of t.
    #[arg(long, value_name = "N%|SIZE|n/t")]
    read_data_subset: Option<String>,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    crate::interrupt::install_handlers()?;
    if a.read_data && a.read_data_subset.is_some() {
        return Err(Error::Usage(
            "--read-data and --read-data-subset cannot be used together".into(),
        ));
    }
    let subset = a
        .read_data_subset
        .as_deref()
        .map(DataSubset::parse)
        .transpose()?;
    let (repo, _lock) = g.open_for_reading()?;
    // A terminal line while pack data is read (never with --json: check
    // prints one report).
    let mode = match Mode::pick(false, g.quiet || g.json) {
        Mode::Json => Mode::Off,
        m => m,
    };
    let progress = TermProgress::counting(mode, false, "packs");
    let opts = CheckOptions {
        read_data: a.read_data,
        subset,
    };
    let rep = check::check_with_progress(&repo, &opts, &progress);
    progress.finish();
    let rep = rep?;
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
                format!(
                    "; read {} packs, {} blobs ({})",
                    rep.packs_read,
                    rep.blobs_read,
                    human_bytes(rep.bytes_read)
                )
            } else {
                String::new()
            };
            println!(
                "checked {} keys, {} index segments, {} packs, {} snapshots, {} trees{read}",
                rep.keys, rep.index_segments, rep.packs, rep.snapshots, rep.trees,
            );
            if let Some(c) = &rep.verified {
                println!("{}", coverage_line(c));
            }
            if rep.ok() {
                println!("no errors were found");
            }
        }
    }
    if rep.ok() {
        Ok(0)
    } else {
        if !rep.damaged_packs.is_empty() && !g.json {
            eprintln!(
                "larder: to salvage what the damaged packs still hold: larder repair packs {}",
                rep.damaged_packs.join(" ")
            );
        }
        eprintln!("larder: check found {} problem(s)", rep.problems.len());
        Ok(1)
    }
}

/// `data verified so far: 12 of 40 packs, 11.9 MiB of 40.1 MiB (30%); …`
fn coverage_line(c: &Coverage) -> String {
    let pct = if c.bytes_total > 0 {
        c.bytes_verified as f64 * 100.0 / c.bytes_total as f64
    } else {
        100.0
    };
    let mut s = format!(
        "data verified so far: {} of {} packs, {} of {} ({pct:.0}%)",
        c.packs_verified,
        c.packs_total,
        human_bytes(c.bytes_verified),
        human_bytes(c.bytes_total)
    );
    if let Some(age) = c.oldest_verification_age_secs {
        s.push_str(&format!("; the oldest verification is {}", age_text(age)));
    }
    if c.packs_never_verified > 0 {
        s.push_str(&format!(
            "; {} packs never verified",
            c.packs_never_verified
        ));
    }
    s
}
