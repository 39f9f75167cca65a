//! Options every command takes, and what they resolve to: the repository's
//! backend, the cache directory, and the credential (passphrase from the
//! environment, a file, a command or a prompt; or an age identity).

use crate::backend::{self, Backend, Location};
use crate::error::{Error, Result};
use crate::keys::{
    Credential, DEFAULT_WORK_FACTOR, INSECURE_TEST_KDF_VAR, NewKey, check_new_work_factor,
};
use crate::lock::LockGuard;
use crate::repository::trust::KnownRepositories;
use crate::repository::{self, Compression, Repository};
use age::secrecy::SecretString;
use clap::Args;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

/// Global options shared by every command.
#[derive(Args, Debug, Clone)]
pub struct Global {
    /// Repository location: a local directory, `rest:http[s]://[user:pass@]host:port/path`,
    /// `s3:https://host[:port]/bucket/prefix`, `s3:host/bucket/prefix`,
    /// `s3:http://host:port/bucket/prefix`, `sftp:[user@]host:/path` or
    /// `rclone:REMOTE:PATH` (see README, "Remote repositories").
    #[arg(short = 'r', long = "repo", env = "LARDER_REPOSITORY", global = true)]
    pub repo: Option<PathBuf>,
    /// Read the repository location from this file (its first line), as
    /// restic's flag: keeps credentials in a location out of the command
    /// line and the environment.
    #[arg(
        long,
        value_name = "FILE",
        env = "LARDER_REPOSITORY_FILE",
        global = true
    )]
    pub repository_file: Option<PathBuf>,
    /// Requests in flight at once to a remote repository (5 unless given
    /// here or by a profile's `connections`).
    #[arg(long, env = "LARDER_CONNECTIONS", global = true, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub connections: Option<u16>,
    /// Check an `https` repository's certificate against the root
    /// certificates in this PEM file (repeatable) instead of the usual
    /// ones, as restic's flag: for a server with a certificate of its own
    /// making.
    #[arg(
        long,
        value_name = "FILE",
        env = "LARDER_CACERT",
        value_delimiter = ',',
        global = true
    )]
    pub cacert: Vec<PathBuf>,
    /// Do not check an `https` repository's certificate at all (as
    /// restic's flag): anyone between you and the server can then read and
    /// answer in its place. Prefer --cacert.
    #[arg(long, global = true)]
    pub insecure_tls: bool,
    /// Limit uploads to a remote repository to this many KiB/s.
    #[arg(long, value_name = "KiB/s", env = "LARDER_LIMIT_UPLOAD", global = true)]
    pub limit_upload: Option<u64>,
    /// Limit downloads from a remote repository to this many KiB/s.
    #[arg(
        long,
        value_name = "KiB/s",
        env = "LARDER_LIMIT_DOWNLOAD",
        global = true
    )]
    pub limit_download: Option<u64>,
    /// Read the repository passphrase from this file (first line).
    #[arg(long, env = "LARDER_PASSWORD_FILE", global = true)]
    pub password_file: Option<PathBuf>,
    /// Run this shell command and use its first output line as the passphrase.
    #[arg(long, env = "LARDER_PASSWORD_COMMAND", global = true)]
    pub password_command: Option<String>,
    /// Open the repository with this age identity file instead of a passphrase.
    #[arg(long, env = "LARDER_IDENTITY_FILE", global = true)]
    pub identity: Option<PathBuf>,
    /// Where the local index cache lives.
    #[arg(long, env = "LARDER_CACHE_DIR", global = true)]
    pub cache_dir: Option<PathBuf>,
    /// Keep no local cache, as restic's flag: the command reads the
    /// repository's index into a temporary directory, removed when it
    /// ends (so every command reads the whole index first: slow on a
    /// large repository). Wins over --cache-dir.
    #[arg(long, global = true)]
    pub no_cache: bool,
    /// scrypt work factor (log2 N) for new passphrase keys. A test knob:
    /// below the default it is refused unless LARDER_INSECURE_TEST_KDF=1.
    #[arg(long, env = "LARDER_KDF_WORK_FACTOR", global = true, default_value_t = DEFAULT_WORK_FACTOR, hide = true)]
    pub kdf_work_factor: u8,
    /// Accept that the repository at this location is not the one opened
    /// here before (you re-created it yourself): its new id and master key
    /// are recorded instead of refused.
    #[arg(long, env = "LARDER_ACCEPT_REPOSITORY_CHANGE", global = true)]
    pub accept_repository_change: bool,
    /// How to compress the data blobs this run writes (backup, copy), as
    /// restic's flag: auto (the repository's level, set at init; 1 unless
    /// chosen), off (stored raw), fast or fastest (zstd 1), better (zstd
    /// 3), max (zstd 19), or a zstd level 1..=22. For `init`, the
    /// repository's level. Not a format change: blobs of any level read
    /// back the same.
    #[arg(
        long,
        value_name = "auto|off|fast|better|max|LEVEL",
        env = "LARDER_COMPRESSION",
        global = true
    )]
    pub compression: Option<Compression>,
    /// Close the packs this run writes at this many MiB (4 to 128), as
    /// restic's flag: larger packs for remote storage mean fewer objects.
    /// The repository's size (16 MiB unless chosen at init) otherwise.
    #[arg(long, value_name = "MiB", env = "LARDER_PACK_SIZE", global = true)]
    pub pack_size: Option<u32>,
    /// Do not lock the repository in commands that only read (restore, ls,
    /// diff, dump, find, stats, check, mount, `cat tree`, `backup
    /// --dry-run`): for read-only or full storage. Unsafe beside a prune.
    #[arg(long, global = true)]
    pub no_lock: bool,
    /// Wait up to DURATION (`30s`, `5m`, `2h`) for a lock another larder
    /// process holds, trying again at growing intervals, instead of failing
    /// at once with exit code 11.
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_retry_lock)]
    pub retry_lock: Option<std::time::Duration>,
    /// The profiles file of `run`, `schedule`, `daemon` and `config`
    /// (else $LARDER_CONFIG, else ~/.config/larder/larder.toml).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print machine-readable JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// Print only errors and warnings.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// More output, as restic's flag: `-vv` prints what `backup` (new,
    /// modified, unchanged) or `restore` (restored, updated, unchanged,
    /// deleted) did with each file and directory, one a line
    /// (`verbose_status` objects with --json).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
}

