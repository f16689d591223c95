//! The realtime switch family: the files `system.realtime` sets for an RT
//! core (docs/realtime.md) — IRQ affinities, the default IRQ affinity, the
//! unbound-workqueue cpumask, `rcu_expedited` and cpuidle state switches.
//! They are baseline-only: no rule or boost names them, so the family has
//! no knob names; it owns their paths, their formats and which files the
//! journal may name.

use super::{DocRow, Family, Id, Knob, Places, Shape};
use std::path::{Path, PathBuf};

/// Where IRQs live.
pub(crate) const PROC_IRQ: &str = "/proc/irq";
/// Where CPUs live.
pub(crate) const CPU_DIR: &str = "/sys/devices/system/cpu";
const WORKQUEUE_CPUMASK: &str = "/sys/devices/virtual/workqueue/cpumask";
const RCU_EXPEDITED: &str = "/sys/kernel/rcu_expedited";

/// `/proc/irq/N/smp_affinity_list` (cpu-list format).
pub(crate) fn irq_affinity_path(irq: u32) -> PathBuf {
    PathBuf::from(format!("{PROC_IRQ}/{irq}/smp_affinity_list"))
}

/// `/proc/irq/default_smp_affinity` (hex-mask format).
pub(crate) fn default_affinity_path() -> PathBuf {
    PathBuf::from(format!("{PROC_IRQ}/default_smp_affinity"))
}

/// `/sys/devices/virtual/workqueue/cpumask` (hex-mask format).
pub(crate) fn workqueue_cpumask_path() -> PathBuf {
    PathBuf::from(WORKQUEUE_CPUMASK)
}

/// `/sys/kernel/rcu_expedited`: `1` makes RCU grace periods expedited (the
/// vendor RT extension's `QCOM_RCU_EXPEDITED=1`).
pub(crate) fn rcu_expedited_path() -> PathBuf {
    PathBuf::from(RCU_EXPEDITED)
}

/// `/sys/devices/system/cpu/cpuN/cpuidle` (its `stateK` entries).
pub(crate) fn cpuidle_dir(cpu: u32) -> PathBuf {
    PathBuf::from(format!("{CPU_DIR}/cpu{cpu}/cpuidle"))
}

/// `/sys/devices/system/cpu/cpuN/cpuidle/stateK/disable` (`1` disables).
pub(crate) fn cpuidle_disable_path(cpu: u32, state: u32) -> PathBuf {
    cpuidle_dir(cpu).join(format!("state{state}/disable"))
}

/// The realtime switch family.
pub(super) struct Realtime;

/// The realtime switch family's registration.
pub(super) static FAMILY: Realtime = Realtime;

impl Family for Realtime {
    fn id(&self) -> Id {
        Id {
            name: "realtime switch",
            head: None,
            grammar: None,
        }
    }

    fn shapes(&self, _: &[&str]) -> Vec<Shape> {
        Vec::new()
    }

    fn owns(&self, path: &Path, _: &Path) -> bool {
        let numbered = super::is_numbered;
        let digits =
            |s: &str| !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit());
        if path == Path::new(WORKQUEUE_CPUMASK) || path == Path::new(RCU_EXPEDITED) {
            return true;
        }
        if let Some(c) = super::below(path, PROC_IRQ) {
            return match c.as_slice() {
                ["default_smp_affinity"] => true,
                [n, "smp_affinity_list"] => digits(n),
                _ => false,
            };
        }
        if let Some(c) = super::below(path, CPU_DIR) {
            return matches!(c.as_slice(), [cpu, "cpuidle", state, "disable"]
                if numbered(cpu, "cpu") && numbered(state, "state"));
        }
        false
    }

    fn doc(&self) -> Vec<DocRow> {
        Vec::new()
    }

    fn path(&self, knob: &Knob, _: &Places<'_>) -> Result<PathBuf, String> {
        Err(format!("{knob} is not a knob of the realtime switch"))
    }
}
