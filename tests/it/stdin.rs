//! `backup --stdin`: a stream stored as one file `/NAME` of a snapshot
//! (restic's `--stdin` and `--stdin-filename`), read back exactly by
//! `dump` and `restore`, deduplicated against an earlier copy of itself;
//! bad names and a stream that cannot be read are clear errors that save
//! no snapshot. A stream backup waiting on a slow producer while a prune
//! runs beside it completes, and one killed mid-stream leaves a
//! repository that `check` passes and the next run completes.
//!
//! `backup --stdin-from-command -- CMD ARGS` (restic's flag) stores the
//! command's output the same way; a command that fails or cannot start
//! saves no snapshot and names itself, and what it wrote before failing
//! is stored for the next run to reuse. (Held at each open beside a
//! prune, killed at each open: `faults::interleavings`, `crash_points`.)

use crate::common::larder;
use crate::faults::{check_passes, cli_repo, larder_ok, snapshot_id_of, wait_bounded};
use crate::support::{json_lines, path_str, rand_bytes, write};
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

/// Restores snapshot `id` into `target`.
fn restore_to(repo: &Path, cache: &Path, id: &str, target: &Path) {
    larder_ok(
        repo,
        cache,
        &["restore", "-q", id, "--target", path_str(target)],
    );
}

