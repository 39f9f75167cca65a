//! Commands that read the index, and `check`, beside a prune that rewrites
//! the index and deletes packs.
//!
//! A prune replaces index segments (it merges small ones, and drops the
//! packs it deletes) by writing the new segments first and deleting the old
//! ones after; it deletes a pack only once no segment lists it, and a
//! deletion mark once its plan is done (SPEC section 21, rule 5). Another
//! process that listed `index/`, `marks/` or `packs/` before that and reads
//! afterwards finds objects gone. That is the prune's work, not damage: the
//! cache sync lists `index/` again and absorbs the replacements, and `check`
//! reports a vanished pack that no segment lists any more as a notice.

use super::shim::Hold;
use super::{Out, backup_ok, larder_cmd, larder_ok, notices, objects, spawn, wait_bounded};
use crate::support::{assert_same_tree, copy_tree, pack_names, path_str, rand_bytes, write};
use std::collections::BTreeSet;
use std::path::Path;

/// Lines of `o`'s error output that are warnings or errors.
fn complaints(o: &Out) -> Vec<&str> {
    o.err
        .lines()
        .filter(|l| l.starts_with("warning") || l.starts_with("error"))
        .collect()
}

/// Runs `args` held (by the fault shim) at its first open below `dir` of
/// the repository, runs `meanwhile`, lets it go and returns what it did.
fn held_beside(
    repo: &Path,
    cache: &Path,
    args: &[&str],
    dir: &str,
    scratch: &Path,
    meanwhile: impl FnOnce(),
) -> Out {
    let tag = format!("{}-{}", dir, objects(repo, "snapshots"));
    let hold = Hold::new(&repo.join(dir), false, scratch, &tag);
    let mut c = larder_cmd(repo, cache, args);
    hold.inject(&mut c);
    let mut held = spawn(c);
    hold.wait_held(&mut held, &format!("{args:?}, at {dir}/"));
    meanwhile();
    hold.release();
    wait_bounded(held, &format!("{args:?}"))
}

/// A restore into an empty cache (as on a new machine) must absorb every
/// index segment and every deletion mark. Held before it reads them, while
/// a prune merges the segments it listed into one (first case), or
/// completes a plan and deletes its mark (second): let go, it restores the
/// snapshot exactly and warns of nothing. Before the sync listed `index/`
/// again, the first restore skipped each merged segment ("No such file")
/// and failed with "blob … is not in the index"; the second warned of the
/// vanished mark.
#[test]
fn a_sync_beside_a_prune_that_rewrites_the_index_misses_nothing() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let mut ids = Vec::new();
    for g in 0..6u64 {
        write(&src.join(format!("kept-{g}.bin")), &rand_bytes(g, 40_000));
        write(&src.join("changing.bin"), &rand_bytes(100 + g, 200_000));
        ids.push(backup_ok(&repo, &cache, &src));
    }
    let restore = |n: usize| {
        let target = base.path().join(format!("out-{n}"));
        let fresh = base.path().join(format!("fresh-cache-{n}"));
        let args = ["restore", "latest", "--target", path_str(&target)];
        (args.map(String::from), fresh, target)
    };

    // The index: six segments, merged by the prune.
    let segments = objects(&repo, "index");
    assert!(segments >= 6, "{segments} index segments");
    let (args, fresh, target) = restore(0);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let got = held_beside(&repo, &fresh, &args, "index", base.path(), || {
        larder_ok(&repo, &cache, &["prune"]);
        assert!(
            objects(&repo, "index") < segments,
            "the prune merged no segment, so the window tested nothing"
        );
    });
    assert_eq!(got.code, 0, "{}", got.all());
    assert_eq!(complaints(&got), Vec::<&str>::new(), "{}", got.all());
    assert_same_tree(&src, &target.join(src.strip_prefix("/").unwrap()));

    // The marks: a plan for the forgotten snapshots' packs, completed by a
    // prune with no grace period while the restore waits to read its mark.
    larder_ok(&repo, &cache, &["forget", &ids[0], &ids[1], &ids[2]]);
    larder_ok(&repo, &cache, &["prune"]);
    assert!(objects(&repo, "marks") > 0, "the prune marked nothing");
    let packs = pack_names(&repo).len();
    let (args, fresh, target) = restore(1);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let got = held_beside(&repo, &fresh, &args, "marks", base.path(), || {
        larder_ok(&repo, &cache, &["prune", "--keep-delete", "0s"]);
        assert_eq!(objects(&repo, "marks"), 0, "the mark is still there");
        assert!(pack_names(&repo).len() < packs, "no pack was deleted");
    });
    assert_eq!(got.code, 0, "{}", got.all());
    assert_eq!(complaints(&got), Vec::<&str>::new(), "{}", got.all());
    assert_same_tree(&src, &target.join(src.strip_prefix("/").unwrap()));
}

