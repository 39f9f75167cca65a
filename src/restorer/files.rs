//! Filling one batch of files: plan the pack reads, create the files, read
//! each pack region once, decrypt, decompress and re-hash every blob against
//! its ID, write it with positioned writes to every file that needs it (an
//! all-zero chunk is skipped, so sparse files stay sparse), then size, set
//! the metadata of and name each complete file. Reads and files are handled
//! in parallel; a file that fails is reported and never shows under its name.

use super::plan::{self, BlobTargets, Failures, PackRead};
use super::source::PackSource;
use super::target::{Destination, FileJob, put_in_place, remove_tmp};
use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::pack;
use crate::progress::Progress;
use crate::repository::Repository;
use rayon::prelude::*;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

/// What one written batch adds to the report.
#[derive(Default)]
pub(super) struct BatchOutcome {
    pub(super) files: u64,
    pub(super) bytes: u64,
    pub(super) errors: Vec<String>,
}

/// A created file: its descriptor and whether it is unnamed (`O_TMPFILE`).
type Created = Option<(File, bool)>;

/// Writes the content of `jobs`, pack by pack, then their metadata.
pub(super) fn write_batch(
    repo: &Repository,
    source: &PackSource<'_>,
    dest: &Destination,
    jobs: Vec<FileJob>,
    progress: &dyn Progress,
) -> Result<BatchOutcome> {
    let failures = Failures::new(jobs.len());
    let reads = plan::plan_reads(repo, source, &jobs, &failures)?;
    let files = create_files(dest, &jobs, &failures);
    // A file is sized (made sparse) only if a hole is left in it.
    let holes: Vec<AtomicBool> = jobs.iter().map(|_| AtomicBool::new(false)).collect();
    reads.into_par_iter().for_each(|r| {
        read_and_write(repo, source, r, &files, &failures, &holes, progress);
    });
    Ok(finish_files(dest, &jobs, failures, files, holes, progress))
}

/// Creates the batch's files in parallel.
fn create_files(dest: &Destination, jobs: &[FileJob], failures: &Failures) -> Vec<Created> {
    jobs.par_iter()
        .enumerate()
        .map(|(j, job)| {
            if !failures.is_ok(j) {
                return None;
            }
            match dest.create(job) {
                Ok(f) => Some(f),
                Err(e) => {
                    failures.set(j, format!("cannot create the file: {e}"));
                    None
                }
            }
        })
        .collect()
}

/// Reads one pack region and writes each of its blobs, verified, to every
/// place it goes. Blobs of one read are opened in parallel too: a batch of
/// small files is often a single read.
fn read_and_write(
    repo: &Repository,
    source: &PackSource<'_>,
    r: PackRead,
    files: &[Created],
    failures: &Failures,
    holes: &[AtomicBool],
    progress: &dyn Progress,
) {
    let pack_path = Kind::Pack.path(&r.pack.to_hex());
    let data = source.read(&r);
    r.blobs.par_iter().for_each(|b: &BlobTargets| {
        // This thread's plaintext buffer, taken (not borrowed: the pool may
        // run another blob on this thread while this one waits) and put back.
        let mut plain = PLAIN.take();
        let result = data.as_ref().map_err(|e| e.to_string()).and_then(|d| {
            let e = &b.loc.entry;
            let at = (e.offset - d.base) as usize;
            let s = &d.data[at..at + e.stored_len as usize];
            let what = pack::BlobIn {
                id: &e.id,
                pack: &pack_path,
            };
            pack::open_blob_into(repo.keys(), repo, &what, e, s, &mut plain)
                .map_err(|e| e.to_string())
        });
        write_blob(
            b,
            result.map(|()| &plain[..]),
            files,
            failures,
            holes,
            progress,
        );
        if plain.capacity() <= PLAIN_KEPT {
            PLAIN.set(plain);
        }
    });
    if let Ok(d) = data {
        d.recycle();
    }
}

