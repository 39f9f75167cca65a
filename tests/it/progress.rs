//! Progress: `--json` prints restic's `status` lines (done counts that
//! never go backwards, ending at the summary's numbers) before the
//! `summary`, for backup and restore; without a terminal and without
//! `--json` nothing but the result is printed. Prune and copy tell the
//! library's `Progress` done counts that end at their totals (the packs the
//! prune report names; the files of the trees copied), and print a line
//! only on a terminal without `-q`.

use crate::common::{PASS, TestRepo, larder};
use crate::support::{cli, json_lines, lib_backup, path_str, rand_bytes, run};
use larder::backend::Kind;
use larder::maintenance::prune::{MaxUnused, PruneOptions, prune_with_progress};
use larder::progress::Progress;
use larder::snapshot::{self, Filter};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// A tree of `n` files of varied sizes.
fn tree(root: &Path, n: usize) {
    for i in 0..n {
        let p = root.join(format!("d{}/f{i}", i % 7));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, rand_bytes(i as u64, 1000 + i * 997)).unwrap();
    }
}

/// A new repository (`repo`, `cache`) and a tree `src` of `n` files, in
/// a temporary directory (removed on drop).
fn initialized_with_tree(n: usize) -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache, src) = (
        base.path().join("repo"),
        base.path().join("cache"),
        base.path().join("src"),
    );
    tree(&src, n);
    cli(&repo, &cache, &["init"], 0);
    (base, repo, cache, src)
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
    let (base, repo, cache, src) = initialized_with_tree(60);
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

/// `backup --no-scan` (restic's flag): no walk counts the files ahead, so
/// every status line's total is what is done so far and none estimates
/// the time left; the summary is whole.
#[test]
fn backup_no_scan_counts_only_what_is_done() {
    let (_base, repo, cache, src) = initialized_with_tree(200);
    let s = src.to_str().unwrap();
    let lines = json_run(&repo, &cache, &["backup", "--no-scan", s]);
    let st = check_statuses(&lines, "total_files_processed", "total_bytes_processed");
    assert!(st.len() > 200, "{} status lines", st.len());
    for l in &st {
        assert_eq!(l["total_files"], l["files_done"], "{l}");
        assert!(l.get("seconds_remaining").is_none(), "{l}");
    }
    assert_eq!(lines.last().unwrap()["total_files_processed"], 200);
}

#[test]
fn no_progress_without_a_terminal_or_json() {
    let (base, repo, cache, src) = initialized_with_tree(20);
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

/// What a library operation told its [`Progress`], in order.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Told {
    /// One more unit done, of this many bytes.
    Done(u64),
    /// Totals: units, bytes, complete.
    Totals(u64, u64, bool),
}

/// A [`Progress`] that records what it is told (and wants the totals).
#[derive(Default)]
struct Recorder {
    told: Mutex<Vec<Told>>,
    pending_bytes: Mutex<u64>,
}

impl Progress for Recorder {
    fn bytes(&self, n: u64) {
        *self.pending_bytes.lock().unwrap() += n;
    }
    fn file_done(&self) {
        let b = std::mem::take(&mut *self.pending_bytes.lock().unwrap());
        self.told.lock().unwrap().push(Told::Done(b));
    }
    fn totals(&self, files: u64, bytes: u64, complete: bool) {
        self.told
            .lock()
            .unwrap()
            .push(Told::Totals(files, bytes, complete));
    }
    fn wants_totals(&self) -> bool {
        true
    }
}

/// Done counts (units, bytes) at the end, and the last totals told, which
/// must be complete and equal to them; also no totals told below what was
/// done by then.
fn settle(r: &Recorder) -> (Vec<Told>, u64, u64) {
    let told = r.told.lock().unwrap().clone();
    let (mut n, mut b) = (0u64, 0u64);
    for t in &told {
        match *t {
            Told::Done(x) => {
                n += 1;
                b += x;
            }
            Told::Totals(tn, tb, true) => {
                assert!(
                    tn >= n && tb >= b,
                    "complete totals {t:?} below done {n}/{b}"
                );
            }
            Told::Totals(..) => {}
        }
    }
    let last = told
        .iter()
        .rev()
        .find_map(|t| match *t {
            Told::Totals(tn, tb, c) => Some((tn, tb, c)),
            _ => None,
        })
        .expect("totals were told");
    assert_eq!(last, (n, b, true), "the last totals are the done counts");
    (told, n, b)
}

