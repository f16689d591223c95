//! `plan`/`apply` for `system.irqs` and `system.kthreads` (issue 24, SPEC
//! §6 "IRQs", "Kernel threads"): IRQ affinities by action name, the
//! threaded IRQs' `irq/N-NAME` thread policies, kernel threads' policies
//! and CPUs. Each rule list is first-match: the first entry whose glob
//! matches an IRQ's action name (or a kthread's comm) applies.
//!
//! IRQ affinities are `/proc/irq/N/smp_affinity_list` writes (journalled
//! as files); a kernel thread's original policy and CPUs are journalled as
//! one `KTHREAD` entry before its first change and restored by `reset`
//! while the pid is still that kernel thread. A per-CPU kthread
//! (PF_NO_SETAFFINITY) keeps its CPU: its `cpus` are refused with one
//! warning per rule. The daemon runs [`Converger::plan_hardware_threads`]
//! again whenever an IRQ may have appeared (daemon::irqwatch).

use super::{sched_matches, Converger, Plan, Step};
use crate::engine::normalize::Form;
use crate::kernel::irq;
use crate::kernel::realtime;
use crate::kernel::Root;
use crate::policy::model::{Policy, ThreadRule};
use crate::policy::pattern::glob_match;
use std::collections::BTreeSet;

/// The first rule whose glob matches one of `names`.
fn first<'r>(rules: &'r [ThreadRule], names: &[String]) -> Option<&'r ThreadRule> {
    rules
        .iter()
        .find(|r| names.iter().any(|n| glob_match(&r.name, n)))
}

impl Converger<'_> {
    /// The IRQs `system.irqs` places (their numbers): `housekeeping_cpus`
    /// leaves these alone.
    pub(super) fn irqs_placed_by_rules(&self) -> BTreeSet<u32> {
        let rules: Vec<&ThreadRule> = self
            .policy
            .system
            .irqs
            .iter()
            .filter(|r| r.cpus.is_some())
            .collect();
        if rules.is_empty() {
            return BTreeSet::new();
        }
        irq::irqs(&self.root)
            .unwrap_or_default()
            .into_iter()
            .filter(|i| {
                rules
                    .iter()
                    .any(|r| i.actions.iter().any(|a| glob_match(&r.name, a)))
            })
            .map(|i| i.number)
            .collect()
    }

    /// `system.irqs` and `system.kthreads`, after the realtime switch.
    pub fn plan_hardware_threads(&self, plan: &mut Plan) {
        let sys = &self.policy.system;
        if sys.irqs.is_empty() && sys.kthreads.is_empty() {
            return;
        }
        // Listing kernel threads reads every task's stat: only when a rule
        // sets a thread's scheduling or CPUs.
        let need_threads = !sys.kthreads.is_empty() || sys.irqs.iter().any(|r| r.sched.is_some());
        let threads = match need_threads.then(|| irq::kthreads(&self.root)) {
            None => Vec::new(),
            Some(Ok(t)) => t,
            Some(Err(e)) => {
                plan.missing.push(format!(
                    "system.irqs/kthreads: cannot list kernel threads: {e}"
                ));
                Vec::new()
            }
        };
        if !sys.irqs.is_empty() {
            self.plan_irqs(plan, &threads);
        }
        if !sys.kthreads.is_empty() {
            self.plan_kthreads(plan, &threads);
        }
    }

    fn plan_irqs(&self, plan: &mut Plan, threads: &[irq::Kthread]) {
        let irqs = match irq::irqs(&self.root) {
            Ok(i) => i,
            Err(e) => {
                plan.missing
                    .push(format!("system.irqs: cannot list IRQs: {e}"));
                return;
            }
        };
        for i in &irqs {
            let Some(rule) = first(&self.policy.system.irqs, &i.actions) else {
                continue;
            };
            if let Some(cpus) = &rule.cpus {
                let path = realtime::irq_affinity_path(i.number);
                if self.root.exists(&path) {
                    self.write_step(plan, path, cpus.to_string(), Form::CpuList, true);
                }
            }
            if let Some(s) = &rule.sched {
                for t in irq::irq_threads(threads, i.number) {
                    if !sched_matches(&self.root, t.pid, s) {
                        plan.steps.push(Step::Kthread {
                            pid: t.pid,
                            comm: t.comm.clone(),
                            sched: Some(s.clone()),
                            cpus: None,
                        });
                    }
                }
            }
        }
    }

    fn plan_kthreads(&self, plan: &mut Plan, threads: &[irq::Kthread]) {
        let rules = &self.policy.system.kthreads;
        let mut refused: BTreeSet<&str> = BTreeSet::new();
        for t in threads {
            let Some(rule) = first(rules, std::slice::from_ref(&t.comm)) else {
                continue;
            };
            let sched = rule
                .sched
                .as_ref()
                .filter(|s| !sched_matches(&self.root, t.pid, s))
                .cloned();
            let mut cpus = None;
            if let Some(want) = &rule.cpus {
                if t.bound {
                    if refused.insert(rule.name.as_str()) {
                        plan.warnings.push(format!(
                            "system.kthreads `{}`: {} (pid {}) is a per-CPU kernel thread; its CPUs are left alone (affinity refused for every such thread)",
                            rule.name, t.comm, t.pid
                        ));
                    }
                } else {
                    let now = irq::affinity(&self.root, t.pid).ok().flatten();
                    let same = now
                        .as_deref()
                        .and_then(|n| crate::units::CpuList::parse_kernel(n).ok())
                        .is_some_and(|n| n.iter().eq(want.iter()));
                    if !same {
                        cpus = Some(want.clone());
                    }
                }
            }
            if sched.is_some() || cpus.is_some() {
                plan.steps.push(Step::Kthread {
                    pid: t.pid,
                    comm: t.comm.clone(),
                    sched,
                    cpus,
                });
            }
        }
    }
}

/// The warning `doctor` and `run` give when irqbalance runs while the
/// policy places IRQs (`system.irqs` or `realtime.housekeeping_cpus`):
/// irqbalance would move them back. `None` when there is nothing to say.
pub fn irqbalance_warning(root: &Root, policy: &Policy) -> Option<String> {
    let places = !policy.system.irqs.is_empty()
        || policy
            .system
            .realtime
            .as_ref()
            .is_some_and(|r| r.housekeeping_cpus.is_some());
    (places && crate::kernel::irq::process_running(root, "irqbalance")).then(|| {
        "irqbalance is running and will move the IRQs this policy places (system.irqs, realtime.housekeeping_cpus); stop it, or ban those CPUs and IRQs in its configuration (IRQBALANCE_BANNED_CPULIST, --banirq)".to_string()
    })
}
