//! The closed set of knobs rules and boosts may change (SPEC §3, "Knobs are a
//! closed set").
//!
//! This module owns the knob names (`G.memory.high`, `cpufreq.policy4.min`,
//! `sysctl.vm.swappiness`, `zram.zram0.mem_limit`, ...), the type of value each
//! knob takes, the exact text written to the kernel for a value, how competing
//! claims on one knob merge ([`Knob::merge_policy`], kept in one table), and
//! the step arithmetic behind `raise`/`lower`. A typo can never name a file
//! outside this set: anything else is a [`KnobError`], with a "did you mean"
//! hint when a valid knob is close.
//!
//! Decisions where the SPEC is silent:
//! - `pids.max` values are [`KnobValue::Count`]: `Some(n)` for a number
//!   (0..=4194304, the kernel's PID_MAX_LIMIT), `None` for `max`.
//! - `cpu.max` share `P%` is `P × 1000` µs per 100000 µs period, rounded to
//!   the microsecond; it must be at least 1% (the kernel's minimum quota is
//!   1 ms). The `QUOTA/PERIOD` form needs a period of 1ms..=1s, a quota of at
//!   least 1ms and at most 8192 periods (one per possible CPU).
//! - `uclamp.*` take at most two decimals, as the kernel file does.
//! - `zram.DEV.mem_limit` takes bytes only (`0` lifts the limit; the kernel
//!   does not understand `max`).
//! - cpufreq policies are `policyN`, zram devices `zramN`, governors
//!   `[a-z0-9_]{1,15}`.
//! - `cpufreq`, `sysctl` and `zram` as the first part of a knob always mean
//!   those families, so a group with one of these names (see
//!   [`RESERVED_GROUP_NAMES`]) cannot be addressed by a knob.
//! - `raise` never lowers a knob and `lower` never raises it: a current value
//!   already past the limit is left alone.
//! - `latency.cpuN` / `latency.global` (PM QoS, docs/latency.md) take whole
//!   microseconds up to [`LATENCY_MAX_US`]; their values are
//!   [`KnobValue::Latency`], `None` meaning no constraint. They merge
//!   [`MergePolicy::SmallestWins`]. The per-CPU knob is rendered in the
//!   kernel's encoding ([`resume_latency_text`]: `0us` is `n/a`, none is
//!   `0`); `latency.global` is [`Knob::held_by_daemon`]: a request on an
//!   open file descriptor, never a file write, never journalled.
//! - Sysctls take the range the kernel enforces where it has one we are sure
//!   of ([`sysctl_range`]); the newest kernel's range is used (an older kernel
//!   that rejects, say, swappiness 150 says so at write time, like any
//!   rejected write). Sysctls not in this table take any integer:
//!
//!   | sysctl                          | range            | kernel source of the bound            |
//!   |---------------------------------|------------------|---------------------------------------|
//!   | `vm.swappiness`                 | 0..=200          | 0..=100 before 5.8                    |
//!   | `vm.dirty_ratio`                | 0..=100          | `SYSCTL_ZERO`..`SYSCTL_ONE_HUNDRED`   |
//!   | `vm.dirty_background_ratio`     | 0..=100          | `SYSCTL_ZERO`..`SYSCTL_ONE_HUNDRED`   |
//!   | `vm.compaction_proactiveness`   | 0..=100          | `SYSCTL_ZERO`..`SYSCTL_ONE_HUNDRED`   |
//!   | `vm.watermark_scale_factor`     | 1..=3000         | 1..=1000 on older kernels             |
//!   | `vm.watermark_boost_factor`     | 0..=2^31-1       | `SYSCTL_ZERO`, an `int`               |
//!   | `vm.min_free_kbytes`            | 0..=2^31-1       | `SYSCTL_ZERO`, an `int`               |
//!   | `vm.overcommit_memory`          | 0..=2            | `SYSCTL_ZERO`..`SYSCTL_TWO`           |
//!   | `vm.panic_on_oom`               | 0..=2            | `SYSCTL_ZERO`..`SYSCTL_TWO`           |
//!   | `kernel.sched_rt_period_us`     | 1..=2^31-1       | `SYSCTL_ONE`..`INT_MAX`               |
//!   | `kernel.sched_rt_runtime_us`    | -1..=2^31-1      | -1 = unlimited; ≤ the period at write |
//!   | `kernel.timer_migration`        | 0..=1            | `SYSCTL_ZERO`..`SYSCTL_ONE`           |

use crate::units::{CpuList, Duration, Frequency, Percent, Size, UnitError};
use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// Knob family prefixes; a group with one of these names cannot be named in
/// a knob, so policy validation should reject such group names.
pub const RESERVED_GROUP_NAMES: [&str; 4] = ["cpufreq", "sysctl", "zram", "latency"];

/// The largest latency tolerance a `latency.*` knob takes, in µs: the CPU
/// latency QoS default (`PM_QOS_CPU_LATENCY_DEFAULT_VALUE`, what
/// `/dev/cpu_dma_latency` reads with no request held). Larger values mean
/// nothing to the cpuidle governor (no idle state is that slow), and the
/// per-CPU file refuses `S32_MAX` (its internal "no constraint").
pub const LATENCY_MAX_US: u64 = 2_000_000_000;

/// Largest `pids.max` the kernel accepts (PID_MAX_LIMIT on 64-bit).
pub const PIDS_LIMIT: u64 = 4_194_304;

/// Whether `name` follows the SPEC naming rule `[a-z0-9][a-z0-9_-]{0,63}`
/// (groups, hooks, rules).
pub fn is_valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_lowercase() || b.is_ascii_digit() => {}
        _ => return false,
    }
    name.len() <= 64
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// The closest candidate to `input` by edit distance (transpositions count
/// once), if it is close enough to be a plausible typo. Shared with the rule
/// language parser so both suggest alike.
pub(crate) fn suggest<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::osa_distance(input, c), c))
        .filter(|(d, c)| *d > 0 && *d <= (c.chars().count() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// A knob text that is not one of the closed set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnobError {
    pub message: String,
    /// A suggestion such as "did you mean `inference.memory.high`?".
    pub hint: Option<String>,
}

impl fmt::Display for KnobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.hint {
            Some(hint) => write!(f, "{}, {}", self.message, hint),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for KnobError {}

impl KnobError {
    fn new(message: impl Into<String>) -> Self {
        KnobError {
            message: message.into(),
            hint: None,
        }
    }

    fn with_hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }
}

fn did_you_mean(candidate: Option<String>) -> Option<String> {
    candidate.map(|c| format!("did you mean `{c}`?"))
}

/// A knob of one cgroup, in the order a group's baseline is written:
/// `cpuset.mems` before `cpuset.cpus` before the partition, memory limits from
/// `min` up to `max`. The derived order is that write order (the knob table
/// and repairs iterate in it).
///
/// [`GroupKnob::ALL`] are the knobs rules and boosts may name (SPEC §3); the
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
    /// The knobs a rule or boost may name.
    pub const ALL: [GroupKnob; 12] = [
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
    pub fn name(self) -> &'static str {
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
    pub fn file_name(self) -> &'static str {
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
    pub fn controller(self) -> &'static str {
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

/// A zram device attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ZramAttr {
    /// `/sys/block/DEV/mem_limit`.
    MemLimit,
    /// The swap priority the device is (re-)activated with; not a sysfs file.
    SwapPriority,
}

impl ZramAttr {
    pub fn name(self) -> &'static str {
        match self {
            ZramAttr::MemLimit => "mem_limit",
            ZramAttr::SwapPriority => "swap_priority",
        }
    }
}

/// One knob of the closed set.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Knob {
    Group {
        group: String,
        knob: GroupKnob,
    },
    Cpufreq {
        policy: String,
        attr: CpufreqAttr,
    },
    /// Dotted sysctl name without the `sysctl.` prefix, e.g. `vm.swappiness`.
    Sysctl(String),
    Zram {
        device: String,
        attr: ZramAttr,
    },
    /// `latency.cpuN`: the resume latency this CPU tolerates,
    /// `/sys/devices/system/cpu/cpuN/power/pm_qos_resume_latency_us`.
    LatencyCpu(u32),
    /// `latency.global`: the CPU latency QoS request the daemon holds open
    /// on `/dev/cpu_dma_latency` ([`Knob::held_by_daemon`]).
    LatencyGlobal,
}

