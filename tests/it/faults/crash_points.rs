//! Each command that writes, killed with SIGKILL at every one of its file
//! opens in the repository in turn. `kill_loop` draws its kill points at
//! random, and so can miss a narrow window for many runs: an `init` killed
//! while its config's temporary file existed left a location the next
//! `init` refused, and only a CI run happened to hit it. Here the fault
//! shim holds the command just after its N-th open below the repository
//! (a new object's temporary file just created and still empty, an object
//! opened to be read, a directory opened to be synced after a link), for
//! every N the command reaches, and the test kills it there. Only the
//! opening thread is held; the others run on to their own next open.
//!
//! After each kill: every object under a final name is whole, `check`
//! passes (notices allowed), and the same command run again succeeds and
//! leaves what an unbroken run leaves (the repository takes a backup, the
//! snapshot restores exactly the tree it was taken of, a prune's kept
//! snapshot restores exactly).

use super::key_changes::key_names;
use super::{
    Out, assert_objects_whole_but, assert_same_manifest, cat_of, check_passes, dumps_exactly, fill,
    larder_cmd, larder_ok, larder_run, manifest, objects, restore_cli, shim, snapshot_id_of,
    snapshot_names, spawn, wait_bounded,
};
use crate::common::init_at;
use crate::support::{path_str, rand_bytes, write};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The forget and prune these tests run: keep the newest snapshot,
/// delete at once what nothing uses, repack what is partly used.
pub(super) const FORGET: &[&str] = &[
    "forget",
    "--keep-last",
    "1",
    "--prune",
    "--keep-delete",
    "0s",
    "--max-unused",
    "0",
];

/// The most kill points one command is killed at (spread evenly over its
/// opens when it makes more).
const MAX_POINTS: u64 = 64;

/// A copy of a prepared state (repository, cache and state directories).
pub(super) fn copy_state(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .args(["-a", path_str(from), path_str(to)])
        .status()
        .unwrap();
    assert!(st.success(), "cp -a {} {}", from.display(), to.display());
}

/// How a run under the hold ended.
pub(super) enum Ended {
    /// Held after the open it was aimed at, then killed.
    Killed,
    /// It made fewer opens this time and finished.
    Finished(Out),
}

