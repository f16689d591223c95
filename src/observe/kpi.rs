//! KPIs from applications: named samples a process
//! hands the daemon (`cgwarden kpi`, varlink `RecordKpi`, StatsD lines on
//! `state_dir/kpi.sock`, cyclictest histograms), kept as mergeable
//! histograms so any window's p50/p90/p99/mean/stddev can be computed by
//! merging per-interval snapshots.
//!
//! Decisions:
//! - **Canonical unit.** A KPI is either a time, kept in **seconds**
//!   (StatsD `|ms` timers are divided by 1000, cyclictest's µs by 10⁶,
//!   `cgwarden kpi loop 2.1ms` parses the duration), or a plain number
//!   (`|g` gauges, `cgwarden kpi fps 29.8`), unit `none`. A name keeps the
//!   unit of its first sample; a sample of the other kind is refused (with
//!   the reason, counted). Values must be finite and ≥ 0 (a latency, a
//!   frame rate); a negative or non-finite value is refused.
//! - **Names**: `[A-Za-z0-9_.-]`, 1–64 characters. At most [`MAX_NAMES`]
//!   distinct names: a sample for a 65th name is refused ("too many KPI
//!   names") and counted (`cgwarden_kpi_refused_total{reason="names"}`);
//!   names are never evicted while the daemon runs.
//! - **Histogram, hand-written** ([`Hist`]): log-linear buckets taken from
//!   the f64's own bits — the exponent and the top 5 mantissa bits, i.e. 32
//!   linear sub-buckets per power of two. A bucket is at most 1/32 of its
//!   lower bound wide, and a quantile is the bucket's midpoint clamped to
//!   the observed min/max, so its relative error is at most 1/64 (1.6 %).
//!   Buckets are sparse (only those hit are stored) and values are limited
//!   to [`MIN_VALUE`, `MAX_VALUE`] (smaller ones count in the zero bucket,
//!   larger ones are refused), so a histogram has at most 70 × 32 = 2240
//!   buckets; real latencies span a few octaves (~100 buckets). HdrHistogram
//!   (the crate) allocates its whole counts array per histogram (tens of
//!   KiB at 3 significant digits over this range) for each of the ring's
//!   61 slots below, and its serialisation is larger than the varint
//!   encoding here; DDSketch crates are not better kept. The bucket scheme
//!   is 30 lines and exactly mergeable (adding counts).
//! - **Windows in memory**: per name a ring of [`SLOTS`] slots of [`SLOT`]
//!   (5 min), plus the slot being filled. Rule conditions
//!   (`kpi.NAME.p99 > 5ms/1m`) and the metrics' summary quantiles merge the
//!   slots that end within the window (the window is rounded up to whole
//!   slots, so it is W to W + 5 s). Windows longer than [`MAX_WINDOW`] are
//!   refused by the rule language. The report's window (hours, days) comes
//!   from the recorder's `kpi` table, one row per name per recorder
//!   interval ([`Store::drain`]).
//! - **Memory bound**: at most [`MAX_BUCKETS`] buckets over every name
//!   and slot together (16–32 bytes each in a BTreeMap node: 2–4 MiB at
//!   most). A sample that would open a bucket past it is refused and
//!   counted (`reason="memory"`); one falling into a bucket already held
//!   is always taken. Without the budget an adversarial spread of values
//!   could hold 2240 buckets per histogram, `MAX_NAMES × (SLOTS + 2)`
//!   histograms (~140 MiB). A real latency KPI (values within a few
//!   octaves) keeps ~100 buckets per slot, ~6,200 in the ring: the budget
//!   holds about 20 such KPIs; see docs/kpi.md for the measured size.

pub(crate) mod expose;
pub(crate) mod parse;
pub(crate) mod record;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most distinct KPI names the daemon keeps.
pub(crate) const MAX_NAMES: usize = 64;
/// Most histogram buckets held in memory, every name and slot together
/// (the memory bound, see the module docs).
pub(crate) const MAX_BUCKETS: usize = 131_072;
pub(crate) use crate::policy::expr::kpi::{check_name, Stat};
/// Values below this count as 0 (in the zero bucket).
pub(crate) const MIN_VALUE: f64 = 1e-9;
/// Values above this are refused.
pub(crate) const MAX_VALUE: f64 = 1e12;
/// One slot of the in-memory ring.
pub(crate) const SLOT: Duration = Duration::from_secs(5);
/// Complete slots kept.
pub(crate) const SLOTS: usize = 60;
/// The longest trailing window a rule or the metrics may ask for.
pub(crate) const MAX_WINDOW: Duration = crate::policy::expr::kpi::MAX_WINDOW;
/// The window of the metrics' summary quantiles.
pub(crate) const METRICS_WINDOW: Duration = MAX_WINDOW;
/// Mantissa bits of a bucket index: 2^5 = 32 sub-buckets per octave.
const SUB_BITS: u32 = 5;

