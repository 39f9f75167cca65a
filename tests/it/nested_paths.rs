//! Backup paths inside other backup paths (`backup a a/x`), as restic
//! takes them: a path the walk of the outer one would not reach (the way
//! down excluded by a marker file, a symbolic link, another file system
//! under `-x`) is still backed up, at its place; one the outer walk covers
//! changes nothing.

use crate::common::TestRepo;
use crate::faults::{Out, cli_repo, larder_ok, larder_run, snapshot_id_of};
use crate::support::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `larder ARGS` (a backup, which must leave no named path out), then a
/// restore of its snapshot into `NAME` beside the repository; returns the
/// backup's output and the target.
fn backup_then_restore(t: &TestRepo, args: &[&str], name: &str) -> (Out, PathBuf) {
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let o = larder_ok(&repo, &cache, args);
    assert!(!o.err.contains("never came to it"), "{}", o.all());
    let id = snapshot_id_of(&o);
    let target = t.dir.path().join(name);
    larder_ok(
        &repo,
        &cache,
        &["restore", "-q", &id, "--target", path_str(&target)],
    );
    (o, target)
}

/// The root tree of snapshot `id`, from `snapshots --json`.
fn tree_of(repo: &Path, cache: &Path, id: &str) -> String {
    let o = larder_ok(repo, cache, &["snapshots", "--json", id]);
    let v: serde_json::Value = serde_json::from_str(&o.out).unwrap();
    v[0]["tree"].as_str().unwrap().to_string()
}

/// Named paths below a directory excluded by its marker file and below a
/// symbolic link are each backed up and restored at their place; what the
/// marker leaves out stays out. The directory
/// made for the link has the linked directory's mode, not the link's
/// `rwxrwxrwx`.
#[test]
fn paths_the_outer_walk_would_not_reach_are_kept() {
    let t = cli_repo();
    let base = t.dir.path().join("src");
    let a = base.join("a");
    write(&a.join("file1"), b"one");
    write(&a.join("tagged/.nobackup"), b"");
    write(&a.join("tagged/t"), b"excluded by the marker");
    write(&a.join("tagged/inner/i"), b"named below a marked directory");
    write(&base.join("elsewhere/sub/f"), b"named through a link");
    fs::set_permissions(base.join("elsewhere"), fs::Permissions::from_mode(0o750)).unwrap();
    std::os::unix::fs::symlink("../elsewhere", a.join("link")).unwrap();

    let named = [a.clone(), a.join("link/sub"), a.join("tagged/inner")];
    let mut args = vec!["backup", "--json", "--exclude-if-present", ".nobackup"];
    args.extend(named.iter().map(|p| path_str(p)));
    let (_, target) = backup_then_restore(&t, &args, "restored");
    let got = target.join(a.strip_prefix("/").unwrap());
    assert_eq!(fs::read(got.join("file1")).unwrap(), b"one");
    assert_eq!(
        fs::read(got.join("tagged/inner/i")).unwrap(),
        b"named below a marked directory"
    );
    assert!(!got.join("tagged/t").exists());
    let link = fs::symlink_metadata(got.join("link")).unwrap();
    assert!(link.is_dir(), "the link's place holds the named path");
    assert_eq!(link.permissions().mode() & 0o7777, 0o750);
    assert_eq!(
        fs::read(got.join("link/sub/f")).unwrap(),
        b"named through a link"
    );
}

/// A symbolic link named beside a path through it (`w w/link w/link/sub`,
/// or the link alone with the path through it): the link's place becomes
/// a directory holding the named path, as restic unrolls it; nothing
/// named is lost and no warning is given.
#[test]
fn a_named_link_with_a_named_path_through_it_keeps_both() {
    let t = cli_repo();
    let w = t.dir.path().join("w");
    write(&w.join("file1"), b"one");
    write(&t.dir.path().join("out/sub/a"), b"through the link");
    std::os::unix::fs::symlink("../out", w.join("link")).unwrap();
    for (n, named) in [
        vec![w.clone(), w.join("link"), w.join("link/sub")],
        vec![w.join("link"), w.join("link/sub")],
    ]
    .into_iter()
    .enumerate()
    {
        let mut args = vec!["backup", "--json"];
        args.extend(named.iter().map(|p| path_str(p)));
        let (_, target) = backup_then_restore(&t, &args, &format!("restored-{n}"));
        let got = target.join(w.strip_prefix("/").unwrap());
        assert!(fs::symlink_metadata(got.join("link")).unwrap().is_dir());
        assert_eq!(
            fs::read(got.join("link/sub/a")).unwrap(),
            b"through the link",
            "case {n}"
        );
        assert_eq!(got.join("file1").exists(), n == 0);
    }
}

