//! Reading commands beside `forget` and beside a prune that deletes at once
//! (`forget --prune --keep-delete 0s`).
//!
//! A reader takes its shared lock before it picks its snapshot and holds it
//! until its last read (SPEC section 21, rule 2): a snapshot picked before
//! the lock could lose its packs to a prune that ran in between without
//! seeing the reader, and a reader with no lock at all loses them whenever
//! such a prune runs. And a snapshot that another process removes between a
//! command's listing and its read of it is gone, not unreadable: no warning,
//! no failed `check`, no prune that refuses to run.

use super::shim::Hold;
use super::{
    Out, backup_ok, check_passes, fill, larder_cmd, larder_ok, lock_objects, objects, spawn,
    wait_bounded, wait_until,
};
use crate::support::{
    assert_same_tree, copy_tree, pack_files, pack_names, path_str, rand_bytes, write,
};
use std::path::Path;

/// Forgets snapshot `id` and prunes with no grace period; returns what the
/// prune printed (`--json`).
fn forget_and_prune_now(repo: &Path, cache: &Path, id: &str) -> Out {
    larder_ok(
        repo,
        cache,
        &["--json", "forget", id, "--prune", "--keep-delete", "0s"],
    )
}

/// With no snapshot left and its reader gone, the next prune with no grace
/// period deletes every pack; `check` passes after it.
fn next_prune_deletes_every_pack(repo: &Path, cache: &Path, when: &str) {
    larder_ok(repo, cache, &["prune", "--keep-delete", "0s"]);
    assert_eq!(pack_files(repo).0, 0, "the next prune left packs");
    check_passes(repo, cache, false, when);
}

/// Each reading command is held just before it writes its lock (by the fault
/// shim), while the newest snapshot is forgotten and its packs deleted at
/// once; then let go. A command that picks `latest` only under its lock
/// reads the snapshot that is newest then, whole, and prints exactly what
/// it prints for that snapshot named by id, having written one lock
/// object. One that had picked the forgotten snapshot first would find its
/// packs gone.
#[test]
fn readers_pick_their_snapshot_under_their_lock() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    for i in 0..6 {
        write(
            &src.join(format!("d{}/f{i}.bin", i % 2)),
            &rand_bytes(i, 20_000),
        );
    }
    let y = backup_ok(&repo, &cache, &src);
    let y_src = base.path().join("y-src");
    copy_tree(&src, &y_src);
    // What only the newer snapshot holds: a file of its own (several
    // packs) and a changed one, so it has trees and data of its own.
    write(&src.join("d0/f0.bin"), b"changed after the first snapshot");
    write(&src.join("x-only.bin"), &rand_bytes(99, 3 << 20));

    let cases: [(&str, &[&str]); 7] = [
        ("restore", &["restore", "SNAP", "--target", "TARGET"]),
        ("ls", &["ls", "SNAP"]),
        ("dump", &["dump", "SNAP", "SRC/d0/f0.bin"]),
        ("diff", &["diff", &y, "SNAP"]),
        ("cat tree", &["cat", "tree", "SNAP:SRC/d0"]),
        ("stats", &["--json", "stats", "SNAP"]),
        ("find", &["find", "-s", "SNAP", "*.bin"]),
    ];
    for (i, (name, args)) in cases.iter().enumerate() {
        let x = backup_ok(&repo, &cache, &src);
        let args_for = |snap: &str, target: &Path| -> Vec<String> {
            args.iter()
                .map(|a| {
                    a.replace("SNAP", snap)
                        .replace("TARGET", path_str(target))
                        .replace("SRC", path_str(&src))
                })
                .collect()
        };
        let want_dir = base.path().join(format!("want-{i}"));
        let want_args = args_for(&y, &want_dir);
        let want_refs: Vec<&str> = want_args.iter().map(String::as_str).collect();
        let want = larder_ok(&repo, &cache, &want_refs);

        let got_dir = base.path().join(format!("got-{i}"));
        let got_args = args_for("latest", &got_dir);
        let got_refs: Vec<&str> = got_args.iter().map(String::as_str).collect();
        let hold = Hold::new(&repo.join("locks"), true, base.path(), &i.to_string());
        let mut c = larder_cmd(&repo, &cache, &got_refs);
        hold.inject(&mut c);
        let mut held = spawn(c);
        hold.wait_held(&mut held, &format!("{name}, before its lock"));
        let packs_before = pack_files(&repo).0;
        forget_and_prune_now(&repo, &cache, &x);
        assert!(
            pack_files(&repo).0 < packs_before,
            "{name}: the prune deleted no pack, so the window tested nothing"
        );
        hold.release();
        let got: Out = wait_bounded(held, name);
        assert_eq!(got.code, 0, "{name}: {}", got.all());
        // One lock object: the command's own and the library call's are one.
        assert_eq!(hold.opens(), 1, "{name}: files created in locks/");
        if *name == "restore" {
            let back = got_dir.join(src.strip_prefix("/").unwrap());
            assert_same_tree(&y_src, &back);
        } else {
            assert_eq!(got.out, want.out, "{name}: printed something else");
        }
    }
    check_passes(&repo, &cache, true, "after the held readers");
}

