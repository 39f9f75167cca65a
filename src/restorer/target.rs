//! The restore target on the local filesystem: creating files (unnamed with
//! `O_TMPFILE` in directories this run made, else under a temporary name),
//! giving them their names when complete, directories that are verified to
//! be real directories (a symlink in the way is removed, never followed),
//! hard links, and metadata (owner, mode, extended attributes, times) set
//! through a file's own descriptor where it has one.

use super::select::XattrSelector;
use crate::error::{Error, Result};
use crate::localfs::Anchor;
use crate::localfs::meta::NameCache;
use crate::tree::{Node, NodeKind};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// One regular file to restore.
pub(super) struct FileJob {
    /// The path (valid while `_anchor` is held).
    pub(super) dest: PathBuf,
    /// The temporary name in `dir`, where a file is filled unless it can be
    /// made unnamed.
    pub(super) tmp: OsString,
    pub(super) node: Node,
    /// The path shown in messages.
    pub(super) shown: String,
    /// The directory the file goes in, opened once.
    pub(super) dir: Arc<File>,
    pub(super) dir_state: DirState,
    /// Something was at `dest` before (it is replaced).
    pub(super) existed: bool,
    /// Keeps `dest` valid.
    pub(super) _anchor: Anchor,
}

/// What is known of the directory a file is created in.
#[derive(Clone, Copy)]
pub(super) struct DirState {
    /// This run created it: nothing in it is in the way.
    pub(super) fresh: bool,
    /// A file created in it gets our user and group (no chown needed).
    pub(super) owned: bool,
}

/// The process's view of the target: who we are, what the umask gives new
/// files, whether `O_TMPFILE` works, and the owner names to resolve.
pub(super) struct Destination {
    numeric_owner: bool,
    is_root: bool,
    /// Whether `O_TMPFILE` works here (cleared at the first refusal).
    tmpfile: AtomicBool,
    /// The process umask, if known.
    umask: Option<u32>,
    euid: u32,
    pub(super) egid: u32,
    names: NameCache,
    /// Which extended attributes are set.
    xattrs: XattrSelector,
}

impl Destination {
    /// The destination as this process sees it; `numeric_owner` ignores
    /// recorded user and group names; `xattrs` picks the extended
    /// attributes set.
    pub(super) fn new(numeric_owner: bool, xattrs: XattrSelector) -> Self {
        Destination {
            numeric_owner,
            is_root: nix::unistd::geteuid().is_root(),
            tmpfile: AtomicBool::new(true),
            umask: read_umask(),
            euid: nix::unistd::geteuid().as_raw(),
            egid: nix::unistd::getegid().as_raw(),
            names: NameCache::default(),
            xattrs,
        }
    }

    /// Creates the file `job` is filled into: unnamed (`O_TMPFILE`) in a
    /// directory this run created, so nothing shows until it is linked in
    /// complete and an interrupted restore leaves nothing behind; otherwise
    /// (or where the filesystem cannot) under its temporary name. Returns
    /// the file and whether it is unnamed.
    pub(super) fn create(&self, job: &FileJob) -> std::io::Result<(File, bool)> {
        use nix::fcntl::{OFlag, openat};
        use nix::sys::stat::Mode;
        let mode = Mode::from_bits_truncate(self.create_mode(&job.node));
        if job.dir_state.fresh && self.tmpfile.load(Ordering::Relaxed) {
            match openat(
                job.dir.as_ref(),
                ".",
                // Readable too: `verify` reads the file back before naming it.
                OFlag::O_TMPFILE | OFlag::O_RDWR | OFlag::O_CLOEXEC,
                mode,
            ) {
                Ok(fd) => return Ok((File::from(fd), true)),
                // Not supported by this filesystem (or kernel).
                Err(nix::errno::Errno::EOPNOTSUPP | nix::errno::Errno::EISDIR) => {
                    self.tmpfile.store(false, Ordering::Relaxed)
                }
                Err(e) => return Err(e.into()),
            }
        }
        let flags =
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(job.dir.as_ref(), job.tmp.as_os_str(), flags, mode)?;
        Ok((File::from(fd), false))
    }

    /// The permission bits a restored file is created with: its own when
    /// the umask keeps them all (so no chmod is needed after), otherwise
    /// owner-only until they are set.
    fn create_mode(&self, n: &Node) -> u32 {
        let perm = n.mode & 0o777;
        match self.umask {
            Some(m) if perm & m == 0 => perm,
            _ => 0o600,
        }
    }

