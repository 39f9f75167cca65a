//! `repair snapshots`: after a pack is lost (and `repair index` run), a
//! damaged snapshot is rewritten into one that restores without the lost
//! files (which are listed), `check` finds nothing missing in it, and the
//! original stays unless `--forget`; truncation keeps the data before the
//! first missing chunk; an unreadable directory becomes empty. It runs
//! beside a backup, and a `kill -9` at any point leaves a repository that a
//! second run finishes, without a duplicate snapshot.

use crate::common::{self, TestRepo, lib_open};
use crate::support::*;
use larder::Id;
use larder::backend::{Backend, Kind};
use larder::pack::BlobType;
use larder::tree::{Node, NodeKind};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A repository with 1 MiB packs, used through the CLI (its library-made
/// cache is dropped).
fn cli_repo() -> TestRepo {
    let t = TestRepo::new();
    drop(t.init());
    fs::remove_dir_all(t.cache_path()).unwrap();
    t
}

/// Every file node of snapshot `id`, by absolute path.
fn files_of(repo: &larder::Repository, id: &Id) -> BTreeMap<String, Node> {
    let snap = load_snap(repo, id);
    let mut out = BTreeMap::new();
    larder::walker::walk(repo, snap.tree, None, &mut |p, n| {
        if n.kind == NodeKind::File {
            out.insert(p.to_string(), n.clone());
        }
    })
    .unwrap();
    out
}

/// Snapshot ids, oldest first.
fn snapshot_ids(repo: &larder::Repository) -> Vec<Id> {
    larder::snapshot::list(repo, &Default::default())
        .unwrap()
        .0
        .into_iter()
        .map(|(id, _)| id)
        .collect()
}

fn pack_holds_trees(repo: &larder::Repository, pack: &Id) -> bool {
    let blobs = repo.index().unwrap().blobs_in_pack(pack).unwrap();
    blobs.iter().any(|e| e.ty == BlobType::Tree)
}

/// `larder --json repair snapshots ARGS`: the change lines and the report.
fn repair_json(
    repo: &Path,
    cache: &Path,
    args: &[&str],
) -> (Vec<serde_json::Value>, serde_json::Value) {
    let mut all = vec!["--json", "repair", "snapshots"];
    all.extend_from_slice(args);
    let (out, _) = cli(repo, cache, &all, 0);
    let mut lines = json_lines(&out);
    let report = lines.pop().expect("a report");
    (
        lines.into_iter().map(|l| l["change"].clone()).collect(),
        report,
    )
}

fn changed_paths(changes: &[serde_json::Value], action: &str) -> BTreeSet<String> {
    changes
        .iter()
        .filter(|c| c["action"] == action)
        .map(|c| c["path"].as_str().unwrap().to_string())
        .collect()
}

/// Restores `spec` with the CLI into a new directory.
fn restore(repo: &Path, cache: &Path, spec: &str) -> tempfile::TempDir {
    let dest = tempfile::tempdir().unwrap();
    cli(
        repo,
        cache,
        &["restore", spec, "--target", path_str(dest.path())],
        0,
    );
    dest
}

/// A backed-up source whose one data pack (no tree blobs) was deleted and
/// the index repaired.
struct Damaged {
    t: TestRepo,
    _base: tempfile::TempDir,
    src: PathBuf,
    original: Id,
    /// Absolute paths of the files with a chunk in the lost pack.
    damaged: BTreeSet<String>,
}

fn damaged_repo() -> Damaged {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    for i in 0..6u64 {
        write(&src.join(format!("f{i}.bin")), &rand_bytes(40 + i, 700_000));
    }
    write(&src.join("keep/small.txt"), b"small and safe\n");
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(&src)],
        0,
    );
    let repo = lib_open(&t.repo_path(), &base.path().join("lib-cache"));
    let original = snapshot_ids(&repo)[0];
    let files = files_of(&repo, &original);
    let packs = repo.index().unwrap().packs().unwrap();
    let lost = packs
        .iter()
        .map(|(id, _)| *id)
        .find(|p| !pack_holds_trees(&repo, p))
        .expect("a pack of data blobs only");
    let mut damaged = BTreeSet::new();
    for (path, n) in &files {
        let locs = repo.lookup_many(&n.content).unwrap();
        if locs.iter().any(|l| l.unwrap().pack == lost) {
            damaged.insert(path.clone());
        }
    }
    assert!(!damaged.is_empty() && damaged.len() < files.len());
    t.backend().delete(Kind::Pack, &lost.to_hex()).unwrap();
    cli(&t.repo_path(), &t.cache_path(), &["repair", "index"], 0);
    Damaged {
        t,
        _base: base,
        src,
        original,
        damaged,
    }
}

