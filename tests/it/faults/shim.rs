//! An `LD_PRELOAD` library that injects I/O faults into one `larder`
//! process at the system-call wrappers, aimed at chosen files by the path
//! an open descriptor has (`/proc/self/fd/N`), so that only the source file
//! or the repository under test is hit (a fault injector that hits every
//! read of the process, such as `fiu-run`'s, would also hit the repository
//! and the cache). Built once per test run with the C compiler (`.ci/run`
//! installs gcc where it is missing).
//!
//! Variables read by the library (all optional):
//! - `FAULTSHIM_READ_PATH`: the file whose reads are hit, with
//!   `FAULTSHIM_READ_MODE` `eio` (reads fail with EIO once
//!   `FAULTSHIM_READ_AFTER` bytes were read) or `short` (no read returns
//!   more than 1000 bytes).
//! - `FAULTSHIM_SLOW_PREFIX`: reads of files whose path starts with it are
//!   slowed to `FAULTSHIM_SLOW_RATE` bytes a second (for a run that must
//!   last long enough to be caught mid-way).
//! - `FAULTSHIM_WRITE_PREFIX`: files whose path starts with it have their
//!   writes hit, with `FAULTSHIM_WRITE_MODE` `eio` or `enospc` (writes fail
//!   once `FAULTSHIM_WRITE_AFTER` bytes were written) or `short` (no write
//!   takes more than 4093 bytes).
//! - `FAULTSHIM_REPORT`: a file where the process, as it exits, writes how
//!   many reads and writes were shortened (so a test can tell that the
//!   faults it asked for happened).
//! - `FAULTSHIM_FSYNC_PREFIX`: `fsync`/`fdatasync` of files (and
//!   directories) whose path starts with it fail with EIO after the first
//!   `FAULTSHIM_FSYNC_AFTER` succeed.
//! - `FAULTSHIM_UNLINK_PREFIX`: removing a file (`unlink`, or `unlinkat`
//!   relative to the working directory) whose path as given starts with it
//!   first waits `FAULTSHIM_UNLINK_DELAY_MS` milliseconds (to hold a
//!   process between deciding to delete and deleting, so that another can
//!   run in that window).
//! - `FAULTSHIM_HOLD_PREFIX`: opening a file (`open`, `open64`; with
//!   `FAULTSHIM_HOLD_CREATING=1` only an open with `O_CREAT`) whose path as
//!   given starts with it first creates the file `FAULTSHIM_HOLD_MARK`, then
//!   waits until the file `FAULTSHIM_HOLD_RELEASE` exists (at most 60 s): it
//!   holds a process just before it reads an object there, or writes a new
//!   one such as its lock, until the test has done what it wants done in
//!   that window (see [`Hold`]). With `FAULTSHIM_HOLD_SKIP=N`, the first N
//!   such opens go ahead and the hold begins at the next. With
//!   `FAULTSHIM_HOLD_AFTER=1` the hold comes just after the open instead,
//!   so a file being created is there while the process is held.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

const SOURCE: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long long num(const char *name) {
    const char *v = getenv(name);
    return v ? atoll(v) : 0;
}

