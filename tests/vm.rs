//! Guest-kernel test bed: boots one Debian kernel under QEMU (TCG) with the freshly built
//! `cgwarden` and `cgwarden-workload` in an initramfs, runs every scenario in
//! `tests/vm/guest/scenarios/` against the real cgroup v2 / sysctl / zram / sched
//! interfaces, and asserts that every check passed. See docs/testing.md.
//!
//! Needs `bash tests/vm/setup.sh` once (packages + kernel cache). Environment:
//! - `CGWARDEN_VM=skip`: skip loudly instead of failing when the test bed is missing.
//! - `CGWARDEN_VM_CGWARDEN=PATH`: run the guest suite against PATH instead of the built
//!   binary (e.g. `tests/vm/mock-cgwarden.sh`, the reference that proves the suite).
//! - `CGWARDEN_VM_CACHE`, `CGWARDEN_VM_TIMEOUT`: passed on to tests/vm/run-guest.sh.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{prom_blocks, promtool_check};

const SETUP: &str = "bash tests/vm/setup.sh";

fn cache_dir() -> PathBuf {
    match std::env::var_os("CGWARDEN_VM_CACHE") {
        Some(d) => PathBuf::from(d),
        None => {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            Path::new(&home).join(".cache/cgwarden-vm")
        }
    }
}

fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false)
}

/// Why the test bed cannot run here, if it cannot.
fn missing_prerequisite() -> Option<String> {
    if !on_path("qemu-system-x86_64") {
        return Some("qemu-system-x86_64 is not installed".into());
    }
    let kver = cache_dir().join("kver");
    if !kver.is_file() {
        return Some(format!(
            "no guest kernel cache ({} missing)",
            kver.display()
        ));
    }
    None
}

/// Scenario names as the guest reports them: `NN-name.sh` -> `name`.
fn expected_scenarios(dir: &Path) -> BTreeSet<String> {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list scenarios in {}: {e}", dir.display()));
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".sh").map(str::to_owned))
        .map(|stem| match stem.split_once('-') {
            Some((n, rest)) if n.len() == 2 && n.bytes().all(|b| b.is_ascii_digit()) => {
                rest.to_owned()
            }
            _ => stem,
        })
        .collect()
}

#[derive(Debug, Default)]
struct Report {
    passed: Vec<String>,
    failed: Vec<String>,
    /// Scenario names that printed `SCENARIO END`.
    ended: BTreeSet<String>,
    /// Scenario names that printed at least one RESULT.
    reported: BTreeSet<String>,
    suite_done: Option<String>,
}

