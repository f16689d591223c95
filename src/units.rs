//! Value units of the policy language.
//!
//! This module owns the textual forms of every scalar a policy can contain —
//! sizes, frequencies, percentages, durations, CPU lists and temperatures —
//! and their conversion to the exact numbers cgwarden works with. Every type
//! parses the policy form, prints a canonical policy form that parses back to
//! the same value (`parse(x.to_string()) == x`), and never panics on input.
//!
//! Decisions where the SPEC is silent (one grammar per kind, documented in
//! docs/policy.md "Units", stated by every error):
//! - Sizes: `max`, or a number (`1.5` allowed when the result is a whole
//!   number of bytes) with an optional suffix `K`, `M`, `G`, `T`, `P`, `E` —
//!   always binary (×1024 each step), in any case, optionally followed by
//!   `i`, `B` or `iB` (`2G`, `2GB`, `2gib` are all 2 GiB), or `B` alone.
//! - Durations: whole numbers each followed by a unit `d`, `h`, `m`, `s`,
//!   `ms`, `us` (or `µs`), `ns`, written together, largest unit first, each
//!   unit at most once (`1h30m`, `500ms`, `2d`). Nothing else: no `sec`,
//!   `hours`, weeks, months, blanks or fractions (humantime, used before,
//!   took `10sec`, `2hours`, `1w` and `1M` = 30.44 days without a word).
//!   A fraction is refused with its whole-unit spelling (`1.5m`: write
//!   `1m30s`), so each duration has one way to be written.
//! - A bare frequency is kHz (as sysfs); `kHz`/`MHz`/`GHz` are case-insensitive;
//!   the result must be a whole, non-zero number of kHz.
//! - Percentages require the `%` sign, are plain decimals (no sign, no
//!   exponent) and lie in 0..=100.
//! - Durations require a unit (a bare `30` is rejected, even `0`).
//! - CPU indices are capped below 8192 (the kernel's largest NR_CPUS).
//! - Temperatures accept up to three decimals (millidegree resolution), an
//!   optional `°`, `C` or `c`, and must lie between -273.15C and 1000C.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// A value that does not parse as the unit it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} `{value}`: {reason}")]
pub struct UnitError {
    /// Which unit was expected (`"size"`, `"frequency"`, ...).
    pub(crate) kind: &'static str,
    /// The offending text, as written.
    pub(crate) value: String,
    /// What was expected instead.
    pub(crate) reason: String,
}

