//! `cgwarden run`: the supervisor daemon (SPEC §4). Thin tokio wiring:
//! watchers wake the loop, the sampler reads what the rules need, the pure
//! engine decides, the actuator writes and the hook runner runs hooks.
//!
//! Startup: validate → converge once (journal, hierarchy, baseline,
//! placement scan) → start watchers → READY=1. Wake-ups: the tick (only
//! when some condition needs sampling), kernel PSI triggers, inotify on
//! `memory.events`/`cgroup.events`, the engine's next deadline (end of a
//! `for`/`hold`/`cooldown`), the rescan timer, signals. Stop (SIGTERM,
//! SIGINT): claims are released so knobs return to their baselines, hooks
//! get a grace period, exit 0; hierarchy and baseline stay.

pub mod actuator;
pub(crate) mod exec; // issue #5: exec events, placement, presence
pub(crate) mod hooks;
pub(crate) mod priority; // issue 11: settings.daemon (mlock, cpus, sched)
/// Whether a policy file or hook program may be trusted when running as root.
pub use hooks::untrusted;
pub(crate) mod repair;
pub mod sample;
pub mod watch;

use crate::converge::journal::{Entry, Journal};
use crate::converge::Converger;
use crate::engine::condition::sampled_needs;
use crate::engine::knobs::{Cause, Write};
use crate::engine::stall::StallKey;
use crate::engine::supervisor::{rule_knobs, Effect, Supervisor};
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::{psi_trigger, Root};
use crate::policy::expr::Target;
use crate::policy::model::{Group, Policy};
use actuator::Actuator;
use hooks::{HookContext, HookLimits, HookRunner};
use repair::RepairSchedule;
use sample::{Sampler, View};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;
use watch::{FileWatcher, Wake};

/// How the daemon was started.
#[derive(Debug, Clone)]
pub struct Options {
    pub policy_path: PathBuf,
    pub root: Root,
    pub dry_run: bool,
    /// Overrides `settings.tick` (tests and benchmarks).
    pub tick: Option<Duration>,
}

/// Exit codes of SPEC §1.
pub const EXIT_OK: u8 = 0;
pub const EXIT_INVALID: u8 = 1;
pub const EXIT_MISSING: u8 = 3;
/// A runtime failure that may pass (the journal's file, the runtime): the
/// service manager restarts the daemon (EX_TEMPFAIL).
pub const EXIT_TEMPFAIL: u8 = crate::exit::TEMPFAIL;

/// Runs the daemon until SIGTERM/SIGINT; returns the process exit code.
pub fn run(opts: Options) -> u8 {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the runtime: {e}");
            return EXIT_TEMPFAIL;
        }
    };
    rt.block_on(run_async(opts))
}

struct Daemon {
    opts: Options,
    policy: Policy,
    start: Instant,
    supervisor: Supervisor,
    sampler: Sampler,
    actuator: Actuator,
    hooks: HookRunner,
    cg: CgroupFs,
    /// Kernel PSI triggers, indexed by the id their wake-ups carry.
    triggers: Vec<TriggerSpec>,
    /// Retry schedule of groups a repair could not recreate.
    repairs: RepairSchedule,
    watcher: Option<FileWatcher>,
    /// For re-arming PSI triggers after a repair.
    tx: Option<mpsc::Sender<Wake>>,
    /// Exec-event placement and `running()` presence (issue #5).
    exec: Option<exec::ExecWatch>,
}

