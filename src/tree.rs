//! Tree blobs: one directory's entries (nodes), sorted by raw name bytes and
//! encoded canonically, so the same directory always gives the same blob and
//! the same ID. A subdirectory refers to its own tree blob by ID: a snapshot
//! is a Merkle tree. (Turning `lstat` results into nodes is
//! [`crate::localfs`]'s job.)

use crate::error::{Error, Result};
use crate::id::Id;
use crate::object;
use compact_str::CompactString;
use serde::{Deserialize, Serialize};

/// The version byte in front of every tree blob.
pub const TREE_VERSION: u8 = 1;

/// The largest tree buffer (encoded, or as stored and opened) a thread
/// keeps for the next tree: most trees are far smaller, and a very large
/// directory's buffers are let go rather than held to the end of a backup.
pub const BUFFER_KEPT: usize = 256 << 10;

/// How deep directories may nest below a snapshot's root tree (the root's
/// entries are at depth 1). Every walk of a snapshot's trees recurses, one
/// stack frame or more a level, so a deeper tree (crafted storage) is
/// refused with an error rather than allowed to overflow the stack; and a
/// backup leaves out what lies deeper, so it never writes a snapshot that
/// cannot be read. A path of 4,096 bytes (Linux's `PATH_MAX`) holds at
/// most 2,048 levels.
pub const MAX_DEPTH: usize = 2048;

/// The error for a directory at `path` that lies deeper than [`MAX_DEPTH`].
pub fn too_deep(path: impl std::fmt::Display) -> Error {
    Error::corrupt(
        path,
        format!("directories nested more than {MAX_DEPTH} levels deep"),
    )
}

/// Refuses depth `depth` (of the directory at `path`) beyond [`MAX_DEPTH`].
pub fn check_depth(depth: usize, path: impl std::fmt::Display) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(too_deep(path));
    }
    Ok(())
}

/// The type of a filesystem entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeKind {
    File,
    Dir,
    Symlink,
    Fifo,
    CharDev,
    BlockDev,
    Socket,
}

impl NodeKind {
    /// One letter, as `ls -l` shows it.
    pub fn letter(self) -> char {
        match self {
            NodeKind::File => '-',
            NodeKind::Dir => 'd',
            NodeKind::Symlink => 'l',
            NodeKind::Fifo => 'p',
            NodeKind::CharDev => 'c',
            NodeKind::BlockDev => 'b',
            NodeKind::Socket => 's',
        }
    }

    /// A lowercase word for JSON output.
    pub fn word(self) -> &'static str {
        match self {
            NodeKind::File => "file",
            NodeKind::Dir => "dir",
            NodeKind::Symlink => "symlink",
            NodeKind::Fifo => "fifo",
            NodeKind::CharDev => "chardev",
            NodeKind::BlockDev => "blockdev",
            NodeKind::Socket => "socket",
        }
    }
}

/// One extended attribute.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Xattr {
    #[serde(with = "serde_bytes")]
    pub name: Vec<u8>,
    #[serde(with = "serde_bytes")]
    pub value: Vec<u8>,
}

/// One directory entry with its metadata.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Raw name bytes (non-UTF-8 names survive).
    #[serde(with = "serde_bytes")]
    pub name: Vec<u8>,
    pub kind: NodeKind,
    /// Permission bits including setuid/setgid/sticky (st_mode & 0o7777).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Owner names (empty if unknown). Held inline up to 24 bytes, so
    /// most nodes allocate nothing for them; encoded as plain strings.
    pub user: CompactString,
    pub group: CompactString,
    /// Nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    /// Only recorded with `--with-atime`.
    pub atime_ns: Option<i64>,
    pub size: u64,
    pub inode: u64,
    pub device: u64,
    pub links: u64,
    /// Device number for character and block devices.
    pub rdev: u64,
    /// Symlink target bytes, empty otherwise.
    #[serde(with = "serde_bytes")]
    pub link_target: Vec<u8>,
    /// A file's chunk IDs, in order.
    pub content: Vec<Id>,
    /// A directory's tree blob.
    pub subtree: Option<Id>,
    /// Extended attributes, sorted by name.
    pub xattrs: Vec<Xattr>,
}

impl Node {
    /// A node larder makes up rather than reads from a file system (a
    /// snapshot's root, a stream's file, a recovery directory): `kind`,
    /// `mode` and `name`, one link, everything else zero or empty; the
    /// caller sets what it knows.
    pub fn made_up(name: Vec<u8>, kind: NodeKind, mode: u32) -> Node {
        Node {
            name,
            kind,
            mode,
            uid: 0,
            gid: 0,
            user: Default::default(),
            group: Default::default(),
            mtime_ns: 0,
            ctime_ns: 0,
            atime_ns: None,
            size: 0,
            inode: 0,
            device: 0,
            links: 1,
            rdev: 0,
            link_target: Vec::new(),
            content: Vec::new(),
            subtree: None,
            xattrs: Vec::new(),
        }
    }

    /// The name as text (lossy for non-UTF-8 names), for display.
    pub fn name_lossy(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }

    /// Whether metadata other than content differs (for `diff --metadata`).
    /// Returns the names of the fields that differ.
    pub fn metadata_changes(&self, other: &Node) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.mode != other.mode {
            v.push("mode");
        }
        if self.uid != other.uid || self.user != other.user {
            v.push("uid");
        }
        if self.gid != other.gid || self.group != other.group {
            v.push("gid");
        }
        if self.mtime_ns != other.mtime_ns {
            v.push("mtime");
        }
        if self.ctime_ns != other.ctime_ns {
            v.push("ctime");
        }
        if self.inode != other.inode {
            v.push("inode");
        }
        if self.xattrs != other.xattrs {
            v.push("xattrs");
        }
        v
    }
}

