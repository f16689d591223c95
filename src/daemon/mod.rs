//! `cgwarden run`: the supervisor daemon. Thin tokio wiring:
//! watchers wake the loop, the sampler reads what the rules need, the pure
//! engine decides, the actuator hands writes to the writer lanes
//! ([`lanes`]: threads, so a write the kernel blocks in never stalls the
//! loop) and the hook runner runs hooks.
//!
//! The daemon is components, each owning its state, each in its module:
//! the policy in force ([`reload::Loaded`]), the engine's supervisor, the
//! [`actuator`], the hook runner, the PSI triggers and event-file watches
//! ([`triggers`]), the groups and what places processes in them
//! ([`groups`]), the control plane ([`control`]) and the telemetry
//! ([`telemetry`]: sampler, KPIs, metrics and recorder, throttle, drift).
//! This file wires them: [`run_async`] and the few methods that need
//! several of them (evaluate, carry out effects, check the groups, take a
//! wake-up or a finished write).
//!
//! Startup: validate → converge once (journal, hierarchy, baseline,
//! placement scan) → start watchers → READY=1. Wake-ups: the tick (only
//! while some condition needs sampling, see [`TickMode`]), kernel PSI
//! triggers, inotify on `memory.events`/`cgroup.events`, the engine's next
//! deadline (end of a `for`/`hold`/`cooldown`), a write's deadline, finished
//! writes, the rescan timer (only with placement or `running()` rules),
//! signals. The watchdog ping is sent by the loop itself and nothing in the
//! loop waits on a kernel write. Stop (SIGTERM, SIGINT): claims are
//! released so knobs return to their baselines, hooks get a grace period,
//! the release writes get theirs, exit 0; hierarchy and baseline stay.

pub(crate) mod actuator;
pub(crate) mod control; // the daemon's side of the control socket
mod drift; // settings.drift
mod eventlog; // every event as a structured (journald) record
pub(crate) mod exec; // exec events, placement, presence
mod groups; // the cgroup tree, placement, IRQs, repairs
mod health; // `cgwarden health`, the post-update check
pub(crate) mod hooks;
mod irqwatch; // system.irqs/kthreads on IRQs that appear later
mod kpisock; // KPIs from applications: kpi.sock (StatsD), RecordKpi
pub(crate) use kpisock::remove_sockets;
pub(crate) mod lanes;
mod memstat; // memory telemetry for rules
mod observed; // metrics and flight recorder threads, the published engine view
pub(crate) mod priority; // settings.daemon (mlock, cpus, sched)
mod reload; // hot reload (SIGHUP, policy file watch, varlink Reload)
pub(crate) mod repair; // when to retry recreating a deleted group
mod resort; // freeze, thaw, kill in
pub(crate) mod sample;
mod services; // the cgw-services thread: control, metrics, KPI socket, policy watch
mod startup; // load, converge once, build the daemon
mod tasks; // per-process attributes, threads
mod telemetry; // sampler, KPIs, metrics and recorder, throttle, drift
mod throttle; // throttle episodes
mod triggers; // PSI triggers and event-file watches
mod wakeups;
pub(crate) mod watch;
use wakeups::{LoopProfile, LoopTimer, LoopWakes, TickMode};

use crate::converge::journal::Journal;
use crate::converge::Converger;
use crate::engine::condition::sampled_needs;
use crate::engine::supervisor::{rule_knobs, Effect, Supervisor};
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::Root;
use crate::policy::model::Policy;
use actuator::Actuator;
use hooks::{HookContext, HookLimits, HookRunner};
use sample::{Sampler, View};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;
use watch::Wake;

/// How the daemon was started.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) policy_path: PathBuf,
    pub(crate) root: Root,
    pub(crate) dry_run: bool,
    /// Overrides `settings.tick` (tests and benchmarks).
    pub(crate) tick: Option<Duration>,
}

/// Exit codes of `cgwarden run` (see [`crate::exit`]).
pub(crate) const EXIT_OK: u8 = 0;
pub(crate) const EXIT_INVALID: u8 = 1;
pub(crate) const EXIT_MISSING: u8 = 3;
/// A runtime failure that may pass (the journal's file, the runtime): the
/// service manager restarts the daemon (EX_TEMPFAIL).
pub(crate) const EXIT_TEMPFAIL: u8 = crate::exit::TEMPFAIL;

/// Runs the daemon until SIGTERM/SIGINT; returns the process exit code.
pub(crate) fn run(opts: Options) -> u8 {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_stack_size(crate::kernel::residency::RUNTIME_STACK)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the runtime: {e}");
            return EXIT_TEMPFAIL;
        }
    };
    // The loop runs as a task of the runtime, not as `block_on`'s own
    // future: a timer or another task waking a task on the runtime's thread
    // just queues it, while waking `block_on`'s future writes the runtime's
    // eventfd and costs the next park an extra `epoll_wait` (two
    // of the few system calls an evaluation makes).
    rt.block_on(async move {
        match tokio::spawn(run_async(opts)).await {
            Ok(code) => code,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => {
                tracing::error!("the event loop stopped: {e}");
                EXIT_TEMPFAIL
            }
        }
    })
}

/// The daemon: components, each owning its state, wired by the event loop
/// ([`run_async`]).
struct Daemon {
    opts: Options,
    /// The engine's clock starts here.
    start: Instant,
    /// The policy in force, its hash, when it was loaded, why the last
    /// reload was refused ([`reload`]).
    loaded: reload::Loaded,
    supervisor: Supervisor,
    /// Hands writes to the writer lanes; journals originals.
    actuator: Actuator,
    hooks: HookRunner,
    /// PSI triggers and the event-file watches ([`triggers`]).
    triggers: triggers::Triggers,
    /// The cgroup tree, placement, repairs ([`groups`]).
    groups: groups::Groups,
    /// Boosts, recent actions, the event bus, the services thread.
    control: control::ControlState,
    /// The sampler, KPIs, metrics and recorder, throttle, drift
    /// ([`telemetry`]).
    telemetry: telemetry::Telemetry,
}

