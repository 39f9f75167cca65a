//! `--no-cache`: a cache directory of the command's own in the system's
//! temporary directory (`TMPDIR`), owner-only, removed when the command
//! ends, even by an error or a panic. A command killed by a signal it does
//! not handle (SIGKILL; SIGINT or SIGTERM for the commands that only read,
//! which install no handler; a second SIGINT) leaves it behind, as any
//! temporary file; its name says what it is. A backup without a cache also
//! looks for packs a killed run left unindexed, as on a new machine (it
//! lists every pack).

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The temporary cache directory; removed (with all in it) on drop.
pub struct TempCache {
    path: PathBuf,
}

impl TempCache {
    /// Makes `larder-no-cache-PID-RANDOM` in the temporary directory.
    pub fn make() -> Result<TempCache> {
        use std::os::unix::fs::DirBuilderExt;
        let mut tag = [0u8; 8];
        getrandom::getrandom(&mut tag)
            .map_err(|e| Error::internal(format!("no random numbers: {e}")))?;
        let path = std::env::temp_dir().join(format!(
            "larder-no-cache-{}-{}",
            std::process::id(),
            hex::encode(tag)
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| Error::io(&path, e))?;
        Ok(TempCache { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempCache {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!(
                "warning: cannot remove the temporary cache {}: {e}",
                self.path.display()
            );
        }
    }
}