impl Global {
    /// The storage settings this command line gives (`--compression`,
    /// `--pack-size`, `--limit-upload`,
    /// `--limit-download`, `--connections`, or their environment
    /// variables), which a profile's run applies over the profile's own.
    pub fn storage(&self) -> crate::schedule::profile::Storage {
        crate::schedule::profile::Storage {
            compression: self.compression.map(|c| c.to_string()),
            pack_size: self.pack_size,
            limit_upload: self.limit_upload,
            limit_download: self.limit_download,
            connections: self.connections,
            cacert: self.cacert.clone(),
            insecure_tls: self.insecure_tls,
        }
    }

    /// The repository location (`--repo`, else the first line of
    /// `--repository-file`), or an error telling how to give one.
    pub fn repo_path(&self) -> Result<PathBuf> {
        match (&self.repo, &self.repository_file) {
            (Some(_), Some(_)) => Err(Error::Usage(
                "--repo (LARDER_REPOSITORY) and --repository-file (LARDER_REPOSITORY_FILE) \
                 both give the repository: give one"
                    .into(),
            )),
            (Some(r), None) => Ok(r.clone()),
            (None, Some(f)) => repository_from_file(f),
            (None, None) => Err(Error::Usage(
                "no repository given: use --repo or --repository-file, or set \
                 LARDER_REPOSITORY or LARDER_REPOSITORY_FILE"
                    .into(),
            )),
        }
    }

    /// The storage backend for the repository location.
    pub fn backend(&self) -> Result<Arc<dyn Backend>> {
        let mut opts = crate::repo_steps::remote_options(&self.storage())?;
        // Inside the cache root, whose CACHEDIR.TAG keeps it out of backups.
        opts.stage_dir = self.cache_dir().join("staging");
        Ok(Arc::from(backend::open(&self.repo_path()?, &opts)?))
    }

