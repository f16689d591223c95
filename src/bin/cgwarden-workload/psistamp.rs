//! `psi-stamp FILE TRIGGER SECS`: the reaction-lag benchmark's reference
//! clock. It registers TRIGGER (e.g. `some 100000 1000000`, the text a
//! stall rule arms) on the pressure FILE, waits for `POLLPRI` with
//! `poll(2)` and prints `trigger at UNIX_SECS` (CLOCK_REALTIME, µs: the
//! clock of the daemon's log stamps) at each wake-up, nothing else. A
//! daemon's write for the same episode minus this stamp is its lag after
//! the kernel's trigger.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub(crate) fn psi_stamp(path: &str, trigger: &str, secs: Duration) -> ExitCode {
    let fail = |what: &str, e: std::io::Error| {
        eprintln!("cgwarden-workload: psi-stamp: {what}: {e}");
        ExitCode::from(1)
    };
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
    {
        Ok(f) => f,
        Err(e) => return fail(path, e),
    };
    // One write(2), ending with a newline (the kernel overwrites the last
    // byte of a /proc/pressure write with NUL), as the daemon writes it.
    if let Err(e) = file.write_all(format!("{trigger}\n").as_bytes()) {
        return fail(&format!("{path} ← {trigger}"), e);
    }
    let out = std::io::stdout();
    let _ = writeln!(out.lock(), "armed {trigger}");
    let start = Instant::now();
    let mut events = 0u64;
    while start.elapsed() < secs {
        let left = secs.saturating_sub(start.elapsed());
        let mut pfd = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        };
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        // The stamp first: everything after it is the monitor's own delay.
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return fail(path, e);
        }
        if r == 0 {
            continue;
        }
        if pfd.revents & libc::POLLPRI == 0 || pfd.revents & libc::POLLERR != 0 {
            return fail(path, std::io::Error::other("trigger gone (POLLERR)"));
        }
        events += 1;
        // Line-buffered by hand: the benchmark reads the file while it runs.
        let mut o = out.lock();
        let _ = writeln!(o, "trigger at {}.{:06}", t.as_secs(), t.subsec_micros());
        let _ = o.flush();
    }
    println!("psi-stamp: {events} events");
    ExitCode::SUCCESS
}
