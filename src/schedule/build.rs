//! Turning one merged profile table into a [`Profile`]: each key's value
//! checked and converted, defaults filled in, paths expanded (`~/` is the
//! home directory; a relative credential, exclude or metrics file is
//! relative to the configuration file's directory; backup paths must be
//! absolute). Errors pile up, each with its line, so one `config check`
//! shows them all.

use super::calendar::Schedule;
use super::paths::Env;
use super::profile::{
    BackupOptions, Credential, DEFAULT_HOOK_TIMEOUT, DEFAULT_NICE, Hooks, Origin, Profile,
    Retention, Storage,
};
use super::raw::{RawProfile, line_of};
use super::values::RetryPolicy;
use super::values::{CheckSubset, IoNice, duration, keep_count, keep_within};
use std::path::{Path, PathBuf};
use toml::Spanned;

/// Collects the errors of one profile while converting its values.
pub(crate) struct Builder<'a> {
    ctx: &'a Ctx<'a>,
    name: &'a str,
    header: usize,
    pub errors: Vec<String>,
}

impl<'a> Builder<'a> {
    pub fn new(ctx: &'a Ctx<'a>, name: &'a str, header: usize) -> Self {
        Builder {
            ctx,
            name,
            header,
            errors: Vec::new(),
        }
    }

    /// Records an error at byte offset `pos`.
    pub fn fail(&mut self, pos: usize, message: impl std::fmt::Display) {
        let m = self
            .ctx
            .at(pos, format!("profile {}: {message}", self.name));
        self.errors.push(m);
    }

    /// Converts a value if it is set; a conversion error is recorded at the
    /// value's line and gives `None`.
    fn conv<T, U>(
        &mut self,
        v: &Option<Spanned<T>>,
        f: impl FnOnce(&T) -> Result<U, String>,
    ) -> Option<U> {
        let v = v.as_ref()?;
        match f(v.get_ref()) {
            Ok(u) => Some(u),
            Err(m) => {
                self.fail(v.span().start, m);
                None
            }
        }
    }

    /// The whole profile, or `None` when a required part is missing or bad.
    pub fn profile(&mut self, r: &RawProfile, origin: Origin) -> Option<Profile> {
        let ctx = self.ctx;
        let repository = self.repository(r);
        let credential = self.credential(r);
        let paths = self
            .conv(&r.paths, |v| {
                v.iter().map(|s| source_path(ctx, s)).collect()
            })
            .unwrap_or_default();
        let backup = self.backup(r);
        self.backup_source(r);
        let storage = self.storage(r);
        let schedule = self.conv(&r.schedule, |s| Schedule::parse(s));
        let prune = self.conv(&r.prune, |s| Schedule::parse(s));
        let check = self.conv(&r.check, |s| Schedule::parse(s));
        let check_subset = self.conv(&r.check_subset, |s| CheckSubset::parse(s));
        let retention = self.retention(r);
        let nice = self
            .conv(&r.nice, |n| match i32::try_from(*n) {
                Ok(n) if (-20..=19).contains(&n) => Ok(n),
                _ => Err(format!("nice = {n}: expected -20 to 19")),
            })
            .unwrap_or(DEFAULT_NICE);
        let ionice = self
            .conv(&r.ionice, |s| IoNice::parse(s))
            .unwrap_or(IoNice::Idle);
        let hooks = Hooks {
            before: val(&r.before),
            after: val(&r.after),
            on_success: val(&r.on_success),
            on_failure: val(&r.on_failure),
            timeout: self
                .conv(&r.hook_timeout, |s| duration(s, "hook-timeout"))
                .unwrap_or(DEFAULT_HOOK_TIMEOUT),
        };
        let retry = self.retry(r);
        let prometheus_textfile = self.conv(&r.prometheus_textfile, |s| file_path(ctx, s));
        Some(Profile {
            name: self.name.to_string(),
            inherit: val(&r.inherit),
            repository: repository?,
            credential: credential?,
            paths,
            backup,
            storage,
            schedule,
            retention,
            prune,
            check,
            check_subset,
            nice,
            ionice,
            hooks,
            retry,
            prometheus_textfile,
            origin,
        })
    }

