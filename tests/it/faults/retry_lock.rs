//! `--retry-lock` (as restic's): a command that meets a conflicting lock
//! waits for it, trying again at growing intervals, instead of failing at
//! once with exit code 11. While it waits it keeps no lock object, so a
//! waiter killed with `kill -9` leaves nothing behind, and one asked to
//! stop (Ctrl-C, SIGTERM) stops at once.

use super::{
    backup_ok, check_passes, fill, larder_cmd, larder_run, lock_objects, objects, wait_until,
};
use crate::support::path_str;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// `larder --retry-lock 10m backup SRC`, its stderr in `err`.
fn waiting_backup(repo: &Path, cache: &Path, src: &Path, err: &Path) -> Child {
    let mut c = larder_cmd(
        repo,
        cache,
        &["--retry-lock", "10m", "backup", path_str(src)],
    );
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(err).unwrap());
    c.spawn().unwrap()
}

/// Waits for `child` (whose output goes to files) to exit, failing with
/// `what` if it has not within `limit`.
fn exit_within(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `child` says it waits for the lock (in `err`).
fn until_waiting(child: &mut Child, err: &Path) {
    wait_until(child, "the backup: waiting for the lock", || {
        std::fs::read_to_string(err).is_ok_and(|e| e.contains("waiting up to 600 s for it"))
    });
}

/// While a prune-like exclusive lock is held, a backup fails at once with
/// exit code 11; with `--retry-lock 10m` two backups wait instead (saying
/// so, with no lock object of theirs in storage). One is killed with
/// SIGKILL while it waits: nothing of it is left. Two more are asked to
/// stop while they wait, by SIGINT (Ctrl-C) and by SIGTERM: each stops
/// within seconds (not after the 10 minutes), with exit code 130 and
/// "interrupted", leaving nothing. The first, once the holder lets go,
/// saves its snapshot; `check` passes.
#[test]
fn a_backup_with_retry_lock_waits_for_the_holder() {
    let t = super::cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    fill(&src, 0, 4, 50_000);
    backup_ok(&repo, &cache, &src);
    let holder = t.open().unwrap();
    let x = holder.lock_exclusive().unwrap();

    let o = larder_run(&repo, &cache, &["backup", path_str(&src)]);
    assert_eq!(o.code, 11, "{}", o.all());

    let (err_a, err_b) = (base.path().join("a.err"), base.path().join("b.err"));
    let mut killed = waiting_backup(&repo, &cache, &src, &err_a);
    until_waiting(&mut killed, &err_a);
    let mut waiter = waiting_backup(&repo, &cache, &src, &err_b);
    until_waiting(&mut waiter, &err_b);
    kill(Pid::from_raw(killed.id() as i32), Signal::SIGKILL).unwrap();
    killed.wait().unwrap();
    assert_eq!(lock_objects(&repo), 1, "a waiter left a lock object");

    for (name, signal) in [("int", Signal::SIGINT), ("term", Signal::SIGTERM)] {
        let err = base.path().join(format!("{name}.err"));
        let mut stopped = waiting_backup(&repo, &cache, &src, &err);
        until_waiting(&mut stopped, &err);
        kill(Pid::from_raw(stopped.id() as i32), signal).unwrap();
        let what = format!("{signal:?} did not stop the waiting backup");
        let status = exit_within(&mut stopped, Duration::from_secs(30), &what);
        let said = std::fs::read_to_string(&err).unwrap();
        assert_eq!(status.code(), Some(130), "{signal:?}: {said}");
        assert!(said.contains("interrupted"), "{signal:?}: {said}");
        assert_eq!(lock_objects(&repo), 1, "{signal:?}: a lock object was left");
    }
    assert_eq!(
        objects(&repo, "snapshots"),
        1,
        "a stopped backup saved a snapshot"
    );

    drop(x);
    let status = exit_within(
        &mut waiter,
        Duration::from_secs(120),
        "the waiting backup never finished",
    );
    let err = std::fs::read_to_string(&err_b).unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(
        objects(&repo, "snapshots"),
        2,
        "the waiting backup saved no snapshot: {err}"
    );
    assert_eq!(lock_objects(&repo), 0, "a lock was left behind");
    check_passes(&repo, &cache, false, "after the waits");
}
