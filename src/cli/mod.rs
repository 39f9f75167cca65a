//! The command line: a thin shell over the library. clap definitions and
//! one small handler per command (`cmd_*.rs`: parse → call the library →
//! print); the global options and credentials ([`global`]), JSON and
//! terminal output ([`output`], [`progress`]). No backup logic lives here.

mod cmd_backup;
mod cmd_cache;
mod cmd_cat;
mod cmd_check;
mod cmd_completion;
mod cmd_config;
mod cmd_copy;
mod cmd_daemon;
mod cmd_diff;
mod cmd_dump;
mod cmd_find;
mod cmd_forget;
mod cmd_init;
mod cmd_key;
mod cmd_list;
mod cmd_ls;
mod cmd_migrate;
#[cfg(feature = "mount")]
mod cmd_mount;
mod cmd_prune;
mod cmd_recover;
mod cmd_repair;
mod cmd_restore;
mod cmd_rewrite;
mod cmd_run;
mod cmd_schedule;
mod cmd_snapshots;
mod cmd_stats;
mod cmd_tag;
mod cmd_unlock;
mod cmd_version;
mod filter;
mod from_repo;
mod global;
mod ncdu;
mod no_cache;
mod output;
mod profiles;
mod progress;

pub use global::Global;

use crate::error::Result;
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "larder",
    version,
    about = "Deduplicating, compressed, encrypted backups"
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Init(cmd_init::Args),
    Key(cmd_key::Args),
    Check(cmd_check::Args),
    Repair(cmd_repair::Args),
    Backup(cmd_backup::Args),
    Snapshots(cmd_snapshots::Args),
    Forget(Box<cmd_forget::Args>),
    Stats(cmd_stats::Args),
    Restore(cmd_restore::Args),
    Copy(cmd_copy::Args),
    Diff(cmd_diff::Args),
    Dump(cmd_dump::Args),
    Ls(cmd_ls::Args),
    Find(cmd_find::Args),
    Cat(cmd_cat::Args),
    List(cmd_list::Args),
    Prune(cmd_prune::Args),
    Recover(cmd_recover::Args),
    Tag(cmd_tag::Args),
    Rewrite(cmd_rewrite::Args),
    Unlock(cmd_unlock::Args),
    /// List or apply repository migrations: `upgrade_repo_v6` makes a
    /// repository written by an older larder (format version 3 or 4)
    /// writable by this one
    Migrate(cmd_migrate::Args),
    Cache(cmd_cache::Args),
    /// Validate the scheduled-backup profiles.
    Config(cmd_config::Args),
    Run(cmd_run::Args),
    Schedule(cmd_schedule::Args),
    Daemon(cmd_daemon::Args),
    Completion(cmd_completion::CompletionArgs),
    Manpage(cmd_completion::ManpageArgs),
    Version(cmd_version::Args),
    #[cfg(feature = "mount")]
    Mount(cmd_mount::Args),
}

/// Parses the process arguments, runs the command and returns the exit code.
pub fn main() -> i32 {
    let mut cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 1 } else { 0 };
        }
    };
    // Removed when this returns (or unwinds).
    let _no_cache = if cli.global.no_cache {
        match no_cache::TempCache::make() {
            Ok(t) => {
                cli.global.cache_dir = Some(t.path().to_path_buf());
                Some(t)
            }
            Err(e) => {
                eprintln!("larder: {}", output::safe(&e.to_string()));
                return e.exit_code();
            }
        }
    } else {
        None
    };
    output::quiet_broken_pipe();
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run(&cli.global, cli.command)
    }));
    match ran {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            eprintln!("larder: {}", output::safe(&e.to_string()));
            e.exit_code()
        }
        // The reader of stdout went away (`larder ls latest | head`): stop
        // quietly, as a program killed by SIGPIPE does (locks are released
        // on the way out).
        Err(p) if output::is_broken_pipe(p.as_ref()) => output::BROKEN_PIPE_EXIT,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// Runs one command and returns the exit code.