    /// Opens a second repository (the other of `copy` and `init
    /// --copy-chunker-params`, see [`super::from_repo::FromRepo`]) with this
    /// command's connection settings, the passphrase given and the index
    /// cache under `cache_root`.
    pub fn open_other_with(
        &self,
        location: &std::path::Path,
        pass: SecretString,
        cache_root: &std::path::Path,
    ) -> Result<Repository> {
        let mut opts = crate::repo_steps::remote_options(&self.storage())?;
        opts.stage_dir = self.cache_dir().join("staging");
        let backend: Arc<dyn Backend> = Arc::from(backend::open(location, &opts)?);
        let mut warnings = Vec::new();
        let repo = Repository::open_unsynced(
            backend,
            &Credential::Passphrase(pass),
            cache_root,
            &mut warnings,
        );
        for w in &warnings {
            eprintln!("warning: {}", super::output::safe(w));
        }
        let repo = repo?;
        repo.tell_index_problems(warn);
        self.set_lock_retry(&repo);
        Ok(repo)
    }

    /// The cache directory in force.
    pub fn cache_dir(&self) -> PathBuf {
        self.cache_dir
            .clone()
            .unwrap_or_else(repository::default_cache_dir)
    }

    /// The passphrase from LARDER_PASSWORD, a file, a command, or a prompt.
    pub fn passphrase(&self, prompt: &str) -> Result<SecretString> {
        match self.given_passphrase()? {
            Some(p) => Ok(p),
            None => prompt_password(prompt),
        }
    }

    /// The passphrase given without a prompt: LARDER_PASSWORD, the password
    /// file or the password command, if any.
    fn given_passphrase(&self) -> Result<Option<SecretString>> {
        given_password(
            "LARDER_PASSWORD",
            ("--password-file", self.password_file.as_deref()),
            ("--password-command", self.password_command.as_deref()),
        )
    }

    /// The credential that opens the repository.
    pub fn credential(&self) -> Result<Credential> {
        if let Some(id) = &self.identity {
            return Credential::identity_file(id);
        }
        Ok(Credential::Passphrase(
            self.passphrase("enter password for repository: ")?,
        ))
    }

    /// Opens the repository, printing what it skipped on the way, and
    /// checks it is the one this user opened at this location before (see
    /// [`KnownRepositories`]).
    ///
    /// The index cache is not brought up to date here: the first step
    /// that needs it does that, under that step's lock (a backup, a prune,
    /// a reader's [`Repository::lock_for_reading`]), so it is listed once,
    /// and a command that never reads the index (`snapshots`, `tag`,
    /// `key`, `forget` without `--prune`) never lists `index/` or absorbs
    /// it into an empty cache. The segments that sync skips are printed
    /// as warnings when it meets them.
    pub fn open(&self) -> Result<Repository> {
        let repo = self.open_quietly_if_old()?;
        if repo.format_version() < crate::object::FORMAT_VERSION {
            let location = repo.backend().location();
            let location = super::output::safe(&location);
            eprintln!(
                "warning: repository {location} has format version {}: read-only for this larder until `larder migrate {}`",
                repo.format_version(),
                crate::repository::UPGRADE_MIGRATION
            );
            if repo.rolled_back()? {
                eprintln!(
                    "warning: repository {location}: its dicts/ holds version-5 dictionaries, so this older config was put back over a migrated one after data was written with it; run `larder migrate {}` again, and use no older larder on it",
                    crate::repository::UPGRADE_MIGRATION
                );
            }
        }
        Ok(repo)
    }

    /// [`Global::open`] without its warning that a repository of an older
    /// format is read-only (for `migrate`, which is the way out).
    pub fn open_quietly_if_old(&self) -> Result<Repository> {
        let backend = self.backend()?;
        let mut warnings = Vec::new();
        let (cred, cache) = (self.credential()?, self.cache_dir());
        let repo = Repository::open_unsynced(backend, &cred, &cache, &mut warnings);
        for w in &warnings {
            eprintln!("warning: {}", super::output::safe(w));
        }
        let repo = repo?;
        repo.tell_index_problems(warn);
        self.set_lock_options(&repo);
        repo.set_compression(self.compression.unwrap_or_default());
        repo.set_pack_size(self.pack_size)?;
        self.known_repositories().verify(
            &self.location()?,
            &repo.identity(),
            self.accept_repository_change,
        )?;
        Ok(repo)
    }

