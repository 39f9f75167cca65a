//! Hostile storage (issue 10, items 3 and 6): whatever the storage holds in
//! place of an object (a symbolic link, a FIFO, a device node, a directory, an
//! oversized or junk file, too many key files) gives a prompt error or a
//! skip that names the object: never a hang, an unbounded read or a followed
//! link. Every command runs under a deadline and an address-space cap, so a
//! hang or a runaway allocation fails the test instead of stalling CI or
//! exhausting the machine's memory.

use crate::common::{PASS, TEST_WF, TestRepo, larder};
use larder::crypto::MasterKey;
use larder::keys::{NewKey, make_key_file};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one command may run before it counts as hung and is killed
/// (generous: the machine is shared; these repositories take well under a
/// second). `LARDER_TEST_DEADLINE_SECS` overrides it.
fn deadline() -> Duration {
    let secs = std::env::var("LARDER_TEST_DEADLINE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    Duration::from_secs(secs)
}

/// Address space one command may map, in KiB: far more than larder needs for
/// these tiny repositories, far less than reading `/dev/zero` to the end or a
/// 4 GiB file whole. Going over makes an allocation fail, which aborts the
/// process (a signal), which the tests report.
const ADDRESS_SPACE_KIB: u64 = 3 << 20;

/// How a command ended.
struct Outcome {
    what: String,
    code: Option<i32>,
    timed_out: bool,
    stdout: String,
    stderr: String,
}

impl Outcome {
    fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// Panics unless the command ended by itself, before the deadline and
    /// with an exit code (not killed by a signal, such as the abort of a
    /// failed allocation under the address-space cap).
    fn assert_finished(&self) {
        assert!(
            !self.timed_out,
            "{}: still running after {:?} (hung); killed\n{}",
            self.what,
            deadline(),
            self.all()
        );
        assert!(
            self.code.is_some(),
            "{}: killed by a signal (out of memory under the {} KiB cap?)\n{}",
            self.what,
            ADDRESS_SPACE_KIB,
            self.all()
        );
    }

    /// Asserts the exit code.
    fn assert_code(&self, want: i32) {
        assert_eq!(self.code, Some(want), "{}\n{}", self.what, self.all());
    }

    /// Asserts a failure (any exit code but 0).
    fn assert_failed(&self) {
        assert_ne!(
            self.code,
            Some(0),
            "{}: succeeded\n{}",
            self.what,
            self.all()
        );
    }

    /// Asserts that the output mentions every one of `words`.
    fn assert_says(&self, words: &[&str]) {
        let all = self.all();
        for w in words {
            assert!(all.contains(w), "{}: no {w:?} in\n{all}", self.what);
        }
    }
}

/// Runs `base` (a `larder` command) under the deadline and the address-space
/// cap, and says how it ended.
fn run_bounded(base: &Command) -> Outcome {
    let mut c = crate::support::under_ulimit(&format!("-v {ADDRESS_SPACE_KIB}"), base);
    // Few malloc arenas, so the cap measures data, not reserved arenas.
    c.env("MALLOC_ARENA_MAX", "2")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let what = format!(
        "larder {}",
        base.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut child = c.spawn().unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > deadline() {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Outcome {
        what,
        code: status.and_then(|s| s.code()),
        timed_out: status.is_none(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// A repository with one snapshot of a small tree, and a place outside it.
struct Fixture {
    t: TestRepo,
    src: PathBuf,
    snap: String,
    elsewhere: PathBuf,
    runs: std::cell::Cell<usize>,
}

impl Fixture {
    fn new() -> Fixture {
        let t = TestRepo::new();
        drop(t.init());
        let src = t.dir.path().join("src");
        std::fs::create_dir_all(src.join("d")).unwrap();
        std::fs::write(src.join("a.txt"), b"hello, hostile storage\n").unwrap();
        let noise: Vec<u8> = (0..100_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        std::fs::write(src.join("b.bin"), noise).unwrap();
        std::fs::write(src.join("d/c.txt"), b"nested\n").unwrap();
        let elsewhere = t.dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let f = Fixture {
            t,
            src,
            snap: String::new(),
            elsewhere,
            runs: std::cell::Cell::new(0),
        };
        let src = f.src.to_str().unwrap().to_string();
        let o = f.larder(&["backup", "-q", &src]);
        o.assert_finished();
        o.assert_code(0);
        let snap = f.names("snapshots").pop().unwrap();
        Fixture { snap, ..f }
    }

    fn repo(&self) -> PathBuf {
        self.t.repo_path()
    }

    /// The object names in directory `dir` of the repository, sorted.
    fn names(&self, dir: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.repo().join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        v.sort();
        v
    }

    /// The pack of trees, as a path relative to the repository: the
    /// backup wrote two packs, its data (100 kB) and its trees (a few
    /// hundred bytes, the smaller). Every command that reads the snapshot
    /// reads this one first.
    fn pack(&self) -> String {
        let mut packs: Vec<(u64, String)> = Vec::new();
        for sub in self.names("packs") {
            for p in self.names(&format!("packs/{sub}")) {
                let rel = format!("packs/{sub}/{p}");
                let len = std::fs::metadata(self.repo().join(&rel)).unwrap().len();
                packs.push((len, rel));
            }
        }
        packs.sort();
        assert_eq!(packs.len(), 2, "{packs:?}");
        assert!(packs[0].0 < 10_000, "{packs:?}");
        packs.swap_remove(0).1
    }

    /// A fresh cache and restore target for each run, so every run reads the
    /// repository itself.
    fn fresh(&self, what: &str) -> PathBuf {
        let n = self.runs.get() + 1;
        self.runs.set(n);
        self.t.dir.path().join(format!("{what}-{n}"))
    }

    /// A `larder` command on the fixture's repository.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = larder(&self.repo(), &self.fresh("cache"));
        c.args(args);
        c
    }

    /// Runs `larder args` (bounded).
    fn larder(&self, args: &[&str]) -> Outcome {
        run_bounded(&self.cmd(args))
    }

    /// The commands every hostile object is tried with, by label.
    fn commands(&self) -> Vec<(&'static str, Vec<String>)> {
        let target = self.fresh("target").to_string_lossy().into_owned();
        let src = self.src.to_string_lossy().into_owned();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
        vec![
            ("snapshots", s(&["snapshots"])),
            ("restore", s(&["restore", &self.snap, "--target", &target])),
            ("check", s(&["check"])),
            ("check --read-data", s(&["check", "--read-data"])),
            ("backup", s(&["backup", "-q", &src])),
        ]
    }

    /// Moves object `rel` out of the repository (so a link can point at it
    /// from there), returning where it went.
    fn move_aside(&self, rel: &str) -> PathBuf {
        let from = self.repo().join(rel);
        let to = self.elsewhere.join(from.file_name().unwrap());
        std::fs::rename(&from, &to).unwrap();
        to
    }

    /// Plants each hostile thing at `rel` in turn (`real` is the real object
    /// outside the repository, the target of [`Thing::LinkElsewhere`]), runs
    /// every command, and hands each outcome, once asserted finished, to
    /// `expect`.
    fn each_thing(&self, rel: &str, real: &Path, expect: impl Fn(Thing, &str, &Outcome)) {
        let at = self.repo().join(rel);
        for thing in Thing::ALL {
            if let Err(why) = thing.plant(&at, real) {
                eprintln!("skipping {thing:?} in place of {rel}: {why}");
                continue;
            }
            for (label, args) in self.commands() {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let o = self.larder(&args);
                o.assert_finished();
                expect(thing, label, &o);
            }
            thing.remove(&at);
        }
    }
}

/// Something other than a regular file, in an object's place.
#[derive(Clone, Copy, Debug)]
enum Thing {
    /// A symbolic link to `/dev/zero` (endless bytes).
    LinkToZero,
    /// A symbolic link to the real object, moved out of the repository.
    LinkElsewhere,
    Fifo,
    /// A character device like `/dev/null` (needs root to make).
    Device,
    Dir,
}

impl Thing {
    const ALL: [Thing; 5] = [
        Thing::LinkToZero,
        Thing::LinkElsewhere,
        Thing::Fifo,
        Thing::Device,
        Thing::Dir,
    ];

    /// What larder's message calls it.
    fn described(self) -> &'static str {
        match self {
            Thing::LinkToZero | Thing::LinkElsewhere => "symbolic link",
            Thing::Fifo => "FIFO",
            Thing::Device => "device",
            Thing::Dir => "directory",
        }
    }

    /// Makes it at `at`; an error says why it cannot be made here.
    fn plant(self, at: &Path, real: &Path) -> Result<(), String> {
        use nix::sys::stat::{Mode, SFlag, makedev, mknod};
        match self {
            Thing::LinkToZero => std::os::unix::fs::symlink("/dev/zero", at).unwrap(),
            Thing::LinkElsewhere => std::os::unix::fs::symlink(real, at).unwrap(),
            Thing::Fifo => nix::unistd::mkfifo(at, Mode::from_bits_truncate(0o600)).unwrap(),
            Thing::Device => mknod(
                at,
                SFlag::S_IFCHR,
                Mode::from_bits_truncate(0o666),
                makedev(1, 3),
            )
            .map_err(|e| format!("cannot make a device node ({e}; not root?)"))?,
            Thing::Dir => std::fs::create_dir(at).unwrap(),
        }
        Ok(())
    }

    fn remove(self, at: &Path) {
        match self {
            Thing::Dir => std::fs::remove_dir(at).unwrap(),
            _ => std::fs::remove_file(at).unwrap(),
        }
    }
}

// ---- Found today (issue 10, item 3) ----

/// `config` as a link to `/dev/zero` ran out of memory: now refused, unread.
#[test]
fn config_linked_to_dev_zero_is_refused_not_read() {
    let f = Fixture::new();
    let cfg = f.repo().join("config");
    std::fs::remove_file(&cfg).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &cfg).unwrap();
    let o = f.larder(&["snapshots"]);
    o.assert_finished();
    o.assert_failed();
    o.assert_says(&["config", "symbolic link"]);
}

/// A FIFO in place of `config` hung `snapshots` and `restore` forever.
#[test]
fn fifo_config_does_not_hang() {
    let f = Fixture::new();
    let cfg = f.repo().join("config");
    std::fs::remove_file(&cfg).unwrap();
    Thing::Fifo.plant(&cfg, &cfg).unwrap();
    let target = f.fresh("target");
    for args in [
        vec!["snapshots"],
        vec!["restore", &f.snap, "--target", target.to_str().unwrap()],
    ] {
        let o = f.larder(&args);
        o.assert_finished();
        o.assert_failed();
        o.assert_says(&["config", "FIFO"]);
    }
}

/// A FIFO in place of a pack hung `restore` forever.
#[test]
fn fifo_pack_does_not_hang_restore() {
    let f = Fixture::new();
    let pack = f.pack();
    std::fs::remove_file(f.repo().join(&pack)).unwrap();
    Thing::Fifo
        .plant(&f.repo().join(&pack), Path::new(""))
        .unwrap();
    let target = f.fresh("target");
    let o = f.larder(&["restore", &f.snap, "--target", target.to_str().unwrap()]);
    o.assert_finished();
    o.assert_failed();
    o.assert_says(&[&pack, "FIFO"]);
}

/// `check --read-data` read a 4 GiB sparse pack whole after flagging its
/// size: now it skips the pack, says so, and reads nothing of it (reading it
/// would need 4 GiB of memory, over the cap).
#[test]
fn read_data_skips_a_pack_whose_size_disagrees_with_the_index() {
    let f = Fixture::new();
    let pack = f.pack();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(f.repo().join(&pack))
        .unwrap();
    file.set_len(4 << 30).unwrap();
    drop(file);
    let o = f.larder(&["check", "--read-data"]);
    o.assert_finished();
    o.assert_failed();
    o.assert_says(&[&pack, "not read", "4294967296"]);
}

// ---- Every object kind (issue 10, "Hostile storage") ----

/// `config`: every command fails, naming `config` and what is there.
#[test]
fn hostile_config() {
    let f = Fixture::new();
    let real = f.move_aside("config");
    f.each_thing("config", &real, |thing, _, o| {
        o.assert_failed();
        o.assert_says(&["config", thing.described()]);
    });
}

/// A key file (the one that sorts first; a second key opens the repository):
/// skipped with a warning naming it, and `check` reports it.
#[test]
fn hostile_key_file() {
    let f = Fixture::new();
    let repo = f.t.open().unwrap();
    repo.add_key(&NewKey::Passphrase {
        pass: PASS.to_string().into(),
        work_factor: TEST_WF,
    })
    .unwrap();
    drop(repo);
    let first = format!("keys/{}", f.names("keys")[0]);
    let real = f.move_aside(&first);
    f.each_thing(&first, &real, |thing, label, o| {
        if label.starts_with("check") {
            o.assert_failed();
        } else {
            o.assert_code(0);
        }
        o.assert_says(&[&first, thing.described()]);
    });
}

/// An index segment: nothing hangs, runs out of memory or follows the link,
/// and the message names the segment. (Whether a command then fails or
/// carries on without the segment is the index's business.) `snapshots`
/// does not read the index, so it meets nothing.
#[test]
fn hostile_index_segment() {
    let f = Fixture::new();
    let seg = format!("index/{}", f.names("index")[0]);
    let real = f.move_aside(&seg);
    f.each_thing(&seg, &real, |thing, label, o| {
        if label == "snapshots" {
            o.assert_code(0);
            assert!(
                !o.all().contains(&seg),
                "snapshots read the index\n{}",
                o.all()
            );
        } else {
            o.assert_says(&[&seg, thing.described()]);
        }
    });
}

/// A snapshot: listed as unreadable, refused by `restore` and reported by
/// `check`, each naming it; a backup carries on without it as a parent.
#[test]
fn hostile_snapshot() {
    let f = Fixture::new();
    let snap = format!("snapshots/{}", f.snap);
    let real = f.move_aside(&snap);
    f.each_thing(&snap, &real, |thing, label, o| match label {
        "backup" => o.assert_code(0),
        "snapshots" => {
            o.assert_code(0);
            o.assert_says(&[&snap, thing.described()]);
        }
        _ => {
            o.assert_failed();
            o.assert_says(&[&snap, thing.described()]);
        }
    });
}

/// A lock file: an unreadable lock is only a hint and blocks nobody. The
/// link points at a copy of a live exclusive lock: were it followed, every
/// command that locks would fail as locked.
#[test]
fn hostile_lock() {
    let f = Fixture::new();
    let repo = f.t.open().unwrap();
    let guard = repo.lock_exclusive().unwrap();
    let held = f.names("locks");
    assert_eq!(held.len(), 1);
    let real = f.elsewhere.join("live-exclusive-lock");
    std::fs::copy(f.repo().join("locks").join(&held[0]), &real).unwrap();
    drop(guard);
    drop(repo);
    let lock = format!("locks/{}", "7".repeat(64));
    f.each_thing(&lock, &real, |_, _, o| o.assert_code(0));
}

/// A pack: `restore` and `check` fail naming it, `check --read-data` and
/// `backup` (which loads the parent's trees from it) name what is there.
#[test]
fn hostile_pack() {
    let f = Fixture::new();
    let pack = f.pack();
    let real = f.move_aside(&pack);
    f.each_thing(&pack, &real, |thing, label, o| match label {
        "snapshots" => o.assert_code(0),
        "check" => {
            o.assert_failed();
            o.assert_says(&[&pack]);
        }
        "backup" => o.assert_says(&[&pack, thing.described()]),
        _ => {
            o.assert_failed();
            o.assert_says(&[&pack, thing.described()]);
        }
    });
}

// ---- Key files (issue 10, item 6) ----

/// Writes `bytes` as key file `name`.
fn plant_key(f: &Fixture, name: &str, bytes: &[u8]) -> String {
    std::fs::write(f.repo().join("keys").join(name), bytes).unwrap();
    format!("keys/{name}")
}

/// A valid passphrase key file for another passphrase and master key.
fn decoy_key() -> Vec<u8> {
    let new = NewKey::Passphrase {
        pass: "a passphrase nobody types".to_string().into(),
        work_factor: TEST_WF,
    };
    make_key_file(&MasterKey::generate().unwrap(), &new).unwrap()
}

/// An oversized key file that sorts first aborted opening: now it is
/// skipped with a warning naming it, and the real key opens.
#[test]
fn oversized_key_file_sorting_first_is_skipped() {
    let f = Fixture::new();
    let mut big = decoy_key();
    big.resize((1 << 20) + 1, 0);
    let name = plant_key(&f, &"0".repeat(64), &big);
    let o = f.larder(&["snapshots"]);
    o.assert_finished();
    o.assert_code(0);
    o.assert_says(&["warning", &name, &f.snap[..8]]);
}

/// A junk key file that sorts first is skipped, and now said so.
#[test]
fn junk_key_file_is_skipped_with_a_warning() {
    let f = Fixture::new();
    let name = plant_key(&f, &"0".repeat(64), b"not a key file at all");
    let o = f.larder(&["snapshots"]);
    o.assert_finished();
    o.assert_code(0);
    o.assert_says(&["warning", &name, &f.snap[..8]]);
}

/// A valid key file for this repository's passphrase but another master
/// key, sorting first (what an `init` that lost a race to another `init`
/// of the same location left, or a planted file): it made opening fail
/// with the config's authentication error. Now it is skipped with a
/// warning naming it, and the real key opens.
#[test]
fn key_with_the_passphrase_but_another_master_is_skipped() {
    let f = Fixture::new();
    let new = NewKey::Passphrase {
        pass: PASS.to_string().into(),
        work_factor: TEST_WF,
    };
    let other = make_key_file(&MasterKey::generate().unwrap(), &new).unwrap();
    let name = plant_key(&f, &"0".repeat(64), &other);
    let o = f.larder(&["snapshots"]);
    o.assert_finished();
    o.assert_code(0);
    o.assert_says(&["warning", &name, "does not open", &f.snap[..8]]);
}

/// One junk key file made `key list` fail: now it is listed as unreadable,
/// named, in text and JSON, with the good keys.
#[test]
fn key_list_shows_a_junk_key_as_unreadable() {
    let f = Fixture::new();
    let junk = "ab".repeat(32);
    plant_key(&f, &junk, b"junk");
    let real = f.names("keys").into_iter().find(|n| *n != junk).unwrap();
    let o = f.larder(&["key", "list"]);
    o.assert_finished();
    o.assert_code(0);
    let line = |id: &str| {
        o.stdout
            .lines()
            .find(|l| l.contains(&id[..8]))
            .unwrap_or_else(|| panic!("no line for {id} in\n{}", o.stdout))
            .to_string()
    };
    assert!(line(&junk).contains("unreadable"), "{}", o.stdout);
    assert!(line(&real).contains("passphrase"), "{}", o.stdout);

    let o = f.larder(&["key", "list", "--json"]);
    o.assert_finished();
    o.assert_code(0);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 2, "{v}");
    let by_id = |id: &str| arr.iter().find(|k| k["id"] == id).unwrap().clone();
    assert!(
        by_id(&junk)["error"]
            .as_str()
            .unwrap()
            .contains(&format!("keys/{junk}")),
        "{v}"
    );
    assert_eq!(by_id(&real)["kind"], "Passphrase", "{v}");
    assert_eq!(by_id(&real)["current"], true, "{v}");
}

/// A key file whose name is shorter than 8 bytes panicked `key list`.
#[test]
fn key_list_survives_short_key_file_names() {
    let f = Fixture::new();
    let real = f.names("keys")[0].clone();
    let bytes = std::fs::read(f.repo().join("keys").join(&real)).unwrap();
    plant_key(&f, "k1", &bytes);
    plant_key(&f, "x", b"junk");
    let o = f.larder(&["key", "list"]);
    o.assert_finished();
    o.assert_code(0);
    let has = |id: &str| {
        o.stdout
            .lines()
            .any(|l| l.split_whitespace().any(|w| w == id))
    };
    assert!(has("k1") && has("x"), "{}", o.stdout);
}

/// Opening tries at most 20 passphrase key files (each costs a scrypt run):
/// with 19 others before it the user's key still opens; with 20, the error
/// says the cap was reached.
#[test]
fn passphrase_key_files_tried_are_capped() {
    let f = Fixture::new();
    let decoy = decoy_key();
    for i in 0..19 {
        plant_key(&f, &format!("{i:064x}"), &decoy);
    }
    let o = f.larder(&["snapshots"]);
    o.assert_finished();
    o.assert_code(0);
    o.assert_says(&[&f.snap[..8]]);

    plant_key(&f, &format!("{:064x}", 19), &decoy);
    let o = f.larder(&["snapshots"]);
    o.assert_finished();
    o.assert_failed();
    o.assert_says(&["20 passphrase key files", "1 more"]);
}

/// `key add` refuses a 21st passphrase key, which opening would not reach.
#[test]
fn key_add_refuses_more_keys_than_an_open_tries() {
    let f = Fixture::new();
    let decoy = decoy_key();
    for i in 0..19 {
        plant_key(&f, &format!("{:064x}", u64::MAX - i), &decoy);
    }
    let pw = f.t.dir.path().join("new-password");
    std::fs::write(&pw, "another passphrase\n").unwrap();
    let o = f.larder(&["key", "add", "--new-password-file", pw.to_str().unwrap()]);
    o.assert_finished();
    o.assert_failed();
    o.assert_says(&["20 passphrase keys", "key remove"]);
    assert_eq!(f.names("keys").len(), 20);
}

/// `LARDER_KDF_WORK_FACTOR` below the default made weak keys in production
/// without a word: now it is refused unless `LARDER_INSECURE_TEST_KDF=1`
/// says this is a test; it does not affect commands that make no key.
#[test]
fn weak_kdf_work_factor_needs_the_test_variable() {
    let f = Fixture::new();
    let fresh = f.t.dir.path().join("weak");
    let mut c = larder(&fresh, &f.fresh("cache"));
    c.env_remove("LARDER_INSECURE_TEST_KDF").arg("init");
    let o = run_bounded(&c);
    o.assert_finished();
    o.assert_failed();
    o.assert_says(&["LARDER_KDF_WORK_FACTOR", "LARDER_INSECURE_TEST_KDF"]);
    assert!(!fresh.join("config").exists());

    // With the test variable (as `larder()` sets it) the knob works: the
    // key file records work factor 10 (byte 11).
    let o = run_bounded(larder(&fresh, &f.fresh("cache")).arg("init"));
    o.assert_finished();
    o.assert_code(0);
    let keys: Vec<_> = std::fs::read_dir(fresh.join("keys")).unwrap().collect();
    let key = std::fs::read(keys[0].as_ref().unwrap().path()).unwrap();
    assert_eq!(key[11], TEST_WF);

    // Opening needs no new key, so the knob is harmless there.
    let mut c = f.cmd(&["snapshots"]);
    c.env_remove("LARDER_INSECURE_TEST_KDF");
    let o = run_bounded(&c);
    o.assert_finished();
    o.assert_code(0);
}
