//! `larder restore`: recreate a snapshot (or a path in it) in a directory.

use super::Global;
use super::filter::FilterArgs;
use super::output::{print_json, safe};
use super::progress::{Mode, TermProgress};
use crate::archiver::with_exclude_files as with_pattern_files;
use crate::error::Result;
use crate::restorer::{self, Overwrite, RestoreOptions};
use crate::snapshot;
use serde::Serialize;
use std::path::PathBuf;

/// Restore a snapshot (or `SNAPSHOT:SUBPATH`) into a directory.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  larder restore latest --target /tmp/restore\n  \
    larder restore latest:/home/me/Documents --target /tmp/docs --include '*.odt'\n  \
    larder restore latest --target /tmp/restore --include-xattr 'user.*'"
)]
pub struct Args {
    /// Snapshot id, prefix or `latest`, optionally followed by `:SUBPATH`.
    snapshot: String,
    /// Directory to restore into.
    #[arg(short, long)]
    target: PathBuf,
    /// Restore only paths matching this pattern (repeatable; as backup's
    /// --exclude patterns: `/x` from the root, `x` at any depth, `!x`
    /// takes back).
    #[arg(long, value_name = "PATTERN")]
    include: Vec<String>,
    /// Skip paths matching this pattern (repeatable).
    #[arg(long, value_name = "PATTERN")]
    exclude: Vec<String>,
    /// As --include, without regard to case (repeatable).
    #[arg(long, value_name = "PATTERN")]
    iinclude: Vec<String>,
    /// As --exclude, without regard to case (repeatable).
    #[arg(long, value_name = "PATTERN")]
    iexclude: Vec<String>,
    /// Read --include patterns from this file, one a line (`#` comments
    /// and blank lines skipped; repeatable).
    #[arg(long, value_name = "FILE")]
    include_file: Vec<PathBuf>,
    /// Read --exclude patterns from this file (repeatable).
    #[arg(long, value_name = "FILE")]
    exclude_file: Vec<PathBuf>,
    /// Read --iinclude patterns from this file (repeatable).
    #[arg(long, value_name = "FILE")]
    iinclude_file: Vec<PathBuf>,
    /// Read --iexclude patterns from this file (repeatable).
    #[arg(long, value_name = "FILE")]
    iexclude_file: Vec<PathBuf>,
    /// Show what would be restored without writing.
    #[arg(long)]
    dry_run: bool,
    /// What to do with files that already exist in the target.
    #[arg(long, value_enum, default_value_t = OverwriteArg::Never)]
    overwrite: OverwriteArg,
    /// Restore owners by numeric uid/gid, ignoring recorded names.
    #[arg(long)]
    numeric_owner: bool,
    /// Delete what the target holds that the snapshot does not, within
    /// what --include/--exclude select (with --dry-run: list it).
    #[arg(long)]
    delete: bool,
    /// Read each file back before it gets its name and check every
    /// chunk's bytes against its ID.
    #[arg(long)]
    verify: bool,
    /// Restore only the extended attributes whose name matches this glob
    /// (e.g. `user.*`; repeatable; default: all).
    #[arg(long, value_name = "PATTERN", conflicts_with = "exclude_xattr")]
    include_xattr: Vec<String>,
    /// Restore all extended attributes but those whose name matches this
    /// glob (e.g. `security.capability`; repeatable).
    #[arg(long, value_name = "PATTERN")]
    exclude_xattr: Vec<String>,
    #[command(flatten)]
    filter: FilterArgs,
}

/// `--overwrite` values (see [`Overwrite`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum OverwriteArg {
    /// Replace it.
    Always,
    /// Replace it unless its size and mtime already match the snapshot.
    IfChanged,
    /// Replace it only if the snapshot's file is newer (a later mtime).
    IfNewer,
    /// Leave it and report it as skipped (the default: a restore never
    /// destroys data that is not in the snapshot unless asked to).
    Never,
}

