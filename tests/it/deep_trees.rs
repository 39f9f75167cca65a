//! Trees nested deeper than any real directory (crafted storage, or a
//! tree built below `PATH_MAX` with relative paths): every command that
//! walks a snapshot's trees reads one whose deepest tree lies exactly at
//! `tree::MAX_DEPTH`, and one a level deeper is a clear error naming the
//! limit (or, for `repair snapshots`, a cut there), never a stack
//! overflow; `check` names it; a backup of a deeper tree on disk leaves
//! the excess out with a warning and saves a snapshot every command reads.

use crate::common::{PASS, TestRepo, init_at};
use crate::faults::{Out, backup_ok, larder_run};
use crate::support::{json_lines, path_str};
use larder::pack::BlobType;
use larder::packer::Packer;
use larder::snapshot::{self, Snapshot, Summary};
use larder::tree::{MAX_DEPTH, Node, NodeKind, Tree};
use std::path::Path;

/// A snapshot of `/deep`: `levels` directories each inside the one
/// before, the file `f` at the bottom (so its tree is at depth `levels +
/// 1`). Returns the repository's test fixture and the snapshot's id.
fn deep_snapshot(levels: usize) -> (TestRepo, String) {
    deep_snapshot_named(levels, |i| format!("d{}", i % 10))
}

/// [`deep_snapshot`] with the directories named by `name`.
fn deep_snapshot_named(levels: usize, name: impl Fn(usize) -> String) -> (TestRepo, String) {
    let t = TestRepo::new();
    let repo = t.init();
    let mut p = Packer::new(&repo).unwrap();
    let (data, _) = p.add(BlobType::Data, b"at the bottom").unwrap();
    let mut file = Node::made_up(b"f".to_vec(), NodeKind::File, 0o644);
    file.size = 13;
    file.content = vec![data];
    let mut tree = Tree { nodes: vec![file] };
    for i in 0..levels {
        let (id, _) = p.add(BlobType::Tree, &tree.encode().unwrap()).unwrap();
        let mut dir = Node::made_up(name(i).into_bytes(), NodeKind::Dir, 0o755);
        dir.subtree = Some(id);
        tree = Tree { nodes: vec![dir] };
    }
    let (root, _) = p.add(BlobType::Tree, &tree.encode().unwrap()).unwrap();
    p.finish().unwrap();
    let id = save_root(&t, repo, root, "/deep");
    (t, id)
}

/// Saves a snapshot of `path` with root tree `root` and drops the
/// library's cache (the commands use their own); the snapshot's id.
fn save_root(t: &TestRepo, repo: larder::Repository, root: larder::Id, path: &str) -> String {
    let snap = Snapshot::by_this_process(
        1_700_000_000_000_000_000,
        "host".into(),
        vec![path.into()],
        Vec::new(),
        root,
        None,
        Summary::default(),
    );
    let id = snapshot::save(&repo, &snap).unwrap().to_hex();
    drop(repo);
    std::fs::remove_dir_all(t.cache_path()).unwrap();
    id
}

/// The commands that walk the snapshot's trees, each run on `t`'s
/// repository (copy: into a second one); each output with its arguments.
fn walks(t: &TestRepo, id: &str) -> Vec<(String, Out)> {
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let other = t.dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let other_id = backup_ok(&repo, &cache, &other);
    let target = t.dir.path().join("target");
    let pass = t.dir.path().join("pass");
    std::fs::write(&pass, PASS).unwrap();
    let copy_repo = t.dir.path().join("copy-repo");
    let copy_cache = t.dir.path().join("copy-cache");
    drop(init_at(&copy_repo, &copy_cache));
    let cmds: Vec<Vec<&str>> = vec![
        vec!["ls", id],
        vec!["ls", "--ncdu", id],
        vec!["find", "f"],
        vec!["stats", id],
        vec!["diff", &other_id, id],
        vec!["dump", "--archive", "tar", id, "/"],
        vec!["dump", "--archive", "zip", id, "/"],
        vec!["restore", id, "--target", path_str(&target)],
        vec!["rewrite", "--dry-run", "-e", "/nothing", id],
    ];
    let mut out: Vec<(String, Out)> = cmds
        .into_iter()
        .map(|a| (a.join(" "), larder_run(&repo, &cache, &a)))
        .collect();
    let from = [
        "--from-repo",
        path_str(&repo),
        "--from-password-file",
        path_str(&pass),
    ];
    let o = larder_run(
        &copy_repo,
        &copy_cache,
        &[&["copy"], &from[..], &[id]].concat(),
    );
    out.push(("copy".into(), o));
    out
}