/// Every path of a tree named at once, as `find TREE > list; backup
/// --files-from list` names them (a few thousand nested paths): the
/// snapshot restores the tree exactly, each file read once.
#[test]
fn every_path_of_a_tree_named_at_once_restores_it() {
    let t = cli_repo();
    let src = t.dir.path().join("src");
    for d in 0..40 {
        for f in 0..50 {
            write(
                &src.join(format!("d{d:02}/s{}/f{f:02}", f % 3)),
                format!("{d}/{f}").as_bytes(),
            );
        }
    }
    let mut all: Vec<String> = vec![path_str(&src).to_string()];
    all.extend(
        list_rel(&src)
            .iter()
            .map(|r| src.join(r).display().to_string()),
    );
    let list = t.dir.path().join("list");
    fs::write(&list, all.join("\n")).unwrap();
    let args = ["backup", "--json", "--files-from-verbatim", path_str(&list)];
    let (o, target) = backup_then_restore(&t, &args, "restored");
    let summary = json_lines(&o.out).pop().unwrap();
    assert_eq!(summary["total_files_processed"], 2000, "{summary}");
    assert_same_tree(&src, &target.join(src.strip_prefix("/").unwrap()));
}

/// A named path the outer walk covers anyway (`a` and `a/d`) gives the
/// very tree of `a` that `a` alone gives, and each file is processed once.
#[test]
fn a_path_the_outer_walk_covers_changes_nothing() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let a = t.dir.path().join("a");
    crate::faults::fill(&a, 7, 9, 20 << 10);
    let alone = snapshot_id_of(&larder_ok(
        &repo,
        &cache,
        &["backup", "--json", path_str(&a)],
    ));
    let sub = a.join("d1");
    let o = larder_ok(
        &repo,
        &cache,
        &["backup", "--json", path_str(&a), path_str(&sub)],
    );
    let both = snapshot_id_of(&o);
    // The trees of `a` (the ancestors' own times, `/tmp`'s among them,
    // move while other tests run).
    let lib = crate::common::lib_open(&repo, &t.dir.path().join("lib-cache"));
    let of_a = |id: &str| {
        let root = larder::Id::from_hex(&tree_of(&repo, &cache, id)).unwrap();
        crate::incremental::subtree_of(&lib, root, &a)
    };
    assert_eq!(of_a(&alone), of_a(&both));
    let summary = json_lines(&o.out).pop().unwrap();
    assert_eq!(summary["total_files_processed"], 9, "{summary}");
}

/// `-x` leaves out another file system below a path, keeping its mount
/// point as an empty directory, but not one named itself (`backup -x a
/// a/mnt`): it is backed up at its place. The other
/// file system is a tmpfs mounted in a mount namespace of the test's own
/// (`unshare -m`, as root); where that cannot be made the test says so
/// and checks nothing.
#[test]
fn a_named_path_on_another_file_system_is_kept_under_one_file_system() {
    let ok = Command::new("unshare")
        .args(["-m", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipping: `unshare -m` is not allowed here (needs root)");
        return;
    }
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let a = t.dir.path().join("a");
    write(&a.join("file1"), b"one");
    fs::create_dir_all(a.join("mnt")).unwrap();
    let script = "mount -t tmpfs larder-test \"$1/mnt\" && echo on-tmpfs > \"$1/mnt/m\" && \
                  shift && exec \"$@\"";
    let backup = |paths: &[&Path]| {
        let mut inner = crate::faults::larder_cmd(&repo, &cache, &["backup", "--json", "-x"]);
        inner.args(paths.iter().map(|p| path_str(p)));
        let mut c = Command::new("unshare");
        c.args(["-m", "sh", "-c", script, "sh", path_str(&a)])
            .arg(inner.get_program())
            .args(inner.get_args());
        for (k, v) in inner.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        let o = crate::faults::wait_bounded(crate::faults::spawn(c), "backup -x");
        assert_eq!(o.code, 0, "{}", o.all());
        snapshot_id_of(&o)
    };
    let only_a = backup(&[&a]);
    let with_mnt = backup(&[&a, &a.join("mnt")]);
    for (id, want) in [(only_a, false), (with_mnt, true)] {
        let target = t.dir.path().join(format!("r-{id}"));
        let o = larder_run(
            &repo,
            &cache,
            &["restore", "-q", &id, "--target", path_str(&target)],
        );
        assert_eq!(o.code, 0, "{}", o.all());
        let got = target.join(a.strip_prefix("/").unwrap());
        assert_eq!(fs::read(got.join("file1")).unwrap(), b"one");
        assert_eq!(got.join("mnt/m").exists(), want, "snapshot {id}");
        if want {
            assert_eq!(fs::read(got.join("mnt/m")).unwrap(), b"on-tmpfs\n");
        } else {
            // The mount point itself is kept, empty, as restic keeps it.
            assert!(got.join("mnt").is_dir(), "snapshot {id}");
            assert_eq!(fs::read_dir(got.join("mnt")).unwrap().count(), 0);
        }
    }
}
