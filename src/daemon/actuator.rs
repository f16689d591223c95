//! Carries out the engine's knob writes through the kernel layer: maps a
//! knob to its file, writes only what the engine reports as changed, logs
//! every write with its cause, old and new value, and reports a write the
//! kernel rejects once per path and value (SPEC §4: it is retried only when
//! the effective value changes again). `--dry-run` logs the same lines and
//! writes nothing.
//!
//! The actuator is the daemon's only writer of knobs, so it also owns their
//! originals: before the first write to any file — a claim, a `then` value,
//! a baseline restored after a crash — the file's content is appended to the
//! originals journal and synced (SPEC §4). A file whose original cannot be
//! journalled is not written. Files inside groups cgwarden created are
//! journalled too: `reset` removes those groups rather than restoring them,
//! but the daemon needs their originals after a crash (a claimed value left
//! in a created group must not become the baseline).

use crate::converge::journal::{Entry, Journal};
use crate::engine::knobs::Write;
use crate::engine::supervisor::Effect;
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::{cpufreq, sysctl, zram, Root};
use crate::policy::knob::{Knob, KnobValue, ZramAttr};
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
    /// The originals journal; `None` in a dry run (nothing is written).
    journal: Option<Journal>,
}

impl Actuator {
    pub fn new(root: Root, policy: &Policy, journal: Option<Journal>) -> Self {
        Actuator {
            cg: CgroupFs::new(root.clone(), policy.settings.cgroup_root.clone()),
            root,
            groups: group_paths(policy),
            dry_run: journal.is_none(),
            rejected: HashSet::new(),
            written: 0,
            journal,
        }
    }

    /// The journal, for recording groups a repair creates.
    pub fn journal(&mut self) -> Option<&mut Journal> {
        self.journal.as_mut()
    }

    /// The file a knob lives in.
    fn path_of(&self, knob: &Knob) -> Result<PathBuf, String> {
        self.target(knob, &KnobValue::Int(0)).map(|(p, _)| p)
    }

    /// The file a knob lives in and the text to write for `value`.
    pub fn target(&self, knob: &Knob, value: &KnobValue) -> Result<(PathBuf, String), String> {
        match knob {
            Knob::Group { group, knob: gk } => {
                let path = self.groups.get(group).ok_or_else(|| format!("group `{group}` is not in the policy"))?;
                Ok((self.cg.file(path, gk.file_name()), knob.render(value)))
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

    /// Reads a knob's current value from the kernel, in the kernel's
    /// rendering (for `raise`/`lower` of a knob with no baseline).
    pub fn read(&self, knob: &Knob) -> Option<KnobValue> {
        let path = self.path_of(knob).ok()?;
        let text = self.root.read(&path).ok()?;
        knob.parse_kernel(&text).ok()
    }

    /// What the knob held before cgwarden first wrote it, from the journal:
    /// the baseline of a knob the policy leaves alone (never the live value a
    /// crashed predecessor may have left behind).
    pub fn original(&self, knob: &Knob) -> Option<KnobValue> {
        let path = self.path_of(knob).ok()?;
        let original = self.journal.as_ref()?.original(&path)?;
        knob.parse_kernel(original).ok()
    }

    /// Journals a file's original before its first write. Write-only or
    /// absent files have nothing to restore and are written as they are.
    fn journal_original(&mut self, path: &std::path::Path) -> Result<(), String> {
        let Some(journal) = self.journal.as_mut() else {
            return Ok(());
        };
        if journal.has_file(path) {
            return Ok(());
        }
        let entry = match self.root.read(path) {
            Ok(content) => Entry::File {
                path: path.to_path_buf(),
                content,
            },
            Err(e) if e.is_not_found() => Entry::Absent {
                path: path.to_path_buf(),
            },
            Err(e) => {
                return Err(format!(
                    "cannot read the original of {}: {e}",
                    path.display()
                ))
            }
        };
        journal
            .record(entry)
            .map_err(|e| format!("cannot journal the original of {}: {e}", path.display()))
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
        if let Err(reason) = self.journal_original(&path) {
            let msg = format!("write {} {text:?} not made: {reason}", path.display());
            tracing::error!(knob = %w.knob, cause = %w.cause, "{msg}");
            return Outcome::Rejected(msg);
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

/// Puts a cpufreq policy's `scaling_max_freq` write before its
/// `scaling_min_freq` write when the new floor is above the old ceiling: the
/// kernel rejects a min above the current max. (Knob order writes min first,
/// which is right when the ceiling comes down.)
pub fn order_writes(effects: &mut [Effect]) {
    use crate::policy::knob::CpufreqAttr;
    let find = |effects: &[Effect], policy: &str, attr: CpufreqAttr| {
        effects.iter().position(|e| {
            matches!(e, Effect::Write(w) if matches!(&w.knob, Knob::Cpufreq { policy: p, attr: a } if p == policy && *a == attr))
        })
    };
    let policies: Vec<String> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Write(Write {
                knob:
                    Knob::Cpufreq {
                        policy,
                        attr: CpufreqAttr::Min,
                    },
                ..
            }) => Some(policy.clone()),
            _ => None,
        })
        .collect();
    for policy in policies {
        let (Some(min), Some(max)) = (
            find(effects, &policy, CpufreqAttr::Min),
            find(effects, &policy, CpufreqAttr::Max),
        ) else {
            continue;
        };
        let (Effect::Write(wmin), Effect::Write(wmax)) = (&effects[min], &effects[max]) else {
            continue;
        };
        let raises_past_ceiling = match (&wmin.new, &wmax.old) {
            (KnobValue::Frequency(new_min), Some(KnobValue::Frequency(old_max))) => {
                new_min.khz() > old_max.khz()
            }
            _ => false,
        };
        if raises_past_ceiling && min < max {
            effects.swap(min, max);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::knobs::Cause;
    use crate::policy::knob::CpufreqAttr;
    use crate::policy::units::Frequency;

    fn w(attr: CpufreqAttr, old: u64, new: u64) -> Effect {
        Effect::Write(Write {
            knob: Knob::Cpufreq {
                policy: "policy4".into(),
                attr,
            },
            old: Some(KnobValue::Frequency(Frequency { khz: old })),
            new: KnobValue::Frequency(Frequency { khz: new }),
            cause: Cause::Baseline,
        })
    }

    fn attrs(e: &[Effect]) -> Vec<CpufreqAttr> {
        e.iter()
            .filter_map(|e| match e {
                Effect::Write(Write {
                    knob: Knob::Cpufreq { attr, .. },
                    ..
                }) => Some(*attr),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn ceiling_goes_up_before_a_floor_above_it() {
        let mut e = vec![
            w(CpufreqAttr::Min, 300_000, 2_000_000),
            w(CpufreqAttr::Max, 1_500_000, 2_400_000),
        ];
        order_writes(&mut e);
        assert_eq!(attrs(&e), vec![CpufreqAttr::Max, CpufreqAttr::Min]);
    }

    #[test]
    fn floor_comes_down_before_a_lower_ceiling() {
        let mut e = vec![
            w(CpufreqAttr::Min, 1_800_000, 300_000),
            w(CpufreqAttr::Max, 2_400_000, 1_000_000),
        ];
        order_writes(&mut e);
        assert_eq!(attrs(&e), vec![CpufreqAttr::Min, CpufreqAttr::Max]);
    }
}
