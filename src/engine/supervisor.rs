//! One evaluation step of all rules (SPEC §3 "Semantics"), as a pure
//! function of time and a metrics snapshot: conditions are evaluated, rule
//! states advance, `then` actions change baselines, `while` actions become
//! claims, and the result is a list of effects — knob writes with their
//! cause, hooks to run, `compact memory` requests — for the daemon to carry
//! out. The daemon owns all I/O; everything here is deterministic, so it is
//! tested on a simulated clock.

use super::claims::Owner;
use super::condition::{Evaluator, Metrics, Subject};
use super::knobs::{Cause, KnobTable, Write};
use super::rule_state::{Phase, RuleState, Time, Timing, Transition};
use crate::knobs::{CpufreqAttr, Knob, KnobValue, ZramAttr};
use crate::policy::expr::Action;
use crate::policy::model::group_baseline;
use crate::policy::model::Policy;
use std::collections::HashMap;

/// Whether a hook runs because its rule fired or cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    Fired,
    Cleared,
}

impl HookEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::Fired => "fired",
            HookEvent::Cleared => "cleared",
        }
    }
}

/// Something the daemon must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Write a knob; `old` is the value cgwarden last wrote, if any.
    Write(Write),
    /// Run hook `hook` for `rule`.
    Hook {
        hook: String,
        rule: String,
        event: HookEvent,
        metric: String,
        value: String,
        threshold: String,
        group: String,
        /// A `while` hook: its `cleared` follows its `fired` (the hook
        /// runner never splits the pair); `then` hooks are not paired.
        paired: bool,
    },
    /// Write 1 to /proc/sys/vm/compact_memory.
    CompactMemory { rule: String },
    /// A rule changed phase (for the log and status).
    Phase { rule: String, phase: Phase },
    /// A `then` action could not be carried out (no value to step from…).
    ActionFailed {
        rule: String,
        action: String,
        reason: String,
    },
    /// A metric a rule reads is unavailable; reported once per metric (the
    /// first rule that reads it is named), again only after that rule has
    /// evaluated with every metric available.
    Unavailable {
        rule: String,
        metric: String,
        /// Where the metric is read from (`/sys/fs/cgroup/app/memory.current`).
        source: String,
        reason: String,
    },
}

/// What the rule last fired with, for the `cleared` hooks.
#[derive(Debug, Clone, Default)]
struct FiredWith {
    metric: String,
    value: String,
    threshold: String,
    group: String,
}

#[derive(Debug)]
struct RuleRuntime {
    state: RuleState,
    timing: Timing,
    fired: FiredWith,
}

/// The daemon's rule engine: rule states, the knob table and the evaluator.
#[derive(Debug)]
pub struct Supervisor {
    rules: Vec<RuleRuntime>,
    evaluator: Evaluator,
    table: KnobTable,
    /// Metrics already reported unavailable, with the rule that reported
    /// each (a 5,000-rule policy reading one missing file says so once).
    reported: HashMap<String, String>,
    /// The time of the last step (event windows expire relative to it).
    last_step: Time,
}

/// Where `m` is read from, for the "metric unavailable" report.
pub fn metric_source(m: &crate::policy::expr::Metric, cgroup_root: &std::path::Path) -> String {
    use crate::policy::expr::{Metric, Target};
    let group = |g: &str, file: &str| cgroup_root.join(g).join(file).display().to_string();
    match m {
        Metric::PsiAvg {
            target, resource, ..
        }
        | Metric::PsiStall {
            target, resource, ..
        } => match &target.value {
            Target::System => format!("/proc/pressure/{resource}"),
            Target::Group(g) => group(g, &format!("{resource}.pressure")),
        },
        Metric::MemoryCurrent { group: g } => group(&g.value, "memory.current"),
        Metric::SwapCurrent { group: g } => group(&g.value, "memory.swap.current"),
        Metric::MemoryEvent { group: g, .. } => group(&g.value, "memory.events"),
        Metric::PidsCurrent { group: g } => group(&g.value, "pids.current"),
        Metric::Populated { group: g } => group(&g.value, "cgroup.events"),
        Metric::MemoryAvailable => "/proc/meminfo (MemAvailable)".to_string(),
        Metric::ThermalTemp { zone } => format!(
            "/sys/class/thermal/thermal_zone*/temp (the zone whose type is `{}`)",
            zone.value
        ),
    }
}

/// The knobs a policy sets as baseline, in the closed knob set's terms.
pub fn policy_baselines(p: &Policy) -> Vec<(Knob, KnobValue)> {
    let mut out = Vec::new();
    for g in p.all_groups() {
        for (knob, value) in group_baseline(g) {
            out.push((
                Knob::Group {
                    group: g.name.clone(),
                    knob,
                },
                value,
            ));
        }
    }
    for c in &p.system.cpufreq {
        let k = |attr| Knob::Cpufreq {
            policy: c.policy.clone(),
            attr,
        };
        if let Some(gov) = &c.governor {
            out.push((k(CpufreqAttr::Governor), KnobValue::Word(gov.clone())));
        }
        if let Some(f) = &c.min {
            out.push((k(CpufreqAttr::Min), KnobValue::Frequency(*f)));
        }
        if let Some(f) = &c.max {
            out.push((k(CpufreqAttr::Max), KnobValue::Frequency(*f)));
        }
    }
    for (name, value) in &p.system.sysctl {
        if let Ok(v) = value.parse::<i64>() {
            out.push((Knob::Sysctl(name.clone()), KnobValue::Int(v)));
        }
    }
    for z in &p.system.zram {
        if let Some(l) = &z.mem_limit {
            out.push((
                Knob::Zram {
                    device: z.device.clone(),
                    attr: ZramAttr::MemLimit,
                },
                KnobValue::Size(*l),
            ));
        }
        if let Some(pr) = z.swap_priority {
            out.push((
                Knob::Zram {
                    device: z.device.clone(),
                    attr: ZramAttr::SwapPriority,
                },
                KnobValue::Int(i64::from(pr)),
            ));
        }
    }
    if let Some(l) = &p.system.latency {
        for (cpu, us) in &l.cpus {
            out.push((Knob::LatencyCpu(*cpu), KnobValue::Latency(Some(*us))));
        }
        if let Some(us) = l.global {
            out.push((Knob::LatencyGlobal, KnobValue::Latency(Some(us))));
        }
    }
    out
}

