//! `poll-file FILE PERIOD_MS SECS`: the anchor of the idle-cost benchmark. It
//! is what an integrator's C loop does: keep the pressure file open, `pread` it
//! every PERIOD_MS, look at the first line, sleep. A daemon woken by kernel PSI
//! triggers should cost less than this.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::process::ExitCode;
use std::time::{Duration, Instant};

pub(crate) fn poll_file(path: &str, period: Duration, secs: Duration) -> ExitCode {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("cgwarden-workload: poll-file: {path}: {e}");
            return ExitCode::from(1);
        }
    };
    let mut buf = [0u8; 512];
    let start = Instant::now();
    let mut next = start;
    let mut reads = 0u64;
    let mut stalled = 0u64;
    while start.elapsed() < secs {
        match file.read_at(&mut buf, 0) {
            Ok(n) => {
                reads += 1;
                // "some avg10=0.00 …": anything but a zero avg10 counts as a stall seen.
                let line = &buf[..n];
                if !line.starts_with(b"some avg10=0.00 ") {
                    stalled += 1;
                }
            }
            Err(e) => {
                eprintln!("cgwarden-workload: poll-file: {path}: {e}");
                return ExitCode::from(1);
            }
        }
        sleep_to_next(&mut next, period);
    }
    println!("poll-file: {reads} reads, {stalled} showed a stall");
    ExitCode::SUCCESS
}

/// What `poll-act` is told (the reaction benchmark's acting anchor).
pub(crate) struct Act<'a> {
    pub(crate) pressure: &'a str,
    pub(crate) period: Duration,
    pub(crate) secs: Duration,
    pub(crate) knob: &'a str,
    pub(crate) high: &'a str,
    pub(crate) low: &'a str,
    /// Stall (µs of `some total=` growth in one period) that raises the knob.
    pub(crate) thresh_us: u64,
    /// How long the stall must stay below the threshold before the knob goes back.
    pub(crate) hold: Duration,
}

/// `poll-act PRESSURE PERIOD_MS SECS KNOB HIGH LOW THRESH_US HOLD_MS`: the
/// reaction benchmark's anchor that acts, the C loop an
/// integrator writes instead of a PSI-trigger rule: keep PRESSURE open,
/// `pread` it every PERIOD_MS; when `some total=` grew by THRESH_US or more
/// since the last read, write HIGH to KNOB; once it has grown less for
/// HOLD_MS, write LOW back. Each write prints `wrote VALUE at UNIX_SECS` (the
/// benchmark's lag); the last line counts reads and writes.
pub(crate) fn poll_act(a: &Act) -> ExitCode {
    let fail = |what: &str, e: std::io::Error| {
        eprintln!("cgwarden-workload: poll-act: {what}: {e}");
        ExitCode::from(1)
    };
    let file = match File::open(a.pressure) {
        Ok(f) => f,
        Err(e) => return fail(a.pressure, e),
    };
    let mut buf = [0u8; 512];
    let start = Instant::now();
    let mut next = start;
    let (mut reads, mut writes) = (0u64, 0u64);
    let mut last_total: Option<u64> = None;
    let mut raised_until: Option<Instant> = None;
    while start.elapsed() < a.secs {
        let n = match file.read_at(&mut buf, 0) {
            Ok(n) => n,
            Err(e) => return fail(a.pressure, e),
        };
        reads += 1;
        let total = some_total(&buf[..n]);
        let now = Instant::now();
        let stalled =
            matches!((last_total, total), (Some(p), Some(t)) if t.saturating_sub(p) >= a.thresh_us);
        last_total = total.or(last_total);
        let write = match raised_until {
            _ if stalled => {
                let first = raised_until.is_none();
                raised_until = Some(now + a.hold);
                first.then_some(a.high)
            }
            Some(t) if now >= t => {
                raised_until = None;
                Some(a.low)
            }
            _ => None,
        };
        if let Some(v) = write {
            if let Err(e) = write_stamped(a.knob, v) {
                return fail(a.knob, e);
            }
            writes += 1;
        }
        sleep_to_next(&mut next, a.period);
    }
    println!("poll-act: {reads} reads, {writes} writes");
    ExitCode::SUCCESS
}

