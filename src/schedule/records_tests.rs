//! Tests of the run database: recording runs and steps, history queries, closing runs left unfinished.

use super::*;
use crate::schedule::testutil::ts;

fn step(name: &str, status: StepStatus, at: &str) -> StepRecord {
    StepRecord {
        step: name.into(),
        status,
        message: format!("{name} {}", status.as_str()),
        started: ts(at),
        ended: ts(at),
        attempts: 1,
    }
}

#[test]
fn a_run_is_recorded_with_its_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let r = Records::open(&state).unwrap();
    assert!(state.join("CACHEDIR.TAG").exists());
    let id = r.begin("home", ts("2025-06-10T02:00:00Z"), 42).unwrap();
    r.add_step(id, &step("backup", StepStatus::Ok, "2025-06-10T02:00:01Z"))
        .unwrap();
    r.add_step(
        id,
        &step("prune", StepStatus::Skipped, "2025-06-10T02:05:00Z"),
    )
    .unwrap();
    let end = RunEnd {
        result: Some(RunResult::Ok),
        exit_code: 0,
        error: None,
        snapshot_id: Some("1a2b3c".into()),
        files_added: 12,
        bytes_added: 3456,
    };
    r.finish(id, ts("2025-06-10T02:06:00Z"), &end).unwrap();
    drop(r);
    // Reopened: the record persisted.
    let r = Records::open(&state).unwrap();
    let h = r.history("home").unwrap();
    let run = h.last_run.unwrap();
    assert_eq!(run.result, RunResult::Ok);
    assert_eq!(run.snapshot_id.as_deref(), Some("1a2b3c"));
    assert_eq!((run.files_added, run.bytes_added), (Some(12), Some(3456)));
    assert_eq!(run.pid, 42);
    assert_eq!(run.duration(), Some(std::time::Duration::from_secs(360)));
    let names: Vec<_> = run
        .steps
        .iter()
        .map(|s| (s.step.as_str(), s.status))
        .collect();
    assert_eq!(
        names,
        vec![("backup", StepStatus::Ok), ("prune", StepStatus::Skipped)]
    );
    assert!(r.history("other").unwrap().last_run.is_none());
}

#[test]
fn history_tells_last_run_last_finished_and_last_success_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let r = Records::open(tmp.path()).unwrap();
    let ok = r.begin("p", ts("2025-06-01T00:00:00Z"), 1).unwrap();
    r.finish(
        ok,
        ts("2025-06-01T00:10:00Z"),
        &RunEnd {
            result: Some(RunResult::Ok),
            ..RunEnd::default()
        },
    )
    .unwrap();
    let failed = r.begin("p", ts("2025-06-02T00:00:00Z"), 1).unwrap();
    r.finish(
        failed,
        ts("2025-06-02T00:01:00Z"),
        &RunEnd {
            result: Some(RunResult::Failed),
            exit_code: 10,
            error: Some("repository /r does not exist".into()),
            ..RunEnd::default()
        },
    )
    .unwrap();
    let interrupted = r.begin("p", ts("2025-06-03T00:00:00Z"), 1).unwrap();
    r.finish(
        interrupted,
        ts("2025-06-03T00:01:00Z"),
        &RunEnd {
            result: Some(RunResult::Interrupted),
            ..RunEnd::default()
        },
    )
    .unwrap();
    let running = r.begin("p", ts("2025-06-04T00:00:00Z"), 1).unwrap();
    let h = r.history("p").unwrap();
    assert_eq!(h.last_run.as_ref().map(|x| x.id), Some(running));
    assert_eq!(
        h.last_run.as_ref().map(|x| x.result),
        Some(RunResult::Running)
    );
    assert_eq!(h.last_finished.as_ref().map(|x| x.id), Some(failed));
    assert_eq!(
        h.last_finished.as_ref().unwrap().error.as_deref(),
        Some("repository /r does not exist")
    );
    assert_eq!(h.last_success.map(|x| x.id), Some(ok));
    // The next run of the profile finds the unfinished one and closes it.
    assert_eq!(
        r.mark_unfinished_interrupted("p", ts("2025-06-05T00:00:00Z"))
            .unwrap(),
        1
    );
    let h = r.history("p").unwrap();
    let last = h.last_run.unwrap();
    assert_eq!((last.id, last.result), (running, RunResult::Interrupted));
    assert_eq!(last.ended, Some(ts("2025-06-05T00:00:00Z")));
    let recent: Vec<i64> = r.recent("p", 2).unwrap().iter().map(|x| x.id).collect();
    assert_eq!(recent, vec![running, interrupted]);
}

#[test]
fn last_step_success_looks_at_that_step_only() {
    let tmp = tempfile::tempdir().unwrap();
    let r = Records::open(tmp.path()).unwrap();
    let a = r.begin("p", ts("2025-06-01T00:00:00Z"), 1).unwrap();
    r.add_step(a, &step("prune", StepStatus::Ok, "2025-06-01T00:05:00Z"))
        .unwrap();
    let b = r.begin("p", ts("2025-06-08T00:00:00Z"), 1).unwrap();
    r.add_step(
        b,
        &step("prune", StepStatus::Failed, "2025-06-08T00:05:00Z"),
    )
    .unwrap();
    r.add_step(b, &step("check", StepStatus::Ok, "2025-06-08T00:06:00Z"))
        .unwrap();
    let c = r.begin("q", ts("2025-06-09T00:00:00Z"), 1).unwrap();
    r.add_step(c, &step("prune", StepStatus::Ok, "2025-06-09T00:05:00Z"))
        .unwrap();
    assert_eq!(
        r.last_step_success("p", "prune").unwrap(),
        Some(ts("2025-06-01T00:05:00Z"))
    );
    assert_eq!(
        r.last_step_success("p", "check").unwrap(),
        Some(ts("2025-06-08T00:06:00Z"))
    );
    assert_eq!(r.last_step_success("p", "backup").unwrap(), None);
}
