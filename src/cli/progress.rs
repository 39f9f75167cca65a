//! Progress for long commands, fed through the library's
//! [`Progress`](crate::progress::Progress) trait: a one-line display on
//! stderr redrawn four times a second (done and total, rate, ETA once the
//! scan beside the operation is complete), or restic's JSON `status` lines
//! on stdout (`--json`, twice a second), or nothing (a pipe, `-q`).
//! `LARDER_PROGRESS_INTERVAL_MS` sets the interval; 0 prints a status
//! line after every file (for tests).

use crate::progress::{Entry, Progress};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the display shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Off,
    Terminal,
    Json,
}

impl Mode {
    /// The mode for a command: JSON lines with `--json`, a terminal line
    /// when stderr is a terminal and not `-q`, else nothing.
    pub fn pick(json: bool, quiet: bool) -> Mode {
        if json {
            Mode::Json
        } else if !quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            Mode::Terminal
        } else {
            Mode::Off
        }
    }
}

/// The counters, shared with the drawing thread.
struct State {
    mode: Mode,
    /// Restore's status lines also carry restic's `files_restored` and
    /// `bytes_restored`.
    restore: bool,
    /// What is counted ("files", "packs").
    unit: &'static str,
    start: Instant,
    files: AtomicU64,
    bytes: AtomicU64,
    total_files: AtomicU64,
    total_bytes: AtomicU64,
    total_complete: AtomicBool,
    current: Mutex<String>,
    done: AtomicBool,
    /// Serialises JSON lines, so their numbers never go backwards.
    print: Mutex<()>,
}

/// A progress display (see the module comment).
pub struct TermProgress {
    state: Arc<State>,
    per_file: bool,
    /// Print each entry's outcome (`-vv`).
    entries: bool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// restic's `verbose_status` message (`-vv --json`): what became of one
/// entry.
#[derive(Serialize)]
struct VerboseStatus {
    message_type: &'static str,
    action: &'static str,
    item: String,
    /// Backup's name for the file's size.
    #[serde(skip_serializing_if = "Option::is_none")]
    data_size: Option<u64>,
    /// Restore's name for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
}

/// restic's `status` message.
#[derive(Serialize)]
struct Status {
    message_type: &'static str,
    seconds_elapsed: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds_remaining: Option<f64>,
    percent_done: f64,
    total_files: u64,
    files_done: u64,
    total_bytes: u64,
    bytes_done: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    files_restored: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_restored: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    current_files: Vec<String>,
}

impl State {
    /// The numbers now: totals are never shown below what is done.
    fn status(&self) -> Status {
        let secs = self.start.elapsed().as_secs_f64();
        let (files, bytes) = (
            self.files.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        );
        let total_files = self.total_files.load(Ordering::Relaxed).max(files);
        let total_bytes = self.total_bytes.load(Ordering::Relaxed).max(bytes);
        let percent = if total_bytes > 0 {
            bytes as f64 / total_bytes as f64
        } else if total_files > 0 {
            files as f64 / total_files as f64
        } else {
            0.0
        };
        let complete = self.total_complete.load(Ordering::Relaxed);
        let remaining = (complete && bytes > 0 && secs > 0.5)
            .then(|| (total_bytes - bytes) as f64 / (bytes as f64 / secs));
        let current = self.current.lock().map(|c| c.clone()).unwrap_or_default();
        Status {
            message_type: "status",
            seconds_elapsed: (secs * 1000.0).round() / 1000.0,
            seconds_remaining: remaining.map(|r| r.round()),
            percent_done: percent.min(1.0),
            total_files,
            files_done: files,
            total_bytes,
            bytes_done: bytes,
            files_restored: self.restore.then_some(files),
            bytes_restored: self.restore.then_some(bytes),
            current_files: if current.is_empty() {
                Vec::new()
            } else {
                vec![current]
            },
        }
    }

    fn print_json(&self) {
        let _g = self.print.lock();
        super::output::print_json(&self.status());
    }

