//! `forget`'s retention policy against restic: the examples and rules of
//! restic's documentation ("Removing snapshots according to a policy"),
//! with expectations worked out from the documentation's prose, and (in
//! `oracle`) a comparison with the real restic binary over generated
//! snapshot sets.

mod oracle;

use jiff::civil::{Date, Weekday};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use larder::Id;
use larder::retention::{
    Count, Decision, Duration, GroupBy, Policy, SnapshotJson, TagList, apply, plan,
};
use larder::snapshot::Snapshot;
use std::collections::{BTreeMap, BTreeSet};

/// Europe/Berlin's rules since 1996 as a POSIX TZ string, so that the
/// tests need no time zone database.
const BERLIN: &str = "CET-1CEST,M3.5.0,M10.5.0/3";

pub(crate) fn snapshot(time_ns: i64, host: &str, paths: &[&str], tags: &[&str]) -> Snapshot {
    Snapshot {
        time_ns,
        hostname: host.into(),
        username: "user".into(),
        uid: 1000,
        gid: 1000,
        paths: paths.iter().map(|s| s.to_string()).collect(),
        tags: tags.iter().map(|s| s.to_string()).collect(),
        tree: Id([7; 32]),
        parent: None,
        program_version: "test".into(),
        summary: Default::default(),
        original: None,
    }
}

fn ns(ts: Timestamp) -> i64 {
    i64::try_from(ts.as_nanosecond()).unwrap()
}

/// A distinct id per position.
fn id(i: usize) -> Id {
    let mut b = [0u8; 32];
    b[..8].copy_from_slice(&(i as u64).to_be_bytes());
    Id(b)
}

/// Snapshots of one host and path at the given instants.
fn at_times(times: &[Timestamp]) -> Vec<(Id, Snapshot)> {
    times
        .iter()
        .enumerate()
        .map(|(i, t)| (id(i), snapshot(ns(*t), "mopped", &["/home/user/work"], &[])))
        .collect()
}

