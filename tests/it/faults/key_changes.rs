//! `key add`, `key remove`, `key passwd` and `init` (which writes the
//! first key) beside other larder processes, after `kill -9` and after a
//! failed write. A key change holds a maintenance lock: it never waits for
//! a backup, but two key changes (or one and a prune) never run at once.
//! Without that, two processes opened with different keys, each removing
//! the other's key, could both see two keys and leave none: a repository
//! nobody can open again. A `key passwd` killed at any point leaves a
//! repository that the old or the new passphrase opens; an `init` killed
//! or beaten by another leaves a location the next `init` can use.

use super::concurrency::start_backup;
use super::kill_loop::Rng;
use super::{
    Out, backup_ok, check_passes, cli_repo, fill, larder_cmd, larder_ok, larder_run, shim, spawn,
    wait_bounded,
};
use crate::common::{PASS, TestRepo};
use crate::support::{assert_same_tree, path_str};
use larder::keys::Credential;
use larder::repository::Repository;
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

/// The objects in directory `dir` of the repository (not the `.tmp-*`
/// files of writes in progress or killed, nor lock probes).
fn names(repo: &Path, dir: &str) -> BTreeSet<String> {
    fs::read_dir(repo.join(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect()
}

/// The key files in storage.
pub(super) fn key_names(repo: &Path) -> BTreeSet<String> {
    names(repo, "keys")
}

/// Writes `pass` to a file beside the repository for `--new-password-file`.
fn pass_file(t: &TestRepo, name: &str, pass: &str) -> String {
    let p = t.dir.path().join(name);
    fs::write(&p, format!("{pass}\n")).unwrap();
    path_str(&p).to_string()
}

/// `larder ARGS` opened with passphrase `pass`, run to completion.
fn as_pass(t: &TestRepo, pass: &str, args: &[&str]) -> Out {
    let mut c = larder_cmd(&t.repo_path(), &t.cache_path(), args);
    c.env("LARDER_PASSWORD", pass);
    wait_bounded(spawn(c), &format!("larder {args:?} as {pass:?}"))
}

/// Whether passphrase `pass` opens the repository.
fn opens(t: &TestRepo, pass: &str) -> bool {
    Repository::open(t.backend(), &Credential::passphrase(pass), &t.cache_path()).is_ok()
}

/// `key add --json` with passphrase `new`; returns the new key's name.
fn add_key(t: &TestRepo, pass: &str, new: &str) -> String {
    let file = pass_file(t, "new-pass", new);
    let o = as_pass(
        t,
        pass,
        &["key", "add", "--json", "--new-password-file", &file],
    );
    assert_eq!(o.code, 0, "{}", o.all());
    let v: serde_json::Value = serde_json::from_str(o.out.trim()).unwrap();
    v["id"].as_str().unwrap().to_string()
}

/// While a backup is stopped mid-run (holding its shared lock), `key add`,
/// `key passwd` and `key remove` go ahead; while another process holds a
/// maintenance lock (as a prune or another key change does), each of them
/// fails with exit code 11 and changes no key file; once it is released
/// they go ahead. The backup then completes and restores exactly.
#[test]
fn key_changes_go_beside_a_backup_but_never_beside_another_key_change() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    fill(&src, 7, 16, 512 << 10);
    let first = key_names(&repo);

    let mut backup = start_backup(&t, &src);
    backup.pause_at(&repo, 1);
    let second = add_key(&t, PASS, "second pass");
    let third = add_key(&t, PASS, "third pass");
    let renewed = pass_file(&t, "renewed", "renewed pass");
    let o = as_pass(
        &t,
        PASS,
        &["key", "passwd", "--new-password-file", &renewed],
    );
    assert_eq!(o.code, 0, "key passwd beside a backup: {}", o.all());
    let o = as_pass(&t, "renewed pass", &["key", "remove", &third[..12]]);
    assert_eq!(o.code, 0, "key remove beside a backup: {}", o.all());
    let now = key_names(&repo);
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(now.contains(&second) && now.is_disjoint(&first), "{now:?}");
    assert!(!opens(&t, PASS) && opens(&t, "renewed pass") && !opens(&t, "third pass"));

    // Another process's maintenance lock (this test's, through the library).
    let holder =
        Repository::open(t.backend(), &Credential::passphrase("second pass"), &cache).unwrap();
    let held = holder.lock_maintenance().unwrap();
    let before = key_names(&repo);
    let extra = pass_file(&t, "extra", "extra pass");
    let refused: [(&str, Vec<&str>); 3] = [
        ("key add", vec!["key", "add", "--new-password-file", &extra]),
        (
            "key passwd",
            vec!["key", "passwd", "--new-password-file", &extra],
        ),
        ("key remove", vec!["key", "remove", &second[..12]]),
    ];
    for (what, args) in &refused {
        let o = as_pass(&t, "renewed pass", args);
        assert_eq!(o.code, 11, "{what} beside a maintenance lock: {}", o.all());
        assert!(o.err.contains("maintenance"), "{what}: {}", o.all());
        assert_eq!(key_names(&repo), before, "{what} changed the keys");
    }
    drop(held);
    let o = as_pass(&t, "renewed pass", &["key", "remove", &second[..12]]);
    assert_eq!(o.code, 0, "key remove once the lock is gone: {}", o.all());
    assert_eq!(key_names(&repo).len(), 1);
    assert!(!opens(&t, "second pass") && opens(&t, "renewed pass"));

    let b = backup.finish();
    assert_eq!(b.code, 0, "the paused backup: {}", b.all());
    let id = super::snapshot_id_of(&b);
    let chk = as_pass(&t, "renewed pass", &["check", "--read-data"]);
    assert!(chk.out.contains("no errors were found"), "{}", chk.all());
    let target = t.dir.path().join("restored");
    let restore = ["restore", "-q", &id, "--target", path_str(&target)];
    let o = as_pass(&t, "renewed pass", &restore);
    assert_eq!(o.code, 0, "{}", o.all());
    assert_same_tree(&src, &target.join(src.strip_prefix("/").unwrap()));
}

/// Two processes started together, one opened with each of a
/// repository's two keys, each removing the other's key, round after
/// round on a fresh repository. Each waits 300 ms before removing a key
/// file (the fault shim), so both have listed the keys before either
/// removes one: without the lock both would see two keys and remove
/// both. At most one succeeds, and a key that opens is always left.
#[test]
fn two_processes_removing_each_others_keys_leave_one_that_opens() {
    let rounds = 4;
    let (mut one_done, mut delayed) = (0, 0);
    for round in 0..rounds {
        let t = cli_repo();
        let first = key_names(&t.repo_path());
        let second = add_key(&t, PASS, "second pass");
        let first = first.into_iter().next().unwrap();
        let keys_dir = fs::canonicalize(t.repo_path().join("keys")).unwrap();
        let start = |pass: &str, victim: &str, report: &Path| {
            let mut c = larder_cmd(&t.repo_path(), &t.cache_path(), &["key", "remove", victim]);
            c.env("LARDER_PASSWORD", pass).env(
                "LARDER_REPOSITORY",
                fs::canonicalize(t.repo_path()).unwrap(),
            );
            shim::inject(
                &mut c,
                &[
                    ("FAULTSHIM_UNLINK_PREFIX", path_str(&keys_dir).to_string()),
                    ("FAULTSHIM_UNLINK_DELAY_MS", "300".to_string()),
                    ("FAULTSHIM_REPORT", path_str(report).to_string()),
                ],
            );
            spawn(c)
        };
        let reports = [t.dir.path().join("report-a"), t.dir.path().join("report-b")];
        let a = start(PASS, &second, &reports[0]);
        let b = start("second pass", &first, &reports[1]);
        let a = wait_bounded(a, "key remove (first key's process)");
        let b = wait_bounded(b, "key remove (second key's process)");
        let left = key_names(&t.repo_path());
        let what = format!(
            "round {round}: {}\n{}\nkeys left: {left:?}",
            a.all(),
            b.all()
        );
        assert!(!left.is_empty(), "no key left: {what}");
        assert!(
            opens(&t, PASS) || opens(&t, "second pass"),
            "no passphrase opens: {what}"
        );
        let done = [&a, &b].iter().filter(|o| o.code == 0).count();
        assert!(done <= 1, "both removals succeeded: {what}");
        // One that did not succeed was refused: locked (11), the last key
        // (1), or its own key already removed by the other before it
        // opened (wrong password, 12: possible when it started late).
        for o in [&a, &b] {
            assert!(matches!(o.code, 0 | 1 | 11 | 12), "unexpected exit: {what}");
        }
        one_done += done;
        delayed += reports
            .iter()
            .map(|r| shim::unlinks_delayed(r))
            .sum::<u64>();
    }
    println!("{rounds} rounds: {one_done} with one removal done, {delayed} removals delayed");
    assert!(delayed >= 1, "the shim delayed no removal of a key file");
}

/// `key passwd` killed (SIGKILL) at random points, over and over: after
/// each kill the old or the new passphrase opens the repository (both when
/// the kill fell between adding the new key and deleting the old one, and
/// then `key remove` removes the old one), the killed run's lock blocks
/// no next command, and at the end a `key passwd` and `check` go ahead.
#[test]
fn key_passwd_killed_anywhere_leaves_a_passphrase_that_opens() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let mut rng = Rng(0x6b65_7973);
    let mut current = PASS.to_string();
    // The key file `current` opens.
    let mut current_key = key_names(&repo).pop_first().unwrap();
    // How long an uninterrupted `key passwd` took lately.
    let mut run_len = Duration::from_millis(0);
    let (mut kills, mut locks_left, mut both) = (0, 0, 0);
    let mut round = 0;
    while kills < 12 {
        assert!(
            round < 60,
            "only {kills} of {round} runs were killed mid-run"
        );
        let new = format!("pass {round}");
        let file = pass_file(&t, "next", &new);
        let before = key_names(&repo);
        assert_eq!(before, BTreeSet::from([current_key.clone()]));
        let mut c = larder_cmd(
            &repo,
            &cache,
            &["key", "passwd", "--new-password-file", &file],
        );
        c.env("LARDER_PASSWORD", &current);
        // The default work factor for the new key: the derivation, with
        // the lock held, is most of the run.
        c.env("LARDER_KDF_WORK_FACTOR", "15");
        let started = Instant::now();
        let mut child = spawn(c);
        // The first run, and one in four, finishes; the others are killed
        // after a random delay or as soon as the new key is in storage.
        let finish = round == 0 || rng.below(4) == 0;
        let by_delay = rng.below(2) == 0;
        let delay = run_len.mul_f64(rng.below(1000) as f64 / 1000.0);
        let killed = !finish
            && loop {
                if child.try_wait().unwrap().is_some() {
                    break false;
                }
                let now = if by_delay {
                    started.elapsed() >= delay
                } else {
                    key_names(&repo).len() > before.len()
                };
                if now {
                    child.kill().unwrap();
                    break true;
                }
                std::thread::sleep(Duration::from_micros(200));
            };
        let o = wait_bounded(child, &format!("key passwd, round {round}"));
        let (old_opens, new_opens) = (opens(&t, &current), opens(&t, &new));
        let after = key_names(&repo);
        let what = format!("round {round}: {}\nkeys: {after:?}", o.all());
        assert!(old_opens || new_opens, "neither passphrase opens: {what}");
        let added: Vec<String> = after.difference(&before).cloned().collect();
        assert!(added.len() <= 1, "{what}");
        if killed {
            kills += 1;
            locks_left += usize::from(!names(&repo, "locks").is_empty());
            both += usize::from(old_opens && new_opens);
        } else {
            assert_eq!(o.code, 0, "{what}");
            assert!(new_opens && !old_opens, "{what}");
            run_len = started.elapsed();
        }
        // A killed run's lock blocks nobody: the next command goes ahead.
        // Killed with both keys in storage, the old one is removed with
        // the new (`key remove`, a key change under the lock itself).
        let next_cmd = if old_opens && new_opens {
            as_pass(&t, &new, &["key", "remove", &current_key])
        } else {
            let pass = if new_opens { &new } else { &current };
            as_pass(&t, pass, &["key", "list", "--json"])
        };
        assert_eq!(
            next_cmd.code,
            0,
            "{what}\nthe next command: {}",
            next_cmd.all()
        );
        if new_opens {
            current = new;
            current_key = added[0].clone();
        }
        round += 1;
    }
    println!("{kills} kills in {round} runs: {locks_left} left a lock, {both} left both keys");
    assert!(
        locks_left >= 3,
        "only {locks_left} of {kills} kills landed while the lock was held"
    );
    // A finished run after the kills: it and `check` go ahead.
    let file = pass_file(&t, "last", "last pass");
    let o = as_pass(
        &t,
        &current,
        &["key", "passwd", "--new-password-file", &file],
    );
    assert_eq!(o.code, 0, "{}", o.all());
    assert!(opens(&t, "last pass") && !opens(&t, &current));
    let chk = as_pass(&t, "last pass", &["check"]);
    assert!(chk.out.contains("no errors were found"), "{}", chk.all());
}

