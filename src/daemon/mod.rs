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
pub mod exec; // issue #5: exec events, placement, presence
pub mod hooks;
pub mod sample;
pub mod watch;

use crate::converge::Converger;
use crate::engine::condition::sampled_needs;
use crate::engine::supervisor::{rule_knobs, Effect, Supervisor};
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::{psi_trigger, Root};
use crate::policy::expr::Target;
use crate::policy::model::Policy;
use actuator::Actuator;
use hooks::{HookContext, HookLimits, HookRunner};
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

/// Runs the daemon until SIGTERM/SIGINT; returns the process exit code.
pub fn run(opts: Options) -> u8 {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the runtime: {e}");
            return EXIT_INVALID;
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
    /// PSI trigger id → the stall key it watches (for logs).
    triggers: Vec<String>,
    watcher: Option<FileWatcher>,
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
                for f in &done.failures {
                    tracing::error!("{f}");
                }
            }
            Err(e) => {
                tracing::error!("cannot open the originals journal: {e}");
                return EXIT_INVALID;
            }
        }
    }

    let (tx, mut rx) = mpsc::channel::<Wake>(256);
    let mut d = Daemon::new(opts, policy, tx.clone());
    d.start_watchers(&tx);

    let (mut term, mut int, mut hup) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) {
        (Ok(a), Ok(b), Ok(c)) => (a, b, c),
        _ => {
            tracing::error!("cannot install signal handlers");
            return EXIT_INVALID;
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
        psi_triggers = d.triggers.len(),
        dry_run = d.opts.dry_run,
        "cgwarden running"
    );

    let tick = d.opts.tick.unwrap_or(d.policy.settings.tick);
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
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}

impl Daemon {
    fn new(opts: Options, policy: Policy, _tx: mpsc::Sender<Wake>) -> Daemon {
        let root = opts.root.clone();
        let cg = CgroupFs::new(root.clone(), policy.settings.cgroup_root.clone());
        let groups = actuator::group_paths(&policy);
        let needs = sampled_needs(&policy.rules);
        let sampler = Sampler::new(root.clone(), cg.clone(), groups, needs);
        let actuator = Actuator::new(root.clone(), &policy, opts.dry_run);
        let mut supervisor = Supervisor::new(&policy);
        // Knobs the rules touch but the policy leaves alone return to what
        // the kernel held when we started.
        for knob in rule_knobs(&policy) {
            if let Some(v) = actuator.read(&knob) {
                supervisor.seed(&knob, v);
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
            watcher: None,
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
            let stall = match key.stall {
                crate::policy::expr::Stall::Some => "some",
                crate::policy::expr::Stall::Full => "full",
            };
            match psi_trigger::open(&root, &path, stall, amount, window) {
                Ok(trigger) => {
                    let id = self.triggers.len();
                    match watch::spawn_psi_trigger(trigger, id, tx.clone()) {
                        Ok(_) => self
                            .triggers
                            .push(format!("{} {stall} {amount:?}/{window:?}", path.display())),
                        Err(e) => {
                            tracing::warn!(path = %path.display(), "PSI trigger not watched ({e}); polling total= each tick")
                        }
                    }
                }
                Err(e) => {
                    tracing::info!(path = %path.display(), "PSI trigger unavailable ({e}); polling total= each tick")
                }
            }
        }
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
                trigger = self.triggers.get(id).map(String::as_str).unwrap_or("?"),
                "PSI trigger"
            ),
            Wake::PsiGone { id } => {
                tracing::warn!(
                    trigger = self.triggers.get(id).map(String::as_str).unwrap_or("?"),
                    "PSI trigger's group is gone; polling until it is recreated"
                )
            }
            Wake::FileModified { path } => tracing::debug!(path = %path.display(), "modified"),
            Wake::WatchError { what } => tracing::warn!("watcher: {what}"),
            Wake::Presence => tracing::debug!("running() presence changed"),
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.supervisor.next_deadline().map(|t| self.start + t)
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
                    reason,
                } => {
                    tracing::warn!(rule = %rule, metric = %metric, "metric unavailable: {reason}")
                }
            }
        }
    }

    /// A group deleted from outside is recreated (with its baseline) and its
    /// claimed knobs are written again.
    fn check_groups(&mut self) {
        let missing: Vec<String> = self
            .policy
            .all_groups()
            .into_iter()
            .filter(|g| !self.cg.exists(&g.path))
            .map(|g| g.name.clone())
            .collect();
        if missing.is_empty() || self.opts.dry_run {
            return;
        }
        tracing::warn!(groups = ?missing, "groups deleted from outside; recreating");
        let conv = Converger::new(self.opts.root.clone(), &self.policy);
        let plan = conv.plan();
        match conv.apply(&plan, &mut |line| tracing::info!("{line}")) {
            Ok(done) => {
                for f in &done.failures {
                    tracing::error!("{f}");
                }
            }
            Err(e) => tracing::error!("recreating groups: {e}"),
        }
        for g in &missing {
            self.supervisor.invalidate_group(g);
        }
        if let Some(w) = &mut self.watcher {
            for g in self
                .policy
                .all_groups()
                .into_iter()
                .filter(|g| missing.contains(&g.name))
            {
                for file in ["memory.events", "cgroup.events"] {
                    let path = self.cg.file(&g.path, file);
                    if self.opts.root.exists(&path) {
                        let _ = w.watch(&path);
                    }
                }
            }
        }
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
