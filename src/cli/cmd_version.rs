//! `larder version`: which larder this is (restic's `version`).

use super::Global;
use super::output::print_json;
use crate::error::Result;
use serde::Serialize;

/// Print the version of larder and the platform it was built for.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  larder version\n  larder version --json")]
pub struct Args {}

/// What `version --json` prints.
#[derive(Serialize)]
struct Version {
    message_type: &'static str,
    version: &'static str,
    os: &'static str,
    arch: &'static str,
    /// The repository format version this larder writes (it reads 3 to 5,
    /// and a migrated repository's config of version 6).
    format_version: u8,
}

pub fn run(g: &Global, _a: Args) -> Result<i32> {
    let v = Version {
        message_type: "version",
        version: env!("CARGO_PKG_VERSION"),
        os: std::env::consts::OS,
        arch: std::env::consts::ARCH,
        format_version: crate::object::FORMAT_VERSION,
    };
    if g.json {
        print_json(&v);
    } else {
        println!(
            "larder {} on {}/{} (writes repository format {}, reads {} to {})",
            v.version,
            v.os,
            v.arch,
            v.format_version,
            crate::object::OLDEST_READ_VERSION,
            crate::object::MIGRATED_VERSION
        );
    }
    Ok(0)
}
