//! Storage backends: the narrow trait every layer above talks to, and its
//! implementations. The trait knows objects, not files: list a kind, read an
//! object whole (never more than a limit the caller gives) or a range of it,
//! write an object once, delete it. There is no rename and no directory above
//! this line, so an object store fits later.
//!
//! Storage is untrusted: every read is bounded before it starts, and a
//! backend serves only plain stored objects (the local one refuses links,
//! FIFOs, devices and directories without opening or following them).

pub mod http;
mod local;
pub mod location;
mod rclone;
mod rest;
pub mod retry;
mod s3;
pub mod sftp;

pub use http::RemoteOptions;
pub use local::LocalBackend;
pub use location::Location;
pub use rest::RestBackend;
pub use s3::S3Backend;
pub use sftp::{SftpBackend, SftpTarget};

use crate::error::{Error, Result};
use std::io::{Read, Write};
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

/// Stages an object in a file of `dir`, removed when dropped (remote
/// backends: a pack waiting for its upload costs disk, not memory).
pub(crate) fn stage_in_temp(dir: &std::path::Path) -> Result<Staged> {
    let mut rnd = [0u8; 8];
    crate::crypto::fill_random(&mut rnd)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let path = dir.join(format!("larder-staged-{}", hex::encode(rnd)));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    Ok(Staged::File(StagedFile {
        file: Some(file),
        path,
    }))
}

/// A staged object as a request body: its file (and length), or its bytes
/// in `held` (filled here for one staged in memory).
pub(crate) fn staged_body<'a>(
    staged: &'a mut Staged,
    held: &'a mut Vec<u8>,
) -> Result<http::Body<'a>> {
    match staged {
        Staged::Memory(v) => {
            *held = std::mem::take(v);
            Ok(http::Body::Bytes(held))
        }
        Staged::File(f) => {
            let path = f.path.clone();
            let file = f
                .file
                .as_ref()
                .ok_or_else(|| Error::internal(format!("{} is closed", path.display())))?;
            let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
            Ok(http::Body::File(file, len))
        }
    }
}

