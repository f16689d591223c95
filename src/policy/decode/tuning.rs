//! A placement's per-process attributes and `threads:`, and the
//! checks of `type: threaded` groups. Kept apart from `decode.rs` so the
//! placement entry there only hands its fields over.

use super::{Decoder, Fields};
use crate::policy::diag::hint;
use crate::policy::model::{
    Group, IoClass, IoPrio, Placement, SchedPolicy, TaskAttrs, TaskUclamp, ThreadRule, Tuning,
};
use crate::policy::yaml::{Node, Pos};
use crate::units::{CpuList, Percent};

/// The placement entry's fields this module decodes.
pub(super) const PLACEMENT_FIELDS: &[&str] = &[
    "nice",
    "oom_score_adj",
    "ioprio",
    "cpus",
    "uclamp",
    "threads",
];

/// Controllers a `type: threaded` group may use (the kernel's threaded
/// controllers among those cgwarden manages).
const THREADED_KNOBS: &[&str] = &["cpuset", "cpu", "uclamp", "pids"];

impl<'a> Decoder<'a> {
    /// `nice`, `oom_score_adj`, `ioprio`, `cpus`, `uclamp` and `threads` of a
    /// placement entry.
    pub(super) fn tuning(&mut self, f: &Fields) -> Tuning {
        let mut attrs = self.task_attrs(f, "placement");
        attrs.oom_score_adj = f
            .get("oom_score_adj")
            .and_then(|n| self.int(n, "placement.oom_score_adj", -1000, 1000))
            .map(|v| v as i32);
        attrs.ioprio = f.get("ioprio").and_then(|n| self.ioprio(n));
        let mut threads = Vec::new();
        if let Some(n) = f.get("threads") {
            for item in self.seq(n, "placement.threads") {
                if let Some(t) = self.thread_rule(item) {
                    threads.push(t);
                }
            }
        }
        Tuning { attrs, threads }
    }

    /// The attributes a process and a thread entry share: nice, cpus, uclamp.
    fn task_attrs(&mut self, f: &Fields, what: &str) -> TaskAttrs {
        let nice = f
            .get("nice")
            .and_then(|n| self.int(n, &format!("{what}.nice"), -20, 19))
            .map(|v| v as i32);
        let cpus = f
            .get("cpus")
            .and_then(|n| self.unit(n, &format!("{what}.cpus"), CpuList::parse));
        if let (Some(c), Some(n)) = (&cpus, f.get("cpus")) {
            if c.is_empty() {
                self.err(n.pos, format!("{what}.cpus must name at least one CPU"));
            }
        }
        let uclamp = f.get("uclamp").and_then(|n| self.task_uclamp(n, what));
        TaskAttrs {
            nice,
            cpus,
            uclamp,
            ..TaskAttrs::default()
        }
    }

    fn task_uclamp(&mut self, node: &Node, what: &str) -> Option<TaskUclamp> {
        let f = self.fields(node, &format!("{what}.uclamp"), &["min", "max"])?;
        let min = f
            .get("min")
            .and_then(|n| self.unit(n, &format!("{what}.uclamp.min"), Percent::parse));
        let max = f
            .get("max")
            .and_then(|n| self.unit(n, &format!("{what}.uclamp.max"), Percent::parse));
        if let (Some(lo), Some(hi)) = (min, max) {
            if lo.value() > hi.value() {
                self.err(
                    node.pos,
                    format!("{what}.uclamp.min {lo} is greater than uclamp.max {hi}"),
                );
            }
        }
        if min.is_none() && max.is_none() {
            self.err(node.pos, format!("{what}.uclamp needs `min:` or `max:`"));
            return None;
        }
        Some(TaskUclamp { min, max })
    }

    fn ioprio(&mut self, node: &Node) -> Option<IoPrio> {
        let f = self.fields(node, "placement.ioprio", &["class", "level"])?;
        let class = match f.get("class") {
            None => {
                self.err(node.pos, "placement.ioprio needs `class:` (rt, be or idle)");
                return None;
            }
            Some(n) => match self.text(n, "placement.ioprio.class")?.as_str() {
                "rt" => IoClass::Rt,
                "be" => IoClass::Be,
                "idle" => IoClass::Idle,
                other => {
                    let h = hint(other, ["rt", "be", "idle"]);
                    self.err(
                        n.pos,
                        format!(
                            "placement.ioprio.class must be rt, be or idle, found `{other}`{h}"
                        ),
                    );
                    return None;
                }
            },
        };
        let level = match f.get("level") {
            Some(n) => self.int(n, "placement.ioprio.level", 0, 7)? as u8,
            // The kernel's default level for a class (IOPRIO_NORM).
            None => 4,
        };
        if class == IoClass::Idle && f.get("level").is_some() {
            if let Some(k) = f.key("level") {
                self.err(k.pos, "placement.ioprio.level does not apply to class idle");
            }
        }
        Some(IoPrio { class, level })
    }

