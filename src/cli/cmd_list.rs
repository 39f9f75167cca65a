//! `larder list`: print the ids of one kind of repository object.

use super::Global;
use super::output::BROKEN_PIPE_EXIT;
use crate::error::{Error, Result};
use crate::list::{What, list};
use std::io::Write;

/// List the ids of one kind of repository object (for scripts).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  larder list snapshots\n  larder list blobs | grep -c '^tree'")]
pub struct Args {
    /// snapshots, keys, locks, packs, index, blobs (`data ID` / `tree ID`
    /// lines, from the index), marks or dicts.
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(What::NAMES))]
    what: String,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let what = What::parse(&a.what)?;
    let repo = g.open()?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut closed = false;
    let listed = list(&repo, what, |l| match writeln!(out, "{l}") {
        Ok(()) => Ok(()),
        // The reader went away (`larder list blobs | head`): stop quietly.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            closed = true;
            Err(Error::Interrupted)
        }
        Err(e) => Err(Error::io("standard output", e)),
    });
    if closed {
        return Ok(BROKEN_PIPE_EXIT);
    }
    listed?;
    match out.flush() {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(BROKEN_PIPE_EXIT),
        r => r.map(|()| 0).map_err(|e| Error::io("standard output", e)),
    }
}
