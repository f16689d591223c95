//! The latency family (PM QoS, docs/latency.md): `latency.cpuN` for
//! `/sys/devices/system/cpu/cpuN/power/pm_qos_resume_latency_us` and
//! `latency.global`, the CPU latency QoS request held open on
//! `/dev/cpu_dma_latency` ([`Knob::held_by_daemon`]: never written as a
//! file, never journalled).
//!
//! It owns the per-CPU file and its encoding (`0us` is `n/a`, no constraint
//! `0`), the largest tolerance, and the files the journal may name.

use super::board::Board;
use super::{
    did_you_mean, is_numbered, suggest, DocRow, Family, Id, Knob, KnobError, KnobValue,
    MergePolicy, Places, Shape, Tok, ValueKind,
};
use crate::units::{CpuList, Duration, UnitError};
use std::fmt;
use std::path::{Path, PathBuf};

/// The largest latency tolerance a `latency.*` knob takes, in µs: the CPU
/// latency QoS default (`PM_QOS_CPU_LATENCY_DEFAULT_VALUE`, what
/// `/dev/cpu_dma_latency` reads with no request held). Larger values mean
/// nothing to the cpuidle governor (no idle state is that slow), and the
/// per-CPU file refuses `S32_MAX` (its internal "no constraint").
pub(crate) const LATENCY_MAX_US: u64 = 2_000_000_000;

/// The CPU latency QoS device a request is held open on.
pub(crate) const CPU_DMA_LATENCY: &str = "/dev/cpu_dma_latency";

const CPU_DIR: &str = "/sys/devices/system/cpu";
const RESUME_LATENCY: &str = "pm_qos_resume_latency_us";

/// `/sys/devices/system/cpu/cpuN/power/pm_qos_resume_latency_us`.
pub(crate) fn resume_latency_path(cpu: u32) -> PathBuf {
    PathBuf::from(format!("{CPU_DIR}/cpu{cpu}/power/{RESUME_LATENCY}"))
}

/// The text `pm_qos_resume_latency_us` takes for a tolerance
/// (drivers/base/power/sysfs.c, `pm_qos_resume_latency_us_store`): the kernel
/// reads `0` as *no constraint* and takes `n/a` for 0 µs tolerated, so a
/// policy's `0us` is written `n/a` and no constraint `0`; other values are
/// plain µs (negative ones, and `S32_MAX`, are EINVAL there).
pub(crate) fn resume_latency_text(v: Option<u64>) -> String {
    match v {
        None => "0".to_string(),
        Some(0) => "n/a".to_string(),
        Some(us) => us.to_string(),
    }
}

/// `system.latency`: tolerated wake-up latencies, in µs.
#[derive(Clone, Debug, Default)]
pub(crate) struct Baseline {
    /// `(cpu, µs)` per CPU, in file order (a cpu-list key names several).
    pub(crate) cpus: Vec<(u32, u64)>,
    /// The CPU latency request the daemon holds open.
    pub(crate) global: Option<u64>,
}

impl Baseline {
    /// The knobs it sets: each CPU's, then the global request.
    pub(crate) fn knobs(&self) -> Vec<(Knob, KnobValue)> {
        let mut out: Vec<(Knob, KnobValue)> = self
            .cpus
            .iter()
            .map(|(cpu, us)| (Knob::LatencyCpu(*cpu), KnobValue::Latency(Some(*us))))
            .collect();
        if let Some(us) = self.global {
            out.push((Knob::LatencyGlobal, KnobValue::Latency(Some(us))));
        }
        out
    }
}

/// The latency family.
pub(super) struct Latency;

/// The latency family's registration.
pub(super) static FAMILY: Latency = Latency;

impl Family for Latency {
    fn id(&self) -> Id {
        Id {
            name: "latency",
            head: Some("latency"),
            grammar: Some("latency.cpuN or latency.global"),
        }
    }

    fn parse(&self, text: &str, rest: &str) -> Result<Knob, KnobError> {
        parse_latency(text, rest)
    }

