//! Filling one batch of files: plan the pack reads, create the files, read
//! each pack region once, decrypt, decompress and re-hash every blob against
//! its ID, write it with positioned writes to every file that needs it (an
//! all-zero chunk is skipped, so sparse files stay sparse), then size, set
//! the metadata of and name each complete file (with `verify`, read back
//! first and checked chunk by chunk against the IDs). Reads and files are
//! handled in parallel; a file that fails is reported and never shows under
//! its name.

use super::plan::{self, BlobTargets, Failures, PackRead};
use super::source::PackSource;
use super::target::{Destination, FileJob, put_in_place, remove_tmp};
use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::pack;
use crate::progress::{Action, Progress};
use crate::repository::Repository;
use rayon::prelude::*;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// What one written batch adds to the report.
#[derive(Default)]
pub(super) struct BatchOutcome {
    pub(super) files: u64,
    pub(super) bytes: u64,
    pub(super) errors: Vec<String>,
    /// Files read back and found whole (`verify`).
    pub(super) verified: u64,
}

/// A created file: its descriptor and whether it is unnamed (`O_TMPFILE`).
type Created = Option<(File, bool)>;

/// Writes the content of `jobs`, pack by pack, then their metadata.
pub(super) fn write_batch(
    repo: &Repository,
    source: &PackSource<'_>,
    dest: &Destination,
    jobs: Vec<FileJob>,
    verify: bool,
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
    let verify = verify.then_some(repo);
    Ok(finish_files(
        dest, &jobs, failures, files, holes, verify, progress,
    ))
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
    verify: Option<&Repository>,
    progress: &dyn Progress,
) -> BatchOutcome {
    let outcomes: Vec<(Option<String>, std::result::Result<(), String>)> = jobs
        .par_iter()
        .zip(failures.into_inner())
        .zip(files)
        .zip(holes)
        .map(|(((job, fail), file), hole)| {
            let out = finish_file(dest, job, fail, file, hole.into_inner(), verify);
            if out.1.is_ok() {
                progress.file_done();
                let action = if job.existed {
                    Action::Updated
                } else {
                    Action::Restored
                };
                progress.tell(Path::new(&job.shown), false, action, job.node.size);
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
                report.verified += u64::from(verify.is_some());
            }
            Err(e) => report.errors.push(e),
        }
    }
    report
}

/// Reads `file` back and checks it holds exactly `node`'s content: each
/// chunk's bytes hash to its ID (the chunk lengths are the index's), and
/// nothing follows the last. Says why it does not.
pub(super) fn verify_file(
    repo: &Repository,
    file: &File,
    node: &crate::tree::Node,
) -> std::result::Result<(), String> {
    let locs = repo.lookup_many(&node.content).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut off = 0u64;
    for (id, loc) in node.content.iter().zip(locs) {
        let loc = loc.ok_or_else(|| format!("chunk {} is not in the index", id.short()))?;
        buf.resize(loc.entry.plain_len as usize, 0);
        file.read_exact_at(&mut buf, off)
            .map_err(|e| format!("cannot read it back at offset {off}: {e}"))?;
        if repo.keys().blob_id(&buf) != *id {
            return Err(format!(
                "the {} bytes at offset {off} are not chunk {}",
                buf.len(),
                id.short()
            ));
        }
        off += buf.len() as u64;
    }
    let len = file
        .metadata()
        .map_err(|e| format!("cannot read its size: {e}"))?
        .len();
    if off != node.size || len != node.size {
        return Err(format!(
            "it holds {len} bytes and its chunks {off}, the snapshot's size is {}",
            node.size
        ));
    }
    Ok(())
}

/// Finishes one file: returns a report of metadata the target refused (the
/// content is still put in place) and whether the file is in place.
fn finish_file(
    dest: &Destination,
    job: &FileJob,
    fail: Option<String>,
    file: Created,
    hole: bool,
    verify: Option<&Repository>,
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
    // Read back before it is named: a file whose bytes are not the
    // snapshot's never shows under its name.
    if let (Ok(()), Some(repo)) = (&sized, verify)
        && let Err(why) = verify_file(repo, &file, &job.node)
    {
        drop(file);
        if !unnamed {
            remove_tmp(job);
        }
        return (None, Err(format!("{shown}: verify failed: {why}")));
    }
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

#[cfg(test)]
mod tests {
    use super::verify_file;
    use crate::archiver::{BackupOptions, backup};
    use crate::progress::NoProgress;
    use crate::repository::test_repository;
    use std::io::Write;

    /// A file read back is checked chunk by chunk: the bytes backed up
    /// pass; one changed byte, one byte more or one fewer does not.
    #[test]
    fn a_file_read_back_must_be_the_snapshots_bytes() {
        let d = tempfile::tempdir().unwrap();
        let repo = test_repository(d.path());
        let src = d.path().join("src");
        std::fs::create_dir_all(&src).unwrap();
        let mut data = vec![0u8; 3 << 20];
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i.wrapping_mul(2_654_435_761) >> 13) as u8;
        }
        std::fs::write(src.join("f"), &data).unwrap();
        let opts = BackupOptions {
            paths: vec![src.clone()],
            ..BackupOptions::default()
        };
        let id = backup(&repo, &opts, &NoProgress)
            .unwrap()
            .snapshot_id
            .unwrap();
        let snap = crate::snapshot::load(&repo, &id.to_hex()).unwrap();
        let dir = crate::walker::tree_at(&repo, snap.tree, src.to_str().unwrap()).unwrap();
        let node = repo.load_tree(&dir).unwrap().nodes.remove(0);
        assert!(node.content.len() > 1, "one chunk only");

        let check = |bytes: &[u8]| {
            let p = d.path().join("back");
            let mut f = std::fs::File::create(&p).unwrap();
            f.write_all(bytes).unwrap();
            let f = std::fs::File::open(&p).unwrap();
            verify_file(&repo, &f, &node)
        };
        check(&data).unwrap();
        let mut flipped = data.clone();
        flipped[2 << 20] ^= 1;
        let e = check(&flipped).unwrap_err();
        assert!(e.contains("are not chunk"), "{e}");
        let mut longer = data.clone();
        longer.push(0);
        assert!(
            check(&longer).unwrap_err().contains("holds"),
            "one byte more"
        );
        let e = check(&data[..data.len() - 1]).unwrap_err();
        assert!(e.contains("cannot read it back"), "{e}");
    }
}
