//! arm64: the cross-built release binaries and .deb of
//! packaging/arm64/build.sh (a Debian 12 chroot with rustc-web 1.96 and
//! gcc-aarch64-linux-gnu; cached by its inputs), checked here on the host —
//! `file` says ARM aarch64, no glibc symbol version newer than Debian 12's
//! 2.36 is needed, lintian passes, the package is `Architecture: arm64` — and
//! the guest scenarios of tests/vm/guest/ run on Debian's arm64 kernel under
//! qemu-system-aarch64 (tests/vm/run-guest-arm64.sh), judged as tests/vm.rs
//! judges the x86 guest.
//!
//! Needs debootstrap, cargo-deb, lintian, file, readelf and `bash
//! tests/vm/setup-arm64.sh` (tests/run-all.sh runs and installs them); fails,
//! never skips, without them. `CGWARDEN_VM_ONLY` selects guest scenarios.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use support::{need, prom_blocks, promtool_check, repo_dir};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(cmd: &mut Command) -> String {
    let shown = format!("{cmd:?}");
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
    assert!(
        out.status.success(),
        "{shown} failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

struct Build {
    cgwarden: PathBuf,
    workload: PathBuf,
    deb: PathBuf,
}

/// packaging/arm64/build.sh once per test binary (both tests use it).
fn build() -> &'static Build {
    static B: OnceLock<Build> = OnceLock::new();
    B.get_or_init(|| {
        for t in ["debootstrap", "cargo-deb", "unshare"] {
            need(t);
        }
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("arm64");
        let stdout = ok(Command::new("bash")
            .arg(repo_dir().join("packaging/arm64/build.sh"))
            .arg(&out)
            .current_dir(repo_dir()));
        let mut bins = Vec::new();
        let mut deb = None;
        for l in stdout.lines() {
            if let Some(p) = l.strip_prefix("bin ") {
                bins.push(PathBuf::from(p));
            } else if let Some(p) = l.strip_prefix("deb ") {
                deb = Some(PathBuf::from(p));
            }
        }
        let b = Build {
            cgwarden: bins
                .iter()
                .find(|p| p.ends_with("cgwarden"))
                .cloned()
                .expect("build.sh printed `bin …/cgwarden`"),
            workload: bins
                .iter()
                .find(|p| p.ends_with("cgwarden-workload"))
                .cloned()
                .expect("build.sh printed `bin …/cgwarden-workload`"),
            deb: deb.expect("build.sh printed `deb …`"),
        };
        for p in [&b.cgwarden, &b.workload, &b.deb] {
            assert!(p.is_file(), "{} is not a file", p.display());
        }
        b
    })
}

/// The highest `GLIBC_x.y` version a binary's dynamic symbols need.
fn max_glibc(bin: &Path) -> (u32, u32) {
    let out = ok(Command::new("readelf").arg("--version-info").arg(bin));
    glibc_versions(&out)
        .into_iter()
        .max()
        .unwrap_or_else(|| panic!("{}: no GLIBC_ version needed?\n{out}", bin.display()))
}

fn glibc_versions(readelf: &str) -> Vec<(u32, u32)> {
    let mut v = Vec::new();
    for w in readelf.split_whitespace() {
        if let Some(ver) = w.strip_prefix("GLIBC_") {
            let mut it = ver.split('.').map(|n| n.parse::<u32>());
            if let (Some(Ok(a)), Some(Ok(b))) = (it.next(), it.next()) {
                v.push((a, b));
            }
        }
    }
    v
}

#[test]
fn glibc_versions_are_read_from_readelf() {
    let sample = "  0x0010:   Name: GLIBC_2.17  Flags: none  Version: 3\n\
                  0x0020:   Name: GLIBC_2.34  Flags: none\n  Name: GLIBC_PRIVATE\n  Name: GLIBC_2.3.4\n";
    assert_eq!(
        glibc_versions(sample).into_iter().max(),
        Some((2, 34)),
        "2.34 > 2.17 and 2.3.4"
    );
}

/// The binaries are arm64 ELF that Debian 12's glibc (2.36) can run; the
/// .deb is arm64, lintian-clean and holds the binary.
#[test]
fn arm64_binaries_and_deb() {
    for t in ["file", "readelf", "lintian", "dpkg-deb"] {
        need(t);
    }
    let b = build();
    for bin in [&b.cgwarden, &b.workload] {
        let f = ok(Command::new("file").arg("-b").arg(bin));
        eprintln!("{}: {f}", bin.display());
        assert!(
            f.contains("ELF 64-bit LSB") && f.contains("ARM aarch64"),
            "{}: {f}",
            bin.display()
        );
        assert!(
            f.contains("interpreter /lib/ld-linux-aarch64.so.1"),
            "{}: {f}",
            bin.display()
        );
        let (maj, min) = max_glibc(bin);
        eprintln!("{}: needs GLIBC_{maj}.{min}", bin.display());
        assert!(
            (maj, min) <= (2, 36),
            "{} needs GLIBC_{maj}.{min}, newer than Debian 12's 2.36",
            bin.display()
        );
    }
    let arch = ok(Command::new("dpkg-deb")
        .arg("-f")
        .arg(&b.deb)
        .arg("Architecture"));
    assert_eq!(arch.trim(), "arm64", "{}", b.deb.display());
    let depends = ok(Command::new("dpkg-deb")
        .arg("-f")
        .arg(&b.deb)
        .arg("Depends"));
    assert!(depends.contains("libc6"), "Depends: {depends}");
    let listing = ok(Command::new("dpkg-deb").arg("-c").arg(&b.deb));
    for want in [
        "./usr/bin/cgwarden",
        // The daemon the units run (static-pie; docs/size.md).
        "./usr/libexec/cgwarden/cgwardend",
        "./usr/lib/systemd/system/cgwarden.service",
        "./usr/share/man/man8/cgwarden.8.gz",
        "./etc/cgwarden/policy.yaml.example",
    ] {
        assert!(
            listing.lines().any(|l| l.ends_with(want)),
            "{want} not in the arm64 .deb:\n{listing}"
        );
    }
    // The packaged binaries are the arm64 ones, stripped; the daemon is
    // linked static-pie (packaging/deb/static-pie-cc): a PIE that maps no C
    // library, never a static non-PIE.
    let x = tempfile::tempdir().unwrap();
    ok(Command::new("dpkg-deb").arg("-x").arg(&b.deb).arg(x.path()));
    for (path, linked) in [
        ("usr/bin/cgwarden", "dynamically linked"),
        ("usr/libexec/cgwarden/cgwardend", "static-pie linked"),
    ] {
        let f = ok(Command::new("file").arg("-b").arg(x.path().join(path)));
        assert!(
            f.contains("ARM aarch64")
                && f.contains(linked)
                && f.contains("stripped")
                && !f.contains("not stripped"),
            "packaged {path}: {f}"
        );
    }
    let lint = Command::new("lintian")
        .args(["--fail-on", "error,warning"])
        .arg(&b.deb)
        .output()
        .expect("lintian");
    let report = text(&lint.stdout);
    assert!(
        lint.status.success()
            && !report
                .lines()
                .any(|l| l.starts_with("E:") || l.starts_with("W:")),
        "lintian on the arm64 .deb:\n{report}{}",
        text(&lint.stderr)
    );
}

