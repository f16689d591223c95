//! Alert hooks: running the policy's `hooks:` programs when a rule fires or
//! clears.
//!
//! [`HookRunner::fire`] never blocks rule evaluation: it checks the rate
//! limit and the concurrency cap, spawns the program and hands it to a tokio
//! task that supervises it (output logging, timeout, reaping). It must be
//! called from within a tokio runtime (with the time and I/O drivers on);
//! outside one it reports [`Fired::Failed`].
//!
//! How a hook runs:
//! - `exec[0]` is executed directly: no shell, no `PATH` search (a hook whose
//!   program is not an absolute path is disabled at construction, like one
//!   with an unknown `user`). The placeholders `{rule}`, `{event}`,
//!   `{metric}`, `{value}`, `{threshold}`, `{group}`, `{product}`, `{time}`
//!   are substituted in every argument after `exec[0]` in one pass (a value
//!   containing `{rule}` is not expanded again); any other `{…}` text stays
//!   literal; an unknown value (empty field of [`HookContext`]) becomes "".
//! - The environment is cleared; the hook gets exactly the eight
//!   `CGWARDEN_*` variables and [`HOOK_PATH`]. stdin is `/dev/null`, the
//!   working directory `/`.
//! - stdout and stderr are logged line by line (`info` / `warn`, fields
//!   `hook`, `rule`, `pid`, `stream`); at most [`OUTPUT_CAP`] bytes per
//!   stream per run are logged, the rest is read and discarded (so the hook
//!   never blocks on a full pipe) after one "output truncated" warning.
//! - The hook runs in its own process group and, on a kernel root, in a
//!   cgroup of its own: `<cgroup_root>/cgwarden.hooks/<hook>-<seq>`
//!   ([`HOOKS_PARENT`]; policy group names cannot contain a dot, so it never
//!   collides with a group). Convergence creates the parent when the policy
//!   has hooks and journals it like any created group, so `reset` removes it
//!   (killing and removing run cgroups left inside first). The child joins
//!   its run cgroup in `pre_exec` (writing "0" to `cgroup.procs` through a
//!   path prepared before the fork), so nothing it starts — `setsid`, double
//!   forks — runs outside it. Run cgroups a killed daemon left are killed
//!   and removed at start ([`HookRunner::in_cgroups`]). On a fake root
//!   (`--root`, no [`Op::HookCgroup`]) or when the parent or a run cgroup
//!   cannot be made (logged), the hook stays in the daemon's cgroup and only
//!   the process group is killed.
//! - The child drops the daemon's protection before `exec` (the unit runs
//!   the daemon with `Nice=-5`, `OOMScoreAdjust=-900`, its reacting threads
//!   `SCHED_FIFO`): `SCHED_OTHER`, nice 0, `oom_score_adj` 0, with
//!   async-signal-safe calls only ([`ChildSetup`]). Then `user`'s
//!   privilege drop.
//! - A run lasts until its program has exited, its output pipes are closed
//!   and no other process is left in its cgroup (or process group), or until
//!   `timeout`: then the run cgroup is killed (`cgroup.kill`, Linux ≥ 5.14;
//!   else SIGKILL to every pid in `cgroup.procs` until no new one shows up)
//!   and the process group too (counted as timed out). Leftover background
//!   processes of a hook thus get the hook's remaining time, never more.
//!   The program is always reaped; the run cgroup is removed once empty
//!   (waiting up to 1 s after the kill).
//! - `user`: resolved to uid and primary gid from `ROOT/etc/passwd` once, at
//!   construction. The child drops supplementary groups, then sets gid, then
//!   uid before `exec`; when the daemon may not do that (not root) the spawn
//!   fails and `fire` reports [`Fired::Failed`].
//!
//! Rate limit: a hook with `min_interval` starts at most once per interval,
//! measured from its last successful start. Calls inside the interval are
//! dropped, not queued ([`Fired::RateLimited`]); failed spawns and calls
//! refused for capacity do not arm the limit.
//!
//! Concurrency: at most `max_concurrent` hook processes (all hooks together)
//! are alive at once; a call beyond that is dropped ([`Fired::AtCapacity`]),
//! except a paired `cleared` (below).
//!
//! Pairs: a `while` hook ([`HookContext::paired`]) runs as a `fired` /
//! `cleared` pair per (hook, rule) — a rule has at most one active episode,
//! so the group is not part of the key (the engine reports the latest
//! trigger's group in `cleared`, which may differ from `fired`'s for a
//! condition over several groups). The pair is never split:
//! - if the `fired` run started, its `cleared` always runs: `min_interval`
//!   neither drops it nor is armed by it (the limit counts episodes), and at
//!   the cap it is queued ([`Fired::Queued`]) and started as soon as a slot
//!   frees, before any later call (the slots are a fair semaphore). Queueing
//!   rather than exceeding the cap keeps the process count bounded by the
//!   cap, whatever the number of rules; the wait is bounded by the running
//!   hooks' timeouts. Only shutdown drops a queued run: one still waiting
//!   when the grace period ends is not started.
//! - if the `fired` did not start (rate limit, cap, spawn failure), its
//!   `cleared` is dropped too ([`Fired::Unpaired`]): no `cleared` without
//!   `fired`.
//!
//! `then` hooks are not paired: plain rate limit and cap.
//!
//! Dropping a [`HookRunner`] does not kill running hooks: their supervising
//! tasks keep running (timeouts still apply) as long as the runtime lives.
//! Use [`HookRunner::shutdown`] on daemon stop.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

