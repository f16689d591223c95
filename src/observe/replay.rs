//! `cgwarden replay POLICY --recording DB`: the pure
//! engine ([`Supervisor`]) on a simulated clock over the input tape the
//! recorder kept ([`super::tape`]): per rule its firing episodes (start,
//! end, why), time active, the writes and hooks it would have made, and a
//! diff against what the recording says the recorded policy did (its `rule`
//! events). `--sweep` runs it once per threshold value ([`sweep`]).
//!
//! Honest limits: an input a rule reads that the tape does not hold for a
//! stretch (the recorded policy did not read it, or the recording is older
//! than the tape) is a **gap**, named with the rule, the input and the time
//! span; the replay never invents a value for it (the engine sees it as
//! unavailable, as the daemon would). A damaged tape row is named too.
//!
//! The replay evaluates when the daemon evaluated (the tape's evaluation
//! times) and, like the daemon, also at the engine's own deadlines (`for`,
//! `hold`, `cooldown`, event windows) in between, with the inputs as last
//! taped. A daemon restart (a new `run`) starts a new engine, as the daemon
//! does. A knob without a policy baseline is seeded with the original the
//! recording shows (the first recorded write's `old`), as the daemon seeds
//! it from its journal; one never written there stays unknown, and a
//! `raise`/`lower` of it is listed as failed, never guessed.

mod html;
mod show;
pub(crate) mod sweep;
#[cfg(test)]
mod tests;

#[cfg(test)]
use show::text;
pub(crate) use show::{run, Options};
pub(crate) use show::{span, when};

use super::tape::{self, Leaf, Query};
use crate::engine::condition::Metrics;
use crate::engine::rule_state::Time;
use crate::engine::stall::{StallHistory, StallKey};
use crate::engine::supervisor::{Effect, Supervisor};
use crate::policy::expr::{
    Avg, Expr, ExprKind, MemEvent, Metric, Resource, Stall, Target, Threshold,
};
use crate::policy::model::Policy;
use rusqlite::Connection;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

/// One row of the tape, decoded.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub(crate) run: i64,
    pub(crate) ts: f64,
    pub(crate) until: f64,
    pub(crate) d: tape::Decoded,
}

/// What a recording holds for replay.
#[derive(Clone, Debug, Default)]
pub(crate) struct Recording {
    /// Tape key ids: name and scale.
    pub(crate) keys: HashMap<i64, (String, f64)>,
    pub(crate) rows: Vec<Row>,
    /// Rows that could not be decoded: `(from, until)`.
    pub(crate) damaged: Vec<(f64, f64)>,
    /// `rule` events: `(ts, rule, state)`; `(ts, "", "start"|"stop")`
    /// for the daemon's own.
    pub(crate) rule_events: Vec<(f64, String, String)>,
    /// `write` events' causes (`rule NAME`), with their time.
    pub(crate) write_causes: Vec<(f64, String)>,
    /// Per knob (as the policy names it), the value before the first
    /// recorded write: the original the daemon seeds a knob the policy
    /// gives no baseline with (what a released claim returns to).
    pub(crate) originals: HashMap<String, String>,
}

