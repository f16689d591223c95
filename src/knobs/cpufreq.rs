//! The cpufreq family: `cpufreq.POLICY.{min,max,governor}` for
//! `/sys/devices/system/cpu/cpufreq/POLICY/scaling_{min_freq,max_freq,governor}`,
//! and the governor tunables `cpufreq.POLICY.{rate_limit_us,up_rate_limit_us,down_rate_limit_us}`.
//!
//! It owns the policy directory, the attribute files, their names in a
//! policy, and the files the journal may name (those three, in a `policyN`,
//! and the tunables in a governor's directory). Frequencies are written in
//! kHz (the kernel's unit); min/max merge largest wins, the governor and the
//! tunables first wins.
//!
//! # Governor fallback lists
//! `governor: schedutil|ondemand` means the first of these the policy offers
//! (`scaling_available_governors`); [`resolve_governor`] picks it, the one
//! place this is decided (`plan` and the daemon both ask it).
//!
//! # Governor tunables
//! A governor's tunables live in its own directory, which the kernel creates
//! when the governor starts and destroys when it stops: on drivers with
//! `CPUFREQ_HAVE_GOVERNOR_PER_POLICY` (qcom-cpufreq-hw sets it, so every
//! Qualcomm board) that is `policyN/GOVERNOR/`, otherwise the global
//! `cpufreq/GOVERNOR/` ([`tunable_paths`] names both; the kernel side picks
//! the one that exists). Mainline schedutil has `rate_limit_us`; vendor
//! (Android-derived) kernels have `up_rate_limit_us` and
//! `down_rate_limit_us` instead. Because a governor switch recreates the
//! directory with the kernel's defaults, the tunables are written after the
//! governor and re-written after every governor change
//! ([`super::Knob::recreated_by`]).

use super::{
    did_you_mean, is_numbered, suggest, DocRow, Family, Knob, KnobError, MergePolicy, Shape, Tok,
};
use std::path::{Path, PathBuf};

/// Device path of the cpufreq policy directories.
pub(crate) const CPUFREQ_DIR: &str = "/sys/devices/system/cpu/cpufreq";

/// Attribute file names.
pub(crate) const SCALING_GOVERNOR: &str = "scaling_governor";
pub(crate) const SCALING_MIN_FREQ: &str = "scaling_min_freq";
pub(crate) const SCALING_MAX_FREQ: &str = "scaling_max_freq";
pub(crate) const SCALING_AVAILABLE_GOVERNORS: &str = "scaling_available_governors";

/// A cpufreq policy attribute. The order is the write order within one
/// policy: the governor before its tunables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CpufreqAttr {
    Min,
    Max,
    Governor,
    /// schedutil's `rate_limit_us` (mainline).
    RateLimitUs,
    /// `up_rate_limit_us` (vendor schedutil).
    UpRateLimitUs,
    /// `down_rate_limit_us` (vendor schedutil).
    DownRateLimitUs,
}

impl CpufreqAttr {
    pub(crate) fn name(self) -> &'static str {
        match self {
            CpufreqAttr::Min => "min",
            CpufreqAttr::Max => "max",
            CpufreqAttr::Governor => "governor",
            CpufreqAttr::RateLimitUs => RATE_LIMIT_US,
            CpufreqAttr::UpRateLimitUs => UP_RATE_LIMIT_US,
            CpufreqAttr::DownRateLimitUs => DOWN_RATE_LIMIT_US,
        }
    }

    /// The sysfs file: under `/sys/devices/system/cpu/cpufreq/POLICY/`,
    /// or for a tunable under the governor's directory.
    pub(crate) fn file_name(self) -> &'static str {
        match self {
            CpufreqAttr::Min => "scaling_min_freq",
            CpufreqAttr::Max => "scaling_max_freq",
            CpufreqAttr::Governor => "scaling_governor",
            t => t.name(),
        }
    }

    /// Whether it is a tunable in the running governor's directory.
    pub(crate) fn is_tunable(self) -> bool {
        TUNABLES.contains(&self)
    }
}

/// schedutil's rate limit (mainline), µs.
pub(crate) const RATE_LIMIT_US: &str = "rate_limit_us";
/// The vendor schedutil's separate limits, µs.
pub(crate) const UP_RATE_LIMIT_US: &str = "up_rate_limit_us";
pub(crate) const DOWN_RATE_LIMIT_US: &str = "down_rate_limit_us";

/// The governor tunables, in write order.
pub(crate) const TUNABLES: [CpufreqAttr; 3] = [
    CpufreqAttr::RateLimitUs,
    CpufreqAttr::UpRateLimitUs,
    CpufreqAttr::DownRateLimitUs,
];

/// The largest rate limit accepted, µs (the kernel's file is an unsigned
/// int; a second is already far beyond any useful limit, ten is a typo).
pub(crate) const RATE_LIMIT_MAX_US: i64 = 10_000_000;