static const char *str(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Whether descriptor fd names `want` (exactly, or as a prefix). */
static int fd_is(int fd, const char *want, int prefix) {
    char link[64], buf[4096];
    ssize_t n;
    if (!want) return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    n = readlink(link, buf, sizeof buf - 1);
    if (n < 0) return 0;
    buf[n] = 0;
    return prefix ? strncmp(buf, want, strlen(want)) == 0 : strcmp(buf, want) == 0;
}

#define REAL(name) \
    static __typeof__(name) *real_##name; \
    if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

static long long read_done, write_done, fsyncs_done, reads_shortened, writes_shortened,
    unlinks_delayed, opens_held;

/* Says what was done, in FAULTSHIM_REPORT, when the process exits. */
__attribute__((destructor)) static void report(void) {
    const char *path = str("FAULTSHIM_REPORT");
    FILE *f;
    if (!path || !(f = fopen(path, "w"))) return;
    fprintf(f, "%lld %lld %lld %lld\n", reads_shortened, writes_shortened, unlinks_delayed,
            opens_held);
    fclose(f);
}

/* Shrinks *count or fails, for a read of fd; returns -1 to fail with errno set. */
static int read_fault(int fd, size_t *count) {
    long long rate = num("FAULTSHIM_SLOW_RATE");
    if (rate > 0 && fd_is(fd, str("FAULTSHIM_SLOW_PREFIX"), 1))
        usleep((useconds_t)((long long)*count * 1000000 / rate));
    const char *mode = str("FAULTSHIM_READ_MODE");
    if (!mode || !fd_is(fd, str("FAULTSHIM_READ_PATH"), 0)) return 0;
    if (strcmp(mode, "short") == 0) {
        if (*count > 1000) {
            *count = 1000;
            __atomic_add_fetch(&reads_shortened, 1, __ATOMIC_SEQ_CST);
        }
        return 0;
    }
    long long left = num("FAULTSHIM_READ_AFTER") - __atomic_load_n(&read_done, __ATOMIC_SEQ_CST);
    if (left <= 0) { errno = EIO; return -1; }
    if ((long long)*count > left) *count = (size_t)left;
    return 0;
}

static int write_fault(int fd, size_t *count) {
    const char *mode = str("FAULTSHIM_WRITE_MODE");
    if (!mode || !fd_is(fd, str("FAULTSHIM_WRITE_PREFIX"), 1)) return 0;
    if (strcmp(mode, "short") == 0) {
        if (*count > 4093) {
            *count = 4093;
            __atomic_add_fetch(&writes_shortened, 1, __ATOMIC_SEQ_CST);
        }
        return 0;
    }
    long long left = num("FAULTSHIM_WRITE_AFTER") - __atomic_load_n(&write_done, __ATOMIC_SEQ_CST);
    if (left <= 0) { errno = strcmp(mode, "enospc") == 0 ? ENOSPC : EIO; return -1; }
    if ((long long)*count > left) *count = (size_t)left;
    return 0;
}

ssize_t read(int fd, void *buf, size_t count) {
    REAL(read);
    if (read_fault(fd, &count) < 0) return -1;
    ssize_t r = real_read(fd, buf, count);
    if (r > 0) __atomic_add_fetch(&read_done, r, __ATOMIC_SEQ_CST);
    return r;
}

ssize_t pread64(int fd, void *buf, size_t count, off_t off) {
    REAL(pread64);
    if (read_fault(fd, &count) < 0) return -1;
    ssize_t r = real_pread64(fd, buf, count, off);
    if (r > 0) __atomic_add_fetch(&read_done, r, __ATOMIC_SEQ_CST);
    return r;
}

ssize_t pread(int fd, void *buf, size_t count, off_t off) {
    return pread64(fd, buf, count, off);
}

/* Vectored calls on a hit descriptor move only the first buffer (a legal
   short transfer), through the plain call above. */
ssize_t readv(int fd, const struct iovec *iov, int n) {
    REAL(readv);
    if (n > 0 && (fd_is(fd, str("FAULTSHIM_READ_PATH"), 0)))
        return read(fd, iov[0].iov_base, iov[0].iov_len);
    return real_readv(fd, iov, n);
}

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(write);
    if (write_fault(fd, &count) < 0) return -1;
    ssize_t r = real_write(fd, buf, count);
    if (r > 0) __atomic_add_fetch(&write_done, r, __ATOMIC_SEQ_CST);
    return r;
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t off) {
    REAL(pwrite64);
    if (write_fault(fd, &count) < 0) return -1;
    ssize_t r = real_pwrite64(fd, buf, count, off);
    if (r > 0) __atomic_add_fetch(&write_done, r, __ATOMIC_SEQ_CST);
    return r;
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t off) {
    return pwrite64(fd, buf, count, off);
}

ssize_t writev(int fd, const struct iovec *iov, int n) {
    REAL(writev);
    if (n > 0 && fd_is(fd, str("FAULTSHIM_WRITE_PREFIX"), 1))
        return write(fd, iov[0].iov_base, iov[0].iov_len);
    return real_writev(fd, iov, n);
}

