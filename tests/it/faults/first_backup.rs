//! The end of a backup: its index segment is written on one thread while
//! the cache absorbs it on another, in a transaction that commits only
//! once the segment is in storage (`Index::absorb_writing`). Two first
//! backups of many blobs run at once on one fresh repository and cache,
//! and a backup is killed (`kill -9`) as its segment appears.

use super::{backup_ok, check_passes, larder_cmd, restore_cli, spawn, wait_bounded, write};
use crate::support::{assert_same_tree, copy_tree, path_str};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Writes `n` small files of distinct bytes (one data blob each) under
/// `dir`.
fn many_small(dir: &Path, tag: &str, n: usize) {
    for i in 0..n {
        let p = dir.join(format!("d{}/f{i:05}.txt", i % 16));
        write(
            &p,
            format!("{tag} file {i}: {}\n", "x".repeat(i % 97)).as_bytes(),
        );
    }
}

/// The index cache file of the only repository under `cache`.
fn cache_db(cache: &Path) -> PathBuf {
    std::fs::read_dir(cache)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("index.sqlite"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no index.sqlite under {}", cache.display()))
}

/// Rows of `table` in the cache database at `db`.
fn rows(db: &Path, table: &str) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

/// Two first backups of different trees, started together on one fresh
/// repository and cache: both succeed and both segments are in the cache;
/// a backup of a copy of both trees stores none of their blobs again;
/// every snapshot restores exactly and `check --read-data` finds nothing
/// wrong.
#[test]
fn two_first_backups_at_once_share_a_fresh_cache() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let (a, b) = (base.path().join("a"), base.path().join("b"));
    many_small(&a, "a", 5000);
    many_small(&b, "b", 5000);

    let run = |src: &Path| {
        spawn(larder_cmd(
            &repo,
            &cache,
            &["backup", "--json", path_str(src)],
        ))
    };
    let (ca, cb) = (run(&a), run(&b));
    let (oa, ob) = (wait_bounded(ca, "backup a"), wait_bounded(cb, "backup b"));
    assert_eq!((oa.code, ob.code), (0, 0), "{}\n{}", oa.all(), ob.all());
    let (sa, sb) = (super::snapshot_id_of(&oa), super::snapshot_id_of(&ob));

    // Both segments committed: every file's blob (and the trees) is in the
    // shared cache, under two segments.
    let db = cache_db(&cache);
    let blobs = rows(&db, "blobs");
    assert!(blobs >= 10_000, "{blobs} blobs in the cache");
    assert_eq!(rows(&db, "segments"), 2);

    let out = tempfile::tempdir().unwrap();
    for (id, src, dir) in [(&sa, &a, "a"), (&sb, &b, "b")] {
        let got = restore_cli(&repo, &cache, id, src, &out.path().join(dir));
        assert_eq!(assert_same_tree(src, &got), 5000 + 16);
    }

    // A copy of both trees and one new file, backed up: every blob of the
    // copy is found (in the base or the rows) and none is stored twice.
    let c = base.path().join("c");
    std::fs::create_dir(&c).unwrap();
    for from in [&a, &b] {
        copy_tree(from, &c.join(from.file_name().unwrap()));
    }
    write(&c.join("new.txt"), b"one more file");
    let sc = backup_ok(&repo, &cache, &c);
    let (_, blobs) = super::assert_each_blob_stored_once(&t.open().unwrap());
    let got = restore_cli(&repo, &cache, &sc, &c, &out.path().join("c"));
    assert_eq!(assert_same_tree(&c, &got), 2 * (1 + 5000 + 16) + 1);
    assert!(blobs > 10_000, "{blobs} blobs");
    check_passes(&repo, &cache, true, "after both");
}

/// A first backup killed (`kill -9`) just after its index segment appears
/// in storage (its cache transaction committed or not, by timing) leaves a
/// repository `check` passes; the next backup completes, stores no blob
/// twice, and restores exactly. Three kills at different delays.
#[test]
fn a_first_backup_killed_as_its_segment_appears_leaves_a_sound_repository() {
    for (round, delay_us) in [0u64, 3_000, 20_000].into_iter().enumerate() {
        let t = super::cli_repo();
        let (repo, cache) = (t.repo_path(), t.cache_path());
        let base = tempfile::tempdir().unwrap();
        let src = base.path().join("src");
        many_small(&src, &format!("round {round}"), 6000);

        let mut child = spawn(larder_cmd(&repo, &cache, &["backup", path_str(&src)]));
        let deadline = Instant::now() + Duration::from_secs(120);
        let killed = loop {
            if child.try_wait().unwrap().is_some() {
                break false;
            }
            let segs = std::fs::read_dir(repo.join("index"))
                .map(|d| {
                    d.flatten()
                        .any(|e| !e.file_name().to_string_lossy().starts_with('.'))
                })
                .unwrap_or(false);
            if segs {
                std::thread::sleep(Duration::from_micros(delay_us));
                child.kill().unwrap();
                break true;
            }
            assert!(Instant::now() < deadline, "no segment appeared");
            std::thread::sleep(Duration::from_micros(200));
        };
        let o = wait_bounded(child, "the killed backup");
        assert!(killed, "round {round}: ended before the kill: {}", o.all());

        check_passes(
            &repo,
            &cache,
            false,
            &format!("round {round}, after the kill"),
        );
        let snap = backup_ok(&repo, &cache, &src);
        super::assert_each_blob_stored_once(&t.open().unwrap());
        let out = tempfile::tempdir().unwrap();
        let got = restore_cli(&repo, &cache, &snap, &src, &out.path().join("r"));
        assert_eq!(assert_same_tree(&src, &got), 6000 + 16);
        check_passes(&repo, &cache, true, &format!("round {round}, at the end"));
    }
}