async fn run_async(opts: Options) -> u8 {
    let policy = match crate::policy::load(&opts.policy_path) {
        Ok(p) => p,
        Err(d) => {
            eprint!("{d}");
            return EXIT_INVALID;
        }
    };
    // settings.daemon (SPEC §4 "Never starve"): mlockall and CPUs for the
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
    if conv.refuse_missing(&plan) {
        tracing::error!(
            "on_missing: fail: the system lacks what the policy needs; nothing was written"
        );
        return EXIT_MISSING;
    }
    if opts.dry_run {
        for step in &plan.steps {
            tracing::info!("would {step} (dry run)");
        }
    } else {
        match conv.apply(&plan, &mut |line| tracing::info!("{line}")) {
            Ok(done) => {
                for m in &done.missing {
                    tracing::warn!("missing: {m}");
                }
                if done.refused_missing {
                    tracing::error!(
                        "on_missing: fail: the system lacks what the policy needs; nothing was written"
                    );
                    return EXIT_MISSING;
                }
                for f in &done.failures {
                    tracing::error!("{f}");
                }
            }
            Err(e) => {
                tracing::error!("the originals journal: {e}");
                return crate::exit::for_kernel_error(&e);
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
                return crate::exit::for_kernel_error(&e);
            }
        }
    };

    let (tx, mut rx) = mpsc::channel::<Wake>(256);
    let mut d = Daemon::new(opts, policy, journal, tx.clone());
    d.start_watchers(&tx);

    let (mut term, mut int, mut hup) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) {
        (Ok(a), Ok(b), Ok(c)) => (a, b, c),
        _ => {
            tracing::error!("cannot install signal handlers");
            return EXIT_TEMPFAIL;
        }
    };
    notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status("supervising"),
    ]);
    let watchdog = watchdog_interval();
    tracing::info!(
        product = %d.policy.product,
        rules = d.policy.rules.len(),
        groups = d.policy.all_groups().len(),
        psi_triggers = d.triggers.iter().filter(|t| t.state == TriggerState::Armed).count(),
        dry_run = d.opts.dry_run,
        "cgwarden running"
    );

    // The CLI and the policy both refuse a tick under 10 ms; a library
    // caller must not reach a zero-period timer either.
    let tick = d
        .opts
        .tick
        .unwrap_or(d.policy.settings.tick)
        .max(MIN_WATCHDOG);
    let mut ticker = tokio::time::interval(tick);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut rescan = tokio::time::interval(d.policy.settings.rescan);
    rescan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    rescan.tick().await; // the first tick is immediate; startup already scanned
    let mut wd = tokio::time::interval(watchdog.unwrap_or(Duration::from_secs(3600)));

    d.evaluate();
    loop {
        let deadline = d.next_deadline();
        tokio::select! {
            _ = ticker.tick() => {
                if let Some(x) = &d.exec {
                    x.on_tick(); // issue #5: without exec events, scan each tick
                }
                d.evaluate()
            }
            Some(wake) = rx.recv() => {
                d.on_wake(wake);
                // Coalesce a burst of wake-ups into one evaluation.
                while let Ok(w) = rx.try_recv() {
                    d.on_wake(w);
                }
                d.evaluate();
            }
            _ = sleep_until(deadline) => d.evaluate(),
            _ = rescan.tick() => d.rescan(),
            _ = wd.tick(), if watchdog.is_some() => notify(&[sd_notify::NotifyState::Watchdog]),
            _ = hup.recv() => tracing::warn!("SIGHUP: reload is not supported yet; restart the daemon to load a new policy"),
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    notify(&[sd_notify::NotifyState::Stopping]);
    d.shutdown().await;
    EXIT_OK
}

/// One kernel PSI trigger the rules need.
struct TriggerSpec {
    key: StallKey,
    path: PathBuf,
    amount: Duration,
    window: Duration,
    state: TriggerState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TriggerState {
    /// Registered; wake-ups arrive.
    Armed,
    /// Its pressure file is absent (group not created yet, or deleted):
    /// re-registered when the group is back.
    Gone,
    /// The kernel or the root does not offer triggers: polled for good.
    Unarmed,
}

impl TriggerSpec {
    fn label(&self) -> String {
        format!(
            "{} {:?} {:?}/{:?}",
            self.path.display(),
            self.key.stall,
            self.amount,
            self.window
        )
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
        None => std::future::pending().await,
    }
}

fn notify(states: &[sd_notify::NotifyState]) {
    if std::env::var_os("NOTIFY_SOCKET").is_some() {
        if let Err(e) = sd_notify::notify(states) {
            tracing::warn!("sd_notify: {e}");
        }
    }
}

/// Half of systemd's WatchdogSec, when the unit sets one.
fn watchdog_interval() -> Option<Duration> {
    watchdog_from(std::env::var("WATCHDOG_USEC").ok().as_deref())
}

/// The shortest watchdog ping period: `WATCHDOG_USEC=1` once asked for a
/// ping every 0.5 µs (a zero-period timer panics); pinging more often than
/// this would be all the daemon does.
const MIN_WATCHDOG: Duration = Duration::from_millis(10);

fn watchdog_from(usec: Option<&str>) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok()?;
    if usec == 0 {
        return None;
    }
    let half = Duration::from_micros(usec / 2);
    if half < MIN_WATCHDOG {
        tracing::warn!(
            "WATCHDOG_USEC={usec} asks for a ping every {half:?}; pinging every {MIN_WATCHDOG:?}"
        );
        return Some(MIN_WATCHDOG);
    }
    Some(half)
}

impl Daemon {
    fn new(
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
        let hooks = HookRunner::new(&policy.hooks, &root, HookLimits::default());
        Daemon {
            opts,
            policy,
            start: Instant::now(),
            supervisor,
            sampler,
            actuator,
            hooks,
            cg,
            triggers: Vec::new(),
            repairs: RepairSchedule::new(),
            watcher: None,
            tx: None,
            exec: None,
        }
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn start_watchers(&mut self, tx: &mpsc::Sender<Wake>) {
        let root = self.opts.root.clone();
        // Kernel PSI triggers for the stall-time conditions; the tick polls
        // `total=` for any that cannot be registered, with the same meaning.
        let wanted: Vec<_> = self.sampler.needs().psi_triggers.iter().cloned().collect();
        for (key, amount, window) in wanted {
            let Some(path) = self.sampler.pressure_path(&key.target, key.resource) else {
                continue;
            };
            if key.target == Target::System
                && !root.exists(std::path::Path::new("/proc/pressure"))
                && root.supports(crate::kernel::Op::PsiTrigger)
            {
                tracing::warn!(
                    "/proc/pressure is absent: the kernel has PSI disabled; boot with psi=1"
                );
                continue;
            }
            self.triggers.push(TriggerSpec {
                key,
                path,
                amount,
                window,
                state: TriggerState::Unarmed,
            });
        }
        for id in 0..self.triggers.len() {
            self.arm_trigger(id, tx, false);
        }
        self.tx = Some(tx.clone());
        // memory.events and cgroup.events of every group: oom/high events
        // are seen when they happen, and a group deleted from outside is noticed.
        match FileWatcher::new(&root, tx.clone()) {
            Ok(mut w) => {
                for g in self.policy.all_groups() {
                    for file in ["memory.events", "cgroup.events"] {
                        let path = self.cg.file(&g.path, file);
                        if root.exists(&path) {
                            if let Err(e) = w.watch(&path) {
                                tracing::debug!("inotify {}: {e}", path.display());
                            }
                        }
                    }
                }
                self.watcher = Some(w);
            }
            Err(e) => tracing::warn!("inotify unavailable ({e}); events are seen at the next tick"),
        }
        // ---- issue #5: exec events drive placement and running() presence ----
        let presence =
            crate::engine::presence::Presence::new(&self.sampler.needs().running.clone());
        let shared = exec::Shared::new(presence);
        self.sampler.set_exec(shared.clone());
        self.exec = Some(exec::ExecWatch::start(
            &root,
            &self.policy,
            shared,
            !self.opts.dry_run,
            tx.clone(),
        ));
        // ---- end issue #5 ----
    }

    fn on_wake(&mut self, wake: Wake) {
        match wake {
            Wake::Psi { id } => tracing::debug!(
                trigger = %self.triggers.get(id).map(TriggerSpec::label).unwrap_or_default(),
                "PSI trigger"
            ),
            Wake::PsiGone { id } => {
                if let Some(t) = self.triggers.get_mut(id) {
                    t.state = TriggerState::Gone;
                    tracing::warn!(
                        trigger = %t.label(),
                        "PSI trigger's group is gone; polling until it is recreated"
                    );
                }
            }
            Wake::FileModified { path } => tracing::debug!(path = %path.display(), "modified"),
            Wake::WatchError { what } => tracing::warn!("watcher: {what}"),
            Wake::Presence => tracing::debug!("running() presence changed"),
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let engine = self.supervisor.next_deadline().map(|t| self.start + t);
        [engine, self.repairs.next_due()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Sample, evaluate, act.
    fn evaluate(&mut self) {
        self.check_groups();
        let now = self.now();
        let snap = self.sampler.sample(now);
        let view = View {
            snap: &snap,
            stall: &self.sampler.stall,
            now,
        };
        let actuator = &self.actuator;
        let effects = self
            .supervisor
            .step(&self.policy, now, &view, &|k| actuator.read(k));
        self.carry_out(effects);
    }

    fn carry_out(&mut self, mut effects: Vec<Effect>) {
        actuator::order_writes(&mut effects);
        for e in effects {
            match e {
                Effect::Write(w) => {
                    self.actuator.apply(&w);
                }
                Effect::Hook {
                    hook,
                    rule,
                    event,
                    metric,
                    value,
                    threshold,
                    group,
                } => {
                    let ctx = HookContext {
                        rule,
                        event,
                        metric,
                        value,
                        threshold,
                        group,
                        product: self.policy.product.clone(),
                        time: SystemTime::now(),
                    };
                    if self.opts.dry_run {
                        tracing::info!(hook = %hook, rule = %ctx.rule, "would run hook (dry run)");
                    } else {
                        let r = self.hooks.fire(&hook, &ctx, Instant::now());
                        tracing::debug!(hook = %hook, "hook: {r:?}");
                    }
                }
                Effect::CompactMemory { rule } => {
                    self.actuator.compact_memory(&rule);
                }
                Effect::Phase { rule, phase } => tracing::info!(rule = %rule, "rule {phase}"),
                Effect::ActionFailed {
                    rule,
                    action,
                    reason,
                } => {
                    tracing::error!(rule = %rule, action = %action, "{reason}")
                }
                Effect::Unavailable {
                    rule,
                    metric,
                    source,
                    reason,
                } => {
                    tracing::warn!(rule = %rule, metric = %metric, file = %source, "metric unavailable: {metric} ({source}): {reason}")
                }
            }
        }
    }

    /// Repairs groups deleted from outside (SPEC §4): each is recreated
    /// alone — the directory, the controllers its children need, its knobs'
    /// baselines, then their effective values (live claims) through the next
    /// step — and its watches and PSI triggers are re-armed. Nothing else is
    /// rewritten. A group that cannot be recreated is retried with a backoff.
    fn check_groups(&mut self) {
        if self.opts.dry_run {
            return;
        }
        // all_groups lists parents before their children.
        let missing: Vec<Group> = self
            .policy
            .all_groups()
            .into_iter()
            .filter(|g| !self.cg.exists(&g.path))
            .cloned()
            .collect();
        let now = Instant::now();
        for g in &missing {
            if !self.repairs.due(&g.name, now) {
                continue;
            }
            match self.recreate(g) {
                Ok(()) => {
                    self.repairs.succeeded(&g.name);
                    tracing::warn!(group = %g.name, path = %self.cg.dir(&g.path).display(), "group was deleted from outside; recreated with its baseline and live claims");
                    self.rearm_group(g);
                }
                Err(e) => {
                    let (retry, failures) = self.repairs.failed(&g.name, now);
                    if failures == 1 || retry >= Duration::from_secs(60) {
                        tracing::error!(group = %g.name, "cannot recreate group deleted from outside: {e}; retrying in {retry:?}");
                    }
                }
            }
        }
        self.rearm_triggers();
    }

    /// Recreates one group: journal, mkdir, controllers, baselines.
    fn recreate(&mut self, g: &Group) -> Result<(), String> {
        let dir = self.cg.dir(&g.path);
        if let Some(j) = self.actuator.journal() {
            // Recorded before the mkdir so `reset` removes it even if we die now.
            j.record(Entry::Mkdir { path: dir.clone() })
                .map_err(|e| format!("cannot journal {}: {e}", dir.display()))?;
        }
        self.cg.mkdir(&g.path).map_err(|e| e.to_string())?;
        let offered = self.cg.controllers(&g.path).unwrap_or_default();
        let need: Vec<&str> = crate::converge::children_controllers(&self.policy, g)
            .into_iter()
            .filter(|c| offered.iter().any(|o| o == c))
            .collect();
        self.cg
            .enable_controllers(&g.path, &need)
            .map_err(|e| e.to_string())?;
        for (knob, value) in self.supervisor.group_baselines(&g.name) {
            let w = Write {
                knob: knob.clone(),
                old: None,
                new: value.clone(),
                cause: Cause::Baseline,
            };
            // A knob the kernel refuses is logged by the actuator and retried
            // when its effective value changes, as any other write.
            self.actuator.apply(&w);
            self.supervisor.mark_written(&knob, value);
        }
        Ok(())
    }

    /// Watches a recreated group's event files again.
    fn rearm_group(&mut self, g: &Group) {
        if let Some(w) = &mut self.watcher {
            for file in ["memory.events", "cgroup.events"] {
                let path = self.cg.file(&g.path, file);
                if self.opts.root.exists(&path) {
                    if let Err(e) = w.watch(&path) {
                        tracing::debug!("inotify {}: {e}", path.display());
                    }
                }
            }
        }
    }

    /// Registers again the PSI triggers whose group is back (recreated by a
    /// repair, or created after the daemon started).
    fn rearm_triggers(&mut self) {
        let Some(tx) = self.tx.clone() else { return };
        for id in 0..self.triggers.len() {
            if self.triggers[id].state == TriggerState::Gone
                && self.opts.root.exists(&self.triggers[id].path)
            {
                self.arm_trigger(id, &tx, true);
            }
        }
    }

    /// Registers trigger `id`; `again` after its group came back.
    fn arm_trigger(&mut self, id: usize, tx: &mpsc::Sender<Wake>, again: bool) {
        let root = self.opts.root.clone();
        let Some(t) = self.triggers.get_mut(id) else {
            return;
        };
        let stall = match t.key.stall {
            crate::policy::expr::Stall::Some => "some",
            crate::policy::expr::Stall::Full => "full",
        };
        t.state = match psi_trigger::open(&root, &t.path, stall, t.amount, t.window) {
            Ok(trigger) => match watch::spawn_psi_trigger(trigger, id, tx.clone()) {
                Ok(_) => {
                    if again {
                        tracing::info!(trigger = %t.label(), "PSI trigger registered again");
                    } else {
                        tracing::debug!(trigger = %t.label(), "PSI trigger registered");
                    }
                    TriggerState::Armed
                }
                Err(e) => {
                    tracing::warn!(path = %t.path.display(), "PSI trigger not watched ({e}); polling total= each tick");
                    TriggerState::Unarmed
                }
            },
            Err(psi_trigger::TriggerError::Gone { .. }) => {
                tracing::info!(path = %t.path.display(), "PSI trigger waits for its group; polling total= each tick meanwhile");
                TriggerState::Gone
            }
            Err(e) => {
                tracing::info!(path = %t.path.display(), "PSI trigger unavailable ({e}); polling total= each tick");
                TriggerState::Unarmed
            }
        };
    }

    /// The safety-net /proc scan: places processes that exec events missed.
    fn rescan(&mut self) {
        // The exec thread runs the scan, off the event loop (it also
        // covers --root and a missing connector; start_watchers always sets it).
        if let Some(x) = &self.exec {
            x.rescan();
            tracing::debug!("placement: {}", x.counters().summary());
        }
    }

    async fn shutdown(&mut self) {
        let now = self.now();
        let effects = self.supervisor.release_all(&self.policy, now);
        tracing::info!(writes = effects.len(), "stopping: releasing claims");
        if let Some(x) = &self.exec {
            tracing::info!("placement: {}", x.counters().summary()); // issue #5
        }
        self.carry_out(effects);
        self.hooks.shutdown(Duration::from_secs(2)).await;
        tracing::info!("stopped");
    }
}

#[cfg(test)]
mod watchdog_tests {
    use super::*;

    #[test]
    fn watchdog_period_is_half_and_never_below_the_minimum() {
        assert_eq!(watchdog_from(None), None);
        assert_eq!(watchdog_from(Some("0")), None);
        assert_eq!(watchdog_from(Some("junk")), None);
        assert_eq!(watchdog_from(Some("1")), Some(MIN_WATCHDOG));
        assert_eq!(watchdog_from(Some("19999")), Some(MIN_WATCHDOG));
        assert_eq!(
            watchdog_from(Some("30000000")),
            Some(Duration::from_secs(15))
        );
    }
}
