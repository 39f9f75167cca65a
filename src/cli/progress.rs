//! Terminal progress for long commands: a one-line display on stderr,
//! redrawn four times a second, fed through the library's
//! [`Progress`](crate::progress::Progress) trait.

use crate::progress::Progress;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A one-line progress display on stderr, redrawn every second.
pub struct TermProgress {
    state: Arc<TermState>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

struct TermState {
    files: AtomicU64,
    bytes: AtomicU64,
    current: Mutex<String>,
    done: AtomicBool,
}

impl TermProgress {
    /// Starts the display (or a silent one when `enabled` is false).
    pub fn new(enabled: bool) -> Self {
        let state = Arc::new(TermState {
            files: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            current: Mutex::new(String::new()),
            done: AtomicBool::new(false),
        });
        let thread = enabled.then(|| {
            let st = state.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                while !st.done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(250));
                    let secs = start.elapsed().as_secs_f64().max(0.001);
                    let b = st.bytes.load(Ordering::Relaxed);
                    let cur = st.current.lock().map(|c| c.clone()).unwrap_or_default();
                    let cur: String = cur
                        .chars()
                        .rev()
                        .take(50)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    eprint!(
                        "\r\x1b[K[{:>4.0}s] {} files, {:.1} MiB, {:.1} MiB/s  {}",
                        secs,
                        st.files.load(Ordering::Relaxed),
                        b as f64 / 1048576.0,
                        b as f64 / 1048576.0 / secs,
                        cur
                    );
                    let _ = std::io::stderr().flush();
                }
                eprint!("\r\x1b[K");
            })
        });
        TermProgress {
            state,
            thread: Mutex::new(thread),
        }
    }

    /// Stops the display.
    pub fn finish(&self) {
        self.state.done.store(true, Ordering::Relaxed);
        if let Ok(mut t) = self.thread.lock()
            && let Some(t) = t.take()
        {
            let _ = t.join();
        }
    }
}

impl Progress for TermProgress {
    fn file(&self, path: &Path) {
        self.state.files.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut c) = self.state.current.lock() {
            *c = path.display().to_string();
        }
    }
    fn bytes(&self, n: u64) {
        self.state.bytes.fetch_add(n, Ordering::Relaxed);
    }
}
