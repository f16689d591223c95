//! The group knob family: `G.KNOB` for the cgroup v2 interface files of a
//! policy group (`G.memory.high` is `CGROUP_ROOT/…/G/memory.high`), one
//! controller each, as youki's libcgroups keeps a controller per file.
//!
//! It owns the knob names after `G.`, the file each lives in, the controller
//! that must be enabled for the file to exist, the write order of a group's
//! baseline, and which files below the cgroup root the journal may name
//! (these knob files and `cgroup.subtree_control`, nothing else).

use super::board::Board;
use super::{
    did_you_mean, is_valid_name, suggest, DocRow, Family, Id, Knob, KnobError, KnobValue,
    MergePolicy, Places, Shape, Slot, Tok, ValueKind,
};
use std::fmt;
use std::path::{Path, PathBuf};

/// The parent of every hook run's cgroup, relative to `settings.cgroup_root`
/// (`kernel::hook_run` makes the runs; placement never moves a process out
/// of one). Policy group names cannot contain a dot, so no group is it.
pub(crate) const HOOKS_PARENT: &str = "cgwarden.hooks";

/// Where cgroup2 is mounted on a systemd or Debian system: the default
/// `settings.cgroup_root`, and the only place a journal's recorded root may
/// be below unless it is the policy's own.
pub(crate) const CGROUP2_MOUNT: &str = "/sys/fs/cgroup";

/// A knob of one cgroup, in the order a group's baseline is written:
/// `cpuset.mems` before `cpuset.cpus` before the partition, memory limits from
/// `min` up to `max`. The derived order is that write order (the knob table
/// and repairs iterate in it).
///
/// [`GroupKnob::ALL`] are the knobs rules and boosts may name; the
/// three baseline-only settings (`cpuset.mems`, the partition, `oom.group`)
/// come from the policy's group section and are never claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupKnob {
    CpusetMems,
    CpusetCpus,
    CpusetPartition,
    CpuWeight,
    CpuMax,
    UclampMin,
    UclampMax,
    MemoryMin,
    MemoryLow,
    MemoryHigh,
    MemoryMax,
    MemorySwapMax,
    MemoryOomGroup,
    IoWeight,
    PidsMax,
}

impl GroupKnob {
    /// Every group file cgwarden writes, in write order.
    pub(crate) const EVERY: [GroupKnob; 15] = [
        GroupKnob::CpusetMems,
        GroupKnob::CpusetCpus,
        GroupKnob::CpusetPartition,
        GroupKnob::CpuWeight,
        GroupKnob::CpuMax,
        GroupKnob::UclampMin,
        GroupKnob::UclampMax,
        GroupKnob::MemoryMin,
        GroupKnob::MemoryLow,
        GroupKnob::MemoryHigh,
        GroupKnob::MemoryMax,
        GroupKnob::MemorySwapMax,
        GroupKnob::MemoryOomGroup,
        GroupKnob::IoWeight,
        GroupKnob::PidsMax,
    ];

    /// The knobs a rule or boost may name.
    pub(crate) const ALL: [GroupKnob; 12] = [
        GroupKnob::CpuWeight,
        GroupKnob::CpuMax,
        GroupKnob::UclampMin,
        GroupKnob::UclampMax,
        GroupKnob::MemoryMin,
        GroupKnob::MemoryLow,
        GroupKnob::MemoryHigh,
        GroupKnob::MemoryMax,
        GroupKnob::MemorySwapMax,
        GroupKnob::IoWeight,
        GroupKnob::PidsMax,
        GroupKnob::CpusetCpus,
    ];

