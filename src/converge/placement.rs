//! The kernel side of placing a process (engine's [`PlaceOps`]): facts from
//! /proc, its cgroup, the move through `cgroup.procs`, `sched_setattr` on
//! every thread. Shared by `apply`'s scan (through [`PlanOps`], which records
//! steps instead of acting) and the daemon's exec path and rescans. Whose a
//! process's cgroup is (a container runtime's, a delegated manager's:
//! [`foreign`]) is judged here from its path and the cgroups' delegation
//! marks.

use super::Step;
use crate::engine::placement::foreign::{self, Domain, Owner};
use crate::engine::placement::{FactNeeds, OpError, OwnedFacts, Pin, PlaceOps};
use crate::kernel::cgroupfs::{pid_cgroup, CgroupFs, ProcsFiles};
use crate::kernel::{procfs, sched, xattr, Op, Root};
use crate::policy::model::{Policy, Sched};
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;

/// [`PlaceOps`] on the kernel (or a fake tree) through `kernel::`.
pub(crate) struct KernelOps {
    pub(crate) root: Root,
    cg: CgroupFs,
    /// group name → (path below cgroup_root, cgroup as /proc/PID/cgroup shows it)
    groups: HashMap<String, (String, String)>,
    me: i32,
    /// False once pidfd_open failed with something other than ESRCH (a
    /// kernel before 5.3): the start time re-check alone pins then.
    pidfd: bool,
    /// `--dry-run`: moves and sched changes are logged, not made.
    dry_run: bool,
    /// What dry run already said (said once per pid and action).
    said: HashSet<String>,
    /// During a full scan: pid → cgroup (as /proc/PID/cgroup shows it) of
    /// every process in a policy group, from one `cgroup.procs` read per
    /// group ([`KernelOps::begin_scan`]).
    members: Option<HashMap<i32, String>>,
    /// Each group's `cgroup.procs`, kept open between moves.
    procs_files: ProcsFiles,
    /// cgwarden's groups as /proc shows them, for [`foreign::owner`].
    domain: Domain,
    /// The cgroup2 mount (a device path): where a shown cgroup's directory is.
    mount: PathBuf,
}

impl KernelOps {
    pub(crate) fn new(root: Root, policy: &Policy) -> KernelOps {
        let cg = CgroupFs::new(root.clone(), policy.settings.cgroup_root.clone());
        let prefix = cg.proc_prefix();
        let mount = cg.mount();
        let all = policy.all_groups();
        let domain = Domain::new(
            &prefix,
            all.iter().map(|g| (g.name.as_str(), g.path.as_str())),
            crate::kernel::hook_run::HOOKS_PARENT,
        );
        let groups = all
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
            // Processes behind /proc are the kernel's exactly where the
            // process-events connector is (not on a fake tree).
            pidfd: root.supports(Op::ProcConnector),
            root,
            cg,
            groups,
            dry_run: false,
            said: HashSet::new(),
            members: None,
            procs_files: ProcsFiles::default(),
            domain,
            mount,
        }
    }

    /// A full scan starts: where the processes in policy groups are is read
    /// from each group's `cgroup.procs` (one read per group) instead of one
    /// `/proc/PID/cgroup` read per process. Under an exec flood the rescan
    /// meets thousands of processes already placed, and every
    /// `/proc/PID/cgroup` read takes the kernel's cgroup lock that the moves
    /// and the flood itself contend for. A process moved by
    /// someone else after this snapshot is seen at the next scan.
    pub(crate) fn begin_scan(&mut self) {
        let mut members = HashMap::new();
        for (rel, shown) in self.groups.values() {
            if let Ok(pids) = self.cg.procs(rel) {
                for pid in pids {
                    members.insert(pid, shown.clone());
                }
            }
        }
        self.members = Some(members);
    }

    /// The scan is over: back to reading `/proc/PID/cgroup`.
    pub(crate) fn end_scan(&mut self) {
        self.members = None;
    }

    /// Under `--dry-run`: every move and sched change is logged
    /// (`would move PID COMM to GROUP (dry run)`), none is made.
    pub(crate) fn dry_run(mut self, dry: bool) -> KernelOps {
        self.dry_run = dry;
        self
    }

    /// Logs a dry-run action once (a fake root rescans every tick).
    fn say(&mut self, line: String) {
        if self.said.len() >= 4096 {
            self.said.clear();
        }
        if self.said.insert(line.clone()) {
            tracing::info!("{line}");
        }
    }

    fn comm_or_dash(&self, pid: i32) -> String {
        procfs::comm(&self.root, pid)
            .ok()
            .flatten()
            .unwrap_or_else(|| "-".into())
    }
}

/// Whether the pidfd still names a live process.
fn pidfd_alive(fd: BorrowedFd<'_>) -> bool {
    procfs::PidFd::alive_fd(fd)
}

