//! The local-filesystem backend. Writes go to a temporary file in the target
//! directory, are fsynced, linked into place (which fails if the name exists,
//! giving write-once semantics) and the directory is fsynced, so a crash at
//! any point leaves either no object or the whole object.
//!
//! Reads trust nothing they find: an object must be a regular file. Its
//! name is looked at with `lstat` first, so a link, FIFO, device, socket or
//! directory in its place is refused without being followed or opened; the
//! open itself does not follow links and does not block (`O_NOFOLLOW |
//! O_NONBLOCK | O_CLOEXEC | O_NOCTTY`), and the open descriptor is `fstat`ed
//! again, so a swap between the two steps is refused as well. Sizes come from
//! that `fstat` and bound the read ([`super::read_limited`]).
//!
//! The last few packs read by range stay open (packs are immutable): a
//! backup loads its parent's trees one at a time, mostly from one pack, and
//! opening it for each cost three system calls and a path lookup.

use super::{Backend, Entry, Kind, Staged, StagedFile, TMP_PREFIX};
use crate::error::{Error, Result};
use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Packs kept open for range reads.
const OPEN_PACKS: usize = 8;

/// A repository in a local directory.
pub struct LocalBackend {
    root: PathBuf,
    /// The packs read by range most recently, newest first, with the size
    /// their `fstat` gave when opened.
    open_packs: Mutex<VecDeque<(String, Arc<File>, u64)>>,
}

impl LocalBackend {
    /// A backend rooted at `root` (which need not exist yet).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalBackend {
            root: root.into(),
            open_packs: Mutex::default(),
        }
    }

    fn full(&self, kind: Kind, name: &str) -> Result<PathBuf> {
        if name.is_empty() || name.contains('/') || name.contains('\0') || name.starts_with('.') {
            return Err(Error::internal(format!("invalid object name {name:?}")));
        }
        Ok(self.root.join(kind.path(name)))
    }

    fn obj_err(kind: Kind, name: &str, e: std::io::Error) -> Error {
        Error::Backend {
            object: kind.path(name),
            source: e,
        }
    }

    /// The metadata of object `name` (never following a link), which must
    /// be a regular file.
    fn stat_object(&self, kind: Kind, name: &str) -> Result<fs::Metadata> {
        let p = self.full(kind, name)?;
        let md = fs::symlink_metadata(&p).map_err(|e| Self::obj_err(kind, name, e))?;
        if !md.file_type().is_file() {
            return Err(not_regular(kind, name, md.file_type()));
        }
        Ok(md)
    }

    /// Opens object `name` for reading (see the module comment): returns the
    /// file and its size from `fstat`.
    fn open_object(&self, kind: Kind, name: &str) -> Result<(File, u64)> {
        // lstat first: what is not a regular file is never opened at all.
        self.stat_object(kind, name)?;
        let p = self.full(kind, name)?;
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
            .open(&p)
            .map_err(|e| match e.raw_os_error() {
                // Replaced by a link since the lstat.
                Some(libc::ELOOP) => Error::corrupt(kind.path(name), describe_not_regular(None)),
                _ => Self::obj_err(kind, name, e),
            })?;
        let md = f.metadata().map_err(|e| Self::obj_err(kind, name, e))?;
        if !md.file_type().is_file() {
            return Err(not_regular(kind, name, md.file_type()));
        }
        Ok((f, md.len()))
    }

    /// The work of [`Backend::read_range_into`], which empties `buf` if
    /// this fails. `buf` is resized, not cleared, before the read: the read
    /// overwrites every byte it keeps, so only bytes beyond its old length
    /// are zeroed first (a restore's reused 4 MiB buffer was zeroed again
    /// for every read).
    fn read_range_reusing(
        &self,
        kind: Kind,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        let (f, size) = match kind {
            Kind::Pack => self.open_pack(name)?,
            _ => {
                let (f, size) = self.open_object(kind, name)?;
                (Arc::new(f), size)
            }
        };
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(Error::corrupt(
                kind.path(name),
                format!("range {offset}+{len} is beyond the object's {size} bytes"),
            ));
        }
        buf.resize(len as usize, 0);
        f.read_exact_at(buf, offset)
            .map_err(|e| Self::obj_err(kind, name, e))
    }

    /// Opens pack `name` for range reads, or takes it from the packs kept
    /// open.
    fn open_pack(&self, name: &str) -> Result<(Arc<File>, u64)> {
        if let Ok(mut open) = self.open_packs.lock()
            && let Some(i) = open.iter().position(|(n, _, _)| n == name)
            && let Some(hit) = open.remove(i)
        {
            let (f, size) = (Arc::clone(&hit.1), hit.2);
            open.push_front(hit);
            return Ok((f, size));
        }
        let (f, size) = self.open_object(Kind::Pack, name)?;
        let f = Arc::new(f);
        if let Ok(mut open) = self.open_packs.lock() {
            open.push_front((name.to_string(), Arc::clone(&f), size));
            open.truncate(OPEN_PACKS);
        }
        Ok((f, size))
    }
}

