//! `larder backup`: back up files and directories into a new snapshot.

use super::Global;
use super::output::{print_json, safe};
use super::progress::TermProgress;
use crate::archiver::{self, BackupOptions, BackupResult};
use crate::error::{Error, Result};
use serde::Serialize;
use std::path::PathBuf;

/// Back up files and directories.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  larder backup ~/Documents ~/Pictures --exclude '*.tmp' --exclude-caches\n  \
    larder backup / -x --exclude-file ~/.config/larder/excludes --tag nightly"
)]
pub struct Args {
    /// Files and directories to back up.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Exclude paths matching this glob (repeatable).
    #[arg(short, long)]
    pub exclude: Vec<String>,
    /// Read exclude globs from this file, one per line (repeatable).
    #[arg(long)]
    pub exclude_file: Vec<PathBuf>,
    /// Exclude directories containing a file with this name (repeatable).
    #[arg(long)]
    pub exclude_if_present: Vec<String>,
    /// Exclude directories holding a valid CACHEDIR.TAG.
    #[arg(long)]
    pub exclude_caches: bool,
    /// Do not cross filesystem boundaries.
    #[arg(short = 'x', long)]
    pub one_file_system: bool,
    /// Tag the snapshot (repeatable).
    #[arg(long)]
    pub tag: Vec<String>,
    /// Record this host name instead of the machine's.
    #[arg(long)]
    pub host: Option<String>,
    /// Read and chunk everything but write nothing.
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// Re-read every file, ignoring the parent snapshot's metadata.
    #[arg(short, long)]
    pub force: bool,
    /// Compare against this snapshot instead of the latest matching one.
    #[arg(long)]
    pub parent: Option<String>,
    /// Record access times too (off by default: they churn trees).
    #[arg(long)]
    pub with_atime: bool,
}

/// The `--json` summary (restic's field names).
#[derive(Serialize)]
struct BackupSummary {
    message_type: &'static str,
    snapshot_id: Option<String>,
    parent: Option<String>,
    files_new: u64,
    files_changed: u64,
    files_unmodified: u64,
    dirs_new: u64,
    dirs_changed: u64,
    dirs_unmodified: u64,
    data_added: u64,
    data_added_plain: u64,
    total_files_processed: u64,
    total_bytes_processed: u64,
    bytes_read: u64,
    total_duration: f64,
    errors: usize,
    dry_run: bool,
}

impl BackupSummary {
    fn new(res: &BackupResult, dry_run: bool) -> Self {
        let s = &res.summary;
        BackupSummary {
            message_type: "summary",
            snapshot_id: res.snapshot_id.map(|i| i.to_hex()),
            parent: res.parent.map(|i| i.to_hex()),
            files_new: s.files_new,
            files_changed: s.files_changed,
            files_unmodified: s.files_unmodified,
            dirs_new: s.dirs_new,
            dirs_changed: s.dirs_changed,
            dirs_unmodified: s.dirs_unmodified,
            data_added: s.data_added,
            data_added_plain: s.data_added_plain,
            total_files_processed: s.total_files,
            total_bytes_processed: s.total_bytes,
            bytes_read: s.bytes_read,
            total_duration: s.duration_ms as f64 / 1000.0,
            errors: res.warnings.len(),
            dry_run,
        }
    }
}

/// The exclude globs of `--exclude` and of every `--exclude-file`.
fn excludes(a: &Args) -> Result<Vec<String>> {
    let mut excludes = a.exclude.clone();
    for f in &a.exclude_file {
        let text = std::fs::read_to_string(f).map_err(|e| Error::io(f, e))?;
        excludes.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from),
        );
    }
    Ok(excludes)
}

fn print_summary(res: &BackupResult) {
    let s = &res.summary;
    println!(
        "Files:       {:>6} new, {:>6} changed, {:>6} unmodified",
        s.files_new, s.files_changed, s.files_unmodified
    );
    println!(
        "Dirs:        {:>6} new, {:>6} changed, {:>6} unmodified",
        s.dirs_new, s.dirs_changed, s.dirs_unmodified
    );
    println!(
        "Added to the repository: {} bytes ({} bytes before compression)",
        s.data_added, s.data_added_plain
    );
    println!(
        "processed {} files, {} bytes in {:.3}s",
        s.total_files,
        s.total_bytes,
        s.duration_ms as f64 / 1000.0
    );
    match res.snapshot_id {
        Some(id) => println!("snapshot {} saved", id.short()),
        None => println!("dry run: no snapshot saved"),
    }
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    crate::interrupt::install_handlers()?;
    let repo = g.open()?;
    let opts = BackupOptions {
        paths: a.paths.clone(),
        excludes: excludes(&a)?,
        exclude_if_present: a.exclude_if_present.clone(),
        exclude_caches: a.exclude_caches,
        one_file_system: a.one_file_system,
        tags: a.tag.clone(),
        host: a.host.clone(),
        dry_run: a.dry_run,
        force: a.force,
        parent: a.parent.clone(),
        with_atime: a.with_atime,
    };
    let show_progress = !g.quiet && !g.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let progress = TermProgress::new(show_progress);
    let res = archiver::backup(&repo, &opts, &progress);
    progress.finish();
    let res = res?;
    for w in res.warnings.iter().chain(&res.notices) {
        eprintln!("warning: {}", safe(w));
    }
    if g.json {
        print_json(&BackupSummary::new(&res, a.dry_run));
    } else if !g.quiet {
        print_summary(&res);
    }
    if res.warnings.is_empty() {
        Ok(0)
    } else {
        eprintln!(
            "larder: {} file(s) could not be read completely; the snapshot is partial",
            res.warnings.len()
        );
        Ok(3)
    }
}