    fn repository(&mut self, r: &RawProfile) -> Option<String> {
        if r.repository.is_none() {
            self.fail(self.header, "no repository");
            return None;
        }
        let ctx = self.ctx;
        self.conv(&r.repository, |s| {
            let p = ctx.env.expand_tilde(s).map_err(|e| e.to_string())?;
            if p.is_relative() && !s.contains(':') {
                return Err(format!("repository {s:?} must be an absolute path"));
            }
            Ok(p.to_string_lossy().into_owned())
        })
    }

    /// Exactly one of `password-file`, `password-command`, `identity-file`.
    fn credential(&mut self, r: &RawProfile) -> Option<Credential> {
        let ctx = self.ctx;
        let set: Vec<(&str, usize)> = [
            (
                "password-file",
                r.password_file.as_ref().map(|v| v.span().start),
            ),
            (
                "password-command",
                r.password_command.as_ref().map(|v| v.span().start),
            ),
            (
                "identity-file",
                r.identity_file.as_ref().map(|v| v.span().start),
            ),
        ]
        .into_iter()
        .filter_map(|(k, s)| s.map(|s| (k, s)))
        .collect();
        match set.as_slice() {
            [] => {
                self.fail(
                    self.header,
                    "no credential source: set password-file, password-command or identity-file",
                );
                None
            }
            [_] => {
                if let Some(c) = val(&r.password_command) {
                    return Some(Credential::PasswordCommand(c));
                }
                if r.password_file.is_some() {
                    return self
                        .conv(&r.password_file, |s| file_path(ctx, s))
                        .map(Credential::PasswordFile);
                }
                self.conv(&r.identity_file, |s| file_path(ctx, s))
                    .map(Credential::IdentityFile)
            }
            [(a, _), (b, pos), ..] => {
                self.fail(
                    *pos,
                    format!("both {a} and {b} are set; keep one credential source"),
                );
                None
            }
        }
    }

    /// `compression`, `pack-size`, `limit-upload`, `limit-download`,
    /// `connections`, `cacert`, `insecure-tls`: checked as the command
    /// line checks its flags.
    fn storage(&mut self, r: &RawProfile) -> Storage {
        use crate::repository::{Compression, PACK_SIZE_MIB_MAX, PACK_SIZE_MIB_MIN};
        let ctx = self.ctx;
        let limit = |key: &str, n: i64| match u64::try_from(n) {
            Ok(k) if k > 0 => Ok(k),
            _ => Err(format!("{key} = {n}: expected a positive number of KiB/s")),
        };
        Storage {
            compression: self.conv(&r.compression, |s| {
                s.parse::<Compression>()
                    .map(|_| s.trim().to_ascii_lowercase())
                    .map_err(|e| format!("compression: {e}"))
            }),
            pack_size: self.conv(&r.pack_size, |n| match u32::try_from(*n) {
                Ok(m) if (PACK_SIZE_MIB_MIN..=PACK_SIZE_MIB_MAX).contains(&m) => Ok(m),
                _ => Err(format!(
                    "pack-size = {n}: expected {PACK_SIZE_MIB_MIN} to {PACK_SIZE_MIB_MAX} (MiB)"
                )),
            }),
            limit_upload: self.conv(&r.limit_upload, |n| limit("limit-upload", *n)),
            limit_download: self.conv(&r.limit_download, |n| limit("limit-download", *n)),
            connections: self.conv(&r.connections, |n| match u16::try_from(*n) {
                Ok(c) if (1..=256).contains(&c) => Ok(c),
                _ => Err(format!("connections = {n}: expected 1 to 256")),
            }),
            cacert: self
                .conv(&r.cacert, |v| v.iter().map(|s| file_path(ctx, s)).collect())
                .unwrap_or_default(),
            insecure_tls: val(&r.insecure_tls).unwrap_or(false),
        }
    }

