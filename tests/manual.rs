//! Man pages and completions come out of the real binary and are usable:
//! `man -l` renders every page without a warning, and each shell accepts
//! its completion script.
#![cfg(feature = "docgen")]

use std::process::Command;

mod support;
use support::BIN;

#[test]
fn every_man_page_renders_with_man_and_no_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .arg("manpages")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pages: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect();
    for want in [
        "cgwarden.8",
        "cgwarden-run.8",
        "cgwarden-boost.8",
        "cgwarden-policy.5",
    ] {
        assert!(
            pages.iter().any(|p| p.ends_with(want)),
            "no {want} in {pages:?}"
        );
    }
    assert!(
        !pages.iter().any(|p| p.ends_with("cgwarden-manpages.8")),
        "the hidden command got a page"
    );
    for page in &pages {
        let r = Command::new("man")
            .args(["--warnings", "-l", page])
            .env("MANWIDTH", "80")
            .output()
            .expect("man (Debian man-db) must be installed: tests/run-all.sh installs it");
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(
            r.status.success() && stderr.trim().is_empty(),
            "{page}: {stderr}"
        );
        let text = String::from_utf8_lossy(&r.stdout);
        assert!(
            text.contains("NAME"),
            "{page} rendered without a NAME section:\n{text}"
        );
    }
    // The policy page carries the reference itself, not only a title.
    let policy = Command::new("man")
        .args([
            "-l",
            &dir.path().join("cgwarden-policy.5").to_string_lossy(),
        ])
        .env("MANWIDTH", "80")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&policy.stdout);
    for want in [
        "cgroup_root",
        "housekeeping_cpus",
        "smallest wins",
        "memory_full_avg10",
    ] {
        assert!(text.contains(want), "cgwarden-policy(5) lacks `{want}`");
    }
}

#[test]
fn completions_are_accepted_by_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(BIN)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let script = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            script.contains("boost") && script.contains("reload"),
            "{shell}: no subcommands"
        );
        if shell == "bash" {
            // bash is on every CI machine; `-n` parses without running.
            let dir = tempfile::tempdir().unwrap();
            let f = dir.path().join("cgwarden.bash");
            std::fs::write(&f, &script).unwrap();
            let r = Command::new("bash").arg("-n").arg(&f).output().unwrap();
            assert!(
                r.status.success(),
                "bash -n: {}",
                String::from_utf8_lossy(&r.stderr)
            );
        }
    }
    let bad = Command::new(BIN)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(
        bad.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}