impl UnitError {
    pub(crate) fn new(kind: &'static str, value: &str, reason: impl Into<String>) -> Self {
        UnitError {
            kind,
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

/// A decimal number split into its digits, kept exact: `12.5` is
/// `mantissa = 125, scale = 1`. Used where a fraction must come out whole
/// after multiplying by a unit, so no floating point rounding can sneak in.
struct Decimal {
    mantissa: u128,
    /// Number of digits after the decimal point.
    scale: u32,
}

/// Parses `DIGITS[.DIGITS]` with no sign, exponent, blanks or separators.
fn parse_decimal(text: &str) -> Option<Decimal> {
    let (int_part, frac_part) = match text.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (text, None),
    };
    if int_part.is_empty() || !int_part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac = frac_part.unwrap_or("");
    if frac_part.is_some() && frac.is_empty() {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut mantissa: u128 = 0;
    for b in int_part.bytes().chain(frac.bytes()) {
        mantissa = mantissa
            .checked_mul(10)?
            .checked_add(u128::from(b - b'0'))?;
    }
    Some(Decimal {
        mantissa,
        scale: u32::try_from(frac.len()).ok()?,
    })
}

impl Decimal {
    /// `self × multiplier`, if that is a whole number that fits in u64.
    fn times_exact(&self, multiplier: u64) -> Option<u64> {
        let divisor = 10u128.checked_pow(self.scale)?;
        let product = self.mantissa.checked_mul(u128::from(multiplier))?;
        if product % divisor != 0 {
            return None;
        }
        u64::try_from(product / divisor).ok()
    }
}

// ---------------------------------------------------------------------------
// Size

/// A memory size: a byte count, or the kernel's `max` (no limit).
///
/// `Max` orders above every byte count (see [`Size::cmp_limit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Size {
    Bytes(u64),
    Max,
}

const SIZE_REASON: &str = "expected `max` or a number of bytes with an optional binary suffix K, M, G, T, P or E (each ×1024; any case; `Ki`, `KB`, `KiB` mean K), like `4096`, `512K`, `1.5G`";

/// Binary suffixes, largest first, for printing.
const SIZE_SUFFIXES: [(char, u64); 6] = [
    ('E', 1 << 60),
    ('P', 1 << 50),
    ('T', 1 << 40),
    ('G', 1 << 30),
    ('M', 1 << 20),
    ('K', 1 << 10),
];

impl Size {
    pub(crate) fn parse(text: &str) -> Result<Self, UnitError> {
        let err = || UnitError::new("size", text, SIZE_REASON);
        if text == "max" {
            return Ok(Size::Max);
        }
        // Validate the shape ourselves: parse-size is lenient about blanks,
        // `_` separators and exponents, and rounds fractions silently.
        let number_end = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, suffix) = text.split_at(number_end);
        let decimal = parse_decimal(number).ok_or_else(err)?;
        let multiplier = size_multiplier(suffix).ok_or_else(err)?;
        let exact = decimal.times_exact(multiplier).ok_or_else(|| {
            UnitError::new(
                "size",
                text,
                format!("not a whole number of bytes, or larger than 2^64-1; {SIZE_REASON}"),
            )
        })?;
        // parse-size does the canonical conversion; it must agree with the
        // exact computation above, which also guarantees no rounding.
        let bytes = parse_size::Config::new()
            .with_binary()
            .parse_size(text)
            .map_err(|_| err())?;
        if bytes != exact {
            return Err(err());
        }
        Ok(Size::Bytes(bytes))
    }

    /// The byte count, or `None` for `max`.
    pub(crate) fn bytes(&self) -> Option<u64> {
        match self {
            Size::Bytes(b) => Some(*b),
            Size::Max => None,
        }
    }

    /// The text written to a cgroup/sysfs file: decimal bytes or `max`.
    pub(crate) fn kernel(&self) -> String {
        match self {
            Size::Bytes(b) => b.to_string(),
            Size::Max => "max".to_string(),
        }
    }

    /// Orders sizes as limits: `max` is greater than any byte count.
    pub(crate) fn cmp_limit(&self, other: &Size) -> std::cmp::Ordering {
        match (self, other) {
            (Size::Max, Size::Max) => std::cmp::Ordering::Equal,
            (Size::Max, Size::Bytes(_)) => std::cmp::Ordering::Greater,
            (Size::Bytes(_), Size::Max) => std::cmp::Ordering::Less,
            (Size::Bytes(a), Size::Bytes(b)) => a.cmp(b),
        }
    }
}

/// Multiplier of a size suffix: ``, `B`, `K`, `Ki`, `KiB`, `KB` (any case).
fn size_multiplier(suffix: &str) -> Option<u64> {
    let lower = suffix.to_ascii_lowercase();
    if lower.is_empty() || lower == "b" {
        return Some(1);
    }
    let mut chars = lower.chars();
    let letter = chars.next()?;
    let rest = chars.as_str();
    if !matches!(rest, "" | "i" | "ib" | "b") {
        return None;
    }
    SIZE_SUFFIXES
        .iter()
        .find(|(c, _)| c.to_ascii_lowercase() == letter)
        .map(|(_, m)| *m)
}

impl PartialOrd for Size {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Size {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.cmp_limit(other)
    }
}

impl fmt::Display for Size {
    /// `max`, or the largest binary suffix that divides the count exactly.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Size::Max => f.write_str("max"),
            Size::Bytes(0) => f.write_str("0"),
            Size::Bytes(b) => {
                for (suffix, mult) in SIZE_SUFFIXES {
                    if b.is_multiple_of(mult) {
                        return write!(f, "{}{}", b / mult, suffix);
                    }
                }
                write!(f, "{b}")
            }
        }
    }
}

impl FromStr for Size {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Size::parse(s)
    }
}

// ---------------------------------------------------------------------------
// Frequency

/// A CPU frequency, held in kHz as sysfs `scaling_*_freq` files use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Frequency {
    pub(crate) khz: u64,
}

const FREQ_REASON: &str =
    "expected a whole number of kHz (`1200000`), or a number with kHz/MHz/GHz (`1.8GHz`)";