#[test]
fn a_tree_at_the_depth_limit_is_read_by_every_command() {
    let (t, id) = deep_snapshot(MAX_DEPTH - 1);
    let (repo, cache) = (t.repo_path(), t.cache_path());
    for (what, o) in walks(&t, &id) {
        assert_eq!(
            o.code,
            0,
            "{what}: {}",
            o.all().chars().take(2000).collect::<String>()
        );
        let bottom = "/d0/f";
        match what.as_str() {
            w if w.starts_with("ls --ncdu") => {
                // Too deep for serde_json's parser: the nesting, counted
                // (the outer array, the root, a level each, the bottom's).
                let mut deepest = 0;
                let mut now = 0i64;
                for c in o.out.chars() {
                    match c {
                        '[' => now += 1,
                        ']' => now -= 1,
                        _ => {}
                    }
                    deepest = deepest.max(now);
                }
                assert_eq!((now, deepest), (0, MAX_DEPTH as i64 + 1), "{what}");
                assert!(o.out.starts_with("[1,2,{"), "{what}");
            }
            w if w.starts_with("ls ") => assert!(o.out.trim_end().ends_with(&bottom), "{what}"),
            "find f" => assert!(
                o.out.trim_end().ends_with(&bottom),
                "{what}: {}",
                o.out.len()
            ),
            _ => {}
        }
    }
    let c = larder_run(&repo, &cache, &["check"]);
    assert_eq!(c.code, 0, "{}", c.all());
    let r = larder_run(
        &repo,
        &cache,
        &["--json", "repair", "snapshots", "--dry-run"],
    );
    assert_eq!(r.code, 0, "{}", r.all());
    let report = json_lines(&r.out).pop().unwrap();
    assert_eq!(report["repaired"], serde_json::json!([]), "{report}");
}

