//! Issue 10's single-process safety items, each as it was found: lost data
//! carried into new snapshots, a bad index segment locking everyone out,
//! the master key swapped under the user, a mistyped new passphrase, screen
//! escapes in file names, a backup of nothing, and an interrupted backup.

use crate::common::{self, TestRepo};
use crate::support::*;
use larder::Id;
use larder::backend::{Backend, Kind};
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A repository with small packs, used through the CLI only from here on
/// (its library-made cache is dropped, so every binary builds its own).
fn cli_repo() -> TestRepo {
    let t = TestRepo::new();
    drop(t.init());
    fs::remove_dir_all(t.cache_path()).unwrap();
    t
}

/// A source tree of a few incompressible files in two directories.
fn make_tree(src: &Path) {
    write(&src.join("a.bin"), &rand_bytes(1, 300_000));
    write(&src.join("sub/b.bin"), &rand_bytes(2, 200_000));
    write(&src.join("sub/deeper/c.txt"), b"small file\n");
}

/// The repository opened by the library, with a cache of its own (the CLI's
/// stays the CLI's).
fn lib_open(t: &TestRepo) -> larder::Repository {
    larder::Repository::open(
        t.backend(),
        &larder::keys::Credential::passphrase(common::PASS),
        &t.dir.path().join("lib-cache"),
    )
    .unwrap()
}

/// The pack holding blob `id`, per the index.
fn pack_of(t: &TestRepo, id: &Id) -> Id {
    let repo = lib_open(t);
    repo.lookup(id).unwrap().expect("blob is indexed").pack
}

/// The node of `/…/src/rel` in the latest snapshot (via the library).
fn latest_node(t: &TestRepo, src: &Path, rel: &str) -> larder::tree::Node {
    let repo = lib_open(t);
    let (_, snap) = larder::snapshot::resolve(&repo, "latest", &Default::default()).unwrap();
    let full = src.join(rel);
    let dir = full.parent().unwrap();
    let tid = larder::walker::tree_at(&repo, snap.tree, path_str(dir)).unwrap();
    let tree = repo.load_tree(&tid).unwrap();
    tree.find(full.file_name().unwrap().as_encoded_bytes())
        .cloned()
        .expect("node exists")
}

fn backup_json(t: &TestRepo, src: &Path, want: i32) -> serde_json::Value {
    let (out, _) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["--json", "backup", path_str(src)],
        want,
    );
    json_lines(&out).pop().expect("a summary line")
}

fn restore_latest_and_compare(t: &TestRepo, src: &Path) {
    let dest = tempfile::tempdir().unwrap();
    let spec = format!("latest:{}", path_str(src));
    cli(
        &t.repo_path(),
        &t.cache_path(),
        &["restore", &spec, "--target", path_str(dest.path())],
        0,
    );
    assert_same_tree(src, dest.path());
}

/// Item 2: a file whose data pack was lost (and the index repaired) is read
/// again by the next backup instead of reusing the parent's chunk list, so
/// the new snapshot restores, and the re-stored blob heals the old one too.
#[test]
fn lost_data_is_read_again_not_carried_into_new_snapshots() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    make_tree(&src);
    let first = backup_json(&t, &src, 0);
    let first = first["snapshot_id"]
        .as_str()
        .expect("a snapshot id")
        .to_string();
    let a = latest_node(&t, &src, "a.bin");
    let lost = pack_of(&t, &a.content[0]);
    t.backend().delete(Kind::Pack, &lost.to_hex()).unwrap();
    cli(&t.repo_path(), &t.cache_path(), &["repair", "index"], 0);

    let s = backup_json(&t, &src, 0);
    assert!(
        s["files_unmodified"].as_u64().unwrap() < 3,
        "a file whose data is gone counted as unmodified: {s}"
    );
    assert!(s["data_added"].as_u64().unwrap() > 0, "{s}");
    restore_latest_and_compare(&t, &src);
    // The new snapshot is whole. The first one is healed where its trees
    // equal the new ones; a directory above the source whose metadata
    // changed in between (other tests touch /tmp) keeps its lost tree, and
    // then only the first snapshot may be reported.
    let mut c = common::larder(&t.repo_path(), &t.cache_path());
    c.args(["check", "--read-data"]);
    let (code, out, err) = run(c);
    if code != 0 || !out.contains("no errors were found") {
        for line in err.lines().filter(|l| l.starts_with("error:")) {
            assert!(
                line.contains(&first[..8]),
                "a problem outside the first snapshot: {line}\n{out}{err}"
            );
        }
        cli(&t.repo_path(), &t.cache_path(), &["forget", &first], 0);
        let (out, err) = cli(
            &t.repo_path(),
            &t.cache_path(),
            &["check", "--read-data"],
            0,
        );
        assert!(out.contains("no errors were found"), "{out}{err}");
    }
}

