//! Progress reporting: the small trait the library's long operations call as
//! they go. The library never draws anything; the CLI implements the trait
//! with a terminal display (or JSON lines), and [`NoProgress`] ignores it.
//!
//! What is done is told as it happens ([`Progress::bytes`],
//! [`Progress::file_done`]); what there is to do is told by a scan that runs
//! beside the operation ([`Progress::totals`], growing until `complete`), as
//! restic's scanner does, so a display can show a percentage and an ETA.

use std::path::Path;

/// Receives progress as files are processed.
pub trait Progress: Sync {
    /// A file is about to be read (or written).
    fn file(&self, _path: &Path) {}
    /// `n` more bytes were processed (read, written, or skipped as unchanged).
    fn bytes(&self, _n: u64) {}
    /// One more file is done (stored, unchanged, or restored).
    fn file_done(&self) {}
    /// The scan so far found `files` files of `bytes` bytes in all;
    /// `complete` once it has seen everything.
    fn totals(&self, _files: u64, _bytes: u64, _complete: bool) {}
}

/// No progress output.
pub struct NoProgress;
impl Progress for NoProgress {}
