//! The managed groups while the daemon runs ([`Groups`]): the cgroup tree,
//! exec-event placement and `running()` presence, the IRQ watcher, and the
//! repair of a group someone removed — recreated with its baseline (the
//! loop re-arms its watches and triggers).

use super::actuator::Actuator;
use super::repair::RepairSchedule;
use super::sample::Sampler;
use super::watch::Wake;
use super::{exec, irqwatch};
use crate::converge::journal::Entry;
use crate::converge::{Converger, Step};
use crate::engine::knobs::{Cause, Write};
use crate::engine::supervisor::Supervisor;
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::Root;
use crate::policy::model::{Group, Policy};
use std::collections::HashSet;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The groups' tree and what places processes and IRQs in it.
pub(super) struct Groups {
    pub(super) cg: CgroupFs,
    /// Exec-event placement and `running()` presence.
    pub(super) exec: Option<exec::ExecWatch>,
    /// The IRQ watcher (`system.irqs`/`system.kthreads`).
    pub(super) irqwatch: Option<irqwatch::IrqWatch>,
    /// Some group may have been deleted: check them at the next evaluation
    /// (set at start, when a watched event file went away, when a watcher
    /// failed; always without inotify).
    pub(super) dirty: bool,
    /// Retry schedule of groups a repair could not recreate.
    pub(super) repairs: RepairSchedule,
}

impl Groups {
    pub(super) fn new(cg: CgroupFs) -> Groups {
        Groups {
            cg,
            exec: None,
            irqwatch: None,
            dirty: true,
            repairs: RepairSchedule::new(),
        }
    }

    /// Starts the exec thread (placement and `running()` presence, fed to
    /// the sampler) and the IRQ watcher; `act`: place (not a dry run).
    pub(super) fn start(
        &mut self,
        root: &Root,
        policy: &Policy,
        sampler: &mut Sampler,
        act: bool,
        tx: &mpsc::Sender<Wake>,
        journal: Option<super::lanes::SharedJournal>,
    ) {
        // Exec events drive placement and running() presence.
        let presence = crate::engine::presence::Presence::new(&sampler.needs().running.clone());
        let shared = exec::Shared::new(presence);
        sampler.set_exec(shared.clone());
        self.exec = Some(exec::ExecWatch::start(
            root,
            policy,
            shared,
            act,
            tx.clone(),
        ));
        for w in crate::converge::coexistence_warnings(root, policy) {
            tracing::warn!("{w}");
        }
        self.irqwatch = irqwatch::IrqWatch::start(root, policy, journal);
    }

    /// Recreates the groups of `policy` that are gone and due (see
    /// [`RepairSchedule`]); returns those recreated, whose watches and
    /// triggers the caller re-arms.
    pub(super) fn repair(
        &mut self,
        policy: &Policy,
        actuator: &mut Actuator,
        supervisor: &mut Supervisor,
    ) -> Vec<Group> {
        self.dirty = false;
        // all_groups lists parents before their children.
        let missing: Vec<Group> = policy
            .all_groups()
            .into_iter()
            .filter(|g| !self.cg.exists(&g.path))
            .cloned()
            .collect();
        let now = Instant::now();
        let mut recreated = Vec::new();
        for g in missing {
            if !self.repairs.due(&g.name, now) {
                continue;
            }
            match self.recreate(&g, policy, actuator, supervisor) {
                Ok(()) => {
                    self.repairs.succeeded(&g.name);
                    tracing::warn!(group = %g.name, path = %self.cg.dir(&g.path).display(), "group was deleted from outside; recreated with its baseline and live claims");
                    recreated.push(g);
                }
                Err(e) => {
                    let (retry, failures) = self.repairs.failed(&g.name, now);
                    if failures == 1 || retry >= Duration::from_secs(60) {
                        tracing::error!(group = %g.name, "cannot recreate group deleted from outside: {e}; retrying in {retry:?}");
                    }
                }
            }
        }
        recreated
    }

