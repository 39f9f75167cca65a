//! Tests of schedule parsing and due times: shorthands, cron fields, intervals, refusals, and Europe/Berlin's clock changes.

use super::*;

use crate::schedule::testutil::{berlin, ts};

/// The first `n` due times after `from`.
fn upcoming(s: &Schedule, from: &str, n: usize, tz: &TimeZone) -> Vec<Timestamp> {
    let mut t = ts(from);
    (0..n)
        .map(|_| {
            t = s.next_after(t, tz).unwrap();
            t
        })
        .collect()
}

fn stamps(list: &[&str]) -> Vec<Timestamp> {
    list.iter().map(|s| ts(s)).collect()
}

#[test]
fn shorthands_fire_when_their_names_say() {
    let utc = TimeZone::UTC;
    // 2025-06-10 is a Tuesday.
    let from = "2025-06-10T10:20:00Z";
    let cases: &[(&str, [&str; 2])] = &[
        ("hourly", ["2025-06-10T11:00:00Z", "2025-06-10T12:00:00Z"]),
        ("daily", ["2025-06-11T00:00:00Z", "2025-06-12T00:00:00Z"]),
        ("@daily", ["2025-06-11T00:00:00Z", "2025-06-12T00:00:00Z"]),
        ("weekly", ["2025-06-15T00:00:00Z", "2025-06-22T00:00:00Z"]),
        ("@weekly", ["2025-06-15T00:00:00Z", "2025-06-22T00:00:00Z"]),
        ("monthly", ["2025-07-01T00:00:00Z", "2025-08-01T00:00:00Z"]),
        ("@yearly", ["2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"]),
        ("  Daily ", ["2025-06-11T00:00:00Z", "2025-06-12T00:00:00Z"]),
    ];
    for (text, want) in cases {
        let s = Schedule::parse(text).unwrap();
        assert_eq!(upcoming(&s, from, 2, &utc), stamps(want), "{text}");
    }
}

#[test]
fn cron_expressions_fire_on_their_fields() {
    let utc = TimeZone::UTC;
    let from = "2025-06-10T10:20:00Z"; // Tuesday
    let cases: &[(&str, &[&str])] = &[
        (
            "*/15 * * * *",
            &[
                "2025-06-10T10:30:00Z",
                "2025-06-10T10:45:00Z",
                "2025-06-10T11:00:00Z",
            ],
        ),
        // Weekdays at 02:30: Wednesday, Thursday, Friday, then Monday.
        (
            "30 2 * * 1-5",
            &[
                "2025-06-11T02:30:00Z",
                "2025-06-12T02:30:00Z",
                "2025-06-13T02:30:00Z",
                "2025-06-16T02:30:00Z",
            ],
        ),
        (
            "0 9 1,15 * *",
            &["2025-06-15T09:00:00Z", "2025-07-01T09:00:00Z"],
        ),
        (
            "0 0 * * SAT,SUN",
            &["2025-06-14T00:00:00Z", "2025-06-15T00:00:00Z"],
        ),
        (
            "0 0 * * 7",
            &["2025-06-15T00:00:00Z", "2025-06-22T00:00:00Z"],
        ),
        // Six fields: seconds first.
        (
            "*/30 * * * * *",
            &["2025-06-10T10:20:30Z", "2025-06-10T10:21:00Z"],
        ),
        // The 31st only exists in some months.
        (
            "0 12 31 * *",
            &["2025-07-31T12:00:00Z", "2025-08-31T12:00:00Z"],
        ),
    ];
    for (text, want) in cases {
        let s = Schedule::parse(text).unwrap();
        assert_eq!(upcoming(&s, from, want.len(), &utc), stamps(want), "{text}");
    }
}

#[test]
fn next_after_is_strict_and_ignores_fractions() {
    let s = Schedule::parse("hourly").unwrap();
    let utc = TimeZone::UTC;
    assert_eq!(
        s.next_after(ts("2025-06-10T10:00:00Z"), &utc).unwrap(),
        ts("2025-06-10T11:00:00Z")
    );
    assert_eq!(
        s.next_after(ts("2025-06-10T09:59:59.999Z"), &utc).unwrap(),
        ts("2025-06-10T10:00:00Z")
    );
}

#[test]
fn latest_due_at_or_before() {
    let utc = TimeZone::UTC;
    let daily = Schedule::parse("30 2 * * *").unwrap();
    assert_eq!(
        daily.latest_at_or_before(ts("2025-06-10T02:30:00Z"), &utc),
        Some(ts("2025-06-10T02:30:00Z"))
    );
    assert_eq!(
        daily.latest_at_or_before(ts("2025-06-10T02:29:59Z"), &utc),
        Some(ts("2025-06-09T02:30:00Z"))
    );
    let wd = Schedule::parse("0 3 * * 1-5").unwrap();
    // Sunday evening: the latest was Friday's.
    assert_eq!(
        wd.latest_at_or_before(ts("2025-06-15T20:00:00Z"), &utc),
        Some(ts("2025-06-13T03:00:00Z"))
    );
    assert_eq!(
        daily.first_due_between(ts("2025-06-10T02:30:00Z"), ts("2025-06-11T02:29:00Z"), &utc),
        None
    );
    assert_eq!(
        daily.first_due_between(ts("2025-06-10T02:30:00Z"), ts("2025-06-11T02:30:00Z"), &utc),
        Some(ts("2025-06-11T02:30:00Z"))
    );
}

