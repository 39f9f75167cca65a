//! `repair packs` (restic's command): a pack with a damaged blob is
//! salvaged (its other blobs copied into new packs, the pack deleted), the
//! lost blob is then missing from the index, and the next backup of the
//! same files stores it again, after which the old snapshot restores
//! exactly and `check --read-data` passes. A pack whose header is damaged
//! loses nothing (its blobs are found by the index); an intact pack is
//! left alone; unknown or ambiguous ids are clear errors. (Killed at each
//! open and held at each open beside a backup: `faults::crash_points`,
//! `faults::interleavings`.)

use crate::common::lib_open;
use crate::faults::{
    assert_same_manifest, backup_ok, check_passes, cli_repo, fill, larder_ok, larder_run, manifest,
    restore_cli,
};
use crate::support::{json_lines, set_mode};
use larder::Id;
use larder::pack::{BlobType, PackEntry};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// `larder --json repair packs PACKS`: its report.
pub fn repair_json(repo: &Path, cache: &Path, packs: &[&str]) -> Value {
    let o = larder_ok(
        repo,
        cache,
        &[&["--json", "repair", "packs"], packs].concat(),
    );
    json_lines(&o.out).pop().unwrap()
}

/// The data packs of the repository (none holding a tree), each with its
/// blobs as the index lists them, largest count first. Read through the
/// library with a cache of its own in `scratch`.
pub fn data_packs(repo: &Path, scratch: &Path) -> Vec<(Id, Vec<PackEntry>)> {
    let r = lib_open(repo, scratch);
    let mut idx = r.index().unwrap();
    let mut out: Vec<(Id, Vec<PackEntry>)> = idx
        .packs()
        .unwrap()
        .into_iter()
        .map(|(id, _)| (id, idx.blobs_in_pack(&id).unwrap()))
        .filter(|(_, b)| b.iter().all(|e| e.ty == BlobType::Data))
        .collect();
    out.sort_by_key(|(_, b)| std::cmp::Reverse(b.len()));
    out
}

/// Where pack `id` lies in a local repository.
pub fn pack_path(repo: &Path, id: &Id) -> PathBuf {
    let hex = id.to_hex();
    repo.join("packs").join(&hex[..2]).join(&hex)
}

/// Flips the byte at `at` of pack `id` (made writable first).
pub fn flip_pack_byte(repo: &Path, id: &Id, at: u64) {
    let p = pack_path(repo, id);
    set_mode(&p, 0o644);
    let mut b = fs::read(&p).unwrap();
    b[at as usize] ^= 0x5a;
    fs::write(&p, b).unwrap();
}

/// Damages pack `id`'s header (the byte just before its 12-byte trailer).
pub fn damage_header(repo: &Path, id: &Id) {
    let len = fs::metadata(pack_path(repo, id)).unwrap().len();
    flip_pack_byte(repo, id, len - 13);
}

/// The paths of snapshot `snap`'s files whose content uses one of `ids`.
fn files_using(repo: &Path, scratch: &Path, snap: &str, ids: &BTreeSet<Id>) -> BTreeSet<String> {
    let r = lib_open(repo, scratch);
    let s = larder::snapshot::load(&r, snap).unwrap();
    let mut out = BTreeSet::new();
    larder::walker::walk(&r, s.tree, None, &mut |p, n| {
        if n.content.iter().any(|c| ids.contains(c)) {
            out.insert(p.to_string());
        }
    })
    .unwrap();
    out
}

/// The blob ids `larder list blobs` prints.
fn listed_blobs(repo: &Path, cache: &Path) -> Vec<String> {
    let o = larder_ok(repo, cache, &["list", "blobs"]);
    o.out
        .lines()
        .map(|l| l.split_whitespace().last().unwrap().to_string())
        .collect()
}

