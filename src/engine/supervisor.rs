//! One evaluation step of all rules, as a pure
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
use crate::knobs::{Knob, KnobValue, ZramAttr};
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
    pub(crate) fn as_str(self) -> &'static str {
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
    /// `freeze G` / `thaw G`: write `cgroup.freeze`.
    Freeze {
        rule: String,
        group: String,
        freeze: bool,
        /// What fired the rule (`metric value > threshold`).
        reason: String,
    },
    /// `kill in G …`: choose a victim and kill it.
    Kill {
        rule: String,
        spec: crate::policy::expr::KillSpec,
        reason: String,
    },
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

impl FiredWith {
    /// `metric value (threshold threshold)`, for a last resort's event.
    fn reason(&self) -> String {
        match (self.metric.is_empty(), self.threshold.is_empty()) {
            (true, _) => "the rule fired".into(),
            (false, true) => format!("{} = {}", self.metric, self.value),
            (false, false) => format!(
                "{} = {} (threshold {})",
                self.metric, self.value, self.threshold
            ),
        }
    }
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
pub(crate) fn metric_source(
    m: &crate::policy::expr::Metric,
    cgroup_root: &std::path::Path,
) -> String {
    use crate::policy::expr::{Metric, Target};
    let group = |g: &str, file: &str| cgroup_root.join(g).join(file).display().to_string();
    match m {
        Metric::PsiAvg {
            target, resource, ..
        }
        | Metric::PsiStall {
            target, resource, ..
        } => match &target.value {
            Target::Host => format!("/proc/pressure/{resource}"),
            Target::Group(g) => group(g, &format!("{resource}.pressure")),
        },
        Metric::MemoryCurrent { group: g } => group(&g.value, "memory.current"),
        Metric::SwapCurrent { group: g } => group(&g.value, "memory.swap.current"),
        Metric::MemoryEvent { group: g, .. } => group(&g.value, "memory.events"),
        Metric::PidsCurrent { group: g } => group(&g.value, "pids.current"),
        Metric::Populated { group: g } => group(&g.value, "cgroup.events"),
        Metric::MemoryAvailable => "/proc/meminfo (MemAvailable)".to_string(),
        Metric::Kpi { name, .. } => format!("KPI {name} (no sample in the window)"),
        Metric::ThermalTemp { zone } => format!(
            "/sys/class/thermal/thermal_zone*/temp (the zone whose type is `{}`)",
            zone.value
        ),
        Metric::ThermalTrip { zone, trip } => format!(
            "/sys/class/thermal/thermal_zone*/trip_point_{trip}_temp (the zone whose type is `{}`)",
            zone.value
        ),
        Metric::CoolingState { device } => format!(
            "/sys/class/thermal/cooling_device*/cur_state (the device whose type is `{}`)",
            device.value
        ),
        Metric::CpufreqFreq { policy, limit } => format!(
            "/sys/devices/system/cpu/cpufreq/{}/{}",
            policy.value,
            if *limit {
                "scaling_max_freq (and dcvsh_freq_limit)"
            } else {
                "scaling_cur_freq"
            }
        ),
        Metric::Mem(m) => crate::policy::expr::mem::source(m),
    }
}

/// The knobs a policy sets as baseline, in the closed knob set's terms.
pub(crate) fn policy_baselines(p: &Policy) -> Vec<(Knob, KnobValue)> {
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
        out.extend(c.knobs());
    }
    for d in &p.system.devfreq {
        out.extend(d.knobs());
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
        out.extend(l.knobs());
    }
    out
}

