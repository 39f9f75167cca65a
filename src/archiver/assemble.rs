//! Putting the walk's nodes together in walk order while the reading
//! workers read files out of order. The walk pushes events (a directory
//! opens, a ready node, a file being read, a directory closes) onto a
//! queue; the front is taken as soon as it is ready: a file once its
//! worker has answered, a closing directory by encoding and storing its
//! tree (or reusing the parent's). Everything is taken in the order it was
//! pushed, so a backup gives the same trees and chunk lists as a walk that
//! read each file itself. The queue is bounded in files and in events: when
//! it is full the walk waits for the file at its front.

use super::file::ReadOutcome;
use super::walk::Archiver;
use crate::error::{Error, Result};
use crate::progress::Action;
use crate::tree::{Node, NodeKind, Tree};
use crossbeam_channel::Receiver;
use std::collections::VecDeque;
use std::sync::Arc;

/// Files being read that the walk may get ahead of. While one reader is
/// held on the front file, the others go on only as far as this lets the
/// walk hand them files: a fresh repository's first backup trains its
/// dictionary on a reader (about 60 ms), and with 512 the other core ran
/// out of files after about 20 ms of it on the benchmark tree (13 KiB a
/// file on average); with 4,096 it stays busy throughout, for about 1 MiB
/// more peak RSS (bench/results/2026-12-04-viewbase, `window-*`). The
/// answered files waiting behind the front hold their nodes and chunk
/// lists (32 bytes per chunk), not their data.
const MAX_PENDING_FILES: usize = 4096;
/// Events waiting behind the front file.
const MAX_EVENTS: usize = 16_384;

/// One step of the walk, in walk order.
pub(super) enum Event {
    /// A directory's entries follow.
    Open,
    /// A finished node of the current directory.
    Ready(Node),
    /// A file a worker is reading.
    File(PendingFile),
    /// The current directory's entries are all pushed.
    Close(Box<DirPrep>),
}

/// A file handed to a reading worker.
pub(super) struct PendingFile {
    /// Its path, when the progress shows each entry (`-vv`).
    pub(super) path: Option<std::path::PathBuf>,
    /// Its node from its metadata (size, times, attributes).
    pub(super) node: Node,
    /// Whether the parent snapshot has it (changed, not new).
    pub(super) had_parent: bool,
    /// The size the walk saw.
    pub(super) len_seen: u64,
    pub(super) rx: Receiver<Result<ReadOutcome>>,
}

/// A directory's node without its subtree, and the parent snapshot's node
/// and tree of it.
pub(super) struct DirPrep {
    /// Its path, when the progress shows each entry (`-vv`).
    pub(super) path: Option<std::path::PathBuf>,
    pub(super) node: Node,
    pub(super) old: Option<super::parent::OldNode>,
    pub(super) old_tree: Option<Arc<Tree>>,
    /// Whether the old node's tree blob was found in the index.
    pub(super) subtree_known: bool,
}

/// The queue of events and the entries of the directories open in it.
pub(super) struct Assembly {
    events: VecDeque<Event>,
    files: usize,
    /// The entries gathered so far of each open directory; the first holds
    /// what a backed-up path itself becomes.
    frames: Vec<Vec<Node>>,
}

impl Default for Assembly {
    fn default() -> Self {
        Assembly {
            events: VecDeque::new(),
            files: 0,
            frames: vec![Vec::new()],
        }
    }
}

impl Archiver<'_, '_> {
    /// Queues `e` and takes from the front what is ready; waits for the
    /// front file while the queue is full.
    pub(super) fn push(&mut self, e: Event) -> Result<()> {
        if matches!(e, Event::File(_)) {
            self.assembly.files += 1;
        }
        self.assembly.events.push_back(e);
        while self.take_one(false)? {}
        while self.assembly.files > MAX_PENDING_FILES || self.assembly.events.len() > MAX_EVENTS {
            self.take_one(true)?;
        }
        Ok(())
    }

    /// Takes everything queued (waiting for every file) and returns the
    /// node of the backed-up path, if it has one.
    pub(super) fn drain(&mut self) -> Result<Option<Node>> {
        while !self.assembly.events.is_empty() {
            self.take_one(true)?;
        }
        if self.assembly.frames.len() != 1 {
            return Err(Error::internal("the walk left a directory open"));
        }
        Ok(self.assembly.frames[0].pop())
    }

