//! The input tape, so the recorder keeps what replay needs: every value a rule
//! condition read, at every evaluation, as the engine saw it — so `cgwarden
//! replay` can run a policy over it again.
//!
//! What is taped: the leaves of the rule conditions of the policy in force
//! (PSI averages, the PSI `total=` of stall-time conditions, memory and
//! swap use, `memory.events` counters, pids, populated, MemAvailable,
//! temperatures, trip points, cooling states, cpufreq limits, memory
//! telemetry, `running()`, `exists()`, `throttled()`), named as a rule
//! names them (`inference.memory.some.avg10`; a stall line's counter is
//! `inference.cpu.some.total`, with `armed(inference.cpu.some)`: whether a
//! registered kernel trigger watches the line, whose silence the engine
//! reads as no stall), plus the kernel PSI triggers that woke the
//! daemon (`trigger(inference.cpu.some/1s)`, value: the trigger's amount in
//! µs). Each evaluation's time is taped too, so a replay evaluates when the
//! daemon did.
//!
//! Cheap by construction:
//! - the event loop only appends `(time, changed values)` to a chunk in
//!   memory (one short mutex hold per evaluation, no I/O, no encoding); a
//!   value equal to the previous one is not appended;
//! - the recorder thread takes the chunk every `recorder.interval` and
//!   writes it as **one row** (`tape`): evaluation times as millisecond
//!   deltas, values as deltas of integers (LEB128 varints, zigzag for
//!   sign), so an unchanged input costs nothing and a PSI counter ticking
//!   every second costs 3–5 bytes a tick. The encoding is in
//!   docs/replay.md;
//! - each chunk restates every watched value at its first evaluation, so a
//!   chunk is self-contained: retention can drop old chunks freely;
//! - if the recorder falls behind (a stuck disk), a chunk stops growing at
//!   [`MAX_EVALS`] evaluations and the rest are counted as lost, never
//!   blocking the loop or growing memory without bound.
//!
//! Values are integers: bytes, counts, µs, m°C, 0/1 as read; PSI averages
//! (two decimals in the kernel's file) × 100; memory telemetry rates and
//! indices × 1000 (their displayed precision). `tape_keys.scale` says which.

use crate::engine::condition::Metrics;
use crate::engine::stall::{StallHistory, StallKey};
use crate::policy::expr::{Expr, ExprKind, Metric};
use crate::policy::model::Policy;
use rusqlite::{params, Connection};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The tape's tables (additive to schema v1).
pub(crate) const SCHEMA: &str = include_str!("tape.sql");

/// Most evaluations one chunk holds before the loop stops appending (the
/// recorder is stuck); a day at 1 s would be 86 400.
pub(crate) const MAX_EVALS: usize = 100_000;

/// The encoding's version byte.
pub(crate) const VERSION: u8 = 1;

/// How a taped value is asked of the metrics the engine evaluated.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Query {
    Metric(Metric),
    /// A stall line's `total=` as read this evaluation.
    Total(StallKey),
    /// Whether a registered kernel trigger watches the line (its silence
    /// then answers for windows nobody sampled, as in the daemon's view).
    Armed(StallKey),
    Running(String),
    Exists(String),
    Throttled(String),
}

/// One taped input.
#[derive(Clone, Debug)]
pub(crate) struct Leaf {
    pub(crate) name: String,
    pub(crate) scale: f64,
    pub(crate) query: Query,
}

/// The name of a stall line, `G.res.some`.
pub(crate) fn line_name(k: &StallKey) -> String {
    format!("{}.{}.{}", k.target, k.resource, k.stall)
}

/// The name of a line's `total=` counter on the tape.
pub(crate) fn total_name(k: &StallKey) -> String {
    format!("{}.total", line_name(k))
}

/// The name of a kernel trigger's firing on the tape.
pub(crate) fn trigger_name(k: &StallKey, window: Duration) -> String {
    format!(
        "trigger({}/{})",
        line_name(k),
        crate::units::Duration(window)
    )
}

/// The scale a metric's value is kept at (see the module docs).
pub(crate) fn scale_of(m: &Metric) -> f64 {
    match m {
        Metric::PsiAvg { .. } => 100.0,
        Metric::Mem(mm) if !mm.is_bytes() => 1000.0,
        _ => 1.0,
    }
}

