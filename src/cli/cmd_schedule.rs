//! `larder schedule install | remove | status`: systemd timers or crontab
//! lines that run profiles, and the health of every scheduled profile.

use super::Global;
use super::output::{print_json, safe};
use super::profiles::Setup;
use crate::error::{Error, Result};
use crate::schedule::systemd::{self, Scope};
use crate::schedule::view::{self, ProfileStatus};
use crate::schedule::{Config, Invocation, Profile, crontab};
use std::path::PathBuf;

/// Install, remove or check the periodic runs of profiles.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  larder schedule install --all\n  larder schedule status\n  larder schedule remove home"
)]
pub struct Args {
    #[command(subcommand)]
    cmd: Sub,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Write a systemd service and timer per profile (or a crontab line
    /// with --cron, or where systemd is not running).
    #[command(
        after_help = "Examples:\n  larder schedule install --all\n  larder schedule install home --cron"
    )]
    Install(Target),
    /// Remove exactly what `install` wrote.
    #[command(after_help = "Example:\n  larder schedule remove --all")]
    Remove(Target),
    /// Per profile: schedule, next due, last run, last success and a
    /// health word (ok, late, failing, never). Exits 1 unless all are ok.
    #[command(
        after_help = "Examples:\n  larder schedule status\n  larder schedule status home --json"
    )]
    Status(StatusArgs),
}

/// Which profiles, and where their schedule lives.
#[derive(clap::Args, Debug)]
struct Target {
    /// Profiles to act on.
    profiles: Vec<String>,
    /// Every profile with a schedule.
    #[arg(long)]
    all: bool,
    /// The user's systemd instance (the default when not root).
    #[arg(long, conflicts_with_all = ["system", "cron"])]
    user: bool,
    /// The system's systemd instance (the default for root).
    #[arg(long, conflicts_with = "cron")]
    system: bool,
    /// Write the units into this directory instead (nothing is enabled).
    #[arg(long, value_name = "DIR", conflicts_with = "cron")]
    unit_dir: Option<PathBuf>,
    /// Use the user's crontab instead of systemd.
    #[arg(long)]
    cron: bool,
}

#[derive(clap::Args, Debug)]
struct StatusArgs {
    /// Only these profiles (default: every profile with a schedule).
    profiles: Vec<String>,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let setup = Setup::new(g)?;
    match a.cmd {
        Sub::Install(t) => install(g, &setup, &t),
        Sub::Remove(t) => remove(g, &setup, &t),
        Sub::Status(s) => status(g, &setup, &s),
    }
}

/// The profiles named, or with `--all` every one with a schedule.
fn chosen<'c>(cfg: &'c Config, t: &Target) -> Result<Vec<&'c Profile>> {
    if t.all {
        return Ok(cfg
            .profiles
            .values()
            .filter(|p| p.schedule.is_some())
            .collect());
    }
    if t.profiles.is_empty() {
        return Err(Error::Usage("name the profiles, or give --all".into()));
    }
    t.profiles.iter().map(|n| cfg.profile(n)).collect()
}

/// systemd (scope, unit directory, whether to call systemctl), or `None`
/// for the crontab.
fn systemd_target(setup: &Setup, t: &Target) -> Result<Option<(Scope, PathBuf, bool)>> {
    let scope = match (t.system, t.user) {
        (true, _) => Scope::System,
        (false, true) => Scope::User,
        _ if setup.env.is_root => Scope::System,
        _ => Scope::User,
    };
    if let Some(d) = &t.unit_dir {
        return Ok(Some((scope, d.clone(), false)));
    }
    if t.cron || !systemd::systemd_running() {
        return Ok(None);
    }
    Ok(Some((scope, systemd::unit_dir(scope, &setup.env)?, true)))
}

fn invocation(g: &Global, setup: &Setup) -> Result<Invocation> {
    let exe = std::env::current_exe().map_err(|e| Error::io(std::path::Path::new("larder"), e))?;
    Ok(Invocation {
        binary: exe,
        config: g
            .config
            .clone()
            .or_else(|| setup.env.larder_config.clone())
            .map(|c| std::path::absolute(&c).unwrap_or(c)),
        state_dir: std::path::absolute(&setup.state_dir).unwrap_or(setup.state_dir.clone()),
    })
}

fn say(g: &Global, line: String) {
    if !g.quiet {
        println!("{}", safe(&line));
    }
}

