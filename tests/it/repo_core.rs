//! Repository core: init/open, keys, packs and the index, check, repair.

use crate::common::{PASS, TEST_WF, TestRepo, larder};
use larder::Error;
use larder::backend::{Backend, Kind};
use larder::check::{CheckOptions, check};
use larder::keys::{Credential, NewKey};
use larder::pack::BlobType;
use larder::repository::Repository;
use std::path::Path;

fn run(cmd: &mut std::process::Command) -> (i32, String, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes `n` distinct data blobs and returns their ids and contents.
fn write_blobs(repo: &Repository, n: usize, size: usize) -> Vec<(larder::Id, Vec<u8>)> {
    let mut p = larder::packer::Packer::new(repo).unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let mut data = vec![0u8; size];
        blake3::Hasher::new()
            .update(&(i as u64).to_le_bytes())
            .finalize_xof()
            .fill(&mut data);
        let (id, new) = p.add(BlobType::Data, &data).unwrap();
        assert!(new);
        // Adding the same bytes again is deduplicated.
        assert!(!p.add(BlobType::Data, &data).unwrap().1);
        out.push((id, data));
    }
    p.finish().unwrap();
    out
}

#[test]
fn init_open_and_wrong_password_via_cli() {
    let t = TestRepo::new();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let (code, out, _) = run(larder(&repo, &cache).args(["init", "--json"]));
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let id = v["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 64);
    // A second init on the same path is refused and changes nothing.
    let config_before = std::fs::read(repo.join("config")).unwrap();
    let (code, _, err) = run(larder(&repo, &cache).arg("init"));
    assert_eq!(code, 1);
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read(repo.join("config")).unwrap(), config_before);
    // Right password opens; wrong password exits 12.
    let (code, out, _) = run(larder(&repo, &cache).args(["cat", "config"]));
    assert_eq!(code, 0);
    assert!(out.contains(&id[..16]) || out.contains("chunker"), "{out}");
    let (code, _, err) = run(larder(&repo, &cache)
        .env("LARDER_PASSWORD", "nope")
        .args(["snapshots"]));
    assert_eq!(code, 12, "{err}");
    assert!(err.contains("wrong password"), "{err}");
    // A missing repository exits 10.
    let (code, _, err) = run(larder(&t.dir.path().join("none"), &cache).args(["snapshots"]));
    assert_eq!(code, 10, "{err}");
}