    /// Opens the repository for a command that reads snapshots' trees or
    /// data, with the reader's lock ([`Repository::lock_for_reading`]),
    /// which brings the index cache up to date under it. Taken before the
    /// command picks its snapshot.
    pub fn open_for_reading(&self) -> Result<(Repository, Option<Arc<LockGuard>>)> {
        let repo = self.open()?;
        let lock = repo.lock_for_reading()?;
        Ok((repo, lock))
    }

    /// What `--no-lock` and `--retry-lock` ask of `repo`'s locks.
    fn set_lock_options(&self, repo: &Repository) {
        repo.set_lock_readers(!self.no_lock);
        self.set_lock_retry(repo);
    }

    /// What `--retry-lock` asks of `repo`'s locks (a wait is announced
    /// on stderr unless `--quiet`).
    fn set_lock_retry(&self, repo: &Repository) {
        let tell: Option<crate::lock::OnWait> = if self.quiet {
            None
        } else {
            Some(|what| eprintln!("{}", super::output::safe(what)))
        };
        repo.set_lock_retry(self.retry_lock.unwrap_or_default(), tell);
    }

    /// The record of known repositories.
    pub fn known_repositories(&self) -> KnownRepositories {
        KnownRepositories::in_dir(&crate::host::state_dir())
    }

    /// The location as recorded among known repositories: an absolute
    /// path, so the same repository reached from another directory is the
    /// same entry; a remote location without its password.
    pub fn location(&self) -> Result<String> {
        let p = self.repo_path()?;
        match Location::parse(&p)? {
            Location::Local(l) => {
                let abs = std::path::absolute(&l).map_err(|e| Error::io(&l, e))?;
                Ok(abs.display().to_string())
            }
            remote => Ok(remote.display()),
        }
    }

    /// The scrypt work factor for a new passphrase key: the knob, refused
    /// below the default unless `LARDER_INSECURE_TEST_KDF=1` (tests).
    fn new_key_work_factor(&self) -> Result<u8> {
        let weak_allowed = std::env::var_os(INSECURE_TEST_KDF_VAR).is_some_and(|v| v == "1");
        check_new_work_factor(self.kdf_work_factor, weak_allowed)
    }
}

/// Runs `cmd` with `sh -c` (standard input from /dev/null) and takes its
/// first output line as a password; a command that cannot start or fails
/// is an error naming it.
/// Its standard error goes to ours (so its own complaint shows); at most
/// 64 KiB of its output are read.
pub fn run_password_command(cmd: &str) -> Result<SecretString> {
    use std::io::Read;
    let bad = |e: std::io::Error| Error::Usage(format!("password command {cmd:?}: {e}"));
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .map_err(bad)?;
    let mut out = Vec::new();
    let read = match child.stdout.take() {
        Some(s) => s.take(64 << 10).read_to_end(&mut out).map(|_| ()),
        None => Ok(()),
    };
    // Whatever it would print beyond the limit is not waited for.
    if read.is_err() || out.len() >= 64 << 10 {
        let _ = child.kill();
    }
    let status = child.wait().map_err(bad)?;
    read.map_err(bad)?;
    if !status.success() {
        return Err(Error::Usage(format!(
            "password command {cmd:?} failed with {status}"
        )));
    }
    let s = String::from_utf8_lossy(&out);
    Ok(SecretString::from(
        s.lines().next().unwrap_or("").to_string(),
    ))
}

/// A password given without a prompt: the variable `env`, else the file,
/// else the command (each named by its flag); the file and the command
/// together are refused, as restic refuses them.
pub fn given_password(
    env: &str,
    (file_flag, file): (&str, Option<&std::path::Path>),
    (command_flag, command): (&str, Option<&str>),
) -> Result<Option<SecretString>> {
    if file.is_some() && command.is_some() {
        return Err(Error::Usage(format!(
            "{file_flag} and {command_flag} both give the password: give one"
        )));
    }
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        return Ok(Some(SecretString::from(p.to_string_lossy().into_owned())));
    }
    match (file, command) {
        (Some(f), _) => read_password_file(f).map(Some),
        (None, Some(cmd)) => run_password_command(cmd).map(Some),
        (None, None) => Ok(None),
    }
}

