//! Carrying out what the engine decided: writes handed to the lanes (with the
//! asked cpufreq ceilings and throttle episodes they imply), hook runs, and
//! the other effects of one evaluation.

use super::hooks::HookContext;
use super::{actuator, resort, Daemon};
use crate::engine::supervisor::Effect;
use std::time::{Instant, SystemTime};

impl Daemon {
    /// The ceiling the engine asks of each tracked cpufreq policy
    /// (`cpufreq.P.max`'s effective value), for `throttled()`.
    pub(super) fn set_asked_ceilings(&mut self) {
        use crate::knobs::{CpufreqAttr, Knob, KnobValue};
        if self.sampler.needs().cpufreq.is_empty() {
            return;
        }
        let t = self.supervisor.table();
        let asked = self
            .sampler
            .needs()
            .cpufreq
            .iter()
            .filter_map(|p| {
                let k = Knob::Cpufreq {
                    policy: p.clone(),
                    attr: CpufreqAttr::Max,
                };
                match t.effective(&k) {
                    Some(KnobValue::Frequency(f)) => Some((p.clone(), f.khz())),
                    _ => None,
                }
            })
            .collect();
        self.sampler.set_asked(asked);
    }

    /// Counts, logs and publishes the throttle episodes starting now.
    pub(super) fn throttle_episodes(
        &mut self,
        throttled: &std::collections::BTreeMap<String, bool>,
    ) {
        if throttled.is_empty() {
            return;
        }
        let known = self.throttle.episodes.len();
        let rising = self.throttle.observe(throttled);
        if self.throttle.episodes.len() != known {
            // A policy's counter appears (at 0) in the metrics.
            self.observed_changed();
        }
        for policy in rising {
            tracing::warn!(policy = %policy, "throttle episode: cpufreq {policy} is held below the ceiling asked for (thermal or QoS clipping, or a cooling device is active)");
            self.control.publish(|| crate::control::wire::Event {
                time: crate::show::rfc3339_millis(SystemTime::now()),
                kind: "throttle".into(),
                knob: Some(format!("cpufreq.{policy}")),
                message: Some(format!("{policy} throttled")),
                ..Default::default()
            });
            self.observed_changed();
        }
    }

    pub(super) fn carry_out(&mut self, mut effects: Vec<Effect>) {
        if !effects.is_empty() {
            self.observed_changed();
        }
        actuator::order_writes(&mut effects);
        for e in effects {
            match e {
                Effect::Write(w) => {
                    self.control.note_write(&w);
                    self.actuator.apply(&w);
                }
                Effect::Hook {
                    hook,
                    rule,
                    event,
                    metric,
                    value,
                    threshold,
                    group,
                    paired,
                } => {
                    let ctx = HookContext {
                        rule,
                        event,
                        metric,
                        value,
                        threshold,
                        group,
                        product: self.policy.product.clone(),
                        time: SystemTime::now(),
                        paired,
                    };
                    if self.opts.dry_run {
                        tracing::info!(hook = %hook, rule = %ctx.rule, "would run hook (dry run)");
                    } else {
                        let r = self.hooks.fire(&hook, &ctx, Instant::now());
                        tracing::debug!(hook = %hook, "hook: {r:?}");
                    }
                }
                Effect::CompactMemory { rule } => {
                    self.actuator.compact_memory(&rule);
                }
                Effect::Freeze {
                    rule,
                    group,
                    freeze,
                    reason,
                } => resort::freeze(
                    &self.opts.root,
                    &self.policy,
                    &rule,
                    &group,
                    freeze,
                    &reason,
                    self.opts.dry_run,
                    self.exec.as_ref().map(|x| &*x.shared.last_resort),
                    &self.control.events,
                ),
                Effect::Kill { rule, spec, reason } => {
                    match resort::Kill::new(
                        &self.opts.root,
                        &self.policy,
                        &rule,
                        spec,
                        reason,
                        self.exec.as_ref().map(|x| x.shared.last_resort.clone()),
                        self.control.events.clone(),
                        self.opts.dry_run,
                    ) {
                        Some(k) => k.spawn(),
                        None => {
                            tracing::error!(rule = %rule, "kill: its group is not in the policy")
                        }
                    }
                }
                Effect::Phase { rule, phase } => {
                    // Logged as the event's record (daemon/eventlog.rs).
                    self.control.note_phase(&rule, &phase);
                    self.observed_phase(&rule, phase);
                }
                Effect::ActionFailed {
                    rule,
                    action,
                    reason,
                } => {
                    tracing::error!(rule = %rule, action = %action, "{reason}")
                }
                Effect::Unavailable {
                    rule,
                    metric,
                    source,
                    reason,
                } => {
                    tracing::warn!(rule = %rule, metric = %metric, file = %source, "metric unavailable: {metric} ({source}): {reason}")
                }
            }
        }
    }
}
