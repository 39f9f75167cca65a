//! Reading `larder.toml`: parse (unknown keys refused), resolve `inherit`
//! chains (one parent each, cycles refused), validate every value, and
//! check that credential files are private. Every error names the file and
//! the line of the offending key (`larder.toml:12: unknown key ...`).

use super::build::Ctx;
use super::paths::Env;
use super::profile::{Origin, Profile};
use super::raw::{RawFile, RawProfile, line_of, suggest};
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every profile of one configuration file.
#[derive(Clone, Debug)]
pub struct Config {
    pub file: PathBuf,
    pub profiles: BTreeMap<String, Profile>,
}

impl Config {
    /// Reads, validates and checks the file (including the permissions of
    /// credential files).
    pub fn load(file: &Path, env: &Env) -> Result<Config> {
        let cfg = Config::load_unchecked(file, env)?;
        cfg.check_credential_files()?;
        Ok(cfg)
    }

    /// Reads and validates the file without looking at credential files
    /// (for `status`, which opens no repository).
    pub fn load_unchecked(file: &Path, env: &Env) -> Result<Config> {
        let text = std::fs::read_to_string(file).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::Usage(format!(
                    "{}: no configuration file there (give --config FILE or set LARDER_CONFIG)",
                    file.display()
                ))
            } else {
                Error::io(file, e)
            }
        })?;
        Config::parse(&text, file, env)
    }

    /// Parses and validates `text` as the content of `file`.
    pub fn parse(text: &str, file: &Path, env: &Env) -> Result<Config> {
        let ctx = Ctx { file, text, env };
        let raw: RawFile = toml::from_str(text).map_err(|e| Error::Usage(toml_error(&ctx, &e)))?;
        let tables: BTreeMap<String, (usize, RawProfile)> = raw
            .profile
            .into_iter()
            .map(|(k, v)| {
                let pos = k.span().start;
                (k.into_inner(), (pos, v.into_inner()))
            })
            .collect();
        let mut errors: Vec<String> = Vec::new();
        let mut profiles = BTreeMap::new();
        for (name, (header, _)) in &tables {
            let built = resolve(&ctx, &tables, name)
                .map_err(|e| vec![e])
                .and_then(|raw| build(&ctx, name, *header, &raw));
            match built {
                Ok(p) => {
                    profiles.insert(name.clone(), p);
                }
                Err(es) => errors.extend(es),
            }
        }
        if !errors.is_empty() {
            errors.dedup();
            return Err(Error::Usage(errors.join("\n")));
        }
        Ok(Config {
            file: file.to_path_buf(),
            profiles,
        })
    }

    /// The profile called `name`, or an error listing the known ones.
    pub fn profile(&self, name: &str) -> Result<&Profile> {
        self.profiles.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.profiles.keys().map(String::as_str).collect();
            Error::Usage(format!(
                "{}: no profile {name:?} (profiles: {})",
                self.file.display(),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ))
        })
    }

    /// Refuses a credential file that is missing, not a regular file, or
    /// accessible to group or others (as ssh refuses such a private key).
    pub fn check_credential_files(&self) -> Result<()> {
        for p in self.profiles.values() {
            super::credentials::check(p)?;
        }
        Ok(())
    }
}

/// A toml error as `FILE:LINE: MESSAGE`, with unknown keys named plainly.
fn toml_error(ctx: &Ctx, e: &toml::de::Error) -> String {
    let msg = e.message().trim();
    let msg = match msg
        .strip_prefix("unknown field `")
        .and_then(|r| r.split_once('`'))
    {
        Some((key, _)) => match suggest(key) {
            Some(s) => format!("unknown key `{key}` (did you mean `{s}`?)"),
            None => format!("unknown key `{key}`"),
        },
        None => msg.to_string(),
    };
    match e.span() {
        Some(span) => ctx.at(span.start, msg),
        None => format!("{}: {msg}", ctx.file.display()),
    }
}

/// The profile `name` with its ancestors' keys filled in.
fn resolve(
    ctx: &Ctx,
    tables: &BTreeMap<String, (usize, RawProfile)>,
    name: &str,
) -> std::result::Result<RawProfile, String> {
    let mut chain: Vec<&str> = vec![name];
    let mut current = &tables[name].1;
    let mut lineage: Vec<&RawProfile> = vec![current];
    while let Some(parent) = &current.inherit {
        let pname = parent.get_ref().as_str();
        let at = parent.span().start;
        if chain.contains(&pname) {
            chain.push(pname);
            return Err(ctx.at(at, format!("inheritance cycle: {}", chain.join(" -> "))));
        }
        current = match tables.get(pname) {
            Some((_, t)) => t,
            None => {
                return Err(ctx.at(
                    at,
                    format!(
                        "profile {}: inherits from {pname:?}, which is not defined",
                        chain[chain.len() - 1]
                    ),
                ));
            }
        };
        chain.push(pname);
        lineage.push(current);
    }
    let mut merged = RawProfile::default();
    for p in lineage.iter().rev() {
        merged = (*p).clone().over(&merged);
    }
    Ok(merged)
}

/// Validates a merged profile table into a [`Profile`].
fn build(
    ctx: &Ctx,
    name: &str,
    header: usize,
    raw: &RawProfile,
) -> std::result::Result<Profile, Vec<String>> {
    let origin = Origin {
        file: ctx.file.to_path_buf(),
        header_line: line_of(ctx.text, header),
        key_lines: raw
            .spans()
            .into_iter()
            .map(|(k, pos)| (k, line_of(ctx.text, pos)))
            .collect(),
    };
    let mut b = super::build::Builder::new(ctx, name, header);
    if let Err(m) = super::values::profile_name(name) {
        b.fail(header, m);
    }
    let p = b.profile(raw, origin);
    match p {
        Some(p) if b.errors.is_empty() => Ok(p),
        _ => Err(b.errors),
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