/// The leaf of a metric: its tape name and query.
pub(crate) fn metric_leaf(m: &Metric) -> Leaf {
    match m {
        Metric::PsiStall {
            target,
            resource,
            stall,
        } => {
            let key = StallKey::of(&target.value, *resource, *stall);
            Leaf {
                name: total_name(&key),
                scale: 1.0,
                query: Query::Total(key),
            }
        }
        m => Leaf {
            name: m.to_string(),
            scale: scale_of(m),
            query: Query::Metric(m.clone()),
        },
    }
}

/// The leaves of one condition, by name (explicit stack: no depth limit).
pub(crate) fn expr_leaves(expr: &Expr, out: &mut BTreeMap<String, Leaf>) {
    for e in expr.leaves() {
        let leaf = match &e.kind {
            ExprKind::Or(..) | ExprKind::And(..) | ExprKind::Not(_) => continue,
            ExprKind::Compare(c) => metric_leaf(&c.metric),
            ExprKind::Running(p) => Leaf {
                name: format!("running({p})"),
                scale: 1.0,
                query: Query::Running(p.clone()),
            },
            ExprKind::Exists(g) => Leaf {
                name: format!("exists({})", g.value),
                scale: 1.0,
                query: Query::Exists(g.value.clone()),
            },
            ExprKind::Throttled(p) => Leaf {
                name: format!("throttled({})", p.value),
                scale: 1.0,
                query: Query::Throttled(p.value.clone()),
            },
        };
        if let Query::Total(k) = &leaf.query {
            let armed = Leaf {
                name: armed_name(k),
                scale: 1.0,
                query: Query::Armed(k.clone()),
            };
            out.entry(armed.name.clone()).or_insert(armed);
        }
        out.entry(leaf.name.clone()).or_insert(leaf);
    }
}

/// The name of a line's armed-trigger flag on the tape.
pub(crate) fn armed_name(k: &StallKey) -> String {
    format!("armed({})", line_name(k))
}

/// Every input the policy's rules read, sorted by name.
pub(crate) fn leaves(policy: &Policy) -> Vec<Leaf> {
    let mut out = BTreeMap::new();
    for r in &policy.rules {
        expr_leaves(&r.when, &mut out);
    }
    out.into_values().collect()
}

fn scaled(v: f64, scale: f64) -> Option<i64> {
    let s = (v * scale).round();
    (s.is_finite() && s.abs() < 9.0e15).then_some(s as i64)
}

/// The value a leaf had for the engine: `None` when unavailable.
pub(crate) fn read<M: Metrics + ?Sized>(
    leaf: &Leaf,
    m: &M,
    stall: &StallHistory,
    now: Duration,
) -> Option<i64> {
    use crate::policy::expr::Metric as X;
    let u = |v: Option<u64>| v.and_then(|v| i64::try_from(v).ok());
    match &leaf.query {
        Query::Total(k) => {
            let (t, total) = stall.series(k)?.latest()?;
            // Only a read of this evaluation (a stale one is not a reading).
            (t == now).then(|| i64::try_from(total).ok()).flatten()
        }
        Query::Armed(k) => Some(i64::from(stall.is_armed(k))),
        Query::Running(p) => Some(i64::from(m.running(p))),
        Query::Exists(g) => Some(i64::from(m.exists(g))),
        Query::Throttled(p) => m.throttled(p).map(i64::from),
        Query::Metric(metric) => match metric {
            X::PsiAvg {
                target,
                resource,
                stall,
                avg,
            } => m
                .psi_avg(&target.value, *resource, *stall, *avg)
                .and_then(|v| scaled(v, leaf.scale)),
            X::PsiStall { .. } => None, // taped as Query::Total
            X::MemoryCurrent { group } => u(m.memory_current(&group.value)),
            X::SwapCurrent { group } => u(m.swap_current(&group.value)),
            X::MemoryEvent { group, event } => u(m.memory_event(&group.value, *event)),
            X::PidsCurrent { group } => u(m.pids_current(&group.value)),
            X::Populated { group } => m.populated(&group.value).map(i64::from),
            X::MemoryAvailable => u(m.memory_available()),
            X::ThermalTemp { zone } => m.thermal_millic(&zone.value),
            X::ThermalTrip { zone, trip } => m.thermal_trip_millic(&zone.value, *trip),
            X::CoolingState { device } => u(m.cooling_state(&device.value)),
            X::CpufreqFreq { policy, limit } => u(m.cpufreq_khz(&policy.value, *limit)),
            X::Mem(mm) => m.memstat(mm).and_then(|v| scaled(v, leaf.scale)),
            X::Kpi { .. } => None, // not taped (replay sees it unavailable)
        },
    }
}