/// Runs `larder ARGS` on the state in `dir` (its `repo` and `cache`),
/// held just after its open number `skip + 1` below the state's directory
/// `under` (`repo`, or another repository it reads), and
/// kills it there; or counts its opens when `skip` is `None` (it runs
/// whole). Returns how it ended and how many opens matched (for a killed
/// run, the ones up to the one it was held at).
pub(super) fn run_held(
    dir: &Path,
    under: &str,
    args: &[&str],
    env: &[(&str, &str)],
    skip: Option<u64>,
    scratch: &Path,
) -> (Ended, u64) {
    let (repo, cache) = (dir.join("repo"), dir.join("cache"));
    let tag = format!("{}", skip.map_or(-1, |n| n as i64));
    let hold = hold_below(dir, under, scratch, &tag).skip(skip.unwrap_or(1 << 40));
    let mut c = larder_cmd(&repo, &cache, args);
    c.envs(
        env.iter()
            .map(|(k, v)| (*k, v.replace("{dir}", path_str(dir)))),
    )
    .current_dir(dir);
    hold.inject(&mut c);
    let mut child = spawn(c);
    let deadline = Instant::now() + Duration::from_secs(60);
    let held = loop {
        if hold.is_held() {
            break true;
        }
        if child.try_wait().unwrap().is_some() {
            break false;
        }
        assert!(
            Instant::now() < deadline,
            "{args:?}, opens skipped {skip:?}: neither held nor ended within 60 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    };
    if held {
        child.kill().unwrap();
    }
    let o = wait_bounded(child, &format!("larder {args:?}, opens skipped {skip:?}"));
    if held {
        assert_ne!(o.code, 0, "killed, yet: {}", o.all());
        (Ended::Killed, skip.map_or(0, |n| n + 1))
    } else {
        // Only a process that exits writes the shim's report.
        (Ended::Finished(o), hold.opens())
    }
}

/// A hold (just after the open) of the opens below the state's directory
/// `under`: the repository, named by its absolute path (`larder_cmd`), or
/// another one the command names relative to the state, its working
/// directory (the shim matches paths as the process gives them).
pub(super) fn hold_below(dir: &Path, under: &str, scratch: &Path, tag: &str) -> shim::Hold {
    let hold = if under == "repo" {
        shim::Hold::new(&dir.join(under), false, scratch, tag)
    } else {
        shim::Hold::prefixed(&format!("{under}/"), false, scratch, tag)
    };
    hold.after_open()
}

/// The opens to kill at: all of `0..n`, or `MAX_POINTS` of them spread
/// evenly, the first and the last included.
pub(super) fn points(n: u64) -> Vec<u64> {
    if n <= MAX_POINTS {
        return (0..n).collect();
    }
    (0..MAX_POINTS)
        .map(|i| i * (n - 1) / (MAX_POINTS - 1))
        .collect()
}

/// Kills `larder ARGS` at each of its opens in turn, each time on a fresh
/// copy of the state in `base` (with `env` added to its environment,
/// `{dir}` in a value standing for the copy, and the copy as its working
/// directory);
/// `after` checks the copy after the kill
/// (and a copy where the command finished, having made fewer opens this
/// time), after `check` has passed there when `check` is set and a
/// repository is there. At least nine runs in ten must be killed.
fn each_point(
    base: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    check: bool,
    after: impl Fn(&Path, &str),
) {
    each_point_but(base, args, env, check, &[], after)
}

/// [`each_point`] on a state whose objects named in `damaged` were
/// damaged on purpose (left out of the whole-objects test).
fn each_point_but(
    base: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    check: bool,
    damaged: &[&str],
    after: impl Fn(&Path, &str),
) {
    let scratch = tempfile::tempdir().unwrap();
    let count_dir = scratch.path().join("count");
    copy_state(base, &count_dir);
    let (ended, opens) = run_held(&count_dir, "repo", args, env, None, scratch.path());
    match ended {
        Ended::Finished(o) => assert_eq!(o.code, 0, "the unbroken run: {}", o.all()),
        Ended::Killed => panic!("the counting run of {args:?} was held"),
    }
    assert!(opens > 0, "{args:?} opened nothing in the repository");
    let pts = points(opens);
    let mut killed = 0;
    for &n in &pts {
        let dir = scratch.path().join(format!("at-{n}"));
        copy_state(base, &dir);
        let what = format!("larder {args:?} killed after open {} of {opens}", n + 1);
        match run_held(&dir, "repo", args, env, Some(n), scratch.path()).0 {
            Ended::Killed => killed += 1,
            Ended::Finished(o) => assert_eq!(o.code, 0, "{what}, but it finished: {}", o.all()),
        }
        let (repo, cache) = paths(&dir);
        if repo.join("config").exists() {
            assert_objects_whole_but(&repo, damaged);
            if check {
                check_passes(&repo, &cache, false, &what);
            }
        }
        after(&dir, &what);
        fs::remove_dir_all(&dir).unwrap();
    }
    println!(
        "{args:?}: {opens} opens, killed at {killed} of {} points",
        pts.len()
    );
    assert!(
        killed * 10 >= pts.len() * 9,
        "{args:?}: killed at only {killed} of {} points",
        pts.len()
    );
}

/// The repository and cache in a state directory.
pub(super) fn paths(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join("repo"), dir.join("cache"))
}

/// A state directory (`repo`, `cache` and the state directory
/// `larder_cmd` puts beside them) with a repository of small packs, and
/// `src` backed up into it once for each of `rounds`, each round
/// replacing a third of the files (so older snapshots hold data the newer
/// do not). Returns the state directory and the manifest of `src` as the
/// last backup took it.
pub(super) fn backed_up(
    base: &Path,
    src: &Path,
    rounds: u64,
) -> (PathBuf, BTreeMap<String, String>) {
    let state = base.join("state");
    let (repo, cache) = paths(&state);
    drop(init_at(&repo, &cache));
    fill(src, 1, 6, 40 << 10);
    for round in 0..rounds {
        fill(
            &src.join(format!("r{}", round % 2)),
            10 + round,
            4,
            200 << 10,
        );
        larder_ok(&repo, &cache, &["backup", "-q", path_str(src)]);
    }
    (state, manifest(src))
}

/// Moves the state's repository to `from` (the source `copy --from-repo
/// from` reads, relative to the state) and makes an empty one in its
/// place; returns the new repository's path and the state's cache.
pub(super) fn into_copy_source(state: &Path) -> (PathBuf, PathBuf) {
    let (repo, cache) = paths(state);
    fs::rename(&repo, state.join("from")).unwrap();
    drop(init_at(&repo, &cache));
    (repo, cache)
}

/// Restores `snapshot` and compares it with `want`; then `check
/// --read-data` must pass.
pub(super) fn restores_exactly(
    dir: &Path,
    snapshot: &str,
    src: &Path,
    want: &BTreeMap<String, String>,
    what: &str,
) {
    let (repo, cache) = paths(dir);
    let got = restore_cli(&repo, &cache, snapshot, src, &dir.join("back"));
    assert_same_manifest(want, &manifest(&got), what);
    fs::remove_dir_all(dir.join("back")).unwrap();
    check_passes(&repo, &cache, true, what);
}

/// An `init` killed at each open: the next `init` goes ahead (or says
/// the repository exists, when the config had landed), and the repository
/// then takes a backup that restores exactly.
#[test]
fn an_init_killed_at_each_open_leaves_a_location_init_can_use() {
    let base = tempfile::tempdir().unwrap();
    let state = base.path().join("state");
    fs::create_dir(&state).unwrap();
    let src = base.path().join("src");
    fill(&src, 1, 4, 20 << 10);
    let want = manifest(&src);
    each_point(&state, &["init"], &[], false, |dir, what| {
        let (repo, cache) = paths(dir);
        let had_config = repo.join("config").exists();
        let again = larder_run(&repo, &cache, &["init"]);
        if had_config {
            assert!(
                again.err.contains("already exists"),
                "{what}: {}",
                again.all()
            );
        } else {
            assert_eq!(again.code, 0, "{what}: init again: {}", again.all());
        }
        let o = larder_ok(&repo, &cache, &["backup", "--json", path_str(&src)]);
        restores_exactly(dir, &snapshot_id_of(&o), &src, &want, what);
    });
}

/// The first backup (which also trains the repository's dictionary on
/// its text files and stores it) and a later one with new, changed and
/// unchanged files, each killed at each open: `check` passes; the backup
/// run again succeeds and its snapshot restores exactly the tree.
#[test]
fn a_backup_killed_at_each_open_leaves_a_repository_the_next_backup_completes() {
    let budget = [("LARDER_DICT_SAMPLES", crate::dictionary::BUDGET)];
    for rounds in [0, 1] {
        let base = tempfile::tempdir().unwrap();
        let src = base.path().join("src");
        let (state, _) = backed_up(base.path(), &src, rounds);
        fill(&src.join("new"), 2, 6, 300 << 10);
        write(&src.join("d0/f000.bin"), &rand_bytes(77, 50 << 10));
        crate::dictionary::make_docs(&src.join("docs"), 3, 120);
        let want = manifest(&src);
        let args = ["backup", "-q", path_str(&src)];
        if rounds == 0 {
            // The unbroken first backup stores a dictionary.
            let trial = base.path().join("trial");
            copy_state(&state, &trial);
            let (repo, cache) = paths(&trial);
            let mut c = larder_cmd(&repo, &cache, &args);
            c.envs(budget);
            let o = wait_bounded(spawn(c), "the first backup");
            assert_eq!(o.code, 0, "{}", o.all());
            assert_eq!(objects(&repo, "dicts"), 1, "no dictionary trained");
        }
        each_point(&state, &args, &budget, true, |dir, what| {
            let (repo, cache) = paths(dir);
            let o = larder_ok(&repo, &cache, &["backup", "--json", path_str(&src)]);
            restores_exactly(dir, &snapshot_id_of(&o), &src, &want, what);
        });
    }
}

/// `forget --keep-last 1 --prune` with no grace period, and a `prune`
/// with the default one (deletion marks, nothing deleted yet), killed at
/// each open: `check` passes; run again (and for the second, a prune
/// with no grace period after it), the newest snapshot alone is left and
/// restores exactly.
#[test]
fn a_forget_or_prune_killed_at_each_open_leaves_a_repository_it_completes() {
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (state, want) = backed_up(base.path(), &src, 3);
    let forget = FORGET;
    each_point(&state, forget, &[], true, |dir, what| {
        let (repo, cache) = paths(dir);
        larder_ok(&repo, &cache, forget);
        let left = snapshot_names(&repo);
        assert_eq!(left.len(), 1, "{what}: snapshots left {left:?}");
        restores_exactly(dir, "latest", &src, &want, what);
    });

    let (repo, cache) = paths(&state);
    larder_ok(&repo, &cache, &["forget", "--keep-last", "1"]);
    each_point(&state, &["prune"], &[], true, |dir, what| {
        let (repo, cache) = paths(dir);
        larder_ok(&repo, &cache, &["prune"]);
        larder_ok(&repo, &cache, &["prune", "--keep-delete", "0s"]);
        restores_exactly(dir, "latest", &src, &want, what);
    });
}

/// Commands that rewrite snapshots, the index or the keys, killed at each
/// open: `check` passes, and run again each leaves what it is for.
/// `tag` and `rewrite --forget` save a new snapshot, then remove the old
/// one; `repair index` rebuilds `index/`; `key add` writes a key and `key
/// remove` deletes one.
#[test]
fn metadata_commands_killed_at_each_open_leave_a_repository_they_complete() {
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (state, want) = backed_up(base.path(), &src, 1);

    let tag: &[&str] = &["tag", "--add", "kept", "latest"];
    each_point(&state, tag, &[], true, |dir, what| {
        let (repo, cache) = paths(dir);
        larder_ok(&repo, &cache, tag);
        let o = larder_ok(&repo, &cache, &["snapshots", "--json", "--tag", "kept"]);
        assert!(
            o.out.contains("kept"),
            "{what}: no snapshot tagged: {}",
            o.all()
        );
        restores_exactly(dir, "latest", &src, &want, what);
    });

    let rewrite: &[&str] = &["rewrite", "--exclude", "r0", "--forget", "latest"];
    let mut want_rewritten = want.clone();
    want_rewritten.retain(|k, _| k != "r0" && !k.starts_with("r0/"));
    each_point(&state, rewrite, &[], true, |dir, what| {
        let (repo, cache) = paths(dir);
        larder_ok(&repo, &cache, rewrite);
        restores_exactly(dir, "latest", &src, &want_rewritten, what);
    });

    let repair: &[&str] = &["repair", "index"];
    each_point(&state, repair, &[], false, |dir, what| {
        let (repo, cache) = paths(dir);
        larder_ok(&repo, &cache, repair);
        restores_exactly(dir, "latest", &src, &want, what);
    });

    let new_pass = base.path().join("new-pass");
    fs::write(&new_pass, "another passphrase\n").unwrap();
    let add: &[&str] = &["key", "add", "--new-password-file", path_str(&new_pass)];
    each_point(&state, add, &[], true, |dir, what| {
        let (repo, cache) = paths(dir);
        larder_ok(&repo, &cache, add);
        let mut c = larder_cmd(&repo, &cache, &["snapshots", "--json"]);
        c.env("LARDER_PASSWORD", "another passphrase");
        let o = wait_bounded(spawn(c), "snapshots with the new key");
        assert_eq!(o.code, 0, "{what}: the new key: {}", o.all());
        restores_exactly(dir, "latest", &src, &want, what);
    });

    // `key remove` of that added key, killed at each open: the original
    // passphrase still opens the repository; run again (or found done),
    // the key is gone and the other passphrase no longer opens it.
    let (repo, cache) = paths(&state);
    let before = key_names(&repo);
    larder_ok(&repo, &cache, add);
    let added = key_names(&repo)
        .into_iter()
        .find(|k| !before.contains(k))
        .unwrap();
    let remove: &[&str] = &["key", "remove", &added];
    each_point(&state, remove, &[], true, |dir, what| {
        let (repo, cache) = paths(dir);
        if key_names(&repo).contains(&added) {
            larder_ok(&repo, &cache, remove);
        }
        assert!(
            !key_names(&repo).contains(&added),
            "{what}: the key is still there"
        );
        let mut c = larder_cmd(&repo, &cache, &["snapshots", "--json"]);
        c.env("LARDER_PASSWORD", "another passphrase");
        let o = wait_bounded(spawn(c), "snapshots with the removed key");
        assert_ne!(o.code, 0, "{what}: the removed key still opens it");
        restores_exactly(dir, "latest", &src, &want, what);
    });
}

/// `copy` killed at each open of the repository it copies into (the
/// source beside it, untouched but for its lock): `check` passes; run
/// again, it holds every source snapshot once and the newest restores
/// exactly.
#[test]
fn a_copy_killed_at_each_open_leaves_a_repository_it_completes() {
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (state, want) = backed_up(base.path(), &src, 2);
    into_copy_source(&state);
    // Relative: each copy of the state copies from its own source.
    let args = ["copy", "--from-repo", "from"];
    let env = [("LARDER_FROM_PASSWORD", crate::common::PASS)];
    let copy = |dir: &Path| {
        let (repo, cache) = paths(dir);
        let mut c = larder_cmd(&repo, &cache, &args);
        c.envs(env).current_dir(dir);
        wait_bounded(spawn(c), "copy again")
    };
    each_point(&state, &args, &env, true, |dir, what| {
        let o = copy(dir);
        assert_eq!(o.code, 0, "{what}: {}", o.all());
        assert_eq!(
            snapshot_names(&dir.join("repo")).len(),
            2,
            "{what}: snapshots"
        );
        restores_exactly(dir, "latest", &src, &want, what);
    });
}

/// `key passwd` killed at each open: the repository opens with the old
/// passphrase or the new one (both, when it was killed between adding the
/// new key and removing the old). Where the new one does not open it
/// yet, `key passwd` runs again. Then the new passphrase opens it,
/// `check` passes, and the old one no longer opens it unless both keys
/// are there (and no third).
#[test]
fn a_key_passwd_killed_at_each_open_leaves_a_repository_a_passphrase_opens() {
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (state, want) = backed_up(base.path(), &src, 1);
    let new_pass = base.path().join("new-pass");
    fs::write(&new_pass, "another passphrase\n").unwrap();
    let args = ["key", "passwd", "--new-password-file", path_str(&new_pass)];
    let with = |dir: &Path, pass: &str, args: &[&str]| {
        let (repo, cache) = paths(dir);
        let mut c = larder_cmd(&repo, &cache, args);
        c.env("LARDER_PASSWORD", pass);
        wait_bounded(spawn(c), &format!("{args:?} with {pass:?}"))
    };
    let (old, new) = (crate::common::PASS, "another passphrase");
    each_point(&state, &args, &[], false, |dir, what| {
        let opens = |pass: &str| with(dir, pass, &["snapshots", "--json"]).code == 0;
        let (old_opened, new_opened) = (opens(old), opens(new));
        assert!(old_opened || new_opened, "{what}: neither passphrase opens");
        if !new_opened {
            let o = with(dir, old, &args);
            assert_eq!(o.code, 0, "{what}: passwd again: {}", o.all());
        }
        let c = with(dir, new, &["check"]);
        assert!(
            c.out.contains("no errors were found"),
            "{what}: {}",
            c.all()
        );
        let keys = key_names(&dir.join("repo")).len();
        if opens(old) {
            assert!(
                old_opened && new_opened && keys == 2,
                "{what}: old opens, {keys} keys"
            );
        } else {
            assert_eq!(keys, 1, "{what}");
        }
        let back = dir.join("back");
        let o = with(
            dir,
            new,
            &["restore", "-q", "latest", "--target", path_str(&back)],
        );
        assert_eq!(o.code, 0, "{what}: {}", o.all());
        let got = back.join(src.strip_prefix("/").unwrap());
        assert_same_manifest(&want, &manifest(&got), what);
    });
}

/// A scheduled run (`larder run PROFILE`: backup, retention, prune and
/// check when due) killed at each open: the next run of the profile
/// succeeds, the profile's retention holds, and the newest snapshot
/// restores exactly.
#[test]
fn a_scheduled_run_killed_at_each_open_leaves_a_repository_the_next_run_completes() {
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (state, _) = backed_up(base.path(), &src, 2);
    fill(&src.join("new"), 40, 3, 100 << 10);
    let want = manifest(&src);
    fs::write(state.join("pass"), format!("{}\n", crate::common::PASS)).unwrap();
    let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
    fs::set_permissions(state.join("pass"), private).unwrap();
    // Due at once (never run), then not again today.
    let now = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC);
    let daily = format!("{} {} * * *", now.minute(), (now.hour() + 12) % 24);
    fs::write(
        state.join("larder.toml"),
        format!(
            "[profile.home]\nrepository = \"~/repo\"\npassword-file = \"pass\"\n\
             paths = [{:?}]\nretries = 0\nkeep-last = 2\nprune = {daily:?}\n\
             check = {daily:?}\n",
            path_str(&src)
        ),
    )
    .unwrap();
    let env = [
        ("HOME", "{dir}"),
        ("LARDER_CONFIG", "{dir}/larder.toml"),
        ("TZ", "UTC"),
    ];
    let run = |dir: &Path| {
        let (repo, cache) = paths(dir);
        let mut c = larder_cmd(&repo, &cache, &["--json", "run", "home"]);
        c.env("HOME", dir)
            .env("LARDER_CONFIG", dir.join("larder.toml"))
            .env("TZ", "UTC")
            .current_dir(dir);
        wait_bounded(spawn(c), "the next run")
    };
    each_point(
        &state,
        &["--json", "run", "home"],
        &env,
        true,
        |dir, what| {
            let o = run(dir);
            assert_eq!(o.code, 0, "{what}: {}", o.all());
            let summary = crate::support::json_lines(&o.out).pop().unwrap();
            assert_eq!(summary["result"], "ok", "{what}: {summary}");
            let left = snapshot_names(&dir.join("repo")).len();
            assert!(left <= 2, "{what}: {left} snapshots, keep-last = 2");
            restores_exactly(dir, "latest", &src, &want, what);
        },
    );
}

