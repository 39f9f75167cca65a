//! The local-filesystem backend. Writes go to a temporary file in the target
//! directory, are fsynced, linked into place (which fails if the name exists,
//! giving write-once semantics) and the directory is fsynced, so a crash at
//! any point leaves either no object or the whole object.

use super::{Backend, Entry, Kind, Staged, StagedFile};
use crate::error::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Prefix of in-flight temporary files; listings skip them.
const TMP_PREFIX: &str = ".tmp-";

/// A repository in a local directory.
pub struct LocalBackend {
    root: PathBuf,
}

impl LocalBackend {
    /// A backend rooted at `root` (which need not exist yet).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalBackend { root: root.into() }
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
            let mut entries = fs::read_dir(&self.root).map_err(|e| Error::io(&self.root, e))?;
            if entries.next().is_some() {
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
                let md = ent.metadata().map_err(|e| Error::io(ent.path(), e))?;
                if md.is_file() {
                    out.push(Entry {
                        name,
                        size: md.len(),
                    });
                }
            }
        }
        Ok(out)
    }

    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>> {
        let p = self.full(kind, name)?;
        fs::read(&p).map_err(|e| Self::obj_err(kind, name, e))
    }

    fn read_range(&self, kind: Kind, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let p = self.full(kind, name)?;
        let f = File::open(&p).map_err(|e| Self::obj_err(kind, name, e))?;
        let size = f
            .metadata()
            .map_err(|e| Self::obj_err(kind, name, e))?
            .len();
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(Error::corrupt(
                kind.path(name),
                format!("range {offset}+{len} is beyond the object's {size} bytes"),
            ));
        }
        let mut buf = vec![0u8; len as usize];
        f.read_exact_at(&mut buf, offset)
            .map_err(|e| Self::obj_err(kind, name, e))?;
        Ok(buf)
    }

    fn size(&self, kind: Kind, name: &str) -> Result<u64> {
        let p = self.full(kind, name)?;
        fs::metadata(&p)
            .map(|m| m.len())
            .map_err(|e| Self::obj_err(kind, name, e))
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
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
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

    fn delete(&self, kind: Kind, name: &str) -> Result<()> {
        let p = self.full(kind, name)?;
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
