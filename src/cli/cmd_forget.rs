//! `larder forget`: remove snapshots by a retention policy or by name,
//! with restic's flags, tables and `--json` shape.

use super::Global;
use super::filter::{FilterArgs, group_by, group_heading};
use super::output::{print_json, safe};
use crate::error::Result;
use crate::maintenance::forget::{ForgetOptions, ForgetReport, ForgetSnapshot, forget};
use crate::retention::{Count, Duration, ForgetGroup, GroupBy, KeepReason, Policy, TagList};

/// Remove snapshots, by a policy or by name. Only the snapshot objects are
/// removed; the data they reference stays in the repository.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    larder forget --keep-daily 7 --keep-weekly 4 --keep-monthly 12 --dry-run\n  \
    larder forget --keep-within 30d --keep-tag important --host laptop\n  \
    larder forget 1a2b3c4d latest\n  \
    larder forget --keep-daily 7 --keep-weekly 4 --prune\n  \
    larder forget --unsafe-allow-remove-all --tag scratch   # every snapshot tagged scratch")]
pub struct Args {
    /// Snapshots to remove: ids, unique prefixes (4+ hex digits) or
    /// `latest`. When given, exactly these are removed and the --keep-*
    /// options are not applied (as restic).
    #[arg(value_name = "SNAPSHOT")]
    snapshots: Vec<String>,
    /// Keep the last N snapshots (N, or -1 / 'unlimited').
    #[arg(short = 'l', long, value_name = "N", allow_negative_numbers = true, value_parser = count)]
    keep_last: Option<Count>,
    /// Keep the newest snapshot of each of the last N hours with snapshots.
    #[arg(short = 'H', long, value_name = "N", allow_negative_numbers = true, value_parser = count)]
    keep_hourly: Option<Count>,
    /// Keep the newest snapshot of each of the last N days with snapshots.
    #[arg(short = 'd', long, value_name = "N", allow_negative_numbers = true, value_parser = count)]
    keep_daily: Option<Count>,
    /// Keep the newest snapshot of each of the last N ISO weeks with snapshots.
    #[arg(short = 'w', long, value_name = "N", allow_negative_numbers = true, value_parser = count)]
    keep_weekly: Option<Count>,
    /// Keep the newest snapshot of each of the last N months with snapshots.
    #[arg(short = 'm', long, value_name = "N", allow_negative_numbers = true, value_parser = count)]
    keep_monthly: Option<Count>,
    /// Keep the newest snapshot of each of the last N years with snapshots.
    #[arg(short = 'y', long, value_name = "N", allow_negative_numbers = true, value_parser = count)]
    keep_yearly: Option<Count>,
    /// Keep every snapshot within DURATION (e.g. 1y2m3d4h) of the newest.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    keep_within: Option<Duration>,
    /// Keep hourly snapshots within DURATION of the newest.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    keep_within_hourly: Option<Duration>,
    /// Keep daily snapshots within DURATION of the newest.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    keep_within_daily: Option<Duration>,
    /// Keep weekly snapshots within DURATION of the newest.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    keep_within_weekly: Option<Duration>,
    /// Keep monthly snapshots within DURATION of the newest.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    keep_within_monthly: Option<Duration>,
    /// Keep yearly snapshots within DURATION of the newest.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    keep_within_yearly: Option<Duration>,
    /// Keep snapshots having all these comma-separated tags (repeatable;
    /// '' keeps untagged snapshots).
    #[arg(long, value_name = "TAGLIST", value_parser = tag_list)]
    keep_tag: Vec<TagList>,
    /// Apply the policy to each group of snapshots with the same host,
    /// paths and/or tags ('' for one group of all).
    #[arg(short = 'g', long, value_name = "GROUP", default_value = "host,paths", value_parser = group_by)]
    group_by: GroupBy,
    #[command(flatten)]
    filter: FilterArgs,
    /// Without --keep-* options, remove every snapshot the filters
    /// (--host, --tag, --path; at least one) select, as restic's flag.
    #[arg(long)]
    unsafe_allow_remove_all: bool,
    /// Show what would be removed; remove nothing.
    #[arg(short = 'n', long)]
    dry_run: bool,
    /// Run `prune` afterwards (with the flags below), so the space of what
    /// was removed comes back once nothing can need it.
    #[arg(long)]
    prune: bool,
    #[command(flatten, next_help_heading = "Prune (with --prune)")]
    prune_flags: super::cmd_prune::PruneFlags,
}

fn count(s: &str) -> std::result::Result<Count, String> {
    Count::parse(s).map_err(|e| e.to_string())
}

fn duration(s: &str) -> std::result::Result<Duration, String> {
    Duration::parse(s).map_err(|e| e.to_string())
}

fn tag_list(s: &str) -> std::result::Result<TagList, String> {
    Ok(TagList::parse(s))
}

