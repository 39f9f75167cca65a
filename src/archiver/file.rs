//! Reading one changed file: opened without following links and without
//! touching its atime, read to the size the walk saw (holes of sparse files
//! skipped), chunked and handed to the blob sink, then checked with one
//! fstat for changes made while it was read. Also its extended attributes.

use super::walk::Archiver;
use crate::error::{Error, Result};
use crate::localfs::{self, sparse};
use crate::pack::BlobType;
use crate::tree::{Node, Xattr};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

impl Archiver<'_, '_> {
    /// Reads and stores the content of the regular file at `fs_path` (the
    /// path the kernel accepts for logical path `path`), which the
    /// walk found with metadata `before`. Only `before.len()` bytes are read
    /// (no read to find the end); a file that grew, shrank, was touched or
    /// replaced meanwhile is caught by one fstat after the read.
    pub(super) fn read_file(
        &mut self,
        path: &Path,
        fs_path: &Path,
        node: &mut Node,
        before: &std::fs::Metadata,
    ) -> Result<std::result::Result<(), String>> {
        let f = match localfs::open_noatime(fs_path) {
            Ok(f) => f,
            Err(e) => return Ok(Err(format!("{}: cannot open: {e}", path.display()))),
        };
        self.progress.file(path);
        let mut content = Vec::new();
        let sparse = before.blocks().saturating_mul(512) < before.len();
        let mut plain_reader = std::io::Read::take(&f, before.len());
        let mut sparse_reader = sparse::SparseReader::new(&f, before.len());
        let reader: &mut dyn std::io::Read = if sparse {
            &mut sparse_reader
        } else {
            &mut plain_reader
        };
        let mut buf = std::mem::take(&mut self.buf);
        let chunker = self.chunker.clone();
        let mut read_err: Option<String> = None;
        let total = chunker.stream(
            reader,
            &mut buf,
            |c| {
                crate::interrupt::check()?;
                content.push(self.blobs.store(BlobType::Data, c)?);
                self.progress.bytes(c.len() as u64);
                Ok(())
            },
            |e| {
                read_err = Some(format!("{}: read failed: {e}", path.display()));
                Error::io(path, e)
            },
        );
        self.buf = buf;
        let total = match total {
            Ok(t) => t,
            Err(e) => {
                return match read_err {
                    Some(msg) => Ok(Err(msg)),
                    None => Err(e),
                };
            }
        };
        self.summary.bytes_read += total;
        node.content = content;
        node.size = total;
        let changed = f
            .metadata()
            .map_or(true, |after| changed_while_read(before, &after, total));
        if changed {
            return Ok(Err(format!(
                "{}: file changed while it was read (the snapshot holds the {total} bytes read)",
                path.display()
            )));
        }
        Ok(Ok(()))
    }

    /// Every extended attribute of `path` (not following a symlink),
    /// including POSIX ACLs (`system.posix_acl_*`). Failures are reported.
    pub(super) fn read_xattrs(&mut self, path: &Path, fs_path: &Path) -> Vec<Xattr> {
        let names = match xattr::list(fs_path) {
            Ok(n) => n,
            Err(e) => {
                // Filesystems without xattrs say so; that is not a problem.
                if e.raw_os_error() != Some(libc::ENOTSUP) {
                    self.warnings.push(format!(
                        "{}: cannot list extended attributes: {e}",
                        path.display()
                    ));
                }
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for name in names {
            match xattr::get(fs_path, &name) {
                Ok(Some(value)) => out.push(Xattr {
                    name: name.as_bytes().to_vec(),
                    value,
                }),
                Ok(None) => {}
                Err(e) => self.warnings.push(format!(
                    "{}: cannot read extended attribute {}: {e}",
                    path.display(),
                    name.to_string_lossy()
                )),
            }
        }
        out.sort();
        out
    }
}

/// Whether a file read `total` bytes from, found by the walk as `before`
/// and seen as `after` once read, changed meanwhile (or was replaced).
fn changed_while_read(before: &std::fs::Metadata, after: &std::fs::Metadata, total: u64) -> bool {
    !after.is_file()
        || after.ino() != before.ino()
        || after.dev() != before.dev()
        || after.len() != before.len()
        || after.mtime() != before.mtime()
        || after.mtime_nsec() != before.mtime_nsec()
        || total != before.len()
}
