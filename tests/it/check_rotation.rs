//! `check --read-data-subset`: a percentage rotates through the packs
//! (never verified first, then the longest ago), remembers across runs what
//! it verified, and so finds a damaged pack within ceil(100/N) runs; restic's
//! `n/t` slices partition the packs.

use crate::common::{self, TestRepo};
use crate::support::*;
use larder::Id;
use larder::check::rotation::VerifyLog;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A repository (1 MiB packs) holding about `mib` MiB of incompressible
/// data, used through the CLI only.
fn repo_with_packs(mib: usize) -> (TestRepo, tempfile::TempDir) {
    let t = TestRepo::new();
    drop(t.init());
    fs::remove_dir_all(t.cache_path()).unwrap();
    let src = tempfile::tempdir().unwrap();
    for i in 0..mib {
        write(
            &src.path().join(format!("f{i:03}")),
            &rand_bytes(7000 + i as u64, 1 << 20),
        );
    }
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(src.path())],
        0,
    );
    (t, src)
}

/// Every pack file in storage: id → path.
fn pack_paths(repo: &Path) -> BTreeMap<Id, PathBuf> {
    let mut out = BTreeMap::new();
    for sub in fs::read_dir(repo.join("packs")).unwrap() {
        let sub = sub.unwrap().path();
        if !sub.is_dir() {
            continue;
        }
        for f in fs::read_dir(&sub).unwrap() {
            let p = f.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if let Ok(id) = Id::from_hex(&name) {
                out.insert(id, p);
            }
        }
    }
    out
}

/// `larder --json check ARGS`: (exit code, the report).
fn check_json(t: &TestRepo, args: &[&str]) -> (i32, serde_json::Value) {
    let mut c = common::larder(&t.repo_path(), &t.cache_path());
    c.arg("--json").arg("check").args(args);
    let (code, out, err) = run(c);
    let line = out
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no output: {err}"));
    (code, serde_json::from_str(line).unwrap())
}

/// The verification record the CLI keeps: pack → run that verified it.
fn record(t: &TestRepo) -> BTreeMap<Id, i64> {
    let repo = t.open().unwrap();
    let log = VerifyLog::open(&repo).unwrap();
    log.all()
        .unwrap()
        .into_iter()
        .map(|(id, v)| (id, v.run))
        .collect()
}

/// The packs the latest run recorded.
fn latest_run(rec: &BTreeMap<Id, i64>) -> BTreeSet<Id> {
    let max = rec.values().copied().max().unwrap_or(0);
    rec.iter()
        .filter(|(_, r)| **r == max)
        .map(|(id, _)| *id)
        .collect()
}

fn flip_a_data_byte(p: &Path) {
    let mut b = fs::read(p).unwrap();
    // Blobs come first in a pack; the header is at the end.
    b[100] ^= 0x40;
    fs::write(p, b).unwrap();
}

/// A nightly N% check finds a damaged pack within ceil(100/N) runs, even
/// the pack the rotation reaches last; each run before it reads new packs
/// and reports how much has been verified.
#[test]
fn a_damaged_pack_is_found_within_one_rotation() {
    let (t, _src) = repo_with_packs(24);
    let packs = pack_paths(&t.repo_path());
    let total = packs.len() as u64;
    assert!(total >= 20, "only {total} packs");
    let pct = 10u64;
    let per_run = (total * pct).div_ceil(100);
    // Of packs never verified, those with the greatest id come last: the
    // data pack with the greatest id (the tree pack is too small for the
    // flipped byte to land in its blobs).
    let (victim, path) = packs
        .iter()
        .rev()
        .find(|(_, p)| fs::metadata(p).unwrap().len() > 64 << 10)
        .unwrap();
    flip_a_data_byte(path);
    // Structure alone does not read blob bytes.
    check_json(&t, &[])
        .0
        .eq(&0)
        .then_some(())
        .expect("plain check passes");

    let arg = format!("{pct}%");
    let mut found_at = None;
    for run_no in 1..=100u64.div_ceil(pct) {
        let (code, rep) = check_json(&t, &["--read-data-subset", &arg]);
        let v = &rep["verified"];
        assert_eq!(v["packs_total"].as_u64(), Some(total), "{rep}");
        if code != 0 {
            let problems = rep["problems"].to_string();
            assert!(problems.contains(&victim.to_hex()), "{problems}");
            found_at = Some(run_no);
            break;
        }
        assert_eq!(rep["packs_read"].as_u64(), Some(per_run), "{rep}");
        assert_eq!(
            v["packs_verified"].as_u64(),
            Some((run_no * per_run).min(total)),
            "run {run_no}: {rep}"
        );
        assert!(v["oldest_verification"].is_string(), "{rep}");
    }
    let at = found_at.expect("the damaged pack was never read");
    assert!(at <= 100u64.div_ceil(pct));
    // Still reported next time: a damaged pack is never recorded as verified.
    assert!(!record(&t).contains_key(victim));
    let (code, _) = check_json(&t, &["--read-data-subset", &arg]);
    assert_eq!(code, 1);
}

