//! `find`: which snapshots hold entries whose name (or full path) matches a
//! glob, or which files and directories use a given data blob or tree, or
//! a data blob of a given pack.
//!
//! The cost follows the number of distinct trees visited, not the number of
//! snapshots: each tree is loaded once and what matched below it is kept as
//! a small graph (the tree's own matching entries and the subtrees that hold
//! matches). A snapshot that shares a subtree with one already searched
//! re-emits the remembered matches under its own path instead of reading the
//! subtree again. Name globs, blob and tree ids do not depend on where a tree
//! sits, so the memory key is the tree id; with a path glob (one containing
//! `/`), the key is the tree id and its path (snapshots of the same paths
//! share it).
//!
//! Paths are raw bytes (`/`-joined from the root of the snapshot, starting
//! with `/`), so names that are not UTF-8 match as they are stored.

use crate::error::{Error, Result};
use crate::id::Id;
use crate::pack::BlobType;
use crate::repository::Repository;
use crate::snapshot::Snapshot;
use crate::tree::{MAX_DEPTH, Node, NodeKind, check_depth};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::rc::Rc;

/// What the patterns are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FindMode {
    /// Globs on names (or full paths when a pattern contains `/`).
    #[default]
    Names,
    /// Data blob ids (hex, prefixes allowed): files whose content uses one.
    Blobs,
    /// Tree ids (hex, prefixes allowed): directories with that tree.
    Trees,
    /// Pack ids (hex, prefixes that name one pack): files whose content
    /// uses a data blob the pack holds, by the index.
    Packs,
}

/// What to look for.
#[derive(Clone, Debug, Default)]
pub struct FindOptions {
    pub patterns: Vec<String>,
    pub mode: FindMode,
    /// Globs match regardless of case.
    pub ignore_case: bool,
    /// Only entries modified at or after this time (ns since the epoch).
    pub oldest_ns: Option<i64>,
    /// Only entries modified at or before this time (ns since the epoch).
    pub newest_ns: Option<i64>,
}

/// One matching entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// The entry's name (its path is the parent's path, `/`, this name).
    pub name: Vec<u8>,
    pub kind: NodeKind,
    pub mode: u32,
    pub size: u64,
    pub mtime_ns: i64,
    /// The blob or tree id that matched (blob and tree modes).
    pub matched: Option<Id>,
}

/// A match as handed to the caller: where, in which snapshot.
pub struct Found<'a> {
    pub snapshot: &'a Id,
    pub snap: &'a Snapshot,
    /// Full path in the snapshot, raw bytes, starting with `/`.
    pub path: &'a [u8],
    pub hit: &'a Hit,
}

/// Counters of one search.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FindStats {
    pub snapshots: u64,
    pub matches: u64,
    /// Distinct trees loaded from the repository.
    pub trees_loaded: u64,
    /// Subtrees met again (in another snapshot or place) and answered from
    /// what was remembered, without reading them.
    pub trees_reused: u64,
    /// Trees that could not be read (their path and error), skipped.
    pub unreadable: Vec<String>,
}

/// What was found at and below one tree.
enum Item {
    Hit(Hit),
    /// A subdirectory (by name) with matches below it.
    Sub(Vec<u8>, Rc<Vec<Item>>),
}

/// The compiled patterns.
enum Matcher {
    Globs {
        names: GlobSet,
        paths: GlobSet,
    },
    /// Whole ids (a set, for the thousands a pack holds) and prefixes.
    Ids {
        whole: HashSet<Id>,
        prefixes: Vec<String>,
    },
}

impl Matcher {
    fn new(opts: &FindOptions) -> Result<Matcher> {
        if opts.patterns.is_empty() {
            return Err(Error::Usage("find: give at least one pattern".into()));
        }
        if opts.mode != FindMode::Names {
            let mut ids = Vec::new();
            for p in &opts.patterns {
                let p = p.trim().to_ascii_lowercase();
                if p.is_empty() || p.len() > 64 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(Error::Usage(format!(
                        "{p:?} is not an id or an id prefix (1 to 64 hex digits)"
                    )));
                }
                ids.push(p);
            }
            return Ok(Matcher::Ids {
                whole: HashSet::new(),
                prefixes: ids,
            });
        }
        let (mut names, mut paths) = (GlobSetBuilder::new(), GlobSetBuilder::new());
        for p in &opts.patterns {
            let g = GlobBuilder::new(p)
                .literal_separator(true)
                .case_insensitive(opts.ignore_case)
                .backslash_escape(true)
                .build()
                .map_err(|e| Error::Usage(format!("invalid pattern {p:?}: {e}")))?;
            if p.contains('/') {
                paths.add(g);
            } else {
                names.add(g);
            }
        }
        let build = |b: GlobSetBuilder| {
            b.build()
                .map_err(|e| Error::Usage(format!("find patterns: {e}")))
        };
        Ok(Matcher::Globs {
            names: build(names)?,
            paths: build(paths)?,
        })
    }

    /// The data blobs the index places in the packs `patterns` name.
    fn of_packs(repo: &Repository, patterns: &[String]) -> Result<Matcher> {
        if patterns.is_empty() {
            return Err(Error::Usage("find: give at least one pack".into()));
        }
        let mut whole = HashSet::new();
        for pack in repo.resolve_packs(patterns)? {
            let blobs = repo.index()?.blobs_in_pack(&pack)?;
            whole.extend(
                blobs
                    .iter()
                    .filter(|e| e.ty == BlobType::Data)
                    .map(|e| e.id),
            );
        }
        Ok(Matcher::Ids {
            whole,
            prefixes: Vec::new(),
        })
    }

    /// Whether matching depends on where a tree sits.
    fn by_path(&self) -> bool {
        matches!(self, Matcher::Globs { paths, .. } if !paths.is_empty())
    }

    fn id_matches(&self, id: &Id) -> bool {
        match self {
            Matcher::Ids { whole, prefixes } => {
                whole.contains(id) || {
                    let hex = id.to_hex();
                    prefixes.iter().any(|p| hex.starts_with(p.as_str()))
                }
            }
            Matcher::Globs { .. } => false,
        }
    }
}

