//! Headless Chromium for the tests that render a page (the report, the
//! fleet dashboard): Debian's `/usr/bin/chromium`, the flags of
//! docs/report.md, a fresh profile, two minutes at most.

use std::path::Path;
use std::process::{Command, Output};

pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Chromium with the flags of docs/report.md and a fresh profile.
pub fn chromium(dir: &Path, args: &[&str], page: &Path) -> Output {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install Debian's `chromium` (tests/run-all.sh does)"
    );
    let profile = tempfile::tempdir_in(dir).unwrap();
    let o = Command::new("timeout")
        .arg("120")
        .arg(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(
        o.status.success(),
        "chromium failed: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    o
}
