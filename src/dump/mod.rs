//! `dump`: one path of a snapshot written to a stream without restoring it.
//! A file is written as its bytes; a directory as an archive ([`tar`]:
//! POSIX pax with names, modes, owners, nanosecond times, symlinks, hard
//! links, devices and extended attributes; or [`zip`]). Every chunk is read
//! through [`Repository::read_blob`], which decrypts, decompresses and
//! re-hashes it against its ID exactly as a restore does
//! ([`crate::pack::open_blob`]), so a damaged blob stops the dump with an
//! error naming it and is never written out.
//!
//! Paths inside archives are the snapshot's paths without the leading `/`
//! (as restic's `dump` writes them), starting with the dumped directory.

mod tar;
mod zip;

use crate::error::{Error, Result};
use crate::id::Id;
use crate::repository::Repository;
use crate::snapshot::Snapshot;
use crate::tree::{Node, NodeKind};
use rayon::prelude::*;
use serde::Serialize;
use std::fs;
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// How many chunks of a file are read (in parallel) ahead of writing.
const READ_AHEAD: usize = 8;

/// The archive a directory is written as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArchiveFormat {
    Tar,
    Zip,
}

/// What a dump wrote.
#[derive(Debug, Default, Serialize)]
pub struct DumpReport {
    /// Whether the path was a directory (written as an archive).
    pub archive: bool,
    pub files: u64,
    pub dirs: u64,
    pub links: u64,
    /// Content bytes written.
    pub bytes: u64,
    /// Entries the archive format cannot hold (sockets; in zip also
    /// devices and FIFOs), and zip names that are not UTF-8 (written
    /// with replacement characters).
    pub skipped: Vec<String>,
}

/// The node at `path` (bytes, `/`-separated) in the tree `root`; the root
/// itself is a directory node without a name.
pub fn node_at(repo: &Repository, root: Id, path: &[u8]) -> Result<Node> {
    let mut node = root_node(root);
    let shown = String::from_utf8_lossy(path);
    for comp in path
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
    {
        let sub = match (node.kind, node.subtree) {
            (NodeKind::Dir, Some(s)) => s,
            _ => {
                return Err(Error::Usage(format!(
                    "path {shown:?}: {:?} is not a directory",
                    node.name_lossy()
                )));
            }
        };
        let t = repo.load_tree(&sub)?;
        node = t.find(comp).cloned().ok_or_else(|| {
            Error::Usage(format!(
                "path {shown:?}: {:?} not found in the snapshot",
                String::from_utf8_lossy(comp)
            ))
        })?;
    }
    Ok(node)
}

/// A directory node standing for a snapshot's root tree.
fn root_node(root: Id) -> Node {
    Node {
        subtree: Some(root),
        ..Node::made_up(Vec::new(), NodeKind::Dir, 0o755)
    }
}

/// Writes `path` of `snap` to `out`: a file's bytes, a directory as an
/// archive of `format`, a symlink's target. Holds a shared lock.
pub fn dump(
    repo: &Repository,
    snap: &Snapshot,
    path: &[u8],
    format: ArchiveFormat,
    out: &mut dyn Write,
) -> Result<DumpReport> {
    let _lock = repo.lock_for_reading()?;
    let node = node_at(repo, snap.tree, path)?;
    let mut report = DumpReport::default();
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let w = |e| Error::io("the output", e);
    match node.kind {
        NodeKind::File => {
            report.bytes = write_content(repo, &node, &mut out)?;
            report.files = 1;
        }
        NodeKind::Symlink => out.write_all(&node.link_target).map_err(w)?,
        NodeKind::Dir => {
            let trimmed: Vec<u8> = trim_slashes(path);
            report.archive = true;
            match format {
                ArchiveFormat::Tar => tar::write(repo, &node, &trimmed, &mut out, &mut report)?,
                ArchiveFormat::Zip => zip::write(repo, &node, &trimmed, &mut out, &mut report)?,
            }
        }
        k => {
            return Err(Error::Usage(format!(
                "path {:?} is a {}: only files, directories and symlinks can be dumped",
                String::from_utf8_lossy(path),
                k.word()
            )));
        }
    }
    out.flush().map_err(w)?;
    Ok(report)
}

/// Like [`dump`], into the file `target`: written under a temporary name
/// beside it and renamed into place only when complete, so a failed dump
/// leaves no partial file under the name.
pub fn dump_to_file(
    repo: &Repository,
    snap: &Snapshot,
    path: &[u8],
    format: ArchiveFormat,
    target: &Path,
) -> Result<DumpReport> {
    let name = target
        .file_name()
        .ok_or_else(|| Error::Usage(format!("--target {}: not a file name", target.display())))?;
    let mut tmp_name = b".".to_vec();
    tmp_name.extend_from_slice(name.as_bytes());
    tmp_name.extend_from_slice(format!(".larder-dump-{}", std::process::id()).as_bytes());
    let tmp = target.with_file_name(std::ffi::OsStr::from_bytes(&tmp_name));
    let mut f = fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    let res = dump(repo, snap, path, format, &mut f)
        .and_then(|r| f.sync_all().map(|()| r).map_err(|e| Error::io(&tmp, e)))
        .and_then(|r| {
            fs::rename(&tmp, target)
                .map(|()| r)
                .map_err(|e| Error::io(target, e))
        });
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res
}

/// `path` without leading and trailing slashes (and `.` components).
fn trim_slashes(path: &[u8]) -> Vec<u8> {
    let comps: Vec<&[u8]> = path
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .collect();
    comps.join(&b'/')
}

/// Writes a file's content, each chunk verified against its ID before any
/// of it is written; returns the bytes written. A chunk list that does not
/// add up to the recorded size is an error (after the verified bytes).
pub(crate) fn write_content(repo: &Repository, node: &Node, out: &mut dyn Write) -> Result<u64> {
    let mut total = 0u64;
    for group in node.content.chunks(READ_AHEAD) {
        let blobs: Vec<Result<Vec<u8>>> = group.par_iter().map(|id| repo.read_blob(id)).collect();
        for b in blobs {
            let b = b?;
            crate::interrupt::check()?;
            out.write_all(&b).map_err(|e| Error::io("the output", e))?;
            total += b.len() as u64;
        }
    }
    if total != node.size {
        return Err(Error::corrupt(
            format!("file {:?}", node.name_lossy()),
            format!("chunks add up to {total} bytes, the file has {}", node.size),
        ));
    }
    Ok(total)
}

/// `prefix/name` (or `name` at the top).
fn join(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = prefix.to_vec();
    if !p.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}
