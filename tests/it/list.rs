//! `list` (restic's command): each kind of object it names is exactly
//! what the repository's directory of that kind holds (not the temporary
//! files of writes in progress), `list blobs` is exactly the blobs the
//! pack headers hold, each once, typed; `list locks` takes no lock of its
//! own and shows another process's; an unknown kind is refused.

use crate::faults::{backup_ok, cli_repo, fill, larder_ok, larder_run};
use crate::support::write;
use larder::Id;
use larder::backend::Kind;
use std::collections::BTreeSet;
use std::path::Path;

/// The object names (64 hex digits) below `repo/dir`, at any depth.
fn names_in(repo: &Path, dir: &str) -> Vec<String> {
    let root = repo.join(dir);
    if !root.exists() {
        return Vec::new();
    }
    let mut v: Vec<String> = walkdir::WalkDir::new(root)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| Id::from_hex(n).is_ok())
        .collect();
    v.sort();
    v
}

fn lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_string).collect()
}

#[test]
fn list_prints_exactly_what_each_kind_holds() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    fill(&src, 1, 4, 50 << 10);
    let first = backup_ok(&repo, &cache, &src);
    fill(&src.join("more"), 2, 3, 50 << 10);
    backup_ok(&repo, &cache, &src);
    // A deletion mark: forget one, prune with the default grace period.
    larder_ok(
        &repo,
        &cache,
        &["forget", &first, "--prune", "--max-unused", "0"],
    );
    // A write in progress: a temporary file is no object.
    write(&repo.join("snapshots/.tmp-123-abc"), b"half");

    for (kind, dir) in [
        ("snapshots", "snapshots"),
        ("keys", "keys"),
        ("packs", "packs"),
        ("index", "index"),
        ("marks", "marks"),
        ("dicts", "dicts"),
    ] {
        let o = larder_ok(&repo, &cache, &["list", kind]);
        assert_eq!(lines(&o.out), names_in(&repo, dir), "list {kind}");
    }
    assert_eq!(names_in(&repo, "snapshots").len(), 1);
    assert!(!names_in(&repo, "marks").is_empty(), "no mark to list");

    // Blobs: what the pack headers hold, each once, in id order.
    let lib = t.open().unwrap();
    let mut want = BTreeSet::new();
    for e in lib.backend().list(Kind::Pack).unwrap() {
        let pack = Id::from_hex(&e.name).unwrap();
        for b in lib.read_pack_header(&pack, e.size).unwrap() {
            let word = match b.ty {
                larder::pack::BlobType::Data => "data",
                larder::pack::BlobType::Tree => "tree",
            };
            want.insert((b.id.to_hex(), word));
        }
    }
    let o = larder_ok(&repo, &cache, &["list", "blobs"]);
    let want: Vec<String> = want.iter().map(|(id, w)| format!("{w} {id}")).collect();
    assert_eq!(lines(&o.out), want);
    assert!(want.iter().any(|l| l.starts_with("tree ")) && want.len() > 8);

    // Locks: another process's shows, and `list locks` adds none.
    assert_eq!(larder_ok(&repo, &cache, &["list", "locks"]).out, "");
    let held = lib.lock_shared().unwrap();
    let o = larder_ok(&repo, &cache, &["list", "locks"]);
    assert_eq!(lines(&o.out), names_in(&repo, "locks"));
    assert_eq!(lines(&o.out).len(), 1);
    drop(held);

    let o = larder_run(&repo, &cache, &["list", "blob"]);
    assert!(
        o.code != 0 && o.err.contains("possible values"),
        "{}",
        o.all()
    );
}
