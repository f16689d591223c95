//! `threads SECS`: a process shaped like a ROS 2 node for the guest's
//! thread tests: threads named `ctrl` and `log` from the start,
//! and one that starts as `late` and renames itself `ctrl-late` after 2 s
//! (`pthread_setname_np`, a COMM event with the thread id). Each thread
//! sleeps; the main thread lives SECS seconds.
//!
//! `stamp-exit SECS FILE`: sleeps SECS, writes the wall-clock time (Unix
//! seconds with microseconds) to FILE, then exits with status 3: the
//! guest's critical process, whose exit time is compared with its event.

use std::ffi::CString;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn name_self(name: &str) {
    if let Ok(c) = CString::new(name) {
        // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16
        // bytes; it names the calling thread.
        unsafe {
            libc::prctl(libc::PR_SET_NAME, c.as_ptr() as libc::c_ulong, 0, 0, 0);
        }
    }
}

fn sleeper(name: &'static str, rename: Option<(Duration, &'static str)>) {
    let spawned = std::thread::Builder::new().spawn(move || {
        name_self(name);
        if let Some((after, new)) = rename {
            std::thread::sleep(after);
            name_self(new);
        }
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    });
    if let Err(e) = spawned {
        let _ = writeln!(std::io::stderr(), "cgwarden-workload: thread {name}: {e}");
    }
}

pub(crate) fn threads(secs: Duration) -> ExitCode {
    sleeper("ctrl", None);
    sleeper("log", None);
    sleeper("late", Some((Duration::from_secs(2), "ctrl-late")));
    std::thread::sleep(secs);
    ExitCode::SUCCESS
}

pub(crate) fn stamp_exit(secs: Duration, file: &Path) -> ExitCode {
    std::thread::sleep(secs);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let text = format!("{}.{:06}\n", now.as_secs(), now.subsec_micros());
    if let Err(e) = std::fs::write(file, text) {
        let _ = writeln!(
            std::io::stderr(),
            "cgwarden-workload: {}: {e}",
            file.display()
        );
    }
    ExitCode::from(3)
}

/// `ioprio TID`: prints the thread's I/O priority as `CLASS LEVEL`
/// (`ioprio_get(IOPRIO_WHO_PROCESS)`; class 0 none, 1 rt, 2 be, 3 idle):
/// /proc has no file for it and busybox's ionice may be absent.
pub(crate) fn ioprio(tid: &str) -> ExitCode {
    let Ok(tid) = tid.parse::<libc::c_int>() else {
        let _ = writeln!(
            std::io::stderr(),
            "cgwarden-workload: ioprio: TID must be a number"
        );
        return ExitCode::from(2);
    };
    // SAFETY: ioprio_get takes two ints.
    let rc = unsafe { libc::syscall(libc::SYS_ioprio_get, 1 as libc::c_int, tid) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        let _ = writeln!(
            std::io::stderr(),
            "cgwarden-workload: ioprio_get {tid}: {e}"
        );
        return ExitCode::from(1);
    }
    println!("{} {}", rc >> 13, rc & 7);
    ExitCode::SUCCESS
}

/// Unix seconds of an RFC 3339 UTC time as cgwarden prints it
/// (`2026-12-02T01:50:03.123Z`; fraction optional).
fn rfc3339_secs(t: &str) -> Option<f64> {
    let t = t.trim().trim_matches('"').strip_suffix('Z')?;
    let (date, time) = t.split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>());
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let (hms, frac) = match time.split_once('.') {
        Some((a, b)) => (a, format!("0.{b}").parse::<f64>().ok()?),
        None => (time, 0.0),
    };
    let mut h = hms.split(':').map(|x| x.parse::<i64>());
    let (hh, mm, ss) = (h.next()?.ok()?, h.next()?.ok()?, h.next()?.ok()?);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + hh * 3600 + mm * 60 + ss) as f64 + frac)
}

/// `since FILE TIME`: milliseconds from the Unix time in FILE (as
/// `stamp-exit` writes it) to the RFC 3339 TIME (an event's `time`).
pub(crate) fn since(file: &Path, time: &str) -> ExitCode {
    let stamp = std::fs::read_to_string(file)
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok());
    match (stamp, rfc3339_secs(time)) {
        (Some(a), Some(b)) => {
            println!("{}", ((b - a) * 1000.0).round() as i64);
            ExitCode::SUCCESS
        }
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "cgwarden-workload: since: cannot read {} or {time}",
                file.display()
            );
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_utc_to_unix_seconds() {
        assert_eq!(super::rfc3339_secs("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(
            super::rfc3339_secs("2000-03-01T00:00:01.5Z"),
            Some(951_868_801.5)
        );
    }
}
