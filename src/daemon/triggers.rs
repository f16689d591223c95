//! What wakes the loop besides its own timers: the kernel PSI triggers the
//! stall conditions need and the inotify watches on the groups'
//! `memory.events`/`cgroup.events`. [`Triggers::sync`] registers the
//! triggers the conditions need and retires those they no longer need, at
//! start and at a reload alike (a start is a reload from nothing); a group
//! that comes back gets its watches and triggers again.

use super::sample::Sampler;
use super::watch::{self, FileWatcher, Wake};
use crate::engine::condition::Needs;
use crate::engine::stall::StallKey;
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::{psi_trigger, Root};
use crate::policy::expr::Target;
use crate::policy::model::{Group, Policy};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// One kernel PSI trigger the rules need.
pub(super) struct TriggerSpec {
    pub(super) key: StallKey,
    path: PathBuf,
    amount: Duration,
    pub(super) window: Duration,
    pub(super) state: TriggerState,
    /// The task waiting on the registered trigger (aborted on reload).
    task: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TriggerState {
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

    fn same(&self, other: &TriggerSpec) -> bool {
        self.key == other.key
            && self.path == other.path
            && self.amount == other.amount
            && self.window == other.window
    }
}

/// The PSI triggers and the event-file watches.
pub(super) struct Triggers {
    /// Kernel PSI triggers by the id their wake-ups carry. A reload removes
    /// the ones it no longer needs (their tasks stopped); ids are never
    /// reused, so a wake still queued for a removed one finds nothing, and
    /// a daemon reloaded every few minutes for years holds only what its
    /// policy needs.
    pub(super) psi: BTreeMap<usize, TriggerSpec>,
    /// The id the next registered trigger gets.
    next_id: usize,
    /// The inotify watches on the groups' event files.
    pub(super) files: Option<FileWatcher>,
    /// Where a registered trigger's task sends its wake-ups (set at start).
    tx: Option<mpsc::Sender<Wake>>,
    /// Some group's `cgroup.events` (how a deletion is seen), or a
    /// `memory.events` a condition reads, is not watched (absent at start,
    /// or gone): the tick reads and checks the groups meanwhile.
    pub(super) events_unwatched: bool,
    /// "PSI disabled" was said (once per daemon).
    psi_off_said: bool,
}

impl Triggers {
    pub(super) fn new() -> Triggers {
        Triggers {
            psi: BTreeMap::new(),
            next_id: 0,
            files: None,
            tx: None,
            events_unwatched: true,
            psi_off_said: false,
        }
    }

    /// Starts the inotify watcher and registers the triggers the
    /// conditions need; wake-ups go to `tx`.
    pub(super) fn start(&mut self, root: &Root, tx: &mpsc::Sender<Wake>, sampler: &mut Sampler) {
        self.tx = Some(tx.clone());
        // Kernel PSI triggers for the stall-time conditions; the tick polls
        // `total=` for any that cannot be registered, with the same meaning.
        self.sync(root, sampler);
        // Every group's cgroup.events (a group deleted from outside is
        // noticed) and the memory.events a condition reads (oom/high events
        // are seen when they happen).
        match FileWatcher::new(root, tx.clone()) {
            Ok(w) => self.files = Some(w),
            Err(e) => tracing::warn!("inotify unavailable ({e}); events are seen at the next tick"),
        }
    }

    /// The loop's wake-up channel (set at start).
    pub(super) fn waker(&self) -> Option<mpsc::Sender<Wake>> {
        self.tx.clone()
    }

