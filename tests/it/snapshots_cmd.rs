//! `larder snapshots` as restic's: snapshots named by id, prefix or
//! `latest`; `--latest N` (the last N of each host and path set);
//! `--group-by` with restic's headings and `{group_key, snapshots}` JSON.
//! Five backups of two trees from two hosts, at recorded times, so which
//! snapshot each selection must show is known from how they were made.

use crate::faults::{cli_repo, larder_ok, larder_run};
use crate::support::write;
use serde_json::Value;
use std::path::Path;

/// A backup of `src` as `host`, with `tags`, at `time`; its id.
fn backup(repo: &Path, cache: &Path, src: &Path, host: &str, tags: &[&str], time: &str) -> String {
    let src = src.to_str().unwrap();
    let mut args = vec!["backup", "--json", "--host", host, "--time", time, src];
    for t in tags {
        args.extend(["--tag", t]);
    }
    crate::faults::snapshot_id_of(&larder_ok(repo, cache, &args))
}

/// The ids a `snapshots --json` printed, in its order.
fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

fn snapshots_json(repo: &Path, cache: &Path, args: &[&str]) -> Value {
    let mut all = vec!["snapshots", "--json"];
    all.extend_from_slice(args);
    let o = larder_ok(repo, cache, &all);
    serde_json::from_str(&o.out).unwrap_or_else(|e| panic!("{e}: {}", o.all()))
}

#[test]
fn snapshots_selects_by_name_latest_per_set_and_groups_like_restic() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let a = t.dir.path().join("a");
    let b = t.dir.path().join("b");
    write(&a.join("f"), b"tree a");
    write(&b.join("f"), b"tree b");
    // Made out of time order: the listing sorts by the recorded time.
    let s3 = backup(&repo, &cache, &a, "h2", &[], "2026-01-03T00:00:00Z");
    let s1 = backup(&repo, &cache, &a, "h1", &[], "2026-01-01T00:00:00Z");
    let s2 = backup(&repo, &cache, &a, "h1", &["t"], "2026-01-02T00:00:00Z");
    let s5 = backup(&repo, &cache, &a, "h1", &[], "2026-01-05T00:00:00Z");
    let s4 = backup(&repo, &cache, &b, "h1", &[], "2026-01-04T00:00:00Z");
    let all = vec![s1.clone(), s2.clone(), s3.clone(), s4.clone(), s5.clone()];
    assert_eq!(ids(&snapshots_json(&repo, &cache, &[])), all);

    // Named: `latest`, a prefix, a full id; each once, oldest first.
    assert_eq!(
        ids(&snapshots_json(&repo, &cache, &["latest"])),
        vec![s5.clone()]
    );
    assert_eq!(
        ids(&snapshots_json(&repo, &cache, &["latest", &s2[..8], &s5])),
        vec![s2.clone(), s5.clone()]
    );
    assert_eq!(
        ids(&snapshots_json(&repo, &cache, &["latest", "--host", "h2"])),
        vec![s3.clone()]
    );

    // The last N of each host and path set: (h1, a), (h2, a), (h1, b).
    assert_eq!(
        ids(&snapshots_json(&repo, &cache, &["--latest", "1"])),
        vec![s3.clone(), s4.clone(), s5.clone()]
    );
    assert_eq!(
        ids(&snapshots_json(
            &repo,
            &cache,
            &["--latest", "2", "--host", "h1"]
        )),
        vec![s2.clone(), s4.clone(), s5.clone()]
    );

    // Groups: restic's `group_key` with null for what is not grouped by.
    let groups = snapshots_json(&repo, &cache, &["--group-by", "host"]);
    let got: Vec<(Value, Vec<String>)> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["group_key"].clone(), ids(&g["snapshots"])))
        .collect();
    let key = |host: &str| serde_json::json!({"hostname": host, "paths": null, "tags": null});
    assert_eq!(
        got,
        vec![
            (
                key("h1"),
                vec![s1.clone(), s2.clone(), s4.clone(), s5.clone()]
            ),
            (key("h2"), vec![s3.clone()]),
        ]
    );
    // `--latest` applies within each group: untagged (h1 a, h2 a, h1 b) and `t`.
    let groups = snapshots_json(&repo, &cache, &["-g", "tags", "--latest", "1"]);
    let got: Vec<Vec<String>> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|g| ids(&g["snapshots"]))
        .collect();
    assert_eq!(
        got,
        vec![vec![s3.clone(), s4.clone(), s5.clone()], vec![s2.clone()]]
    );
    assert_eq!(groups[1]["group_key"]["tags"], serde_json::json!(["t"]));

    // The human output: restic's heading and a count per group.
    let o = larder_ok(&repo, &cache, &["snapshots", "-g", "host"]);
    let h1 = o.out.find("snapshots for (host [h1]):").expect(&o.out);
    let h2 = o.out.find("snapshots for (host [h2]):").expect(&o.out);
    assert!(h1 < h2, "{}", o.out);
    assert!(o.out[h1..h2].contains("4 snapshots"), "{}", o.out);
    assert!(o.out[h2..].contains("1 snapshots"), "{}", o.out);
    assert!(o.out[h2..].contains(&s3[..8]) && !o.out[h2..].contains(&s1[..8]));
    // Without grouping: one table, no heading.
    let o = larder_ok(&repo, &cache, &["snapshots"]);
    assert!(!o.out.contains("snapshots for"), "{}", o.out);
    assert!(o.out.contains("5 snapshots"), "{}", o.out);

    // Bad input: a clear error naming what was wrong.
    let o = larder_run(&repo, &cache, &["snapshots", "-g", "hostname"]);
    assert!(o.code != 0 && o.err.contains("hostname"), "{}", o.all());
    let o = larder_run(&repo, &cache, &["snapshots", "abcdef12"]);
    assert!(
        o.code != 0 && o.err.contains("no snapshot abcdef12"),
        "{}",
        o.all()
    );
    assert!(o.out.is_empty(), "{}", o.all());
}

