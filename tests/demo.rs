//! `cgwarden demo` is the README's first command: it must run unprivileged
//! state-free (a temp board), show every scripted reaction, and leave
//! nothing behind.
#![cfg(feature = "demo")]

use std::process::Command;

mod support;
use support::BIN;

#[test]
fn the_demo_narrates_placements_rule_firings_writes_and_the_reset() {
    let out = Command::new(BIN)
        .arg("demo")
        .output()
        .expect("run cgwarden demo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "placed infer-server (pid 4200) in inference",
        "placed motion_control (pid 4300) in realtime",
        "rule inference-memory-pressure is now active",
        "write inference.memory.high: 2G → 2.5G (rule inference-memory-pressure)",
        "write vision.memory.max: 1.5G → 2G (rule vision-oom-kill)",
        "write cpufreq.policy7.min: 806.4MHz → 2.4GHz (rule rt-test-running)",
        "rule rt-test-running is now idle",
        "reset complete; journal removed",
    ] {
        assert!(
            text.contains(want),
            "the demo did not say `{want}`:\n{text}"
        );
    }
    // The unmatched process stays where it was.
    assert!(!text.contains("pid 4301"), "{text}");
    // The burst's count is what it starts: one placement each, and the
    // shell no rule matches is said (not "a burst of 12" for 11
    // placements, the shell unmentioned).
    let burst = text
        .lines()
        .find_map(|l| l.split("a burst of ").nth(1))
        .expect("the burst is announced");
    assert!(
        burst.contains("and a shell no placement rule matches"),
        "{burst}"
    );
    let started: usize = burst.split(' ').next().unwrap().parse().unwrap();
    let placed = text.lines().filter(|l| l.contains("] placed ")).count();
    assert_eq!(started, placed + 1, "{text}");
    assert!(
        text.contains(&format!("in all: {placed} placements")),
        "{text}"
    );
    // Its temp board is gone.
    let dir = std::env::temp_dir();
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("cgwarden-demo-")
        })
        .filter(|e| {
            // Only a board of a process that no longer runs counts as left behind.
            let name = e.file_name().to_string_lossy().to_string();
            let pid = name.trim_start_matches("cgwarden-demo-");
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
        })
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "demo boards left behind: {left:?}");
}
