//! The FUSE operations of the read-only view: lookups, attributes (the
//! recorded modes, owners, times, sizes), directory listings, symlink
//! targets, extended attributes, and reads served blob by blob: each chunk
//! is read from its pack by range and verified (the repository's blob read),
//! then kept in a small LRU cache.

use super::cache::ByteLru;
use super::inodes::{Entry, Inodes};
use crate::error::{Error, Result};
use crate::id::Id;
use crate::repository::Repository;
use crate::tree::{Node, NodeKind, Tree};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyXattr,
    Request,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long the kernel may keep answers: nothing in the view changes.
const TTL: Duration = Duration::from_secs(300);

/// An open file: where each chunk starts, and the chunk lengths.
struct ChunkMap {
    /// (blob, offset in the file, length).
    chunks: Vec<(Id, u64, u64)>,
    size: u64,
}

/// A directory's entries, turned into [`Entry`]s only as they are listed.
enum Listing {
    Virtual(Arc<super::inodes::VDir>),
    Tree(Arc<Tree>),
}

impl Listing {
    fn len(&self) -> usize {
        match self {
            Listing::Virtual(d) => d.entries.len(),
            Listing::Tree(t) => t.nodes.len(),
        }
    }

    fn get(&self, i: usize) -> Option<(&[u8], Entry)> {
        match self {
            Listing::Virtual(d) => d.entries.get(i).map(|(n, e)| (n.as_slice(), e.clone())),
            Listing::Tree(t) => t
                .nodes
                .get(i)
                .map(|n| (n.name.as_slice(), LarderFs::node_entry(n))),
        }
    }
}

/// The mounted view.
pub struct LarderFs {
    repo: Arc<Repository>,
    inodes: Inodes,
    blobs: ByteLru<Vec<u8>>,
    trees: ByteLru<Tree>,
    handles: Mutex<HashMap<u64, Arc<ChunkMap>>>,
    next_fh: AtomicU64,
    uid: u32,
    gid: u32,
    /// When the view was mounted: the time of `latest` links.
    now_ns: i64,
}

