//! The originals of per-task attributes (journalled where the process
//! outlives cgwarden, never restored on exited processes):
//! `state_dir/tasks.journal`, one line per thread and attribute the first
//! time cgwarden changes it —
//!
//! ```text
//! TASK <pid> <start> <tid> <attr> <value…>
//! ```
//!
//! `start` is the process's start time (`/proc/PID/stat` field 22): `reset`
//! restores an attribute only on the very process it was taken from (same
//! pid and start), and only while the thread is there. Values are the
//! kernel's numbers: nice, oom_score_adj, `CLASS LEVEL` (ioprio, class 0 =
//! none), a cpu list, `MIN MAX` (uclamp, 0–1024), `POLICY PRIORITY NICE`
//! (sched). A line that does not parse is reported and skipped; nothing in
//! the file names a path, so it cannot make `reset` write anywhere but the
//! thread's own attributes.

use crate::kernel::{procfs, sched, task_attr, Op, Root};
use crate::units::CpuList;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The file's name in `state_dir`.
pub(crate) const FILE: &str = "tasks.journal";
/// Past this size nothing more is journalled (said once): a board with
/// hundreds of tuned threads writes a few KiB.
const MAX_BYTES: u64 = 4 << 20;

pub(crate) fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE)
}

/// One original.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Original {
    pub(crate) pid: i32,
    pub(crate) start: u64,
    pub(crate) tid: i32,
    pub(crate) attr: String,
    pub(crate) value: String,
}

impl Original {
    pub(crate) fn line(&self) -> String {
        format!(
            "TASK {} {} {} {} {}",
            self.pid, self.start, self.tid, self.attr, self.value
        )
    }

    pub(crate) fn parse(line: &str) -> Option<Original> {
        let mut w = line.split_whitespace();
        if w.next()? != "TASK" {
            return None;
        }
        let pid: i32 = w.next()?.parse().ok()?;
        let start: u64 = w.next()?.parse().ok()?;
        let tid: i32 = w.next()?.parse().ok()?;
        let attr = w.next()?.to_string();
        let value: Vec<&str> = w.collect();
        let nums = |n: usize| value.len() == n && value.iter().all(|v| v.parse::<i64>().is_ok());
        let ok = match attr.as_str() {
            "nice" | "oom_score_adj" => nums(1),
            "ioprio" | "uclamp" => nums(2),
            "sched" => nums(3),
            "cpus" => value.len() == 1 && CpuList::parse(value[0]).is_ok(),
            _ => false,
        };
        (ok && pid > 0 && tid > 0).then(|| Original {
            pid,
            start,
            tid,
            attr,
            value: value.join(" "),
        })
    }
}

/// The current value of `attr` of thread `tid` of `pid`, as journalled.
pub(crate) fn read(root: &Root, pid: i32, tid: i32, attr: &str) -> Option<String> {
    match attr {
        "nice" => task_attr::nice(root, pid, tid).map(|n| n.to_string()),
        "oom_score_adj" => task_attr::oom_score_adj(root, pid).map(|n| n.to_string()),
        "ioprio" => task_attr::ioprio(root, tid).map(|(c, l)| format!("{c} {l}")),
        "cpus" => task_attr::affinity(root, pid, tid).map(|c| c.to_string()),
        "uclamp" => task_attr::uclamp(root, tid).map(|(a, b)| format!("{a} {b}")),
        "sched" => {
            if !root.supports(Op::Sched) {
                return None;
            }
            let a = sched::current_attr(root, tid).ok()??;
            // A deadline task's parameters are not restored by this form.
            (sched::Policy::from_kernel(a.sched_policy) != Some(sched::Policy::Deadline))
                .then(|| format!("{} {} {}", a.sched_policy, a.sched_priority, a.sched_nice))
        }
        _ => None,
    }
}

/// Remembers which originals are in the file already (this process's
/// lifetime) and appends new ones, one synced write per call.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    seen: HashSet<(i32, u64, i32, String)>,
    full: bool,
}

