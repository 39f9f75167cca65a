//! Incremental backups read new and changed files on worker threads while
//! the walk goes on: the snapshot they make must be the one a walk that
//! reads every file itself, in order, makes. Shown on a tree where many
//! files changed, were added and deleted across many directories: the
//! incremental run's tree ID equals that of a `--force` run with one
//! reading thread (which re-reads every file), and it restores byte for
//! byte.

use crate::common::{self, TestRepo};
use crate::support::*;
use larder::Id;
use std::fs;
use std::path::Path;

/// A tree of `dirs` directories (two levels, files before and after the
/// subdirectories in name order) with files of many sizes: empty, small,
/// several chunks, all zeros.
fn make_tree(root: &Path, dirs: usize) {
    for d in 0..dirs {
        let dir = root
            .join(format!("d{:02}", d % 10))
            .join(format!("e{d:03}"));
        for f in 0..20u64 {
            let seed = (d as u64) * 100 + f;
            let size = match f % 5 {
                0 => 0,
                1 => 100 + f as usize,
                2 => 20_000,
                3 => 150_000 + d * 7,
                _ => 5_000,
            };
            let data = if f == 7 {
                vec![0u8; 70_000]
            } else {
                rand_bytes(seed, size)
            };
            write(&dir.join(format!("f{f:02}")), &data);
        }
        write(&dir.join("sub/inner"), &rand_bytes(d as u64 + 9_000, 3_000));
        write(&dir.join("zz_after_sub"), b"after");
        std::os::unix::fs::symlink("f01", dir.join("link")).unwrap();
    }
}

/// Appends to, adds and deletes many files below `root`.
fn change_tree(root: &Path, dirs: usize) -> usize {
    let mut changed = 0;
    for d in 0..dirs {
        let dir = root
            .join(format!("d{:02}", d % 10))
            .join(format!("e{d:03}"));
        if d.is_multiple_of(2) {
            fs::remove_file(dir.join("f04")).unwrap();
        }
        for f in (d % 3..20).step_by(3) {
            let p = dir.join(format!("f{f:02}"));
            let Ok(mut data) = fs::read(&p) else {
                continue;
            };
            data.extend_from_slice(format!("appended line {d} {f}\n").as_bytes());
            fs::write(&p, &data).unwrap();
            changed += 1;
        }
        write(
            &dir.join(format!("new{d}")),
            &rand_bytes(d as u64 + 50_000, 40_000),
        );
    }
    changed
}

/// `larder --json backup ARGS DIR` with `LARDER_READ_THREADS=threads`
/// (unset when 0); returns the snapshot's ID and the summary.
fn backup(t: &TestRepo, dir: &Path, args: &[&str], threads: usize) -> (Id, serde_json::Value) {
    let threads = threads.to_string();
    let env: &[(&str, &str)] = if threads == "0" {
        &[]
    } else {
        &[("LARDER_READ_THREADS", &threads)]
    };
    backup_env(t, dir, args, env)
}

/// `larder --json backup ARGS DIR` with the variables `env` set; returns
/// the snapshot's ID and the summary.
fn backup_env(
    t: &TestRepo,
    dir: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Id, serde_json::Value) {
    let mut c = common::larder(&t.repo_path(), &t.cache_path());
    c.args(["--json", "backup"]).args(args).arg(dir);
    c.envs(env.iter().copied());
    let (code, out, err) = run(c);
    assert_eq!(code, 0, "backup {args:?}: {err}");
    let s = json_lines(&out).pop().unwrap();
    let id = Id::from_hex(s["snapshot_id"].as_str().unwrap()).unwrap();
    (id, s)
}

/// The tree of directory `path` (absolute) in the snapshot whose root tree
/// is `root`: what two backups of `path` are compared on (the ancestors'
/// own metadata, `/tmp` among them, changes while other tests run).
pub(crate) fn subtree_of(repo: &larder::repository::Repository, root: Id, path: &Path) -> Id {
    use std::os::unix::ffi::OsStrExt;
    let mut id = root;
    for c in path.components().skip(1) {
        let tree = repo.load_tree(&id).unwrap();
        let node = tree
            .nodes
            .iter()
            .find(|n| n.name == c.as_os_str().as_bytes())
            .unwrap_or_else(|| panic!("{} not in tree {id}", path.display()));
        id = node.subtree.unwrap();
    }
    id
}