fn time(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

fn file_type(k: NodeKind) -> FileType {
    match k {
        NodeKind::File => FileType::RegularFile,
        NodeKind::Dir => FileType::Directory,
        NodeKind::Symlink => FileType::Symlink,
        NodeKind::Fifo => FileType::NamedPipe,
        NodeKind::CharDev => FileType::CharDevice,
        NodeKind::BlockDev => FileType::BlockDevice,
        NodeKind::Socket => FileType::Socket,
    }
}

/// Logs a failed operation (the kernel only sees EIO) and returns EIO.
fn eio(e: &Error) -> Errno {
    eprintln!("larder mount: {e}");
    Errno::EIO
}

impl LarderFs {
    /// A view of `root` over `repo`, caching up to `cache_bytes` of blobs.
    pub fn new(repo: Arc<Repository>, root: Entry, cache_bytes: u64, now_ns: i64) -> Self {
        LarderFs {
            repo,
            inodes: Inodes::new(root),
            blobs: ByteLru::new(cache_bytes),
            trees: ByteLru::new(cache_bytes / 4),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
            now_ns,
        }
    }

    /// A verified blob, from the cache or its pack.
    fn blob(&self, id: &Id) -> Result<Arc<Vec<u8>>> {
        if let Some(b) = self.blobs.get(id) {
            return Ok(b);
        }
        let b = Arc::new(self.repo.read_blob(id)?);
        self.blobs.put(*id, b.clone(), b.len() as u64);
        Ok(b)
    }

    /// A decoded tree, from the cache or its pack.
    fn tree(&self, id: &Id) -> Result<Arc<Tree>> {
        if let Some(t) = self.trees.get(id) {
            return Ok(t);
        }
        let bytes = self.repo.read_blob(id)?;
        let t = Arc::new(Tree::decode(&format!("tree {id}"), &bytes)?);
        // Decoded nodes take about three times their encoded size.
        self.trees.put(*id, t.clone(), bytes.len() as u64 * 3);
        Ok(t)
    }

    /// The tree a directory entry lists, if it is a recorded directory.
    fn subtree(e: &Entry) -> Option<Id> {
        match e {
            Entry::SnapRoot { tree, .. } => Some(*tree),
            Entry::Node(n) if n.kind == NodeKind::Dir => n.subtree,
            _ => None,
        }
    }

    fn node_entry(n: &Node) -> Entry {
        Entry::Node(Arc::new(n.clone()))
    }

    /// The entry named `name` in directory `dir`.
    fn find(&self, dir: &Entry, name: &[u8]) -> std::result::Result<Option<Entry>, Errno> {
        if let Entry::Virtual(d) = dir {
            return Ok(d
                .entries
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, e)| e.clone()));
        }
        match (Self::subtree(dir), dir) {
            (Some(t), _) => {
                let tree = self.tree(&t).map_err(|e| eio(&e))?;
                Ok(tree.find(name).map(Self::node_entry))
            }
            (None, Entry::Node(n)) if n.kind == NodeKind::Dir => Ok(None),
            _ => Err(Errno::ENOTDIR),
        }
    }

    /// What directory `dir` lists.
    fn list(&self, dir: &Entry) -> std::result::Result<Listing, Errno> {
        if let Entry::Virtual(d) = dir {
            return Ok(Listing::Virtual(d.clone()));
        }
        match (Self::subtree(dir), dir) {
            (Some(t), _) => Ok(Listing::Tree(self.tree(&t).map_err(|e| eio(&e))?)),
            (None, Entry::Node(n)) if n.kind == NodeKind::Dir => {
                Ok(Listing::Tree(Arc::new(Tree::default())))
            }
            _ => Err(Errno::ENOTDIR),
        }
    }

    /// The attributes of inode `ino` holding `e`.
    fn attr(&self, ino: u64, e: &Entry) -> FileAttr {
        let dir = |t: i64| FileAttr {
            ino: INodeNo(ino),
            size: 0,
            blocks: 0,
            atime: time(t),
            mtime: time(t),
            ctime: time(t),
            crtime: time(t),
            kind: FileType::Directory,
            perm: 0o555,
            nlink: 2,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            flags: 0,
            blksize: 4096,
        };
        match e {
            Entry::Virtual(d) => dir(d.time_ns),
            Entry::SnapRoot { time_ns, .. } => dir(*time_ns),
            Entry::Link(t) => FileAttr {
                kind: FileType::Symlink,
                perm: 0o777,
                size: t.len() as u64,
                nlink: 1,
                ..dir(self.now_ns)
            },
            Entry::Node(n) => {
                let size = match n.kind {
                    NodeKind::File => n.size,
                    NodeKind::Symlink => n.link_target.len() as u64,
                    _ => 0,
                };
                FileAttr {
                    ino: INodeNo(ino),
                    size,
                    blocks: size.div_ceil(512),
                    atime: time(n.atime_ns.unwrap_or(n.mtime_ns)),
                    mtime: time(n.mtime_ns),
                    ctime: time(n.ctime_ns),
                    crtime: time(n.mtime_ns),
                    kind: file_type(n.kind),
                    perm: (n.mode & 0o7777) as u16,
                    nlink: if n.kind == NodeKind::Dir {
                        2
                    } else {
                        n.links.clamp(1, u32::MAX as u64) as u32
                    },
                    uid: n.uid,
                    gid: n.gid,
                    rdev: n.rdev as u32,
                    flags: 0,
                    blksize: 4096,
                }
            }
        }
    }

    fn entry(&self, ino: INodeNo) -> std::result::Result<Entry, Errno> {
        self.inodes.get(ino.0).map(|(_, e)| e).ok_or(Errno::ENOENT)
    }

    /// The chunk map of a file node: each blob's plaintext length from the index.
    fn chunk_map(&self, n: &Node) -> Result<ChunkMap> {
        let locs = self.repo.lookup_many(&n.content)?;
        let mut chunks = Vec::with_capacity(locs.len());
        let mut at = 0u64;
        for (id, loc) in n.content.iter().zip(locs) {
            let loc = loc.ok_or_else(|| Error::MissingBlob(id.to_hex()))?;
            let len = loc.entry.plain_len as u64;
            chunks.push((*id, at, len));
            at += len;
        }
        Ok(ChunkMap { chunks, size: at })
    }

    /// Bytes `[offset, offset + size)` of an open file.
    fn read_range(&self, m: &ChunkMap, offset: u64, size: u64) -> Result<Vec<u8>> {
        let end = m.size.min(offset.saturating_add(size));
        let mut out = Vec::with_capacity(end.saturating_sub(offset) as usize);
        let first = m.chunks.partition_point(|c| c.1 + c.2 <= offset);
        for (id, start, len) in m.chunks[first..].iter() {
            if *start >= end {
                break;
            }
            let b = self.blob(id)?;
            let from = offset.max(*start) - start;
            let to = (end - start).min(*len);
            let slice = b
                .get(from as usize..to as usize)
                .ok_or_else(|| Error::corrupt(format!("blob {id}"), "shorter than indexed"))?;
            out.extend_from_slice(slice);
        }
        Ok(out)
    }

    fn xattrs(&self, ino: INodeNo) -> std::result::Result<Vec<crate::tree::Xattr>, Errno> {
        Ok(match self.entry(ino)? {
            Entry::Node(n) => n.xattrs.clone(),
            _ => Vec::new(),
        })
    }
}