impl PlaceOps for KernelOps {
    fn pin(&mut self, pid: i32) -> Option<Pin> {
        self.pin_inner(pid)
    }
    fn look(&mut self, pid: i32) -> Option<Pin> {
        self.look_inner(pid)
    }
    fn hold(&mut self, pid: i32, pin: &mut Pin) -> bool {
        self.hold_inner(pid, pin)
    }
    fn same(&mut self, pid: i32, pin: &Pin) -> bool {
        self.same_inner(pid, pin)
    }
    fn comm(&mut self, pid: i32) -> Option<String> {
        if pid == self.me || pid <= 0 {
            return None;
        }
        procfs::comm(&self.root, pid).ok().flatten()
    }
    fn facts(&mut self, pid: i32, comm: String, needs: FactNeeds) -> Option<OwnedFacts> {
        self.facts_inner(pid, comm, needs)
    }
    fn cgroup_of(&mut self, pid: i32) -> Option<String> {
        if let Some(shown) = self.members.as_ref().and_then(|m| m.get(&pid)) {
            return Some(shown.clone());
        }
        pid_cgroup(&self.root, pid).ok().flatten()
    }
    fn group_cgroup(&self, group: &str) -> Option<String> {
        self.groups.get(group).map(|(_, shown)| shown.clone())
    }
    fn known_cgroup(&mut self, pid: i32) -> Option<String> {
        self.members.as_ref()?.get(&pid).cloned()
    }
    fn owner_of(&mut self, cgroup: &str) -> Option<Owner> {
        let (root, mount) = (&self.root, &self.mount);
        foreign::owner(cgroup, &self.domain, |p| {
            xattr::delegated(root, &mount.join(p.trim_start_matches('/')))
        })
    }
    fn move_pid(&mut self, group: &str, pid: i32) -> Result<(), OpError> {
        self.move_inner(group, pid)
    }
    fn sched_is(&mut self, pid: i32, s: &Sched) -> bool {
        if !self.root.supports(Op::Sched) {
            return true; // no kernel behind a fake tree: sched is not attempted
        }
        super::sched_matches(&self.root, pid, s)
    }
    fn set_sched(&mut self, pid: i32, s: &Sched) -> Result<(), OpError> {
        self.set_sched_inner(pid, s)
    }
    fn children(&mut self, pid: i32, single_threaded: bool) -> Vec<i32> {
        if single_threaded {
            procfs::main_thread_children(&self.root, pid)
        } else {
            procfs::children(&self.root, pid)
        }
    }
}