/// The restored tree below `dest` is the source without the damaged
/// files, byte for byte.
fn assert_restored_without(dest: &Path, src: &Path, damaged: &BTreeSet<String>) {
    // `SNAPSHOT:SRC` restores the contents of SRC into the target.
    let inside = dest;
    let mut want = list_rel(src);
    for d in damaged {
        let rel = Path::new(d).strip_prefix(src).unwrap();
        want.remove(path_str(rel));
    }
    assert_eq!(list_rel(inside), want);
    for rel in &want {
        let s = src.join(rel);
        if s.is_file() {
            assert_eq!(fs::read(inside.join(rel)).unwrap(), fs::read(&s).unwrap());
        }
    }
}

/// `check --json` problems, each of which must concern snapshot `orig`
/// (still damaged): nothing else in the repository is wrong.
fn assert_only_original_damaged(repo: &Path, cache: &Path, orig: &Id) {
    let mut c = common::larder(repo, cache);
    c.args(["--json", "check"]);
    let (_, out, err) = run(c);
    let rep: serde_json::Value = serde_json::from_str(out.lines().last().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    for p in rep["problems"].as_array().unwrap() {
        let p = p.as_str().unwrap();
        assert!(p.contains(&format!("snapshot {}", orig.short())), "{p}");
    }
}

/// `check` names every file with a chunk the index does not have (and
/// only those), by its path in the snapshot.
#[test]
fn check_names_each_file_whose_chunks_are_missing() {
    let d = damaged_repo();
    let mut c = common::larder(&d.t.repo_path(), &d.t.cache_path());
    c.args(["--json", "check"]);
    let (_, out, err) = run(c);
    let rep: serde_json::Value = serde_json::from_str(out.lines().last().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let mut named = BTreeSet::new();
    for p in rep["problems"].as_array().unwrap() {
        let p = p.as_str().unwrap();
        if let Some((at, _)) = p.split_once(": data blob ") {
            assert!(p.ends_with("is missing from the index"), "{p}");
            let file = d
                .damaged
                .iter()
                .find(|f| at.ends_with(f.as_str()))
                .unwrap_or_else(|| panic!("{p}: not a damaged file"));
            named.insert(file.clone());
        }
    }
    assert_eq!(named, d.damaged, "{rep}");
}

#[test]
fn a_snapshot_with_a_lost_pack_becomes_one_that_restores() {
    let d = damaged_repo();
    let (repo, cache) = (d.t.repo_path(), d.t.cache_path());

    // A dry run says what would change and writes nothing.
    let before = fs::read_dir(repo.join("snapshots")).unwrap().count();
    let (changes, rep) = repair_json(&repo, &cache, &["--dry-run"]);
    assert_eq!(changed_paths(&changes, "file-removed"), d.damaged);
    assert_eq!(rep["dry_run"], true);
    assert!(rep["repaired"][0]["new_snapshot"].is_null());
    assert_eq!(
        fs::read_dir(repo.join("snapshots")).unwrap().count(),
        before
    );

    let (changes, rep) = repair_json(&repo, &cache, &[]);
    assert_eq!(changed_paths(&changes, "file-removed"), d.damaged);
    assert_eq!(changes.len(), d.damaged.len(), "{changes:?}");
    assert_eq!(rep["repaired"].as_array().unwrap().len(), 1, "{rep}");
    let new = Id::from_hex(rep["repaired"][0]["new_snapshot"].as_str().unwrap()).unwrap();

    let lib = lib_open(&repo, &d.t.dir.path().join("lib-cache-2"));
    assert_eq!(snapshot_ids(&lib).len(), 2, "the original stays");
    let orig = load_snap(&lib, &d.original);
    let snap = load_snap(&lib, &new);
    assert_eq!(
        (snap.time_ns, &snap.hostname, &snap.paths),
        (orig.time_ns, &orig.hostname, &orig.paths)
    );
    assert!(
        snap.tags.contains(&"repaired".to_string()),
        "{:?}",
        snap.tags
    );
    assert!(
        snap.tags
            .contains(&format!("original:{}", d.original.short())),
        "{:?}",
        snap.tags
    );

    let dest = restore(
        &repo,
        &cache,
        &format!("{}:{}", new.to_hex(), path_str(&d.src)),
    );
    assert_restored_without(dest.path(), &d.src, &d.damaged);
    // check: only the original still references missing data.
    assert_only_original_damaged(&repo, &cache, &d.original);

    // Run again with --forget: the saved repair is reused, the original goes.
    let (_, rep) = repair_json(&repo, &cache, &["--forget"]);
    assert_eq!(rep["repaired"][0]["reused"], true, "{rep}");
    assert_eq!(rep["repaired"][0]["forgotten"], true, "{rep}");
    let lib = lib_open(&repo, &d.t.dir.path().join("lib-cache-3"));
    assert_eq!(snapshot_ids(&lib), vec![new]);
    let (out, _) = cli(&repo, &cache, &["check"], 0);
    assert!(out.contains("no errors were found"), "{out}");
    // Nothing left to repair.
    let (out, _) = cli(&repo, &cache, &["repair", "snapshots"], 0);
    assert!(out.contains("no snapshots were modified"), "{out}");
}

#[test]
fn truncate_keeps_the_data_before_the_first_missing_chunk() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    write(&src.join("big.bin"), &rand_bytes(77, 4 << 20));
    write(&src.join("other.bin"), &rand_bytes(78, 300_000));
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(&src)],
        0,
    );
    let lib = lib_open(&t.repo_path(), &base.path().join("lib-cache"));
    let original = snapshot_ids(&lib)[0];
    let files = files_of(&lib, &original);
    let big = &files[&format!("{}/big.bin", path_str(&src))];
    let locs: Vec<_> = lib
        .lookup_many(&big.content)
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect();
    // A data-only pack holding a chunk of big.bin but not its first one.
    let lost = locs[locs.len() / 3..]
        .iter()
        .map(|l| l.pack)
        .find(|p| *p != locs[0].pack && !pack_holds_trees(&lib, p))
        .expect("a suitable pack");
    // Expected per file: the plaintext bytes before its first lost chunk.
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for (path, n) in &files {
        let l = lib.lookup_many(&n.content).unwrap();
        if let Some(i) = l.iter().position(|l| l.unwrap().pack == lost) {
            want.insert(
                path.clone(),
                l[..i]
                    .iter()
                    .map(|l| l.unwrap().entry.plain_len as u64)
                    .sum(),
            );
        }
    }
    t.backend().delete(Kind::Pack, &lost.to_hex()).unwrap();
    cli(&t.repo_path(), &t.cache_path(), &["repair", "index"], 0);

    let (changes, rep) = repair_json(&t.repo_path(), &t.cache_path(), &["--truncate"]);
    let got: BTreeMap<String, u64> = changes
        .iter()
        .filter(|c| c["action"] == "file-truncated")
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_string(),
                c["size_after"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert!(want[&format!("{}/big.bin", path_str(&src))] > 0);
    let new = rep["repaired"][0]["new_snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    let dest = restore(
        &t.repo_path(),
        &t.cache_path(),
        &format!("{new}:{}", path_str(&src)),
    );
    let inside = dest.path();
    for name in ["big.bin", "other.bin"] {
        let full = fs::read(src.join(name)).unwrap();
        let keep = want
            .get(&format!("{}/{name}", path_str(&src)))
            .map_or(full.len(), |n| *n as usize);
        assert_eq!(fs::read(inside.join(name)).unwrap(), full[..keep], "{name}");
    }
    assert_only_original_damaged(&t.repo_path(), &t.cache_path(), &original);
}

