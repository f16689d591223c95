//! Standard output for every command: `cgwarden plan … | head -1` must not
//! panic ("failed printing to stdout: Broken pipe"), and `println!` panics
//! when a write fails. Everything the commands print goes
//! through [`outln!`](crate::outln)/[`out!`](crate::out) instead (a test in
//! tests/closed_stdout.rs keeps `println!` out of src/). On a closed pipe
//! (EPIPE) the output is dropped from then on, silently, as coreutils end
//! quietly; the command still finishes its work (an `apply` is never cut
//! half-way by a reader going away) and streams stop at their next line
//! ([`closed`]). Any other write error (a full disk) is said once on stderr
//! and [`failed`] turns a success into exit 75.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

/// 0: open; 1: the reader went away (EPIPE); 2: another write error.
static STATE: AtomicU8 = AtomicU8::new(0);

/// Writes `args` to stdout (no newline added).
pub(crate) fn write_fmt(args: fmt::Arguments) {
    write_with(|o| o.write_fmt(args));
}

/// Writes `args` and a newline to stdout as one write.
pub(crate) fn line(args: fmt::Arguments) {
    write_with(|o| {
        o.write_fmt(args)?;
        o.write_all(b"\n")
    });
}

/// Writes `b` to stdout (a report, a completion script).
#[cfg(any(feature = "report", feature = "docgen"))]
pub(crate) fn bytes(b: &[u8]) {
    write_with(|o| o.write_all(b));
}

fn write_with(f: impl FnOnce(&mut std::io::StdoutLock) -> std::io::Result<()>) {
    if STATE.load(Ordering::Relaxed) != 0 {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = f(&mut o).and_then(|_| o.flush()) {
        failure(&e);
    }
}

fn failure(e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        STATE.store(1, Ordering::Relaxed);
    } else if STATE.swap(2, Ordering::Relaxed) == 0 {
        // Not eprintln!: on a hung-up terminal stderr fails too (EIO), and
        // that must not panic (a soak goes on after SIGHUP).
        let _ = writeln!(std::io::stderr(), "cgwarden: error: writing to stdout: {e}");
    }
}

/// Whether stdout can no longer be written (its reader went away, or an
/// error): a command that streams (`events`) stops.
pub(crate) fn closed() -> bool {
    STATE.load(Ordering::Relaxed) != 0
}

/// Whether a write failed other than by EPIPE (already said on stderr).
pub(crate) fn failed() -> bool {
    STATE.load(Ordering::Relaxed) == 2
}

/// `println!` that never panics: see the [module](self).
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::out::line(format_args!($($arg)*))
    };
}

/// `print!` that never panics: see the [module](self).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write_fmt(format_args!($($arg)*))
    };
}

// Crate-private macros, named by path (`crate::outln!`, re-exported by
// lib.rs) like any other item.
pub(crate) use {out, outln};