/// Every knob a rule's actions name.
pub fn rule_knobs(p: &Policy) -> Vec<Knob> {
    let mut out: Vec<Knob> = p
        .rules
        .iter()
        .flat_map(|r| r.then.iter().chain(&r.while_))
        .filter_map(|a| a.knob().cloned())
        .collect();
    out.sort();
    out.dedup();
    out
}

impl Supervisor {
    /// A supervisor for `policy`. The policy's baselines are recorded as
    /// already written: `apply` (or the daemon's startup convergence) wrote
    /// them, so nothing is written until a rule acts.
    pub fn new(policy: &Policy) -> Self {
        let mut table = KnobTable::new();
        for (knob, value) in policy_baselines(policy) {
            table.set_policy_baseline(&knob, Some(value.clone()));
            // `apply` wrote the rest at startup; a held request is made by
            // the first step (the actuator opens it).
            if !knob.held_by_daemon() {
                table.mark_written(&knob, value);
            }
        }
        Supervisor {
            rules: policy
                .rules
                .iter()
                .map(|r| RuleRuntime {
                    state: RuleState::new(),
                    timing: Timing::of(r),
                    fired: FiredWith::default(),
                })
                .collect(),
            evaluator: Evaluator::new(),
            table,
            reported: HashMap::new(),
            last_step: Time::ZERO,
        }
    }

    /// Sets the baseline of a knob the policy does not set (the value a
    /// released claim returns to): its original from the journal, or what the
    /// kernel held when cgwarden first saw it. `live` is what the kernel holds
    /// now; when it differs (a crashed predecessor left a claim behind), the
    /// next step writes the baseline back.
    pub fn seed(&mut self, knob: &Knob, baseline: KnobValue, live: Option<KnobValue>) {
        if self.table.baseline(knob).is_none() {
            self.table.seed(knob, baseline.clone());
            self.table.mark_written(knob, live.unwrap_or(baseline));
        }
    }

    /// Records that `value` was written to `knob` outside a step (a repair
    /// rewrote a recreated group's baseline).
    pub fn mark_written(&mut self, knob: &Knob, value: KnobValue) {
        self.table.mark_written(knob, value);
    }

    /// The baselines of `group`'s knobs, in write order.
    pub fn group_baselines(&self, group: &str) -> Vec<(Knob, KnobValue)> {
        self.table
            .knobs()
            .filter(|k| k.group() == Some(group))
            .filter_map(|k| Some((k.clone(), self.table.baseline(k)?.clone())))
            .collect()
    }

    pub fn table(&self) -> &KnobTable {
        &self.table
    }

    /// Forget what was written to a group's knobs (it was recreated), so
    /// the next step writes them again.
    pub fn invalidate_group(&mut self, group: &str) {
        self.table.invalidate_group(group);
    }

    /// Evaluates every rule at `now`. `current` reads a knob from the kernel,
    /// for `raise`/`lower` of a knob without baseline.
    pub fn step<M: Metrics + ?Sized>(
        &mut self,
        policy: &Policy,
        now: Time,
        metrics: &M,
        current: &dyn Fn(&Knob) -> Option<KnobValue>,
    ) -> Vec<Effect> {
        let mut effects = Vec::new();
        self.last_step = now;
        for (index, rule) in policy.rules.iter().enumerate() {
            let Some(rt) = self.rules.get_mut(index) else {
                continue;
            };
            let eval = self
                .evaluator
                .evaluate_rule(rule, now, policy.settings.tick, metrics);
            for u in &eval.unavailable {
                let (metric, source) = match u.subject {
                    Subject::Metric(m) => (
                        m.to_string(),
                        metric_source(m, &policy.settings.cgroup_root),
                    ),
                    Subject::TooDeep => (
                        format!("expression of rule `{}`", rule.name),
                        "the rule's condition".to_string(),
                    ),
                };
                if !self.reported.contains_key(&metric) {
                    self.reported.insert(metric.clone(), rule.name.clone());
                    effects.push(Effect::Unavailable {
                        rule: rule.name.clone(),
                        metric,
                        source,
                        reason: u.reason.to_string(),
                    });
                }
            }
            if eval.unavailable.is_empty() {
                self.reported.retain(|_, r| r != &rule.name);
            }
            if let Some(t) = &eval.trigger {
                if eval.value {
                    rt.fired = FiredWith {
                        metric: t.metric(),
                        value: t.value(),
                        threshold: t.threshold(),
                        group: t.group().unwrap_or("").to_string(),
                    };
                }
            }
            let before = rt.state.phase();
            let transitions = rt.state.update(now, eval.value, &rt.timing);
            // The owner (and its name string) is only built when something happens.
            let owner = match transitions.is_empty() {
                true => None,
                false => Some(Owner::Rule {
                    index,
                    name: rule.name.clone(),
                }),
            };
            for (t, owner) in transitions
                .iter()
                .filter_map(|t| Some((t, owner.as_ref()?)))
            {
                match t {
                    Transition::Fired => {
                        run_then(
                            &mut self.table,
                            rule,
                            &rt.fired,
                            owner,
                            current,
                            &mut effects,
                        );
                        let claims: Vec<(Knob, KnobValue)> = rule
                            .while_
                            .iter()
                            .filter_map(|a| match a {
                                Action::Set { knob, value } => Some((knob.clone(), value.clone())),
                                _ => None,
                            })
                            .collect();
                        self.table.set_claims(owner, claims, None);
                        hooks(
                            rule.while_.iter(),
                            rule,
                            &rt.fired,
                            HookEvent::Fired,
                            &mut effects,
                        );
                    }
                    Transition::Repeat => {
                        run_then(
                            &mut self.table,
                            rule,
                            &rt.fired,
                            owner,
                            current,
                            &mut effects,
                        );
                    }
                    Transition::Cleared => {
                        self.table.release(owner);
                        hooks(
                            rule.while_.iter(),
                            rule,
                            &rt.fired,
                            HookEvent::Cleared,
                            &mut effects,
                        );
                    }
                    Transition::Pending | Transition::Cancelled => {}
                }
            }
            let after = rt.state.phase();
            if after != before {
                effects.push(Effect::Phase {
                    rule: rule.name.clone(),
                    phase: after,
                });
            }
        }
        effects.extend(
            self.table
                .pending_writes(now)
                .into_iter()
                .map(Effect::Write),
        );
        effects
    }

