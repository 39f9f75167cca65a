//! `restore --delete` (restic 0.17): the target ends up exactly the
//! snapshot's tree: files, directories, symlinks and special files the
//! snapshot lacks are removed (a symlink to a directory outside the target
//! is removed as a link, never followed: what it points to stays), within
//! what `--include`/`--exclude` select only, and only at or below the
//! backed-up path (never beside it, in the directories above it);
//! `--dry-run` lists what would go and removes nothing. A restore killed mid-way and run again with
//! `--delete` ends exact too.

use crate::faults::{
    assert_same_manifest, backup_ok, cli_repo, fill, larder_ok, larder_run, manifest, spawn,
    wait_bounded,
};
use crate::support::{json_lines, path_str, write};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// Extra things in a restored tree `got` (under `src`'s absolute path):
/// a file, a directory with files, a symlink to a directory `outside`
/// with a file, a FIFO, and a symlink in place of nothing.
fn litter(got: &Path, outside: &Path) {
    write(&got.join("extra.txt"), b"not in the snapshot");
    write(&got.join("d0/extra/deep/x"), b"x");
    write(&outside.join("keep.txt"), b"outside the target");
    symlink(outside, got.join("d1/link-out")).unwrap();
    symlink("/nonexistent", got.join("dangling")).unwrap();
    nix::unistd::mkfifo(&got.join("d2/fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
}

/// A repository with one backup of `src` (`n` files of `size` bytes,
/// filled from `seed`): the repository, `src`, the snapshot's id and
/// `src`'s manifest then.
fn backed_up(seed: u64, n: u64, size: usize) -> (crate::common::TestRepo, PathBuf, String, Want) {
    let t = cli_repo();
    let src = t.dir.path().join("src");
    fill(&src, seed, n, size);
    let id = backup_ok(&t.repo_path(), &t.cache_path(), &src);
    let want = manifest(&src);
    (t, src, id, want)
}

type Want = std::collections::BTreeMap<String, String>;

fn restore(repo: &Path, cache: &Path, id: &str, target: &Path, args: &[&str]) -> serde_json::Value {
    let o = larder_ok(
        repo,
        cache,
        &[
            &["--json", "restore", id, "--target", path_str(target)],
            args,
        ]
        .concat(),
    );
    json_lines(&o.out).pop().unwrap()
}

#[test]
fn restore_delete_leaves_exactly_the_snapshot() {
    let (t, src, id, want) = backed_up(1, 6, 30 << 10);
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let target = t.dir.path().join("target");
    let got = target.join(src.strip_prefix("/").unwrap());
    let outside = t.dir.path().join("outside");
    restore(&repo, &cache, &id, &target, &[]);
    litter(&got, &outside);
    // A file the snapshot holds, changed in the target.
    write(&got.join("d0/f000.bin"), b"changed");

    // A dry run lists what would go and touches nothing.
    let before = manifest(&got);
    let o = larder_ok(
        &repo,
        &cache,
        &[
            "restore",
            &id,
            "--target",
            path_str(&target),
            "--delete",
            "--dry-run",
        ],
    );
    for p in [
        "/extra.txt",
        "/d0/extra",
        "/d1/link-out",
        "/dangling",
        "/d2/fifo",
    ] {
        assert!(
            o.err
                .contains(&format!("would delete: {}{p}", src.display())),
            "{p}: {}",
            o.all()
        );
    }
    assert_eq!(manifest(&got), before, "the dry run changed the target");

    // Only below an included directory.
    let d0 = format!("{}/d0", src.display());
    let s = restore(&repo, &cache, &id, &target, &["--delete", "--include", &d0]);
    assert_eq!(s["deleted"], 1, "{s}");
    assert!(!got.join("d0/extra").exists());
    assert!(got.join("extra.txt").exists() && got.join("d2/fifo").exists());

    // Everything.
    let s = restore(
        &repo,
        &cache,
        &id,
        &target,
        &["--delete", "--overwrite", "always"],
    );
    assert_eq!(s["deleted"], 4, "{s}");
    assert_same_manifest(&want, &manifest(&got), "after restore --delete");
    assert_eq!(
        fs::read(outside.join("keep.txt")).unwrap(),
        b"outside the target"
    );
    // The directories above the backed-up path (the target's top, the
    // path's parents) are not the snapshot's to clear: a restore into `/`
    // must not delete what is beside the backed-up directory.
    write(&target.join("top.txt"), b"top");
    write(&got.parent().unwrap().join("beside.txt"), b"beside src");
    write(&got.join("in-src.txt"), b"in src");
    let s = restore(&repo, &cache, &id, &target, &["--delete"]);
    assert_eq!(s["deleted"], 1, "{s}");
    assert!(target.join("top.txt").exists());
    assert!(got.parent().unwrap().join("beside.txt").exists());
    assert!(!got.join("in-src.txt").exists());
    // A subtree restored into its own target: cleared from the top.
    let sub_target = t.dir.path().join("sub-target");
    write(&sub_target.join("old.txt"), b"old");
    let sub = format!("{id}:{}/d0", src.display());
    let s = restore(&repo, &cache, &sub, &sub_target, &["--delete"]);
    assert_eq!(s["deleted"], 1, "{s}");
    assert!(!sub_target.join("old.txt").exists());
    let mut want_d0 = manifest(&src.join("d0"));
    let mut got_d0 = manifest(&sub_target);
    // The target directory itself is not d0 (its own times aside).
    want_d0.remove("");
    got_d0.remove("");
    assert_same_manifest(&want_d0, &got_d0, "the subtree with --delete");
}

/// A restore killed with SIGKILL (mid-way when it is still running by
/// the time a few files are in place), with a killed run's temporary file
/// (`.larder-restore-PID-N`) left in the target as well, then run again
/// with `--delete --overwrite if-changed`: the target is exactly the
/// snapshot.
#[test]
fn a_killed_restore_then_restore_delete_is_exact() {
    let (t, src, id, want) = backed_up(2, 60, 200 << 10);
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let target = t.dir.path().join("target");
    let got = target.join(src.strip_prefix("/").unwrap());
    let c = crate::faults::larder_cmd(
        &repo,
        &cache,
        &["restore", &id, "--target", path_str(&target)],
    );
    let mut child = spawn(c);
    let files = || {
        walkdir::WalkDir::new(&target)
            .into_iter()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_file())
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() && files() <= 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the restore wrote nothing"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let _ = child.kill();
    let _ = wait_bounded(child, "the killed restore");
    write(
        &got.join("d1/.larder-restore-99999-7"),
        b"a killed run's temporary",
    );
    write(&got.join("d1/stray"), b"stray");
    let o = larder_run(
        &repo,
        &cache,
        &[
            "--json",
            "restore",
            &id,
            "--target",
            path_str(&target),
            "--delete",
            "--overwrite",
            "if-changed",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.all());
    assert!(
        json_lines(&o.out).pop().unwrap()["deleted"]
            .as_u64()
            .unwrap()
            >= 2,
        "{}",
        o.all()
    );
    assert_same_manifest(
        &want,
        &manifest(&got),
        "after the killed restore and --delete",
    );
}

/// `restore --verify` (restic 0.17): every restored file is read back and
/// counted as verified; the tree is exact. (A file whose bytes differ is
/// refused its name: the unit test of `verify_file`.)
#[test]
fn restore_verify_reads_every_file_back() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    fill(&src, 3, 9, 300 << 10);
    write(&src.join("empty"), b"");
    let id = backup_ok(&repo, &cache, &src);
    let target = t.dir.path().join("target");
    let s = restore(&repo, &cache, &id, &target, &["--verify"]);
    assert_eq!(s["files_restored"], 10, "{s}");
    assert_eq!(s["files_verified"], 10, "{s}");
    let got = target.join(src.strip_prefix("/").unwrap());
    assert_same_manifest(&manifest(&src), &manifest(&got), "restore --verify");
    let plain = restore(&repo, &cache, &id, &t.dir.path().join("t2"), &[]);
    assert_eq!(plain["files_verified"], 0, "{plain}");
}

/// `restore --iinclude/--iexclude` and the `--*-file` forms (restic
/// 0.17): patterns without regard to case, and patterns read from files
/// (comments and blank lines skipped), select what is restored.
#[test]
fn case_blind_and_file_patterns_select_what_is_restored() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    for f in [
        "Photos/a.JPG",
        "Photos/b.jpg",
        "Photos/c.png",
        "Junk/x.jpg",
        "notes.txt",
    ] {
        write(&src.join(f), f.as_bytes());
    }
    let id = backup_ok(&repo, &cache, &src);
    let files_in = |target: &Path| {
        let got = target.join(src.strip_prefix("/").unwrap());
        let mut v: Vec<String> = walkdir::WalkDir::new(&got)
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_file())
            .map(|e| e.path().strip_prefix(&got).unwrap().display().to_string())
            .collect();
        v.sort();
        v
    };
    let t1 = t.dir.path().join("t1");
    restore(
        &repo,
        &cache,
        &id,
        &t1,
        &["--iinclude", "*.jpg", "--iexclude", "junk"],
    );
    assert_eq!(files_in(&t1), ["Photos/a.JPG", "Photos/b.jpg"]);
    let t2 = t.dir.path().join("t2");
    restore(&repo, &cache, &id, &t2, &["--include", "*.jpg"]);
    assert_eq!(
        files_in(&t2),
        ["Junk/x.jpg", "Photos/b.jpg"],
        "--include keeps the case"
    );
    let list = t.dir.path().join("patterns");
    write(&list, b"# what to leave out\n\n*.png\n  notes.txt  \n");
    let t3 = t.dir.path().join("t3");
    restore(
        &repo,
        &cache,
        &id,
        &t3,
        &["--exclude-file", path_str(&list)],
    );
    assert_eq!(
        files_in(&t3),
        ["Junk/x.jpg", "Photos/a.JPG", "Photos/b.jpg"]
    );
    let ilist = t.dir.path().join("ipatterns");
    write(&ilist, b"*.PNG\n");
    let t4 = t.dir.path().join("t4");
    restore(
        &repo,
        &cache,
        &id,
        &t4,
        &["--iinclude-file", path_str(&ilist)],
    );
    assert_eq!(files_in(&t4), ["Photos/c.png"]);
    let o = larder_run(
        &repo,
        &cache,
        &[
            "restore",
            &id,
            "--target",
            path_str(&t4),
            "--include-file",
            "/nonexistent/list",
        ],
    );
    assert!(
        o.code == 1 && o.err.contains("/nonexistent/list"),
        "{}",
        o.all()
    );
}