/// Reads the first line of a password file.
pub fn read_password_file(f: &std::path::Path) -> Result<SecretString> {
    let s = std::fs::read_to_string(f).map_err(|e| Error::io(f, e))?;
    Ok(SecretString::from(
        s.lines().next().unwrap_or("").to_string(),
    ))
}

/// Prompts on the terminal (never echoes); refuses when not on a terminal.
pub fn prompt_password(prompt: &str) -> Result<SecretString> {
    if !std::io::stdin().is_terminal() {
        return Err(Error::Usage(
            "no password given: set LARDER_PASSWORD, LARDER_PASSWORD_FILE or LARDER_PASSWORD_COMMAND, or run on a terminal".into(),
        ));
    }
    rpassword::prompt_password(prompt)
        .map(SecretString::from)
        .map_err(|e| Error::Usage(format!("cannot read password: {e}")))
}

/// A new passphrase typed at the terminal: asked twice, and the two must
/// match (a mistyped passphrase would otherwise lock the user out for good).
fn prompt_new_password() -> Result<SecretString> {
    use age::secrecy::ExposeSecret;
    let a = prompt_password("enter new password: ")?;
    let b = prompt_password("enter new password again: ")?;
    if a.expose_secret() != b.expose_secret() {
        return Err(Error::Usage(
            "the two passwords do not match; nothing was changed".into(),
        ));
    }
    Ok(a)
}

/// A new key from `--recipient`, `--new-password-file`, (for `init`) the
/// passphrase given as for opening, or a doubled prompt.
pub fn new_key(
    g: &Global,
    recipient: Option<&str>,
    new_password_file: Option<&std::path::Path>,
    use_global_password: bool,
) -> Result<NewKey> {
    if let Some(r) = recipient {
        let r: age::x25519::Recipient = r
            .parse()
            .map_err(|e| Error::Usage(format!("invalid age recipient {r:?}: {e}")))?;
        return Ok(NewKey::Recipient(r));
    }
    // Before any prompt: a refused knob should not cost typing.
    let work_factor = g.new_key_work_factor()?;
    let given = if let Some(f) = new_password_file {
        Some(read_password_file(f)?)
    } else if use_global_password {
        g.given_passphrase()?
    } else {
        None
    };
    let pass = match given {
        Some(p) => p,
        None => prompt_new_password()?,
    };
    {
        use age::secrecy::ExposeSecret;
        if pass.expose_secret().is_empty() {
            return Err(Error::Usage("an empty password is not allowed".into()));
        }
    }
    Ok(NewKey::Passphrase { pass, work_factor })
}

/// `--retry-lock`'s value: a duration such as `30s`, `5m`, `1h30m` (jiff's
/// friendly format, which takes Go's as restic's flag does).
fn parse_retry_lock(text: &str) -> std::result::Result<std::time::Duration, String> {
    let d: jiff::SignedDuration = text
        .parse()
        .map_err(|e| format!("{text:?} is not a duration such as 30s, 5m or 2h: {e}"))?;
    std::time::Duration::try_from(d).map_err(|_| format!("{text:?}: a duration cannot be negative"))
}

/// Prints a problem the index sync met (a segment it skipped).
fn warn(problem: &str) {
    eprintln!("warning: {}", super::output::safe(problem));
}
/// The first line of `file`, trimmed, as a repository location; a file
/// that cannot be read, or whose first line is empty, is an error naming
/// it. At most 64 KiB are read.
pub(super) fn repository_from_file(file: &std::path::Path) -> Result<PathBuf> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(64 << 10).read_to_string(&mut text))
        .map_err(|e| Error::io(file, e))?;
    match text.lines().next().map(str::trim) {
        Some(line) if !line.is_empty() => Ok(PathBuf::from(line)),
        _ => Err(Error::Usage(format!(
            "--repository-file {}: its first line is empty (it should name the repository)",
            file.display()
        ))),
    }
}
