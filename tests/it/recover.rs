//! `recover` (restic's command): after a `forget` of the wrong snapshots,
//! their trees come back as directories of one snapshot (`/recover`,
//! each named by the tree's short id) and restore exactly, before and
//! after prunes; with nothing lost it saves nothing, a dry run saves
//! nothing, and run again it finds nothing more. (Killed at each open and
//! held at each open beside a backup: `faults::crash_points`,
//! `faults::interleavings`.)

use crate::faults::{
    assert_same_manifest, backup_ok, check_passes, cli_repo, fill, larder_ok, manifest, restore_cli,
};
use crate::support::{json_lines, write};
use serde_json::Value;
use std::path::Path;

/// `larder --json recover ARGS`: its report.
pub fn recover_json(repo: &Path, cache: &Path, args: &[&str]) -> Value {
    let o = larder_ok(repo, cache, &[&["recover", "--json"], args].concat());
    json_lines(&o.out).pop().unwrap()
}

/// The snapshots of the repository by id: (tree, paths).
pub fn snapshot_trees(repo: &Path, cache: &Path) -> Vec<(String, String, Value)> {
    let o = larder_ok(repo, cache, &["snapshots", "--json"]);
    let v: Value = serde_json::from_str(&o.out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_string(),
                s["tree"].as_str().unwrap().to_string(),
                s["paths"].clone(),
            )
        })
        .collect()
}

#[test]
fn forgotten_snapshots_come_back_under_recover_and_restore_exactly() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    fill(&src, 1, 6, 40 << 10);
    let a = backup_ok(&repo, &cache, &src);
    let want_a = manifest(&src);
    fill(&src.join("more"), 2, 3, 100 << 10);
    let b = backup_ok(&repo, &cache, &src);
    let want_b = manifest(&src);
    write(&src.join("c.txt"), b"the kept one");
    backup_ok(&repo, &cache, &src);
    let trees = snapshot_trees(&repo, &cache);
    let tree_of = |id: &str| trees.iter().find(|t| t.0 == id).unwrap().1.clone();
    let (tree_a, tree_b) = (tree_of(&a), tree_of(&b));

    // Nothing is lost yet.
    let r = recover_json(&repo, &cache, &[]);
    assert_eq!(r["lost"], serde_json::json!([]), "{r}");
    assert!(r["snapshot_id"].is_null(), "{r}");
    assert!(r["trees"].as_u64().unwrap() >= 3, "{r}");

    larder_ok(&repo, &cache, &["forget", &a, &b]);
    let mut want_lost = vec![tree_a.clone(), tree_b.clone()];
    want_lost.sort();
    let dry = recover_json(&repo, &cache, &["--dry-run"]);
    assert_eq!(dry["lost"], serde_json::json!(want_lost), "{dry}");
    assert!(dry["snapshot_id"].is_null(), "{dry}");
    assert_eq!(
        snapshot_trees(&repo, &cache).len(),
        1,
        "the dry run saved one"
    );

    let r = recover_json(&repo, &cache, &[]);
    assert_eq!(r["lost"], serde_json::json!(want_lost), "{r}");
    let rid = r["snapshot_id"].as_str().unwrap().to_string();
    let listed = snapshot_trees(&repo, &cache);
    let saved = listed.iter().find(|s| s.0 == rid).unwrap();
    assert_eq!(saved.2, serde_json::json!(["/recover"]));
    let restores = |what: &str| {
        for (tree, want) in [(&tree_a, &want_a), (&tree_b, &want_b)] {
            let target = t.dir.path().join(format!("back-{}", &tree[..8]));
            let sub = format!("{rid}:/{}", &tree[..8]);
            let got = restore_cli(&repo, &cache, &sub, &src, &target);
            assert_same_manifest(want, &manifest(&got), what);
            std::fs::remove_dir_all(&target).unwrap();
        }
    };
    restores("recovered");

    // Run again: nothing more is lost, nothing is saved.
    let again = recover_json(&repo, &cache, &[]);
    assert_eq!(again["lost"], serde_json::json!([]), "{again}");
    assert_eq!(snapshot_trees(&repo, &cache).len(), 2);
    // The recovered snapshot keeps its data through prunes.
    for _ in 0..2 {
        larder_ok(&repo, &cache, &["prune", "--keep-delete", "0s"]);
    }
    restores("after the prunes");
    check_passes(&repo, &cache, true, "after recover and prunes");
}

