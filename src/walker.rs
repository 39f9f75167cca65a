//! Walking snapshot trees: resolving a path inside a snapshot to its tree,
//! visiting every node below a tree depth first (`ls`, `find`), or nested
//! with each directory's entries inside it (`ls --ncdu`), and visiting
//! every distinct tree reachable from many roots once (`check`, `prune`),
//! and counting the files below trees for progress totals (`restore`,
//! `copy`). Trees are loaded through [`Repository::load_tree`]; nothing
//! here reads packs itself.

use crate::error::{Error, Result};
use crate::id::Id;
use crate::progress::Progress;
use crate::repository::Repository;
use crate::tree::{Node, NodeKind, Tree, check_depth};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

/// The tree ID of directory `sub` (a `/`-separated path) below `root`.
pub fn tree_at(repo: &Repository, root: Id, sub: &str) -> Result<Id> {
    let mut cur = root;
    for comp in sub.split('/').filter(|c| !c.is_empty() && *c != ".") {
        let t = repo.load_tree(&cur)?;
        let n = t.find(comp.as_bytes()).ok_or_else(|| {
            Error::Usage(format!("path {sub:?}: {comp:?} not found in the snapshot"))
        })?;
        cur = match (n.kind, n.subtree) {
            (NodeKind::Dir, Some(s)) => s,
            _ => {
                return Err(Error::Usage(format!(
                    "path {sub:?}: {comp:?} is not a directory"
                )));
            }
        };
    }
    Ok(cur)
}

/// Calls `f(path, node)` for every node below `root` (or below `sub`),
/// depth first, in name order, under a shared lock
/// ([`Repository::lock_for_reading`]; `ls`). Paths start with `/`.
pub fn walk(
    repo: &Repository,
    root: Id,
    sub: Option<&str>,
    f: &mut dyn FnMut(&str, &Node),
) -> Result<()> {
    let _lock = repo.lock_for_reading()?;
    let sub = sub.unwrap_or("");
    let start = tree_at(repo, root, sub)?;
    let prefix = format!("/{}", sub.trim_matches('/'));
    let prefix = if prefix == "/" { String::new() } else { prefix };
    walk_tree(repo, &start, &prefix, f, depth_of(sub))
}

/// The depth of the tree of directory `sub` (a `/`-separated path below
/// the root, whose tree is at depth 1).
fn depth_of(sub: &str) -> usize {
    1 + sub
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .count()
}

fn walk_tree(
    repo: &Repository,
    id: &Id,
    prefix: &str,
    f: &mut dyn FnMut(&str, &Node),
    depth: usize,
) -> Result<()> {
    check_depth(depth, format!("tree {id}"))?;
    let t = repo.load_tree(id)?;
    for n in &t.nodes {
        let p = format!("{prefix}/{}", n.name_lossy());
        f(&p, n);
        if let (NodeKind::Dir, Some(s)) = (n.kind, n.subtree) {
            walk_tree(repo, &s, &p, f, depth + 1)?;
        }
    }
    Ok(())
}

