//! Snapshot objects (`snapshots/<id>`): what was backed up, when, from where,
//! and the root tree. Also resolving snapshot references: a full id, a unique
//! prefix of at least 4 hex digits, or `latest` (optionally filtered).

use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::object::{self, ObjectType};
use crate::repository::Repository;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

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

/// A snapshot object. Its encoding is the fields in order, `original`
/// only when set (see [`Snapshot`]'s `Deserialize`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
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
    /// The snapshot this one replaces (written by `tag` and `rewrite`), as
    /// restic's `original`. Not encoded at all when `None`, so a snapshot
    /// without it has the bytes of the format before the field existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original: Option<Id>,
}

/// The fields every snapshot has, in format order.
#[derive(Deserialize)]
struct Fields {
    time_ns: i64,
    hostname: String,
    username: String,
    uid: u32,
    gid: u32,
    paths: Vec<String>,
    tags: Vec<String>,
    tree: Id,
    parent: Option<Id>,
    program_version: String,
    summary: Summary,
}

impl<'de> Deserialize<'de> for Snapshot {
    /// The fields, then `original` if the encoding goes on. (An encoding
    /// that ends after `summary`, as every snapshot written before the
    /// field existed, has none: reading on fails at the end of the input.)
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Snapshot;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a snapshot")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<Snapshot, A::Error> {
                let f: Fields = seq
                    .next_element()?
                    .ok_or_else(|| serde::de::Error::invalid_length(0, &self))?;
                // `original` is Option's encoding: a tag byte, then the id
                // when the tag is 1. Only a missing tag byte (the end of the
                // input) is taken as "no field"; a tag that is there must be
                // 0 or 1, and an id after 1 must be whole.
                let original = match seq.next_element::<u8>() {
                    Err(_) | Ok(None) | Ok(Some(0)) => None,
                    Ok(Some(1)) => Some(
                        seq.next_element::<Id>()?
                            .ok_or_else(|| serde::de::Error::invalid_length(2, &self))?,
                    ),
                    Ok(Some(t)) => {
                        return Err(serde::de::Error::invalid_value(
                            serde::de::Unexpected::Unsigned(u64::from(t)),
                            &"an option tag (0 or 1)",
                        ));
                    }
                };
                Ok(Snapshot {
                    time_ns: f.time_ns,
                    hostname: f.hostname,
                    username: f.username,
                    uid: f.uid,
                    gid: f.gid,
                    paths: f.paths,
                    tags: f.tags,
                    tree: f.tree,
                    parent: f.parent,
                    program_version: f.program_version,
                    summary: f.summary,
                    original,
                })
            }
        }
        d.deserialize_tuple(3, V)
    }
}

impl Snapshot {
    /// A new backup's snapshot, made by this process: its user, ids and
    /// program version beside what the backup gives.
    pub fn by_this_process(
        time_ns: i64,
        hostname: String,
        paths: Vec<String>,
        tags: Vec<String>,
        tree: Id,
        parent: Option<Id>,
        summary: Summary,
    ) -> Snapshot {
        Snapshot {
            time_ns,
            hostname,
            username: crate::host::username(),
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
            paths,
            tags,
            tree,
            parent,
            program_version: crate::PROGRAM_VERSION.to_string(),
            summary,
            original: None,
        }
    }

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

/// A list of tags that must all be present, as one `--tag` or
/// `--keep-tag` value gives them (`a,b`). The tag `""` matches a snapshot
/// without tags (restic's rule: `--tag ''` selects untagged snapshots).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TagList(pub Vec<String>);

impl TagList {
    /// Splits a comma-separated list, trimming whitespace around each tag
    /// (so `""` is the list holding the empty tag, as in restic).
    pub fn parse(text: &str) -> TagList {
        TagList(text.split(',').map(|t| t.trim().to_string()).collect())
    }

    /// Whether a snapshot with `tags` has every tag of the list, checked in
    /// restic's order: reaching the empty tag on an untagged snapshot
    /// matches at once, the empty tag on a tagged snapshot never matches.
    pub fn matches(&self, tags: &[String]) -> bool {
        for want in &self.0 {
            if want.is_empty() && tags.is_empty() {
                return true;
            }
            if !tags.contains(want) {
                return false;
            }
        }
        true
    }
}

/// restic's rendering: `[a, b]`.
impl std::fmt::Display for TagList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}]", self.0.join(", "))
    }
}

/// Filters for listing snapshots and for `latest`, as restic's: any of
/// the hosts, any of the tag lists (each wholly), all of the paths.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub hosts: Vec<String>,
    /// `--tag a,b --tag c`: snapshots with both `a` and `b`, or with `c`.
    pub tags: Vec<TagList>,
    pub paths: Vec<String>,
    /// The snapshots of one scheduled profile: the paths, and the tags of
    /// all the lists together, must be the snapshot's exactly (as sets),
    /// not merely among them; otherwise a profile of `/home` would select
    /// the snapshots of a profile of `/home` and `/etc`, or of `/home`
    /// tagged `weekly`, and apply its retention to them.
    pub exact: bool,
}

