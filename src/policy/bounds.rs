//! A decoded policy judged against a board ([`Board`]): CPU lists within
//! the CPUs it has (and a delegated cgroup root's), cpufreq values within a
//! policy's hardware range and governors it offers, devfreq values its table
//! lists, zram compressors it offers — for the baseline, the rules' `set`,
//! `cap` and `raise`/`lower` limits alike. Each error is at the value's
//! position and names the board's range.
//!
//! A bare frequency (no unit) is read as the kernel file counts it: kHz for
//! cpufreq, Hz for devfreq. One below 10 MHz that way can only be a unit
//! left out (`min: 1200` meant as MHz), so it is an error on any board,
//! plain `check` included, with the spelling to use.

use super::diag::Diagnostics;
use super::expr::Action;
use super::model::{Group, Policy};
use super::yaml::{Node, Pos, Value};
use crate::knobs::board::Board;
use crate::knobs::{Knob, KnobValue};
use crate::units::CpuList;

/// The lowest bare cpufreq value (kHz) or devfreq value (Hz, ×1000) taken
/// without a unit: 10 MHz.
const BARE_FLOOR_KHZ: u64 = 10_000;

/// Adds an error to `diags` for every value of `p` outside `board`; `doc`
/// is the tree `p` was decoded from (for positions).
pub(crate) fn judge(doc: &Node, p: &Policy, board: &Board, diags: &mut Diagnostics) {
    let mut j = Judge { board, diags };
    if let Some(groups) = get(doc, "groups") {
        for g in &p.groups {
            j.group(groups, g, true);
        }
    }
    if let Some(list) = get(doc, "placement") {
        for (i, pl) in p.placement.iter().enumerate() {
            let Some(item) = item(list, i) else { continue };
            j.cpus(
                get(item, "cpus"),
                pl.tuning.attrs.cpus.as_ref(),
                "placement cpus",
            );
            let threads = get(item, "threads");
            for (k, t) in pl.tuning.threads.iter().enumerate() {
                let node = threads
                    .and_then(|n| item_of(n, k))
                    .and_then(|n| get(n, "cpus"));
                j.cpus(node, t.attrs.cpus.as_ref(), "threads cpus");
            }
        }
    }
    if let Some(sys) = get(doc, "system") {
        j.system(sys, p);
    }
    if let Some(rules) = get(doc, "rules") {
        for (i, r) in p.rules.iter().enumerate() {
            let Some(item) = item(rules, i) else { continue };
            for (key, actions) in [("then", &r.then), ("while", &r.while_)] {
                let list = get(item, key);
                for (k, a) in actions.iter().enumerate() {
                    let node = list.and_then(|n| item_of(n, k));
                    j.action(node, a, &r.name);
                }
            }
        }
    }
}

struct Judge<'a> {
    board: &'a Board,
    diags: &'a mut Diagnostics,
}