/// `ls` of a snapshot too large for its output pipe, left blocked on the
/// pipe mid-walk, while the snapshot is forgotten and pruned with no grace
/// period: the prune finds the listing's lock and leaves the packs to a
/// later prune, and the listing, read at last, is whole. The prune after
/// it deletes them.
#[test]
fn a_listing_holds_its_lock_to_the_end_beside_a_prune() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    for d in 0..60 {
        for f in 0..100 {
            let p = src.join(format!(
                "directory-{d:02}/a-file-with-a-long-name-{f:03}.txt"
            ));
            write(&p, format!("{d} {f}").as_bytes());
        }
    }
    let x = backup_ok(&repo, &cache, &src);
    let want = larder_ok(&repo, &cache, &["ls", &x]);
    assert!(
        want.out.len() > 4 * 65_536,
        "the listing ({} bytes) must be far larger than a pipe holds",
        want.out.len()
    );
    let packs_before = pack_files(&repo).0;

    let mut listing = spawn(larder_cmd(&repo, &cache, &["ls", &x]));
    wait_until(&mut listing, "ls: its lock", || lock_objects(&repo) > 0);
    let prune = forget_and_prune_now(&repo, &cache, &x);
    assert!(
        prune.out.contains("still run"),
        "the prune did not wait for the listing: {}",
        prune.all()
    );
    assert_eq!(pack_files(&repo).0, packs_before, "a pack was deleted");

    let got = wait_bounded(listing, "ls");
    assert_eq!(got.code, 0, "{}", got.all());
    assert_eq!(got.out, want.out, "the listing is not whole");

    next_prune_deletes_every_pack(&repo, &cache, "after the listing and the prunes");
}