    /// The policy spelling after `G.` (`memory.swap_max`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            GroupKnob::CpusetMems => "cpuset.mems",
            GroupKnob::CpusetCpus => "cpuset.cpus",
            GroupKnob::CpusetPartition => "cpuset.partition",
            GroupKnob::CpuWeight => "cpu.weight",
            GroupKnob::CpuMax => "cpu.max",
            GroupKnob::UclampMin => "uclamp.min",
            GroupKnob::UclampMax => "uclamp.max",
            GroupKnob::MemoryMin => "memory.min",
            GroupKnob::MemoryLow => "memory.low",
            GroupKnob::MemoryHigh => "memory.high",
            GroupKnob::MemoryMax => "memory.max",
            GroupKnob::MemorySwapMax => "memory.swap_max",
            GroupKnob::MemoryOomGroup => "memory.oom_group",
            GroupKnob::IoWeight => "io.weight",
            GroupKnob::PidsMax => "pids.max",
        }
    }

    /// The cgroup interface file the knob lives in (`memory.swap.max`).
    pub(crate) fn file_name(self) -> &'static str {
        match self {
            GroupKnob::CpusetPartition => "cpuset.cpus.partition",
            GroupKnob::UclampMin => "cpu.uclamp.min",
            GroupKnob::UclampMax => "cpu.uclamp.max",
            GroupKnob::MemorySwapMax => "memory.swap.max",
            GroupKnob::MemoryOomGroup => "memory.oom.group",
            other => other.name(),
        }
    }

    /// The cgroup controller that must be enabled for the file to exist.
    pub(crate) fn controller(self) -> &'static str {
        match self {
            GroupKnob::CpuWeight
            | GroupKnob::CpuMax
            | GroupKnob::UclampMin
            | GroupKnob::UclampMax => "cpu",
            GroupKnob::MemoryMin
            | GroupKnob::MemoryLow
            | GroupKnob::MemoryHigh
            | GroupKnob::MemoryMax
            | GroupKnob::MemorySwapMax
            | GroupKnob::MemoryOomGroup => "memory",
            GroupKnob::IoWeight => "io",
            GroupKnob::PidsMax => "pids",
            GroupKnob::CpusetCpus | GroupKnob::CpusetMems | GroupKnob::CpusetPartition => "cpuset",
        }
    }
}

/// A file below the cgroup root that is a group knob file or the
/// `cgroup.subtree_control` cgwarden enables controllers in.
fn owns_file(path: &Path, cgroup_root: &Path) -> bool {
    if path == cgroup_root || !path.starts_with(cgroup_root) {
        return false;
    }
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    // The file must sit in a group directory below the root (the root's own
    // files are the kernel's, not a group's).
    let in_group = path.parent().is_some_and(|p| p != cgroup_root);
    name == "cgroup.subtree_control"
        // `type: threaded`; a created group's, removed with it.
        || (in_group && name == "cgroup.type")
        || (in_group && GroupKnob::EVERY.iter().any(|k| k.file_name() == name))
}

/// The group family.
pub(super) struct Group;

/// The group family's registration (its knobs are `G.…`, the fallback of
/// [`Knob::parse`]).
pub(super) static FAMILY: Group = Group;

impl Family for Group {
    fn id(&self) -> Id {
        Id {
            name: "group",
            head: None,
            grammar: None,
        }
    }

    /// The knob names of `groups` (grant patterns match against these).
    fn shapes(&self, groups: &[&str]) -> Vec<Shape> {
        let mut out = Vec::new();
        for g in groups {
            for k in GroupKnob::ALL {
                out.push(format!("{g}.{}", k.name()).bytes().map(Tok::Lit).collect());
            }
        }
        out
    }

    fn fmt(&self, knob: &Knob, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match knob {
            Knob::Group { group, knob } => write!(f, "{group}.{}", knob.name()),
            _ => Ok(()),
        }
    }

    fn kind(&self, knob: &Knob) -> ValueKind {
        use GroupKnob::*;
        match group_knob(knob) {
            Some(CpuWeight | IoWeight) => ValueKind::Weight,
            Some(CpuMax) => ValueKind::CpuMax,
            Some(UclampMin | UclampMax) => ValueKind::Uclamp,
            Some(MemoryMin | MemoryLow | MemoryHigh | MemoryMax | MemorySwapMax) => {
                ValueKind::Size { allow_max: true }
            }
            Some(PidsMax) => ValueKind::Count,
            Some(CpusetCpus | CpusetMems) => ValueKind::CpuList,
            Some(CpusetPartition) => ValueKind::Partition,
            Some(MemoryOomGroup) | None => ValueKind::Int { min: 0, max: 1 },
        }
    }

    fn merge(&self, knob: &Knob) -> MergePolicy {
        use GroupKnob::*;
        match group_knob(knob) {
            Some(CpusetCpus | CpusetMems | CpusetPartition | MemoryOomGroup) | None => {
                MergePolicy::First
            }
            Some(_) => MergePolicy::Largest,
        }
    }

    fn is_ceiling(&self, knob: &Knob) -> bool {
        use GroupKnob::*;
        matches!(
            group_knob(knob),
            Some(UclampMax | CpuMax | MemoryHigh | MemoryMax)
        )
    }

