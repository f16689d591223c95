//! Carries out the engine's knob writes through the kernel layer: maps a
//! knob to its file, writes only what the engine reports as changed, logs
//! every write with its cause, old and new value, and reports a write the
//! kernel rejects once per path and value (SPEC §4: it is retried only when
//! the effective value changes again). `--dry-run` logs the same lines and
//! writes nothing.

use crate::engine::knobs::Write;
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::{cpufreq, sysctl, zram, Root};
use crate::policy::knob::{GroupKnob, Knob, KnobValue, ZramAttr};
use crate::policy::model::Policy;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

/// What happened to one write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Written,
    DryRun,
    /// The kernel (or the fake tree) refused; the message names path and value.
    Rejected(String),
    /// The knob cannot be written at runtime or maps to nothing.
    Unsupported(String),
}

pub struct Actuator {
    root: Root,
    cg: CgroupFs,
    /// Group name → path below the cgroup root.
    groups: HashMap<String, String>,
    dry_run: bool,
    rejected: HashSet<(PathBuf, String)>,
    pub written: u64,
}

impl Actuator {
    pub fn new(root: Root, policy: &Policy, dry_run: bool) -> Self {
        Actuator {
            cg: CgroupFs::new(root.clone(), policy.settings.cgroup_root.clone()),
            root,
            groups: group_paths(policy),
            dry_run,
            rejected: HashSet::new(),
            written: 0,
        }
    }

    /// The file a knob lives in and the text to write for `value`.
    pub fn target(&self, knob: &Knob, value: &KnobValue) -> Result<(PathBuf, String), String> {
        match knob {
            Knob::Group { group, knob: gk } => {
                let path = self.groups.get(group).ok_or_else(|| format!("group `{group}` is not in the policy"))?;
                let text = match gk {
                    GroupKnob::IoWeight => format!("default {}", value.kernel()),
                    _ => value.kernel(),
                };
                Ok((self.cg.file(path, gk.file_name()), text))
            }
            Knob::Cpufreq { policy, attr } => Ok((cpufreq::attr_path(policy, attr.file_name()), value.kernel())),
            Knob::Sysctl(name) => sysctl::path(name).map(|p| (p, value.kernel())).map_err(|e| e.to_string()),
            Knob::Zram { device, attr } => match attr {
                ZramAttr::MemLimit => Ok((zram::attr_path(device, "mem_limit"), value.kernel())),
                ZramAttr::SwapPriority => Err(format!(
                    "zram.{device}.swap_priority cannot change while {device} is swapping (the kernel takes the priority at swapon); it applies at the next apply after swapoff"
                )),
            },
        }
    }

    /// Reads a knob's current value from the kernel, for `raise`/`lower` of a
    /// knob with no baseline and for seeding.
    pub fn read(&self, knob: &Knob) -> Option<KnobValue> {
        let probe = KnobValue::Int(0);
        let (path, _) = self.target(knob, &probe).ok()?;
        let text = self.root.read_trimmed(&path).ok()?;
        let text = match knob {
            Knob::Group {
                knob: GroupKnob::IoWeight,
                ..
            } => text
                .lines()
                .find_map(|l| l.strip_prefix("default "))
                .unwrap_or(&text)
                .trim()
                .to_string(),
            Knob::Group {
                knob: GroupKnob::CpuMax,
                ..
            } => {
                return crate::policy::knob::CpuMax::parse_kernel(&text)
                    .ok()
                    .map(KnobValue::CpuMax)
            }
            _ => text,
        };
        knob.parse_value(&text).ok()
    }

    /// Carries out one write.
    pub fn apply(&mut self, w: &Write) -> Outcome {
        let (path, text) = match self.target(&w.knob, &w.new) {
            Ok(t) => t,
            Err(reason) => {
                tracing::warn!(knob = %w.knob, cause = %w.cause, "{reason}");
                return Outcome::Unsupported(reason);
            }
        };
        let old = w
            .old
            .as_ref()
            .map(|v| v.to_string())
            .unwrap_or_else(|| "-".into());
        if self.dry_run {
            tracing::info!(knob = %w.knob, path = %path.display(), old = %old, new = %w.new, cause = %w.cause, "would write (dry run)");
            return Outcome::DryRun;
        }
        match self.root.write(&path, &text) {
            Ok(()) => {
                self.written += 1;
                self.rejected.retain(|(p, _)| p != &path);
                tracing::info!(knob = %w.knob, path = %path.display(), old = %old, new = %w.new, cause = %w.cause, "write");
                Outcome::Written
            }
            Err(e) => {
                let msg = format!("write {} {text:?} rejected: {e}", path.display());
                if self.rejected.insert((path, text)) {
                    tracing::error!(knob = %w.knob, cause = %w.cause, "{msg}");
                }
                Outcome::Rejected(msg)
            }
        }
    }

    /// Writes 1 to /proc/sys/vm/compact_memory.
    pub fn compact_memory(&mut self, rule: &str) -> Outcome {
        let path = PathBuf::from("/proc/sys/vm/compact_memory");
        if self.dry_run {
            tracing::info!(rule, path = %path.display(), "would compact memory (dry run)");
            return Outcome::DryRun;
        }
        match self.root.write(&path, "1") {
            Ok(()) => {
                tracing::info!(rule, "compact memory");
                Outcome::Written
            }
            Err(e) => {
                tracing::error!(rule, "compact memory: {e}");
                Outcome::Rejected(e.to_string())
            }
        }
    }
}

/// Group name → path below the cgroup root, for every group in the policy.
pub fn group_paths(policy: &Policy) -> HashMap<String, String> {
    policy
        .all_groups()
        .into_iter()
        .map(|g| (g.name.clone(), g.path.clone()))
        .collect()
}