fn utc(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn in_zone(tz: &TimeZone, date: Date, h: i8, m: i8) -> Timestamp {
    tz.to_ambiguous_timestamp(date.at(h, m, 0, 0))
        .compatible()
        .unwrap()
}

fn now() -> Timestamp {
    utc("2030-01-01T00:00:00Z")
}

/// The kept snapshots' times, newest first.
fn kept_times(snaps: &[(Id, Snapshot)], decisions: &[Decision]) -> Vec<i64> {
    decisions
        .iter()
        .filter(|d| d.keep)
        .map(|d| snaps[d.index].1.time_ns)
        .collect()
}

#[test]
fn doc_twelve_sundays_keep_daily_4() {
    let tz = TimeZone::posix(BERLIN).unwrap();
    let sundays: Vec<Timestamp> = (0..12)
        .map(|w| in_zone(&tz, jiff::civil::date(2019, 9, 1) + (7 * w).days(), 11, 0))
        .collect();
    let snaps = at_times(&sundays);
    let policy = Policy {
        daily: Count::Limit(4),
        ..Policy::default()
    };
    let d = apply(&policy, &snaps, &tz, now());
    // "forget --keep-daily 4 will keep the last four snapshots, for the last
    // four Sundays, and remove the other snapshots".
    let want: Vec<i64> = sundays[8..].iter().rev().map(|t| ns(*t)).collect();
    assert_eq!(kept_times(&snaps, &d), want);
    assert_eq!(
        jiff::Timestamp::from_nanosecond(want[3].into())
            .unwrap()
            .to_zoned(tz.clone())
            .date(),
        jiff::civil::date(2019, 10, 27)
    );
    for k in d.iter().filter(|d| d.keep) {
        assert_eq!(k.matches, vec!["daily snapshot"]);
    }
    assert_eq!(d.iter().filter(|d| !d.keep).count(), 8);
    assert_eq!(policy.to_string(), "keep 4 daily snapshots");
}

#[test]
fn doc_a_hundred_years_of_daily_backups() {
    // "suppose you make one backup every day for 100 years. Then forget
    // --keep-daily 7 --keep-weekly 5 --keep-monthly 12 --keep-yearly 75
    // would keep the most recent 7 daily snapshots and 4 last-day-of-the-week
    // ones (since the 7 dailies already include 1 weekly). Additionally, 12
    // or 11 last-day-of-the-month snapshots [...] And finally 75 or 74
    // last-day-of-the-year snapshots [...] All other snapshots are removed."
    // The prose's numbers assume the newest backup is made on a Sunday (7
    // dailies ending on another day span two weeks).
    let tz = TimeZone::UTC;
    let first = jiff::civil::date(1925, 1, 1);
    let last = jiff::civil::date(2024, 12, 29);
    assert_eq!(last.weekday(), Weekday::Sunday);
    let mut days = Vec::new();
    let mut day = first;
    while day <= last {
        days.push(day);
        day = day.tomorrow().unwrap();
    }
    let times: Vec<Timestamp> = days.iter().map(|d| in_zone(&tz, *d, 10, 0)).collect();
    let snaps = at_times(&times);
    let policy = Policy {
        daily: Count::Limit(7),
        weekly: Count::Limit(5),
        monthly: Count::Limit(12),
        yearly: Count::Limit(75),
        ..Policy::default()
    };
    let d = apply(&policy, &snaps, &tz, now());
    let date_of = |k: &Decision| days[k.index];
    let has = |k: &Decision, r: &str| k.matches.iter().any(|m| m == r);
    let kept: Vec<&Decision> = d.iter().filter(|k| k.keep).collect();

    let daily: Vec<Date> = kept
        .iter()
        .filter(|k| has(k, "daily snapshot"))
        .map(|k| date_of(k))
        .collect();
    let want: Vec<Date> = days.iter().rev().take(7).copied().collect();
    assert_eq!(daily, want, "the most recent 7 daily snapshots");

    let weekly_only: Vec<Date> = kept
        .iter()
        .filter(|k| has(k, "weekly snapshot") && !has(k, "daily snapshot"))
        .map(|k| date_of(k))
        .collect();
    assert_eq!(weekly_only.len(), 4, "4 last-day-of-the-week ones");
    assert!(weekly_only.iter().all(|d| d.weekday() == Weekday::Sunday));

    // Those kept for one rule only are the last days of their months and
    // years (the current month's and year's are the newest snapshot).
    let monthly: Vec<&&Decision> = kept.iter().filter(|k| has(k, "monthly snapshot")).collect();
    assert_eq!(monthly.len(), 12);
    let monthly_only: Vec<Date> = monthly
        .iter()
        .filter(|k| k.matches.len() == 1)
        .map(|k| date_of(k))
        .collect();
    assert!(
        monthly_only.len() == 12 || monthly_only.len() == 11,
        "{monthly_only:?}"
    );
    assert!(monthly_only.iter().all(|d| *d == d.last_of_month()));
    let monthly_only = monthly_only.len();

    let yearly: Vec<&&Decision> = kept.iter().filter(|k| has(k, "yearly snapshot")).collect();
    assert_eq!(yearly.len(), 75);
    let yearly_only: Vec<Date> = yearly
        .iter()
        .filter(|k| k.matches.len() == 1)
        .map(|k| date_of(k))
        .collect();
    assert!(
        yearly_only.len() == 75 || yearly_only.len() == 74,
        "{}",
        yearly_only.len()
    );
    assert!(yearly_only.iter().all(|d| (d.month(), d.day()) == (12, 31)));
    let yearly_only = yearly_only.len();

    // "All other snapshots are removed."
    assert_eq!(d.len(), days.len());
    assert_eq!(kept.len(), 7 + 4 + monthly_only + yearly_only);
    // Nothing is left for the oldest snapshot: every count is used up.
    assert!(!d.last().unwrap().keep);
}

/// A deterministic irregular schedule: on some days one or more backups.
fn irregular_times(seed: u64, from: Date, to: Date) -> Vec<Timestamp> {
    let mut x = seed;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as i64
    };
    let mut out = Vec::new();
    let mut day = from;
    while day <= to {
        for _ in 0..(next() % 3 - next() % 2).max(0) {
            let minute = next() % (24 * 60);
            out.push(in_zone(
                &TimeZone::UTC,
                day,
                (minute / 60) as i8,
                (minute % 60) as i8,
            ));
        }
        day = day.tomorrow().unwrap();
    }
    out.sort();
    out.dedup();
    out
}

