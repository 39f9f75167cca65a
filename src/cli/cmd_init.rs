//! `larder init`: create a repository and its first key.

use super::Global;
use super::global::new_key;
use super::output::print_json;
use crate::error::Result;
use crate::repository::{InitOptions, Repository};
use serde::Serialize;

/// Create a new repository.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  larder -r /srv/backup/repo init")]
pub struct Args {
    /// Protect the first key with this age X25519 recipient instead of a passphrase.
    #[arg(long)]
    recipient: Option<String>,
}

#[derive(Serialize)]
struct Created {
    id: String,
    repository: String,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let backend = g.backend()?;
    let key = new_key(g, a.recipient.as_deref(), None, true)?;
    let shown = backend.location();
    let repo = Repository::init(backend, &key, &InitOptions::default(), &g.cache_dir())?;
    g.known_repositories()
        .record(&g.location()?, &repo.identity())?;
    let id = repo.config().id;
    if g.json {
        print_json(&Created {
            id: id.to_hex(),
            repository: shown,
        });
    } else if !g.quiet {
        println!("created larder repository {} at {}", id.short(), shown);
        println!("repository id: {id}");
        println!("Losing your password (or identity) means losing your data: keep it safe.");
    }
    Ok(0)
}
