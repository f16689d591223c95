//! The daemon's start: [`prepare`] (load, converge once, open the
//! journal), [`Daemon::new`] (the sampler, actuator, supervisor
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

/// What the daemon starts from: the policy loaded and judged against the
/// board, converged once as `apply` does (journal, hierarchy, baseline,
/// placement scan), the originals journal opened for the actuator, and the
/// processes that converge placed per group. `Err`: the exit code.
pub(super) fn prepare(opts: &Options) -> Result<Prepared, u8> {
    let board =
        |p: &crate::policy::Policy| crate::kernel::board::read(&opts.root, &p.settings.cgroup_root);
    let policy = match crate::policy::load_on(&opts.policy_path, board) {
        Ok(p) => p,
        Err(d) => {
            eprint!("{d}");
            return Err(EXIT_INVALID);
        }
    };
    // The target in force and what cluster names became on this board.
    for line in policy.binding.lines() {
        tracing::info!("{line}");
    }
    if let Some(w) = policy.binding.warning() {
        tracing::warn!("{w}");
    }
    // settings.daemon: mlockall and CPUs for the
    // process, then this thread — the event loop, which also serves PSI
    // trigger wake-ups — at the reacting priority (cgw-exec sets its own).
    priority::apply_process(&opts.root, &policy.settings.daemon);
    priority::enter_reacting("event loop");
    // Converge once, as `apply` does.
    let conv = Converger::new(opts.root.clone(), &policy);
    let plan = conv.plan();
    for m in &plan.missing {
        tracing::warn!("missing: {m}");
    }
    for w in &plan.warnings {
        tracing::warn!("{w}");
    }
    // Boot-time prerequisites (`cgwarden doctor`): reported, never fatal
    // here — a running system is better supervised than not.
    match crate::doctor::diagnose(&opts.root, &policy) {
        Ok(found) => {
            // A note is something to look at, not a warning (a fake board
            // has no kernel config or /proc/cmdline: notes only).
            for f in found {
                if f.missing {
                    tracing::warn!("doctor: {f}");
                } else {
                    tracing::info!("doctor: {f}");
                }
            }
        }
        Err(e) => tracing::info!("doctor: boot prerequisites not checked: {e}"),
    }
    if conv.refuse_missing(&plan) {
        tracing::error!(
            "on_missing: fail: the system lacks what the policy needs; nothing was written"
        );
        return Err(EXIT_MISSING);
    }
    // Processes the startup converge placed, per group: counted with the
    // exec-driven ones in the metric and the exit line.
    let mut startup_placed: Vec<(String, u64)> = Vec::new();
    if opts.dry_run {
        for step in &plan.steps {
            tracing::info!("would {step} (dry run)");
        }
    } else {
        match conv.apply(&plan, &mut |line| tracing::info!("{line}")) {
            Ok(done) => {
                startup_placed = startup_placements(&plan, &policy.settings.cgroup_root, &done);
                for m in &done.missing {
                    tracing::warn!("missing: {m}");
                }
                if done.refused_missing {
                    tracing::error!(
                        "on_missing: fail: the system lacks what the policy needs; nothing was written"
                    );
                    return Err(EXIT_MISSING);
                }
                for f in &done.failures {
                    tracing::error!("{f}");
                }
            }
            Err(e) => {
                tracing::error!("the originals journal: {e}");
                return Err(crate::exit::for_kernel_error(&e));
            }
        }
    }
    // The actuator journals every file it writes at runtime (claims, `then`
    // values, restored baselines), in the same journal `apply` wrote.
    let journal = if opts.dry_run {
        None
    } else {
        match Journal::open(
            &opts.root,
            &policy.settings.state_dir,
            &policy.settings.cgroup_root,
        ) {
            Ok(j) => Some(j),
            Err(e) => {
                tracing::error!("cannot open the originals journal: {e}");
                return Err(crate::exit::for_kernel_error(&e));
            }
        }
    };
    Ok(Prepared {
        policy,
        journal,
        placed: startup_placed,
    })
}

/// What [`prepare`] made.
pub(super) struct Prepared {
    pub(super) policy: Policy,
    /// The originals journal (none in a dry run).
    pub(super) journal: Option<Journal>,
    /// The processes the converge placed, per group.
    pub(super) placed: Vec<(String, u64)>,
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
