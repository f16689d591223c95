//! What the daemon's event loop publishes for the observe threads
//! (metrics, flight recorder), and how, so that nothing they do can delay
//! the loop:
//!
//! - [`Book`] lives in the daemon. The loop bumps its counters where the
//!   things happen (a rule fires, a write finishes, a boost ends, a reload)
//!   and, at the top of each turn, when something changed, builds a small
//!   [`EngineView`] and hands it over with `watch::Sender::send_replace`
//!   (no waiting, no allocation when nothing changed). The observe threads
//!   read the latest `Arc<EngineView>`; a slow reader holds an old `Arc`,
//!   never a lock the loop needs.
//! - The exec watcher's and hook runner's counters are atomics already
//!   (`Arc`s the view carries); they are read at scrape time.
//! - Actions and rule transitions reach the recorder through the control
//!   socket's event broadcast, which never blocks its sender.
//!
//! Labels come only from the policy in force (its groups, rules, knobs):
//! counters of a rule or knob a reload removed are dropped with it, so
//! memory stays bounded however long the daemon runs.

use crate::stats::ExecStats;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::watch;

/// One rule as the metrics show it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RuleView {
    pub(crate) name: String,
    /// Active or clearing (its `while` claims are held).
    pub(crate) active: bool,
    /// Times it became active since the daemon started.
    pub(crate) fired: u64,
    /// Unix time it became active (kept while it is clearing); none when
    /// it is not active. Filled by [`Book::publish`].
    pub(crate) active_since: Option<f64>,
    /// The policy's `max_active`, in seconds.
    pub(crate) max_active: Option<f64>,
}

/// One managed knob.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct KnobView {
    pub(crate) name: String,
    /// The effective value as a number; None for `max` and values that are
    /// not a number (a cpu list, a scheduler policy).
    pub(crate) value: Option<f64>,
    /// Writes the kernel took / refused.
    pub(crate) ok: u64,
    pub(crate) failed: u64,
}

/// Hook runs of one hook, read at scrape time.
#[derive(Clone, Debug)]
pub(crate) struct HookView {
    pub(crate) name: String,
    pub(crate) counters: Arc<crate::stats::HookCounters>,
}

/// The engine's state for the observe threads (see the module docs).
#[derive(Clone, Debug, Default)]
pub(crate) struct EngineView {
    pub(crate) product: String,
    pub(crate) policy_hash: String,
    /// (policy name, cgroup path relative to the cgroup root), parents first.
    pub(crate) groups: Vec<(String, String)>,
    pub(crate) rules: Vec<RuleView>,
    pub(crate) knobs: Vec<KnobView>,
    /// Boosts by result: granted, refused, expired, released, owner_gone.
    pub(crate) boosts: BTreeMap<&'static str, u64>,
    /// Live claims by owner kind (rule, boost).
    pub(crate) claims_live: BTreeMap<&'static str, u64>,
    pub(crate) reload_ok: bool,
    /// Unix time of the last successful (re)load.
    pub(crate) reload_success: f64,
    pub(crate) exec: Option<ExecStats>,
    pub(crate) hooks: Vec<HookView>,
    /// Throttle episodes per cpufreq policy.
    pub(crate) throttle_episodes: BTreeMap<String, u64>,
    /// Drifts seen per knob (`settings.drift`).
    pub(crate) drifts: BTreeMap<String, u64>,
    /// Per cpufreq policy, its limit (kHz) and `throttled()`.
    pub(crate) cpufreq_limits: BTreeMap<String, (u64, bool)>,
    /// Who this device is (`cgwarden_device_info`), read at start.
    pub(crate) device: Arc<crate::kernel::identity::Device>,
}

/// The daemon's side: counters and the watch sender.
#[derive(Debug)]
pub(crate) struct Book {
    tx: watch::Sender<Arc<EngineView>>,
    fired: BTreeMap<String, u64>,
    /// When each active rule became active.
    active_since: BTreeMap<String, SystemTime>,
    writes: BTreeMap<String, (u64, u64)>,
    boosts: BTreeMap<&'static str, u64>,
    reload_ok: bool,
    reload_success: SystemTime,
    /// Something changed since the last publish.
    pub(crate) dirty: bool,
}

/// The boost results counted (a closed set: bounded labels).
pub(crate) const BOOST_RESULTS: [&str; 5] =
    ["granted", "refused", "expired", "released", "owner_gone"];

impl Book {
    pub(crate) fn new() -> (Book, watch::Receiver<Arc<EngineView>>) {
        let (tx, rx) = watch::channel(Arc::new(EngineView::default()));
        let book = Book {
            tx,
            fired: BTreeMap::new(),
            active_since: BTreeMap::new(),
            writes: BTreeMap::new(),
            boosts: BOOST_RESULTS.iter().map(|r| (*r, 0)).collect(),
            reload_ok: true,
            reload_success: SystemTime::now(),
            dirty: true,
        };
        (book, rx)
    }

    /// A rule became active.
    pub(crate) fn rule_fired(&mut self, rule: &str) {
        *self.fired.entry(rule.to_string()).or_default() += 1;
        self.dirty = true;
    }

