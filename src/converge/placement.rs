//! The kernel side of placing a process (engine's [`PlaceOps`]): facts from
//! /proc, its cgroup, the move through `cgroup.procs`, `sched_setattr` on
//! every thread. Shared by `apply`'s scan (through [`PlanOps`], which records
//! steps instead of acting) and the daemon's exec path and rescans.

use super::Step;
use crate::engine::placement::{FactNeeds, OpError, OwnedFacts, PlaceOps};
use crate::kernel::cgroupfs::{pid_cgroup, CgroupFs};
use crate::kernel::{procfs, sched, Op, Root};
use crate::policy::model::{Policy, Sched};
use std::collections::HashMap;

/// [`PlaceOps`] on the kernel (or a fake tree) through `kernel::`.
pub struct KernelOps {
    pub(crate) root: Root,
    cg: CgroupFs,
    /// group name → (path below cgroup_root, cgroup as /proc/PID/cgroup shows it)
    groups: HashMap<String, (String, String)>,
    me: i32,
}

impl KernelOps {
    pub fn new(root: Root, policy: &Policy) -> KernelOps {
        let cg = CgroupFs::new(root.clone(), policy.settings.cgroup_root.clone());
        let mount = cg.mount();
        let prefix = match cg.base().strip_prefix(&mount) {
            Ok(p) if p.as_os_str().is_empty() => String::new(),
            Ok(p) => format!("/{}", p.display()),
            Err(_) => String::new(),
        };
        let groups = policy
            .all_groups()
            .into_iter()
            .map(|g| {
                (
                    g.name.clone(),
                    (g.path.clone(), format!("{prefix}/{}", g.path)),
                )
            })
            .collect();
        KernelOps {
            me: root.own_pid().unwrap_or(-1),
            root,
            cg,
            groups,
        }
    }
}

impl PlaceOps for KernelOps {
    fn comm(&mut self, pid: i32) -> Option<String> {
        if pid == self.me || pid <= 0 {
            return None;
        }
        procfs::comm(&self.root, pid).ok().flatten()
    }
    fn facts(&mut self, pid: i32, comm: String, needs: FactNeeds) -> Option<OwnedFacts> {
        let want = procfs::Fields {
            exe: needs.exe,
            cmdline: needs.cmdline,
            uid: needs.uid,
        };
        let info = procfs::user_process(&self.root, pid, want).ok().flatten()?;
        Some(OwnedFacts {
            comm,
            exe: info.exe.map(|p| p.to_string_lossy().into_owned()),
            cmdline: info.cmdline.join(" "),
            uid: info.uid,
        })
    }
    fn cgroup_of(&mut self, pid: i32) -> Option<String> {
        pid_cgroup(&self.root, pid).ok().flatten()
    }
    fn group_cgroup(&self, group: &str) -> Option<String> {
        self.groups.get(group).map(|(_, shown)| shown.clone())
    }
    fn move_pid(&mut self, group: &str, pid: i32) -> Result<(), OpError> {
        let Some((rel, _)) = self.groups.get(group) else {
            return Err(OpError::Refused(format!("no group {group}")));
        };
        match self.cg.move_pid(rel, pid) {
            Ok(()) => Ok(()),
            Err(e) if e.is_gone() || e.errno() == Some(libc::ESRCH) => Err(OpError::Gone),
            Err(e) => Err(OpError::Refused(e.to_string())),
        }
    }
    fn sched_is(&mut self, pid: i32, s: &Sched) -> bool {
        if !self.root.supports(Op::Sched) {
            return true; // no kernel behind a fake tree: sched is not attempted
        }
        super::sched_matches(&self.root, pid, s)
    }
    fn set_sched(&mut self, pid: i32, s: &Sched) -> Result<(), OpError> {
        let spec = super::sched_spec(s);
        let mut any = false;
        for tid in procfs::threads(&self.root, pid) {
            match sched::apply(tid, &spec) {
                Ok(()) => any = true,
                Err(e) if e.errno() == Some(libc::ESRCH) => {}
                Err(e) => return Err(OpError::Refused(e.to_string())),
            }
        }
        if any {
            Ok(())
        } else {
            Err(OpError::Gone)
        }
    }
    fn children(&mut self, pid: i32) -> Vec<i32> {
        procfs::children(&self.root, pid)
    }
}

/// [`PlaceOps`] for `plan`/`apply`: reads through [`KernelOps`], records a
/// [`Step`] for each move and sched change instead of making it, and
/// remembers where it "moved" a process so descendants are judged against
/// the plan.
pub struct PlanOps {
    pub kernel: KernelOps,
    pub steps: Vec<Step>,
    cg: CgroupFs,
    paths: HashMap<String, String>,
    comms: HashMap<i32, String>,
}

impl PlanOps {
    pub fn new(root: Root, policy: &Policy) -> Self {
        PlanOps {
            kernel: KernelOps::new(root.clone(), policy),
            steps: Vec::new(),
            cg: CgroupFs::new(root, policy.settings.cgroup_root.clone()),
            paths: policy
                .all_groups()
                .into_iter()
                .map(|g| (g.name.clone(), g.path.clone()))
                .collect(),
            comms: HashMap::new(),
        }
    }
}

impl PlaceOps for PlanOps {
    fn comm(&mut self, pid: i32) -> Option<String> {
        self.kernel.comm(pid)
    }
    fn facts(&mut self, pid: i32, comm: String, needs: FactNeeds) -> Option<OwnedFacts> {
        let f = self.kernel.facts(pid, comm, needs)?;
        self.comms.insert(pid, f.comm.clone());
        Some(f)
    }
    fn cgroup_of(&mut self, pid: i32) -> Option<String> {
        self.kernel.cgroup_of(pid)
    }
    fn group_cgroup(&self, group: &str) -> Option<String> {
        self.kernel.group_cgroup(group)
    }
    fn move_pid(&mut self, group: &str, pid: i32) -> Result<(), OpError> {
        let path = self
            .paths
            .get(group)
            .ok_or_else(|| OpError::Refused(format!("no group {group}")))?;
        let was = self.kernel.cgroup_of(pid).ok_or(OpError::Gone)?;
        let comm = match self.comms.get(&pid) {
            Some(c) => c.clone(),
            None => procfs::comm(&self.kernel.root, pid)
                .ok()
                .flatten()
                .unwrap_or_default(),
        };
        self.steps.push(Step::Move {
            pid,
            comm,
            procs: self.cg.file(path, "cgroup.procs"),
            was: if was.is_empty() { "-".into() } else { was },
        });
        Ok(())
    }
    fn sched_is(&mut self, pid: i32, s: &Sched) -> bool {
        // Unlike KernelOps, a fake tree's /proc/PID/stat is read too, so
        // plan shows the SCHED step it would take (skipped on a fake root).
        super::sched_matches(&self.kernel.root, pid, s)
    }
    fn set_sched(&mut self, pid: i32, s: &Sched) -> Result<(), OpError> {
        let comm = self.comms.get(&pid).cloned().unwrap_or_default();
        self.steps.push(Step::Sched {
            pid,
            comm,
            sched: s.clone(),
        });
        Ok(())
    }
    fn children(&mut self, pid: i32) -> Vec<i32> {
        self.kernel.children(pid)
    }
}