/// How competing claims on one knob are merged (SPEC §3 semantics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MergePolicy {
    /// More means more resource or speed: the largest claim wins.
    LargestWins,
    /// The claim ranked first (boosts, then rules in policy order) wins.
    FirstWins,
    /// Less means more performance: the smallest claim wins (`latency.*`:
    /// less tolerated wake-up latency keeps the CPU out of deep idle).
    SmallestWins,
}

/// The type of value a knob takes; private so callers go through
/// [`Knob::parse_value`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueKind {
    Size {
        allow_max: bool,
    },
    Frequency,
    Weight,
    Int {
        min: i64,
        max: i64,
    },
    Count,
    CpuMax,
    Uclamp,
    CpuList,
    Governor,
    /// `cpuset.cpus.partition`: member, root or isolated.
    Partition,
    /// `latency.*`: a duration in whole µs up to [`LATENCY_MAX_US`].
    Latency,
}

/// Family attributes, for "did you mean" on a misspelled last part.
const CPUFREQ_ATTRS: [&str; 3] = ["min", "max", "governor"];
const ZRAM_ATTRS: [&str; 2] = ["mem_limit", "swap_priority"];
const SYSCTL_SCOPE: &str =
    "sysctl knobs are limited to vm.*, kernel.sched_*, kernel.timer_migration";

impl Knob {
    /// Parses a knob name such as `inference.memory.high`.
    pub fn parse(text: &str) -> Result<Knob, KnobError> {
        let Some((head, rest)) = text.split_once('.') else {
            return Err(KnobError::new(format!(
                "unknown knob `{text}`: expected GROUP.KNOB, cpufreq.POLICY.ATTR, sysctl.NAME, zram.DEV.ATTR, latency.cpuN or latency.global"
            )));
        };
        match head {
            "cpufreq" => parse_cpufreq(text, rest),
            "sysctl" => parse_sysctl(text, rest),
            "zram" => parse_zram(text, rest),
            "latency" => parse_latency(text, rest),
            group => parse_group_knob(text, group, rest),
        }
    }

    /// The group a group knob belongs to.
    pub fn group(&self) -> Option<&str> {
        match self {
            Knob::Group { group, .. } => Some(group),
            _ => None,
        }
    }

    /// Whether the knob is a request only a running daemon can hold (the
    /// kernel drops it when its file descriptor closes): `apply` cannot set
    /// it and writes nothing for it; it is never journalled (there is
    /// nothing to restore).
    pub fn held_by_daemon(&self) -> bool {
        matches!(self, Knob::LatencyGlobal)
    }

    /// How claims on this knob merge. This is the single table for it.
    pub fn merge_policy(&self) -> MergePolicy {
        use MergePolicy::{FirstWins, LargestWins, SmallestWins};
        match self {
            Knob::Group { knob, .. } => match knob {
                GroupKnob::CpuWeight
                | GroupKnob::CpuMax
                | GroupKnob::UclampMin
                | GroupKnob::UclampMax
                | GroupKnob::MemoryMin
                | GroupKnob::MemoryLow
                | GroupKnob::MemoryHigh
                | GroupKnob::MemoryMax
                | GroupKnob::MemorySwapMax
                | GroupKnob::IoWeight
                | GroupKnob::PidsMax => LargestWins,
                GroupKnob::CpusetCpus
                | GroupKnob::CpusetMems
                | GroupKnob::CpusetPartition
                | GroupKnob::MemoryOomGroup => FirstWins,
            },
            Knob::Cpufreq { attr, .. } => match attr {
                CpufreqAttr::Min | CpufreqAttr::Max => LargestWins,
                CpufreqAttr::Governor => FirstWins,
            },
            Knob::Sysctl(_) => FirstWins,
            Knob::Zram { .. } => FirstWins,
            Knob::LatencyCpu(_) | Knob::LatencyGlobal => SmallestWins,
        }
    }

    fn value_kind(&self) -> ValueKind {
        match self {
            Knob::Group { knob, .. } => match knob {
                GroupKnob::CpuWeight | GroupKnob::IoWeight => ValueKind::Weight,
                GroupKnob::CpuMax => ValueKind::CpuMax,
                GroupKnob::UclampMin | GroupKnob::UclampMax => ValueKind::Uclamp,
                GroupKnob::MemoryMin
                | GroupKnob::MemoryLow
                | GroupKnob::MemoryHigh
                | GroupKnob::MemoryMax
                | GroupKnob::MemorySwapMax => ValueKind::Size { allow_max: true },
                GroupKnob::PidsMax => ValueKind::Count,
                GroupKnob::CpusetCpus | GroupKnob::CpusetMems => ValueKind::CpuList,
                GroupKnob::CpusetPartition => ValueKind::Partition,
                GroupKnob::MemoryOomGroup => ValueKind::Int { min: 0, max: 1 },
            },
            Knob::Cpufreq { attr, .. } => match attr {
                CpufreqAttr::Min | CpufreqAttr::Max => ValueKind::Frequency,
                CpufreqAttr::Governor => ValueKind::Governor,
            },
            Knob::Sysctl(name) => {
                let (min, max) = sysctl_range(name).unwrap_or((i64::MIN, i64::MAX));
                ValueKind::Int { min, max }
            }
            Knob::Zram { attr, .. } => match attr {
                ZramAttr::MemLimit => ValueKind::Size { allow_max: false },
                ZramAttr::SwapPriority => ValueKind::Int {
                    min: -1,
                    max: 32767,
                },
            },
            Knob::LatencyCpu(_) | Knob::LatencyGlobal => ValueKind::Latency,
        }
    }

    /// Whether `raise`/`lower` can step this knob (its value is a number).
    pub fn is_numeric(&self) -> bool {
        !matches!(
            self.value_kind(),
            ValueKind::CpuMax
                | ValueKind::CpuList
                | ValueKind::Governor
                | ValueKind::Partition
                | ValueKind::Latency
        )
    }

    /// Parses a value for this knob into its typed form.
    pub fn parse_value(&self, text: &str) -> Result<KnobValue, UnitError> {
        match self.value_kind() {
            ValueKind::Size { allow_max } => {
                let size = Size::parse(text)?;
                if !allow_max && size == Size::Max {
                    return Err(UnitError::new(
                        "size",
                        text,
                        format!("`{self}` takes bytes (0 lifts the limit), not `max`"),
                    ));
                }
                Ok(KnobValue::Size(size))
            }
            ValueKind::Frequency => Frequency::parse(text).map(KnobValue::Frequency),
            ValueKind::Weight => parse_weight(text).map(KnobValue::Weight),
            ValueKind::Int { min, max } => parse_int(text, min, max).map(KnobValue::Int),
            ValueKind::Count => parse_count(text).map(KnobValue::Count),
            ValueKind::CpuMax => CpuMax::parse(text).map(KnobValue::CpuMax),
            ValueKind::Uclamp => parse_uclamp(text).map(KnobValue::Percent),
            ValueKind::CpuList => CpuList::parse(text).map(KnobValue::CpuList),
            ValueKind::Governor => parse_governor(text).map(KnobValue::Word),
            ValueKind::Partition => parse_partition(text).map(KnobValue::Word),
            ValueKind::Latency => parse_latency_value(text).map(|us| KnobValue::Latency(Some(us))),
        }
    }

    /// The exact text written to the knob's kernel file for `value`
    /// (`io.weight` takes `default N`; everything else its kernel form).
    pub fn render(&self, value: &KnobValue) -> String {
        match (self, value) {
            (
                Knob::Group {
                    knob: GroupKnob::IoWeight,
                    ..
                },
                KnobValue::Weight(w),
            ) => format!("default {w}"),
            _ => value.kernel(),
        }
    }