/// Prune after a snapshot was forgotten: each pack repacked and each pack
/// deleted is counted once, the total is known (complete) before the first
/// one and never changes, and it is what the prune report says it did.
#[test]
fn prune_counts_packs_up_to_the_plan() {
    let t = TestRepo::new();
    let repo = t.init();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    for i in 0..60u64 {
        let p = src.join(format!("f{i:02}"));
        fs::create_dir_all(&src).unwrap();
        fs::write(p, rand_bytes(900 + i, 60_000)).unwrap();
    }
    let first = lib_backup(&repo, &[&src]).snapshot_id.unwrap();
    for i in (0..60u64).step_by(2) {
        fs::remove_file(src.join(format!("f{i:02}"))).unwrap();
    }
    // Whole packs of their own, unused once the first snapshot goes.
    fs::write(src.join("big"), rand_bytes(7, 3 << 20)).unwrap();
    let second = lib_backup(&repo, &[&src]).snapshot_id.unwrap();
    fs::remove_file(src.join("big")).unwrap();
    lib_backup(&repo, &[&src]);
    for id in [first, second] {
        repo.backend().delete(Kind::Snapshot, &id.to_hex()).unwrap();
    }
    drop(repo);
    let repo = t.open().unwrap();
    let opts = PruneOptions {
        max_unused: MaxUnused::Percent(0.0),
        keep_delete: Duration::ZERO,
        ..PruneOptions::default()
    };
    // A dry run tells nothing done.
    let rec = Recorder::default();
    let dry = PruneOptions {
        dry_run: true,
        ..opts.clone()
    };
    prune_with_progress(&repo, &dry, &rec).unwrap();
    assert!(
        !rec.told
            .lock()
            .unwrap()
            .iter()
            .any(|t| matches!(t, Told::Done(_)))
    );

    let rec = Recorder::default();
    let r = prune_with_progress(&repo, &opts, &rec).unwrap();
    let (told, n, b) = settle(&rec);
    let repacked = r.repacked.as_ref().map_or(0, |x| x.packs.len());
    let immediate = r.immediate.as_ref().expect("deleted at once");
    assert!(repacked > 0, "{r:?}");
    assert!(r.plan.unused.packs > 0, "{r:?}");
    assert_eq!(
        n as usize,
        repacked + r.sweep.packs_deleted + immediate.packs_deleted,
        "{r:?}"
    );
    assert_eq!(immediate.packs_deleted, r.plan.unused.packs + repacked);
    assert_eq!(
        b,
        r.plan.repack.bytes + r.sweep.bytes_deleted + immediate.bytes_deleted,
        "{r:?}"
    );
    // Known before the first pack was done, and exact from then on.
    let first_done = told
        .iter()
        .position(|t| matches!(t, Told::Done(_)))
        .unwrap();
    assert!(
        told[..first_done].contains(&Told::Totals(n, b, true)),
        "{told:?}"
    );
    for t in &told[first_done..] {
        if let Told::Totals(tn, tb, c) = *t {
            assert_eq!((tn, tb, c), (n, b, true), "{told:?}");
        }
    }

    // Nothing left to do: nothing done, a complete total of zero.
    let rec = Recorder::default();
    prune_with_progress(&repo, &opts, &rec).unwrap();
    let (_, n, _) = settle(&rec);
    assert_eq!(n, 0);
}

