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

/// Makes SIGINT and SIGTERM request a stop; a second one while the first
/// is being honoured exits at once with code 130.
pub fn install_handlers() -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, flag().clone())
            .and_then(|_| signal_hook::flag::register(sig, flag().clone()))
            .map_err(|e| Error::internal(format!("cannot install a signal handler: {e}")))?;
    }
    Ok(())
}