/// `larder backup --stdin ARGS` started with a pipe to write the stream into.
fn start(repo: &Path, cache: &Path, args: &[&str]) -> Child {
    let mut c = larder(repo, cache);
    c.args(["backup", "--stdin", "--json"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

/// Backs up `data` through standard input; the run's output. A run that
/// refuses its arguments exits without reading the stream, so a broken
/// pipe while writing it is left for the run's own output to explain.
fn backup_stream(repo: &Path, cache: &Path, data: &[u8], args: &[&str]) -> crate::faults::Out {
    let mut child = start(repo, cache, args);
    let mut input = child.stdin.take().unwrap();
    if let Err(e) = input.write_all(data) {
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe,
            "writing the stream: {e}"
        );
    }
    drop(input);
    wait_bounded(child, "backup --stdin")
}

#[test]
fn a_stream_is_stored_as_one_file_and_read_back_exactly() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let mut data = rand_bytes(7, 3 << 20);
    data.extend_from_slice(&b"INSERT INTO t VALUES (1);\n".repeat(20_000));
    let o = backup_stream(&repo, &cache, &data, &["--stdin-filename", "db.sql"]);
    assert_eq!(o.code, 0, "{}", o.all());
    let id = snapshot_id_of(&o);
    let summary = json_lines(&o.out).pop().unwrap();
    assert_eq!(summary["total_bytes_processed"], data.len(), "{summary}");
    assert_eq!(summary["files_new"], 1, "{summary}");

    let snaps = larder_ok(&repo, &cache, &["snapshots", "--json", &id]);
    let snaps: serde_json::Value = serde_json::from_str(&snaps.out).unwrap();
    assert_eq!(snaps[0]["paths"], serde_json::json!(["/db.sql"]));
    let dumped = t.dir.path().join("dumped");
    let mut c = larder(&repo, &cache);
    c.args(["dump", &id, "/db.sql"])
        .stdout(fs::File::create(&dumped).unwrap());
    assert!(c.status().unwrap().success(), "dump");
    assert_eq!(fs::read(&dumped).unwrap(), data, "the dumped stream");
    let target = t.dir.path().join("back");
    larder_ok(
        &repo,
        &cache,
        &["restore", "-q", &id, "--target", path_str(&target)],
    );
    let back = target.join("db.sql");
    assert_eq!(fs::read(&back).unwrap(), data, "the restored stream");
    let names: Vec<_> = fs::read_dir(&target).unwrap().collect();
    assert_eq!(names.len(), 1, "only the stream's file");
    assert_eq!(
        fs::metadata(&back).unwrap().permissions().mode() & 0o7777,
        0o644
    );

    // The same stream again: its chunks are stored already, only the new
    // tree (the file's time differs) is added.
    let again = backup_stream(&repo, &cache, &data, &["--stdin-filename", "db.sql"]);
    assert_eq!(again.code, 0, "{}", again.all());
    let s = json_lines(&again.out).pop().unwrap();
    assert!(
        s["data_added_plain"].as_u64().unwrap() < data.len() as u64 / 100,
        "{s}"
    );
    // The default name, and an empty stream.
    let empty = backup_stream(&repo, &cache, b"", &[]);
    assert_eq!(empty.code, 0, "{}", empty.all());
    let e = snapshot_id_of(&empty);
    let target = t.dir.path().join("empty");
    larder_ok(
        &repo,
        &cache,
        &["restore", "-q", &e, "--target", path_str(&target)],
    );
    assert_eq!(fs::read(target.join("stdin")).unwrap(), b"");
    check_passes(&repo, &cache, true, "after the stream backups");
}

#[test]
fn bad_names_and_unreadable_streams_save_nothing() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let snapshots = || fs::read_dir(repo.join("snapshots")).unwrap().count();
    for name in ["../up", "a/b", "..", ""] {
        let o = backup_stream(&repo, &cache, b"x", &["--stdin-filename", name]);
        assert_eq!(o.code, 1, "{name:?}: {}", o.all());
        assert!(o.err.contains("--stdin-filename"), "{}", o.all());
    }
    let src = t.dir.path().join("src");
    write(&src.join("f"), b"f");
    let o = backup_stream(&repo, &cache, b"x", &[path_str(&src)]);
    assert_ne!(o.code, 0, "--stdin with paths: {}", o.all());
    let mut c = larder(&repo, &cache);
    c.args(["backup", "--stdin-filename", "x", path_str(&src)]);
    let o = wait_bounded(crate::faults::spawn(c), "--stdin-filename alone");
    assert!(
        o.code == 1 && o.err.contains("give one of them too"),
        "{}",
        o.all()
    );
    // A stream that fails to read (a directory as standard input).
    let mut c = larder(&repo, &cache);
    c.args(["backup", "--stdin"])
        .stdin(fs::File::open(&src).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let o = wait_bounded(c.spawn().unwrap(), "a directory as input");
    assert!(
        o.code == 1 && o.err.contains("standard input"),
        "{}",
        o.all()
    );
    assert_eq!(snapshots(), 0);
    check_passes(&repo, &cache, false, "after the refused stream backups");
}

/// A stream backup whose producer is slow (it waits on its pipe) while
/// every snapshot is forgotten and pruned with no grace period beside it;
/// and one killed with SIGKILL mid-stream: each leaves a repository
/// `check` passes, and the stream, given whole, restores exactly.
#[test]
fn a_stream_backup_beside_a_prune_and_killed_mid_stream() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let data = rand_bytes(11, 4 << 20);
    // An older snapshot with the stream's first half, for the prune to
    // delete while the new run may be deduplicating against it.
    let first = backup_stream(&repo, &cache, &data[..2 << 20], &[]);
    let old = snapshot_id_of(&first);

    let mut child = start(&repo, &cache, &[]);
    let mut input = child.stdin.take().unwrap();
    input.write_all(&data[..3 << 20]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let cache2 = t.dir.path().join("cache-2");
    let p = larder_ok(
        &repo,
        &cache2,
        &["forget", &old, "--prune", "--keep-delete", "0s"],
    );
    assert!(p.out.contains("removed 1 snapshots"), "{}", p.all());
    input.write_all(&data[3 << 20..]).unwrap();
    drop(input);
    let o = wait_bounded(child, "the stream backup beside the prune");
    assert_eq!(o.code, 0, "{}", o.all());
    let id = snapshot_id_of(&o);
    larder_ok(&repo, &cache2, &["prune", "--keep-delete", "0s"]);
    let target = t.dir.path().join("back");
    larder_ok(
        &repo,
        &cache,
        &["restore", "-q", &id, "--target", path_str(&target)],
    );
    assert_eq!(fs::read(target.join("stdin")).unwrap(), data);
    check_passes(&repo, &cache, true, "after the stream beside the prune");

    // Killed mid-stream: nothing saved, the next run completes.
    let before = fs::read_dir(repo.join("snapshots")).unwrap().count();
    let other = rand_bytes(12, 3 << 20);
    let mut child = start(&repo, &cache, &["--stdin-filename", "killed"]);
    let mut input = child.stdin.take().unwrap();
    input.write_all(&other[..2 << 20]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    drop(input);
    let o = wait_bounded(child, "the killed stream backup");
    assert_ne!(o.code, 0);
    assert_eq!(
        fs::read_dir(repo.join("snapshots")).unwrap().count(),
        before
    );
    check_passes(&repo, &cache, false, "after the killed stream backup");
    let o = backup_stream(&repo, &cache, &other, &["--stdin-filename", "killed"]);
    assert_eq!(o.code, 0, "{}", o.all());
    let target = t.dir.path().join("again");
    restore_to(&repo, &cache, &snapshot_id_of(&o), &target);
    assert_eq!(fs::read(target.join("killed")).unwrap(), other);
    check_passes(&repo, &cache, true, "after the stream run again");
}

/// `larder backup --json --stdin-from-command ARGS -- COMMAND`, to its end.
fn backup_command(
    repo: &Path,
    cache: &Path,
    args: &[&str],
    command: &[&str],
) -> crate::faults::Out {
    let mut c = larder(repo, cache);
    c.args(["backup", "--json", "--stdin-from-command"])
        .args(args)
        .arg("--")
        .args(command);
    wait_bounded(crate::faults::spawn(c), &format!("backup from {command:?}"))
}

#[test]
fn a_commands_output_is_stored_exactly_and_a_failing_command_saves_nothing() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let snapshots = || fs::read_dir(repo.join("snapshots")).unwrap().count();
    let dump_file = t.dir.path().join("dump.bin");
    let data = rand_bytes(21, 3 << 20);
    fs::write(&dump_file, &data).unwrap();
    let dump = path_str(&dump_file);

    // A command that writes its stream, and a line on its standard error
    // that reaches larder's.
    let script = format!("cat '{dump}'; echo 'dumped it' >&2");
    let o = backup_command(
        &repo,
        &cache,
        &["--stdin-filename", "db.bin"],
        &["sh", "-c", &script],
    );
    assert_eq!(o.code, 0, "{}", o.all());
    assert!(o.err.contains("dumped it"), "{}", o.all());
    let id = snapshot_id_of(&o);
    let snaps = larder_ok(&repo, &cache, &["snapshots", "--json", &id]);
    let snaps: serde_json::Value = serde_json::from_str(&snaps.out).unwrap();
    assert_eq!(snaps[0]["paths"], serde_json::json!(["/db.bin"]));
    let target = t.dir.path().join("back");
    larder_ok(
        &repo,
        &cache,
        &["restore", "-q", &id, "--target", path_str(&target)],
    );
    assert_eq!(
        fs::read(target.join("db.bin")).unwrap(),
        data,
        "the restored stream"
    );

    // A command that fails after writing new data: exit 1, an error that
    // names the command and how it ended, no snapshot.
    let more = rand_bytes(22, 2 << 20);
    let more_file = t.dir.path().join("more.bin");
    fs::write(&more_file, &more).unwrap();
    let failing = format!("cat '{}'; exit 7", path_str(&more_file));
    let o = backup_command(&repo, &cache, &[], &["sh", "-c", &failing]);
    assert_eq!(o.code, 1, "{}", o.all());
    assert!(
        o.err.contains("command `sh -c cat") && o.err.contains("exit status: 7"),
        "{}",
        o.all()
    );
    assert_eq!(snapshots(), 1, "a failed command saved a snapshot");
    check_passes(&repo, &cache, false, "after the failed command");
    // What it wrote was stored: the same stream, given whole, adds little.
    let o = backup_command(&repo, &cache, &[], &["cat", path_str(&more_file)]);
    assert_eq!(o.code, 0, "{}", o.all());
    let s = json_lines(&o.out).pop().unwrap();
    assert!(
        s["data_added_plain"].as_u64().unwrap() < more.len() as u64 / 20,
        "the failed run's data was not reused: {s}"
    );
    assert_eq!(s["total_bytes_processed"], more.len(), "{s}");

    // A command killed by a signal, one that does not exist, and none.
    let o = backup_command(&repo, &cache, &[], &["sh", "-c", "echo x; kill -9 $$"]);
    assert!(o.code == 1 && o.err.contains("signal: 9"), "{}", o.all());
    let o = backup_command(&repo, &cache, &[], &["/nonexistent/larder-dumper", "--all"]);
    assert!(
        o.code == 1
            && o.err
                .contains("command `/nonexistent/larder-dumper --all`: "),
        "{}",
        o.all()
    );
    let mut c = larder(&repo, &cache);
    c.args(["backup", "--stdin-from-command"]);
    let o = wait_bounded(crate::faults::spawn(c), "no command");
    assert_ne!(o.code, 0, "{}", o.all());
    let mut c = larder(&repo, &cache);
    c.args(["backup", "--stdin", "--stdin-from-command", "--", "true"]);
    let o = wait_bounded(crate::faults::spawn(c), "both stream flags");
    assert!(
        o.code != 0 && o.err.contains("cannot be used with"),
        "{}",
        o.all()
    );
    assert_eq!(snapshots(), 2);

    // The command's standard input is /dev/null: `cat` with no file
    // stores an empty stream, whatever larder's own input holds.
    let mut c = larder(&repo, &cache);
    c.args([
        "backup",
        "--json",
        "--stdin-from-command",
        "--stdin-filename",
        "empty",
        "--",
        "cat",
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(b"larder's own input").unwrap();
    drop(input);
    let o = wait_bounded(child, "cat reading its standard input");
    assert_eq!(o.code, 0, "{}", o.all());
    let target = t.dir.path().join("empty");
    restore_to(&repo, &cache, &snapshot_id_of(&o), &target);
    assert_eq!(fs::read(target.join("empty")).unwrap(), b"");
    check_passes(&repo, &cache, true, "after the command backups");
}
