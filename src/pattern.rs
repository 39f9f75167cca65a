//! restic's path patterns, as its `filter` package reads them: backup's
//! `--exclude` and `--iexclude` (and the lines of their files), `rewrite
//! --exclude`, and restore's `--include`, `--exclude` and their case-blind
//! forms, which match the paths of the snapshot (`/home/u/x`):
//! - a pattern is cleaned first: `./x` is `x`, `cache/` is `cache`, `a//b`
//!   is `a/b`;
//! - one starting with `/` is anchored at the root; any other matches at
//!   any depth (`*.tmp`, `node_modules/.cache`);
//! - a pattern that matches a directory matches everything below it, and
//!   `**` stands for any number of directories, none included
//!   (`/data/**` matches `/data` too);
//! - a pattern starting with `!` takes back what the patterns before it
//!   matched: the patterns are read in order and the last one that
//!   matches decides (`--exclude '/srv/*' --exclude '!/srv/keep'` keeps
//!   `/srv/keep` and what it holds). A directory an earlier pattern
//!   excludes whole (`/srv`, not `/srv/*`) is not entered, so nothing below
//!   it can be taken back, as in restic.
//!
//! A component is matched by `globset` (`*`, `?`, `[a-z]`, `[!a]` or
//! `[^a]`, `{a,b}`; Go's `filepath.Match`, which restic uses, has no
//! `{a,b}` and reads `[!a]` as `!` or `a`). Each `**` stands for any
//! number of directories; restic caps the first of several `**` in one
//! pattern by the count of the others, so `/**/a/**` matches `/a` here
//! and not there.
//!
//! Without a `!` pattern the list is one `globset` set asked about the
//! whole path, which for a walk from the top gives restic's answers (a
//! directory the set matches is never entered, so matches through an
//! ancestor need no asking). With one, every pattern is tried in order
//! over every window of the path, as restic does.

use crate::error::{Error, Result};
use globset::{GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// An ordered list of patterns, all case-sensitive or all not.
#[derive(Clone)]
pub struct PatternList {
    how: How,
}

#[derive(Clone)]
enum How {
    /// No negated pattern: sets of globs on the name and on the path.
    Sets { by_name: GlobSet, by_path: GlobSet },
    /// With negated patterns: each in order.
    Ordered(Vec<Pattern>),
}

/// One pattern, split into components.
#[derive(Clone)]
struct Pattern {
    parts: Vec<Part>,
    anchored: bool,
    negated: bool,
}

#[derive(Clone)]
enum Part {
    /// `**`: any number of components, none included.
    Any,
    Glob(GlobMatcher),
}

/// restic's cleaning of a pattern (Go's `filepath.Clean`): no `.`
/// components, no empty ones, no trailing `/`, and `x/..` gone (a `..` at
/// the root is dropped, one leading a relative pattern kept). Returns
/// whether it is anchored and its components.
fn clean(text: &str) -> (bool, Vec<&str>) {
    let anchored = text.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for c in text.split('/') {
        match c {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if anchored => {}
                _ => parts.push(".."),
            },
            c => parts.push(c),
        }
    }
    (anchored, parts)
}

