//! Per-process attributes and `threads:` of placements on the
//! kernel: each thread of a matched process is read
//! ([`crate::engine::tuning::ThreadNow`]), the engine says what differs,
//! and the changes are made thread by thread. Shared by `plan`/`apply`
//! (as [`super::Step::Task`]) and the daemon's exec path and scans.
//!
//! A fake tree has no kernel behind it: nice, affinity and cgroup are read
//! from its files, ioprio and uclamp are unknown, and only `oom_score_adj`
//! and thread moves are written (plain files there).

pub(crate) mod journal;

use crate::engine::tuning::{self, Compiled, TaskOp, ThreadNow};
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::{procfs, task_attr, Op, Root};
use crate::policy::model::{IoClass, IoPrio, Policy, SchedPolicy};
use std::collections::HashMap;
use std::path::PathBuf;

/// One change to one thread, ready to show or make.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TaskChange {
    pub(crate) pid: i32,
    pub(crate) tid: i32,
    /// The thread's comm.
    pub(crate) comm: String,
    pub(crate) op: TaskOp,
    /// The value before, as shown (`-` when not readable here).
    pub(crate) was: String,
    /// Why the change is not made (a real-time sched on a match by name
    /// only, for a process not root's: [`crate::policy::rt_by_name`]).
    pub(crate) denied: Option<String>,
}

/// The placements' tunings, by placement index.
pub(crate) struct Tuner {
    root: Root,
    rules: Vec<Compiled>,
    /// Per rule: a real-time `threads:` sched is granted to root's
    /// processes only (the match is by name only).
    rt_root_only: Vec<bool>,
    /// group name → (directory, cgroup as `/proc/…/cgroup` shows it)
    groups: HashMap<String, (PathBuf, String)>,
    /// `state_dir/tasks.journal` and what this process wrote to it.
    journal_file: PathBuf,
    writer: std::cell::RefCell<journal::Writer>,
}

impl Tuner {
    pub(crate) fn new(root: Root, policy: &Policy) -> Tuner {
        let cg = CgroupFs::new(root.clone(), policy.settings.cgroup_root.clone());
        let prefix = cg.proc_prefix();
        let groups = policy
            .all_groups()
            .into_iter()
            .map(|g| {
                (
                    g.name.clone(),
                    (cg.dir(&g.path), format!("{prefix}/{}", g.path)),
                )
            })
            .collect();
        Tuner {
            rt_root_only: policy
                .placement
                .iter()
                .map(crate::policy::rt_by_name)
                .collect(),
            rules: policy
                .placement
                .iter()
                .map(|p| Compiled::new(&p.tuning))
                .collect(),
            root,
            groups,
            journal_file: journal::path(&policy.settings.state_dir),
            writer: Default::default(),
        }
    }

    /// Journals the originals of what `changes` will change (the first
    /// time per process, thread and attribute), before it is changed.
    pub(crate) fn journal(&self, changes: &[TaskChange]) -> Result<(), String> {
        let mut originals = Vec::new();
        for ch in changes {
            if matches!(ch.op, TaskOp::Move(_)) || ch.denied.is_some() || !self.possible(&ch.op) {
                continue; // a move is undone by reset moving the process out
            }
            let Ok(Some(Some(start))) = procfs::start_time(&self.root, ch.pid) else {
                continue; // gone, or not tellable: nothing to restore on
            };
            if let Some(value) = journal::read(&self.root, ch.pid, ch.tid, ch.op.attr()) {
                originals.push(journal::Original {
                    pid: ch.pid,
                    start,
                    tid: ch.tid,
                    attr: ch.op.attr().to_string(),
                    value,
                });
            }
        }
        self.writer
            .borrow_mut()
            .append(&self.root, &self.journal_file, originals)
    }

    /// Whether no placement sets attributes or threads.
    pub(crate) fn is_empty(&self) -> bool {
        self.rules.iter().all(Compiled::is_empty)
    }

    /// Whether some placement has `threads:` entries.
    pub(crate) fn follows_any_threads(&self) -> bool {
        self.rules.iter().any(Compiled::has_threads)
    }