/// `larder init` of `repo`, its key made with the default work factor (so
/// that it derives for a while between finding no config and writing its
/// own: the window another init can fall into).
fn start_init(repo: &Path, cache: &Path) -> std::process::Child {
    let mut c = larder_cmd(repo, cache, &["init"]);
    c.env("LARDER_KDF_WORK_FACTOR", "15");
    spawn(c)
}

/// After the inits of a round: the repository opens, a backup and
/// `check` go ahead. With `one_key`, it holds one key and opens without a
/// warning; otherwise (an init killed between writing its key and the
/// config, then another init) a warning may name the other key as one
/// the config does not open with.
fn assert_sound_repository(repo: &Path, cache: &Path, one_key: bool, what: &str) {
    let keys = names(repo, "keys").len();
    let o = larder_ok(repo, cache, &["snapshots"]);
    if one_key || keys == 1 {
        assert_eq!(keys, 1, "{what}");
        assert!(!o.err.contains("warning"), "{what}\nsnapshots: {}", o.all());
    } else {
        let mut warnings = o.err.lines().filter(|l| l.contains("warning"));
        assert!(
            warnings.all(|l| l.contains("does not open")),
            "{what}\nsnapshots: {}",
            o.all()
        );
    }
    let src = repo.parent().unwrap().join("src");
    fill(&src, 3, 2, 64 << 10);
    backup_ok(repo, cache, &src);
    check_passes(repo, cache, false, what);
}