/// Item 2, trees: a parent whose tree blobs are lost no longer makes every
/// backup fail; the backup reads the files below it again, with a warning.
#[test]
fn lost_parent_tree_means_a_full_read_not_a_failed_backup() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    make_tree(&src);
    backup_json(&t, &src, 0);
    let sub = latest_node(&t, &src, "sub");
    let lost = pack_of(&t, &sub.subtree.unwrap());
    // (The pack may hold data blobs too: those files are read again.)
    t.backend().delete(Kind::Pack, &lost.to_hex()).unwrap();
    cli(&t.repo_path(), &t.cache_path(), &["repair", "index"], 0);

    let (out, err) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["--json", "backup", path_str(&src)],
        0,
    );
    assert!(
        err.contains("parent snapshot's tree cannot be read"),
        "no warning about the parent: {err}"
    );
    let s = json_lines(&out).pop().unwrap();
    assert_eq!(s["errors"], 0, "{s}");
    restore_latest_and_compare(&t, &src);
}

/// Flips one byte of the first index segment.
fn damage_a_segment(t: &TestRepo) -> String {
    let mut segs = t.backend().list(Kind::Index).unwrap();
    segs.sort_by(|a, b| a.name.cmp(&b.name));
    let name = segs[0].name.clone();
    let p = t.repo_path().join("index").join(&name);
    let mut bytes = fs::read(&p).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    fs::write(&p, bytes).unwrap();
    name
}

/// Item 4: one bad index segment (or a stray file in index/) no longer
/// locks everyone out: it is named and skipped; `check` fails on it and
/// `repair index` rebuilds around it.
#[test]
fn bad_index_segment_is_named_and_skipped() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    make_tree(&src);
    backup_json(&t, &src, 0);
    let bad = damage_a_segment(&t);
    fs::write(t.repo_path().join("index/README"), "notes").unwrap();
    // A fresh cache must absorb the segments again.
    fs::remove_dir_all(t.cache_path()).unwrap();

    // Commands that never read the index do not list it, even into an
    // empty cache: nothing to warn about.
    for args in [&["snapshots"][..], &["key", "list"]] {
        let (out, err) = cli(&t.repo_path(), &t.cache_path(), args, 0);
        assert!(!err.contains("warning"), "{args:?} read the index: {err}");
        if args[0] == "snapshots" {
            assert!(out.contains("1 snapshots"), "{out}");
        }
    }
    // A command that reads it names each once, whichever step syncs it:
    // a reader's lock, a backup's, a prune's.
    // (`ls` then misses the trees that segment lists.)
    for (args, code) in [
        (&["ls", "latest"][..], 1),
        (&["backup", src.to_str().unwrap()], 0),
        (&["prune", "--dry-run"], 0),
    ] {
        fs::remove_dir_all(t.cache_path()).unwrap();
        let (_, err) = cli(&t.repo_path(), &t.cache_path(), args, code);
        assert_eq!(
            err.matches(bad.as_str()).count(),
            1,
            "{args:?}: the bad segment is not named once: {err}"
        );
        assert_eq!(
            err.matches("index/README").count(),
            1,
            "{args:?}: the stray file is not named once: {err}"
        );
    }

    let (_, err) = cli(&t.repo_path(), &t.cache_path(), &["check"], 1);
    assert!(err.contains(&bad), "check does not name the segment: {err}");

    // The rebuild replaces everything in index/, the damaged segment and
    // the stray file included.
    cli(&t.repo_path(), &t.cache_path(), &["repair", "index"], 0);
    assert!(!t.repo_path().join("index").join(&bad).exists());
    assert!(!t.repo_path().join("index/README").exists());
    let (out, err) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["check", "--read-data"],
        0,
    );
    assert!(out.contains("no errors were found"), "{out}{err}");
    assert!(!err.contains("warning"), "{err}");
    restore_latest_and_compare(&t, &src);
}

