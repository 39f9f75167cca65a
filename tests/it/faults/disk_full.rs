//! A repository on a filesystem that fills up (a small tmpfs; needs root,
//! as CI has): the backup that does not fit stops with an error naming the
//! cause, leaves every earlier snapshot restorable and `check` passing, and
//! once the filesystem is enlarged the next backup completes.

use super::{
    assert_each_blob_stored_once, assert_objects_whole, backup_ok, check_passes, fill, larder_run,
    notices, restore_cli, snapshot_names, temp_files,
};
use crate::common;
use crate::support::{assert_same_tree, is_root, path_str};
use larder::backend::LocalBackend;
use larder::keys::Credential;
use larder::repository::Repository;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

/// A mounted tmpfs, unmounted on drop (lazily if it is still busy).
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(dir).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !o.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        Ok(Tmpfs {
            dir: dir.to_path_buf(),
        })
    }

    fn resize(&self, size: &str) {
        let o = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "remount: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

#[test]
fn backup_onto_a_full_disk_fails_cleanly_and_recovers() {
    if !is_root() {
        println!("skipped: mounting a tmpfs needs root");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let mnt = base.path().join("mnt");
    let disk = match Tmpfs::mount(&mnt, "12m") {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: {e}");
            return;
        }
    };
    // The repository on the small disk; the cache elsewhere.
    let repo = mnt.join("repo");
    let cache = base.path().join("cache");
    drop(common::init_at(&repo, &cache));
    std::fs::remove_dir_all(&cache).unwrap(); // for the binary under test to build

    let small = base.path().join("small");
    fill(&small, 50, 8, 256 << 10);
    let s0 = backup_ok(&repo, &cache, &small);
    let big = base.path().join("big");
    fill(&big, 51, 12, 2 << 20); // 24 MiB of random data: twice the disk

    let o = larder_run(&repo, &cache, &["backup", "--json", path_str(&big)]);
    assert_eq!(o.code, 1, "{}", o.all());
    let cause = o
        .err
        .lines()
        .find(|l| l.contains("No space left on device"))
        .unwrap_or_else(|| panic!("the error names the cause: {}", o.all()));
    println!("the backup that did not fit: {cause}");
    assert!(
        cause.contains(path_str(&repo)) || cause.contains("packs/"),
        "the error names what could not be written: {cause}"
    );
    assert_eq!(
        snapshot_names(&repo),
        [s0.clone()].into(),
        "no snapshot saved"
    );
    assert_objects_whole(&repo);
    assert!(
        temp_files(&repo).is_empty(),
        "the failed run removed its temporary files: {:?}",
        temp_files(&repo)
    );
    let back = restore_cli(&repo, &cache, &s0, &small, &base.path().join("r0"));
    assert_same_tree(&small, &back);
    check_passes(&repo, &cache, false, "on the full disk");

    disk.resize("64m");
    let s1 = backup_ok(&repo, &cache, &big);
    let back = restore_cli(&repo, &cache, &s1, &big, &base.path().join("r1"));
    assert!(assert_same_tree(&big, &back) > 12);
    let chk = check_passes(&repo, &cache, true, "after the disk was enlarged");
    assert!(notices(&chk).is_empty(), "{}", chk.all());
    let r = Repository::open(
        Arc::new(LocalBackend::new(&repo)),
        &Credential::passphrase(common::PASS),
        &cache,
    )
    .unwrap();
    // What the failed run stored was reused, not stored again.
    assert_each_blob_stored_once(&r);
    drop(r);
    drop(disk);
}
