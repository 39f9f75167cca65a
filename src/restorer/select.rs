//! Which paths of a snapshot a restore writes: `--include` and `--exclude`
//! patterns on the snapshot's paths (`/home/u/x`), read as restic reads
//! them ([`crate::pattern`]): a pattern without a leading `/` matches at
//! any depth, a matched directory includes (or excludes) all below, and
//! `!` takes back what the patterns before it matched. `--iinclude` and
//! `--iexclude` patterns match without regard to case. Also which
//! extended attributes it sets: `--include-xattr` and `--exclude-xattr`
//! globs on an attribute's whole name.

use crate::error::{Error, Result};
use crate::pattern::PatternList;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use std::path::Path;

/// Compiled include and exclude patterns.
pub(super) struct Selector {
    /// `--include` and `--iinclude`; `None` when neither is given.
    include: Option<[PatternList; 2]>,
    /// For each include pattern (all anchored, none negated, none
    /// case-blind): its literal beginning up to the first glob character,
    /// with a leading `/`; `None` when some include may match anywhere.
    include_prefixes: Option<Vec<String>>,
    exclude: [PatternList; 2],
}

impl Selector {
    /// Compiles the patterns (`i*`: matched without regard to case); no
    /// include pattern at all includes everything.
    pub(super) fn new(
        include: &[String],
        iinclude: &[String],
        exclude: &[String],
        iexclude: &[String],
    ) -> Result<Self> {
        let anywhere = include
            .iter()
            .any(|p| !p.starts_with('/') || p.starts_with('!'));
        // A case-blind pattern's literal beginning says nothing about
        // which directories its matches lie in.
        let include_prefixes = if include.is_empty() || anywhere || !iinclude.is_empty() {
            None
        } else {
            Some(include.iter().map(|p| literal_prefix(p)).collect())
        };
        Ok(Selector {
            include: if include.is_empty() && iinclude.is_empty() {
                None
            } else {
                // One list with `!` asks every path of both: a list of
                // sets answers for a directory's contents only through
                // `ancestor_included`, which then is not used.
                let ordered = include.iter().chain(iinclude).any(|p| p.starts_with('!'));
                let compile = if ordered {
                    PatternList::new_ordered
                } else {
                    PatternList::new
                };
                Some([
                    compile(include, false, "include")?,
                    compile(iinclude, true, "include")?,
                ])
            },
            include_prefixes,
            exclude: [
                PatternList::new(exclude, false, "exclude")?,
                PatternList::new(iexclude, true, "exclude")?,
            ],
        })
    }

    /// Whether directory `rel` (not itself included) can hold an included
    /// path: a restore of one file does not walk, nor make, every other
    /// directory of the snapshot. Conservative: `true` unless every include
    /// pattern is a path from the root whose literal beginning leads
    /// elsewhere.
    pub(super) fn may_hold_included(&self, rel: &str) -> bool {
        let Some(prefixes) = &self.include_prefixes else {
            return true;
        };
        let dir = format!("/{}/", rel.trim_matches('/'));
        prefixes
            .iter()
            .any(|p| dir.starts_with(p.as_str()) || p.starts_with(dir.as_str()))
    }

    /// For path `rel` (`/a/b`): whether it is visible at all (not
    /// excluded), and whether it is included (itself, or below an included
    /// directory).
    pub(super) fn selected(&self, rel: &str, ancestor_included: bool) -> (bool, bool) {
        let path = Path::new(rel);
        if self.exclude.iter().any(|l| l.matches(path)) {
            return (false, false);
        }
        let included = match &self.include {
            None => true,
            // With `!`, what lies below an included directory may be taken
            // back: every path is asked (the patterns match below a
            // matched directory anyway).
            Some(lists) if lists.iter().any(PatternList::takes_back) => {
                lists.iter().any(|l| l.matches(path))
            }
            Some(lists) => ancestor_included || lists.iter().any(|l| l.matches(path)),
        };
        (true, included)
    }
}

/// Which extended attributes a restore sets (restic 0.17's
/// `--include-xattr` and `--exclude-xattr`): globs on an attribute's whole
/// name (`*` matches any characters, `.` too). With include patterns, only
/// the attributes one matches; otherwise all but those an exclude pattern
/// matches (none given: all).
#[derive(Debug)]
pub(super) enum XattrSelector {
    All,
    Only(GlobSet),
    AllBut(GlobSet),
}

impl XattrSelector {
    /// Compiles the patterns; include and exclude patterns together are
    /// refused, as is a pattern that is not a valid glob (named).
    pub(super) fn new(include: &[String], exclude: &[String]) -> Result<Self> {
        match (include.is_empty(), exclude.is_empty()) {
            (true, true) => Ok(XattrSelector::All),
            (false, true) => Ok(XattrSelector::Only(xattr_globset(
                include,
                "--include-xattr",
            )?)),
            (true, false) => Ok(XattrSelector::AllBut(xattr_globset(
                exclude,
                "--exclude-xattr",
            )?)),
            (false, false) => Err(Error::Usage(
                "--include-xattr and --exclude-xattr cannot be used together".into(),
            )),
        }
    }

    /// Whether the attribute named `name` (its bytes as stored) is set.
    pub(super) fn wanted(&self, name: &[u8]) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::OsStr::from_bytes(name);
        match self {
            XattrSelector::All => true,
            XattrSelector::Only(g) => g.is_match(name),
            XattrSelector::AllBut(g) => !g.is_match(name),
        }
    }
}

