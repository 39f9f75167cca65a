//! I/O errors and short transfers injected into source reads and
//! repository writes: a source file that fails with EIO is named with its
//! path, left out of the snapshot (exit code 3) while the other files are
//! stored exactly; a repository write that fails (EIO, ENOSPC, a failed
//! fsync, a write that stops halfway) fails the run cleanly, with nothing
//! half-written under a final name and `check` passing; short reads and
//! short writes change nothing.

use super::faulty_backend::{Fault, FaultyBackend};
use super::shim;
use super::{
    Out, assert_each_blob_stored_once, assert_objects_whole, backup_ok, check_passes, fill,
    larder_cmd, notices, restore_cli, snapshot_id_of, snapshot_names, spawn, temp_files,
    wait_bounded,
};
use crate::common::{self, TestRepo};
use crate::support::{assert_same_tree, lib_backup, lib_restore, path_str, rand_bytes, write};
use larder::archiver::{BackupOptions, backup};
use larder::check::{CheckOptions, check};
use larder::keys::Credential;
use larder::progress::NoProgress;
use larder::repository::Repository;
use larder::{Error, Id};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Runs `larder ARGS` with the fault library loaded and `vars` set.
fn larder_faulty(repo: &Path, cache: &Path, args: &[&str], vars: &[(&str, String)]) -> Out {
    let mut c = larder_cmd(repo, cache, args);
    shim::inject(&mut c, vars);
    wait_bounded(spawn(c), &format!("larder {args:?} with {vars:?}"))
}

/// A source tree with one file, `bad.bin` (3 MiB), to be hit; returns
/// the tree and the real path of that file (the one `/proc` shows).
fn source_with_a_bad_file(base: &Path) -> (PathBuf, PathBuf) {
    let src = base.join("src");
    fill(&src, 60, 6, 300_000);
    write(&src.join("bad.bin"), &rand_bytes(61, 3 << 20));
    write(&src.join("z.txt"), b"after the bad file");
    let bad = fs::canonicalize(src.join("bad.bin")).unwrap();
    (src, bad)
}

/// A file whose read fails with EIO halfway: the warning names its path
/// and the error, the exit code is 3, the snapshot holds every other file
/// exactly and leaves the bad one out, and `check` passes.
#[test]
fn source_read_error_is_named_and_the_rest_is_saved() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let (src, bad) = source_with_a_bad_file(base.path());

    let o = larder_faulty(
        &repo,
        &cache,
        &["backup", "--json", path_str(&src)],
        &[
            ("FAULTSHIM_READ_PATH", path_str(&bad).to_string()),
            ("FAULTSHIM_READ_MODE", "eio".into()),
            ("FAULTSHIM_READ_AFTER", (1_200_000).to_string()),
        ],
    );
    assert_eq!(o.code, 3, "{}", o.all());
    let warnings: Vec<&str> = o
        .err
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", o.all());
    assert!(
        warnings[0].contains(path_str(&src.join("bad.bin")))
            && warnings[0].contains("Input/output error"),
        "the warning names the file and the error: {}",
        warnings[0]
    );
    let id = snapshot_id_of(&o);
    let back = restore_cli(&repo, &cache, &id, &src, &base.path().join("r"));
    assert!(
        !back.join("bad.bin").exists(),
        "the unreadable file is left out"
    );
    fs::remove_file(src.join("bad.bin")).unwrap();
    assert_eq!(
        assert_same_tree(&src, &back),
        10,
        "every other entry, exactly"
    );
    check_passes(&repo, &cache, true, "after the read error");
}

/// Reads that return at most 1000 bytes each (legal, as a network
/// filesystem may give) store the file exactly.
#[test]
fn short_source_reads_store_the_file_exactly() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let (src, bad) = source_with_a_bad_file(base.path());
    let report = base.path().join("report");
    let o = larder_faulty(
        &repo,
        &cache,
        &["backup", "--json", path_str(&src)],
        &[
            ("FAULTSHIM_READ_PATH", path_str(&bad).to_string()),
            ("FAULTSHIM_READ_MODE", "short".into()),
            ("FAULTSHIM_REPORT", path_str(&report).to_string()),
        ],
    );
    assert_eq!(o.code, 0, "{}", o.all());
    let (reads, _) = shim::shortened(&report);
    assert!(reads >= 1000, "only {reads} reads were shortened");
    let back = restore_cli(
        &repo,
        &cache,
        &snapshot_id_of(&o),
        &src,
        &base.path().join("r"),
    );
    assert_eq!(assert_same_tree(&src, &back), 11);
}