#[test]
fn incremental_with_many_changes_equals_a_serial_full_read() {
    let t = TestRepo::new();
    drop(t.init());
    let src = t.dir.path().join("src");
    let dirs = 40;
    make_tree(&src, dirs);
    let (first, _) = backup(&t, &src, &[], 0);
    let changed = change_tree(&src, dirs);
    let (incr, s) = backup(&t, &src, &[], 4);
    assert_eq!(s["files_changed"].as_u64().unwrap(), changed as u64, "{s}");
    assert_eq!(s["files_new"].as_u64().unwrap(), dirs as u64, "{s}");
    let (full, s2) = backup(&t, &src, &["--force"], 1);
    assert_eq!(s2["bytes_read"], s2["total_bytes_processed"], "{s2}");
    let repo = t.open().unwrap();
    let tree_of = |snap: &Id| subtree_of(&repo, load_snap(&repo, snap).tree, &src);
    let (a, b) = (tree_of(&incr), tree_of(&full));
    assert_ne!(tree_of(&first), a);
    if a != b {
        let (out, _) = cli(
            &t.repo_path(),
            &t.cache_path(),
            &["diff", "--metadata", &incr.to_hex(), &full.to_hex()],
            0,
        );
        panic!("the parallel incremental backup and a serial full read differ:\n{out}");
    }
    let target = t.dir.path().join("restored");
    let rep = lib_restore(&repo, &incr, &src, &target);
    assert!(rep.errors.is_empty(), "{:?}", rep.errors);
    assert_eq!(assert_same_tree(&src, &target), list_rel(&src).len());
}

#[test]
fn a_cold_backup_with_many_readers_equals_one_with_one() {
    let t = TestRepo::new();
    drop(t.init());
    let src = t.dir.path().join("src");
    make_tree(&src, 12);
    let (one, _) = backup(&t, &src, &["--force"], 1);
    let (many, s) = backup(&t, &src, &["--force"], 8);
    assert_eq!(s["bytes_read"], s["total_bytes_processed"], "{s}");
    let repo = t.open().unwrap();
    let tree_of = |snap: &Id| subtree_of(&repo, load_snap(&repo, snap).tree, &src);
    assert_eq!(tree_of(&one), tree_of(&many));
}

/// Every tree of snapshot tree `root`, depth first.
fn all_trees(repo: &larder::repository::Repository, root: Id) -> Vec<Id> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let tree = repo.load_tree(&out[i]).unwrap();
        out.extend(tree.nodes.iter().filter_map(|n| n.subtree));
        i += 1;
    }
    out
}

