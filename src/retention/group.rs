//! Grouping snapshots before a policy is applied (`--group-by`): by host,
//! by the set of backed-up paths and/or by the set of tags, as restic does.
//! A policy is applied to each group on its own.

use crate::error::{Error, Result};
use crate::id::Id;
use crate::snapshot::Snapshot;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// Which snapshot fields form a group's key. The default is `host,paths`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupBy {
    pub host: bool,
    pub paths: bool,
    pub tags: bool,
}

impl Default for GroupBy {
    fn default() -> Self {
        GroupBy {
            host: true,
            paths: true,
            tags: false,
        }
    }
}

impl GroupBy {
    /// No grouping: every snapshot in one group.
    pub const NONE: GroupBy = GroupBy {
        host: false,
        paths: false,
        tags: false,
    };

    /// Parses restic's `--group-by` value: comma-separated `host`, `paths`,
    /// `tags` (the singular forms and `hosts` are accepted too); the empty
    /// string means no grouping.
    pub fn parse(text: &str) -> Result<GroupBy> {
        let mut by = GroupBy::NONE;
        for part in text.split(',') {
            match part {
                "host" | "hosts" => by.host = true,
                "path" | "paths" => by.paths = true,
                "tag" | "tags" => by.tags = true,
                "" => {}
                other => {
                    return Err(Error::Usage(format!(
                        "--group-by {text:?}: unknown grouping option {other:?} (use host, paths, tags, or '' for none)"
                    )));
                }
            }
        }
        Ok(by)
    }

    /// The key of `snap` under this grouping.
    pub fn key_of(&self, snap: &Snapshot) -> GroupKey {
        let sorted = |list: &[String]| {
            let mut v = list.to_vec();
            v.sort();
            v
        };
        GroupKey {
            hostname: if self.host {
                snap.hostname.clone()
            } else {
                String::new()
            },
            paths: (self.paths && !snap.paths.is_empty()).then(|| sorted(&snap.paths)),
            tags: (self.tags && !snap.tags.is_empty()).then(|| sorted(&snap.tags)),
        }
    }
}

/// restic's rendering, e.g. `host,paths`.
impl fmt::Display for GroupBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<&str> = [
            (self.host, "host"),
            (self.paths, "paths"),
            (self.tags, "tags"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect();
        f.write_str(&parts.join(","))
    }
}

/// The key of a group: the host (empty when not grouped by host), and the
/// sorted paths and tags (`None` when not grouped by them, or empty).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct GroupKey {
    pub hostname: String,
    pub paths: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
}

/// restic's rendering, e.g. `host alpha, path [/etc /srv], tags [a]`.
impl fmt::Display for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if !self.hostname.is_empty() {
            parts.push(format!("host {}", self.hostname));
        }
        if let Some(p) = &self.paths {
            parts.push(format!("path [{}]", p.join(" ")));
        }
        if let Some(t) = &self.tags {
            parts.push(format!("tags [{}]", t.join(" ")));
        }
        f.write_str(&parts.join(", "))
    }
}

/// One group: its key and its snapshots, in the order they were given.
#[derive(Clone, Debug)]
pub struct Group {
    pub key: GroupKey,
    pub snapshots: Vec<(Id, Snapshot)>,
}

/// Splits snapshots into groups by `by`. Groups come sorted by key;
/// within a group the snapshots keep their input order.
pub fn group(snapshots: Vec<(Id, Snapshot)>, by: GroupBy) -> Vec<Group> {
    let mut groups: BTreeMap<GroupKey, Vec<(Id, Snapshot)>> = BTreeMap::new();
    for (id, snap) in snapshots {
        groups.entry(by.key_of(&snap)).or_default().push((id, snap));
    }
    groups
        .into_iter()
        .map(|(key, snapshots)| Group { key, snapshots })
        .collect()
}

