//! Prune (issue 11): frees exactly the unreferenced data, deletes in two
//! phases so a backup running beside it never loses data, survives being
//! killed at any point, repacks, compacts the index and removes leftovers.

use crate::common::{self, TestRepo};
use crate::support::*;
use larder::Id;
use larder::backend::{Backend, Kind};
use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A repository with 1 MiB packs, used through the CLI from here on.
fn cli_repo() -> TestRepo {
    let t = TestRepo::new();
    drop(t.init());
    fs::remove_dir_all(t.cache_path()).unwrap();
    t
}

fn larder_json(t: &TestRepo, args: &[&str], want: i32) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (out, _) = cli(&t.repo_path(), &t.cache_path(), &all, want);
    json_lines(&out).pop().unwrap_or(serde_json::Value::Null)
}

/// Snapshot ids, oldest first.
fn snapshot_ids(t: &TestRepo) -> Vec<String> {
    let v = larder_json(t, &["snapshots"], 0);
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

/// Forgets snapshots by deleting their objects (what `forget` does).
fn forget(t: &TestRepo, ids: &[String]) {
    for id in ids {
        t.backend().delete(Kind::Snapshot, id).unwrap();
    }
}

/// Bytes of every object the repository stores (packs, index, snapshots…).
fn repo_bytes(root: &Path) -> u64 {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// Restores snapshot `id` (the subtree `src`) and compares it with `want`.
fn restore_equals(t: &TestRepo, id: &str, src: &Path, want: &Path) {
    let dest = tempfile::tempdir().unwrap();
    let spec = format!("{id}:{}", path_str(src));
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["restore", &spec, "--target", path_str(dest.path())],
        0,
    );
    assert_same_tree(want, dest.path());
}

fn check_read_data(t: &TestRepo) {
    let (out, err) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["check", "--read-data"],
        0,
    );
    assert!(out.contains("no errors were found"), "{out}{err}");
}

/// Generation `g` of a tree: files come and go, some are edited.
fn generation(src: &Path, g: u64) {
    let _ = fs::remove_dir_all(src);
    for i in 0..12u64 {
        // Each file lives for 4 generations; its content changes every 3.
        if i % 4 == g % 4 {
            continue;
        }
        let seed = 1000 * i + (g / 3);
        write(
            &src.join(format!("d{}/f{i}", i % 3)),
            &rand_bytes(seed, 150_000 + 1000 * i as usize),
        );
    }
    write(&src.join("gen"), format!("{g}").as_bytes());
}

/// After forgetting all but the last snapshot and pruning at once, the
/// repository is within 5 % of a fresh backup of what is kept, every byte
/// of it checks, and the kept snapshot restores exactly.
#[test]
fn prune_frees_exactly_the_unreferenced_data() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    for g in 0..8 {
        generation(&src, g);
        cli(
            &t.repo_path(),
            &t.cache_path(),
            &["backup", path_str(&src)],
            0,
        );
    }
    let ids = snapshot_ids(&t);
    let before = repo_bytes(&t.repo_path());
    forget(&t, &ids[..ids.len() - 1]);
    let r = larder_json(
        &t,
        &["prune", "--keep-delete", "0s", "--max-unused", "0%"],
        0,
    );
    assert!(r["plan"]["unused"]["packs"].as_u64().unwrap() > 0, "{r}");
    assert!(r["immediate"]["packs_deleted"].as_u64().unwrap() > 0, "{r}");
    let after = repo_bytes(&t.repo_path());
    assert!(after < before, "{after} >= {before}");

    // A fresh repository with a backup of what is kept.
    let fresh = cli_repo();
    cli(
        &fresh.repo_path(),
        &fresh.cache_path(),
        &["backup", path_str(&src)],
        0,
    );
    let want = repo_bytes(&fresh.repo_path());
    let ratio = after as f64 / want as f64;
    assert!(
        (0.95..=1.05).contains(&ratio),
        "after prune {after} bytes, a fresh backup {want} ({ratio:.3})"
    );
    check_read_data(&t);
    restore_equals(&t, ids.last().unwrap(), &src, &src);
    // Nothing is left for a second prune.
    let r = larder_json(
        &t,
        &["prune", "--keep-delete", "0s", "--max-unused", "0%"],
        0,
    );
    assert_eq!(r["plan"]["unused"]["packs"], 0, "{r}");
    assert_eq!(r["plan"]["repack"]["packs"], 0, "{r}");
}