    /// Whether placement `rule` has `threads:` entries (a thread's rename
    /// then matters).
    pub(crate) fn follows_threads(&self, rule: usize) -> bool {
        self.rules.get(rule).is_some_and(Compiled::has_threads)
    }

    /// What must change on every thread of `pid`, placed by rule `rule`.
    pub(crate) fn changes(&self, pid: i32, rule: usize) -> Vec<TaskChange> {
        let Some(c) = self.rules.get(rule).filter(|c| !c.is_empty()) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for tid in procfs::threads(&self.root, pid) {
            self.thread_changes(c, pid, tid, &mut out);
        }
        self.grant(rule, pid, &mut out);
        out
    }

    /// What must change on thread `tid` of `pid` (placed by `rule`) alone,
    /// e.g. after it renamed itself.
    pub(crate) fn thread(&self, pid: i32, tid: i32, rule: usize) -> Vec<TaskChange> {
        let mut out = Vec::new();
        if let Some(c) = self.rules.get(rule).filter(|c| !c.is_empty()) {
            self.thread_changes(c, pid, tid, &mut out);
        }
        self.grant(rule, pid, &mut out);
        out
    }

    /// Marks real-time sched changes denied when the rule matches by name
    /// only and the process is not root's.
    fn grant(&self, rule: usize, pid: i32, out: &mut [TaskChange]) {
        let rt = |op: &TaskOp| matches!(op, TaskOp::Sched(s) if matches!(s.policy, SchedPolicy::Fifo | SchedPolicy::Rr | SchedPolicy::Deadline));
        if !self.rt_root_only.get(rule).copied().unwrap_or(false) || !out.iter().any(|c| rt(&c.op))
        {
            return;
        }
        let uid = self
            .root
            .read(std::path::Path::new(&format!("/proc/{pid}/status")))
            .ok()
            .and_then(|t| procfs::parse_status(&t).0);
        if uid == Some(0) {
            return;
        }
        let uid = uid.map_or("unknown".to_string(), |u| u.to_string());
        for c in out.iter_mut().filter(|c| rt(&c.op)) {
            c.denied = Some(format!(
                "not granted: the match is by name only (comm/cmdline can be set by any user) and the process's uid is {uid}, not 0; add exe: or user: to the match"
            ));
        }
    }

    fn thread_changes(&self, c: &Compiled, pid: i32, tid: i32, out: &mut Vec<TaskChange>) {
        let Some(comm) = task_attr::thread_comm(&self.root, pid, tid) else {
            return; // gone
        };
        let want = c.want(&comm);
        let now = self.read(pid, tid, comm, want.sched.as_ref());
        let shown = |g: &str| self.groups.get(g).map(|(_, s)| s.clone());
        for op in tuning::ops(
            &want,
            c.tuning.attrs.oom_score_adj,
            tid == pid,
            &now,
            &shown,
        ) {
            out.push(TaskChange {
                pid,
                tid,
                comm: now.comm.clone(),
                was: was(&op, &now),
                op,
                denied: None,
            });
        }
    }

    fn read(
        &self,
        pid: i32,
        tid: i32,
        comm: String,
        sched: Option<&crate::policy::model::Sched>,
    ) -> ThreadNow {
        let r = &self.root;
        let nice = task_attr::nice(r, pid, tid);
        ThreadNow {
            tid,
            comm,
            nice,
            oom_score_adj: (tid == pid)
                .then(|| task_attr::oom_score_adj(r, pid))
                .flatten(),
            ioprio: task_attr::ioprio(r, tid)
                .map(|raw| task_attr::effective_ioprio(raw, nice.unwrap_or(0)))
                .and_then(|(class, level)| {
                    let class = match class {
                        1 => IoClass::Rt,
                        2 => IoClass::Be,
                        3 => IoClass::Idle,
                        _ => return None,
                    };
                    // The kernel ignores the level of idle.
                    let level = if class == IoClass::Idle { 4 } else { level };
                    Some(IoPrio { class, level })
                }),
            cpus: task_attr::affinity(r, pid, tid),
            uclamp: task_attr::uclamp(r, tid),
            sched_ok: sched.map(|s| r.supports(Op::Sched) && super::sched_matches(r, tid, s)),
            cgroup: task_attr::thread_cgroup(r, pid, tid),
        }
    }

