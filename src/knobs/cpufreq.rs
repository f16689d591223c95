//! The cpufreq family: `cpufreq.POLICY.{min,max,governor}` for
//! `/sys/devices/system/cpu/cpufreq/POLICY/scaling_{min_freq,max_freq,governor}`.
//!
//! It owns the policy directory, the attribute files, their names in a
//! policy, and the files the journal may name (those three, in a `policyN`).
//! Frequencies are written in kHz (the kernel's unit); min/max merge largest
//! wins, the governor first wins.

use super::{
    did_you_mean, is_numbered, suggest, DocRow, Family, Knob, KnobError, MergePolicy, Shape, Tok,
};
use std::path::{Path, PathBuf};

/// Device path of the cpufreq policy directories.
pub const CPUFREQ_DIR: &str = "/sys/devices/system/cpu/cpufreq";

/// Attribute file names.
pub const SCALING_GOVERNOR: &str = "scaling_governor";
pub const SCALING_MIN_FREQ: &str = "scaling_min_freq";
pub const SCALING_MAX_FREQ: &str = "scaling_max_freq";
pub const SCALING_AVAILABLE_GOVERNORS: &str = "scaling_available_governors";

/// A cpufreq policy attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CpufreqAttr {
    Min,
    Max,
    Governor,
}

impl CpufreqAttr {
    pub fn name(self) -> &'static str {
        match self {
            CpufreqAttr::Min => "min",
            CpufreqAttr::Max => "max",
            CpufreqAttr::Governor => "governor",
        }
    }

    /// The sysfs file under `/sys/devices/system/cpu/cpufreq/POLICY/`.
    pub fn file_name(self) -> &'static str {
        match self {
            CpufreqAttr::Min => "scaling_min_freq",
            CpufreqAttr::Max => "scaling_max_freq",
            CpufreqAttr::Governor => "scaling_governor",
        }
    }
}

/// Family attributes, for "did you mean" on a misspelled last part.
const CPUFREQ_ATTRS: [&str; 3] = ["min", "max", "governor"];

/// Device path of a policy directory. `"policy4"` or just `"4"`.
pub fn policy_dir(policy: &str) -> PathBuf {
    let name = if !policy.is_empty() && policy.bytes().all(|b| b.is_ascii_digit()) {
        format!("policy{policy}")
    } else {
        policy.to_string()
    };
    // Root::host_path clamps `..`, but keep a policy name a single component.
    let name = name.replace('/', "_");
    Path::new(CPUFREQ_DIR).join(name)
}

/// Device path of attribute file `attr` of `policy`.
pub fn attr_path(policy: &str, attr: &str) -> PathBuf {
    policy_dir(policy).join(attr)
}

/// Whether a policy's new floor is written before its ceiling: yes, unless
/// the floor rises above the ceiling the policy has now (the kernel rejects
/// a `scaling_min_freq` above the current `scaling_max_freq`, so the ceiling
/// must go up first). The one place this order is decided: `plan` and the
/// daemon's writes both ask it.
pub fn min_first(new_min_khz: Option<u64>, current_max_khz: Option<u64>) -> bool {
    match (new_min_khz, current_max_khz) {
        (Some(min), Some(max)) => min <= max,
        _ => true,
    }
}

/// The cpufreq family's registry entry.
pub(super) static FAMILY: Family = Family {
    head: Some("cpufreq"),
    parse: Some(parse_cpufreq),
    shapes,
    owns,
    doc,
};

fn shapes(_: &[&str]) -> Vec<Shape> {
    CPUFREQ_ATTRS
        .iter()
        .map(|a| {
            super::shape(
                "cpufreq.policy",
                Some(Tok::Run(super::digit, 1, 5)),
                &format!(".{a}"),
            )
        })
        .collect()
}

fn owns(path: &Path, _: &Path) -> bool {
    let Some(c) = super::below(path, CPUFREQ_DIR) else {
        return false;
    };
    matches!(c.as_slice(), [p, f] if is_numbered(p, "policy")
        && [SCALING_MIN_FREQ, SCALING_MAX_FREQ, SCALING_GOVERNOR].contains(f))
}

fn doc() -> Vec<DocRow> {
    vec![
        DocRow {
            knob: "`cpufreq.POLICY.min`, `cpufreq.POLICY.max`".into(),
            values: "frequency (`1800MHz`, `2.4GHz`)",
            merge: MergePolicy::LargestWins,
            file: format!("`{CPUFREQ_DIR}/POLICY/{{{SCALING_MIN_FREQ},{SCALING_MAX_FREQ}}}`"),
        },
        DocRow {
            knob: "`cpufreq.POLICY.governor`".into(),
            values: "a governor the policy offers",
            merge: MergePolicy::FirstWins,
            file: format!("`{CPUFREQ_DIR}/POLICY/{SCALING_GOVERNOR}`"),
        },
    ]
}

fn parse_cpufreq(text: &str, rest: &str) -> Result<Knob, KnobError> {
    let (policy, attr_text) = rest.split_once('.').ok_or_else(|| {
        KnobError::new(format!(
            "unknown knob `{text}`: expected cpufreq.POLICY.{{min,max,governor}}"
        ))
    })?;
    if !is_numbered(policy, "policy") {
        return Err(KnobError::new(format!(
            "invalid cpufreq policy `{policy}` in `{text}`: expected `policyN`, as in /sys/devices/system/cpu/cpufreq/"
        )));
    }
    let attr = match attr_text {
        "min" => CpufreqAttr::Min,
        "max" => CpufreqAttr::Max,
        "governor" => CpufreqAttr::Governor,
        other => {
            let hint = suggest(other, CPUFREQ_ATTRS).map(|a| format!("cpufreq.{policy}.{a}"));
            return Err(KnobError::new(format!(
                "unknown cpufreq attribute `{other}` in `{text}`: expected min, max or governor"
            ))
            .with_hint(did_you_mean(hint)));
        }
    };
    Ok(Knob::Cpufreq {
        policy: policy.to_string(),
        attr,
    })
}
