//! Exclude rules of a backup: globs on names and on absolute paths (and
//! their case-insensitive form, `--iexclude`), `--exclude-if-present`
//! marker files, `--exclude-caches` (a valid `CACHEDIR.TAG`) and
//! `--exclude-larger-than`. Matching happens before anything below an
//! excluded directory is read.

use super::BackupOptions;
use crate::error::{Error, Result};
use crate::pattern::PatternList;
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};

/// The globs given one by one plus every line of each exclude file, as
/// restic reads `--exclude-file`: a UTF-8 byte-order mark dropped, blank
/// lines and `#` comments skipped, surrounding space trimmed, and `$VAR`
/// or `${VAR}` replaced by the variable. An unset variable is an error
/// naming the file and line, where restic reads it as empty: a scheduled
/// run's sparse environment would turn `$DATA/*` into `/*`, which leaves
/// out all but the top directories. An unreadable file is an error naming
/// it too.
pub fn with_exclude_files(globs: &[String], files: &[PathBuf]) -> Result<Vec<String>> {
    let mut out = globs.to_vec();
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|e| Error::io(f, e))?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let expanded = shellexpand::env_with_context(line, |v| match std::env::var(v) {
                Ok(value) => Ok(Some(value)),
                Err(std::env::VarError::NotPresent) => Err("not set"),
                Err(std::env::VarError::NotUnicode(_)) => Err("not UTF-8"),
            })
            .map_err(|e| {
                Error::Usage(format!(
                    "{}:{}: ${} is {} (set it, or write $$ or [$] for a literal $)",
                    f.display(),
                    n + 1,
                    e.var_name,
                    e.cause
                ))
            })?;
            out.push(expanded.into_owned());
        }
    }
    Ok(out)
}

/// Compiled exclude rules. Outside the archiver (`rewrite`) only the globs
/// apply: [`Excluder::from_globs`] and [`Excluder::matches`].
#[derive(Clone)]
pub struct Excluder {
    /// `--exclude` and its files, in order.
    patterns: PatternList,
    /// `--iexclude` and its files, in order (a `!` there takes back only
    /// what these matched, as restic keeps the two lists apart).
    folded: PatternList,
    dirs: DirRules,
    /// Files (not directories) larger than this many bytes are left out.
    larger_than: Option<u64>,
}

/// The rules that look inside a directory: `--exclude-if-present` marker
/// files and `CACHEDIR.TAG` (with `--exclude-caches` any valid one, and
/// always larder's own). The backup applies them to each directory it
/// lists, from the names the listing has ([`DirRules::exclude_listed`]),
/// so a directory without such a file costs no lookup at all.
#[derive(Clone, Default)]
pub(super) struct DirRules {
    if_present: Vec<Marker>,
    caches: bool,
}

/// An `--exclude-if-present` marker, restic's `NAME[:HEADER]`: a file of
/// that name (or path below the directory) excludes the directory, and
/// with a header only if the file begins with those bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Marker {
    name: String,
    header: Option<Vec<u8>>,
}

impl Marker {
    /// `NAME[:HEADER]`, split at the first `:`; an empty header asks for
    /// the name alone, and an empty name is refused (as restic does).
    fn parse(spec: &str) -> Result<Marker> {
        let (name, header) = match spec.split_once(':') {
            Some((name, header)) => (name, Some(header).filter(|h| !h.is_empty())),
            None => (spec, None),
        };
        if name.is_empty() {
            return Err(Error::Usage(format!(
                "--exclude-if-present {spec:?}: no file name (NAME or NAME:HEADER)"
            )));
        }
        Ok(Marker {
            name: name.to_string(),
            header: header.map(|h| h.as_bytes().to_vec()),
        })
    }

