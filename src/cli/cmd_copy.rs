//! `larder copy`: copy snapshots from another repository into this one,
//! with a terminal line counting the files (and bytes) of the trees copied.

use super::Global;
use super::filter::FilterArgs;
use super::output::print_json;
use super::progress::{Mode, TermProgress};
use crate::copy::{self, CopyReport};
use crate::error::Result;
use crate::snapshot;

/// Copy snapshots from another repository into this one (the `--repo`),
/// without reading the source files again.
///
/// Content is re-chunked with this repository's chunker and only chunks it
/// does not have are stored; snapshots it already has (same time, host,
/// user and paths) are skipped, so running it again adds nothing.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    LARDER_FROM_PASSWORD=... larder -r /mnt/offsite copy --from-repo /srv/backup/repo\n  \
    larder -r /mnt/offsite copy --from-repo /srv/backup/repo --from-password-file ~/.src-pass latest")]
pub struct Args {
    /// The repository to copy from (--from-repo or --from-repository-file),
    /// and its password.
    #[command(flatten)]
    from: super::from_repo::FromRepo,
    /// Snapshots to copy (ids, prefixes or `latest`); all by default.
    snapshots: Vec<String>,
    #[command(flatten)]
    filter: FilterArgs,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    crate::interrupt::install_handlers()?;
    let dst = g.open()?;
    let (location, pass) = (a.from.location()?, a.from.password()?);
    let mut src = g.open_other_with(&location, pass.clone(), &g.cache_dir())?;
    if src.config().id == dst.config().id {
        // Two copies of one repository (one cloned from the other, say
        // with rsync) share its id, and so would share one index cache,
        // which would answer for the wrong one: the source gets its own.
        drop(src);
        let own = g.cache_dir().join("copy-source");
        src = g.open_other_with(&location, pass, &own)?;
    }
    // The lock comes before the snapshots are picked (see `lock_for_reading`).
    let _src_lock = src.lock_for_reading()?;
    let filter = a.filter.filter();
    let snaps = if a.snapshots.is_empty() {
        snapshot::list(&src, &filter)?.0
    } else {
        a.snapshots
            .iter()
            .map(|s| snapshot::resolve(&src, s, &filter))
            .collect::<Result<Vec<_>>>()?
    };
    // A terminal line (never with --json: copy prints one summary).
    let progress = TermProgress::start(Mode::pick(false, g.quiet || g.json), false);
    let report = copy::copy_with_progress(&src, &dst, &snaps, &progress);
    progress.finish();
    let report = report?;
    print_report(g, &report);
    Ok(0)
}

fn print_report(g: &Global, r: &CopyReport) {
    if g.json {
        print_json(&serde_json::json!({
            "message_type": "summary",
            "copied": r.copied,
            "skipped": r.skipped,
            "blobs_added": r.blobs_added,
            "bytes_added": r.bytes_added,
            "bytes_read": r.bytes_read,
        }));
        return;
    }
    if g.quiet {
        return;
    }
    for s in &r.skipped {
        println!(
            "snapshot {} skipped: already here as {}",
            &s.source[..8],
            &s.target[..8]
        );
    }
    for c in &r.copied {
        println!("snapshot {} copied as {}", &c.source[..8], &c.target[..8]);
    }
    println!(
        "{} copied, {} skipped; {} new blobs, {} bytes stored",
        r.copied.len(),
        r.skipped.len(),
        r.blobs_added,
        r.bytes_added
    );
}
