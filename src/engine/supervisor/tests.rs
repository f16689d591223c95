//! Tests of [`super`] (`supervisor`).

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
        "{BASE}rules:\n  - name: low-mem\n    when: host.memory.available < 512M\n    while: [\"set sysctl.vm.swappiness = 100\"]\n"
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
        "{BASE}rules:\n  - name: low-mem\n    when: host.memory.available < 512M\n    while: [\"set sysctl.vm.swappiness = 100\", \"hook alert\"]\n    hold: 2s\n"
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
        "{BASE}rules:\n  - name: a\n    when: host.memory.available < 1G\n    while: [\"set sysctl.vm.swappiness = 80\", \"set inference.memory.high = 9G\"]\n  - name: b\n    when: host.memory.available < 1G\n    while: [\"set sysctl.vm.swappiness = 100\", \"set inference.memory.high = 10G\"]\n"
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
        "{BASE}  other: {{ exec: [/bin/true] }}\nrules:\n  - name: low-mem\n    when: host.memory.available < 512M\n    while: [\"set sysctl.vm.swappiness = 100\", \"hook alert\", \"hook other\"]\n    hold: 1h\n  - name: idle\n    when: host.memory.available < 1M\n    while: [\"hook alert\"]\n  - name: stepper\n    when: host.memory.available < 512M\n    then: [\"hook alert\"]\n"
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
        "{BASE}rules:\n  - name: m\n    when: host.memory.available < 1G\n    then: [\"hook alert\"]\n"
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
        "{BASE}rules:\n  - name: r\n    when: host.memory.available < 1G\n    then: [\"raise inference.memory.low by 1G up to 4G\"]\n"
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

// ---- reload ----

const TWO: &str = "version: 1\ngroups:\n  a:\n    memory: { high: 1G }\n  b:\n    memory: { high: 2G }\nsystem:\n  sysctl: { vm.swappiness: 30, vm.dirty_ratio: 5 }\nhooks:\n  alert: { exec: [/bin/true] }\n";

fn low(name: &str, knob_value: &str) -> String {
    format!("  - name: {name}\n    when: host.memory.available < 512M\n    while: [\"set sysctl.vm.swappiness = {knob_value}\", \"hook alert\"]\n")
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
    let rule = "  - name: up\n    when: host.memory.available < 512M\n    then: [\"set b.memory.high = 4G\"]\n";
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
            cap: false,
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