impl Frequency {
    pub(crate) fn parse(text: &str) -> Result<Self, UnitError> {
        let number_end = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, suffix) = text.split_at(number_end);
        let multiplier = match suffix.to_ascii_lowercase().as_str() {
            "" | "khz" => 1,
            "mhz" => 1_000,
            "ghz" => 1_000_000,
            _ => return Err(UnitError::new("frequency", text, FREQ_REASON)),
        };
        let decimal =
            parse_decimal(number).ok_or_else(|| UnitError::new("frequency", text, FREQ_REASON))?;
        let khz = decimal.times_exact(multiplier).ok_or_else(|| {
            UnitError::new("frequency", text, "not a whole number of kHz, or too large")
        })?;
        if khz == 0 {
            return Err(UnitError::new("frequency", text, "must be greater than 0"));
        }
        Ok(Frequency { khz })
    }

    pub(crate) fn khz(&self) -> u64 {
        self.khz
    }
}

impl fmt::Display for Frequency {
    /// `1800MHz`-style when exact in GHz/MHz, else the bare kHz count.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.khz.is_multiple_of(1_000_000) {
            write!(f, "{}GHz", self.khz / 1_000_000)
        } else if self.khz.is_multiple_of(1_000) {
            write!(f, "{}MHz", self.khz / 1_000)
        } else {
            write!(f, "{}", self.khz)
        }
    }
}

impl FromStr for Frequency {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Frequency::parse(s)
    }
}

// ---------------------------------------------------------------------------
// Percent

/// A percentage in 0..=100 (PSI averages, uclamp, cpu.max share).
///
/// Holds an `f64`, so only `PartialEq`; NaN and infinities cannot be
/// produced by [`Percent::parse`].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Percent(pub f64);

const PERCENT_REASON: &str = "expected a number from 0 to 100 followed by `%`, like `12.5%`";

impl Percent {
    pub(crate) fn parse(text: &str) -> Result<Self, UnitError> {
        let err = || UnitError::new("percent", text, PERCENT_REASON);
        let number = text.strip_suffix('%').ok_or_else(err)?;
        // Shape check first: f64's parser would also take `inf`, `1e2`, `-0`.
        parse_decimal(number).ok_or_else(err)?;
        let value: f64 = number.parse().map_err(|_| err())?;
        Percent::new(value).ok_or_else(err)
    }

    /// A percentage, if `value` is finite and within 0..=100.
    pub(crate) fn new(value: f64) -> Option<Self> {
        if value.is_finite() && (0.0..=100.0).contains(&value) {
            // Normalise -0.0 so printing never shows a sign.
            Some(Percent(value.abs()))
        } else {
            None
        }
    }

    pub(crate) fn value(&self) -> f64 {
        self.0
    }
}

impl fmt::Display for Percent {
    /// f64's `Display` is the shortest text that parses back to the same
    /// value and never uses exponent notation, so this round-trips.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0)
    }
}

impl FromStr for Percent {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Percent::parse(s)
    }
}

// ---------------------------------------------------------------------------
// Duration

/// A time span written with units (`500ms`, `30s`, `1h30m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Duration(pub(crate) std::time::Duration);

const DURATION_REASON: &str = "expected whole numbers with units d, h, m, s, ms, us (or µs), ns, written together, largest first, like `500ms`, `30s`, `1h30m`";

/// The duration units, largest first, and their length in nanoseconds.
const DURATION_UNITS: [(&str, u64); 8] = [
    ("d", 86_400_000_000_000),
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("µs", 1_000),
    ("ns", 1),
];

