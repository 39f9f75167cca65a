//! Facts about the machine and user running larder, recorded in key files,
//! locks and snapshots: host name, user name and the current time.

/// This machine's host name ("unknown" if the system will not say).
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// The user running larder: `$USER`, `$LOGNAME`, else the name of the uid.
pub fn username() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
                .unwrap_or_default()
        })
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Nanoseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// larder's state directory (kept, unlike the cache: known repositories,
/// run records): `$LARDER_STATE_DIR`, else `/var/lib/larder` for root, else
/// `$XDG_STATE_HOME/larder` or `~/.local/state/larder`.
pub fn state_dir() -> std::path::PathBuf {
    use std::path::PathBuf;
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(d) = env("LARDER_STATE_DIR") {
        return PathBuf::from(d);
    }
    if nix::unistd::geteuid().is_root() {
        return PathBuf::from("/var/lib/larder");
    }
    if let Some(x) = env("XDG_STATE_HOME") {
        return PathBuf::from(x).join("larder");
    }
    if let Some(h) = env("HOME") {
        return PathBuf::from(h).join(".local").join("state").join("larder");
    }
    std::env::temp_dir().join("larder-state")
}
