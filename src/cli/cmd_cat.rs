//! `larder cat`: print a repository object as JSON (for debugging).

use super::Global;
use crate::error::{Error, Result};
use crate::snapshot::{self, Filter};
use crate::walker;

/// Print a repository object as JSON (for debugging).
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  larder cat config\n  larder cat snapshot latest\n  \
    larder cat tree latest:/home"
)]
pub struct Args {
    /// `config`, `snapshot ID` or `tree ID` (or `tree SNAPSHOT[:PATH]`).
    what: String,
    /// The snapshot or tree id (or prefix) that WHAT names.
    id: Option<String>,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let repo = g.open()?;
    let what = a.what.as_str();
    let need = || {
        a.id.as_deref()
            .ok_or_else(|| Error::Usage(format!("`cat {what}` needs an id")))
    };
    let v = match what {
        "config" => serde_json::to_value(repo.config()),
        "snapshot" => {
            let (_, s) = snapshot::resolve(&repo, need()?, &Filter::default())?;
            serde_json::to_value(&s)
        }
        "tree" => {
            let arg = need()?;
            // The lock comes before the snapshot is picked (see
            // `lock_for_reading`): a tree is read from a pack.
            let _lock = repo.lock_for_reading()?;
            let tid = match crate::Id::from_hex(arg) {
                Ok(t) => t,
                Err(_) => {
                    let (r, sub) = arg.split_once(':').unwrap_or((arg, ""));
                    let (_, s) = snapshot::resolve(&repo, r, &Filter::default())?;
                    walker::tree_at(&repo, s.tree, sub)?
                }
            };
            serde_json::to_value(&repo.load_tree(&tid)?)
        }
        other => {
            return Err(Error::Usage(format!(
                "cannot cat {other:?}: use config, snapshot or tree"
            )));
        }
    }
    .map_err(|e| Error::internal(format!("cannot print JSON: {e}")))?;
    println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    Ok(0)
}
