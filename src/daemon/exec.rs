//! Real-time placement: exec events from the process-events
//! connector drive placement and `running()` presence.
//!
//! One thread (`cgw-exec`) owns the connector socket. It waits in poll(2)
//! on the socket and on an eventfd (scan requests, shutdown), drains the
//! socket (up to [`DRAIN_MAX`] events: everything pending), and for each
//! batch: EXEC / COMM (of a main thread) → update presence and queue the
//! pid; EXIT (of a process) → update presence; ENOBUFS or a sequence gap →
//! count it and run a full /proc scan. The queued pids are placed together
//! ([`Placer::place_exec_batch`]: identify all, then the moves back-to-back), so
//! an exec flood costs one pass per drain, not a round trip per event. The
//! thread runs at `settings.daemon.sched` ([`crate::daemon::priority`]) so
//! the flood it places cannot starve it. It sends [`Wake::Presence`] to the
//! event loop only when some `running()` answer changed. Placing in the
//! thread that reads the events saves a thread hand-off (a wake-up) per
//! exec; a migration write that waits 5–20 ms for the kernel stalls only
//! this thread, never rule evaluation, and the socket's 4 MiB buffer holds
//! what arrives meanwhile. The same thread runs the full scans
//! ([`Placer::place_batch`] is shared): at startup, every
//! `settings.rescan`, after a loss, and every tick when the connector
//! cannot be opened or the root is fake.
//!
//! [`Counters`] keep placements per group, misses found by rescans,
//! overruns, gaps and latency histograms for `status`/metrics.
//!
//! Placement moves a process only when a placement rule matches it, wherever
//! it is — including groups cgwarden does not manage (a systemd service's
//! slice): the match is the explicit request. Descendants of a matched
//! process are moved along only when they are still in the group the parent
//! left (the fork-before-move race) and match no other rule.
//!
//! Except a process whose cgroup belongs to a container runtime or another
//! delegated manager ([`crate::engine::placement::foreign`]): it is left
//! alone whatever rule matches it. Each is logged once per process and rule
//! and listed by `status` ([`Shared::left_alone`]) until it exits or stops
//! matching.

use crate::converge::placement::KernelOps;
use crate::daemon::tasks::Tasks;
use crate::daemon::watch::Wake;
use crate::engine::placement::{FactCache, Kept, Placer};
use crate::engine::presence::Presence;
use crate::kernel::proc_events::{self, Connector, ProcEvent};
use crate::kernel::wait::EventFd;
use crate::kernel::{procfs, Root};
use crate::policy::model::Policy;
pub(crate) use crate::stats::ExecCounters as Counters;
use std::collections::{BTreeMap, HashSet};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::thread::JoinHandle as ThreadHandle;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// State shared by the exec thread, the event loop and the sampler.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) presence: Mutex<Presence>,
    /// True while exec events drive presence and placement; false: scan each tick.
    pub(crate) events_live: AtomicBool,
    pub(crate) counters: Arc<Counters>,
    /// Critical exits, kills, freezes.
    pub(crate) last_resort: Arc<crate::stats::LastResortStats>,
    /// Processes a placement matched and left alone, by pid (what the exec
    /// thread's [`Worker::kept`] holds, copied when it changes).
    left_alone: Mutex<Vec<(i32, Kept)>>,
}

impl Shared {
    pub(crate) fn new(presence: Presence) -> Arc<Shared> {
        Arc::new(Shared {
            presence: Mutex::new(presence),
            events_live: AtomicBool::new(false),
            counters: Default::default(),
            last_resort: Default::default(),
            left_alone: Mutex::new(Vec::new()),
        })
    }

    /// The processes placement left in another manager's cgroup, by pid.
    pub(crate) fn left_alone(&self) -> Vec<(i32, Kept)> {
        self.left_alone
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn presence(&self) -> std::sync::MutexGuard<'_, Presence> {
        self.presence.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the metrics read: the counters and the last-resort actions'.
    pub(crate) fn stats(&self) -> crate::stats::ExecStats {
        crate::stats::ExecStats {
            counters: self.counters.clone(),
            last_resort: self.last_resort.clone(),
        }
    }

    pub(crate) fn events_live(&self) -> bool {
        self.events_live.load(Ordering::Relaxed)
    }
}

/// Exit status when the exec thread dies of a bug (EX_SOFTWARE): not one of
/// the SPEC's statuses that systemd/cgwarden.service keeps from restarting.
const EXIT_INTERNAL: i32 = 70;

/// Datagrams (one event each) read from the connector per round: under a
/// flood the exec thread identifies and moves this many processes at once.
const DRAIN_MAX: usize = 1024;

/// Processes identified before their moves are made: bounds the wait of
/// the first in a batch for the last one's /proc reads.
const BATCH_MAX: usize = 256;

/// Processes left alone that `status` lists; more are logged, not listed.
const KEPT_MAX: usize = 1024;

/// Why a full scan runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScanKind {
    /// Startup reconcile (after the connector subscribed).
    Startup,
    /// The `settings.rescan` safety net.
    Rescan,
    /// The socket lost events.
    Loss,
    /// No connector: the scan is the detection (every tick).
    Tick,
}