impl Duration {
    /// The grammar of the module docs; errors say it.
    pub(crate) fn parse(text: &str) -> Result<Self, UnitError> {
        let err = |reason: String| UnitError::new("duration", text, reason);
        if text.is_empty() {
            return Err(err(DURATION_REASON.into()));
        }
        let mut nanos: u128 = 0;
        // The length of the last unit: each must be smaller.
        let mut last: Option<u64> = None;
        let mut rest = text;
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            if digits == 0 {
                return Err(err(DURATION_REASON.into()));
            }
            let (number, after) = rest.split_at(digits);
            if after.starts_with('.') {
                return Err(err(fraction_reason(text)));
            }
            let unit_len = after
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(after.len());
            let (unit, after) = after.split_at(unit_len);
            if unit.is_empty() {
                return Err(err(format!("`{number}` has no unit; {DURATION_REASON}")));
            }
            let Some(&(_, length)) = DURATION_UNITS.iter().find(|(u, _)| *u == unit) else {
                return Err(err(format!("unknown unit `{unit}`; {DURATION_REASON}")));
            };
            if last.is_some_and(|l| length >= l) {
                return Err(err(format!(
                    "`{unit}` after a smaller or the same unit; {DURATION_REASON}"
                )));
            }
            last = Some(length);
            let n: u128 = number
                .parse()
                .map_err(|_| err("the duration is too long".into()))?;
            nanos = n
                .checked_mul(u128::from(length))
                .and_then(|v| v.checked_add(nanos))
                .ok_or_else(|| err("the duration is too long".into()))?;
            rest = after;
        }
        let secs = u64::try_from(nanos / 1_000_000_000)
            .map_err(|_| err("the duration is too long".into()))?;
        let sub = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
        Ok(Duration(std::time::Duration::new(secs, sub)))
    }

    pub(crate) fn get(&self) -> std::time::Duration {
        self.0
    }

    /// Whole microseconds, if the duration is exact in µs.
    pub(crate) fn whole_micros(&self) -> Option<u64> {
        if !self.0.subsec_nanos().is_multiple_of(1_000) {
            return None;
        }
        u64::try_from(self.0.as_micros()).ok()
    }
}

/// Why `text` with a fraction (`1.5m`) is refused, with its spelling in
/// whole units (`1m30s`) when it is a whole number of nanoseconds.
fn fraction_reason(text: &str) -> String {
    match fractional_nanos(text) {
        Some(n) => format!(
            "fractions are not supported, write `{}`; {DURATION_REASON}",
            Duration(std::time::Duration::from_nanos(n))
        ),
        None => format!(
            "fractions are not supported, write whole numbers of a smaller unit; {DURATION_REASON}"
        ),
    }
}

/// `text` read as decimal numbers with units (`1.5m`, `1h0.5m`), in whole
/// nanoseconds; None when it is not that, or not whole.
fn fractional_nanos(text: &str) -> Option<u64> {
    let mut rest = text;
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(n);
        let u = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(u);
        let &(_, length) = DURATION_UNITS.iter().find(|(x, _)| *x == unit)?;
        total = total.checked_add(parse_decimal(number)?.times_exact(length)?)?;
        rest = after;
    }
    Some(total)
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Duration(d)
    }
}

impl fmt::Display for Duration {
    /// Compact form without blanks (`1h30m500ms`), `0s` for zero. Only units
    /// with an exact length are used (no months/years), so it round-trips.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs();
        let nanos = self.0.subsec_nanos();
        if secs == 0 && nanos == 0 {
            return f.write_str("0s");
        }
        let parts: [(u64, &str); 7] = [
            (secs / 86_400, "d"),
            (secs / 3_600 % 24, "h"),
            (secs / 60 % 60, "m"),
            (secs % 60, "s"),
            (u64::from(nanos / 1_000_000), "ms"),
            (u64::from(nanos / 1_000 % 1_000), "us"),
            (u64::from(nanos % 1_000), "ns"),
        ];
        for (amount, unit) in parts {
            if amount != 0 {
                write!(f, "{amount}{unit}")?;
            }
        }
        Ok(())
    }
}

impl FromStr for Duration {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Duration::parse(s)
    }
}

// ---------------------------------------------------------------------------
// CpuList

/// A set of CPU indices, as in `cpuset.cpus` (`0-3,6`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuList(pub BTreeSet<u32>);

/// Largest CPU index accepted (the kernel's NR_CPUS is at most 8192).
pub(crate) const MAX_CPU_INDEX: u32 = 8191;

const CPULIST_REASON: &str = "expected CPU indices and ranges separated by commas, like `0-3,6`";

impl CpuList {
    /// Parses a policy value; an empty list is an error (a group with no
    /// CPUs cannot run anything, so it is almost certainly a mistake).
    pub(crate) fn parse(text: &str) -> Result<Self, UnitError> {
        if text.trim().is_empty() {
            return Err(UnitError::new(
                "cpu list",
                text,
                "the list is empty; expected e.g. `0-3,6`",
            ));
        }
        Self::parse_kernel(text)
    }

