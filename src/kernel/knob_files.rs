//! Where each knob lives and what is written for a value:
//! the one mapping from a knob of the closed set to its device file and
//! text, used by `apply`'s plan (`converge`) and by the daemon's writes,
//! reads, drift checks and `verify` (`daemon::actuator`).
//!
//! Some knobs need the kernel to map: a cpufreq governor fallback list
//! resolves against the governors the policy offers; a governor tunable
//! lives in the directory of the governor that runs (or of the one a write
//! already queued or planned switches to: [`KnobFiles::governors`]). A group
//! knob lives in its group's directory below the cgroup root.
//!
//! What to do when a file is missing, and what it held before, stays with
//! the callers: the plan reports it, the daemon logs it.

use super::cgroupfs::CgroupFs;
use super::{cpufreq, pm_qos, zram, Root};
use crate::knobs::{sysctl, CpufreqAttr, Knob, KnobValue, ZramAttr};
use std::collections::HashMap;
use std::path::PathBuf;

/// The mapping on one root (module docs).
pub(crate) struct KnobFiles<'a> {
    pub(crate) root: &'a Root,
    /// The cgroup hierarchy the groups live in.
    pub(crate) cg: &'a CgroupFs,
    /// Group name → path below the cgroup root.
    pub(crate) groups: &'a HashMap<String, String>,
    /// cpufreq policy → the governor it will run once the writes queued
    /// (daemon) or planned (`apply`) are made: its tunables go into that
    /// governor's directory. A policy not named runs the governor it runs.
    pub(crate) governors: &'a HashMap<String, String>,
}

