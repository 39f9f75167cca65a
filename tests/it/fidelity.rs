//! Exact restores of hostile and exotic trees, compared with independent
//! tools: libarchive's `bsdtar --format=mtree` (type, mode, owner, size,
//! nanosecond mtime, link target, sha256, device numbers, link counts),
//! `getfattr` and `getfacl` dumps, hard link groups, and allocated blocks of
//! sparse files. Root-only parts (devices, foreign owners, `trusted.*`
//! attributes) run where the tests run as root, as CI does.

use crate::common::larder;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

pub(crate) fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

pub(crate) fn sh(dir: &Path, cmd: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn set_mtime(p: &Path, secs: i64, nsec: i64) {
    use nix::sys::stat::{UtimensatFlags, utimensat};
    use nix::sys::time::TimeSpec;
    utimensat(
        nix::fcntl::AT_FDCWD,
        p,
        &TimeSpec::new(secs - 1000, 0),
        &TimeSpec::new(secs, nsec),
        UtimensatFlags::NoFollowSymlink,
    )
    .unwrap();
}

fn write(p: &Path, data: &[u8]) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, data).unwrap();
}

/// Levels of the deep chain (each name 9 bytes plus a slash).
const DEEP_LEVELS: usize = 520;

/// Builds the exotic tree under `root`. Returns the sparse files' paths.
pub(crate) fn build(root: &Path) -> Vec<PathBuf> {
    fs::create_dir_all(root).unwrap();
    // Names: any bytes Linux allows.
    for name in [
        &b"bad\xffname\xfe"[..],
        b"new\nline",
        b"back\\slash",
        b"-leading-dash",
        b" spaces and \ttab ",
        &[b'n'; 255][..],
    ] {
        write(&root.join(OsStr::from_bytes(name)), name);
    }
    // Deep nesting: 520 levels, a path of over 5,000 bytes (more than
    // PATH_MAX), so it has to be built relative to directory descriptors.
    {
        use nix::fcntl::{OFlag, openat};
        use nix::sys::stat::{Mode, mkdirat};
        let m = Mode::from_bits_truncate(0o755);
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
        fs::create_dir_all(root.join("deep")).unwrap();
        let mut fd = openat(
            nix::fcntl::AT_FDCWD,
            &root.join("deep"),
            flags,
            Mode::empty(),
        )
        .unwrap();
        for i in 0..DEEP_LEVELS {
            let name = format!("level{i:04}");
            mkdirat(&fd, name.as_str(), m).unwrap();
            fd = openat(&fd, name.as_str(), flags, Mode::empty()).unwrap();
            if i % 100 == 99 || i == DEEP_LEVELS - 1 {
                let f = openat(
                    &fd,
                    "file.txt",
                    OFlag::O_WRONLY | OFlag::O_CREAT,
                    Mode::from_bits_truncate(0o640),
                )
                .unwrap();
                nix::unistd::write(&f, format!("at level {i}").as_bytes()).unwrap();
            }
        }
    }
    // A directory with 100,000 entries.
    let many = root.join("many");
    fs::create_dir_all(&many).unwrap();
    for i in 0..100_000 {
        fs::File::create(many.join(format!("e{i:06}"))).unwrap();
    }
    // Symlinks of every kind.
    write(&root.join("sub/target.txt"), b"pointed at");
    let sl = |t: &str, l: &str| std::os::unix::fs::symlink(t, root.join(l)).unwrap();
    sl("sub/target.txt", "rel-link");
    sl("/etc/hostname", "abs-link");
    sl("does/not/exist", "dangling");
    sl("loop", "loop");
    sl("sub", "dir-link");
    // Hard link group spanning directories.
    write(&root.join("sub/h1"), b"hard linked content");
    fs::create_dir_all(root.join("other")).unwrap();
    fs::hard_link(root.join("sub/h1"), root.join("other/h2")).unwrap();
    fs::hard_link(root.join("sub/h1"), root.join("h3")).unwrap();
    // FIFO and socket.
    nix::unistd::mkfifo(
        &root.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o640),
    )
    .unwrap();
    let _sock = std::os::unix::net::UnixListener::bind(root.join("socket")).unwrap();
    // Devices, as root.
    if is_root() {
        use nix::sys::stat::{Mode, SFlag, makedev, mknod};
        let m = Mode::from_bits_truncate(0o660);
        let _ = mknod(&root.join("chardev"), SFlag::S_IFCHR, m, makedev(1, 3));
        let _ = mknod(&root.join("blockdev"), SFlag::S_IFBLK, m, makedev(7, 200));
    }
    // Modes.
    write(&root.join("modes/setuid"), b"#!/bin/sh\n");
    fs::set_permissions(
        root.join("modes/setuid"),
        fs::Permissions::from_mode(0o4755),
    )
    .unwrap();
    fs::create_dir_all(root.join("modes/setgid-dir")).unwrap();
    fs::set_permissions(
        root.join("modes/setgid-dir"),
        fs::Permissions::from_mode(0o2775),
    )
    .unwrap();
    fs::create_dir_all(root.join("modes/sticky-dir")).unwrap();
    fs::set_permissions(
        root.join("modes/sticky-dir"),
        fs::Permissions::from_mode(0o1777),
    )
    .unwrap();
    write(&root.join("modes/none"), b"no permissions");
    fs::set_permissions(root.join("modes/none"), fs::Permissions::from_mode(0o000)).unwrap();
    // Owners, as root: numeric-only ids and a named user.
    if is_root() {
        use nix::unistd::{Gid, Uid, chown};
        write(&root.join("owners/numeric"), b"1234:5678");
        chown(
            &root.join("owners/numeric"),
            Some(Uid::from_raw(1234)),
            Some(Gid::from_raw(5678)),
        )
        .unwrap();
        write(&root.join("owners/nobody"), b"nobody");
        if let Ok(Some(u)) = nix::unistd::User::from_name("nobody") {
            chown(&root.join("owners/nobody"), Some(u.uid), Some(u.gid)).unwrap();
        }
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            &root.join("rel-link"),
            Some(Uid::from_raw(4321)),
            Some(Gid::from_raw(8765)),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .unwrap();
    }
    // Extended attributes and ACLs.
    write(&root.join("xattrs/file"), b"with attributes");
    xattr::set(
        root.join("xattrs/file"),
        "user.comment",
        b"hello\0binary\xff",
    )
    .unwrap();
    xattr::set(root.join("xattrs"), "user.dir", b"on a directory").unwrap();
    if is_root() {
        xattr::set(root.join("xattrs/file"), "trusted.larder", b"trusted value").unwrap();
        let _ = xattr::set(
            root.join("xattrs/file"),
            "security.larder",
            b"security value",
        );
    }
    if have("setfacl") {
        write(&root.join("acl/file"), b"acl");
        sh(
            root,
            "setfacl -m u:nobody:r-- acl/file && setfacl -d -m u:nobody:r-x acl && setfacl -m u:nobody:rwx acl",
        );
    }
    // Content: empty, all zeros (written), sparse, larger than 4 GiB.
    write(&root.join("content/empty"), b"");
    write(&root.join("content/zeros"), &vec![0u8; 3 << 20]);
    let sparse = root.join("content/sparse");
    {
        use std::os::unix::fs::FileExt;
        let f = fs::File::create(&sparse).unwrap();
        f.set_len(100 << 20).unwrap();
        f.write_all_at(b"data at the start", 0).unwrap();
        f.write_all_at(b"data in the middle", 50 << 20).unwrap();
    }
    let huge = root.join("content/over-4GiB");
    {
        use std::os::unix::fs::FileExt;
        let f = fs::File::create(&huge).unwrap();
        f.set_len((4u64 << 30) + (3 << 20)).unwrap();
        f.write_all_at(b"head", 0).unwrap();
        f.write_all_at(&[7u8; 100_000], (4u64 << 30) + (1 << 20))
            .unwrap();
    }
    // Nanosecond times, set last (children first so parents keep theirs).
    set_mtime(&root.join("sub/target.txt"), 1_600_000_000, 123_456_789);
    set_mtime(&root.join("rel-link"), 1_500_000_000, 999_999_999);
    set_mtime(&root.join("content/empty"), 1, 1);
    set_mtime(&root.join("modes/sticky-dir"), 1_700_000_000, 42);
    vec![sparse, huge]
}

