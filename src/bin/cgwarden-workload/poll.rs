//! `poll-file FILE PERIOD_MS SECS`: the anchor of the idle-cost benchmark
//! (issue 11). It is what an integrator's C loop does: keep the pressure file
//! open, `pread` it every PERIOD_MS, look at the first line, sleep. A daemon
//! woken by kernel PSI triggers should cost less than this.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::process::ExitCode;
use std::time::{Duration, Instant};

pub fn poll_file(path: &str, period: Duration, secs: Duration) -> ExitCode {
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
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
    println!("poll-file: {reads} reads, {stalled} showed a stall");
    ExitCode::SUCCESS
}
