//! The paths a backup reads from files, as restic's `--files-from`,
//! `--files-from-verbatim` and `--files-from-raw` do: one path a line (the
//! first skipping blank lines and `#` comments and expanding glob
//! patterns), or NUL-separated bytes.

use crate::error::{Error, Result};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How a list of paths is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListForm {
    /// One path a line; blank lines and lines starting with `#` are
    /// skipped, the spaces around a path trimmed, and a line with `*`, `?`
    /// or `[` is a glob pattern, expanded one path component at a time as
    /// restic's (Go's `filepath.Glob`): `*` never matches a `/` (`--files-from`).
    Lines,
    /// One path a line, every non-empty line exactly as written
    /// (`--files-from-verbatim`).
    Verbatim,
    /// Paths separated by NUL bytes, any other byte allowed
    /// (`--files-from-raw`, as `find -print0` writes).
    Raw,
}

/// What a list gave: its paths, in order, and one warning for each glob
/// pattern that matched nothing (skipped, as restic skips it).
#[derive(Debug, Default)]
pub struct Listed {
    pub paths: Vec<PathBuf>,
    pub warnings: Vec<String>,
}

/// The paths listed in `file` (patterns expanded, for [`ListForm::Lines`]).
/// A list that cannot be read is an error naming it, as is a pattern that
/// is not one; `-` reads standard input.
pub fn paths_from(file: &Path, form: ListForm) -> Result<Listed> {
    let bytes = if file == Path::new("-") {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut v)
            .map_err(|e| Error::io(file, e))?;
        v
    } else {
        std::fs::read(file).map_err(|e| Error::io(file, e))?
    };
    let mut out = Listed::default();
    for p in parse(&bytes, form) {
        if form != ListForm::Lines || !is_pattern(&p) {
            out.paths.push(p);
            continue;
        }
        let found = expand(&p).map_err(|e| {
            Error::Usage(format!("{}: pattern {}: {e}", file.display(), p.display()))
        })?;
        if found.is_empty() {
            out.warnings.push(format!(
                "{}: pattern {} matches no file; skipped",
                file.display(),
                p.display()
            ));
        }
        out.paths.extend(found);
    }
    Ok(out)
}

/// Whether a path as listed holds a glob character.
fn is_pattern(p: &Path) -> bool {
    p.as_os_str()
        .as_bytes()
        .iter()
        .any(|b| matches!(b, b'*' | b'?' | b'['))
}

/// The existing paths `pattern` matches, sorted within each directory: each
/// component with a glob character is matched against the names a listing
/// of the directories so far gives (a `*` matches a leading dot too, as
/// Go's does); the others are joined as they are.
fn expand(pattern: &Path) -> std::result::Result<Vec<PathBuf>, String> {
    use std::path::Component;
    let mut found = vec![PathBuf::new()];
    for comp in pattern.components() {
        let Component::Normal(name) = comp else {
            found.iter_mut().for_each(|p| p.push(comp));
            continue;
        };
        if !is_pattern(Path::new(name)) {
            found.iter_mut().for_each(|p| p.push(name));
            continue;
        }
        let text = name
            .to_str()
            .ok_or_else(|| "a glob must be UTF-8 text".to_string())?;
        let matcher = globset::GlobBuilder::new(text)
            .literal_separator(true)
            .build()
            .map_err(|e| e.to_string())?
            .compile_matcher();
        let mut next = Vec::new();
        for dir in &found {
            let listed = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir.as_path()
            };
            let Ok(entries) = std::fs::read_dir(listed) else {
                continue;
            };
            let mut names: Vec<_> = entries
                .flatten()
                .map(|e| e.file_name())
                .filter(|n| matcher.is_match(Path::new(n)))
                .collect();
            names.sort();
            next.extend(names.into_iter().map(|n| dir.join(n)));
        }
        found = next;
    }
    found.retain(|p| p.symlink_metadata().is_ok());
    Ok(found)
}

/// The paths `bytes` lists in `form`.
pub fn parse(bytes: &[u8], form: ListForm) -> Vec<PathBuf> {
    let path = |b: &[u8]| PathBuf::from(OsStr::from_bytes(b));
    match form {
        ListForm::Raw => bytes
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(path)
            .collect(),
        ListForm::Verbatim => bytes
            .split(|b| *b == b'\n')
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
            .filter(|l| !l.is_empty())
            .map(path)
            .collect(),
        ListForm::Lines => bytes
            .split(|b| *b == b'\n')
            .map(|l| l.trim_ascii())
            .filter(|l| !l.is_empty() && !l.starts_with(b"#"))
            .map(path)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: Vec<PathBuf>) -> Vec<Vec<u8>> {
        v.iter()
            .map(|p| p.as_os_str().as_bytes().to_vec())
            .collect()
    }

    #[test]
    fn each_form_reads_what_restic_reads() {
        let text = b"# a comment\n/etc\n\n  /srv/with space  \r\n#not/a/path\n/home/x\n";
        assert_eq!(
            strs(parse(text, ListForm::Lines)),
            [&b"/etc"[..], b"/srv/with space", b"/home/x"]
        );
        assert_eq!(
            strs(parse(text, ListForm::Verbatim)),
            [
                &b"# a comment"[..],
                b"/etc",
                b"  /srv/with space  ",
                b"#not/a/path",
                b"/home/x"
            ]
        );
        let raw = b"/a\nb\0/\xff odd\0\0/c";
        assert_eq!(
            strs(parse(raw, ListForm::Raw)),
            [&b"/a\nb"[..], b"/\xff odd", b"/c"]
        );
        assert!(parse(b"", ListForm::Lines).is_empty());
    }

    #[test]
    fn patterns_expand_one_component_at_a_time_and_skip_what_matches_nothing() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for f in [
            "a/x.log",
            "a/y.log",
            "a/.h.log",
            "a/z.txt",
            "b/x.log",
            "a/s/x.log",
        ] {
            std::fs::create_dir_all(root.join(f).parent().unwrap()).unwrap();
            std::fs::write(root.join(f), b"").unwrap();
        }
        let list = root.join("list");
        let r = root.display();
        std::fs::write(
            &list,
            format!("{r}/a/*.log\n{r}/?/x.log\n{r}/a/z.txt\n{r}/none/*.log\n{r}/[ab]\n"),
        )
        .unwrap();
        let got = paths_from(&list, ListForm::Lines).unwrap();
        let rel: Vec<String> = got
            .paths
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            rel,
            [
                "a/.h.log", "a/x.log", "a/y.log", "a/x.log", "b/x.log", "a/z.txt", "a", "b"
            ]
        );
        assert_eq!(got.warnings.len(), 1, "{:?}", got.warnings);
        assert!(got.warnings[0].contains("none/*.log"), "{:?}", got.warnings);
        // The same lines taken verbatim are paths, patterns or not.
        let verbatim = paths_from(&list, ListForm::Verbatim).unwrap();
        assert_eq!(verbatim.paths.len(), 5);
        assert!(verbatim.warnings.is_empty());
        // A pattern that is not one is an error naming the list.
        std::fs::write(&list, format!("{r}/a/[x.log\n")).unwrap();
        let e = paths_from(&list, ListForm::Lines).unwrap_err();
        assert!(
            e.to_string().contains("list") && e.to_string().contains("[x.log"),
            "{e}"
        );
    }

    #[test]
    fn an_unreadable_list_is_an_error_naming_it() {
        let e = paths_from(Path::new("/nonexistent/list"), ListForm::Lines).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/list"), "{e}");
    }
}