/// `bsdtar` mtree lines below `dir`, without `.` and sockets, sorted.
pub(crate) fn mtree(dir: &Path) -> BTreeSet<String> {
    sh(dir, "bsdtar -cf - --format=mtree --options='mtree:sha256,mtree:nlink,mtree:device,mtree:!flags' .")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with(". ") && !l.contains("type=socket"))
        .map(String::from)
        .collect()
}

/// A recursive dump (`getfattr`/`getfacl`) as a map from path to its lines.
pub(crate) fn dump_blocks(dir: &Path, cmd: &str) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for block in sh(dir, cmd).split("\n\n") {
        let mut lines = block.lines().filter(|l| !l.is_empty());
        let Some(head) = lines.next() else { continue };
        let mut rest: Vec<String> = lines.map(String::from).collect();
        rest.sort();
        // The root is the target itself; sockets are not restored by design.
        if head != "# file: ." && head != "# file: ./socket" {
            out.insert(head.to_string(), rest);
        }
    }
    out
}

/// Hard link groups: sets of relative paths sharing an inode.
pub(crate) fn link_groups(dir: &Path) -> BTreeSet<BTreeSet<PathBuf>> {
    let mut by_ino: HashMap<(u64, u64), BTreeSet<PathBuf>> = HashMap::new();
    for e in walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
    {
        let Ok(md) = e.metadata() else { continue };
        if md.is_file() && md.nlink() > 1 {
            by_ino
                .entry((md.dev(), md.ino()))
                .or_default()
                .insert(e.path().strip_prefix(dir).unwrap().to_path_buf());
        }
    }
    by_ino.into_values().collect()
}