impl From<OverwriteArg> for Overwrite {
    fn from(o: OverwriteArg) -> Self {
        match o {
            OverwriteArg::Always => Overwrite::Always,
            OverwriteArg::IfChanged => Overwrite::IfChanged,
            OverwriteArg::IfNewer => Overwrite::IfNewer,
            OverwriteArg::Never => Overwrite::Never,
        }
    }
}

/// The `--json` summary.
#[derive(Serialize)]
struct RestoreSummary<'a> {
    message_type: &'static str,
    snapshot_id: String,
    files_restored: u64,
    dirs_restored: u64,
    bytes_restored: u64,
    skipped: usize,
    errors: &'a [String],
    dry_run: bool,
    /// Paths removed because the snapshot lacks them (`--delete`).
    deleted: usize,
    /// Files read back and found whole (`--verify`).
    files_verified: u64,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    crate::interrupt::install_handlers()?;
    // While this is the only thread: see `prepare_descriptors`.
    if !a.dry_run {
        restorer::prepare_descriptors();
    }
    // The lock comes before the snapshot is picked (see `lock_for_reading`).
    let (repo, _lock) = g.open_for_reading()?;
    let (reference, sub) = match a.snapshot.split_once(':') {
        Some((r, s)) => (r, Some(s)),
        None => (a.snapshot.as_str(), None),
    };
    let (sid, snap) = snapshot::resolve(&repo, reference, &a.filter.filter())?;
    let opts = RestoreOptions {
        target: a.target.clone(),
        include: with_pattern_files(&a.include, &a.include_file)?,
        exclude: with_pattern_files(&a.exclude, &a.exclude_file)?,
        iinclude: with_pattern_files(&a.iinclude, &a.iinclude_file)?,
        iexclude: with_pattern_files(&a.iexclude, &a.iexclude_file)?,
        dry_run: a.dry_run,
        overwrite: a.overwrite.into(),
        numeric_owner: a.numeric_owner,
        delete: a.delete,
        verify: a.verify,
        include_xattr: a.include_xattr,
        exclude_xattr: a.exclude_xattr,
    };
    let progress =
        TermProgress::start(Mode::pick(g.json, g.quiet), true).with_entries(g.verbose >= 2);
    let rep = restorer::restore_with_progress(&repo, &snap, sub, &opts, &progress);
    progress.finish();
    let rep = rep?;
    for s in &rep.skipped {
        eprintln!("skipped: {}", safe(s));
    }
    if a.dry_run {
        for d in &rep.deleted {
            eprintln!("would delete: {}", safe(d));
        }
    }
    for e in &rep.errors {
        eprintln!("error: {}", safe(e));
    }
    if g.json {
        print_json(&RestoreSummary {
            message_type: "summary",
            snapshot_id: sid.to_hex(),
            files_restored: rep.files,
            dirs_restored: rep.dirs,
            bytes_restored: rep.bytes,
            skipped: rep.skipped.len(),
            errors: &rep.errors,
            dry_run: a.dry_run,
            deleted: rep.deleted.len(),
            files_verified: rep.verified,
        });
    } else if !g.quiet {
        let skipped = if rep.skipped.is_empty() {
            String::new()
        } else {
            format!(", {} skipped", rep.skipped.len())
        };
        let verified = if a.verify && !a.dry_run {
            format!(", {} verified", rep.verified)
        } else {
            String::new()
        };
        let deleted = match (rep.deleted.len(), a.dry_run) {
            (0, _) => String::new(),
            (n, false) => format!(", {n} deleted"),
            (n, true) => format!(", {n} to delete"),
        };
        println!(
            "{} snapshot {} to {}: {} files, {} dirs, {} bytes{skipped}{deleted}{verified}",
            if a.dry_run {
                "would restore"
            } else {
                "restored"
            },
            sid.short(),
            a.target.display(),
            rep.files,
            rep.dirs,
            rep.bytes,
        );
    }
    Ok(if rep.errors.is_empty() { 0 } else { 1 })
}