/// The evaluations since the recorder last took the tape.
#[derive(Clone, Debug, Default)]
pub(crate) struct Chunk {
    /// The watched inputs, `(name, scale)`; an index is a tape-local id.
    pub(crate) keys: Vec<(String, f64)>,
    /// When each evaluation happened, Unix seconds.
    pub(crate) evals: Vec<f64>,
    /// Per key: `(evaluation index, value)` where the value changed (and
    /// every key at the first evaluation).
    pub(crate) values: Vec<Vec<(u32, Option<i64>)>>,
    /// Kernel trigger firings: `(name, evaluation index, amount µs)`.
    pub(crate) triggers: Vec<(String, u32, i64)>,
}

impl Chunk {
    fn new(keys: Vec<(String, f64)>) -> Chunk {
        let values = vec![Vec::new(); keys.len()];
        Chunk {
            keys,
            values,
            ..Default::default()
        }
    }

    fn fresh(&self) -> Chunk {
        Chunk::new(self.keys.clone())
    }
}

/// What the loop and the recorder thread share.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Chunks closed by a reload (their watched set ended).
    done: Vec<Chunk>,
    cur: Chunk,
    /// Evaluations not taped because the recorder fell behind.
    pub(crate) lost: u64,
}

/// The event loop's side.
#[derive(Debug)]
pub(crate) struct Tape {
    leaves: Vec<Leaf>,
    /// Unix seconds of the daemon's monotonic zero.
    wall_base: f64,
    shared: Arc<Mutex<Shared>>,
    /// Reused each evaluation.
    buf: Vec<Option<i64>>,
}

impl Tape {
    pub(crate) fn new(policy: &Policy, wall_base: f64) -> Tape {
        let leaves = leaves(policy);
        let keys = leaves.iter().map(|l| (l.name.clone(), l.scale)).collect();
        Tape {
            leaves,
            wall_base,
            shared: Arc::new(Mutex::new(Shared {
                cur: Chunk::new(keys),
                ..Default::default()
            })),
            buf: Vec::new(),
        }
    }

    pub(crate) fn shared(&self) -> Arc<Mutex<Shared>> {
        self.shared.clone()
    }

    /// A reload: the new policy's inputs are watched from now on.
    pub(crate) fn set_policy(&mut self, policy: &Policy) {
        self.leaves = leaves(policy);
        let keys: Vec<(String, f64)> = self
            .leaves
            .iter()
            .map(|l| (l.name.clone(), l.scale))
            .collect();
        let mut s = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        let old = std::mem::replace(&mut s.cur, Chunk::new(keys));
        if !old.evals.is_empty() {
            s.done.push(old);
        }
    }

    /// Tapes one evaluation at `now` (the daemon's monotonic time) of
    /// `metrics`; `triggered` are the kernel triggers this sample consumed.
    pub(crate) fn record<M: Metrics + ?Sized>(
        &mut self,
        now: Duration,
        metrics: &M,
        stall: &StallHistory,
        triggered: &[(StallKey, Duration, Duration)],
    ) {
        self.buf.clear();
        for l in &self.leaves {
            self.buf.push(read(l, metrics, stall, now));
        }
        let ts = self.wall_base + now.as_secs_f64();
        let mut s = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        let c = &mut s.cur;
        if c.evals.len() >= MAX_EVALS || c.values.len() != self.buf.len() {
            s.lost += 1;
            return;
        }
        let idx = c.evals.len() as u32;
        c.evals.push(ts);
        for (series, v) in c.values.iter_mut().zip(&self.buf) {
            if idx == 0 || series.last().map(|e| e.1) != Some(*v) {
                series.push((idx, *v));
            }
        }
        for (key, amount, window) in triggered {
            let us = i64::try_from(amount.as_micros()).unwrap_or(i64::MAX);
            c.triggers.push((trigger_name(key, *window), idx, us));
        }
    }
}

