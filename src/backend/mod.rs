//! Storage backends: the narrow trait every layer above talks to, and its
//! implementations. The trait knows objects, not files: list a kind, read an
//! object whole or a range of it, write an object once, delete it. There is
//! no rename and no directory above this line, so an object store fits later.

mod local;

pub use local::LocalBackend;

use crate::error::{Error, Result};
use std::io::Write;
use std::path::PathBuf;

/// An object being written (see [`Backend::stage`]).
pub enum Staged {
    /// Held in memory until committed.
    Memory(Vec<u8>),
    /// Written to a temporary file as it grows.
    File(StagedFile),
}

/// A temporary file holding a staged object; removed if dropped uncommitted.
pub struct StagedFile {
    pub(crate) file: Option<std::fs::File>,
    pub(crate) path: PathBuf,
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        drop(self.file.take());
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Staged {
    /// Appends bytes to the object.
    pub fn append(&mut self, data: &[u8]) -> Result<()> {
        match self {
            Staged::Memory(v) => v.extend_from_slice(data),
            Staged::File(f) => match &mut f.file {
                Some(file) => file.write_all(data).map_err(|e| Error::io(&f.path, e))?,
                None => return Err(Error::internal(format!("{} is closed", f.path.display()))),
            },
        }
        Ok(())
    }

    /// The bytes of an object staged in memory (None for one in a file).
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Staged::Memory(v) => Some(v),
            Staged::File(_) => None,
        }
    }
}

/// The kinds of object a repository holds, each in its own namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Config,
    Key,
    Pack,
    Index,
    Snapshot,
    Lock,
}

impl Kind {
    /// The directory (or key prefix) of this kind.
    pub fn dir(self) -> &'static str {
        match self {
            Kind::Config => "",
            Kind::Key => "keys",
            Kind::Pack => "packs",
            Kind::Index => "index",
            Kind::Snapshot => "snapshots",
            Kind::Lock => "locks",
        }
    }

    /// Every kind that lives in a directory.
    pub const LISTABLE: [Kind; 5] = [
        Kind::Key,
        Kind::Pack,
        Kind::Index,
        Kind::Snapshot,
        Kind::Lock,
    ];

    /// The path of object `name` of this kind, relative to the repository root.
    /// Packs fan out into 256 subdirectories by their first two hex digits.
    pub fn path(self, name: &str) -> String {
        match self {
            Kind::Config => "config".to_string(),
            Kind::Pack => {
                let p = name.get(..2).unwrap_or("00");
                format!("packs/{p}/{name}")
            }
            k => format!("{}/{name}", k.dir()),
        }
    }
}

/// One listed object: its name and size in bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub size: u64,
}

/// Storage for repository objects. Every error names the object.
pub trait Backend: Send + Sync {
    /// A human-readable location ("/srv/repo").
    fn location(&self) -> String;
    /// Creates the empty layout; fails if a repository is already there.
    fn create(&self) -> Result<()>;
    /// Whether object `name` of `kind` exists.
    fn exists(&self, kind: Kind, name: &str) -> Result<bool>;
    /// All objects of `kind` (unordered).
    fn list(&self, kind: Kind) -> Result<Vec<Entry>>;
    /// The whole object.
    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>>;
    /// `len` bytes at `offset`; an error if the object is shorter.
    fn read_range(&self, kind: Kind, name: &str, offset: u64, len: u64) -> Result<Vec<u8>>;
    /// Size of the object in bytes.
    fn size(&self, kind: Kind, name: &str) -> Result<u64>;
    /// Writes the object durably and atomically, once. Writing an object that
    /// already exists is an error for `Config` and a no-op for the
    /// content-addressed kinds (same name, same bytes).
    fn write(&self, kind: Kind, name: &str, data: &[u8]) -> Result<()>;
    /// Removes the object.
    fn delete(&self, kind: Kind, name: &str) -> Result<()>;

    /// Starts an object of `kind` that is written piece by piece
    /// ([`Staged::append`]) and named by [`Backend::commit`], so a large
    /// object (a pack) need not be held in memory. By default it is.
    fn stage(&self, kind: Kind) -> Result<Staged> {
        let _ = kind;
        Ok(Staged::Memory(Vec::new()))
    }

    /// Makes a staged object durable under `name`, with the semantics of
    /// [`Backend::write`]. An uncommitted staged object leaves nothing.
    fn commit(&self, kind: Kind, name: &str, staged: Staged) -> Result<()> {
        match staged {
            Staged::Memory(v) => self.write(kind, name, &v),
            Staged::File(f) => Err(crate::error::Error::Internal(format!(
                "{} was not staged by this backend",
                f.path.display()
            ))),
        }
    }

    /// The whole object, refusing (before reading it) one larger than `max`
    /// bytes: repository bytes are untrusted and must not cost unbounded memory.
    fn read_bounded(&self, kind: Kind, name: &str, max: u64) -> Result<Vec<u8>> {
        let size = self.size(kind, name)?;
        if size > max {
            return Err(crate::error::Error::corrupt(
                kind.path(name),
                format!("{size} bytes is more than the {max} bytes such an object may have"),
            ));
        }
        self.read(kind, name)
    }

    /// How long ago object `name` was last written, measured by the
    /// storage's own clock alone: the object's modification time against the
    /// storage's notion of now (never against this host's clock, which may
    /// be skewed). Locks use it to tell a dead holder from a live one.
    /// `Ok(None)`: this backend cannot say (the default); the lock module
    /// then falls back to how long this host has seen the object unchanged
    /// (see `lock::stale`). An error of kind `NotFound` if there is no such
    /// object.
    fn age(&self, kind: Kind, name: &str) -> Result<Option<std::time::Duration>> {
        let _ = (kind, name);
        Ok(None)
    }
}
