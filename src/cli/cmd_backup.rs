//! `larder backup`: back up files and directories into a new snapshot.

use super::Global;
use super::output::{print_json, safe};
use super::progress::{Mode, TermProgress};
use crate::archiver::{self, BackupOptions, BackupResult, ListForm, Stream};
use crate::error::{Error, Result};
use serde::Serialize;
use std::path::PathBuf;

/// Back up files and directories.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  larder backup ~/Documents ~/Pictures --exclude '*.tmp' --exclude-caches\n  \
    larder backup / -x --exclude-file ~/.config/larder/excludes --tag nightly\n  \
    pg_dump mydb | larder backup --stdin --stdin-filename mydb.sql\n  \
    larder backup --stdin-from-command --stdin-filename mydb.sql -- pg_dump mydb\n  \
    larder backup ~/Documents ~/Music --group-by host   # parent: the latest of this host, any paths"
)]
pub struct Args {
    /// Files and directories to back up (with --stdin-from-command: the
    /// command and its arguments).
    #[arg(required_unless_present_any = ["files_from", "files_from_verbatim", "files_from_raw", "stdin"])]
    pub paths: Vec<PathBuf>,
    /// Back up what standard input gives, to its end, as one file (a
    /// database dump piped in), instead of paths.
    #[arg(long, conflicts_with_all = ["paths", "files_from", "files_from_verbatim", "files_from_raw"])]
    pub stdin: bool,
    /// Back up the standard output of the command given (after `--`) in
    /// place of paths, as one file; a command that fails saves no snapshot.
    #[arg(long, conflicts_with_all = ["stdin", "files_from", "files_from_verbatim", "files_from_raw"])]
    pub stdin_from_command: bool,
    /// The name of the file --stdin or --stdin-from-command stores
    /// (default: `stdin`).
    #[arg(long, value_name = "NAME")]
    pub stdin_filename: Option<String>,
    /// Back up the paths listed in this file too, one a line; blank lines
    /// and `#` comments are skipped, and a line with `*`, `?` or `[` is a
    /// glob pattern (one that matches nothing is skipped with a warning);
    /// `-` reads standard input (repeatable).
    #[arg(long, value_name = "FILE")]
    pub files_from: Vec<PathBuf>,
    /// As --files-from, every non-empty line taken as written (repeatable).
    #[arg(long, value_name = "FILE")]
    pub files_from_verbatim: Vec<PathBuf>,
    /// As --files-from, the paths separated by NUL bytes, as `find
    /// -print0` writes them (repeatable).
    #[arg(long, value_name = "FILE")]
    pub files_from_raw: Vec<PathBuf>,
    /// Exclude paths matching this pattern (repeatable; `/x` from the
    /// root, `x` or `x/y` at any depth, `!x` takes back, as restic).
    #[arg(short, long, value_name = "PATTERN")]
    pub exclude: Vec<String>,
    /// Read exclude globs from this file, one per line (repeatable).
    #[arg(long)]
    pub exclude_file: Vec<PathBuf>,
    /// As --exclude, matching without regard to case (repeatable).
    #[arg(long, value_name = "PATTERN")]
    pub iexclude: Vec<String>,
    /// As --exclude-file, matching without regard to case (repeatable).
    #[arg(long, value_name = "FILE")]
    pub iexclude_file: Vec<PathBuf>,
    /// Exclude files larger than this size (`1024`, `500k`, `100M`, `2G`,
    /// `1T`: binary multiples).
    #[arg(long, value_name = "SIZE", value_parser = crate::maintenance::prune::parse_size)]
    pub exclude_larger_than: Option<u64>,
    /// Exclude directories containing a file with this name (repeatable);
    /// `NAME:HEADER`, as restic's, only if the file begins with HEADER.
    #[arg(long, value_name = "NAME[:HEADER]")]
    pub exclude_if_present: Vec<String>,
    /// Exclude directories holding a valid CACHEDIR.TAG.
    #[arg(long)]
    pub exclude_caches: bool,
    /// Do not cross filesystem boundaries.
    #[arg(short = 'x', long)]
    pub one_file_system: bool,
    /// Tag the snapshot (repeatable; `a,b` gives two tags, as restic).
    #[arg(long, value_delimiter = ',')]
    pub tag: Vec<String>,
    /// Record this host name instead of the machine's (and find the
    /// parent among its snapshots).
    #[arg(long, env = "LARDER_HOST")]
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
    /// Which earlier snapshots the parent is picked from, as restic's flag:
    /// the latest of the same host, holding this backup's paths and/or the
    /// tags given (maybe among more); '' for the latest of all.
    #[arg(short = 'g', long, value_name = "GROUP", default_value = "host,paths", value_parser = super::filter::group_by)]
    pub group_by: crate::retention::GroupBy,
    /// Record access times too (off by default: they churn trees).
    #[arg(long)]
    pub with_atime: bool,
    /// Save no snapshot when nothing changed since the parent snapshot
    /// (its tree would be the parent's).
    #[arg(long)]
    pub skip_if_unchanged: bool,
    /// Take a file whose inode and ctime changed, but not its size and
    /// mtime, as unchanged (FUSE and network filesystems that number
    /// inodes anew at each mount).
    #[arg(long)]
    pub ignore_inode: bool,
    /// Take a file whose ctime alone changed as unchanged.
    #[arg(long)]
    pub ignore_ctime: bool,
    /// Do not count the files first: progress shows no total, percentage
    /// or time left, and the tree's metadata is read once less.
    #[arg(long)]
    pub no_scan: bool,
    /// Read this many files at once (1 to 64; one per core unless given),
    /// as restic's flag: more can help on network filesystems and disks
    /// that serve many requests at once. Not for --stdin (one stream).
    #[arg(long, value_name = "N", env = "LARDER_READ_CONCURRENCY", value_parser = read_concurrency)]
    pub read_concurrency: Option<usize>,
    /// Record this time as the snapshot's ("YYYY-MM-DD HH:MM:SS" in the
    /// local time zone, or RFC 3339 such as 2024-05-01T12:00:00Z) instead
    /// of now: to import old data, or to test a retention policy.
    #[arg(long, value_name = "TIME")]
    pub time: Option<String>,
}

