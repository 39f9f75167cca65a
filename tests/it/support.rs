//! Helpers shared by the integration tests that run backups and restores:
//! deterministic data, tree comparison, running the CLI.

#![allow(dead_code)]

use crate::common::{self};
use larder::Id;
use larder::archiver::{BackupOptions, BackupResult, backup};
use larder::pack::BlobType;
use larder::progress::NoProgress;
use larder::repository::Repository;
use larder::restorer::{Overwrite, RestoreOptions, RestoreReport, restore};
use larder::snapshot::{self, Snapshot};
use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

// ---------------------------------------------------------------- helpers

/// Deterministic pseudo-random bytes (splitmix64): incompressible, and
/// different seeds share no chunks.
pub fn rand_bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        out.extend_from_slice(&z.to_le_bytes());
    }
    out.truncate(n);
    out
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

pub fn write(p: &Path, data: &[u8]) {
    if let Some(d) = p.parent() {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(p, data).unwrap();
}

pub fn set_mode(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

/// Sets atime and mtime of `p` (not following a symlink) to `ns`.
pub fn set_mtime(p: &Path, ns: i64) {
    use nix::sys::stat::{UtimensatFlags, utimensat};
    use nix::sys::time::TimeSpec;
    let ts = TimeSpec::new(ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
    utimensat(
        nix::fcntl::AT_FDCWD,
        p,
        &ts,
        &ts,
        UtimensatFlags::NoFollowSymlink,
    )
    .unwrap();
}

pub fn mtime_ns(md: &fs::Metadata) -> i64 {
    md.mtime() * 1_000_000_000 + md.mtime_nsec()
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("test paths are UTF-8")
}

pub fn lib_backup(repo: &Repository, paths: &[&Path]) -> BackupResult {
    backup(
        repo,
        &BackupOptions {
            paths: paths.iter().map(|p| p.to_path_buf()).collect(),
            ..Default::default()
        },
        &NoProgress,
    )
    .unwrap()
}

/// Flips one byte inside the stored bytes of blob `blob` (its pack made
/// writable first); returns the name of the pack.
pub fn flip_blob_byte(t: &common::TestRepo, repo: &Repository, blob: &Id) -> String {
    use std::os::unix::fs::FileExt;
    let loc = repo.lookup(blob).unwrap().unwrap();
    assert!(loc.entry.stored_len > 40);
    let hex = loc.pack.to_hex();
    let pack = t.repo_path().join("packs").join(&hex[..2]).join(&hex);
    set_mode(&pack, 0o644);
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&pack)
        .unwrap();
    let mut byte = [0u8; 1];
    let at = loc.entry.offset + 30;
    f.read_exact_at(&mut byte, at).unwrap();
    f.write_all_at(&[byte[0] ^ 0xff], at).unwrap();
    hex
}

pub fn load_snap(repo: &Repository, id: &Id) -> Snapshot {
    snapshot::load(repo, &id.to_hex()).unwrap()
}

pub fn restore_opts(target: &Path, overwrite: Overwrite) -> RestoreOptions {
    RestoreOptions {
        target: target.to_path_buf(),
        include: vec![],
        exclude: vec![],
        iinclude: vec![],
        iexclude: vec![],
        dry_run: false,
        overwrite,
        numeric_owner: false,
        delete: false,
        verify: false,
        include_xattr: vec![],
        exclude_xattr: vec![],
    }
}

/// Restores the subtree `sub` of snapshot `id` into `target`.
pub fn lib_restore(repo: &Repository, id: &Id, sub: &Path, target: &Path) -> RestoreReport {
    let snap = load_snap(repo, id);
    restore(
        repo,
        &snap,
        Some(path_str(sub)),
        &restore_opts(target, Overwrite::Never),
    )
    .unwrap()
}

/// Every path below `root` (relative, `/`-separated), recursively, not
/// following symlinks.
pub fn list_rel(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    fn rec(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            out.insert(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            if e.file_type().unwrap().is_dir() {
                rec(root, &p, out);
            }
        }
    }
    rec(root, root, &mut out);
    out
}

pub fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Compares every entry below `a` with the same entry below `b`: type,
/// permission bits, size, nanosecond mtime, bytes, link target, and owner
/// when running as root. Returns how many entries were compared.
pub fn assert_same_tree(a: &Path, b: &Path) -> usize {
    let mut names_a: Vec<_> = fs::read_dir(a)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let mut names_b: Vec<_> = fs::read_dir(b)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names_a.sort();
    names_b.sort();
    assert_eq!(
        names_a,
        names_b,
        "entries of {} vs {}",
        a.display(),
        b.display()
    );
    let mut n = 0;
    for name in names_a {
        let (pa, pb) = (a.join(&name), b.join(&name));
        let (ma, mb) = (
            fs::symlink_metadata(&pa).unwrap(),
            fs::symlink_metadata(&pb).unwrap(),
        );
        let what = pb.display().to_string();
        let (fa, fb) = (ma.file_type(), mb.file_type());
        assert_eq!(
            (fa.is_file(), fa.is_dir(), fa.is_symlink(), fa.is_fifo()),
            (fb.is_file(), fb.is_dir(), fb.is_symlink(), fb.is_fifo()),
            "type of {what}"
        );
        if !fa.is_symlink() {
            assert_eq!(ma.mode() & 0o7777, mb.mode() & 0o7777, "mode of {what}");
        }
        assert_eq!(mtime_ns(&ma), mtime_ns(&mb), "mtime of {what}");
        if is_root() {
            assert_eq!(
                (ma.uid(), ma.gid()),
                (mb.uid(), mb.gid()),
                "owner of {what}"
            );
        }
        if fa.is_file() {
            assert_eq!(ma.len(), mb.len(), "size of {what}");
            assert!(
                fs::read(&pa).unwrap() == fs::read(&pb).unwrap(),
                "content of {what}"
            );
        }
        if fa.is_symlink() {
            assert_eq!(
                fs::read_link(&pa).unwrap(),
                fs::read_link(&pb).unwrap(),
                "target of {what}"
            );
        }
        n += 1;
        if fa.is_dir() {
            n += assert_same_tree(&pa, &pb);
        }
    }
    n
}

/// Pack ids currently known to the index.
pub fn pack_ids(repo: &Repository) -> HashSet<Id> {
    repo.index()
        .unwrap()
        .packs()
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect()
}

/// (data blobs, tree blobs) in packs that are not in `before`.
pub fn new_blobs(repo: &Repository, before: &HashSet<Id>) -> (usize, usize) {
    let (mut data, mut trees) = (0, 0);
    for p in pack_ids(repo).difference(before) {
        for e in repo.index().unwrap().blobs_in_pack(p).unwrap() {
            match e.ty {
                BlobType::Data => data += 1,
                _ => trees += 1,
            }
        }
    }
    (data, trees)
}

/// Runs a command; returns (exit code, stdout, stderr).
/// Gives `c` the environment changes of `base` (a [`common::larder`]
/// command: repository, password, cache), for a command that runs larder
/// through another program.
pub fn env_of(c: &mut Command, base: &Command) {
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
}

/// `base` (a larder command) run by `sh` after `ulimit ULIMIT` (for
/// example `-n 256`, which sets the soft and hard limits).
pub fn under_ulimit(ulimit: &str, base: &Command) -> Command {
    let mut c = Command::new("/bin/sh");
    c.arg("-c")
        .arg(format!("ulimit {ulimit} && exec \"$0\" \"$@\""))
        .arg(base.get_program())
        .args(base.get_args());
    env_of(&mut c, base);
    c
}

pub fn run(mut c: Command) -> (i32, String, String) {
    let out = c.stdin(Stdio::null()).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `larder ARGS` against a repository; panics unless the exit code is `want`.
pub fn cli(repo: &Path, cache: &Path, args: &[&str], want: i32) -> (String, String) {
    let mut c = common::larder(repo, cache);
    c.args(args);
    let (code, out, err) = run(c);
    assert_eq!(
        code, want,
        "larder {args:?} exited {code}\nstdout:\n{out}\nstderr:\n{err}"
    );
    (out, err)
}

pub fn json_lines(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

/// Copies a directory tree with its metadata (`cp -a`) to `to`, which must
/// not exist.
pub fn copy_tree(from: &Path, to: &Path) {
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a {} {}", from.display(), to.display());
}

/// Names of the complete pack files (64-hex names) under `repo/packs`.
pub fn pack_names(repo: &Path) -> std::collections::BTreeSet<String> {
    walkdir::WalkDir::new(repo.join("packs"))
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit()))
        .collect()
}

/// Total bytes of complete pack files (64-hex names) under `repo/packs`.
pub fn pack_files(repo: &Path) -> (usize, u64) {
    let (mut n, mut bytes) = (0, 0);
    let Ok(rd) = fs::read_dir(repo.join("packs")) else {
        return (0, 0);
    };
    for sub in rd {
        let sub = sub.unwrap();
        if !sub.file_type().unwrap().is_dir() {
            continue;
        }
        let Ok(rd2) = fs::read_dir(sub.path()) else {
            continue;
        };
        for f in rd2.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                n += 1;
                bytes += f.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    (n, bytes)
}
