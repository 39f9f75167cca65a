//! How long this host has seen each lock object, for backends that cannot
//! tell an object's age (`Backend::age` = None). Times are read from
//! `CLOCK_BOOTTIME` ([`crate::host::boottime`]), one clock that never jumps
//! and keeps counting through suspend; they mean something only within one
//! boot, so records from another boot are dropped and the watch starts
//! again. Losing the file (a deleted cache) likewise restarts it: either
//! way a lock becomes stale later, never sooner.
//!
//! File `<state dir>/lock-observations`: a first line
//! `larder lock observations 1 <boot id hex>`, then one line
//! `<lock name> <milliseconds since boot when first seen>` per lock.

use crate::error::{Error, Result};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

const FILE: &str = "lock-observations";
const HEADER: &str = "larder lock observations 1";
/// The file is ours, but read with a bound all the same.
const MAX_FILE: u64 = 1 << 20;

/// The observations of one pass over the locks.
pub struct Observations {
    path: PathBuf,
    boot: String,
    before: HashMap<String, u64>,
    /// Only the locks seen in this pass are written back.
    now: HashMap<String, u64>,
}

impl Observations {
    /// Loads `<dir>/lock-observations` (missing, unreadable or of another
    /// boot: no observations).
    pub fn load(dir: &Path, boot_id: &[u8; 16]) -> Self {
        let path = dir.join(FILE);
        let boot = hex::encode(boot_id);
        let mut text = String::new();
        let read = std::fs::File::open(&path)
            .and_then(|f| f.take(MAX_FILE).read_to_string(&mut text))
            .is_ok();
        let mut before = HashMap::new();
        let mut lines = text.lines();
        if read && *boot_id != [0; 16] && lines.next() == Some(&format!("{HEADER} {boot}")) {
            for l in lines {
                if let Some((name, ms)) = l.split_once(' ')
                    && let Ok(ms) = ms.parse::<u64>()
                    && !name.is_empty()
                {
                    before.insert(name.to_string(), ms);
                }
            }
        }
        Observations {
            path,
            boot,
            before,
            now: HashMap::new(),
        }
    }

    /// How long lock `name` has been seen, `now` being the time since boot
    /// (a lock seen for the first time: zero, and it is recorded).
    pub fn seen_for(&mut self, name: &str, now: Duration) -> Duration {
        let now_ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
        let first = *self.before.get(name).unwrap_or(&now_ms);
        self.now.insert(name.to_string(), first.min(now_ms));
        Duration::from_millis(now_ms - first.min(now_ms))
    }

    /// Writes the locks seen in this pass (atomically: a temporary file
    /// renamed into place).
    pub fn save(&self) -> Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut text = format!("{HEADER} {}\n", self.boot);
        for (name, ms) in &self.now {
            text.push_str(&format!("{name} {ms}\n"));
        }
        let mut rnd = [0u8; 8];
        crate::crypto::fill_random(&mut rnd)?;
        let tmp = dir.join(format!(".{FILE}.tmp-{}", hex::encode(rnd)));
        std::fs::write(&tmp, text).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Error::io(&self.path, e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_survive_a_save_within_one_boot_only() {
        let dir = tempfile::tempdir().unwrap();
        let boot = [7u8; 16];
        let mut o = Observations::load(dir.path(), &boot);
        assert_eq!(o.seen_for("a", Duration::from_secs(100)), Duration::ZERO);
        assert_eq!(o.seen_for("b", Duration::from_secs(100)), Duration::ZERO);
        o.save().unwrap();

        let mut o = Observations::load(dir.path(), &boot);
        assert_eq!(
            o.seen_for("a", Duration::from_secs(160)),
            Duration::from_secs(60)
        );
        o.save().unwrap(); // "b" was not seen in this pass: forgotten

        let mut o = Observations::load(dir.path(), &boot);
        assert_eq!(o.seen_for("b", Duration::from_secs(200)), Duration::ZERO);
        assert_eq!(
            o.seen_for("a", Duration::from_secs(200)),
            Duration::from_secs(100)
        );

        // Another boot: nothing carries over.
        let mut o = Observations::load(dir.path(), &[8u8; 16]);
        assert_eq!(o.seen_for("a", Duration::from_secs(5000)), Duration::ZERO);
        // An unknown boot id never carries anything over either.
        let mut o = Observations::load(dir.path(), &[0u8; 16]);
        assert_eq!(o.seen_for("a", Duration::from_secs(5000)), Duration::ZERO);
    }
}