    fn backup(&mut self, r: &RawProfile) -> BackupOptions {
        let ctx = self.ctx;
        BackupOptions {
            exclude: val(&r.exclude).unwrap_or_default(),
            exclude_file: self
                .conv(&r.exclude_file, |v| {
                    v.iter().map(|s| file_path(ctx, s)).collect()
                })
                .unwrap_or_default(),
            iexclude: val(&r.iexclude).unwrap_or_default(),
            iexclude_file: self
                .conv(&r.iexclude_file, |v| {
                    v.iter().map(|s| file_path(ctx, s)).collect()
                })
                .unwrap_or_default(),
            exclude_larger_than: self.conv(&r.exclude_larger_than, |s| {
                crate::maintenance::prune::parse_size(s)
                    .map_err(|e| format!("exclude-larger-than: {e}"))
            }),
            exclude_if_present: val(&r.exclude_if_present).unwrap_or_default(),
            exclude_caches: val(&r.exclude_caches).unwrap_or(false),
            one_file_system: val(&r.one_file_system).unwrap_or(false),
            tags: val(&r.tags).unwrap_or_default(),
            host: val(&r.host),
            skip_if_unchanged: val(&r.skip_if_unchanged).unwrap_or(false),
            ignore_inode: val(&r.ignore_inode).unwrap_or(false),
            ignore_ctime: val(&r.ignore_ctime).unwrap_or(false),
            read_concurrency: self.conv(&r.read_concurrency, |n| {
                crate::archiver::read_concurrency(*n).map_err(|e| format!("read-concurrency = {n}: {e}"))
            }),
            stdin_from_command: self
                .conv(&r.stdin_from_command, |v| {
                    if v.is_empty() || v[0].is_empty() {
                        Err("stdin-from-command: give the command and its arguments, as [\"pg_dump\", \"mydb\"]".into())
                    } else {
                        Ok(v.clone())
                    }
                })
                .unwrap_or_default(),
            stdin_filename: self.conv(&r.stdin_filename, |s| {
                if crate::tree::is_safe_name(s.as_bytes()) {
                    Ok(s.clone())
                } else {
                    Err(format!(
                        "stdin-filename {s:?}: give a file name, without `/`, not `.` or `..`"
                    ))
                }
            }),
        }
    }

    /// A profile backs up paths or a command's output, not both; a
    /// stream's name needs a stream.
    fn backup_source(&mut self, r: &RawProfile) {
        let command = r.stdin_from_command.as_ref().map(|v| v.span().start);
        if let (Some(pos), Some(_)) = (command, &r.paths) {
            self.fail(
                pos,
                "both paths and stdin-from-command are set (one may come from `inherit`); keep one",
            );
        }
        if let (None, Some(name)) = (command, &r.stdin_filename) {
            self.fail(
                name.span().start,
                "stdin-filename names what stdin-from-command stores: set that too",
            );
        }
    }

    /// The `keep-*` rules and `group-by`. Rules that are all zeros keep
    /// nothing, which `forget` refuses: refused here, at the first rule's
    /// line, rather than failing the forget step of every run.
    fn retention(&mut self, r: &RawProfile) -> Retention {
        let out = self.retention_values(r);
        if out.is_set() && out.policy().is_ok_and(|p| p.is_empty()) {
            let span = |v: Option<std::ops::Range<usize>>| v.map(|s| s.start);
            let first = [
                span(r.keep_last.as_ref().map(Spanned::span)),
                span(r.keep_hourly.as_ref().map(Spanned::span)),
                span(r.keep_daily.as_ref().map(Spanned::span)),
                span(r.keep_weekly.as_ref().map(Spanned::span)),
                span(r.keep_monthly.as_ref().map(Spanned::span)),
                span(r.keep_yearly.as_ref().map(Spanned::span)),
                span(r.keep_within.as_ref().map(Spanned::span)),
                span(r.keep_within_hourly.as_ref().map(Spanned::span)),
                span(r.keep_within_daily.as_ref().map(Spanned::span)),
                span(r.keep_within_weekly.as_ref().map(Spanned::span)),
                span(r.keep_within_monthly.as_ref().map(Spanned::span)),
                span(r.keep_within_yearly.as_ref().map(Spanned::span)),
            ];
            let pos = first.into_iter().flatten().min().unwrap_or(0);
            self.fail(
                pos,
                "these keep-* rules keep nothing (all zero), which forget refuses: \
                 give one that keeps something, or leave them out (no forget step)",
            );
        }
        out
    }

