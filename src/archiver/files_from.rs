//! The paths a backup reads from files, as restic's `--files-from`,
//! `--files-from-verbatim` and `--files-from-raw` do: one path a line (the
//! first skipping blank lines and `#` comments), or NUL-separated bytes.

use crate::error::{Error, Result};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How a list of paths is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListForm {
    /// One path a line; blank lines and lines starting with `#` are
    /// skipped, and the spaces around a path trimmed (`--files-from`).
    /// Globs are not expanded: a line is a path.
    Lines,
    /// One path a line, every non-empty line exactly as written
    /// (`--files-from-verbatim`).
    Verbatim,
    /// Paths separated by NUL bytes, any other byte allowed
    /// (`--files-from-raw`, as `find -print0` writes).
    Raw,
}

/// The paths listed in `file`, in order. A list that cannot be read is an
/// error naming it; `-` reads standard input.
pub fn paths_from(file: &Path, form: ListForm) -> Result<Vec<PathBuf>> {
    let bytes = if file == Path::new("-") {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut v)
            .map_err(|e| Error::io(file, e))?;
        v
    } else {
        std::fs::read(file).map_err(|e| Error::io(file, e))?
    };
    Ok(parse(&bytes, form))
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
    fn an_unreadable_list_is_an_error_naming_it() {
        let e = paths_from(Path::new("/nonexistent/list"), ListForm::Lines).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/list"), "{e}");
    }
}