    fn thread_rule(&mut self, node: &Node) -> Option<ThreadRule> {
        const WHAT: &str = "placement.threads entry";
        let f = self.fields(
            node,
            WHAT,
            &["name", "group", "sched", "nice", "cpus", "uclamp"],
        )?;
        let name = match f.get("name") {
            None => {
                self.err(
                    node.pos,
                    format!("{WHAT} needs `name:` (a thread comm glob)"),
                );
                return None;
            }
            Some(n) => {
                let text = self.text(n, "threads.name")?;
                if text.is_empty() {
                    self.err(n.pos, "threads.name must not be empty");
                    return None;
                }
                if let Err(e) = glob::Pattern::new(&text) {
                    self.err(
                        n.pos,
                        format!("threads.name `{text}` is not a valid glob: {e}"),
                    );
                    return None;
                }
                if !text.contains(['*', '?', '[']) && text.len() > 15 {
                    self.err(
                        n.pos,
                        format!(
                            "threads.name `{text}` is longer than 15 bytes; the kernel truncates a thread's comm, so it would never match"
                        ),
                    );
                }
                text
            }
        };
        let group = f
            .get("group")
            .and_then(|n| self.text(n, "threads.group").map(|g| (g, n.pos)));
        let sched = f.get("sched").and_then(|n| self.sched(n));
        if let (Some(s), Some(n)) = (&sched, f.get("sched")) {
            if s.policy == SchedPolicy::Deadline {
                self.err(n.pos, "threads.sched: deadline is not supported per thread");
            }
        }
        let attrs = self.task_attrs(&f, "threads");
        if let (Some(s), Some(k)) = (&sched, f.key("nice")) {
            if s.nice.is_some() || matches!(s.policy, SchedPolicy::Fifo | SchedPolicy::Rr) {
                self.err(
                    k.pos,
                    "threads: give nice either in `sched:` or beside it, not both (and not with fifo/rr)",
                );
            }
        }
        if sched.is_none() && attrs.is_empty() && group.is_none() {
            self.err(
                node.pos,
                format!("{WHAT} `{name}` sets nothing: give group, sched, nice, cpus or uclamp"),
            );
        }
        Some(ThreadRule {
            name,
            group: group.map(|(g, _)| g),
            sched,
            attrs,
            pos: node.pos,
        })
    }

    /// `settings.critical`: a list of comm globs.
    pub(super) fn critical(&mut self, node: &Node) -> Vec<String> {
        let mut out = Vec::new();
        for item in self.seq(node, "settings.critical") {
            let Some(text) = self.text(item, "settings.critical entry") else {
                continue;
            };
            if text.is_empty() {
                self.err(item.pos, "settings.critical: a name must not be empty");
            } else if let Err(e) = glob::Pattern::new(&text) {
                self.err(
                    item.pos,
                    format!("settings.critical `{text}` is not a valid glob: {e}"),
                );
            } else if !text.contains(['*', '?', '[']) && text.len() > 15 {
                self.err(
                    item.pos,
                    format!("settings.critical `{text}` is longer than 15 bytes; the kernel truncates comm, so it would never match"),
                );
            } else if !out.contains(&text) {
                out.push(text);
            }
        }
        out
    }

    /// `type: domain|threaded` of a group (default domain).
    pub(super) fn group_type(&mut self, node: &Node, gname: &str) -> bool {
        match self.text(node, &format!("{gname}.type")).as_deref() {
            Some("threaded") => true,
            Some("domain") | None => false,
            Some(other) => {
                let h = hint(other, ["domain", "threaded"]);
                self.err(
                    node.pos,
                    format!("{gname}.type must be domain or threaded, found `{other}`{h}"),
                );
                false
            }
        }
    }