impl KnobFiles<'_> {
    /// The file a knob lives in, for reading and for the journal: a
    /// governor tunable in the directory of the governor it will run under
    /// (whether the file exists or not). `Err` for a knob without a file.
    pub(crate) fn path(&self, knob: &Knob) -> Result<PathBuf, String> {
        match knob {
            Knob::Group { group, knob: gk } => {
                let path = self
                    .groups
                    .get(group)
                    .ok_or_else(|| format!("group `{group}` is not in the policy"))?;
                Ok(self.cg.file(path, gk.file_name()))
            }
            Knob::Cpufreq { policy, attr } if attr.is_tunable() => {
                let governor = self.governor(policy).1;
                Ok(cpufreq::tunable_target(self.root, policy, &governor, *attr))
            }
            Knob::Cpufreq { policy, attr } => Ok(cpufreq::attr_path(policy, attr.file_name())),
            Knob::Devfreq { device, attr } => {
                Ok(super::devfreq::attr_path(device, attr.file_name()))
            }
            Knob::Sysctl(name) => sysctl::path(name)
                .ok_or_else(|| format!("sysctl {name} is not a sysctl cgwarden manages")),
            Knob::Zram { device, attr } => match attr {
                ZramAttr::MemLimit => Ok(zram::attr_path(device, "mem_limit")),
                ZramAttr::SwapPriority => Err(format!(
                    "zram.{device}.swap_priority is no file: the kernel takes it at swapon ({})",
                    zram::PROC_SWAPS
                )),
            },
            Knob::LatencyCpu(cpu) => Ok(pm_qos::resume_latency_path(*cpu)),
            Knob::LatencyGlobal => Ok(PathBuf::from(pm_qos::CPU_DMA_LATENCY)),
        }
    }

    /// The file a knob is written in and the text written for `value`; `Err`
    /// says why it cannot be written now (a governor the policy does not
    /// offer, a tunable the running governor lacks, a swap priority).
    pub(crate) fn target(
        &self,
        knob: &Knob,
        value: &KnobValue,
    ) -> Result<(PathBuf, String), String> {
        match knob {
            Knob::Cpufreq { policy, attr } if *attr == CpufreqAttr::Governor => {
                let chosen = cpufreq::resolve_governor(self.root, policy, &value.kernel())?;
                Ok((self.path(knob)?, chosen))
            }
            Knob::Cpufreq { policy, attr } if attr.is_tunable() => {
                let (running, governor) = self.governor(policy);
                // The governor lacks it: missing (a switch not made yet gets
                // the path its directory will have, unless the governor has
                // no tunables at all).
                if crate::knobs::cpufreq::WITHOUT_TUNABLES.contains(&governor.as_str()) {
                    return Err(format!(
                        "{knob} is missing while {policy} runs `{governor}` (no tunables); it is written again when the governor changes"
                    ));
                }
                let path = self.path(knob)?;
                if governor == running && cpufreq::existing_tunable(self.root, policy, &governor, *attr).is_none() {
                    return Err(format!(
                        "{knob} is missing: governor `{governor}` of {policy} has no {} ({} does not exist)",
                        attr.file_name(),
                        path.display()
                    ));
                }
                Ok((path, value.kernel()))
            }
            Knob::Zram {
                device,
                attr: ZramAttr::SwapPriority,
            } => Err(format!(
                "zram.{device}.swap_priority cannot change while {device} is swapping (the kernel takes the priority at swapon); it applies at the next apply after swapoff"
            )),
            // zram reads `max` as no digits, i.e. 0: no limit. Say `0`.
            Knob::Zram { .. } => Ok((self.path(knob)?, value.kernel().replace("max", "0"))),
            // No file write: the daemon holds a request (logs show the value).
            Knob::LatencyGlobal => Ok((self.path(knob)?, value.to_string())),
            _ => Ok((self.path(knob)?, knob.render(value))),
        }
    }

    /// Where `verify` reads a knob: its file, or `/proc/swaps` for a zram
    /// swap priority.
    pub(crate) fn read_path(&self, knob: &Knob) -> PathBuf {
        match knob {
            Knob::Zram {
                attr: ZramAttr::SwapPriority,
                ..
            } => PathBuf::from(zram::PROC_SWAPS),
            _ => self.path(knob).unwrap_or_default(),
        }
    }

    /// A knob's current value as the kernel holds it (a zram swap priority
    /// from `/proc/swaps`); `None` when it cannot be read or parsed.
    pub(crate) fn read(&self, knob: &Knob) -> Option<KnobValue> {
        if let Knob::Zram {
            device,
            attr: ZramAttr::SwapPriority,
        } = knob
        {
            let node = zram::dev_node(device);
            let swaps = zram::swaps(self.root).ok()?;
            let e = swaps.iter().find(|s| s.path == node.to_string_lossy())?;
            return Some(KnobValue::Int(i64::from(e.priority)));
        }
        let text = self.root.read(&self.path(knob).ok()?).ok()?;
        knob.parse_kernel(&text).ok()
    }

    /// The governor `policy` runs now, and the one it will run (its tunables'
    /// directory).
    fn governor(&self, policy: &str) -> (String, String) {
        let running =
            cpufreq::read(self.root, policy, cpufreq::SCALING_GOVERNOR).unwrap_or_default();
        let will = self
            .governors
            .get(policy)
            .cloned()
            .unwrap_or_else(|| running.clone());
        (running, will)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::GroupKnob;

    #[test]
    fn every_family_maps_to_its_file_and_text() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = Root::fake(t.path());
        let cg = CgroupFs::new(root.clone(), "/sys/fs/cgroup");
        let groups = HashMap::from([("app".to_string(), "apps/app".to_string())]);
        let governors = HashMap::from([("policy4".to_string(), "schedutil".to_string())]);
        let f = KnobFiles {
            root: &root,
            cg: &cg,
            groups: &groups,
            governors: &governors,
        };
        let at = |k: &str, v: &str| {
            let knob = Knob::parse(k).expect("knob");
            let value = knob.parse_kernel(v).expect("value");
            f.target(&knob, &value)
                .map(|(p, t)| (p.to_string_lossy().into_owned(), t))
        };
        assert_eq!(
            at("app.io.weight", "default 200"),
            Ok((
                "/sys/fs/cgroup/apps/app/io.weight".into(),
                "default 200".into()
            ))
        );
        assert!(at("other.memory.max", "max").is_err());
        assert_eq!(
            at("cpufreq.policy4.max", "1800000"),
            Ok((
                "/sys/devices/system/cpu/cpufreq/policy4/scaling_max_freq".into(),
                "1800000".into()
            ))
        );
        // A switch to schedutil is pending: its tunable goes where its
        // directory will be, though nothing runs there yet.
        assert_eq!(
            at("cpufreq.policy4.rate_limit_us", "500"),
            Ok((
                "/sys/devices/system/cpu/cpufreq/policy4/schedutil/rate_limit_us".into(),
                "500".into()
            ))
        );
        assert_eq!(
            at("devfreq.gpu.min", "300000000").map(|(p, _)| p),
            Ok("/sys/class/devfreq/gpu/min_freq".into())
        );
        assert_eq!(
            at("sysctl.vm.swappiness", "10"),
            Ok(("/proc/sys/vm/swappiness".into(), "10".into()))
        );
        assert_eq!(
            at("zram.zram0.mem_limit", "max"),
            Ok(("/sys/block/zram0/mem_limit".into(), "0".into()))
        );
        assert!(at("zram.zram0.swap_priority", "5").is_err());
        assert_eq!(
            f.read_path(&Knob::parse("zram.zram0.swap_priority").expect("knob")),
            PathBuf::from("/proc/swaps")
        );
        assert_eq!(
            f.path(&Knob::Group {
                group: "app".into(),
                knob: GroupKnob::MemorySwapMax
            }),
            Ok(PathBuf::from("/sys/fs/cgroup/apps/app/memory.swap.max"))
        );
    }
}