/// Guest scenarios that cannot run on the arm64 guest, with the reason.
/// (Empty unless a scenario depends on x86; see docs/platform.md.)
const NOT_ON_ARM64: &[(&str, &str)] = &[];

fn expected_scenarios() -> BTreeSet<String> {
    let dir = repo_dir().join("tests/vm/guest/scenarios");
    let mut s: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".sh").map(str::to_owned))
        .map(|s| match s.split_once('-') {
            Some((n, rest)) if n.len() == 2 && n.bytes().all(|b| b.is_ascii_digit()) => {
                rest.to_owned()
            }
            _ => s,
        })
        .collect();
    for (name, _) in NOT_ON_ARM64 {
        s.remove(*name);
    }
    if let Ok(only) = std::env::var("CGWARDEN_VM_ONLY") {
        let only: BTreeSet<String> = only.split_whitespace().map(str::to_owned).collect();
        if !only.is_empty() {
            s.retain(|n| only.contains(n));
        }
    }
    s
}

#[derive(Default)]
struct Report {
    passed: usize,
    failed: Vec<String>,
    ended: BTreeSet<String>,
    reported: BTreeSet<String>,
    suite_done: Option<String>,
}

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
                r.passed += 1;
            } else {
                r.failed.push(format!("{verdict} {rest}"));
            }
        } else if let Some(i) = line.find("SCENARIO END ") {
            if let Some(n) = line[i + 13..].split(' ').next() {
                r.ended.insert(n.to_owned());
            }
        } else if let Some(i) = line.find("SUITE DONE") {
            r.suite_done = Some(line[i..].to_owned());
        }
    }
    r
}

/// Every guest scenario on arm64: the real arm64 binaries against Debian's
/// arm64 kernel (cgroup v2, PSI, zram, sched, netlink placement).
#[test]
fn arm64_guest_suite() {
    need("qemu-system-aarch64");
    let b = build();
    let log_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("arm64-serial.log");
    let status = Command::new("bash")
        .arg(repo_dir().join("tests/vm/run-guest-arm64.sh"))
        .arg(&b.cgwarden)
        .arg(&b.workload)
        .arg(&log_path)
        .current_dir(repo_dir())
        .status()
        .expect("cannot run tests/vm/run-guest-arm64.sh");
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let r = parse(&log);
    let mut problems = Vec::new();
    if !status.success() {
        problems.push(format!(
            "run-guest-arm64.sh exited with {status} (124 = hard timeout)"
        ));
    }
    if r.suite_done.is_none() {
        problems.push("no `SUITE DONE` line: the guest died or hung".into());
    }
    for n in expected_scenarios() {
        if !r.ended.contains(&n) || !r.reported.contains(&n) {
            problems.push(format!(
                "scenario `{n}` did not run to its end or reported nothing"
            ));
        }
    }
    if r.passed == 0 {
        problems.push("no RESULT PASS line".into());
    }
    if r.ended.contains("metrics") {
        let blocks = prom_blocks(&log);
        if blocks.len() < 2 {
            problems.push(format!(
                "metrics: expected 2 PROM blocks, found {}",
                blocks.len()
            ));
        }
        for (name, t) in &blocks {
            if let Err(why) = promtool_check(t) {
                problems.push(format!("metrics: promtool check metrics on {name}: {why}"));
            }
        }
    }
    if !r.failed.is_empty() {
        problems.push(format!("{} check(s) failed:", r.failed.len()));
        problems.extend(r.failed.iter().map(|f| format!("  {f}")));
    }
    eprintln!(
        "arm64 guest: {} passed, {} failed, {} scenarios; {}; serial log {}",
        r.passed,
        r.failed.len(),
        r.ended.len(),
        r.suite_done.as_deref().unwrap_or("no SUITE DONE"),
        log_path.display()
    );
    let tail: Vec<&str> = log.lines().collect();
    assert!(
        problems.is_empty(),
        "arm64 guest suite failed:\n{}\n--- last 60 lines ---\n{}",
        problems.join("\n"),
        tail[tail.len().saturating_sub(60)..].join("\n")
    );
}