#[test]
fn a_damaged_blob_is_lost_alone_and_the_next_backup_heals_the_snapshot() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    fill(&src, 1, 12, 300 << 10);
    let id = backup_ok(&repo, &cache, &src);
    let want = manifest(&src);
    let packs = data_packs(&repo, &t.dir.path().join("lib-cache"));
    let (pack, entries) = packs.first().unwrap().clone();
    assert!(entries.len() >= 2, "a pack of one blob: {entries:?}");
    let bad = entries[entries.len() / 2];
    flip_pack_byte(&repo, &pack, bad.offset + bad.stored_len as u64 / 2);

    let c = larder_run(&repo, &cache, &["check", "--read-data"]);
    assert_eq!(c.code, 1, "{}", c.all());
    let hint = format!("larder repair packs {}", pack.to_hex());
    assert!(c.err.contains(&hint), "{}", c.all());
    let c = larder_run(&repo, &cache, &["--json", "check", "--read-data"]);
    let v: Value = serde_json::from_str(&c.out).unwrap();
    assert_eq!(
        v["damaged_packs"],
        serde_json::json!([pack.to_hex()]),
        "{v}"
    );

    // `find --pack` names exactly the files using one of the pack's blobs.
    let ids: BTreeSet<Id> = entries.iter().map(|e| e.id).collect();
    let want_files = files_using(&repo, &t.dir.path().join("lib-cache"), &id, &ids);
    assert!(!want_files.is_empty());
    let o = larder_ok(
        &repo,
        &cache,
        &["--json", "find", "--pack", &pack.to_hex()[..12]],
    );
    let mut found = BTreeSet::new();
    for m in json_lines(&o.out)
        .iter()
        .filter(|m| m["message_type"] == "match")
    {
        assert_eq!(m["snapshot"], id.as_str(), "{m}");
        let blob = Id::from_hex(m["id"].as_str().unwrap()).unwrap();
        assert!(ids.contains(&blob), "{m}");
        found.insert(m["path"].as_str().unwrap().to_string());
    }
    assert_eq!(found, want_files);

    let r = repair_json(&repo, &cache, &[&pack.to_hex()[..10]]);
    let p = &r["packs"][0];
    assert_eq!(p["pack"], pack.to_hex(), "{r}");
    assert_eq!(p["outcome"], "repaired", "{r}");
    assert_eq!(p["salvaged"], entries.len() - 1, "{r}");
    let lost = p["lost"].as_array().unwrap();
    assert_eq!(lost.len(), 1, "{r}");
    assert_eq!(lost[0]["id"], bad.id.to_hex(), "{r}");
    assert_eq!(lost[0]["type"], "data", "{r}");
    assert_eq!(r["written"]["blobs_added"], entries.len() - 1, "{r}");
    assert!(!pack_path(&repo, &pack).exists(), "the damaged pack stays");
    let blobs = listed_blobs(&repo, &cache);
    assert!(!blobs.contains(&bad.id.to_hex()), "the lost blob is listed");
    for e in entries.iter().filter(|e| e.id != bad.id) {
        assert!(
            blobs.contains(&e.id.to_hex()),
            "salvaged {} not listed",
            e.id
        );
    }
    assert!(
        fs::read_dir(repo.join("marks")).map_or(0, |d| d.count()) == 0,
        "the deletion plan stays"
    );
    // The snapshot misses the lost blob until a backup stores it again.
    let c = larder_run(&repo, &cache, &["check"]);
    assert_eq!(c.code, 1, "{}", c.all());
    assert!(c.all().contains(&bad.id.to_hex()[..8]), "{}", c.all());

    let again = backup_ok(&repo, &cache, &src);
    assert_ne!(again, id);
    assert!(listed_blobs(&repo, &cache).contains(&bad.id.to_hex()));
    check_passes(&repo, &cache, true, "after the healing backup");
    let target = t.dir.path().join("back");
    let got = restore_cli(&repo, &cache, &id, &src, &target);
    assert_same_manifest(&want, &manifest(&got), "the old snapshot, healed");
}

#[test]
fn a_damaged_header_loses_nothing_and_an_intact_pack_is_left_alone() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    fill(&src, 2, 12, 300 << 10);
    let id = backup_ok(&repo, &cache, &src);
    let want = manifest(&src);
    let packs = data_packs(&repo, &t.dir.path().join("lib-cache"));
    assert!(packs.len() >= 2, "{} data packs", packs.len());
    let (intact, _) = packs[1].clone();
    let before = fs::read(pack_path(&repo, &intact)).unwrap();
    let r = repair_json(&repo, &cache, &[&intact.to_hex()]);
    assert_eq!(r["packs"][0]["outcome"], "intact", "{r}");
    assert_eq!(r["packs"][0]["lost"], serde_json::json!([]), "{r}");
    assert_eq!(r["written"]["packs_written"], 0, "{r}");
    assert_eq!(fs::read(pack_path(&repo, &intact)).unwrap(), before);

    let (pack, entries) = packs[0].clone();
    damage_header(&repo, &pack);
    let c = larder_run(&repo, &cache, &["check", "--read-data"]);
    assert_eq!(c.code, 1, "{}", c.all());
    let r = repair_json(&repo, &cache, &[&pack.to_hex()]);
    let p = &r["packs"][0];
    assert_eq!(p["outcome"], "repaired", "{r}");
    assert_eq!(p["salvaged"], entries.len(), "{r}");
    assert_eq!(p["lost"], serde_json::json!([]), "{r}");
    assert!(
        p["problems"].as_array().unwrap().len() >= 2,
        "the name and the header: {r}"
    );
    assert!(!pack_path(&repo, &pack).exists());
    check_passes(&repo, &cache, true, "after the header repair");
    let got = restore_cli(&repo, &cache, &id, &src, &t.dir.path().join("back"));
    assert_same_manifest(&want, &manifest(&got), "after the header repair");
    // A prune afterwards finds nothing of the repair to finish.
    larder_ok(&repo, &cache, &["prune", "--keep-delete", "0s"]);
    check_passes(&repo, &cache, true, "after a prune");
}

