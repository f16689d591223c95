//! Terminating signals noted, not acted on: a handler that only stores the
//! signal's number in an atomic (async-signal-safe), for a program that
//! must clean up itself before it exits — `cgwarden top` puts the terminal
//! back. The `sigaction(2)` call is the one `unsafe` this needs; it lives
//! here, behind the kernel seam.

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::sync::atomic::{AtomicI32, Ordering};

/// The last terminating signal received (0: none).
static SIGNALLED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    SIGNALLED.store(sig, Ordering::SeqCst);
}

/// Notes SIGTERM, SIGHUP, SIGINT and SIGQUIT instead of dying of them; the
/// caller polls [`terminating`].
pub(crate) fn note_terminating() {
    let act = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for s in [
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGINT,
        Signal::SIGQUIT,
    ] {
        // SAFETY: the handler only stores to an atomic.
        let _ = unsafe { sigaction(s, &act) };
    }
}

/// The terminating signal received since [`note_terminating`], if any.
pub(crate) fn terminating() -> Option<i32> {
    match SIGNALLED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}