/// A saved snapshot's trees are all recorded in the cache as checked (the
/// next backup takes their unchanged files over with one query per
/// directory); a prune that deletes a pack ends every record, and the
/// backup after it, which asks for each chunk again, still takes the
/// unchanged files over and records its own trees.
#[test]
fn a_snapshots_trees_stay_checked_until_a_pack_is_deleted() {
    let t = TestRepo::new();
    drop(t.init());
    let src = t.dir.path().join("src");
    make_tree(&src, 6);
    // Two whole packs' worth that only the first snapshot will hold.
    write(&src.join("gone.bin"), &rand_bytes(77, 2 << 20));
    let (first, _) = backup(&t, &src, &[], 0);
    let checked = |snap: &Id| -> Vec<bool> {
        let repo = t.open().unwrap();
        let trees = all_trees(&repo, load_snap(&repo, snap).tree);
        assert!(trees.len() > 12, "{} trees", trees.len());
        let index = repo.index().unwrap();
        trees
            .iter()
            .map(|id| index.tree_checked(id).unwrap())
            .collect()
    };
    assert!(checked(&first).iter().all(|&c| c), "after the first backup");

    fs::remove_file(src.join("gone.bin")).unwrap();
    let (second, s) = backup(&t, &src, &[], 0);
    assert_eq!(s["files_changed"], 0, "{s}");
    assert_eq!(s["bytes_read"], 0, "{s}");
    assert!(
        checked(&second).iter().all(|&c| c),
        "after the second backup"
    );

    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["forget", &first.to_hex()],
        0,
    );
    let (out, err) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["prune", "--keep-delete", "0s", "--max-unused", "0%"],
        0,
    );
    assert!(
        checked(&second).iter().all(|&c| !c),
        "a pack was deleted, yet a record held:\n{out}{err}"
    );

    let (third, s) = backup(&t, &src, &[], 0);
    assert_eq!(s["files_changed"], 0, "{s}");
    assert_eq!(s["files_new"], 0, "{s}");
    assert_eq!(s["bytes_read"], 0, "{s}");
    assert!(checked(&third).iter().all(|&c| c), "after the third backup");
    let repo = t.open().unwrap();
    let target = t.dir.path().join("restored");
    let rep = lib_restore(&repo, &third, &src, &target);
    assert!(rep.errors.is_empty(), "{:?}", rep.errors);
    assert_eq!(assert_same_tree(&src, &target), list_rel(&src).len());
}

/// `larder --json backup ARGS DIR` with large files read by two workers
/// (`split`: files of 1 MiB and more) or by one, two reading threads
/// either way; returns the snapshot's ID and the summary.
fn backup_split(t: &TestRepo, dir: &Path, args: &[&str], split: bool) -> (Id, serde_json::Value) {
    let min = if split { "1048576" } else { "1000000000000" };
    let env = [("LARDER_READ_THREADS", "2"), ("LARDER_SPLIT_MIN", min)];
    backup_env(t, dir, args, &env)
}

/// The data blobs in the repository's packs.
fn data_blobs(repo: &larder::repository::Repository) -> std::collections::BTreeSet<Id> {
    let mut out = std::collections::BTreeSet::new();
    for e in repo.backend().list(larder::backend::Kind::Pack).unwrap() {
        let pack = Id::from_hex(&e.name).unwrap();
        for b in repo.read_pack_header(&pack, e.size).unwrap() {
            if b.ty == larder::pack::BlobType::Data {
                out.insert(b.id);
            }
        }
    }
    out
}

/// Large files read by two workers (each from its own half, see
/// `archiver::split`) get the chunk lists one worker makes: random data,
/// zeros of a length off the zero chunk's grid (where the two halves'
/// cuts never meet) and data that repeats; also after edits in each
/// half. The snapshots' trees equal those of backups that read each file
/// whole on one worker, which store nothing new, and they restore byte
/// for byte.
#[test]
fn large_files_read_by_two_workers_equal_ones_read_by_one() {
    let t = TestRepo::new();
    drop(t.init());
    let src = t.dir.path().join("src");
    write(&src.join("big"), &rand_bytes(77, 9 << 20));
    write(&src.join("zeros"), &vec![0u8; (3 << 20) + 12_345]);
    let unit = rand_bytes(78, 333_331);
    write(&src.join("periodic"), &unit.repeat(9));
    write(&src.join("small"), b"one worker");
    let repo = t.open().unwrap();
    let tree_of = |snap: &Id| subtree_of(&repo, load_snap(&repo, snap).tree, &src);
    let (split, _) = backup_split(&t, &src, &[], true);
    let stored = data_blobs(&repo);
    let (one, _) = backup_split(&t, &src, &["--force"], false);
    assert_eq!(tree_of(&split), tree_of(&one));
    // The one-worker chunks were all stored already.
    assert_eq!(data_blobs(&repo), stored);
    // Edits near the start, just past halfway and at the end of the big
    // file: new chunks in both halves.
    let p = src.join("big");
    let mut data = fs::read(&p).unwrap();
    let mid = data.len() / 2 + 70_000;
    data[1000..1100].fill(1);
    data[mid..mid + 100].fill(2);
    data.extend_from_slice(b"appended");
    fs::write(&p, &data).unwrap();
    let (incr, s) = backup_split(&t, &src, &[], true);
    assert_eq!(s["files_changed"], 1, "{s}");
    let stored = data_blobs(&repo);
    let (full, _) = backup_split(&t, &src, &["--force"], false);
    assert_eq!(data_blobs(&repo), stored);
    assert_ne!(tree_of(&split), tree_of(&incr));
    assert_eq!(tree_of(&incr), tree_of(&full));
    let target = t.dir.path().join("restored");
    let rep = lib_restore(&repo, &incr, &src, &target);
    assert!(rep.errors.is_empty(), "{:?}", rep.errors);
    assert_eq!(assert_same_tree(&src, &target), list_rel(&src).len());
}