    /// A policy reload (SPEC §4 "Reload"): carries the engine from `old` to
    /// `new` without rolling anything back in between. Returns the hooks,
    /// phase changes and writes that makes.
    ///
    /// - Rules are matched by name. A kept rule keeps its state (phase,
    ///   since, pending `for`/`hold`/`cooldown`, what it fired with) even when
    ///   its text changed; its timing is the new rule's and its condition is
    ///   re-evaluated from the next step. If it is active, its claims are
    ///   re-issued under its new index (first-wins ranks by index) with its
    ///   new `while` values; knobs whose merged value stays are not written.
    /// - A removed rule's claims are released (knobs return to baseline) and,
    ///   if it was active, its `while` hooks run with `cleared`.
    /// - Baselines change only where the policy's value changed
    ///   ([`KnobTable::set_policy_baseline`]): a `then`-set baseline survives.
    /// - Boost claims stay while their knob exists in the new policy: a
    ///   boost on a knob of a group the new policy no longer has is released.
    pub fn reload(&mut self, old: &Policy, new: &Policy, now: Time) -> Vec<Effect> {
        let mut effects = Vec::new();
        let mut before: HashMap<String, (usize, RuleRuntime)> = HashMap::new();
        for ((index, rule), rt) in old.rules.iter().enumerate().zip(self.rules.drain(..)) {
            before.insert(rule.name.clone(), (index, rt));
        }
        let mut rules = Vec::with_capacity(new.rules.len());
        for (index, rule) in new.rules.iter().enumerate() {
            let Some((old_index, mut rt)) = before.remove(&rule.name) else {
                rules.push(RuleRuntime {
                    state: RuleState::new(),
                    timing: Timing::of(rule),
                    fired: FiredWith::default(),
                });
                continue;
            };
            rt.timing = Timing::of(rule);
            let old_owner = Owner::Rule {
                index: old_index,
                name: rule.name.clone(),
            };
            let new_owner = Owner::Rule {
                index,
                name: rule.name.clone(),
            };
            let had = self.table.claims().live().any(|c| c.owner == old_owner);
            let old_sets = old.rules.get(old_index).map(while_sets).unwrap_or_default();
            let new_sets = while_sets(rule);
            let moved = old_index != index || old_sets != new_sets;
            if (had || rt.state.phase().is_active()) && moved {
                self.table.release(&old_owner);
                if rt.state.phase().is_active() {
                    self.table.set_claims(&new_owner, new_sets, None);
                }
            }
            rules.push(rt);
        }
        // Removed rules, in their old order (deterministic hooks).
        let mut gone: Vec<(usize, RuleRuntime)> = before.into_values().collect();
        gone.sort_by_key(|(i, _)| *i);
        for (index, rt) in gone {
            let Some(rule) = old.rules.get(index) else {
                continue;
            };
            self.table.release(&Owner::Rule {
                index,
                name: rule.name.clone(),
            });
            wind_down(rule, &rt.fired, rt.state.phase(), &mut effects);
            self.reported.retain(|_, r| r != &rule.name);
        }
        self.rules = rules;
        // Baselines: the new policy's values; knobs it no longer sets keep
        // their current baseline.
        let fresh: HashMap<Knob, KnobValue> = policy_baselines(new).into_iter().collect();
        for (knob, _) in policy_baselines(old) {
            if !fresh.contains_key(&knob) {
                self.table.set_policy_baseline(&knob, None);
            }
        }
        for (knob, value) in policy_baselines(new) {
            self.table.set_policy_baseline(&knob, Some(value));
        }
        // Boosts on knobs of groups that left the policy.
        let groups: std::collections::HashSet<&str> =
            new.all_groups().iter().map(|g| g.name.as_str()).collect();
        self.table.release_where(|c| {
            matches!(c.owner, Owner::Boost { .. })
                && c.knob.group().is_some_and(|g| !groups.contains(g))
        });
        effects.extend(
            self.table
                .pending_writes(now)
                .into_iter()
                .map(Effect::Write),
        );
        effects
    }

