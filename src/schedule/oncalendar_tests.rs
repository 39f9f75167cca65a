//! Tests of the OnCalendar= translation, checked against `systemd-analyze calendar` when it is installed.

use crate::schedule::calendar::Schedule;
use crate::schedule::testutil::{berlin, ts};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use std::process::Command;

/// Every schedule form larder supports, for the systemd comparison.
const FORMS: &[&str] = &[
    "hourly",
    "daily",
    "@daily",
    "weekly",
    "monthly",
    "yearly",
    "*/15 * * * *",
    "30 2 * * 1-5",
    "0 9 1,15 * *",
    "0 0 * * SAT,SUN",
    "0 */6 * * *",
    "*/30 * * * * *",
    "0 12 31 * *",
    "5 4 * */3 *",
    "0 0 * * 0-2",
    "15,45 8-18 * * *",
    "0 22 * * 5-7",
    "10-20 3 * * *",
    "0 0 1-7 * +MON",
];

#[test]
fn on_calendar_expressions() {
    let cases: &[(&str, &str)] = &[
        ("hourly", "*-*-* *:00:00"),
        ("daily", "*-*-* 00:00:00"),
        ("weekly", "Sun *-*-* 00:00:00"),
        ("monthly", "*-*-01 00:00:00"),
        ("yearly", "*-01-01 00:00:00"),
        ("*/15 * * * *", "*-*-* *:00/15:00"),
        ("30 2 * * 1-5", "Mon..Fri *-*-* 02:30:00"),
        ("0 9 1,15 * *", "*-*-01,15 09:00:00"),
        ("0 0 * * SAT,SUN", "Sat,Sun *-*-* 00:00:00"),
        ("0 0 * * 0-2", "Mon,Tue,Sun *-*-* 00:00:00"),
        ("0 */6 * * *", "*-*-* 00/6:00:00"),
        ("*/30 * * * * *", "*-*-* *:*:00/30"),
        ("5 4 * */3 *", "*-01/3-* 04:05:00"),
        ("10-20 3 * * *", "*-*-* 03:10..20:00"),
        ("0 0 1-7 * +MON", "Mon *-*-01..07 00:00:00"),
    ];
    for (text, want) in cases {
        let s = Schedule::parse(text).unwrap();
        assert_eq!(s.on_calendar().as_deref(), Ok(*want), "{text}");
    }
}

#[test]
fn forms_without_an_on_calendar_equivalent_are_refused() {
    for (text, why) in [
        ("0 0 L * *", "L, W or #"),
        ("0 0 * * 5#2", "L, W or #"),
        ("0 0 15W * *", "L, W or #"),
        ("0 0 1 * 1", "either one"),
    ] {
        let err = Schedule::parse(text).unwrap().on_calendar().unwrap_err();
        assert!(err.contains(why) && err.contains(text), "{text}: {err}");
    }
}

/// The next `n` elapses `systemd-analyze calendar` computes for `expr` in
/// `zone` after `base`; `None` (with the reason printed) when the tool is
/// not installed.
fn systemd_elapses(expr: &str, zone: &str, base: Timestamp, n: usize) -> Option<Vec<Timestamp>> {
    let out = match Command::new("systemd-analyze")
        .env("TZ", zone)
        .arg("calendar")
        .arg(format!("--iterations={n}"))
        .arg(format!("--base-time=@{}", base.as_second()))
        .arg(expr)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            println!("skipping the systemd comparison: systemd-analyze: {e}");
            return None;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "systemd-analyze refused {expr:?}: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let times = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("(in UTC): "))
        .map(|l| {
            // "Mon 2025-03-31 00:30:00 UTC"
            let parts: Vec<&str> = l.split_whitespace().collect();
            let civil: jiff::civil::DateTime =
                format!("{}T{}", parts[1], parts[2]).parse().unwrap();
            civil.to_zoned(TimeZone::UTC).unwrap().timestamp()
        })
        .collect::<Vec<_>>();
    assert_eq!(times.len(), n, "{expr:?}: {text}");
    Some(times)
}

fn ours(s: &Schedule, base: Timestamp, n: usize, tz: &TimeZone) -> Vec<Timestamp> {
    let mut t = base;
    (0..n)
        .map(|_| {
            t = s.next_after(t, tz).unwrap();
            t
        })
        .collect()
}

#[test]
fn systemd_accepts_every_form_and_agrees_on_ordinary_days() {
    let tz = berlin();
    for base in ["2025-06-10T10:20:00Z", "2025-12-30T23:59:30Z"] {
        let base = ts(base);
        for text in FORMS {
            let s = Schedule::parse(text).unwrap();
            let expr = s.on_calendar().unwrap();
            let Some(theirs) = systemd_elapses(&expr, "Europe/Berlin", base, 5) else {
                return;
            };
            assert_eq!(
                theirs,
                ours(&s, base, 5, &tz),
                "{text} as {expr:?} from {base}"
            );
        }
    }
}

/// On the two switch days systemd has exactly the documented differences.
#[test]
fn systemd_differs_only_as_documented_on_clock_changes() {
    let tz = berlin();
    // Spring: larder runs the 02:30 job at 03:00 CEST, systemd skips the day.
    let s = Schedule::parse("30 2 * * *").unwrap();
    let base = ts("2025-03-29T12:00:00+01:00");
    let mine = ours(&s, base, 5, &tz);
    let Some(theirs) = systemd_elapses(&s.on_calendar().unwrap(), "Europe/Berlin", base, 4) else {
        return;
    };
    assert_eq!(mine[0], ts("2025-03-30T03:00:00+02:00"));
    assert_eq!(theirs, mine[1..]);
    // Autumn: larder runs the hourly job at both 02:00s, systemd at the first.
    let s = Schedule::parse("hourly").unwrap();
    let base = ts("2025-10-26T00:30:00+02:00");
    let mine = ours(&s, base, 6, &tz);
    let theirs = systemd_elapses(&s.on_calendar().unwrap(), "Europe/Berlin", base, 5).unwrap();
    assert_eq!(mine[2], ts("2025-10-26T02:00:00+01:00"));
    let without: Vec<_> = mine.iter().copied().filter(|t| *t != mine[2]).collect();
    assert_eq!(theirs, without);
    // A fixed time outside the switching hour agrees on both days.
    let s = Schedule::parse("30 3 * * *").unwrap();
    for base in ["2025-03-29T12:00:00+01:00", "2025-10-25T12:00:00+02:00"] {
        let base = ts(base);
        let theirs = systemd_elapses(&s.on_calendar().unwrap(), "Europe/Berlin", base, 3).unwrap();
        assert_eq!(theirs, ours(&s, base, 3, &tz));
    }
}