/// What a KPI's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Unit {
    /// A time, in seconds.
    Seconds,
    /// A plain number.
    None,
}

impl Unit {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Unit::Seconds => "seconds",
            Unit::None => "none",
        }
    }

    pub(crate) fn from_name(s: &str) -> Option<Unit> {
        match s {
            "seconds" => Some(Unit::Seconds),
            "none" => Some(Unit::None),
            _ => None,
        }
    }
}

/// Whether `v` may be a KPI value; the error says why not.
pub(crate) fn check_value(v: f64) -> Result<(), String> {
    if !v.is_finite() {
        return Err(format!("KPI value {v} is not a finite number"));
    }
    if v < 0.0 {
        return Err(format!("KPI value {v} is negative"));
    }
    if v > MAX_VALUE {
        return Err(format!("KPI value {v} is larger than {MAX_VALUE:e}"));
    }
    Ok(())
}

/// A mergeable log-linear histogram with count, sum, sum of squares, min
/// and max (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Hist {
    /// Bucket index (the f64's exponent and top mantissa bits) → count.
    buckets: BTreeMap<u16, u64>,
    /// Values below [`MIN_VALUE`].
    zeros: u64,
    pub(crate) count: u64,
    pub(crate) sum: f64,
    pub(crate) sumsq: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
}

fn bucket_of(v: f64) -> u16 {
    // A positive finite f64's bits above the top SUB_BITS mantissa bits:
    // 11 exponent bits and SUB_BITS mantissa bits, ordered as the values.
    (v.to_bits() >> (52 - SUB_BITS)) as u16
}

fn bucket_mid(i: u16) -> f64 {
    let lo = f64::from_bits(u64::from(i) << (52 - SUB_BITS));
    let hi = f64::from_bits(u64::from(i).saturating_add(1) << (52 - SUB_BITS));
    (lo + hi) / 2.0
}

impl Hist {
    /// Adds `n` samples of value `v` (checked by the caller with
    /// [`check_value`]; an unchecked one is dropped).
    pub(crate) fn add(&mut self, v: f64, n: u64) {
        if n == 0 || check_value(v).is_err() {
            return;
        }
        if v < MIN_VALUE {
            self.zeros = self.zeros.saturating_add(n);
        } else {
            let e = self.buckets.entry(bucket_of(v)).or_insert(0);
            *e = e.saturating_add(n);
        }
        let nf = n as f64;
        if self.count == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.count = self.count.saturating_add(n);
        self.sum += v * nf;
        self.sumsq += v * v * nf;
    }

    /// Whether adding `v` would open a bucket this histogram does not hold.
    pub(crate) fn would_open(&self, v: f64) -> bool {
        v >= MIN_VALUE && check_value(v).is_ok() && !self.buckets.contains_key(&bucket_of(v))
    }

    /// Adds every sample of `other`.
    pub(crate) fn merge(&mut self, other: &Hist) {
        if other.count == 0 {
            return;
        }
        for (i, c) in &other.buckets {
            let e = self.buckets.entry(*i).or_insert(0);
            *e = e.saturating_add(*c);
        }
        self.zeros = self.zeros.saturating_add(other.zeros);
        if self.count == 0 {
            self.min = other.min;
            self.max = other.max;
        } else {
            self.min = self.min.min(other.min);
            self.max = self.max.max(other.max);
        }
        self.count = self.count.saturating_add(other.count);
        self.sum += other.sum;
        self.sumsq += other.sumsq;
    }

    /// Number of non-empty buckets (for the memory bound).
    pub(crate) fn buckets(&self) -> usize {
        self.buckets.len() + usize::from(self.zeros > 0)
    }

