//! Sealed tree blobs of remote repositories kept in the local cache
//! (`<cache>/<repository id>/trees/ab/<id>`), so that an unchanged
//! re-backup, `ls`, `diff` or a restore does not fetch the parent's trees
//! blob by blob over the network. Backups put the trees they write here;
//! reads put what they fetch.
//!
//! The bytes are kept as stored in the repository (encrypted and
//! authenticated): whatever is read back is opened and verified like a
//! blob read from the storage, and one that fails is dropped and fetched
//! again. Local repositories do not use it.

use crate::id::Id;
use std::path::PathBuf;

/// The directory of cached sealed tree blobs.
pub struct TreeCache {
    dir: PathBuf,
}

impl TreeCache {
    pub fn new(dir: PathBuf) -> TreeCache {
        TreeCache { dir }
    }

    fn path(&self, id: &Id) -> PathBuf {
        let hex = id.to_hex();
        self.dir.join(&hex[..2]).join(hex)
    }

    /// The sealed bytes of tree `id`, if cached with the expected length.
    pub fn get(&self, id: &Id, len: usize) -> Option<Vec<u8>> {
        let p = self.path(id);
        let md = std::fs::symlink_metadata(&p).ok()?;
        if !md.file_type().is_file() || md.len() != len as u64 {
            return None;
        }
        std::fs::read(&p).ok().filter(|b| b.len() == len)
    }

    /// Keeps the sealed bytes of tree `id` (best effort: a cache that
    /// cannot be written only costs requests).
    pub fn put(&self, id: &Id, stored: &[u8]) {
        let p = self.path(id);
        if p.exists() {
            return;
        }
        let Some(parent) = p.parent() else { return };
        let mut rnd = [0u8; 8];
        if std::fs::create_dir_all(parent).is_err() || crate::crypto::fill_random(&mut rnd).is_err()
        {
            return;
        }
        let tmp = parent.join(format!(".tmp-{}", hex::encode(rnd)));
        if std::fs::write(&tmp, stored).is_err() || std::fs::rename(&tmp, &p).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    /// Drops a cached tree that did not verify.
    pub fn forget(&self, id: &Id) {
        let _ = std::fs::remove_file(self.path(id));
    }
}