/// A calendar bucket of a date: (year, month or ISO week, day).
type Bucket = fn(Date) -> (i32, i32, i32);

#[test]
fn doc_irregular_backups_with_keep_within_buckets() {
    // "If what you want is to keep daily snapshots for the last week, weekly
    // for the last month, monthly for the last year and yearly for the last
    // 75 years, you can instead specify forget --keep-within-daily 7d
    // --keep-within-weekly 1m --keep-within-monthly 1y --keep-within-yearly
    // 75y". Checked here by picking, independently, the newest snapshot of
    // every day, ISO week, month and year inside each window.
    let tz = TimeZone::UTC;
    let mut times = irregular_times(
        42,
        jiff::civil::date(2014, 3, 3),
        jiff::civil::date(2024, 6, 14),
    );
    times.push(utc("2024-06-15T12:00:00Z"));
    let latest = *times.last().unwrap();
    let snaps = at_times(&times);
    let policy = Policy {
        within_daily: Duration::parse("7d").unwrap(),
        within_weekly: Duration::parse("1m").unwrap(),
        within_monthly: Duration::parse("1y").unwrap(),
        within_yearly: Duration::parse("75y").unwrap(),
        ..Policy::default()
    };
    let d = apply(&policy, &snaps, &tz, now());

    let windows: [(Timestamp, Bucket); 4] = [
        (utc("2024-06-08T12:00:00Z"), |d| {
            (d.year().into(), d.month().into(), d.day().into())
        }),
        (utc("2024-05-15T12:00:00Z"), |d| {
            let w = d.iso_week_date();
            (w.year().into(), w.week().into(), 0)
        }),
        (utc("2023-06-15T12:00:00Z"), |d| {
            (d.year().into(), d.month().into(), 0)
        }),
        (utc("1949-06-15T12:00:00Z"), |d| (d.year().into(), 0, 0)),
    ];
    let mut want = BTreeSet::new();
    for (start, bucket) in windows {
        let mut newest: BTreeMap<(i32, i32, i32), Timestamp> = BTreeMap::new();
        for t in times.iter().filter(|t| **t > start && **t <= latest) {
            let b = bucket(t.to_zoned(tz.clone()).date());
            let e = newest.entry(b).or_insert(*t);
            *e = (*e).max(*t);
        }
        want.extend(newest.values().map(|t| ns(*t)));
    }
    // The oldest snapshot lies within 75y: it is kept too ("If there are not
    // enough snapshots to keep one for each duration related option, the
    // oldest snapshot is kept additionally").
    want.insert(ns(times[0]));
    let got: BTreeSet<i64> = kept_times(&snaps, &d).into_iter().collect();
    assert_eq!(got, want);
    let oldest = d.last().unwrap();
    assert_eq!(oldest.matches, vec!["oldest yearly within 75y"]);
}

#[test]
fn doc_keep_within_counts_from_the_latest_snapshot() {
    // "E.g. 2y5m7d3h will keep all snapshots made in the two years, five
    // months, seven days and three hours before the latest (most recent)
    // snapshot." The latest is in 2024, long before `now`.
    let latest = utc("2024-08-20T12:00:00Z");
    let times = [
        utc("2022-03-13T08:00:00Z"),
        utc("2022-03-13T09:00:00Z"), // exactly 2y5m7d3h before: not "within"
        utc("2022-03-13T10:00:00Z"),
        utc("2023-01-01T00:00:00Z"),
        latest,
    ];
    let snaps = at_times(&times);
    let policy = Policy {
        within: Duration::parse("2y5m7d3h").unwrap(),
        ..Policy::default()
    };
    let d = apply(&policy, &snaps, &TimeZone::UTC, now());
    let want: Vec<i64> = times[2..].iter().rev().map(|t| ns(*t)).collect();
    assert_eq!(kept_times(&snaps, &d), want);
    assert!(
        d.iter()
            .filter(|k| k.keep)
            .all(|k| k.matches == ["within 2y5m7d3h"])
    );
    assert_eq!(
        policy.to_string(),
        "keep all snapshots within 2y5m7d3h of the newest"
    );
}

