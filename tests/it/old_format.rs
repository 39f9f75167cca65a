//! Repositories written by older larders: format versions 3 and 4, as the
//! larders of those versions wrote them (their test-vector repositories,
//! kept in `repo-format/vectors/old/`). This larder reads them (snapshots,
//! ls, restore, check with the data, both kinds of key), refuses to write
//! to them, writes its readers' locks in their version's bytes, and
//! `migrate upgrade_repo_v6` makes them writable by rewriting the config
//! alone, beside another larder's lock and after a `kill -9`
//! (`faults::crash_points`).

use crate::faults::{Out, assert_check_clean, larder_cmd, spawn, wait_bounded};
use crate::support::{path_str, write};
use larder::backend::LocalBackend;
use larder::keys::Credential;
use larder::repository::Repository;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The old format versions kept as fixtures.
pub const VERSIONS: [u8; 2] = [3, 4];

/// What a fixture's `vectors.json` says about its repository.
pub struct Fixture {
    pub passphrase: String,
    pub identity: String,
    pub snapshot: String,
    /// Data blobs by the file they hold (`hello.txt`, `random.bin`).
    pub files: BTreeMap<String, Vec<u8>>,
}

/// The fixture of format `version`, its repository copied to `dir/repo`
/// (a fresh cache at `dir/cache`). Its lock object (made-up holder on
/// another machine, live by the storage's clock for 30 minutes) is left
/// out when `without_lock`.
pub fn fixture(version: u8, dir: &Path, without_lock: bool) -> Fixture {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("repo-format/vectors/old")
        .join(format!("v{version}"));
    let st = std::process::Command::new("cp")
        .args([
            "-r",
            path_str(&src.join("repo")),
            path_str(&dir.join("repo")),
        ])
        .status()
        .unwrap();
    assert!(st.success());
    if without_lock {
        for e in fs::read_dir(dir.join("repo/locks")).unwrap() {
            fs::remove_file(e.unwrap().path()).unwrap();
        }
    }
    let v: serde_json::Value =
        serde_json::from_slice(&fs::read(src.join("vectors.json")).unwrap()).unwrap();
    assert_eq!(v["format_version"], version as u64);
    let mut files = BTreeMap::new();
    for b in v["blobs"].as_array().unwrap() {
        if b["type"] == 0 {
            let what = b["what"].as_str().unwrap().to_string();
            files.insert(
                what,
                hex::decode(b["plaintext_hex"].as_str().unwrap()).unwrap(),
            );
        }
    }
    assert_eq!(files.len(), 2, "hello.txt and random.bin");
    Fixture {
        passphrase: v["passphrase"].as_str().unwrap().to_string(),
        identity: v["x25519_identity"].as_str().unwrap().to_string(),
        snapshot: v["snapshots"][0]["id"].as_str().unwrap().to_string(),
        files,
    }
}

/// `larder ARGS` on `dir`'s repository with the fixture's passphrase.
pub fn old_larder(dir: &Path, f: &Fixture, args: &[&str]) -> Out {
    let mut c = larder_cmd(&dir.join("repo"), &dir.join("cache"), args);
    c.env("LARDER_PASSWORD", &f.passphrase);
    wait_bounded(spawn(c), &format!("larder {args:?}"))
}

/// [`old_larder`] that must succeed.
pub fn old_ok(dir: &Path, f: &Fixture, args: &[&str]) -> Out {
    let o = old_larder(dir, f, args);
    assert_eq!(o.code, 0, "larder {args:?}: {}", o.all());
    o
}

/// `dir`'s repository opened by the library with the fixture's
/// passphrase (a cache of its own).
fn lib_open(dir: &Path, f: &Fixture) -> Repository {
    Repository::open(
        Arc::new(LocalBackend::new(dir.join("repo"))),
        &Credential::passphrase(&f.passphrase),
        &dir.join("lib-cache"),
    )
    .unwrap()
}

/// `check --read-data` with the fixture's passphrase, which must pass.
pub fn old_check(dir: &Path, f: &Fixture, when: &str) -> Out {
    let o = old_larder(dir, f, &["check", "--read-data"]);
    assert_check_clean(&o, when);
    o
}

/// The format version byte of the repository's config.
pub fn config_version(dir: &Path) -> u8 {
    fs::read(dir.join("repo/config")).unwrap()[5]
}

