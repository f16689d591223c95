//! What the baseline holds beyond the knobs the daemon's table carries —
//! the realtime switch's files (IRQ affinities, the default affinity, the
//! workqueue cpumask, `rcu_expedited`, cpuidle states, `timer_migration`),
//! `system.irqs` and `system.kthreads`, zram's set-up (compressor, size,
//! swap), and the per-process attributes of placed processes — planned
//! against the kernel now. Every step of it is a file (or a thread) that no
//! longer holds what the policy says: `verify` and the drift guard report
//! it, and `on_drift: restore` carries the steps out as `apply` does (their
//! originals are in the journal already). The plan's warnings are drifts
//! too: a zram device swapping with another compressor or size than the
//! policy's, which is never put right behind the operator's back.
//!
//! The knobs of the table (group knobs, cpufreq, devfreq, sysctls, zram's
//! limit and priority, latency) are compared with their effective values
//! by the caller, claims included, so their files are left out here.

use super::{Converger, Plan, Step};
use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;

impl Converger<'_> {
    /// The held files' steps (module docs); `knob_paths` are the files the
    /// caller checks as knobs. A step that cannot be taken on this root
    /// (a scheduling policy on a fake tree) is left out: nothing can read
    /// it back there.
    pub(crate) fn held_plan(&self, knob_paths: &BTreeSet<PathBuf>) -> Plan {
        let mut plan = Plan::default();
        self.plan_sysctls(&mut plan);
        // zram's set-up: a device swapping with other settings than the
        // policy's is only a warning for `plan` (it is never swapped off
        // behind the operator's back), and a drift here.
        let mut zram = Plan::default();
        self.plan_zram(&mut zram);
        plan.steps.append(&mut zram.steps);
        self.plan_realtime(&mut plan);
        self.plan_hardware_threads(&mut plan);
        self.plan_latency(&mut plan);
        // Only zram's warnings are drift: the others (an IRQ that has not
        // appeared yet, a thread the kernel pins) say what cannot be held.
        plan.warnings = zram.warnings;
        let mut placement = Plan::default();
        self.plan_placement(&mut placement);
        // Attributes of processes already in their group; one still to be
        // moved is the rescan's, not drift.
        let moving: HashSet<i32> = placement
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Move { pid, .. } => Some(*pid),
                _ => None,
            })
            .collect();
        plan.steps
            .extend(placement.steps.into_iter().filter(|s| match s {
                Step::Sched { pid, .. } => !moving.contains(pid),
                Step::Task(ch) => !moving.contains(&ch.pid),
                _ => false,
            }));
        plan.steps.retain(|s| match s {
            Step::Write { path, .. } => !knob_paths.contains(path),
            Step::Mkdir { .. } | Step::Move { .. } => false,
            other => !self.skips(other),
        });
        plan
    }
}

/// A name for a held step, for `verify` and the drift event: the file, or
/// the thread and what differs.
pub(crate) fn held_label(step: &Step) -> String {
    match step {
        Step::Write { path, .. } | Step::Trigger { path, .. } => path.display().to_string(),
        Step::Kthread { pid, comm, .. } => format!("kthread {comm} (pid {pid})"),
        Step::Sched { pid, comm, .. } => format!("sched of {comm} (pid {pid})"),
        Step::Task(ch) => format!("task {}/{} ({}) {}", ch.pid, ch.tid, ch.comm, ch.op),
        other => other.to_string(),
    }
}
