//! Where things live: the configuration file (`--config`, `$LARDER_CONFIG`,
//! `$XDG_CONFIG_HOME/larder/larder.toml`, `/etc/larder/larder.toml` for
//! root) and the state directory (`$LARDER_STATE_DIR`,
//! `$XDG_STATE_HOME/larder`, `/var/lib/larder` for root), read from an
//! [`Env`] snapshot so tests need not touch the process environment. The
//! state directory is created private and tagged with a `CACHEDIR.TAG`, so
//! backups (and other tools honouring the tag) leave it out.

use crate::error::{Error, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The environment variables and identity that decide the locations.
#[derive(Clone, Debug, Default)]
pub struct Env {
    pub larder_config: Option<PathBuf>,
    pub larder_state_dir: Option<PathBuf>,
    pub xdg_config_home: Option<PathBuf>,
    pub xdg_state_home: Option<PathBuf>,
    pub home: Option<PathBuf>,
    /// Running as root: system-wide locations.
    pub is_root: bool,
}

fn var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v: &OsString| !v.is_empty())
        .map(PathBuf::from)
}

impl Env {
    /// The current process's environment.
    pub fn from_process() -> Env {
        Env {
            larder_config: var("LARDER_CONFIG"),
            larder_state_dir: var("LARDER_STATE_DIR"),
            xdg_config_home: var("XDG_CONFIG_HOME"),
            xdg_state_home: var("XDG_STATE_HOME"),
            home: var("HOME"),
            is_root: nix::unistd::geteuid().is_root(),
        }
    }

    fn home(&self, what: &str) -> Result<&Path> {
        self.home
            .as_deref()
            .ok_or_else(|| Error::Usage(format!("HOME is not set, so the {what} cannot be found")))
    }

    /// Expands a leading `~/` to the home directory.
    pub fn expand_tilde(&self, p: &str) -> Result<PathBuf> {
        match p.strip_prefix("~/") {
            Some(rest) => Ok(self.home("path {p:?}")?.join(rest)),
            None if p == "~" => Ok(self.home("path \"~\"")?.to_path_buf()),
            None => Ok(PathBuf::from(p)),
        }
    }
}

/// The configuration file to read.
pub fn config_file(explicit: Option<&Path>, env: &Env) -> Result<PathBuf> {
    if let Some(p) = explicit.or(env.larder_config.as_deref()) {
        return Ok(p.to_path_buf());
    }
    if env.is_root {
        return Ok(PathBuf::from("/etc/larder/larder.toml"));
    }
    let base = match &env.xdg_config_home {
        Some(x) => x.clone(),
        None => env.home("configuration file")?.join(".config"),
    };
    Ok(base.join("larder").join("larder.toml"))
}

/// The state directory (run records, logs, locks).
pub fn state_dir(env: &Env) -> Result<PathBuf> {
    if let Some(p) = &env.larder_state_dir {
        return Ok(p.clone());
    }
    if env.is_root {
        return Ok(PathBuf::from("/var/lib/larder"));
    }
    let base = match &env.xdg_state_home {
        Some(x) => x.clone(),
        None => env.home("state directory")?.join(".local").join("state"),
    };
    Ok(base.join("larder"))
}

pub use crate::host::{CACHEDIR_TAG, prepare_state_dir};

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env {
            home: Some("/home/u".into()),
            ..Env::default()
        }
    }

    #[test]
    fn config_file_precedence() {
        let mut e = env();
        assert_eq!(
            config_file(None, &e).unwrap(),
            Path::new("/home/u/.config/larder/larder.toml")
        );
        e.xdg_config_home = Some("/x".into());
        assert_eq!(
            config_file(None, &e).unwrap(),
            Path::new("/x/larder/larder.toml")
        );
        e.larder_config = Some("/env.toml".into());
        assert_eq!(config_file(None, &e).unwrap(), Path::new("/env.toml"));
        assert_eq!(
            config_file(Some(Path::new("/flag.toml")), &e).unwrap(),
            Path::new("/flag.toml")
        );
        let root = Env {
            is_root: true,
            ..env()
        };
        assert_eq!(
            config_file(None, &root).unwrap(),
            Path::new("/etc/larder/larder.toml")
        );
        let homeless = Env::default();
        assert!(
            config_file(None, &homeless)
                .unwrap_err()
                .to_string()
                .contains("HOME")
        );
    }

    #[test]
    fn state_dir_precedence() {
        let mut e = env();
        assert_eq!(
            state_dir(&e).unwrap(),
            Path::new("/home/u/.local/state/larder")
        );
        e.xdg_state_home = Some("/s".into());
        assert_eq!(state_dir(&e).unwrap(), Path::new("/s/larder"));
        let root = Env {
            is_root: true,
            ..env()
        };
        assert_eq!(state_dir(&root).unwrap(), Path::new("/var/lib/larder"));
        e.larder_state_dir = Some("/forced".into());
        assert_eq!(state_dir(&e).unwrap(), Path::new("/forced"));
    }

    #[test]
    fn tilde_expansion() {
        let e = env();
        assert_eq!(e.expand_tilde("~/k").unwrap(), Path::new("/home/u/k"));
        assert_eq!(e.expand_tilde("/abs/~/k").unwrap(), Path::new("/abs/~/k"));
        assert!(Env::default().expand_tilde("~/k").is_err());
    }

    #[test]
    fn state_dir_is_private_and_tagged() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/larder");
        prepare_state_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let tag = std::fs::read(dir.join("CACHEDIR.TAG")).unwrap();
        // The archiver's check: the first bytes are the signature.
        assert!(tag.starts_with(b"Signature: 8a477f597d28d172789f06886806bc55"));
        prepare_state_dir(&dir).unwrap();
    }
}