impl PatternList {
    /// Compiles `patterns` in order; `fold` ignores case. A pattern that is
    /// empty once cleaned (or `!` alone) is refused, as is a bad glob.
    pub fn new<'a>(
        patterns: impl IntoIterator<Item = &'a String>,
        fold: bool,
        what: &str,
    ) -> Result<PatternList> {
        Self::compile(patterns, fold, what, false)
    }

    /// As [`PatternList::new`], but always evaluated in order, as a list
    /// with a `!` pattern is: every path is asked, none answered for by a
    /// directory above it (restore's includes, where another list has a
    /// `!`).
    pub fn new_ordered<'a>(
        patterns: impl IntoIterator<Item = &'a String>,
        fold: bool,
        what: &str,
    ) -> Result<PatternList> {
        Self::compile(patterns, fold, what, true)
    }

    fn compile<'a>(
        patterns: impl IntoIterator<Item = &'a String>,
        fold: bool,
        what: &str,
        ordered: bool,
    ) -> Result<PatternList> {
        // One builder for both ways; an error names the pattern as given.
        let glob = |text: &str, pat: &str| {
            GlobBuilder::new(text)
                .literal_separator(true)
                .case_insensitive(fold)
                .build()
                .map_err(|e| Error::Usage(format!("invalid {what} pattern {pat:?}: {e}")))
        };
        let mut list = Vec::new();
        for pat in patterns {
            let (negated, body) = match pat.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, pat.as_str()),
            };
            let (anchored, comps) = clean(body);
            if comps.is_empty() {
                return Err(Error::Usage(format!(
                    "invalid {what} pattern {pat:?}: it names no file"
                )));
            }
            list.push((pat, negated, anchored, comps));
        }
        if ordered || list.iter().any(|(_, negated, ..)| *negated) {
            let mut ordered = Vec::with_capacity(list.len());
            for (pat, negated, anchored, comps) in list {
                let parts = comps
                    .iter()
                    .map(|c| match *c {
                        "**" => Ok(Part::Any),
                        c => glob(c, pat).map(|g| Part::Glob(g.compile_matcher())),
                    })
                    .collect::<Result<Vec<_>>>()?;
                ordered.push(Pattern {
                    parts,
                    anchored,
                    negated,
                });
            }
            return Ok(PatternList {
                how: How::Ordered(ordered),
            });
        }
        let build = |b: GlobSetBuilder| {
            b.build()
                .map_err(|e| Error::Usage(format!("{what} patterns: {e}")))
        };
        let mut by_name = GlobSetBuilder::new();
        let mut by_path = GlobSetBuilder::new();
        for (pat, _, anchored, comps) in list {
            if !anchored && comps.len() == 1 {
                by_name.add(glob(comps[0], pat)?);
                continue;
            }
            let joined = comps.join("/");
            let lead = if anchored { "/" } else { "/**/" };
            by_path.add(glob(&format!("{lead}{joined}"), pat)?);
            // What lies below a matched directory.
            by_path.add(glob(&format!("{lead}{joined}/**"), pat)?);
            // `**` at the end stands for no directory too.
            if let Some(base) = joined.strip_suffix("/**") {
                by_path.add(glob(&format!("{lead}{base}"), pat)?);
            }
        }
        Ok(PatternList {
            how: How::Sets {
                by_name: build(by_name)?,
                by_path: build(by_path)?,
            },
        })
    }

    /// Whether a `!` pattern is among them: then what a directory's match
    /// implies for what lies below it is not known without asking.
    pub fn takes_back(&self) -> bool {
        matches!(self.how, How::Ordered(_))
    }

    /// Whether absolute `path` is matched: by the sets, or by the last of
    /// the ordered patterns that matches it.
    pub fn matches(&self, path: &Path) -> bool {
        match &self.how {
            How::Sets { by_name, by_path } => {
                path.file_name().is_some_and(|n| by_name.is_match(n)) || by_path.is_match(path)
            }
            How::Ordered(list) => {
                let comps: Vec<&[u8]> = path
                    .as_os_str()
                    .as_bytes()
                    .split(|b| *b == b'/')
                    .filter(|c| !c.is_empty())
                    .collect();
                let mut excluded = false;
                for p in list {
                    // A negated pattern only takes back; a plain one only adds.
                    if p.negated == excluded && p.matches(&comps) {
                        excluded = !p.negated;
                    }
                }
                excluded
            }
        }
    }
}

