//! The Prometheus textfile for node_exporter's textfile collector: per
//! profile the last run's start, duration, result, exit code, files and
//! bytes added, and the last success's time, in the text exposition
//! format, replaced atomically after each run. Give each profile its own
//! file in the collector's directory (`larder-PROFILE.prom`): the file is
//! rewritten whole from that profile's history.

use super::atomic::write_atomic;
use super::records::{History, RunResult};
use crate::error::Result;
use std::fmt::Write as _;
use std::path::Path;

/// One metric family: name, help text and the value for the profile.
struct Family {
    name: &'static str,
    help: &'static str,
    value: Option<f64>,
}

/// The textfile content for one profile.
pub fn render(profile: &str, h: &History) -> String {
    let secs = |t: jiff::Timestamp| t.as_nanosecond() as f64 / 1e9;
    let last = h.last_finished.as_ref().or(h.last_run.as_ref());
    let families = [
        Family {
            name: "larder_last_run_start_timestamp_seconds",
            help: "When the last run started (Unix time).",
            value: last.map(|r| secs(r.started)),
        },
        Family {
            name: "larder_last_run_duration_seconds",
            help: "How long the last run took.",
            value: last.and_then(|r| r.duration()).map(|d| d.as_secs_f64()),
        },
        Family {
            name: "larder_last_run_success",
            help: "1 if the last run succeeded, 0 if it failed.",
            value: last.map(|r| f64::from(u8::from(r.result == RunResult::Ok))),
        },
        Family {
            name: "larder_last_run_exit_code",
            help: "The exit code of the last run.",
            value: last.and_then(|r| r.exit_code).map(f64::from),
        },
        Family {
            name: "larder_last_run_files_added",
            help: "Files added to the repository by the last run.",
            value: last.and_then(|r| r.files_added).map(|v| v as f64),
        },
        Family {
            name: "larder_last_run_bytes_added",
            help: "Bytes added to the repository by the last run.",
            value: last.and_then(|r| r.bytes_added).map(|v| v as f64),
        },
        Family {
            name: "larder_last_success_timestamp_seconds",
            help: "When the last successful run started (Unix time).",
            value: h.last_success.as_ref().map(|r| secs(r.started)),
        },
    ];
    let label = escape_label(profile);
    let mut out = String::new();
    for f in families {
        let Some(v) = f.value else { continue };
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} gauge", f.name);
        let _ = writeln!(out, "{}{{profile=\"{label}\"}} {v}", f.name);
    }
    out
}

/// Rewrites the textfile at `path` atomically.
pub fn write(path: &Path, profile: &str, h: &History) -> Result<()> {
    write_atomic(path, render(profile, h).as_bytes())
}

/// A label value with `\`, `"` and newlines escaped.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::records::RunRecord;

    fn run(result: RunResult, start: &str, secs: i64) -> RunRecord {
        let started: jiff::Timestamp = start.parse().unwrap();
        RunRecord {
            id: 1,
            profile: "home".into(),
            started,
            ended: Some(started + jiff::SignedDuration::from_secs(secs)),
            result,
            exit_code: Some(if result == RunResult::Ok { 0 } else { 12 }),
            error: None,
            snapshot_id: None,
            files_added: Some(3),
            bytes_added: Some(1_500_000),
            pid: 1,
            steps: vec![],
        }
    }

    #[test]
    fn renders_the_text_format() {
        let h = History {
            last_run: Some(run(RunResult::Failed, "2025-06-10T02:00:00Z", 90)),
            last_finished: Some(run(RunResult::Failed, "2025-06-10T02:00:00Z", 90)),
            last_success: Some(run(RunResult::Ok, "2025-06-09T02:00:00Z", 60)),
        };
        let text = render("home", &h);
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            samples,
            vec![
                "larder_last_run_start_timestamp_seconds{profile=\"home\"} 1749520800",
                "larder_last_run_duration_seconds{profile=\"home\"} 90",
                "larder_last_run_success{profile=\"home\"} 0",
                "larder_last_run_exit_code{profile=\"home\"} 12",
                "larder_last_run_files_added{profile=\"home\"} 3",
                "larder_last_run_bytes_added{profile=\"home\"} 1500000",
                "larder_last_success_timestamp_seconds{profile=\"home\"} 1749434400",
            ]
        );
        assert!(text.contains("# TYPE larder_last_run_success gauge\n"));
        // Every sample has its HELP and TYPE lines.
        assert_eq!(text.lines().filter(|l| l.starts_with("# HELP")).count(), 7);
        assert!(render("a\"b\\c", &h).contains("{profile=\"a\\\"b\\\\c\"}"));
        assert_eq!(render("never-ran", &History::default()), "");
    }

    #[test]
    fn writes_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("larder-home.prom");
        let h = History {
            last_success: Some(run(RunResult::Ok, "2025-06-09T02:00:00Z", 60)),
            ..History::default()
        };
        write(&p, "home", &h).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), render("home", &h));
    }
}
