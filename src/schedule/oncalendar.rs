//! The systemd `OnCalendar=` expression equivalent to a [`Schedule`].
//!
//! Every cron field maps to systemd's calendar syntax (lists, `a..b`
//! ranges, `a/s` repetitions, weekday names). Refused, with the reason:
//! `L`, `W` and `#` (systemd has no such day rules), and a restricted day of
//! month together with a restricted weekday, which cron reads as "either"
//! and systemd as "both".
//!
//! On the two days a year when the clocks change, systemd differs from
//! larder's own due times (systemd issues 5595 and 8647): a time that does
//! not exist that day is skipped instead of run after the gap, and an hour
//! that happens twice fires only the first time. The timer's runs are then
//! one fewer than [`Schedule::next_after`] lists, and `status` reports the
//! missed one as `late` until the next run.

use super::calendar::Schedule;
use croner::CronComponent;

const WEEKDAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

impl Schedule {
    /// The `OnCalendar=` value, or why this schedule has none.
    pub fn on_calendar(&self) -> Result<String, String> {
        let p = self.pattern();
        if p.days.has_modifiers() || p.days_of_week.has_modifiers() {
            return Err(format!(
                "schedule {:?} uses L, W or #, which systemd's OnCalendar= cannot express; \
                 use `schedule install --cron` or `larder daemon`",
                self.as_str()
            ));
        }
        let dom_free = p.is_dom_wildcard();
        let dow_free = p.is_dow_wildcard();
        if !dom_free && !dow_free && !p.matches_dom_and_dow() {
            return Err(format!(
                "schedule {:?} restricts both the day of month and the weekday, which cron \
                 reads as either one and systemd as both; restrict only one, or use \
                 `schedule install --cron` or `larder daemon`",
                self.as_str()
            ));
        }
        let weekday = if dow_free {
            String::new()
        } else {
            format!("{} ", weekdays(&p.days_of_week))
        };
        let day = if dom_free {
            "*".to_string()
        } else {
            field(&p.days, 1, 31)
        };
        Ok(format!(
            "{weekday}*-{}-{day} {}:{}:{}",
            field(&p.months, 1, 12),
            field(&p.hours, 0, 23),
            field(&p.minutes, 0, 59),
            field(&p.seconds, 0, 59),
        ))
    }
}

/// One numeric field: `*` when every value is set, `a/s` for a repetition
/// that runs to the end of the field, else a list of values and `a..b` runs.
fn field(c: &CronComponent, lo: u16, hi: u16) -> String {
    let values: Vec<u16> = c
        .values()
        .into_iter()
        .filter(|v| (lo..=hi).contains(v))
        .collect();
    if values.len() == usize::from(hi - lo + 1) {
        return "*".into();
    }
    if let [a, b, ..] = values[..] {
        let step = b - a;
        let progression = step > 1
            && values.windows(2).all(|w| w[1] - w[0] == step)
            && values.last().is_some_and(|l| l + step > hi);
        if progression {
            return format!("{a:02}/{step}");
        }
    }
    runs(&values)
        .into_iter()
        .map(|(a, b)| match b - a {
            0 => format!("{a:02}"),
            _ => format!("{a:02}..{b:02}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The weekday field in systemd's Monday-first names.
fn weekdays(c: &CronComponent) -> String {
    // cron counts Sunday as 0 (or 7); systemd's week starts on Monday.
    let mut days: Vec<u16> = c
        .values()
        .into_iter()
        .map(|d| (d + 6) % 7)
        .collect::<Vec<_>>();
    days.sort_unstable();
    days.dedup();
    runs(&days)
        .into_iter()
        .map(|(a, b)| {
            let (a, b) = (WEEKDAYS[usize::from(a)], WEEKDAYS[usize::from(b)]);
            if a == b {
                a.to_string()
            } else {
                format!("{a}..{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Sorted values grouped into runs of consecutive values (a run of two is
/// written as two single values, as systemd normalises it).
fn runs(values: &[u16]) -> Vec<(u16, u16)> {
    let mut out: Vec<(u16, u16)> = Vec::new();
    for &v in values {
        match out.last_mut() {
            Some((_, end)) if *end + 1 == v => *end = v,
            _ => out.push((v, v)),
        }
    }
    out.into_iter()
        .flat_map(|(a, b)| {
            if b == a + 1 {
                vec![(a, a), (b, b)]
            } else {
                vec![(a, b)]
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "oncalendar_tests.rs"]
mod tests;
