//! `--compression auto|off|fast|better|max|LEVEL` (and `LARDER_COMPRESSION`): one
//! repository written at every level reads back byte for byte and passes
//! `check --read-data`; the stored sizes order as the levels do; `off`
//! stores data blobs raw; `init --compression` sets the repository's level;
//! a bad value is refused naming the flag.

use crate::common::{self, TestRepo};
use crate::support::*;

use std::path::Path;

/// Text of words drawn from a small vocabulary (splitmix64 per `seed`):
/// compresses well, and the levels compress it differently, with no
/// chunk shared between seeds.
fn words(seed: u64, n: usize) -> Vec<u8> {
    const VOCAB: &[&str] = &[
        "larder",
        "backup",
        "snapshot",
        "chunk",
        "blob",
        "pack",
        "index",
        "tree",
        "restore",
        "prune",
        "forget",
        "copy",
        "key",
        "repository",
        "cache",
        "lock",
        "the",
        "a",
        "of",
        "and",
        "to",
        "in",
        "is",
        "that",
        "it",
        "for",
        "on",
        "with",
        "as",
        "by",
        "zstd",
        "level",
    ];
    let bytes = rand_bytes(seed, n);
    let mut out = Vec::with_capacity(n + 16);
    let mut i = 0;
    while out.len() < n {
        let b = bytes[i % bytes.len()] as usize ^ (i / bytes.len());
        out.extend_from_slice(VOCAB[b % VOCAB.len()].as_bytes());
        out.push(if b.is_multiple_of(13) { b'\n' } else { b' ' });
        if b.is_multiple_of(7) {
            out.extend_from_slice(format!("{} ", bytes[(i + 1) % bytes.len()]).as_bytes());
        }
        i += 1;
    }
    out.truncate(n);
    out
}

/// A tree of compressible files for `seed`; returns its total bytes.
fn make_tree(dir: &Path, seed: u64) -> u64 {
    let sizes = [1 << 20, 700_000, 300_000, 5_000];
    for (i, n) in sizes.iter().enumerate() {
        write(
            &dir.join(format!("f{i}.txt")),
            &words(seed * 10 + i as u64, *n),
        );
    }
    sizes.iter().sum::<usize>() as u64
}

/// `larder --json [--compression WORD] backup DIR` (or with
/// `LARDER_COMPRESSION=WORD` when `env`): (snapshot id, data_added).
fn backup(t: &TestRepo, dir: &Path, word: &str, env: bool) -> (String, u64) {
    let mut c = common::larder(&t.repo_path(), &t.cache_path());
    c.args(["--json", "backup"]);
    if env {
        c.env("LARDER_COMPRESSION", word);
    } else {
        c.args(["--compression", word]);
    }
    c.arg(dir);
    let (code, out, err) = run(c);
    assert_eq!(code, 0, "backup --compression {word}: {err}");
    let s = json_lines(&out).pop().unwrap();
    (
        s["snapshot_id"].as_str().unwrap().to_string(),
        s["data_added"].as_u64().unwrap(),
    )
}

#[test]
fn every_level_in_one_repository_restores_and_orders_by_size() {
    let t = TestRepo::new();
    drop(t.init());
    let src = t.dir.path().join("src");
    // (word, given through the environment?)
    let modes = [
        ("off", false),
        ("fast", false),
        ("auto", true),
        ("better", false),
        ("max", true),
    ];
    let mut runs = Vec::new();
    for (seed, (word, env)) in modes.iter().enumerate() {
        let dir = src.join(word);
        let size = make_tree(&dir, seed as u64 + 1);
        let (snap, added) = backup(&t, &dir, word, *env);
        let st = json_lines(
            &cli(
                &t.repo_path(),
                &t.cache_path(),
                &["--json", "stats", "--mode", "raw-data", &snap],
                0,
            )
            .0,
        )
        .pop()
        .unwrap();
        let progress = st["compression_progress"].as_f64().unwrap_or(0.0);
        runs.push((*word, dir, size, snap, added, progress));
    }
    let added = |w: &str| runs.iter().find(|r| r.0 == w).unwrap().4;
    let (off, fast, auto, better, max) = (
        added("off"),
        added("fast"),
        added("auto"),
        added("better"),
        added("max"),
    );
    let size = runs[0].2;
    assert!(off >= size, "off stores raw: {off} < source {size}");
    assert!(fast < off * 2 / 3, "fast compresses text: {fast} vs {off}");
    assert!(auto < off * 2 / 3, "auto compresses text: {auto} vs {off}");
    assert!(better <= fast, "better (3) ≤ fast (1): {better} vs {fast}");
    assert!(max < better, "max (19) < better (3): {max} vs {better}");
    for (word, _, _, _, _, progress) in &runs {
        // Only the (small) tree blobs of `off` are compressed.
        if *word == "off" {
            assert!(*progress < 5.0, "{word}: {progress}% compressed");
        } else {
            assert!(*progress > 95.0, "{word}: {progress}% compressed");
        }
    }
    let repo = t.open().unwrap();
    for (word, dir, _, snap, _, _) in &runs {
        let target = t.dir.path().join("restored").join(word);
        let id = larder::Id::from_hex(snap).unwrap();
        let rep = lib_restore(&repo, &id, dir, &target);
        assert!(rep.errors.is_empty(), "{word}: {:?}", rep.errors);
        assert_eq!(assert_same_tree(dir, &target), 4, "{word}");
    }
    drop(repo);
    let (out, _) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["check", "--read-data"],
        0,
    );
    assert!(out.contains("no errors were found"), "{out}");
}

#[test]
fn a_bad_value_names_the_flag() {
    let t = TestRepo::new();
    drop(t.init());
    let dir = t.dir.path().join("src");
    make_tree(&dir, 9);
    for bad in ["bogus", "0", "23"] {
        let mut c = common::larder(&t.repo_path(), &t.cache_path());
        c.args(["backup", "--compression", bad]).arg(&dir);
        let (code, _, err) = run(c);
        assert_ne!(code, 0, "{bad}");
        assert!(
            err.contains("--compression") && err.contains("auto, off, fast, better, max"),
            "{bad}: {err}"
        );
        let mut c = common::larder(&t.repo_path(), &t.cache_path());
        c.env("LARDER_COMPRESSION", bad).arg("backup").arg(&dir);
        let (code, _, err) = run(c);
        assert_ne!(code, 0, "LARDER_COMPRESSION={bad}");
        assert!(err.contains("--compression"), "{bad}: {err}");
    }
    let repo = t.open().unwrap();
    let (n, _) = pack_files(&t.repo_path());
    assert_eq!(n, 0, "nothing was written");
    drop(repo);
}

#[test]
fn init_sets_the_repositorys_level() {
    for (word, level) in [
        ("max", 19),
        ("off", 0),
        ("7", 7),
        ("better", 3),
        ("auto", 1),
    ] {
        let t = TestRepo::new();
        cli(
            &t.repo_path(),
            &t.cache_path(),
            &["init", "--compression", word],
            0,
        );
        let repo = t.open().unwrap();
        assert_eq!(repo.config().compression_level, level, "{word}");
        assert_eq!(repo.compression_level(), level, "{word}");
        drop(repo);
        if word == "off" {
            // auto in a repository made with off stores raw.
            let dir = t.dir.path().join("src");
            let size = make_tree(&dir, 5);
            let (_, added) = backup(&t, &dir, "auto", false);
            assert!(added >= size, "{added} < {size}");
        }
    }
}