static int fsync_fault(int fd) {
    if (!fd_is(fd, str("FAULTSHIM_FSYNC_PREFIX"), 1)) return 0;
    if (__atomic_add_fetch(&fsyncs_done, 1, __ATOMIC_SEQ_CST) <= num("FAULTSHIM_FSYNC_AFTER"))
        return 0;
    errno = EIO;
    return -1;
}

int fsync(int fd) {
    REAL(fsync);
    if (fsync_fault(fd) < 0) return -1;
    return real_fsync(fd);
}

int fdatasync(int fd) {
    REAL(fdatasync);
    if (fsync_fault(fd) < 0) return -1;
    return real_fdatasync(fd);
}

static void unlink_delay(const char *path) {
    const char *want = str("FAULTSHIM_UNLINK_PREFIX");
    if (!want || !path || strncmp(path, want, strlen(want)) != 0) return;
    __atomic_add_fetch(&unlinks_delayed, 1, __ATOMIC_SEQ_CST);
    usleep((useconds_t)(num("FAULTSHIM_UNLINK_DELAY_MS") * 1000));
}

int unlink(const char *path) {
    REAL(unlink);
    unlink_delay(path);
    return real_unlink(path);
}

int unlinkat(int dirfd, const char *path, int flags) {
    REAL(unlinkat);
    if (dirfd == AT_FDCWD) unlink_delay(path);
    return real_unlinkat(dirfd, path, flags);
}

/* The mode argument of an open that creates, else 0 (O_TMPFILE holds
   O_DIRECTORY's bit: only all of its bits mean a mode was passed). */
#define OPEN_MODE(flags, mode) do { \
    if (((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE) { \
        va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); \
    } } while (0)

static void open_hold(const char *path, int flags) {
    const char *want = str("FAULTSHIM_HOLD_PREFIX"), *mark = str("FAULTSHIM_HOLD_MARK"),
               *release = str("FAULTSHIM_HOLD_RELEASE");
    if (!want || !path || strncmp(path, want, strlen(want)) != 0) return;
    if (num("FAULTSHIM_HOLD_CREATING") && !(flags & O_CREAT)) return;
    if (__atomic_add_fetch(&opens_held, 1, __ATOMIC_SEQ_CST) <= num("FAULTSHIM_HOLD_SKIP")) return;
    if (mark) {
        FILE *f = fopen(mark, "w");
        if (f) fclose(f);
    }
    for (int i = 0; release && i < 6000 && access(release, F_OK) != 0; i++) usleep(10000);
}

/* An open through `real`, held before it (or just after it, with
   FAULTSHIM_HOLD_AFTER) when its path matches the hold. */
static int held_open(int (*real)(const char *, int, ...), const char *path, int flags,
                     mode_t mode) {
    int after = num("FAULTSHIM_HOLD_AFTER") != 0;
    if (!after) open_hold(path, flags);
    int fd = real(path, flags, mode);
    if (after) {
        int saved = errno;
        open_hold(path, flags);
        errno = saved;
    }
    return fd;
}

int open(const char *path, int flags, ...) {
    REAL(open);
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    return held_open(real_open, path, flags, mode);
}

int open64(const char *path, int flags, ...) {
    REAL(open64);
    mode_t mode = 0;
    OPEN_MODE(flags, mode);
    return held_open(real_open64, path, flags, mode);
}
"#;

/// The path of the built library (built on first use; the test fails if
/// it cannot be built: it must not pass without injecting anything).
pub fn library() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("faultshim");
        std::fs::create_dir_all(&dir).unwrap();
        // Named by its source, so a build is reused until the source changes.
        let hash = larder::Id::of_object(SOURCE.as_bytes()).to_hex();
        let lib = dir.join(format!("faultshim-{}.so", &hash[..16]));
        if lib.exists() {
            return lib;
        }
        let pid = std::process::id();
        let src = dir.join(format!("faultshim-{pid}.c"));
        std::fs::write(&src, SOURCE).unwrap();
        let tmp = dir.join(format!("faultshim-{pid}.so.tmp"));
        let cc = std::env::var("CC").unwrap_or_else(|_| "gcc".into());
        let o = Command::new(&cc)
            .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
            .arg(&tmp)
            .arg(&src)
            .arg("-ldl")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {cc} to build the fault shim: {e}"));
        assert!(
            o.status.success(),
            "building the fault shim failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let _ = std::fs::remove_file(&src);
        std::fs::rename(&tmp, &lib).unwrap();
        lib
    })
    .clone()
}

