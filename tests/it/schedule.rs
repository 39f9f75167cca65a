//! Issue 12, end to end through the `larder` binary: `larder run` of a
//! profile (snapshot, retention, record), `schedule status` (ok, failing
//! with the error, never) and the `on-failure` hook, one run per profile at
//! a time, SIGTERM and kill -9 in the middle of a backup, `larder daemon`
//! (runs when due, catches up, stops cleanly), and `schedule install |
//! remove` for systemd (checked by `systemd-analyze verify`) and for a
//! crontab (a fake `crontab` program keeps the table in a file); a
//! profile that backs up a command's output (`stdin-from-command`) beside
//! a profile of paths, failing, and killed mid-stream.
//!
//! Every command runs with TZ=UTC and the state and cache directories
//! inside the backed-up tree, so each backup also shows that larder's own
//! directories are never stored.

use crate::common::{self, PASS, larder_bin};
use crate::faults::wait_bounded;
use crate::support::{pack_files, rand_bytes, run, write};
use serde_json::Value;
use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The exit code of a run refused because another holds the profile.
const BUSY: i32 = 11;

/// A repository, a source tree holding larder's state and cache, a
/// password file and a profiles file.
struct Bed {
    dir: tempfile::TempDir,
    repo: PathBuf,
    home: PathBuf,
    cache: PathBuf,
    state: PathBuf,
    config: PathBuf,
    pass: PathBuf,
}

/// A daily schedule "M H * * *" whose due times are about 12 hours from
/// now (UTC), so no due time passes while a test runs.
fn far_daily() -> String {
    let now = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC);
    format!("{} {} * * *", now.minute(), (now.hour() + 12) % 24)
}