/// Sets the modification time of every deletion mark `days` back.
fn age_marks(t: &TestRepo, days: i64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    for e in fs::read_dir(t.repo_path().join("marks")).unwrap() {
        set_mtime(&e.unwrap().path(), now - days * 86_400_000_000_000);
    }
}

/// By default the first prune only marks; deletion waits a day (by the
/// storage's clock) and happens in a later prune.
#[test]
fn deletion_waits_for_the_grace_period() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    for g in 0..3 {
        generation(&src, g * 4 + 1);
        cli(
            &t.repo_path(),
            &t.cache_path(),
            &["backup", path_str(&src)],
            0,
        );
    }
    let ids = snapshot_ids(&t);
    forget(&t, &ids[..2]);
    let packs_before = pack_files(&t.repo_path()).0;
    let r = larder_json(&t, &["prune"], 0);
    let marked = r["plan"]["unused"]["packs"].as_u64().unwrap();
    assert!(marked > 0, "{r}");
    assert_eq!(
        pack_files(&t.repo_path()).0,
        packs_before,
        "deleted at once"
    );
    let r = larder_json(&t, &["prune"], 0);
    let w = &r["sweep"]["waiting"][0];
    assert!(
        w["reason"]
            .as_str()
            .unwrap()
            .contains("deleted once 1d old"),
        "{r}"
    );
    assert_eq!(pack_files(&t.repo_path()).0, packs_before);
    check_read_data(&t);

    age_marks(&t, 2);
    let r = larder_json(&t, &["prune"], 0);
    assert_eq!(r["sweep"]["packs_deleted"].as_u64().unwrap(), marked, "{r}");
    assert_eq!(
        pack_files(&t.repo_path()).0 as u64,
        packs_before as u64 - marked
    );
    assert!(
        fs::read_dir(t.repo_path().join("marks"))
            .unwrap()
            .next()
            .is_none()
    );
    check_read_data(&t);
    restore_equals(&t, ids.last().unwrap(), &src, &src);
}