impl Recording {
    /// Reads the tape (and the recorded rule events) of the last `since`.
    pub(crate) fn read(db: &Connection, since: Option<Duration>) -> rusqlite::Result<Recording> {
        let mut r = Recording::default();
        let has_tape: i64 = db.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tape'",
            [],
            |row| row.get(0),
        )?;
        if has_tape > 0 {
            let v1 = db
                .query_row(
                    "SELECT value FROM meta WHERE key = 'schema_version'",
                    [],
                    |row| row.get::<_, String>(0),
                )
                .is_ok_and(|v| v.trim() == "1");
            let mut st = db.prepare("SELECT id, name, scale FROM tape_keys")?;
            for k in st.query_map([], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?, row.get(2)?))
            })? {
                let (id, name, scale) = k?;
                let name = if v1 {
                    crate::observe::host_name_of_v1(&name).into_owned()
                } else {
                    name
                };
                r.keys.insert(id, (name, scale));
            }
            let end: Option<f64> =
                db.query_row("SELECT max(until) FROM tape", [], |row| row.get(0))?;
            let from = match (since, end) {
                (Some(s), Some(e)) => e - s.as_secs_f64(),
                _ => f64::MIN,
            };
            let mut st = db.prepare(
                "SELECT run, ts, until, data FROM tape WHERE until >= ?1 ORDER BY ts, rowid",
            )?;
            for row in st.query_map([from], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, f64>(1)?,
                    row.get::<_, f64>(2)?,
                    row.get::<_, Vec<u8>>(3)?,
                ))
            })? {
                let (run, ts, until, data) = row?;
                match tape::decode(ts, &data) {
                    Some(d) => r.rows.push(Row { run, ts, until, d }),
                    None => r.damaged.push((ts, until)),
                }
            }
        }
        let (from, to) = r.span().unwrap_or((0.0, 0.0));
        let mut st = db.prepare(
            "SELECT ts, kind, rule, state, cause FROM events WHERE kind IN ('rule', 'write', 'start', 'stop') AND ts >= ?1 AND ts <= ?2 ORDER BY ts, rowid",
        )?;
        for e in st.query_map([from - 1.0, to + 1.0], |row| {
            Ok((
                row.get::<_, f64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, Option<String>>(2)?,
                row.get::<_, Option<String>>(3)?,
                row.get::<_, Option<String>>(4)?,
            ))
        })? {
            match e? {
                (ts, kind, Some(rule), Some(state), _) if kind == "rule" => {
                    r.rule_events.push((ts, rule, state))
                }
                (ts, kind, _, _, Some(cause)) if kind == "write" => {
                    r.write_causes.push((ts, cause))
                }
                // A daemon start or stop ends every episode.
                (ts, kind, ..) if kind == "start" || kind == "stop" => {
                    r.rule_events.push((ts, String::new(), kind))
                }
                _ => {}
            }
        }
        let mut st = db.prepare(
            "SELECT knob, old FROM events WHERE kind = 'write' AND knob IS NOT NULL AND old IS NOT NULL ORDER BY ts DESC, rowid DESC",
        )?;
        for e in st.query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
        })? {
            let (knob, old) = e?;
            r.originals.insert(knob, old); // the earliest wins: read last
        }
        Ok(r)
    }

    /// The first and last taped evaluation.
    pub(crate) fn span(&self) -> Option<(f64, f64)> {
        let from = self
            .rows
            .iter()
            .filter_map(|r| r.d.evals.first())
            .copied()
            .reduce(f64::min)?;
        let to = self
            .rows
            .iter()
            .filter_map(|r| r.d.evals.last())
            .copied()
            .reduce(f64::max)?;
        Some((from, to))
    }

    /// The recorder's interval, as the tape rows are spaced (their median);
    /// 1 s when there are too few rows to tell.
    pub(crate) fn interval(&self) -> f64 {
        let mut d: Vec<f64> = self
            .rows
            .windows(2)
            .map(|w| w[1].ts - w[0].ts)
            .filter(|d| *d > 0.0)
            .collect();
        d.sort_by(f64::total_cmp);
        d.get(d.len() / 2).copied().unwrap_or(1.0).max(1.0)
    }
}

/// A firing episode.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Episode {
    pub(crate) start: f64,
    /// `None`: still active when the replay (or the run) ended.
    pub(crate) end: Option<f64>,
    pub(crate) why: String,
}

/// An input a rule reads that the tape lacks for a while.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Gap {
    pub(crate) rule: String,
    pub(crate) input: String,
    pub(crate) from: f64,
    pub(crate) to: f64,
}

/// Something the engine would have done.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Action {
    pub(crate) ts: f64,
    pub(crate) rule: Option<String>,
    /// `write`, `hook`, `compact`, `freeze`, `kill`, `failed`.
    pub(crate) kind: &'static str,
    pub(crate) what: String,
}

/// One rule's replay.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct RuleOut {
    pub(crate) name: String,
    pub(crate) episodes: Vec<Episode>,
    pub(crate) active_seconds: f64,
    pub(crate) writes: usize,
    pub(crate) hooks: usize,
}