fn install(g: &Global, setup: &Setup, t: &Target) -> Result<i32> {
    let cfg = setup.load()?;
    let profiles = chosen(&cfg, t)?;
    let inv = invocation(g, setup)?;
    let Some((scope, dir, enable)) = systemd_target(setup, t)? else {
        let tools = crontab::PriorityTools::find();
        let (old, text) = crontab::edit(&setup.state_dir, crontab::EDIT_WAIT, |old| {
            let mut text = old.to_string();
            for p in &profiles {
                text = crontab::install(&text, &p.name, &crontab::line(p, &inv, &tools)?);
            }
            Ok(text)
        })?;
        let verb = if text != old {
            "installed"
        } else {
            "unchanged"
        };
        for p in &profiles {
            say(g, format!("crontab entry for profile {}: {verb}", p.name));
        }
        return Ok(0);
    };
    for p in &profiles {
        let changes = systemd::install(&dir, &systemd::render(p, &inv)?)?;
        for f in &changes.changed {
            say(g, format!("wrote {}", f.display()));
        }
        for f in &changes.unchanged {
            say(g, format!("unchanged {}", f.display()));
        }
        let cmds = systemd::enable_commands(scope, &p.name);
        if enable {
            systemd::run_commands(&cmds)?;
            say(g, format!("enabled larder-{}.timer", p.name));
        } else {
            let lines: Vec<String> = cmds.iter().map(|c| c.join(" ")).collect();
            say(g, format!("to enable it, run: {}", lines.join(" && ")));
        }
    }
    Ok(0)
}

fn remove(g: &Global, setup: &Setup, t: &Target) -> Result<i32> {
    // Profiles that left the file can still be removed by name.
    let names: Vec<String> = if t.all {
        let cfg = setup.load_unchecked()?;
        chosen(&cfg, t)?.iter().map(|p| p.name.clone()).collect()
    } else if t.profiles.is_empty() {
        return Err(Error::Usage("name the profiles, or give --all".into()));
    } else {
        t.profiles.clone()
    };
    let Some((scope, dir, enabled)) = systemd_target(setup, t)? else {
        crontab::edit(&setup.state_dir, crontab::EDIT_WAIT, |old| {
            Ok(names
                .iter()
                .fold(old.to_string(), |t, n| crontab::remove(&t, n)))
        })?;
        for n in &names {
            say(g, format!("crontab entry for profile {n}: removed"));
        }
        return Ok(0);
    };
    for n in &names {
        if enabled && let Err(e) = systemd::run_commands(&systemd::disable_commands(scope, n)) {
            eprintln!("warning: {}", safe(&e.to_string()));
        }
        for f in systemd::remove(&dir, n)?.changed {
            say(g, format!("removed {}", f.display()));
        }
    }
    if enabled {
        systemd::run_commands(&systemd::reload_commands(scope))?;
    }
    Ok(0)
}

fn status(g: &Global, setup: &Setup, a: &StatusArgs) -> Result<i32> {
    let cfg = setup.load_unchecked()?;
    let records = setup.records()?;
    let tz = jiff::tz::TimeZone::system();
    let now = jiff::Timestamp::now();
    let profiles: Vec<&Profile> = if a.profiles.is_empty() {
        cfg.profiles
            .values()
            .filter(|p| p.schedule.is_some())
            .collect()
    } else {
        a.profiles
            .iter()
            .map(|n| cfg.profile(n))
            .collect::<Result<_>>()?
    };
    let statuses = profiles
        .iter()
        .map(|p| view::status(&records, &setup.state_dir, p, &tz, now))
        .collect::<Result<Vec<_>>>()?;
    if g.json {
        print_json(&statuses);
    } else {
        for s in &statuses {
            print_status(s);
        }
    }
    Ok(if view::all_ok(&statuses) { 0 } else { 1 })
}

fn print_status(s: &ProfileStatus) {
    let h = &s.health;
    let opt = |t: Option<jiff::Timestamp>| t.map_or("-".to_string(), |t| t.to_string());
    println!("{}: {}", safe(&s.profile), h.word.as_str());
    println!(
        "  schedule: {} (next due {})",
        safe(s.schedule.as_deref().unwrap_or("none")),
        opt(h.next_due)
    );
    if let Some(r) = &h.last_run {
        println!(
            "  last run: {} {}{}{}",
            r.started,
            r.result.as_str(),
            r.snapshot_id
                .as_deref()
                .map(|id| format!(", snapshot {}", &id[..8.min(id.len())]))
                .unwrap_or_default(),
            s.last_run_seconds
                .map(|d| format!(", {} bytes added, {d:.1}s", r.bytes_added.unwrap_or(0)))
                .unwrap_or_default()
        );
    }
    println!(
        "  last success: {}",
        opt(h.last_success.as_ref().map(|r| r.started))
    );
    if let Some(pid) = s.running {
        let who = pid.map_or("a process".to_string(), |p| format!("process {p}"));
        println!("  running now: {who}");
    }
    if !h.reason.is_empty() {
        println!("  why: {}", safe(&h.reason));
    }
}
