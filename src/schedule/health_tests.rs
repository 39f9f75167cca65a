//! Tests of the due rule and the health words at chosen instants: never, ok, late, failing, catch-up, DST.

use super::*;
use crate::schedule::testutil::{berlin, ts};

fn run(start: &str, result: RunResult) -> RunRecord {
    let started = ts(start);
    RunRecord {
        id: 0,
        profile: "p".into(),
        started,
        ended: (result != RunResult::Running).then(|| started + SignedDuration::from_mins(5)),
        result,
        exit_code: Some(i32::from(result == RunResult::Failed)),
        error: (result == RunResult::Failed).then(|| "repository /r does not exist".to_string()),
        snapshot_id: None,
        files_added: None,
        bytes_added: None,
        pid: 1,
        steps: vec![],
    }
}

/// A history from runs listed oldest first.
fn history(runs: &[(&str, RunResult)]) -> History {
    let runs: Vec<RunRecord> = runs.iter().map(|(s, r)| run(s, *r)).collect();
    let latest = |f: &dyn Fn(&RunRecord) -> bool| runs.iter().rev().find(|r| f(r)).cloned();
    History {
        last_run: runs.last().cloned(),
        last_finished: latest(&|r| matches!(r.result, RunResult::Ok | RunResult::Failed)),
        last_success: latest(&|r| r.result == RunResult::Ok),
    }
}

fn daily() -> Schedule {
    Schedule::parse("0 2 * * *").unwrap()
}

const UTC: TimeZone = TimeZone::UTC;

#[test]
fn never_run_is_never_and_due_at_once() {
    let h = History::default();
    let now = ts("2025-06-10T14:00:00Z");
    let got = assess(Some(&daily()), &UTC, now, &h, false);
    assert_eq!(got.word, Word::Never);
    assert_eq!(got.due_since, Some(ts("2025-06-10T02:00:00Z")));
    assert_eq!(got.next_due, Some(ts("2025-06-11T02:00:00Z")));
    assert_eq!(
        assess(Some(&daily()), &UTC, now, &h, true).reason,
        "the first run is in progress"
    );
}

#[test]
fn a_recent_success_is_ok_and_not_due() {
    let h = history(&[("2025-06-10T02:00:07Z", RunResult::Ok)]);
    let got = assess(Some(&daily()), &UTC, ts("2025-06-10T14:00:00Z"), &h, false);
    assert_eq!((got.word, got.due_since), (Word::Ok, None));
    assert_eq!(got.next_due, Some(ts("2025-06-11T02:00:00Z")));
    // Right at the next due time it is due again.
    assert_eq!(
        due_time(&daily(), &UTC, ts("2025-06-11T02:00:00Z"), &h),
        Some(ts("2025-06-11T02:00:00Z"))
    );
}

#[test]
fn catch_up_after_the_machine_was_off_for_three_days() {
    let s = daily();
    let mut h = history(&[("2025-06-01T02:00:00Z", RunResult::Ok)]);
    // Switched off after that run; back on 2025-06-04 at 09:00.
    let now = ts("2025-06-04T09:00:00Z");
    let got = assess(Some(&s), &UTC, now, &h, false);
    // One catch-up run for the latest missed due time, not three.
    assert_eq!(got.due_since, Some(ts("2025-06-04T02:00:00Z")));
    assert_eq!(got.word, Word::Late);
    assert!(
        got.reason
            .contains("no successful run since 2025-06-01T02:00:00Z"),
        "{}",
        got.reason
    );
    // Off for one night only: late because that night's run did not start.
    let one_night = assess(Some(&s), &UTC, ts("2025-06-02T09:00:00Z"), &h, false);
    assert_eq!(one_night.word, Word::Late);
    assert_eq!(
        one_night.reason,
        "a run was due at 2025-06-02T02:00:00Z and has not started"
    );
    // The catch-up run succeeds: nothing more is due, and all is well.
    h = history(&[
        ("2025-06-01T02:00:00Z", RunResult::Ok),
        ("2025-06-04T09:00:00Z", RunResult::Ok),
    ]);
    let later = ts("2025-06-04T09:30:00Z");
    let got = assess(Some(&s), &UTC, later, &h, false);
    assert_eq!((got.word, got.due_since), (Word::Ok, None));
    assert_eq!(got.next_due, Some(ts("2025-06-05T02:00:00Z")));
}

#[test]
fn a_failed_last_run_is_failing_and_waits_for_the_next_due_time() {
    let s = daily();
    let h = history(&[
        ("2025-06-09T02:00:00Z", RunResult::Ok),
        ("2025-06-10T02:00:00Z", RunResult::Failed),
    ]);
    let got = assess(Some(&s), &UTC, ts("2025-06-10T08:00:00Z"), &h, false);
    assert_eq!(got.word, Word::Failing);
    assert!(
        got.reason.contains("repository /r does not exist"),
        "{}",
        got.reason
    );
    assert_eq!(got.due_since, None);
    assert_eq!(
        due_time(&s, &UTC, ts("2025-06-11T02:00:00Z"), &h),
        Some(ts("2025-06-11T02:00:00Z"))
    );
    // Failing wins over late.
    let got = assess(Some(&s), &UTC, ts("2025-06-20T08:00:00Z"), &h, false);
    assert_eq!(got.word, Word::Failing);
}

