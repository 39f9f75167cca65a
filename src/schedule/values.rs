//! The small value types of a profile and their parsers: how much to check
//! (`check-subset`), I/O and CPU priority (`ionice`, `nice`), retention
//! counts, durations, retry policies, and profile names. Parsers return a message; the
//! caller adds the file and line.

use serde::{Serialize, Serializer};
use std::time::Duration;

/// How much pack data a scheduled `check` reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CheckSubset {
    /// This percentage (0 < p ≤ 100) of the packs.
    Percent(f64),
    /// Part `n` of `t` equal parts (1 ≤ n ≤ t).
    Part { n: u32, t: u32 },
}

impl CheckSubset {
    /// Parses `"5%"`, `"2.5%"` or `"n/t"`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if let Some(p) = s.strip_suffix('%') {
            return match p.trim().parse::<f64>() {
                Ok(v) if v > 0.0 && v <= 100.0 => Ok(CheckSubset::Percent(v)),
                _ => Err(format!(
                    "check-subset {s:?}: a percentage must be above 0 and at most 100"
                )),
            };
        }
        if let Some((n, t)) = s.split_once('/')
            && let (Ok(n), Ok(t)) = (n.trim().parse::<u32>(), t.trim().parse::<u32>())
            && n >= 1
            && n <= t
        {
            return Ok(CheckSubset::Part { n, t });
        }
        Err(format!(
            "check-subset {s:?}: expected a percentage (\"5%\") or a part \"n/t\" with 1 <= n <= t"
        ))
    }
}

impl std::fmt::Display for CheckSubset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckSubset::Percent(p) => write!(f, "{p}%"),
            CheckSubset::Part { n, t } => write!(f, "{n}/{t}"),
        }
    }
}

impl Serialize for CheckSubset {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The I/O scheduling class a run gets (Linux `ionice`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoNice {
    /// Leave the I/O priority alone.
    Unchanged,
    /// Disk time only when no other process wants it: the default, so a
    /// backup never slows the machine down.
    Idle,
    /// The normal class at a level from 0 (highest) to 7 (lowest).
    BestEffort(u8),
}

impl IoNice {
    /// Parses `"idle"`, `"best-effort"`, `"best-effort:N"` or `"none"`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "idle" => Ok(IoNice::Idle),
            "none" => Ok(IoNice::Unchanged),
            "best-effort" => Ok(IoNice::BestEffort(4)),
            other => other
                .strip_prefix("best-effort:")
                .and_then(|l| l.parse::<u8>().ok())
                .filter(|l| *l <= 7)
                .map(IoNice::BestEffort)
                .ok_or_else(|| {
                    format!(
                        "ionice {other:?}: expected \"idle\", \"best-effort\", \
                         \"best-effort:N\" (N from 0 to 7) or \"none\""
                    )
                }),
        }
    }
}

impl std::fmt::Display for IoNice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IoNice::Unchanged => f.write_str("none"),
            IoNice::Idle => f.write_str("idle"),
            IoNice::BestEffort(l) => write!(f, "best-effort:{l}"),
        }
    }
}

impl Serialize for IoNice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A retention count: `-1` means unlimited, else at least 0.
pub fn keep_count(v: i64, key: &str) -> Result<i64, String> {
    if v >= -1 && v <= i64::from(u32::MAX) {
        Ok(v)
    } else {
        Err(format!(
            "{key} = {v}: expected a count, or -1 for unlimited"
        ))
    }
}

/// A `keep-within*` value in restic's syntax (`1y2m3d4h`, where `m` is
/// months, not minutes), checked when the file is read rather than on
/// every run; kept as written.
pub fn keep_within(s: &str, key: &str) -> Result<String, String> {
    crate::retention::Duration::parse(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("{key} = {s:?}: {e}"))
}