impl Args {
    fn policy(&self) -> Policy {
        Policy {
            last: self.keep_last.unwrap_or_default(),
            hourly: self.keep_hourly.unwrap_or_default(),
            daily: self.keep_daily.unwrap_or_default(),
            weekly: self.keep_weekly.unwrap_or_default(),
            monthly: self.keep_monthly.unwrap_or_default(),
            yearly: self.keep_yearly.unwrap_or_default(),
            within: self.keep_within.unwrap_or_default(),
            within_hourly: self.keep_within_hourly.unwrap_or_default(),
            within_daily: self.keep_within_daily.unwrap_or_default(),
            within_weekly: self.keep_within_weekly.unwrap_or_default(),
            within_monthly: self.keep_within_monthly.unwrap_or_default(),
            within_yearly: self.keep_within_yearly.unwrap_or_default(),
            tags: self.keep_tag.clone(),
        }
    }
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let prune_opts = if a.prune {
        Some(a.prune_flags.options(a.dry_run)?)
    } else {
        None
    };
    crate::interrupt::install_handlers()?;
    let repo = g.open()?;
    let opts = ForgetOptions {
        snapshots: a.snapshots.clone(),
        policy: a.policy(),
        group_by: a.group_by,
        filter: a.filter.filter(),
        dry_run: a.dry_run,
        remove_all: a.unsafe_allow_remove_all,
        ..ForgetOptions::default()
    };
    let report = forget(&repo, &opts)?;
    for n in &report.notices {
        eprintln!("note: {}", safe(n));
    }
    for p in &report.problems {
        eprintln!("warning: {}", safe(p));
    }
    if g.json {
        print_json(&report.groups);
    } else if !g.quiet {
        print_human(&report);
    }
    if let Some(opts) = prune_opts {
        let pruned = super::cmd_prune::run_prune(g, &repo, &opts)?;
        super::cmd_prune::show(g, &pruned);
    }
    if report.problems.is_empty() {
        Ok(0)
    } else {
        eprintln!(
            "larder: forget finished with {} problem(s); nothing named in them was removed",
            report.problems.len()
        );
        Ok(3)
    }
}

fn print_human(report: &ForgetReport) {
    if let Some(p) = &report.policy {
        println!("Applying policy: {p}");
    }
    for group in &report.groups {
        print_group(group);
    }
    for id in &report.removed_unreadable {
        let verb = if report.dry_run {
            "would remove"
        } else {
            "removed"
        };
        println!("{verb} unreadable snapshot object {id}");
    }
    let n = report.removed.len();
    if report.dry_run {
        println!("dry run: would remove {n} snapshots; nothing was removed");
    } else {
        println!("removed {n} snapshots");
    }
}

/// One group: restic's header (none without a key), then the kept
/// snapshots with their reasons and the removed ones.
fn print_group(group: &ForgetGroup<ForgetSnapshot>) {
    if let Some(heading) = group_heading(&group.host, group.tags.as_deref(), group.paths.as_deref())
    {
        println!("{heading}");
    }
    if !group.keep.is_empty() {
        println!("keep {} snapshots:", group.keep.len());
        print_table(&group.keep, Some(&group.reasons));
        println!();
    }
    if !group.remove.is_empty() {
        println!("remove {} snapshots:", group.remove.len());
        print_table(&group.remove, None);
        println!();
    }
}

/// A table of snapshots as restic prints it: one row per snapshot, tags
/// joined by commas, reasons and paths one per line.
fn print_table(list: &[ForgetSnapshot], reasons: Option<&[KeepReason<ForgetSnapshot>]>) {
    let mut head = vec!["ID", "Time", "Host", "Tags"];
    if reasons.is_some() {
        head.push("Reasons");
    }
    head.push("Paths");
    let rows: Vec<Vec<Vec<String>>> = list
        .iter()
        .map(|s| {
            let j = &s.json;
            let mut row = vec![
                vec![j.short_id.clone()],
                vec![s.local_time.clone()],
                vec![safe(&j.hostname).into_owned()],
                vec![safe(&j.tags.join(",")).into_owned()],
            ];
            if let Some(reasons) = reasons {
                let matches = reasons
                    .iter()
                    .find(|r| r.snapshot.json.id == j.id)
                    .map(|r| r.matches.iter().map(|m| safe(m).into_owned()).collect())
                    .unwrap_or_default();
                row.push(matches);
            }
            row.push(j.paths.iter().map(|p| safe(p).into_owned()).collect());
            row
        })
        .collect();
    for line in table_lines(&head, &rows) {
        println!("{line}");
    }
    println!("{} snapshots", list.len());
}

/// Lays out `rows` (each cell a list of lines) under `head`, columns two
/// spaces apart, between rules of dashes.
fn table_lines(head: &[&str], rows: &[Vec<Vec<String>>]) -> Vec<String> {
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            for line in cell {
                *w = (*w).max(line.chars().count());
            }
        }
    }
    let render = |cells: Vec<&str>| -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let rule = "-".repeat(widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1));
    let mut out = vec![render(head.to_vec()), rule.clone()];
    for row in rows {
        let height = row.iter().map(Vec::len).max().unwrap_or(0).max(1);
        for i in 0..height {
            out.push(render(
                row.iter()
                    .map(|cell| cell.get(i).map_or("", String::as_str))
                    .collect(),
            ));
        }
    }
    out.push(rule);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns_and_stack_multi_line_cells() {
        let cell = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let rows = vec![
            vec![
                cell(&["1a2b3c4d"]),
                cell(&["daily snapshot", "weekly snapshot"]),
                cell(&["/srv"]),
            ],
            vec![cell(&["5e6f7a8b"]), cell(&[]), cell(&["/etc", "/home"])],
        ];
        let lines = table_lines(&["ID", "Reasons", "Paths"], &rows);
        assert_eq!(
            lines,
            vec![
                "ID        Reasons          Paths",
                "--------------------------------",
                "1a2b3c4d  daily snapshot   /srv",
                "          weekly snapshot",
                "5e6f7a8b                   /etc",
                "                           /home",
                "--------------------------------",
            ]
        );
    }
}