/// Commands that list the snapshots and then read each, held (by the fault
/// shim) at their first read of a snapshot object while another process's
/// `forget --keep-last 1` removes all but the newest (beside a `forget`,
/// which admits no second one, an older larder's), then let go: each
/// finds the removed ones gone and goes on as if they had never been
/// listed. `snapshots` lists the newest alone with no warning, `forget`
/// applies its policy to what is left (and, given the oldest by name, says
/// it was removed meanwhile), `check` finds no error and `prune` runs.
#[test]
fn snapshots_removed_beside_a_listing_are_gone_not_unreadable() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let cases: [(&str, &[&str]); 5] = [
        ("snapshots", &["--json", "snapshots"]),
        ("forget", &["forget", "--keep-last", "1"]),
        ("forget named", &["forget", "OLDEST"]),
        ("check", &["check"]),
        ("prune", &["prune"]),
    ];
    for (i, (name, args)) in cases.iter().enumerate() {
        let mut made = Vec::new();
        for g in 0..4 {
            write(&src.join("f.txt"), format!("{i} {g}").as_bytes());
            made.push(backup_ok(&repo, &cache, &src));
        }
        let newest = made[3].clone();
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "OLDEST" { made[0].as_str() } else { a })
            .collect();
        let hold = Hold::new(
            &repo.join("snapshots"),
            false,
            base.path(),
            &format!("list-{i}"),
        );
        let mut c = larder_cmd(&repo, &cache, &args);
        hold.inject(&mut c);
        let mut held = spawn(c);
        hold.wait_held(&mut held, name);
        if name.starts_with("forget") {
            // A forget holds the lock that admits no second one: remove
            // them as a larder from before that lock would (its forget
            // took a shared lock).
            for e in std::fs::read_dir(repo.join("snapshots")).unwrap() {
                let e = e.unwrap();
                if e.file_name().to_string_lossy() != newest {
                    std::fs::remove_file(e.path()).unwrap();
                }
            }
        } else {
            larder_ok(&repo, &cache, &["forget", "--keep-last", "1"]);
        }
        hold.release();
        let got = wait_bounded(held, name);
        assert_eq!(got.code, 0, "{name}: {}", got.all());
        assert!(
            !got.err
                .lines()
                .any(|l| l.starts_with("warning") || l.starts_with("error")),
            "{name}: {}",
            got.all()
        );
        match *name {
            "snapshots" => {
                let list = crate::support::json_lines(&got.out).remove(0);
                let ids: Vec<&str> = list
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s["id"].as_str().unwrap())
                    .collect();
                assert_eq!(ids, [newest.as_str()], "{}", got.all());
            }
            "check" => assert!(got.out.contains("no errors were found"), "{}", got.all()),
            "forget named" => assert!(
                got.err.contains("was removed meanwhile") && !got.all().contains("unreadable"),
                "{}",
                got.all()
            ),
            _ => {}
        }
        let left: Vec<String> = std::fs::read_dir(repo.join("snapshots"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            left,
            std::slice::from_ref(&newest),
            "{name}: snapshots left"
        );
    }
    check_passes(&repo, &cache, true, "after the held listings");
}

/// A dry-run backup reads its parent's trees to find what is unchanged. Held
/// (by the fault shim) at its first read of a pack, while its parent is
/// forgotten and pruned with no grace period: the prune finds the dry run's
/// lock and deletes no pack, and the dry run, let go, reports every file
/// unmodified against that parent and stores nothing. With no lock the
/// prune would delete the packs under it.
#[test]
fn a_dry_run_backup_locks_before_it_reads_its_parent() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    fill(&src, 0, 8, 30_000);
    let parent = backup_ok(&repo, &cache, &src);
    let packs_before = pack_files(&repo).0;

    let hold = Hold::new(&repo.join("packs"), false, base.path(), "dry-run");
    let mut c = larder_cmd(
        &repo,
        &cache,
        &["--json", "backup", "--dry-run", path_str(&src)],
    );
    hold.inject(&mut c);
    let mut held = spawn(c);
    hold.wait_held(&mut held, "backup --dry-run, reading its parent");
    let prune = forget_and_prune_now(&repo, &cache, &parent);
    assert!(
        prune.out.contains("still run"),
        "the prune did not wait for the dry run: {}",
        prune.all()
    );
    assert_eq!(pack_files(&repo).0, packs_before, "a pack was deleted");
    hold.release();

    let got = wait_bounded(held, "backup --dry-run");
    assert_eq!(got.code, 0, "{}", got.all());
    let summary = crate::support::json_lines(&got.out)
        .into_iter()
        .find(|v| v["message_type"] == "summary")
        .unwrap_or_else(|| panic!("no summary: {}", got.all()));
    assert_eq!(summary["parent"].as_str(), Some(parent.as_str()));
    assert_eq!(summary["files_unmodified"], 8, "{summary}");
    assert_eq!(summary["files_new"], 0, "{summary}");
    assert!(summary["snapshot_id"].is_null(), "{summary}");
    assert_eq!(lock_objects(&repo), 0, "the dry run left its lock");
    assert_eq!(
        objects(&repo, "snapshots"),
        0,
        "the dry run stored a snapshot"
    );

    next_prune_deletes_every_pack(&repo, &cache, "after the dry run and the prunes");
}