    /// Tree-wide checks of threaded groups: only threaded controllers, a
    /// threaded group's children threaded too, and never the top level
    /// (a threaded subtree needs a domain above it that cgwarden creates).
    pub(super) fn check_threaded(&mut self, groups: &[Group]) {
        for g in groups {
            if g.threaded {
                self.err(
                    g.pos,
                    format!(
                        "group `{}` is `type: threaded` at the top level: a threaded group must be the child of a domain group its process is placed in",
                        g.name
                    ),
                );
            }
        }
        for g in groups.iter().flat_map(|g| g.walk()) {
            if g.threaded {
                let used = [("memory", g.memory_used()), ("io", g.io.weight.is_some())];
                for (what, set) in used {
                    if set {
                        self.err(
                            g.pos,
                            format!(
                                "group `{}` is `type: threaded`: {what} is not a threaded controller (threaded groups may set {})",
                                g.name,
                                THREADED_KNOBS.join(", ")
                            ),
                        );
                    }
                }
            }
            let threaded_children = g.children.iter().filter(|c| c.threaded).count();
            if threaded_children > 0 && threaded_children < g.children.len() {
                self.err(
                    g.pos,
                    format!(
                        "group `{}` has threaded and domain children: a threaded domain's children must all be `type: threaded`",
                        g.name
                    ),
                );
            }
            for c in &g.children {
                if g.threaded && !c.threaded {
                    self.err(
                        c.pos,
                        format!(
                            "group `{}` is a child of the threaded group `{}`: it must be `type: threaded` too",
                            c.name, g.name
                        ),
                    );
                }
            }
        }
    }

    /// A placement's `group:` and its threads' groups against the tree:
    /// a process goes in a domain group; a thread's group is a threaded
    /// descendant of it (threads move only within their threaded subtree).
    pub(super) fn check_placement_groups(&mut self, p: &Placement, groups: &[Group], pos: Pos) {
        let all: Vec<&Group> = groups.iter().flat_map(|g| g.walk()).collect();
        let find = |name: &str| all.iter().copied().find(|g| g.name == name);
        let Some(domain) = find(&p.group) else {
            return; // reported as an unknown group already
        };
        if domain.threaded {
            self.err(
                pos,
                format!(
                    "placement group `{}` is `type: threaded`: a process is placed in its domain group and its threads are moved with `threads: - group: {}`",
                    domain.name, domain.name
                ),
            );
            return;
        }
        // `cpus` within the group's cpuset (the kernel refuses the rest).
        let within = |d: &mut Self, cpus: Option<&CpuList>, g: &Group, what: &str| {
            if let (Some(c), Some(set)) = (cpus, g.cpuset.cpus.as_ref()) {
                if !c.iter().all(|cpu| set.contains(cpu)) {
                    d.err(
                        pos,
                        format!(
                            "{what} cpus {c} is not within group `{}`'s cpuset.cpus {set}",
                            g.name
                        ),
                    );
                }
            }
        };
        within(self, p.tuning.attrs.cpus.as_ref(), domain, "placement");
        for t in &p.tuning.threads {
            let tgroup = t.group.as_deref().and_then(find).unwrap_or(domain);
            let what = format!("threads `{}`", t.name);
            within(self, t.attrs.cpus.as_ref(), tgroup, &what);
        }
        for t in &p.tuning.threads {
            let Some(tg) = &t.group else { continue };
            match find(tg) {
                None => {
                    let names: Vec<&str> = all.iter().map(|g| g.name.as_str()).collect();
                    let h = hint(tg, names.iter().copied());
                    self.err(t.pos, format!("threads names unknown group `{tg}`{h}"));
                }
                Some(g) if !g.threaded => self.err(
                    t.pos,
                    format!(
                        "threads group `{tg}` is not `type: threaded`: only a threaded group takes single threads (cgroup.threads)"
                    ),
                ),
                Some(g) if !g.path.starts_with(&format!("{}/", domain.path)) => self.err(
                    t.pos,
                    format!(
                        "threads group `{tg}` is not below the placement's group `{}`: a thread can only move inside its process's threaded subtree",
                        domain.name
                    ),
                ),
                Some(_) => {}
            }
        }
    }
}

impl Group {
    fn memory_used(&self) -> bool {
        let m = &self.memory;
        m.min.is_some()
            || m.low.is_some()
            || m.high.is_some()
            || m.max.is_some()
            || m.swap_max.is_some()
            || m.oom_group.is_some()
    }
}