#[test]
fn doc_calendar_buckets_are_natural_boundaries_in_local_time() {
    // "Weeks are Monday 00:00 to Sunday 23:59, days 00:00 to 23:59, hours :00
    // to :59, etc. They also only count hours/days/weeks/etc which have one
    // or more snapshots."
    let tz = TimeZone::posix(BERLIN).unwrap();
    let sunday = jiff::civil::date(2024, 7, 14);
    assert_eq!(sunday.weekday(), Weekday::Sunday);
    let times = [
        in_zone(&tz, sunday - 20.days(), 12, 0),
        in_zone(&tz, sunday, 23, 59),
        in_zone(&tz, sunday.tomorrow().unwrap(), 0, 0),
    ];
    let snaps = at_times(&times);
    let weekly = |n| Policy {
        weekly: Count::Limit(n),
        ..Policy::default()
    };
    assert_eq!(
        kept_times(&snaps, &apply(&weekly(1), &snaps, &tz, now())),
        vec![ns(times[2])]
    );
    assert_eq!(
        kept_times(&snaps, &apply(&weekly(2), &snaps, &tz, now())),
        vec![ns(times[2]), ns(times[1])]
    );
    // Three days with snapshots, far apart: --keep-daily 3 keeps all three.
    let daily = Policy {
        daily: Count::Limit(3),
        ..Policy::default()
    };
    assert_eq!(
        apply(&daily, &snaps, &tz, now())
            .iter()
            .filter(|d| d.keep)
            .count(),
        3
    );
    // In UTC, Sunday 23:59 and Monday 00:00 Berlin are both on Sunday.
    assert_eq!(
        kept_times(&snaps, &apply(&weekly(2), &snaps, &TimeZone::UTC, now())),
        vec![ns(times[2]), ns(times[0])]
    );
}

#[test]
fn doc_keep_tag_needs_all_tags_and_refuses_to_empty_a_group() {
    let snaps: Vec<(Id, Snapshot)> = [
        ("2024-01-01T00:00:00Z", &["foo", "bar"][..]),
        ("2024-01-02T00:00:00Z", &["foo"][..]),
        ("2024-01-03T00:00:00Z", &[][..]),
        ("2024-01-04T00:00:00Z", &["bar"][..]),
    ]
    .iter()
    .enumerate()
    .map(|(i, (t, tags))| (id(i), snapshot(ns(utc(t)), "h", &["/p"], tags)))
    .collect();
    let keep = |lists: &[&str]| {
        let policy = Policy {
            tags: lists.iter().map(|l| TagList::parse(l)).collect(),
            ..Policy::default()
        };
        let d = apply(&policy, &snaps, &TimeZone::UTC, now());
        let mut kept: Vec<usize> = d.iter().filter(|k| k.keep).map(|k| k.index).collect();
        kept.sort();
        kept
    };
    // "keep all snapshots which have all tags specified by this option".
    assert_eq!(keep(&["foo,bar"]), vec![0]);
    // "(can be specified multiple times)": any of the lists.
    assert_eq!(keep(&["foo", "bar"]), vec![0, 1, 3]);
    // "Specifying --keep-tag '' will match untagged snapshots only."
    assert_eq!(keep(&[""]), vec![2]);
    // "The forget command will exit with an error if all snapshots in a
    // snapshot group would be removed as none of them have the specified
    // tags."
    let policy = Policy {
        tags: vec![TagList::parse("nothing")],
        ..Policy::default()
    };
    let err = plan(
        &policy,
        GroupBy::default(),
        snaps.clone(),
        &TimeZone::UTC,
        now(),
        false,
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("refusing to delete last snapshot of snapshot group \"host h, path [/p]\""),
        "{err}"
    );
}

#[test]
fn doc_duration_options_ignore_and_keep_future_snapshots() {
    // "All duration related options (--keep-{within-,}*) ignore snapshots
    // with a timestamp in the future (relative to when the forget command is
    // run) and these snapshots will hence not be removed."
    let now = utc("2024-05-10T00:00:00Z");
    let times = [
        utc("2024-04-01T00:00:00Z"),
        utc("2024-05-01T00:00:00Z"),
        utc("2024-05-08T00:00:00Z"),
        utc("2031-01-01T00:00:00Z"), // in the future
    ];
    let snaps = at_times(&times);
    let policy = Policy {
        within: Duration::parse("10d").unwrap(),
        ..Policy::default()
    };
    // 10 days before 8 May, not before 2031.
    let d = apply(&policy, &snaps, &TimeZone::UTC, now);
    assert_eq!(
        kept_times(&snaps, &d),
        vec![ns(times[3]), ns(times[2]), ns(times[1])]
    );
    let policy = Policy {
        within_monthly: Duration::parse("1m").unwrap(),
        ..Policy::default()
    };
    let d = apply(&policy, &snaps, &TimeZone::UTC, now);
    assert_eq!(kept_times(&snaps, &d), vec![ns(times[3]), ns(times[2])]);
}