    /// Whether the change can be made here (a fake tree takes only the
    /// file writes).
    pub(crate) fn possible(&self, op: &TaskOp) -> bool {
        self.root.supports(Op::Sched) || file_only(op)
    }

    /// Makes one change. ESRCH/ENOENT (the thread exited) come back as an
    /// error whose `is_gone()` is true.
    pub(crate) fn make(&self, ch: &TaskChange) -> crate::kernel::Result<()> {
        let tid = ch.tid;
        match &ch.op {
            TaskOp::Nice(n) => task_attr::set_nice(tid, *n),
            TaskOp::OomScoreAdj(v) => task_attr::set_oom_score_adj(&self.root, ch.pid, *v),
            TaskOp::IoPrio(p) => {
                let class = match p.class {
                    IoClass::Rt => 1,
                    IoClass::Be => 2,
                    IoClass::Idle => 3,
                };
                let level = if p.class == IoClass::Idle { 0 } else { p.level };
                task_attr::set_ioprio(tid, class, level)
            }
            TaskOp::Cpus(c) => task_attr::set_affinity(tid, c),
            TaskOp::Uclamp(u) => task_attr::set_uclamp(
                tid,
                u.min.map(tuning::uclamp_value),
                u.max.map(tuning::uclamp_value),
            ),
            TaskOp::Sched(s) => crate::kernel::sched::apply(tid, &super::sched_spec(s)),
            TaskOp::Move(g) => match self.groups.get(g) {
                Some((dir, _)) => task_attr::move_thread(&self.root, dir, tid),
                None => Err(crate::kernel::Error::other(
                    format!("/proc/{tid}"),
                    format!("group {g} unknown"),
                )),
            },
        }
    }

    /// Makes every change of `pid` (rule `rule`); returns what was done
    /// (`pid/tid (comm) op`) and what the kernel refused, each naming the
    /// thread, the change and the reason. Threads gone meanwhile are skipped.
    pub(crate) fn tune(&self, changes: &[TaskChange]) -> (Vec<String>, Vec<String>) {
        let (mut done, mut refused) = (Vec::new(), Vec::new());
        if let Err(e) = self.journal(changes) {
            refused.push(format!("journal: {e}"));
        }
        for ch in changes {
            if let Some(why) = &ch.denied {
                refused.push(format!("{ch}: {why}"));
                continue;
            }
            if !self.possible(&ch.op) {
                continue;
            }
            match self.make(ch) {
                Ok(()) => done.push(ch.to_string()),
                Err(e) if e.is_gone() => {}
                Err(e) => refused.push(format!("{ch}: {e}")),
            }
        }
        (done, refused)
    }
}

impl std::fmt::Display for TaskChange {
    /// `412/413 (ctrl) sched fifo 90 (was other)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{} ({}) {} (was {})",
            self.pid, self.tid, self.comm, self.op, self.was
        )
    }
}

/// Whether the change is a file write (possible on a fake tree too).
pub(crate) fn file_only(op: &TaskOp) -> bool {
    matches!(op, TaskOp::OomScoreAdj(_) | TaskOp::Move(_))
}

/// The current value of what `op` changes, as shown.
fn was(op: &TaskOp, now: &ThreadNow) -> String {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    match op {
        TaskOp::Nice(_) => opt(now.nice.map(|n| n.to_string())),
        TaskOp::OomScoreAdj(_) => opt(now.oom_score_adj.map(|n| n.to_string())),
        TaskOp::IoPrio(_) => opt(now
            .ioprio
            .map(|p| format!("{} {}", p.class.as_str(), p.level))),
        TaskOp::Cpus(_) => opt(now.cpus.as_ref().map(|c| c.to_string())),
        TaskOp::Uclamp(_) => opt(now.uclamp.map(|(a, b)| format!("{a}..{b}/1024"))),
        TaskOp::Sched(_) => "-".into(),
        TaskOp::Move(_) => opt(now.cgroup.clone()),
    }
}