    fn draw(&self) {
        let _g = self.print.lock();
        let s = self.status();
        let mib = |b: u64| b as f64 / 1048576.0;
        let rate = mib(s.bytes_done) / s.seconds_elapsed.max(0.001);
        let total = if self.total_complete.load(Ordering::Relaxed) {
            ""
        } else {
            "+"
        };
        let eta = s
            .seconds_remaining
            .map(|r| format!("  ETA {}", clock(r)))
            .unwrap_or_default();
        let cur = s.current_files.first().cloned().unwrap_or_default();
        let cur: String = cur
            .chars()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        eprint!(
            "\r\x1b[K[{}] {:5.1}%  {} / {}{total} {}  {:.1} / {:.1}{total} MiB  {:.1} MiB/s{eta}  {}",
            clock(s.seconds_elapsed),
            s.percent_done * 100.0,
            s.files_done,
            s.total_files,
            self.unit,
            mib(s.bytes_done),
            mib(s.total_bytes),
            rate,
            super::output::safe(&cur)
        );
        let _ = std::io::stderr().flush();
    }
}

/// `h:mm:ss` (or `m:ss`).
fn clock(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

impl TermProgress {
    /// Starts a display in `mode`; `restore` adds restic's restore fields.
    pub fn start(mode: Mode, restore: bool) -> Self {
        Self::counting(mode, restore, "files")
    }

    /// [`TermProgress::start`], counting `unit` instead of files.
    pub fn counting(mode: Mode, restore: bool, unit: &'static str) -> Self {
        let interval = std::env::var("LARDER_PROGRESS_INTERVAL_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(if mode == Mode::Json { 500 } else { 250 });
        let state = Arc::new(State {
            mode,
            restore,
            unit,
            start: Instant::now(),
            files: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            total_files: AtomicU64::new(0),
            total_bytes: AtomicU64::new(0),
            total_complete: AtomicBool::new(false),
            current: Mutex::new(String::new()),
            done: AtomicBool::new(false),
            print: Mutex::new(()),
        });
        let per_file = interval == 0 && mode == Mode::Json;
        let thread = (mode != Mode::Off && !per_file).then(|| {
            let st = state.clone();
            std::thread::spawn(move || {
                let tick = Duration::from_millis(interval.max(50));
                let mut last = Instant::now();
                while !st.done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                    if last.elapsed() < tick {
                        continue;
                    }
                    last = Instant::now();
                    match st.mode {
                        Mode::Json => st.print_json(),
                        _ => st.draw(),
                    }
                }
                if st.mode == Mode::Terminal {
                    eprint!("\r\x1b[K");
                }
            })
        });
        TermProgress {
            state,
            per_file,
            entries: false,
            thread: Mutex::new(thread),
        }
    }

    /// Also prints what became of each file and directory (`-vv`): a line
    /// on stdout (`new       PATH`), or restic's `verbose_status` object
    /// with --json.
    pub fn with_entries(mut self, on: bool) -> Self {
        self.entries = on;
        self
    }

    /// Stops the display; in JSON mode prints the last status line, whose
    /// done counts are the final ones.
    pub fn finish(&self) {
        self.state.done.store(true, Ordering::Relaxed);
        if let Ok(mut t) = self.thread.lock()
            && let Some(t) = t.take()
        {
            let _ = t.join();
        }
        if self.state.mode == Mode::Json {
            if let Ok(mut c) = self.state.current.lock() {
                c.clear();
            }
            self.state.print_json();
        }
    }
}

impl Progress for TermProgress {
    fn file(&self, path: &Path) {
        if self.state.mode == Mode::Off {
            return;
        }
        if let Ok(mut c) = self.state.current.lock() {
            *c = path.display().to_string();
        }
    }
    fn bytes(&self, n: u64) {
        self.state.bytes.fetch_add(n, Ordering::Relaxed);
    }
    fn file_done(&self) {
        self.state.files.fetch_add(1, Ordering::Relaxed);
        if self.per_file {
            self.state.print_json();
        }
    }
    fn wants_totals(&self) -> bool {
        self.state.mode != Mode::Off
    }
    fn wants_entries(&self) -> bool {
        self.entries
    }
    /// One line (or `verbose_status` object) as restic prints it: a
    /// backup's directories end with `/`, a restore's do not. Written
    /// from reading and writing threads too, so a closed stdout is left
    /// to the main thread's next line to notice (no panic here).
    fn entry(&self, e: &Entry<'_>) {
        let restore = self.state.restore;
        let path = e.path.to_string_lossy();
        let slash = if e.dir && !restore && !path.ends_with('/') {
            "/"
        } else {
            ""
        };
        let item = format!("{path}{slash}");
        let _g = self.state.print.lock();
        let line = if self.state.mode == Mode::Json {
            let v = VerboseStatus {
                message_type: "verbose_status",
                action: e.action.word(),
                item,
                data_size: (!restore).then_some(e.size),
                size: restore.then_some(e.size),
            };
            // Keys sorted, as every other JSON line.
            match serde_json::to_value(&v) {
                Ok(v) => v.to_string(),
                Err(_) => return,
            }
        } else {
            if self.state.mode == Mode::Terminal {
                eprint!("\r\x1b[K");
            }
            format!("{:<9} {}", e.action.word(), super::output::safe(&item))
        };
        let _ = writeln!(std::io::stdout().lock(), "{line}");
    }
    fn totals(&self, files: u64, bytes: u64, complete: bool) {
        self.state.total_files.store(files, Ordering::Relaxed);
        self.state.total_bytes.store(bytes, Ordering::Relaxed);
        self.state.total_complete.store(complete, Ordering::Relaxed);
    }
}