/// The text table: each snapshot's size (its files' bytes) before its
/// paths, blank for a snapshot no backup wrote (`recover`'s); `--compact`
/// (restic's `-c`): id, time, host and tags only.
#[test]
fn the_table_shows_sizes_and_compact_leaves_out_paths_and_sizes() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    write(&src.join("a.bin"), &vec![7u8; 3 << 20]);
    let id = backup(
        &repo,
        &cache,
        &src,
        "hostA",
        &["daily", "x"],
        "2026-01-01 10:00:00",
    );
    larder_ok(&repo, &cache, &["forget", &id]);
    write(&src.join("b.txt"), b"second");
    let kept = backup(
        &repo,
        &cache,
        &src,
        "hostA",
        &["daily"],
        "2026-01-02 10:00:00",
    );
    let rec = larder_ok(&repo, &cache, &["--json", "recover"]);
    let rec: Value = serde_json::from_str(rec.out.lines().last().unwrap()).unwrap();
    let rec_id = rec["snapshot_id"].as_str().unwrap().to_string();

    let o = larder_ok(&repo, &cache, &["snapshots"]);
    let line = |id: &str| -> String {
        o.out
            .lines()
            .find(|l| l.starts_with(&id[..8]))
            .unwrap_or_else(|| panic!("{id}: {}", o.out))
            .to_string()
    };
    assert!(o.out.lines().next().unwrap().contains("Size"), "{}", o.out);
    let k = line(&kept);
    assert!(
        k.contains("3.000 MiB") && k.ends_with(src.to_str().unwrap()),
        "{k}"
    );
    let r = line(&rec_id);
    assert!(!r.contains("B ") && r.ends_with("/recover"), "{r}");
    assert!(o.out.ends_with("2 snapshots\n"), "{}", o.out);

    let c = larder_ok(&repo, &cache, &["snapshots", "-c"]);
    let k = c.out.lines().find(|l| l.starts_with(&kept[..8])).unwrap();
    assert!(k.ends_with("hostA            daily"), "{k:?}");
    assert!(
        !c.out.contains(src.to_str().unwrap()) && !c.out.contains("MiB"),
        "{}",
        c.out
    );
    assert!(c.out.lines().next().unwrap().ends_with("Tags"), "{}", c.out);
    let o = larder_run(
        &repo,
        &cache,
        &["snapshots", "--compact", "--group-by", "host"],
    );
    assert!(o.code == 0 && o.out.contains("host [hostA]"), "{}", o.all());
}

