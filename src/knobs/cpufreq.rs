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

use super::board::{check_governors, khz_text, Board, CpufreqBounds};
use super::{
    did_you_mean, is_numbered, suggest, DocRow, Family, Files, Id, Knob, KnobError, KnobValue,
    MergePolicy, Places, Shape, Slot, Tok, ValueKind,
};
use std::fmt;
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

/// The file of tunable `attr` of `policy` under `governor` that exists:
/// the per-policy directory's, else the global one's; `None` when the
/// governor lacks the tunable or is not running.
pub(crate) fn existing_tunable(
    files: &dyn Files,
    policy: &str,
    governor: &str,
    attr: CpufreqAttr,
) -> Option<PathBuf> {
    tunable_paths(policy, governor, attr)
        .into_iter()
        .find(|p| files.exists(p))
}

/// Where tunable `attr` of `policy` is written under `governor`: the file
/// that exists, else (the governor is about to start: its directory does
/// not exist yet) the per-policy path when no global directory exists, else
/// the global path.
pub(crate) fn tunable_target(
    files: &dyn Files,
    policy: &str,
    governor: &str,
    attr: CpufreqAttr,
) -> PathBuf {
    if let Some(p) = existing_tunable(files, policy, governor, attr) {
        return p;
    }
    let [per_policy, global] = tunable_paths(policy, governor, attr);
    if global.parent().is_some_and(|d| files.is_dir(d)) {
        global
    } else {
        per_policy
    }
}

/// A policy file's text, trimmed.
fn read(files: &dyn Files, policy: &str, file: &str) -> Option<String> {
    files
        .text(&attr_path(policy, file))
        .map(|t| t.trim().to_string())
}

/// The governor `policy` runs now, and the one it will run (its tunables'
/// directory).
fn governors(at: &Places<'_>, policy: &str) -> (String, String) {
    let running = read(at.files, policy, SCALING_GOVERNOR).unwrap_or_default();
    let will = at
        .governors
        .get(policy)
        .cloned()
        .unwrap_or_else(|| running.clone());
    (running, will)
}

/// `system.cpufreq.POLICY`: a policy's baseline.
#[derive(Clone, Debug, Default)]
pub(crate) struct Baseline {
    pub(crate) policy: String,
    /// A governor or a fallback list (`schedutil|ondemand`).
    pub(crate) governor: Option<String>,
    pub(crate) min: Option<crate::units::Frequency>,
    pub(crate) max: Option<crate::units::Frequency>,
    /// Governor tunables (`rate_limit_us`, …) in µs, in write order.
    pub(crate) tunables: Vec<(CpufreqAttr, u64)>,
}

impl Baseline {
    /// The knobs it sets: the governor, min, max, then the tunables (which
    /// live in the governor's directory).
    pub(crate) fn knobs(&self) -> Vec<(Knob, KnobValue)> {
        let k = |attr| Knob::Cpufreq {
            policy: self.policy.clone(),
            attr,
        };
        let mut out = Vec::new();
        if let Some(gov) = &self.governor {
            out.push((k(CpufreqAttr::Governor), KnobValue::Word(gov.clone())));
        }
        if let Some(f) = &self.min {
            out.push((k(CpufreqAttr::Min), KnobValue::Frequency(*f)));
        }
        if let Some(f) = &self.max {
            out.push((k(CpufreqAttr::Max), KnobValue::Frequency(*f)));
        }
        for (attr, us) in &self.tunables {
            out.push((k(*attr), KnobValue::Int(*us as i64)));
        }
        out
    }
}

/// The cpufreq family.
pub(super) struct Cpufreq;

/// The cpufreq family's registration.
pub(super) static FAMILY: Cpufreq = Cpufreq;

impl Family for Cpufreq {
    fn id(&self) -> Id {
        Id {
            name: "cpufreq",
            head: Some("cpufreq"),
            grammar: Some("cpufreq.POLICY.ATTR"),
        }
    }

    fn parse(&self, text: &str, rest: &str) -> Result<Knob, KnobError> {
        parse_cpufreq(text, rest)
    }

