//! A backup paused mid-run (SIGSTOP), twice, while other commands use the
//! same repository and the same cache: in the first pause a second backup
//! of another tree and `check`, in the second `snapshots`, `ls`, `diff` and
//! `check` (issue 10, items 1 and 7: on 8e884e3 every other command's cache
//! sync dropped the paused run's packs from the cache for good, and
//! `check` reported the packs of a running backup as errors).

use super::{
    Out, backup_ok, check_passes, fill, larder_ok, notices, restore_cli, shim, spawn, wait_bounded,
};
use crate::common::{self, TestRepo};
use crate::support::{assert_same_tree, json_lines, pack_files, path_str, write};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// A backup running in the background that the test stops and resumes.
/// Resumed and killed if the test fails, so no stopped process outlives it.
pub(super) struct Background(Option<Child>);

impl Background {
    pub(super) fn pid(&self) -> Pid {
        Pid::from_raw(self.0.as_ref().unwrap().id() as i32)
    }

    /// Stops the process (SIGSTOP) once at least `packs` packs are in
    /// storage, at a moment it holds no write lock on the cache (stopped
    /// holding one, it would make every other process wait for it, which
    /// is not what this test is about).
    pub(super) fn pause_at(&mut self, repo: &Path, packs: usize) {
        let deadline = Instant::now() + Duration::from_secs(240);
        loop {
            if let Some(st) = self.0.as_mut().unwrap().try_wait().unwrap() {
                panic!("the backup finished ({st}) before {packs} packs were in storage");
            }
            if pack_files(repo).0 >= packs {
                kill(self.pid(), Signal::SIGSTOP).unwrap();
                if !holds_write_lock(self.pid()) {
                    return;
                }
                kill(self.pid(), Signal::SIGCONT).unwrap();
            }
            assert!(Instant::now() < deadline, "no packs appeared");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn resume(&mut self) {
        kill(self.pid(), Signal::SIGCONT).unwrap();
    }

    /// Resumes the process and waits for it to end.
    pub(super) fn finish(mut self) -> Out {
        self.resume();
        wait_bounded(self.0.take().unwrap(), "the paused backup")
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGCONT);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Whether process `pid` holds a POSIX write lock (`/proc/locks`).
fn holds_write_lock(pid: Pid) -> bool {
    let pid = pid.as_raw().to_string();
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    locks.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.iter()
            .position(|w| *w == "WRITE")
            .and_then(|i| f.get(i + 1))
            .is_some_and(|p| *p == pid)
    })
}

/// Starts `larder backup --json SRC`, its reads of SRC slowed to 16 MB/s
/// so that each pack is stored and recorded well before the next.
pub(super) fn start_backup(t: &TestRepo, src: &Path) -> Background {
    let mut c = common::larder(&t.repo_path(), &t.cache_path());
    c.args(["backup", "--json", path_str(src)]);
    let real = std::fs::canonicalize(src).unwrap();
    shim::inject(
        &mut c,
        &[
            ("FAULTSHIM_SLOW_PREFIX", path_str(&real).to_string()),
            ("FAULTSHIM_SLOW_RATE", "16000000".to_string()),
        ],
    );
    Background(Some(spawn(c)))
}

/// Runs `check` while a backup is paused: no problem, and every pack in
/// storage is either checked as indexed or named in a notice as not
/// indexed yet (the paused run's).
fn check_during(repo: &Path, cache: &Path, when: &str) {
    let chk = check_passes(repo, cache, false, when);
    let checked: usize = chk
        .out
        .split(" packs,")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{when}: no pack count: {}", chk.all()));
    let pending = notices(&chk)
        .iter()
        .filter(|n| n.contains("not in any index segment"))
        .count();
    assert_eq!(
        checked + pending,
        pack_files(repo).0,
        "{when}: every stored pack is accounted for: {}",
        chk.all()
    );
}

/// While a backup is stopped, first a backup of another tree and `check`,
/// then (later in the run) `snapshots`, `ls`, `diff` and `check` succeed;
/// once resumed, it completes, both new snapshots restore exactly, and
/// `check --read-data` finds no problem and nothing left unindexed.
#[test]
fn commands_beside_a_paused_backup_leave_both_snapshots_whole() {
    let t = super::cli_repo(); // 1 MiB packs
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();

    // Two small snapshots for `ls` and `diff` to look at.
    let small = base.path().join("small");
    fill(&small, 1, 12, 10_000);
    let s0 = backup_ok(&repo, &cache, &small);
    write(&small.join("d0/f000.bin"), b"edited");
    write(&small.join("new.txt"), b"new");
    let s1 = backup_ok(&repo, &cache, &small);

    let big = base.path().join("big");
    fill(&big, 2, 12, 2 << 20); // 24 MiB: 24 packs or so
    let other = base.path().join("other");
    fill(&other, 3, 6, 1 << 20);

    let mut running = start_backup(&t, &big);
    running.pause_at(&repo, pack_files(&repo).0 + 4);
    let s_other = backup_ok(&repo, &cache, &other);
    check_during(&repo, &cache, "in the first pause");

    running.resume();
    running.pause_at(&repo, pack_files(&repo).0 + 4);
    let during = |args: &[&str]| -> Out { larder_ok(&repo, &cache, args) };
    let listed = json_lines(&during(&["snapshots", "--json"]).out);
    let ids: BTreeSet<&str> = listed[0]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, BTreeSet::from([s0.as_str(), s1.as_str(), &s_other]));
    let ls = during(&["ls", "--recursive", &s1, path_str(&small)]);
    for f in ["new.txt", "d0/f000.bin", "d2/f011.bin"] {
        let p = format!("{}/{f}", path_str(&small));
        assert!(ls.out.lines().any(|l| l == p), "ls lacks {p}:\n{}", ls.out);
    }
    let diff = during(&["diff", "--json", &s0, &s1]);
    let changes: BTreeSet<(String, String)> = json_lines(&diff.out)
        .iter()
        .filter(|v| v["message_type"] == "change")
        .map(|v| {
            let p = v["path"].as_str().unwrap();
            let rel = p.strip_prefix(path_str(&small)).unwrap().to_string();
            (v["modifier"].as_str().unwrap().to_string(), rel)
        })
        .collect();
    assert_eq!(
        changes,
        BTreeSet::from([
            ("M".to_string(), "/d0/f000.bin".to_string()),
            ("+".to_string(), "/new.txt".to_string()),
        ])
    );
    check_during(&repo, &cache, "in the second pause");

    let done = running.finish();
    assert_eq!(done.code, 0, "{}", done.all());
    let s_big = super::snapshot_id_of(&done);

    for (id, src, name) in [(&s_big, &big, "big"), (&s_other, &other, "other")] {
        let back = restore_cli(
            &repo,
            &cache,
            id,
            src,
            &base.path().join(format!("r-{name}")),
        );
        assert!(assert_same_tree(src, &back) >= 9, "{name}");
    }
    let back = restore_cli(&repo, &cache, &s1, &small, &base.path().join("r-small"));
    assert_same_tree(&small, &back);

    let chk = check_passes(&repo, &cache, true, "after both backups");
    assert!(
        notices(&chk).is_empty(),
        "every pack is indexed and the cache agrees: {}",
        chk.all()
    );
}