/// An edit of a file's bytes, and its name.
type Edit<'a> = (&'a str, &'a dyn Fn(&mut Vec<u8>));

/// A changed large file is cut where its parent's chunks say, wherever
/// their bytes are still there (`archiver::guide`): edited in place,
/// with bytes inserted and removed, grown and cut short, read by one
/// worker or by two. Each snapshot's tree equals that of a backup that
/// reads the file without the parent (`--force`, one worker), which then
/// stores nothing new, and it restores byte for byte. Two such backups
/// at once leave a repository that `check` passes.
#[test]
fn a_changed_large_file_is_cut_as_without_its_parent() {
    let t = TestRepo::new();
    drop(t.init());
    let src = t.dir.path().join("src");
    let p = src.join("image");
    let old = rand_bytes(91, 12 << 20);
    write(&p, &old);
    let repo = t.open().unwrap();
    let tree_of = |snap: &Id| subtree_of(&repo, load_snap(&repo, snap).tree, &src);
    let (base, _) = backup_split(&t, &src, &[], false);
    let base_hex = base.to_hex();
    let mib = 1 << 20;
    let in_place = |d: &mut Vec<u8>| {
        for (i, at) in [100_000, 5 * mib, 9 * mib + 7].into_iter().enumerate() {
            d[at..at + 4096].copy_from_slice(&rand_bytes(200 + i as u64, 4096));
        }
    };
    let shifted = |d: &mut Vec<u8>| {
        d.splice(2 * mib..2 * mib, rand_bytes(210, 3000));
        d.drain(8 * mib..8 * mib + 5000);
    };
    let grown = |d: &mut Vec<u8>| d.extend_from_slice(&rand_bytes(220, 300_000));
    let shortened = |d: &mut Vec<u8>| d.truncate(7 * mib + 12_345);
    let edits: [Edit<'_>; 4] = [
        ("in place", &in_place),
        ("shifted", &shifted),
        ("grown", &grown),
        ("shortened", &shortened),
    ];
    for (i, (what, edit)) in edits.into_iter().enumerate() {
        let mut data = old.clone();
        edit(&mut data);
        fs::write(&p, &data).unwrap();
        let split = i % 2 == 1;
        let (guided, s) = backup_split(&t, &src, &["--parent", &base_hex], split);
        assert_eq!(s["files_changed"], 1, "{what}: {s}");
        // Most of the file was found where the parent had it, in both
        // halves of a split file.
        let by_guide = s["bytes_guided"].as_u64().unwrap();
        let kept = data.len().min(old.len()) as u64;
        assert!(by_guide >= kept * 3 / 4 && by_guide <= kept, "{what}: {s}");
        let stored = data_blobs(&repo);
        let (plain, s) = backup_split(&t, &src, &["--force"], false);
        assert_eq!(s["bytes_guided"], 0, "{what}: --force: {s}");
        assert_eq!(tree_of(&guided), tree_of(&plain), "{what}");
        assert_eq!(data_blobs(&repo), stored, "{what}: nothing new");
        let target = t.dir.path().join(format!("restored-{i}"));
        let rep = lib_restore(&repo, &guided, &src, &target);
        assert!(rep.errors.is_empty(), "{what}: {:?}", rep.errors);
        assert_eq!(assert_same_tree(&src, &target), list_rel(&src).len());
    }

    // Two guided backups of a newly edited file at once.
    let mut data = old.clone();
    in_place(&mut data);
    shifted(&mut data);
    fs::write(&p, &data).unwrap();
    let args = ["--parent", base_hex.as_str()];
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| backup_split(&t, &src, &args, true));
        let b = s.spawn(|| backup_split(&t, &src, &args, false));
        (a.join().unwrap(), b.join().unwrap())
    });
    for (_, s) in [&a, &b] {
        assert!(s["bytes_guided"].as_u64().unwrap() > (8 << 20), "{s}");
    }
    let (a, b) = (a.0, b.0);
    assert_eq!(tree_of(&a), tree_of(&b));
    let (out, err) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["check", "--read-data"],
        0,
    );
    assert!(out.contains("no errors were found"), "{out}{err}");
    let (plain, _) = backup_split(&t, &src, &["--force"], false);
    assert_eq!(tree_of(&a), tree_of(&plain));
}