impl RuleOut {
    pub(crate) fn firings(&self) -> usize {
        self.episodes.len()
    }
}

/// What the engine would have done over the recording.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Outcome {
    pub(crate) from: f64,
    pub(crate) to: f64,
    pub(crate) evaluations: usize,
    pub(crate) rules: Vec<RuleOut>,
    pub(crate) actions: Vec<Action>,
    pub(crate) gaps: Vec<Gap>,
    /// Tape rows that could not be decoded: `(from, until)`.
    pub(crate) damaged: Vec<(f64, f64)>,
    /// Metrics the engine found unavailable in the taped values themselves
    /// (the daemon could not read them either): `(rule, metric)`.
    pub(crate) unavailable: Vec<(String, String)>,
    /// Each written knob's timeline: `(ts, value)` as the policy writes it.
    pub(crate) knobs: BTreeMap<String, Vec<(f64, String)>>,
}

/// The inputs of a policy by name.
struct Plan {
    /// Per rule: the names of the inputs its condition reads.
    rule_inputs: Vec<Vec<String>>,
    /// The stall lines (`X.total` name and key).
    totals: Vec<(String, StallKey)>,
    /// Kernel trigger names of the policy's stall conditions.
    triggers: HashMap<String, (StallKey, Duration)>,
}

impl Plan {
    fn of(policy: &Policy) -> Plan {
        let mut totals = BTreeMap::new();
        let mut triggers = HashMap::new();
        let rule_inputs = policy
            .rules
            .iter()
            .map(|r| {
                let mut leaves: BTreeMap<String, Leaf> = BTreeMap::new();
                tape::expr_leaves(&r.when, &mut leaves);
                for l in leaves.values() {
                    if let Query::Total(k) = &l.query {
                        totals.insert(l.name.clone(), k.clone());
                    }
                }
                stall_windows(&r.when, &mut triggers);
                // Whether a trigger was armed is a hint, not an input: a
                // recording without it is no gap.
                leaves
                    .into_keys()
                    .filter(|n| !n.starts_with("armed("))
                    .collect()
            })
            .collect();
        Plan {
            rule_inputs,
            totals: totals.into_iter().collect(),
            triggers,
        }
    }
}

/// The trigger names of the stall conditions in `expr`.
fn stall_windows(expr: &Expr, out: &mut HashMap<String, (StallKey, Duration)>) {
    for e in expr.leaves() {
        if let ExprKind::Compare(c) = &e.kind {
            if let (
                Metric::PsiStall {
                    target,
                    resource,
                    stall,
                },
                Threshold::StallTime { window, .. },
            ) = (&c.metric, &c.value)
            {
                let key = StallKey::of(&target.value, *resource, *stall);
                out.insert(tape::trigger_name(&key, window.0), (key, window.0));
            }
        }
    }
}

/// The taped values as the engine's metrics.
struct Inputs<'a> {
    vals: &'a HashMap<String, (Option<i64>, f64)>,
    stall: &'a StallHistory,
    now: Time,
}

impl Inputs<'_> {
    fn int(&self, name: &str) -> Option<i64> {
        self.vals.get(name).and_then(|v| v.0)
    }
    fn uint(&self, name: &str) -> Option<u64> {
        self.int(name).and_then(|v| u64::try_from(v).ok())
    }
    fn real(&self, name: &str) -> Option<f64> {
        let (v, scale) = self.vals.get(name)?;
        Some(*v.as_ref()? as f64 / scale)
    }
    fn flag(&self, name: &str) -> Option<bool> {
        self.int(name).map(|v| v != 0)
    }
}