/// Two `larder init` of one location started together: one creates the
/// repository; the other finds the config there when it writes its own
/// (after both found none), says so and removes its key file, which
/// would otherwise wrap a master key no config uses. Then an `init`
/// killed at random points: the next one goes ahead. Each time the
/// repository ends with one key, opens without a warning, takes a backup
/// and passes `check`.
#[test]
fn inits_at_once_or_killed_leave_one_repository_that_opens() {
    let mut raced = 0;
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let (repo, cache) = (dir.path().join("repo"), dir.path().join("cache"));
        let (a, b) = (start_init(&repo, &cache), start_init(&repo, &cache));
        let a = wait_bounded(a, "init (first)");
        let b = wait_bounded(b, "init (second)");
        let what = format!("round {round}: {}\n{}", a.all(), b.all());
        let lost = match (a.code, b.code) {
            (0, 1) => &b,
            (1, 0) => &a,
            _ => panic!("not one success and one failure: {what}"),
        };
        assert!(lost.err.contains("already exists"), "{what}");
        raced += usize::from(
            lost.err
                .contains("another process created it while this init ran"),
        );
        assert_sound_repository(&repo, &cache, true, &what);
    }
    println!("3 rounds of two inits: {raced} found the other's config only when writing");
    assert!(
        raced >= 1,
        "no round had both inits past the check for a config"
    );

    let mut rng = Rng(0x696e_6974);
    let mut run_len = Duration::ZERO;
    let mut kills = 0;
    for round in 0..6 {
        let dir = tempfile::tempdir().unwrap();
        let (repo, cache) = (dir.path().join("repo"), dir.path().join("cache"));
        let started = Instant::now();
        let mut child = start_init(&repo, &cache);
        let delay = run_len.mul_f64(rng.below(1000) as f64 / 1000.0);
        let killed = round > 0
            && loop {
                if child.try_wait().unwrap().is_some() {
                    break false;
                }
                if started.elapsed() >= delay {
                    child.kill().unwrap();
                    break true;
                }
                std::thread::sleep(Duration::from_micros(200));
            };
        let o = wait_bounded(child, &format!("init, round {round}"));
        kills += usize::from(killed);
        if !killed {
            assert_eq!(o.code, 0, "{}", o.all());
            run_len = started.elapsed();
        }
        let had_config = repo.join("config").exists();
        let again = larder_run(&repo, &cache, &["init"]);
        let what = format!("init after a kill, round {round}: {}", again.all());
        if had_config {
            assert!(again.err.contains("already exists"), "{what}");
        } else {
            assert_eq!(again.code, 0, "{what}");
        }
        assert_sound_repository(&repo, &cache, false, &what);
    }
    println!("{kills} of 5 inits killed before they ended");
    assert!(
        kills >= 3,
        "only {kills} of 5 inits were killed before they ended"
    );
}