impl Pattern {
    /// restic's `match`: the pattern matches a run of the path's
    /// components, starting at the root if anchored and anywhere if not
    /// (so a directory's pattern matches what lies below it). A table of
    /// (pattern part, component) pairs, so `**` costs no more than a glob.
    fn matches(&self, comps: &[&[u8]]) -> bool {
        let c = comps.len();
        // `ok[j]`: the parts from the current one on match a run of the
        // components starting at `j`; with no parts left, any run does.
        let mut ok = vec![true; c + 1];
        for part in self.parts.iter().rev() {
            let mut here = vec![false; c + 1];
            for j in (0..=c).rev() {
                here[j] = match part {
                    // None of the components, or one more and still `**`.
                    Part::Any => ok[j] || (j < c && here[j + 1]),
                    Part::Glob(g) => {
                        j < c && ok[j + 1] && g.is_match(std::ffi::OsStr::from_bytes(comps[j]))
                    }
                };
            }
            ok = here;
        }
        if self.anchored {
            ok[0]
        } else {
            ok[..c].iter().any(|&m| m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(pats: &[&str]) -> PatternList {
        let owned: Vec<String> = pats.iter().map(|s| s.to_string()).collect();
        PatternList::new(&owned, false, "exclude").unwrap()
    }

    /// What restic's `filter.List` answers for these patterns and paths
    /// (its own test table's rules): relative patterns with `/` match at any
    /// depth, cleaned patterns match as the clean ones, a directory's pattern
    /// matches below it, `/x/**` matches `/x`. The sets and the ordered
    /// evaluation agree wherever no `!` is given (the second list adds a
    /// `!` pattern that matches nothing here).
    #[test]
    fn patterns_match_as_restics() {
        let cases: &[(&str, &str, bool)] = &[
            ("*.tmp", "/home/u/a.tmp", true),
            ("*.tmp", "/home/u/a.tmp.x", false),
            ("node_modules/.cache", "/p/web/node_modules/.cache", true),
            ("node_modules/.cache", "/p/web/node_modules/.cache/x", true),
            ("node_modules/.cache", "/p/web/node_modules/cache", false),
            ("sub/cache", "/sub/cache", true),
            ("cache/", "/a/cache", true),
            ("./x.log", "/a/b/x.log", true),
            ("/home/*/tmp", "/home/u/tmp", true),
            ("/home/*/tmp", "/home/u/tmp/f", true),
            ("/home/*/tmp", "/srv/home/u/tmp", false),
            ("/home//u", "/home/u", true),
            ("/data/**", "/data", true),
            ("/data/**", "/data/a/b", true),
            ("/data/**", "/database", false),
            ("/a/**/z", "/a/z", true),
            ("/a/**/z", "/a/b/c/z", true),
            ("/a/**/z", "/a/b/c/y", false),
            ("*", "/anything", true),
            ("x/../a", "/b/a", true),
            ("/x/../a", "/a/f", true),
            ("/../a", "/a", true),
            ("a/./b/..", "/z/a", true),
        ];
        for (pat, path, want) in cases {
            let plain = list(&[pat]);
            assert_eq!(plain.matches(Path::new(path)), *want, "{pat} {path}");
            let ordered = list(&[pat, "!/nowhere/at/all"]);
            assert!(matches!(ordered.how, How::Ordered(_)));
            assert_eq!(
                ordered.matches(Path::new(path)),
                *want,
                "ordered: {pat} {path}"
            );
        }
    }

    /// `!` takes back what earlier patterns matched, in order; a later plain
    /// pattern excludes again; a directory excluded whole stays excluded
    /// for what its contents are matched against.
    #[test]
    fn negated_patterns_take_back_in_order() {
        let l = list(&["/srv/*", "!/srv/keep"]);
        assert!(l.matches(Path::new("/srv/other")));
        assert!(!l.matches(Path::new("/srv/keep")));
        assert!(!l.matches(Path::new("/srv/keep/deep/file")));
        assert!(!l.matches(Path::new("/home/u")));
        let l = list(&["/srv/*", "!/srv/keep", "*.log"]);
        assert!(l.matches(Path::new("/srv/keep/x.log")));
        assert!(!l.matches(Path::new("/srv/keep/x.txt")));
        // The last matching pattern decides: restic keeps this `.log` file.
        let l = list(&["*.log", "/srv/*", "!/srv/keep"]);
        assert!(!l.matches(Path::new("/srv/keep/x.log")));
        assert!(l.matches(Path::new("/home/x.log")));
        // A negation before the pattern it would take back does nothing.
        let l = list(&["!/srv/keep", "/srv/*"]);
        assert!(l.matches(Path::new("/srv/keep")));
        // Many `**` against a deep path cost a table, not a search: with
        // a search this took minutes.
        let deep: String = (0..40).map(|i| format!("/d{i}")).collect();
        let l = list(&["/**/a/**/b/**/c/**/d/**/e/**/f/**/g/**/h", "!/nowhere"]);
        assert!(!l.matches(Path::new(&format!("{deep}/z"))));
        assert!(l.matches(Path::new(&format!("/a/b/c/d/e/f/g{deep}/h"))));
        for bad in ["!", "/", "./", "!//", "/.."] {
            let owned = vec![bad.to_string()];
            assert!(
                PatternList::new(&owned, false, "exclude").is_err(),
                "{bad:?}"
            );
        }
    }

    /// `--iexclude` lists ignore case, with or without `!`.
    #[test]
    fn folded_lists_ignore_case() {
        let owned: Vec<String> = ["*.JPG", "/Photos/*", "!/photos/KEEP"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let l = PatternList::new(&owned, true, "exclude").unwrap();
        assert!(l.matches(Path::new("/a/b.jpg")));
        assert!(l.matches(Path::new("/photos/x")));
        assert!(!l.matches(Path::new("/PHOTOS/keep")));
        let l = PatternList::new(&owned[..1], true, "exclude").unwrap();
        assert!(l.matches(Path::new("/a/b.Jpg")));
    }
}