impl Metrics for Inputs<'_> {
    fn psi_avg(&self, target: &Target, res: Resource, stall: Stall, avg: Avg) -> Option<f64> {
        self.real(&format!("{target}.{res}.{stall}.{avg}"))
    }
    fn psi_stall(
        &self,
        target: &Target,
        res: Resource,
        stall: Stall,
        window: Duration,
    ) -> Option<Duration> {
        let key = StallKey::of(target, res, stall);
        // As the daemon; the armed trigger as the tape recorded it.
        let armed = self.flag(&tape::armed_name(&key)) == Some(true);
        self.stall.condition_stall(&key, self.now, window, armed)
    }
    fn psi_stall_silent_from(
        &self,
        target: &Target,
        res: Resource,
        stall: Stall,
        window: Duration,
    ) -> Option<Time> {
        let key = StallKey::of(target, res, stall);
        let armed = self.flag(&tape::armed_name(&key)) == Some(true);
        self.stall.silent_from(&key, window, armed)
    }
    fn memory_current(&self, group: &str) -> Option<u64> {
        self.uint(&format!("{group}.memory.current"))
    }
    fn swap_current(&self, group: &str) -> Option<u64> {
        self.uint(&format!("{group}.memory.swap.current"))
    }
    fn memory_event(&self, group: &str, ev: MemEvent) -> Option<u64> {
        self.uint(&format!("{group}.memory.events.{ev}"))
    }
    fn pids_current(&self, group: &str) -> Option<u64> {
        self.uint(&format!("{group}.pids.current"))
    }
    fn populated(&self, group: &str) -> Option<bool> {
        self.flag(&format!("{group}.cgroup.populated"))
    }
    fn memory_available(&self) -> Option<u64> {
        self.uint("host.memory.available")
    }
    fn thermal_millic(&self, zone: &str) -> Option<i64> {
        self.int(&format!("thermal.{zone}.temp"))
    }
    fn running(&self, pattern: &str) -> bool {
        self.flag(&format!("running({pattern})")).unwrap_or(false)
    }
    fn memstat(&self, m: &crate::policy::expr::MemMetric) -> Option<f64> {
        self.real(&m.to_string())
    }
    fn exists(&self, group: &str) -> bool {
        self.flag(&format!("exists({group})")).unwrap_or(false)
    }
    fn thermal_trip_millic(&self, zone: &str, trip: u32) -> Option<i64> {
        self.int(&format!("thermal.{zone}.trip.{trip}"))
    }
    fn cooling_state(&self, device: &str) -> Option<u64> {
        self.uint(&format!("cooling.{device}.state"))
    }
    fn cpufreq_khz(&self, policy: &str, limit: bool) -> Option<u64> {
        self.uint(&format!(
            "cpufreq.{policy}.{}",
            if limit { "limit" } else { "cur" }
        ))
    }
    fn throttled(&self, policy: &str) -> Option<bool> {
        self.flag(&format!("throttled({policy})"))
    }
}

/// A new engine for `policy`, its knobs without a policy baseline seeded
/// with the originals the recording shows (as the daemon seeds them from
/// its journal); a knob never written in the recording stays unseeded.
fn engine(policy: &Policy, rec: &Recording) -> Supervisor {
    let mut sup = Supervisor::new(policy);
    for knob in crate::engine::supervisor::rule_knobs(policy) {
        let Some(v) = rec
            .originals
            .get(&knob.to_string())
            .and_then(|t| knob.parse_value(t).ok())
        else {
            continue;
        };
        sup.seed(&knob, v.clone(), Some(v));
    }
    sup
}

/// The simulation's running state.
struct Sim<'p> {
    policy: &'p Policy,
    index: HashMap<&'p str, usize>,
    out: Outcome,
    sup: Supervisor,
    stall: StallHistory,
    vals: HashMap<String, (Option<i64>, f64)>,
    t0: f64,
    last: Time,
    reported: HashSet<(String, String)>,
}

impl<'p> Sim<'p> {
    fn now(&self, ts: f64) -> Time {
        // A hostile or broken clock in the database (a jump of centuries,
        // an infinity) is held at a century, never a panic.
        let secs = (ts - self.t0).clamp(0.0, 3.2e9);
        Duration::try_from_secs_f64(secs)
            .unwrap_or_default()
            .max(self.last)
    }

    fn step(&mut self, ts: f64, now: Time) {
        self.last = now;
        let inputs = Inputs {
            vals: &self.vals,
            stall: &self.stall,
            now,
        };
        let effects = self.sup.step(self.policy, now, &inputs, &|_| None);
        self.effects(ts, effects);
    }