/// `repair snapshots --forget` killed at each open, on a repository that
/// lost a pack of file data (and had `repair index` run): run again, it
/// leaves what an unbroken run leaves: the same snapshots (no original
/// left, no repaired one twice), a repository `check --read-data` reads
/// whole, and a newest snapshot that restores the same files.
#[test]
fn a_repair_snapshots_killed_at_each_open_leaves_what_an_unbroken_run_leaves() {
    use larder::pack::BlobType;
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (state, _) = backed_up(base.path(), &src, 2);
    let (repo, cache) = paths(&state);
    // Lose one pack that holds file data only.
    let lib = larder::Repository::open(
        std::sync::Arc::new(larder::backend::LocalBackend::new(repo.clone())),
        &larder::keys::Credential::passphrase(crate::common::PASS),
        &base.path().join("lib-cache"),
    )
    .unwrap();
    let mut index = lib.index().unwrap();
    let lost = index
        .packs()
        .unwrap()
        .into_iter()
        .map(|(p, _)| p)
        .find(|p| {
            let blobs = index.blobs_in_pack(p).unwrap();
            !blobs.is_empty() && blobs.iter().all(|b| b.ty == BlobType::Data)
        })
        .expect("a pack of file data");
    drop(index);
    drop(lib);
    let hex = lost.to_hex();
    fs::remove_file(repo.join("packs").join(&hex[..2]).join(&hex)).unwrap();
    larder_ok(&repo, &cache, &["repair", "index"]);
    let args = ["repair", "snapshots", "--forget"];

    // What an unbroken run leaves.
    let trial = base.path().join("trial");
    copy_state(&state, &trial);
    let (trepo, tcache) = paths(&trial);
    larder_ok(&trepo, &tcache, &args);
    // Sealing is randomised: snapshots are compared by what they hold.
    let contents = |repo: &Path, cache: &Path| {
        let o = larder_ok(repo, cache, &["snapshots", "--json"]);
        let list: serde_json::Value = serde_json::from_str(&o.out).unwrap();
        let mut v: Vec<String> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|s| format!("{} {} {}", s["time"], s["tree"], s["tags"]))
            .collect();
        v.sort();
        v
    };
    let want_snaps = contents(&trepo, &tcache);
    let back = trial.join("back");
    let got = restore_cli(&trepo, &tcache, "latest", &src, &back);
    let want = manifest(&got);
    assert_ne!(want, manifest(&src), "the lost pack took no file");

    each_point(&state, &args, &[], false, |dir, what| {
        let (repo, cache) = paths(dir);
        larder_ok(&repo, &cache, &args);
        assert_eq!(contents(&repo, &cache), want_snaps, "{what}: snapshots");
        restores_exactly(dir, "latest", &src, &want, what);
    });
}