/// Parses `--time`: restic's `YYYY-MM-DD HH:MM:SS` in `tz` (a time that a
/// DST change skips or repeats is taken as jiff's "compatible" choice: the
/// later one for a gap, the earlier one for a fold), or RFC 3339 with an
/// offset. Returns nanoseconds since the Unix epoch.
pub(super) fn parse_time(text: &str, tz: &jiff::tz::TimeZone) -> Result<i64> {
    let bad = |why: String| {
        Error::Usage(format!(
            "--time {text:?}: {why} (expected \"YYYY-MM-DD HH:MM:SS\" in the local time zone, \
             or RFC 3339 such as 2024-05-01T12:00:00Z)"
        ))
    };
    let ts = match jiff::civil::DateTime::strptime("%Y-%m-%d %H:%M:%S", text.trim()) {
        Ok(dt) => tz
            .to_ambiguous_timestamp(dt)
            .compatible()
            .map_err(|e| bad(e.to_string()))?,
        Err(_) => text
            .trim()
            .parse::<jiff::Timestamp>()
            .map_err(|e| bad(e.to_string()))?,
    };
    i64::try_from(ts.as_nanosecond())
        .map_err(|_| bad("outside the years 1678 to 2261 that a snapshot time can hold".into()))
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
    bytes_guided: u64,
    total_duration: f64,
    errors: usize,
    dry_run: bool,
    /// Nothing changed since the parent: no snapshot saved
    /// (`--skip-if-unchanged`).
    skipped: bool,
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
            bytes_guided: res.bytes_guided,
            total_duration: s.duration_ms as f64 / 1000.0,
            errors: res.warnings.len(),
            dry_run,
            skipped: res.skipped,
        }
    }
}

