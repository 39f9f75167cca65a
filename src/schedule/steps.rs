//! The work of a run cycle, as the CLI implements it with the real library
//! calls: the [`Steps`] trait, and what a step reports back.

use super::profile::Profile;
use crate::error::Error;
use serde::Serialize;

/// What a step that succeeded reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StepReport {
    /// One line for the log ("snapshot 1a2b3c4d: 12 new files").
    pub message: String,
    /// The snapshot a backup made.
    pub snapshot_id: Option<String>,
    pub files_added: u64,
    pub bytes_added: u64,
}

impl StepReport {
    /// A report with only a message.
    pub fn message(message: impl Into<String>) -> Self {
        StepReport {
            message: message.into(),
            ..StepReport::default()
        }
    }
}

/// Why a step failed, and whether trying again may help.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepFailure {
    pub message: String,
    /// A busy lock or a network error: worth retrying after a wait.
    pub transient: bool,
    /// The exit code `larder run` ends with when this is the failure.
    pub exit_code: i32,
}

impl StepFailure {
    /// A failure worth retrying (exit code 1 if it persists).
    pub fn transient(message: impl Into<String>) -> Self {
        StepFailure {
            message: message.into(),
            transient: true,
            exit_code: 1,
        }
    }

    /// A failure that retrying will not fix.
    pub fn permanent(message: impl Into<String>, exit_code: i32) -> Self {
        StepFailure {
            message: message.into(),
            transient: false,
            exit_code,
        }
    }
}

impl From<&Error> for StepFailure {
    /// Classifies a library error: a repository lock held by someone else
    /// and network-like I/O errors on repository objects are transient;
    /// everything else is permanent. The exit code is the error's own.
    fn from(e: &Error) -> Self {
        use std::io::ErrorKind as K;
        let transient = match e {
            Error::Locked(_) => true,
            Error::Backend { source, .. } => matches!(
                source.kind(),
                K::TimedOut
                    | K::Interrupted
                    | K::WouldBlock
                    | K::ConnectionRefused
                    | K::ConnectionReset
                    | K::ConnectionAborted
                    | K::NotConnected
                    | K::BrokenPipe
                    | K::NetworkUnreachable
                    | K::HostUnreachable
                    | K::NetworkDown
            ),
            _ => false,
        };
        StepFailure {
            message: e.to_string(),
            transient,
            exit_code: e.exit_code(),
        }
    }
}

impl From<Error> for StepFailure {
    fn from(e: Error) -> Self {
        StepFailure::from(&e)
    }
}

/// The outcome of one step.
pub type StepResult = Result<StepReport, StepFailure>;

/// The repository work of a cycle. The cycle decides which steps run and
/// when; each method does one step for the profile and reports.
pub trait Steps {
    /// Backs up the profile's paths with its backup options.
    fn backup(&mut self, profile: &Profile) -> StepResult;
    /// Applies the profile's retention (only called when it has one).
    fn forget(&mut self, profile: &Profile) -> StepResult;
    /// Removes unreferenced data (only called when prune is due).
    fn prune(&mut self, profile: &Profile) -> StepResult;
    /// Checks the repository, reading `profile.check_subset` of the data
    /// (only called when check is due).
    fn check(&mut self, profile: &Profile) -> StepResult;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_classified() {
        let locked = StepFailure::from(Error::Locked("pid 4 on host".into()));
        assert!(locked.transient);
        assert_eq!(locked.exit_code, 11);
        let net = StepFailure::from(Error::Backend {
            object: "data/ab".into(),
            source: std::io::Error::from(std::io::ErrorKind::ConnectionReset),
        });
        assert!(net.transient);
        let missing = StepFailure::from(Error::Backend {
            object: "data/ab".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
        assert!(!missing.transient);
        let pw = StepFailure::from(Error::WrongPassword);
        assert!(!pw.transient);
        assert_eq!(pw.exit_code, 12);
        assert!(
            StepFailure::from(Error::NoRepository("/r".into()))
                .message
                .contains("/r")
        );
    }
}