/// An `init` killed while it writes the config (its temporary file at the
/// repository's root created, not yet in place): the next `init` goes
/// ahead there rather than refusing a directory that is not empty, and
/// the repository opens, takes a backup and passes `check`.
#[test]
fn an_init_killed_in_its_config_write_leaves_a_location_init_can_use() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, cache) = (dir.path().join("repo"), dir.path().join("cache"));
    let hold = shim::Hold::prefixed(
        &format!("{}/.tmp-", repo.display()),
        true,
        dir.path(),
        "config",
    )
    .after_open();
    let mut c = larder_cmd(&repo, &cache, &["init"]);
    c.env("LARDER_KDF_WORK_FACTOR", "15");
    hold.inject(&mut c);
    let mut child = spawn(c);
    hold.wait_held(&mut child, "init, at its config's temporary file");
    child.kill().unwrap();
    let killed = wait_bounded(child, "init, killed");
    assert_ne!(killed.code, 0, "{}", killed.all());
    let at_root: Vec<String> = fs::read_dir(&repo)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tmp-"))
        .collect();
    assert_eq!(
        at_root.len(),
        1,
        "the killed write's temporary: {at_root:?}"
    );
    assert!(!repo.join("config").exists());
    assert_eq!(key_names(&repo).len(), 1, "the killed init's key");

    let again = larder_run(&repo, &cache, &["init"]);
    assert_eq!(again.code, 0, "init after the kill: {}", again.all());
    assert!(repo.join("config").exists());
    assert_sound_repository(
        &repo,
        &cache,
        false,
        "after an init killed in its config write",
    );
    // The killed write's temporary is a leftover prune removes: kept
    // within the grace period, removed after it.
    let first = larder_ok(&repo, &cache, &["prune"]);
    assert!(
        repo.join(&at_root[0]).exists(),
        "removed at first sight: {}",
        first.all()
    );
    let swept = larder_ok(&repo, &cache, &["prune", "--keep-delete", "0s"]);
    assert!(!repo.join(&at_root[0]).exists(), "{}", swept.all());
    assert!(swept.out.contains("removed 1 leftover"), "{}", swept.all());
    assert_sound_repository(&repo, &cache, false, "after the prunes");
}