/// A directory: its nodes, sorted by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tree {
    pub nodes: Vec<Node>,
}

impl Tree {
    /// Sorts nodes (and their xattrs) into canonical order.
    pub fn canonicalize(&mut self) {
        // A backup's walk lists names in order, so this is nearly always a
        // check only: the stable sort would first allocate scratch as large
        // as the nodes (1.7 MB for a directory of 6,518 entries, at 264
        // bytes a node).
        if !self.nodes.is_sorted_by(|a, b| a.name <= b.name) {
            self.nodes.sort_by(|a, b| a.name.cmp(&b.name));
        }
        for n in &mut self.nodes {
            n.xattrs.sort();
        }
    }

    /// The canonical blob bytes: version byte, then postcard.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// [`Tree::encode`] into `out`, its contents replaced. A buffer reused
    /// from tree to tree keeps its capacity, so a backup that stores many
    /// trees does not grow (and copy) a new one for each.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<()> {
        let mut buf = std::mem::take(out);
        buf.clear();
        buf.push(TREE_VERSION);
        *out = object::encode_onto(self, buf)?;
        Ok(())
    }

    /// Decodes a tree blob, checking its version, order and names.
    pub fn decode<W: std::fmt::Display + ?Sized>(what: &W, bytes: &[u8]) -> Result<Tree> {
        match bytes.first() {
            Some(&TREE_VERSION) => {}
            Some(v) => {
                return Err(Error::corrupt(
                    what,
                    format!("tree blob version {v} is not supported"),
                ));
            }
            None => return Err(Error::corrupt(what, "empty tree blob")),
        }
        let t: Tree = object::decode(what, &bytes[1..])?;
        for w in t.nodes.windows(2) {
            if w[0].name >= w[1].name {
                return Err(Error::corrupt(
                    what,
                    "tree entries not sorted or duplicated",
                ));
            }
        }
        Ok(t)
    }

    /// The node named `name`.
    pub fn find(&self, name: &[u8]) -> Option<&Node> {
        self.position(name).map(|i| &self.nodes[i])
    }

    /// Where the node named `name` is in `nodes`.
    pub fn position(&self, name: &[u8]) -> Option<usize> {
        self.nodes
            .binary_search_by(|n| n.name.as_slice().cmp(name))
            .ok()
    }
}

/// Whether `name` is safe to create inside a directory: not empty, not `.`
/// or `..`, no `/` and no NUL. Restore refuses any other name.
pub fn is_safe_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/') && !name.contains(&0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &[u8]) -> Node {
        Node {
            name: name.to_vec(),
            kind: NodeKind::File,
            mode: 0o644,
            uid: 1,
            gid: 2,
            user: "u".into(),
            group: "g".into(),
            mtime_ns: 1,
            ctime_ns: 2,
            atime_ns: None,
            size: 3,
            inode: 4,
            device: 5,
            links: 1,
            rdev: 0,
            link_target: vec![],
            content: vec![Id([9; 32])],
            subtree: None,
            xattrs: vec![],
        }
    }

    /// Owner names are held inline up to 24 bytes and on the heap past
    /// that; either way they encode as the plain strings they were before
    /// (the format did not change), and decode back.
    #[test]
    fn owner_names_encode_as_plain_strings() {
        for len in [0, 4, 24, 25, 40] {
            let name = "n".repeat(len);
            let mut n = node(b"f");
            n.user = CompactString::from(name.as_str());
            n.group = CompactString::from(name.as_str());
            let plain = postcard::to_stdvec(&name).unwrap();
            assert_eq!(postcard::to_stdvec(&n.user).unwrap(), plain);
            let t = Tree { nodes: vec![n] };
            let bytes = t.encode().unwrap();
            let at = bytes
                .windows(plain.len())
                .filter(|w| *w == plain.as_slice())
                .count();
            assert!(at >= 2, "user and group as strings ({len} bytes)");
            assert_eq!(Tree::decode("t", &bytes).unwrap(), t);
        }
    }

    /// A buffer reused for a shorter tree after a longer one holds exactly
    /// what a fresh encoding gives.
    #[test]
    fn encoding_into_a_used_buffer_replaces_it() {
        let long = Tree {
            nodes: vec![node(b"a"), node(b"b"), node(b"c")],
        };
        let short = Tree {
            nodes: vec![node(b"z")],
        };
        let mut buf = Vec::new();
        long.encode_into(&mut buf).unwrap();
        assert_eq!(buf, long.encode().unwrap());
        short.encode_into(&mut buf).unwrap();
        assert_eq!(buf, short.encode().unwrap());
        assert_eq!(buf[0], TREE_VERSION);
    }

    #[test]
    fn canonical_encoding_is_order_independent() {
        let mut a = Tree {
            nodes: vec![node(b"b"), node(b"a\xff")],
        };
        let mut b = Tree {
            nodes: vec![node(b"a\xff"), node(b"b")],
        };
        a.canonicalize();
        b.canonicalize();
        assert_eq!(a.encode().unwrap(), b.encode().unwrap());
        let back = Tree::decode("t", &a.encode().unwrap()).unwrap();
        assert_eq!(back, a);
        assert_eq!(back.find(b"a\xff").unwrap().name, b"a\xff");
    }

    #[test]
    fn unsorted_or_unsafe_rejected() {
        let t = Tree {
            nodes: vec![node(b"b"), node(b"a")],
        };
        assert!(Tree::decode("t", &t.encode().unwrap()).is_err());
        assert!(!is_safe_name(b".."));
        assert!(!is_safe_name(b"a/b"));
        assert!(!is_safe_name(b""));
        assert!(is_safe_name(b"..."));
    }
}