    /// Parses the content of a kernel cpulist file, where an empty file (or a
    /// lone newline) legitimately means "no CPUs".
    pub(crate) fn parse_kernel(text: &str) -> Result<Self, UnitError> {
        let mut set = BTreeSet::new();
        if text.trim().is_empty() {
            return Ok(CpuList(set));
        }
        for item in text.trim().split(',') {
            let item = item.trim();
            if item.is_empty() {
                return Err(UnitError::new(
                    "cpu list",
                    text,
                    format!("empty item between commas; {CPULIST_REASON}"),
                ));
            }
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (cpu_index(text, a.trim())?, cpu_index(text, b.trim())?),
                None => {
                    let n = cpu_index(text, item)?;
                    (n, n)
                }
            };
            if lo > hi {
                return Err(UnitError::new(
                    "cpu list",
                    text,
                    format!("range `{item}` is reversed; write `{hi}-{lo}`"),
                ));
            }
            set.extend(lo..=hi);
        }
        Ok(CpuList(set))
    }

    pub(crate) fn is_subset(&self, other: &CpuList) -> bool {
        self.0.is_subset(&other.0)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }
}

fn cpu_index(whole: &str, text: &str) -> Result<u32, UnitError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(UnitError::new(
            "cpu list",
            whole,
            format!("`{text}` is not a CPU index; {CPULIST_REASON}"),
        ));
    }
    match text.parse::<u32>() {
        Ok(n) if n <= MAX_CPU_INDEX => Ok(n),
        _ => Err(UnitError::new(
            "cpu list",
            whole,
            format!("CPU index `{text}` is larger than {MAX_CPU_INDEX}"),
        )),
    }
}

impl fmt::Display for CpuList {
    /// Canonical compressed form: ascending, consecutive runs as `a-b`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut iter = self.0.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while let Some(&next) = iter.peek() {
                if end.checked_add(1) == Some(next) {
                    end = next;
                    iter.next();
                } else {
                    break;
                }
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

impl FromStr for CpuList {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CpuList::parse(s)
    }
}

// ---------------------------------------------------------------------------
// Temperature

/// A temperature, held in millidegrees Celsius as thermal zones report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Temperature {
    pub(crate) millidegrees: i64,
}

/// Absolute zero, the lowest temperature a policy may name.
const MIN_MILLIDEGREES: i64 = -273_150;
/// Far above anything silicon survives; larger values are typos.
const MAX_MILLIDEGREES: i64 = 1_000_000;

const TEMP_REASON: &str = "expected degrees Celsius like `85C`, `-10C` or `72.5C`";

impl Temperature {
    pub(crate) fn parse(text: &str) -> Result<Self, UnitError> {
        let err = || UnitError::new("temperature", text, TEMP_REASON);
        let number = text
            .strip_suffix('C')
            .or_else(|| text.strip_suffix('c'))
            .ok_or_else(err)?;
        let number = number.strip_suffix('°').unwrap_or(number);
        let (negative, digits) = match number.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, number),
        };
        let decimal = parse_decimal(digits).ok_or_else(err)?;
        if decimal.scale > 3 {
            return Err(UnitError::new(
                "temperature",
                text,
                "at most three decimals (millidegree resolution)",
            ));
        }
        let magnitude = decimal
            .times_exact(1_000)
            .and_then(|m| i64::try_from(m).ok())
            .ok_or_else(err)?;
        let millidegrees = if negative { -magnitude } else { magnitude };
        Temperature::from_millidegrees(millidegrees).ok_or_else(|| {
            UnitError::new("temperature", text, "must lie between -273.15C and 1000C")
        })
    }

    /// A temperature from a thermal zone reading, if physically plausible.
    pub(crate) fn from_millidegrees(millidegrees: i64) -> Option<Self> {
        (MIN_MILLIDEGREES..=MAX_MILLIDEGREES)
            .contains(&millidegrees)
            .then_some(Temperature { millidegrees })
    }
}

impl fmt::Display for Temperature {
    /// `85C`, `72.5C`, `-0.125C`: the shortest exact decimal form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.millidegrees < 0 { "-" } else { "" };
        let abs = self.millidegrees.unsigned_abs();
        let (whole, milli) = (abs / 1_000, abs % 1_000);
        if milli == 0 {
            write!(f, "{sign}{whole}C")
        } else {
            let frac = format!("{milli:03}");
            write!(f, "{sign}{whole}.{}C", frac.trim_end_matches('0'))
        }
    }
}

impl FromStr for Temperature {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Temperature::parse(s)
    }
}

#[cfg(test)]
mod tests;