#[test]
fn doc_oldest_snapshot_is_kept_and_marked() {
    // "If there are not enough snapshots to keep one for each duration
    // related --keep-{within-,}* option, the oldest snapshot is kept
    // additionally and marked as oldest in the output (e.g. oldest hourly
    // snapshot)."
    let times = [utc("2024-03-01T10:05:00Z"), utc("2024-03-01T10:45:00Z")];
    let snaps = at_times(&times);
    let policy = Policy {
        hourly: Count::Limit(5),
        ..Policy::default()
    };
    let d = apply(&policy, &snaps, &TimeZone::UTC, now());
    assert_eq!(d[0].matches, vec!["hourly snapshot"]);
    assert_eq!(d[1].matches, vec!["oldest hourly snapshot"]);
    assert_eq!((d[0].counters.hourly, d[1].counters.hourly), (4, 3));
}

#[test]
fn doc_unlimited_keeps_every_bucket() {
    // "A value of unlimited will be interpreted as "forever", i.e. "keep all"."
    let times = irregular_times(
        7,
        jiff::civil::date(2001, 1, 1),
        jiff::civil::date(2024, 1, 1),
    );
    let snaps = at_times(&times);
    let policy = Policy {
        monthly: Count::parse("unlimited").unwrap(),
        ..Policy::default()
    };
    let d = apply(&policy, &snaps, &TimeZone::UTC, now());
    let mut months: BTreeMap<(i16, i8), i64> = BTreeMap::new();
    for t in &times {
        let date = t.to_zoned(TimeZone::UTC).date();
        let e = months.entry((date.year(), date.month())).or_insert(ns(*t));
        *e = (*e).max(ns(*t));
    }
    let mut want: BTreeSet<i64> = months.values().copied().collect();
    want.insert(ns(times[0])); // the oldest, while counts are left
    let got: BTreeSet<i64> = kept_times(&snaps, &d).into_iter().collect();
    assert_eq!(got, want);
    assert!(d.iter().all(|k| k.counters.monthly == -1));
    assert_eq!(policy.to_string(), "keep all monthly snapshots");
}

