//! Progress: `--json` prints restic's `status` lines (done counts that
//! never go backwards, ending at the summary's numbers) before the
//! `summary`, for backup and restore; without a terminal and without
//! `--json` nothing but the result is printed.

use crate::common::larder;
use crate::support::{cli, json_lines, rand_bytes, run};
use std::fs;
use std::path::Path;

/// A tree of `n` files of varied sizes.
fn tree(root: &Path, n: usize) {
    for i in 0..n {
        let p = root.join(format!("d{}/f{i}", i % 7));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, rand_bytes(i as u64, 1000 + i * 997)).unwrap();
    }
}

/// `larder ARGS` with a status line after every file; its JSON lines.
fn json_run(repo: &Path, cache: &Path, args: &[&str]) -> Vec<serde_json::Value> {
    let mut c = larder(repo, cache);
    c.env("LARDER_PROGRESS_INTERVAL_MS", "0")
        .arg("--json")
        .args(args);
    let (code, out, err) = run(c);
    assert_eq!(code, 0, "{args:?}: {err}");
    json_lines(&out)
}

/// Checks the status lines: every count monotonic, `files_done` and
/// `bytes_done` ending where the summary says; returns the statuses.
fn check_statuses(
    lines: &[serde_json::Value],
    files_key: &str,
    bytes_key: &str,
) -> Vec<serde_json::Value> {
    let (summary, statuses) = lines.split_last().expect("some output");
    assert_eq!(summary["message_type"], "summary", "{summary}");
    assert!(statuses.iter().all(|s| s["message_type"] == "status"));
    let n = |s: &serde_json::Value, k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k} in {s}"));
    for w in statuses.windows(2) {
        for k in ["files_done", "bytes_done", "total_files", "total_bytes"] {
            assert!(
                n(&w[0], k) <= n(&w[1], k),
                "{k} went backwards: {} then {}",
                w[0],
                w[1]
            );
        }
        assert!(w[0]["seconds_elapsed"].as_f64() <= w[1]["seconds_elapsed"].as_f64());
        let p = w[1]["percent_done"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&p), "{}", w[1]);
    }
    let last = statuses.last().expect("status lines");
    assert_eq!(
        n(last, "files_done"),
        n(summary, files_key),
        "{last} vs {summary}"
    );
    assert_eq!(
        n(last, "bytes_done"),
        n(summary, bytes_key),
        "{last} vs {summary}"
    );
    statuses.to_vec()
}

#[test]
fn json_status_lines_end_at_the_summary() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache, src) = (
        base.path().join("repo"),
        base.path().join("cache"),
        base.path().join("src"),
    );
    tree(&src, 60);
    cli(&repo, &cache, &["init"], 0);
    let s = src.to_str().unwrap();
    let lines = json_run(&repo, &cache, &["backup", s]);
    let st = check_statuses(&lines, "total_files_processed", "total_bytes_processed");
    // One line per file, and the last one after the final file.
    assert!(st.len() > 60, "{} status lines", st.len());
    assert_eq!(st.last().unwrap()["files_done"], 60);
    // Unchanged files count as done too, on the second run.
    fs::write(src.join("d0/f0"), b"changed").unwrap();
    let lines = json_run(&repo, &cache, &["backup", s]);
    let st = check_statuses(&lines, "total_files_processed", "total_bytes_processed");
    assert_eq!(st.last().unwrap()["files_done"], 60);
    assert_eq!(lines.last().unwrap()["files_unmodified"], 59);

    let target = base.path().join("restore");
    let spec = format!("latest:{s}");
    let lines = json_run(
        &repo,
        &cache,
        &["restore", &spec, "--target", target.to_str().unwrap()],
    );
    let st = check_statuses(&lines, "files_restored", "bytes_restored");
    let last = st.last().unwrap();
    assert_eq!(last["files_done"], 60);
    assert_eq!(last["files_restored"], 60);
    // The scan of the snapshot's trees counted the same files.
    assert_eq!(last["total_files"], 60, "{last}");
    assert_eq!(last["total_bytes"], last["bytes_done"], "{last}");
    assert_eq!(last["percent_done"], 1.0, "{last}");
}

#[test]
fn no_progress_without_a_terminal_or_json() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache, src) = (
        base.path().join("repo"),
        base.path().join("cache"),
        base.path().join("src"),
    );
    tree(&src, 20);
    cli(&repo, &cache, &["init"], 0);
    let mut c = larder(&repo, &cache);
    c.env("LARDER_PROGRESS_INTERVAL_MS", "0")
        .arg("backup")
        .arg(&src);
    let (code, out, err) = run(c);
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "stderr (a pipe) gets nothing: {err:?}");
    assert!(
        out.contains("snapshot") && !out.contains('\r') && !out.contains("status"),
        "{out}"
    );
    let target = base.path().join("restore");
    let spec = format!("latest:{}", src.display());
    let mut c = larder(&repo, &cache);
    c.env("LARDER_PROGRESS_INTERVAL_MS", "0")
        .args(["restore", &spec, "--target"])
        .arg(&target);
    let (code, out, err) = run(c);
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "{err:?}");
    assert_eq!(out.lines().count(), 1, "{out}");
}