/// A restore given an id prefix, held (by the fault shim) between its
/// listing of the snapshots and its read of the one the prefix names, while
/// another process forgets that snapshot: let go, it says there is no such
/// snapshot, removed meanwhile, rather than failing on a missing object,
/// and restores nothing.
#[test]
fn a_prefix_whose_snapshot_is_removed_meanwhile_names_no_snapshot() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    write(&src.join("f.txt"), b"only version");
    let id = backup_ok(&repo, &cache, &src);
    let prefix = &id[..8];
    let target = base.path().join("out");

    let hold = Hold::new(&repo.join("snapshots"), false, base.path(), "prefix");
    let mut c = larder_cmd(
        &repo,
        &cache,
        &["restore", prefix, "--target", path_str(&target)],
    );
    hold.inject(&mut c);
    let mut held = spawn(c);
    hold.wait_held(&mut held, "restore, before it reads its snapshot");
    larder_ok(&repo, &cache, &["forget", &id]);
    hold.release();

    let got = wait_bounded(held, "restore");
    assert_eq!(got.code, 1, "{}", got.all());
    assert!(
        got.err.contains(&format!("no snapshot {prefix}"))
            && got.err.contains("removed meanwhile")
            && !got.err.contains("No such file"),
        "{}",
        got.all()
    );
    assert!(!target.exists(), "the restore wrote {}", target.display());
}

/// `copy latest` from a source repository, held just before it writes its
/// lock there, while the source's newest snapshot is forgotten and its
/// packs deleted at once; then let go. It picks `latest` under its lock, so
/// it copies the snapshot that is newest then, whole, having written one
/// lock object in the source.
#[test]
fn copy_picks_its_source_snapshot_under_its_lock() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    fill(&src, 0, 4, 20_000);
    let y = backup_ok(&repo, &cache, &src);
    let y_src = base.path().join("y-src");
    copy_tree(&src, &y_src);
    write(&src.join("x-only.bin"), &rand_bytes(99, 3 << 20));
    let x = backup_ok(&repo, &cache, &src);

    let dst = base.path().join("dst");
    let dst_cache = base.path().join("dst-cache");
    larder_ok(&dst, &dst_cache, &["init"]);
    let hold = Hold::new(&repo.join("locks"), true, base.path(), "copy");
    let mut c = larder_cmd(
        &dst,
        &dst_cache,
        &["copy", "--from-repo", path_str(&repo), "latest"],
    );
    c.env("LARDER_FROM_PASSWORD", crate::common::PASS);
    hold.inject(&mut c);
    let mut held = spawn(c);
    hold.wait_held(&mut held, "copy, before its source lock");
    let packs_before = pack_files(&repo).0;
    forget_and_prune_now(&repo, &cache, &x);
    assert!(
        pack_files(&repo).0 < packs_before,
        "the prune deleted no pack, so the window tested nothing"
    );
    hold.release();
    let got = wait_bounded(held, "copy");
    assert_eq!(got.code, 0, "{}", got.all());
    assert_eq!(hold.opens(), 1, "files created in the source's locks/");

    // A copy keeps the snapshot's time (its trees are the destination's own).
    let times = |repo: &Path, cache: &Path| -> Vec<String> {
        let o = larder_ok(repo, cache, &["--json", "snapshots"]);
        let list = crate::support::json_lines(&o.out).remove(0);
        list.as_array()
            .unwrap()
            .iter()
            .map(|s| s["time"].as_str().unwrap().to_string())
            .collect()
    };
    let want = times(&repo, &cache);
    assert_eq!(want.len(), 1, "the source keeps only {y}");
    assert_eq!(times(&dst, &dst_cache), want, "the copy is not of {y}");
    let out = base.path().join("out");
    larder_ok(
        &dst,
        &dst_cache,
        &["restore", "latest", "--target", path_str(&out)],
    );
    assert_same_tree(&y_src, &out.join(src.strip_prefix("/").unwrap()));
    check_passes(&dst, &dst_cache, true, "the copy's destination");
}

