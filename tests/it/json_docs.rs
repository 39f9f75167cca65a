//! Issue 14: every command that prints data has a documented `--json`
//! schema. This runs each such command through the `larder` binary on a
//! small repository, parses what it prints, collects every object key at
//! any depth, and requires each key to be named (as `` `key` ``) in
//! `docs/json.md`. A field added later without documentation fails here.

use crate::common::{self, PASS, TestRepo, larder_bin};
use crate::support::{cli, json_lines, path_str, rand_bytes, run, write};
use larder::snapshot::{self, Filter};
use larder::walker;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// Every key of every object in `v`, at any depth.
fn collect_keys(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                out.insert(k.clone());
                collect_keys(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_keys(x, out)),
        _ => {}
    }
}

/// What the commands printed: for each key, the commands that printed it.
#[derive(Default)]
struct Seen {
    keys: BTreeMap<String, BTreeSet<String>>,
    commands: Vec<String>,
}

impl Seen {
    /// Records the JSON lines of `text` as printed by `what`; each line must
    /// parse and the command must print at least one object key.
    fn add(&mut self, what: &str, text: &str) -> Vec<Value> {
        let values = json_lines(text);
        let mut keys = BTreeSet::new();
        values.iter().for_each(|v| collect_keys(v, &mut keys));
        assert!(
            !keys.is_empty(),
            "`{what}` printed no JSON object keys:\n{text}"
        );
        for k in keys {
            self.keys.entry(k).or_default().insert(what.to_string());
        }
        self.commands.push(what.to_string());
        values
    }
}

/// `larder --json ARGS` on the test repository; must exit `want`; records
/// and returns what it printed on stdout.
fn json_cli(seen: &mut Seen, t: &TestRepo, args: &[&str], want: i32) -> Vec<Value> {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let (out, _) = cli(&t.repo_path(), &t.cache_path(), &full, want);
    let words = if matches!(args[0], "key" | "repair") {
        2
    } else {
        1
    };
    seen.add(&args[..words].join(" "), &out)
}

/// The first data blob of any file in the newest snapshot.
fn some_blob(t: &TestRepo) -> String {
    let repo = t.open().unwrap();
    let (list, _) = snapshot::list(&repo, &Filter::default()).unwrap();
    let (_, snap) = list.last().unwrap();
    let mut blob = None;
    walker::walk(&repo, snap.tree, None, &mut |_, n| {
        if blob.is_none() {
            blob = n.content.first().map(|i| i.to_hex());
        }
    })
    .unwrap();
    blob.expect("a file with content")
}

