//! `groups:`: one group and its knobs, and the checks across groups
//! (exclusive siblings, cpuset subsets).

use super::{name_problem, size_gt, valid_name, Decoder};
use crate::knobs::CpuMax;
use crate::policy::diag::hint;
use crate::policy::model::*;
use crate::policy::yaml::{Key, Node, Pos, Value};
use crate::units::{CpuList, Percent, Size};
use std::collections::BTreeMap;

impl<'a> Decoder<'a> {
    pub(super) fn group(&mut self, key: &Key, node: &Node, parent_path: &str) -> Option<Group> {
        if !valid_name(&key.name) {
            self.err(key.pos, name_problem("group", &key.name));
        } else if let Some((_, what)) = crate::knobs::reserved_group_names()
            .into_iter()
            .find(|(n, _)| *n == key.name)
        {
            self.err(
                key.pos,
                format!(
                    "group name `{}` is reserved: rules read `{}.…` as {what}, not a group",
                    key.name, key.name
                ),
            );
        }
        let f = self.fields(
            node,
            &format!("group `{}`", key.name),
            &[
                "cpuset", "cpu", "uclamp", "memory", "io", "pids", "children", "type",
            ],
        )?;
        let path = if parent_path.is_empty() {
            key.name.clone()
        } else {
            format!("{parent_path}/{}", key.name)
        };
        let mut g = Group {
            name: key.name.clone(),
            path: path.clone(),
            pos: key.pos,
            cpuset: CpusetSpec::default(),
            cpu: CpuSpec::default(),
            uclamp: UclampSpec::default(),
            memory: MemorySpec::default(),
            io: IoSpec::default(),
            pids: PidsSpec::default(),
            children: Vec::new(),
            threaded: false,
        };
        let gname = key.name.clone();
        if let Some(n) = f.get("type") {
            g.threaded = self.group_type(n, &gname);
        }
        if let Some(n) = f.get("cpuset") {
            if let Some(c) = self.fields(
                n,
                &format!("{gname}.cpuset"),
                &["cpus", "mems", "partition"],
            ) {
                g.cpuset.cpus = c
                    .get("cpus")
                    .and_then(|n| self.unit(n, &format!("{gname}.cpuset.cpus"), CpuList::parse));
                g.cpuset.cpus_pos = c.get("cpus").map(|n| n.pos);
                g.cpuset.mems = c
                    .get("mems")
                    .and_then(|n| self.unit(n, &format!("{gname}.cpuset.mems"), CpuList::parse));
                if let Some(n) = c.get("partition") {
                    g.cpuset.partition = match self.text(n, "cpuset.partition").as_deref() {
                        Some("member") => Some(Partition::Member),
                        Some("root") => Some(Partition::Root),
                        Some("isolated") => Some(Partition::Isolated),
                        Some(other) => {
                            let h = hint(other, ["member", "root", "isolated"]);
                            self.err(n.pos, format!("{gname}.cpuset.partition must be member, root or isolated, found `{other}`{h}"));
                            None
                        }
                        None => None,
                    };
                    if g.cpuset.partition.is_some_and(|p| p != Partition::Member)
                        && g.cpuset.cpus.is_none()
                    {
                        self.err(n.pos, format!("{gname}.cpuset.partition needs `cpus:`: a partition owns an explicit set of CPUs"));
                    }
                }
            }
        }
        if let Some(n) = f.get("cpu") {
            if let Some(c) = self.fields(n, &format!("{gname}.cpu"), &["weight", "max"]) {
                g.cpu.weight = c
                    .get("weight")
                    .and_then(|n| self.int(n, &format!("{gname}.cpu.weight"), 1, 10000))
                    .map(|v| v as u64);
                g.cpu.max = c
                    .get("max")
                    .and_then(|n| self.unit(n, &format!("{gname}.cpu.max"), CpuMax::parse));
            }
        }
        if let Some(n) = f.get("uclamp") {
            if let Some(c) = self.fields(n, &format!("{gname}.uclamp"), &["min", "max"]) {
                g.uclamp.min = c
                    .get("min")
                    .and_then(|n| self.unit(n, &format!("{gname}.uclamp.min"), Percent::parse));
                g.uclamp.max = c
                    .get("max")
                    .and_then(|n| self.unit(n, &format!("{gname}.uclamp.max"), Percent::parse));
                if let (Some(min), Some(max), Some(node)) =
                    (&g.uclamp.min, &g.uclamp.max, c.get("min"))
                {
                    if min.value() > max.value() {
                        self.err(
                            node.pos,
                            format!("{gname}.uclamp.min {min} is greater than uclamp.max {max}"),
                        );
                    }
                }
            }
        }
        if let Some(n) = f.get("memory") {
            let fields = ["min", "low", "high", "max", "swap_max", "oom_group"];
            if let Some(c) = self.fields(n, &format!("{gname}.memory"), &fields) {
                let sz = |d: &mut Self, k: &str| {
                    c.get(k)
                        .and_then(|n| d.unit(n, &format!("{gname}.memory.{k}"), Size::parse))
                };
                g.memory.min = sz(self, "min");
                g.memory.low = sz(self, "low");
                g.memory.high = sz(self, "high");
                g.memory.max = sz(self, "max");
                g.memory.swap_max = sz(self, "swap_max");
                g.memory.oom_group = c
                    .get("oom_group")
                    .and_then(|n| self.bool(n, &format!("{gname}.memory.oom_group")));
                if let Some(max) = g.memory.max {
                    for (k, v) in [
                        ("min", g.memory.min),
                        ("low", g.memory.low),
                        ("high", g.memory.high),
                    ] {
                        if let (Some(v), Some(node)) = (v, c.get(k)) {
                            if size_gt(v, max) {
                                self.err(
                                    node.pos,
                                    format!(
                                        "{gname}.memory.{k} {v} is greater than memory.max {max}"
                                    ),
                                );
                            }
                        }
                    }
                }
            }
        }
        if let Some(n) = f.get("io") {
            if let Some(c) = self.fields(n, &format!("{gname}.io"), &["weight"]) {
                g.io.weight = c
                    .get("weight")
                    .and_then(|n| self.int(n, &format!("{gname}.io.weight"), 1, 10000))
                    .map(|v| v as u64);
            }
        }
        if let Some(n) = f.get("pids") {
            if let Some(c) = self.fields(n, &format!("{gname}.pids"), &["max"]) {
                if let Some(m) = c.get("max") {
                    g.pids.max = if m.value == Value::Str("max".into()) {
                        Some(PidsMax::Max)
                    } else {
                        self.int(m, &format!("{gname}.pids.max"), 0, i64::from(i32::MAX))
                            .map(|v| PidsMax::Count(v as u64))
                    };
                }
            }
        }
        if let Some(n) = f.get("children") {
            for (k, v) in self.named_map(n, &format!("{gname}.children")) {
                if let Some(child) = self.group(k, v, &path) {
                    g.children.push(child);
                }
            }
        }
        Some(g)
    }