/// Copy counts every file of the distinct trees it copies (a subtree two
/// snapshots share once) with its size, up to the totals of the scan
/// beside it; a second copy (everything skipped) counts nothing.
#[test]
fn copy_counts_files_up_to_the_scan() {
    let (ts, td) = (TestRepo::new(), TestRepo::new());
    let (srepo, drepo) = (ts.init(), td.init());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    tree(&src, 60);
    lib_backup(&srepo, &[&src]);
    fs::write(src.join("d0/f0"), b"changed").unwrap();
    lib_backup(&srepo, &[&src]);
    // Expected: all 60 files of the first snapshot, and the files of the
    // one directory that changed (d0: files 0, 7, .., 56) of the second.
    let d0: Vec<_> = fs::read_dir(src.join("d0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(d0.len(), 9);
    let mut want_bytes: u64 = (0..60).map(|i| 1000 + i * 997).sum();
    // d0 as it is now (d0/f0 changed).
    want_bytes += d0
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .sum::<u64>();

    let (snaps, _) = snapshot::list(&srepo, &Filter::default()).unwrap();
    assert_eq!(snaps.len(), 2);
    let rec = Recorder::default();
    let r = larder::copy::copy_with_progress(&srepo, &drepo, &snaps, &rec).unwrap();
    assert_eq!(r.copied.len(), 2);
    let (_, n, b) = settle(&rec);
    assert_eq!(n, 60 + 9);
    assert_eq!(b, want_bytes);

    let rec = Recorder::default();
    let r = larder::copy::copy_with_progress(&srepo, &drepo, &snaps, &rec).unwrap();
    assert_eq!(r.skipped.len(), 2);
    let (_, n, _) = settle(&rec);
    assert_eq!(n, 0);
}

/// For the CLI tests: a repository with two snapshots (the second without
/// `d1`) and another with one to copy from; returns (repository, cache,
/// the other repository).
fn cli_setup(base: &Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let (repo, cache, src, from) = (
        base.join("repo"),
        base.join("cache"),
        base.join("src"),
        base.join("from"),
    );
    tree(&src, 30);
    cli(&repo, &cache, &["init"], 0);
    cli(&from, &cache, &["init"], 0);
    cli(&repo, &cache, &["backup", path_str(&src)], 0);
    cli(&from, &cache, &["backup", path_str(&src)], 0);
    fs::remove_dir_all(src.join("d1")).unwrap();
    cli(&repo, &cache, &["backup", path_str(&src)], 0);
    (repo, cache, from)
}

/// With stderr a pipe, prune and copy print their results and no progress.
#[test]
fn no_prune_or_copy_progress_on_a_pipe() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache, from) = cli_setup(base.path());
    cli(&repo, &cache, &["forget", "--keep-last", "1"], 0);
    let (out, err) = cli(
        &repo,
        &cache,
        &["prune", "--keep-delete", "0s", "--max-unused", "0%"],
        0,
    );
    assert!(err.is_empty(), "stderr (a pipe) gets nothing: {err:?}");
    assert!(out.contains("deleted") && !out.contains('\r'), "{out}");
    let mut c = larder(&repo, &cache);
    c.env("LARDER_FROM_PASSWORD", PASS)
        .args(["copy", "--from-repo"])
        .arg(&from);
    let (code, out, err) = run(c);
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "{err:?}");
    assert!(out.contains("1 copied") && !out.contains('\r'), "{out}");
}

/// On a terminal (a pseudo-terminal from `script`), prune and copy run
/// their progress line (it is always cleared at the end: `\r\x1b[K`);
/// with `-q` they do not.
#[test]
fn prune_and_copy_progress_only_on_a_terminal_without_q() {
    if !std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        assert!(
            std::env::var("LARDER_ALLOW_SKIP").as_deref() == Ok("1"),
            "script (util-linux) is not installed"
        );
        eprintln!("skipping: script is not installed");
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let (repo, cache, from) = cli_setup(base.path());
    cli(&repo, &cache, &["forget", "--keep-last", "1"], 0);
    let bin = crate::common::larder_bin();
    let on_tty = |args: &str| {
        let env = larder(&repo, &cache);
        let mut s = std::process::Command::new("script");
        crate::support::env_of(&mut s, &env);
        let cmd = format!("'{}' {args}", bin.display());
        s.env("LARDER_FROM_PASSWORD", PASS)
            .args(["-q", "-e", "-c", &cmd, "/dev/null"]);
        let (code, out, err) = run(s);
        assert_eq!(code, 0, "{args}: {out} {err}");
        out
    };
    let clear = "\r\x1b[K";
    let out = on_tty("-q prune --keep-delete 0s --max-unused 0%");
    assert!(!out.contains(clear), "{out:?}");
    let out = on_tty("prune --keep-delete 0s --max-unused 0%");
    assert!(out.contains(clear), "{out:?}");
    let f = path_str(&from);
    let out = on_tty(&format!("-q copy --from-repo '{f}'"));
    assert!(!out.contains(clear), "{out:?}");
    let out = on_tty(&format!("copy --from-repo '{f}'"));
    assert!(out.contains(clear) && out.contains("1 skipped"), "{out:?}");
}

