//! The second repository of `copy` and `init --copy-chunker-params`, as
//! restic names its flags: `--from-repo` or `--from-repository-file`, and
//! its password from `LARDER_FROM_PASSWORD`, `--from-password-file`,
//! `--from-password-command` or a prompt.

use super::Global;
use super::global::{given_password, prompt_password};
use crate::error::{Error, Result};
use crate::repository::Repository;
use age::secrecy::SecretString;
use std::path::{Path, PathBuf};

/// Where the other repository is, and how to open it.
#[derive(clap::Args, Debug)]
pub struct FromRepo {
    /// The other repository's location (as --repo takes it).
    #[arg(long, value_name = "REPO", env = "LARDER_FROM_REPOSITORY")]
    pub from_repo: Option<PathBuf>,
    /// Read the other repository's location from this file (its first
    /// line).
    #[arg(long, value_name = "FILE", env = "LARDER_FROM_REPOSITORY_FILE")]
    pub from_repository_file: Option<PathBuf>,
    /// A file holding the other repository's password, first line (else
    /// LARDER_FROM_PASSWORD, checked first).
    #[arg(long, value_name = "FILE", env = "LARDER_FROM_PASSWORD_FILE")]
    pub from_password_file: Option<PathBuf>,
    /// A shell command whose first output line is the other repository's
    /// password.
    #[arg(long, value_name = "COMMAND", env = "LARDER_FROM_PASSWORD_COMMAND")]
    pub from_password_command: Option<String>,
}

impl FromRepo {
    /// Whether a location is given at all.
    pub fn given(&self) -> bool {
        self.from_repo.is_some() || self.from_repository_file.is_some()
    }

    /// The other repository's location; an error unless exactly one of
    /// the two ways gives it.
    pub fn location(&self) -> Result<PathBuf> {
        match (&self.from_repo, &self.from_repository_file) {
            (Some(r), None) => Ok(r.clone()),
            (None, Some(f)) => super::global::repository_from_file(f),
            (Some(_), Some(_)) => Err(Error::Usage(
                "--from-repo and --from-repository-file both give the other repository: give one"
                    .into(),
            )),
            (None, None) => Err(Error::Usage(
                "no repository to copy from: give --from-repo or --from-repository-file".into(),
            )),
        }
    }

    /// The other repository's password: `LARDER_FROM_PASSWORD`, else the
    /// file, else the command (not both), else a prompt: the order of the
    /// main repository's.
    pub fn password(&self) -> Result<SecretString> {
        let given = given_password(
            "LARDER_FROM_PASSWORD",
            ("--from-password-file", self.from_password_file.as_deref()),
            (
                "--from-password-command",
                self.from_password_command.as_deref(),
            ),
        )?;
        match given {
            Some(p) => Ok(p),
            None => prompt_password("enter password for the other repository: "),
        }
    }

    /// Opens it with `g`'s connection settings, its index cache under
    /// `cache_root`.
    pub fn open(&self, g: &Global, cache_root: &Path) -> Result<Repository> {
        g.open_other_with(&self.location()?, self.password()?, cache_root)
    }
}
