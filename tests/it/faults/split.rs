//! A large file read by two workers (`archiver::split`: the lead from its
//! start, a helper from halfway), with other larder processes: two
//! backups of it at once on one repository, and a backup killed with
//! `kill -9` while the two workers read a grown copy of it. `check`
//! passes after each, the next backup completes, and the snapshot
//! restores byte for byte.

use super::{check_passes, larder_cmd, manifest, restore_cli, snapshot_id_of, spawn, wait_bounded};
use crate::support::{pack_files, path_str, rand_bytes, write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// `larder ARGS` with files of 1 MiB and more read by two workers.
fn split_cmd(repo: &Path, cache: &Path, args: &[&str]) -> Command {
    let mut c = larder_cmd(repo, cache, args);
    c.env("LARDER_SPLIT_MIN", "1048576")
        .env("LARDER_READ_THREADS", "2");
    c
}

#[test]
fn a_split_file_beside_another_backup_and_after_kill_9() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let big = src.join("big");
    write(&big, &rand_bytes(501, 20 << 20));
    write(&src.join("periodic"), &rand_bytes(502, 300_007).repeat(12));
    let backup = |args: &[&str]| {
        let mut a = vec!["backup", "--json"];
        a.extend_from_slice(args);
        a.push(path_str(&src));
        spawn(split_cmd(&repo, &cache, &a))
    };

    // Two backups of the tree at once, one of them forced to read every
    // file again.
    let (a, b) = (backup(&[]), backup(&["--force"]));
    let (a, b) = (wait_bounded(a, "first backup"), wait_bounded(b, "second"));
    assert_eq!(a.code, 0, "{}", a.all());
    assert_eq!(b.code, 0, "{}", b.all());
    check_passes(&repo, &cache, false, "after two backups at once");

    // New bytes in the big file, more than two packs' worth, after its
    // old ones (edited at the start: the lead is guided by the parent's
    // chunks, see `archiver::guide`, past the edit): the backup is killed
    // as its first pack reaches storage, while both workers read.
    let mut data = rand_bytes(501, 20 << 20);
    data[5000..9000].fill(7);
    data.extend_from_slice(&rand_bytes(503, 40 << 20));
    write(&big, &data);
    let packs = pack_files(&repo).0;
    let mut child = backup(&[]);
    let deadline = Instant::now() + Duration::from_secs(120);
    while pack_files(&repo).0 == packs {
        assert!(
            child.try_wait().unwrap().is_none(),
            "finished before a pack"
        );
        assert!(Instant::now() < deadline, "no pack after 120 s");
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    let killed = wait_bounded(child, "the killed backup");
    assert_eq!(killed.code, -1, "{}", killed.status);
    check_passes(&repo, &cache, false, "after kill -9");

    let after = wait_bounded(backup(&[]), "the backup after the kill");
    assert_eq!(after.code, 0, "{}", after.all());
    let id = snapshot_id_of(&after);
    let target = base.path().join("restored");
    let restored = restore_cli(&repo, &cache, &id, &src, &target);
    assert_eq!(manifest(&restored), manifest(&src));
    check_passes(&repo, &cache, true, "at the end");
}
