//! The daily loop, end to end: back up, back up again, edit, diff, restore,
//! survive corruption, hostile snapshots and a killed run; the CLI's
//! snapshot listing, selection and restore options; backup excludes.

use crate::common::{self, TestRepo};
use larder::Id;
use larder::check::{CheckOptions, check};
use larder::diff::{self, DiffEntry};
use larder::pack::BlobType;
use larder::repository::Repository;
use larder::restorer::{Overwrite, restore};
use larder::snapshot::{self, Snapshot, Summary};
use larder::tree::{Node, NodeKind, Tree};
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, symlink};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::*;

// ------------------------------------------------------------------ tests

/// Every file type survives a backup and restore: bytes, type, mode, owner,
/// nanosecond mtimes, symlink targets, hard links, holes, odd names.
#[test]
fn round_trip_every_file_type() {
    let t = TestRepo::new();
    let repo = t.init();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    fs::create_dir(&src).unwrap();

    write(&src.join("empty"), b"");
    write(&src.join("small.txt"), b"hello, larder\n");
    write(&src.join("big.bin"), &rand_bytes(1, 1 << 20));
    {
        let f = fs::File::create(src.join("sparse.img")).unwrap();
        f.set_len(2 << 20).unwrap();
    }
    write(&src.join("dir1/dir2/deep.txt"), b"deep");
    fs::create_dir(src.join("emptydir")).unwrap();
    symlink("small.txt", src.join("rel")).unwrap();
    symlink(src.join("big.bin"), src.join("abs")).unwrap();
    symlink("no/such/target", src.join("dangling")).unwrap();
    write(&src.join("dirA/hl1"), b"shared by two names");
    fs::create_dir(src.join("dirB")).unwrap();
    fs::hard_link(src.join("dirA/hl1"), src.join("dirB/hl2")).unwrap();
    nix::unistd::mkfifo(
        &src.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o640),
    )
    .unwrap();
    let bad = src.join(OsStr::from_bytes(b"bad\xffname"));
    write(&bad, b"a name that is not UTF-8");
    write(&src.join("setuid"), b"#!/bin/sh\n");
    write(&src.join("rodir/inside.txt"), b"in a read-only directory");

    set_mode(&src.join("small.txt"), 0o600);
    set_mode(&src.join("big.bin"), 0o755);
    set_mode(&src.join("empty"), 0o444);
    set_mode(&src.join("setuid"), 0o4755);
    set_mode(&src.join("fifo"), 0o640);
    set_mode(&src.join("emptydir"), 0o700);
    set_mode(&src.join("dir1"), 0o750);
    set_mode(&src.join("rodir"), 0o555);
    if is_root() {
        std::os::unix::fs::chown(src.join("small.txt"), Some(1234), Some(5678)).unwrap();
        std::os::unix::fs::lchown(src.join("rel"), Some(4321), Some(8765)).unwrap();
        std::os::unix::fs::chown(src.join("dir1"), Some(2222), Some(3333)).unwrap();
    }

    // Distinct nanosecond mtimes everywhere, directories after their contents.
    fn stamp(dir: &Path, next: &mut i64) {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for p in names {
            if fs::symlink_metadata(&p).unwrap().is_dir() {
                stamp(&p, next);
            }
            *next += 1_000_000_007;
            set_mtime(&p, *next);
        }
    }
    let mut next = 1_500_000_000_123_456_789;
    stamp(&src, &mut next);

    let res = lib_backup(&repo, &[&src]);
    assert!(res.warnings.is_empty(), "{:?}", res.warnings);
    // empty, small, big, sparse, deep, hl1, hl2, bad, setuid, inside
    assert_eq!(res.summary.files_new, 10, "{:?}", res.summary);
    assert_eq!(res.summary.total_files, 10);
    assert_eq!(
        res.summary.total_bytes,
        14 + (1 << 20) + (2 << 20) + 4 + 2 * 19 + 24 + 10 + 24
    );
    let id = res.snapshot_id.unwrap();

    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("t");
    let rep = lib_restore(&repo, &id, &src, &target);
    assert!(rep.errors.is_empty(), "{:?}", rep.errors);
    assert!(rep.skipped.is_empty(), "{:?}", rep.skipped);
    assert_eq!(rep.files, 10);

    let compared = assert_same_tree(&src, &target);
    assert_eq!(compared, list_rel(&src).len());
    assert!(
        target.join(OsStr::from_bytes(b"bad\xffname")).is_file(),
        "non-UTF-8 name restored byte for byte"
    );
    assert!(
        fs::symlink_metadata(target.join("fifo"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert_eq!(
        fs::read_link(target.join("abs")).unwrap(),
        src.join("big.bin"),
        "absolute symlink target kept verbatim"
    );

    let h1 = fs::metadata(target.join("dirA/hl1")).unwrap();
    let h2 = fs::metadata(target.join("dirB/hl2")).unwrap();
    assert_eq!(h1.ino(), h2.ino(), "hard link pair restored as one inode");
    assert_eq!(h1.nlink(), 2);

    let sp = fs::metadata(target.join("sparse.img")).unwrap();
    assert_eq!(sp.len(), 2 << 20);
    assert!(
        sp.blocks() * 512 < (2 << 20) / 8,
        "sparse file restored with {} allocated bytes for {} bytes",
        sp.blocks() * 512,
        sp.len()
    );
    if is_root() {
        let m = fs::metadata(target.join("small.txt")).unwrap();
        assert_eq!((m.uid(), m.gid()), (1234, 5678));
    }
}

/// A second backup of an unchanged tree reads no byte, stores no data and
/// gives the same tree; a metadata-only change re-reads just that file.
#[test]
fn unchanged_tree_is_not_read_again() {
    let t = TestRepo::new();
    let repo = t.init();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    for i in 0..6u64 {
        write(
            &src.join(format!("d{}/f{i}.bin", i % 3)),
            &rand_bytes(100 + i, 40_000 + i as usize * 10_000),
        );
    }
    write(&src.join("top.txt"), b"top");
    symlink("top.txt", src.join("link")).unwrap();

    let r1 = lib_backup(&repo, &[&src]);
    assert!(r1.warnings.is_empty());
    assert_eq!(r1.summary.files_new, 7);
    assert!(r1.summary.bytes_read > 0);

    let before = pack_ids(&repo);
    let r2 = lib_backup(&repo, &[&src]);
    let s = &r2.summary;
    assert!(r2.warnings.is_empty());
    assert_eq!(r2.parent, r1.snapshot_id, "parent is the first snapshot");
    assert_eq!(s.total_files, 7);
    assert_eq!(s.files_unmodified, s.total_files, "{s:?}");
    assert_eq!((s.files_new, s.files_changed), (0, 0), "{s:?}");
    assert_eq!(s.bytes_read, 0, "no file was read: {s:?}");
    assert_eq!(s.total_bytes, r1.summary.total_bytes);
    let (data, trees) = new_blobs(&repo, &before);
    assert_eq!(data, 0, "no data blob stored by the unchanged backup");

    let snap1 = load_snap(&repo, &r1.snapshot_id.unwrap());
    let snap2 = load_snap(&repo, &r2.snapshot_id.unwrap());
    let sub1 = larder::walker::tree_at(&repo, snap1.tree, path_str(&src)).unwrap();
    let sub2 = larder::walker::tree_at(&repo, snap2.tree, path_str(&src)).unwrap();
    assert_eq!(sub1, sub2, "the backed-up directory has the same tree id");
    // Only the directories above the backed-up path (whose metadata other
    // processes may touch, e.g. /tmp) can give new tree blobs.
    assert!(trees <= src.components().count(), "{trees} new tree blobs");
    if snap1.tree == snap2.tree {
        assert_eq!(s.data_added, 0, "{s:?}");
        assert_eq!(trees, 0);
    }

    // Touch one file's mtime only: it alone is re-read, its chunks are known.
    let touched = src.join("d1/f1.bin");
    let len = fs::metadata(&touched).unwrap().len();
    set_mtime(&touched, 1_600_000_000_000_000_001);
    let before = pack_ids(&repo);
    let r3 = lib_backup(&repo, &[&src]);
    let s = &r3.summary;
    assert_eq!(
        (s.files_new, s.files_changed, s.files_unmodified),
        (0, 1, 6),
        "{s:?}"
    );
    assert_eq!(s.bytes_read, len, "{s:?}");
    assert_eq!(
        new_blobs(&repo, &before).0,
        0,
        "identical content is deduplicated"
    );
}

/// Edit, add and delete files: the next backup stores only the new chunks,
/// counts files exactly, and `diff` names exactly the changed paths.
#[test]
fn edits_adds_and_deletes_are_counted_and_diffed() {
    let t = TestRepo::new();
    let repo = t.init();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let big = rand_bytes(7, 1 << 20);
    write(&src.join("big.bin"), &big);
    write(&src.join("a.txt"), b"to be deleted");
    write(&src.join("keep.txt"), b"kept");
    write(&src.join("sub/c.txt"), b"c");
    write(&src.join("sub/d.txt"), b"to be deleted too");
    let r1 = lib_backup(&repo, &[&src]);
    assert_eq!(r1.summary.files_new, 5);

    // Edit 10 bytes in the middle of big.bin, keeping its size; give it a
    // new mtime explicitly so the change cannot hide inside one clock tick.
    let f = fs::OpenOptions::new()
        .write(true)
        .open(src.join("big.bin"))
        .unwrap();
    f.write_all_at(b"0123456789", 512 * 1024).unwrap();
    drop(f);
    let old = mtime_ns(&fs::metadata(src.join("big.bin")).unwrap());
    set_mtime(&src.join("big.bin"), old + 1_000_000_000);
    write(&src.join("new.txt"), b"new file");
    write(&src.join("sub/new2.txt"), b"another new file");
    write(&src.join("newdir/x.txt"), b"in a new directory");
    fs::remove_file(src.join("a.txt")).unwrap();
    fs::remove_file(src.join("sub/d.txt")).unwrap();

    let r2 = lib_backup(&repo, &[&src]);
    let s = &r2.summary;
    assert!(r2.warnings.is_empty());
    assert_eq!(s.files_changed, 1, "{s:?}");
    assert_eq!(s.files_new, 3, "{s:?}");
    assert_eq!(s.files_unmodified, 2, "{s:?}");
    assert_eq!(s.total_files, 6);
    assert!(s.data_added > 0);
    assert!(
        s.data_added_plain < 200 * 1024,
        "a 10-byte edit stored {} plain bytes",
        s.data_added_plain
    );

    let (id1, id2) = (r1.snapshot_id.unwrap(), r2.snapshot_id.unwrap());
    let (a, b) = (load_snap(&repo, &id1), load_snap(&repo, &id2));
    let mut got = BTreeSet::new();
    let stats = diff::diff(&repo, a.tree, b.tree, false, &mut |e: &DiffEntry| {
        got.insert((e.modifier, e.path.clone()));
    })
    .unwrap();
    let p = path_str(&src);
    let want: BTreeSet<(char, String)> = [
        ('M', "big.bin"),
        ('+', "new.txt"),
        ('+', "sub/new2.txt"),
        ('+', "newdir/"),
        ('+', "newdir/x.txt"),
        ('-', "a.txt"),
        ('-', "sub/d.txt"),
    ]
    .into_iter()
    .map(|(m, s)| (m, format!("{p}/{s}")))
    .collect();
    assert_eq!(got, want);
    assert_eq!(
        (
            stats.files_added,
            stats.files_removed,
            stats.files_changed,
            stats.dirs_added,
            stats.dirs_removed
        ),
        (3, 2, 1, 1, 0),
        "{stats:?}"
    );
    drop(repo);

    // The same through the CLI, one JSON object per line.
    let (out, _) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["diff", "--json", &id1.to_hex(), &id2.to_hex()],
        0,
    );
    let lines = json_lines(&out);
    let (changes, rest): (Vec<_>, Vec<_>) =
        lines.iter().partition(|v| v["message_type"] == "change");
    let cli_got: BTreeSet<(char, String)> = changes
        .iter()
        .map(|v| {
            (
                v["modifier"].as_str().unwrap().chars().next().unwrap(),
                v["path"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(cli_got, want);
    assert_eq!(changes.len(), want.len(), "no path reported twice");
    assert_eq!(rest.len(), 1, "one statistics line: {out}");
    let st = &rest[0];
    assert_eq!(st["message_type"], "statistics");
    assert_eq!(st["source_snapshot"], id1.to_hex());
    assert_eq!(st["target_snapshot"], id2.to_hex());
    assert_eq!(st["files_added"], 3);
    assert_eq!(st["files_removed"], 2);
    assert_eq!(st["files_changed"], 1);
}

/// One flipped byte in one blob: that file is reported and not created,
/// every other file restores exactly, the CLI exits non-zero, and
/// `check --read-data` names the pack.
#[test]
fn corrupted_pack_fails_only_the_affected_file() {
    let t = TestRepo::new();
    let repo = t.init();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    write(&src.join("victim.bin"), &rand_bytes(40, 300_000));
    for i in 0..5u64 {
        write(
            &src.join(format!("other{i}.bin")),
            &rand_bytes(41 + i, 150_000),
        );
    }
    write(&src.join("sub/small.txt"), b"small");
    let r = lib_backup(&repo, &[&src]);
    let id = r.snapshot_id.unwrap();
    let snap = load_snap(&repo, &id);

    let tid = larder::walker::tree_at(&repo, snap.tree, path_str(&src)).unwrap();
    let pack_hex = flip_blob_of(&t, &repo, &tid, "victim.bin");
    let victim_blob = repo
        .load_tree(&tid)
        .unwrap()
        .find(b"victim.bin")
        .unwrap()
        .content[0];
    // The error names the file, the blob and the pack that holds it.
    let named = format!(
        "blob {victim_blob} in {}",
        larder::backend::Kind::Pack.path(&pack_hex)
    );

    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("t");
    let rep = lib_restore(&repo, &id, &src, &target);
    assert_eq!(rep.errors.len(), 1, "{:?}", rep.errors);
    assert!(rep.errors[0].contains("victim.bin"), "{:?}", rep.errors);
    assert!(rep.errors[0].contains(&named), "{:?}", rep.errors);
    assert!(
        !target.join("victim.bin").exists(),
        "a damaged file is not created"
    );
    for i in 0..5 {
        let n = format!("other{i}.bin");
        assert!(
            fs::read(target.join(&n)).unwrap() == fs::read(src.join(&n)).unwrap(),
            "{n}"
        );
    }
    assert_eq!(fs::read(target.join("sub/small.txt")).unwrap(), b"small");
    assert_eq!(rep.files, 6);
    let leftovers: Vec<_> = list_rel(&target)
        .into_iter()
        .filter(|p| p.contains(".larder-restore-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");

    let c = check(
        &repo,
        &CheckOptions {
            read_data: true,
            subset: None,
        },
    )
    .unwrap();
    assert!(!c.ok());
    assert!(
        c.problems.iter().any(|p| p.contains(&named)),
        "{:?}",
        c.problems
    );
    drop(repo);

    let target2 = out.path().join("t2");
    let mut cmd = common::larder(&t.repo_path(), &t.cache_path());
    cmd.args(["restore", &format!("{}:{}", id.to_hex(), path_str(&src))])
        .arg("--target")
        .arg(&target2);
    let (code, _, err) = run(cmd);
    assert_ne!(code, 0, "restore with a damaged file must fail: {err}");
    assert!(err.contains("victim.bin"), "{err}");
    assert!(!target2.join("victim.bin").exists());
    assert!(target2.join("other0.bin").is_file());

    let mut cmd = common::larder(&t.repo_path(), &t.cache_path());
    cmd.args(["check", "--read-data"]);
    let (code, out, err) = run(cmd);
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains(&pack_hex), "check names the pack: {err}");
    assert!(!out.contains("no errors were found"), "{out}");
}

/// A directory whose tree blob is damaged (the last of three) is reported
/// by its path and left empty; the directories before it (whose trees the
/// restore looks up together with it) and everything below them restore
/// exactly. A location given to the wrong directory would fail another
/// directory, or this one with another message.
#[test]
fn a_damaged_directory_tree_fails_only_that_directory() {
    let t = TestRepo::new();
    let repo = t.init();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    for d in ["a", "b", "c"] {
        write(&src.join(d).join("f.txt"), format!("in {d}\n").as_bytes());
        let deeper = format!("deeper in {d}\n");
        write(&src.join(d).join("deeper/g.txt"), deeper.as_bytes());
        // Files between the directories, in the order of names.
        write(&src.join(format!("{d}.txt")), d.as_bytes());
    }
    let id = lib_backup(&repo, &[&src]).snapshot_id.unwrap();
    let snap = load_snap(&repo, &id);
    let tid = larder::walker::tree_at(&repo, snap.tree, path_str(&src)).unwrap();
    let c_tree = repo.load_tree(&tid).unwrap().find(b"c").unwrap().subtree;
    let c_tree = c_tree.unwrap();
    let pack_hex = flip_blob_byte(&t, &repo, &c_tree);
    let named = format!(
        "blob {c_tree} in {}",
        larder::backend::Kind::Pack.path(&pack_hex)
    );

    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("t");
    let rep = lib_restore(&repo, &id, &src, &target);
    assert_eq!(rep.errors.len(), 1, "{:?}", rep.errors);
    assert!(rep.errors[0].starts_with("/c: "), "{:?}", rep.errors);
    assert!(rep.errors[0].contains(&named), "{:?}", rep.errors);
    assert!(target.join("c").is_dir());
    assert!(list_rel(&target.join("c")).is_empty(), "c is left empty");
    let mut want = list_rel(&src);
    want.retain(|p| !p.starts_with("c/"));
    assert_eq!(list_rel(&target), want);
    for p in want.iter().filter(|p| p.ends_with(".txt")) {
        assert_eq!(
            fs::read(target.join(p)).unwrap(),
            fs::read(src.join(p)).unwrap(),
            "{p}"
        );
    }
    assert_eq!(rep.files, 7);
}

/// Flips one byte inside the (first) blob of file `name` of tree `tid`;
/// returns the name of the pack it is in.
fn flip_blob_of(t: &TestRepo, repo: &Repository, tid: &Id, name: &str) -> String {
    let tree = repo.load_tree(tid).unwrap();
    let node = tree.find(name.as_bytes()).unwrap();
    flip_blob_byte(t, repo, &node.content[0])
}

/// A restore of more files than several batches hold (a batch holds up to
/// 1,024 files, fewer under a low limit on open files, and two are written
/// at once): every file is restored once and exactly, and the damaged
/// ones, one in each of the first three batches of 1,024, are reported in
/// the order of the walk.
#[test]
fn a_restore_of_many_batches_reports_every_file_in_walk_order() {
    let t = TestRepo::new();
    let repo = t.init();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let victims = ["f0100", "f1500", "f2500"];
    for i in 0..3000u64 {
        let name = format!("f{i:04}");
        let data = if victims.contains(&name.as_str()) {
            rand_bytes(7000 + i, 20_000)
        } else {
            format!("file {i}\n")
                .repeat(1 + (i % 7) as usize)
                .into_bytes()
        };
        write(&src.join(&name), &data);
    }
    let id = lib_backup(&repo, &[&src]).snapshot_id.unwrap();
    let snap = load_snap(&repo, &id);
    let tid = larder::walker::tree_at(&repo, snap.tree, path_str(&src)).unwrap();
    for v in victims {
        flip_blob_of(&t, &repo, &tid, v);
    }

    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("t");
    let rep = lib_restore(&repo, &id, &src, &target);
    let named: Vec<&str> = rep
        .errors
        .iter()
        .map(|e| {
            victims
                .iter()
                .find(|v| e.contains(*v))
                .copied()
                .unwrap_or(e)
        })
        .collect();
    assert_eq!(named, victims, "errors in walk order: {:?}", rep.errors);
    assert_eq!(rep.files, 3000 - victims.len() as u64);
    let restored = list_rel(&target);
    assert_eq!(restored.len(), 3000 - victims.len(), "no temporary files");
    for name in &restored {
        assert!(!victims.contains(&name.as_str()), "{name} was damaged");
        assert_eq!(
            fs::read(target.join(name)).unwrap(),
            fs::read(src.join(name)).unwrap(),
            "{name}"
        );
    }
}

fn node(name: &[u8], kind: NodeKind) -> Node {
    Node {
        name: name.to_vec(),
        kind,
        mode: if kind == NodeKind::Dir { 0o755 } else { 0o644 },
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
        user: Default::default(),
        group: Default::default(),
        mtime_ns: 1_600_000_000_000_000_000,
        ctime_ns: 1_600_000_000_000_000_000,
        atime_ns: None,
        size: 0,
        inode: 0,
        device: 0,
        links: 1,
        rdev: 0,
        link_target: vec![],
        content: vec![],
        subtree: None,
        xattrs: vec![],
    }
}

fn file_node(p: &mut larder::packer::Packer<'_>, name: &[u8], data: &[u8]) -> Node {
    let mut n = node(name, NodeKind::File);
    n.content = vec![p.add(BlobType::Data, data).unwrap().0];
    n.size = data.len() as u64;
    n
}

fn dir_node(p: &mut larder::packer::Packer<'_>, name: &[u8], nodes: Vec<Node>) -> Node {
    let mut n = node(name, NodeKind::Dir);
    n.subtree = Some(store_tree(p, nodes));
    n
}

/// Stores the nodes as a tree blob, in the order given (callers sort).
fn store_tree(p: &mut larder::packer::Packer<'_>, nodes: Vec<Node>) -> Id {
    let t = Tree { nodes };
    p.add(BlobType::Tree, &t.encode().unwrap()).unwrap().0
}

fn save_snapshot(repo: &Repository, tree: Id) -> Snapshot {
    let s = Snapshot {
        time_ns: 1_700_000_000_000_000_000,
        hostname: "evil".into(),
        username: "evil".into(),
        uid: 0,
        gid: 0,
        paths: vec!["/evil".into()],
        tags: vec![],
        tree,
        parent: None,
        program_version: "larder hostile".into(),
        summary: Summary::default(),
        original: None,
    };
    snapshot::save(repo, &s).unwrap();
    s
}

/// A hostile snapshot (and a hostile target) cannot make restore write
/// outside the target, under any overwrite policy.
#[test]
fn hostile_snapshot_cannot_write_outside_target() {
    let t = TestRepo::new();
    let repo = t.init();
    let base = tempfile::tempdir().unwrap();
    let outside = base.path().join("outside");
    fs::create_dir(&outside).unwrap();
    write(&outside.join("victim.txt"), b"original");

    let mut p = larder::packer::Packer::new(&repo).unwrap();
    // Snapshot A: unsafe names, and a symlink pointing outside.
    let escaped = file_node(&mut p, b"escaped", b"escaped via ..");
    let dotdot = dir_node(&mut p, b"..", vec![escaped]);
    let slash_up = file_node(&mut p, b"../outside/escaped2", b"escaped via a slash");
    let a_dir = dir_node(&mut p, b"a", vec![]);
    let a_b = file_node(&mut p, b"a/b", b"a name with a slash");
    let mut link = node(b"link", NodeKind::Symlink);
    link.link_target = outside.as_os_str().as_bytes().to_vec();
    let tree_a = store_tree(&mut p, vec![dotdot, slash_up, a_dir, a_b, link]);
    // Snapshot B: a directory `link` where A had the symlink, a file `x`
    // and a directory `d` where the target will hold symlinks to outside.
    let pwned = file_node(&mut p, b"pwned", b"pwned!");
    let link_dir = dir_node(&mut p, b"link", vec![pwned]);
    let f = file_node(&mut p, b"f", b"evil-f");
    let d = dir_node(&mut p, b"d", vec![f]);
    let x = file_node(&mut p, b"x", b"evil");
    let tree_b = store_tree(&mut p, vec![d, link_dir, x]);
    p.finish().unwrap();
    let snap_a = save_snapshot(&repo, tree_a);
    let snap_b = save_snapshot(&repo, tree_b);

    let outside_listing = || list_rel(&outside);
    for (i, policy) in [Overwrite::Never, Overwrite::Always, Overwrite::IfChanged]
        .into_iter()
        .enumerate()
    {
        let target = base.path().join(format!("target{i}"));
        let rep = restore(&repo, &snap_a, None, &restore_opts(&target, policy)).unwrap();
        let unsafe_reports = rep
            .errors
            .iter()
            .filter(|e| e.contains("unsafe name"))
            .count();
        assert_eq!(unsafe_reports, 3, "{policy:?}: {:?}", rep.errors);
        assert!(!base.path().join("escaped").exists(), "{policy:?}");
        assert!(!target.join("a/b").exists(), "{policy:?}");
        assert!(target.join("a").is_dir(), "{policy:?}");
        assert_eq!(outside_listing(), set(&["victim.txt"]), "{policy:?}");
        assert_eq!(
            fs::read_link(target.join("link")).unwrap(),
            outside,
            "{policy:?}: the symlink itself is restored"
        );

        // Plant symlinks in the target where B has a file and a directory.
        symlink(outside.join("victim.txt"), target.join("x")).unwrap();
        symlink(&outside, target.join("d")).unwrap();
        let rep = restore(&repo, &snap_b, None, &restore_opts(&target, policy)).unwrap();
        assert!(rep.errors.is_empty(), "{policy:?}: {:?}", rep.errors);
        assert_eq!(
            outside_listing(),
            set(&["victim.txt"]),
            "{policy:?}: nothing written outside the target"
        );
        assert_eq!(fs::read(outside.join("victim.txt")).unwrap(), b"original");
        for name in ["link", "d"] {
            let m = fs::symlink_metadata(target.join(name)).unwrap();
            assert!(
                m.is_dir(),
                "{policy:?}: target/{name} is now a real directory"
            );
        }
        assert_eq!(fs::read(target.join("link/pwned")).unwrap(), b"pwned!");
        assert_eq!(fs::read(target.join("d/f")).unwrap(), b"evil-f");
        let mx = fs::symlink_metadata(target.join("x")).unwrap();
        assert!(
            mx.is_file(),
            "{policy:?}: the planted symlink x was replaced"
        );
        assert_eq!(fs::read(target.join("x")).unwrap(), b"evil");
    }
}

/// `larder backup -q SRC` started in the background, its output dropped
/// (a test that kills it waits for what it writes instead).
fn spawn_backup(repo: &Path, cache: &Path, src: &Path) -> std::process::Child {
    let mut cmd = common::larder(repo, cache);
    cmd.args(["backup", "-q"])
        .arg(src)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd.spawn().unwrap()
}

/// A backup killed with SIGKILL mid-run, then run again: nothing is stored
/// twice and the repository checks clean and restores exactly.
#[test]
fn killed_backup_rerun_stores_nothing_twice() {
    let t = TestRepo::new();
    // 1 MiB packs so the killed run leaves many complete ones behind.
    drop(t.init());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let mut source_bytes = 0u64;
    for i in 0..8u64 {
        let data = rand_bytes(600 + i, 5 << 20);
        source_bytes += data.len() as u64;
        write(&src.join(format!("f{i}.bin")), &data);
    }

    let mut child = spawn_backup(&t.repo_path(), &t.cache_path(), &src);
    let deadline = Instant::now() + Duration::from_secs(60);
    let killed = loop {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("backup finished ({st}) before it could be killed");
        }
        if pack_files(&t.repo_path()).0 >= 12 {
            child.kill().unwrap();
            break true;
        }
        assert!(Instant::now() < deadline, "no packs appeared");
        std::thread::sleep(Duration::from_millis(2));
    };
    assert!(killed);
    child.wait().unwrap(); // reap it, so its lock is seen as stale
    let (packs_after_kill, _) = pack_files(&t.repo_path());
    assert!(packs_after_kill >= 12);
    assert!(
        fs::read_dir(t.repo_path().join("snapshots"))
            .unwrap()
            .count()
            == 0,
        "the killed run saved no snapshot"
    );

    let (out, _) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", "--json", path_str(&src)],
        0,
    );
    let summary = json_lines(&out).pop().unwrap();
    assert_eq!(summary["message_type"], "summary");
    let (_, total) = pack_files(&t.repo_path());
    assert!(
        (total as f64) < source_bytes as f64 * 1.15,
        "{total} bytes of packs for {source_bytes} bytes of random data"
    );
    let added = summary["data_added"].as_u64().unwrap();
    assert!(
        added < source_bytes - (packs_after_kill as u64 - 1) * (900 << 10),
        "the re-run stored {added} bytes although {packs_after_kill} packs were left"
    );

    let (out, err) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["check", "--read-data"],
        0,
    );
    assert!(out.contains("no errors were found"), "{out}{err}");

    let repo = t.open().unwrap();
    let id = Id::from_hex(summary["snapshot_id"].as_str().unwrap()).unwrap();
    let dest = base.path().join("restored");
    let rep = lib_restore(&repo, &id, &src, &dest);
    assert!(rep.errors.is_empty(), "{:?}", rep.errors);
    assert_eq!(rep.bytes, source_bytes);
    for i in 0..8 {
        let n = format!("f{i}.bin");
        assert!(
            fs::read(dest.join(&n)).unwrap() == fs::read(src.join(&n)).unwrap(),
            "{n}"
        );
    }
}

/// A backup of many small blobs writes an index segment every 65,536
/// blobs (here one file of 48 MiB in chunks of about 256 bytes, some
/// 160,000 blobs). Killed with SIGKILL once its first segment is there:
/// the repository checks clean, and the next backup stores neither the
/// blobs that segment lists nor those of the packs uploaded since (so the
/// repository ends no larger than one clean backup's), yet stores what the
/// kill cut short: the segment came part way through the run. The
/// snapshot restores exactly.
#[test]
fn a_small_blob_backup_killed_after_its_first_segment_is_continued() {
    let base = tempfile::tempdir().unwrap();
    let cache = base.path().join("cache");
    let init = |repo: &Path| {
        let opts = larder::repository::InitOptions {
            chunker: larder::chunker::ChunkerParams {
                min: 64,
                avg: 256,
                max: 1024,
                level: 1,
            },
            compression_level: 3,
            pack_size: 1 << 20,
        };
        let key = larder::keys::NewKey::Passphrase {
            pass: common::PASS.to_string().into(),
            work_factor: common::TEST_WF,
        };
        let backend = std::sync::Arc::new(larder::backend::LocalBackend::new(repo));
        drop(Repository::init(backend, &key, &opts, &cache).unwrap());
    };
    let (repo, clean) = (base.path().join("repo"), base.path().join("clean"));
    init(&repo);
    init(&clean);
    let src = base.path().join("src");
    write(&src.join("many-chunks.bin"), &rand_bytes(910, 48 << 20));
    // Complete segments only (a segment being written is a `.tmp-*` file).
    let segments = || {
        fs::read_dir(repo.join("index"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().len() == 64)
            .count()
    };

    let mut child = spawn_backup(&repo, &cache, &src);
    let deadline = Instant::now() + Duration::from_secs(120);
    while segments() == 0 {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("backup finished ({st}) before it wrote a segment");
        }
        assert!(Instant::now() < deadline, "no segment appeared");
        std::thread::sleep(Duration::from_millis(1));
    }
    if let Some(st) = child.try_wait().unwrap() {
        panic!("backup finished ({st}) before it could be killed");
    }
    child.kill().unwrap();
    child.wait().unwrap(); // reap it, so its lock is seen as stale
    assert_eq!(fs::read_dir(repo.join("snapshots")).unwrap().count(), 0);
    let (out, err) = cli(&repo, &cache, &["check"], 0);
    assert!(out.contains("no errors were found"), "{out}{err}");

    let added = |repo: &Path| {
        let (out, _) = cli(repo, &cache, &["backup", "--json", path_str(&src)], 0);
        let summary = json_lines(&out).pop().unwrap();
        assert_eq!(summary["message_type"], "summary");
        summary["data_added_plain"].as_u64().unwrap()
    };
    let (rerun, whole) = (added(&repo), added(&clean));
    // Every blob is at least 64 bytes.
    assert!(
        rerun + 65_536 * 64 <= whole,
        "the re-run added {rerun} plain bytes, a clean backup {whole}"
    );
    assert!(
        rerun >= whole / 10,
        "the re-run added {rerun} plain bytes of {whole}: the segment came at the end"
    );
    let (total, clean_total) = (pack_files(&repo).1, pack_files(&clean).1);
    assert!(
        (total as f64) < clean_total as f64 * 1.05,
        "{total} bytes of packs, {clean_total} for a clean backup"
    );

    let (out, err) = cli(&repo, &cache, &["check", "--read-data"], 0);
    assert!(out.contains("no errors were found"), "{out}{err}");
    let dest = base.path().join("restored");
    cli(
        &repo,
        &cache,
        &["restore", "latest", "--target", path_str(&dest)],
        0,
    );
    assert_eq!(
        assert_same_tree(&src, &dest.join(src.strip_prefix("/").unwrap())),
        1
    );
}

/// `snapshots --json`, `latest`, prefixes, tag and host filters, `ls`, and
/// restore's SNAPSHOT:SUBPATH, include/exclude and overwrite policies.
#[test]
fn cli_snapshots_ls_and_restore_options() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let src = base.path().join("src");
    write(&src.join("a.txt"), b"alpha");
    write(&src.join("b.txt"), b"bravo");
    write(&src.join("top.bin"), &rand_bytes(70, 30_000));
    write(&src.join("sub/c.txt"), b"charlie");
    write(&src.join("sub/d.bin"), &rand_bytes(71, 20_000));
    write(&src.join("sub/deeper/e.txt"), b"echo");
    let sp = path_str(&src);
    cli(&repo, &cache, &["init"], 0);

    let started = jiff::Timestamp::now();
    let backup = |args: &[&str]| -> String {
        let mut a = vec!["backup", "--json", sp];
        a.extend_from_slice(args);
        let (out, _) = cli(&repo, &cache, &a, 0);
        json_lines(&out).pop().unwrap()["snapshot_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let s1 = backup(&["--tag", "daily", "--host", "hostA"]);
    let s2 = backup(&["--tag", "weekly", "--host", "hostB"]);
    let s3 = backup(&["--tag", "daily", "--tag", "extra", "--host", "hostA"]);
    let ended = jiff::Timestamp::now();

    let snapshots = |args: &[&str]| -> Vec<serde_json::Value> {
        let mut a = vec!["snapshots", "--json"];
        a.extend_from_slice(args);
        let (out, _) = cli(&repo, &cache, &a, 0);
        serde_json::from_str::<serde_json::Value>(&out)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    let ids = |v: &[serde_json::Value]| -> Vec<String> {
        v.iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect()
    };
    let all = snapshots(&[]);
    assert_eq!(
        ids(&all),
        vec![s1.clone(), s2.clone(), s3.clone()],
        "oldest first"
    );
    let lib_cache = tempfile::tempdir().unwrap();
    let opened = Repository::open(
        std::sync::Arc::new(larder::backend::LocalBackend::new(&repo)),
        &larder::keys::Credential::passphrase(common::PASS),
        lib_cache.path(),
    )
    .unwrap();
    let mut last_time = started;
    for (s, (host, tags, parent)) in all.iter().zip([
        ("hostA", vec!["daily"], None),
        ("hostB", vec!["weekly"], None),
        ("hostA", vec!["daily", "extra"], Some(s1.clone())),
    ]) {
        let id = s["id"].as_str().unwrap();
        assert_eq!(id.len(), 64);
        assert_eq!(s["short_id"].as_str().unwrap(), &id[..8]);
        let time: jiff::Timestamp = s["time"].as_str().unwrap().parse().unwrap();
        assert!(
            time >= last_time && time <= ended,
            "{time} not in order/range"
        );
        last_time = time;
        assert_eq!(s["hostname"], host);
        let user = s["username"].as_str().unwrap();
        if let Ok(u) = std::env::var("USER") {
            assert_eq!(user, u);
        }
        assert_eq!(s["paths"], serde_json::json!([sp]));
        assert_eq!(s["tags"], serde_json::json!(tags));
        let lib = snapshot::load(&opened, id).unwrap();
        assert_eq!(s["tree"].as_str().unwrap(), lib.tree.to_hex());
        assert_eq!(s["parent"], serde_json::json!(parent), "parent of {id}");
    }
    drop(opened);

    assert_eq!(
        ids(&snapshots(&["--tag", "daily"])),
        vec![s1.clone(), s3.clone()]
    );
    assert_eq!(ids(&snapshots(&["--tag", "extra"])), vec![s3.clone()]);
    // As restic: a comma wants every tag, a repeated flag any list.
    assert_eq!(
        ids(&snapshots(&["--tag", "daily,weekly"])),
        Vec::<String>::new()
    );
    assert_eq!(ids(&snapshots(&["--tag", "daily,extra"])), vec![s3.clone()]);
    assert_eq!(
        ids(&snapshots(&["--tag", "daily", "--tag", "weekly"])),
        vec![s1.clone(), s2.clone(), s3.clone()]
    );
    assert_eq!(ids(&snapshots(&["--host", "hostB"])), vec![s2.clone()]);
    assert_eq!(ids(&snapshots(&["--host", "nohost"])), Vec::<String>::new());

    let ls_id = |args: &[&str]| -> String {
        let mut a = vec!["ls", "--json"];
        a.extend_from_slice(args);
        let (out, _) = cli(&repo, &cache, &a, 0);
        let first = json_lines(&out).remove(0);
        assert_eq!(first["message_type"], "snapshot");
        first["id"].as_str().unwrap().to_string()
    };
    assert_eq!(ls_id(&["latest"]), s3);
    assert_eq!(ls_id(&["latest", "--host", "hostB"]), s2);
    assert_eq!(ls_id(&["latest", "--tag", "daily", "--host", "hostA"]), s3);
    // The shortest unique prefix of at least 4 hex digits.
    let prefix = (4..=64)
        .map(|n| &s2[..n])
        .find(|p| ![&s1, &s3].iter().any(|o| o.starts_with(p)))
        .unwrap();
    assert_eq!(ls_id(&[prefix]), s2);
    assert_eq!(ls_id(&[&prefix.to_ascii_uppercase()]), s2);

    // ls lists exactly the backed-up paths: the path, then all below it.
    let (out, _) = cli(&repo, &cache, &["ls", "--recursive", &s1, sp], 0);
    let listed: BTreeSet<String> = out.lines().skip(1).map(String::from).collect();
    let want: BTreeSet<String> = list_rel(&src)
        .into_iter()
        .map(|r| format!("{sp}/{r}"))
        .chain([sp.to_string()])
        .collect();
    assert_eq!(listed, want);

    // SNAPSHOT:SUBPATH puts the subtree's contents directly in the target.
    let t1 = base.path().join("t1");
    cli(
        &repo,
        &cache,
        &[
            "restore",
            &format!("{s1}:{sp}/sub"),
            "--target",
            path_str(&t1),
        ],
        0,
    );
    assert_eq!(
        list_rel(&t1),
        set(&["c.txt", "d.bin", "deeper", "deeper/e.txt"])
    );
    assert_same_tree(&src.join("sub"), &t1);

    let t2 = base.path().join("t2");
    cli(
        &repo,
        &cache,
        &[
            "restore",
            &format!("{s1}:{sp}"),
            "--target",
            path_str(&t2),
            "--include",
            "*.txt",
        ],
        0,
    );
    assert_eq!(
        list_rel(&t2),
        set(&[
            "a.txt",
            "b.txt",
            "sub",
            "sub/c.txt",
            "sub/deeper",
            "sub/deeper/e.txt"
        ])
    );
    assert_eq!(fs::read(t2.join("sub/deeper/e.txt")).unwrap(), b"echo");

    let t3 = base.path().join("t3");
    cli(
        &repo,
        &cache,
        &[
            "restore",
            &format!("{s1}:{sp}"),
            "--target",
            path_str(&t3),
            "--exclude",
            "*.bin",
            "--exclude",
            "sub/deeper",
        ],
        0,
    );
    assert_eq!(list_rel(&t3), set(&["a.txt", "b.txt", "sub", "sub/c.txt"]));

    // Overwrite policies.
    let t4 = base.path().join("t4");
    let full = ["restore", &format!("{s1}:{sp}"), "--target", path_str(&t4)].map(String::from);
    let full: Vec<&str> = full.iter().map(String::as_str).collect();
    cli(&repo, &cache, &full, 0);
    assert_same_tree(&src, &t4);
    write(&t4.join("a.txt"), b"locally modified, longer");
    let (_, err) = cli(&repo, &cache, &full, 0);
    assert_eq!(
        fs::read(t4.join("a.txt")).unwrap(),
        b"locally modified, longer"
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("skipped:") && l.contains("/a.txt") && !l.contains("unchanged")),
        "a.txt reported skipped: {err}"
    );
    let mut with_policy = full.clone();
    with_policy.extend(["--overwrite", "if-changed"]);
    let (_, err) = cli(&repo, &cache, &with_policy, 0);
    assert_eq!(fs::read(t4.join("a.txt")).unwrap(), b"alpha");
    assert_eq!(
        mtime_ns(&fs::metadata(t4.join("a.txt")).unwrap()),
        mtime_ns(&fs::metadata(src.join("a.txt")).unwrap())
    );
    assert!(
        !err.lines().any(|l| l.contains("/a.txt")),
        "a.txt was replaced, not skipped: {err}"
    );
    assert!(
        err.lines()
            .any(|l| l.contains("/b.txt") && l.contains("unchanged")),
        "unchanged b.txt skipped: {err}"
    );
    // if-newer: a file changed here since (a later mtime) stays; one the
    // snapshot has newer (this copy's mtime set back) is replaced.
    write(&t4.join("a.txt"), b"edited here after the backup");
    write(&t4.join("b.txt"), b"an older copy");
    crate::support::set_mtime(&t4.join("b.txt"), 1_000_000_000_000_000_000);
    let mut if_newer = full.clone();
    if_newer.extend(["--overwrite", "if-newer"]);
    let (_, err) = cli(&repo, &cache, &if_newer, 0);
    assert_eq!(
        fs::read(t4.join("a.txt")).unwrap(),
        b"edited here after the backup"
    );
    assert_eq!(
        fs::read(t4.join("b.txt")).unwrap(),
        fs::read(src.join("b.txt")).unwrap()
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("skipped:") && l.contains("/a.txt")),
        "the newer a.txt reported skipped: {err}"
    );
}

/// The source tree of the exclude tests, and the relative paths a backup
/// with `--exclude '*.tmp' --exclude-if-present .nobackup --exclude-caches`
/// must hold.
fn exclude_tree(src: &Path) -> BTreeSet<String> {
    write(&src.join("a_first.txt"), b"sorted before every directory");
    write(&src.join("keep.txt"), b"keep");
    write(&src.join("junk.tmp"), b"junk");
    write(&src.join("sub/keep2.txt"), b"keep2");
    write(&src.join("sub/junk2.tmp"), b"junk2");
    write(&src.join("nob/.nobackup"), b"");
    write(&src.join("nob/secret.txt"), b"secret");
    write(
        &src.join("cache/CACHEDIR.TAG"),
        b"Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag.\n",
    );
    write(&src.join("cache/blob.bin"), b"cached");
    write(
        &src.join("fakecache/CACHEDIR.TAG"),
        b"Signature: not the right one\n",
    );
    write(&src.join("fakecache/data.txt"), b"not a cache");
    write(&src.join("zlast.txt"), b"sorted after every directory");
    set(&[
        "a_first.txt",
        "keep.txt",
        "sub",
        "sub/keep2.txt",
        "fakecache",
        "fakecache/CACHEDIR.TAG",
        "fakecache/data.txt",
        "zlast.txt",
    ])
}

/// `ls --recursive SNAPSHOT PATH` as paths relative to PATH (PATH's own
/// line, which comes first, left out).
fn ls_rel(repo: &Path, cache: &Path, id: &str, path: &Path) -> BTreeSet<String> {
    let (out, _) = cli(repo, cache, &["ls", "--recursive", id, path_str(path)], 0);
    let prefix = format!("{}/", path_str(path));
    let mut lines = out.lines().skip(1);
    assert_eq!(lines.next(), Some(path_str(path)), "{out}");
    lines
        .map(|l| {
            l.strip_prefix(&prefix)
                .unwrap_or_else(|| panic!("{l:?} outside {prefix}"))
                .to_string()
        })
        .collect()
}

/// Excluding files by glob keeps everything else.
#[test]
fn backup_excludes_file_globs() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let src = base.path().join("src");
    exclude_tree(&src);
    cli(&repo, &cache, &["init"], 0);
    let (out, _) = cli(
        &repo,
        &cache,
        &["backup", "--json", "--exclude", "*.tmp", path_str(&src)],
        0,
    );
    let summary = json_lines(&out).pop().unwrap();
    let id = summary["snapshot_id"].as_str().unwrap();
    let want: BTreeSet<String> = list_rel(&src)
        .into_iter()
        .filter(|p| !p.ends_with(".tmp"))
        .collect();
    assert_eq!(ls_rel(&repo, &cache, id, &src), want);
    assert_eq!(summary["total_files_processed"], 10);
}

/// Exclude patterns as restic reads them: a relative pattern with `/`
/// matches at any depth, a trailing `/` and a leading `./` are cleaned
/// away, `/x/**` leaves out `/x` too, and a `!` pattern takes back what
/// the patterns before it matched (restic's ordered rule); an exclude file
/// may begin with a byte-order mark and use `$VAR`.
#[test]
fn backup_excludes_as_restic_reads_patterns() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let src = base.path().join("src");
    for f in [
        "web/node_modules/.cache/x",
        "web/node_modules/pkg/index.js",
        "build/out.o",
        "logs/a.log",
        "data/big/1",
        "srv/other/o",
        "srv/keep/k",
        "srv/keep/k.log",
        "notes.txt",
        "envdir/e",
    ] {
        write(&src.join(f), f.as_bytes());
    }
    cli(&repo, &cache, &["init"], 0);
    let file = base.path().join("excludes");
    let s = src.display();
    fs::write(
        &file,
        format!(
            "\u{feff}node_modules/.cache\nbuild/\n./a.log\n{s}/data/**\n{s}/srv/*\n!{s}/srv/keep\n$LARDER_TEST_EXCLUDED\n"
        ),
    )
    .unwrap();
    let mut c = common::larder(&repo, &cache);
    c.env("LARDER_TEST_EXCLUDED", "envdir").args([
        "backup",
        "--json",
        "--exclude-file",
        path_str(&file),
        path_str(&src),
    ]);
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = json_lines(&String::from_utf8_lossy(&out.stdout))
        .pop()
        .unwrap();
    let id = summary["snapshot_id"].as_str().unwrap();
    let want: BTreeSet<String> = [
        "logs",
        "notes.txt",
        "srv",
        "srv/keep",
        "srv/keep/k",
        "srv/keep/k.log",
        "web",
        "web/node_modules",
        "web/node_modules/pkg",
        "web/node_modules/pkg/index.js",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    assert_eq!(ls_rel(&repo, &cache, id, &src), want);
}

/// Restore's `--include` and `--exclude` read patterns as backup's do:
/// a relative pattern with `/` matches at any depth, a trailing `/` is
/// cleaned away, and `!` takes back what earlier patterns matched.
#[test]
fn restore_selects_as_restic_reads_patterns() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let src = base.path().join("src");
    for f in [
        "a/keep/k",
        "a/keep/k.log",
        "a/other/o",
        "b/keep/k2",
        "top.txt",
    ] {
        write(&src.join(f), f.as_bytes());
    }
    cli(&repo, &cache, &["init"], 0);
    let (out, _) = cli(&repo, &cache, &["backup", "--json", path_str(&src)], 0);
    let id = json_lines(&out).pop().unwrap()["snapshot_id"]
        .as_str()
        .unwrap()
        .to_string();
    let s = src.display().to_string();
    let restored = |n: usize, args: &[&str]| -> BTreeSet<String> {
        let target = base.path().join(format!("t{n}"));
        let mut all = vec!["restore", id.as_str(), "--target", path_str(&target)];
        all.extend(args);
        cli(&repo, &cache, &all, 0);
        let got = target.join(src.strip_prefix("/").unwrap());
        // The files restored (directories on the way are made either way).
        list_rel(&got)
            .into_iter()
            .filter(|p| fs::symlink_metadata(got.join(p)).unwrap().is_file())
            .collect()
    };
    let set = |l: &[&str]| l.iter().map(|p| p.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        restored(1, &["--include", "keep/k"]),
        set(&["a/keep/k"]),
        "a relative path matches at any depth"
    );
    assert_eq!(
        restored(2, &["--include", &format!("{s}/a/keep/")]),
        set(&["a/keep/k", "a/keep/k.log"])
    );
    assert_eq!(
        restored(3, &["--exclude", "a/keep/"]),
        set(&["a/other/o", "b/keep/k2", "top.txt"])
    );
    assert_eq!(
        restored(4, &["--exclude", &format!("{s}/*/*"), "--exclude", "!keep"]),
        set(&["a/keep/k", "a/keep/k.log", "b/keep/k2", "top.txt"])
    );
    // `!` in the includes takes back below an included directory.
    assert_eq!(
        restored(
            5,
            &[
                "--include",
                &format!("{s}/a"),
                "--include",
                &format!("!{s}/a/keep")
            ]
        ),
        set(&["a/other/o"])
    );
    // ...and a case-blind list beside it still brings what is below the
    // directory it names.
    assert_eq!(
        restored(
            6,
            &[
                "--include",
                &format!("{s}/a"),
                "--include",
                &format!("!{s}/a/keep"),
                "--iinclude",
                "B"
            ]
        ),
        set(&["a/other/o", "b/keep/k2"])
    );
}