    fn effects(&mut self, ts: f64, effects: Vec<Effect>) {
        for e in effects {
            let (rule, kind, what) = match e {
                Effect::Phase { rule, phase } => {
                    let Some(&i) = self.index.get(rule.as_str()) else {
                        continue;
                    };
                    let r = &mut self.out.rules[i];
                    let open = r.episodes.last().is_some_and(|e| e.end.is_none());
                    if phase.is_active() && !open {
                        let why = self.sup.fired_reason(i).unwrap_or_default();
                        r.episodes.push(Episode {
                            start: ts,
                            end: None,
                            why,
                        });
                    } else if !phase.is_active() && open {
                        close(r, ts);
                    }
                    continue;
                }
                Effect::Write(w) => {
                    let rule = match &w.cause {
                        crate::engine::knobs::Cause::Owner(
                            crate::engine::claims::Owner::Rule { name, .. },
                        )
                        | crate::engine::knobs::Cause::Release(
                            crate::engine::claims::Owner::Rule { name, .. },
                        ) => Some(name.clone()),
                        _ => None,
                    };
                    self.out
                        .knobs
                        .entry(w.knob.to_string())
                        .or_default()
                        .push((ts, w.knob.render(&w.new)));
                    let old = w.old.map(|o| o.to_string()).unwrap_or_else(|| "-".into());
                    (
                        rule,
                        "write",
                        format!("{} = {} (was {old}; {})", w.knob, w.new, w.cause),
                    )
                }
                Effect::Hook {
                    hook, rule, event, ..
                } => (Some(rule), "hook", format!("{hook} {}", event.as_str())),
                Effect::CompactMemory { rule } => (Some(rule), "compact", "compact memory".into()),
                Effect::Freeze {
                    rule,
                    group,
                    freeze,
                    ..
                } => (
                    Some(rule),
                    "freeze",
                    format!("{} {group}", if freeze { "freeze" } else { "thaw" }),
                ),
                Effect::Kill { rule, spec, .. } => (Some(rule), "kill", spec.to_string()),
                Effect::ActionFailed {
                    rule,
                    action,
                    reason,
                } => (Some(rule), "failed", format!("{action}: {reason}")),
                Effect::Unavailable { rule, metric, .. } => {
                    if self.reported.insert((rule.clone(), metric.clone())) {
                        self.out.unavailable.push((rule, metric));
                    }
                    continue;
                }
            };
            if let Some(i) = rule.as_deref().and_then(|r| self.index.get(r)) {
                match kind {
                    "write" => self.out.rules[*i].writes += 1,
                    "hook" => self.out.rules[*i].hooks += 1,
                    _ => {}
                }
            }
            self.out.actions.push(Action {
                ts,
                rule,
                kind,
                what,
            });
        }
    }

    /// A daemon stop: open episodes end at its last evaluation; the next
    /// run starts a new engine.
    fn restart(&mut self, at: f64, rec: &Recording) {
        for r in &mut self.out.rules {
            if r.episodes.last().is_some_and(|e| e.end.is_none()) {
                close(r, at);
            }
        }
        self.sup = engine(self.policy, rec);
        self.stall = StallHistory::new();
        self.vals.clear();
    }
}

fn close(r: &mut RuleOut, at: f64) {
    if let Some(e) = r.episodes.last_mut() {
        e.end = Some(at);
        r.active_seconds += (at - e.start).max(0.0);
    }
}

