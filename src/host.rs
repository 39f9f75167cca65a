//! Facts about the machine and user running larder, recorded in key files,
//! locks and snapshots: host name, user name, the current time, and what a
//! lock needs to tell processes apart (machine and boot ids, pid namespace,
//! process start times, the boot-time clock).

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

/// The standard cache directory tag (<https://bford.info/cachedir/>) that
/// larder puts in its cache and state directories. Its comment names
/// larder, so a backup recognises (and always skips) larder's own
/// directories, wherever they are.
pub const CACHEDIR_TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
# This file is a cache directory tag created by larder.\n\
# It keeps backups from storing larder's own state.\n\
# For information about cache directory tags see https://bford.info/cachedir/\n";

/// Creates one of larder's own directories (mode 0700) if needed and makes
/// sure it holds larder's `CACHEDIR.TAG`.
pub fn prepare_state_dir(dir: &std::path::Path) -> crate::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| crate::Error::io(dir, e))?;
    let tag = dir.join("CACHEDIR.TAG");
    if !tag.exists() {
        // A temporary name of this process's own: two larders starting at
        // once each write one, and either rename leaves the same tag.
        let tmp = dir.join(format!(".CACHEDIR.TAG.{}.tmp", std::process::id()));
        std::fs::write(&tmp, CACHEDIR_TAG)
            .and_then(|()| std::fs::rename(&tmp, &tag))
            .map_err(|e| crate::Error::io(&tag, e))?;
    }
    Ok(())
}

/// The key-derivation context that turns the system's machine id into the
/// one larder records (systemd asks applications never to expose the raw id).
const MACHINE_ID_CONTEXT: &str = "larder 2026-11 v1 lock machine id";

/// Where a process runs, as far as telling lock holders apart needs. Two
/// processes can be compared by pid only when all three fields are equal and
/// known (non-zero): then they share one kernel, one boot and one pid
/// namespace, so a pid names the same process for both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessSpace {
    /// BLAKE3-derive of `/etc/machine-id` (else `/var/lib/dbus/machine-id`),
    /// cut to 16 bytes; all zero when neither file holds a valid id.
    pub machine_id: [u8; 16],
    /// `/proc/sys/kernel/random/boot_id`: new at every boot; all zero if
    /// unreadable.
    pub boot_id: [u8; 16],
    /// The inode of `/proc/self/ns/pid`: which pid namespace (container) the
    /// pid belongs to; 0 if unknown.
    pub pid_ns: u64,
}

impl ProcessSpace {
    /// Whether a pid recorded in `other` can be looked up here.
    pub fn shares_pids_with(&self, other: &ProcessSpace) -> bool {
        self == other && self.boot_id != [0; 16] && self.pid_ns != 0
    }
}

/// This process's [`ProcessSpace`] (read once, then remembered).
pub fn process_space() -> ProcessSpace {
    static SPACE: std::sync::OnceLock<ProcessSpace> = std::sync::OnceLock::new();
    *SPACE.get_or_init(|| ProcessSpace {
        machine_id: machine_id(),
        boot_id: boot_id(),
        pid_ns: pid_namespace(),
    })
}

/// This machine's id as larder records it (see [`ProcessSpace::machine_id`]).
pub fn machine_id() -> [u8; 16] {
    ["/etc/machine-id", "/var/lib/dbus/machine-id"]
        .iter()
        .find_map(|p| parse_machine_id(&std::fs::read_to_string(p).ok()?))
        .map(|raw| {
            let d = blake3::derive_key(MACHINE_ID_CONTEXT, &raw);
            let mut out = [0u8; 16];
            out.copy_from_slice(&d[..16]);
            out
        })
        .unwrap_or([0; 16])
}

/// Parses machine-id(5): 32 hex digits and a newline. "uninitialized" (a
/// first boot) and an all-zero id count as no id.
pub fn parse_machine_id(text: &str) -> Option<[u8; 16]> {
    let t = text.trim();
    if t.len() != 32 {
        return None;
    }
    let mut raw = [0u8; 16];
    hex::decode_to_slice(t, &mut raw).ok()?;
    (raw != [0; 16]).then_some(raw)
}