#[test]
fn a_tree_one_level_deeper_is_a_clear_error_and_repair_cuts_it() {
    let (t, id) = deep_snapshot(MAX_DEPTH);
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let says = format!("nested more than {MAX_DEPTH} levels deep");
    for (what, o) in walks(&t, &id) {
        assert!(
            (1..=3).contains(&o.code) && o.err.contains(&says),
            "{what}: {}",
            o.all().chars().take(2000).collect::<String>()
        );
    }
    let c = larder_run(&repo, &cache, &["check"]);
    assert!(c.code == 1 && c.err.contains(&says), "{}", c.all());

    let r = larder_run(&repo, &cache, &["--json", "repair", "snapshots", &id]);
    assert_eq!(r.code, 0, "{}", r.all());
    let report = json_lines(&r.out).pop().unwrap();
    let new = report["repaired"][0]["new_snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    let ls = larder_run(&repo, &cache, &["ls", &new]);
    assert_eq!(ls.code, 0, "{}", ls.all());
    let deepest = ls.out.lines().last().unwrap();
    assert_eq!(deepest.matches('/').count(), MAX_DEPTH - 1, "{deepest}");
}

/// A directory tree on disk deeper than the limit (made with relative
/// paths, as `PATH_MAX` stops absolute ones): the backup saves what lies
/// within the limit and warns about the rest (exit 3), and the snapshot
/// reads everywhere.
#[test]
fn a_backup_of_a_deeper_tree_on_disk_leaves_the_excess_out() {
    let t = TestRepo::new();
    drop(t.init());
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    {
        use rustix::fs::{Mode, OFlags, mkdirat, openat};
        let mut dir =
            rustix::fs::open(&src, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
        for _ in 0..MAX_DEPTH + 10 {
            mkdirat(&dir, "d", Mode::from_raw_mode(0o755)).unwrap();
            dir = openat(&dir, "d", OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
        }
        let f = openat(
            &dir,
            "f",
            OFlags::CREATE | OFlags::WRONLY,
            Mode::from_raw_mode(0o644),
        )
        .unwrap();
        rustix::io::write(&f, b"bottom").unwrap();
    }
    let o = larder_run(&repo, &cache, &["backup", "--json", path_str(&src)]);
    assert_eq!(
        o.code,
        3,
        "{}",
        o.all().chars().take(2000).collect::<String>()
    );
    assert!(
        o.all()
            .contains(&format!("nested more than {MAX_DEPTH} levels deep"))
    );
    let id = json_lines(&o.out).pop().unwrap()["snapshot_id"]
        .as_str()
        .unwrap()
        .to_string();
    let ls = larder_run(&repo, &cache, &["ls", &id]);
    assert_eq!(
        ls.code,
        0,
        "{}",
        ls.all().chars().take(2000).collect::<String>()
    );
    let deepest = ls.out.lines().last().unwrap();
    assert_eq!(
        deepest.matches('/').count(),
        MAX_DEPTH - 1,
        "{}",
        deepest.len()
    );
    let c = larder_run(&repo, &cache, &["check"]);
    assert_eq!(c.code, 0, "{}", c.all());
    assert!(Path::new(&src).exists());
}

/// A subtree reached twice, once where it fits under the limit and once
/// far deeper: `find` reports its match where it fits, and the deeper
/// place as too deep (a search that reused the first result there would
/// report a match beyond the limit, and could nest results without end).
#[test]
fn find_reuses_a_subtree_only_where_it_fits() {
    let t = TestRepo::new();
    let repo = t.init();
    let mut p = Packer::new(&repo).unwrap();
    let (data, _) = p.add(BlobType::Data, b"x").unwrap();
    let mut file = Node::made_up(b"f".to_vec(), NodeKind::File, 0o644);
    file.size = 1;
    file.content = vec![data];
    let mut store = |nodes: Vec<Node>| {
        p.add(BlobType::Tree, &Tree { nodes }.encode().unwrap())
            .unwrap()
            .0
    };
    let dir = |name: &str, sub| {
        let mut d = Node::made_up(name.as_bytes().to_vec(), NodeKind::Dir, 0o755);
        d.subtree = Some(sub);
        d
    };
    // X: a chain whose file lies MAX_DEPTH - 5 levels below X's own tree.
    let mut x = store(vec![file]);
    for _ in 0..MAX_DEPTH - 6 {
        x = store(vec![dir("c", x)]);
    }
    // b/d/d/…/X, with X 100 levels down.
    let mut deep = x;
    for _ in 0..100 {
        deep = store(vec![dir("d", deep)]);
    }
    let root = store(vec![dir("a", x), dir("b", deep)]);
    p.finish().unwrap();
    let id = save_root(&t, repo, root, "/twice");
    let o = larder_run(
        &t.repo_path(),
        &t.cache_path(),
        &["--json", "find", "f", "-s", &id],
    );
    let lines = json_lines(&o.out);
    let matches: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["message_type"] == "match")
        .collect();
    assert_eq!(
        matches.len(),
        1,
        "{}",
        o.err.chars().take(500).collect::<String>()
    );
    assert!(matches[0]["path"].as_str().unwrap().starts_with("/a/c/"));
    let summary = lines.last().unwrap();
    let unreadable = summary["unreadable"].as_array().unwrap();
    assert_eq!(unreadable.len(), 1, "{summary}");
    assert!(
        unreadable[0].as_str().unwrap().starts_with("/b/d/"),
        "{summary}"
    );
    assert!(
        unreadable[0].as_str().unwrap().contains("nested more than"),
        "{summary}"
    );
    assert_eq!(o.code, 1, "{}", o.err.chars().take(500).collect::<String>());
}

/// Crafted names that add nothing to a path (empty, `.`) or more than one
/// level (`a/b`) do not hide a tree's depth: each command counts levels,
/// not path components.
#[test]
fn crafted_names_do_not_hide_the_depth() {
    for name in ["", ".", "a/b"] {
        let (t, id) = deep_snapshot_named(MAX_DEPTH, |_| name.to_string());
        let (repo, cache) = (t.repo_path(), t.cache_path());
        let says = format!("nested more than {MAX_DEPTH} levels deep");
        for args in [
            vec!["dump", "--archive", "tar", &id, "/"],
            vec!["dump", "--archive", "zip", &id, "/"],
            vec!["ls", &id],
            vec!["stats", &id],
            vec!["find", "f"],
        ] {
            let o = larder_run(&repo, &cache, &args);
            assert!(
                (1..=3).contains(&o.code) && o.err.contains(&says),
                "{name:?} {args:?}: {}",
                o.all().chars().take(1000).collect::<String>()
            );
        }
        let r = larder_run(
            &repo,
            &cache,
            &["--json", "repair", "snapshots", "--dry-run"],
        );
        assert_eq!(
            r.code,
            0,
            "{name:?}: {}",
            r.all().chars().take(1000).collect::<String>()
        );
        let changes = json_lines(&r.out);
        assert!(
            changes
                .iter()
                .any(|c| c["change"]["action"] == "dir-removed"),
            "{name:?}: {}",
            r.out.chars().take(1000).collect::<String>()
        );
    }
}