enum Job {
    Scan(ScanKind),
    /// A reload: new placement rules (and whether presence is kept).
    Swap(Box<Swap>),
}

/// What a reload hands the exec thread: swapped in between two events, so
/// every process is placed by one whole rule set, old or new.
struct Swap {
    placer: Placer,
    ops: KernelOps,
    tracking: bool,
    tasks: Tasks,
}

/// The exec thread's handle: queues scans and wakes the thread through an
/// eventfd it polls beside the socket.
pub(crate) struct Placement {
    tx: std_mpsc::Sender<Job>,
    wake_fd: Arc<EventFd>,
    scan_pending: Arc<AtomicBool>,
    /// Detached: dropping the handle ends the thread after its current
    /// write; shutdown never waits on a slow migration.
    _thread: Option<ThreadHandle<()>>,
}

impl Placement {
    /// Queues a full scan; scans already queued and not started absorb it.
    pub(crate) fn scan(&self, kind: ScanKind) {
        if !self.scan_pending.swap(true, Ordering::AcqRel) {
            let _ = self.tx.send(Job::Scan(kind));
            self.wake_fd.poke();
        }
    }
}

impl Drop for Placement {
    fn drop(&mut self) {
        // The thread sees the queue closed on its next look; make that now.
        let (tx, _) = std_mpsc::channel();
        drop(std::mem::replace(&mut self.tx, tx));
        self.wake_fd.poke();
    }
}

/// What the exec thread owns.
struct Worker {
    placer: Placer,
    ops: KernelOps,
    root: Root,
    shared: Arc<Shared>,
    wake: mpsc::Sender<Wake>,
    /// False under `--dry-run`: placement runs with `ops` logging each
    /// move and sched change it would make; nothing is counted.
    act: bool,
    /// Which rule each seen process falls under: a
    /// rescan or tick re-reads only processes that exec'd or renamed.
    cache: FactCache,
    scan_pending: Arc<AtomicBool>,
    /// Whether `running()` rules need the pid → comm table.
    tracking: bool,
    /// Refusals already logged (they name pid, comm, group and reason).
    refusals: HashSet<String>,
    /// Processes left alone (their cgroup is a container's or a delegated
    /// manager's), by pid: each is logged when it enters or its rule or
    /// cgroup changes, and leaves when it exits or stops being one.
    kept: BTreeMap<i32, Kept>,
    /// Per-process attributes, threads.
    tasks: Tasks,
}