impl Filter {
    /// Whether no filter is given (every snapshot passes).
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty() && self.tags.is_empty() && self.paths.is_empty() && !self.exact
    }

    /// Whether `s` passes every filter given.
    pub fn matches(&self, s: &Snapshot) -> bool {
        if !(self.hosts.is_empty() || self.hosts.contains(&s.hostname)) {
            return false;
        }
        if self.exact {
            use std::collections::BTreeSet;
            let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<String>>();
            let tags: BTreeSet<String> = self.tags.iter().flat_map(|l| l.0.clone()).collect();
            return tags == set(&s.tags) && set(&self.paths) == set(&s.paths);
        }
        (self.tags.is_empty() || self.tags.iter().any(|l| l.matches(&s.tags)))
            && self.paths.iter().all(|p| s.paths.contains(p))
    }
}

/// Snapshots that passed a filter, and the errors of unreadable ones.
pub type Listing = (Vec<(Id, Snapshot)>, Vec<Error>);

/// Every snapshot (with its id) passing `filter`, oldest first.
/// Unreadable snapshots are returned as errors in the second list; one
/// removed between the listing and its read is left out. A removal seen
/// that way may be a `tag` or `rewrite` that saved the snapshot's
/// replacement after the listing, so `snapshots/` is listed again (up to
/// [`RELIST`] times; what was read is not read again): otherwise `latest`
/// could name an older snapshot than any that existed while this ran. The
/// index cache is read again before its next use
/// ([`Repository::index_after_listing`]), so it places every listed
/// snapshot's blobs.
pub fn list(repo: &Repository, filter: &Filter) -> Result<Listing> {
    let mut read: HashMap<String, Option<Snapshot>> = HashMap::new();
    let mut bad = Vec::new();
    let mut names = Vec::new();
    for attempt in 0..=RELIST {
        names = repo
            .backend()
            .list(Kind::Snapshot)?
            .into_iter()
            .map(|e| e.name)
            .filter(|n| Id::from_hex(n).is_ok())
            .collect::<Vec<_>>();
        let mut vanished = false;
        for name in &names {
            if read.contains_key(name) {
                continue;
            }
            match load(repo, name) {
                Ok(s) => {
                    read.insert(name.clone(), Some(s));
                }
                // Removed since it was listed, by a `forget`, `tag` or
                // `rewrite` beside: gone, not unreadable.
                Err(err) if err.is_not_found() => {
                    read.insert(name.clone(), None);
                    vanished = true;
                }
                Err(err) => {
                    read.insert(name.clone(), None);
                    bad.push(err);
                }
            }
        }
        if !vanished || attempt == RELIST {
            break;
        }
    }
    let mut out: Vec<(Id, Snapshot)> = names
        .iter()
        .filter_map(|n| {
            let s = read.remove(n)??;
            let id = Id::from_hex(n).ok()?;
            filter.matches(&s).then_some((id, s))
        })
        .collect();
    out.sort_by(|a, b| a.1.time_ns.cmp(&b.1.time_ns).then(a.0.cmp(&b.0)));
    repo.index_after_listing();
    Ok((out, bad))
}

/// The snapshots named by `refs` (ids, prefixes, `latest` with `filter`),
/// or every snapshot passing `filter` when `refs` is empty; oldest first,
/// each once. Unreadable snapshots are returned as errors beside.
pub fn select(repo: &Repository, refs: &[String], filter: &Filter) -> Result<Listing> {
    if refs.is_empty() {
        return list(repo, filter);
    }
    let mut out: Vec<(Id, Snapshot)> = Vec::new();
    for r in refs {
        let (id, s) = resolve(repo, r, filter)?;
        if !out.iter().any(|(o, _)| *o == id) {
            out.push((id, s));
        }
    }
    out.sort_by(|a, b| a.1.time_ns.cmp(&b.1.time_ns).then(a.0.cmp(&b.0)));
    Ok((out, Vec::new()))
}

/// What [`still_listed`] found: the snapshots still there, and the ids of
/// those gone.
pub type StillListed = (Vec<(Id, Snapshot)>, Vec<Id>);

/// Of `snaps`, chosen before the caller took its lock, those still in
/// `snapshots/`, and the ids of the others: removed (or replaced, by a
/// `tag` or `rewrite`) by another process since they were chosen. A
/// command that replaces or removes snapshots calls this under
/// [`Repository::lock_snapshots`], which no other such command shares, so
/// what it keeps stays there until it is done.
pub fn still_listed(repo: &Repository, snaps: &[(Id, Snapshot)]) -> Result<StillListed> {
    let names: std::collections::HashSet<String> = repo
        .backend()
        .list(Kind::Snapshot)?
        .into_iter()
        .map(|e| e.name)
        .collect();
    let (kept, gone): (Vec<_>, Vec<_>) = snaps
        .iter()
        .cloned()
        .partition(|(id, _)| names.contains(&id.to_hex()));
    Ok((kept, gone.into_iter().map(|(id, _)| id).collect()))
}

/// How many times [`list`] lists `snapshots/` again after finding a
/// listed snapshot removed before it was read.
pub const RELIST: usize = 3;

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
        // Listed, then removed by a `forget` (or `tag`, `rewrite`) before it
        // was read: gone, as if it had never been listed (SPEC section 21).
        [one] => match load(repo, one) {
            Ok(snap) => {
                repo.index_after_listing();
                Ok((Id::from_hex(one)?, snap))
            }
            Err(e) if e.is_not_found() => Err(Error::NoSnapshot(format!(
                "no snapshot {reference}: snapshot {one} was removed meanwhile by another process"
            ))),
            Err(e) => Err(e),
        },
        [] => Err(Error::NoSnapshot(format!("no snapshot {reference}"))),
        _ => Err(Error::NoSnapshot(format!(
            "snapshot prefix {reference} is ambiguous ({} matches)",
            names.len()
        ))),
    }
}
