//! Alert hooks: running the policy's `hooks:` programs when a rule fires or
//! clears (SPEC §2 `hooks:`, §3 "Hooks run without a shell…").
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
use std::io;
use std::path::Path;
use std::pin::pin;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::hook_run::{remove_runs, run_rel, ChildSetup, HOOKS_PARENT};
use crate::kernel::{Op, Root};
use crate::policy::model::Hook;

/// Default cap on hook processes alive at once.
pub const DEFAULT_MAX_CONCURRENT: usize = 8;

/// Bytes of output logged per stream per run; the rest is discarded.
pub const OUTPUT_CAP: usize = 64 * 1024;

/// The `PATH` a hook gets.
pub const HOOK_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

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
pub use crate::engine::supervisor::HookEvent;

/// What a hook is told about the firing. Empty strings mean "unknown for
/// this firing" (e.g. `group` for a thermal rule).
#[derive(Clone, Debug)]
pub struct HookContext {
    pub rule: String,
    pub event: HookEvent,
    pub metric: String,
    pub value: String,
    pub threshold: String,
    /// Empty when the rule is not about one group.
    pub group: String,
    pub product: String,
    pub time: SystemTime,
    /// Part of a `fired`/`cleared` pair (a `while` hook); `then` hooks are
    /// not (they only ever fire). See the module docs, "Pairs".
    pub paired: bool,
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
pub struct HookLimits {
    /// Hook processes alive at once, all hooks together (0 is taken as 1).
    pub max_concurrent: usize,
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
pub enum Fired {
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
pub struct HookStats {
    /// Processes started.
    pub started: u64,
    /// Calls dropped by `min_interval`.
    pub rate_limited: u64,
    /// Calls dropped by `max_concurrent`.
    pub at_capacity: u64,
    /// `cleared` calls queued for a slot.
    pub queued: u64,
    /// `cleared` calls dropped because their `fired` did not start.
    pub unpaired: u64,
    /// Calls that could not start a process ([`Fired::Failed`]).
    pub failed: u64,
    /// Runs whose process group was killed at `timeout`.
    pub timed_out: u64,
    /// Runs whose program exited non-zero or by a signal (timeouts included).
    pub exited_nonzero: u64,
    /// Runs with at least one output stream over [`OUTPUT_CAP`].
    pub output_truncated: u64,
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
pub struct HookRunner {
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
    pub fn new(hooks: &[Hook], root: &Root, limits: HookLimits) -> HookRunner {
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
    pub fn reconfigure(&mut self, hooks: &[Hook], root: &Root) {
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
    pub fn in_cgroups(mut self, cg: &CgroupFs) -> HookRunner {
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
    pub fn fire(&mut self, name: &str, ctx: &HookContext, now: Instant) -> Fired {
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
    pub fn running(&self) -> usize {
        self.max_concurrent - self.slots.available_permits()
    }

    /// Queued `cleared` runs not started yet.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Counters per hook name.
    #[cfg(test)]
    pub fn stats(&self) -> BTreeMap<String, HookStats> {
        self.hooks
            .iter()
            .map(|(n, e)| (n.clone(), e.counters.snapshot()))
            .collect()
    }

    /// Each hook's counters, for the metrics (issue 13).
    pub(crate) fn counters(&self) -> Vec<(String, Arc<Counters>)> {
        self.hooks
            .iter()
            .map(|(n, e)| (n.clone(), e.counters.clone()))
            .collect()
    }

    /// Stops the runner: no new hooks start; running hooks get up to
    /// `grace` to finish, then their process groups are killed; returns once
    /// every hook process is reaped.
    pub async fn shutdown(&mut self, grace: Duration) {
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

fn log_join(r: Result<(), tokio::task::JoinError>) {
    if let Err(e) = r {
        if e.is_panic() {
            tracing::error!("hook supervisor panicked: {e}");
        }
    }
}

/// The error text without Rust's " (os error N)" suffix.
fn errno_text(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => Errno::from_raw(n).desc().to_string(),
        None => e.to_string(),
    }
}

/// Replaces the known placeholders in `arg` (one pass, left to right).
fn substitute(arg: &str, values: &[String; 8]) -> String {
    let mut out = String::with_capacity(arg.len());
    let mut rest = arg;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 1..];
        let hit = FIELDS
            .iter()
            .zip(values)
            .find(|((key, _), _)| tail.starts_with(key) && tail[key.len()..].starts_with('}'));
        match hit {
            Some(((key, _), v)) => {
                out.push_str(v);
                rest = &tail[key.len() + 1..];
            }
            None => {
                out.push('{');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

fn command(hook: &Hook, creds: Option<Creds>, ctx: &HookContext, setup: ChildSetup) -> Command {
    let values = ctx.values();
    let mut cmd = Command::new(&hook.exec[0]);
    cmd.args(hook.exec[1..].iter().map(|a| substitute(a, &values)))
        .env_clear()
        .envs(FIELDS.iter().zip(&values).map(|((_, var), v)| (*var, v)))
        .env("PATH", HOOK_PATH)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    crate::kernel::hook_run::confine(&mut cmd, setup, creds.map(|c| (c.uid, c.gid)));
    cmd
}

/// Spawns `cmd` for `run` (setting its pid); the error text names the
/// program.
fn spawn(cmd: &mut Command, run: &mut Run) -> Result<Child, String> {
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(err) => {
            let mut msg = format!("{}: {}", run.program, errno_text(&err));
            if let (Some(user), Some(libc::EPERM)) = (&run.user, err.raw_os_error()) {
                msg.push_str(&format!(" (running as user {user:?} needs root)"));
            }
            return Err(msg);
        }
    };
    let Some(pid) = child.id() else {
        return Err("spawned process has no pid".to_string());
    };
    run.pid = pid;
    bump(&run.counters.started);
    tracing::info!(hook = %run.name, rule = %run.rule, event = run.event.as_str(), pid,
        cgroup = run.cgroup.as_ref().map(|c| c.rel.as_str()).unwrap_or(""), "hook started");
    Ok(child)
}

/// A queued `cleared` run: waits for a slot (or the shutdown kill, which
/// drops it), then runs like any other.
async fn queued(
    mut cmd: Command,
    mut run: Run,
    slots: Arc<Semaphore>,
    mut kill: watch::Receiver<bool>,
    waiting: Arc<AtomicUsize>,
) {
    let permit = {
        let killed = async {
            if kill.wait_for(|k| *k).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            p = slots.acquire_owned() => p.ok(),
            _ = killed => None,
        }
    };
    waiting.fetch_sub(1, Ordering::Relaxed);
    let Some(permit) = permit else {
        tracing::warn!(hook = %run.name, rule = %run.rule,
            "shutting down: queued `cleared` hook not run");
        if let Some(c) = &run.cgroup {
            c.discard();
        }
        return;
    };
    match spawn(&mut cmd, &mut run) {
        Ok(child) => supervise(child, run, kill, permit).await,
        Err(msg) => {
            bump(&run.counters.failed);
            tracing::error!(hook = %run.name, rule = %run.rule, "hook not run: {msg}");
            if let Some(c) = &run.cgroup {
                c.discard();
            }
        }
    }
}

/// The cgroup of one run.
struct RunCgroup {
    cg: Arc<CgroupFs>,
    /// `cgwarden.hooks/<hook>-<seq>`, relative to the cgroup root.
    rel: String,
}

impl RunCgroup {
    fn procs_host_path(&self) -> std::path::PathBuf {
        self.cg
            .root()
            .host_path(&self.cg.file(&self.rel, "cgroup.procs"))
    }

    /// Removes the cgroup of a run that never started.
    fn discard(&self) {
        if let Err(e) = self.cg.rmdir(&self.rel) {
            tracing::error!("cannot remove hook run cgroup: {e}");
        }
    }

    /// Waits (bounded) until the cgroup is empty, then removes it.
    async fn remove(&self, run: &Run) {
        let t0 = tokio::time::Instant::now();
        loop {
            match self.cg.populated(&self.rel) {
                Ok(false) => break,
                Err(e) if e.is_not_found() => return,
                Err(e) => {
                    tracing::error!(hook = %run.name, "hook run cgroup: {e}");
                    break;
                }
                Ok(true) if t0.elapsed() < CGROUP_EMPTY_WAIT => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Ok(true) => {
                    tracing::error!(hook = %run.name, rule = %run.rule,
                        path = %self.cg.dir(&self.rel).display(),
                        "hook run cgroup still populated {CGROUP_EMPTY_WAIT:?} after its run ended; killing it again, the next start removes it");
                    let _ = self.cg.kill(&self.rel);
                    return;
                }
            }
        }
        match self.cg.rmdir(&self.rel) {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => tracing::error!(hook = %run.name, "cannot remove hook run cgroup: {e}"),
        }
    }
}

/// Kills and removes the run cgroups a daemon that crashed or was killed
/// left under [`HOOKS_PARENT`].
fn remove_stale_runs(cg: &CgroupFs) {
    for r in remove_runs(cg, CGROUP_EMPTY_WAIT) {
        match r {
            Ok(path) => tracing::warn!(path = %path.display(),
                "removed a hook run cgroup left by a previous daemon"),
            Err(e) => tracing::error!("stale hook run: {e}"),
        }
    }
}

/// One running hook process, as its supervisor sees it.
struct Run {
    name: Arc<str>,
    rule: String,
    event: HookEvent,
    /// `exec[0]` and `user`, for spawn errors.
    program: String,
    user: Option<String>,
    pid: u32,
    timeout: Duration,
    counters: Arc<Counters>,
    /// The run's own cgroup, when it has one.
    cgroup: Option<RunCgroup>,
}

impl Run {
    fn pgid(&self) -> Pid {
        Pid::from_raw(self.pid as i32)
    }

    /// SIGKILL to the run's process group. Only called while the group is
    /// known to exist: the leader is not reaped yet, or a probe just found
    /// members (a live group pins its id, so it cannot be reused).
    fn kill_group(&self) {
        if let Some(c) = &self.cgroup {
            if let Err(e) = c.cg.kill(&c.rel) {
                tracing::error!(hook = %self.name, rule = %self.rule, pid = self.pid,
                    "cannot kill hook cgroup: {e}");
            }
        }
        match killpg(self.pgid(), Signal::SIGKILL) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => tracing::error!(hook = %self.name, rule = %self.rule, pid = self.pid,
                "cannot kill hook process group: {e}"),
        }
    }

    /// True while some process (possibly a zombie) is in the process
    /// group, or the run's cgroup is populated.
    fn group_alive(&self) -> bool {
        if let Some(c) = &self.cgroup {
            if c.cg.populated(&c.rel).unwrap_or(false) {
                return true;
            }
        }
        killpg(self.pgid(), None).is_ok()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Drained {
    /// Bytes read from the pipe.
    read: u64,
    /// Bytes logged (≤ OUTPUT_CAP).
    logged: usize,
    truncated: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Killed {
    Timeout,
    Shutdown,
}

/// Owns one hook process until it is reaped; holds its concurrency slot.
async fn supervise(
    mut child: Child,
    run: Run,
    mut kill: watch::Receiver<bool>,
    _slot: OwnedSemaphorePermit,
) {
    let start = tokio::time::Instant::now();
    let deadline = start + run.timeout;
    let mut out = pin!(drain_opt(child.stdout.take(), Stream::Stdout, &run));
    let mut err = pin!(drain_opt(child.stderr.take(), Stream::Stderr, &run));
    let timer = tokio::time::sleep_until(deadline);
    let mut timer = pin!(timer);
    let mut status: Option<io::Result<ExitStatus>> = None;
    let mut out_res: Option<Drained> = None;
    let mut err_res: Option<Drained> = None;
    let mut killed: Option<Killed> = None;
    let mut pipes_abandoned = false;
    let mut kill_gone = false;
    let mut probing = false;

    loop {
        let pipes_done = pipes_abandoned || (out_res.is_some() && err_res.is_some());
        if status.is_some() && pipes_done {
            if killed.is_some() {
                break;
            }
            // Leftovers in the group get the rest of the timeout: probe the
            // group now and then every GROUP_POLL.
            if !probing {
                if !run.group_alive() {
                    break;
                }
                probing = true;
            }
        }
        tokio::select! {
            s = child.wait(), if status.is_none() => status = Some(s),
            d = &mut out, if out_res.is_none() && !pipes_abandoned => out_res = Some(d),
            d = &mut err, if err_res.is_none() && !pipes_abandoned => err_res = Some(d),
            _ = &mut timer, if !(killed.is_some() && pipes_abandoned) => {
                if killed.is_none() {
                    killed = Some(Killed::Timeout);
                    bump(&run.counters.timed_out);
                    tracing::warn!(hook = %run.name, rule = %run.rule, pid = run.pid,
                        timeout = ?run.timeout, "hook timed out, killing its process group");
                    run.kill_group();
                    timer.as_mut().reset(tokio::time::Instant::now() + PIPE_GRACE);
                } else {
                    pipes_abandoned = true;
                    tracing::warn!(hook = %run.name, rule = %run.rule, pid = run.pid,
                        "hook output pipes still open after kill, abandoning them");
                }
            }
            r = kill.wait_for(|k| *k), if killed.is_none() && !kill_gone => match r {
                Ok(_) => {
                    killed = Some(Killed::Shutdown);
                    tracing::warn!(hook = %run.name, rule = %run.rule, pid = run.pid,
                        "shutting down, killing hook process group");
                    run.kill_group();
                    timer.as_mut().reset(tokio::time::Instant::now() + PIPE_GRACE);
                }
                Err(_) => kill_gone = true,
            },
            _ = tokio::time::sleep(GROUP_POLL), if probing && killed.is_none() => {
                if !run.group_alive() {
                    break;
                }
            }
        }
    }

    let took = start.elapsed();
    run.counters.duration.record(took);
    if let Some(c) = &run.cgroup {
        c.remove(&run).await;
    }
    for d in [out_res, err_res].into_iter().flatten() {
        if d.truncated {
            bump(&run.counters.output_truncated);
            break;
        }
    }
    match status {
        Some(Ok(s)) if s.success() && killed.is_none() => {
            bump(&run.counters.succeeded);
            tracing::info!(hook = %run.name, rule = %run.rule, pid = run.pid, status = %s,
                duration = ?took, "hook exited");
        }
        Some(Ok(s)) => {
            if !s.success() {
                bump(&run.counters.exited_nonzero);
            }
            tracing::warn!(hook = %run.name, rule = %run.rule, pid = run.pid, status = %s,
                duration = ?took, killed = ?killed, "hook exited");
        }
        Some(Err(e)) => {
            tracing::error!(hook = %run.name, rule = %run.rule, pid = run.pid,
                "waiting for hook: {e}");
        }
        None => {} // the loop only ends once the program is reaped
    }
}

async fn drain_opt<R: AsyncRead + Unpin>(r: Option<R>, stream: Stream, run: &Run) -> Drained {
    match r {
        Some(r) => drain(r, stream, run).await,
        None => Drained::default(),
    }
}

/// Logs `r` line by line up to [`OUTPUT_CAP`] bytes, then reads to EOF
/// discarding the rest.
async fn drain<R: AsyncRead + Unpin>(mut r: R, stream: Stream, run: &Run) -> Drained {
    let mut buf = vec![0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    let mut d = Drained::default();
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::debug!(hook = %run.name, stream = stream.as_str(),
                    "reading hook output: {e}");
                break;
            }
        };
        d.read += n as u64;
        if d.truncated {
            continue;
        }
        let take = n.min(OUTPUT_CAP - d.logged);
        d.logged += take;
        for &b in &buf[..take] {
            if b == b'\n' {
                emit(&mut line, stream, run);
            } else {
                line.push(b);
            }
        }
        if take < n {
            d.truncated = true;
            emit(&mut line, stream, run);
            tracing::warn!(hook = %run.name, rule = %run.rule, pid = run.pid,
                stream = stream.as_str(),
                "hook output truncated after {OUTPUT_CAP} bytes, discarding the rest");
        }
    }
    if !line.is_empty() {
        emit(&mut line, stream, run);
    }
    d
}

/// Logs one line (without its newline) and clears the buffer.
fn emit(line: &mut Vec<u8>, stream: Stream, run: &Run) {
    let bytes = line.strip_suffix(b"\r").unwrap_or(line);
    let text = String::from_utf8_lossy(bytes);
    match stream {
        Stream::Stdout => tracing::info!(hook = %run.name, rule = %run.rule, pid = run.pid,
            stream = "stdout", "{text}"),
        Stream::Stderr => tracing::warn!(hook = %run.name, rule = %run.rule, pid = run.pid,
            stream = "stderr", "{text}"),
    }
    line.clear();
}

#[cfg(test)]
mod tests;