/// `backup --stdin-from-command` (a stream of data partly stored, partly
/// new) killed at each open: `check` passes, and run again it completes
/// and its stream dumps exactly.
#[test]
fn a_command_stream_backup_killed_at_each_open_leaves_a_repository_the_next_completes() {
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (state, _) = backed_up(base.path(), &src, 1);
    fill(&src.join("new"), 3, 4, 300 << 10);
    let (command, data) = cat_of(&src);
    let mut args = vec!["backup", "--json", "--stdin-from-command", "--"];
    args.extend(command.iter().map(String::as_str));
    each_point(&state, &args, &[], true, |dir, what| {
        let (repo, cache) = paths(dir);
        let o = larder_ok(&repo, &cache, &args);
        dumps_exactly(&repo, &cache, &snapshot_id_of(&o), "stdin", &data, what);
    });
}

/// The state of [`backed_up`] with three rounds, its two oldest snapshots
/// forgotten (no prune): returns it with their trees, sorted.
pub(super) fn with_forgotten(base: &Path, src: &Path) -> (PathBuf, Vec<String>) {
    let (state, _) = backed_up(base, src, 3);
    let (repo, cache) = paths(&state);
    let snaps = crate::recover::snapshot_trees(&repo, &cache);
    assert_eq!(snaps.len(), 3);
    let mut by_time = snaps.clone();
    by_time.sort_by_key(|s| {
        let o = larder_ok(&repo, &cache, &["snapshots", "--json", &s.0]);
        let v: serde_json::Value = serde_json::from_str(&o.out).unwrap();
        v[0]["time"].as_str().unwrap().to_string()
    });
    let old: Vec<&str> = by_time[..2].iter().map(|s| s.0.as_str()).collect();
    larder_ok(&repo, &cache, &[&["forget"], &old[..]].concat());
    let mut lost: Vec<String> = by_time[..2].iter().map(|s| s.1.clone()).collect();
    lost.sort();
    (state, lost)
}