/// A dry run reports the plan and changes nothing.
#[test]
fn dry_run_changes_nothing() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    for g in 0..3 {
        generation(&src, g * 4 + 2);
        cli(
            &t.repo_path(),
            &t.cache_path(),
            &["backup", path_str(&src)],
            0,
        );
    }
    let ids = snapshot_ids(&t);
    forget(&t, &ids[..2]);
    let listing = |t: &TestRepo| -> Vec<String> {
        let mut v: Vec<String> = walkdir::WalkDir::new(t.repo_path())
            .into_iter()
            .filter_map(|e| e.ok())
            .filter(|e| !e.path().starts_with(t.repo_path().join("locks")))
            .map(|e| e.path().display().to_string())
            .collect();
        v.sort();
        v
    };
    let before = listing(&t);
    let r = larder_json(&t, &["prune", "--dry-run", "--keep-delete", "0s"], 0);
    assert_eq!(r["dry_run"], true);
    assert!(r["plan"]["unused"]["packs"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(listing(&t), before);
}

/// The heart of the two-phase design: a backup that started before a
/// prune marked data, and deduplicated against it, finishes after the
/// prune; the prune must not have deleted that data (it waits for the
/// backup), and a later prune keeps what the backup's snapshot uses.
#[test]
fn backup_paused_across_prune_keeps_its_data() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    generation(&src, 5);
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(&src)],
        0,
    );
    let first = snapshot_ids(&t);
    // The second backup sees the same files (it deduplicates against the
    // first snapshot's data) plus new ones, and is frozen once it has
    // begun writing packs.
    let src2 = base.path().join("src2");
    copy_tree(&src, &src2);
    for i in 0..6 {
        write(
            &src2.join(format!("new/n{i}")),
            &rand_bytes(9000 + i, 400_000),
        );
    }
    let packs_before = pack_files(&t.repo_path()).0;
    let mut c = common::larder(&t.repo_path(), &t.cache_path());
    c.args(["backup", path_str(&src2)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let deadline = Instant::now() + Duration::from_secs(60);
    while pack_files(&t.repo_path()).0 <= packs_before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();

    // While it is frozen: forget the first snapshot and prune at once.
    forget(&t, &first);
    let r = larder_json(&t, &["prune", "--keep-delete", "0s"], 0);
    let imm = &r["immediate"];
    assert_eq!(
        imm["packs_deleted"], 0,
        "deleted under a running backup: {r}"
    );
    assert!(
        imm["waiting"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("still run"),
        "{r}"
    );

    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Now the backup is done: the next prune keeps what its snapshot uses.
    let r = larder_json(&t, &["prune", "--keep-delete", "0s"], 0);
    assert!(r["sweep"]["packs_rescued"].as_u64().unwrap() > 0, "{r}");
    let ids = snapshot_ids(&t);
    assert_eq!(ids.len(), 1);
    restore_equals(&t, &ids[0], &src2, &src2);
    check_read_data(&t);
}

/// Backups never wait for prune: a backup runs while a prune holds its
/// (maintenance) lock; a second prune is refused.
#[test]
fn backups_run_beside_a_prune_but_two_prunes_do_not() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    generation(&src, 6);
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(&src)],
        0,
    );
    // A maintenance lock held by this test process stands for a prune.
    let repo = t.open().unwrap();
    let held = repo.lock_maintenance().unwrap();
    generation(&src, 7);
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(&src)],
        0,
    );
    let (_, err) = cli(&t.repo_path(), &t.cache_path(), &["prune"], 11);
    assert!(err.contains("maintenance lock"), "{err}");
    drop(held);
    cli(&t.repo_path(), &t.cache_path(), &["prune"], 0);
}

/// Two backups of `src` (60 small files of seeded random bytes, `seed`
/// onwards), every other file deleted before the second, and the first
/// snapshot forgotten: many small files share packs, so each pack is left
/// half used.
fn half_used_packs(t: &TestRepo, src: &Path, seed: u64) {
    for i in 0..60u64 {
        write(&src.join(format!("f{i:02}")), &rand_bytes(seed + i, 60_000));
    }
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(src)],
        0,
    );
    let first = snapshot_ids(t);
    for i in (0..60u64).step_by(2) {
        fs::remove_file(src.join(format!("f{i:02}"))).unwrap();
    }
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(src)],
        0,
    );
    forget(t, &first);
}

/// Partly used packs are repacked when they waste more than --max-unused:
/// afterwards no pack holds unused data and everything restores.
#[test]
fn partly_used_packs_are_repacked() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    half_used_packs(&t, &src, 700);
    let r = larder_json(
        &t,
        &["prune", "--keep-delete", "0s", "--max-unused", "0%"],
        0,
    );
    assert!(r["plan"]["repack"]["packs"].as_u64().unwrap() > 0, "{r}");
    assert!(r["repacked"]["blobs_copied"].as_u64().unwrap() >= 30, "{r}");
    let r = larder_json(&t, &["prune", "--dry-run", "--max-unused", "0%"], 0);
    assert_eq!(r["plan"]["keep_unused_bytes"], 0, "{r}");
    assert_eq!(r["plan"]["repack"]["packs"], 0, "{r}");
    check_read_data(&t);
    let ids = snapshot_ids(&t);
    restore_equals(&t, &ids[0], &src, &src);
}