/// The kernel's boot id, a UUID that changes at every boot (zero if unknown).
pub fn boot_id() -> [u8; 16] {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .and_then(|t| parse_machine_id(&t.trim().replace('-', "")))
        .unwrap_or([0; 16])
}

/// The inode of this process's pid namespace (0 if unknown).
pub fn pid_namespace() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid")
        .map(|m| m.ino())
        .unwrap_or(0)
}

/// The start time of process `pid` in clock ticks after boot (field 22 of
/// `/proc/PID/stat`), and whether it is a zombie (exited, not yet reaped).
/// None if the process does not exist or its stat cannot be read.
pub fn process_start(pid: u32) -> Option<(u64, bool)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Parses `/proc/PID/stat`: `pid (comm) state ppid … starttime …`. The
/// command name may hold spaces and parentheses, so fields are counted from
/// the last `)`. Returns (field 22, state is `Z` or `X`).
pub fn parse_stat(text: &str) -> Option<(u64, bool)> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?; // field 3
    let start = fields.nth(22 - 4)?.parse().ok()?; // field 22
    Some((start, matches!(state, "Z" | "X")))
}

/// What became of a process recorded by pid and start time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessState {
    /// It is running (or may be: it exists and its start time cannot be
    /// read, or none was recorded).
    Running,
    /// No such process, or only its zombie.
    Exited,
    /// The pid belongs to a process that started at another time.
    Reused,
}

/// Looks up process `pid` that started at `start_time` (0: not recorded)
/// in this process's pid namespace.
pub fn process_state(pid: u32, start_time: u64) -> ProcessState {
    // 0 is not a process, and kill() reads a negative pid as a group.
    if pid == 0 || pid > i32::MAX as u32 {
        return ProcessState::Exited;
    }
    match process_start(pid) {
        Some((_, true)) => ProcessState::Exited,
        Some((st, false)) if start_time != 0 && st != start_time => ProcessState::Reused,
        Some(_) => ProcessState::Running,
        // /proc may hide other users' processes (hidepid): ask the kernel.
        None => match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None) {
            Err(nix::errno::Errno::ESRCH) => ProcessState::Exited,
            _ => ProcessState::Running,
        },
    }
}

/// Time since boot, suspended time included (`CLOCK_BOOTTIME`): one clock
/// that never jumps and keeps counting while the machine sleeps. Zero if
/// the clock cannot be read.
pub fn boottime() -> std::time::Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map(std::time::Duration::from)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let mut f: Vec<String> = (4..=52).map(|i| i.to_string()).collect();
        f[22 - 4] = "987654".into();
        let text = format!("42 (a) b) (c ) S {}\n", f.join(" "));
        assert_eq!(parse_stat(&text), Some((987654, false)));
        let z = text.replace(") S ", ") Z ");
        assert_eq!(parse_stat(&z), Some((987654, true)));
        assert_eq!(parse_stat("42 (x) S 1 2"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
    }

    #[test]
    fn this_process_is_running_and_a_wrong_start_time_is_reuse() {
        let me = std::process::id();
        let (start, zombie) = process_start(me).unwrap();
        assert!(!zombie);
        assert_eq!(process_state(me, start), ProcessState::Running);
        assert_eq!(process_state(me, start + 1), ProcessState::Reused);
        assert_eq!(process_state(0, 0), ProcessState::Exited);
        assert_eq!(process_state(u32::MAX, 0), ProcessState::Exited);
    }

    #[test]
    fn machine_ids_are_32_hex_digits() {
        let id = "0123456789abcdef0123456789abcdef\n";
        assert_eq!(parse_machine_id(id).unwrap()[0], 0x01);
        assert_eq!(parse_machine_id("uninitialized\n"), None);
        assert_eq!(parse_machine_id(&"0".repeat(32)), None);
        assert_eq!(parse_machine_id("0123"), None);
        assert_eq!(parse_machine_id(&"g".repeat(32)), None);
    }
}
