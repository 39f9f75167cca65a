//! What the mounted view is made of, and its inode numbers. The virtual
//! directories (`snapshots/`, `hosts/<host>/`, `tags/<tag>/`, `ids/`) are
//! built once from the snapshot list, as restic lays them out; below a
//! snapshot's root every entry is a tree node. Inode numbers are handed out
//! lazily, one per (parent, name) the kernel looked up or listed, so the
//! table grows with what was visited, never with the repository.

use crate::id::Id;
use crate::snapshot::Snapshot;
use crate::tree::Node;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// One entry of the view.
#[derive(Clone, Debug)]
pub enum Entry {
    /// A directory of the virtual layout.
    Virtual(Arc<VDir>),
    /// A `latest` symlink: its target.
    Link(Vec<u8>),
    /// The root directory of a snapshot.
    SnapRoot { tree: Id, time_ns: i64 },
    /// A recorded file, directory, symlink or special file.
    Node(Arc<Node>),
}

/// A virtual directory: its entries by name, and the time it shows.
#[derive(Debug, Default)]
pub struct VDir {
    pub time_ns: i64,
    pub entries: Vec<(Vec<u8>, Entry)>,
}

/// The inode table: number → (parent, entry), and (parent, name) → number.
pub struct Inodes {
    inner: Mutex<Table>,
}

struct Table {
    next: u64,
    by_ino: HashMap<u64, (u64, Entry)>,
    by_name: HashMap<(u64, Vec<u8>), u64>,
}

/// The root's inode number (FUSE's).
pub const ROOT: u64 = 1;

impl Inodes {
    /// A table holding only the root.
    pub fn new(root: Entry) -> Self {
        let mut by_ino = HashMap::new();
        by_ino.insert(ROOT, (ROOT, root));
        Inodes {
            inner: Mutex::new(Table {
                next: ROOT + 1,
                by_ino,
                by_name: HashMap::new(),
            }),
        }
    }

    /// The parent and entry of inode `ino`.
    pub fn get(&self, ino: u64) -> Option<(u64, Entry)> {
        self.inner.lock().ok()?.by_ino.get(&ino).cloned()
    }

    /// The inode number of `name` in `parent`, allocated on first sight.
    pub fn child(&self, parent: u64, name: &[u8], entry: &Entry) -> u64 {
        let Ok(mut t) = self.inner.lock() else {
            return 0;
        };
        let key = (parent, name.to_vec());
        if let Some(&ino) = t.by_name.get(&key) {
            return ino;
        }
        let ino = t.next;
        t.next += 1;
        t.by_name.insert(key, ino);
        t.by_ino.insert(ino, (parent, entry.clone()));
        ino
    }

    /// How many inodes were handed out (the root included).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.inner.lock().map(|t| t.by_ino.len()).unwrap_or(0)
    }
}

/// A snapshot's directory name: its local time as restic shows it
/// (`2024-05-01T10:00:00+02:00`).
fn time_name(s: &Snapshot) -> String {
    jiff::Timestamp::from_nanosecond(s.time_ns as i128)
        .map(|t| {
            t.to_zoned(jiff::tz::TimeZone::system())
                .strftime("%Y-%m-%dT%H:%M:%S%:z")
                .to_string()
        })
        .unwrap_or_else(|_| s.time_ns.to_string())
}

/// A host or tag as one safe directory name.
fn dir_name(s: &str) -> Vec<u8> {
    let n: Vec<u8> = s
        .bytes()
        .map(|b| if b == b'/' || b == 0 { b'_' } else { b })
        .collect();
    match n.as_slice() {
        b"" => b"_".to_vec(),
        b"." | b".." => [b"_", n.as_slice()].concat(),
        _ => n,
    }
}

/// A listing of snapshots (oldest first) by time name, names made unique
/// with `-1`, `-2`..., and a `latest` link to the newest.
fn listing(snaps: &[&(Id, Snapshot)], time_ns: i64) -> Arc<VDir> {
    let mut entries: Vec<(Vec<u8>, Entry)> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (_, s) in snaps {
        let base = time_name(s);
        let n = seen.entry(base.clone()).or_insert(0);
        let name = if *n == 0 { base } else { format!("{base}-{n}") };
        *n += 1;
        let root = Entry::SnapRoot {
            tree: s.tree,
            time_ns: s.time_ns,
        };
        entries.push((name.into_bytes(), root));
    }
    if let Some((name, _)) = entries.last() {
        let link = Entry::Link(name.clone());
        entries.push((b"latest".to_vec(), link));
    }
    Arc::new(VDir { time_ns, entries })
}