    /// The owner to give `n`, and whether to set it: always as root,
    /// otherwise only when it differs from what files are created with (a
    /// refusal is then reported, not hidden).
    fn owner(&self, n: &Node) -> (nix::unistd::Uid, nix::unistd::Gid, bool) {
        let (mut uid, mut gid) = (n.uid, n.gid);
        if !self.numeric_owner {
            if let Some(u) = self.names.uid(&n.user) {
                uid = u;
            }
            if let Some(g) = self.names.gid(&n.group) {
                gid = g;
            }
        }
        let set = self.is_root || uid != self.euid || gid != self.egid;
        (
            nix::unistd::Uid::from_raw(uid),
            nix::unistd::Gid::from_raw(gid),
            set,
        )
    }

    /// Metadata of a regular file being restored, through its descriptor
    /// (no path lookups); `path` names it in messages. `owned`: it was
    /// created with our user and group.
    pub(super) fn apply_file_meta(
        &self,
        f: &File,
        path: &Path,
        n: &Node,
        owned: bool,
    ) -> Result<()> {
        let now = owned.then(|| self.create_mode(n));
        self.set_meta(MetaTarget::File(f, path), n, now)
    }

    /// Ownership (as root), mode (not for symlinks) and times, without
    /// following a symlink at `path`.
    pub(super) fn apply_meta(&self, path: &Path, n: &Node) -> Result<()> {
        self.set_meta(MetaTarget::Path(path), n, None)
    }

    /// [`Self::apply_meta`] for a directory; `owned`: this run made it
    /// (owner-only, see [`Self::safe_mkdir`]) with our user and group.
    pub(super) fn apply_dir_meta(&self, path: &Path, n: &Node, owned: bool) -> Result<()> {
        self.set_meta(MetaTarget::Path(path), n, owned.then_some(0o700))
    }

    /// Owner, mode (not for symlinks), extended attributes and times, in
    /// that order (a chown clears set-id bits, so the mode comes after it).
    /// `now`: the permission bits of an entry this run created with our
    /// user and group (None: anything else). What the target refuses is
    /// collected into one `Error::Partial`.
    fn set_meta(&self, at: MetaTarget<'_>, n: &Node, now: Option<u32>) -> Result<()> {
        use nix::fcntl::{AT_FDCWD, AtFlags};
        use nix::sys::stat::UtimensatFlags;
        use nix::sys::time::TimeSpec;
        use std::os::unix::fs::PermissionsExt;
        use xattr::FileExt as _;
        let path = match at {
            MetaTarget::Path(p) | MetaTarget::File(_, p) => p,
        };
        let mut problems = Vec::new();
        let (uid, gid, set) = self.owner(n);
        let has_owner = now.is_some() && uid.as_raw() == self.euid && gid.as_raw() == self.egid;
        if set && !has_owner {
            let r = match at {
                MetaTarget::File(f, _) => nix::unistd::fchown(f, Some(uid), Some(gid)),
                MetaTarget::Path(p) => nix::unistd::fchownat(
                    AT_FDCWD,
                    p,
                    Some(uid),
                    Some(gid),
                    AtFlags::AT_SYMLINK_NOFOLLOW,
                ),
            };
            if let Err(e) = r {
                problems.push(format!("cannot set owner {uid}:{gid}: {e}"));
            }
        }
        // What was created with its final mode by its final owner needs no chmod.
        if n.kind != NodeKind::Symlink && (now != Some(n.mode & 0o7777) || !has_owner) {
            let perm = fs::Permissions::from_mode(n.mode);
            match at {
                MetaTarget::File(f, _) => f.set_permissions(perm),
                MetaTarget::Path(p) => fs::set_permissions(p, perm),
            }
            .map_err(|e| Error::io(path, e))?;
        }
        for x in n.xattrs.iter().filter(|x| self.xattrs.wanted(&x.name)) {
            let name = OsStr::from_bytes(&x.name);
            let r = match at {
                MetaTarget::File(f, _) => f.set_xattr(name, &x.value),
                MetaTarget::Path(p) => xattr::set(p, name, &x.value),
            };
            if let Err(e) = r {
                problems.push(format!(
                    "cannot set extended attribute {}: {e}",
                    name.to_string_lossy()
                ));
            }
        }
        let ts =
            |ns: i64| TimeSpec::new(ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
        let (atime, mtime) = (
            n.atime_ns.map(ts).unwrap_or(TimeSpec::UTIME_OMIT),
            ts(n.mtime_ns),
        );
        match at {
            MetaTarget::File(f, _) => nix::sys::stat::futimens(f, &atime, &mtime),
            MetaTarget::Path(p) => nix::sys::stat::utimensat(
                AT_FDCWD,
                p,
                &atime,
                &mtime,
                UtimensatFlags::NoFollowSymlink,
            ),
        }
        .map_err(|e| Error::io(path, e.into()))?;
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Partial(problems.join("; ")))
        }
    }

    /// Makes `name` in directory `parent` a real directory (`path` names it
    /// in messages and is valid while `parent` is open): an existing
    /// directory is kept, anything else there (a symlink, a file) is removed
    /// first, never followed. Each step is relative to `parent`'s descriptor,
    /// so no path is looked up again and nothing above `parent` can redirect
    /// it. A new directory is owner-only until its own metadata is applied
    /// at the end. Returns the new directory's group if it was created now
    /// and inherited no default ACL (which, not the umask, would then decide
    /// the modes of files created in it). `in_ours`: `parent` was made by
    /// this run too, inherited no default ACL and has our group.
    pub(super) fn safe_mkdir(
        &self,
        parent: &File,
        name: &OsStr,
        path: &Path,
        in_ours: bool,
    ) -> std::io::Result<Option<u32>> {
        use nix::errno::Errno;
        use nix::fcntl::AtFlags;
        use nix::sys::stat::{Mode, SFlag, fstatat, mkdirat};
        let mkdir = || mkdirat(parent, name, Mode::S_IRWXU);
        match mkdir() {
            Ok(()) => {}
            Err(Errno::EEXIST) => {
                match fstatat(parent, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                    Ok(st)
                        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
                            == SFlag::S_IFDIR =>
                    {
                        return Ok(None);
                    }
                    Ok(_) => nix::unistd::unlinkat(
                        parent,
                        name,
                        nix::unistd::UnlinkatFlags::NoRemoveDir,
                    )?,
                    Err(Errno::ENOENT) => {}
                    Err(e) => return Err(e.into()),
                }
                mkdir()?;
            }
            Err(e) => return Err(e.into()),
        }
        // Made in a directory this run made with our group (owner-only, so
        // without a set-group-ID bit, and without a default ACL): nothing
        // was inherited, the group is ours (whether the filesystem gives a
        // new directory the process's group or, mounted `grpid`, its
        // parent's) and, where the umask keeps the owner's bits, the mode
        // is 0700 already.
        if in_ours && self.umask.is_some_and(|m| m & 0o700 == 0) {
            return Ok(Some(self.egid));
        }
        fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
        if matches!(xattr::get(path, "system.posix_acl_default"), Ok(None)) {
            Ok(Some(fs::symlink_metadata(path)?.gid()))
        } else {
            Ok(None)
        }
    }
}