/// Answers an xattr request of `size` bytes with `data`.
fn reply_sized(reply: ReplyXattr, size: u32, data: &[u8]) {
    if size == 0 {
        reply.size(data.len() as u32);
    } else if data.len() > size as usize {
        reply.error(Errno::ERANGE);
    } else {
        reply.data(data);
    }
}

impl Filesystem for LarderFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = self
            .entry(parent)
            .and_then(|dir| self.find(&dir, name.as_bytes()));
        match found {
            Ok(Some(e)) => {
                let ino = self.inodes.child(parent.0, name.as_bytes(), &e);
                reply.entry(&TTL, &self.attr(ino, &e), Generation(0));
            }
            Ok(None) => reply.error(Errno::ENOENT),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.entry(ino) {
            Ok(e) => reply.attr(&TTL, &self.attr(ino.0, &e)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.entry(ino) {
            Ok(Entry::Link(t)) => reply.data(&t),
            Ok(Entry::Node(n)) if n.kind == NodeKind::Symlink => reply.data(&n.link_target),
            Ok(_) => reply.error(Errno::EINVAL),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let n = match self.entry(ino) {
            Ok(Entry::Node(n)) if n.kind == NodeKind::File => n,
            Ok(Entry::Node(n)) if n.kind != NodeKind::Dir => return reply.error(Errno::EACCES),
            Ok(_) => return reply.error(Errno::EISDIR),
            Err(e) => return reply.error(e),
        };
        match self.chunk_map(&n) {
            Ok(m) => {
                let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut h) = self.handles.lock() {
                    h.insert(fh, Arc::new(m));
                }
                reply.opened(FileHandle(fh), FopenFlags::FOPEN_KEEP_CACHE);
            }
            Err(e) => reply.error(eio(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let m = self.handles.lock().ok().and_then(|h| h.get(&fh.0).cloned());
        let Some(m) = m else {
            return reply.error(Errno::EBADF);
        };
        match self.read_range(&m, offset, size as u64) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(eio(&e)),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if let Ok(mut h) = self.handles.lock() {
            h.remove(&fh.0);
        }
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let listed = self
            .inodes
            .get(ino.0)
            .ok_or(Errno::ENOENT)
            .and_then(|(parent, dir)| self.list(&dir).map(|l| (parent, l)));
        let (parent, entries) = match listed {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        // Offsets: 1 after `.`, 2 after `..`, i + 3 after entry i.
        for (i, name) in [(ino.0, "."), (parent, "..")].into_iter().enumerate() {
            if (i as u64) >= offset
                && reply.add(INodeNo(name.0), i as u64 + 1, FileType::Directory, name.1)
            {
                return reply.ok();
            }
        }
        for i in (offset.saturating_sub(2) as usize)..entries.len() {
            let Some((name, e)) = entries.get(i) else {
                break;
            };
            let child = self.inodes.child(ino.0, name, &e);
            let kind = self.attr(child, &e).kind;
            if reply.add(INodeNo(child), i as u64 + 3, kind, OsStr::from_bytes(name)) {
                break;
            }
        }
        reply.ok();
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        match self.xattrs(ino) {
            Ok(x) => match x.iter().find(|x| x.name == name.as_bytes()) {
                Some(x) => reply_sized(reply, size, &x.value),
                None => reply.error(Errno::NO_XATTR),
            },
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.xattrs(ino) {
            Ok(x) => {
                let mut names = Vec::new();
                for a in &x {
                    names.extend_from_slice(&a.name);
                    names.push(0);
                }
                reply_sized(reply, size, &names);
            }
            Err(e) => reply.error(e),
        }
    }
}
