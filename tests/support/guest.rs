//! What the guest and packaging tests share: the tool check that fails
//! (never skips) when run-all.sh's installs are missing, and the serial
//! log's metrics blocks with their `promtool` check.

use std::process::Command;

/// Fails the test unless `tool` is on PATH (tests/run-all.sh installs it).
pub fn need(tool: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "`{tool}` is not installed: tests/run-all.sh installs it (this test does not skip)"
    );
}

/// The `PROM BEGIN NAME` … `prom| LINE` … `PROM END` blocks of a serial log.
pub fn prom_blocks(log: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(String, String)> = None;
    for raw in log.lines() {
        let line = raw.trim_end_matches('\r');
        if let Some(i) = line.find("PROM BEGIN ") {
            cur = Some((line[i + 11..].to_owned(), String::new()));
        } else if line.contains("PROM END") {
            out.extend(cur.take());
        } else if let (Some((_, text)), Some(i)) = (&mut cur, line.find("prom| ")) {
            text.push_str(&line[i + 6..]);
            text.push('\n');
        }
    }
    out
}

/// `promtool check metrics` on `text`; promtool must be installed.
pub fn promtool_check(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run promtool ({e}); apt install prometheus"))?;
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(text.as_bytes());
    }
    let o = child.wait_with_output().map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ))
    }
}