/// `backup --skip-if-unchanged` (restic 0.17): with nothing changed since
/// the parent, no snapshot is saved (exit 0, `skipped` and the parent in
/// the JSON summary); a changed file saves one, and so does a first
/// backup of other paths (no parent). Two at once on an unchanged tree
/// both skip; two at once after a change both save, each restorable.
#[test]
fn skip_if_unchanged_saves_no_snapshot_when_nothing_changed() {
    let t = crate::faults::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    crate::faults::fill(&src, 1, 5, 30 << 10);
    let run = |args: &[&str]| {
        let o = crate::faults::larder_ok(
            &repo,
            &cache,
            &[&["backup", "--json", "--skip-if-unchanged"], args].concat(),
        );
        json_lines(&o.out).pop().unwrap()
    };
    let count = || fs::read_dir(repo.join("snapshots")).unwrap().count();
    let first = run(&[path_str(&src)]);
    assert_eq!(first["skipped"], false, "{first}");
    let first_id = first["snapshot_id"].as_str().unwrap().to_string();
    let again = run(&[path_str(&src)]);
    assert_eq!(again["skipped"], true, "{again}");
    assert!(again["snapshot_id"].is_null(), "{again}");
    assert_eq!(again["parent"], first_id.as_str());
    assert_eq!(count(), 1);
    let o = crate::faults::larder_ok(
        &repo,
        &cache,
        &["backup", "--skip-if-unchanged", path_str(&src)],
    );
    assert!(
        o.out.contains("no snapshot saved (--skip-if-unchanged)"),
        "{}",
        o.all()
    );

    // Other paths: no parent, so a snapshot.
    let sub = src.join("d0");
    assert_eq!(run(&[path_str(&sub)])["skipped"], false);
    assert_eq!(count(), 2);
    // Without the flag an unchanged tree still makes a snapshot.
    let ancestors = crate::remote::ancestor_times(&src);
    let o = crate::faults::larder_ok(&repo, &cache, &["backup", "--json", path_str(&src)]);
    assert_eq!(json_lines(&o.out).pop().unwrap()["skipped"], false);
    assert_eq!(count(), 3);

    // Two at once, unchanged: neither saves; unless an ancestor's metadata
    // moved since the parent (`/tmp`'s, which other tests touch): a
    // snapshot records its ancestors, so one may then save, with nothing
    // of the tree itself new or changed.
    let spawn2 = || {
        let mk = || {
            let mut c = common::larder(&repo, &cache);
            c.args(["backup", "--json", "--skip-if-unchanged", path_str(&src)]);
            crate::faults::spawn(c)
        };
        let (a, b) = (mk(), mk());
        [a, b].map(|c| crate::faults::wait_bounded(c, "a backup beside another"))
    };
    let mut unchanged_saved = 0;
    for o in spawn2() {
        assert_eq!(o.code, 0, "{}", o.all());
        let s = json_lines(&o.out).pop().unwrap();
        if s["skipped"] == false {
            let moved = crate::remote::ancestor_times(&src) != ancestors;
            assert!(moved, "saved with no ancestor moved: {}", o.all());
            for k in ["files_new", "files_changed", "dirs_new", "dirs_changed"] {
                assert_eq!(s[k], 0, "{k}: {}", o.all());
            }
            unchanged_saved += 1;
        } else {
            assert_eq!(s["skipped"], true, "{}", o.all());
        }
    }
    assert_eq!(count(), 3 + unchanged_saved);
    // Changed: each saves, and restores the changed tree; unless one ended
    // before the other chose its parent, which then is that new snapshot,
    // unchanged, so the other skips (a loaded machine does that).
    write(&src.join("d1/new.txt"), b"a change");
    let want = crate::faults::manifest(&src);
    let outs = spawn2();
    let summaries: Vec<serde_json::Value> = outs
        .iter()
        .map(|o| {
            assert_eq!(o.code, 0, "{}", o.all());
            json_lines(&o.out).pop().unwrap()
        })
        .collect();
    let saved: Vec<&serde_json::Value> =
        summaries.iter().filter(|s| s["skipped"] == false).collect();
    assert!(!saved.is_empty(), "{summaries:?}");
    for s in summaries.iter().filter(|s| s["skipped"] == true) {
        assert_eq!(s["parent"], saved[0]["snapshot_id"], "{summaries:?}");
    }
    for s in &saved {
        let back = t
            .dir
            .path()
            .join(format!("back-{}", &s["snapshot_id"].as_str().unwrap()[..8]));
        let got = crate::faults::restore_cli(
            &repo,
            &cache,
            s["snapshot_id"].as_str().unwrap(),
            &src,
            &back,
        );
        crate::faults::assert_same_manifest(
            &want,
            &crate::faults::manifest(&got),
            "after the change",
        );
    }
    assert_eq!(count(), 3 + unchanged_saved + saved.len());
    crate::faults::check_passes(&repo, &cache, true, "after skip-if-unchanged runs");
}

