//! The policy: YAML model, value units, the rule language and validation.
//! Pure: nothing here touches the system, so `check` runs anywhere.

pub mod decode;
pub(crate) mod diag;
pub mod expr;
pub mod knob;
pub mod model;
pub(crate) mod units;
pub(crate) mod yaml;

pub use diag::Diagnostics;
pub use model::Policy;

use std::path::Path;

/// Reads, parses and validates a policy file; every problem is in the error.
pub fn load(path: &Path) -> Result<Policy, Diagnostics> {
    let name = path.display().to_string();
    match std::fs::read(path) {
        Ok(bytes) => load_bytes(&name, &bytes),
        Err(e) => {
            let mut d = Diagnostics::new(name);
            d.error(yaml::Pos::new(1, 1), format!("cannot read the policy: {e}"));
            Err(d)
        }
    }
}

/// Parses and validates policy text; `name` is used in diagnostics.
pub fn load_bytes(name: &str, bytes: &[u8]) -> Result<Policy, Diagnostics> {
    let mut diags = Diagnostics::new(name);
    let doc = match yaml::parse(bytes) {
        Ok(doc) => doc,
        Err(e) => {
            diags.error(e.pos, e.message);
            return Err(diags);
        }
    };
    match decode::decode(&doc, &mut diags) {
        Some(p) if diags.is_empty() => Ok(p),
        _ => {
            if diags.is_empty() {
                diags.error(yaml::Pos::new(1, 1), "the policy could not be read");
            }
            Err(diags.sorted())
        }
    }
}

/// True when placement `p` grants a real-time policy (fifo, rr, deadline)
/// on a match any local user can fake: neither `exe:` nor `user:`, so only
/// `comm:`/`cmdline:` (set by `prctl(PR_SET_NAME)` or `exec -a`) decide.
/// `check` warns on it; the daemon grants such a policy only to root's
/// processes (SPEC §4 "Trust", README "Decisions").
pub fn rt_by_name(p: &model::Placement) -> bool {
    use model::SchedPolicy::{Deadline, Fifo, Rr};
    p.sched
        .as_ref()
        .is_some_and(|s| matches!(s.policy, Fifo | Rr | Deadline))
        && p.matcher.exe.is_none()
        && p.matcher.user.is_none()
}

/// Warnings on a valid policy (printed by `check` as
/// `FILE:LINE:COL: warning: MESSAGE`; they never fail it), in file order.
pub fn warnings(p: &Policy) -> Vec<diag::Diagnostic> {
    let mut out = Vec::new();
    for pl in &p.placement {
        if rt_by_name(pl) {
            let policy = pl.sched.as_ref().map_or("", |s| s.policy.as_str());
            out.push(diag::Diagnostic {
                pos: pl.pos,
                message: format!(
                    "placement into `{}` grants sched `{policy}` on a match by name only \
                     (comm/cmdline can be set by any user); add `exe:` or `user:` to the match \
                     (cgwarden grants it to root's processes only)",
                    pl.group
                ),
            });
        }
    }
    out.sort_by_key(|d| d.pos);
    out
}

/// One-line summary printed by `check` for a valid policy.
pub fn summary(p: &Policy) -> String {
    format!(
        "ok: {} groups, {} rules, {} placements, {} hooks",
        p.all_groups().len(),
        p.rules.len(),
        p.placement.len(),
        p.hooks.len()
    )
}

/// Controllers the rules need in group `group`: `memory` to read its
/// `memory.*` metrics, `pids` for `pids.current`, and the controller of every
/// group knob a rule sets, raises or lowers there.
pub fn rule_controllers(p: &Policy, group: &str) -> Vec<&'static str> {
    use expr::{ExprKind, Metric};
    let mut out = Vec::new();
    for r in &p.rules {
        let mut stack = vec![&r.when];
        while let Some(e) = stack.pop() {
            match &e.kind {
                ExprKind::Or(a, b) | ExprKind::And(a, b) => {
                    stack.push(a);
                    stack.push(b);
                }
                ExprKind::Not(a) => stack.push(a),
                ExprKind::Compare(c) => {
                    let ctrl = match &c.metric {
                        Metric::MemoryCurrent { group: g }
                        | Metric::SwapCurrent { group: g }
                        | Metric::MemoryEvent { group: g, .. } => {
                            (g.value == group).then_some("memory")
                        }
                        Metric::PidsCurrent { group: g } => (g.value == group).then_some("pids"),
                        _ => None,
                    };
                    out.extend(ctrl);
                }
                ExprKind::Running(_) | ExprKind::Exists(_) => {}
            }
        }
        for a in r.then.iter().chain(&r.while_) {
            if let Some(knob::Knob::Group { group: g, knob }) = a.knob() {
                if g == group {
                    out.push(knob.controller());
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod warning_tests {
    #[test]
    fn rt_on_a_name_only_match_warns_and_exe_or_user_silences_it() {
        let text = "version: 1\nproduct: t\ngroups:\n  rt: {}\nplacement:\n  - match: { comm: motion_control }\n    group: rt\n    sched: { policy: fifo, priority: 99 }\n  - match: { cmdline: \"*dl*\" }\n    group: rt\n    sched: { policy: rr, priority: 10 }\n  - match: { comm: a, exe: /opt/a }\n    group: rt\n    sched: { policy: fifo, priority: 9 }\n  - match: { comm: b, user: root }\n    group: rt\n    sched: { policy: fifo, priority: 9 }\n  - match: { comm: c }\n    group: rt\n    sched: { policy: other, nice: -5 }\n";
        let p = super::load_bytes("p.yaml", text.as_bytes()).expect("valid");
        let w = super::warnings(&p);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(w[0].pos.line, 6);
        assert!(w[0].message.contains("fifo") && w[0].message.contains("exe:"));
        assert_eq!(w[1].pos.line, 9);
        assert!(w[1].message.contains("`rr`"));
    }
}