impl Bed {
    fn new() -> Bed {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let (repo, cache) = (dir.path().join("repo"), home.join(".cache/larder"));
        write(&home.join("notes.txt"), b"first version");
        write(&home.join("data/a.bin"), &rand_bytes(1, 200_000));
        drop(common::init_at(&repo, &cache));
        let pass = dir.path().join("pass");
        write(&pass, format!("{PASS}\n").as_bytes());
        std::fs::set_permissions(&pass, std::fs::Permissions::from_mode(0o600)).unwrap();
        Bed {
            repo,
            state: home.join(".local/state/larder"),
            cache,
            home,
            config: dir.path().join("larder.toml"),
            pass,
            dir,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A `[profile.NAME]` table for the bed's repository and tree.
    fn profile(&self, name: &str, extra: &str) -> String {
        format!(
            "[profile.{name}]\nrepository = {:?}\npassword-file = {:?}\npaths = [{:?}]\n\
             retries = 0\n{extra}\n",
            self.repo.display().to_string(),
            self.pass.display().to_string(),
            self.home.display().to_string(),
        )
    }

    fn configure(&self, tables: &[String]) {
        std::fs::write(&self.config, tables.concat()).unwrap();
    }

    /// `larder` with the bed's profiles file, state and cache, and no
    /// repository or password from the environment.
    fn cmd(&self) -> Command {
        let mut c = Command::new(larder_bin());
        c.env("LARDER_CONFIG", &self.config)
            .env("LARDER_STATE_DIR", &self.state)
            .env("LARDER_CACHE_DIR", &self.cache)
            .env("HOME", self.dir.path())
            .env("TZ", "UTC")
            .stdin(Stdio::null());
        for v in [
            "LARDER_PASSWORD",
            "LARDER_PASSWORD_FILE",
            "LARDER_PASSWORD_COMMAND",
            "LARDER_REPOSITORY",
            "XDG_CONFIG_HOME",
            "XDG_STATE_HOME",
            "XDG_CACHE_HOME",
        ] {
            c.env_remove(v);
        }
        c
    }

    /// Runs `larder ARGS`; returns (code, stdout, stderr).
    fn larder(&self, args: &[&str]) -> (i32, String, String) {
        let mut c = self.cmd();
        c.args(args);
        run(c)
    }

    /// `larder --json run PROFILE`, which must exit `want`; its summary.
    fn run_profile(&self, profile: &str, want: i32) -> Value {
        let (code, out, err) = self.larder(&["--json", "run", profile]);
        assert_eq!(code, want, "run {profile}: {out}{err}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    }

    /// `larder schedule status --json`: exit code and the profiles by name.
    fn status(&self) -> (i32, Value) {
        let (code, out, err) = self.larder(&["--json", "schedule", "status"]);
        let list: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
        let mut by_name = serde_json::Map::new();
        for s in list.as_array().unwrap() {
            by_name.insert(s["profile"].as_str().unwrap().to_string(), s.clone());
        }
        (code, Value::Object(by_name))
    }

    /// `larder` on the repository with the test password (not a profile).
    fn repo_cli(&self, args: &[&str]) -> (i32, String, String) {
        let mut c = common::larder(&self.repo, &self.cache);
        c.env("LARDER_STATE_DIR", &self.state).args(args);
        run(c)
    }

    fn snapshot_ids(&self) -> Vec<String> {
        let (code, out, err) = self.repo_cli(&["snapshots", "--json"]);
        assert_eq!(code, 0, "{out}{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_string())
            .collect()
    }

    /// The runs of a profile as recorded, newest first.
    fn runs(&self, profile: &str) -> Vec<larder::schedule::records::RunRecord> {
        let r = larder::schedule::Records::open(&self.state).unwrap();
        r.recent(profile, 100).unwrap()
    }

    /// Starts `larder ARGS` in the background with stdout piped.
    fn spawn(&self, args: &[&str]) -> Child {
        let mut c = self.cmd();
        c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        c.spawn().unwrap()
    }

    /// An exclusive lock on the repository, held by this process (as
    /// another machine's prune would) until the guard is dropped.
    fn hold_exclusive(&self) -> larder::lock::LockGuard {
        let holder = larder::Repository::open(
            std::sync::Arc::new(larder::backend::LocalBackend::new(&self.repo)),
            &larder::keys::Credential::passphrase(PASS),
            &self.dir.path().join("holder-cache"),
        )
        .unwrap();
        holder.lock_exclusive().unwrap()
    }

    /// Starts `larder ARGS daemon` (ARGS: global options) like [`Bed::spawn`].
    fn daemon(&self, args: &[&str]) -> Daemon {
        Daemon(self.spawn(&[args, &["daemon"]].concat()))
    }
}

/// A daemon started by a test, killed if the test ends without stopping it
/// (a failed assertion): it would otherwise run on, holding the
/// descriptors it inherited from the test runner.
struct Daemon(Child);

impl std::ops::Deref for Daemon {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Daemon {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Waits for a file to exist (a hook's sign), panicking after a minute.
fn wait_for(p: &Path, child: &mut Child) {
    let what = format!("{} to appear", p.display());
    crate::faults::wait_until(child, &what, || p.exists());
}

fn sigterm(child: &Child) {
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

/// A `before` hook that marks it started, then blocks until `go` exists.
fn blocking_hook(started: &Path, go: &Path) -> String {
    format!(
        "before = 'touch {}; while [ ! -e {} ]; do sleep 0.05; done'\n",
        started.display(),
        go.display()
    )
}

fn steps(summary: &Value) -> Vec<(String, String)> {
    summary["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["step"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The steps of a run whose prune and check are not due.
fn backup_and_forget_only() -> Vec<(String, String)> {
    pairs(&[
        ("backup", "ok"),
        ("forget", "ok"),
        ("prune", "skipped"),
        ("check", "skipped"),
    ])
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// `larder run` makes a snapshot, applies the profile's retention to its
/// own snapshots, prunes and checks when those are due, and records the
/// run (database, JSON-lines log, `status`); larder's state and cache in
/// the backed-up tree are left out of every snapshot.
#[test]
fn run_makes_a_snapshot_applies_retention_and_records_the_run() {
    let b = Bed::new();
    let daily = far_daily();
    b.configure(&[b.profile(
        "home",
        &format!(
            "schedule = {daily:?}\nkeep-last = 2\nprune = {daily:?}\ncheck = {daily:?}\n\
             check-subset = \"50%\"\n"
        ),
    )]);
    let (code, out, err) = b.larder(&["config", "check"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("[profile.home]") && out.contains("1 profile(s)"),
        "{out}"
    );
    let (code, st) = b.status();
    assert_eq!((code, st["home"]["word"].as_str()), (1, Some("never")));

    let first = b.run_profile("home", 0);
    assert_eq!(first["result"], "ok");
    assert_eq!(
        steps(&first),
        pairs(&[
            ("backup", "ok"),
            ("forget", "ok"),
            ("prune", "ok"),
            ("check", "ok")
        ])
    );
    let mut made = vec![first["snapshot_id"].as_str().unwrap().to_string()];
    for i in 0..2 {
        write(&b.home.join("notes.txt"), format!("version {i}").as_bytes());
        let s = b.run_profile("home", 0);
        // Prune and check ran in the first run; they are not due again.
        assert_eq!(steps(&s), backup_and_forget_only());
        assert!(s["bytes_added"].as_u64().unwrap() > 0, "{s}");
        made.push(s["snapshot_id"].as_str().unwrap().to_string());
    }
    // keep-last = 2: the first snapshot is gone, the two newest stay.
    let mut ids = b.snapshot_ids();
    ids.sort();
    let mut want = made[1..].to_vec();
    want.sort();
    assert_eq!(ids, want);

    let (code, st) = b.status();
    assert_eq!(code, 0, "{st}");
    assert_eq!(st["home"]["word"], "ok");
    assert_eq!(st["home"]["last-run"]["snapshot_id"], made[2].as_str());
    assert_eq!(b.runs("home").len(), 3);
    let log = std::fs::read_to_string(b.state.join("runs.jsonl")).unwrap();
    let ends = log.lines().filter(|l| l.contains("\"run-end\"")).count();
    assert_eq!(ends, 3, "{log}");

    let (code, listed, err) = b.repo_cli(&["ls", "latest"]);
    assert_eq!(code, 0, "{err}");
    assert!(listed.contains("notes.txt"), "{listed}");
    for own in ["runs.db", "runs.jsonl", "index", "known_repositories"] {
        assert!(!listed.contains(own), "{own} was backed up: {listed}");
    }
}

/// Profiles sharing a repository forget only their own snapshots, even
/// where one's paths and tags are among another's: a profile of the tree
/// with `keep-last = 1` leaves alone the snapshots of a profile of the
/// same tree tagged `weekly`, and those of a profile of the tree and one
/// more directory (both of which restic's filter would have given it).
#[test]
fn a_profiles_retention_leaves_profiles_with_more_paths_or_tags_alone() {
    let b = Bed::new();
    let extra = b.path("extra");
    write(&extra.join("x.txt"), b"x");
    let wide = format!(
        "[profile.wide]\nrepository = {:?}\npassword-file = {:?}\npaths = [{:?}, {:?}]\n\
         retries = 0\nkeep-last = 5\n",
        b.repo.display().to_string(),
        b.pass.display().to_string(),
        b.home.display().to_string(),
        extra.display().to_string(),
    );
    b.configure(&[
        b.profile("plain", "keep-last = 1"),
        b.profile("weekly", "tags = [\"weekly\"]\nkeep-last = 5"),
        wide,
    ]);
    let mut kept = Vec::new();
    for profile in ["weekly", "wide", "weekly", "wide"] {
        let s = b.run_profile(profile, 0);
        assert_eq!(steps(&s), backup_and_forget_only(), "{s}");
        kept.push(s["snapshot_id"].as_str().unwrap().to_string());
    }
    let mut plain = Vec::new();
    for i in 0..3 {
        write(&b.home.join("notes.txt"), format!("plain {i}").as_bytes());
        let s = b.run_profile("plain", 0);
        plain.push(s["snapshot_id"].as_str().unwrap().to_string());
    }
    kept.push(plain[2].clone());
    let mut ids = b.snapshot_ids();
    ids.sort();
    kept.sort();
    assert_eq!(ids, kept, "plain's runs made {plain:?}");
}

/// `config check` names the file and line of an error and exits 1.
#[test]
fn config_check_names_the_line_of_an_error() {
    let b = Bed::new();
    b.configure(&[b.profile("home", "schedule = \"daily\"\nkeep-dialy = 7\n")]);
    let (code, out, err) = b.larder(&["config", "check"]);
    assert_eq!(code, 1, "{out}{err}");
    let want = format!("{}:7: unknown key `keep-dialy`", b.config.display());
    assert!(err.contains(&want), "{err}");
    let (code, _, err) = b.larder(&["run", "home"]);
    assert_eq!(code, 1);
    assert!(err.contains(&want), "{err}");
}

/// A profile that worked and then fails (wrong password), and one whose
/// repository is missing: `status` says `failing` with the error and exits
/// non-zero, and `on-failure` runs with the run's facts in its environment.
#[test]
fn status_says_failing_with_the_error_and_the_failure_hook_runs() {
    let b = Bed::new();
    let daily = far_daily();
    let hook = |name: &str| {
        format!(
            "on-failure = 'printf \"%s|%s|%s|%s\" \"$LARDER_PROFILE\" \"$LARDER_RESULT\" \
             \"$LARDER_EXIT_CODE\" \"$LARDER_ERROR\" > {}'\n",
            b.path(name).display()
        )
    };
    let gone = b.profile(
        "gone",
        &format!("schedule = {daily:?}\n{}", hook("gone.hook")),
    );
    let gone = gone.replace(
        &format!("{:?}", b.repo.display().to_string()),
        &format!("{:?}", b.path("nothing-here").display().to_string()),
    );
    b.configure(&[
        b.profile(
            "home",
            &format!("schedule = {daily:?}\n{}", hook("home.hook")),
        ),
        gone,
    ]);
    b.run_profile("home", 0);
    let (code, st) = b.status();
    assert_eq!(st["home"]["word"], "ok");
    assert_eq!(st["gone"]["word"], "never");
    assert_eq!(code, 1, "one profile is not ok");
    assert!(!b.path("home.hook").exists());

    write(&b.pass, b"not the password\n");
    let s = b.run_profile("home", 12);
    assert_eq!(s["result"], "failed");
    let s = b.run_profile("gone", 10);
    assert_eq!(s["result"], "failed");

    let (code, st) = b.status();
    assert_eq!(code, 1);
    assert_eq!(st["home"]["word"], "failing");
    assert!(
        st["home"]["reason"]
            .as_str()
            .unwrap()
            .contains("wrong password"),
        "{st}"
    );
    assert_eq!(st["gone"]["word"], "failing");
    let missing = b.path("nothing-here").display().to_string();
    assert!(
        st["gone"]["last-run"]["error"]
            .as_str()
            .unwrap()
            .contains(&missing),
        "{st}"
    );
    assert!(st["home"]["last-success"]["result"] == "ok", "{st}");

    let home = std::fs::read_to_string(b.path("home.hook")).unwrap();
    let parts: Vec<&str> = home.splitn(4, '|').collect();
    assert_eq!(parts[..3], ["home", "failed", "12"], "{home}");
    assert!(parts[3].contains("wrong password"), "{home}");
    let gone = std::fs::read_to_string(b.path("gone.hook")).unwrap();
    assert!(gone.starts_with("gone|failed|10|"), "{gone}");
    assert!(gone.contains(&missing), "{gone}");
}

/// A run whose repository has a damaged index segment (and a stray file
/// in `index/`), met by an empty cache: the backup step brings the index
/// up to date under its lock and its report names each once; the run
/// still succeeds (the blobs that segment listed are stored again).
#[test]
fn a_run_names_the_index_segments_it_skipped_once() {
    let b = Bed::new();
    b.configure(&[b.profile("home", &format!("schedule = {:?}\n", far_daily()))]);
    b.run_profile("home", 0);
    let index = b.repo.join("index");
    let mut segs: Vec<_> = std::fs::read_dir(&index)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    segs.sort();
    let bad = segs[0].clone();
    let mut bytes = std::fs::read(index.join(&bad)).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(index.join(&bad), bytes).unwrap();
    std::fs::write(index.join("README"), "notes").unwrap();
    std::fs::remove_dir_all(&b.cache).unwrap();

    write(&b.home.join("notes.txt"), b"second version");
    let s = b.run_profile("home", 0);
    assert_eq!(s["result"], "ok", "{s}");
    let backup = &s["steps"][0];
    assert_eq!(backup["step"], "backup", "{s}");
    let message = backup["message"].as_str().unwrap();
    assert_eq!(message.matches(bad.as_str()).count(), 1, "{message}");
    assert_eq!(message.matches("index/README").count(), 1, "{message}");
}

/// `--retry-lock` reaches a run's steps: while another process holds an
/// exclusive lock on the repository, a run of a profile with no retries
/// fails at once as busy; with `--retry-lock 10m` it waits, and once the
/// holder lets go its backup saves the snapshot.
#[test]
fn a_run_with_retry_lock_waits_for_the_repository() {
    let b = Bed::new();
    b.configure(&[b.profile("home", &format!("schedule = {:?}\n", far_daily()))]);
    let x = b.hold_exclusive();
    let s = b.run_profile("home", BUSY);
    assert_eq!(s["result"], "failed", "{s}");
    assert!(b.snapshot_ids().is_empty());

    let mut waiter = b.spawn(&["--json", "--retry-lock", "10m", "run", "home"]);
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        waiter.try_wait().unwrap().is_none(),
        "the run did not wait for the lock"
    );
    drop(x);
    let out = waiter.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(s["result"], "ok", "{s}");
    assert_eq!(
        b.snapshot_ids(),
        vec![s["snapshot_id"].as_str().unwrap().to_string()]
    );
}

/// `larder --retry-lock 10m daemon` passes the wait on to its runs too: a
/// due run (the profile never ran) waits while another process holds the
/// repository's exclusive lock, rather than failing at once with its
/// retries at 0, and makes its backup once the holder lets go.
#[test]
fn a_daemon_with_retry_lock_waits_for_the_repository() {
    let b = Bed::new();
    b.configure(&[b.profile("home", &format!("schedule = {:?}\n", far_daily()))]);
    let x = b.hold_exclusive();
    let mut d = b.daemon(&["--retry-lock", "10m"]);
    let rx = events(&mut d);
    let mut seen = Vec::new();
    next_event(&rx, "run-start", &mut seen);
    let quiet_until = Instant::now() + Duration::from_secs(3);
    while let Ok(e) = rx.recv_timeout(quiet_until.saturating_duration_since(Instant::now())) {
        assert_ne!(
            e["event"], "run-end",
            "the run did not wait for the lock: {e}"
        );
        seen.push(e);
    }
    drop(x);
    let end = next_event(&rx, "run-end", &mut seen);
    assert_eq!(end["result"], "ok", "{end}");
    next_event(&rx, "idle", &mut seen);
    sigterm(&d);
    next_event(&rx, "daemon-stop", &mut seen);
    assert_eq!(d.wait().unwrap().code(), Some(0));
    assert_eq!(b.snapshot_ids().len(), 1);
    let results: Vec<String> = b
        .runs("home")
        .iter()
        .map(|r| r.result.as_str().to_string())
        .collect();
    assert_eq!(results, ["ok"]);
}

/// Two runs of one profile at once: the second exits at once with the
/// busy code and names the process that holds the profile; one with
/// `--wait` runs after the first. Only the two runs that ran made
/// snapshots.
#[test]
fn two_runs_of_one_profile_never_make_two_backups_at_once() {
    let b = Bed::new();
    let (started, go) = (b.path("started"), b.path("go"));
    b.configure(&[b.profile("home", &blocking_hook(&started, &go))]);
    let mut first = b.spawn(&["--json", "run", "home"]);
    wait_for(&started, &mut first);
    let (code, out, err) = b.larder(&["run", "home"]);
    assert_eq!(code, BUSY, "{out}{err}");
    assert!(
        err.contains(&format!("process {}", first.id())),
        "the refusal names the holder: {err}"
    );
    let (_, st) = b.status_named("home");
    assert_eq!(st["running"], first.id());
    let waiting = b.spawn(&["--json", "run", "--wait", "home"]);
    write(&go, b"");
    let a = first.wait_with_output().unwrap();
    assert_eq!(a.status.code(), Some(0));
    let w = waiting.wait_with_output().unwrap();
    assert_eq!(
        w.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&w.stderr)
    );
    let (a, w): (Value, Value) = (
        serde_json::from_slice(&a.stdout).unwrap(),
        serde_json::from_slice(&w.stdout).unwrap(),
    );
    let at = |v: &Value, k: &str| v[k].as_str().unwrap().parse::<jiff::Timestamp>().unwrap();
    assert!(at(&w, "started") >= at(&a, "ended"), "{a} {w}");
    assert_eq!(b.snapshot_ids().len(), 2);
    assert_eq!(b.runs("home").len(), 2, "the refused run is not recorded");
}

impl Bed {
    /// `status --json PROFILE`: exit code and that profile's object.
    fn status_named(&self, name: &str) -> (i32, Value) {
        let (code, out, err) = self.larder(&["--json", "schedule", "status", name]);
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
        (code, v[0].clone())
    }
}

/// Starts `larder run` over 40 MiB of random data and returns it once it
/// has written `packs` more pack files.
fn run_until_packs(b: &Bed, packs: usize) -> Child {
    let before = pack_files(&b.repo).0;
    let mut child = b.spawn(&["run", "home"]);
    let deadline = Instant::now() + Duration::from_secs(120);
    while pack_files(&b.repo).0 < before + packs {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("the run ended ({st}) before it could be stopped");
        }
        assert!(Instant::now() < deadline, "no packs appeared");
        std::thread::sleep(Duration::from_millis(2));
    }
    child
}

/// SIGTERM in the middle of a backup stops the run cleanly (exit 130,
/// recorded as interrupted, no snapshot); kill -9 in the middle of the
/// next leaves a run the next `larder run` closes as interrupted, and
/// that run succeeds and the repository checks clean.
#[test]
fn sigterm_and_kill_9_mid_backup_then_the_next_run_succeeds() {
    let b = Bed::new();
    for i in 0..8u64 {
        write(
            &b.home.join(format!("big/f{i}.bin")),
            &rand_bytes(900 + i, 5 << 20),
        );
    }
    b.configure(&[b.profile("home", "keep-last = 5\n")]);

    let child = run_until_packs(&b, 6);
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = b.runs("home");
    assert_eq!(runs[0].result.as_str(), "interrupted", "{runs:?}");
    assert!(b.snapshot_ids().is_empty());

    let mut child = run_until_packs(&b, 6);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(b.runs("home")[0].result.as_str(), "running");
    assert!(b.snapshot_ids().is_empty());

    let s = b.run_profile("home", 0);
    assert_eq!(s["result"], "ok", "{s}");
    let runs = b.runs("home");
    let results: Vec<&str> = runs.iter().map(|r| r.result.as_str()).collect();
    assert_eq!(results, ["ok", "interrupted", "interrupted"]);
    assert_eq!(b.snapshot_ids().len(), 1);
    let (code, out, err) = b.repo_cli(&["check"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// Reads a daemon's stdout lines into a channel.
fn events(child: &mut Child) -> mpsc::Receiver<Value> {
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && tx.send(v).is_err()
            {
                break;
            }
        }
    });
    rx
}

/// The next event named `name`, skipping others (collected into `seen`).
fn next_event(rx: &mpsc::Receiver<Value>, name: &str, seen: &mut Vec<Value>) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let e = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no {name} event; saw {seen:?}"));
        seen.push(e.clone());
        if e["event"] == name {
            return e;
        }
    }
}

/// `larder daemon` with a schedule every two seconds runs the profile
/// again and again, and on SIGTERM during a run stops after it: the run is
/// recorded as interrupted and the daemon exits 0.
#[test]
fn daemon_runs_when_due_and_stops_cleanly_on_sigterm() {
    let b = Bed::new();
    let (started, go) = (b.path("started"), b.path("go"));
    // Runs 1 and 2 go through; run 3 blocks in its before hook.
    let hook = format!(
        "before = 'n=$(cat {c} 2>/dev/null || echo 0); echo $((n+1)) > {c}; \
         if [ $n -ge 2 ]; then touch {s}; while [ ! -e {g} ]; do sleep 0.05; done; fi'\n",
        c = b.path("count").display(),
        s = started.display(),
        g = go.display()
    );
    b.configure(&[b.profile(
        "fast",
        &format!("schedule = \"*/2 * * * * *\"\nkeep-last = 5\n{hook}"),
    )]);
    let mut d = b.daemon(&[]);
    let rx = events(&mut d);
    let mut seen = Vec::new();
    for _ in 0..2 {
        let end = next_event(&rx, "run-end", &mut seen);
        assert_eq!(end["result"], "ok", "{end}");
    }
    wait_for(&started, &mut d);
    sigterm(&d);
    write(&go, b"");
    let end = next_event(&rx, "run-end", &mut seen);
    assert_eq!(end["result"], "interrupted", "{end}");
    next_event(&rx, "daemon-stop", &mut seen);
    let st = d.wait().unwrap();
    assert_eq!(st.code(), Some(0));
    let results: Vec<String> = b
        .runs("fast")
        .iter()
        .map(|r| r.result.as_str().to_string())
        .collect();
    assert_eq!(results, ["interrupted", "ok", "ok"]);
    assert_eq!(b.snapshot_ids().len(), 2);
}

/// The daemon catches up a due time that passed while it was stopped, once,
/// and does not run a profile whose last run is after its latest due time.
/// (The gap is made by moving the recorded run a day back.)
#[test]
fn daemon_catches_up_a_run_missed_while_it_was_stopped() {
    let b = Bed::new();
    b.configure(&[b.profile("home", &format!("schedule = {:?}\n", far_daily()))]);
    // Never ran: due at once. Then not due: it idles until stopped.
    let daemon_runs = |b: &Bed| -> usize {
        let mut d = b.daemon(&[]);
        let rx = events(&mut d);
        let mut seen = Vec::new();
        next_event(&rx, "idle", &mut seen);
        sigterm(&d);
        next_event(&rx, "daemon-stop", &mut seen);
        assert_eq!(d.wait().unwrap().code(), Some(0));
        let idle = seen.iter().position(|e| e["event"] == "idle").unwrap();
        // Any run happens before the first idle: at start, not later.
        seen[..idle]
            .iter()
            .filter(|e| e["event"] == "run-end" && e["result"] == "ok")
            .count()
    };
    assert_eq!(
        daemon_runs(&b),
        1,
        "the first start runs the never-run profile"
    );
    assert_eq!(daemon_runs(&b), 0, "nothing is due");
    // The daemon was "stopped" for a day: the latest due time is missed.
    let db = rusqlite::Connection::open(b.state.join("runs.db")).unwrap();
    let day: i64 = 86_400 * 1_000_000_000;
    db.execute(
        "UPDATE runs SET started_ns = started_ns - ?1, ended_ns = ended_ns - ?1",
        [day],
    )
    .unwrap();
    drop(db);
    let (_, st) = b.status_named("home");
    assert_eq!(st["word"], "late", "{st}");
    assert_eq!(daemon_runs(&b), 1, "the missed run is caught up once");
    assert_eq!(daemon_runs(&b), 0);
    assert_eq!(b.snapshot_ids().len(), 2);
    let (code, st) = b.status_named("home");
    assert_eq!((code, st["word"].as_str()), (0, Some("ok")));
}

/// `schedule install --unit-dir D` writes a service and a timer that
/// `systemd-analyze verify` accepts; installing again changes nothing;
/// `remove` deletes exactly those two files.
#[test]
fn schedule_install_writes_units_systemd_accepts_and_remove_removes_them() {
    let b = Bed::new();
    b.configure(&[
        b.profile("home", "schedule = \"daily\"\nnice = 5\n"),
        b.profile("nosched", ""),
    ]);
    let units = b.path("units");
    write(
        &units.join("other.service"),
        b"[Service]\nExecStart=/bin/true\n",
    );
    let install = |b: &Bed| {
        let (code, out, err) = b.larder(&[
            "schedule",
            "install",
            "--unit-dir",
            units.to_str().unwrap(),
            "--all",
        ]);
        assert_eq!(code, 0, "{out}{err}");
        out
    };
    let out = install(&b);
    assert!(
        out.contains("wrote") && out.contains("enable --now larder-home.timer"),
        "{out}"
    );
    let service = units.join("larder-home.service");
    let timer = units.join("larder-home.timer");
    let (s1, t1) = (
        std::fs::read(&service).unwrap(),
        std::fs::read(&timer).unwrap(),
    );
    let mtime = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
    let (m1, m2) = (mtime(&service), mtime(&timer));
    let text = String::from_utf8_lossy(&s1).into_owned();
    let exec = text.lines().find(|l| l.starts_with("ExecStart=")).unwrap();
    assert!(
        exec.contains(" run --config ") && exec.ends_with(" home"),
        "{text}"
    );
    assert!(text.contains("Nice=5"), "{text}");
    assert!(String::from_utf8_lossy(&t1).contains("OnCalendar=*-*-* 00:00:00"));
    assert!(!units.join("larder-nosched.timer").exists());

    let out = install(&b);
    assert!(out.contains("unchanged") && !out.contains("wrote"), "{out}");
    assert_eq!(std::fs::read(&service).unwrap(), s1);
    assert_eq!(std::fs::read(&timer).unwrap(), t1);
    assert_eq!((mtime(&service), mtime(&timer)), (m1, m2));

    match Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args([&service, &timer])
        .output()
    {
        Ok(o) => assert!(
            o.status.success(),
            "systemd-analyze verify: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) if std::env::var_os("LARDER_ALLOW_SKIP").is_some_and(|v| v == "1") => {
            eprintln!("SKIP systemd-analyze verify: {e}");
        }
        Err(e) => panic!("systemd-analyze is needed (set LARDER_ALLOW_SKIP=1 to skip): {e}"),
    }

    let (code, out, err) = b.larder(&[
        "schedule",
        "remove",
        "--unit-dir",
        units.to_str().unwrap(),
        "home",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let left: Vec<String> = std::fs::read_dir(&units)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["other.service"]);
}

/// A fake `crontab` program first on PATH that keeps the table in a file.
/// `-l` prints it, writes its pid to `listing` and then sleeps for
/// `$FAKE_CRONTAB_DELAY` seconds before it touches `listed.PID`; `-` replaces
/// it through a rename, as the real program installs a table whole.
struct FakeCrontab {
    table: PathBuf,
    listing: PathBuf,
    listed: PathBuf,
    path: String,
}

impl FakeCrontab {
    fn new(b: &Bed) -> FakeCrontab {
        let bin = b.path("bin");
        let table = b.path("crontab.txt");
        let listing = b.path("crontab.listing");
        let listed = b.path("crontab.listed");
        write(
            &bin.join("crontab"),
            format!(
                "#!/bin/sh\nf={}\ncase \"$1\" in\n\
                 -l) [ -e \"$f\" ] || {{ echo \"no crontab for $(id -un)\" >&2; exit 1; }}; cat \"$f\";\
                 echo $$ > {}; sleep \"${{FAKE_CRONTAB_DELAY:-0}}\"; touch {}.$$;;\n\
                 -) cat > \"$f.$$\" && mv \"$f.$$\" \"$f\";;\n*) exit 2;;\nesac\n",
                table.display(),
                listing.display(),
                listed.display()
            )
            .as_bytes(),
        );
        std::fs::set_permissions(bin.join("crontab"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        FakeCrontab {
            table,
            listing,
            listed,
            path,
        }
    }

    /// `larder schedule ARGS` using this crontab, whose `-l` sleeps `delay`
    /// seconds.
    fn cmd(&self, b: &Bed, args: &[&str], delay: f64) -> Command {
        let mut c = b.cmd();
        c.env("PATH", &self.path)
            .env("FAKE_CRONTAB_DELAY", delay.to_string())
            .arg("schedule")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.table).unwrap()
    }
}

/// `schedule install --cron` with a fake `crontab` on PATH adds a marked
/// block whose command really runs the profile; installing again changes
/// nothing; `remove` gives back the table byte for byte.
#[test]
fn schedule_install_cron_adds_marked_lines_and_remove_restores_the_table() {
    let b = Bed::new();
    b.configure(&[b.profile("home", "schedule = \"hourly\"\n")]);
    let fake = FakeCrontab::new(&b);
    let table = fake.table.clone();
    let cron = |args: &[&str]| {
        let (code, out, err) = run(fake.cmd(&b, args, 0.0));
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        out
    };
    // The user's own table, without a final newline.
    let original = "MAILTO=me@example.org\n0 3 * * * /usr/bin/true # mine";
    std::fs::write(&table, original).unwrap();
    cron(&["install", "--cron", "home"]);
    let installed = std::fs::read_to_string(&table).unwrap();
    assert!(installed.starts_with(original), "{installed}");
    let line = installed
        .lines()
        .find(|l| l.contains(" run --if-due "))
        .unwrap_or_else(|| panic!("no run line: {installed}"));
    assert!(
        installed.contains("# BEGIN larder profile home")
            && installed.contains("# END larder profile home")
    );
    assert!(line.starts_with("0,15,30,45 * * * * "), "{line}");
    cron(&["install", "--cron", "home"]);
    assert_eq!(std::fs::read_to_string(&table).unwrap(), installed);

    // What cron would run: the command after the five time fields.
    let command: String = line.split(' ').skip(5).collect::<Vec<_>>().join(" ");
    // cron's environment: little more than PATH and HOME.
    let mut sh = Command::new("sh");
    sh.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", b.dir.path())
        .env("TZ", "UTC")
        .arg("-c")
        .arg(&command);
    let (code, out, err) = run(sh);
    assert_eq!(code, 0, "{command}: {out}{err}");
    assert_eq!(
        b.snapshot_ids().len(),
        1,
        "the crontab line ran the profile"
    );
    let (_, st) = b.status_named("home");
    assert_eq!(st["word"], "ok", "{st}");

    cron(&["remove", "--cron", "home"]);
    assert_eq!(std::fs::read_to_string(&table).unwrap(), original);
}

/// `crontab` has no lock of its own. Three `schedule install --cron` of
/// three profiles at once, each `crontab -l` held 0.4 s so that, without
/// a lock, all three would read the table before any of them writes it:
/// every block lands, because the edits take turns on the state
/// directory's crontab lock. Three
/// `remove`s at once then give back the user's table byte for byte. An
/// install killed (SIGKILL) while it holds the lock leaves the table as
/// it was, and the next install goes ahead before the killed one's
/// `crontab -l` has even finished.
#[test]
fn schedule_edits_of_the_crontab_at_once_or_killed_lose_no_block() {
    let b = Bed::new();
    let names = ["home", "work", "media"];
    let tables: Vec<String> = names
        .iter()
        .map(|n| b.profile(n, "schedule = \"hourly\"\n"))
        .collect();
    b.configure(&tables);
    let fake = FakeCrontab::new(&b);
    let original = "MAILTO=me@example.org\n0 3 * * * /usr/bin/true # mine\n";
    std::fs::write(&fake.table, original).unwrap();
    // The profiles with a whole block, in the order of `names`.
    let blocks = |text: &str| -> Vec<&str> {
        names
            .iter()
            .copied()
            .filter(|n| {
                text.contains(&format!("# BEGIN larder profile {n};"))
                    && text.contains(&format!("# END larder profile {n}\n"))
            })
            .collect()
    };

    let started: Vec<Child> = names
        .iter()
        .map(|n| {
            fake.cmd(&b, &["install", "--cron", n], 0.4)
                .spawn()
                .unwrap()
        })
        .collect();
    for (child, n) in started.into_iter().zip(names) {
        let o = wait_bounded(child, n);
        assert_eq!(o.code, 0, "install {n}: {}", o.all());
    }
    let installed = fake.text();
    assert!(installed.starts_with(original), "{installed}");
    assert_eq!(blocks(&installed), names, "a block was lost:\n{installed}");
    assert_eq!(
        installed.matches(" run --if-due ").count(),
        3,
        "{installed}"
    );

    let started: Vec<Child> = names
        .iter()
        .map(|n| fake.cmd(&b, &["remove", "--cron", n], 0.4).spawn().unwrap())
        .collect();
    for (child, n) in started.into_iter().zip(names) {
        let o = wait_bounded(child, n);
        assert_eq!(o.code, 0, "remove {n}: {}", o.all());
    }
    assert_eq!(fake.text(), original, "the removals left a block");

    // Killed while holding the lock: its `crontab -l` sleeps 30 s.
    let _ = std::fs::remove_file(&fake.listing);
    let mut killed = fake
        .cmd(&b, &["install", "--cron", "home"], 30.0)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !fake.listing.exists() {
        assert!(killed.try_wait().unwrap().is_none(), "the install ended");
        assert!(Instant::now() < deadline, "crontab -l never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    killed.kill().unwrap();
    killed.wait().unwrap();
    let lister = std::fs::read_to_string(&fake.listing).unwrap();
    assert_eq!(
        fake.text(),
        original,
        "the killed install changed the table"
    );
    let (code, out, err) = run(fake.cmd(&b, &["install", "--cron", "work"], 0.0));
    assert_eq!(code, 0, "install after the kill: {out}{err}");
    let lister_done = PathBuf::from(format!("{}.{}", fake.listed.display(), lister.trim()));
    assert!(
        !lister_done.exists(),
        "the next install waited for the killed one's crontab -l to end"
    );
    let _ = Command::new("kill").arg(lister.trim()).status();
    let after = fake.text();
    assert!(after.starts_with(original), "{after}");
    assert_eq!(blocks(&after), ["work"], "{after}");
}

/// The user's crontab (`None`: no table), and `crontab` putting one back.
fn root_crontab() -> Option<String> {
    let out = Command::new("crontab").arg("-l").output().unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn set_crontab(table: Option<&str>) {
    match table {
        Some(t) => {
            let mut c = Command::new("crontab")
                .arg("-")
                .stdin(Stdio::piped())
                .spawn()
                .unwrap();
            std::io::Write::write_all(&mut c.stdin.take().unwrap(), t.as_bytes()).unwrap();
            assert!(c.wait().unwrap().success());
        }
        None => {
            let _ = Command::new("crontab")
                .arg("-r")
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Puts the crontab found at the start back, and stops the cron daemon the
/// test started, whatever happens in between.
struct CronGuard {
    original: Option<String>,
    daemon: Option<Child>,
}

impl Drop for CronGuard {
    fn drop(&mut self) {
        set_crontab(self.original.as_deref());
        if let Some(mut d) = self.daemon.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

/// Under a real cron daemon (Debian's `cron`, which `.ci/run` installs; the
/// test starts it unless one runs already): `schedule install --cron` of an
/// every-minute profile makes a snapshot within two minutes, `status` shows
/// it, and `remove` leaves the crontab as it was. Needs root (it edits
/// root's own crontab, and puts it back).
#[test]
fn real_cron_runs_an_installed_profile_and_remove_restores_the_crontab() {
    let uid = Command::new("id").arg("-u").output().unwrap();
    let root = String::from_utf8_lossy(&uid.stdout).trim() == "0";
    let have_cron = Path::new("/usr/sbin/cron").exists()
        && Command::new("sh")
            .args(["-c", "command -v crontab"])
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success();
    if !root || !have_cron {
        let why = "a real cron test needs root and Debian's cron (see .ci/run)";
        if std::env::var_os("LARDER_ALLOW_SKIP").is_some_and(|v| v == "1") {
            eprintln!("SKIP: {why}");
            return;
        }
        panic!("{why} (set LARDER_ALLOW_SKIP=1 to skip)");
    }
    let running = Command::new("pgrep")
        .args(["-x", "cron"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let mut guard = CronGuard {
        original: root_crontab(),
        daemon: None,
    };
    // The user's own table, which must come back byte for byte.
    let mine = "MAILTO=\"\"\n# the user's own line\n17 4 * * * /bin/true\n";
    set_crontab(Some(mine));
    let b = Bed::new();
    let cron_log = b.path("cron.log");
    if !running {
        let log = std::fs::File::create(&cron_log).unwrap();
        // In a session of its own and with a plain environment, as an init
        // system would start it (not as a child of the test harness).
        guard.daemon = Some(
            Command::new("setsid")
                .args(["/usr/sbin/cron", "-f", "-L", "15"])
                .env_clear()
                .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        // cron notices a changed crontab by the spool directory's mtime in
        // whole seconds: a change within the second of its first scan would
        // go unseen, so the install comes a later second.
        std::thread::sleep(Duration::from_secs(2));
    }

    b.configure(&[b.profile("minute", "schedule = \"* * * * *\"\n")]);
    let (code, out, err) = b.larder(&["schedule", "install", "--cron", "minute"]);
    assert_eq!(code, 0, "{out}{err}");
    let installed = root_crontab().unwrap_or_default();
    assert!(installed.starts_with(mine), "{installed}");
    assert!(
        installed.contains("# BEGIN larder profile minute"),
        "{installed}"
    );

    // cron wakes at each minute's start: two minutes and a margin.
    let deadline = Instant::now() + Duration::from_secs(150);
    while b.snapshot_ids().is_empty() {
        if Instant::now() >= deadline {
            let (_, st) = b.status_named("minute");
            panic!(
                "no snapshot 150 s after installing the crontab line:\n{installed}\n\
                 status: {st}\ncron started here: {}; its log:\n{}",
                !running,
                std::fs::read_to_string(&cron_log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    // The run that made it is recorded where `status` reads.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, st) = b.status_named("minute");
        if st["word"] == "ok" {
            break;
        }
        assert!(Instant::now() < deadline, "status after cron's run: {st}");
        std::thread::sleep(Duration::from_secs(1));
    }

    let (code, out, err) = b.larder(&["schedule", "remove", "--cron", "minute"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(root_crontab().as_deref(), Some(mine));
    drop(guard);
}

/// A text "dump" of about 1 MiB, different for each `seed`.
fn sql_dump(seed: u64) -> String {
    let hex: String = rand_bytes(seed, 16_000)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    hex.as_bytes()
        .chunks(64)
        .enumerate()
        .map(|(i, c)| {
            format!(
                "INSERT INTO t VALUES ({i}, '{}');\n",
                String::from_utf8_lossy(c)
            )
        })
        .collect::<String>()
        .repeat(30)
}

/// A profile of paths and one of a command's output in one repository:
/// the stream profile stores the output as `/db.sql`, and each profile's
/// retention keeps its own snapshots only. A command that fails fails the
/// run (exit 1, no snapshot, `status` names the command). A stream run
/// held mid-stream while the other profile runs to its end, then killed
/// with SIGKILL: the other run succeeds, `check` passes, and the next
/// stream run completes and dumps exactly.
#[test]
fn a_stream_profile_stores_a_commands_output_beside_a_profile_of_paths() {
    let b = Bed::new();
    let dump = b.path("dump.sql");
    let (fail, hold, waiting, go) = (
        b.path("fail"),
        b.path("hold"),
        b.path("waiting"),
        b.path("go"),
    );
    let q = |p: &Path| format!("'{}'", p.display());
    let daily = far_daily();
    let script = format!(
        "cat {d}; if [ -e {f} ]; then exit 5; fi; \
         if [ -e {h} ]; then touch {w}; while [ ! -e {g} ]; do sleep 0.05; done; cat {d}; fi",
        d = q(&dump),
        f = q(&fail),
        h = q(&hold),
        w = q(&waiting),
        g = q(&go)
    );
    let db = format!(
        "[profile.db]\nrepository = {:?}\npassword-file = {:?}\nretries = 0\nkeep-last = 2\n\
         schedule = {daily:?}\n\
         stdin-from-command = [\"sh\", \"-c\", {script:?}]\nstdin-filename = \"db.sql\"\n",
        b.repo.display().to_string(),
        b.pass.display().to_string(),
    );
    b.configure(&[b.profile("home", "keep-last = 1\n"), db]);
    let (code, out, err) = b.larder(&["config", "check"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("stdin-from-command: sh -c cat") && out.contains("(stored as /db.sql)"),
        "{out}"
    );

    let dumped = |id: &str| {
        let (code, out, err) = b.repo_cli(&["dump", id, "/db.sql"]);
        assert_eq!(code, 0, "{err}");
        out
    };
    let by_paths = || {
        let (code, out, err) = b.repo_cli(&["snapshots", "--json"]);
        assert_eq!(code, 0, "{out}{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        let mut m: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for s in v.as_array().unwrap() {
            m.entry(s["paths"][0].as_str().unwrap().to_string())
                .or_default()
                .push(s["id"].as_str().unwrap().to_string());
        }
        m
    };
    b.run_profile("home", 0);
    let mut last = String::new();
    for seed in 1..=3 {
        let text = sql_dump(seed);
        std::fs::write(&dump, &text).unwrap();
        let s = b.run_profile("db", 0);
        assert_eq!(steps(&s), backup_and_forget_only());
        last = s["snapshot_id"].as_str().unwrap().to_string();
        assert!(dumped(&last) == text, "run {seed}: the dump differs");
    }
    let home = b.home.display().to_string();
    let m = by_paths();
    assert_eq!(
        m["/db.sql"].len(),
        2,
        "keep-last = 2 of the stream's: {m:?}"
    );
    assert!(m["/db.sql"].contains(&last));
    assert_eq!(
        m[&home].len(),
        1,
        "the stream's retention left the home snapshot: {m:?}"
    );

    // A failing command: the run fails and saves nothing.
    write(&fail, b"");
    let s = b.run_profile("db", 1);
    assert_eq!(s["result"], "failed");
    assert_eq!(by_paths()["/db.sql"].len(), 2);
    let (_, st) = b.status();
    let reason = st["db"]["reason"].as_str().unwrap_or_default().to_string();
    assert!(
        st["db"]["word"] == "failing"
            && reason.contains("command `sh -c")
            && reason.contains("exit status: 5"),
        "{st}"
    );
    std::fs::remove_file(&fail).unwrap();

    // Held mid-stream beside a run of the other profile, then killed.
    write(&hold, b"");
    let mut child = b.spawn(&["--json", "run", "db"]);
    wait_for(&waiting, &mut child);
    write(&b.home.join("notes.txt"), b"changed beside the stream");
    let s = b.run_profile("home", 0);
    assert_eq!(s["result"], "ok", "{s}");
    child.kill().unwrap();
    write(&go, b"");
    let o = wait_bounded(child, "the killed stream run");
    assert_ne!(o.code, 0, "{}", o.all());
    let (code, out, err) = b.repo_cli(&["check"]);
    assert_eq!(code, 0, "after the kill: {out}{err}");
    let s = b.run_profile("db", 0);
    let id = s["snapshot_id"].as_str().unwrap();
    let text = std::fs::read_to_string(&dump).unwrap();
    assert!(
        dumped(id) == text.repeat(2),
        "the stream after the kill differs"
    );
    let (code, out, err) = b.repo_cli(&["check", "--read-data"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(by_paths()[&home].len(), 1);
}

/// A profile with `skip-if-unchanged`: a second run with nothing changed
/// saves no snapshot (the run is ok, its backup step says so); a change
/// makes the next run save one.
#[test]
fn a_profile_that_skips_unchanged_backups() {
    let b = Bed::new();
    b.configure(&[b.profile("home", "skip-if-unchanged = true\n")]);
    let first = b.run_profile("home", 0);
    assert!(first["snapshot_id"].is_string(), "{first}");
    let second = b.run_profile("home", 0);
    assert_eq!(second["result"], "ok", "{second}");
    let backup = &second["steps"][0];
    assert!(
        backup["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no snapshot saved"),
        "{second}"
    );
    assert_eq!(b.snapshot_ids().len(), 1);
    write(&b.home.join("notes.txt"), b"changed");
    let third = b.run_profile("home", 0);
    assert!(third["snapshot_id"].is_string(), "{third}");
    assert_eq!(b.snapshot_ids().len(), 2);
}

/// Compressible text no chunk of which repeats: `n` numbered lines.
fn numbered_lines(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        out.extend_from_slice(format!("line {i:08} of a log that compresses well\n").as_bytes());
    }
    out
}

/// A profile's `pack-size` and `compression` reach its run: 14 MiB of
/// text that zstd shrinks several times over are stored raw (the packs
/// hold at least every byte) in packs closed at 4 MiB; the same tree with
/// the repository's own settings is a fraction of that in fewer packs.
#[test]
fn a_profiles_storage_settings_reach_its_run() {
    let b = Bed::new();
    let text = numbered_lines(14 << 20 >> 6);
    write(&b.home.join("log.txt"), &text);
    b.configure(&[b.profile("raw", "pack-size = 4\ncompression = \"off\"\n")]);
    let r = b.run_profile("raw", 0);
    assert!(r["snapshot_id"].is_string(), "{r}");
    let (packs, bytes) = pack_files(&b.repo);
    assert!(
        bytes >= text.len() as u64,
        "{bytes} bytes stored of {}",
        text.len()
    );
    assert!(packs >= 4, "{packs} packs for {bytes} bytes at 4 MiB");

    let b2 = Bed::new();
    write(&b2.home.join("log.txt"), &text);
    b2.configure(&[b2.profile("plain", "")]);
    b2.run_profile("plain", 0);
    let (packs2, bytes2) = pack_files(&b2.repo);
    assert!(
        bytes2 * 3 < text.len() as u64,
        "{bytes2} bytes with compression"
    );
    assert!(
        packs2 < packs,
        "{packs2} packs at the repository's own size"
    );
}
