//! The daemon's memory while it runs: everything it may run stays in
//! memory, locked, and nothing it maps is larger than it needs.
//!
//! With `settings.daemon.mlock` (the default) the daemon calls
//! `mlockall(MCL_CURRENT | MCL_FUTURE)` at start
//! ([`super::selfproc::mlockall`]): every page of the binary and the C
//! libraries is read in and locked then, whether startup ran it or not, and
//! every later mapping is read in and locked when it is made. So no code or
//! data page of the event loop, the rules, the writer lanes, the journal, the
//! exec thread, the control socket, the hooks' spawning, metrics or the
//! recorder is read from the disk under memory pressure, however long the
//! board ran before it came: the page cache cannot take a locked page back.
//! The resident set is the whole binary and libraries
//! (docs/size.md has the figures); it is kept down by mapping less, never by
//! giving back pages the daemon may still run:
//!
//! - every thread's stack is sized ([`STACK`], [`RUNTIME_STACK`]): a locked
//!   stack is resident in full, and Rust's and tokio's default is 2 MiB a
//!   thread, 64 times the deepest use seen;
//! - no transparent huge pages ([`disable_thp`]): a 2 MiB page on a heap
//!   past 2 MiB would be locked whole;
//! - the heaps grow by a small reserve and the main heap's free top goes
//!   back to the kernel ([`tune_malloc`], [`trim_heap`]). Free pages inside
//!   a heap, and any thread arena's, stay: the kernel refuses to discard
//!   locked pages (`madvise(MADV_DONTNEED)` is EINVAL on them), so each
//!   arena's resident size is its high-water mark. One arena for all
//!   threads would hold less, but a reacting thread could then wait for the
//!   arena's lock behind a preempted ordinary one.

use super::error::{Error, Result};

/// The stack of a thread that only reads, writes and formats (the exec
/// thread, the writer lanes, the last-resort killer, the IRQ watcher, a
/// modprobe's stderr reader).
/// Locked, a stack is resident in full: with every reaction fired in the
/// guest (`85-daemon-resident`), the deepest of these threads used 24 KiB.
pub(crate) const STACK: usize = (128 << 10) * UNOPTIMIZED;

/// The stack of a thread that runs a tokio runtime or SQLite (the services
/// thread with the control socket, metrics, KPI socket and policy watch;
/// the recorder; tokio's blocking threads): `block_on`'s future, JSON
/// nested as deep as serde_json allows (128) and SQLite's statement engine
/// live on it. The deepest seen: 32 KiB (the control socket).
pub(crate) const RUNTIME_STACK: usize = (256 << 10) * UNOPTIMIZED;

/// An unoptimized (debug) build's frames are several times a release
/// build's: its stacks are this many times larger, so the test builds
/// and the guest's debug runs never overflow where the product would not.
const UNOPTIMIZED: usize = if cfg!(debug_assertions) { 8 } else { 1 };

/// `prctl(PR_SET_THP_DISABLE, 1)`: no transparent huge pages for this
/// process. Under `transparent_hugepage=always` (Debian's default) a heap
/// that grows past 2 MiB gets whole 2 MiB pages on first touch, and with
/// `mlockall` they stay. Inherited across fork and exec: a child that
/// should not keep it clears it ([`allow_thp`]).
pub(crate) fn disable_thp() -> Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0 {
        return Err(last_os("prctl", "PR_SET_THP_DISABLE".to_string()));
    }
    Ok(())
}

/// Clears [`disable_thp`]'s flag in a forked child before it execs (hooks
/// run with the system's default). Async-signal-safe; the result is
/// ignored (a kernel before 3.15 never set it).
pub(crate) fn allow_thp() {
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0);
    }
}

/// glibc malloc's reserves: freed memory at the top of a heap goes back to
/// the kernel past `trim` bytes (glibc's default is 128 KiB and grows with
/// each large free; set, it stays), and a heap grows by `top_pad` bytes
/// more than it needs (glibc's default: 128 KiB, which every thread's
/// arena is given at once — locked, 132 KiB resident per thread that
/// allocates). Call before other threads exist. Nothing where the C
/// library is not glibc.
pub(crate) fn tune_malloc(trim: usize, top_pad: usize) {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt takes two integers.
    unsafe {
        let int = |v: usize| libc::c_int::try_from(v).unwrap_or(libc::c_int::MAX);
        libc::mallopt(libc::M_TRIM_THRESHOLD, int(trim));
        libc::mallopt(libc::M_TOP_PAD, int(top_pad));
    }
    #[cfg(not(target_env = "gnu"))]
    let _ = (trim, top_pad);
}

/// `malloc_trim(0)`: glibc gives free heap pages back to the kernel. Under
/// `mlockall` only the main heap's top goes (the heap's end moves down);
/// the pages inside a heap and a thread arena's stay (see the module doc).
/// Nothing where the C library is not glibc.
pub(crate) fn trim_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes a size and is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn last_os(op: &'static str, context: String) -> Error {
    let errno = std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO);
    Error::os(op, "/proc/self", errno, context)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thp_enabled() -> Option<String> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix("THP_enabled:"))?;
        Some(line.trim().to_string())
    }

    /// The flag is the process's, and the kernel shows it in
    /// `THP_enabled:` of /proc/self/status (Linux 5.0).
    #[test]
    fn thp_is_turned_off_and_back_on() {
        disable_thp().unwrap();
        let off = thp_enabled();
        allow_thp();
        let on = thp_enabled();
        assert_eq!(
            (off.as_deref(), on.as_deref()),
            (Some("0"), Some("1")),
            "THP_enabled in /proc/self/status"
        );
    }
}