/// The error for something other than a regular file in an object's place.
fn not_regular(kind: Kind, name: &str, t: fs::FileType) -> Error {
    Error::corrupt(kind.path(name), describe_not_regular(Some(t)))
}

/// Says what is in an object's place (`None`: a symbolic link).
fn describe_not_regular(t: Option<fs::FileType>) -> String {
    let what = match t {
        None => "a symbolic link",
        Some(t) if t.is_symlink() => "a symbolic link",
        Some(t) if t.is_dir() => "a directory",
        Some(t) if t.is_fifo() => "a FIFO",
        Some(t) if t.is_char_device() => "a character device",
        Some(t) if t.is_block_device() => "a block device",
        Some(t) if t.is_socket() => "a socket",
        Some(_) => "a special file",
    };
    let link = if what == "a symbolic link" {
        " (larder does not follow links to objects)"
    } else {
        ""
    };
    format!("is {what}, not a regular file{link}; not read")
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

impl Backend for LocalBackend {
    fn location(&self) -> String {
        self.root.display().to_string()
    }

    fn create(&self) -> Result<()> {
        if self.root.join("config").exists() {
            return Err(Error::RepositoryExists(self.location()));
        }
        if self.root.exists() {
            let mut entries = Vec::new();
            for e in fs::read_dir(&self.root).map_err(|e| Error::io(&self.root, e))? {
                let e = e.map_err(|e| Error::io(&self.root, e))?;
                let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
                entries.push((e.file_name().to_string_lossy().into_owned(), is_dir));
            }
            let empty = |name: &str| -> Result<bool> {
                let d = self.root.join(name);
                let mut rd = fs::read_dir(&d).map_err(|e| Error::io(&d, e))?;
                Ok(rd.next().is_none())
            };
            if !super::unfinished_layout(&entries, empty)? {
                return Err(Error::Usage(format!(
                    "{} exists and is not empty; refusing to create a repository there",
                    self.location()
                )));
            }
        }
        fs::create_dir_all(&self.root).map_err(|e| Error::io(&self.root, e))?;
        for k in Kind::LISTABLE {
            let d = self.root.join(k.dir());
            fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
        }
        sync_dir(&self.root).map_err(|e| Error::io(&self.root, e))?;
        Ok(())
    }

    fn exists(&self, kind: Kind, name: &str) -> Result<bool> {
        let p = self.full(kind, name)?;
        match fs::symlink_metadata(&p) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Self::obj_err(kind, name, e)),
        }
    }

    fn list(&self, kind: Kind) -> Result<Vec<Entry>> {
        let base = self.root.join(kind.dir());
        let mut dirs = vec![base.clone()];
        if kind == Kind::Pack {
            dirs.clear();
            let rd = match fs::read_dir(&base) {
                Ok(rd) => rd,
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(Error::io(&base, e)),
            };
            for d in rd {
                let d = d.map_err(|e| Error::io(&base, e))?;
                if d.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    dirs.push(d.path());
                }
            }
        }
        let mut out = Vec::new();
        for dir in dirs {
            let rd = match fs::read_dir(&dir) {
                Ok(rd) => rd,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(&dir, e)),
            };
            for ent in rd {
                let ent = ent.map_err(|e| Error::io(&dir, e))?;
                let name = ent.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') {
                    continue;
                }
                // Not following links. Whatever is there is listed (a link,
                // FIFO or directory too), so that readers name it rather than
                // miss it; reads refuse all but regular files.
                let md = match ent.metadata() {
                    Ok(md) => md,
                    // Deleted since the directory was read.
                    Err(e) if e.kind() == ErrorKind::NotFound => continue,
                    Err(e) => return Err(Error::io(ent.path(), e)),
                };
                out.push(Entry {
                    name,
                    size: md.len(),
                });
            }
        }
        Ok(out)
    }

    fn read_bounded(&self, kind: Kind, name: &str, max: u64) -> Result<Vec<u8>> {
        let (f, size) = self.open_object(kind, name)?;
        super::read_limited(&kind.path(name), f, size, max)
    }

    fn read_range(&self, kind: Kind, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.read_range_into(kind, name, offset, len, &mut buf)?;
        Ok(buf)
    }

    fn read_range_into(
        &self,
        kind: Kind,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        let r = self.read_range_reusing(kind, name, offset, len, buf);
        if r.is_err() {
            buf.clear();
        }
        r
    }

    fn size(&self, kind: Kind, name: &str) -> Result<u64> {
        self.stat_object(kind, name).map(|m| m.len())
    }

    fn write(&self, kind: Kind, name: &str, data: &[u8]) -> Result<()> {
        let mut staged = self.stage(kind)?;
        staged.append(data)?;
        self.commit(kind, name, staged)
    }

    /// A temporary file in the kind's directory (skipped by listings).
    fn stage(&self, kind: Kind) -> Result<Staged> {
        let dir = self.root.join(kind.dir());
        if kind == Kind::Pack {
            fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        }
        let mut rnd = [0u8; 8];
        crate::crypto::fill_random(&mut rnd)?;
        let path = dir.join(format!("{TMP_PREFIX}{}", hex::encode(rnd)));
        let create = || OpenOptions::new().write(true).create_new(true).open(&path);
        let file = match create() {
            // A kind's directory that an older format's repository never
            // had (`marks/`, `dicts/`), or that a copy dropped because it
            // was empty, is made on first use, but only in a repository:
            // beside its config (never on the disk under an unmounted
            // one), and never the root itself.
            Err(e)
                if e.kind() == ErrorKind::NotFound
                    && dir != self.root
                    && fs::symlink_metadata(self.root.join("config"))
                        .is_ok_and(|m| m.is_file()) =>
            {
                fs::create_dir(&dir)
                    .or_else(|e| match e.kind() {
                        ErrorKind::AlreadyExists => Ok(()),
                        _ => Err(e),
                    })
                    .and_then(|()| sync_dir(&self.root))
                    .map_err(|e| Error::io(&dir, e))?;
                create()
            }
            r => r,
        }
        .map_err(|e| Error::io(&path, e))?;
        Ok(Staged::File(StagedFile {
            file: Some(file),
            path,
        }))
    }

    /// fsync, hard link into place (refused if the name exists: write-once),
    /// fsync of the directory.
    fn commit(&self, kind: Kind, name: &str, staged: Staged) -> Result<()> {
        let mut staged = match staged {
            Staged::File(f) => f,
            Staged::Memory(v) => return self.write(kind, name, &v),
        };
        let target = self.full(kind, name)?;
        let dir = target
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.root.clone());
        if kind == Kind::Pack {
            fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        }
        let tmp = staged.path.clone();
        let res = (|| -> std::io::Result<bool> {
            if let Some(f) = staged.file.take() {
                f.sync_all()?;
            }
            let created = match fs::hard_link(&tmp, &target) {
                Ok(()) => true,
                Err(e) if e.kind() == ErrorKind::AlreadyExists => false,
                Err(_) => {
                    // Filesystems without hard links: rename, after checking.
                    if target.exists() {
                        false
                    } else {
                        fs::rename(&tmp, &target)?;
                        true
                    }
                }
            };
            sync_dir(&dir)?;
            Ok(created)
        })();
        drop(staged); // removes the temporary name
        match res {
            Ok(true) => Ok(()),
            Ok(false) if kind == Kind::Config => Err(Error::RepositoryExists(self.location())),
            Ok(false) => Ok(()),
            Err(e) => Err(Self::obj_err(kind, name, e)),
        }
    }

    /// A temporary file at the root (the `.tmp-*` name of a config write,
    /// so that one left by a killed run is a leftover), fsynced and renamed
    /// over `config` (an atomic replace on POSIX), then the root fsynced.
    /// The config must be there, a regular file; the temporary file is
    /// removed if anything fails.
    fn replace_config(&self, data: &[u8]) -> Result<()> {
        let (kind, name) = (Kind::Config, "config");
        let target = self.full(kind, name)?;
        match fs::symlink_metadata(&target) {
            Ok(md) if md.file_type().is_file() => {}
            Ok(md) => return Err(not_regular(kind, name, md.file_type())),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(Error::NoRepository(self.location()));
            }
            Err(e) => return Err(Error::io(&target, e)),
        }
        let mut staged = self.stage(kind)?;
        staged.append(data)?;
        let Staged::File(mut staged) = staged else {
            return Err(Error::internal(
                "the local backend staged the config in memory",
            ));
        };
        let tmp = staged.path.clone();
        let res = match staged.file.take() {
            Some(f) => f.sync_all().map_err(|e| Error::io(&tmp, e)),
            None => Err(Error::internal(format!("{} is closed", tmp.display()))),
        }
        .and_then(|()| fs::rename(&tmp, &target).map_err(|e| Error::io(&target, e)));
        // Removes the temporary name if the rename did not happen.
        drop(staged);
        res?;
        sync_dir(&self.root).map_err(|e| Error::io(&self.root, e))
    }

    fn delete(&self, kind: Kind, name: &str) -> Result<()> {
        let p = self.full(kind, name)?;
        if kind == Kind::Pack
            && let Ok(mut open) = self.open_packs.lock()
        {
            open.retain(|(n, _, _)| n != name);
        }
        match fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(Self::obj_err(kind, name, e)),
        }
        if let Some(d) = p.parent() {
            let _ = sync_dir(d);
        }
        Ok(())
    }

    /// The object's mtime against the mtime of a probe file created beside
    /// it (see `storage_now`): both stamped by whatever sets times on this
    /// filesystem (the kernel, or the server of a network filesystem).
    /// The `.tmp-*` files in every object directory (packs' fan-out
    /// directories included) and at the root, as paths relative to the
    /// root.
    fn leftovers(&self) -> Result<Vec<String>> {
        let mut dirs: Vec<PathBuf> = Kind::LISTABLE
            .iter()
            .map(|k| self.root.join(k.dir()))
            .collect();
        if let Ok(rd) = fs::read_dir(self.root.join(Kind::Pack.dir())) {
            for d in rd.flatten() {
                if d.file_type().is_ok_and(|t| t.is_dir()) {
                    dirs.push(d.path());
                }
            }
        }
        // The root: a killed `init`'s config write (the files only; no
        // writer makes directories there).
        dirs.push(self.root.clone());
        let mut out = Vec::new();
        for dir in dirs {
            let Ok(rd) = fs::read_dir(&dir) else { continue };
            for ent in rd.flatten() {
                let name = ent.file_name().to_string_lossy().into_owned();
                if name.starts_with(TMP_PREFIX)
                    && !(dir == self.root && ent.file_type().is_ok_and(|t| t.is_dir()))
                    && let Ok(rel) = ent.path().strip_prefix(&self.root)
                {
                    out.push(rel.display().to_string());
                }
            }
        }
        out.sort();
        Ok(out)
    }

    fn remove_leftover(&self, name: &str) -> Result<()> {
        let rel = Path::new(name);
        let ok = rel
            .file_name()
            .is_some_and(|f| f.to_string_lossy().starts_with(TMP_PREFIX))
            && rel
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !ok {
            return Err(Error::internal(format!("{name:?} is not a leftover")));
        }
        let p = self.root.join(rel);
        match fs::remove_file(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(&p, e)),
        }
    }

    fn age(&self, kind: Kind, name: &str) -> Result<Option<std::time::Duration>> {
        let p = self.full(kind, name)?;
        let now = storage_now(&self.root.join(kind.dir()))?;
        let modified = fs::symlink_metadata(&p)
            .and_then(|m| m.modified())
            .map_err(|e| Self::obj_err(kind, name, e))?;
        // An object stamped after the probe (another writer's clock) is new.
        Ok(Some(now.duration_since(modified).unwrap_or_default()))
    }
}