/// Backup excludes by glob, marker file and CACHEDIR.TAG: the excluded
/// directories are left out, and only them.
#[test]
fn backup_excludes_directories() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let src = base.path().join("src");
    let want = exclude_tree(&src);
    cli(&repo, &cache, &["init"], 0);
    let (out, err) = cli(
        &repo,
        &cache,
        &[
            "backup",
            "--json",
            "--exclude",
            "*.tmp",
            "--exclude-if-present",
            ".nobackup",
            "--exclude-caches",
            path_str(&src),
        ],
        0,
    );
    let summary = json_lines(&out).pop().unwrap();
    let id = summary["snapshot_id"].as_str().unwrap();
    assert_eq!(ls_rel(&repo, &cache, id, &src), want, "{err}");
    // Nothing inside an excluded directory is read.
    let included_bytes: u64 = want
        .iter()
        .map(|r| fs::symlink_metadata(src.join(r)).unwrap())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    let included_files = want
        .iter()
        .filter(|r| fs::symlink_metadata(src.join(r)).unwrap().is_file())
        .count();
    assert_eq!(
        summary["total_files_processed"], included_files,
        "{summary}"
    );
    assert_eq!(summary["bytes_read"], included_bytes, "{summary}");

    // The same with a glob naming a directory.
    let (out, _) = cli(
        &repo,
        &cache,
        &["backup", "--json", "--exclude", "nob", path_str(&src)],
        0,
    );
    let id = json_lines(&out).pop().unwrap()["snapshot_id"]
        .as_str()
        .unwrap()
        .to_string();
    let want: BTreeSet<String> = list_rel(&src)
        .into_iter()
        .filter(|p| !p.starts_with("nob"))
        .collect();
    assert_eq!(ls_rel(&repo, &cache, &id, &src), want);
}