#[test]
fn a_due_run_not_started_within_the_grace_is_late() {
    let s = daily(); // interval 24 h, grace 1 h
    let h = history(&[("2025-06-09T02:00:00Z", RunResult::Ok)]);
    let at = |t: &str| assess(Some(&s), &UTC, ts(t), &h, false).word;
    assert_eq!(at("2025-06-10T02:59:00Z"), Word::Ok);
    assert_eq!(at("2025-06-10T03:00:01Z"), Word::Late);
    // While a run is in progress, a due time passing is not "not started".
    assert_eq!(
        assess(Some(&s), &UTC, ts("2025-06-10T03:30:00Z"), &h, true).word,
        Word::Ok
    );
    // For a 15-minute schedule the grace is 15 minutes.
    let q = Schedule::parse("*/15 * * * *").unwrap();
    let h = history(&[("2025-06-10T10:00:00Z", RunResult::Ok)]);
    assert_eq!(
        assess(Some(&q), &UTC, ts("2025-06-10T10:29:00Z"), &h, false).word,
        Word::Ok
    );
    assert_eq!(
        assess(Some(&q), &UTC, ts("2025-06-10T10:31:00Z"), &h, false).word,
        Word::Late
    );
}

#[test]
fn no_success_for_more_than_twice_the_interval_is_late() {
    let s = Schedule::parse("hourly").unwrap(); // 2 I + G = 2 h + 1 h
    // Runs keep starting on time but get interrupted (say, the machine
    // sleeps mid-run): the due-run rule is satisfied, the success rule not.
    let h = history(&[
        ("2025-06-10T06:00:00Z", RunResult::Ok),
        ("2025-06-10T07:00:00Z", RunResult::Interrupted),
        ("2025-06-10T08:00:00Z", RunResult::Interrupted),
        ("2025-06-10T09:00:00Z", RunResult::Interrupted),
    ]);
    let got = assess(Some(&s), &UTC, ts("2025-06-10T08:59:00Z"), &h, true);
    assert_eq!(got.word, Word::Ok);
    let got = assess(Some(&s), &UTC, ts("2025-06-10T09:01:00Z"), &h, true);
    assert_eq!(got.word, Word::Late);
    assert!(got.reason.contains("more than twice"), "{}", got.reason);
    // Interrupted runs do not count as attempts: the profile is due.
    assert_eq!(
        due_time(&s, &UTC, ts("2025-06-10T09:01:00Z"), &h),
        Some(ts("2025-06-10T09:00:00Z"))
    );
}

#[test]
fn without_a_schedule_only_never_failing_and_ok() {
    let h = history(&[("2020-01-01T00:00:00Z", RunResult::Ok)]);
    let got = assess(None, &UTC, ts("2025-06-10T00:00:00Z"), &h, false);
    assert_eq!(
        (got.word, got.next_due, got.due_since),
        (Word::Ok, None, None)
    );
}

#[test]
fn prune_and_check_due_from_their_own_schedules() {
    let weekly = Schedule::parse("weekly").unwrap(); // Sundays 00:00
    // Pruned on Sunday 2025-06-08 at 02:10.
    let last = Some(ts("2025-06-08T02:10:00Z"));
    assert_eq!(
        step_due(&weekly, &UTC, ts("2025-06-12T02:00:00Z"), last),
        None
    );
    assert_eq!(
        step_due(&weekly, &UTC, ts("2025-06-16T02:00:00Z"), last),
        Some(ts("2025-06-15T00:00:00Z"))
    );
    assert_eq!(
        step_due(&weekly, &UTC, ts("2025-06-12T02:00:00Z"), None),
        Some(ts("2025-06-08T00:00:00Z"))
    );
}

#[test]
fn berlin_spring_forward_daily_0230_is_due_at_0300() {
    let tz = berlin();
    let s = Schedule::parse("30 2 * * *").unwrap();
    let h = history(&[("2025-03-29T02:30:00+01:00", RunResult::Ok)]);
    assert_eq!(due_time(&s, &tz, ts("2025-03-30T02:59:00+02:00"), &h), None);
    assert_eq!(
        due_time(&s, &tz, ts("2025-03-30T03:10:00+02:00"), &h),
        Some(ts("2025-03-30T03:00:00+02:00"))
    );
}

#[test]
fn grace_is_clamped() {
    assert_eq!(grace(Duration::from_secs(60)), Duration::from_secs(300));
    assert_eq!(grace(Duration::from_secs(900)), Duration::from_secs(900));
    assert_eq!(grace(Duration::from_secs(86400)), Duration::from_secs(3600));
}
