//! Progress reporting: the small trait the library's long operations call as
//! they go. The library never draws anything; the CLI implements the trait
//! with a terminal display (or JSON lines), and [`NoProgress`] ignores it.

use std::path::Path;

/// Receives progress as files are processed.
pub trait Progress: Sync {
    /// A file is about to be read.
    fn file(&self, _path: &Path) {}
    /// `n` more bytes were processed (read or skipped as unchanged).
    fn bytes(&self, _n: u64) {}
}

/// No progress output.
pub struct NoProgress;
impl Progress for NoProgress {}