impl Worker {
    /// The exec thread: waits on the connector socket and the eventfd with
    /// poll(2); places each exec'd pid as its event is read (no hand-off to
    /// another thread: one wake-up per burst), keeps presence, runs scans.
    /// Without a connector it only runs the scans it is asked for.
    fn run(
        mut self,
        rx: std_mpsc::Receiver<Job>,
        wake_fd: Arc<EventFd>,
        mut conn: Option<Connector>,
    ) {
        let mut events = Vec::with_capacity(512);
        let mut pids: Vec<i32> = Vec::new();
        let mut seen = HashSet::new();
        let mut more = false;
        loop {
            if !more {
                let mut fds = [
                    libc::pollfd {
                        fd: wake_fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                    libc::pollfd {
                        fd: conn.as_ref().map_or(-1, |c| c.as_raw_fd()),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ];
                if let Err(e) = crate::kernel::wait::poll(&mut fds, -1) {
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        tracing::error!("exec thread: poll: {e}");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    continue;
                }
                if fds[0].revents != 0 {
                    wake_fd.clear();
                }
            }
            let mut scan = None;
            loop {
                match rx.try_recv() {
                    Ok(Job::Swap(sw)) => {
                        let Swap {
                            placer,
                            ops,
                            tracking,
                            tasks,
                        } = *sw;
                        self.tasks = tasks;
                        self.placer = placer;
                        self.ops = ops;
                        self.tracking = tracking;
                        if let Some(c) = conn.as_mut() {
                            let want = needs_exits(tracking, &self.tasks);
                            if want != c.exits() {
                                // On failure the rescan below and each
                                // `settings.rescan` still find what the exits
                                // would have told; the line says what holds.
                                let failed = c.set_exits(want).err();
                                tracing::info!(
                                    "process-events connector: exits delivered: {}{}",
                                    c.exits(),
                                    failed
                                        .map(|e| format!(" ({want} refused: {e})"))
                                        .unwrap_or_default()
                                );
                            }
                        }
                        // Rule indexes changed: every process is matched again.
                        self.cache = FactCache::default();
                        self.refusals.clear();
                        self.kept.clear();
                        self.publish_kept();
                        scan = Some(ScanKind::Rescan);
                    }
                    Ok(Job::Scan(k)) => {
                        // The most telling reason wins for counting misses.
                        if scan.is_none() || k == ScanKind::Loss || k == ScanKind::Rescan {
                            scan = Some(k);
                        }
                    }
                    Err(std_mpsc::TryRecvError::Empty) => break,
                    Err(std_mpsc::TryRecvError::Disconnected) => return,
                }
            }
            more = false;
            if let Some(c) = conn.as_mut() {
                events.clear();
                // Everything pending now (up to a bound, so presence and
                // scans are not starved by an endless flood).
                match c.drain(&mut events, DRAIN_MAX) {
                    Ok(drained) => more = !drained,
                    Err(e) => {
                        fail(
                            &self.shared,
                            &self.wake,
                            format!("process-events connector: recv: {e}"),
                        );
                        conn = None;
                    }
                }
                if self.handle(&events, &mut pids, &mut seen) {
                    scan = Some(ScanKind::Loss);
                }
            }
            if let Some(kind) = scan {
                self.scan_pending.store(false, Ordering::Release);
                // A cache trusts known pids only while exits reach it.
                self.full_scan(kind, conn.as_ref().is_some_and(Connector::exits));
            }
        }
    }

    /// One batch of events: places each exec'd/renamed process once, keeps
    /// presence. True when events were lost (a full scan must follow).
    fn handle(
        &mut self,
        events: &[ProcEvent],
        pids: &mut Vec<i32>,
        seen: &mut HashSet<i32>,
    ) -> bool {
        let mut presence_changed = false;
        let mut loss = false;
        pids.clear();
        seen.clear();
        for ev in events {
            self.tasks.event(ev);
            match *ev {
                // An exec, or a main thread's rename (COMM), may now match a rule.
                ProcEvent::Exec { tgid, .. } => {
                    self.note_exec(tgid, pids, seen, &mut presence_changed)
                }
                ProcEvent::Comm { pid, tgid } if pid == tgid => {
                    self.note_exec(tgid, pids, seen, &mut presence_changed)
                }
                ProcEvent::Exit { pid, tgid } if pid == tgid => {
                    // Its pid may be reused: what the cache knows is gone.
                    self.cache.forget(tgid);
                    if self.kept.remove(&tgid).is_some() {
                        self.publish_kept();
                    }
                    if self.tracking {
                        presence_changed |= self.shared.presence().exit(tgid);
                    }
                }
                ProcEvent::Overrun => {
                    self.shared
                        .counters
                        .overruns
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::warn!("process-events socket overran (ENOBUFS)");
                    loss = true;
                }
                ProcEvent::Gap { cpu, missed } => {
                    self.shared.counters.gaps.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(cpu, missed, "process events lost (sequence gap)");
                    loss = true;
                }
                _ => {}
            }
        }
        if presence_changed {
            let _ = self.wake.try_send(Wake::Presence);
        }
        // The whole batch at once: identify all, then the moves back-to-back.
        // One clock read before (the events were read just now: parsing
        // them took microseconds) and one after each chunk, which is the
        // next one's start; none for a batch with nothing to place (no vDSO
        // clock under emulation: each read is a system call).
        if let Some(read_at) = (!pids.is_empty()).then(Instant::now) {
            let mut start = Duration::ZERO;
            for chunk in pids.chunks(BATCH_MAX) {
                let results = self
                    .placer
                    .place_exec_batch(chunk, &mut self.ops, &mut self.cache);
                let now = read_at.elapsed();
                let took = now.saturating_sub(start);
                start = now;
                let n = results.len().max(1) as u32;
                for (pid, r) in results {
                    self.tasks.placed(pid, &r);
                    if self.record(pid, r, None) {
                        let c = &self.shared.counters;
                        // Per process: its share of the batch's time.
                        c.placing.record(took / n);
                        c.to_placed.record(now);
                    }
                }
            }
        }
        if loss {
            tracing::warn!(
                "process events were lost (socket overrun or sequence gap); rescanning /proc"
            );
        }
        loss
    }

    /// Queues `tgid` for this batch's placement (once) and updates presence.
    fn note_exec(
        &mut self,
        tgid: i32,
        pids: &mut Vec<i32>,
        seen: &mut HashSet<i32>,
        presence_changed: &mut bool,
    ) {
        self.shared.counters.events.fetch_add(1, Ordering::Relaxed);
        // New program or new name: what was matched before no longer holds.
        self.cache.forget(tgid);
        if seen.insert(tgid) {
            pids.push(tgid);
        }
        if self.tracking {
            *presence_changed |= note_comm(&self.shared, &self.root, tgid);
        }
    }

    /// Counts and logs what placing `pid` did; true when it moved something.
    fn record(
        &mut self,
        pid: i32,
        r: crate::engine::placement::Placed,
        scan: Option<ScanKind>,
    ) -> bool {
        self.note_kept(pid, r.kept.as_ref());
        let c = &self.shared.counters;
        c.gone.fetch_add(u64::from(r.gone), Ordering::Relaxed);
        for e in &r.errors {
            c.refused.fetch_add(1, Ordering::Relaxed);
            // Each rescan tries again; the same refusal is said once.
            if self.refusals.len() >= 4096 {
                self.refusals.clear();
            }
            if self.refusals.insert(e.clone()) {
                tracing::warn!("placement refused: {e}");
            } else {
                tracing::debug!("placement refused again: {e}");
            }
        }
        let Some(group) = &r.group else {
            return false;
        };
        if !self.act {
            // Dry run: `ops` logged what it would do; nothing was placed.
            return false;
        }
        let n = u64::from(r.moved) + r.descendants.len() as u64;
        c.placed_in(group, n);
        if n > 0 {
            match scan {
                // A process younger than its exec event's usual delay was
                // not missed: the scan only got there first.
                Some(ScanKind::Rescan) if self.events_may_be_pending(pid) => {
                    tracing::debug!(pid, group = %group, "rescan placed a process whose exec event was still on its way");
                }
                Some(ScanKind::Rescan | ScanKind::Loss) => {
                    c.misses.fetch_add(n, Ordering::Relaxed);
                    tracing::info!(pid, group = %group, descendants = ?r.descendants, "rescan placed a process the exec events missed");
                }
                Some(_) => {
                    tracing::info!(pid, group = %group, descendants = ?r.descendants, "placed (scan)")
                }
                None => {
                    tracing::debug!(pid, group = %group, descendants = ?r.descendants, sched = r.sched, "placed on exec")
                }
            }
        }
        r.moved || !r.descendants.is_empty()
    }

    /// Keeps [`Worker::kept`] up to date with what placing `pid` found:
    /// logs a process left alone once per rule and cgroup.
    fn note_kept(&mut self, pid: i32, kept: Option<&Kept>) {
        let Some(k) = kept else {
            if !self.kept.is_empty() && self.kept.remove(&pid).is_some() {
                self.publish_kept();
            }
            return;
        };
        let said = self
            .kept
            .get(&pid)
            .is_some_and(|e| e.rule == k.rule && e.cgroup == k.cgroup && e.comm == k.comm);
        if said {
            return;
        }
        if self.kept.len() >= KEPT_MAX && !self.kept.contains_key(&pid) {
            // Past the bound, each rescan would say it again.
            tracing::debug!(
                "placement left a process alone (not listed): {}",
                k.describe(pid)
            );
            return;
        }
        tracing::info!("placement left a process alone: {}", k.describe(pid));
        self.kept.insert(pid, k.clone());
        if self.kept.len() == KEPT_MAX {
            tracing::warn!(
                "{KEPT_MAX} processes are left alone in other managers' cgroups: status lists \
                 these, more are logged at debug level only"
            );
        }
        self.publish_kept();
    }

    fn publish_kept(&self) {
        let now: Vec<(i32, Kept)> = self.kept.iter().map(|(p, k)| (*p, k.clone())).collect();
        *self
            .shared
            .left_alone
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = now;
    }

    /// Whether `pid` started so recently that its exec event may not have
    /// been handled yet (2 s covers a loaded or emulated machine).
    fn events_may_be_pending(&self, pid: i32) -> bool {
        self.shared.events_live()
            && procfs::age(&self.root, pid).is_some_and(|a| a < Duration::from_secs(2))
    }

    fn full_scan(&mut self, kind: ScanKind, exits: bool) {
        self.shared.counters.scans.fetch_add(1, Ordering::Relaxed);
        let Ok(pids) = procfs::pids(&self.root) else {
            return;
        };
        let mut comms = Vec::new();
        // Lost events may have been execs (an exec keeps pid, start time
        // and often the comm); without events the `settings.rescan` scan is
        // the only time an exec is noticed. Otherwise processes gone since
        // the last scan leave the cache.
        if kind == ScanKind::Loss || (kind == ScanKind::Rescan && !self.shared.events_live()) {
            self.cache = FactCache::default();
        } else {
            let live: HashSet<i32> = pids.iter().copied().collect();
            self.cache.retain(|p| live.contains(&p));
        }
        self.cache.track_exits(exits);
        if !self.placer.is_empty() {
            // Where placed processes are comes from the groups' cgroup.procs.
            self.ops.begin_scan();
            // In batches too: a scan after a loss under a flood has
            // thousands to move.
            for chunk in pids.chunks(BATCH_MAX) {
                let results = self
                    .placer
                    .place_batch(chunk, &mut self.ops, &mut self.cache);
                for (pid, r) in results {
                    self.tasks.placed(pid, &r);
                    self.record(pid, r, Some(kind));
                }
            }
            self.ops.end_scan();
        }
        self.tasks.scanned(&pids);
        if !self.kept.is_empty() {
            let live: HashSet<i32> = pids.iter().copied().collect();
            let before = self.kept.len();
            self.kept.retain(|p, _| live.contains(p));
            if self.kept.len() != before {
                self.publish_kept();
            }
        }
        for &pid in &pids {
            if self.tracking {
                if let Ok(Some(c)) = procfs::comm(&self.root, pid) {
                    comms.push((pid, c));
                }
            }
        }
        if self.tracking {
            let changed = reconcile(&self.shared, &self.root, comms);
            if changed {
                let _ = self.wake.try_send(Wake::Presence);
            }
        }
    }
}

/// Brings presence in line with a scan without undoing events that raced it:
/// seen processes are (re)recorded, tracked ones not seen are dropped only
/// if their /proc entry is gone now.
fn reconcile(shared: &Shared, root: &Root, comms: Vec<(i32, String)>) -> bool {
    let seen: HashSet<i32> = comms.iter().map(|(p, _)| *p).collect();
    let mut pr = shared.presence();
    let mut changed = false;
    for (pid, c) in comms {
        changed |= pr.update(pid, &c);
    }
    for pid in pr.pids() {
        if !seen.contains(&pid) && !crate::kernel::procfs::alive(root, pid) {
            changed |= pr.exit(pid);
        }
    }
    changed
}

/// Fills presence from a comm scan (synchronously; a few ms).
pub(crate) fn scan_presence(shared: &Shared, root: &Root) -> bool {
    let Ok(pids) = procfs::pids(root) else {
        return false;
    };
    let comms: Vec<(i32, String)> = pids
        .into_iter()
        .filter_map(|p| procfs::comm(root, p).ok().flatten().map(|c| (p, c)))
        .collect();
    shared.presence().replace_all(comms)
}

/// The running exec machinery.
pub(crate) struct ExecWatch {
    pub(crate) shared: Arc<Shared>,
    placement: Option<Placement>,
}

impl ExecWatch {
    /// Starts what the policy needs: the exec thread when there are
    /// placement rules (or presence to keep), with the connector unless the
    /// root is fake. Logs once why the connector is not used.
    pub(crate) fn start(
        root: &Root,
        policy: &Policy,
        shared: Arc<Shared>,
        act: bool,
        wake: mpsc::Sender<Wake>,
    ) -> ExecWatch {
        let placer = Placer::new(&policy.placement, |name| {
            crate::kernel::accounts::user(root, name)
                .ok()
                .flatten()
                .map(|u| u.uid)
        });
        let tracking = !shared.presence().is_empty();
        // Under --dry-run placement runs too and logs each move it would make.
        let placing = !placer.is_empty();
        let critical = !policy.settings.critical.is_empty();
        if !tracking && !placing && !critical {
            return ExecWatch {
                shared,
                placement: None,
            };
        }
        if placing && act {
            advise_favordynmods(root, policy);
        }
        let tasks = Tasks::new(root, policy, act, &shared.last_resort, wake.clone());
        let conn = open_connector(root, needs_exits(tracking, &tasks));
        shared.events_live.store(conn.is_some(), Ordering::Relaxed);
        let efd = match EventFd::new() {
            Ok(e) => e,
            Err(e) => {
                tracing::error!(
                    "cannot create the exec thread's eventfd ({e}); placement and presence are off"
                );
                shared.events_live.store(false, Ordering::Relaxed);
                return ExecWatch {
                    shared,
                    placement: None,
                };
            }
        };
        let wake_fd = Arc::new(efd);
        let scan_pending = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std_mpsc::channel();
        let worker = Worker {
            placer,
            ops: KernelOps::new(root.clone(), policy).dry_run(!act),
            root: root.clone(),
            shared: shared.clone(),
            wake,
            act,
            cache: FactCache::default(),
            scan_pending: scan_pending.clone(),
            tracking,
            refusals: HashSet::new(),
            kept: BTreeMap::new(),
            tasks,
        };
        let thread_fd = wake_fd.clone();
        let thread = std::thread::Builder::new()
            .name("cgw-exec".into())
            .stack_size(crate::kernel::residency::STACK)
            .spawn(move || {
                // A reacting thread (settings.daemon.sched, reset on fork).
                crate::daemon::priority::enter_reacting("exec (cgw-exec)");
                let run = std::panic::AssertUnwindSafe(|| worker.run(rx, thread_fd, conn));
                if std::panic::catch_unwind(run).is_err() {
                    // A bug: better a restart by the service manager (which
                    // re-converges) than a daemon that silently stopped placing.
                    tracing::error!("the exec thread panicked; exiting so cgwarden is restarted");
                    std::process::exit(EXIT_INTERNAL);
                }
            });
        let thread = match thread {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::error!(
                    "cannot start the exec thread ({e}); placement and presence are off"
                );
                shared.events_live.store(false, Ordering::Relaxed);
                None
            }
        };
        let placement = Placement {
            tx,
            wake_fd,
            scan_pending,
            _thread: thread,
        };
        // Subscribed first, then scanned: nothing falls between the two.
        if tracking {
            scan_presence(&shared, root);
        }
        placement.scan(ScanKind::Startup);
        ExecWatch {
            shared,
            placement: Some(placement),
        }
    }

    /// A reload: the new policy's placement rules and `running()` patterns.
    /// A running exec thread gets them in one message (it swaps them between
    /// two events, then rescans everything); without one, it is started if
    /// the new policy needs it. An exec thread the new policy no longer
    /// needs keeps running with no rules (cheap; a restart stops it).
    pub(crate) fn swap(
        &mut self,
        root: &Root,
        policy: &Policy,
        running: &std::collections::BTreeSet<String>,
        act: bool,
        wake: mpsc::Sender<Wake>,
    ) {
        *self.shared.presence() = Presence::new(running);
        let tracking = !running.is_empty();
        let Some(p) = &self.placement else {
            *self = ExecWatch::start(root, policy, self.shared.clone(), act, wake);
            return;
        };
        if tracking {
            scan_presence(&self.shared, root);
        }
        let placer = Placer::new(&policy.placement, |name| {
            crate::kernel::accounts::user(root, name)
                .ok()
                .flatten()
                .map(|u| u.uid)
        });
        let sw = Swap {
            placer,
            ops: KernelOps::new(root.clone(), policy).dry_run(!act),
            tracking,
            tasks: Tasks::new(root, policy, act, &self.shared.last_resort, wake.clone()),
        };
        if p.tx.send(Job::Swap(Box::new(sw))).is_err() {
            tracing::error!("the exec thread is gone; placement rules not swapped");
        }
        p.wake_fd.poke();
    }

    /// Each tick: without live events, the scan is the detection.
    pub(crate) fn on_tick(&self) {
        if !self.shared.events_live() {
            if let Some(p) = &self.placement {
                p.scan(ScanKind::Tick);
            }
        }
    }

    /// The `settings.rescan` safety net.
    pub(crate) fn rescan(&self) {
        if let Some(p) = &self.placement {
            p.scan(ScanKind::Rescan);
        }
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.shared.counters
    }
}

/// The process-events connector, unless the root is fake or it cannot be
/// opened (said once, with the reason; scanning every tick takes over).
fn open_connector(root: &Root, exits: bool) -> Option<Connector> {
    if !root.supports(crate::kernel::Op::ProcConnector) {
        tracing::info!(
            "--root: exec events do not exist on a fake tree; scanning /proc every tick"
        );
        return None;
    }
    if std::env::var_os("CGWARDEN_NO_PROC_EVENTS").is_some() {
        // Benchmarks and tests of the fallback on a real kernel.
        tracing::warn!(
            "CGWARDEN_NO_PROC_EVENTS is set: process-events connector not used; scanning /proc every tick"
        );
        return None;
    }
    match Connector::open(exits) {
        Ok(conn) => {
            tracing::info!(
                filtered = conn.filtered(),
                exits,
                rcvbuf = conn.rcvbuf(),
                "process-events connector: placing on exec"
            );
            Some(conn)
        }
        Err(e) => {
            tracing::warn!(
                "process-events connector unavailable ({}); scanning /proc every tick",
                proc_events::describe_open_error(&e)
            );
            None
        }
    }
}

/// Whether the exec thread needs a process's EXIT: for
/// `running()` presence, critical processes and followed threads. Placement
/// does without: its cache then checks a known process's comm at each
/// rescan instead of trusting the pid. A flood's exits then wake nobody.
fn needs_exits(tracking: bool, tasks: &Tasks) -> bool {
    tracking || tasks.needs_exits()
}

/// Without `favordynmods`, the kernel write-locks a global percpu rwsem for
/// each migration and the first one after a quiet spell waits for an RCU
/// grace period (5–20 ms measured): placement latency then has that floor.
/// Said once at startup; changing the mount is the integrator's call.
fn advise_favordynmods(root: &Root, policy: &Policy) {
    let cg = crate::kernel::cgroupfs::CgroupFs::new(root.clone(), &policy.settings.cgroup_root);
    if let Some(opts) = cg.mount_options() {
        if !opts.iter().any(|o| o == "favordynmods") {
            tracing::info!(
                mount = %cg.mount().display(),
                "cgroup2 is mounted without favordynmods: a placement after a quiet spell waits \
                 for an RCU grace period (typically 5-20 ms); for sub-millisecond placement mount \
                 it with favordynmods (mount -o remount,favordynmods none MOUNT, the kernel \
                 option cgroup_favordynmods=true, or CONFIG_CGROUP_FAVOR_DYNMODS=y)"
            );
        }
    }
}

fn note_comm(shared: &Shared, root: &Root, pid: i32) -> bool {
    match procfs::comm(root, pid) {
        Ok(Some(c)) => shared.presence().update(pid, &c),
        _ => shared.presence().exit(pid),
    }
}

fn fail(shared: &Shared, wake: &mpsc::Sender<Wake>, what: String) {
    shared.events_live.store(false, Ordering::Relaxed);
    let _ = wake.try_send(Wake::WatchError {
        what: format!("{what}; scanning /proc every tick from now on"),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker that acts, on `root`, for the tests.
    fn worker(
        root: &Root,
        policy: &Policy,
        shared: Arc<Shared>,
        wake: mpsc::Sender<Wake>,
        tracking: bool,
    ) -> Worker {
        let tasks = Tasks::new(root, policy, true, &shared.last_resort, wake.clone());
        Worker {
            placer: Placer::new(&policy.placement, |_| None),
            ops: KernelOps::new(root.clone(), policy),
            root: root.clone(),
            shared,
            wake,
            act: true,
            cache: FactCache::default(),
            scan_pending: Arc::new(AtomicBool::new(false)),
            tracking,
            refusals: HashSet::new(),
            kept: BTreeMap::new(),
            tasks,
        }
    }

    /// The exec thread's batch handling on a fake tree: each exec'd pid is
    /// placed once however many events name it, a renamed main thread is
    /// placed, a thread's rename is not, exits update presence, and a lost
    /// batch asks for a full scan.
    #[test]
    fn a_batch_places_each_exec_once_and_reports_loss() {
        use crate::kernel::fake_tree::{FakeProcess, FakeTree};
        let t = tempfile::TempDir::new().unwrap();
        let tree = FakeTree::standard(t.path()).unwrap();
        std::fs::create_dir_all(t.path().join("sys/fs/cgroup/rt")).unwrap();
        std::fs::write(t.path().join("sys/fs/cgroup/rt/cgroup.procs"), "").unwrap();
        for (pid, comm) in [(400, "rtloop"), (401, "rtloop2"), (500, "bash")] {
            tree.add_process(&FakeProcess::new(pid, comm)).unwrap();
        }
        let policy = crate::policy::load_bytes(
            "p.yaml",
            b"version: 1\nproduct: t\ngroups:\n  rt: {}\nplacement:\n  - match: { comm: \"rtloop*\" }\n    group: rt\nrules:\n  - name: r\n    when: running(bash)\n    while:\n      - set sysctl.vm.swappiness = 1\n",
        )
        .unwrap();
        let root = Root::fake(t.path());
        let shared = Shared::new(Presence::new(&["bash".to_string()]));
        let (wake, mut wake_rx) = mpsc::channel(8);
        let mut w = worker(&root, &policy, shared.clone(), wake, true);
        let (mut pids, mut seen) = (Vec::new(), HashSet::new());
        let batch = [
            ProcEvent::Exec {
                pid: 400,
                tgid: 400,
            },
            ProcEvent::Comm {
                pid: 400,
                tgid: 400,
            },
            ProcEvent::Comm {
                pid: 402,
                tgid: 401,
            }, // a thread's rename: not placed
            ProcEvent::Exec {
                pid: 500,
                tgid: 500,
            },
        ];
        assert!(!w.handle(&batch, &mut pids, &mut seen));
        assert_eq!(pids, [400, 500], "each exec'd process once, threads not");
        let cg = |pid: i32| {
            std::fs::read_to_string(t.path().join(format!("proc/{pid}/cgroup"))).unwrap()
        };
        assert!(cg(400).contains("0::/rt"), "{}", cg(400));
        assert!(
            !cg(401).contains("0::/rt"),
            "a thread's rename placed its process"
        );
        assert!(shared.presence().running("bash"));
        assert!(matches!(wake_rx.try_recv(), Ok(Wake::Presence)));
        let c = &shared.counters;
        assert_eq!(c.placed.lock().unwrap().get("rt"), Some(&1));
        assert_eq!(c.to_placed.count(), 1);
        // A main thread's rename is placed; an exit ends presence.
        let batch = [
            ProcEvent::Comm {
                pid: 401,
                tgid: 401,
            },
            ProcEvent::Exit {
                pid: 500,
                tgid: 500,
            },
        ];
        assert!(!w.handle(&batch, &mut pids, &mut seen));
        assert!(cg(401).contains("0::/rt"));
        assert!(!shared.presence().running("bash"));
        // Lost events: the caller must scan.
        assert!(w.handle(&[ProcEvent::Overrun], &mut pids, &mut seen));
        assert!(w.handle(
            &[ProcEvent::Gap { cpu: 1, missed: 3 }],
            &mut pids,
            &mut seen
        ));
        assert_eq!(c.overruns.load(Ordering::Relaxed), 1);
        assert_eq!(c.gaps.load(Ordering::Relaxed), 1);
    }

    /// The facts cache: a tick scan does not re-read a matched process (a
    /// rewritten cmdline is not seen), a lost-events scan starts over.
    #[test]
    fn tick_scans_use_the_cache_and_a_loss_scan_drops_it() {
        use crate::kernel::fake_tree::{FakeProcess, FakeTree};
        let t = tempfile::TempDir::new().unwrap();
        let tree = FakeTree::standard(t.path()).unwrap();
        std::fs::create_dir_all(t.path().join("sys/fs/cgroup/v")).unwrap();
        std::fs::write(t.path().join("sys/fs/cgroup/v/cgroup.procs"), "").unwrap();
        tree.add_process(&FakeProcess {
            cmdline: vec!["python3".into(), "cam.py".into()],
            ..FakeProcess::new(600, "python3")
        })
        .unwrap();
        let policy = crate::policy::load_bytes(
            "p.yaml",
            b"version: 1\nproduct: t\ngroups:\n  v: {}\nplacement:\n  - match: { cmdline: \"* cam.py\" }\n    group: v\n",
        )
        .unwrap();
        let root = Root::fake(t.path());
        let (wake, _wake_rx) = mpsc::channel(8);
        let shared = Shared::new(Presence::new(&[]));
        let mut w = worker(&root, &policy, shared.clone(), wake, false);
        let cg = || std::fs::read_to_string(t.path().join("proc/600/cgroup")).unwrap();
        let move_out = || {
            std::fs::write(t.path().join("proc/600/cgroup"), "0::/\n").unwrap();
            std::fs::write(t.path().join("sys/fs/cgroup/v/cgroup.procs"), "").unwrap();
        };
        w.full_scan(ScanKind::Tick, false);
        assert!(cg().contains("0::/v"), "{}", cg());
        std::fs::write(t.path().join("proc/600/cmdline"), b"python3\0other.py\0").unwrap();
        move_out();
        w.full_scan(ScanKind::Tick, false);
        assert!(
            cg().contains("0::/v"),
            "the tick re-read the cmdline: {}",
            cg()
        );
        move_out();
        w.full_scan(ScanKind::Loss, false);
        assert!(
            !cg().contains("0::/v"),
            "a loss scan kept the cache: {}",
            cg()
        );
    }

    /// The processes left alone that status lists follow what placement
    /// finds: one entry per pid (its latest rule and cgroup), gone when
    /// placing it finds nothing to leave alone, at most KEPT_MAX.
    #[test]
    fn the_left_alone_list_follows_placement_and_is_bounded() {
        use crate::engine::placement::foreign::Owner;
        let t = tempfile::TempDir::new().unwrap();
        let root = Root::fake(t.path());
        let policy = crate::policy::load_bytes(
            "p.yaml",
            b"version: 1\nproduct: t\ngroups:\n  g: {}\nplacement:\n  - match: { comm: app }\n    group: g\n",
        )
        .unwrap();
        let (wake, _rx) = mpsc::channel(8);
        let shared = Shared::new(Presence::new(&[]));
        let mut w = worker(&root, &policy, shared.clone(), wake, false);
        let kept = |cgroup: &str| Kept {
            rule: 0,
            line: 6,
            group: "g".into(),
            comm: "app".into(),
            cgroup: cgroup.into(),
            owner: Owner::Runtime("docker"),
        };
        w.note_kept(7, Some(&kept("/docker/a")));
        w.note_kept(7, Some(&kept("/docker/b")));
        let list = shared.left_alone();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].1.cgroup, "/docker/b", "the latest cgroup");
        w.note_kept(7, None);
        assert!(shared.left_alone().is_empty());
        for pid in 0..KEPT_MAX as i32 + 10 {
            w.note_kept(pid, Some(&kept("/docker/a")));
        }
        assert_eq!(shared.left_alone().len(), KEPT_MAX);
        // A listed one still moves along; one past the bound is not listed.
        w.note_kept(3, Some(&kept("/docker/c")));
        w.note_kept(KEPT_MAX as i32 + 3, None);
        let list = shared.left_alone();
        assert_eq!(list.len(), KEPT_MAX);
        assert_eq!(list[3].1.cgroup, "/docker/c");
    }

    /// Exits are asked for only when something reads them.
    #[test]
    fn exits_are_needed_by_presence_critical_processes_and_followed_threads() {
        let t = tempfile::tempdir().unwrap();
        let root = Root::fake(t.path());
        let base = "version: 1\nproduct: t\ngroups:\n  g: {}\n";
        let needs = |settings: &str, placement: &str, tracking: bool| {
            let text = format!(
                "{base}{settings}placement:\n  - match: {{ comm: app }}\n    group: g\n{placement}"
            );
            let policy = crate::policy::load_bytes("p.yaml", text.as_bytes()).unwrap();
            let (wake, _rx) = mpsc::channel(1);
            let stats = Arc::new(crate::stats::LastResortStats::default());
            needs_exits(tracking, &Tasks::new(&root, &policy, true, &stats, wake))
        };
        assert!(!needs("", "", false), "placement alone");
        assert!(needs("", "", true), "running() presence");
        assert!(
            needs("settings: { critical: [app] }\n", "", false),
            "critical"
        );
        assert!(
            needs(
                "",
                "    threads:\n      - name: \"w*\"\n        nice: 5\n",
                false
            ),
            "threads"
        );
    }
}
