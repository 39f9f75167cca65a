//! Reading one changed file (on a reading worker, see [`super::readers`]):
//! opened without following links and without touching its atime, read to
//! the size the walk saw (holes of sparse files skipped), chunked, hashed
//! and handed to the blob sink, then checked with one fstat for changes
//! made while it was read. Also its extended attributes (on the walk).

use super::blobs::{SharedSink, ZeroIds};
use super::guide::Prior;
use super::split::{self, HelpJob, Helper, RangeReader, Split};
use super::walk::Archiver;
use crate::chunker::Chunker;
use crate::error::{Error, Result};
use crate::id::Id;
use crate::localfs::{sparse, stat::Stat};
use crate::pack::BlobType;
use crate::progress::Progress;
use crate::tree::Xattr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Files up to this size have their new chunks sealed by the worker that
/// reads them ([`SharedSink::store`] with `inline`): no copy, and the
/// bytes just hashed are still in the core's cache. A larger file's chunks
/// go to the sealing workers, so that one large file keeps every core busy.
const SEAL_IN_PLACE_MAX: u64 = 8 << 20;

/// What reading one file gave: its chunks and the bytes read, or why it
/// could not be read (completely).
pub(super) struct ReadOutcome {
    /// The chunk IDs of what was read (empty if nothing could be).
    pub(super) content: Vec<Id>,
    /// Bytes read; `None` if the file could not be opened or read.
    pub(super) size: Option<u64>,
    /// A file that could not be read completely, or changed meanwhile.
    pub(super) warning: Option<String>,
    /// With a warning: whether the path still exists.
    pub(super) exists: bool,
}

/// What a reading worker keeps between files.
pub(super) struct ReaderState {
    pub(super) chunker: Chunker,
    /// The read buffer, reused across files.
    pub(super) buf: Vec<u8>,
    pub(super) zeros: ZeroIds,
}

/// Reads and stores the content of the regular file at logical path
/// `path`, which the walk found with metadata `before` and opened (with
/// [`crate::localfs::open_noatime`]: the walk opens it, since the path the kernel
/// accepts may hang on a directory descriptor the walk closes once past
/// it). Only `before.size` bytes are read (no read to find the end); a
/// file that grew, shrank, was touched or replaced meanwhile is caught by
/// one fstat after the read. With `split`, another worker may read the
/// second half ([`super::split`]). With `prior`, the parent's chunks guide
/// the cuts ([`super::guide`]). Runs on a reading worker; an `Err` is
/// fatal to the backup (the store stopped, an interrupt), a file problem
/// is a warning in the outcome.
#[allow(clippy::too_many_arguments)]
pub(super) fn read_file(
    st: &mut ReaderState,
    sink: &SharedSink<'_>,
    progress: &dyn Progress,
    path: &Path,
    opened: std::io::Result<std::fs::File>,
    before: &Stat,
    split: Option<&Split>,
    prior: Option<&Prior>,
) -> Result<ReadOutcome> {
    let mut out = ReadOutcome {
        content: Vec::new(),
        size: None,
        warning: None,
        exists: true,
    };
    let f = match opened {
        Ok(f) => f,
        Err(e) => {
            out.warning = Some(format!("{}: cannot open: {e}", path.display()));
            out.exists = path.exists();
            return Ok(out);
        }
    };
    progress.file(path);
    let sparse = before.is_sparse();
    let mut plain_reader = std::io::Read::take(&f, before.size);
    let mut sparse_reader = sparse::SparseReader::new(&f, before.size);
    let reader: &mut dyn std::io::Read = if sparse {
        &mut sparse_reader
    } else {
        &mut plain_reader
    };
    let inline = before.size <= SEAL_IN_PLACE_MAX;
    let mut read_err: Option<String> = None;
    let hash = |d: &[u8]| sink.blob_id(d);
    let max = st.chunker.params().max as usize;
    let mut guided = prior.and_then(|p| p.guided(sink, &hash, before.size, 0, max));
    let read = {
        let (chunker, buf, zeros) = (&st.chunker, &mut st.buf, &mut st.zeros);
        let mut store = storing(sink, zeros, progress, inline);
        let mut on_err = |e| {
            read_err = Some(format!("{}: read failed: {e}", path.display()));
            Error::io(path, e)
        };
        let reader_at = |pos| RangeReader {
            file: &f,
            pos,
            end: before.size,
        };
        split::read_lead(
            chunker,
            buf,
            reader,
            reader_at,
            split,
            guided.as_mut(),
            &mut store,
            &mut on_err,
        )
    };
    let total = match (read, read_err) {
        (Ok((content, total)), _) => {
            out.content = content;
            total
        }
        (Err(_), Some(msg)) => {
            out.warning = Some(msg);
            out.exists = path.exists();
            return Ok(out);
        }
        (Err(e), None) => return Err(e),
    };
    out.size = Some(total);
    let changed = Stat::of(&f).map_or(true, |after| changed_while_read(before, &after, total));
    if changed {
        out.warning = Some(format!(
            "{}: file changed while it was read (the snapshot holds the {total} bytes read)",
            path.display()
        ));
        out.exists = path.exists();
    }
    Ok(out)
}