fn run(g: &Global, cmd: Command) -> Result<i32> {
    match cmd {
        Command::Init(a) => cmd_init::run(g, a),
        Command::Key(a) => cmd_key::run(g, a),
        Command::Check(a) => cmd_check::run(g, a),
        Command::Repair(a) => cmd_repair::run(g, a),
        Command::Backup(a) => cmd_backup::run(g, a),
        Command::Snapshots(a) => cmd_snapshots::run(g, a),
        Command::Forget(a) => cmd_forget::run(g, *a),
        Command::Stats(a) => cmd_stats::run(g, a),
        Command::Restore(a) => cmd_restore::run(g, a),
        Command::Copy(a) => cmd_copy::run(g, a),
        Command::Diff(a) => cmd_diff::run(g, a),
        Command::Dump(a) => cmd_dump::run(g, a),
        Command::Ls(a) => cmd_ls::run(g, a),
        Command::Find(a) => cmd_find::run(g, a),
        Command::Cat(a) => cmd_cat::run(g, a),
        Command::List(a) => cmd_list::run(g, a),
        Command::Prune(a) => cmd_prune::run(g, a),
        Command::Recover(a) => cmd_recover::run(g, a),
        Command::Tag(a) => cmd_tag::run(g, a),
        Command::Rewrite(a) => cmd_rewrite::run(g, a),
        Command::Unlock(a) => cmd_unlock::run(g, a),
        Command::Migrate(a) => cmd_migrate::run(g, a),
        Command::Cache(a) => cmd_cache::run(g, a),
        Command::Config(a) => cmd_config::run(g, a),
        Command::Run(a) => cmd_run::run(g, a),
        Command::Schedule(a) => cmd_schedule::run(g, a),
        Command::Daemon(a) => cmd_daemon::run(g, a),
        Command::Completion(a) => cmd_completion::completion(a),
        Command::Manpage(a) => cmd_completion::manpage(g, a),
        Command::Version(a) => cmd_version::run(g, a),
        #[cfg(feature = "mount")]
        Command::Mount(a) => cmd_mount::run(g, a),
    }
}

#[cfg(test)]
mod help_tests {
    use super::Cli;
    use clap::CommandFactory;

    /// The commands (space-separated paths) whose help has no example.
    fn without_example(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for sub in cmd.get_subcommands() {
            let p = format!("{path} {}", sub.get_name());
            let help = sub.clone().render_long_help().to_string();
            if !help.contains("Example") {
                out.push(p.clone());
            }
            without_example(sub, &p, out);
        }
    }

    /// The arguments of `cmd` and its subcommands (named `path`) that
    /// `--help` shows without a word of help.
    fn without_help(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            let shown = !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version");
            if shown && a.get_help().is_none() && a.get_long_help().is_none() {
                out.push(format!("{path} {}", a.get_id()));
            }
        }
        for sub in cmd.get_subcommands() {
            without_help(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    /// Every option and argument says what it is for in `--help`.
    #[test]
    fn every_argument_has_help() {
        let mut missing = Vec::new();
        without_help(&Cli::command(), "larder", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:?}");
    }

    #[test]
    fn every_command_has_an_example() {
        let cli = Cli::command();
        let mut missing = Vec::new();
        without_example(&cli, "larder", &mut missing);
        assert!(cli.get_subcommands().count() >= 18);
        assert!(missing.is_empty(), "no example in --help of: {missing:?}");
    }

    /// What a command line gives a profile's run over the profile's own
    /// storage settings: the flags given (`--compression auto` too), and
    /// nothing for flags not given.
    #[test]
    fn the_command_lines_storage_settings_for_a_profiles_run() {
        use clap::Parser;
        let c = Cli::try_parse_from([
            "larder",
            "--pack-size",
            "8",
            "--limit-upload",
            "100",
            "--connections",
            "3",
            "--compression",
            "MAX",
            "run",
            "home",
        ])
        .unwrap();
        let s = c.global.storage();
        assert_eq!(s.compression.as_deref(), Some("max"));
        assert_eq!(s.pack_size, Some(8));
        assert_eq!((s.limit_upload, s.limit_download), (Some(100), None));
        assert_eq!(s.connections, Some(3));
        let c = Cli::try_parse_from(["larder", "run", "home"]).unwrap();
        assert_eq!(c.global.storage(), Default::default());
        // Given, `auto` wins over a profile's level too.
        let c = Cli::try_parse_from(["larder", "--compression", "auto", "run", "home"]).unwrap();
        assert_eq!(c.global.storage().compression.as_deref(), Some("auto"));
    }
}