mod run;
use run::{command, log_join, queued, remove_stale_runs, spawn, supervise, Run, RunCgroup};

use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::hook_run::{run_rel, ChildSetup, HOOKS_PARENT};
use crate::kernel::{Op, Root};
use crate::policy::model::Hook;

/// Default cap on hook processes alive at once.
pub(crate) const DEFAULT_MAX_CONCURRENT: usize = 8;

/// Bytes of output logged per stream per run; the rest is discarded.
pub(crate) const OUTPUT_CAP: usize = 64 * 1024;

/// The `PATH` a hook gets.
pub(crate) const HOOK_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// After the process group was killed, how long to wait for the output pipes
/// to close (a process that left the group may still hold them) before
/// abandoning them.
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// How often a run whose program has exited checks whether other processes
/// are left in its group.
const GROUP_POLL: Duration = Duration::from_millis(100);

/// After a run's cgroup was killed (or its last process exited), how long
/// to wait for it to empty before removing it.
const CGROUP_EMPTY_WAIT: Duration = Duration::from_secs(1);

/// Placeholder name and environment variable of each context field.
const FIELDS: [(&str, &str); 8] = [
    ("rule", "CGWARDEN_RULE"),
    ("event", "CGWARDEN_EVENT"),
    ("metric", "CGWARDEN_METRIC"),
    ("value", "CGWARDEN_VALUE"),
    ("threshold", "CGWARDEN_THRESHOLD"),
    ("group", "CGWARDEN_GROUP"),
    ("product", "CGWARDEN_PRODUCT"),
    ("time", "CGWARDEN_TIME"),
];

/// Why a hook runs (the engine decides it): the rule fired or cleared.
pub(crate) use crate::engine::supervisor::HookEvent;

/// What a hook is told about the firing. Empty strings mean "unknown for
/// this firing" (e.g. `group` for a thermal rule).
#[derive(Clone, Debug)]
pub(crate) struct HookContext {
    pub(crate) rule: String,
    pub(crate) event: HookEvent,
    pub(crate) metric: String,
    pub(crate) value: String,
    pub(crate) threshold: String,
    /// Empty when the rule is not about one group.
    pub(crate) group: String,
    pub(crate) product: String,
    pub(crate) time: SystemTime,
    /// Part of a `fired`/`cleared` pair (a `while` hook); `then` hooks are
    /// not (they only ever fire). See the module docs, "Pairs".
    pub(crate) paired: bool,
}

impl HookContext {
    /// The values of [`FIELDS`], in that order.
    fn values(&self) -> [String; 8] {
        [
            self.rule.clone(),
            self.event.as_str().to_string(),
            self.metric.clone(),
            self.value.clone(),
            self.threshold.clone(),
            self.group.clone(),
            self.product.clone(),
            crate::show::rfc3339(self.time),
        ]
    }
}

/// Runner limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HookLimits {
    /// Hook processes alive at once, all hooks together (0 is taken as 1).
    pub(crate) max_concurrent: usize,
}

impl Default for HookLimits {
    fn default() -> Self {
        HookLimits {
            max_concurrent: DEFAULT_MAX_CONCURRENT,
        }
    }
}

/// The outcome of [`HookRunner::fire`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fired {
    /// The program runs as `pid` (also its process group id).
    Started { pid: u32 },
    /// Dropped: the hook started less than `min_interval` ago.
    RateLimited { next_allowed_in: Duration },
    /// Dropped: `max_concurrent` hook processes are alive.
    AtCapacity,
    /// A paired `cleared` while `max_concurrent` hook processes are alive:
    /// it starts as soon as a slot frees, before any later call.
    Queued,
    /// Dropped: a paired `cleared` whose `fired` did not start (dropped by
    /// `min_interval` or the cap, failed) — no `cleared` without `fired`.
    Unpaired,
    /// No hook of that name in the policy.
    Unknown,
    /// Not started: disabled hook (unknown user, …), spawn error (missing
    /// program, privilege drop refused), runner shut down.
    Failed(String),
}

