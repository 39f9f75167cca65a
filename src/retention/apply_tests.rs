//! Unit tests of `apply`: calendar buckets in a time zone (DST included),
//! the `--keep-within*` reference point, ties, counters and reasons.
//! Expectations are worked out by hand from restic's documented rules.

use super::*;
use crate::retention::duration::Duration;
use crate::retention::policy::{Count, TagList};

fn snapshots(list: &[(&str, &[&str])]) -> Vec<(Id, Snapshot)> {
    list.iter()
        .enumerate()
        .map(|(i, (time, tags))| {
            let ts: Timestamp = time.parse().unwrap();
            let snap = Snapshot {
                time_ns: i64::try_from(ts.as_nanosecond()).unwrap(),
                hostname: "h".into(),
                username: "u".into(),
                uid: 0,
                gid: 0,
                paths: vec!["/p".into()],
                tags: tags.iter().map(|t| t.to_string()).collect(),
                tree: Id([0; 32]),
                parent: None,
                program_version: String::new(),
                summary: Default::default(),
                original: None,
            };
            (Id([u8::try_from(i + 1).unwrap(); 32]), snap)
        })
        .collect()
}

fn plain(times: &[&str]) -> Vec<(Id, Snapshot)> {
    let list: Vec<(&str, &[&str])> = times.iter().map(|t| (*t, &[][..])).collect();
    snapshots(&list)
}

fn now() -> Timestamp {
    "2030-01-01T00:00:00Z".parse().unwrap()
}

/// Europe/Berlin's rules since 1996 as a POSIX TZ string, so that the
/// tests need no time zone database.
const BERLIN: &str = "CET-1CEST,M3.5.0,M10.5.0/3";

fn berlin() -> TimeZone {
    TimeZone::posix(BERLIN).unwrap()
}

/// The kept snapshots' numbers (1-based input positions), newest first.
fn kept(decisions: &[Decision]) -> Vec<usize> {
    decisions
        .iter()
        .filter(|d| d.keep)
        .map(|d| d.index + 1)
        .collect()
}

fn reasons_of(decisions: &[Decision], number: usize) -> Vec<String> {
    decisions
        .iter()
        .find(|d| d.index + 1 == number)
        .map(|d| d.matches.clone())
        .unwrap()
}

fn hourly(n: u64) -> Policy {
    Policy {
        hourly: Count::Limit(n),
        ..Policy::default()
    }
}

fn daily(n: u64) -> Policy {
    Policy {
        daily: Count::Limit(n),
        ..Policy::default()
    }
}

#[test]
fn hourly_buckets_use_local_hours_in_the_autumn_fold() {
    let s = plain(&[
        "2024-10-20T12:00:00Z", // 1: an older anchor, its own bucket
        "2024-10-27T00:10:00Z", // 2: 02:10 CEST
        "2024-10-27T00:50:00Z", // 3: 02:50 CEST
        "2024-10-27T01:10:00Z", // 4: 02:10 CET (the repeated hour)
        "2024-10-27T01:50:00Z", // 5: 02:50 CET
        "2024-10-27T02:10:00Z", // 6: 03:10 CET
    ]);
    // In Berlin, 2..5 all fall into the local hour 02: one is kept.
    assert_eq!(
        kept(&apply(&hourly(10), &s, &berlin(), now())),
        vec![6, 5, 1]
    );
    // In UTC they are the hours 00 and 01.
    assert_eq!(
        kept(&apply(&hourly(10), &s, &TimeZone::UTC, now())),
        vec![6, 5, 3, 1]
    );
}

#[test]
fn hourly_buckets_skip_the_missing_spring_hour() {
    let s = plain(&[
        "2024-03-24T12:00:00Z", // 1: anchor
        "2024-03-31T00:30:00Z", // 2: 01:30 CET
        "2024-03-31T00:59:00Z", // 3: 01:59 CET
        "2024-03-31T01:00:00Z", // 4: 03:00 CEST (02:xx does not exist)
        "2024-03-31T01:30:00Z", // 5: 03:30 CEST
    ]);
    let d = apply(&hourly(10), &s, &berlin(), now());
    assert_eq!(kept(&d), vec![5, 3, 1]);
    assert_eq!(reasons_of(&d, 5), vec!["hourly snapshot"]);
}