#[test]
fn password_file_and_command() {
    let t = TestRepo::new();
    t.init();
    let pf = t.dir.path().join("pw");
    std::fs::write(&pf, format!("{PASS}\nignored second line\n")).unwrap();
    let (code, out, err) = run(larder(&t.repo_path(), &t.cache_path())
        .env_remove("LARDER_PASSWORD")
        .env("LARDER_PASSWORD_FILE", &pf)
        .args(["snapshots", "--json"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "[]");
    let (code, _, err) = run(larder(&t.repo_path(), &t.cache_path())
        .env_remove("LARDER_PASSWORD")
        .args(["--password-command", &format!("echo '{PASS}'"), "snapshots"]));
    assert_eq!(code, 0, "{err}");
    let (code, _, _) = run(larder(&t.repo_path(), &t.cache_path())
        .env_remove("LARDER_PASSWORD")
        .args(["--password-command", "echo wrong", "snapshots"]));
    assert_eq!(code, 12);
}

#[test]
fn several_keys_removal_and_passwd() {
    let t = TestRepo::new();
    let repo = t.init();
    let second = repo
        .add_key(&NewKey::Passphrase {
            pass: "second one".to_string().into(),
            work_factor: TEST_WF,
        })
        .unwrap();
    drop(repo);
    let open_with =
        |p: &str| Repository::open(t.backend(), &Credential::passphrase(p), &t.cache_path());
    let a = open_with(PASS).unwrap();
    let b = open_with("second one").unwrap();
    assert_eq!(a.config().id, b.config().id);
    assert_eq!(b.key_id(), second);
    assert!(matches!(open_with("third"), Err(Error::WrongPassword)));
    // The key in use cannot be removed; another one can.
    assert!(b.remove_key(&second.to_hex()[..8]).is_err());
    b.remove_key(&a.key_id().to_hex()).unwrap();
    assert!(matches!(open_with(PASS), Err(Error::WrongPassword)));
    // The last key cannot be removed.
    assert!(b.remove_key(&second.to_hex()).is_err());
    // passwd replaces the key in use.
    let new = b
        .change_key(&NewKey::Passphrase {
            pass: "fresh".to_string().into(),
            work_factor: TEST_WF,
        })
        .unwrap();
    assert!(matches!(open_with("second one"), Err(Error::WrongPassword)));
    assert_eq!(open_with("fresh").unwrap().key_id(), new);
    assert_eq!(t.backend().list(Kind::Key).unwrap().len(), 1);
}

#[test]
fn cli_key_add_list_remove() {
    let t = TestRepo::new();
    t.init();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let np = t.dir.path().join("new");
    std::fs::write(&np, "another pass\n").unwrap();
    let (code, out, err) = run(larder(&repo, &cache)
        .args(["key", "add", "--json", "--new-password-file"])
        .arg(&np));
    assert_eq!(code, 0, "{err}");
    let added: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let added = added["id"].as_str().unwrap().to_string();
    let (_, out, _) = run(larder(&repo, &cache).args(["key", "list", "--json"]));
    let list: Vec<serde_json::Value> = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list.iter().filter(|k| k["current"] == true).count(), 1);
    assert!(
        list.iter()
            .any(|k| k["id"] == added.as_str() && k["current"] == false)
    );
    let (code, _, _) = run(larder(&repo, &cache)
        .env("LARDER_PASSWORD", "another pass")
        .args(["snapshots"]));
    assert_eq!(code, 0);
    let (code, _, err) = run(larder(&repo, &cache).args(["key", "remove", &added[..10]]));
    assert_eq!(code, 0, "{err}");
    let (code, _, _) = run(larder(&repo, &cache)
        .env("LARDER_PASSWORD", "another pass")
        .args(["snapshots"]));
    assert_eq!(code, 12);
}

/// `key add --host --user` and `key passwd --host --user` (restic's
/// flags): `key list` shows the names given for the new key, the others
/// keep this machine's; a name with a control character, or longer than
/// 255 bytes, is refused and adds no key.
#[test]
fn cli_key_host_and_user_label_the_new_key() {
    let t = TestRepo::new();
    t.init();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let np = t.dir.path().join("new");
    std::fs::write(&np, "another pass\n").unwrap();
    let list_with = |pass: &str| -> Vec<serde_json::Value> {
        let (_, out, err) = run(larder(&repo, &cache)
            .env("LARDER_PASSWORD", pass)
            .args(["key", "list", "--json"]));
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {err}"))
    };
    let list = || list_with(crate::common::PASS);
    let first = list();
    let (code, out, err) = run(larder(&repo, &cache)
        .args([
            "key",
            "add",
            "--json",
            "--host",
            "nas",
            "--user",
            "backup",
            "--new-password-file",
        ])
        .arg(&np));
    assert_eq!(code, 0, "{err}");
    let added: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let keys = list();
    let new = keys.iter().find(|k| k["id"] == added["id"]).unwrap();
    assert_eq!(
        (new["hostname"].as_str(), new["username"].as_str()),
        (Some("nas"), Some("backup"))
    );
    let old = keys.iter().find(|k| k["id"] == first[0]["id"]).unwrap();
    assert_eq!(old["hostname"], first[0]["hostname"]);
    assert_ne!(old["hostname"], "nas");

    let long = "h".repeat(256);
    for (flag, bad) in [("--host", long.as_str()), ("--user", "a\nb")] {
        let (code, _, err) = run(larder(&repo, &cache)
            .args(["key", "add", flag, bad, "--new-password-file"])
            .arg(&np));
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains(flag) && err.contains("at most 255 bytes"),
            "{err}"
        );
    }
    assert_eq!(list().len(), 2);

    // passwd: the key in use is replaced by one labelled as asked.
    let (code, _, err) = run(larder(&repo, &cache)
        .args(["key", "passwd", "--host", "laptop", "--new-password-file"])
        .arg(&np));
    assert_eq!(code, 0, "{err}");
    // The first key is gone: the second passphrase opens.
    let keys = list_with("another pass");
    assert_eq!(keys.len(), 2);
    assert!(keys.iter().all(|k| k["id"] != first[0]["id"]), "{keys:?}");
    let replaced = keys.iter().find(|k| k["id"] != added["id"]).unwrap();
    assert_eq!(replaced["hostname"], "laptop");
    assert_eq!(replaced["username"], first[0]["username"]);
}

