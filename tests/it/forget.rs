//! `larder forget` and `larder backup --time` through the CLI: restic's
//! documented examples on snapshots made with `--time`, the `--json` shape,
//! dry runs, filters and named snapshots, refused policies, `--group-by`,
//! unreadable snapshot objects, forget beside a paused backup, and forget
//! killed with SIGKILL. The policy's rules themselves are checked in
//! `forget_policy` (against restic's binary).

use crate::common::{self, TestRepo};
use crate::support::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Europe/Berlin's rules as a POSIX TZ string (no tz database needed):
/// `--time` and the policy's calendar buckets use the local zone.
const BERLIN: &str = "CET-1CEST,M3.5.0,M10.5.0/3";

/// A repository used through the CLI, with source directories beside it.
struct Env {
    t: TestRepo,
    base: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let t = TestRepo::new();
        drop(t.init());
        fs::remove_dir_all(t.cache_path()).unwrap();
        Env {
            t,
            base: tempfile::tempdir().unwrap(),
        }
    }

    /// A source directory `name` holding one small file.
    fn src(&self, name: &str) -> PathBuf {
        let p = self.base.path().join(name);
        if !p.exists() {
            write(&p.join("file.txt"), name.as_bytes());
        }
        p
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = common::larder(&self.t.repo_path(), &self.t.cache_path());
        c.env("TZ", BERLIN).args(args);
        c
    }

    /// Runs larder; returns (exit code, stdout, stderr).
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        run(self.cmd(args))
    }

    /// Runs larder and insists on exit code `want`; returns stdout.
    fn ok(&self, args: &[&str], want: i32) -> String {
        let (code, out, err) = self.run(args);
        assert_eq!(
            code, want,
            "larder {args:?}\nstdout:\n{out}\nstderr:\n{err}"
        );
        out
    }

    /// `backup --time TIME --host HOST [--tag T]... PATH`; returns the id.
    fn backup_at(&self, host: &str, path: &Path, time: &str, tags: &[&str]) -> String {
        let mut args = vec!["backup", "--json", "--host", host, "--time", time];
        for t in tags {
            args.extend(["--tag", t]);
        }
        args.push(path_str(path));
        let out = self.ok(&args, 0);
        let summary = json_lines(&out).pop().unwrap();
        summary["snapshot_id"].as_str().unwrap().to_string()
    }

    /// The snapshot objects in the repository, read from the directory.
    fn objects(&self) -> BTreeSet<String> {
        fs::read_dir(self.t.repo_path().join("snapshots"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.len() == 64)
            .collect()
    }

    /// `forget ARGS --json`, parsed.
    fn forget_json(&self, args: &[&str]) -> Vec<Value> {
        let mut all = vec!["forget", "--json"];
        all.extend(args);
        let out = self.ok(&all, 0);
        serde_json::from_str::<Value>(out.trim())
            .unwrap_or_else(|e| panic!("not JSON: {out:?}: {e}"))
            .as_array()
            .unwrap()
            .clone()
    }
}

