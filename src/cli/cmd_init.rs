//! `larder init`: create a repository and its first key.

use super::Global;
use super::global::new_key;
use super::output::print_json;
use crate::error::Result;
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
    #[arg(long, requires = "from_repo")]
    copy_chunker_params: bool,
    /// The repository whose chunker parameters (and master key) to share.
    #[arg(long, env = "LARDER_FROM_REPOSITORY")]
    from_repo: Option<std::path::PathBuf>,
    /// A file holding `--from-repo`'s password (else LARDER_FROM_PASSWORD).
    #[arg(long, env = "LARDER_FROM_PASSWORD_FILE")]
    from_password_file: Option<std::path::PathBuf>,
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
    let repo = match (&a.from_repo, a.copy_chunker_params) {
        (Some(from), true) => {
            let src = g.open_other(from, a.from_password_file.as_deref())?;
            let opts = InitOptions {
                chunker: src.config().chunker,
                ..level
            };
            let master = crate::crypto::MasterKey::from_bytes(*src.master().as_bytes());
            Repository::init_with_master(backend, &key, &opts, &g.cache_dir(), master)?
        }
        _ => Repository::init(backend, &key, &level, &g.cache_dir())?,
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
