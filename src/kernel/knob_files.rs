//! Where each knob lives and what is written for a value, on one root:
//! `apply`'s plan (`converge`) and the daemon's writes, reads, drift checks
//! and `verify` (`daemon::actuator`) ask here, and here asks the knob's
//! family ([`crate::knobs::Family`]), which reads what it needs through
//! [`Root`] as [`crate::knobs::Files`].
//!
//! What a family needs beside the knob: the group directories below the
//! cgroup root and the governor each cpufreq policy will run once the
//! writes queued or planned are made ([`KnobFiles::governors`]).
//!
//! What to do when a file is missing, and what it held before, stays with
//! the callers: the plan reports it, the daemon logs it.

use super::cgroupfs::CgroupFs;
use super::Root;
use crate::knobs::{Knob, KnobValue, Places};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

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

impl crate::knobs::Files for Root {
    fn text(&self, path: &Path) -> Option<String> {
        self.read(path).ok()
    }

    fn names(&self, dir: &Path) -> Vec<String> {
        self.list_dir(dir).unwrap_or_default()
    }

    fn exists(&self, path: &Path) -> bool {
        Root::exists(self, path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        Root::is_dir(self, path)
    }
}

impl KnobFiles<'_> {
    /// The places the knob's family finds its file with.
    fn at<R>(&self, f: impl FnOnce(&Places<'_>) -> R) -> R {
        let group_file = |group: &str, file: &str| {
            let path = self
                .groups
                .get(group)
                .ok_or_else(|| format!("group `{group}` is not in the policy"))?;
            Ok(self.cg.file(path, file))
        };
        f(&Places {
            files: self.root,
            group_file: &group_file,
            governors: self.governors,
        })
    }

    /// The file a knob lives in, for reading and for the journal: a
    /// governor tunable in the directory of the governor it will run under
    /// (whether the file exists or not). `Err` for a knob without a file.
    pub(crate) fn path(&self, knob: &Knob) -> Result<PathBuf, String> {
        self.at(|at| knob.family().path(knob, at))
    }

    /// The file a knob is written in and the text written for `value`; `Err`
    /// says why it cannot be written now (a governor the policy does not
    /// offer, a tunable the running governor lacks, a swap priority).
    pub(crate) fn target(
        &self,
        knob: &Knob,
        value: &KnobValue,
    ) -> Result<(PathBuf, String), String> {
        self.at(|at| knob.family().target(knob, value, at))
    }

    /// Why `apply` cannot write the knob on this board, if it cannot.
    pub(crate) fn unavailable(&self, knob: &Knob, value: &KnobValue) -> Option<String> {
        self.at(|at| knob.family().unavailable(knob, value, at))
    }

    /// Where `verify` reads a knob: its file, or `/proc/swaps` for a zram
    /// swap priority.
    pub(crate) fn read_path(&self, knob: &Knob) -> PathBuf {
        self.at(|at| knob.family().read_path(knob, at))
    }

    /// A knob's current value as the kernel holds it (a zram swap priority
    /// from `/proc/swaps`); `None` when it cannot be read or parsed.
    pub(crate) fn read(&self, knob: &Knob) -> Option<KnobValue> {
        self.at(|at| knob.family().read(knob, at))
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