fn set_of(ids: &[&String]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

/// The ids of a JSON list of snapshots (`null` is the empty list).
fn ids(list: &Value) -> Vec<String> {
    match list {
        Value::Null => Vec::new(),
        v => v
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect(),
    }
}

fn short(id: &str) -> &str {
    &id[..8]
}

/// restic's documentation: one backup every Sunday for 12 weeks, then
/// `forget --keep-daily 4` keeps the last four Sundays and removes the
/// other eight; the tables say why each kept one is kept.
#[test]
fn doc_twelve_sundays_keep_daily_4() {
    let e = Env::new();
    let work = e.src("work");
    let sundays = [
        "2019-09-01",
        "2019-09-08",
        "2019-09-15",
        "2019-09-22",
        "2019-09-29",
        "2019-10-06",
        "2019-10-13",
        "2019-10-20",
        "2019-10-27",
        "2019-11-03",
        "2019-11-10",
        "2019-11-17",
    ];
    let made: Vec<String> = sundays
        .iter()
        .map(|d| e.backup_at("mopped", &work, &format!("{d} 11:00:00"), &[]))
        .collect();
    let out = e.ok(&["forget", "--keep-daily", "4"], 0);
    assert_eq!(e.objects(), set_of(&made[8..].iter().collect::<Vec<_>>()));
    assert!(
        out.contains("Applying policy: keep 4 daily snapshots"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "snapshots for (host [mopped], paths [{}]):",
            path_str(&work)
        )),
        "{out}"
    );
    let (keep, remove) = out.split_once("remove 8 snapshots:").unwrap();
    assert!(keep.contains("keep 4 snapshots:"), "{out}");
    for (i, id) in made.iter().enumerate() {
        let row = out
            .lines()
            .find(|l| l.starts_with(short(id)))
            .unwrap_or_else(|| panic!("no row for {id}:\n{out}"));
        // The table shows the local time given to --time.
        assert!(row.contains(&format!("{} 11:00:00", sundays[i])), "{row}");
        if i >= 8 {
            assert!(
                keep.contains(row) && row.contains("daily snapshot"),
                "{row}"
            );
        } else {
            assert!(remove.contains(row) && !row.contains("daily"), "{row}");
        }
    }
    assert!(out.trim_end().ends_with("removed 8 snapshots"), "{out}");
}

/// restic's documentation, "Remove a single snapshot": the snapshot of
/// /home/art named by its short id goes, nothing else; then
/// `--keep-last 1` applies to each host-and-paths group on its own.
#[test]
fn doc_remove_one_snapshot_then_keep_last_per_group() {
    let e = Env::new();
    let (work, art, srv) = (e.src("work"), e.src("art"), e.src("srv"));
    let k1 = e.backup_at("kasimir", &work, "2015-05-08 21:38:30", &[]);
    let k2 = e.backup_at("kasimir", &work, "2015-05-08 21:40:19", &[]);
    let art_id = e.backup_at("luigi", &art, "2015-05-08 21:45:17", &[]);
    let kazik = e.backup_at("kazik", &srv, "2015-05-08 21:47:38", &[]);
    let luigi = e.backup_at("luigi", &srv, "2015-05-08 21:46:11", &[]);
    let out = e.ok(&["forget", short(&art_id)], 0);
    assert!(out.contains("remove 1 snapshots:"), "{out}");
    assert_eq!(e.objects(), set_of(&[&k1, &k2, &kazik, &luigi]));

    e.ok(&["forget", "--keep-last", "1"], 0);
    assert_eq!(e.objects(), set_of(&[&k2, &kazik, &luigi]));
}

/// `--keep-within` keeps what lies within the duration before the newest
/// snapshot, `--keep-tag` what has the tags, each with its reason.
#[test]
fn doc_keep_within_and_keep_tag() {
    let e = Env::new();
    let work = e.src("work");
    let days = ["01", "03", "05", "07", "09", "11"];
    let made: Vec<String> = days
        .iter()
        .map(|d| {
            let tags: &[&str] = if *d == "01" { &["manual"] } else { &[] };
            e.backup_at("h", &work, &format!("2019-11-{d} 11:00:00"), tags)
        })
        .collect();
    let groups = e.forget_json(&["--keep-within", "5d", "--keep-tag", "manual"]);
    assert_eq!(groups.len(), 1);
    let reasons: Vec<(String, Vec<String>)> = groups[0]["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let m = r["matches"].as_array().unwrap();
            (
                r["snapshot"]["id"].as_str().unwrap().to_string(),
                m.iter().map(|s| s.as_str().unwrap().to_string()).collect(),
            )
        })
        .collect();
    // 11 Nov 11:00 minus 5 days is 6 Nov 11:00: the 7th, 9th and 11th.
    let within = vec!["within 5d".to_string()];
    assert_eq!(
        reasons,
        vec![
            (made[5].clone(), within.clone()),
            (made[4].clone(), within.clone()),
            (made[3].clone(), within),
            (made[0].clone(), vec!["has tags [manual]".to_string()]),
        ]
    );
    assert_eq!(
        ids(&groups[0]["remove"]),
        vec![made[2].clone(), made[1].clone()]
    );
    assert_eq!(
        e.objects(),
        set_of(&[&made[0], &made[3], &made[4], &made[5]])
    );
}