/// Runs `policy` over the recording.
pub(crate) fn simulate(policy: &Policy, rec: &Recording) -> Outcome {
    let plan = Plan::of(policy);
    let (from, to) = rec.span().unwrap_or((0.0, 0.0));
    let mut sim = Sim {
        policy,
        index: policy
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| (r.name.as_str(), i))
            .collect(),
        out: Outcome {
            from,
            to,
            rules: policy
                .rules
                .iter()
                .map(|r| RuleOut {
                    name: r.name.clone(),
                    ..Default::default()
                })
                .collect(),
            damaged: rec.damaged.clone(),
            ..Default::default()
        },
        sup: engine(policy, rec),
        stall: StallHistory::new(),
        vals: HashMap::new(),
        t0: from,
        last: Duration::ZERO,
        reported: HashSet::new(),
    };
    // Open gaps: (rule, input) -> index in out.gaps, and the row it reached.
    let mut open: HashMap<(usize, String), (usize, usize)> = HashMap::new();
    let mut run = None;
    let mut last_ts = from;
    for (ri, row) in rec.rows.iter().enumerate() {
        if run.is_some() && run != Some(row.run) {
            sim.restart(last_ts, rec);
        }
        run = Some(row.run);
        let names: HashMap<i64, &(String, f64)> = row
            .d
            .watched
            .iter()
            .filter_map(|id| Some((*id, rec.keys.get(id)?)))
            .collect();
        let watched: HashSet<&str> = names.values().map(|(n, _)| n.as_str()).collect();
        sim.vals.retain(|k, _| watched.contains(k.as_str()));
        for (i, inputs) in plan.rule_inputs.iter().enumerate() {
            for input in inputs.iter().filter(|n| !watched.contains(n.as_str())) {
                match open.get_mut(&(i, input.clone())) {
                    Some((g, reached)) if *reached + 1 == ri => {
                        sim.out.gaps[*g].to = row.until;
                        *reached = ri;
                    }
                    _ => {
                        open.insert((i, input.clone()), (sim.out.gaps.len(), ri));
                        sim.out.gaps.push(Gap {
                            rule: policy.rules[i].name.clone(),
                            input: input.clone(),
                            from: row.ts,
                            to: row.until,
                        });
                    }
                }
            }
        }
        // Per evaluation: value changes and trigger firings.
        let n = row.d.evals.len();
        let mut changes: Vec<Vec<(&str, f64, Option<i64>)>> = vec![Vec::new(); n];
        let mut fired: Vec<Vec<(&StallKey, Duration, i64)>> = vec![Vec::new(); n];
        for (id, entries) in &row.d.series {
            let Some((name, scale)) = rec.keys.get(id) else {
                continue;
            };
            if name.starts_with("trigger(") {
                let Some((key, window)) = plan.triggers.get(name) else {
                    continue;
                };
                for (idx, v) in entries {
                    if let (Some(slot), Some(v)) = (fired.get_mut(*idx as usize), v) {
                        slot.push((key, *window, *v));
                    }
                }
            } else if watched.contains(name.as_str()) {
                for (idx, v) in entries {
                    if let Some(slot) = changes.get_mut(*idx as usize) {
                        slot.push((name, *scale, *v));
                    }
                }
            }
        }
        for (i, ts) in row.d.evals.iter().enumerate() {
            let now = sim.now(*ts);
            // The engine's own deadlines before this evaluation (bounded).
            for _ in 0..1000 {
                match sim.sup.next_deadline() {
                    Some(d) if d > sim.last && d + Duration::from_millis(5) < now => {
                        let at = sim.t0 + d.as_secs_f64();
                        sim.step(at, d);
                    }
                    _ => break,
                }
            }
            for (name, scale, v) in &changes[i] {
                sim.vals.insert((*name).to_string(), (*v, *scale));
            }
            for (name, key) in &plan.totals {
                let Some(total) = sim
                    .vals
                    .get(name)
                    .and_then(|v| v.0)
                    .and_then(|v| u64::try_from(v).ok())
                else {
                    continue;
                };
                match fired[i].iter().find(|f| f.0 == key) {
                    Some((_, window, us)) => {
                        let amount = Duration::from_micros(u64::try_from(*us).unwrap_or(0));
                        sim.stall.record_trigger(key, now, total, amount, *window)
                    }
                    None => sim.stall.record(key, now, total),
                };
            }
            sim.step(*ts, now);
            sim.out.evaluations += 1;
            last_ts = *ts;
        }
    }
    for r in &mut sim.out.rules {
        if let Some(e) = r.episodes.last().filter(|e| e.end.is_none()) {
            r.active_seconds += (to - e.start).max(0.0);
        }
    }
    sim.out
}