/// Item 5: an attacker with write access swaps in their own config and a
/// key for the victim's public age recipient; the victim's next backup is
/// refused, saying what changed, instead of going to the attacker.
#[test]
fn swapped_master_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (victim, cache) = (dir.path().join("victim"), dir.path().join("cache"));
    let attacker = dir.path().join("attacker");
    let identity = dir.path().join("identity.txt");
    let id = age::x25519::Identity::generate();
    use age::secrecy::ExposeSecret;
    fs::write(&identity, id.to_string().expose_secret()).unwrap();
    let recipient = id.to_public().to_string();
    let src = dir.path().join("src");
    make_tree(&src);

    // The victim: a repository opened with an X25519 identity.
    cli(&victim, &cache, &["init", "--recipient", &recipient], 0);
    let by_identity = |repo: &Path, args: &[&str], want: i32| {
        let mut c = common::larder(repo, &cache);
        c.env_remove("LARDER_PASSWORD")
            .env("LARDER_IDENTITY_FILE", &identity)
            .args(args);
        let (code, out, err) = run(c);
        assert_eq!(code, want, "larder {args:?}: {out}{err}");
        (out, err)
    };
    by_identity(&victim, &["backup", path_str(&src)], 0);

    // The attacker: their own repository, a key for the victim's recipient.
    let other_cache = dir.path().join("attacker-cache");
    cli(&attacker, &other_cache, &["init"], 0);
    cli(
        &attacker,
        &other_cache,
        &["key", "add", "--recipient", &recipient],
        0,
    );
    let theirs = common::larder(&attacker, &other_cache)
        .args(["--json", "key", "list"])
        .output()
        .unwrap();
    let keys: serde_json::Value = serde_json::from_slice(&theirs.stdout).unwrap();
    let x25519 = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kind"] == "X25519")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    for e in fs::read_dir(victim.join("keys")).unwrap() {
        fs::remove_file(e.unwrap().path()).unwrap();
    }
    for e in fs::read_dir(victim.join("index")).unwrap() {
        fs::remove_file(e.unwrap().path()).unwrap();
    }
    fs::copy(
        attacker.join("keys").join(&x25519),
        victim.join("keys").join(&x25519),
    )
    .unwrap();
    fs::remove_file(victim.join("config")).unwrap();
    fs::copy(attacker.join("config"), victim.join("config")).unwrap();

    let snaps_before = fs::read_dir(victim.join("snapshots")).unwrap().count();
    let (_, err) = by_identity(&victim, &["backup", path_str(&src)], 1);
    assert!(
        err.contains("is not the one larder knows there")
            && err.contains("its id was")
            && err.contains("master key fingerprint was")
            && err.contains("--accept-repository-change"),
        "{err}"
    );
    assert_eq!(
        fs::read_dir(victim.join("snapshots")).unwrap().count(),
        snaps_before,
        "a snapshot was written for the attacker"
    );
    // A deliberate re-creation is accepted when the user says so.
    by_identity(&victim, &["--accept-repository-change", "snapshots"], 0);
    by_identity(&victim, &["snapshots"], 0);
}