/// The tree of the one `/recover` snapshot in `dir`'s repository.
pub(super) fn recovery_tree(dir: &Path, what: &str) -> String {
    let (repo, cache) = paths(dir);
    let found: Vec<_> = crate::recover::snapshot_trees(&repo, &cache)
        .into_iter()
        .filter(|s| s.2 == serde_json::json!(["/recover"]))
        .collect();
    assert_eq!(found.len(), 1, "{what}: recovery snapshots: {found:?}");
    found[0].1.clone()
}

/// `recover` killed at each open: `check` passes, and run again it
/// leaves one recovery snapshot with the very tree an unbroken run saves
/// (a root a killed run stored but did not save a snapshot of is taken
/// for its entries, not recovered as one more lost tree).
#[test]
fn a_recover_killed_at_each_open_leaves_what_an_unbroken_run_leaves() {
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (state, lost) = with_forgotten(base.path(), &src);
    let whole = base.path().join("whole");
    copy_state(&state, &whole);
    let (repo, cache) = paths(&whole);
    let r = crate::recover::recover_json(&repo, &cache, &[]);
    assert_eq!(r["lost"], serde_json::json!(lost), "{r}");
    let want = recovery_tree(&whole, "the unbroken run");
    each_point(&state, &["recover"], &[], true, |dir, what| {
        let (repo, cache) = paths(dir);
        let again = crate::recover::recover_json(&repo, &cache, &[]);
        assert!(
            again["unreadable"] == serde_json::json!([]),
            "{what}: {again}"
        );
        assert_eq!(recovery_tree(dir, what), want, "{what}");
        let more = crate::recover::recover_json(&repo, &cache, &[]);
        assert_eq!(more["lost"], serde_json::json!([]), "{what}: {more}");
    });
}

