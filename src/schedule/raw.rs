//! The configuration file as written: one table per profile, every value
//! kept with its byte span (so errors can name the line), unknown keys
//! refused, and the merge that applies `inherit` (a key set in the child
//! replaces the parent's; lists are replaced, not appended).

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// The whole file: `[profile.NAME]` tables.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFile {
    #[serde(default)]
    pub profile: BTreeMap<Spanned<String>, Spanned<RawProfile>>,
}

/// Declares [`RawProfile`], its list of key names, and its merge, from one
/// list of fields, so the three cannot drift apart.
macro_rules! raw_profile {
    ($($field:ident : $ty:ty => $key:literal,)*) => {
        /// One profile table, before inheritance and validation.
        #[derive(Debug, Default, Clone, Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "kebab-case")]
        pub(crate) struct RawProfile {
            $(pub $field: Option<Spanned<$ty>>,)*
        }

        /// Every key a profile accepts, as written in the file.
        pub(crate) const KEYS: &[&str] = &[$($key,)*];

        impl RawProfile {
            /// This profile with every key it leaves unset taken from `parent`.
            pub fn over(mut self, parent: &RawProfile) -> RawProfile {
                $(if self.$field.is_none() {
                    self.$field = parent.$field.clone();
                })*
                self
            }

            /// The byte offset of each key that is set, by key name.
            pub fn spans(&self) -> BTreeMap<&'static str, usize> {
                let mut out = BTreeMap::new();
                $(if let Some(v) = &self.$field {
                    out.insert($key, v.span().start);
                })*
                out
            }
        }
    };
}

raw_profile! {
    inherit: String => "inherit",
    repository: String => "repository",
    password_file: String => "password-file",
    password_command: String => "password-command",
    identity_file: String => "identity-file",
    paths: Vec<String> => "paths",
    exclude: Vec<String> => "exclude",
    exclude_file: Vec<String> => "exclude-file",
    iexclude: Vec<String> => "iexclude",
    iexclude_file: Vec<String> => "iexclude-file",
    exclude_larger_than: String => "exclude-larger-than",
    exclude_if_present: Vec<String> => "exclude-if-present",
    exclude_caches: bool => "exclude-caches",
    one_file_system: bool => "one-file-system",
    tags: Vec<String> => "tags",
    host: String => "host",
    stdin_from_command: Vec<String> => "stdin-from-command",
    stdin_filename: String => "stdin-filename",
    skip_if_unchanged: bool => "skip-if-unchanged",
    ignore_inode: bool => "ignore-inode",
    ignore_ctime: bool => "ignore-ctime",
    read_concurrency: i64 => "read-concurrency",
    compression: String => "compression",
    pack_size: i64 => "pack-size",
    limit_upload: i64 => "limit-upload",
    limit_download: i64 => "limit-download",
    connections: i64 => "connections",
    cacert: Vec<String> => "cacert",
    insecure_tls: bool => "insecure-tls",
    schedule: String => "schedule",
    keep_last: i64 => "keep-last",
    keep_hourly: i64 => "keep-hourly",
    keep_daily: i64 => "keep-daily",
    keep_weekly: i64 => "keep-weekly",
    keep_monthly: i64 => "keep-monthly",
    keep_yearly: i64 => "keep-yearly",
    keep_within: String => "keep-within",
    keep_within_hourly: String => "keep-within-hourly",
    keep_within_daily: String => "keep-within-daily",
    keep_within_weekly: String => "keep-within-weekly",
    keep_within_monthly: String => "keep-within-monthly",
    keep_within_yearly: String => "keep-within-yearly",
    keep_tag: Vec<String> => "keep-tag",
    group_by: String => "group-by",
    prune: String => "prune",
    check: String => "check",
    check_subset: String => "check-subset",
    nice: i64 => "nice",
    ionice: String => "ionice",
    before: String => "before",
    after: String => "after",
    on_success: String => "on-success",
    on_failure: String => "on-failure",
    hook_timeout: String => "hook-timeout",
    retries: i64 => "retries",
    retry_delay: String => "retry-delay",
    retry_max_delay: String => "retry-max-delay",
    prometheus_textfile: String => "prometheus-textfile",
}

/// The 1-based line holding byte offset `pos` of `text`.
pub(crate) fn line_of(text: &str, pos: usize) -> usize {
    let end = pos.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// The known key closest to `unknown`, when it is close enough to be a typo.
pub(crate) fn suggest(unknown: &str) -> Option<&'static str> {
    KEYS.iter()
        .map(|k| (edit_distance(unknown, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min()
        .map(|(_, k)| k)
}

/// Levenshtein distance between two short strings.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_count_from_one() {
        let text = "a\nbb\nccc";
        assert_eq!(line_of(text, 0), 1);
        assert_eq!(line_of(text, 2), 2);
        assert_eq!(line_of(text, 5), 3);
        assert_eq!(line_of(text, 99), 3);
    }

    #[test]
    fn typos_get_a_suggestion() {
        assert_eq!(suggest("keep-dayly"), Some("keep-daily"));
        assert_eq!(suggest("pasword-file"), Some("password-file"));
        assert_eq!(suggest("colour"), None);
    }

    #[test]
    fn a_child_key_wins_and_unset_keys_come_from_the_parent() {
        let parent: RawProfile =
            toml::from_str("repository = \"/a\"\nnice = 5\ntags = [\"x\"]").unwrap();
        let child: RawProfile = toml::from_str("nice = 7").unwrap();
        let merged = child.over(&parent);
        assert_eq!(merged.nice.as_ref().map(|v| *v.get_ref()), Some(7));
        assert_eq!(
            merged.repository.as_ref().map(|v| v.get_ref().as_str()),
            Some("/a")
        );
        assert_eq!(
            merged.tags.map(|v| v.into_inner()),
            Some(vec!["x".to_string()])
        );
    }
}
