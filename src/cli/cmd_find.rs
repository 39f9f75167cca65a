//! `larder find`: entries matching globs, or using blobs or trees, across
//! snapshots (restic's flags).

use super::Global;
use super::filter::FilterArgs;
use super::output::{print_json, safe};
use crate::error::{Error, Result};
use crate::find::{self, FindMode, FindOptions, Found};
use crate::id::Id;
use crate::repository::Repository;
use crate::snapshot::select;
use serde::Serialize;

/// Find files and directories in snapshots by name, path, blob, tree or pack.
///
/// A pattern without `/` is a glob on names (`*`, `?`, `[a-z]`, `{a,b}`);
/// one with `/` matches the whole path in the snapshot (`*` then stops at
/// `/`, `**` crosses it). With --blob or --tree the patterns are ids (or
/// hex prefixes) and the files using the data blob, or the directories
/// with the tree, are listed; with --pack they name packs, and the files
/// using a data blob the pack holds are listed. Prints snapshot, type,
/// size, modification time and path, one match a line.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  larder find '*.pdf'
  larder find -i 'report*' --snapshot latest --host laptop
  larder find '/home/me/**/secret.env' --newest '2026-01-31'
  larder find --blob 3f2a9c1d           # which files use this blob (after `check` names it)
  larder find --tree 1a2b3c4d --json
  larder find --blob 3f2a9c1d --show-pack-id   # and the pack that stores it
  larder find --pack 5e6f7a8b           # which files a damaged pack holds data of")]
pub struct Args {
    /// Globs (or, with --blob/--tree/--pack, ids or hex prefixes).
    #[arg(required = true, value_name = "PATTERN")]
    patterns: Vec<String>,
    /// Only search this snapshot (repeatable; id, prefix or `latest`).
    #[arg(short = 's', long = "snapshot", value_name = "ID")]
    snapshots: Vec<String>,
    /// Only entries modified at or after this time (YYYY-MM-DD[ HH:MM[:SS]] local, or RFC 3339).
    #[arg(short = 'O', long, value_name = "TIME")]
    oldest: Option<String>,
    /// Only entries modified at or before this time (YYYY-MM-DD[ HH:MM[:SS]] local, or RFC 3339).
    #[arg(short = 'N', long, value_name = "TIME")]
    newest: Option<String>,
    /// Match the globs regardless of case.
    #[arg(short = 'i', long)]
    ignore_case: bool,
    /// The patterns are data blob ids: list the files that use them.
    #[arg(long, conflicts_with_all = ["tree", "pack"])]
    blob: bool,
    /// The patterns are tree ids: list the directories with that tree.
    #[arg(long, conflicts_with = "pack")]
    tree: bool,
    /// The patterns are pack ids (or prefixes naming one pack): list the
    /// files that use a data blob the pack holds, by the index.
    #[arg(long)]
    pack: bool,
    /// With --blob or --tree: also show the pack that stores the matching
    /// blob or tree, by the index (as restic's flag).
    #[arg(long)]
    show_pack_id: bool,
    /// Sizes as KiB, MiB, GiB (restic's flag; not in --json).
    #[arg(long)]
    human_readable: bool,
    #[command(flatten)]
    filter: FilterArgs,
}

/// One match as `--json` shows it.
#[derive(Serialize)]
struct MatchLine {
    message_type: &'static str,
    snapshot: String,
    path: String,
    #[serde(rename = "type")]
    kind: &'static str,
    mode: u32,
    size: u64,
    mtime: String,
    mtime_ns: i64,
    /// The blob or tree id that matched (--blob/--tree).
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    /// With --show-pack-id: the pack storing `id` (null if the index
    /// knows none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pack_id: Option<Option<String>>,
}

/// The closing `--json` line.
#[derive(Serialize)]
struct SummaryLine<'a> {
    message_type: &'static str,
    #[serde(flatten)]
    stats: &'a find::FindStats,
}

/// Parses `--oldest/--newest`: `YYYY-MM-DD`, `YYYY-MM-DD HH:MM`,
/// `YYYY-MM-DD HH:MM:SS` in the local zone, or RFC 3339.
fn parse_time(flag: &str, text: &str, tz: &jiff::tz::TimeZone) -> Result<i64> {
    let t = text.trim();
    let bad = |why: String| {
        Error::Usage(format!(
            "--{flag} {text:?}: {why} (expected YYYY-MM-DD, YYYY-MM-DD HH:MM or \
             YYYY-MM-DD HH:MM:SS in the local time zone, or RFC 3339)"
        ))
    };
    let civil = ["%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"]
        .iter()
        .find_map(|f| {
            jiff::civil::DateTime::strptime(f, t)
                .ok()
                .or_else(|| jiff::civil::Date::strptime(f, t).ok().map(|d| d.into()))
        });
    let ts = match civil {
        Some(dt) => tz
            .to_ambiguous_timestamp(dt)
            .compatible()
            .map_err(|e| bad(e.to_string()))?,
        None => t
            .parse::<jiff::Timestamp>()
            .map_err(|e| bad(e.to_string()))?,
    };
    i64::try_from(ts.as_nanosecond()).map_err(|_| bad("out of range".into()))
}

