//! Remembering which repository lives at a location, as ssh remembers host
//! keys: the first open records the repository id and a fingerprint of the
//! master key (derived from it, never the key), in `known_repositories`
//! under the state directory (not the cache: deleting the cache must not
//! forget it). A later open that finds another config or master key there
//! is refused, saying what changed, unless the user accepts the change.
//!
//! This stops an attacker with write access to the storage from swapping
//! in a repository of their own (their config and a key file for the
//! victim's public age recipient) to receive the victim's next backup.

use super::Repository;
use crate::error::{Error, Result};
use crate::id::Id;
use serde::{Deserialize, Serialize};
use std::fs::{self, File};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

/// The derivation context of the master key fingerprint.
const CTX_FINGERPRINT: &str = "larder 2026-12 v1 master key fingerprint";

/// The file is refused beyond this size (it holds one short line per
/// repository location).
const MAX_FILE: u64 = 16 << 20;

/// What identifies a repository: its id and its master key's fingerprint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub id: Id,
    /// The first 16 bytes of a BLAKE3 key derivation of the master key,
    /// as hex.
    pub master_key_fingerprint: String,
}

/// One line of the file.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    location: String,
    #[serde(flatten)]
    identity: Identity,
}

/// What [`KnownRepositories::verify`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The location was not known: it is recorded now.
    New,
    /// The same repository as before.
    Known,
    /// Another repository than before, accepted and recorded.
    Accepted,
}

impl Repository {
    /// This repository's identity.
    pub fn identity(&self) -> Identity {
        let fp = blake3::derive_key(CTX_FINGERPRINT, self.master().as_bytes());
        Identity {
            id: self.config().id,
            master_key_fingerprint: hex::encode(&fp[..16]),
        }
    }
}

/// The record of repositories this user has opened, by location.
pub struct KnownRepositories {
    path: PathBuf,
}

