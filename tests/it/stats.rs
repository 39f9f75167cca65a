//! `stats`: each mode's numbers against ones computed independently, from
//! the source files that were backed up (sizes, distinct contents, hard
//! links, entries) or by walking the snapshot trees and the index by hand.

use crate::common::{self, TestRepo};
use crate::support::*;
use larder::Id;
use larder::backend::{Backend, Kind};
use larder::pack::BlobType;
use larder::tree::NodeKind;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn cli_repo() -> TestRepo {
    let t = TestRepo::new();
    drop(t.init());
    fs::remove_dir_all(t.cache_path()).unwrap();
    t
}

fn lib_open(t: &TestRepo, name: &str) -> larder::Repository {
    larder::Repository::open(
        t.backend(),
        &larder::keys::Credential::passphrase(common::PASS),
        &t.dir.path().join(name),
    )
    .unwrap()
}

/// What restoring `src` as backed up writes, by restic's rule: (bytes of
/// regular files, hard links once; entries: everything below `src`, `src`
/// itself and the directories above it, which a snapshot records too).
fn expected_restore(src: &Path) -> (u64, u64) {
    let mut size = 0;
    let mut entries = src.ancestors().count() as u64 - 1;
    let mut inodes = HashSet::new();
    for e in walkdir::WalkDir::new(src).min_depth(1) {
        let e = e.unwrap();
        let md = e.path().symlink_metadata().unwrap();
        entries += 1;
        if md.is_file() && (md.nlink() == 1 || inodes.insert((md.dev(), md.ino()))) {
            size += md.len();
        }
    }
    (size, entries)
}

/// The contents of the regular files below `src`.
fn contents(src: &Path) -> BTreeSet<Vec<u8>> {
    walkdir::WalkDir::new(src)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| fs::read(e.path()).unwrap())
        .collect()
}

/// Text that compresses well but has no repeated chunk.
fn text(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while out.len() < n {
        out.extend_from_slice(
            format!("line {i} of a long and quite compressible text\n").as_bytes(),
        );
        i += 1;
    }
    out.truncate(n);
    out
}

/// `larder --json stats ARGS` as JSON.
fn stats(t: &TestRepo, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json", "stats"];
    all.extend_from_slice(args);
    let (out, _) = cli(&t.repo_path(), &t.cache_path(), &all, 0);
    json_lines(&out).pop().unwrap()
}

fn u(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} missing: {v}"))
}

/// Two snapshots of a source with duplicates, a hard link, an empty file,
/// a symlink and compressible text; returns the repository, the source,
/// and for each snapshot its expected restore size and contents.
struct Fixture {
    t: TestRepo,
    _base: tempfile::TempDir,
    restore: Vec<(u64, u64)>,
    contents: BTreeSet<Vec<u8>>,
}

fn fixture() -> Fixture {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    write(&src.join("a.bin"), &rand_bytes(1, 500_000));
    write(&src.join("b.bin"), &rand_bytes(2, 300_000));
    write(&src.join("dup.bin"), &rand_bytes(1, 500_000));
    write(&src.join("text.txt"), &text(200_000));
    write(&src.join("empty.txt"), b"");
    write(&src.join("dir/c.bin"), &rand_bytes(3, 150_000));
    fs::hard_link(src.join("dir/c.bin"), src.join("hl.bin")).unwrap();
    std::os::unix::fs::symlink("a.bin", src.join("link")).unwrap();
    let (r, c) = (&t.repo_path(), &t.cache_path());
    cli(r, c, &["backup", path_str(&src)], 0);
    let mut restore = vec![expected_restore(&src)];
    let mut all = contents(&src);
    write(&src.join("new.bin"), &rand_bytes(4, 250_000));
    fs::remove_file(src.join("b.bin")).unwrap();
    cli(r, c, &["backup", "--tag", "second", path_str(&src)], 0);
    restore.push(expected_restore(&src));
    all.extend(contents(&src));
    Fixture {
        t,
        _base: base,
        restore,
        contents: all,
    }
}

/// Every indexed blob: id → (type, stored_len, plain_len, compressed),
/// one copy each, read from the index cache by hand.
fn index_blobs(repo: &larder::Repository) -> HashMap<Id, (BlobType, u64, u64, bool)> {
    let mut out = HashMap::new();
    let packs = repo.index().unwrap().packs().unwrap();
    for (p, _) in packs {
        for e in repo.index().unwrap().blobs_in_pack(&p).unwrap() {
            out.entry(e.id).or_insert((
                e.ty,
                e.stored_len as u64,
                e.plain_len as u64,
                e.compression != 0,
            ));
        }
    }
    out
}