    /// The `q` quantile (0–1), nearest rank: the midpoint of the bucket
    /// holding the ⌈q·count⌉-th smallest sample, clamped to [min, max].
    pub(crate) fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 || !q.is_finite() {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        if rank <= self.zeros {
            return Some(self.min.clamp(0.0, MIN_VALUE));
        }
        let mut seen = self.zeros;
        for (i, c) in &self.buckets {
            seen = seen.saturating_add(*c);
            if seen >= rank {
                return Some(bucket_mid(*i).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    pub(crate) fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }

    /// Population standard deviation.
    pub(crate) fn stddev(&self) -> Option<f64> {
        let mean = self.mean()?;
        let var = self.sumsq / self.count as f64 - mean * mean;
        Some(var.max(0.0).sqrt())
    }

    /// The summary every reader shows.
    pub(crate) fn summary(&self) -> Option<Summary> {
        Some(Summary {
            count: self.count,
            min: self.min,
            max: self.max,
            mean: self.mean()?,
            stddev: self.stddev()?,
            p50: self.quantile(0.5)?,
            p90: self.quantile(0.9)?,
            p99: self.quantile(0.99)?,
        })
    }

    /// The buckets as a compact blob for the recorder: LEB128 varints, the
    /// zero count, then (index delta, count) pairs in index order.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 + self.buckets.len() * 3);
        varint(&mut out, self.zeros);
        let mut last = 0u16;
        for (i, c) in &self.buckets {
            varint(&mut out, u64::from(i.saturating_sub(last)));
            varint(&mut out, *c);
            last = *i;
        }
        out
    }

    /// Rebuilds a histogram from [`Hist::encode`]'s blob and the row's
    /// count, sum, sum of squares, min and max; `None` when the blob is not
    /// one (never panics).
    #[cfg(any(test, feature = "report"))]
    pub(crate) fn decode(
        blob: &[u8],
        count: u64,
        sum: f64,
        sumsq: f64,
        min: f64,
        max: f64,
    ) -> Option<Hist> {
        let mut pos = 0usize;
        let mut read = || -> Option<u64> {
            let mut v = 0u64;
            for shift in (0..64).step_by(7) {
                let b = *blob.get(pos)?;
                pos += 1;
                v |= u64::from(b & 0x7f) << shift;
                if b & 0x80 == 0 {
                    return Some(v);
                }
            }
            None
        };
        let zeros = read()?;
        let mut buckets = BTreeMap::new();
        let mut idx = 0u64;
        let mut total = zeros;
        while let Some(d) = read() {
            idx = idx.checked_add(d)?;
            let c = read()?;
            buckets.insert(u16::try_from(idx).ok()?, c);
            total = total.saturating_add(c);
        }
        if total != count || ![sum, sumsq, min, max].iter().all(|v| v.is_finite()) {
            return None;
        }
        Some(Hist {
            buckets,
            zeros,
            count,
            sum,
            sumsq,
            min,
            max,
        })
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// One KPI over a window, in its canonical unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Summary {
    pub(crate) count: u64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) mean: f64,
    pub(crate) stddev: f64,
    pub(crate) p50: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
}

impl Summary {
    /// The statistic of a summary.
    pub(crate) fn stat(&self, stat: Stat) -> f64 {
        let s = self;
        match stat {
            Stat::P50 => s.p50,
            Stat::P90 => s.p90,
            Stat::P99 => s.p99,
            Stat::Max => s.max,
            Stat::Min => s.min,
            Stat::Mean => s.mean,
            Stat::Stddev => s.stddev,
            Stat::Count => s.count as f64,
        }
    }
}

/// Why a sample was refused; each is a `reason` label of
/// `cgwarden_kpi_refused_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not a valid name.
    Name,
    /// [`MAX_NAMES`] names are kept already.
    Names,
    /// Not finite, negative, or too large.
    Value,
    /// A gauge for a timer's name or the reverse.
    Unit,
    /// A StatsD line that does not parse, or of a type that is no KPI.
    Malformed,
    /// The sample would open a bucket past [`MAX_BUCKETS`].
    Memory,
}

impl Refusal {
    pub(crate) const ALL: [Refusal; 6] = [
        Refusal::Name,
        Refusal::Names,
        Refusal::Value,
        Refusal::Unit,
        Refusal::Malformed,
        Refusal::Memory,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Refusal::Name => "name",
            Refusal::Names => "names",
            Refusal::Value => "value",
            Refusal::Unit => "unit",
            Refusal::Malformed => "malformed",
            Refusal::Memory => "memory",
        }
    }
}

/// One name's samples.
#[derive(Debug)]
struct Series {
    unit: Unit,
    /// Complete slots, oldest first: (slot number, histogram).
    ring: VecDeque<(u64, Hist)>,
    /// The slot being filled.
    current: (u64, Hist),
    /// Since the recorder's last drain.
    pending: Hist,
    /// Since the daemon started (the summary's `_count` and `_sum`).
    total_count: u64,
    total_sum: f64,
    /// Buckets in `ring`, `current` and `pending` as last counted.
    held: usize,
}

impl Series {
    fn count_held(&mut self) {
        self.held = self.ring.iter().map(|(_, h)| h.buckets()).sum::<usize>()
            + self.current.1.buckets()
            + self.pending.buckets();
    }