/// Per-hook counters since the runner was built. Only the tests read them
/// for now; the control socket will expose them.
#[cfg(test)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct HookStats {
    /// Processes started.
    pub(crate) started: u64,
    /// Calls dropped by `min_interval`.
    pub(crate) rate_limited: u64,
    /// Calls dropped by `max_concurrent`.
    pub(crate) at_capacity: u64,
    /// `cleared` calls queued for a slot.
    pub(crate) queued: u64,
    /// `cleared` calls dropped because their `fired` did not start.
    pub(crate) unpaired: u64,
    /// Calls that could not start a process ([`Fired::Failed`]).
    pub(crate) failed: u64,
    /// Runs whose process group was killed at `timeout`.
    pub(crate) timed_out: u64,
    /// Runs whose program exited non-zero or by a signal (timeouts included).
    pub(crate) exited_nonzero: u64,
    /// Runs with at least one output stream over [`OUTPUT_CAP`].
    pub(crate) output_truncated: u64,
}

pub(crate) use crate::stats::HookCounters as Counters;

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    #[cfg(test)]
    fn snapshot(&self) -> HookStats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        HookStats {
            started: g(&self.started),
            rate_limited: g(&self.rate_limited),
            at_capacity: g(&self.at_capacity),
            queued: g(&self.queued),
            unpaired: g(&self.unpaired),
            failed: g(&self.failed),
            timed_out: g(&self.timed_out),
            exited_nonzero: g(&self.exited_nonzero),
            output_truncated: g(&self.output_truncated),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Creds {
    uid: u32,
    gid: u32,
}

struct Entry {
    hook: Hook,
    name: Arc<str>,
    creds: Option<Creds>,
    /// Why the hook cannot run (set at construction).
    disabled: Option<String>,
    last_start: Option<Instant>,
    counters: Arc<Counters>,
}

/// Runs the policy's hooks; see the module documentation.
pub(crate) struct HookRunner {
    hooks: BTreeMap<String, Entry>,
    max_concurrent: usize,
    slots: Arc<Semaphore>,
    tasks: JoinSet<()>,
    /// `true` tells every supervising task to kill its process group.
    kill: watch::Sender<bool>,
    closed: bool,
    /// Where runs get a cgroup of their own (kernel roots with the hooks
    /// parent in place); `None`: the daemon's cgroup, process-group kill.
    cgroups: Option<Arc<CgroupFs>>,
    /// Run number, for run cgroup names.
    seq: u64,
    /// (hook, rule) of paired `fired` runs that started and whose `cleared`
    /// has not come yet.
    open: BTreeSet<(String, String)>,
    /// Queued `cleared` runs waiting for a slot.
    waiting: Arc<AtomicUsize>,
}

impl HookRunner {
    /// Builds the runner. Users are looked up in `ROOT/etc/passwd` now; a
    /// hook whose user is unknown (or whose program is not an absolute path)
    /// is disabled with a logged error, and firing it reports
    /// [`Fired::Failed`].
    pub(crate) fn new(hooks: &[Hook], root: &Root, limits: HookLimits) -> HookRunner {
        let mut passwd: Option<Result<String, String>> = None;
        let mut map = BTreeMap::new();
        for h in hooks {
            let mut creds = None;
            let mut disabled = None;
            match h.exec.first() {
                None => disabled = Some("exec is empty".to_string()),
                Some(p) if !Path::new(p).is_absolute() => {
                    disabled = Some(format!("program {p:?} is not an absolute path"))
                }
                Some(_) => {}
            }
            if let (None, Some(user)) = (&disabled, &h.user) {
                let text = passwd.get_or_insert_with(|| {
                    root.read(Path::new(crate::kernel::accounts::PASSWD))
                        .map_err(|e| e.to_string())
                });
                match text {
                    Err(e) => disabled = Some(format!("cannot look up user {user:?}: {e}")),
                    Ok(t) => match crate::kernel::accounts::parse_user(t, user) {
                        Some(u) => {
                            creds = Some(Creds {
                                uid: u.uid,
                                gid: u.gid,
                            })
                        }
                        None => disabled = Some(format!("user {user:?} is not in /etc/passwd")),
                    },
                }
            }
            if let Some(why) = &disabled {
                tracing::error!(hook = %h.name, "hook disabled: {why}");
            }
            map.insert(
                h.name.clone(),
                Entry {
                    hook: h.clone(),
                    name: Arc::from(h.name.as_str()),
                    creds,
                    disabled,
                    last_start: None,
                    counters: Arc::default(),
                },
            );
        }
        let max_concurrent = limits.max_concurrent.max(1);
        HookRunner {
            hooks: map,
            max_concurrent,
            slots: Arc::new(Semaphore::new(max_concurrent)),
            tasks: JoinSet::new(),
            kill: watch::Sender::new(false),
            closed: false,
            cgroups: None,
            seq: 0,
            open: BTreeSet::new(),
            waiting: Arc::default(),
        }
    }

    /// A reload: the hooks of the new policy from now on. A hook whose
    /// definition did not change keeps its rate-limit clock and counters;
    /// runs already started (and queued `cleared` runs) go on untouched.
    pub(crate) fn reconfigure(&mut self, hooks: &[Hook], root: &Root) {
        let mut fresh = HookRunner::new(hooks, root, HookLimits::default());
        let fresh_hooks = std::mem::take(&mut fresh.hooks);
        let mut old = std::mem::take(&mut self.hooks);
        let mut map = BTreeMap::new();
        for (name, e) in fresh_hooks {
            let same = old
                .get(&name)
                .is_some_and(|o| format!("{:?}", o.hook) == format!("{:?}", e.hook));
            match old.remove(&name) {
                Some(o) if same => map.insert(name, o),
                _ => map.insert(name, e),
            };
        }
        self.hooks = map;
    }

    /// Runs each hook in a cgroup of its own under `cg`'s
    /// [`HOOKS_PARENT`] (created by convergence when the policy has hooks),
    /// after removing run cgroups a previous daemon left (killing what is
    /// still in them). Without kernel support ([`Op::HookCgroup`], a fake
    /// root) or without the parent, hooks stay in the daemon's cgroup,
    /// killed by process group.
    pub(crate) fn in_cgroups(mut self, cg: &CgroupFs) -> HookRunner {
        if self.hooks.is_empty() || !cg.root().supports(Op::HookCgroup) {
            return self;
        }
        if !cg.exists(HOOKS_PARENT) {
            tracing::error!(path = %cg.dir(HOOKS_PARENT).display(),
                "hook cgroup parent missing; hooks run in the daemon's cgroup, killed by process group");
            return self;
        }
        remove_stale_runs(cg);
        self.cgroups = Some(Arc::new(cg.clone()));
        self
    }

    /// Starts hook `name` for `ctx` unless rate-limited or at capacity;
    /// never waits for the hook. `now` is the caller's clock for the rate
    /// limit.
    pub(crate) fn fire(&mut self, name: &str, ctx: &HookContext, now: Instant) -> Fired {
        self.collect_finished();
        let Some(e) = self.hooks.get_mut(name) else {
            tracing::error!(hook = %name, rule = %ctx.rule, "no such hook");
            return Fired::Unknown;
        };
        let fail = |e: &Entry, msg: String| {
            bump(&e.counters.failed);
            tracing::error!(hook = %e.name, rule = %ctx.rule, "hook not run: {msg}");
            Fired::Failed(msg)
        };
        if let Some(why) = &e.disabled {
            let msg = format!("hook disabled: {why}");
            return fail(e, msg);
        }
        if self.closed {
            return fail(e, "hook runner is shut down".to_string());
        }
        let key = (name.to_string(), ctx.rule.clone());
        let closing = ctx.paired && ctx.event == HookEvent::Cleared;
        if closing && !self.open.remove(&key) {
            bump(&e.counters.unpaired);
            tracing::info!(hook = %e.name, rule = %ctx.rule,
                "`cleared` hook dropped: its `fired` run did not start");
            return Fired::Unpaired;
        }
        if !closing {
            if let (Some(min), Some(last)) = (e.hook.min_interval, e.last_start) {
                let since = now.saturating_duration_since(last);
                if since < min {
                    bump(&e.counters.rate_limited);
                    let next_allowed_in = min - since;
                    tracing::debug!(hook = %e.name, rule = %ctx.rule, ?next_allowed_in, "hook rate-limited, dropped");
                    return Fired::RateLimited { next_allowed_in };
                }
            }
        }
        if tokio::runtime::Handle::try_current().is_err() {
            return fail(e, "not inside a tokio runtime".to_string());
        }
        let permit = self.slots.clone().try_acquire_owned().ok();
        if permit.is_none() && !closing {
            bump(&e.counters.at_capacity);
            tracing::warn!(hook = %e.name, rule = %ctx.rule, max = self.max_concurrent,
                "too many hooks running, dropped");
            return Fired::AtCapacity;
        }
        let cgroup = match &self.cgroups {
            Some(cg) => {
                self.seq += 1;
                let rel = run_rel(&e.name, self.seq);
                match cg.mkdir(&rel) {
                    Ok(_) => Some(RunCgroup {
                        cg: cg.clone(),
                        rel,
                    }),
                    Err(err) => {
                        tracing::error!(hook = %e.name, rule = %ctx.rule,
                            "cannot create the run's cgroup: {err}; it runs in the daemon's cgroup");
                        None
                    }
                }
            }
            None => None,
        };
        let procs = cgroup.as_ref().map(RunCgroup::procs_host_path);
        let setup = match ChildSetup::new(procs.as_deref()) {
            Ok(s) => s,
            Err(err) => {
                if let Some(c) = &cgroup {
                    c.discard();
                }
                return fail(e, err.to_string());
            }
        };
        let cmd = command(&e.hook, e.creds, ctx, setup);
        let mut run = Run {
            name: e.name.clone(),
            rule: ctx.rule.clone(),
            event: ctx.event,
            program: e.hook.exec[0].clone(),
            user: e.hook.user.clone(),
            pid: 0,
            timeout: e.hook.timeout,
            counters: e.counters.clone(),
            cgroup,
        };
        let Some(permit) = permit else {
            // A paired `cleared` at capacity: waits for the next free slot.
            bump(&e.counters.queued);
            tracing::warn!(hook = %e.name, rule = %ctx.rule, max = self.max_concurrent,
                "too many hooks running; `cleared` run queued until one ends");
            self.waiting.fetch_add(1, Ordering::Relaxed);
            self.tasks.spawn(queued(
                cmd,
                run,
                self.slots.clone(),
                self.kill.subscribe(),
                self.waiting.clone(),
            ));
            return Fired::Queued;
        };
        let mut cmd = cmd;
        let child = match spawn(&mut cmd, &mut run) {
            Ok(c) => c,
            Err(msg) => {
                if let Some(c) = &run.cgroup {
                    c.discard();
                }
                return fail(e, msg);
            }
        };
        if !closing {
            e.last_start = Some(now);
        }
        if ctx.paired && ctx.event == HookEvent::Fired {
            self.open.insert(key);
        }
        let pid = run.pid;
        self.tasks
            .spawn(supervise(child, run, self.kill.subscribe(), permit));
        Fired::Started { pid }
    }

    /// Hook processes alive now (started and not yet reaped).
    pub(crate) fn running(&self) -> usize {
        self.max_concurrent - self.slots.available_permits()
    }

    /// Queued `cleared` runs not started yet.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Counters per hook name.
    #[cfg(test)]
    pub(crate) fn stats(&self) -> BTreeMap<String, HookStats> {
        self.hooks
            .iter()
            .map(|(n, e)| (n.clone(), e.counters.snapshot()))
            .collect()
    }

    /// Each hook's counters, for the metrics.
    pub(crate) fn counters(&self) -> Vec<(String, Arc<Counters>)> {
        self.hooks
            .iter()
            .map(|(n, e)| (n.clone(), e.counters.clone()))
            .collect()
    }

    /// Stops the runner: no new hooks start; running hooks get up to
    /// `grace` to finish, then their process groups are killed; returns once
    /// every hook process is reaped.
    pub(crate) async fn shutdown(&mut self, grace: Duration) {
        self.closed = true;
        let tasks = &mut self.tasks;
        let finished = tokio::time::timeout(grace, async {
            while let Some(r) = tasks.join_next().await {
                log_join(r);
            }
        })
        .await
        .is_ok();
        if !finished {
            tracing::warn!(
                running = self.running(),
                "killing hooks still running at shutdown"
            );
            self.kill.send_replace(true);
            while let Some(r) = self.tasks.join_next().await {
                log_join(r);
            }
        }
    }

    /// Drops the results of finished supervising tasks.
    fn collect_finished(&mut self) {
        while let Some(r) = self.tasks.try_join_next() {
            log_join(r);
        }
    }
}

impl Drop for HookRunner {
    fn drop(&mut self) {
        // Let running hooks finish under their own timeouts instead of
        // aborting their supervisors (which would leave grandchildren alive).
        self.tasks.detach_all();
    }
}

#[cfg(test)]
mod tests;