    /// Tree-wide group checks: unique names, child cpusets inside their parent's.
    pub(super) fn check_groups(&mut self, groups: &[Group]) {
        let mut seen: BTreeMap<String, Pos> = BTreeMap::new();
        for g in groups.iter().flat_map(|g| g.walk()) {
            if let Some(first) = seen.get(&g.name) {
                self.err(
                    g.pos,
                    format!(
                        "duplicate group name `{}` (first defined at line {}); names are unique across the whole tree",
                        g.name, first.line
                    ),
                );
            } else {
                seen.insert(g.name.clone(), g.pos);
            }
        }
        for g in groups {
            self.check_cpuset_subsets(g, None);
        }
        self.check_exclusive_siblings(groups);
    }

    /// A partition (`root` or `isolated`) owns its CPUs exclusively among its
    /// siblings: the kernel accepts an overlapping sibling's `cpuset.cpus` and
    /// turns the partition `isolated invalid (Cpu list in cpuset.cpus not
    /// exclusive)` — the RT core silently loses its isolation. Reported at the
    /// later group's `cpus`.
    fn check_exclusive_siblings(&mut self, siblings: &[Group]) {
        let is_part = |g: &Group| g.cpuset.partition.is_some_and(|p| p != Partition::Member);
        for (i, b) in siblings.iter().enumerate() {
            let Some(bc) = &b.cpuset.cpus else { continue };
            for a in &siblings[..i] {
                let Some(ac) = &a.cpuset.cpus else { continue };
                if !is_part(a) && !is_part(b) {
                    continue;
                }
                let common = CpuList(ac.0.intersection(&bc.0).copied().collect());
                if common.0.is_empty() {
                    continue;
                }
                let what = |g: &Group| match g.cpuset.partition {
                    Some(p) if p != Partition::Member => {
                        format!("the {} partition `{}`", p.as_str(), g.name)
                    }
                    _ => format!("group `{}`", g.name),
                };
                self.err(
                    b.cpuset.cpus_pos.unwrap_or(b.pos),
                    format!(
                        "cpuset.cpus `{bc}` of {} overlaps sibling {} (`{ac}`) on CPUs {common}; a partition's CPUs must be exclusive among its siblings, or the kernel makes it invalid (Cpu list in cpuset.cpus not exclusive)",
                        what(b),
                        what(a)
                    ),
                );
            }
        }
        for g in siblings {
            self.check_exclusive_siblings(&g.children);
        }
    }

    fn check_cpuset_subsets(&mut self, g: &Group, parent: Option<(&str, &CpuList)>) {
        let mut here = parent;
        if let Some(cpus) = &g.cpuset.cpus {
            if let Some((pname, pcpus)) = parent {
                if !cpus.is_subset(pcpus) {
                    self.err(
                        g.cpuset.cpus_pos.unwrap_or(g.pos),
                        format!(
                            "cpuset.cpus `{cpus}` of group `{}` is not a subset of `{pcpus}` of its parent `{pname}`",
                            g.name
                        ),
                    );
                }
            }
            here = Some((g.name.as_str(), cpus));
        }
        for c in &g.children {
            self.check_cpuset_subsets(c, here);
        }
    }
}
