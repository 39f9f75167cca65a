//! Comparing two snapshot trees: `diff` walks them side by side and skips
//! every subtree whose ID is equal, so its cost grows with the change, not
//! with the tree.

use crate::error::{Error, Result};
use crate::id::Id;
use crate::pack::BlobType;
use crate::repository::Repository;
use crate::tree::check_depth;
use crate::tree::{Node, NodeKind, Tree};
use serde::Serialize;
use std::collections::HashSet;

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffEntry {
    pub path: String,
    /// `+` added, `-` removed, `M` content changed, `T` type changed,
    /// `U` metadata changed (with `--metadata`).
    pub modifier: char,
    /// For `U`: which metadata fields changed.
    pub changes: Vec<&'static str>,
}

/// Counts for the summary.
#[derive(Debug, Default, Clone, Serialize)]
pub struct DiffStats {
    pub files_added: u64,
    pub files_removed: u64,
    pub files_changed: u64,
    pub dirs_added: u64,
    pub dirs_removed: u64,
    pub others_added: u64,
    pub others_removed: u64,
    pub metadata_changed: u64,
    pub blobs_added: u64,
    pub blobs_removed: u64,
    pub bytes_added: u64,
    pub bytes_removed: u64,
    /// Trees loaded to compute this diff (shows the cost follows the change).
    pub trees_loaded: u64,
}

struct Differ<'r, 'f> {
    repo: &'r Repository,
    metadata: bool,
    out: &'f mut dyn FnMut(&DiffEntry),
    stats: DiffStats,
    added: HashSet<Id>,
    removed: HashSet<Id>,
    /// How deep below the root the walk is ([`crate::tree::MAX_DEPTH`]).
    depth: usize,
}

fn display_path(parent: &str, n: &Node) -> String {
    let mut p = format!("{parent}/{}", n.name_lossy());
    if n.kind == NodeKind::Dir {
        p.push('/');
    }
    p
}

impl Differ<'_, '_> {
    fn load(&mut self, id: &Id) -> Result<Tree> {
        self.stats.trees_loaded += 1;
        self.repo.load_tree(id)
    }

    /// Loads the two sides of a changed directory at once (two threads:
    /// decoding a large tree is most of a diff's work).
    fn load_pair(&mut self, a: &Id, b: &Id) -> Result<(Tree, Tree)> {
        self.stats.trees_loaded += 2;
        let repo = self.repo;
        let (ta, tb) = rayon::join(|| repo.load_tree(a), || repo.load_tree(b));
        Ok((ta?, tb?))
    }

    fn emit(&mut self, path: String, modifier: char, changes: Vec<&'static str>) {
        (self.out)(&DiffEntry {
            path,
            modifier,
            changes,
        });
    }

    /// Reports `n` and everything beneath it as added (`+`) or removed (`-`).
    fn whole(&mut self, parent: &str, n: &Node, added: bool) -> Result<()> {
        let p = display_path(parent, n);
        self.emit(p.clone(), if added { '+' } else { '-' }, Vec::new());
        match (n.kind, added) {
            (NodeKind::File, true) => {
                self.stats.files_added += 1;
                self.added.extend(n.content.iter().copied());
            }
            (NodeKind::File, false) => {
                self.stats.files_removed += 1;
                self.removed.extend(n.content.iter().copied());
            }
            (NodeKind::Dir, true) => self.stats.dirs_added += 1,
            (NodeKind::Dir, false) => self.stats.dirs_removed += 1,
            (_, true) => self.stats.others_added += 1,
            (_, false) => self.stats.others_removed += 1,
        }
        if let (NodeKind::Dir, Some(s)) = (n.kind, n.subtree) {
            self.depth += 1;
            check_depth(self.depth, format!("tree {s}"))?;
            let t = self.load(&s)?;
            let base = p.trim_end_matches('/').to_string();
            for c in &t.nodes {
                self.whole(&base, c, added)?;
            }
            self.depth -= 1;
        }
        Ok(())
    }