/// Where [`Destination::set_meta`] applies metadata: a path (never following a
/// symlink there), or the open descriptor of a file being restored (with
/// its path for messages).
#[derive(Clone, Copy)]
enum MetaTarget<'a> {
    Path(&'a Path),
    File(&'a File, &'a Path),
}

/// Gives a filled file its name: links an unnamed file in, or renames the
/// temporary name over the destination.
pub(super) fn put_in_place(job: &FileJob, file: &File, unnamed: bool) -> std::io::Result<()> {
    use nix::fcntl::{AT_FDCWD, AtFlags};
    use std::os::fd::AsRawFd;
    let name = job
        .dest
        .file_name()
        .ok_or_else(|| std::io::Error::from(ErrorKind::InvalidInput))?;
    if !unnamed {
        return nix::fcntl::renameat(
            job.dir.as_ref(),
            job.tmp.as_os_str(),
            job.dir.as_ref(),
            name,
        )
        .map_err(Into::into);
    }
    // Linking a descriptor itself needs CAP_DAC_READ_SEARCH; its
    // /proc/self/fd link works for everyone.
    match nix::unistd::linkat(file, "", job.dir.as_ref(), name, AtFlags::AT_EMPTY_PATH) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::ENOENT | nix::errno::Errno::EPERM) => {
            let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
            nix::unistd::linkat(
                AT_FDCWD,
                proc.as_str(),
                job.dir.as_ref(),
                name,
                AtFlags::AT_SYMLINK_FOLLOW,
            )
            .map_err(Into::into)
        }
        Err(e) => Err(e.into()),
    }
}

/// The names in the directory `dir` is a descriptor of (an `O_PATH` one
/// will do), without `.` and `..`.
pub(super) fn names_in(dir: &File) -> std::io::Result<Vec<std::ffi::OsString>> {
    use nix::fcntl::OFlag;
    use std::os::unix::ffi::OsStrExt;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut d = nix::dir::Dir::openat(dir, ".", flags, nix::sys::stat::Mode::empty())?;
    let mut out = Vec::new();
    for e in d.iter() {
        let e = e?;
        let name = e.file_name().to_bytes();
        if name != b"." && name != b".." {
            out.push(std::ffi::OsStr::from_bytes(name).to_os_string());
        }
    }
    Ok(out)
}

