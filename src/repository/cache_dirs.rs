//! The per-repository directories of the local cache (`<cache root>/<repo
//! id>/`: the index cache, the tree cache of a remote repository, what
//! `check` verified), as restic's `cache` command lists and cleans them.
//!
//! A process that opens a repository holds a shared `flock` on the
//! directory's `.in-use` file for as long as the repository is open, and
//! sets that file's times to now (as a writer may, not only its owner):
//! its time is when the cache was last used. `cleanup` removes a directory unused for longer than a given age
//! only under an exclusive lock on that file, which it cannot take while
//! any process uses the cache: it renames the directory to a `.remove-*`
//! name while it holds the lock, then deletes it. An opener that waited
//! for the lock meanwhile finds its `.in-use` no longer at the path it
//! opened and starts again with a fresh directory. A `.remove-*` left by
//! a killed cleanup is deleted by the next one.

use crate::error::{Error, Result};
use crate::id::Id;
use serde::Serialize;
use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The file whose lock says a cache is in use, and whose time says when it
/// was last used.
pub const IN_USE: &str = ".in-use";

/// The name prefix of a directory being removed.
const REMOVING: &str = ".remove-";

/// How many times opening a cache starts again after a cleanup removed it
/// under the opener (each time means a cleanup ran just then).
const OPEN_ATTEMPTS: usize = 8;

/// A cache directory in use by this process: its `.in-use` lock, held
/// until dropped.
#[derive(Debug)]
pub struct InUse {
    _file: File,
}

/// Takes the in-use lock of the cache directory `dir` (creating it), and
/// marks it used now.
pub fn use_dir(dir: &Path) -> Result<InUse> {
    for _ in 0..OPEN_ATTEMPTS {
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join(IN_USE);
        let file = match open_in_use(&path) {
            Ok(f) => f,
            // Removed between the two steps: start again.
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
        };
        // A filesystem without `flock` (some network ones) cannot say a
        // cache is in use: go on without the lock (a cleanup there
        // cannot lock either, so it removes nothing).
        if file.lock_shared().is_err() {
            touch(&file);
            return Ok(InUse { _file: file });
        }
        // A cleanup may have renamed the directory away while this waited.
        let locked = file.metadata().map_err(|e| Error::io(&path, e))?;
        match fs::metadata(&path) {
            Ok(now) if now.dev() == locked.dev() && now.ino() == locked.ino() => {
                touch(&file);
                return Ok(InUse { _file: file });
            }
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
        }
    }
    Err(Error::Locked(format!(
        "cache {}: removed {OPEN_ATTEMPTS} times while opening it (is a `larder cache --cleanup` looping?)",
        dir.display()
    )))
}

/// Opens (creating) an `.in-use` file: for writing, or only for reading
/// where this user may not write it (a cache shared with another user);
/// a lock needs neither.
fn open_in_use(path: &Path) -> std::io::Result<File> {
    match OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
    {
        Err(e) if e.kind() == ErrorKind::PermissionDenied => File::open(path),
        r => r,
    }
}

/// Sets a file's times to now, as any user who may write it can (an
/// explicit time needs its owner). Only the listing's "last used" depends
/// on it, so a failure is ignored.
fn touch(file: &File) {
    let now = nix::sys::time::TimeSpec::UTIME_NOW;
    let _ = nix::sys::stat::futimens(file, &now, &now);
}

/// One repository's cache directory.
#[derive(Clone, Debug, Serialize)]
pub struct CacheDir {
    /// The repository id (the directory's name).
    pub id: String,
    pub path: PathBuf,
    /// When a process last opened it (its `.in-use` file's time, or the
    /// directory's for a cache older than that file).
    #[serde(serialize_with = "as_rfc3339")]
    pub last_used: SystemTime,
    /// Unused for longer than the age asked.
    pub old: bool,
    /// Bytes it holds (none when not asked).
    pub size: Option<u64>,
}

fn as_rfc3339<S: serde::Serializer>(t: &SystemTime, s: S) -> std::result::Result<S::Ok, S::Error> {
    let ts = jiff::Timestamp::try_from(*t).map_err(serde::ser::Error::custom)?;
    s.serialize_str(&ts.to_string())
}

/// The repository cache directories below `root`, by id; `old` when last
/// used more than `max_age` ago; with their sizes if `sizes`.
pub fn list(root: &Path, max_age: Duration, sizes: bool) -> Result<Vec<CacheDir>> {
    let rd = match fs::read_dir(root) {
        Ok(rd) => rd,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(root, e)),
    };
    let now = SystemTime::now();
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(|e| Error::io(root, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if Id::from_hex(&name).is_err() {
            continue;
        }
        let path = e.path();
        let Ok(md) = fs::symlink_metadata(&path) else {
            continue; // removed meanwhile
        };
        if !md.is_dir() {
            continue;
        }
        let last_used = fs::metadata(path.join(IN_USE))
            .and_then(|m| m.modified())
            .or_else(|_| md.modified())
            .map_err(|e| Error::io(&path, e))?;
        let age = now.duration_since(last_used).unwrap_or_default();
        out.push(CacheDir {
            id: name,
            size: if sizes { Some(size_of(&path)) } else { None },
            path,
            last_used,
            old: age > max_age,
        });
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// The bytes of the files below `dir` (what can be read of it).
fn size_of(dir: &Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// What `cleanup` did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Cleanup {
    /// The old caches removed (repository ids).
    pub removed: Vec<String>,
    /// Old caches a process was using (or that could not be locked, on a
    /// filesystem without `flock`): kept.
    pub in_use: Vec<String>,
    /// Leftovers of killed cleanups removed.
    pub leftovers: usize,
}

/// Removes the caches below `root` unused for longer than `max_age` that
/// no process is using, and what killed cleanups left.
pub fn cleanup(root: &Path, max_age: Duration) -> Result<Cleanup> {
    let mut report = Cleanup::default();
    for c in list(root, max_age, false)?.into_iter().filter(|c| c.old) {
        match remove_unused(root, &c.path)? {
            true => report.removed.push(c.id),
            false => report.in_use.push(c.id),
        }
    }
    if let Ok(rd) = fs::read_dir(root) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(REMOVING) {
                let p = e.path();
                fs::remove_dir_all(&p).map_err(|e| Error::io(&p, e))?;
                report.leftovers += 1;
            }
        }
    }
    Ok(report)
}