/// The largest plaintext buffer a thread keeps for its next blob (a chunk
/// is at most 1 MiB by default).
const PLAIN_KEPT: usize = 4 << 20;

thread_local! {
    /// A restoring thread's buffer for the plaintext of one blob.
    static PLAIN: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Writes one opened blob (or why it could not be opened) to every place
/// it goes.
fn write_blob(
    b: &BlobTargets,
    opened: std::result::Result<&[u8], String>,
    files: &[Created],
    failures: &Failures,
    holes: &[AtomicBool],
    progress: &dyn Progress,
) {
    let plain = match opened {
        Ok(p) => p,
        Err(msg) => {
            for &(j, _) in &b.targets {
                failures.set(j, msg.clone());
            }
            return;
        }
    };
    let zero = plain.iter().all(|&b| b == 0);
    for &(j, off) in &b.targets {
        if zero {
            // A hole: the file is sized at the end.
            holes[j].store(true, Ordering::Relaxed);
            progress.bytes(plain.len() as u64);
            continue;
        }
        if !failures.is_ok(j) {
            continue;
        }
        let Some((f, _)) = &files[j] else { continue };
        match f.write_all_at(plain, off) {
            Ok(()) => progress.bytes(plain.len() as u64),
            Err(e) => failures.set(j, format!("write failed: {e}")),
        }
    }
}

/// Sizes, sets the metadata of (through the open descriptor) and names
/// every complete file, in parallel; reports in order.
fn finish_files(
    dest: &Destination,
    jobs: &[FileJob],
    failures: Failures,
    files: Vec<Created>,
    holes: Vec<AtomicBool>,
    progress: &dyn Progress,
) -> BatchOutcome {
    let outcomes: Vec<(Option<String>, std::result::Result<(), String>)> = jobs
        .par_iter()
        .zip(failures.into_inner())
        .zip(files)
        .zip(holes)
        .map(|(((job, fail), file), hole)| {
            let out = finish_file(dest, job, fail, file, hole.into_inner());
            if out.1.is_ok() {
                progress.file_done();
            }
            out
        })
        .collect();
    let mut report = BatchOutcome::default();
    for (job, (partial, res)) in jobs.iter().zip(outcomes) {
        if let Some(p) = partial {
            report.errors.push(p);
        }
        match res {
            Ok(()) => {
                report.files += 1;
                report.bytes += job.node.size;
            }
            Err(e) => report.errors.push(e),
        }
    }
    report
}

/// Finishes one file: returns a report of metadata the target refused (the
/// content is still put in place) and whether the file is in place.
fn finish_file(
    dest: &Destination,
    job: &FileJob,
    fail: Option<String>,
    file: Created,
    hole: bool,
) -> (Option<String>, std::result::Result<(), String>) {
    let shown = &job.shown;
    let (Some((file, unnamed)), None) = (file, &fail) else {
        remove_tmp(job);
        let msg = fail.unwrap_or_else(|| "cannot create the file".into());
        return (None, Err(format!("{shown}: {msg}")));
    };
    let sized = if hole {
        file.set_len(job.node.size)
            .map_err(|e| Error::io(&job.dest, e))
    } else {
        Ok(())
    };
    let (partial, res) = match sized
        .and_then(|()| dest.apply_file_meta(&file, &job.dest, &job.node, job.dir_state.owned))
    {
        Ok(()) => (None, Ok(())),
        Err(Error::Partial(msg)) => (Some(format!("{shown}: {msg}")), Ok(())),
        Err(e) => (None, Err(e)),
    };
    let res =
        res.and_then(|()| put_in_place(job, &file, unnamed).map_err(|e| Error::io(&job.dest, e)));
    drop(file);
    if res.is_err() && !unnamed {
        remove_tmp(job);
    }
    (partial, res.map_err(|e| format!("{shown}: {e}")))
}