    /// Registers the PSI triggers the sampler's conditions need and retires
    /// the ones they no longer need (kept ones stay registered, with their
    /// ids; a retired id is never reused).
    pub(super) fn sync(&mut self, root: &Root, sampler: &mut Sampler) {
        let mut wanted = Vec::new();
        for (key, amount, window) in sampler.needs().psi_triggers.iter().cloned() {
            let Some(path) = sampler.pressure_path(&key.target, key.resource) else {
                continue;
            };
            if key.target == Target::Host
                && !root.exists(Path::new(crate::kernel::psi::PRESSURE_DIR))
                && root.supports(crate::kernel::Op::PsiTrigger)
            {
                if !self.psi_off_said {
                    self.psi_off_said = true;
                    tracing::warn!(
                        "/proc/pressure is absent: the kernel has PSI disabled; boot with psi=1"
                    );
                }
                continue;
            }
            wanted.push(TriggerSpec {
                key,
                path,
                amount,
                window,
                state: TriggerState::Unarmed,
                task: None,
            });
        }
        self.psi.retain(|_, t| {
            if wanted.iter().any(|w| t.same(w)) {
                return true;
            }
            if let Some(task) = t.task.take() {
                task.abort();
            }
            sampler.stall.set_armed(&t.key, false);
            tracing::info!(trigger = %t.label(), "PSI trigger removed by reload");
            false
        });
        let mut added = Vec::new();
        for w in wanted {
            if !self.psi.values().any(|t| t.same(&w)) {
                let id = self.next_id;
                self.next_id += 1;
                self.psi.insert(id, w);
                added.push(id);
            }
        }
        for id in added {
            self.arm(id, root, false);
        }
        self.sync_armed(sampler);
    }

    /// Registers again the PSI triggers whose group is back (recreated by a
    /// repair, or created after the daemon started).
    pub(super) fn rearm_gone(&mut self, root: &Root, sampler: &mut Sampler) {
        let back: Vec<usize> = self
            .psi
            .iter()
            .filter(|(_, t)| t.state == TriggerState::Gone && root.exists(&t.path))
            .map(|(&id, _)| id)
            .collect();
        for &id in &back {
            self.arm(id, root, true);
        }
        if !back.is_empty() {
            self.sync_armed(sampler);
        }
    }

