//! A resolved profile: everything one scheduled run needs, validated, with
//! the line each key came from (for later errors). It serialises, in the
//! file's kebab-case names, as the view `larder config check` prints.

use super::calendar::Schedule;
use super::values::{CheckSubset, IoNice, RetryPolicy, ser_duration};
use crate::error::Error;
use crate::retention::{Count, Duration as KeepWithin, Policy, TagList};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The default `nice` value of a run: lower priority than interactive work.
pub const DEFAULT_NICE: i32 = 10;
/// The default time a hook may take before it is killed.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// One profile, with inheritance applied.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Profile {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inherit: Option<String>,
    /// The repository location.
    pub repository: String,
    /// Where the repository's secret comes from (never the secret itself).
    pub credential: Credential,
    /// What to back up (absolute paths; may be empty for a profile that
    /// only serves as a parent, or one that backs up a command's output:
    /// `backup.stdin-from-command`).
    pub paths: Vec<PathBuf>,
    pub backup: BackupOptions,
    pub storage: Storage,
    pub schedule: Option<Schedule>,
    pub retention: Retention,
    /// When `prune` runs (after a backup, once this schedule is due).
    pub prune: Option<Schedule>,
    /// When `check` runs.
    pub check: Option<Schedule>,
    pub check_subset: Option<CheckSubset>,
    pub nice: i32,
    pub ionice: IoNice,
    pub hooks: Hooks,
    pub retry: RetryPolicy,
    pub prometheus_textfile: Option<PathBuf>,
    /// Where each key was written.
    #[serde(skip)]
    pub origin: Origin,
}

/// Where the repository's password or identity comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Credential {
    /// The first line of this file is the passphrase.
    PasswordFile(PathBuf),
    /// The first output line of this shell command is the passphrase.
    PasswordCommand(String),
    /// An age identity file.
    IdentityFile(PathBuf),
}

/// How the profile's runs write to and talk to its repository: the global
/// flags of the same names (`--compression`, `--pack-size`,
/// `--limit-upload`, `--limit-download`, `--connections`, `--cacert`,
/// `--insecure-tls`). A setting the
/// command line (or its environment variable) gives wins; unset in both,
/// the command's default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Storage {
    /// As written, checked: `auto`, `off`, `fast`, `better`, `max` or a
    /// zstd level.
    pub compression: Option<String>,
    /// MiB.
    pub pack_size: Option<u32>,
    /// KiB/s.
    pub limit_upload: Option<u64>,
    /// KiB/s.
    pub limit_download: Option<u64>,
    pub connections: Option<u16>,
    /// PEM files of the root certificates an `https` server is checked
    /// against (instead of the usual ones).
    pub cacert: Vec<PathBuf>,
    /// No check of an `https` server's certificate.
    pub insecure_tls: bool,
}

impl Storage {
    /// These settings, each unset one taken from `base`.
    pub fn over(&self, base: &Storage) -> Storage {
        Storage {
            compression: self
                .compression
                .clone()
                .or_else(|| base.compression.clone()),
            pack_size: self.pack_size.or(base.pack_size),
            limit_upload: self.limit_upload.or(base.limit_upload),
            limit_download: self.limit_download.or(base.limit_download),
            connections: self.connections.or(base.connections),
            cacert: if self.cacert.is_empty() {
                base.cacert.clone()
            } else {
                self.cacert.clone()
            },
            insecure_tls: self.insecure_tls || base.insecure_tls,
        }
    }
}

/// The backup command's options.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct BackupOptions {
    pub exclude: Vec<String>,
    pub exclude_file: Vec<PathBuf>,
    pub iexclude: Vec<String>,
    pub iexclude_file: Vec<PathBuf>,
    /// Bytes (`exclude-larger-than`, written as `100M`).
    pub exclude_larger_than: Option<u64>,
    pub exclude_if_present: Vec<String>,
    pub exclude_caches: bool,
    pub one_file_system: bool,
    pub tags: Vec<String>,
    pub host: Option<String>,
    /// A command (program, then arguments) whose output is backed up as
    /// one file instead of paths, as `backup --stdin-from-command`.
    pub stdin_from_command: Vec<String>,
    /// The name that file gets (`stdin` when unset).
    pub stdin_filename: Option<String>,
    /// Save no snapshot when nothing changed since the last one.
    pub skip_if_unchanged: bool,
    /// `backup --ignore-inode`, `--ignore-ctime`.
    pub ignore_inode: bool,
    pub ignore_ctime: bool,
    /// Files read at once (`backup --read-concurrency`).
    pub read_concurrency: Option<usize>,
}