/// The root of the view for `snaps` (oldest first), as restic lays it out.
pub fn layout(snaps: &[(Id, Snapshot)], time_ns: i64) -> Entry {
    let all: Vec<&(Id, Snapshot)> = snaps.iter().collect();
    let mut hosts: BTreeMap<Vec<u8>, Vec<&(Id, Snapshot)>> = BTreeMap::new();
    let mut tags: BTreeMap<Vec<u8>, Vec<&(Id, Snapshot)>> = BTreeMap::new();
    let mut ids = Vec::new();
    for s in &all {
        hosts.entry(dir_name(&s.1.hostname)).or_default().push(s);
        for t in &s.1.tags {
            tags.entry(dir_name(t)).or_default().push(s);
        }
        let root = Entry::SnapRoot {
            tree: s.1.tree,
            time_ns: s.1.time_ns,
        };
        ids.push((s.0.short().into_bytes(), root));
    }
    // Two snapshots sharing a short id are shown by their full ids.
    let mut count: HashMap<Vec<u8>, usize> = HashMap::new();
    for (n, _) in &ids {
        *count.entry(n.clone()).or_default() += 1;
    }
    for ((n, _), s) in ids.iter_mut().zip(&all) {
        if count.get(n).copied().unwrap_or(0) > 1 {
            *n = s.0.to_hex().into_bytes();
        }
    }
    let group = |m: BTreeMap<Vec<u8>, Vec<&(Id, Snapshot)>>| {
        let entries = m
            .into_iter()
            .map(|(k, v)| (k, Entry::Virtual(listing(&v, time_ns))))
            .collect();
        Entry::Virtual(Arc::new(VDir { time_ns, entries }))
    };
    let entries = vec![
        (b"hosts".to_vec(), group(hosts)),
        (
            b"ids".to_vec(),
            Entry::Virtual(Arc::new(VDir {
                time_ns,
                entries: ids,
            })),
        ),
        (
            b"snapshots".to_vec(),
            Entry::Virtual(listing(&all, time_ns)),
        ),
        (b"tags".to_vec(), group(tags)),
    ];
    Entry::Virtual(Arc::new(VDir { time_ns, entries }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(time_ns: i64, host: &str, tags: &[&str], n: u8) -> (Id, Snapshot) {
        let id = Id::from_hex(&format!("{n:02x}").repeat(32)).unwrap();
        let s = Snapshot {
            time_ns,
            hostname: host.into(),
            username: "u".into(),
            uid: 0,
            gid: 0,
            paths: vec!["/x".into()],
            tags: tags.iter().map(|t| t.to_string()).collect(),
            tree: id,
            parent: None,
            program_version: String::new(),
            summary: Default::default(),
            original: None,
        };
        (id, s)
    }

    fn names(e: &Entry) -> Vec<String> {
        match e {
            Entry::Virtual(d) => d
                .entries
                .iter()
                .map(|(n, _)| String::from_utf8_lossy(n).into_owned())
                .collect(),
            _ => panic!("not a directory: {e:?}"),
        }
    }

    fn sub<'a>(e: &'a Entry, name: &str) -> &'a Entry {
        match e {
            Entry::Virtual(d) => {
                &d.entries
                    .iter()
                    .find(|(n, _)| n == name.as_bytes())
                    .unwrap()
                    .1
            }
            _ => panic!("not a directory"),
        }
    }

    #[test]
    fn layout_is_restics() {
        let t = 1_700_000_000_000_000_000;
        let snaps = vec![
            snap(t, "a", &["x"], 1),
            snap(t, "b/c", &["x", "y"], 2),
            snap(t + 1_000_000_000, "a", &[], 3),
        ];
        let root = layout(&snaps, 0);
        assert_eq!(names(&root), ["hosts", "ids", "snapshots", "tags"]);
        let s = names(sub(&root, "snapshots"));
        assert_eq!(s.len(), 4);
        assert!(s[1].ends_with("-1"), "same second, made unique: {s:?}");
        assert_eq!(s[3], "latest");
        match sub(sub(&root, "snapshots"), "latest") {
            Entry::Link(t) => assert_eq!(t, s[2].as_bytes()),
            e => panic!("{e:?}"),
        }
        assert_eq!(names(sub(&root, "hosts")), ["a", "b_c"]);
        assert_eq!(names(sub(sub(&root, "hosts"), "a")).len(), 3);
        assert_eq!(names(sub(&root, "tags")), ["x", "y"]);
        assert_eq!(names(sub(sub(&root, "tags"), "x")).len(), 3);
        assert_eq!(
            names(sub(&root, "ids")),
            ["01010101", "02020202", "03030303"]
        );
    }

    #[test]
    fn inodes_are_stable_per_parent_and_name() {
        let t = Inodes::new(Entry::Link(vec![]));
        let e = Entry::Link(b"x".to_vec());
        let a = t.child(ROOT, b"a", &e);
        assert_eq!(t.child(ROOT, b"a", &e), a);
        let b = t.child(a, b"a", &e);
        assert_ne!(a, b);
        assert_eq!(t.get(b).map(|p| p.0), Some(a));
        assert_eq!(t.len(), 3);
    }
}