/// `LARDER_HOST` (restic 0.17's `RESTIC_HOST`): the host a backup records
/// and finds its parent by, and the host the snapshot filters keep; an
/// explicit `--host` wins.
#[test]
fn larder_host_names_the_backups_host_and_filters_by_it() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    write(&src.join("a.txt"), b"a");
    let with_host = |host: &str, args: &[&str]| {
        let mut c = crate::faults::larder_cmd(&repo, &cache, args);
        c.env("LARDER_HOST", host);
        let o = crate::faults::wait_bounded(crate::faults::spawn(c), "with LARDER_HOST");
        assert_eq!(o.code, 0, "{}", o.all());
        o
    };
    let src_s = src.to_str().unwrap();
    let first = with_host("envhost", &["backup", "--json", src_s]);
    let first = crate::faults::snapshot_id_of(&first);
    let second = with_host("envhost", &["backup", "--json", src_s]);
    let summary = crate::support::json_lines(&second.out).pop().unwrap();
    assert_eq!(summary["parent"], first.as_str(), "{summary}");
    backup(&repo, &cache, &src, "flaghost", &[], "2026-01-01 10:00:00");
    let all = snapshots_json(&repo, &cache, &[]);
    let hosts: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["hostname"].as_str().unwrap())
        .collect();
    assert_eq!(
        hosts.iter().filter(|h| **h == "envhost").count(),
        2,
        "{hosts:?}"
    );
    let o = with_host("envhost", &["snapshots", "--json"]);
    let v: Value = serde_json::from_str(&o.out).unwrap();
    assert_eq!(ids(&v).len(), 2, "{v}");
    assert!(
        v.as_array()
            .unwrap()
            .iter()
            .all(|s| s["hostname"] == "envhost"),
        "{v}"
    );
    let o = with_host("envhost", &["snapshots", "--json", "--host", "flaghost"]);
    let v: Value = serde_json::from_str(&o.out).unwrap();
    assert_eq!(ids(&v).len(), 1, "{v}");
}

/// `--repository-file FILE` (restic's flag; `LARDER_REPOSITORY_FILE`):
/// the repository is the file's first line (trailing spaces and the rest
/// ignored); with `--repo` too it is refused, as is an empty first line
/// or a missing file, each message naming what is wrong.
#[test]
fn repository_file_names_the_repository() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    write(&src.join("a.txt"), b"a");
    let id = backup(&repo, &cache, &src, "h", &[], "2026-01-01 10:00:00");
    let file = t.dir.path().join("repository");
    write(
        &file,
        format!("{}  \nnot read\n", repo.display()).as_bytes(),
    );
    let run = |args: &[&str], env: Option<&Path>| {
        let mut c = crate::common::larder(&repo, &cache);
        c.env_remove("LARDER_REPOSITORY").args(args);
        if let Some(f) = env {
            c.env("LARDER_REPOSITORY_FILE", f);
        }
        crate::support::run(c)
    };
    let f = file.to_str().unwrap();
    for (args, env) in [
        (vec!["--repository-file", f, "snapshots", "--json"], None),
        (vec!["snapshots", "--json"], Some(file.as_path())),
    ] {
        let (code, out, err) = run(&args, env);
        assert_eq!(code, 0, "{args:?}: {err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(ids(&v), vec![id.clone()], "{args:?}");
    }
    let (code, _, err) = run(
        &[
            "--repository-file",
            f,
            "--repo",
            repo.to_str().unwrap(),
            "snapshots",
        ],
        None,
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("both give the repository"), "{err}");
    let empty = t.dir.path().join("empty");
    write(&empty, b"\nsomething\n");
    let missing = t.dir.path().join("missing");
    for (file, says) in [
        (&empty, "its first line is empty"),
        (&missing, "No such file"),
    ] {
        let (code, _, err) = run(
            &["--repository-file", file.to_str().unwrap(), "snapshots"],
            None,
        );
        assert_ne!(code, 0, "{err}");
        assert!(
            err.contains(says) && err.contains(file.to_str().unwrap()),
            "{err}"
        );
    }
    let (code, _, err) = run(&["snapshots"], None);
    assert_ne!(code, 0);
    assert!(err.contains("--repository-file"), "{err}");
}

/// `--no-cache` (restic's flag): backup, snapshots and restore work with
/// the index read into a temporary directory of their own, which is gone
/// when each ends; the cache directory named by `LARDER_CACHE_DIR` is
/// never made.
#[test]
fn no_cache_leaves_no_cache_behind() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let src = t.dir.path().join("src");
    write(&src.join("a.txt"), b"alpha");
    write(&src.join("sub/b.txt"), b"beta");
    let tmp = t.dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let run = |args: &[&str]| {
        let mut c = crate::common::larder(&repo, &cache);
        c.env("TMPDIR", &tmp).arg("--no-cache").args(args);
        let (code, out, err) = crate::support::run(c);
        assert_eq!(code, 0, "{args:?}: {err}");
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
        assert!(left.is_empty(), "{args:?} left {left:?}");
        assert!(!cache.exists(), "{args:?} made the cache directory");
        out
    };
    run(&["backup", "-q", src.to_str().unwrap()]);
    let out = run(&["snapshots", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(ids(&v).len(), 1);
    let target = t.dir.path().join("restored");
    run(&["restore", "latest", "--target", target.to_str().unwrap()]);
    let got = target.join(src.strip_prefix("/").unwrap());
    assert_eq!(std::fs::read(got.join("sub/b.txt")).unwrap(), b"beta");
    assert_eq!(std::fs::read(got.join("a.txt")).unwrap(), b"alpha");
}