/// Runs `larder ARGS` on a pseudo-terminal, typing `answers` at its
/// prompts; returns (exit code, what it printed).
fn on_terminal(repo: &Path, cache: &Path, args: &[&str], answers: &[&str]) -> (i32, String) {
    let script = r#"
import os, pty, sys, time
answers = sys.argv[1].split("\n")
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
out = b""
for a in answers:
    deadline = time.time() + 20
    while b"password" not in out.split(b"\n")[-1].lower() and time.time() < deadline:
        try:
            out += os.read(fd, 4096)
        except OSError:
            break
    os.write(fd, (a + "\n").encode())
    out += b"\n"
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
sys.exit(os.waitstatus_to_exitcode(status))
"#;
    let mut c = Command::new("python3");
    c.arg("-c")
        .arg(script)
        .arg(answers.join("\n"))
        .arg(common::larder_bin())
        .args(args);
    env_of(&mut c, &common::larder(repo, cache));
    c.env_remove("LARDER_PASSWORD");
    let out = c.stdin(Stdio::null()).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Item 10: a new passphrase typed at a terminal is asked twice; two that
/// differ create nothing.
#[test]
fn new_passphrase_is_asked_twice() {
    if Command::new("python3").arg("-V").output().is_err() {
        eprintln!("skipped: python3 is not available to drive a terminal");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (repo, cache) = (dir.path().join("repo"), dir.path().join("cache"));
    let (code, out) = on_terminal(&repo, &cache, &["init"], &["first secret", "second secret"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("again"), "asked only once: {out}");
    assert!(out.contains("do not match"), "{out}");
    assert!(!repo.join("config").exists(), "a repository was created");

    let (code, out) = on_terminal(&repo, &cache, &["init"], &["same secret", "same secret"]);
    assert_eq!(code, 0, "{out}");
    let mut c = common::larder(&repo, &cache);
    c.env("LARDER_PASSWORD", "same secret").arg("snapshots");
    assert_eq!(run(c).0, 0, "the passphrase typed twice does not open it");
}

/// Item 9: names holding escape sequences are escaped in human output and
/// exact in JSON.
#[test]
fn control_characters_in_names_are_escaped_on_the_terminal() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let evil = "evil\x1b[2J\x1b]0;owned\x07name\n.txt";
    write(&src.join(evil), b"x");
    write(&src.join("plain.txt"), b"y");
    backup_json(&t, &src, 0);
    let (out, _) = cli(&t.repo_path(), &t.cache_path(), &["ls", "latest"], 0);
    assert!(
        !out.contains('\x1b') && !out.contains('\x07'),
        "raw escapes: {out:?}"
    );
    assert!(
        out.contains("evil\\x1b[2J\\x1b]0;owned\\x07name\\n.txt"),
        "{out}"
    );
    assert!(out.contains("plain.txt"), "{out}");
    let (out, _) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["--json", "ls", "latest"],
        0,
    );
    let names: Vec<String> = json_lines(&out)
        .iter()
        .filter_map(|v| v["name"].as_str().map(String::from))
        .collect();
    assert!(names.iter().any(|n| n == evil), "{names:?}");

    fs::remove_file(src.join(evil)).unwrap();
    backup_json(&t, &src, 0);
    let snaps = cli(&t.repo_path(), &t.cache_path(), &["--json", "snapshots"], 0).0;
    let ids: Vec<String> = serde_json::from_str::<serde_json::Value>(&snaps)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    let (out, _) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["diff", &ids[0], &ids[1]],
        0,
    );
    assert!(!out.contains('\x1b'), "raw escapes in diff: {out:?}");
    assert!(out.contains("evil\\x1b[2J"), "{out}");
}

/// Item 11: a backup none of whose paths exists fails and saves nothing;
/// with some missing it saves the rest and names each missing one.
#[test]
fn backup_of_missing_paths() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let (gone1, gone2) = (base.path().join("unmounted"), base.path().join("also-gone"));
    let (_, err) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(&gone1), path_str(&gone2)],
        1,
    );
    assert!(err.contains("none of the paths"), "{err}");
    assert!(
        err.contains(path_str(&gone1)) && err.contains(path_str(&gone2)),
        "{err}"
    );
    assert!(t.backend().list(Kind::Snapshot).unwrap().is_empty());

    let src = base.path().join("src");
    make_tree(&src);
    let (_, err) = cli(
        &t.repo_path(),
        &t.cache_path(),
        &["backup", path_str(&src), path_str(&gone1), path_str(&gone2)],
        3,
    );
    assert!(
        err.contains(path_str(&gone1)) && err.contains(path_str(&gone2)),
        "{err}"
    );
    assert_eq!(t.backend().list(Kind::Snapshot).unwrap().len(), 1);
    restore_latest_and_compare(&t, &src);
}

