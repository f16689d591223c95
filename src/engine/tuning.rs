//! What a placement's per-process attributes and `threads:` ask of each
//! thread of a matched process, and what must change given what
//! the thread has now. Pure: the kernel layer reads the threads
//! ([`ThreadNow`]) and carries out the [`TaskOp`]s.
//!
//! Merge: a thread gets the process's attributes (`nice`, `ioprio`, `cpus`,
//! `uclamp`), each overridden by the first `threads:` entry whose `name`
//! glob matches the thread's comm; that entry's `sched` and `group` apply
//! to that thread only. `oom_score_adj` belongs to the process (the kernel
//! keeps one per process) and is set once, through the main thread.

use crate::policy::model::{IoPrio, Sched, TaskAttrs, TaskUclamp, ThreadRule, Tuning};
use crate::units::CpuList;
use glob::Pattern;
use std::fmt;

/// What one thread is to have.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Want {
    pub(crate) attrs: TaskAttrs,
    pub(crate) sched: Option<Sched>,
    /// A threaded group (policy name) the thread is moved to.
    pub(crate) group: Option<String>,
    /// Index of the `threads:` entry that matched, if any (for logs).
    pub(crate) rule: Option<usize>,
}

/// A thread as the kernel layer read it; `None`: not known (could not be
/// read here, e.g. a syscall-only value on a fake tree), which always
/// counts as different.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ThreadNow {
    pub(crate) tid: i32,
    pub(crate) comm: String,
    pub(crate) nice: Option<i32>,
    pub(crate) oom_score_adj: Option<i32>,
    pub(crate) ioprio: Option<IoPrio>,
    pub(crate) cpus: Option<CpuList>,
    /// Per-task clamps as the kernel keeps them (0..=1024).
    pub(crate) uclamp: Option<(u32, u32)>,
    /// Whether the thread already has the wanted sched (the kernel layer
    /// compares; `None`: nothing wanted or not readable).
    pub(crate) sched_ok: Option<bool>,
    /// The thread's cgroup as `/proc/PID/task/TID/cgroup` shows it.
    pub(crate) cgroup: Option<String>,
}

/// One change to one thread.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TaskOp {
    Nice(i32),
    /// Per process (written through the main thread).
    OomScoreAdj(i32),
    IoPrio(IoPrio),
    Cpus(CpuList),
    Uclamp(TaskUclamp),
    Sched(Sched),
    /// Into this threaded group (policy name) through `cgroup.threads`.
    Move(String),
}

impl TaskOp {
    /// The attribute's name, for logs and the journal.
    pub(crate) fn attr(&self) -> &'static str {
        match self {
            TaskOp::Nice(_) => "nice",
            TaskOp::OomScoreAdj(_) => "oom_score_adj",
            TaskOp::IoPrio(_) => "ioprio",
            TaskOp::Cpus(_) => "cpus",
            TaskOp::Uclamp(_) => "uclamp",
            TaskOp::Sched(_) => "sched",
            TaskOp::Move(_) => "group",
        }
    }
}

impl fmt::Display for TaskOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskOp::Nice(n) => write!(f, "nice {n}"),
            TaskOp::OomScoreAdj(n) => write!(f, "oom_score_adj {n}"),
            TaskOp::IoPrio(p) => write!(f, "ioprio {} {}", p.class.as_str(), p.level),
            TaskOp::Cpus(c) => write!(f, "cpus {c}"),
            TaskOp::Uclamp(u) => {
                f.write_str("uclamp")?;
                if let Some(m) = u.min {
                    write!(f, " min {m}")?;
                }
                if let Some(m) = u.max {
                    write!(f, " max {m}")?;
                }
                Ok(())
            }
            TaskOp::Sched(s) => {
                write!(f, "sched {}", s.policy.as_str())?;
                if let Some(p) = s.priority {
                    write!(f, " {p}")?;
                }
                if let Some(n) = s.nice {
                    write!(f, " nice {n}")?;
                }
                Ok(())
            }
            TaskOp::Move(g) => write!(f, "group {g}"),
        }
    }
}

