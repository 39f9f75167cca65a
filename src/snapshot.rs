//! Snapshot objects (`snapshots/<id>`): what was backed up, when, from where,
//! and the root tree. Also resolving snapshot references: a full id, a unique
//! prefix of at least 4 hex digits, or `latest` (optionally filtered).

use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::object::{self, ObjectType};
use crate::repository::Repository;
use serde::{Deserialize, Serialize};

/// Counters recorded with every snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub files_new: u64,
    pub files_changed: u64,
    pub files_unmodified: u64,
    pub dirs_new: u64,
    pub dirs_changed: u64,
    pub dirs_unmodified: u64,
    /// Bytes of file content read from the source.
    pub bytes_read: u64,
    /// Bytes of content in all files of the snapshot.
    pub total_bytes: u64,
    pub total_files: u64,
    /// Bytes stored in the repository by this run (after compression).
    pub data_added: u64,
    /// Plaintext bytes of the blobs added.
    pub data_added_plain: u64,
    pub duration_ms: u64,
}

/// A snapshot object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Nanoseconds since the Unix epoch.
    pub time_ns: i64,
    pub hostname: String,
    pub username: String,
    pub uid: u32,
    pub gid: u32,
    /// Absolute paths given to `backup`.
    pub paths: Vec<String>,
    pub tags: Vec<String>,
    pub tree: Id,
    pub parent: Option<Id>,
    pub program_version: String,
    pub summary: Summary,
}

impl Snapshot {
    /// The time as RFC 3339 text.
    pub fn time_rfc3339(&self) -> String {
        jiff::Timestamp::from_nanosecond(self.time_ns as i128)
            .map(|t| t.to_string())
            .unwrap_or_else(|_| self.time_ns.to_string())
    }

    /// The time in the local zone, to the second, for tables.
    pub fn time_local(&self) -> String {
        jiff::Timestamp::from_nanosecond(self.time_ns as i128)
            .map(|t| {
                t.to_zoned(jiff::tz::TimeZone::system())
                    .strftime("%Y-%m-%d %H:%M:%S")
                    .to_string()
            })
            .unwrap_or_else(|_| self.time_ns.to_string())
    }
}

/// Seals and writes a snapshot; returns its id.
pub fn save(repo: &Repository, snap: &Snapshot) -> Result<Id> {
    let bytes = object::seal(repo.keys(), ObjectType::Snapshot, snap)?;
    let id = Id::of_object(&bytes);
    repo.backend().write(Kind::Snapshot, &id.to_hex(), &bytes)?;
    Ok(id)
}

/// Reads, verifies and opens snapshot `name` (full hex id).
pub fn load(repo: &Repository, name: &str) -> Result<Snapshot> {
    let what = Kind::Snapshot.path(name);
    let bytes = repo
        .backend()
        .read_bounded(Kind::Snapshot, name, object::MAX_OBJECT_STORED)?;
    if Id::of_object(&bytes).to_hex() != name {
        return Err(Error::corrupt(
            &what,
            "contents do not hash to the object's name",
        ));
    }
    object::open(repo.keys(), ObjectType::Snapshot, &what, &bytes)
}

/// Filters for listing snapshots and for `latest`.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub hosts: Vec<String>,
    pub tags: Vec<String>,
    pub paths: Vec<String>,
}

impl Filter {
    /// Whether `s` passes every filter given.
    pub fn matches(&self, s: &Snapshot) -> bool {
        (self.hosts.is_empty() || self.hosts.contains(&s.hostname))
            && self.tags.iter().all(|t| s.tags.contains(t))
            && (self.paths.is_empty() || self.paths.iter().all(|p| s.paths.contains(p)))
    }
}

/// Snapshots that passed a filter, and the errors of unreadable ones.
pub type Listing = (Vec<(Id, Snapshot)>, Vec<Error>);

/// Every snapshot (with its id) passing `filter`, oldest first.
/// Unreadable snapshots are returned as errors in the second list.
pub fn list(repo: &Repository, filter: &Filter) -> Result<Listing> {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for e in repo.backend().list(Kind::Snapshot)? {
        let Ok(id) = Id::from_hex(&e.name) else {
            continue;
        };
        match load(repo, &e.name) {
            Ok(s) if filter.matches(&s) => out.push((id, s)),
            Ok(_) => {}
            Err(err) => bad.push(err),
        }
    }
    out.sort_by(|a, b| a.1.time_ns.cmp(&b.1.time_ns).then(a.0.cmp(&b.0)));
    Ok((out, bad))
}

/// Resolves a reference: full id, unique prefix (4+ hex digits), or `latest`.
pub fn resolve(repo: &Repository, reference: &str, filter: &Filter) -> Result<(Id, Snapshot)> {
    if reference == "latest" {
        let (all, _) = list(repo, filter)?;
        return all.into_iter().last().ok_or_else(|| {
            Error::NoSnapshot("no snapshot matches `latest` with the given filters".into())
        });
    }
    if reference.len() < 4 || !reference.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::NoSnapshot(format!(
            "{reference:?} is not a snapshot id, a prefix of at least 4 hex digits, or `latest`"
        )));
    }
    let r = reference.to_ascii_lowercase();
    let names: Vec<String> = repo
        .backend()
        .list(Kind::Snapshot)?
        .into_iter()
        .map(|e| e.name)
        .filter(|n| n.starts_with(&r))
        .collect();
    match names.as_slice() {
        [one] => Ok((Id::from_hex(one)?, load(repo, one)?)),
        [] => Err(Error::NoSnapshot(format!("no snapshot {reference}"))),
        _ => Err(Error::NoSnapshot(format!(
            "snapshot prefix {reference} is ambiguous ({} matches)",
            names.len()
        ))),
    }
}