/// SIGINT or SIGTERM during a backup: it stops, indexes the packs it
/// finished, removes its lock and exits 130; `check` then finds nothing
/// left over (no notices), and the next backup completes.
#[test]
fn interrupted_backup_cleans_up() {
    for (sig, name) in [
        (nix::sys::signal::Signal::SIGINT, "SIGINT"),
        (nix::sys::signal::Signal::SIGTERM, "SIGTERM"),
    ] {
        let t = cli_repo();
        let base = tempfile::tempdir().unwrap();
        let src = base.path().join("src");
        for i in 0..40 {
            write(&src.join(format!("f{i:02}")), &rand_bytes(100 + i, 1 << 20));
        }
        let mut c = common::larder(&t.repo_path(), &t.cache_path());
        c.args(["backup", path_str(&src)])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let child = c.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while pack_files(&t.repo_path()).0 < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, sig).unwrap();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(0) {
            // Finished before the signal landed: nothing to test this time.
            eprintln!("{name}: the backup finished first");
            continue;
        }
        assert_eq!(out.status.code(), Some(130), "{name}: {err}");
        assert!(err.contains("interrupted"), "{name}: {err}");
        assert_eq!(
            t.backend().list(Kind::Lock).unwrap().len(),
            0,
            "{name}: the lock was left"
        );
        assert!(t.backend().list(Kind::Snapshot).unwrap().is_empty());
        let (packs, _) = pack_files(&t.repo_path());
        assert!(packs >= 2, "{name}");
        let (_, err) = cli(&t.repo_path(), &t.cache_path(), &["check"], 0);
        assert!(
            !err.contains("notice"),
            "{name}: packs left unindexed: {err}"
        );
        cli(
            &t.repo_path(),
            &t.cache_path(),
            &["backup", path_str(&src)],
            0,
        );
        restore_latest_and_compare(&t, &src);
    }
}

/// Item 8 in a real run: a backup whose lock is removed under it stops
/// before it writes another pack, segment or snapshot (exit 11), and the
/// repository still passes `check`.
#[test]
fn backup_that_loses_its_lock_stops_writing() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    for i in 0..24 {
        write(&src.join(format!("f{i:02}")), &rand_bytes(300 + i, 1 << 20));
    }
    let mut c = common::larder(&t.repo_path(), &t.cache_path());
    c.env("LARDER_LOCK_REFRESH_SECS", "1")
        .args(["backup", path_str(&src)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let deadline = Instant::now() + Duration::from_secs(60);
    while pack_files(&t.repo_path()).0 < 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    // Freeze it, take its lock away, and let it go on.
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    for e in fs::read_dir(t.repo_path().join("locks")).unwrap() {
        fs::remove_file(e.unwrap().path()).unwrap();
    }
    let packs_then = pack_files(&t.repo_path()).0;
    std::thread::sleep(Duration::from_secs(2));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(11), "{err}");
    assert!(err.contains("lost the repository lock"), "{err}");
    assert!(t.backend().list(Kind::Snapshot).unwrap().is_empty());
    // Packs already in flight when it stopped may have landed; no more.
    assert!(
        pack_files(&t.repo_path()).0 <= packs_then + 6,
        "it went on writing packs"
    );
    cli(&t.repo_path(), &t.cache_path(), &["check"], 0);
}

