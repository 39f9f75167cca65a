//! systemd units for a profile: `larder-PROFILE.service` (oneshot, `larder
//! run PROFILE`, the profile's `Nice=` and I/O class) and
//! `larder-PROFILE.timer` (`OnCalendar=` from the schedule, `Persistent=true`
//! so runs missed while the machine was off happen at boot, and a
//! `RandomizedDelaySec=` of a tenth of the interval, at most 10 minutes, so
//! machines sharing a schedule do not all start at once). Files are written
//! only when their content changes; removal deletes only files larder
//! wrote (recognised by their first line). `systemctl` calls are thin
//! wrappers the CLI runs when systemd is up.

use super::atomic::write_atomic;
use super::invocation::{Invocation, check_line_safe, systemd_env_word, systemd_word};
use super::paths::Env;
use super::profile::Profile;
use super::values::IoNice;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The first line of every unit larder writes.
pub const MARKER: &str =
    "# Written by `larder schedule install`; `larder schedule remove` deletes it.";

/// Whose systemd instance runs the units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The user's manager (`systemctl --user`), units in
    /// `~/.config/systemd/user`.
    User,
    /// The system manager, units in `/etc/systemd/system`.
    System,
}

/// Where units of `scope` go.
pub fn unit_dir(scope: Scope, env: &Env) -> Result<PathBuf> {
    match scope {
        Scope::System => Ok(PathBuf::from("/etc/systemd/system")),
        Scope::User => {
            let base = match (&env.xdg_config_home, &env.home) {
                (Some(x), _) => x.clone(),
                (None, Some(h)) => h.join(".config"),
                (None, None) => {
                    return Err(Error::Usage(
                        "HOME is not set, so the user unit directory cannot be found".into(),
                    ));
                }
            };
            Ok(base.join("systemd").join("user"))
        }
    }
}

/// The unit names of a profile: (service, timer).
pub fn unit_names(profile: &str) -> (String, String) {
    (
        format!("larder-{profile}.service"),
        format!("larder-{profile}.timer"),
    )
}

/// The two units' names and contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Units {
    pub service_name: String,
    pub service: String,
    pub timer_name: String,
    pub timer: String,
}

/// The timer's randomized delay: a tenth of the interval, at most 10 min.
pub fn randomized_delay(interval: Duration) -> Duration {
    Duration::from_secs((interval.as_secs() / 10).min(600))
}

/// Renders the profile's units. Fails for a profile without a schedule or
/// with one `OnCalendar=` cannot express.
pub fn render(profile: &Profile, inv: &Invocation) -> Result<Units> {
    let schedule = profile
        .schedule
        .as_ref()
        .ok_or_else(|| profile.error_at("schedule", "has no schedule to install"))?;
    let calendar = schedule
        .on_calendar()
        .map_err(|m| profile.error_at("schedule", m))?;
    for (what, v) in [
        ("binary path", inv.binary.as_os_str()),
        ("state directory", inv.state_dir.as_os_str()),
    ]
    .into_iter()
    .chain(
        inv.config
            .iter()
            .map(|c| ("configuration file", c.as_os_str())),
    ) {
        check_line_safe(what, &v.to_string_lossy())?;
    }
    if !inv.binary.is_absolute() {
        return Err(Error::Usage(format!(
            "the larder binary path {} must be absolute",
            inv.binary.display()
        )));
    }
    let exec: Vec<String> = inv
        .argv(&profile.name, false)
        .iter()
        .map(|w| systemd_word(w))
        .collect();
    let state = format!("LARDER_STATE_DIR={}", inv.state_dir.to_string_lossy());
    let io = match profile.ionice {
        IoNice::Unchanged => String::new(),
        IoNice::Idle => "IOSchedulingClass=idle\n".into(),
        IoNice::BestEffort(l) => {
            format!("IOSchedulingClass=best-effort\nIOSchedulingPriority={l}\n")
        }
    };
    let (service_name, timer_name) = unit_names(&profile.name);
    let service = format!(
        "{MARKER}\n[Unit]\nDescription=larder backup run of profile {name}\n\n\
         [Service]\nType=oneshot\nEnvironment={env}\nExecStart={exec}\nNice={nice}\n{io}",
        name = profile.name,
        env = systemd_env_word(&state),
        exec = exec.join(" "),
        nice = profile.nice,
    );
    let timer = format!(
        "{MARKER}\n[Unit]\nDescription=larder schedule of profile {name} ({sched})\n\n\
         [Timer]\nOnCalendar={calendar}\nPersistent=true\nRandomizedDelaySec={delay}\n\n\
         [Install]\nWantedBy=timers.target\n",
        name = profile.name,
        sched = schedule.as_str().replace('%', "%%"),
        delay = randomized_delay(schedule.interval()).as_secs(),
    );
    Ok(Units {
        service_name,
        service,
        timer_name,
        timer,
    })
}

