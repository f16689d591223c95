//! Starting and re-arming what wakes the loop: the file watches on
//! `memory.events`/`cgroup.events`, the kernel PSI triggers the rules need,
//! and their re-registration when a group comes back or a reload changes them.

use super::watch::{FileWatcher, Wake};
use super::{exec, irqwatch, watch, Daemon, TriggerSpec, TriggerState};
use crate::engine::stall::StallKey;
use crate::kernel::{psi_trigger, Root};
use crate::policy::expr::Target;
use crate::policy::model::Group;
use std::path::PathBuf;
use tokio::sync::mpsc;

impl Daemon {
    pub(super) fn start_watchers(&mut self, tx: &mpsc::Sender<Wake>) {
        let root = self.opts.root.clone();
        // Kernel PSI triggers for the stall-time conditions; the tick polls
        // `total=` for any that cannot be registered, with the same meaning.
        let wanted: Vec<_> = self.sampler.needs().psi_triggers.iter().cloned().collect();
        for (key, amount, window) in wanted {
            let Some(path) = self.sampler.pressure_path(&key.target, key.resource) else {
                continue;
            };
            if key.target == Target::Host
                && !root.exists(std::path::Path::new(crate::kernel::psi::PRESSURE_DIR))
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
                task: None,
            });
        }
        for id in 0..self.triggers.len() {
            self.arm_trigger(id, tx, false);
        }
        self.tx = Some(tx.clone());
        // Every group's cgroup.events (a group deleted from outside is
        // noticed) and the memory.events a condition reads (oom/high events
        // are seen when they happen).
        match FileWatcher::new(&root, tx.clone()) {
            Ok(w) => self.watcher = Some(w),
            Err(e) => tracing::warn!("inotify unavailable ({e}); events are seen at the next tick"),
        }
        self.watch_event_files();
        // Exec events drive placement and running() presence.
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
        for w in crate::converge::coexistence_warnings(&root, &self.policy) {
            tracing::warn!("{w}");
        }
        self.irqwatch =
            irqwatch::IrqWatch::start(&root, &self.policy, self.actuator.shared_journal());
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
    pub(super) fn watch_event_files(&mut self) {
        let mut read: Vec<PathBuf> = Vec::new();
        for g in self.policy.all_groups() {
            for file in ["memory.events", "cgroup.events"] {
                let needed = self.event_file_needed(&g.name, file);
                let path = Root::normalize(&self.cg.file(&g.path, file));
                if let Some(w) = &mut self.watcher {
                    if !needed {
                        if let Err(e) = w.unwatch(&path) {
                            tracing::debug!("inotify {}: {e}", path.display());
                        }
                    } else if self.opts.root.exists(&path) {
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
        let watched = self
            .watcher
            .as_ref()
            .map(|w| w.watched())
            .unwrap_or_default();
        self.events_unwatched = read.iter().any(|p| !watched.contains(p));
    }

    /// Whether the daemon watches event file `file` of group `group`: every
    /// `cgroup.events` (a group deleted from outside is noticed), and a
    /// `memory.events` only where a condition reads it.
    fn event_file_needed(&self, group: &str, file: &str) -> bool {
        file == "cgroup.events" || self.sampler.needs().memory_events.contains(group)
    }

    /// Watches a recreated group's event files again (those
    /// [`Daemon::watch_event_files`] watches).
    pub(super) fn rearm_group(&mut self, g: &Group) {
        let files: Vec<&str> = ["memory.events", "cgroup.events"]
            .into_iter()
            .filter(|f| self.event_file_needed(&g.name, f))
            .collect();
        if let Some(w) = &mut self.watcher {
            for file in files {
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
    pub(super) fn rearm_triggers(&mut self) {
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
    pub(super) fn arm_trigger(&mut self, id: usize, tx: &mpsc::Sender<Wake>, again: bool) {
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
        self.sync_armed();
    }

    /// Tells the stall history which lines a silent kernel trigger answers
    /// for: those whose every trigger is registered (the tick polls the rest).
    pub(super) fn sync_armed(&mut self) {
        let keys: Vec<StallKey> = self
            .triggers
            .iter()
            .filter(|t| t.state != TriggerState::Retired)
            .map(|t| t.key.clone())
            .collect();
        for key in keys {
            let armed = self
                .triggers
                .iter()
                .filter(|t| t.key == key && t.state != TriggerState::Retired)
                .all(|t| t.state == TriggerState::Armed);
            self.sampler.stall.set_armed(&key, armed);
        }
    }
}
