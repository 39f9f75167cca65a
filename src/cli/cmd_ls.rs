//! `larder ls`: list the files in a snapshot.

use super::Global;
use super::filter::FilterArgs;
use super::ncdu::NcduWriter;
use super::output::{mode_string, print_json, safe};
use crate::error::Result;
use crate::snapshot;
use crate::tree::{Node, NodeKind};
use crate::walker::{self, Listing, SortKey};
use serde::Serialize;

/// List the files in a snapshot.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  larder ls latest\n  larder ls latest /home/me/Documents -l\n  \
    larder ls latest /home/me --recursive --sort size --reverse -l    # the largest first\n  \
    larder ls latest --ncdu > snap.json && ncdu -f snap.json"
)]
pub struct Args {
    /// The snapshot to list: an id, a unique prefix or `latest`.
    snapshot: String,
    /// Only list this directory: itself and its entries (everything below
    /// it with --recursive). Without it, everything is listed.
    path: Option<String>,
    /// With PATH, list everything below it, not only its entries.
    #[arg(long)]
    recursive: bool,
    /// Sort the whole listing by KEY (`time` is mtime; ties by path;
    /// default: the tree's order, by name within each directory); holds
    /// the listing in memory.
    #[arg(long, value_enum, value_name = "KEY", conflicts_with = "ncdu")]
    sort: Option<SortBy>,
    /// Reverse the order; holds the listing in memory.
    #[arg(long, conflicts_with = "ncdu")]
    reverse: bool,
    /// Long listing.
    #[arg(short, long)]
    long: bool,
    /// With --long, sizes as KiB, MiB, GiB (restic's flag; else no effect).
    #[arg(long)]
    human_readable: bool,
    /// Write ncdu's JSON export format (browse it with `ncdu -f FILE`);
    /// always everything below PATH.
    #[arg(long, conflicts_with = "long")]
    ncdu: bool,
    #[command(flatten)]
    filter: FilterArgs,
}

/// `--sort`'s keys (restic 0.18's).
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum SortBy {
    Name,
    Size,
    /// mtime
    Time,
    Atime,
    Ctime,
    Mtime,
    Extension,
    Inode,
}

impl From<SortBy> for SortKey {
    fn from(s: SortBy) -> SortKey {
        match s {
            SortBy::Name => SortKey::Name,
            SortBy::Size => SortKey::Size,
            SortBy::Time | SortBy::Mtime => SortKey::Mtime,
            SortBy::Atime => SortKey::Atime,
            SortBy::Ctime => SortKey::Ctime,
            SortBy::Extension => SortKey::Extension,
            SortBy::Inode => SortKey::Inode,
        }
    }
}

/// The first `--json` line: the snapshot listed.
#[derive(Serialize)]
struct SnapshotLine<'a> {
    message_type: &'static str,
    id: String,
    time: String,
    paths: &'a [String],
    tree: String,
}

/// One node as `--json` shows it.
#[derive(Serialize)]
struct NodeLine<'a> {
    message_type: &'static str,
    path: &'a str,
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    mode: u32,
    uid: u32,
    gid: u32,
    user: &'a str,
    group: &'a str,
    size: u64,
    mtime_ns: i64,
    links: u64,
    link_target: Option<String>,
}

fn link_target(n: &Node) -> Option<String> {
    (n.kind == NodeKind::Symlink).then(|| String::from_utf8_lossy(&n.link_target).into_owned())
}

/// How `ls` prints a node: `--json`, `--long` (with human-readable sizes),
/// or its path alone.
#[derive(Clone, Copy)]
enum Style {
    Json,
    Long { human: bool },
    Path,
}

fn print_node(style: Style, p: &str, n: &Node) {
    match style {
        Style::Json => print_json(&NodeLine {
            message_type: "node",
            path: p,
            name: n.name_lossy(),
            kind: n.kind.word(),
            mode: n.mode,
            uid: n.uid,
            gid: n.gid,
            user: &n.user,
            group: &n.group,
            size: n.size,
            mtime_ns: n.mtime_ns,
            links: n.links,
            link_target: link_target(n),
        }),
        Style::Long { human } => println!("{}", long_line(p, n, human)),
        Style::Path => println!("{}", safe(p)),
    }
}

/// One `ls -l` style line; `human`: its size as KiB, MiB, GiB.
fn long_line(p: &str, n: &Node, human: bool) -> String {
    let t = jiff::Timestamp::from_nanosecond(n.mtime_ns as i128)
        .map(|t| {
            t.to_zoned(jiff::tz::TimeZone::system())
                .strftime("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_default();
    let target = link_target(n)
        .map(|t| format!(" -> {}", safe(&t)))
        .unwrap_or_default();
    let user = if n.user.is_empty() {
        n.uid.to_string()
    } else {
        n.user.to_string()
    };
    let group = if n.group.is_empty() {
        n.gid.to_string()
    } else {
        n.group.to_string()
    };
    format!(
        "{}{} {:>8} {:>8} {:>12} {} {}{}",
        n.kind.letter(),
        mode_string(n.mode),
        user,
        group,
        super::output::size_text(n.size, human),
        t,
        safe(p),
        target
    )
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    // The lock comes before the snapshot is picked (see `lock_for_reading`).
    let (repo, _lock) = g.open_for_reading()?;
    let (sid, snap) = snapshot::resolve(&repo, &a.snapshot, &a.filter.filter())?;
    if a.ncdu {
        let root = a.path.as_deref().unwrap_or("/");
        let out = std::io::BufWriter::new(std::io::stdout().lock());
        let mut w = NcduWriter::start(out, root, snap.time_ns.div_euclid(1_000_000_000))?;
        walker::walk_nested(&repo, snap.tree, a.path.as_deref(), &mut |s| w.step(s))?;
        w.finish()?;
        return Ok(0);
    }
    if g.json {
        print_json(&SnapshotLine {
            message_type: "snapshot",
            id: sid.to_hex(),
            time: snap.time_rfc3339(),
            paths: &snap.paths,
            tree: snap.tree.to_hex(),
        });
    } else if !g.quiet {
        println!(
            "snapshot {} of {:?} at {}:",
            sid.short(),
            snap.paths,
            snap.time_local()
        );
    }
    let style = match (g.json, a.long) {
        (true, _) => Style::Json,
        (false, true) => Style::Long {
            human: a.human_readable,
        },
        (false, false) => Style::Path,
    };
    let how = Listing {
        recursive: a.recursive,
        sort: a.sort.map(SortKey::from),
        reverse: a.reverse,
    };
    walker::list(&repo, snap.tree, a.path.as_deref(), &how, &mut |p, n| {
        print_node(style, p, n)
    })?;
    Ok(0)
}