/// A positive duration: `"90s"`, `"15m"`, `"1h30m"`, `"2 days"` or ISO 8601.
pub fn duration(s: &str, key: &str) -> Result<Duration, String> {
    let bad = || format!("{key} = {s:?}: expected a duration such as \"30s\", \"15m\" or \"1h\"");
    let d: jiff::SignedDuration = s.trim().parse().map_err(|_| bad())?;
    if d.is_negative() || d.is_zero() {
        return Err(bad());
    }
    Duration::try_from(d).map_err(|_| bad())
}

/// A duration as the config file would write it.
pub fn duration_text(d: Duration) -> String {
    match jiff::SignedDuration::try_from(d) {
        Ok(s) => format!("{s:#}"),
        Err(_) => format!("{}s", d.as_secs()),
    }
}

/// A profile name: it becomes part of unit and file names, so it is kept to
/// letters, digits, `-` and `_`, starting with a letter or digit.
pub fn profile_name(name: &str) -> Result<(), String> {
    let ok = name.len() <= 64
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "profile name {name:?}: use up to 64 letters, digits, '-' and '_', starting with a letter or digit"
        ))
    }
}

/// How often and how patiently a step is retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct RetryPolicy {
    /// Retries after the first attempt (0: never retry).
    pub retries: u32,
    /// The wait before the first retry; each later wait doubles.
    #[serde(serialize_with = "ser_duration")]
    pub delay: Duration,
    /// The longest wait.
    #[serde(serialize_with = "ser_duration")]
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            retries: 3,
            delay: Duration::from_secs(30),
            max_delay: Duration::from_secs(10 * 60),
        }
    }
}

impl RetryPolicy {
    /// The backoff before retry number `k` (0-based), before jitter:
    /// `delay * 2^k`, at most `max_delay`.
    pub fn backoff(&self, k: u32) -> Duration {
        let factor = 1u32.checked_shl(k.min(31)).unwrap_or(u32::MAX);
        self.delay.saturating_mul(factor).min(self.max_delay)
    }
}

/// Writes a duration as the file would (`"15m"`).
pub(crate) fn ser_duration<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&duration_text(*d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_subsets() {
        assert_eq!(CheckSubset::parse("5%"), Ok(CheckSubset::Percent(5.0)));
        assert_eq!(CheckSubset::parse(" 2.5 %"), Ok(CheckSubset::Percent(2.5)));
        assert_eq!(
            CheckSubset::parse("1/7"),
            Ok(CheckSubset::Part { n: 1, t: 7 })
        );
        for bad in ["0%", "101%", "8/7", "0/7", "x", "5", "%"] {
            assert!(CheckSubset::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(CheckSubset::Part { n: 3, t: 10 }.to_string(), "3/10");
    }

    #[test]
    fn ionice_classes() {
        assert_eq!(IoNice::parse("idle"), Ok(IoNice::Idle));
        assert_eq!(IoNice::parse("best-effort"), Ok(IoNice::BestEffort(4)));
        assert_eq!(IoNice::parse("best-effort:7"), Ok(IoNice::BestEffort(7)));
        assert_eq!(IoNice::parse("none"), Ok(IoNice::Unchanged));
        assert!(IoNice::parse("best-effort:8").is_err());
        assert!(IoNice::parse("realtime").is_err());
    }

    #[test]
    fn durations_and_counts() {
        assert_eq!(duration("15m", "k"), Ok(Duration::from_secs(900)));
        assert_eq!(duration("1h30m", "k"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration("PT2S", "k"), Ok(Duration::from_secs(2)));
        assert!(duration("0s", "k").is_err());
        assert!(duration("soon", "k").unwrap_err().contains("k = \"soon\""));
        assert_eq!(duration_text(Duration::from_secs(5400)), "1h 30m");
        assert_eq!(keep_count(-1, "keep-yearly"), Ok(-1));
        assert!(keep_count(-2, "keep-yearly").is_err());
    }

    #[test]
    fn profile_names() {
        assert!(profile_name("home-2_x").is_ok());
        for bad in ["", "-x", "a b", "a/b", "é", &"x".repeat(65)] {
            assert!(profile_name(bad).is_err(), "{bad}");
        }
    }
}
