//! The systemd-as-PID-1 guest: a Debian 12 rootfs with systemd 252
//! booted under QEMU (TCG), the project's .deb installed in it with dpkg, and
//! the scenarios of `tests/vm/systemd/scenarios/` run against the shipped
//! units under their real sandbox: cgwarden.service builds the hierarchy,
//! places, reacts to pressure, answers `status` to socket_group; reload keeps
//! the MainPID; the watchdog, SIGKILL and exit-status restarts;
//! cgwarden-delegated.service in its subtree; cgwarden-apply.service at boot
//! (after a reboot of the guest); the single-writer question. Every check
//! asserts on `systemctl show`, `/sys/fs/cgroup`, the socket or the journal.
//!
//! Needs `bash tests/vm/setup.sh` (QEMU) and debootstrap, cargo-deb, debugfs
//! (tests/run-all.sh installs them). It fails, never skips, when one is
//! missing. Environment, passed on to tests/vm/run-systemd-guest.sh:
//! `CGWARDEN_VM_CACHE`, `CGWARDEN_VM_TIMEOUT`, `CGWARDEN_VM_ONLY` (scenario
//! names; then only those must report), `CGWARDEN_SD_UNITS` (a directory of
//! unit files that replace the package's in the guest: how to watch a
//! scenario fail on a broken unit).

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{need, repo_dir};

/// Scenario names as the guest reports them: `NN-name.sh` -> `name`.
fn scenarios(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".sh").map(str::to_owned))
        .map(|s| match s.split_once('-') {
            Some((n, rest)) if n.len() == 2 && n.bytes().all(|b| b.is_ascii_digit()) => {
                rest.to_owned()
            }
            _ => s,
        })
        .collect()
}

#[derive(Debug, Default, PartialEq)]
struct Report {
    passed: Vec<String>,
    failed: Vec<String>,
    ended: BTreeSet<String>,
    reported: BTreeSet<String>,
    /// `(passed, failed)` of the `SUITE DONE passed=N failed=M` line.
    suite_done: Option<(usize, usize)>,
}

