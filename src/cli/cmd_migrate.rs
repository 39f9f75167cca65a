//! `larder migrate`: list the migrations a repository can take, or apply
//! one (restic's command; larder has one, `upgrade_repo_v5`).

use super::Global;
use crate::error::{Error, Result};
use crate::object::FORMAT_VERSION;

/// The one migration: the config rewritten as the current format version.
const UPGRADE: &str = "upgrade_repo_v5";

/// List the migrations this repository can take, or apply one: a
/// repository written by an older larder (format version 3 or 4) is read
/// but not written until `upgrade_repo_v5` rewrites its config as version
/// 5. Only the config changes; larders older than this one cannot open it
/// after.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  larder migrate\n  larder migrate upgrade_repo_v5")]
pub struct Args {
    /// The migration to apply (without it, the list): `upgrade_repo_v5`
    #[arg(value_name = "NAME")]
    name: Option<String>,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let repo = g.open()?;
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
                "  {UPGRADE}  rewrite the config as format version {FORMAT_VERSION} ({state})"
            );
        }
        return Ok(0);
    };
    if name != UPGRADE {
        return Err(Error::Usage(format!(
            "unknown migration {name:?}: larder has one, {UPGRADE} (`larder migrate` lists it)"
        )));
    }
    match repo.upgrade_format()? {
        Some(from) => {
            if !g.quiet {
                println!(
                    "repository {} upgraded from format version {from} to {FORMAT_VERSION}",
                    repo.backend().location()
                );
            }
        }
        None => {
            if !g.quiet {
                println!(
                    "repository {} already has format version {FORMAT_VERSION}: nothing to do",
                    repo.backend().location()
                );
            }
        }
    }
    Ok(0)
}