/// Every file of the repository, by path, with its bytes, and every
/// directory (with no bytes).
fn files_of(repo: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    walkdir::WalkDir::new(repo)
        .into_iter()
        .map(|e| e.unwrap())
        .map(|e| {
            let bytes = e.file_type().is_file().then(|| fs::read(e.path()).unwrap());
            (e.path().to_path_buf(), bytes)
        })
        .collect()
}

/// Restores the fixture's snapshot into `target` and asserts that it holds
/// exactly the fixture's files.
pub fn restores_the_fixture(dir: &Path, f: &Fixture, target: &Path) {
    old_ok(
        dir,
        f,
        &["restore", &f.snapshot, "--target", path_str(target)],
    );
    for (name, want) in &f.files {
        let got = fs::read(target.join(name)).unwrap();
        assert!(got == *want, "{name}: restored bytes differ");
    }
    let link = target.join("docs/link");
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn old_versions_are_read_restored_and_checked() {
    for version in VERSIONS {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let f = fixture(version, dir, false);

        let o = old_ok(dir, &f, &["snapshots", "--json"]);
        let snaps: serde_json::Value = serde_json::from_str(&o.out).unwrap();
        let ids: Vec<&str> = snaps
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [f.snapshot.as_str()], "v{version}");
        assert!(
            o.err.contains(&format!("format version {version}"))
                && o.err.contains("migrate upgrade_repo_v6"),
            "v{version}: the read-only warning: {}",
            o.err
        );

        let ls = old_ok(dir, &f, &["ls", "latest"]);
        for p in ["/hello.txt", "/random.bin", "/docs/link"] {
            assert!(ls.out.lines().any(|l| l == p), "v{version}: ls: {}", ls.out);
        }
        restores_the_fixture(dir, &f, &dir.join("restored"));

        let check = old_check(dir, &f, &format!("v{version}"));
        assert!(check.out.contains("read 1 packs"), "{}", check.all());

        // `copy` takes its snapshot into a repository of this version.
        let (new, new_cache) = (dir.join("new"), dir.join("new-cache"));
        drop(crate::common::init_at(&new, &new_cache));
        let mut c = larder_cmd(
            &new,
            &new_cache,
            &["copy", "--from-repo", path_str(&dir.join("repo"))],
        );
        c.env("LARDER_FROM_PASSWORD", &f.passphrase);
        let o = wait_bounded(spawn(c), "copy from the old repository");
        assert_eq!(o.code, 0, "{}", o.all());
        let copied = dir.join("copied");
        let o = crate::faults::larder_ok(
            &new,
            &new_cache,
            &["restore", "latest", "--target", path_str(&copied)],
        );
        for (name, want) in &f.files {
            assert!(
                fs::read(copied.join(name)).unwrap() == *want,
                "{name}: {}",
                o.all()
            );
        }

        // The age key file of that version opens it too.
        let id_file = dir.join("identity");
        write(&id_file, f.identity.as_bytes());
        let mut c = larder_cmd(
            &dir.join("repo"),
            &dir.join("cache"),
            &["--identity", path_str(&id_file), "snapshots", "--json"],
        );
        c.env_remove("LARDER_PASSWORD");
        let o = wait_bounded(spawn(c), "snapshots by identity");
        assert_eq!(o.code, 0, "{}", o.all());
        assert!(o.out.contains(&f.snapshot), "{}", o.out);

        // A version this larder does not read is named as such.
        let mut cfg = fs::read(dir.join("repo/config")).unwrap();
        cfg[5] = 2;
        fs::write(dir.join("repo/config"), &cfg).unwrap();
        let o = old_larder(dir, &f, &["snapshots"]);
        assert_eq!(o.code, 1, "{}", o.all());
        assert!(
            o.err.contains("format version 2 is not supported") && o.err.contains("older larder"),
            "{}",
            o.err
        );
    }
}