impl KernelOps {
    fn pin_inner(&mut self, pid: i32) -> Option<Pin> {
        if pid == self.me || pid <= 0 {
            return None;
        }
        // The pidfd first: then the start time read after it is the start
        // of the process the pidfd holds (or the pid was reused before the
        // open and the facts read below are that new process's own).
        let fd = self.pidfd_of(pid).ok()?;
        let mut pin = self.look_inner(pid)?;
        pin.fd = fd;
        Some(pin)
    }
    /// The stat read alone (comm, start time, threads), no pidfd.
    fn look_inner(&mut self, pid: i32) -> Option<Pin> {
        if pid == self.me || pid <= 0 {
            return None;
        }
        let f = procfs::pin_facts(&self.root, pid).ok()??;
        Some(Pin {
            start: f.start,
            fd: None,
            comm: f.comm,
            threads: f.threads,
            kernel_thread: f.kernel_thread,
        })
    }
    fn hold_inner(&mut self, pid: i32, pin: &mut Pin) -> bool {
        match self.pidfd_of(pid) {
            Ok(fd) => {
                pin.fd = fd;
                true
            }
            Err(()) => false,
        }
    }
    /// A pidfd on `pid`: `Ok(None)` where pidfds are unavailable (then
    /// processes are pinned by start time only), `Err` when it is gone.
    fn pidfd_of(&mut self, pid: i32) -> Result<Option<std::os::fd::OwnedFd>, ()> {
        if !self.pidfd {
            return Ok(None);
        }
        match procfs::pidfd_open(pid) {
            Ok(fd) => Ok(Some(fd.into())),
            Err(procfs::PidFdError::Gone) => Err(()),
            Err(procfs::PidFdError::Unavailable(errno)) => {
                tracing::info!(
                    errno,
                    "pidfd_open unavailable; placement pins processes by start time only"
                );
                self.pidfd = false;
                Ok(None)
            }
        }
    }
    fn same_inner(&mut self, pid: i32, pin: &Pin) -> bool {
        if let Some(fd) = &pin.fd {
            // A live pidfd's process still owns its pid (a pid is freed
            // only when reaped): no second /proc read (a flood
            // pays every read per process).
            return pidfd_alive(fd.as_fd());
        }
        match procfs::start_time(&self.root, pid) {
            Ok(Some(now)) => pin.start.is_none() || now == pin.start,
            _ => false,
        }
    }
    fn facts_inner(&mut self, pid: i32, comm: String, needs: FactNeeds) -> Option<OwnedFacts> {
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
    fn move_inner(&mut self, group: &str, pid: i32) -> Result<(), OpError> {
        let Some((rel, _)) = self.groups.get(group) else {
            return Err(OpError::Refused(format!("no group {group}")));
        };
        if self.dry_run {
            let comm = self.comm_or_dash(pid);
            self.say(format!("would move {pid} {comm} to {group} (dry run)"));
            return Ok(());
        }
        match self.cg.move_pid_kept(&mut self.procs_files, rel, pid) {
            Ok(()) => {
                if let Some(m) = self.members.as_mut() {
                    if let Some((_, shown)) = self.groups.get(group) {
                        m.insert(pid, shown.clone());
                    }
                }
                Ok(())
            }
            Err(e) if e.is_gone() || e.errno() == Some(libc::ESRCH) => Err(OpError::Gone),
            Err(e) => Err(OpError::Refused(e.to_string())),
        }
    }
    fn set_sched_inner(&mut self, pid: i32, s: &Sched) -> Result<(), OpError> {
        let spec = super::sched_spec(s);
        if self.dry_run {
            let comm = self.comm_or_dash(pid);
            self.say(format!("would set sched {spec} on {pid} {comm} (dry run)"));
            return Ok(());
        }
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
}

/// [`PlaceOps`] for `plan`/`apply`: reads through [`KernelOps`], records a
/// [`Step`] for each move and sched change instead of making it, and
/// remembers where it "moved" a process so descendants are judged against
/// the plan.
pub(crate) struct PlanOps {
    pub(crate) kernel: KernelOps,
    pub(crate) steps: Vec<Step>,
    cg: CgroupFs,
    paths: HashMap<String, String>,
    comms: HashMap<i32, String>,
}

impl PlanOps {
    pub(crate) fn new(root: Root, policy: &Policy) -> Self {
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
    fn pin(&mut self, pid: i32) -> Option<Pin> {
        self.kernel.pin(pid)
    }
    fn same(&mut self, pid: i32, pin: &Pin) -> bool {
        self.kernel.same(pid, pin)
    }
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
    fn owner_of(&mut self, cgroup: &str) -> Option<Owner> {
        self.kernel.owner_of(cgroup)
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
    fn children(&mut self, pid: i32, single_threaded: bool) -> Vec<i32> {
        self.kernel.children(pid, single_threaded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::placement::Placer;
    use crate::kernel::fake_tree::{FakeProcess, FakeTree};

    /// [`KernelOps`] on a fake tree, where pid `reuse` exits right after its
    /// facts are read and a new process takes the pid (a later start time).
    struct Racing {
        k: KernelOps,
        dir: std::path::PathBuf,
        reuse: Option<i32>,
    }

    impl PlaceOps for Racing {
        fn pin(&mut self, pid: i32) -> Option<Pin> {
            self.k.pin(pid)
        }
        fn same(&mut self, pid: i32, pin: &Pin) -> bool {
            self.k.same(pid, pin)
        }
        fn comm(&mut self, pid: i32) -> Option<String> {
            self.k.comm(pid)
        }
        fn facts(&mut self, pid: i32, comm: String, needs: FactNeeds) -> Option<OwnedFacts> {
            let f = self.k.facts(pid, comm, needs);
            if self.reuse == Some(pid) {
                let stat = self.dir.join(format!("proc/{pid}/stat"));
                let text = std::fs::read_to_string(&stat).unwrap_or_default();
                // Field 22 (start time) of the fake tree's stat is 100.
                let text = text.replacen(" 0 100 ", " 0 5000 ", 1);
                assert!(text.contains(" 5000 "), "{text}");
                std::fs::write(&stat, text).unwrap_or_default();
                std::fs::write(self.dir.join(format!("proc/{pid}/comm")), "bash\n")
                    .unwrap_or_default();
            }
            f
        }
        fn cgroup_of(&mut self, pid: i32) -> Option<String> {
            self.k.cgroup_of(pid)
        }
        fn group_cgroup(&self, group: &str) -> Option<String> {
            self.k.group_cgroup(group)
        }
        fn owner_of(&mut self, cgroup: &str) -> Option<Owner> {
            self.k.owner_of(cgroup)
        }
        fn move_pid(&mut self, group: &str, pid: i32) -> Result<(), OpError> {
            self.k.move_pid(group, pid)
        }
        fn sched_is(&mut self, pid: i32, s: &Sched) -> bool {
            self.k.sched_is(pid, s)
        }
        fn set_sched(&mut self, pid: i32, s: &Sched) -> Result<(), OpError> {
            self.k.set_sched(pid, s)
        }
        fn children(&mut self, pid: i32, single_threaded: bool) -> Vec<i32> {
            self.k.children(pid, single_threaded)
        }
    }

    #[test]
    fn a_fake_pid_replaced_between_facts_and_move_is_not_moved() {
        let t = tempfile::TempDir::new().unwrap();
        let tree = FakeTree::standard(t.path()).unwrap();
        std::fs::create_dir_all(t.path().join("sys/fs/cgroup/rt")).unwrap();
        std::fs::write(t.path().join("sys/fs/cgroup/rt/cgroup.procs"), "").unwrap();
        tree.add_process(&FakeProcess::new(400, "rtloop")).unwrap();
        tree.add_process(&FakeProcess::new(401, "rtloop")).unwrap();
        let policy = crate::policy::load_bytes(
            "p.yaml",
            // A cmdline in the match: the facts are read (a comm-only match
            // reads none past the pin), and the race is after them.
            b"version: 1\nproduct: t\ngroups:\n  rt: {}\nplacement:\n  - match: { comm: \"rtloop*\", cmdline: \"*\" }\n    group: rt\n",
        )
        .unwrap();
        let root = Root::fake(t.path());
        let placer = Placer::new(&policy.placement, |_| None);
        let mut ops = Racing {
            k: KernelOps::new(root.clone(), &policy),
            dir: t.path().to_path_buf(),
            reuse: Some(400),
        };
        let r = placer.place(400, &mut ops);
        assert_eq!((r.gone, r.moved), (1, false), "{r:?}");
        let cg = |pid: i32| pid_cgroup(&root, pid).unwrap().unwrap_or_default();
        assert_eq!(cg(400), "/", "the pid's new owner was moved");
        // Unchanged: moved.
        let r = placer.place(401, &mut ops);
        assert_eq!((r.gone, r.moved), (0, true), "{r:?}");
        assert_eq!(cg(401), "/rt");
        // The pin itself: same start → same; another start or gone → not.
        let pin = ops.k.pin(401).unwrap();
        assert_eq!(pin.start, Some(100));
        assert!(pin.fd.is_none(), "no pidfd on a fake tree");
        assert!(ops.k.same(401, &pin));
        std::fs::remove_dir_all(t.path().join("proc/401")).unwrap();
        assert!(!ops.k.same(401, &pin));
        assert!(ops.k.pin(401).is_none());
    }

    #[test]
    fn a_scan_reads_where_placed_processes_are_from_the_groups_procs() {
        let t = tempfile::TempDir::new().unwrap();
        let tree = FakeTree::standard(t.path()).unwrap();
        std::fs::create_dir_all(t.path().join("sys/fs/cgroup/rt")).unwrap();
        std::fs::write(t.path().join("sys/fs/cgroup/rt/cgroup.procs"), "410\n").unwrap();
        // /proc says 410 is in the root: only a scan's snapshot says /rt.
        tree.add_process(&FakeProcess::new(410, "rtloop")).unwrap();
        tree.add_process(&FakeProcess::new(411, "rtloop")).unwrap();
        let policy = crate::policy::load_bytes(
            "p.yaml",
            b"version: 1\nproduct: t\ngroups:\n  rt: {}\nplacement:\n  - match: { comm: \"rtloop*\" }\n    group: rt\n",
        )
        .unwrap();
        let mut k = KernelOps::new(Root::fake(t.path()), &policy);
        assert_eq!(k.cgroup_of(410).as_deref(), Some("/"));
        k.begin_scan();
        assert_eq!(k.cgroup_of(410).as_deref(), Some("/rt"));
        assert_eq!(
            k.cgroup_of(411).as_deref(),
            Some("/"),
            "not in a group: /proc"
        );
        // A move during the scan is remembered (descendants are judged by it).
        k.move_pid("rt", 411).unwrap();
        assert_eq!(k.cgroup_of(411).as_deref(), Some("/rt"));
        k.end_scan();
        assert_eq!(k.cgroup_of(410).as_deref(), Some("/"));
    }

    #[test]
    fn a_real_process_is_pinned_by_pidfd_and_an_exited_one_is_not_same() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let policy = crate::policy::load_bytes("p.yaml", b"version: 1\nproduct: t\n").unwrap();
        let mut k = KernelOps::new(Root::real(), &policy);
        let pin = k.pin(pid);
        let _ = child.kill();
        let _ = child.wait();
        let pin = pin.expect("a live child is pinned");
        assert!(pin.start.is_some());
        assert!(!k.same(pid, &pin), "an exited process is still `same`");
    }
}