fn as_path(bytes: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(bytes))
}

fn join(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(prefix.len() + 1 + name.len());
    p.extend_from_slice(prefix);
    p.push(b'/');
    p.extend_from_slice(name);
    p
}

/// One search's state: the patterns and the remembered subtrees.
struct Finder<'r> {
    repo: &'r Repository,
    opts: &'r FindOptions,
    matcher: Matcher,
    mode: FindMode,
    /// By tree, path (for path globs) and, for a result the depth limit
    /// cut, the depth it was found at.
    memo: HashMap<(Id, Vec<u8>, Option<usize>), Visited>,
    stats: FindStats,
}

impl Finder<'_> {
    fn in_time(&self, n: &Node) -> bool {
        self.opts.oldest_ns.is_none_or(|t| n.mtime_ns >= t)
            && self.opts.newest_ns.is_none_or(|t| n.mtime_ns <= t)
    }

    /// The hit `n` (at `path`) makes, if any.
    fn hit(&self, n: &Node, path: &[u8]) -> Option<Hit> {
        if !self.in_time(n) {
            return None;
        }
        let matched = match (&self.matcher, self.mode) {
            (Matcher::Globs { names, paths }, _) => {
                if !(names.is_match(as_path(&n.name)) || paths.is_match(as_path(path))) {
                    return None;
                }
                None
            }
            (m, FindMode::Blobs | FindMode::Packs) if n.kind == NodeKind::File => {
                Some(*n.content.iter().find(|c| m.id_matches(c))?)
            }
            (m, FindMode::Trees) => Some(n.subtree.filter(|s| m.id_matches(s))?),
            _ => return None,
        };
        Some(Hit {
            name: n.name.clone(),
            kind: n.kind,
            mode: n.mode,
            size: n.size,
            mtime_ns: n.mtime_ns,
            matched,
        })
    }

    /// What matches below tree `id` at `path`, read once per key.
    ///
    /// `depth` is the tree's below the snapshot's root; below
    /// [`crate::tree::MAX_DEPTH`] a tree counts as unreadable. A result
    /// holds as many levels as the tree it came from, so it is reused only
    /// where it fits under the limit; one cut by the limit is remembered
    /// for its depth alone. So a crafted tree that reuses subtrees deeper
    /// and deeper neither nests results beyond the limit nor costs more
    /// than one walk per depth.
    fn visit(&mut self, id: Id, path: &[u8], depth: usize) -> Result<Visited> {
        crate::interrupt::check()?;
        let pk = if self.matcher.by_path() {
            path.to_vec()
        } else {
            Vec::new()
        };
        let fits = |v: &Visited| depth + v.height <= MAX_DEPTH + 1;
        let found = match self.memo.get(&(id, pk.clone(), None)) {
            Some(v) if fits(v) => Some(v.clone()),
            _ => self.memo.get(&(id, pk.clone(), Some(depth))).cloned(),
        };
        if let Some(v) = found {
            self.stats.trees_reused += 1;
            return Ok(v);
        }
        let loaded =
            check_depth(depth, format!("tree {id}")).and_then(|_| self.repo.load_tree(&id));
        let mut v = Visited {
            items: Rc::new(Vec::new()),
            height: 1,
            cut: false,
        };
        match loaded {
            Ok(tree) => {
                self.stats.trees_loaded += 1;
                let mut items = Vec::new();
                for n in &tree.nodes {
                    let p = join(path, &n.name);
                    if let Some(h) = self.hit(n, &p) {
                        items.push(Item::Hit(h));
                    }
                    if let (NodeKind::Dir, Some(sub)) = (n.kind, n.subtree) {
                        let below = self.visit(sub, &p, depth + 1)?;
                        v.height = v.height.max(below.height + 1);
                        v.cut |= below.cut;
                        if !below.items.is_empty() {
                            items.push(Item::Sub(n.name.clone(), below.items));
                        }
                    }
                }
                v.items = Rc::new(items);
            }
            Err(e @ (Error::Interrupted | Error::LockLost(_))) => return Err(e),
            Err(e) => {
                let shown = if path.is_empty() { b"/" } else { path };
                self.stats.unreadable.push(format!(
                    "{}: tree {}: {e}",
                    String::from_utf8_lossy(shown),
                    id.short()
                ));
                if depth > MAX_DEPTH {
                    // Cut here: not a result for where it fits.
                    v.height = 0;
                    v.cut = true;
                    return Ok(v);
                }
            }
        }
        let at = v.cut.then_some(depth);
        self.memo.insert((id, pk, at), v.clone());
        Ok(v)
    }
}

