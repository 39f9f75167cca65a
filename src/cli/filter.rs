//! The snapshot filter flags several commands share (`--host`, `--tag`,
//! `--path`), as restic's, and the `--group-by` value and group heading of
//! `forget` and `snapshots`.

use super::output::safe;
use crate::retention::GroupBy;
use crate::snapshot::{Filter, TagList};

#[derive(clap::Args, Debug, Default, Clone)]
pub struct FilterArgs {
    /// Only snapshots from this host (repeatable).
    #[arg(long = "host", env = "LARDER_HOST")]
    pub hosts: Vec<String>,
    /// Only snapshots with these tags (`a,b`: both; repeatable: any of
    /// the lists; '' for untagged snapshots).
    #[arg(long = "tag", value_name = "TAG[,TAG]")]
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
            tags: self.tags.iter().map(|t| TagList::parse(t)).collect(),
            paths: self.paths.clone(),
            exact: false,
        }
    }
}

/// clap's parser of a `--group-by` value.
pub fn group_by(s: &str) -> std::result::Result<GroupBy, String> {
    GroupBy::parse(s).map_err(|e| e.to_string())
}

/// restic's heading of a group, `snapshots for (host [a], tags [x],
/// paths [/srv])`, or `None` for a group without a key.
pub fn group_heading(
    host: &str,
    tags: Option<&[String]>,
    paths: Option<&[String]>,
) -> Option<String> {
    let mut key = Vec::new();
    if !host.is_empty() {
        key.push(format!("host [{}]", safe(host)));
    }
    if let Some(tags) = tags {
        key.push(format!("tags [{}]", safe(&tags.join(", "))));
    }
    if let Some(paths) = paths {
        key.push(format!("paths [{}]", safe(&paths.join(", "))));
    }
    (!key.is_empty()).then(|| format!("snapshots for ({}):", key.join(", ")))
}