/// restic's `snapshots --latest N`: the last `n` snapshots of each host
/// and path set. `snapshots` must come oldest first; what is kept keeps
/// that order.
pub fn latest(snapshots: Vec<(Id, Snapshot)>, n: usize) -> Vec<(Id, Snapshot)> {
    let by = GroupBy::default();
    let mut seen: BTreeMap<GroupKey, usize> = BTreeMap::new();
    let mut kept: Vec<(Id, Snapshot)> = snapshots
        .into_iter()
        .rev()
        .filter(|(_, snap)| {
            let count = seen.entry(by.key_of(snap)).or_default();
            *count += 1;
            *count <= n
        })
        .collect();
    kept.reverse();
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(host: &str, paths: &[&str], tags: &[&str]) -> Snapshot {
        Snapshot {
            time_ns: 0,
            hostname: host.into(),
            username: "u".into(),
            uid: 0,
            gid: 0,
            paths: paths.iter().map(|s| s.to_string()).collect(),
            tags: tags.iter().map(|s| s.to_string()).collect(),
            tree: Id([0; 32]),
            parent: None,
            program_version: String::new(),
            summary: Default::default(),
            original: None,
        }
    }

    #[test]
    fn parses_group_by() {
        assert_eq!(GroupBy::parse("host,paths").unwrap(), GroupBy::default());
        assert_eq!(GroupBy::parse("").unwrap(), GroupBy::NONE);
        let all = GroupBy::parse("tags,host,paths").unwrap();
        assert!(all.host && all.paths && all.tags);
        assert_eq!(all.to_string(), "host,paths,tags");
        assert_eq!(
            GroupBy::parse("hosts,tag,").unwrap().to_string(),
            "host,tags"
        );
        assert_eq!(GroupBy::parse("path").unwrap().to_string(), "paths");
        for bad in ["hostname", "host paths", "Host"] {
            assert!(matches!(GroupBy::parse(bad), Err(Error::Usage(m)) if m.contains(bad)));
        }
    }

    #[test]
    fn groups_by_host_and_path_set() {
        let input = vec![
            (Id([1; 32]), snap("a", &["/srv", "/etc"], &["x"])),
            (Id([2; 32]), snap("a", &["/etc", "/srv"], &[])),
            (Id([3; 32]), snap("b", &["/etc", "/srv"], &[])),
            (Id([4; 32]), snap("a", &["/etc"], &["x"])),
            (Id([5; 32]), snap("a", &["/srv", "/etc"], &["y", "x"])),
        ];
        let groups = group(input.clone(), GroupBy::default());
        let summary: Vec<(String, Vec<u8>)> = groups
            .iter()
            .map(|g| {
                (
                    g.key.to_string(),
                    g.snapshots.iter().map(|s| s.0.0[0]).collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("host a, path [/etc]".to_string(), vec![4]),
                ("host a, path [/etc /srv]".to_string(), vec![1, 2, 5]),
                ("host b, path [/etc /srv]".to_string(), vec![3]),
            ]
        );

        // By tags only: tag order does not matter, untagged is its own group.
        let groups = group(input.clone(), GroupBy::parse("tags").unwrap());
        let summary: Vec<(String, Vec<u8>)> = groups
            .iter()
            .map(|g| {
                (
                    g.key.to_string(),
                    g.snapshots.iter().map(|s| s.0.0[0]).collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (String::new(), vec![2, 3]),
                ("tags [x]".to_string(), vec![1, 4]),
                ("tags [x y]".to_string(), vec![5]),
            ]
        );

        let groups = group(input, GroupBy::NONE);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].snapshots.len(), 5);
        assert_eq!(
            groups[0].key,
            GroupKey {
                hostname: String::new(),
                paths: None,
                tags: None
            }
        );
    }

    #[test]
    fn latest_keeps_the_last_n_of_each_host_and_path_set() {
        // Oldest first; tags do not split a host and path set.
        let input = vec![
            (Id([1; 32]), snap("a", &["/srv"], &["x"])),
            (Id([2; 32]), snap("b", &["/srv"], &[])),
            (Id([3; 32]), snap("a", &["/srv"], &[])),
            (Id([4; 32]), snap("a", &["/etc"], &[])),
            (Id([5; 32]), snap("a", &["/srv"], &["y"])),
            (Id([6; 32]), snap("b", &["/srv"], &[])),
        ];
        let ids = |v: Vec<(Id, Snapshot)>| v.iter().map(|s| s.0.0[0]).collect::<Vec<u8>>();
        assert_eq!(ids(latest(input.clone(), 1)), vec![4, 5, 6]);
        assert_eq!(ids(latest(input.clone(), 2)), vec![2, 3, 4, 5, 6]);
        assert_eq!(ids(latest(input.clone(), 9)), vec![1, 2, 3, 4, 5, 6]);
        assert!(latest(input, 0).is_empty());
    }
}
