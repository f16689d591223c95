//! `boost-exit SOCKET KNOB VALUE FILE`: how soon a boost tied to a process
//! ends after that process exits. It starts a child (sleeps
//! 300 ms), asks the daemon over the control socket — raw varlink, so
//! nothing of cgwarden's client is involved — to boost KNOB=VALUE tied to
//! the child's pid, checks FILE shows the boost, reaps the child and polls
//! FILE every 100 µs until it leaves the boosted value. Prints the
//! microseconds between the child's exit (as waitpid saw it) and that.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

fn fail(m: &str) -> ExitCode {
    eprintln!("cgwarden-workload: boost-exit: {m}");
    ExitCode::from(1)
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

pub(crate) fn boost_exit(
    socket: &str,
    knob: &str,
    value: &str,
    file: &str,
    expect: &str,
) -> ExitCode {
    let mut child = match Command::new("sleep").arg("0.3").spawn() {
        Ok(c) => c,
        Err(e) => return fail(&format!("cannot start sleep: {e}")),
    };
    let ok_text = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-_%:/".contains(c))
    };
    if !ok_text(knob) || !ok_text(value) {
        return fail("KNOB and VALUE must be plain words");
    }
    let msg = format!(
        "{{\"method\":\"io.cgwarden.Daemon.Boost\",\"parameters\":{{\"knobs\":{{\"{knob}\":\"{value}\"}},\"duration\":\"1m\",\"reason\":\"boost-exit\",\"pid\":{}}}}}\0",
        child.id()
    );
    let mut s = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => return fail(&format!("{socket}: {e}")),
    };
    if let Err(e) = s.write_all(msg.as_bytes()) {
        return fail(&format!("send: {e}"));
    }
    let mut reply = Vec::new();
    let mut b = [0u8; 4096];
    while !reply.ends_with(&[0]) {
        match s.read(&mut b) {
            Ok(0) => return fail("the daemon closed the connection"),
            Ok(n) => reply.extend_from_slice(&b[..n]),
            Err(e) => return fail(&format!("receive: {e}")),
        }
    }
    let text = String::from_utf8_lossy(&reply);
    if !text.contains("\"handle\"") {
        return fail(&format!("boost refused: {text}"));
    }
    // The reply says the boost is granted and its write queued; the write
    // itself lands a moment later.
    let asked = Instant::now();
    while read_trim(file) != expect && asked.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_micros(200));
    }
    let boosted = read_trim(file);
    if boosted != expect {
        return fail(&format!(
            "{file} holds {boosted:?}, not the boost {expect:?}"
        ));
    }
    if let Err(e) = child.wait() {
        return fail(&format!("wait: {e}"));
    }
    let exited = Instant::now();
    while read_trim(file) == boosted {
        if exited.elapsed() > Duration::from_secs(5) {
            return fail("still boosted 5 s after the process exited");
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let us = exited.elapsed().as_micros();
    println!(
        "boost-exit: {knob} back to {} {us} us after the process exited",
        read_trim(file)
    );
    ExitCode::SUCCESS
}
