//! `backup --stdin`: one stream (a database dump, an archive piped in)
//! stored as one file at the top of a new snapshot, as restic's `--stdin`
//! does: the file is named by `--stdin-filename` (`stdin` by default), has
//! mode 0644, the running user as owner and the backup's time as its
//! times, and the snapshot's one path is `/NAME`. The stream is chunked,
//! deduplicated and stored through the same sink and storing stage as the
//! files of a tree walk; there is no parent (nothing to compare a stream
//! with), so every chunk is hashed and looked up. The stream is standard
//! input or, for `--stdin-from-command`, a command's output
//! ([`super::command`]), started once the lock is held.

use super::blobs::{SharedSink, ZeroIds};
use super::command::CommandOutput;
use super::{BackupOptions, BackupResult, store};
use crate::error::{Error, Result};
use crate::id::Id;
use crate::pack::BlobType;
use crate::progress::Progress;
use crate::repository::Repository;
use crate::snapshot::{self, Snapshot, Summary};
use crate::tree::{Node, NodeKind, Tree};
use std::ffi::OsString;
use std::io::Read;
use std::path::Path;
use std::time::Instant;

/// The name a stream is stored under when none is given.
pub const DEFAULT_NAME: &str = "stdin";

/// Where a stream comes from.
pub enum Stream<'a> {
    /// A reader (standard input; errors name it so).
    Reader(&'a mut dyn Read),
    /// The standard output of this command (program, then arguments).
    Command(&'a [OsString]),
}

/// Backs up `stream` (read to its end) as the file `name` of a new snapshot
/// (none in a dry run), under a shared lock as a backup of files is; of
/// `opts`, the tags, host, time and `dry_run` apply. A read error, or a
/// command that fails, stops the backup with an error (no partial
/// snapshot of a stream is saved); what was stored before it is indexed,
/// for the next run to reuse.
pub fn backup_stream(
    repo: &Repository,
    stream: Stream<'_>,
    name: &str,
    opts: &BackupOptions,
    progress: &dyn Progress,
) -> Result<BackupResult> {
    let start = Instant::now();
    if !crate::tree::is_safe_name(name.as_bytes()) {
        return Err(Error::Usage(format!(
            "--stdin-filename {name:?}: give a file name, without `/`, not `.` or `..`"
        )));
    }
    let (lock, _read_lock) = if opts.dry_run {
        (None, repo.lock_for_reading()?)
    } else {
        (Some(repo.lock_shared()?), None)
    };
    if let Some(l) = &lock {
        // Under the lock, as a backup of files does (see `backup`).
        repo.sync_index()?;
        l.check()?;
    }
    let chunker = repo.chunker()?;
    // A command starts only now that the lock is held; dropped on any
    // error below, it is killed.
    let mut command = None;
    let (input, source): (&mut dyn Read, String) = match stream {
        Stream::Reader(r) => (r, "standard input".into()),
        Stream::Command(argv) => {
            let c = command.insert(CommandOutput::spawn(argv)?);
            let label = c.label().to_string();
            (c, label)
        }
    };
    let store = match &lock {
        None => None,
        Some(l) => Some(store::Store::new(repo, Some(l.handle()))?),
    };
    let segmented = store.as_ref().map(store::Store::segmented).transpose()?;
    let time_ns = opts.time.unwrap_or_else(crate::host::now_ns);
    let streamed = std::thread::scope(|scope| {
        let (sink, handle) = store::sink_and_workers(scope, repo, store.as_ref(), segmented);
        let stored = store_stream(&sink, &chunker, input, &source, name, time_ns, progress)
            .and_then(|r| sink.close().map(|()| r));
        let added_plain = sink.added_plain();
        drop(sink);
        if let Some(workers) = handle {
            workers.join()?;
        }
        Ok::<_, Error>((stored, added_plain?))
    });
    // The last pack and segment are written even after a failed read.
    let finished = store.map(store::Store::finish).transpose();
    let (stored, added_plain) = streamed?;
    let finished = finished?;
    let (root, size) = stored?;
    // Stored whole; a command that failed has no snapshot of its output.
    if let Some(c) = command.as_mut() {
        c.finish()?;
    }
    let summary = Summary {
        files_new: 1,
        bytes_read: size,
        total_files: 1,
        total_bytes: size,
        data_added: finished.as_ref().map_or(0, |s| s.bytes_added_stored),
        data_added_plain: added_plain,
        duration_ms: start.elapsed().as_millis() as u64,
        ..Summary::default()
    };
    let snap = Snapshot::by_this_process(
        time_ns,
        opts.host.clone().unwrap_or_else(crate::host::hostname),
        vec![format!("/{name}")],
        opts.tags.clone(),
        root,
        None,
        summary.clone(),
    );
    let snapshot_id = match &lock {
        None => None,
        Some(l) => {
            l.check()?;
            Some(snapshot::save(repo, &snap)?)
        }
    };
    Ok(BackupResult {
        snapshot_id,
        parent: None,
        summary,
        warnings: Vec::new(),
        notices: repo.take_index_problems(),
        bytes_guided: 0,
        skipped: false,
    })
}

/// Chunks and stores the stream, then its file node's one-entry root
/// tree; returns that tree's ID and the stream's length.
fn store_stream(
    sink: &SharedSink<'_>,
    chunker: &crate::chunker::Chunker,
    input: &mut dyn Read,
    source: &str,
    name: &str,
    time_ns: i64,
    progress: &dyn Progress,
) -> Result<(Id, u64)> {
    progress.file(Path::new(name));
    let mut zeros = ZeroIds::default();
    let mut content = Vec::new();
    let mut buf = Vec::new();
    let size = chunker.stream(
        input,
        &mut buf,
        |chunk| {
            crate::interrupt::check()?;
            content.push(sink.store(&mut zeros, BlobType::Data, chunk, false)?);
            progress.bytes(chunk.len() as u64);
            Ok(())
        },
        |e| Error::io(Path::new(source), e),
    )?;
    progress.file_done();
    let node = Node {
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
        user: crate::host::username().into(),
        mtime_ns: time_ns,
        ctime_ns: time_ns,
        size,
        content,
        ..Node::made_up(name.as_bytes().to_vec(), NodeKind::File, 0o644)
    };
    let mut tree = Tree { nodes: vec![node] };
    tree.canonicalize();
    let root = sink.store(&mut zeros, BlobType::Tree, &tree.encode()?, false)?;
    Ok((root, size))
}