/// `trigger-act PRESSURE WINDOW_MS SECS KNOB HIGH LOW THRESH_US HOLD_MS`:
/// the reaction benchmark's floor — the least a reactor
/// that acts at the kernel's trigger can do, with nothing else (no rule
/// language, no claims, no log): a PSI trigger `some THRESH_US WINDOW_MS`
/// on PRESSURE, `poll(2)` on it; at an event HIGH goes to KNOB (once), and
/// once no event came for WINDOW_MS + HOLD_MS, LOW goes back. Prints what
/// `poll-act` prints.
pub(crate) fn trigger_act(a: &Act) -> ExitCode {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let fail = |what: &str, e: std::io::Error| {
        eprintln!("cgwarden-workload: trigger-act: {what}: {e}");
        ExitCode::from(1)
    };
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(a.pressure)
    {
        Ok(f) => f,
        Err(e) => return fail(a.pressure, e),
    };
    let trigger = format!("some {} {}", a.thresh_us, a.period.as_micros());
    if let Err(e) = file.write_all(trigger.as_bytes()) {
        return fail(&format!("{} ← {trigger}", a.pressure), e);
    }
    let start = Instant::now();
    let (mut events, mut writes) = (0u64, 0u64);
    let mut release: Option<Instant> = None;
    while start.elapsed() < a.secs {
        let now = Instant::now();
        let until = release.map_or(a.secs.saturating_sub(start.elapsed()), |t| {
            t.saturating_duration_since(now)
        });
        let mut pfd = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        };
        let ms = until.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return fail(a.pressure, e);
        }
        let now = Instant::now();
        let write = if r > 0 && pfd.revents & libc::POLLPRI != 0 {
            events += 1;
            let first = release.is_none();
            release = Some(now + a.period + a.hold);
            first.then_some(a.high)
        } else if r > 0 {
            return fail(a.pressure, std::io::Error::other("trigger gone (POLLERR)"));
        } else if release.is_some_and(|t| now >= t) {
            release = None;
            Some(a.low)
        } else {
            None
        };
        if let Some(v) = write {
            if let Err(e) = write_stamped(a.knob, v) {
                return fail(a.knob, e);
            }
            writes += 1;
        }
    }
    println!("trigger-act: {events} events, {writes} writes");
    ExitCode::SUCCESS
}

/// Writes `value` to `knob` and prints `wrote VALUE at UNIX_SECS` (the
/// benchmark's lag is read from it).
fn write_stamped(knob: &str, value: &str) -> std::io::Result<()> {
    std::fs::write(knob, value)?;
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    println!("wrote {value} at {}.{:06}", t.as_secs(), t.subsec_micros());
    Ok(())
}

/// Sleeps until `next` + `period` (a fixed rate; after an overrun, from now).
fn sleep_to_next(next: &mut Instant, period: Duration) {
    *next += period;
    let now = Instant::now();
    if *next > now {
        std::thread::sleep(*next - now);
    } else {
        *next = now;
    }
}

/// The `total=` of the `some` line of a PSI file, in µs.
fn some_total(text: &[u8]) -> Option<u64> {
    let line = text.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    line.strip_prefix("some ")?
        .split(' ')
        .find_map(|w| w.strip_prefix("total="))?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn some_total_reads_the_first_line() {
        let t = b"some avg10=1.00 avg60=0.50 avg300=0.10 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=9\n";
        assert_eq!(super::some_total(t), Some(123_456));
        assert_eq!(super::some_total(b"full total=3\n"), None);
        assert_eq!(super::some_total(b""), None);
    }
}