/// What [`Finder::visit`] found below one tree: the matches, how many
/// tree levels it spans (itself included), and whether the depth limit cut
/// it.
#[derive(Clone)]
struct Visited {
    items: Rc<Vec<Item>>,
    height: usize,
    cut: bool,
}

/// Emits the remembered matches `items` below `prefix`.
fn emit(
    items: &[Item],
    prefix: &[u8],
    snapshot: &Id,
    snap: &Snapshot,
    count: &mut u64,
    on_match: &mut dyn FnMut(&Found<'_>),
) {
    for item in items {
        match item {
            Item::Hit(hit) => {
                *count += 1;
                let path = join(prefix, &hit.name);
                on_match(&Found {
                    snapshot,
                    snap,
                    path: &path,
                    hit,
                });
            }
            Item::Sub(name, below) => {
                emit(below, &join(prefix, name), snapshot, snap, count, on_match);
            }
        }
    }
}

/// Searches `snaps` (in the order given) and hands each match to
/// `on_match`, snapshot by snapshot, depth first in name order. A tree that
/// cannot be read is skipped and listed in the returned statistics.
pub fn find(
    repo: &Repository,
    snaps: &[(Id, Snapshot)],
    opts: &FindOptions,
    on_match: &mut dyn FnMut(&Found<'_>),
) -> Result<FindStats> {
    let _lock = repo.lock_for_reading()?;
    let matcher = match opts.mode {
        FindMode::Packs => Matcher::of_packs(repo, &opts.patterns)?,
        _ => Matcher::new(opts)?,
    };
    let mut f = Finder {
        repo,
        opts,
        mode: opts.mode,
        matcher,
        memo: HashMap::new(),
        stats: FindStats::default(),
    };
    let mut matches = 0;
    for (id, snap) in snaps {
        f.stats.snapshots += 1;
        if f.mode == FindMode::Trees && f.matcher.id_matches(&snap.tree) {
            matches += 1;
            on_match(&Found {
                snapshot: id,
                snap,
                path: b"/",
                hit: &Hit {
                    name: Vec::new(),
                    kind: NodeKind::Dir,
                    mode: 0,
                    size: 0,
                    mtime_ns: snap.time_ns,
                    matched: Some(snap.tree),
                },
            });
        }
        let items = f.visit(snap.tree, b"", 1)?.items;
        emit(&items, b"", id, snap, &mut matches, on_match);
    }
    f.stats.matches = matches;
    Ok(f.stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(patterns: &[&str], ignore_case: bool) -> FindOptions {
        FindOptions {
            patterns: patterns.iter().map(|s| s.to_string()).collect(),
            ignore_case,
            ..Default::default()
        }
    }

    #[test]
    fn names_paths_and_case() {
        let m = Matcher::new(&opts(&["*.TXT", "/a/*/c"], true)).unwrap();
        let Matcher::Globs { names, paths } = &m else {
            panic!("globs expected")
        };
        assert!(names.is_match(as_path(b"x.txt")));
        assert!(names.is_match(as_path(b"bad\xff.txt")));
        assert!(paths.is_match(as_path(b"/a/b/c")));
        assert!(!paths.is_match(as_path(b"/a/b/b/c")));
        assert!(m.by_path());
        let m = Matcher::new(&opts(&["*.TXT"], false)).unwrap();
        let Matcher::Globs { names, .. } = &m else {
            panic!("globs expected")
        };
        assert!(!names.is_match(as_path(b"x.txt")));
        assert!(!m.by_path());
    }

    #[test]
    fn id_prefixes() {
        let o = FindOptions {
            patterns: vec!["0A0b".into()],
            mode: FindMode::Blobs,
            ..Default::default()
        };
        let m = Matcher::new(&o).unwrap();
        let mut id = Id([0; 32]);
        id.0[0] = 0x0a;
        id.0[1] = 0x0b;
        assert!(m.id_matches(&id));
        id.0[1] = 0x0c;
        assert!(!m.id_matches(&id));
        let bad = FindOptions {
            patterns: vec!["xyz".into()],
            mode: FindMode::Trees,
            ..Default::default()
        };
        assert!(Matcher::new(&bad).is_err());
    }
}
