//! File metadata as `lstat` reports it, in a type of our own so it can come
//! from three places: a path ([`Stat::lstat`]), a name inside a directory
//! already open ([`Stat::at`]: `fstatat` on the directory's descriptor, so
//! the kernel looks up one name instead of walking the whole path again),
//! or an open file ([`Stat::of`]). `std::fs::Metadata` can only be made by
//! the standard library's own calls, which take a whole path.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What `lstat` says of one file (never following a final symlink).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub dev: u64,
    pub ino: u64,
    /// File type and permission bits (`st_mode`).
    pub mode: u32,
    pub nlink: u64,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub size: u64,
    /// 512-byte blocks allocated.
    pub blocks: u64,
    pub atime: i64,
    pub atime_nsec: i64,
    pub mtime: i64,
    pub mtime_nsec: i64,
    pub ctime: i64,
    pub ctime_nsec: i64,
}

impl Stat {
    /// `lstat` of `path`.
    pub fn lstat(path: &Path) -> std::io::Result<Stat> {
        path.symlink_metadata().map(|md| Stat::from(&md))
    }

    /// `lstat` of entry `name` of the directory open as `dir`: the kernel
    /// looks up that one name, not the directory's whole path.
    // `nlink_t` is 32 bits wide on some targets, 64 on this one.
    #[allow(clippy::useless_conversion)]
    pub fn at(dir: impl AsFd, name: &OsStr) -> std::io::Result<Stat> {
        let st = nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)?;
        Ok(Stat {
            dev: st.st_dev,
            ino: st.st_ino,
            mode: st.st_mode,
            nlink: u64::from(st.st_nlink),
            uid: st.st_uid,
            gid: st.st_gid,
            rdev: st.st_rdev,
            size: u64::try_from(st.st_size).unwrap_or(0),
            blocks: u64::try_from(st.st_blocks).unwrap_or(0),
            atime: st.st_atime,
            atime_nsec: st.st_atime_nsec,
            mtime: st.st_mtime,
            mtime_nsec: st.st_mtime_nsec,
            ctime: st.st_ctime,
            ctime_nsec: st.st_ctime_nsec,
        })
    }

    /// `fstat` of an open file.
    pub fn of(file: &File) -> std::io::Result<Stat> {
        file.metadata().map(|md| Stat::from(&md))
    }

    /// The file type bits of `mode` (`S_IFMT`: `S_IFREG`, `S_IFDIR`, ...).
    pub fn format(&self) -> u32 {
        self.mode & libc::S_IFMT
    }

    pub fn is_dir(&self) -> bool {
        self.format() == libc::S_IFDIR
    }

    pub fn is_file(&self) -> bool {
        self.format() == libc::S_IFREG
    }

    /// Fewer blocks allocated than the size needs: the file has holes.
    pub fn is_sparse(&self) -> bool {
        self.blocks.saturating_mul(512) < self.size
    }
}

impl From<&std::fs::Metadata> for Stat {
    fn from(md: &std::fs::Metadata) -> Stat {
        Stat {
            dev: md.dev(),
            ino: md.ino(),
            mode: md.mode(),
            nlink: md.nlink(),
            uid: md.uid(),
            gid: md.gid(),
            rdev: md.rdev(),
            size: md.size(),
            blocks: md.blocks(),
            atime: md.atime(),
            atime_nsec: md.atime_nsec(),
            mtime: md.mtime(),
            mtime_nsec: md.mtime_nsec(),
            ctime: md.ctime(),
            ctime_nsec: md.ctime_nsec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// The three ways of asking agree with each other field by field, and
    /// a symlink is described, not followed.
    #[test]
    fn by_path_by_name_and_by_file_agree() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"0123456789").unwrap();
        symlink("f", dir.path().join("l")).unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        let open = File::open(dir.path()).unwrap();

        let by_path = Stat::lstat(&file).unwrap();
        let by_name = Stat::at(&open, OsStr::new("f")).unwrap();
        let by_file = Stat::of(&File::open(&file).unwrap()).unwrap();
        assert_eq!(by_path, by_name);
        assert_eq!(by_path, by_file);
        assert!(by_name.is_file() && !by_name.is_dir());
        assert_eq!(by_name.size, 10);
        assert_eq!(by_name.nlink, 1);

        let link = Stat::at(&open, OsStr::new("l")).unwrap();
        assert_eq!(link.format(), libc::S_IFLNK, "a symlink is not followed");
        assert_eq!(link, Stat::lstat(&dir.path().join("l")).unwrap());
        assert_ne!(link.ino, by_name.ino);

        let d = Stat::at(&open, OsStr::new("d")).unwrap();
        assert!(d.is_dir() && !d.is_file());

        nix::unistd::mkfifo(&dir.path().join("p"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let fifo = Stat::at(&open, OsStr::new("p")).unwrap();
        assert_eq!(fifo.format(), libc::S_IFIFO);
        assert_eq!(fifo, Stat::lstat(&dir.path().join("p")).unwrap());

        let gone = Stat::at(&open, OsStr::new("missing")).unwrap_err();
        assert_eq!(gone.kind(), std::io::ErrorKind::NotFound);
    }
}