#[test]
fn age_recipient_key_opens_with_identity_only() {
    let t = TestRepo::new();
    let repo = t.init();
    let ident = age::x25519::Identity::generate();
    let idfile = t.dir.path().join("identity.txt");
    {
        use age::secrecy::ExposeSecret;
        std::fs::write(
            &idfile,
            format!(
                "# created by a test\n{}\n",
                ident.to_string().expose_secret()
            ),
        )
        .unwrap();
    }
    let kid = repo.add_key(&NewKey::Recipient(ident.to_public())).unwrap();
    drop(repo);
    let cred = Credential::identity_file(&idfile).unwrap();
    let r = Repository::open(t.backend(), &cred, &t.cache_path()).unwrap();
    assert_eq!(r.key_id(), kid);
    // Through the CLI with no passphrase at all.
    let (code, _, err) = run(larder(&t.repo_path(), &t.cache_path())
        .env_remove("LARDER_PASSWORD")
        .env("LARDER_IDENTITY_FILE", &idfile)
        .args(["snapshots"]));
    assert_eq!(code, 0, "{err}");
    // Another identity does not open it.
    let other = t.dir.path().join("other.txt");
    {
        use age::secrecy::ExposeSecret;
        std::fs::write(
            &other,
            age::x25519::Identity::generate()
                .to_string()
                .expose_secret(),
        )
        .unwrap();
    }
    let cred = Credential::identity_file(&other).unwrap();
    assert!(matches!(
        Repository::open(t.backend(), &cred, &t.cache_path()),
        Err(Error::WrongPassword)
    ));
}

#[test]
fn blobs_survive_cache_loss_and_index_rebuild() {
    let t = TestRepo::new();
    let repo = t.init();
    let blobs = write_blobs(&repo, 40, 100_000); // ~4 MB: several 1 MiB packs
    let packs = t.backend().list(Kind::Pack).unwrap();
    assert!(packs.len() >= 3, "{}", packs.len());
    for (id, data) in &blobs {
        assert_eq!(&repo.read_blob(id).unwrap(), data);
    }
    drop(repo);
    // Delete the SQLite cache: reopening rebuilds it from index/.
    std::fs::remove_dir_all(t.cache_path()).unwrap();
    let repo = t.open().unwrap();
    assert_eq!(repo.index().unwrap().blob_count().unwrap(), 40);
    for (id, data) in &blobs {
        assert_eq!(&repo.read_blob(id).unwrap(), data);
    }
    // Delete index/ entirely: `repair index` rebuilds it from pack headers.
    for e in t.backend().list(Kind::Index).unwrap() {
        t.backend().delete(Kind::Index, &e.name).unwrap();
    }
    drop(repo);
    let repo = t.open().unwrap();
    assert_eq!(repo.index().unwrap().blob_count().unwrap(), 0);
    // With no snapshot referring to them, unindexed packs are what an
    // interrupted backup leaves: a notice for each, not a failure.
    let c = check(&repo, &CheckOptions::default()).unwrap();
    assert!(c.ok(), "{:?}", c.problems);
    assert_eq!(c.notices.len(), packs.len(), "{:?}", c.notices);
    for p in &packs {
        assert!(
            c.notices
                .iter()
                .any(|n| n.contains(&p.name) && n.contains("not in any index segment")),
            "no notice for pack {}: {:?}",
            p.name,
            c.notices
        );
    }
    let rep = repo.repair_index().unwrap();
    assert_eq!(rep.blobs, 40);
    assert_eq!(rep.packs, packs.len());
    assert!(rep.problems.is_empty());
    for (id, data) in &blobs {
        assert_eq!(&repo.read_blob(id).unwrap(), data);
    }
    let c = check(
        &repo,
        &CheckOptions {
            read_data: true,
            subset: None,
        },
    )
    .unwrap();
    assert!(c.ok(), "{:?}", c.problems);
    assert_eq!(c.blobs_read, 40);
}