/// Takes what the loop taped since the last call (the recorder thread).
pub(crate) fn take(shared: &Mutex<Shared>) -> (Vec<Chunk>, u64) {
    let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = std::mem::take(&mut s.done);
    if !s.cur.evals.is_empty() {
        let fresh = s.cur.fresh();
        out.push(std::mem::replace(&mut s.cur, fresh));
    }
    (out, std::mem::take(&mut s.lost))
}

// ---- the encoding (docs/replay.md) ----

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(any(test, feature = "report"))] // the reading side: `cgwarden replay`
pub(crate) fn get_varint(data: &[u8], at: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *data.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[cfg(any(test, feature = "report"))] // the reading side: `cgwarden replay`
fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// A value code: 0 for unavailable, else the zigzagged delta from `prev` + 1.
fn put_value(out: &mut Vec<u8>, prev: &mut i64, v: Option<i64>) {
    match v {
        None => put_varint(out, 0),
        Some(v) => {
            put_varint(out, zigzag(v.wrapping_sub(*prev)).saturating_add(1));
            *prev = v;
        }
    }
}

/// One input's changes in a chunk: `(evaluation index, value)`.
pub(crate) type Changes = Vec<(u32, Option<i64>)>;

#[cfg(any(test, feature = "report"))] // the reading side: `cgwarden replay`
/// One decoded chunk, with database key ids.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Decoded {
    /// Evaluation times, Unix seconds.
    pub(crate) evals: Vec<f64>,
    pub(crate) watched: Vec<i64>,
    /// `(key id, [(evaluation index, value)])`, values unscaled integers.
    pub(crate) series: Vec<(i64, Changes)>,
}

/// Encodes `c` with database ids `ids` (by tape-local index; triggers by
/// name in `trigger_ids`). The first evaluation is at `c.evals[0]`.
pub(crate) fn encode(c: &Chunk, ids: &[i64], trigger_ids: &HashMap<String, i64>) -> Vec<u8> {
    let mut out = vec![VERSION];
    let t0 = c.evals.first().copied().unwrap_or(0.0);
    put_varint(&mut out, c.evals.len() as u64);
    let mut prev_ms = 0u64;
    for t in &c.evals {
        let ms = ((t - t0) * 1000.0).round().max(0.0) as u64;
        put_varint(&mut out, ms.saturating_sub(prev_ms));
        prev_ms = prev_ms.max(ms);
    }
    put_varint(&mut out, ids.len() as u64);
    for id in ids {
        put_varint(&mut out, *id as u64);
    }
    let mut series: Vec<(i64, Changes)> = ids
        .iter()
        .zip(&c.values)
        .filter(|(_, v)| !v.is_empty())
        .map(|(id, v)| (*id, v.clone()))
        .collect();
    let mut trig: BTreeMap<i64, Vec<(u32, Option<i64>)>> = BTreeMap::new();
    for (name, idx, us) in &c.triggers {
        if let Some(id) = trigger_ids.get(name) {
            trig.entry(*id).or_default().push((*idx, Some(*us)));
        }
    }
    series.extend(trig);
    put_varint(&mut out, series.len() as u64);
    for (id, entries) in &series {
        put_varint(&mut out, *id as u64);
        put_varint(&mut out, entries.len() as u64);
        let (mut prev_idx, mut prev) = (0u32, 0i64);
        for (idx, v) in entries {
            put_varint(&mut out, u64::from(idx.saturating_sub(prev_idx)));
            prev_idx = *idx;
            put_value(&mut out, &mut prev, *v);
        }
    }
    out
}

