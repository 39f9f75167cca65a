//! Calendar durations of `--keep-within*` (`1y2m3d4h`), parsed and printed as
//! restic does, and measured back from an instant the way restic measures
//! them: Go's `AddDate(-years, -months, -days)` on the wall clock, then minus
//! the hours as absolute time.

use crate::error::{Error, Result};
use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{Span, Timestamp};
use std::fmt;
use std::str::FromStr;

/// A duration of years, months, days and hours; all parts are non-negative.
/// The zero duration means "not set".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Duration {
    pub years: i64,
    pub months: i64,
    pub days: i64,
    pub hours: i64,
}

impl Duration {
    /// Parses restic's syntax: numbers each followed by a unit `y`, `m`
    /// (months), `d` or `h`, in any order (a repeated unit overrides the
    /// earlier one), e.g. `1y2m3d4h`. Surrounding whitespace is ignored;
    /// the empty string is the zero duration. Negative parts are refused.
    pub fn parse(text: &str) -> Result<Duration> {
        let bad = |why: String| {
            Error::Usage(format!(
                "invalid duration {text:?}: {why} (expected numbers with units y, m, d, h, e.g. 1y2m3d4h)"
            ))
        };
        let mut d = Duration::default();
        let mut rest = text.trim();
        while !rest.is_empty() {
            let negative = rest.starts_with('-');
            let body = rest.strip_prefix('-').unwrap_or(rest);
            let digits = body.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(bad("no number found".into()));
            }
            let num: i64 = body[..digits]
                .parse()
                .map_err(|_| bad(format!("number {} is too large", &body[..digits])))?;
            if negative {
                return Err(bad("negative values are not allowed".into()));
            }
            let mut tail = body[digits..].chars();
            let slot = match tail.next() {
                Some('y') => &mut d.years,
                Some('m') => &mut d.months,
                Some('d') => &mut d.days,
                Some('h') => &mut d.hours,
                Some(u) => return Err(bad(format!("invalid unit {u:?} after number {num}"))),
                None => return Err(bad(format!("no unit found after number {num}"))),
            };
            *slot = num;
            rest = tail.as_str();
        }
        Ok(d)
    }

    /// Whether every part is zero (the option is not set).
    pub fn is_zero(&self) -> bool {
        *self == Duration::default()
    }

    /// The instant this duration before `latest`, as restic computes it: the
    /// wall clock of `latest` in `tz` moved back by whole years and months
    /// (a day past the end of the month rolls over into the next month, as
    /// Go's `AddDate` does: one month before 31 March is 2 or 3 March) and
    /// then by days, mapped back to an instant as Go's `time.Date` maps wall
    /// clocks that fall into a DST gap or fold, and finally moved back by the
    /// hours as absolute time. `None` when the result lies before the
    /// earliest representable instant, i.e. before any snapshot.
    pub fn before(&self, latest: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let wall = tz.to_datetime(latest);
        let month_index = i64::from(wall.year())
            .checked_mul(12)?
            .checked_add(i64::from(wall.month()) - 1)?
            .checked_sub(self.years.checked_mul(12)?)?
            .checked_sub(self.months)?;
        let year = i16::try_from(month_index.div_euclid(12)).ok()?;
        let month = i8::try_from(month_index.rem_euclid(12) + 1).ok()?;
        let first = Date::new(year, month, 1).ok()?;
        let day_offset = (i64::from(wall.day()) - 1).checked_sub(self.days)?;
        let date = first
            .checked_add(Span::new().try_days(day_offset).ok()?)
            .ok()?;
        let moved = go_wall_to_instant(date.to_datetime(wall.time()), tz)?;
        moved
            .checked_sub(Span::new().try_hours(self.hours).ok()?)
            .ok()
    }
}

/// Maps a wall clock time in `tz` to an instant exactly as Go's `time.Date`
/// does (restic's `AddDate` goes through it). Go reads the zone's offset at
/// the wall clock taken as UTC, then re-reads the offset at the instant that
/// first offset yields, and uses the second one. For a wall clock that does
/// not exist (spring gap) or exists twice (autumn fold), the result hence
/// depends on the sign of the zone's offset: east of Greenwich (Berlin) Go
/// picks the later reading, west of it (New York) the earlier one.
fn go_wall_to_instant(wall: DateTime, tz: &TimeZone) -> Option<Timestamp> {
    let as_utc = jiff::tz::Offset::UTC.to_timestamp(wall).ok()?;
    let first = tz.to_offset(as_utc);
    let guess = first.to_timestamp(wall).ok()?;
    tz.to_offset(guess).to_timestamp(wall).ok()
}

impl FromStr for Duration {
    type Err = Error;
    fn from_str(s: &str) -> Result<Duration> {
        Duration::parse(s)
    }
}