/// Issue 12: larder's own cache and state directories carry its
/// CACHEDIR.TAG and are never backed up, even without --exclude-caches (a
/// profile that backs up a home directory must not store the index of the
/// repository it writes to); another program's cache still is, unless
/// --exclude-caches.
#[test]
fn larders_own_directories_are_never_backed_up() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let home = base.path().join("home");
    write(&home.join("notes.txt"), b"keep me");
    let other_cache = home.join("browser-cache");
    write(
        &other_cache.join("CACHEDIR.TAG"),
        b"Signature: 8a477f597d28d172789f06886806bc55\n# another program\n",
    );
    write(&other_cache.join("blob"), b"cached");
    let (cache, state) = (home.join(".cache/larder"), home.join(".local/state/larder"));
    let with_dirs = |args: &[&str], want: i32| {
        let mut c = common::larder(&t.repo_path(), &cache);
        c.env("LARDER_STATE_DIR", &state).args(args);
        let (code, out, err) = run(c);
        assert_eq!(code, want, "{args:?}: {out}{err}");
        out
    };
    with_dirs(&["backup", path_str(&home)], 0);
    assert!(cache.join("CACHEDIR.TAG").exists() && state.join("CACHEDIR.TAG").exists());
    // The second backup runs with both directories already full.
    with_dirs(&["backup", path_str(&home)], 0);
    let listed = with_dirs(&["ls", "latest"], 0);
    let rel = |p: &Path| p.strip_prefix(base.path()).unwrap().display().to_string();
    assert!(listed.contains(&rel(&home.join("notes.txt"))), "{listed}");
    assert!(listed.contains(&rel(&other_cache.join("blob"))), "{listed}");
    assert!(
        !listed.contains("index.sqlite"),
        "the cache was stored: {listed}"
    );
    assert!(
        !listed.contains("known_repositories"),
        "the state was stored: {listed}"
    );
    with_dirs(&["backup", "--exclude-caches", path_str(&home)], 0);
    let listed = with_dirs(&["ls", "latest"], 0);
    assert!(
        !listed.contains(&rel(&other_cache.join("blob"))),
        "{listed}"
    );
    assert!(listed.contains(&rel(&home.join("notes.txt"))), "{listed}");
}

/// A read-only view of a directory: a read-only bind mount as root, or the
/// directory's write bits removed otherwise; undone on drop.
struct ReadOnlyView {
    path: std::path::PathBuf,
    mounted: bool,
}

impl ReadOnlyView {
    fn of(src: &Path, at: &Path) -> Result<ReadOnlyView, String> {
        let root = nix::unistd::Uid::effective().is_root();
        if !root {
            copy_dir(src, at);
            set_writable(at, false);
            return Ok(ReadOnlyView {
                path: at.to_path_buf(),
                mounted: false,
            });
        }
        fs::create_dir_all(at).unwrap();
        let ok = |args: &[&str]| {
            Command::new("mount")
                .args(args)
                .stderr(Stdio::piped())
                .output()
                .map_err(|e| format!("cannot run mount: {e}"))
                .and_then(|o| {
                    o.status.success().then_some(()).ok_or_else(|| {
                        format!("mount {args:?}: {}", String::from_utf8_lossy(&o.stderr))
                    })
                })
        };
        ok(&["--bind", path_str(src), path_str(at)])?;
        let view = ReadOnlyView {
            path: at.to_path_buf(),
            mounted: true,
        };
        ok(&["-o", "remount,bind,ro", path_str(at)])?;
        Ok(view)
    }
}

impl Drop for ReadOnlyView {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        } else {
            set_writable(&self.path, true);
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let dest = to.join(e.path().strip_prefix(from).unwrap());
        if e.file_type().is_dir() {
            fs::create_dir_all(&dest).unwrap();
        } else {
            fs::copy(e.path(), &dest).unwrap();
        }
    }
}

fn set_writable(root: &Path, on: bool) {
    use std::os::unix::fs::PermissionsExt;
    for e in walkdir::WalkDir::new(root).contents_first(!on) {
        let e = e.unwrap();
        if e.file_type().is_dir() {
            let mode = if on { 0o755 } else { 0o555 };
            fs::set_permissions(e.path(), fs::Permissions::from_mode(mode)).unwrap();
        }
    }
}