    /// Whether the marker file in `dir` (known to be there) begins with
    /// the header, if one is asked for; reads at most the header's length.
    fn header_matches(&self, dir: &Path) -> bool {
        let Some(want) = &self.header else {
            return true;
        };
        let Ok(f) = File::open(dir.join(&self.name)) else {
            return false;
        };
        let mut got = Vec::with_capacity(want.len());
        let read =
            std::io::Read::read_to_end(&mut std::io::Read::take(f, want.len() as u64), &mut got);
        read.is_ok() && got == *want
    }
}

const CACHEDIR_TAG: &str = "CACHEDIR.TAG";

impl DirRules {
    /// Whether directory `fs_path` (a path the kernel accepts) is excluded
    /// by what it contains, each file looked up.
    pub(super) fn exclude(&self, fs_path: &Path) -> bool {
        self.exclude_if(fs_path, |f| fs_path.join(f).symlink_metadata().is_ok())
    }

    /// [`DirRules::exclude`] for a directory whose entries are `names`: a
    /// file is opened only when its name is there (a marker given as a path
    /// below the directory is looked up).
    pub(super) fn exclude_listed(&self, fs_path: &Path, names: &[OsString]) -> bool {
        self.exclude_if(fs_path, |f| {
            if f.contains('/') {
                fs_path.join(f).symlink_metadata().is_ok()
            } else {
                names.iter().any(|n| n == f)
            }
        })
    }

    /// The rules, with `present` saying whether the directory has a file.
    fn exclude_if(&self, fs_path: &Path, present: impl Fn(&str) -> bool) -> bool {
        self.if_present
            .iter()
            .any(|m| present(&m.name) && m.header_matches(fs_path))
            || present(CACHEDIR_TAG)
                && cachedir_tag(fs_path).is_some_and(|tag| self.caches || tag.larders)
    }
}

const CACHEDIR_SIGNATURE: &[u8] = b"Signature: 8a477f597d28d172789f06886806bc55";

