//! Carrying out what the engine decided: writes handed to the lanes, hook
//! runs, and the other effects of one evaluation.

use super::hooks::HookContext;
use super::{actuator, resort, Daemon};
use crate::engine::supervisor::Effect;
use std::time::{Instant, SystemTime};

impl Daemon {
    pub(super) fn carry_out(&mut self, mut effects: Vec<Effect>) {
        if !effects.is_empty() {
            self.telemetry.observed_changed();
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
                        product: self.loaded.policy.product.clone(),
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
                    &self.loaded.policy,
                    &rule,
                    &group,
                    freeze,
                    &reason,
                    self.opts.dry_run,
                    self.groups.exec.as_ref().map(|x| &*x.shared.last_resort),
                    &self.control.events,
                ),
                Effect::Kill { rule, spec, reason } => {
                    match resort::Kill::new(
                        &self.opts.root,
                        &self.loaded.policy,
                        &rule,
                        spec,
                        reason,
                        self.groups
                            .exec
                            .as_ref()
                            .map(|x| x.shared.last_resort.clone()),
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
                    self.telemetry.observed_phase(&rule, phase);
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