/// A prune killed between writing its deletion plan and the plan's holders
/// object leaves a plan without holders. The next prune with
/// `--keep-delete 0s` completes the plan and deletes its packs in the same
/// run, even when it marks nothing new itself: afterwards no mark is left
/// and no blob is stored twice (the repacked copies and the originals).
#[test]
fn a_plan_left_without_holders_is_finished_by_the_next_prune() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    half_used_packs(&t, &src, 900);
    // Repacks and marks, deleting nothing yet.
    let r = larder_json(
        &t,
        &["prune", "--keep-delete", "1d", "--max-unused", "0%"],
        0,
    );
    assert!(r["plan"]["repack"]["packs"].as_u64().unwrap() > 0, "{r}");
    // The state of a kill between the two objects: the holders are gone.
    let repo = t.open().unwrap();
    let marks = repo.backend().list(Kind::Mark).unwrap();
    assert_eq!(marks.len(), 2, "a plan and its holders");
    let holders: Vec<_> = marks
        .iter()
        .filter(|e| {
            matches!(
                larder::index::marks::read_mark(repo.backend(), repo.keys(), &e.name),
                Ok(larder::index::marks::Mark::Holders(_))
            )
        })
        .collect();
    assert_eq!(holders.len(), 1);
    fs::remove_file(t.repo_path().join("marks").join(&holders[0].name)).unwrap();
    drop(repo);
    assert!(
        blobs_by_pack(&t).values().flatten().count()
            > blobs_by_pack(&t)
                .values()
                .flatten()
                .collect::<HashSet<_>>()
                .len(),
        "the repacked blobs are stored twice until the plan is swept"
    );

    let r = larder_json(
        &t,
        &["prune", "--keep-delete", "0s", "--max-unused", "0%"],
        0,
    );
    assert_eq!(
        r["plan"]["repack"]["packs"], 0,
        "nothing new to repack: {r}"
    );
    assert!(
        fs::read_dir(t.repo_path().join("marks"))
            .unwrap()
            .next()
            .is_none(),
        "a mark is left: {r}"
    );
    let mut seen = HashSet::new();
    for (p, ids) in blobs_by_pack(&t) {
        for id in ids {
            assert!(
                seen.insert(id),
                "blob {id} stored twice (again in {p}): {r}"
            );
        }
    }
    check_read_data(&t);
    restore_equals(&t, &snapshot_ids(&t)[0], &src, &src);
}

/// A repository after many backups has many index segments; prune merges
/// them into a few.
#[test]
fn prune_compacts_the_index() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    write(&src.join("base"), &rand_bytes(1, 10_000));
    for i in 0..25u64 {
        write(&src.join(format!("f{i}")), &rand_bytes(50 + i, 3000));
        cli(
            &t.repo_path(),
            &t.cache_path(),
            &["backup", path_str(&src)],
            0,
        );
    }
    let segs = |t: &TestRepo| fs::read_dir(t.repo_path().join("index")).unwrap().count();
    assert!(segs(&t) >= 25);
    cli(&t.repo_path(), &t.cache_path(), &["prune"], 0);
    assert!(segs(&t) <= 2, "{} segments after prune", segs(&t));
    fs::remove_dir_all(t.cache_path()).unwrap();
    check_read_data(&t);
    let ids = snapshot_ids(&t);
    restore_equals(&t, ids.last().unwrap(), &src, &src);
}

/// Leftover temporary files of killed runs are removed once no run that
/// was alive when they were seen can own them.
#[test]
fn leftovers_of_killed_runs_are_removed() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    generation(&src, 8);
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(&src)],
        0,
    );
    let dir = t.repo_path().join("packs/ab");
    fs::create_dir_all(&dir).unwrap();
    let left = dir.join(".tmp-0011223344556677");
    fs::write(&left, b"half a pack").unwrap();
    larder_json(&t, &["prune"], 0);
    assert!(left.exists(), "removed before its grace period");
    age_marks(&t, 2);
    let r = larder_json(&t, &["prune"], 0);
    assert_eq!(r["sweep"]["leftovers_removed"], 1, "{r}");
    assert!(!left.exists());
    check_read_data(&t);
}

