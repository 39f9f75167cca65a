//! The repository work of a scheduled run: [`RepoSteps`] implements the
//! schedule's [`Steps`] with the real library calls (backup, forget with
//! the profile's retention, prune, a check reading the profile's subset),
//! against the profile's own repository and credentials. [`open`] is the
//! one place a profile's repository location becomes an open repository,
//! through the same repository strings as the command line (a directory,
//! `sftp:`, `rest:`, `s3:`).
//!
//! It sits below [`crate::maintenance`] (it calls forget and prune) and
//! above the CLI, which only builds a [`RepoSteps`] and hands it to the
//! run cycle or the daemon.

use crate::archiver::{self, BackupOptions, Stream};
use crate::backend::{self, Backend, LocalBackend, Location, RemoteOptions};
use crate::check::rotation::DataSubset;
use crate::check::{self, CheckOptions};
use crate::error::{Error, Result};
use crate::keys::Credential as KeyCredential;
use crate::maintenance::forget::{ForgetOptions, forget};
use crate::maintenance::prune::{self, PruneOptions};
use crate::progress::NoProgress;
use crate::repository::Repository;
use crate::repository::trust::KnownRepositories;
use crate::retention::{GroupBy, TagList};
use crate::schedule::profile::{Credential, Profile, Storage};
use crate::schedule::steps::{StepFailure, StepReport, StepResult, Steps};
use crate::schedule::values::CheckSubset;
use crate::snapshot::Filter;
use age::secrecy::SecretString;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a run keeps what is not in the repository.
#[derive(Clone, Debug)]
pub struct Dirs {
    /// The local index cache.
    pub cache: PathBuf,
    /// larder's state directory (known repositories live there).
    pub state: PathBuf,
}

/// Opens the profile's repository with its own credential, and checks it
/// is the repository this user opened at this location before. Returns
/// the repository and the warnings opening it produced.
pub fn open(profile: &Profile, dirs: &Dirs) -> Result<(Repository, Vec<String>)> {
    open_with(profile, dirs, &Storage::default())
}

/// [`open`], with the storage settings of `given` (the command line's)
/// over the profile's ([`Storage::over`]).
pub fn open_with(
    profile: &Profile,
    dirs: &Dirs,
    given_storage: &Storage,
) -> Result<(Repository, Vec<String>)> {
    let storage = given_storage.over(&profile.storage);
    let given = Path::new(&profile.repository);
    let at = |e: Error| profile.error_at("repository", e.to_string());
    // The location as known repositories record it, the same string the
    // command line records: an absolute path, or the remote location
    // without its password.
    let (store, shown): (Arc<dyn Backend>, String) = match Location::parse(given).map_err(at)? {
        Location::Local(l) => {
            let path = std::path::absolute(&l).map_err(|e| Error::io(&l, e))?;
            let shown = path.display().to_string();
            (Arc::new(LocalBackend::new(&path)), shown)
        }
        remote => {
            let opts = remote_options(&storage)?;
            let store = backend::open(given, &opts).map_err(at)?;
            (Arc::from(store), remote.display())
        }
    };
    let cred = credential(profile)?;
    let mut warnings = Vec::new();
    // Each step brings the index up to date under its own lock; the
    // segments the first sync skips are told in that step's report.
    let repo = Repository::open_unsynced(store, &cred, &dirs.cache, &mut warnings)?;
    repo.set_lock_readers(true);
    if let Some(c) = &storage.compression {
        repo.set_compression(
            c.parse()
                .map_err(|e: String| profile.error_at("compression", e))?,
        );
    }
    repo.set_pack_size(storage.pack_size)?;
    KnownRepositories::in_dir(&dirs.state).verify(&shown, &repo.identity(), false)?;
    Ok((repo, warnings))
}

/// The options a remote repository is opened with: the environment's
/// (timeouts, retries), with the connections and rate limits of `storage`.
pub fn remote_options(storage: &Storage) -> Result<RemoteOptions> {
    let mut opts = RemoteOptions::from_env()?;
    if let Some(c) = storage.connections {
        opts.connections = usize::from(c);
    }
    opts.limit_upload = storage.limit_upload;
    opts.limit_download = storage.limit_download;
    opts.tls = crate::backend::http::tls_config(&storage.cacert, storage.insecure_tls)?;
    Ok(opts)
}

