//! Knob values: the typed value a knob takes ([`KnobValue`], `cpu.max`'s
//! [`CpuMax`]), the value grammars the families share (weights, counts,
//! integers in a range, uclamp percentages, governor and partition words)
//! and the step arithmetic behind `raise`/`lower`.

use super::latency::resume_latency_text;
use crate::units::{CpuList, Duration, Frequency, Percent, Size, UnitError};
use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// Largest `pids.max` the kernel accepts (PID_MAX_LIMIT on 64-bit).
pub(crate) const PIDS_LIMIT: u64 = 4_194_304;

pub(super) fn parse_partition(text: &str) -> Result<String, UnitError> {
    match text {
        "member" | "root" | "isolated" => Ok(text.to_string()),
        _ => Err(UnitError::new(
            "partition",
            text,
            "expected member, root or isolated",
        )),
    }
}

pub(super) fn parse_weight(text: &str) -> Result<u64, UnitError> {
    let err = || UnitError::new("weight", text, "expected a whole number from 1 to 10000");
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err());
    }
    match text.parse::<u64>() {
        Ok(w) if (1..=10_000).contains(&w) => Ok(w),
        _ => Err(err()),
    }
}

pub(super) fn parse_int(text: &str, min: i64, max: i64) -> Result<i64, UnitError> {
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

pub(super) fn parse_count(text: &str) -> Result<Option<u64>, UnitError> {
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

pub(super) fn parse_uclamp(text: &str) -> Result<Percent, UnitError> {
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

pub(super) fn parse_governor(text: &str) -> Result<String, UnitError> {
    governor_name(text, b"_", "expected a cpufreq governor name like `schedutil` or `performance` ([a-z0-9_], at most 15 characters)")
}

/// A governor name: 1–15 bytes (the kernel's names hold 16 with the NUL)
/// of lower-case letters, digits and the bytes of `extra`; `Err` with
/// `reason`.
pub(super) fn governor_name(text: &str, extra: &[u8], reason: &str) -> Result<String, UnitError> {
    let ok = !text.is_empty()
        && text.len() <= 15
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || extra.contains(&b));
    if ok {
        Ok(text.to_string())
    } else {
        Err(UnitError::new("governor", text, reason))
    }
}

/// A governor or a fallback list of them (`schedutil|ondemand`):
/// each name as [`parse_governor`], at most 8, no repeats. Kept as written
/// (without spaces); the first offered is chosen when it is written.
pub(super) fn parse_governor_list(text: &str) -> Result<String, UnitError> {
    let names: Vec<&str> = text.split('|').map(str::trim).collect();
    if names.len() > 8 {
        return Err(UnitError::new(
            "governor",
            text,
            "a fallback list takes at most 8 governors",
        ));
    }
    for (i, n) in names.iter().enumerate() {
        parse_governor(n).map_err(|e| {
            if names.len() > 1 {
                UnitError::new(
                    "governor",
                    text,
                    format!("`{n}` in the fallback list: {}", e.reason),
                )
            } else {
                e
            }
        })?;
        if names[..i].contains(n) {
            return Err(UnitError::new(
                "governor",
                text,
                format!("`{n}` is listed twice"),
            ));
        }
    }
    Ok(names.join("|"))
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
pub(crate) const DEFAULT_PERIOD_US: u64 = 100_000;
const MIN_QUOTA_US: u64 = 1_000;
const MIN_PERIOD_US: u64 = 1_000;
const MAX_PERIOD_US: u64 = 1_000_000;
const MAX_PERIODS_PER_QUOTA: u64 = 8_192;

const CPUMAX_REASON: &str = "expected `max`, a share like `50%`, or QUOTA/PERIOD like `50ms/100ms`";

impl CpuMax {
    pub(crate) fn parse(text: &str) -> Result<Self, UnitError> {
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
    pub(crate) fn parse_kernel(text: &str) -> Result<Self, UnitError> {
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
    pub(crate) fn kernel_pair(&self) -> Option<(u64, u64)> {
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
    pub(crate) fn kernel(&self) -> String {
        match self.kernel_pair() {
            None => format!("max {DEFAULT_PERIOD_US}"),
            Some((q, p)) => format!("{q} {p}"),
        }
    }

    /// Compares the CPU bandwidth two values grant; `max` is largest.
    pub(crate) fn cmp_bandwidth(&self, other: &CpuMax) -> Ordering {
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
    /// `devfreq.*.{min,max}`: a frequency in Hz, devfreq's unit (a
    /// bandwidth monitor's "frequency" is its MB/s, so a bare number is the
    /// kernel's own unit).
    Hz(u64),
}

impl KnobValue {
    /// The exact text written to the kernel file.
    pub(crate) fn kernel(&self) -> String {
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
            KnobValue::Hz(n) => n.to_string(),
        }
    }

    /// Orders two values of one knob by how much resource they grant, for
    /// [`MergePolicy::Largest`]. `None` when the values are of different
    /// types or the type has no such order (cpu lists, governors).
    pub(crate) fn cmp_resource(&self, other: &KnobValue) -> Option<Ordering> {
        match (self, other) {
            (KnobValue::Size(a), KnobValue::Size(b)) => Some(a.cmp_limit(b)),
            (KnobValue::Frequency(a), KnobValue::Frequency(b)) => Some(a.cmp(b)),
            (KnobValue::Hz(a), KnobValue::Hz(b)) => Some(a.cmp(b)),
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

    /// Orders two latency tolerances, for [`MergePolicy::Smallest`]: no
    /// constraint is larger than any number. `None` for other types.
    pub(crate) fn cmp_latency(&self, other: &KnobValue) -> Option<Ordering> {
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

    /// One `raise` (`up`) or `lower` step from `self` by `delta`, never past
    /// `limit`. A raise never lowers and a lower never raises: if `self` is
    /// already beyond `limit` it stays. `max` stays `max` when raising.
    ///
    /// `None` when the three values are not the same numeric type, when
    /// `delta` is `max`, or when there is no finite answer (lowering from
    /// `max`, or lowering towards a `max` limit); the caller logs and skips.
    pub(crate) fn step(&self, delta: &KnobValue, limit: &KnobValue, up: bool) -> Option<KnobValue> {
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
            (V::Hz(cur), V::Hz(d), V::Hz(lim)) => Some(V::Hz(step_u64(*cur, *d, *lim, up))),
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
            KnobValue::Hz(n) => f.write_str(&hz_text(*n)),
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

/// The policy form of a devfreq frequency (devfreq parses it back).
pub(crate) fn hz_text(hz: u64) -> String {
    match hz {
        h if h >= 1_000_000_000 && h % 1_000_000_000 == 0 => format!("{}GHz", h / 1_000_000_000),
        h if h >= 1_000_000 && h % 1_000_000 == 0 => format!("{}MHz", h / 1_000_000),
        h => format!("{h}Hz"),
    }
}