/// A directory whose tree was in the lost pack becomes empty in the newer
/// snapshot (whose root survived); the older snapshot, whose root tree was
/// lost too, has nothing left and is removed with --forget.
#[test]
fn an_unreadable_directory_becomes_empty_and_a_lost_root_is_forgotten() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    write(&src.join("top.txt"), b"top\n");
    write(&src.join("sub/s1.bin"), &rand_bytes(5, 100_000));
    write(&src.join("sub/deeper/d.txt"), b"deep\n");
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(&src)],
        0,
    );
    let first_packs: BTreeSet<String> = t
        .backend()
        .list(Kind::Pack)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    write(&src.join("new.bin"), &rand_bytes(6, 1_500_000));
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(&src)],
        0,
    );
    let lib = lib_open(&t.repo_path(), &base.path().join("lib-cache"));
    let ids = snapshot_ids(&lib);
    let sub_of = |id: &Id| {
        let s = load_snap(&lib, id);
        larder::walker::tree_at(&lib, s.tree, &format!("{}/sub", path_str(&src))).unwrap()
    };
    assert_eq!(sub_of(&ids[0]), sub_of(&ids[1]), "sub is shared");
    for p in &first_packs {
        t.backend().delete(Kind::Pack, p).unwrap();
    }
    cli(&t.repo_path(), &t.cache_path(), &["repair", "index"], 0);

    let (changes, rep) = repair_json(&t.repo_path(), &t.cache_path(), &["--forget"]);
    let sub = format!("{}/sub", path_str(&src));
    assert_eq!(
        changed_paths(&changes, "dir-emptied"),
        BTreeSet::from([sub])
    );
    assert_eq!(
        changed_paths(&changes, "file-removed"),
        BTreeSet::from([format!("{}/top.txt", path_str(&src))])
    );
    assert_eq!(
        changes
            .iter()
            .filter(|c| c["action"] == "root-unreadable")
            .count(),
        1
    );
    let repaired = rep["repaired"].as_array().unwrap();
    assert_eq!(repaired.len(), 2);
    let lost = repaired
        .iter()
        .find(|r| r["new_snapshot"].is_null())
        .unwrap();
    assert_eq!(lost["snapshot"], ids[0].to_hex());
    assert_eq!(lost["forgotten"], true);
    let lib = lib_open(&t.repo_path(), &base.path().join("lib-cache-2"));
    let left = snapshot_ids(&lib);
    assert_eq!(left.len(), 1);
    let dest = restore(
        &t.repo_path(),
        &t.cache_path(),
        &format!("{}:{}", left[0].to_hex(), path_str(&src)),
    );
    let inside = dest.path();
    assert_eq!(list_rel(inside), set(&["new.bin", "sub"]));
    assert_eq!(
        fs::read(inside.join("new.bin")).unwrap(),
        fs::read(src.join("new.bin")).unwrap()
    );
    cli(&t.repo_path(), &t.cache_path(), &["check"], 0);
}