/// The counts in a report file: reads shortened, writes shortened,
/// removals delayed and opens held.
fn report_counts(report: &std::path::Path) -> [u64; 4] {
    let text = std::fs::read_to_string(report)
        .unwrap_or_else(|e| panic!("no report from the fault shim at {}: {e}", report.display()));
    let mut n = text.split_whitespace().map(|w| w.parse::<u64>().unwrap());
    [(); 4].map(|_| n.next().unwrap())
}

/// Reads and writes shortened, as the report file says.
pub fn shortened(report: &std::path::Path) -> (u64, u64) {
    let [r, w, _, _] = report_counts(report);
    (r, w)
}

/// Removals delayed, as the report file says.
pub fn unlinks_delayed(report: &std::path::Path) -> u64 {
    report_counts(report)[2]
}

/// A process held at its first open below a directory (the
/// `FAULTSHIM_HOLD_*` variables), with the files that tell the test it is
/// held and let it go, and its report.
pub struct Hold {
    vars: Vec<(&'static str, String)>,
    mark: PathBuf,
    release: PathBuf,
    report: PathBuf,
}

impl Hold {
    /// Holds opens below `dir` (only those that create a file if
    /// `creating`); the hold's files go in `scratch`, named by `tag`.
    pub fn new(
        dir: &std::path::Path,
        creating: bool,
        scratch: &std::path::Path,
        tag: &str,
    ) -> Hold {
        Hold::prefixed(&format!("{}/", dir.display()), creating, scratch, tag)
    }

    /// Holds opens of paths that start with `prefix` (a directory and the
    /// start of a name: `REPO/.tmp-` holds the temporary files at the
    /// root).
    pub fn prefixed(prefix: &str, creating: bool, scratch: &std::path::Path, tag: &str) -> Hold {
        let file = |what: &str| scratch.join(format!("hold-{tag}-{what}"));
        let (mark, release, report) = (file("mark"), file("release"), file("report"));
        let s = |p: &std::path::Path| p.to_string_lossy().into_owned();
        let vars = vec![
            ("FAULTSHIM_HOLD_PREFIX", prefix.to_string()),
            (
                "FAULTSHIM_HOLD_CREATING",
                if creating { "1" } else { "0" }.into(),
            ),
            ("FAULTSHIM_HOLD_MARK", s(&mark)),
            ("FAULTSHIM_HOLD_RELEASE", s(&release)),
            ("FAULTSHIM_REPORT", s(&report)),
        ];
        Hold {
            vars,
            mark,
            release,
            report,
        }
    }

    /// Holds just after the open that matches rather than before it.
    pub fn after_open(mut self) -> Hold {
        self.vars.push(("FAULTSHIM_HOLD_AFTER", "1".into()));
        self
    }

    /// Lets the first `n` opens that match go ahead: the hold begins at
    /// the next one.
    pub fn skip(mut self, n: u64) -> Hold {
        self.vars.push(("FAULTSHIM_HOLD_SKIP", n.to_string()));
        self
    }

    /// Adds the library and the hold to `c`.
    pub fn inject(&self, c: &mut Command) {
        inject(c, &self.vars);
    }

    /// Waits (at most 60 s) until `child` is held; fails the test, naming
    /// `what`, if it exits first or the time runs out.
    pub fn wait_held(&self, child: &mut std::process::Child, what: &str) {
        super::wait_until(child, &format!("{what}: held"), || self.mark.exists());
    }

    /// Whether the process is held (it made the open the hold waits at).
    pub fn is_held(&self) -> bool {
        self.mark.exists()
    }

    /// Lets the held process go on.
    pub fn release(&self) {
        std::fs::write(&self.release, b"").unwrap();
    }

    /// How many opens matched the hold, once the process has exited.
    pub fn opens(&self) -> u64 {
        report_counts(&self.report)[3]
    }
}

/// Adds the library and `vars` to a command's environment.
pub fn inject(c: &mut Command, vars: &[(&str, String)]) {
    c.env("LD_PRELOAD", library());
    for (k, v) in vars {
        c.env(k, v);
    }
}