/// restic's backup flags for lists and sizes: `--iexclude` and
/// `--iexclude-file` match without regard to case, `--exclude-larger-than`
/// leaves out larger files (not directories), and `--files-from`,
/// `--files-from-verbatim` and `--files-from-raw` add the paths they list
/// (comments and blank lines skipped by the first, and its glob patterns
/// expanded; any byte but NUL in a raw name, a newline included).
#[test]
fn backup_takes_restics_list_and_size_flags() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let src = base.path().join("src");
    write(&src.join("a.txt"), b"small");
    write(&src.join("BIG.bin"), &rand_bytes(1, 200 << 10));
    write(&src.join("sub/Notes.TMP"), b"scratch");
    write(&src.join("sub/keep.dat"), &rand_bytes(2, 50 << 10));
    write(&src.join("sub/deep/big.iso"), &rand_bytes(3, 300 << 10));
    write(&src.join("odd\nname"), b"a newline in the name");
    cli(&repo, &cache, &["init"], 0);
    let last = |out: &str| json_lines(out).pop().unwrap();

    let ignore = base.path().join("ignore");
    fs::write(&ignore, "# case does not matter\n*.iso\n").unwrap();
    let (out, err) = cli(
        &repo,
        &cache,
        &[
            "backup",
            "--json",
            "--iexclude",
            "*.tmp",
            "--iexclude-file",
            path_str(&ignore),
            "--exclude-larger-than",
            "100k",
            path_str(&src),
        ],
        0,
    );
    let id = last(&out)["snapshot_id"].as_str().unwrap().to_string();
    let want: BTreeSet<String> = ["a.txt", "sub", "sub/keep.dat", "sub/deep", "odd\nname"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let o = crate::faults::larder_ok(&repo, &cache, &["ls", "--json", &id]);
    let got: BTreeSet<String> = json_lines(&o.out)
        .iter()
        .filter_map(|l| l["path"].as_str())
        .filter_map(|p| p.strip_prefix(&format!("{}/", path_str(&src))))
        .map(String::from)
        .collect();
    assert_eq!(got, want, "{err}");
    assert_eq!(last(&out)["total_files_processed"], 3, "{out}");
    // With --exclude (case as given) the upper-case name stays.
    let (out, _) = cli(
        &repo,
        &cache,
        &["backup", "--json", "--exclude", "*.tmp", path_str(&src)],
        0,
    );
    assert_eq!(last(&out)["total_files_processed"], 6, "{out}");

    // Paths from lists, beside one given as an argument.
    let lines = base.path().join("lines");
    fs::write(
        &lines,
        format!(
            "# what to keep\n\n  {}  \n{}/sub/dee?\n{}/nothing-*\n",
            path_str(&src.join("a.txt")),
            path_str(&src),
            path_str(&src)
        ),
    )
    .unwrap();
    let raw = base.path().join("raw");
    let mut bytes = src.join("odd\nname").as_os_str().as_bytes().to_vec();
    bytes.push(0);
    fs::write(&raw, &bytes).unwrap();
    let verbatim = base.path().join("verbatim");
    fs::write(&verbatim, format!("{}\n", path_str(&src.join("BIG.bin")))).unwrap();
    let (out, err) = cli(
        &repo,
        &cache,
        &[
            "backup",
            "--json",
            "--files-from",
            path_str(&lines),
            "--files-from-raw",
            path_str(&raw),
            "--files-from-verbatim",
            path_str(&verbatim),
            path_str(&src.join("sub/keep.dat")),
        ],
        0,
    );
    let id = last(&out)["snapshot_id"].as_str().unwrap().to_string();
    let (snaps, _) = cli(&repo, &cache, &["snapshots", "--json", &id], 0);
    let snaps: serde_json::Value = serde_json::from_str(&snaps).unwrap();
    let mut paths: Vec<&str> = snaps[0]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    paths.sort();
    let mut want = [
        src.join("BIG.bin"),
        src.join("a.txt"),
        src.join("odd\nname"),
        src.join("sub/deep"),
        src.join("sub/keep.dat"),
    ]
    .map(|p| path_str(&p).to_string());
    want.sort();
    assert_eq!(paths, want, "{err}");
    assert_eq!(last(&out)["total_files_processed"], 5, "{out}");
    // A pattern that matches nothing is skipped, with a warning.
    assert!(
        err.contains("pattern") && err.contains("nothing-*") && err.contains("skipped"),
        "{err}"
    );

    // A list that cannot be read is an error naming it; nothing is saved.
    let before = fs::read_dir(repo.join("snapshots")).unwrap().count();
    let missing = base.path().join("no-such-list");
    let (_, err) = cli(
        &repo,
        &cache,
        &["backup", "--files-from", path_str(&missing)],
        1,
    );
    assert!(err.contains("no-such-list"), "{err}");
    assert_eq!(
        fs::read_dir(repo.join("snapshots")).unwrap().count(),
        before
    );
    // A size that is not one is refused.
    let (_, err) = cli(
        &repo,
        &cache,
        &["backup", "--exclude-larger-than", "12Q", path_str(&src)],
        1,
    );
    assert!(err.contains("12Q"), "{err}");
}