/// A placement's tuning compiled once: the thread globs.
#[derive(Debug, Default)]
pub(crate) struct Compiled {
    pub(crate) tuning: Tuning,
    names: Vec<Option<Pattern>>,
}

impl Compiled {
    pub(crate) fn new(tuning: &Tuning) -> Compiled {
        Compiled {
            names: tuning
                .threads
                .iter()
                .map(|t| Pattern::new(&t.name).ok())
                .collect(),
            tuning: tuning.clone(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tuning.is_empty()
    }

    /// Whether some `threads:` entry exists (renames then matter).
    pub(crate) fn has_threads(&self) -> bool {
        !self.tuning.threads.is_empty()
    }

    /// The first `threads:` entry matching a thread's comm.
    pub(crate) fn thread_rule(&self, comm: &str) -> Option<(usize, &ThreadRule)> {
        self.tuning
            .threads
            .iter()
            .zip(&self.names)
            .enumerate()
            .find(|(_, (t, p))| match p {
                Some(p) => p.matches(comm),
                None => t.name == comm,
            })
            .map(|(i, (t, _))| (i, t))
    }

    /// What the thread with this comm is to have (process attributes,
    /// overridden field by field by its `threads:` entry).
    pub(crate) fn want(&self, comm: &str) -> Want {
        let mut w = Want {
            attrs: self.tuning.attrs.clone(),
            ..Want::default()
        };
        // Per process, not per thread.
        w.attrs.oom_score_adj = None;
        if let Some((i, t)) = self.thread_rule(comm) {
            w.rule = Some(i);
            w.attrs = merge(&w.attrs, &t.attrs);
            w.sched = t.sched.clone();
            w.group = t.group.clone();
        }
        w
    }
}

/// `over`'s fields where set, else `base`'s.
pub(crate) fn merge(base: &TaskAttrs, over: &TaskAttrs) -> TaskAttrs {
    TaskAttrs {
        nice: over.nice.or(base.nice),
        oom_score_adj: over.oom_score_adj.or(base.oom_score_adj),
        ioprio: over.ioprio.or(base.ioprio),
        cpus: over.cpus.clone().or_else(|| base.cpus.clone()),
        uclamp: match (over.uclamp, base.uclamp) {
            (Some(o), Some(b)) => Some(TaskUclamp {
                min: o.min.or(b.min),
                max: o.max.or(b.max),
            }),
            (o, b) => o.or(b),
        },
    }
}

/// A percentage as the kernel's clamp value (0..=1024), rounded like
/// `cpu.uclamp.*` (`capacity * percent / 100`).
pub(crate) fn uclamp_value(p: crate::units::Percent) -> u32 {
    ((p.value() * 1024.0 / 100.0).round() as u32).min(1024)
}

/// The changes that bring thread `now` to `want`, in the order they are
/// made: group first (a move can change what cpus are allowed), then
/// affinity, sched, nice, ioprio, uclamp. `main`: the process's main
/// thread, which also carries `oom_score_adj`. `group_cgroup` maps a
/// policy group to its cgroup as `/proc/…/cgroup` shows it.
pub(crate) fn ops(
    want: &Want,
    oom_score_adj: Option<i32>,
    main: bool,
    now: &ThreadNow,
    group_cgroup: &dyn Fn(&str) -> Option<String>,
) -> Vec<TaskOp> {
    let mut out = Vec::new();
    if let Some(g) = &want.group {
        let target = group_cgroup(g);
        if target.is_none() || target != now.cgroup {
            out.push(TaskOp::Move(g.clone()));
        }
    }
    let a = &want.attrs;
    if let Some(c) = &a.cpus {
        if now.cpus.as_ref() != Some(c) {
            out.push(TaskOp::Cpus(c.clone()));
        }
    }
    if let Some(s) = &want.sched {
        if now.sched_ok != Some(true) {
            out.push(TaskOp::Sched(s.clone()));
        }
    }
    // A fifo/rr sched has no nice; other/batch/idle in `sched` carry their own.
    let sched_has_nice = want.sched.is_some();
    if let (Some(n), false) = (a.nice, sched_has_nice) {
        if now.nice != Some(n) {
            out.push(TaskOp::Nice(n));
        }
    }
    if let Some(p) = a.ioprio {
        if now.ioprio != Some(p) {
            out.push(TaskOp::IoPrio(p));
        }
    }
    if let Some(u) = a.uclamp {
        let (min, max) = now.uclamp.unwrap_or((u32::MAX, u32::MAX));
        let differs = u.min.is_some_and(|m| uclamp_value(m) != min)
            || u.max.is_some_and(|m| uclamp_value(m) != max)
            || now.uclamp.is_none();
        if differs {
            out.push(TaskOp::Uclamp(u));
        }
    }
    if main {
        if let Some(adj) = oom_score_adj {
            if now.oom_score_adj != Some(adj) {
                out.push(TaskOp::OomScoreAdj(adj));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::model::{IoClass, SchedPolicy};
    use crate::policy::yaml::Pos;
    use crate::units::Percent;
    use proptest::prelude::*;

    fn fifo(p: u32) -> Sched {
        Sched {
            policy: SchedPolicy::Fifo,
            priority: Some(p),
            nice: None,
            deadline: None,
        }
    }

    fn ros() -> Compiled {
        Compiled::new(&Tuning {
            attrs: TaskAttrs {
                nice: Some(-5),
                oom_score_adj: Some(-900),
                ioprio: Some(IoPrio {
                    class: IoClass::Be,
                    level: 2,
                }),
                cpus: Some(CpuList::parse("2-3").unwrap()),
                uclamp: Some(TaskUclamp {
                    min: Some(Percent(20.0)),
                    max: None,
                }),
            },
            threads: vec![
                ThreadRule {
                    name: "ctrl".into(),
                    group: Some("rt".into()),
                    sched: Some(fifo(90)),
                    attrs: TaskAttrs {
                        cpus: Some(CpuList::parse("3").unwrap()),
                        uclamp: Some(TaskUclamp {
                            min: None,
                            max: Some(Percent(100.0)),
                        }),
                        ..TaskAttrs::default()
                    },
                    pos: Pos::default(),
                },
                ThreadRule {
                    name: "ctrl*".into(),
                    group: None,
                    sched: Some(fifo(10)),
                    attrs: TaskAttrs::default(),
                    pos: Pos::default(),
                },
            ],
        })
    }

    #[test]
    fn the_first_matching_thread_entry_overrides_the_process_field_by_field() {
        let c = ros();
        let w = c.want("ctrl");
        assert_eq!(w.rule, Some(0));
        assert_eq!(w.sched, Some(fifo(90)));
        assert_eq!(w.group.as_deref(), Some("rt"));
        assert_eq!(w.attrs.cpus, Some(CpuList::parse("3").unwrap()));
        assert_eq!(w.attrs.nice, Some(-5), "kept from the process");
        assert_eq!(
            w.attrs.uclamp,
            Some(TaskUclamp {
                min: Some(Percent(20.0)),
                max: Some(Percent(100.0))
            })
        );
        assert_eq!(w.attrs.oom_score_adj, None, "per process, not per thread");
        assert_eq!(c.want("ctrl2").sched, Some(fifo(10)));
        let log = c.want("log");
        assert_eq!(log.rule, None);
        assert_eq!(log.sched, None);
        assert_eq!(log.group, None);
        assert_eq!(log.attrs.cpus, Some(CpuList::parse("2-3").unwrap()));
    }

    #[test]
    fn only_what_differs_is_changed_and_oom_score_adj_only_on_the_main_thread() {
        let c = ros();
        let w = c.want("log");
        let now = ThreadNow {
            tid: 11,
            comm: "log".into(),
            nice: Some(-5),
            oom_score_adj: Some(0),
            ioprio: Some(IoPrio {
                class: IoClass::Be,
                level: 4,
            }),
            cpus: Some(CpuList::parse("2-3").unwrap()),
            uclamp: Some((uclamp_value(Percent(20.0)), 1024)),
            sched_ok: None,
            cgroup: Some("/app".into()),
        };
        let none = |_: &str| None;
        assert_eq!(
            ops(&w, Some(-900), false, &now, &none),
            vec![TaskOp::IoPrio(IoPrio {
                class: IoClass::Be,
                level: 2
            })]
        );
        assert_eq!(
            ops(&w, Some(-900), true, &now, &none),
            vec![
                TaskOp::IoPrio(IoPrio {
                    class: IoClass::Be,
                    level: 2
                }),
                TaskOp::OomScoreAdj(-900)
            ]
        );
        let ctrl = c.want("ctrl");
        let rt = |g: &str| (g == "rt").then(|| "/app/rt".to_string());
        let mut now_ctrl = now.clone();
        now_ctrl.cgroup = Some("/app/rt".into());
        now_ctrl.sched_ok = Some(true);
        now_ctrl.cpus = Some(CpuList::parse("3").unwrap());
        now_ctrl.ioprio = Some(IoPrio {
            class: IoClass::Be,
            level: 2,
        });
        now_ctrl.uclamp = Some((uclamp_value(Percent(20.0)), 1024));
        assert_eq!(ops(&ctrl, None, false, &now_ctrl, &rt), vec![]);
        now_ctrl.cgroup = Some("/app".into());
        now_ctrl.sched_ok = Some(false);
        assert_eq!(
            ops(&ctrl, None, false, &now_ctrl, &rt),
            vec![TaskOp::Move("rt".into()), TaskOp::Sched(fifo(90))]
        );
    }

    #[test]
    fn unknown_values_count_as_different() {
        let c = ros();
        let w = c.want("x");
        let now = ThreadNow::default();
        let got = ops(&w, Some(-900), true, &now, &|_| None);
        let names: Vec<&str> = got.iter().map(TaskOp::attr).collect();
        assert_eq!(names, ["cpus", "nice", "ioprio", "uclamp", "oom_score_adj"]);
    }

    fn attrs() -> impl Strategy<Value = TaskAttrs> {
        (
            proptest::option::of(-20i32..20),
            proptest::option::of(0u32..4),
            proptest::option::of(0u32..=100),
        )
            .prop_map(|(nice, cpu, min)| TaskAttrs {
                nice,
                cpus: cpu.map(|c| CpuList::parse(&c.to_string()).unwrap()),
                uclamp: min.map(|m| TaskUclamp {
                    min: Some(Percent(f64::from(m))),
                    max: None,
                }),
                ..TaskAttrs::default()
            })
    }

    proptest! {
        /// A merged field is the override's when it sets it, else the base's;
        /// and a thread that has what the merge asks needs no change.
        #[test]
        fn merge_prefers_the_override_and_a_converged_thread_needs_nothing(
            base in attrs(), over in attrs()
        ) {
            let m = merge(&base, &over);
            prop_assert_eq!(m.nice, over.nice.or(base.nice));
            prop_assert_eq!(m.cpus.as_ref(), over.cpus.as_ref().or(base.cpus.as_ref()));
            let w = Want { attrs: m.clone(), ..Want::default() };
            let now = ThreadNow {
                nice: m.nice,
                cpus: m.cpus.clone(),
                uclamp: m.uclamp.map(|u| (u.min.map_or(0, uclamp_value), 1024)),
                ..ThreadNow::default()
            };
            prop_assert_eq!(ops(&w, None, false, &now, &|_| None), vec![]);
        }
    }
}
