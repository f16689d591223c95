//! The managed groups while the daemon runs: a group someone removed is
//! recreated (with its baseline), and its watches and triggers re-armed.

use super::Daemon;
use crate::converge::journal::Entry;
use crate::engine::knobs::{Cause, Write};
use crate::policy::model::Group;
use std::time::{Duration, Instant};

impl Daemon {
    /// Repairs groups deleted from outside: each is recreated
    /// alone — the directory, the controllers its children need, its knobs'
    /// baselines, then their effective values (live claims) through the next
    /// step — and its watches and PSI triggers are re-armed. Nothing else is
    /// rewritten. A group that cannot be recreated is retried with a backoff.
    pub(super) fn check_groups(&mut self) {
        if self.opts.dry_run {
            return;
        }
        // Deletion is seen through inotify (the guard watch on each group's
        // parent): without a sign of one, and no retry pending, the groups
        // are not stat'ed at every evaluation.
        if !(self.groups_dirty
            || self.events_unwatched
            || self.watcher.is_none()
            || self.repairs.next_due().is_some())
        {
            self.rearm_triggers();
            return;
        }
        self.groups_dirty = false;
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
        self.watch_event_files();
    }

    /// Recreates one group: journal, mkdir, controllers, baselines.
    fn recreate(&mut self, g: &Group) -> Result<(), String> {
        let dir = self.cg.dir(&g.path);
        // Recorded before the mkdir so `reset` removes it even if we die now.
        self.actuator
            .record(Entry::Mkdir { path: dir.clone() })
            .map_err(|e| format!("cannot journal {}: {e}", dir.display()))?;
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
            // Queued on the group's lane, after the mkdir above. A knob the
            // kernel refuses is logged by the actuator and retried when its
            // effective value changes, as any other write.
            self.actuator.apply(&w);
            self.supervisor.mark_written(&knob, value);
        }
        Ok(())
    }
}
