//! `larder migrate`: list the migrations a repository can take, or apply
//! one (restic's command; larder has one, `upgrade_repo_v6`).

use super::Global;
use crate::error::{Error, Result};
use crate::object::FORMAT_VERSION;
use crate::repository::UPGRADE_MIGRATION;

/// List the migrations this repository can take, or apply one: a
/// repository written by an older larder (format version 3 or 4) is read
/// but not written until `upgrade_repo_v6` rewrites its config. Only the
/// config changes; larders older than this one cannot open it after.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  larder migrate\n  larder migrate upgrade_repo_v6")]
pub struct Args {
    /// The migration to apply (without it, the list): `upgrade_repo_v6`
    #[arg(value_name = "NAME")]
    name: Option<String>,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let repo = g.open_quietly_if_old()?;
    let version = repo.format_version();
    let Some(name) = a.name else {
        if !g.quiet {
            println!("available migrations:");
            let state = if version < FORMAT_VERSION {
                format!("applies: the repository has format version {version}")
            } else {
                format!("nothing to do: the repository has format version {version}")
            };
            println!(
                "  {UPGRADE_MIGRATION}  make a repository of format version 3 or 4 writable: its config is rewritten, nothing else ({state})"
            );
        }
        return Ok(0);
    };
    if name != UPGRADE_MIGRATION {
        return Err(Error::Usage(format!(
            "unknown migration {name:?}: larder has one, {UPGRADE_MIGRATION} (`larder migrate` lists it)"
        )));
    }
    // In the state directory, which neither `--no-cache` nor `cache
    // --cleanup` removes.
    let dir = crate::host::state_dir().join("migrations");
    let kept = dir.join(format!(
        "{}-config-before-{UPGRADE_MIGRATION}",
        repo.config().id.to_hex()
    ));
    let mut keep_old = |bytes: &[u8]| {
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        crate::schedule::atomic::write_atomic(&kept, bytes)
    };
    let location = repo.backend().location();
    let location = super::output::safe(&location);
    match repo.upgrade_format(&mut keep_old)? {
        Some(from) => {
            if !g.quiet {
                println!(
                    "repository {location} upgraded from format version {from} to {}",
                    crate::object::MIGRATED_VERSION
                );
                println!(
                    "its old config is kept in {} (copy it back over the config only if every larder that uses the repository must be an older one again, and nothing was written since)",
                    kept.display()
                );
            }
        }
        None if version < FORMAT_VERSION => {
            if !g.quiet {
                println!(
                    "repository {location} was migrated by another larder meanwhile: nothing to do"
                );
            }
        }
        None => {
            if !g.quiet {
                println!("repository {location} has format version {version}: nothing to do");
            }
        }
    }
    Ok(0)
}
