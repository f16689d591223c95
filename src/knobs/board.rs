//! The board's bounds on knob values: the CPUs it can have, each cpufreq
//! policy's hardware range and governors, each devfreq device's frequency
//! table and governors, each zram device's compressors. A value outside
//! them is not "missing" (the knob exists): it is a mistake that would
//! leave the board other than the policy says — a cpuset the kernel
//! refuses, so the group runs on every CPU; a floor of 1200 kHz meant as
//! MHz; 12 GHz written over a 2.4 GHz part.
//!
//! [`Board`] is plain data, read from a root by `kernel::board` (the board
//! `plan`, `apply`, `run` and `reload` act on, or the tree `check --root DIR`
//! names); everything here is pure. A fact the board does not show (no
//! cpufreq in a VM, a device that is not there yet) bounds nothing: what is
//! absent is the plan's "missing", with `on_missing` semantics.

use super::{Knob, KnobValue};
use crate::units::CpuList;
use std::collections::BTreeMap;

/// One cpufreq policy's bounds (the cpufreq family reads and checks them).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct CpufreqBounds {
    /// `cpuinfo_min_freq`, `cpuinfo_max_freq` (kHz): the hardware's range.
    pub(crate) min_khz: Option<u64>,
    pub(crate) max_khz: Option<u64>,
    /// `scaling_available_governors`.
    pub(crate) governors: Option<Vec<String>>,
    /// `related_cpus`: the CPUs the policy drives.
    pub(crate) cpus: Option<CpuList>,
}

/// One devfreq device's bounds (the devfreq family reads and checks them).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct DevfreqBounds {
    /// `available_frequencies` (Hz), ascending; empty when the device does
    /// not list them.
    pub(crate) frequencies: Vec<u64>,
    /// `available_governors`.
    pub(crate) governors: Option<Vec<String>>,
}

/// What a board offers, as far as it bounds a policy's values.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Board {
    /// `/sys/devices/system/cpu/possible`: every CPU the board can have (an
    /// offline CPU may come back, so not `online`).
    pub(crate) possible_cpus: Option<CpuList>,
    /// The CPUs of the cgroup root when it is a delegated group (its
    /// `cpuset.cpus.effective`): a top-level group's cpuset must be within
    /// them. `None` at the hierarchy's root, which has every CPU.
    pub(crate) root_cpus: Option<CpuList>,
    /// By policy name (`policy4`).
    pub(crate) cpufreq: BTreeMap<String, CpufreqBounds>,
    /// By device name (`gpu`, `soc:qcom,cpu-llcc-ddr-bw`).
    pub(crate) devfreq: BTreeMap<String, DevfreqBounds>,
    /// By zram device: the compressors its `comp_algorithm` offers.
    pub(crate) zram_algorithms: BTreeMap<String, Vec<String>>,
    /// By CPU: `cpuN/cpu_capacity` (the scheduler's relative performance),
    /// which orders clusters of equal top frequency ([`super::clusters`]).
    pub(crate) cpu_capacity: BTreeMap<u32, u64>,
    /// What the board says it is, which picks a policy's `targets:` entry.
    pub(crate) identity: Option<Identity>,
}

/// What a board says it is, and which file said it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Identity {
    /// `QCS9100`, `qcom,qcs6490-rb3gen2`, `Standard PC (Q35 + ICH9, 2009)`.
    pub(crate) name: String,
    /// `/sys/devices/soc0/machine`, `/proc/device-tree/compatible` or
    /// `/sys/class/dmi/id/product_name`.
    pub(crate) source: String,
}