#[test]
fn daily_buckets_span_the_23_and_25_hour_days() {
    let s = plain(&[
        "2024-03-20T12:00:00Z", // 1: anchor
        "2024-03-30T23:05:00Z", // 2: 31 March 00:05 CET
        "2024-03-31T21:55:00Z", // 3: 31 March 23:55 CEST (23 h later, same day)
        "2024-03-31T22:05:00Z", // 4: 1 April 00:05 CEST
    ]);
    assert_eq!(kept(&apply(&daily(5), &s, &berlin(), now())), vec![4, 3, 1]);
    assert_eq!(
        kept(&apply(&daily(5), &s, &TimeZone::UTC, now())),
        vec![4, 2, 1]
    );
    let s = plain(&[
        "2024-10-20T12:00:00Z", // 1: anchor
        "2024-10-26T22:05:00Z", // 2: 27 October 00:05 CEST
        "2024-10-27T22:55:00Z", // 3: 27 October 23:55 CET (24 h 50 min later)
    ]);
    assert_eq!(kept(&apply(&daily(5), &s, &berlin(), now())), vec![3, 1]);
    assert_eq!(
        kept(&apply(&daily(5), &s, &TimeZone::UTC, now())),
        vec![3, 2, 1]
    );
}

#[test]
fn weekly_buckets_are_iso_weeks() {
    let s = plain(&[
        "2020-12-31T12:00:00Z", // 1: Thursday, 2020-W53
        "2021-01-03T12:00:00Z", // 2: Sunday, 2020-W53
        "2021-01-04T12:00:00Z", // 3: Monday, 2021-W01
        "2024-12-29T12:00:00Z", // 4: Sunday, 2024-W52
        "2024-12-30T12:00:00Z", // 5: Monday, 2025-W01
        "2025-01-03T12:00:00Z", // 6: Friday, 2025-W01
    ]);
    let p = Policy {
        weekly: Count::Unlimited,
        ..Policy::default()
    };
    let d = apply(&p, &s, &TimeZone::UTC, now());
    // 5 shares 2025-W01 with 6; 1 shares 2020-W53 with 2 but is the oldest
    // snapshot, kept while counts are left.
    assert_eq!(kept(&d), vec![6, 4, 3, 2, 1]);
    assert_eq!(reasons_of(&d, 1), vec!["oldest weekly snapshot"]);
    assert_eq!(reasons_of(&d, 2), vec!["weekly snapshot"]);
    assert!(d.iter().all(|x| x.counters.weekly == -1));
    // Years are calendar years: 30 December 2024 belongs to 2024.
    let p = Policy {
        yearly: Count::Limit(10),
        ..Policy::default()
    };
    assert_eq!(
        kept(&apply(&p, &s, &TimeZone::UTC, now())),
        vec![6, 5, 3, 1]
    );
}

#[test]
fn counts_run_out_and_then_the_oldest_is_removed() {
    let days = [
        "2024-05-01T10:00:00Z",
        "2024-05-02T10:00:00Z",
        "2024-05-03T10:00:00Z",
        "2024-05-03T11:00:00Z",
        "2024-05-04T10:00:00Z",
    ];
    let d = apply(&daily(2), &plain(&days), &TimeZone::UTC, now());
    assert_eq!(kept(&d), vec![5, 4]);
    let counters: Vec<i64> = d.iter().map(|x| x.counters.daily).collect();
    assert_eq!(counters, vec![1, 0, 0, 0, 0]);
}

#[test]
fn the_oldest_snapshot_is_kept_while_counts_are_left() {
    let s = plain(&[
        "2024-01-05T10:00:00Z", // 1: oldest, January
        "2024-01-20T10:00:00Z", // 2: January
        "2024-02-03T10:00:00Z", // 3
        "2024-03-09T10:00:00Z", // 4
        "2024-03-10T10:00:00Z", // 5
    ]);
    let p = Policy {
        monthly: Count::Limit(12),
        ..Policy::default()
    };
    let d = apply(&p, &s, &TimeZone::UTC, now());
    assert_eq!(kept(&d), vec![5, 3, 2, 1]);
    assert_eq!(reasons_of(&d, 1), vec!["oldest monthly snapshot"]);
    let counters: Vec<i64> = d
        .iter()
        .filter(|x| x.keep)
        .map(|x| x.counters.monthly)
        .collect();
    assert_eq!(counters, vec![11, 10, 9, 8]);
    // With exactly three months allowed, nothing is left for the oldest.
    let p = Policy {
        monthly: Count::Limit(3),
        ..Policy::default()
    };
    assert_eq!(kept(&apply(&p, &s, &TimeZone::UTC, now())), vec![5, 3, 2]);
}