/// A snapshot forgotten *and pruned* (every partly used pack repacked) is
/// gone for good: nothing to recover, and `recover` says so without
/// saving a snapshot.
#[test]
fn what_a_prune_deleted_is_not_recovered() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    fill(&src, 3, 4, 30 << 10);
    let a = backup_ok(&repo, &cache, &src);
    fill(&src.join("new"), 4, 2, 30 << 10);
    backup_ok(&repo, &cache, &src);
    larder_ok(
        &repo,
        &cache,
        &[
            "forget",
            &a,
            "--prune",
            "--keep-delete",
            "0s",
            "--max-unused",
            "0",
        ],
    );
    let r = recover_json(&repo, &cache, &[]);
    assert_eq!(r["lost"], serde_json::json!([]), "{r}");
    assert!(r["snapshot_id"].is_null());
    let o = larder_ok(&repo, &cache, &["recover"]);
    assert!(o.out.contains("nothing to recover"), "{}", o.all());
}

/// A lost tree whose data a prune already deleted (its tree pack stayed,
/// partly used; its data pack went): the snapshot is saved, the missing
/// blobs are counted (exit 3, a warning naming `repair snapshots`), and
/// `repair snapshots --forget` then leaves a snapshot `check` passes that
/// restores what is left exactly.
#[test]
fn a_lost_tree_with_deleted_data_is_saved_and_repair_makes_it_whole() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    fill(&src.join("keep"), 5, 3, 30 << 10);
    backup_ok(&repo, &cache, &src);
    let packs_before = crate::support::pack_names(&repo);
    write(
        &src.join("gone.bin"),
        &crate::support::rand_bytes(6, 300 << 10),
    );
    let a = backup_ok(&repo, &cache, &src);
    let mut want = manifest(&src);
    assert!(want.remove("gone.bin").is_some());
    let tree_a = snapshot_trees(&repo, &cache)
        .into_iter()
        .find(|s| s.0 == a)
        .unwrap()
        .1;
    // The biggest pack the backup added holds gone.bin's data only.
    let data_pack = crate::support::pack_names(&repo)
        .into_iter()
        .filter(|p| !packs_before.contains(p))
        .max_by_key(|p| std::fs::metadata(pack_path(&repo, p)).unwrap().len())
        .unwrap();
    larder_ok(&repo, &cache, &["forget", &a]);
    std::fs::remove_file(pack_path(&repo, &data_pack)).unwrap();
    larder_ok(&repo, &cache, &["repair", "index"]);

    let o = crate::faults::larder_run(&repo, &cache, &["recover", "--json"]);
    assert_eq!(o.code, 3, "{}", o.all());
    assert!(o.err.contains("larder repair snapshots"), "{}", o.all());
    let r = json_lines(&o.out).pop().unwrap();
    assert_eq!(r["lost"], serde_json::json!([tree_a]), "{r}");
    assert!(r["missing_blobs"].as_u64().unwrap() >= 1, "{r}");
    let rid = r["snapshot_id"].as_str().unwrap().to_string();

    larder_ok(&repo, &cache, &["repair", "snapshots", "--forget", &rid]);
    check_passes(
        &repo,
        &cache,
        true,
        "after repair of the recovered snapshot",
    );
    let repaired = snapshot_trees(&repo, &cache)
        .into_iter()
        .find(|s| s.2 == serde_json::json!(["/recover"]))
        .unwrap();
    let target = t.dir.path().join("back");
    let got = restore_cli(
        &repo,
        &cache,
        &format!("{}:/{}", repaired.0, &tree_a[..8]),
        &src,
        &target,
    );
    // What is left: the tree as it was, without the file whose data went.
    assert_same_manifest(&want, &manifest(&got), "the repaired recovered tree");
}

/// Where pack `name` lies in a local repository.
fn pack_path(repo: &Path, name: &str) -> std::path::PathBuf {
    walkdir::WalkDir::new(repo.join("packs"))
        .into_iter()
        .map(|e| e.unwrap())
        .find(|e| e.file_name().to_string_lossy() == name)
        .unwrap()
        .into_path()
}
