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
    dir_at(repo, root, sub).map(|(_, id)| id)
}

/// Directory `sub` (a `/`-separated path) below `root`: its node (none for
/// the root itself, which has none) and its tree ID.
fn dir_at(repo: &Repository, root: Id, sub: &str) -> Result<(Option<Node>, Id)> {
    match node_at(repo, root, sub)? {
        At::Dir(node, id) => Ok((node, id)),
        At::Leaf(n) => Err(Error::Usage(format!(
            "path {sub:?}: {:?} is not a directory",
            n.name_lossy()
        ))),
    }
}

/// What a path in a snapshot names.
enum At {
    /// A directory: its node (none for the root) and its tree.
    Dir(Option<Node>, Id),
    /// Anything else, as the last component.
    Leaf(Node),
}

/// Follows `sub` down from `root`; errors name the path and the component.
fn node_at(repo: &Repository, root: Id, sub: &str) -> Result<At> {
    let mut cur = root;
    let mut node = None;
    let comps: Vec<&str> = sub
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    for (i, comp) in comps.iter().enumerate() {
        let t = repo.load_tree(&cur)?;
        let n = t.find(comp.as_bytes()).ok_or_else(|| {
            Error::Usage(format!("path {sub:?}: {comp:?} not found in the snapshot"))
        })?;
        cur = match (n.kind, n.subtree) {
            (NodeKind::Dir, Some(s)) => s,
            _ if i + 1 == comps.len() => return Ok(At::Leaf(n.clone())),
            _ => {
                return Err(Error::Usage(format!(
                    "path {sub:?}: {comp:?} is not a directory"
                )));
            }
        };
        node = Some(n.clone());
    }
    Ok(At::Dir(node, cur))
}

/// Calls `f(path, node)` for every node below `root` (or below `sub`),
/// depth first, in name order, under a shared lock
/// ([`Repository::lock_for_reading`]). Paths start with `/`.
pub fn walk(
    repo: &Repository,
    root: Id,
    sub: Option<&str>,
    f: &mut dyn FnMut(&str, &Node),
) -> Result<()> {
    let _lock = repo.lock_for_reading()?;
    let sub = sub.unwrap_or("");
    let start = tree_at(repo, root, sub)?;
    walk_tree(repo, &start, &prefix_of(sub), f, depth_of(sub), true)
}

/// The path printed for directory `sub`: `/` and its components, empty
/// for the root (whose entries then start with `/`).
fn prefix_of(sub: &str) -> String {
    let prefix = format!("/{}", sub.trim_matches('/'));
    if prefix == "/" { String::new() } else { prefix }
}

/// What `ls --sort` orders the listing by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    /// The tree's order: depth first, by name within each directory.
    Name,
    Size,
    /// Access time; nodes without one (saved without `--with-atime`) first.
    Atime,
    Ctime,
    Mtime,
    /// The name's last `.` and what follows (none: empty, first).
    Extension,
    Inode,
}

/// How [`list`] walks and orders (`ls --recursive`, `--sort`, `--reverse`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Listing {
    /// Below a path given, everything below it; else only its entries.
    /// The path's own node comes first either way (as restic lists it).
    /// Without a path, everything is listed either way.
    pub recursive: bool,
    /// Sort the whole listing by this key, ties by path (held in memory);
    /// none: the tree's order, streamed.
    pub sort: Option<SortKey>,
    /// Reverse the order (held in memory).
    pub reverse: bool,
}

/// Calls `f(path, node)` for the nodes `ls` lists under a shared lock:
/// without `sub`, every node below `root`; with `sub`, that directory's
/// node (none for the root), then its entries, or with
/// [`Listing::recursive`] every node below it (as [`walk`]). In the
/// tree's order, streamed, unless [`Listing::sort`] (other than
/// [`SortKey::Name`]) or [`Listing::reverse`] asks for another: then the
/// listing is held in memory (without file contents' chunk IDs and
/// xattrs) and sorted before the first call.
pub fn list(
    repo: &Repository,
    root: Id,
    sub: Option<&str>,
    how: &Listing,
    f: &mut dyn FnMut(&str, &Node),
) -> Result<()> {
    let lock = repo.lock_for_reading()?;
    let recursive = sub.is_none() || how.recursive;
    let named = sub.is_some();
    let sub = sub.unwrap_or("");
    let prefix = prefix_of(sub);
    let (node, start) = match node_at(repo, root, sub)? {
        At::Dir(node, start) => (node, start),
        // A file (or link, ...) named: its own line, as restic lists it.
        At::Leaf(n) => {
            f(&prefix, &n);
            return Ok(());
        }
    };
    let key = how.sort.unwrap_or(SortKey::Name);
    let visit = |f: &mut dyn FnMut(&str, &Node)| -> Result<()> {
        // PATH itself first, as restic lists it (the root has no node).
        if let (true, Some(n)) = (named, &node) {
            f(&prefix, n);
        }
        walk_tree(repo, &start, &prefix, f, depth_of(sub), recursive)
    };
    if key == SortKey::Name && !how.reverse {
        return visit(f);
    }
    let mut all: Vec<(String, Node)> = Vec::new();
    visit(&mut |p, n| {
        let mut n = n.clone();
        n.content = Vec::new();
        n.xattrs = Vec::new();
        all.push((p.to_string(), n));
    })?;
    drop(lock);
    sort_listing(&mut all, key, how.reverse);
    for (p, n) in &all {
        f(p, n);
    }
    Ok(())
}