/// Which files an install or removal touched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Written (new or changed) or removed.
    pub changed: Vec<PathBuf>,
    /// Already as wanted.
    pub unchanged: Vec<PathBuf>,
}

/// Writes the units into `dir`, each only if its content differs.
pub fn install(dir: &Path, units: &Units) -> Result<Changes> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut changes = Changes::default();
    for (name, content) in [
        (&units.service_name, &units.service),
        (&units.timer_name, &units.timer),
    ] {
        let path = dir.join(name);
        match std::fs::read(&path) {
            Ok(old) if old == content.as_bytes() => {
                changes.unchanged.push(path);
                continue;
            }
            Ok(old) if !old.starts_with(MARKER.as_bytes()) => {
                return Err(Error::Usage(format!(
                    "{} exists and was not written by larder; refusing to replace it",
                    path.display()
                )));
            }
            _ => {}
        }
        write_atomic(&path, content.as_bytes())?;
        changes.changed.push(path);
    }
    Ok(changes)
}

/// Removes the profile's units from `dir` (only files larder wrote).
pub fn remove(dir: &Path, profile: &str) -> Result<Changes> {
    let (service, timer) = unit_names(profile);
    let mut changes = Changes::default();
    for name in [timer, service] {
        let path = dir.join(&name);
        match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
            Ok(old) if !old.starts_with(MARKER.as_bytes()) => {
                return Err(Error::Usage(format!(
                    "{} was not written by larder; leaving it alone",
                    path.display()
                )));
            }
            Ok(_) => {}
        }
        std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
        changes.changed.push(path);
    }
    Ok(changes)
}

/// Whether systemd is the running init (`/run/systemd/system` exists).
pub fn systemd_running() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

fn systemctl(scope: Scope, args: &[&str]) -> Vec<String> {
    let mut v = vec!["systemctl".to_string()];
    if scope == Scope::User {
        v.push("--user".into());
    }
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

/// The commands that load and start a profile's timer after install.
pub fn enable_commands(scope: Scope, profile: &str) -> Vec<Vec<String>> {
    let (_, timer) = unit_names(profile);
    vec![
        systemctl(scope, &["daemon-reload"]),
        systemctl(scope, &["enable", "--now", &timer]),
    ]
}

/// The commands that stop a profile's timer before removal.
pub fn disable_commands(scope: Scope, profile: &str) -> Vec<Vec<String>> {
    let (_, timer) = unit_names(profile);
    vec![systemctl(scope, &["disable", "--now", &timer])]
}

/// The commands that make systemd forget removed units.
pub fn reload_commands(scope: Scope) -> Vec<Vec<String>> {
    vec![systemctl(scope, &["daemon-reload"])]
}

/// Runs commands in order, stopping at the first that fails.
pub fn run_commands(cmds: &[Vec<String>]) -> Result<()> {
    for c in cmds {
        let Some((prog, args)) = c.split_first() else {
            continue;
        };
        let out = std::process::Command::new(prog)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| Error::Usage(format!("{}: {e}", c.join(" "))))?;
        if !out.status.success() {
            return Err(Error::Usage(format!(
                "{} failed ({}): {}",
                c.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "systemd_tests.rs"]
mod tests;
