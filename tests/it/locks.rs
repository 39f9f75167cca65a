//! Locks: which locks are stale (by pid only within this machine's pid
//! space, otherwise by the lock object's age on the storage's own clock,
//! never by the times written inside), holders that notice a lost lock, and
//! `larder unlock`.

use crate::common::{TestRepo, larder};
use larder::Error;
use larder::backend::{Backend, Entry, Kind, LocalBackend};
use larder::lock::{LockConfig, LockGuard, LockInfo, LockMode, read_lock, write_lock};
use larder::repository::Repository;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

const HOUR: Duration = Duration::from_secs(3600);
const MINUTE: Duration = Duration::from_secs(60);

fn run(cmd: &mut std::process::Command) -> (i32, String, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn cfg(refresh_secs: u64, state_dir: Option<PathBuf>) -> LockConfig {
    LockConfig {
        refresh: Duration::from_secs(refresh_secs),
        ..LockConfig::new(state_dir)
    }
}

/// A lock held on another machine (machine id, boot id and pid namespace
/// not ours), written "now" by its own clock, lifetime 30 minutes.
fn mode_of(exclusive: bool) -> LockMode {
    if exclusive {
        LockMode::Exclusive
    } else {
        LockMode::Shared
    }
}

fn foreign(exclusive: bool) -> LockInfo {
    let mut i = LockInfo::for_this_process(mode_of(exclusive), 30 * MINUTE).unwrap();
    i.machine_id = [0x11; 16];
    i.boot_id = [0x22; 16];
    i.pid_ns = 4_026_531_836;
    i.pid = 1;
    i.start_time = 1;
    i
}

/// A lock of this machine's pid space, for pid `pid` started at `start`.
fn local(exclusive: bool, pid: u32, start: u64) -> LockInfo {
    let mut i = LockInfo::for_this_process(mode_of(exclusive), 30 * MINUTE).unwrap();
    i.pid = pid;
    i.start_time = start;
    i
}

/// Sets the storage's modification time of lock `name` to `age` ago.
fn set_age(t: &TestRepo, name: &str, age: Duration) {
    let p = t.repo_path().join("locks").join(name);
    std::fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(SystemTime::now() - age)
        .unwrap();
}

/// Writes `info` as a lock object that the storage says is `age` old.
fn plant(t: &TestRepo, repo: &Repository, info: &LockInfo, age: Duration) -> String {
    let name = write_lock(t.backend().as_ref(), repo.keys(), info).unwrap();
    set_age(t, &name, age);
    name
}

fn names(t: &TestRepo) -> BTreeSet<String> {
    t.backend()
        .list(Kind::Lock)
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect()
}

/// The pid of a process that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

fn my_start() -> u64 {
    larder::host::process_start(std::process::id()).unwrap().0
}

fn assert_locked(r: larder::Result<LockGuard>) -> String {
    match r {
        Err(e @ Error::Locked(_)) => {
            assert_eq!(e.exit_code(), 11);
            e.to_string()
        }
        Err(e) => panic!("expected Locked, got {e}"),
        Ok(_) => panic!("the lock was taken despite a live conflicting lock"),
    }
}

/// Polls `check()` until it fails (a generous deadline, no timing claim).
fn wait_until_lost(h: &larder::lock::LockHandle) -> Error {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Err(e) = h.check() {
            return e;
        }
        assert!(
            Instant::now() < deadline,
            "the lock was never reported lost"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------

#[test]
fn exclusive_blocks_everything_and_shared_blocks_only_exclusive() {
    let t = TestRepo::new();
    let repo = t.init();
    // A shared lock does not block another shared lock.
    let g1 = repo.lock_shared().unwrap();
    let g2 = repo.lock_shared().unwrap();
    assert_eq!(names(&t).len(), 2);
    // An exclusive lock is refused while shared ones are live; its own
    // lock object is removed again.
    assert_locked(repo.lock_exclusive());
    assert_eq!(names(&t).len(), 2);
    drop((g1, g2));
    assert_eq!(names(&t).len(), 0);
    // An exclusive lock blocks both a shared and another exclusive one.
    let x = repo.lock_exclusive().unwrap();
    assert_locked(repo.lock_shared());
    assert_locked(repo.lock_exclusive());
    drop(x);
    assert!(names(&t).is_empty());
    // A live exclusive lock from another machine blocks a backup (exit 11).
    plant(&t, &repo, &foreign(true), Duration::ZERO);
    let src = t.dir.path().join("s");
    std::fs::create_dir_all(&src).unwrap();
    let (code, _, err) = run(larder(&t.repo_path(), &t.cache_path())
        .arg("backup")
        .arg(&src));
    assert_eq!(code, 11, "{err}");
    assert!(err.contains("held on another machine"), "{err}");
    // The test knob is read when a lock is taken, and checked.
    let (code, _, err) = run(larder(&t.repo_path(), &t.cache_path())
        .env(larder::lock::REFRESH_ENV, "0")
        .arg("backup")
        .arg(&src));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("LARDER_LOCK_REFRESH_SECS"), "{err}");
}

/// Clock skew: the times inside a lock are the holder's and are never
/// compared with ours, so a lock "created" in 1970 or in the far future is
/// live while its object is fresh on the storage.
#[test]
fn a_fresh_foreign_lock_is_live_whatever_times_it_records() {
    let t = TestRepo::new();
    let repo = t.init();
    let mut past = foreign(true);
    past.created = 0;
    let mut future = foreign(false);
    future.created = 4_102_444_800; // 2100
    let a = plant(&t, &repo, &past, Duration::ZERO);
    let b = plant(&t, &repo, &future, Duration::ZERO);
    let e = assert_locked(repo.lock_shared());
    assert!(
        e.contains("refreshed") && e.contains("storage's clock"),
        "{e}"
    );
    assert_locked(repo.lock_exclusive());
    let report = repo.unlock(false).unwrap();
    assert!(report.removed.is_empty(), "{report:?}");
    assert_eq!(report.kept.len(), 2);
    assert_eq!(names(&t), BTreeSet::from([a, b]));
}

/// The age that counts is the object's on the storage: old there means
/// stale, even with a recorded creation time far in the future and a
/// declared lifetime beyond the 30-minute cap.
#[test]
fn a_lock_old_by_the_storage_clock_is_stale_whatever_it_records() {
    let t = TestRepo::new();
    let repo = t.init();
    let mut info = foreign(true);
    info.created = 4_102_444_800;
    info.lifetime_secs = u32::MAX;
    let name = plant(&t, &repo, &info, 29 * MINUTE);
    assert_locked(repo.lock_shared()); // within the cap: live
    assert!(names(&t).contains(&name));
    set_age(&t, &name, 31 * MINUTE);
    let g = repo.lock_exclusive().unwrap();
    assert!(!names(&t).contains(&name), "the stale lock was removed");
    drop(g);
    // A shorter declared lifetime is honoured.
    let mut short = foreign(true);
    short.lifetime_secs = 60;
    let s = plant(&t, &repo, &short, 30 * Duration::from_secs(1));
    assert_locked(repo.lock_shared());
    set_age(&t, &s, 2 * MINUTE);
    drop(repo.lock_shared().unwrap());
    assert!(names(&t).is_empty());
}

/// Same host name, but another machine id (a container or a cloned
/// machine): its pid means nothing here, so a pid that looks dead does not
/// make the lock stale. The same holds for our machine id in another boot
/// or another pid namespace.
#[test]
fn a_pid_from_another_pid_space_is_never_checked_here() {
    let t = TestRepo::new();
    let repo = t.init();
    let dead = dead_pid();
    let mut other_machine = foreign(true);
    other_machine.hostname = larder::host::hostname();
    other_machine.pid = dead;
    let mut other_boot = local(true, dead, 5);
    other_boot.boot_id = [0x33; 16];
    let mut other_ns = local(true, dead, 5);
    other_ns.pid_ns ^= 1;
    let mut planted = BTreeSet::new();
    for info in [&other_machine, &other_boot, &other_ns] {
        planted.insert(plant(&t, &repo, info, Duration::ZERO));
        let e = assert_locked(repo.lock_shared());
        assert!(
            e.contains("cannot be checked") || e.contains("another machine"),
            "{e}"
        );
    }
    assert_eq!(names(&t), planted);
    assert!(repo.unlock(false).unwrap().removed.is_empty());
}

/// Same machine, boot and pid namespace: a holder that exited (or is only
/// a zombie) is stale at once, however fresh its lock object.
#[test]
fn a_lock_of_an_exited_process_on_this_machine_is_stale_at_once() {
    let t = TestRepo::new();
    let repo = t.init();
    let dead = plant(&t, &repo, &local(true, dead_pid(), 5), Duration::ZERO);
    // A child that exited but was not reaped yet.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    let start = loop {
        match larder::host::process_start(pid) {
            Some((s, true)) => break s,
            _ => assert!(Instant::now() < deadline, "the child never became a zombie"),
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let zombie = plant(&t, &repo, &local(true, pid, start), Duration::ZERO);
    assert_eq!(names(&t), BTreeSet::from([dead, zombie]));
    let g = repo.lock_exclusive().unwrap();
    assert_eq!(names(&t).len(), 1, "only our own lock is left");
    drop(g);
    child.wait().unwrap();
}

/// A pid that now belongs to another process (another start time) is not
/// the holder; the same pid with the holder's start time is.
#[test]
fn a_reused_pid_is_told_apart_by_its_start_time() {
    let t = TestRepo::new();
    let repo = t.init();
    let me = std::process::id();
    let live = plant(&t, &repo, &local(true, me, my_start()), Duration::ZERO);
    let e = assert_locked(repo.lock_shared());
    assert!(e.contains("is running"), "{e}");
    std::fs::remove_file(t.repo_path().join("locks").join(&live)).unwrap();
    let reused = plant(&t, &repo, &local(true, me, my_start() + 1), Duration::ZERO);
    let g = repo.lock_shared().unwrap();
    assert!(!names(&t).contains(&reused));
    drop(g);
}

/// A holder whose lock object is removed notices at its next refresh, and
/// leaves no lock behind.
#[test]
fn a_holder_notices_that_its_lock_was_removed() {
    let t = TestRepo::new();
    let repo = t.init();
    // Refresh every 2 s: the removal is seen long before the 6 s without a
    // refresh after which the lock would count as lost for that reason.
    let g =
        LockGuard::acquire(t.backend(), repo.master(), LockMode::Shared, &cfg(2, None)).unwrap();
    let h = g.handle();
    g.check().unwrap();
    h.check().unwrap();
    for n in names(&t) {
        t.backend().delete(Kind::Lock, &n).unwrap();
    }
    let e = wait_until_lost(&h);
    assert!(matches!(e, Error::LockLost(_)), "{e}");
    assert_eq!(e.exit_code(), 11);
    assert!(e.to_string().contains("was removed"), "{e}");
    assert!(g.check().is_err(), "the guard and its handles agree");
    assert!(names(&t).is_empty(), "the holder did not put a lock back");
    drop(g);
    assert!(names(&t).is_empty());
}

/// A backend wrapper that can refuse lock writes, hang them, or not know
/// object ages: faults that permissions cannot produce for root.
struct Faulty {
    inner: LocalBackend,
    fail_lock_writes: AtomicBool,
    hang_lock_writes: AtomicBool,
    no_age: bool,
}

impl Faulty {
    fn new(t: &TestRepo, no_age: bool) -> Arc<Faulty> {
        Arc::new(Faulty {
            inner: LocalBackend::new(t.repo_path()),
            fail_lock_writes: AtomicBool::new(false),
            hang_lock_writes: AtomicBool::new(false),
            no_age,
        })
    }
}

impl Backend for Faulty {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn create(&self) -> larder::Result<()> {
        self.inner.create()
    }
    fn exists(&self, kind: Kind, name: &str) -> larder::Result<bool> {
        self.inner.exists(kind, name)
    }
    fn list(&self, kind: Kind) -> larder::Result<Vec<Entry>> {
        self.inner.list(kind)
    }
    fn read_bounded(&self, kind: Kind, name: &str, max: u64) -> larder::Result<Vec<u8>> {
        self.inner.read_bounded(kind, name, max)
    }
    fn read_range(&self, kind: Kind, name: &str, off: u64, len: u64) -> larder::Result<Vec<u8>> {
        self.inner.read_range(kind, name, off, len)
    }
    fn size(&self, kind: Kind, name: &str) -> larder::Result<u64> {
        self.inner.size(kind, name)
    }
    fn write(&self, kind: Kind, name: &str, data: &[u8]) -> larder::Result<()> {
        if kind == Kind::Lock {
            while self.hang_lock_writes.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            if self.fail_lock_writes.load(Ordering::SeqCst) {
                return Err(Error::Backend {
                    object: kind.path(name),
                    source: std::io::Error::other("injected write failure"),
                });
            }
        }
        self.inner.write(kind, name, data)
    }
    fn delete(&self, kind: Kind, name: &str) -> larder::Result<()> {
        self.inner.delete(kind, name)
    }
    fn age(&self, kind: Kind, name: &str) -> larder::Result<Option<Duration>> {
        if self.no_age {
            // Still say NotFound for a missing object, as the trait asks.
            self.inner.size(kind, name)?;
            return Ok(None);
        }
        self.inner.age(kind, name)
    }
}

/// A refresh that cannot write loses the lock: injected through a backend
/// wrapper, and by replacing `locks/` with a plain file (which stops root
/// too, unlike permissions).
#[test]
fn a_refresh_that_cannot_write_loses_the_lock() {
    let t = TestRepo::new();
    let repo = t.init();
    let be = Faulty::new(&t, false);
    // Refresh every 3 s: the failed write comes long before the 9 s without
    // a refresh after which the lock would count as lost for that reason.
    let g = LockGuard::acquire(
        be.clone(),
        repo.master(),
        LockMode::Exclusive,
        &cfg(3, None),
    )
    .unwrap();
    g.check().unwrap();
    be.fail_lock_writes.store(true, Ordering::SeqCst);
    let e = wait_until_lost(&g.handle());
    assert!(e.to_string().contains("injected write failure"), "{e}");
    assert_eq!(e.exit_code(), 11);
    drop(g);
    assert!(names(&t).is_empty(), "released on drop");

    let g =
        LockGuard::acquire(t.backend(), repo.master(), LockMode::Shared, &cfg(1, None)).unwrap();
    let locks = t.repo_path().join("locks");
    let away = t.repo_path().join("locks.away");
    std::fs::rename(&locks, &away).unwrap();
    std::fs::write(&locks, b"not a directory").unwrap();
    let e = wait_until_lost(&g.handle());
    assert!(matches!(e, Error::LockLost(_)), "{e}");
    std::fs::remove_file(&locks).unwrap();
    std::fs::rename(&away, &locks).unwrap();
    drop(g);
    assert!(names(&t).is_empty());
}

/// A refresh that hangs (slow storage, a stopped process) loses the lock
/// once half its lifetime has passed: by then others may judge it stale.
#[test]
fn a_lock_not_refreshed_for_half_its_lifetime_is_lost() {
    let t = TestRepo::new();
    let repo = t.init();
    let be = Faulty::new(&t, false);
    let g = LockGuard::acquire(be.clone(), repo.master(), LockMode::Shared, &cfg(1, None)).unwrap();
    g.check().unwrap();
    be.hang_lock_writes.store(true, Ordering::SeqCst);
    let e = wait_until_lost(&g.handle());
    assert!(e.to_string().contains("last refreshed"), "{e}");
    be.hang_lock_writes.store(false, Ordering::SeqCst);
    assert!(g.check().is_err(), "a lost lock stays lost");
    drop(g);
    assert!(names(&t).is_empty());
}

/// With a backend that cannot tell an object's age, a lock is stale once
/// this host has watched it unchanged for longer than its lifetime (in the
/// state directory); without a state directory, never by age.
#[test]
fn without_storage_ages_this_host_watches_locks() {
    let t = TestRepo::new();
    let repo = t.init();
    let be = Faulty::new(&t, true);
    let state = t.dir.path().join("state");
    let mut info = foreign(true);
    info.lifetime_secs = 1;
    let name = plant(&t, &repo, &info, HOUR); // the mtime is not consulted
    let watch = cfg(300, Some(state.clone()));
    let blind = cfg(300, None);
    let unlock = |c: &LockConfig| larder::lock::unlock(be.as_ref(), repo.keys(), c, false).unwrap();
    let r = unlock(&watch);
    assert!(r.removed.is_empty(), "{r:?}");
    assert!(r.kept[0].reason.contains("seen unchanged"), "{r:?}");
    std::thread::sleep(Duration::from_millis(1500));
    let r = unlock(&blind);
    assert!(r.removed.is_empty(), "{r:?}");
    assert!(r.kept[0].reason.contains("no state directory"), "{r:?}");
    let r = unlock(&watch);
    assert_eq!(r.removed.len(), 1, "{r:?}");
    assert_eq!(r.removed[0].id, name);
    assert!(names(&t).is_empty());
}

/// `larder unlock` removes exactly the stale locks and says why it keeps
/// each live one; `--remove-all` removes every lock, and a holder whose
/// live lock was removed that way notices.
#[test]
fn unlock_removes_exactly_the_stale_locks() {
    let t = TestRepo::new();
    let repo = t.init();
    // A holder in this test process, refreshing every 5 s (lifetime 30 s),
    // taken first (taking a lock removes the stale ones it finds).
    let g =
        LockGuard::acquire(t.backend(), repo.master(), LockMode::Shared, &cfg(5, None)).unwrap();
    let dead = plant(&t, &repo, &local(true, dead_pid(), 5), Duration::ZERO);
    let old_foreign = plant(&t, &repo, &foreign(false), 2 * HOUR);
    let mut skewed = foreign(false);
    skewed.created = 0;
    let fresh_foreign = plant(&t, &repo, &skewed, Duration::ZERO);
    let junk = |n: u8, age: Duration| {
        let bytes = vec![n; 100];
        let name = larder::Id::of_object(&bytes).to_hex();
        t.backend().write(Kind::Lock, &name, &bytes).unwrap();
        set_age(&t, &name, age);
        name
    };
    let fresh_junk = junk(1, Duration::ZERO);
    let old_junk = junk(2, 2 * HOUR);

    let (code, out, err) = run(larder(&t.repo_path(), &t.cache_path()).args(["unlock", "--json"]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ids = |k: &str| -> BTreeSet<String> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|l| l["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        ids("removed"),
        BTreeSet::from([dead, old_foreign, old_junk])
    );
    let kept = ids("kept");
    assert!(
        kept.contains(&fresh_foreign) && kept.contains(&fresh_junk),
        "{v}"
    );
    assert!(
        v["removed"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["stale"] == true)
    );
    let mine: Vec<_> = v["kept"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["pid"] == std::process::id())
        .collect();
    assert!(!mine.is_empty(), "our own live lock was kept: {v}");
    assert!(mine[0]["reason"].as_str().unwrap().contains("is running"));
    let left = names(&t);
    assert!(left.contains(&fresh_foreign) && left.contains(&fresh_junk));
    assert!(left.len() >= 3 && left.len() <= 4, "{left:?}"); // ours may be mid-refresh
    g.check().unwrap();

    // The human output names each kept lock with its reason.
    let (code, out, err) = run(larder(&t.repo_path(), &t.cache_path()).arg("unlock"));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("kept locks/") && out.contains("held on another machine"),
        "{out}"
    );
    assert!(out.contains("removed 0 lock(s)"), "{out}");

    let (code, out, err) =
        run(larder(&t.repo_path(), &t.cache_path()).args(["unlock", "--remove-all", "--json"]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["kept"].as_array().unwrap().is_empty());
    assert!(ids_of(&v["removed"]).contains(&fresh_foreign));
    assert!(names(&t).is_empty());
    let e = wait_until_lost(&g.handle());
    assert!(e.to_string().contains("was removed"), "{e}");
}

fn ids_of(v: &serde_json::Value) -> BTreeSet<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect()
}

/// Lock objects stay small; a lock with a host name beyond the bound, or
/// an object beyond the size bound, is unreadable and blocks nobody.
#[test]
fn lock_objects_are_small_and_bounded() {
    let t = TestRepo::new();
    let repo = t.init();
    let g = repo.lock_shared().unwrap();
    for e in t.backend().list(Kind::Lock).unwrap() {
        assert!(e.size < 1024, "a lock of {} bytes", e.size);
    }
    drop(g);
    let mut long = foreign(true);
    long.hostname = "h".repeat(larder::lock::MAX_LOCK_NAME_LEN + 1);
    let name = plant(&t, &repo, &long, Duration::ZERO);
    let e = read_lock(t.backend().as_ref(), repo.keys(), &name).unwrap_err();
    assert!(e.to_string().contains("longer than"), "{e}");
    let big = vec![7u8; larder::lock::MAX_LOCK_STORED as usize + 1];
    let big_name = larder::Id::of_object(&big).to_hex();
    t.backend().write(Kind::Lock, &big_name, &big).unwrap();
    assert!(read_lock(t.backend().as_ref(), repo.keys(), &big_name).is_err());
    // Neither blocks an exclusive lock, and neither is removed while fresh.
    drop(repo.lock_exclusive().unwrap());
    assert_eq!(names(&t), BTreeSet::from([name, big_name]));
}

/// Readers through one handle share one lock object
/// (`Repository::lock_for_reading`): a second reader writes none, the lock
/// stays while any reader's guard lives and goes with the last one; the
/// next reader then takes a new lock.
#[test]
fn readers_through_one_handle_share_one_lock() {
    let t = TestRepo::new();
    let repo = t.init();
    let first = repo.lock_for_reading().unwrap().expect("a reader's lock");
    let held = names(&t);
    assert_eq!(held.len(), 1, "{held:?}");
    let second = repo.lock_for_reading().unwrap().expect("a reader's lock");
    assert_eq!(names(&t), held, "a second reader wrote another lock");
    drop(first);
    assert_eq!(
        names(&t),
        held,
        "the lock went while a reader still held it"
    );
    drop(second);
    assert!(names(&t).is_empty(), "the lock outlived its last reader");
    let third = repo.lock_for_reading().unwrap().expect("a reader's lock");
    let again = names(&t);
    assert_eq!(again.len(), 1, "{again:?}");
    assert_ne!(again, held, "the released lock came back");
    drop(third);
    assert!(names(&t).is_empty());
}

/// Set by [`told`], the `on_wait` of the retry test.
static TOLD_TO_WAIT: AtomicBool = AtomicBool::new(false);

fn told(_: &str) {
    TOLD_TO_WAIT.store(true, Ordering::SeqCst);
}

/// `--retry-lock` in the library: with no retry a conflicting lock fails at
/// once; with one, the taker says it waits, keeps no lock object of its own
/// while it does, and takes the lock once the holder lets go. A retry that
/// runs out fails as before (exit code 11), saying how long it tried.
#[test]
fn a_lock_with_a_retry_waits_for_the_holder() {
    let t = TestRepo::new();
    let holder = t.init();
    let x = holder.lock_exclusive().unwrap();
    let waiter = t.open().unwrap();
    assert_locked(waiter.lock_shared());

    waiter.set_lock_retry(Duration::from_secs(1), None);
    let why = assert_locked(waiter.lock_shared());
    assert!(why.contains("still held after 1 s of trying"), "{why}");

    waiter.set_lock_retry(Duration::from_secs(300), Some(told));
    let taker = std::thread::spawn(move || {
        let g = waiter.lock_shared();
        (g.map(|g| g.check().is_ok()), waiter)
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while !TOLD_TO_WAIT.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "the taker never said it waits");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(names(&t).len(), 1, "the waiter kept a lock object");
    drop(x);
    let (taken, _waiter) = taker.join().unwrap();
    assert!(taken.unwrap(), "the lock was not held once taken");
    assert!(names(&t).is_empty(), "the taken lock was not released");
}
