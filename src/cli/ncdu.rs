//! `ls --ncdu`: a snapshot's tree in ncdu's JSON export format (version
//! 1.2, with the extended fields), as restic 0.17 writes it, so `ncdu -f
//! FILE` browses what a snapshot holds and what takes its room. Written as
//! the walk goes, one entry at a time: memory does not grow with the tree.

use crate::error::{Error, Result};
use crate::tree::{Node, NodeKind};
use crate::walker::Step;
use serde::Serialize;
use std::borrow::Cow;
use std::io::Write;

/// One entry's information block.
#[derive(Serialize)]
struct Info<'a> {
    name: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    asize: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dsize: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dev: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ino: Option<u64>,
    #[serde(skip_serializing_if = "is_false")]
    hlnkc: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    nlink: Option<u64>,
    #[serde(skip_serializing_if = "is_false")]
    notreg: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    uid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mtime: Option<i64>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The file type bits of `st_mode` for `kind`.
fn type_bits(kind: NodeKind) -> u32 {
    match kind {
        NodeKind::File => 0o100000,
        NodeKind::Dir => 0o040000,
        NodeKind::Symlink => 0o120000,
        NodeKind::Fifo => 0o010000,
        NodeKind::CharDev => 0o020000,
        NodeKind::BlockDev => 0o060000,
        NodeKind::Socket => 0o140000,
    }
}

/// Writes the export to `out`: [`NcduWriter::start`], then each step of
/// the walk, then [`NcduWriter::finish`].
pub struct NcduWriter<W: Write> {
    out: W,
}

impl<W: Write> NcduWriter<W> {
    /// The header and the root directory, named `root` (the path listed),
    /// at `timestamp` (seconds since the epoch).
    pub fn start(mut out: W, root: &str, timestamp: i64) -> Result<Self> {
        let meta = serde_json::json!({
            "progname": "larder",
            "progver": env!("CARGO_PKG_VERSION"),
            "timestamp": timestamp,
        });
        write!(out, "[1,2,{meta},\n[{}", json(&bare(root))?).map_err(stdout)?;
        Ok(NcduWriter { out })
    }

    pub fn step(&mut self, s: Step<'_>) -> Result<()> {
        match s {
            Step::Enter(n) => write!(self.out, ",\n[{}", json(&info(n))?),
            Step::Entry(n) => write!(self.out, ",\n{}", json(&info(n))?),
            Step::Leave => write!(self.out, "]"),
        }
        .map_err(stdout)
    }

    pub fn finish(mut self) -> Result<()> {
        writeln!(self.out, "]]").map_err(stdout)?;
        self.out.flush().map_err(stdout)
    }
}

fn stdout(e: std::io::Error) -> Error {
    Error::io(std::path::Path::new("standard output"), e)
}

fn json(i: &Info<'_>) -> Result<String> {
    serde_json::to_string(i).map_err(|e| Error::internal(format!("ncdu entry: {e}")))
}

/// An information block with a name only.
fn bare(name: &str) -> Info<'_> {
    Info {
        name: Cow::Borrowed(name),
        asize: None,
        dsize: None,
        dev: None,
        ino: None,
        hlnkc: false,
        nlink: None,
        notreg: false,
        uid: None,
        gid: None,
        mode: None,
        mtime: None,
    }
}

fn info(n: &Node) -> Info<'_> {
    let dir = n.kind == NodeKind::Dir;
    Info {
        // A name that is not UTF-8 keeps its valid parts.
        name: String::from_utf8_lossy(&n.name),
        asize: Some(n.size),
        dsize: Some(n.size),
        dev: Some(n.device),
        ino: Some(n.inode),
        hlnkc: !dir && n.links > 1,
        // On a directory, ncdu would take a link count above 1 for a
        // hard link and count its size once.
        nlink: (!dir).then_some(n.links),
        notreg: !dir && n.kind != NodeKind::File,
        uid: Some(n.uid),
        gid: Some(n.gid),
        mode: Some(type_bits(n.kind) | (n.mode & 0o7777)),
        mtime: Some(n.mtime_ns.div_euclid(1_000_000_000)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The export of a root holding a file, a directory with a symlink,
    /// and an empty directory parses as ncdu's nesting: a directory is an
    /// array whose first element is its information block.
    #[test]
    fn a_tree_is_written_as_nested_arrays() {
        let mut file = Node::made_up(b"a.txt".to_vec(), NodeKind::File, 0o644);
        file.size = 12;
        file.links = 2;
        let dir = Node::made_up(b"d".to_vec(), NodeKind::Dir, 0o755);
        let link = Node::made_up(b"l\xffx".to_vec(), NodeKind::Symlink, 0o777);
        let empty = Node::made_up(b"e".to_vec(), NodeKind::Dir, 0o700);
        let mut buf = Vec::new();
        let mut w = NcduWriter::start(&mut buf, "/", 1_700_000_000).unwrap();
        for s in [
            Step::Entry(&file),
            Step::Enter(&dir),
            Step::Entry(&link),
            Step::Leave,
            Step::Enter(&empty),
            Step::Leave,
        ] {
            w.step(s).unwrap();
        }
        w.finish().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!((v[0].clone(), v[1].clone()), (1.into(), 2.into()));
        assert_eq!(v[2]["progname"], "larder");
        assert_eq!(v[2]["timestamp"], 1_700_000_000);
        let root = v[3].as_array().unwrap();
        assert_eq!(root[0], serde_json::json!({"name": "/"}));
        assert_eq!(root[1]["name"], "a.txt");
        assert_eq!(root[1]["asize"], 12);
        assert_eq!(root[1]["mode"], 0o100644);
        assert_eq!(root[1]["hlnkc"], true);
        assert!(root[1].get("notreg").is_none());
        let d = root[2].as_array().unwrap();
        assert_eq!(d[0]["name"], "d");
        assert_eq!(d[0]["mode"], 0o040755);
        assert!(d[0].get("nlink").is_none(), "{}", d[0]);
        assert_eq!(d[1]["name"], "l\u{fffd}x");
        assert_eq!(d[1]["notreg"], true);
        let e = root[3].as_array().unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0]["name"], "e");
        assert_eq!(root.len(), 4);
    }
}
