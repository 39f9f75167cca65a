//! Applying a policy to one group of snapshots: which to keep, which to
//! remove, and why, following restic's `ApplyPolicy` rule by rule.
//!
//! Snapshots are considered newest first. Each counted rule (`--keep-last`,
//! `--keep-hourly` … `--keep-yearly`) keeps a snapshot whose calendar bucket
//! (hour, day, ISO week, month or year, in the given time zone) differs from
//! the bucket of the previous snapshot that rule kept, until its count is
//! used up; while counts are left, the oldest snapshot of the group is kept
//! too (restic ≥ 0.16; reason `oldest …` when its bucket was already kept).
//! `--keep-within` keeps every snapshot newer than the duration before the
//! newest snapshot that is not in the future; `--keep-within-<bucket>`
//! keeps the newest snapshot of each bucket within its duration (and the
//! oldest snapshot if it lies within).
//! `--keep-tag` keeps every snapshot matching one of its lists.

use super::policy::Policy;
use crate::id::Id;
use crate::snapshot::Snapshot;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::Serialize;

/// restic's counters after a snapshot was evaluated: what is left of each
/// count (-1: unlimited; 0 when the rule is off or used up).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    #[serde(skip_serializing_if = "is_zero")]
    pub last: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub hourly: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub daily: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub weekly: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub monthly: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub yearly: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The verdict on one snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Position of the snapshot in the slice given to [`apply`].
    pub index: usize,
    pub id: Id,
    pub keep: bool,
    /// Why it is kept, in restic's words (`daily snapshot`, `within 1y2m`,
    /// `has tags [a]`, `oldest monthly snapshot` …); empty when removed.
    pub matches: Vec<String>,
    /// The counters after this snapshot (meaningful for kept ones).
    pub counters: Counters,
}

/// A calendar bucket: the rule's unit of a snapshot time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    /// Every snapshot is its own bucket (`--keep-last`).
    Each,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

const COUNT_UNITS: [(Unit, &str); 6] = [
    (Unit::Each, "last snapshot"),
    (Unit::Hour, "hourly snapshot"),
    (Unit::Day, "daily snapshot"),
    (Unit::Week, "weekly snapshot"),
    (Unit::Month, "monthly snapshot"),
    (Unit::Year, "yearly snapshot"),
];

const WITHIN_UNITS: [(Unit, &str); 5] = [
    (Unit::Hour, "hourly within"),
    (Unit::Day, "daily within"),
    (Unit::Week, "weekly within"),
    (Unit::Month, "monthly within"),
    (Unit::Year, "yearly within"),
];

/// The calendar fields of one snapshot time in the policy's zone.
struct Fields {
    ns: i128,
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    iso_year: i64,
    iso_week: i64,
}

impl Fields {
    fn new(time_ns: i64, tz: &TimeZone) -> Fields {
        let ts = instant(time_ns);
        let dt = tz.to_datetime(ts);
        let week = dt.date().iso_week_date();
        Fields {
            ns: i128::from(time_ns),
            year: dt.year().into(),
            month: dt.month().into(),
            day: dt.day().into(),
            hour: dt.hour().into(),
            iso_year: week.year().into(),
            iso_week: week.week().into(),
        }
    }

    /// The bucket of this time for `unit`; `nr` is its position newest-first.
    fn bucket(&self, unit: Unit, nr: usize) -> [i64; 4] {
        match unit {
            Unit::Each => [i64::try_from(nr).unwrap_or(i64::MAX), 0, 0, 0],
            Unit::Hour => [self.year, self.month, self.day, self.hour],
            Unit::Day => [self.year, self.month, self.day, -1],
            Unit::Week => [self.iso_year, self.iso_week, -1, -1],
            Unit::Month => [self.year, self.month, -1, -1],
            Unit::Year => [self.year, -1, -1, -1],
        }
    }
}