/// Removes `name` from the directory `dir` is a descriptor of: a file,
/// symlink or special file is unlinked; a directory is emptied first,
/// each step relative to a descriptor (a symlink is never followed, so
/// nothing outside `dir` is touched).
pub(super) fn remove_entry(dir: &File, name: &std::ffi::OsStr) -> std::io::Result<()> {
    use nix::errno::Errno;
    use nix::unistd::{UnlinkatFlags, unlinkat};
    match unlinkat(dir, name, UnlinkatFlags::NoRemoveDir) {
        Ok(()) => return Ok(()),
        Err(Errno::EISDIR | Errno::EPERM) => {}
        Err(e) => return Err(e.into()),
    }
    let sub = crate::localfs::open_dir_at(dir, name)?;
    for n in names_in(&sub)? {
        remove_entry(&sub, &n)?;
    }
    unlinkat(dir, name, UnlinkatFlags::RemoveDir)?;
    Ok(())
}

/// Removes the temporary name of a file that is not restored.
pub(super) fn remove_tmp(job: &FileJob) {
    let _ = nix::unistd::unlinkat(
        job.dir.as_ref(),
        job.tmp.as_os_str(),
        nix::unistd::UnlinkatFlags::NoRemoveDir,
    );
}

/// Open files this process may hold: the soft limit on descriptors,
/// raised first to the hard limit where it is lower (as Go programs such
/// as restic do at start; the common soft limit of 1,024 is less than two
/// batches of files and their directories).
pub(super) fn open_files_allowed() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    /// A hard limit of "unlimited" is raised to this much.
    const CAP: u64 = 1 << 16;
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024;
    };
    let want = hard.min(CAP);
    if soft < want && setrlimit(Resource::RLIMIT_NOFILE, want, hard).is_ok() {
        return want;
    }
    soft
}

/// Makes room in this process's descriptor table for descriptors up to
/// `count`, by duplicating one to at least `count - 1` and closing it.
///
/// The kernel doubles the table as descriptors are opened (256, 512, …
/// entries), and in a process of more than one thread each doubling waits
/// for an RCU grace period: a restore's first batches, holding up to 4,096
/// files and directories open, stalled about 60 ms in those waits with both
/// cores idle (seen in `strace -T`: `openat` of the 256th, 512th, 1,024th
/// and 2,048th descriptor took 7–16 ms each). Grown while the process has
/// one thread, the table costs no wait; grown later, one instead of
/// several. It never shrinks. A failure (a limit below `count`) leaves the
/// table to grow as before.
pub(super) fn reserve_descriptors(count: u64) {
    let Ok(highest) = std::os::fd::RawFd::try_from(count.saturating_sub(1)) else {
        return;
    };
    if let Ok(dir) = File::open("/") {
        drop(rustix::io::fcntl_dupfd_cloexec(&dir, highest));
    }
}

/// The process umask, read from /proc (reading it with umask(2) would
/// briefly change it for every thread).
fn read_umask() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Umask:"))?;
    u32::from_str_radix(line.trim_start_matches("Umask:").trim(), 8).ok()
}

/// Replaces whatever is at `dest` with a hard link to `existing`.
pub(super) fn make_hardlink(existing: &Path, dest: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(dest) {
        Ok(_) => fs::remove_file(dest)?,
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    fs::hard_link(existing, dest)
}

/// Creates a symlink, FIFO or device node at `dest` (owner-only until its
/// metadata is applied); other kinds are not created here.
pub(super) fn create_special(dest: &Path, n: &Node) -> Result<()> {
    use nix::sys::stat::{Mode, SFlag, mknod};
    let owner_only = Mode::from_bits_truncate(0o600);
    match n.kind {
        NodeKind::Symlink => std::os::unix::fs::symlink(OsStr::from_bytes(&n.link_target), dest)
            .map_err(|e| Error::io(dest, e)),
        NodeKind::Fifo => {
            nix::unistd::mkfifo(dest, owner_only).map_err(|e| Error::io(dest, e.into()))
        }
        NodeKind::CharDev | NodeKind::BlockDev => {
            let kind = if n.kind == NodeKind::CharDev {
                SFlag::S_IFCHR
            } else {
                SFlag::S_IFBLK
            };
            mknod(dest, kind, owner_only, n.rdev as _).map_err(|e| Error::io(dest, e.into()))
        }
        NodeKind::File | NodeKind::Dir | NodeKind::Socket => Ok(()),
    }
}
