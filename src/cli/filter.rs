//! The snapshot filter flags several commands share (`--host`, `--tag`,
//! `--path`), as restic's.

use crate::snapshot::Filter;

#[derive(clap::Args, Debug, Default, Clone)]
pub struct FilterArgs {
    /// Only snapshots from this host (repeatable).
    #[arg(long = "host")]
    pub hosts: Vec<String>,
    /// Only snapshots with this tag (repeatable).
    #[arg(long = "tag")]
    pub tags: Vec<String>,
    /// Only snapshots containing this path (repeatable).
    #[arg(long = "path")]
    pub paths: Vec<String>,
}

impl FilterArgs {
    /// The library's filter.
    pub fn filter(&self) -> Filter {
        Filter {
            hosts: self.hosts.clone(),
            tags: self.tags.clone(),
            paths: self.paths.clone(),
        }
    }
}
