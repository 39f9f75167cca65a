//! What a retention policy says: the `--keep-*` counts, the `--keep-within*`
//! durations and the `--keep-tag` lists, parsed from restic's syntax, with
//! restic's notion of an empty policy and restic's one-line description.

use super::duration::Duration;
use crate::error::{Error, Result};
pub use crate::snapshot::TagList;
use std::fmt;

/// How many buckets of one kind (`--keep-daily` etc.) a policy keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Count {
    /// The option is not given (or 0).
    #[default]
    Off,
    /// Keep the newest snapshot of each of the newest `n` buckets (n ≥ 1).
    Limit(u64),
    /// Keep the newest snapshot of every bucket (`unlimited`, or `-1`).
    Unlimited,
}

impl Count {
    /// Parses a count: a non-negative number, or `unlimited` / `-1`.
    pub fn parse(text: &str) -> Result<Count> {
        match text {
            "unlimited" | "-1" => Ok(Count::Unlimited),
            _ => match text.parse::<i128>() {
                Ok(0) => Ok(Count::Off),
                Ok(n) if n > 0 => u64::try_from(n).map(Count::Limit).map_err(|_| {
                    Error::Usage(format!("keep count {text} is too large (use 'unlimited')"))
                }),
                Ok(_) => Err(Error::Usage(format!(
                    "keep count {text}: negative values other than -1 are not allowed (use 'unlimited' to keep all)"
                ))),
                Err(_) => Err(Error::Usage(format!(
                    "keep count {text:?} is neither a number nor 'unlimited'"
                ))),
            },
        }
    }

    /// restic's counter value: the remaining count, -1 for unlimited.
    pub(super) fn as_counter(self) -> i64 {
        match self {
            Count::Off => 0,
            Count::Limit(n) => i64::try_from(n).unwrap_or(i64::MAX),
            Count::Unlimited => -1,
        }
    }
}

/// A retention policy: a snapshot is kept if any rule keeps it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    pub last: Count,
    pub hourly: Count,
    pub daily: Count,
    pub weekly: Count,
    pub monthly: Count,
    pub yearly: Count,
    /// Keep every snapshot newer than this, measured back from the newest
    /// snapshot that is not in the future.
    pub within: Duration,
    pub within_hourly: Duration,
    pub within_daily: Duration,
    pub within_weekly: Duration,
    pub within_monthly: Duration,
    pub within_yearly: Duration,
    /// Keep snapshots matching any of these lists (several `--keep-tag`).
    pub tags: Vec<TagList>,
}