#[test]
fn unknown_and_ambiguous_packs_are_clear_errors_that_change_nothing() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    fill(&src, 3, 40, 100 << 10);
    backup_ok(&repo, &cache, &src);
    let packs = data_packs(&repo, &t.dir.path().join("lib-cache"));
    let names: Vec<String> = packs.iter().map(|(id, _)| id.to_hex()).collect();
    let absent = (0..=255u8)
        .map(|b| format!("{b:02x}"))
        .find(|p| !names.iter().any(|n| n.starts_with(p)))
        .unwrap();
    let shared = (0..=15u8)
        .map(|b| format!("{b:x}"))
        .find(|p| names.iter().filter(|n| n.starts_with(p)).count() >= 2);
    let before = crate::faults::snapshot_names(&repo);
    let mut cases = vec![
        (absent.clone(), "neither the storage nor the index has it"),
        ("xyz".to_string(), "is not a pack id"),
    ];
    if let Some(p) = shared {
        cases.push((p, "give more of the id"));
    }
    for (arg, says) in cases {
        let o = larder_run(&repo, &cache, &["repair", "packs", &arg]);
        assert_eq!(o.code, 1, "{arg}: {}", o.all());
        assert!(o.err.contains(says), "{arg}: {}", o.all());
    }
    let o = larder_run(&repo, &cache, &["repair", "packs"]);
    assert!(
        o.code == 1 && o.err.contains("required arguments were not provided"),
        "no pack named: {}",
        o.all()
    );
    for n in &names {
        assert!(pack_path(&repo, &Id::from_hex(n).unwrap()).exists());
    }
    assert_eq!(crate::faults::snapshot_names(&repo), before);
    check_passes(&repo, &cache, true, "after the refused repairs");
}

/// A blob held by two packs, both named: its copy in the one pack is
/// damaged, the other pack's header is. Neither copy counts as kept by the
/// other (both packs go), so the good one is salvaged, and the snapshot
/// restores exactly.
#[test]
fn a_blob_in_two_named_packs_is_salvaged_from_the_good_copy() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    fill(&src, 4, 12, 300 << 10);
    let id = backup_ok(&repo, &cache, &src);
    let want = manifest(&src);
    let scratch = t.dir.path().join("lib-cache");
    let (a, entries) = data_packs(&repo, &scratch).first().unwrap().clone();
    let x = entries[entries.len() / 2];
    // A second pack holding a copy of blob x alone.
    let b = {
        let r = lib_open(&repo, &scratch);
        let plain = r.read_blob(&x.id).unwrap();
        let mut p = larder::packer::Packer::new(&r).unwrap();
        p.add_prepared(larder::packer::seal_blob(&r, BlobType::Data, x.id, &plain).unwrap())
            .unwrap();
        p.finish().unwrap();
        let packs = data_packs(&repo, &scratch);
        packs
            .iter()
            .find(|(_, e)| e.len() == 1 && e[0].id == x.id)
            .unwrap()
            .0
    };
    flip_pack_byte(&repo, &a, x.offset + x.stored_len as u64 / 2);
    damage_header(&repo, &b);
    let r = repair_json(&repo, &cache, &[&a.to_hex(), &b.to_hex()]);
    assert_eq!(r["packs"][0]["lost"][0]["id"], x.id.to_hex(), "{r}");
    assert_eq!(r["packs"][1]["lost"], serde_json::json!([]), "{r}");
    assert!(listed_blobs(&repo, &cache).contains(&x.id.to_hex()), "{r}");
    assert!(!pack_path(&repo, &a).exists() && !pack_path(&repo, &b).exists());
    check_passes(&repo, &cache, true, "after repairing both");
    let got = restore_cli(&repo, &cache, &id, &src, &t.dir.path().join("back"));
    assert_same_manifest(&want, &manifest(&got), "after repairing both");
}