/// The instant of a snapshot time. Every `i64` nanosecond count lies within
/// jiff's range, so the fallback is never taken.
fn instant(time_ns: i64) -> Timestamp {
    Timestamp::from_nanosecond(i128::from(time_ns)).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Where a `--keep-within*` rule starts: snapshots strictly newer are
/// within. `Everything` when the limit lies before any representable time
/// (or no snapshot is older than now, restic then measures from year 1).
#[derive(Clone, Copy)]
enum Limit {
    After(i128),
    Everything,
}

impl Limit {
    fn holds(self, f: &Fields) -> bool {
        match self {
            Limit::After(t) => f.ns > t,
            Limit::Everything => true,
        }
    }
}

/// Applies `policy` to one group of snapshots. Buckets are computed in `tz`;
/// `now` decides which snapshots are in the future (they do not count as
/// the newest for `--keep-within*`). Returns one decision per snapshot,
/// newest first; snapshots with identical times keep their input order.
pub fn apply(
    policy: &Policy,
    snapshots: &[(Id, Snapshot)],
    tz: &TimeZone,
    now: Timestamp,
) -> Vec<Decision> {
    let mut order: Vec<usize> = (0..snapshots.len()).collect();
    order.sort_by(|&a, &b| snapshots[b].1.time_ns.cmp(&snapshots[a].1.time_ns));
    let now_ns = now.as_nanosecond();
    let latest = snapshots
        .iter()
        .map(|(_, s)| s.time_ns)
        .filter(|&t| i128::from(t) < now_ns)
        .max();
    let limit = |d: &super::Duration| -> Option<Limit> {
        if d.is_zero() {
            return None;
        }
        let start = latest.and_then(|l| d.before(instant(l), tz));
        Some(start.map_or(Limit::Everything, |t| Limit::After(t.as_nanosecond())))
    };
    let within = limit(&policy.within);
    let mut counted: Vec<(i64, Option<[i64; 4]>)> = policy
        .counts()
        .iter()
        .map(|(c, _)| (c.as_counter(), None))
        .collect();
    let mut bucketed: Vec<(Option<Limit>, Option<[i64; 4]>)> = policy
        .within_buckets()
        .iter()
        .map(|(d, _)| (limit(d), None))
        .collect();

    let mut out = Vec::with_capacity(order.len());
    for (nr, &index) in order.iter().enumerate() {
        let (id, snap) = &snapshots[index];
        let f = Fields::new(snap.time_ns, tz);
        let oldest = nr + 1 == order.len();
        let mut matches = Vec::new();
        for list in &policy.tags {
            if list.matches(&snap.tags) {
                matches.push(format!("has tags {list}"));
            }
        }
        if within.is_some_and(|w| w.holds(&f)) {
            matches.push(format!("within {}", policy.within));
        }
        for ((unit, reason), (left, last)) in COUNT_UNITS.iter().zip(counted.iter_mut()) {
            if *left == 0 {
                continue;
            }
            let val = f.bucket(*unit, nr);
            if Some(val) != *last || oldest {
                matches.push(oldest_prefixed(reason, Some(val) == *last));
                *last = Some(val);
                if *left > 0 {
                    *left -= 1;
                }
            }
        }
        let rules = WITHIN_UNITS.iter().zip(policy.within_buckets());
        for (((unit, reason), (dur, _)), (lim, last)) in rules.zip(bucketed.iter_mut()) {
            if !lim.is_some_and(|l| l.holds(&f)) {
                continue;
            }
            let val = f.bucket(*unit, nr);
            if Some(val) != *last || oldest {
                let reason = oldest_prefixed(reason, Some(val) == *last);
                matches.push(format!("{reason} {dur}"));
                *last = Some(val);
            }
        }
        let c = |i: usize| counted[i].0;
        out.push(Decision {
            index,
            id: *id,
            keep: !matches.is_empty(),
            matches,
            counters: Counters {
                last: c(0),
                hourly: c(1),
                daily: c(2),
                weekly: c(3),
                monthly: c(4),
                yearly: c(5),
            },
        });
    }
    out
}

/// A rule's reason; prefixed `oldest` when only the oldest-snapshot rule
/// kept it (its bucket was already kept).
fn oldest_prefixed(reason: &str, same_bucket: bool) -> String {
    if same_bucket {
        format!("oldest {reason}")
    } else {
        reason.to_string()
    }
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