impl Policy {
    /// Whether no rule is set: such a policy keeps nothing, so `forget`
    /// refuses it unless snapshots are named explicitly.
    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
            && self.counts().iter().all(|(c, _)| *c == Count::Off)
            && self.within.is_zero()
            && self.within_buckets().iter().all(|(d, _)| d.is_zero())
    }

    /// The counted rules in restic's order, with restic's word for each.
    pub(super) fn counts(&self) -> [(Count, &'static str); 6] {
        [
            (self.last, "latest"),
            (self.hourly, "hourly"),
            (self.daily, "daily"),
            (self.weekly, "weekly"),
            (self.monthly, "monthly"),
            (self.yearly, "yearly"),
        ]
    }

    /// The bucketed duration rules in restic's order.
    pub(super) fn within_buckets(&self) -> [(Duration, &'static str); 5] {
        [
            (self.within_hourly, "hourly"),
            (self.within_daily, "daily"),
            (self.within_weekly, "weekly"),
            (self.within_monthly, "monthly"),
            (self.within_yearly, "yearly"),
        ]
    }
}

/// restic's description of a policy, e.g. `keep 7 daily, 4 weekly
/// snapshots` or `keep all daily snapshots, monthly snapshots within 1y and
/// all snapshots with tags [[manual]]`; an empty policy reads `remove`.
impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let counts: Vec<String> = self
            .counts()
            .iter()
            .filter_map(|(c, word)| match c {
                Count::Off => None,
                Count::Limit(n) => Some(format!("{n} {word}")),
                Count::Unlimited => Some(format!("all {word}")),
            })
            .collect();
        let withins: Vec<String> = self
            .within_buckets()
            .iter()
            .filter(|(d, _)| !d.is_zero())
            .map(|(d, word)| format!("{word} snapshots within {d}"))
            .collect();
        let mut s = String::new();
        if !counts.is_empty() {
            s = format!("{} snapshots", counts.join(", "));
        }
        if !withins.is_empty() {
            if !s.is_empty() {
                s.push_str(", ");
            }
            s.push_str(&withins.join(", "));
        }
        if !self.tags.is_empty() {
            if !s.is_empty() {
                s.push_str(" and ");
            }
            let lists: Vec<String> = self.tags.iter().map(|t| t.to_string()).collect();
            s.push_str(&format!("all snapshots with tags [{}]", lists.join(" ")));
        }
        if !self.within.is_zero() {
            if !s.is_empty() {
                s.push_str(" and ");
            }
            s.push_str(&format!(
                "all snapshots within {} of the newest",
                self.within
            ));
        }
        if s.is_empty() {
            f.write_str("remove")
        } else {
            write!(f, "keep {s}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn counts_parse_numbers_and_unlimited() {
        assert_eq!(Count::parse("0").unwrap(), Count::Off);
        assert_eq!(Count::parse("7").unwrap(), Count::Limit(7));
        assert_eq!(Count::parse("unlimited").unwrap(), Count::Unlimited);
        assert_eq!(Count::parse("-1").unwrap(), Count::Unlimited);
        for bad in ["-2", "x", "", "1.5", "99999999999999999999999"] {
            assert!(
                matches!(Count::parse(bad), Err(Error::Usage(_))),
                "{bad:?} accepted"
            );
        }
    }

    #[test]
    fn tag_lists_need_all_tags_and_empty_means_untagged() {
        let both = TagList::parse("a, b");
        assert_eq!(both.0, tags(&["a", "b"]));
        assert!(both.matches(&tags(&["b", "c", "a"])));
        assert!(!both.matches(&tags(&["a"])));
        assert!(!both.matches(&[]));
        let untagged = TagList::parse("");
        assert_eq!(untagged.0, tags(&[""]));
        assert!(untagged.matches(&[]));
        assert!(!untagged.matches(&tags(&["a"])));
        // restic checks in order: "a" fails first on an untagged snapshot,
        // while "" first matches it at once.
        assert!(!TagList::parse("a,").matches(&[]));
        assert!(TagList::parse(",a").matches(&[]));
        assert!(!TagList::parse("a,").matches(&tags(&["a"])));
        assert_eq!(both.to_string(), "[a, b]");
    }

    #[test]
    fn empty_policy_is_one_without_any_rule() {
        assert!(Policy::default().is_empty());
        let zero_within = Policy {
            within: Duration::parse("0d").unwrap(),
            last: Count::Off,
            ..Policy::default()
        };
        assert!(zero_within.is_empty());
        for p in [
            Policy {
                last: Count::Limit(1),
                ..Policy::default()
            },
            Policy {
                yearly: Count::Unlimited,
                ..Policy::default()
            },
            Policy {
                within_weekly: Duration::parse("1h").unwrap(),
                ..Policy::default()
            },
            Policy {
                within: Duration::parse("2d").unwrap(),
                ..Policy::default()
            },
            Policy {
                tags: vec![TagList::parse("")],
                ..Policy::default()
            },
        ] {
            assert!(!p.is_empty(), "{p:?}");
        }
    }

    #[test]
    fn describes_policies_in_restics_words() {
        let p = Policy {
            daily: Count::Limit(7),
            weekly: Count::Limit(4),
            ..Policy::default()
        };
        assert_eq!(p.to_string(), "keep 7 daily, 4 weekly snapshots");
        let p = Policy {
            last: Count::Limit(3),
            monthly: Count::Unlimited,
            within_daily: Duration::parse("7d").unwrap(),
            within_yearly: Duration::parse("75y").unwrap(),
            tags: vec![TagList::parse("a,b"), TagList::parse("c")],
            within: Duration::parse("1y2m").unwrap(),
            ..Policy::default()
        };
        assert_eq!(
            p.to_string(),
            "keep 3 latest, all monthly snapshots, daily snapshots within 7d, \
             yearly snapshots within 75y and all snapshots with tags [[a, b] [c]] \
             and all snapshots within 1y2m of the newest"
        );
        let p = Policy {
            within: Duration::parse("2d").unwrap(),
            ..Policy::default()
        };
        assert_eq!(p.to_string(), "keep all snapshots within 2d of the newest");
        assert_eq!(Policy::default().to_string(), "remove");
    }
}
