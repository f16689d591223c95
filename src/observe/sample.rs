//! One reading of a group's (or the whole machine's) pressure, memory and
//! memory events, shared by the metrics exposition and the flight recorder.
//! Every file goes through `src/kernel` readers; a file that is missing or
//! unreadable (group deleted, controller off, kernel without PSI) leaves its
//! value `None` — never an error, never a panic.

use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::psi::{Psi, PsiLine};
use crate::kernel::{meminfo, psi, Root};
use crate::knobs::MACHINE;
use std::collections::BTreeMap;

/// The PSI resources cgwarden reads, in metric order.
pub(crate) const RESOURCES: [&str; 3] = ["cpu", "memory", "io"];

/// A memory limit: a byte count, or `max` (no limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Limit {
    Bytes(u64),
    Max,
}

impl Limit {
    fn parse(text: &str) -> Option<Limit> {
        match text.trim() {
            "max" => Some(Limit::Max),
            t => t.parse().ok().map(Limit::Bytes),
        }
    }
}

/// What one group showed at one moment.
#[derive(Clone, Debug, Default)]
pub(crate) struct GroupSample {
    /// The group's policy name ([`MACHINE`], `host`, for the whole machine).
    pub(crate) name: String,
    /// `cpu`, `memory`, `io` pressure, in [`RESOURCES`] order.
    pub(crate) psi: [Psi; 3],
    pub(crate) memory_current: Option<u64>,
    pub(crate) memory_high: Option<Limit>,
    pub(crate) memory_max: Option<Limit>,
    pub(crate) swap_current: Option<u64>,
    /// `memory.events` counters (empty when unreadable); for the machine
    /// only `oom_kill`, the global count of `/proc/vmstat`.
    pub(crate) events: BTreeMap<String, u64>,
    /// Memory telemetry, for the machine only.
    pub(crate) mem: Option<super::memstat::MemTelemetry>,
}

impl GroupSample {
    /// The `some` (`full == false`) or `full` line of `resource`'s pressure.
    pub(crate) fn line(&self, resource: usize, full: bool) -> Option<PsiLine> {
        let p = self.psi.get(resource)?;
        if full {
            p.full
        } else {
            p.some
        }
    }
}

/// Reads group `name` at cgroup path `path` (relative to the cgroup root).
pub(crate) fn read_group(cg: &CgroupFs, name: &str, path: &str) -> GroupSample {
    let root = cg.root();
    let read = |f: &str| root.read_small(&cg.file(path, f)).ok();
    let mut s = GroupSample {
        name: name.to_string(),
        memory_current: read("memory.current").and_then(|t| t.trim().parse().ok()),
        memory_high: read("memory.high").and_then(|t| Limit::parse(&t)),
        memory_max: read("memory.max").and_then(|t| Limit::parse(&t)),
        swap_current: read("memory.swap.current").and_then(|t| t.trim().parse().ok()),
        events: cg.memory_events(path).unwrap_or_default(),
        ..Default::default()
    };
    for (i, r) in RESOURCES.iter().enumerate() {
        s.psi[i] = cg.psi(path, r).unwrap_or_default();
    }
    s
}

/// Reads the whole machine: `/proc/pressure/*` and `MemTotal - MemAvailable`.
pub(crate) fn read_host(root: &Root) -> GroupSample {
    let mut s = GroupSample {
        name: MACHINE.into(),
        memory_current: meminfo::mem_used(root).ok().flatten(),
        ..Default::default()
    };
    for (i, r) in RESOURCES.iter().enumerate() {
        s.psi[i] = psi::read_system(root, r).unwrap_or_default();
    }
    let mem = super::memstat::MemTelemetry::read(root);
    if let Some(k) = mem.vmstat.get("oom_kill") {
        // Every OOM kill of the machine, in a group or not.
        s.events.insert("oom_kill".into(), *k);
    }
    s.mem = Some(mem);
    s
}

/// Only the machine's memory telemetry, for the metrics: the [`MACHINE`]
/// sample without pressure or memory use (no group takes that name, so
/// its `oom_kill` event has a label set of its own).
pub(crate) fn host_memory(root: &Root) -> GroupSample {
    let mem = super::memstat::MemTelemetry::read(root);
    let mut s = GroupSample {
        name: MACHINE.into(),
        ..Default::default()
    };
    if let Some(k) = mem.vmstat.get("oom_kill") {
        s.events.insert("oom_kill".into(), *k);
    }
    s.mem = Some(mem);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn reads_what_is_there_and_leaves_the_rest_none() {
        let t = tempfile::tempdir().unwrap();
        let root = Root::fake(t.path());
        let d = Path::new("/sys/fs/cgroup/app");
        root.mkdir_all(d).unwrap();
        root.write(&d.join("memory.current"), "4096\n").unwrap();
        root.write(&d.join("memory.high"), "max\n").unwrap();
        root.write(&d.join("memory.max"), "junk").unwrap();
        root.write(&d.join("memory.events"), "low 0\nhigh 3\noom_kill 1\n")
            .unwrap();
        root.write(
            &d.join("memory.pressure"),
            "some avg10=1.00 avg60=0.00 avg300=0.00 total=2500000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7",
        )
        .unwrap();
        let cg = CgroupFs::new(root.clone(), "/sys/fs/cgroup");
        let s = read_group(&cg, "app", "app");
        assert_eq!(s.memory_current, Some(4096));
        assert_eq!(s.memory_high, Some(Limit::Max));
        assert_eq!(s.memory_max, None);
        assert_eq!(s.events.get("high"), Some(&3));
        assert_eq!(s.line(1, false).unwrap().total_us, 2_500_000);
        assert_eq!(s.line(1, true).unwrap().total_us, 7);
        assert!(s.line(0, false).is_none());
        // A vanished group reads as nothing at all.
        let gone = read_group(&cg, "gone", "gone");
        assert!(gone.memory_current.is_none() && gone.events.is_empty());
        let sys = read_host(&root);
        assert_eq!(sys.name, "host");
        assert!(sys.memory_current.is_none());
    }
}
