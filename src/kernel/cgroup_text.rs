//! The text formats of cgroup files, pure: pid lists (`cgroup.procs`,
//! `cgroup.threads`), the `0::` line of `/proc/PID/cgroup`, and joining a
//! group's relative path under a base. Shared by [`super::cgroupfs`] and the
//! fake tree's emulation (`kernel::root`'s fake backend), which each read
//! and write those files.

use std::path::{Path, PathBuf};

/// Joins `rel` (slash-separated) onto `base`; `.`/empty segments are
/// skipped and `..` never climbs above `base`.
pub(crate) fn join_clamped(base: &Path, rel: &str) -> PathBuf {
    let mut segs: Vec<&str> = Vec::new();
    for s in rel.split('/') {
        match s {
            "" | "." => {}
            ".." => {
                segs.pop();
            }
            s => segs.push(s),
        }
    }
    let mut p = base.to_path_buf();
    for s in segs {
        p.push(s);
    }
    p
}

/// Parses `cgroup.procs` / `cgroup.threads`: one pid per line; junk skipped.
pub(crate) fn parse_pids(text: &str) -> Vec<i32> {
    text.split_whitespace()
        .filter_map(|t| t.parse::<i32>().ok())
        .filter(|&p| p > 0)
        .collect()
}

/// Renders a pid list as the kernel lists it: one per line.
pub(crate) fn join_pids(pids: &[i32]) -> String {
    pids.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parses the content of `/proc/PID/cgroup` (see [`super::cgroupfs::pid_cgroup`]).
pub(crate) fn parse_pid_cgroup(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim_end().to_string())
        .filter(|p| p.starts_with('/'))
}