/// Recursively hands `p` to `uid`/`gid` (not following symlinks).
fn chown_all(p: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(p, Some(uid), Some(gid)).unwrap();
    if fs::symlink_metadata(p).unwrap().is_dir() {
        for e in fs::read_dir(p).unwrap() {
            chown_all(&e.unwrap().path(), uid, gid);
        }
    }
}

/// An unreadable file is named in a warning, left out of the snapshot, and
/// the exit code is 3; everything else is backed up.
#[test]
fn unreadable_file_gives_exit_code_3() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let src = base.path().join("src");
    write(&src.join("a.txt"), b"readable");
    write(&src.join("sub/b.txt"), b"readable too");
    write(&src.join("z.txt"), b"after it");
    let unreadable = src.join("sub/unreadable.txt");
    write(&unreadable, b"you cannot read me");
    cli(&repo, &cache, &["init"], 0);
    set_mode(&unreadable, 0o000);

    // Root reads anything: run the backup as an unprivileged user then.
    let drop_to: Option<u32> = is_root().then_some(65534);
    if let Some(uid) = drop_to {
        chown_all(base.path(), uid, uid);
    } else if fs::read(&unreadable).is_ok() {
        eprintln!("skipping: a mode 000 file is readable here");
        return;
    }
    let mut cmd = common::larder(&repo, &cache);
    cmd.args(["backup", "--json"]).arg(&src);
    if let Some(uid) = drop_to {
        use std::os::unix::process::CommandExt;
        cmd.uid(uid).gid(uid).env("HOME", base.path());
    }
    let (code, out, err) = run(cmd);
    assert_eq!(code, 3, "exit code 3 for an unreadable file\n{out}\n{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("warning:") && l.contains(path_str(&unreadable))),
        "warning names the path: {err}"
    );
    let summary = json_lines(&out).pop().unwrap();
    assert_eq!(summary["errors"], 1, "{summary}");
    assert_eq!(summary["total_files_processed"], 3, "{summary}");
    let id = summary["snapshot_id"]
        .as_str()
        .expect("the snapshot is saved")
        .to_string();
    assert_eq!(
        ls_rel(&repo, &cache, &id, &src),
        set(&["a.txt", "sub", "sub/b.txt", "z.txt"])
    );
}

