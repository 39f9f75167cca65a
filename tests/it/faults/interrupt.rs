//! Ctrl-C and SIGTERM in the middle of a backup (issue 10, "What to
//! build"): the run stops cleanly with exit code 130, indexes the packs it
//! finished, removes its lock and leaves no temporary file, so `check`
//! has nothing to say; the next backup reuses what was stored.

use super::concurrency::start_backup;
use super::{
    assert_each_blob_stored_once, assert_objects_whole, backup_ok, check_passes, cli_repo, fill,
    notices, restore_cli, snapshot_names, temp_files,
};
use crate::support::{assert_same_tree, pack_files};
use nix::sys::signal::{Signal, kill};
use std::fs;

#[test]
fn sigint_and_sigterm_stop_a_backup_cleanly() {
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        let t = cli_repo();
        let (repo, cache) = (t.repo_path(), t.cache_path());
        let base = tempfile::tempdir().unwrap();
        let src = base.path().join("src");
        fill(&src, 100, 12, 1 << 20);

        // Stopped once two of its packs are stored, then sent the signal.
        let mut running = start_backup(&t, &src);
        running.pause_at(&repo, 2);
        kill(running.pid(), sig).unwrap();
        let o = running.finish();
        assert_eq!(o.code, 130, "{sig}: {}", o.all());
        let stored = pack_files(&repo).0;
        assert!(stored >= 2, "{sig}");
        assert!(snapshot_names(&repo).is_empty(), "{sig}: no snapshot");
        let locks: Vec<_> = fs::read_dir(repo.join("locks")).unwrap().collect();
        assert!(locks.is_empty(), "{sig}: lock left: {locks:?}");
        assert!(
            temp_files(&repo).is_empty(),
            "{sig}: {:?}",
            temp_files(&repo)
        );
        assert_objects_whole(&repo);
        let chk = check_passes(&repo, &cache, false, &format!("after {sig}"));
        assert!(
            notices(&chk).is_empty(),
            "{sig}: every pack the run stored is indexed: {}",
            chk.all()
        );

        let id = backup_ok(&repo, &cache, &src);
        let back = restore_cli(&repo, &cache, &id, &src, &base.path().join("r"));
        assert_same_tree(&src, &back);
        assert_each_blob_stored_once(&t.open().unwrap());
    }
}