/// The key material the profile's credential source gives.
fn credential(profile: &Profile) -> Result<KeyCredential> {
    match &profile.credential {
        Credential::IdentityFile(f) => KeyCredential::identity_file(f),
        Credential::PasswordFile(f) => {
            let text = std::fs::read_to_string(f).map_err(|e| Error::io(f, e))?;
            Ok(first_line(&text))
        }
        Credential::PasswordCommand(cmd) => {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(cmd)
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::inherit())
                .output()
                .map_err(|e| {
                    profile.error_at("password-command", format!("password command: {e}"))
                })?;
            if !out.status.success() {
                return Err(profile.error_at(
                    "password-command",
                    format!("the password command failed ({})", out.status),
                ));
            }
            Ok(first_line(&String::from_utf8_lossy(&out.stdout)))
        }
    }
}

fn first_line(text: &str) -> KeyCredential {
    KeyCredential::Passphrase(SecretString::from(
        text.lines().next().unwrap_or("").to_string(),
    ))
}

/// The real steps of a run: the repository is opened on the first step
/// (so an error opening it is a recorded, failed backup step) and kept
/// for the later ones.
pub struct RepoSteps {
    dirs: Dirs,
    repo: Option<Repository>,
    /// What opening the repository warned about, told in the backup's report.
    open_warnings: Vec<String>,
    /// How long a step waits for a conflicting lock before it fails
    /// (`--retry-lock`; zero: at once, leaving it to the run's retries).
    lock_retry: std::time::Duration,
    /// Storage settings given on the command line, over each profile's.
    storage: Storage,
}

impl RepoSteps {
    /// Steps that will open each profile's repository with `dirs`.
    pub fn new(dirs: Dirs) -> Self {
        RepoSteps {
            dirs,
            repo: None,
            open_warnings: Vec::new(),
            lock_retry: std::time::Duration::ZERO,
            storage: Storage::default(),
        }
    }

    /// Applies `storage` (the command line's settings) over each profile's
    /// own ([`Storage::over`]).
    pub fn with_storage(mut self, storage: Storage) -> Self {
        self.storage = storage;
        self
    }

    /// Makes each step wait up to `wait` for a conflicting lock, as
    /// `--retry-lock` does for a command, before it fails (and the run's
    /// own retries, if any, begin).
    pub fn with_lock_retry(mut self, wait: std::time::Duration) -> Self {
        self.lock_retry = wait;
        self
    }

    fn repo(&mut self, profile: &Profile) -> std::result::Result<&Repository, StepFailure> {
        if self.repo.is_none() {
            let (repo, warnings) =
                open_with(profile, &self.dirs, &self.storage).map_err(StepFailure::from)?;
            repo.set_lock_retry(self.lock_retry, None);
            self.repo = Some(repo);
            self.open_warnings = warnings;
        }
        self.repo
            .as_ref()
            .ok_or_else(|| StepFailure::permanent("the repository is not open", 1))
    }
}

/// The profile's backup options (exclude files read now).
pub fn backup_options(profile: &Profile) -> Result<BackupOptions> {
    let b = &profile.backup;
    let excludes = archiver::with_exclude_files(&b.exclude, &b.exclude_file)?;
    Ok(BackupOptions {
        paths: profile.paths.clone(),
        excludes,
        iexcludes: archiver::with_exclude_files(&b.iexclude, &b.iexclude_file)?,
        exclude_larger_than: b.exclude_larger_than,
        exclude_if_present: b.exclude_if_present.clone(),
        exclude_caches: b.exclude_caches,
        one_file_system: b.one_file_system,
        tags: b.tags.clone(),
        host: b.host.clone(),
        skip_if_unchanged: b.skip_if_unchanged,
        ignore_inode: b.ignore_inode,
        ignore_ctime: b.ignore_ctime,
        read_concurrency: b.read_concurrency,
        ..BackupOptions::default()
    })
}