/// Sorts `(path, node)` pairs in the tree's order by `key` (stable: ties by
/// path, and [`SortKey::Name`] keeps the tree's order), then reverses them
/// all with `reverse`.
pub fn sort_listing(all: &mut [(String, Node)], key: SortKey, reverse: bool) {
    if key != SortKey::Name {
        all.sort_by(|(pa, a), (pb, b)| {
            let by = match key {
                SortKey::Name => std::cmp::Ordering::Equal,
                SortKey::Size => a.size.cmp(&b.size),
                SortKey::Atime => a.atime_ns.cmp(&b.atime_ns),
                SortKey::Ctime => a.ctime_ns.cmp(&b.ctime_ns),
                SortKey::Mtime => a.mtime_ns.cmp(&b.mtime_ns),
                SortKey::Extension => extension(&a.name).cmp(extension(&b.name)),
                SortKey::Inode => a.inode.cmp(&b.inode),
            };
            by.then_with(|| pa.cmp(pb))
        });
    }
    if reverse {
        all.reverse();
    }
}

/// A name's extension as restic's `--sort extension` takes it (Go's
/// `path.Ext`): from its last `.` on, empty without one.
fn extension(name: &[u8]) -> &[u8] {
    name.iter()
        .rposition(|&b| b == b'.')
        .map_or(&[][..], |i| &name[i..])
}

/// The depth of the tree of directory `sub` (a `/`-separated path below
/// the root, whose tree is at depth 1).
fn depth_of(sub: &str) -> usize {
    1 + sub
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .count()
}

/// Calls `f` for the entries of tree `id` (and, with `recursive`, for
/// everything below them, each directory's entries right after it).
fn walk_tree(
    repo: &Repository,
    id: &Id,
    prefix: &str,
    f: &mut dyn FnMut(&str, &Node),
    depth: usize,
    recursive: bool,
) -> Result<()> {
    check_depth(depth, format!("tree {id}"))?;
    let t = repo.load_tree(id)?;
    for n in &t.nodes {
        let p = format!("{prefix}/{}", n.name_lossy());
        f(&p, n);
        if let (true, NodeKind::Dir, Some(s)) = (recursive, n.kind, n.subtree) {
            walk_tree(repo, &s, &p, f, depth + 1, recursive)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, size: u64, mtime_ns: i64, atime_ns: Option<i64>, inode: u64) -> Node {
        let mut n = Node::made_up(name.as_bytes().to_vec(), NodeKind::File, 0o644);
        (n.size, n.mtime_ns, n.atime_ns, n.inode) = (size, mtime_ns, atime_ns, inode);
        n.ctime_ns = -mtime_ns;
        n
    }

    /// A listing in the tree's order: `/d` before its entry `/d/z.rs`,
    /// which sorts after `/d.txt` by path.
    fn listing() -> Vec<(String, Node)> {
        [
            ("/b.txt", node("b.txt", 30, 2, Some(5), 9)),
            ("/d", node("d", 10, 3, None, 7)),
            ("/d/z.rs", node("z.rs", 30, 1, Some(1), 8)),
            ("/d.txt", node("d.txt", 20, 4, None, 6)),
            ("/.rc", node(".rc", 10, 3, Some(2), 5)),
        ]
        .into_iter()
        .map(|(p, n)| (p.to_string(), n))
        .collect()
    }

    fn sorted(key: SortKey, reverse: bool) -> Vec<String> {
        let mut all = listing();
        sort_listing(&mut all, key, reverse);
        all.into_iter().map(|(p, _)| p).collect()
    }

    #[test]
    fn the_walker_sorts_the_listing_by_each_key_ties_by_path() {
        let tree = ["/b.txt", "/d", "/d/z.rs", "/d.txt", "/.rc"];
        assert_eq!(sorted(SortKey::Name, false), tree);
        let mut back = tree;
        back.reverse();
        assert_eq!(sorted(SortKey::Name, true), back);
        let by_size = ["/.rc", "/d", "/d.txt", "/b.txt", "/d/z.rs"];
        assert_eq!(sorted(SortKey::Size, false), by_size);
        let mut back = by_size;
        back.reverse();
        assert_eq!(sorted(SortKey::Size, true), back);
        let by_mtime = ["/d/z.rs", "/b.txt", "/.rc", "/d", "/d.txt"];
        assert_eq!(sorted(SortKey::Mtime, false), by_mtime);
        // ctime is minus mtime here: the reverse, but for the tie.
        let by_ctime = ["/d.txt", "/.rc", "/d", "/b.txt", "/d/z.rs"];
        assert_eq!(sorted(SortKey::Ctime, false), by_ctime);
        // No atime first.
        let by_atime = ["/d", "/d.txt", "/d/z.rs", "/.rc", "/b.txt"];
        assert_eq!(sorted(SortKey::Atime, false), by_atime);
        let by_inode = ["/.rc", "/d.txt", "/d", "/d/z.rs", "/b.txt"];
        assert_eq!(sorted(SortKey::Inode, false), by_inode);
        // "", ".rc", ".rs", ".txt", ".txt".
        let by_ext = ["/d", "/.rc", "/d/z.rs", "/b.txt", "/d.txt"];
        assert_eq!(sorted(SortKey::Extension, false), by_ext);
    }

    #[test]
    fn the_walker_takes_an_extension_as_go_path_ext_does() {
        assert_eq!(extension(b"a.tar.gz"), b".gz");
        assert_eq!(extension(b".bashrc"), b".bashrc");
        assert_eq!(extension(b"Makefile"), b"");
        assert_eq!(extension(b"end."), b".");
    }
}