/// Every file and directory below `dir` (listed once: listing a directory
/// moves its atime, so the atime checks below only stat these paths).
fn files_and_dirs(dir: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file() || e.file_type().is_dir())
        .map(|e| e.into_path())
        // Beyond PATH_MAX a path cannot be stat'ed by name; mtree covers those.
        .filter(|p| p.as_os_str().len() < 4000)
        .collect()
}

/// Sets the atime of each path to the distant past, so any read under
/// `relatime` would move it.
fn age_atimes(paths: &[PathBuf]) {
    use nix::sys::stat::{UtimensatFlags, utimensat};
    use nix::sys::time::TimeSpec;
    for p in paths {
        utimensat(
            nix::fcntl::AT_FDCWD,
            p,
            &TimeSpec::new(1_000_000, 0),
            &TimeSpec::UTIME_OMIT,
            UtimensatFlags::NoFollowSymlink,
        )
        .unwrap();
    }
}

/// Access times of `paths`, by `lstat` alone.
fn atimes(paths: &[PathBuf]) -> BTreeMap<PathBuf, (i64, i64)> {
    paths
        .iter()
        .map(|p| {
            let m = fs::symlink_metadata(p).unwrap();
            (p.clone(), (m.atime(), m.atime_nsec()))
        })
        .collect()
}

/// Asserts two dumps are equal, showing only the entries that differ.
pub(crate) fn assert_same(
    a: &BTreeMap<String, Vec<String>>,
    b: &BTreeMap<String, Vec<String>>,
    what: &str,
) {
    let diff: Vec<_> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .take(5)
        .map(|k| (k, a.get(k), b.get(k)))
        .collect();
    assert!(
        diff.is_empty(),
        "{what} differ (source, restore): {diff:#?}"
    );
}