async fn run_async(opts: Options) -> u8 {
    let startup::Prepared {
        policy,
        journal,
        placed: startup_placed,
    } = match startup::prepare(&opts) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let (tx, mut rx) = mpsc::channel::<Wake>(256);
    let mut d = Daemon::new(opts, policy, journal, tx.clone());
    let Some(mut done_rx) = d.actuator.take_completions() else {
        tracing::error!("the writer lanes' completion channel is gone");
        return EXIT_TEMPFAIL;
    };
    d.start_watchers(&tx);
    if let Some(x) = &d.groups.exec {
        for (g, n) in &startup_placed {
            x.counters().placed_in(g, *n);
        }
    }
    d.watch_policy_file(&tx);
    let Some(mut gone_rx) = d.control.gone_rx.take() else {
        tracing::error!("the boost exit channel is gone");
        return EXIT_TEMPFAIL;
    };
    // Before the control socket says it listens: a stop from then on
    // (SIGTERM right after start, as a service manager may send) is taken
    // by the loop and releases claims, never the default action's kill.
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
    let (ctl_tx, mut ctl_rx) = mpsc::unbounded_channel::<crate::control::Call>();
    let socket = d.start_control(ctl_tx);
    d.start_observe();

    // The first evaluation takes every counter's baseline (counters count
    // "from the value seen when the daemon started watching"), so it comes
    // before READY and "cgwarden running": an event right after them counts
    // (a baseline taken later would already hold it).
    d.evaluate();
    notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status("supervising"),
    ]);
    let watchdog = watchdog_interval();
    d.say_live_hooks();
    tracing::info!(
        product = %d.loaded.policy.product,
        rules = d.loaded.policy.rules.len(),
        groups = d.loaded.policy.all_groups().len(),
        psi_triggers = d.triggers.armed(),
        dry_run = d.opts.dry_run,
        // What startup cost, apart from what each episode costs.
        startup_cpu_ms = crate::kernel::selfproc::cpu_seconds().map_or(0, |s| (s * 1e3) as u64),
        "cgwarden running"
    );
    // The CLI and the policy both refuse a tick under 10 ms; a library
    // caller must not reach a zero-period timer either.
    let tick = d.tick();
    // The heap startup freed goes back; every mapped page stays locked.
    priority::settle("startup");
    // The safety-net /proc scan, only when something places or tracks processes.
    let rescan_on = d.places_or_tracks();
    let mut rescan = tokio::time::interval(d.loaded.policy.settings.rescan.max(MIN_WATCHDOG));
    rescan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    rescan.tick().await; // the first tick is immediate; startup already scanned
                         // The watchdog ping is sent by this loop itself, between evaluations:
                         // nothing in the loop waits on a kernel write (the writer lanes do), so
                         // a ping that stops means the loop really stopped.
    let mut wd = tokio::time::interval(watchdog.unwrap_or(Duration::from_secs(3600)));
    // settings.drift, checked off the loop; the result comes back here.
    let drift_every = d.loaded.policy.settings.drift.as_ref().map(|x| x.interval);
    let mut drift_timer = tokio::time::interval(drift_every.unwrap_or(Duration::from_secs(3600)));
    drift_timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    drift_timer.tick().await;
    let (drift_tx, mut drift_rx) = mpsc::unbounded_channel();
    d.telemetry.drift.tx = Some(drift_tx.clone());

    let mut last_tick = Instant::now();
    // Why the loop woke, counted for the stop line: where an idle daemon's
    // CPU goes.
    let mut woke = LoopWakes::default();
    let mut profile = LoopProfile::from_env();
    // One timer for the loop's own times (tick, late-write check, deadline),
    // kept across turns and set only when the earliest of them moves: a
    // timer made anew each turn would be registered anew each turn (see
    // LoopTimer).
    let mut timer = LoopTimer::new();
    let mut timer_at: Option<Instant> = None;
    loop {
        profile.turn(&woke);
        woke.total += 1;
        d.control.loop_wakes = woke.total;
        d.publish_observed(); // only when something changed
        d.expire_boosts();
        let deadline = d.next_deadline();
        // The tick runs only while some condition needs sampling (see TickMode).
        let mode = d.tick_mode(tick);
        let tick_at = mode.period().map(|p| last_tick + p);
        // Without a write queued or in flight there is nothing to check
        // (and no need to read the clock for it).
        let late_at = match d.actuator.counters().1 {
            0 => None,
            _ => d.actuator.next_check(Instant::now()),
        };
        // Replies held for their writes go out at the late-write deadline.
        let reply_at = d.control.held_due();
        let next = [tick_at, late_at, deadline, reply_at]
            .into_iter()
            .flatten()
            .min();
        if next != timer_at {
            timer.set(next);
            timer_at = next;
        }
        tokio::select! {
            _ = timer.fired(), if timer_at.is_some() => {
                // Fired: reset at the next turn, whatever it then is.
                timer_at = None;
                let now = Instant::now();
                if late_at.is_some_and(|t| t <= now) {
                    d.actuator.check_late(now);
                }
                if reply_at.is_some_and(|t| t <= now) {
                    d.control.answer_overdue(now);
                }
                if tick_at.is_some_and(|t| t <= now) {
                    last_tick = now;
                    woke.tick += 1;
                    d.on_tick(mode);
                } else if deadline.is_some_and(|t| t <= now) {
                    woke.deadline += 1;
                    d.evaluate();
                }
            }
            Some(wake) = rx.recv() => {
                woke.event += 1;
                let mut due = d.on_wake(wake);
                // Coalesce a burst of wake-ups into one evaluation.
                while let Ok(w) = rx.try_recv() {
                    due |= d.on_wake(w);
                }
                if due {
                    d.evaluate();
                }
            }
            Some(done) = done_rx.recv() => {
                woke.write_done += 1;
                d.write_done(done);
                while let Ok(done) = done_rx.try_recv() {
                    d.write_done(done);
                }
            }
            _ = rescan.tick(), if rescan_on => {
                woke.rescan += 1;
                d.rescan()
            }
            _ = drift_timer.tick(), if drift_every.is_some() => d.start_drift_check(&drift_tx),
            Some(found) = drift_rx.recv() => d.on_drift(found),
            _ = wd.tick(), if watchdog.is_some() => {
                woke.watchdog += 1;
                notify(&[sd_notify::NotifyState::Watchdog])
            }
            Some(call) = ctl_rx.recv() => {
                woke.control += 1;
                d.on_call(call);
            }
            Some(handle) = gone_rx.recv() => {
                woke.control += 1;
                d.on_boost_owner_gone(handle);
            }
            _ = hup.recv() => {
                tracing::info!("SIGHUP: reloading the policy");
                d.reload_for_control(false, None);
                d.evaluate();
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    notify(&[sd_notify::NotifyState::Stopping]);
    tracing::info!(
        total = woke.total,
        tick = woke.tick,
        event = woke.event,
        write_done = woke.write_done,
        deadline = woke.deadline,
        rescan = woke.rescan,
        watchdog = woke.watchdog,
        control = woke.control,
        "event loop wake-ups"
    );
    profile.turn(&woke);
    if let Some(p) = profile.summary(&woke) {
        tracing::info!("event loop profile: {p}");
    }
    d.shutdown(&mut done_rx).await;
    if let Some(dir) = socket.as_deref().and_then(std::path::Path::parent) {
        remove_sockets(dir);
    }
    EXIT_OK
}

/// How long a stop waits for the release writes before exiting anyway.
const WRITE_GRACE: Duration = Duration::from_secs(5);
/// How long a stop waits for the event streams to send their last event
/// (the control socket's write limit: a client that does not read is cut
/// by then anyway).
const FOLLOWER_GRACE: Duration = Duration::from_secs(1);

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
    /// Starts what wakes the loop: the PSI triggers and event-file watches
    /// ([`triggers`]), exec events and the IRQ watcher ([`groups`]).
    fn start_watchers(&mut self, tx: &mpsc::Sender<Wake>) {
        let root = self.opts.root.clone();
        self.triggers.start(&root, tx, &mut self.telemetry.sampler);
        self.watch_event_files();
        self.groups.start(
            &root,
            &self.loaded.policy,
            &mut self.telemetry.sampler,
            !self.opts.dry_run,
            tx,
            self.actuator.shared_journal(),
        );
    }

    /// [`triggers::Triggers::watch_event_files`] for the policy in force.
    fn watch_event_files(&mut self) {
        self.triggers.watch_event_files(
            &self.loaded.policy,
            &self.groups.cg,
            &self.opts.root,
            self.telemetry.sampler.needs(),
        );
    }

    #[cfg(test)]
    fn sync_armed(&mut self) {
        self.triggers.sync_armed(&mut self.telemetry.sampler);
    }

    /// A writer lane finished a write: the control plane hears of it (a
    /// `write_failed` event, the replies it completes), the metrics count
    /// it, then the actuator logs and counts it.
    fn write_done(&mut self, done: lanes::Done) {
        self.control.write_landed(&done);
        if let Some(b) = self.telemetry.observe_book() {
            b.write_done(&done.job.label, done.result.is_ok());
        }
        self.actuator.finished(done);
    }

    /// Repairs groups deleted from outside: each is recreated
    /// alone — the directory, the controllers its children need, its knobs'
    /// baselines, then their effective values (live claims) through the next
    /// step — and its watches and PSI triggers are re-armed. Nothing else is
    /// rewritten. A group that cannot be recreated is retried with a backoff.
    fn check_groups(&mut self) {
        if self.opts.dry_run {
            return;
        }
        // Deletion is seen through inotify (the guard watch on each group's
        // parent): without a sign of one, and no retry pending, the groups
        // are not stat'ed at every evaluation.
        if self.groups.dirty
            || self.triggers.events_unwatched
            || self.triggers.files.is_none()
            || self.groups.repairs.next_due().is_some()
        {
            let recreated = self.groups.repair(
                &self.loaded.policy,
                &mut self.actuator,
                &mut self.supervisor,
            );
            for g in &recreated {
                self.triggers.rearm_group(
                    g,
                    &self.groups.cg,
                    &self.opts.root,
                    self.telemetry.sampler.needs(),
                );
            }
            self.triggers
                .rearm_gone(&self.opts.root, &mut self.telemetry.sampler);
            self.watch_event_files();
        } else {
            self.triggers
                .rearm_gone(&self.opts.root, &mut self.telemetry.sampler);
        }
    }

    /// Whether placement rules or `running()` conditions need the exec
    /// machinery (and with it the `settings.rescan` safety net).
    fn places_or_tracks(&self) -> bool {
        !self.loaded.policy.placement.is_empty()
            || !self.telemetry.sampler.needs().running.is_empty()
            || !self.loaded.policy.settings.critical.is_empty()
    }

    /// What the tick must do now (see [`TickMode`]).
    fn tick_mode(&self, tick: Duration) -> TickMode {
        let n = self.telemetry.sampler.needs();
        // Values only a read shows: nothing wakes the loop when they change.
        let polled = !n.psi_avg.is_empty()
            || !n.memory_current.is_empty()
            || !n.swap_current.is_empty()
            || !n.pids_current.is_empty()
            || n.memory_available
            || !n.thermal_zones.is_empty()
            || !n.thermal_trips.is_empty()
            || !n.cpufreq.is_empty()
            || !n.kpi.is_empty()
            || n.cooling
            || !n.memstat.is_empty();
        // memory.events / cgroup.events are seen through inotify.
        let events_unwatched = self.triggers.events_unwatched;
        // Without exec events, placement and presence scan /proc each tick.
        let exec_scans = self.places_or_tracks()
            && self
                .groups
                .exec
                .as_ref()
                .is_none_or(|x| !x.shared.events_live());
        let unarmed = self.triggers.unarmed();
        if polled || events_unwatched || exec_scans || unarmed {
            return TickMode::Full(tick);
        }
        // Stall lines behind registered triggers are read when a trigger
        // fires (its firing stands in for the window nobody sampled, see
        // `StallSeries::record_trigger`), and once more about a tick later while
        // their stall is at a trigger's amount, to see it end (a deadline,
        // see `stall_recheck`): nothing periodic is left, not even
        // during a busy stall rule's hold.
        TickMode::Off
    }

    fn on_tick(&mut self, mode: TickMode) {
        match mode {
            TickMode::Off => {}
            TickMode::Full(_) => {
                if self.triggers.events_unwatched {
                    self.watch_event_files();
                }
                if let Some(x) = &self.groups.exec {
                    x.on_tick(); // without exec events, scan each tick
                }
                self.evaluate();
            }
        }
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Takes one wake-up; `true` if an evaluation is due for it. A change
    /// of an event file no condition reads (a `cgroup.events` watched only
    /// to notice the group's removal) needs none.
    fn on_wake(&mut self, wake: Wake) -> bool {
        match wake {
            Wake::Psi { id } => self.triggers.fired(id, &mut self.telemetry.sampler),
            Wake::PsiGone { id } => self.triggers.gone(id, &mut self.telemetry.sampler),
            Wake::FileModified { path } => {
                tracing::debug!(path = %path.display(), "modified");
                // The watcher wakes a file whose group was removed: a repair is due.
                if !self.opts.root.exists(&path) {
                    self.groups.dirty = true;
                    return true;
                }
                return self.event_file_read(&path);
            }
            Wake::WatchError { what } => {
                tracing::warn!("watcher: {what}");
                self.groups.dirty = true;
            }
            Wake::Presence => tracing::debug!("running() presence changed"),
            Wake::PolicyChanged => self.reload_if_changed(),
            Wake::CriticalExit {
                pid,
                comm,
                pattern,
                by_scan,
                at,
            } => self
                .control
                .note_critical_exit(pid, &comm, &pattern, by_scan, at),
        }
        true
    }

    /// Whether a condition reads the event file at `path` (a group's
    /// `memory.events` or `cgroup.events`).
    fn event_file_read(&self, path: &std::path::Path) -> bool {
        let n = self.telemetry.sampler.needs();
        let path = Root::normalize(path);
        self.loaded.policy.all_groups().into_iter().any(|g| {
            let reads = |file: &str| Root::normalize(&self.groups.cg.file(&g.path, file)) == path;
            (n.memory_events.contains(&g.name) && reads("memory.events"))
                || (n.populated.contains(&g.name) && reads("cgroup.events"))
        })
    }

    /// The sampling period: `settings.tick`, or `run --tick`.
    fn tick(&self) -> Duration {
        // The CLI and the policy both refuse a tick under 10 ms; a library
        // caller must not reach a zero-period timer either.
        self.opts
            .tick
            .unwrap_or(self.loaded.policy.settings.tick)
            .max(MIN_WATCHDOG)
    }

    /// When a stall line behind an armed kernel trigger must be read again
    /// to see its stall end ([`crate::engine::stall::StallHistory::recheck_at`],
    /// a tick — with a tick of a window or more, just over a window — after
    /// a read that showed a trigger's amount).
    fn stall_recheck(&self) -> Option<Instant> {
        self.triggers
            .recheck_at(&self.telemetry.sampler, self.tick(), self.start)
    }

    fn next_deadline(&self) -> Option<Instant> {
        let engine = self.supervisor.next_deadline().map(|t| self.start + t);
        [engine, self.groups.repairs.next_due(), self.stall_recheck()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Sample, evaluate, act.
    fn evaluate(&mut self) {
        self.check_groups();
        let now = self.now();
        self.telemetry.set_asked_ceilings(self.supervisor.table());
        let mut snap = self.telemetry.sampler.sample(now);
        snap.kpi = self.telemetry.kpi_values();
        self.telemetry
            .throttle_episodes(&snap.throttled, &self.control);
        if !snap.throttled.is_empty() {
            self.telemetry.set_cpufreq_limits(snap.cpufreq_limits());
        }
        let view = View {
            snap: &snap,
            stall: &self.telemetry.sampler.stall,
            now,
        };
        // The recorder's input tape gets what the engine reads.
        if let Some(tape) = self
            .telemetry
            .observe
            .as_mut()
            .and_then(|o| o.tape.as_mut())
        {
            tape.record(now, &view, &self.telemetry.sampler.stall, &snap.triggered);
        }
        let actuator = &self.actuator;
        let effects = self
            .supervisor
            .step(&self.loaded.policy, now, &view, &|k| actuator.read(k));
        self.carry_out(effects);
    }

    /// Carries out what the engine decided: writes handed to the lanes, hook
    /// runs, and the other effects of one evaluation.
    fn carry_out(&mut self, mut effects: Vec<Effect>) {
        if !effects.is_empty() {
            self.telemetry.observed_changed();
        }
        actuator::order_writes(&mut effects);
        for e in effects {
            match e {
                Effect::Write(w) => {
                    let outcome = self.actuator.apply(&w);
                    self.control.note_write(&w, &outcome);
                }
                Effect::Hook {
                    hook,
                    rule,
                    event,
                    metric,
                    value,
                    threshold,
                    group,
                    paired,
                } => {
                    let ctx = HookContext {
                        rule,
                        event,
                        metric,
                        value,
                        threshold,
                        group,
                        product: self.loaded.policy.product.clone(),
                        time: SystemTime::now(),
                        paired,
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
                Effect::Freeze {
                    rule,
                    group,
                    freeze,
                    reason,
                } => resort::freeze(
                    &self.opts.root,
                    &self.loaded.policy,
                    &rule,
                    &group,
                    freeze,
                    &reason,
                    self.opts.dry_run,
                    self.groups.exec.as_ref().map(|x| &*x.shared.last_resort),
                    &self.control.events,
                ),
                Effect::Kill { rule, spec, reason } => {
                    match resort::Kill::new(
                        &self.opts.root,
                        &self.loaded.policy,
                        &rule,
                        spec,
                        reason,
                        self.groups
                            .exec
                            .as_ref()
                            .map(|x| x.shared.last_resort.clone()),
                        self.control.events.clone(),
                        self.opts.dry_run,
                    ) {
                        Some(k) => k.spawn(),
                        None => {
                            tracing::error!(rule = %rule, "kill: its group is not in the policy")
                        }
                    }
                }
                Effect::Phase { rule, phase } => {
                    // Logged as the event's record (daemon/eventlog.rs).
                    self.control.note_phase(&rule, &phase);
                    self.telemetry.observed_phase(&rule, phase);
                }
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

    /// Under `--root` (a fake tree, a board's copy) hooks still run, for
    /// real, on this host: that is how a test on a fake board sees a hook
    /// run. So that it is no surprise, the start (and a reload) says so in
    /// one warning naming each hook and its program; `--dry-run` runs none.
    fn say_live_hooks(&self) {
        // A hook's program is never resolved under the root.
        let under_root = self.opts.root.base() != std::path::Path::new("/");
        if !under_root || self.opts.dry_run || self.loaded.policy.hooks.is_empty() {
            return;
        }
        let hooks: Vec<String> = self
            .loaded
            .policy
            .hooks
            .iter()
            .map(|h| format!("{} ({})", h.name, h.exec.join(" ")))
            .collect();
        tracing::warn!(
            "hooks run for real under --root: {}; run --dry-run to keep them dry",
            hooks.join(", ")
        );
    }

    /// The safety-net /proc scan: places processes that exec events missed.
    fn rescan(&mut self) {
        // The exec thread runs the scan, off the event loop (it also
        // covers --root and a missing connector; start_watchers always sets it).
        if let Some(x) = &self.groups.exec {
            x.rescan();
            tracing::debug!("placement: {}", x.counters().summary());
        }
    }

    async fn shutdown(&mut self, done_rx: &mut mpsc::UnboundedReceiver<lanes::Done>) {
        let now = self.now();
        // Boosts end with the daemon, as rules' claims do.
        self.control.release_all_boosts(&mut self.supervisor);
        let effects = self.supervisor.release_all(&self.loaded.policy, now);
        tracing::info!(writes = effects.len(), "stopping: releasing claims");
        if let Some(x) = &self.groups.exec {
            tracing::info!("placement: {}", x.counters().summary());
        }
        self.carry_out(effects);
        self.hooks.shutdown(Duration::from_secs(2)).await;
        // The release writes ran on their lanes meanwhile; wait for the rest.
        let left = self.actuator.drain(done_rx, WRITE_GRACE).await;
        let (c, _) = self.actuator.counters();
        tracing::info!(
            writes = c.writes,
            rejected = c.rejected,
            late = c.late,
            superseded = c.superseded,
            unfinished = left,
            "knob writes"
        );
        self.stop_observe();
        tracing::info!("stopped");
        end_event_streams(&self.control.events).await;
    }
}

/// Sends the event streams their last event, `stopped`, and waits (at most
/// [`FOLLOWER_GRACE`]) until each has written it and ended: so `cgwarden
/// events` ends as the stream ends (exit 0), not on a connection the exit
/// cut. By the daemon's stop the recorder's receiver is gone; the receivers
/// left are the streams'.
async fn end_event_streams(events: &tokio::sync::broadcast::Sender<crate::control::wire::Event>) {
    if events.receiver_count() == 0 {
        return;
    }
    let _ = events.send(crate::control::wire::Event {
        time: crate::show::rfc3339_millis(SystemTime::now()),
        kind: crate::control::wire::EventKind::Stopped.into(),
        message: Some("the daemon is exiting; its claims were released".into()),
        ..Default::default()
    });
    let until = Instant::now() + FOLLOWER_GRACE;
    while events.receiver_count() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
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

#[cfg(test)]
mod tick_tests {
    use super::triggers::TriggerState;
    use super::*;
    use crate::engine::rule_state::Phase;
    use crate::engine::stall::StallKey;
    use crate::engine::supervisor::Effect;
    use std::path::Path;

    /// When `key`'s line was last read (its series' newest point).
    fn last_read(d: &Daemon, key: &StallKey) -> Duration {
        let series = d
            .telemetry
            .sampler
            .stall
            .series(key)
            .expect("the line was read");
        series.latest().expect("a point").0
    }

    /// One supervisor step at `at`, as the loop takes it: sample, then step.
    fn step_at(d: &mut Daemon, at: Duration) -> Vec<Effect> {
        let snap = d.telemetry.sampler.sample(at);
        let view = View {
            snap: &snap,
            stall: &d.telemetry.sampler.stall,
            now: at,
        };
        let actuator = &d.actuator;
        d.supervisor
            .step(&d.loaded.policy, at, &view, &|k| actuator.read(k))
    }

    /// A daemon on a fake root whose groups exist with their event files,
    /// watchers started (no converge: the tick decision is what is tested).
    fn daemon(dir: &Path, rules: &str) -> Daemon {
        let root = Root::fake(dir);
        for g in ["a", "b"] {
            let d = Path::new("/sys/fs/cgroup").join(g);
            root.mkdir_all(&d).unwrap();
            root.write(&d.join("memory.events"), "high 0\noom_kill 0")
                .unwrap();
            root.write(&d.join("cgroup.events"), "populated 0\nfrozen 0")
                .unwrap();
            root.write(&d.join("memory.high"), "max").unwrap();
        }
        let text = format!("version: 1\ngroups:\n  a: {{}}\n  b: {{}}\nrules:\n{rules}");
        let policy =
            crate::policy::load_bytes("t.yaml", text.as_bytes()).unwrap_or_else(|d| panic!("{d}"));
        let opts = Options {
            policy_path: PathBuf::from("t.yaml"),
            root,
            dry_run: true,
            tick: None,
        };
        let (tx, _rx) = mpsc::channel(16);
        let mut d = Daemon::new(opts, policy, None, tx.clone());
        d.start_watchers(&tx);
        d
    }

    const T: Duration = Duration::from_secs(1);

    #[tokio::test]
    async fn no_tick_when_every_condition_is_event_driven() {
        let t = tempfile::tempdir().unwrap();
        let d = daemon(
            t.path(),
            "  - name: oom\n    when: a.memory.events.oom_kill > 0\n    then: [set b.memory.high = 1G]\n  - name: gone\n    when: not exists(b)\n    then: [set a.memory.high = 1G]\n",
        );
        assert_eq!(d.tick_mode(T), TickMode::Off);
        assert!(!d.places_or_tracks(), "no rescan timer");
    }

    #[tokio::test]
    async fn an_unwatched_events_file_is_read_by_the_tick_until_it_is_watched() {
        let t = tempfile::tempdir().unwrap();
        let root = Root::fake(t.path());
        let mut d = daemon(
            t.path(),
            "  - name: oom\n    when: a.memory.events.oom_kill > 0\n    then: [set b.memory.high = 1G]\n",
        );
        // The file goes away (as a kernel without the memory controller would
        // show it); the watcher forgets it, the tick reads meanwhile.
        let ev = Path::new("/sys/fs/cgroup/a/memory.events");
        root.remove_file(ev).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        d.watch_event_files();
        assert_eq!(d.tick_mode(T), TickMode::Full(T));
        root.write(ev, "oom_kill 0").unwrap();
        d.on_tick(TickMode::Full(T));
        assert_eq!(d.tick_mode(T), TickMode::Off);
    }

    #[tokio::test]
    async fn polled_values_and_unarmed_triggers_need_the_tick() {
        let t = tempfile::tempdir().unwrap();
        let d = daemon(
            t.path(),
            "  - name: big\n    when: a.memory.current > 1G\n    then: [set b.memory.high = 1G]\n",
        );
        assert_eq!(d.tick_mode(T), TickMode::Full(T));
        let t = tempfile::tempdir().unwrap();
        // A fake root offers no PSI triggers: the stall line is polled.
        let d = daemon(
            t.path(),
            "  - name: stall\n    when: a.memory.some > 100ms/1s\n    then: [set b.memory.high = 1G]\n",
        );
        // One stall condition, one trigger: without it the check below
        // would hold of an empty list.
        assert_eq!(
            d.triggers.psi.len(),
            1,
            "the stall rule registered no trigger"
        );
        assert!(d
            .triggers
            .psi
            .values()
            .all(|t| t.state != TriggerState::Armed));
        assert_eq!(d.tick_mode(T), TickMode::Full(T));
    }

    #[tokio::test]
    async fn armed_stall_triggers_need_no_tick() {
        let t = tempfile::tempdir().unwrap();
        let mut d = daemon(
            t.path(),
            "  - name: stall\n    when: a.memory.some > 100ms/2s\n    then: [set b.memory.high = 1G]\n",
        );
        let key = d.triggers.psi[&0].key.clone();
        // As if the kernel had accepted the trigger.
        for t in d.triggers.psi.values_mut() {
            t.state = TriggerState::Armed;
        }
        d.sync_armed();
        assert!(d.telemetry.sampler.stall.is_armed(&key));
        assert_eq!(d.tick_mode(Duration::from_millis(100)), TickMode::Off);
        // Its silence reads as no stall, never as "unavailable".
        let snap = d.telemetry.sampler.sample(d.now());
        let view = View {
            snap: &snap,
            stall: &d.telemetry.sampler.stall,
            now: d.now() + Duration::from_secs(30),
        };
        use crate::engine::condition::Metrics;
        assert_eq!(
            view.psi_stall(&key.target, key.resource, key.stall, Duration::from_secs(2)),
            Some(Duration::ZERO)
        );
        // It fires: the sample after the wake reads the line once and keeps
        // the kernel's word that the window held more than the amount.
        let pressure = d
            .telemetry
            .sampler
            .pressure_path(&key.target, key.resource)
            .expect("a pressure file");
        d.opts
            .root
            .write(&pressure, "some avg10=0.00 avg60=0.00 avg300=0.00 total=5000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0")
            .unwrap();
        let later = Duration::from_secs(60);
        d.telemetry
            .sampler
            .trigger_fired(&key, Duration::from_millis(100), Duration::from_secs(2));
        let snap = d.telemetry.sampler.sample(later);
        let view = View {
            snap: &snap,
            stall: &d.telemetry.sampler.stall,
            now: later,
        };
        let w = view
            .psi_stall(&key.target, key.resource, key.stall, Duration::from_secs(2))
            .expect("a window");
        assert!(w > Duration::from_millis(100), "{w:?}");
        // A trigger the kernel dropped (group gone) brings the tick back.
        d.triggers.psi.get_mut(&0).unwrap().state = TriggerState::Gone;
        d.sync_armed();
        assert!(!d.telemetry.sampler.stall.is_armed(&key));
        assert_eq!(
            d.tick_mode(Duration::from_millis(100)),
            TickMode::Full(Duration::from_millis(100))
        );
    }

    #[tokio::test]
    async fn only_the_event_files_conditions_read_wake_an_evaluation() {
        let t = tempfile::tempdir().unwrap();
        let mut d = daemon(
            t.path(),
            "  - name: oom\n    when: a.memory.events.oom_kill > 0\n    then: [set b.memory.high = 1G]\n",
        );
        let file = |g: &str, f: &str| Path::new("/sys/fs/cgroup").join(g).join(f);
        // b's memory.events (notified every 10 ms under memory.high
        // throttling) is not watched; every cgroup.events is, for removals.
        let watched = d.triggers.files.as_ref().expect("inotify").watched();
        assert_eq!(
            watched,
            vec![
                file("a", "cgroup.events"),
                file("a", "memory.events"),
                file("b", "cgroup.events")
            ]
        );
        assert_eq!(d.tick_mode(T), TickMode::Off);
        let modified = |path| Wake::FileModified { path };
        d.groups.dirty = false;
        assert!(d.on_wake(modified(file("a", "memory.events"))));
        // b's cgroup.events changed (populated): nothing reads it.
        assert!(!d.on_wake(modified(file("b", "cgroup.events"))));
        assert!(!d.groups.dirty);
        // b was removed: a repair is due, so is an evaluation.
        Root::fake(t.path())
            .remove_file(&file("b", "cgroup.events"))
            .unwrap();
        assert!(d.on_wake(modified(file("b", "cgroup.events"))));
        assert!(d.groups.dirty);
        // The watcher forgets it.
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A reload that reads b's populated and no memory.events any more.
        let text = "version: 1\ngroups:\n  a: {}\n  b: {}\nrules:\n  - name: p\n    when: b.cgroup.populated > 0\n    then: [set a.memory.high = 1G]\n";
        let policy =
            crate::policy::load_bytes("t.yaml", text.as_bytes()).unwrap_or_else(|d| panic!("{d}"));
        d.telemetry
            .sampler
            .set_needs(actuator::group_paths(&policy), sampled_needs(&policy.rules));
        d.loaded.policy = policy;
        d.watch_event_files();
        let watched = d.triggers.files.as_ref().expect("inotify").watched();
        assert_eq!(watched, vec![file("a", "cgroup.events")], "b's is gone");
        assert!(!d.on_wake(modified(file("a", "cgroup.events"))));
        assert!(!d.on_wake(modified(file("a", "memory.events"))));
    }

    /// A daemon whose one rule's triggers are armed, and the writer of its
    /// pressure file's `total=` (a fake root).
    fn armed(root: &std::path::Path, rules: &str) -> (Daemon, StallKey, impl Fn(&Daemon, u64)) {
        let mut d = daemon(root, rules);
        // As if the daemon had run a while, and the kernel had accepted the trigger.
        d.start -= Duration::from_secs(30);
        for t in d.triggers.psi.values_mut() {
            t.state = TriggerState::Armed;
        }
        d.sync_armed();
        let key = d.triggers.psi[&0].key.clone();
        let pressure = d
            .telemetry
            .sampler
            .pressure_path(&key.target, key.resource)
            .expect("a pressure file");
        let write = move |d: &Daemon, us: u64| {
            let text = format!("some avg10=0.00 avg60=0.00 avg300=0.00 total={us}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0");
            d.opts.root.write(&pressure, &text).unwrap();
        };
        (d, key, write)
    }

    /// A rule on one stall comparison needs no read to see its
    /// stall end. The trigger's silence decides it a window and an eighth
    /// after the last firing, and the hold runs from there: the one
    /// evaluation due is at the hold's end, and it clears the rule.
    #[tokio::test]
    async fn a_busy_stall_rule_ends_by_its_triggers_silence_in_one_evaluation() {
        let t = tempfile::tempdir().unwrap();
        let (mut d, key, total) = armed(
            t.path(),
            "  - name: stall\n    when: a.memory.some > 100ms/1s\n    while: [set b.memory.high = 1G]\n    hold: 3s\n",
        );
        assert!(d.telemetry.sampler.needs().psi_recheck.is_empty());
        total(&d, 5_000_000);
        d.evaluate();
        assert_eq!(d.next_deadline(), None, "no stall: nothing due");
        d.telemetry
            .sampler
            .trigger_fired(&key, Duration::from_millis(100), Duration::from_secs(1));
        d.evaluate();
        assert_eq!(d.supervisor.phases()[0].0, Phase::Active);
        assert_eq!(d.tick_mode(T), TickMode::Off);
        assert_eq!(d.stall_recheck(), None, "no read to see the end");
        let read = last_read(&d, &key);
        let silent = read + T + T / 8;
        let clear = silent + Duration::from_secs(3);
        assert_eq!(d.next_deadline(), Some(d.start + clear));
        // Nothing fired meanwhile: the evaluation at that time clears it.
        let effects = step_at(&mut d, clear);
        assert_eq!(d.supervisor.phases()[0], (Phase::Idle, Some(clear)));
        assert!(
            effects.iter().any(|e| matches!(e, Effect::Write(_))),
            "the claim's release is written: {effects:?}"
        );
        assert_eq!(d.next_deadline(), None);
        // A firing before that time would have moved it: the hold runs
        // from the newest firing's silence.
        d.telemetry
            .sampler
            .trigger_fired(&key, Duration::from_millis(100), Duration::from_secs(1));
        total(&d, 5_500_000);
        let fired = clear + Duration::from_secs(1);
        let _ = step_at(&mut d, fired);
        assert_eq!(d.supervisor.phases()[0].0, Phase::Active);
        assert_eq!(
            d.next_deadline(),
            Some(d.start + fired + T + T / 8 + Duration::from_secs(3))
        );
    }

    /// The fault case of ending by silence: the kernel drops the trigger
    /// (its group was removed, or recreated) while the rule holds a claim.
    /// Silence then means nothing: the rule does not wait for the silence's
    /// deadline, the tick comes back, and a read decides the end.
    #[tokio::test]
    async fn a_rule_whose_trigger_is_lost_ends_by_reads_not_by_silence() {
        let t = tempfile::tempdir().unwrap();
        let (mut d, key, total) = armed(
            t.path(),
            "  - name: stall\n    when: a.memory.some > 100ms/1s\n    while: [set b.memory.high = 1G]\n    hold: 3s\n",
        );
        total(&d, 5_000_000);
        d.evaluate();
        d.telemetry
            .sampler
            .trigger_fired(&key, Duration::from_millis(100), Duration::from_secs(1));
        d.evaluate();
        assert_eq!(d.supervisor.phases()[0].0, Phase::Active);
        let silent_clear = last_read(&d, &key) + T + T / 8 + Duration::from_secs(3);
        assert_eq!(d.next_deadline(), Some(d.start + silent_clear));
        // The trigger is gone: the kernel's word slides out of the window
        // and no silence answers for it; the read at the next evaluation
        // shows no growth since, so the hold starts now, not at the silence.
        d.triggers.psi.get_mut(&0).unwrap().state = TriggerState::Gone;
        d.sync_armed();
        d.evaluate();
        let (phase, since) = d.supervisor.phases()[0];
        assert_eq!(phase, Phase::Clearing);
        let since = since.expect("when it started clearing");
        assert_eq!(since, last_read(&d, &key), "decided by this read");
        assert_eq!(d.tick_mode(T), TickMode::Full(T), "the tick is back");
        assert_eq!(
            d.next_deadline(),
            Some(d.start + since + Duration::from_secs(3))
        );
        assert!(since + Duration::from_secs(3) < silent_clear);
    }

    /// A condition that combines a stall with anything else is read again a
    /// tick after its trigger fired (not each tick) to see the stall end.
    #[tokio::test]
    async fn a_busy_compound_stall_rule_is_read_again_a_tick_after_its_trigger_not_each_tick() {
        let t = tempfile::tempdir().unwrap();
        let (mut d, key, total) = armed(
            t.path(),
            "  - name: stall\n    when: a.memory.some > 100ms/1s or a.memory.some > 200ms/1s\n    while: [set b.memory.high = 1G]\n    hold: 3s\n",
        );
        assert!(d.telemetry.sampler.needs().psi_recheck.contains(&key));
        total(&d, 5_000_000);
        d.evaluate();
        assert_eq!(d.stall_recheck(), None, "no stall: nothing to read again");
        // The trigger fires: the rule claims, and no tick runs while it is busy;
        // the line is read again one tick later instead.
        d.telemetry
            .sampler
            .trigger_fired(&key, Duration::from_millis(100), Duration::from_secs(1));
        d.evaluate();
        let active = d.supervisor.phases()[0].0;
        assert_eq!(active, Phase::Active);
        assert_eq!(d.tick_mode(T), TickMode::Off);
        let at = d.stall_recheck().expect("a read to see the stall end");
        let read = last_read(&d, &key);
        assert_eq!(at, d.start + read + T + T / 8);
        assert_eq!(d.next_deadline(), Some(at));
        // That read shows the stall over (a second later, no growth): nothing
        // is due until the trigger fires again; the hold is the engine's deadline.
        let later = read + T;
        let _ = step_at(&mut d, later);
        let clearing = d.supervisor.phases()[0].0;
        assert_eq!(clearing, Phase::Clearing);
        assert_eq!(d.stall_recheck(), None);
        assert_eq!(d.tick_mode(T), TickMode::Off);
        assert_eq!(
            d.next_deadline(),
            Some(d.start + later + Duration::from_secs(3))
        );
    }

    #[tokio::test]
    async fn running_rules_without_exec_events_scan_each_tick() {
        let t = tempfile::tempdir().unwrap();
        let d = daemon(
            t.path(),
            "  - name: r\n    when: running(foo)\n    then: [set b.memory.high = 1G]\n",
        );
        assert!(d.places_or_tracks());
        // A fake root has no process-events connector.
        assert_eq!(d.tick_mode(T), TickMode::Full(T));
    }
}
