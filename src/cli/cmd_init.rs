//! `larder init`: create a repository and its first key.

use super::Global;
use super::global::new_key;
use super::output::print_json;
use crate::error::{Error, Result};
use crate::repository::{InitOptions, LEVEL_DEFAULT, Repository};
use serde::Serialize;

/// Create a new repository.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  larder -r /srv/backup/repo init\n  \
    LARDER_FROM_PASSWORD=... larder -r /mnt/offsite init --copy-chunker-params --from-repo /srv/backup/repo")]
pub struct Args {
    /// Protect the first key with this age X25519 recipient instead of a passphrase.
    #[arg(long)]
    recipient: Option<String>,
    /// Share the chunker and blob IDs with `--from-repo`, so `copy` moves
    /// blobs between the two without re-chunking. This shares the source's
    /// master key: whoever opens either repository can decrypt both.
    #[arg(long)]
    copy_chunker_params: bool,
    /// The repository whose chunker parameters (and master key) to share,
    /// and its password.
    #[command(flatten)]
    from: super::from_repo::FromRepo,
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
    // `--compression` (auto: the default level) is the repository's level.
    let level = InitOptions {
        compression_level: g.compression.unwrap_or_default().level(LEVEL_DEFAULT),
        ..InitOptions::default()
    };
    if a.copy_chunker_params && !a.from.given() {
        return Err(Error::Usage(
            "--copy-chunker-params shares another repository's: give --from-repo or \
             --from-repository-file"
                .into(),
        ));
    }
    let repo = match a.copy_chunker_params {
        true => {
            let src = a.from.open(g, &g.cache_dir())?;
            let opts = InitOptions {
                chunker: src.config().chunker,
                ..level
            };
            let master = crate::crypto::MasterKey::from_bytes(*src.master().as_bytes());
            Repository::init_with_master(backend, &key, &opts, &g.cache_dir(), master)?
        }
        false => Repository::init(backend, &key, &level, &g.cache_dir())?,
    };
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