impl Judge<'_> {
    fn group(&mut self, map: &Node, g: &Group, top: bool) {
        let Some(node) = get(map, &g.name) else {
            return;
        };
        if let Some(cpus) = &g.cpuset.cpus {
            let pos = g
                .cpuset
                .cpus_pos
                .or_else(|| {
                    get(node, "cpuset")
                        .and_then(|c| get(c, "cpus"))
                        .map(|n| n.pos)
                })
                .unwrap_or(node.pos);
            let mut check = self.board.check_cpus(cpus);
            if top && check.is_ok() {
                check = self.board.check_root_cpus(cpus);
            }
            if let Err(why) = check {
                self.diags.error(
                    pos,
                    format!("group `{}`: cpuset.cpus `{cpus}` {why}", g.name),
                );
            }
        }
        if let Some(children) = get(node, "children") {
            for c in &g.children {
                self.group(children, c, false);
            }
        }
    }

    /// A CPU list at `node` (`what` says which).
    fn cpus(&mut self, node: Option<&Node>, cpus: Option<&CpuList>, what: &str) {
        let (Some(node), Some(cpus)) = (node, cpus) else {
            return;
        };
        if let Err(why) = self.board.check_cpus(cpus) {
            self.diags.error(node.pos, format!("{what} `{cpus}` {why}"));
        }
    }

    fn system(&mut self, sys: &Node, p: &Policy) {
        for (key, list) in [("irqs", &p.system.irqs), ("kthreads", &p.system.kthreads)] {
            let node = get(sys, key);
            for (i, r) in list.iter().enumerate() {
                let cpus = node
                    .and_then(|n| item_of(n, i))
                    .and_then(|n| get(n, "cpus"));
                self.cpus(
                    cpus,
                    r.cpus.as_ref(),
                    &format!("system.{key} `{}` cpus", r.name),
                );
            }
        }
        if let (Some(rt), Some(node)) = (&p.system.realtime, get(sys, "realtime")) {
            self.cpus(
                get(node, "housekeeping_cpus"),
                rt.housekeeping_cpus.as_ref(),
                "realtime.housekeeping_cpus",
            );
            let idle = get(node, "cpuidle_disable").and_then(|n| get(n, "cpus"));
            let cpus = rt.cpuidle_disable.as_ref().map(|c| &c.cpus);
            self.cpus(idle, cpus, "realtime.cpuidle_disable.cpus");
        }
        if let Some(Value::Map(entries)) = get(sys, "latency")
            .and_then(|n| get(n, "cpus"))
            .map(|n| &n.value)
        {
            for (k, _) in entries {
                if let Ok(cpus) = CpuList::parse(&k.name) {
                    if let Err(why) = self.board.check_cpus(&cpus) {
                        self.diags
                            .error(k.pos, format!("system.latency.cpus `{}` {why}", k.name));
                    }
                }
            }
        }
        if let Some(node) = get(sys, "cpufreq") {
            for c in &p.system.cpufreq {
                let Some(entry) = get(node, &c.policy) else {
                    continue;
                };
                let values = [
                    ("min", c.min.map(KnobValue::Frequency)),
                    ("max", c.max.map(KnobValue::Frequency)),
                    ("governor", c.governor.clone().map(KnobValue::Word)),
                ];
                for (attr, v) in values {
                    let (Some(v), Some(n)) = (v, get(entry, attr)) else {
                        continue;
                    };
                    let bare = matches!(n.value, Value::Int(_)).then(|| n.pos);
                    self.knob_value(&format!("cpufreq.{}.{attr}", c.policy), &v, n.pos, bare);
                }
            }
        }
        if let Some(node) = get(sys, "devfreq") {
            for d in &p.system.devfreq {
                let Some(entry) = get(node, &d.device) else {
                    continue;
                };
                let values = [
                    ("min", d.min.map(KnobValue::Hz)),
                    ("max", d.max.map(KnobValue::Hz)),
                    ("governor", d.governor.clone().map(KnobValue::Word)),
                ];
                for (attr, v) in values {
                    let (Some(v), Some(n)) = (v, get(entry, attr)) else {
                        continue;
                    };
                    let bare = matches!(n.value, Value::Int(_)).then(|| n.pos);
                    self.knob_value(&format!("devfreq.{}.{attr}", d.device), &v, n.pos, bare);
                }
            }
        }
        if let Some(node) = get(sys, "zram") {
            for z in &p.system.zram {
                let (Some(a), Some(n)) = (
                    &z.algorithm,
                    get(node, &z.device).and_then(|e| get(e, "algorithm")),
                ) else {
                    continue;
                };
                if let Err(why) = self.board.check_zram_algorithm(&z.device, a) {
                    self.diags
                        .error(n.pos, format!("zram.{}.algorithm: {why}", z.device));
                }
            }
        }
    }

    /// A rule action's value (`set`, `cap`) or limit (`raise`, `lower`):
    /// the last word of its text.
    fn action(&mut self, node: Option<&Node>, a: &Action, rule: &str) {
        let (knob, value) = match a {
            Action::Set { knob, value } | Action::Cap { knob, value } => (knob, value),
            Action::Raise { knob, limit, .. } | Action::Lower { knob, limit, .. } => (knob, limit),
            _ => return,
        };
        let Some(node) = node else { return };
        let text = node.scalar_text().unwrap_or_default();
        let trimmed = text.trim_end();
        let last = trimmed.rsplit(char::is_whitespace).next().unwrap_or("");
        let offset = trimmed.chars().count().saturating_sub(last.chars().count());
        let pos = node.pos_at(offset);
        let bare = (!last.is_empty() && last.bytes().all(|b| b.is_ascii_digit())).then_some(pos);
        let before = self.diags.items.len();
        self.knob_value(&knob.to_string(), value, pos, bare);
        if self.diags.items.len() > before {
            if let Some(d) = self.diags.items.last_mut() {
                d.message = format!("rule `{rule}`: {}", d.message);
            }
        }
    }

    /// `value` for the knob named `name`, written at `pos`; `bare` is its
    /// position when it was written without a unit.
    fn knob_value(&mut self, name: &str, value: &KnobValue, pos: Pos, bare: Option<Pos>) {
        let Ok(knob) = Knob::parse(name) else { return };
        if let Some(at) = bare {
            if let Some(why) = bare_frequency(value) {
                self.diags.error(at, format!("{name}: {why}"));
                return;
            }
        }
        if let Err(why) = self.board.check_value(&knob, value) {
            self.diags.error(pos, format!("{name}: {why}"));
        }
    }
}

/// Why a frequency written without a unit cannot be what was meant.
/// The value's type says the unit: cpufreq's are kHz, devfreq's Hz.
fn bare_frequency(value: &KnobValue) -> Option<String> {
    match value {
        KnobValue::Frequency(f) if f.khz() < BARE_FLOOR_KHZ => {
            let n = f.khz();
            Some(format!(
                "`{n}` without a unit is {n} kHz (cpufreq files count in kHz), below any CPU's range: write the unit, e.g. `{n}MHz`"
            ))
        }
        KnobValue::Hz(hz) if *hz < BARE_FLOOR_KHZ * 1000 => Some(format!(
            "`{hz}` without a unit is {hz} Hz (devfreq files count in Hz): write the unit, e.g. `{hz}MHz`"
        )),
        _ => None,
    }
}

