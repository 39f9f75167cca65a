//! `larder completion SHELL` (a completion script from clap_complete on
//! stdout) and `larder manpage DIR` (roff man pages from clap_mangen: one
//! for larder and one per subcommand, `larder-backup.1`, `larder-key-add.1`).

use super::output::print_json;
use super::{Cli, Global};
use crate::error::{Error, Result};
use clap::CommandFactory;
use std::path::{Path, PathBuf};

/// Print a shell completion script.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  larder completion bash > ~/.local/share/bash-completion/completions/larder
  larder completion zsh > ~/.zfunc/_larder          # with fpath+=~/.zfunc
  larder completion fish > ~/.config/fish/completions/larder.fish
  source <(larder completion bash)                  # this shell only")]
pub struct CompletionArgs {
    /// The shell to complete for.
    shell: clap_complete::Shell,
}

/// Write man pages (larder.1 and one per subcommand) into a directory.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:
  larder manpage ~/.local/share/man/man1 && man larder-backup")]
pub struct ManpageArgs {
    /// Where to write the pages (created if missing).
    dir: PathBuf,
}

pub fn completion(a: CompletionArgs) -> Result<i32> {
    let mut cmd = Cli::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(a.shell, &mut cmd, "larder", &mut out);
    Ok(0)
}

pub fn manpage(g: &Global, a: ManpageArgs) -> Result<i32> {
    std::fs::create_dir_all(&a.dir).map_err(|e| Error::io(&a.dir, e))?;
    let mut cmd = Cli::command();
    // Propagates the global options into every subcommand's page.
    cmd.build();
    let mut written = Vec::new();
    write_pages(&cmd, "larder", &a.dir, &mut written)?;
    if g.json {
        print_json(&serde_json::json!({ "message_type": "summary", "files": written }));
    } else if !g.quiet {
        println!("wrote {} man pages to {}", written.len(), a.dir.display());
    }
    Ok(0)
}

/// Writes `<name>.1` for `cmd` and, recursively, its subcommands.
fn write_pages(cmd: &clap::Command, name: &str, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    // clap takes a name as `&'static str` (its `string` feature is off); a
    // few bytes per page, once, in a command that exits right after.
    let static_name: &'static str = Box::leak(name.to_string().into_boxed_str());
    let page = cmd.clone().name(static_name);
    let mut bytes = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut bytes)
        .map_err(|e| Error::io(dir, e))?;
    let file = dir.join(format!("{name}.1"));
    std::fs::write(&file, &bytes).map_err(|e| Error::io(&file, e))?;
    out.push(file.display().to_string());
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        write_pages(sub, &format!("{name}-{}", sub.get_name()), dir, out)?;
    }
    Ok(())
}