/// Repository writes that fail (EIO or ENOSPC after a number of bytes, an
/// fsync that fails after a number of them), one run after another on the
/// same repository: each run exits 1 naming the cause and saves no
/// snapshot; every object under a final name is whole, no temporary file
/// is left and `check` passes after each; a run without faults then stores
/// the tree exactly, reusing what the failed runs stored.
#[test]
fn failing_repository_writes_fail_the_backup_cleanly() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let first = base.path().join("first");
    fill(&first, 70, 4, 100_000);
    let s0 = backup_ok(&repo, &cache, &first);
    let src = base.path().join("src");
    fill(&src, 71, 10, 500_000); // 5 MiB: five packs or so

    let real_repo = path_str(&fs::canonicalize(&repo).unwrap()).to_string();
    let write_fault = |mode: &str, after: u64| {
        vec![
            ("FAULTSHIM_WRITE_PREFIX", real_repo.clone()),
            ("FAULTSHIM_WRITE_MODE", mode.to_string()),
            ("FAULTSHIM_WRITE_AFTER", after.to_string()),
        ]
    };
    let fsync_fault = |after: u64| {
        vec![
            ("FAULTSHIM_FSYNC_PREFIX", real_repo.clone()),
            ("FAULTSHIM_FSYNC_AFTER", after.to_string()),
        ]
    };
    let cases = [
        (write_fault("eio", 0), "Input/output error"),
        (write_fault("eio", 300_000), "Input/output error"),
        (write_fault("enospc", 1_500_000), "No space left on device"),
        (write_fault("eio", 3_100_000), "Input/output error"),
        (fsync_fault(0), "Input/output error"),
        (fsync_fault(2), "Input/output error"),
        (fsync_fault(5), "Input/output error"),
    ];
    for (vars, cause) in &cases {
        let o = larder_faulty(&repo, &cache, &["backup", "--json", path_str(&src)], vars);
        assert_eq!(o.code, 1, "{vars:?}: {}", o.all());
        assert!(
            o.err.lines().any(|l| l.contains(cause)
                && (l.contains(&real_repo) || l.contains("repository object"))),
            "{vars:?}: the error names the cause: {}",
            o.all()
        );
        assert_eq!(snapshot_names(&repo), [s0.clone()].into(), "{vars:?}");
        assert_objects_whole(&repo);
        assert!(
            temp_files(&repo).is_empty(),
            "{vars:?}: temporary files left: {:?}",
            temp_files(&repo)
        );
        check_passes(&repo, &cache, false, &format!("after {vars:?}"));
    }
    let s1 = backup_ok(&repo, &cache, &src);
    let back = restore_cli(&repo, &cache, &s1, &src, &base.path().join("r"));
    assert_same_tree(&src, &back);
    let chk = check_passes(&repo, &cache, true, "at the end");
    assert!(notices(&chk).is_empty(), "{}", chk.all());
    assert_each_blob_stored_once(&t.open().unwrap());
}

/// Writes to the repository that take at most 4093 bytes each (legal for
/// write(2)) store everything exactly.
#[test]
fn short_repository_writes_store_everything() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    fill(&src, 80, 6, 400_000);
    let real_repo = path_str(&fs::canonicalize(&repo).unwrap()).to_string();
    let report = base.path().join("report");
    let o = larder_faulty(
        &repo,
        &cache,
        &["backup", "--json", path_str(&src)],
        &[
            ("FAULTSHIM_WRITE_PREFIX", real_repo),
            ("FAULTSHIM_WRITE_MODE", "short".into()),
            ("FAULTSHIM_REPORT", path_str(&report).to_string()),
        ],
    );
    assert_eq!(o.code, 0, "{}", o.all());
    let (_, writes) = shim::shortened(&report);
    assert!(writes >= 500, "only {writes} writes were shortened");
    let back = restore_cli(
        &repo,
        &cache,
        &snapshot_id_of(&o),
        &src,
        &base.path().join("r"),
    );
    assert_same_tree(&src, &back);
    check_passes(&repo, &cache, true, "after short writes");
}