    fn ceilings(&self) -> &'static [&'static str] {
        &["G.uclamp.max", "G.cpu.max", "G.memory.high", "G.memory.max"]
    }

    /// `io.weight` takes `default N`.
    fn render(&self, knob: &Knob, value: &KnobValue) -> String {
        match (group_knob(knob), value) {
            (Some(GroupKnob::IoWeight), KnobValue::Weight(w)) => format!("default {w}"),
            _ => value.kernel(),
        }
    }

    /// A group's knobs are written in [`GroupKnob`] order.
    fn order<'a>(&self, knob: &'a Knob) -> Option<(&'a str, Slot)> {
        let Knob::Group { group, knob } = knob else {
            return None;
        };
        let rank = GroupKnob::EVERY.iter().position(|k| k == knob)?;
        Some((group, Slot::Rank(rank)))
    }

    /// A cpuset within the CPUs the board can have.
    fn check(&self, knob: &Knob, value: &KnobValue, board: &Board) -> Result<(), String> {
        match (group_knob(knob), value) {
            (Some(GroupKnob::CpusetCpus), KnobValue::CpuList(cpus)) => board.check_cpus(cpus),
            _ => Ok(()),
        }
    }

    fn path(&self, knob: &Knob, at: &Places<'_>) -> Result<PathBuf, String> {
        match knob {
            Knob::Group { group, knob } => (at.group_file)(group, knob.file_name()),
            _ => Err(format!("{knob} is not a group knob")),
        }
    }

    fn owns(&self, path: &Path, cgroup_root: &Path) -> bool {
        owns_file(path, cgroup_root)
    }

    /// The original the journal keeps for a group file that reads `read`,
    /// where that is not what the file takes back: `cpuset.cpus.partition`
    /// reads `isolated invalid (REASON)` when the kernel cannot honour the
    /// partition but takes only the state word; `io.weight` reads the `default N`
    /// line and a line per device override but takes one line a write (cgwarden
    /// writes only `default N`, so that line is its original).
    fn restorable(&self, path: &Path, cgroup_root: &Path, read: &str) -> Option<String> {
        if !owns_file(path, cgroup_root) {
            return None;
        }
        let name = path.file_name()?.to_str()?;
        if name == GroupKnob::CpusetPartition.file_name() {
            return read.split_whitespace().next().map(str::to_string);
        }
        if name == GroupKnob::IoWeight.file_name() {
            return read
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with("default "))
                .map(str::to_string);
        }
        None
    }

    fn doc(&self) -> Vec<DocRow> {
        let row = |knobs: &[GroupKnob], values: &'static str| DocRow {
            knob: knobs
                .iter()
                .map(|k| format!("`G.{}`", k.name()))
                .collect::<Vec<_>>()
                .join(", "),
            values,
            merge: Knob::Group {
                group: "g".into(),
                knob: knobs[0],
            }
            .merge_policy(),
            file: knobs
                .iter()
                .map(|k| format!("`{}`", k.file_name()))
                .collect::<Vec<_>>()
                .join(", "),
        };
        use GroupKnob::*;
        vec![
            row(&[CpuWeight, IoWeight], "1–10000"),
            row(&[CpuMax], "`max`, `50%`, `QUOTA/PERIOD`"),
            row(&[UclampMin, UclampMax], "percent, two decimals"),
            row(
                &[MemoryMin, MemoryLow, MemoryHigh, MemoryMax, MemorySwapMax],
                "size or `max`",
            ),
            row(&[PidsMax], "0–4194304 or `max`"),
            row(&[CpusetCpus], "CPU list"),
        ]
    }
}

fn group_knob(knob: &Knob) -> Option<GroupKnob> {
    match knob {
        Knob::Group { knob, .. } => Some(*knob),
        _ => None,
    }
}

pub(super) fn parse_group_knob(text: &str, group: &str, rest: &str) -> Result<Knob, KnobError> {
    if let Some(knob) = GroupKnob::ALL.into_iter().find(|k| k.name() == rest) {
        if !is_valid_name(group) {
            return Err(KnobError::new(format!(
                "invalid group name `{group}` in knob `{text}`: expected [a-z0-9][a-z0-9_-]{{0,63}}"
            )));
        }
        return Ok(Knob::Group {
            group: group.to_string(),
            knob,
        });
    }
    // A misspelled family prefix (`sysctrl.vm.x`) reads as a group name;
    // try the family first, then the group knob list.
    let family = suggest(group, super::family_heads())
        .and_then(|family| Knob::parse(&format!("{family}.{rest}")).ok())
        .map(|knob| knob.to_string());
    let hint = family.or_else(|| {
        suggest(rest, GroupKnob::ALL.iter().map(|k| k.name())).map(|k| format!("{group}.{k}"))
    });
    let names: Vec<&str> = GroupKnob::ALL.iter().map(|k| k.name()).collect();
    Err(KnobError::new(format!(
        "unknown knob `{text}`: a group knob is GROUP.{{{}}}",
        names.join(",")
    ))
    .with_hint(did_you_mean(hint)))
}