/// The recorded policy's episodes of each rule, from the `rule` events.
pub(crate) fn recorded_episodes(rec: &Recording) -> BTreeMap<String, Vec<(f64, Option<f64>)>> {
    let mut out: BTreeMap<String, Vec<(f64, Option<f64>)>> = BTreeMap::new();
    for (ts, rule, state) in &rec.rule_events {
        if rule.is_empty() {
            for e in out
                .values_mut()
                .filter_map(|e| e.last_mut())
                .filter(|e| e.1.is_none())
            {
                e.1 = Some(*ts);
            }
            continue;
        }
        let eps = out.entry(rule.clone()).or_default();
        let open = eps.last().is_some_and(|e| e.1.is_none());
        let active = state == "active" || state == "clearing";
        if active && !open {
            eps.push((*ts, None));
        } else if !active && open {
            if let Some(e) = eps.last_mut() {
                e.1 = Some(*ts);
            }
        }
    }
    out
}

/// One rule's diff against the recording.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct RuleDiff {
    pub(crate) rule: String,
    pub(crate) recorded: usize,
    pub(crate) replayed: usize,
    /// Episodes that start within one recorder interval of each other.
    pub(crate) matched: usize,
    /// Starts only the replay has / only the recording has.
    pub(crate) only_replay: Vec<f64>,
    pub(crate) only_recording: Vec<f64>,
    /// Matched episodes that end more than one recorder interval apart
    /// (or one still active at the end and the other not): the start, and
    /// the replayed end minus the recorded one in seconds (`None`: one of
    /// them never ended). A lower threshold that holds a rule longer shows
    /// here.
    pub(crate) ends_apart: Vec<(f64, Option<f64>)>,
    pub(crate) recorded_writes: usize,
    pub(crate) replayed_writes: usize,
}

/// The rule a recorded write's cause names (`rule NAME`, `rule NAME
/// released`, `rule NAME expired`).
fn cause_rule(cause: &str) -> Option<&str> {
    let c = cause.strip_prefix("rule ")?;
    Some(
        c.strip_suffix(" released")
            .or_else(|| c.strip_suffix(" expired"))
            .unwrap_or(c),
    )
}

/// The diff of `out` against what the recording says happened.
pub(crate) fn diff(out: &Outcome, rec: &Recording) -> Vec<RuleDiff> {
    let tol = rec.interval();
    let recorded = recorded_episodes(rec);
    let mut names: Vec<&str> = out.rules.iter().map(|r| r.name.as_str()).collect();
    names.extend(
        recorded
            .keys()
            .map(String::as_str)
            .filter(|n| !out.rules.iter().any(|r| r.name == *n)),
    );
    names
        .into_iter()
        .map(|name| {
            let rep: Vec<(f64, Option<f64>)> = out
                .rules
                .iter()
                .find(|r| r.name == name)
                .map(|r| r.episodes.iter().map(|e| (e.start, e.end)).collect())
                .unwrap_or_default();
            let mut recd: Vec<(f64, Option<f64>)> = recorded.get(name).cloned().unwrap_or_default();
            let mut d = RuleDiff {
                rule: name.to_string(),
                recorded: recd.len(),
                replayed: rep.len(),
                recorded_writes: rec
                    .write_causes
                    .iter()
                    .filter(|(_, c)| cause_rule(c) == Some(name))
                    .count(),
                replayed_writes: out
                    .rules
                    .iter()
                    .find(|r| r.name == name)
                    .map_or(0, |r| r.writes),
                ..Default::default()
            };
            for (s, end) in rep {
                match recd.iter().position(|r| (r.0 - s).abs() <= tol) {
                    Some(p) => {
                        let (_, rec_end) = recd.remove(p);
                        d.matched += 1;
                        let apart = match (end, rec_end) {
                            (Some(a), Some(b)) => ((a - b).abs() > tol).then_some(Some(a - b)),
                            (None, None) => None,
                            _ => Some(None),
                        };
                        d.ends_apart.extend(apart.map(|delta| (s, delta)));
                    }
                    None => d.only_replay.push(s),
                }
            }
            d.only_recording = recd.into_iter().map(|r| r.0).collect();
            d
        })
        .collect()
}