    /// Parses what the knob's kernel file holds, in the kernel's rendering
    /// (not the policy's spelling): `max` for a full uclamp, `80.00`, an
    /// empty cpu list, `default 100` for io.weight, `max 100000` for cpu.max,
    /// sizes and frequencies as plain numbers. [`Knob::render`] of a value
    /// parses back to the same value. An invalid partition
    /// (`isolated invalid (reason)`) is an error carrying the kernel's reason.
    pub fn parse_kernel(&self, text: &str) -> Result<KnobValue, UnitError> {
        let t = text.trim();
        let number = |kind: &'static str| {
            t.parse::<u64>()
                .map_err(|_| UnitError::new(kind, t, "expected the kernel's decimal number"))
        };
        match self.value_kind() {
            ValueKind::Size { .. } => match t {
                "max" => Ok(KnobValue::Size(Size::Max)),
                _ => number("size").map(|b| KnobValue::Size(Size::Bytes(b))),
            },
            ValueKind::Frequency => {
                number("frequency").map(|khz| KnobValue::Frequency(Frequency { khz }))
            }
            ValueKind::Weight => {
                // io.weight: `default N` first, then per-device lines.
                let w = t
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("default "))
                    .unwrap_or(t)
                    .trim();
                w.parse::<u64>()
                    .map(KnobValue::Weight)
                    .map_err(|_| UnitError::new("weight", t, "expected `N` or `default N`"))
            }
            ValueKind::Int { .. } => t
                .parse::<i64>()
                .map(KnobValue::Int)
                .map_err(|_| UnitError::new("integer", t, "expected one whole number")),
            ValueKind::Count => parse_count(t).map(KnobValue::Count),
            ValueKind::CpuMax => CpuMax::parse_kernel(t).map(KnobValue::CpuMax),
            ValueKind::Uclamp => match t {
                "max" => Ok(KnobValue::Percent(Percent(100.0))),
                _ => t
                    .parse::<f64>()
                    .ok()
                    .and_then(Percent::new)
                    .map(KnobValue::Percent)
                    .ok_or_else(|| {
                        UnitError::new("percent", t, "expected `max` or a percentage like `80.00`")
                    }),
            },
            ValueKind::CpuList => CpuList::parse_kernel(t).map(KnobValue::CpuList),
            ValueKind::Governor => Ok(KnobValue::Word(t.to_string())),
            ValueKind::Latency => parse_resume_latency_kernel(t).map(KnobValue::Latency),
            ValueKind::Partition => {
                let mut words = t.splitn(2, ' ');
                let mode = words.next().unwrap_or("");
                match words.next() {
                    None => parse_partition(mode).map(KnobValue::Word),
                    Some(rest) => Err(UnitError::new(
                        "partition",
                        t,
                        format!("the kernel reports the partition {mode} as {rest}"),
                    )),
                }
            }
        }
    }
}

/// A latency tolerance as a policy writes it: a duration in whole µs
/// (`0us`, `100us`, `2ms`), at most [`LATENCY_MAX_US`].
fn parse_latency_value(text: &str) -> Result<u64, UnitError> {
    let us = Duration::parse(text)?.whole_micros().ok_or_else(|| {
        UnitError::new(
            "latency",
            text,
            "expected whole microseconds, like `0us`, `100us` or `2ms`",
        )
    })?;
    if us > LATENCY_MAX_US {
        return Err(UnitError::new(
            "latency",
            text,
            format!("at most {LATENCY_MAX_US}us (the kernel's default: no constraint)"),
        ));
    }
    Ok(us)
}

/// Reads `pm_qos_resume_latency_us` as the kernel renders it
/// (drivers/base/power/sysfs.c, `pm_qos_resume_latency_us_show`): `0` is
/// *no constraint* (`None`), `n/a` is a tolerance of 0 µs (`Some(0)`: no
/// idle state at all), `N` is N µs.
fn parse_resume_latency_kernel(t: &str) -> Result<Option<u64>, UnitError> {
    match t {
        "n/a" => Ok(Some(0)),
        "0" => Ok(None),
        _ => t
            .parse::<u64>()
            .map(Some)
            .map_err(|_| UnitError::new("latency", t, "expected `n/a`, `0` or microseconds")),
    }
}

/// `latency.cpuN` or `latency.global`.
fn parse_latency(text: &str, rest: &str) -> Result<Knob, KnobError> {
    if rest == "global" {
        return Ok(Knob::LatencyGlobal);
    }
    if is_numbered(rest, "cpu") {
        if let Ok(cpu) = rest["cpu".len()..].parse::<u32>() {
            return Ok(Knob::LatencyCpu(cpu));
        }
    }
    let hint = suggest(rest, ["global"]).map(|g| format!("latency.{g}"));
    Err(KnobError::new(format!(
        "unknown knob `{text}`: expected latency.cpuN or latency.global"
    ))
    .with_hint(did_you_mean(hint)))
}

fn parse_partition(text: &str) -> Result<String, UnitError> {
    match text {
        "member" | "root" | "isolated" => Ok(text.to_string()),
        _ => Err(UnitError::new(
            "partition",
            text,
            "expected member, root or isolated",
        )),
    }
}

fn parse_group_knob(text: &str, group: &str, rest: &str) -> Result<Knob, KnobError> {
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
    let family = suggest(group, RESERVED_GROUP_NAMES)
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

fn parse_zram(text: &str, rest: &str) -> Result<Knob, KnobError> {
    let (device, attr_text) = rest.split_once('.').ok_or_else(|| {
        KnobError::new(format!(
            "unknown knob `{text}`: expected zram.DEV.{{mem_limit,swap_priority}}"
        ))
    })?;
    if !is_numbered(device, "zram") {
        return Err(KnobError::new(format!(
            "invalid zram device `{device}` in `{text}`: expected `zramN`"
        )));
    }
    let attr = match attr_text {
        "mem_limit" => ZramAttr::MemLimit,
        "swap_priority" => ZramAttr::SwapPriority,
        other => {
            let hint = suggest(other, ZRAM_ATTRS).map(|a| format!("zram.{device}.{a}"));
            return Err(KnobError::new(format!(
                "unknown zram attribute `{other}` in `{text}`: expected mem_limit or swap_priority"
            ))
            .with_hint(did_you_mean(hint)));
        }
    };
    Ok(Knob::Zram {
        device: device.to_string(),
        attr,
    })
}

fn parse_sysctl(text: &str, name: &str) -> Result<Knob, KnobError> {
    let word_ok = |w: &str| {
        !w.is_empty()
            && w.len() <= 64
            && w.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    let allowed = match name.split_once('.') {
        Some(("vm", leaf)) => word_ok(leaf),
        Some(("kernel", leaf)) => {
            leaf == "timer_migration" || (leaf.starts_with("sched_") && word_ok(leaf))
        }
        _ => false,
    };
    if allowed {
        return Ok(Knob::Sysctl(name.to_string()));
    }
    // A near miss of the one fixed name gets a precise suggestion.
    let hint = match name.split_once('.') {
        Some((ns, leaf)) if suggest(ns, ["kernel"]).is_some() || ns == "kernel" => {
            suggest(leaf, ["timer_migration"]).map(|l| format!("sysctl.kernel.{l}"))
        }
        Some((ns, leaf)) if suggest(ns, ["vm"]).is_some() && word_ok(leaf) => {
            Some(format!("sysctl.vm.{leaf}"))
        }
        _ => None,
    };
    Err(KnobError::new(format!(
        "unknown knob `{text}`: sysctl `{name}` is not in the allowed set"
    ))
    .with_hint(Some(
        did_you_mean(hint).unwrap_or_else(|| SYSCTL_SCOPE.to_string()),
    )))
}

/// `prefix` followed by a decimal number (`policy4`, `zram0`).
fn is_numbered(text: &str, prefix: &str) -> bool {
    text.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.len() <= 5 && n.bytes().all(|b| b.is_ascii_digit()))
}

fn parse_weight(text: &str) -> Result<u64, UnitError> {
    let err = || UnitError::new("weight", text, "expected a whole number from 1 to 10000");
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err());
    }
    match text.parse::<u64>() {
        Ok(w) if (1..=10_000).contains(&w) => Ok(w),
        _ => Err(err()),
    }
}

/// The range the kernel accepts for sysctl `name` (`vm.swappiness`), when it
/// has one this crate is sure of; see the table in the module docs.
pub fn sysctl_range(name: &str) -> Option<(i64, i64)> {
    const INT_MAX: i64 = i32::MAX as i64;
    Some(match name {
        "vm.swappiness" => (0, 200),
        "vm.dirty_ratio" | "vm.dirty_background_ratio" | "vm.compaction_proactiveness" => (0, 100),
        "vm.watermark_scale_factor" => (1, 3000),
        "vm.watermark_boost_factor" | "vm.min_free_kbytes" => (0, INT_MAX),
        "vm.overcommit_memory" | "vm.panic_on_oom" => (0, 2),
        "kernel.sched_rt_period_us" => (1, INT_MAX),
        "kernel.sched_rt_runtime_us" => (-1, INT_MAX),
        "kernel.timer_migration" => (0, 1),
        _ => return None,
    })
}