/// Every knob a rule's actions name.
pub(crate) fn rule_knobs(p: &Policy) -> Vec<Knob> {
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
    pub(crate) fn seed(&mut self, knob: &Knob, baseline: KnobValue, live: Option<KnobValue>) {
        if self.table.baseline(knob).is_none() {
            self.table.seed(knob, baseline.clone());
            self.table.mark_written(knob, live.unwrap_or(baseline));
        }
    }

    /// Records that `value` was written to `knob` outside a step (a repair
    /// rewrote a recreated group's baseline).
    pub(crate) fn mark_written(&mut self, knob: &Knob, value: KnobValue) {
        self.table.mark_written(knob, value);
    }

    /// The baselines of `group`'s knobs, in write order.
    pub(crate) fn group_baselines(&self, group: &str) -> Vec<(Knob, KnobValue)> {
        self.table
            .knobs()
            .filter(|k| k.group() == Some(group))
            .filter_map(|k| Some((k.clone(), self.table.baseline(k)?.clone())))
            .collect()
    }

    pub(crate) fn table(&self) -> &KnobTable {
        &self.table
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
                    Subject::Throttled(p) => (
                        format!("throttled({p})"),
                        format!("/sys/devices/system/cpu/cpufreq/{p}/scaling_max_freq"),
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
            let transitions =
                rt.state
                    .update_ending(now, eval.value, eval.ends_by_silence, &rt.timing);
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
                        self.table.add_caps(owner, while_caps(rule), None);
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

    /// A policy reload: carries the engine from `old` to
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
    pub(crate) fn reload(&mut self, old: &Policy, new: &Policy, now: Time) -> Vec<Effect> {
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
            let old_caps = old.rules.get(old_index).map(while_caps).unwrap_or_default();
            let new_caps = while_caps(rule);
            let moved = old_index != index || old_sets != new_sets || old_caps != new_caps;
            if (had || rt.state.phase().is_active()) && moved {
                self.table.release(&old_owner);
                if rt.state.phase().is_active() {
                    self.table.set_claims(&new_owner, new_sets, None);
                    self.table.add_caps(&new_owner, new_caps, None);
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
    pub(crate) fn phases_by_name(&self, policy: &Policy) -> HashMap<String, (Phase, Option<Time>)> {
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
    pub(crate) fn release_all(&mut self, policy: &Policy, now: Time) -> Vec<Effect> {
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
    pub(crate) fn next_deadline(&self) -> Option<Time> {
        let rules = self
            .rules
            .iter()
            .filter_map(|r| r.state.next_deadline(&r.timing));
        rules
            .chain(self.table.claims().next_expiry())
            .chain(self.evaluator.next_expiry(self.last_step))
            .min()
    }

    /// What rule `index` last fired with (`metric = value (threshold T)`),
    /// for `cgwarden replay`'s "why".
    #[cfg(feature = "report")]
    pub(crate) fn fired_reason(&self, index: usize) -> Option<String> {
        self.rules.get(index).map(|r| r.fired.reason())
    }

    /// Phase and since-when of each rule, in policy order.
    pub(crate) fn phases(&self) -> Vec<(Phase, Option<Time>)> {
        self.rules
            .iter()
            .map(|r| (r.state.phase(), r.state.since()))
            .collect()
    }

    /// A boost's claims, replacing any the handle held, until `deadline`
    /// (none: until released). In the merge boosts rank
    /// before rules on first-wins knobs, the latest boost first.
    pub(crate) fn boost(
        &mut self,
        handle: u64,
        claims: Vec<(Knob, KnobValue)>,
        deadline: Option<Time>,
    ) {
        self.table
            .set_claims(&Owner::Boost { handle }, claims, deadline);
    }

    /// A boost's caps (`boost --cap`), added to the claims
    /// [`Supervisor::boost`] set for the same handle.
    pub(crate) fn boost_caps(
        &mut self,
        handle: u64,
        caps: Vec<(Knob, KnobValue)>,
        deadline: Option<Time>,
    ) {
        self.table
            .add_caps(&Owner::Boost { handle }, caps, deadline);
    }

    /// Ends a boost; false when it held no claim (expired already).
    pub(crate) fn release_boost(&mut self, handle: u64) -> bool {
        !self.table.release(&Owner::Boost { handle }).is_empty()
    }

    /// The writes claims changed outside a step (a boost granted, extended
    /// or released) make due, and claims expired by `now`.
    pub(crate) fn flush(&mut self, now: Time) -> Vec<Effect> {
        self.table
            .pending_writes(now)
            .into_iter()
            .map(Effect::Write)
            .collect()
    }
}

/// A rule's `while` caps (`cap KNOB at VALUE`).
fn while_caps(rule: &crate::policy::model::Rule) -> Vec<(Knob, KnobValue)> {
    rule.while_
        .iter()
        .filter_map(|a| match a {
            Action::Cap { knob, value } => Some((knob.clone(), value.clone())),
            _ => None,
        })
        .collect()
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
            Action::Freeze(g) | Action::Thaw(g) => effects.push(Effect::Freeze {
                rule: rule.name.clone(),
                group: g.clone(),
                freeze: matches!(a, Action::Freeze(_)),
                reason: fired.reason(),
            }),
            Action::Kill(spec) => effects.push(Effect::Kill {
                rule: rule.name.clone(),
                spec: spec.clone(),
                reason: fired.reason(),
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
mod tests;