    fn retention_values(&mut self, r: &RawProfile) -> Retention {
        let mut count = |v: &Option<Spanned<i64>>, key: &str| self.conv(v, |n| keep_count(*n, key));
        Retention {
            keep_last: count(&r.keep_last, "keep-last"),
            keep_hourly: count(&r.keep_hourly, "keep-hourly"),
            keep_daily: count(&r.keep_daily, "keep-daily"),
            keep_weekly: count(&r.keep_weekly, "keep-weekly"),
            keep_monthly: count(&r.keep_monthly, "keep-monthly"),
            keep_yearly: count(&r.keep_yearly, "keep-yearly"),
            keep_within: self.conv(&r.keep_within, |s| keep_within(s, "keep-within")),
            keep_within_hourly: self.conv(&r.keep_within_hourly, |s| {
                keep_within(s, "keep-within-hourly")
            }),
            keep_within_daily: self.conv(&r.keep_within_daily, |s| {
                keep_within(s, "keep-within-daily")
            }),
            keep_within_weekly: self.conv(&r.keep_within_weekly, |s| {
                keep_within(s, "keep-within-weekly")
            }),
            keep_within_monthly: self.conv(&r.keep_within_monthly, |s| {
                keep_within(s, "keep-within-monthly")
            }),
            keep_within_yearly: self.conv(&r.keep_within_yearly, |s| {
                keep_within(s, "keep-within-yearly")
            }),
            keep_tag: val(&r.keep_tag).unwrap_or_default(),
            group_by: self.conv(&r.group_by, |s| {
                crate::retention::GroupBy::parse(s)
                    .map(|_| s.clone())
                    .map_err(|e| format!("group-by = {s:?}: {e}"))
            }),
        }
    }

    fn retry(&mut self, r: &RawProfile) -> RetryPolicy {
        let d = RetryPolicy::default();
        let retry = RetryPolicy {
            retries: self
                .conv(&r.retries, |n| match u32::try_from(*n) {
                    Ok(n) if n <= 100 => Ok(n),
                    _ => Err(format!("retries = {n}: expected 0 to 100")),
                })
                .unwrap_or(d.retries),
            delay: self
                .conv(&r.retry_delay, |s| duration(s, "retry-delay"))
                .unwrap_or(d.delay),
            max_delay: self
                .conv(&r.retry_max_delay, |s| duration(s, "retry-max-delay"))
                .unwrap_or(d.max_delay),
        };
        if retry.max_delay < retry.delay
            && let Some(v) = r.retry_max_delay.as_ref().or(r.retry_delay.as_ref())
        {
            self.fail(
                v.span().start,
                "retry-max-delay is shorter than retry-delay",
            );
        }
        retry
    }
}

/// A file named in the profile: `~/` expanded, relative to the
/// configuration file's directory.
fn file_path(ctx: &Ctx, s: &str) -> Result<PathBuf, String> {
    let p = ctx.env.expand_tilde(s).map_err(|e| e.to_string())?;
    if p.is_absolute() {
        return Ok(p);
    }
    let dir = ctx.file.parent().unwrap_or(std::path::Path::new("."));
    Ok(dir.join(p))
}

/// A path to back up: `~/` expanded, and then it must be absolute.
fn source_path(ctx: &Ctx, s: &str) -> Result<PathBuf, String> {
    let p = ctx.env.expand_tilde(s).map_err(|e| e.to_string())?;
    if p.is_absolute() {
        Ok(p)
    } else {
        Err(format!("path {s:?} must be absolute (or start with ~/)"))
    }
}

/// What reading the file needs besides its text.
pub(crate) struct Ctx<'a> {
    pub file: &'a Path,
    pub text: &'a str,
    pub env: &'a Env,
}

impl Ctx<'_> {
    /// `FILE:LINE: MESSAGE` for byte offset `pos`.
    pub fn at(&self, pos: usize, message: impl std::fmt::Display) -> String {
        format!(
            "{}:{}: {message}",
            self.file.display(),
            line_of(self.text, pos)
        )
    }
}

/// The inner value of an optional spanned value.
pub(crate) fn val<T: Clone>(v: &Option<Spanned<T>>) -> Option<T> {
    v.as_ref().map(|s| s.get_ref().clone())
}