/// Two snapshots of `src`: the older with a file the newer no longer has,
/// stored in one pack with a file both keep. Returns (older, newer).
fn older_shares_a_pack_with_newer(repo: &Path, cache: &Path, src: &Path) -> (String, String) {
    write(&src.join("kept.bin"), &rand_bytes(1, 200_000));
    write(&src.join("gone.bin"), &rand_bytes(2, 200_000));
    let y = backup_ok(repo, cache, src);
    std::fs::remove_file(src.join("gone.bin")).unwrap();
    write(&src.join("new.bin"), &rand_bytes(3, 200_000));
    (y, backup_ok(repo, cache, src))
}

/// Forgets `older` and prunes with no grace period, repacking every partly
/// used pack: the blobs the newer snapshot keeps move to new packs and the
/// packs they were in are deleted at once.
fn forget_and_repack_now(repo: &Path, cache: &Path, older: &str) {
    let before = pack_names(repo);
    let p = larder_ok(
        repo,
        cache,
        &[
            "forget",
            older,
            "--prune",
            "--keep-delete",
            "0s",
            "--max-unused",
            "0%",
        ],
    );
    let after = pack_names(repo);
    assert!(
        before.difference(&after).count() > 0 && after.difference(&before).count() > 0,
        "the prune repacked nothing, so the window tested nothing: {}",
        p.all()
    );
}

/// A restore with a cache of its own (another machine's), held after its
/// open and before its lock, while the older snapshot is forgotten and its
/// packs repacked and deleted at once ([`forget_and_repack_now`]). The
/// restore brings its index cache up to date under its lock, so it reads
/// the new packs and restores the newest snapshot whole. Before, it used
/// the cache synced at its open and failed on the deleted pack ("No such
/// file or directory").
#[test]
fn a_reader_syncs_its_index_under_its_lock() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (y, _) = older_shares_a_pack_with_newer(&repo, &cache, &src);

    let own = base.path().join("own-cache");
    let target = base.path().join("out");
    let hold = Hold::new(&repo.join("locks"), true, base.path(), "own-cache");
    let mut c = larder_cmd(
        &repo,
        &own,
        &["restore", "latest", "--target", path_str(&target)],
    );
    hold.inject(&mut c);
    let mut held = spawn(c);
    hold.wait_held(&mut held, "restore, after its open and before its lock");
    forget_and_repack_now(&repo, &cache, &y);
    hold.release();
    let got = wait_bounded(held, "restore");
    assert_eq!(got.code, 0, "{}", got.all());
    assert_same_tree(&src, &target.join(src.strip_prefix("/").unwrap()));
}

/// The same through the library: a repository opened (and its cache
/// synced) before the prune, then restored from. The restore's lock brings
/// the cache up to date, so the restore reads the packs that exist.
#[test]
fn a_library_reader_syncs_its_index_under_its_lock() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (y, x) = older_shares_a_pack_with_newer(&repo, &cache, &src);
    let opened = larder::repository::Repository::open(
        t.backend(),
        &larder::keys::Credential::passphrase(crate::common::PASS),
        &base.path().join("own-cache"),
    )
    .unwrap();
    forget_and_repack_now(&repo, &cache, &y);
    let target = base.path().join("out");
    let x = larder::Id::from_hex(&x).unwrap();
    crate::support::lib_restore(&opened, &x, &src, &target);
    assert_same_tree(&src, &target);
}
