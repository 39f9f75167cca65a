//! `find`, `tag`, `rewrite`, `completion` and `manpage` (issue 14), through
//! the CLI, on a tree with the fidelity tree's hostile names (bytes that are
//! not UTF-8, a newline, a tab, a backslash, a leading dash, a 255-byte
//! name) plus glob metacharacters in names, a deep chain and a subtree that
//! two snapshots share. What `find` must print is computed from the files
//! on disk, independently of larder's glob code; `rewrite` is compared
//! with the tree minus the excluded path and, after `prune`, the excluded
//! file's chunks are in no pack header.

use crate::common::TestRepo;
use crate::faults::{
    backup_ok, check_passes, cli_repo, larder_cmd, larder_ok, larder_run, spawn, wait_bounded,
};
use crate::support::{assert_same_tree, json_lines, path_str, rand_bytes, set_mtime, write};
use larder::Id;
use larder::backend::Kind;
use larder::snapshot::{self, Filter, Snapshot};
use larder::walker;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The hostile names (as in `fidelity.rs`) and names with glob characters.
fn odd_names() -> Vec<Vec<u8>> {
    vec![
        b"bad\xffname\xfe".to_vec(),
        b"new\nline".to_vec(),
        b"back\\slash".to_vec(),
        b"-leading-dash".to_vec(),
        b" spaces and \ttab ".to_vec(),
        vec![b'n'; 255],
        b"star*name".to_vec(),
        b"q?mark".to_vec(),
        b"[brackets]".to_vec(),
        b"UPPER.TXT".to_vec(),
        b"lower.txt".to_vec(),
        "ünïcödé.txt".as_bytes().to_vec(),
    ]
}

/// Builds the tree under `root`: odd names at the top and in `shared/`, a
/// 40-level chain with a `file.txt` every 10 levels, symlinks, a FIFO, a
/// hard link pair, `changing/` (edited between the snapshots) and
/// `secret/key.pem` (a unique random file of several chunks).
fn build(root: &Path) {
    for name in odd_names() {
        write(&root.join(OsStr::from_bytes(&name)), &name);
        write(
            &root.join("shared").join(OsStr::from_bytes(&name)),
            b"shared",
        );
    }
    let mut d = root.join("deep");
    for i in 0..40 {
        d = d.join(format!("level{i:02}"));
        if i % 10 == 9 {
            write(&d.join("file.txt"), format!("at {i}").as_bytes());
        }
    }
    fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::symlink("shared/lower.txt", root.join("rel-link")).unwrap();
    std::os::unix::fs::symlink("does/not/exist", root.join("dangling")).unwrap();
    nix::unistd::mkfifo(
        &root.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o640),
    )
    .unwrap();
    write(&root.join("links/h1"), b"hard linked");
    fs::hard_link(root.join("links/h1"), root.join("links/h2")).unwrap();
    write(&root.join("changing/file.txt"), b"first version");
    write(&root.join("secret/key.pem"), &rand_bytes(0x5ec2e7, 200_000));
    write(&root.join("secret/public.txt"), b"not secret");
    set_mtime(&root.join("lower.txt"), 1_600_000_000_123_456_789);
    set_mtime(&root.join("UPPER.TXT"), 1_400_000_000_000_000_000);
}