/// Copies a directory tree of regular files.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            fs::copy(e.path(), &dest).unwrap();
        }
    }
}

fn open_on(backend: Arc<dyn larder::backend::Backend>, cache: &Path) -> Repository {
    Repository::open(backend, &Credential::passphrase(common::PASS), cache).unwrap()
}

/// Through a backend wrapper, every write of a backup in turn (the lock,
/// each pack, the index segment, the snapshot) fails, with EIO or halfway:
/// the backup returns that error naming the object (no panic, no snapshot),
/// leaves no temporary file and only whole objects, `check --read-data`
/// passes, and a backup without faults then restores exactly.
#[test]
fn each_repository_write_failing_in_turn_fails_the_backup_cleanly() {
    let t = TestRepo::new();
    drop(t.init());
    let base = tempfile::tempdir().unwrap();
    let first = base.path().join("first");
    fill(&first, 90, 3, 50_000);
    let s0 = lib_backup(&t.open().unwrap(), &[&first])
        .snapshot_id
        .unwrap();
    let src = base.path().join("src");
    fill(&src, 91, 7, 500_000);
    let opts = BackupOptions {
        paths: vec![src.clone()],
        ..Default::default()
    };

    // A healthy run counts the writes.
    let counted = base.path().join("counted");
    copy_tree(&t.repo_path(), &counted);
    let be = Arc::new(FaultyBackend::new(&counted, None, Fault::Eio));
    backup(
        &open_on(be.clone(), &base.path().join("c0")),
        &opts,
        &NoProgress,
    )
    .unwrap();
    let total = be.writes();
    let kinds = be.log.lock().unwrap().clone();
    for k in ["locks/", "packs/", "index/", "snapshots/"] {
        assert!(kinds.iter().any(|o| o.starts_with(k)), "{k} in {kinds:?}");
    }

    for fault in [Fault::Eio, Fault::Short] {
        for n in 1..=total {
            let what = format!("{fault:?} at write {n} of {total}");
            let dir = base.path().join(format!("{fault:?}-{n}"));
            let (copy, cache) = (dir.join("repo"), dir.join("cache"));
            copy_tree(&t.repo_path(), &copy);
            let be = Arc::new(FaultyBackend::new(&copy, Some(n), fault));
            let r = open_on(be.clone(), &cache);
            let e = backup(&r, &opts, &NoProgress)
                .err()
                .unwrap_or_else(|| panic!("{what}: the backup succeeded"));
            drop(r);
            let failed = be.log.lock().unwrap()[n - 1].clone();
            assert!(
                matches!(e, Error::Backend { .. }) && e.to_string().contains(&failed),
                "{what}: the error names {failed}: {e}"
            );
            assert!(
                temp_files(&copy).is_empty(),
                "{what}: {:?}",
                temp_files(&copy)
            );
            assert_objects_whole(&copy);
            let snaps = snapshot_names(&copy);
            assert_eq!(snaps, [s0.to_hex()].into(), "{what}");

            let plain = Arc::new(larder::backend::LocalBackend::new(&copy));
            let r = open_on(plain, &cache);
            let rep = check(
                &r,
                &CheckOptions {
                    read_data: true,
                    subset: None,
                },
            )
            .unwrap();
            assert!(rep.problems.is_empty(), "{what}: {:?}", rep.problems);
            let id: Id = lib_backup(&r, &[&src]).snapshot_id.unwrap();
            let dest = dir.join("restored");
            let rr = lib_restore(&r, &id, &src, &dest);
            assert!(rr.errors.is_empty(), "{what}: {:?}", rr.errors);
            assert_same_tree(&src, &dest);
            assert_each_blob_stored_once(&r);
            drop(r);
            fs::remove_dir_all(&dir).unwrap();
        }
    }
}