fn parse(log: &str) -> Report {
    let mut r = Report::default();
    for raw in log.lines() {
        // The serial console may leave a stray CR or kernel output in front of a line.
        let line = raw.trim_end_matches('\r');
        let line = line
            .find("RESULT ")
            .or_else(|| line.find("SUITE DONE"))
            .or_else(|| line.find("SCENARIO END "))
            .map_or(line, |i| &line[i..]);
        if let Some(rest) = line.strip_prefix("RESULT ") {
            let (verdict, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            let check = rest.split(' ').next().unwrap_or("");
            let scenario = check.split('/').next().unwrap_or("").to_owned();
            r.reported.insert(scenario);
            match verdict {
                "PASS" => r.passed.push(rest.to_owned()),
                _ => r.failed.push(format!("{verdict} {rest}")),
            }
        } else if let Some(rest) = line.strip_prefix("SCENARIO END ") {
            if let Some(name) = rest.split(' ').next() {
                r.ended.insert(name.to_owned());
            }
        } else if line.starts_with("SUITE DONE") {
            r.suite_done = Some(line.to_owned());
        }
    }
    r
}

fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[test]
fn guest_suite() {
    if let Some(why) = missing_prerequisite() {
        if std::env::var("CGWARDEN_VM").as_deref() == Ok("skip") {
            eprintln!(
                "\n*** SKIPPED: guest test bed: {why} (CGWARDEN_VM=skip); set up with `{SETUP}` ***\n"
            );
            return;
        }
        panic!("guest test bed unavailable: {why}. Run `{SETUP}` first (or set CGWARDEN_VM=skip to skip explicitly).");
    }

    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cgwarden = std::env::var_os("CGWARDEN_VM_CGWARDEN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_cgwarden")));
    let workload = PathBuf::from(env!("CARGO_BIN_EXE_cgwarden-workload"));
    let log_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("vm-serial.log");

    let status = Command::new("bash")
        .arg(root.join("tests/vm/run-guest.sh"))
        .arg(&cgwarden)
        .arg(&workload)
        .arg(&log_path)
        // The footprint scenario holds a release build to the 8 MiB RSS target;
        // an unoptimised build is larger and gets twice that.
        .env(
            "CGWARDEN_VM_DEBUG_BUILD",
            if cfg!(debug_assertions) { "1" } else { "" },
        )
        .current_dir(root)
        .status()
        .expect("cannot run bash tests/vm/run-guest.sh");
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let report = parse(&log);

    let expected = expected_scenarios(&root.join("tests/vm/guest/scenarios"));
    let mut problems = Vec::new();
    if !status.success() {
        problems.push(format!(
            "run-guest.sh exited with {status} (124 = QEMU hit the hard timeout)"
        ));
    }
    if report.suite_done.is_none() {
        problems.push("no `SUITE DONE` line: the guest died or hung before the end".into());
    }
    for name in &expected {
        if !report.ended.contains(name) || !report.reported.contains(name) {
            problems.push(format!(
                "scenario `{name}` did not run to its end or reported nothing"
            ));
        }
    }
    if report.passed.is_empty() && report.failed.is_empty() {
        problems.push("no RESULT lines at all".into());
    }
    // The metrics scenario prints its scrape and textfile; the
    // guest has no promtool, so it runs here (and must: no silent skip).
    if report.ended.contains("metrics") {
        let blocks = prom_blocks(&log);
        if blocks.len() < 2 {
            problems.push(format!(
                "metrics: expected the scrape and the textfile as PROM blocks, found {}",
                blocks.len()
            ));
        }
        for (name, text) in &blocks {
            if let Err(why) = promtool_check(text) {
                problems.push(format!("metrics: promtool check metrics on {name}: {why}"));
            }
        }
    }
    if !report.failed.is_empty() {
        problems.push(format!("{} check(s) failed:", report.failed.len()));
        problems.extend(report.failed.iter().map(|f| format!("  {f}")));
    }

    eprintln!(
        "guest suite: {} passed, {} failed, {} scenarios; {}; serial log: {}",
        report.passed.len(),
        report.failed.len(),
        report.ended.len(),
        report.suite_done.as_deref().unwrap_or("no SUITE DONE"),
        log_path.display()
    );
    if !problems.is_empty() {
        panic!(
            "guest suite failed (cgwarden = {}):\n{}\n\n--- last 80 lines of the serial log ({}) ---\n{}",
            cgwarden.display(),
            problems.join("\n"),
            log_path.display(),
            tail(&log, 80)
        );
    }
}

#[test]
fn prom_blocks_are_read_through_serial_noise() {
    let log =
        "PROM BEGIN /run/a\r\nprom| # TYPE x gauge\r\n[ 1.0] k prom| x 1\nPROM END\nprom| stray\n";
    let b = prom_blocks(log);
    assert_eq!(
        b,
        vec![("/run/a".to_string(), "# TYPE x gauge\nx 1\n".to_string())]
    );
}

#[test]
fn parser_reads_results_and_scenarios() {
    let log = "GUEST UP\nSCENARIO BEGIN a\nRESULT PASS a/x fine\n\
               RESULT FAIL a/y expected '1', got '2'\n\r[  1.0] noise RESULT PASS b/z ok\r\n\
               SCENARIO END a rc=0\nSUITE DONE passed=2 failed=1\n";
    let r = parse(log);
    assert_eq!(r.passed, vec!["a/x fine", "b/z ok"]);
    assert_eq!(r.failed, vec!["FAIL a/y expected '1', got '2'"]);
    assert!(r.ended.contains("a") && !r.ended.contains("b"));
    assert!(r.reported.contains("a") && r.reported.contains("b"));
    assert_eq!(
        r.suite_done.as_deref(),
        Some("SUITE DONE passed=2 failed=1")
    );
}