/// Readers on storage that refuses writes (a read-only mount): `restore`,
/// `check`, `stats` and `ls` fail at their lock with an error that names the
/// cause and `--no-lock`; with `--no-lock` they work and write nothing;
/// `backup` stays refused.
#[test]
fn read_only_repository_reads_with_no_lock() {
    let t = cli_repo();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    make_tree(&src);
    backup_json(&t, &src, 0);
    let view = match ReadOnlyView::of(&t.repo_path(), &base.path().join("ro")) {
        Ok(v) => v,
        Err(why) => {
            eprintln!("skipped: no read-only view of the repository: {why}");
            return;
        }
    };
    let before = walkdir::WalkDir::new(&view.path).into_iter().count();
    let cache = base.path().join("ro-cache");
    let dest = base.path().join("out");
    let spec = format!("latest:{}", path_str(&src));

    let restore = ["restore", spec.as_str(), "--target", path_str(&dest)];
    let (_, err) = cli(&view.path, &cache, &restore, 1);
    assert!(err.contains("--no-lock"), "no hint: {err}");
    assert!(err.contains("locks"), "the lock object is not named: {err}");

    let mut with = vec!["--no-lock"];
    with.extend_from_slice(&restore);
    cli(&view.path, &cache, &with, 0);
    assert_same_tree(&src, &dest);
    let (out, err) = cli(
        &view.path,
        &cache,
        &["--no-lock", "check", "--read-data"],
        0,
    );
    assert!(out.contains("no errors were found"), "{out}{err}");
    let (out, _) = cli(&view.path, &cache, &["--no-lock", "--json", "stats"], 0);
    assert!(out.contains("total_size"), "{out}");
    let (_, err) = cli(&view.path, &cache, &["ls", "latest"], 1);
    assert!(err.contains("--no-lock"), "ls: no hint: {err}");
    let (out, _) = cli(&view.path, &cache, &["--no-lock", "ls", "latest"], 0);
    assert!(out.lines().any(|l| l == path_str(&src)), "{out}");
    cli(&view.path, &cache, &["check"], 1);
    // A dry-run backup reads its parent's trees, so it locks as a reader.
    let dry = ["--json", "backup", "--dry-run", path_str(&src)];
    let (_, err) = cli(&view.path, &cache, &dry, 1);
    assert!(
        err.contains("--no-lock"),
        "backup --dry-run: no hint: {err}"
    );
    let mut with = vec!["--no-lock"];
    with.extend_from_slice(&dry);
    let (out, err) = cli(&view.path, &cache, &with, 0);
    assert!(
        out.contains("\"files_new\":0") && out.contains("\"snapshot_id\":null"),
        "backup --dry-run --no-lock: {out}{err}"
    );

    // A writer does not get to skip its lock.
    let (_, err) = cli(
        &view.path,
        &cache,
        &["--no-lock", "backup", path_str(&src)],
        1,
    );
    assert!(
        err.contains("repository object") || err.contains(path_str(&view.path)),
        "{err}"
    );
    assert_eq!(
        walkdir::WalkDir::new(&view.path).into_iter().count(),
        before,
        "nothing was written"
    );
}

/// `larder ls latest | head`: the reader of stdout goes away mid-listing.
/// larder stops quietly with 141 (as a program SIGPIPE ended), prints no
/// panic, and leaves no lock behind (the next command needs no unlock).
#[test]
fn a_closed_stdout_stops_the_listing_quietly() {
    let t = cli_repo();
    let src = t.dir.path().join("src");
    for i in 0..3000 {
        write(
            &src.join(format!("d{}/file-with-a-long-name-{i:05}", i % 10)),
            b"x",
        );
    }
    let (repo, cache) = (t.repo_path(), t.cache_path());
    cli(&repo, &cache, &["-q", "backup", path_str(&src)], 0);
    let mut child = common::larder(&repo, &cache)
        .args(["ls", "latest"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, then close the pipe with the listing (far more than a
    // pipe buffer) unfinished.
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    let n = std::io::Read::read(&mut out, &mut first).unwrap();
    assert!(n > 0);
    drop(out);
    let done = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(141), "stderr: {err}");
    assert!(!err.contains("panicked"), "stderr: {err}");
    assert!(err.is_empty(), "nothing on stderr: {err}");
    let (listed, _) = cli(&repo, &cache, &["ls", "latest"], 0);
    assert_eq!(
        listed.lines().filter(|l| l.contains("file-with")).count(),
        3000
    );
    assert!(
        t.backend().list(Kind::Lock).unwrap().is_empty(),
        "no lock left behind"
    );
}