/// What each run verified is remembered across processes: after a full
/// rotation every pack is verified, and the next run reads again the packs
/// the first run read (verified longest ago), no others.
#[test]
fn verification_dates_survive_between_runs_and_the_oldest_go_first() {
    let (t, _src) = repo_with_packs(12);
    let all: BTreeSet<Id> = pack_paths(&t.repo_path()).into_keys().collect();
    let total = all.len() as u64;
    let per_run = (total * 25).div_ceil(100);
    let runs = total.div_ceil(per_run);
    let mut first_run = BTreeSet::new();
    for i in 1..=runs {
        let (code, rep) = check_json(&t, &["--read-data-subset", "25%"]);
        assert_eq!(code, 0, "{rep}");
        let rec = record(&t);
        let latest = latest_run(&rec);
        if i == 1 {
            first_run = latest.clone();
        }
        assert_eq!(
            rep["verified"]["packs_verified"].as_u64(),
            Some(rec.len() as u64)
        );
        assert_eq!(rec.len() as u64, (i * per_run).min(total), "run {i}");
    }
    let rec = record(&t);
    assert_eq!(rec.keys().copied().collect::<BTreeSet<_>>(), all);
    let (_, rep) = check_json(&t, &["--read-data-subset", "25%"]);
    assert_eq!(rep["verified"]["packs_never_verified"].as_u64(), Some(0));
    let again = latest_run(&record(&t));
    assert_eq!(again.len() as u64, per_run);
    // The packs read again are those verified longest ago: none of them
    // was verified after any pack left alone.
    let newest_read = again.iter().map(|p| rec[p]).max().unwrap();
    let oldest_left = rec
        .iter()
        .filter(|(p, _)| !again.contains(*p))
        .map(|(_, r)| *r)
        .min()
        .unwrap();
    assert!(newest_read <= oldest_left, "{again:?} vs {rec:?}");
    if total.is_multiple_of(per_run) {
        assert_eq!(again, first_run);
    }

    // The human summary says how much is verified and how old it is.
    let (out, _) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["check", "--read-data-subset", "25%"],
        0,
    );
    assert!(
        out.contains(&format!("data verified so far: {total} of {total} packs")),
        "{out}"
    );
    assert!(out.contains("the oldest verification is"), "{out}");
}

/// restic's `n/t`: slice n holds the packs whose first id byte modulo t
/// is n-1; the slices are disjoint and cover every pack.
#[test]
fn slices_partition_the_packs() {
    let (t, _src) = repo_with_packs(10);
    let all: BTreeSet<Id> = pack_paths(&t.repo_path()).into_keys().collect();
    let mut seen = BTreeSet::new();
    for n in 1..=3u8 {
        let arg = format!("{n}/3");
        let before = record(&t);
        let (code, rep) = check_json(&t, &["--read-data-subset", &arg]);
        assert_eq!(code, 0, "{rep}");
        let after = record(&t);
        let read: BTreeSet<Id> = after
            .iter()
            .filter(|(id, run)| before.get(id) != Some(run))
            .map(|(id, _)| *id)
            .collect();
        let want: BTreeSet<Id> = all
            .iter()
            .filter(|id| id.0[0] % 3 == n - 1)
            .copied()
            .collect();
        assert_eq!(read, want, "slice {arg}");
        assert_eq!(rep["packs_read"].as_u64(), Some(read.len() as u64));
        assert!(seen.is_disjoint(&read), "slice {arg} overlaps");
        seen.extend(read);
    }
    assert_eq!(seen, all);

    // Bad input is refused with a clear message.
    let (_, err) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["check", "--read-data-subset", "4/3"],
        1,
    );
    assert!(
        err.contains("--read-data-subset") && err.contains("n ≤ t"),
        "{err}"
    );
    let (_, err) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["check", "--read-data", "--read-data-subset", "5%"],
        1,
    );
    assert!(err.contains("cannot be used together"), "{err}");
}