    fn roll(&mut self, slot: u64) {
        if self.current.0 == slot {
            return;
        }
        let done = std::mem::replace(&mut self.current, (slot, Hist::default()));
        if done.1.count > 0 {
            self.ring.push_back(done);
        }
        while self
            .ring
            .front()
            .is_some_and(|(s, _)| slot.saturating_sub(*s) > SLOTS as u64)
        {
            self.ring.pop_front();
        }
    }
}

/// A KPI with its window summary, for metrics and `status`.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) unit: Unit,
    pub(crate) window: Option<Summary>,
    pub(crate) total_count: u64,
    pub(crate) total_sum: f64,
}

/// The daemon's KPIs (shared by the inputs, the event loop, the metrics and
/// recorder threads). One short mutex: every operation is a few map
/// lookups and bucket increments.
#[derive(Debug)]
pub(crate) struct Store {
    start: Instant,
    series: Mutex<BTreeMap<String, Series>>,
    accepted: AtomicU64,
    refused: [AtomicU64; 6],
}

impl Default for Store {
    fn default() -> Self {
        Store::new(Instant::now())
    }
}

impl Store {
    pub(crate) fn new(start: Instant) -> Store {
        Store {
            start,
            series: Mutex::new(BTreeMap::new()),
            accepted: AtomicU64::new(0),
            refused: Default::default(),
        }
    }

