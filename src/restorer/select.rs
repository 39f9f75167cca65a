//! Which paths of a snapshot a restore writes: `--include` and `--exclude`
//! globs on paths relative to the restored tree (`/a/b`). A pattern without
//! `/` matches that name anywhere; an included directory includes all below.

use crate::error::{Error, Result};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// Compiled include and exclude patterns.
pub(super) struct Selector {
    include: Option<GlobSet>,
    exclude: GlobSet,
}

impl Selector {
    /// Compiles the patterns; an empty include list includes everything.
    pub(super) fn new(include: &[String], exclude: &[String]) -> Result<Self> {
        Ok(Selector {
            include: if include.is_empty() {
                None
            } else {
                Some(globset(include)?)
            },
            exclude: globset(exclude)?,
        })
    }

    /// For path `rel`: whether it is visible at all (not excluded), and
    /// whether it is included (itself, or below an included directory).
    pub(super) fn selected(&self, rel: &str, ancestor_included: bool) -> (bool, bool) {
        let bare = rel.trim_start_matches('/');
        if self.exclude.is_match(rel) || self.exclude.is_match(bare) {
            return (false, false);
        }
        let included = ancestor_included
            || match &self.include {
                None => true,
                Some(g) => g.is_match(rel) || g.is_match(bare),
            };
        (true, included)
    }
}

fn globset(pats: &[String]) -> Result<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for p in pats {
        let g = GlobBuilder::new(p)
            .literal_separator(true)
            .build()
            .map_err(|e| Error::Usage(format!("invalid pattern {p:?}: {e}")))?;
        b.add(g);
        if !p.contains('/') {
            // A bare name matches that name anywhere.
            if let Ok(g) = GlobBuilder::new(&format!("**/{p}"))
                .literal_separator(true)
                .build()
            {
                b.add(g);
            }
        }
    }
    b.build()
        .map_err(|e| Error::Usage(format!("patterns: {e}")))
}