/// `--json` is restic's shape: an array of groups, each with its key
/// (`host`, `paths`, `tags`), `keep` and `remove` newest first, and one
/// `reasons` entry per kept snapshot; snapshots carry restic's fields with
/// the time in the local zone. Named snapshots come as one keyless group.
#[test]
fn json_report_has_restics_shape() {
    let e = Env::new();
    let (a, b) = (e.src("a"), e.src("b"));
    let a1 = e.backup_at("alpha", &a, "2020-03-01 10:00:00", &["x"]);
    let a2 = e.backup_at("alpha", &a, "2020-03-02 10:00:00", &[]);
    let a3 = e.backup_at("alpha", &a, "2020-07-03 10:00:00", &[]);
    let b1 = e.backup_at("beta", &b, "2020-03-01T09:00:00Z", &[]);
    let groups = e.forget_json(&["--keep-last", "2"]);
    assert_eq!(groups.len(), 2);
    let keys: BTreeSet<&str> = groups[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["host", "keep", "paths", "reasons", "remove", "tags"]
            .into_iter()
            .collect()
    );
    let alpha = &groups[0];
    assert_eq!(alpha["host"], "alpha");
    assert_eq!(alpha["paths"], serde_json::json!([path_str(&a)]));
    assert_eq!(alpha["tags"], Value::Null);
    assert_eq!(ids(&alpha["keep"]), vec![a3.clone(), a2.clone()]);
    assert_eq!(ids(&alpha["remove"]), vec![a1.clone()]);
    let reasons = alpha["reasons"].as_array().unwrap();
    assert_eq!(reasons.len(), 2);
    for (r, id) in reasons.iter().zip([&a3, &a2]) {
        assert_eq!(r["snapshot"]["id"], id.as_str());
        assert_eq!(r["matches"], serde_json::json!(["last snapshot"]));
    }
    assert_eq!(reasons[0]["counters"]["last"], 1);
    let removed = &alpha["remove"][0];
    assert_eq!(removed["short_id"], short(&a1));
    assert_eq!(removed["hostname"], "alpha");
    assert_eq!(removed["tags"], serde_json::json!(["x"]));
    // Berlin: +01:00 in March, +02:00 in July.
    assert_eq!(removed["time"], "2020-03-01T10:00:00+01:00");
    assert_eq!(alpha["keep"][0]["time"], "2020-07-03T10:00:00+02:00");
    let beta = &groups[1];
    assert_eq!(beta["host"], "beta");
    assert_eq!(ids(&beta["keep"]), vec![b1.clone()]);
    assert_eq!(beta["remove"], Value::Null);
    assert_eq!(beta["keep"][0]["time"], "2020-03-01T10:00:00+01:00");
    assert_eq!(e.objects(), set_of(&[&a2, &a3, &b1]));

    let named = e.forget_json(&[short(&b1)]);
    assert_eq!(named.len(), 1);
    assert_eq!(named[0]["host"], "");
    assert_eq!(named[0]["paths"], Value::Null);
    assert_eq!(named[0]["keep"], Value::Null);
    assert_eq!(named[0]["reasons"], Value::Null);
    assert_eq!(ids(&named[0]["remove"]), vec![b1.clone()]);
    assert_eq!(e.objects(), set_of(&[&a2, &a3]));
}

/// `--dry-run` reports exactly what a real run then does, and removes
/// nothing itself.
#[test]
fn dry_run_removes_nothing() {
    let e = Env::new();
    let work = e.src("work");
    let made: Vec<String> = (1..=4)
        .map(|d| e.backup_at("h", &work, &format!("2021-01-0{d} 08:00:00"), &[]))
        .collect();
    let before = e.objects();
    let out = e.ok(&["forget", "--dry-run", "--keep-last", "1"], 0);
    assert!(out.contains("remove 3 snapshots:"), "{out}");
    assert!(
        out.contains("dry run: would remove 3 snapshots; nothing was removed"),
        "{out}"
    );
    assert_eq!(e.objects(), before);
    let planned = e.forget_json(&["-n", "--keep-last", "1"]);
    assert_eq!(e.objects(), before);
    let out = e.ok(&["forget", "-n", short(&made[0]), "latest"], 0);
    assert!(out.contains("remove 2 snapshots:"), "{out}");
    assert_eq!(e.objects(), before);

    let done = e.forget_json(&["--keep-last", "1"]);
    assert_eq!(done, planned);
    assert_eq!(e.objects(), set_of(&[&made[3]]));
}

