//! The library's error type. Every error names the path or repository object
//! it concerns, and maps to one of restic's exit codes (see [`Error::exit_code`]).

use std::path::PathBuf;

/// Result alias used across the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in larder.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O error on a local path.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An I/O error on a repository object (named as `kind/id`).
    #[error("repository object {object}: {source}")]
    Backend {
        object: String,
        #[source]
        source: std::io::Error,
    },
    /// A repository object that exists but whose bytes are not valid.
    #[error("repository object {object} is corrupt: {reason}")]
    Corrupt { object: String, reason: String },
    /// The repository does not exist at the given location.
    #[error("repository {0} does not exist (run `larder init`)")]
    NoRepository(String),
    /// `init` on a location that already holds a repository.
    #[error("repository {0} already exists; refusing to overwrite it")]
    RepositoryExists(String),
    /// The repository needs a newer (or older) larder.
    #[error(
        "{object}: format version {found} is not supported by this larder (it reads versions {oldest} to {supported}); {hint}"
    )]
    UnsupportedVersion {
        object: String,
        found: u32,
        oldest: u32,
        supported: u32,
        hint: &'static str,
    },
    /// A write to a repository of an older format version, which this
    /// larder reads but does not write until `migrate` upgrades it.
    #[error(
        "repository {location} has format version {version}: this larder reads it but does not write it; upgrade it with `larder migrate upgrade_repo_v6` (after that, larders older than this one cannot open it)"
    )]
    OldFormat { location: String, version: u8 },
    /// No key file opened with the given passphrase or identity.
    #[error("wrong password or no key found that opens the repository")]
    WrongPassword,
    /// A lock held by another live process prevents the operation (a
    /// repository lock, a profile's run lock, the crontab edit lock); the
    /// message says which.
    #[error("{0}")]
    Locked(String),
    /// This process's own lock failed to refresh or was removed: it must
    /// not write to the repository any more (exit code 11, as for a lock
    /// it could not take).
    #[error("lost the repository lock, stopping before writing more: {0}")]
    LockLost(String),
    /// The local SQLite index cache failed.
    #[error("index cache {path}: {source}")]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// A blob ID that the index does not know.
    #[error("blob {0} is not in the index")]
    MissingBlob(String),
    /// Bad input from the user (arguments, configuration): the user's
    /// mistake, to be fixed by the user.
    #[error("{0}")]
    Usage(String),
    /// A failure inside larder or its environment that the user did not
    /// cause and cannot fix by changing the command: the random number
    /// generator, a worker thread that panicked, a poisoned lock.
    #[error("internal error: {0}")]
    Internal(String),
    /// A snapshot reference that matches nothing, or more than one snapshot.
    #[error("{0}")]
    NoSnapshot(String),
    /// The repository at a known location is not the one recorded there
    /// (another id or master key): refused unless the user accepts it.
    #[error("{0}")]
    RepositoryChanged(String),
    /// The operation stopped because SIGINT or SIGTERM asked it to (exit
    /// code 130, as restic's).
    #[error("interrupted")]
    Interrupted,
    /// Some operation finished but with problems it reported along the way.
    #[error("{0}")]
    Partial(String),
}

impl Error {
    /// Shorthand for an I/O error on a local path.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Shorthand for a corruption error on a repository object.
    pub fn corrupt(object: impl std::fmt::Display, reason: impl std::fmt::Display) -> Self {
        Error::Corrupt {
            object: object.to_string(),
            reason: reason.to_string(),
        }
    }

    /// Whether this says a repository object does not exist (for an object
    /// just listed: another process removed it since).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Backend { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    /// Shorthand for an internal failure (see [`Error::Internal`]).
    pub fn internal(what: impl std::fmt::Display) -> Self {
        Error::Internal(what.to_string())
    }

    /// Shorthand for a failure of the SQLite cache at `path`.
    pub fn sqlite(path: impl Into<PathBuf>, source: rusqlite::Error) -> Self {
        Error::Sqlite {
            path: path.into(),
            source,
        }
    }

    /// The process exit code restic users expect for this error:
    /// 3 partial, 10 no repository, 11 locked or lock lost, 12 wrong
    /// password, 130 interrupted, 1 everything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::NoRepository(_) => 10,
            Error::Locked(_) | Error::LockLost(_) => 11,
            Error::WrongPassword => 12,
            Error::Partial(_) => 3,
            Error::Interrupted => 130,
            _ => 1,
        }
    }
}