/// `--ignore-inode` and `--ignore-ctime` (restic's flags): files copied
/// over themselves (new inodes and ctimes, same size, mtime and bytes,
/// as a FUSE remount shows them) are read again by a plain backup and
/// taken over unread with `--ignore-inode`; files whose mode changed
/// (ctime alone) likewise with `--ignore-ctime`. Every snapshot restores
/// the tree exactly.
#[test]
fn ignore_inode_and_ctime_take_such_files_as_unchanged() {
    let t = crate::faults::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    crate::faults::fill(&src, 7, 6, 40 << 10);
    let total: u64 = 6 * (40 << 10);
    let run = |args: &[&str]| {
        let o = crate::faults::larder_ok(
            &repo,
            &cache,
            &[&["backup", "--json"], args, &[path_str(&src)]].concat(),
        );
        json_lines(&o.out).pop().unwrap()
    };
    run(&[]);
    let files: Vec<_> = walkdir::WalkDir::new(&src)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    let recopy = || {
        for f in &files {
            let tmp = f.with_extension("tmp");
            let st = std::process::Command::new("cp")
                .arg("-p")
                .arg(f)
                .arg(&tmp)
                .status()
                .unwrap();
            assert!(st.success());
            fs::rename(&tmp, f).unwrap();
        }
    };
    let restores = |s: &serde_json::Value, what: &str| {
        let id = s["snapshot_id"].as_str().unwrap();
        let back = t.dir.path().join(format!("back-{}", &id[..8]));
        let got = crate::faults::restore_cli(&repo, &cache, id, &src, &back);
        crate::faults::assert_same_manifest(
            &crate::faults::manifest(&src),
            &crate::faults::manifest(&got),
            what,
        );
    };
    recopy();
    let plain = run(&[]);
    assert_eq!(
        plain["bytes_read"], total,
        "a plain backup reads them: {plain}"
    );
    restores(&plain, "plain after the copies");
    recopy();
    let ignoring = run(&["--ignore-inode"]);
    assert_eq!(ignoring["bytes_read"], 0, "{ignoring}");
    assert_eq!(ignoring["files_unmodified"], 6, "{ignoring}");
    restores(&ignoring, "--ignore-inode");

    // A mode change moves the ctime alone.
    for f in &files {
        fs::set_permissions(f, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    }
    let ctime = run(&["--ignore-ctime"]);
    assert_eq!(ctime["bytes_read"], 0, "{ctime}");
    restores(&ctime, "--ignore-ctime");
    for f in &files {
        fs::set_permissions(f, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    }
    let plain = run(&[]);
    assert_eq!(plain["bytes_read"], total, "{plain}");
    crate::faults::check_passes(&repo, &cache, true, "after the ignore runs");
}

/// `--pack-size MiB` (restic's flag, and `LARDER_PACK_SIZE`): the packs a
/// run writes close at that size instead of the repository's (1 MiB in
/// these tests); every pack still reads back (`check --read-data`) and the
/// snapshots restore exactly; a size outside 4..=128 MiB is refused.
#[test]
fn pack_size_sets_the_size_of_the_packs_a_run_writes() {
    let t = crate::faults::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let sizes = || -> std::collections::BTreeMap<String, u64> {
        walkdir::WalkDir::new(repo.join("packs"))
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().unwrap().len(),
                )
            })
            .collect()
    };
    let src = t.dir.path().join("src");
    crate::faults::fill(&src.join("a"), 5, 6, 2 << 20);
    crate::faults::larder_ok(&repo, &cache, &["backup", "-q", path_str(&src)]);
    let before = sizes();
    assert!(
        before.values().all(|&s| s < 3 << 20),
        "default packs: {before:?}"
    );
    crate::faults::fill(&src.join("b"), 6, 6, 2 << 20);
    crate::faults::larder_ok(
        &repo,
        &cache,
        &["--pack-size", "4", "backup", "-q", path_str(&src)],
    );
    let after = sizes();
    let new: Vec<u64> = after
        .iter()
        .filter(|(n, _)| !before.contains_key(*n))
        .map(|(_, s)| *s)
        .collect();
    assert!(
        new.iter().any(|&s| s >= 4 << 20),
        "no pack of 4 MiB: {new:?}"
    );
    assert!(
        new.iter().filter(|&&s| s >= 1 << 20).count() <= 3,
        "{new:?}"
    );
    // The environment variable, as restic's RESTIC_PACK_SIZE.
    crate::faults::fill(&src.join("c"), 7, 6, 2 << 20);
    let mut c = common::larder(&repo, &cache);
    c.env("LARDER_PACK_SIZE", "8")
        .args(["backup", "-q", path_str(&src)]);
    let o = crate::faults::wait_bounded(crate::faults::spawn(c), "LARDER_PACK_SIZE");
    assert_eq!(o.code, 0, "{}", o.all());
    let last = sizes();
    assert!(
        last.iter()
            .any(|(n, &s)| !after.contains_key(n) && s >= 8 << 20),
        "{last:?}"
    );
    let o = crate::faults::larder_run(
        &repo,
        &cache,
        &["--pack-size", "2", "backup", path_str(&src)],
    );
    assert!(
        o.code == 1 && o.err.contains("--pack-size 2"),
        "{}",
        o.all()
    );
    let id = crate::faults::larder_ok(&repo, &cache, &["backup", "--json", path_str(&src)]);
    let id = crate::faults::snapshot_id_of(&id);
    let back = t.dir.path().join("back");
    let got = crate::faults::restore_cli(&repo, &cache, &id, &src, &back);
    crate::faults::assert_same_manifest(
        &crate::faults::manifest(&src),
        &crate::faults::manifest(&got),
        "--pack-size",
    );
    crate::faults::check_passes(&repo, &cache, true, "after runs with other pack sizes");
}