/// An `init` whose config write fails in each way a write can: it keeps
/// its key whenever the config may have landed, so a repository that
/// exists always has a key that opens it. Nothing stored (EIO, a short
/// write): init fails, and the next one goes ahead. Stored but reported
/// failed: init fails, and the repository opens. Stored, then a retry
/// finds it (`RepositoryExists` for the config it wrote itself): init
/// succeeds.
#[test]
fn init_whose_config_write_fails_keeps_a_way_in() {
    use super::faulty_backend::{Fault, FaultyBackend};
    use larder::keys::NewKey;
    use larder::repository::InitOptions;
    use std::sync::Arc;
    let key = NewKey::Passphrase {
        pass: PASS.to_string().into(),
        work_factor: crate::common::TEST_WF,
    };
    for fault in [Fault::Eio, Fault::Short, Fault::Landed, Fault::Retried] {
        let t = TestRepo::new();
        let (repo, cache) = (t.repo_path(), t.cache_path());
        let be = Arc::new(FaultyBackend::new(&repo, Some(2), fault));
        let r = Repository::init(be.clone(), &key, &InitOptions::default(), &cache);
        let what = format!("{fault:?}: {:?}", r.as_ref().err());
        let log = be.log.lock().unwrap().clone();
        assert!(
            log.len() == 2 && log[0].starts_with("keys/") && log[1] == "config",
            "{what}: {log:?}"
        );
        assert_eq!(
            names(&repo, "keys"),
            BTreeSet::from([log[0]["keys/".len()..].to_string()]),
            "{what}: the key was not kept"
        );
        let landed = repo.join("config").exists();
        match fault {
            Fault::Eio | Fault::Short => {
                assert!(r.is_err() && !landed, "{what}");
                let o = super::larder_run(&repo, &cache, &["init"]);
                assert_eq!(o.code, 0, "{what}\nthe next init: {}", o.all());
            }
            Fault::Landed => assert!(r.is_err() && landed, "{what}"),
            Fault::Retried => assert!(r.is_ok() && landed, "{what}"),
        }
        assert!(opens(&t, PASS), "{what}: the passphrase does not open it");
        check_passes(&repo, &cache, false, &what);
    }
}