/// The bytes of a staged object, read back from its file if it has one
/// (the file is removed when `staged` is dropped).
pub(crate) fn staged_bytes(staged: Staged) -> Result<Vec<u8>> {
    use std::io::Seek;
    match staged {
        Staged::Memory(v) => Ok(v),
        Staged::File(mut f) => {
            let path = f.path.clone();
            let mut file = f
                .file
                .take()
                .ok_or_else(|| Error::internal(format!("{} is closed", path.display())))?;
            let mut v = Vec::new();
            file.seek(std::io::SeekFrom::Start(0))
                .and_then(|_| file.read_to_end(&mut v))
                .map_err(|e| Error::io(&path, e))?;
            Ok(v)
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
    /// Prune's deletion marks.
    Mark,
    /// Compression dictionaries.
    Dict,
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
            Kind::Mark => "marks",
            Kind::Dict => "dicts",
        }
    }

    /// Every kind that lives in a directory.
    pub const LISTABLE: [Kind; 7] = [
        Kind::Key,
        Kind::Pack,
        Kind::Index,
        Kind::Snapshot,
        Kind::Lock,
        Kind::Mark,
        Kind::Dict,
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

/// Prefix of in-flight temporary files and uploads, in the directory of the
/// object they become; listings skip them.
pub(crate) const TMP_PREFIX: &str = ".tmp-";

/// Whether the entries at a would-be repository's root (each a name and
/// whether it is a directory) are what an `init` stopped before writing
/// the config leaves: nothing but the layout's directories, each empty
/// except `keys/` (`is_empty` says, by name), and the temporary files of a
/// config write it was killed in (`.tmp-*`). `create` goes ahead there, so
/// an interrupted `init` can simply be run again; it refuses anything
/// else, so `init` never writes among other files, nor into a repository
/// that lost its config but still holds data.
pub fn unfinished_layout<E>(
    entries: &[(String, bool)],
    mut is_empty: impl FnMut(&str) -> std::result::Result<bool, E>,
) -> std::result::Result<bool, E> {
    for (name, is_dir) in entries {
        if !*is_dir && name.starts_with(TMP_PREFIX) {
            continue;
        }
        if !*is_dir || !Kind::LISTABLE.iter().any(|k| k.dir() == name) {
            return Ok(false);
        }
        if name != Kind::Key.dir() && !is_empty(name)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Storage for repository objects. Every error names the object.
///
/// Reads serve only plain stored objects: what a backend finds in an object's
/// place that is not one (a local link, FIFO, device or directory) is
/// refused as [`Error::Corrupt`], naming the object and what is there, and
/// is never followed, opened for reading or waited on.
pub trait Backend: Send + Sync {
    /// A human-readable location ("/srv/repo").
    fn location(&self) -> String;
    /// Creates the empty layout; fails if a repository is already there,
    /// or anything but what an unfinished `init` leaves
    /// ([`unfinished_layout`]).
    fn create(&self) -> Result<()>;
    /// Whether object `name` of `kind` exists.
    fn exists(&self, kind: Kind, name: &str) -> Result<bool>;
    /// All objects of `kind` (unordered), with the sizes the storage reports.
    /// Whatever sits under an object name is listed, even if reads will
    /// refuse it, so that readers name it instead of missing it silently.
    fn list(&self, kind: Kind) -> Result<Vec<Entry>>;
    /// The whole object, at most `max` bytes: repository bytes are untrusted
    /// and must not cost unbounded memory or time. An object the storage
    /// says is larger is refused before anything is read; one that turns out
    /// larger while being read (it grew, or its reported size lied) is
    /// refused after `max + 1` bytes. See [`read_limited`].
    fn read_bounded(&self, kind: Kind, name: &str, max: u64) -> Result<Vec<u8>>;
    /// `len` bytes at `offset`; an error if the object is shorter. The caller
    /// bounds `len` (by the index or a pack trailer it has checked).
    fn read_range(&self, kind: Kind, name: &str, offset: u64, len: u64) -> Result<Vec<u8>>;
    /// [`Backend::read_range`] into `buf` (its contents replaced), for a
    /// caller that reuses one buffer for many reads. On failure `buf` holds
    /// nothing read.
    fn read_range_into(
        &self,
        kind: Kind,
        name: &str,
        offset: u64,
        len: u64,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        *buf = self.read_range(kind, name, offset, len)?;
        Ok(())
    }
    /// Size of the object in bytes, as the storage reports it.
    fn size(&self, kind: Kind, name: &str) -> Result<u64>;
    /// Writes the object durably and atomically, once. Writing an object that
    /// already exists is an error for `Config` and a no-op for the
    /// content-addressed kinds (same name, same bytes).
    fn write(&self, kind: Kind, name: &str, data: &[u8]) -> Result<()>;
    /// Removes the object.
    fn delete(&self, kind: Kind, name: &str) -> Result<()>;
    /// Replaces the existing config with `data`, atomically: a reader sees
    /// the old bytes or the new, never neither and never a mix. The config
    /// is the one object ever rewritten, and only by `migrate`
    /// (repo-format/SPEC.md, section 4). Storage that cannot do it
    /// atomically refuses, by default.
    fn replace_config(&self, data: &[u8]) -> Result<()> {
        let _ = data;
        Err(crate::error::Error::Usage(format!(
            "{}: this storage cannot replace the config atomically, so larder will not migrate it here",
            self.location()
        )))
    }

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

    /// What interrupted writes left behind (for the local backend, the
    /// `.tmp-*` files of killed runs), as names [`Backend::remove_leftover`]
    /// takes. A live writer's objects in progress are listed too: only a
    /// caller that knows no live run can own them (prune, through its
    /// deletion marks) may remove them. None by default.
    fn leftovers(&self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    /// Removes one of [`Backend::leftovers`]; one already gone is fine.
    fn remove_leftover(&self, name: &str) -> Result<()> {
        let _ = name;
        Ok(())
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

    /// How many requests this backend serves well at once (`--connections`
    /// for remote ones); `None`: the caller's own default.
    fn connections(&self) -> Option<usize> {
        None
    }

    /// Requests made to the storage so far, for backends that count them.
    fn requests(&self) -> Option<u64> {
        None
    }

    /// `Ok` if this backend may delete objects; an error saying why not
    /// (an append-only server) otherwise. Commands that delete (forget,
    /// prune) ask before changing anything.
    fn check_deletable(&self) -> Result<()> {
        Ok(())
    }
}

/// The backend for a repository string ([`Location`]): a local directory,
/// `rest:…`, `s3:…` or `sftp:…`.
pub fn open(repo: &std::path::Path, opts: &RemoteOptions) -> Result<Box<dyn Backend>> {
    let loc = Location::parse(repo)?;
    let shown = loc.display();
    Ok(match &loc {
        Location::Local(p) => Box::new(LocalBackend::new(p)),
        Location::Rest(r) => Box::new(RestBackend::new(r, shown, opts)),
        Location::Rclone(remote) => {
            let (server, at) = rclone::start(remote, opts.timeout)?;
            Box::new(RestBackend::new(&at, shown, opts).with_server(server))
        }
        Location::S3(s) => Box::new(S3Backend::new(s, shown, opts)?),
        Location::Sftp(t) => Box::new(SftpBackend::new(t.clone())?.with_transfer(opts)),
    })
}

/// Reads `object`, whose storage reports `reported` bytes, from `source`,
/// allowing at most `max` bytes: a reported size over `max` is refused
/// before reading; the buffer is allocated once at the reported size (it
/// never grows), at most `reported + 1` bytes are read, so an object that
/// grows or whose reported size lies costs no more than that; and a length
/// other than the reported one is refused. Every backend's
/// [`Backend::read_bounded`] ends here.
pub fn read_limited(
    object: &str,
    mut source: impl Read,
    reported: u64,
    max: u64,
) -> Result<Vec<u8>> {
    if reported > max {
        return Err(Error::corrupt(
            object,
            format!(
                "{reported} bytes is more than the {max} bytes such an object may have; not read"
            ),
        ));
    }
    let backend_err = |source| Error::Backend {
        object: object.to_string(),
        source,
    };
    let len = usize::try_from(reported)
        .map_err(|_| backend_err(std::io::ErrorKind::OutOfMemory.into()))?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(len)
        .map_err(|_| backend_err(std::io::ErrorKind::OutOfMemory.into()))?;
    buf.resize(len, 0);
    let mut got = 0;
    while got < len {
        match source.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(backend_err(e)),
        }
    }
    if got < len {
        return Err(Error::corrupt(
            object,
            format!("{got} bytes read where the storage reported {reported} (changed while read?)"),
        ));
    }
    // One probe byte past the end tells an object that grew or lied.
    let mut probe = [0u8; 1];
    let extra = loop {
        match source.read(&mut probe) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            other => break other.map_err(backend_err)?,
        }
    };
    if extra > 0 {
        return Err(Error::corrupt(
            object,
            format!(
                "more than the {reported} bytes the storage reported (changed while read, or a lying size); stopped reading"
            ),
        ));
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_limited_reads_what_was_reported() {
        let v = read_limited("config", &b"abcdef"[..], 6, 6).unwrap();
        assert_eq!(v, b"abcdef");
    }

    #[test]
    fn read_limited_refuses_a_reported_size_over_the_limit_unread() {
        // A reader that fails if touched proves nothing was read.
        struct Untouchable;
        impl Read for Untouchable {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                panic!("read before the size was checked")
            }
        }
        let e = read_limited("keys/ab", Untouchable, 11, 10).unwrap_err();
        assert!(e.to_string().contains("keys/ab"), "{e}");
        assert!(
            e.to_string().contains("11 bytes is more than the 10"),
            "{e}"
        );
    }

    #[test]
    fn read_limited_stops_an_endless_source_one_byte_past_the_report() {
        // The storage says 10 bytes and then never stops (a lying size, a
        // growing file, /dev/zero): at most reported + 1 bytes are read.
        let mut src = std::io::repeat(7).take(u64::MAX);
        let e = read_limited("config", &mut src, 10, 1000).unwrap_err();
        assert!(e.to_string().contains("config"), "{e}");
        assert!(
            e.to_string()
                .contains("more than the 10 bytes the storage reported"),
            "{e}"
        );
        assert_eq!(src.limit(), u64::MAX - 11);
    }

    #[test]
    fn read_limited_never_grows_its_buffer() {
        let v = read_limited("packs/ab", std::io::repeat(1).take(4096), 4096, 1 << 20).unwrap();
        assert_eq!(v.len(), 4096);
        assert_eq!(
            v.capacity(),
            4096,
            "the buffer was allocated once, at the reported size"
        );
    }

    #[test]
    fn read_limited_refuses_a_length_other_than_reported() {
        let e = read_limited("index/aa", &b"abc"[..], 5, 10).unwrap_err();
        assert!(
            e.to_string()
                .contains("3 bytes read where the storage reported 5"),
            "{e}"
        );
        let e = read_limited("index/aa", &b"abcdef"[..], 5, 10).unwrap_err();
        assert!(
            e.to_string()
                .contains("more than the 5 bytes the storage reported"),
            "{e}"
        );
    }
}