/// The attribute-name globs `pats` of option `flag` as one set.
fn xattr_globset(pats: &[String], flag: &str) -> Result<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for p in pats {
        if p.is_empty() {
            return Err(Error::Usage(format!(
                "{flag} '': an empty pattern matches no attribute name"
            )));
        }
        let g = GlobBuilder::new(p)
            .literal_separator(false)
            .build()
            .map_err(|e| Error::Usage(format!("invalid {flag} pattern {p:?}: {e}")))?;
        b.add(g);
    }
    b.build()
        .map_err(|e| Error::Usage(format!("{flag} patterns: {e}")))
}

/// The literal beginning of anchored path pattern `p` (up to its first
/// glob character, its `.` and empty components dropped as the pattern's
/// are), with a leading `/`: every path it matches starts with it.
fn literal_prefix(p: &str) -> String {
    let end = p.find(['*', '?', '[', '{', '\\']).unwrap_or(p.len());
    let lit = &p[..end];
    let mut out: String = lit
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(|c| format!("/{c}"))
        .collect();
    // A component cut by the glob is a beginning, not a whole name.
    if lit.ends_with('/') || end == p.len() {
        out.push('/');
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(include: &[&str]) -> Selector {
        let inc: Vec<String> = include.iter().map(|s| s.to_string()).collect();
        Selector::new(&inc, &[], &[], &[]).unwrap()
    }

    #[test]
    fn case_blind_patterns_match_any_case_and_walk_everything() {
        let v = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let s = Selector::new(&[], &v(&["*.JPG"]), &[], &v(&["/Tmp"])).unwrap();
        assert!(s.selected("/photos/a.jpg", false).1);
        assert!(s.selected("/photos/b.Jpg", false).1);
        assert!(!s.selected("/photos/c.png", false).1);
        assert!(
            !s.selected("/tmp", false).0,
            "excluded without regard to case"
        );
        assert!(!s.selected("/TMP", false).0);
        // As written, only that case.
        let exact = Selector::new(&v(&["*.JPG"]), &[], &[], &[]).unwrap();
        assert!(!exact.selected("/photos/a.jpg", false).1);
        let path = Selector::new(&v(&["/a/b"]), &v(&["/X/y"]), &[], &[]).unwrap();
        assert!(
            path.may_hold_included("/x"),
            "a case-blind path may be anywhere"
        );
    }

    #[test]
    fn only_directories_on_the_way_to_a_path_include_are_walked() {
        let s = sel(&["/usr/share/doc/bash/README"]);
        for d in ["/usr", "/usr/share", "/usr/share/doc/bash"] {
            assert!(s.may_hold_included(d), "{d}");
        }
        for d in [
            "/var",
            "/usr/lib",
            "/usr/share/doc/bashful",
            "/usr/share/doc/git",
        ] {
            assert!(!s.may_hold_included(d), "{d}");
        }
        // What the walk does not skip is what the matcher includes.
        assert!(s.selected("/usr/share/doc/bash/README", false).1);
        let g = sel(&["/usr/share/*/bash/**"]);
        assert!(g.may_hold_included("/usr/share"));
        assert!(
            g.may_hold_included("/usr/share/doc"),
            "inside the glob part"
        );
        assert!(!g.may_hold_included("/etc"));
        assert!(g.selected("/usr/share/doc/bash/x/y", false).1);
    }

    #[test]
    fn xattr_patterns_match_the_whole_name() {
        let v = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let only = XattrSelector::new(&v(&["user.keep.*", "security.capability"]), &[]).unwrap();
        assert!(only.wanted(b"user.keep.x"));
        assert!(only.wanted(b"user.keep.x.y"), "* matches dots too");
        assert!(only.wanted(b"security.capability"));
        assert!(!only.wanted(b"user.keep"), "the whole name must match");
        assert!(!only.wanted(b"user.a"));
        assert!(!only.wanted(b"xuser.keep.x"));
        assert!(!only.wanted(b"security.capability2"));
        assert!(!only.wanted(b"user.KEEP.x"), "matched as written");
        let but = XattrSelector::new(&[], &v(&["user.a", "trusted.*"])).unwrap();
        assert!(!but.wanted(b"user.a"));
        assert!(!but.wanted(b"trusted.overlay.opaque"));
        assert!(but.wanted(b"user.ab"));
        assert!(but.wanted(b"user.b"));
        assert!(but.wanted(b"user.\xff"));
        let all = XattrSelector::new(&[], &[]).unwrap();
        assert!(all.wanted(b"anything.at.all"));
        // A name that is not UTF-8 is matched by its bytes.
        let star = XattrSelector::new(&v(&["user.*"]), &[]).unwrap();
        assert!(star.wanted(b"user.\xff\xfe"));
        assert!(!star.wanted(b"trusted.\xff"));
    }

    #[test]
    fn xattr_patterns_both_ways_or_invalid_are_refused() {
        let v = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let both = XattrSelector::new(&v(&["user.*"]), &v(&["user.a"])).unwrap_err();
        assert!(
            both.to_string().contains("cannot be used together"),
            "{both}"
        );
        let bad = XattrSelector::new(&v(&["user.[a"]), &[]).unwrap_err();
        let msg = bad.to_string();
        assert!(
            msg.contains("--include-xattr") && msg.contains("user.[a"),
            "{msg}"
        );
        let bad = XattrSelector::new(&[], &v(&["ok.*", "{x"])).unwrap_err();
        let msg = bad.to_string();
        assert!(
            msg.contains("--exclude-xattr") && msg.contains("{x"),
            "{msg}"
        );
        let empty = XattrSelector::new(&v(&[""]), &[]).unwrap_err();
        assert!(empty.to_string().contains("empty pattern"), "{empty}");
    }

    #[test]
    fn a_bare_name_or_no_include_walks_everything() {
        assert!(sel(&["README"]).may_hold_included("/anything/at/all"));
        assert!(sel(&["/a/b", "*.txt"]).may_hold_included("/elsewhere"));
        assert!(sel(&[]).may_hold_included("/x"));
    }
}