/// Every entry below `root` as (path relative to `root`, name), raw bytes.
fn entries(root: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    fn rec(root: &Path, dir: &Path, out: &mut Vec<(Vec<u8>, Vec<u8>)>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec();
            out.push((rel, e.file_name().as_bytes().to_vec()));
            if e.file_type().unwrap().is_dir() {
                rec(root, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    rec(root, root, &mut out);
    out
}

/// A test of (path relative to the tree, name).
type Pred = dyn Fn(&[u8], &[u8]) -> bool;

/// The snapshot paths of the entries below `src` whose (relative path,
/// name) pass `pred`, as `find --json` shows them (lossy UTF-8).
fn expected(src: &Path, pred: &Pred) -> BTreeSet<String> {
    let base = src.as_os_str().as_bytes();
    entries(src)
        .into_iter()
        .filter(|(rel, name)| pred(rel, name))
        .map(|(rel, _)| {
            let mut p = base.to_vec();
            p.push(b'/');
            p.extend_from_slice(&rel);
            String::from_utf8_lossy(&p).into_owned()
        })
        .collect()
}

/// Runs `find --json ARGS`; returns the matches per snapshot id and the
/// summary line.
fn find(t: &TestRepo, args: &[&str]) -> (BTreeMap<String, BTreeSet<String>>, serde_json::Value) {
    let mut all = vec!["find", "--json"];
    all.extend_from_slice(args);
    let o = larder_ok(&t.repo_path(), &t.cache_path(), &all);
    let mut lines = json_lines(&o.out);
    let summary = lines.pop().unwrap();
    assert_eq!(summary["message_type"], "summary", "{}", o.all());
    let mut by_snap: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for l in lines {
        assert_eq!(l["message_type"], "match");
        let path = l["path"].as_str().unwrap().to_string();
        let fresh = by_snap
            .entry(l["snapshot"].as_str().unwrap().to_string())
            .or_default()
            .insert(path.clone());
        assert!(fresh, "{path:?} printed twice");
    }
    (by_snap, summary)
}

/// Two snapshots of the tree (the second after editing `changing/`).
struct Fixture {
    t: TestRepo,
    _dir: tempfile::TempDir,
    src: PathBuf,
    first: String,
    second: String,
}

fn fixture() -> Fixture {
    let t = cli_repo();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    build(&src);
    let first = backup_ok(&t.repo_path(), &t.cache_path(), &src);
    write(&src.join("changing/file.txt"), b"second version");
    write(&src.join("changing/new.txt"), b"new in the second");
    let second = backup_ok(&t.repo_path(), &t.cache_path(), &src);
    Fixture {
        t,
        _dir: dir,
        src,
        first,
        second,
    }
}

fn load(t: &TestRepo, id: &str) -> Snapshot {
    let repo = t.open().unwrap();
    snapshot::load(&repo, id).unwrap()
}

/// The node at `rel` below `src` in snapshot `id`.
fn node_of(t: &TestRepo, id: &str, src: &Path, rel: &str) -> larder::tree::Node {
    let repo = t.open().unwrap();
    let snap = snapshot::load(&repo, id).unwrap();
    let want = format!("{}/{rel}", path_str(src));
    let mut found = None;
    walker::walk(&repo, snap.tree, None, &mut |p, n| {
        if p == want {
            found = Some(n.clone());
        }
    })
    .unwrap();
    found.unwrap_or_else(|| panic!("{want} not in snapshot {id}"))
}

#[test]
fn find_matches_exactly_what_the_tree_holds() {
    let f = fixture();
    let (t, src) = (&f.t, &f.src);
    // The set on disk is the second snapshot's; the first lacks new.txt.
    let new_txt = format!("{}/changing/new.txt", path_str(src));
    let both = |set: &BTreeSet<String>| {
        let mut first = set.clone();
        first.remove(&new_txt);
        let mut m = BTreeMap::from([(f.first.clone(), first), (f.second.clone(), set.clone())]);
        m.retain(|_, v| !v.is_empty());
        m
    };
    // Names: each pattern against a predicate written without globs.
    let cases: Vec<(Vec<&str>, Box<Pred>)> = vec![
        (
            vec!["*line*"],
            Box::new(|_, n| n.windows(4).any(|w| w == b"line")),
        ),
        (vec!["file.txt"], Box::new(|_, n| n == b"file.txt")),
        (
            vec!["*name*"],
            Box::new(|_, n| n.windows(4).any(|w| w == b"name")),
        ),
        (
            vec!["--", "-leading-dash"],
            Box::new(|_, n| n == b"-leading-dash"),
        ),
        (vec!["star\\*name"], Box::new(|_, n| n == b"star*name")),
        (vec!["\\[brackets\\]"], Box::new(|_, n| n == b"[brackets]")),
        (vec!["*.txt"], Box::new(|_, n| n.ends_with(b".txt"))),
        (
            vec!["-i", "*.txt"],
            Box::new(|_, n| n.to_ascii_lowercase().ends_with(b".txt")),
        ),
        (
            vec!["level?9", "h?"],
            Box::new(|_, n| {
                (n.len() == 7 && n.starts_with(b"level") && n[6] == b'9')
                    || (n.len() == 2 && n[0] == b'h')
            }),
        ),
        (vec!["no-such-name*"], Box::new(|_, _| false)),
    ];
    for (args, pred) in &cases {
        // `changing/new.txt` is only in the second snapshot.
        let set = expected(src, pred.as_ref());
        let (got, _) = find(t, args);
        assert_eq!(got, both(&set), "find {args:?}");
    }
    // A full-path glob: the entries directly in `shared/`, nowhere else.
    let pat = format!("{}/shared/*", path_str(src));
    let set = expected(src, &|rel, _| {
        rel.starts_with(b"shared/") && !rel[7..].contains(&b'/')
    });
    assert_eq!(set.len(), odd_names().len());
    assert_eq!(find(t, &[&pat]).0, both(&set), "find {pat}");
    // --snapshot narrows to one; the entry only the second has.
    let (got, _) = find(t, &["new.txt", "--snapshot", &f.second[..8]]);
    assert_eq!(
        got,
        BTreeMap::from([(
            f.second.clone(),
            BTreeSet::from([format!("{}/changing/new.txt", path_str(src))])
        )])
    );
    // --oldest/--newest bound the mtime: lower.txt (2020), UPPER.TXT (2014).
    let (got, _) = find(t, &["-i", "*.txt", "--newest", "2015-01-01"]);
    let upper = BTreeSet::from([format!("{}/UPPER.TXT", path_str(src))]);
    assert_eq!(got, both(&upper));
    let (got, _) = find(
        t,
        &[
            "*.txt",
            "--oldest",
            "2020-09-13T12:26:40Z",
            "--newest",
            "2020-09-13T12:26:41Z",
        ],
    );
    let lower = BTreeSet::from([format!("{}/lower.txt", path_str(src))]);
    assert_eq!(got, both(&lower));
}

#[test]
fn find_visits_a_shared_subtree_once() {
    let f = fixture();
    let repo = f.t.open().unwrap();
    let roots = [&f.first, &f.second].map(|id| {
        let s = snapshot::load(&repo, id).unwrap();
        (s.tree, id.to_string())
    });
    let distinct = walker::walk_unique(&repo, roots, &mut |_| Ok(())).unwrap() as u64;
    let (_, summary) = find(&f.t, &["*"]);
    // Every distinct tree is read once; the second snapshot re-uses the
    // deep chain, shared/, secret/ and the rest without reading them.
    assert_eq!(summary["trees_loaded"].as_u64().unwrap(), distinct);
    assert!(summary["trees_reused"].as_u64().unwrap() >= 4, "{summary}");
    // And still every entry of both snapshots is printed: the entries
    // below src, src and the directories above it, in the second snapshot,
    // and all but changing/new.txt in the first.
    let all = expected(&f.src, &|_, _| true).len() as u64;
    let above = f.src.components().count() as u64 - 1;
    assert_eq!(
        summary["matches"].as_u64().unwrap(),
        2 * (all + above) - 1,
        "{summary}"
    );
}

#[test]
fn find_blob_and_tree_name_their_users() {
    let f = fixture();
    let key = node_of(&f.t, &f.first, &f.src, "secret/key.pem");
    assert!(key.content.len() >= 3, "key.pem spans several chunks");
    let prefix = &key.content[1].to_hex()[..12];
    let key_path = format!("{}/secret/key.pem", path_str(&f.src));
    let (got, _) = find(&f.t, &["--blob", prefix]);
    let want: BTreeMap<String, BTreeSet<String>> = [&f.first, &f.second]
        .into_iter()
        .map(|s| (s.clone(), BTreeSet::from([key_path.clone()])))
        .collect();
    assert_eq!(got, want);
    // The matched id is printed.
    let o = larder_ok(
        &f.t.repo_path(),
        &f.t.cache_path(),
        &["find", "--json", "--blob", prefix],
    );
    assert_eq!(json_lines(&o.out)[0]["id"], key.content[1].to_hex());
    // --tree: the shared directory, in both snapshots.
    let shared = node_of(&f.t, &f.second, &f.src, "shared");
    let tree_hex = shared.subtree.unwrap().to_hex();
    let (got, _) = find(&f.t, &["--tree", &tree_hex[..10]]);
    let shared_path = format!("{}/shared", path_str(&f.src));
    let want: BTreeMap<String, BTreeSet<String>> = [&f.first, &f.second]
        .into_iter()
        .map(|s| (s.clone(), BTreeSet::from([shared_path.clone()])))
        .collect();
    assert_eq!(got, want);
    // changing/ differs: its first tree is in the first snapshot only.
    let changing = node_of(&f.t, &f.first, &f.src, "changing");
    let (got, _) = find(&f.t, &["--tree", &changing.subtree.unwrap().to_hex()]);
    assert_eq!(got.keys().collect::<Vec<_>>(), vec![&f.first]);
}

/// The pack whose header (read from storage, not the index) holds `id`.
fn pack_holding(t: &TestRepo, id: &Id) -> String {
    let repo = t.open().unwrap();
    let packs = repo.backend().list(Kind::Pack).unwrap();
    let mut holders = packs.iter().filter(|e| {
        let pack = Id::from_hex(&e.name).unwrap();
        let blobs = repo.read_pack_header(&pack, e.size).unwrap();
        blobs.iter().any(|b| b.id == *id)
    });
    let first = holders.next().expect("a pack holds it").name.clone();
    assert!(holders.next().is_none(), "one pack holds {id:?}");
    first
}

/// `--show-pack-id` adds the pack that stores the matched blob or tree,
/// the one whose header holds it; it needs --blob or --tree.
#[test]
fn find_show_pack_id_names_the_pack_holding_the_match() {
    let f = fixture();
    let (repo, cache) = (f.t.repo_path(), f.t.cache_path());
    let key = node_of(&f.t, &f.first, &f.src, "secret/key.pem");
    let shared = node_of(&f.t, &f.second, &f.src, "shared").subtree.unwrap();
    for (flag, id) in [("--blob", key.content[1]), ("--tree", shared)] {
        let hex = id.to_hex();
        let want = pack_holding(&f.t, &id);
        let o = larder_ok(
            &repo,
            &cache,
            &["find", "--json", flag, &hex[..12], "--show-pack-id"],
        );
        let lines = json_lines(&o.out);
        let matches: Vec<_> = lines
            .iter()
            .filter(|l| l["message_type"] == "match")
            .collect();
        assert_eq!(matches.len(), 2, "{flag}: in both snapshots: {}", o.out);
        for m in matches {
            assert_eq!(m["id"], hex.as_str());
            assert_eq!(m["pack_id"], want.as_str(), "{flag}");
        }
        let o = larder_ok(&repo, &cache, &["find", flag, &hex[..12], "--show-pack-id"]);
        assert!(
            o.out.contains(&format!("in pack {}", &want[..8])),
            "{flag}: {}",
            o.out
        );
        // Without the flag, no pack.
        let o = larder_ok(&repo, &cache, &["find", "--json", flag, &hex[..12]]);
        assert!(json_lines(&o.out)[0].get("pack_id").is_none(), "{}", o.out);
    }
    let o = larder_run(&repo, &cache, &["find", "key.pem", "--show-pack-id"]);
    assert_eq!(o.code, 1, "{}", o.all());
    assert!(
        o.err.contains("--show-pack-id needs --blob or --tree"),
        "{}",
        o.err
    );
}

/// Every readable snapshot, oldest first.
fn tagged(t: &TestRepo) -> Vec<(Id, Snapshot)> {
    let repo = t.open().unwrap();
    snapshot::list(&repo, &Filter::default()).unwrap().0
}

#[test]
fn tag_add_remove_set_change_only_the_tags() {
    let f = fixture();
    let (repo, cache) = (f.t.repo_path(), f.t.cache_path());
    let before = load(&f.t, &f.first);
    let other = load(&f.t, &f.second);
    let mut current = f.first.clone();
    let steps: [(&[&str], &[&str]); 5] = [
        (&["--add", "a", "--add", "b,c"], &["a", "b", "c"]),
        (&["--remove", "b"], &["a", "c"]),
        (&["--add", "c", "--add", "d", "--remove", "a"], &["c", "d"]),
        (
            &["--set", "x", "--set", "new\nline tag"],
            &["x", "new\nline tag"],
        ),
        (&["--set", ""], &[]),
    ];
    for (args, want) in steps {
        let mut all = vec!["tag", "--json"];
        all.extend_from_slice(args);
        all.push(&current[..10]);
        let o = larder_ok(&repo, &cache, &all);
        let rep = &json_lines(&o.out)[0];
        assert_eq!(rep["changed"][0]["snapshot"], current.as_str());
        let new = rep["changed"][0]["new_snapshot"]
            .as_str()
            .unwrap()
            .to_string();
        assert_ne!(new, current);
        let snaps = tagged(&f.t);
        let ids: BTreeSet<String> = snaps.iter().map(|(i, _)| i.to_hex()).collect();
        assert_eq!(
            ids,
            BTreeSet::from([new.clone(), f.second.clone()]),
            "{args:?}"
        );
        let s = load(&f.t, &new);
        assert_eq!(s.tags, want, "{args:?}");
        // restic's `original`: the first snapshot of the chain.
        assert_eq!(s.original.map(|o| o.to_hex()), Some(f.first.clone()));
        let mut same = s.clone();
        same.tags = before.tags.clone();
        same.original = None;
        assert_eq!(same, before, "{args:?}: only the tags change");
        current = new;
    }
    // `snapshots --json` shows it, as restic's.
    let o = larder_ok(&repo, &cache, &["snapshots", "--json"]);
    let list: serde_json::Value = serde_json::from_str(o.out.trim()).unwrap();
    let shown = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == current.as_str())
        .unwrap();
    assert_eq!(shown["original"], f.first.as_str());
    // A change that changes nothing saves nothing.
    let o = larder_ok(&repo, &cache, &["tag", "--json", "--set", "", &current]);
    assert_eq!(json_lines(&o.out)[0]["unchanged"][0], current.as_str());
    assert!(snapshot_exists(&f.t, &current));
    // The other snapshot was never touched.
    assert_eq!(load(&f.t, &f.second), other);
    // --set with --add is refused.
    let o = larder_run(
        &repo,
        &cache,
        &["tag", "--set", "x", "--add", "y", &current],
    );
    assert_ne!(o.code, 0);
    assert!(snapshot_exists(&f.t, &current));
    check_passes(&repo, &cache, false, "after tagging");
}

fn snapshot_exists(t: &TestRepo, id: &str) -> bool {
    t.repo_path().join("snapshots").join(id).exists()
}

#[test]
fn tag_beside_a_running_backup_leaves_both_snapshots_whole() {
    let f = fixture();
    let (repo, cache) = (f.t.repo_path(), f.t.cache_path());
    // A backup of 40 MiB of fresh data in another process.
    let big = f._dir.path().join("big");
    for i in 0..20 {
        write(&big.join(format!("f{i}")), &rand_bytes(1000 + i, 2 << 20));
    }
    let backup = spawn(larder_cmd(
        &repo,
        &cache,
        &["backup", "--json", path_str(&big)],
    ));
    let mut tagged_ids = Vec::new();
    let mut current = f.first.clone();
    for i in 0..5 {
        let tag = format!("round{i}");
        let o = larder_ok(&repo, &cache, &["tag", "--json", "--set", &tag, &current]);
        current = json_lines(&o.out)[0]["changed"][0]["new_snapshot"]
            .as_str()
            .unwrap()
            .to_string();
        tagged_ids.push(current.clone());
    }
    let b = wait_bounded(backup, "backup beside tag");
    assert_eq!(b.code, 0, "{}", b.all());
    let new_snap = crate::faults::snapshot_id_of(&b);
    let ids: BTreeSet<String> = tagged(&f.t).iter().map(|(i, _)| i.to_hex()).collect();
    assert_eq!(
        ids,
        BTreeSet::from([current.clone(), f.second.clone(), new_snap.clone()])
    );
    assert_eq!(load(&f.t, &current).tags, vec!["round4".to_string()]);
    check_passes(&repo, &cache, true, "after tag beside a backup");
    let target = f._dir.path().join("restored");
    let at = crate::faults::restore_cli(&repo, &cache, &new_snap, &big, &target);
    assert_same_tree(&big, &at);
}

#[test]
fn tag_killed_between_save_and_removal_is_finished_by_a_rerun() {
    let f = fixture();
    let copy = TestRepo::new();
    let out = std::process::Command::new("cp")
        .args([
            "-a",
            path_str(&f.t.repo_path()),
            path_str(&copy.repo_path()),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    // The uninterrupted run, on the copy.
    let args = ["tag", "--json", "--add", "kept", &f.first[..8]];
    let o = larder_ok(&copy.repo_path(), &copy.cache_path(), &args);
    let new = json_lines(&o.out)[0]["changed"][0]["new_snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    // The state a kill after the save leaves: both objects.
    fs::copy(
        copy.repo_path().join("snapshots").join(&new),
        f.t.repo_path().join("snapshots").join(&new),
    )
    .unwrap();
    check_passes(
        &f.t.repo_path(),
        &f.t.cache_path(),
        false,
        "with both objects",
    );
    let o = larder_ok(&f.t.repo_path(), &f.t.cache_path(), &args);
    let c = &json_lines(&o.out)[0]["changed"][0];
    assert_eq!(c["new_snapshot"], new.as_str());
    assert_eq!(c["reused"], true);
    let ids: BTreeSet<String> = tagged(&f.t).iter().map(|(i, _)| i.to_hex()).collect();
    assert_eq!(ids, BTreeSet::from([new, f.second.clone()]));
}

/// Every blob id in every pack header in storage (read from the packs
/// themselves, not from the index).
fn blobs_in_packs(t: &TestRepo) -> BTreeSet<Id> {
    let repo = t.open().unwrap();
    let mut out = BTreeSet::new();
    for e in repo.backend().list(Kind::Pack).unwrap() {
        let id = Id::from_hex(&e.name).unwrap();
        for b in repo.read_pack_header(&id, e.size).unwrap() {
            out.insert(b.id);
        }
    }
    out
}

#[test]
fn rewrite_removes_the_path_and_nothing_else_and_prune_drops_its_data() {
    let f = fixture();
    let (repo, cache) = (f.t.repo_path(), f.t.cache_path());
    let key = node_of(&f.t, &f.second, &f.src, "secret/key.pem");
    let key_path = format!("{}/secret/key.pem", path_str(&f.src));
    let shared_before = node_of(&f.t, &f.second, &f.src, "shared").subtree;
    let in_packs = blobs_in_packs(&f.t);
    assert!(key.content.iter().all(|c| in_packs.contains(c)));
    // A dry run writes nothing.
    let snaps_before = tagged(&f.t);
    let o = larder_ok(
        &repo,
        &cache,
        &["rewrite", "--json", "--dry-run", "-e", &key_path],
    );
    let rep = &json_lines(&o.out)[0];
    assert_eq!(rep["rewritten"].as_array().unwrap().len(), 2);
    assert_eq!(rep["rewritten"][0]["removed"][0], key_path.as_str());
    assert_eq!(tagged(&f.t), snaps_before);
    // Without --forget: new snapshots tagged `rewrite`, originals kept.
    let excl = f._dir.path().join("excludes");
    write(&excl, format!("# the key\n{key_path}\n").as_bytes());
    let o = larder_ok(
        &repo,
        &cache,
        &[
            "rewrite",
            "--json",
            "--exclude-file",
            path_str(&excl),
            &f.second[..8],
        ],
    );
    let rep = &json_lines(&o.out)[0];
    let kept_new = rep["rewritten"][0]["new_snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(load(&f.t, &kept_new).tags, vec!["rewrite".to_string()]);
    assert!(snapshot_exists(&f.t, &f.second));
    // With --forget over all: originals gone, the rewritten one untouched.
    let o = larder_ok(
        &repo,
        &cache,
        &["rewrite", "--json", "--forget", "-e", &key_path],
    );
    let rep = &json_lines(&o.out)[0];
    let done = rep["rewritten"].as_array().unwrap();
    assert_eq!(done.len(), 2, "{rep}");
    let new_second = done
        .iter()
        .find(|r| r["snapshot"] == f.second.as_str())
        .unwrap()["new_snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!snapshot_exists(&f.t, &f.first) && !snapshot_exists(&f.t, &f.second));
    let old = load(&f.t, &kept_new);
    let new = load(&f.t, &new_second);
    assert_eq!(new.tree, old.tree, "same exclusion, same tree");
    assert_eq!(new.original.map(|o| o.to_hex()), Some(f.second.clone()));
    assert_eq!(old.original, new.original);
    assert!(new.tags.is_empty());
    // Unchanged subtrees keep their ids.
    assert_eq!(
        node_of(&f.t, &new_second, &f.src, "shared").subtree,
        shared_before
    );
    // find no longer sees it.
    let (got, _) = find(&f.t, &["key.pem"]);
    assert!(got.is_empty(), "{got:?}");
    // The restore is the tree minus the path.
    let target = f._dir.path().join("restored");
    let at = crate::faults::restore_cli(&repo, &cache, &new_second, &f.src, &target);
    let secret = f.src.join("secret");
    let mtime = fs::symlink_metadata(&secret).unwrap();
    fs::remove_file(secret.join("key.pem")).unwrap();
    set_mtime(&secret, mtime.mtime() * 1_000_000_000 + mtime.mtime_nsec());
    let n = assert_same_tree(&f.src, &at);
    assert!(n > 60, "{n} entries compared");
    // Forget the `rewrite`-tagged one too, prune: the key's chunks are in
    // no pack and not in the index.
    larder_ok(&repo, &cache, &["forget", &kept_new]);
    larder_ok(
        &repo,
        &cache,
        &["prune", "--keep-delete", "0s", "--max-unused", "0%"],
    );
    check_passes(&repo, &cache, true, "after rewrite and prune");
    let in_packs = blobs_in_packs(&f.t);
    let r = f.t.open().unwrap();
    for c in &key.content {
        assert!(
            !in_packs.contains(c),
            "chunk {c} of the excluded file is still in a pack"
        );
        assert!(r.lookup(c).unwrap().is_none(), "chunk {c} still indexed");
    }
    // What the other files use is still there.
    let public = node_of(&f.t, &new_second, &f.src, "secret/public.txt");
    assert!(public.content.iter().all(|c| in_packs.contains(c)));
}

#[test]
fn rewrite_killed_anywhere_leaves_a_repository_check_passes() {
    // Eight snapshots, each with its own copy of the file to exclude.
    let base = cli_repo();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    for i in 0..8u64 {
        for j in 0..30u64 {
            write(
                &src.join(format!("d{j}/f{i}")),
                &rand_bytes(i * 100 + j, 3000),
            );
        }
        write(&src.join("d7/drop.me"), &rand_bytes(9000 + i, 20_000));
        backup_ok(&base.repo_path(), &base.cache_path(), &src);
    }
    let run_copy = |delay: Option<Duration>| -> (TestRepo, bool) {
        let t = TestRepo::new();
        let out = std::process::Command::new("cp")
            .args(["-a", path_str(&base.repo_path()), path_str(&t.repo_path())])
            .output()
            .unwrap();
        assert!(out.status.success());
        let (repo, cache) = (t.repo_path(), t.cache_path());
        let mut child = spawn(larder_cmd(
            &repo,
            &cache,
            &["rewrite", "--forget", "-e", "drop.me"],
        ));
        let killed = match delay {
            Some(d) => {
                std::thread::sleep(d);
                let _ = child.kill();
                let o = wait_bounded(child, "rewrite");
                o.code == -1
            }
            None => {
                let o = wait_bounded(child, "rewrite");
                assert_eq!(o.code, 0, "{}", o.all());
                false
            }
        };
        (t, killed)
    };
    let start = std::time::Instant::now();
    let (done, _) = run_copy(None);
    let full = start.elapsed();
    // Killed after every new snapshot was saved and before any original
    // was removed (made exactly: the finished run's new objects copied into
    // a copy of the original): the rerun reuses all eight, saves none.
    let (t, _) = run_copy(Some(Duration::ZERO));
    for sub in ["snapshots", "index", "packs"] {
        let out = std::process::Command::new("cp")
            .args([
                "-an",
                &format!("{}/{sub}/.", path_str(&done.repo_path())),
                path_str(&t.repo_path().join(sub)),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(crate::faults::snapshot_names(&t.repo_path()).len(), 16);
    let o = larder_ok(
        &t.repo_path(),
        &t.cache_path(),
        &["rewrite", "--json", "--forget", "-e", "drop.me"],
    );
    let rep = &json_lines(&o.out)[0];
    let rewritten = rep["rewritten"].as_array().unwrap();
    assert_eq!(rewritten.len(), 8, "{rep}");
    assert!(
        rewritten
            .iter()
            .all(|r| r["reused"] == true && r["forgotten"] == true),
        "{rep}"
    );
    let left = crate::faults::snapshot_names(&t.repo_path());
    let saved = crate::faults::snapshot_names(&done.repo_path());
    assert_eq!(
        left, saved,
        "exactly the snapshots the uninterrupted run left"
    );
    check_passes(
        &t.repo_path(),
        &t.cache_path(),
        true,
        "after the resumed rewrite",
    );
    let mut kills = 0;
    for step in 0..10u32 {
        let (t, killed) = run_copy(Some(full * step / 10));
        kills += usize::from(killed);
        let (repo, cache) = (t.repo_path(), t.cache_path());
        // Where it stopped: snapshot objects (8 before, 16 between the
        // saves and the removals, 8 after) and whether trees were stored.
        let names = crate::faults::snapshot_names(&repo).len();
        let packs = crate::support::pack_files(&repo).0;
        eprintln!("step {step}: killed {killed}, {names} snapshot objects, {packs} packs");
        check_passes(
            &repo,
            &cache,
            false,
            &format!("after a kill at step {step}"),
        );
        // Run again: it finishes the work, saving no snapshot twice.
        larder_ok(&repo, &cache, &["rewrite", "--forget", "-e", "drop.me"]);
        let snaps = tagged(&t);
        assert_eq!(snaps.len(), 8, "step {step}: one snapshot per original");
        let (got, _) = find(&t, &["drop.me"]);
        assert!(got.is_empty(), "step {step}: {got:?}");
        check_passes(
            &repo,
            &cache,
            false,
            &format!("after the rerun at step {step}"),
        );
    }
    assert!(kills >= 1, "no kill landed on a running rewrite");
}

#[test]
fn bash_completion_offers_backup_for_ba() {
    let t = cli_repo();
    let o = larder_ok(&t.repo_path(), &t.cache_path(), &["completion", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("larder.bash");
    fs::write(&script, &o.out).unwrap();
    let probe = format!(
        "source {}\nCOMP_WORDS=(larder ba)\nCOMP_CWORD=1\nCOMP_LINE='larder ba'\nCOMP_POINT=9\n\
         _larder larder ba larder\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        path_str(&script)
    );
    let out = std::process::Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &probe])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let offered: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(String::from)
        .collect();
    assert_eq!(offered, BTreeSet::from(["backup".to_string()]));
    // The other shells' scripts name the new commands too.
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let o = larder_ok(&t.repo_path(), &t.cache_path(), &["completion", shell]);
        assert!(
            o.out.contains("rewrite") && o.out.contains("find"),
            "{shell}"
        );
    }
}

#[test]
fn manpage_writes_pages_with_the_help_text() {
    let t = cli_repo();
    let dir = tempfile::tempdir().unwrap();
    let man = dir.path().join("man1");
    larder_ok(
        &t.repo_path(),
        &t.cache_path(),
        &["manpage", path_str(&man)],
    );
    let page = |name: &str| {
        fs::read_to_string(man.join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .replace("\\-", "-")
    };
    let top = page("larder.1");
    assert!(top.contains("Deduplicating, compressed, encrypted backups"));
    let backup = page("larder-backup.1");
    let help = larder_ok(&t.repo_path(), &t.cache_path(), &["backup", "--help"]);
    let about = help.out.lines().next().unwrap();
    assert!(backup.contains(about), "{about:?} not in larder-backup.1");
    assert!(backup.contains("Exclude paths matching this pattern"));
    assert!(backup.contains("larder backup ~/Documents"), "the example");
    for name in [
        "larder-find.1",
        "larder-tag.1",
        "larder-rewrite.1",
        "larder-key-add.1",
    ] {
        assert!(man.join(name).exists(), "{name}");
    }
}

/// `rewrite --new-host/--new-time` (restic 0.17): the new snapshots carry
/// the host and time asked for and the same tree; with `--forget` the
/// originals go; run again, nothing changes; the renamed host's next
/// backup finds its parent there; nothing to change is refused.
#[test]
fn rewrite_new_host_and_time_change_only_those() {
    let f = fixture();
    let (repo, cache) = (f.t.repo_path(), f.t.cache_path());
    let before = load(&f.t, &f.second);
    let mut c = crate::common::larder(&repo, &cache);
    c.env("TZ", "UTC").args([
        "--json",
        "rewrite",
        &f.second,
        "--new-host",
        "renamed-box",
        "--new-time",
        "2020-01-02 03:04:05",
        "--forget",
    ]);
    let (code, out, err) = crate::support::run(c);
    assert_eq!(code, 0, "{out}{err}");
    let rep: serde_json::Value = serde_json::from_str(&out).unwrap();
    let new = rep["rewritten"][0]["new_snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !snapshot_exists(&f.t, &f.second),
        "the original is still there"
    );
    let after = load(&f.t, &new);
    assert_eq!(after.hostname, "renamed-box");
    assert_eq!(after.time_ns, 1_577_934_245 * 1_000_000_000);
    assert_eq!(after.tree, before.tree, "the tree changed");
    assert_eq!((&after.paths, &after.tags), (&before.paths, &before.tags));
    // Again: already so, nothing rewritten.
    let o = crate::faults::larder_ok(
        &repo,
        &cache,
        &["--json", "rewrite", &new, "--new-host", "renamed-box"],
    );
    let rep: serde_json::Value = serde_json::from_str(&o.out).unwrap();
    assert_eq!(rep["rewritten"], serde_json::json!([]), "{rep}");
    // The renamed machine's next backup takes it as its parent.
    let o = crate::faults::larder_ok(
        &repo,
        &cache,
        &[
            "backup",
            "--json",
            "--host",
            "renamed-box",
            path_str(&f.src),
        ],
    );
    let s = crate::support::json_lines(&o.out).pop().unwrap();
    assert_eq!(s["parent"], new.as_str(), "{s}");
    assert_eq!(s["files_unmodified"], s["total_files_processed"], "{s}");
    let o = crate::faults::larder_run(&repo, &cache, &["rewrite", &f.first]);
    assert!(
        o.code == 1 && o.err.contains("nothing to change"),
        "{}",
        o.all()
    );
    crate::faults::check_passes(&repo, &cache, true, "after the metadata rewrite");
}