/// restic's rendering: the non-zero parts in the order y, m, d, h
/// (`1y2m3d4h`); the zero duration renders empty.
impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, unit) in [
            (self.years, 'y'),
            (self.months, 'm'),
            (self.days, 'd'),
            (self.hours, 'h'),
        ] {
            if n != 0 {
                write!(f, "{n}{unit}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Europe/Berlin's rules since 1996 as a POSIX TZ string, so that the
    /// tests need no time zone database.
    const BERLIN: &str = "CET-1CEST,M3.5.0,M10.5.0/3";
    /// America/New_York's rules since 2007.
    const NEW_YORK: &str = "EST5EDT,M3.2.0,M11.1.0";

    fn d(y: i64, m: i64, days: i64, h: i64) -> Duration {
        Duration {
            years: y,
            months: m,
            days,
            hours: h,
        }
    }

    #[test]
    fn parses_restic_syntax() {
        assert_eq!(Duration::parse("1y2m3d4h").unwrap(), d(1, 2, 3, 4));
        assert_eq!(Duration::parse("4h3d").unwrap(), d(0, 0, 3, 4));
        assert_eq!(Duration::parse("  7d ").unwrap(), d(0, 0, 7, 0));
        // A repeated unit overrides the earlier value, as in restic.
        assert_eq!(Duration::parse("2d5d").unwrap(), d(0, 0, 5, 0));
        assert_eq!(Duration::parse("").unwrap(), Duration::default());
        assert!(Duration::parse("0d").unwrap().is_zero());
        assert!(!Duration::parse("1h").unwrap().is_zero());
    }

    #[test]
    fn refuses_bad_durations_with_usage_errors() {
        for bad in [
            "5",
            "d",
            "1w",
            "-1d",
            "1.5d",
            "1y 2m",
            "+1d",
            "99999999999999999999d",
            "1dx",
        ] {
            match Duration::parse(bad) {
                Err(Error::Usage(msg)) => assert!(msg.contains(bad), "{msg}"),
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn displays_like_restic() {
        assert_eq!(d(1, 2, 3, 4).to_string(), "1y2m3d4h");
        assert_eq!(d(0, 5, 0, 0).to_string(), "5m");
        assert_eq!(d(2, 0, 0, 7).to_string(), "2y7h");
        assert_eq!(Duration::default().to_string(), "");
        for s in ["1y", "3m7d", "36h", "2y5m7d3h"] {
            assert_eq!(Duration::parse(s).unwrap().to_string(), s);
        }
    }

    fn at(tz: &TimeZone, s: &str) -> Timestamp {
        let dt: DateTime = s.parse().unwrap();
        tz.to_ambiguous_timestamp(dt).compatible().unwrap()
    }

    #[test]
    fn months_roll_over_like_go_add_date() {
        let utc = TimeZone::UTC;
        let cases = [
            // 31 March minus a month is "31 February": 2 March in a leap year.
            ("2024-03-31T12:00", d(0, 1, 0, 0), "2024-03-02T12:00"),
            ("2023-03-31T12:00", d(0, 1, 0, 0), "2023-03-03T12:00"),
            // 29 February minus a year is "29 February 2023": 1 March 2023.
            ("2024-02-29T08:00", d(1, 0, 0, 0), "2023-03-01T08:00"),
            // Days borrow across month and year ends.
            ("2024-03-01T00:00", d(0, 0, 1, 0), "2024-02-29T00:00"),
            ("2024-01-05T06:00", d(0, 1, 10, 0), "2023-11-25T06:00"),
            ("2024-12-31T23:00", d(1, 2, 3, 4), "2023-10-28T19:00"),
            // Hours cross midnight.
            ("2024-01-01T02:00", d(0, 0, 0, 5), "2023-12-31T21:00"),
        ];
        for (latest, dur, want) in cases {
            let got = dur.before(at(&utc, latest), &utc).unwrap();
            assert_eq!(got, at(&utc, want), "{latest} minus {dur}");
        }
    }

    #[test]
    fn dst_gap_and_fold_follow_go() {
        let berlin = TimeZone::posix(BERLIN).unwrap();
        let ny = TimeZone::posix(NEW_YORK).unwrap();
        let instant = |s: &str| s.parse::<Timestamp>().unwrap();
        // Berlin, 31 March 2024: 02:30 does not exist; Go lands on 03:30 CEST.
        let latest = instant("2024-05-01T00:30:00Z"); // 02:30 CEST
        assert_eq!(
            d(0, 1, 1, 0).before(latest, &berlin).unwrap(),
            instant("2024-03-31T01:30:00Z")
        );
        // Berlin, 27 October 2024: 02:30 exists twice; Go takes the CET one.
        let latest = instant("2024-10-28T01:30:00Z"); // 02:30 CET
        assert_eq!(
            d(0, 0, 1, 0).before(latest, &berlin).unwrap(),
            instant("2024-10-27T01:30:00Z")
        );
        // New York, 10 March 2024: 02:30 does not exist; Go lands on 01:30 EST.
        let latest = instant("2024-04-10T06:30:00Z"); // 02:30 EDT
        assert_eq!(
            d(0, 1, 0, 0).before(latest, &ny).unwrap(),
            instant("2024-03-10T06:30:00Z")
        );
        // New York, 3 November 2024: 01:30 exists twice; Go takes the EDT one.
        let latest = instant("2024-11-04T06:30:00Z"); // 01:30 EST
        assert_eq!(
            d(0, 0, 1, 0).before(latest, &ny).unwrap(),
            instant("2024-11-03T05:30:00Z")
        );
        // Hours are absolute time: 04:00 CEST minus 3 h is 00:00 CET.
        let latest = instant("2024-03-31T02:00:00Z");
        assert_eq!(
            d(0, 0, 0, 3).before(latest, &berlin).unwrap(),
            instant("2024-03-30T23:00:00Z")
        );
    }

    #[test]
    fn huge_durations_reach_before_every_snapshot() {
        let utc = TimeZone::UTC;
        let latest = at(&utc, "2024-06-01T00:00");
        assert_eq!(d(100_000, 0, 0, 0).before(latest, &utc), None);
        assert_eq!(d(i64::MAX, 0, 0, 0).before(latest, &utc), None);
        assert_eq!(d(0, 0, 0, i64::MAX).before(latest, &utc), None);
        assert_eq!(d(0, 0, i64::MAX, 0).before(latest, &utc), None);
        assert!(d(300, 0, 0, 0).before(latest, &utc).is_some());
    }
}
