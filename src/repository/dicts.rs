//! The repository's compression dictionaries: listing and opening
//! `dicts/`, choosing the one data blobs are written with, and adding a
//! newly trained one (written durably before any blob uses it).

use super::Repository;
use crate::backend::Kind;
use crate::dictionary::{DictSource, Dictionaries, Dictionary, MAX_DICT_STORED, MAX_DICTIONARIES};
use crate::error::{Error, Result};
use crate::id::Id;
use std::sync::Arc;

impl Repository {
    /// Lists and opens every dictionary object. One that is not named by
    /// the hash of its bytes or does not open with this repository's keys
    /// is left out (as a damaged key file is: `check` names it), so a file
    /// planted in `dicts/` cannot stop reads of blobs that do not need it.
    fn load_dictionaries(&self) -> Result<Arc<Dictionaries>> {
        let mut list = Vec::new();
        for e in self.backend.list(Kind::Dict)? {
            let what = Kind::Dict.path(&e.name);
            let Ok(name) = Id::from_hex(&e.name) else {
                continue;
            };
            let bytes = match self
                .backend
                .read_bounded(Kind::Dict, &e.name, MAX_DICT_STORED)
            {
                Ok(b) => b,
                Err(Error::Corrupt { .. }) => continue,
                Err(err) => return Err(err),
            };
            if Id::of_object(&bytes) != name {
                continue;
            }
            let Ok(d) = Dictionary::open(&self.keys, &what, name, &bytes) else {
                continue;
            };
            if list.len() == MAX_DICTIONARIES {
                return Err(Error::corrupt(
                    Kind::Dict.dir(),
                    format!("more than {MAX_DICTIONARIES} dictionaries"),
                ));
            }
            list.push(Arc::new(d));
        }
        let set = Arc::new(Dictionaries::new(list));
        *self.dicts.write().map_err(|_| poisoned())? = Some(set.clone());
        Ok(set)
    }

    /// The dictionary data blobs are written with through this handle:
    /// none when data blobs are stored raw; otherwise the one this handle
    /// trained, or else the repository's with the smallest id (listed once).
    pub fn write_dictionary(&self) -> Result<Option<Arc<Dictionary>>> {
        if self.compression_level() == 0 {
            return Ok(None);
        }
        let mut w = self.write_dict.lock().map_err(|_| poisoned())?;
        if let Some(d) = w.as_ref() {
            return Ok(d.clone());
        }
        let d = self.dictionaries()?.all().first().cloned();
        *w = Some(d.clone());
        Ok(d)
    }

    /// Writes a newly trained zstd dictionary as `dicts/<id>` (durably: the
    /// backend's write is temporary file, fsync, rename) and makes it the
    /// one data blobs are written with from now on.
    pub fn add_dictionary(&self, zstd: Vec<u8>) -> Result<Arc<Dictionary>> {
        let (name, bytes) = Dictionary::seal(&self.keys, &zstd)?;
        let what = Kind::Dict.path(&name.to_hex());
        let d = Arc::new(Dictionary::from_zstd(&what, name, zstd)?);
        self.backend.write(Kind::Dict, &name.to_hex(), &bytes)?;
        {
            let mut cached = self.dicts.write().map_err(|_| poisoned())?;
            let mut list = cached
                .as_ref()
                .map(|s| s.all().to_vec())
                .unwrap_or_default();
            list.push(d.clone());
            *cached = Some(Arc::new(Dictionaries::new(list)));
        }
        *self.write_dict.lock().map_err(|_| poisoned())? = Some(Some(d.clone()));
        Ok(d)
    }
}

impl DictSource for Repository {
    fn dictionaries(&self) -> Result<Arc<Dictionaries>> {
        if let Some(s) = self.dicts.read().map_err(|_| poisoned())?.as_ref() {
            return Ok(s.clone());
        }
        self.load_dictionaries()
    }

    /// Lists `dicts/` again once per missing ID (and for at most 64 IDs),
    /// so a repository whose dictionary is gone costs one listing, not one
    /// per blob that needs it.
    fn refresh_for(&self, zstd_id: u32) -> Result<Arc<Dictionaries>> {
        {
            let mut misses = self.dict_misses.lock().map_err(|_| poisoned())?;
            if misses.contains(&zstd_id) || misses.len() >= 64 {
                drop(misses);
                return self.dictionaries();
            }
            misses.push(zstd_id);
        }
        self.load_dictionaries()
    }
}

fn poisoned() -> Error {
    Error::internal("dictionary lock poisoned")
}