#[test]
fn orphan_packs_are_indexed_not_stored_again() {
    let t = TestRepo::new();
    let repo = t.init();
    let blobs = write_blobs(&repo, 12, 100_000);
    // Simulate a run killed after writing packs but before its index segment.
    for e in t.backend().list(Kind::Index).unwrap() {
        t.backend().delete(Kind::Index, &e.name).unwrap();
    }
    drop(repo);
    let repo = t.open().unwrap();
    let packs_before = t.backend().list(Kind::Pack).unwrap().len();
    assert_eq!(repo.index_orphan_packs().unwrap(), packs_before);
    let mut p = larder::packer::Packer::new(&repo).unwrap();
    for (_, data) in &blobs {
        assert!(!p.add(BlobType::Data, data).unwrap().1, "stored twice");
    }
    p.finish().unwrap();
    assert_eq!(t.backend().list(Kind::Pack).unwrap().len(), packs_before);
}

/// A client's first backup after another run lost its segment indexes
/// that run's packs and only those: the packs a segment lists are looked
/// up in the index one by one, not loaded from it, and must not be
/// indexed again.
#[test]
fn only_packs_no_segment_lists_are_indexed_as_orphans() {
    let t = TestRepo::new();
    let repo = t.init();
    write_blobs(&repo, 6, 100_000);
    let kept: std::collections::HashSet<String> = t
        .backend()
        .list(Kind::Index)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    let packs_kept = t.backend().list(Kind::Pack).unwrap().len();
    // A second run, killed after its packs but before its segment.
    let mut p = larder::packer::Packer::new(&repo).unwrap();
    for i in 100..106u64 {
        let data = crate::support::rand_bytes(i, 100_000);
        assert!(p.add(BlobType::Data, &data).unwrap().1);
    }
    p.finish().unwrap();
    for e in t.backend().list(Kind::Index).unwrap() {
        if !kept.contains(&e.name) {
            t.backend().delete(Kind::Index, &e.name).unwrap();
        }
    }
    drop(repo);
    let repo = t.open().unwrap();
    let orphans = t.backend().list(Kind::Pack).unwrap().len() - packs_kept;
    assert!(orphans > 0 && packs_kept > 0);
    assert_eq!(repo.index_orphan_packs().unwrap(), orphans);
    assert_eq!(repo.index_orphan_packs().unwrap(), 0, "indexed twice");
    assert_eq!(
        t.backend().list(Kind::Index).unwrap().len(),
        kept.len() + 1,
        "one new segment for the orphans"
    );
}

/// Runs `larder check` and returns (exit code, stderr).
fn cli_check(t: &TestRepo, read_data: bool) -> (i32, String) {
    let mut c = larder(&t.repo_path(), &t.cache_path());
    c.arg("check");
    if read_data {
        c.arg("--read-data");
    }
    let (code, _, err) = run(&mut c);
    (code, err)
}

fn first_file(dir: &Path) -> std::path::PathBuf {
    let mut v: Vec<_> = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    v.sort();
    v.remove(0)
}

/// The largest file below `dir`: of `packs/`, the data pack (a backup
/// writes its trees, a few hundred bytes, into a pack of their own).
fn largest_file(dir: &Path) -> std::path::PathBuf {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .max_by_key(|e| e.metadata().unwrap().len())
        .unwrap()
        .into_path()
}

fn repo_with_snapshot(t: &TestRepo) {
    let src = t.dir.path().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    let mut big = vec![0u8; 300_000];
    blake3::Hasher::new()
        .update(b"big")
        .finalize_xof()
        .fill(&mut big);
    std::fs::write(src.join("d/big"), &big).unwrap();
    std::fs::write(src.join("small"), b"small file").unwrap();
    let (code, _, err) = run(larder(&t.repo_path(), &t.cache_path())
        .arg("backup")
        .arg(&src));
    assert_eq!(code, 0, "{err}");
    assert_eq!(cli_check(t, true).0, 0);
}