/// A frequency in kHz for people: `2.4GHz`, `806.4MHz`, `1200kHz`.
pub(crate) fn khz_text(khz: u64) -> String {
    if khz >= 1_000_000 {
        format!("{}GHz", trim(khz as f64 / 1e6))
    } else if khz >= 1_000 {
        format!("{}MHz", trim(khz as f64 / 1e3))
    } else {
        format!("{khz}kHz")
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl Board {
    /// A board nothing is known of: every value is within it (plain `check`,
    /// which runs on a laptop and must not judge a board policy by it).
    pub(crate) fn unknown() -> Board {
        Board::default()
    }

    /// Whether anything is known (the messages say "this board" only then).
    pub(crate) fn is_known(&self) -> bool {
        *self != Board::default()
    }

    /// `cpus` within the CPUs the board can have: why not, if not.
    pub(crate) fn check_cpus(&self, cpus: &CpuList) -> Result<(), String> {
        let Some(possible) = &self.possible_cpus else {
            return Ok(());
        };
        let absent: CpuList = CpuList(cpus.iter().filter(|c| !possible.contains(*c)).collect());
        if absent.0.is_empty() {
            return Ok(());
        }
        let cpu = if absent.0.len() == 1 { "CPU" } else { "CPUs" };
        Err(format!(
            "names {cpu} {absent}, which this board does not have (its CPUs are {possible}, /sys/devices/system/cpu/possible)"
        ))
    }

    /// A top-level group's `cpus` within the cgroup root's: why not, if not.
    pub(crate) fn check_root_cpus(&self, cpus: &CpuList) -> Result<(), String> {
        let Some(root) = &self.root_cpus else {
            return Ok(());
        };
        if cpus.is_subset(root) {
            return Ok(());
        }
        let outside = CpuList(cpus.iter().filter(|c| !root.contains(*c)).collect());
        Err(format!(
            "names CPU {outside} outside the cgroup root's CPUs {root} (its cpuset.cpus.effective): the kernel refuses it"
        ))
    }

    /// `value` of `knob` within what the board offers: why not, if not
    /// (the knob's family judges).
    pub(crate) fn check_value(&self, knob: &Knob, value: &KnobValue) -> Result<(), String> {
        knob.family().check(knob, value, self)
    }

    /// A zram device's compressor among those it offers.
    pub(crate) fn check_zram_algorithm(&self, device: &str, algorithm: &str) -> Result<(), String> {
        match self.zram_algorithms.get(device) {
            Some(offered) if !offered.iter().any(|a| a == algorithm) => Err(format!(
                "{device} does not offer compressor `{algorithm}` (its comp_algorithm: {})",
                offered.join(" ")
            )),
            _ => Ok(()),
        }
    }
}

/// A governor or fallback list (`schedutil|ondemand`): one of them offered.
pub(crate) fn check_governors(
    list: &str,
    offered: Option<&[String]>,
    owner: &str,
) -> Result<(), String> {
    let Some(offered) = offered else {
        return Ok(());
    };
    if list.split('|').any(|g| offered.iter().any(|o| o == g)) {
        return Ok(());
    }
    Err(format!(
        "{owner} offers none of `{list}` (available governors: {})",
        offered.join(" ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Frequency;

    fn board() -> Board {
        let mut b = Board {
            possible_cpus: Some(CpuList::parse("0-7").unwrap()),
            ..Board::default()
        };
        b.cpufreq.insert(
            "policy4".into(),
            CpufreqBounds {
                min_khz: Some(691_200),
                max_khz: Some(2_400_000),
                governors: Some(vec!["schedutil".into(), "performance".into()]),
                cpus: None,
            },
        );
        b.devfreq.insert(
            "gpu".into(),
            DevfreqBounds {
                frequencies: vec![300_000_000, 587_000_000],
                governors: Some(vec!["msm-adreno-tz".into(), "performance".into()]),
            },
        );
        b.zram_algorithms
            .insert("zram0".into(), vec!["lzo-rle".into(), "lz4".into()]);
        b
    }

    fn knob(k: &str) -> Knob {
        Knob::parse(k).unwrap()
    }

    fn value(k: &str, v: &str) -> KnobValue {
        knob(k).parse_value(v).unwrap()
    }

    #[test]
    fn cpus_beyond_the_board_are_named_with_its_cpus() {
        let b = board();
        assert!(b.check_cpus(&CpuList::parse("4-7").unwrap()).is_ok());
        let e = b.check_cpus(&CpuList::parse("4-9").unwrap()).unwrap_err();
        assert!(e.contains("CPUs 8-9") && e.contains("0-7"), "{e}");
        let k = "inference.cpuset.cpus";
        assert!(b.check_value(&knob(k), &value(k, "6-8")).is_err());
        assert!(b
            .check_value(&knob("latency.cpu9"), &value("latency.cpu9", "0us"))
            .is_err());
        // Nothing known, nothing refused.
        assert!(Board::unknown()
            .check_cpus(&CpuList::parse("0-4000").unwrap())
            .is_ok());
    }

    #[test]
    fn cpufreq_values_are_bounded_by_the_policys_hardware_range() {
        let b = board();
        let min = "cpufreq.policy4.min";
        assert!(b.check_value(&knob(min), &value(min, "1.2GHz")).is_ok());
        let e = b.check_value(&knob(min), &value(min, "1200")).unwrap_err();
        assert!(
            e.contains("1.2MHz is below") && e.contains("691.2MHz–2.4GHz"),
            "{e}"
        );
        let e = b.check_value(&knob(min), &value(min, "12GHz")).unwrap_err();
        assert!(e.contains("12GHz is above") && e.contains("2.4GHz"), "{e}");
        // A policy the board lacks is the plan's "missing", not a bound.
        let other = "cpufreq.policy9.min";
        assert!(b.check_value(&knob(other), &value(other, "12GHz")).is_ok());
        let gov = "cpufreq.policy4.governor";
        assert!(b
            .check_value(&knob(gov), &value(gov, "ondemand|schedutil"))
            .is_ok());
        let e = b
            .check_value(&knob(gov), &value(gov, "ondemand"))
            .unwrap_err();
        assert!(e.contains("schedutil performance"), "{e}");
        let _ = Frequency::parse("1GHz").unwrap();
    }

    #[test]
    fn devfreq_values_must_be_listed_and_zram_compressors_offered() {
        let b = board();
        let max = "devfreq.gpu.max";
        assert!(b.check_value(&knob(max), &value(max, "587MHz")).is_ok());
        let e = b
            .check_value(&knob(max), &value(max, "600MHz"))
            .unwrap_err();
        assert!(e.contains("300MHz 587MHz"), "{e}");
        assert!(b.check_zram_algorithm("zram0", "lz4").is_ok());
        let e = b.check_zram_algorithm("zram0", "zstd").unwrap_err();
        assert!(e.contains("lzo-rle lz4"), "{e}");
        assert!(b.check_zram_algorithm("zram1", "zstd").is_ok());
    }

    #[test]
    fn frequencies_read_for_people() {
        assert_eq!(khz_text(2_400_000), "2.4GHz");
        assert_eq!(khz_text(806_400), "806.4MHz");
        assert_eq!(khz_text(1200), "1.2MHz");
        assert_eq!(khz_text(300), "300kHz");
    }
}