/// Chunks the second half of a split file on a helper worker, if the
/// lead has not taken it ([`super::split::read_helper`]).
pub(super) fn help(
    st: &mut ReaderState,
    sink: &SharedSink<'_>,
    progress: &dyn Progress,
    job: &HelpJob,
) {
    let Some(helper) = Helper::claim(&job.split) else {
        return;
    };
    let inline = job.size <= SEAL_IN_PLACE_MAX;
    let hash = |d: &[u8]| sink.blob_id(d);
    let max = st.chunker.params().max as usize;
    // Its first chunks are stored (and so hashed) past the warm-up.
    let from = job.split.stored_from;
    let mut guided = job
        .prior
        .as_deref()
        .and_then(|p| p.guided(sink, &hash, job.size, from, max));
    let (chunker, buf, zeros) = (&st.chunker, &mut st.buf, &mut st.zeros);
    let mut store = storing(sink, zeros, progress, inline);
    let mut reader = RangeReader {
        file: &job.file,
        pos: job.split.from,
        end: job.size,
    };
    split::read_helper(
        chunker,
        buf,
        &mut reader,
        job.size,
        helper,
        guided.as_mut(),
        &mut store,
    );
}

/// Stores one chunk of a file's data (sealed on this worker if `inline`;
/// with its ID if a guide proved it) and counts its bytes as done; stops
/// at an interrupt.
fn storing<'a>(
    sink: &'a SharedSink<'_>,
    zeros: &'a mut ZeroIds,
    progress: &'a dyn Progress,
    inline: bool,
) -> impl FnMut(&[u8], Option<Id>) -> Result<Id> + 'a {
    move |c, proved| {
        crate::interrupt::check()?;
        let id = match proved {
            Some(id) => {
                sink.note_guided(c.len());
                sink.store_as(BlobType::Data, id, c, inline)?
            }
            None => sink.store(zeros, BlobType::Data, c, inline)?,
        };
        progress.bytes(c.len() as u64);
        Ok(id)
    }
}

impl Archiver<'_, '_> {
    /// Every extended attribute of `path` (not following a symlink),
    /// including POSIX ACLs (`system.posix_acl_*`), read through `open`
    /// when the file is open, else by `fs_path`. Failures are reported.
    pub(super) fn read_xattrs(
        &mut self,
        path: &Path,
        fs_path: &Path,
        open: Option<&std::fs::File>,
    ) -> Vec<Xattr> {
        use xattr::FileExt;
        let listed = match open {
            Some(f) => f.list_xattr(),
            None => xattr::list(fs_path),
        };
        let names = match listed {
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
            let got = match open {
                Some(f) => f.get_xattr(&name),
                None => xattr::get(fs_path, &name),
            };
            match got {
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
fn changed_while_read(before: &Stat, after: &Stat, total: u64) -> bool {
    !after.is_file()
        || after.ino != before.ino
        || after.dev != before.dev
        || after.size != before.size
        || after.mtime != before.mtime
        || after.mtime_nsec != before.mtime_nsec
        || total != before.size
}