    /// A rule changed phase: `active` (active or clearing) keeps or starts
    /// its active-since time; anything else ends it.
    pub(crate) fn rule_active(&mut self, rule: &str, active: bool) {
        if active {
            if !self.active_since.contains_key(rule) {
                self.active_since
                    .insert(rule.to_string(), SystemTime::now());
            }
        } else {
            self.active_since.remove(rule);
        }
        self.dirty = true;
    }

    /// A write of `knob` finished (`ok`: the kernel took it).
    pub(crate) fn write_done(&mut self, knob: &str, ok: bool) {
        let e = self.writes.entry(knob.to_string()).or_default();
        if ok {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
        self.dirty = true;
    }

    /// A boost ended or was answered; `result` is one of [`BOOST_RESULTS`]
    /// (anything else is ignored: the label set stays closed).
    pub(crate) fn boost(&mut self, result: &str) {
        if let Some(c) = BOOST_RESULTS
            .iter()
            .find(|r| **r == result)
            .and_then(|r| self.boosts.get_mut(r))
        {
            *c += 1;
            self.dirty = true;
        }
    }

    /// A reload was tried.
    pub(crate) fn reload(&mut self, ok: bool) {
        self.reload_ok = ok;
        if ok {
            self.reload_success = SystemTime::now();
        }
        self.dirty = true;
    }

    /// Builds the view from the engine's current facts and the counters,
    /// forgetting counters of rules and knobs the policy no longer has.
    pub(crate) fn publish(&mut self, mut view: EngineView) {
        self.fired
            .retain(|name, _| view.rules.iter().any(|r| &r.name == name));
        self.writes
            .retain(|name, _| view.knobs.iter().any(|k| &k.name == name));
        self.active_since
            .retain(|name, _| view.rules.iter().any(|r| &r.name == name && r.active));
        for r in &mut view.rules {
            r.fired = self.fired.get(&r.name).copied().unwrap_or(0);
            r.active_since = self.active_since.get(&r.name).map(|t| unix_seconds(*t));
        }
        for k in &mut view.knobs {
            let (ok, failed) = self.writes.get(&k.name).copied().unwrap_or((0, 0));
            k.ok = ok;
            k.failed = failed;
        }
        view.boosts = self.boosts.clone();
        view.reload_ok = self.reload_ok;
        view.reload_success = unix_seconds(self.reload_success);
        self.tx.send_replace(Arc::new(view));
        self.dirty = false;
    }
}

/// Seconds since the Unix epoch (0 for a clock before it).
pub(crate) fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A knob value as a number: plain numbers, the first number of a pair
/// (`cpu.max`'s quota); `max` and the rest are none.
pub(crate) fn knob_number(rendered: &str) -> Option<f64> {
    let first = rendered.split_whitespace().next()?;
    first.parse::<f64>().ok().filter(|v| v.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(name: &str) -> RuleView {
        RuleView {
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn counters_follow_the_policy_and_publish_only_what_it_names() {
        let (mut b, rx) = Book::new();
        b.rule_fired("a");
        b.rule_fired("a");
        b.rule_fired("gone");
        b.write_done("app.memory.high", true);
        b.write_done("app.memory.high", false);
        b.boost("granted");
        b.boost("not-a-result");
        b.publish(EngineView {
            rules: vec![rule("a"), rule("b")],
            knobs: vec![KnobView {
                name: "app.memory.high".into(),
                value: Some(1.0),
                ok: 0,
                failed: 0,
            }],
            ..Default::default()
        });
        assert!(!b.dirty);
        let v = rx.borrow().clone();
        assert_eq!(v.rules[0].fired, 2);
        assert_eq!(v.rules[1].fired, 0);
        assert_eq!((v.knobs[0].ok, v.knobs[0].failed), (1, 1));
        assert_eq!(v.boosts.get("granted"), Some(&1));
        assert_eq!(v.boosts.len(), BOOST_RESULTS.len());
        // The removed rule's counter is gone for good.
        assert!(!b.fired.contains_key("gone"));
    }

    #[test]
    fn active_since_is_kept_while_clearing_and_ends_when_idle() {
        let (mut b, rx) = Book::new();
        let active = |name: &str| RuleView {
            name: name.into(),
            active: true,
            ..Default::default()
        };
        b.rule_active("a", true);
        b.publish(EngineView {
            rules: vec![active("a"), rule("b")],
            ..Default::default()
        });
        let first = rx.borrow().rules[0].active_since.expect("active since");
        assert!(first > 1.7e9, "{first}");
        assert_eq!(rx.borrow().rules[1].active_since, None);
        // Clearing then active again: still the first activation's time.
        std::thread::sleep(std::time::Duration::from_millis(20));
        b.rule_active("a", true);
        b.publish(EngineView {
            rules: vec![active("a")],
            ..Default::default()
        });
        assert_eq!(rx.borrow().rules[0].active_since, Some(first));
        b.rule_active("a", false);
        b.publish(EngineView {
            rules: vec![rule("a")],
            ..Default::default()
        });
        assert_eq!(rx.borrow().rules[0].active_since, None);
    }

    #[test]
    fn knob_numbers() {
        assert_eq!(knob_number("1048576"), Some(1048576.0));
        assert_eq!(knob_number("max"), None);
        assert_eq!(knob_number("inf"), None);
        assert_eq!(knob_number("50000 100000"), Some(50000.0));
        assert_eq!(knob_number("0-3"), None);
        assert_eq!(knob_number(""), None);
        assert_eq!(knob_number("NaN"), None);
    }
}