#[test]
fn exotic_tree_restores_exactly() {
    if !have("bsdtar") {
        eprintln!("skipping: bsdtar (libarchive-tools) is not installed; .ci/run installs it");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let src = base.path().join("src");
    let sparse = build(&src);
    // bsdtar reads every file (and so moves atimes): list first, then note atimes.
    let src_mtree = mtree(&src);
    let listed = files_and_dirs(&src);
    age_atimes(&listed);
    let before_atimes = atimes(&listed);
    let run = |args: &[&OsStr]| {
        let out = larder(&repo, &cache).args(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, err) = run(&[OsStr::new("init")]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(&[OsStr::new("backup"), OsStr::new("--json"), src.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    let summary: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    // The sparse >4 GiB file is not read as 4 GiB of stored data.
    assert!(
        summary["data_added"].as_u64().unwrap() < 40 << 20,
        "{summary}"
    );

    // Reading the source did not touch it: no atime moved, nothing changed.
    let after_atimes = atimes(&listed);
    let moved: Vec<_> = before_atimes
        .iter()
        .filter(|(p, t)| after_atimes.get(*p) != Some(t))
        .take(5)
        .collect();
    assert!(moved.is_empty(), "backup changed access times: {moved:?}");
    assert_eq!(mtree(&src), src_mtree, "backup changed the source");

    let target = base.path().join("restore");
    let spec = format!("latest:{}", src.display());
    let (code, _, err) = run(&[
        OsStr::new("restore"),
        OsStr::new(&spec),
        OsStr::new("--target"),
        target.as_os_str(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("socket") && err.contains("skipped"),
        "sockets are noted: {err}"
    );

    let restored = mtree(&target);
    let missing: Vec<_> = src_mtree.difference(&restored).take(10).collect();
    let extra: Vec<_> = restored.difference(&src_mtree).take(10).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "mtree differs:\nsource only: {missing:#?}\nrestore only: {extra:#?}"
    );
    assert!(
        src_mtree.len() > 100_500,
        "the comparison saw {} entries",
        src_mtree.len()
    );
    if is_root() {
        assert!(
            restored
                .iter()
                .any(|l| l.contains("type=char") && l.contains("device=")),
            "char device compared"
        );
        assert!(restored.iter().any(|l| l.starts_with("./owners/numeric")
            && l.contains("uid=1234")
            && l.contains("gid=5678")));
    }

    if have("getfattr") {
        // Both tools fail past PATH_MAX (the deep chain, which holds no
        // attributes): their exit status is ignored, their output compared.
        let cmd = "getfattr -R -d -m - -h --absolute-names -e hex . 2>/dev/null; true";
        let (a, b) = (dump_blocks(&src, cmd), dump_blocks(&target, cmd));
        assert_same(&a, &b, "extended attributes");
        assert!(a.keys().any(|k| k.contains("xattrs/file")), "{a:?}");
        if is_root() {
            assert!(
                a.values()
                    .flatten()
                    .any(|l| l.starts_with("trusted.larder")),
                "{a:?}"
            );
        }
    }
    if have("getfacl") {
        let cmd = "getfacl -R -p -P . 2>/dev/null; true";
        let (a, b) = (dump_blocks(&src, cmd), dump_blocks(&target, cmd));
        assert_same(&a, &b, "ACLs");
        assert!(
            a.values().flatten().any(|l| l == "default:user:nobody:r-x"),
            "{a:?}"
        );
    }
    assert_eq!(link_groups(&src), link_groups(&target));
    assert_eq!(link_groups(&target).iter().map(|g| g.len()).max(), Some(3));
    for s in &sparse {
        let rel = s.strip_prefix(&src).unwrap();
        let (a, b) = (
            fs::metadata(s).unwrap(),
            fs::metadata(target.join(rel)).unwrap(),
        );
        assert_eq!(a.len(), b.len());
        assert!(
            b.blocks() * 512 <= a.blocks() * 512 + (2 << 20),
            "{}: restored {} bytes allocated, source {}",
            rel.display(),
            b.blocks() * 512,
            a.blocks() * 512
        );
    }
    // The deep chain came back whole, down to its last file (by bsdtar too).
    let deep_files: Vec<usize> = restored
        .iter()
        .filter(|l| l.starts_with("./deep/") && l.contains("file.txt"))
        .map(|l| l.split(' ').next().unwrap_or("").len())
        .collect();
    assert_eq!(deep_files.len(), DEEP_LEVELS / 100 + 1, "{deep_files:?}");
    assert!(deep_files.iter().any(|&n| n > 5000), "{deep_files:?}");
}

#[test]
fn unreadable_and_vanishing_files_are_reported() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let src = base.path().join("src");
    write(&src.join("ok.txt"), b"fine");
    write(&src.join("locked/inner.txt"), b"behind a locked directory");
    let out = larder(&repo, &cache).arg("init").output().unwrap();
    assert!(out.status.success());
    // Root reads everything; as root, drop to an unprivileged user instead.
    fs::set_permissions(src.join("locked"), fs::Permissions::from_mode(0o000)).unwrap();
    let mut cmd = larder(&repo, &cache);
    cmd.arg("backup").arg(&src);
    if is_root() {
        use std::os::unix::process::CommandExt;
        sh(base.path(), "chown -R 65534:65534 .");
        cmd.uid(65534).gid(65534);
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("locked"),
        "the unreadable directory is named: {err}"
    );
    assert!(!err.contains("ok.txt"), "{err}");
}

/// An unchanged inode reuses its recorded attributes without reading them;
/// setting an attribute moves the ctime, so the next backup sees it.
#[test]
fn changed_xattr_is_seen_by_the_next_backup() {
    use larder::archiver::{BackupOptions, backup};
    use larder::progress::NoProgress;
    let t = crate::common::TestRepo::new();
    let repo = t.init();
    let src = t.dir.path().join("src");
    write(&src.join("f"), b"content");
    xattr::set(src.join("f"), "user.v", b"one").unwrap();
    let opts = BackupOptions {
        paths: vec![src.clone()],
        ..Default::default()
    };
    let first = backup(&repo, &opts, &NoProgress).unwrap();
    let attr_of = |snap: larder::Id| {
        let s = larder::snapshot::load(&repo, &snap.to_hex()).unwrap();
        let tree = larder::walker::tree_at(&repo, s.tree, &src.to_string_lossy()).unwrap();
        let t = repo.load_tree(&tree).unwrap();
        t.find(b"f").unwrap().xattrs.clone()
    };
    assert_eq!(attr_of(first.snapshot_id.unwrap())[0].value, b"one");
    // Unchanged: reused, same tree.
    let second = backup(&repo, &opts, &NoProgress).unwrap();
    assert_eq!(second.summary.files_unmodified, 1);
    assert_eq!(attr_of(second.snapshot_id.unwrap())[0].value, b"one");
    // Changed attribute only (content and mtime untouched).
    std::thread::sleep(std::time::Duration::from_millis(20));
    xattr::set(src.join("f"), "user.v", b"two").unwrap();
    let third = backup(&repo, &opts, &NoProgress).unwrap();
    assert_eq!(attr_of(third.snapshot_id.unwrap())[0].value, b"two");
}

/// A directory whose mode takes its owner's search permission away gets
/// that mode only after everything below it has its metadata, so a restore
/// by that owner completes. Root builds the tree (no user can back up a
/// directory it cannot search) and restores it as an unprivileged user,
/// whom no permission check lets through; elsewhere this test has nothing
/// to run.
#[test]
fn a_closed_directory_is_restored_by_its_owner() {
    use std::os::unix::process::CommandExt;
    if !is_root() {
        eprintln!("skipped: only root can back up a directory its owner cannot search");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let (src, target) = (base.path().join("src"), base.path().join("out"));
    write(
        &src.join("closed/inner/deep/f.txt"),
        b"below a closed directory",
    );
    write(&src.join("shut/sub/g.txt"), b"below a shut directory");
    set_mtime(&src.join("closed/inner/deep"), 1_600_000_000, 5);
    set_mtime(&src.join("closed/inner"), 1_600_000_100, 7);
    set_mtime(&src.join("shut/sub"), 1_600_000_200, 9);
    let mode = |p: &str, m: u32| fs::set_permissions(src.join(p), fs::Permissions::from_mode(m));
    mode("closed/inner", 0o700).unwrap();
    mode("closed", 0o600).unwrap(); // listable, not searchable
    mode("shut", 0o000).unwrap();
    sh(base.path(), "chown -R 65534:65534 src");
    crate::faults::larder_ok(&repo, &cache, &["init"]);
    crate::faults::backup_ok(&repo, &cache, &src);
    // The user reads the repository, writes its lock and shares the cache.
    sh(
        base.path(),
        "chmod -R a+rwX repo cache && (! test -d larder-state || chmod -R a+rwX larder-state) && chmod 0777 .",
    );
    let out = larder(&repo, &cache)
        .arg("restore")
        .arg(format!("latest:{}", src.display()))
        .arg("--target")
        .arg(&target)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("denied"), "{err}");
    // Checked as root, who searches every directory.
    for (rel, want) in [
        ("closed", Some(0o600)),
        ("closed/inner", Some(0o700)),
        ("shut", Some(0o000)),
        ("closed/inner/deep", None),
    ] {
        let (a, b) = (
            fs::symlink_metadata(src.join(rel)).unwrap(),
            fs::symlink_metadata(target.join(rel)).unwrap(),
        );
        assert_eq!(b.mode() & 0o7777, a.mode() & 0o7777, "{rel}");
        if let Some(m) = want {
            assert_eq!(a.mode() & 0o7777, m, "{rel} in the source");
        }
        assert_eq!((b.uid(), b.gid()), (65534, 65534), "{rel}");
    }
    for rel in ["closed/inner/deep", "closed/inner", "shut/sub"] {
        let (a, b) = (
            fs::symlink_metadata(src.join(rel)).unwrap(),
            fs::symlink_metadata(target.join(rel)).unwrap(),
        );
        assert_eq!(
            (b.mtime(), b.mtime_nsec()),
            (a.mtime(), a.mtime_nsec()),
            "{rel}"
        );
    }
    assert_eq!(
        fs::read(target.join("closed/inner/deep/f.txt")).unwrap(),
        b"below a closed directory"
    );
    assert_eq!(
        fs::read(target.join("shut/sub/g.txt")).unwrap(),
        b"below a shut directory"
    );
}

/// Restores a root-owned tree of nested directories into `target` (made
/// by `prepare`, which must make the kernel give new entries there group
/// 65534) and checks that every entry at every depth ends with the group
/// and mode the snapshot recorded.
fn groups_are_not_handed_down(base: &Path, target: &Path, prepare: &str) {
    let (repo, cache, src) = (base.join("repo"), base.join("cache"), base.join("src"));
    write(&src.join("top.txt"), b"top");
    write(&src.join("a/one.txt"), b"one");
    write(&src.join("a/b/two.txt"), b"two");
    write(&src.join("a/b/c/three.txt"), b"three");
    sh(base, "chown -R 0:0 src");
    sh(base, prepare);
    crate::faults::larder_ok(&repo, &cache, &["init"]);
    crate::faults::backup_ok(&repo, &cache, &src);
    // What the kernel does without larder: a directory made in the target
    // takes the group 65534.
    fs::create_dir(target.join("probe")).unwrap();
    assert_eq!(fs::metadata(target.join("probe")).unwrap().gid(), 65534);
    let out = larder(&repo, &cache)
        .arg("restore")
        .arg(format!("latest:{}", src.display()))
        .arg("--target")
        .arg(target)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    for rel in [
        "top.txt",
        "a",
        "a/one.txt",
        "a/b",
        "a/b/two.txt",
        "a/b/c",
        "a/b/c/three.txt",
    ] {
        let (a, b) = (
            fs::symlink_metadata(src.join(rel)).unwrap(),
            fs::symlink_metadata(target.join(rel)).unwrap(),
        );
        assert_eq!((b.uid(), b.gid()), (0, 0), "{rel}");
        assert_eq!(b.mode(), a.mode(), "{rel}");
    }
    assert_eq!(fs::read(target.join("a/b/c/three.txt")).unwrap(), b"three");
}

/// A restore into a directory whose set-group-ID bit hands its group to
/// what is made in it: every restored entry ends with the group the
/// snapshot recorded, at every depth (the directories the restore makes
/// are owner-only, without that bit, until their own metadata is applied).
/// Root only: a user can give a directory only a group of its own.
#[test]
fn a_set_group_id_target_hands_no_group_down() {
    if !is_root() {
        eprintln!("skipped: only root can give the target a group it is not in");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let target = base.path().join("out");
    groups_are_not_handed_down(
        base.path(),
        &target,
        "mkdir out && chown 0:65534 out && chmod 2777 out",
    );
}

/// Unmounts a test's filesystem however the test ends.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// On a filesystem mounted `grpid` every new entry takes its directory's
/// group, set-group-ID bit or not, down the whole tree the restore makes.
/// Root only (it mounts an ext4 image through a loop device); where the
/// image cannot be made or mounted, it says so and has nothing to run.
#[test]
fn a_grpid_filesystem_hands_no_group_down() {
    if !is_root() || !have("mkfs.ext4") {
        eprintln!("skipped: needs root and mkfs.ext4 to mount an ext4 image with grpid");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let (image, mnt) = (base.path().join("fs.img"), base.path().join("mnt"));
    fs::create_dir(&mnt).unwrap();
    sh(
        base.path(),
        "truncate -s 16M fs.img && mkfs.ext4 -q -F fs.img",
    );
    let mounted = Command::new("mount")
        .arg("-o")
        .arg("loop,grpid")
        .arg(&image)
        .arg(&mnt)
        .output()
        .unwrap();
    if !mounted.status.success() {
        eprintln!(
            "skipped: cannot mount an ext4 image here: {}",
            String::from_utf8_lossy(&mounted.stderr)
        );
        return;
    }
    let _unmount = Mounted(mnt.clone());
    let target = mnt.join("out");
    groups_are_not_handed_down(
        base.path(),
        &target,
        &format!("mkdir {0} && chown 0:65534 {0}", target.display()),
    );
}