/// Every blob snapshot `id` reaches (its trees and its files' chunks).
fn reachable(repo: &larder::Repository, id: &Id) -> HashSet<Id> {
    let snap = load_snap(repo, id);
    let mut out = HashSet::from([snap.tree]);
    larder::walker::walk(repo, snap.tree, None, &mut |_, n| {
        out.extend(n.subtree);
        if n.kind == NodeKind::File {
            out.extend(n.content.iter().copied());
        }
    })
    .unwrap();
    out
}

#[test]
fn restore_size_and_files_by_contents_match_the_source() {
    let f = fixture();
    let st = stats(&f.t, &[]);
    assert_eq!(u(&st, "snapshots_count"), 2);
    let (size, entries) = f.restore.iter().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert_eq!(u(&st, "total_size"), size, "{st}");
    assert_eq!(u(&st, "total_file_count"), entries, "{st}");

    // Filters and explicit snapshots select what is counted.
    let st = stats(&f.t, &["--tag", "second"]);
    assert_eq!(u(&st, "snapshots_count"), 1);
    assert_eq!(u(&st, "total_size"), f.restore[1].0);
    let st = stats(&f.t, &["latest"]);
    assert_eq!(u(&st, "total_file_count"), f.restore[1].1);

    let st = stats(&f.t, &["--mode", "files-by-contents"]);
    assert_eq!(u(&st, "total_file_count"), f.contents.len() as u64, "{st}");
    let distinct: u64 = f.contents.iter().map(|c| c.len() as u64).sum();
    assert_eq!(u(&st, "total_size"), distinct, "{st}");
}

#[test]
fn raw_data_and_blobs_per_file_match_the_index_and_the_trees() {
    let f = fixture();
    let lib = lib_open(&f.t, "lib-cache");
    let blobs = index_blobs(&lib);
    // Every blob is used by the two snapshots.
    let st = stats(&f.t, &["--mode", "raw-data"]);
    assert_eq!(u(&st, "total_blob_count"), blobs.len() as u64, "{st}");
    let stored: u64 = blobs.values().map(|b| b.1).sum();
    let plain: u64 = blobs.values().map(|b| b.2).sum();
    assert_eq!(u(&st, "total_size"), stored);
    assert_eq!(u(&st, "total_uncompressed_size"), plain);
    let data_plain: u64 = blobs
        .values()
        .filter(|b| b.0 == BlobType::Data)
        .map(|b| b.2)
        .sum();
    let distinct: u64 = f.contents.iter().map(|c| c.len() as u64).sum();
    assert_eq!(
        data_plain, distinct,
        "chunks hold each distinct content once"
    );
    let (cs, cp) = blobs
        .values()
        .filter(|b| b.3)
        .fold((0, 0), |a, b| (a.0 + b.1, a.1 + b.2));
    assert!(cs > 0, "the text compresses");
    let ratio = st["compression_ratio"].as_f64().unwrap();
    assert!((ratio - cp as f64 / cs as f64).abs() < 1e-9, "{st}");

    // One snapshot: the blobs it reaches, counted by walking it.
    let latest = larder::snapshot::resolve(&lib, "latest", &Default::default())
        .unwrap()
        .0;
    let reach = reachable(&lib, &latest);
    let st = stats(&f.t, &["--mode", "raw-data", "latest"]);
    assert_eq!(u(&st, "total_blob_count"), reach.len() as u64);
    let want: u64 = reach.iter().map(|id| blobs[id].1).sum();
    assert_eq!(u(&st, "total_size"), want);

    // blobs-per-file: each distinct non-empty content's chunks, once (the
    // random and text files share no chunk).
    let st = stats(&f.t, &["--mode", "blobs-per-file"]);
    let nonempty: Vec<&Vec<u8>> = f.contents.iter().filter(|c| !c.is_empty()).collect();
    assert_eq!(u(&st, "total_file_count"), nonempty.len() as u64, "{st}");
    assert_eq!(u(&st, "total_size"), distinct);
    let data_blobs = blobs.values().filter(|b| b.0 == BlobType::Data).count();
    assert_eq!(u(&st, "total_blob_count"), data_blobs as u64);
}

