//! Fault tests (issue 10): commands running beside a paused backup, backups
//! killed at random points, a repository whose disk fills up, I/O errors
//! injected into source reads and repository writes, and key changes
//! beside other processes and after `kill -9`. The helpers here run
//! commands under a deadline and check what a repository holds after a
//! fault: every object whole under its final name, `check` clean, no blob
//! stored twice, snapshots that restore exactly.

mod beside_prune;
mod concurrency;
mod crash_points;
mod disk_full;
mod faulty_backend;
mod first_backup;
mod interleavings;
mod interrupt;
mod io_errors;
mod key_changes;
mod kill_loop;
mod read_concurrency;
mod readers;
mod retry_lock;
pub(crate) mod shim;
mod split;

use crate::common::{self, TestRepo};
use crate::support::{path_str, rand_bytes, set_mtime, write};
use larder::Id;
use larder::backend::Kind;
use larder::repository::Repository;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long one command may run before it counts as hung (and is killed,
/// failing the test): far above what any command here needs on a busy
/// machine, so only a hang reaches it.
const DEADLINE: Duration = Duration::from_secs(300);

/// What a finished command did.
pub struct Out {
    /// The exit code, or -1 when a signal ended it (`status` says which).
    pub code: i32,
    pub status: String,
    pub out: String,
    pub err: String,
}

impl Out {
    /// Everything the command printed, for failure messages.
    pub fn all(&self) -> String {
        format!(
            "{}\nstdout:\n{}\nstderr:\n{}",
            self.status, self.out, self.err
        )
    }
}

/// A repository made by [`TestRepo::init`] (1 MiB packs), for the CLI:
/// its cache is left for the binary under test to build (one named by
/// `LARDER_TEST_BIN` may not read this build's cache layout).
pub fn cli_repo() -> TestRepo {
    let t = TestRepo::new();
    drop(t.init());
    fs::remove_dir_all(t.cache_path()).unwrap();
    t
}

/// A `larder ARGS` command on a repository and cache.
pub fn larder_cmd(repo: &Path, cache: &Path, args: &[&str]) -> Command {
    let mut c = common::larder(repo, cache);
    c.args(args);
    c
}

/// How many objects directory `dir` of the repository holds, in its
/// subdirectories too (not the `.tmp-*` files of writes in progress, nor
/// lock probes); none if it does not exist.
pub fn objects(repo: &Path, dir: &str) -> usize {
    walkdir::WalkDir::new(repo.join(dir))
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file() && !e.file_name().to_string_lossy().starts_with('.'))
        .count()
}

/// Lock objects in the repository.
pub fn lock_objects(repo: &Path) -> usize {
    objects(repo, "locks")
}