/// `backup -vv` (restic's verbosity) tells what became of each file and
/// directory below the backed-up path: a first run finds all new; after a
/// change, the changed file and the directories above it are modified, an
/// added file new, the rest unchanged. With `--json` the same as restic's
/// `verbose_status` objects; without `-vv`, none of it.
#[test]
fn backup_vv_tells_each_entrys_outcome() {
    let (_base, repo, cache, src) = initialized_with_tree(14);
    let s = path_str(&src).to_string();
    let entries = |out: &str| -> std::collections::BTreeSet<(String, String)> {
        out.lines()
            .filter_map(|l| {
                let (action, path) = l.split_once(' ')?;
                ["new", "modified", "unchanged"]
                    .contains(&action)
                    .then(|| (action.to_string(), path.trim_start().to_string()))
            })
            .collect()
    };
    let dirs: Vec<String> = (0..7).map(|d| format!("{s}/d{d}/")).collect();
    let files: Vec<String> = (0..14).map(|i| format!("{s}/d{}/f{i}", i % 7)).collect();
    let all = |action: &str| -> Vec<(String, String)> {
        files
            .iter()
            .chain(&dirs)
            .chain([&format!("{s}/")])
            .map(|p| (action.to_string(), p.clone()))
            .collect()
    };
    let (out, _) = cli(&repo, &cache, &["backup", "-vv", &s], 0);
    assert_eq!(entries(&out), all("new").into_iter().collect(), "{out}");
    // The summary names the parent, as restic does.
    assert!(
        out.lines()
            .any(|l| l == "no parent snapshot found, will read all files"),
        "{out}"
    );
    let first = out
        .lines()
        .find_map(|l| l.strip_prefix("snapshot ")?.strip_suffix(" saved"))
        .unwrap()
        .to_string();

    fs::write(src.join("d0/f0"), b"changed").unwrap();
    fs::write(src.join("d1/added"), b"added").unwrap();
    let (out, _) = cli(&repo, &cache, &["backup", "-vv", &s], 0);
    let using = format!("using parent snapshot {first}");
    assert!(out.lines().any(|l| l == using), "{out}");
    // restic's summary lines, sizes as restic prints them.
    assert!(
        out.lines()
            .any(|l| l.starts_with("Added to the repository: ") && l.ends_with(" stored)")),
        "{out}"
    );
    let total: u64 = files
        .iter()
        .chain([&format!("{s}/d1/added")])
        .map(|f| fs::metadata(f).unwrap().len())
        .sum();
    let processed = format!("processed 15 files, {:.3} KiB in ", total as f64 / 1024.0);
    assert!(
        out.lines().any(|l| l.starts_with(&processed)),
        "{processed}: {out}"
    );
    let mut want: std::collections::BTreeSet<_> = all("unchanged")
        .into_iter()
        .filter(|(_, p)| ![&files[0], &dirs[0], &dirs[1]].contains(&p) && *p != format!("{s}/"))
        .collect();
    for p in [&files[0], &dirs[0], &dirs[1], &format!("{s}/")] {
        want.insert(("modified".to_string(), p.to_string()));
    }
    want.insert(("new".to_string(), format!("{s}/d1/added")));
    assert_eq!(entries(&out), want, "{out}");

    // --json: verbose_status objects, the same outcomes, sizes of files.
    fs::write(src.join("d2/f2"), b"changed again").unwrap();
    let lines = json_run(&repo, &cache, &["backup", "-vv", &s]);
    let verbose: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["message_type"] == "verbose_status")
        .collect();
    assert_eq!(verbose.len(), files.len() + 1 + dirs.len() + 1, "{lines:?}");
    let f2 = verbose
        .iter()
        .find(|v| v["item"] == format!("{s}/d2/f2").as_str())
        .unwrap();
    assert_eq!(f2["action"], "modified");
    assert_eq!(f2["data_size"], 13);
    let d3 = verbose
        .iter()
        .find(|v| v["item"] == format!("{s}/d3/").as_str())
        .unwrap();
    assert_eq!(
        (d3["action"].as_str(), d3["data_size"].as_u64()),
        (Some("unchanged"), Some(0))
    );

    // Without -vv (and with -v alone), no entry lines.
    for args in [&["backup", &s][..], &["backup", "-v", &s]] {
        let (out, _) = cli(&repo, &cache, args, 0);
        assert!(entries(&out).is_empty(), "{args:?}: {out}");
    }
    let lines = json_run(&repo, &cache, &["backup", &s]);
    assert!(lines.iter().all(|l| l["message_type"] != "verbose_status"));
    // -v and -q do not go together.
    let (_, err) = cli(&repo, &cache, &["backup", "-vv", "-q", &s], 1);
    assert!(
        err.contains("--quiet") || err.contains("--verbose"),
        "{err}"
    );
}

