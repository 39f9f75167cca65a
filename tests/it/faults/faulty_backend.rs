//! A test backend: the local one, with one chosen write failing. Every
//! object written (`write`, and `commit` of a staged one) counts as one
//! write; the failing one fails before anything is stored (EIO), stores
//! half of its bytes under a temporary name and then fails (a short write,
//! as a disk that fills or fails midway gives), or stores the object and
//! then fails or is tried again (a reply lost on the way back). Staged
//! objects are held in memory until committed, so the failing write sees
//! all bytes.

use larder::backend::{Backend, Entry, Kind, LocalBackend, Staged};
use larder::{Error, Result};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How the chosen write fails.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// Fails with EIO; nothing is stored.
    Eio,
    /// Half the bytes reach a temporary file, then the write fails.
    Short,
    /// The object is stored, then the write fails with EIO all the same
    /// (a reply lost after the storage took the object).
    Landed,
    /// The object is stored; then the write is tried again, and that try
    /// finds it there (for the config: `RepositoryExists`), as a retry
    /// after a lost reply does.
    Retried,
}

pub struct FaultyBackend {
    inner: LocalBackend,
    /// The 1-based number of the write that fails, if any.
    fail_at: Option<usize>,
    fault: Fault,
    writes: AtomicUsize,
    /// The object of each write, in order.
    pub log: Mutex<Vec<String>>,
}

impl FaultyBackend {
    pub fn new(root: impl Into<PathBuf>, fail_at: Option<usize>, fault: Fault) -> Self {
        FaultyBackend {
            inner: LocalBackend::new(root),
            fail_at,
            fault,
            writes: AtomicUsize::new(0),
            log: Mutex::new(Vec::new()),
        }
    }

    /// Writes attempted so far.
    pub fn writes(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }

    /// Stores `data` as object `name`, unless this is the write chosen to fail.
    fn store(&self, kind: Kind, name: &str, data: &[u8]) -> Result<()> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        self.log.lock().unwrap().push(kind.path(name));
        if self.fail_at != Some(n) {
            return self.inner.write(kind, name, data);
        }
        let source = match self.fault {
            Fault::Eio => std::io::Error::from_raw_os_error(libc::EIO),
            Fault::Landed => {
                self.inner.write(kind, name, data)?;
                std::io::Error::from_raw_os_error(libc::EIO)
            }
            Fault::Retried => {
                self.inner.write(kind, name, data)?;
                return self.inner.write(kind, name, data);
            }
            Fault::Short => {
                let mut staged = self.inner.stage(kind)?;
                staged.append(&data[..data.len() / 2])?;
                drop(staged);
                std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    "short write: the device took half of the bytes",
                )
            }
        };
        Err(Error::Backend {
            object: kind.path(name),
            source,
        })
    }
}

impl Backend for FaultyBackend {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn create(&self) -> Result<()> {
        self.inner.create()
    }
    fn exists(&self, kind: Kind, name: &str) -> Result<bool> {
        self.inner.exists(kind, name)
    }
    fn list(&self, kind: Kind) -> Result<Vec<Entry>> {
        self.inner.list(kind)
    }
    fn read_bounded(&self, kind: Kind, name: &str, max: u64) -> Result<Vec<u8>> {
        self.inner.read_bounded(kind, name, max)
    }
    fn read_range(&self, kind: Kind, name: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.inner.read_range(kind, name, offset, len)
    }
    fn size(&self, kind: Kind, name: &str) -> Result<u64> {
        self.inner.size(kind, name)
    }
    fn write(&self, kind: Kind, name: &str, data: &[u8]) -> Result<()> {
        self.store(kind, name, data)
    }
    fn delete(&self, kind: Kind, name: &str) -> Result<()> {
        self.inner.delete(kind, name)
    }
    fn replace_config(&self, data: &[u8]) -> Result<()> {
        self.inner.replace_config(data)
    }
    fn stage(&self, _kind: Kind) -> Result<Staged> {
        Ok(Staged::Memory(Vec::new()))
    }
    fn commit(&self, kind: Kind, name: &str, staged: Staged) -> Result<()> {
        match staged.bytes() {
            Some(b) => self.store(kind, name, b),
            None => Err(Error::Internal("not staged by this backend".into())),
        }
    }
}