/// The snapshots a profile's retention applies to: its host's (the
/// profile's `host`, else this machine's) with exactly its paths (a stream
/// profile's: `/NAME`) and tags, so two profiles sharing a repository
/// never forget each other's snapshots, even where one's paths or tags
/// are among the other's. A snapshot tagged by hand afterwards, or made
/// before the profile's paths changed, is no longer the profile's: its
/// retention leaves it alone.
fn own_snapshots(profile: &Profile) -> Result<Filter> {
    let paths = if profile.backup.stdin_from_command.is_empty() {
        profile
            .paths
            .iter()
            .map(|p| crate::localfs::absolute(p).map(|a| a.to_string_lossy().into_owned()))
            .collect::<Result<Vec<_>>>()?
    } else {
        vec![format!("/{}", profile.backup.stream_name())]
    };
    Ok(Filter {
        hosts: vec![
            profile
                .backup
                .host
                .clone()
                .unwrap_or_else(crate::host::hostname),
        ],
        tags: vec![TagList(profile.backup.tags.clone())],
        paths,
        exact: true,
    })
}

/// "first; second (and 3 more)".
fn some_of(list: &[String]) -> String {
    let shown: Vec<&str> = list.iter().take(3).map(String::as_str).collect();
    let more = list.len().saturating_sub(shown.len());
    if more > 0 {
        format!("{} (and {more} more)", shown.join("; "))
    } else {
        shown.join("; ")
    }
}

impl Steps for RepoSteps {
    fn backup(&mut self, profile: &Profile) -> StepResult {
        let opts = backup_options(profile)?;
        let repo = self.repo(profile)?;
        let command = &profile.backup.stdin_from_command;
        let res = if command.is_empty() {
            archiver::backup(repo, &opts, &NoProgress)?
        } else {
            let argv: Vec<OsString> = command.iter().map(OsString::from).collect();
            let name = profile.backup.stream_name();
            archiver::backup_stream(repo, Stream::Command(&argv), name, &opts, &NoProgress)?
        };
        let s = &res.summary;
        if res.skipped {
            let parent = res.parent.map(|p| p.short()).unwrap_or_default();
            return Ok(StepReport::message(format!(
                "nothing changed since snapshot {parent}: no snapshot saved (skip-if-unchanged)"
            )));
        }
        let id = res.snapshot_id.map(|i| i.to_hex()).unwrap_or_default();
        if !res.warnings.is_empty() {
            return Err(StepFailure::permanent(
                format!(
                    "snapshot {} is partial: {} path(s) could not be read: {}",
                    &id[..8.min(id.len())],
                    res.warnings.len(),
                    some_of(&res.warnings)
                ),
                3,
            ));
        }
        let mut message = format!(
            "snapshot {} saved: {} new, {} changed, {} unmodified files; {} bytes added",
            &id[..8.min(id.len())],
            s.files_new,
            s.files_changed,
            s.files_unmodified,
            s.data_added
        );
        let notes: Vec<String> = self
            .open_warnings
            .iter()
            .chain(&res.notices)
            .cloned()
            .collect();
        if !notes.is_empty() {
            message.push_str(&format!("; note: {}", some_of(&notes)));
        }
        Ok(StepReport {
            message,
            snapshot_id: Some(id),
            files_added: s.files_new + s.files_changed,
            bytes_added: s.data_added,
        })
    }

    fn forget(&mut self, profile: &Profile) -> StepResult {
        let group_by = match &profile.retention.group_by {
            Some(g) => GroupBy::parse(g)?,
            None => GroupBy::default(),
        };
        let opts = ForgetOptions {
            policy: profile.retention.policy()?,
            group_by,
            filter: own_snapshots(profile)?,
            ..ForgetOptions::default()
        };
        let repo = self.repo(profile)?;
        let report = forget(repo, &opts)?;
        if !report.problems.is_empty() {
            return Err(StepFailure::permanent(
                format!("forget: {}", some_of(&report.problems)),
                3,
            ));
        }
        let kept: usize = report.groups.iter().map(|g| g.keep.len()).sum();
        Ok(StepReport::message(format!(
            "removed {} snapshot(s), kept {kept}",
            report.removed.len()
        )))
    }

