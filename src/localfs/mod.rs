//! Local filesystem access shared by backup and restore: paths the kernel
//! accepts however deep a tree goes (below `PATH_MAX`, entries are reached
//! through a directory descriptor as `/proc/self/fd/N/name`), directory
//! descriptors, listings and opens with `O_NOATIME` (falling back without
//! it where the kernel refuses it to a non-owner), absolute paths, sparse
//! reads, `lstat` results in a type of our own ([`stat`]), and the node
//! metadata of [`meta`].

pub mod meta;
pub mod sparse;
pub mod stat;

use crate::error::{Error, Result};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Paths at most this long are used as they are; longer ones go through a
/// directory descriptor.
pub const SHORT_PATH: usize = 3072;

/// The directory descriptor a `/proc/self/fd/N/...` path depends on (None
/// for an ordinary path). Whoever holds the path holds this too, so the
/// descriptor stays open while the path is in use.
pub type Anchor = Option<Arc<File>>;

/// An `O_PATH` descriptor of directory `dir` (not following a symlink).
pub fn open_dir_path(dir: &Path) -> std::io::Result<File> {
    File::options()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)
}

/// An `O_PATH` descriptor of directory `name` in the directory `parent` is
/// a descriptor of (not following a symlink).
pub fn open_dir_at(parent: &File, name: &OsStr) -> std::io::Result<File> {
    use nix::fcntl::{OFlag, openat};
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    Ok(File::from(openat(
        parent,
        name,
        flags,
        nix::sys::stat::Mode::empty(),
    )?))
}

/// A path for `name` inside directory `dir` that the kernel accepts, with
/// the anchor it depends on. `dir` itself is valid while `dir_anchor` is
/// held. A short enough `dir/name` is used as it is (and depends on what
/// `dir` depends on); a longer one becomes `/proc/self/fd/N/name`, with `N`
/// a descriptor of `dir` opened at the first such child and kept in `local`.
pub fn child_path(
    dir: &Path,
    dir_anchor: &Anchor,
    name: &OsStr,
    local: &mut Anchor,
) -> std::io::Result<(PathBuf, Anchor)> {
    match long_child_path(dir, name, local)? {
        Some(path) => Ok((path, local.clone())),
        None => Ok((join(dir, name), dir_anchor.clone())),
    }
}

/// `dir/name`, allocated once at its length.
pub fn join(dir: &Path, name: &OsStr) -> PathBuf {
    let mut p = PathBuf::with_capacity(dir.as_os_str().len() + 1 + name.len());
    p.push(dir);
    p.push(name);
    p
}

/// The path [`child_path`] makes for `name` inside `dir` when `dir/name`
/// is too long to use as it is (`/proc/self/fd/N/name`, with `N` opened
/// at the first such child and kept in `local`); None when it is short
/// enough.
pub fn long_child_path(
    dir: &Path,
    name: &OsStr,
    local: &mut Anchor,
) -> std::io::Result<Option<PathBuf>> {
    if dir.as_os_str().len() + name.len() + 1 < SHORT_PATH {
        return Ok(None);
    }
    let fd = match local {
        Some(f) => f,
        None => local.insert(Arc::new(open_dir_path(dir)?)),
    };
    let path = PathBuf::from(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&**fd)
    ))
    .join(name);
    Ok(Some(path))
}

/// Opens a regular file for reading without following a final symlink and
/// without touching its atime where permitted (`O_NOATIME` needs ownership
/// or CAP_FOWNER; without them the open is retried without it).
pub fn open_noatime(path: &Path) -> std::io::Result<File> {
    let open = |flags| File::options().read(true).custom_flags(flags).open(path);
    match open(libc::O_NOATIME | libc::O_NOFOLLOW) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(libc::O_NOFOLLOW),
        r => r,
    }
}

/// The names in directory `path`, sorted by bytes. The directory is opened
/// with `O_NOATIME` where permitted, so listing it does not touch its atime.
pub fn list_dir(path: &Path) -> std::io::Result<Vec<OsString>> {
    open_and_list_dir(path).map(|(_, names)| names)
}

/// [`list_dir`], keeping the directory open: its entries can then be
/// looked up by name ([`stat::Stat::at`]) without walking `path` again.
///
/// The entries are read with `getdents64` into a buffer on the stack, not
/// through `opendir`: that allocates 32 KiB per directory, and in glibc an
/// allocation that size first merges every small block freed since the
/// last one (a backup lists every directory and frees many small blocks).
pub fn open_and_list_dir(path: &Path) -> std::io::Result<(OwnedFd, Vec<OsString>)> {
    use nix::fcntl::OFlag;
    use nix::sys::stat::Mode;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let dir = match nix::fcntl::open(path, flags | OFlag::O_NOATIME, Mode::empty()) {
        Ok(d) => d,
        // O_NOATIME needs ownership (or CAP_FOWNER); retry without it.
        Err(nix::errno::Errno::EPERM) => nix::fcntl::open(path, flags, Mode::empty())?,
        Err(e) => return Err(e.into()),
    };
    let mut buf = [const { MaybeUninit::<u8>::uninit() }; 32 << 10];
    let mut entries = rustix::fs::RawDir::new(&dir, &mut buf);
    let mut names = Vec::new();
    while let Some(ent) = entries.next() {
        let ent = ent?;
        let name = ent.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(name).to_os_string());
        }
    }
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    Ok((dir, names))
}

/// A path as an absolute path without `.`/`..`, not resolving a final symlink.
pub fn absolute(p: &Path) -> Result<PathBuf> {
    let abs = std::path::absolute(p).map_err(|e| Error::io(p, e))?;
    let mut out = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The normal components of `p` as bytes (no root, `.` or `..`).
pub fn components(p: &Path) -> Vec<&[u8]> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.as_bytes()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory whose entries take several times the 32 KiB read buffer
    /// is listed whole, sorted by bytes, without `.` and `..`; the
    /// descriptor kept open finds its entries by name.
    #[test]
    fn a_directory_larger_than_the_buffer_is_listed_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut want: Vec<Vec<u8>> = (0..1500u32)
            .map(|i| format!("{:0>200}-{i}", i % 7).into_bytes())
            .collect();
        want.push(b"\xff-not-utf8".to_vec());
        for n in &want {
            File::create(dir.path().join(OsStr::from_bytes(n))).unwrap();
        }
        want.sort();
        let (fd, names) = open_and_list_dir(dir.path()).unwrap();
        let got: Vec<Vec<u8>> = names.iter().map(|n| n.as_bytes().to_vec()).collect();
        assert_eq!(got, want);
        assert!(stat::Stat::at(&fd, &names[0]).unwrap().is_file());
        assert_eq!(list_dir(dir.path()).unwrap(), names);
        // Not a directory: refused, nothing listed.
        let file = dir.path().join(&names[0]);
        assert!(open_and_list_dir(&file).is_err());
    }
}