/// Every regular file below `root`, relative path → (content, mtime ns).
fn files_below(root: &Path) -> Vec<(String, Vec<u8>, i128)> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(root).sort_by_file_name() {
        let e = e.unwrap();
        if e.file_type().is_file() {
            let md = e.metadata().unwrap();
            let rel = e.path().strip_prefix(root).unwrap();
            out.push((
                rel.to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap(),
                md.mtime() as i128 * 1_000_000_000 + md.mtime_nsec() as i128,
            ));
        }
    }
    out
}

/// A restore killed with SIGKILL mid-run leaves no partial file under a
/// real name: each file there is complete, with its time set. A second
/// restore into the same target (the default, never overwrite) completes
/// the rest exactly.
#[test]
fn killed_restore_leaves_only_complete_files() {
    let t = TestRepo::new();
    drop(t.init());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    // 6,000 files in 60 directories: several restore batches.
    for d in 0..60u64 {
        for f in 0..100u64 {
            let data = rand_bytes(d * 1000 + f, 3000 + (f as usize * 97) % 9000);
            let p = src.join(format!("d{d:02}/f{f:03}"));
            write(&p, &data);
            set_mtime(
                &p,
                1_600_000_000_000_000_000 + (d * 100 + f) as i64 * 1_000_003,
            );
        }
    }
    let (out, _) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", "--json", path_str(&src)],
        0,
    );
    let summary = json_lines(&out).pop().unwrap();
    let snap = summary["snapshot_id"].as_str().unwrap().to_string();
    let target = base.path().join("target");
    let restored = target.join(src.strip_prefix("/").unwrap());

    let mut cmd = common::larder(&t.repo_path(), &t.cache_path());
    cmd.args(["restore", "-q", &snap, "--target"])
        .arg(&target)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("restore finished ({st}) before it could be killed");
        }
        // Killed once a few files are in place, long before the last.
        let done = fs::read_dir(restored.join("d00"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().as_bytes()[0] == b'f')
                    .count()
            })
            .unwrap_or(0);
        if done > 0 {
            child.kill().unwrap();
            break;
        }
        assert!(Instant::now() < deadline, "no restored files appeared");
        std::thread::sleep(Duration::from_millis(1));
    }
    child.wait().unwrap();

    let source = files_below(&src);
    let by_name: std::collections::HashMap<&str, (&Vec<u8>, i128)> = source
        .iter()
        .map(|(n, d, m)| (n.as_str(), (d, *m)))
        .collect();
    let partial = files_below(&restored);
    let mut real = 0;
    for (name, data, mtime) in &partial {
        let leaf = name.rsplit('/').next().unwrap();
        if leaf.starts_with(".larder-restore-") {
            continue; // a temporary name (where O_TMPFILE is unsupported)
        }
        let (want, want_mtime) = by_name[name.as_str()];
        assert!(data == want, "{name}: partial content under its real name");
        assert_eq!(*mtime, want_mtime, "{name}: time not set");
        real += 1;
    }
    assert!(
        real > 0 && real < source.len(),
        "the kill did not land mid-restore ({real} of {} files)",
        source.len()
    );

    let (_, err) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["restore", "-q", &snap, "--target", path_str(&target)],
        0,
    );
    let done: Vec<_> = files_below(&restored)
        .into_iter()
        .filter(|(n, _, _)| {
            !n.rsplit('/')
                .next()
                .unwrap()
                .starts_with(".larder-restore-")
        })
        .collect();
    assert!(done == source, "the second restore is not exact: {err}");
}

