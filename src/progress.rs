//! Progress reporting: the small trait the library's long operations call as
//! they go. The library never draws anything; the CLI implements the trait
//! with a terminal display (or JSON lines), and [`NoProgress`] ignores it.
//!
//! What is done is told as it happens ([`Progress::bytes`],
//! [`Progress::file_done`]); what there is to do is told by a scan that runs
//! beside the operation ([`Progress::totals`], growing until `complete`), as
//! restic's scanner does, so a display can show a percentage and an ETA.
//! Work whose total is learnt phase by phase (prune) is counted with a
//! [`Tally`].

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
    /// Whether anything shows the totals: the scan beside an operation
    /// (a second walk of the same tree) runs only then. No by default.
    fn wants_totals(&self) -> bool {
        false
    }
    /// Whether anything shows what became of each entry (`-vv`): only then
    /// are [`Progress::entry`] calls made (their paths cost allocations).
    fn wants_entries(&self) -> bool {
        false
    }
    /// What became of one file or directory (see [`Entry`]).
    fn entry(&self, _e: &Entry<'_>) {}
    /// [`Progress::entry`], if anything shows entries.
    fn tell(&self, path: &Path, dir: bool, action: Action, size: u64) {
        if self.wants_entries() {
            self.entry(&Entry {
                path,
                dir,
                action,
                size,
            });
        }
    }
}

/// One entry's outcome, as restic's `-vv` prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    pub path: &'a Path,
    pub dir: bool,
    pub action: Action,
    /// A file's size in bytes (0 for a directory).
    pub size: u64,
}

/// What an operation did with an entry (restic's words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Backup: not in the parent snapshot.
    New,
    /// Backup: in the parent, changed.
    Modified,
    /// Backup: as in the parent (a file not read again, a directory whose
    /// tree is the parent's). Restore: an entry of the target left as it
    /// was (the overwrite policy kept it, or a directory already there).
    Unchanged,
    /// Restore: written where nothing was.
    Restored,
    /// Restore: written over what was there.
    Updated,
    /// Restore: removed from the target (`--delete`).
    Deleted,
}

impl Action {
    /// restic's word for it (`verbose_status`'s `action`).
    pub fn word(self) -> &'static str {
        match self {
            Action::New => "new",
            Action::Modified => "modified",
            Action::Unchanged => "unchanged",
            Action::Restored => "restored",
            Action::Updated => "updated",
            Action::Deleted => "deleted",
        }
    }
}

/// No progress output.
pub struct NoProgress;
impl Progress for NoProgress {}

/// Counts units of work (packs, say) done against a total learnt phase by
/// phase: [`Tally::ahead`] says what is left from now on, so the total told
/// to the [`Progress`] is what is done plus that. Done counts only grow.
pub struct Tally<'a> {
    progress: &'a dyn Progress,
    done: u64,
    done_bytes: u64,
}

impl<'a> Tally<'a> {
    pub fn new(progress: &'a dyn Progress) -> Self {
        Tally {
            progress,
            done: 0,
            done_bytes: 0,
        }
    }

    /// `units` more units of `bytes` bytes are to be done from now on;
    /// `complete` when no later phase adds any.
    pub fn ahead(&self, units: u64, bytes: u64, complete: bool) {
        self.progress
            .totals(self.done + units, self.done_bytes + bytes, complete);
    }

    /// One more unit, of `bytes` bytes, is done.
    pub fn one(&mut self, bytes: u64) {
        self.done += 1;
        self.done_bytes += bytes;
        self.progress.bytes(bytes);
        self.progress.file_done();
    }

    /// Nothing more is to be done: the total is what was done.
    pub fn finish(&self) {
        self.ahead(0, 0, true);
    }
}