#[test]
fn doc_empty_policy_is_refused_and_grouping_is_by_host_and_paths() {
    // "restic refuses to act on an "empty" policy. For example, if one were
    // to specify --keep-last 0 [...] restic will respond that no snapshots
    // will be removed."
    let snaps: Vec<(Id, Snapshot)> = vec![
        (
            id(0),
            snapshot(
                ns(utc("2024-01-01T00:00:00Z")),
                "kasimir",
                &["/home/user/work"],
                &[],
            ),
        ),
        (
            id(1),
            snapshot(
                ns(utc("2024-01-02T00:00:00Z")),
                "kasimir",
                &["/home/user/work"],
                &[],
            ),
        ),
        (
            id(2),
            snapshot(
                ns(utc("2024-01-03T00:00:00Z")),
                "luigi",
                &["/home/art"],
                &[],
            ),
        ),
        (
            id(3),
            snapshot(ns(utc("2024-01-04T00:00:00Z")), "kazik", &["/srv"], &[]),
        ),
        (
            id(4),
            snapshot(ns(utc("2024-01-05T00:00:00Z")), "luigi", &["/srv"], &[]),
        ),
    ];
    let empty = Policy {
        last: Count::parse("0").unwrap(),
        ..Policy::default()
    };
    let err = plan(
        &empty,
        GroupBy::default(),
        snaps.clone(),
        &TimeZone::UTC,
        now(),
        false,
    )
    .unwrap_err();
    assert!(matches!(err, larder::Error::Usage(_)), "{err:?}");
    assert!(err.to_string().contains("no policy was specified"), "{err}");
    // restic's `--unsafe-allow-remove-all`: the empty policy removes all.
    let all = plan(
        &empty,
        GroupBy::default(),
        snaps.clone(),
        &TimeZone::UTC,
        now(),
        true,
    )
    .unwrap();
    let removed: usize = all.iter().map(|p| p.remove().count()).sum();
    assert_eq!(removed, snaps.len());
    assert!(all.iter().all(|p| p.keep().next().is_none()));

    // "restic first loads the list of all snapshots and groups them by their
    // host name and paths [...] use --group-by ''" to apply it to all.
    let last1 = Policy {
        last: Count::Limit(1),
        ..Policy::default()
    };
    let plans = plan(
        &last1,
        GroupBy::default(),
        snaps.clone(),
        &TimeZone::UTC,
        now(),
        false,
    )
    .unwrap();
    assert_eq!(plans.len(), 4);
    let kept: BTreeSet<Id> = plans
        .iter()
        .flat_map(|p| p.keep().map(|(i, _)| *i))
        .collect();
    assert_eq!(kept, [id(1), id(2), id(3), id(4)].into_iter().collect());
    let one = plan(
        &last1,
        GroupBy::parse("").unwrap(),
        snaps,
        &TimeZone::UTC,
        now(),
        false,
    )
    .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(
        one[0].keep().map(|(i, _)| *i).collect::<Vec<_>>(),
        vec![id(4)]
    );
    assert_eq!(one[0].remove().count(), 4);
}

#[test]
fn json_report_has_restics_shape() {
    let tz = TimeZone::posix(BERLIN).unwrap();
    let snaps: Vec<(Id, Snapshot)> = vec![
        (
            id(0),
            snapshot(
                ns(utc("2024-07-01T10:00:00.5Z")),
                "h",
                &["/b", "/a"],
                &["t"],
            ),
        ),
        (
            id(1),
            snapshot(ns(utc("2024-07-02T10:00:00Z")), "h", &["/a", "/b"], &[]),
        ),
    ];
    let policy = Policy {
        last: Count::Limit(1),
        ..Policy::default()
    };
    let plans = plan(&policy, GroupBy::default(), snaps, &tz, now(), false).unwrap();
    let report: Vec<_> = plans
        .iter()
        .map(|p| p.report(|i, s| SnapshotJson::new(i, s, &tz)))
        .collect();
    let v = serde_json::to_value(&report).unwrap();
    let g = &v[0];
    assert_eq!(g["tags"], serde_json::Value::Null);
    assert_eq!(g["host"], "h");
    assert_eq!(g["paths"], serde_json::json!(["/a", "/b"]));
    assert_eq!(g["keep"][0]["id"], id(1).to_hex());
    assert_eq!(g["keep"][0]["short_id"], id(1).short());
    assert_eq!(g["keep"][0]["time"], "2024-07-02T12:00:00+02:00");
    assert!(g["keep"][0].get("tags").is_none());
    assert_eq!(g["remove"][0]["time"], "2024-07-01T12:00:00.5+02:00");
    assert_eq!(g["remove"][0]["tags"], serde_json::json!(["t"]));
    assert_eq!(
        g["reasons"][0]["matches"],
        serde_json::json!(["last snapshot"])
    );
    assert_eq!(g["reasons"][0]["counters"], serde_json::json!({}));
    assert_eq!(g["reasons"][0]["snapshot"]["id"], id(1).to_hex());
    // restic prints empty lists as null.
    let keep_all = Policy {
        last: Count::Limit(5),
        ..Policy::default()
    };
    let snaps = vec![(id(0), snapshot(0, "h", &["/a"], &[]))];
    let plans = plan(
        &keep_all,
        GroupBy::parse("host,tags").unwrap(),
        snaps,
        &tz,
        now(),
        false,
    )
    .unwrap();
    let v = serde_json::to_value(plans[0].report(|i, s| SnapshotJson::new(i, s, &tz))).unwrap();
    assert_eq!(v["remove"], serde_json::Value::Null);
    assert_eq!(v["paths"], serde_json::Value::Null);
    assert_eq!(v["reasons"][0]["counters"], serde_json::json!({"last": 4}));
}