/// Beside a running backup: both finish, and the repository passes check.
#[test]
fn repair_runs_beside_a_backup() {
    let d = damaged_repo();
    let (repo, cache) = (d.t.repo_path(), d.t.cache_path());
    let other = d.t.dir.path().join("other");
    for i in 0..40u64 {
        write(
            &other.join(format!("o{i:02}")),
            &rand_bytes(900 + i, 1 << 20),
        );
    }
    let mut c = common::larder(&repo, &cache);
    c.args(["backup", path_str(&other)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while fs::read_dir(repo.join("locks")).map_or(0, |r| r.count()) == 0
        && child.try_wait().unwrap().is_none()
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    let (_, rep) = repair_json(&repo, &cache, &["--forget"]);
    if child.try_wait().unwrap().is_some() {
        eprintln!("note: the backup finished before the repair did");
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let new = rep["repaired"][0]["new_snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    cli(&repo, &cache, &["check"], 0);
    let dest = restore(&repo, &cache, &format!("{new}:{}", path_str(&d.src)));
    assert_restored_without(dest.path(), &d.src, &d.damaged);
    let dest = restore(&repo, &cache, &format!("latest:{}", path_str(&other)));
    assert_same_tree(&other, dest.path());
}

fn count(dir: &Path) -> usize {
    let mut n = 0;
    let Ok(rd) = fs::read_dir(dir) else { return 0 };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if e.path().is_dir() {
            n += count(&e.path());
        } else if !name.starts_with(".tmp-") {
            n += 1;
        }
    }
    n
}

/// `kill -9` at many points (after delays, and as soon as a new pack,
/// index segment or snapshot file appears): the repository has nothing
/// wrong but the original's known damage, and a second run completes with
/// exactly one repaired snapshot.
#[test]
fn repair_killed_anywhere_is_finished_by_the_next_run() {
    let d = damaged_repo();
    /// When to kill: given the repository, its file counts before the run,
    /// and the time since the spawn.
    type Probe = Box<dyn Fn(&Path, (usize, usize, usize), Duration) -> bool>;
    let files = |r: &Path| {
        (
            count(&r.join("packs")),
            count(&r.join("index")),
            count(&r.join("snapshots")),
        )
    };
    let mut probes: Vec<(String, Probe)> = Vec::new();
    for ms in [0u64, 1, 3, 8, 20, 60] {
        probes.push((
            format!("after {ms} ms"),
            Box::new(move |_, _, t| t >= Duration::from_millis(ms)),
        ));
    }
    probes.push((
        "at a new pack".into(),
        Box::new(move |r, b, _| files(r).0 > b.0),
    ));
    probes.push((
        "at a new segment".into(),
        Box::new(move |r, b, _| files(r).1 > b.1),
    ));
    probes.push((
        "at a new snapshot".into(),
        Box::new(move |r, b, _| files(r).2 > b.2),
    ));
    let mut killed = 0;
    for (i, (what, probe)) in probes.iter().enumerate() {
        let copy = d.t.dir.path().join(format!("copy{i}"));
        copy_tree(&d.t.repo_path(), &copy);
        let cache = d.t.dir.path().join(format!("cache{i}"));
        let before = files(&copy);
        let mut c = common::larder(&copy, &cache);
        c.args(["repair", "snapshots", "--forget"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        let spawned = Instant::now();
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if probe(&copy, before, spawned.elapsed()) {
                let _ = child.kill();
                let _ = child.wait();
                killed += 1;
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let (p, x, n) = files(&copy);
        eprintln!(
            "{what}: left {} new packs, {} new segments, {n} snapshots",
            p - before.0,
            x - before.1
        );
        assert_only_original_damaged(&copy, &cache, &d.original);
        let (_, rep) = repair_json(&copy, &cache, &["--forget"]);
        assert!(
            rep["repaired"].as_array().unwrap().len() <= 1,
            "{what}: {rep}"
        );
        let lib = lib_open(&copy, &d.t.dir.path().join(format!("lib{i}")));
        let ids = snapshot_ids(&lib);
        assert_eq!(ids.len(), 1, "{what}: one repaired snapshot, no duplicate");
        assert!(load_snap(&lib, &ids[0]).tags.contains(&"repaired".into()));
        let (out, _) = cli(&copy, &cache, &["check"], 0);
        assert!(out.contains("no errors were found"), "{what}: {out}");
        let dest = restore(
            &copy,
            &cache,
            &format!("{}:{}", ids[0].to_hex(), path_str(&d.src)),
        );
        assert_restored_without(dest.path(), &d.src, &d.damaged);
    }
    eprintln!(
        "{killed} of {} runs were killed before they finished",
        probes.len()
    );
}

/// A repository opened by the library (its cache synced then), after which
/// another process backs up new files. Repairing that new snapshot through
/// the first handle finds it whole: `repair_snapshots` brings the index up
/// to date under its lock. From the cache of its open alone, the new
/// snapshot's trees and chunks are unknown, and the repair would empty it
/// (and with `forget`, remove the original).
#[test]
fn repair_syncs_its_index_under_its_lock() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    write(&src.join("old.bin"), &rand_bytes(31, 300_000));
    cli(&repo, &cache, &["backup", path_str(&src)], 0);
    let opened = lib_open(&repo, &t.dir.path().join("own-cache"));
    write(&src.join("sub/new.bin"), &rand_bytes(32, 300_000));
    cli(&repo, &cache, &["backup", path_str(&src)], 0);

    let ids = snapshot_ids(&opened);
    assert_eq!(ids.len(), 2, "{ids:?}");
    let newest = (ids[1], load_snap(&opened, &ids[1]));
    let mut changes = Vec::new();
    let report = larder::maintenance::repair_snapshots::repair_snapshots(
        &opened,
        &[newest],
        Default::default(),
        &mut |id, c| changes.push((*id, c.clone())),
    )
    .unwrap();
    assert_eq!(report.checked, 1);
    assert!(
        changes.is_empty() && report.repaired.is_empty(),
        "a whole snapshot was repaired: {changes:?}"
    );
    assert_eq!(snapshot_ids(&opened), ids, "a snapshot was saved");
    let files = files_of(&opened, &ids[1]);
    assert!(
        files.keys().any(|p| p.ends_with("/sub/new.bin")),
        "{:?}",
        files.keys()
    );
}
