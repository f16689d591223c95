//! The exec thread's per-task work beside placement: the
//! placements' per-process attributes and `threads:` on every placed
//! process (exec and scans), a thread's rename followed (the connector's
//! COMM event carries the thread id). Called from `daemon::exec`, which
//! owns the events; the kernel work is `converge::tuning`'s.
//!
//! Critical processes (`settings.critical`): their exits, seen through the
//! connector's EXIT event (or found gone by a scan when events were lost
//! or there are none), are counted here and sent to the event loop, which
//! publishes the `critical_exit` event (recorder row, `cgwarden events`).
//!
//! A thread created later inherits what its creator has (nice, affinity,
//! uclamp, sched unless reset-on-fork, cgroup): a named thread is matched
//! when it names itself (`pthread_setname_np` is a COMM event), and every
//! scan checks every thread of every placed process again.

use crate::converge::tuning::Tuner;
use crate::daemon::watch::Wake;
use crate::engine::critical::{Critical, Gone};
use crate::engine::placement::Placed;
use crate::kernel::proc_events::ProcEvent;
use crate::kernel::{procfs, Root};
use crate::policy::model::Policy;
use crate::stats::LastResortStats;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::mpsc;

/// Matched processes remembered for their threads' renames (a board has
/// hundreds; past this the map starts over and the next scan refills it).
const KNOWN_MAX: usize = 65_536;

pub(crate) struct Tasks {
    tuner: Tuner,
    /// tgid → placement rule, for processes whose rule has `threads:`.
    known: HashMap<i32, usize>,
    /// Refusals already logged (said once each).
    said: HashSet<String>,
    /// False under `--dry-run`: what would change is logged.
    act: bool,
    root: Root,
    critical: Critical,
    stats: Arc<LastResortStats>,
    wake: mpsc::Sender<Wake>,
}

impl Tasks {
    pub(crate) fn new(
        root: &Root,
        policy: &Policy,
        act: bool,
        stats: &Arc<LastResortStats>,
        wake: mpsc::Sender<Wake>,
    ) -> Tasks {
        let critical = Critical::new(&policy.settings.critical);
        // Every entry is a metric sample from the start (0 until an exit).
        {
            let mut m = stats
                .critical_exits
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for p in critical.patterns() {
                m.entry(p.to_string()).or_default();
            }
        }
        Tasks {
            tuner: Tuner::new(root.clone(), policy),
            known: HashMap::new(),
            said: HashSet::new(),
            act,
            root: root.clone(),
            critical,
            stats: stats.clone(),
            wake,
        }
    }

    /// Whether a process's exit matters here: a critical process's is an
    /// event, and a process whose threads are followed is forgotten.
    pub(crate) fn needs_exits(&self) -> bool {
        !self.critical.is_empty() || self.tuner.follows_any_threads()
    }

    /// An event the exec thread read (before placing the batch).
    pub(crate) fn event(&mut self, ev: &ProcEvent) {
        match *ev {
            ProcEvent::Comm { pid, tgid } if pid != tgid => {
                if let Some(&rule) = self.known.get(&tgid) {
                    let changes = self.tuner.thread(tgid, pid, rule);
                    self.make(&changes, "renamed thread");
                }
            }
            ProcEvent::Exit { pid, tgid } if pid == tgid => {
                self.known.remove(&tgid);
                if let Some(g) = self.critical.exited(tgid) {
                    self.critical_exit(g, false);
                }
            }
            ProcEvent::Exec { tgid, .. } if !self.critical.is_empty() => self.look(tgid),
            ProcEvent::Comm { pid, tgid } if pid == tgid && !self.critical.is_empty() => {
                self.look(tgid)
            }
            _ => {}
        }
    }

    /// Reads `pid`'s comm for the critical set.
    fn look(&mut self, pid: i32) {
        if let Ok(Some(comm)) = procfs::comm(&self.root, pid) {
            self.critical.seen(pid, &comm);
        }
    }

    /// A full scan saw `pids`: critical processes are (re)recorded, and
    /// those no longer alive reported (their exit events were lost, or
    /// there are none on a fake tree).
    pub(crate) fn scanned(&mut self, pids: &[i32]) {
        let live: HashSet<i32> = pids.iter().copied().collect();
        // Followed processes a scan no longer finds are gone (an exit event
        // may have been lost).
        self.known.retain(|p, _| live.contains(p));
        if self.critical.is_empty() {
            return;
        }
        for &p in pids {
            self.look(p);
        }
        let root = self.root.clone();
        let alive = |p: i32| live.contains(&p) || procfs::alive(&root, p);
        for g in self.critical.reconcile(&alive) {
            self.critical_exit(g, true);
        }
    }

    fn critical_exit(&mut self, g: Gone, by_scan: bool) {
        let at = SystemTime::now();
        LastResortStats::bump(&self.stats.critical_exits, g.pattern.clone());
        let how = if by_scan {
            "found gone by a scan"
        } else {
            "exited"
        };
        tracing::warn!(pid = g.pid, comm = %g.comm, critical = %g.pattern, "critical process {} (pid {}) {how}", g.comm, g.pid);
        let _ = self.wake.try_send(Wake::CriticalExit {
            pid: g.pid,
            comm: g.comm,
            pattern: g.pattern,
            by_scan,
            at,
        });
    }

    /// `pid` was placed (or found in place) by a rule: its threads get
    /// the rule's attributes.
    pub(crate) fn placed(&mut self, pid: i32, r: &Placed) {
        // No rule: nothing matched, or a scan skipped a process its cache
        // shows placed (it stays followed until it exits).
        let Some(rule) = r.rule else {
            return;
        };
        if !self.tuner.follows_threads(rule) {
            self.known.remove(&pid);
        } else {
            if self.known.len() >= KNOWN_MAX {
                self.known.clear();
            }
            self.known.insert(pid, rule);
        }
        let changes = self.tuner.changes(pid, rule);
        self.make(&changes, "placed");
    }

    fn make(&mut self, changes: &[crate::converge::tuning::TaskChange], why: &str) {
        if changes.is_empty() {
            return;
        }
        if !self.act {
            for ch in changes {
                self.say_once(format!("would set {ch} (dry run)"), false);
            }
            return;
        }
        let (done, refused) = self.tuner.tune(changes);
        for d in done {
            tracing::debug!("{why}: set {d}");
        }
        for e in refused {
            self.say_once(format!("task attribute refused: {e}"), true);
        }
    }

    fn say_once(&mut self, line: String, warn: bool) {
        if self.said.len() >= 4096 {
            self.said.clear();
        }
        if self.said.insert(line.clone()) {
            if warn {
                tracing::warn!("{line}");
            } else {
                tracing::info!("{line}");
            }
        }
    }
}