    /// Recreates one group: journal, mkdir, controllers, baselines.
    fn recreate(
        &self,
        g: &Group,
        policy: &Policy,
        actuator: &mut Actuator,
        supervisor: &mut Supervisor,
    ) -> Result<(), String> {
        let dir = self.cg.dir(&g.path);
        // Recorded before the mkdir so `reset` removes it even if we die now.
        actuator
            .record(Entry::Mkdir { path: dir.clone() })
            .map_err(|e| format!("cannot journal {}: {e}", dir.display()))?;
        self.cg.mkdir(&g.path).map_err(|e| e.to_string())?;
        let offered = self.cg.controllers(&g.path).unwrap_or_default();
        let need: Vec<&str> = crate::converge::children_controllers(policy, g)
            .into_iter()
            .filter(|c| offered.iter().any(|o| o == c))
            .collect();
        self.cg
            .enable_controllers(&g.path, &need)
            .map_err(|e| e.to_string())?;
        for (knob, value) in supervisor.group_baselines(&g.name) {
            let w = Write {
                knob: knob.clone(),
                old: None,
                new: value.clone(),
                cause: Cause::Baseline,
            };
            // Queued on the group's lane, after the mkdir above. A knob the
            // kernel refuses is logged by the actuator and retried when its
            // effective value changes, as any other write.
            actuator.apply(&w);
            supervisor.mark_written(&knob, value);
        }
        Ok(())
    }

    /// Creates the groups `new` has and `old_groups` lacks: the directories
    /// (journalled before the mkdir, as a repair does) and the controllers
    /// their parents must delegate (journalled before the write). Their
    /// knobs' baselines follow through the knob table.
    pub(super) fn create(
        &self,
        new: &Policy,
        old_groups: &HashSet<String>,
        actuator: &Actuator,
        root: &Root,
        dry_run: bool,
    ) {
        if new
            .all_groups()
            .iter()
            .all(|g| old_groups.contains(&g.name))
        {
            return;
        }
        // What converge would do now, of which only the hierarchy: mkdirs
        // and `cgroup.subtree_control` writes (parents before children).
        let plan = Converger::new(root.clone(), new).plan();
        for step in &plan.steps {
            let res = match step {
                Step::Mkdir { path } => {
                    if dry_run {
                        tracing::info!("would MKDIR {} (dry run)", path.display());
                        continue;
                    }
                    actuator
                        .record(Entry::Mkdir { path: path.clone() })
                        .map_err(|e| format!("cannot journal {}: {e}", path.display()))
                        .and_then(|()| {
                            let rel = path
                                .strip_prefix(&new.settings.cgroup_root)
                                .ok()
                                .and_then(|r| r.to_str())
                                .ok_or_else(|| {
                                    format!("{} is not below the cgroup root", path.display())
                                })?;
                            self.cg
                                .mkdir(rel)
                                .map(|_| ())
                                .map_err(|e| format!("mkdir {}: {e}", path.display()))
                        })
                        .map(|()| tracing::info!("reload: MKDIR {}", path.display()))
                }
                Step::Write {
                    path, value, was, ..
                } if path.ends_with("cgroup.subtree_control") => {
                    if dry_run {
                        tracing::info!("would WRITE {} {value} (dry run)", path.display());
                        continue;
                    }
                    let entry = match was {
                        Some(content) => Entry::File {
                            path: path.clone(),
                            content: content.clone(),
                        },
                        None => Entry::Absent { path: path.clone() },
                    };
                    actuator
                        .record(entry)
                        .map_err(|e| format!("cannot journal {}: {e}", path.display()))
                        .and_then(|()| {
                            root.write(path, value)
                                .map_err(|e| format!("write {}: {e}", path.display()))
                        })
                        .map(|()| tracing::info!("reload: WRITE {} {value}", path.display()))
                }
                _ => continue,
            };
            if let Err(e) = res {
                tracing::error!("reload: {e}");
            }
        }
    }
}
