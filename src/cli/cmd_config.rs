//! `larder config check`: validate the profiles file and print each
//! resolved profile (inheritance applied) with its next due times.

use super::Global;
use super::output::{print_json, safe};
use super::profiles::Setup;
use crate::error::Result;
use crate::schedule::view::{ProfileView, profile_view};

/// Validate and show the scheduled-backup profiles.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Example:\n  larder config check\n  larder --config ./larder.toml config check --json"
)]
pub struct Args {
    #[command(subcommand)]
    cmd: Sub,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Validate the profiles file (unknown keys, schedules, credential
    /// files) and print each resolved profile.
    #[command(after_help = "Example:\n  larder --config ~/.config/larder/larder.toml config check")]
    Check,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let Sub::Check = a.cmd;
    let setup = Setup::new(g)?;
    let cfg = setup.load()?;
    let tz = jiff::tz::TimeZone::system();
    let now = jiff::Timestamp::now();
    let views: Vec<ProfileView> = cfg
        .profiles
        .values()
        .map(|p| profile_view(p, &tz, now))
        .collect();
    if g.json {
        print_json(&views);
        return Ok(0);
    }
    for v in &views {
        print_view(v);
    }
    if !g.quiet {
        println!(
            "{}: {} profile(s), no errors",
            safe(&cfg.file.display().to_string()),
            views.len()
        );
    }
    Ok(0)
}

fn print_view(v: &ProfileView) {
    let p = v.profile;
    println!("[profile.{}]", safe(&p.name));
    println!("  repository: {}", safe(&p.repository));
    if p.backup.stdin_from_command.is_empty() {
        let paths: Vec<String> = p.paths.iter().map(|x| x.display().to_string()).collect();
        println!("  paths: {}", safe(&paths.join(", ")));
    } else {
        println!(
            "  stdin-from-command: {} (stored as /{})",
            safe(&p.backup.stdin_from_command.join(" ")),
            safe(p.backup.stream_name())
        );
    }
    match (&p.schedule, v.next_due) {
        (Some(s), Some(next)) => println!("  schedule: {} (next due {next})", safe(s.as_str())),
        (Some(s), None) => println!("  schedule: {}", safe(s.as_str())),
        (None, _) => println!("  schedule: none (run it by hand with `larder run`)"),
    }
    if let Some(c) = &v.on_calendar {
        println!("  systemd OnCalendar: {}", safe(c));
    }
    if let Some(e) = &v.on_calendar_error {
        println!("  systemd OnCalendar: none ({}); use --cron", safe(e));
    }
    println!(
        "  retention: {}",
        if p.retention.is_set() {
            "set"
        } else {
            "none (forget is skipped)"
        }
    );
    for (what, s, next) in [
        ("prune", &p.prune, v.prune_next_due),
        ("check", &p.check, v.check_next_due),
    ] {
        if let Some(s) = s {
            let next = next.map(|t| format!(" (next due {t})")).unwrap_or_default();
            println!("  {what}: {}{next}", safe(s.as_str()));
        }
    }
}