/// A file changed in place counts its shared chunks once for its path.
#[test]
fn blobs_per_file_counts_chunks_once_per_path() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let v1 = rand_bytes(11, 600_000);
    write(&src.join("grows.bin"), &v1);
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(&src)],
        0,
    );
    let mut v2 = v1.clone();
    v2.extend_from_slice(&rand_bytes(12, 200_000));
    write(&src.join("grows.bin"), &v2);
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(&src)],
        0,
    );
    let lib = lib_open(&t, "lib-cache");
    let mut chunks: HashMap<Id, u64> = HashMap::new();
    let mut lists = Vec::new();
    for (id, _) in larder::snapshot::list(&lib, &Default::default()).unwrap().0 {
        let snap = load_snap(&lib, &id);
        larder::walker::walk(&lib, snap.tree, None, &mut |_, n| {
            if n.kind == NodeKind::File {
                lists.push(n.content.clone());
            }
        })
        .unwrap();
    }
    for l in &lists {
        for c in l {
            let plain = lib.lookup(c).unwrap().unwrap().entry.plain_len as u64;
            chunks.insert(*c, plain);
        }
    }
    let shared = lists[0].iter().filter(|c| lists[1].contains(c)).count();
    assert!(shared > 0, "the versions share chunks");
    let st = stats(&t, &["--mode", "blobs-per-file"]);
    assert_eq!(u(&st, "total_file_count"), 1);
    assert_eq!(u(&st, "total_blob_count"), chunks.len() as u64);
    assert_eq!(u(&st, "total_size"), chunks.values().sum::<u64>());
    assert!(u(&st, "total_size") < (v1.len() + v2.len()) as u64);
}

#[test]
fn repository_totals_dedup_and_unused_bytes() {
    let f = fixture();
    let (r, c) = (&f.t.repo_path(), &f.t.cache_path());
    let st = stats(&f.t, &["--mode", "repository"]);
    let lib = lib_open(&f.t, "lib-cache");
    let blobs = index_blobs(&lib);
    let (packs, pack_bytes) = pack_files(r);
    assert_eq!(
        (u(&st, "packs"), u(&st, "pack_bytes")),
        (packs as u64, pack_bytes)
    );
    assert_eq!(u(&st, "blobs"), blobs.len() as u64);
    assert_eq!(u(&st, "duplicate_blob_copies"), 0);
    let trees = blobs.values().filter(|b| b.0 == BlobType::Tree).count() as u64;
    assert_eq!(u(&st, "tree_blobs"), trees);
    assert_eq!(
        u(&st, "stored_bytes"),
        blobs.values().map(|b| b.1).sum::<u64>()
    );
    let restore: u64 = f.restore.iter().map(|r| r.0).sum();
    let unique: u64 = f.contents.iter().map(|c| c.len() as u64).sum();
    assert_eq!(u(&st, "restore_size"), restore);
    assert_eq!(u(&st, "unique_data_size"), unique);
    let dedup = st["dedup_factor"].as_f64().unwrap();
    assert!(
        (dedup - restore as f64 / unique as f64).abs() < 1e-9,
        "{st}"
    );
    assert!(dedup > 1.5, "two snapshots of mostly the same data: {st}");
    assert_eq!(u(&st, "unused_blobs"), 0, "{st}");

    // Without the first snapshot, what only it used awaits prune.
    let first = larder::snapshot::list(&lib, &Default::default()).unwrap().0[0].0;
    let second = larder::snapshot::list(&lib, &Default::default()).unwrap().0[1].0;
    f.t.backend()
        .delete(Kind::Snapshot, &first.to_hex())
        .unwrap();
    let keep = reachable(&lib, &second);
    let unused: Vec<&(BlobType, u64, u64, bool)> = blobs
        .iter()
        .filter(|(id, _)| !keep.contains(id))
        .map(|(_, b)| b)
        .collect();
    let st = stats(&f.t, &["--mode", "repository"]);
    assert_eq!(u(&st, "unused_blobs"), unused.len() as u64, "{st}");
    assert_eq!(
        u(&st, "unused_bytes"),
        unused.iter().map(|b| b.1).sum::<u64>()
    );
    assert!(
        u(&st, "unused_bytes") >= 300_000,
        "b.bin's data is unused: {st}"
    );
    assert_eq!(
        u(&st, "used_blobs") + u(&st, "unused_blobs"),
        u(&st, "blobs")
    );

    // The repository mode takes no selection; unknown modes are named.
    let (_, err) = cli(r, c, &["stats", "--mode", "repository", "latest"], 1);
    assert!(err.contains("every snapshot"), "{err}");
    let (_, err) = cli(r, c, &["stats", "--mode", "sizes"], 1);
    assert!(
        err.contains("restore-size") && err.contains("raw-data"),
        "{err}"
    );
    // The human form names the figures.
    let (out, _) = cli(r, c, &["stats", "--mode", "repository"], 0);
    assert!(
        out.contains("Dedup Factor") && out.contains("awaiting prune"),
        "{out}"
    );
}
