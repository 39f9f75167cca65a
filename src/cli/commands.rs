//! One handler per command: parse → call the library → print.

use super::{Global, new_key};
use crate::archiver::{self, BackupOptions};
use crate::check::{self, CheckOptions};
use crate::diff;
use crate::error::{Error, Result};
use crate::lock::LockGuard;
use crate::repository::{InitOptions, Repository};
use crate::restorer::{self, Overwrite, RestoreOptions};
use crate::snapshot::{self, Filter};
use crate::tree::NodeKind;
use clap::Subcommand;
use serde_json::json;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create a new repository.
    Init {
        /// Protect the first key with this age X25519 recipient instead of a passphrase.
        #[arg(long)]
        recipient: Option<String>,
    },
    /// Manage the keys that open the repository.
    Key {
        #[command(subcommand)]
        cmd: KeyCmd,
    },
    /// Verify the repository's structure (and with --read-data, its data).
    Check {
        /// Decrypt and re-hash every blob.
        #[arg(long)]
        read_data: bool,
        /// Read only this share of the packs, e.g. `10%`.
        #[arg(long, value_name = "N%")]
        read_data_subset: Option<String>,
    },
    /// Repair repository metadata.
    Repair {
        #[command(subcommand)]
        cmd: RepairCmd,
    },
    /// Back up files and directories.
    Backup(BackupArgs),
    /// List snapshots.
    Snapshots {
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Restore a snapshot (or `SNAPSHOT:SUBPATH`) into a directory.
    Restore {
        /// Snapshot id, prefix or `latest`, optionally followed by `:SUBPATH`.
        snapshot: String,
        /// Directory to restore into.
        #[arg(short, long)]
        target: PathBuf,
        /// Restore only paths matching this glob (repeatable).
        #[arg(long)]
        include: Vec<String>,
        /// Skip paths matching this glob (repeatable).
        #[arg(long)]
        exclude: Vec<String>,
        /// Show what would be restored without writing.
        #[arg(long)]
        dry_run: bool,
        /// What to do with files that already exist in the target.
        #[arg(long, value_enum, default_value_t = Overwrite::Never)]
        overwrite: Overwrite,
        /// Restore owners by numeric uid/gid, ignoring recorded names.
        #[arg(long)]
        numeric_owner: bool,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Show what changed between two snapshots.
    Diff {
        first: String,
        second: String,
        /// Also list paths whose metadata alone changed.
        #[arg(long)]
        metadata: bool,
    },
    /// List the files in a snapshot.
    Ls {
        snapshot: String,
        /// Only list below this path.
        path: Option<String>,
        /// Long listing.
        #[arg(short, long)]
        long: bool,
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Print a repository object as JSON (for debugging).
    Cat {
        /// `config`, `snapshot ID` or `tree ID` (or `tree SNAPSHOT[:PATH]`).
        what: String,
        id: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum KeyCmd {
    /// List key files.
    List,
    /// Add a key (new passphrase, or an age recipient).
    Add {
        #[arg(long)]
        new_password_file: Option<PathBuf>,
        #[arg(long)]
        recipient: Option<String>,
    },
    /// Remove a key by id (or unique prefix).
    Remove { id: String },
    /// Replace the key in use with a new passphrase.
    Passwd {
        #[arg(long)]
        new_password_file: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum RepairCmd {
    /// Rebuild `index/` from the pack headers.
    Index,
}

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
    fn filter(&self) -> Filter {
        Filter {
            hosts: self.hosts.clone(),
            tags: self.tags.clone(),
            paths: self.paths.clone(),
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct BackupArgs {
    /// Files and directories to back up.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Exclude paths matching this glob (repeatable).
    #[arg(short, long)]
    pub exclude: Vec<String>,
    /// Read exclude globs from this file, one per line (repeatable).
    #[arg(long)]
    pub exclude_file: Vec<PathBuf>,
    /// Exclude directories containing a file with this name (repeatable).
    #[arg(long)]
    pub exclude_if_present: Vec<String>,
    /// Exclude directories holding a valid CACHEDIR.TAG.
    #[arg(long)]
    pub exclude_caches: bool,
    /// Do not cross filesystem boundaries.
    #[arg(short = 'x', long)]
    pub one_file_system: bool,
    /// Tag the snapshot (repeatable).
    #[arg(long)]
    pub tag: Vec<String>,
    /// Record this host name instead of the machine's.
    #[arg(long)]
    pub host: Option<String>,
    /// Read and chunk everything but write nothing.
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// Re-read every file, ignoring the parent snapshot's metadata.
    #[arg(short, long)]
    pub force: bool,
    /// Compare against this snapshot instead of the latest matching one.
    #[arg(long)]
    pub parent: Option<String>,
    /// Record access times too (off by default: they churn trees).
    #[arg(long)]
    pub with_atime: bool,
}

fn print_json(v: &serde_json::Value) {
    println!("{v}");
}

/// Runs one command and returns the exit code.
pub fn run(g: &Global, cmd: Command) -> Result<i32> {
    match cmd {
        Command::Init { recipient } => {
            let backend = g.backend()?;
            let key = new_key(g, recipient.as_deref(), None, true)?;
            let repo = Repository::init(backend, &key, &InitOptions::default(), &g.cache_dir())?;
            let id = repo.config().id;
            if g.json {
                print_json(
                    &json!({"id": id.to_hex(), "repository": g.repo_path()?.display().to_string()}),
                );
            } else if !g.quiet {
                println!(
                    "created larder repository {} at {}",
                    id.short(),
                    g.repo_path()?.display()
                );
                println!("repository id: {id}");
                println!(
                    "Losing your password (or identity) means losing your data: keep it safe."
                );
            }
            Ok(0)
        }
        Command::Key { cmd } => key_cmd(g, cmd),
        Command::Check {
            read_data,
            read_data_subset,
        } => {
            let repo = g.open()?;
            let _lock = LockGuard::acquire(&repo, false)?;
            let subset = match read_data_subset {
                Some(s) => Some(
                    s.trim_end_matches('%')
                        .parse::<f64>()
                        .ok()
                        .filter(|p| *p > 0.0 && *p <= 100.0)
                        .ok_or_else(|| {
                            Error::Usage(format!("invalid --read-data-subset {s:?}; use e.g. 10%"))
                        })?,
                ),
                None => None,
            };
            let rep = check::check(
                &repo,
                &CheckOptions {
                    read_data: read_data || subset.is_some(),
                    subset_percent: subset,
                },
            )?;
            if g.json {
                print_json(&serde_json::to_value(&rep).unwrap_or_default());
            } else {
                for p in &rep.problems {
                    eprintln!("error: {p}");
                }
                if !g.quiet {
                    println!(
                        "checked {} keys, {} index segments, {} packs, {} snapshots, {} trees{}",
                        rep.keys,
                        rep.index_segments,
                        rep.packs,
                        rep.snapshots,
                        rep.trees,
                        if rep.packs_read > 0 {
                            format!("; read {} packs, {} blobs", rep.packs_read, rep.blobs_read)
                        } else {
                            String::new()
                        }
                    );
                    if rep.ok() {
                        println!("no errors were found");
                    }
                }
            }
            if rep.ok() {
                Ok(0)
            } else {
                Err(Error::Partial(format!(
                    "check found {} problem(s)",
                    rep.problems.len()
                )))
                .or_else(|e: Error| {
                    eprintln!("larder: {e}");
                    Ok(1)
                })
            }
        }
        Command::Repair {
            cmd: RepairCmd::Index,
        } => {
            let repo = g.open()?;
            let _lock = LockGuard::acquire(&repo, false)?;
            let rep = repo.repair_index()?;
            for p in &rep.problems {
                eprintln!("warning: {p}");
            }
            if g.json {
                print_json(&serde_json::to_value(&rep).unwrap_or_default());
            } else if !g.quiet {
                println!(
                    "rebuilt index from {} packs ({} blobs)",
                    rep.packs, rep.blobs
                );
            }
            Ok(if rep.problems.is_empty() { 0 } else { 1 })
        }
        Command::Backup(a) => backup(g, a),
        Command::Snapshots { filter } => {
            let repo = g.open()?;
            let (list, bad) = snapshot::list(&repo, &filter.filter())?;
            for e in &bad {
                eprintln!("warning: {e}");
            }
            if g.json {
                let arr: Vec<_> = list
                    .iter()
                    .map(|(id, s)| {
                        json!({
                            "id": id.to_hex(), "short_id": id.short(), "time": s.time_rfc3339(),
                            "hostname": s.hostname, "username": s.username, "paths": s.paths,
                            "tags": s.tags, "tree": s.tree.to_hex(),
                            "parent": s.parent.map(|p| p.to_hex()),
                            "program_version": s.program_version,
                            "summary": s.summary,
                        })
                    })
                    .collect();
                print_json(&serde_json::Value::Array(arr));
            } else {
                println!(
                    "{:<10} {:<20} {:<16} {:<16} paths",
                    "ID", "Time", "Host", "Tags"
                );
                println!("{}", "-".repeat(78));
                for (id, s) in &list {
                    println!(
                        "{:<10} {:<20} {:<16} {:<16} {}",
                        id.short(),
                        s.time_local(),
                        s.hostname,
                        s.tags.join(","),
                        s.paths.join(" ")
                    );
                }
                println!("{}", "-".repeat(78));
                println!("{} snapshots", list.len());
            }
            Ok(0)
        }
        Command::Restore {
            snapshot,
            target,
            include,
            exclude,
            dry_run,
            overwrite,
            numeric_owner,
            filter,
        } => {
            let repo = g.open()?;
            let _lock = LockGuard::acquire(&repo, false)?;
            let (reference, sub) = match snapshot.split_once(':') {
                Some((r, s)) => (r.to_string(), Some(s.to_string())),
                None => (snapshot.clone(), None),
            };
            let (sid, snap) = snapshot::resolve(&repo, &reference, &filter.filter())?;
            let opts = RestoreOptions {
                target: target.clone(),
                include,
                exclude,
                dry_run,
                overwrite,
                numeric_owner,
            };
            let rep = restorer::restore(&repo, &snap, sub.as_deref(), &opts)?;
            for s in &rep.skipped {
                eprintln!("skipped: {s}");
            }
            for e in &rep.errors {
                eprintln!("error: {e}");
            }
            if g.json {
                print_json(&json!({
                    "snapshot_id": sid.to_hex(), "files_restored": rep.files, "dirs_restored": rep.dirs,
                    "bytes_restored": rep.bytes, "skipped": rep.skipped.len(), "errors": rep.errors,
                    "dry_run": dry_run,
                }));
            } else if !g.quiet {
                println!(
                    "{} snapshot {} to {}: {} files, {} dirs, {} bytes{}",
                    if dry_run { "would restore" } else { "restored" },
                    sid.short(),
                    target.display(),
                    rep.files,
                    rep.dirs,
                    rep.bytes,
                    if rep.skipped.is_empty() {
                        String::new()
                    } else {
                        format!(", {} skipped", rep.skipped.len())
                    }
                );
            }
            Ok(if rep.errors.is_empty() { 0 } else { 1 })
        }
        Command::Diff {
            first,
            second,
            metadata,
        } => {
            let repo = g.open()?;
            let (a_id, a) = snapshot::resolve(&repo, &first, &Filter::default())?;
            let (b_id, b) = snapshot::resolve(&repo, &second, &Filter::default())?;
            let json = g.json;
            if !json && !g.quiet {
                println!("comparing snapshot {} to {}:\n", a_id.short(), b_id.short());
            }
            let stats = diff::diff(
                &repo,
                a.tree,
                b.tree,
                metadata,
                &mut |e: &diff::DiffEntry| {
                    if json {
                        print_json(
                            &json!({"message_type": "change", "path": e.path, "modifier": e.modifier.to_string(), "changes": e.changes}),
                        );
                    } else if e.changes.is_empty() {
                        println!("{:<5}{}", e.modifier, e.path);
                    } else {
                        println!("{:<5}{} ({})", e.modifier, e.path, e.changes.join(", "));
                    }
                },
            )?;
            if json {
                let mut v = serde_json::to_value(&stats).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.insert("message_type".into(), json!("statistics"));
                    o.insert("source_snapshot".into(), json!(a_id.to_hex()));
                    o.insert("target_snapshot".into(), json!(b_id.to_hex()));
                }
                print_json(&v);
            } else if !g.quiet {
                println!();
                println!(
                    "Files:       {:>6} new, {:>6} removed, {:>6} changed",
                    stats.files_added, stats.files_removed, stats.files_changed
                );
                println!(
                    "Dirs:        {:>6} new, {:>6} removed",
                    stats.dirs_added, stats.dirs_removed
                );
                println!(
                    "Others:      {:>6} new, {:>6} removed",
                    stats.others_added, stats.others_removed
                );
                if metadata {
                    println!("Metadata:    {:>6} changed", stats.metadata_changed);
                }
                println!(
                    "Data Blobs:  {:>6} new, {:>6} removed",
                    stats.blobs_added, stats.blobs_removed
                );
                println!("Added:   {} bytes", stats.bytes_added);
                println!("Removed: {} bytes", stats.bytes_removed);
            }
            Ok(0)
        }
        Command::Ls {
            snapshot,
            path,
            long,
            filter,
        } => {
            let repo = g.open()?;
            let (sid, snap) = snapshot::resolve(&repo, &snapshot, &filter.filter())?;
            if g.json {
                print_json(
                    &json!({"message_type": "snapshot", "id": sid.to_hex(), "time": snap.time_rfc3339(), "paths": snap.paths, "tree": snap.tree.to_hex()}),
                );
            } else if !g.quiet {
                println!(
                    "snapshot {} of {:?} at {}:",
                    sid.short(),
                    snap.paths,
                    snap.time_local()
                );
            }
            let json = g.json;
            diff::walk(
                &repo,
                snap.tree,
                path.as_deref(),
                &mut |p: &str, n: &crate::tree::Node| {
                    if json {
                        print_json(&json!({
                            "message_type": "node", "path": p, "name": n.name_lossy(), "type": n.kind.word(),
                            "mode": n.mode, "uid": n.uid, "gid": n.gid, "user": n.user, "group": n.group,
                            "size": n.size, "mtime_ns": n.mtime_ns, "links": n.links,
                            "link_target": (n.kind == NodeKind::Symlink).then(|| String::from_utf8_lossy(&n.link_target).into_owned()),
                        }));
                    } else if long {
                        let t = jiff::Timestamp::from_nanosecond(n.mtime_ns as i128)
                            .map(|t| {
                                t.to_zoned(jiff::tz::TimeZone::system())
                                    .strftime("%Y-%m-%d %H:%M:%S")
                                    .to_string()
                            })
                            .unwrap_or_default();
                        let target = if n.kind == NodeKind::Symlink {
                            format!(" -> {}", String::from_utf8_lossy(&n.link_target))
                        } else {
                            String::new()
                        };
                        println!(
                            "{}{} {:>8} {:>8} {:>12} {} {}{}",
                            n.kind.letter(),
                            mode_string(n.mode),
                            if n.user.is_empty() {
                                n.uid.to_string()
                            } else {
                                n.user.clone()
                            },
                            if n.group.is_empty() {
                                n.gid.to_string()
                            } else {
                                n.group.clone()
                            },
                            n.size,
                            t,
                            p,
                            target
                        );
                    } else {
                        println!("{p}");
                    }
                },
            )?;
            Ok(0)
        }
        Command::Cat { what, id } => cat(g, &what, id.as_deref()),
    }
}

fn mode_string(mode: u32) -> String {
    let mut s = String::with_capacity(9);
    let bits = [
        (0o400, 'r'),
        (0o200, 'w'),
        (0o100, 'x'),
        (0o040, 'r'),
        (0o020, 'w'),
        (0o010, 'x'),
        (0o004, 'r'),
        (0o002, 'w'),
        (0o001, 'x'),
    ];
    for (b, c) in bits {
        s.push(if mode & b != 0 { c } else { '-' });
    }
    s
}

fn key_cmd(g: &Global, cmd: KeyCmd) -> Result<i32> {
    let repo = g.open()?;
    match cmd {
        KeyCmd::List => {
            let keys = crate::keys::list_keys(repo.backend())?;
            let cur = repo.key_id().to_hex();
            if g.json {
                let arr: Vec<_> = keys
                    .iter()
                    .map(|k| {
                        let mut v = serde_json::to_value(k).unwrap_or_default();
                        if let Some(o) = v.as_object_mut() {
                            o.insert("current".into(), json!(k.id == cur));
                        }
                        v
                    })
                    .collect();
                print_json(&serde_json::Value::Array(arr));
            } else {
                println!(
                    " {:<10} {:<11} {:<12} {:<16} created",
                    "ID", "Kind", "User", "Host"
                );
                for k in keys {
                    println!(
                        "{}{:<10} {:<11} {:<12} {:<16} {}",
                        if k.id == cur { "*" } else { " " },
                        &k.id[..8],
                        format!("{:?}", k.kind).to_lowercase(),
                        k.username,
                        k.hostname,
                        jiff::Timestamp::from_second(k.created)
                            .map(|t| t.to_string())
                            .unwrap_or_default()
                    );
                }
            }
        }
        KeyCmd::Add {
            new_password_file,
            recipient,
        } => {
            let key = new_key(g, recipient.as_deref(), new_password_file.as_deref(), false)?;
            let id = repo.add_key(&key)?;
            if g.json {
                print_json(&json!({"id": id.to_hex()}));
            } else if !g.quiet {
                println!("saved new key as {id}");
            }
        }
        KeyCmd::Remove { id } => {
            repo.remove_key(&id)?;
            if !g.quiet {
                println!("removed key {id}");
            }
        }
        KeyCmd::Passwd { new_password_file } => {
            let key = new_key(g, None, new_password_file.as_deref(), false)?;
            let id = repo.change_key(&key)?;
            if !g.quiet {
                println!(
                    "saved new key as {id}; removed the old key {}",
                    repo.key_id()
                );
            }
        }
    }
    Ok(0)
}

fn cat(g: &Global, what: &str, id: Option<&str>) -> Result<i32> {
    let repo = g.open()?;
    let need = || id.ok_or_else(|| Error::Usage(format!("`cat {what}` needs an id")));
    let v = match what {
        "config" => serde_json::to_value(repo.config()),
        "snapshot" => {
            let (_, s) = snapshot::resolve(&repo, need()?, &Filter::default())?;
            serde_json::to_value(&s)
        }
        "tree" => {
            let arg = need()?;
            let tid = match crate::Id::from_hex(arg) {
                Ok(t) => t,
                Err(_) => {
                    let (r, sub) = arg.split_once(':').unwrap_or((arg, ""));
                    let (_, s) = snapshot::resolve(&repo, r, &Filter::default())?;
                    diff::tree_at(&repo, s.tree, sub)?
                }
            };
            let t = diff::load_tree(&repo, &tid)?;
            serde_json::to_value(&t)
        }
        other => {
            return Err(Error::Usage(format!(
                "cannot cat {other:?}: use config, snapshot or tree"
            )));
        }
    }
    .map_err(|e| Error::Usage(format!("cannot print JSON: {e}")))?;
    println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    Ok(0)
}

fn backup(g: &Global, a: BackupArgs) -> Result<i32> {
    let repo = g.open()?;
    let _lock = if a.dry_run {
        None
    } else {
        Some(LockGuard::acquire(&repo, false)?)
    };
    let mut excludes = a.exclude.clone();
    for f in &a.exclude_file {
        let text = std::fs::read_to_string(f).map_err(|e| Error::io(f, e))?;
        excludes.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from),
        );
    }
    let opts = BackupOptions {
        paths: a.paths.clone(),
        excludes,
        exclude_if_present: a.exclude_if_present.clone(),
        exclude_caches: a.exclude_caches,
        one_file_system: a.one_file_system,
        tags: a.tag.clone(),
        host: a.host.clone(),
        dry_run: a.dry_run,
        force: a.force,
        parent: a.parent.clone(),
        with_atime: a.with_atime,
    };
    let show_progress = !g.quiet && !g.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let progress = archiver::TermProgress::new(show_progress);
    let res = archiver::backup(&repo, &opts, &progress)?;
    progress.finish();
    for w in &res.warnings {
        eprintln!("warning: {w}");
    }
    let s = &res.summary;
    if g.json {
        print_json(&json!({
            "message_type": "summary",
            "snapshot_id": res.snapshot_id.map(|i| i.to_hex()),
            "parent": res.parent.map(|i| i.to_hex()),
            "files_new": s.files_new, "files_changed": s.files_changed, "files_unmodified": s.files_unmodified,
            "dirs_new": s.dirs_new, "dirs_changed": s.dirs_changed, "dirs_unmodified": s.dirs_unmodified,
            "data_added": s.data_added, "data_added_plain": s.data_added_plain,
            "total_files_processed": s.total_files, "total_bytes_processed": s.total_bytes,
            "bytes_read": s.bytes_read,
            "total_duration": s.duration_ms as f64 / 1000.0,
            "errors": res.warnings.len(),
            "dry_run": a.dry_run,
        }));
    } else if !g.quiet {
        println!(
            "Files:       {:>6} new, {:>6} changed, {:>6} unmodified",
            s.files_new, s.files_changed, s.files_unmodified
        );
        println!(
            "Dirs:        {:>6} new, {:>6} changed, {:>6} unmodified",
            s.dirs_new, s.dirs_changed, s.dirs_unmodified
        );
        println!(
            "Added to the repository: {} bytes ({} bytes before compression)",
            s.data_added, s.data_added_plain
        );
        println!(
            "processed {} files, {} bytes in {:.3}s",
            s.total_files,
            s.total_bytes,
            s.duration_ms as f64 / 1000.0
        );
        match res.snapshot_id {
            Some(id) => println!("snapshot {} saved", id.short()),
            None => println!("dry run: no snapshot saved"),
        }
    }
    if res.warnings.is_empty() {
        Ok(0)
    } else {
        eprintln!(
            "larder: {} file(s) could not be read completely; the snapshot is partial",
            res.warnings.len()
        );
        Ok(3)
    }
}