fn local_time(ns: i64) -> String {
    jiff::Timestamp::from_nanosecond(i128::from(ns))
        .map(|t| {
            t.to_zoned(jiff::tz::TimeZone::system())
                .strftime("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|_| ns.to_string())
}

/// The pack storing the matched blob or tree, by the index (None when it
/// knows none, or its lookup failed: a warning says why).
fn pack_of(repo: &Repository, id: &Id) -> Option<Id> {
    match repo.lookup(id) {
        Ok(loc) => loc.map(|l| l.pack),
        Err(e) => {
            eprintln!(
                "warning: {}",
                safe(&format!("looking up {}: {e}", id.to_hex()))
            );
            None
        }
    }
}

/// `pack`: with --show-pack-id, the repository to look the matched id's
/// pack up in.
/// `human`: the size as KiB, MiB, GiB.
fn print_found(json: bool, human: bool, pack: Option<&Repository>, f: &Found<'_>) {
    let path = String::from_utf8_lossy(f.path);
    let pack_id = match (pack, f.hit.matched) {
        (Some(repo), Some(id)) => Some(pack_of(repo, &id)),
        _ => None,
    };
    if json {
        print_json(&MatchLine {
            message_type: "match",
            snapshot: f.snapshot.to_hex(),
            path: path.into_owned(),
            kind: f.hit.kind.word(),
            mode: f.hit.mode,
            size: f.hit.size,
            mtime: jiff::Timestamp::from_nanosecond(i128::from(f.hit.mtime_ns))
                .map(|t| t.to_string())
                .unwrap_or_default(),
            mtime_ns: f.hit.mtime_ns,
            id: f.hit.matched.map(|i| i.to_hex()),
            pack_id: pack_id.map(|p| p.map(|p| p.to_hex())),
        });
        return;
    }
    let id = match (f.hit.matched, pack_id) {
        (Some(i), None) => format!("  ({})", i.short()),
        (Some(i), Some(Some(p))) => format!("  ({} in pack {})", i.short(), p.short()),
        (Some(i), Some(None)) => format!("  ({} in no indexed pack)", i.short()),
        (None, _) => String::new(),
    };
    println!(
        "{}  {:<7} {:>12}  {}  {}{}",
        f.snapshot.short(),
        f.hit.kind.word(),
        super::output::size_text(f.hit.size, human),
        local_time(f.hit.mtime_ns),
        safe(&path),
        id
    );
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    if a.show_pack_id && !(a.blob || a.tree) {
        return Err(Error::Usage(
            "--show-pack-id needs --blob or --tree (the packs of what they match)".into(),
        ));
    }
    let tz = jiff::tz::TimeZone::system();
    let opts = FindOptions {
        patterns: a.patterns,
        mode: if a.blob {
            FindMode::Blobs
        } else if a.tree {
            FindMode::Trees
        } else if a.pack {
            FindMode::Packs
        } else {
            FindMode::Names
        },
        ignore_case: a.ignore_case,
        oldest_ns: a
            .oldest
            .as_deref()
            .map(|t| parse_time("oldest", t, &tz))
            .transpose()?,
        newest_ns: a
            .newest
            .as_deref()
            .map(|t| parse_time("newest", t, &tz))
            .transpose()?,
    };
    // The lock comes before the snapshot is picked (see `lock_for_reading`).
    let (repo, _lock) = g.open_for_reading()?;
    let (snaps, bad) = select(&repo, &a.snapshots, &a.filter.filter())?;
    for e in &bad {
        eprintln!("warning: {}", safe(&e.to_string()));
    }
    let json = g.json;
    let packs = a.show_pack_id.then_some(&repo);
    let human = a.human_readable;
    let stats = find::find(&repo, &snaps, &opts, &mut |f| {
        print_found(json, human, packs, f)
    })?;
    for u in &stats.unreadable {
        eprintln!("warning: {}", safe(u));
    }
    if json {
        print_json(&SummaryLine {
            message_type: "summary",
            stats: &stats,
        });
    } else if !g.quiet {
        eprintln!(
            "{} matches in {} snapshots ({} trees read, {} shared subtrees not read again)",
            stats.matches, stats.snapshots, stats.trees_loaded, stats.trees_reused
        );
    }
    Ok(if stats.unreadable.is_empty() && bad.is_empty() {
        0
    } else {
        1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_restics_formats() {
        let utc = jiff::tz::TimeZone::UTC;
        let day = parse_time("oldest", "2026-01-02", &utc).unwrap();
        assert_eq!(day, 1_767_312_000 * 1_000_000_000);
        let min = parse_time("oldest", "2026-01-02 01:02", &utc).unwrap();
        assert_eq!(min - day, 3_720 * 1_000_000_000);
        let sec = parse_time("oldest", "2026-01-02 01:02:03", &utc).unwrap();
        assert_eq!(sec - min, 3 * 1_000_000_000);
        let rfc = parse_time("newest", "2026-01-02T01:02:03Z", &utc).unwrap();
        assert_eq!(rfc, sec);
        assert!(parse_time("newest", "yesterday", &utc).is_err());
    }
}