/// A file that grows while the backup runs is reported as changed while
/// read (exit code 3, its path named), the snapshot keeps the bytes read
/// (a prefix of the file), and the other files are exact.
#[test]
fn file_growing_during_backup_is_reported() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let src = base.path().join("src");
    write(&src.join("a.txt"), b"steady");
    let growing = src.join("growing.log");
    write(&growing, &rand_bytes(77, 32 << 20));
    write(&src.join("z.txt"), b"steady too");
    cli(&repo, &cache, &["init"], 0);

    // A writer appends to the file for as long as the backup runs.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, growing) = (stop.clone(), growing.clone());
        std::thread::spawn(move || {
            let mut f = fs::OpenOptions::new().append(true).open(&growing).unwrap();
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::io::Write::write_all(&mut f, format!("line {n}\n").as_bytes()).unwrap();
                n += 1;
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let (code, out, err) = run({
        let mut c = common::larder(&repo, &cache);
        c.args(["backup", "--json"]).arg(&src);
        c
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(code, 3, "exit code 3 for a file that changed\n{out}\n{err}");
    assert!(
        err.lines().any(|l| l.starts_with("warning:")
            && l.contains(path_str(&growing))
            && l.contains("changed while it was read")),
        "warning names the path: {err}"
    );
    let summary = json_lines(&out).pop().unwrap();
    let id = summary["snapshot_id"].as_str().unwrap().to_string();
    let target = base.path().join("restored");
    cli(
        &repo,
        &cache,
        &["restore", "-q", &id, "--target", path_str(&target)],
        0,
    );
    let back = target.join(src.strip_prefix("/").unwrap());
    assert_eq!(fs::read(back.join("a.txt")).unwrap(), b"steady");
    assert_eq!(fs::read(back.join("z.txt")).unwrap(), b"steady too");
    let got = fs::read(back.join("growing.log")).unwrap();
    let now = fs::read(&growing).unwrap();
    assert!(
        got.len() >= 32 << 20 && got.len() < now.len(),
        "{} bytes",
        got.len()
    );
    assert!(
        now.starts_with(&got),
        "the stored bytes are a prefix of the file"
    );
}

/// A restore under a low limit on open files (`ulimit -n 256`, soft and
/// hard): a batch holds each of its files and their directories open, so
/// batches shrink to fit and every file of a tree with more files and
/// directories than the limit is restored (with batches of 1,024 files the
/// restore failed with "Too many open files").
#[test]
fn a_restore_fits_a_low_limit_on_open_files() {
    let t = TestRepo::new();
    let repo = t.init();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    for d in 0..300u64 {
        for f in 0..2u64 {
            let body = format!("dir {d} file {f}\n");
            write(&src.join(format!("d{d:03}/f{f}")), body.as_bytes());
        }
    }
    let id = lib_backup(&repo, &[&src]).snapshot_id.unwrap();
    drop(repo);

    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("t");
    let mut cli = common::larder(&t.repo_path(), &t.cache_path());
    cli.args(["restore", &format!("{}:{}", id.to_hex(), path_str(&src))])
        .arg("--target")
        .arg(&target);
    let (code, stdout, err) = run(under_ulimit("-n 256", &cli));
    assert_eq!(code, 0, "{stdout}{err}");
    let files: Vec<String> = list_rel(&target)
        .into_iter()
        .filter(|p| p.contains('/'))
        .collect();
    assert_eq!(files.len(), 600, "{err}");
    for f in &files {
        assert_eq!(
            fs::read(target.join(f)).unwrap(),
            fs::read(src.join(f)).unwrap(),
            "{f}"
        );
    }
}