/// Family attributes, for "did you mean" on a misspelled last part.
const CPUFREQ_ATTRS: [&str; 6] = [
    "min",
    "max",
    "governor",
    RATE_LIMIT_US,
    UP_RATE_LIMIT_US,
    DOWN_RATE_LIMIT_US,
];

/// The governors of a fallback list (`schedutil|ondemand`), in order.
pub(crate) fn governor_choices(list: &str) -> impl Iterator<Item = &str> {
    list.split('|').map(str::trim).filter(|g| !g.is_empty())
}

/// The governor of fallback list `list` to write, given what the policy
/// offers: the first offered. An empty `offered` (unreadable) takes the
/// first of the list. `Err` names the list and the offer.
pub(crate) fn resolve_governor(list: &str, offered: &[String]) -> Result<String, String> {
    let mut choices = governor_choices(list);
    if offered.is_empty() {
        return choices
            .next()
            .map(str::to_string)
            .ok_or_else(|| format!("empty governor list `{list}`"));
    }
    choices
        .find(|g| offered.iter().any(|o| o == g))
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "governor `{list}` is not offered (available: {})",
                offered.join(" ")
            )
        })
}

/// Governors that have no tunables directory in any kernel
/// (`performance`, `powersave`, `userspace`): a tunable under one of them is
/// missing even before the switch.
pub(crate) const WITHOUT_TUNABLES: [&str; 3] = ["performance", "powersave", "userspace"];

/// The two places a governor's tunable can live: per policy
/// (`policyN/GOVERNOR/FILE`, drivers with per-policy governors) first,
/// then global (`cpufreq/GOVERNOR/FILE`).
pub(crate) fn tunable_paths(policy: &str, governor: &str, attr: CpufreqAttr) -> [PathBuf; 2] {
    let gov = governor.replace('/', "_");
    [
        policy_dir(policy).join(&gov).join(attr.file_name()),
        Path::new(CPUFREQ_DIR).join(&gov).join(attr.file_name()),
    ]
}

/// Device path of a policy directory. `"policy4"` or just `"4"`.
pub(crate) fn policy_dir(policy: &str) -> PathBuf {
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
pub(crate) fn attr_path(policy: &str, attr: &str) -> PathBuf {
    policy_dir(policy).join(attr)
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
    let tunable = |f: &str| TUNABLES.iter().any(|t| t.file_name() == f);
    let governor = |g: &str| super::value::parse_governor(g).is_ok();
    match c.as_slice() {
        [p, f] if is_numbered(p, "policy") => {
            [SCALING_MIN_FREQ, SCALING_MAX_FREQ, SCALING_GOVERNOR].contains(f)
        }
        [p, g, f] if is_numbered(p, "policy") => governor(g) && tunable(f),
        [g, f] => governor(g) && tunable(f),
        _ => false,
    }
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
            values: "a governor, or a fallback list `schedutil\\|ondemand` (the first the policy offers)",
            merge: MergePolicy::FirstWins,
            file: format!("`{CPUFREQ_DIR}/POLICY/{SCALING_GOVERNOR}`"),
        },
        DocRow {
            knob: format!(
                "`cpufreq.POLICY.{RATE_LIMIT_US}`, `cpufreq.POLICY.{UP_RATE_LIMIT_US}`, `cpufreq.POLICY.{DOWN_RATE_LIMIT_US}`"
            ),
            values: "µs, 0–10000000 (written after the governor, again after each governor change)",
            merge: MergePolicy::FirstWins,
            file: format!("`{CPUFREQ_DIR}/POLICY/GOVERNOR/FILE` (or `{CPUFREQ_DIR}/GOVERNOR/FILE`)"),
        },
    ]
}

fn parse_cpufreq(text: &str, rest: &str) -> Result<Knob, KnobError> {
    let (policy, attr_text) = rest.split_once('.').ok_or_else(|| {
        KnobError::new(format!(
            "unknown knob `{text}`: expected cpufreq.POLICY.{{min,max,governor,rate_limit_us,up_rate_limit_us,down_rate_limit_us}}"
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
        RATE_LIMIT_US => CpufreqAttr::RateLimitUs,
        UP_RATE_LIMIT_US => CpufreqAttr::UpRateLimitUs,
        DOWN_RATE_LIMIT_US => CpufreqAttr::DownRateLimitUs,
        other => {
            let hint = suggest(other, CPUFREQ_ATTRS).map(|a| format!("cpufreq.{policy}.{a}"));
            return Err(KnobError::new(format!(
                "unknown cpufreq attribute `{other}` in `{text}`: expected min, max, governor, rate_limit_us, up_rate_limit_us or down_rate_limit_us"
            ))
            .with_hint(did_you_mean(hint)));
        }
    };
    Ok(Knob::Cpufreq {
        policy: policy.to_string(),
        attr,
    })
}