    fn trees(&mut self, parent: &str, a: &Tree, b: &Tree) -> Result<()> {
        let (mut i, mut j) = (0, 0);
        while i < a.nodes.len() || j < b.nodes.len() {
            let order = match (a.nodes.get(i), b.nodes.get(j)) {
                (Some(x), Some(y)) => x.name.cmp(&y.name),
                (Some(_), None) => std::cmp::Ordering::Less,
                _ => std::cmp::Ordering::Greater,
            };
            match order {
                std::cmp::Ordering::Less => {
                    self.whole(parent, &a.nodes[i], false)?;
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    self.whole(parent, &b.nodes[j], true)?;
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    self.nodes(parent, &a.nodes[i], &b.nodes[j])?;
                    i += 1;
                    j += 1;
                }
            }
        }
        Ok(())
    }

    fn nodes(&mut self, parent: &str, x: &Node, y: &Node) -> Result<()> {
        if x.kind != y.kind {
            self.emit(display_path(parent, y), 'T', Vec::new());
            self.whole_stats_only(x, false)?;
            self.whole_stats_only(y, true)?;
            return Ok(());
        }
        // Most nodes compared are unchanged: the path is built only for
        // one that is reported or descended into.
        match x.kind {
            NodeKind::Dir => {
                if self.metadata {
                    let ch = x.metadata_changes(y);
                    if !ch.is_empty() {
                        self.stats.metadata_changed += 1;
                        self.emit(display_path(parent, y), 'U', ch);
                    }
                }
                if x.subtree != y.subtree {
                    let p = display_path(parent, y);
                    let (ta, tb) = match (x.subtree, y.subtree) {
                        (Some(a), Some(b)) => {
                            check_depth(self.depth + 1, format!("tree {b}"))?;
                            self.load_pair(&a, &b)?
                        }
                        _ => return Err(Error::corrupt(&p, "directory without a tree")),
                    };
                    self.depth += 1;
                    self.trees(p.trim_end_matches('/'), &ta, &tb)?;
                    self.depth -= 1;
                }
            }
            _ => {
                let content_changed =
                    x.content != y.content || x.link_target != y.link_target || x.rdev != y.rdev;
                if content_changed {
                    self.emit(display_path(parent, y), 'M', Vec::new());
                    if x.kind == NodeKind::File {
                        self.stats.files_changed += 1;
                    }
                    self.removed.extend(x.content.iter().copied());
                    self.added.extend(y.content.iter().copied());
                } else if self.metadata {
                    let ch = x.metadata_changes(y);
                    if !ch.is_empty() {
                        self.stats.metadata_changed += 1;
                        self.emit(display_path(parent, y), 'U', ch);
                    }
                }
            }
        }
        Ok(())
    }

    fn whole_stats_only(&mut self, n: &Node, added: bool) -> Result<()> {
        match (n.kind, added) {
            (NodeKind::File, true) => self.added.extend(n.content.iter().copied()),
            (NodeKind::File, false) => self.removed.extend(n.content.iter().copied()),
            _ => {}
        }
        Ok(())
    }
}

/// Compares trees `a` and `b`, calling `out` for each changed path, under
/// a shared lock ([`Repository::lock_for_reading`]). The index lookups
/// share one read transaction ([`Repository::reading`]).
pub fn diff(
    repo: &Repository,
    a: Id,
    b: Id,
    metadata: bool,
    out: &mut dyn FnMut(&DiffEntry),
) -> Result<DiffStats> {
    let _lock = repo.lock_for_reading()?;
    repo.reading(|| diff_trees(repo, a, b, metadata, out))
}

fn diff_trees(
    repo: &Repository,
    a: Id,
    b: Id,
    metadata: bool,
    out: &mut dyn FnMut(&DiffEntry),
) -> Result<DiffStats> {
    let mut d = Differ {
        repo,
        metadata,
        out,
        stats: DiffStats::default(),
        added: HashSet::new(),
        removed: HashSet::new(),
        depth: 1,
    };
    if a != b {
        let (ta, tb) = d.load_pair(&a, &b)?;
        d.trees("", &ta, &tb)?;
    }
    let Differ {
        mut stats,
        added,
        removed,
        ..
    } = d;
    for id in added.difference(&removed) {
        stats.blobs_added += 1;
        stats.bytes_added += blob_size(repo, id)?;
    }
    for id in removed.difference(&added) {
        stats.blobs_removed += 1;
        stats.bytes_removed += blob_size(repo, id)?;
    }
    Ok(stats)
}

fn blob_size(repo: &Repository, id: &Id) -> Result<u64> {
    Ok(match repo.lookup(id)? {
        Some(l) if l.entry.ty == BlobType::Data => l.entry.plain_len as u64,
        _ => 0,
    })
}