    /// Phase and since-when of each rule, by name (for a reload's diff).
    pub fn phases_by_name(&self, policy: &Policy) -> HashMap<String, (Phase, Option<Time>)> {
        policy
            .rules
            .iter()
            .zip(&self.rules)
            .map(|(r, rt)| (r.name.clone(), (rt.state.phase(), rt.state.since())))
            .collect()
    }

    /// Daemon shutdown: every active rule clears — its claims are released
    /// (knobs return to their baselines) and its `while` hooks run with
    /// `cleared`, as if its condition had gone — and every rule is idle
    /// afterwards. Returns the hooks, phase changes and writes that does.
    pub fn release_all(&mut self, policy: &Policy, now: Time) -> Vec<Effect> {
        let mut effects = Vec::new();
        for (index, rule) in policy.rules.iter().enumerate() {
            self.table.release(&Owner::Rule {
                index,
                name: rule.name.clone(),
            });
            let Some(rt) = self.rules.get_mut(index) else {
                continue;
            };
            let before = rt.state.phase();
            rt.state.reset();
            wind_down(rule, &rt.fired, before, &mut effects);
        }
        effects.extend(
            self.table
                .pending_writes(now)
                .into_iter()
                .map(Effect::Write),
        );
        effects
    }

    /// The earliest time a rule or claim changes state with no new input
    /// (end of a `for`, `hold` or `cooldown`, an event leaving its
    /// `memory.events` window), so the daemon can wake then.
    pub fn next_deadline(&self) -> Option<Time> {
        let rules = self
            .rules
            .iter()
            .filter_map(|r| r.state.next_deadline(&r.timing));
        rules
            .chain(self.table.claims().next_expiry())
            .chain(self.evaluator.next_expiry(self.last_step))
            .min()
    }

    /// Phase and since-when of each rule, in policy order.
    pub fn phases(&self) -> Vec<(Phase, Option<Time>)> {
        self.rules
            .iter()
            .map(|r| (r.state.phase(), r.state.since()))
            .collect()
    }

    /// A boost's claims (SPEC §5 "Boosts"), replacing any the handle held,
    /// until `deadline` (none: until released). Merged as §3: boosts rank
    /// before rules on first-wins knobs, the latest boost first.
    pub fn boost(&mut self, handle: u64, claims: Vec<(Knob, KnobValue)>, deadline: Option<Time>) {
        self.table
            .set_claims(&Owner::Boost { handle }, claims, deadline);
    }

    /// Ends a boost; false when it held no claim (expired already).
    pub fn release_boost(&mut self, handle: u64) -> bool {
        !self.table.release(&Owner::Boost { handle }).is_empty()
    }

    /// The writes claims changed outside a step (a boost granted, extended
    /// or released) make due, and claims expired by `now`.
    pub fn flush(&mut self, now: Time) -> Vec<Effect> {
        self.table
            .pending_writes(now)
            .into_iter()
            .map(Effect::Write)
            .collect()
    }
}

/// A rule's `while` claims, as `set_claims` takes them.
fn while_sets(rule: &crate::policy::model::Rule) -> Vec<(Knob, KnobValue)> {
    rule.while_
        .iter()
        .filter_map(|a| match a {
            Action::Set { knob, value } => Some((knob.clone(), value.clone())),
            _ => None,
        })
        .collect()
}

fn run_then(
    table: &mut KnobTable,
    rule: &crate::policy::model::Rule,
    fired: &FiredWith,
    owner: &Owner,
    current: &dyn Fn(&Knob) -> Option<KnobValue>,
    effects: &mut Vec<Effect>,
) {
    for a in &rule.then {
        match a {
            Action::Hook(name) => {
                effects.push(hook_effect(name, rule, fired, HookEvent::Fired, false))
            }
            Action::CompactMemory => effects.push(Effect::CompactMemory {
                rule: rule.name.clone(),
            }),
            _ => {
                if let Err(e) = table.apply_then(a, current, Cause::Owner(owner.clone())) {
                    effects.push(Effect::ActionFailed {
                        rule: rule.name.clone(),
                        action: a.to_string(),
                        reason: e.to_string(),
                    });
                }
            }
        }
    }
}

/// A rule taken out of service (the daemon stops, a reload removes it) in
/// `phase`: its `while` hooks get `cleared` if it was active, and it reads idle.
fn wind_down(
    rule: &crate::policy::model::Rule,
    fired: &FiredWith,
    phase: Phase,
    effects: &mut Vec<Effect>,
) {
    if phase.is_active() {
        hooks(rule.while_.iter(), rule, fired, HookEvent::Cleared, effects);
    }
    if phase != Phase::Idle {
        effects.push(Effect::Phase {
            rule: rule.name.clone(),
            phase: Phase::Idle,
        });
    }
}

fn hooks<'a>(
    actions: impl Iterator<Item = &'a Action>,
    rule: &crate::policy::model::Rule,
    fired: &FiredWith,
    event: HookEvent,
    effects: &mut Vec<Effect>,
) {
    for a in actions {
        if let Action::Hook(name) = a {
            effects.push(hook_effect(name, rule, fired, event, true));
        }
    }
}