impl KnownRepositories {
    /// The record kept in `state_dir`.
    pub fn in_dir(state_dir: &Path) -> Self {
        KnownRepositories {
            path: state_dir.join("known_repositories"),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks `identity` against what is recorded for `location`: records a
    /// new location, refuses a changed one unless `accept_change` (then
    /// records the new identity).
    pub fn verify(
        &self,
        location: &str,
        identity: &Identity,
        accept_change: bool,
    ) -> Result<Verdict> {
        let _guard = self.lock()?;
        let mut entries = self.read()?;
        let verdict = match entries.iter_mut().find(|e| e.location == location) {
            Some(e) if e.identity == *identity => return Ok(Verdict::Known),
            Some(e) if accept_change => {
                e.identity = identity.clone();
                Verdict::Accepted
            }
            Some(e) => return Err(self.changed(location, &e.identity, identity)),
            None => {
                entries.push(Entry {
                    location: location.to_string(),
                    identity: identity.clone(),
                });
                Verdict::New
            }
        };
        self.write(&entries)?;
        Ok(verdict)
    }

    /// Records `identity` for `location`, replacing what was there (a
    /// repository the user just created).
    pub fn record(&self, location: &str, identity: &Identity) -> Result<()> {
        self.verify(location, identity, true).map(|_| ())
    }

    fn changed(&self, location: &str, old: &Identity, new: &Identity) -> Error {
        let mut what = Vec::new();
        if old.id != new.id {
            what.push(format!("its id was {} and is now {}", old.id, new.id));
        }
        if old.master_key_fingerprint != new.master_key_fingerprint {
            what.push(format!(
                "its master key fingerprint was {} and is now {}",
                old.master_key_fingerprint, new.master_key_fingerprint
            ));
        }
        Error::RepositoryChanged(format!(
            "the repository at {location} is not the one larder knows there: {}. Someone \
             with write access to the storage may have replaced it to receive your next \
             backup. If you re-created it yourself, run again with \
             --accept-repository-change (this updates {})",
            what.join("; "),
            self.path.display()
        ))
    }

    /// An exclusive lock on the record while it is read and rewritten.
    fn lock(&self) -> Result<File> {
        let lock_path = self.path.with_extension("lock");
        if let Some(d) = lock_path.parent() {
            crate::host::prepare_state_dir(d)?;
        }
        let f = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Error::io(&lock_path, e))?;
        f.lock().map_err(|e| Error::io(&lock_path, e))?;
        Ok(f)
    }

    fn read(&self) -> Result<Vec<Entry>> {
        let mut f = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(&self.path, e)),
        };
        let mut text = String::new();
        (&mut f)
            .take(MAX_FILE + 1)
            .read_to_string(&mut text)
            .map_err(|e| Error::io(&self.path, e))?;
        if text.len() as u64 > MAX_FILE {
            return Err(Error::Usage(format!(
                "{} is larger than {MAX_FILE} bytes; it is not a record larder wrote",
                self.path.display()
            )));
        }
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l).map_err(|e| {
                    Error::Usage(format!(
                        "{}:{}: not a known-repository line ({e}); fix or remove it",
                        self.path.display(),
                        i + 1
                    ))
                })
            })
            .collect()
    }

    /// Rewrites the record: temporary file, fsync, rename, fsync of the
    /// directory.
    fn write(&self, entries: &[Entry]) -> Result<()> {
        let mut text = String::new();
        for e in entries {
            let line =
                serde_json::to_string(e).map_err(|e| Error::internal(format!("encoding: {e}")))?;
            text.push_str(&line);
            text.push('\n');
        }
        let tmp = self.path.with_extension("tmp");
        let mut f = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| Error::io(&tmp, e))?;
        fs::rename(&tmp, &self.path).map_err(|e| Error::io(&self.path, e))?;
        if let Some(d) = self.path.parent() {
            File::open(d)
                .and_then(|d| d.sync_all())
                .map_err(|e| Error::io(d, e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident(id: u8, fp: &str) -> Identity {
        Identity {
            id: Id([id; 32]),
            master_key_fingerprint: fp.to_string(),
        }
    }

    #[test]
    fn first_use_recorded_then_changes_refused_unless_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let k = KnownRepositories::in_dir(dir.path());
        let a = ident(1, "aa");
        assert_eq!(k.verify("/r", &a, false).unwrap(), Verdict::New);
        assert_eq!(k.verify("/r", &a, false).unwrap(), Verdict::Known);
        // Another location is independent.
        assert_eq!(
            k.verify("/s", &ident(2, "bb"), false).unwrap(),
            Verdict::New
        );
        let e = k.verify("/r", &ident(1, "cc"), false).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("master key fingerprint was aa and is now cc"),
            "{msg}"
        );
        assert!(!msg.contains("its id was"), "{msg}");
        let e = k.verify("/r", &ident(3, "aa"), false).unwrap_err();
        assert!(e.to_string().contains("its id was"), "{e}");
        // Refusals changed nothing; accepting records the new identity.
        assert_eq!(k.verify("/r", &a, false).unwrap(), Verdict::Known);
        assert_eq!(
            k.verify("/r", &ident(3, "dd"), true).unwrap(),
            Verdict::Accepted
        );
        assert_eq!(
            k.verify("/r", &ident(3, "dd"), false).unwrap(),
            Verdict::Known
        );
        assert!(k.verify("/r", &a, false).is_err());
        assert_eq!(
            k.verify("/s", &ident(2, "bb"), false).unwrap(),
            Verdict::Known
        );
    }

    #[test]
    fn a_damaged_record_is_named_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let k = KnownRepositories::in_dir(dir.path());
        k.verify("/r", &ident(1, "aa"), false).unwrap();
        let mut text = fs::read_to_string(k.path()).unwrap();
        text.push_str("garbage\n");
        fs::write(k.path(), text).unwrap();
        let e = k.verify("/r", &ident(1, "aa"), false).unwrap_err();
        assert!(e.to_string().contains("known_repositories:2:"), "{e}");
    }
}