#[test]
fn keep_within_counts_back_from_the_newest_past_snapshot() {
    let s = plain(&[
        "2020-01-01T12:00:00Z",           // 1
        "2020-01-05T12:00:00Z",           // 2: exactly 5 days before 4: not within
        "2020-01-05T12:00:00.000000001Z", // 3: 1 ns later: within
        "2020-01-10T12:00:00Z",           // 4: the newest snapshot in the past
        "2099-01-01T00:00:00Z",           // 5: in the future
    ]);
    let p = Policy {
        within: Duration::parse("5d").unwrap(),
        ..Policy::default()
    };
    let d = apply(&p, &s, &TimeZone::UTC, now());
    assert_eq!(kept(&d), vec![5, 4, 3]);
    assert_eq!(reasons_of(&d, 3), vec!["within 5d"]);
    // Seen from 2019 every snapshot is in the future: restic then measures
    // from year 1, so all are within.
    let before_all: Timestamp = "2019-06-01T00:00:00Z".parse().unwrap();
    assert_eq!(
        kept(&apply(&p, &s, &TimeZone::UTC, before_all)),
        vec![5, 4, 3, 2, 1]
    );
}

#[test]
fn keep_within_buckets_keep_one_per_bucket_inside_the_duration() {
    let s = plain(&[
        "2024-06-01T08:00:00Z", // 1: outside 3d
        "2024-06-08T08:00:00Z", // 2: inside (after 2024-06-07T20:00)
        "2024-06-08T20:00:00Z", // 3
        "2024-06-09T09:00:00Z", // 4
        "2024-06-10T20:00:00Z", // 5: newest
    ]);
    let p = Policy {
        within_daily: Duration::parse("3d").unwrap(),
        ..Policy::default()
    };
    let d = apply(&p, &s, &TimeZone::UTC, now());
    assert_eq!(kept(&d), vec![5, 4, 3]);
    assert_eq!(reasons_of(&d, 3), vec!["daily within 3d"]);
    // When the oldest snapshot lies inside the duration it is kept too.
    let p = Policy {
        within_monthly: Duration::parse("1y").unwrap(),
        ..Policy::default()
    };
    let d = apply(&p, &s, &TimeZone::UTC, now());
    assert_eq!(kept(&d), vec![5, 1]);
    assert_eq!(reasons_of(&d, 1), vec!["oldest monthly within 1y"]);
}

#[test]
fn ties_keep_their_input_order() {
    let s = plain(&[
        "2024-01-01T00:00:00Z", // 1
        "2024-01-02T00:00:00Z", // 2
        "2024-01-02T00:00:00Z", // 3: same time as 2
        "2024-01-02T00:00:00Z", // 4: same time as 2
    ]);
    let p = Policy {
        last: Count::Limit(2),
        ..Policy::default()
    };
    assert_eq!(kept(&apply(&p, &s, &TimeZone::UTC, now())), vec![2, 3]);
    assert_eq!(kept(&apply(&daily(1), &s, &TimeZone::UTC, now())), vec![2]);
}

#[test]
fn tags_and_rules_give_reasons_in_restics_order() {
    let s = snapshots(&[
        ("2024-02-01T00:00:00Z", &["a"]),
        ("2024-02-02T00:00:00Z", &["a", "b", "c"]),
        ("2024-02-03T00:00:00Z", &[]),
    ]);
    let p = Policy {
        last: Count::Limit(1),
        daily: Count::Unlimited,
        within: Duration::parse("1d").unwrap(),
        within_hourly: Duration::parse("2d").unwrap(),
        tags: vec![
            TagList::parse("a,b"),
            TagList::parse("c"),
            TagList::parse(""),
        ],
        ..Policy::default()
    };
    let d = apply(&p, &s, &TimeZone::UTC, now());
    assert_eq!(
        reasons_of(&d, 3),
        vec![
            "has tags []",
            "within 1d",
            "last snapshot",
            "daily snapshot",
            "hourly within 2d"
        ]
    );
    assert_eq!(
        reasons_of(&d, 2),
        vec![
            "has tags [a, b]",
            "has tags [c]",
            "daily snapshot",
            "hourly within 2d"
        ]
    );
    // Exactly 2 days before the newest is not within 2d.
    assert_eq!(reasons_of(&d, 1), vec!["daily snapshot"]);
    let c = d[0].counters;
    assert_eq!((c.last, c.daily, c.hourly), (0, -1, 0));
    // Only the tags [a] snapshot: untagged "" list and [a, b] do not match.
    let p = Policy {
        tags: vec![TagList::parse("a")],
        ..Policy::default()
    };
    assert_eq!(kept(&apply(&p, &s, &TimeZone::UTC, now())), vec![2, 1]);
}

#[test]
fn an_empty_policy_keeps_nothing() {
    let s = plain(&["2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z"]);
    let d = apply(&Policy::default(), &s, &TimeZone::UTC, now());
    assert_eq!(d.len(), 2);
    assert!(d.iter().all(|x| !x.keep && x.matches.is_empty()));
    assert!(apply(&daily(3), &[], &TimeZone::UTC, now()).is_empty());
}