fn hook_effect(
    name: &str,
    rule: &crate::policy::model::Rule,
    fired: &FiredWith,
    event: HookEvent,
    paired: bool,
) -> Effect {
    Effect::Hook {
        hook: name.to_string(),
        rule: rule.name.clone(),
        event,
        metric: fired.metric.clone(),
        value: fired.value.clone(),
        threshold: fired.threshold.clone(),
        group: fired.group.clone(),
        paired,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::expr::{Avg, MemEvent, Resource, Stall, Target};
    use crate::units::Size;
    use std::collections::HashMap;
    use std::time::Duration;

    #[derive(Default)]
    struct Snap {
        available: Option<u64>,
        psi: HashMap<String, f64>,
        events: HashMap<String, u64>,
        running: Vec<String>,
    }

    impl Metrics for Snap {
        fn psi_avg(&self, t: &Target, _: Resource, _: Stall, _: Avg) -> Option<f64> {
            self.psi.get(&t.to_string()).copied()
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
        fn memory_event(&self, g: &str, _: MemEvent) -> Option<u64> {
            self.events.get(g).copied()
        }
        fn pids_current(&self, _: &str) -> Option<u64> {
            None
        }
        fn populated(&self, _: &str) -> Option<bool> {
            None
        }
        fn memory_available(&self) -> Option<u64> {
            self.available
        }
        fn thermal_millic(&self, _: &str) -> Option<i64> {
            None
        }
        fn running(&self, p: &str) -> bool {
            self.running.iter().any(|r| r == p)
        }
        fn exists(&self, _: &str) -> bool {
            true
        }
    }

    fn policy(text: &str) -> Policy {
        crate::policy::load_bytes("t.yaml", text.as_bytes()).unwrap_or_else(|d| panic!("{d}"))
    }

    const BASE: &str = "version: 1\ngroups:\n  inference:\n    memory: { high: 8G, max: 10G }\nsystem:\n  sysctl: { vm.swappiness: 30 }\nhooks:\n  alert: { exec: [/bin/true] }\n";

    fn s(secs: u64) -> Time {
        Duration::from_secs(secs)
    }

    fn writes(effects: &[Effect]) -> Vec<(String, String, String)> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Write(w) => Some((w.knob.to_string(), w.new.kernel(), w.cause.to_string())),
                _ => None,
            })
            .collect()
    }

    fn no_current(_: &Knob) -> Option<KnobValue> {
        None
    }

    #[test]
    fn a_boost_outranks_a_rule_on_a_first_wins_knob_and_expires_to_the_rule() {
        let p = policy(&format!(
            "{BASE}rules:\n  - name: low-mem\n    when: system.memory.available < 512M\n    while: [\"set sysctl.vm.swappiness = 100\"]\n"
        ));
        let mut sup = Supervisor::new(&p);
        let m = Snap {
            available: Some(256 << 20),
            ..Default::default()
        };
        let sw = Knob::parse("sysctl.vm.swappiness").unwrap();
        let hi = Knob::parse("inference.memory.high").unwrap();
        assert_eq!(writes(&sup.step(&p, s(0), &m, &no_current)).len(), 1);
        // The operator's boost wins the first-wins sysctl over the active
        // rule; on memory.high its claim stands over the baseline.
        sup.boost(
            7,
            vec![
                (sw.clone(), KnobValue::Int(10)),
                (hi.clone(), KnobValue::Size(Size::Bytes(9 << 30))),
            ],
            Some(s(10)),
        );
        let w = writes(&sup.flush(s(1)));
        assert_eq!(
            w,
            vec![
                (
                    "inference.memory.high".into(),
                    (9u64 << 30).to_string(),
                    "boost 7".into()
                ),
                ("sysctl.vm.swappiness".into(), "10".into(), "boost 7".into()),
            ]
        );
        assert_eq!(sup.next_deadline(), Some(s(10)));
        // At its deadline the rule's claim is back in force, the baseline under the other.
        let w = writes(&sup.step(&p, s(10), &m, &no_current));
        assert_eq!(
            w,
            vec![
                (
                    "inference.memory.high".into(),
                    (8u64 << 30).to_string(),
                    "boost 7 expired".into()
                ),
                (
                    "sysctl.vm.swappiness".into(),
                    "100".into(),
                    "rule low-mem".into()
                ),
            ]
        );
        assert!(!sup.release_boost(7), "already expired");
    }

    #[test]
    fn while_claim_is_held_and_released_to_the_baseline() {
        let p = policy(&format!(
            "{BASE}rules:\n  - name: low-mem\n    when: system.memory.available < 512M\n    while: [\"set sysctl.vm.swappiness = 100\", \"hook alert\"]\n    hold: 2s\n"
        ));
        let mut sup = Supervisor::new(&p);
        let mut m = Snap {
            available: Some(1 << 30),
            ..Default::default()
        };
        assert!(
            writes(&sup.step(&p, s(0), &m, &no_current)).is_empty(),
            "baseline is already written"
        );
        m.available = Some(256 << 20);
        let eff = sup.step(&p, s(1), &m, &no_current);
        assert_eq!(
            writes(&eff),
            vec![(
                "sysctl.vm.swappiness".into(),
                "100".into(),
                "rule low-mem".into()
            )]
        );
        assert!(eff.iter().any(|e| matches!(e, Effect::Hook { hook, event: HookEvent::Fired, value, .. } if hook == "alert" && value == "268435456")), "{eff:?}");
        // No write while nothing changes.
        assert!(writes(&sup.step(&p, s(2), &m, &no_current)).is_empty());
        m.available = Some(1 << 30);
        // Within hold: still claimed.
        assert!(writes(&sup.step(&p, s(3), &m, &no_current)).is_empty());
        assert_eq!(sup.next_deadline(), Some(s(5)));
        let eff = sup.step(&p, s(5), &m, &no_current);
        let w = writes(&eff);
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(
            (w[0].0.as_str(), w[0].1.as_str()),
            ("sysctl.vm.swappiness", "30")
        );
        assert!(
            w[0].2.contains("low-mem"),
            "the cause names the released rule: {}",
            w[0].2
        );
        assert!(eff.iter().any(|e| matches!(
            e,
            Effect::Hook {
                event: HookEvent::Cleared,
                ..
            }
        )));
        assert_eq!(
            sup.table().effective(&Knob::Sysctl("vm.swappiness".into())),
            Some(KnobValue::Int(30))
        );
    }

    #[test]
    fn then_steps_repeat_every_cooldown_and_stop_at_the_limit() {
        let p = policy(&format!(
            "{BASE}rules:\n  - name: mem\n    when: inference.memory.some.avg10 > 10%\n    for: 2s\n    then: [\"raise inference.memory.high by 1G up to 10G\"]\n    cooldown: 10s\n"
        ));
        let mut sup = Supervisor::new(&p);
        let mut m = Snap::default();
        m.psi.insert("inference".into(), 50.0);
        assert!(
            writes(&sup.step(&p, s(0), &m, &no_current)).is_empty(),
            "pending, not yet active"
        );
        let w = writes(&sup.step(&p, s(2), &m, &no_current));
        assert_eq!(
            w,
            vec![(
                "inference.memory.high".into(),
                (9u64 << 30).to_string(),
                "rule mem".into()
            )]
        );
        assert!(
            writes(&sup.step(&p, s(5), &m, &no_current)).is_empty(),
            "cooldown not over"
        );
        assert_eq!(
            writes(&sup.step(&p, s(12), &m, &no_current))[0].1,
            (10u64 << 30).to_string()
        );
        assert!(
            writes(&sup.step(&p, s(22), &m, &no_current)).is_empty(),
            "clamped at the limit: nothing changes"
        );
        // The stepped value is the new baseline and stays after the rule clears.
        m.psi.insert("inference".into(), 0.0);
        assert!(writes(&sup.step(&p, s(23), &m, &no_current)).is_empty());
        let knob = Knob::parse("inference.memory.high").unwrap();
        assert_eq!(
            sup.table().effective(&knob).map(|v| v.kernel()),
            Some((10u64 << 30).to_string())
        );
    }

    #[test]
    fn first_listed_rule_wins_for_first_wins_knobs_and_largest_for_resources() {
        let p = policy(&format!(
            "{BASE}rules:\n  - name: a\n    when: system.memory.available < 1G\n    while: [\"set sysctl.vm.swappiness = 80\", \"set inference.memory.high = 9G\"]\n  - name: b\n    when: system.memory.available < 1G\n    while: [\"set sysctl.vm.swappiness = 100\", \"set inference.memory.high = 10G\"]\n"
        ));
        let mut sup = Supervisor::new(&p);
        let m = Snap {
            available: Some(1),
            ..Default::default()
        };
        let mut w = writes(&sup.step(&p, s(0), &m, &no_current));
        w.sort();
        assert_eq!(
            w,
            vec![
                (
                    "inference.memory.high".into(),
                    (10u64 << 30).to_string(),
                    "rule b".into()
                ),
                ("sysctl.vm.swappiness".into(), "80".into(), "rule a".into()),
            ]
        );
    }

    #[test]
    fn events_before_start_never_fire_and_shutdown_releases_claims() {
        let p = policy(&format!(
            "{BASE}rules:\n  - name: oom\n    when: inference.memory.events.oom_kill > 0\n    while: [\"set sysctl.vm.swappiness = 90\"]\n    hold: 1h\n"
        ));
        let mut sup = Supervisor::new(&p);
        let mut m = Snap::default();
        m.events.insert("inference".into(), 7);
        assert!(
            writes(&sup.step(&p, s(0), &m, &no_current)).is_empty(),
            "7 kills before we started"
        );
        m.events.insert("inference".into(), 8);
        assert_eq!(writes(&sup.step(&p, s(1), &m, &no_current)).len(), 1);
        let w = writes(&sup.release_all(&p, s(2)));
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].1, "30");
    }

    /// SIGTERM with a `while` rule active: its `cleared` hooks run (as a
    /// pair with the `fired` ones), `then` hooks and idle rules run none,
    /// and a second release does nothing.
    #[test]
    fn release_all_clears_active_while_rules_with_their_hooks() {
        let p = policy(&format!(
            "{BASE}  other: {{ exec: [/bin/true] }}\nrules:\n  - name: low-mem\n    when: system.memory.available < 512M\n    while: [\"set sysctl.vm.swappiness = 100\", \"hook alert\", \"hook other\"]\n    hold: 1h\n  - name: idle\n    when: system.memory.available < 1M\n    while: [\"hook alert\"]\n  - name: stepper\n    when: system.memory.available < 512M\n    then: [\"hook alert\"]\n"
        ));
        let mut sup = Supervisor::new(&p);
        let m = Snap {
            available: Some(256 << 20),
            ..Default::default()
        };
        let eff = sup.step(&p, s(0), &m, &no_current);
        let fired: Vec<(&str, &str, bool)> = eff
            .iter()
            .filter_map(|e| match e {
                Effect::Hook {
                    hook,
                    rule,
                    event: HookEvent::Fired,
                    paired,
                    ..
                } => Some((hook.as_str(), rule.as_str(), *paired)),
                _ => None,
            })
            .collect();
        assert_eq!(
            fired,
            vec![
                ("alert", "low-mem", true),
                ("other", "low-mem", true),
                ("alert", "stepper", false)
            ]
        );
        let eff = sup.release_all(&p, s(1));
        let cleared: Vec<(&str, &str, &str, bool)> = eff
            .iter()
            .filter_map(|e| match e {
                Effect::Hook {
                    hook,
                    rule,
                    event: HookEvent::Cleared,
                    value,
                    paired,
                    ..
                } => Some((hook.as_str(), rule.as_str(), value.as_str(), *paired)),
                _ => None,
            })
            .collect();
        assert_eq!(
            cleared,
            vec![
                ("alert", "low-mem", "268435456", true),
                ("other", "low-mem", "268435456", true)
            ],
            "{eff:?}"
        );
        assert_eq!(writes(&eff)[0].1, "30");
        assert!(sup.phases().iter().all(|(ph, _)| *ph == Phase::Idle));
        assert!(eff
            .iter()
            .any(|e| matches!(e, Effect::Phase { rule, phase: Phase::Idle } if rule == "low-mem")));
        // Nothing is active any more: a second release clears nothing.
        assert!(sup.release_all(&p, s(2)).is_empty());
    }

    /// A rule on an event window clears when the event leaves the window,
    /// so the daemon must wake then even if nothing else happens.
    #[test]
    fn an_event_leaving_its_window_is_a_deadline() {
        let p = policy(&format!(
            "{BASE}rules:\n  - name: oom\n    when: inference.memory.events.oom_kill > 0/5s\n    while: [\"set sysctl.vm.swappiness = 90\"]\n"
        ));
        let mut sup = Supervisor::new(&p);
        let mut m = Snap::default();
        m.events.insert("inference".into(), 0);
        assert!(writes(&sup.step(&p, s(0), &m, &no_current)).is_empty());
        assert_eq!(sup.next_deadline(), None, "no event, nothing to expire");
        m.events.insert("inference".into(), 1);
        assert_eq!(writes(&sup.step(&p, s(1), &m, &no_current))[0].1, "90");
        assert_eq!(sup.next_deadline(), Some(s(6)));
        let w = writes(&sup.step(&p, s(6), &m, &no_current));
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].1, "30");
        assert_eq!(sup.next_deadline(), None);
    }

    #[test]
    fn unavailable_metrics_are_reported_once() {
        let p = policy(&format!(
            "{BASE}rules:\n  - name: m\n    when: system.memory.available < 1G\n    then: [\"hook alert\"]\n"
        ));
        let mut sup = Supervisor::new(&p);
        let m = Snap::default();
        let count = |e: &[Effect]| {
            e.iter()
                .filter(|e| matches!(e, Effect::Unavailable { .. }))
                .count()
        };
        assert_eq!(count(&sup.step(&p, s(0), &m, &no_current)), 1);
        assert_eq!(count(&sup.step(&p, s(1), &m, &no_current)), 0);
    }

    #[test]
    fn an_unavailable_metric_is_reported_once_for_all_rules_and_names_its_file() {
        let mut text = format!("{BASE}rules:\n");
        for i in 0..50 {
            text.push_str(&format!(
                "  - name: m{i}\n    when: inference.memory.current > 1G\n    then: [\"hook alert\"]\n"
            ));
        }
        let p = policy(&text);
        let mut sup = Supervisor::new(&p);
        let m = Snap::default();
        let eff = sup.step(&p, s(0), &m, &no_current);
        let reports: Vec<_> = eff
            .iter()
            .filter_map(|e| match e {
                Effect::Unavailable { metric, source, .. } => Some((metric, source)),
                _ => None,
            })
            .collect();
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert_eq!(reports[0].0, "inference.memory.current");
        assert!(
            reports[0].1.ends_with("/inference/memory.current"),
            "{reports:?}"
        );
    }

    #[test]
    fn raise_without_baseline_reads_the_kernel_or_reports() {
        let p = policy(&format!(
            "{BASE}rules:\n  - name: r\n    when: system.memory.available < 1G\n    then: [\"raise inference.memory.low by 1G up to 4G\"]\n"
        ));
        let m = Snap {
            available: Some(1),
            ..Default::default()
        };
        let mut sup = Supervisor::new(&p);
        let eff = sup.step(&p, s(0), &m, &no_current);
        assert!(
            eff.iter().any(|e| matches!(e, Effect::ActionFailed { .. })),
            "{eff:?}"
        );
        let mut sup = Supervisor::new(&p);
        let cur = |_: &Knob| Some(KnobValue::Size(Size::Bytes(1 << 30)));
        assert_eq!(
            writes(&sup.step(&p, s(0), &m, &cur))[0].1,
            (2u64 << 30).to_string()
        );
    }

    // ---- reload (SPEC §4 "Reload") ----

    const TWO: &str = "version: 1\ngroups:\n  a:\n    memory: { high: 1G }\n  b:\n    memory: { high: 2G }\nsystem:\n  sysctl: { vm.swappiness: 30, vm.dirty_ratio: 5 }\nhooks:\n  alert: { exec: [/bin/true] }\n";

    fn low(name: &str, knob_value: &str) -> String {
        format!("  - name: {name}\n    when: system.memory.available < 512M\n    while: [\"set sysctl.vm.swappiness = {knob_value}\", \"hook alert\"]\n")
    }

    fn hooks_of(effects: &[Effect]) -> Vec<(String, HookEvent)> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Hook { rule, event, .. } => Some((rule.clone(), *event)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn reload_keeps_rule_state_by_name_across_a_reorder() {
        let old = policy(&format!(
            "{TWO}rules:\n{}{}",
            low("first", "60"),
            low("second", "90")
        ));
        let new = policy(&format!(
            "{TWO}rules:\n{}{}",
            low("second", "90"),
            low("first", "60")
        ));
        let mut sup = Supervisor::new(&old);
        let m = Snap {
            available: Some(256 << 20),
            ..Default::default()
        };
        let eff = sup.step(&old, s(1), &m, &no_current);
        // first-wins: `first` (index 0) wins the sysctl.
        assert_eq!(writes(&eff)[0].1, "60");
        let eff = sup.reload(&old, &new, s(2));
        assert!(hooks_of(&eff).is_empty(), "no rule cleared: {eff:?}");
        let phases = sup.phases_by_name(&new);
        assert_eq!(phases["first"], (Phase::Active, Some(s(1))));
        assert_eq!(phases["second"], (Phase::Active, Some(s(1))));
        // Re-keyed: `second` is now first and wins the first-wins knob.
        assert_eq!(
            writes(&eff),
            vec![(
                "sysctl.vm.swappiness".into(),
                "90".into(),
                "rule second".into()
            )]
        );
        // The still-true condition fires nothing again.
        let eff = sup.step(&new, s(3), &m, &no_current);
        assert!(
            writes(&eff).is_empty() && hooks_of(&eff).is_empty(),
            "{eff:?}"
        );
    }

    #[test]
    fn reload_releases_a_removed_rules_claim_with_its_cleared_hook() {
        let old = policy(&format!("{TWO}rules:\n{}", low("r", "100")));
        let new = policy(&format!("{TWO}rules: []\n"));
        let mut sup = Supervisor::new(&old);
        let m = Snap {
            available: Some(256 << 20),
            ..Default::default()
        };
        sup.step(&old, s(1), &m, &no_current);
        let eff = sup.reload(&old, &new, s(2));
        assert_eq!(
            writes(&eff),
            vec![(
                "sysctl.vm.swappiness".into(),
                "30".into(),
                "rule r released".into()
            )]
        );
        assert_eq!(hooks_of(&eff), vec![("r".to_string(), HookEvent::Cleared)]);
        assert!(sup.table().claims().is_empty());
    }

    #[test]
    fn reload_changing_a_threshold_keeps_the_active_rule_and_its_claim() {
        let old = policy(&format!("{TWO}rules:\n{}", low("r", "100")));
        let new = policy(&format!(
            "{TWO}rules:\n{}",
            low("r", "100").replace("512M", "600M")
        ));
        let mut sup = Supervisor::new(&old);
        let m = Snap {
            available: Some(256 << 20),
            ..Default::default()
        };
        sup.step(&old, s(1), &m, &no_current);
        let eff = sup.reload(&old, &new, s(2));
        assert!(
            writes(&eff).is_empty() && hooks_of(&eff).is_empty(),
            "{eff:?}"
        );
        assert_eq!(sup.phases_by_name(&new)["r"].0, Phase::Active);
        assert_eq!(sup.table().claims().len(), 1);
    }

    #[test]
    fn reload_writes_a_changed_baseline_once_and_leaves_unchanged_ones() {
        let old = policy(&format!("{TWO}rules: []\n"));
        let new = policy(&format!(
            "{}rules: []\n",
            TWO.replace("high: 2G", "high: 3G")
        ));
        let mut sup = Supervisor::new(&old);
        let m = Snap::default();
        assert!(writes(&sup.step(&old, s(1), &m, &no_current)).is_empty());
        let eff = sup.reload(&old, &new, s(2));
        assert_eq!(
            writes(&eff),
            vec![(
                "b.memory.high".into(),
                (3u64 << 30).to_string(),
                "baseline".into()
            )]
        );
        assert!(writes(&sup.step(&new, s(3), &m, &no_current)).is_empty());
        // The same policy again: nothing.
        assert!(writes(&sup.reload(&new, &new, s(4))).is_empty());
    }

    #[test]
    fn reload_keeps_a_then_baseline_whose_policy_value_did_not_change() {
        let rule = "  - name: up\n    when: system.memory.available < 512M\n    then: [\"set b.memory.high = 4G\"]\n";
        let old = policy(&format!("{TWO}rules:\n{rule}"));
        let new = policy(&format!(
            "{}rules:\n{rule}",
            TWO.replace("high: 1G", "high: 1500M")
        ));
        let mut sup = Supervisor::new(&old);
        let m = Snap {
            available: Some(256 << 20),
            ..Default::default()
        };
        sup.step(&old, s(1), &m, &no_current);
        let eff = sup.reload(&old, &new, s(2));
        let w = writes(&eff);
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].0, "a.memory.high");
        assert_eq!(
            sup.table()
                .baseline(&"b.memory.high".parse().unwrap())
                .map(|v| v.kernel()),
            Some((4u64 << 30).to_string())
        );
    }

    #[test]
    fn reload_releases_a_boost_on_a_removed_groups_knob_only() {
        use crate::engine::claims::Claim;
        let old = policy(&format!("{TWO}rules: []\n"));
        let new = policy("version: 1\ngroups:\n  a:\n    memory: { high: 1G }\nsystem:\n  sysctl: { vm.swappiness: 30, vm.dirty_ratio: 5 }\nhooks:\n  alert: { exec: [/bin/true] }\nrules: []\n");
        let mut sup = Supervisor::new(&old);
        let boost = |handle, knob: &str, v: &str| {
            let knob: Knob = knob.parse().unwrap();
            let value = knob.parse_value(v).unwrap();
            Claim {
                owner: Owner::Boost { handle },
                knob,
                value,
                deadline: Some(s(100)),
            }
        };
        sup.table.add_claim(boost(1, "b.memory.high", "5G"));
        sup.table.add_claim(boost(2, "a.memory.high", "5G"));
        sup.step(&old, s(1), &Snap::default(), &no_current);
        let eff = sup.reload(&old, &new, s(2));
        assert!(
            writes(&eff).iter().all(|w| w.0 != "a.memory.high"),
            "{eff:?}"
        );
        let left: Vec<String> = sup
            .table()
            .claims()
            .live()
            .map(|c| c.knob.to_string())
            .collect();
        assert_eq!(left, vec!["a.memory.high".to_string()]);
    }
}