    /// Registers trigger `id` (without a wake-up channel, that is before
    /// [`Self::start`], it stays unarmed); `again` after its group came back.
    fn arm(&mut self, id: usize, root: &Root, again: bool) {
        let Some(tx) = self.tx.clone() else { return };
        let Some(t) = self.psi.get_mut(&id) else {
            return;
        };
        let stall = match t.key.stall {
            crate::policy::expr::Stall::Some => "some",
            crate::policy::expr::Stall::Full => "full",
        };
        t.state = match psi_trigger::open(root, &t.path, stall, t.amount, t.window) {
            Ok(trigger) => match watch::spawn_psi_trigger(trigger, id, tx) {
                Ok(task) => {
                    t.task = Some(task);
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

    /// Tells the stall history which lines a silent kernel trigger answers
    /// for: those whose every trigger is registered (the tick polls the rest).
    pub(super) fn sync_armed(&self, sampler: &mut Sampler) {
        for t in self.psi.values() {
            let armed = self
                .psi
                .values()
                .filter(|o| o.key == t.key)
                .all(|o| o.state == TriggerState::Armed);
            sampler.stall.set_armed(&t.key, armed);
        }
    }

    /// Trigger `id` fired: the sampler records it (a removed one's late
    /// wake is ignored).
    pub(super) fn fired(&self, id: usize, sampler: &mut Sampler) {
        tracing::debug!(
            trigger = %self.psi.get(&id).map(TriggerSpec::label).unwrap_or_default(),
            "PSI trigger"
        );
        if let Some(t) = self.psi.get(&id) {
            // Recorded by the evaluation that follows every wake.
            sampler.trigger_fired(&t.key, t.amount, t.window);
        }
    }

    /// The kernel dropped trigger `id` (its group is gone).
    pub(super) fn gone(&mut self, id: usize, sampler: &mut Sampler) {
        if let Some(t) = self.psi.get_mut(&id) {
            t.state = TriggerState::Gone;
            tracing::warn!(
                trigger = %t.label(),
                "PSI trigger's group is gone; polling until it is recreated"
            );
        }
        self.sync_armed(sampler);
    }

    /// How many triggers are registered.
    pub(super) fn armed(&self) -> usize {
        self.psi
            .values()
            .filter(|t| t.state == TriggerState::Armed)
            .count()
    }

    /// Whether some trigger the rules need is not registered (its line is
    /// polled by the tick).
    pub(super) fn unarmed(&self) -> bool {
        self.psi.values().any(|t| t.state != TriggerState::Armed)
    }

    /// When a stall line behind an armed kernel trigger must be read again
    /// to see its stall end ([`crate::engine::stall::StallHistory::recheck_at`],
    /// a tick — with a tick of a window or more, just over a window — after
    /// a read that showed a trigger's amount); on the engine's clock `now`.
    pub(super) fn recheck_at(
        &self,
        sampler: &Sampler,
        period: Duration,
        start: Instant,
    ) -> Option<Instant> {
        let stall = &sampler.stall;
        let recheck = &sampler.needs().psi_recheck;
        self.psi
            .values()
            .filter(|t| t.state == TriggerState::Armed && stall.is_armed(&t.key))
            // A line only one-comparison conditions read ends by
            // the trigger's silence, at the rules' own deadlines
            // (`condition::silence_decides`); with a tick under the window
            // it is still read each tick while it stalls.
            .filter(|t| period < t.window || recheck.contains(&t.key))
            .filter_map(|t| {
                stall.recheck_at(&t.key, t.amount, t.window, period, || start.elapsed())
            })
            .min()
            .map(|t| start + t)
    }

    /// Watches the event files the daemon relies on — every group's
    /// `cgroup.events`, the `memory.events` conditions read — that exist and
    /// are not watched yet, stops watching a `memory.events` no condition
    /// reads any more (a reload), and records whether one it relies on is
    /// still unwatched.
    ///
    /// A `memory.events` nobody reads is not watched. Under `memory.high`
    /// throttling the kernel notifies it up to every 10 ms (`high` counts
    /// each throttled charge), and each notification would be a loop
    /// wake-up and a full evaluation that could change nothing.
    pub(super) fn watch_event_files(
        &mut self,
        policy: &Policy,
        cg: &CgroupFs,
        root: &Root,
        needs: &Needs,
    ) {
        let mut read: Vec<PathBuf> = Vec::new();
        for g in policy.all_groups() {
            for file in ["memory.events", "cgroup.events"] {
                let needed = event_file_needed(needs, &g.name, file);
                let path = Root::normalize(&cg.file(&g.path, file));
                if let Some(w) = &mut self.files {
                    if !needed {
                        if let Err(e) = w.unwatch(&path) {
                            tracing::debug!("inotify {}: {e}", path.display());
                        }
                    } else if root.exists(&path) {
                        if let Err(e) = w.watch(&path) {
                            tracing::debug!("inotify {}: {e}", path.display());
                        }
                    }
                }
                if needed {
                    read.push(path);
                }
            }
        }
        let watched = self.files.as_ref().map(|w| w.watched()).unwrap_or_default();
        self.events_unwatched = read.iter().any(|p| !watched.contains(p));
    }

    /// Watches a recreated group's event files again (those
    /// [`Self::watch_event_files`] watches).
    pub(super) fn rearm_group(&mut self, g: &Group, cg: &CgroupFs, root: &Root, needs: &Needs) {
        let Some(w) = &mut self.files else { return };
        for file in ["memory.events", "cgroup.events"] {
            if !event_file_needed(needs, &g.name, file) {
                continue;
            }
            let path = cg.file(&g.path, file);
            if root.exists(&path) {
                if let Err(e) = w.watch(&path) {
                    tracing::debug!("inotify {}: {e}", path.display());
                }
            }
        }
    }
}

/// Whether the daemon watches event file `file` of group `group`: every
/// `cgroup.events` (a group deleted from outside is noticed), and a
/// `memory.events` only where a condition reads it.
fn event_file_needed(needs: &Needs, group: &str, file: &str) -> bool {
    file == "cgroup.events" || needs.memory_events.contains(group)
}