#[cfg(any(test, feature = "report"))] // the reading side: `cgwarden replay`
/// Decodes a chunk written at `ts`; `None` when damaged or of another
/// version (the replay names it, never guesses).
pub(crate) fn decode(ts: f64, data: &[u8]) -> Option<Decoded> {
    let mut at = 0;
    if *data.first()? != VERSION {
        return None;
    }
    at += 1;
    let n = usize::try_from(get_varint(data, &mut at)?).ok()?;
    // Every count is bounded by the bytes left: a damaged length cannot
    // make us allocate more than the blob.
    let left = |at: usize| data.len().saturating_sub(at);
    if n > left(at) {
        return None;
    }
    let mut evals = Vec::with_capacity(n);
    let mut ms = 0u64;
    for _ in 0..n {
        ms = ms.checked_add(get_varint(data, &mut at)?)?;
        evals.push(ts + ms as f64 / 1000.0);
    }
    let w = usize::try_from(get_varint(data, &mut at)?).ok()?;
    if w > left(at) {
        return None;
    }
    let mut watched = Vec::with_capacity(w);
    for _ in 0..w {
        watched.push(i64::try_from(get_varint(data, &mut at)?).ok()?);
    }
    let s = usize::try_from(get_varint(data, &mut at)?).ok()?;
    if s > left(at) {
        return None;
    }
    let mut series = Vec::with_capacity(s);
    for _ in 0..s {
        let id = i64::try_from(get_varint(data, &mut at)?).ok()?;
        let k = usize::try_from(get_varint(data, &mut at)?).ok()?;
        if k > left(at) {
            return None;
        }
        let mut entries = Vec::with_capacity(k);
        let (mut idx, mut prev) = (0u32, 0i64);
        for _ in 0..k {
            idx = idx.checked_add(u32::try_from(get_varint(data, &mut at)?).ok()?)?;
            if idx as usize >= n {
                return None;
            }
            let code = get_varint(data, &mut at)?;
            let v = match code {
                0 => None,
                c => {
                    prev = prev.wrapping_add(unzigzag(c - 1));
                    Some(prev)
                }
            };
            entries.push((idx, v));
        }
        series.push((id, entries));
    }
    (at == data.len()).then_some(Decoded {
        evals,
        watched,
        series,
    })
}

/// The database id of a key, creating it.
fn key_id(
    tx: &Connection,
    cache: &mut HashMap<String, i64>,
    name: &str,
    scale: f64,
) -> rusqlite::Result<i64> {
    if let Some(id) = cache.get(name) {
        return Ok(*id);
    }
    tx.execute(
        "INSERT OR IGNORE INTO tape_keys (name, scale) VALUES (?1, ?2)",
        params![name, scale],
    )?;
    let id: i64 = tx.query_row(
        "SELECT id FROM tape_keys WHERE name = ?1",
        params![name],
        |r| r.get(0),
    )?;
    cache.insert(name.to_string(), id);
    Ok(id)
}