fn parse_int(text: &str, min: i64, max: i64) -> Result<i64, UnitError> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let range = if min == i64::MIN && max == i64::MAX {
        "expected a whole number".to_string()
    } else {
        format!("expected a whole number from {min} to {max}")
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(UnitError::new("integer", text, range));
    }
    match text.parse::<i64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(UnitError::new("integer", text, range)),
    }
}

fn parse_count(text: &str) -> Result<Option<u64>, UnitError> {
    if text == "max" {
        return Ok(None);
    }
    let err = || {
        UnitError::new(
            "count",
            text,
            format!("expected a whole number from 0 to {PIDS_LIMIT}, or `max`"),
        )
    };
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err());
    }
    match text.parse::<u64>() {
        Ok(n) if n <= PIDS_LIMIT => Ok(Some(n)),
        _ => Err(err()),
    }
}

fn parse_uclamp(text: &str) -> Result<Percent, UnitError> {
    let percent = Percent::parse(text)?;
    let decimals = text
        .trim_end_matches('%')
        .split_once('.')
        .map_or(0, |(_, frac)| frac.len());
    if decimals > 2 {
        return Err(UnitError::new(
            "percent",
            text,
            "uclamp takes at most two decimals, like `12.25%`",
        ));
    }
    Ok(percent)
}

fn parse_governor(text: &str) -> Result<String, UnitError> {
    let ok = !text.is_empty()
        && text.len() <= 15
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(text.to_string())
    } else {
        Err(UnitError::new(
            "governor",
            text,
            "expected a cpufreq governor name like `schedutil` or `performance` ([a-z0-9_], at most 15 characters)",
        ))
    }
}

impl fmt::Display for Knob {
    /// The policy spelling; parses back to the same knob.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Knob::Group { group, knob } => write!(f, "{group}.{}", knob.name()),
            Knob::Cpufreq { policy, attr } => write!(f, "cpufreq.{policy}.{}", attr.name()),
            Knob::Sysctl(name) => write!(f, "sysctl.{name}"),
            Knob::Zram { device, attr } => write!(f, "zram.{device}.{}", attr.name()),
            Knob::LatencyCpu(cpu) => write!(f, "latency.cpu{cpu}"),
            Knob::LatencyGlobal => f.write_str("latency.global"),
        }
    }
}

impl FromStr for Knob {
    type Err = KnobError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Knob::parse(s)
    }
}

// ---------------------------------------------------------------------------
// cpu.max

/// A `cpu.max` value: no limit, a share of one CPU, or an explicit quota.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CpuMax {
    Max,
    /// `50%`: that share of one CPU over the default 100ms period.
    Share(Percent),
    /// `50ms/100ms`: quota and period in microseconds.
    Quota {
        quota_us: u64,
        period_us: u64,
    },
}

/// The kernel's default CFS bandwidth period, used for shares.
pub const DEFAULT_PERIOD_US: u64 = 100_000;
const MIN_QUOTA_US: u64 = 1_000;
const MIN_PERIOD_US: u64 = 1_000;
const MAX_PERIOD_US: u64 = 1_000_000;
const MAX_PERIODS_PER_QUOTA: u64 = 8_192;

const CPUMAX_REASON: &str = "expected `max`, a share like `50%`, or QUOTA/PERIOD like `50ms/100ms`";

impl CpuMax {
    pub fn parse(text: &str) -> Result<Self, UnitError> {
        if text == "max" {
            return Ok(CpuMax::Max);
        }
        if text.ends_with('%') {
            let share = Percent::parse(text)?;
            if share.value() < 1.0 {
                return Err(UnitError::new(
                    "cpu.max",
                    text,
                    "a share must be at least 1% (the kernel's minimum quota is 1ms per 100ms)",
                ));
            }
            return Ok(CpuMax::Share(share));
        }
        let Some((quota_text, period_text)) = text.split_once('/') else {
            return Err(UnitError::new("cpu.max", text, CPUMAX_REASON));
        };
        let micros = |part: &str| {
            Duration::parse(part)
                .ok()
                .and_then(|d| d.whole_micros())
                .ok_or_else(|| {
                    UnitError::new(
                        "cpu.max",
                        text,
                        format!("`{part}` is not a whole number of microseconds with a unit; {CPUMAX_REASON}"),
                    )
                })
        };
        let quota_us = micros(quota_text)?;
        let period_us = micros(period_text)?;
        if !(MIN_PERIOD_US..=MAX_PERIOD_US).contains(&period_us) {
            return Err(UnitError::new(
                "cpu.max",
                text,
                "the period must be between 1ms and 1s",
            ));
        }
        let max_quota = period_us.saturating_mul(MAX_PERIODS_PER_QUOTA);
        if !(MIN_QUOTA_US..=max_quota).contains(&quota_us) {
            return Err(UnitError::new(
                "cpu.max",
                text,
                "the quota must be at least 1ms and at most 8192 periods",
            ));
        }
        Ok(CpuMax::Quota {
            quota_us,
            period_us,
        })
    }

    /// Parses the kernel's `cpu.max` content (`max 100000`, `50000 100000`).
    pub fn parse_kernel(text: &str) -> Result<Self, UnitError> {
        let err = || UnitError::new("cpu.max", text, "expected `QUOTA PERIOD` or `max PERIOD`");
        let mut parts = text.split_whitespace();
        let quota = parts.next().ok_or_else(err)?;
        let period_us: u64 = match parts.next() {
            Some(p) => p.parse().map_err(|_| err())?,
            None => DEFAULT_PERIOD_US,
        };
        if parts.next().is_some() {
            return Err(err());
        }
        if quota == "max" {
            return Ok(CpuMax::Max);
        }
        let quota_us = quota.parse().map_err(|_| err())?;
        Ok(CpuMax::Quota {
            quota_us,
            period_us,
        })
    }

    /// `(quota_us, period_us)`, or `None` for no limit.
    pub fn kernel_pair(&self) -> Option<(u64, u64)> {
        match self {
            CpuMax::Max => None,
            CpuMax::Share(p) => {
                // p is within 0..=100, so the product is within 0..=100000.
                let quota = (p.value() * 1_000.0).round();
                let quota = if quota.is_finite() && quota >= 0.0 {
                    quota as u64
                } else {
                    0
                };
                Some((quota, DEFAULT_PERIOD_US))
            }
            CpuMax::Quota {
                quota_us,
                period_us,
            } => Some((*quota_us, *period_us)),
        }
    }

    /// The text written to `cpu.max`: `max 100000` or `QUOTA PERIOD`.
    pub fn kernel(&self) -> String {
        match self.kernel_pair() {
            None => format!("max {DEFAULT_PERIOD_US}"),
            Some((q, p)) => format!("{q} {p}"),
        }
    }

    /// Compares the CPU bandwidth two values grant; `max` is largest.
    pub fn cmp_bandwidth(&self, other: &CpuMax) -> Ordering {
        match (self.kernel_pair(), other.kernel_pair()) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some((q1, p1)), Some((q2, p2))) => {
                // q1/p1 vs q2/p2 without division; u128 cannot overflow.
                (u128::from(q1) * u128::from(p2)).cmp(&(u128::from(q2) * u128::from(p1)))
            }
        }
    }
}

impl fmt::Display for CpuMax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuMax::Max => f.write_str("max"),
            CpuMax::Share(p) => write!(f, "{p}"),
            CpuMax::Quota {
                quota_us,
                period_us,
            } => write!(
                f,
                "{}/{}",
                Duration(std::time::Duration::from_micros(*quota_us)),
                Duration(std::time::Duration::from_micros(*period_us))
            ),
        }
    }
}

impl FromStr for CpuMax {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuMax::parse(s)
    }
}

// ---------------------------------------------------------------------------
// Values