#[test]
fn check_names_truncated_bitflipped_and_swapped_objects() {
    // Truncated pack: structure check alone catches it.
    let t = TestRepo::new();
    t.init();
    repo_with_snapshot(&t);
    let pack = largest_file(&t.repo_path().join("packs"));
    let name = pack.file_name().unwrap().to_string_lossy().into_owned();
    let len = std::fs::metadata(&pack).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&pack)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let (code, err) = cli_check(&t, false);
    assert_ne!(code, 0);
    assert!(err.contains(&name), "{err}");

    // Bit flip inside a pack's blob area: --read-data catches it.
    let t = TestRepo::new();
    t.init();
    repo_with_snapshot(&t);
    let pack = largest_file(&t.repo_path().join("packs"));
    let name = pack.file_name().unwrap().to_string_lossy().into_owned();
    let mut bytes = std::fs::read(&pack).unwrap();
    bytes[40] ^= 0x10;
    std::fs::write(&pack, &bytes).unwrap();
    assert_eq!(cli_check(&t, false).0, 0, "structure is intact");
    let (code, err) = cli_check(&t, true);
    assert_ne!(code, 0);
    assert!(err.contains(&name), "{err}");

    // Bit flip in an index segment and in a snapshot.
    for kind in ["index", "snapshots"] {
        let t = TestRepo::new();
        t.init();
        repo_with_snapshot(&t);
        let f = first_file(&t.repo_path().join(kind));
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let mut bytes = std::fs::read(&f).unwrap();
        let n = bytes.len();
        bytes[n / 2] ^= 1;
        std::fs::write(&f, &bytes).unwrap();
        let (code, err) = cli_check(&t, false);
        assert_ne!(code, 0, "{kind}");
        assert!(err.contains(&name), "{kind}: {err}");
    }

    // Two snapshots swapped: each name no longer matches its bytes.
    let t = TestRepo::new();
    t.init();
    repo_with_snapshot(&t);
    std::fs::write(t.dir.path().join("src/new"), b"another file").unwrap();
    let (code, _, _) = run(larder(&t.repo_path(), &t.cache_path())
        .arg("backup")
        .arg(t.dir.path().join("src")));
    assert_eq!(code, 0);
    let snaps: Vec<_> = std::fs::read_dir(t.repo_path().join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(snaps.len(), 2);
    let (a, b) = (
        std::fs::read(&snaps[0]).unwrap(),
        std::fs::read(&snaps[1]).unwrap(),
    );
    std::fs::write(&snaps[0], &b).unwrap();
    std::fs::write(&snaps[1], &a).unwrap();
    let (code, err) = cli_check(&t, false);
    assert_ne!(code, 0);
    for s in &snaps {
        assert!(
            err.contains(&*s.file_name().unwrap().to_string_lossy()),
            "{err}"
        );
    }

    // A pack swapped with another pack's bytes.
    let t = TestRepo::new();
    t.init();
    let repo = t.open().unwrap();
    write_blobs(&repo, 30, 100_000);
    drop(repo);
    let packs: Vec<_> = walkdir::WalkDir::new(t.repo_path().join("packs"))
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    let (a, b) = (
        std::fs::read(&packs[0]).unwrap(),
        std::fs::read(&packs[1]).unwrap(),
    );
    std::fs::write(&packs[0], &b).unwrap();
    std::fs::write(&packs[1], &a).unwrap();
    let (code, err) = cli_check(&t, true);
    assert_ne!(code, 0);
    assert!(
        err.contains(&*packs[0].file_name().unwrap().to_string_lossy()),
        "{err}"
    );
}

#[test]
fn newer_format_version_is_explained() {
    let t = TestRepo::new();
    t.init();
    let cfg = t.repo_path().join("config");
    let mut bytes = std::fs::read(&cfg).unwrap();
    // A config may say 6 (a migrated repository): 7 is the first unknown.
    let newer = larder::object::MIGRATED_VERSION + 1;
    bytes[5] = newer;
    std::fs::write(&cfg, &bytes).unwrap();
    match t.open() {
        Err(Error::UnsupportedVersion { found, .. }) if found == newer as u32 => {}
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("opened a repository of an unknown version"),
    }
    let (code, _, err) = run(larder(&t.repo_path(), &t.cache_path()).arg("snapshots"));
    assert_eq!(code, 1);
    assert!(err.contains("upgrade larder"), "{err}");
}
