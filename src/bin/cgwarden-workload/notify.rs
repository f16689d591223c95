//! `notify-listen SOCKET SECS`: a stand-in for systemd's notify socket, so a
//! guest test can watch a daemon's sd_notify messages (READY=1, WATCHDOG=1,
//! ...) without systemd. Binds a unix datagram socket at SOCKET (an old file
//! there is removed first), prints one line per datagram —
//! `SECONDS.MICROS MESSAGE` with CLOCK_MONOTONIC seconds and the datagram's
//! lines joined by `|` — and exits 0 after SECS seconds, removing SOCKET.
//! At the end it prints `watchdog-pings N max-gap-ms G` for the WATCHDOG=1
//! datagrams it saw (G is 0 with fewer than two).

use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// CLOCK_MONOTONIC now, in seconds (what `/proc/uptime` does not give:
/// the clock tokio and the kernel's timers run on).
fn monotonic() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to the valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

pub(crate) fn listen(socket: &Path, secs: Duration) -> ExitCode {
    let _ = std::fs::remove_file(socket);
    let sock = match UnixDatagram::bind(socket) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "cgwarden-workload: notify-listen: bind {}: {e}",
                socket.display()
            );
            return ExitCode::from(1);
        }
    };
    let end = Instant::now() + secs;
    let mut buf = vec![0u8; 4096];
    let mut out = std::io::stdout();
    let (mut pings, mut last, mut max_gap) = (0u64, None::<f64>, 0f64);
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        // A zero timeout would mean "block forever".
        let _ = sock.set_read_timeout(Some(left.max(Duration::from_millis(1))));
        match sock.recv(&mut buf) {
            Ok(n) => {
                let t = monotonic();
                let text = String::from_utf8_lossy(&buf[..n]);
                let msg = text.trim_end().replace('\n', "|");
                let _ = writeln!(out, "{t:.6} {msg}");
                let _ = out.flush();
                if text.lines().any(|l| l == "WATCHDOG=1") {
                    pings += 1;
                    if let Some(p) = last {
                        max_gap = max_gap.max(t - p);
                    }
                    last = Some(t);
                }
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut
                    || e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "cgwarden-workload: notify-listen: {e}");
                let _ = std::fs::remove_file(socket);
                return ExitCode::from(1);
            }
        }
    }
    let _ = writeln!(
        out,
        "watchdog-pings {pings} max-gap-ms {:.0}",
        max_gap * 1000.0
    );
    let _ = std::fs::remove_file(socket);
    ExitCode::SUCCESS
}