/// The repository-level commands: init, backup, snapshots, ls, diff (two
/// snapshots and a live tree), find, dump, stats, check, tag, rewrite,
/// forget, prune, restore, key, unlock, cache, recover, repair, manpage.
fn repository_commands(seen: &mut Seen, t: &TestRepo, src: &Path, work: &Path) {
    let srcs = path_str(src);
    let init = json_cli(seen, t, &["init"], 0);
    assert_eq!(init[0]["id"].as_str().map(str::len), Some(64), "{init:?}");
    let first = json_cli(seen, t, &["backup", srcs], 0);
    let summary = first.last().unwrap();
    assert_eq!(summary["message_type"], "summary", "{first:?}");
    assert!(
        first.iter().any(|v| v["message_type"] == "status"),
        "{first:?}"
    );
    let first_id = summary["snapshot_id"].as_str().unwrap().to_string();

    write(&src.join("a.txt"), b"changed text");
    write(&src.join("new.txt"), b"a new file");
    std::fs::set_permissions(
        src.join("sub/b.bin"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    json_cli(seen, t, &["backup", "--tag", "two", srcs], 0);

    let snaps = json_cli(seen, t, &["snapshots"], 0);
    assert_eq!(snaps[0].as_array().map(Vec::len), Some(2), "{snaps:?}");
    let groups = json_cli(seen, t, &["snapshots", "--group-by", "host,paths,tags"], 0);
    assert_eq!(groups[0].as_array().map(Vec::len), Some(2), "{groups:?}");
    json_cli(seen, t, &["ls", "latest"], 0);
    json_cli(seen, t, &["diff", "--metadata", &first_id, "latest"], 0);
    std::fs::remove_file(src.join("new.txt")).unwrap();
    json_cli(seen, t, &["diff", "latest", srcs], 0);
    let found = json_cli(seen, t, &["find", "*.txt"], 0);
    assert!(
        found.iter().any(|v| v["message_type"] == "match"),
        "{found:?}"
    );
    let blob = some_blob(t);
    let by_blob = json_cli(seen, t, &["find", "--blob", &blob], 0);
    assert!(by_blob.iter().any(|v| v.get("id").is_some()), "{by_blob:?}");
    let a_txt = format!("{srcs}/a.txt");
    let dumped = work.join("dumped.txt");
    json_cli(
        seen,
        t,
        &["dump", "latest", &a_txt, "--target", path_str(&dumped)],
        0,
    );
    for mode in ["restore-size", "raw-data", "blobs-per-file", "repository"] {
        json_cli(seen, t, &["stats", "--mode", mode], 0);
    }
    let check = json_cli(seen, t, &["check", "--read-data"], 0);
    assert!(check[0]["verified"].is_object(), "{check:?}");
    json_cli(seen, t, &["tag", "--add", "extra", "latest"], 0);
    // The replacement `tag` wrote names its original.
    let snaps = json_cli(seen, t, &["snapshots"], 0);
    let originals = snaps[0].as_array().unwrap().iter();
    assert_eq!(
        originals.filter(|s| s.get("original").is_some()).count(),
        1,
        "{snaps:?}"
    );
    json_cli(seen, t, &["rewrite", "--dry-run", "--exclude", "*.bin"], 0);
    let forget = json_cli(seen, t, &["forget", "--keep-last", "1", "--dry-run"], 0);
    assert!(forget[0][0]["reasons"].is_array(), "{forget:?}");
    json_cli(seen, t, &["prune", "--dry-run"], 0);
    let target = work.join("restored");
    json_cli(
        seen,
        t,
        &["restore", "latest", "--target", path_str(&target)],
        0,
    );
    json_cli(seen, t, &["key", "list"], 0);
    let pass2 = work.join("pass2");
    write(&pass2, b"another passphrase\n");
    json_cli(
        seen,
        t,
        &["key", "add", "--new-password-file", path_str(&pass2)],
        0,
    );
    json_cli(seen, t, &["unlock"], 0);
    let v = json_cli(seen, t, &["version"], 0);
    assert_eq!(v[0]["version"], env!("CARGO_PKG_VERSION"), "{v:?}");
    assert_eq!(v[0]["format_version"], 5, "{v:?}");
    let caches = json_cli(seen, t, &["cache"], 0);
    assert_eq!(caches[0].as_array().map(Vec::len), Some(1), "{caches:?}");
    json_cli(seen, t, &["cache", "--cleanup", "--max-age", "100000"], 0);
    let rec = json_cli(seen, t, &["recover", "--dry-run"], 0);
    assert!(rec[0]["lost"].is_array(), "{rec:?}");
    json_cli(seen, t, &["repair", "index"], 0);
    let (packs, _) = cli(&t.repo_path(), &t.cache_path(), &["list", "packs"], 0);
    let pack = packs.lines().next().unwrap().to_string();
    let rp = json_cli(seen, t, &["repair", "packs", &pack], 0);
    assert_eq!(rp[0]["packs"][0]["outcome"], "intact", "{rp:?}");
    json_cli(seen, t, &["repair", "snapshots", "--dry-run"], 0);
    let man = work.join("man");
    json_cli(seen, t, &["manpage", path_str(&man)], 0);
}

/// `copy` of the repository's snapshots into a second repository.
fn copy_command(seen: &mut Seen, t: &TestRepo, work: &Path) {
    let dst = work.join("dst-repo");
    let cache = work.join("dst-cache");
    cli(&dst, &cache, &["init"], 0);
    let mut c = common::larder(&dst, &cache);
    c.env("LARDER_FROM_PASSWORD", PASS)
        .args(["--json", "copy", "--from-repo"])
        .arg(t.repo_path());
    let (code, out, err) = run(c);
    assert_eq!(code, 0, "copy: {out}{err}");
    let rep = seen.add("copy", &out);
    assert!(!rep[0]["copied"].as_array().unwrap().is_empty(), "{out}");
}

/// `config check`, `run` and `schedule status` of one profile.
fn schedule_commands(seen: &mut Seen, t: &TestRepo, src: &Path, work: &Path) {
    let pass = work.join("pass");
    write(&pass, format!("{PASS}\n").as_bytes());
    std::fs::set_permissions(&pass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = work.join("larder.toml");
    let profile = format!(
        "[profile.home]\nrepository = {:?}\npassword-file = {:?}\npaths = [{:?}]\n\
         retries = 0\nschedule = \"daily\"\nkeep-last = 5\nprune = \"weekly\"\n\
         check = \"monthly\"\ncheck-subset = \"5%\"\n",
        path_str(&t.repo_path()),
        path_str(&pass),
        path_str(src),
    );
    std::fs::write(&config, profile).unwrap();
    let larder = |args: &[&str]| {
        let mut c = Command::new(larder_bin());
        c.env("LARDER_CONFIG", &config)
            .env("LARDER_STATE_DIR", work.join("state"))
            .env("LARDER_CACHE_DIR", t.cache_path())
            .env("HOME", work)
            .stdin(Stdio::null())
            .args(args);
        for v in [
            "LARDER_PASSWORD",
            "LARDER_PASSWORD_FILE",
            "LARDER_REPOSITORY",
        ] {
            c.env_remove(v);
        }
        run(c)
    };
    let (code, out, err) = larder(&["--json", "config", "check"]);
    assert_eq!(code, 0, "config check: {out}{err}");
    seen.add("config check", &out);
    let (code, out, err) = larder(&["--json", "run", "home"]);
    assert_eq!(code, 0, "run: {out}{err}");
    let ran = seen.add("run", &out);
    assert_eq!(ran[0]["result"], "ok", "{out}");
    let (code, out, err) = larder(&["--json", "schedule", "status"]);
    assert!(code == 0 || code == 1, "schedule status: {out}{err}");
    let status = seen.add("schedule status", &out);
    assert!(status[0][0]["last-run"].is_object(), "{out}");
}

/// Every key the `--json` commands print is named in docs/json.md.
#[test]
fn every_json_key_is_documented() {
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let t = TestRepo::new();
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    write(&src.join("a.txt"), b"some text");
    write(&src.join("sub/b.bin"), &rand_bytes(14, 100_000));
    std::os::unix::fs::symlink("a.txt", src.join("link")).unwrap();

    let mut seen = Seen::default();
    repository_commands(&mut seen, &t, &src, work.path());
    copy_command(&mut seen, &t, work.path());
    schedule_commands(&mut seen, &t, &src, work.path());

    // The check itself can fail: a name the documentation does not hold.
    assert!(!doc.contains("`no_such_field_anywhere`"));
    let missing: Vec<String> = seen
        .keys
        .iter()
        .filter(|(k, _)| !doc.contains(&format!("`{k}`")))
        .map(|(k, by)| {
            let by: Vec<&str> = by.iter().map(String::as_str).collect();
            format!("`{k}` (printed by {})", by.join(", "))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "keys printed with --json but not named in {}:\n{}",
        doc_path.display(),
        missing.join("\n")
    );
    eprintln!(
        "{} distinct keys from {} commands are documented",
        seen.keys.len(),
        seen.commands.len()
    );
}