/// A typed knob value, as produced by [`Knob::parse_value`].
#[derive(Debug, Clone, PartialEq)]
pub enum KnobValue {
    Size(Size),
    Frequency(Frequency),
    /// Sysctls and `zram.DEV.swap_priority`.
    Int(i64),
    /// `cpu.weight`, `io.weight` (1..=10000).
    Weight(u64),
    CpuMax(CpuMax),
    /// `uclamp.min`/`uclamp.max`.
    Percent(Percent),
    CpuList(CpuList),
    /// A cpufreq governor name.
    Word(String),
    /// `pids.max`: `Some(n)`, or `None` for `max`.
    Count(Option<u64>),
    /// `latency.*`: the tolerated wake-up latency in µs, or `None` for no
    /// constraint (what the kernel holds when nobody asks).
    Latency(Option<u64>),
}

/// The text `pm_qos_resume_latency_us` takes for a tolerance
/// (drivers/base/power/sysfs.c, `pm_qos_resume_latency_us_store`): the kernel
/// reads `0` as *no constraint* and takes `n/a` for 0 µs tolerated, so a
/// policy's `0us` is written `n/a` and no constraint `0`; other values are
/// plain µs (negative ones, and `S32_MAX`, are EINVAL there).
pub fn resume_latency_text(v: Option<u64>) -> String {
    match v {
        None => "0".to_string(),
        Some(0) => "n/a".to_string(),
        Some(us) => us.to_string(),
    }
}

impl KnobValue {
    /// The exact text written to the kernel file.
    pub fn kernel(&self) -> String {
        match self {
            KnobValue::Size(s) => s.kernel(),
            KnobValue::Frequency(f) => f.khz().to_string(),
            KnobValue::Int(n) => n.to_string(),
            KnobValue::Weight(w) => w.to_string(),
            KnobValue::CpuMax(c) => c.kernel(),
            KnobValue::Percent(p) => format!("{:.2}", p.value()),
            KnobValue::CpuList(c) => c.to_string(),
            KnobValue::Word(w) => w.clone(),
            KnobValue::Count(Some(n)) => n.to_string(),
            KnobValue::Count(None) => "max".to_string(),
            KnobValue::Latency(v) => resume_latency_text(*v),
        }
    }

    /// Orders two values of one knob by how much resource they grant, for
    /// [`MergePolicy::LargestWins`]. `None` when the values are of different
    /// types or the type has no such order (cpu lists, governors).
    pub fn cmp_resource(&self, other: &KnobValue) -> Option<Ordering> {
        match (self, other) {
            (KnobValue::Size(a), KnobValue::Size(b)) => Some(a.cmp_limit(b)),
            (KnobValue::Frequency(a), KnobValue::Frequency(b)) => Some(a.cmp(b)),
            (KnobValue::Int(a), KnobValue::Int(b)) => Some(a.cmp(b)),
            (KnobValue::Weight(a), KnobValue::Weight(b)) => Some(a.cmp(b)),
            (KnobValue::CpuMax(a), KnobValue::CpuMax(b)) => Some(a.cmp_bandwidth(b)),
            (KnobValue::Percent(a), KnobValue::Percent(b)) => a.partial_cmp(b),
            (KnobValue::Count(a), KnobValue::Count(b)) => Some(match (a, b) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some(x), Some(y)) => x.cmp(y),
            }),
            _ => None,
        }
    }

    /// Orders two latency tolerances, for [`MergePolicy::SmallestWins`]: no
    /// constraint is larger than any number. `None` for other types.
    pub fn cmp_latency(&self, other: &KnobValue) -> Option<Ordering> {
        match (self, other) {
            (KnobValue::Latency(a), KnobValue::Latency(b)) => Some(match (a, b) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some(x), Some(y)) => x.cmp(y),
            }),
            _ => None,
        }
    }

    /// Whether `raise`/`lower` can step a value of this type.
    pub fn is_numeric(&self) -> bool {
        matches!(
            self,
            KnobValue::Size(_)
                | KnobValue::Frequency(_)
                | KnobValue::Int(_)
                | KnobValue::Weight(_)
                | KnobValue::Percent(_)
                | KnobValue::Count(_)
        )
    }

    /// One `raise` (`up`) or `lower` step from `self` by `delta`, never past
    /// `limit`. A raise never lowers and a lower never raises: if `self` is
    /// already beyond `limit` it stays. `max` stays `max` when raising.
    ///
    /// `None` when the three values are not the same numeric type, when
    /// `delta` is `max`, or when there is no finite answer (lowering from
    /// `max`, or lowering towards a `max` limit); the caller logs and skips.
    pub fn step(&self, delta: &KnobValue, limit: &KnobValue, up: bool) -> Option<KnobValue> {
        use KnobValue as V;
        match (self, delta, limit) {
            (V::Size(cur), V::Size(Size::Bytes(d)), V::Size(lim)) => {
                step_limited(cur.bytes(), *d, lim.bytes(), up)
                    .map(|v| V::Size(v.map_or(Size::Max, Size::Bytes)))
            }
            (V::Count(cur), V::Count(Some(d)), V::Count(lim)) => {
                step_limited(*cur, *d, *lim, up).map(V::Count)
            }
            (V::Frequency(cur), V::Frequency(d), V::Frequency(lim)) => {
                let khz = step_u64(cur.khz, d.khz, lim.khz, up);
                Some(V::Frequency(Frequency { khz }))
            }
            (V::Weight(cur), V::Weight(d), V::Weight(lim)) => {
                Some(V::Weight(step_u64(*cur, *d, *lim, up)))
            }
            (V::Int(cur), V::Int(d), V::Int(lim)) => {
                let next = if up {
                    cur.saturating_add(*d).min(*lim).max(*cur)
                } else {
                    cur.saturating_sub(*d).max(*lim).min(*cur)
                };
                Some(V::Int(next))
            }
            (V::Percent(cur), V::Percent(d), V::Percent(lim)) => {
                let (c, d, l) = (cur.value(), d.value(), lim.value());
                let next = if up {
                    (c + d).min(l).max(c)
                } else {
                    (c - d).max(l).min(c)
                };
                Percent::new(next).map(V::Percent)
            }
            _ => None,
        }
    }
}

/// Step for an unsigned value clamped at `limit`, never moving backwards.
fn step_u64(cur: u64, delta: u64, limit: u64, up: bool) -> u64 {
    if up {
        cur.saturating_add(delta).min(limit).max(cur)
    } else {
        cur.saturating_sub(delta).max(limit).min(cur)
    }
}

/// Step where `None` means `max` (unlimited), for sizes and counts.
/// The outer `None` means there is no finite answer.
fn step_limited(cur: Option<u64>, delta: u64, limit: Option<u64>, up: bool) -> Option<Option<u64>> {
    match (cur, limit, up) {
        // Raising from max: already the most there is.
        (None, _, true) => Some(None),
        // Raising with no cap.
        (Some(c), None, true) => Some(Some(c.saturating_add(delta))),
        (Some(c), Some(l), true) => Some(Some(step_u64(c, delta, l, true))),
        (Some(c), Some(l), false) => Some(Some(step_u64(c, delta, l, false))),
        // Lowering from max, or towards max: no finite starting point.
        (None, _, false) | (Some(_), None, false) => None,
    }
}