    fn prune(&mut self, profile: &Profile) -> StepResult {
        let repo = self.repo(profile)?;
        let r = prune::prune(repo, &PruneOptions::default())?;
        let mut message = format!(
            "marked {} unused pack(s) ({} bytes), repacked {}, deleted {} marked earlier",
            r.plan.unused.packs, r.plan.unused.bytes, r.plan.repack.packs, r.sweep.packs_deleted
        );
        let mut warnings = repo.take_index_problems();
        warnings.extend(r.problems);
        if !warnings.is_empty() {
            message.push_str(&format!("; warnings: {}", some_of(&warnings)));
        }
        Ok(StepReport::message(message))
    }

    fn check(&mut self, profile: &Profile) -> StepResult {
        let subset = profile.check_subset.map(|s| match s {
            CheckSubset::Percent(p) => DataSubset::Percent(p),
            CheckSubset::Part { n, t } => DataSubset::Slice { n, t },
        });
        let repo = self.repo(profile)?;
        let rep = check::check(
            repo,
            &CheckOptions {
                read_data: false,
                subset,
            },
        )?;
        if !rep.ok() {
            return Err(StepFailure::permanent(
                format!(
                    "check found {} problem(s): {}",
                    rep.problems.len(),
                    some_of(&rep.problems)
                ),
                1,
            ));
        }
        Ok(StepReport::message(format!(
            "no errors in {} packs, {} snapshots; read {} packs",
            rep.packs, rep.snapshots, rep.packs_read
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retention::{Count, Duration};
    use crate::schedule::{Config, Env};

    fn profile(extra: &str) -> Profile {
        let text = format!(
            "[profile.p]\nrepository = \"/r\"\npassword-command = \"echo pw\"\npaths = [\"/data\"]\n{extra}\n"
        );
        Config::parse(&text, Path::new("/c.toml"), &Env::default())
            .unwrap()
            .profiles["p"]
            .clone()
    }

    #[test]
    fn retention_becomes_forgets_policy() {
        let p =
            profile("keep-last = 3\nkeep-yearly = -1\nkeep-within = \"2d\"\nkeep-tag = [\"a,b\"]");
        let pol = p.retention.policy().unwrap();
        assert_eq!(pol.last, Count::Limit(3));
        assert_eq!(pol.yearly, Count::Unlimited);
        assert_eq!(pol.daily, Count::Off);
        assert_eq!(pol.within, Duration::parse("2d").unwrap());
        assert_eq!(pol.tags, vec![TagList::parse("a,b")]);
    }

    #[test]
    fn remote_repository_strings_reach_the_backends_and_errors_name_the_line() {
        let dirs = Dirs {
            cache: "/nonexistent/cache".into(),
            state: "/nonexistent/state".into(),
        };
        let mut p = profile("");
        // Parsed as SFTP and refused before any connection: a user that
        // ssh would take for an option.
        p.repository = "sftp://-oProxyCommand=x@host:2222//backup".into();
        let err = open(&p, &dirs).err().unwrap().to_string();
        assert!(err.starts_with("/c.toml:2: profile p:"), "{err}");
        assert!(err.contains("may not start with '-'"), "{err}");
        // A remote string that does not parse names the profile's line too.
        p.repository = "rest:ftp://host/x".into();
        let err = open(&p, &dirs).err().unwrap().to_string();
        assert!(err.starts_with("/c.toml:2: profile p:"), "{err}");
        assert!(err.contains("rest:"), "{err}");
    }

    /// A profile's `pack-size` and `compression` reach the repository its
    /// run opens, the command line's settings win over them, and unset in
    /// both the repository's own apply; `connections` and the rate limits
    /// reach the options a remote repository is opened with.
    #[test]
    fn storage_settings_reach_the_repository_and_the_remote_options() {
        use crate::keys::{MIN_WORK_FACTOR, NewKey};
        let d = tempfile::tempdir().unwrap();
        let key = NewKey::Passphrase {
            pass: "pw".to_string().into(),
            work_factor: MIN_WORK_FACTOR,
        };
        let backend = Arc::new(LocalBackend::new(d.path().join("repo")));
        let opts = crate::repository::InitOptions::default();
        drop(Repository::init(backend, &key, &opts, &d.path().join("cache")).unwrap());
        let dirs = Dirs {
            cache: d.path().join("run-cache"),
            state: d.path().join("state"),
        };
        let at = |extra: &str| {
            let mut p = profile(extra);
            p.repository = d.path().join("repo").display().to_string();
            p
        };
        let p = at("pack-size = 8\ncompression = \"max\"\nlimit-upload = 300\nconnections = 9");
        let (repo, _) = open(&p, &dirs).unwrap();
        assert_eq!(repo.pack_size(), 8 << 20);
        assert_eq!(repo.compression_level(), crate::repository::LEVEL_MAX);
        drop(repo);
        let given = Storage {
            compression: Some("off".into()),
            pack_size: Some(4),
            limit_download: Some(50),
            ..Storage::default()
        };
        let (repo, _) = open_with(&p, &dirs, &given).unwrap();
        assert_eq!(repo.pack_size(), 4 << 20);
        assert_eq!(repo.compression_level(), 0);
        drop(repo);
        let (repo, _) = open(&at(""), &dirs).unwrap();
        assert_eq!(repo.pack_size(), 16 << 20, "the repository's own");
        assert_eq!(repo.compression_level(), crate::repository::LEVEL_DEFAULT);
        drop(repo);
        let opts = remote_options(&given.over(&p.storage)).unwrap();
        assert_eq!(opts.connections, 9);
        assert_eq!(
            (opts.limit_upload, opts.limit_download),
            (Some(300), Some(50))
        );
        let opts = remote_options(&Storage::default()).unwrap();
        assert_eq!(opts.connections, 5);
        assert_eq!((opts.limit_upload, opts.limit_download), (None, None));
    }

    #[test]
    fn the_password_comes_from_the_profiles_own_source() {
        let p = profile("");
        match credential(&p).unwrap() {
            KeyCredential::Passphrase(s) => {
                use age::secrecy::ExposeSecret;
                assert_eq!(s.expose_secret(), "pw");
            }
            KeyCredential::Identity(_) => panic!("a passphrase was configured"),
        }
        let mut bad = p.clone();
        bad.credential = Credential::PasswordCommand("exit 3".into());
        let err = credential(&bad).err().unwrap().to_string();
        assert!(err.contains("password command failed"), "{err}");
    }

    /// A profile's retention selects its host's snapshots with exactly its
    /// paths and tags: not another profile's whose paths or tags merely
    /// include its own (which restic's filter, and this one before, took).
    #[test]
    fn retention_applies_to_the_profiles_own_snapshots() {
        use crate::snapshot::Snapshot;
        let snap = |host: &str, paths: &[&str], tags: &[&str]| {
            let v = |l: &[&str]| l.iter().map(|t| t.to_string()).collect::<Vec<_>>();
            let tree = crate::id::Id::of_object(b"t");
            Snapshot::by_this_process(
                0,
                host.into(),
                v(paths),
                v(tags),
                tree,
                None,
                Default::default(),
            )
        };
        let tagged = own_snapshots(&profile("host = \"laptop\"\ntags = [\"home\"]")).unwrap();
        let plain = own_snapshots(&profile("host = \"laptop\"")).unwrap();
        for (s, by_tagged, by_plain) in [
            (snap("laptop", &["/data"], &["home"]), true, false),
            (snap("laptop", &["/data"], &[]), false, true),
            (snap("laptop", &["/data", "/etc"], &["home"]), false, false),
            (snap("laptop", &["/data", "/etc"], &[]), false, false),
            (
                snap("laptop", &["/data"], &["home", "weekly"]),
                false,
                false,
            ),
            (snap("laptop", &["/data"], &["weekly"]), false, false),
            (snap("laptop", &[], &["home"]), false, false),
            (snap("server", &["/data"], &["home"]), false, false),
            (snap("server", &["/data"], &[]), false, false),
        ] {
            assert_eq!(tagged.matches(&s), by_tagged, "{:?} {:?}", s.paths, s.tags);
            assert_eq!(plain.matches(&s), by_plain, "{:?} {:?}", s.paths, s.tags);
        }
    }
}