impl Writer {
    /// Appends the originals not yet journalled. An error is for the
    /// caller to say; the change is made anyway (a process's attribute is
    /// not worth stopping placement for).
    pub(crate) fn append(
        &mut self,
        root: &Root,
        file: &Path,
        originals: Vec<Original>,
    ) -> Result<(), String> {
        let new: Vec<Original> = originals
            .into_iter()
            .filter(|o| self.seen.insert((o.pid, o.start, o.tid, o.attr.clone())))
            .collect();
        if new.is_empty() || self.full {
            return Ok(());
        }
        let size = std::fs::metadata(root.host_path(file))
            .map(|m| m.len())
            .unwrap_or(0);
        if size > MAX_BYTES {
            self.full = true;
            return Err(format!(
                "{}: over {} MiB; task attributes changed from now on are not journalled",
                file.display(),
                MAX_BYTES >> 20
            ));
        }
        let text: Vec<String> = new.iter().map(Original::line).collect();
        if let Some(dir) = file.parent() {
            let _ = root.mkdir_all(dir);
        }
        root.append_synced(file, &text.join("\n"))
            .map_err(|e| e.to_string())
    }
}

/// What restoring did.
#[derive(Debug, Default)]
pub(crate) struct Restored {
    pub(crate) lines: Vec<String>,
    pub(crate) failures: Vec<String>,
}

/// `reset`: every original whose process (same pid and start) and thread
/// still live is written back, the first line of each key winning; the
/// file is removed when nothing failed.
pub(crate) fn restore(root: &Root, state_dir: &Path) -> Restored {
    let file = path(state_dir);
    let mut out = Restored::default();
    let Ok(text) = root.read(&file) else {
        return out;
    };
    let mut seen = HashSet::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Some(o) = Original::parse(line) else {
            out.failures
                .push(format!("{}: not a task original: {line:?}", file.display()));
            continue;
        };
        if !seen.insert((o.pid, o.start, o.tid, o.attr.clone())) {
            continue;
        }
        let same = matches!(procfs::start_time(root, o.pid), Ok(Some(Some(s))) if s == o.start);
        if !same || !root.is_dir(Path::new(&format!("/proc/{}/task/{}", o.pid, o.tid))) {
            continue; // exited: never restored on another process
        }
        let what = format!("TASK {}/{} {} {}", o.pid, o.tid, o.attr, o.value);
        if o.attr != "oom_score_adj" && !root.supports(Op::Sched) {
            out.lines.push(format!("# skipped on a fake root: {what}"));
            continue;
        }
        match write(root, &o) {
            Ok(()) => out.lines.push(what),
            Err(e) if e.is_gone() => {}
            Err(e) => out.failures.push(format!("{what}: {e}")),
        }
    }
    if out.failures.is_empty() {
        let _ = root.remove_file(&file);
    }
    out
}

fn write(root: &Root, o: &Original) -> crate::kernel::Result<()> {
    let n: Vec<i64> = o
        .value
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    let int = |i: usize| n.get(i).copied().unwrap_or(0);
    let t = o.tid;
    let bad = |m: &str| crate::kernel::Error::other(format!("/proc/{t}"), m.to_string());
    match o.attr.as_str() {
        "nice" => task_attr::set_nice(t, int(0) as i32),
        "oom_score_adj" => task_attr::set_oom_score_adj(root, o.pid, int(0) as i32),
        "ioprio" => task_attr::set_ioprio(t, int(0) as u8, int(1) as u8),
        "uclamp" => task_attr::set_uclamp(t, Some(int(0) as u32), Some(int(1) as u32)),
        "cpus" => match CpuList::parse(&o.value) {
            Ok(c) => task_attr::set_affinity(t, &c),
            Err(e) => Err(bad(&e.to_string())),
        },
        "sched" => {
            let Some(policy) = sched::Policy::from_kernel(int(0) as u32) else {
                return Err(bad("unknown scheduling policy"));
            };
            let rt = policy.is_rt();
            let spec = sched::SchedSpec {
                policy,
                priority: rt.then_some(int(1) as u32),
                nice: (!rt).then_some(int(2) as i32),
                deadline: None,
            };
            sched::apply(t, &spec)
        }
        other => Err(bad(&format!("unknown attribute {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_junk_is_refused() {
        let o = Original {
            pid: 412,
            start: 9000,
            tid: 413,
            attr: "sched".into(),
            value: "0 0 0".into(),
        };
        assert_eq!(Original::parse(&o.line()), Some(o));
        for bad in [
            "TASK 1 2 3 core_pattern x",
            "TASK 1 2 3 nice /etc/passwd",
            "TASK -1 2 3 nice 0",
            "TASK 1 2 3 cpus 0-3 extra",
            "WRITE /proc/sys/kernel/core_pattern x",
        ] {
            assert_eq!(Original::parse(bad), None, "{bad}");
        }
        assert!(Original::parse("TASK 1 2 3 cpus 0-3,6").is_some());
    }
}
