//! `backup --read-concurrency N` (restic's flag, `LARDER_READ_CONCURRENCY`):
//! the backup reads with exactly N workers. The reads of the source are
//! slowed by the fault shim so that the run lasts long enough to count its
//! reading threads (named `larder-read`) in `/proc/PID/task`.

use super::{assert_same_manifest, manifest, wait_bounded};
use super::{cli_repo, fill, larder_cmd, larder_run, restore_cli, shim, snapshot_id_of, spawn};
use crate::support::path_str;
use std::path::Path;
use std::time::{Duration, Instant};

/// How many threads of process `pid` are reading workers now.
fn readers_of(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == larder::archiver::READ_THREAD_NAME)
        .count()
}

/// Backs `src` up with `args` added, its reads slowed, and returns the
/// most reading threads seen at once, with the snapshot id.
fn most_readers(
    repo: &Path,
    cache: &Path,
    src: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (usize, String) {
    let mut all = vec!["backup", "--json"];
    all.extend_from_slice(args);
    all.push(path_str(src));
    let mut c = larder_cmd(repo, cache, &all);
    for (k, v) in env {
        c.env(k, v);
    }
    let real = std::fs::canonicalize(src).unwrap();
    shim::inject(
        &mut c,
        &[
            ("FAULTSHIM_SLOW_PREFIX", path_str(&real).to_string()),
            ("FAULTSHIM_SLOW_RATE", "100000".to_string()),
        ],
    );
    let mut child = spawn(c);
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut most = 0;
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        most = most.max(readers_of(pid));
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = wait_bounded(child, "the slowed backup");
    assert_eq!(out.code, 0, "{}", out.all());
    (most, snapshot_id_of(&out))
}

/// 1, 3 and (by the variable) 2 reading workers: each backup runs with
/// exactly that many, and its snapshot restores exactly; values outside 1
/// to 64 are refused, naming the flag, and save nothing.
#[test]
fn a_backup_reads_with_as_many_workers_as_asked() {
    let t = cli_repo();
    let (repo, cache) = (t.repo_path(), t.cache_path());
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("src");
    // Nine files of 40 kB at 100 kB/s: 0.4 s each.
    fill(&src, 7, 9, 40_000);
    for (args, env, want) in [
        (&["--read-concurrency", "1"][..], &[][..], 1),
        (&["--read-concurrency", "3", "--force"], &[], 3),
        (&["--force"], &[("LARDER_READ_CONCURRENCY", "2")], 2),
    ] {
        let (most, id) = most_readers(&repo, &cache, &src, args, env);
        assert_eq!(most, want, "{args:?} {env:?}");
        let to = base.path().join(format!("restored-{want}"));
        let got = restore_cli(&repo, &cache, &id, &src, &to);
        assert_same_manifest(&manifest(&src), &manifest(&got), &format!("{args:?}"));
    }
    let snapshots = std::fs::read_dir(repo.join("snapshots")).unwrap().count();
    for bad in ["0", "65", "many"] {
        let o = larder_run(
            &repo,
            &cache,
            &["backup", "--read-concurrency", bad, path_str(&src)],
        );
        assert_ne!(o.code, 0, "{bad}: {}", o.all());
        assert!(o.err.contains("--read-concurrency"), "{bad}: {}", o.err);
        assert!(o.err.contains("from 1 to 64"), "{bad}: {}", o.err);
    }
    let after = std::fs::read_dir(repo.join("snapshots")).unwrap().count();
    assert_eq!(after, snapshots, "a refused backup saved a snapshot");
}
