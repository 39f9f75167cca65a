//! `dump`, diff against a live tree, and `copy`, on trees with hostile
//! names: a dumped directory unpacks (with bsdtar, an independent reader)
//! to the same tree as a restore of the same path; a dumped file is its
//! bytes; a damaged blob stops a dump with an error naming it.

use crate::common::larder;
use crate::fidelity::{assert_same, build, dump_blocks, have, is_root, link_groups, mtree, sh};
use crate::support::{rand_bytes, write};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Fails the test unless `tool` is installed (with `LARDER_ALLOW_SKIP=1`,
/// says so and returns false).
fn need(tool: &str) -> bool {
    if have(tool) {
        return true;
    }
    assert!(
        std::env::var("LARDER_ALLOW_SKIP").as_deref() == Ok("1"),
        "{tool} is not installed (.ci/run installs it)"
    );
    eprintln!("skipping: {tool} is not installed");
    false
}

/// Runs `larder ARGS` (OS strings) and returns (code, stdout bytes, stderr).
fn larder_raw(repo: &Path, cache: &Path, args: &[&OsStr]) -> (i32, Vec<u8>, String) {
    let out = larder(repo, cache)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(repo: &Path, cache: &Path, args: &[&OsStr]) -> Vec<u8> {
    let (code, out, err) = larder_raw(repo, cache, args);
    assert_eq!(code, 0, "larder {args:?}: {err}");
    out
}

/// What a zip can carry, per UTF-8 path below `dir`: type, permission
/// bits, and for files their mtime (seconds) and content hash, for
/// symlinks their target. Paths past PATH_MAX are left to the tar test.
fn zip_view(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .filter_map(|e| e.ok())
    {
        let Ok(rel) = e.path().strip_prefix(dir) else {
            continue;
        };
        let (Some(rel), true) = (rel.to_str(), rel.as_os_str().len() < 3000) else {
            continue;
        };
        let md = fs::symlink_metadata(e.path()).unwrap();
        let perm = md.permissions().mode() & 0o777;
        let ft = md.file_type();
        let v = if ft.is_dir() {
            format!("dir {perm:o}")
        } else if ft.is_symlink() {
            format!("link -> {:?}", fs::read_link(e.path()).unwrap())
        } else if ft.is_file() {
            let hash = fs::read(e.path())
                .map(|b| blake3::hash(&b).to_hex().to_string())
                .unwrap_or_default();
            format!("file {perm:o} {} {hash}", md.mtime())
        } else {
            continue;
        };
        out.insert(rel.to_string(), v);
    }
    out
}

/// The fidelity tree without its bulk (the 100,000-entry directory and
/// the large sparse files, which only make the archive long) and without
/// its POSIX ACLs: the tar carries them as `system.posix_acl_*` xattrs, but
/// bsdtar sets those after the mode, so the kernel moves the group bits to
/// the ACL mask and the unpacked mode differs from the recorded one.
fn hostile_tree(src: &Path) {
    build(src);
    fs::remove_dir_all(src.join("many")).unwrap();
    let _ = fs::remove_dir_all(src.join("acl"));
    fs::remove_file(src.join("content/over-4GiB")).unwrap();
    fs::remove_file(src.join("content/sparse")).unwrap();
    write(&src.join("content/multi-chunk"), &rand_bytes(7, 3 << 20));
}

/// `dump` of a directory as tar unpacks with bsdtar to the same tree as a
/// restore of the same path: mtree (names, types, modes, owners, ns
/// mtimes, sizes, sha256, link targets, devices, link counts), extended
/// attributes and hard link groups, down to the 5,000-byte deep paths and
/// non-UTF-8 names. The zip unpacks to the same names (UTF-8 ones),
/// permission bits, contents, times and symlinks.
#[test]
fn dumped_directory_unpacks_like_a_restore() {
    if !need("bsdtar") {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let src = base.path().join("src");
    hostile_tree(&src);
    ok(&repo, &cache, &[OsStr::new("init")]);
    ok(&repo, &cache, &[OsStr::new("backup"), src.as_os_str()]);
    let restored = base.path().join("restored");
    let spec = format!("latest:{}", src.display());
    let (code, _, err) = larder_raw(
        &repo,
        &cache,
        &[
            OsStr::new("restore"),
            OsStr::new(&spec),
            OsStr::new("--target"),
            restored.as_os_str(),
        ],
    );
    assert_eq!(code, 0, "{err}");

    let tar = base.path().join("dump.tar");
    let out = ok(
        &repo,
        &cache,
        &[
            OsStr::new("--json"),
            OsStr::new("dump"),
            OsStr::new("--target"),
            tar.as_os_str(),
            OsStr::new("latest"),
            src.as_os_str(),
        ],
    );
    let summary: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(summary["archive"], true, "{summary}");
    assert!(
        summary["skipped"].to_string().contains("socket"),
        "{summary}"
    );
    let unpacked = base.path().join("unpacked");
    fs::create_dir_all(&unpacked).unwrap();
    // bsdtar creates the deep chain (by relative steps) but cannot set the
    // metadata of directories past PATH_MAX by their full path, and says
    // so on stderr with a failing status: its status is ignored here, and
    // for those paths only the names are compared below.
    sh(
        &unpacked,
        &format!(
            "bsdtar -x -p --xattrs -f {} 2>/dev/null; true",
            tar.display()
        ),
    );
    let rel = src.strip_prefix("/").unwrap();
    let from_tar = unpacked.join(rel);
    let cut = 4000 - from_tar.as_os_str().len().max(restored.as_os_str().len());
    let beyond = |set: &std::collections::BTreeSet<String>| -> Vec<String> {
        set.iter()
            .filter(|l| l.split(' ').next().unwrap_or("").len() > cut)
            .map(|l| l.split(' ').next().unwrap_or("").to_string())
            .collect()
    };
    let near = |set: std::collections::BTreeSet<String>| -> std::collections::BTreeSet<String> {
        set.into_iter()
            .filter(|l| l.split(' ').next().unwrap_or("").len() <= cut)
            .collect()
    };
    let (a_all, b_all) = (mtree(&restored), mtree(&from_tar));
    assert_eq!(beyond(&a_all), beyond(&b_all), "names past PATH_MAX");
    assert!(
        beyond(&a_all)
            .iter()
            .any(|p| p.len() > 5000 && p.ends_with("file.txt"))
    );
    let (a, b) = (near(a_all), near(b_all));
    let missing: Vec<_> = a.difference(&b).take(10).collect();
    let extra: Vec<_> = b.difference(&a).take(10).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "mtree differs:\nrestore only: {missing:#?}\ntar only: {extra:#?}"
    );
    assert!(
        a.iter().any(|l| l.starts_with("./bad\\377name\\376")),
        "{a:?}"
    );
    assert!(
        a.iter()
            .any(|l| l.starts_with("./deep/") && l.len() > 3000 && l.contains("file.txt")),
        "the deep chain is compared"
    );
    if is_root() {
        assert!(
            a.iter().any(|l| l.contains("type=char")),
            "devices compared"
        );
    }
    assert_eq!(link_groups(&restored), link_groups(&from_tar));
    assert_eq!(
        link_groups(&from_tar).iter().map(|g| g.len()).max(),
        Some(3)
    );
    if have("getfattr") {
        let cmd = "getfattr -R -d -m - -h --absolute-names -e hex . 2>/dev/null; true";
        let (x, y) = (dump_blocks(&restored, cmd), dump_blocks(&from_tar, cmd));
        assert_same(&x, &y, "extended attributes");
        assert!(x.keys().any(|k| k.contains("xattrs/file")), "{x:?}");
    }

    // Zip, to stdout.
    let (code, zip, err) = larder_raw(
        &repo,
        &cache,
        &[
            OsStr::new("dump"),
            OsStr::new("--archive"),
            OsStr::new("zip"),
            OsStr::new("latest"),
            src.as_os_str(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("not UTF-8"), "lossy names are reported: {err}");
    let zip_file = base.path().join("dump.zip");
    fs::write(&zip_file, &zip).unwrap();
    let unzipped = base.path().join("unzipped");
    fs::create_dir_all(&unzipped).unwrap();
    sh(
        &unzipped,
        &format!(
            "LC_ALL=C.UTF-8 bsdtar -x -f {} 2>/dev/null; true",
            zip_file.display()
        ),
    );
    let (r, z) = (zip_view(&restored), zip_view(&unzipped.join(rel)));
    let differ: Vec<_> = r
        .iter()
        .filter(|(k, v)| z.get(*k) != Some(v))
        .take(10)
        .map(|(k, v)| (k, v, z.get(k)))
        .collect();
    assert!(differ.is_empty(), "zip differs (restore, zip): {differ:#?}");
    assert!(
        r.len() > 300 && r.contains_key("content/multi-chunk"),
        "{}",
        r.len()
    );
}

/// `dump` of one file writes exactly its bytes (many chunks, and a short
/// non-UTF-8-named one); `--target` writes the same.
#[test]
fn dumped_file_is_its_bytes() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let src = base.path().join("src");
    let big = rand_bytes(11, 5 << 20);
    write(&src.join("big.bin"), &big);
    let odd = src.join(OsStr::from_bytes(b"odd\xffname\nx"));
    write(&odd, b"odd content");
    ok(&repo, &cache, &[OsStr::new("init")]);
    ok(&repo, &cache, &[OsStr::new("backup"), src.as_os_str()]);
    let got = ok(
        &repo,
        &cache,
        &[
            OsStr::new("dump"),
            OsStr::new("latest"),
            src.join("big.bin").as_os_str(),
        ],
    );
    assert!(got == big, "dump of big.bin differs ({} bytes)", got.len());
    let got = ok(
        &repo,
        &cache,
        &[OsStr::new("dump"), OsStr::new("latest"), odd.as_os_str()],
    );
    assert_eq!(got, b"odd content");
    let t = base.path().join("out.bin");
    ok(
        &repo,
        &cache,
        &[
            OsStr::new("dump"),
            OsStr::new("--target"),
            t.as_os_str(),
            OsStr::new("latest"),
            src.join("big.bin").as_os_str(),
        ],
    );
    assert!(fs::read(&t).unwrap() == big);
    let (code, _, err) = larder_raw(
        &repo,
        &cache,
        &[
            OsStr::new("dump"),
            OsStr::new("latest"),
            src.join("nope").as_os_str(),
        ],
    );
    assert_ne!(code, 0);
    assert!(err.contains("not found"), "{err}");
}

/// A flipped byte in one blob of a file: `dump` exits non-zero with an
/// error naming that blob; what it wrote before is a true prefix of the
/// file (never a wrong byte); `--target` leaves no file.
#[test]
fn damaged_blob_stops_dump_naming_it() {
    let t = crate::common::TestRepo::new();
    let repo = t.init();
    let cache = t.cache_path();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    let data = rand_bytes(21, 600_000);
    write(&src.join("victim.bin"), &data);
    let r = crate::support::lib_backup(&repo, &[&src]);
    let snap = crate::support::load_snap(&repo, &r.snapshot_id.unwrap());
    let node = larder::dump::node_at(
        &repo,
        snap.tree,
        src.join("victim.bin").as_os_str().as_bytes(),
    )
    .unwrap();
    assert!(node.content.len() > 12, "{} chunks", node.content.len());
    let bad = node.content[10];
    crate::support::flip_blob_byte(&t, &repo, &bad);

    let p = src.join("victim.bin");
    let (code, out, err) = larder_raw(
        &t.repo_path(),
        &cache,
        &[OsStr::new("dump"), OsStr::new("latest"), p.as_os_str()],
    );
    assert_ne!(code, 0, "a damaged blob fails the dump");
    assert!(
        err.contains(&bad.to_hex()),
        "the error names the blob: {err}"
    );
    assert!(
        out.len() < data.len() && data.starts_with(&out),
        "only verified bytes are written"
    );
    let target = base.path().join("victim.out");
    let (code, _, err) = larder_raw(
        &t.repo_path(),
        &cache,
        &[
            OsStr::new("dump"),
            OsStr::new("--target"),
            target.as_os_str(),
            OsStr::new("latest"),
            p.as_os_str(),
        ],
    );
    assert_ne!(code, 0, "{err}");
    assert!(!target.exists(), "no partial file under the target name");
    let left: Vec<_> = fs::read_dir(base.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 1, "temporary file left: {left:?}");
    // The directory form fails too, naming the blob.
    let (code, _, err) = larder_raw(
        &t.repo_path(),
        &cache,
        &[OsStr::new("dump"), OsStr::new("latest"), src.as_os_str()],
    );
    assert_ne!(code, 0);
    assert!(err.contains(&bad.to_hex()), "{err}");
}

/// The `--json` changes of a diff as (modifier, path relative to `src`).
fn changes(out: &str, src: &Path) -> std::collections::BTreeSet<(String, String)> {
    let prefix = format!("{}/", src.display());
    crate::support::json_lines(out)
        .into_iter()
        .filter(|v| v["message_type"] == "change")
        .map(|v| {
            let p = v["path"].as_str().unwrap();
            let rel = p.strip_prefix(&prefix).unwrap_or(p).to_string();
            (v["modifier"].as_str().unwrap().to_string(), rel)
        })
        .collect()
}

fn set_of(items: &[(&str, &str)]) -> std::collections::BTreeSet<(String, String)> {
    items
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect()
}

/// `diff SNAPSHOT DIR` after modifying, adding, removing and chmod-ing
/// files, and rewriting one file's content behind its old mtime: reports
/// exactly those changes (the chmod and the ctime moves with `--metadata`;
/// the hidden rewrite as content only with `--content`), leaving unchanged
/// files (a non-UTF-8 name among them) out.
#[test]
fn diff_against_live_tree_reports_exactly_the_changes() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache) = (base.path().join("repo"), base.path().join("cache"));
    let src = base.path().join("src");
    for f in [
        "keep.txt",
        "modify.txt",
        "remove.txt",
        "chmod.txt",
        "sneaky.txt",
        "sub/deep.txt",
        "gone/x",
    ] {
        write(&src.join(f), f.as_bytes());
    }
    write(&src.join(OsStr::from_bytes(b"bad\xffname")), b"hostile");
    ok(&repo, &cache, &[OsStr::new("init")]);
    ok(&repo, &cache, &[OsStr::new("backup"), src.as_os_str()]);
    let diff = |extra: &[&str]| -> String {
        let mut args: Vec<&OsStr> = vec![OsStr::new("--json"), OsStr::new("diff")];
        args.extend(extra.iter().map(OsStr::new));
        args.push(OsStr::new("latest"));
        args.push(src.as_os_str());
        String::from_utf8(ok(&repo, &cache, &args)).unwrap()
    };
    assert!(changes(&diff(&["--metadata", "--content"]), &src).is_empty());

    write(&src.join("modify.txt"), b"modified, longer");
    write(&src.join("new.txt"), b"new");
    fs::remove_file(src.join("remove.txt")).unwrap();
    fs::remove_dir_all(src.join("gone")).unwrap();
    fs::set_permissions(src.join("chmod.txt"), fs::Permissions::from_mode(0o600)).unwrap();
    let sneaky = src.join("sneaky.txt");
    let mtime = crate::support::mtime_ns(&fs::metadata(&sneaky).unwrap());
    fs::write(&sneaky, b"SNEAKY.TXT").unwrap();
    crate::support::set_mtime(&sneaky, mtime);

    let base_set = [
        ("M", "modify.txt"),
        ("+", "new.txt"),
        ("-", "remove.txt"),
        ("-", "gone/"),
        ("-", "gone/x"),
    ];
    let out = diff(&[]);
    assert_eq!(changes(&out, &src), set_of(&base_set), "{out}");
    let stats = crate::support::json_lines(&out).pop().unwrap();
    assert_eq!(stats["message_type"], "statistics");
    assert_eq!(stats["target_path"], src.to_str().unwrap());
    assert_eq!(
        (
            stats["files_added"].as_u64(),
            stats["files_removed"].as_u64()
        ),
        (Some(1), Some(2))
    );

    let out = diff(&["--metadata"]);
    let mut want = set_of(&base_set);
    want.extend(set_of(&[("U", "chmod.txt"), ("U", "sneaky.txt")]));
    let got: std::collections::BTreeSet<_> = changes(&out, &src)
        .into_iter()
        .filter(|(_, p)| p.starts_with(|c: char| c != '/'))
        .collect();
    assert_eq!(got, want, "{out}");
    let chmod = crate::support::json_lines(&out)
        .into_iter()
        .find(|v| v["path"].as_str().is_some_and(|p| p.ends_with("chmod.txt")))
        .unwrap();
    assert!(chmod["changes"].to_string().contains("mode"), "{chmod}");

    let out = diff(&["--content"]);
    let mut want = set_of(&base_set);
    want.insert(("M".into(), "sneaky.txt".into()));
    assert_eq!(changes(&out, &src), want, "{out}");
}

/// Environment for `copy`: the source repository's password.
fn copy_cmd(dst: &Path, cache: &Path, src: &Path) -> std::process::Command {
    let mut c = larder(dst, cache);
    c.env("LARDER_FROM_PASSWORD", crate::common::PASS)
        .arg("--json")
        .arg("copy")
        .arg("--from-repo")
        .arg(src);
    c
}

fn run_ok(c: std::process::Command) -> serde_json::Value {
    let (code, out, err) = crate::support::run(c);
    assert_eq!(code, 0, "{err}");
    crate::support::json_lines(&out).pop().unwrap()
}

fn restore_to(repo: &Path, cache: &Path, spec: &str, target: &Path) {
    let path = spec.split_once(':').map_or("/", |(_, p)| p);
    ok(
        repo,
        cache,
        &[
            OsStr::new("restore"),
            OsStr::new(spec),
            OsStr::new("--target"),
            target.as_os_str(),
            OsStr::new("--path"),
            OsStr::new(path),
        ],
    );
}

/// A copied snapshot (of the hostile tree) restores from the destination
/// to the same tree (bsdtar mtree: names, modes, owners, times, contents,
/// links) as from the source; a second copy adds no pack and no snapshot;
/// `check --read-data` passes on the destination.
#[test]
fn copied_snapshot_restores_identically_and_copies_once() {
    if !need("bsdtar") {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let (repo, dst, cache) = (
        base.path().join("repo"),
        base.path().join("dst"),
        base.path().join("cache"),
    );
    let src = base.path().join("src");
    hostile_tree(&src);
    ok(&repo, &cache, &[OsStr::new("init")]);
    ok(&repo, &cache, &[OsStr::new("backup"), src.as_os_str()]);
    write(&src.join("second.bin"), &rand_bytes(8, 1 << 20));
    ok(&repo, &cache, &[OsStr::new("backup"), src.as_os_str()]);
    ok(&dst, &cache, &[OsStr::new("init")]);
    let first = run_ok(copy_cmd(&dst, &cache, &repo));
    assert_eq!(first["copied"].as_array().unwrap().len(), 2, "{first}");
    assert!(first["blobs_added"].as_u64().unwrap() > 0);
    let packs = crate::support::pack_files(&dst);
    let again = run_ok(copy_cmd(&dst, &cache, &repo));
    assert_eq!(again["copied"].as_array().unwrap().len(), 0, "{again}");
    assert_eq!(again["skipped"].as_array().unwrap().len(), 2, "{again}");
    assert_eq!(again["blobs_added"], 0);
    assert_eq!(
        crate::support::pack_files(&dst),
        packs,
        "a second copy adds no pack"
    );

    let spec = format!("latest:{}", src.display());
    let (a, b) = (base.path().join("from-src"), base.path().join("from-dst"));
    restore_to(&repo, &cache, &spec, &a);
    restore_to(&dst, &cache, &spec, &b);
    let (ma, mb) = (mtree(&a), mtree(&b));
    assert!(ma.len() > 500, "{}", ma.len());
    assert_eq!(ma, mb, "the copy restores as the original");
    assert_eq!(link_groups(&a), link_groups(&b));
    ok(
        &dst,
        &cache,
        &[OsStr::new("check"), OsStr::new("--read-data")],
    );
    // A destination made to share the source's chunker and blob IDs: the
    // same trees (same IDs), blobs copied as they are.
    let shared = base.path().join("shared");
    let mut init = larder(&shared, &cache);
    init.env("LARDER_FROM_PASSWORD", crate::common::PASS)
        .args(["init", "--copy-chunker-params", "--from-repo"])
        .arg(&repo);
    let (code, _, err) = crate::support::run(init);
    assert_eq!(code, 0, "{err}");
    let first = run_ok(copy_cmd(&shared, &cache, &repo));
    assert_eq!(first["copied"].as_array().unwrap().len(), 2, "{first}");
    let trees = |r: &Path| -> Vec<String> {
        let out = ok(r, &cache, &[OsStr::new("--json"), OsStr::new("snapshots")]);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s["tree"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        trees(&shared),
        trees(&repo),
        "shared IDs: trees copied unchanged"
    );
    assert_ne!(
        trees(&dst),
        trees(&repo),
        "re-chunked copies have their own IDs"
    );
    let packs = crate::support::pack_files(&shared);
    let again = run_ok(copy_cmd(&shared, &cache, &repo));
    assert_eq!(again["blobs_added"], 0, "{again}");
    assert_eq!(crate::support::pack_files(&shared), packs);
    let c = base.path().join("from-shared");
    restore_to(&shared, &cache, &spec, &c);
    assert_eq!(mtree(&c), ma, "the shared-ID copy restores as the original");
    ok(
        &shared,
        &cache,
        &[OsStr::new("check"), OsStr::new("--read-data")],
    );
}

/// Random data large enough that a copy writes several packs.
fn big_source(base: &Path) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let (repo, cache) = (base.join("repo"), base.join("cache"));
    let src = base.join("src");
    for i in 0..6u64 {
        write(
            &src.join(format!("f{i}.bin")),
            &rand_bytes(100 + i, 12 << 20),
        );
    }
    ok(&repo, &cache, &[OsStr::new("init")]);
    ok(&repo, &cache, &[OsStr::new("backup"), src.as_os_str()]);
    (repo, cache, src)
}

/// kill -9 in the middle of a copy (once a pack has landed), then copy
/// again: it completes, `check --read-data` passes, and the copy restores
/// the source's bytes.
#[test]
fn copy_killed_midway_completes_on_the_next_run() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache, src) = big_source(base.path());
    let dst = base.path().join("dst");
    ok(&dst, &cache, &[OsStr::new("init")]);
    let mut c = copy_cmd(&dst, &cache, &repo);
    let mut child = c
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut killed = false;
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if crate::support::pack_files(&dst).0 >= 1 {
            child.kill().unwrap();
            killed = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.wait().unwrap();
    assert!(
        killed,
        "the copy ended before a pack landed: make the data larger"
    );
    let snaps = |r: &Path| {
        let out = ok(r, &cache, &[OsStr::new("--json"), OsStr::new("snapshots")]);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        v.as_array().map_or(0, Vec::len)
    };
    assert_eq!(snaps(&dst), 0, "no snapshot from the killed copy");
    let r = run_ok(copy_cmd(&dst, &cache, &repo));
    assert_eq!(r["copied"].as_array().unwrap().len(), 1, "{r}");
    ok(
        &dst,
        &cache,
        &[OsStr::new("check"), OsStr::new("--read-data")],
    );
    let t = base.path().join("t");
    restore_to(&dst, &cache, &format!("latest:{}", src.display()), &t);
    for i in 0..6u64 {
        let n = format!("f{i}.bin");
        assert!(
            fs::read(t.join(&n)).unwrap() == rand_bytes(100 + i, 12 << 20),
            "{n}"
        );
    }
}

/// A copy and a backup into the same destination at once: both finish,
/// both snapshots restore whole, `check --read-data` passes.
#[test]
fn copy_beside_a_backup_leaves_both_whole() {
    let base = tempfile::tempdir().unwrap();
    let (repo, cache, src) = big_source(base.path());
    let dst = base.path().join("dst");
    ok(&dst, &cache, &[OsStr::new("init")]);
    let other = base.path().join("other");
    for i in 0..4u64 {
        write(
            &other.join(format!("o{i}.bin")),
            &rand_bytes(200 + i, 8 << 20),
        );
    }
    let mut cp = copy_cmd(&dst, &cache, &repo);
    let copy = cp
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut bk = larder(&dst, &base.path().join("cache2"));
    bk.arg("backup").arg(&other);
    let (code, _, err) = crate::support::run(bk);
    assert_eq!(code, 0, "{err}");
    let out = copy.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ok(
        &dst,
        &cache,
        &[OsStr::new("check"), OsStr::new("--read-data")],
    );
    let (t1, t2) = (base.path().join("t1"), base.path().join("t2"));
    restore_to(&dst, &cache, &format!("latest:{}", src.display()), &t1);
    restore_to(&dst, &cache, &format!("latest:{}", other.display()), &t2);
    for i in 0..6u64 {
        assert!(fs::read(t1.join(format!("f{i}.bin"))).unwrap() == rand_bytes(100 + i, 12 << 20));
    }
    for i in 0..4u64 {
        assert!(fs::read(t2.join(format!("o{i}.bin"))).unwrap() == rand_bytes(200 + i, 8 << 20));
    }
}

/// Two copies of one repository (the second cloned from the first with
/// `cp -a`, as rsync would make it) share its id: a snapshot made in the
/// clone copies back into the first (the one both hold is skipped) and
/// restores exactly from it. Both used one index cache before, and the
/// copy failed with "blob … is not in the index".
#[test]
fn copy_between_two_clones_of_one_repository() {
    let base = tempfile::tempdir().unwrap();
    let (repo, clone, cache) = (
        base.path().join("repo"),
        base.path().join("clone"),
        base.path().join("cache"),
    );
    let src = base.path().join("src");
    write(&src.join("first.bin"), &rand_bytes(21, 300 << 10));
    ok(&repo, &cache, &[OsStr::new("init")]);
    ok(&repo, &cache, &[OsStr::new("backup"), src.as_os_str()]);
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(&repo)
        .arg(&clone)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a");
    write(&src.join("second.bin"), &rand_bytes(22, 400 << 10));
    ok(&clone, &cache, &[OsStr::new("backup"), src.as_os_str()]);
    let report = run_ok(copy_cmd(&repo, &cache, &clone));
    assert_eq!(report["copied"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(report["skipped"].as_array().unwrap().len(), 1, "{report}");
    let back = base.path().join("back");
    restore_to(&repo, &cache, &format!("latest:{}", src.display()), &back);
    crate::support::assert_same_tree(&src, &back);
    ok(
        &repo,
        &cache,
        &[OsStr::new("check"), OsStr::new("--read-data")],
    );
}

/// restic's other ways to name the source of `copy` (and of `init
/// --copy-chunker-params`): `--from-repository-file` (its first line) and
/// `--from-password-command`; `--from-repo` with `--from-repository-file`
/// is refused, as is a password command that fails (named), and
/// `--copy-chunker-params` with no source.
#[test]
fn copy_from_a_repository_file_with_a_password_command() {
    let base = tempfile::tempdir().unwrap();
    let (repo, dst, cache) = (
        base.path().join("repo"),
        base.path().join("dst"),
        base.path().join("cache"),
    );
    let src = base.path().join("src");
    write(&src.join("a.txt"), b"alpha");
    ok(&repo, &cache, &[OsStr::new("init")]);
    ok(&repo, &cache, &[OsStr::new("backup"), src.as_os_str()]);
    ok(&dst, &cache, &[OsStr::new("init")]);
    let location = base.path().join("from-repository");
    write(&location, format!("{}\n", repo.display()).as_bytes());
    let pass = base.path().join("pass");
    write(&pass, crate::common::PASS.as_bytes());
    let copy = |extra: &[&OsStr]| {
        let mut c = larder(&dst, &cache);
        c.env_remove("LARDER_FROM_PASSWORD")
            .args(["--json", "copy", "--from-repository-file"])
            .arg(&location)
            .args(extra);
        crate::support::run(c)
    };
    let cat = format!("cat {}", pass.display());
    let (code, out, err) = copy(&[OsStr::new("--from-password-command"), OsStr::new(&cat)]);
    assert_eq!(code, 0, "{err}");
    let summary = crate::support::json_lines(&out).pop().unwrap();
    assert_eq!(summary["copied"].as_array().unwrap().len(), 1, "{summary}");
    let out = ok(
        &dst,
        &cache,
        &[OsStr::new("--json"), OsStr::new("snapshots")],
    );
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1);

    // A failing command is named, and what it says on stderr shows.
    let says = "echo no such entry >&2; false";
    let (code, _, err) = copy(&[OsStr::new("--from-password-command"), OsStr::new(says)]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no such entry"), "{err}");
    assert!(
        err.contains(&format!("password command {says:?} failed")),
        "{err}"
    );
    let (code, _, err) = copy(&[
        OsStr::new("--from-password-command"),
        OsStr::new(&cat),
        OsStr::new("--from-password-file"),
        pass.as_os_str(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("both give the password"), "{err}");
    let (code, _, err) = copy(&[OsStr::new("--from-repo"), repo.as_os_str()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("give one"), "{err}");

    let shared = base.path().join("shared");
    let mut init = larder(&shared, &cache);
    init.env_remove("LARDER_FROM_PASSWORD")
        .args(["init", "--copy-chunker-params", "--from-repository-file"])
        .arg(&location)
        .arg("--from-password-command")
        .arg(&cat);
    let (code, _, err) = crate::support::run(init);
    assert_eq!(code, 0, "{err}");
    // It shares the source's master key: a copy keeps the trees' ids
    // (a repository of its own re-chunks them under other ids).
    let trees = |r: &Path| -> Vec<String> {
        let out = ok(r, &cache, &[OsStr::new("--json"), OsStr::new("snapshots")]);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let list = v.as_array().unwrap().iter();
        list.map(|s| s["tree"].as_str().unwrap().to_string())
            .collect()
    };
    run_ok(copy_cmd(&shared, &cache, &repo));
    assert_eq!(trees(&shared), trees(&repo));
    assert_ne!(trees(&dst), trees(&repo));
    let mut init = larder(&base.path().join("none"), &cache);
    init.args(["init", "--copy-chunker-params"]);
    let (code, _, err) = crate::support::run(init);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--from-repository-file"), "{err}");
}