/// Every command that writes is refused on the fixture of `version` in
/// `dir`, and writes nothing, not even a lock; a dry run that only reads
/// works.
fn writers_are_refused(dir: &Path, f: &Fixture, version: u8, src: &Path) {
    let repo = dir.join("repo");
    let before = files_of(&repo);
    let name_in = |kind: &str| -> String {
        walkdir::WalkDir::new(repo.join(kind))
            .into_iter()
            .map(|e| e.unwrap())
            .find(|e| e.file_type().is_file())
            .unwrap()
            .file_name()
            .to_string_lossy()
            .into_owned()
    };
    let pack = name_in("packs");
    // The key not used to open: the passphrase opens the first it tries.
    let keys: Vec<String> = fs::read_dir(repo.join("keys"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let pw = dir.join("new-pass");
    write(&pw, b"another passphrase\n");
    let (other, other_cache) = (dir.join("other"), dir.join("other-cache"));
    if !other.exists() {
        drop(crate::common::init_at(&other, &other_cache));
        crate::faults::larder_ok(&other, &other_cache, &["backup", path_str(src)]);
    }
    let writers: Vec<Vec<&str>> = vec![
        vec!["backup", path_str(src)],
        vec!["forget", "--keep-last", "1"],
        vec!["tag", "--add", "x", "latest"],
        vec!["rewrite", "--exclude", "*.bin", "latest"],
        vec!["repair", "snapshots"],
        vec!["repair", "index"],
        vec!["repair", "packs", &pack],
        vec!["prune"],
        vec!["prune", "--dry-run"],
        vec!["recover"],
        vec!["key", "add", "--new-password-file", path_str(&pw)],
        vec!["key", "passwd", "--new-password-file", path_str(&pw)],
        vec!["key", "remove", &keys[0]],
        vec!["key", "remove", &keys[1]],
        vec!["copy", "--from-repo", path_str(&other)],
    ];
    for args in &writers {
        let mut c = larder_cmd(&repo, &dir.join("cache"), args);
        c.env("LARDER_PASSWORD", &f.passphrase)
            .env("LARDER_FROM_PASSWORD", crate::common::PASS);
        let o = wait_bounded(spawn(c), &format!("larder {args:?}"));
        assert_eq!(o.code, 1, "v{version} {args:?}: {}", o.all());
        assert!(
            o.err.contains(&format!("has format version {version}"))
                && o.err.contains("larder migrate upgrade_repo_v6"),
            "v{version} {args:?}: {}",
            o.err
        );
        assert!(
            files_of(&repo) == before,
            "v{version} {args:?} changed the repository"
        );
    }
    // Dry runs that read only, with a reader's lock.
    for args in [
        ["rewrite", "--dry-run", "--exclude", "*.bin", "latest"].as_slice(),
        &["repair", "snapshots", "--dry-run"],
        &["forget", "--keep-last", "1", "--dry-run"],
    ] {
        old_ok(dir, f, args);
    }
    assert!(
        files_of(&repo) == before,
        "v{version}: a dry run changed the repository"
    );
}

#[test]
fn every_writer_is_refused_on_an_old_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let f = fixture(3, tmp.path(), false);
    let src = tmp.path().join("src");
    write(&src.join("a.txt"), b"text\n");
    writers_are_refused(tmp.path(), &f, 3, &src);
}

#[test]
fn an_old_repository_is_read_only_until_migrated() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let f = fixture(4, dir, false);
    let repo = dir.join("repo");
    let src = dir.join("src");
    write(&src.join("a.txt"), b"written after the migration\n");
    write(
        &src.join("sub/b.bin"),
        &crate::support::rand_bytes(7, 300_000),
    );

    writers_are_refused(dir, &f, 4, &src);
    let before = files_of(&repo);

    // The lock the version-4 larder left (a holder on another machine,
    // live by the storage's clock) stops the migration.
    let o = old_larder(dir, &f, &["migrate", "upgrade_repo_v6"]);
    assert_eq!(o.code, 11, "beside the old larder's lock: {}", o.all());
    assert_eq!(config_version(dir), 4);

    // A reader's lock is written in version 4's bytes, so that a larder of
    // version 4 sees it; while it is held, the migration waits for nobody
    // and is refused.
    fs::remove_file(
        repo.join("locks").join(
            fs::read_dir(repo.join("locks"))
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .file_name(),
        ),
    )
    .unwrap();
    let lib = lib_open(dir, &f);
    assert_eq!(lib.format_version(), 4);
    let held = lib.lock_for_reading().unwrap();
    let locks: Vec<Vec<u8>> = fs::read_dir(repo.join("locks"))
        .unwrap()
        .map(|e| fs::read(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(locks.len(), 1);
    assert_eq!(&locks[0][..6], b"LRDRL\x04", "the reader's lock header");
    let o = old_larder(dir, &f, &["migrate", "upgrade_repo_v6"]);
    assert_eq!(o.code, 11, "beside a reader's lock: {}", o.all());
    assert_eq!(config_version(dir), 4);
    drop(held);
    drop(lib);

    let list = old_ok(dir, &f, &["migrate"]);
    assert!(
        list.out.contains("upgrade_repo_v6") && list.out.contains("applies"),
        "{}",
        list.out
    );
    let o = old_larder(dir, &f, &["migrate", "upgrade_repo_v7"]);
    assert_eq!(o.code, 1, "{}", o.all());
    assert!(o.err.contains("unknown migration"), "{}", o.err);
    assert_eq!(config_version(dir), 4);

    let config_before = fs::read(repo.join("config")).unwrap();
    let o = old_ok(dir, &f, &["migrate", "upgrade_repo_v6"]);
    assert!(
        o.out.contains("upgraded from format version 4 to 6"),
        "{}",
        o.out
    );
    assert!(!o.err.contains("read-only"), "{}", o.err);
    let config_after = fs::read(repo.join("config")).unwrap();
    assert_eq!(config_after[5], 6);
    // The old config is kept where the output says.
    let kept = o
        .out
        .lines()
        .find_map(|l| l.strip_prefix("its old config is kept in "))
        .and_then(|l| l.split(" (").next())
        .unwrap();
    assert!(fs::read(kept).unwrap() == config_before, "the kept config");
    assert_eq!(config_after[..5], config_before[..5]);
    assert!(config_after[6..] != config_before[6..], "sealed again");
    // Nothing but the config was rewritten; the migration's lock is gone.
    let after = files_of(&repo);
    let mut want = before.clone();
    want.retain(|p, _| !p.starts_with(repo.join("locks")) || *p == repo.join("locks"));
    want.insert(repo.join("config"), Some(config_after.clone()));
    assert!(after == want, "files other than the config changed");

    // Again: nothing to do, nothing written.
    let o = old_ok(dir, &f, &["migrate", "upgrade_repo_v6"]);
    assert!(o.out.contains("nothing to do"), "{}", o.out);
    assert!(fs::read(repo.join("config")).unwrap() == config_after);
    let list = old_ok(dir, &f, &["migrate"]);
    assert!(list.out.contains("nothing to do"), "{}", list.out);
    let o = old_ok(dir, &f, &["snapshots"]);
    assert!(!o.err.contains("read-only"), "{}", o.err);

    // Now it takes backups, and the old snapshot still restores exactly.
    let o = old_ok(dir, &f, &["backup", "--json", path_str(&src)]);
    let id = o
        .out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["message_type"] == "summary")
        .and_then(|v| v["snapshot_id"].as_str().map(str::to_string))
        .unwrap();
    old_check(dir, &f, "after the migration");
    restores_the_fixture(dir, &f, &dir.join("old"));
    let new = dir.join("new");
    old_ok(dir, &f, &["restore", &id, "--target", path_str(&new)]);
    let got = crate::faults::manifest(&new.join(src.strip_prefix("/").unwrap()));
    crate::faults::assert_same_manifest(&crate::faults::manifest(&src), &got, "new snapshot");
}

/// `n` files of text (no NUL byte, so the dictionary is trained from them),
/// about 80 KB each, under `dir`.
pub fn text_tree(dir: &Path, n: usize) {
    let words = [
        "larder", "keeps", "every", "file", "exactly", "years", "later", "restore",
    ];
    for i in 0..n {
        let bytes = crate::support::rand_bytes(i as u64, 10_000);
        let mut s = String::new();
        for (j, b) in bytes.iter().enumerate() {
            s.push_str(words[(*b % 8) as usize]);
            s.push(if j % 12 == 11 { '\n' } else { ' ' });
        }
        write(&dir.join(format!("t{i}.txt")), s.as_bytes());
    }
}

#[test]
fn a_migrated_repository_takes_every_writer() {
    for version in VERSIONS {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let f = fixture(version, dir, true);
        let repo = dir.join("repo");
        old_ok(dir, &f, &["migrate", "upgrade_repo_v6"]);
        assert_eq!(config_version(dir), 6);

        // A backup that trains the repository's dictionary (a directory
        // version 3 and 4 never had), then a prune that writes deletion
        // marks (which version 3 never had) and deletes the old pack.
        let src = dir.join("src");
        text_tree(&src, 150);
        // hello.txt's blob stays in the old pack: it is then partly used,
        // and the prune below repacks it.
        write(&src.join("hello.txt"), &f.files["hello.txt"]);
        old_ok(dir, &f, &["backup", path_str(&src)]);
        assert_eq!(crate::faults::objects(&repo, "dicts"), 1, "v{version}");
        let old_pack: Vec<_> = walkdir::WalkDir::new(repo.join("packs"))
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_file())
            .map(|e| fs::read(e.path()).unwrap())
            .filter(|b| b[b.len() - 2] == version)
            .collect();
        assert_eq!(old_pack.len(), 1, "v{version}: the old version's pack");
        old_ok(
            dir,
            &f,
            &[
                "forget",
                &f.snapshot,
                "--prune",
                "--keep-delete",
                "0s",
                "--max-unused",
                "0",
            ],
        );
        let packs_left = walkdir::WalkDir::new(repo.join("packs"))
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_file())
            .filter(|e| fs::read(e.path()).unwrap() == old_pack[0])
            .count();
        assert_eq!(packs_left, 0, "v{version}: the old pack was repacked");
        old_check(dir, &f, &format!("v{version} after prune"));
        old_ok(dir, &f, &["repair", "index"]);
        old_check(dir, &f, &format!("v{version} after repair index"));
        let out = dir.join("out");
        old_ok(dir, &f, &["restore", "latest", "--target", path_str(&out)]);
        let got = crate::faults::manifest(&out.join(src.strip_prefix("/").unwrap()));
        crate::faults::assert_same_manifest(&crate::faults::manifest(&src), &got, "after prune");

        // A migrated repository's locks are version 5's, which every
        // larder that reads version-6 configs reads.
        let lib = lib_open(dir, &f);
        assert_eq!(lib.format_version(), 6);
        let held = lib.lock_for_reading().unwrap();
        let headers: Vec<Vec<u8>> = fs::read_dir(repo.join("locks"))
            .unwrap()
            .map(|e| fs::read(e.unwrap().path()).unwrap()[..6].to_vec())
            .collect();
        assert_eq!(headers, [b"LRDRL\x05".to_vec()], "v{version}");
        drop(held);
        drop(lib);

        // The config kept by the migration (in the state directory), put
        // back now that a dictionary was written, is read with a warning
        // that says so; migrating again mends it.
        let kept: Vec<PathBuf> = fs::read_dir(dir.join("larder-state/migrations"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(kept.len(), 1, "v{version}: {kept:?}");
        fs::copy(&kept[0], repo.join("config")).unwrap();
        assert_eq!(config_version(dir), version);
        let o = old_ok(dir, &f, &["snapshots"]);
        assert!(o.err.contains("put back over a migrated one"), "{}", o.err);
        old_ok(dir, &f, &["migrate", "upgrade_repo_v6"]);
        assert_eq!(config_version(dir), 6);
        let o = old_ok(dir, &f, &["snapshots"]);
        assert!(!o.err.contains("put back"), "{}", o.err);

        // The old version's key file is replaced by a new one.
        let pw = dir.join("pw");
        write(&pw, b"a new passphrase\n");
        old_ok(
            dir,
            &f,
            &["key", "passwd", "--new-password-file", path_str(&pw)],
        );
        let mut c = larder_cmd(&repo, &dir.join("cache"), &["snapshots", "--json"]);
        c.env("LARDER_PASSWORD", "a new passphrase");
        let o = wait_bounded(spawn(c), "snapshots with the new passphrase");
        assert_eq!(o.code, 0, "{}", o.all());
    }
}

#[test]
fn a_readers_lock_keeps_the_old_version_when_refreshed() {
    use larder::lock::{LockConfig, LockGuard, LockMode};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let f = fixture(3, dir, true);
    let repo = dir.join("repo");
    let lib = lib_open(dir, &f);
    let cfg = LockConfig {
        refresh: std::time::Duration::from_secs(1),
        ..lib.lock_config().unwrap()
    };
    assert_eq!(cfg.format, 3);
    let names = || -> Vec<String> {
        fs::read_dir(repo.join("locks"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    let guard =
        LockGuard::acquire(lib.backend_arc(), lib.master(), LockMode::Shared, &cfg).unwrap();
    let first = names();
    assert_eq!(first.len(), 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while names() == first {
        assert!(
            std::time::Instant::now() < deadline,
            "the lock was never refreshed"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    guard.check().unwrap();
    // A later refresh may remove a listed lock before it is read.
    let headers: Vec<Vec<u8>> = names()
        .iter()
        .filter_map(|n| fs::read(repo.join("locks").join(n)).ok())
        .map(|b| b[..6].to_vec())
        .collect();
    assert!(!headers.is_empty());
    for h in headers {
        assert_eq!(h, b"LRDRL\x03", "the refreshed lock's header");
    }
    drop(guard);
}