/// Prefix of the probe files [`storage_now`] creates; listings skip them.
const PROBE_PREFIX: &str = ".probe-";

/// The filesystem's notion of now in `dir`: the mtime it gives a new,
/// empty probe file, which is removed again.
fn storage_now(dir: &Path) -> Result<std::time::SystemTime> {
    let mut rnd = [0u8; 8];
    crate::crypto::fill_random(&mut rnd)?;
    let path = dir.join(format!("{PROBE_PREFIX}{}", hex::encode(rnd)));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    let now = file.metadata().and_then(|m| m.modified());
    drop(file);
    // A probe left behind (removal failed) is skipped by listings.
    let _ = fs::remove_file(&path);
    now.map_err(|e| Error::io(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend() -> (tempfile::TempDir, LocalBackend) {
        let d = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(d.path().join("repo"));
        b.create().unwrap();
        b.write(Kind::Snapshot, "good", b"hello").unwrap();
        (d, b)
    }

    /// `create` goes ahead in a missing or empty directory and in what an
    /// `init` stopped before its config leaves (the layout, key files and
    /// temporaries in `keys/`, a config write's temporary at the root); it
    /// refuses a directory holding
    /// anything else, the layout with any other object in it, and a
    /// repository.
    #[test]
    fn create_goes_ahead_only_over_an_unfinished_init() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("repo");
        let b = LocalBackend::new(root.clone());
        b.create().unwrap();
        b.write(Kind::Key, &"1".repeat(64), b"a key").unwrap();
        fs::write(root.join("keys").join(".tmp-killed"), b"half a key").unwrap();
        fs::write(root.join(".tmp-config"), b"half a config").unwrap();
        b.create().unwrap();
        assert!(root.join("keys").join("1".repeat(64)).exists());
        assert!(!root.join("config").exists());
        let refused = |what: &str| {
            let e = b.create().unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{what}: {e}");
            assert!(e.to_string().contains("not empty"), "{what}: {e}");
        };
        fs::write(root.join("notes.txt"), b"mine").unwrap();
        refused("a file beside the layout");
        fs::remove_file(root.join("notes.txt")).unwrap();
        fs::create_dir(root.join("photos")).unwrap();
        refused("another directory beside the layout");
        fs::remove_dir(root.join("photos")).unwrap();
        fs::create_dir(root.join(".tmp-dir")).unwrap();
        refused("a directory named as a temporary");
        fs::remove_dir(root.join(".tmp-dir")).unwrap();
        for kind in [
            Kind::Snapshot,
            Kind::Index,
            Kind::Lock,
            Kind::Mark,
            Kind::Dict,
        ] {
            let name = "2".repeat(64);
            b.write(kind, &name, b"x").unwrap();
            refused(&format!("an object in {}", kind.dir()));
            b.delete(kind, &name).unwrap();
        }
        fs::create_dir(root.join("packs").join("ab")).unwrap();
        refused("a directory in packs");
        fs::remove_dir(root.join("packs").join("ab")).unwrap();
        fs::remove_dir(root.join("dicts")).unwrap();
        std::os::unix::fs::symlink(d.path(), root.join("dicts")).unwrap();
        refused("a link in a layout directory's place");
        fs::remove_file(root.join("dicts")).unwrap();
        b.create().unwrap();
        b.write(Kind::Config, "config", b"config").unwrap();
        let e = b.create().unwrap_err();
        assert!(matches!(e, Error::RepositoryExists(_)), "{e}");
    }

    /// A kind's missing directory (one an older format never had) is made
    /// on its first write, but only beside a config: never on a disk
    /// where the repository is not (an unmounted one's mount point).
    #[test]
    fn a_missing_kind_directory_is_made_only_in_a_repository() {
        let (d, b) = backend();
        let root = d.path().join("repo");
        fs::remove_dir_all(root.join("dicts")).unwrap();
        let e = b.write(Kind::Dict, "d1", b"dict").unwrap_err();
        assert!(e.to_string().contains("dicts"), "{e}");
        assert!(!root.join("dicts").exists(), "made without a config");
        b.write(Kind::Config, "config", b"config").unwrap();
        b.write(Kind::Dict, "d1", b"dict").unwrap();
        assert_eq!(fs::read(root.join("dicts/d1")).unwrap(), b"dict");
        let gone = LocalBackend::new(d.path().join("gone"));
        assert!(gone.write(Kind::Lock, "l1", b"lock").is_err());
        assert!(!d.path().join("gone").exists(), "a missing root was made");
    }

    #[test]
    fn leftovers_are_temporaries_in_object_directories_and_at_the_root() {
        let (d, b) = backend();
        let root = d.path().join("repo");
        fs::write(root.join(".tmp-0011"), b"a killed config write").unwrap();
        fs::create_dir(root.join(".tmp-dir")).unwrap();
        fs::write(root.join("index/.tmp-2233"), b"half a segment").unwrap();
        fs::create_dir_all(root.join("packs/ab")).unwrap();
        fs::write(root.join("packs/ab/.tmp-4455"), b"half a pack").unwrap();
        let found = b.leftovers().unwrap();
        assert_eq!(
            found,
            [".tmp-0011", "index/.tmp-2233", "packs/ab/.tmp-4455"]
        );
        for l in &found {
            b.remove_leftover(l).unwrap();
        }
        assert!(b.leftovers().unwrap().is_empty());
        // Not a write's: kept, as is everything that is not a temporary.
        assert!(root.join(".tmp-dir").is_dir());
        assert_eq!(
            b.read_bounded(Kind::Snapshot, "good", 10).unwrap(),
            b"hello"
        );
        for bad in ["../x/.tmp-1", "/etc/.tmp-1", "index/segment"] {
            assert!(b.remove_leftover(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn whole_reads_are_bounded_by_the_caller() {
        let (_d, b) = backend();
        assert_eq!(b.read_bounded(Kind::Snapshot, "good", 5).unwrap(), b"hello");
        let e = b.read_bounded(Kind::Snapshot, "good", 4).unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains("snapshots/good"), "{e}");
        assert!(e.to_string().contains("5 bytes is more than the 4"), "{e}");
    }

    /// Range reads of packs go through descriptors kept open: the bytes
    /// are the same as an open per read, bounds are still checked against
    /// the size, and a pack deleted through the backend is not read again.
    #[test]
    fn packs_kept_open_read_the_same_and_forget_deleted_ones() {
        let (_d, b) = backend();
        let names: Vec<String> = (0..OPEN_PACKS + 2).map(|i| format!("{i:064x}")).collect();
        for (i, n) in names.iter().enumerate() {
            b.write(Kind::Pack, n, format!("pack number {i:04}").as_bytes())
                .unwrap();
        }
        for _ in 0..2 {
            for (i, n) in names.iter().enumerate() {
                let got = b.read_range(Kind::Pack, n, 12, 4).unwrap();
                assert_eq!(got, format!("{i:04}").as_bytes());
            }
        }
        assert!(b.open_packs.lock().unwrap().len() <= OPEN_PACKS);
        let last = names.last().unwrap();
        let e = b.read_range(Kind::Pack, last, 12, 5).unwrap_err();
        assert!(
            e.to_string().contains("beyond the object's 16 bytes"),
            "{e}"
        );
        b.delete(Kind::Pack, last).unwrap();
        let e = b.read_range(Kind::Pack, last, 0, 4).unwrap_err();
        assert!(e.to_string().contains(last.as_str()), "{e}");

        // Into a reused buffer: its old bytes are replaced, whatever its
        // length; a refused read leaves it empty.
        let mut buf = b"left over from before".to_vec();
        b.read_range_into(Kind::Pack, &names[1], 0, 4, &mut buf)
            .unwrap();
        assert_eq!(buf, b"pack");
        b.read_range_into(Kind::Pack, &names[2], 5, 11, &mut buf)
            .unwrap();
        assert_eq!(buf, b"number 0002");
        assert!(
            b.read_range_into(Kind::Pack, &names[2], 12, 5, &mut buf)
                .is_err()
        );
        assert!(buf.is_empty());
    }

    /// Every read refuses a link (even to a good object), a FIFO and a
    /// directory without following, opening or waiting on it; listings
    /// show them so that readers can say so.
    #[test]
    fn only_regular_files_are_read() {
        let (d, b) = backend();
        let snaps = d.path().join("repo/snapshots");
        std::os::unix::fs::symlink(snaps.join("good"), snaps.join("link")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", snaps.join("zero")).unwrap();
        nix::unistd::mkfifo(&snaps.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        fs::create_dir(snaps.join("dir")).unwrap();
        for (name, what) in [
            ("link", "a symbolic link"),
            ("zero", "a symbolic link"),
            ("fifo", "a FIFO"),
            ("dir", "a directory"),
        ] {
            let errs = [
                b.read_bounded(Kind::Snapshot, name, 1 << 20).unwrap_err(),
                b.read_range(Kind::Snapshot, name, 0, 1).unwrap_err(),
                b.size(Kind::Snapshot, name).unwrap_err(),
            ];
            for e in errs {
                assert!(matches!(e, Error::Corrupt { .. }), "{name}: {e}");
                let s = e.to_string();
                assert!(s.contains(&format!("snapshots/{name}")), "{s}");
                assert!(s.contains(&format!("is {what}, not a regular file")), "{s}");
            }
            assert!(b.exists(Kind::Snapshot, name).unwrap());
        }
        let mut listed: Vec<String> = b
            .list(Kind::Snapshot)
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        listed.sort();
        assert_eq!(listed, ["dir", "fifo", "good", "link", "zero"]);
    }

    /// `replace_config` swaps the whole config (longer or shorter bytes)
    /// and leaves no temporary file; where there is no config (an empty
    /// directory, a missing one, a layout an unfinished `init` left) it
    /// refuses with `NoRepository` and creates nothing; a link in the
    /// config's place is refused and left alone.
    #[test]
    fn replace_config_swaps_an_existing_config_only() {
        let (d, b) = backend();
        let root = d.path().join("repo");
        let root_names = |dir: &Path| -> Vec<String> {
            let mut v: Vec<String> = fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        b.write(Kind::Config, "config", b"the old config").unwrap();
        let before = root_names(&root);
        for new in [&b"the new config, longer than the old"[..], b"short"] {
            b.replace_config(new).unwrap();
            assert_eq!(b.read_bounded(Kind::Config, "config", 100).unwrap(), new);
            assert_eq!(root_names(&root), before, "nothing but the config changed");
            assert!(b.leftovers().unwrap().is_empty());
        }

        let empty = d.path().join("empty");
        fs::create_dir(&empty).unwrap();
        let fresh = d.path().join("fresh");
        LocalBackend::new(&fresh).create().unwrap();
        let fresh_names = root_names(&fresh);
        for (dir, names) in [(&empty, vec![]), (&fresh, fresh_names)] {
            let nb = LocalBackend::new(dir);
            let e = nb.replace_config(b"a config").unwrap_err();
            assert!(matches!(e, Error::NoRepository(_)), "{e}");
            assert!(e.to_string().contains(&dir.display().to_string()), "{e}");
            assert_eq!(root_names(dir), names, "nothing created in {dir:?}");
        }
        let missing = d.path().join("missing");
        let e = LocalBackend::new(&missing)
            .replace_config(b"a config")
            .unwrap_err();
        assert!(matches!(e, Error::NoRepository(_)), "{e}");
        assert!(!missing.exists());

        fs::remove_file(root.join("config")).unwrap();
        std::os::unix::fs::symlink(root.join("snapshots/good"), root.join("config")).unwrap();
        let e = b.replace_config(b"a config").unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }), "{e}");
        assert!(
            fs::symlink_metadata(root.join("config"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(
            b.read_bounded(Kind::Snapshot, "good", 10).unwrap(),
            b"hello"
        );
        assert!(b.leftovers().unwrap().is_empty());
    }

    #[test]
    fn ranges_beyond_the_object_are_refused() {
        let (_d, b) = backend();
        assert_eq!(b.read_range(Kind::Snapshot, "good", 1, 3).unwrap(), b"ell");
        let e = b.read_range(Kind::Snapshot, "good", 3, 3).unwrap_err();
        assert!(e.to_string().contains("beyond the object's 5 bytes"), "{e}");
        assert_eq!(b.size(Kind::Snapshot, "good").unwrap(), 5);
    }
}