    /// Takes the front event if it is ready (with `wait`, waits for it);
    /// returns whether one was taken.
    fn take_one(&mut self, wait: bool) -> Result<bool> {
        let ready = match self.assembly.events.front() {
            None => return Ok(false),
            Some(Event::File(p)) => wait || !p.rx.is_empty(),
            Some(_) => true,
        };
        if !ready {
            return Ok(false);
        }
        if matches!(self.assembly.events.front(), Some(Event::File(p)) if p.rx.is_empty()) {
            // About to wait for a file: no view of the index is held open
            // meanwhile (it would keep the WAL from being checkpointed).
            self.parent.release()?;
        }
        let Some(e) = self.assembly.events.pop_front() else {
            return Ok(false);
        };
        let node = match e {
            Event::Open => {
                self.assembly.frames.push(Vec::new());
                return Ok(true);
            }
            Event::Ready(n) => Some(n),
            Event::File(p) => {
                self.assembly.files -= 1;
                let outcome =
                    p.rx.recv()
                        .map_err(|_| Error::internal("a reading worker stopped"))??;
                self.file_read(p, outcome)
            }
            Event::Close(prep) => {
                let children = self
                    .assembly
                    .frames
                    .pop()
                    .filter(|_| !self.assembly.frames.is_empty())
                    .ok_or_else(|| {
                        Error::internal("the walk closed a directory it never opened")
                    })?;
                Some(self.dir_finish(*prep, children)?)
            }
        };
        if let (Some(n), Some(frame)) = (node, self.assembly.frames.last_mut()) {
            frame.push(n);
        }
        Ok(true)
    }

    /// The node of a file a worker read, with its counters and warnings;
    /// None for one left out (it could not be opened or read at all).
    fn file_read(&mut self, p: PendingFile, r: ReadOutcome) -> Option<Node> {
        let mut node = p.node;
        if let Some(size) = r.size {
            self.summary.bytes_read += size;
            node.content = r.content;
            node.size = size;
        }
        if let Some(msg) = r.warning {
            self.warnings.push(msg);
            // A file that changed while read keeps what was read; one that
            // could not be opened or read is left out.
            if node.content.is_empty() && node.size > 0 || !r.exists {
                self.summary.total_files -= 1;
                return None;
            }
            if node.content.is_empty() && node.size == 0 && p.len_seen > 0 {
                self.summary.total_files -= 1;
                return None;
            }
        }
        self.summary.total_bytes += node.size;
        self.progress.file_done();
        let action = if p.had_parent {
            self.summary.files_changed += 1;
            Action::Modified
        } else {
            self.summary.files_new += 1;
            Action::New
        };
        if let Some(path) = &p.path {
            self.progress.tell(path, false, action, node.size);
        }
        Some(node)
    }

    /// Encodes and stores a directory's tree, reusing the parent's blob ID
    /// when the entries are identical and the blob is still in the index.
    fn dir_finish(&mut self, prep: DirPrep, children: Vec<Node>) -> Result<Node> {
        let DirPrep {
            path,
            mut node,
            old,
            old_tree,
            subtree_known,
        } = prep;
        let mut tree = Tree { nodes: children };
        tree.canonicalize();
        if let (Some(o), Some(ot)) = (&old, &old_tree)
            && o.kind == NodeKind::Dir
            && **ot == tree
            && let Some(sub) = o.subtree
            && (subtree_known || self.blobs.all_known(&[sub])?)
        {
            node.subtree = Some(sub);
            self.trees.note(sub);
            self.summary.dirs_unmodified += 1;
            self.last_tree = Some(tree);
            if let Some(path) = &path {
                self.progress.tell(path, true, Action::Unchanged, 0);
            }
            return Ok(node);
        }
        node.subtree = Some(self.store_tree(&tree)?);
        self.last_tree = Some(tree);
        let action = if old.is_some() {
            self.summary.dirs_changed += 1;
            Action::Modified
        } else {
            self.summary.dirs_new += 1;
            Action::New
        };
        if let Some(path) = &path {
            self.progress.tell(path, true, action, 0);
        }
        Ok(node)
    }
}