impl fmt::Display for KnobValue {
    /// The policy form; `Knob::parse_value` reads it back to the same value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobValue::Size(s) => write!(f, "{s}"),
            KnobValue::Frequency(fr) => write!(f, "{fr}"),
            KnobValue::Int(n) => write!(f, "{n}"),
            KnobValue::Weight(w) => write!(f, "{w}"),
            KnobValue::CpuMax(c) => write!(f, "{c}"),
            KnobValue::Percent(p) => write!(f, "{p}"),
            KnobValue::CpuList(c) => write!(f, "{c}"),
            KnobValue::Word(w) => f.write_str(w),
            KnobValue::Count(Some(n)) => write!(f, "{n}"),
            KnobValue::Count(None) => f.write_str("max"),
            KnobValue::Latency(Some(us)) => write!(f, "{us}us"),
            KnobValue::Latency(None) => f.write_str("none"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn knob(text: &str) -> Knob {
        match Knob::parse(text) {
            Ok(k) => k,
            Err(e) => panic!("{text}: {e}"),
        }
    }

    fn value(knob_text: &str, value: &str) -> KnobValue {
        match knob(knob_text).parse_value(value) {
            Ok(v) => v,
            Err(e) => panic!("{knob_text} = {value}: {e}"),
        }
    }

    fn err(text: &str) -> KnobError {
        match Knob::parse(text) {
            Ok(k) => panic!("{text} parsed as {k:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn every_knob_form_round_trips() {
        let forms = [
            "realtime.cpu.weight",
            "realtime.cpu.max",
            "realtime.uclamp.min",
            "realtime.uclamp.max",
            "inference.memory.min",
            "inference.memory.low",
            "inference.memory.high",
            "inference.memory.max",
            "inference.memory.swap_max",
            "vision.io.weight",
            "vision.pids.max",
            "vision.cpuset.cpus",
            "cpufreq.policy4.min",
            "cpufreq.policy4.max",
            "cpufreq.policy7.governor",
            "sysctl.vm.swappiness",
            "sysctl.vm.min_free_kbytes",
            "sysctl.kernel.sched_rt_runtime_us",
            "sysctl.kernel.timer_migration",
            "zram.zram0.mem_limit",
            "zram.zram0.swap_priority",
            "0.cpu.weight",
            "a-b_c.memory.high",
        ];
        for form in forms {
            assert_eq!(knob(form).to_string(), form);
        }
        assert_eq!(
            knob("inference.memory.high"),
            Knob::Group {
                group: "inference".into(),
                knob: GroupKnob::MemoryHigh
            }
        );
        assert_eq!(
            knob("cpufreq.policy4.min"),
            Knob::Cpufreq {
                policy: "policy4".into(),
                attr: CpufreqAttr::Min
            }
        );
        assert_eq!(
            knob("sysctl.vm.swappiness"),
            Knob::Sysctl("vm.swappiness".into())
        );
        assert_eq!(knob("realtime.cpu.weight").group(), Some("realtime"));
        assert_eq!(GroupKnob::MemorySwapMax.file_name(), "memory.swap.max");
        assert_eq!(GroupKnob::UclampMin.file_name(), "cpu.uclamp.min");
        assert_eq!(GroupKnob::UclampMin.controller(), "cpu");
        assert_eq!(CpufreqAttr::Min.file_name(), "scaling_min_freq");
    }

    #[test]
    fn knob_rejections() {
        for bad in [
            "",
            "inference",
            "inference.",
            "inference.memory",
            "inference.memory.high.x",
            "Inference.memory.high",
            "-x.memory.high",
            ".memory.high",
            "inference.memory.swap.max",
            "inference.cpu.uclamp.min",
            "cpufreq.policy4",
            "cpufreq.cpu4.min",
            "cpufreq.policy.min",
            "cpufreq.policy4.speed",
            "sysctl.net.core.somaxconn",
            "sysctl.kernel.panic",
            "sysctl.vm.",
            "sysctl.vm.a.b",
            "sysctl.VM.swappiness",
            "sysctl",
            "zram.zram0",
            "zram.sda.mem_limit",
            "zram.zram0.disksize",
            "../etc.memory.high",
            "a/b.memory.high",
        ] {
            assert!(Knob::parse(bad).is_err(), "{bad:?} should be rejected");
        }
        let long = format!("{}.cpu.weight", "a".repeat(65));
        assert!(Knob::parse(&long).is_err());
        let ok = format!("{}.cpu.weight", "a".repeat(64));
        assert!(Knob::parse(&ok).is_ok());
    }

    #[test]
    fn hints() {
        let e = err("inference.memory.hgh");
        assert_eq!(
            e.hint.as_deref(),
            Some("did you mean `inference.memory.high`?")
        );
        assert!(e
            .to_string()
            .contains("unknown knob `inference.memory.hgh`"));
        assert_eq!(
            err("inference.memory.swap.max").hint.as_deref(),
            Some("did you mean `inference.memory.swap_max`?")
        );
        let e = err("sysctl.net.core.x");
        assert_eq!(
            e.hint.as_deref(),
            Some("sysctl knobs are limited to vm.*, kernel.sched_*, kernel.timer_migration")
        );
        assert_eq!(
            err("sysctl.kernel.timer_migraton").hint.as_deref(),
            Some("did you mean `sysctl.kernel.timer_migration`?")
        );
        assert_eq!(
            err("cpufreq.policy4.mn").hint.as_deref(),
            Some("did you mean `cpufreq.policy4.min`?")
        );
        assert_eq!(
            err("cpufrq.policy4.min").hint.as_deref(),
            Some("did you mean `cpufreq.policy4.min`?")
        );
        assert_eq!(
            err("zram.zram0.mem_limt").hint.as_deref(),
            Some("did you mean `zram.zram0.mem_limit`?")
        );
        assert_eq!(err("inference.frobnicate").hint, None);
        assert!(err("cpufreq.cpu4.min").message.contains("`cpu4`"));
    }

    #[test]
    fn merge_policy_table() {
        use MergePolicy::*;
        let cases = [
            ("g.cpu.weight", LargestWins),
            ("g.cpu.max", LargestWins),
            ("g.uclamp.min", LargestWins),
            ("g.uclamp.max", LargestWins),
            ("g.memory.min", LargestWins),
            ("g.memory.low", LargestWins),
            ("g.memory.high", LargestWins),
            ("g.memory.max", LargestWins),
            ("g.memory.swap_max", LargestWins),
            ("g.io.weight", LargestWins),
            ("g.pids.max", LargestWins),
            ("g.cpuset.cpus", FirstWins),
            ("cpufreq.policy0.min", LargestWins),
            ("cpufreq.policy0.max", LargestWins),
            ("cpufreq.policy0.governor", FirstWins),
            ("sysctl.vm.swappiness", FirstWins),
            ("zram.zram0.mem_limit", FirstWins),
            ("zram.zram0.swap_priority", FirstWins),
        ];
        for (text, policy) in cases {
            assert_eq!(knob(text).merge_policy(), policy, "{text}");
        }
    }

    #[test]
    fn values_and_kernel_text() {
        let cases = [
            ("g.cpu.weight", "200", "200"),
            ("g.cpu.max", "max", "max 100000"),
            ("g.cpu.max", "50%", "50000 100000"),
            ("g.cpu.max", "12.5%", "12500 100000"),
            ("g.cpu.max", "50ms/100ms", "50000 100000"),
            ("g.cpu.max", "200ms/100ms", "200000 100000"),
            ("g.uclamp.min", "80%", "80.00"),
            ("g.uclamp.max", "12.25%", "12.25"),
            ("g.memory.high", "3584M", "3758096384"),
            ("g.memory.max", "max", "max"),
            ("g.memory.swap_max", "0", "0"),
            ("g.io.weight", "10000", "10000"),
            ("g.pids.max", "512", "512"),
            ("g.pids.max", "max", "max"),
            ("g.cpuset.cpus", "6,7,0-3", "0-3,6-7"),
            ("cpufreq.policy4.min", "1.8GHz", "1800000"),
            ("cpufreq.policy4.max", "1200000", "1200000"),
            ("cpufreq.policy4.governor", "schedutil", "schedutil"),
            ("sysctl.kernel.sched_rt_runtime_us", "-1", "-1"),
            ("sysctl.vm.swappiness", "30", "30"),
            ("zram.zram0.mem_limit", "4G", "4294967296"),
            ("zram.zram0.swap_priority", "-1", "-1"),
            ("zram.zram0.swap_priority", "32767", "32767"),
        ];
        for (k, v, kernel) in cases {
            let parsed = value(k, v);
            assert_eq!(parsed.kernel(), kernel, "{k} = {v}");
            // The policy form reads back to the same value.
            assert_eq!(value(k, &parsed.to_string()), parsed, "{k} = {v}");
        }
        assert_eq!(value("g.pids.max", "max"), KnobValue::Count(None));
        assert_eq!(
            value("g.cpu.max", "50ms/100ms"),
            KnobValue::CpuMax(CpuMax::Quota {
                quota_us: 50_000,
                period_us: 100_000
            })
        );
    }

    #[test]
    fn value_rejections() {
        let cases = [
            ("g.cpu.weight", "0"),
            ("g.cpu.weight", "10001"),
            ("g.cpu.weight", "-1"),
            ("g.cpu.weight", "1.5"),
            ("g.cpu.weight", ""),
            ("g.cpu.max", "0%"),
            ("g.cpu.max", "0.5%"),
            ("g.cpu.max", "150%"),
            ("g.cpu.max", "50"),
            ("g.cpu.max", "50ms"),
            ("g.cpu.max", "50ms/2s"),
            ("g.cpu.max", "500us/100ms"),
            ("g.cpu.max", "50ms/500us"),
            ("g.cpu.max", "1ns/1ms"),
            ("g.cpu.max", "50ms/100ms/1s"),
            ("g.cpu.max", "max 100000"),
            ("g.uclamp.min", "80"),
            ("g.uclamp.min", "12.345%"),
            ("g.uclamp.min", "101%"),
            ("g.memory.high", "4Q"),
            ("g.memory.high", "-1"),
            ("g.pids.max", "-1"),
            ("g.pids.max", "4194305"),
            ("g.pids.max", "MAX"),
            ("g.cpuset.cpus", ""),
            ("g.cpuset.cpus", "3-1"),
            ("cpufreq.policy4.min", "fast"),
            ("cpufreq.policy4.governor", "Performance"),
            ("cpufreq.policy4.governor", "../x"),
            ("cpufreq.policy4.governor", "averyveryverylonggovernor"),
            ("cpufreq.policy4.governor", ""),
            ("sysctl.vm.swappiness", "thirty"),
            ("sysctl.vm.swappiness", "1.5"),
            ("sysctl.vm.swappiness", "99999999999999999999"),
            ("sysctl.vm.swappiness", "-"),
            ("zram.zram0.mem_limit", "max"),
            ("zram.zram0.swap_priority", "-2"),
            ("zram.zram0.swap_priority", "32768"),
        ];
        for (k, v) in cases {
            let result = knob(k).parse_value(v);
            assert!(
                result.is_err(),
                "{k} = {v:?} should be rejected: {result:?}"
            );
        }
        let e = knob("g.cpu.weight").parse_value("0").err();
        assert_eq!(
            e.map(|e| e.to_string()).as_deref(),
            Some("invalid weight `0`: expected a whole number from 1 to 10000")
        );
    }

    #[test]
    fn resource_order() {
        let cmp = |k: &str, a: &str, b: &str| value(k, a).cmp_resource(&value(k, b));
        assert_eq!(cmp("g.memory.high", "max", "1T"), Some(Ordering::Greater));
        assert_eq!(cmp("g.memory.high", "1G", "1024M"), Some(Ordering::Equal));
        assert_eq!(cmp("g.cpu.max", "max", "100%"), Some(Ordering::Greater));
        assert_eq!(cmp("g.cpu.max", "50%", "50ms/100ms"), Some(Ordering::Equal));
        assert_eq!(
            cmp("g.cpu.max", "20ms/10ms", "100%"),
            Some(Ordering::Greater)
        );
        assert_eq!(cmp("g.cpu.max", "10%", "20ms/100ms"), Some(Ordering::Less));
        assert_eq!(cmp("g.pids.max", "max", "100"), Some(Ordering::Greater));
        assert_eq!(cmp("g.uclamp.min", "10%", "20%"), Some(Ordering::Less));
        assert_eq!(
            cmp("cpufreq.policy0.min", "1.8GHz", "1200MHz"),
            Some(Ordering::Greater)
        );
        assert_eq!(cmp("g.cpuset.cpus", "1", "2"), None);
        assert_eq!(KnobValue::Weight(1).cmp_resource(&KnobValue::Int(1)), None);
    }

    #[test]
    fn step_clamping() {
        let size = |t: &str| KnobValue::Size(Size::parse(t).unwrap_or(Size::Max));
        // Raise by 512M up to 10G.
        assert_eq!(
            size("8G").step(&size("512M"), &size("10G"), true),
            Some(size("8704M"))
        );
        assert_eq!(
            size("9800M").step(&size("512M"), &size("10G"), true),
            Some(size("10G"))
        );
        // Already past the limit: a raise leaves it alone.
        assert_eq!(
            size("12G").step(&size("512M"), &size("10G"), true),
            Some(size("12G"))
        );
        assert_eq!(
            size("max").step(&size("512M"), &size("10G"), true),
            Some(size("max"))
        );
        assert_eq!(
            size("1G").step(&size("512M"), &size("max"), true),
            Some(size("1536M"))
        );
        // Lower by 256M down to 2G.
        assert_eq!(
            size("3G").step(&size("256M"), &size("2G"), false),
            Some(size("2816M"))
        );
        assert_eq!(
            size("2100M").step(&size("256M"), &size("2G"), false),
            Some(size("2G"))
        );
        assert_eq!(
            size("1G").step(&size("256M"), &size("2G"), false),
            Some(size("1G"))
        );
        assert_eq!(
            size("100M").step(&size("1G"), &size("0"), false),
            Some(size("0"))
        );
        assert_eq!(size("max").step(&size("256M"), &size("2G"), false), None);
        assert_eq!(size("1G").step(&size("max"), &size("2G"), true), None);
        assert_eq!(size("3G").step(&size("1G"), &size("max"), false), None);
        // Saturation instead of overflow.
        let huge = KnobValue::Size(Size::Bytes(u64::MAX - 1));
        assert_eq!(
            huge.step(&size("1G"), &size("max"), true),
            Some(KnobValue::Size(Size::Bytes(u64::MAX)))
        );

        let w = KnobValue::Weight;
        assert_eq!(w(100).step(&w(50), &w(120), true), Some(w(120)));
        assert_eq!(w(100).step(&w(500), &w(1), false), Some(w(1)));
        let i = KnobValue::Int;
        assert_eq!(
            i(i64::MAX - 1).step(&i(10), &i(i64::MAX), true),
            Some(i(i64::MAX))
        );
        assert_eq!(
            i(i64::MIN + 1).step(&i(10), &i(i64::MIN), false),
            Some(i(i64::MIN))
        );
        assert_eq!(i(5).step(&i(10), &i(-1), false), Some(i(-1)));
        let f = |khz| KnobValue::Frequency(Frequency { khz });
        assert_eq!(
            f(1_200_000).step(&f(200_000), &f(1_800_000), true),
            Some(f(1_400_000))
        );
        assert_eq!(
            f(1_200_000).step(&f(2_000_000), &f(600_000), false),
            Some(f(600_000))
        );
        let p = |v| KnobValue::Percent(Percent(v));
        assert_eq!(p(50.0).step(&p(30.0), &p(70.0), true), Some(p(70.0)));
        assert_eq!(p(50.0).step(&p(30.0), &p(10.0), false), Some(p(20.0)));
        let c = KnobValue::Count;
        assert_eq!(
            c(Some(100)).step(&c(Some(50)), &c(Some(120)), true),
            Some(c(Some(120)))
        );
        assert_eq!(
            c(None).step(&c(Some(50)), &c(Some(120)), true),
            Some(c(None))
        );
        // Mismatched or non-numeric types.
        assert_eq!(w(1).step(&i(1), &w(5), true), None);
        let list = KnobValue::CpuList(CpuList::default());
        assert_eq!(list.step(&list, &list, true), None);
        assert!(!list.is_numeric() && w(1).is_numeric());
        assert!(knob("g.memory.high").is_numeric());
        assert!(!knob("g.cpu.max").is_numeric());
        assert!(!knob("cpufreq.policy0.governor").is_numeric());
    }

    #[test]
    fn cpu_max_kernel_forms() {
        assert_eq!(CpuMax::parse_kernel("max 100000\n"), Ok(CpuMax::Max));
        assert_eq!(
            CpuMax::parse_kernel("50000 100000"),
            Ok(CpuMax::Quota {
                quota_us: 50_000,
                period_us: 100_000
            })
        );
        assert!(CpuMax::parse_kernel("").is_err());
        assert!(CpuMax::parse_kernel("a b").is_err());
        assert!(CpuMax::parse_kernel("1 2 3").is_err());
        assert_eq!(
            CpuMax::parse("50ms/100ms")
                .map(|c| c.to_string())
                .as_deref(),
            Ok("50ms/100ms")
        );
    }

    /// Every knob family with a sample name, for the kernel-form tests.
    const KERNEL_FORM_KNOBS: [&str; 17] = [
        "g.cpu.weight",
        "g.cpu.max",
        "g.uclamp.min",
        "g.uclamp.max",
        "g.memory.min",
        "g.memory.high",
        "g.memory.swap_max",
        "g.io.weight",
        "g.pids.max",
        "g.cpuset.cpus",
        "cpufreq.policy4.min",
        "cpufreq.policy4.max",
        "cpufreq.policy4.governor",
        "sysctl.vm.swappiness",
        "sysctl.kernel.sched_rt_runtime_us",
        "zram.zram0.mem_limit",
        "zram.zram0.swap_priority",
    ];

    /// What kernel files really hold, as the guest kernel (Debian 6.1) and
    /// the kernel's own rendering code print them. Each must read as a value
    /// (never `None`), or a claim on the knob could never be released.
    #[test]
    fn kernel_renderings_parse() {
        let cases: [(&str, &str, &str); 16] = [
            ("g.uclamp.min", "0.00\n", "0.00"),
            ("g.uclamp.max", "max\n", "100.00"),
            ("g.uclamp.min", "80.00\n", "80.00"),
            ("g.cpuset.cpus", "\n", ""),
            ("g.cpuset.cpus", "0-1,3\n", "0-1,3"),
            ("g.io.weight", "default 100\n", "100"),
            ("g.io.weight", "default 300\n8:0 50\n", "300"),
            ("g.cpu.weight", "100\n", "100"),
            ("g.cpu.max", "max 100000\n", "max 100000"),
            ("g.cpu.max", "50000 100000\n", "50000 100000"),
            ("g.memory.high", "max\n", "max"),
            ("g.memory.high", "167772160\n", "167772160"),
            ("g.pids.max", "max\n", "max"),
            ("cpufreq.policy4.min", "691200\n", "691200"),
            ("sysctl.kernel.sched_rt_runtime_us", "-1\n", "-1"),
            ("zram.zram0.mem_limit", "0\n", "0"),
        ];
        for (k, text, want) in cases {
            let knob = knob(k);
            match knob.parse_kernel(text) {
                Ok(v) => assert_eq!(
                    knob.render(&v).replace("default ", ""),
                    want,
                    "{k} {text:?}"
                ),
                Err(e) => panic!("{k}: {text:?} does not read: {e}"),
            }
        }
        // An invalid partition never reads as the mode it names.
        let part = Knob::Group {
            group: "rt".into(),
            knob: GroupKnob::CpusetPartition,
        };
        assert_eq!(
            part.parse_kernel("isolated\n"),
            Ok(KnobValue::Word("isolated".into()))
        );
        let e = part
            .parse_kernel("isolated invalid (Cpu list in cpuset.cpus not exclusive)\n")
            .unwrap_err();
        assert!(e.to_string().contains("not exclusive"), "{e}");
    }

    /// The kernel's encodings of `pm_qos_resume_latency_us`
    /// (drivers/base/power/sysfs.c; checked on the guest kernel by
    /// tests/vm/guest/scenarios/94-latency.sh): a policy's `0us` is written
    /// `n/a`, no constraint is `0`, and both read back as what they mean.
    #[test]
    fn resume_latency_encodings() {
        let k = knob("latency.cpu7");
        assert_eq!(k, Knob::LatencyCpu(7));
        let zero = k.parse_value("0us").unwrap();
        assert_eq!(zero, KnobValue::Latency(Some(0)));
        assert_eq!(k.render(&zero), "n/a");
        assert_eq!(k.render(&KnobValue::Latency(None)), "0");
        assert_eq!(k.render(&k.parse_value("100us").unwrap()), "100");
        assert_eq!(k.render(&k.parse_value("2ms").unwrap()), "2000");
        assert_eq!(k.parse_kernel("n/a\n"), Ok(KnobValue::Latency(Some(0))));
        assert_eq!(k.parse_kernel("0\n"), Ok(KnobValue::Latency(None)));
        assert_eq!(k.parse_kernel("250\n"), Ok(KnobValue::Latency(Some(250))));
        assert!(k.parse_kernel("-1").is_err());
        assert_eq!(zero.to_string(), "0us");
        assert_eq!(KnobValue::Latency(None).to_string(), "none");
        // Policy values: whole µs with a unit, never negative or past the cap.
        for bad in ["0", "-5us", "1ns", "1500ns", "2001s", "none", "n/a"] {
            assert!(k.parse_value(bad).is_err(), "{bad}");
        }
        assert!(k.parse_value("2000s").is_ok());
        assert_eq!(knob("latency.global"), Knob::LatencyGlobal);
        assert!(Knob::LatencyGlobal.held_by_daemon());
        assert!(!k.held_by_daemon());
        for bad in [
            "latency.cpu",
            "latency.cpux",
            "latency.globl",
            "latency.cpu123456",
        ] {
            assert!(Knob::parse(bad).is_err(), "{bad}");
        }
        assert!(Knob::parse("latency.globl")
            .unwrap_err()
            .to_string()
            .contains("latency.global"));
        assert_eq!(Knob::LatencyCpu(3).to_string(), "latency.cpu3");
        assert!(!k.is_numeric());
    }

    #[test]
    fn latency_merges_smallest_first() {
        assert_eq!(
            knob("latency.cpu0").merge_policy(),
            MergePolicy::SmallestWins
        );
        assert_eq!(
            knob("latency.global").merge_policy(),
            MergePolicy::SmallestWins
        );
        let l = |v| KnobValue::Latency(v);
        assert_eq!(l(Some(0)).cmp_latency(&l(Some(5))), Some(Ordering::Less));
        assert_eq!(l(Some(5)).cmp_latency(&l(None)), Some(Ordering::Less));
        assert_eq!(l(None).cmp_latency(&l(None)), Some(Ordering::Equal));
        assert_eq!(l(None).cmp_latency(&KnobValue::Int(1)), None);
    }

    proptest! {
        #[test]
        fn knob_parse_never_panics(s in "\\PC{0,40}") {
            let _ = Knob::parse(&s);
        }

        #[test]
        fn values_never_panic(s in "\\PC{0,20}") {
            for k in ["g.cpu.weight", "g.cpu.max", "g.uclamp.min", "g.memory.high", "g.pids.max",
                      "g.cpuset.cpus", "cpufreq.policy0.min", "cpufreq.policy0.governor",
                      "sysctl.vm.x", "zram.zram0.mem_limit", "zram.zram0.swap_priority",
                      "latency.cpu1", "latency.global"] {
                if let Ok(knob) = Knob::parse(k) {
                    if let Ok(v) = knob.parse_value(&s) {
                        let _ = v.kernel();
                        prop_assert_eq!(knob.parse_value(&v.to_string()), Ok(v));
                    }
                }
            }
        }

        /// A value written to a knob reads back, from the kernel's rendering,
        /// as the same value.
        #[test]
        fn kernel_rendering_round_trips(i in 0usize..17, text in "[0-9]{1,12}(\\.[0-9]{1,2})?%?|max|[0-9]{1,2}(-[0-9]{1,2})?(,[0-9]{1,2})*|[0-9]{1,6}(ms|s|us)/[0-9]{1,3}ms|[0-9]{1,4}[KMG]|schedutil|-?[0-9]{1,9}") {
            let knob = knob(KERNEL_FORM_KNOBS[i]);
            if let Ok(v) = knob.parse_value(&text) {
                let rendered = knob.render(&v);
                let back = knob.parse_kernel(&format!("{rendered}\n"));
                prop_assert!(back.is_ok(), "{} {:?} rendered {:?}: {:?}", knob, text, rendered, back);
                if let Ok(back) = back {
                    prop_assert_eq!(knob.render(&back), rendered.clone(), "{} {:?}", knob, text);
                    prop_assert_eq!(v.cmp_resource(&back).unwrap_or(Ordering::Equal), Ordering::Equal);
                }
            }
        }

        #[test]
        fn group_knob_roundtrip(group in "[a-z0-9][a-z0-9_-]{0,63}", i in 0usize..12) {
            if !RESERVED_GROUP_NAMES.contains(&group.as_str()) {
                let k = Knob::Group { group, knob: GroupKnob::ALL[i] };
                prop_assert_eq!(Knob::parse(&k.to_string()), Ok(k));
            }
        }

        #[test]
        fn step_stays_between_current_and_limit(cur in any::<u64>(), d in any::<u64>(), lim in any::<u64>(), up in any::<bool>()) {
            let v = |b| KnobValue::Size(Size::Bytes(b));
            let next = v(cur).step(&v(d), &v(lim), up);
            let Some(KnobValue::Size(Size::Bytes(n))) = next else {
                return Err(TestCaseError::fail("no step"));
            };
            if up { prop_assert!(n >= cur && (n <= lim || n == cur)); }
            else { prop_assert!(n <= cur && (n >= lim || n == cur)); }
        }
    }
}