    fn shapes(&self, _: &[&str]) -> Vec<Shape> {
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

    fn fmt(&self, knob: &Knob, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match knob {
            Knob::Cpufreq { policy, attr } => write!(f, "cpufreq.{policy}.{}", attr.name()),
            _ => Ok(()),
        }
    }

    fn kind(&self, knob: &Knob) -> ValueKind {
        match attr(knob) {
            Some(CpufreqAttr::Min | CpufreqAttr::Max) => ValueKind::Frequency,
            Some(CpufreqAttr::Governor) => ValueKind::Word(super::value::parse_governor_list),
            _ => ValueKind::Int {
                min: 0,
                max: RATE_LIMIT_MAX_US,
            },
        }
    }

    fn merge(&self, knob: &Knob) -> MergePolicy {
        match attr(knob) {
            Some(CpufreqAttr::Min | CpufreqAttr::Max) => MergePolicy::Largest,
            _ => MergePolicy::First,
        }
    }

    fn is_ceiling(&self, knob: &Knob) -> bool {
        attr(knob) == Some(CpufreqAttr::Max)
    }

    fn ceilings(&self) -> &'static [&'static str] {
        &["cpufreq.POLICY.max"]
    }

    fn switches_governor<'a>(&self, knob: &'a Knob) -> Option<&'a str> {
        match knob {
            Knob::Cpufreq {
                policy,
                attr: CpufreqAttr::Governor,
            } => Some(policy),
            _ => None,
        }
    }

    /// A governor switch recreates the governor's tunables directory.
    fn recreated_by(&self, knob: &Knob, other: &Knob) -> bool {
        match (knob, other) {
            (
                Knob::Cpufreq { policy, attr },
                Knob::Cpufreq {
                    policy: p,
                    attr: CpufreqAttr::Governor,
                },
            ) => policy == p && attr.is_tunable(),
            _ => false,
        }
    }

    /// A policy's floor and ceiling are a pair (older kernels reject a
    /// floor above the current ceiling).
    fn order<'a>(&self, knob: &'a Knob) -> Option<(&'a str, Slot)> {
        match knob {
            Knob::Cpufreq {
                policy,
                attr: CpufreqAttr::Min,
            } => Some((policy, Slot::Floor)),
            Knob::Cpufreq {
                policy,
                attr: CpufreqAttr::Max,
            } => Some((policy, Slot::Ceiling)),
            _ => None,
        }
    }

    /// `cpuinfo_{min,max}_freq`, the governors and `related_cpus` of each
    /// policy.
    fn read_bounds(&self, files: &dyn Files, board: &mut Board) {
        let words = |name: &str, file: &str| {
            read(files, name, file)
                .map(|t| t.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        };
        let number = |name: &str, file: &str| read(files, name, file)?.parse::<u64>().ok();
        for name in files.names(Path::new(CPUFREQ_DIR)) {
            if !is_numbered(&name, "policy") {
                continue;
            }
            let bounds = CpufreqBounds {
                min_khz: number(&name, "cpuinfo_min_freq"),
                max_khz: number(&name, "cpuinfo_max_freq"),
                governors: words(&name, SCALING_AVAILABLE_GOVERNORS),
                // Blank-separated ("0 1 2 3 "), where cpusets use commas.
                cpus: words(&name, "related_cpus")
                    .and_then(|w| crate::units::CpuList::parse_kernel(&w.join(",")).ok()),
            };
            board.cpufreq.insert(name, bounds);
        }
    }

    fn check(&self, knob: &Knob, value: &KnobValue, board: &Board) -> Result<(), String> {
        let Knob::Cpufreq { policy, attr } = knob else {
            return Ok(());
        };
        let Some(b) = board.cpufreq.get(policy) else {
            return Ok(());
        };
        match (attr, value) {
            (CpufreqAttr::Min | CpufreqAttr::Max, KnobValue::Frequency(f)) => {
                let khz = f.khz();
                let range = || match (b.min_khz, b.max_khz) {
                    (Some(lo), Some(hi)) => format!("{}–{}", khz_text(lo), khz_text(hi)),
                    (Some(lo), None) => format!("from {}", khz_text(lo)),
                    (None, Some(hi)) => format!("up to {}", khz_text(hi)),
                    (None, None) => String::new(),
                };
                if let Some(lo) = b.min_khz.filter(|lo| khz < *lo) {
                    return Err(format!(
                        "{} is below {policy}'s cpuinfo_min_freq {} (its range is {}; cpufreq counts in kHz: a bare number is kHz)",
                        khz_text(khz),
                        khz_text(lo),
                        range()
                    ));
                }
                if let Some(hi) = b.max_khz.filter(|hi| khz > *hi) {
                    return Err(format!(
                        "{} is above {policy}'s cpuinfo_max_freq {} (its range is {})",
                        khz_text(khz),
                        khz_text(hi),
                        range()
                    ));
                }
                Ok(())
            }
            (CpufreqAttr::Governor, KnobValue::Word(list)) => {
                check_governors(list, b.governors.as_deref(), policy)
            }
            _ => Ok(()),
        }
    }

    /// A governor tunable lives in the directory of the governor it will
    /// run under, whether the file exists or not.
    fn path(&self, knob: &Knob, at: &Places<'_>) -> Result<PathBuf, String> {
        match knob {
            Knob::Cpufreq { policy, attr } if attr.is_tunable() => {
                let governor = governors(at, policy).1;
                Ok(tunable_target(at.files, policy, &governor, *attr))
            }
            Knob::Cpufreq { policy, attr } => Ok(attr_path(policy, attr.file_name())),
            _ => Err(format!("{knob} is not a cpufreq knob")),
        }
    }

    /// A governor fallback list resolves against the governors the policy
    /// offers; a tunable the running governor lacks cannot be written.
    fn target(
        &self,
        knob: &Knob,
        value: &KnobValue,
        at: &Places<'_>,
    ) -> Result<(PathBuf, String), String> {
        let Knob::Cpufreq { policy, attr } = knob else {
            return Err(format!("{knob} is not a cpufreq knob"));
        };
        if *attr == CpufreqAttr::Governor {
            let offered: Vec<String> = read(at.files, policy, SCALING_AVAILABLE_GOVERNORS)
                .map(|t| t.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default();
            let chosen = resolve_governor(&value.kernel(), &offered)
                .map_err(|e| format!("cpufreq {policy}: {e}"))?;
            return Ok((self.path(knob, at)?, chosen));
        }
        if attr.is_tunable() {
            let (running, governor) = governors(at, policy);
            // The governor lacks it: missing (a switch not made yet gets
            // the path its directory will have, unless the governor has no
            // tunables at all).
            if WITHOUT_TUNABLES.contains(&governor.as_str()) {
                return Err(format!(
                    "{knob} is missing while {policy} runs `{governor}` (no tunables); it is written again when the governor changes"
                ));
            }
            let path = self.path(knob, at)?;
            if governor == running && existing_tunable(at.files, policy, &governor, *attr).is_none()
            {
                return Err(format!(
                    "{knob} is missing: governor `{governor}` of {policy} has no {} ({} does not exist)",
                    attr.file_name(),
                    path.display()
                ));
            }
            return Ok((path, value.kernel()));
        }
        Ok((self.path(knob, at)?, value.kernel()))
    }

    fn owns(&self, path: &Path, _: &Path) -> bool {
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

    fn doc(&self) -> Vec<DocRow> {
        vec![
            DocRow {
                knob: "`cpufreq.POLICY.min`, `cpufreq.POLICY.max`".into(),
                values: "frequency (`1800MHz`, `2.4GHz`)",
                merge: MergePolicy::Largest,
                file: format!("`{CPUFREQ_DIR}/POLICY/{{{SCALING_MIN_FREQ},{SCALING_MAX_FREQ}}}`"),
            },
            DocRow {
                knob: "`cpufreq.POLICY.governor`".into(),
                values: "a governor, or a fallback list `schedutil\\|ondemand` (the first the policy offers)",
                merge: MergePolicy::First,
                file: format!("`{CPUFREQ_DIR}/POLICY/{SCALING_GOVERNOR}`"),
            },
            DocRow {
                knob: format!(
                    "`cpufreq.POLICY.{RATE_LIMIT_US}`, `cpufreq.POLICY.{UP_RATE_LIMIT_US}`, `cpufreq.POLICY.{DOWN_RATE_LIMIT_US}`"
                ),
                values: "µs, 0–10000000 (written after the governor, again after each governor change)",
                merge: MergePolicy::First,
                file: format!("`{CPUFREQ_DIR}/POLICY/GOVERNOR/FILE` (or `{CPUFREQ_DIR}/GOVERNOR/FILE`)"),
            },
        ]
    }
}

fn attr(knob: &Knob) -> Option<CpufreqAttr> {
    match knob {
        Knob::Cpufreq { attr, .. } => Some(*attr),
        _ => None,
    }
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
