//! `plan`/`apply` for `system.irqs` and `system.kthreads`: IRQ affinities by
//! action name, the threaded IRQs' `irq/N-NAME` thread policies, kernel
//! threads' policies and CPUs. Each rule list is first-match: the first entry
//! whose glob matches an IRQ's action name (or a kthread's comm) applies.
//!
//! IRQ affinities are `/proc/irq/N/smp_affinity_list` writes (journalled
//! as files); a kernel thread's original policy and CPUs are journalled as
//! one `KTHREAD` entry before its first change and restored by `reset`
//! while the pid is still that kernel thread. A per-CPU kthread
//! (PF_NO_SETAFFINITY) keeps its CPU: its `cpus` are refused with one
//! warning per rule. The daemon runs [`Converger::plan_hardware_threads`]
//! again whenever an IRQ may have appeared (daemon::irqwatch).

use super::{sched_matches, Converger, Plan, Step};
use crate::kernel::irq;
use crate::kernel::realtime;
use crate::kernel::Root;
use crate::knobs::normalize::Form;
use crate::policy::model::{KthreadRule, Policy};
use crate::policy::pattern::glob_match;
use std::collections::BTreeSet;

/// The first rule whose glob matches one of `names`.
fn first<'r>(rules: &'r [KthreadRule], names: &[String]) -> Option<&'r KthreadRule> {
    rules
        .iter()
        .find(|r| names.iter().any(|n| glob_match(&r.name, n)))
}

impl Converger<'_> {
    /// The IRQs `system.irqs` places (their numbers): `housekeeping_cpus`
    /// leaves these alone.
    pub(super) fn irqs_placed_by_rules(&self) -> BTreeSet<u32> {
        let rules: Vec<&KthreadRule> = self
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
    pub(crate) fn plan_hardware_threads(&self, plan: &mut Plan) {
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
        // A glob no IRQ matches is said once per plan: a typo, or a device
        // whose driver is not loaded yet.
        for r in &self.policy.system.irqs {
            if !irqs
                .iter()
                .any(|i| i.actions.iter().any(|a| glob_match(&r.name, a)))
            {
                plan.warnings.push(format!(
                    "system.irqs `{}`: no IRQ in /proc/interrupts matches (by action name); the daemon places one that appears later",
                    r.name
                ));
            }
        }
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

/// Other tuners that write what a policy manages:
/// their comm, and which of the policy's knobs they share. Names as their
/// packages run them: irqbalance, tuned, thermald, power-profiles-daemon,
/// systemd-oomd, and Qualcomm's resource tuner (URM: `resource-tuner`,
/// `urm`).
const TUNERS: [(&str, &str); 7] = [
    ("irqbalance", "IRQ affinities"),
    (
        "tuned",
        "sysctls, cpufreq governors, IRQ and kernel-thread affinities and priorities",
    ),
    (
        "thermald",
        "cpufreq ceilings (scaling_max_freq) and cooling",
    ),
    (
        "power-profiles-",
        "cpufreq governors and energy preferences",
    ),
    (
        "systemd-oomd",
        "the groups' memory pressure (it kills in them)",
    ),
    (
        "resource-tuner",
        "cpufreq, devfreq, uclamp and sysctls (URM)",
    ),
    ("urm", "cpufreq, devfreq, uclamp and sysctls (URM)"),
];

/// What the policy manages that `tuner` also writes, as knob names; empty:
/// nothing shared.
fn shared_with(tuner: &str, policy: &Policy) -> Vec<String> {
    let sys = &policy.system;
    let mut out = Vec::new();
    let irqs = || {
        let mut v: Vec<String> = sys
            .irqs
            .iter()
            .map(|r| format!("system.irqs `{}`", r.name))
            .collect();
        if sys
            .realtime
            .as_ref()
            .is_some_and(|r| r.housekeeping_cpus.is_some())
        {
            v.push("realtime.housekeeping_cpus".into());
        }
        v
    };
    let governors = || {
        sys.cpufreq
            .iter()
            .filter(|c| c.governor.is_some())
            .map(|c| format!("cpufreq.{}.governor", c.policy))
            .collect::<Vec<_>>()
    };
    let ceilings = || {
        let mut v: Vec<String> = sys
            .cpufreq
            .iter()
            .filter(|c| c.max.is_some())
            .map(|c| format!("cpufreq.{}.max", c.policy))
            .collect();
        v.extend(
            crate::engine::supervisor::rule_knobs(policy)
                .into_iter()
                .filter(|k| k.is_ceiling() && k.to_string().starts_with("cpufreq."))
                .map(|k| k.to_string()),
        );
        v.sort();
        v.dedup();
        v
    };
    let sysctls = || {
        sys.sysctl
            .iter()
            .map(|(n, _)| format!("sysctl.{n}"))
            .collect::<Vec<_>>()
    };
    match tuner {
        "irqbalance" => out.extend(irqs()),
        "tuned" => {
            out.extend(sysctls());
            out.extend(governors());
            out.extend(irqs());
            out.extend(
                sys.kthreads
                    .iter()
                    .map(|r| format!("system.kthreads `{}`", r.name)),
            );
        }
        "thermald" => out.extend(ceilings()),
        "power-profiles-" => out.extend(governors()),
        "systemd-oomd" => out.extend(
            policy
                .all_groups()
                .into_iter()
                .filter(|g| g.memory.high.is_some() || g.memory.max.is_some())
                .map(|g| format!("{}.memory.*", g.name)),
        ),
        _ => {
            out.extend(governors());
            out.extend(ceilings());
            out.extend(
                sys.devfreq
                    .iter()
                    .map(|d| format!("devfreq.{}.*", d.device)),
            );
            out.extend(sysctls());
        }
    }
    out
}

/// The warnings `doctor` and `run` give for other tuners running on the
/// box that write what this policy manages (irqbalance would move the IRQs
/// back, tuned rewrite the sysctls, …), one per tuner, naming the shared
/// knobs. Empty when none runs or none shares anything.
pub(crate) fn coexistence_warnings(root: &Root, policy: &Policy) -> Vec<String> {
    let comms: Vec<String> = crate::kernel::procfs::pids(root)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|pid| crate::kernel::procfs::comm(root, pid).ok().flatten())
        .collect();
    let mut out = Vec::new();
    for (tuner, writes) in TUNERS {
        if !comms.iter().any(|c| c == tuner) {
            continue;
        }
        let shared = shared_with(tuner, policy);
        if shared.is_empty() {
            continue;
        }
        let fix = if tuner == "irqbalance" {
            "; stop it, or ban those CPUs and IRQs in its configuration (IRQBALANCE_BANNED_CPULIST, --banirq)"
        } else {
            "; one of the two will undo the other's writes"
        };
        out.push(format!(
            "{tuner} is running and writes {writes}, as this policy does: {}{fix}",
            shared.join(", ")
        ));
    }
    out
}
