//! Exclude rules of a backup: globs on names and on absolute paths,
//! `--exclude-if-present` marker files, and `--exclude-caches` (a valid
//! `CACHEDIR.TAG`). Matching happens before anything below an excluded
//! directory is read.

use super::BackupOptions;
use crate::error::{Error, Result};
use globset::{Glob, GlobSet, GlobSetBuilder};
use std::fs::File;
use std::path::{Path, PathBuf};

/// The globs given one by one plus every line of each exclude file (blank
/// lines and `#` comments skipped, surrounding space trimmed), as restic
/// reads `--exclude-file`. An unreadable file is an error naming it.
pub fn with_exclude_files(globs: &[String], files: &[PathBuf]) -> Result<Vec<String>> {
    let mut out = globs.to_vec();
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|e| Error::io(f, e))?;
        out.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from),
        );
    }
    Ok(out)
}

/// Compiled exclude rules. Outside the archiver (`rewrite`) only the globs
/// apply: [`Excluder::from_globs`] and [`Excluder::matches`].
pub struct Excluder {
    by_name: GlobSet,
    by_path: GlobSet,
    if_present: Vec<String>,
    caches: bool,
}

const CACHEDIR_SIGNATURE: &[u8] = b"Signature: 8a477f597d28d172789f06886806bc55";

impl Excluder {
    pub(super) fn new(o: &BackupOptions) -> Result<Self> {
        let mut by_name = GlobSetBuilder::new();
        let mut by_path = GlobSetBuilder::new();
        for pat in &o.excludes {
            let g = globset::GlobBuilder::new(pat)
                .literal_separator(true)
                .build()
                .map_err(|e| Error::Usage(format!("invalid exclude pattern {pat:?}: {e}")))?;
            if pat.contains('/') {
                by_path.add(g);
                // A pattern naming a directory excludes what is beneath it.
                if let Ok(g2) = Glob::new(&format!("{}/**", pat.trim_end_matches('/'))) {
                    by_path.add(g2);
                }
            } else {
                by_name.add(g);
            }
        }
        Ok(Excluder {
            by_name: by_name
                .build()
                .map_err(|e| Error::Usage(format!("exclude patterns: {e}")))?,
            by_path: by_path
                .build()
                .map_err(|e| Error::Usage(format!("exclude patterns: {e}")))?,
            if_present: o.exclude_if_present.clone(),
            caches: o.exclude_caches,
        })
    }

    /// The rules of `backup --exclude` for `globs` alone (no marker
    /// files, no cache directories).
    pub fn from_globs(globs: &[String]) -> Result<Self> {
        Self::new(&BackupOptions {
            excludes: globs.to_vec(),
            ..BackupOptions::default()
        })
    }

    /// Whether a glob excludes absolute `path` (by its name or whole path).
    pub fn matches(&self, path: &Path) -> bool {
        path.file_name().is_some_and(|n| self.by_name.is_match(n)) || self.by_path.is_match(path)
    }

    /// `path` is matched against the patterns; `fs_path` is where to look on disk
    /// (a path the kernel accepts, see [`crate::localfs::child_path`]).
    pub(super) fn excluded(&self, path: &Path, fs_path: &Path, is_dir: bool) -> bool {
        if self.matches(path) {
            return true;
        }
        if is_dir {
            for f in &self.if_present {
                if fs_path.join(f).symlink_metadata().is_ok() {
                    return true;
                }
            }
            if let Some(tag) = cachedir_tag(fs_path)
                && (self.caches || tag.larders)
            {
                return true;
            }
        }
        false
    }
}

/// A valid `CACHEDIR.TAG` in a directory: whether larder wrote it (larder's
/// cache and state directories are never backed up, even without
/// `--exclude-caches`).
struct CacheTag {
    larders: bool,
}

/// The directory's `CACHEDIR.TAG`, if it has a valid one.
fn cachedir_tag(dir: &Path) -> Option<CacheTag> {
    let f = File::open(dir.join("CACHEDIR.TAG")).ok()?;
    let mut buf = Vec::with_capacity(256);
    std::io::Read::read_to_end(&mut std::io::Read::take(f, 256), &mut buf).ok()?;
    if !buf.starts_with(CACHEDIR_SIGNATURE) {
        return None;
    }
    let larders = buf.windows(17).any(|w| w == b"created by larder");
    Some(CacheTag { larders })
}