impl Excluder {
    pub(super) fn new(o: &BackupOptions) -> Result<Self> {
        Ok(Excluder {
            patterns: PatternList::new(&o.excludes, false, "exclude")?,
            folded: PatternList::new(&o.iexcludes, true, "exclude")?,
            dirs: DirRules {
                if_present: o
                    .exclude_if_present
                    .iter()
                    .map(|s| Marker::parse(s))
                    .collect::<Result<_>>()?,
                caches: o.exclude_caches,
            },
            larger_than: o.exclude_larger_than,
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

    /// Whether the patterns exclude absolute `path` (see
    /// [`crate::pattern`]).
    pub fn matches(&self, path: &Path) -> bool {
        self.patterns.matches(path) || self.folded.matches(path)
    }

    /// Whether a regular file of `size` bytes is left out
    /// (`--exclude-larger-than`).
    pub(super) fn too_large(&self, size: u64) -> bool {
        self.larger_than.is_some_and(|max| size > max)
    }

    /// `path` is matched against the patterns; `fs_path` is where to look on disk
    /// (a path the kernel accepts, see [`crate::localfs::child_path`]);
    /// `file_size` is a regular file's size (`None` for anything else).
    pub(super) fn excluded(
        &self,
        path: &Path,
        fs_path: &Path,
        is_dir: bool,
        file_size: Option<u64>,
    ) -> bool {
        self.matches(path)
            || is_dir && self.dirs.exclude(fs_path)
            || file_size.is_some_and(|n| self.too_large(n))
    }

    /// The rules that look inside directories.
    pub(super) fn dir_rules(&self) -> &DirRules {
        &self.dirs
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
    let f = File::open(dir.join(CACHEDIR_TAG)).ok()?;
    let mut buf = Vec::with_capacity(256);
    std::io::Read::read_to_end(&mut std::io::Read::take(f, 256), &mut buf).ok()?;
    if !buf.starts_with(CACHEDIR_SIGNATURE) {
        return None;
    }
    let larders = buf.windows(17).any(|w| w == b"created by larder");
    Some(CacheTag { larders })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deciding from a directory's names gives the same answers as looking
    /// each file up, for every kind of marker and tag, with and without
    /// `--exclude-caches`.
    #[test]
    fn listed_names_decide_as_lookups_do() {
        let tmp = tempfile::tempdir().unwrap();
        let sig = String::from_utf8_lossy(CACHEDIR_SIGNATURE).into_owned();
        let dirs: [(&str, &[(&str, String)]); 10] = [
            ("plain", &[("a.txt", "x".into())]),
            (
                "ours",
                &[(CACHEDIR_TAG, format!("{sig}\n# created by larder\n"))],
            ),
            ("theirs", &[(CACHEDIR_TAG, format!("{sig}\n# some tool\n"))]),
            ("bad-tag", &[(CACHEDIR_TAG, "not a signature".into())]),
            ("marked", &[(".nobackup", String::new())]),
            ("deep-marker", &[("sub/.keepout", String::new())]),
            ("headed", &[("TAG", "exclude me\n".into())]),
            ("other-header", &[("TAG", "keep me\n".into())]),
            ("short-header", &[("TAG", "excl".into())]),
            ("empty", &[]),
        ];
        for (d, files) in &dirs {
            std::fs::create_dir_all(tmp.path().join(d)).unwrap();
            for (f, text) in files.iter() {
                let p = tmp.path().join(d).join(f);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, text).unwrap();
            }
        }
        let mut excluded = Vec::new();
        for caches in [false, true] {
            let rules = DirRules {
                if_present: [".nobackup", "sub/.keepout", "TAG:exclude me"]
                    .map(|m| Marker::parse(m).unwrap())
                    .to_vec(),
                caches,
            };
            for (d, _) in &dirs {
                let dir = tmp.path().join(d);
                let names = crate::localfs::list_dir(&dir).unwrap();
                let listed = rules.exclude_listed(&dir, &names);
                assert_eq!(listed, rules.exclude(&dir), "{d}, caches {caches}");
                if listed {
                    excluded.push(format!("{d}{}", if caches { "+" } else { "" }));
                }
            }
        }
        let want = [
            "ours",
            "marked",
            "deep-marker",
            "headed",
            "ours+",
            "theirs+",
            "marked+",
            "deep-marker+",
            "headed+",
        ];
        assert_eq!(excluded, want);
    }

    /// An exclude file's lines: a byte-order mark dropped, comments and
    /// blank lines skipped, `$VAR` replaced, `[$]` left for a literal `$`,
    /// and an unset variable refused at its line.
    #[test]
    fn exclude_files_expand_set_variables_and_refuse_unset_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("ex");
        std::fs::write(
            &f,
            "\u{feff}# c\n\n  $HOME/x  \n[$]RECYCLE.BIN\n$$RECYCLE.BIN\n${HOME}y\n",
        )
        .unwrap();
        let home = std::env::var("HOME").unwrap();
        let got = with_exclude_files(&["a".into()], std::slice::from_ref(&f)).unwrap();
        assert_eq!(
            got,
            [
                "a".to_string(),
                format!("{home}/x"),
                "[$]RECYCLE.BIN".into(),
                "$RECYCLE.BIN".into(),
                format!("{home}y")
            ]
        );
        std::fs::write(&f, "ok\n$LARDER_UNIT_SURELY_UNSET_VAR/*\n").unwrap();
        let e = with_exclude_files(&[], std::slice::from_ref(&f))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("{}:2:", f.display()))
                && e.contains("$LARDER_UNIT_SURELY_UNSET_VAR is not set"),
            "{e}"
        );
    }

    /// `NAME:` is the name alone; an empty name is refused.
    #[test]
    fn markers_parse_as_restics() {
        let m = Marker::parse("TAG:a:b").unwrap();
        assert_eq!(
            (m.name.as_str(), m.header.as_deref()),
            ("TAG", Some(&b"a:b"[..]))
        );
        assert_eq!(Marker::parse(".nobackup:").unwrap().header, None);
        for bad in ["", ":header", ":"] {
            let e = Marker::parse(bad).unwrap_err().to_string();
            assert!(e.contains("no file name"), "{bad:?}: {e}");
        }
    }
}
