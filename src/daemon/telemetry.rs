//! What the daemon reads besides the rules' knobs, and what it publishes:
//! the sampler (what the rules read), the KPIs applications report, the
//! metrics and recorder ([`super::observed`]), throttle episodes, the
//! drift guard's state and the cpufreq limits the metrics show.

use super::control::ControlState;
use super::drift::DriftState;
use super::observed::Observe;
use super::sample::Sampler;
use super::throttle::ThrottleTracker;
use crate::control::wire;
use crate::control::wire::EventKind;
use crate::engine::knobs::KnobTable;
use crate::engine::rule_state::Phase;
use crate::observe::kpi::Store;
use crate::observe::state::Book;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// The daemon's inputs and outputs beyond the knobs.
pub(super) struct Telemetry {
    pub(super) sampler: Sampler,
    /// The KPIs applications report ([`super::kpisock`]).
    pub(super) kpi: Arc<Store>,
    /// Metrics and recorder, when the policy asks for them.
    pub(super) observe: Option<Observe>,
    /// Throttle episodes per cpufreq policy.
    pub(super) throttle: ThrottleTracker,
    /// The drift guard's and `verify`'s drifts.
    pub(super) drift: DriftState,
    /// Each tracked cpufreq policy's limit (kHz) and throttled().
    pub(super) cpufreq_limits: BTreeMap<String, (u64, bool)>,
}

impl Telemetry {
    pub(super) fn new(sampler: Sampler) -> Telemetry {
        Telemetry {
            sampler,
            kpi: Default::default(),
            observe: None,
            throttle: ThrottleTracker::default(),
            drift: Default::default(),
            cpufreq_limits: BTreeMap::new(),
        }
    }

    /// The KPI statistics the rules read, now.
    pub(super) fn kpi_values(
        &self,
    ) -> HashMap<(String, crate::policy::expr::kpi::Stat, Duration), f64> {
        // No clock read at every evaluation when no condition reads a KPI.
        if self.sampler.needs().kpi.is_empty() {
            return Default::default();
        }
        let now = Instant::now();
        self.sampler
            .needs()
            .kpi
            .iter()
            .filter_map(|(name, stat, w)| {
                let s = self.kpi.window(name, *w, now)?;
                Some(((name.clone(), *stat, *w), s.stat(*stat)))
            })
            .collect()
    }

    /// The KPI store (rules, metrics, recorder).
    pub(super) fn kpi_store(&self) -> Arc<Store> {
        self.kpi.clone()
    }

    /// The ceiling the engine asks of each tracked cpufreq policy
    /// (`cpufreq.P.max`'s effective value), for `throttled()`.
    pub(super) fn set_asked_ceilings(&mut self, table: &KnobTable) {
        use crate::knobs::{CpufreqAttr, Knob, KnobValue};
        if self.sampler.needs().cpufreq.is_empty() {
            return;
        }
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
                match table.effective(&k) {
                    Some(KnobValue::Frequency(f)) => Some((p.clone(), f.khz())),
                    _ => None,
                }
            })
            .collect();
        self.sampler.set_asked(asked);
    }

    /// Counts the throttle episodes that start now (see [`super::throttle`]):
    /// each is logged and sent as a `throttle` event.
    pub(super) fn throttle_episodes(
        &mut self,
        throttled: &BTreeMap<String, bool>,
        control: &ControlState,
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
            control.publish(|| wire::Event {
                time: crate::show::rfc3339_millis(SystemTime::now()),
                kind: EventKind::Throttle.into(),
                knob: Some(format!("cpufreq.{policy}")),
                message: Some(format!("{policy} throttled")),
                ..Default::default()
            });
            self.observed_changed();
        }
    }

    /// The cpufreq limits for the metrics: republished only when they change.
    pub(super) fn set_cpufreq_limits(&mut self, limits: BTreeMap<String, (u64, bool)>) {
        if limits != self.cpufreq_limits {
            self.cpufreq_limits = limits;
            self.observed_changed();
        }
    }

    pub(super) fn observe_book(&mut self) -> Option<&mut Book> {
        self.observe.as_mut().map(|o| &mut o.book)
    }

    /// Something the view shows changed (a write queued, claims moved).
    pub(super) fn observed_changed(&mut self) {
        if let Some(b) = self.observe_book() {
            b.dirty = true;
        }
    }

    /// A rule changed phase.
    pub(super) fn observed_phase(&mut self, rule: &str, phase: Phase) {
        if let Some(b) = self.observe_book() {
            if phase == Phase::Active {
                b.rule_fired(rule);
            }
            b.rule_active(rule, matches!(phase, Phase::Active | Phase::Clearing));
        }
    }

    /// What the policy asks to serve and cannot be (status).
    pub(super) fn unavailable(&self) -> Vec<String> {
        self.observe
            .as_ref()
            .map(|o| o.unavailable.clone())
            .unwrap_or_default()
    }
}
