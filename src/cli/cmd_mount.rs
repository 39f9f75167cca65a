//! `larder mount`: browse snapshots as a read-only filesystem (FUSE).

use super::Global;
use super::filter::FilterArgs;
use super::output::safe;
use crate::error::Result;
use crate::mount::{self, MountOptions};
use std::path::PathBuf;
use std::sync::Arc;

/// Mount the repository as a read-only filesystem (until Ctrl-C or umount).
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Example:\n  mkdir /mnt/larder && larder mount /mnt/larder\n  ls /mnt/larder/snapshots/latest/\n  (Ctrl-C, SIGTERM or `fusermount -u /mnt/larder` unmounts)"
)]
pub struct Args {
    /// An existing directory to mount on.
    mountpoint: PathBuf,
    /// Memory for the cache of blobs read, in MiB.
    #[arg(long, default_value_t = 64, value_name = "MiB")]
    cache_size: u64,
    /// Let other users see the mount (needs `user_allow_other` in
    /// /etc/fuse.conf unless run as root).
    #[arg(long)]
    allow_other: bool,
    #[command(flatten)]
    filter: FilterArgs,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let repo = Arc::new(g.open()?);
    let opts = MountOptions {
        filter: a.filter.filter(),
        cache_bytes: a.cache_size.saturating_mul(1 << 20),
        allow_other: a.allow_other,
    };
    let quiet = g.quiet;
    let at = a.mountpoint.display().to_string();
    mount::mount(repo, &a.mountpoint, &opts, &mut |m| {
        for e in &m.unreadable {
            eprintln!("warning: {}", safe(&e.to_string()));
        }
        if !quiet {
            eprintln!(
                "Serving {} snapshots at {}; Ctrl-C or `fusermount -u` unmounts.",
                m.snapshots,
                safe(&at)
            );
        }
    })?;
    if !quiet {
        eprintln!("Unmounted {}", safe(&at));
    }
    Ok(0)
}