    fn shapes(&self, _: &[&str]) -> Vec<Shape> {
        vec![
            super::shape("latency.cpu", Some(Tok::Run(super::digit, 1, 5)), ""),
            super::shape("latency.global", None, ""),
        ]
    }

    fn owns(&self, path: &Path, _: &Path) -> bool {
        let Some(c) = super::below(path, CPU_DIR) else {
            return false;
        };
        matches!(c.as_slice(), [cpu, "power", RESUME_LATENCY] if is_numbered(cpu, "cpu"))
    }

    fn doc(&self) -> Vec<DocRow> {
        vec![
            DocRow {
                knob: "`latency.cpuN`".into(),
                values: "whole µs (`0us`, `100us`, `2ms`)",
                merge: MergePolicy::Smallest,
                file: format!("`{CPU_DIR}/cpuN/power/{RESUME_LATENCY}`"),
            },
            DocRow {
                knob: "`latency.global`".into(),
                values: "whole µs",
                merge: MergePolicy::Smallest,
                file: format!("a request held open on `{CPU_DMA_LATENCY}` (daemon only)"),
            },
        ]
    }

    fn fmt(&self, knob: &Knob, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match knob {
            Knob::LatencyCpu(cpu) => write!(f, "latency.cpu{cpu}"),
            Knob::LatencyGlobal => f.write_str("latency.global"),
            _ => Ok(()),
        }
    }

    fn kind(&self, _: &Knob) -> ValueKind {
        ValueKind::Latency
    }

    /// Less tolerated wake-up latency keeps the CPU out of deep idle.
    fn merge(&self, _: &Knob) -> MergePolicy {
        MergePolicy::Smallest
    }

    /// `latency.global` is a request held open on `/dev/cpu_dma_latency`.
    fn held_by_daemon(&self, knob: &Knob) -> bool {
        matches!(knob, Knob::LatencyGlobal)
    }

    /// A CPU the board can have.
    fn check(&self, knob: &Knob, _: &KnobValue, board: &Board) -> Result<(), String> {
        match knob {
            Knob::LatencyCpu(cpu) => board.check_cpus(&CpuList(std::iter::once(*cpu).collect())),
            _ => Ok(()),
        }
    }

    fn path(&self, knob: &Knob, _: &Places<'_>) -> Result<PathBuf, String> {
        match knob {
            Knob::LatencyCpu(cpu) => Ok(resume_latency_path(*cpu)),
            _ => Ok(PathBuf::from(CPU_DMA_LATENCY)),
        }
    }

    /// No file write for `latency.global`: the daemon holds a request (logs
    /// show the value).
    fn target(
        &self,
        knob: &Knob,
        value: &KnobValue,
        at: &Places<'_>,
    ) -> Result<(PathBuf, String), String> {
        match knob {
            Knob::LatencyGlobal => Ok((self.path(knob, at)?, value.to_string())),
            _ => Ok((self.path(knob, at)?, self.render(knob, value))),
        }
    }

    /// A per-CPU file the kernel lacks; `latency.global` only the daemon
    /// can hold.
    fn unavailable(&self, knob: &Knob, value: &KnobValue, at: &Places<'_>) -> Option<String> {
        match knob {
            Knob::LatencyCpu(cpu) => {
                let path = self.target(knob, value, at).ok()?.0;
                (!at.files.exists(&path)).then(|| {
                    format!(
                        "latency.cpu{cpu}: {} does not exist (no per-CPU PM QoS in this kernel)",
                        path.display()
                    )
                })
            }
            _ => None,
        }
    }
}

/// A latency tolerance as a policy writes it: a duration in whole µs
/// (`0us`, `100us`, `2ms`), at most [`LATENCY_MAX_US`].
pub(super) fn parse_latency_value(text: &str) -> Result<u64, UnitError> {
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
pub(super) fn parse_resume_latency_kernel(t: &str) -> Result<Option<u64>, UnitError> {
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