/// The value of mapping key `key`.
fn get<'n>(node: &'n Node, key: &str) -> Option<&'n Node> {
    match &node.value {
        Value::Map(entries) => entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v),
        _ => None,
    }
}

/// Item `i` of a sequence.
fn item_of(node: &Node, i: usize) -> Option<&Node> {
    match &node.value {
        Value::Seq(items) => items.get(i),
        _ => None,
    }
}

fn item(node: &Node, i: usize) -> Option<&Node> {
    item_of(node, i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::board::CpufreqBounds;

    fn board() -> Board {
        let mut b = Board {
            possible_cpus: Some(CpuList::parse("0-7").unwrap()),
            ..Board::default()
        };
        b.cpufreq.insert(
            "policy4".into(),
            CpufreqBounds {
                min_khz: Some(691_200),
                max_khz: Some(2_400_000),
                governors: None,
                cpus: None,
            },
        );
        b
    }

    fn judge_text(text: &str, b: &Board) -> Vec<String> {
        match crate::policy::load_bytes_on("p.yaml", text.as_bytes(), |_| b.clone()) {
            Ok(_) => Vec::new(),
            Err(d) => d
                .items
                .iter()
                .map(|i| format!("{}:{}: {}", i.pos.line, i.pos.col, i.message))
                .collect(),
        }
    }

    #[test]
    fn cpus_beyond_the_board_are_errors_at_their_place() {
        let p = "version: 1\ngroups:\n  inference:\n    cpuset: { cpus: \"4-9\" }\n  sub:\n    children:\n      leaf:\n        cpuset: { cpus: \"12\" }\nplacement:\n  - match: { comm: a }\n    group: inference\n    cpus: \"4,9\"\nsystem:\n  realtime: { housekeeping_cpus: \"0-10\" }\n  latency: { cpus: { \"8\": 0us } }\n";
        let e = judge_text(p, &board());
        assert_eq!(e.len(), 5, "{e:#?}");
        assert!(
            e[0].starts_with("4:")
                && e[0].contains("group `inference`: cpuset.cpus `4-9` names CPUs 8-9"),
            "{e:#?}"
        );
        assert!(e.iter().any(|m| m.contains("group `leaf`")), "{e:#?}");
        assert!(
            e.iter()
                .any(|m| m.starts_with("12:") && m.contains("placement cpus `4,9` names CPU 9")),
            "{e:#?}"
        );
        assert!(e.iter().any(|m| m.contains("housekeeping_cpus")), "{e:#?}");
        assert!(
            e.iter()
                .any(|m| m.starts_with("15:") && m.contains("latency.cpus `8`")),
            "{e:#?}"
        );
        // On a board nothing is known of, the same policy is fine.
        assert!(judge_text(p, &Board::unknown()).is_empty());
    }

    #[test]
    fn frequencies_outside_the_policys_range_and_bare_ones_are_errors() {
        let p = "version: 1\ngroups:\n  g: {}\nsystem:\n  cpufreq:\n    policy4: { min: 1.2GHz, max: 12GHz }\nrules:\n  - name: r\n    when: running(x)\n    while:\n      - set cpufreq.policy4.min = 3GHz\n      - cap cpufreq.policy4.max at 1GHz\n";
        let e = judge_text(p, &board());
        assert_eq!(e.len(), 2, "{e:#?}");
        assert!(
            e[0].starts_with("6:34:")
                && e[0].contains("policy4.max: 12GHz is above policy4's cpuinfo_max_freq 2.4GHz"),
            "{e:#?}"
        );
        assert!(
            e[1].starts_with("11:35:")
                && e[1].contains("rule `r`: cpufreq.policy4.min: 3GHz is above"),
            "{e:#?}"
        );
        // A bare number is kHz: `1200` meant as MHz is an error anywhere.
        let bare = "version: 1\nsystem:\n  cpufreq:\n    policy4: { min: 1200 }\n";
        for b in [board(), Board::unknown()] {
            let e = judge_text(bare, &b);
            assert_eq!(e.len(), 1, "{e:#?}");
            assert!(
                e[0].starts_with("4:21:") && e[0].contains("write the unit, e.g. `1200MHz`"),
                "{e:#?}"
            );
        }
        // kHz as sysfs writes it stays valid.
        let khz = "version: 1\nsystem:\n  cpufreq:\n    policy4: { min: 1200000 }\n";
        assert!(judge_text(khz, &board()).is_empty());
        let rule = "version: 1\nrules:\n  - name: r\n    when: running(x)\n    while: [\"set devfreq.gpu.min = 300\"]\n";
        let e = judge_text(rule, &Board::unknown());
        assert!(e.len() == 1 && e[0].contains("300 Hz"), "{e:#?}");
    }
}