    fn slot(&self, now: Instant) -> u64 {
        (now.saturating_duration_since(self.start).as_millis() / SLOT.as_millis()) as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Series>> {
        self.series.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a refusal (also used by the inputs for malformed lines).
    pub(crate) fn refuse(&self, r: Refusal) {
        if let Some(c) = self
            .refused
            .get(Refusal::ALL.iter().position(|x| *x == r).unwrap_or(0))
        {
            c.fetch_add(1, Relaxed);
        }
    }

    /// Samples accepted since start.
    pub(crate) fn accepted(&self) -> u64 {
        self.accepted.load(Relaxed)
    }

    /// Refusals since start, by reason.
    pub(crate) fn refused(&self) -> Vec<(Refusal, u64)> {
        Refusal::ALL
            .iter()
            .zip(&self.refused)
            .map(|(r, c)| (*r, c.load(Relaxed)))
            .collect()
    }

    /// Records `(value, repeat)` samples of `name` at `now`; all or none.
    /// Returns how many samples were added, or the refusal and its reason.
    pub(crate) fn record(
        &self,
        name: &str,
        unit: Unit,
        samples: &[(f64, u64)],
        now: Instant,
    ) -> Result<u64, (Refusal, String)> {
        let refuse = |r: Refusal, why: String| {
            self.refuse(r);
            Err((r, why))
        };
        if let Err(e) = check_name(name) {
            return refuse(Refusal::Name, e);
        }
        if samples.iter().all(|(_, n)| *n == 0) {
            return refuse(Refusal::Value, format!("{name}: no sample given"));
        }
        if let Some(e) = samples.iter().find_map(|(v, _)| check_value(*v).err()) {
            return refuse(Refusal::Value, format!("{name}: {e}"));
        }
        let slot = self.slot(now);
        let mut all = self.lock();
        let n_names = all.len();
        let s = match all.get_mut(name) {
            Some(s) => s,
            None if n_names >= MAX_NAMES => {
                drop(all);
                return refuse(
                    Refusal::Names,
                    format!(
                        "too many KPI names: {MAX_NAMES} are kept already; `{name}` is refused"
                    ),
                );
            }
            None => all.entry(name.to_string()).or_insert(Series {
                unit,
                ring: VecDeque::new(),
                current: (slot, Hist::default()),
                pending: Hist::default(),
                total_count: 0,
                total_sum: 0.0,
                held: 0,
            }),
        };
        if s.unit != unit {
            let have = s.unit.name();
            drop(all);
            return refuse(
                Refusal::Unit,
                format!(
                    "KPI `{name}` has unit {have}; a sample in {} is refused",
                    unit.name()
                ),
            );
        }
        s.roll(slot);
        s.count_held();
        let mine = s.held;
        let opened: usize = samples
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(v, _)| {
                usize::from(s.current.1.would_open(*v)) + usize::from(s.pending.would_open(*v))
            })
            .sum();
        if opened > 0 {
            let others: usize = all
                .iter()
                .filter(|(n, _)| n.as_str() != name)
                .map(|(_, s)| s.held)
                .sum();
            if others + mine + opened > MAX_BUCKETS {
                drop(all);
                return refuse(
                    Refusal::Memory,
                    format!(
                        "{name}: the KPIs hold {MAX_BUCKETS} histogram buckets already; \
                         a sample outside them is refused"
                    ),
                );
            }
        }
        let Some(s) = all.get_mut(name) else {
            return Ok(0);
        };
        let mut added = 0u64;
        for (v, n) in samples {
            s.current.1.add(*v, *n);
            s.pending.add(*v, *n);
            s.total_count = s.total_count.saturating_add(*n);
            s.total_sum += v * *n as f64;
            added = added.saturating_add(*n);
        }
        s.held = mine + opened;
        drop(all);
        self.accepted.fetch_add(added, Relaxed);
        Ok(added)
    }

    /// `name` over the trailing `window` (whole slots, plus the one being
    /// filled); `None` when it has no sample there.
    pub(crate) fn window(&self, name: &str, window: Duration, now: Instant) -> Option<Summary> {
        let slot = self.slot(now);
        let mut all = self.lock();
        let s = all.get_mut(name)?;
        s.roll(slot);
        merged(s, window, slot).summary()
    }

    /// Every KPI over the trailing `window`, by name.
    pub(crate) fn rows(&self, window: Duration, now: Instant) -> Vec<Row> {
        let slot = self.slot(now);
        let mut all = self.lock();
        all.iter_mut()
            .map(|(name, s)| {
                s.roll(slot);
                Row {
                    name: name.clone(),
                    unit: s.unit,
                    window: merged(s, window, slot).summary(),
                    total_count: s.total_count,
                    total_sum: s.total_sum,
                }
            })
            .collect()
    }

    /// What arrived since the last drain, per name (the recorder's row).
    pub(crate) fn drain(&self) -> Vec<(String, Unit, Hist)> {
        let mut all = self.lock();
        all.iter_mut()
            .filter(|(_, s)| s.pending.count > 0)
            .map(|(n, s)| {
                let h = std::mem::take(&mut s.pending);
                s.count_held();
                (n.clone(), s.unit, h)
            })
            .collect()
    }

    /// Buckets held in memory, all names (for the memory bound's tests and
    /// measurements).
    #[cfg(test)]
    pub(crate) fn buckets_held(&self) -> usize {
        self.lock()
            .values()
            .map(|s| {
                s.ring.iter().map(|(_, h)| h.buckets()).sum::<usize>()
                    + s.current.1.buckets()
                    + s.pending.buckets()
            })
            .sum()
    }
}

/// One value of `cgwarden kpi NAME VALUE…`: a plain number (unit none) or
/// a time with its unit (`2.5ms`, `180us`, `0.01s`, `500ns`), in seconds.
pub(crate) fn parse_value(text: &str) -> Result<(Unit, f64), String> {
    let units = [
        ("ms", 1e-3),
        ("us", 1e-6),
        ("µs", 1e-6),
        ("ns", 1e-9),
        ("s", 1.0),
    ];
    let (number, unit, scale) = match units.iter().find(|(u, _)| text.ends_with(u)) {
        Some((u, scale)) => (&text[..text.len() - u.len()], Unit::Seconds, *scale),
        None => (text, Unit::None, 1.0),
    };
    let ok = !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && number.bytes().filter(|b| *b == b'.').count() <= 1;
    let v: f64 = number.parse().ok().filter(|_| ok).ok_or_else(|| {
        format!("`{text}` is not a KPI value: a number (`29.8`) or a time (`2.5ms`, `180us`)")
    })?;
    let v = v * scale;
    check_value(v)?;
    Ok((unit, v))
}

/// `cgwarden kpi NAME VALUE…`: the values, all of one unit.
pub(crate) fn parse_values(values: &[String]) -> Result<(Unit, Vec<(f64, u64)>), String> {
    let mut unit = None;
    let mut out = Vec::with_capacity(values.len());
    for t in values {
        let (u, v) = parse_value(t)?;
        if unit.is_some_and(|x| x != u) {
            return Err(format!(
                "`{t}` is not of the same kind as the values before it: give times (`2ms`) or plain numbers, not both"
            ));
        }
        unit = Some(u);
        out.push((v, 1));
    }
    Ok((unit.unwrap_or(Unit::None), out))
}

fn merged(s: &Series, window: Duration, slot: u64) -> Hist {
    let slots = window.as_millis().div_ceil(SLOT.as_millis()).max(1) as u64;
    let mut h = s.current.1.clone();
    for (n, sh) in s.ring.iter().rev() {
        if slot.saturating_sub(*n) > slots {
            break;
        }
        h.merge(sh);
    }
    h
}

#[cfg(test)]
mod tests;