/// Removes cache directory `dir` unless a process holds it; whether it
/// was removed.
fn remove_unused(root: &Path, dir: &Path) -> Result<bool> {
    let path = dir.join(IN_USE);
    let file = match open_in_use(&path) {
        Ok(f) => f,
        // Gone meanwhile (another cleanup): nothing to do.
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(Error::io(&path, e)),
    };
    match file.try_lock() {
        Ok(()) => {}
        // In use; or no `flock` here, so whether it is cannot be known.
        Err(fs::TryLockError::WouldBlock | fs::TryLockError::Error(_)) => return Ok(false),
    }
    let mut rnd = [0u8; 8];
    crate::crypto::fill_random(&mut rnd)?;
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    let aside = root.join(format!(
        "{REMOVING}{}-{}",
        name.unwrap_or_default(),
        hex::encode(rnd)
    ));
    match fs::rename(dir, &aside) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(Error::io(dir, e)),
    }
    // Openers that waited for the lock now find `.in-use` gone from its
    // path and start again.
    drop(file);
    fs::remove_dir_all(&aside).map_err(|e| Error::io(&aside, e))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aged(path: &Path, days: u64) {
        let t = SystemTime::now() - Duration::from_secs(days * 86_400);
        File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    #[test]
    fn an_old_cache_in_use_is_kept_and_removed_once_let_go() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("ab".repeat(32));
        let held = use_dir(&dir).unwrap();
        fs::write(dir.join("index.sqlite"), b"x").unwrap();
        aged(&dir.join(IN_USE), 40);
        let listed = list(root.path(), Duration::from_secs(30 * 86_400), true).unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].old);
        assert_eq!(listed[0].size, Some(1));
        let r = cleanup(root.path(), Duration::from_secs(30 * 86_400)).unwrap();
        assert_eq!((r.removed.len(), r.in_use.len()), (0, 1));
        assert!(dir.join("index.sqlite").exists());
        drop(held);
        let r = cleanup(root.path(), Duration::from_secs(30 * 86_400)).unwrap();
        assert_eq!(r.removed, ["ab".repeat(32)]);
        assert!(!dir.exists());
        // Used again: a fresh directory, marked used now, not old.
        let _again = use_dir(&dir).unwrap();
        let listed = list(root.path(), Duration::from_secs(86_400), false).unwrap();
        assert!(!listed[0].old && listed[0].size.is_none());
    }

    #[test]
    fn an_opener_that_waited_for_a_cleanup_starts_again() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("cd".repeat(32));
        drop(use_dir(&dir).unwrap());
        // Hold the exclusive lock as a cleanup does, and open meanwhile.
        let f = File::options().write(true).open(dir.join(IN_USE)).unwrap();
        f.lock().unwrap();
        let d = dir.clone();
        let opener = std::thread::spawn(move || use_dir(&d).map(|u| (u, d.join(IN_USE))));
        std::thread::sleep(Duration::from_millis(100));
        let aside = root.path().join(".remove-test");
        fs::rename(&dir, &aside).unwrap();
        drop(f);
        fs::remove_dir_all(&aside).unwrap();
        let (_held, path) = opener.join().unwrap().unwrap();
        assert!(path.exists(), "the opener holds a fresh .in-use");
        let r = cleanup(root.path(), Duration::ZERO).unwrap();
        assert_eq!(r.in_use.len(), 1, "{r:?}");
    }

    #[test]
    fn other_names_are_not_caches_and_leftovers_go() {
        let root = tempfile::tempdir().unwrap();
        fs::create_dir_all(root.path().join("staging")).unwrap();
        fs::write(root.path().join("CACHEDIR.TAG"), b"x").unwrap();
        fs::create_dir_all(root.path().join(".remove-ef-1/sub")).unwrap();
        assert!(list(root.path(), Duration::ZERO, false).unwrap().is_empty());
        let r = cleanup(root.path(), Duration::ZERO).unwrap();
        assert_eq!(r.leftovers, 1);
        assert!(root.path().join("staging").exists());
        assert!(!root.path().join(".remove-ef-1").exists());
        assert!(
            list(&root.path().join("none"), Duration::ZERO, false)
                .unwrap()
                .is_empty()
        );
    }
}
