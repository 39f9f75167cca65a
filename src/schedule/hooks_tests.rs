//! Tests of hooks as real `sh` processes: environment, status and output, timeout killing the process group.

use super::*;
use std::path::Path;

fn env() -> HookEnv {
    HookEnv {
        profile: "home".into(),
        result: "failed".into(),
        exit_code: 12,
        error: "wrong password or no key found".into(),
        snapshot_id: "1a2b3c4d".into(),
        files_added: 5,
        bytes_added: 4096,
    }
}

#[test]
fn the_hook_sees_the_run_in_its_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("env");
    let cmd = format!(
        "printf '%s|' \"$LARDER_HOOK\" \"$LARDER_PROFILE\" \"$LARDER_RESULT\" \"$LARDER_EXIT_CODE\" \
         \"$LARDER_ERROR\" \"$LARDER_SNAPSHOT_ID\" \"$LARDER_FILES_ADDED\" \"$LARDER_BYTES_ADDED\" \
         \"${{LARDER_PASSWORD-unset}}\" > '{}'",
        out.display()
    );
    let r = run_hook("on-failure", &cmd, &env(), Duration::from_secs(60));
    assert!(r.ok, "{r:?}");
    assert_eq!(r.message, "exited with status 0");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "on-failure|home|failed|12|wrong password or no key found|1a2b3c4d|5|4096|unset|"
    );
}

#[test]
fn a_failing_hook_reports_its_status_and_output() {
    let r = run_hook(
        "before",
        "echo mounting; echo 'no such device' >&2; exit 3",
        &env(),
        Duration::from_secs(60),
    );
    assert!(!r.ok);
    assert_eq!(r.message, "exited with status 3");
    assert_eq!(r.output, "mounting\nno such device");
}

#[test]
fn long_output_keeps_its_tail() {
    let r = run_hook("after", "seq 1 5000", &env(), Duration::from_secs(60));
    assert!(r.ok);
    assert!(
        r.output.ends_with("4999\n5000"),
        "{}",
        &r.output[r.output.len() - 20..]
    );
    assert!(r.output.len() <= OUTPUT_TAIL);
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(Path::new("/proc").join(pid).join("stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

#[test]
fn a_hook_past_its_timeout_is_killed_with_its_children() {
    let tmp = tempfile::tempdir().unwrap();
    let pidfile = tmp.path().join("pid");
    let marker = tmp.path().join("finished");
    let cmd = format!(
        "sleep 300 & echo $! > '{}'; wait; touch '{}'",
        pidfile.display(),
        marker.display()
    );
    let r = run_hook("before", &cmd, &env(), Duration::from_millis(300));
    assert!(!r.ok);
    assert!(r.message.starts_with("timed out after"), "{}", r.message);
    assert!(!marker.exists());
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    let pid = pid.trim();
    // The background `sleep` was in the hook's process group: it is killed
    // too (allow the kernel a moment to tear it down).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !gone(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gone(pid), "sleep {pid} survived the hook's timeout");
}