/// `restore -vv` (restic 0.17's verbosity) tells what became of each
/// entry below the restored path: files `restored` into an empty target,
/// `unchanged` where the overwrite policy keeps what is there, `updated`
/// when written over, `deleted` for what `--delete` removes; directories
/// `restored` once their metadata is set (as restic). A dry run tells the
/// same decisions and changes nothing. With `--json`, restic's
/// `verbose_status` objects (`size`, as restic's restore names it).
#[test]
fn restore_vv_tells_each_entrys_outcome() {
    let (base, repo, cache, src) = initialized_with_tree(14);
    let s = path_str(&src).to_string();
    cli(&repo, &cache, &["backup", "-q", &s], 0);
    let target = base.path().join("target");
    let t = path_str(&target).to_string();
    // (action, path) below src, in the snapshot's terms.
    let entries = |out: &str| -> std::collections::BTreeSet<(String, String)> {
        out.lines()
            .filter_map(|l| {
                let (action, path) = l.split_once(' ')?;
                let path = path.trim_start();
                (["restored", "updated", "unchanged", "deleted"].contains(&action)
                    && path.starts_with(&format!("{s}/")))
                .then(|| (action.to_string(), path.to_string()))
            })
            .collect()
    };
    let dirs: Vec<String> = (0..7).map(|d| format!("{s}/d{d}")).collect();
    let files: Vec<String> = (0..14).map(|i| format!("{s}/d{}/f{i}", i % 7)).collect();
    // Every file with `action`, every directory restored.
    let all = |action: &str| -> std::collections::BTreeSet<(String, String)> {
        let f = files.iter().map(|p| (action.to_string(), p.clone()));
        f.chain(dirs.iter().map(|d| ("restored".to_string(), d.clone())))
            .collect()
    };
    let restore = |extra: &[&str]| {
        let args = [&["restore", "-vv", "latest", "--target", &t][..], extra].concat();
        cli(&repo, &cache, &args, 0).0
    };
    let out = restore(&[]);
    assert_eq!(entries(&out), all("restored"), "{out}");
    assert!(out.contains(&format!("restored  {s}\n")), "{out}");

    let out = restore(&[]);
    assert_eq!(entries(&out), all("unchanged"), "{out}");

    let inside = |p: &str| target.join(p.trim_start_matches('/'));
    fs::write(inside(&files[3]), b"edited in the target").unwrap();
    fs::write(inside(&format!("{s}/d4/extra")), b"not in the snapshot").unwrap();
    let mut want = all("unchanged");
    want.remove(&("unchanged".to_string(), files[3].clone()));
    want.insert(("updated".to_string(), files[3].clone()));
    want.insert(("deleted".to_string(), format!("{s}/d4/extra")));
    let changed = ["--overwrite", "if-changed", "--delete"];
    // A dry run first: the same decisions, nothing changed.
    let out = restore(&[&changed[..], &["--dry-run"]].concat());
    assert_eq!(entries(&out), want, "{out}");
    assert_eq!(
        fs::read(inside(&files[3])).unwrap(),
        b"edited in the target"
    );
    assert!(inside(&format!("{s}/d4/extra")).exists());
    let out = restore(&changed);
    assert_eq!(entries(&out), want, "{out}");
    assert_eq!(
        fs::read(inside(&files[3])).unwrap(),
        fs::read(&files[3]).unwrap()
    );
    assert!(!inside(&format!("{s}/d4/extra")).exists());

    // --json into a fresh target: verbose_status objects, files' sizes.
    let fresh = base.path().join("fresh");
    let lines = json_run(
        &repo,
        &cache,
        &["restore", "-vv", "latest", "--target", path_str(&fresh)],
    );
    let f5 = lines
        .iter()
        .find(|l| l["message_type"] == "verbose_status" && l["item"] == files[5].as_str())
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(f5["action"], "restored");
    assert_eq!(f5["size"], fs::metadata(&files[5]).unwrap().len());
    assert!(f5.get("data_size").is_none(), "{f5}");
    // Without -vv, none.
    let (out, _) = cli(&repo, &cache, &["restore", "latest", "--target", &t], 0);
    assert!(entries(&out).is_empty(), "{out}");
}