/// Every blob id in the repository's packs, by pack.
fn blobs_by_pack(t: &TestRepo) -> BTreeMap<Id, Vec<Id>> {
    let repo = t.open().unwrap();
    let mut index = repo.index().unwrap();
    let mut out = BTreeMap::new();
    for (p, _) in index.packs().unwrap() {
        let ids = index
            .blobs_in_pack(&p)
            .unwrap()
            .iter()
            .map(|e| e.id)
            .collect();
        out.insert(p, ids);
    }
    out
}

/// A prune killed at random points (kill -9), again and again, never loses
/// a kept snapshot: after each kill `check` passes and every kept snapshot
/// restores; a last prune finishes the job.
#[test]
fn kill_loop_over_prune_loses_nothing() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let mut trees: Vec<(String, PathBuf)> = Vec::new();
    let mut seed = 0x5eed_u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    let mut landed = 0;
    let mut window_ms = 150;
    for round in 0..40u64 {
        // A new generation, its snapshot and a copy of its tree to compare.
        generation(&src, round);
        cli(
            &t.repo_path(),
            &t.cache_path(),
            &["backup", path_str(&src)],
            0,
        );
        let id = snapshot_ids(&t).pop().unwrap();
        let copy = base.path().join(format!("gen{round}"));
        copy_tree(&src, &copy);
        trees.push((id, copy));
        // Keep the last three.
        if trees.len() > 3 {
            let (old, dir) = trees.remove(0);
            forget(&t, &[old]);
            fs::remove_dir_all(dir).unwrap();
        }
        let mut c = common::larder(&t.repo_path(), &t.cache_path());
        c.args(["prune", "--keep-delete", "0s", "--max-unused", "0%"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(next() % window_ms));
        if child.try_wait().unwrap().is_none() {
            landed += 1;
        } else {
            // Prune was quicker than the window on this machine: narrow it,
            // so that kills keep landing inside a run (startup included).
            window_ms = (window_ms * 3 / 4).max(5);
        }
        let _ = child.kill();
        let _ = child.wait();
        let (out, err) = cli(&t.repo_path(), &t.cache_path(), &["check"], 0);
        assert!(
            out.contains("no errors were found"),
            "round {round}: {out}{err}"
        );
        for (id, copy) in &trees {
            restore_equals(&t, id, &src, copy);
        }
    }
    assert!(
        landed >= 20,
        "only {landed} of 40 kills hit a running prune"
    );
    let (last_prune, _) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &[
            "--json",
            "prune",
            "--keep-delete",
            "0s",
            "--max-unused",
            "0%",
        ],
        0,
    );
    check_read_data(&t);
    for (id, copy) in &trees {
        restore_equals(&t, id, &src, copy);
    }
    // No blob is stored twice once the job is done.
    let mut seen = HashSet::new();
    for (p, ids) in blobs_by_pack(&t) {
        for id in ids {
            assert!(
                seen.insert(id),
                "blob {id} stored twice (again in pack {p}); the last prune: {last_prune}"
            );
        }
    }
}

/// `forget --prune` forgets by policy, then prunes with the prune flags.
#[test]
fn forget_with_prune() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    for g in 0..4 {
        generation(&src, g * 4 + 3);
        cli(
            &t.repo_path(),
            &t.cache_path(),
            &["backup", path_str(&src)],
            0,
        );
    }
    let packs_before = pack_files(&t.repo_path()).0;
    let (out, _) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &[
            "--json",
            "forget",
            "--keep-last",
            "1",
            "--prune",
            "--keep-delete",
            "0s",
        ],
        0,
    );
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2, "{out}");
    assert_eq!(lines[0][0]["remove"].as_array().unwrap().len(), 3, "{out}");
    let deleted = lines[1]["immediate"]["packs_deleted"].as_u64().unwrap();
    assert!(deleted > 0, "{out}");
    assert_eq!(
        pack_files(&t.repo_path()).0 as u64,
        packs_before as u64 - deleted
    );
    let ids = snapshot_ids(&t);
    assert_eq!(ids.len(), 1);
    restore_equals(&t, &ids[0], &src, &src);
    check_read_data(&t);
}