/// Writes the chunks (one row each) inside the recorder's transaction.
pub(crate) fn insert(
    tx: &Connection,
    run: i64,
    cache: &mut HashMap<String, i64>,
    chunks: &[Chunk],
) -> rusqlite::Result<()> {
    for c in chunks {
        let (Some(first), Some(last)) = (c.evals.first(), c.evals.last()) else {
            continue;
        };
        let mut ids = Vec::with_capacity(c.keys.len());
        for (name, scale) in &c.keys {
            ids.push(key_id(tx, cache, name, *scale)?);
        }
        let mut trigger_ids = HashMap::new();
        for (name, _, _) in &c.triggers {
            if !trigger_ids.contains_key(name) {
                trigger_ids.insert(name.clone(), key_id(tx, cache, name, 1.0)?);
            }
        }
        let data = encode(c, &ids, &trigger_ids);
        tx.prepare_cached(
            "INSERT INTO tape (ts, run, until, evals, data) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![first, run, last, c.evals.len() as i64, data])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::condition::Metrics;
    use crate::policy::expr::{Avg, MemEvent, Resource, Stall, Target};

    struct M {
        avg: f64,
        oom: u64,
    }

    impl Metrics for M {
        fn psi_avg(&self, _: &Target, _: Resource, _: Stall, _: Avg) -> Option<f64> {
            Some(self.avg)
        }
        fn psi_stall(&self, _: &Target, _: Resource, _: Stall, _: Duration) -> Option<Duration> {
            None
        }
        fn memory_current(&self, _: &str) -> Option<u64> {
            None
        }
        fn swap_current(&self, _: &str) -> Option<u64> {
            None
        }
        fn memory_event(&self, _: &str, _: MemEvent) -> Option<u64> {
            Some(self.oom)
        }
        fn pids_current(&self, _: &str) -> Option<u64> {
            None
        }
        fn populated(&self, _: &str) -> Option<bool> {
            None
        }
        fn memory_available(&self) -> Option<u64> {
            None
        }
        fn thermal_millic(&self, _: &str) -> Option<i64> {
            Some(45_000)
        }
        fn running(&self, _: &str) -> bool {
            true
        }
        fn exists(&self, _: &str) -> bool {
            false
        }
    }

    const POLICY: &str = "version: 1\nproduct: t\ngroups:\n  app: {}\nrules:\n  - name: a\n    when: app.memory.some.avg10 > 10% and app.memory.events.oom_kill > 0\n    then: [compact memory]\n  - name: b\n    when: app.cpu.some > 100ms/1s or running(x) or thermal.cpu.temp > 90C or app.memory.current > 1G\n    then: [compact memory]\n";

    fn policy() -> Policy {
        crate::policy::load_bytes("t.yaml", POLICY.as_bytes()).unwrap_or_else(|d| panic!("{d}"))
    }

    #[test]
    fn leaves_are_named_as_rules_name_them() {
        let names: Vec<String> = leaves(&policy()).into_iter().map(|l| l.name).collect();
        assert_eq!(
            names,
            [
                "app.cpu.some.total",
                "app.memory.current",
                "app.memory.events.oom_kill",
                "app.memory.some.avg10",
                "armed(app.cpu.some)",
                "running(x)",
                "thermal.cpu.temp"
            ]
        );
    }

    #[test]
    fn only_changes_are_taped_and_a_chunk_round_trips() {
        let p = policy();
        let mut tape = Tape::new(&p, 1000.0);
        let mut stall = StallHistory::new();
        let key = StallKey {
            target: Target::Group("app".into()),
            resource: Resource::Cpu,
            stall: Stall::Some,
        };
        let mut m = M { avg: 1.25, oom: 3 };
        for i in 0..5u64 {
            let now = Duration::from_secs(i);
            stall.record(&key, now, 1_000_000 + 200_000 * i);
            if i == 3 {
                m.avg = 12.5;
                m.oom = 4;
            }
            let trig = if i == 4 {
                vec![(
                    key.clone(),
                    Duration::from_millis(100),
                    Duration::from_secs(1),
                )]
            } else {
                vec![]
            };
            tape.record(now, &m, &stall, &trig);
        }
        let (chunks, lost) = take(&tape.shared());
        assert_eq!((chunks.len(), lost), (1, 0));
        let c = &chunks[0];
        assert_eq!(c.evals, [1000.0, 1001.0, 1002.0, 1003.0, 1004.0]);
        let by_name = |n: &str| {
            let i = c.keys.iter().position(|k| k.0 == n).unwrap();
            c.values[i].clone()
        };
        // The average: restated at the start, then its one change.
        assert_eq!(
            by_name("app.memory.some.avg10"),
            [(0, Some(125)), (3, Some(1250))]
        );
        assert_eq!(by_name("app.cpu.some.total").len(), 5);
        assert_eq!(by_name("app.memory.current"), [(0, None)]);
        assert_eq!(by_name("thermal.cpu.temp"), [(0, Some(45_000))]);
        let ids: Vec<i64> = (1..=c.keys.len() as i64).collect();
        let trig = HashMap::from([("trigger(app.cpu.some/1s)".to_string(), 99)]);
        let data = encode(c, &ids, &trig);
        let d = decode(1000.0, &data).unwrap();
        assert_eq!(d.evals, c.evals);
        assert_eq!(d.watched, ids);
        let avg_id = ids[c
            .keys
            .iter()
            .position(|k| k.0 == "app.memory.some.avg10")
            .unwrap()];
        let s = d.series.iter().find(|s| s.0 == avg_id).unwrap();
        assert_eq!(s.1, [(0, Some(125)), (3, Some(1250))]);
        let t = d.series.iter().find(|s| s.0 == 99).unwrap();
        assert_eq!(t.1, [(4, Some(100_000))]);
        // Small: five evaluations of seven inputs (six and the line's armed
        // flag) and a trigger: ~11 bytes of times, 8 of ids, ~22 for the
        // ticking counter, ~5 per other input (restated once), 6 for the
        // trigger.
        assert!(data.len() < 90, "{} bytes", data.len());
        // A damaged blob decodes to nothing, never panics.
        for cut in 0..data.len() {
            assert!(decode(0.0, &data[..cut]).is_none());
        }
        // The next chunk restates everything at its first evaluation.
        tape.record(Duration::from_secs(5), &m, &stall, &[]);
        let (chunks, _) = take(&tape.shared());
        assert!(chunks[0].values.iter().all(|v| v.len() == 1));
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = decode(0.0, &data);
        }
    }
}