/// `cache --cleanup` (an old cache to remove, and a killed cleanup's
/// leftover) killed at each open in the cache root: every command then
/// uses the cache (a backup restores exactly), the next cleanup leaves no
/// leftover, and `check` passes.
#[test]
fn a_cache_cleanup_killed_at_each_open_leaves_a_cache_every_command_uses() {
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (state, _) = backed_up(base.path(), &src, 1);
    let (_, cache) = paths(&state);
    let dirs: Vec<PathBuf> = fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().len() == 64)
        .collect();
    assert_eq!(dirs.len(), 1);
    crate::cache_cmd::age_cache(&dirs[0], 40);
    write(&cache.join(".remove-left/a/b"), b"left by a killed cleanup");
    fill(&src.join("after"), 9, 2, 40 << 10);
    let want = manifest(&src);
    // Relative, so that the hold (paths as the process gives them) sees
    // the opens below the cache root.
    let args = ["cache", "--cleanup", "--cache-dir", "cache"];
    let scratch = tempfile::tempdir().unwrap();
    let count = scratch.path().join("count");
    copy_state(&state, &count);
    let (ended, opens) = run_held(&count, "cache", &args, &[], None, scratch.path());
    assert!(matches!(ended, Ended::Finished(ref o) if o.code == 0));
    assert!(opens > 0, "the cleanup opened nothing below the cache root");
    for n in points(opens) {
        let dir = scratch.path().join(format!("at-{n}"));
        copy_state(&state, &dir);
        let what = format!("cache --cleanup killed after open {} of {opens}", n + 1);
        run_held(&dir, "cache", &args, &[], Some(n), scratch.path());
        let (repo, cache) = paths(&dir);
        let o = larder_ok(&repo, &cache, &["backup", "--json", path_str(&src)]);
        restores_exactly(&dir, &snapshot_id_of(&o), &src, &want, &what);
        let o = larder_ok(
            &repo,
            &cache,
            &["cache", "--cleanup", "--max-age", "0", "--json"],
        );
        let r: serde_json::Value = serde_json::from_str(&o.out).unwrap();
        assert_eq!(r["in_use"], serde_json::json!([]), "{what}: {r}");
        let left: Vec<_> = fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".remove-") || n.len() == 64)
            .collect();
        assert!(left.is_empty(), "{what}: left in the cache root: {left:?}");
        check_passes(&repo, &cache, false, &what);
        fs::remove_dir_all(&dir).unwrap();
    }
    println!("cache --cleanup: {opens} opens below the cache root");
}

