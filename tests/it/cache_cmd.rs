//! `cache` (restic's command): it lists each repository's cache directory
//! under the cache root with when it was last used, and `--cleanup`
//! removes those unused for longer than `--max-age` days, never one a
//! running larder holds, nor anything else in the root. A cleanup run
//! over and over beside backups never breaks one; killed at each open
//! (`faults::crash_points`), it leaves a cache every command can use.

use crate::faults::{cli_repo, fill, larder_ok, larder_run, spawn, wait_bounded};
use crate::support::path_str;
use serde_json::Value;
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Sets the last use of cache directory `dir` to `days` ago.
pub fn age_cache(dir: &Path, days: u64) {
    let t = SystemTime::now() - Duration::from_secs(days * 86_400);
    fs::File::options()
        .write(true)
        .open(dir.join(".in-use"))
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// `larder --json cache ARGS` with cache root `root`.
fn cache_json(repo: &Path, root: &Path, args: &[&str]) -> Value {
    let o = larder_ok(repo, root, &[&["--json", "cache"], args].concat());
    serde_json::from_str(&o.out).unwrap()
}

/// How many snapshots `larder snapshots` lists (cache root `root`).
fn snapshot_count(repo: &Path, root: &Path) -> usize {
    let o = larder_ok(repo, root, &["snapshots", "--json"]);
    let v: Value = serde_json::from_str(&o.out).unwrap();
    v.as_array().unwrap().len()
}

/// The repository-cache directory names under `root`.
fn cache_names(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.len() == 64)
        .collect();
    v.sort();
    v
}

#[test]
fn cache_lists_caches_and_cleanup_removes_only_old_unused_ones() {
    let (a, b) = (cli_repo(), cli_repo());
    let root = a.dir.path().join("shared-cache");
    let src = a.dir.path().join("src");
    fill(&src, 1, 3, 20 << 10);
    for t in [&a, &b] {
        larder_ok(&t.repo_path(), &root, &["backup", "-q", path_str(&src)]);
    }
    let names = cache_names(&root);
    assert_eq!(names.len(), 2, "one cache per repository");
    let listed = cache_json(&a.repo_path(), &root, &[]);
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, names);
    for c in listed.as_array().unwrap() {
        assert_eq!(c["old"], false, "{c}");
        assert!(c["size"].as_u64().unwrap() > 0, "{c}");
    }
    // Which cache is whose: the one a command on `b` marks used now.
    age_cache(&root.join(&names[0]), 40);
    age_cache(&root.join(&names[1]), 40);
    larder_ok(&b.repo_path(), &root, &["snapshots", "-q"]);
    let listed = cache_json(&a.repo_path(), &root, &["--no-size"]);
    let old: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["old"] == true)
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(old.len(), 1, "{listed}");
    assert!(listed[0]["size"].is_null(), "{listed}");
    let a_cache = old[0].to_string();
    let other = names.iter().find(|n| **n != a_cache).unwrap().clone();
    // A younger max age makes both old; the default, one.
    let both = cache_json(&a.repo_path(), &root, &["--max-age", "0"]);
    assert!(
        both.as_array().unwrap().iter().all(|c| c["old"] == true),
        "{both}"
    );

    let r = cache_json(&a.repo_path(), &root, &["--cleanup"]);
    assert_eq!(r["removed"], serde_json::json!([a_cache]), "{r}");
    assert_eq!(cache_names(&root), vec![other.clone()]);
    assert!(
        root.join("CACHEDIR.TAG").exists(),
        "the root's tag was removed"
    );
    // `a` works without its cache and builds it again.
    assert_eq!(snapshot_count(&a.repo_path(), &root), 1);
    assert_eq!(cache_names(&root).len(), 2);
    larder_ok(&a.repo_path(), &root, &["check"]);
}

/// A cache a running backup holds is kept by a cleanup that finds it old;
/// let go, the backup completes, and the next cleanup removes the cache.
#[test]
fn a_cache_in_use_is_kept() {
    let t = cli_repo();
    let (repo, root) = (t.repo_path(), t.dir.path().join("cache-root"));
    let src = t.dir.path().join("src");
    fill(&src, 2, 4, 100 << 10);
    larder_ok(&repo, &root, &["backup", "-q", path_str(&src)]);
    let scratch = tempfile::tempdir().unwrap();
    let hold = crate::faults::shim::Hold::new(&repo.join("snapshots"), true, scratch.path(), "b");
    fill(&src.join("new"), 3, 2, 100 << 10);
    let mut c = crate::faults::larder_cmd(&repo, &root, &["backup", "--json", path_str(&src)]);
    hold.inject(&mut c);
    let mut child = spawn(c);
    hold.wait_held(&mut child, "the backup about to save its snapshot");
    let r = cache_json(&repo, &root, &["--cleanup", "--max-age", "0"]);
    assert_eq!(r["removed"], serde_json::json!([]), "{r}");
    assert_eq!(r["in_use"].as_array().unwrap().len(), 1, "{r}");
    hold.release();
    let o = wait_bounded(child, "the held backup");
    assert_eq!(o.code, 0, "{}", o.all());
    let r = cache_json(&repo, &root, &["--cleanup", "--max-age", "0"]);
    assert_eq!(r["removed"].as_array().unwrap().len(), 1, "{r}");
    larder_ok(&repo, &root, &["check", "--read-data"]);
}

/// Cleanups with `--max-age 0` (every cache not in use is old) over and
/// over while backups run one after another on the same cache: every
/// backup succeeds, and `check` passes.
#[test]
fn cleanups_beside_backups_never_break_one() {
    let t = cli_repo();
    let (repo, root) = (t.repo_path(), t.dir.path().join("cache-root"));
    let src = t.dir.path().join("src");
    fill(&src, 4, 3, 50 << 10);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cleaner = {
        let (repo, root, stop) = (repo.clone(), root.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut runs = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let o = larder_run(
                    &repo,
                    &root,
                    &["cache", "--cleanup", "--max-age", "0", "-q"],
                );
                assert_eq!(o.code, 0, "{}", o.all());
                runs += 1;
            }
            runs
        })
    };
    for i in 0..12 {
        fs::write(src.join(format!("n{i}")), format!("round {i}")).unwrap();
        let o = larder_run(&repo, &root, &["backup", "-q", path_str(&src)]);
        assert_eq!(o.code, 0, "backup {i} beside cleanups: {}", o.all());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let runs = cleaner.join().unwrap();
    assert!(runs > 2, "only {runs} cleanups ran");
    assert_eq!(snapshot_count(&repo, &root), 12);
    larder_ok(&repo, &root, &["check", "--read-data"]);
    println!("{runs} cleanups beside 12 backups");
}
