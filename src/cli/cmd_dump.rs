//! `larder dump`: one file's bytes, or a directory as a tar or zip stream,
//! from a snapshot, to stdout or a file.

use super::Global;
use super::filter::FilterArgs;
use super::output::safe;
use crate::dump::{self, ArchiveFormat, DumpReport};
use crate::error::Result;
use crate::snapshot;
use serde::Serialize;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Write a file, or a directory as a tar or zip archive, from a snapshot.
///
/// Every chunk is verified (decrypted and re-hashed against its ID) before
/// it is written, as restore does: a damaged blob stops the dump with an
/// error naming it.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  larder dump latest /home/me/notes.txt > notes.txt\n  \
    larder dump latest /home/me/Documents | tar -xf - -C /tmp\n  \
    larder dump --archive zip --target docs.zip 1a2b3c4d /home/me/Documents"
)]
pub struct Args {
    /// Snapshot id, prefix or `latest`.
    snapshot: String,
    /// The path in the snapshot (`/` for all of it).
    path: OsString,
    /// The archive a directory is written as.
    #[arg(long, value_enum, default_value_t = ArchiveArg::Tar)]
    archive: ArchiveArg,
    /// Write to this file (complete or not at all) instead of stdout.
    #[arg(long)]
    target: Option<PathBuf>,
    #[command(flatten)]
    filter: FilterArgs,
}

/// `--archive` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ArchiveArg {
    /// POSIX pax tar: names, modes, owners, times, links, xattrs.
    Tar,
    /// Zip (deflate): names, permission bits, times, symlinks.
    Zip,
}

/// The `--json` summary (on stdout with `--target`, else on stderr).
#[derive(Serialize)]
struct DumpSummary<'a> {
    message_type: &'static str,
    snapshot_id: String,
    #[serde(flatten)]
    report: &'a DumpReport,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    crate::interrupt::install_handlers()?;
    // The lock comes before the snapshot is picked (see `lock_for_reading`).
    let (repo, _lock) = g.open_for_reading()?;
    let (sid, snap) = snapshot::resolve(&repo, &a.snapshot, &a.filter.filter())?;
    let format = match a.archive {
        ArchiveArg::Tar => ArchiveFormat::Tar,
        ArchiveArg::Zip => ArchiveFormat::Zip,
    };
    let path = a.path.as_bytes();
    let report = match &a.target {
        Some(t) => dump::dump_to_file(&repo, &snap, path, format, t)?,
        None => dump::dump(&repo, &snap, path, format, &mut std::io::stdout().lock())?,
    };
    for s in &report.skipped {
        eprintln!("skipped: {}", safe(s));
    }
    if g.json {
        let line = serde_json::to_string(&DumpSummary {
            message_type: "summary",
            snapshot_id: sid.to_hex(),
            report: &report,
        })
        .unwrap_or_default();
        if a.target.is_some() {
            println!("{line}");
        } else {
            eprintln!("{line}");
        }
    } else if let (Some(t), false) = (&a.target, g.quiet) {
        println!(
            "dumped {} of snapshot {} to {}: {} files, {} bytes",
            safe(&String::from_utf8_lossy(path)),
            sid.short(),
            t.display(),
            report.files,
            report.bytes
        );
    }
    Ok(0)
}
