//! `mount`: the repository as a read-only FUSE filesystem, in restic's
//! layout: `snapshots/<time>/`, `hosts/<host>/<time>/`, `tags/<tag>/<time>/`
//! and `ids/<short id>/`, with a `latest` symlink in each listing. Files
//! show their recorded modes, owners, times, sizes and extended attributes;
//! their bytes are read blob by blob from the packs (each verified) through
//! a small cache ([`cache`]). Inodes are allocated as the kernel looks names
//! up ([`inodes`]); the operations are in [`fs`]. The snapshot list is read
//! once, when mounting. Mounting goes through the `fuser` crate's pure-Rust
//! path (the `mount` syscall as root, else `fusermount`), no libfuse.

mod cache;
mod fs;
mod inodes;

use crate::error::{Error, Result};
use crate::interrupt;
use crate::repository::Repository;
use crate::snapshot::{self, Filter};
use fuser::{Config, MountOption, SessionACL};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Which snapshots to show.
    pub filter: Filter,
    /// Bytes of verified blobs kept in memory.
    pub cache_bytes: u64,
    /// Let other users (and root) see the mount (needs `user_allow_other`
    /// in /etc/fuse.conf unless mounting as root).
    pub allow_other: bool,
}

/// What was mounted, told once the view is up.
#[derive(Debug)]
pub struct Mounted {
    pub snapshots: usize,
    /// Snapshots that could not be read (left out of the view).
    pub unreadable: Vec<Error>,
}

/// Mounts the view of `repo` at `mountpoint` (an existing directory), calls
/// `ready` once it is served, and serves it until SIGINT or SIGTERM (then
/// unmounts) or until someone unmounts it. Holds a shared lock meanwhile
/// (unless readers run without locks).
pub fn mount(
    repo: Arc<Repository>,
    mountpoint: &Path,
    opts: &MountOptions,
    ready: &mut dyn FnMut(&Mounted),
) -> Result<()> {
    interrupt::install_handlers()?;
    let md = std::fs::metadata(mountpoint).map_err(|e| Error::io(mountpoint, e))?;
    if !md.is_dir() {
        return Err(Error::Usage(format!(
            "{}: the mountpoint is not a directory",
            mountpoint.display()
        )));
    }
    let _lock = repo.lock_for_reading()?;
    let (snaps, unreadable) = snapshot::list(&repo, &opts.filter)?;
    let now = jiff::Timestamp::now().as_nanosecond() as i64;
    let root = inodes::layout(&snaps, now);
    let view = fs::LarderFs::new(repo.clone(), root, opts.cache_bytes, now);
    let mut cfg = Config::default();
    cfg.mount_options = vec![
        MountOption::RO,
        MountOption::FSName("larder".into()),
        MountOption::Subtype("larder".into()),
        MountOption::DefaultPermissions,
        MountOption::NoAtime,
    ];
    if opts.allow_other {
        cfg.acl = SessionACL::All;
    }
    cfg.n_threads = Some(4);
    let session = fuser::spawn_mount(view, mountpoint, &cfg)
        .map_err(|e| Error::io(mountpoint, mount_error(e)))?;
    ready(&Mounted {
        snapshots: snaps.len(),
        unreadable,
    });
    while !interrupt::requested() && !session.guard.is_finished() {
        std::thread::sleep(Duration::from_millis(100));
    }
    let done = if session.guard.is_finished() {
        session.join()
    } else {
        session.umount_and_join()
    };
    done.map_err(|e| Error::io(mountpoint, e))
}

/// A mount failure, with what usually causes it.
fn mount_error(e: std::io::Error) -> std::io::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (FUSE is not usable here: /dev/fuse must be accessible and fusermount installed, from the fuse3 package)"
        }
        Some(libc::ENOENT) => " (is /dev/fuse present and fusermount installed?)",
        _ => "",
    };
    std::io::Error::new(e.kind(), format!("cannot mount: {e}{hint}"))
}