/// Reads the serial log: systemd prefixes the unit's lines with a kernel
/// timestamp and `sh[PID]: `, so each marker is looked for anywhere in a line.
fn parse(log: &str) -> Report {
    let mut r = Report::default();
    for raw in log.lines() {
        let line = raw.trim_end_matches('\r');
        if let Some(i) = line.find("RESULT ") {
            let rest = &line[i + 7..];
            let (verdict, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            let check = rest.split(' ').next().unwrap_or("");
            r.reported
                .insert(check.split('/').next().unwrap_or("").to_owned());
            if verdict == "PASS" {
                r.passed.push(rest.to_owned());
            } else {
                r.failed.push(format!("{verdict} {rest}"));
            }
        } else if let Some(i) = line.find("SCENARIO END ") {
            if let Some(name) = line[i + 13..].split(' ').next() {
                r.ended.insert(name.to_owned());
            }
        } else if let Some(i) = line.find("SUITE DONE ") {
            let field = |k: &str| {
                line[i..]
                    .split(' ')
                    .find_map(|w| w.strip_prefix(k))
                    .and_then(|v| v.parse().ok())
            };
            if let (Some(p), Some(f)) = (field("passed="), field("failed=")) {
                r.suite_done = Some((p, f));
            }
        }
    }
    r
}

fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The .deb of the binary under test, built as tests/packaging.rs builds it.
fn build_deb() -> PathBuf {
    need("cargo-deb");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_cgwarden"));
    let mut cmd = Command::new("bash");
    cmd.arg(repo_dir().join("packaging/deb/build.sh"))
        .current_dir(repo_dir());
    if bin.parent().and_then(Path::file_name) == Some("release".as_ref()) {
        cmd.arg("--no-build");
    }
    let out = cmd.output().expect("cannot run packaging/deb/build.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "packaging/deb/build.sh: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let deb = PathBuf::from(stdout.lines().last().unwrap_or_default());
    assert!(deb.is_file(), "build.sh printed no .deb: {stdout}");
    deb
}

#[test]
fn systemd_guest_suite() {
    for t in ["qemu-system-x86_64", "debootstrap", "debugfs", "mkfs.ext4"] {
        need(t);
    }
    let deb = build_deb();
    let workload = PathBuf::from(env!("CARGO_BIN_EXE_cgwarden-workload"));
    let log_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("systemd-serial.log");
    let status = Command::new("bash")
        .arg(repo_dir().join("tests/vm/run-systemd-guest.sh"))
        .arg(&deb)
        .arg(&workload)
        .arg(&log_path)
        .current_dir(repo_dir())
        .status()
        .expect("cannot run tests/vm/run-systemd-guest.sh");
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let r = parse(&log);

    let mut expected = scenarios(&repo_dir().join("tests/vm/systemd/scenarios"));
    if let Ok(only) = std::env::var("CGWARDEN_VM_ONLY") {
        let only: BTreeSet<String> = only.split_whitespace().map(str::to_owned).collect();
        if !only.is_empty() {
            expected.retain(|s| only.contains(s));
        }
    }
    let mut problems = Vec::new();
    if !status.success() {
        problems.push(format!(
            "run-systemd-guest.sh exited with {status} (124 = QEMU hit the hard timeout)"
        ));
    }
    match r.suite_done {
        None => problems.push("no `SUITE DONE` line: the guest died or hung".into()),
        Some((p, f)) if p != r.passed.len() || f != r.failed.len() => problems.push(format!(
            "SUITE DONE says passed={p} failed={f}, the log has {} and {} RESULT lines",
            r.passed.len(),
            r.failed.len()
        )),
        Some(_) => {}
    }
    for name in &expected {
        if !r.ended.contains(name) || !r.reported.contains(name) {
            problems.push(format!(
                "scenario `{name}` did not run to its end or reported nothing"
            ));
        }
    }
    if r.passed.is_empty() {
        problems.push("no RESULT PASS line at all".into());
    }
    if !r.failed.is_empty() {
        problems.push(format!("{} check(s) failed:", r.failed.len()));
        problems.extend(r.failed.iter().map(|f| format!("  {f}")));
    }
    eprintln!(
        "systemd guest: {} passed, {} failed, {} scenarios; serial log {}",
        r.passed.len(),
        r.failed.len(),
        r.ended.len(),
        log_path.display()
    );
    assert!(
        problems.is_empty(),
        "systemd guest suite failed:\n{}\n\n--- last 60 lines of {} ---\n{}",
        problems.join("\n"),
        log_path.display(),
        tail(&log, 60)
    );
}

#[test]
fn parser_reads_the_serial_console_of_a_unit() {
    let log = "[   28.5] sh[233]: SYSTEMD GUEST UP boot=1\n\
               [   29.5] sh[233]: SCENARIO BEGIN install uptime=29.54\n\
               [   30.1] sh[233]: RESULT PASS install/dpkg-install dpkg -i exited 0\r\n\
               [   31.0] sh[233]: RESULT FAIL install/enabled-main expected 'enabled', got ''\n\
               [   31.2] sh[233]: SCENARIO END install rc=0 uptime=31.2\n\
               RESULT PASS service/x ok\n\
               [   99.0] sh[401]: SUITE DONE passed=2 failed=1 boots=2 uptime=99\n";
    let r = parse(log);
    assert_eq!(
        r.passed,
        vec!["install/dpkg-install dpkg -i exited 0", "service/x ok"]
    );
    assert_eq!(
        r.failed,
        vec!["FAIL install/enabled-main expected 'enabled', got ''"]
    );
    assert!(r.ended.contains("install") && !r.ended.contains("service"));
    assert!(r.reported.contains("service"));
    assert_eq!(r.suite_done, Some((2, 1)));
    assert_eq!(
        scenarios(&repo_dir().join("tests/vm/systemd/scenarios"))
            .into_iter()
            .next()
            .as_deref(),
        Some("apply-boot")
    );
}
