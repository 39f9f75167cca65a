//! Marks of backup runs in progress, kept in this client's cache
//! (`<cache>/runs/<pid>-<start time>-<n>`), so that a backup knows whether
//! a run before it failed or was killed.
//!
//! A killed run may leave packs that no index segment lists. Listing
//! `packs/` to find them costs one request per thousand packs on remote
//! storage, so a backup looks for them only when it has a reason: a mark
//! whose process is gone (a run on this client was killed), a mark its run
//! left as failed (`…-failed`: the run returned an error), or no `runs/`
//! directory at all (the first backup from this cache, which knows nothing
//! of earlier runs). Packs a run on another client left behind are found
//! by that client's next backup or removed by `prune`; missing them costs
//! only deduplication, never data.

use crate::host::{self, ProcessState};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// This run's mark; removed by [`RunMark::finish`] when the run has
/// stored everything. A run that fails leaves it renamed as failed (on
/// drop); a killed one leaves it as it is.
pub(super) struct RunMark {
    path: Option<PathBuf>,
    /// Marks of runs whose process is gone.
    dead: Vec<PathBuf>,
    /// Whether packs of an earlier run may be unlisted by any segment.
    pub(super) look_for_orphans: bool,
}

impl RunMark {
    /// Writes this run's mark under `cache_dir` and reads the others. A
    /// cache that cannot be written makes the run look for orphans (the
    /// safe side) and leaves no mark.
    pub(super) fn begin(cache_dir: &Path) -> RunMark {
        let dir = cache_dir.join("runs");
        let first = !dir.is_dir();
        let mut dead = Vec::new();
        if let Ok(rd) = fs::read_dir(&dir) {
            for e in rd.flatten() {
                if mark_is_dead(&e.file_name().to_string_lossy()) {
                    dead.push(e.path());
                }
            }
        }
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let pid = std::process::id();
        let start = host::process_start(pid).map(|(s, _)| s).unwrap_or(0);
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{pid}-{start}-{seq}"));
        let written = fs::create_dir_all(&dir).and_then(|()| fs::write(&path, b""));
        RunMark {
            look_for_orphans: first || !dead.is_empty() || written.is_err(),
            path: written.is_ok().then_some(path),
            dead,
        }
    }

    /// The run stored everything (or orphans were indexed): this mark and
    /// those of dead runs go.
    pub(super) fn finish(mut self) {
        for p in self.dead.iter().chain(self.path.as_ref()) {
            let _ = fs::remove_file(p);
        }
        self.path = None;
    }

    /// Orphans were looked for and indexed: the dead runs' marks go now, so
    /// a later run does not look again for their sake.
    pub(super) fn forget_dead(&mut self) {
        for p in self.dead.drain(..) {
            let _ = fs::remove_file(p);
        }
    }
}

impl Drop for RunMark {
    /// A run that did not finish: its mark says so, whatever its process
    /// does next.
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            let mut failed = p.clone().into_os_string();
            failed.push("-failed");
            let _ = fs::rename(&p, failed);
        }
    }
}

/// Whether a mark named `<pid>-<start>-<n>` belongs to a run that is over
/// without finishing: its process is gone or is another one. A failed
/// run's mark, or any name that does not parse, counts as dead (it is
/// removed, and the run looks for orphans once).
fn mark_is_dead(name: &str) -> bool {
    let mut parts = name.splitn(3, '-');
    let (Some(pid), Some(start), Some(seq)) = (parts.next(), parts.next(), parts.next()) else {
        return true;
    };
    match (pid.parse::<u32>(), start.parse::<u64>(), seq.parse::<u64>()) {
        (Ok(pid), Ok(start), Ok(_)) => host::process_state(pid, start) != ProcessState::Running,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_run_looks_then_a_finished_run_does_not() {
        let d = tempfile::tempdir().unwrap();
        let m = RunMark::begin(d.path());
        assert!(
            m.look_for_orphans,
            "a new cache knows nothing of earlier runs"
        );
        m.finish();
        let m = RunMark::begin(d.path());
        assert!(!m.look_for_orphans);
        m.finish();
        assert_eq!(fs::read_dir(d.path().join("runs")).unwrap().count(), 0);
    }

    #[test]
    fn a_dead_runs_mark_makes_the_next_run_look_once() {
        let d = tempfile::tempdir().unwrap();
        RunMark::begin(d.path()).finish();
        // A mark of a process that is gone (pid 0 is never a process).
        fs::write(d.path().join("runs/0-1-0"), b"").unwrap();
        let mut m = RunMark::begin(d.path());
        assert!(m.look_for_orphans);
        assert_eq!(
            m.dead,
            vec![d.path().join("runs/0-1-0")],
            "only the dead one"
        );
        m.forget_dead();
        assert!(!d.path().join("runs/0-1-0").exists());
        m.finish();
        assert!(!RunMark::begin(d.path()).look_for_orphans);
    }

    #[test]
    fn a_run_that_fails_makes_the_next_look_even_in_the_same_process() {
        let d = tempfile::tempdir().unwrap();
        RunMark::begin(d.path()).finish();
        drop(RunMark::begin(d.path()));
        let m = RunMark::begin(d.path());
        assert!(m.look_for_orphans);
        m.finish();
        assert_eq!(fs::read_dir(d.path().join("runs")).unwrap().count(), 0);
    }

    #[test]
    fn a_live_process_mark_is_not_dead() {
        let pid = std::process::id();
        let (start, _) = host::process_start(pid).unwrap();
        assert!(!mark_is_dead(&format!("{pid}-{start}-3")));
        assert!(
            mark_is_dead(&format!("{pid}-{}-3", start + 1)),
            "pid reused"
        );
        assert!(mark_is_dead(&format!("{pid}-{start}-3-failed")));
        assert!(mark_is_dead("junk"));
    }
}