/// A forget that waited for the lock takes its "now" when it lists the
/// snapshots, as restic does: a backup that ended during the wait is the
/// latest snapshot, not one in the future, and `--keep-within 1h` counts
/// back from it (before, from the newest older one, keeping more).
#[test]
fn keep_within_counts_from_a_backup_made_while_forget_waited() {
    let e = Env::new();
    let p = e.src("p");
    let ago = |minutes: u32| {
        let out = Command::new("date")
            .env("TZ", BERLIN)
            .args([format!("--date=-{minutes} min"), "+%F %T".to_string()])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let _old = e.backup_at("h", &p, &ago(150), &[]);
    let _mid = e.backup_at("h", &p, &ago(100), &[]);
    let holder = common::lib_open(&e.t.repo_path(), &e.base.path().join("holder-cache"));
    let guard = holder.lock_snapshots().unwrap();
    let mut forget = e.cmd(&["--retry-lock", "2m", "forget", "--keep-within", "1h"]);
    forget.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = forget.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let new = e.backup_at("h", &p, &ago(0), &[]);
    drop(guard);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(e.objects(), set_of(&[&new]));
}

/// `--tag` as restic reads it: `a,b` wants both tags, a repeated flag any
/// of the lists, and `''` untagged snapshots; `snapshots` and `forget`
/// select alike.
#[test]
fn tag_filters_want_all_of_a_list_and_any_list() {
    let e = Env::new();
    let p = e.src("p");
    let ab = e.backup_at("h", &p, "2022-01-01 10:00:00", &["a", "b"]);
    let a = e.backup_at("h", &p, "2022-01-02 10:00:00", &["a"]);
    let c = e.backup_at("h", &p, "2022-01-03 10:00:00", &["c"]);
    let none = e.backup_at("h", &p, "2022-01-04 10:00:00", &[]);
    let listed = |tags: &[&str]| -> BTreeSet<String> {
        let mut args = vec!["snapshots", "--json"];
        for t in tags {
            args.extend(["--tag", t]);
        }
        let out = e.ok(&args, 0);
        ids(&serde_json::from_str::<Value>(&out).unwrap())
            .into_iter()
            .collect()
    };
    assert_eq!(listed(&["a"]), set_of(&[&ab, &a]));
    assert_eq!(listed(&["a,b"]), set_of(&[&ab]));
    assert_eq!(listed(&["b", "c"]), set_of(&[&ab, &c]));
    assert_eq!(listed(&["a,b", "c"]), set_of(&[&ab, &c]));
    assert_eq!(listed(&[""]), set_of(&[&none]));
    assert_eq!(listed(&["", "c"]), set_of(&[&c, &none]));
    // One group (host and paths): the latest of those selected is kept.
    e.ok(&["forget", "--tag", "a,b", "--tag", "c", "-l", "1"], 0);
    assert_eq!(e.objects(), set_of(&[&a, &c, &none]));
}

/// `--host/--tag/--path` narrow what the policy sees; named snapshots
/// (full ids, prefixes, `latest` under the filter) are removed exactly;
/// a reference that matches nothing is reported (exit 3) and the others
/// are still removed; a policy given with names is not applied.
#[test]
fn filters_and_named_snapshots() {
    let e = Env::new();
    let (p, q) = (e.src("p"), e.src("q"));
    let _a1 = e.backup_at("a", &p, "2022-01-01 10:00:00", &[]);
    let a2 = e.backup_at("a", &p, "2022-01-02 10:00:00", &[]);
    let b1 = e.backup_at("b", &p, "2022-01-01 10:00:00", &["t"]);
    let b2 = e.backup_at("b", &p, "2022-01-02 10:00:00", &["t"]);
    let b3 = e.backup_at("b", &p, "2022-01-03 10:00:00", &[]);
    let q1 = e.backup_at("a", &q, "2022-01-01 10:00:00", &[]);
    let q2 = e.backup_at("a", &q, "2022-01-02 10:00:00", &[]);

    e.ok(
        &["forget", "--host", "a", "--path", path_str(&p), "-l", "1"],
        0,
    );
    assert_eq!(e.objects(), set_of(&[&a2, &b1, &b2, &b3, &q1, &q2]));
    // Only b's tagged snapshots are considered: b3 (untagged) stays.
    e.ok(&["forget", "--tag", "t", "-l", "1"], 0);
    assert_eq!(e.objects(), set_of(&[&a2, &b2, &b3, &q1, &q2]));

    // `latest` under --host b is b3; a full id; a prefix.
    let (code, _, err) = e.run(&["forget", "--host", "b", "latest", &q1, short(&a2)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(e.objects(), set_of(&[&b2, &q2]));

    // A policy with names: the names win, with a note.
    let (code, _, err) = e.run(&["forget", "-l", "5", short(&b2)]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("is not applied"), "{err}");
    assert_eq!(e.objects(), set_of(&[&q2]));

    let (code, _, err) = e.run(&["forget", "00000000", "nonsense", short(&q2)]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no snapshot 00000000"), "{err}");
    assert!(err.contains("\"nonsense\" is not a snapshot id"), "{err}");
    assert!(e.objects().is_empty());
}

/// A policy that keeps nothing is refused with exit code 1 before anything
/// is removed, as is one that would empty a group and bad option values
/// (whose messages name the option).
#[test]
fn policies_that_keep_nothing_are_refused() {
    let e = Env::new();
    let work = e.src("work");
    for d in 1..=3 {
        e.backup_at("h", &work, &format!("2023-05-0{d} 12:00:00"), &[]);
    }
    let before = e.objects();
    for (args, says) in [
        (&["forget"][..], "no policy was specified"),
        (&["forget", "--keep-last", "0"], "no policy was specified"),
        (
            &["forget", "--keep-within", "0d"],
            "no policy was specified",
        ),
        (
            &["forget", "--keep-tag", "absent"],
            "refusing to delete last snapshot of snapshot group",
        ),
        (&["forget", "--keep-within", "1w"], "--keep-within"),
        (&["forget", "--keep-daily", "-2"], "--keep-daily"),
        (&["forget", "--keep-monthly", "many"], "--keep-monthly"),
        (
            &["forget", "--group-by", "hostname", "-l", "1"],
            "--group-by",
        ),
    ] {
        let (code, out, err) = e.run(args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(e.objects(), before, "{args:?} removed something");
    }
    // `-1` and `unlimited` keep everything.
    e.ok(&["forget", "-l", "-1"], 0);
    e.ok(&["forget", "--keep-daily", "unlimited"], 0);
    assert_eq!(e.objects(), before);
}

/// `--unsafe-allow-remove-all` (restic's flag): without a policy it removes
/// every snapshot the filter selects and no other; without a filter it is
/// refused, and it does not lift the refusal of a `--keep-tag` policy that
/// keeps none of a group (as restic). `--dry-run` still removes nothing.
#[test]
fn unsafe_allow_remove_all_removes_what_the_filter_selects() {
    let e = Env::new();
    let (work, scratch) = (e.src("work"), e.src("scratch"));
    let mut kept = Vec::new();
    let mut tagged = Vec::new();
    for d in 1..=3 {
        kept.push(e.backup_at("h", &work, &format!("2023-05-0{d} 12:00:00"), &[]));
        tagged.push(e.backup_at("h", &scratch, &format!("2023-05-0{d} 13:00:00"), &["tmp"]));
    }
    let all = e.objects();

    let out = e.ok(
        &["forget", "--unsafe-allow-remove-all", "--tag", "tmp", "-n"],
        0,
    );
    assert!(out.contains("would remove 3 snapshots"), "{out}");
    assert_eq!(e.objects(), all, "a dry run removed something");

    let out = e.ok(
        &[
            "forget",
            "--unsafe-allow-remove-all",
            "--tag",
            "tmp",
            "--json",
        ],
        0,
    );
    let groups: Value = serde_json::from_str(&out).unwrap();
    let removed: BTreeSet<String> = groups[0]["remove"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(removed, tagged.iter().cloned().collect(), "{out}");
    assert_eq!(e.objects(), kept.iter().cloned().collect());

    // Refused: no filter; a policy that keeps none of a group, flag or not.
    let before = e.objects();
    for args in [
        &["forget", "--unsafe-allow-remove-all"][..],
        &["forget", "--unsafe-allow-remove-all", "-n"],
        &[
            "forget",
            "--keep-tag",
            "absent",
            "--unsafe-allow-remove-all",
        ],
    ] {
        let (code, out, err) = e.run(args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        let says = if args.contains(&"--keep-tag") {
            "refusing to delete last snapshot of snapshot group"
        } else {
            "give --host, --tag or --path"
        };
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(e.objects(), before, "{args:?} removed something");
    }
}

/// A group of a `--json` report: host, paths, tags, kept and removed counts.
type GroupSummary = (String, Value, Value, usize, usize);

/// `--group-by` decides which snapshots a policy sees together.
#[test]
fn group_by_variants() {
    let e = Env::new();
    let (p, q) = (e.src("p"), e.src("q"));
    // (host, path, tag): two snapshots of each, a day apart.
    let mut by_day = Vec::new();
    for day in ["2024-02-01", "2024-02-02"] {
        for (host, path, tag) in [("a", &p, "x"), ("a", &q, "y"), ("b", &p, "x")] {
            by_day.push(e.backup_at(host, path, &format!("{day} 09:00:00"), &[tag]));
        }
    }
    let summary = |groups: &[Value]| -> Vec<GroupSummary> {
        groups
            .iter()
            .map(|g| {
                (
                    g["host"].as_str().unwrap().to_string(),
                    g["paths"].clone(),
                    g["tags"].clone(),
                    ids(&g["keep"]).len(),
                    ids(&g["remove"]).len(),
                )
            })
            .collect()
    };
    let (pj, qj) = (
        serde_json::json!([path_str(&p)]),
        serde_json::json!([path_str(&q)]),
    );
    let cases: Vec<(&str, Vec<GroupSummary>)> = vec![
        (
            "host,paths",
            vec![
                ("a".into(), pj.clone(), Value::Null, 1, 1),
                ("a".into(), qj.clone(), Value::Null, 1, 1),
                ("b".into(), pj.clone(), Value::Null, 1, 1),
            ],
        ),
        (
            "host",
            vec![
                ("a".into(), Value::Null, Value::Null, 1, 3),
                ("b".into(), Value::Null, Value::Null, 1, 1),
            ],
        ),
        (
            "paths",
            vec![
                (String::new(), pj.clone(), Value::Null, 1, 3),
                (String::new(), qj.clone(), Value::Null, 1, 1),
            ],
        ),
        (
            "tags",
            vec![
                (String::new(), Value::Null, serde_json::json!(["x"]), 1, 3),
                (String::new(), Value::Null, serde_json::json!(["y"]), 1, 1),
            ],
        ),
        ("", vec![(String::new(), Value::Null, Value::Null, 1, 5)]),
    ];
    for (by, want) in cases {
        let groups = e.forget_json(&["-n", "--keep-last", "1", "--group-by", by]);
        assert_eq!(summary(&groups), want, "--group-by {by:?}");
    }
    // The default is host,paths; a real run keeps the newest of each.
    e.ok(&["forget", "--keep-last", "1"], 0);
    assert_eq!(e.objects(), set_of(&by_day[3..].iter().collect::<Vec<_>>()));
}

/// A snapshot object that cannot be read is reported (exit 3) and never
/// removed by a policy, even one that removes everything around it; named
/// explicitly, it is removed.
#[test]
fn unreadable_snapshot_is_never_removed_by_policy() {
    let e = Env::new();
    let work = e.src("work");
    let made: Vec<String> = (1..=4)
        .map(|d| e.backup_at("h", &work, &format!("2018-06-0{d} 07:00:00"), &[]))
        .collect();
    // Damage the oldest and one in the middle: one flipped byte each.
    let damaged = [&made[0], &made[2]];
    for id in damaged {
        let f = e.t.repo_path().join("snapshots").join(id);
        let mut bytes = fs::read(&f).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x40;
        set_mode(&f, 0o600);
        fs::write(&f, bytes).unwrap();
    }
    let (code, out, err) = e.run(&["forget", "--keep-last", "1"]);
    assert_eq!(code, 3, "{out}{err}");
    for id in damaged {
        assert!(err.contains(id.as_str()), "{id} not reported: {err}");
    }
    assert_eq!(e.objects(), set_of(&[&made[0], &made[2], &made[3]]));

    let (code, out, err) = e.run(&["forget", short(&made[2])]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("removed unreadable snapshot object {}", made[2])),
        "{out}"
    );
    assert_eq!(e.objects(), set_of(&[&made[0], &made[3]]));
}

/// Names and tags are printed with control characters escaped.
#[test]
fn tables_escape_control_characters() {
    let e = Env::new();
    let work = e.src("work");
    let host = "evil\x1b[2Jhost";
    e.backup_at(host, &work, "2020-01-01 00:00:00", &["t\x07"]);
    e.backup_at(host, &work, "2020-01-02 00:00:00", &[]);
    let out = e.ok(&["forget", "-l", "1", "-n"], 0);
    assert!(!out.contains('\x1b') && !out.contains('\x07'), "{out:?}");
    assert!(out.contains("host [evil\\x1b[2Jhost]"), "{out}");
    assert!(out.contains("t\\x07"), "{out}");
}

/// `backup --time` records the given time (restic's format in the local
/// zone, or RFC 3339); a bad one is refused before anything is stored; the
/// parent is still the latest snapshot by time with the same host and
/// paths, even for a backup dated before it.
#[test]
fn backup_time_is_recorded_and_parent_is_latest_by_time() {
    let e = Env::new();
    let work = e.src("work");
    let time_of = |id: &str| -> String {
        let out = e.ok(&["snapshots", "--json"], 0);
        let list: Value = serde_json::from_str(out.trim()).unwrap();
        let s = list
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .unwrap()
            .clone();
        s["time"].as_str().unwrap().to_string()
    };
    let newer = e.backup_at("h", &work, "2019-07-01 12:30:00", &[]);
    assert_eq!(time_of(&newer), "2019-07-01T10:30:00Z");
    let (code, out, err) = e.run(&[
        "backup",
        "--json",
        "--host",
        "h",
        "--time",
        "2001-02-03T04:05:06+02:00",
        path_str(&work),
    ]);
    assert_eq!(code, 0, "{err}");
    let summary = json_lines(&out).pop().unwrap();
    let older = summary["snapshot_id"].as_str().unwrap();
    assert_eq!(time_of(older), "2001-02-03T02:05:06Z");
    assert_eq!(summary["parent"], newer.as_str());

    let before = e.objects();
    for bad in ["2019-07-01", "tomorrow", "2019-07-01 25:00:00"] {
        let (code, out, err) = e.run(&["backup", "--time", bad, path_str(&work)]);
        assert_eq!(code, 1, "{bad}: {out}{err}");
        assert!(err.contains("--time"), "{bad}: {err}");
    }
    assert_eq!(e.objects(), before);
}

/// Forget holds only a shared lock: it runs while a backup is paused
/// mid-run (SIGSTOP) and removes older snapshots, including the one the
/// backup uses as its parent; the backup then completes, restores exactly,
/// and the repository passes `check`.
#[test]
fn forget_beside_a_paused_backup() {
    let e = Env::new();
    let src = e.src("data");
    let keep = e.backup_at("h", &src, "2020-01-01 00:00:00", &["keep"]);
    let old: Vec<String> = (2..=4)
        .map(|d| e.backup_at("h", &src, &format!("2020-01-0{d} 00:00:00"), &[]))
        .collect();
    for i in 0..24 {
        write(
            &src.join(format!("big/f{i:02}")),
            &rand_bytes(900 + i, 1 << 20),
        );
    }
    let packs_before = pack_files(&e.t.repo_path()).0;
    let mut c = e.cmd(&["backup", "--json", "--host", "h", path_str(&src)]);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let deadline = Instant::now() + Duration::from_secs(120);
    while pack_files(&e.t.repo_path()).0 <= packs_before {
        assert!(Instant::now() < deadline, "the backup wrote no pack");
        std::thread::sleep(Duration::from_millis(2));
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let locks = fs::read_dir(e.t.repo_path().join("locks")).unwrap().count();
    let forgot = e.run(&["forget", "--keep-tag", "keep"]);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let out = child.wait_with_output().unwrap();
    let (code, fout, ferr) = forgot;
    assert_eq!(code, 0, "forget beside the backup: {fout}{ferr}");
    assert!(locks >= 1, "the paused backup held no lock");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = json_lines(&String::from_utf8_lossy(&out.stdout))
        .pop()
        .unwrap();
    let new = summary["snapshot_id"].as_str().unwrap().to_string();
    // Its parent was the newest old snapshot, which forget removed.
    assert_eq!(summary["parent"], old[2].as_str());
    assert_eq!(e.objects(), set_of(&[&keep, &new]));

    let dest = tempfile::tempdir().unwrap();
    let spec = format!("latest:{}", path_str(&src));
    e.ok(&["restore", &spec, "--target", path_str(dest.path())], 0);
    assert_same_tree(&src, dest.path());
    let out = e.ok(&["check", "--read-data"], 0);
    assert!(out.contains("no errors were found"), "{out}");
}

/// `forget` killed with SIGKILL while it removes snapshots: every
/// snapshot left is whole (readable), the kept ones are all there, the
/// repository passes `check`, and the next forget finishes the job.
#[test]
fn forget_killed_midway_leaves_whole_snapshots() {
    let e = Env::new();
    let work = e.src("work");
    e.backup_at("h", &work, "2020-06-01 12:00:00", &[]);
    // Many copies of that snapshot an hour apart, written by the library.
    let repo = e.t.open().unwrap();
    let (list, _) = larder::snapshot::list(&repo, &Default::default()).unwrap();
    let base = list[0].1.clone();
    let hour = 3_600_000_000_000i64;
    let mut newest: Vec<(i64, String)> = Vec::new();
    for i in 1..600 {
        let mut s = base.clone();
        s.time_ns += i * hour;
        let id = larder::snapshot::save(&repo, &s).unwrap();
        newest.push((s.time_ns, id.to_hex()));
    }
    drop(repo);
    newest.sort();
    let kept: BTreeSet<String> = newest[newest.len() - 5..]
        .iter()
        .map(|(_, id)| id.clone())
        .collect();
    let total = e.objects().len();
    assert_eq!(total, 600);

    let mut killed_midway = 0;
    for _round in 0..3 {
        let left = e.objects().len();
        if left <= kept.len() + 20 {
            break;
        }
        let mut c = e.cmd(&["forget", "-q", "--keep-last", "5"]);
        c.stdout(Stdio::null()).stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        let finished = loop {
            if e.objects().len() < left {
                child.kill().unwrap();
                break false;
            }
            if child.try_wait().unwrap().is_some() {
                break true;
            }
            assert!(Instant::now() < deadline, "forget removed nothing");
            std::thread::sleep(Duration::from_millis(1));
        };
        child.wait().unwrap();
        let now_left = e.objects();
        if !finished && now_left.len() > kept.len() {
            killed_midway += 1;
        }
        assert!(kept.is_subset(&now_left), "a kept snapshot was removed");
        let repo = e.t.open().unwrap();
        let (readable, bad) = larder::snapshot::list(&repo, &Default::default()).unwrap();
        assert!(bad.is_empty(), "half a snapshot: {bad:?}");
        assert_eq!(readable.len(), now_left.len());
        drop(repo);
        e.ok(&["check"], 0);
    }
    assert!(
        killed_midway >= 1,
        "no kill landed while forget was removing"
    );
    e.ok(&["forget", "-q", "--keep-last", "5"], 0);
    assert_eq!(e.objects(), kept);
    e.ok(&["check"], 0);
}
