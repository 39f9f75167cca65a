//! The reading workers of a backup: the walk hands each file it must read
//! (new, or changed since the parent snapshot) to a pool of threads that
//! read, chunk and hash it and hand its new chunks to the shared blob sink,
//! while the walk goes on. Each file's outcome comes back on its own
//! one-slot channel, which the walk's in-order assembly waits on (see
//! [`super::walk`]), so the trees come out as a single-threaded walk makes
//! them. A large file is read by two of them ([`super::split`]). The job
//! queue is bounded, and each worker holds one file's read buffer: memory
//! stays flat however many files change.

use super::blobs::{SharedSink, ZeroIds};
use super::file::{ReadOutcome, ReaderState, help, read_file};
use super::guide::Prior;
use super::queue::{Sending, queue};
use super::split::{HelpJob, Split};
use crate::chunker::Chunker;
use crate::error::Result;
use crate::progress::Progress;
use crossbeam_channel::Sender;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Scope;

/// Files queued for the workers beyond those being read.
const JOB_QUEUE: usize = 64;
/// A walk that finds the queue full waits until the workers have taken it
/// down to this many (see [`super::queue`]).
const LOW_WATER: usize = JOB_QUEUE / 2;

/// The walk's end of the job queue.
pub(super) type Jobs = Sending<Job>;

/// What a worker takes from the queue.
pub(super) enum Job {
    Read(ReadJob),
    /// The second half of a large file ([`super::split`]), queued right
    /// after the file's own job.
    Help(HelpJob),
}

/// One file to read, opened by the walk.
pub(super) struct ReadJob {
    pub(super) path: PathBuf,
    pub(super) file: std::io::Result<std::fs::File>,
    pub(super) md: crate::localfs::stat::Stat,
    pub(super) reply: Sender<Result<ReadOutcome>>,
    /// Shared with the file's help job, if it has one.
    pub(super) split: Option<Arc<Split>>,
    /// The parent's chunks of a changed file, to guide its cuts (shared
    /// with the help job).
    pub(super) prior: Option<Arc<Prior>>,
}

/// The number of reading workers: `chosen` (`--read-concurrency`), else
/// `LARDER_READ_THREADS`, else one per core; at most
/// [`super::MAX_READ_CONCURRENCY`].
pub(super) fn worker_count(chosen: Option<usize>) -> usize {
    chosen
        .or_else(|| {
            std::env::var("LARDER_READ_THREADS")
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
        })
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(2)
        .clamp(1, super::MAX_READ_CONCURRENCY)
}

/// The name of the reading workers' threads (as `ps -L` and
/// `/proc/PID/task/*/comm` show it).
pub const THREAD_NAME: &str = "larder-read";

/// Starts `workers` workers inside `scope` (fewer if the system refuses
/// more threads; an error if it refuses the first); returns the job queue
/// and how many started.
/// Drop the sender to stop them (each finishes its file first); set
/// `failed` first to have them skip the files still queued.
pub(super) fn spawn<'scope, 'env, 'r: 'env>(
    scope: &'scope Scope<'scope, 'env>,
    workers: usize,
    sink: &'env SharedSink<'r>,
    chunker: &Chunker,
    progress: &'env dyn Progress,
    failed: &'env AtomicBool,
) -> std::io::Result<(Jobs, usize)> {
    let (tx, rx) = queue::<Job>(JOB_QUEUE, LOW_WATER);
    let mut started = 0;
    while started < workers {
        let rx = rx.clone();
        let mut st = ReaderState {
            chunker: chunker.clone(),
            buf: Vec::new(),
            zeros: ZeroIds::default(),
        };
        let worker = move || {
            while let Some(job) = rx.recv() {
                if failed.load(Ordering::Relaxed) {
                    continue;
                }
                let job = match job {
                    Job::Read(job) => job,
                    Job::Help(h) => {
                        help(&mut st, sink, progress, &h);
                        continue;
                    }
                };
                let split = job.split.as_deref();
                let prior = job.prior.as_deref();
                let r = read_file(
                    &mut st, sink, progress, &job.path, job.file, &job.md, split, prior,
                );
                // The walk stopped waiting (it failed): nothing to do.
                let _ = job.reply.send(r);
            }
        };
        let spawned = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn_scoped(scope, worker);
        match spawned {
            Ok(_) => started += 1,
            Err(e) if started == 0 => return Err(e),
            // Those already started read everything.
            Err(_) => break,
        }
    }
    Ok((tx, started))
}