impl BackupOptions {
    /// The name a stream profile's file gets, and so its snapshots' one
    /// path (`/NAME`).
    pub fn stream_name(&self) -> &str {
        self.stdin_filename
            .as_deref()
            .unwrap_or(crate::archiver::STDIN_NAME)
    }
}

/// The retention policy as written (`forget`'s flags); the retention module
/// turns it into a policy. Counts are `-1` for unlimited.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Retention {
    pub keep_last: Option<i64>,
    pub keep_hourly: Option<i64>,
    pub keep_daily: Option<i64>,
    pub keep_weekly: Option<i64>,
    pub keep_monthly: Option<i64>,
    pub keep_yearly: Option<i64>,
    pub keep_within: Option<String>,
    pub keep_within_hourly: Option<String>,
    pub keep_within_daily: Option<String>,
    pub keep_within_weekly: Option<String>,
    pub keep_within_monthly: Option<String>,
    pub keep_within_yearly: Option<String>,
    pub keep_tag: Vec<String>,
    pub group_by: Option<String>,
}

impl Retention {
    /// The policy `forget` applies; an error names a value that does not
    /// parse (the config check has refused those already).
    pub fn policy(&self) -> crate::error::Result<Policy> {
        let count = |v: Option<i64>| v.map_or(Ok(Count::Off), |n| Count::parse(&n.to_string()));
        let within = |v: &Option<String>| {
            v.as_deref()
                .map_or(Ok(KeepWithin::default()), KeepWithin::parse)
        };
        Ok(Policy {
            last: count(self.keep_last)?,
            hourly: count(self.keep_hourly)?,
            daily: count(self.keep_daily)?,
            weekly: count(self.keep_weekly)?,
            monthly: count(self.keep_monthly)?,
            yearly: count(self.keep_yearly)?,
            within: within(&self.keep_within)?,
            within_hourly: within(&self.keep_within_hourly)?,
            within_daily: within(&self.keep_within_daily)?,
            within_weekly: within(&self.keep_within_weekly)?,
            within_monthly: within(&self.keep_within_monthly)?,
            within_yearly: within(&self.keep_within_yearly)?,
            tags: self.keep_tag.iter().map(|t| TagList::parse(t)).collect(),
        })
    }

    /// Whether any `keep-*` rule is set (`group-by` alone is no policy):
    /// without one, the run cycle skips `forget`.
    pub fn is_set(&self) -> bool {
        let counts = [
            self.keep_last,
            self.keep_hourly,
            self.keep_daily,
            self.keep_weekly,
            self.keep_monthly,
            self.keep_yearly,
        ];
        let within = [
            &self.keep_within,
            &self.keep_within_hourly,
            &self.keep_within_daily,
            &self.keep_within_weekly,
            &self.keep_within_monthly,
            &self.keep_within_yearly,
        ];
        counts.iter().any(Option::is_some)
            || within.iter().any(|w| w.is_some())
            || !self.keep_tag.is_empty()
    }
}

/// Shell commands run around a cycle, each limited to `timeout`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Hooks {
    pub before: Option<String>,
    pub after: Option<String>,
    pub on_success: Option<String>,
    pub on_failure: Option<String>,
    #[serde(serialize_with = "ser_duration")]
    pub timeout: Duration,
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            before: None,
            after: None,
            on_success: None,
            on_failure: None,
            timeout: DEFAULT_HOOK_TIMEOUT,
        }
    }
}

/// The file a profile was read from and the line of each of its keys
/// (a key inherited from a parent has the parent's line).
#[derive(Clone, Debug, Default)]
pub struct Origin {
    pub file: PathBuf,
    /// The line of the `[profile.NAME]` header.
    pub header_line: usize,
    pub key_lines: BTreeMap<&'static str, usize>,
}

impl Profile {
    /// A configuration error about `key` (its line, or the profile's header
    /// when the key is not set): `FILE:LINE: profile NAME: MESSAGE`.
    pub fn error_at(&self, key: &str, message: impl std::fmt::Display) -> Error {
        let line = self
            .origin
            .key_lines
            .get(key)
            .copied()
            .unwrap_or(self.origin.header_line);
        Error::Usage(format!(
            "{}:{line}: profile {}: {message}",
            self.origin.file.display(),
            self.name
        ))
    }
}