/// `backup --group-by` (restic's flag) picks the parent as restic does:
/// the latest snapshot of this host (with `host`) that holds every path of
/// this backup (with `paths`) and every tag given (with `tags`), each
/// maybe among more; `''` takes the latest of all. The files of a parent
/// count as unmodified. `--tag a,b` gives two tags, as restic. A bad value
/// is refused by name.
#[test]
fn group_by_picks_the_parent_from_the_snapshots_group() {
    let t = crate::faults::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let (a, b) = (t.dir.path().join("a"), t.dir.path().join("b"));
    crate::faults::fill(&a, 1, 3, 10 << 10);
    crate::faults::fill(&b, 2, 2, 10 << 10);
    let run = |args: &[&str]| {
        let o = crate::faults::larder_ok(&repo, &cache, &[&["backup", "--json"], args].concat());
        json_lines(&o.out).pop().unwrap()
    };
    let id = |s: &serde_json::Value| s["snapshot_id"].as_str().unwrap().to_string();
    let (pa, pb) = (path_str(&a), path_str(&b));
    let only_a = run(&["--host", "h", "--tag", "x", pa]);
    // No snapshot holds both paths yet: no parent by default.
    let both = run(&["--host", "h", pa, pb]);
    assert!(both["parent"].is_null(), "{both}");
    assert_eq!(both["files_new"], 5);

    // By host alone: the host's latest, whatever its paths (b's files
    // then count as unmodified).
    let b_by_host = run(&["--host", "h", "-g", "host", pb]);
    assert_eq!(b_by_host["parent"], id(&both).as_str(), "{b_by_host}");
    assert_eq!(
        (
            b_by_host["files_unmodified"].as_u64(),
            b_by_host["files_new"].as_u64()
        ),
        (Some(2), Some(0)),
        "{b_by_host}"
    );
    // Default: the latest holding a's path, here with b's too (not
    // b_by_host's, which holds b's only).
    let again = run(&["--host", "h", pa]);
    assert_eq!(again["parent"], id(&both).as_str(), "{again}");
    let by_host = run(&["--host", "h", "--group-by", "host", pa]);
    assert_eq!(by_host["parent"], id(&again).as_str(), "{by_host}");
    assert_eq!(by_host["files_unmodified"], 3, "{by_host}");
    // With tags: a snapshot holding the tags given (only_a's x).
    let tagged = run(&["--host", "h", "--tag", "x", "-g", "host,paths,tags", pa]);
    assert_eq!(tagged["parent"], id(&only_a).as_str(), "{tagged}");
    let other = run(&["--host", "h", "--tag", "y", "-g", "host,tags", pa]);
    assert!(other["parent"].is_null(), "no snapshot tagged y: {other}");
    // Among more tags (`--tag y,daily` is two tags); no tag given, any.
    let yd = run(&["--host", "h", "--tag", "y,daily", pa]);
    let y = run(&["--host", "h", "--tag", "y", "-g", "host,tags", pa]);
    assert_eq!(y["parent"], id(&yd).as_str(), "{y}");
    let any = run(&["--host", "h", "-g", "host,tags", pa]);
    assert_eq!(any["parent"], id(&y).as_str(), "{any}");
    let listed = crate::faults::larder_ok(&repo, &cache, &["--json", "snapshots", &id(&yd)]);
    let v: serde_json::Value = serde_json::from_str(&listed.out).unwrap();
    assert_eq!(v[0]["tags"], serde_json::json!(["y", "daily"]), "{v}");
    // '': the latest of every host.
    let elsewhere = run(&["--host", "other", "-g", "", pa]);
    assert_eq!(elsewhere["parent"], id(&any).as_str(), "{elsewhere}");
    let plain = run(&["--host", "other2", pa]);
    assert!(
        plain["parent"].is_null(),
        "another host: none by default: {plain}"
    );

    let o = crate::faults::larder_run(&repo, &cache, &["backup", "--group-by", "hostname", pa]);
    assert_ne!(o.code, 0, "{}", o.all());
    assert!(o.err.contains("--group-by"), "{}", o.err);
}