/// Spawns `c` with no input and its output captured.
pub fn spawn(mut c: Command) -> Child {
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child` (spawned by [`spawn`]); one still running after
/// [`DEADLINE`] is killed and the test fails: a hang is a failure.
pub fn wait_bounded(mut child: Child, what: &str) -> Out {
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {DEADLINE:?} (hung); killed");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Out {
        code: status.code().unwrap_or(-1),
        status: match status.signal() {
            Some(s) => format!("{what}: killed by signal {s}"),
            None => format!("{what}: exited {}", status.code().unwrap_or(-1)),
        },
        out: out.join().unwrap(),
        err: err.join().unwrap(),
    }
}

/// Waits (at most 60 s) until `ready()` holds while `child` runs; fails the
/// test, naming `what`, if `child` exits first or the time runs out.
pub fn wait_until(child: &mut Child, what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("{what}: the command ended first ({st})");
        }
        assert!(Instant::now() < deadline, "{what}: not within 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `larder ARGS` to completion (bounded by [`DEADLINE`]).
pub fn larder_run(repo: &Path, cache: &Path, args: &[&str]) -> Out {
    wait_bounded(
        spawn(larder_cmd(repo, cache, args)),
        &format!("larder {args:?}"),
    )
}

/// Runs `larder ARGS`; panics unless it exits 0.
pub fn larder_ok(repo: &Path, cache: &Path, args: &[&str]) -> Out {
    let o = larder_run(repo, cache, args);
    assert_eq!(o.code, 0, "{}", o.all());
    o
}

/// `larder backup --json PATH`, which must succeed; returns the snapshot id.
pub fn backup_ok(repo: &Path, cache: &Path, src: &Path) -> String {
    let o = larder_ok(repo, cache, &["backup", "--json", path_str(src)]);
    snapshot_id_of(&o)
}

/// The snapshot id in the `--json` summary a backup printed.
pub fn snapshot_id_of(o: &Out) -> String {
    let summary = crate::support::json_lines(&o.out)
        .pop()
        .unwrap_or_else(|| panic!("no summary: {}", o.all()));
    summary["snapshot_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no snapshot id: {}", o.all()))
        .to_string()
}

/// A stream for `backup --stdin-from-command`: `cat` of the files below
/// `dir` (sorted), with what it writes.
pub fn cat_of(dir: &Path) -> (Vec<String>, Vec<u8>) {
    let mut files: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "nothing to cat below {}", dir.display());
    let mut data = Vec::new();
    for f in &files {
        data.extend(fs::read(f).unwrap());
    }
    let mut argv = vec!["cat".to_string()];
    argv.extend(files.iter().map(|f| path_str(f).to_string()));
    (argv, data)
}

/// `larder dump SNAPSHOT /NAME` gives exactly `want` (a stream that
/// `backup --stdin` or `--stdin-from-command` stored).
pub fn dumps_exactly(
    repo: &Path,
    cache: &Path,
    snapshot: &str,
    name: &str,
    want: &[u8],
    what: &str,
) {
    let mut c = larder_cmd(repo, cache, &["dump", snapshot, &format!("/{name}")]);
    c.stdin(Stdio::null()).stderr(Stdio::piped());
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{what}: dump: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.stdout == want,
        "{what}: the stream {name} dumps {} bytes, not the {} stored",
        o.stdout.len(),
        want.len()
    );
}

/// Runs `check` (with `--read-data` if asked): it must exit 0 and report no
/// problem (notices are allowed). Returns what it printed.
pub fn check_passes(repo: &Path, cache: &Path, read_data: bool, when: &str) -> Out {
    let args: &[&str] = if read_data {
        &["check", "--read-data"]
    } else {
        &["check"]
    };
    let o = larder_run(repo, cache, args);
    assert_check_clean(&o, when);
    o
}

/// What a `check` printed says it passed: exit 0, no error, "no errors
/// were found" (notices are allowed).
pub fn assert_check_clean(o: &Out, when: &str) {
    assert!(
        o.code == 0
            && !o.err.lines().any(|l| l.starts_with("error:"))
            && o.out.contains("no errors were found"),
        "check {when}: {}",
        o.all()
    );
}

/// The `notice:` lines a command printed.
pub fn notices(o: &Out) -> Vec<&str> {
    o.err.lines().filter(|l| l.starts_with("notice:")).collect()
}

/// Restores snapshot `id` with the CLI into `target` (which must not
/// exist) and returns where the backed-up directory `src` landed.
pub fn restore_cli(repo: &Path, cache: &Path, id: &str, src: &Path, target: &Path) -> PathBuf {
    larder_ok(
        repo,
        cache,
        &["restore", "-q", id, "--target", path_str(target)],
    );
    target.join(src.strip_prefix("/").unwrap())
}

/// The directories objects live in (packs fan out one level below).
fn object_dirs(repo: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = ["keys", "index", "snapshots", "locks", "packs"]
        .iter()
        .map(|d| repo.join(d))
        .collect();
    if let Ok(rd) = fs::read_dir(repo.join("packs")) {
        for e in rd.flatten() {
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            }
        }
    }
    dirs
}

/// Checks that nothing half-written is visible under a final name: every
/// object (every name not starting with a dot) in every object directory is
/// a regular file whose bytes hash to its name. Returns how many there are.
pub fn assert_objects_whole(repo: &Path) -> usize {
    assert_objects_whole_but(repo, &[])
}

/// [`assert_objects_whole`], leaving out the objects named in `damaged`
/// (damaged on purpose by the test).
pub fn assert_objects_whole_but(repo: &Path, damaged: &[&str]) -> usize {
    let mut n = 0;
    for dir in object_dirs(repo) {
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        for e in rd {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let ft = e.file_type().unwrap();
            if name.starts_with('.')
                || (ft.is_dir() && dir == repo.join("packs"))
                || damaged.contains(&name.as_str())
            {
                continue;
            }
            assert!(ft.is_file(), "{} is not a regular file", e.path().display());
            let bytes = fs::read(e.path()).unwrap();
            assert_eq!(
                Id::of_object(&bytes).to_hex(),
                name,
                "{} does not hash to its name ({} bytes): half-written?",
                e.path().display(),
                bytes.len()
            );
            n += 1;
        }
    }
    n
}

/// Temporary files (`.tmp-…`) left in the object directories.
pub fn temp_files(repo: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in object_dirs(repo) {
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(".tmp-") {
                out.push(e.path());
            }
        }
    }
    out
}

/// Snapshot object names in the repository.
pub fn snapshot_names(repo: &Path) -> BTreeSet<String> {
    fs::read_dir(repo.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect()
}

/// Reads the header of every pack in storage (indexed or not) and checks
/// that no blob is stored in two packs, and that the index cache knows
/// exactly the packs in storage. Returns (packs, blobs).
pub fn assert_each_blob_stored_once(repo: &Repository) -> (usize, usize) {
    let mut home: HashMap<Id, Id> = HashMap::new();
    let listed = repo.backend().list(Kind::Pack).unwrap();
    for e in &listed {
        let pack = Id::from_hex(&e.name).unwrap();
        for b in repo.read_pack_header(&pack, e.size).unwrap() {
            if let Some(first) = home.insert(b.id, pack) {
                panic!("blob {} is stored in pack {first} and in pack {pack}", b.id);
            }
        }
    }
    let stored: BTreeSet<Id> = listed
        .iter()
        .map(|e| Id::from_hex(&e.name).unwrap())
        .collect();
    let indexed: BTreeSet<Id> = crate::support::pack_ids(repo).into_iter().collect();
    assert_eq!(stored, indexed, "packs in storage vs packs in the index");
    (listed.len(), home.len())
}

/// A description of every entry below `root` (type, permission bits,
/// mtime, size and a digest of the bytes, link target): two trees with
/// equal manifests are the same tree, as [`crate::support::assert_same_tree`]
/// sees it.
pub fn manifest(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for rel in crate::support::list_rel(root) {
        let p = root.join(&rel);
        let md = fs::symlink_metadata(&p).unwrap();
        let ft = md.file_type();
        let mtime = crate::support::mtime_ns(&md);
        let mode = md.permissions().mode() & 0o7777;
        let d = if ft.is_file() {
            let digest = Id::of_object(&fs::read(&p).unwrap()).to_hex();
            format!("file {mode:o} {mtime} {} {digest}", md.size())
        } else if ft.is_dir() {
            format!("dir {mode:o} {mtime}")
        } else if ft.is_symlink() {
            format!("link {mtime} {}", fs::read_link(&p).unwrap().display())
        } else {
            format!("other {mode:o} {mtime}")
        };
        out.insert(rel, d);
    }
    out
}

/// Panics naming the entries where two manifests differ.
pub fn assert_same_manifest(
    want: &BTreeMap<String, String>,
    got: &BTreeMap<String, String>,
    what: &str,
) {
    let mut diffs = Vec::new();
    for k in want.keys().chain(got.keys()).collect::<BTreeSet<_>>() {
        if want.get(k) != got.get(k) {
            diffs.push(format!(
                "  {k}: want {:?}, got {:?}",
                want.get(k),
                got.get(k)
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "{what}: {} entries differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// Writes `n` files of `size` random bytes (seeded) into `dir`, with
/// distinct fixed mtimes; returns the bytes written.
pub fn fill(dir: &Path, seed: u64, n: u64, size: usize) -> u64 {
    for i in 0..n {
        let p = dir.join(format!("d{}/f{i:03}.bin", i % 3));
        write(&p, &rand_bytes(seed * 1000 + i, size));
        set_mtime(
            &p,
            1_650_000_000_000_000_000 + (seed * 1000 + i) as i64 * 1_000_001,
        );
    }
    n * size as u64
}
