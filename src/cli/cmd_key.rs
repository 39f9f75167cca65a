//! `larder key list|add|remove|passwd`: manage the key files that open the
//! repository.

use super::Global;
use super::global::new_key;
use super::output::{print_json, safe};
use crate::error::Result;
use crate::keys::{KeyInfo, UnreadableKey};
use crate::repository::Repository;
use serde::Serialize;
use std::path::PathBuf;

/// Manage the keys that open the repository.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  larder key list\n  larder key add --new-password-file ~/.config/larder/second\n  larder key remove 1a2b3c4d"
)]
pub struct Args {
    #[command(subcommand)]
    cmd: KeyCmd,
}

#[derive(clap::Subcommand, Debug)]
enum KeyCmd {
    /// List key files.
    #[command(after_help = "Example:\n  larder key list")]
    List,
    /// Add a key (new passphrase, or an age recipient).
    #[command(
        after_help = "Examples:\n  larder key add --new-password-file ~/.config/larder/second --host nas --user backup\n  \
        larder key add --recipient age1..."
    )]
    Add {
        /// Read the new key's passphrase from this file (its first line)
        /// instead of asking for it twice.
        #[arg(long, value_name = "FILE", conflicts_with = "recipient")]
        new_password_file: Option<PathBuf>,
        /// Add a key that an age identity opens (`age1…`, as `age-keygen`
        /// prints it) instead of a passphrase: for unattended runs with
        /// `--identity`.
        #[arg(long, value_name = "AGE_RECIPIENT")]
        recipient: Option<String>,
        #[command(flatten)]
        label: LabelArgs,
    },
    /// Remove a key by id (or unique prefix).
    #[command(after_help = "Example:\n  larder key remove 1a2b3c4d")]
    Remove {
        /// The key's id, or a unique prefix of it (as `key list` shows).
        id: String,
    },
    /// Replace the key in use with a new passphrase.
    #[command(after_help = "Example:\n  larder key passwd")]
    Passwd {
        /// Read the new passphrase from this file (its first line) instead
        /// of asking for it twice.
        #[arg(long, value_name = "FILE")]
        new_password_file: Option<PathBuf>,
        #[command(flatten)]
        label: LabelArgs,
    },
}

/// restic's `key add/passwd --host/--user`: who `key list` says made the
/// new key.
#[derive(clap::Args, Debug)]
struct LabelArgs {
    /// The host name the new key records (this machine's by default).
    #[arg(long = "host", value_name = "HOST")]
    key_host: Option<String>,
    /// The user name the new key records (yours by default).
    #[arg(long = "user", value_name = "USER")]
    key_user: Option<String>,
}

impl LabelArgs {
    fn label(&self) -> Result<crate::keys::KeyLabel> {
        crate::keys::KeyLabel::given(self.key_host.as_deref(), self.key_user.as_deref())
    }
}

/// A key as `key list --json` shows it: its header, or why it is unreadable.
#[derive(Serialize)]
#[serde(untagged)]
enum KeyLine<'a> {
    Key {
        #[serde(flatten)]
        key: &'a KeyInfo,
        current: bool,
    },
    Unreadable(&'a UnreadableKey),
}

/// The id of a key added.
#[derive(Serialize)]
struct Added {
    id: String,
}

pub fn run(g: &Global, a: Args) -> Result<i32> {
    let repo = g.open()?;
    match a.cmd {
        KeyCmd::List => list(g, &repo)?,
        KeyCmd::Add {
            new_password_file,
            recipient,
            label,
        } => {
            let label = label.label()?;
            let key = new_key(g, recipient.as_deref(), new_password_file.as_deref(), false)?;
            let id = repo.add_key_as(&key, &label)?;
            if g.json {
                print_json(&Added { id: id.to_hex() });
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
        KeyCmd::Passwd {
            new_password_file,
            label,
        } => {
            let label = label.label()?;
            let key = new_key(g, None, new_password_file.as_deref(), false)?;
            let id = repo.change_key_as(&key, &label)?;
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

/// The first 8 characters of a key file name (all of a shorter one).
fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

fn list(g: &Global, repo: &Repository) -> Result<()> {
    let list = crate::keys::list_keys(repo.backend())?;
    let cur = repo.key_id().to_hex();
    if g.json {
        let arr: Vec<_> = list
            .keys
            .iter()
            .map(|k| KeyLine::Key {
                key: k,
                current: k.id == cur,
            })
            .chain(list.unreadable.iter().map(KeyLine::Unreadable))
            .collect();
        print_json(&arr);
        return Ok(());
    }
    println!(
        " {:<10} {:<11} {:<12} {:<16} created",
        "ID", "Kind", "User", "Host"
    );
    for k in &list.keys {
        println!(
            "{}{:<10} {:<11} {:<12} {:<16} {}",
            if k.id == cur { "*" } else { " " },
            short(&k.id),
            k.kind.label().to_lowercase(),
            safe(&k.username),
            safe(&k.hostname),
            jiff::Timestamp::from_second(k.created)
                .map(|t| t.to_string())
                .unwrap_or_default()
        );
    }
    for u in &list.unreadable {
        println!(" {:<10} unreadable: {}", short(&u.id), u.error);
    }
    Ok(())
}