/// One step of [`walk_nested`].
pub enum Step<'a> {
    /// A directory, before its entries.
    Enter(&'a Node),
    /// The end of the directory entered last.
    Leave,
    /// An entry that is not a directory.
    Entry(&'a Node),
}

/// Hands `f` every node below `root` (or below `sub`) as [`walk`] does,
/// with each directory's entries between its [`Step::Enter`] and
/// [`Step::Leave`] (for nested output: `ls --ncdu`). Under a shared lock.
pub fn walk_nested(
    repo: &Repository,
    root: Id,
    sub: Option<&str>,
    f: &mut dyn FnMut(Step<'_>) -> Result<()>,
) -> Result<()> {
    let _lock = repo.lock_for_reading()?;
    let sub = sub.unwrap_or("");
    let start = tree_at(repo, root, sub)?;
    nest(repo, &start, f, depth_of(sub))
}

fn nest(
    repo: &Repository,
    id: &Id,
    f: &mut dyn FnMut(Step<'_>) -> Result<()>,
    depth: usize,
) -> Result<()> {
    check_depth(depth, format!("tree {id}"))?;
    let t = repo.load_tree(id)?;
    for n in &t.nodes {
        match (n.kind, n.subtree) {
            (NodeKind::Dir, Some(s)) => {
                f(Step::Enter(n))?;
                nest(repo, &s, f, depth + 1)?;
                f(Step::Leave)?;
            }
            (NodeKind::Dir, None) => {
                f(Step::Enter(n))?;
                f(Step::Leave)?;
            }
            _ => f(Step::Entry(n))?,
        }
    }
    Ok(())
}

/// What [`walk_unique`] hands its visitor for each distinct tree.
pub enum Visit<'a> {
    /// The tree loaded.
    Tree {
        id: Id,
        /// Where it was first reached, for messages (`snapshot 1a2b3c4d/home/me`).
        path: &'a str,
        tree: &'a Tree,
    },
    /// The tree could not be loaded (missing, corrupt).
    Unreadable { id: Id, path: &'a str, error: Error },
}

/// Visits every distinct tree reachable from `roots` (each a tree ID and a
/// label for messages) once, loading each with the index's type check.
/// Subtrees shared by many snapshots are visited once, so the cost follows
/// the number of distinct trees, not of snapshots. Returns how many
/// distinct trees were reached.
pub fn walk_unique(
    repo: &Repository,
    roots: impl IntoIterator<Item = (Id, String)>,
    visit: &mut dyn FnMut(Visit<'_>) -> Result<()>,
) -> Result<usize> {
    let mut seen: HashSet<Id> = HashSet::new();
    let mut stack: Vec<(Id, String, usize)> = roots.into_iter().map(|(i, p)| (i, p, 1)).collect();
    stack.reverse();
    while let Some((id, path, depth)) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        // Deeper than every other walk goes: what they cannot read.
        let loaded =
            check_depth(depth, format!("tree {id}")).and_then(|_| repo.load_tree_checked(&id));
        let tree = match loaded {
            Ok(t) => t,
            Err(error) => {
                visit(Visit::Unreadable {
                    id,
                    path: &path,
                    error,
                })?;
                continue;
            }
        };
        visit(Visit::Tree {
            id,
            path: &path,
            tree: &tree,
        })?;
        for n in tree.nodes.iter().rev() {
            if let (NodeKind::Dir, Some(s)) = (n.kind, n.subtree) {
                stack.push((s, format!("{path}/{}", n.name_lossy()), depth + 1));
            }
        }
    }
    Ok(seen.len())
}

/// Counts the files (and their bytes) below `roots` and reports them as
/// progress totals while it goes, complete at the end. With `once`, a tree
/// met again is not counted again (as `copy` handles it); without, every
/// occurrence counts (as `restore` writes it). Gives up, with no complete
/// total, when `stop` is set or a stop was asked for; a tree that cannot
/// be read is left out (the operation itself reports it).
pub fn count_files(
    repo: &Repository,
    roots: &[Id],
    once: bool,
    stop: &AtomicBool,
    progress: &dyn Progress,
) {
    let (mut files, mut bytes) = (0u64, 0u64);
    let mut seen: HashSet<Id> = HashSet::new();
    let mut todo: Vec<Id> = roots.iter().rev().copied().collect();
    while let Some(t) = todo.pop() {
        if stop.load(Ordering::Relaxed) || crate::interrupt::requested() {
            return;
        }
        if once && !seen.insert(t) {
            continue;
        }
        let Ok(tree) = repo.load_tree(&t) else {
            continue;
        };
        for n in &tree.nodes {
            match n.kind {
                NodeKind::File => {
                    files += 1;
                    bytes += n.size;
                }
                NodeKind::Dir => todo.extend(n.subtree),
                _ => {}
            }
        }
        progress.totals(files, bytes, false);
    }
    progress.totals(files, bytes, true);
}
