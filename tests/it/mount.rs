//! `larder mount`: the mounted view of a snapshot of a tree with hostile
//! names reads the same bytes and metadata as a restore of that snapshot
//! (modes, owners, nanosecond mtimes, sizes, symlink targets, extended
//! attributes), `latest` links resolve to the newest snapshot, and SIGTERM
//! unmounts and exits 0. Where /dev/fuse cannot be used (no device, no
//! permission), the test prints why and returns.

use crate::common::larder;
use crate::support::{cli, rand_bytes};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Why FUSE cannot be used here, if it cannot.
fn fuse_unusable() -> Option<String> {
    match fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        Ok(_) => None,
        Err(e) => Some(format!("/dev/fuse cannot be opened: {e}")),
    }
}

/// Unmounts (lazily) and kills the mount process if a test ends early.
struct MountGuard {
    child: Option<Child>,
    at: PathBuf,
}

impl Drop for MountGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            for tool in ["fusermount3", "fusermount"] {
                let _ = std::process::Command::new(tool)
                    .args(["-u", "-z"])
                    .arg(&self.at)
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

fn is_mounted(at: &Path) -> bool {
    let at = fs::canonicalize(at).unwrap_or(at.to_path_buf());
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(at.to_str().unwrap_or("")))
}

/// The tree: hostile names, modes, symlinks, xattrs, times, a multi-chunk file.
fn build(root: &Path) {
    let w = |rel: &[u8], data: &[u8]| {
        let p = root.join(OsStr::from_bytes(rel));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
    };
    for name in [
        &b"bad\xffname\xfe"[..],
        b"new\nline",
        b"back\\slash",
        b"-leading-dash",
        b" spaces and \ttab ",
        &[b'n'; 255][..],
        b"dir with space/caf\xc3\xa9 \xe2\x9c\x93",
    ] {
        w(name, name);
    }
    w(b"big.bin", &rand_bytes(7, 1_500_000));
    w(b"empty", b"");
    w(b"sub/target.txt", b"pointed at");
    let sl = |t: &str, l: &str| std::os::unix::fs::symlink(t, root.join(l)).unwrap();
    sl("sub/target.txt", "rel-link");
    sl("/etc/hostname", "abs-link");
    sl("does/not/exist", "dangling");
    sl("loop", "loop");
    sl("sub", "dir-link");
    for (name, mode) in [("m0400", 0o400), ("m4755", 0o4755), ("m0000", 0o000)] {
        w(name.as_bytes(), name.as_bytes());
        fs::set_permissions(root.join(name), fs::Permissions::from_mode(mode)).unwrap();
    }
    fs::create_dir_all(root.join("sticky")).unwrap();
    fs::set_permissions(root.join("sticky"), fs::Permissions::from_mode(0o1777)).unwrap();
    w(b"xattrs/file", b"with attributes");
    xattr::set(root.join("xattrs/file"), "user.plain", b"value").unwrap();
    xattr::set(root.join("xattrs/file"), "user.binary", &[0, 1, 255, 10]).unwrap();
    xattr::set(root.join("xattrs"), "user.on-dir", b"d").unwrap();
    if nix::unistd::geteuid().is_root() {
        w(b"owners/numeric", b"owned");
        std::os::unix::fs::lchown(root.join("owners/numeric"), Some(1234), Some(5678)).unwrap();
    }
    nix::unistd::mkfifo(
        &root.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o640),
    )
    .unwrap();
    set_mtime(&root.join("empty"), 1, 1);
    set_mtime(&root.join("big.bin"), 1_700_000_000, 123_456_789);
}

fn set_mtime(p: &Path, secs: i64, nsec: i64) {
    use nix::sys::stat::{UtimensatFlags, utimensat};
    use nix::sys::time::TimeSpec;
    utimensat(
        nix::fcntl::AT_FDCWD,
        p,
        &TimeSpec::new(secs, 0),
        &TimeSpec::new(secs, nsec),
        UtimensatFlags::NoFollowSymlink,
    )
    .unwrap();
}

/// Everything compared, by relative path: type, mode, owner, mtime, size,
/// symlink target, content and extended attributes (directories' sizes
/// and times differ by filesystem and are left out of the comparison).
fn describe(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(root).min_depth(1) {
        let e = e.unwrap();
        let p = e.path();
        let md = fs::symlink_metadata(p).unwrap();
        let ft = md.file_type();
        let mut d = format!(
            "mode={:o} uid={} gid={}",
            md.mode() & 0o7777,
            md.uid(),
            md.gid()
        );
        if ft.is_symlink() {
            d += &format!(" link={:?}", fs::read_link(p).unwrap());
        } else if ft.is_file() {
            let data = fs::read(p).unwrap();
            d += &format!(
                " file size={} mtime={}.{:09} blake3={}",
                md.len(),
                md.mtime(),
                md.mtime_nsec(),
                blake3::hash(&data).to_hex()
            );
        } else if ft.is_dir() {
            d += " dir";
        } else {
            d += &format!(" other mtime={}.{:09}", md.mtime(), md.mtime_nsec());
        }
        if !ft.is_symlink() {
            let mut names: Vec<_> = xattr::list(p).unwrap().collect();
            names.sort();
            for n in names {
                let v = xattr::get(p, &n).unwrap().unwrap_or_default();
                d += &format!(" xattr:{n:?}={v:?}");
            }
        }
        out.insert(p.strip_prefix(root).unwrap().to_path_buf(), d);
    }
    out
}