/// `check` held at three points while a prune with no grace period deletes
/// the packs an earlier prune marked (and rewrites the segments that listed
/// them): before it reads the pack headers, before it reads the snapshots
/// (so `--read-data` then reads packs that are gone), and before it reads
/// the index segments. Let go, each finds no problem and names exactly the
/// deleted packs in notices. Before, it failed with "No such file" for each
/// deleted pack (or segment). A pack lost for real, still listed by the
/// index, still fails `check`.
#[test]
fn check_beside_a_prune_that_deletes_finds_no_false_problem() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let cases: [(&str, &[&str]); 3] = [
        ("packs", &["check"]),
        ("snapshots", &["check", "--read-data"]),
        ("index", &["check"]),
    ];
    for (i, (dir, args)) in cases.iter().enumerate() {
        let mut ids = Vec::new();
        for g in 0..3u64 {
            write(
                &src.join("changing.bin"),
                &rand_bytes(1000 * i as u64 + g, 300_000),
            );
            ids.push(backup_ok(&repo, &cache, &src));
        }
        larder_ok(&repo, &cache, &["forget", &ids[0], &ids[1]]);
        larder_ok(&repo, &cache, &["prune"]);
        let before = pack_names(&repo);
        // The check's own cache, as on another machine: the prune's sync of
        // a shared one would already have dropped the packs it deletes.
        let own = base.path().join(format!("cache-{i}"));
        copy_tree(&cache, &own);
        let mut deleted = BTreeSet::new();
        let got = held_beside(&repo, &own, args, dir, base.path(), || {
            larder_ok(&repo, &cache, &["prune", "--keep-delete", "0s"]);
            let after = pack_names(&repo);
            deleted = before.difference(&after).cloned().collect();
        });
        let what = format!("{args:?} held at {dir}/");
        assert!(!deleted.is_empty(), "{what}: the prune deleted no pack");
        assert_eq!(got.code, 0, "{what}: {}", got.all());
        assert!(
            got.out.contains("no errors were found"),
            "{what}: {}",
            got.all()
        );
        let named: BTreeSet<String> = notices(&got)
            .iter()
            .filter(|n| n.contains("deleted by a prune while check ran"))
            .filter_map(|n| n.split('/').nth(2)?.split(':').next())
            .map(String::from)
            .collect();
        assert_eq!(named, deleted, "{what}: {}", got.all());
    }

    // A pack deleted by hand is still listed by the index: a problem.
    let lost = pack_names(&repo).into_iter().next().unwrap();
    std::fs::remove_file(repo.join("packs").join(&lost[..2]).join(&lost)).unwrap();
    for args in [&["check"][..], &["check", "--read-data"]] {
        let got = super::larder_run(&repo, &cache, args);
        assert_eq!(got.code, 1, "{args:?}: {}", got.all());
        assert!(
            got.err
                .contains(&format!("{lost}: pack is in the index but missing"))
                && !got.err.contains("deleted by a prune"),
            "{args:?}: {}",
            got.all()
        );
    }
}
