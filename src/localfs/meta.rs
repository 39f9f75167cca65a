//! Turning `lstat` results into tree nodes, and the user and group name
//! lookups both directions need: id → name when backing up (recorded beside
//! the numeric ids), name → id when restoring (names win over numbers unless
//! `--numeric-owner`). Each lookup reads the passwd or group database, so
//! both directions are cached.

use super::stat::Stat;
use crate::tree::{Node, NodeKind};
use compact_str::CompactString;
use std::collections::HashMap;
use std::sync::RwLock;

/// Caches uid/gid → name lookups for one backup.
#[derive(Default)]
pub struct Owners {
    users: HashMap<u32, CompactString>,
    groups: HashMap<u32, CompactString>,
}

impl Owners {
    /// The user name for `uid` (empty if unknown).
    pub fn user(&mut self, uid: u32) -> CompactString {
        self.users
            .entry(uid)
            .or_insert_with(|| user_name(uid).map(CompactString::from).unwrap_or_default())
            .clone()
    }

    /// The group name for `gid` (empty if unknown).
    pub fn group(&mut self, gid: u32) -> CompactString {
        self.groups
            .entry(gid)
            .or_insert_with(|| {
                nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
                    .ok()
                    .flatten()
                    .map(|g| CompactString::from(g.name))
                    .unwrap_or_default()
            })
            .clone()
    }
}

/// The name of user `uid`, if the system knows it.
pub fn user_name(uid: u32) -> Option<String> {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
}

/// Builds a node (without content, subtree or link target) from metadata.
pub fn node_from_metadata(name: Vec<u8>, md: &Stat, owners: &mut Owners, with_atime: bool) -> Node {
    let kind = match md.format() {
        libc::S_IFDIR => NodeKind::Dir,
        libc::S_IFLNK => NodeKind::Symlink,
        libc::S_IFIFO => NodeKind::Fifo,
        libc::S_IFCHR => NodeKind::CharDev,
        libc::S_IFBLK => NodeKind::BlockDev,
        libc::S_IFSOCK => NodeKind::Socket,
        _ => NodeKind::File,
    };
    let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
    Node {
        name,
        kind,
        mode: md.mode & 0o7777,
        uid: md.uid,
        gid: md.gid,
        user: owners.user(md.uid),
        group: owners.group(md.gid),
        mtime_ns: ns(md.mtime, md.mtime_nsec),
        ctime_ns: ns(md.ctime, md.ctime_nsec),
        atime_ns: with_atime.then(|| ns(md.atime, md.atime_nsec)),
        size: if kind == NodeKind::File { md.size } else { 0 },
        inode: md.ino,
        device: md.dev,
        links: md.nlink,
        rdev: if matches!(kind, NodeKind::CharDev | NodeKind::BlockDev) {
            md.rdev
        } else {
            0
        },
        link_target: Vec::new(),
        content: Vec::new(),
        subtree: None,
        xattrs: Vec::new(),
    }
}

/// user/group name → id lookups for one restore, shared by its threads.
/// Every restored file asks; after a name's first lookup the answer is
/// read under a shared lock, with no allocation.
#[derive(Default)]
pub struct NameCache {
    users: RwLock<HashMap<String, Option<u32>>>,
    groups: RwLock<HashMap<String, Option<u32>>>,
}

impl NameCache {
    pub fn uid(&self, name: &str) -> Option<u32> {
        Self::cached(&self.users, name, |n| {
            nix::unistd::User::from_name(n)
                .ok()
                .flatten()
                .map(|u| u.uid.as_raw())
        })
    }

    pub fn gid(&self, name: &str) -> Option<u32> {
        Self::cached(&self.groups, name, |n| {
            nix::unistd::Group::from_name(n)
                .ok()
                .flatten()
                .map(|g| g.gid.as_raw())
        })
    }

    /// `lookup(name)`, asked once per name (an empty name is never looked up).
    fn cached(
        map: &RwLock<HashMap<String, Option<u32>>>,
        name: &str,
        lookup: impl FnOnce(&str) -> Option<u32>,
    ) -> Option<u32> {
        if name.is_empty() {
            return None;
        }
        if let Some(known) = map.read().ok()?.get(name) {
            return *known;
        }
        let mut m = map.write().ok()?;
        *m.entry(name.to_string()).or_insert_with(|| lookup(name))
    }
}