#[test]
fn nominal_intervals() {
    let h = 3600;
    let cases: &[(&str, u64)] = &[
        ("hourly", h),
        ("daily", 24 * h),
        ("weekly", 7 * 24 * h),
        ("monthly", 31 * 24 * h),
        ("*/15 * * * *", 15 * 60),
        ("*/20 * * * * *", 20),
        // Friday 02:00 to Monday 02:00.
        ("0 2 * * 1-5", 72 * h),
        // 05:59 to 00:00 the next day.
        ("* 0-5 * * *", 18 * h + 60),
    ];
    for (text, secs) in cases {
        let s = Schedule::parse(text).unwrap();
        assert_eq!(s.interval(), Duration::from_secs(*secs), "{text}");
    }
}

#[test]
fn bad_schedules_are_refused_with_a_reason() {
    let cases: &[(&str, &str)] = &[
        ("dayly", "found 1 field"),
        ("@reboot", "the @ forms are"),
        ("61 * * * *", "dayly"),
        ("* * * *", "found 4 field"),
        ("0 0 31 2 *", "never matches"),
        ("", "found 0 field"),
    ];
    for (text, want) in cases {
        let err = Schedule::parse(text).unwrap_err();
        assert!(err.contains(&format!("{text:?}")), "{err}");
        if *text != "61 * * * *" {
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}

#[test]
fn berlin_daily_0230_on_the_day_clocks_go_forward_runs_after_the_gap() {
    let tz = berlin();
    let s = Schedule::parse("30 2 * * *").unwrap();
    // 2025-03-30: 02:00 CET becomes 03:00 CEST; 02:30 does not exist.
    let got = upcoming(&s, "2025-03-29T12:00:00+01:00", 3, &tz);
    let want = stamps(&[
        "2025-03-30T03:00:00+02:00",
        "2025-03-31T02:30:00+02:00",
        "2025-04-01T02:30:00+02:00",
    ]);
    assert_eq!(got, want);
}

#[test]
fn berlin_daily_0230_on_the_day_clocks_go_back_runs_once() {
    let tz = berlin();
    let s = Schedule::parse("30 2 * * *").unwrap();
    // 2025-10-26: 03:00 CEST becomes 02:00 CET; 02:30 happens twice.
    let got = upcoming(&s, "2025-10-25T12:00:00+02:00", 3, &tz);
    let want = stamps(&[
        "2025-10-26T02:30:00+02:00",
        "2025-10-27T02:30:00+01:00",
        "2025-10-28T02:30:00+01:00",
    ]);
    assert_eq!(got, want);
}

#[test]
fn berlin_hourly_runs_every_real_hour_across_both_changes() {
    let tz = berlin();
    let s = Schedule::parse("hourly").unwrap();
    let spring = upcoming(&s, "2025-03-30T00:30:00+01:00", 3, &tz);
    assert_eq!(
        spring,
        stamps(&[
            "2025-03-30T01:00:00+01:00",
            "2025-03-30T03:00:00+02:00",
            "2025-03-30T04:00:00+02:00",
        ])
    );
    let autumn = upcoming(&s, "2025-10-26T00:30:00+02:00", 4, &tz);
    assert_eq!(
        autumn,
        stamps(&[
            "2025-10-26T01:00:00+02:00",
            "2025-10-26T02:00:00+02:00",
            "2025-10-26T02:00:00+01:00",
            "2025-10-26T03:00:00+01:00",
        ])
    );
    // In both cases consecutive runs are exactly one real hour apart.
    for w in spring.windows(2).chain(autumn.windows(2)) {
        assert_eq!(
            w[1].duration_since(w[0]),
            jiff::SignedDuration::from_hours(1)
        );
    }
}

/// Around both changes, `latest_at_or_before` agrees with the forward list
/// at every minute (and a few odd seconds).
#[test]
fn latest_agrees_with_next_across_clock_changes() {
    let tz = berlin();
    for text in [
        "30 2 * * *",
        "hourly",
        "*/20 * * * *",
        "0 2 * * *",
        "0 3 * * *",
    ] {
        let s = Schedule::parse(text).unwrap();
        for day in ["2025-03-29T18:00:00Z", "2025-10-25T18:00:00Z"] {
            let start = ts(day);
            let end = start + jiff::SignedDuration::from_hours(36);
            let mut due = vec![];
            let mut t = start - jiff::SignedDuration::from_hours(30);
            while t <= end {
                t = s.next_after(t, &tz).unwrap();
                due.push(t);
            }
            let mut probe = start;
            while probe <= end {
                let want = due.iter().copied().filter(|d| *d <= probe).max();
                assert_eq!(s.latest_at_or_before(probe, &tz), want, "{text} at {probe}");
                probe += jiff::SignedDuration::from_secs(60 * 7 + 13);
            }
        }
    }
}
