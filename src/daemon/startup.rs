//! The daemon's start: [`Daemon::new`] (the sampler, actuator, supervisor
//! with every rule knob's baseline from the journal, hooks) and what
//! `apply` placed before the loop began ([`startup_placements`]).

use super::*;

impl Daemon {
    pub(super) fn new(
        opts: Options,
        policy: Policy,
        journal: Option<Journal>,
        _tx: mpsc::Sender<Wake>,
    ) -> Daemon {
        let root = opts.root.clone();
        let cg = CgroupFs::new(root.clone(), policy.settings.cgroup_root.clone());
        let groups = actuator::group_paths(&policy);
        let needs = sampled_needs(&policy.rules);
        let sampler = Sampler::new(root.clone(), cg.clone(), groups, needs);
        let actuator = Actuator::new(root.clone(), &policy, journal);
        let mut supervisor = Supervisor::new(&policy);
        // Knobs the rules touch but the policy leaves alone return to their
        // original: the journal's, else what the kernel holds now (nothing
        // was ever written to it). Never the live value alone: after a crash
        // it may be a claim whose cause is gone; the first step writes the
        // original back then.
        for knob in rule_knobs(&policy) {
            // The policy sets it: its baseline is the policy's value.
            if supervisor.table().baseline(&knob).is_some() {
                continue;
            }
            let live = actuator.read(&knob);
            match actuator.original(&knob).or_else(|| live.clone()) {
                Some(baseline) => {
                    if live
                        .as_ref()
                        .is_some_and(|l| l.kernel() != baseline.kernel())
                    {
                        tracing::warn!(knob = %knob, live = %live.as_ref().map(|v| v.to_string()).unwrap_or_default(), original = %baseline, "knob differs from its journalled original (left by a previous run); restoring it unless a rule claims it");
                    }
                    supervisor.seed(&knob, baseline, live);
                }
                None => tracing::debug!(knob = %knob, "knob unreadable; it has no baseline"),
            }
        }
        let mut hooks = HookRunner::new(&policy.hooks, &root, HookLimits::default());
        if !opts.dry_run {
            // Not in a dry run: this removes stale run cgroups.
            hooks = hooks.in_cgroups(&cg);
        }
        Daemon {
            control: control::ControlState::new().dry_run(opts.dry_run),
            opts,
            loaded: reload::Loaded::new(policy),
            start: Instant::now(),
            supervisor,
            actuator,
            hooks,
            triggers: triggers::Triggers::new(),
            groups: groups::Groups::new(cg),
            telemetry: telemetry::Telemetry::new(sampler),
        }
    }
}

/// The processes `apply` moved at startup, per group (by name, as the
/// exec placement counts them). A move named in a failure is not counted.
pub(super) fn startup_placements(
    plan: &crate::converge::Plan,
    cgroup_root: &std::path::Path,
    done: &crate::converge::Applied,
) -> Vec<(String, u64)> {
    let mut by: std::collections::BTreeMap<String, u64> = Default::default();
    let root = crate::kernel::Root::normalize(cgroup_root);
    for step in &plan.steps {
        let crate::converge::Step::Move { pid, procs, .. } = step else {
            continue;
        };
        let failed = done
            .failures
            .iter()
            .any(|f| f.contains(&procs.display().to_string()) && f.contains(&pid.to_string()));
        if failed {
            continue;
        }
        // Group names are unique across the tree: the directory's name is
        // the group's, as the exec placement counts it.
        let Some(dir) = procs.parent() else { continue };
        if !crate::kernel::Root::normalize(dir).starts_with(&root) {
            continue;
        }
        let Some(name) = dir.file_name() else {
            continue;
        };
        *by.entry(name.to_string_lossy().into_owned()).or_default() += 1;
    }
    by.into_iter().collect()
}
