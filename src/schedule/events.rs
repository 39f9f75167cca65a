//! Events as JSON lines: one object per line with `time`, `event`,
//! `profile` and the event's own fields. Run cycles write them to
//! `runs.jsonl` in the state directory; the daemon also prints them on
//! stdout. Writing an event never fails a run: the SQLite record is the
//! authority, the log is for reading and shipping.

use crate::error::{Error, Result};
use jiff::Timestamp;
use serde::Serialize;
use serde_json::{Map, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The log file name inside the state directory.
pub const LOG_NAME: &str = "runs.jsonl";

/// One event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    #[serde(serialize_with = "super::timefmt::ser")]
    pub time: Timestamp,
    /// `run-start`, `step`, `run-end`, `not-due`, `busy`, `sleep`,
    /// `daemon-start`, `daemon-stop`, `error`.
    pub event: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

impl Event {
    /// An event with no fields yet.
    pub fn new(time: Timestamp, event: &str, profile: Option<&str>) -> Self {
        Event {
            time,
            event: event.to_string(),
            profile: profile.map(str::to_string),
            fields: Map::new(),
        }
    }

    /// Adds a field (skipped when it serialises to null).
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        if let Ok(v) = serde_json::to_value(value)
            && !v.is_null()
        {
            self.fields.insert(key.to_string(), v);
        }
        self
    }

    /// The event as one line of JSON (without the newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| {
            format!("{{\"event\":\"error\",\"error\":\"cannot encode event: {e}\"}}")
        })
    }
}

/// Where events go.
pub trait EventSink: Send + Sync {
    /// Writes one event; failures are the sink's to swallow.
    fn emit(&self, e: &Event);
}

/// Appends events to a JSON-lines file, one `write` per line (O_APPEND), so
/// lines of concurrent runs never interleave.
pub struct JsonlFile {
    path: PathBuf,
}

impl JsonlFile {
    /// The log at `path` (created on first write, mode 0600).
    pub fn new(path: &Path) -> Self {
        JsonlFile {
            path: path.to_path_buf(),
        }
    }

    /// Appends one event.
    pub fn append(&self, e: &Event) -> Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)
            .map_err(|err| Error::io(&self.path, err))?;
        let mut line = e.to_line();
        line.push('\n');
        f.write_all(line.as_bytes())
            .map_err(|err| Error::io(&self.path, err))
    }
}

impl EventSink for JsonlFile {
    fn emit(&self, e: &Event) {
        // The run's record in SQLite does not depend on this log.
        let _ = self.append(e);
    }
}

/// Prints events on stdout (the daemon's output).
pub struct Stdout;

impl EventSink for Stdout {
    fn emit(&self, e: &Event) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", e.to_line());
        let _ = out.flush();
    }
}

/// Sends every event to each of several sinks.
pub struct Tee<'a>(pub Vec<&'a dyn EventSink>);

impl EventSink for Tee<'_> {
    fn emit(&self, e: &Event) {
        for s in &self.0 {
            s.emit(e);
        }
    }
}

/// Keeps events in memory (for tests and callers that want to inspect them).
#[derive(Default)]
pub struct Memory(pub Mutex<Vec<Event>>);

impl Memory {
    /// The events so far.
    pub fn events(&self) -> Vec<Event> {
        match self.0.lock() {
            Ok(v) => v.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

impl EventSink for Memory {
    fn emit(&self, e: &Event) {
        match self.0.lock() {
            Ok(mut v) => v.push(e.clone()),
            Err(p) => p.into_inner().push(e.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_one_json_object_per_line() {
        let tmp = tempfile::tempdir().unwrap();
        let log = JsonlFile::new(&tmp.path().join(LOG_NAME));
        let t: Timestamp = "2025-06-10T02:00:00Z".parse().unwrap();
        log.emit(
            &Event::new(t, "run-start", Some("home"))
                .with("pid", 7)
                .with("none", None::<u8>),
        );
        log.emit(&Event::new(t, "run-end", Some("home")).with("error", "line\nbreak"));
        let text = std::fs::read_to_string(tmp.path().join(LOG_NAME)).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let first: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(first["event"], "run-start");
        assert_eq!(first["profile"], "home");
        assert_eq!(first["time"], "2025-06-10T02:00:00Z");
        assert_eq!(first["pid"], 7);
        assert!(first.get("none").is_none());
        let second: Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(second["error"], "line\nbreak");
    }
}
