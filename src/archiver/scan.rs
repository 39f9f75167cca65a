//! The scanner that runs beside a backup (as restic's does): it walks the
//! same paths with the same exclude rules, only counting regular files and
//! their bytes, and tells the totals to the progress display as they grow,
//! so it can show a percentage and an ETA. It reads no file and stops as
//! soon as the backup is done or interrupted.

use super::exclude::Excluder;
use crate::localfs::{self, Anchor};
use crate::progress::Progress;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the growing totals are passed on.
const TELL_EVERY: Duration = Duration::from_millis(200);

struct Scan<'a> {
    excluder: &'a Excluder,
    one_file_system: bool,
    stop: &'a AtomicBool,
    progress: &'a dyn Progress,
    files: u64,
    bytes: u64,
    told: Instant,
}

impl Scan<'_> {
    /// Whether to give up (the backup is done, or a stop was asked for).
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || crate::interrupt::requested()
    }

    fn count(&mut self, md: &std::fs::Metadata) {
        if md.is_file() {
            self.files += 1;
            self.bytes += md.len();
            if self.told.elapsed() >= TELL_EVERY {
                self.progress.totals(self.files, self.bytes, false);
                self.told = Instant::now();
            }
        }
    }

    fn dir(&mut self, path: &Path, fs_path: &Path, root_dev: u64) {
        let Ok(names) = localfs::list_dir(fs_path) else {
            return;
        };
        let mut anchor: Anchor = None;
        for name in names {
            if self.stopped() {
                return;
            }
            let child = path.join(&name);
            let Ok((child_fs, _)) = localfs::child_path(fs_path, &None, &name, &mut anchor) else {
                continue;
            };
            let Ok(md) = child_fs.symlink_metadata() else {
                continue;
            };
            let file_size = md.is_file().then_some(md.len());
            if self
                .excluder
                .excluded(&child, &child_fs, md.is_dir(), file_size)
            {
                continue;
            }
            if md.is_dir() {
                if !(self.one_file_system && md.dev() != root_dev) {
                    self.dir(&child, &child_fs, root_dev);
                }
            } else {
                self.count(&md);
            }
        }
    }
}

/// Counts the files below `paths` (absolute, as the backup walks them) and
/// reports the totals to `progress`, the last time with `complete` set
/// (unless stopped first).
pub(super) fn scan(
    paths: &[PathBuf],
    excluder: &Excluder,
    one_file_system: bool,
    stop: &AtomicBool,
    progress: &dyn Progress,
) {
    let mut s = Scan {
        excluder,
        one_file_system,
        stop,
        progress,
        files: 0,
        bytes: 0,
        told: Instant::now(),
    };
    for p in paths {
        let Ok(md) = p.symlink_metadata() else {
            continue;
        };
        if md.is_dir() {
            s.dir(p, p, md.dev());
        } else {
            s.count(&md);
        }
        if s.stopped() {
            return;
        }
    }
    progress.totals(s.files, s.bytes, true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archiver::BackupOptions;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Totals(Mutex<Vec<(u64, u64, bool)>>);
    impl Progress for Totals {
        fn totals(&self, files: u64, bytes: u64, complete: bool) {
            self.0.lock().unwrap().push((files, bytes, complete));
        }
    }

    #[test]
    fn counts_what_the_backup_would_read() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("src");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("one"), b"12345").unwrap();
        std::fs::write(root.join("a/two"), b"123").unwrap();
        std::fs::write(root.join("a/b/skip.tmp"), b"1234567").unwrap();
        std::fs::create_dir_all(root.join("cache")).unwrap();
        std::fs::write(root.join("cache/.nobackup"), b"").unwrap();
        std::fs::write(root.join("cache/big"), vec![0u8; 1000]).unwrap();
        std::os::unix::fs::symlink("one", root.join("link")).unwrap();
        let opts = BackupOptions {
            excludes: vec!["*.tmp".into()],
            exclude_if_present: vec![".nobackup".into()],
            ..Default::default()
        };
        let x = Excluder::new(&opts).unwrap();
        let t = Totals::default();
        let single = d.path().join("single");
        std::fs::write(&single, b"12").unwrap();
        scan(&[root, single], &x, false, &AtomicBool::new(false), &t);
        let got = t.0.lock().unwrap();
        assert_eq!(got.last(), Some(&(3, 10, true)), "{got:?}");
        // Stopped at once: no complete total is claimed.
        let t = Totals::default();
        scan(
            &[d.path().to_path_buf()],
            &x,
            false,
            &AtomicBool::new(true),
            &t,
        );
        assert!(t.0.lock().unwrap().iter().all(|x| !x.2));
    }
}
