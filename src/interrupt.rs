//! Asking a running operation to stop cleanly. The CLI turns SIGINT and
//! SIGTERM into a request (see [`install_handlers`]); long operations call
//! [`check`] between steps and unwind with [`Error::Interrupted`], so a
//! backup still packs and indexes what it has read and removes its lock on
//! the way out. A second signal ends the process at once.

use crate::error::{Error, Result};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// The process-wide flag: set once a stop was asked for.
fn flag() -> &'static Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

/// Asks every operation in this process to stop at its next check.
pub fn request() {
    flag().store(true, Ordering::SeqCst);
}

/// Whether a stop was asked for.
pub fn requested() -> bool {
    flag().load(Ordering::Relaxed)
}

/// Fails with [`Error::Interrupted`] once a stop was asked for.
pub fn check() -> Result<()> {
    if requested() {
        Err(Error::Interrupted)
    } else {
        Ok(())
    }
}

/// The process-wide flag itself, to share with code that waits on its own
/// terms (the scheduler's stop flag wraps it, so one SIGTERM stops both a
/// wait between runs and the library operation in progress).
pub fn shared_flag() -> Arc<AtomicBool> {
    flag().clone()
}

/// Makes SIGINT and SIGTERM request a stop; a second one while the first
/// is being honoured exits at once with code 130. Installs the handlers
/// once per process: later calls do nothing (so a command may call it and
/// then call library code that calls it again).
pub fn install_handlers() -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    static INSTALLED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            for sig in [SIGINT, SIGTERM] {
                signal_hook::flag::register_conditional_shutdown(sig, 130, flag().clone())
                    .and_then(|_| signal_hook::flag::register(sig, flag().clone()))
                    .map_err(|e| format!("cannot install a signal handler: {e}"))?;
            }
            Ok(())
        })
        .clone()
        .map_err(Error::internal)
}