/// Starts `larder mount` and waits for the view to appear; `None` (after
/// printing why) when FUSE refused the mount.
fn start_mount(repo: &Path, cache: &Path, mnt: &Path) -> Option<MountGuard> {
    let child = larder(repo, cache)
        .arg("mount")
        .arg(mnt)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut g = MountGuard {
        child: Some(child),
        at: mnt.to_path_buf(),
    };
    let start = Instant::now();
    while !mnt.join("snapshots").exists() {
        let c = g.child.as_mut().unwrap();
        if let Some(st) = c.try_wait().unwrap() {
            let out = g.child.take().unwrap().wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            if err.contains("Operation not permitted") || err.contains("Permission denied") {
                eprintln!("skipping: FUSE mounts are not permitted here: {err}");
                return None;
            }
            panic!("larder mount exited with {st} before mounting: {err}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the mount did not appear"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(g)
}

#[test]
fn mounted_snapshot_reads_as_its_restore() {
    if let Some(why) = fuse_unusable() {
        eprintln!("skipping: {why}");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let src = base.path().join("src");
    build(&src);
    let s = src.to_str().unwrap();
    cli(&repo, &cache, &["init"], 0);
    cli(&repo, &cache, &["backup", "--tag", "first", s], 0);
    // The second snapshot differs, so `latest` must pick it.
    fs::write(src.join("sub/target.txt"), b"changed after the first").unwrap();
    fs::write(src.join("added"), b"only in the second").unwrap();
    cli(&repo, &cache, &["backup", s], 0);
    let target = base.path().join("restore");
    let spec = format!("latest:{s}");
    cli(
        &repo,
        &cache,
        &["restore", &spec, "--target", target.to_str().unwrap()],
        0,
    );

    let mnt = base.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let Some(mut guard) = start_mount(&repo, &cache, &mnt) else {
        return;
    };
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&mnt), ["hosts", "ids", "snapshots", "tags"]);
    let snaps = names(&mnt.join("snapshots"));
    assert_eq!(snaps.len(), 3, "{snaps:?}");
    assert_eq!(snaps[2], "latest");
    let latest = fs::read_link(mnt.join("snapshots/latest")).unwrap();
    assert_eq!(latest, Path::new(&snaps[1]), "latest names the newest");
    let rel = src.strip_prefix("/").unwrap();
    let view = mnt.join("snapshots/latest").join(rel);
    assert_eq!(
        fs::read(view.join("sub/target.txt")).unwrap(),
        b"changed after the first"
    );
    let first = mnt.join("snapshots").join(&snaps[0]).join(rel);
    assert_eq!(
        fs::read(first.join("sub/target.txt")).unwrap(),
        b"pointed at"
    );
    assert!(!first.join("added").exists());
    assert_eq!(names(&mnt.join("tags")), ["first"]);
    assert_eq!(names(&mnt.join("tags/first")).len(), 2);
    assert_eq!(names(&mnt.join("ids")).len(), 2);
    let host = names(&mnt.join("hosts"));
    assert_eq!(host.len(), 1);
    let via_host = mnt.join("hosts").join(&host[0]).join("latest").join(rel);

    let (want, got) = (describe(&target), describe(&view));
    let diff: Vec<_> = want
        .keys()
        .chain(got.keys())
        .filter(|k| want.get(*k) != got.get(*k))
        .take(5)
        .map(|k| (k, want.get(k), got.get(k)))
        .collect();
    assert!(diff.is_empty(), "restore and mount differ: {diff:#?}");
    assert!(want.len() >= 25, "compared {} entries", want.len());
    assert!(
        want.values().any(|d| d.contains("user.binary")),
        "xattrs compared: {want:#?}"
    );
    assert_eq!(
        describe(&via_host),
        got,
        "hosts/<host>/latest is the same view"
    );
    // A read from the middle of the multi-chunk file, as the kernel asks it.
    {
        use std::os::unix::fs::FileExt;
        let f = fs::File::open(view.join("big.bin")).unwrap();
        let mut buf = vec![0u8; 100_000];
        f.read_exact_at(&mut buf, 700_001).unwrap();
        assert_eq!(buf, rand_bytes(7, 1_500_000)[700_001..800_001]);
    }
    // Nothing can be written.
    assert!(fs::write(view.join("new-file"), b"x").is_err());

    let locks = || {
        fs::read_dir(repo.join("locks"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert_eq!(locks(), 1, "the mount holds a shared lock");

    let mut child = guard.child.take().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "larder mount exits 0 on SIGTERM");
    assert!(!is_mounted(&mnt), "unmounted");
    assert_eq!(
        fs::read_dir(&mnt).unwrap().count(),
        0,
        "the mountpoint is empty again"
    );
    assert_eq!(locks(), 0, "its lock went with it");
    drop(guard);
}