fn print_summary(res: &BackupResult) {
    let s = &res.summary;
    match res.parent {
        Some(p) => println!("using parent snapshot {}", p.short()),
        None => println!("no parent snapshot found, will read all files"),
    }
    println!(
        "Files:       {:>6} new, {:>6} changed, {:>6} unmodified",
        s.files_new, s.files_changed, s.files_unmodified
    );
    println!(
        "Dirs:        {:>6} new, {:>6} changed, {:>6} unmodified",
        s.dirs_new, s.dirs_changed, s.dirs_unmodified
    );
    let size = super::output::human_bytes;
    let verb = if res.snapshot_id.is_none() && !res.skipped {
        "Would add to the repository"
    } else {
        "Added to the repository"
    };
    println!(
        "{verb}: {} ({} stored)",
        size(s.data_added_plain),
        size(s.data_added)
    );
    println!(
        "processed {} files, {} in {:.3}s",
        s.total_files,
        size(s.total_bytes),
        s.duration_ms as f64 / 1000.0
    );
    match (res.snapshot_id, res.parent) {
        (Some(id), _) => println!("snapshot {} saved", id.short()),
        (None, Some(parent)) if res.skipped => println!(
            "nothing changed since snapshot {}: no snapshot saved (--skip-if-unchanged)",
            parent.short()
        ),
        (None, _) => println!("dry run: no snapshot saved"),
    }
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    crate::interrupt::install_handlers()?;
    if a.stdin_filename.is_some() && !a.stdin && !a.stdin_from_command {
        return Err(Error::Usage(
            "--stdin-filename names what --stdin or --stdin-from-command stores: give one of them too"
                .into(),
        ));
    }
    // The backup brings the index up to date under its lock.
    let repo = g.open()?;
    let mut paths = a.paths.clone();
    let lists = [
        (&a.files_from, ListForm::Lines),
        (&a.files_from_verbatim, ListForm::Verbatim),
        (&a.files_from_raw, ListForm::Raw),
    ];
    for (files, form) in lists {
        for f in files {
            let listed = archiver::paths_from(f, form)?;
            for w in &listed.warnings {
                eprintln!("warning: {}", safe(w));
            }
            paths.extend(listed.paths);
        }
    }
    let opts = BackupOptions {
        paths,
        excludes: crate::archiver::with_exclude_files(&a.exclude, &a.exclude_file)?,
        iexcludes: crate::archiver::with_exclude_files(&a.iexclude, &a.iexclude_file)?,
        exclude_larger_than: a.exclude_larger_than,
        exclude_if_present: a.exclude_if_present.clone(),
        exclude_caches: a.exclude_caches,
        one_file_system: a.one_file_system,
        tags: a.tag.clone(),
        host: a.host.clone(),
        dry_run: a.dry_run,
        force: a.force,
        parent: a.parent.clone(),
        with_atime: a.with_atime,
        time: a
            .time
            .as_deref()
            .map(|t| parse_time(t, &jiff::tz::TimeZone::system()))
            .transpose()?,
        skip_if_unchanged: a.skip_if_unchanged,
        ignore_inode: a.ignore_inode,
        ignore_ctime: a.ignore_ctime,
        no_scan: a.no_scan,
        read_concurrency: a.read_concurrency,
        group_by: a.group_by,
    };
    let progress =
        TermProgress::start(Mode::pick(g.json, g.quiet), false).with_entries(g.verbose >= 2);
    let name = a.stdin_filename.as_deref().unwrap_or(archiver::STDIN_NAME);
    let res = if a.stdin {
        let mut input = std::io::stdin().lock();
        archiver::backup_stream(&repo, Stream::Reader(&mut input), name, &opts, &progress)
    } else if a.stdin_from_command {
        let command: Vec<_> = a.paths.iter().map(|p| p.clone().into_os_string()).collect();
        archiver::backup_stream(&repo, Stream::Command(&command), name, &opts, &progress)
    } else {
        archiver::backup(&repo, &opts, &progress)
    };
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

/// `--read-concurrency`: 1 to [`archiver::MAX_READ_CONCURRENCY`].
fn read_concurrency(s: &str) -> std::result::Result<usize, String> {
    archiver::read_concurrency(s.parse::<i64>().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::tz::TimeZone;

    fn secs(ns: i64) -> i64 {
        ns.div_euclid(1_000_000_000)
    }

    #[test]
    fn time_in_restics_format_is_local() {
        let utc = TimeZone::UTC;
        assert_eq!(
            secs(parse_time("2019-09-01 11:00:00", &utc).unwrap()),
            1_567_335_600
        );
        // Berlin in summer is UTC+2; in winter UTC+1.
        let berlin = TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
        assert_eq!(
            secs(parse_time("2019-09-01 11:00:00", &berlin).unwrap()),
            1_567_335_600 - 2 * 3600
        );
        assert_eq!(
            secs(parse_time("2019-12-01 11:00:00", &berlin).unwrap()),
            1_575_198_000 - 3600
        );
        // 02:30 does not exist on 2019-03-31 in Berlin: the later reading.
        assert_eq!(
            secs(parse_time("2019-03-31 02:30:00", &berlin).unwrap()),
            secs(parse_time("2019-03-31T01:30:00Z", &utc).unwrap())
        );
    }

    #[test]
    fn time_in_rfc3339_carries_its_offset() {
        let berlin = TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
        assert_eq!(
            parse_time("2019-09-01T11:00:00Z", &berlin).unwrap(),
            1_567_335_600_000_000_000
        );
        assert_eq!(
            parse_time("2019-09-01T13:00:00.5+02:00", &berlin).unwrap(),
            1_567_335_600_500_000_000
        );
        assert_eq!(
            secs(parse_time("1960-01-01T00:00:00Z", &berlin).unwrap()),
            -315_619_200
        );
    }

    #[test]
    fn bad_times_name_the_flag() {
        for bad in [
            "",
            "yesterday",
            "2019-13-01 00:00:00",
            "2019-09-01",
            "2019-09-01T11:00:00",
            "2300-01-01T00:00:00Z",
        ] {
            match parse_time(bad, &TimeZone::UTC) {
                Err(Error::Usage(m)) => assert!(m.starts_with("--time "), "{bad:?}: {m}"),
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
    }
}
