//! The command a timer or crontab line runs: the larder binary's absolute
//! path, `run`, `--if-due` for polling, `--config FILE` when the profiles
//! came from an explicit file, and the profile; plus the state directory,
//! pinned in the environment (`LARDER_STATE_DIR`) because systemd and cron
//! start jobs without the user's `XDG_*` variables. Also the quoting each
//! of the two formats needs.

use std::path::PathBuf;

/// How scheduled jobs call larder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    /// Absolute path of the larder binary (`std::env::current_exe()`).
    pub binary: PathBuf,
    /// The configuration file, when one was given with `--config` or
    /// `$LARDER_CONFIG` (else the job finds the default one itself).
    pub config: Option<PathBuf>,
    /// The state directory the job must use (the one `status` reads).
    pub state_dir: PathBuf,
}

impl Invocation {
    /// `BINARY run [--if-due] [--config FILE] PROFILE`.
    pub fn argv(&self, profile: &str, if_due: bool) -> Vec<String> {
        let mut v = vec![self.binary.to_string_lossy().into_owned(), "run".into()];
        if if_due {
            v.push("--if-due".into());
        }
        if let Some(c) = &self.config {
            v.push("--config".into());
            v.push(c.to_string_lossy().into_owned());
        }
        v.push(profile.to_string());
        v
    }
}

/// Refuses a value that no unit file or crontab line can carry.
pub fn check_line_safe(what: &str, v: &str) -> crate::Result<()> {
    if v.chars().any(|c| c == '\n' || c == '\r' || c == '\0') {
        return Err(crate::Error::Usage(format!(
            "{what} {v:?} contains a line break, which a unit file or crontab cannot hold"
        )));
    }
    Ok(())
}

/// One word for a systemd `ExecStart=` line: `%` and `$` doubled (no
/// specifier or variable expansion), and double quotes with C escapes
/// around anything that is not plain.
pub fn systemd_word(s: &str) -> String {
    let s = s.replace('%', "%%").replace('$', "$$");
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:=@%$".contains(c));
    if plain {
        s
    } else {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// A value for `Environment=`: `%` doubled (there is no `$` expansion
/// there), quoted unless plain.
pub fn systemd_env_word(s: &str) -> String {
    let s = s.replace('%', "%%");
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:=@%$".contains(c));
    if plain {
        s
    } else {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// One word for `sh` in a crontab line: single-quoted unless plain, and
/// `%` escaped (cron turns a bare `%` into a newline).
pub fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:=@".contains(c));
    let quoted = if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    };
    quoted.replace('%', "\\%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_forms() {
        let mut inv = Invocation {
            binary: "/usr/bin/larder".into(),
            config: None,
            state_dir: "/var/lib/larder".into(),
        };
        assert_eq!(inv.argv("home", false), ["/usr/bin/larder", "run", "home"]);
        inv.config = Some("/etc/larder/larder.toml".into());
        assert_eq!(
            inv.argv("home", true),
            [
                "/usr/bin/larder",
                "run",
                "--if-due",
                "--config",
                "/etc/larder/larder.toml",
                "home"
            ]
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(systemd_word("/usr/bin/larder"), "/usr/bin/larder");
        assert_eq!(systemd_word("/a b/c\"d"), "\"/a b/c\\\"d\"");
        assert_eq!(systemd_word("50%$HOME"), "50%%$$HOME");
        assert_eq!(systemd_word(""), "\"\"");
        assert_eq!(systemd_env_word("A=/x$y%z"), "A=/x$y%%z");
        assert_eq!(systemd_env_word("A=/a b"), "\"A=/a b\"");
        assert_eq!(shell_word("/usr/bin/larder"), "/usr/bin/larder");
        assert_eq!(shell_word("/it's here"), "'/it'\\''s here'");
        assert_eq!(shell_word("/a%b"), "'/a\\%b'");
        assert!(check_line_safe("path", "/a\nb").is_err());
        assert!(check_line_safe("path", "/a b").is_ok());
    }
}