/// The state of [`backed_up`] (one round) with the header of its data
/// pack of most blobs damaged: returns it, the pack's id, the snapshot's
/// id and the manifest it restores to.
pub(super) fn with_damaged_header(
    base: &Path,
    src: &Path,
) -> (PathBuf, String, String, BTreeMap<String, String>) {
    let (state, want) = backed_up(base, src, 1);
    let (repo, cache) = paths(&state);
    let packs = crate::repair_packs::data_packs(&repo, &base.join("lib-cache"));
    let (pack, entries) = packs.first().unwrap();
    assert!(entries.len() >= 2, "{entries:?}");
    crate::repair_packs::damage_header(&repo, pack);
    let snaps = crate::recover::snapshot_trees(&repo, &cache);
    assert_eq!(snaps.len(), 1);
    (state, pack.to_hex(), snaps[0].0.clone(), want)
}

/// `repair packs` of a pack whose header is damaged (every blob
/// salvageable) killed at each open: `check` finds nothing wrong but that
/// damage, run again where the pack is still in storage it completes, and the snapshot restores
/// exactly with `check --read-data` passing; a prune afterwards finishes
/// what a killed run left (its deletion plan) and changes none of that.
#[test]
fn a_repair_packs_killed_at_each_open_leaves_a_repository_it_completes() {
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let (state, pack, snapshot, want) = with_damaged_header(base.path(), &src);
    let id = larder::Id::from_hex(&pack).unwrap();
    let args = ["repair", "packs", &pack];
    each_point_but(&state, &args, &[], false, &[&pack], |dir, what| {
        let (repo, cache) = paths(dir);
        // Before the rerun, `check` finds nothing wrong but the damage
        // itself (the header, while the pack is listed).
        let c = larder_run(&repo, &cache, &["check"]);
        for l in c.err.lines().filter(|l| l.starts_with("error:")) {
            assert!(l.contains(&pack), "{what}: {}", c.all());
        }
        if crate::repair_packs::pack_path(&repo, &id).exists() {
            let r = crate::repair_packs::repair_json(&repo, &cache, &[&pack]);
            assert_eq!(r["packs"][0]["lost"], serde_json::json!([]), "{what}: {r}");
        }
        assert!(
            !crate::repair_packs::pack_path(&repo, &id).exists(),
            "{what}"
        );
        // A rerun copies nothing a killed run had copied already.
        let lib = crate::common::lib_open(&repo, &dir.join("lib-cache"));
        super::assert_each_blob_stored_once(&lib);
        drop(lib);
        restores_exactly(dir, &snapshot, &src, &want, what);
        larder_ok(&repo, &cache, &["prune", "--keep-delete", "0s"]);
        larder_ok(&repo, &cache, &["prune", "--keep-delete", "0s"]);
        restores_exactly(dir, &snapshot, &src, &want, what);
    });
}

#[test]
fn a_migrate_killed_at_each_open_leaves_a_repository_it_completes() {
    use crate::old_format::{config_version, fixture, old_check, old_ok, restores_the_fixture};
    let base = tempfile::tempdir().unwrap();
    let f = fixture(4, base.path(), true);
    let env = [("LARDER_PASSWORD", f.passphrase.as_str())];
    let seen = std::cell::RefCell::new(std::collections::BTreeSet::new());
    each_point(
        base.path(),
        &["migrate", "upgrade_repo_v6"],
        &env,
        false,
        |dir, what| {
            // The config is whole, of one version or the other.
            let v = config_version(dir);
            assert!(v == 4 || v == 6, "{what}: config version {v}");
            seen.borrow_mut().insert(v);
            old_check(dir, &f, what);
            let o = old_ok(dir, &f, &["migrate", "upgrade_repo_v6"]);
            assert_eq!(config_version(dir), 6, "{what}: {}", o.all());
            restores_the_fixture(dir, &f, &dir.join("restored"));
        },
    );
    // Killed before the switch and after it (during the lock's hold).
    assert_eq!(
        seen.into_inner(),
        [4, 6].into(),
        "the versions left by the kills"
    );
}