/// `check` held between its listing of the key files and its reads of them
/// (by the fault shim, past the key reads of its open), while another
/// process removes the second key: let go, it finds no problem and counts
/// the one key left. Before, the removed key was "No such file": a problem.
#[test]
fn check_beside_a_key_remove_finds_no_false_problem() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    fill(&t.dir.path().join("src"), 1, 3, 10_000);
    backup_ok(&repo, &cache, &t.dir.path().join("src"));
    let second = add_key(&t, PASS, "second pass");
    let scratch = tempfile::tempdir().unwrap();

    // How many key files a check opens in all: those its open reads, then
    // the two its key check reads.
    let probe = shim::Hold::new(&repo.join("keys"), false, scratch.path(), "count");
    probe.release();
    let mut c = larder_cmd(&repo, &cache, &["check"]);
    probe.inject(&mut c);
    let o = wait_bounded(spawn(c), "check, counting its key reads");
    assert_eq!(o.code, 0, "{}", o.all());
    let opens = probe.opens();
    assert!(opens > 2, "check opened {opens} key files");

    let hold = shim::Hold::new(&repo.join("keys"), false, scratch.path(), "held").skip(opens - 2);
    let mut c = larder_cmd(&repo, &cache, &["check"]);
    hold.inject(&mut c);
    let mut held = spawn(c);
    hold.wait_held(&mut held, "check, before it reads the key files");
    let o = larder_ok(&repo, &cache, &["key", "remove", &second[..12]]);
    assert!(!key_names(&repo).contains(&second), "{}", o.all());
    hold.release();
    let got = wait_bounded(held, "check");
    assert_eq!(got.code, 0, "{}", got.all());
    assert!(
        got.out.contains("checked 1 keys") && got.out.contains("no errors were found"),
        "{}",
        got.all()
    );
}
